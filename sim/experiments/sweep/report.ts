/**
 * The compute sweep's report: issue 44's goals first (the gap closed and "never lose", per cell), then history's
 * change against both baselines, the effective loads, the peak variant and each policy's figures, every table on the
 * cells' means over the seeds; the table of every run and the CSV list each seed's runs. Heat maps as SVG.
 */
import { assembleReport, formatNumber, left, markdownTable, right, SIM_JOB_TYPES, toCsv } from "../../report.js";
import type { RenderedPlot, RenderedReport } from "../../report.js";
import type { ComputePolicy } from "../../results.js";
import { jobsCell } from "../shared/compute-runs.js";
import { changePct, meansOf, summarizeComputeSweep, SWEEP_GOALS } from "./cells.js";
import type { GapClosed, PolicyMeans, SweepCell, SweepRun } from "./cells.js";
import { heatMapSvg } from "./heat-map.js";
import type { ResolvedComputeSweepOptions } from "./options.js";

/** A change in %, signed, one decimal ("+1.4%"); "-" when not a number. */
function signed(v: number | undefined, digits = 1): string {
  if (v === undefined || !Number.isFinite(v)) return "-";
  return `${v > 0 ? "+" : ""}${v.toFixed(digits)}%`;
}

/** A mean count: whole when it is one, else one decimal. */
function count(v: number): string {
  return formatNumber(v, Number.isInteger(v) ? 0 : 1);
}

/** The gap closed as a whole percentage ("63 %"). */
function gapText(share: number): string {
  return `${Math.round(share * 100)} %`;
}

/** A table over the sweep's grid: a row per load, a column per utilization level, `cell` in each. */
function gridTable(
  o: ResolvedComputeSweepOptions,
  cells: readonly SweepCell[],
  text: (cell: SweepCell | undefined) => string,
): string {
  const at = (load: number, pct: number) => cells.find((c) => c.load === load && c.utilizationPct === pct);
  return markdownTable(
    [left("load \\ utilization"), ...o.utilizationPct.map((p) => right(`${p} %`))],
    o.loads.map((load) => [String(load), ...o.utilizationPct.map((pct) => text(at(load, pct)))]),
  );
}

/** History's mean job time against `baseline`'s in `cell`, %. */
function historyVs(cell: SweepCell | undefined, baseline: ComputePolicy): number | undefined {
  const h = meansOf(cell, "history");
  const b = meansOf(cell, baseline);
  return h && b ? changePct(h.avgJobTimeS, b.avgJobTimeS) : undefined;
}

/** A cell of a change table: the change, flagged when a policy left more than 5 % of the jobs unfinished. */
function changeCell(cell: SweepCell | undefined, baseline: ComputePolicy): string {
  const c = signed(historyVs(cell, baseline));
  const h = meansOf(cell, "history");
  const b = meansOf(cell, baseline);
  if (!h || !b) return c;
  return Math.min(h.finishedShare, b.finishedShare) < 0.95 ? `${c} (†)` : c;
}

function gapCell(cell: SweepCell | undefined): string {
  const g = cell?.gapClosed;
  if (!g) return "-";
  switch (g.kind) {
    case "closed":
      return gapText(g.share);
    case "stock-unfinished":
      return "- (a)";
    case "small-gap":
      return "- (b)";
    case "no-figures":
      return "- (c)";
  }
}

function neverLoseCell(cell: SweepCell | undefined): string {
  const n = cell?.neverLose;
  if (!n) return "-";
  return `${n.met ? "met" : "not met"}: ${signed(n.changePct)}, ${count(n.historyUnfinished)} / ${count(n.stockUnfinished)}`;
}

/** The goals' sentences: in how many of the cells each holds. */
function goalsSentence(cells: readonly SweepCell[]): string {
  const n = cells.length;
  const met = cells.filter((c) => c.neverLose?.met).length;
  const kinds = (kind: GapClosed["kind"]) => cells.filter((c) => c.gapClosed.kind === kind);
  const judged = kinds("closed");
  const won = judged.filter((c) => c.gapClosed.kind === "closed" && c.gapClosed.share >= SWEEP_GOALS.gapToClose);
  const free = kinds("small-gap").length;
  const unfinished = kinds("stock-unfinished").length;
  const missing = kinds("no-figures").length;
  const parts = [
    judged.length > 0
      ? `${won.length} of the ${judged.length} with a gap to close close at least ${SWEEP_GOALS.gapToClose * 100} % of it`
      : "none has a gap to close",
    ...(free > 0
      ? [
          `${free} ${free === 1 ? "has" : "have"} no gap (stock within ${SWEEP_GOALS.gapMinStockSlowdown * 100} % of the bound)`,
        ]
      : []),
    ...(unfinished > 0
      ? [`${unfinished} ${unfinished === 1 ? "is" : "are"} not judged (stock left jobs unfinished)`]
      : []),
    ...(missing > 0
      ? [`${missing} ${missing === 1 ? "is" : "are"} not judged (a policy finished no job in some seed)`]
      : []),
  ];
  return (
    `Never lose holds in ${met} of the ${n} cells. Win where there is something to win holds in ` +
    `${won.length + free} of the ${n} cells: ${parts.join(", ")}.`
  );
}

function setupText(runs: readonly SweepRun[], o: ResolvedComputeSweepOptions): string {
  const traces = runs[0]?.result.traces ?? o.traces;
  return (
    `${formatNumber(o.servers)} servers, ${o.days} simulated days after 30 days of history, seeds ` +
    `${o.seeds.join(", ")} (each a whole sweep: its clusters, job streams and random choices; the tables show each ` +
    `cell's mean over them), ${traces} traces; kill cost ` +
    `${o.killCost === "none" ? "none (the instant model)" : "modelled (DEFAULT_KILL_COST)"}; job managers ` +
    `${o.maxAmShare >= 1 ? "unlimited" : `at most ${o.maxAmShare} of the harvestable cores`}; history falls back to ` +
    `${o.classFallback === "stock" ? "stock placement" : "waiting"} when no class has room and places as stock from ` +
    `${o.saturationShare} of what the primaries leave, types jobs by ` +
    `${o.jobLength === "terciles" ? "terciles of job lengths" : "each class's time between bursts"}, ` +
    `${o.learnFromKills ? "keeps long jobs off servers that just killed work" : "does not learn from kills"}, ` +
    `${o.killedJobsLeaveClasses ? "opens a confined short or medium job to every server after a kill" : "keeps a killed job in its classes"}; ` +
    `loads are fractions of the harvestable core-hours of the ` +
    `${o.referencePct} % cluster, the same jobs at every level`
  );
}

/** The goals' part of the summary: the sentence, the gap-closed table and the never-lose table. */
function goalsPart(cells: readonly SweepCell[], o: ResolvedComputeSweepOptions): string[] {
  const minGap = `${SWEEP_GOALS.gapMinStockSlowdown * 100} %`;
  return [
    `The goals of issue 44, on each cell's mean over seeds ${o.seeds.join(", ")}. ${goalsSentence(cells)}`,
    "",
    "Gap closed: (stock - history) / (stock - stock-unaware) on average job time; 100 % is the primary-unaware bound,",
    "below 0 % history is slower than stock:",
    "",
    gridTable(o, cells, gapCell),
    "",
    `(a) stock left jobs unfinished in some seed; (b) stock is less than ${minGap} slower than stock-unaware, so there is`,
    "no gap to close; (c) a policy finished no job in some seed.",
    "",
    `Never lose: history's average job time at most ${SWEEP_GOALS.neverLoseMaxChange * 100} % above stock's and no more`,
    "unfinished jobs (each cell: met or not, history vs stock, unfinished jobs history / stock, means over the seeds):",
    "",
    gridTable(o, cells, neverLoseCell),
  ];
}

/** The peak variant's table: history with the p95 peak vs the median-daily-max peak, per cell where it ran. */
function peakPart(cells: readonly SweepCell[]): string[] {
  const rows: string[][] = [];
  for (const c of cells) {
    const mdm = meansOf(c, "history", "median-daily-max");
    if (!mdm) continue;
    const p95 = meansOf(c, "history");
    const stock = meansOf(c, "stock");
    rows.push([
      String(c.load),
      `${c.utilizationPct} %`,
      p95 ? formatNumber(p95.avgJobTimeS, 1) : "-",
      formatNumber(mdm.avgJobTimeS, 1),
      signed(p95 ? changePct(mdm.avgJobTimeS, p95.avgJobTimeS) : undefined),
      signed(p95 && stock ? changePct(p95.avgJobTimeS, stock.avgJobTimeS) : undefined),
      signed(stock ? changePct(mdm.avgJobTimeS, stock.avgJobTimeS) : undefined),
      p95 ? count(p95.taskKills) : "-",
      count(mdm.taskKills),
    ]);
  }
  if (rows.length === 0) return [];
  return [
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
      rows,
    ),
  ];
}

function policyLabel(p: PolicyMeans): string {
  return p.peak === "percentile" ? p.policy : `${p.policy} (mdm)`;
}

/** Each cell's means per policy. */
function meansTable(cells: readonly SweepCell[]): string {
  return markdownTable(
    [
      right("load"),
      right("utilization"),
      left("policy"),
      right("avg job time (s)"),
      ...SIM_JOB_TYPES.map((t) => right(`${t} (s)`)),
      right("finished"),
      right("unfinished jobs"),
      right("task kills"),
      right("job-manager kills"),
      right("wasted core-h"),
      right("task wait (s)"),
      right("primary core-h taken"),
    ],
    cells.flatMap((c) =>
      c.policies.map((p) => [
        String(c.load),
        `${c.utilizationPct} %`,
        policyLabel(p),
        formatNumber(p.avgJobTimeS, 1),
        ...SIM_JOB_TYPES.map((t) => formatNumber(p.byTypeS[t], 1)),
        `${(p.finishedShare * 100).toFixed(1)}%`,
        count(p.jobsUnfinished),
        count(p.taskKills),
        count(p.jobManagerKills),
        formatNumber(p.wastedCoreHours, 1),
        formatNumber(p.avgTaskWaitS, 2),
        formatNumber(p.primaryCoreHoursTaken, 1),
      ]),
    ),
  );
}

function runsTable(runs: readonly SweepRun[]): string {
  return markdownTable(
    [
      right("seed"),
      right("load"),
      right("utilization"),
      right("effective load"),
      left("policy"),
      right("jobs finished"),
      right("avg job time (s)"),
      ...SIM_JOB_TYPES.map((t) => right(`${t} (s)`)),
      right("task kills"),
      right("job-manager kills"),
      right("wasted core-h"),
      right("task wait (s)"),
      right("primary core-h taken"),
      right("wall (s)"),
    ],
    runs.map((r) => [
      String(r.seed),
      String(r.load),
      `${r.utilizationPct} %`,
      r.effectiveLoad.toFixed(2),
      r.peak === "percentile" ? r.policy : `${r.policy} (mdm)`,
      jobsCell(r.result),
      formatNumber(r.result.avgJobTimeS, 1),
      ...SIM_JOB_TYPES.map((t) => formatNumber(r.result.byType[t].avgJobTimeS, 1)),
      formatNumber(r.result.taskKills),
      formatNumber(r.result.jobManagerKills),
      formatNumber(r.result.wastedCoreHours, 1),
      formatNumber(r.result.avgTaskWaitS, 2),
      formatNumber(r.result.primaryCoreHoursTaken, 1),
      formatNumber(r.result.wallMs / 1000, 1),
    ]),
  );
}

function runsCsv(runs: readonly SweepRun[]): string {
  return toCsv(
    [
      "seed",
      "load",
      "utilization_pct",
      "measured_utilization_pct",
      "effective_load",
      "policy",
      "peak",
      "jobs",
      "jobs_submitted",
      "jobs_unfinished",
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
      r.seed,
      r.load,
      r.utilizationPct,
      r.measuredPct,
      r.effectiveLoad,
      r.policy,
      r.peak,
      r.result.jobs,
      r.result.jobsSubmitted,
      r.result.jobsUnfinished,
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
}

/** The values of a heat map over the grid: `value` of each cell, row per load. */
function gridValues(
  o: ResolvedComputeSweepOptions,
  cells: readonly SweepCell[],
  value: (cell: SweepCell | undefined) => number | undefined,
): (number | undefined)[][] {
  return o.loads.map((load) =>
    o.utilizationPct.map((pct) => value(cells.find((c) => c.load === load && c.utilizationPct === pct))),
  );
}

function plots(cells: readonly SweepCell[], o: ResolvedComputeSweepOptions): RenderedPlot[] {
  const columns = o.utilizationPct.map((p) => `${p} %`);
  const rows = o.loads.map(String);
  const changes = (["stock", "stock-unaware"] as const).map((baseline): RenderedPlot => {
    const values = gridValues(o, cells, (c) => historyVs(c, baseline));
    const extent = Math.max(
      1,
      ...values
        .flat()
        .filter((v): v is number => v !== undefined && Number.isFinite(v))
        .map(Math.abs),
    );
    const bound = Math.ceil(extent / 5) * 5;
    const title = `History vs ${baseline}: change in average job time (%)`;
    return {
      suffix: `heatmap-vs-${baseline}`,
      title,
      svg: heatMapSvg({
        title,
        columns,
        rows,
        values,
        label: (v) => String(Number(v.toFixed(1))),
        min: -bound,
        max: bound,
        // Green where history is faster, red where it is slower.
        colors: ["#1a9850", "#f7f7f7", "#d73027"],
        legend: [`+${bound} %`, `-${bound} %`],
      }),
    };
  });
  const gapTitle = "Gap closed by history: (stock - history) / (stock - stock-unaware) (%)";
  const gap: RenderedPlot = {
    suffix: "heatmap-gap-closed",
    title: gapTitle,
    svg: heatMapSvg({
      title: gapTitle,
      columns,
      rows,
      values: gridValues(o, cells, (c) => (c?.gapClosed.kind === "closed" ? c.gapClosed.share * 100 : undefined)),
      label: (v) => `${Math.round(v)}`,
      // Red where history is slower than stock, white at no gain, green at the bound; blank where not judged.
      min: -100,
      max: 100,
      colors: ["#d73027", "#f7f7f7", "#1a9850"],
      legend: ["100 %", "-100 %"],
    }),
  };
  return [gap, ...changes];
}

/** The sweep's report: the goals, heat-map tables and per-cell means, every run, CSV and SVG heat maps. */
export function renderComputeSweepReport(runs: readonly SweepRun[], o: ResolvedComputeSweepOptions): RenderedReport {
  const cells = summarizeComputeSweep(runs);
  const levels = o.utilizationPct
    .map((pct) => {
      const c = cells.find((x) => x.utilizationPct === pct);
      return c ? `${pct} % (measured ${c.measuredPct.toFixed(1)} %)` : `${pct} %`;
    })
    .join(", ");
  const summary = [
    ...goalsPart(cells, o),
    "",
    `Utilization levels: ${levels}.`,
    "",
    "History-based placement's change in average job time against primary-aware stock YARN (negative: history is faster;",
    "† marks cells where a policy left more than 5 % of the submitted jobs unfinished at the horizon: overloaded):",
    "",
    gridTable(o, cells, (c) => changeCell(c, "stock")),
    "",
    "Against primary-unaware stock YARN (which never kills and takes the cores from the primary instead; see its",
    "primary core-hours taken in the table of every run):",
    "",
    gridTable(o, cells, (c) => changeCell(c, "stock-unaware")),
    "",
    "Effective load of each cell (offered core-hours over that cluster's own harvestable core-hours):",
    "",
    gridTable(o, cells, (c) => (c ? c.effectiveLoad.toFixed(2) : "-")),
    ...peakPart(cells),
    "",
    "Each cell's figures per policy, means over the seeds:",
    "",
    meansTable(cells),
  ].join("\n");
  return assembleReport(
    "compute-sweep",
    "Compute sweep: history-based placement across load and utilization",
    setupText(runs, o),
    o.command !== undefined ? { command: o.command } : {},
    { summary, runsTable: runsTable(runs), csv: runsCsv(runs), plots: plots(cells, o) },
  );
}
