/**
 * A DfsClient's write stream (a new file, block after block through pipelines of datanodes, with failover) and `put`'s
 * reader of a local file into it.
 */
import type { DfsHost } from "./dfs-host.js";
import type { DfsCreateOptions } from "./dfs-options.js";
import { BlockWrite } from "./block-write.js";
import type { KeptPacket } from "./block-write.js";
import { CHUNK_BYTES } from "../common/checksum.js";
import { dataFrameHeadBytes } from "../common/block-transfer.js";
import { ByteQueue } from "../common/byte-queue.js";
import { open } from "node:fs/promises";
import type { FileHandle } from "node:fs/promises";
import { Writable } from "node:stream";
import { finished } from "node:stream/promises";
import { parentPath } from "../common/dfs-path.js";
import { detailsOf, errorMessage, HarvestError, isHarvestError } from "../common/errors.js";
import type { BlockOutput } from "../proto/generated/harvest/v1/Block.js";
import type { LocatedBlockOutput } from "../proto/generated/harvest/v1/LocatedBlock.js";
import { ReplayArena } from "./replay-arena.js";
import { describeRefusal, isTransientRefusal, refusalDetails, refusalOfDetails } from "../common/placement-refusal.js";
import type { PlacementRefusal } from "../common/placement-refusal.js";
import { checkWriteWaitMs, waitExpiredMessage, WriteWait } from "./write-wait.js";
import { setTimeout as sleep } from "node:timers/promises";

/**
 * Data bytes per write packet (a multiple of CHUNK_BYTES). HDFS sends 64 KiB; here each packet costs every hop a
 * frame, an ack and their socket writes. 256 KiB packets put 10-25 % more through than 64 KiB ones on this 2-core
 * machine; 1 MiB packets, with the datanodes' queue bounded in bytes (data-transfer.ts), 5-10 % more again (paired
 * puts of 1 GiB, replication 1: 773-823 against 676-785 MB/s, and the datanode's CPU 0.85-0.93 against 1.0-1.28 s).
 * A datanode takes up to MAX_PACKET_BYTES; `put` reads at least a packet at a time (see writeLocalFile).
 */
export const PACKET_BYTES = 1024 * 1024;
/** How much of a local file `put` reads at a time. */
const LOCAL_READ_BYTES = 1024 * 1024;

/** Read buffers `put` cycles through: one being read while the write stream takes another, and a spare. */
const LOCAL_READ_RING = 3;

/**
 * Writes a local file into `out` (a DfsWriteStream) and ends it: large reads (16 packets each) into a few buffers used
 * again and again, the next read running while `out` takes the previous one. A fresh 1 MiB buffer per read, as a file
 * read stream makes, grows V8's external memory by a GiB per GiB put, and V8 answers with a full collection every few
 * dozen reads (about a hundred per GiB, profiled). A buffer is read into again only after `out` has taken it (the
 * write's callback): `out` copies what it keeps for a replay (ReplayArena), and the tail under one packet that it may
 * still hold in its queue is taken first by the next write, two reads before that buffer is reused. That holds for
 * full 1 MiB reads (each at least a packet); a short read (the end of the file, or a pipe) is written as a
 * copy, so a queue holding several short reads never points into a buffer being read into.
 */
export async function writeLocalFile(localPath: string, out: Writable): Promise<void> {
  // Listening from the start: a stream that fails (say the file exists) emits 'error' before any write returns.
  const done = finished(out);
  done.catch(() => undefined);
  let fh: FileHandle | undefined;
  let next: Promise<Buffer> | undefined;
  try {
    fh = await open(localPath, "r");
    const file = fh;
    const ring = Array.from({ length: LOCAL_READ_RING }, () => Buffer.allocUnsafeSlow(LOCAL_READ_BYTES));
    let n = 0;
    const readNext = (): Promise<Buffer> =>
      file
        .read(ring[n++ % LOCAL_READ_RING]!, 0, LOCAL_READ_BYTES, null)
        .then((r) => (r.bytesRead === LOCAL_READ_BYTES ? r.buffer : Buffer.from(r.buffer.subarray(0, r.bytesRead))));
    next = readNext();
    for (;;) {
      const chunk = await next;
      if (chunk.length === 0) break;
      next = readNext();
      await new Promise<void>((resolve, reject) => out.write(chunk, (err) => (err ? reject(err) : resolve())));
    }
    out.end();
    await done;
  } catch (err) {
    // The write stream's own failure (a namenode refusal, a pipeline given up) is the one to report.
    const cause = (out as Writable & { errored: Error | null }).errored ?? (err as Error);
    out.destroy(cause);
    // Reported once the stream has removed the file it created (its _destroy): a retry finds nothing in its way.
    await done.catch(() => undefined);
    throw cause;
  } finally {
    await next?.catch(() => undefined);
    await fh?.close();
  }
}

/** A writable stream into a new file (DfsClient.createWriteStream). */
export class DfsWriteStream extends Writable {
  private created = false;
  private blockSize = 0;
  private previous: BlockOutput | undefined;
  private current: BlockWrite | undefined;
  /** Bytes taken but not yet sent in a packet (a large write is sliced, never re-joined per packet). */
  private readonly pending = new ByteQueue();
  /** Copies of the current block's packets, for a failover's replay (reused block after block, then by the client). */
  private readonly replay: ReplayArena;
  private acked = 0;
  /** The most ever reported to onProgress (a replay after a failover acknowledges bytes again). */
  private reported = 0;
  private readonly excluded = new Set<string>();
  /** The error code of each failed pipeline attempt (a full disk is told apart from other failures). */
  private readonly failureCodes: string[] = [];
  /** Pipelines refused for a block token of an older namenode term (STALE_EPOCH): none of their datanodes is bad. */
  private staleTokens = 0;
  /** Waits out datanodes that cannot take the next block for now (busy primaries, full disks). */
  private readonly wait: WriteWait;
  /** The namenode closed the file (Complete answered): nothing is left to clean up. */
  private completed = false;
  /** Aborted when the stream is destroyed: cuts a wait's pause short. */
  private readonly stopped = new AbortController();

  constructor(
    private readonly client: DfsHost,
    private readonly path: string,
    private readonly opts: DfsCreateOptions,
  ) {
    super({ highWaterMark: LOCAL_READ_BYTES });
    const waitMs = opts.writeWaitMs ?? client.options.writeWaitMs;
    checkWriteWaitMs(waitMs, "writeWaitMs");
    this.wait = new WriteWait(waitMs, client.options.writeWaitRng);
    this.replay = new ReplayArena(undefined, client.slabPool);
    const cancel = (): void => {
      this.destroy(
        new HarvestError("DFS_WRITE_FAILED", `the write of ${path} was cancelled`, { details: { path: this.path } }),
      );
    };
    if (opts.signal?.aborted) cancel();
    else opts.signal?.addEventListener("abort", cancel, { once: true, signal: this.stopped.signal });
  }

  override _construct(callback: (err?: Error | null) => void): void {
    // Like HDFS's create(createParent=true): missing parent directories are made first.
    const parent = parentPath(this.path);
    const parentMade =
      parent === "/"
        ? Promise.resolve()
        : this.client
            .nnCallRetrying("mkdirs", this.client.namenode.mkdirs, { path: parent, owner: this.client.options.user })
            .then(() => undefined);
    parentMade
      .then(() =>
        this.client.nnCallRetrying("create", this.client.namenode.create, {
          path: this.path,
          owner: this.client.options.user,
          replication: this.opts.replication ?? 0,
          blockSize: this.opts.blockSizeBytes ?? 0,
          overwrite: this.opts.overwrite ?? false,
          clientName: this.client.options.clientName,
          writerDatanodeId: this.client.options.writerDatanodeId,
        }),
      )
      .then(
        (status) => {
          this.created = true;
          this.client.leases.add(this);
          this.blockSize = status.blockSize;
          if (!(this.blockSize > 0)) throw new HarvestError("DFS_WRITE_FAILED", "the namenode reported no block size");
          callback();
        },
        (err: unknown) => callback(err as Error),
      )
      .catch((err: unknown) => callback(err as Error));
  }

  override _write(chunk: Buffer, _enc: BufferEncoding, callback: (err?: Error | null) => void): void {
    this.take(chunk).then(() => callback(), callback);
  }

  override _final(callback: (err?: Error | null) => void): void {
    this.finishAll().then(() => {
      // Every packet is acknowledged: no socket reads from the slabs any more, and the client's next stream may.
      // A stream that fails keeps its slabs out of the pool (a pipeline given up may still hold packets unsent).
      this.replay.release();
      callback();
    }, callback);
  }

  override _destroy(err: Error | null, callback: (err?: Error | null) => void): void {
    // Finished, failed or destroyed: this stream's file needs no more renewals (other open streams keep theirs).
    this.client.leases.remove(this);
    this.stopped.abort();
    if (!this.created || this.completed) return callback(err);
    // Failed or abandoned before Complete: the file this stream created goes, blocks and lease with it (HDFS's client
    // deletes a file whose create fails before close), so that a retry, by this client or another, finds nothing in
    // its way. The namenode deletes it only while this client still holds its lease; if the call fails, lease recovery
    // closes the file later, as it does for a writer that died.
    this.current?.close();
    this.client
      .nnCall(this.client.namenode.delete, {
        path: this.path,
        recursive: false,
        clientName: this.client.options.clientName,
      })
      .catch((e: unknown) =>
        this.client.options.logger.warn("could not remove the file of a failed write; lease recovery will close it", {
          path: this.path,
          error: errorMessage(e),
        }),
      )
      .finally(() => callback(err));
  }

  private async take(chunk: Buffer): Promise<void> {
    let data = chunk;
    while (data.length > 0) {
      const room = this.blockSize - this.blockBytes();
      const piece = data.subarray(0, room);
      data = data.subarray(piece.length);
      this.pending.push(piece);
      while (this.pending.length >= PACKET_BYTES) await this.sendPacket(this.pending.take(PACKET_BYTES));
      if (this.blockBytes() === this.blockSize) await this.endBlock();
    }
  }

  /** Bytes of the current block, sent or pending. */
  private blockBytes(): number {
    return (this.current?.bytes ?? 0) + this.pending.length;
  }

  private async sendPacket(data: Buffer): Promise<void> {
    this.current ??= await this.newPipeline([]);
    try {
      // Kept with room for the frame's head before it (the transfer port sends head and data as one buffer).
      const headRoom = this.replay.keep(data, dataFrameHeadBytes(Math.ceil(data.length / CHUNK_BYTES)));
      await this.current.add({ data: headRoom.subarray(headRoom.length - data.length), headRoom });
    } catch (err) {
      // The packet was kept: a failover replays it with the rest of the block.
      this.current = await this.failover(this.current, err);
    }
  }

  private async endBlock(): Promise<void> {
    if (this.pending.length > 0) await this.sendPacket(this.pending.take(this.pending.length));
    let bw = this.current;
    if (!bw) return;
    for (;;) {
      try {
        await bw.finish();
        break;
      } catch (err) {
        bw = await this.failover(bw, err);
      }
    }
    bw.close();
    // Every replica has the block: its packets will not be replayed, and their slabs take the next block's.
    this.replay.reset();
    this.previous = {
      blockId: bw.located.block?.blockId ?? 0,
      genStamp: bw.located.block?.genStamp ?? 0,
      numBytes: bw.bytes,
    };
    this.acked += bw.bytes;
    this.progress(this.acked);
    this.current = undefined;
  }

  private progress(bytes: number): void {
    if (bytes <= this.reported) return;
    this.reported = bytes;
    this.opts.onProgress?.(bytes);
  }

  /**
   * The error a write that gives up ends with: DATANODE_NO_SPACE when every pipeline failed because a datanode's disk
   * was full (the user's problem is room, not the network), else DFS_WRITE_FAILED.
   */
  private givingUp(message: string, cause: unknown): HarvestError {
    const full = this.failureCodes.length > 0 && this.failureCodes.every((c) => c === "DATANODE_NO_SPACE");
    return new HarvestError(
      full ? "DATANODE_NO_SPACE" : "DFS_WRITE_FAILED",
      full ? `${message}; no datanode had room (their disks are full)` : message,
      { cause, details: { path: this.path, excluded: [...this.excluded].join(",") } },
    );
  }

  /**
   * Abandons a failed block and replays its packets to a new pipeline without the failed datanode. A datanode that
   * refused the block token as one of an older namenode term (STALE_EPOCH: the namenode that allocated the block lost
   * its term since) is not excluded: the block is abandoned at the active namenode, which allocates another with a
   * token of its term.
   */
  private async failover(failed: BlockWrite, err: unknown): Promise<BlockWrite> {
    failed.close();
    this.client.writeStats.pipelineFailures++;
    const herr = isHarvestError(err) ? err : undefined;
    const code = detailsOf(err, "DATANODE_PIPELINE_FAILED")?.code || herr?.code || "INTERNAL";
    this.failureCodes.push(code);
    const stale = code === "STALE_EPOCH";
    // A datanode whose primary turned busy is not bad: it serves again once the primary calms down.
    const busy = code === "DATANODE_PRIMARY_BUSY";
    if (stale) this.staleTokens++;
    else if (!busy) {
      const bad = failed.failedDatanode ?? failed.located.locations[0]?.datanodeId;
      if (bad) this.excluded.add(bad);
    }
    if (failed.located.block) {
      // Retried while the namenodes fail over: a block left in place makes the next addBlock a mismatch.
      await this.client
        .nnCallRetrying("abandonBlock", this.client.namenode.abandonBlock, {
          path: this.path,
          clientName: this.client.options.clientName,
          block: failed.located.block,
        })
        .catch(() => undefined);
    }
    if (busy) {
      // Not excluded and not counted as an attempt: the write waits (the namenode hears of the busy primary by its
      // heartbeat and places elsewhere, or the primary calms down), within writeWaitMs.
      const who = failed.failedDatanode ?? failed.located.locations[0]?.datanodeId ?? "?";
      await this.pause(`datanode ${who} refused the pipeline: its primary tenant is busy`, err);
      return this.newPipeline(failed.packets);
    }
    const attempts = stale ? this.staleTokens : this.excluded.size;
    if (attempts >= this.client.options.maxBlockAttempts) {
      throw this.givingUp(
        stale
          ? `writing ${this.path} failed: ${attempts} pipelines refused the block token as one of an older namenode term (last: ${errorMessage(err)})`
          : `writing ${this.path} failed on ${attempts} pipelines (last: ${errorMessage(err)}); excluded datanodes: ${[...this.excluded].join(", ")}`,
        err,
      );
    }
    const next = await this.newPipeline(failed.packets);
    return next;
  }

  /**
   * A new block at the namenode and a pipeline to its datanodes, replaying `replay`. When the namenode can place no
   * replica for a reason that passes (busy primaries, full disks, no datanode yet), it asks again after a pause, up to
   * writeWaitMs; for any other reason (every datanode excluded or out of service) the write fails at once.
   */
  private async newPipeline(replay: KeptPacket[]): Promise<BlockWrite> {
    let located: LocatedBlockOutput;
    for (;;) {
      try {
        located = await this.client.nnCallRetrying("addBlock", this.client.namenode.addBlock, {
          path: this.path,
          clientName: this.client.options.clientName,
          ...(this.previous ? { previous: this.previous } : {}),
          excludedDatanodes: [...this.excluded],
        });
        break;
      } catch (err) {
        if (!isHarvestError(err, "NAMENODE_NOT_ENOUGH_DATANODES")) throw err;
        const refusal = refusalOfDetails(err.details);
        // The namenode's message names the file and each reason once; it is the message of the write's failure.
        if (!refusal || !isTransientRefusal(refusal)) throw this.givingUp(err.message, err);
        await this.pause(describeRefusal(refusal), err, refusal);
      }
    }
    this.previous = undefined;
    const base = this.acked;
    const bw = new BlockWrite(this.client, located, (inBlock) => {
      // Acknowledged bytes: the datanodes take this write again, and a later refusal starts a new wait.
      this.wait.reset();
      this.progress(base + inBlock);
    });
    for (const p of replay) {
      bw.packets.push(p);
      bw.bytes += p.data.length;
    }
    bw.open();
    return bw;
  }

  /**
   * A pause before the next try of a write no datanode can take now, told to `onWait`; DFS_DATANODES_UNAVAILABLE,
   * naming `reason`, once the wait has lasted writeWaitMs.
   */
  private async pause(reason: string, cause: unknown, refusal?: PlacementRefusal): Promise<void> {
    if (this.destroyed) throw this.abandoned();
    const pauseMs = this.wait.next();
    if (pauseMs === undefined) {
      const waitedMs = this.wait.waitedMs();
      // Named by its deadline: the last try, begun just before the deadline, ends a little after it.
      throw new HarvestError("DFS_DATANODES_UNAVAILABLE", waitExpiredMessage(this.path, this.wait.deadlineMs, reason), {
        cause,
        details: { ...(refusal ? refusalDetails(refusal) : {}), path: this.path, waitedMs: String(waitedMs) },
      });
    }
    this.client.writeStats.datanodeWaits++;
    const event = {
      path: this.path,
      reason,
      ...(refusal ? { refusal } : {}),
      waitedMs: this.wait.waitedMs(),
      deadlineMs: this.wait.deadlineMs,
      nextTryMs: pauseMs,
    };
    this.client.options.logger.debug("waiting for a datanode", { path: this.path, reason, inMs: pauseMs });
    this.opts.onWait?.(event);
    await sleep(pauseMs, undefined, { signal: this.stopped.signal }).catch(() => undefined);
    if (this.destroyed) throw this.abandoned();
  }

  private abandoned(): HarvestError {
    return new HarvestError("DFS_WRITE_FAILED", `the write of ${this.path} was abandoned while it waited`, {
      details: { path: this.path },
    });
  }

  private async finishAll(): Promise<void> {
    if (!this.created) return;
    if (this.pending.length > 0 || this.current) await this.endBlock();
    await this.client.nnCallRetrying("complete", this.client.namenode.complete, {
      path: this.path,
      clientName: this.client.options.clientName,
      ...(this.previous ? { last: this.previous } : {}),
    });
    this.completed = true;
  }
}
