/**
 * Utilization classifier throughput (seeds/004 sections 3.2 and 4.1).
 *
 * `--tenants` primary tenants, each an average-server series of `--days` at `--step-sec` (30 days of 2-minute samples,
 * 21,600 samples, by default), generated one at a time from `--seed` with `generateUtilization` and dropped after use,
 * so memory stays flat whatever the tenant count. Generation is not timed. Timed: `tenantFeatures` per tenant (mean,
 * p95 peak, last value, and the pattern test: standard deviation, then the daily-harmonic share of the spectrum for
 * the non-constant ones), then one `classifyFeatures` over all tenants' features (k-means per pattern).
 *
 * Mix (`--mix`): `paper` after seeds/004 section 3.2 ("the vast majority of primary tenants exhibit roughly constant
 * CPU utilization"; periodic ones "a small minority" that hold ~40 % of the servers): 70 % constant, 15 % periodic,
 * 15 % unpredictable tenants, periodic ones with 4..10 servers, the others 1..3. `even`: a third each. Constant
 * tenants skip the spectrum, so they cost a fraction of the others; the table per generated pattern shows both.
 *
 * Baseline in this process: the classifier as it was before this benchmark, kept verbatim below (`naive*`): every
 * series resampled, two spread-and-comparator sorts, a new fft.js instance and a full transform per non-constant
 * tenant, options validated on every call. It runs on the first `--baseline-tenants` tenants of the same stream (on
 * the same series, just before the optimized code), and its time per tenant of each generated pattern is extrapolated
 * to all tenants of that pattern. Its features must equal the optimized ones exactly (the spectral share differs in
 * the last digits, see `dailyPowerShare`, but no pattern may change). The baseline clustering (the old code around
 * the same ml-kmeans calls) runs on all features and must give the same classes.
 */
import { loadavg } from "node:os";
import FFT from "fft.js";
import { kmeans } from "ml-kmeans";
import { HarvestError } from "../common/errors.js";
import type { Rng } from "../common/rng.js";
import { SeededRng } from "../common/rng.js";
import { generateUtilization } from "../common/trace-gen.js";
import type { UtilizationPattern } from "../common/trace-gen.js";
import type { UtilizationSeries } from "../common/trace-io.js";
import { resample } from "../common/trace-io.js";
import {
  classesByPattern,
  classifyFeatures,
  percentileSorted,
  resolveClassifierOptions,
  tenantFeatures,
} from "../resourcemanager/index.js";
import type {
  ClassifierOptions,
  FeaturedTenant,
  PatternProfile,
  TenantClass,
  TenantFeatures,
} from "../resourcemanager/index.js";
import type { BenchDefinition, BenchReport } from "./definition.js";
import { parseFlags } from "./flags.js";
import type { FlagSpec, Flags } from "./flags.js";
import { fmt, mib, ratio, table } from "./report.js";

const FLAGS = {
  tenants: { kind: "int", default: 10_000, min: 1, help: "primary tenants to classify" },
  days: { kind: "number", default: 30, min: 0.01, help: "length of each tenant's series in days" },
  "step-sec": { kind: "number", default: 120, min: 1, help: "seconds between samples" },
  mix: { kind: "choice", default: "paper", choices: ["paper", "even"], help: "share of each generated pattern" },
  "baseline-tenants": { kind: "int", default: 200, min: 0, help: "first tenants also run through the naive code" },
  seed: { kind: "int", default: 1, min: 0, help: "seed of the generated tenants and of k-means" },
} as const satisfies Record<string, FlagSpec>;

type ClassifyFlags = Flags<typeof FLAGS>;

/** The issue's target for 10,000 tenants x 21,600 samples on this 2-core machine: features plus clustering. */
const TARGET_TOTAL_MS = 5_000;
/** A full collection, untimed, after this many generated tenants. */
const GC_EVERY_TENANTS = 100;
const PATTERNS: readonly UtilizationPattern[] = ["constant", "periodic", "unpredictable"];
/** Share of tenants generated as each pattern (same order as PATTERNS). */
const MIXES: Record<string, readonly number[]> = { paper: [0.7, 0.15, 0.15], even: [1 / 3, 1 / 3, 1 / 3] };

/** What one generated tenant looks like before its series is drawn. */
interface TenantSpec {
  tenantId: string;
  pattern: UtilizationPattern;
  servers: string[];
  meanPct: number;
  spikesPerDay: number;
  seed: number;
}

/** Tenant `i` of the stream: drawn from its own seeded source, so any prefix of the stream is the same tenants. */
function tenantSpec(i: number, f: ClassifyFlags): TenantSpec {
  const rng = new SeededRng((f.seed * 1_000_003 + i * 7_919) >>> 0);
  const shares = MIXES[f.mix]!;
  const u = rng.next();
  const pattern = u < shares[0]! ? "constant" : u < shares[0]! + shares[1]! ? "periodic" : "unpredictable";
  const serverCount = pattern === "periodic" ? 4 + rng.int(7) : 1 + rng.int(3);
  const tenantId = `tenant-${String(i).padStart(5, "0")}`;
  return {
    tenantId,
    pattern,
    servers: Array.from({ length: serverCount }, (_, s) => `${tenantId}-s${s}`),
    meanPct: 5 + rng.next() * 75,
    spikesPerDay: rng.next() < 0.2 ? 0.5 : 0,
    seed: rng.int(2 ** 31),
  };
}

/** Per generated pattern: tenants, optimized time, baseline tenants and time. */
interface PatternTiming {
  tenants: number;
  featureMs: number;
  baselineTenants: number;
  baselineMs: number;
}

/** What the run measured. */
interface ClassifyResult {
  tenants: number;
  samplesPerTenant: number;
  featureMs: number;
  clusterMs: number;
  totalMs: number;
  tenantsPerSec: number;
  generationMs: number;
  byPattern: Record<string, PatternTiming>;
  baseline: {
    tenants: number;
    featureMsExtrapolated: number;
    clusterMs: number;
    totalMsExtrapolated: number;
    featuresIdentical: number;
    classesIdentical: boolean;
  };
  /** generated pattern -> classified pattern -> tenants. */
  confusion: Record<string, Record<string, number>>;
  classes: { id: string; tenants: number; servers: number; average: number; peak: number; current: number }[];
  peakRssBytes: number;
}

async function run(argv: readonly string[], progress: (line: string) => void): Promise<BenchReport> {
  const f = parseFlags(argv, FLAGS);
  const loadBefore = loadavg();
  const o = resolveClassifierOptions({});
  const byPattern: Record<string, PatternTiming> = {};
  for (const p of PATTERNS) byPattern[p] = { tenants: 0, featureMs: 0, baselineTenants: 0, baselineMs: 0 };
  const confusion: Record<string, Record<string, number>> = {};
  for (const p of PATTERNS) confusion[p] = { constant: 0, periodic: 0, unpredictable: 0 };
  const items: FeaturedTenant[] = [];
  const baselineCount = Math.min(f["baseline-tenants"], f.tenants);
  let featureMs = 0;
  let generationMs = 0;
  let featuresIdentical = 0;
  let samplesPerTenant = 0;
  let lastProgressMs = performance.now();

  progress(`${f.tenants} tenants, ${f.days} days at ${f["step-sec"]} s, mix ${f.mix}; baseline on ${baselineCount}`);
  for (let i = 0; i < f.tenants; i++) {
    const spec = tenantSpec(i, f);
    const g0 = performance.now();
    const series = generateUtilization({
      pattern: spec.pattern,
      days: f.days,
      stepSec: f["step-sec"],
      meanPct: spec.meanPct,
      spikes: spec.spikesPerDay,
      seed: spec.seed,
      name: spec.tenantId,
      startMs: 1_700_000_000_000,
    });
    generationMs += performance.now() - g0;
    samplesPerTenant = series.cpuPct.length;
    const timing = byPattern[spec.pattern]!;

    let reference: TenantFeatures | undefined;
    if (i < baselineCount) {
      const b0 = performance.now();
      reference = naiveTenantFeatures(series, o);
      timing.baselineMs += performance.now() - b0;
      timing.baselineTenants++;
    }
    const t0 = performance.now();
    const features = tenantFeatures(series, o);
    const dt = performance.now() - t0;
    featureMs += dt;
    timing.featureMs += dt;
    timing.tenants++;
    if (reference && sameFeatures(reference, features)) featuresIdentical++;
    confusion[spec.pattern]![features.pattern]! += 1;
    items.push({ tenantId: spec.tenantId, servers: spec.servers, features });

    // The generator's garbage (hundreds of KiB per tenant) is collected here, untimed, rather than by collections
    // that would otherwise land inside the timed calls; the classifier itself allocates little.
    if (i % GC_EVERY_TENANTS === GC_EVERY_TENANTS - 1) globalThis.gc?.();
    if (performance.now() - lastProgressMs > 5_000) {
      lastProgressMs = performance.now();
      progress(`${i + 1} tenants, features ${fmt(featureMs / 1000, 2)} s, generation ${fmt(generationMs / 1000, 1)} s`);
    }
  }

  // Clustering is short and both versions spend it in the same ml-kmeans calls, so whichever ran first would pay for
  // compiling them: each runs twice, alternating, and the faster of its two runs counts.
  progress("clustering");
  let classes: TenantClass[] = [];
  let naiveClasses: TenantClass[] = [];
  let clusterMs = Infinity;
  let baselineClusterMs = Infinity;
  for (let round = 0; round < 2; round++) {
    const b0 = performance.now();
    naiveClasses = naiveClusterFeatures(items, o, new SeededRng(f.seed));
    baselineClusterMs = Math.min(baselineClusterMs, performance.now() - b0);
    const c0 = performance.now();
    classes = classifyFeatures(items, o, new SeededRng(f.seed));
    clusterMs = Math.min(clusterMs, performance.now() - c0);
  }

  // Each pattern's baseline time per tenant, times that pattern's tenants; a pattern the baseline never saw takes
  // the mean over all baseline tenants.
  let baselineMsAll = 0;
  let baselineTenantsAll = 0;
  for (const t of Object.values(byPattern)) {
    baselineMsAll += t.baselineMs;
    baselineTenantsAll += t.baselineTenants;
  }
  let featureMsExtrapolated = 0;
  for (const t of Object.values(byPattern)) {
    const perTenant = t.baselineTenants > 0 ? t.baselineMs / t.baselineTenants : baselineMsAll / baselineTenantsAll;
    featureMsExtrapolated += t.tenants > 0 ? perTenant * t.tenants : 0;
  }

  const result: ClassifyResult = {
    tenants: f.tenants,
    samplesPerTenant,
    featureMs,
    clusterMs,
    totalMs: featureMs + clusterMs,
    tenantsPerSec: f.tenants / (featureMs / 1000),
    generationMs,
    byPattern,
    baseline: {
      tenants: baselineCount,
      featureMsExtrapolated: baselineCount > 0 ? featureMsExtrapolated : NaN,
      clusterMs: baselineClusterMs,
      totalMsExtrapolated: baselineCount > 0 ? featureMsExtrapolated + baselineClusterMs : NaN,
      featuresIdentical,
      classesIdentical: JSON.stringify(naiveClasses) === JSON.stringify(classes),
    },
    confusion,
    classes: classes.map((c) => ({
      id: c.id,
      tenants: c.tenantIds.length,
      servers: c.servers.length,
      average: c.average,
      peak: c.peak,
      current: c.current,
    })),
    peakRssBytes: process.resourceUsage().maxRSS * 1024,
  };
  return {
    lines: reportLines(result, f, loadBefore, loadavg()),
    result: { flags: f, loadAverageBefore: loadBefore, loadAverageAfter: loadavg(), ...result },
  };
}

function sameFeatures(a: TenantFeatures, b: TenantFeatures): boolean {
  return a.average === b.average && a.peak === b.peak && a.current === b.current && a.pattern === b.pattern;
}

function reportLines(r: ClassifyResult, f: ClassifyFlags, loadBefore: number[], loadAfter: number[]): string[] {
  const b = r.baseline;
  const shares = MIXES[f.mix]!.map((s, i) => `${fmt(s * 100, 0)} % ${PATTERNS[i]}`).join(", ");
  const perTenant = (ms: number, n: number): string => (n > 0 ? fmt(ms / n, 3) : "-");
  const perSec = (ms: number, n: number): string => (ms > 0 ? fmt(n / (ms / 1000), 0) : "-");
  const lines = [
    `machine load average before / after: ${loadBefore.map((x) => fmt(x, 2)).join(" ")} / ${loadAfter.map((x) => fmt(x, 2)).join(" ")}`,
    `classify: ${r.tenants.toLocaleString("en-US")} tenants (mix ${f.mix}: ${shares}),` +
      ` ${r.samplesPerTenant.toLocaleString("en-US")} samples each (${fmt(f.days, 1)} days at ${fmt(f["step-sec"], 0)} s), seed ${f.seed}`,
    "",
    ...table(
      ["timed work", "total s", "ms/tenant", "tenants/s", "vs baseline"],
      [
        [
          "feature extraction (tenantFeatures)",
          fmt(r.featureMs / 1000, 3),
          perTenant(r.featureMs, r.tenants),
          perSec(r.featureMs, r.tenants),
          ratio(b.featureMsExtrapolated, r.featureMs),
        ],
        ["clustering (classifyFeatures)", fmt(r.clusterMs / 1000, 3), "", "", ratio(b.clusterMs, r.clusterMs)],
        [
          "total",
          fmt(r.totalMs / 1000, 3),
          perTenant(r.totalMs, r.tenants),
          perSec(r.totalMs, r.tenants),
          ratio(b.totalMsExtrapolated, r.totalMs),
        ],
        [
          `baseline features (${b.tenants} tenants, extrapolated)`,
          fmt(b.featureMsExtrapolated / 1000, 1),
          perTenant(b.featureMsExtrapolated, r.tenants),
          perSec(b.featureMsExtrapolated, r.tenants),
          "",
        ],
        ["baseline clustering (all tenants)", fmt(b.clusterMs / 1000, 3), "", "", ""],
        [
          "baseline total",
          fmt(b.totalMsExtrapolated / 1000, 1),
          perTenant(b.totalMsExtrapolated, r.tenants),
          perSec(b.totalMsExtrapolated, r.tenants),
          "",
        ],
      ],
    ),
    "",
    `total vs target < ${fmt(TARGET_TOTAL_MS / 1000, 0)} s (10,000 x 21,600 samples): ${fmt(r.totalMs / 1000, 2)} s` +
      (r.tenants === 10_000 && r.samplesPerTenant === 21_600
        ? ` (${r.totalMs < TARGET_TOTAL_MS ? "met" : "NOT met"})`
        : " (other size: not comparable)"),
    `checks: baseline features identical on ${b.featuresIdentical}/${b.tenants} tenants;` +
      ` baseline classes ${b.classesIdentical ? "identical" : "DIFFERENT"}`,
    "",
    ...table(
      ["by generated pattern", "tenants", "ms/tenant", "baseline tenants", "baseline ms/tenant", "speed-up"],
      PATTERNS.map((p) => {
        const t = r.byPattern[p]!;
        return [
          p,
          t.tenants.toLocaleString("en-US"),
          perTenant(t.featureMs, t.tenants),
          String(t.baselineTenants),
          perTenant(t.baselineMs, t.baselineTenants),
          t.baselineTenants > 0 && t.tenants > 0
            ? ratio(t.baselineMs / t.baselineTenants, t.featureMs / t.tenants)
            : "-",
        ];
      }),
    ),
    "",
    ...table(
      ["generated \\ classified", ...PATTERNS],
      PATTERNS.map((p) => [p, ...PATTERNS.map((q) => r.confusion[p]![q]!.toLocaleString("en-US"))]),
    ),
    "",
    ...table(
      ["class", "tenants", "servers", "average %", "peak %", "current %"],
      r.classes.map((c) => [
        c.id,
        c.tenants.toLocaleString("en-US"),
        c.servers.toLocaleString("en-US"),
        fmt(c.average, 1),
        fmt(c.peak, 1),
        fmt(c.current, 1),
      ]),
    ),
    "",
    `classes per pattern: ${PATTERNS.map((p) => `${p} ${r.classes.filter((c) => c.id.startsWith(`${p}-`)).length}`).join(", ")}`,
    `untimed series generation: ${fmt(r.generationMs / 1000, 1)} s; peak RSS of the process: ${mib(r.peakRssBytes)}`,
  ];
  return lines;
}

// ------------------------------------------------------------------------------------------------ baseline
// The classifier before this benchmark (resourcemanager/policy/classifier.ts at 80be208), kept verbatim apart from names and
// the `naiveResolve` wrapper: resolving a fresh copy validates every field, as the old resolve did on every call. The
// grouping of clustered tenants into classes was not optimized: the baseline shares the live `classesByPattern`.

const DAY_MS = 86_400_000;

function naiveResolve(opts: Partial<ClassifierOptions>): ClassifierOptions {
  return resolveClassifierOptions({ ...opts });
}

function naivePatternOf(series: UtilizationSeries, opts: Partial<ClassifierOptions> = {}): PatternProfile {
  const o = naiveResolve(opts);
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
  const dailyShare = naiveDailyPowerShare(x, mean, grid.stepSec, o);
  const pattern: UtilizationPattern = dailyShare >= o.periodicMinDailyShare ? "periodic" : "unpredictable";
  return { pattern, stdPct, rangePct, dailyShare, days };
}

function naiveDailyPowerShare(x: number[], mean: number, stepSec: number, o: ClassifierOptions): number {
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

function naiveTenantFeatures(series: UtilizationSeries, opts: Partial<ClassifierOptions> = {}): TenantFeatures {
  const o = naiveResolve(opts);
  const x = series.cpuPct;
  if (x.length === 0) {
    throw new HarvestError("INVALID_ARGUMENT", `series ${series.name} is empty`, { details: { field: "series" } });
  }
  const sorted = [...x].sort((a, b) => a - b);
  const average = x.reduce((a, b) => a + b, 0) / x.length;
  return {
    average,
    peak: percentileSorted(sorted, o.peakPercentile),
    current: x[x.length - 1]!,
    stddev: Math.sqrt(x.reduce((a, v) => a + (v - average) * (v - average), 0) / x.length),
    pattern: naivePatternOf(series, o).pattern,
  };
}

/** The clustering half of the old `classify`, on features already extracted: the old k rule, the same classes (exported for its test). */
export function naiveClusterFeatures(
  featured: readonly FeaturedTenant[],
  opts: Partial<ClassifierOptions>,
  rng: Rng,
): TenantClass[] {
  const o = naiveResolve(opts);
  return classesByPattern(featured, (points) => naiveChooseClusters(points, o, rng));
}

function naiveChooseClusters(points: number[][], o: ClassifierOptions, rng: Rng): number[] {
  const n = points.length;
  const distinct = new Set(points.map((p) => p.join(","))).size;
  const maxK = Math.min(o.maxClassesPerPattern, distinct);
  const one = new Array<number>(n).fill(0);
  const wss1 = naiveWithinSumOfSquares(points, one);
  if (maxK <= 1 || Math.sqrt(wss1 / n) <= o.classTightnessPct) return one;
  let labels = one;
  for (let k = 2; k <= maxK; k++) {
    const seed = Math.floor(rng.next() * 2 ** 31);
    labels = kmeans(points, k, { seed, initialization: "kmeans++", maxIterations: 100 }).clusters;
    const wss = naiveWithinSumOfSquares(points, labels);
    if (wss <= o.wssFraction * wss1 || Math.sqrt(wss / n) <= o.classTightnessPct) break;
  }
  return labels;
}

function naiveWithinSumOfSquares(points: number[][], labels: number[]): number {
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

/** `classify`: features (average, p95 peak, FFT pattern) and k-means classes of 10,000 tenants x 30 days. */
export const classifyBench: BenchDefinition = {
  name: "classify",
  summary: "utilization classifier: features and k-means classes of 10,000 tenants x 30 days at 2 min",
  flags: FLAGS,
  run,
};
