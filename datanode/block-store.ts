/**
 * Replicas on disk, laid out like HDFS's finalized/rbw storage:
 *
 *   <dataDir>/VERSION                                   storage id (changes on a wipe) and layout version
 *   <dataDir>/rbw/blk_<id>, blk_<id>_<gs>.meta          replicas being written (never acknowledged yet)
 *   <dataDir>/current/subdir<id % 64>/blk_<id>          finalized data
 *   <dataDir>/current/subdir<id % 64>/blk_<id>_<gs>.meta
 *
 * A meta file is a 7-byte header and the CRC32C of every 512-byte chunk of the data (common/replica-file.ts, which
 * also reads a range of a replica for this store and for a client's short-circuit read).
 *
 * Invariants: a replica reaches current/ only by rename, after its data, its meta and the directory are fsynced, so a
 * crash leaves either an rbw leftover or a complete replica. An rbw leftover may hold bytes the pipeline acknowledged
 * to a writer (acks do not wait for the final fsync), so the next start keeps it, cut to its checksum-verified prefix,
 * as a replica kept for lease recovery (below); only leftovers with nothing verifiable are deleted. File names are built only from validated integers (`checkBlockId`, `checkGenStamp`); nothing from the wire
 * becomes a path any other way.
 *
 * Lease recovery: a replica whose writer went away mid-block (`ReplicaWriter.keepForRecovery`) stays in rbw/ so the
 * namenode can ask for its length (`recoveryState`, which verifies the checksums) and have it finalized at a prefix
 * every surviving replica holds (`commitRecovered`); a delete command, or `dropKeptReplicas` after a while, removes it.
 * A full file system (ENOSPC, EDQUOT) is DATANODE_NO_SPACE, never INTERNAL.
 */
import { randomUUID } from "node:crypto";
import type { FileHandle } from "node:fs/promises";
import { mkdir, open, readdir, readFile, rename, rm, stat, statfs } from "node:fs/promises";
import { join } from "node:path";
import { errorMessage, HarvestError } from "../common/errors.js";
import { chunksFor, META_HEADER_BYTES, readReplicaRange } from "../common/replica-file.js";
import type { PieceBuffers, ReplicaPiece } from "../common/replica-file.js";
import { DirectWrites } from "./direct-write.js";
import { ReplicaTrash } from "./replica-trash.js";
import { blockName, checkBlockKey, fsyncDir, metaName, READ_PIECE_BYTES, SUBDIR_COUNT } from "./replica-files.js";
import type { BlockKey, StoredReplica } from "./replica-files.js";
import { ReplicaWriter } from "./replica-writer.js";
import type { ReplicaWriterStore } from "./replica-writer.js";

const LAYOUT_VERSION = 1;

/** What a store holds of a block under lease recovery (see `BlockStore.recoveryState`). */
export interface RecoveryState {
  state: "REPLICA_MISSING" | "REPLICA_BEING_WRITTEN" | "REPLICA_FINALIZED";
  /** Bytes in the replica. */
  numBytes: number;
  /** The longest prefix whose every chunk matches its stored checksum. */
  verifiedBytes: number;
}

/** A chunk-aligned piece of a replica with the stored checksum of each of its chunks. */
export interface ReadPiece {
  offset: number;
  data: Buffer;
  checksums: number[];
}

/** A piece of a replica to send from its file: `length` bytes at `offset` of `file`, with their chunk checksums. */
export interface FilePiece {
  offset: number;
  length: number;
  checksums: number[];
  file: FileHandle;
  /** Marks the replica corrupt (its file turned out shorter than its length) and returns the error to throw. */
  corrupt: (reason: string) => Error;
}

/** What the store tells its owner about (the datanode turns these into reports to the namenode). */
export interface BlockStoreListener {
  /** A replica was finalized (moved into current/). */
  finalized?(replica: StoredReplica): void;
  /** A finalized replica was deleted (not on a wipe). */
  deleted?(replica: StoredReplica): void;
  /** A replica's data does not match its checksums (or its files are damaged). */
  corrupt?(replica: StoredReplica, reason: string): void;
  /** Direct writes stopped (the file system refused them): replicas are written through the page cache from now on. */
  directWritesOff?(reason: string): void;
  /** A deleted replica's data in the trash could not be freed (the next open tries again). */
  trashFailed?(file: string, reason: string): void;
}

/** Settings of a block store. */
export interface BlockStoreOptions {
  /** Root of the storage. Required. */
  dataDir: string;
  /** Bytes the store may fill; 0 takes the file system's size. @default 0 */
  capacityBytes?: number;
  /** Notified of finalizations, deletions and corruption. @default none */
  listener?: BlockStoreListener;
  /**
   * Write replica data with O_DIRECT from aligned memory, past the page cache (datanode/direct-write.ts); false writes
   * through the page cache, as stock HDFS does. @default false
   */
  directWrites?: boolean;
  /**
   * Deleted replicas are freed at most this many bytes per second, cut `deleteChunkBytes` at a time from a trash
   * directory (datanode/replica-trash.ts), so the discards of a burst of deletions do not stall the primary's fsyncs;
   * 0 removes a replica's files when it is deleted, as stock HDFS does. @default 0
   */
  deleteBytesPerSecond?: number;
  /** Bytes a paced deletion frees at a time. @default 8 MiB */
  deleteChunkBytes?: number;
  /** While true, paced deletions wait (the datanode passes "the primary is busy"). @default never */
  deletesPaused?: () => boolean;
}

/** Bytes a paced deletion frees at a time unless told otherwise. */
export const DELETE_CHUNK_BYTES = 8 * 1024 * 1024;

/** What the start-up scan found. */
export interface ScanResult {
  replicas: number;
  /** Unfinished replicas kept in rbw/ for lease recovery (cut to their checksum-verified prefix). */
  rbwKept: number;
  /** Unfinished replicas removed from rbw/ (nothing of them verified, or a newer generation is finalized). */
  rbwRemoved: number;
  /** Data or meta files without their other half, removed. */
  orphansRemoved: number;
}

/** The replicas of one datanode. Open with `BlockStore.open()`. */
export class BlockStore implements ReplicaWriterStore {
  readonly dataDir: string;
  private readonly currentDir: string;
  private readonly rbwDir: string;
  private readonly trashDir: string;
  private readonly listener: BlockStoreListener;
  private readonly options: BlockStoreOptions;
  /** Deleted replicas' data being freed (opened by `init`). */
  private trash!: ReplicaTrash;
  private readonly replicas = new Map<number, StoredReplica>();
  private readonly corruptReplicas = new Map<number, StoredReplica>();
  private readonly writers = new Map<number, ReplicaWriter>();
  private storageIdValue = "";
  private capacity = 0;
  private finalizedBytes = 0;
  private diskAvailable = Number.MAX_SAFE_INTEGER;
  private diskSize = 0;
  private diskDevice = 0;
  /** @internal Staging memory of direct writes, when they are on. */
  readonly direct: DirectWrites | undefined;

  private constructor(
    options: BlockStoreOptions,
    readonly scan: ScanResult,
  ) {
    this.dataDir = options.dataDir;
    this.currentDir = join(options.dataDir, "current");
    this.rbwDir = join(options.dataDir, "rbw");
    this.trashDir = join(options.dataDir, "trash");
    this.options = options;
    this.listener = options.listener ?? {};
    this.direct = options.directWrites
      ? new DirectWrites(undefined, (reason) => this.listener.directWritesOff?.(reason))
      : undefined;
  }

  /** "on", "off" (configured so), or why the file system made the store stop them. */
  get directWritesState(): string {
    if (!this.direct) return "off";
    return this.direct.disabledReason === undefined ? "on" : `stopped: ${this.direct.disabledReason}`;
  }

  /**
   * Opens (creating if needed) the storage at `options.dataDir`: reads VERSION, scans current/, and keeps rbw leftovers
   * for lease recovery (see `keptReplicas`).
   */
  static async open(options: BlockStoreOptions): Promise<BlockStore> {
    const store = new BlockStore(options, { replicas: 0, rbwKept: 0, rbwRemoved: 0, orphansRemoved: 0 });
    await store.init(options.capacityBytes ?? 0);
    return store;
  }

  /** Identifies this storage; a wipe makes a new one, so the namenode knows every old replica is gone. */
  get storageId(): string {
    return this.storageIdValue;
  }

  /** Bytes this store may fill (configured, or the file system's size). */
  get capacityBytes(): number {
    return this.capacity;
  }

  /**
   * Bytes held by finalized replicas, replicas being written and deleted replicas not yet freed (data only; meta adds
   * under 1%).
   */
  usedBytes(): number {
    let rbw = 0;
    for (const w of this.writers.values()) rbw += w.bytesAccepted;
    return this.finalizedBytes + rbw + this.trash.pendingBytes;
  }

  /** Bytes of deleted replicas not yet freed (paced deletions, see `BlockStoreOptions.deleteBytesPerSecond`). */
  get trashBytes(): number {
    return this.trash.pendingBytes;
  }

  /** Resolves once every deleted replica's data is freed. */
  trashDrained(): Promise<void> {
    return this.trash.drained();
  }

  /** Stops freeing deleted replicas (what is left is freed after the next open). */
  async close(): Promise<void> {
    await this.trash.close();
  }

  /** Bytes still free for replicas: the capacity left, bounded by what the file system has left (it is shared). */
  remainingBytes(): number {
    return Math.max(0, Math.min(this.capacity - this.usedBytes(), this.diskAvailable));
  }

  /** Re-reads the file system's free space (for `remainingBytes()`). */
  async refreshDiskStats(): Promise<void> {
    const s = await statfs(this.dataDir);
    this.diskAvailable = s.bavail * s.bsize;
    this.diskSize = s.blocks * s.bsize;
  }

  /**
   * The data directory's file system at the last `refreshDiskStats()`: its size, what unprivileged users may still
   * write, and its device id (`stat().dev`; Node does not expose statfs's f_fsid), which names it on this machine.
   */
  get fileSystem(): { sizeBytes: number; availableBytes: number; device: number } {
    return { sizeBytes: this.diskSize, availableBytes: this.diskAvailable, device: this.diskDevice };
  }

  /** Every finalized replica, corrupt ones included, by block id. */
  list(): StoredReplica[] {
    return [...this.replicas.values()].map((r) => ({ ...r }));
  }

  /** The finalized replica of `blockId`, if held. */
  get(blockId: number): StoredReplica | undefined {
    const r = this.replicas.get(blockId);
    return r ? { ...r } : undefined;
  }

  /** Whether a replica has been found corrupt (it stays until deleted so that the namenode can decide). */
  isCorrupt(blockId: number): boolean {
    return this.corruptReplicas.has(blockId);
  }

  /** Replicas found corrupt and not deleted since. */
  corrupt(): StoredReplica[] {
    return [...this.corruptReplicas.values()].map((r) => ({ ...r }));
  }

  /** Replicas being written now (replicas kept for lease recovery included). */
  get openWriters(): number {
    return this.writers.size;
  }

  /** Replicas kept in rbw/ for lease recovery (their writer went away, or the datanode restarted under them). */
  keptReplicas(): StoredReplica[] {
    return [...this.writers.values()].filter((w) => w.kept).map((w) => ({ ...w.block, numBytes: w.bytesWritten }));
  }

  /**
   * Starts a replica in rbw/. Refused with DATANODE_BLOCK_EXISTS when the block is being written here already or a
   * replica of the same or a newer generation is finalized; an older generation is replaced when this one finalizes.
   * With `replaceKept` (a re-replication copy of a committed block), a replica kept for lease recovery of the same or an
   * older generation is dropped first: once the block is committed, no recovery will ask for it.
   */
  async createRbw(block: BlockKey, options: { replaceKept?: boolean } = {}): Promise<ReplicaWriter> {
    const key = checkBlockKey(block);
    const kept = this.writers.get(key.blockId);
    // Only a namenode's copy may replace it: a client's pipeline recovery (a newer generation) must not take the replica
    // a concurrent lease recovery is asking for. Refusing the copy left blocks under-replicated until the kept
    // replica's TTL (found by the 30-minute soak).
    if (options.replaceKept === true && kept?.kept && kept.block.genStamp <= key.genStamp) await kept.abort();
    if (this.writers.has(key.blockId))
      throw new HarvestError("DATANODE_BLOCK_EXISTS", `block ${key.blockId} is already being written here`);
    const existing = this.replicas.get(key.blockId);
    if (existing && existing.genStamp >= key.genStamp)
      throw new HarvestError("DATANODE_BLOCK_EXISTS", `block ${key.blockId} is already finalized here`);
    const writer = new ReplicaWriter(this, key, this.rbwDir);
    // Reserve the id before the first await so that two concurrent creates cannot both pass the check above.
    this.writers.set(key.blockId, writer);
    try {
      await writer.openFiles();
    } catch (err) {
      this.writers.delete(key.blockId);
      await writer.abort();
      throw err;
    }
    return writer;
  }

  /** The finalized replica of `block`'s generation; DATANODE_BLOCK_NOT_FOUND when this store holds none. */
  private finalized(block: BlockKey): [BlockKey, StoredReplica] {
    const key = checkBlockKey(block);
    const replica = this.replicas.get(key.blockId);
    if (!replica || replica.genStamp !== key.genStamp)
      throw new HarvestError(
        "DATANODE_BLOCK_NOT_FOUND",
        // The generation held is not named: a caller probing ids must learn nothing it could use.
        `no replica of block ${key.blockId} generation ${key.genStamp} here`,
      );
    return [key, replica];
  }

  /**
   * Streams `length` bytes (0 = to the end) of a finalized replica from `offset` aligned down to a chunk, in
   * chunk-aligned pieces of at most `pieceBytes`, each checked against its stored checksums before it is yielded.
   * A mismatch marks the replica corrupt and throws DATANODE_CORRUPT_BLOCK. With `readAhead` (the default) the next
   * piece is read while the caller handles this one. With `buffers`, pieces' data are read into buffers taken from it,
   * which the caller gives back once it is done with each (datanode/read-buffers.ts).
   */
  async *read(
    block: BlockKey,
    offset = 0,
    length = 0,
    pieceBytes = READ_PIECE_BYTES,
    opts: { readAhead?: boolean; buffers?: PieceBuffers } = {},
  ): AsyncGenerator<ReadPiece> {
    for await (const [piece] of this.pieces(block, offset, length, pieceBytes, { ...opts, withData: true }))
      yield piece!;
  }

  /**
   * As `read`, for a caller that sends the bytes from the replica's file itself (a zero-copy read,
   * datanode/zero-copy.ts): only the checksums are read, and nothing is verified here (the reader verifies); a data
   * file shorter than the replica throws DATANODE_CORRUPT_BLOCK. Pieces come in batches of at least `batchBytes` (the
   * last may be smaller), each piece naming its range and the open data file, which stays open while the caller
   * handles the batch.
   */
  async *readForSending(
    block: BlockKey,
    offset: number,
    length: number,
    pieceBytes: number,
    batchBytes: number,
  ): AsyncGenerator<FilePiece[]> {
    yield* this.pieces(block, offset, length, pieceBytes, { withData: false, batchBytes });
  }

  private async *pieces(
    block: BlockKey,
    offset: number,
    length: number,
    pieceBytes: number,
    opts: { readAhead?: boolean; buffers?: PieceBuffers; withData: boolean; batchBytes?: number },
  ): AsyncGenerator<Array<ReplicaPiece & Pick<FilePiece, "file" | "corrupt">>> {
    const [key, replica] = this.finalized(block);
    if (!(Number.isSafeInteger(offset) && offset >= 0 && offset <= replica.numBytes))
      throw new HarvestError(
        "INVALID_ARGUMENT",
        `offset ${offset} is outside block ${key.blockId} of ${replica.numBytes} bytes`,
        { details: { field: "offset" } },
      );
    if (!(Number.isSafeInteger(length) && length >= 0))
      throw new HarvestError("INVALID_ARGUMENT", `bad length ${length}`, { details: { field: "length" } });
    const dir = this.subdir(key.blockId);
    let data: FileHandle | undefined;
    let meta: FileHandle | undefined;
    const corrupt = (reason: string): HarvestError => {
      this.markCorrupt(replica, reason);
      return new HarvestError("DATANODE_CORRUPT_BLOCK", `replica of block ${key.blockId} is corrupt: ${reason}`, {
        details: { blockId: String(key.blockId) },
      });
    };
    try {
      try {
        data = await open(join(dir, blockName(replica)), "r");
        meta = await open(join(dir, metaName(replica)), "r");
      } catch (err) {
        // The files went away under us (deleted or wiped by a concurrent command): not corruption.
        if (!this.replicas.has(key.blockId))
          throw new HarvestError("DATANODE_BLOCK_NOT_FOUND", `block ${key.blockId} was deleted`, { cause: err });
        throw corrupt(`cannot open its files: ${errorMessage(err)}`);
      }
      // A piece's data and checksums are read together, and (with `readAhead`, the default) the next piece is read
      // while this one is checked and sent: the disk and the socket work at once.
      const pieces = readReplicaRange({
        data,
        meta,
        numBytes: replica.numBytes,
        offset,
        length,
        pieceBytes,
        readAhead: opts.readAhead ?? true,
        buffers: opts.buffers,
        withData: opts.withData,
        corrupt,
      });
      // Batches are yielded inside this `try`: the files stay open while the caller sends from them.
      let batch: Array<ReplicaPiece & Pick<FilePiece, "file" | "corrupt">> = [];
      let bytes = 0;
      for await (const p of pieces) {
        batch.push(Object.assign(p, { file: data, corrupt }));
        bytes += p.length;
        if (bytes >= (opts.batchBytes ?? 0)) {
          yield batch;
          batch = [];
          bytes = 0;
        }
      }
      if (batch.length > 0) yield batch;
    } finally {
      await data?.close();
      await meta?.close();
    }
  }

  /**
   * Where a finalized replica's files are, for a client on this server that reads them itself (a short-circuit read):
   * DATANODE_BLOCK_NOT_FOUND when this store holds no replica of that generation.
   */
  localFiles(block: BlockKey): { dataPath: string; metaPath: string; numBytes: number } {
    const [key, replica] = this.finalized(block);
    const dir = this.subdir(key.blockId);
    return {
      dataPath: join(dir, blockName(replica)),
      metaPath: join(dir, metaName(replica)),
      numBytes: replica.numBytes,
    };
  }

  /**
   * What this store holds of `block` for lease recovery: a finalized replica of that generation, or a kept (or still
   * open) rbw replica with the longest prefix of it that matches its checksums. A writer still attached must be stopped
   * first (its session is the datanode's business); its bytes so far are then counted as they are on disk.
   */
  async recoveryState(block: BlockKey): Promise<RecoveryState> {
    const key = checkBlockKey(block);
    const replica = this.replicas.get(key.blockId);
    if (replica && replica.genStamp === key.genStamp)
      return { state: "REPLICA_FINALIZED", numBytes: replica.numBytes, verifiedBytes: replica.numBytes };
    const writer = this.writers.get(key.blockId);
    if (!writer || writer.block.genStamp !== key.genStamp || writer.status !== "open")
      return { state: "REPLICA_MISSING", numBytes: 0, verifiedBytes: 0 };
    const { numBytes, verifiedBytes } = await writer.verifiedLength();
    return { state: "REPLICA_BEING_WRITTEN", numBytes, verifiedBytes };
  }

  /**
   * Finalizes a kept rbw replica at `length` (a prefix of its verified bytes): the data is truncated, the last partial
   * chunk's checksum recomputed, both files synced and moved into current/. A replica already finalized at `length`
   * is left as it is. DATANODE_BLOCK_NOT_FOUND when there is nothing to finalize, INVALID_ARGUMENT when `length` is
   * longer than what verifies.
   */
  async commitRecovered(block: BlockKey, length: number): Promise<StoredReplica> {
    const key = checkBlockKey(block);
    const replica = this.replicas.get(key.blockId);
    if (replica && replica.genStamp === key.genStamp && replica.numBytes === length) return { ...replica };
    const writer = this.writers.get(key.blockId);
    if (!writer || writer.block.genStamp !== key.genStamp || writer.status !== "open" || !writer.kept)
      throw new HarvestError(
        "DATANODE_BLOCK_NOT_FOUND",
        `no replica of block ${key.blockId} generation ${key.genStamp} kept for recovery here`,
      );
    return writer.commitRecovered(length);
  }

  /** Drops replicas kept for recovery since before `beforeMs` (the namenode never asked for them); returns how many. */
  async dropKeptReplicas(beforeMs: number): Promise<number> {
    let dropped = 0;
    for (const w of [...this.writers.values()]) {
      if (w.keptSinceMs === undefined || w.keptSinceMs >= beforeMs) continue;
      await w.abort();
      dropped += 1;
    }
    return dropped;
  }

  /** Deletes a finalized replica, or one kept for recovery; false when it is not held (deleting twice is harmless). */
  async delete(block: BlockKey): Promise<boolean> {
    const key = checkBlockKey(block);
    const replica = this.replicas.get(key.blockId);
    const kept = this.writers.get(key.blockId);
    if ((!replica || replica.genStamp !== key.genStamp) && kept?.kept && kept.block.genStamp === key.genStamp) {
      await kept.abort();
      return true;
    }
    if (!replica || replica.genStamp !== key.genStamp) return false;
    this.forget(replica);
    const dir = this.subdir(key.blockId);
    // The data first: a meta left alone by a crash is removed by the next scan.
    await this.removeData(join(dir, blockName(replica)));
    await rm(join(dir, metaName(replica)), { force: true });
    this.listener.deleted?.({ ...replica });
    return true;
  }

  /** Removes every replica, finished or not, as a disk reimage would, and takes a new storage id. */
  async wipe(): Promise<{ storageId: string; wiped: number }> {
    const wiped = this.replicas.size;
    for (const w of [...this.writers.values()]) w.invalidate("the storage was wiped");
    this.writers.clear();
    this.replicas.clear();
    this.corruptReplicas.clear();
    this.finalizedBytes = 0;
    await this.trash.close();
    await rm(this.currentDir, { recursive: true, force: true });
    await rm(this.rbwDir, { recursive: true, force: true });
    await rm(this.trashDir, { recursive: true, force: true });
    await this.makeDirs();
    await this.openTrash();
    await this.writeVersion(`DS-${randomUUID()}`);
    return { storageId: this.storageIdValue, wiped };
  }

  /** Notes a replica as corrupt and tells the listener (once per replica). */
  markCorrupt(replica: StoredReplica, reason: string): void {
    if (this.corruptReplicas.has(replica.blockId)) return;
    this.corruptReplicas.set(replica.blockId, { ...replica });
    this.listener.corrupt?.({ ...replica }, reason);
  }

  // ---------------------------------------------------------------------------------------------- internals

  /** @internal The directory of block `blockId`'s finalized replica. */
  subdir(blockId: number): string {
    return join(this.currentDir, `subdir${blockId % SUBDIR_COUNT}`);
  }

  private async init(capacityBytes: number): Promise<void> {
    await mkdir(this.dataDir, { recursive: true });
    await this.makeDirs();
    this.storageIdValue = (await this.readVersion()) ?? "";
    if (!this.storageIdValue) await this.writeVersion(`DS-${randomUUID()}`);
    const fs = await statfs(this.dataDir);
    this.capacity = capacityBytes > 0 ? capacityBytes : fs.blocks * fs.bsize;
    this.diskAvailable = fs.bavail * fs.bsize;
    this.diskSize = fs.blocks * fs.bsize;
    this.diskDevice = (await stat(this.dataDir)).dev;
    await this.scanCurrent();
    await this.scanRbw();
    await this.openTrash();
  }

  /**
   * @internal Removes a replica's data file (a deletion, or an unfinished replica given up): through the trash when
   * deletions are paced, at once otherwise or once the store is closed.
   */
  async removeData(path: string): Promise<void> {
    if ((this.options.deleteBytesPerSecond ?? 0) > 0 && !this.trash.closed) await this.trash.take(path);
    else await rm(path, { force: true });
  }

  private async openTrash(): Promise<void> {
    this.trash = await ReplicaTrash.open({
      dir: this.trashDir,
      bytesPerSecond: this.options.deleteBytesPerSecond ?? 0,
      chunkBytes: this.options.deleteChunkBytes ?? DELETE_CHUNK_BYTES,
      ...(this.options.deletesPaused ? { paused: this.options.deletesPaused } : {}),
      onError: (file, err) => this.listener.trashFailed?.(file, errorMessage(err)),
    });
  }

  /**
   * Keeps each rbw leftover (a data file with the meta of one generation) for lease recovery: its pipeline may have
   * acknowledged its bytes to a writer that the namenode will recover. It is cut to the prefix whose chunks match their
   * checksums (a crash can leave a torn tail) and kept as if its writer had gone away just now, so the datanode answers
   * the namenode's RecoverBlock for it and drops it on a delete command or after its kept-replica time. Leftovers with
   * nothing verified, without their other half, or superseded by a finalized replica go.
   */
  private async scanRbw(): Promise<void> {
    const names = await readdir(this.rbwDir);
    const metas = new Map<number, number[]>();
    const data = new Set<number>();
    for (const name of names) {
      const d = /^blk_(\d+)$/.exec(name);
      const m = /^blk_(\d+)_(\d+)\.meta$/.exec(name);
      if (d) data.add(Number(d[1]));
      else if (m) metas.set(Number(m[1]), [...(metas.get(Number(m[1])) ?? []), Number(m[2])]);
    }
    const keep = new Set<string>();
    const nowMs = Date.now();
    for (const id of data) {
      const gens = (metas.get(id) ?? []).filter(Number.isSafeInteger).sort((a, b) => b - a);
      const genStamp = gens[0];
      const finalized = this.replicas.get(id);
      if (
        genStamp === undefined ||
        !Number.isSafeInteger(id) ||
        id <= 0 ||
        (finalized !== undefined && finalized.genStamp >= genStamp)
      )
        continue;
      const writer = new ReplicaWriter(this, { blockId: id, genStamp }, this.rbwDir);
      const verified = await writer.adoptLeftover(nowMs);
      if (verified <= 0) continue;
      this.writers.set(id, writer);
      keep.add(blockName(writer.block)).add(metaName(writer.block));
      this.scan.rbwKept++;
    }
    for (const name of names) {
      if (keep.has(name)) continue;
      await rm(join(this.rbwDir, name), { recursive: true, force: true });
      if (/^blk_\d+$/.test(name)) this.scan.rbwRemoved++;
    }
  }

  private async makeDirs(): Promise<void> {
    await mkdir(this.currentDir, { recursive: true });
    await mkdir(this.rbwDir, { recursive: true });
  }

  private async readVersion(): Promise<string | undefined> {
    try {
      const text = await readFile(join(this.dataDir, "VERSION"), "utf8");
      const m = /^storageID=(DS-[0-9a-f-]{36})$/m.exec(text);
      return m?.[1];
    } catch {
      return undefined;
    }
  }

  private async writeVersion(storageId: string): Promise<void> {
    const file = join(this.dataDir, "VERSION");
    const fh = await open(`${file}.tmp`, "w");
    try {
      await fh.writeFile(`storageID=${storageId}\nlayoutVersion=${LAYOUT_VERSION}\n`);
      await fh.sync();
    } finally {
      await fh.close();
    }
    await rename(`${file}.tmp`, file);
    await fsyncDir(this.dataDir);
    this.storageIdValue = storageId;
  }

  private async scanCurrent(): Promise<void> {
    for (const sub of await readdir(this.currentDir)) {
      const m = /^subdir(\d+)$/.exec(sub);
      if (!m) continue;
      const dir = join(this.currentDir, sub);
      const data = new Set<number>();
      const metas = new Map<number, number[]>();
      for (const name of await readdir(dir)) {
        const d = /^blk_(\d+)$/.exec(name);
        const mm = /^blk_(\d+)_(\d+)\.meta$/.exec(name);
        if (d) data.add(Number(d[1]));
        else if (mm) {
          const id = Number(mm[1]);
          metas.set(id, [...(metas.get(id) ?? []), Number(mm[2])]);
        }
      }
      for (const id of new Set([...data, ...metas.keys()])) {
        const gens = (metas.get(id) ?? []).sort((a, b) => b - a);
        const valid = Number.isSafeInteger(id) && id > 0 && `subdir${id % SUBDIR_COUNT}` === sub;
        const newest = gens[0];
        if (!valid || !data.has(id) || newest === undefined || !gens.every(Number.isSafeInteger)) {
          // A half-finished finalize or a stray file: never acknowledged, or unreadable by id.
          if (data.has(id)) await rm(join(dir, `blk_${id}`), { force: true });
          for (const g of gens) await rm(join(dir, `blk_${id}_${g}.meta`), { force: true });
          this.scan.orphansRemoved++;
          continue;
        }
        // A crash while replacing an older generation can leave its meta behind; the newest wins.
        for (const g of gens.slice(1)) await rm(join(dir, `blk_${id}_${g}.meta`), { force: true });
        const replica: StoredReplica = {
          blockId: id,
          genStamp: newest,
          numBytes: (await stat(join(dir, `blk_${id}`))).size,
        };
        this.remember(replica);
        this.scan.replicas++;
        const metaBytes = (await stat(join(dir, metaName(replica)))).size;
        if (metaBytes !== META_HEADER_BYTES + chunksFor(replica.numBytes) * 4)
          this.markCorrupt(replica, "meta file does not match the data's length");
      }
    }
  }

  private remember(replica: StoredReplica): void {
    const old = this.replicas.get(replica.blockId);
    if (old) this.finalizedBytes -= old.numBytes;
    this.replicas.set(replica.blockId, replica);
    this.finalizedBytes += replica.numBytes;
  }

  private forget(replica: StoredReplica): void {
    this.replicas.delete(replica.blockId);
    this.corruptReplicas.delete(replica.blockId);
    this.finalizedBytes -= replica.numBytes;
  }

  /** Called by a writer: room left for `bytes` more? */
  checkSpace(bytes: number, blockId: number): void {
    if (this.usedBytes() + bytes > this.capacity)
      throw new HarvestError(
        "DATANODE_NO_SPACE",
        `no room for ${bytes} more bytes of block ${blockId}: ${this.usedBytes()} of ${this.capacity} used`,
      );
  }

  /** Called by a writer once its files are synced: moves them into current/ and records the replica. */
  async commit(writer: ReplicaWriter, numBytes: number): Promise<StoredReplica> {
    const key = writer.block;
    const dir = this.subdir(key.blockId);
    await mkdir(dir, { recursive: true });
    const old = this.replicas.get(key.blockId);
    // Meta first: a crash between the renames leaves a meta without data, which the next scan removes.
    await rename(join(this.rbwDir, metaName(key)), join(dir, metaName(key)));
    await rename(join(this.rbwDir, blockName(key)), join(dir, blockName(key)));
    if (old && old.genStamp !== key.genStamp) await rm(join(dir, metaName(old)), { force: true });
    await fsyncDir(dir);
    await fsyncDir(this.rbwDir);
    const replica: StoredReplica = { ...key, numBytes };
    this.writers.delete(key.blockId);
    this.corruptReplicas.delete(key.blockId);
    this.remember(replica);
    this.listener.finalized?.({ ...replica });
    return { ...replica };
  }

  /** Called by a writer that gave up. */
  release(writer: ReplicaWriter): void {
    if (this.writers.get(writer.block.blockId) === writer) this.writers.delete(writer.block.blockId);
  }
}
