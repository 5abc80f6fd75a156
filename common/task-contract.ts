/**
 * The contract between the job manager and the task programs it runs: the environment variables of every task
 * container, its token file, the edge types, and how a task's inputs and outputs are described in them. It imports
 * nothing but `node:fs` at run time, so that a task program (examples/tasks/) can use it without loading the daemons'
 * modules (gRPC).
 */
import { readFileSync } from "node:fs";

/** How a consumer's tasks read a producer's outputs. */
export type EdgeType = "scatter-gather" | "broadcast" | "one-to-one";

/** The edge types, in the order the docs list them. */
export const EDGE_TYPES: readonly EdgeType[] = ["scatter-gather", "broadcast", "one-to-one"];

/** Environment variables set in every task container. */
export const TASK_ENV = {
  /** The package root, for argv like `${HARVEST_HOME}/dist/examples/tasks/cpu-work.js`. */
  home: "HARVEST_HOME",
  /** The vertex this task belongs to. */
  vertex: "HARVEST_VERTEX",
  /** This task's index in its vertex, 0..parallelism-1. */
  taskIndex: "HARVEST_TASK_INDEX",
  /** The vertex's parallelism (optional for tasks: a task that needs it may also take it from argv). */
  parallelism: "HARVEST_VERTEX_PARALLELISM",
  /**
   * An existing, empty directory of the task's own (set by the node manager) that it writes its output files into;
   * once it has exited, the node's shuffle service serves them to the job's other tasks.
   */
  outputDir: "HARVEST_OUTPUT_DIR",
  /** JSON `TaskInput[]`: the output directories of the upstream tasks this task reads. */
  inputs: "HARVEST_INPUTS",
  /** JSON `TaskOutput[]`: the downstream consumers of this task's output. */
  outputs: "HARVEST_OUTPUTS",
  /** JSON `InputSplit`: the part of the vertex's DFS input this task reads (only for a vertex with an input). */
  split: "HARVEST_INPUT_SPLIT",
  /**
   * Where the task writes its progress and counters while it runs (set by the node manager, in the container's own
   * directory, never among its outputs): see `TASK_STATUS_LIMITS`.
   */
  statusFile: "HARVEST_STATUS_FILE",
} as const;

/**
 * The part of a vertex's DFS input one task reads (common/dag-input.ts): bytes `offset` to `offset + length` of one
 * file. With `recordBytes` the range holds whole fixed-length records; without, the task reads the lines that start
 * in the range (the last one may run past its end; the first one, unless it starts the file, belongs to the split
 * before when the range does not start right after a newline).
 */
export interface InputSplit {
  /** `dfs:/path` of the file. */
  path: string;
  offset: number;
  length: number;
  /** The file's length (a line reader stops there). */
  fileLength: number;
  recordBytes?: number;
  /** The datanodes (by id, which is the server's node id) holding a replica of the split's first block. */
  hosts: string[];
  /** The rack of each of `hosts`, in the same order. */
  racks: string[];
}

/**
 * One upstream vertex as a task sees it. `sources` are where its producer tasks left their outputs (output locations,
 * in producer order): for scatter-gather every producer, and the task reads `part-<its index>` of each; for broadcast
 * it reads every output file of every producer; for one-to-one `sources` holds the one producer with the same index.
 */
export interface TaskInput {
  vertex: string;
  edgeType: EdgeType;
  sources: string[];
}

/** Where a finished task's outputs are: the container that wrote them and the node manager whose shuffle serves them. */
export interface OutputLocation {
  containerId: string;
  nmAddress: string;
}

/** An output location as it travels in HARVEST_INPUTS and the job manager's journal: `<containerId>@<nmAddress>`. */
export function formatOutputLocation(l: OutputLocation): string {
  return `${l.containerId}@${l.nmAddress}`;
}

/** The location a string names, or undefined when it names none. */
export function parseOutputLocation(text: string): OutputLocation | undefined {
  const at = text.indexOf("@");
  if (at <= 0 || at === text.length - 1) return undefined;
  return { containerId: text.slice(0, at), nmAddress: text.slice(at + 1) };
}

/**
 * The exit code of a task that could not fetch one of its inputs (its producer's node lost it or is unreachable): the
 * job manager checks the producers, runs again those whose outputs are gone, and does not count this attempt as a
 * failure when it finds one.
 */
export const EXIT_INPUT_LOST = 75;

/** The file among a task's outputs that holds its counters (JSON: name -> whole number). */
export const COUNTERS_FILE = "_counters.json";

/** The name of a task's status file in its container's directory (TASK_ENV.statusFile names its path). */
export const STATUS_FILE_NAME = "task_status";

/**
 * A task's status file: JSON `{ "progress": 0..1, "counters": { "<name>": <whole number> } }`, replaced whole (a
 * temporary and a rename) at most about once a second by harvest/task; its node manager reads it for each running
 * task and sends it with the container's status. The node manager ignores a file over `maxBytes`, not a regular file
 * of the container's account, not JSON of that shape, or with a number that is not finite; it sends at most
 * `maxCounters` counters (by name order).
 */
export const TASK_STATUS_LIMITS = { maxBytes: 16 * 1024, maxCounters: 32, maxCounterName: 128 } as const;

/** Output files whose names start with one of these are not data (counters, markers) and are not read as inputs. */
export const NOT_DATA_PREFIXES = ["_", "."];

/** One downstream vertex as a producer sees it: a scatter-gather producer writes `part-0 .. part-(partitions-1)`. */
export interface TaskOutput {
  vertex: string;
  edgeType: EdgeType;
  /** The consumer's parallelism. */
  partitions: number;
}

/** The file a scatter-gather producer writes for consumer task `index`. */
export function partitionFileName(index: number): string {
  return `part-${index}`;
}

/**
 * The credentials a container's token file may hold: a job manager's AM token, the job's file-system token, and the
 * job's shuffle token (its tasks fetch each other's outputs with it).
 */
export type ContainerTokenKind = "am-token" | "dfs-token" | "shuffle-token";

/** Every kind of container credential. */
export const CONTAINER_TOKEN_KINDS: readonly ContainerTokenKind[] = ["am-token", "dfs-token", "shuffle-token"];

/**
 * The variable naming a container's token file: JSON `{ "<kind>": "<token>" }`, mode 0600, owned by the container's
 * account, in its own directory, written by the node manager before the container starts. Credentials are never in a
 * container's environment or argv.
 */
export const TOKEN_FILE_ENV = "HARVEST_TOKEN_FILE";

/** The name of the token file in a container's directory. */
export const TOKEN_FILE_NAME = "container_tokens";

/** A container's credentials by kind. */
export type ContainerTokens = Partial<Record<ContainerTokenKind, string>>;

/**
 * The tokens in the file `env` names (none without one). Throws an Error naming the file when it cannot be read or is
 * not an object of known kinds with string values.
 */
export function readContainerTokens(env: NodeJS.ProcessEnv = process.env): ContainerTokens {
  const file = env[TOKEN_FILE_ENV];
  if (!file) return {};
  let parsed: unknown;
  try {
    parsed = JSON.parse(readFileSync(file, "utf8"));
  } catch (err) {
    throw new Error(`${TOKEN_FILE_ENV} ${file}: ${err instanceof Error ? err.message : String(err)}`);
  }
  if (typeof parsed !== "object" || parsed === null || Array.isArray(parsed))
    throw new Error(`${TOKEN_FILE_ENV} ${file}: not a JSON object of tokens`);
  const tokens: ContainerTokens = {};
  for (const [kind, token] of Object.entries(parsed)) {
    if (!(CONTAINER_TOKEN_KINDS as readonly string[]).includes(kind) || typeof token !== "string")
      throw new Error(`${TOKEN_FILE_ENV} ${file}: ${JSON.stringify(kind)} is not a token kind with a string value`);
    tokens[kind as ContainerTokenKind] = token;
  }
  return tokens;
}
