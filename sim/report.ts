/**
 * Reports of the simulator's experiments: markdown tables, CSV and SVG plots (ECharts rendered server-side) built from
 * `ComputeResult`s and `StorageResult`s, and a writer that puts them in an output directory. Everything but
 * `writeReport` is a pure function of the results, so the same results give the same bytes.
 */
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import * as echarts from "echarts";
import { UTILIZATION_LEVELS } from "./model.js";
import type { UtilizationLevel } from "./model.js";
import type { ComputePolicy, ComputeResult, SimJobType, StoragePlacement, StorageResult } from "./results.js";

/**
 * Compute policies in report order: the baselines first (primary-aware stock, then primary-unaware stock), so "change"
 * is relative to them.
 */
export const COMPUTE_POLICIES: readonly ComputePolicy[] = ["stock", "stock-unaware", "history"];
/** Storage placements in report order: the baseline first. */
export const STORAGE_PLACEMENTS: readonly StoragePlacement[] = ["stock", "diversity"];
/** Job types in report order. */
export const SIM_JOB_TYPES: readonly SimJobType[] = ["short", "medium", "long"];

/** A rendered report: what `writeReport` puts on disk as `<name>.md`, `<name>.csv` and `<name>-<suffix>.svg`. */
export interface RenderedReport {
  name: string;
  /** The whole markdown document: heading, setup, command, comparison tables, the per-run table, plot links. */
  markdown: string;
  /** The comparison tables alone (markdown), for printing at the end of a run. */
  summary: string;
  /** The table of every figure of every run (markdown). */
  runsTable: string;
  csv: string;
  plots: readonly RenderedPlot[];
}

/** One SVG plot of a report. */
export interface RenderedPlot {
  /** File name suffix: the plot is written as `<name>-<suffix>.svg`. */
  suffix: string;
  title: string;
  svg: string;
}

/** What a report says about how it was made. */
export interface ReportContext {
  /**
   * The command that produced the results, shown in the markdown so that a reader can re-run it.
   * @default none
   */
  command?: string;
  /**
   * The report's file name stem.
   * @default "compute" or "storage"
   */
  name?: string;
}

// ------------------------------------------------------------------------------------------------ formatting

/** `v` with exactly `digits` decimals and thousands separators; "-" when not a finite number. */
export function formatNumber(v: number, digits = 0): string {
  if (!Number.isFinite(v)) return "-";
  return v.toLocaleString("en-US", { minimumFractionDigits: digits, maximumFractionDigits: digits });
}

/** A fraction (0..1) as a percentage with three significant digits: "12.3%", "0.0123%", "0%". */
export function formatFraction(v: number): string {
  if (!Number.isFinite(v)) return "-";
  if (v === 0) return "0%";
  const pct = v * 100;
  return `${Number(pct.toPrecision(3)).toString()}%`;
}

/** The relative change from `baseline` to `value` ("-23.4%", "+5.0%"); "-" when undefined (baseline 0 or missing). */
export function formatChange(value: number | undefined, baseline: number | undefined): string {
  if (value === undefined || baseline === undefined || !Number.isFinite(value) || !Number.isFinite(baseline))
    return "-";
  if (baseline === 0) return value === 0 ? "0.0%" : "-";
  const change = ((value - baseline) / baseline) * 100;
  let text = formatNumber(Math.abs(change), 1);
  // 9 lost blocks against 30,000 is not "-100.0%": keep the digits that show it is not all of them.
  if (text === "100.0" && value !== 0) {
    const fine = formatNumber(Math.abs(change), 3);
    text = fine === "100.000" ? "~100" : fine.replace(/0+$/, "");
  }
  return text === "0.0" ? "0.0%" : `${change < 0 ? "-" : "+"}${text}%`;
}

/** Events per second of wall time; NaN when the run took no measurable time. */
export function eventsPerSecond(r: { events: number; wallMs: number }): number {
  return r.wallMs > 0 ? r.events / (r.wallMs / 1000) : Number.NaN;
}

/** A column of a markdown table. */
interface Column {
  header: string;
  align: "left" | "right";
}

/**
 * A markdown table padded the way Prettier formats it (so a generated file passes `prettier --check`): every cell
 * padded to its column's width, numbers right-aligned.
 */
export function markdownTable(columns: readonly Column[], rows: readonly (readonly string[])[]): string {
  const widths = columns.map((c, i) => Math.max(3, c.header.length, ...rows.map((r) => (r[i] ?? "").length)));
  const line = (cells: readonly string[]): string =>
    "| " +
    columns
      .map((c, i) => {
        const cell = (cells[i] ?? "").replace(/\|/g, "\\|");
        return c.align === "right" ? cell.padStart(widths[i]!) : cell.padEnd(widths[i]!);
      })
      .join(" | ") +
    " |";
  const delimiter =
    "| " +
    columns
      .map((c, i) => (c.align === "right" ? "-".repeat(widths[i]! - 1) + ":" : "-".repeat(widths[i]!)))
      .join(" | ") +
    " |";
  return [line(columns.map((c) => c.header)), delimiter, ...rows.map(line)].join("\n");
}

const left = (header: string): Column => ({ header, align: "left" });
const right = (header: string): Column => ({ header, align: "right" });

/** A CSV value: numbers rounded to `digits` decimals (trailing zeros dropped), text quoted when RFC 4180 needs it. */
function csvCell(v: string | number, digits = 3): string {
  if (typeof v === "number") {
    if (!Number.isFinite(v)) return "";
    return Number.isInteger(v) ? String(v) : String(Number(v.toFixed(digits)));
  }
  return /[",\r\n]/.test(v) ? `"${v.replace(/"/g, '""')}"` : v;
}

/** CSV text (RFC 4180, "\n" line ends, a trailing newline) from a header and rows. */
export function toCsv(header: readonly string[], rows: readonly (readonly (string | number)[])[]): string {
  return [header, ...rows].map((r) => r.map((v) => csvCell(v)).join(",")).join("\n") + "\n";
}

/** The members of `order` that occur in `present`, in `order`'s order. */
function present<T>(order: readonly T[], values: Iterable<T>): T[] {
  const set = new Set(values);
  return order.filter((v) => set.has(v));
}

/** The run setup line of a report: what every run shared (or the ranges when they differ). */
function setupLine(results: readonly (ComputeResult | StorageResult)[]): string {
  const uniq = <T>(xs: T[]): string => [...new Set(xs)].join(", ");
  const storage = results.filter((r): r is StorageResult => "reReplicationMBps" in r);
  return (
    `${uniq(results.map((r) => formatNumber(r.servers)))} servers, ${uniq(results.map((r) => r.days))} simulated days, ` +
    `seed ${uniq(results.map((r) => r.seed))}, ${uniq(results.map((r) => r.traces))} traces` +
    (storage.length > 0 ? `, re-replication ${uniq(storage.map((r) => r.reReplicationMBps))} MB/s per server` : "")
  );
}

// ------------------------------------------------------------------------------------------------ compute

/**
 * Comparison table of one figure across policies: a row per `rowKeys` entry, a column per policy present and a column
 * per `changes` entry [policy, baseline] with the change from the baseline to the policy (by default, with two
 * policies, from the first to the second).
 */
function comparisonTable<P extends string>(
  firstColumns: readonly Column[],
  rowKeys: readonly (readonly string[])[],
  policies: readonly P[],
  value: (row: number, policy: P) => number | undefined,
  digits: number,
  unit: string,
  changes: readonly (readonly [P, P])[] = policies.length === 2 ? [[policies[1]!, policies[0]!]] : [],
): string {
  const columns = [...firstColumns, ...policies.map((p) => right(`${p}${unit}`))];
  for (const [p, base] of changes) columns.push(right(`${p} vs ${base}`));
  const rows = rowKeys.map((keys, i) => {
    const values = policies.map((p) => value(i, p));
    const cells = [...keys, ...values.map((v) => (v === undefined ? "-" : formatNumber(v, digits)))];
    for (const [p, base] of changes)
      cells.push(formatChange(values[policies.indexOf(p)], values[policies.indexOf(base)]));
    return cells;
  });
  return markdownTable(columns, rows);
}

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

/** Looks up the result of (level, key) with `keyOf` telling a result's key. */
function indexResults<T extends { level: UtilizationLevel }>(results: readonly T[], keyOf: (r: T) => string) {
  const map = new Map<string, T>();
  for (const r of results) map.set(`${r.level}/${keyOf(r)}`, r);
  return (level: UtilizationLevel, key: string): T | undefined => map.get(`${level}/${key}`);
}

/**
 * The comparison tables of compute results: job time (overall and per type; history against both stock baselines),
 * task kills, wasted core-hours and (with stock-unaware) the primary core-hours the secondary tasks took.
 */
export function computeSummaryMarkdown(results: readonly ComputeResult[]): string {
  const levels = present(
    UTILIZATION_LEVELS,
    results.map((r) => r.level),
  );
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
  const kills = comparisonTable(
    [left("utilization")],
    levelRows,
    policies,
    (i, p) => get(levels[i]!, p)?.taskKills,
    0,
    "",
    computeChanges(policies, ["stock"]),
  );
  const wasted = comparisonTable(
    [left("utilization")],
    levelRows,
    policies,
    (i, p) => get(levels[i]!, p)?.wastedCoreHours,
    1,
    "",
    computeChanges(policies, ["stock"]),
  );
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
    right("events"),
    right("wall (s)"),
    right("events/s"),
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
    formatNumber(r.events),
    formatNumber(r.wallMs / 1000, 1),
    formatNumber(eventsPerSecond(r)),
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
export const COMPUTE_CSV_HEADER: readonly string[] = [
  "level",
  "policy",
  "servers",
  "days",
  "seed",
  "traces",
  "jobs",
  "avg_job_time_s",
  ...SIM_JOB_TYPES.flatMap((t) => [`${t}_jobs`, `${t}_avg_job_time_s`]),
  "tasks_run",
  "task_kills",
  "wasted_core_hours",
  "primary_core_hours_taken",
  "jobs_waited",
  "events",
  "wall_ms",
  "events_per_s",
];

/** Every figure of every compute run as CSV, one row per run. */
export function computeCsv(results: readonly ComputeResult[]): string {
  return toCsv(
    COMPUTE_CSV_HEADER,
    sortCompute(results).map((r) => [
      r.level,
      r.policy,
      r.servers,
      r.days,
      r.seed,
      r.traces,
      r.jobs,
      r.avgJobTimeS,
      ...SIM_JOB_TYPES.flatMap((t) => [r.byType[t].jobs, r.byType[t].avgJobTimeS]),
      r.tasksRun,
      r.taskKills,
      r.wastedCoreHours,
      r.primaryCoreHoursTaken,
      r.jobsWaited,
      r.events,
      Math.round(r.wallMs),
      Math.round(eventsPerSecond(r)),
    ]),
  );
}

/** The compute plots: average job time by level and policy, and the same per job type. */
export function computePlots(results: readonly ComputeResult[]): RenderedPlot[] {
  const levels = present(
    UTILIZATION_LEVELS,
    results.map((r) => r.level),
  );
  const policies = present(
    COMPUTE_POLICIES,
    results.map((r) => r.policy),
  );
  const get = indexResults(results, (r) => r.policy);
  const seriesOf = (value: (r: ComputeResult) => number): PlotSeries[] =>
    policies.map((p) => ({
      name: p,
      values: levels.map((l) => {
        const r = get(l, p);
        return r ? value(r) : undefined;
      }),
    }));
  const jobTimeTitle = "Average job execution time by utilization level and policy";
  const byTypeTitle = "Average job execution time per job type";
  return [
    {
      suffix: "job-time",
      title: jobTimeTitle,
      svg: renderBarPanels({
        title: jobTimeTitle,
        yName: "seconds",
        panels: [{ title: "", categories: levels, series: seriesOf((r) => r.avgJobTimeS) }],
      }),
    },
    {
      suffix: "job-time-by-type",
      title: byTypeTitle,
      svg: renderBarPanels({
        title: byTypeTitle,
        yName: "seconds",
        // One panel per type: short and long jobs differ by orders of magnitude, so each gets its own axis.
        panels: SIM_JOB_TYPES.map((t) => ({
          title: `${t} jobs`,
          categories: levels,
          series: seriesOf((r) => (r.byType[t].jobs > 0 ? r.byType[t].avgJobTimeS : Number.NaN)),
        })),
      }),
    },
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

/**
 * A report's markdown page: title, the setup line, the command that made it, the summary tables, every run, then the
 * plots as images beside it.
 */
export function assembleReport(
  name: string,
  title: string,
  setup: string,
  ctx: ReportContext,
  parts: Pick<RenderedReport, "summary" | "runsTable" | "csv" | "plots">,
): RenderedReport {
  const markdown = [
    `# ${title}`,
    "",
    `${setup}.`,
    ...(ctx.command ? ["", "Made by:", "", "```sh", ctx.command, "```"] : []),
    "",
    parts.summary,
    "",
    "Every run:",
    "",
    parts.runsTable,
    "",
    ...parts.plots.flatMap((p) => [`![${p.title}](${name}-${p.suffix}.svg)`, ""]),
  ].join("\n");
  return { name, markdown, ...parts };
}

// ------------------------------------------------------------------------------------------------ storage

/** Storage results ordered by level, replication, then placement. */
function sortStorage(results: readonly StorageResult[]): StorageResult[] {
  return [...results].sort(
    (a, b) =>
      UTILIZATION_LEVELS.indexOf(a.level) - UTILIZATION_LEVELS.indexOf(b.level) ||
      a.replication - b.replication ||
      STORAGE_PLACEMENTS.indexOf(a.placement) - STORAGE_PLACEMENTS.indexOf(b.placement),
  );
}

function replicationsOf(results: readonly StorageResult[]): number[] {
  return [...new Set(results.map((r) => r.replication))].sort((a, b) => a - b);
}

/** The comparison tables of storage results: blocks lost, unavailable accesses, re-replication traffic. */
export function storageSummaryMarkdown(results: readonly StorageResult[]): string {
  const levels = present(
    UTILIZATION_LEVELS,
    results.map((r) => r.level),
  );
  const placements = present(
    STORAGE_PLACEMENTS,
    results.map((r) => r.placement),
  );
  const get = indexResults(results, (r) => `${r.replication}/${r.placement}`);
  const rowKeys = levels.flatMap((level) => replicationsOf(results).map((replication) => ({ level, replication })));
  const first = [left("utilization"), right("replication")];
  const keys = rowKeys.map((k) => [k.level, String(k.replication)]);
  const table = (value: (r: StorageResult) => number, digits: number) =>
    comparisonTable(
      first,
      keys,
      placements,
      (i, p) => {
        const { level, replication } = rowKeys[i]!;
        const r = get(level, `${replication}/${p}`);
        return r ? value(r) : undefined;
      },
      digits,
      "",
    );
  return [
    "Blocks lost (every replica destroyed before re-replication restored one):",
    "",
    table((r) => r.blocksLost, 0),
    "",
    "Block accesses refused because every replica's primary tenant was busy:",
    "",
    table((r) => r.unavailableAccesses, 0),
    "",
    "Re-replication traffic, GiB:",
    "",
    table((r) => r.reReplicationBytes / 2 ** 30, 1),
  ].join("\n");
}

/** Every figure of every storage run, one row per run. */
export function storageRunsMarkdown(results: readonly StorageResult[]): string {
  const columns = [
    left("utilization"),
    left("placement"),
    right("replication"),
    right("blocks"),
    right("blocks lost"),
    right("lost"),
    right("accesses"),
    right("unavailable"),
    right("unavailable share"),
    right("reimages"),
    right("re-replication (GiB)"),
    right("events"),
    right("wall (s)"),
    right("events/s"),
  ];
  const rows = sortStorage(results).map((r) => [
    r.level,
    r.placement,
    String(r.replication),
    formatNumber(r.blocks),
    formatNumber(r.blocksLost),
    formatFraction(r.blocks > 0 ? r.blocksLost / r.blocks : Number.NaN),
    formatNumber(r.accesses),
    formatNumber(r.unavailableAccesses),
    formatFraction(r.accesses > 0 ? r.unavailableAccesses / r.accesses : Number.NaN),
    formatNumber(r.reimages),
    formatNumber(r.reReplicationBytes / 2 ** 30, 1),
    formatNumber(r.events),
    formatNumber(r.wallMs / 1000, 1),
    formatNumber(eventsPerSecond(r)),
  ]);
  return markdownTable(columns, rows);
}

/** The CSV columns of a storage run. */
export const STORAGE_CSV_HEADER: readonly string[] = [
  "level",
  "placement",
  "replication",
  "servers",
  "days",
  "seed",
  "traces",
  "blocks",
  "blocks_lost",
  "lost_fraction",
  "accesses",
  "unavailable_accesses",
  "unavailable_fraction",
  "reimages",
  "re_replication_bytes",
  "events",
  "wall_ms",
  "events_per_s",
];

/** Every figure of every storage run as CSV, one row per run. */
export function storageCsv(results: readonly StorageResult[]): string {
  const fraction = (a: number, b: number): string => (b > 0 ? Number((a / b).toPrecision(6)).toString() : "");
  return toCsv(
    STORAGE_CSV_HEADER,
    sortStorage(results).map((r) => [
      r.level,
      r.placement,
      r.replication,
      r.servers,
      r.days,
      r.seed,
      r.traces,
      r.blocks,
      r.blocksLost,
      fraction(r.blocksLost, r.blocks),
      r.accesses,
      r.unavailableAccesses,
      fraction(r.unavailableAccesses, r.accesses),
      r.reimages,
      Math.round(r.reReplicationBytes),
      r.events,
      Math.round(r.wallMs),
      Math.round(eventsPerSecond(r)),
    ]),
  );
}

/** The storage plots: blocks lost, and unavailable accesses, by level and placement, a panel per replication. */
export function storagePlots(results: readonly StorageResult[]): RenderedPlot[] {
  const levels = present(
    UTILIZATION_LEVELS,
    results.map((r) => r.level),
  );
  const placements = present(
    STORAGE_PLACEMENTS,
    results.map((r) => r.placement),
  );
  const get = indexResults(results, (r) => `${r.replication}/${r.placement}`);
  const panels = (value: (r: StorageResult) => number): PlotPanel[] =>
    replicationsOf(results).map((replication) => ({
      title: `replication ${replication}`,
      categories: levels,
      series: placements.map((p) => ({
        name: p,
        values: levels.map((l) => {
          const r = get(l, `${replication}/${p}`);
          return r ? value(r) : undefined;
        }),
      })),
    }));
  const lossTitle = "Blocks lost by replication, placement and utilization level";
  const unavailableTitle = "Unavailable block accesses by utilization level and placement";
  return [
    {
      suffix: "data-loss",
      title: lossTitle,
      svg: renderBarPanels({
        title: lossTitle,
        yName: "blocks lost",
        sharedY: true,
        counts: true,
        panels: panels((r) => r.blocksLost),
        log: "auto",
      }),
    },
    {
      suffix: "unavailable",
      title: unavailableTitle,
      svg: renderBarPanels({
        title: unavailableTitle,
        yName: "accesses refused",
        sharedY: true,
        counts: true,
        panels: panels((r) => r.unavailableAccesses),
        log: "auto",
      }),
    },
  ];
}

/** The whole storage report (markdown, CSV, plots) of `results`. */
export function renderStorageReport(results: readonly StorageResult[], ctx: ReportContext = {}): RenderedReport {
  const title = "Storage: diversity replica placement vs stock";
  return assembleReport(ctx.name ?? "storage", title, setupLine(results), ctx, {
    summary: storageSummaryMarkdown(results),
    runsTable: storageRunsMarkdown(results),
    csv: storageCsv(results),
    plots: storagePlots(results),
  });
}

// ------------------------------------------------------------------------------------------------ plots

/** One bar series of a panel: a value per category (undefined or NaN: no bar). */
export interface PlotSeries {
  name: string;
  values: readonly (number | undefined)[];
}

/** One panel of grouped bars. */
export interface PlotPanel {
  /** Shown above the panel ("" for none). */
  title: string;
  categories: readonly string[];
  series: readonly PlotSeries[];
}

/** A figure of one or more panels of grouped bars side by side, sharing a legend. */
export interface BarPlotSpec {
  title: string;
  yName: string;
  panels: readonly PlotPanel[];
  /**
   * Log y axis: true, false, or "auto" (log when the values span more than two decades; zeros allowed).
   * @default false
   */
  log?: boolean | "auto";
  /**
   * One y range for every panel, so that bars compare across panels (replication 3 and 4); off when panels hold
   * figures of different magnitudes (job types).
   * @default false
   */
  sharedY?: boolean;
  /**
   * The figures are counts: no fractional ticks.
   * @default false
   */
  counts?: boolean;
  /** @default 360 px per panel, at least 640 */
  widthPx?: number;
  /** @default 420 */
  heightPx?: number;
}

/** Fixed colours so a policy looks the same in every plot: baselines grey, Harvest's policies blue and green. */
const SERIES_COLOURS: Record<string, string> = {
  stock: "#8c8c8c",
  "stock-unaware": "#c8c8c8",
  history: "#1f6fb4",
  diversity: "#2e9d4a",
};
const FALLBACK_COLOURS = ["#d9822b", "#8e44ad", "#c0392b", "#16a085"];

/**
 * The y scale of a figure. Counts that may be zero (blocks lost) go on a log axis of 1 + n, so a zero is a bar of no
 * height rather than a hole, and the bar labels still show n.
 */
function yScale(values: readonly number[], log: boolean | "auto"): { log: boolean; offset: number } {
  const min = Math.min(...values);
  const max = Math.max(...values);
  const wanted = log === "auto" ? values.length > 0 && min >= 0 && max / Math.max(min, 1) > 100 : log;
  if (!wanted) return { log: false, offset: 0 };
  return { log: true, offset: values.some((v) => v <= 0) ? 1 : 0 };
}

/** The smallest 1, 2, 2.5 or 5 x 10^k at least `v` (> 0): an axis maximum with round ticks. */
function niceCeil(v: number): number {
  const decade = 10 ** Math.floor(Math.log10(v));
  for (const m of [1, 2, 2.5, 5, 10]) if (m * decade >= v) return m * decade;
  return 10 * decade;
}

/** A compact bar label: 1234 -> "1,234", 1234567 -> "1.23M", 12.345 -> "12.3". */
function barLabel(v: number): string {
  if (Math.abs(v) >= 1e6) return `${Number((v / 1e6).toPrecision(3))}M`;
  return formatNumber(v, Number.isInteger(v) || Math.abs(v) >= 100 ? 0 : 1);
}

/** Renders grouped bar panels as an SVG document with ECharts' server-side SVG renderer. */
export function renderBarPanels(spec: BarPlotSpec): string {
  const n = Math.max(1, spec.panels.length);
  const width = spec.widthPx ?? Math.max(640, 360 * n);
  const height = spec.heightPx ?? 420;
  const names = [...new Set(spec.panels.flatMap((p) => p.series.map((s) => s.name)))];
  const colour = (name: string): string =>
    SERIES_COLOURS[name] ?? FALLBACK_COLOURS[names.indexOf(name) % FALLBACK_COLOURS.length]!;
  // Panels share the width: room on the left of each for the y axis labels and its rotated name.
  const panelPx = width / n;
  const top = spec.panels.some((p) => p.title) ? 116 : 84;
  const grids = spec.panels.map((_, i) => ({ left: i * panelPx + 86, width: panelPx - 110, top, bottom: 40 }));
  const values = spec.panels.flatMap((p) =>
    p.series.flatMap((s) => s.values.filter((v): v is number => v !== undefined && Number.isFinite(v))),
  );
  // One scale for the whole figure: panels side by side on different scales would mislead.
  const { log, offset } = yScale(values, spec.log ?? false);
  const yName = !log ? spec.yName : offset > 0 ? `1 + ${spec.yName} (log scale)` : `${spec.yName} (log scale)`;
  const highest = values.length > 0 ? Math.max(...values) + offset : 0;
  const sharedMax =
    spec.sharedY && highest > 0 ? (log ? 10 ** Math.ceil(Math.log10(highest)) : niceCeil(highest)) : undefined;
  const chart = echarts.init(null, null, { renderer: "svg", ssr: true, width, height });
  try {
    chart.setOption({
      animation: false,
      backgroundColor: "#ffffff",
      textStyle: { fontFamily: "sans-serif" },
      title: [
        { text: spec.title, left: "center", top: 8, textStyle: { fontSize: 15 } },
        ...spec.panels.map((p, i) => ({
          text: p.title,
          left: i * panelPx + 86 + (panelPx - 110) / 2,
          textAlign: "center" as const,
          top: 70,
          textStyle: { fontSize: 12, fontWeight: "normal" as const },
        })),
      ],
      legend: { top: 36, itemGap: 24, data: names },
      grid: grids,
      xAxis: spec.panels.map((p, i) => ({ type: "category" as const, gridIndex: i, data: [...p.categories] })),
      yAxis: spec.panels.map((_, i) => ({
        type: log ? ("log" as const) : ("value" as const),
        gridIndex: i,
        ...(log ? { logBase: 10, ...(offset > 0 ? { min: 1 } : {}) } : { min: 0 }),
        ...(sharedMax !== undefined ? { max: sharedMax } : {}),
        ...(spec.counts ? { minInterval: 1 } : {}),
        name: yName,
        nameLocation: "middle" as const,
        nameGap: 62,
        nameTextStyle: { fontSize: 11 },
      })),
      series: spec.panels.flatMap((p, i) =>
        p.series.map((s) => ({
          type: "bar" as const,
          name: s.name,
          xAxisIndex: i,
          yAxisIndex: i,
          itemStyle: { color: colour(s.name) },
          label: {
            show: true,
            position: "top" as const,
            fontSize: 10,
            formatter: (param: { value: unknown }) =>
              typeof param.value === "number" ? barLabel(param.value - offset) : "",
          },
          data: s.values.map((v) => (v !== undefined && Number.isFinite(v) ? v + offset : null)),
        })),
      ),
    });
    return stableIds(chart.renderToSVGString());
  } finally {
    chart.dispose();
  }
}

/**
 * ECharts names the CSS classes and ids of an SVG ("zr7-cls-26") from counters global to the process; renumbering
 * them by first appearance makes a plot's bytes depend on its data alone.
 */
export function stableIds(svg: string): string {
  const ids = new Map<string, string>();
  return svg.replace(/\bzr\d+-([a-z]+)-(\d+)\b/g, (id, kind: string) => {
    let stable = ids.get(id);
    if (stable === undefined) {
      stable = `zr-${kind}-${ids.size}`;
      ids.set(id, stable);
    }
    return stable;
  });
}

// ------------------------------------------------------------------------------------------------ writing

/** Writes `<name>.md`, `<name>.csv` and `<name>-<suffix>.svg` into `outDir` (created if needed); returns the paths. */
export function writeReport(outDir: string, report: RenderedReport): string[] {
  mkdirSync(outDir, { recursive: true });
  const files: [string, string][] = [
    [join(outDir, `${report.name}.md`), report.markdown],
    [join(outDir, `${report.name}.csv`), report.csv],
    ...report.plots.map((p): [string, string] => [join(outDir, `${report.name}-${p.suffix}.svg`), p.svg + "\n"]),
  ];
  for (const [path, text] of files) writeFileSync(path, text);
  return files.map(([path]) => path);
}
