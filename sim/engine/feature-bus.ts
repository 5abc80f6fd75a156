/**
 * The compute simulation's feature bus: the features of a run in order, and one typed method per hook of
 * `SimFeature` that calls every feature implementing it. The lists per hook are built once, so an event on a hot path
 * (a container's end) costs a loop over the features that listen to it and nothing else: no allocation, no lookup.
 */
import type { SchedulerPolicy } from "../../resourcemanager/index.js";
import type { LifetimesPort, SimFeature } from "../features/feature.js";
import { STOCK_LIFETIMES } from "../features/feature.js";
import type { SimJob } from "../jobs.js";
import type { Attempt, JobRun } from "../roles/job-run.js";
import type { FeatureFigures } from "./compute-result.js";

/** See the file header. */
export class FeatureBus {
  /** The lifetimes port of the first feature that has one, else the stock keys with no predictor. */
  readonly lifetimes: LifetimesPort;

  private readonly arrivals: readonly SimFeature[];

  private readonly containerEnds: readonly SimFeature[];

  private readonly taskCompletions: readonly SimFeature[];

  private readonly jobEnds: readonly SimFeature[];

  constructor(readonly features: readonly SimFeature[]) {
    this.lifetimes = features.find((f) => f.lifetimes !== undefined)?.lifetimes ?? STOCK_LIFETIMES;
    this.arrivals = features.filter((f) => f.jobArrived !== undefined);
    this.containerEnds = features.filter((f) => f.containerEnded !== undefined);
    this.taskCompletions = features.filter((f) => f.taskCompleted !== undefined);
    this.jobEnds = features.filter((f) => f.jobDone !== undefined);
  }

  /** `inner` wrapped by every feature that wraps the placement policy, the first innermost. */
  schedulerPolicy(inner: SchedulerPolicy): SchedulerPolicy {
    let policy = inner;
    for (const f of this.features) if (f.schedulerPolicy) policy = f.schedulerPolicy(policy);
    return policy;
  }

  setUp(): void {
    for (const f of this.features) f.setUp?.();
  }

  runStarted(): void {
    for (const f of this.features) f.runStarted?.();
  }

  /** Whether a feature took the arriving job (the core submits it otherwise). */
  jobArrived(job: SimJob): boolean {
    const fs = this.arrivals;
    for (let i = 0; i < fs.length; i++) if (fs[i]!.jobArrived!(job)) return true;
    return false;
  }

  containerEnded(a: Attempt, heldCoreMs: number): void {
    const fs = this.containerEnds;
    for (let i = 0; i < fs.length; i++) fs[i]!.containerEnded!(a, heldCoreMs);
  }

  taskCompleted(a: Attempt): void {
    const fs = this.taskCompletions;
    for (let i = 0; i < fs.length; i++) fs[i]!.taskCompleted!(a);
  }

  jobDone(run: JobRun, durationMs: number, jobManager: Attempt | undefined): void {
    const fs = this.jobEnds;
    for (let i = 0; i < fs.length; i++) fs[i]!.jobDone!(run, durationMs, jobManager);
  }

  checkBooks(fail: (why: string) => never): void {
    for (const f of this.features) f.checkBooks?.(fail);
  }

  /** `figures` (the values of a run without the features) with what each feature sets, in list order. */
  figures(figures: FeatureFigures): FeatureFigures {
    for (const f of this.features) if (f.figures) Object.assign(figures, f.figures());
    return figures;
  }
}
