/**
 * The admission experiment (seeds/003, sections 4 and 5; `harvest sim admission`): the zeroth-, first- and
 * second-moment admission policies of the resource manager (`resourcemanager/policy/admission.ts`) in front of the compute
 * simulator (`runCompute` with `admission`), each with its threshold tuned by binary search (`tuneThreshold`, section
 * 5.2) to the largest value whose share of killed task-hours stays within an SLA, then compared by the harvested
 * utilization they reach at that SLA (the form of the paper's Table 2), beside no admission control.
 *
 * The comparison needs a regime where admission matters: offered load near the harvestable capacity, so that without
 * admission control the scheduler fills the harvested cores and every rise of a primary kills (the run collapses into
 * re-runs), on a cluster whose primaries move (the generator's periodic tenants peak every afternoon). Utilization is
 * the figure to compare only when jobs are offered faster than a policy admits them; under a light load every policy
 * runs every job and the utilizations are equal.
 *
 * Overfitting: the thresholds are tuned on one period (the first `days` after the history, job seed `seed`) and
 * evaluated on the next `days` of the same cluster with other jobs (job seed `seed + 1`) that the tuning never saw;
 * both are reported, and the held-out period says whether the tuned thresholds still keep the SLA.
 *
 * The tuned thresholds are written as the fragment the resource manager reads (`admissionThresholdsFile`):
 * `admission-thresholds.json`.
 */
import { join } from "node:path";
import { performance } from "node:perf_hooks";
import type { Clock } from "../../../common/clock.js";
import { systemClock } from "../../../common/clock.js";
import { tuneThreshold } from "../../../resourcemanager/index.js";
import type { AdmissionPolicy } from "../../../resourcemanager/index.js";
import { generateCluster } from "../../cluster-gen.js";
import { DEFAULT_KILL_COST, runCompute } from "../../compute.js";
import type { ComputeRunResult, SimAdmissionOptions } from "../../compute.js";
import { chooseTraces, outputOptions, RunTracker } from "../../experiments.js";
import { generateJobStream } from "../../jobs.js";
import type { JobStream } from "../../jobs.js";
import { DAY_MS } from "../../model.js";
import type { SimCluster, TraceSource } from "../../model.js";
import {
  assembleReport,
  formatFraction,
  formatNumber,
  left,
  markdownTable,
  right,
  toCsv,
  writeReport,
} from "../../report.js";
import { barPlot } from "../../plots.js";
import type { RenderedReport } from "../../report.js";
import { checkDays, checkIntAtLeast, checkLoad, checkTraces, invalidArgument } from "../../options.js";
import { jobsCell, jobSource, writeJson } from "../shared/compute-runs.js";
import type { ExperimentOutput, ExperimentReport, Resolved } from "../../experiments.js";

/** The policies whose thresholds are tuned, in the paper's order. */
export const TUNED_POLICIES = ["zeroth", "first", "second"] as const;
/** A policy with a threshold. */
export type TunedPolicy = (typeof TUNED_POLICIES)[number];

/** The threshold field of each policy in `AdmissionOptions`. */
const THRESHOLD_FIELD = {
  zeroth: "zerothThreshold",
  first: "firstThreshold",
  second: "secondThreshold",
} as const satisfies Record<TunedPolicy, string>;

/**
 * Where each threshold is searched. Zeroth and first are shares of a capacity (`resolveAdmissionOptions` allows
 * (0, 1]); the search is linear. Second is a probability bound whose margin is sqrt((1 - t) / t) standard deviations,
 * so equal steps in t mean nothing near 0: it is searched on log(t), from 0.001 (31 standard deviations) to 0.999 (its
 * upper end must stay below 1).
 */
const SEARCH: Readonly<Record<TunedPolicy, { lo: number; hi: number; log: boolean }>> = {
  zeroth: { lo: 0.25, hi: 4, log: false },
  first: { lo: 0.25, hi: 1, log: false },
  second: { lo: 0.001, hi: 0.999, log: true },
};

/** Options of {@link runAdmissionExperiment}; {@link resolveAdmissionExperimentOptions} fills the defaults. */
export interface AdmissionExperimentOptions extends ExperimentOutput {
  /**
   * The kill SLA: the largest share of the task-hours run that kills may throw away (`killedTaskHoursFraction`).
   * @default 0.05
   */
  sla?: number;
  /**
   * The policies to tune (the CLI's `--compare` runs all three).
   * @default ["zeroth", "first", "second"]
   */
  policies?: readonly TunedPolicy[];
  /**
   * Servers of the cluster. The default keeps the whole experiment within a few minutes on a 2-core machine.
   * @default 80
   */
  servers?: number;
  /**
   * Days of each period: the tuning runs cover the first `days` after the 30 days of history, the held-out runs the
   * next `days` (the last 12 hours of each take no arrivals, so that late jobs can finish).
   * @default 3
   */
  days?: number;
  /**
   * Offered batch work as a share of each period's harvestable core-hours (`generateJobStream`'s load). Near 1 the
   * harvested cores fill up and kills take off without admission control.
   * @default 1
   */
  load?: number;
  /**
   * The cluster's average primary utilization, %: higher means taller daily swings of the periodic tenants.
   * @default 45
   */
  utilizationPct?: number;
  /** Seeds the cluster, the tuning period's jobs (the held-out jobs use seed + 1) and every run. @default 1 */
  seed?: number;
  /** Binary-search iterations per policy after its two ends (each is one simulated run). @default 5 */
  iterations?: number;
  /**
   * Primary utilization: real traces from ../shared/data (with the Alibaba DAG sample's job shapes beside the TPC-DS
   * ones), falling back to generated ones, with a note, when the folder is absent; or generated.
   * @default "real"
   */
  traces?: TraceSource;
  /** Directory for admission.md, .csv, .json, the plot and admission-thresholds.json; none: render only. */
  out?: string;
  /** The command line, shown in the report and written as the thresholds' `tunedBy`. */
  command?: string;
  /** The clock `tunedAt` is read from. @default systemClock */
  clock?: Clock;
}

/** {@link AdmissionExperimentOptions} with the defaults filled in. */
export type ResolvedAdmissionExperimentOptions = Resolved<AdmissionExperimentOptions>;

/** One run of a policy at one threshold during the search. */
export interface TuningStep {
  threshold: number;
  killedTaskHoursFraction: number;
  harvestedUtilization: number;
}

/** A policy's outcome: its tuned threshold and its runs at that threshold on both periods. */
export interface PolicyOutcome {
  policy: AdmissionPolicy;
  /** The tuned threshold; undefined when even the lowest one searched broke the SLA on the tuning period. */
  threshold: number | undefined;
  /** Every run of the search, in the order run. */
  search: TuningStep[];
  /** The runs at the tuned threshold (for none: with no admission control). */
  tuning?: ComputeRunResult;
  heldOut?: ComputeRunResult;
}

/** The file the resource manager reads (`admissionThresholdsFile`). */
export interface AdmissionThresholdsFile {
  /** The tuned thresholds; a policy whose SLA no threshold met is left out (the resource manager keeps its default). */
  admissionOptions: Partial<Record<"zerothThreshold" | "firstThreshold" | "secondThreshold", number>>;
  sla: number;
  tunedBy: string;
  tunedAt: string;
}

/** What the experiment produced. */
export interface AdmissionExperimentOutcome extends ExperimentReport {
  /** none first, then each tuned policy. */
  policies: PolicyOutcome[];
  thresholds: AdmissionThresholdsFile;
  /** Whether the first and second moment policies beat zeroth on the held-out period, in words. */
  verdict: string;
  wallMs: number;
}

/** Whose options the messages name: INVALID_ARGUMENT "admission experiment option <field> ...". */
const WHAT = "admission experiment";

/** Fills the defaults and validates every field (INVALID_ARGUMENT naming it). */
export function resolveAdmissionExperimentOptions(
  o: AdmissionExperimentOptions = {},
): ResolvedAdmissionExperimentOptions {
  const r: ResolvedAdmissionExperimentOptions = {
    sla: o.sla ?? 0.05,
    policies: TUNED_POLICIES.filter((p) => (o.policies ?? TUNED_POLICIES).includes(p)),
    servers: o.servers ?? 80,
    days: o.days ?? 3,
    load: o.load ?? 1,
    utilizationPct: o.utilizationPct ?? 45,
    seed: o.seed ?? 1,
    iterations: o.iterations ?? 5,
    traces: o.traces ?? "real",
    clock: o.clock ?? systemClock,
    ...outputOptions(o),
  };
  if (!(Number.isFinite(r.sla) && r.sla > 0 && r.sla < 1))
    invalidArgument(WHAT, "sla", `must be a share in (0, 1) (got ${r.sla})`);
  for (const p of o.policies ?? [])
    if (!(TUNED_POLICIES as readonly string[]).includes(p))
      invalidArgument(WHAT, "policies", `has ${JSON.stringify(p)}; use ${TUNED_POLICIES.join(", ")}`);
  if (r.policies.length === 0) invalidArgument(WHAT, "policies", "must name at least one policy");
  checkIntAtLeast(WHAT, "servers", r.servers, 1);
  checkDays(WHAT, r.days, 1);
  checkLoad(WHAT, r.load);
  if (!(Number.isFinite(r.utilizationPct) && r.utilizationPct > 0 && r.utilizationPct < 95))
    invalidArgument(WHAT, "utilizationPct", `must be in (0, 95) % (got ${r.utilizationPct})`);
  if (!(Number.isSafeInteger(r.seed) && r.seed >= 0 && r.seed < 0xffffffff))
    invalidArgument(WHAT, "seed", `must be an integer in 0..4294967294 (got ${r.seed})`);
  if (!(Number.isSafeInteger(r.iterations) && r.iterations >= 0 && r.iterations <= 30))
    invalidArgument(WHAT, "iterations", `must be an integer in 0..30 (got ${r.iterations})`);
  checkTraces(WHAT, r.traces, false);
  return r;
}

/** The two periods of one cluster: [history, history + days) to tune on, the next `days` held out. */
function periods(cluster: SimCluster, days: number): { tuning: SimCluster; heldOut: SimCluster } {
  const split = cluster.historyMs + Math.round(days * DAY_MS);
  return {
    tuning: { ...cluster, horizonMs: split },
    // The held-out period's history is everything before it: the tuning period included, as a resource manager that
    // has run through it would have.
    heldOut: { ...cluster, historyMs: split },
  };
}

/** The compute run's admission option: `policy` at `threshold` (the policy's default threshold when undefined). */
function simAdmission(policy: AdmissionPolicy, threshold: number | undefined): SimAdmissionOptions {
  const admission: SimAdmissionOptions = { policy };
  if (policy !== "none" && threshold !== undefined) admission[THRESHOLD_FIELD[policy]] = threshold;
  return admission;
}

/** Runs the experiment: none, then each policy tuned on the first period and run on both. */
export async function runAdmissionExperiment(
  options: AdmissionExperimentOptions = {},
): Promise<AdmissionExperimentOutcome> {
  const o = resolveAdmissionExperimentOptions(options);
  const started = o.clock.nowMs();
  const wall = performance.now();
  // none on both periods, then per policy its two ends, the iterations and the held-out run (fewer when an end
  // already settles the search).
  const tracker = new RunTracker(2 + o.policies.length * (o.iterations + 3), o.onProgress);
  const traces = await chooseTraces(o.traces, (m) => tracker.note(m));
  tracker.note(
    `generating the cluster: ${o.servers} servers, ${o.utilizationPct} % average primary utilization, ` +
      `30 days of history and 2 x ${o.days} days (${traces.source} traces)`,
  );
  const cluster = generateCluster({
    servers: o.servers,
    days: 2 * o.days,
    seed: o.seed,
    meanPct: o.utilizationPct,
    source: traces.source,
    ...(traces.templates ? { templates: traces.templates } : {}),
  });
  const { tuning, heldOut } = periods(cluster, o.days);
  const source = jobSource(traces.source);
  const tuningJobs = generateJobStream(tuning, { seed: o.seed, load: o.load, source });
  const heldOutJobs = generateJobStream(heldOut, { seed: o.seed + 1, load: o.load, source });
  for (const note of new Set([...tuningJobs.notes, ...heldOutJobs.notes])) tracker.note(`job stream: ${note}`);

  const run = (
    label: string,
    c: SimCluster,
    jobs: JobStream,
    admission: { policy: AdmissionPolicy; threshold?: number },
  ): ComputeRunResult =>
    tracker.track(label, c.historyMs, (onProgress) =>
      runCompute(c, jobs, {
        policy: "stock",
        seed: o.seed,
        killCost: DEFAULT_KILL_COST,
        onProgress,
        progressEvery: 100_000,
        admission: simAdmission(admission.policy, admission.threshold),
      }),
    );

  const noneTuning = run("none, tuning period", tuning, tuningJobs, { policy: "none" });
  const outcomes: PolicyOutcome[] = [
    {
      policy: "none",
      threshold: undefined,
      search: [],
      tuning: noneTuning,
      heldOut: run("none, held-out period", heldOut, heldOutJobs, { policy: "none" }),
    },
  ];
  for (const policy of o.policies) {
    const search: TuningStep[] = [];
    const runs = new Map<number, ComputeRunResult>();
    const { lo, hi, log } = SEARCH[policy];
    const at = (x: number): number => (log ? Math.exp(x) : x);
    const measure = (x: number): number => {
      const threshold = at(x);
      // Markov's bound never exceeds 1 (`markovBound`), so the first-moment policy at threshold 1 admits every job on
      // arrival: its run is the run without admission control, event for event, and is not simulated twice.
      const r =
        policy === "first" && threshold >= 1
          ? noneTuning
          : run(`${policy} ${threshold.toPrecision(3)}, tuning period`, tuning, tuningJobs, { policy, threshold });
      runs.set(x, r);
      search.push({
        threshold,
        killedTaskHoursFraction: r.killedTaskHoursFraction,
        harvestedUtilization: r.harvestedUtilization,
      });
      return r.killedTaskHoursFraction;
    };
    const x = tuneThreshold(measure, o.sla, {
      lo: log ? Math.log(lo) : lo,
      hi: log ? Math.log(hi) : hi,
      iterations: o.iterations,
    });
    const outcome: PolicyOutcome = { policy, threshold: x === undefined ? undefined : at(x), search };
    if (x !== undefined) {
      outcome.tuning = runs.get(x)!;
      outcome.heldOut = run(`${policy} ${at(x).toPrecision(3)}, held-out period`, heldOut, heldOutJobs, {
        policy,
        threshold: at(x),
      });
    } else tracker.note(`${policy}: even the lowest threshold (${lo}) broke the SLA on the tuning period`);
    outcomes.push(outcome);
  }

  const thresholds = thresholdsFile(outcomes, o.sla, o.command ?? "harvest sim admission", started);
  const verdict = verdictOf(outcomes);
  const report = renderAdmissionReport(outcomes, o, traces.source, verdict);
  const files: string[] = [];
  if (o.out !== undefined) {
    files.push(...writeReport(o.out, report));
    files.push(writeJson(join(o.out, `${report.name}.json`), { ...tableJson(outcomes, o), verdict }));
    files.push(writeAdmissionThresholds(o.out, thresholds));
  }
  return {
    policies: outcomes,
    thresholds,
    verdict,
    report,
    files,
    traces: traces.source,
    wallMs: performance.now() - wall,
  };
}

// ------------------------------------------------------------------------------------------------ the thresholds file

/** The thresholds file of tuned `outcomes` (policies without a tuned threshold are left out). */
export function thresholdsFile(
  outcomes: readonly Pick<PolicyOutcome, "policy" | "threshold">[],
  sla: number,
  tunedBy: string,
  tunedAtMs: number,
): AdmissionThresholdsFile {
  const admissionOptions: AdmissionThresholdsFile["admissionOptions"] = {};
  for (const p of outcomes)
    if (p.policy !== "none" && p.threshold !== undefined) admissionOptions[THRESHOLD_FIELD[p.policy]] = p.threshold;
  return { admissionOptions, sla, tunedBy, tunedAt: new Date(tunedAtMs).toISOString() };
}

/** Writes `<outDir>/admission-thresholds.json` (the directory is created if needed); returns its path. */
export function writeAdmissionThresholds(outDir: string, file: AdmissionThresholdsFile): string {
  return writeJson(join(outDir, "admission-thresholds.json"), file);
}

// ------------------------------------------------------------------------------------------------ the report

/** Core-hours secondary containers held and did not lose to kills, over the harvestable ones. */
function usefulUtilization(r: ComputeRunResult): number {
  return r.harvestedUtilization * (1 - r.killedTaskHoursFraction);
}

/**
 * Whether first and second beat zeroth on the held-out period, as seeds/003 finds they do: "clearly" when their
 * harvested utilization is at least 5 % above zeroth's (relative) while both meet the SLA.
 */
function verdictOf(outcomes: readonly PolicyOutcome[]): string {
  const on = (period: "tuning" | "heldOut"): { line: string; clearly: boolean } => {
    const zeroth = outcomes.find((p) => p.policy === "zeroth")?.[period];
    if (!zeroth) return { line: "no tuned zeroth-moment policy to compare with", clearly: false };
    const parts = (["first", "second"] as const).map((policy) => {
      const r = outcomes.find((p) => p.policy === policy)?.[period];
      if (!r) return { text: `${policy}-moment not tuned`, clearly: false };
      const change = (r.harvestedUtilization / zeroth.harvestedUtilization - 1) * 100;
      const word = change >= 5 ? "clearly above" : change > -5 ? "about level with" : "below";
      return {
        text: `${policy}-moment ${formatNumber(r.harvestedUtilization, 3)} (${change >= 0 ? "+" : ""}${change.toFixed(1)} %, ${word})`,
        clearly: change >= 5,
      };
    });
    return {
      line: `zeroth ${formatNumber(zeroth.harvestedUtilization, 3)}, ${parts.map((p) => p.text).join(", ")}`,
      clearly: parts.every((p) => p.clearly),
    };
  };
  const heldOut = on("heldOut");
  const tuning = on("tuning");
  return (
    `seeds/003 finds the first- and second-moment policies clearly (5 % or more) above zeroth; on the held-out period ` +
    `ours ${heldOut.clearly ? "are" : "are not"}: ${heldOut.line} (on the tuning period: ${tuning.line})`
  );
}

const LABEL: Record<AdmissionPolicy, string> = {
  none: "none",
  zeroth: "zeroth moment",
  first: "first moment (Markov)",
  second: "second moment (Cantelli)",
};

function thresholdText(p: PolicyOutcome): string {
  if (p.policy === "none") return "-";
  if (p.threshold === undefined) return "none met the SLA";
  const text = Number(p.threshold.toPrecision(4)).toString();
  // The search's upper end met the SLA: the threshold's range, not the SLA, stopped it.
  return p.threshold >= SEARCH[p.policy].hi ? `${text} (top of range)` : text;
}

/** The table's rows: per policy, the tuned threshold and the figures of both periods. */
function tableRows(outcomes: readonly PolicyOutcome[], sla: number): string[][] {
  const fig = (r: ComputeRunResult | undefined, f: (r: ComputeRunResult) => string): string => (r ? f(r) : "-");
  return outcomes.map((p) => [
    LABEL[p.policy],
    thresholdText(p),
    fig(p.tuning, (r) => formatFraction(r.killedTaskHoursFraction)),
    fig(p.tuning, (r) => formatNumber(r.harvestedUtilization, 3)),
    fig(
      p.heldOut,
      (r) => `${formatFraction(r.killedTaskHoursFraction)}${r.killedTaskHoursFraction <= sla ? "" : " (!)"}`,
    ),
    fig(p.heldOut, (r) => formatNumber(r.harvestedUtilization, 3)),
    fig(p.heldOut, (r) => formatNumber(usefulUtilization(r), 3)),
    fig(p.heldOut, (r) => formatNumber(r.avgJobTimeS / 60, 1)),
    fig(p.heldOut, (r) => formatNumber(r.avgAdmissionWaitS / 60, 1)),
    fig(p.heldOut, jobsCell),
    fig(p.heldOut, (r) => formatNumber(r.jobsRejected)),
    fig(p.heldOut, (r) => formatNumber(r.jobsQueuedAtEnd)),
  ]);
}

const TABLE_COLUMNS = [
  left("policy"),
  right("threshold"),
  right("killed (tuning)"),
  right("utilization (tuning)"),
  right("killed (held out)"),
  right("utilization (held out)"),
  right("useful utilization (held out)"),
  right("job time, min"),
  right("admission wait, min"),
  right("jobs finished / arrived"),
  right("rejected"),
  right("queued at end"),
];

/** The table as JSON: the options and, per policy, the threshold, the search and both runs' figures. */
function tableJson(outcomes: readonly PolicyOutcome[], o: ResolvedAdmissionExperimentOptions): Record<string, unknown> {
  const figures = (r: ComputeRunResult | undefined) =>
    r && {
      killedTaskHoursFraction: r.killedTaskHoursFraction,
      harvestedUtilization: r.harvestedUtilization,
      usefulUtilization: usefulUtilization(r),
      avgJobTimeS: r.avgJobTimeS,
      avgAdmissionWaitS: r.avgAdmissionWaitS,
      jobs: r.jobs,
      jobsSubmitted: r.jobsSubmitted,
      jobsAdmitted: r.jobsAdmitted,
      jobsRejected: r.jobsRejected,
      jobsQueuedAtEnd: r.jobsQueuedAtEnd,
      jobsUnfinished: r.jobsUnfinished,
      taskKills: r.taskKills,
      jobManagerKills: r.jobManagerKills,
      secondaryCoreHours: r.secondaryCoreHours,
      harvestableCoreHours: r.harvestableCoreHours,
      wallMs: r.wallMs,
    };
  return {
    options: {
      sla: o.sla,
      servers: o.servers,
      days: o.days,
      load: o.load,
      utilizationPct: o.utilizationPct,
      seed: o.seed,
      iterations: o.iterations,
    },
    policies: outcomes.map((p) => ({
      policy: p.policy,
      threshold: p.threshold ?? null,
      search: p.search,
      tuning: figures(p.tuning) ?? null,
      heldOut: figures(p.heldOut) ?? null,
    })),
  };
}

/** The report: setup, the Table 2 form, the verdict, every search step, a CSV and the bar plot. */
export function renderAdmissionReport(
  outcomes: readonly PolicyOutcome[],
  o: ResolvedAdmissionExperimentOptions,
  traces: TraceSource,
  verdict: string,
): RenderedReport {
  const setup =
    `${formatNumber(o.servers)} servers at ${o.utilizationPct} % average primary utilization (${traces} traces), ` +
    `stock placement with the modelled kill cost, offered load ${o.load} of the harvestable core-hours; kill SLA ` +
    `${formatFraction(o.sla)} of the task-hours run. Thresholds tuned by binary search (${o.iterations} iterations ` +
    `after both ends) on the tuning period: the ${o.days} days after 30 days of history, job seed ${o.seed}. ` +
    `Evaluated on the held-out period: the next ${o.days} days of the same cluster, job seed ${o.seed + 1} (jobs the ` +
    `tuning never saw)`;
  const table = markdownTable(TABLE_COLUMNS, tableRows(outcomes, o.sla));
  const summary = [
    "Harvested utilization per admission policy at the kill SLA (the form of seeds/003, Table 2):",
    "",
    table,
    "",
    "killed: core-hours of killed containers (from grant to kill) over the core-hours all secondary containers held. " +
      "utilization: core-hours secondary containers held over the harvestable core-hours (capacity - primary - " +
      "reserve). useful utilization: utilization x (1 - killed). Job time counts from arrival (the admission wait " +
      "included), over the jobs finished by the end of the period; when more work arrives than a policy admits, the " +
      "queue grows all period and job time and wait measure that backlog, and utilization is the figure to compare. " +
      "(!): the held-out period broke the SLA.",
    "",
    verdict + ".",
  ].join("\n");
  const searchRows = outcomes.flatMap((p) =>
    p.search.map((s) => [
      LABEL[p.policy],
      Number(s.threshold.toPrecision(4)).toString(),
      formatFraction(s.killedTaskHoursFraction),
      formatNumber(s.harvestedUtilization, 3),
      s.killedTaskHoursFraction <= o.sla ? "yes" : "no",
    ]),
  );
  const runsTable =
    "Every run of the threshold search, on the tuning period:\n\n" +
    markdownTable(
      [left("policy"), right("threshold"), right("killed"), right("utilization"), left("meets the SLA")],
      searchRows,
    );
  const csv = toCsv(
    TABLE_COLUMNS.map((c) => c.header),
    tableRows(outcomes, o.sla),
  );
  const categories = outcomes.map((p) => p.policy);
  const plot = barPlot("utilization", {
    title: `Admission control at a ${formatFraction(o.sla)} kill SLA`,
    yName: "",
    panels: [
      {
        title: "harvested utilization",
        categories,
        series: [
          { name: "tuning period", values: outcomes.map((p) => p.tuning?.harvestedUtilization) },
          { name: "held-out period", values: outcomes.map((p) => p.heldOut?.harvestedUtilization) },
        ],
      },
      {
        title: "killed share of the task-hours (%)",
        categories,
        series: [
          { name: "tuning period", values: outcomes.map((p) => pct(p.tuning?.killedTaskHoursFraction)) },
          { name: "held-out period", values: outcomes.map((p) => pct(p.heldOut?.killedTaskHoursFraction)) },
        ],
      },
    ],
  });
  return assembleReport(
    "admission",
    "Admission control (seeds/003): harvested utilization at a kill SLA",
    setup,
    o.command !== undefined ? { command: o.command } : {},
    { summary, runsTable, csv, plots: [{ ...plot, title: "Utilization and kills per policy" }] },
  );
}

function pct(v: number | undefined): number | undefined {
  return v === undefined ? undefined : v * 100;
}
