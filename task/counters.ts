/**
 * A task's counters (MapReduce's): named totals a task adds to while it runs (records read, bytes written, bad lines
 * skipped). They are written to `_counters.json` among the task's outputs when it ends (a name starting with "_" is
 * not data); the job manager reads them from the node's shuffle service once the task has succeeded and sums them per
 * vertex, and `harvest job status` shows them.
 */
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { COUNTERS_FILE, TASK_ENV } from "../common/task-contract.js";
import { atTaskEnd, TaskError } from "./context.js";

const counters = new Map<string, number>();

/** Longest counter name. */
const MAX_NAME = 128;

/** Adds `by` (a whole number, default 1) to the counter `name`. */
export function incrementCounter(name: string, by = 1): void {
  if (typeof name !== "string" || name === "" || name.length > MAX_NAME)
    throw new TaskError(`a counter name must be 1 to ${MAX_NAME} characters, got ${JSON.stringify(name)}`);
  if (!Number.isSafeInteger(by)) throw new TaskError(`counter ${name}: ${by} is not a whole number`);
  if (counters.size === 0) atTaskEnd(writeCounters);
  counters.set(name, (counters.get(name) ?? 0) + by);
}

/** The counters so far. */
export function currentCounters(): Record<string, number> {
  return Object.fromEntries(counters);
}

function writeCounters(): void {
  const dir = process.env[TASK_ENV.outputDir];
  if (!dir || counters.size === 0) return;
  writeFileSync(join(dir, COUNTERS_FILE), JSON.stringify(currentCounters()));
}
