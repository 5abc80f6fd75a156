/**
 * A task's side of the task contract (common/task-contract.ts): its environment read and checked, its command-line
 * options, its output files written atomically, and failing with a clear message and exit code. Part of `harvest/task`
 * (index.ts); it loads nothing but Node's own modules and the contract, so a small task starts fast.
 */
import { rename, writeFile } from "node:fs/promises";
import { basename, join } from "node:path";
import { EDGE_TYPES, partitionFileName, TASK_ENV } from "../common/task-contract.js";
import type { TaskInput, TaskOutput } from "../common/task-contract.js";

export { partitionFileName, TASK_ENV };

/** Exit code for bad arguments, environment or input data. */
export const EXIT_BAD_INPUT = 2;
/** Exit code for a failure the task was asked to inject (cpu-work --fail-rate / --fail-once-marker). */
export const EXIT_INJECTED_FAILURE = 3;

/** A failure the task reports on stderr and turns into its exit code. */
export class TaskError extends Error {
  constructor(
    message: string,
    readonly exitCode: number = EXIT_BAD_INPUT,
  ) {
    super(message);
    this.name = "TaskError";
  }
}

/** The container environment as a task sees it. */
export interface TaskContext {
  vertex: string;
  taskIndex: number;
  outputDir: string;
  inputs: TaskInput[];
  outputs: TaskOutput[];
  /** HARVEST_VERTEX_PARALLELISM when the job manager sets it. */
  parallelism: number | undefined;
}

/** Reads and checks the task environment; a missing or malformed variable is a TaskError naming it. */
export function readTaskContext(env: NodeJS.ProcessEnv = process.env): TaskContext {
  const vertex = required(env, TASK_ENV.vertex);
  const taskIndex = wholeNumber(required(env, TASK_ENV.taskIndex), TASK_ENV.taskIndex, 0);
  const outputDir = required(env, TASK_ENV.outputDir);
  const inputs = jsonArray(env[TASK_ENV.inputs] ?? "[]", TASK_ENV.inputs).map((raw, i) => {
    const at = `${TASK_ENV.inputs}[${i}]`;
    const entry = asRecord(raw, at);
    const sources = entry["sources"];
    if (!Array.isArray(sources) || !sources.every((p) => typeof p === "string")) {
      throw new TaskError(`${at}.sources must be an array of output locations`);
    }
    return { vertex: stringField(entry, "vertex", at), edgeType: edgeType(entry, at), sources };
  });
  const outputs = jsonArray(env[TASK_ENV.outputs] ?? "[]", TASK_ENV.outputs).map((raw, i) => {
    const at = `${TASK_ENV.outputs}[${i}]`;
    const entry = asRecord(raw, at);
    const partitions = entry["partitions"];
    if (typeof partitions !== "number" || !Number.isInteger(partitions) || partitions < 1) {
      throw new TaskError(`${at}.partitions must be a whole number >= 1, got ${JSON.stringify(partitions)}`);
    }
    return { vertex: stringField(entry, "vertex", at), edgeType: edgeType(entry, at), partitions };
  });
  const rawParallelism = env[TASK_ENV.parallelism];
  const parallelism =
    rawParallelism === undefined || rawParallelism === ""
      ? undefined
      : wholeNumber(rawParallelism, TASK_ENV.parallelism, 1);
  return { vertex, taskIndex, outputDir, inputs, outputs, parallelism };
}

/**
 * How many `part-N` files this task writes: the partition count its scatter-gather consumers agree on, or 1 when it
 * has none (a final or broadcast-only producer). Consumers with different counts cannot share one set of part files.
 */
export function scatterPartitions(outputs: TaskOutput[]): number {
  const counts = new Set(outputs.filter((o) => o.edgeType === "scatter-gather").map((o) => o.partitions));
  if (counts.size > 1) {
    throw new TaskError(
      `scatter-gather consumers want different partition counts (${[...counts].join(", ")}); ` +
        `give them equal parallelism or put a vertex between`,
    );
  }
  return [...counts][0] ?? 1;
}

/** How many `part-N` files this task writes: its scatter-gather consumers' partition count, 0 when it has none. */
export function partFileCount(outputs: TaskOutput[]): number {
  return outputs.some((o) => o.edgeType === "scatter-gather") ? scatterPartitions(outputs) : 0;
}

/** Writes `data` to `path` through a hidden temporary and a rename, so a consumer never sees half a file. */
export async function writeFileAtomic(path: string, data: string | Uint8Array): Promise<void> {
  const tmp = join(path, "..", `.${basename(path)}.tmp`);
  await writeFile(tmp, data);
  await rename(tmp, path);
}

/** Runs a task's main: exit 0 when it resolves, else the message on stderr and the TaskError's exit code (1 if other). */
export function runTask(program: string, main: () => Promise<void>): void {
  main()
    .then(
      () => {
        process.exitCode = 0;
      },
      (err: unknown) => {
        const code = err instanceof TaskError ? err.exitCode : 1;
        const message = err instanceof Error ? err.message : String(err);
        process.stderr.write(`${program}: ${message}\n`);
        process.exitCode = code;
      },
    )
    .finally(() => Promise.allSettled([...endHooks].map((hook) => hook())));
}

const endHooks = new Set<() => Promise<void> | void>();

/** Runs `hook` when the task's main has ended, whichever way (closing the connections a task opened, so it exits). */
export function atTaskEnd(hook: () => Promise<void> | void): void {
  endHooks.add(hook);
}

/** What a task program's main is given: its options and positional arguments, and its task environment. */
export interface TaskArgs {
  options: Map<string, string>;
  positional: string[];
  /** Reads and checks the task environment (readTaskContext): asked for after the arguments are checked. */
  context(): TaskContext;
}

/** A task program's entry: parses argv against the `known` options and runs `main` as `runTask` does. */
export function taskMain(program: string, known: readonly string[], main: (args: TaskArgs) => Promise<void>): void {
  runTask(program, async () => {
    const { options, positional } = parseArgs(process.argv.slice(2), known);
    await main({ options, positional, context: () => readTaskContext() });
  });
}

/** Parses `--name value` options and positional arguments; an unknown option is a TaskError listing the known ones. */
export function parseArgs(
  argv: string[],
  known: readonly string[],
): { options: Map<string, string>; positional: string[] } {
  const options = new Map<string, string>();
  const positional: string[] = [];
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]!;
    if (!arg.startsWith("--")) {
      positional.push(arg);
      continue;
    }
    const eq = arg.indexOf("=");
    const name = eq === -1 ? arg.slice(2) : arg.slice(2, eq);
    if (!known.includes(name)) {
      throw new TaskError(`unknown option --${name}; known options: ${known.map((k) => `--${k}`).join(", ")}`);
    }
    const value: string | undefined = eq === -1 ? argv[++i] : arg.slice(eq + 1);
    if (value === undefined) throw new TaskError(`option --${name} needs a value`);
    options.set(name, value);
  }
  return { options, positional };
}

/** A non-negative number option, or `fallback` when absent. */
export function numberOption(options: Map<string, string>, name: string, fallback: number): number {
  const raw = options.get(name);
  if (raw === undefined) return fallback;
  const value = Number(raw);
  if (raw.trim() === "" || !Number.isFinite(value) || value < 0) {
    throw new TaskError(`--${name} must be a non-negative number, got "${raw}"`);
  }
  return value;
}

function required(env: NodeJS.ProcessEnv, name: string): string {
  const value = env[name];
  if (value === undefined || value === "") {
    throw new TaskError(`${name} is not set; run this program as a Harvest task (the job manager sets it)`);
  }
  return value;
}

function wholeNumber(text: string, name: string, min: number): number {
  const value = Number(text);
  if (!/^\d+$/.test(text) || value < min)
    throw new TaskError(`${name} must be a whole number >= ${min}, got "${text}"`);
  return value;
}

function jsonArray(text: string, name: string): unknown[] {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (err) {
    throw new TaskError(`${name} is not valid JSON: ${(err as Error).message}`);
  }
  if (!Array.isArray(value)) throw new TaskError(`${name} must be a JSON array`);
  return value;
}

function asRecord(value: unknown, at: string): Record<string, unknown> {
  if (typeof value !== "object" || value === null || Array.isArray(value))
    throw new TaskError(`${at} must be an object`);
  return value as Record<string, unknown>;
}

function stringField(entry: Record<string, unknown>, field: string, at: string): string {
  const value = entry[field];
  if (typeof value !== "string") throw new TaskError(`${at}.${field} must be a string`);
  return value;
}

function edgeType(entry: Record<string, unknown>, at: string): TaskInput["edgeType"] {
  const value = entry["edgeType"];
  if (typeof value !== "string" || !(EDGE_TYPES as readonly string[]).includes(value)) {
    throw new TaskError(`${at}.edgeType must be one of ${EDGE_TYPES.join(", ")}, got ${JSON.stringify(value)}`);
  }
  return value as TaskInput["edgeType"];
}
