/**
 * The victim experiment (issue 44, "Victims by work lost"; `harvest sim victims`): the node manager's yield step with
 * its stock victim order (youngest first) beside "work-lost" (the set that frees the primary's cores with the least
 * running time x cores lost, nodemanager/policy/work-lost.ts), under stock and history placement, at a few cells of
 * the compute sweep. Both orders run through the daemon's own `chooseVictims` (sim/roles/yield-step.ts), on the same
 * cluster and job stream, under the kill-cost model.
 *
 * The cells are the sweep's: one job stream per load and seed, sized on the `referencePct` cluster (the sweep's
 * busiest level by default), the same jobs at every utilization level. Figures are means over the seeds.
 */
import { DEFAULT_NEAR_END_MS } from "../../../nodemanager/index.js";
import type { VictimOrder } from "../../../nodemanager/index.js";
import { DEFAULT_MAX_AM_SHARE } from "../../../resourcemanager/index.js";
import { DEFAULT_KILL_COST, runCompute } from "../../compute.js";
import type { ComputeRunResult } from "../../compute.js";
import { chooseTraces, outputOptions, RunTracker } from "../../experiments.js";
import type { ExperimentOutput, ExperimentReport, Resolved } from "../../experiments.js";
import { generateJobStream } from "../../jobs.js";
import type { SimCluster, TraceSource } from "../../model.js";
import { checkDays, checkIntAtLeast, checkShare, checkTraces, invalidArgument } from "../../options.js";
import { assembleReport, formatNumber, left, markdownTable, right, toCsv, writeReport } from "../../report.js";
import type { RenderedReport } from "../../report.js";
import type { ComputePolicy } from "../../results.js";
import { clusterAtUtilization, jobSource } from "../shared/compute-runs.js";

/** The placements the experiment runs each victim order under. */
export const VICTIM_POLICIES: readonly ComputePolicy[] = ["stock", "history"];

/** Options of {@link runVictimExperiment}; {@link resolveVictimExperimentOptions} fills the defaults and validates. */
export interface VictimExperimentOptions extends ExperimentOutput {
  /** Servers of every cluster (the sweep's). @default 200 */
  servers?: number;
  /** Simulated days of each run, after 30 days of history (the sweep's). @default 10 */
  days?: number;
  /** The seeds of the clusters, job streams and runs; figures are means over them. @default [1, 2, 3] */
  seeds?: readonly number[];
  /**
   * Offered batch loads: fractions of the reference cluster's harvestable core-hours (as the sweep's).
   * @default [0.6, 0.8]
   */
  loads?: readonly number[];
  /** Average primary utilization of each level, %. @default [45, 55] */
  utilizationPct?: readonly number[];
  /** The utilization of the cluster the loads are fractions of (the sweep's default busiest level). @default 65 */
  referencePct?: number;
  /** Placements to run each order under. @default ["stock", "history"] */
  policies?: readonly ComputePolicy[];
  /** The resource manager's maxAmShare in every run (1: no limit). @default 0.1, the resource manager's */
  maxAmShare?: number;
  /** The work-lost order's near-end window (the node manager's victimNearEndMs). @default DEFAULT_NEAR_END_MS */
  nearEndMs?: number;
  /** @default "generated" */
  traces?: TraceSource;
  /** Directory for victims.md and victims.csv; none: render only. */
  out?: string;
}

/** {@link VictimExperimentOptions} with the defaults filled in. */
export type ResolvedVictimExperimentOptions = Resolved<VictimExperimentOptions>;

/** One run: a victim order under a placement, at a cell, for a seed. */
export interface VictimRun {
  load: number;
  utilizationPct: number;
  seed: number;
  policy: ComputePolicy;
  order: VictimOrder;
  result: ComputeRunResult;
}

/** What the experiment produced. */
export interface VictimExperimentOutcome extends ExperimentReport {
  runs: VictimRun[];
}

const WHAT = "victim experiment";
const ORDERS: readonly VictimOrder[] = ["youngest", "work-lost"];

/** Fills the defaults and validates every field (INVALID_ARGUMENT naming it). */
export function resolveVictimExperimentOptions(o: VictimExperimentOptions = {}): ResolvedVictimExperimentOptions {
  const r: ResolvedVictimExperimentOptions = {
    servers: o.servers ?? 200,
    days: o.days ?? 10,
    seeds: [...new Set(o.seeds ?? [1, 2, 3])],
    loads: [...(o.loads ?? [0.6, 0.8])].sort((a, b) => a - b),
    utilizationPct: [...(o.utilizationPct ?? [45, 55])].sort((a, b) => a - b),
    referencePct: o.referencePct ?? 65,
    policies: VICTIM_POLICIES.filter((p) => (o.policies ?? VICTIM_POLICIES).includes(p)),
    maxAmShare: o.maxAmShare ?? DEFAULT_MAX_AM_SHARE,
    nearEndMs: o.nearEndMs ?? DEFAULT_NEAR_END_MS,
    traces: o.traces ?? "generated",
    ...outputOptions(o),
  };
  checkIntAtLeast(WHAT, "servers", r.servers, 1);
  checkDays(WHAT, r.days, 2);
  if (r.seeds.length === 0) invalidArgument(WHAT, "seeds", "must name at least one seed");
  for (const s of r.seeds) checkIntAtLeast(WHAT, "seeds", s, 0);
  if (r.loads.length === 0) invalidArgument(WHAT, "loads", "must name at least one load");
  for (const l of r.loads)
    if (!(Number.isFinite(l) && l > 0 && l <= 5)) invalidArgument(WHAT, "loads", `has ${l}; use (0, 5]`);
  if (r.utilizationPct.length === 0) invalidArgument(WHAT, "utilizationPct", "must name at least one level");
  for (const u of [...r.utilizationPct, r.referencePct])
    if (!(Number.isFinite(u) && u > 0 && u < 95)) invalidArgument(WHAT, "utilizationPct", `has ${u}; use (0, 95) %`);
  for (const p of o.policies ?? [])
    if (!VICTIM_POLICIES.includes(p)) invalidArgument(WHAT, "policies", `has ${p}; use ${VICTIM_POLICIES.join(", ")}`);
  if (r.policies.length === 0) invalidArgument(WHAT, "policies", "must name at least one policy");
  checkShare(WHAT, "maxAmShare", r.maxAmShare);
  if (!(Number.isFinite(r.nearEndMs) && r.nearEndMs >= 0))
    invalidArgument(WHAT, "nearEndMs", `must be a number of milliseconds >= 0 (got ${r.nearEndMs})`);
  checkTraces(WHAT, r.traces, false);
  return r;
}

/** Runs every seed x load x level x placement x victim order; one report. */
export async function runVictimExperiment(options: VictimExperimentOptions = {}): Promise<VictimExperimentOutcome> {
  const o = resolveVictimExperimentOptions(options);
  const tracker = new RunTracker(
    o.seeds.length * o.loads.length * o.utilizationPct.length * o.policies.length * ORDERS.length,
    o.onProgress,
  );
  const traces = await chooseTraces(o.traces, (m) => tracker.note(m));
  const runs: VictimRun[] = [];
  for (const seed of o.seeds) {
    const cluster = (meanPct: number): SimCluster => clusterAtUtilization(o, seed, meanPct, traces);
    tracker.note(`seed ${seed}: job streams on the ${o.referencePct} % reference cluster (${o.servers} servers)`);
    const reference = cluster(o.referencePct);
    const streams = o.loads.map((load) => ({
      load,
      stream: generateJobStream(reference, { seed, load, source: jobSource(traces.source) }),
    }));
    for (const pct of o.utilizationPct) {
      const c = cluster(pct);
      for (const { load, stream } of streams)
        for (const policy of o.policies)
          for (const order of ORDERS) {
            const label = `seed ${seed} load ${load} util ${pct}% ${policy} ${order}`;
            const result = tracker.track(label, c.historyMs, (onProgress) =>
              runCompute(c, stream, {
                policy,
                seed,
                killCost: DEFAULT_KILL_COST,
                maxAmShare: o.maxAmShare,
                victimOrder: order,
                victimNearEndMs: o.nearEndMs,
                onProgress,
                progressEvery: 100_000,
              }),
            );
            runs.push({ load, utilizationPct: pct, seed, policy, order, result });
          }
    }
  }
  const report = renderVictimReport(runs, o);
  const files = o.out !== undefined ? writeReport(o.out, report) : [];
  return { runs, report, files, traces: traces.source };
}

// ------------------------------------------------------------------------------------------------ the report

/** The seed-mean figures of one cell, placement and order. */
export interface VictimFigures {
  jobs: number;
  jobsSubmitted: number;
  avgJobTimeS: number;
  taskKills: number;
  jobManagerKills: number;
  wastedCoreHours: number;
}

/** The mean over `runs` (one per seed) of the figures the report compares. */
export function meanFigures(runs: readonly VictimRun[]): VictimFigures {
  const mean = (f: (r: ComputeRunResult) => number): number =>
    runs.length > 0 ? runs.reduce((sum, r) => sum + f(r.result), 0) / runs.length : NaN;
  return {
    jobs: mean((r) => r.jobs),
    jobsSubmitted: mean((r) => r.jobsSubmitted),
    avgJobTimeS: mean((r) => r.avgJobTimeS),
    taskKills: mean((r) => r.taskKills),
    jobManagerKills: mean((r) => r.jobManagerKills),
    wastedCoreHours: mean((r) => r.wastedCoreHours),
  };
}

function signed(value: number, baseline: number): string {
  if (!(Number.isFinite(value) && Number.isFinite(baseline) && baseline !== 0)) return "-";
  const pct = ((value - baseline) / baseline) * 100;
  return `${pct > 0 ? "+" : ""}${pct.toFixed(1)}%`;
}

/** The report: per cell and placement, youngest vs work-lost (seed means, with the change), and every run. */
export function renderVictimReport(runs: readonly VictimRun[], o: ResolvedVictimExperimentOptions): RenderedReport {
  const traces = runs[0]?.result.traces ?? o.traces;
  const setup =
    `${formatNumber(o.servers)} servers, ${o.days} simulated days after 30 days of history, seeds ` +
    `${o.seeds.join(", ")} (figures are their means), ${traces} traces; loads are fractions of the harvestable ` +
    `core-hours of the ${o.referencePct} % cluster (the sweep's cells); kill cost modelled (DEFAULT_KILL_COST); job ` +
    `managers ${o.maxAmShare >= 1 ? "unlimited" : `at most ${o.maxAmShare} of the harvestable cores`}; work-lost's ` +
    `near-end window ${formatNumber(o.nearEndMs / 1000, 0)} s`;
  const rows: string[][] = [];
  const csvRows: (string | number)[][] = [];
  for (const load of o.loads)
    for (const pct of o.utilizationPct)
      for (const policy of o.policies) {
        const of = (order: VictimOrder) =>
          meanFigures(
            runs.filter((r) => r.load === load && r.utilizationPct === pct && r.policy === policy && r.order === order),
          );
        const young = of("youngest");
        for (const order of ORDERS) {
          const f = of(order);
          const base = order === "youngest";
          rows.push([
            String(load),
            `${pct} %`,
            policy,
            order,
            `${formatNumber(f.jobs)} / ${formatNumber(f.jobsSubmitted)}`,
            formatNumber(f.avgJobTimeS, 1),
            base ? "" : signed(f.avgJobTimeS, young.avgJobTimeS),
            formatNumber(f.taskKills),
            formatNumber(f.jobManagerKills, 1),
            base ? "" : signed(f.taskKills + f.jobManagerKills, young.taskKills + young.jobManagerKills),
            formatNumber(f.wastedCoreHours, 1),
            base ? "" : signed(f.wastedCoreHours, young.wastedCoreHours),
          ]);
        }
      }
  for (const r of runs)
    csvRows.push([
      r.load,
      r.utilizationPct,
      r.seed,
      r.policy,
      r.order,
      r.result.jobs,
      r.result.jobsSubmitted,
      r.result.avgJobTimeS,
      r.result.taskKills,
      r.result.jobManagerKills,
      r.result.wastedCoreHours,
      r.result.avgTaskWaitS,
      r.result.events,
      r.result.wallMs,
    ]);
  const table = markdownTable(
    [
      right("load"),
      right("utilization"),
      left("placement"),
      left("victims"),
      right("jobs finished"),
      right("avg job time (s)"),
      right("vs youngest"),
      right("task kills"),
      right("job-manager kills"),
      right("kills vs youngest"),
      right("wasted core-h"),
      right("vs youngest"),
    ],
    rows,
  );
  const summary = [
    "The yield step's victim order, youngest first (stock) vs work-lost, under each placement (means over the seeds;",
    "changes are work-lost's against youngest in the same cell and placement):",
    "",
    table,
    "",
    "Task kills count the tasks a killed job manager took with it; wasted core-hours are the core-hours killed",
    "containers held from their grant to their kill.",
  ].join("\n");
  const runsTable = markdownTable(
    [
      right("load"),
      right("utilization"),
      right("seed"),
      left("placement"),
      left("victims"),
      right("jobs finished"),
      right("avg job time (s)"),
      right("task kills"),
      right("job-manager kills"),
      right("wasted core-h"),
      right("wall (s)"),
    ],
    runs.map((r) => [
      String(r.load),
      `${r.utilizationPct} %`,
      String(r.seed),
      r.policy,
      r.order,
      `${formatNumber(r.result.jobs)} / ${formatNumber(r.result.jobsSubmitted)}`,
      formatNumber(r.result.avgJobTimeS, 1),
      formatNumber(r.result.taskKills),
      formatNumber(r.result.jobManagerKills),
      formatNumber(r.result.wastedCoreHours, 1),
      formatNumber(r.result.wallMs / 1000, 1),
    ]),
  );
  const csv = toCsv(
    [
      "load",
      "utilization_pct",
      "seed",
      "policy",
      "victim_order",
      "jobs",
      "jobs_submitted",
      "avg_job_time_s",
      "task_kills",
      "job_manager_kills",
      "wasted_core_hours",
      "avg_task_wait_s",
      "events",
      "wall_ms",
    ],
    csvRows,
  );
  return assembleReport(
    "victims",
    "Victims by work lost: the yield step's victim order",
    setup,
    o.command !== undefined ? { command: o.command } : {},
    { summary, runsTable, csv, plots: [] },
  );
}
