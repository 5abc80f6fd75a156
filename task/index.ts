/**
 * `harvest/task`: what a task program uses to be a Harvest task. Its context (vertex, index, the edges in and out),
 * its inputs fetched from the node managers that hold them, its outputs written where the node's shuffle service
 * serves them, its command-line options, the job's file system with the job's credentials, and an exit code a job
 * manager understands. The example tasks (examples/tasks/) use this module and nothing else of Harvest's.
 *
 *   import { taskMain, inputPieces, openInput, writeOutput } from "harvest/task";
 *
 * See docs/task-api.md.
 */
export {
  atTaskEnd,
  EXIT_BAD_INPUT,
  EXIT_INJECTED_FAILURE,
  numberOption,
  parseArgs,
  partFileCount,
  partitionFileName,
  readTaskContext,
  runTask,
  scatterPartitions,
  TASK_ENV,
  TaskError,
  taskMain,
  writeFileAtomic,
} from "./context.js";
export type { TaskArgs, TaskContext } from "./context.js";
export { inputFiles, inputPieces, openInput } from "./inputs.js";
export type { InputPiece } from "./inputs.js";
export { writeOutput } from "./outputs.js";
export { inputSplit, readSplit } from "./splits.js";
export type { InputSplit, RangeReader } from "./splits.js";
export { currentCounters, currentProgress, incrementCounter, reportProgress } from "./counters.js";
export {
  DFS_PREFIX,
  DFS_TEMPORARY_DIR,
  dfsClient,
  isDfsPath,
  readDfsFile,
  writeDfsFile,
  writeDfsOutput,
} from "./dfs.js";
export type { DfsOutputOptions } from "./dfs.js";
export type { DfsClient } from "../client/dfs-client.js";
export { EXIT_INPUT_LOST } from "../common/task-contract.js";
export type { EdgeType, TaskInput, TaskOutput } from "../common/task-contract.js";
