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
   * The percentile taken as a tenant's "peak" utilization (not the max: one spike must not move it).
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

/** The defaults of every `ClassifierOptions` field. */
export const DEFAULT_CLASSIFIER_OPTIONS: Readonly<ClassifierOptions> = Object.freeze({
  constantMaxStdPct: 5,
  constantMaxRangePct: 0,
  periodicMinDailyShare: 0.3,
  dailyHarmonics: 3,
  binTolerance: 1,
  minDaysForPeriodic: 2,
  peakPercentile: 95,
  maxClassesPerPattern: 4,
  wssFraction: 0.2,
  classTightnessPct: 5,
});

/** Fills defaults into `options` and validates every field, naming the offending one. */
export function resolveClassifierOptions(options: Partial<ClassifierOptions> = {}): ClassifierOptions {
  const o: ClassifierOptions = { ...DEFAULT_CLASSIFIER_OPTIONS };
  for (const [k, v] of Object.entries(options)) if (v !== undefined) (o as unknown as Record<string, number>)[k] = v;
  const check = (field: keyof ClassifierOptions, ok: (v: number) => boolean, what: string): void => {
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
  check("dailyHarmonics", (v) => Number.isInteger(v) && v >= 1, "an integer >= 1");
  check("binTolerance", (v) => Number.isInteger(v) && v >= 0, "an integer >= 0");
  check("minDaysForPeriodic", (v) => v >= 1, ">= 1");
  check("peakPercentile", (v) => v > 0 && v <= 100, "in (0, 100]");
  check("maxClassesPerPattern", (v) => Number.isInteger(v) && v >= 1, "an integer >= 1");
  check("wssFraction", (v) => v >= 0 && v <= 1, "in [0, 1]");
  check("classTightnessPct", (v) => v >= 0, ">= 0");
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
}

/**
 * The utilization pattern of one (average-server) series, seeds/004 section 3.2:
 * - constant when its standard deviation is below `constantMaxStdPct` (or its p99 - p1 range below
 *   `constantMaxRangePct`): a flat level is the most useful fact for scheduling, so this test comes first;
 * - periodic when, in the FFT of the mean-removed series, the power in the bins of the daily frequency and its first
 *   `dailyHarmonics - 1` harmonics is at least `periodicMinDailyShare` of all non-DC power;
 * - unpredictable otherwise (random walks put their power at low frequencies, bursts spread it across all of them).
 *
 * The series is first put on a regular grid (`resample` at its own step). fft.js needs a power-of-two size, so the
 * mean-removed series is zero-padded at the end up to the next power of two rather than trimmed: trimming would throw
 * away up to half of the history. Zero-padding interpolates the spectrum, so the daily frequency falls on the
 * (fractional) bin `N * stepSec / 86400` and its main lobe widens to about `N / n` bins either side; each harmonic
 * band is therefore its nearest bin +- (ceil(N / n) + `binTolerance`).
 */
export function patternOf(series: UtilizationSeries, opts: Partial<ClassifierOptions> = {}): PatternProfile {
  const o = resolveClassifierOptions(opts);
  const grid = series.stepSec > 0 && series.timesMs.length > 0 ? resample(series, series.stepSec) : series;
  const x = grid.cpuPct;
  const n = x.length;
  const days = (n * grid.stepSec * 1000) / DAY_MS;
  if (n === 0) return { pattern: "constant", stdPct: 0, rangePct: 0, dailyShare: 0, days };
  const mean = x.reduce((a, b) => a + b, 0) / n;
  const stdPct = Math.sqrt(x.reduce((a, b) => a + (b - mean) ** 2, 0) / n);
  const sorted = [...x].sort((a, b) => a - b);
  const rangePct = percentileSorted(sorted, 99) - percentileSorted(sorted, 1);
  const constant = stdPct < o.constantMaxStdPct || rangePct < o.constantMaxRangePct;
  if (constant || days < o.minDaysForPeriodic) {
    return { pattern: constant ? "constant" : "unpredictable", stdPct, rangePct, dailyShare: 0, days };
  }
  const dailyShare = dailyPowerShare(x, mean, grid.stepSec, o);
  const pattern: UtilizationPattern = dailyShare >= o.periodicMinDailyShare ? "periodic" : "unpredictable";
  return { pattern, stdPct, rangePct, dailyShare, days };
}

/** Share of non-DC power of the mean-removed, zero-padded series in the daily-harmonic bands. */
function dailyPowerShare(x: number[], mean: number, stepSec: number, o: ClassifierOptions): number {
  const n = x.length;
  let size = 2;
  while (size < n) size *= 2;
  const input = new Array<number>(size).fill(0);
  for (let i = 0; i < n; i++) input[i] = x[i]! - mean;
  const fft = new FFT(size);
  const out = fft.createComplexArray() as number[];
  fft.realTransform(out, input);
  const half = size / 2;
  const power = new Array<number>(half + 1);
  let total = 0;
  for (let k = 1; k <= half; k++) {
    const p = out[2 * k]! ** 2 + out[2 * k + 1]! ** 2;
    power[k] = p;
    total += p;
  }
  if (total === 0) return 0;
  const dailyBin = (size * stepSec) / 86_400;
  const width = Math.ceil(size / n) + o.binTolerance;
  const counted = new Set<number>();
  for (let h = 1; h <= o.dailyHarmonics; h++) {
    const centre = Math.round(h * dailyBin);
    for (let k = Math.max(1, centre - width); k <= Math.min(half, centre + width); k++) counted.add(k);
  }
  let daily = 0;
  for (const k of counted) daily += power[k]!;
  return daily / total;
}

/** A tenant's features for clustering. */
export interface TenantFeatures {
  /** Mean utilization, CPU %. */
  average: number;
  /** The `peakPercentile` of the utilization, CPU %. */
  peak: number;
  /** The last value, CPU %. */
  current: number;
  pattern: UtilizationPattern;
}

/** Average, peak (a high percentile, not the max), current (last) utilization and pattern of one series. */
export function tenantFeatures(series: UtilizationSeries, opts: Partial<ClassifierOptions> = {}): TenantFeatures {
  const o = resolveClassifierOptions(opts);
  const x = series.cpuPct;
  if (x.length === 0) {
    throw new HarvestError("INVALID_ARGUMENT", `series ${series.name} is empty`, { details: { field: "series" } });
  }
  const sorted = [...x].sort((a, b) => a - b);
  return {
    average: x.reduce((a, b) => a + b, 0) / x.length,
    peak: percentileSorted(sorted, o.peakPercentile),
    current: x[x.length - 1]!,
    pattern: patternOf(series, o).pattern,
  };
}

/** One tenant to classify: its servers and its average-server series (see `averageServerSeries`). */
export interface TenantInput {
  tenantId: string;
  servers: string[];
  series: UtilizationSeries;
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
 * is seeded from `rng`, so a fixed seed gives the same classes.
 */
export function classify(tenants: TenantInput[], opts: Partial<ClassifierOptions>, rng: Rng): TenantClass[] {
  const o = resolveClassifierOptions(opts);
  const seen = new Set<string>();
  for (const t of tenants) {
    if (seen.has(t.tenantId)) {
      throw new HarvestError("INVALID_ARGUMENT", `tenant ${t.tenantId} appears twice`, {
        details: { field: "tenantId" },
      });
    }
    seen.add(t.tenantId);
  }
  const featured = tenants.map((t) => ({ tenant: t, f: tenantFeatures(t.series, o) }));
  const classes: TenantClass[] = [];
  for (const pattern of PATTERN_ORDER) {
    const members = featured.filter((m) => m.f.pattern === pattern);
    if (members.length === 0) continue;
    const points = members.map((m) => [m.f.average, m.f.peak]);
    const labels = chooseClusters(points, o, rng);
    const groups = new Map<number, typeof members>();
    labels.forEach((label, i) => {
      const g = groups.get(label) ?? [];
      g.push(members[i]!);
      groups.set(label, g);
    });
    const built = [...groups.values()].map((g) => {
      // A tenant counts once per server: the class describes its servers, where tasks will run.
      const weight = (m: (typeof g)[number]): number => Math.max(1, m.tenant.servers.length);
      const w = g.reduce((a, m) => a + weight(m), 0);
      const mean = (get: (f: TenantFeatures) => number): number => g.reduce((a, m) => a + weight(m) * get(m.f), 0) / w;
      return {
        pattern,
        average: mean((f) => f.average),
        peak: mean((f) => f.peak),
        current: mean((f) => f.current),
        tenantIds: g.map((m) => m.tenant.tenantId),
        servers: g.flatMap((m) => m.tenant.servers),
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
  const distinct = new Set(points.map((p) => p.join(","))).size;
  const maxK = Math.min(o.maxClassesPerPattern, distinct);
  const one = new Array<number>(n).fill(0);
  const wss1 = withinSumOfSquares(points, one);
  if (maxK <= 1 || Math.sqrt(wss1 / n) <= o.classTightnessPct) return one;
  let labels = one;
  for (let k = 2; k <= maxK; k++) {
    const seed = Math.floor(rng.next() * 2 ** 31);
    labels = kmeans(points, k, { seed, initialization: "kmeans++", maxIterations: 100 }).clusters;
    const wss = withinSumOfSquares(points, labels);
    if (wss <= o.wssFraction * wss1 || Math.sqrt(wss / n) <= o.classTightnessPct) break;
  }
  return labels;
}

function withinSumOfSquares(points: number[][], labels: number[]): number {
  const sums = new Map<number, { n: number; c: number[] }>();
  points.forEach((p, i) => {
    const s = sums.get(labels[i]!) ?? { n: 0, c: p.map(() => 0) };
    s.n += 1;
    p.forEach((v, d) => (s.c[d]! += v));
    sums.set(labels[i]!, s);
  });
  let wss = 0;
  points.forEach((p, i) => {
    const s = sums.get(labels[i]!)!;
    p.forEach((v, d) => (wss += (v - s.c[d]! / s.n) ** 2));
  });
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

function invalidArg(field: string, value: unknown): HarvestError {
  return new HarvestError("INVALID_ARGUMENT", `${field} must be > 0, got ${String(value)}`, { details: { field } });
}
