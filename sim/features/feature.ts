/**
 * The contract of a compute-simulation feature (as Hadoop SLS plugs its extras around the real scheduler): the
 * lifecycle and event hooks a feature may implement, all optional, and the one port roles may ask of a feature (the
 * container keys and predictor of lifetimes). The core (`ComputeState`) calls the hooks through its `FeatureBus`, in
 * the order `runCompute` lists the features; roles publish the events and never name a feature.
 */
import type { ContainerKey, LifetimePredictor, SchedulerPolicy } from "../../resourcemanager/index.js";
import type { FeatureFigures } from "../engine/compute-result.js";
import type { SimJob } from "../jobs.js";
import type { Attempt, JobRun } from "../roles/job-run.js";
import { TASK_STRIDE } from "../roles/job-run.js";

/** What roles and features ask of lifetimes: the keys the predictor knows containers by, and the predictor. */
export interface LifetimesPort {
  /** What the predictor is told of task `task` (vertex x TASK_STRIDE + index) of `run`. */
  taskKey(run: JobRun, task: number): ContainerKey;
  /** What the predictor is told of `run`'s job manager. */
  jobManagerKey(run: JobRun): ContainerKey;
  /** The predictor node choice and drains ask; undefined when no feature keeps one. */
  readonly predictor: LifetimePredictor | undefined;
}

/** The port without a lifetimes feature: the keys the resource manager's model knows (name, vertex), no predictor. */
export const STOCK_LIFETIMES: LifetimesPort = {
  taskKey: (run, task) => ({
    job: run.job.shape.name,
    vertex: run.job.shape.vertices[Math.floor(task / TASK_STRIDE)]!.name,
    isJobManager: false,
  }),
  jobManagerKey: (run) => ({ job: run.job.shape.name, vertex: "", isJobManager: true }),
  predictor: undefined,
};

/**
 * A feature of the compute simulation. Every hook is optional; each is called at one point of the run, for every
 * feature that has it, in list order. A hook may change the core's state, call the roles through the core's ports and
 * schedule engine events; the order of those effects across features is the list's.
 */
export interface SimFeature {
  /** The port this feature answers for lifetimes (the first feature with one answers; else `STOCK_LIFETIMES`). */
  readonly lifetimes?: LifetimesPort;
  /** While the core builds the scheduler: wraps the placement policy (`inner`: the policy or an inner wrapper). */
  schedulerPolicy?(inner: SchedulerPolicy): SchedulerPolicy;
  /** The core is built (servers, scheduler, nodes): the feature sets up its state. */
  setUp?(): void;
  /** The run begins (its first slot, classification and arrival are scheduled): the feature schedules its events. */
  runStarted?(): void;
  /**
   * A job arrives. Returns true when the feature takes it (queues or refuses it; it submits it itself through
   * `jobManagers.submit` when it lets it in): the core then does not submit it, nor asks the features after it.
   */
  jobArrived?(job: SimJob): boolean;
  /** A container (task or job manager) ends, completed or killed, before its release; it held `heldCoreMs`. */
  containerEnded?(a: Attempt, heldCoreMs: number): void;
  /** A task attempt ran to its end (its container released). */
  taskCompleted?(a: Attempt): void;
  /** A job ended after `durationMs` (its job manager `jobManager`, if any, already released). */
  jobDone?(run: JobRun, durationMs: number, jobManager: Attempt | undefined): void;
  /** The invariant check's part (with `checkInvariants`): calls `fail` when the feature's books are wrong. */
  checkBooks?(fail: (why: string) => never): void;
  /** The figures the feature sets in the run's result (as of now: the horizon, once the run has returned). */
  figures?(): Partial<FeatureFigures>;
}
