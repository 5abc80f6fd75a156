/**
 * The simulator's report helper, shared by every experiment: markdown tables, CSV, comparison tables, the report page
 * (`assembleReport`) and a writer that puts a report in an output directory; the SVG bar plots are in plots.ts. Every
 * function but `writeReport` is pure, so the same results give the same bytes.
 */
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { UTILIZATION_LEVELS } from "./model.js";
import type { UtilizationLevel } from "./model.js";
import type { ComputePolicy, ComputeResult, RunSetup, SimJobType, StoragePlacement, StorageResult } from "./results.js";

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
export interface Column {
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

/** A left-aligned (text) column. */
export const left = (header: string): Column => ({ header, align: "left" });
/** A right-aligned (number) column. */
export const right = (header: string): Column => ({ header, align: "right" });

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
export function present<T>(order: readonly T[], values: Iterable<T>): T[] {
  const set = new Set(values);
  return order.filter((v) => set.has(v));
}

/** The run setup line of a report: what every run shared (or the ranges when they differ). */
export function setupLine(results: readonly (ComputeResult | StorageResult)[]): string {
  const uniq = <T>(xs: T[]): string => [...new Set(xs)].join(", ");
  const storage = results.filter((r): r is StorageResult => "reReplicationMBps" in r);
  return (
    `${uniq(results.map((r) => formatNumber(r.servers)))} servers, ${uniq(results.map((r) => r.days))} simulated days, ` +
    `seed ${uniq(results.map((r) => r.seed))}, ${uniq(results.map((r) => r.traces))} traces` +
    (storage.length > 0 ? `, re-replication ${uniq(storage.map((r) => r.reReplicationMBps))} MB/s per server` : "")
  );
}

/** The CSV columns of a run's setup, after the columns that tell the runs apart. */
export const RUN_SETUP_CSV_HEADER: readonly string[] = ["servers", "days", "seed", "traces"];

/** A run's values under `RUN_SETUP_CSV_HEADER`. */
export function runSetupCsv(r: Omit<RunSetup, "level">): (number | string)[] {
  return [r.servers, r.days, r.seed, r.traces];
}

/** The columns every runs table ends with: what the run cost. */
export const RUN_COST_COLUMNS: readonly Column[] = [right("events"), right("wall (s)"), right("events/s")];

/** A run's cells under `RUN_COST_COLUMNS`. */
export function runCostCells(r: { events: number; wallMs: number }): string[] {
  return [formatNumber(r.events), formatNumber(r.wallMs / 1000, 1), formatNumber(eventsPerSecond(r))];
}

/** The CSV columns every runs CSV ends with: what the run cost. */
export const RUN_COST_CSV_HEADER: readonly string[] = ["events", "wall_ms", "events_per_s"];

/** A run's values under `RUN_COST_CSV_HEADER`. */
export function runCostCsv(r: { events: number; wallMs: number }): number[] {
  return [r.events, Math.round(r.wallMs), Math.round(eventsPerSecond(r))];
}

/** A run CSV's header: the level, the columns that tell the runs apart, the setup, the run's figures, the cost. */
export function runCsvHeader(key: readonly string[], figures: readonly string[]): readonly string[] {
  return ["level", ...key, ...RUN_SETUP_CSV_HEADER, ...figures, ...RUN_COST_CSV_HEADER];
}

/** Runs as CSV under a {@link runCsvHeader} header, a row each in the order given; `key` and `figures` fill theirs. */
export function runCsv<R extends RunSetup & { events: number; wallMs: number }>(
  header: readonly string[],
  runs: readonly R[],
  key: (r: R) => readonly (string | number)[],
  figures: (r: R) => readonly (string | number)[],
): string {
  return toCsv(
    header,
    runs.map((r) => [r.level, ...key(r), ...runSetupCsv(r), ...figures(r), ...runCostCsv(r)]),
  );
}

/** The utilization levels `results` cover, in report order. */
export function levelsOf(results: readonly { level: UtilizationLevel }[]): UtilizationLevel[] {
  return present(
    UTILIZATION_LEVELS,
    results.map((r) => r.level),
  );
}

/**
 * Comparison table of one figure across policies: a row per `rowKeys` entry, a column per policy present and a column
 * per `changes` entry [policy, baseline] with the change from the baseline to the policy (by default, with two
 * policies, from the first to the second).
 */
export function comparisonTable<P extends string>(
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

/** Looks up the result of (level, key) with `keyOf` telling a result's key. */
export function indexResults<T extends { level: UtilizationLevel }>(results: readonly T[], keyOf: (r: T) => string) {
  const map = new Map<string, T>();
  for (const r of results) map.set(`${r.level}/${keyOf(r)}`, r);
  return (level: UtilizationLevel, key: string): T | undefined => map.get(`${level}/${key}`);
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
