/**
 * A job run and its containers (attempts) as the simulated job manager and the resource manager know them: the state
 * the roles share.
 */
import type { NoticedServers } from "../../jobmanager/index.js";
import type { JobType } from "../../resourcemanager/index.js";
import type { SimJob } from "../jobs.js";

/** A task's place in its job: vertex x TASK_STRIDE + task index (parallelism is at most 10,000). */
export const TASK_STRIDE = 65_536;

/** The `task` of the job manager's container. */
export const JOB_MANAGER = -1;

/** One run of a job, as its job manager and the resource manager know it. */
export interface JobRun {
  readonly job: SimJob;
  readonly appId: string;
  readonly type: JobType;
  /** Per vertex: input vertices not finished yet. */
  readonly inputsLeft: Int32Array;
  /** Per vertex: tasks not completed yet. */
  readonly tasksLeft: Int32Array;
  /** Per vertex: the vertices that read it. */
  readonly consumers: readonly (readonly number[])[];
  /** Runnable tasks not granted a container yet (vertex x TASK_STRIDE + task), from `head` on. */
  queue: number[];
  /** When each queued task became runnable (parallel to `queue`). */
  queuedAtMs: number[];
  head: number;
  tasksRemaining: number;
  /** Its containers now: the job manager's and the tasks' (launching or running). */
  readonly attempts: Set<Attempt>;
  /** The job manager's container, from its grant until it is killed (undefined: none, or the model has none). */
  jobManager: Attempt | undefined;
  /** The job may ask for task containers: its job manager registered and Algorithm 1 (if any) placed it. */
  decided: boolean;
  /** The servers it may use; undefined: any. */
  allowed: Int32Array | undefined;
  waitingSinceMs: number;
  waited: boolean;
  /** The servers its job manager avoids after preemption notices (only once one came; notices on). */
  noticed?: NoticedServers | undefined;
  /** The server indices of the list last sent to the scheduler (undefined: none), and when it is sent next. */
  avoidSent?: Set<number> | undefined;
  avoidSendMs?: number;
}

/** A container: a task attempt, or a job manager (`task` JOB_MANAGER). */
export interface Attempt {
  readonly run: JobRun;
  readonly task: number;
  readonly server: number;
  /** When it was granted (the yield controller's age). */
  readonly startMs: number;
  readonly containerId: string;
  readonly milli: number;
  readonly isAm: boolean;
  alive: boolean;
  /** Launched: a task's work progresses (a job manager has registered). */
  launched: boolean;
  /** A task's whole work at full speed, ms (its progress is the share done); undefined for a job manager. */
  workMs?: number;
  /** A task's work left at full speed, ms, as of `sinceMs`, and the share of full speed it has run at since then. */
  workLeftMs: number;
  sinceMs: number;
  rate: number;
  /** Bumped whenever its end is rescheduled: an end event of an older version is stale. */
  version: number;
  /** When a task launched (its run time counts from here); undefined until then and for job managers. */
  launchedMs?: number;
  /** A preemption notice named it (notices on). */
  noticed?: boolean;
}
