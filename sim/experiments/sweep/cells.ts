/**
 * The compute sweep's cells: its runs grouped by load and utilization level, each policy's figures averaged over the
 * seeds, and issue 44's two goals judged on those means ("never lose" to stock, and the share of the gap between stock
 * and the primary-unaware bound that history closes).
 */
import type { ComputeRunResult } from "../../compute.js";
import { SIM_JOB_TYPES } from "../../report.js";
import type { ComputePolicy, SimJobType } from "../../results.js";
import { SWEEP_POLICIES } from "./options.js";
import type { PeakVariant } from "./options.js";

/** One run of the sweep: one seed, cell and policy. */
export interface SweepRun {
  seed: number;
  load: number;
  utilizationPct: number;
  /** The cluster's measured average primary utilization over the experiment, %. */
  measuredPct: number;
  /** Offered core-hours over this cluster's own harvestable core-hours in the arrival window. */
  effectiveLoad: number;
  policy: ComputePolicy;
  peak: PeakVariant;
  result: ComputeRunResult;
}

/** One policy's figures in a cell: for each figure, the mean over the seeds it ran with of each run's figure. */
export interface PolicyMeans {
  policy: ComputePolicy;
  peak: PeakVariant;
  /** The seeds of its runs, ascending. */
  seeds: number[];
  /** Mean of the runs' average job times, s; NaN when a seed finished no job (its average is undefined). */
  avgJobTimeS: number;
  /** Mean of each job type's average job time, s; NaN when a seed finished no job of that type. */
  byTypeS: Record<SimJobType, number>;
  /** Mean of the share of submitted jobs that finished. */
  finishedShare: number;
  jobs: number;
  jobsSubmitted: number;
  /** Mean of the jobs still running at the horizon. */
  jobsUnfinished: number;
  /** True when every seed's run finished every job it was offered. */
  finishedAll: boolean;
  taskKills: number;
  jobManagerKills: number;
  wastedCoreHours: number;
  avgTaskWaitS: number;
  primaryCoreHoursTaken: number;
}

/**
 * The gap closed in a cell: (stock - history) / (stock - stock-unaware) on the mean average job times, judged only
 * where stock finishes every job in every seed and runs at least {@link SWEEP_GOALS}.gapMinStockSlowdown slower than
 * the primary-unaware bound; otherwise why not.
 */
export type GapClosed =
  | { kind: "closed"; share: number; stockOverUnaware: number }
  | { kind: "stock-unfinished" }
  | { kind: "small-gap"; stockOverUnaware: number }
  | { kind: "no-figures" };

/** "Never lose" in a cell: history's mean job time at most 1 % above stock's, and no more unfinished jobs. */
export interface NeverLose {
  met: boolean;
  /** History's mean average job time against stock's, %; NaN when either finished no job in some seed. */
  changePct: number;
  /** Mean unfinished jobs over the seeds. */
  historyUnfinished: number;
  stockUnfinished: number;
}

/** One cell of the sweep (a load and a utilization level) over every seed. */
export interface SweepCell {
  load: number;
  utilizationPct: number;
  seeds: number[];
  /** Means over the seeds of the clusters' measured utilization (%) and of the cell's effective load. */
  measuredPct: number;
  effectiveLoad: number;
  /** Each policy's means, in {@link SWEEP_POLICIES} order, then history with the median-daily-max peak if it ran. */
  policies: PolicyMeans[];
  gapClosed: GapClosed;
  /** Undefined when stock or history did not run in the cell. */
  neverLose?: NeverLose;
}

/** Issue 44's thresholds, as shares. */
export const SWEEP_GOALS = Object.freeze({
  /** Never lose: history at most this much slower than stock. */
  neverLoseMaxChange: 0.01,
  /** The gap is judged only where stock is at least this much slower than stock-unaware. */
  gapMinStockSlowdown: 0.03,
  /** Win where there is something to win: close at least this share of the gap. */
  gapToClose: 0.5,
});

function mean(values: readonly number[]): number {
  return values.length > 0 ? values.reduce((a, v) => a + v, 0) / values.length : NaN;
}

function policyMeans(runs: readonly SweepRun[]): PolicyMeans {
  const first = runs[0]!;
  const of = (f: (r: ComputeRunResult) => number) => mean(runs.map((r) => f(r.result)));
  const byTypeS = {} as Record<SimJobType, number>;
  for (const t of SIM_JOB_TYPES) byTypeS[t] = of((r) => (r.byType[t].jobs > 0 ? r.byType[t].avgJobTimeS : NaN));
  return {
    policy: first.policy,
    peak: first.peak,
    seeds: runs.map((r) => r.seed),
    avgJobTimeS: of((r) => (r.jobs > 0 ? r.avgJobTimeS : NaN)),
    byTypeS,
    finishedShare: of((r) => (r.jobsSubmitted > 0 ? r.jobs / r.jobsSubmitted : 1)),
    jobs: of((r) => r.jobs),
    jobsSubmitted: of((r) => r.jobsSubmitted),
    jobsUnfinished: of((r) => r.jobsUnfinished),
    finishedAll: runs.every((r) => r.result.jobsUnfinished === 0),
    taskKills: of((r) => r.taskKills),
    jobManagerKills: of((r) => r.jobManagerKills),
    wastedCoreHours: of((r) => r.wastedCoreHours),
    avgTaskWaitS: of((r) => r.avgTaskWaitS),
    primaryCoreHoursTaken: of((r) => r.primaryCoreHoursTaken),
  };
}

/** `a` against `b`, %; NaN when either is not a positive finite number. */
export function changePct(a: number, b: number): number {
  return Number.isFinite(a) && Number.isFinite(b) && b > 0 ? ((a - b) / b) * 100 : NaN;
}

/** The figures of `policy` (with `peak`) in `cell`, if it ran there. */
export function meansOf(
  cell: SweepCell | undefined,
  policy: ComputePolicy,
  peak: PeakVariant = "percentile",
): PolicyMeans | undefined {
  return cell?.policies.find((p) => p.policy === policy && p.peak === peak);
}

/** The gap closed in a cell from its three policies' means (see {@link GapClosed}). */
export function gapClosed(
  stock: PolicyMeans | undefined,
  unaware: PolicyMeans | undefined,
  history: PolicyMeans | undefined,
): GapClosed {
  if (!stock || !unaware || !history) return { kind: "no-figures" };
  if (!stock.finishedAll) return { kind: "stock-unfinished" };
  const s = stock.avgJobTimeS;
  const u = unaware.avgJobTimeS;
  const h = history.avgJobTimeS;
  if (!(Number.isFinite(s) && Number.isFinite(u) && Number.isFinite(h) && u > 0)) return { kind: "no-figures" };
  const stockOverUnaware = (s - u) / u;
  if (stockOverUnaware < SWEEP_GOALS.gapMinStockSlowdown) return { kind: "small-gap", stockOverUnaware };
  return { kind: "closed", share: (s - h) / (s - u), stockOverUnaware };
}

/** "Never lose" in a cell from stock's and history's means. */
export function neverLose(stock: PolicyMeans, history: PolicyMeans): NeverLose {
  const change = changePct(history.avgJobTimeS, stock.avgJobTimeS);
  return {
    met:
      Number.isFinite(change) &&
      change <= SWEEP_GOALS.neverLoseMaxChange * 100 &&
      history.jobsUnfinished <= stock.jobsUnfinished,
    changePct: change,
    historyUnfinished: history.jobsUnfinished,
    stockUnfinished: stock.jobsUnfinished,
  };
}

/** The sweep's cells from its runs, by load then utilization; each policy's means over the seeds it ran with. */
export function summarizeComputeSweep(runs: readonly SweepRun[]): SweepCell[] {
  const byCell = new Map<string, SweepRun[]>();
  for (const r of runs) {
    const key = `${r.load}/${r.utilizationPct}`;
    byCell.set(key, [...(byCell.get(key) ?? []), r]);
  }
  const cells: SweepCell[] = [];
  for (const cellRuns of byCell.values()) {
    const first = cellRuns[0]!;
    // The cluster and stream, hence the measured utilization and effective load, are a seed's, whatever the policy.
    const bySeed = new Map(cellRuns.map((r) => [r.seed, r]));
    const seeds = [...bySeed.keys()].sort((a, b) => a - b);
    const variants: { policy: ComputePolicy; peak: PeakVariant }[] = [
      ...SWEEP_POLICIES.map((policy) => ({ policy, peak: "percentile" as const })),
      { policy: "history", peak: "median-daily-max" },
    ];
    const policies: PolicyMeans[] = [];
    for (const v of variants) {
      const mine = cellRuns.filter((r) => r.policy === v.policy && r.peak === v.peak).sort((a, b) => a.seed - b.seed);
      if (mine.length > 0) policies.push(policyMeans(mine));
    }
    const cell: SweepCell = {
      load: first.load,
      utilizationPct: first.utilizationPct,
      seeds,
      measuredPct: mean(seeds.map((s) => bySeed.get(s)!.measuredPct)),
      effectiveLoad: mean(seeds.map((s) => bySeed.get(s)!.effectiveLoad)),
      policies,
      gapClosed: { kind: "no-figures" },
    };
    const stock = meansOf(cell, "stock");
    const history = meansOf(cell, "history");
    cell.gapClosed = gapClosed(stock, meansOf(cell, "stock-unaware"), history);
    if (stock && history) cell.neverLose = neverLose(stock, history);
    cells.push(cell);
  }
  return cells.sort((a, b) => a.load - b.load || a.utilizationPct - b.utilizationPct);
}
