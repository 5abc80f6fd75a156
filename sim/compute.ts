/**
 * The compute experiment (seeds/004, section 4.1 and its evaluation of task scheduling): a stream of recurring DAG jobs
 * runs on servers whose primary tenants follow their utilization series, placed by the very scheduler the resource
 * manager runs (`Scheduler` with the stock policy, or with `HistorySchedulerPolicy` and Algorithm 1's class choice),
 * and yielding to the primary as the node manager does (`chooseVictims`: youngest first). A killed task re-runs, as the
 * job manager re-runs a preempted task. Measured: job execution time (submission to last task end) overall and per
 * job type, task kills and the core-hours they wasted. A third baseline, primary-unaware stock YARN ("stock-unaware"),
 * places with the same stock policy on each server's full capacity (the scheduler is never told the primary's usage)
 * and never kills; what it costs is measured on the primary's side instead, as the core-hours the primary wanted but
 * the secondary tasks held.
 *
 * Like YARN's Scheduler Load Simulator, the policies are not re-implemented here: this module only plays the
 * daemons' parts around them (heartbeats become events). The model and the layout: docs/simulator.md.
 */

import type { ComputeOptions } from "./compute-options.js";
import { resolveComputeOptions } from "./compute-options.js";
import type { ResolvedComputeOptions } from "./compute-options.js";
import type { ComputeRunResult } from "./engine/compute-result.js";
import { ComputeState } from "./engine/compute-state.js";
import { AdmissionFeature } from "./features/admission.js";
import type { SimFeature } from "./features/feature.js";
import { LifetimesFeature } from "./features/lifetimes.js";
import { ServerEventsFeature } from "./features/server-events.js";
import type { JobStream } from "./jobs.js";
import type { SimCluster } from "./model.js";
import { SimJobManagers } from "./roles/job-manager.js";
import { SchedulerDriver } from "./roles/scheduler-driver.js";
import { SimNotices } from "./roles/notices.js";
import { SimServers } from "./roles/server.js";
import { performance } from "node:perf_hooks";
export {
  DEFAULT_KILL_COST,
  NO_KILL_COST,
  resolveComputeOptions,
  type ComputeObserver,
  type ComputeOptions,
  type KillCostModel,
  type LifetimeSource,
  type ResolvedComputeOptions,
} from "./compute-options.js";
export type { ComputeRunResult } from "./engine/compute-result.js";
export { Stream, streamSeed } from "./engine/streams.js";
export {
  drawServerEvents,
  type DrainMode,
  type PlannedReimageOptions,
  type ReclaimOptions,
  type ReimageFigures,
  type ResolvedPlannedReimageOptions,
  type ResolvedReclaimOptions,
  type ServerEvent,
} from "./features/server-events-options.js";
export {
  resolveSimAdmissionOptions,
  type ResolvedSimAdmissionOptions,
  type SimAdmissionOptions,
} from "./features/admission-options.js";

/**
 * The features a run may have, in the order they hear each event (their effects on the run, its random draws and its
 * events, happen in this order): each is in a run when its options ask for it. A new feature is one more row.
 */
const FEATURES: readonly {
  wanted(o: ResolvedComputeOptions): boolean;
  make(state: ComputeState): SimFeature;
}[] = [
  { wanted: (o) => LifetimesFeature.wanted(o), make: (state) => new LifetimesFeature(state) },
  { wanted: (o) => ServerEventsFeature.wanted(o), make: (state) => new ServerEventsFeature(state) },
  { wanted: (o) => AdmissionFeature.wanted(o), make: (state) => new AdmissionFeature(state) },
];

/**
 * Runs one compute experiment: `jobs` under `options.policy` over the cluster's experiment period [historyMs,
 * horizonMs). Deterministic: the same cluster, jobs and options give the same result but for `wallMs` and
 * `eventsPerSec`.
 *
 * The model (what each role and feature plays, and the choices made) is described in docs/simulator.md.
 */
export function runCompute(cluster: SimCluster, jobs: JobStream, options: ComputeOptions): ComputeRunResult {
  const o = resolveComputeOptions(cluster, jobs, options);
  const started = performance.now();
  const sim = new ComputeState(cluster, jobs, o, (state) => ({
    servers: new SimServers(state),
    jobManagers: new SimJobManagers(state),
    driver: new SchedulerDriver(state),
    notices: o.preemptionNotice === "notice" ? new SimNotices(state) : undefined,
    features: FEATURES.filter((f) => f.wanted(o)).map((f) => f.make(state)),
  }));
  sim.run();
  return sim.result(performance.now() - started);
}
