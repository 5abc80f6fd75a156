/**
 * How well survival quotes are calibrated: jobs bucketed by their quoted probability of finishing with no task
 * killed (deciles of the probability), each bucket's mean quote against the share of its jobs that had no kill (a
 * reliability table), the Brier score beside that of a constant forecast (the overall kill-free share), the quoted
 * against the observed re-runs, and how often the completion time fell inside the quoted band.
 */
import type { QuotedJob } from "./quote-recorder.js";

/** One decile of quoted probability. */
export interface ReliabilityBucket {
  /** [lo, hi) of the quoted probability (the last bucket includes 1). */
  lo: number;
  hi: number;
  jobs: number;
  /** Mean quoted P(no kill) of its jobs (NaN for none). */
  meanQuoted: number;
  /** Share of its jobs with no task killed (NaN for none). */
  observed: number;
  /** Mean quoted and observed re-runs per job. */
  meanQuotedReruns: number;
  meanObservedReruns: number;
}

/** The calibration figures of a set of finished quoted jobs. */
export interface Calibration {
  jobs: number;
  /** Share of jobs that finished with no task killed. */
  killFreeShare: number;
  /** Mean (quoted P - outcome)^2, outcome 1 for no kill. */
  brier: number;
  /** The Brier score of always quoting `killFreeShare`: killFreeShare x (1 - killFreeShare). */
  baselineBrier: number;
  /** 1 - brier / baselineBrier (positive: the quote beats the constant). */
  skill: number;
  buckets: ReliabilityBucket[];
  /** Total quoted and observed re-runs. */
  quotedReruns: number;
  observedReruns: number;
  /** Share of jobs that finished by their quoted p10, p50 and p90 (ideally 0.1, 0.5, 0.9). */
  byP10: number;
  byP50: number;
  byP90: number;
}

/** The figures over the finished jobs of `jobs` (unfinished ones have no outcome and are left out). */
export function calibrationOf(jobs: Iterable<QuotedJob>): Calibration {
  const done = [...jobs].filter((j) => j.durationMs !== undefined);
  const n = done.length;
  const buckets: ReliabilityBucket[] = [];
  for (let b = 0; b < 10; b++) {
    const lo = b / 10;
    const hi = (b + 1) / 10;
    const members = done.filter((j) => bucketOf(j.quote.pNoKill) === b);
    buckets.push({
      lo,
      hi,
      jobs: members.length,
      meanQuoted: mean(members.map((j) => j.quote.pNoKill)),
      observed: mean(members.map((j) => (j.kills === 0 ? 1 : 0))),
      meanQuotedReruns: mean(members.map((j) => j.quote.expectedReruns)),
      meanObservedReruns: mean(members.map((j) => j.kills)),
    });
  }
  const killFree = mean(done.map((j) => (j.kills === 0 ? 1 : 0)));
  const brier = mean(done.map((j) => (j.quote.pNoKill - (j.kills === 0 ? 1 : 0)) ** 2));
  const baselineBrier = killFree * (1 - killFree);
  const share = (q: (j: QuotedJob) => number): number => mean(done.map((j) => (j.durationMs! <= q(j) ? 1 : 0)));
  return {
    jobs: n,
    killFreeShare: killFree,
    brier,
    baselineBrier,
    skill: baselineBrier > 0 ? 1 - brier / baselineBrier : Number.NaN,
    buckets,
    quotedReruns: done.reduce((a, j) => a + j.quote.expectedReruns, 0),
    observedReruns: done.reduce((a, j) => a + j.kills, 0),
    byP10: share((j) => j.quote.etaP10Ms),
    byP50: share((j) => j.quote.etaP50Ms),
    byP90: share((j) => j.quote.etaP90Ms),
  };
}

/** The decile of a probability: 0 for [0, 0.1), ..., 9 for [0.9, 1]. */
export function bucketOf(p: number): number {
  return Math.min(9, Math.max(0, Math.floor(p * 10)));
}

function mean(xs: readonly number[]): number {
  return xs.length > 0 ? xs.reduce((a, x) => a + x, 0) / xs.length : Number.NaN;
}
