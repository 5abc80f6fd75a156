/**
 * Running tasks' progress and counters, read from the status file each task's harvest/task writes in its container's
 * directory (common/task-contract.ts, TASK_STATUS_LIMITS) and sent with the container's status in the heartbeat. The
 * file is written by the container's account: it is hostile input. It is opened without following a link and without
 * blocking (a FIFO), taken only when it is a regular file of the directory's owner (not a hard link to another's file)
 * of at most 16 KiB, and only when its JSON has exactly the expected shape with finite numbers. A bad file is ignored
 * (said once per container); nothing a task writes can fail or stall the node manager's heartbeat, which only reads
 * what the last poll cached.
 */
import { constants as fsConstants } from "node:fs";
import { lstat, open } from "node:fs/promises";
import { join } from "node:path";
import { errorMessage } from "../common/errors.js";
import { STATUS_FILE_NAME, TASK_STATUS_LIMITS } from "../common/task-contract.js";
import type { TaskReport } from "../proto/generated/harvest/v1/TaskReport.js";

/** A task's report as the node manager keeps and sends it. */
export interface TaskStatusReport {
  progress: number;
  counters: Record<string, number>;
  countersDropped: number;
  reportedMs: number;
}

/** Why a status file was refused (a metric label). */
export type TaskStatusRejection = "not_regular" | "not_owner" | "too_big" | "not_json" | "bad_shape" | "unreadable";

/** A parsed status file, or why it was refused. */
export type TaskStatusParse = { report: TaskStatusReport } | { rejected: TaskStatusRejection; why: string };

/**
 * Parses a status file's text (`{ "progress": 0..1, "counters": {name: whole number}, "countersDropped"?: n }`);
 * `reportedMs` is when it was written. Anything else is refused with the reason: a progress outside 0..1 or not
 * finite, a counter that is not a safe whole number or whose name is empty or too long, an unknown key. Counters
 * beyond `maxCounters` (by name order) are dropped and counted.
 */
export function parseTaskStatus(text: string, reportedMs: number): TaskStatusParse {
  if (Buffer.byteLength(text) > TASK_STATUS_LIMITS.maxBytes)
    return { rejected: "too_big", why: `over ${TASK_STATUS_LIMITS.maxBytes} bytes` };
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (err) {
    return { rejected: "not_json", why: errorMessage(err) };
  }
  const bad = (why: string): TaskStatusParse => ({ rejected: "bad_shape", why });
  if (!isRecord(value)) return bad("not a JSON object");
  for (const key of Object.keys(value))
    if (key !== "progress" && key !== "counters" && key !== "countersDropped") return bad(`unknown key ${key}`);
  const progress = value["progress"] ?? 0;
  // JSON.parse turns 1e999 into Infinity: refused like any number outside 0..1.
  if (typeof progress !== "number" || !Number.isFinite(progress) || progress < 0 || progress > 1)
    return bad("progress is not a number from 0 to 1");
  const rawCounters = value["counters"] ?? {};
  if (!isRecord(rawCounters)) return bad("counters is not an object");
  const names = Object.keys(rawCounters).sort();
  for (const name of names) {
    const n = rawCounters[name];
    if (name === "" || name.length > TASK_STATUS_LIMITS.maxCounterName) return bad("a counter name is too long");
    if (typeof n !== "number" || !Number.isSafeInteger(n)) return bad(`counter ${name} is not a whole number`);
  }
  const claimedDropped = value["countersDropped"] ?? 0;
  if (typeof claimedDropped !== "number" || !Number.isSafeInteger(claimedDropped) || claimedDropped < 0)
    return bad("countersDropped is not a whole number");
  const kept = names.slice(0, TASK_STATUS_LIMITS.maxCounters);
  return {
    report: {
      progress,
      counters: Object.fromEntries(kept.map((name) => [name, rawCounters[name] as number])),
      countersDropped: Math.min(1_000_000, claimedDropped + names.length - kept.length),
      reportedMs,
    },
  };
}

/** About the bytes a report takes in a heartbeat (a map entry costs its name and a varint, with a few bytes of tags). */
export function encodedSize(r: TaskStatusReport): number {
  let size = 24;
  for (const name of Object.keys(r.counters)) size += Buffer.byteLength(name) + 16;
  return size;
}

function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

/**
 * Reads and parses a container's status file; undefined when there is none (the task has reported nothing yet).
 * Never follows a link, never blocks on a FIFO, never reads more than the limit, never reads a file that is not the
 * container account's own.
 */
export async function readTaskStatus(workDir: string): Promise<TaskStatusParse | undefined> {
  let fh;
  try {
    fh = await open(
      join(workDir, STATUS_FILE_NAME),
      fsConstants.O_RDONLY | fsConstants.O_NOFOLLOW | fsConstants.O_NONBLOCK,
    );
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === "ENOENT") return undefined;
    // ELOOP: a symbolic link (O_NOFOLLOW); ENXIO: a socket or FIFO with no writer.
    if (code === "ELOOP" || code === "ENXIO") return { rejected: "not_regular", why: `not a regular file (${code})` };
    return { rejected: "unreadable", why: errorMessage(err) };
  }
  try {
    const st = await fh.stat();
    if (!st.isFile()) return { rejected: "not_regular", why: "not a regular file" };
    if (st.uid !== (await lstat(workDir)).uid)
      return { rejected: "not_owner", why: "not owned by the container's account" };
    if (st.size > TASK_STATUS_LIMITS.maxBytes)
      return { rejected: "too_big", why: `${st.size} bytes, over ${TASK_STATUS_LIMITS.maxBytes}` };
    // One byte more than allowed, in case it grew since the stat.
    const buf = Buffer.alloc(TASK_STATUS_LIMITS.maxBytes + 1);
    const { bytesRead } = await fh.read(buf, 0, buf.length, 0);
    return parseTaskStatus(buf.subarray(0, bytesRead).toString("utf8"), Math.round(st.mtimeMs));
  } catch (err) {
    return { rejected: "unreadable", why: errorMessage(err) };
  } finally {
    await fh.close().catch(() => undefined);
  }
}

/** One running task the poll reads. */
export interface PolledTask {
  containerId: string;
  workDir: string;
}

interface Entry {
  report: TaskStatusReport | undefined;
  /** Identifies the file last read (inode, size, mtime): an unchanged file is not read again. */
  fileKey: string;
  /** Bumped when `report` changes; `sentVersion` is what the resource manager was last sent. */
  version: number;
  sentVersion: number;
  warned: boolean;
}

/**
 * Keeps the latest report of each running task: `poll` reads the status files of the tasks it is given (those that
 * changed since the last poll), and the heartbeat takes a report only when it changed since the node last sent it.
 */
export class TaskStatusTracker {
  private readonly entries = new Map<string, Entry>();
  private polling = false;
  /** Where the next heartbeat's budget starts, so that no task's reports starve behind others'. */
  private rotation = 0;

  constructor(
    private readonly onRejected: (containerId: string, reason: TaskStatusRejection, why: string) => void,
    private readonly concurrency = 8,
  ) {}

  /** Reads the changed status files of `tasks`, a few at a time; a poll still running makes this one a no-op. */
  async poll(tasks: PolledTask[]): Promise<void> {
    if (this.polling) return;
    this.polling = true;
    try {
      let next = 0;
      const worker = async () => {
        while (next < tasks.length) await this.pollOne(tasks[next++]!);
      };
      await Promise.all(Array.from({ length: Math.min(this.concurrency, tasks.length) }, worker));
    } finally {
      this.polling = false;
    }
  }

  private async pollOne(task: PolledTask): Promise<void> {
    let entry = this.entries.get(task.containerId);
    if (!entry) {
      entry = { report: undefined, fileKey: "", version: 0, sentVersion: 0, warned: false };
      this.entries.set(task.containerId, entry);
    }
    let fileKey: string;
    try {
      const st = await lstat(join(task.workDir, STATUS_FILE_NAME));
      fileKey = `${st.ino}:${st.size}:${st.mtimeMs}:${st.mode}:${st.uid}`;
    } catch {
      return; // None yet (or its directory is gone): nothing new.
    }
    if (fileKey === entry.fileKey) return;
    entry.fileKey = fileKey;
    const parsed = await readTaskStatus(task.workDir);
    if (!parsed) return;
    if ("rejected" in parsed) {
      if (!entry.warned) this.onRejected(task.containerId, parsed.rejected, parsed.why);
      entry.warned = true;
      return;
    }
    entry.report = parsed.report;
    entry.version++;
  }

  /**
   * The reports to send in a heartbeat: of `containerIds`, those that changed since last sent (the resource manager
   * keeps what it has of the others), as many as fit in `budgetBytes` (an estimate of their encoded size), starting
   * after the last one the previous heartbeat took; those left over go in a later one. `all` (a registration) takes every report known,
   * without a budget.
   */
  takeChanged(containerIds: readonly string[], budgetBytes: number, all = false): Map<string, TaskReport> {
    const out = new Map<string, TaskReport>();
    const n = containerIds.length;
    const start = n > 0 ? this.rotation % n : 0;
    let used = 0;
    for (let i = 0; i < n; i++) {
      const id = containerIds[(start + i) % n]!;
      const entry = this.entries.get(id);
      if (!entry?.report || (!all && entry.version === entry.sentVersion)) continue;
      const size = encodedSize(entry.report);
      if (!all && used + size > budgetBytes) continue;
      used += size;
      this.rotation = start + i + 1;
      entry.sentVersion = entry.version;
      out.set(id, entry.report);
    }
    return out;
  }

  /** The last progress `containerId`'s task reported (undefined: none yet, or its file was refused). */
  progress(containerId: string): number | undefined {
    return this.entries.get(containerId)?.report?.progress;
  }

  /** Forgets a container that ended. */
  forget(containerId: string): void {
    this.entries.delete(containerId);
  }
}
