/**
 * Primary-tenant clustering (seeds/004, section 3.2 and the start of section 4.1): the "average server" of each tenant,
 * its utilization pattern (periodic, constant or unpredictable) from the FFT frequency profile, and K-Means classes of
 * tenants per pattern tagged with their average, peak and current utilization. Pure: no I/O, randomness passed in.
 */
import FFT from "fft.js";
import { kmeans } from "ml-kmeans";
import { HarvestError } from "../common/errors.js";
import type { Rng } from "../common/rng.js";
import type { UtilizationPattern } from "../common/trace-gen.js";
import type { UtilizationSeries } from "../common/trace-io.js";
import { resample } from "../common/trace-io.js";

export type { UtilizationPattern } from "../common/trace-gen.js";

const DAY_MS = 86_400_000;

/**
 * Thresholds of the pattern test and the clustering. Every field has a default; `resolveClassifierOptions` fills and
 * validates them.
 */
export interface ClassifierOptions {
  /**
   * A series whose standard deviation is below this many CPU-% points is constant. seeds/004 calls the class "(roughly)
   * constant": crawlers and scrubbers whose level barely moves. An absolute spread (not a coefficient of variation) is
   * used because a tenant idling at 1 % with +-1 % noise has a huge CV yet is perfectly predictable for harvesting.
   * @default 5
   */
  constantMaxStdPct: number;
  /**
   * A series is also constant when its p99 - p1 range is below this many CPU-% points (catches series whose deviation
   * is inflated by a handful of spikes but whose body is flat). Set to 0 to disable.
   * @default 0
   */
  constantMaxRangePct: number;
  /**
   * A non-constant series is periodic when the spectral power at the daily frequency and its harmonics (each +- the
   * bin tolerance) is at least this share of all non-DC power. A pure noisy daily sine puts most of its power there;
   * a random walk puts most of it at the lowest frequencies (seeds/004, figure 1d) and bursts spread it flat.
   * @default 0.3
   */
  periodicMinDailyShare: number;
  /**
   * ... and the 24 h band's mean power per bin is at least this many times that of the bins beside it. Over a short
   * history (a week) the daily band sits among the lowest frequencies, where a random walk also puts most of its
   * power, so the share alone calls random walks periodic; a daily cycle is a peak in the spectrum and a random walk
   * is not. 5 separates them on synthetic series (daily sines with noise score 30 and more, clamped random walks at
   * most 4.7 over 7-14 days; Bitbrains VMs 288 and 411 score 11.5 and 14.6). Below about two weeks of history an
   * office-hours tenant with weekends can still fall under it. Set to 0 to disable.
   * @default 5
   */
  periodicMinPeakRatio: number;
  /**
   * Harmonics of the daily frequency counted as "daily" power: 1 counts only the 24 h period, 3 adds 12 h and 8 h
   * (a diurnal shape that is not a pure sine, e.g. a sharp office-hours plateau, spreads into them).
   * @default 3
   */
  dailyHarmonics: number;
  /**
   * Extra bins either side of each daily-harmonic bin that still count as that harmonic, on top of the main-lobe
   * width that zero-padding adds (see `patternOf`). Absorbs a period that is not exactly 24 h (time zones, drift).
   * @default 1
   */
  binTolerance: number;
  /**
   * Shortest series (in days) whose daily periodicity can be judged; shorter ones are unpredictable unless constant.
   * @default 2
   */
  minDaysForPeriodic: number;
  /**
   * The second route to "periodic", the day fold (see `dailyFold`): the median, over the series' whole days, of the
   * correlation of each day's profile with the mean profile of the other days must be at least this. It catches load
   * that repeats every day as a short burst (a nightly backup or batch window of 30 min to 3 h), whose power spreads
   * over many harmonics so that the 24/12/8 h bands of the spectral rule hold little of it. 0.6 because generated
   * daily bursts of 30 min to 3 h at 20 to 80 % over a 5 % base (noise sd 1.5, 7 to 30 days) score 0.78 and
   * more, flat series and random bursts at most 0.11, random walks at most 0.41 (20 seeds each), and a burst on one
   * weekday only scores about 0 (the median day has no burst: a weekly pattern is not a daily one; bursts on five
   * weekdays of seven are). The real traces keep their labels. On by default since `dailyFoldMaxSubDailyShare` keeps
   * load that repeats every hour (which repeats every day too) out of the route. 0 disables the route.
   * @default 0.6
   */
  dailyFoldMinCorrelation: number;
  /**
   * ... and the mean daily profile must span at least this many CPU-% points (max - min). A repeating daily burst this
   * tall is periodic even when its standard deviation would call it constant (a 1 h burst to 20 % over a 5 % base
   * has a standard deviation of about 3 points): the nightly burst is what history-based placement needs to know.
   * 10 points keeps flat tenants with a faint daily ripple (Bitbrains VMs 9 and 308, NAB's flat EC2 and RDS series)
   * constant.
   * @default 10
   */
  dailyFoldMinAmplitudePct: number;
  /**
   * ... and no shorter period may explain more than this share of the mean daily profile's variance (see
   * `subDailyShare`): the guard that lets the fold be on by default. Load that repeats every hour (or every 2, 3, 4,
   * 6 h) repeats every day too and passes the correlation test, yet it is no daily window: Algorithm 1 reads
   * "periodic" as room that long jobs may use, and a primary that spikes every hour kills them every hour (NAB's
   * `cpu_utilization_asg_misconfiguration` is one: fold correlation 0.91, and a 1 h period explains 0.996 of its
   * daily profile). The periods tried are 24 h / k for every k above `dailyHarmonics` that divides the fold's bins:
   * 12 h and 8 h are daily harmonics to the spectral rule, so a twice- or thrice-daily window stays periodic.
   * 0.75 lies between what each kind scores. A profile of k equal copies scores about 1 (spikes of 5 to 30 min every
   * 1 to 6 h, +15 to +45 points over noise sd 1.5: 0.92 and more). One daily burst scores less than 1/k <= 1/4, as
   * the other k - 1 copies of the period are flat (0.26 at most measured, noise included). A profile that repeats
   * every 12 h or 8 h scores about 1/2 at half its period (0.42 to 0.50 measured), which is why the threshold is not
   * 0.5. A nightly burst with faint hourly blips on it stays periodic. 1 disables the guard.
   * @default 0.75
   */
  dailyFoldMaxSubDailyShare: number;
  /**
   * How a tenant's "peak" utilization is taken:
   * - "percentile": the `peakPercentile` of all samples (not the max: one spike must not move it). The default, so
   *   that the peak stays the "Primary P95" of seeds/004 and the power-aware placement, and the same statistic the
   *   simulator's diversity placement takes (`sim/roles/storage-namenode.ts` computes its own p95). It is blind to
   *   short daily bursts: a series at 5 % that bursts to 45 % for one hour a day has a p95 of about 7 %, since one
   *   hour is 4 % of a day, and Algorithm 1 would count room the primary takes back every night.
   * - "median-daily-max": the median over the series' whole days of each day's maximum (a series shorter than one
   *   day falls back to the percentile). It sees a burst that recurs on most days at its full height (45 % above),
   *   while a burst on fewer than half of the days, like one spike, does not move it. Per-sample noise lifts it a
   *   little above the p95 of flat series (about 3 noise standard deviations above the mean instead of 1.6).
   * @default "percentile"
   */
  peakStatistic: PeakStatistic;
  /**
   * The percentile taken as a tenant's "peak" utilization when `peakStatistic` is "percentile" (and for series
   * shorter than one day otherwise).
   * @default 95
   */
  peakPercentile: number;
  /**
   * Most K-Means classes per pattern.
   * @default 4
   */
  maxClassesPerPattern: number;
  /**
   * k grows until the within-cluster sum of squares is at most this fraction of k = 1's ...
   * @default 0.2
   */
  wssFraction: number;
  /**
   * ... or the root-mean-square distance of tenants to their class centre (in CPU-% points over [average, peak]) is
   * at most this, whichever comes first: classes tighter than this are not worth splitting.
   * @default 5
   */
  classTightnessPct: number;
}

/** The statistics `ClassifierOptions.peakStatistic` offers. */
export type PeakStatistic = "percentile" | "median-daily-max";

const PEAK_STATISTICS: readonly PeakStatistic[] = ["percentile", "median-daily-max"];

/** The defaults of every `ClassifierOptions` field. */
export const DEFAULT_CLASSIFIER_OPTIONS: Readonly<ClassifierOptions> = Object.freeze({
  constantMaxStdPct: 5,
  constantMaxRangePct: 0,
  periodicMinDailyShare: 0.3,
  periodicMinPeakRatio: 5,
  dailyHarmonics: 3,
  binTolerance: 1,
  minDaysForPeriodic: 2,
  dailyFoldMinCorrelation: 0.6,
  dailyFoldMinAmplitudePct: 10,
  dailyFoldMaxSubDailyShare: 0.75,
  peakStatistic: "percentile",
  peakPercentile: 95,
  maxClassesPerPattern: 4,
  wssFraction: 0.2,
  classTightnessPct: 5,
});

/** Objects `resolveClassifierOptions` returned (frozen), so that passing one back costs nothing. */
const RESOLVED = new WeakSet<object>();

/**
 * Fills defaults into `options` and validates every field, naming the offending one. The result is frozen; passing it
 * back returns it as is, so per-tenant calls with resolved options do not validate again.
 */
export function resolveClassifierOptions(options: Partial<ClassifierOptions> = {}): Readonly<ClassifierOptions> {
  if (RESOLVED.has(options)) return options as ClassifierOptions;
  const o: ClassifierOptions = { ...DEFAULT_CLASSIFIER_OPTIONS };
  for (const [k, v] of Object.entries(options)) if (v !== undefined) (o as unknown as Record<string, unknown>)[k] = v;
  if (!PEAK_STATISTICS.includes(o.peakStatistic)) {
    throw new HarvestError(
      "CONFIG_INVALID",
      `classifier option peakStatistic must be one of ${PEAK_STATISTICS.join(", ")}, got ${String(o.peakStatistic)}`,
      { details: { field: "peakStatistic" } },
    );
  }
  const check = (
    field: Exclude<keyof ClassifierOptions, "peakStatistic">,
    ok: (v: number) => boolean,
    what: string,
  ): void => {
    const v = o[field];
    if (typeof v !== "number" || !Number.isFinite(v) || !ok(v)) {
      throw new HarvestError("CONFIG_INVALID", `classifier option ${field} must be ${what}, got ${String(v)}`, {
        details: { field },
      });
    }
  };
  check("constantMaxStdPct", (v) => v >= 0, ">= 0");
  check("constantMaxRangePct", (v) => v >= 0, ">= 0");
  check("periodicMinDailyShare", (v) => v > 0 && v <= 1, "in (0, 1]");
  check("periodicMinPeakRatio", (v) => v >= 0, ">= 0");
  check("dailyHarmonics", (v) => Number.isInteger(v) && v >= 1, "an integer >= 1");
  check("binTolerance", (v) => Number.isInteger(v) && v >= 0, "an integer >= 0");
  check("minDaysForPeriodic", (v) => v >= 1, ">= 1");
  check("dailyFoldMinCorrelation", (v) => v >= 0 && v <= 1, "in [0, 1]");
  check("dailyFoldMinAmplitudePct", (v) => v >= 0, ">= 0");
  check("dailyFoldMaxSubDailyShare", (v) => v >= 0 && v <= 1, "in [0, 1]");
  check("peakPercentile", (v) => v > 0 && v <= 100, "in (0, 100]");
  check("maxClassesPerPattern", (v) => Number.isInteger(v) && v >= 1, "an integer >= 1");
  check("wssFraction", (v) => v >= 0 && v <= 1, "in [0, 1]");
  check("classTightnessPct", (v) => v >= 0, ">= 0");
  RESOLVED.add(Object.freeze(o));
  return o;
}

/** Options of `averageServerSeries`. */
export interface AverageServerOptions {
  /**
   * The slot length of the average server (AutoPilot records every two minutes, seeds/004 section 3.2).
   * @default 120
   */
  slotSec?: number;
  /**
   * How far back from `endMs` the window reaches.
   * @default 30
   */
  windowDays?: number;
  /**
   * The end of the window (Unix ms, exclusive). Passed in: the module reads no clock.
   * @default the latest sample of any server, plus one slot
   */
  endMs?: number;
  /**
   * The name of the resulting series.
   * @default "average"
   */
  name?: string;
}

/**
 * The tenant's "average server" (seeds/004 section 3.2): per `slotSec` slot over the last `windowDays` before `endMs`,
 * the mean of its servers' utilizations. A server's slot is the mean of its samples in it; a slot without samples holds
 * that server's previous value (so coarser traces are step-held). Slots before any server reported are dropped.
 */
export function averageServerSeries(
  serverSeries: UtilizationSeries[],
  opts: AverageServerOptions = {},
): UtilizationSeries {
  const slotSec = opts.slotSec ?? 120;
  const windowDays = opts.windowDays ?? 30;
  if (!(slotSec > 0)) throw invalidArg("slotSec", slotSec);
  if (!(windowDays > 0)) throw invalidArg("windowDays", windowDays);
  const slotMs = slotSec * 1000;
  const name = opts.name ?? "average";
  let latest = -Infinity;
  for (const s of serverSeries) {
    const last = s.timesMs[s.timesMs.length - 1];
    if (last !== undefined && last > latest) latest = last;
  }
  if (latest === -Infinity) return { name, stepSec: slotSec, startMs: opts.endMs ?? 0, timesMs: [], cpuPct: [] };
  const endMs = opts.endMs ?? latest + slotMs;
  const startMs = endMs - Math.round(windowDays * DAY_MS);
  const slots = Math.ceil((endMs - startMs) / slotMs);

  const total = new Array<number>(slots).fill(0);
  const reporting = new Array<number>(slots).fill(0);
  for (const s of serverSeries) {
    const sums = new Array<number>(slots).fill(0);
    const counts = new Array<number>(slots).fill(0);
    // A sample before the window still sets the value the server holds into the window's first slots.
    let held: number | undefined;
    for (let i = 0; i < s.timesMs.length; i++) {
      const t = s.timesMs[i]!;
      if (t < startMs) held = s.cpuPct[i]!;
      else if (t < endMs) {
        const k = Math.floor((t - startMs) / slotMs);
        sums[k]! += s.cpuPct[i]!;
        counts[k]! += 1;
      }
    }
    for (let k = 0; k < slots; k++) {
      if (counts[k]! > 0) held = sums[k]! / counts[k]!;
      if (held !== undefined) {
        total[k]! += held;
        reporting[k]! += 1;
      }
    }
  }
  const timesMs: number[] = [];
  const cpuPct: number[] = [];
  for (let k = 0; k < slots; k++) {
    if (reporting[k]! === 0) continue;
    timesMs.push(startMs + k * slotMs);
    cpuPct.push(total[k]! / reporting[k]!);
  }
  return { name, stepSec: slotSec, startMs: timesMs[0] ?? startMs, timesMs, cpuPct };
}

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
function profileOf(
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
function gridValues(series: UtilizationSeries): readonly number[] {
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

/**
 * A Goertzel step (one bin, one sample) costs about this share of one `N log2 N` unit of fft.js's real transform
 * (measured on the 2-core development machine: 21 bins x 21,600 samples in about 0.5 ms, the 32,768-point transform
 * in about 1.1 ms), so the bins are computed one by one while that takes fewer than `N log2 N / share` steps.
 */
const GOERTZEL_STEP_PER_FFT_UNIT = 0.5;

/**
 * Share of non-DC power of the mean-removed series, zero-padded to size N, in the daily-harmonic bands (see
 * `patternOf`). The non-DC total is Parseval's: sum over k = 1..N/2 of |X_k|^2 = (N sum y^2 - X_0^2 + X_{N/2}^2) / 2.
 * The few band bins (21 for the defaults at a 2-minute step) come from the Goertzel recurrence, O(bins x n), which
 * is about twice as fast as the full transform for the defaults; with many harmonics the fft.js transform is used.
 * Both agree up to rounding: the shares differ by less than 1e-9 for 30 days of 2-minute samples (the unit tests
 * hold them to that), by up to about 1e-7 for second-level steps, where the recurrence's rounding grows.
 */
function dailyPowerShare(x: readonly number[], mean: number, stepSec: number, o: ClassifierOptions): number {
  const n = x.length;
  let size = 2;
  while (size < n) size *= 2;
  const half = size / 2;
  const dailyBin = (size * stepSec) / 86_400;
  const width = Math.ceil(size / n) + o.binTolerance;
  // Each bin once, in the order the bands list them (bands of neighbouring harmonics may overlap).
  const bins: number[] = [];
  const counted = new Set<number>();
  for (let h = 1; h <= o.dailyHarmonics; h++) {
    const centre = Math.round(h * dailyBin);
    for (let k = Math.max(1, centre - width); k <= Math.min(half, centre + width); k++) {
      if (counted.has(k)) continue;
      counted.add(k);
      bins.push(k);
    }
  }
  const goertzel = bins.length * n * GOERTZEL_STEP_PER_FFT_UNIT <= size * Math.log2(size);
  return goertzel ? goertzelShare(x, mean, size, bins) : fftShare(x, mean, size, bins);
}

/**
 * How far the daily band stands out of its neighbourhood: the mean power per bin of the 24 h band (its nearest bin
 * +- the band width w, as in `dailyPowerShare`) over the mean power per bin of the w bins either side of it (never
 * the DC bin). A daily cycle is a peak, so the ratio is large; a random walk's spectrum falls smoothly as 1/f^2, so over
 * a short history, where the daily band sits among the lowest frequencies and holds much of the power, the band is
 * still no higher than its neighbours (ratio around 1 or below).
 */
function dailyPeakRatio(x: readonly number[], mean: number, stepSec: number, o: ClassifierOptions): number {
  const n = x.length;
  let size = 2;
  while (size < n) size *= 2;
  const half = size / 2;
  const centre = Math.round((size * stepSec) / 86_400);
  const width = Math.ceil(size / n) + o.binTolerance;
  const band: number[] = [];
  const around: number[] = [];
  for (let k = Math.max(1, centre - 2 * width); k <= Math.min(half, centre + 2 * width); k++)
    (Math.abs(k - centre) <= width ? band : around).push(k);
  if (band.length === 0 || around.length === 0) return Infinity;
  if (spectrumScratch.length < n) spectrumScratch = new Float64Array(n);
  const y = spectrumScratch;
  for (let i = 0; i < n; i++) y[i] = x[i]! - mean;
  const powers = goertzelPowers(y, n, size, [...band, ...around]);
  let inBand = 0;
  let outside = 0;
  for (let b = 0; b < band.length; b++) inBand += powers[b]!;
  for (let b = band.length; b < powers.length; b++) outside += powers[b]!;
  inBand /= band.length;
  outside /= around.length;
  return outside > 0 ? inBand / outside : Infinity;
}

/** The mean-removed series; reused across calls like `percentileScratch`. */
let spectrumScratch = new Float64Array(0);

/** `dailyPowerShare` by Parseval's total and Goertzel's recurrence for `bins`. */
function goertzelShare(x: readonly number[], mean: number, size: number, bins: readonly number[]): number {
  const n = x.length;
  if (spectrumScratch.length < n) spectrumScratch = new Float64Array(n);
  const y = spectrumScratch;
  let sum = 0;
  let squares = 0;
  let alternating = 0;
  for (let i = 0; i < n; i++) {
    const v = x[i]! - mean;
    y[i] = v;
    sum += v;
    squares += v * v;
    alternating += (i & 1) === 0 ? v : -v;
  }
  const total = (size * squares - sum * sum + alternating * alternating) / 2;
  if (!(total > 0)) return 0;
  let daily = 0;
  const powers = goertzelPowers(y, n, size, bins);
  for (let b = 0; b < bins.length; b++) daily += powers[b]!;
  return daily / total;
}

/**
 * |X_k|^2 for each k of `bins`, X the size-point DFT of y[0..n) zero-padded: s_i = y_i + 2 cos(2 pi k / N) s_(i-1) -
 * s_(i-2), then |X_k|^2 = s_(n-1)^2 + s_(n-2)^2 - 2 cos(2 pi k / N) s_(n-1) s_(n-2) (the padding leaves |X_k| alone).
 */
function goertzelPowers(y: Float64Array, n: number, size: number, bins: readonly number[]): Float64Array {
  const powers = new Float64Array(bins.length);
  const last = bins.length - 1;
  const coefficient = (b: number): number => 2 * Math.cos((2 * Math.PI * bins[Math.min(b, last)]!) / size);
  // Eight independent recurrences per pass over y: each waits on its own multiply-add at every sample, so fewer leave
  // the core idle (measured: eight per pass take about 60 % of the time of four). Two samples per step let s and t
  // take turns holding the newest value instead of shifting. A short last group repeats its final bin and drops the
  // copies.
  const even = n - (n % 2);
  for (let b = 0; b <= last; b += 8) {
    const c0 = coefficient(b);
    const c1 = coefficient(b + 1);
    const c2 = coefficient(b + 2);
    const c3 = coefficient(b + 3);
    const c4 = coefficient(b + 4);
    const c5 = coefficient(b + 5);
    const c6 = coefficient(b + 6);
    const c7 = coefficient(b + 7);
    // s holds s_(i-1) and t holds s_(i-2) before each step.
    let s0 = 0;
    let s1 = 0;
    let s2 = 0;
    let s3 = 0;
    let s4 = 0;
    let s5 = 0;
    let s6 = 0;
    let s7 = 0;
    let t0 = 0;
    let t1 = 0;
    let t2 = 0;
    let t3 = 0;
    let t4 = 0;
    let t5 = 0;
    let t6 = 0;
    let t7 = 0;
    for (let i = 0; i < even; i += 2) {
      const v = y[i]!;
      const w = y[i + 1]!;
      t0 = v - t0 + c0 * s0;
      s0 = w - s0 + c0 * t0;
      t1 = v - t1 + c1 * s1;
      s1 = w - s1 + c1 * t1;
      t2 = v - t2 + c2 * s2;
      s2 = w - s2 + c2 * t2;
      t3 = v - t3 + c3 * s3;
      s3 = w - s3 + c3 * t3;
      t4 = v - t4 + c4 * s4;
      s4 = w - s4 + c4 * t4;
      t5 = v - t5 + c5 * s5;
      s5 = w - s5 + c5 * t5;
      t6 = v - t6 + c6 * s6;
      s6 = w - s6 + c6 * t6;
      t7 = v - t7 + c7 * s7;
      s7 = w - s7 + c7 * t7;
    }
    if (even < n) {
      // One sample left: the plain step, which shifts.
      const v = y[even]!;
      [s0, t0] = [v - t0 + c0 * s0, s0];
      [s1, t1] = [v - t1 + c1 * s1, s1];
      [s2, t2] = [v - t2 + c2 * s2, s2];
      [s3, t3] = [v - t3 + c3 * s3, s3];
      [s4, t4] = [v - t4 + c4 * s4, s4];
      [s5, t5] = [v - t5 + c5 * s5, s5];
      [s6, t6] = [v - t6 + c6 * s6, s6];
      [s7, t7] = [v - t7 + c7 * s7, s7];
    }
    const group = [
      s0 * s0 + t0 * t0 - c0 * s0 * t0,
      s1 * s1 + t1 * t1 - c1 * s1 * t1,
      s2 * s2 + t2 * t2 - c2 * s2 * t2,
      s3 * s3 + t3 * t3 - c3 * s3 * t3,
      s4 * s4 + t4 * t4 - c4 * s4 * t4,
      s5 * s5 + t5 * t5 - c5 * s5 * t5,
      s6 * s6 + t6 * t6 - c6 * s6 * t6,
      s7 * s7 + t7 * t7 - c7 * s7 * t7,
    ];
    for (let j = 0; j < 8 && b + j <= last; j++) powers[b + j] = group[j]!;
  }
  return powers;
}

/** One fft.js transform of each size with its buffers: building the twiddle tables costs more than a transform. */
interface FftWorkspace {
  fft: FFT;
  input: Float64Array;
  out: Float64Array;
}

const fftWorkspaces = new Map<number, FftWorkspace>();
/** Workspaces kept (the oldest goes first); a classifier run sees one or two series lengths. */
const MAX_FFT_WORKSPACES = 4;

function fftWorkspace(size: number): FftWorkspace {
  let ws = fftWorkspaces.get(size);
  if (ws) return ws;
  if (fftWorkspaces.size >= MAX_FFT_WORKSPACES) fftWorkspaces.delete(fftWorkspaces.keys().next().value!);
  ws = { fft: new FFT(size), input: new Float64Array(size), out: new Float64Array(2 * size) };
  fftWorkspaces.set(size, ws);
  return ws;
}

/** `dailyPowerShare` by a full real FFT of the zero-padded series. */
function fftShare(x: readonly number[], mean: number, size: number, bins: readonly number[]): number {
  const n = x.length;
  const { fft, input, out } = fftWorkspace(size);
  for (let i = 0; i < n; i++) input[i] = x[i]! - mean;
  input.fill(0, n);
  // realTransform writes bins 0..N/2 from the input alone, so `out` needs no clearing between calls.
  fft.realTransform(out, input);
  const half = size / 2;
  let total = 0;
  for (let k = 1; k <= half; k++) total += out[2 * k]! * out[2 * k]! + out[2 * k + 1]! * out[2 * k + 1]!;
  if (total === 0) return 0;
  let daily = 0;
  for (const k of bins) daily += out[2 * k]! * out[2 * k]! + out[2 * k + 1]! * out[2 * k + 1]!;
  return daily / total;
}

/** A tenant's features for clustering. */
export interface TenantFeatures {
  /** Mean utilization, CPU %. */
  average: number;
  /** The `peakStatistic` of the utilization (the `peakPercentile` by default), CPU %. */
  peak: number;
  /** The last value, CPU %. */
  current: number;
  /** The standard deviation of the utilization, CPU % (the second moment for Cantelli headroom, seeds/003). */
  stddev: number;
  pattern: UtilizationPattern;
}

/**
 * Average, peak (`peakStatistic`: a high percentile, not the max, or the median of daily maxima), current (last)
 * utilization and pattern (`patternOf`) of one series. Pass options resolved once (`resolveClassifierOptions`) when calling it per tenant.
 */
export function tenantFeatures(series: UtilizationSeries, opts: Partial<ClassifierOptions> = {}): TenantFeatures {
  return featuresOf(series, resolveClassifierOptions(opts));
}

function featuresOf(series: UtilizationSeries, o: ClassifierOptions): TenantFeatures {
  const x = series.cpuPct;
  const n = x.length;
  if (n === 0) {
    throw new HarvestError("INVALID_ARGUMENT", `series ${series.name} is empty`, { details: { field: "series" } });
  }
  const { percentile, sum } = percentileAndSum(x, o.peakPercentile);
  const average = sum / n;
  const current = x[n - 1]!;
  let squares = 0;
  for (const v of x) squares += (v - average) * (v - average);
  const stddev = Math.sqrt(squares / n);
  const grid = gridValues(series);
  const peak =
    o.peakStatistic === "median-daily-max" ? (medianDailyMax(grid, series.stepSec) ?? percentile) : percentile;
  if (grid !== x) return { average, peak, current, stddev, pattern: patternOf(series, o).pattern };
  // On its own grid already: the mean serves the pattern test too. The p99 - p1 range only matters when
  // constantMaxRangePct > 0 (a range is never below 0), so it is not computed otherwise.
  let rangePct = Infinity;
  if (o.constantMaxRangePct > 0) {
    const [p1, p99] = percentilesOf(x, [1, 99]) as [number, number];
    rangePct = p99 - p1;
  }
  return { average, peak, current, stddev, pattern: profileOf(x, average, rangePct, series.stepSec, o).pattern };
}

/**
 * The median over the whole days of grid values `x` (days from the first sample; a trailing partial day is dropped)
 * of each day's maximum: `peakStatistic` "median-daily-max". Undefined for less than one whole day.
 */
function medianDailyMax(x: readonly number[], stepSec: number): number | undefined {
  const perDay = 86_400 / stepSec;
  const days = Math.floor(x.length / perDay + 1e-9);
  if (!(days >= 1)) return undefined;
  const maxima = new Array<number>(days);
  for (let d = 0; d < days; d++) {
    let m = -Infinity;
    const end = Math.min(x.length, Math.round((d + 1) * perDay));
    for (let i = Math.round(d * perDay); i < end; i++) if (x[i]! > m) m = x[i]!;
    maxima[d] = m;
  }
  maxima.sort((a, b) => a - b);
  const mid = days / 2;
  return days % 2 === 1 ? maxima[Math.floor(mid)]! : (maxima[mid - 1]! + maxima[mid]!) / 2;
}

/** One tenant to classify: its servers and its average-server series (see `averageServerSeries`). */
export interface TenantInput {
  tenantId: string;
  servers: string[];
  series: UtilizationSeries;
}

/** One tenant to cluster by its features already extracted (`tenantFeatures`); see `classifyFeatures`. */
export interface FeaturedTenant {
  tenantId: string;
  servers: string[];
  features: TenantFeatures;
}

/** A class of tenants with one pattern and similar utilization (seeds/004 section 4.1). */
export interface TenantClass {
  /** `${pattern}-${index}`, indices in ascending order of the class average. */
  id: string;
  pattern: UtilizationPattern;
  /** Server-weighted mean of the members' averages, CPU %. */
  average: number;
  /** Server-weighted mean of the members' peaks, CPU %. */
  peak: number;
  /** Server-weighted mean of the members' current utilization, CPU %. */
  current: number;
  /** Server-weighted mean of the members' standard deviations, CPU % (absent in classes stored before it existed). */
  stddev?: number;
  /** Member tenant ids, in input order. */
  tenantIds: string[];
  /** The members' servers, in input order. */
  servers: string[];
}

const PATTERN_ORDER: readonly UtilizationPattern[] = ["periodic", "constant", "unpredictable"];

/**
 * Groups tenants by pattern, then K-Means-clusters each pattern's tenants on [average, peak] (seeds/004 section 4.1).
 * k is the smallest value in 1..min(maxClassesPerPattern, distinct points) whose classes are tight (RMS distance to
 * the centre <= `classTightnessPct`) or whose within-cluster sum of squares is <= `wssFraction` of k = 1's. k-means++
 * is seeded from `rng`, so a fixed seed gives the same classes. The same as `tenantFeatures` per tenant followed by
 * `classifyFeatures`.
 */
export function classify(tenants: TenantInput[], opts: Partial<ClassifierOptions>, rng: Rng): TenantClass[] {
  const o = resolveClassifierOptions(opts);
  rejectDuplicates(tenants);
  const featured = tenants.map((t) => ({
    tenantId: t.tenantId,
    servers: t.servers,
    features: featuresOf(t.series, o),
  }));
  return clusterFeatures(featured, o, rng);
}

/**
 * The clustering step of `classify` on features extracted beforehand (`tenantFeatures`, for example one tenant at a
 * time as its history is read): the same classes as `classify` for the same tenants, options and rng.
 */
export function classifyFeatures(
  tenants: readonly FeaturedTenant[],
  opts: Partial<ClassifierOptions>,
  rng: Rng,
): TenantClass[] {
  const o = resolveClassifierOptions(opts);
  rejectDuplicates(tenants);
  return clusterFeatures(tenants, o, rng);
}

function rejectDuplicates(tenants: readonly { tenantId: string }[]): void {
  const seen = new Set<string>();
  for (const t of tenants) {
    if (seen.has(t.tenantId)) {
      throw new HarvestError("INVALID_ARGUMENT", `tenant ${t.tenantId} appears twice`, {
        details: { field: "tenantId" },
      });
    }
    seen.add(t.tenantId);
  }
}

function clusterFeatures(featured: readonly FeaturedTenant[], o: ClassifierOptions, rng: Rng): TenantClass[] {
  const classes: TenantClass[] = [];
  for (const pattern of PATTERN_ORDER) {
    const members = featured.filter((m) => m.features.pattern === pattern);
    if (members.length === 0) continue;
    const points = members.map((m) => [m.features.average, m.features.peak]);
    const labels = chooseClusters(points, o, rng);
    const groups = new Map<number, FeaturedTenant[]>();
    labels.forEach((label, i) => {
      const g = groups.get(label) ?? [];
      g.push(members[i]!);
      groups.set(label, g);
    });
    const built = [...groups.values()].map((g) => {
      // A tenant counts once per server: the class describes its servers, where tasks will run.
      const weight = (m: FeaturedTenant): number => Math.max(1, m.servers.length);
      const w = g.reduce((a, m) => a + weight(m), 0);
      const mean = (get: (f: TenantFeatures) => number): number =>
        g.reduce((a, m) => a + weight(m) * get(m.features), 0) / w;
      return {
        pattern,
        average: mean((f) => f.average),
        peak: mean((f) => f.peak),
        current: mean((f) => f.current),
        // The members' mean deviation, not the pooled one: a class's server is one member's server.
        stddev: mean((f) => f.stddev ?? 0),
        tenantIds: g.map((m) => m.tenantId),
        servers: g.flatMap((m) => m.servers),
      };
    });
    built.sort((a, b) => a.average - b.average || a.peak - b.peak);
    built.forEach((c, i) => classes.push({ id: `${pattern}-${i}`, ...c }));
  }
  return classes;
}

/** Cluster labels for `points` under the k rule of `classify`. */
function chooseClusters(points: number[][], o: ClassifierOptions, rng: Rng): number[] {
  const n = points.length;
  const maxK = Math.min(o.maxClassesPerPattern, distinctUpTo(points, o.maxClassesPerPattern));
  const one = new Array<number>(n).fill(0);
  const wss1 = withinSumOfSquares(points, one, 1);
  if (maxK <= 1 || Math.sqrt(wss1 / n) <= o.classTightnessPct) return one;
  let labels = one;
  for (let k = 2; k <= maxK; k++) {
    const seed = Math.floor(rng.next() * 2 ** 31);
    labels = kmeans(points, k, { seed, initialization: "kmeans++", maxIterations: 100 }).clusters;
    const wss = withinSumOfSquares(points, labels, k);
    if (wss <= o.wssFraction * wss1 || Math.sqrt(wss / n) <= o.classTightnessPct) break;
  }
  return labels;
}

/** The number of distinct points, counted only up to `limit`. */
function distinctUpTo(points: readonly number[][], limit: number): number {
  const seen = new Set<string>();
  for (const p of points) {
    seen.add(p.join(","));
    if (seen.size >= limit) break;
  }
  return seen.size;
}

/** Sum of squared distances of `points` to the centroid of their label (labels in 0..k-1). */
function withinSumOfSquares(points: readonly number[][], labels: readonly number[], k: number): number {
  const dims = points[0]?.length ?? 0;
  const counts = new Array<number>(k).fill(0);
  const centroids = new Array<number>(k * dims).fill(0);
  for (let i = 0; i < points.length; i++) {
    const p = points[i]!;
    const l = labels[i]!;
    counts[l]! += 1;
    for (let d = 0; d < dims; d++) centroids[l * dims + d]! += p[d]!;
  }
  for (let l = 0; l < k; l++) for (let d = 0; d < dims; d++) centroids[l * dims + d]! /= counts[l]!;
  let wss = 0;
  for (let i = 0; i < points.length; i++) {
    const p = points[i]!;
    const l = labels[i]!;
    for (let d = 0; d < dims; d++) wss += (p[d]! - centroids[l * dims + d]!) ** 2;
  }
  return wss;
}

/** The `pct` percentile of an ascending array, by linear interpolation between closest ranks. */
export function percentileSorted(sorted: readonly number[], pct: number): number {
  if (sorted.length === 0) return NaN;
  const rank = (pct / 100) * (sorted.length - 1);
  const lo = Math.floor(rank);
  const hi = Math.ceil(rank);
  return sorted[lo]! + (sorted[hi]! - sorted[lo]!) * (rank - lo);
}

function meanOf(x: readonly number[]): number {
  let sum = 0;
  for (let i = 0; i < x.length; i++) sum += x[i]!;
  return sum / x.length;
}

/** Values sampled to bracket a percentile's ranks in `percentileAndSum`; shorter series are ordered whole. */
const PERCENTILE_SAMPLE = 512;
const percentileSample = new Float64Array(PERCENTILE_SAMPLE);
/** Reused across calls (nothing here is re-entered), grown to the longest series seen. */
let percentileScratch = new Float64Array(0);

/** The `pcts` percentiles of `x` (non-empty), see `percentileAndSum`. */
function percentilesOf(x: readonly number[], pcts: readonly number[]): number[] {
  return pcts.map((pct) => percentileAndSum(x, pct).percentile);
}

/**
 * The `pct` percentile of `x` (non-empty), equal to `percentileSorted` of a sorted copy, and the sum of `x` (left to
 * right) from the same pass. No sort: order statistics of an evenly spaced sample bracket the two closest ranks (+- 3
 * standard deviations of the sample quantile), one pass counts the values below the bracket and copies those inside
 * it, and only the copies are ordered (Floyd-Rivest). When the bracket misses the ranks (an unlucky sample: a few in
 * a thousand for independent values) the whole series is copied and ordered.
 */
function percentileAndSum(x: readonly number[], pct: number): { percentile: number; sum: number } {
  const n = x.length;
  const rank = (pct / 100) * (n - 1);
  const lo = Math.floor(rank);
  const hi = Math.ceil(rank);
  if (percentileScratch.length < n) percentileScratch = new Float64Array(n);
  const a = percentileScratch;
  let sum = 0;
  let below = 0;
  let inside = 0;
  if (n >= 4 * PERCENTILE_SAMPLE) {
    const m = PERCENTILE_SAMPLE;
    const sample = percentileSample;
    for (let j = 0; j < m; j++) sample[j] = x[Math.floor(((j + 0.5) * n) / m)]!;
    const q = lo / (n - 1);
    const margin = Math.ceil(3 * Math.sqrt(m * q * (1 - q))) + 2;
    const from = Math.floor(q * (m - 1)) - margin;
    const to = Math.ceil(q * (m - 1)) + margin;
    let low = -Infinity;
    let high = Infinity;
    if (from >= 0) {
      selectNth(sample, from, 0, m - 1);
      low = sample[from]!;
    }
    if (to < m) {
      selectNth(sample, to, Math.max(0, from + 1), m - 1);
      high = sample[to]!;
    }
    for (let i = 0; i < n; i++) {
      const v = x[i]!;
      sum += v;
      if (v < low) below++;
      else if (v <= high) a[inside++] = v;
    }
  }
  if (!(below <= lo && hi < below + inside)) {
    sum = 0;
    below = 0;
    inside = n;
    for (let i = 0; i < n; i++) {
      const v = x[i]!;
      sum += v;
      a[i] = v;
    }
  }
  // Sorted, the series is: the `below` values under the bracket, then the bracket's values ordered, then the rest.
  selectNth(a, lo - below, 0, inside - 1);
  if (hi > lo) selectNth(a, hi - below, lo - below + 1, inside - 1);
  const vLo = a[lo - below]!;
  const vHi = a[hi - below]!;
  return { percentile: vLo + (vHi - vLo) * (rank - lo), sum };
}

/**
 * Partially orders a[left..right] so that a[k] holds the value it would have if sorted, everything before it is <=
 * and everything after >= (Floyd and Rivest, "Algorithm 489: SELECT", CACM 18(3), 1975; an extreme is one scan).
 */
function selectNth(a: Float64Array, k: number, left: number, right: number): void {
  if (k === left || k === right) {
    let at = k;
    if (k === left) {
      for (let i = left + 1; i <= right; i++) if (a[i]! < a[at]!) at = i;
    } else {
      for (let i = left; i < right; i++) if (a[i]! > a[at]!) at = i;
    }
    swap(a, k, at);
    return;
  }
  while (right > left) {
    if (right - left > 600) {
      // Recurse on a sample window expected to hold the k-th value, so the partition below splits right next to k.
      const n = right - left + 1;
      const m = k - left + 1;
      const z = Math.log(n);
      const s = 0.5 * Math.exp((2 * z) / 3);
      const sd = 0.5 * Math.sqrt((z * s * (n - s)) / n) * (m - n / 2 < 0 ? -1 : 1);
      const newLeft = Math.max(left, Math.floor(k - (m * s) / n + sd));
      const newRight = Math.min(right, Math.floor(k + ((n - m) * s) / n + sd));
      selectNth(a, k, newLeft, newRight);
    }
    const t = a[k]!;
    let i = left;
    let j = right;
    swap(a, left, k);
    if (a[right]! > t) swap(a, left, right);
    while (i < j) {
      swap(a, i, j);
      i++;
      j--;
      while (a[i]! < t) i++;
      while (a[j]! > t) j--;
    }
    if (a[left] === t) swap(a, left, j);
    else {
      j++;
      swap(a, j, right);
    }
    if (j <= k) left = j + 1;
    if (k <= j) right = j - 1;
  }
}

function swap(a: Float64Array, i: number, j: number): void {
  const v = a[i]!;
  a[i] = a[j]!;
  a[j] = v;
}

function invalidArg(field: string, value: unknown): HarvestError {
  return new HarvestError("INVALID_ARGUMENT", `${field} must be > 0, got ${String(value)}`, { details: { field } });
}
