/**
 * Word count, reduce stage: merges this task's partition from every mapper and writes `counts.tsv` sorted by word,
 * plus `part-N` files (hash-partitioned again) when it has a scatter-gather consumer such as wordcount-merge.
 *
 * Usage: wordcount-reduce.js [--cpu-seconds S]  (inputs come from the task environment; --cpu-seconds adds CPU work
 * to give the demo's tasks the weight of real batch work)
 */
import { join } from "node:path";
import {
  incrementCounter,
  numberOption,
  partFileCount,
  TaskError,
  taskMain,
  writeFileAtomic,
} from "../../task/index.js";
import { burnCpu } from "./example-lib.js";
import type { TaskArgs } from "../../task/index.js";
import {
  addCountsFromFile,
  COUNTS_FILE,
  formatCounts,
  sortedByWord,
  wordcountInputFiles,
  writePartitions,
} from "./wordcount-lib.js";

async function main({ options, positional, context }: TaskArgs): Promise<void> {
  if (positional.length > 0) throw new TaskError(`takes no positional arguments, got ${positional.join(" ")}`);
  const cpuSeconds = numberOption(options, "cpu-seconds", 0);
  const ctx = context();
  const files: string[] = [];
  for (const input of ctx.inputs) files.push(...(await wordcountInputFiles(input, ctx.taskIndex)));
  if (files.length === 0) throw new TaskError("no inputs: a reducer needs at least one upstream vertex");
  const counts = new Map<string, number>();
  for (const file of files) await addCountsFromFile(file, counts);
  incrementCounter("distinct words", counts.size);
  await writeFileAtomic(join(ctx.outputDir, COUNTS_FILE), formatCounts(sortedByWord(counts)));
  const parts = partFileCount(ctx.outputs);
  if (parts > 0) await writePartitions(ctx.outputDir, counts, parts);
  await burnCpu(cpuSeconds * 1e6);
}

taskMain("wordcount-reduce", ["cpu-seconds"], main);
