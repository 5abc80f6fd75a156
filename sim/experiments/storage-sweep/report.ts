/** The storage sweep's report: its markdown tables, CSVs and plot, and where they are written. */
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import type { TraceSource } from "../../model.js";
import {
  assembleReport,
  formatFraction,
  formatNumber,
  markdownTable,
  STORAGE_PLACEMENTS,
  toCsv,
  writeReport,
  RUN_COST_CSV_HEADER,
  runCostCsv,
} from "../../report.js";
import type { RenderedReport } from "../../report.js";
import { RATIO_CONFIDENCE } from "./options.js";
import type { ResolvedStorageSweepOptions } from "./options.js";
import type { LossRatio } from "./ratio.js";
import type { StorageSweepCell, StorageSweepRun } from "./cells.js";
import { barPlot } from "../../plots.js";
import type { PlotPanel } from "../../plots.js";

/** The sweep's report: the rendered report (cells CSV) and a CSV of every run beside it. */
export interface StorageSweepReport extends RenderedReport {
  /** Every run, one row each (written as `<name>-runs.csv`). */
  runsCsv: string;
}

/** What the sweep's report says about how it was made. */
export interface StorageSweepReportContext {
  options: Omit<ResolvedStorageSweepOptions, "onProgress">;
  traces: TraceSource;
  /** Wall time of the sweep, shown in the report. */
  wallMs: number;
  /** @default none */
  command?: string;
  /** @default "storage-sweep" */
  name?: string;
}

/** A setting as typed: up to three decimals, thousands separators ("0.5", "1,000"). */
function setting(v: number): string {
  return v.toLocaleString("en-US", { maximumFractionDigits: 3 });
}

/** A ratio with three significant digits ("12.3", "1,234", "0.0456"). */
export function formatRatio(v: number): string {
  if (!Number.isFinite(v)) return v > 0 ? "∞" : "-";
  if (v >= 1000) return formatNumber(v, 0);
  return Number(v.toPrecision(3)).toString();
}

/** The ratio as a table cell: "12.3 [4.1, 37]", "> 3.6", "< 0.5" or "no losses". */
export function formatLossRatio(r: LossRatio): string {
  switch (r.kind) {
    case "estimate":
      return `${formatRatio(r.estimate)} [${formatRatio(r.low)}, ${formatRatio(r.high)}]`;
    case "lower-bound":
      return `> ${formatRatio(r.low)}`;
    case "upper-bound":
      return `< ${formatRatio(r.high)}`;
    case "none":
      return "no losses";
  }
}

/** The cells' table of one replication factor. */
function cellsTable(cells: readonly StorageSweepCell[]): string {
  const right = (header: string) => ({ header, align: "right" as const });
  const pct = `${Math.round(RATIO_CONFIDENCE * 100)}%`;
  return markdownTable(
    [
      right("blocks/server"),
      right("MB/s"),
      right("stock lost"),
      right("diversity lost"),
      right("blocks lost (stock / diversity)"),
      right(`stock / diversity (${pct} interval)`),
      right("φ (stock / diversity)"),
      right("stock unavailable"),
      right("diversity unavailable"),
    ],
    cells.map((c) => [
      setting(c.blocksPerServer),
      setting(c.reReplicationMBps),
      formatFraction(c.stock.lostFraction),
      formatFraction(c.diversity.lostFraction),
      `${formatNumber(c.stock.lost)} / ${formatNumber(c.diversity.lost)}`,
      formatLossRatio(c.ratio),
      `${formatNumber(c.ratio.dispersion.stock, 1)} / ${formatNumber(c.ratio.dispersion.diversity, 1)}`,
      formatFraction(c.stock.unavailableFraction),
      formatFraction(c.diversity.unavailableFraction),
    ]),
  );
}

/** The summary: a table per replication factor, then how to read it. */
export function storageSweepSummaryMarkdown(cells: readonly StorageSweepCell[]): string {
  const replications = [...new Set(cells.map((c) => c.replication))].sort((a, b) => a - b);
  const pct = `${Math.round(RATIO_CONFIDENCE * 100)}%`;
  const zeroCells = cells.filter((c) => c.ratio.kind === "lower-bound").length;
  return [
    ...replications.flatMap((r) => [
      `Replication ${r}: share of blocks lost (every replica destroyed before re-replication restored one) and of ` +
        "accesses refused (every replica's primary busy), pooled over the seeds:",
      "",
      cellsTable(cells.filter((c) => c.replication === r)),
      "",
    ]),
    "How to read the ratio:",
    "",
    `- "stock / diversity" is stock's lost fraction over diversity's, each pooled over the seeds (the mean of the ` +
      `per-seed fractions weighted by blocks written), with its ${pct} interval in brackets.`,
    "- The interval: lost blocks are counted as Poisson events with the blocks written as exposure; given the total " +
      "lost, stock's share of it is binomial, and the exact (Clopper-Pearson) interval of that share is turned into " +
      "the interval of the ratio.",
    "- The seeds disagree more than Poisson counts would (losses come in bursts, one correlated reimage destroying " +
      "many blocks at once, and each seed is another cluster), so each placement's count and exposure are first " +
      "divided by its overdispersion φ (the Pearson chi-square of its per-seed counts around its pooled rate over " +
      "k - 1 degrees of freedom, at least 1): S lost blocks weigh as S / φ independent ones. This widens the " +
      "interval and leaves the estimate alone.",
    `- Zeros take no continuity correction. When diversity lost no block in any seed the ratio has no upper end and ` +
      `the cell shows its lower ${pct} bound ("> X": stock loses at least X times diversity's share)` +
      `${zeroCells > 0 ? `; ${zeroCells} of ${cells.length} cells are such` : ""}. Zero counts show no dispersion, so ` +
      "such a bound takes diversity's φ as 1: it assumes diversity's losses, had there been any, would have come one " +
      'at a time; bursts of b blocks would make it b times lower. "no losses": neither placement lost a block.',
    "",
    "Loss fractions depend on the cluster's size and shape (how large a share of it one environment's correlated " +
      "reimage takes), which each seed draws anew: compare cells of this report with each other, not with the " +
      "10,000-server figures of storage.md.",
  ].join("\n");
}

/** Every run, one row each (seed, cell, placement). */
export function storageSweepRunsMarkdown(runs: readonly StorageSweepRun[]): string {
  const right = (header: string) => ({ header, align: "right" as const });
  return markdownTable(
    [
      right("seed"),
      right("replication"),
      right("blocks/server"),
      right("MB/s"),
      { header: "placement", align: "left" },
      right("blocks"),
      right("blocks lost"),
      right("lost"),
      right("accesses"),
      right("unavailable"),
      right("reimages"),
      right("events"),
      right("wall (s)"),
    ],
    sortRuns(runs).map((r) => [
      String(r.seed),
      String(r.replication),
      setting(r.blocksPerServer),
      setting(r.reReplicationMBps),
      r.placement,
      formatNumber(r.blocks),
      formatNumber(r.blocksLost),
      formatFraction(r.blocks > 0 ? r.blocksLost / r.blocks : NaN),
      formatNumber(r.accesses),
      formatNumber(r.unavailableAccesses),
      formatNumber(r.reimages),
      formatNumber(r.events),
      formatNumber(r.wallMs / 1000, 1),
    ]),
  );
}

function sortRuns(runs: readonly StorageSweepRun[]): StorageSweepRun[] {
  return [...runs].sort(
    (a, b) =>
      a.seed - b.seed ||
      a.replication - b.replication ||
      a.blocksPerServer - b.blocksPerServer ||
      a.reReplicationMBps - b.reReplicationMBps ||
      STORAGE_PLACEMENTS.indexOf(a.placement) - STORAGE_PLACEMENTS.indexOf(b.placement),
  );
}

/** A number for CSV with `digits` significant digits ("" when not finite: see the `ratio_kind` column). */
function precise(v: number, digits = 6): string {
  return Number.isFinite(v) ? Number(v.toPrecision(digits)).toString() : "";
}

/** The cells as CSV, one row each. */
export function storageSweepCsv(cells: readonly StorageSweepCell[]): string {
  return toCsv(
    [
      "replication",
      "blocks_per_server",
      "re_replication_mbps",
      "seeds",
      "stock_blocks",
      "stock_lost",
      "stock_lost_fraction",
      "diversity_blocks",
      "diversity_lost",
      "diversity_lost_fraction",
      "ratio_kind",
      "ratio",
      "ratio_low",
      "ratio_high",
      "ratio_confidence",
      "stock_dispersion",
      "diversity_dispersion",
      "stock_unavailable_fraction",
      "diversity_unavailable_fraction",
    ],
    cells.map((c) => [
      c.replication,
      c.blocksPerServer,
      c.reReplicationMBps,
      c.seeds.join(" "),
      c.stock.blocks,
      c.stock.lost,
      precise(c.stock.lostFraction),
      c.diversity.blocks,
      c.diversity.lost,
      precise(c.diversity.lostFraction),
      c.ratio.kind,
      precise(c.ratio.estimate, 4),
      precise(c.ratio.low, 4),
      precise(c.ratio.high, 4),
      c.ratio.confidence,
      precise(c.ratio.dispersion.stock, 4),
      precise(c.ratio.dispersion.diversity, 4),
      precise(c.stock.unavailableFraction),
      precise(c.diversity.unavailableFraction),
    ]),
  );
}

/** Every run as CSV, one row each. */
export function storageSweepRunsCsv(runs: readonly StorageSweepRun[]): string {
  return toCsv(
    [
      "seed",
      "level",
      "servers",
      "days",
      "traces",
      "replication",
      "blocks_per_server",
      "re_replication_mbps",
      "placement",
      "blocks",
      "blocks_lost",
      "accesses",
      "unavailable_accesses",
      "reimages",
      "re_replication_bytes",
      ...RUN_COST_CSV_HEADER,
    ],
    sortRuns(runs).map((r) => [
      r.seed,
      r.level,
      r.servers,
      r.days,
      r.traces,
      r.replication,
      r.blocksPerServer,
      r.reReplicationMBps,
      r.placement,
      r.blocks,
      r.blocksLost,
      r.accesses,
      r.unavailableAccesses,
      r.reimages,
      Math.round(r.reReplicationBytes),
      ...runCostCsv(r),
    ]),
  );
}

/**
 * The plot: blocks lost per million written, by bandwidth and placement, a panel per replication factor and blocks
 * per server (one y scale for all, log when the values span decades).
 */
export function storageSweepPlot(cells: readonly StorageSweepCell[]): { suffix: string; title: string; svg: string } {
  const panels: PlotPanel[] = [];
  const groups = [...new Set(cells.map((c) => `${c.replication}/${c.blocksPerServer}`))];
  const multipleReplications = new Set(cells.map((c) => c.replication)).size > 1;
  for (const group of groups) {
    const row = cells.filter((c) => `${c.replication}/${c.blocksPerServer}` === group);
    const first = row[0]!;
    panels.push({
      title: `${multipleReplications ? `replication ${first.replication}, ` : ""}${setting(first.blocksPerServer)} blocks/server`,
      categories: row.map((c) => `${setting(c.reReplicationMBps)} MB/s`),
      series: STORAGE_PLACEMENTS.map((p) => ({
        name: p,
        values: row.map((c) => (p === "stock" ? c.stock : c.diversity).lostFraction * 1e6),
      })),
    });
  }
  const title = "Blocks lost per million written, by re-replication bandwidth, blocks per server and placement";
  return barPlot("data-loss", { title, yName: "blocks lost per million", sharedY: true, panels, log: "auto" });
}

/** The whole report of a sweep: markdown (tables, method, every run), the cells' CSV, every run's CSV, the plot. */
export function renderStorageSweepReport(
  cells: readonly StorageSweepCell[],
  runs: readonly StorageSweepRun[],
  ctx: StorageSweepReportContext,
): StorageSweepReport {
  const o = ctx.options;
  const list = (xs: readonly number[]): string => xs.map(setting).join(", ");
  const events = runs.reduce((a, r) => a + r.events, 0);
  const setup =
    `${formatNumber(o.servers)} servers, ${o.days} simulated days, ${o.level} utilization, ${ctx.traces} traces; ` +
    `seeds ${o.seeds.join(", ")} (each a cluster of its own); replication ${list(o.replications)}; ` +
    `${list(o.blocksPerServer)} blocks written per server; re-replication ${list(o.reReplicationMBps)} MB/s per ` +
    `server. ${formatNumber(runs.length)} runs, ${formatNumber(events)} simulated events, ` +
    `${formatNumber(ctx.wallMs / 60_000, 1)} minutes of wall time`;
  const title = "Storage sweep: blocks lost by re-replication bandwidth and blocks per server, diversity vs stock";
  const report = assembleReport(ctx.name ?? "storage-sweep", title, setup, ctx, {
    summary: storageSweepSummaryMarkdown(cells),
    runsTable: storageSweepRunsMarkdown(runs),
    csv: storageSweepCsv(cells),
    plots: cells.length > 0 ? [storageSweepPlot(cells)] : [],
  });
  return { ...report, runsCsv: storageSweepRunsCsv(runs) };
}

/** Writes `<name>.md`, `<name>.csv`, `<name>-runs.csv` and the plot into `outDir` (created if needed). */
export function writeStorageSweepReport(outDir: string, report: StorageSweepReport): string[] {
  const files = writeReport(outDir, report);
  const runsFile = join(outDir, `${report.name}-runs.csv`);
  writeFileSync(runsFile, report.runsCsv);
  return [...files, runsFile];
}
