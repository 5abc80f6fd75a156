/**
 * The contract between the job manager and the task programs it runs: the environment variables of every task
 * container, the edge types, and how a task's inputs and outputs are described in them. It imports nothing at run
 * time, so that a task program (examples/tasks/) can use it without loading the daemons' modules (gRPC).
 */

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
  /** An existing, empty directory the task writes its output files into. */
  outputDir: "HARVEST_OUTPUT_DIR",
  /** JSON `TaskInput[]`: the output directories of the upstream tasks this task reads. */
  inputs: "HARVEST_INPUTS",
  /** JSON `TaskOutput[]`: the downstream consumers of this task's output. */
  outputs: "HARVEST_OUTPUTS",
} as const;

/**
 * One upstream vertex as a task sees it. For scatter-gather, `paths` holds every producer task's output directory and
 * the task reads `part-<its index>` from each; for broadcast it reads every file of every path; for one-to-one `paths`
 * holds the one producer task with the same index.
 */
export interface TaskInput {
  vertex: string;
  edgeType: EdgeType;
  paths: string[];
}

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
