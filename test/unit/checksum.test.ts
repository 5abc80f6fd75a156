/** Chunk checksums in bulk, against the native CRC32C as the oracle. */
import { crc32c } from "@node-rs/crc32";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import {
  CHUNK_BYTES,
  checksumMode,
  checksumsMatch,
  chunkChecksums,
  chunkChecksumsBy,
  combineChecksums,
  firstBadChunk,
  firstBadChunkBy,
  foldedChecksumsMatch,
} from "../../common/checksum.js";

/** One native call per chunk: the way the checksums were computed before, and an independent oracle. */
function nativeChunks(data: Buffer, chunk = CHUNK_BYTES): number[] {
  const out: number[] = [];
  for (let at = 0; at < data.length; at += chunk)
    out.push(crc32c(data.subarray(at, Math.min(at + chunk, data.length))) >>> 0);
  return out;
}

const packets = fc.uint8Array({ minLength: 0, maxLength: 5 * CHUNK_BYTES + 300 }).map((a) => Buffer.from(a));

describe("chunk checksums", () => {
  it("are the CRC32C of each 512-byte chunk, the last possibly shorter", () => {
    fc.assert(
      fc.property(packets, (data) => {
        expect(chunkChecksums(data)).toEqual(nativeChunks(data));
      }),
    );
    const big = Buffer.alloc(64 * 1024 + 17, 0xa5);
    expect(chunkChecksums(big)).toEqual(nativeChunks(big));
    expect(chunkChecksums(big, 4096)).toEqual(nativeChunks(big, 4096));
  });

  it("are right for a view that starts inside a larger buffer, and match the standard check value", () => {
    // CRC-32C's published check value: the CRC of the nine ASCII digits "123456789" is 0xE3069283.
    const digits = Buffer.from("123456789");
    expect(chunkChecksums(digits)).toEqual([0xe3069283]);
    // The same digits at odd offsets of other memory: only the view's own bytes count.
    const host = Buffer.alloc(4 * CHUNK_BYTES + 40, 0x33);
    for (const at of [1, 7, CHUNK_BYTES + 3]) {
      digits.copy(host, at);
      expect(chunkChecksums(host.subarray(at, at + digits.length))).toEqual([0xe3069283]);
      expect(chunkChecksums(new Uint8Array(host.buffer, host.byteOffset + at, digits.length))).toEqual([0xe3069283]);
    }
    const inner = host.subarray(5, 5 + 3 * CHUNK_BYTES + 9);
    expect(chunkChecksums(inner)).toEqual(nativeChunks(Buffer.from(inner)));
  });

  it("come from Harvest's native routine, built by npm ci (CI requires it; elsewhere a machine may lack a compiler)", (ctx) => {
    if (checksumMode() === "per-chunk" && !process.env["CI"]) {
      console.warn("checksum test: the native routine is not built here (scripts/build-native.mjs); skipped");
      ctx.skip();
    }
    expect(checksumMode()).not.toBe("per-chunk");
  });

  it("are the same by the CPU's instruction, the native table walk and per-chunk calls, for any chunk size", (ctx) => {
    if (checksumMode() === "per-chunk") ctx.skip();
    const sizes = fc.integer({ min: 1, max: 1100 });
    const offsets = fc.integer({ min: 0, max: 15 });
    fc.assert(
      fc.property(packets, sizes, offsets, (data, chunk, skew) => {
        // At every alignment: the data starts `skew` bytes into other memory.
        const host = Buffer.alloc(data.length + skew, 0x77);
        data.copy(host, skew);
        const view = host.subarray(skew);
        const oracle = nativeChunks(data, chunk);
        expect(chunkChecksumsBy("native", view, chunk)).toEqual(oracle);
        expect(chunkChecksumsBy("native-table", view, chunk)).toEqual(oracle);
        expect(chunkChecksumsBy("per-chunk", view, chunk)).toEqual(oracle);
      }),
    );
    // A whole 1 MiB packet (the client's) and an empty one.
    const big = Buffer.alloc(1024 * 1024);
    for (let i = 0; i < big.length; i++) big[i] = (i * 2654435761) >>> 24;
    expect(chunkChecksums(big)).toEqual(nativeChunks(big));
    expect(chunkChecksums(Buffer.alloc(0))).toEqual([]);
  });

  it("refuse bad arguments at the native routine with an exception, not a crash", async (ctx) => {
    if (checksumMode() === "per-chunk") ctx.skip();
    const { createRequire } = await import("node:module");
    const { nativeAddonPath } = await import("../../common/paths.js");
    const routine = createRequire(import.meta.url)(nativeAddonPath("harvest_checksums")) as {
      chunks: (...args: unknown[]) => number;
    };
    const data = Buffer.alloc(1000, 1);
    expect(() => routine.chunks("not bytes", 512, new Uint32Array(2))).toThrow(TypeError);
    expect(() => routine.chunks(new Float64Array(4), 512, new Uint32Array(2))).toThrow(TypeError);
    expect(() => routine.chunks(data, 0, new Uint32Array(2))).toThrow(RangeError);
    expect(() => routine.chunks(data, 1.5, new Uint32Array(2))).toThrow(RangeError);
    expect(() => routine.chunks(data, Number.NaN, new Uint32Array(2))).toThrow(RangeError);
    expect(() => routine.chunks(data, "512", new Uint32Array(2))).toThrow(TypeError);
    expect(() => routine.chunks(data, 512, new Uint32Array(1))).toThrow(RangeError);
    expect(() => routine.chunks(data, 512, [0, 0])).toThrow(TypeError);
    expect(() => routine.chunks(data, 512)).toThrow(TypeError);
    const verify = (routine as unknown as { verify: (...args: unknown[]) => number }).verify;
    const sums = Uint32Array.from(nativeChunks(data));
    expect(verify([data.subarray(0, 300), data.subarray(300)], 512, sums, 2)).toBe(-1);
    expect(() => verify([data, "not bytes"], 512, sums, 2)).toThrow(TypeError);
    expect(() => verify(42, 512, sums, 2)).toThrow(TypeError);
    expect(() => verify(data, 0, sums, 2)).toThrow(RangeError);
    expect(() => verify(data, 512, [1, 2], 2)).toThrow(TypeError);
    expect(() => verify(data, 512, sums, 3)).toThrow(RangeError);
    expect(() => verify(data, 512, sums, -1)).toThrow(RangeError);
    expect(() => verify(new Array(1025).fill(data.subarray(0, 1)), 512, sums, 2)).toThrow(RangeError);
    const out = new Uint32Array(2);
    expect(routine.chunks(data, 512, out)).toBe(2);
    expect([...out]).toEqual(nativeChunks(data));
  });

  it("are checked the same by the native routine, its table walk, the fold and per chunk, on pieces cut anywhere", (ctx) => {
    if (checksumMode() === "per-chunk") ctx.skip();
    const chunkSizes = fc.constantFrom(CHUNK_BYTES, 1, 7, 64, 100, 4096);
    fc.assert(
      fc.property(
        packets,
        chunkSizes,
        fc.array(fc.nat(), { maxLength: 8 }),
        fc.nat(),
        fc.constantFrom("good", "flip", "missing", "extra", "wrong"),
        (data, chunk, cuts, where, damage) => {
          const at = [...new Set(cuts.map((c) => c % (data.length + 1)))].sort((a, b) => a - b);
          const sums = nativeChunks(data, chunk);
          let bytes = data;
          let expected = -1;
          if (damage === "flip" && data.length > 0) {
            bytes = Buffer.from(data);
            bytes[where % data.length] = bytes[where % data.length]! ^ 0x10;
            expected = Math.floor((where % data.length) / chunk);
          } else if (damage === "missing" && sums.length > 0) {
            sums.pop();
            expected = sums.length;
          } else if (damage === "extra") {
            expected = sums.length;
            sums.push(0);
          } else if (damage === "wrong" && sums.length > 0) {
            const i = where % sums.length;
            sums[i] = (sums[i]! ^ 0x80000000) >>> 0;
            expected = i;
          }
          const pieces = [...at, bytes.length].map((end, i) => bytes.subarray(i === 0 ? 0 : at[i - 1]!, end));
          for (const given of [bytes, pieces]) {
            expect(firstBadChunkBy("native", given, sums, chunk)).toBe(expected);
            expect(firstBadChunkBy("native-table", given, sums, chunk)).toBe(expected);
            expect(firstBadChunkBy("per-chunk", given, sums, chunk)).toBe(expected);
            expect(firstBadChunk(given, sums, chunk)).toBe(expected);
            expect(checksumsMatch(given, sums, chunk)).toBe(expected === -1);
            expect(foldedChecksumsMatch(given, sums, chunk)).toBe(expected === -1);
          }
        },
      ),
      { numRuns: 300 },
    );
  });

  it("check a packet of many pieces (more than one native call takes) the same way", () => {
    const data = Buffer.alloc(CHUNK_BYTES * 8 + 3);
    for (let i = 0; i < data.length; i++) data[i] = (i * 31) & 0xff;
    // 2,000 pieces of one or two bytes: past what the native routine takes at once, the fold path checks them.
    const pieces: Buffer[] = [];
    for (let at = 0; at < data.length; at += 2) pieces.push(data.subarray(at, Math.min(at + 2, data.length)));
    expect(pieces.length).toBeGreaterThan(1024);
    const sums = nativeChunks(data);
    expect(checksumsMatch(pieces, sums)).toBe(true);
    const bad = Buffer.from(data);
    bad[CHUNK_BYTES * 5 + 9] = bad[CHUNK_BYTES * 5 + 9]! ^ 1;
    const badPieces: Buffer[] = [];
    for (let at = 0; at < bad.length; at += 2) badPieces.push(bad.subarray(at, Math.min(at + 2, bad.length)));
    expect(checksumsMatch(badPieces, sums)).toBe(false);
    expect(firstBadChunk(badPieces, sums)).toBe(5);
  });

  it("combine to the CRC of the concatenation", () => {
    fc.assert(
      fc.property(packets, packets, (a, b) => {
        const whole = crc32c(Buffer.concat([a, b])) >>> 0;
        expect(combineChecksums(crc32c(a) >>> 0, crc32c(b) >>> 0, b.length)).toBe(whole);
      }),
    );
  });

  it("match in bulk exactly when every chunk matches, and the bad chunk is named", () => {
    fc.assert(
      fc.property(packets, fc.nat(), fc.integer({ min: 1, max: 255 }), (data, where, flip) => {
        const sums = nativeChunks(data);
        expect(checksumsMatch(data, sums)).toBe(true);
        expect(firstBadChunk(data, sums)).toBe(-1);
        if (data.length === 0) return;
        const at = where % data.length;
        const bad = Buffer.from(data);
        bad[at] = bad[at]! ^ flip;
        expect(checksumsMatch(bad, sums)).toBe(false);
        expect(firstBadChunk(bad, sums)).toBe(Math.floor(at / CHUNK_BYTES));
        // A wrong checksum, a missing one and an extra one are refused too.
        const wrongSum = [...sums];
        wrongSum[sums.length - 1] = (wrongSum[sums.length - 1]! ^ flip) >>> 0;
        expect(checksumsMatch(data, wrongSum)).toBe(false);
        expect(checksumsMatch(data, sums.slice(1))).toBe(false);
        expect(checksumsMatch(data, [...sums, 0])).toBe(false);
      }),
    );
  });

  it("match the same when the data comes as pieces cut anywhere (a packet as the socket's chunks hold it)", () => {
    fc.assert(
      fc.property(packets, fc.array(fc.nat(), { maxLength: 6 }), fc.nat(), (data, cuts, where) => {
        const sums = nativeChunks(data);
        const at = [...new Set(cuts.map((c) => c % (data.length + 1)))].sort((a, b) => a - b);
        const cutUp = (b: Buffer): Buffer[] =>
          [...at, b.length].map((end, i) => b.subarray(i === 0 ? 0 : at[i - 1]!, end));
        expect(checksumsMatch(cutUp(data), sums)).toBe(true);
        if (data.length === 0) return;
        const bad = Buffer.from(data);
        bad[where % data.length] = bad[where % data.length]! ^ 0x5a;
        expect(checksumsMatch(cutUp(bad), sums)).toBe(false);
      }),
    );
  });
});
