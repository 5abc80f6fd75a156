/**
 * TeraSort, reduce stage: fetches its key range (`part-<its index>`) from every map over the node managers' shuffle
 * services, merges the maps' sorted runs (a k-way merge), and writes the result to Harvest's file system with
 * replication 1 as `<output>/part-<index, 5 digits>`; the reducers' files, in reducer order, are the sorted data set.
 * Its last line on stdout is its timings (terasort-lib's statsLine).
 *
 * Usage: terasort-reduce.js --output dfs:/dir
 *   --output  the directory of the sorted files (created if missing; a file an earlier attempt left is replaced)
 */
import { performance } from "node:perf_hooks";
import { finished } from "node:stream/promises";
import { dfsClient, DFS_PREFIX, inputPieces, isDfsPath, openInput, TaskError, taskMain } from "../../task/index.js";
import type { InputPiece, TaskArgs } from "../../task/index.js";
import { cpuMsSoFar, mergeRuns, outputFileName, PhaseClock, RECORD_BYTES, statsLine } from "./terasort-lib.js";

/** Buffers the merge cycles through while the file system's write stream takes them. */
const WRITE_RING = 4;

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
  // wait on the node managers). The output file is created only once every run is here: a task that exits with a
  // lost input would otherwise leave the file open under its lease for the next attempt to wait out.
  const client = dfsClient().then(async (dfs) => {
    await dfs.mkdir(dir || "/");
    return dfs;
  });
  client.catch(() => undefined);
  let bytesIn = 0;
  try {
    // Every map's run at once: the fetches overlap, each from its own node manager. A run stays in the pieces it
    // came in (the merge reads across them): joining them would copy every byte once more.
    const runs = await Promise.all((await inputPieces(input, ctx.taskIndex)).map(fetchPieces));
    for (const [i, run] of runs.entries()) {
      const bytes = run.reduce((sum, b) => sum + b.length, 0);
      if (bytes % RECORD_BYTES !== 0)
        throw new TaskError(
          `the run of map ${i} holds ${bytes} bytes, not a whole number of ${RECORD_BYTES}-byte records`,
        );
      bytesIn += bytes;
    }
    const dfs = await client.catch((err: unknown) => {
      throw new TaskError(`cannot write dfs:${path}: ${(err as Error).message}`, 1);
    });
    clock.next("merge+write");
    await writeMerged(dfs, path, runs);
  } finally {
    (await client.catch(() => undefined))?.close();
  }
  clock.end();
  process.stdout.write(
    statsLine({
      vertex: ctx.vertex,
      taskIndex: ctx.taskIndex,
      containerId: process.env["HARVEST_CONTAINER_ID"] ?? "",
      nodeId: process.env["HARVEST_NODE_ID"] ?? "",
      processStartMs: performance.timeOrigin,
      mainStartMs,
      startupCpuMs,
      endMs: Date.now(),
      phases: clock.phases,
      bytesIn,
      bytesOut: bytesIn,
      cpuMs: cpuMsSoFar(),
    }),
  );
}

/** Merges `runs` into the new file `path` with replication 1. */
async function writeMerged(dfs: Awaited<ReturnType<typeof dfsClient>>, path: string, runs: Buffer[][]): Promise<void> {
  try {
    const out = dfs.createWriteStream(path, { replication: 1, overwrite: true });
    const failed = new Promise<never>((_, reject) => out.once("error", reject));
    failed.catch(() => undefined);
    // The merge fills a ring of WRITE_RING buffers and never waits for a chunk's packets to go out before it merges
    // the next. A buffer is merged into again only after the write of the chunk after its last one has been taken:
    // the stream copies what it sends into its own packets and keeps only the tail of a chunk under one packet,
    // which it takes first when the next chunk comes (client/write-stream.ts).
    const taken: Promise<void>[] = [];
    const merged = mergeRuns(runs, { reuse: WRITE_RING });
    for (let i = 0; ; i++) {
      if (i >= WRITE_RING - 1) await Promise.race([taken[i - (WRITE_RING - 1)], failed]);
      const next = merged.next();
      if (next.done) break;
      taken.push(new Promise<void>((resolve) => out.write(next.value, () => resolve())));
    }
    out.end();
    await Promise.race([finished(out), failed]);
  } catch (err) {
    throw new TaskError(`cannot write dfs:${path}: ${(err as Error).message}`, 1);
  }
}

/** One map's run, in the pieces it came in. */
async function fetchPieces(piece: InputPiece): Promise<Buffer[]> {
  const chunks: Buffer[] = [];
  for await (const chunk of await openInput(piece)) chunks.push(chunk as Buffer);
  return chunks;
}

taskMain("terasort-reduce", ["output"], main);
