/**
 * Word count, map stage: counts the words of its slice of a text file and hash-partitions the counts into one
 * `part-N` file per task of its scatter-gather consumer (or `counts.tsv` when it has none).
 *
 * Usage: wordcount-map.js [<text-file | dfs:/path>] [--splits N] [--cpu-seconds S]
 * (--cpu-seconds adds CPU work to give the demo's tasks the weight of real batch work)
 * With no file, the task reads the lines of its input split (a vertex with an "input" in the DAG: one task per DFS
 * block, run where the block is). With a file, task i of N reads the lines that start in bytes [i*size/N,
 * (i+1)*size/N), so the N slices cover every line exactly once. N is --splits, else HARVEST_VERTEX_PARALLELISM. It
 * reports its progress as it counts (and burns its CPU work, the second half when there is some), and the words
 * counted so far as the counter `words`.
 */
import { open } from "node:fs/promises";
import type { FileHandle } from "node:fs/promises";
import { join } from "node:path";
import {
  incrementCounter,
  numberOption,
  partFileCount,
  reportProgress,
  TaskError,
  taskMain,
  writeFileAtomic,
} from "../../task/index.js";
import { burnCpu } from "./example-lib.js";
import type { TaskArgs } from "../../task/index.js";
import { inputSplit, isDfsPath, readDfsFile, readSplit } from "../../task/index.js";
import { COUNTS_FILE, formatCounts, sortedByWord, tokenize, writePartitions } from "./wordcount-lib.js";

const CHUNK_BYTES = 64 * 1024;
/** Characters of the slice counted between progress reports (about). */
const COUNT_CHUNK_CHARS = 256 * 1024;

async function main({ options, positional, context }: TaskArgs): Promise<void> {
  const ctx = context();
  const file = positional[0];
  const split = inputSplit();
  if (positional.length > 1 || (file === undefined && !split)) {
    throw new TaskError("usage: wordcount-map [<text-file>] [--splits N] (one input file, or the vertex's input)");
  }
  const counts = await countWords(
    file === undefined
      ? (await readSplit(split)).toString("utf8")
      : await readSlice(file, ctx.taskIndex, splitsOf(options, ctx)),
    numberOption(options, "cpu-seconds", 0) * 1e6,
  );
  const parts = partFileCount(ctx.outputs);
  if (parts > 0) await writePartitions(ctx.outputDir, counts, parts);
  else await writeFileAtomic(join(ctx.outputDir, COUNTS_FILE), formatCounts(sortedByWord(counts)));
}

/** How many equal slices of a file the vertex's tasks read: --splits, else the vertex's parallelism. */
function splitsOf(options: TaskArgs["options"], ctx: { parallelism?: number; taskIndex: number }): number {
  const splits = numberOption(options, "splits", ctx.parallelism ?? 0);
  if (!Number.isInteger(splits) || splits < 1) {
    throw new TaskError("the number of splits is unknown: pass --splits N or set HARVEST_VERTEX_PARALLELISM");
  }
  if (ctx.taskIndex >= splits) {
    throw new TaskError(`task index ${ctx.taskIndex} is outside the ${splits} splits; --splits must equal parallelism`);
  }
  return splits;
}

/**
 * The words of `text` counted a chunk of whole lines at a time (a word never spans a line), reporting the progress
 * and the counter `words` as it goes; then `cpuUs` of CPU work, the second half of the progress when there is some.
 */
async function countWords(text: string, cpuUs: number): Promise<Map<string, number>> {
  const countingShare = cpuUs > 0 ? 0.5 : 1;
  const counts = new Map<string, number>();
  incrementCounter("words", 0);
  for (let at = 0; at < text.length;) {
    const nl = text.indexOf("\n", at + COUNT_CHUNK_CHARS);
    const end = nl === -1 ? text.length : nl + 1;
    const words = tokenize(text.slice(at, end));
    for (const word of words) counts.set(word, (counts.get(word) ?? 0) + 1);
    incrementCounter("words", words.length);
    at = end;
    reportProgress((countingShare * at) / text.length);
  }
  await burnCpu(cpuUs, (f) => reportProgress(countingShare + (1 - countingShare) * f));
  return counts;
}

/** The text of the lines that start inside byte range `index` of `splits` equal ranges of the file. */
async function readSlice(path: string, index: number, splits: number): Promise<string> {
  if (isDfsPath(path)) return sliceOfBuffer(await readDfsFile(path), index, splits);
  let fh: FileHandle;
  try {
    fh = await open(path, "r");
  } catch (err) {
    throw new TaskError(`cannot open input ${path}: ${(err as Error).message}`);
  }
  try {
    const size = (await fh.stat()).size;
    const begin = await lineStartAtOrAfter(fh, Math.floor((index * size) / splits), size);
    const end = await lineStartAtOrAfter(fh, Math.floor(((index + 1) * size) / splits), size);
    if (end <= begin) return "";
    const buf = Buffer.alloc(end - begin);
    let done = 0;
    while (done < buf.length) {
      const { bytesRead } = await fh.read(buf, done, buf.length - done, begin + done);
      if (bytesRead === 0) break;
      done += bytesRead;
    }
    // Slices start and end right after a newline byte, which never falls inside a UTF-8 sequence.
    return buf.subarray(0, done).toString("utf8");
  } finally {
    await fh.close();
  }
}

/** The same slice as `readSlice`, of a file already in memory (read from Harvest's file system). */
function sliceOfBuffer(buf: Buffer, index: number, splits: number): string {
  const lineStart = (offset: number): number => {
    if (offset <= 0) return 0;
    const nl = buf.indexOf(0x0a, offset - 1);
    return nl === -1 ? buf.length : nl + 1;
  };
  const begin = lineStart(Math.floor((index * buf.length) / splits));
  const end = lineStart(Math.floor(((index + 1) * buf.length) / splits));
  return end <= begin ? "" : buf.subarray(begin, end).toString("utf8");
}

/** The first offset >= `offset` that begins a line (0, or just after a "\n"), or `size` when there is none. */
async function lineStartAtOrAfter(fh: FileHandle, offset: number, size: number): Promise<number> {
  if (offset <= 0) return 0;
  const buf = Buffer.alloc(CHUNK_BYTES);
  // A line starts at `offset` exactly when the byte before it is a newline, so the scan begins one byte early.
  let pos = offset - 1;
  while (pos < size) {
    const { bytesRead } = await fh.read(buf, 0, buf.length, pos);
    if (bytesRead === 0) break;
    const nl = buf.subarray(0, bytesRead).indexOf(0x0a);
    if (nl !== -1) return pos + nl + 1;
    pos += bytesRead;
  }
  return size;
}

taskMain("wordcount-map", ["splits", "cpu-seconds"], main);
