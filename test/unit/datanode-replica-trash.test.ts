/** Paced deletion of replicas (datanode/replica-trash.ts) on real files, alone and inside the block store. */
import { randomBytes } from "node:crypto";
import { existsSync, mkdtempSync, readdirSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { codeOf } from "../error-code.js";
import { BlockStore } from "../../datanode/block-store.js";
import type { BlockStoreOptions } from "../../datanode/block-store.js";
import { chunkChecksums } from "../../common/checksum.js";
import { SUBDIR_COUNT } from "../../datanode/replica-files.js";
import type { BlockKey } from "../../datanode/replica-files.js";
import { resolveDataNodeOptions } from "../../datanode/options.js";
import { ReplicaTrash } from "../../datanode/replica-trash.js";

const MiB = 1024 * 1024;

/** A clock that moves only when the trash sleeps: every wait it asks for, and the trash's files at that moment. */
function fakeTime(trashDir: () => string): {
  now: () => number;
  sleep: (ms: number) => Promise<void>;
  waits: number[];
  sizesAtWaits: number[][];
} {
  let t = 0;
  const waits: number[] = [];
  const sizesAtWaits: number[][] = [];
  return {
    now: () => t,
    sleep: async (ms: number) => {
      waits.push(ms);
      sizesAtWaits.push(
        readdirSync(trashDir())
          .sort()
          .map((n) => statSync(join(trashDir(), n)).size),
      );
      t += ms;
      await new Promise((r) => setImmediate(r));
    },
    waits,
    sizesAtWaits,
  };
}

async function writeReplica(store: BlockStore, block: BlockKey, data: Buffer): Promise<void> {
  const w = await store.createRbw(block);
  for (let at = 0; at < data.length; at += 64 * 1024) {
    const piece = data.subarray(at, Math.min(data.length, at + 64 * 1024));
    await w.write(at, piece, chunkChecksums(piece));
  }
  await w.finalize(data.length);
}

async function readAll(store: BlockStore, block: BlockKey): Promise<Buffer> {
  const parts: Buffer[] = [];
  for await (const p of store.read(block)) parts.push(p.data);
  return Buffer.concat(parts);
}

describe("replica trash", () => {
  let dir: string;

  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), "harvest-trash-"));
  });

  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  it("frees a file from its end a chunk at a time, no faster than the rate, then unlinks it", async () => {
    const trashDir = join(dir, "trash");
    const time = fakeTime(() => trashDir);
    const trash = await ReplicaTrash.open({
      dir: trashDir,
      bytesPerSecond: 8 * MiB,
      chunkBytes: 4 * MiB,
      now: time.now,
      sleep: time.sleep,
    });
    const file = join(dir, "blk_1");
    writeFileSync(file, randomBytes(10 * MiB));
    await trash.take(file);
    expect(existsSync(file)).toBe(false);
    await trash.drained();
    // 10 MiB in cuts of 4, 4 and 2 MiB: after each cut the trash waits until the rate allows the bytes freed so far.
    expect(time.sizesAtWaits).toEqual([[6 * MiB], [2 * MiB], [0]]);
    expect(time.waits.reduce((a, b) => a + b, 0)).toBeCloseTo((10 / 8) * 1000, 6);
    expect(readdirSync(trashDir)).toEqual([]);
    expect(trash.pendingBytes).toBe(0);
    expect(trash.freedBytes).toBe(10 * MiB);
  });

  it("frees nothing while paused and everything once it is not", async () => {
    const trashDir = join(dir, "trash");
    let paused = true;
    const trash = await ReplicaTrash.open({
      dir: trashDir,
      bytesPerSecond: 1024 * MiB,
      chunkBytes: MiB,
      paused: () => paused,
      sleep: () => new Promise((r) => setTimeout(r, 5)),
    });
    for (const name of ["a", "b"]) {
      writeFileSync(join(dir, name), randomBytes(3 * MiB));
      await trash.take(join(dir, name));
    }
    await new Promise((r) => setTimeout(r, 100));
    expect(readdirSync(trashDir).map((n) => statSync(join(trashDir, n)).size)).toEqual([3 * MiB, 3 * MiB]);
    expect(trash.freedBytes).toBe(0);
    expect(trash.pendingBytes).toBe(6 * MiB);
    paused = false;
    await trash.drained();
    expect(readdirSync(trashDir)).toEqual([]);
    expect(trash.pendingBytes).toBe(0);
  });

  it("leaves what it has not freed when closed, and a later open frees it, oldest first", async () => {
    const trashDir = join(dir, "trash");
    const first = await ReplicaTrash.open({ dir: trashDir, bytesPerSecond: MiB, chunkBytes: MiB, paused: () => true });
    for (const [name, size] of [
      ["x", 2 * MiB],
      ["y", MiB],
    ] as const) {
      writeFileSync(join(dir, name), randomBytes(size));
      await first.take(join(dir, name));
    }
    await first.close();
    await expect(first.take(join(dir, "none"))).rejects.toThrow(/closed/);
    expect(readdirSync(trashDir)).toHaveLength(2);

    const time = fakeTime(() => trashDir);
    const second = await ReplicaTrash.open({
      dir: trashDir,
      bytesPerSecond: MiB,
      chunkBytes: MiB,
      now: time.now,
      sleep: time.sleep,
    });
    expect(second.pendingBytes).toBe(3 * MiB);
    await second.drained();
    expect(readdirSync(trashDir)).toEqual([]);
    // x (2 MiB, taken first) is cut to the end before y is touched.
    expect(time.sizesAtWaits).toEqual([[MiB, MiB], [0, MiB], [0]]);
  });

  it("takes a file that is already gone as nothing to free", async () => {
    const trash = await ReplicaTrash.open({ dir: join(dir, "trash"), bytesPerSecond: MiB, chunkBytes: MiB });
    await trash.take(join(dir, "missing"));
    expect(trash.pendingFiles).toBe(0);
    await trash.close();
  });
});

describe("block store with paced deletes", () => {
  let dir: string;
  let paused: boolean;
  let deleted: number[];

  const open = (extra: Partial<BlockStoreOptions> = {}): Promise<BlockStore> =>
    BlockStore.open({
      dataDir: dir,
      deleteBytesPerSecond: 1024 * MiB,
      deleteChunkBytes: MiB,
      deletesPaused: () => paused,
      listener: { deleted: (r) => deleted.push(r.blockId) },
      ...extra,
    });

  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), "harvest-dn-trash-"));
    paused = true;
    deleted = [];
  });

  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  it("takes a deleted replica out of service at once and counts its bytes as used until they are freed", async () => {
    const store = await open();
    const keep = randomBytes(MiB + 3);
    await writeReplica(store, { blockId: 1, genStamp: 1 }, randomBytes(3 * MiB));
    await writeReplica(store, { blockId: 2, genStamp: 1 }, keep);
    expect(await store.delete({ blockId: 1, genStamp: 1 })).toBe(true);
    expect(deleted).toEqual([1]);
    expect(store.list().map((r) => r.blockId)).toEqual([2]);
    expect(readdirSync(join(dir, "current", `subdir${1 % SUBDIR_COUNT}`))).toEqual([]);
    expect(await codeOf(readAll(store, { blockId: 1, genStamp: 1 }))).toBe("DATANODE_BLOCK_NOT_FOUND");
    // Paused (the primary is busy): the data waits in the trash, still taking its room.
    expect(store.trashBytes).toBe(3 * MiB);
    expect(store.usedBytes()).toBe(3 * MiB + keep.length);
    paused = false;
    await store.trashDrained();
    expect(store.trashBytes).toBe(0);
    expect(store.usedBytes()).toBe(keep.length);
    expect(readdirSync(join(dir, "trash"))).toEqual([]);
    expect(Buffer.compare(await readAll(store, { blockId: 2, genStamp: 1 }), keep)).toBe(0);
    await store.close();
  });

  it("frees after a restart what a stop left in the trash, without bringing the replica back", async () => {
    const store = await open();
    await writeReplica(store, { blockId: 7, genStamp: 3 }, randomBytes(2 * MiB));
    await store.delete({ blockId: 7, genStamp: 3 });
    await store.close();
    expect(readdirSync(join(dir, "trash"))).toHaveLength(1);

    paused = false;
    const reopened = await open();
    expect(reopened.list()).toEqual([]);
    await reopened.trashDrained();
    expect(readdirSync(join(dir, "trash"))).toEqual([]);
    expect(reopened.usedBytes()).toBe(0);
    await reopened.close();
  });

  it("frees an unfinished replica that is given up through the trash too", async () => {
    const store = await open();
    const w = await store.createRbw({ blockId: 5, genStamp: 1 });
    const data = randomBytes(2 * MiB);
    await w.write(0, data, chunkChecksums(data));
    await w.abort();
    expect(readdirSync(join(dir, "rbw"))).toEqual([]);
    expect(store.trashBytes).toBe(2 * MiB);
    paused = false;
    await store.trashDrained();
    expect(readdirSync(join(dir, "trash"))).toEqual([]);
    await store.close();
  });

  it("removes a replica's files at once with the stock setting (0) and never uses the trash", async () => {
    const store = await open({ deleteBytesPerSecond: 0 });
    await writeReplica(store, { blockId: 3, genStamp: 1 }, randomBytes(2 * MiB));
    await store.delete({ blockId: 3, genStamp: 1 });
    expect(readdirSync(join(dir, "current", `subdir${3 % SUBDIR_COUNT}`))).toEqual([]);
    expect(readdirSync(join(dir, "trash"))).toEqual([]);
    expect(store.usedBytes()).toBe(0);
    await store.close();
  });

  it("empties the trash on a wipe (a reimage frees everything at once)", async () => {
    const store = await open();
    await writeReplica(store, { blockId: 4, genStamp: 1 }, randomBytes(2 * MiB));
    await store.delete({ blockId: 4, genStamp: 1 });
    expect(store.trashBytes).toBe(2 * MiB);
    await store.wipe();
    expect(store.trashBytes).toBe(0);
    expect(store.usedBytes()).toBe(0);
    expect(readdirSync(join(dir, "trash"))).toEqual([]);
    await store.close();
  });
});

describe("datanode deletion options", () => {
  const base = { datanodeId: "s1", namenodeAddress: "m:1", dataDir: "/d" };

  it("paces deletions by default, takes 0 for the stock behaviour, and refuses what is not a pace", () => {
    const o = resolveDataNodeOptions(base);
    expect(o.deleteBytesPerSecond).toBeGreaterThan(0);
    expect(o.deleteChunkBytes % 4096).toBe(0);
    expect(resolveDataNodeOptions({ ...base, deleteBytesPerSecond: 0 }).deleteBytesPerSecond).toBe(0);
    for (const bad of [{ deleteBytesPerSecond: -1 }, { deleteBytesPerSecond: 1.5 }, { deleteChunkBytes: 1000 }]) {
      let err: unknown;
      try {
        resolveDataNodeOptions({ ...base, ...bad });
      } catch (e) {
        err = e;
      }
      expect(err).toMatchObject({ code: "CONFIG_INVALID", message: expect.stringContaining(Object.keys(bad)[0]!) });
    }
  });
});
