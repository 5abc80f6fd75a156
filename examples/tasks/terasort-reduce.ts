/**
 * TeraSort, reduce stage: fetches its key range (`part-<its index>`) from every map over the node managers' shuffle
 * services, merges the maps' sorted runs (a k-way merge), and writes the result to Harvest's file system with
 * replication 1 as `<output>/part-<index, 5 digits>`; the reducers' files, in reducer order, are the sorted data set.
 * Its last line on stdout is its timings (terasort-lib's statsLine).
 *
 * Usage: terasort-reduce.js --output dfs:/dir
 *   --output  the directory of the sorted files (created if missing; a file an earlier attempt or run left is replaced)
 */
import { finished } from "node:stream/promises";
import {
  dfsClient,
  DFS_PREFIX,
  inputPieces,
  isDfsPath,
  openInput,
  TaskError,
  taskMain,
  writeDfsOutput,
} from "../../task/index.js";
import type { DfsClient, InputPiece, TaskArgs } from "../../task/index.js";
import { cpuMsSoFar, finalStatsLine, mergeRuns, outputFileName, PhaseClock, RunCollector } from "./terasort-lib.js";

/** Buffers the merge cycles through while the file system's write stream takes them. */
const WRITE_RING = 4;

/**
 * The output file's block size. The write stream keeps a copy of the block in flight for a failover's replay
 * (client/replay-arena.ts): with the namenode's default of 128 MiB that copy sat beside the runs not yet merged.
 */
const OUTPUT_BLOCK_BYTES = 64 * 1024 * 1024;

/** When this task's program started running (after Node started and loaded it), and the CPU that took. */
const mainStartMs = Date.now();
const startupCpuMs = cpuMsSoFar();

async function main({ options, positional, context }: TaskArgs): Promise<void> {
  if (positional.length > 0) throw new TaskError(`unexpected argument ${positional[0]}; usage: terasort-reduce`);
  const output = options.get("output");
  if (output === undefined || !isDfsPath(output)) throw new TaskError("--output dfs:/directory is required");
  const ctx = context();
  const input = ctx.inputs[0];
  if (ctx.inputs.length !== 1 || input?.edgeType !== "scatter-gather")
    throw new TaskError("terasort-reduce reads exactly one input: the map vertex, over a scatter-gather edge");

  const dir = output.slice(DFS_PREFIX.length).replace(/\/+$/, "");
  const path = `${dir}/${outputFileName(ctx.taskIndex)}`;
  const clock = new PhaseClock();
  clock.next("fetch");
  // The file-system client loads while the runs come in (its modules take a few hundred ms of CPU, and the fetches
  // wait on the node managers). The output file is created once every run is here.
  const client = dfsClient();
  client.catch(() => undefined);
  let bytesIn = 0;
  try {
    // Every map's run at once: the fetches overlap, each from its own node manager.
    const runs = await Promise.all((await inputPieces(input, ctx.taskIndex)).map(fetchRun));
    for (const run of runs) for (const slab of run) bytesIn += slab.length;
    const dfs = await client.catch((err: unknown) => {
      throw new TaskError(`cannot write dfs:${path}: ${(err as Error).message}`, 1);
    });
    clock.next("merge+write");
    await writeMerged(dfs, path, runs);
  } finally {
    (await client.catch(() => undefined))?.close();
  }
  clock.end();
  process.stdout.write(finalStatsLine(ctx, { mainStartMs, startupCpuMs }, clock, { bytesIn, bytesOut: bytesIn }));
}

/**
 * Merges `runs` into the file `path` with replication 1, written as this attempt's output (task/dfs.ts): it appears
 * under its name only when complete, replacing what an earlier attempt left.
 */
async function writeMerged(dfs: DfsClient, path: string, runs: Buffer[][]): Promise<void> {
  const out = writeDfsOutput(`${DFS_PREFIX}${path}`, {
    client: dfs,
    replication: 1,
    blockSizeBytes: OUTPUT_BLOCK_BYTES,
  });
  const failed = new Promise<never>((_, reject) => out.once("error", reject));
  failed.catch(() => undefined);
  // The merge fills a ring of WRITE_RING buffers and never waits for a chunk's packets to go out before it merges
  // the next. A buffer is merged into again only after the write of the chunk after its last one has been taken:
  // the stream copies what it sends into its own packets and keeps only the tail of a chunk under one packet,
  // which it takes first when the next chunk comes (client/write-stream.ts).
  const taken: Promise<void>[] = [];
  const merged = mergeRuns(runs, { reuse: WRITE_RING, release: true });
  for (let i = 0; ; i++) {
    if (i >= WRITE_RING - 1) await Promise.race([taken[i - (WRITE_RING - 1)], failed]);
    const next = merged.next();
    if (next.done) break;
    taken.push(new Promise<void>((resolve) => out.write(next.value, () => resolve())));
  }
  out.end();
  await Promise.race([finished(out), failed]);
}

/**
 * One map's run, copied as it comes into slabs of whole records (RunCollector): the merge reads them in place, and
 * the received chunks (cut anywhere, at any offset) are garbage at once instead of staying beside aligned copies.
 */
async function fetchRun(piece: InputPiece): Promise<Buffer[]> {
  const run = new RunCollector();
  for await (const chunk of await openInput(piece)) run.push(chunk as Buffer);
  try {
    return run.finish();
  } catch (err) {
    throw new TaskError(`the run of map ${piece.producer}: ${(err as Error).message}`);
  }
}

taskMain("terasort-reduce", ["output"], main);
