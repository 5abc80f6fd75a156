/**
 * A task that only holds its container: it sleeps (burning no CPU) until `--seconds` of wall time have passed since
 * its program started, then writes `result.json` saying when its process and its program started and when it let go,
 * so that a testbed can measure container launch times from the task's side (`harvest sim validate`). It writes an
 * empty `part-N` per scatter-gather consumer partition, so any task may consume it; it reads no input itself.
 *
 * Usage: hold.js --seconds S
 *   --seconds  wall time to hold the container, from the start of the program (0 is allowed)
 * Output: `result.json` {vertex, task, processStartMs, mainStartMs, endMs}, and the partition files.
 */
import { join } from "node:path";
import { performance } from "node:perf_hooks";
import {
  numberOption,
  partFileCount,
  partitionFileName,
  TaskError,
  taskMain,
  writeFileAtomic,
} from "../../task/index.js";
import type { TaskArgs } from "../../task/index.js";

/** What a finished hold reports (epoch ms). */
export interface HoldResult {
  vertex: string;
  task: number;
  /** When the operating system started the process (before Node.js loaded this program). */
  processStartMs: number;
  /** When this program's code began to run: the hold is measured from here. */
  mainStartMs: number;
  endMs: number;
}

async function main({ options, positional, context }: TaskArgs): Promise<void> {
  const mainStartMs = Date.now();
  if (positional.length > 0) throw new TaskError(`unexpected argument ${positional[0]}; see --seconds S`);
  if (!options.has("seconds")) throw new TaskError("--seconds S is required (how long to hold the container)");
  const seconds = numberOption(options, "seconds", 0);
  const ctx = context();
  const holdMs = mainStartMs + seconds * 1000 - Date.now();
  if (holdMs > 0) await new Promise((resolve) => setTimeout(resolve, holdMs));
  const partitions = partFileCount(ctx.outputs);
  for (let p = 0; p < partitions; p++) await writeFileAtomic(join(ctx.outputDir, partitionFileName(p)), "");
  const result: HoldResult = {
    vertex: ctx.vertex,
    task: ctx.taskIndex,
    processStartMs: Math.round(performance.timeOrigin),
    mainStartMs,
    endMs: Date.now(),
  };
  await writeFileAtomic(join(ctx.outputDir, "result.json"), JSON.stringify(result) + "\n");
}

taskMain("hold", ["seconds"], main);
