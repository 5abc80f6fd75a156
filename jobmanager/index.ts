/**
 * The job manager: the DAG state machine and the per-job process, and the pure policy it runs that the simulator calls
 * from here: the servers its tasks avoid after a preemption notice (`NoticedServers`).
 */
export { DagRunner } from "./dag-runner.js";
export type { AttemptEnd, DagRunnerOptions, EndVerdict, TaskRecord, VertexCounts } from "./dag-runner.js";
export type { TaskEvent, TaskState } from "./task-state.js";
export { TASK_MACHINE } from "./task-state.js";
export { JobManager, jobManagerOptionsFromEnv } from "./job-manager.js";
export type { JobManagerExit, JobManagerOptions } from "./job-manager.js";
export { DEFAULT_NOTICE_AVOID_MS, NoticedServers } from "./policy/noticed-servers.js";
