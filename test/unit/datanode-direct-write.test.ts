/**
 * Direct writes of replica data (datanode/direct-write.ts) on real files: every replica reads back byte-identical
 * whatever its packets' sizes, aligned runs go past the page cache, the rest through it, many writers share the
 * staging slabs, and a file system that refuses O_DIRECT (ramfs) gets buffered writes and a reason.
 */
import { spawnSync } from "node:child_process";
import { randomBytes } from "node:crypto";
import { existsSync, mkdtempSync, readFileSync, rmSync, statfsSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import fc from "fast-check";
import { afterEach, describe, expect, it } from "vitest";
import { BlockStore } from "../../datanode/block-store.js";
import { chunkChecksums } from "../../common/checksum.js";
import type { BlockKey } from "../../datanode/replica-files.js";
import { POOL_SLABS } from "../../datanode/direct-write.js";
import { resolveDataNodeOptions } from "../../datanode/options.js";
import { thrown } from "../error-code.js";

const KiB = 1024;
const TMPFS_MAGIC = 0x01021994;

/** Writes `data` as packets of the given sizes (the last takes the rest), finalizes, returns the bytes read back. */
async function roundTrip(store: BlockStore, block: BlockKey, data: Buffer, packets: number[]): Promise<Buffer> {
  const w = await store.createRbw(block);
  let at = 0;
  for (const size of packets) {
    if (at >= data.length) break;
    const piece = data.subarray(at, Math.min(data.length, at + size));
    await w.write(at, piece, chunkChecksums(piece));
    at += piece.length;
  }
  if (at < data.length) {
    const rest = data.subarray(at);
    await w.write(at, rest, chunkChecksums(rest));
  }
  await w.finalize(data.length);
  const parts: Buffer[] = [];
  for await (const p of store.read(block, 0, 0)) parts.push(p.data);
  return Buffer.concat(parts);
}

describe("direct writes of replicas", () => {
  const dirs: string[] = [];
  const fresh = (parent = tmpdir()): string => {
    const d = mkdtempSync(join(parent, "harvest-dn-direct-"));
    dirs.push(d);
    return d;
  };
  afterEach(() => {
    for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
  });

  it("writes aligned packets past the page cache and a short last packet through it, byte-identical", async (ctx) => {
    const dir = fresh();
    if (statfsSync(dir).type === TMPFS_MAGIC) ctx.skip(); // tmpfs refuses O_DIRECT: the next test covers it
    const store = await BlockStore.open({ dataDir: dir, directWrites: true });
    const data = randomBytes(3 * 1024 * KiB + 1000);
    const back = await roundTrip(store, { blockId: 1, genStamp: 1 }, data, Array(12).fill(256 * KiB));
    expect(back.equals(data)).toBe(true);
    expect(store.directWritesState).toBe("on");
    expect(store.direct!.bytesWritten).toBe(3 * 1024 * KiB);
    expect(store.direct!.freeSlabs).toBe(POOL_SLABS);
    // The replica file itself, as a short-circuit reader sees it.
    const file = join(dir, "current", "subdir1", "blk_1");
    expect(existsSync(file) && readFileSync(file).equals(data)).toBe(true);
  });

  it("gives packets of any chunk-multiple size, aligned or not, back byte-identical", async () => {
    const dir = fresh();
    const store = await BlockStore.open({ dataDir: dir, directWrites: true });
    let id = 0;
    await fc.assert(
      fc.asyncProperty(
        fc.array(fc.integer({ min: 1, max: 2 * 2048 }), { minLength: 1, maxLength: 12 }),
        fc.integer({ min: 0, max: 511 }),
        async (chunksPerPacket, tail) => {
          const packets = chunksPerPacket.map((c) => c * 512);
          const data = randomBytes(packets.reduce((a, b) => a + b, 0) + tail);
          const back = await roundTrip(store, { blockId: ++id, genStamp: 1 }, data, packets);
          expect(back.equals(data)).toBe(true);
          expect(store.direct!.freeSlabs).toBe(POOL_SLABS);
        },
      ),
      { numRuns: 25 },
    );
  });

  it("shares its slabs among more replicas at once than it has slabs for", async () => {
    const dir = fresh();
    const store = await BlockStore.open({ dataDir: dir, directWrites: true });
    const blobs = Array.from({ length: POOL_SLABS + 4 }, () => randomBytes(2 * 1024 * KiB + 4 * KiB));
    const backs = await Promise.all(
      blobs.map((b, i) => roundTrip(store, { blockId: i + 1, genStamp: 1 }, b, Array(8).fill(256 * KiB + 4 * KiB))),
    );
    for (const [i, b] of backs.entries()) expect(b.equals(blobs[i]!), `replica ${i + 1}`).toBe(true);
    expect(store.direct!.freeSlabs).toBe(POOL_SLABS);
  });

  it("falls back to the page cache, with a reason, where the file system refuses O_DIRECT (ramfs)", async (ctx) => {
    // ramfs has no direct I/O at all (tmpfs has had it since Linux 6.6); mounting one needs root, as CI runs.
    const mnt = fresh();
    if (process.getuid?.() !== 0 || spawnSync("mount", ["-t", "ramfs", "none", mnt]).status !== 0) {
      ctx.skip("needs root to mount a ramfs");
      return;
    }
    try {
      const dir = join(mnt, "dn");
      const reasons: string[] = [];
      const store = await BlockStore.open({
        dataDir: dir,
        capacityBytes: 64 * 1024 * KiB,
        directWrites: true,
        listener: { directWritesOff: (r) => reasons.push(r) },
      });
      const data = randomBytes(1024 * KiB + 512);
      const back = await roundTrip(store, { blockId: 1, genStamp: 1 }, data, Array(4).fill(256 * KiB));
      expect(back.equals(data)).toBe(true);
      expect(store.directWritesState).toMatch(/^stopped: cannot open with O_DIRECT/);
      expect(reasons).toHaveLength(1);
      const again = randomBytes(300 * KiB);
      expect((await roundTrip(store, { blockId: 2, genStamp: 1 }, again, [256 * KiB])).equals(again)).toBe(true);
      expect(reasons).toHaveLength(1);
      expect(store.direct!.bytesWritten).toBe(0);
    } finally {
      spawnSync("umount", [mnt]);
    }
  });

  it("is a datanode's default, and its option takes only true or false", () => {
    const base = { datanodeId: "s1", namenodeAddress: "m:1", dataDir: "/d" };
    expect(resolveDataNodeOptions(base).directWrites).toBe(true);
    expect(resolveDataNodeOptions({ ...base, directWrites: false }).directWrites).toBe(false);
    const err = thrown(() => resolveDataNodeOptions({ ...base, directWrites: "yes" as never }));
    expect(err.code).toBe("CONFIG_INVALID");
    expect(err.message).toContain("directWrites");
  });

  it("is off in a block store unless asked for, as stock HDFS writes", async () => {
    const store = await BlockStore.open({ dataDir: fresh() });
    expect(store.directWritesState).toBe("off");
    const data = randomBytes(512 * KiB);
    expect((await roundTrip(store, { blockId: 1, genStamp: 1 }, data, [256 * KiB])).equals(data)).toBe(true);
  });
});
