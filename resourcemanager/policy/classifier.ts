/**
 * Primary-tenant clustering (seeds/004, section 3.2 and the start of section 4.1): each tenant's features (average,
 * peak, current utilization and pattern, see `utilization-pattern.ts`) and K-Means classes of tenants per pattern.
 * Pure: no I/O, randomness passed in.
 */
import { kmeans } from "ml-kmeans";
import { HarvestError } from "../../common/errors.js";
import type { Rng } from "../../common/rng.js";
import type { UtilizationPattern } from "../../common/trace-gen.js";
import type { UtilizationSeries } from "../../common/trace-io.js";
import { resolveClassifierOptions } from "./classifier-options.js";
import type { ClassifierOptions } from "./classifier-options.js";
import { gridValues, patternOf, profileOf } from "./utilization-pattern.js";
import { percentileAndSum, percentilesOf } from "./percentiles.js";
export type { UtilizationPattern } from "../../common/trace-gen.js";

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
  /**
   * How long the tenant's bursts last, ms: the mean length of its runs above average + one standard deviation (one
   * step at least; absent for a series without a burst). Learning from kills holds a server that killed work this long.
   */
  burstMs?: number;
  /**
   * The mean time from one burst's start to the next, ms: the series' span over its bursts (absent for a series
   * without a burst). What a task on the tenant's servers can expect to run before the primary may take its cores back.
   */
  burstGapMs?: number;
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
  const level = average + stddev;
  const burst = meanBurstMs(grid, level, series.stepSec);
  const bursts = burstCount(grid, level);
  const burstMs =
    burst !== undefined && bursts > 0
      ? { burstMs: burst, burstGapMs: (grid.length * series.stepSec * 1000) / bursts }
      : {};
  if (grid !== x) return { average, peak, current, stddev, ...burstMs, pattern: patternOf(series, o).pattern };
  // On its own grid already: the mean serves the pattern test too. The p99 - p1 range only matters when
  // constantMaxRangePct > 0 (a range is never below 0), so it is not computed otherwise.
  let rangePct = Infinity;
  if (o.constantMaxRangePct > 0) {
    const [p1, p99] = percentilesOf(x, [1, 99]) as [number, number];
    rangePct = p99 - p1;
  }
  return {
    average,
    peak,
    current,
    stddev,
    ...burstMs,
    pattern: profileOf(x, average, rangePct, series.stepSec, o).pattern,
  };
}

/** How many runs of values of `x` lie above `level`. */
function burstCount(x: readonly number[], level: number): number {
  let runs = 0;
  let inRun = false;
  for (const v of x) {
    if (v > level && !inRun) runs++;
    inRun = v > level;
  }
  return runs;
}

/** The mean length of the runs of grid values `x` above `level`, ms (steps of `stepSec`); undefined for none. */
export function meanBurstMs(x: readonly number[], level: number, stepSec: number): number | undefined {
  if (!(stepSec > 0)) return undefined;
  let runs = 0;
  let steps = 0;
  let inRun = false;
  for (const v of x) {
    if (v > level) {
      steps++;
      if (!inRun) runs++;
      inRun = true;
    } else inRun = false;
  }
  return runs > 0 ? (steps / runs) * stepSec * 1000 : undefined;
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
  /** Server-weighted mean of the members' burst lengths (`TenantFeatures.burstMs`), ms; absent when none bursts. */
  burstMs?: number;
  /** Server-weighted mean of the members' times between bursts (`TenantFeatures.burstGapMs`), ms. */
  burstGapMs?: number;
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
  return classesByPattern(featured, (points) => chooseClusters(points, o, rng));
}

/**
 * The classes of `featured`: per pattern (in PATTERN_ORDER), `label` groups the members' (average, peak) points, and
 * each group becomes a class of its members' server-weighted means, ordered by average then peak, ids `<pattern>-<i>`.
 */
export function classesByPattern(
  featured: readonly FeaturedTenant[],
  label: (points: number[][]) => number[],
): TenantClass[] {
  const classes: TenantClass[] = [];
  for (const pattern of PATTERN_ORDER) {
    const members = featured.filter((m) => m.features.pattern === pattern);
    if (members.length === 0) continue;
    const points = members.map((m) => [m.features.average, m.features.peak]);
    const labels = label(points);
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
      const bursting = g.filter((m) => m.features.burstMs !== undefined);
      const burstWeight = bursting.reduce((a, m) => a + weight(m), 0);
      const burstMs =
        burstWeight > 0
          ? {
              burstMs: bursting.reduce((a, m) => a + weight(m) * m.features.burstMs!, 0) / burstWeight,
              burstGapMs: bursting.reduce((a, m) => a + weight(m) * (m.features.burstGapMs ?? 0), 0) / burstWeight,
            }
          : {};
      return {
        pattern,
        average: mean((f) => f.average),
        peak: mean((f) => f.peak),
        current: mean((f) => f.current),
        // The members' mean deviation, not the pooled one: a class's server is one member's server.
        stddev: mean((f) => f.stddev ?? 0),
        ...burstMs,
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
