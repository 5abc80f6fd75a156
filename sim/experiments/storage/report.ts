/**
 * The storage experiment's report: comparison tables (blocks lost, accesses refused, re-replication traffic), every
 * run, the CSV and the plots, built on the shared report helper (sim/report.ts).
 */
import { UTILIZATION_LEVELS } from "../../model.js";
import type { StorageResult } from "../../results.js";
import {
  assembleReport,
  comparisonTable,
  formatFraction,
  formatNumber,
  indexResults,
  left,
  markdownTable,
  present,
  right,
  setupLine,
  STORAGE_PLACEMENTS,
  levelsOf,
  RUN_COST_COLUMNS,
  runCostCells,
  runCsv,
  runCsvHeader,
} from "../../report.js";
import type { RenderedPlot, RenderedReport, ReportContext } from "../../report.js";
import { barPlot, seriesOver } from "../../plots.js";
import type { PlotPanel } from "../../plots.js";

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
  const levels = levelsOf(results);
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
    ...RUN_COST_COLUMNS,
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
    ...runCostCells(r),
  ]);
  return markdownTable(columns, rows);
}

/** The CSV columns of a storage run. */
export const STORAGE_CSV_HEADER: readonly string[] = runCsvHeader(
  ["placement", "replication"],
  [
    "blocks",
    "blocks_lost",
    "lost_fraction",
    "accesses",
    "unavailable_accesses",
    "unavailable_fraction",
    "reimages",
    "re_replication_bytes",
  ],
);

/** Every figure of every storage run as CSV, one row per run. */
export function storageCsv(results: readonly StorageResult[]): string {
  const fraction = (a: number, b: number): string => (b > 0 ? Number((a / b).toPrecision(6)).toString() : "");
  return runCsv(
    STORAGE_CSV_HEADER,
    sortStorage(results),
    (r) => [r.placement, r.replication],
    (r) => [
      r.blocks,
      r.blocksLost,
      fraction(r.blocksLost, r.blocks),
      r.accesses,
      r.unavailableAccesses,
      fraction(r.unavailableAccesses, r.accesses),
      r.reimages,
      Math.round(r.reReplicationBytes),
    ],
  );
}

/** The storage plots: blocks lost, and unavailable accesses, by level and placement, a panel per replication. */
export function storagePlots(results: readonly StorageResult[]): RenderedPlot[] {
  const levels = levelsOf(results);
  const placements = present(
    STORAGE_PLACEMENTS,
    results.map((r) => r.placement),
  );
  const get = indexResults(results, (r) => `${r.replication}/${r.placement}`);
  const panels = (value: (r: StorageResult) => number): PlotPanel[] =>
    replicationsOf(results).map((replication) => ({
      title: `replication ${replication}`,
      categories: levels,
      series: seriesOver(placements, levels, (p, l) => get(l, `${replication}/${p}`), value),
    }));
  const lossTitle = "Blocks lost by replication, placement and utilization level";
  const unavailableTitle = "Unavailable block accesses by utilization level and placement";
  return [
    barPlot("data-loss", {
      title: lossTitle,
      yName: "blocks lost",
      sharedY: true,
      counts: true,
      panels: panels((r) => r.blocksLost),
      log: "auto",
    }),
    barPlot("unavailable", {
      title: unavailableTitle,
      yName: "accesses refused",
      sharedY: true,
      counts: true,
      panels: panels((r) => r.unavailableAccesses),
      log: "auto",
    }),
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
