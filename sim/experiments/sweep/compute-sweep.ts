/**
 * The compute sweep (issue 13, "The regime, swept"): the compute experiment (`runCompute`, seeds/004 section 4.1) over
 * offered batch load x average primary utilization, every task placement policy in each cell, under the kill-cost
 * model. Where does history-based placement win, and by how much?
 *
 * One job stream per load, the same at every utilization level: the loads are fractions of the harvestable core-hours
 * of a reference cluster (the same servers and tenants at `referencePct` utilization), so a busier cluster gets the
 * same jobs with less room for them, and each cell reports its effective load (offered over its own harvestable
 * core-hours). Job widths are never rescaled per level. Each level is the same cluster (tenants, servers, patterns)
 * with its tenants' means shifted to the level's average (`generateCluster`'s meanPct).
 *
 * Also, at the middle load, the history policy with the classifier's "median-daily-max" peak statistic beside the
 * default p95, to show what a peak that sees recurring bursts changes.
 */
import * as echarts from "echarts";
import { generateCluster } from "../../cluster-gen.js";
import { DEFAULT_KILL_COST, NO_KILL_COST, runCompute } from "../../compute.js";
import type { ComputeRunResult, KillCostModel } from "../../compute.js";
import { chooseTraces, outputOptions, RunTracker } from "../../experiments.js";
import { generateJobStream, harvestableCoreMs } from "../../jobs.js";
import type { JobStream } from "../../jobs.js";
import { serverUtilization } from "../../model.js";
import type { SimCluster, TraceSource } from "../../model.js";
import { assembleReport, formatNumber, left, markdownTable, right, toCsv, writeReport } from "../../report.js";
import { stableIds } from "../../plots.js";
import type { RenderedReport } from "../../report.js";
import type { ComputePolicy, SimJobType } from "../../results.js";
import { checkDays, checkIntAtLeast, checkShare, checkTraces, invalidArgument } from "../../options.js";
import { jobsCell, jobSource } from "../shared/compute-runs.js";
import type { ExperimentOutput, ExperimentReport, Resolved } from "../../experiments.js";
import { DEFAULT_CLASS_FALLBACK, DEFAULT_SATURATION_SHARE } from "../../../resourcemanager/index.js";
import type { ClassFallback } from "../../../resourcemanager/index.js";

/** The policies every cell runs, the baselines first. */
export const SWEEP_POLICIES: readonly ComputePolicy[] = ["stock", "stock-unaware", "history"];

/** How a history run takes a tenant's peak (`ClassifierOptions.peakStatistic`). */
export type PeakVariant = "percentile" | "median-daily-max";

/** Options of {@link runComputeSweep}; {@link resolveComputeSweepOptions} fills the defaults and validates. */
export interface ComputeSweepOptions extends ExperimentOutput {
  /**
   * Servers of every cluster. The default keeps the default sweep (80 runs) near 7 minutes on a 2-core machine.
   * @default 200
   */
  servers?: number;
  /**
   * Simulated days of each run (after 30 days of history); the last day or so only drains (no arrivals).
   * @default 10
   */
  days?: number;
  /** @default 1 */
  seed?: number;
  /**
   * Offered batch load: fractions of the reference cluster's harvestable core-hours over the arrival window.
   * @default [0.2, 0.4, 0.6, 0.8, 1.0]
   */
  loads?: readonly number[];
  /**
   * Average primary utilization of each level, %.
   * @default [15, 30, 45, 55, 65]
   */
  utilizationPct?: readonly number[];
  /**
   * The utilization of the cluster whose harvestable core-hours the loads are fractions of. The busiest level's by
   * default, so that load 1.0 just fills it and no cell is overloaded (an overloaded cell's queue grows for as long
   * as jobs arrive, and its job times measure the horizon more than the policy).
   * @default the highest of `utilizationPct`
   */
  referencePct?: number;
  /**
   * What a kill costs (see `KillCostModel`); "none" is the instant model.
   * @default "modelled"
   */
  killCost?: "modelled" | "none";
  /**
   * The resource manager's maxAmShare in every run (1: no limit, its default).
   * @default 1
   */
  maxAmShare?: number;
  /** History's fallback when no class has room (`ComputeOptions.classFallback`). @default "stock" */
  classFallback?: ClassFallback;
  /** History places as stock from this share of what the primaries leave (`ComputeOptions.saturationShare`). @default 0.8 */
  saturationShare?: number;
  /**
   * Run history with the "median-daily-max" peak too, at the load nearest the middle of `loads`.
   * @default true
   */
  peakVariant?: boolean;
  /** @default "generated" */
  traces?: TraceSource;
  /** Directory for compute-sweep.md, .csv and the heat-map SVGs; none: render only. */
  out?: string;
}

/** {@link ComputeSweepOptions} with the defaults filled in. */
export type ResolvedComputeSweepOptions = Resolved<ComputeSweepOptions>;

/** One run of the sweep. */
export interface SweepRun {
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

/** What the sweep produced. */
export interface ComputeSweepOutcome extends ExperimentReport {
  runs: SweepRun[];
}

/** Whose options the messages name: INVALID_ARGUMENT "compute sweep option <field> ...". */
const WHAT = "compute sweep";

/** Fills the defaults and validates every field (INVALID_ARGUMENT naming it). */
export function resolveComputeSweepOptions(o: ComputeSweepOptions = {}): ResolvedComputeSweepOptions {
  const r: ResolvedComputeSweepOptions = {
    servers: o.servers ?? 200,
    days: o.days ?? 10,
    seed: o.seed ?? 1,
    loads: [...(o.loads ?? [0.2, 0.4, 0.6, 0.8, 1.0])].sort((a, b) => a - b),
    utilizationPct: [...(o.utilizationPct ?? [15, 30, 45, 55, 65])].sort((a, b) => a - b),
    referencePct: o.referencePct ?? Math.max(...(o.utilizationPct ?? [65])),
    killCost: o.killCost ?? "modelled",
    maxAmShare: o.maxAmShare ?? 1,
    classFallback: o.classFallback ?? DEFAULT_CLASS_FALLBACK,
    saturationShare: o.saturationShare ?? DEFAULT_SATURATION_SHARE,
    peakVariant: o.peakVariant ?? true,
    traces: o.traces ?? "generated",
    ...outputOptions(o),
  };
  checkIntAtLeast(WHAT, "servers", r.servers, 1);
  checkDays(WHAT, r.days, 2);
  checkIntAtLeast(WHAT, "seed", r.seed, 0);
  if (r.loads.length === 0) invalidArgument(WHAT, "loads", "must name at least one load");
  for (const l of r.loads)
    if (!(Number.isFinite(l) && l > 0 && l <= 5)) invalidArgument(WHAT, "loads", `has ${l}; use (0, 5]`);
  if (r.utilizationPct.length === 0) invalidArgument(WHAT, "utilizationPct", "must name at least one level");
  for (const u of [...r.utilizationPct, r.referencePct])
    if (!(Number.isFinite(u) && u > 0 && u < 95)) invalidArgument(WHAT, "utilizationPct", `has ${u}; use (0, 95) %`);
  if (r.killCost !== "modelled" && r.killCost !== "none")
    invalidArgument(WHAT, "killCost", `must be "modelled" or "none" (got ${String(r.killCost)})`);
  checkShare(WHAT, "maxAmShare", r.maxAmShare);
  if (r.classFallback !== "stock" && r.classFallback !== "wait")
    invalidArgument(WHAT, "classFallback", `must be "stock" or "wait" (got ${String(r.classFallback)})`);
  checkShare(WHAT, "saturationShare", r.saturationShare);
  checkTraces(WHAT, r.traces, false);
  return r;
}

/** The server-weighted average primary utilization of `cluster` over its experiment period, %. */
function measuredUtilization(cluster: SimCluster): number {
  const first = Math.floor(cluster.historyMs / cluster.slotMs);
  const last = Math.ceil(cluster.horizonMs / cluster.slotMs);
  let sum = 0;
  let n = 0;
  for (let s = 0; s < cluster.servers.length; s++)
    for (let k = first; k < last; k++) {
      sum += serverUtilization(cluster, s, k * cluster.slotMs);
      n++;
    }
  return n > 0 ? sum / n : 0;
}

/** Runs the sweep: every load x level x policy (and the peak variant), one report. */
export async function runComputeSweep(options: ComputeSweepOptions = {}): Promise<ComputeSweepOutcome> {
  const o = resolveComputeSweepOptions(options);
  const middle = o.loads[Math.floor((o.loads.length - 1) / 2)]!;
  const perCell = SWEEP_POLICIES.length;
  const runsTotal = o.loads.length * o.utilizationPct.length * perCell + (o.peakVariant ? o.utilizationPct.length : 0);
  const tracker = new RunTracker(runsTotal, o.onProgress);
  const traces = await chooseTraces(o.traces, (m) => tracker.note(m));
  const cluster = (meanPct: number): SimCluster =>
    generateCluster({
      servers: o.servers,
      days: o.days,
      seed: o.seed,
      meanPct,
      source: traces.source,
      ...(traces.templates ? { templates: traces.templates } : {}),
    });
  const killCost: KillCostModel = o.killCost === "none" ? NO_KILL_COST : DEFAULT_KILL_COST;
  tracker.note(`generating the job streams on the ${o.referencePct} % reference cluster (${o.servers} servers)`);
  const reference = cluster(o.referencePct);
  const source = jobSource(traces.source);
  const streams = new Map<number, JobStream>(
    o.loads.map((l) => [l, generateJobStream(reference, { seed: o.seed, load: l, source })]),
  );
  const runs: SweepRun[] = [];
  for (const pct of o.utilizationPct) {
    tracker.note(`generating the ${pct} % cluster`);
    const c = cluster(pct);
    const measuredPct = measuredUtilization(c);
    for (const load of o.loads) {
      const stream = streams.get(load)!;
      // The arrival window the stream was sized on; its end is the last submission.
      const lastSubmit = stream.jobs.length > 0 ? stream.jobs[stream.jobs.length - 1]!.submitMs + 1 : c.historyMs + 1;
      const harvestable = harvestableCoreMs(c, c.historyMs, lastSubmit, 0.1) / 3_600_000;
      const effectiveLoad = harvestable > 0 ? stream.offeredCoreHours / harvestable : Infinity;
      const variants: { policy: ComputePolicy; peak: PeakVariant }[] = SWEEP_POLICIES.map((policy) => ({
        policy,
        peak: "percentile",
      }));
      if (o.peakVariant && load === middle) variants.push({ policy: "history", peak: "median-daily-max" });
      for (const v of variants) {
        const label = `load ${load} util ${pct}% ${v.policy}${v.peak === "percentile" ? "" : " (median-daily-max)"}`;
        const result = tracker.track(label, c.historyMs, (onProgress) =>
          runCompute(c, stream, {
            policy: v.policy,
            seed: o.seed,
            killCost,
            maxAmShare: o.maxAmShare,
            classFallback: o.classFallback,
            saturationShare: o.saturationShare,
            classifier: { peakStatistic: v.peak },
            onProgress,
            progressEvery: 100_000,
          }),
        );
        runs.push({ load, utilizationPct: pct, measuredPct, effectiveLoad, policy: v.policy, peak: v.peak, result });
      }
    }
  }
  const report = renderComputeSweepReport(runs, o);
  const files = o.out ? writeReport(o.out, report) : [];
  return { runs, report, files, traces: traces.source };
}

// ------------------------------------------------------------------------------------------------ the report

function find(
  runs: readonly SweepRun[],
  load: number,
  pct: number,
  policy: ComputePolicy,
  peak: PeakVariant = "percentile",
) {
  return runs.find((r) => r.load === load && r.utilizationPct === pct && r.policy === policy && r.peak === peak);
}

/** Relative change of history's average job time against `baseline`, %; undefined when either finished no job. */
function change(history: SweepRun | undefined, baseline: SweepRun | undefined): number | undefined {
  if (!history || !baseline || history.result.jobs === 0 || baseline.result.jobs === 0) return undefined;
  return ((history.result.avgJobTimeS - baseline.result.avgJobTimeS) / baseline.result.avgJobTimeS) * 100;
}

/** Share of submitted jobs that finished within the run. */
function finishedShare(r: SweepRun): number {
  return r.result.jobsSubmitted > 0 ? r.result.jobs / r.result.jobsSubmitted : 1;
}

function signed(v: number | undefined, digits = 1): string {
  if (v === undefined || !Number.isFinite(v)) return "-";
  return `${v > 0 ? "+" : ""}${v.toFixed(digits)}%`;
}

/** A cell of a heat-map table: the change, flagged when a policy left more than 5 % of the jobs unfinished. */
function cellText(h: SweepRun | undefined, b: SweepRun | undefined): string {
  const c = signed(change(h, b));
  if (!h || !b) return c;
  const unfinished = Math.min(finishedShare(h), finishedShare(b)) < 0.95;
  return unfinished ? `${c} (†)` : c;
}

/** A table over the sweep's grid: a row per load, a column per utilization level, `cell` in each. */
function gridTable(o: ResolvedComputeSweepOptions, cell: (load: number, pct: number) => string): string {
  return markdownTable(
    [left("load \\ utilization"), ...o.utilizationPct.map((p) => right(`${p} %`))],
    o.loads.map((load) => [String(load), ...o.utilizationPct.map((pct) => cell(load, pct))]),
  );
}

function heatTable(runs: readonly SweepRun[], o: ResolvedComputeSweepOptions, baseline: ComputePolicy): string {
  return gridTable(o, (load, pct) => cellText(find(runs, load, pct, "history"), find(runs, load, pct, baseline)));
}

function sweepSetup(runs: readonly SweepRun[], o: ResolvedComputeSweepOptions): string {
  const traces = runs[0]?.result.traces ?? o.traces;
  return (
    `${formatNumber(o.servers)} servers, ${o.days} simulated days after 30 days of history, seed ${o.seed}, ${traces} ` +
    `traces; kill cost ${o.killCost === "none" ? "none (the instant model)" : "modelled (DEFAULT_KILL_COST)"}; ` +
    `job managers ${o.maxAmShare >= 1 ? "unlimited" : `at most ${o.maxAmShare} of the harvestable cores`}; loads are ` +
    `fractions of the harvestable core-hours of the ${o.referencePct} % cluster, the same jobs at every level`
  );
}

/** The sweep's report: heat-map tables, per-cell figures, the peak variant, CSV and SVG heat maps. */
export function renderComputeSweepReport(runs: readonly SweepRun[], o: ResolvedComputeSweepOptions): RenderedReport {
  const levels = o.utilizationPct
    .map((pct) => {
      const r = runs.find((x) => x.utilizationPct === pct);
      return r ? `${pct} % (measured ${r.measuredPct.toFixed(1)} %)` : `${pct} %`;
    })
    .join(", ");
  const effective = gridTable(o, (load, pct) => {
    const r = find(runs, load, pct, "stock");
    return r ? r.effectiveLoad.toFixed(2) : "-";
  });
  const peakRows: string[][] = [];
  for (const r of runs.filter((x) => x.peak === "median-daily-max")) {
    const p95 = find(runs, r.load, r.utilizationPct, "history");
    const stock = find(runs, r.load, r.utilizationPct, "stock");
    peakRows.push([
      String(r.load),
      `${r.utilizationPct} %`,
      p95 ? formatNumber(p95.result.avgJobTimeS, 1) : "-",
      formatNumber(r.result.avgJobTimeS, 1),
      signed(change(r, p95)),
      signed(change(p95, stock)),
      signed(change(r, stock)),
      p95 ? formatNumber(p95.result.taskKills) : "-",
      formatNumber(r.result.taskKills),
    ]);
  }
  const summary = [
    `Utilization levels: ${levels}.`,
    "",
    "History-based placement's change in average job time against primary-aware stock YARN (negative: history is faster;",
    "† marks cells where a policy left more than 5 % of the submitted jobs unfinished at the horizon: overloaded):",
    "",
    heatTable(runs, o, "stock"),
    "",
    "Against primary-unaware stock YARN (which never kills and takes the cores from the primary instead; see its",
    "primary core-hours taken in the table of every run):",
    "",
    heatTable(runs, o, "stock-unaware"),
    "",
    "Effective load of each cell (offered core-hours over that cluster's own harvestable core-hours):",
    "",
    effective,
    ...(peakRows.length > 0
      ? [
          "",
          'The peak statistic: history with the default p95 peak vs the "median-daily-max" peak (the median over days of',
          "each day's maximum, which sees a burst that recurs every day):",
          "",
          markdownTable(
            [
              right("load"),
              right("utilization"),
              right("history p95 (s)"),
              right("history median-daily-max (s)"),
              right("mdm vs p95"),
              right("p95 vs stock"),
              right("mdm vs stock"),
              right("kills p95"),
              right("kills mdm"),
            ],
            peakRows,
          ),
        ]
      : []),
  ].join("\n");
  const runRows = runs.map((r) => [
    String(r.load),
    `${r.utilizationPct} %`,
    r.effectiveLoad.toFixed(2),
    r.peak === "percentile" ? r.policy : `${r.policy} (mdm)`,
    jobsCell(r.result),
    formatNumber(r.result.avgJobTimeS, 1),
    ...(["short", "medium", "long"] as SimJobType[]).map((t) => formatNumber(r.result.byType[t].avgJobTimeS, 1)),
    formatNumber(r.result.taskKills),
    formatNumber(r.result.jobManagerKills),
    formatNumber(r.result.wastedCoreHours, 1),
    formatNumber(r.result.avgTaskWaitS, 2),
    formatNumber(r.result.primaryCoreHoursTaken, 1),
    formatNumber(r.result.wallMs / 1000, 1),
  ]);
  const runsTable = markdownTable(
    [
      right("load"),
      right("utilization"),
      right("effective load"),
      left("policy"),
      right("jobs finished"),
      right("avg job time (s)"),
      right("short (s)"),
      right("medium (s)"),
      right("long (s)"),
      right("task kills"),
      right("job-manager kills"),
      right("wasted core-h"),
      right("task wait (s)"),
      right("primary core-h taken"),
      right("wall (s)"),
    ],
    runRows,
  );
  const csv = toCsv(
    [
      "load",
      "utilization_pct",
      "measured_utilization_pct",
      "effective_load",
      "policy",
      "peak",
      "jobs",
      "jobs_submitted",
      "avg_job_time_s",
      "short_s",
      "medium_s",
      "long_s",
      "task_kills",
      "job_manager_kills",
      "wasted_core_hours",
      "avg_task_wait_s",
      "primary_core_hours_taken",
      "events",
      "wall_ms",
    ],
    runs.map((r) => [
      r.load,
      r.utilizationPct,
      r.measuredPct,
      r.effectiveLoad,
      r.policy,
      r.peak,
      r.result.jobs,
      r.result.jobsSubmitted,
      r.result.avgJobTimeS,
      r.result.byType.short.avgJobTimeS,
      r.result.byType.medium.avgJobTimeS,
      r.result.byType.long.avgJobTimeS,
      r.result.taskKills,
      r.result.jobManagerKills,
      r.result.wastedCoreHours,
      r.result.avgTaskWaitS,
      r.result.primaryCoreHoursTaken,
      r.result.events,
      r.result.wallMs,
    ]),
  );
  const plots = (["stock", "stock-unaware"] as const).map((baseline) => ({
    suffix: `heatmap-vs-${baseline}`,
    title: `History vs ${baseline}: change in average job time (%)`,
    svg: heatMapSvg(runs, o, baseline),
  }));
  return assembleReport(
    "compute-sweep",
    "Compute sweep: history-based placement across load and utilization",
    sweepSetup(runs, o),
    o.command !== undefined ? { command: o.command } : {},
    { summary, runsTable, csv, plots },
  );
}

/** A heat map (load x utilization) of history's job-time change against `baseline`, as SVG. */
function heatMapSvg(runs: readonly SweepRun[], o: ResolvedComputeSweepOptions, baseline: ComputePolicy): string {
  const data: [number, number, number | string][] = [];
  let extent = 1;
  o.loads.forEach((load, y) =>
    o.utilizationPct.forEach((pct, x) => {
      const c = change(find(runs, load, pct, "history"), find(runs, load, pct, baseline));
      if (c !== undefined && Number.isFinite(c)) extent = Math.max(extent, Math.abs(c));
      data.push([x, y, c !== undefined && Number.isFinite(c) ? Number(c.toFixed(1)) : "-"]);
    }),
  );
  const bound = Math.ceil(extent / 5) * 5;
  const chart = echarts.init(null, null, { renderer: "svg", ssr: true, width: 720, height: 480 });
  try {
    chart.setOption({
      animation: false,
      backgroundColor: "#ffffff",
      textStyle: { fontFamily: "sans-serif" },
      title: { text: `History vs ${baseline}: change in average job time (%)`, left: "center", top: 8 },
      grid: { left: 90, right: 110, top: 60, bottom: 60 },
      xAxis: {
        type: "category",
        name: "average primary utilization",
        nameLocation: "middle",
        nameGap: 32,
        data: o.utilizationPct.map((p) => `${p} %`),
      },
      yAxis: {
        type: "category",
        name: "offered load",
        nameLocation: "middle",
        nameGap: 56,
        data: o.loads.map(String),
      },
      visualMap: {
        min: -bound,
        max: bound,
        calculable: false,
        orient: "vertical",
        right: 10,
        top: "middle",
        // Green where history is faster, red where it is slower.
        inRange: { color: ["#1a9850", "#f7f7f7", "#d73027"] },
        text: [`+${bound} %`, `-${bound} %`],
      },
      series: [
        {
          type: "heatmap",
          data,
          label: { show: true, formatter: (p: { value: unknown[] }) => `${String(p.value[2])}` },
        },
      ],
    });
    return stableIds(chart.renderToSVGString());
  } finally {
    chart.dispose();
  }
}
