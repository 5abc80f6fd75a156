/**
 * A synthetic task shaped after the Alibaba batch tasks (common/alibaba-dag.ts): it reads what its upstream tasks
 * wrote, burns a given amount of CPU time in small slices, and writes small output files so data flows along every
 * edge. It reports its progress as it burns (harvest/task's reportProgress). Options make deterministic failures for
 * tests.
 *
 * Usage: cpu-work.js --seconds S [--hold-seconds H] [--output-kb K] [--fail-rate R] [--seed N] [--fail-once-marker FILE]
 *   --seconds           CPU seconds (user + system) to burn; a throttled container takes longer in wall time
 *   --hold-seconds      then keep the container (sleeping) until H seconds of wall time have passed since start, so
 *                       tests can have long-lived tasks without loading the machine
 *   --output-kb         size of each part file in KB (default 1)
 *   --fail-rate         fail (exit 3) when a hash of seed, vertex and task index falls below R (0..1); the same task
 *                       fails on every attempt, so a job with such a task fails
 *   --seed              seed for --fail-rate (default 0)
 *   --fail-once-marker  fail (exit 3) if FILE does not exist yet, creating it; the retry then succeeds. Put
 *                       ${HARVEST_VERTEX}-${HARVEST_TASK_INDEX} in the name to fail every task once
 * Output: `part-0 .. part-(P-1)` for a scatter-gather consumer with P tasks, and `result.json` (what was read, digests).
 */
import { createHash } from "node:crypto";
import { open, readFile } from "node:fs/promises";
import { join } from "node:path";
import {
  EXIT_INJECTED_FAILURE,
  inputFiles,
  numberOption,
  partFileCount,
  partitionFileName,
  reportProgress,
  TaskError,
  taskMain,
  writeFileAtomic,
} from "../../task/index.js";
import { burnCpu, fnv1a } from "./example-lib.js";
import type { TaskArgs } from "../../task/index.js";

async function main({ options, positional, context }: TaskArgs): Promise<void> {
  if (positional.length > 0) throw new TaskError(`unexpected argument ${positional[0]}; see --seconds S`);
  if (!options.has("seconds")) throw new TaskError("--seconds S is required (CPU seconds to burn, 0 is allowed)");
  const startedMs = Date.now();
  const seconds = numberOption(options, "seconds", 0);
  const holdSeconds = numberOption(options, "hold-seconds", 0);
  const outputKb = numberOption(options, "output-kb", 1);
  const failRate = numberOption(options, "fail-rate", 0);
  const seed = numberOption(options, "seed", 0);
  if (failRate > 1) throw new TaskError(`--fail-rate must be between 0 and 1, got ${failRate}`);
  const ctx = context();

  // Read every input before failing or burning, so a broken edge is reported as such.
  const digest = createHash("sha256");
  let inputBytes = 0;
  let inputCount = 0;
  for (const input of ctx.inputs) {
    for (const file of await inputFiles(input, ctx.taskIndex)) {
      let data: Buffer;
      try {
        data = await readFile(file);
      } catch (err) {
        throw new TaskError(`cannot read input ${file} from ${input.vertex}: ${(err as Error).message}`);
      }
      digest.update(data);
      inputBytes += data.length;
      inputCount++;
    }
  }

  const marker = options.get("fail-once-marker");
  if (marker !== undefined && (await createMarker(marker))) {
    throw new TaskError(
      `injected failure: first run for marker ${marker} (it now exists; a retry succeeds)`,
      EXIT_INJECTED_FAILURE,
    );
  }
  if (failRate > 0 && fnv1a(`${seed}/${ctx.vertex}/${ctx.taskIndex}`) / 2 ** 32 < failRate) {
    throw new TaskError(
      `injected failure: ${ctx.vertex}[${ctx.taskIndex}] falls under --fail-rate ${failRate} (seed ${seed})`,
      EXIT_INJECTED_FAILURE,
    );
  }

  const burntUs = await burnCpu(seconds * 1e6, reportProgress);
  const holdMs = startedMs + holdSeconds * 1000 - Date.now();
  if (holdMs > 0) await new Promise((resolve) => setTimeout(resolve, holdMs));

  const inputDigest = digest.digest("hex");
  const partitions = partFileCount(ctx.outputs);
  for (let p = 0; p < partitions; p++) {
    const header = JSON.stringify({ vertex: ctx.vertex, task: ctx.taskIndex, partition: p, inputDigest }) + "\n";
    await writeFileAtomic(
      join(ctx.outputDir, partitionFileName(p)),
      header + filler(outputKb * 1024, `${inputDigest}/${p}`),
    );
  }
  const result = {
    vertex: ctx.vertex,
    task: ctx.taskIndex,
    inputFiles: inputCount,
    inputBytes,
    inputDigest,
    cpuSeconds: burntUs / 1e6,
    partitions,
  };
  await writeFileAtomic(join(ctx.outputDir, "result.json"), JSON.stringify(result) + "\n");
}

/** Creates `path` exclusively; true when this call created it (so this run is the one that fails). */
async function createMarker(path: string): Promise<boolean> {
  try {
    const fh = await open(path, "wx");
    await fh.close();
    return true;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "EEXIST") return false;
    throw new TaskError(`cannot create --fail-once-marker ${path}: ${(err as Error).message}`);
  }
}

/** `bytes` of deterministic printable filler derived from `seed`. */
function filler(bytes: number, seed: string): string {
  const out: string[] = [];
  let size = 0;
  let block = createHash("sha256").update(seed).digest("hex");
  while (size < bytes) {
    out.push(block);
    size += block.length;
    block = createHash("sha256").update(block).digest("hex");
  }
  return out.join("").slice(0, Math.floor(bytes));
}

taskMain("cpu-work", ["seconds", "hold-seconds", "output-kb", "fail-rate", "seed", "fail-once-marker"], main);
