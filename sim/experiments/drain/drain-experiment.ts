/**
 * The drain experiment (`harvest sim drain`): planned reimages announced ahead, met without a drain (at the reimage
 * everything on the server is killed) or with a graceful drain in LARS order (seeds/002 section 4.4: the longest
 * predicted remaining lifetime is preempted first, so the short ones end on their own meanwhile) or in the baseline's
 * arbitrary order (oldest first), on the same cluster, job stream and reimages. The drain is the resource manager's
 * `DrainTracker`, stepped on the simulated clock with every container's remaining lifetime re-predicted from the
 * learned lifetime model (see `PlannedReimageOptions` in compute.ts).
 *
 * A drain preempts what is predicted to outlive the reimage at a bounded rate, so the order decides which containers go
 * first and, when the rate binds, which go at all: LARS preempts the ones predicted to run longest while the others
 * may still end on their own. At the resource manager's default (one a second per server, bursts of two: two per
 * 10-second step) a server's containers that must go are out within a minute or two; at one a minute a full server
 * takes most of a 30-minute notice. The experiment runs both rates. A preempted container loses its work so far (it
 * re-runs elsewhere; nothing is migrated), so the order also decides how much work is lost: oldest first preempts the
 * containers that have done the most.
 *
 * The storage half (`drainStorage`) meets the same reimages in the storage simulator, whose namenode replication
 * monitor either learns of each reimage when the disk is wiped and re-replicates afterwards (no drain), or decommissions
 * the server's datanode at the notice, with the reimage as its deadline, so that its blocks are copied elsewhere first
 * (HDFS's decommissioning; namenode/policy/decommission.ts). It runs once without a drain and once per notice of a short
 * sweep, since how long a drain takes depends on how much a server holds and the copy bandwidth, not on the compute
 * half's preemption rates.
 */
import { drawServerEvents, runCompute, Stream } from "../../compute.js";
import type { ComputeRunResult, DrainMode, ReimageFigures, ServerEvent } from "../../compute.js";
import { outputOptions, RunTracker } from "../../experiments.js";
import { DAY_MS } from "../../model.js";
import type { SimCluster, TraceSource, UtilizationLevel } from "../../model.js";
import { assembleReport, formatNumber, left, markdownTable, right, toCsv } from "../../report.js";
import { barPlot } from "../../plots.js";
import type { RenderedReport } from "../../report.js";
import { DEFAULT_RE_REPLICATION_BYTES_PER_SEC, runStorage } from "../storage/index.js";
import type { PlannedReimageFigures, StorageDrainMode, StorageOptions, StorageRunResult } from "../storage/index.js";
import { checkAboveZero, checkAtLeastZero, invalidArgument } from "../../options.js";
import * as computeRuns from "../shared/compute-runs.js";
import type { ExperimentOutput, ExperimentReport, Resolved } from "../../experiments.js";

/** Options of {@link runDrainExperiment}; {@link resolveDrainExperimentOptions} fills the defaults. */
export interface DrainExperimentOptions extends ExperimentOutput {
  /** @default 100 */
  servers?: number;
  /** Simulated days after the 30 days of history. @default 7 */
  days?: number;
  /** Offered batch load, a fraction of the harvestable core-hours (as the lifetime experiment's). @default 0.4 */
  load?: number;
  /** @default 1 */
  seed?: number;
  /** @default "medium" */
  level?: UtilizationLevel;
  /** Real traces from ../shared/data when there, else generated (with a note). @default "real" */
  traces?: TraceSource;
  /**
   * Planned reimages per server per day, drawn at random from the seed (`Stream.Reimages`); or "cluster": the
   * generated cluster's own reimage schedule (seeds/004's rates, about one per server per month: a few per week on 100
   * servers, too few to compare on a short run). One a week gives about 100 on 100 servers over 7 days.
   * @default 1/7
   */
  reimages?: number | "cluster";
  /** How long before a reimage it is announced. @default 1800000 (30 minutes) */
  noticeMs?: number;
  /** How long a reimage keeps the server away. @default 1800000 */
  outageMs?: number;
  /** The drain's step (the resource manager's monitor tick). @default 10000 */
  stepIntervalMs?: number;
  /**
   * Drain preemption rates to run, per second per server (each with LARS and with the arbitrary order): the
   * resource manager's default, and one a minute, at which the rate binds.
   * @default [1, 1/60]
   */
  preemptionsPerSecond?: readonly number[];
  /**
   * Notices the storage half runs decommissioning with, each beside one run without a drain. The default brackets the
   * compute half's notice with two shorter ones, at which the default storage load (below) begins to miss deadlines.
   * @default [300000, 600000, noticeMs] (5 and 10 minutes and the compute half's notice, sorted, without repeats)
   */
  storageNoticesMs?: readonly number[];
  /**
   * Blocks (256 MiB, 3 replicas, stock placement) written per server over the storage half's run: at 1,000 a server
   * holds about 0.8 TB of its 2 TB disk by the end, and a drain has minutes of copying to do at 50 MB/s; at the storage
   * experiment's default (30) every drain is done within a minute, whatever the notice.
   * @default 1000
   */
  storageBlocksPerServer?: number;
  /** Directory for drain.md, .csv, .json and the SVG plot; none: render only. */
  out?: string;
}

/** {@link DrainExperimentOptions} with the defaults filled in. */
export type ResolvedDrainExperimentOptions = Resolved<DrainExperimentOptions>;

/** Storage notices run when none are given: 5 and 10 minutes, with the compute half's notice. */
const DEFAULT_STORAGE_NOTICES_MS = [5 * 60_000, 10 * 60_000];

/** One run: the drain mode, its preemption rate (undefined without a drain) and the figures. */
export interface DrainRun {
  drain: DrainMode;
  preemptionsPerSecond: number | undefined;
  result: ComputeRunResult;
  /** `result.reimages`, always present here. */
  reimages: ReimageFigures;
}

/** What the experiment produced. */
export interface DrainExperimentOutcome extends ExperimentReport {
  runs: DrainRun[];
  /** The reimages every run saw. */
  events: readonly ServerEvent[];
  /** The storage half's figures (see `drainStorage`). */
  storage: DrainStorageFigures;
}

/** Whose options the messages name: INVALID_ARGUMENT "drain experiment option <field> ...". */
const WHAT = "drain experiment";

/** Fills the defaults and validates every field (INVALID_ARGUMENT naming it). */
export function resolveDrainExperimentOptions(o: DrainExperimentOptions = {}): ResolvedDrainExperimentOptions {
  const r: ResolvedDrainExperimentOptions = {
    ...computeRuns.resolveRunSize(WHAT, o),
    reimages: o.reimages ?? 1 / 7,
    noticeMs: o.noticeMs ?? 30 * 60_000,
    outageMs: o.outageMs ?? 30 * 60_000,
    stepIntervalMs: o.stepIntervalMs ?? 10_000,
    preemptionsPerSecond: o.preemptionsPerSecond ?? [1, 1 / 60],
    storageNoticesMs: [
      ...new Set(o.storageNoticesMs ?? [...DEFAULT_STORAGE_NOTICES_MS, o.noticeMs ?? 30 * 60_000]),
    ].sort((a, b) => a - b),
    storageBlocksPerServer: o.storageBlocksPerServer ?? 1000,
    ...outputOptions(o),
  };
  if (r.reimages !== "cluster" && !(Number.isFinite(r.reimages) && r.reimages > 0))
    invalidArgument(WHAT, "reimages", `must be "cluster" or a rate > 0 per server per day (got ${String(r.reimages)})`);
  for (const [field, v] of [
    ["noticeMs", r.noticeMs],
    ["outageMs", r.outageMs],
  ] as const)
    checkAtLeastZero(WHAT, field, v);
  checkAboveZero(WHAT, "stepIntervalMs", r.stepIntervalMs);
  if (r.preemptionsPerSecond.length === 0) invalidArgument(WHAT, "preemptionsPerSecond", "must name at least one rate");
  for (const rate of r.preemptionsPerSecond)
    if (!(Number.isFinite(rate) && rate > 0))
      invalidArgument(WHAT, "preemptionsPerSecond", `has ${rate}; rates must be > 0`);
  if (r.storageNoticesMs.length === 0) invalidArgument(WHAT, "storageNoticesMs", "must name at least one notice");
  for (const notice of r.storageNoticesMs)
    if (!(Number.isFinite(notice) && notice >= 0))
      invalidArgument(WHAT, "storageNoticesMs", `has ${notice}; notices must be >= 0`);
  checkAtLeastZero(WHAT, "storageBlocksPerServer", r.storageBlocksPerServer);
  return r;
}

/** The reimages of a run: drawn from the seed at `rate` per server per day, or the cluster's own in the experiment. */
export function reimageEvents(cluster: SimCluster, seed: number, rate: number | "cluster"): ServerEvent[] {
  if (rate !== "cluster") return drawServerEvents(cluster, seed, Stream.Reimages, rate);
  return cluster.reimages
    .filter((r) => r.atMs >= cluster.historyMs && r.atMs < cluster.horizonMs)
    .map((r) => ({ server: r.server, atMs: r.atMs }));
}

// ------------------------------------------------------------------------------------------------ storage half

/** The storage half's blocks: the storage experiment's default size and replication. */
const STORAGE_BLOCK_BYTES = 256 * 2 ** 20;
const STORAGE_REPLICATION = 3;

/** One storage run: no drain, or decommissioning at one notice. */
export interface DrainStorageRun {
  drain: StorageDrainMode;
  /** The notice decommissioning had; 0 without a drain (the notice changes nothing then). */
  noticeMs: number;
  /** The storage simulator's figures; `result.planned` is `planned`. */
  result: StorageRunResult;
  planned: PlannedReimageFigures;
}

/** The storage half's figures: the setup shared by its runs, and each run. */
export interface DrainStorageFigures {
  blocksPerServer: number;
  blockBytes: number;
  replication: number;
  reReplicationBytesPerSec: number;
  /** No drain first, then decommissioning at each notice, shortest first. */
  runs: DrainStorageRun[];
}

/** Options of {@link drainStorage}. */
export interface DrainStorageOptions {
  /** Notices to run decommissioning with (each beside the one run without a drain). */
  noticesMs: readonly number[];
  /** Seeds the storage simulator (writes, placement, copy sources). */
  seed: number;
  /** Blocks written per server over the experiment (a Poisson process, by tasks on random servers). */
  blocksPerServer: number;
  /** Reports each run's progress (the experiment's). */
  tracker?: RunTracker;
}

/** The storage half's runs' labels: "no drain", "decommission, 30 min notice". */
export function storageLabel(drain: StorageDrainMode, noticeMs: number): string {
  return drain === "none" ? "no drain" : `decommission, ${noticeMinutes(noticeMs)} min notice`;
}

/** A notice in minutes: "30", "1.5". */
function noticeMinutes(ms: number): string {
  const minutes = ms / 60_000;
  return formatNumber(minutes, Number.isInteger(minutes) ? 0 : 1);
}

/**
 * The storage half: the storage simulator (`runStorage`, the namenode's own ReplicationMonitor) with these planned
 * reimages as its only wipes, once without a drain and once decommissioning at each notice, on the same cluster,
 * writes and seed; stock placement, 3 replicas of 256 MiB, 50 MB/s of re-replication per server, two streams each way.
 */
export function drainStorage(
  cluster: SimCluster,
  events: readonly ServerEvent[],
  options: DrainStorageOptions,
): DrainStorageFigures {
  const days = (cluster.horizonMs - cluster.historyMs) / DAY_MS;
  const blocksPerDay = days > 0 ? (options.blocksPerServer * cluster.servers.length) / days : 0;
  const plan: { drain: StorageDrainMode; noticeMs: number }[] = [
    { drain: "none", noticeMs: 0 },
    ...options.noticesMs.map((noticeMs) => ({ drain: "decommission" as const, noticeMs })),
  ];
  const runs = plan.map(({ drain, noticeMs }): DrainStorageRun => {
    const run = (onProgress?: StorageOptions["onProgress"]): StorageRunResult =>
      runStorage(cluster, {
        placement: "stock",
        replication: STORAGE_REPLICATION,
        blockBytes: STORAGE_BLOCK_BYTES,
        seed: options.seed,
        blocksPerDay,
        planned: { events, noticeMs, drain },
        ...(onProgress ? { onProgress } : {}),
      });
    const label = `storage: ${storageLabel(drain, noticeMs)}`;
    const result = options.tracker ? options.tracker.track(label, cluster.historyMs, run) : run();
    return { drain, noticeMs, result, planned: result.planned! };
  });
  return {
    blocksPerServer: options.blocksPerServer,
    blockBytes: STORAGE_BLOCK_BYTES,
    replication: STORAGE_REPLICATION,
    reReplicationBytesPerSec: DEFAULT_RE_REPLICATION_BYTES_PER_SEC,
    runs,
  };
}

// ------------------------------------------------------------------------------------------------ running

/** The runs of the experiment: no drain, then LARS and arbitrary at each rate. */
function variants(o: ResolvedDrainExperimentOptions): { drain: DrainMode; rate: number | undefined }[] {
  return [
    { drain: "none", rate: undefined },
    ...o.preemptionsPerSecond.flatMap((rate) => [
      { drain: "lars" as const, rate },
      { drain: "arbitrary" as const, rate },
    ]),
  ];
}

/** A run's label: "no drain", "LARS at 1/s", "arbitrary at 1/min". */
export function drainLabel(drain: DrainMode, rate: number | undefined): string {
  if (drain === "none" || rate === undefined) return "no drain";
  const per =
    rate >= 1 || rate * 60 < 1 ? `${formatNumber(rate, rate >= 1 ? 0 : 4)}/s` : `${formatNumber(rate * 60, 1)}/min`;
  return `${drain === "lars" ? "LARS" : "arbitrary"} at ${per.replace(/\.0\//, "/")}`;
}

/** Runs every variant on one cluster, job stream and set of reimages, and renders (and writes) the report. */
export async function runDrainExperiment(options: DrainExperimentOptions = {}): Promise<DrainExperimentOutcome> {
  const o = resolveDrainExperimentOptions(options);
  const plan = variants(o);
  const tracker = new RunTracker(plan.length + 1 + o.storageNoticesMs.length, o.onProgress);
  const { cluster, jobs, traces } = await computeRuns.generateComputeWorld(o, tracker);
  const events = reimageEvents(cluster, o.seed, o.reimages);
  tracker.note(`${events.length} planned reimages, each announced ${formatNumber(o.noticeMs / 60_000)} minutes ahead`);
  const runs: DrainRun[] = plan.map(({ drain, rate }) => {
    const result = tracker.track(`drain: ${drainLabel(drain, rate)}`, cluster.historyMs, (onProgress) =>
      runCompute(cluster, jobs, {
        policy: "stock",
        seed: o.seed,
        reimages: {
          events,
          drain,
          noticeMs: o.noticeMs,
          outageMs: o.outageMs,
          stepIntervalMs: o.stepIntervalMs,
          ...(rate !== undefined ? { drainOptions: { preemptionsPerSecond: rate } } : {}),
        },
        onProgress,
        progressEvery: 100_000,
      }),
    );
    return { drain, preemptionsPerSecond: rate, result, reimages: result.reimages! };
  });
  const storage = drainStorage(cluster, events, {
    noticesMs: o.storageNoticesMs,
    seed: o.seed,
    blocksPerServer: o.storageBlocksPerServer,
    tracker,
  });
  const report = renderDrainReport(runs, o, traces, events.length, storage);
  const files = computeRuns.writeReportAndJson(o.out, report, () => drainJson(runs, o, traces, events.length, storage));
  return { runs, events, storage, report, files, traces };
}

/** The experiment as JSON (the CLI's --json prints the same). */
export function drainJson(
  runs: readonly DrainRun[],
  o: ResolvedDrainExperimentOptions,
  traces: TraceSource,
  reimages: number,
  storage: DrainStorageFigures,
): unknown {
  return {
    setup: {
      ...computeRuns.runSizeJson(o, traces),
      reimages,
      reimageRate: o.reimages,
      noticeMs: o.noticeMs,
      outageMs: o.outageMs,
      stepIntervalMs: o.stepIntervalMs,
      storageNoticesMs: o.storageNoticesMs,
      storageBlocksPerServer: o.storageBlocksPerServer,
    },
    runs: runs.map((r) => ({
      preemptionsPerSecond: r.preemptionsPerSecond ?? null,
      ...r.reimages,
      killedCoreHours: r.result.wastedCoreHours,
      avgJobTimeS: r.result.avgJobTimeS,
      byType: r.result.byType,
      jobs: r.result.jobs,
      jobsUnfinished: r.result.jobsUnfinished,
      wallMs: Math.round(r.result.wallMs),
    })),
    storage: {
      blocksPerServer: storage.blocksPerServer,
      blockBytes: storage.blockBytes,
      replication: storage.replication,
      reReplicationBytesPerSec: storage.reReplicationBytesPerSec,
      runs: storage.runs.map((r) => ({
        ...r.planned,
        noticeMs: r.noticeMs,
        blocks: r.result.blocks,
        blocksLost: r.result.blocksLost,
        replicasLost: r.result.replicasLost,
        copiesFailed: r.result.copiesFailed,
        writesShort: r.result.writesShort,
        underReplicatedAtEnd: r.result.underReplicatedAtEnd,
        wallMs: Math.round(r.result.wallMs),
      })),
    },
  };
}

// ------------------------------------------------------------------------------------------------ the report

function setupLine(o: ResolvedDrainExperimentOptions, traces: TraceSource, reimages: number): string {
  const rate =
    o.reimages === "cluster" ? "the cluster's own reimages" : `${formatNumber(o.reimages, 3)} per server per day`;
  return (
    `${computeRuns.runSizeLine(o, traces)}, stock task placement; ${formatNumber(reimages)} planned ` +
    `reimages (${rate}), each announced ${formatNumber(o.noticeMs / 60_000)} minutes ahead and keeping its server ` +
    `${formatNumber(o.outageMs / 60_000)} minutes; the drain steps every ${formatNumber(o.stepIntervalMs / 1000)} s`
  );
}

/**
 * The storage half's part of the summary: its setup, one row per run, and what the notices came to, in words drawn
 * from the figures (which notices sufficed is measured, not assumed).
 */
function storageSummary(storage: DrainStorageFigures, reimages: number): string {
  const gib = (bytes: number): string => formatNumber(bytes / 2 ** 30, 1);
  const minutes = (ms: number): string => formatNumber(ms / 60_000, 1);
  const table = markdownTable(
    [
      left("variant"),
      right("blocks"),
      right("blocks lost"),
      right("below 3 replicas (block-h)"),
      right("peak below 3"),
      right("drains done by the reimage"),
      right("missed (blocks left to copy)"),
      right("drain time mean / max (min)"),
      right("copied for drains (GiB)"),
      right("copied after wipes (GiB)"),
    ],
    storage.runs.map((r) => {
      const p = r.planned;
      const drained = r.drain === "decommission";
      return [
        storageLabel(r.drain, r.noticeMs),
        formatNumber(r.result.blocks),
        formatNumber(r.result.blocksLost),
        formatNumber(p.underReplicatedBlockHours, 1),
        formatNumber(p.peakUnderReplicated),
        drained ? `${formatNumber(p.drainsCompleted)} / ${formatNumber(p.drainsStarted)}` : "-",
        drained ? `${formatNumber(p.drainsMissed)} (${formatNumber(p.blocksNeedingCopiesAtMissedDeadlines)})` : "-",
        drained && p.drainsCompleted > 0 ? `${minutes(p.drainMsMean)} / ${minutes(p.drainMsMax)}` : "-",
        gib(p.drainCopyBytes),
        gib(p.wipeCopyBytes),
      ];
    }),
  );
  const none = storage.runs.find((r) => r.drain === "none");
  const verdicts = storage.runs
    .filter((r) => r.drain === "decommission")
    .map((r) => {
      const p = r.planned;
      const missed =
        p.drainsMissed === 0
          ? "every drain completed before its reimage"
          : `${formatNumber(p.drainsMissed)} of ${formatNumber(p.drainsStarted)} drains missed their reimage with ` +
            `${plural(p.blocksNeedingCopiesAtMissedDeadlines, "block")} still to copy`;
      const below = formatNumber(p.underReplicatedBlockHours, 1);
      return `at ${noticeMinutes(r.noticeMs)} minutes' notice ${missed} (${below} block-hours below 3 replicas)`;
    });
  return [
    `Storage half: the same ${formatNumber(reimages)} reimages in the storage simulator, whose namenode replication ` +
      `monitor either re-replicates after each wipe (no drain) or decommissions the server at the notice with the ` +
      `reimage as deadline (its blocks are copied elsewhere under the same limits: ` +
      `${formatNumber(storage.reReplicationBytesPerSec / 1e6)} MB/s per server, two copies in and two out at once), ` +
      `then wipes it anyway. ${formatNumber(storage.blocksPerServer)} blocks of ` +
      `${formatNumber(storage.blockBytes / 2 ** 20)} MiB per server are written over the run, ` +
      `${storage.replication} replicas each, stock placement. "Below 3 replicas" counts replicas on disk wherever ` +
      "they are (a draining server still holds its own), over the run; drain time is notice to DECOMMISSIONED.",
    "",
    table,
    "",
    `Without a drain: ${formatNumber(none?.planned.underReplicatedBlockHours ?? 0, 1)} block-hours below 3 replicas, ` +
      `${formatNumber(none?.result.blocksLost ?? 0)} blocks lost; with decommissioning ${verdicts.join("; ")}.`,
  ].join("\n");
}

/** "1 block", "5,830 blocks". */
function plural(n: number, noun: string): string {
  return `${formatNumber(n)} ${noun}${n === 1 ? "" : "s"}`;
}

/** The drain experiment's report: the comparison table, every run's job times, CSV and SVG plots. */
export function renderDrainReport(
  runs: readonly DrainRun[],
  o: ResolvedDrainExperimentOptions,
  traces: TraceSource,
  reimages: number,
  storage: DrainStorageFigures,
): RenderedReport {
  const main = markdownTable(
    [
      left("variant"),
      right("on servers at notice"),
      right("preempted"),
      right("preempted (core-h)"),
      right("killed at reimage"),
      right("killed at reimage (core-h)"),
      right("finished on their own"),
      right("killed in all (core-h)"),
      right("avg job time (s)"),
    ],
    runs.map((r) => [
      drainLabel(r.drain, r.preemptionsPerSecond),
      r.drain === "none" ? "-" : formatNumber(r.reimages.containersAtNotice),
      formatNumber(r.reimages.preempted),
      formatNumber(r.reimages.preemptedCoreHours, 1),
      formatNumber(r.reimages.killedAtReimage),
      formatNumber(r.reimages.killedAtReimageCoreHours, 1),
      r.drain === "none" ? "-" : formatNumber(r.reimages.finishedOnTheirOwn),
      formatNumber(r.result.wastedCoreHours, 1),
      formatNumber(r.result.avgJobTimeS, 1),
    ]),
  );
  const summary = [
    "Containers disrupted by planned reimages and the work lost with them (held time x cores; a job manager's",
    "preemption also loses its job's running tasks, wherever they ran), split into preempted by the drain before the",
    "reimage and killed at it; containers of a draining server that ended on their own; killed work in all (primary",
    "tenants' kills included) and job time.",
    "",
    main,
    "",
    storageSummary(storage, reimages),
  ].join("\n");
  const runsTable = markdownTable(
    [left("variant"), right("reimages"), ...computeRuns.JOB_RUN_COLUMNS, right("unfinished"), right("wall (s)")],
    runs.map((r) => [
      drainLabel(r.drain, r.preemptionsPerSecond),
      formatNumber(r.reimages.reimages),
      ...computeRuns.jobRunCells(r.result),
      formatNumber(r.result.jobsUnfinished),
      formatNumber(r.result.wallMs / 1000, 1),
    ]),
  );
  const csv = toCsv(
    [
      "drain",
      "preemptions_per_second",
      "reimages",
      "containers_at_notice",
      "preempted",
      "preempted_core_hours",
      "killed_at_reimage",
      "killed_at_reimage_core_hours",
      "finished_on_their_own",
      "killed_core_hours",
      "jobs",
      "jobs_unfinished",
      "avg_job_time_s",
      ...computeRuns.JOB_TYPE_CSV_HEADER,
      "wall_ms",
    ],
    runs.map((r) => [
      r.drain,
      r.preemptionsPerSecond ?? "",
      r.reimages.reimages,
      r.reimages.containersAtNotice,
      r.reimages.preempted,
      r.reimages.preemptedCoreHours,
      r.reimages.killedAtReimage,
      r.reimages.killedAtReimageCoreHours,
      r.reimages.finishedOnTheirOwn,
      r.result.wastedCoreHours,
      r.result.jobs,
      r.result.jobsUnfinished,
      r.result.avgJobTimeS,
      ...computeRuns.jobTypeCsv(r.result),
      Math.round(r.result.wallMs),
    ]),
  );
  // Short categories: the panels are narrow, and the axis drops labels that would overlap.
  const storageCategories = storage.runs.map((r) =>
    r.drain === "none" ? "no drain" : `${noticeMinutes(r.noticeMs)} min`,
  );
  const storageTitle = "Replicas of planned reimages: no drain vs decommissioning at N minutes' notice";
  const storagePlot = barPlot("storage", {
    title: storageTitle,
    yName: "",
    widthPx: 1200,
    panels: [
      {
        title: "block-hours below 3 replicas",
        categories: storageCategories,
        series: [{ name: "block-hours", values: storage.runs.map((r) => r.planned.underReplicatedBlockHours) }],
      },
      {
        title: "drains at their reimage",
        categories: storageCategories,
        series: [
          { name: "completed before the reimage", values: storage.runs.map((r) => r.planned.drainsCompleted) },
          { name: "missed", values: storage.runs.map((r) => r.planned.drainsMissed) },
        ],
      },
      {
        title: "GiB copied",
        categories: storageCategories,
        series: [
          { name: "for drains", values: storage.runs.map((r) => r.planned.drainCopyBytes / 2 ** 30) },
          { name: "after wipes", values: storage.runs.map((r) => r.planned.wipeCopyBytes / 2 ** 30) },
        ],
      },
    ],
  });
  const categories = runs.map((r) => drainLabel(r.drain, r.preemptionsPerSecond));
  const title = "Containers disrupted by planned reimages, and the work lost";
  const plot = barPlot("disruptions", {
    title,
    yName: "",
    widthPx: 1100,
    panels: [
      {
        title: "containers",
        categories,
        series: [
          { name: "preempted before the reimage", values: runs.map((r) => r.reimages.preempted) },
          { name: "killed at the reimage", values: runs.map((r) => r.reimages.killedAtReimage) },
        ],
      },
      {
        title: "core-hours lost",
        categories,
        series: [
          { name: "preempted before the reimage", values: runs.map((r) => r.reimages.preemptedCoreHours) },
          { name: "killed at the reimage", values: runs.map((r) => r.reimages.killedAtReimageCoreHours) },
        ],
      },
    ],
  });
  return assembleReport(
    "drain",
    "Graceful drains before planned reimages: LARS vs arbitrary order vs no drain (seeds/002)",
    setupLine(o, traces, reimages),
    o.command !== undefined ? { command: o.command } : {},
    {
      summary,
      runsTable,
      csv,
      plots: [plot, storagePlot],
    },
  );
}
