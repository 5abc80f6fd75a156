/**
 * The survival quotes of the testbed's jobs against what happened to them: the resource manager quotes every job at
 * submission (resourcemanager/policy/survival-quote.ts) and the testbed knows each job's kills and time, so the same
 * calibration figures as the simulator's (`harvest sim calibration`) are printed for a real cluster. A job counts as
 * killed when the primary killed any of its task containers or its job manager.
 */
import { calibrationOf } from "../sim/experiments/calibration/calibration.js";
import type { Calibration } from "../sim/experiments/calibration/calibration.js";
import type { QuotedJob } from "../sim/experiments/calibration/quote-recorder.js";
import type { TestbedJob } from "./testbed.js";

/** The quoted, finished jobs of a run as the calibration reads them. */
export function quotedJobs(jobs: readonly TestbedJob[]): QuotedJob[] {
  const out: QuotedJob[] = [];
  jobs.forEach((j, i) => {
    if (!j.quote) return;
    out.push({
      id: i,
      name: j.name,
      submitMs: j.submitMs,
      quote: { ...j.quote, killsPerHour: 0, basis: "" },
      kills: j.taskKills + j.amKills,
      ...(j.state === "FINISHED" && Number.isFinite(j.durationMs) ? { durationMs: j.durationMs } : {}),
    });
  });
  return out;
}

/** The calibration of a run's quotes (over its finished quoted jobs). */
export function testbedCalibration(jobs: readonly TestbedJob[]): Calibration {
  return calibrationOf(quotedJobs(jobs));
}

/** One row per policy: jobs, mean quote, kill-free share, Brier score against the constant, ETA coverage. */
export function calibrationRows(byPolicy: Record<string, Calibration>): (string | number)[][] {
  const f = (x: number, d = 2): string => (Number.isFinite(x) ? x.toFixed(d) : "-");
  const pct = (x: number): string => (Number.isFinite(x) ? `${Math.round(x * 100)} %` : "-");
  return Object.entries(byPolicy).map(([policy, c]) => {
    const quoted = c.buckets.reduce((a, b) => a + (b.jobs > 0 ? b.meanQuoted * b.jobs : 0), 0) / (c.jobs || NaN);
    return [
      policy,
      c.jobs,
      f(quoted),
      f(c.killFreeShare),
      f(c.brier, 4),
      f(c.baselineBrier, 4),
      `${f(c.quotedReruns, 1)} / ${c.observedReruns}`,
      `${pct(c.byP10)} / ${pct(c.byP50)} / ${pct(c.byP90)}`,
    ];
  });
}

/** The header of `calibrationRows`. */
export const CALIBRATION_HEADER = [
  "run",
  "quoted jobs",
  "mean P(no kill)",
  "kill-free share",
  "Brier",
  "Brier of the constant",
  "re-runs quoted / seen",
  "done by p10 / p50 / p90",
];
