/** Chunk checksums in bulk, against the native CRC32C as the oracle. */
import { crc32c } from "@node-rs/crc32";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { CHUNK_BYTES, checksumsMatch, chunkChecksums, combineChecksums, firstBadChunk } from "../../common/checksum.js";

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
