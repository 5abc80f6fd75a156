/**
 * TeraSort, map stage: reads its input split of 100-byte records from Harvest's file system (a vertex with an
 * "input" of recordBytes 100: one task per block, run on a server holding it), sorts it by key, and writes each
 * reducer's key range as `part-<r>` (total order: terasort-lib's partitionOf), every part sorted, for the
 * scatter-gather edge to terasort-reduce. Its last line on stdout is its timings (terasort-lib's statsLine).
 *
 * Usage: terasort-map.js [--input dfs:/path]
 *   --input  a whole file to sort instead of the task's split (a whole number of records)
 */
import { finished } from "node:stream/promises";
import {
  dfsClient,
  DFS_PREFIX,
  inputSplit,
  isDfsPath,
  partFileCount,
  partitionFileName,
  TaskError,
  taskMain,
  writeOutput,
} from "../../task/index.js";
import type { TaskArgs } from "../../task/index.js";
import { cpuMsSoFar, finalStatsLine, partitionBounds, PhaseClock, RECORD_BYTES, sortRecords } from "./terasort-lib.js";

/** When this task's program started running (after Node started and loaded it), and the CPU that took. */
const mainStartMs = Date.now();
const startupCpuMs = cpuMsSoFar();

async function main({ options, positional, context }: TaskArgs): Promise<void> {
  if (positional.length > 0) throw new TaskError(`unexpected argument ${positional[0]}; usage: terasort-map --input`);
  const input = options.get("input");
  const split = inputSplit();
  if (input !== undefined ? !isDfsPath(input) : split === undefined)
    throw new TaskError("--input dfs:/path is required when the vertex has no input");
  const ctx = context();
  const reduces = partFileCount(ctx.outputs);
  if (reduces === 0) throw new TaskError("terasort-map needs a scatter-gather consumer (the reduce vertex)");

  const clock = new PhaseClock();
  const data =
    input !== undefined
      ? await readRange(input.slice(DFS_PREFIX.length), clock)
      : await readRange(split!.path.slice(DFS_PREFIX.length), clock, split!.offset, split!.length);
  clock.next("sort");
  // In place: the sort's first pass copies the records out, and the input's pages, touched already, take the result.
  const sorted = sortRecords(data, data);
  const bounds = partitionBounds(sorted, reduces);
  clock.next("write");
  // Every part at once: the file writes run on libuv's threads side by side.
  await Promise.all(
    Array.from({ length: reduces }, (_, r) => {
      const out = writeOutput(partitionFileName(r));
      out.end(sorted.subarray(bounds[r]! * RECORD_BYTES, bounds[r + 1]! * RECORD_BYTES));
      return finished(out);
    }),
  );
  clock.end();
  process.stdout.write(
    finalStatsLine(ctx, { mainStartMs, startupCpuMs }, clock, { bytesIn: data.length, bytesOut: sorted.length }),
  );
}

/**
 * `length` bytes of the file from `offset` (absent: the whole file), read into one buffer of that length (no list of
 * chunks to join: a copy of the data less, and its pages touched once). Phases: "open" (the file-system client,
 * loaded on first use, and the file's length), "read".
 */
async function readRange(path: string, clock: PhaseClock, offset = 0, range?: number): Promise<Buffer> {
  clock.next("open");
  const dfs = await dfsClient();
  try {
    const length = range ?? Number((await dfs.stat(path)).length);
    if (length % RECORD_BYTES !== 0 || offset % RECORD_BYTES !== 0)
      throw new TaskError(`dfs:${path} [${offset}, +${length}) is not a whole number of ${RECORD_BYTES}-byte records`);
    clock.next("read");
    const data = Buffer.allocUnsafeSlow(length);
    let at = 0;
    for await (const chunk of dfs.createReadStream(path, { offset, length })) {
      const piece = chunk as Buffer;
      if (at + piece.length > length) throw new TaskError(`dfs:${path} grew past the ${length} bytes it had`);
      piece.copy(data, at);
      at += piece.length;
    }
    if (at !== length) throw new TaskError(`dfs:${path}: read ${at} of its ${length} bytes`);
    return data;
  } catch (err) {
    throw err instanceof TaskError ? err : new TaskError(`cannot read dfs:${path}: ${(err as Error).message}`);
  } finally {
    dfs.close();
  }
}

taskMain("terasort-map", ["input"], main);
