/**
 * The lifetime experiment (`harvest sim lifetime`): lifetime-aware node choice, NILAS and LAVA (seeds/002, sections
 * 4.2 and 4.3), against the stock node choice on one cluster and one job stream, each with learned and with oracle
 * lifetimes, under whole-server reclaims. The question of seeds/002 is the share of empty servers (hosts): a server
 * with no secondary container can be handed back whole (to its primary, to a reimage, to a large container) without
 * killing anything. Measured per run: the time-averaged empty-server share and its difference from stock in
 * percentage points, the work killed by whole-server reclaims and by everything, job times, unfinished jobs.
 *
 * What differs from the seed's setting, and so what the figures can and cannot show:
 * - The stock baseline here is YARN's: a job's tasks go to the free servers in the order heartbeats come, i.e. at
 *   random, which spreads them. Borg's baseline (the seed's) already bin-packs, so the seed's gains (+2.3 to 9.2 pp in
 *   production pilots; +6.1 for NILAS and +6.5 for LAVA on average in simulation) are over a packer; ours are over a
 *   spreader and can be larger for that reason alone.
 * - Reclaims hit a server drawn uniformly. Then the expected work a reclaim kills is the work held on an average
 *   server, whatever the placement: packing makes more reclaims find an empty server and each of the others find
 *   more. The seed's gain on maintenance comes from maintenance choosing empty hosts first, which a primary's spike
 *   does not.
 * - A harvested server also yields to its primary: a server packed to its harvestable room kills a task at any growth
 *   of its primary, where a spread one had slack. The total killed work shows that cost.
 */
import { runCompute } from "../../compute.js";
import type { ComputeRunResult, LifetimeSource } from "../../compute.js";
import { outputOptions, RunTracker } from "../../experiments.js";
import type { TraceSource, UtilizationLevel } from "../../model.js";
import { assembleReport, formatNumber, left, markdownTable, right, toCsv } from "../../report.js";
import { barPlot } from "../../plots.js";
import type { RenderedReport } from "../../report.js";
import { checkAboveZero, checkAtLeastZero, invalidArgument } from "../../options.js";
import * as computeRuns from "../shared/compute-runs.js";
import type { NodeChoiceKind } from "../../../resourcemanager/index.js";
import type { ExperimentOutput, ExperimentReport, Resolved } from "../../experiments.js";

/** A node choice of the comparison (`ComputeOptions.nodeChoice`): the resource manager's own kinds. */
export type NodeChoiceVariant = NodeChoiceKind;

/** One run of the comparison: a node choice with its lifetimes (stock uses none; it is "learned" by convention). */
export interface LifetimeVariant {
  nodeChoice: NodeChoiceVariant;
  lifetimes: LifetimeSource;
}

/** Every run of `--compare`: stock once, then NILAS and LAVA each with learned and with oracle lifetimes. */
export const LIFETIME_VARIANTS: readonly LifetimeVariant[] = [
  { nodeChoice: "stock", lifetimes: "learned" },
  { nodeChoice: "nilas", lifetimes: "learned" },
  { nodeChoice: "nilas", lifetimes: "oracle" },
  { nodeChoice: "lava", lifetimes: "learned" },
  { nodeChoice: "lava", lifetimes: "oracle" },
];

/** What seeds/002 reports for empty hosts, to print beside ours. */
export const SEED_EMPTY_HOSTS = Object.freeze({
  /** Production pilots of NILAS, Table 1: +2.3 to +9.2 pp. */
  pilotsPp: [2.3, 9.2] as const,
  /** Simulation of 24 pools, Figure 6, average over pools: NILAS +6.1 pp, LAVA +6.5 pp (production lifetimes). */
  simulationPp: { nilas: 6.1, lava: 6.5 },
});

/** Options of {@link runLifetimeExperiment}; {@link resolveLifetimeExperimentOptions} fills the defaults. */
export interface LifetimeExperimentOptions extends ExperimentOutput {
  /**
   * Servers of the cluster. With the default days and load the five runs take about 80 s on 2 cores (stock 2 s,
   * each lifetime-aware run 15 to 30 s).
   * @default 100
   */
  servers?: number;
  /**
   * Simulated days after the 30 days of history (arrivals stop 12 hours before the end, so late jobs finish).
   * @default 7
   */
  days?: number;
  /**
   * Offered batch load: a fraction of the cluster's harvestable core-hours (`generateJobStream`). The default leaves
   * stock with empty servers a quarter to a third of the time: a saturated cluster has none and an idle one is all
   * empty, and neither can show a difference.
   * @default 0.4
   */
  load?: number;
  /** @default 1 */
  seed?: number;
  /** Average primary utilization. @default "medium" */
  level?: UtilizationLevel;
  /**
   * Primary utilization (and, when real, half the job shapes from the Alibaba sample): real traces from
   * ../shared/data when it is there, else generated ones, with a note.
   * @default "real"
   */
  traces?: TraceSource;
  /**
   * Whole-server reclaims per server per day. One a week: seeds/004 (section 3.3) finds most servers reimaged at most
   * once a month, and primary spikes to the whole server come on top; a week gives the few-day run enough reclaims
   * (about 100 on 100 servers over 7 days) to compare, without making reclaims the main cause of kills.
   * @default 1/7
   */
  reclaimsPerServerPerDay?: number;
  /**
   * How long a reclaim keeps the server: half an hour, a primary's burst or a reimage's downtime.
   * @default 1800000
   */
  reclaimDurationMs?: number;
  /**
   * Which server a reclaim takes (`ReclaimOptions.choose`): "random" (a primary's spike, a failure) or "emptiest"
   * (maintenance or a large deployment that may pick its server: where empty servers pay).
   * @default "random"
   */
  reclaimChoice?: "random" | "emptiest";
  /** The runs. @default LIFETIME_VARIANTS */
  variants?: readonly LifetimeVariant[];
  /** Directory for lifetime.md, .csv, .json and the SVG plot; none: render only. */
  out?: string;
}

/** {@link LifetimeExperimentOptions} with the defaults filled in. */
export type ResolvedLifetimeExperimentOptions = Resolved<LifetimeExperimentOptions>;

/** One run's figures. */
export interface LifetimeRun extends LifetimeVariant {
  result: ComputeRunResult;
  /** Empty-server share minus stock's, percentage points (0 for stock; NaN without a stock run). */
  emptyDeltaPp: number;
}

/** What the experiment produced. */
export interface LifetimeExperimentOutcome extends ExperimentReport {
  runs: LifetimeRun[];
}

/** Whose options the messages name: INVALID_ARGUMENT "lifetime experiment option <field> ...". */
const WHAT = "lifetime experiment";

/** Fills the defaults and validates every field (INVALID_ARGUMENT naming it). */
export function resolveLifetimeExperimentOptions(o: LifetimeExperimentOptions = {}): ResolvedLifetimeExperimentOptions {
  const r: ResolvedLifetimeExperimentOptions = {
    ...computeRuns.resolveRunSize(WHAT, o),
    reclaimsPerServerPerDay: o.reclaimsPerServerPerDay ?? 1 / 7,
    reclaimDurationMs: o.reclaimDurationMs ?? 30 * 60_000,
    reclaimChoice: o.reclaimChoice ?? "random",
    variants: o.variants ?? LIFETIME_VARIANTS,
    ...outputOptions(o),
  };
  checkAtLeastZero(WHAT, "reclaimsPerServerPerDay", r.reclaimsPerServerPerDay);
  checkAboveZero(WHAT, "reclaimDurationMs", r.reclaimDurationMs);
  if (r.reclaimChoice !== "random" && r.reclaimChoice !== "emptiest")
    invalidArgument(WHAT, "reclaimChoice", `must be "random" or "emptiest"`);
  if (r.variants.length === 0) invalidArgument(WHAT, "variants", "must name at least one run");
  for (const v of r.variants) {
    if (!["stock", "nilas", "lava"].includes(v.nodeChoice))
      invalidArgument(WHAT, "variants", `has node choice ${String(v.nodeChoice)}`);
    if (v.lifetimes !== "learned" && v.lifetimes !== "oracle")
      invalidArgument(WHAT, "variants", `has lifetimes ${String(v.lifetimes)}`);
  }
  return r;
}

/** A run's label: "stock", "nilas (learned)", "lava (oracle)". */
export function variantLabel(v: LifetimeVariant): string {
  return v.nodeChoice === "stock" ? "stock" : `${v.nodeChoice} (${v.lifetimes})`;
}

/**
 * Runs every variant on one cluster and job stream (generated once from the seed) with the same reclaims (drawn from
 * the runs' shared seed), and renders (and, given `out`, writes) the report.
 */
export async function runLifetimeExperiment(
  options: LifetimeExperimentOptions = {},
): Promise<LifetimeExperimentOutcome> {
  const o = resolveLifetimeExperimentOptions(options);
  const tracker = new RunTracker(o.variants.length, o.onProgress);
  const { cluster, jobs, traces } = await computeRuns.generateComputeWorld(o, tracker);
  const results = o.variants.map((v) => ({
    ...v,
    result: tracker.track(`lifetime ${variantLabel(v)}`, cluster.historyMs, (onProgress) =>
      runCompute(cluster, jobs, {
        policy: "stock",
        seed: o.seed,
        nodeChoice: v.nodeChoice,
        lifetimes: v.lifetimes,
        reclaims: {
          perServerPerDay: o.reclaimsPerServerPerDay,
          durationMs: o.reclaimDurationMs,
          choose: o.reclaimChoice,
        },
        onProgress,
        progressEvery: 100_000,
      }),
    ),
  }));
  const stock = results.find((r) => r.nodeChoice === "stock");
  const runs: LifetimeRun[] = results.map((r) => ({
    ...r,
    emptyDeltaPp: stock ? (r.result.emptyServerShare - stock.result.emptyServerShare) * 100 : Number.NaN,
  }));
  const report = renderLifetimeReport(runs, o, traces);
  const files = computeRuns.writeReportAndJson(o.out, report, () => lifetimeJson(runs, o, traces));
  return { runs, report, files, traces };
}

/** The experiment as JSON: its setup and every run's figures (the CLI's --json prints the same). */
export function lifetimeJson(
  runs: readonly LifetimeRun[],
  o: ResolvedLifetimeExperimentOptions,
  traces: TraceSource,
): unknown {
  return {
    setup: {
      ...computeRuns.runSizeJson(o, traces),
      reclaimsPerServerPerDay: o.reclaimsPerServerPerDay,
      reclaimChoice: o.reclaimChoice,
      reclaimDurationMs: o.reclaimDurationMs,
    },
    seed002EmptyHostsPp: SEED_EMPTY_HOSTS,
    runs: runs.map((r) => ({
      nodeChoice: r.nodeChoice,
      lifetimes: r.lifetimes,
      emptyServerShare: r.result.emptyServerShare,
      emptyDeltaPp: Number.isFinite(r.emptyDeltaPp) ? r.emptyDeltaPp : null,
      emptyShareWithRoom: r.result.emptyShareWithRoom,
      reclaims: r.result.reclaims,
      reclaimsHittingEmpty: r.result.reclaimsHittingEmpty,
      reclaimKilledCoreHours: r.result.reclaimKilledCoreHours,
      killedCoreHours: r.result.wastedCoreHours,
      taskKills: r.result.taskKills,
      jobManagerKills: r.result.jobManagerKills,
      avgJobTimeS: r.result.avgJobTimeS,
      byType: r.result.byType,
      jobs: r.result.jobs,
      jobsSubmitted: r.result.jobsSubmitted,
      jobsUnfinished: r.result.jobsUnfinished,
      wallMs: Math.round(r.result.wallMs),
    })),
  };
}

// ------------------------------------------------------------------------------------------------ the report

const pct = (share: number): string => `${formatNumber(share * 100, 1)} %`;
const pp = (v: number): string => (Number.isFinite(v) ? `${v > 0 ? "+" : ""}${formatNumber(v, 1)} pp` : "-");

function setupLine(o: ResolvedLifetimeExperimentOptions, traces: TraceSource): string {
  return (
    `${computeRuns.runSizeLine(o, traces)} of the harvestable core-hours, stock (primary-aware) ` +
    `task placement; whole-server reclaims ${formatNumber(o.reclaimsPerServerPerDay, 3)} per server per day, ` +
    `${formatNumber(o.reclaimDurationMs / 60_000)} minutes each, the same in every run, each on ` +
    (o.reclaimChoice === "emptiest"
      ? "the server with the least secondary work (maintenance that may choose)"
      : "the server drawn (nobody chooses)")
  );
}

/** The lifetime experiment's report: the comparison table, the seed's figures beside ours, CSV and an SVG plot. */
export function renderLifetimeReport(
  runs: readonly LifetimeRun[],
  o: ResolvedLifetimeExperimentOptions,
  traces: TraceSource,
): RenderedReport {
  const main = markdownTable(
    [
      left("node choice"),
      right("empty servers"),
      right("vs stock"),
      right("seeds/002"),
      right("empty with room"),
      right("reclaims on empty"),
      right("killed by reclaims (core-h)"),
      right("killed in all (core-h)"),
      right("avg job time (s)"),
      right("unfinished"),
    ],
    runs.map((r) => [
      variantLabel(r),
      pct(r.result.emptyServerShare),
      r.nodeChoice === "stock" ? "-" : pp(r.emptyDeltaPp),
      r.nodeChoice === "stock"
        ? "-"
        : `+${SEED_EMPTY_HOSTS.pilotsPp[0]} to ${SEED_EMPTY_HOSTS.pilotsPp[1]} pp (sim. +${SEED_EMPTY_HOSTS.simulationPp[r.nodeChoice]})`,
      pct(r.result.emptyShareWithRoom),
      `${pct(r.result.reclaimsHittingEmpty)} of ${formatNumber(r.result.reclaims)}`,
      formatNumber(r.result.reclaimKilledCoreHours, 1),
      formatNumber(r.result.wastedCoreHours, 1),
      formatNumber(r.result.avgJobTimeS, 1),
      formatNumber(r.result.jobsUnfinished),
    ]),
  );
  const summary = [
    "Time-averaged share of servers with no secondary container, the change from stock in percentage points, and what",
    "seeds/002 reports for empty hosts (production pilots of NILAS, Table 1; in parentheses its simulation average over",
    "24 pools, Figure 6). Its baseline already bin-packs; ours (YARN's) places at random among the free servers.",
    '"Empty with room": the same share among the servers in service whose primary leaves room for a task.',
    "",
    main,
    "",
    "Reclaims hit a server drawn at random, so the work a reclaim kills is, in expectation, the work held on an",
    "average server whatever the placement; killed work in all also counts the tasks a primary's growth kills, which a",
    "server packed to its harvestable room suffers more often.",
  ].join("\n");
  const runsTable = markdownTable(
    [left("node choice"), ...computeRuns.JOB_RUN_COLUMNS, right("reclaims"), right("events"), right("wall (s)")],
    runs.map((r) => [
      variantLabel(r),
      ...computeRuns.jobRunCells(r.result),
      formatNumber(r.result.reclaims),
      formatNumber(r.result.events),
      formatNumber(r.result.wallMs / 1000, 1),
    ]),
  );
  const csv = toCsv(
    [
      "node_choice",
      "lifetimes",
      "empty_server_share",
      "empty_delta_pp",
      "empty_share_with_room",
      "reclaims",
      "reclaims_hitting_empty",
      "reclaim_killed_core_hours",
      "killed_core_hours",
      "task_kills",
      "job_manager_kills",
      "jobs",
      "jobs_submitted",
      "jobs_unfinished",
      "avg_job_time_s",
      ...computeRuns.JOB_TYPE_CSV_HEADER,
      "events",
      "wall_ms",
    ],
    runs.map((r) => [
      r.nodeChoice,
      r.lifetimes,
      r.result.emptyServerShare,
      r.emptyDeltaPp,
      r.result.emptyShareWithRoom,
      r.result.reclaims,
      r.result.reclaimsHittingEmpty,
      r.result.reclaimKilledCoreHours,
      r.result.wastedCoreHours,
      r.result.taskKills,
      r.result.jobManagerKills,
      r.result.jobs,
      r.result.jobsSubmitted,
      r.result.jobsUnfinished,
      r.result.avgJobTimeS,
      ...computeRuns.jobTypeCsv(r.result),
      r.result.events,
      Math.round(r.result.wallMs),
    ]),
  );
  return assembleReport(
    "lifetime",
    "Lifetime-aware node choice: NILAS and LAVA vs stock (seeds/002)",
    setupLine(o, traces),
    o.command !== undefined ? { command: o.command } : {},
    { summary, runsTable, csv, plots: [lifetimePlot(runs)] },
  );
}

/** Empty servers, reclaim-killed and all killed work, per node choice, learned and oracle lifetimes side by side. */
function lifetimePlot(runs: readonly LifetimeRun[]): RenderedReport["plots"][number] {
  const choices = (["stock", "nilas", "lava"] as const).filter((c) => runs.some((r) => r.nodeChoice === c));
  const series = (value: (r: LifetimeRun) => number) =>
    (["learned", "oracle"] as const).map((lifetimes) => ({
      name: `${lifetimes} lifetimes`,
      values: choices.map((c) => {
        // Stock has no lifetimes: its one run stands under "learned".
        const r = runs.find(
          (x) => x.nodeChoice === c && (c === "stock" ? lifetimes === "learned" : x.lifetimes === lifetimes),
        );
        return r ? value(r) : undefined;
      }),
    }));
  const title = "Empty servers and killed work by node choice";
  return barPlot("empty-servers", {
    title,
    yName: "",
    panels: [
      { title: "empty servers (%)", categories: choices, series: series((r) => r.result.emptyServerShare * 100) },
      {
        title: "killed by reclaims (core-h)",
        categories: choices,
        series: series((r) => r.result.reclaimKilledCoreHours),
      },
      { title: "killed in all (core-h)", categories: choices, series: series((r) => r.result.wastedCoreHours) },
    ],
  });
}
