/**
 * A task's inputs: its share of each upstream vertex's outputs, fetched over the network from the shuffle services of
 * the node managers that hold them (nodemanager/shuffle-service.ts), with the job's shuffle token from the task's
 * token file. A fetch that breaks resumes where it stopped; one that cannot be completed ends the task with
 * EXIT_INPUT_LOST, so its job manager runs the producer again (its node lost the output) instead of counting a
 * failure. A source may also be a local directory, for a task run by hand.
 *
 * gRPC is loaded only when a task fetches from a node manager.
 */
import { createReadStream, createWriteStream } from "node:fs";
import { mkdir, readdir, stat } from "node:fs/promises";
import { join } from "node:path";
import { PassThrough } from "node:stream";
import type { Readable } from "node:stream";
import { pipeline } from "node:stream/promises";
import {
  EXIT_INPUT_LOST,
  NOT_DATA_PREFIXES,
  parseOutputLocation,
  partitionFileName,
  readContainerTokens,
} from "../common/task-contract.js";
import type { OutputLocation, TaskInput } from "../common/task-contract.js";
import { atTaskEnd, TaskError } from "./context.js";
import type { ShuffleServiceClient } from "../proto/generated/harvest/v1/ShuffleService.js";
import type { OutputChunkOutput } from "../proto/generated/harvest/v1/OutputChunk.js";

/** One file of this task's share of an input: which producer, and the file's name in its output. */
export interface InputPiece {
  vertex: string;
  /** The producer task's index in its vertex (for one-to-one, this task's own). */
  producer: number;
  /** Where the producer's outputs are: an output location, or a local directory. */
  source: string;
  name: string;
}

/** Attempts at one fetch (the first and the resumptions) before the input counts as lost. */
const FETCH_ATTEMPTS = 4;

/**
 * The pieces of this task's share of `input`, in producer order: `part-<taskIndex>` of every producer for
 * scatter-gather; every data file of every producer (names starting with "_" or "." are not data) for broadcast and
 * one-to-one.
 */
export async function inputPieces(input: TaskInput, taskIndex: number): Promise<InputPiece[]> {
  if (input.edgeType === "one-to-one" && input.sources.length !== 1)
    throw new TaskError(
      `one-to-one input from ${input.vertex} must have exactly one source, got ${input.sources.length}`,
    );
  const producerOf = (i: number): number => (input.edgeType === "one-to-one" ? taskIndex : i);
  if (input.edgeType === "scatter-gather")
    return input.sources.map((source, i) => ({
      vertex: input.vertex,
      producer: producerOf(i),
      source,
      name: partitionFileName(taskIndex),
    }));
  const pieces: InputPiece[] = [];
  for (const [i, source] of input.sources.entries()) {
    for (const name of await listOutputs(input.vertex, source))
      pieces.push({ vertex: input.vertex, producer: producerOf(i), source, name });
  }
  return pieces;
}

/** A stream of one piece's bytes; an error on it is a TaskError (EXIT_INPUT_LOST when a node lost it). */
export async function openInput(piece: InputPiece): Promise<Readable> {
  const location = parseOutputLocation(piece.source);
  if (!location) {
    const file = join(piece.source, piece.name);
    await stat(file).catch((err: unknown) => {
      throw new TaskError(`cannot read input ${file} of ${piece.vertex}: ${(err as Error).message}`);
    });
    return createReadStream(file);
  }
  return fetchStream(piece, location);
}

/** Which pieces `inputFiles` fetches, and where to. */
export interface InputFilesOptions {
  /** A directory for the fetched files (created). @default `inputs/<vertex>` in the task's working directory */
  dir?: string;
  /** Only the pieces whose file name this accepts (e.g. one file of each broadcast producer). @default all */
  only?: (name: string) => boolean;
}

/**
 * Fetches this task's share of `input` into local files and returns their paths in producer order, for tasks that
 * read their inputs as files (pieces in a local source directory are read where they are).
 */
export async function inputFiles(
  input: TaskInput,
  taskIndex: number,
  options: InputFilesOptions = {},
): Promise<string[]> {
  const into = options.dir ?? join(process.cwd(), "inputs", input.vertex);
  const files: string[] = [];
  for (const piece of await inputPieces(input, taskIndex)) {
    if (options.only && !options.only(piece.name)) continue;
    if (!parseOutputLocation(piece.source)) {
      files.push(join(piece.source, piece.name));
      continue;
    }
    await mkdir(into, { recursive: true });
    const file = join(into, `${piece.producer}-${piece.name}`);
    await pipeline(await openInput(piece), createWriteStream(file));
    files.push(file);
  }
  return files;
}

/** The data files of one producer's output, sorted by name. */
async function listOutputs(vertex: string, source: string): Promise<string[]> {
  const isData = (name: string): boolean => !NOT_DATA_PREFIXES.some((p) => name.startsWith(p));
  const location = parseOutputLocation(source);
  if (!location) {
    let entries;
    try {
      entries = await readdir(source, { withFileTypes: true });
    } catch (err) {
      throw new TaskError(`cannot list input directory ${source} of ${vertex}: ${(err as Error).message}`);
    }
    return entries
      .filter((e) => e.isFile() && isData(e.name))
      .map((e) => e.name)
      .sort();
  }
  const client = await shuffleClient(location.nmAddress);
  for (let attempt = 1; ; attempt++) {
    try {
      const { call } = await import("../common/grpc.js");
      const res = await call(client, client.listOutputs, {
        appId: appIdOf(),
        containerId: location.containerId,
      });
      return res.files
        .map((f) => f.name)
        .filter(isData)
        .sort();
    } catch (err) {
      if (attempt >= FETCH_ATTEMPTS || isGone(err)) throw lost(vertex, location, err);
      await sleep(backoffMs(attempt));
    }
  }
}

/** The piece's bytes from its node manager, resuming after a broken stream where it stopped. */
async function fetchStream(piece: InputPiece, location: OutputLocation): Promise<Readable> {
  const client = await shuffleClient(location.nmAddress);
  const out = new PassThrough({ highWaterMark: 4 << 20 });
  let offset = 0;
  const run = async (): Promise<void> => {
    for (let attempt = 1; ; attempt++) {
      try {
        const stream = client.fetchOutput({
          appId: appIdOf(),
          containerId: location.containerId,
          name: piece.name,
          offset,
        });
        for await (const chunk of stream as AsyncIterable<OutputChunkOutput>) {
          offset += chunk.data.length;
          if (!out.write(chunk.data)) await new Promise((resolve) => out.once("drain", resolve));
        }
        out.end();
        return;
      } catch (raw) {
        const err = (await import("../common/errors.js")).fromGrpcError(raw);
        if (attempt >= FETCH_ATTEMPTS || isGone(err)) throw lost(piece.vertex, location, err, piece.name);
        await sleep(backoffMs(attempt));
      }
    }
  };
  run().catch((err: unknown) => out.destroy(err as Error));
  return out;
}

const clients = new Map<string, ShuffleServiceClient>();

/**
 * The HTTP/2 flow-control window of a shuffle connection (and of each fetch on it), in bytes. grpc-js leaves Node's
 * 64 KiB: a node manager streaming 1 MiB chunks then waits for a window update every 64 KiB. Four fetches of 64 MiB
 * over TLS on loopback (a micro-benchmark of the shuffle's path, 2 cores): 72-75 MB/s at 64 KiB and 136-143 MB/s at
 * 1-4 MiB, with 9.5-10 against 4.8-6 ms of the fetcher's CPU per MiB, and 9.6-10.2 against 6.1-7.3 of the server's.
 * It also bounds what a fetcher may have in flight per node manager.
 */
const SHUFFLE_WINDOW_BYTES = 4 * 1024 * 1024;

/** One client per node manager, trusting the cluster CA, presenting the job's shuffle token. */
async function shuffleClient(nmAddress: string): Promise<ShuffleServiceClient> {
  const existing = clients.get(nmAddress);
  if (existing) return existing;
  const { loadHarvestProto, makeClient } = await import("../common/grpc.js");
  const { TOKEN_METADATA } = await import("../common/auth.js");
  const ca = process.env["HARVEST_CA"];
  let token = "";
  try {
    token = readContainerTokens()["shuffle-token"] ?? "";
  } catch (err) {
    throw new TaskError((err as Error).message);
  }
  const security = ca ? { ca, tokens: { [TOKEN_METADATA["shuffle-token"]]: token } } : undefined;
  const client = makeClient(loadHarvestProto().ShuffleService, nmAddress, security, {
    "grpc-node.flow_control_window": SHUFFLE_WINDOW_BYTES,
  });
  if (clients.size === 0) atTaskEnd(() => clients.forEach((c) => c.close()));
  clients.set(nmAddress, client);
  return client;
}

/** The job this task belongs to (the node manager sets HARVEST_APP_ID in every container). */
function appIdOf(): string {
  const appId = process.env["HARVEST_APP_ID"];
  if (!appId) throw new TaskError("HARVEST_APP_ID is not set; run this program as a Harvest task");
  return appId;
}

/** The node manager answered that the output is not there: retrying will not bring it back. */
function isGone(err: unknown): boolean {
  const code = (err as { code?: unknown }).code;
  return code === "SHUFFLE_OUTPUT_NOT_FOUND";
}

function lost(vertex: string, location: OutputLocation, err: unknown, name = ""): TaskError {
  const what = name ? `${name} of ${location.containerId}` : `the outputs of ${location.containerId}`;
  return new TaskError(
    `input lost: cannot fetch ${what} (${vertex}) from ${location.nmAddress}: ${(err as Error).message}`,
    EXIT_INPUT_LOST,
  );
}

function backoffMs(attempt: number): number {
  return 250 * 2 ** (attempt - 1);
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
