/**
 * A task's counters (MapReduce's) and progress. Counters are named totals a task adds to while it runs (records read,
 * bytes written, bad lines skipped); progress is how far it is, 0..1. While the task runs both go to its status file
 * (TASK_ENV.statusFile, in its container's directory), replaced whole at most about once a second: its node manager
 * reads it and sends it with the container's status, so `harvest job status` and the job page show them live. When
 * the task ends its counters are written to `_counters.json` among its outputs (a name starting with "_" is not data);
 * the job manager reads them from the node's shuffle service once the task has succeeded and sums them per vertex.
 */
import { closeSync, constants as fsConstants, openSync, renameSync, writeFileSync, writeSync } from "node:fs";
import { basename, dirname, join } from "node:path";
import { COUNTERS_FILE, TASK_ENV, TASK_STATUS_LIMITS } from "../common/task-contract.js";
import { atTaskEnd, TaskError } from "./context.js";

const counters = new Map<string, number>();
let progress = 0;

/** Longest counter name. */
const MAX_NAME = TASK_STATUS_LIMITS.maxCounterName;
/** The status file is replaced at most this often. */
const STATUS_INTERVAL_MS = 1_000;

/** Adds `by` (a whole number, default 1) to the counter `name`. */
export function incrementCounter(name: string, by = 1): void {
  if (typeof name !== "string" || name === "" || name.length > MAX_NAME)
    throw new TaskError(`a counter name must be 1 to ${MAX_NAME} characters, got ${JSON.stringify(name)}`);
  if (!Number.isSafeInteger(by)) throw new TaskError(`counter ${name}: ${by} is not a whole number`);
  if (counters.size === 0) atTaskEnd(writeCounters);
  counters.set(name, (counters.get(name) ?? 0) + by);
  statusChanged();
}

/** The counters so far. */
export function currentCounters(): Record<string, number> {
  return Object.fromEntries(counters);
}

/**
 * Reports how far this task is, from 0 (nothing done) to 1 (all done); a number outside is clamped to that range. A
 * value that is not a finite number (NaN, Infinity, a string) is a TaskError: it is a bug in the task, not a progress.
 * It may go down (a task that finds more work than it thought).
 */
export function reportProgress(fraction: number): void {
  if (typeof fraction !== "number" || !Number.isFinite(fraction))
    throw new TaskError(`progress must be a finite number from 0 to 1, got ${String(fraction)}`);
  progress = Math.min(1, Math.max(0, fraction));
  statusChanged();
}

/** The progress last reported (0 before any). */
export function currentProgress(): number {
  return progress;
}

function writeCounters(): void {
  const dir = process.env[TASK_ENV.outputDir];
  if (!dir || counters.size === 0) return;
  writeFileSync(join(dir, COUNTERS_FILE), JSON.stringify(currentCounters()));
}

let lastWriteMs = 0;
let pending: NodeJS.Timeout | undefined;
let warned = false;

/** Writes the status file now, or once a second has passed since the last write (never keeping the task alive). */
function statusChanged(): void {
  if (pending || !process.env[TASK_ENV.statusFile]) return;
  const waitMs = lastWriteMs + STATUS_INTERVAL_MS - Date.now();
  if (waitMs <= 0) {
    writeStatus();
    return;
  }
  pending = setTimeout(() => {
    pending = undefined;
    writeStatus();
  }, waitMs);
  pending.unref();
}

/** The status file's text: the progress and at most `maxCounters` counters (by name order). */
export function statusText(): string {
  const names = [...counters.keys()].sort();
  const sent = names.slice(0, TASK_STATUS_LIMITS.maxCounters);
  return JSON.stringify({
    progress,
    counters: Object.fromEntries(sent.map((n) => [n, counters.get(n)!])),
    ...(names.length > sent.length ? { countersDropped: names.length - sent.length } : {}),
  });
}

/**
 * Replaces the status file through a temporary beside it and a rename, so its node manager never reads half of it. A
 * failure (a full disk) is said once on stderr and otherwise ignored: a task never fails for its progress.
 */
function writeStatus(): void {
  const file = process.env[TASK_ENV.statusFile];
  if (!file) return;
  lastWriteMs = Date.now();
  const tmp = join(dirname(file), `.${basename(file)}.tmp`);
  try {
    const fd = openSync(
      tmp,
      fsConstants.O_WRONLY | fsConstants.O_CREAT | fsConstants.O_TRUNC | fsConstants.O_NOFOLLOW,
      0o600,
    );
    try {
      writeSync(fd, statusText());
    } finally {
      closeSync(fd);
    }
    renameSync(tmp, file);
  } catch (err) {
    if (!warned) process.stderr.write(`harvest/task: could not write the status file ${file}: ${String(err)}\n`);
    warned = true;
  }
}
