/**
 * Is a primary tenant user-facing (latency-critical)? The pattern-matching test of seeds/000 section III-B: extract a
 * typical-day template and check how well it captures most days, compared with 8-hour and 12-hour templates (Compare8,
 * Compare12). Also what the tenant registry makes of one tenant's history (`tenantHistoryVerdict`: its average server,
 * features with the peak, and this verdict), so the registry and the simulator derive both alike. Pure: no I/O, no
 * clock.
 */
import { optionResolution } from "../../common/options.js";
import type { UtilizationSeries } from "../../common/trace-io.js";
import { resample } from "../../common/trace-io.js";
import { averageServerSeries } from "./average-server.js";
import { tenantFeatures } from "./classifier.js";
import type { ClassifierOptions } from "./classifier-options.js";
import type { TenantFeatures } from "./classifier.js";

const HOUR_MS = 3_600_000;

/** Options of `criticality`. */
export interface CriticalityOptions {
  /**
   * Slot length: seeds/000 uses the average CPU utilization of each 30-minute interval.
   * @default 1800
   */
  slotSec: number;
  /**
   * A series is user-facing when its Compare8 is below this. seeds/000 section IV-B puts the bar at 0.72 on 840
   * hand-labelled Azure workloads.
   * @default 0.72
   */
  compare8Threshold: number;
  /**
   * Share of the largest deviations excluded before averaging (seeds/000: 20 %), for robustness to interrupted days.
   * @default 0.2
   */
  excludeWorstShare: number;
  /**
   * Shortest series (days) that can be classified; seeds/000 uses 5 weekdays and says shorter workloads "should be
   * conservatively assumed user-facing", which this function does.
   * @default 5
   */
  minDays: number;
  /**
   * A series whose standard deviation after de-trending is below this is flat, and template deviations below this (in
   * standard deviations) count as 0: no template can fit better than another, so it is not user-facing (seeds/000
   * leaves 0/0 undefined; this is our reading).
   * @default 1e-6
   */
  flatEpsilon: number;
}

/** The defaults of every `CriticalityOptions` field. */
export const DEFAULT_CRITICALITY_OPTIONS: Readonly<CriticalityOptions> = Object.freeze({
  slotSec: 1800,
  compare8Threshold: 0.72,
  excludeWorstShare: 0.2,
  minDays: 5,
  flatEpsilon: 1e-6,
});

/** Fills defaults and validates, naming the offending field. */
export function resolveCriticalityOptions(options: Partial<CriticalityOptions> = {}): CriticalityOptions {
  const { o, check } = optionResolution("criticality", DEFAULT_CRITICALITY_OPTIONS, options);
  check("slotSec", (v) => v > 0 && (24 * 3600) % v === 0 && (8 * 3600) % v === 0, "> 0 and divide 8 h");
  check("compare8Threshold", (v) => v > 0, "> 0");
  check("excludeWorstShare", (v) => v >= 0 && v < 1, "in [0, 1)");
  check("minDays", (v) => v >= 1, ">= 1");
  check("flatEpsilon", (v) => v >= 0, ">= 0");
  return o;
}

/** The verdict and the numbers behind it. */
export interface CriticalityResult {
  /** True when the tenant is (conservatively) user-facing. */
  critical: boolean;
  /** Compare8: 24-hour average deviation over 8-hour average deviation; low means a strong daily pattern. */
  score: number;
  /** Compare12: 24-hour over 12-hour average deviation (reported, not used for the verdict, as in seeds/000). */
  compare12: number;
  /** Average deviations from the 24 h, 12 h and 8 h templates (in units of the series' standard deviation). */
  deviation24: number;
  deviation12: number;
  deviation8: number;
  /** Why the verdict was reached. */
  reason: "compare8" | "too-short" | "flat";
}

/**
 * The criticality test of seeds/000 section III-B on one utilization series:
 * 1. average into 30-minute slots, de-trend (each value divided by the mean of the previous 24 hours) and normalise
 *    (divide by the standard deviation of the whole de-trended series);
 * 2. a 24-hour template: per time-of-day slot, the median of all values at that time of day;
 * 3. overlay the template on every day, take each value's absolute deviation, drop the largest 20 % and average;
 * 4. the same for 8- and 12-hour templates; Compare8 = dev24 / dev8, Compare12 = dev24 / dev12; user-facing when
 *    Compare8 < 0.72.
 * Interpretations (the paper is terse): de-trending divides by the trailing 24 h mean, and the first day, which has no
 * previous 24 hours, uses the first day's own mean; a zero trailing mean leaves the value at 0. Time of day is taken
 * from the sample's Unix time (UTC), not from the series' start. The 20 % exclusion is over all values' deviations
 * pooled across days. The paper uses 5 weekdays; this uses every day given (the caller chooses the window).
 */
export function criticality(series: UtilizationSeries, opts: Partial<CriticalityOptions> = {}): CriticalityResult {
  const o = resolveCriticalityOptions(opts);
  const grid = series.timesMs.length > 0 ? resample(series, o.slotSec) : series;
  const slotMs = o.slotSec * 1000;
  const perDay = (24 * HOUR_MS) / slotMs;
  const n = grid.cpuPct.length;
  if (n * slotMs < o.minDays * 24 * HOUR_MS) {
    return tooShortOrFlat(true, "too-short");
  }

  const detrended = detrend(grid.cpuPct, perDay);
  const mean = detrended.reduce((a, b) => a + b, 0) / n;
  const sd = Math.sqrt(detrended.reduce((a, b) => a + (b - mean) ** 2, 0) / n);
  if (sd <= o.flatEpsilon) return tooShortOrFlat(false, "flat");
  const x = detrended.map((v) => v / sd);

  const dev = (periodHours: number): number => templateDeviation(x, grid.timesMs, periodHours * HOUR_MS, slotMs, o);
  const deviation24 = dev(24);
  const deviation12 = dev(12);
  const deviation8 = dev(8);
  const score = ratio(deviation24, deviation8, o.flatEpsilon);
  const compare12 = ratio(deviation24, deviation12, o.flatEpsilon);
  return {
    critical: score < o.compare8Threshold,
    score,
    compare12,
    deviation24,
    deviation12,
    deviation8,
    reason: "compare8",
  };
}

function tooShortOrFlat(critical: boolean, reason: "too-short" | "flat"): CriticalityResult {
  return { critical, score: NaN, compare12: NaN, deviation24: NaN, deviation12: NaN, deviation8: NaN, reason };
}

/**
 * Both deviations (near) 0 means every template fits the kept 80 % perfectly (e.g. a server idle at 0 % most of the
 * time): no evidence for the 24 h period over the shorter one, so the ratio is 1, not a quotient of rounding errors.
 */
function ratio(a: number, b: number, epsilon: number): number {
  if (b <= epsilon) return a <= epsilon ? 1 : Infinity;
  return a / b;
}

/** Each value over the mean of the previous `perDay` values (the first day over its own mean). */
function detrend(x: number[], perDay: number): number[] {
  const firstDay = x.slice(0, perDay);
  const firstMean = firstDay.reduce((a, b) => a + b, 0) / firstDay.length;
  const out: number[] = [];
  let windowSum = 0;
  for (let i = 0; i < x.length; i++) {
    const base = i < perDay ? firstMean : windowSum / perDay;
    out.push(base > 0 ? x[i]! / base : 0);
    windowSum += x[i]!;
    if (i >= perDay) windowSum -= x[i - perDay]!;
  }
  return out;
}

/** Mean absolute deviation from the median template of `periodMs`, after dropping the largest `excludeWorstShare`. */
function templateDeviation(
  x: number[],
  timesMs: number[],
  periodMs: number,
  slotMs: number,
  o: CriticalityOptions,
): number {
  const slots = Math.round(periodMs / slotMs);
  const phaseOf = (t: number): number => Math.floor((((t % periodMs) + periodMs) % periodMs) / slotMs) % slots;
  const byPhase: number[][] = Array.from({ length: slots }, () => []);
  x.forEach((v, i) => byPhase[phaseOf(timesMs[i]!)]!.push(v));
  const template = byPhase.map(median);
  const deviations = x.map((v, i) => Math.abs(v - template[phaseOf(timesMs[i]!)]!)).sort((a, b) => a - b);
  const kept = deviations.slice(0, Math.max(1, Math.ceil(deviations.length * (1 - o.excludeWorstShare))));
  return kept.reduce((a, b) => a + b, 0) / kept.length;
}

function median(values: number[]): number {
  if (values.length === 0) return 0;
  const s = [...values].sort((a, b) => a - b);
  const mid = s.length >> 1;
  return s.length % 2 === 1 ? s[mid]! : (s[mid - 1]! + s[mid]!) / 2;
}

// ------------------------------------------------------------------------------------------------ one tenant

/** The history window the tenant registry classifies (its `slotSec` and `windowDays` options). */
export interface HistoryWindowOptions {
  /** Slot of the average server (AutoPilot records every two minutes, seeds/004 section 3.2). @default 120 */
  slotSec: number;
  /** The window: the last this many days. @default 30 */
  windowDays: number;
}

/** The defaults of every `HistoryWindowOptions` field (the registry's defaults). */
export const DEFAULT_HISTORY_WINDOW: Readonly<HistoryWindowOptions> = Object.freeze({ slotSec: 120, windowDays: 30 });

/** What one tenant's history says: the part of the registry's `TenantStats` that comes from its utilization. */
export interface TenantHistoryVerdict {
  /** Samples (slots) of its servers' series, summed. */
  historySlots: number;
  /** Average, peak (the classifier's `peakPercentile`), current and pattern; absent with no history in the window. */
  features?: TenantFeatures;
  /** seeds/000's Compare8, when the average server is long enough to test. */
  compare8?: number;
  /** The test's verdict ("" when too short to test, or no history). */
  measuredCriticality: "" | "critical" | "non-critical";
  /** Why there are no features (no history in the window); absent otherwise. */
  missing?: string;
}

/**
 * The registry's reading of one tenant (seeds/004 section 3.2, seeds/000 section III-B): the average server of its
 * servers' series over the `windowDays` before `endMs` (`averageServerSeries`), its features (`tenantFeatures`, whose
 * peak the power-aware placement predicts the primary from) and its criticality (`criticality`; a series too short to
 * test gets no verdict). `TenantRegistry.recluster` calls it for every tenant, and the simulator on its generated
 * history, so both see the same peak and verdict.
 */
export function tenantHistoryVerdict(
  name: string,
  serverSeries: UtilizationSeries[],
  endMs: number,
  o: Partial<HistoryWindowOptions> & {
    classifier?: Partial<ClassifierOptions> | undefined;
    criticality?: Partial<CriticalityOptions> | undefined;
  } = {},
): TenantHistoryVerdict {
  const slotSec = o.slotSec ?? DEFAULT_HISTORY_WINDOW.slotSec;
  const windowDays = o.windowDays ?? DEFAULT_HISTORY_WINDOW.windowDays;
  const verdict: TenantHistoryVerdict = {
    historySlots: serverSeries.reduce((a, s) => a + s.timesMs.length, 0),
    measuredCriticality: "",
  };
  const average = averageServerSeries(serverSeries, { slotSec, windowDays, endMs, name });
  if (average.timesMs.length === 0) {
    verdict.missing = `no utilization history in the last ${windowDays} days`;
    return verdict;
  }
  verdict.features = tenantFeatures(average, o.classifier ?? {});
  const crit = criticality(average, o.criticality ?? {});
  if (crit.reason !== "too-short") {
    verdict.compare8 = crit.score;
    verdict.measuredCriticality = crit.critical ? "critical" : "non-critical";
  }
  return verdict;
}
