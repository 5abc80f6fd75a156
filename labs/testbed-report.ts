/**
 * The report of `harvest sim validate`: the testbed's and the simulator's average job time and kills side by side for
 * stock and history, each side's history-vs-stock change, their difference in percentage points against the 5-point
 * target, and what the testbed measured that bears on the gap. Pure: figures in, text and JSON out.
 */
import { SeededRng } from "../common/rng.js";
import { table } from "../common/text-table.js";
import type { TestbedMeasurements, TestbedPolicy, TestbedRun } from "./testbed.js";
import type { PlannedVertex, TestbedPlan } from "./testbed-plan.js";
import type { SimRun, SimSettings } from "./testbed-sim.js";
import { CALIBRATION_HEADER, calibrationRows, testbedCalibration } from "./testbed-quotes.js";
import type { Calibration } from "../sim/experiments/calibration/calibration.js";

/** The simulator's history-vs-stock change in average job time must be within this many points of the testbed's. */
export const TARGET_PP = 5;

/** A figure under both policies and the history-vs-stock change (%; NaN when stock is 0). */
export interface PolicyPair {
  stock: number;
  history: number;
  changePct: number;
  /** 90 % bootstrap interval of the change over the jobs (paired by job), for job times. */
  changeCi90Pct?: [number, number];
}

/** One compared figure: the testbed's, the simulator's, and simulator minus testbed in percentage points. */
export interface ComparedFigure {
  testbed: PolicyPair;
  simulator: PolicyPair;
  diffPp: number;
}

/** A recurring job's average time per policy on both sides, testbed seconds. */
export interface JobNameRow {
  name: string;
  runs: number;
  /** The types the resource manager gave its runs under history (e.g. "medium 1, long 4"). */
  types: string;
  testbedStockS: number;
  testbedHistoryS: number;
  simStockS: number;
  simHistoryS: number;
}

/** Everything the validation found (the JSON written with --json). */
export interface ValidationReport {
  command: string;
  plan: {
    servers: number;
    vcoresPerServer: number;
    traces: string;
    stepSec: number;
    speedup: number;
    historyDays: number;
    minutesPerPolicy: number;
    seed: number;
    jobs: number;
    recurringJobs: number;
    tasks: number;
    offeredLoad: number;
  };
  servers: { nodeId: string; trace: string; pattern: string }[];
  jobTime: ComparedFigure;
  taskKills: ComparedFigure;
  jobManagerKills: { testbed: PolicyPair; simulator: PolicyPair };
  jobsFinished: { testbed: PolicyPair; simulator: PolicyPair };
  jobsSubmitted: { testbed: PolicyPair; simulator: PolicyPair };
  /** Whether the job-time change is within TARGET_PP, and by how much it is off. */
  withinTarget: boolean;
  measured: Record<TestbedPolicy, Omit<TestbedMeasurements, "launchSamplesMs" | "jobManagerLaunchSamplesMs">>;
  simulatorSettings: SimSettings;
  classes: { testbed: Record<TestbedPolicy, string[]>; simulator: string[] };
  jobNames: JobNameRow[];
  /** Measured facts that bear on the gap, in words. */
  findings: string[];
  /** The resource manager's survival quotes against what happened, per testbed run (labs/testbed-quotes.ts). */
  quotes: Record<TestbedPolicy, Calibration>;
  wall: { testbedStockS: number; testbedHistoryS: number; simulatorS: number; loadAverage1m: number[] };
}

/** Builds the report from the plan, both testbed runs and both simulator runs. */
export function buildReport(
  plan: TestbedPlan,
  testbed: Record<TestbedPolicy, TestbedRun>,
  sim: Record<TestbedPolicy, SimRun>,
  extra: { command: string; loadAverage1m: number[] },
): ValidationReport {
  const finishedMs = (r: TestbedRun): number[] => r.jobs.map((j) => (j.state === "FINISHED" ? j.durationMs : NaN));
  const tb = { stock: finishedMs(testbed.stock), history: finishedMs(testbed.history) };
  const sm = { stock: sim.stock.durationsMs, history: sim.history.durationsMs };
  const jobTime = compared(
    pair(mean(tb.stock) / 1000, mean(tb.history) / 1000, changeCi(tb.stock, tb.history, plan.options.seed)),
    pair(sim.stock.avgJobTimeS, sim.history.avgJobTimeS, changeCi(sm.stock, sm.history, plan.options.seed)),
  );
  const kills = (r: TestbedRun): number => r.jobs.reduce((a, j) => a + j.taskKills, 0);
  const amKills = (r: TestbedRun): number => r.jobs.reduce((a, j) => a + j.amKills, 0);
  const taskKills = compared(
    pair(kills(testbed.stock), kills(testbed.history)),
    pair(sim.stock.taskKills, sim.history.taskKills),
  );
  const withinTarget = Math.abs(jobTime.diffPp) <= TARGET_PP;
  const strip = (m: TestbedMeasurements): ValidationReport["measured"]["stock"] => {
    const { launchSamplesMs: _l, jobManagerLaunchSamplesMs: _j, ...rest } = m;
    return rest;
  };
  const report: ValidationReport = {
    command: extra.command,
    plan: {
      servers: plan.servers.length,
      vcoresPerServer: plan.options.vcores,
      traces: plan.source,
      stepSec: plan.stepSec,
      speedup: plan.options.speedup,
      historyDays: plan.options.historyDays,
      minutesPerPolicy: plan.options.minutes,
      seed: plan.options.seed,
      jobs: plan.jobs.length,
      recurringJobs: new Set(plan.jobs.map((j) => j.name)).size,
      tasks: plan.jobs.reduce((a, j) => a + j.vertices.reduce((b, v) => b + v.tasks, 0), 0),
      offeredLoad: plan.harvestableCoreMs > 0 ? plan.offeredCoreMs / plan.harvestableCoreMs : NaN,
    },
    servers: plan.servers.map((s) => ({ nodeId: s.nodeId, trace: s.label, pattern: s.pattern })),
    jobTime,
    taskKills,
    jobManagerKills: {
      testbed: pair(amKills(testbed.stock), amKills(testbed.history)),
      simulator: pair(sim.stock.jobManagerKills, sim.history.jobManagerKills),
    },
    jobsFinished: {
      testbed: pair(testbed.stock.jobsFinished, testbed.history.jobsFinished),
      simulator: pair(sim.stock.jobsFinished, sim.history.jobsFinished),
    },
    jobsSubmitted: {
      testbed: pair(testbed.stock.jobsSubmitted, testbed.history.jobsSubmitted),
      simulator: pair(sim.stock.jobsSubmitted, sim.history.jobsSubmitted),
    },
    withinTarget,
    measured: { stock: strip(testbed.stock.measured), history: strip(testbed.history.measured) },
    simulatorSettings: sim.stock.settings,
    classes: {
      testbed: { stock: testbed.stock.classes, history: testbed.history.classes },
      simulator: sim.history.classes,
    },
    jobNames: jobNameRows(plan, testbed, sim),
    findings: [],
    quotes: { stock: testbedCalibration(testbed.stock.jobs), history: testbedCalibration(testbed.history.jobs) },
    wall: {
      testbedStockS: testbed.stock.wallMs / 1000,
      testbedHistoryS: testbed.history.wallMs / 1000,
      simulatorS: (sim.stock.wallMs + sim.history.wallMs) / 1000,
      loadAverage1m: extra.loadAverage1m,
    },
  };
  report.findings = findings(
    report,
    testbed,
    sm,
    plan.jobs.map((j) => depthOf(j.vertices)),
  );
  return report;
}

function pair(stock: number, history: number, changeCi90Pct?: [number, number]): PolicyPair {
  return { stock, history, changePct: pctChange(stock, history), ...(changeCi90Pct ? { changeCi90Pct } : {}) };
}

function compared(testbed: PolicyPair, simulator: PolicyPair): ComparedFigure {
  return { testbed, simulator, diffPp: simulator.changePct - testbed.changePct };
}

function pctChange(stock: number, history: number): number {
  return stock > 0 ? ((history - stock) / stock) * 100 : NaN;
}

/** The mean of the finite values (NaN when none). */
function mean(values: readonly number[]): number {
  let sum = 0;
  let n = 0;
  for (const v of values)
    if (Number.isFinite(v)) {
      sum += v;
      n++;
    }
  return n > 0 ? sum / n : NaN;
}

/**
 * A 90 % bootstrap interval of the change in mean job time: jobs resampled with replacement, each job's stock and
 * history times kept together (both policies ran the same schedule), 1,000 resamples seeded by the plan.
 */
function changeCi(stock: readonly number[], history: readonly number[], seed: number): [number, number] | undefined {
  const n = Math.min(stock.length, history.length);
  if (n < 5) return undefined;
  const rng = new SeededRng(seed ^ 0xb007);
  const changes: number[] = [];
  for (let b = 0; b < 1000; b++) {
    let s = 0;
    let h = 0;
    let ns = 0;
    let nh = 0;
    for (let i = 0; i < n; i++) {
      const k = rng.int(n);
      if (Number.isFinite(stock[k]!)) {
        s += stock[k]!;
        ns++;
      }
      if (Number.isFinite(history[k]!)) {
        h += history[k]!;
        nh++;
      }
    }
    if (ns > 0 && nh > 0) changes.push(pctChange(s / ns, h / nh));
  }
  changes.sort((a, b) => a - b);
  if (changes.length < 100) return undefined;
  return [changes[Math.floor(0.05 * changes.length)]!, changes[Math.ceil(0.95 * changes.length) - 1]!];
}

function jobNameRows(
  plan: TestbedPlan,
  testbed: Record<TestbedPolicy, TestbedRun>,
  sim: Record<TestbedPolicy, SimRun>,
): JobNameRow[] {
  const names = [...new Set(plan.jobs.map((j) => j.name))].sort();
  return names.map((name) => {
    const idx = plan.jobs.flatMap((j, i) => (j.name === name ? [i] : []));
    const tbMean = (r: TestbedRun): number =>
      mean(r.jobs.filter((j) => j.name === name && j.state === "FINISHED").map((j) => j.durationMs)) / 1000;
    const types = new Map<string, number>();
    for (const j of testbed.history.jobs)
      if (j.name === name && j.jobType) types.set(j.jobType, (types.get(j.jobType) ?? 0) + 1);
    return {
      name,
      runs: idx.length,
      types: [...types].map(([t, n]) => `${t} ${n}`).join(", "),
      testbedStockS: tbMean(testbed.stock),
      testbedHistoryS: tbMean(testbed.history),
      simStockS: mean(idx.map((i) => sim.stock.durationsMs[i]!)) / 1000,
      simHistoryS: mean(idx.map((i) => sim.history.durationsMs[i]!)) / 1000,
    };
  });
}

/**
 * The mean of testbed minus simulated time over the jobs both finished, per DAG depth (vertices on the longest path),
 * testbed seconds: an overhead per job and per stage that the simulator does not have shows here.
 */
function excessByDepth(
  jobs: number,
  run: TestbedRun,
  simMs: readonly number[],
  depths: readonly number[],
): { depth: number; excessS: number }[] {
  const sums = new Map<number, { sum: number; n: number }>();
  for (let i = 0; i < jobs; i++) {
    const t = run.jobs[i];
    const s = simMs[i]!;
    if (!t || t.state !== "FINISHED" || !Number.isFinite(s)) continue;
    const d = depths[i]!;
    const acc = sums.get(d) ?? { sum: 0, n: 0 };
    acc.sum += t.durationMs - s;
    acc.n++;
    sums.set(d, acc);
  }
  return [...sums].sort((a, b) => a[0] - b[0]).map(([depth, { sum, n }]) => ({ depth, excessS: sum / n / 1000 }));
}

/** Vertices on a planned job's longest path. */
function depthOf(vertices: readonly PlannedVertex[]): number {
  const depth = new Map<string, number>();
  for (const v of vertices) depth.set(v.name, 1 + Math.max(0, ...v.inputs.map((i) => depth.get(i) ?? 0)));
  return Math.max(...depth.values());
}

/** Measured facts that bear on the gap between the two changes. */
function findings(
  r: ValidationReport,
  testbed: Record<TestbedPolicy, TestbedRun>,
  simDurations: Record<TestbedPolicy, readonly number[]>,
  depths: readonly number[],
): string[] {
  const out: string[] = [];
  const jt = r.jobTime;
  const gap = jt.diffPp;
  out.push(
    Number.isFinite(gap)
      ? Math.abs(gap) <= TARGET_PP
        ? `The simulator's history-vs-stock change in average job time (${signed(jt.simulator.changePct)}) is within ` +
          `${TARGET_PP} pp of the testbed's (${signed(jt.testbed.changePct)}): ${Math.abs(gap).toFixed(1)} pp apart.`
        : `The simulator's history-vs-stock change in average job time (${signed(jt.simulator.changePct)}) is off by ` +
          `${Math.abs(gap).toFixed(1)} pp from the testbed's (${signed(jt.testbed.changePct)}); the target is ${TARGET_PP} pp.`
      : "The job-time change could not be compared: a side finished no jobs under a policy.",
  );
  const ci = jt.testbed.changeCi90Pct;
  if (ci)
    out.push(
      `Sampling noise: over these ${r.plan.jobs} jobs the testbed's change has a 90 % bootstrap interval of ` +
        `${signed(ci[0])} to ${signed(ci[1])}` +
        (Number.isFinite(jt.simulator.changePct) && jt.simulator.changePct >= ci[0] && jt.simulator.changePct <= ci[1]
          ? ", which holds the simulator's change."
          : ", which does not hold the simulator's change."),
    );
  for (const policy of ["stock", "history"] as const) {
    const t = jt.testbed[policy];
    const s = jt.simulator[policy];
    if (Number.isFinite(t) && Number.isFinite(s))
      out.push(
        `${policy}: testbed jobs averaged ${t.toFixed(1)} s, simulated ${s.toFixed(1)} s ` +
          `(${signed(((s - t) / t) * 100)}); task kills ${r.taskKills.testbed[policy]} on the testbed ` +
          `(${testbed[policy].jobs.reduce((a, j) => a + j.tasksLostWithJobManager, 0)} of them lost with a killed job ` +
          `manager), ${r.taskKills.simulator[policy]} simulated; job-manager kills ` +
          `${r.jobManagerKills.testbed[policy]} and ${r.jobManagerKills.simulator[policy]}.`,
      );
  }
  for (const policy of ["stock", "history"] as const) {
    const excess = excessByDepth(r.plan.jobs, testbed[policy], simDurations[policy], depths);
    if (excess.length > 0)
      out.push(
        `${policy}: the testbed took longer than the simulator by ` +
          excess
            .map((e) => `${e.excessS.toFixed(1)} s a job of ${e.depth} vert${e.depth > 1 ? "ices" : "ex"}`)
            .join(", ") +
          " (paired by job, mean).",
      );
  }
  // A fixed per-job overhead the simulator misses dilutes the testbed's relative change.
  const simDeltaS = jt.simulator.history - jt.simulator.stock;
  if (Number.isFinite(simDeltaS) && jt.testbed.stock > 0)
    out.push(
      `The simulator's change is ${signed(simDeltaS, " s")} a job; over the testbed's stock average that is ` +
        `${signed((simDeltaS / jt.testbed.stock) * 100)} (what the testbed would show if only a fixed per-job overhead ` +
        "the simulator does not model set them apart).",
    );
  const m = testbed.stock.measured;
  out.push(
    `Measured on the testbed (stock run): launch median ${ms(m.launch.medianMs)}, p90 ${ms(m.launch.p90Ms)}; ` +
      `grant to container start median ${ms(m.pickup.medianMs)}; job manager start to registered median ` +
      `${ms(m.jobManagerLaunch.medianMs)} (p90 ${ms(m.jobManagerLaunch.p90Ms)}); submission to first task grant ` +
      `median ${ms(m.submitToFirstTask.medianMs)}; kills ${ms(m.killAfterStep.medianMs)} after the primary's step ` +
      `(median, p90 ${ms(m.killAfterStep.p90Ms)}).`,
  );
  const simClasses = r.classes.simulator.join("; ");
  const rmClasses = r.classes.testbed.history.join("; ");
  out.push(
    simClasses === rmClasses
      ? `The simulator built the resource manager's classes: ${rmClasses || "(none)"}.`
      : `The classes differ: resource manager ${rmClasses || "(none)"}; simulator ${simClasses || "(none)"}.`,
  );
  const unfinished = (["stock", "history"] as const).filter(
    (p) => r.jobsFinished.testbed[p] < r.jobsSubmitted.testbed[p],
  );
  if (unfinished.length > 0)
    out.push(`Testbed jobs left unfinished at the deadline (killed): ${unfinished.join(", ")}.`);
  if (r.wall.loadAverage1m.some((l) => l > 2))
    out.push(
      `The machine was shared: its 1-minute load average was ${r.wall.loadAverage1m.map((l) => l.toFixed(1)).join(", ")} ` +
        "(2 cores) when the runs ended, which slows launches and job managers on the testbed only.",
    );
  return out;
}

// ------------------------------------------------------------------------------------------------ text

function signed(v: number, unit = "%"): string {
  if (!Number.isFinite(v)) return "-";
  return `${v > 0 ? "+" : ""}${v.toFixed(1)}${unit}`;
}

function ms(v: number): string {
  return Number.isFinite(v) ? `${Math.round(v)} ms` : "-";
}

function num(v: number, digits = 1): string {
  return Number.isFinite(v) ? v.toFixed(digits) : "-";
}

function pp(v: number): string {
  return Number.isFinite(v) ? `${v > 0 ? "+" : ""}${v.toFixed(1)} pp` : "-";
}

function ci(p: PolicyPair): string {
  return p.changeCi90Pct ? ` [${signed(p.changeCi90Pct[0])}, ${signed(p.changeCi90Pct[1])}]` : "";
}

/** The side-by-side rows: figure, testbed stock/history/change, simulator stock/history/change, difference. */
function comparisonRows(r: ValidationReport): string[][] {
  const count = (p: PolicyPair, of: PolicyPair): [string, string] => [
    `${p.stock}/${of.stock}`,
    `${p.history}/${of.history}`,
  ];
  return [
    [
      "avg job time (s)",
      num(r.jobTime.testbed.stock),
      num(r.jobTime.testbed.history),
      signed(r.jobTime.testbed.changePct) + ci(r.jobTime.testbed),
      num(r.jobTime.simulator.stock),
      num(r.jobTime.simulator.history),
      signed(r.jobTime.simulator.changePct) + ci(r.jobTime.simulator),
      pp(r.jobTime.diffPp),
    ],
    [
      "task kills",
      String(r.taskKills.testbed.stock),
      String(r.taskKills.testbed.history),
      signed(r.taskKills.testbed.changePct),
      String(r.taskKills.simulator.stock),
      String(r.taskKills.simulator.history),
      signed(r.taskKills.simulator.changePct),
      pp(r.taskKills.diffPp),
    ],
    [
      "job-manager kills",
      String(r.jobManagerKills.testbed.stock),
      String(r.jobManagerKills.testbed.history),
      "",
      String(r.jobManagerKills.simulator.stock),
      String(r.jobManagerKills.simulator.history),
      "",
      "",
    ],
    [
      "jobs finished",
      ...count(r.jobsFinished.testbed, r.jobsSubmitted.testbed),
      "",
      ...count(r.jobsFinished.simulator, r.jobsSubmitted.simulator),
      "",
      "",
    ],
  ];
}

const HEADER = [
  "",
  "testbed stock",
  "testbed history",
  "change",
  "sim stock",
  "sim history",
  "change",
  "sim - testbed",
];

function settingsLines(r: ValidationReport): string[] {
  const k = r.simulatorSettings.killCost;
  return [
    `yield tick ${k.yieldTickMs} ms, heartbeat ${k.heartbeatIntervalMs} ms, job-manager allocate period ${k.amHeartbeatMs} ms, ` +
      `launch median ${k.launchMedianMs} ms / p90 ${k.launchP90Ms} ms, job-manager container ${k.jobManagerMilli} milli-cores, ` +
      `throttle slowdown ${k.throttleSlowdown ? "on" : "off"}; reserve ${r.simulatorSettings.reserveFraction}, ` +
      `class wait ${r.simulatorSettings.classWaitMs} ms, retry ${r.simulatorSettings.retryIntervalMs} ms, ` +
      `slots of ${num(r.simulatorSettings.slotMs, 0)} ms (all testbed time; the simulator runs them x ${r.plan.speedup})`,
  ];
}

function setupLine(r: ValidationReport): string {
  const p = r.plan;
  return (
    `${p.servers} servers x ${p.vcoresPerServer} cores, ${p.traces} traces (${p.stepSec} s steps at ${p.speedup}x: ` +
    `${num(p.stepSec / p.speedup, 2)} s each, after ${p.historyDays} days of registered history), ` +
    `${p.jobs} jobs of ${p.recurringJobs} recurring DAGs (${p.tasks} tasks, offered load ${num(p.offeredLoad, 2)}), ` +
    `${p.minutesPerPolicy} testbed minutes per policy, seed ${p.seed}`
  );
}

/** The report as the terminal shows it. */
export function reportText(r: ValidationReport, files: readonly string[]): string {
  const lines = [
    "Simulator validation against a real loopback cluster",
    setupLine(r),
    "",
    table(HEADER, comparisonRows(r)),
    "",
    ...r.findings,
    "",
    "Simulator configured as the testbed ran: " + settingsLines(r).join(""),
    "",
    table(...jobTable(r)),
    "",
    "Survival quotes made at submission against what happened (finished jobs):",
    table(CALIBRATION_HEADER, calibrationRows(r.quotes)),
    "",
    `wall time: testbed ${num(r.wall.testbedStockS, 0)} s (stock) + ${num(r.wall.testbedHistoryS, 0)} s (history), ` +
      `simulator ${num(r.wall.simulatorS, 1)} s`,
  ];
  if (files.length > 0) lines.push(`wrote ${files.join(", ")}`);
  return lines.join("\n");
}

function mdTable(header: string[], rows: (string | number)[][]): string {
  const esc = (c: string | number): string => String(c).replace(/\|/g, "\\|");
  return [
    `| ${header.map(esc).join(" | ")} |`,
    `| ${header.map(() => "---").join(" | ")} |`,
    ...rows.map((row) => `| ${row.map(esc).join(" | ")} |`),
  ].join("\n");
}

/** The report as markdown (`validation.md`). */
export function reportMarkdown(r: ValidationReport): string {
  const m = (p: TestbedPolicy): string[] => {
    const x = r.measured[p];
    const s = (st: { count: number; medianMs: number; p90Ms: number }): string =>
      `${ms(st.medianMs)} / ${ms(st.p90Ms)} (${st.count})`;
    return [
      p,
      `${x.yieldTickMs} ms`,
      `${x.heartbeatIntervalMs} ms`,
      s(x.launch),
      s(x.pickup),
      s(x.jobManagerLaunch),
      s(x.submitToFirstTask),
      s(x.killAfterStep),
    ];
  };
  return [
    "# Simulator validation against a real loopback cluster",
    "",
    `Made by \`${r.command}\`.`,
    "",
    setupLine(r) + ".",
    "",
    mdTable(HEADER, comparisonRows(r)),
    "",
    `Target: the simulator's history-vs-stock change in average job time within ${TARGET_PP} percentage points of the ` +
      `testbed's: **${r.withinTarget ? "met" : `missed by ${num(Math.abs(r.jobTime.diffPp) - TARGET_PP)} pp`}** ` +
      `(${num(Math.abs(r.jobTime.diffPp))} pp apart). Changes in brackets: 90 % bootstrap intervals over the jobs.`,
    "",
    "## Findings",
    "",
    ...r.findings.map((f) => `- ${f}`),
    "",
    "## What the testbed measured (median / p90 (samples))",
    "",
    mdTable(
      [
        "run",
        "yield tick",
        "heartbeat",
        "launch (NM start to task running)",
        "grant to NM start",
        "job manager start to registered",
        "submission to first task grant",
        "kill after the primary's step",
      ],
      (["stock", "history"] as const).map(m),
    ),
    "",
    "The simulator ran with: " + settingsLines(r).join(""),
    "",
    "## Recurring jobs (average seconds)",
    "",
    mdTable(...jobTable(r)),
    "",
    "## Survival quotes on the testbed",
    "",
    "The resource manager's quote at submission (`harvest job status`) against what happened to each finished job: " +
      "the Brier score of P(no kill) beside that of always quoting the run's kill-free share, the quoted and seen " +
      "task re-runs, and the share of jobs done by their quoted p10, p50 and p90 (ideally 10, 50 and 90 %).",
    "",
    mdTable(CALIBRATION_HEADER, calibrationRows(r.quotes)),
    "",
    "## Servers and classes",
    "",
    mdTable(
      ["server", "primary trace", "pattern of its history"],
      r.servers.map((s) => [s.nodeId, s.trace, s.pattern]),
    ),
    "",
    `Resource manager's classes (history run): ${r.classes.testbed.history.join("; ") || "(none)"}; simulator's: ` +
      `${r.classes.simulator.join("; ") || "(none)"}.`,
    "",
    `Wall time: testbed ${num(r.wall.testbedStockS, 0)} s (stock) and ${num(r.wall.testbedHistoryS, 0)} s (history), ` +
      `simulator ${num(r.wall.simulatorS, 1)} s.`,
    "",
  ].join("\n");
}

/** The per-recurring-job table's header and rows (average seconds), for the text and the markdown reports. */
function jobTable(r: ValidationReport): [string[], (string | number)[][]] {
  return [
    ["recurring job", "runs", "types (history)", "testbed stock", "testbed history", "sim stock", "sim history"],
    r.jobNames.map((j) => [
      j.name,
      j.runs,
      j.types || "-",
      num(j.testbedStockS),
      num(j.testbedHistoryS),
      num(j.simStockS),
      num(j.simHistoryS),
    ]),
  ];
}
