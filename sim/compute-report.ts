/**
 * The compute experiment's report: comparison tables (job time overall and per type, kills, waste), every run, the
 * CSV and the plots, built on the shared report helper (report.ts).
 */
import { UTILIZATION_LEVELS } from "./model.js";
import type { ComputePolicy, ComputeResult } from "./results.js";
import {
  assembleReport,
  COMPUTE_POLICIES,
  comparisonTable,
  formatNumber,
  indexResults,
  left,
  markdownTable,
  present,
  right,
  setupLine,
  SIM_JOB_TYPES,
  levelsOf,
  RUN_COST_COLUMNS,
  runCostCells,
  runCsv,
  runCsvHeader,
} from "./report.js";
import type { RenderedPlot, RenderedReport, ReportContext } from "./report.js";
import { barPlot, seriesOver } from "./plots.js";
import type { PlotSeries } from "./plots.js";

/**
 * The changes a compute table shows: history against each baseline present, primary-aware stock first; without
 * history, the second policy against the first.
 */
function computeChanges(
  policies: readonly ComputePolicy[],
  baselines: readonly ComputePolicy[],
): [ComputePolicy, ComputePolicy][] {
  if (!policies.includes("history")) return policies.length === 2 ? [[policies[1]!, policies[0]!]] : [];
  return baselines.filter((b) => policies.includes(b)).map((b): [ComputePolicy, ComputePolicy] => ["history", b]);
}

/**
 * The comparison tables of compute results: job time (overall and per type; history against both stock baselines),
 * task kills, wasted core-hours and (with stock-unaware) the primary core-hours the secondary tasks took.
 */
export function computeSummaryMarkdown(results: readonly ComputeResult[]): string {
  const levels = levelsOf(results);
  const policies = present(
    COMPUTE_POLICIES,
    results.map((r) => r.policy),
  );
  const get = indexResults(results, (r) => r.policy);
  const types = ["all", ...SIM_JOB_TYPES] as const;
  const timeRows = levels.flatMap((level) => types.map((type) => ({ level, type })));
  const jobTime = comparisonTable(
    [left("utilization"), left("job type")],
    timeRows.map((r) => [r.level, r.type]),
    policies,
    (i, p) => {
      const { level, type } = timeRows[i]!;
      const r = get(level, p);
      if (!r) return undefined;
      return type === "all" ? r.avgJobTimeS : r.byType[type].jobs > 0 ? r.byType[type].avgJobTimeS : Number.NaN;
    },
    1,
    " (s)",
    computeChanges(policies, ["stock", "stock-unaware"]),
  );
  const levelRows = levels.map((l) => [l]);
  // Stock-unaware kills nothing and wastes nothing: a change against it says nothing, so these compare with stock.
  const byLevel = (value: (r: ComputeResult) => number, digits: number): string =>
    comparisonTable(
      [left("utilization")],
      levelRows,
      policies,
      (i, p) => {
        const r = get(levels[i]!, p);
        return r && value(r);
      },
      digits,
      "",
      computeChanges(policies, ["stock"]),
    );
  const kills = byLevel((r) => r.taskKills, 0);
  const wasted = byLevel((r) => r.wastedCoreHours, 1);
  const unaware = policies.includes("stock-unaware");
  const parts = [
    "Average job execution time (submission to end), seconds:",
    "",
    jobTime,
    "",
    "Task attempts killed because a primary tenant needed its cores back:",
    "",
    kills,
    "",
    "Core-hours of work lost in killed attempts:",
    "",
    wasted,
  ];
  if (unaware) {
    const taken = comparisonTable(
      [left("utilization")],
      levelRows,
      policies,
      (i, p) => get(levels[i]!, p)?.primaryCoreHoursTaken,
      1,
      "",
      [],
    );
    parts.splice(
      3,
      0,
      "",
      "stock-unaware never kills a task: its job times are the jobs' times without interference from the primary " +
        "tenants, who pay for them in the primary core-hours below.",
    );
    parts.push(
      "",
      "Primary core-hours taken (CPU the primary tenants wanted but secondary tasks held; only stock-unaware holds on):",
      "",
      taken,
    );
  }
  return parts.join("\n");
}

/** Every figure of every compute run, one row per run (level, then policy). */
export function computeRunsMarkdown(results: readonly ComputeResult[]): string {
  const columns = [
    left("utilization"),
    left("policy"),
    right("jobs"),
    right("avg job time (s)"),
    ...SIM_JOB_TYPES.map((t) => right(`${t} (s)`)),
    right("tasks run"),
    right("task kills"),
    right("wasted core-h"),
    right("primary core-h taken"),
    right("jobs waited"),
    ...RUN_COST_COLUMNS,
  ];
  const rows = sortCompute(results).map((r) => [
    r.level,
    r.policy,
    formatNumber(r.jobs),
    formatNumber(r.avgJobTimeS, 1),
    ...SIM_JOB_TYPES.map((t) => (r.byType[t].jobs > 0 ? formatNumber(r.byType[t].avgJobTimeS, 1) : "-")),
    formatNumber(r.tasksRun),
    formatNumber(r.taskKills),
    formatNumber(r.wastedCoreHours, 1),
    formatNumber(r.primaryCoreHoursTaken, 1),
    formatNumber(r.jobsWaited),
    ...runCostCells(r),
  ]);
  return markdownTable(columns, rows);
}

/** Compute results ordered by level, then policy (the order of every table and the CSV). */
function sortCompute(results: readonly ComputeResult[]): ComputeResult[] {
  return [...results].sort(
    (a, b) =>
      UTILIZATION_LEVELS.indexOf(a.level) - UTILIZATION_LEVELS.indexOf(b.level) ||
      COMPUTE_POLICIES.indexOf(a.policy) - COMPUTE_POLICIES.indexOf(b.policy),
  );
}

/** The CSV columns of a compute run. */
export const COMPUTE_CSV_HEADER: readonly string[] = runCsvHeader(
  ["policy"],
  [
    "jobs",
    "avg_job_time_s",
    ...SIM_JOB_TYPES.flatMap((t) => [`${t}_jobs`, `${t}_avg_job_time_s`]),
    "tasks_run",
    "task_kills",
    "wasted_core_hours",
    "primary_core_hours_taken",
    "jobs_waited",
  ],
);

/** Every figure of every compute run as CSV, one row per run. */
export function computeCsv(results: readonly ComputeResult[]): string {
  return runCsv(
    COMPUTE_CSV_HEADER,
    sortCompute(results),
    (r) => [r.policy],
    (r) => [
      r.jobs,
      r.avgJobTimeS,
      ...SIM_JOB_TYPES.flatMap((t) => [r.byType[t].jobs, r.byType[t].avgJobTimeS]),
      r.tasksRun,
      r.taskKills,
      r.wastedCoreHours,
      r.primaryCoreHoursTaken,
      r.jobsWaited,
    ],
  );
}

/** The compute plots: average job time by level and policy, and the same per job type. */
export function computePlots(results: readonly ComputeResult[]): RenderedPlot[] {
  const levels = levelsOf(results);
  const policies = present(
    COMPUTE_POLICIES,
    results.map((r) => r.policy),
  );
  const get = indexResults(results, (r) => r.policy);
  const seriesOf = (value: (r: ComputeResult) => number): PlotSeries[] =>
    seriesOver(policies, levels, (p, l) => get(l, p), value);
  const jobTimeTitle = "Average job execution time by utilization level and policy";
  const byTypeTitle = "Average job execution time per job type";
  return [
    barPlot("job-time", {
      title: jobTimeTitle,
      yName: "seconds",
      panels: [{ title: "", categories: levels, series: seriesOf((r) => r.avgJobTimeS) }],
    }),
    barPlot("job-time-by-type", {
      title: byTypeTitle,
      yName: "seconds",
      // One panel per type: short and long jobs differ by orders of magnitude, so each gets its own axis.
      panels: SIM_JOB_TYPES.map((t) => ({
        title: `${t} jobs`,
        categories: levels,
        series: seriesOf((r) => (r.byType[t].jobs > 0 ? r.byType[t].avgJobTimeS : Number.NaN)),
      })),
    }),
  ];
}

/** The whole compute report (markdown, CSV, plots) of `results`. */
export function renderComputeReport(results: readonly ComputeResult[], ctx: ReportContext = {}): RenderedReport {
  const title = `Compute: history-based task placement vs stock${
    results.some((r) => r.policy === "stock-unaware") ? " (primary-aware and primary-unaware)" : ""
  }`;
  return assembleReport(ctx.name ?? "compute", title, setupLine(results), ctx, {
    summary: computeSummaryMarkdown(results),
    runsTable: computeRunsMarkdown(results),
    csv: computeCsv(results),
    plots: computePlots(results),
  });
}
