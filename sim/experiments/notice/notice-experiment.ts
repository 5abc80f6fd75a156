/**
 * The preemption-notice experiment (issue 44, "Preemption notice"; `harvest sim notice`): the node manager's notice
 * (nodemanager/policy/preemption-notice.ts) off and on, on primaries whose utilization steps from sample to sample (as
 * the series is) and on the same primaries ramping between their samples (`primaryShape` "ramp"), under stock and
 * history placement. Every run goes through the daemons' own policies (`chooseVictims`, `containersAtRisk`,
 * `NoticedServers`, the scheduler's `setTaskAvoid`) on the same cluster, jobs and seeds, under the kill-cost model.
 *
 * The issue's goal: the notice saves work on ramping primaries (fewer kills, less wasted, jobs no slower), and
 * step-shaped spikes get no worse.
 */
import { DEFAULT_NOTICE_AVOID_MS } from "../../../jobmanager/index.js";
import { DEFAULT_NOTICE_MARGIN_FRACTION } from "../../../nodemanager/index.js";
import type { PreemptionNotice } from "../../../nodemanager/index.js";
import { DEFAULT_MAX_AM_SHARE } from "../../../resourcemanager/index.js";
import { DEFAULT_KILL_COST, runCompute } from "../../compute.js";
import type { ComputeRunResult } from "../../compute.js";
import type { PrimaryShape } from "../../compute-options.js";
import { PRIMARY_SHAPES } from "../../compute-options.js";
import { chooseTraces, outputOptions, RunTracker } from "../../experiments.js";
import type { ExperimentOutput, ExperimentReport, Resolved } from "../../experiments.js";
import { generateJobStream } from "../../jobs.js";
import type { SimCluster, TraceSource } from "../../model.js";
import { checkDays, checkFraction, checkIntAtLeast, checkShare, checkTraces, invalidArgument } from "../../options.js";
import { assembleReport, formatNumber, left, markdownTable, right, toCsv } from "../../report.js";
import type { RenderedReport } from "../../report.js";
import type { ComputePolicy } from "../../results.js";
import { clusterAtUtilization, jobSource, writeReportAndJson } from "../shared/compute-runs.js";

/** The placements the experiment runs under. */
export const NOTICE_POLICIES: readonly ComputePolicy[] = ["stock", "history"];

/** The notice settings compared, the stock one first. */
const NOTICES: readonly PreemptionNotice[] = ["off", "notice"];

/** Options of {@link runNoticeExperiment}; {@link resolveNoticeExperimentOptions} fills the defaults and validates. */
export interface NoticeExperimentOptions extends ExperimentOutput {
  /** Servers of the cluster. @default 200 */
  servers?: number;
  /** Simulated days of each run, after 30 days of history. @default 5 */
  days?: number;
  /** The seeds of the clusters, job streams and runs; figures are means over them. @default [1, 2, 3] */
  seeds?: readonly number[];
  /** Offered batch load: a fraction of the reference cluster's harvestable core-hours (as the sweep's). @default 0.8 */
  load?: number;
  /** Average primary utilization of the cluster, %. @default 55 */
  utilizationPct?: number;
  /** The utilization of the cluster the load is a fraction of (the sweep's busiest level). @default 65 */
  referencePct?: number;
  /** Placements to run under. @default ["stock", "history"] */
  policies?: readonly ComputePolicy[];
  /** Primary shapes to run on. @default ["step", "ramp"] */
  shapes?: readonly PrimaryShape[];
  /** The notice's margin, a fraction of each server's cores. @default DEFAULT_NOTICE_MARGIN_FRACTION */
  marginFraction?: number;
  /** How long a noticed job avoids the server. @default DEFAULT_NOTICE_AVOID_MS */
  avoidMs?: number;
  /** A ramping primary's sub-step. @default 30000 */
  rampStepMs?: number;
  /** The resource manager's maxAmShare in every run (1: no limit). @default 0.1, the resource manager's */
  maxAmShare?: number;
  /** @default "generated" */
  traces?: TraceSource;
  /** Directory for notice.md, notice.csv and notice.json; none: render only. */
  out?: string;
}

/** {@link NoticeExperimentOptions} with the defaults filled in. */
export type ResolvedNoticeExperimentOptions = Resolved<NoticeExperimentOptions>;

/** One run: a notice setting on a primary shape under a placement, for a seed. */
export interface NoticeRun {
  seed: number;
  policy: ComputePolicy;
  shape: PrimaryShape;
  notice: PreemptionNotice;
  /** The 95th percentile of the finished jobs' times, s. */
  p95JobTimeS: number;
  result: ComputeRunResult;
}

/** What the experiment produced. */
export interface NoticeExperimentOutcome extends ExperimentReport {
  runs: NoticeRun[];
}

const WHAT = "notice experiment";

/** Fills the defaults and validates every field (INVALID_ARGUMENT naming it). */
export function resolveNoticeExperimentOptions(o: NoticeExperimentOptions = {}): ResolvedNoticeExperimentOptions {
  const r: ResolvedNoticeExperimentOptions = {
    servers: o.servers ?? 200,
    days: o.days ?? 5,
    seeds: [...new Set(o.seeds ?? [1, 2, 3])],
    load: o.load ?? 0.8,
    utilizationPct: o.utilizationPct ?? 55,
    referencePct: o.referencePct ?? 65,
    policies: NOTICE_POLICIES.filter((p) => (o.policies ?? NOTICE_POLICIES).includes(p)),
    shapes: PRIMARY_SHAPES.filter((s) => (o.shapes ?? PRIMARY_SHAPES).includes(s)),
    marginFraction: o.marginFraction ?? DEFAULT_NOTICE_MARGIN_FRACTION,
    avoidMs: o.avoidMs ?? DEFAULT_NOTICE_AVOID_MS,
    rampStepMs: o.rampStepMs ?? 30_000,
    maxAmShare: o.maxAmShare ?? DEFAULT_MAX_AM_SHARE,
    traces: o.traces ?? "generated",
    ...outputOptions(o),
  };
  checkIntAtLeast(WHAT, "servers", r.servers, 1);
  checkDays(WHAT, r.days, 2);
  if (r.seeds.length === 0) invalidArgument(WHAT, "seeds", "must name at least one seed");
  for (const s of r.seeds) checkIntAtLeast(WHAT, "seeds", s, 0);
  if (!(Number.isFinite(r.load) && r.load > 0 && r.load <= 5))
    invalidArgument(WHAT, "load", `has ${r.load}; use (0, 5]`);
  for (const u of [r.utilizationPct, r.referencePct])
    if (!(Number.isFinite(u) && u > 0 && u < 95)) invalidArgument(WHAT, "utilizationPct", `has ${u}; use (0, 95) %`);
  for (const p of o.policies ?? [])
    if (!NOTICE_POLICIES.includes(p)) invalidArgument(WHAT, "policies", `has ${p}; use ${NOTICE_POLICIES.join(", ")}`);
  if (r.policies.length === 0) invalidArgument(WHAT, "policies", "must name at least one policy");
  for (const s of o.shapes ?? [])
    if (!PRIMARY_SHAPES.includes(s)) invalidArgument(WHAT, "shapes", `has ${s}; use ${PRIMARY_SHAPES.join(", ")}`);
  if (r.shapes.length === 0) invalidArgument(WHAT, "shapes", "must name at least one shape");
  checkFraction(WHAT, "marginFraction", r.marginFraction);
  if (!(r.marginFraction > 0)) invalidArgument(WHAT, "marginFraction", `must be above 0 (got ${r.marginFraction})`);
  if (!(Number.isFinite(r.avoidMs) && r.avoidMs > 0))
    invalidArgument(WHAT, "avoidMs", `must be a number of milliseconds above 0 (got ${r.avoidMs})`);
  checkIntAtLeast(WHAT, "rampStepMs", r.rampStepMs, 1000);
  checkShare(WHAT, "maxAmShare", r.maxAmShare);
  checkTraces(WHAT, r.traces, false);
  return r;
}

/** The `q` quantile (0..1) of `values`, by the nearest rank; NaN when empty. */
export function quantile(values: readonly number[], q: number): number {
  if (values.length === 0) return NaN;
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1))]!;
}

/** Runs every seed x placement x shape x notice setting on one cluster and job stream per seed; one report. */
export async function runNoticeExperiment(options: NoticeExperimentOptions = {}): Promise<NoticeExperimentOutcome> {
  const o = resolveNoticeExperimentOptions(options);
  const tracker = new RunTracker(o.seeds.length * o.policies.length * o.shapes.length * NOTICES.length, o.onProgress);
  const traces = await chooseTraces(o.traces, (m) => tracker.note(m));
  const runs: NoticeRun[] = [];
  for (const seed of o.seeds) {
    const cluster = (meanPct: number): SimCluster => clusterAtUtilization(o, seed, meanPct, traces);
    tracker.note(`seed ${seed}: the job stream on the ${o.referencePct} % reference cluster (${o.servers} servers)`);
    const stream = generateJobStream(cluster(o.referencePct), { seed, load: o.load, source: jobSource(traces.source) });
    const c = cluster(o.utilizationPct);
    for (const policy of o.policies)
      for (const shape of o.shapes)
        for (const notice of NOTICES) {
          const times: number[] = [];
          const result = tracker.track(
            `seed ${seed} ${policy} ${shape} notice ${notice === "off" ? "off" : "on"}`,
            c.historyMs,
            (onProgress) =>
              runCompute(c, stream, {
                policy,
                seed,
                killCost: DEFAULT_KILL_COST,
                maxAmShare: o.maxAmShare,
                primaryShape: shape,
                rampStepMs: o.rampStepMs,
                preemptionNotice: notice,
                noticeMarginFraction: o.marginFraction,
                noticeAvoidMs: o.avoidMs,
                observer: { onJobFinished: (e) => times.push(e.durationMs / 1000) },
                onProgress,
                progressEvery: 100_000,
              }),
          );
          runs.push({ seed, policy, shape, notice, p95JobTimeS: quantile(times, 0.95), result });
        }
  }
  const report = renderNoticeReport(runs, o);
  const files = writeReportAndJson(o.out, report, () => noticeJson(runs, o));
  return { runs, report, files, traces: traces.source };
}

// ------------------------------------------------------------------------------------------------ the report

/** The seed-mean figures of one placement, shape and notice setting. */
export interface NoticeFigures {
  jobs: number;
  jobsSubmitted: number;
  jobsUnfinished: number;
  avgJobTimeS: number;
  p95JobTimeS: number;
  taskKills: number;
  jobManagerKills: number;
  wastedCoreHours: number;
  noticesSent: number;
  noticedKilled: number;
}

/** The mean over `runs` (one per seed) of the figures the report compares. */
export function meanNoticeFigures(runs: readonly NoticeRun[]): NoticeFigures {
  const mean = (f: (r: NoticeRun) => number): number =>
    runs.length > 0 ? runs.reduce((sum, r) => sum + f(r), 0) / runs.length : NaN;
  return {
    jobs: mean((r) => r.result.jobs),
    jobsSubmitted: mean((r) => r.result.jobsSubmitted),
    jobsUnfinished: mean((r) => r.result.jobsUnfinished),
    avgJobTimeS: mean((r) => r.result.avgJobTimeS),
    p95JobTimeS: mean((r) => r.p95JobTimeS),
    taskKills: mean((r) => r.result.taskKills),
    jobManagerKills: mean((r) => r.result.jobManagerKills),
    wastedCoreHours: mean((r) => r.result.wastedCoreHours),
    noticesSent: mean((r) => r.result.noticesSent),
    noticedKilled: mean((r) => r.result.noticedKilled),
  };
}

/** `value` against `baseline` as a signed percentage ("-" when it cannot be). */
export function ratio(value: number, baseline: number): string {
  if (!(Number.isFinite(value) && Number.isFinite(baseline) && baseline !== 0)) return "-";
  const pct = ((value - baseline) / baseline) * 100;
  return `${pct > 0 ? "+" : ""}${pct.toFixed(1)}%`;
}

/** The seed means of every placement x shape x notice setting, with the notice's ratios against "off". */
function cells(runs: readonly NoticeRun[], o: ResolvedNoticeExperimentOptions) {
  const out: {
    policy: ComputePolicy;
    shape: PrimaryShape;
    notice: PreemptionNotice;
    f: NoticeFigures;
    off: NoticeFigures;
  }[] = [];
  for (const policy of o.policies)
    for (const shape of o.shapes) {
      const of = (notice: PreemptionNotice) =>
        meanNoticeFigures(runs.filter((r) => r.policy === policy && r.shape === shape && r.notice === notice));
      const off = of("off");
      for (const notice of NOTICES) out.push({ policy, shape, notice, f: of(notice), off });
    }
  return out;
}

/** The report: per placement and shape, the notice off and on (seed means, with the change), and every run. */
export function renderNoticeReport(runs: readonly NoticeRun[], o: ResolvedNoticeExperimentOptions): RenderedReport {
  const traces = runs[0]?.result.traces ?? o.traces;
  const setup =
    `${formatNumber(o.servers)} servers at ${o.utilizationPct} % average primary utilization, ${o.days} simulated ` +
    `days after 30 days of history, seeds ${o.seeds.join(", ")} (figures are their means), ${traces} traces; load ` +
    `${o.load} of the harvestable core-hours of the ${o.referencePct} % cluster; kill cost modelled ` +
    `(DEFAULT_KILL_COST); job managers ${o.maxAmShare >= 1 ? "unlimited" : `at most ${o.maxAmShare} of the harvestable cores`}; ` +
    `notice margin ${formatNumber(o.marginFraction * 100, 0)} % of a server's cores, hold ` +
    `${formatNumber(o.avoidMs / 1000, 0)} s; a ramping primary moves every ${formatNumber(o.rampStepMs / 1000, 0)} s`;
  const rows = cells(runs, o).map(({ policy, shape, notice, f, off }) => {
    const base = notice === "off";
    return [
      policy,
      shape,
      notice,
      `${formatNumber(f.jobs)} / ${formatNumber(f.jobsSubmitted)}`,
      formatNumber(f.jobsUnfinished, 1),
      formatNumber(f.avgJobTimeS, 1),
      base ? "" : ratio(f.avgJobTimeS, off.avgJobTimeS),
      formatNumber(f.p95JobTimeS, 1),
      base ? "" : ratio(f.p95JobTimeS, off.p95JobTimeS),
      formatNumber(f.taskKills + f.jobManagerKills),
      base ? "" : ratio(f.taskKills + f.jobManagerKills, off.taskKills + off.jobManagerKills),
      formatNumber(f.wastedCoreHours, 1),
      base ? "" : ratio(f.wastedCoreHours, off.wastedCoreHours),
      base ? "" : formatNumber(f.noticesSent),
      base ? "" : formatNumber(f.noticedKilled),
    ];
  });
  const table = markdownTable(
    [
      left("placement"),
      left("primary"),
      left("notice"),
      right("jobs finished"),
      right("unfinished"),
      right("avg job time (s)"),
      right("vs off"),
      right("p95 job time (s)"),
      right("vs off"),
      right("kills"),
      right("vs off"),
      right("wasted core-h"),
      right("vs off"),
      right("notices sent"),
      right("noticed, then killed"),
    ],
    rows,
  );
  const summary = [
    "The preemption notice off (stock) and on, per placement and primary shape (means over the seeds; changes are the",
    "notice's against off on the same shape and placement):",
    "",
    table,
    "",
    "Kills count task and job-manager containers (a killed job manager's tasks are task kills); wasted core-hours are",
    "the core-hours killed containers held from their grant to their kill; notices sent count the containers named in",
    "a notice (each attempt once), of which the last column were killed afterwards.",
  ].join("\n");
  const runsTable = markdownTable(
    [
      right("seed"),
      left("placement"),
      left("primary"),
      left("notice"),
      right("jobs finished"),
      right("avg job time (s)"),
      right("p95 job time (s)"),
      right("task kills"),
      right("job-manager kills"),
      right("wasted core-h"),
      right("notices sent"),
      right("noticed, then killed"),
      right("wall (s)"),
    ],
    runs.map((r) => [
      String(r.seed),
      r.policy,
      r.shape,
      r.notice,
      `${formatNumber(r.result.jobs)} / ${formatNumber(r.result.jobsSubmitted)}`,
      formatNumber(r.result.avgJobTimeS, 1),
      formatNumber(r.p95JobTimeS, 1),
      formatNumber(r.result.taskKills),
      formatNumber(r.result.jobManagerKills),
      formatNumber(r.result.wastedCoreHours, 1),
      formatNumber(r.result.noticesSent),
      formatNumber(r.result.noticedKilled),
      formatNumber(r.result.wallMs / 1000, 1),
    ]),
  );
  const csv = toCsv(
    [
      "seed",
      "policy",
      "primary_shape",
      "notice",
      "jobs",
      "jobs_submitted",
      "jobs_unfinished",
      "avg_job_time_s",
      "p95_job_time_s",
      "task_kills",
      "job_manager_kills",
      "wasted_core_hours",
      "notices_sent",
      "noticed_killed",
      "events",
      "wall_ms",
    ],
    runs.map((r) => [
      r.seed,
      r.policy,
      r.shape,
      r.notice,
      r.result.jobs,
      r.result.jobsSubmitted,
      r.result.jobsUnfinished,
      r.result.avgJobTimeS,
      r.p95JobTimeS,
      r.result.taskKills,
      r.result.jobManagerKills,
      r.result.wastedCoreHours,
      r.result.noticesSent,
      r.result.noticedKilled,
      r.result.events,
      r.result.wallMs,
    ]),
  );
  return assembleReport(
    "notice",
    "Preemption notice: kills and job times on stepping and ramping primaries",
    setup,
    o.command !== undefined ? { command: o.command } : {},
    { summary, runsTable, csv, plots: [] },
  );
}

/** notice.json: the setup, the seed means with their ratios against "off", and every run's figures. */
function noticeJson(runs: readonly NoticeRun[], o: ResolvedNoticeExperimentOptions): unknown {
  const { onProgress: _progress, out: _out, ...setup } = o;
  const change = (v: number, b: number): number | null =>
    Number.isFinite(v) && Number.isFinite(b) && b !== 0 ? (v - b) / b : null;
  return {
    // Lists as comma-joined strings: JSON.stringify's layout of them is not the formatter's, which checks this file.
    setup: {
      ...setup,
      seeds: o.seeds.join(","),
      policies: o.policies.join(","),
      shapes: o.shapes.join(","),
      traces: runs[0]?.result.traces ?? o.traces,
    },
    cells: cells(runs, o).map(({ policy, shape, notice, f, off }) => ({
      policy,
      shape,
      notice,
      ...f,
      vsOff: {
        avgJobTime: change(f.avgJobTimeS, off.avgJobTimeS),
        p95JobTime: change(f.p95JobTimeS, off.p95JobTimeS),
        kills: change(f.taskKills + f.jobManagerKills, off.taskKills + off.jobManagerKills),
        wastedCoreHours: change(f.wastedCoreHours, off.wastedCoreHours),
      },
    })),
    runs: runs.map((r) => ({
      seed: r.seed,
      policy: r.policy,
      shape: r.shape,
      notice: r.notice,
      jobs: r.result.jobs,
      jobsSubmitted: r.result.jobsSubmitted,
      jobsUnfinished: r.result.jobsUnfinished,
      avgJobTimeS: r.result.avgJobTimeS,
      p95JobTimeS: r.p95JobTimeS,
      taskKills: r.result.taskKills,
      jobManagerKills: r.result.jobManagerKills,
      wastedCoreHours: r.result.wastedCoreHours,
      noticesSent: r.result.noticesSent,
      noticedKilled: r.result.noticedKilled,
      events: r.result.events,
    })),
  };
}
