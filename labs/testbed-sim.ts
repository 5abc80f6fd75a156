/**
 * The simulator's side of `harvest sim validate`: `runCompute` on the testbed's servers (capacity, reserve), traces
 * (each server's history, then its replay exactly as its node manager ran it), jobs and schedule, under one policy,
 * with the daemons' settings and the testbed's measured costs.
 *
 * Time: the simulator runs on trace time, testbed time x the speed-up. Its classifier reads a series' step as real
 * seconds (a day is 86,400 s of series), exactly like the resource manager's, which classified the same history at
 * its real 5-minute steps; on testbed time a trace day would last minutes and nothing would look daily. A discrete-event
 * simulation scaled in every duration it is given (task times, heartbeats, ticks, launches, waits) behaves the same, so
 * every testbed duration is multiplied by the speed-up going in and every result divided by it coming out.
 */
import { HarvestError } from "../common/errors.js";
import { runCompute } from "../sim/compute.js";
import type { ComputeOptions, KillCostModel } from "../sim/compute.js";
import { jobShape, jobStream } from "../sim/jobs.js";
import type { JobStream, SimJobShape } from "../sim/jobs.js";
import type { SimCluster, SimServer, SimTenant } from "../sim/model.js";
import type { TestbedPolicy, TestbedRun, TestbedDaemonSettings } from "./testbed.js";
import { byServer, stat } from "./testbed.js";
import type { TestbedPlan } from "./testbed-plan.js";

/** The simulator's run of one policy, in testbed units. */
export interface SimRun {
  policy: TestbedPolicy;
  jobsSubmitted: number;
  jobsFinished: number;
  /** Mean submission-to-end time of the finished jobs, testbed seconds. */
  avgJobTimeS: number;
  taskKills: number;
  jobManagerKills: number;
  /** Per planned job (plan order): submission to end, testbed ms; NaN when it did not finish. */
  durationsMs: number[];
  /** The classes of its first classification, "id: servers" (history only). */
  classes: string[];
  /** The options it ran with, in testbed units (what the report shows). */
  settings: SimSettings;
  wallMs: number;
}

/** What the simulator was told, in testbed ms (it ran them x the speed-up). */
export interface SimSettings {
  slotMs: number;
  reserveFraction: number;
  taskCores: number;
  classWaitMs: number;
  retryIntervalMs: number;
  killCost: KillCostModel;
}

/** Simulated slots last about this long in testbed time: the node managers sample their primary every yield tick. */
const SLOT_TESTBED_MS = 250;
/** The simulation runs this many times the testbed's deadline, so that its jobs all finish unless something is wrong. */
const HORIZON_FACTOR = 3;

// ================================================================================================ THE SIMULATOR'S OPTIONS
/**
 * Everything `runCompute` is told, in one place, in testbed ms (the caller scales them). The kill-cost model is the
 * testbed's: its daemons' yield tick, heartbeat and job-manager container as they ran, the job managers' allocate
 * period, and container launch as measured (node manager start to the task's program running, pooled over both
 * runs). Tasks only sleep and the primaries are replayed, not real, so nothing slows a task before its kill:
 * `throttleSlowdown` is false.
 */
export function simSettings(
  plan: TestbedPlan,
  daemons: TestbedDaemonSettings,
  runs: readonly TestbedRun[],
): SimSettings {
  const launch = stat(runs.flatMap((r) => r.measured.launchSamplesMs));
  const measuredHeartbeat = Math.max(...runs.map((r) => r.measured.heartbeatIntervalMs));
  const measuredYieldTick = Math.max(...runs.map((r) => r.measured.yieldTickMs));
  return {
    slotMs: slotMs(plan) / plan.options.speedup,
    reserveFraction: plan.options.reserveFraction,
    taskCores: plan.options.taskVcores,
    classWaitMs: daemons.classWaitMs,
    retryIntervalMs: daemons.monitorIntervalMs,
    killCost: {
      yieldTickMs: measuredYieldTick,
      heartbeatIntervalMs: measuredHeartbeat,
      amHeartbeatMs: daemons.amHeartbeatMs,
      // Too few launches measured (a tiny run): the node manager's benchmark figures, the simulator's defaults.
      launchMedianMs: launch.count >= 5 ? launch.medianMs : 160,
      launchP90Ms: launch.count >= 5 ? Math.max(launch.medianMs, launch.p90Ms) : 260,
      jobManagerMilli: daemons.amVcoresMilli,
      throttleSlowdown: false,
    },
  };
}

/** The settings as `runCompute` options on trace time (every duration x the speed-up). */
function computeOptions(settings: SimSettings, plan: TestbedPlan, policy: TestbedPolicy): ComputeOptions {
  const x = plan.options.speedup;
  const k = settings.killCost;
  return {
    policy,
    seed: plan.options.seed,
    reserveFraction: settings.reserveFraction,
    taskCores: settings.taskCores,
    classWaitMs: settings.classWaitMs * x,
    retryIntervalMs: settings.retryIntervalMs * x,
    // The resource manager classified once, on the registered history, and not again during the run.
    reclassifyIntervalMs: 0,
    // The resource manager's defaults: Algorithm 1's weights, job-type terciles, history window, classifier.
    jobHistoryWindow: 1000,
    killCost: {
      yieldTickMs: k.yieldTickMs * x,
      heartbeatIntervalMs: k.heartbeatIntervalMs * x,
      amHeartbeatMs: k.amHeartbeatMs * x,
      launchMedianMs: k.launchMedianMs * x,
      launchP90Ms: k.launchP90Ms * x,
      jobManagerMilli: k.jobManagerMilli,
      throttleSlowdown: k.throttleSlowdown,
    },
  };
}
// ================================================================================================

/** Simulates the testbed run `run` (its traces as its node managers replayed them) under its policy. */
export function simulateRun(plan: TestbedPlan, run: TestbedRun, settings: SimSettings): SimRun {
  const cluster = simCluster(plan, run);
  const jobs = simJobs(plan, cluster.historyMs);
  const x = plan.options.speedup;
  const durationsMs = plan.jobs.map(() => NaN);
  let classes: string[] = [];
  const options: ComputeOptions = {
    ...computeOptions(settings, plan, run.policy),
    observer: {
      onJobFinished: (e) => {
        durationsMs[e.job.id] = e.durationMs / x;
      },
      onClassified: (e) => {
        if (classes.length === 0) classes = e.classes.map((c) => `${c.id}: ${[...c.servers].sort(byServer).join(" ")}`);
      },
    },
  };
  const r = runCompute(cluster, jobs, options);
  return {
    policy: run.policy,
    jobsSubmitted: r.jobsSubmitted,
    jobsFinished: r.jobs,
    avgJobTimeS: r.avgJobTimeS / x,
    taskKills: r.taskKills,
    jobManagerKills: r.jobManagerKills,
    durationsMs,
    classes,
    settings,
    wallMs: r.wallMs,
  };
}

/** The slot of the simulated series, trace ms: the trace step split so that a slot lasts about SLOT_TESTBED_MS. */
function slotMs(plan: TestbedPlan): number {
  const stepMs = plan.stepSec * 1000;
  let k = Math.max(1, Math.ceil(stepMs / plan.options.speedup / SLOT_TESTBED_MS));
  // A whole number of ms per slot keeps slot boundaries on the step boundaries.
  while (stepMs % k !== 0) k++;
  return stepMs / k;
}

/**
 * The testbed's servers on trace time: server i's series is its history, then its replay from where its node manager
 * stood when the run's job schedule started (it began replaying `epochMs - replayStartMs[i]` of testbed time earlier,
 * while the cluster came up and the tenants were registered). The experiment starts at `historyMs`.
 */
export function simCluster(plan: TestbedPlan, run: TestbedRun): SimCluster {
  const x = plan.options.speedup;
  const stepMs = plan.stepSec * 1000;
  const slot = slotMs(plan);
  const historySteps = plan.servers[0]?.history.length ?? 0;
  const historyMs = historySteps * stepMs;
  const horizonMs = historyMs + Math.ceil((HORIZON_FACTOR * plan.deadlineMs * x) / slot) * slot;
  const slots = Math.ceil(horizonMs / slot);
  if (run.replayStartMs.length !== plan.servers.length)
    throw new HarvestError("INTERNAL", `the ${run.policy} run knows ${run.replayStartMs.length} replay starts`);
  const servers: SimServer[] = [];
  const tenants: SimTenant[] = plan.servers.map((s, i) => {
    if (s.history.length !== historySteps)
      throw new HarvestError("INTERNAL", `${s.nodeId} has ${s.history.length} history steps, not ${historySteps}`);
    servers.push({
      index: i,
      id: s.nodeId,
      rack: `/rack-${(i % 2) + 1}`,
      tenant: i,
      cores: plan.options.vcores,
      diskBytes: 1e12,
      offsetPct: 0,
    });
    const leadMs = (run.epochMs - run.replayStartMs[i]!) * x;
    const all = new Float32Array(historySteps + s.replay.length);
    all.set(s.history);
    all.set(s.replay, historySteps);
    const utilization = new Float32Array(slots);
    for (let j = 0; j < slots; j++) {
      const k = historySteps + Math.floor((j * slot - historyMs + leadMs) / stepMs);
      utilization[j] = all[((k % all.length) + all.length) % all.length]!;
    }
    return {
      index: i,
      id: s.tenant,
      environment: "testbed",
      machineFunction: s.pattern,
      pattern: s.pattern,
      servers: [i],
      utilization,
      reimagesPerServerMonth: 0,
    };
  });
  return {
    servers,
    tenants,
    racks: Math.min(2, servers.length),
    slotMs: slot,
    historyMs,
    horizonMs,
    reimages: [],
    level: "medium",
    source: plan.source === "real" ? "real" : "generated",
    seed: plan.options.seed,
  };
}

/** The plan's jobs on trace time, one shape per recurring job; job i of the stream is the plan's job i. */
export function simJobs(plan: TestbedPlan, historyMs: number): JobStream {
  const x = plan.options.speedup;
  const shapes = new Map<string, SimJobShape>();
  const runs = plan.jobs.map((j) => {
    let shape = shapes.get(j.name);
    if (!shape) {
      shape = jobShape(
        j.name,
        j.vertices.map((v) => ({ name: v.name, tasks: v.tasks, taskMs: v.holdMs * x, inputs: v.inputs })),
      );
      shapes.set(j.name, shape);
    }
    return { shape, submitMs: historyMs + j.submitOffsetMs * x, durationScale: j.durationScale };
  });
  return jobStream(runs, { taskCores: plan.options.taskVcores, taskJitter: 0 });
}
