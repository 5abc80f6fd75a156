/**
 * The word-count format shared by wordcount-map, -reduce and -merge: how text is split into words, and the
 * `word<TAB>count` lines the stages pass along their edges.
 */
import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { inputFiles, partitionFileName, TaskError, writeFileAtomic } from "../../task/index.js";
import type { TaskInput } from "../../task/index.js";
import { fnv1a } from "./example-lib.js";

/** The file a word-count stage writes its whole result into (what broadcast and one-to-one consumers read). */
export const COUNTS_FILE = "counts.tsv";

/** The words of `text`: maximal runs of letters and digits, lower-cased. */
export function tokenize(text: string): string[] {
  return text.toLowerCase().match(/[\p{L}\p{N}]+/gu) ?? [];
}

/** Adds `word<TAB>count` lines of `file` into `counts`; a malformed line is a TaskError naming file and line. */
export async function addCountsFromFile(file: string, counts: Map<string, number>): Promise<void> {
  let text: string;
  try {
    text = await readFile(file, "utf8");
  } catch (err) {
    throw new TaskError(`cannot read input ${file}: ${(err as Error).message}`);
  }
  const lines = text.split("\n");
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i]!;
    if (line === "") continue;
    const tab = line.indexOf("\t");
    const word = line.slice(0, tab);
    const countText = line.slice(tab + 1);
    if (tab <= 0 || !/^[1-9]\d*$/.test(countText)) {
      throw new TaskError(
        `${file}:${i + 1}: expected "word<TAB>count" with a positive count, got ${JSON.stringify(line)}`,
      );
    }
    counts.set(word, (counts.get(word) ?? 0) + Number(countText));
  }
}

/**
 * The files of one input holding this task's share, fetched from the producers' nodes: its partition for
 * scatter-gather, else each producer's `counts.tsv`.
 */
export function wordcountInputFiles(input: TaskInput, taskIndex: number): Promise<string[]> {
  return inputFiles(input, taskIndex, {
    only: (name) =>
      input.edgeType === "scatter-gather" ? name === partitionFileName(taskIndex) : name === COUNTS_FILE,
  });
}

/** `word<TAB>count` lines for `entries`, in the order given. */
export function formatCounts(entries: Iterable<[string, number]>): string {
  let out = "";
  for (const [word, count] of entries) out += `${word}\t${count}\n`;
  return out;
}

/** Entries sorted by word (code-unit order, so every stage and machine agrees). */
export function sortedByWord(counts: Map<string, number>): [string, number][] {
  return [...counts.entries()].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
}

/** Writes `part-0 .. part-(partitions-1)` into `dir`, each word in partition `fnv1a(word) % partitions`. */
export async function writePartitions(dir: string, counts: Map<string, number>, partitions: number): Promise<void> {
  const buckets = Array.from({ length: partitions }, () => new Map<string, number>());
  for (const [word, count] of counts) buckets[fnv1a(word) % partitions]!.set(word, count);
  await Promise.all(
    buckets.map((bucket, i) => writeFileAtomic(join(dir, partitionFileName(i)), formatCounts(sortedByWord(bucket)))),
  );
}
