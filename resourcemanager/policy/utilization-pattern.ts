/**
 * The utilization pattern test (seeds/004 section 3.2): periodic, constant or unpredictable, from the spectrum of the
 * series (`spectrum.ts`) and its day fold. Pure.
 */
import type { UtilizationPattern } from "../../common/trace-gen.js";
import type { UtilizationSeries } from "../../common/trace-io.js";
import { resample } from "../../common/trace-io.js";
import { resolveClassifierOptions } from "./classifier-options.js";
import type { ClassifierOptions } from "./classifier-options.js";
import { dailyPeakRatio, dailyPowerShare } from "./spectrum.js";
import { meanOf, percentilesOf } from "./percentiles.js";

const DAY_MS = 86_400_000;

/** What the pattern test saw, for logs and tuning. */
export interface PatternProfile {
  pattern: UtilizationPattern;
  /** Standard deviation of the series, CPU-% points. */
  stdPct: number;
  /** p99 - p1 of the series, CPU-% points. */
  rangePct: number;
  /** Share of non-DC spectral power in the daily-harmonic bands (0 when not computed). */
  dailyShare: number;
  /** Number of days the series spans. */
  days: number;
  /** Mean power per bin of the 24 h band over that of its neighbours (computed only when `dailyShare` qualifies). */
  peakRatio?: number;
  /** The day fold's median day-to-rest correlation (see `dailyFold`; computed over at least `minDaysForPeriodic` and two whole days). */
  foldCorrelation?: number;
  /** The span (max - min) of the mean daily profile, CPU-% points (computed with `foldCorrelation`). */
  foldAmplitudePct?: number;
  /** The largest share of the mean daily profile's variance a shorter period explains (see `subDailyShare`). */
  foldSubDailyShare?: number;
}

/**
 * The utilization pattern of one (average-server) series, seeds/004 section 3.2:
 * - constant when its standard deviation is below `constantMaxStdPct` (or its p99 - p1 range below
 *   `constantMaxRangePct`): a flat level is the most useful fact for scheduling, so this test comes first;
 * - periodic when, in the spectrum of the mean-removed series, the power in the bins of the daily frequency and its
 *   first `dailyHarmonics - 1` harmonics is at least `periodicMinDailyShare` of all non-DC power, and the 24 h band
 *   stands out of its neighbouring frequencies by `periodicMinPeakRatio` (see `dailyPeakRatio`);
 * - periodic also when the day fold says its days repeat (`dailyFold`: the median day correlates with the mean of the
 *   others by `dailyFoldMinCorrelation`, the mean daily profile spans `dailyFoldMinAmplitudePct`, and no period of
 *   24 h / k, k > `dailyHarmonics`, explains more than `dailyFoldMaxSubDailyShare` of it), even if its deviation
 *   would call it constant: a short daily burst (a nightly backup) spreads its power over many harmonics and fails
 *   the spectral test, yet is the most predictable thing about the tenant, while hourly spikes repeat every day only
 *   because they repeat every hour;
 * - unpredictable otherwise (random walks put their power at low frequencies, bursts spread it across all of them).
 *
 * The series is first put on a regular grid (`resample` at its own step, skipped when every sample already sits alone
 * in its own slot). The spectrum is that of an FFT of power-of-two size N: the mean-removed series is zero-padded at
 * the end up to the next power of two rather than trimmed, since trimming would throw away up to half of the history.
 * Zero-padding interpolates the spectrum, so the daily frequency falls on the (fractional) bin `N * stepSec / 86400`
 * and its main lobe widens to about `N / n` bins either side; each harmonic band is therefore its nearest bin
 * +- (ceil(N / n) + `binTolerance`). See `dailyPowerShare` for how those few bins are computed.
 */
export function patternOf(series: UtilizationSeries, opts: Partial<ClassifierOptions> = {}): PatternProfile {
  const o = resolveClassifierOptions(opts);
  const x = gridValues(series);
  if (x.length === 0) return { pattern: "constant", stdPct: 0, rangePct: 0, dailyShare: 0, days: 0 * series.stepSec };
  const [p1, p99] = percentilesOf(x, [1, 99]) as [number, number];
  return profileOf(x, meanOf(x), p99 - p1, series.stepSec, o);
}

/** The pattern test of `patternOf` on grid values `x` (non-empty) with their mean and p99 - p1 range. */
export function profileOf(
  x: readonly number[],
  mean: number,
  rangePct: number,
  stepSec: number,
  o: ClassifierOptions,
): PatternProfile {
  const n = x.length;
  const days = (n * stepSec * 1000) / DAY_MS;
  let squares = 0;
  for (let i = 0; i < n; i++) {
    const d = x[i]! - mean;
    squares += d * d;
  }
  const stdPct = Math.sqrt(squares / n);
  const constant = stdPct < o.constantMaxStdPct || rangePct < o.constantMaxRangePct;
  // The day fold, the second route to periodic, is asked only when the spectral rule has not said periodic. A daily
  // burst tall enough to matter is periodic even when the deviation says constant.
  const byFold = (): Partial<PatternProfile> & { periodic: boolean } => {
    const fold =
      o.dailyFoldMinCorrelation > 0 && days >= o.minDaysForPeriodic
        ? dailyFold(x, stepSec, o.dailyHarmonics + 1)
        : undefined;
    if (!fold) return { periodic: false };
    return {
      periodic:
        fold.correlation >= o.dailyFoldMinCorrelation &&
        fold.amplitudePct >= o.dailyFoldMinAmplitudePct &&
        fold.subDailyShare <= o.dailyFoldMaxSubDailyShare,
      foldCorrelation: fold.correlation,
      foldAmplitudePct: fold.amplitudePct,
      foldSubDailyShare: fold.subDailyShare,
    };
  };
  if (constant || days < o.minDaysForPeriodic) {
    const { periodic, ...folded } = byFold();
    const pattern: UtilizationPattern = periodic ? "periodic" : constant ? "constant" : "unpredictable";
    return { pattern, stdPct, rangePct, dailyShare: 0, days, ...folded };
  }
  const dailyShare = dailyPowerShare(x, mean, stepSec, o);
  let peakRatio: number | undefined;
  // Only candidates pay for the peak test.
  if (dailyShare >= o.periodicMinDailyShare) peakRatio = dailyPeakRatio(x, mean, stepSec, o);
  const spectral = peakRatio === undefined ? {} : { peakRatio };
  if (peakRatio !== undefined && peakRatio >= o.periodicMinPeakRatio) {
    return { pattern: "periodic", stdPct, rangePct, dailyShare, days, ...spectral };
  }
  const { periodic, ...folded } = byFold();
  const pattern: UtilizationPattern = periodic ? "periodic" : "unpredictable";
  return { pattern, stdPct, rangePct, dailyShare, days, ...spectral, ...folded };
}

/** Phase bins per day of the day fold: 5-minute bins, or the series' own step when coarser. */
const FOLD_BINS_PER_DAY = 288;

/**
 * The day fold of grid values `x` at `stepSec`: the whole days of the series (a trailing partial day is dropped), each
 * averaged into phase bins (`FOLD_BINS_PER_DAY`, fewer when the step is coarser than 5 minutes). `correlation` is the
 * median over days of the Pearson correlation of that day's profile with the mean profile of all other days (leaving
 * the day out, so that noise does not correlate with itself: independent days score about 0 whatever their number);
 * a flat day or a flat rest counts 0. `amplitudePct` is max - min of the mean profile of all days. The median makes
 * it a test of what most days do: a burst on one weekday of seven leaves the median day without a burst. Days start
 * at the series' first sample, not at midnight; a burst across that boundary still falls in the same bins every day.
 * `subDailyShare` is that of the mean profile for periods of 24 h / k, k >= `minRepeatsPerDay` (see `subDailyShare`).
 * Undefined with fewer than two whole days or fewer than four bins per day.
 */
function dailyFold(
  x: readonly number[],
  stepSec: number,
  minRepeatsPerDay: number,
): { correlation: number; amplitudePct: number; subDailyShare: number } | undefined {
  const perDay = 86_400 / stepSec;
  const bins = Math.min(FOLD_BINS_PER_DAY, Math.floor(perDay));
  const days = Math.floor(x.length / perDay + 1e-9);
  if (days < 2 || bins < 4) return undefined;
  const sums = new Float64Array(days * bins);
  const counts = new Float64Array(days * bins);
  const whole = Math.min(x.length, Math.round(days * perDay));
  for (let i = 0; i < whole; i++) {
    const at = i / perDay;
    const d = Math.min(days - 1, Math.floor(at + 1e-9));
    const b = Math.min(bins - 1, Math.floor((at - d) * bins + 1e-9));
    sums[d * bins + b]! += x[i]!;
    counts[d * bins + b]! += 1;
  }
  const profile = new Float64Array(bins);
  for (let d = 0; d < days; d++) {
    for (let b = 0; b < bins; b++) {
      const k = d * bins + b;
      // Every bin holds a sample (bins <= samples per day); guard anyway.
      sums[k] = counts[k]! > 0 ? sums[k]! / counts[k]! : b > 0 ? sums[k - 1]! : 0;
      profile[b]! += sums[k]!;
    }
  }
  let lo = Infinity;
  let hi = -Infinity;
  for (let b = 0; b < bins; b++) {
    lo = Math.min(lo, profile[b]! / days);
    hi = Math.max(hi, profile[b]! / days);
  }
  const correlations: number[] = [];
  for (let d = 0; d < days; d++) {
    let sx = 0;
    let sy = 0;
    for (let b = 0; b < bins; b++) {
      sx += sums[d * bins + b]!;
      sy += profile[b]! - sums[d * bins + b]!;
    }
    const mx = sx / bins;
    const my = sy / bins;
    let xy = 0;
    let xx = 0;
    let yy = 0;
    for (let b = 0; b < bins; b++) {
      const u = sums[d * bins + b]! - mx;
      const v = profile[b]! - sums[d * bins + b]! - my;
      xy += u * v;
      xx += u * u;
      yy += v * v;
    }
    correlations.push(xx > 1e-12 && yy > 1e-12 ? xy / Math.sqrt(xx * yy) : 0);
  }
  correlations.sort((a, b) => a - b);
  const mid = correlations.length / 2;
  const correlation =
    correlations.length % 2 === 1 ? correlations[Math.floor(mid)]! : (correlations[mid - 1]! + correlations[mid]!) / 2;
  return { correlation, amplitudePct: hi - lo, subDailyShare: subDailyShare(profile, minRepeatsPerDay) };
}

/**
 * The largest share of the variance of a daily `profile` (phase bins over one day) that a shorter period explains:
 * for each k >= `minRepeats` that divides the bins and leaves at least two bins per period, the profile is folded
 * again at 24 h / k (the mean of its k copies of the period), and the share is the variance of that fold, repeated
 * k times, over the profile's (R^2 of the k-fold). A profile made of k equal copies scores 1 for that k; one burst
 * per day scores less than 1/k, since the other k - 1 copies are flat ((1/k - p) / (1 - p) for a burst covering a
 * share p of the day that fits in one period). 0 for a flat profile.
 */
function subDailyShare(profile: Float64Array, minRepeats: number): number {
  const bins = profile.length;
  const mean = profile.reduce((a, v) => a + v, 0) / bins;
  let total = 0;
  for (let b = 0; b < bins; b++) total += (profile[b]! - mean) ** 2;
  if (!(total > 1e-12)) return 0;
  let largest = 0;
  for (let k = Math.max(2, minRepeats); k <= bins / 2; k++) {
    if (bins % k !== 0) continue;
    const period = bins / k;
    let explained = 0;
    for (let b = 0; b < period; b++) {
      let sum = 0;
      for (let copy = 0; copy < k; copy++) sum += profile[b + copy * period]!;
      // Each of the k copies of the period holds the fold's value: k times its squared deviation.
      explained += k * (sum / k - mean) ** 2;
    }
    largest = Math.max(largest, explained / total);
  }
  // The fold's variance never exceeds the profile's (it is a projection); rounding may push it a hair above.
  return Math.min(1, largest);
}

/** The values of `series` on a regular grid of its own step: what `resample(series, series.stepSec)` would give. */
export function gridValues(series: UtilizationSeries): readonly number[] {
  if (!(series.stepSec > 0) || series.timesMs.length === 0 || onOwnGrid(series)) return series.cpuPct;
  return resample(series, series.stepSec).cpuPct;
}

/** True when every sample i lies alone in slot i of `resample`'s grid, so that resampling would copy the values. */
function onOwnGrid(series: UtilizationSeries): boolean {
  const { timesMs, startMs } = series;
  const n = timesMs.length;
  if (series.cpuPct.length !== n) return false;
  const stepMs = series.stepSec * 1000;
  // The common case, whole milliseconds exactly on the grid, needs no division (the sums stay exact below 2^53).
  if (Number.isSafeInteger(startMs) && Number.isSafeInteger(stepMs) && Number.isSafeInteger(startMs + n * stepMs)) {
    let expected = startMs;
    let i = 0;
    while (i < n && timesMs[i] === expected) {
      i++;
      expected += stepMs;
    }
    if (i === n) return true;
  }
  for (let i = 0; i < n; i++) if (Math.floor((timesMs[i]! - startMs) / stepMs) !== i) return false;
  return true;
}
