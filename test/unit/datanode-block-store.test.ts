/** The datanode's block store on real files: checksummed writes, verified reads, crash leftovers, wipes. */
import { createHash, randomBytes } from "node:crypto";
import { existsSync, mkdtempSync, openSync, readdirSync, rmSync, writeSync, closeSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { flipByte } from "../flip-byte.js";
import { codeOf } from "../error-code.js";
import { BlockStore } from "../../datanode/block-store.js";
import { chunkChecksums } from "../../common/checksum.js";
import { CHUNK_SIZE } from "../../datanode/replica-files.js";
import type { BlockKey, StoredReplica } from "../../datanode/replica-files.js";
import type { ReplicaWriter } from "../../datanode/replica-writer.js";

/** Writes `data` in 64 KiB packets with correct checksums and finalizes. */
async function writeReplica(
  store: BlockStore,
  block: BlockKey,
  data: Buffer,
  options: { replaceKept?: boolean } = {},
): Promise<StoredReplica> {
  const w = await store.createRbw(block, options);
  for (let at = 0; at < data.length; at += 64 * 1024) {
    const piece = data.subarray(at, Math.min(data.length, at + 64 * 1024));
    await w.write(at, piece, chunkChecksums(piece));
  }
  return w.finalize(data.length);
}

async function readAll(store: BlockStore, block: BlockKey, offset = 0, length = 0): Promise<Buffer> {
  const parts: Buffer[] = [];
  for await (const p of store.read(block, offset, length)) parts.push(p.data);
  return Buffer.concat(parts);
}

function sha(b: Buffer): string {
  return createHash("sha256").update(b).digest("hex");
}

describe("block store", () => {
  let dir: string;
  let store: BlockStore;

  beforeEach(async () => {
    dir = mkdtempSync(join(tmpdir(), "harvest-dn-store-"));
    store = await BlockStore.open({ dataDir: dir, capacityBytes: 64 * 1024 * 1024 });
  });

  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  it("reads back byte-identical replicas of sizes across chunk boundaries", async () => {
    const sizes = [0, 1, 511, 512, 513, 64 * 1024 + 1, 1024 * 1024 + 7];
    for (const [i, size] of sizes.entries()) {
      const data = randomBytes(size);
      const replica = await writeReplica(store, { blockId: i + 1, genStamp: 1 }, data);
      expect(replica.numBytes).toBe(size);
      expect(sha(await readAll(store, { blockId: i + 1, genStamp: 1 }))).toBe(sha(data));
    }
    expect(store.list().map((r) => [r.blockId, r.numBytes])).toEqual(sizes.map((s, i) => [i + 1, s]));
    expect(store.usedBytes()).toBe(sizes.reduce((a, b) => a + b, 0));
  });

  it("yields chunk-aligned pieces with checksums that match the data, from an offset aligned down", async () => {
    const data = randomBytes(200_000);
    await writeReplica(store, { blockId: 7, genStamp: 3 }, data);
    const pieces = [];
    for await (const p of store.read({ blockId: 7, genStamp: 3 }, 1000, 70_000)) pieces.push(p);
    expect(pieces[0]!.offset).toBe(512);
    for (const p of pieces) {
      expect(p.offset % CHUNK_SIZE).toBe(0);
      expect(p.data.length).toBeLessThanOrEqual(64 * 1024);
      expect(p.checksums).toEqual(chunkChecksums(p.data));
      expect(p.data.equals(data.subarray(p.offset, p.offset + p.data.length))).toBe(true);
    }
    const last = pieces.at(-1)!;
    expect(last.offset + last.data.length).toBeGreaterThanOrEqual(71_000);
  });

  it("closes the replica's files when a reader stops early, with the next piece already being read", async () => {
    const data = randomBytes(1024 * 1024);
    await writeReplica(store, { blockId: 8, genStamp: 1 }, data);
    const openFiles = (): number => readdirSync("/proc/self/fd").length;
    const before = openFiles();
    for (let i = 0; i < 20; i++) {
      for await (const p of store.read({ blockId: 8, genStamp: 1 }, 0, 0, 64 * 1024)) {
        expect(p.data.equals(data.subarray(0, p.data.length))).toBe(true);
        break;
      }
    }
    expect(openFiles()).toBe(before);
    // And the whole replica still reads back, piece after piece.
    expect(sha(await readAll(store, { blockId: 8, genStamp: 1 }))).toBe(sha(data));
  });

  it("detects a flipped byte in a finalized data file and notes the replica as corrupt", async () => {
    const corrupted: number[] = [];
    const s = await BlockStore.open({ dataDir: dir, listener: { corrupt: (r) => corrupted.push(r.blockId) } });
    const data = randomBytes(5000);
    await writeReplica(s, { blockId: 42, genStamp: 1 }, data);
    const file = join(dir, "current", `subdir${42 % 64}`, "blk_42");
    flipByte(file, 3000);
    expect(await codeOf(readAll(s, { blockId: 42, genStamp: 1 }))).toBe("DATANODE_CORRUPT_BLOCK");
    expect(corrupted).toEqual([42]);
    expect(s.isCorrupt(42)).toBe(true);
    // The chunks before the damage are still served; a read that reaches it is refused.
    expect((await readAll(s, { blockId: 42, genStamp: 1 }, 0, 1024)).equals(data.subarray(0, 1024))).toBe(true);
  });

  it("refuses a packet whose checksum does not match and writes nothing of it", async () => {
    const w = await store.createRbw({ blockId: 5, genStamp: 1 });
    const data = randomBytes(2048);
    const sums = chunkChecksums(data);
    sums[2] = (sums[2]! + 1) >>> 0;
    expect(await codeOf(w.write(0, data, sums))).toBe("DATANODE_CHECKSUM_MISMATCH");
    expect(await codeOf(w.write(0, data, sums.slice(0, 3)))).toBe("DATANODE_CHECKSUM_MISMATCH");
    expect(await codeOf(w.write(0, [data.subarray(0, 700), data.subarray(700)], sums))).toBe(
      "DATANODE_CHECKSUM_MISMATCH",
    );
    expect(w.bytesWritten).toBe(0);
    await w.write(0, data, chunkChecksums(data));
    expect(w.bytesWritten).toBe(2048);
    await w.abort();
  });

  it("refuses non-contiguous offsets and data after a partial chunk", async () => {
    const w = await store.createRbw({ blockId: 6, genStamp: 1 });
    const a = randomBytes(1024);
    await w.write(0, a, chunkChecksums(a));
    expect(await codeOf(w.write(2048, a, chunkChecksums(a)))).toBe("DATANODE_PROTOCOL_ERROR");
    expect(await codeOf(w.write(512, a, chunkChecksums(a)))).toBe("DATANODE_PROTOCOL_ERROR");
    const tail = randomBytes(100);
    await w.write(1024, tail, chunkChecksums(tail));
    expect(await codeOf(w.write(1124, a, chunkChecksums(a)))).toBe("DATANODE_PROTOCOL_ERROR");
    expect(await codeOf(w.finalize(1000))).toBe("DATANODE_PROTOCOL_ERROR");
    expect((await w.finalize(1124)).numBytes).toBe(1124);
  });

  it("refuses block ids and generation stamps that are not safe integers", async () => {
    const bad: unknown[] = [-1, 0, 1.5, 2 ** 60, "../x", "7", NaN, Infinity, null, undefined];
    for (const blockId of bad) {
      const block = { blockId, genStamp: 1 } as unknown as BlockKey;
      expect(await codeOf(store.createRbw(block))).toBe("DATANODE_BAD_BLOCK_ID");
      expect(await codeOf(readAll(store, block))).toBe("DATANODE_BAD_BLOCK_ID");
      expect(await codeOf(store.delete(block))).toBe("DATANODE_BAD_BLOCK_ID");
    }
    for (const genStamp of [-1, 0.5, 2 ** 60, "../x"]) {
      const block = { blockId: 1, genStamp } as unknown as BlockKey;
      expect(await codeOf(store.createRbw(block))).toBe("DATANODE_BAD_BLOCK_ID");
    }
    expect(readdirSync(join(dir, "rbw"))).toEqual([]);
  });

  it("refuses a second writer for a block and a replica whose generation is already finalized", async () => {
    const w = await store.createRbw({ blockId: 9, genStamp: 1 });
    expect(await codeOf(store.createRbw({ blockId: 9, genStamp: 1 }))).toBe("DATANODE_BLOCK_EXISTS");
    await w.finalize(0);
    expect(await codeOf(store.createRbw({ blockId: 9, genStamp: 1 }))).toBe("DATANODE_BLOCK_EXISTS");
    // A newer generation replaces the old replica when it finalizes.
    const data = randomBytes(600);
    await writeReplica(store, { blockId: 9, genStamp: 2 }, data);
    expect(store.get(9)).toEqual({ blockId: 9, genStamp: 2, numBytes: 600 });
    expect(await codeOf(readAll(store, { blockId: 9, genStamp: 1 }))).toBe("DATANODE_BLOCK_NOT_FOUND");
    expect(readdirSync(join(dir, "current", "subdir9")).sort()).toEqual(["blk_9", "blk_9_2.meta"]);
  });

  it("takes writes issued back to back without waiting, lands them in order, and finalizes after the last", async () => {
    // The pipeline hands a packet to the writer and reads the next one at once; the writer lands what piled up
    // together. Every write's promise resolves, the finalize sees them all, and the replica reads back identical.
    const data = randomBytes(3 * 1024 * 1024 + 100);
    const w = await store.createRbw({ blockId: 21, genStamp: 1 });
    const writes: Promise<void>[] = [];
    for (let at = 0, i = 0; at < data.length; at += 64 * 1024, i++) {
      const piece = data.subarray(at, Math.min(data.length, at + 64 * 1024));
      // Every other packet as the transfer port hands it over: cut where socket reads happened to end.
      const cuts = [1000, 40_000].filter((c) => c < piece.length);
      const parts = [0, ...cuts].map((from, k) => piece.subarray(from, [...cuts, piece.length][k]));
      writes.push(w.write(at, i % 2 === 1 ? parts : piece, chunkChecksums(piece)));
    }
    // Space is reserved as writes are accepted, before they reach the disk.
    expect(store.usedBytes()).toBe(data.length);
    const replica = await w.finalize(data.length);
    await Promise.all(writes);
    expect(replica.numBytes).toBe(data.length);
    expect(sha(await readAll(store, { blockId: 21, genStamp: 1 }))).toBe(sha(data));
  });

  it("writes a block of several sync-behind steps (8 MiB each) and an abort in the middle of one leaves nothing", async () => {
    const data = randomBytes(20 * 1024 * 1024);
    const w = await store.createRbw({ blockId: 22, genStamp: 1 });
    for (let at = 0; at < data.length; at += 64 * 1024) {
      const piece = data.subarray(at, at + 64 * 1024);
      await w.write(at, piece, chunkChecksums(piece));
    }
    await w.finalize(data.length);
    expect(sha(await readAll(store, { blockId: 22, genStamp: 1 }))).toBe(sha(data));
    const aborted = await store.createRbw({ blockId: 23, genStamp: 1 });
    for (let at = 0; at < 9 * 1024 * 1024; at += 64 * 1024) {
      const piece = data.subarray(at, at + 64 * 1024);
      await aborted.write(at, piece, chunkChecksums(piece));
    }
    await aborted.abort();
    expect(store.usedBytes()).toBe(data.length);
    expect(await codeOf(readAll(store, { blockId: 23, genStamp: 1 }))).toBe("DATANODE_BLOCK_NOT_FOUND");
  });

  it("refuses a bad write among queued ones without losing the others", async () => {
    const w = await store.createRbw({ blockId: 22, genStamp: 1 });
    const a = randomBytes(4096);
    const b = randomBytes(4096);
    const first = w.write(0, a, chunkChecksums(a));
    // Out of place, then a wrong checksum: refused, and nothing of them is written.
    const misplaced = codeOf(w.write(8192, b, chunkChecksums(b)));
    const corrupt = codeOf(w.write(4096, b, chunkChecksums(randomBytes(4096))));
    const second = w.write(4096, b, chunkChecksums(b));
    expect(await misplaced).toBe("DATANODE_PROTOCOL_ERROR");
    expect(await corrupt).toBe("DATANODE_CHECKSUM_MISMATCH");
    await Promise.all([first, second]);
    await w.finalize(8192);
    expect(sha(await readAll(store, { blockId: 22, genStamp: 1 }))).toBe(sha(Buffer.concat([a, b])));
  });

  it("fails every write queued behind one the disk refused, and the finalize", async () => {
    const w = await store.createRbw({ blockId: 23, genStamp: 1 });
    const a = randomBytes(4096);
    await w.write(0, a, chunkChecksums(a));
    // An I/O error under the writer: its data file is no longer writable.
    await (w as unknown as { data: { close(): Promise<void> } }).data.close();
    const [b, c, d] = [randomBytes(4096), randomBytes(4096), randomBytes(4096)];
    const queued = [w.write(4096, b, chunkChecksums(b)), w.write(8192, c, chunkChecksums(c))];
    const codes = await Promise.all(queued.map((p) => codeOf(p)));
    expect(codes[0]).toBeTruthy();
    expect(codes[1]).toBe(codes[0]);
    // Nothing after it can land in the right place: later writes and the finalize fail the same way.
    expect(await codeOf(w.write(12288, d, chunkChecksums(d)))).toBe(codes[0]);
    expect(await codeOf(w.finalize(16384))).toBe(codes[0]);
    await w.abort();
  });

  it("fails the later writes and the finalize when a background sync-behind fails (its error is not lost)", async () => {
    const w = await store.createRbw({ blockId: 24, genStamp: 1 });
    // The disk fails the background fdatasync; Linux would report that writeback error to this one call only.
    const eio = Object.assign(new Error("EIO: i/o error, fdatasync"), { code: "EIO" });
    (w as unknown as { data: { datasync(): Promise<void> } }).data.datasync = () => Promise.reject(eio);
    const data = randomBytes(64 * 1024);
    let at = 0;
    // 8 MiB in the file: the sync-behind starts (and fails) after the last of these writes.
    for (; at < 8 * 1024 * 1024; at += data.length) await w.write(at, data, chunkChecksums(data));
    await new Promise((r) => setTimeout(r, 10));
    expect(await codeOf(w.write(at, data, chunkChecksums(data)))).toBe("INTERNAL");
    expect(await codeOf(w.finalize(at))).toBe("INTERNAL");
    await w.abort();
  });

  it("keeps an aborted replica out of the store", async () => {
    const w: ReplicaWriter = await store.createRbw({ blockId: 11, genStamp: 1 });
    const data = randomBytes(4096);
    await w.write(0, data, chunkChecksums(data));
    expect(store.usedBytes()).toBe(4096);
    await w.abort();
    expect(store.list()).toEqual([]);
    expect(store.usedBytes()).toBe(0);
    expect(readdirSync(join(dir, "rbw"))).toEqual([]);
    expect(await codeOf(w.finalize(4096))).toBe("DATANODE_PROTOCOL_ERROR");
  });

  it("refuses writes beyond the configured capacity", async () => {
    const small = await BlockStore.open({ dataDir: join(dir, "small"), capacityBytes: 4096 });
    const w = await small.createRbw({ blockId: 1, genStamp: 1 });
    const data = randomBytes(4096);
    await w.write(0, data, chunkChecksums(data));
    const more = randomBytes(512);
    expect(await codeOf(w.write(4096, more, chunkChecksums(more)))).toBe("DATANODE_NO_SPACE");
    expect(small.remainingBytes()).toBe(0);
    await w.abort();
  });

  it("keeps rbw leftovers on restart for lease recovery and lists the finalized replicas that survived", async () => {
    const kept = randomBytes(3000);
    await writeReplica(store, { blockId: 100, genStamp: 4 }, kept);
    await writeReplica(store, { blockId: 165, genStamp: 1 }, randomBytes(10));
    const unfinished = await store.createRbw({ blockId: 200, genStamp: 1 });
    const part = randomBytes(1024);
    await unfinished.write(0, part, chunkChecksums(part));
    const storageId = store.storageId;
    // A crash: the writer is never finalized nor aborted. Its pipeline may have acknowledged those 1024 bytes.
    const reopened = await BlockStore.open({ dataDir: dir });
    expect(reopened.scan.rbwKept).toBe(1);
    expect(reopened.scan.rbwRemoved).toBe(0);
    expect(reopened.storageId).toBe(storageId);
    expect(reopened.list().sort((a, b) => a.blockId - b.blockId)).toEqual([
      { blockId: 100, genStamp: 4, numBytes: 3000 },
      { blockId: 165, genStamp: 1, numBytes: 10 },
    ]);
    expect((await readAll(reopened, { blockId: 100, genStamp: 4 })).equals(kept)).toBe(true);
    // Not readable as a finished replica, but there for the namenode's block recovery.
    expect(await codeOf(readAll(reopened, { blockId: 200, genStamp: 1 }))).toBe("DATANODE_BLOCK_NOT_FOUND");
    expect(await reopened.recoveryState({ blockId: 200, genStamp: 1 })).toEqual({
      state: "REPLICA_BEING_WRITTEN",
      numBytes: 1024,
      verifiedBytes: 1024,
    });
    await reopened.commitRecovered({ blockId: 200, genStamp: 1 }, 1024);
    expect((await readAll(reopened, { blockId: 200, genStamp: 1 })).equals(part)).toBe(true);
    expect(readdirSync(join(dir, "rbw"))).toEqual([]);
    await unfinished.abort();
  });

  // Found by the 30-minute soak: a kept leftover refused re-replication of its (committed) block, which stayed
  // under-replicated until the kept replica's TTL.
  it("lets a re-replication copy replace a replica kept for recovery, but not a client's write", async () => {
    const unfinished = await store.createRbw({ blockId: 400, genStamp: 3 });
    const part = randomBytes(1024);
    await unfinished.write(0, part, chunkChecksums(part));
    const reopened = await BlockStore.open({ dataDir: dir });
    expect(reopened.scan.rbwKept).toBe(1);
    const whole = randomBytes(4096);
    // A client's pipeline (recovery with a newer generation) must not take the replica a lease recovery asks for.
    expect(await codeOf(writeReplica(reopened, { blockId: 400, genStamp: 4 }, whole))).toBe("DATANODE_BLOCK_EXISTS");
    // An older generation than the kept one is stale: it never replaces it.
    expect(await codeOf(writeReplica(reopened, { blockId: 400, genStamp: 2 }, whole, { replaceKept: true }))).toBe(
      "DATANODE_BLOCK_EXISTS",
    );
    await writeReplica(reopened, { blockId: 400, genStamp: 3 }, whole, { replaceKept: true });
    expect((await readAll(reopened, { blockId: 400, genStamp: 3 })).equals(whole)).toBe(true);
    expect(reopened.keptReplicas()).toEqual([]);
    expect(readdirSync(join(dir, "rbw"))).toEqual([]);
    await unfinished.abort();
  });

  it("cuts a kept rbw leftover to its checksum-verified prefix and drops one with nothing verified", async () => {
    const good = randomBytes(2048);
    const w = await store.createRbw({ blockId: 300, genStamp: 2 });
    await w.write(0, good, chunkChecksums(good));
    // A crash between the data write and its checksums: 700 more data bytes, no meta for them.
    const fd = openSync(join(dir, "rbw", "blk_300"), "r+");
    writeSync(fd, randomBytes(700), 0, 700, 2048);
    closeSync(fd);
    // A replica that got no verified byte at all.
    await store.createRbw({ blockId: 301, genStamp: 2 });
    const reopened = await BlockStore.open({ dataDir: dir });
    expect(reopened.scan.rbwKept).toBe(1);
    expect(reopened.scan.rbwRemoved).toBe(1);
    expect(reopened.keptReplicas()).toEqual([{ blockId: 300, genStamp: 2, numBytes: 2048 }]);
    expect(await reopened.recoveryState({ blockId: 300, genStamp: 2 })).toEqual({
      state: "REPLICA_BEING_WRITTEN",
      numBytes: 2048,
      verifiedBytes: 2048,
    });
    expect(readdirSync(join(dir, "rbw")).sort()).toEqual(["blk_300", "blk_300_2.meta"]);
    // Once the kept-replica time passes without the namenode asking, it goes.
    expect(await reopened.dropKeptReplicas(Date.now() + 1)).toBe(1);
    expect(readdirSync(join(dir, "rbw"))).toEqual([]);
    expect(reopened.keptReplicas()).toEqual([]);
  });

  it("drops a data file without its meta (a finalize cut short) on restart", async () => {
    await writeReplica(store, { blockId: 3, genStamp: 1 }, randomBytes(700));
    rmSync(join(dir, "current", "subdir3", "blk_3_1.meta"));
    const reopened = await BlockStore.open({ dataDir: dir });
    expect(reopened.list()).toEqual([]);
    expect(reopened.scan.orphansRemoved).toBe(1);
    expect(existsSync(join(dir, "current", "subdir3", "blk_3"))).toBe(false);
  });

  it("deletes replicas and tells the listener", async () => {
    const deleted: number[] = [];
    const s = await BlockStore.open({ dataDir: dir, listener: { deleted: (r) => deleted.push(r.blockId) } });
    await writeReplica(s, { blockId: 12, genStamp: 1 }, randomBytes(100));
    expect(await s.delete({ blockId: 12, genStamp: 1 })).toBe(true);
    expect(await s.delete({ blockId: 12, genStamp: 1 })).toBe(false);
    expect(deleted).toEqual([12]);
    expect(s.list()).toEqual([]);
    expect(readdirSync(join(dir, "current", "subdir12"))).toEqual([]);
  });

  it("wipes every replica, finished or not, and takes a new storage id", async () => {
    await writeReplica(store, { blockId: 1, genStamp: 1 }, randomBytes(1000));
    await writeReplica(store, { blockId: 2, genStamp: 1 }, randomBytes(1000));
    const open = await store.createRbw({ blockId: 3, genStamp: 1 });
    const before = store.storageId;
    const { storageId, wiped } = await store.wipe();
    expect(wiped).toBe(2);
    expect(storageId).not.toBe(before);
    expect(store.storageId).toBe(storageId);
    expect(store.list()).toEqual([]);
    expect(store.usedBytes()).toBe(0);
    expect(readdirSync(join(dir, "current"))).toEqual([]);
    expect(readdirSync(join(dir, "rbw"))).toEqual([]);
    const data = randomBytes(10);
    expect(await codeOf(open.write(0, data, chunkChecksums(data)))).toBe("DATANODE_BLOCK_NOT_FOUND");
    await open.abort();
    const reopened = await BlockStore.open({ dataDir: dir });
    expect(reopened.storageId).toBe(storageId);
    expect(reopened.list()).toEqual([]);
  });
});
