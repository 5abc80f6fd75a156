/**
 * Log aggregation (YARN's LogAggregationService, per container rather than per application): when a container exits,
 * its stdout and stderr are copied into the DFS as its job's submitter (common/container-logs.ts for the layout), so
 * that `harvest job logs` and the log pages still show them once this server is gone (reimaged, drained, dead). The
 * copy acts with the job's DFS token (a secure cluster; the token the container's start request carried) or as the
 * submitter (a plaintext cluster, where the namenode trusts the claim), never with the node manager's certificate:
 * the files are the submitter's, in the submitter's home.
 *
 * The node manager reports a container's completion once its copy is done (or failed, or timed out: `upload` never
 * rejects), so a drain, which ends when its server's containers have ended, ends with their logs safe. A marker beside
 * the work directory (`<workDir>.logs.json`) says where the copy went, for the log pages.
 */
import { closeSync, constants, existsSync, fstatSync, openSync, readFileSync, readSync, statSync } from "node:fs";
import { join } from "node:path";
import { pipeline } from "node:stream/promises";
import { DfsClient } from "../client/dfs-client.js";
import { writeFileAtomic } from "../common/atomic-file.js";
import {
  appLogDir,
  CONTAINER_LOG_STREAMS,
  containerLogPath,
  KEPT_LOG_DIR_MODE,
  userLogRoot,
} from "../common/container-logs.js";
import { errorMessage } from "../common/errors.js";
import type { Logger } from "../common/log.js";
import { TOKEN_FILE_NAME } from "../common/task-contract.js";
import { openContainerLog } from "./container.js";
import type { NodeManagerOptions } from "./options.js";
import type { ContainerStatus } from "../proto/generated/harvest/v1/ContainerStatus.js";

/** One container whose logs are to be copied. */
export interface LogUploadJob {
  appId: string;
  containerId: string;
  /** The job's submitter (the DFS owner of the copy). */
  user: string;
  /** The job's DFS token ("" on a plaintext cluster). */
  dfsToken: string;
  workDir: string;
}

/** Where one container's logs went and how big they were. */
export interface LogUploadRecord {
  dfsDir: string;
  bytes: { stdout: number; stderr: number };
  copiedMs: number;
}

/** Where the log uploads reach the namenode. */
export interface LogUploaderOptions {
  /** The namenode(s); empty: no copies are made. */
  nnAddress: string;
  /** The cluster CA (the job's token authenticates: the node manager presents no certificate). */
  ca?: string | undefined;
  timeoutMs: number;
  /** The DFS group of the kept logs' directories (`containerLogGroup`). */
  group: string;
}

/** Counts of the copies, for the metrics. */
export interface LogUploadOutcome {
  ok: boolean;
  bytes: number;
  /** Why it failed (the error, or "timed out"). */
  error?: string;
}

const MARKER_SUFFIX = ".logs.json";

/** The longest a node manager's stop waits for the log copies under way. */
const STOP_WAIT_MS = 2_000;

/** The uploader's options from the node manager's: no namenode (no copies) unless `logUpload`. */
export function uploaderOptions(o: NodeManagerOptions): LogUploaderOptions {
  const nnAddress = o.logUpload ? o.nnAddress : "";
  return { nnAddress, ca: o.tls?.ca, timeoutMs: o.logUploadTimeoutMs, group: o.containerLogGroup };
}

/** A container a previous run of this node manager left on disk (ContainerRecords.listContainers). */
export interface LeftContainer {
  containerId: string;
  appId: string;
  user: string;
  workDir: string;
  exit?: Pick<ContainerStatus, "finishedMs">;
}

/** The most a token file may hold (a few tokens). */
const MAX_TOKEN_FILE_BYTES = 64 * 1024;

/**
 * The job's DFS token from a container's token file ("" when there is none or it is not one). The file is the
 * container's (it may have replaced it): read without following a link, bounded, and only as JSON.
 */
export function dfsTokenOf(workDir: string): string {
  let fd: number;
  try {
    fd = openSync(join(workDir, TOKEN_FILE_NAME), constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK);
  } catch {
    return "";
  }
  try {
    const st = fstatSync(fd);
    if (!st.isFile() || st.size > MAX_TOKEN_FILE_BYTES) return "";
    const buf = Buffer.alloc(st.size);
    const n = readSync(fd, buf, 0, st.size, 0);
    const tokens = JSON.parse(buf.subarray(0, n).toString("utf8")) as Record<string, unknown>;
    const token = tokens["dfs-token"];
    return typeof token === "string" ? token : "";
  } catch {
    return "";
  } finally {
    closeSync(fd);
  }
}

/**
 * The containers a previous run left whose logs were never copied (no marker: it died before, or its copy failed),
 * that ended (or last wrote a log) at `cutoffMs` or later, with their owner known.
 */
export function uncopiedContainers(left: readonly LeftContainer[], cutoffMs: number): LeftContainer[] {
  return left.filter((c) => {
    if (!c.user || existsSync(`${c.workDir}${MARKER_SUFFIX}`)) return false;
    if (c.exit) return Number(c.exit.finishedMs ?? 0) >= cutoffMs;
    const lastWrite = Math.max(
      ...CONTAINER_LOG_STREAMS.map((s) => statSync(join(c.workDir, s), { throwIfNoEntry: false })?.mtimeMs ?? 0),
    );
    return lastWrite >= cutoffMs;
  });
}

/** Where a container's copy went, from the marker its upload wrote; undefined when none was made (yet). */
export function uploadRecordOf(workDir: string): LogUploadRecord | undefined {
  const file = `${workDir}${MARKER_SUFFIX}`;
  if (!existsSync(file)) return undefined;
  try {
    const r = JSON.parse(readFileSync(file, "utf8")) as LogUploadRecord;
    return typeof r.dfsDir === "string" ? r : undefined;
  } catch {
    return undefined;
  }
}

/** Copies exited containers' logs into the DFS, one DFS client per application (its token's). */
export class LogUploader {
  private readonly clients = new Map<string, DfsClient>();
  /** Applications whose `.logs` directories this node manager has given to the log group already. */
  private readonly prepared = new Set<string>();
  private readonly inFlight = new Set<Promise<unknown>>();

  constructor(
    private readonly options: LogUploaderOptions,
    private readonly log: Logger,
  ) {}

  /** Whether copies are made at all (a namenode is known). */
  get enabled(): boolean {
    return this.options.nnAddress !== "";
  }

  /**
   * Copies `job`'s logs; resolves once done, failed or `timeoutMs` passed (a slow copy goes on in the background).
   * Never rejects.
   */
  async upload(job: LogUploadJob): Promise<LogUploadOutcome> {
    const copy = this.copy(job).then(
      (bytes): LogUploadOutcome => ({ ok: true, bytes }),
      (err: unknown): LogUploadOutcome => {
        this.log.warn("could not copy a container's logs into the DFS", {
          containerId: job.containerId,
          error: errorMessage(err),
        });
        return { ok: false, bytes: 0, error: errorMessage(err) };
      },
    );
    this.inFlight.add(copy);
    void copy.finally(() => this.inFlight.delete(copy));
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<LogUploadOutcome>((resolve) => {
      timer = setTimeout(() => resolve({ ok: false, bytes: 0, error: "timed out" }), this.options.timeoutMs);
    });
    try {
      return await Promise.race([copy, timeout]);
    } finally {
      clearTimeout(timer);
    }
  }

  /**
   * Copies, in the background, the logs a previous run left uncopied (uncopiedContainers), with each job's DFS token
   * from the container's token file (a secure cluster's container without one is skipped). Never rejects.
   */
  recover(left: readonly LeftContainer[], cutoffMs: number): void {
    if (!this.enabled) return;
    const jobs = uncopiedContainers(left, cutoffMs).flatMap((c): LogUploadJob[] => {
      const dfsToken = this.options.ca ? dfsTokenOf(c.workDir) : "";
      return this.options.ca && !dfsToken ? [] : [{ ...c, dfsToken }];
    });
    if (jobs.length === 0) return;
    this.log.info("copying the logs a previous run left uncopied", { containers: jobs.length });
    for (const job of jobs) void this.upload(job);
  }

  /** Forgets a finished application's client (its token is cancelled soon). */
  forgetApplication(appId: string): void {
    this.clients.get(appId)?.close();
    this.clients.delete(appId);
    this.prepared.delete(appId);
  }

  /**
   * Waits for the copies under way (those of the containers the stop killed included), at most `STOP_WAIT_MS` (a
   * stop must not hang on a namenode that is stopping too), then closes every client.
   */
  async close(): Promise<void> {
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([
      Promise.allSettled([...this.inFlight]),
      new Promise<void>((resolve) => {
        timer = setTimeout(resolve, Math.min(STOP_WAIT_MS, this.options.timeoutMs));
      }),
    ]);
    clearTimeout(timer);
    for (const c of this.clients.values()) c.close();
    this.clients.clear();
  }

  private clientFor(job: LogUploadJob): DfsClient {
    let dfs = this.clients.get(job.appId);
    if (!dfs) {
      dfs = new DfsClient(this.options.nnAddress, {
        ...(this.options.ca ? { security: { ca: this.options.ca } } : {}),
        dfsToken: job.dfsToken,
        user: job.user,
      });
      this.clients.set(job.appId, dfs);
      // Bounded: an application's client goes at its cleanup, and the oldest beyond this many.
      if (this.clients.size > 256) {
        const [oldest, c] = this.clients.entries().next().value!;
        c.close();
        this.clients.delete(oldest);
      }
    }
    return dfs;
  }

  /** Puts `dir` (the submitter's) in the log group, mode 0770. */
  private async giveToGroup(dfs: DfsClient, dir: string): Promise<void> {
    await dfs.chown(dir, "", this.options.group);
    await dfs.chmod(dir, KEPT_LOG_DIR_MODE);
  }

  /** Copies both logs (a copy left by an earlier try is replaced); resolves to the bytes copied. */
  private async copy(job: LogUploadJob): Promise<number> {
    const started = Date.now();
    const dfs = this.clientFor(job);
    const dir = `${appLogDir(job.user, job.appId)}/${job.containerId}`;
    if (!this.prepared.has(job.appId)) {
      // The namenode makes the submitter's home the first time it is asked (a job submitted without staging has none).
      await dfs.homeDirectory();
      // The submitter and the log group (the resource managers) may read them, whatever the home directory's mode;
      // what is made below inherits the group.
      await dfs.mkdir(appLogDir(job.user, job.appId));
      for (const d of [userLogRoot(job.user), appLogDir(job.user, job.appId)]) await this.giveToGroup(dfs, d);
      this.prepared.add(job.appId);
    }
    await dfs.mkdir(dir);
    await dfs.chmod(dir, KEPT_LOG_DIR_MODE);
    const bytes = { stdout: 0, stderr: 0 };
    for (const stream of CONTAINER_LOG_STREAMS) {
      const fh = await openContainerLog(job.workDir, stream);
      try {
        bytes[stream] = (await fh.stat()).size;
        await pipeline(
          fh.createReadStream({ autoClose: false, start: 0, end: Math.max(0, bytes[stream] - 1) }),
          dfs.createWriteStream(containerLogPath(job.user, job.appId, job.containerId, stream), { overwrite: true }),
        );
      } finally {
        await fh.close();
      }
    }
    const record: LogUploadRecord = { dfsDir: dir, bytes, copiedMs: Date.now() };
    writeFileAtomic(`${job.workDir}${MARKER_SUFFIX}`, JSON.stringify(record) + "\n", 0o600);
    this.log.info("container's logs copied into the DFS", {
      containerId: job.containerId,
      dir,
      bytes: bytes.stdout + bytes.stderr,
      ms: Date.now() - started,
    });
    return bytes.stdout + bytes.stderr;
  }
}
