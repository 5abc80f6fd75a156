/**
 * A replica being written (datanode/block-store.ts describes the layout and its invariants): contiguous, chunk-aligned
 * writes verified on arrival, queued and flushed in batches, synced behind, then finalized into current/ by the store
 * or aborted; kept in rbw/ for lease recovery when its writer goes away.
 */
import { checksumsMatch, chunkChecksum, chunkChecksums, firstBadChunk } from "../common/checksum.js";
import type { FileHandle } from "node:fs/promises";
import { open, readFile, rm, truncate } from "node:fs/promises";
import { join } from "node:path";
import { asHarvestError, HarvestError } from "../common/errors.js";
import { chunksFor, META_HEADER_BYTES, metaHeader } from "../common/replica-file.js";
import type { DirectWrites } from "./direct-write.js";
import { writeAll, writevAll } from "./positional-write.js";
import { blockName, CHUNK_SIZE, metaName, noSpaceError } from "./replica-files.js";
import type { BlockKey, StoredReplica } from "./replica-files.js";

/** A replica being written starts a background fdatasync each time this many more bytes are in its data file. */
const SYNC_BEHIND_BYTES = 8 * 1024 * 1024;

/** What a ReplicaWriter asks of its BlockStore (the store implements it). */
export interface ReplicaWriterStore {
  readonly direct: DirectWrites | undefined;
  /** The directory of block `blockId`'s finalized replica. */
  subdir(blockId: number): string;
  /** Removes a replica's data file (through the trash when deletions are paced). */
  removeData(path: string): Promise<void>;
  /** Throws DATANODE_NO_SPACE unless there is room for `bytes` more. */
  checkSpace(bytes: number, blockId: number): void;
  /** Moves a synced replica into current/ and records it. */
  commit(writer: ReplicaWriter, numBytes: number): Promise<StoredReplica>;
  /** Forgets a writer that gave up. */
  release(writer: ReplicaWriter): void;
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
    private readonly store: ReplicaWriterStore,
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
