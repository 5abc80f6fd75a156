/**
 * Word count, final stage: merges the reducers' counts and writes `top.tsv`, the N most frequent words as
 * `word<TAB>count`, most frequent first, ties by word.
 *
 * Usage: wordcount-merge.js [--top N] [--output dfs:/path]   (N defaults to 100; 0 writes every word; with --output the
 * result is also stored in Harvest's file system)
 */
import { join } from "node:path";
import { isDfsPath, writeDfsFile } from "../../task/index.js";
import { numberOption, TaskError, taskMain, writeFileAtomic } from "../../task/index.js";
import type { TaskArgs } from "../../task/index.js";
import { addCountsFromFile, formatCounts, wordcountInputFiles } from "./wordcount-lib.js";

/** The merged result file. */
const TOP_FILE = "top.tsv";

async function main({ options, positional, context }: TaskArgs): Promise<void> {
  if (positional.length > 0)
    throw new TaskError(`unexpected argument ${positional[0]}; usage: wordcount-merge [--top N]`);
  const top = numberOption(options, "top", 100);
  if (!Number.isInteger(top)) throw new TaskError(`--top must be a whole number, got ${top}`);
  const ctx = context();
  const files: string[] = [];
  for (const input of ctx.inputs) files.push(...(await wordcountInputFiles(input, ctx.taskIndex)));
  if (files.length === 0) throw new TaskError("no inputs: the merge needs at least one upstream vertex");
  const counts = new Map<string, number>();
  for (const file of files) await addCountsFromFile(file, counts);
  const ranked = [...counts.entries()].sort(([wa, ca], [wb, cb]) => cb - ca || (wa < wb ? -1 : wa > wb ? 1 : 0));
  const result = formatCounts(top === 0 ? ranked : ranked.slice(0, top));
  await writeFileAtomic(join(ctx.outputDir, TOP_FILE), result);
  const output = options.get("output");
  if (output !== undefined) {
    if (!isDfsPath(output)) throw new TaskError(`--output must be a dfs:/path, got ${output}`);
    await writeDfsFile(output, result);
  }
}

taskMain("wordcount-merge", ["top", "output"], main);
