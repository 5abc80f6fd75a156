/**
 * The power experiment's report: markdown tables, CSV and SVG plots (ECharts, through `renderBarPanels`) built from
 * `PowerResult`s, in the shape of the compute and storage reports (`report.ts`), written by the same `writeReport`.
 * Pure: the same results give the same bytes.
 */
import {
  assembleReport,
  formatChange,
  formatNumber,
  markdownTable,
  levelsOf,
  RUN_COST_COLUMNS,
  runCostCells,
  runCsv,
  runCsvHeader,
} from "../../report.js";
import type { RenderedPlot, RenderedReport, ReportContext } from "../../report.js";
import { UTILIZATION_LEVELS } from "../../model.js";
import type { UtilizationLevel } from "../../model.js";
import { CAPPING_MODES, POWER_PLACEMENTS } from "./options.js";
import type { CappingMode, PowerPlacement, PowerResult } from "./options.js";
import { barPlot, seriesOver } from "../../plots.js";
import type { PlotPanel } from "../../plots.js";

interface Column {
  header: string;
  align: "left" | "right";
}
const left = (header: string): Column => ({ header, align: "left" });
const right = (header: string): Column => ({ header, align: "right" });

/** A share (0..1) as a percentage: "0.504%", "0.0012%", "<0.0001%", "0%". */
function shareText(v: number): string {
  if (!Number.isFinite(v)) return "-";
  if (v === 0) return "0%";
  const pct = v * 100;
  if (pct < 0.0001) return "<0.0001%";
  return `${formatNumber(pct, pct >= 10 ? 1 : pct >= 0.1 ? 3 : 4)}%`;
}

/** Power results ordered by level, capping (baseline first), then placement (baseline first). */
export function sortPowerResults(results: readonly PowerResult[]): PowerResult[] {
  return [...results].sort(
    (a, b) =>
      UTILIZATION_LEVELS.indexOf(a.level) - UTILIZATION_LEVELS.indexOf(b.level) ||
      CAPPING_MODES.indexOf(a.capping) - CAPPING_MODES.indexOf(b.capping) ||
      POWER_PLACEMENTS.indexOf(a.placement) - POWER_PLACEMENTS.indexOf(b.placement),
  );
}

/** "per-container" over "power-aware" (a plot's two-line category label). */
function configLabel(r: { capping: CappingMode; placement: PowerPlacement }): string {
  return `${r.capping}\n${r.placement}`;
}

/** The run setup line: what every run shared (or the set of values when they differ). */
function setupLine(results: readonly PowerResult[]): string {
  const uniq = <T>(xs: T[]): string => [...new Set(xs)].join(", ");
  const budgets = uniq(
    results.map((r) => {
      const perServer = formatNumber(r.budgetWatts / r.servers, 1);
      const below = formatNumber(r.oversubscription.enforcedPct, 1);
      const source = r.oversubscription.budgetSource === "plan" ? "planned" : "--budget-fraction";
      return `${perServer} W per server (${below}% below nameplate, ${source})`;
    }),
  );
  const servers = uniq(results.map((r) => formatNumber(r.servers)));
  const domains = uniq(results.map((r) => `${r.domains} ${r.domainLevel}`));
  return (
    `${servers} servers in ${domains} power domains, ${uniq(results.map((r) => r.days))} simulated days, ` +
    `seed ${uniq(results.map((r) => r.seed))}, ${uniq(results.map((r) => r.traces))} traces; budget ${budgets}`
  );
}

/** The planner's oversubscription per level (the same for every run of a level). */
function oversubscriptionTable(results: readonly PowerResult[]): string {
  const rows = levelsOf(results).map((level) => {
    const r = results.find((x) => x.level === level)!;
    const o = r.oversubscription;
    return [
      level,
      `${formatNumber(o.fullServerPct, 1)}%`,
      `${formatNumber(o.perContainerPct, 1)}%`,
      Number.isFinite(o.ratio) ? `${formatNumber(o.ratio, 2)}x` : "-",
      formatNumber(r.budgetWatts / r.servers, 1),
      `${formatNumber(o.enforcedPct, 1)}%`,
    ];
  });
  return markdownTable(
    [
      left("utilization"),
      right("full-server"),
      right("per-container"),
      right("per-container / full-server"),
      right("enforced budget (W/server)"),
      right("enforced below nameplate"),
    ],
    rows,
  );
}

/** A table with a row per run (level, capping, placement) and the given figure columns. */
function runTable(
  results: readonly PowerResult[],
  columns: readonly Column[],
  cells: (r: PowerResult) => readonly string[],
): string {
  return markdownTable(
    [left("utilization"), left("capping"), left("placement"), ...columns],
    sortPowerResults(results).map((r) => [r.level, r.capping, r.placement, ...cells(r)]),
  );
}

/** How per-container capping compares with full-server capping under each placement, for the headline figures. */
function changeTable(results: readonly PowerResult[]): string {
  const find = (level: UtilizationLevel, capping: CappingMode, placement: PowerPlacement) =>
    results.find((r) => r.level === level && r.capping === capping && r.placement === placement);
  const figures: readonly [string, (r: PowerResult) => number][] = [
    ["critical throttled core-h", (r) => r.criticalThrottledCoreHours],
    ["non-critical throttled core-h", (r) => r.noncriticalThrottledCoreHours],
    ["capped server-h", (r) => r.cappedServerHours],
    ["task kills", (r) => r.cappingKills + r.yieldKills],
    ["mean slowdown", (r) => r.meanTaskSlowdown],
  ];
  const rows: string[][] = [];
  for (const level of levelsOf(results))
    for (const placement of POWER_PLACEMENTS) {
      const base = find(level, "full-server", placement);
      const per = find(level, "per-container", placement);
      if (!base || !per) continue;
      rows.push([level, placement, ...figures.map(([, f]) => formatChange(f(per), f(base)))]);
    }
  if (rows.length === 0) return "";
  return markdownTable([left("utilization"), left("placement"), ...figures.map(([h]) => right(h))], rows);
}

/** The comparison tables of power results. */
export function powerSummaryMarkdown(results: readonly PowerResult[]): string {
  const capping = runTable(
    results,
    [
      right("domain alerts"),
      right("server caps"),
      right("capped server-h"),
      right("over budget (domain-h)"),
      right("over budget"),
      right("beyond reach (domain-h)"),
      right("longest reachable (s)"),
    ],
    (r) => [
      formatNumber(r.domainAlerts),
      formatNumber(r.serverCaps),
      formatNumber(r.cappedServerHours, 1),
      formatNumber(r.overBudgetDomainHours, 2),
      shareText(r.overBudgetShare),
      formatNumber(r.beyondReachDomainHours, 2),
      formatNumber(r.maxReachableOverBudgetS, 1),
    ],
  );
  const throttled = runTable(
    results,
    [right("critical"), right("of which user-facing"), right("non-critical")],
    (r) => [
      formatNumber(r.criticalThrottledCoreHours, 1),
      formatNumber(r.userFacingThrottledCoreHours, 1),
      formatNumber(r.noncriticalThrottledCoreHours, 1),
    ],
  );
  const tasks = runTable(
    results,
    [
      right("capping kills"),
      right("yield kills"),
      right("wasted core-h"),
      right("tasks completed"),
      right("mean slowdown"),
      right("mean wait (s)"),
    ],
    (r) => [
      formatNumber(r.cappingKills),
      formatNumber(r.yieldKills),
      formatNumber(r.wastedCoreHours, 1),
      formatNumber(r.tasksCompleted),
      formatNumber(r.meanTaskSlowdown, 3),
      formatNumber(r.meanQueueWaitS, 1),
    ],
  );
  const change = changeTable(results);
  return [
    "Oversubscription the planner finds achievable on the simulated history (seeds/000 III-E; budget below nameplate):",
    "",
    oversubscriptionTable(results),
    "",
    "Capping events and time over budget (domain alerts: times a domain's alert went on, at 97% of its budget, until " +
      "under 90%; server caps: times a server's cap engaged; beyond reach: over budget even with every server over " +
      "its even share as low as the mode can take it, i.e. no secondary work left (per-container) or every core at " +
      "the lowest frequency (full-server)):",
    "",
    capping,
    "",
    "Work lost to throttling, core-hours (critical: the primary tenants'; non-critical: Harvest's tasks):",
    "",
    throttled,
    "",
    "Secondary tasks (kills re-run from the start; slowdown: runtime over full-speed duration):",
    "",
    tasks,
    ...(change ? ["", "Per-container capping against full-server capping, same placement:", "", change] : []),
  ].join("\n");
}

/** Every figure of every power run, one row per run. */
export function powerRunsMarkdown(results: readonly PowerResult[]): string {
  return runTable(
    results,
    [
      right("budget (W)"),
      right("mean draw (W/server)"),
      right("peak domain load"),
      right("alerts"),
      right("caps"),
      right("over budget episodes"),
      right("longest over budget (s)"),
      right("critical core-h"),
      right("non-critical core-h"),
      right("kills"),
      right("secondary core-h"),
      ...RUN_COST_COLUMNS,
    ],
    (r) => [
      formatNumber(r.budgetWatts),
      formatNumber(r.meanServerWatts, 1),
      `${formatNumber(r.peakDomainLoad * 100, 1)}%`,
      formatNumber(r.domainAlerts),
      formatNumber(r.serverCaps),
      formatNumber(r.overBudgetEpisodes),
      formatNumber(r.maxOverBudgetS, 1),
      formatNumber(r.criticalThrottledCoreHours, 1),
      formatNumber(r.noncriticalThrottledCoreHours, 1),
      formatNumber(r.cappingKills + r.yieldKills),
      formatNumber(r.secondaryCoreHours),
      ...runCostCells(r),
    ],
  );
}

/** The CSV columns of a power run. */
export const POWER_CSV_HEADER: readonly string[] = runCsvHeader(
  ["capping", "placement"],
  [
    "domain_level",
    "domains",
    "budget_watts",
    "nameplate_watts",
    "budget_source",
    "enforced_below_nameplate_pct",
    "planned_full_server_pct",
    "planned_per_container_pct",
    "domain_alerts",
    "server_caps",
    "capped_server_hours",
    "over_budget_domain_hours",
    "over_budget_share",
    "over_budget_episodes",
    "max_over_budget_s",
    "max_reachable_over_budget_s",
    "beyond_reach_domain_hours",
    "critical_throttled_core_hours",
    "user_facing_throttled_core_hours",
    "noncritical_throttled_core_hours",
    "capping_kills",
    "yield_kills",
    "wasted_core_hours",
    "tasks_submitted",
    "tasks_completed",
    "secondary_core_hours",
    "mean_task_slowdown",
    "mean_queue_wait_s",
    "mean_server_watts",
    "peak_domain_load",
  ],
);

/** Every figure of every power run as CSV, one row per run. */
export function powerCsv(results: readonly PowerResult[]): string {
  return runCsv(
    POWER_CSV_HEADER,
    sortPowerResults(results),
    (r) => [r.capping, r.placement],
    (r) => [
      r.domainLevel,
      r.domains,
      r.budgetWatts,
      r.nameplateWatts,
      r.oversubscription.budgetSource,
      r.oversubscription.enforcedPct,
      r.oversubscription.fullServerPct,
      r.oversubscription.perContainerPct,
      r.domainAlerts,
      r.serverCaps,
      r.cappedServerHours,
      r.overBudgetDomainHours,
      Number(r.overBudgetShare.toPrecision(6)),
      r.overBudgetEpisodes,
      r.maxOverBudgetS,
      r.maxReachableOverBudgetS,
      r.beyondReachDomainHours,
      r.criticalThrottledCoreHours,
      r.userFacingThrottledCoreHours,
      r.noncriticalThrottledCoreHours,
      r.cappingKills,
      r.yieldKills,
      r.wastedCoreHours,
      r.tasksSubmitted,
      r.tasksCompleted,
      r.secondaryCoreHours,
      r.meanTaskSlowdown,
      r.meanQueueWaitS,
      r.meanServerWatts,
      r.peakDomainLoad,
    ],
  );
}

/** The power plots: throttled work by kind, time over budget, capping events and kills, a panel per level. */
export function powerPlots(results: readonly PowerResult[]): RenderedPlot[] {
  const levels = levelsOf(results);
  const sorted = sortPowerResults(results);
  const configs = [...new Set(sorted.map(configLabel))];
  const get = (level: UtilizationLevel, config: string) =>
    results.find((r) => r.level === level && configLabel(r) === config);
  /** Panels with the runs as categories and one series per figure. */
  const byConfig = (series: readonly [string, (r: PowerResult) => number][]): PlotPanel[] =>
    levels.map((level) => ({
      title: levels.length > 1 ? `${level} utilization` : "",
      categories: configs,
      series: series.map(([name, f]) => ({
        name,
        values: configs.map((c) => {
          const r = get(level, c);
          return r ? f(r) : undefined;
        }),
      })),
    }));
  const cappings = CAPPING_MODES.filter((c) => results.some((r) => r.capping === c));
  const placements = POWER_PLACEMENTS.filter((p) => results.some((r) => r.placement === p));
  /** Panels with the capping modes as categories and one series per placement. */
  const byCapping = (f: (r: PowerResult) => number): PlotPanel[] =>
    levels.map((level) => ({
      title: levels.length > 1 ? `${level} utilization` : "",
      categories: cappings,
      series: seriesOver(
        placements,
        cappings,
        (p, c) => results.find((x) => x.level === level && x.capping === c && x.placement === p),
        f,
      ),
    }));
  const throttledTitle = "Core-hours lost to throttling: critical (primary) and non-critical (secondary) work";
  const overTitle = "Domain-hours over the power budget";
  const capsTitle = "Capping events: servers whose cap engaged";
  const killsTitle = "Secondary task kills: by the capping agent and by primary growth";
  return [
    barPlot("throttled", {
      title: throttledTitle,
      yName: "core-hours",
      sharedY: true,
      panels: byConfig([
        ["critical", (r) => r.criticalThrottledCoreHours],
        ["non-critical", (r) => r.noncriticalThrottledCoreHours],
      ]),
      widthPx: Math.max(900, 520 * levels.length),
    }),
    barPlot("over-budget", {
      title: overTitle,
      yName: "domain-hours",
      sharedY: true,
      panels: byCapping((r) => r.overBudgetDomainHours),
    }),
    barPlot("capping-events", {
      title: capsTitle,
      yName: "server caps",
      sharedY: true,
      counts: true,
      log: "auto",
      panels: byCapping((r) => r.serverCaps),
    }),
    barPlot("kills", {
      title: killsTitle,
      yName: "task attempts killed",
      sharedY: true,
      counts: true,
      panels: byConfig([
        ["capping kills", (r) => r.cappingKills],
        ["yield kills", (r) => r.yieldKills],
      ]),
      widthPx: Math.max(900, 520 * levels.length),
    }),
  ];
}

/** The whole power report (markdown, CSV, plots) of `results`. */
export function renderPowerReport(results: readonly PowerResult[], ctx: ReportContext = {}): RenderedReport {
  const title = "Power: per-container capping vs full-server, power-aware placement vs stock";
  return assembleReport(ctx.name ?? "power", title, setupLine(results), ctx, {
    summary: powerSummaryMarkdown(results),
    runsTable: powerRunsMarkdown(results),
    csv: powerCsv(results),
    plots: powerPlots(results),
  });
}
