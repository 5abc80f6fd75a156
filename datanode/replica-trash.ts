/**
 * Deleted replicas, freed at a pace the primary tenant's disk can take.
 *
 * Why. Freeing a file is disk work the primary pays for. On a file system that discards freed blocks as it frees
 * them (ext4 or XFS mounted with `discard`, common on SSDs and cloud volumes), the discards of a whole replica go out
 * in one journal commit, and every fsync on that file system waits for it. On the VM where Harvest was measured (ext4,
 * `discard`; `npm run bench -- deletes`), a stand-in primary writing 4 KiB and calling fdatasync every 5 ms saw p99
 * 0.4-1.1 ms with no deletion; while 48 replicas of 64 MiB were deleted at once (the delete commands for a 1 GiB file at
 * replication 3 arrive together), p99 57-68 ms, max 65-86 ms; freed 8 MiB at a time, p99 1.4-1.8 ms and max 2.0-2.6 ms
 * whether paced at 256 MiB/s, 1 GiB/s or not at all (the space came back after 12.7, 3.4 and 1.0 s). There the chunks
 * did the work; the pace bounds the freeing a disk does per second, for disks whose discards hold up other I/O
 * (non-queued TRIM), which that VM's does not show. RocksDB's DeleteScheduler frees its files the same way (a rename
 * into a trash directory, then truncation in chunks at a rate).
 *
 * How. `take` renames a replica's data file into the trash directory (one rename: the replica is gone for readers and
 * reports at once), and a single background loop frees the trash a file at a time, oldest first: cut from its end
 * `chunkBytes` at a time, then unlinked, waiting between cuts so that no more than `bytesPerSecond` are freed per
 * second. Nothing is freed while `paused()` says so (the datanode passes "the primary is busy", when it refuses its
 * other I/O too). Trash counts as used space until freed; what a restart finds in the directory is freed the same way.
 * `bytesPerSecond` 0 frees each file whole as soon as it comes, without waits (the block store then does not use the
 * trash at all: stock HDFS removes a replica's files when the command comes).
 */
import { mkdir, readdir, rename, rm, stat, truncate } from "node:fs/promises";
import { basename, join } from "node:path";
import { setTimeout as delay } from "node:timers/promises";
import { HarvestError } from "../common/errors.js";

/** How often a paused trash asks `paused()` again. */
const PAUSE_POLL_MS = 250;

/** Settings of a trash directory. */
export interface ReplicaTrashOptions {
  /** The directory (created if missing; on the same file system as the replicas, so that `take` is a rename). */
  dir: string;
  /** Bytes freed per second at most; 0 frees each file at once. */
  bytesPerSecond: number;
  /** Bytes cut from a file's end at a time. */
  chunkBytes: number;
  /** While true, nothing is freed. @default never */
  paused?: () => boolean;
  /** Milliseconds now. @default performance.now */
  now?: () => number;
  /** Waits `ms`, or less if `signal` aborts (never rejects). @default a timer */
  sleep?: (ms: number, signal: AbortSignal) => Promise<void>;
  /** Told of a file that could not be freed (it is dropped from the queue; a restart tries again). */
  onError?: (file: string, err: unknown) => void;
}

interface TrashFile {
  name: string;
  /** Bytes still in the file. */
  bytes: number;
}

async function sleepFor(ms: number, signal: AbortSignal): Promise<void> {
  await delay(ms, undefined, { signal }).catch(() => undefined);
}

/** A directory of deleted replicas being freed in the background. Open with `ReplicaTrash.open()`. */
export class ReplicaTrash {
  private readonly queue: TrashFile[] = [];
  private pending = 0;
  private freed = 0;
  private seq = 0;
  private running: Promise<void> | undefined;
  private readonly stopping = new AbortController();
  private idleWaiters: (() => void)[] = [];
  private readonly now: () => number;
  private readonly sleep: (ms: number, signal: AbortSignal) => Promise<void>;

  private constructor(private readonly options: ReplicaTrashOptions) {
    this.now = options.now ?? (() => performance.now());
    this.sleep = options.sleep ?? sleepFor;
  }

  /** Opens the directory and starts freeing what it holds (left by a previous run). */
  static async open(options: ReplicaTrashOptions): Promise<ReplicaTrash> {
    await mkdir(options.dir, { recursive: true });
    const trash = new ReplicaTrash(options);
    for (const name of (await readdir(options.dir)).sort()) {
      const st = await stat(join(options.dir, name)).catch(() => undefined);
      if (st?.isFile()) trash.enqueue(name, st.size);
      else await rm(join(options.dir, name), { recursive: true, force: true });
    }
    trash.kick();
    return trash;
  }

  /** Bytes in the trash not yet freed. */
  get pendingBytes(): number {
    return this.pending;
  }

  /** Files in the trash not yet unlinked. */
  get pendingFiles(): number {
    return this.queue.length;
  }

  /** Whether `close` was called (`take` then refuses). */
  get closed(): boolean {
    return this.stopping.signal.aborted;
  }

  /** Bytes freed since the trash was opened. */
  get freedBytes(): number {
    return this.freed;
  }

  /**
   * Moves the file at `path` (on the trash's file system) into the trash, to be freed in the background; a file that
   * is not there is nothing to free.
   */
  async take(path: string): Promise<void> {
    if (this.stopping.signal.aborted)
      throw new HarvestError("UNAVAILABLE", "the trash is closed (its datanode is stopping)");
    // Names sort in arrival order, across restarts too: the time first, then a sequence number.
    this.seq += 1;
    const name = `${Date.now().toString().padStart(15, "0")}-${String(this.seq).padStart(9, "0")}-${basename(path)}`;
    try {
      await rename(path, join(this.options.dir, name));
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === "ENOENT") return;
      throw err;
    }
    const st = await stat(join(this.options.dir, name)).catch(() => undefined);
    this.enqueue(name, st?.size ?? 0);
    this.kick();
  }

  /** Resolves once the trash is empty (or closed). */
  drained(): Promise<void> {
    if (!this.running) return Promise.resolve();
    return new Promise((resolve) => this.idleWaiters.push(resolve));
  }

  /** Stops freeing; what is left stays in the directory for the next open. */
  async close(): Promise<void> {
    this.stopping.abort();
    await this.running;
  }

  private enqueue(name: string, bytes: number): void {
    this.queue.push({ name, bytes });
    this.pending += bytes;
  }

  private kick(): void {
    if (this.running || this.queue.length === 0 || this.stopping.signal.aborted) return;
    this.running = this.drain()
      .catch((err: unknown) => this.options.onError?.(this.options.dir, err))
      .finally(() => {
        this.running = undefined;
        if (this.queue.length > 0 && !this.stopping.signal.aborted) this.kick();
        else for (const w of this.idleWaiters.splice(0)) w();
      });
  }

  private async drain(): Promise<void> {
    const { bytesPerSecond, chunkBytes } = this.options;
    const signal = this.stopping.signal;
    // When the freed bytes are due by the rate: idle time earns no credit for a burst later.
    let dueMs = this.now();
    for (let file = this.queue[0]; file && !signal.aborted; file = this.queue[0]) {
      const path = join(this.options.dir, file.name);
      try {
        while (file.bytes > 0 && bytesPerSecond > 0) {
          await this.waitWhilePaused();
          if (signal.aborted) return;
          const next = Math.max(0, file.bytes - chunkBytes);
          await truncate(path, next);
          const cut = file.bytes - next;
          this.release(file, cut, true);
          dueMs = Math.max(dueMs, this.now()) + (cut * 1000) / bytesPerSecond;
          const wait = dueMs - this.now();
          if (wait > 0) await this.sleep(wait, signal);
        }
        if (signal.aborted) return;
        await this.waitWhilePaused();
        if (signal.aborted) return;
        await rm(path, { force: true });
        this.release(file, file.bytes, true);
      } catch (err) {
        this.options.onError?.(path, err);
        this.release(file, file.bytes, false);
      }
      this.queue.shift();
    }
  }

  private release(file: TrashFile, bytes: number, freed: boolean): void {
    file.bytes -= bytes;
    this.pending -= bytes;
    if (freed) this.freed += bytes;
  }

  private async waitWhilePaused(): Promise<void> {
    const paused = this.options.paused;
    if (!paused) return;
    while (paused() && !this.stopping.signal.aborted) await this.sleep(PAUSE_POLL_MS, this.stopping.signal);
  }
}
