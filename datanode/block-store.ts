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
import { checksumsMatch, chunkChecksum, chunkChecksums, firstBadChunk } from "../common/checksum.js";
import { randomUUID } from "node:crypto";
import type { FileHandle } from "node:fs/promises";
import { mkdir, open, readdir, readFile, rename, rm, stat, statfs, truncate } from "node:fs/promises";
import { join } from "node:path";
import { asHarvestError, errorMessage, HarvestError } from "../common/errors.js";
import { chunksFor, META_HEADER_BYTES, metaHeader, readReplicaRange } from "../common/replica-file.js";
import type { PieceBuffers, ReplicaPiece } from "../common/replica-file.js";
import { DirectWrites } from "./direct-write.js";
import { ReplicaTrash } from "./replica-trash.js";
import { writeAll, writevAll } from "./positional-write.js";

/** Bytes covered by one checksum. */
export const CHUNK_SIZE = 512;
/** Largest piece `read()` yields by default (chunk-aligned). */
export const READ_PIECE_BYTES = 64 * 1024;

/** A replica being written starts a background fdatasync each time this many more bytes are in its data file. */
const SYNC_BEHIND_BYTES = 8 * 1024 * 1024;
/** Number of `subdir<n>` directories under current/. */
export const SUBDIR_COUNT = 64;

const LAYOUT_VERSION = 1;

/** A block as the store names it: which block and which generation of it. */
export interface BlockKey {
  blockId: number;
  genStamp: number;
}

/** A finalized replica the store holds. */
export interface StoredReplica extends BlockKey {
  numBytes: number;
}

/** What a store holds of a block under lease recovery (see `BlockStore.recoveryState`). */
export interface RecoveryState {
  state: "REPLICA_MISSING" | "REPLICA_BEING_WRITTEN" | "REPLICA_FINALIZED";
  /** Bytes in the replica. */
  numBytes: number;
  /** The longest prefix whose every chunk matches its stored checksum. */
  verifiedBytes: number;
}

/** Turns a file system "no room" failure into DATANODE_NO_SPACE; anything else is returned unchanged. */
export function noSpaceError(err: unknown, blockId: number): unknown {
  const code = (err as NodeJS.ErrnoException | undefined)?.code;
  if (code !== "ENOSPC" && code !== "EDQUOT") return err;
  return new HarvestError("DATANODE_NO_SPACE", `the disk is full: cannot write block ${blockId} (${code})`, {
    details: { blockId: String(blockId) },
    cause: err,
  });
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

/** Validates a block id from anywhere (the wire included): a positive safe integer, else DATANODE_BAD_BLOCK_ID. */
export function checkBlockId(blockId: unknown): number {
  if (typeof blockId !== "number" || !Number.isSafeInteger(blockId) || blockId <= 0)
    throw new HarvestError("DATANODE_BAD_BLOCK_ID", `bad block id ${String(blockId)}: must be a positive integer`, {
      details: { field: "blockId" },
    });
  return blockId;
}

/** Validates a generation stamp: a non-negative safe integer, else DATANODE_BAD_BLOCK_ID. */
export function checkGenStamp(genStamp: unknown): number {
  if (typeof genStamp !== "number" || !Number.isSafeInteger(genStamp) || genStamp < 0)
    throw new HarvestError(
      "DATANODE_BAD_BLOCK_ID",
      `bad generation stamp ${String(genStamp)}: must be a non-negative integer`,
      { details: { field: "genStamp" } },
    );
  return genStamp;
}

/** Validates both halves of a block key. */
export function checkBlockKey(block: { blockId?: unknown; genStamp?: unknown } | null | undefined): BlockKey {
  if (!block) throw new HarvestError("DATANODE_BAD_BLOCK_ID", "no block given", { details: { field: "block" } });
  return { blockId: checkBlockId(block.blockId), genStamp: checkGenStamp(block.genStamp) };
}

export { chunkChecksums };

function blockName(b: BlockKey): string {
  return `blk_${b.blockId}`;
}

function metaName(b: BlockKey): string {
  return `blk_${b.blockId}_${b.genStamp}.meta`;
}

async function fsyncDir(dir: string): Promise<void> {
  const fh = await open(dir, "r");
  try {
    await fh.sync();
  } finally {
    await fh.close();
  }
}

/** The replicas of one datanode. Open with `BlockStore.open()`. */
export class BlockStore {
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

/**
 * A replica being written: contiguous, chunk-aligned writes whose checksums are verified on arrival, then `finalize`
 * (fsync and move into current/) or `abort` (delete). Operations run one at a time in call order.
 */
export class ReplicaWriter {
  private data: FileHandle | undefined;
  /** The data file opened for direct writes (datanode/direct-write.ts), when the store makes them. */
  private direct: FileHandle | undefined;
  private meta: FileHandle | undefined;
  private written = 0;
  private state: "open" | "finalized" | "aborted" = "open";
  private invalidReason: string | undefined;
  /** Set when its writer went away and the replica is kept for lease recovery (ms since the epoch). */
  private keptSince: number | undefined;
  private tail: Promise<unknown> = Promise.resolve();
  /** Bytes accepted by `write` (in the files or queued for the next flush). */
  private accepted = 0;
  /** Accepted writes waiting for the next flush. */
  private queued: QueuedWrite[] = [];
  private flushScheduled = false;
  /** Set when a flush failed: every later write fails with it. */
  private writeFailure: HarvestError | undefined;
  /** Bytes a sync-behind has made durable, and the one in flight. */
  private syncedBytes = 0;
  private syncBehind: Promise<void> | undefined;

  constructor(
    private readonly store: BlockStore,
    readonly block: BlockKey,
    private readonly rbwDir: string,
  ) {}

  /** Where the replica is in its life. */
  get status(): "open" | "finalized" | "aborted" {
    return this.state;
  }

  /** Bytes in the files so far. */
  get bytesWritten(): number {
    return this.written;
  }

  /** Bytes accepted so far, in the files or about to be (the next write must start here; they count as used space). */
  get bytesAccepted(): number {
    return this.accepted;
  }

  /** Whether the replica is kept for lease recovery (its writer went away). */
  get kept(): boolean {
    return this.keptSince !== undefined;
  }

  /** When the replica was kept for lease recovery, or undefined. */
  get keptSinceMs(): number | undefined {
    return this.keptSince;
  }

  /**
   * @internal An rbw leftover found at start: cuts its files to the checksum-verified prefix and keeps it for lease
   * recovery (as `keepForRecovery` would). Returns the bytes kept; 0 means nothing verified (the caller deletes it).
   */
  async adoptLeftover(nowMs: number): Promise<number> {
    const { verifiedBytes } = await this.verifiedLength();
    if (verifiedBytes <= 0) return 0;
    await truncate(join(this.rbwDir, blockName(this.block)), verifiedBytes);
    await truncate(join(this.rbwDir, metaName(this.block)), META_HEADER_BYTES + chunksFor(verifiedBytes) * 4);
    this.written = verifiedBytes;
    this.accepted = verifiedBytes;
    this.keptSince = nowMs;
    return verifiedBytes;
  }

  /** @internal Creates the rbw files. */
  async openFiles(): Promise<void> {
    try {
      this.data = await open(join(this.rbwDir, blockName(this.block)), "w");
      this.direct = await this.store.direct?.openFor(join(this.rbwDir, blockName(this.block)));
      this.meta = await open(join(this.rbwDir, metaName(this.block)), "w");
      await this.meta.write(metaHeader(), 0, META_HEADER_BYTES, 0);
    } catch (err) {
      throw noSpaceError(err, this.block.blockId);
    }
  }

  /**
   * The writer went away before the last packet: the replica stays in rbw/ (closed, no more writes) for lease
   * recovery, instead of being deleted. Later `abort` (a delete command) or `commitRecovered` settles it.
   */
  keepForRecovery(nowMs = Date.now()): Promise<void> {
    return this.serial(async () => {
      if (this.state !== "open" || this.keptSince !== undefined) return;
      this.keptSince = nowMs;
      await this.closeFiles();
    });
  }

  /**
   * The bytes on disk and the longest prefix of them whose chunks match the stored checksums: of the rbw files, or of
   * the replica in current/ once this writer finalized it.
   */
  verifiedLength(): Promise<{ numBytes: number; verifiedBytes: number }> {
    return this.serial(async () => {
      const dir = this.state === "finalized" ? this.store.subdir(this.block.blockId) : this.rbwDir;
      const dataPath = join(dir, blockName(this.block));
      const metaPath = join(dir, metaName(this.block));
      const data = await readFile(dataPath).catch(() => Buffer.alloc(0));
      const meta = await readFile(metaPath).catch(() => Buffer.alloc(0));
      let verified = 0;
      if (meta.length >= META_HEADER_BYTES && meta.subarray(0, META_HEADER_BYTES).equals(metaHeader())) {
        const sums = Math.floor((meta.length - META_HEADER_BYTES) / 4);
        // The data's chunk CRCs in one native call, then compared with the stored ones in order.
        const actual = chunkChecksums(data.subarray(0, Math.min(data.length, sums * CHUNK_SIZE)));
        for (let i = 0; i < actual.length; i++) {
          if (actual[i] !== meta.readUInt32BE(META_HEADER_BYTES + i * 4)) break;
          verified = Math.min(data.length, (i + 1) * CHUNK_SIZE);
        }
      }
      return { numBytes: data.length, verifiedBytes: verified };
    });
  }

  /** @internal See BlockStore.commitRecovered. */
  commitRecovered(length: number): Promise<StoredReplica> {
    return this.serial(async () => {
      if (this.invalidReason !== undefined || this.state !== "open")
        throw new HarvestError("DATANODE_BLOCK_NOT_FOUND", `block ${this.block.blockId} is no longer kept here`);
      const dataPath = join(this.rbwDir, blockName(this.block));
      const metaPath = join(this.rbwDir, metaName(this.block));
      const data = await readFile(dataPath);
      const meta = await readFile(metaPath);
      const chunks = chunksFor(length);
      if (
        !(Number.isSafeInteger(length) && length >= 0 && length <= data.length) ||
        meta.length < META_HEADER_BYTES + chunks * 4
      )
        throw new HarvestError(
          "INVALID_ARGUMENT",
          `block ${this.block.blockId}: cannot keep ${length} bytes of a replica of ${data.length}`,
          { details: { field: "length" } },
        );
      const whole = chunkChecksums(data.subarray(0, Math.floor(length / CHUNK_SIZE) * CHUNK_SIZE));
      for (let i = 0; i < whole.length; i++) {
        if (whole[i] !== meta.readUInt32BE(META_HEADER_BYTES + i * 4))
          throw new HarvestError(
            "DATANODE_CHECKSUM_MISMATCH",
            `block ${this.block.blockId}: chunk ${i} does not match its checksum; cannot keep ${length} bytes`,
          );
      }
      try {
        await truncate(dataPath, length);
        await truncate(metaPath, META_HEADER_BYTES + chunks * 4);
        const fd = await open(metaPath, "r+");
        const dfd = await open(dataPath, "r+");
        try {
          // A kept prefix ending mid-chunk gets that partial chunk's own checksum.
          if (length % CHUNK_SIZE !== 0) {
            const tail = data.subarray((chunks - 1) * CHUNK_SIZE, length);
            const sum = Buffer.alloc(4);
            sum.writeUInt32BE(chunkChecksum(tail), 0);
            await fd.write(sum, 0, 4, META_HEADER_BYTES + (chunks - 1) * 4);
          }
          await fd.sync();
          await dfd.sync();
        } finally {
          await fd.close();
          await dfd.close();
        }
      } catch (err) {
        throw noSpaceError(err, this.block.blockId);
      }
      this.written = length;
      this.accepted = length;
      const replica = await this.store.commit(this, length);
      this.state = "finalized";
      this.keptSince = undefined;
      return replica;
    });
  }

  /**
   * Appends `data` at `offset`, which must be where the previous write ended, and must be chunk-aligned (only the
   * final write may end mid-chunk). `checksums` holds the CRC32C of each 512-byte chunk of `data`; any mismatch is
   * refused with DATANODE_CHECKSUM_MISMATCH and nothing is written. With `verified`, the caller has checked them
   * against the data already, or leaves that to the pipeline's last node (data-transfer.ts, `pipelineVerify`). `data`
   * may be consecutive pieces (a packet as the socket's chunks hold it): they are checked and written as they are,
   * never joined.
   *
   * A write is checked and accepted at once, and resolves when its bytes (and checksums) are in the files. Writes
   * accepted while earlier ones are on their way to the disk are written together by the next flush: one `writev` of
   * their data and one write of their checksums (group commit: a 64 KiB packet no longer costs two file-system round
   * trips). A failed flush fails every write accepted after it; a refused write changes nothing.
   */
  write(
    offset: number,
    data: Uint8Array | readonly Uint8Array[],
    checksums: readonly number[],
    opts: { verified?: boolean } = {},
  ): Promise<void> {
    let sums: Buffer;
    const pieces = data instanceof Uint8Array ? [data] : data;
    let length = 0;
    for (const p of pieces) length += p.length;
    try {
      this.checkOpen();
      if (this.writeFailure) throw this.writeFailure;
      if (!(Number.isSafeInteger(offset) && offset === this.accepted))
        throw new HarvestError(
          "DATANODE_PROTOCOL_ERROR",
          `block ${this.block.blockId}: write at offset ${offset}, expected ${this.accepted}`,
          { details: { field: "offset" } },
        );
      if (length === 0 && checksums.length === 0) return this.flushed();
      if (this.accepted % CHUNK_SIZE !== 0)
        throw new HarvestError(
          "DATANODE_PROTOCOL_ERROR",
          `block ${this.block.blockId}: data after a partial chunk at offset ${this.accepted}`,
        );
      const chunks = Math.ceil(length / CHUNK_SIZE);
      if (checksums.length !== chunks)
        throw new HarvestError(
          "DATANODE_CHECKSUM_MISMATCH",
          `block ${this.block.blockId}: ${checksums.length} checksums for ${chunks} chunks at offset ${offset}`,
        );
      // One native call checks the packet (common/checksum.ts); the bad chunk is named on a failure.
      if (!opts.verified && !checksumsMatch(pieces, checksums))
        throw new HarvestError(
          "DATANODE_CHECKSUM_MISMATCH",
          `block ${this.block.blockId}: checksum mismatch in chunk ${offset / CHUNK_SIZE + Math.max(0, firstBadChunk(pieces, checksums))}`,
        );
      this.store.checkSpace(length, this.block.blockId);
      sums = Buffer.allocUnsafe(chunks * 4);
      for (let i = 0; i < chunks; i++) sums.writeUInt32BE(checksums[i]! >>> 0, i * 4);
    } catch (err) {
      return Promise.reject(err as Error);
    }
    this.accepted += length;
    return new Promise<void>((resolve, reject) => {
      this.queued.push({ offset, pieces, length, sums, resolve, reject });
      if (!this.flushScheduled) {
        this.flushScheduled = true;
        void this.serial(() => this.flushQueued());
      }
    });
  }

  /** Resolves once every write accepted so far is in the files (or rejects with the failure that stopped them). */
  private flushed(): Promise<void> {
    return this.serial(async () => {
      if (this.writeFailure) throw this.writeFailure;
    });
  }

  /** Writes every accepted write still queued: their data in one writev, their checksums in one write. */
  private async flushQueued(): Promise<void> {
    this.flushScheduled = false;
    const batch = this.queued;
    this.queued = [];
    try {
      if (this.writeFailure) throw this.writeFailure;
      this.checkOpen();
      const first = batch[0]!;
      const metaAt = META_HEADER_BYTES + (first.offset / CHUNK_SIZE) * 4;
      const sums = batch.length === 1 ? first.sums : Buffer.concat(batch.map((w) => w.sums));
      try {
        let length = 0;
        for (const w of batch) length += w.length;
        await Promise.all([
          this.writeData(
            batch.flatMap((w) => w.pieces),
            length,
            first.offset,
          ),
          writeAll(this.meta!, sums, metaAt),
        ]);
      } catch (err) {
        throw noSpaceError(err, this.block.blockId);
      }
      for (const w of batch) this.written += w.length;
      for (const w of batch) w.resolve();
      this.startSyncBehind();
    } catch (err) {
      // Nothing after a failed write can land in the right place: every later write fails too.
      this.writeFailure ??= asHarvestError(err);
      for (const w of batch) w.reject(this.writeFailure);
    }
  }

  /** Writes data at `position`: directly when the store makes direct writes and the run is aligned, else buffered. */
  private async writeData(pieces: readonly Uint8Array[], length: number, position: number): Promise<void> {
    if (this.direct && (await this.store.direct!.write(this.direct, pieces, length, position))) return;
    await writevAll(this.data!, pieces, position);
  }

  /**
   * Sync-behind (as HDFS's dfs.datanode.sync.behind.writes): once SYNC_BEHIND_BYTES more are in the data file, an
   * fdatasync starts in the background, so the disk writes the block while it still arrives and the fsync before the
   * last ack has little left to do (measured: put, replication 1, about 12 % faster). It changes no guarantee: acks
   * still wait for that final fsync. A failed background sync fails the replica's later writes and its finalize: Linux
   * reports a writeback error to one fsync per file, so the final fsync might not see it again.
   */
  private startSyncBehind(): void {
    const data = this.data;
    if (this.syncBehind || !data || this.written - this.syncedBytes < SYNC_BEHIND_BYTES) return;
    const upTo = this.written;
    this.syncBehind = data
      .datasync()
      .then(
        () => {
          this.syncedBytes = upTo;
        },
        (err: unknown) => {
          this.writeFailure ??= asHarvestError(noSpaceError(err, this.block.blockId));
        },
      )
      .finally(() => {
        this.syncBehind = undefined;
      });
  }

  /** Fsyncs data and meta and moves the replica into current/; `numBytes` must equal the bytes written. */
  finalize(numBytes: number): Promise<StoredReplica> {
    return this.serial(async () => {
      this.checkOpen();
      if (this.writeFailure) throw this.writeFailure;
      if (numBytes !== this.written)
        throw new HarvestError(
          "DATANODE_PROTOCOL_ERROR",
          `block ${this.block.blockId}: finalize at ${numBytes} bytes but ${this.written} were written`,
        );
      await this.syncBehind;
      if (this.writeFailure) throw this.writeFailure;
      try {
        await this.data!.sync();
        await this.meta!.sync();
      } catch (err) {
        throw noSpaceError(err, this.block.blockId);
      }
      await this.closeFiles();
      this.checkOpen();
      const replica = await this.store.commit(this, numBytes);
      this.state = "finalized";
      return replica;
    });
  }

  /** Deletes the unfinished replica; harmless after finalize or a previous abort. */
  abort(): Promise<void> {
    return this.serial(async () => {
      if (this.state !== "open") return;
      this.state = "aborted";
      await this.closeFiles();
      this.store.release(this);
      if (this.invalidReason === undefined) {
        await this.store.removeData(join(this.rbwDir, blockName(this.block)));
        await rm(join(this.rbwDir, metaName(this.block)), { force: true });
      }
    });
  }

  /** @internal The store dropped this replica (a wipe): later calls fail, nothing more is written. */
  invalidate(reason: string): void {
    this.invalidReason = reason;
  }

  private checkOpen(): void {
    if (this.invalidReason !== undefined)
      throw new HarvestError("DATANODE_BLOCK_NOT_FOUND", `block ${this.block.blockId}: ${this.invalidReason}`);
    if (this.keptSince !== undefined)
      throw new HarvestError("DATANODE_PROTOCOL_ERROR", `block ${this.block.blockId} is kept for lease recovery`);
    if (this.state !== "open")
      throw new HarvestError("DATANODE_PROTOCOL_ERROR", `block ${this.block.blockId} is already ${this.state}`);
  }

  private async closeFiles(): Promise<void> {
    const [d, dd, m] = [this.data, this.direct, this.meta];
    this.data = undefined;
    this.direct = undefined;
    this.meta = undefined;
    await d?.close();
    await dd?.close();
    await m?.close();
  }

  private serial<T>(fn: () => Promise<T>): Promise<T> {
    const run = this.tail.then(fn, fn);
    this.tail = run.catch(() => undefined);
    return run;
  }
}

/** A write accepted by a ReplicaWriter and not yet in its files. */
interface QueuedWrite {
  offset: number;
  pieces: readonly Uint8Array[];
  length: number;
  sums: Buffer;
  resolve: () => void;
  reject: (err: Error) => void;
}
