/**
 * The dfs bench's byte check: a get counts as identical only when every byte, and no more, matches the source (a file,
 * or the bench's repeating source in memory).
 */
import { randomBytes } from "node:crypto";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Readable } from "node:stream";
import fc from "fast-check";
import { afterAll, describe, expect, it } from "vitest";
import { RepeatingSource, sameAs } from "../../bench/dfs-content.js";

const dir = mkdtempSync(join(tmpdir(), "harvest-same-as-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** The file's bytes cut into pieces at `cuts` (as a get's stream delivers them). */
function pieces(data: Buffer, cuts: number[]): Readable {
  const at = [...new Set(cuts.map((c) => c % (data.length + 1)))].sort((a, b) => a - b);
  const out = [...at, data.length].map((end, i) => data.subarray(i === 0 ? 0 : at[i - 1]!, end));
  return Readable.from(out.filter((p) => p.length > 0));
}

/**
 * The check against `source`, whose bytes are `data`, accepts them however they are cut, and refuses a changed, a
 * missing or an extra byte.
 */
async function checksEveryByte(data: Buffer, source: string | RepeatingSource): Promise<void> {
  await fc.assert(
    fc.asyncProperty(fc.array(fc.nat(), { maxLength: 40 }), fc.nat(), async (cuts, where) => {
      expect(await sameAs(pieces(data, cuts), source)).toBe(true);
      const changed = Buffer.from(data);
      const at = where % data.length;
      changed[at] = changed[at]! ^ 0x01;
      expect(await sameAs(pieces(changed, cuts), source)).toBe(false);
      expect(await sameAs(pieces(data.subarray(0, data.length - 1), cuts), source)).toBe(false);
      expect(await sameAs(pieces(Buffer.concat([data, Buffer.from([0])]), cuts), source)).toBe(false);
    }),
    { numRuns: 15 },
  );
}

describe("bench dfs byte check", () => {
  // Larger than two of the checker's 4 MiB windows, cut anywhere.
  const data = randomBytes(9 * 1024 * 1024 + 777);
  const source = join(dir, "source.bin");
  writeFileSync(source, data);

  it("accepts the same bytes however they are cut, and refuses a changed, missing or extra byte", async () => {
    await checksEveryByte(data, source);
  });
});

describe("bench dfs source", () => {
  // A short pattern of odd length, so that a file of a few dozen KiB repeats it many times.
  const source = new RepeatingSource(100 * 1024 + 17, randomBytes(8 * 1024 + 3));
  const file = join(dir, "repeating.bin");
  source.writeTo(file);
  const bytes = readFileSync(file);

  it("writes the pattern repeated to the file's length, and checks a get against it without the file", async () => {
    expect(bytes.length).toBe(source.length);
    for (let at = 0; at < bytes.length; at += source.pattern.length) {
      const end = Math.min(bytes.length, at + source.pattern.length);
      expect(bytes.subarray(at, end).equals(source.pattern.subarray(0, end - at))).toBe(true);
    }
    await checksEveryByte(bytes, source);
  });

  it("rejects when the expected bytes cannot be had: a source that fails, a file that is not there", async () => {
    class Failing extends RepeatingSource {
      override expectedAt(at: number): Buffer {
        if (at >= 4096) throw new Error("EIO: the source went away");
        return super.expectedAt(at);
      }
    }
    await expect(sameAs(pieces(bytes, [1000, 5000]), new Failing(source.length, source.pattern))).rejects.toThrow(
      "EIO",
    );
    await expect(sameAs(pieces(bytes, []), join(dir, "missing.bin"))).rejects.toThrow("ENOENT");
  });

  it("holds no two 512-byte chunks alike: a chunk yielded in another chunk's place fails the check", async () => {
    const chunks = Math.floor(bytes.length / 512);
    await fc.assert(
      fc.asyncProperty(fc.nat(), fc.nat(), async (a, b) => {
        const [from, to] = [(a % chunks) * 512, (b % chunks) * 512];
        fc.pre(from !== to);
        const moved = Buffer.from(bytes);
        bytes.copy(moved, to, from, from + 512);
        expect(await sameAs(pieces(moved, []), source)).toBe(false);
        expect(await sameAs(pieces(moved, []), file)).toBe(false);
      }),
      { numRuns: 50 },
    );
  });
});
