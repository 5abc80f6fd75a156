/** The classifier's thresholds (pattern test and clustering), their defaults and their validation. */
import { HarvestError } from "../../common/errors.js";

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
