/**
 * Lifetimes (seeds/002) as a feature of the compute simulation: the lifetime model (fed as the resource manager feeds
 * its own) and the predictor the node choice and drains ask, the keys it knows containers by, and node choice by
 * lifetimes (NILAS, LAVA) around the placement policy, with its monitor tick.
 */
import { LifetimeModel, LifetimeNodeChoice, OraclePredictor } from "../../resourcemanager/index.js";
import type { ContainerKey, LifetimePredictor, SchedulerPolicy } from "../../resourcemanager/index.js";
import type { ResolvedComputeOptions } from "../compute-options.js";
import type { ComputeState } from "../engine/compute-state.js";
import { taskDurationMs } from "../jobs.js";
import type { Attempt, JobRun } from "../roles/job-run.js";
import { TASK_STRIDE } from "../roles/job-run.js";
import type { LifetimesPort, SimFeature } from "./feature.js";
import { STOCK_LIFETIMES } from "./feature.js";

/** See the file header. */
export class LifetimesFeature implements SimFeature, LifetimesPort {
  /** Whether a run needs it: node choice by lifetimes, or drains that ask for the containers' remaining times. */
  static wanted(o: ResolvedComputeOptions): boolean {
    return o.nodeChoice !== "stock" || (o.reimages !== undefined && o.reimages.drain !== "none");
  }

  readonly lifetimes: LifetimesPort = this;

  /** The lifetime model, fed as the resource manager feeds its own. */
  private readonly model = new LifetimeModel();

  /** What node choice and drains ask: the model, or the oracle in front of it. */
  readonly predictor: LifetimePredictor;

  constructor(private readonly sim: ComputeState) {
    this.predictor = sim.o.lifetimes === "oracle" ? new OraclePredictor(this.model) : this.model;
  }

  /** NILAS or LAVA around `inner`, as the resource manager wraps it (inside any power gate; the simulator has none). */
  schedulerPolicy(inner: SchedulerPolicy): SchedulerPolicy {
    const o = this.sim.o;
    if (o.nodeChoice === "stock") return inner;
    this.sim.nodeChoice = new LifetimeNodeChoice(
      inner,
      this.sim.driver.nodeChoiceSource(),
      this.predictor,
      { ...o.nodeChoiceOptions, kind: o.nodeChoice },
      this.sim.engine.clock,
    );
    return this.sim.nodeChoice;
  }

  /** The node choice hears of every grant and release from the scheduler's listener. */
  setUp(): void {
    const choice = this.sim.nodeChoice;
    if (choice)
      this.sim.scheduler.setListener({
        granted: (alloc) =>
          choice.onGranted({
            containerId: alloc.containerId,
            nodeId: alloc.nodeId,
            key: this.sim.driver.keyOfGrant(alloc),
            startMs: this.sim.engine.clock.nowMs(),
            resource: alloc.resource,
          }),
        released: (alloc) => choice.onReleased(alloc.containerId),
      });
  }

  /** The resource manager's monitor tick (`retryIntervalMs` models it here too): LAVA's deadlines and fill. */
  runStarted(): void {
    const { cluster } = this.sim;
    const choice = this.sim.nodeChoice;
    if (!choice) return;
    const tick = (t: number): void => {
      if (t >= cluster.horizonMs) return;
      this.sim.at(t, () => {
        this.sim.tickingAll = true;
        choice.tick(t);
        this.sim.tickingAll = false;
        tick(t + this.sim.o.retryIntervalMs);
      });
    };
    tick(cluster.historyMs + this.sim.o.retryIntervalMs);
  }

  /**
   * The model's key of a task; under the oracle, with its truth: its duration at full speed (its launch and any
   * slowdown by the primary are not in it).
   */
  taskKey(run: JobRun, task: number): ContainerKey {
    const key = STOCK_LIFETIMES.taskKey(run, task);
    if (this.sim.o.lifetimes === "oracle")
      key.trueLifetimeMs = taskDurationMs(this.sim.stream, run.job, Math.floor(task / TASK_STRIDE), task % TASK_STRIDE);
    return key;
  }

  /**
   * The model's key of a job manager. The oracle knows no truth for it (a job's remaining time depends on the run
   * under way), so it asks the model: the job's past durations.
   */
  jobManagerKey(run: JobRun): ContainerKey {
    return STOCK_LIFETIMES.jobManagerKey(run);
  }

  /** A task attempt completed: the model learns its run time (launch to end, as the node manager reports it). */
  taskCompleted(a: Attempt): void {
    const vertex = a.run.job.shape.vertices[Math.floor(a.task / TASK_STRIDE)]!.name;
    this.model.observeTask(a.run.job.shape.name, vertex, this.sim.engine.clock.nowMs() - (a.launchedMs ?? a.startMs));
  }

  /** A job finished: the model learns its duration, the node choice forgets its waits. */
  jobDone(run: JobRun, durationMs: number): void {
    this.model.observeJob(run.job.shape.name, durationMs);
    this.sim.nodeChoice?.forget(run.appId);
  }

  /** The node choice's registry holds exactly the containers each server runs. */
  checkBooks(fail: (why: string) => never): void {
    const choice = this.sim.nodeChoice;
    if (!choice) return;
    for (let s = 0; s < this.sim.nodeIds.length; s++) {
      const id = this.sim.nodeIds[s]!;
      const held = this.sim.running[s]!.size;
      const known = choice.containersOn(id).length;
      if (known !== held) fail(`server ${id}: the node choice knows ${known} containers, it runs ${held}`);
    }
  }
}
