/**
 * Word count, reduce stage: merges this task's partition from every mapper and writes `counts.tsv` sorted by word,
 * plus `part-N` files (hash-partitioned again) when it has a scatter-gather consumer such as wordcount-merge.
 *
 * Usage: wordcount-reduce.js  (everything comes from the task environment)
 */
import { join } from "node:path";
import { readTaskContext, runTask, scatterPartitions, TaskError, writeFileAtomic } from "./task-env.js";
import {
  addCountsFromFile,
  COUNTS_FILE,
  formatCounts,
  sortedByWord,
  wordcountInputFiles,
  writePartitions,
} from "./wordcount-lib.js";

async function main(): Promise<void> {
  if (process.argv.length > 2) throw new TaskError(`takes no arguments, got ${process.argv.slice(2).join(" ")}`);
  const ctx = readTaskContext();
  const files = ctx.inputs.flatMap((input) => wordcountInputFiles(input, ctx.taskIndex));
  if (files.length === 0) throw new TaskError("no inputs: a reducer needs at least one upstream vertex");
  const counts = new Map<string, number>();
  for (const file of files) await addCountsFromFile(file, counts);
  await writeFileAtomic(join(ctx.outputDir, COUNTS_FILE), formatCounts(sortedByWord(counts)));
  if (ctx.outputs.some((o) => o.edgeType === "scatter-gather")) {
    await writePartitions(ctx.outputDir, counts, scatterPartitions(ctx.outputs));
  }
}

runTask("wordcount-reduce", main);
