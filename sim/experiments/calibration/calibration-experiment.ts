/**
 * The calibration experiment (`harvest sim calibration`): runs the compute simulation with every job quoted at its
 * submission by the resource manager's `quoteJob` (quote-recorder.ts), and compares the quotes with what happened
 * (calibration.ts): a reliability table and plot over deciles of the quoted probability of no kill, the Brier score
 * beside a constant forecast's, quoted against observed re-runs, and how often jobs ended inside their quoted band.
 */
import { DEFAULT_SURVIVAL_QUOTE_OPTIONS } from "../../../resourcemanager/index.js";
import { runCompute } from "../../compute.js";
import type { ComputeRunResult } from "../../compute.js";
import { outputOptions, RunTracker } from "../../experiments.js";
import type { ExperimentOutput, ExperimentReport, Resolved } from "../../experiments.js";
import type { TraceSource } from "../../model.js";
import { checkAboveZero, checkAtLeastZero, invalidArgument } from "../../options.js";
import type { RunSize } from "../../options.js";
import { barPlot } from "../../plots.js";
import { assembleReport, formatNumber, left, markdownTable, right, toCsv } from "../../report.js";
import type { RenderedReport } from "../../report.js";
import * as computeRuns from "../shared/compute-runs.js";
import { calibrationOf } from "./calibration.js";
import type { Calibration } from "./calibration.js";
import { QuoteRecorder, serverKillRates } from "./quote-recorder.js";
import type { QuotedJob } from "./quote-recorder.js";

/** The run size when none is given: the small one to iterate on (60 servers, 3 days, load 0.6, generated traces). */
export const CALIBRATION_RUN_SIZE: Readonly<RunSize> = Object.freeze({
  servers: 60,
  days: 3,
  load: 0.6,
  seed: 1,
  level: "medium",
  traces: "generated",
});

/** Options of the calibration experiment. */
export interface CalibrationExperimentOptions extends ExperimentOutput, Partial<RunSize> {
  /** The placement policy of the run. @default "history" */
  policy?: "stock" | "history";
  /** The quote's `killSlackPct`. @default DEFAULT_SURVIVAL_QUOTE_OPTIONS.killSlackPct */
  killSlackPct?: number;
  /** The quote's `priorRuns`. @default DEFAULT_SURVIVAL_QUOTE_OPTIONS.priorRuns */
  priorRuns?: number;
}

/** {@link CalibrationExperimentOptions} with the defaults filled in. */
export type ResolvedCalibrationOptions = Resolved<CalibrationExperimentOptions>;

/** What the experiment produced. */
export interface CalibrationOutcome extends ExperimentReport {
  calibration: Calibration;
  result: ComputeRunResult;
  /** Every quoted job (finished or not). */
  jobs: QuotedJob[];
}

const WHAT = "calibration experiment";

/** Fills the defaults and validates every field (INVALID_ARGUMENT naming it). */
export function resolveCalibrationOptions(o: CalibrationExperimentOptions = {}): ResolvedCalibrationOptions {
  const r: ResolvedCalibrationOptions = {
    ...computeRuns.resolveRunSize(WHAT, o, CALIBRATION_RUN_SIZE),
    policy: o.policy ?? "history",
    killSlackPct: o.killSlackPct ?? DEFAULT_SURVIVAL_QUOTE_OPTIONS.killSlackPct,
    priorRuns: o.priorRuns ?? DEFAULT_SURVIVAL_QUOTE_OPTIONS.priorRuns,
    ...outputOptions(o),
  };
  if (r.policy !== "stock" && r.policy !== "history") invalidArgument(WHAT, "policy", 'must be "stock" or "history"');
  checkAtLeastZero(WHAT, "killSlackPct", r.killSlackPct);
  checkAboveZero(WHAT, "priorRuns", r.priorRuns);
  return r;
}

/** Generates the cluster and jobs, runs them with every job quoted, and renders (and, given `out`, writes) the report. */
export async function runCalibrationExperiment(
  options: CalibrationExperimentOptions = {},
): Promise<CalibrationOutcome> {
  const o = resolveCalibrationOptions(options);
  const tracker = new RunTracker(1, o.onProgress);
  const { cluster, jobs, traces } = await computeRuns.generateComputeWorld(o, tracker);
  // The resource manager's tenant registry reads the classifier's window: the history before the run.
  const recorder = new QuoteRecorder(serverKillRates(cluster, 0, cluster.historyMs, o.killSlackPct), {
    killSlackPct: o.killSlackPct,
    priorRuns: o.priorRuns,
  });
  const result = tracker.track(`calibration ${o.policy}`, cluster.historyMs, (onProgress) =>
    runCompute(cluster, jobs, {
      policy: o.policy,
      seed: o.seed,
      observer: recorder.observer(),
      onProgress,
      progressEvery: 100_000,
    }),
  );
  const quoted = [...recorder.jobs.values()];
  const calibration = calibrationOf(quoted);
  const report = renderCalibrationReport(calibration, result, o, traces);
  const files = computeRuns.writeReportAndJson(o.out, report, () => calibrationJson(calibration, result, o, traces));
  return { calibration, result, jobs: quoted, report, files, traces };
}

/** The experiment as JSON: its setup, the calibration figures and the run's job figures. */
export function calibrationJson(
  c: Calibration,
  r: ComputeRunResult,
  o: ResolvedCalibrationOptions,
  traces: TraceSource,
): unknown {
  return {
    setup: {
      ...computeRuns.runSizeJson(o, traces),
      policy: o.policy,
      killSlackPct: o.killSlackPct,
      priorRuns: o.priorRuns,
    },
    calibration: c,
    run: {
      jobs: r.jobs,
      jobsSubmitted: r.jobsSubmitted,
      taskKills: r.taskKills,
      jobManagerKills: r.jobManagerKills,
      avgJobTimeS: r.avgJobTimeS,
    },
  };
}

const pct = (v: number): string => (Number.isFinite(v) ? `${formatNumber(v * 100, 1)} %` : "-");

/** The report: the scores, the reliability table, the run, a CSV of the buckets and the reliability plot. */
export function renderCalibrationReport(
  c: Calibration,
  r: ComputeRunResult,
  o: ResolvedCalibrationOptions,
  traces: TraceSource,
): RenderedReport {
  const scores = markdownTable(
    [left("figure"), right("value")],
    [
      ["jobs finished (quoted at submission)", formatNumber(c.jobs)],
      ["finished with no task killed", pct(c.killFreeShare)],
      ["Brier score of the quote", formatNumber(c.brier, 4)],
      ["Brier score of a constant (the kill-free share)", formatNumber(c.baselineBrier, 4)],
      ["skill (1 - quote / constant)", formatNumber(c.skill, 3)],
      ["re-runs quoted / observed", `${formatNumber(c.quotedReruns, 1)} / ${formatNumber(c.observedReruns)}`],
      ["finished by quoted p10 / p50 / p90", `${pct(c.byP10)} / ${pct(c.byP50)} / ${pct(c.byP90)}`],
    ],
  );
  const reliability = markdownTable(
    [
      left("quoted P(no kill)"),
      right("jobs"),
      right("mean quoted"),
      right("observed"),
      right("re-runs quoted"),
      right("re-runs observed"),
    ],
    c.buckets.map((b) => [
      `${b.lo.toFixed(1)}-${b.hi.toFixed(1)}`,
      formatNumber(b.jobs),
      b.jobs > 0 ? formatNumber(b.meanQuoted, 3) : "-",
      b.jobs > 0 ? formatNumber(b.observed, 3) : "-",
      b.jobs > 0 ? formatNumber(b.meanQuotedReruns, 2) : "-",
      b.jobs > 0 ? formatNumber(b.meanObservedReruns, 2) : "-",
    ]),
  );
  const summary = [
    "Every job quoted at its submission by the resource manager's `quoteJob`; a job's outcome is 1 when it finished",
    "with no task killed. Jobs still running at the horizon are left out.",
    "",
    scores,
    "",
    "Reliability: jobs by decile of their quoted probability of no kill, the mean quote against the observed share.",
    "",
    reliability,
  ].join("\n");
  const runsTable = markdownTable(
    [left("policy"), ...computeRuns.JOB_RUN_COLUMNS, right("events"), right("wall (s)")],
    [[o.policy, ...computeRuns.jobRunCells(r), formatNumber(r.events), formatNumber(r.wallMs / 1000, 1)]],
  );
  const csv = toCsv(
    ["bucket_lo", "bucket_hi", "jobs", "mean_quoted", "observed", "mean_quoted_reruns", "mean_observed_reruns"],
    c.buckets.map((b) => [b.lo, b.hi, b.jobs, b.meanQuoted, b.observed, b.meanQuotedReruns, b.meanObservedReruns]),
  );
  const plot = barPlot("reliability", {
    title: "Quoted probability of no kill against the observed share, by decile",
    yName: "P(no kill)",
    panels: [
      {
        title: "",
        categories: c.buckets.map((b) => `${b.lo.toFixed(1)}-${b.hi.toFixed(1)}`),
        series: [
          { name: "mean quoted", values: c.buckets.map((b) => (b.jobs > 0 ? b.meanQuoted : undefined)) },
          { name: "observed", values: c.buckets.map((b) => (b.jobs > 0 ? b.observed : undefined)) },
        ],
      },
    ],
  });
  return assembleReport(
    "calibration",
    "Survival quotes: calibration in the simulator",
    `${computeRuns.runSizeLine(o, traces)}, ${o.policy} placement, kill slack ${o.killSlackPct} points, prior ${o.priorRuns} runs`,
    o.command !== undefined ? { command: o.command } : {},
    { summary, runsTable, csv, plots: [plot] },
  );
}
