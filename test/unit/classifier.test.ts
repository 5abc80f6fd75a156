import { join } from "node:path";
import FFT from "fft.js";
import { describe, expect, it } from "vitest";
import { detailsOf, HarvestError } from "../../common/errors.js";
import { sharedDataDir } from "../../common/paths.js";
import { SeededRng } from "../../common/rng.js";
import { generateUtilization } from "../../common/trace-gen.js";
import type { UtilizationSeries } from "../../common/trace-io.js";
import { readUtilizationFile, resample } from "../../common/trace-io.js";
import type { TenantInput } from "../../resourcemanager/policy/classifier.js";
import { averageServerSeries } from "../../resourcemanager/policy/average-server.js";
import { classify, classifyFeatures, tenantFeatures } from "../../resourcemanager/policy/classifier.js";
import { naiveClusterFeatures } from "../../bench/classify.js";
import { patternOf } from "../../resourcemanager/policy/utilization-pattern.js";
import { percentileSorted } from "../../resourcemanager/policy/percentiles.js";
import { resolveClassifierOptions } from "../../resourcemanager/policy/classifier-options.js";

const STEP_SEC = 300;
const DAY_STEPS = 86_400 / STEP_SEC;

function series(name: string, cpuPct: number[], stepSec = STEP_SEC, startMs = 0): UtilizationSeries {
  return { name, stepSec, startMs, timesMs: cpuPct.map((_, i) => startMs + i * stepSec * 1000), cpuPct };
}

function clamp(v: number): number {
  return Math.min(100, Math.max(0, v));
}

/** A constant tenant near `meanPct` (noise sd 1.5) on `servers` servers. */
function constantTenant(tenantId: string, meanPct: number, seed: number, servers = 1): TenantInput {
  return {
    tenantId,
    servers: Array.from({ length: servers }, (_, i) => `${tenantId}-s${i}`),
    series: generateUtilization({ pattern: "constant", days: 7, stepSec: STEP_SEC, meanPct, seed }),
  };
}

describe("patternOf on synthetic series", () => {
  it("calls a daily sine with noise periodic", () => {
    for (const seed of [1, 2, 3]) {
      const s = generateUtilization({ pattern: "periodic", days: 14, stepSec: STEP_SEC, meanPct: 40, seed });
      expect(patternOf(s).pattern).toBe("periodic");
    }
  });

  it("calls a hand-built daily sine sampled every two minutes periodic", () => {
    const rng = new SeededRng(5);
    const perDay = 720;
    const x = Array.from({ length: 30 * perDay }, (_, i) =>
      clamp(50 + 25 * Math.sin((2 * Math.PI * i) / perDay) + rng.normal(0, 5)),
    );
    expect(patternOf(series("sine", x, 120)).pattern).toBe("periodic");
  });

  it("does not call a week of random walk periodic, although the walk puts much of its power in the daily band", () => {
    // Over 7 days the 24 h band lies among the lowest frequencies, where a random walk's 1/f^2 spectrum is strong.
    let highShare = 0;
    for (let seed = 1; seed <= 20; seed++) {
      const rng = new SeededRng(seed);
      let w = 50;
      const x = Array.from({ length: 7 * DAY_STEPS }, () => (w = Math.min(95, Math.max(5, w + rng.normal(0, 6)))));
      const p = patternOf(series("walk", x));
      if (p.dailyShare >= 0.3) highShare++;
      expect(p.pattern, `seed ${seed}: share ${p.dailyShare}, peak ratio ${p.peakRatio}`).toBe("unpredictable");
    }
    // The share test alone would have called most of them periodic.
    expect(highShare).toBeGreaterThan(10);
    // ... and the peak test is what stops them: without it, they pass.
    const rng = new SeededRng(7);
    let w = 50;
    const x = Array.from({ length: 7 * DAY_STEPS }, () => (w = Math.min(95, Math.max(5, w + rng.normal(0, 6)))));
    expect(patternOf(series("walk", x), { periodicMinPeakRatio: 0 }).pattern).toBe("periodic");
  });

  it("calls a flat level with small noise constant", () => {
    for (const seed of [1, 2, 3]) {
      const s = generateUtilization({ pattern: "constant", days: 14, stepSec: STEP_SEC, meanPct: 35, seed });
      expect(patternOf(s).pattern).toBe("constant");
    }
  });

  it("calls a random walk unpredictable", () => {
    for (const seed of [11, 12, 13]) {
      const rng = new SeededRng(seed);
      let level = 50;
      const x: number[] = [];
      for (let i = 0; i < 14 * DAY_STEPS; i++) {
        level = clamp(level + rng.normal(0, 1.5));
        x.push(level);
      }
      expect(patternOf(series(`walk-${seed}`, x)).pattern).toBe("unpredictable");
    }
  });

  it("calls random bursts on a low base unpredictable", () => {
    for (const seed of [21, 22, 23]) {
      const rng = new SeededRng(seed);
      const x: number[] = [];
      let burstLeft = 0;
      for (let i = 0; i < 14 * DAY_STEPS; i++) {
        if (burstLeft === 0 && rng.next() < 0.01) burstLeft = 1 + rng.int(24);
        x.push(clamp((burstLeft > 0 ? 80 : 10) + rng.normal(0, 2)));
        if (burstLeft > 0) burstLeft--;
      }
      expect(patternOf(series(`bursts-${seed}`, x)).pattern).toBe("unpredictable");
    }
  });

  it("calls the generator's regime-and-burst series unpredictable", () => {
    for (const seed of [1, 2, 3]) {
      const s = generateUtilization({ pattern: "unpredictable", days: 14, stepSec: STEP_SEC, meanPct: 40, seed });
      expect(patternOf(s).pattern).toBe("unpredictable");
    }
  });
});

/** The daily share as the classifier first computed it: one full fft.js transform of the zero-padded series. */
function fftDailyShare(s: UtilizationSeries, dailyHarmonics: number, binTolerance = 1): number {
  const x = s.cpuPct;
  const n = x.length;
  const mean = x.reduce((a, b) => a + b, 0) / n;
  let size = 2;
  while (size < n) size *= 2;
  const input = new Array<number>(size).fill(0);
  for (let i = 0; i < n; i++) input[i] = x[i]! - mean;
  const fft = new FFT(size);
  const out = fft.createComplexArray() as number[];
  fft.realTransform(out, input);
  const half = size / 2;
  const power = (k: number): number => out[2 * k]! ** 2 + out[2 * k + 1]! ** 2;
  let total = 0;
  for (let k = 1; k <= half; k++) total += power(k);
  const width = Math.ceil(size / n) + binTolerance;
  const counted = new Set<number>();
  for (let h = 1; h <= dailyHarmonics; h++) {
    const centre = Math.round((h * size * s.stepSec) / 86_400);
    for (let k = Math.max(1, centre - width); k <= Math.min(half, centre + width); k++) counted.add(k);
  }
  let daily = 0;
  for (const k of counted) daily += power(k);
  return daily / total;
}

describe("patternOf's spectrum and grid", () => {
  it("finds the daily share a full FFT finds, with few harmonics (bin by bin) and with many (full transform)", () => {
    for (const pattern of ["periodic", "unpredictable"] as const) {
      for (const [days, stepSec] of [
        [30, 120],
        [14, STEP_SEC],
        [3, 37],
      ] as const) {
        const s = generateUtilization({ pattern, days, stepSec, meanPct: 45, seed: 17 });
        for (const dailyHarmonics of [3, 20]) {
          const share = patternOf(s, { dailyHarmonics, constantMaxStdPct: 0.1 }).dailyShare;
          expect(share, `${pattern} ${days} d at ${stepSec} s, ${dailyHarmonics} harmonics`).toBeCloseTo(
            fftDailyShare(s, dailyHarmonics),
            9,
          );
        }
      }
    }
  });

  it("judges a series on its own grid as it judges the resampled one", () => {
    const s = generateUtilization({ pattern: "periodic", days: 7, stepSec: STEP_SEC, meanPct: 40, seed: 4 });
    // A sample moved within its slot forces the resampling path, which must give the very same profile.
    const moved = { ...s, timesMs: s.timesMs.map((t, i) => (i === 100 ? t + 1_000 : t)) };
    expect(patternOf(s)).toEqual(patternOf(moved));
    expect(tenantFeatures(s)).toEqual(tenantFeatures(moved));
  });

  it("resamples a series with gaps and jitter before judging it", () => {
    const s = generateUtilization({ pattern: "periodic", days: 7, stepSec: STEP_SEC, meanPct: 40, seed: 5 });
    const keep = s.timesMs.map((_, i) => i % 13 !== 4);
    const gappy = {
      ...s,
      timesMs: s.timesMs.filter((_, i) => keep[i]).map((t, i) => t + (i % 3) * 7_000),
      cpuPct: s.cpuPct.filter((_, i) => keep[i]),
    };
    const grid = resample(gappy, gappy.stepSec);
    expect(patternOf(gappy)).toEqual(patternOf(grid));
    expect(tenantFeatures(gappy).pattern).toBe(tenantFeatures(grid).pattern);
  });
});

describe("tenantFeatures", () => {
  it("takes the peak as a high percentile, so one outlier spike does not move it", () => {
    const x = Array.from({ length: 2000 }, (_, i) => 30 + (i % 10)); // 30..39, p95 is 39
    const spiked = [...x];
    spiked[777] = 100;
    const f = tenantFeatures(series("spiked", spiked));
    expect(f.peak).toBeCloseTo(39, 6);
    expect(Math.max(...spiked)).toBe(100);
  });

  it("reports the last value as current and the mean as average", () => {
    const f = tenantFeatures(series("ramp", [10, 20, 30, 40]));
    expect(f.current).toBe(40);
    expect(f.average).toBe(25);
  });

  it("follows a configured peak percentile", () => {
    const x = Array.from({ length: 101 }, (_, i) => i); // 0..100
    expect(tenantFeatures(series("ramp", x), { peakPercentile: 50 }).peak).toBe(50);
  });

  it("takes every percentile exactly as a full sort would, ties and unlucky samples included", () => {
    const rng = new SeededRng(8);
    const noisy = Array.from({ length: 21_600 }, () => rng.next() * 100);
    const ties = noisy.map((v) => Math.round(v / 10) * 10);
    // Zeros exactly where an evenly spaced sample of 512 looks, the rest 100..200: the sample sees only zeros, so its
    // bracket misses the high ranks and the whole series must be ordered instead.
    const looked = new Set(Array.from({ length: 512 }, (_, j) => Math.floor(((j + 0.5) * noisy.length) / 512)));
    const aliased = noisy.map((v, i) => (looked.has(i) ? 0 : 100 + v));
    const short = noisy.slice(0, 500);
    for (const x of [noisy, ties, aliased, short]) {
      const sorted = [...x].sort((a, b) => a - b);
      for (const peakPercentile of [0.5, 1, 50, 87.5, 95, 99, 100]) {
        const f = tenantFeatures(series("p", x, 120), { peakPercentile });
        expect(f.peak).toBe(percentileSorted(sorted, peakPercentile));
      }
    }
  });
});

describe("averageServerSeries", () => {
  it("averages servers of different granularities slot by slot", () => {
    const hour = 3_600_000;
    const a = series("a", new Array<number>(30).fill(20), 120); // one hour at 2 min
    const b = series("b", new Array<number>(12).fill(60), 300); // one hour at 5 min
    const avg = averageServerSeries([a, b], { slotSec: 120, endMs: hour });
    expect(avg.cpuPct).toHaveLength(30);
    for (const v of avg.cpuPct) expect(v).toBeCloseTo(40, 9);
  });

  it("holds a server's previous value through slots without samples", () => {
    const s = {
      name: "gappy",
      stepSec: 120,
      startMs: 0,
      timesMs: [0, 120_000, 600_000],
      cpuPct: [10, 30, 50],
    };
    const avg = averageServerSeries([s], { slotSec: 120, endMs: 720_000 });
    expect(avg.cpuPct).toEqual([10, 30, 30, 30, 30, 50]);
  });

  it("keeps only the window before endMs", () => {
    const day = series(
      "day",
      new Array<number>(2 * DAY_STEPS).fill(0).map((_, i) => (i < DAY_STEPS ? 0 : 80)),
    );
    const avg = averageServerSeries([day], { slotSec: STEP_SEC, windowDays: 1, endMs: 2 * 86_400_000 });
    expect(avg.cpuPct).toHaveLength(DAY_STEPS);
    expect(avg.cpuPct.every((v) => v === 80)).toBe(true);
  });
});

describe("classify", () => {
  it("separates constant tenants near 10 % from those near 70 % into two classes", () => {
    const low = [8, 10, 12].map((m, i) => constantTenant(`low-${i}`, m, 100 + i));
    const high = [68, 70, 72].map((m, i) => constantTenant(`high-${i}`, m, 200 + i, 2));
    const classes = classify([...high, ...low], {}, new SeededRng(1));
    expect(classes.map((c) => c.id)).toEqual(["constant-0", "constant-1"]);
    expect(classes[0]!.tenantIds.sort()).toEqual(["low-0", "low-1", "low-2"]);
    expect(classes[1]!.tenantIds.sort()).toEqual(["high-0", "high-1", "high-2"]);
    expect(classes[0]!.average).toBeGreaterThan(8);
    expect(classes[0]!.average).toBeLessThan(12);
    expect(classes[1]!.average).toBeGreaterThan(68);
    expect(classes[1]!.average).toBeLessThan(72);
    expect(classes[1]!.servers).toHaveLength(6);
  });

  it("keeps one class for tenants that all look alike", () => {
    const alike = [30, 31, 32, 33].map((m, i) => constantTenant(`t-${i}`, m, 300 + i));
    const classes = classify(alike, {}, new SeededRng(1));
    expect(classes).toHaveLength(1);
    expect(classes[0]!.tenantIds).toHaveLength(4);
  });

  it("puts periodic and constant tenants in classes of their own pattern", () => {
    const periodic = [1, 2].map((seed) => ({
      tenantId: `web-${seed}`,
      servers: [`web-${seed}`],
      series: generateUtilization({ pattern: "periodic", days: 7, stepSec: STEP_SEC, meanPct: 40, seed }),
    }));
    const classes = classify([...periodic, constantTenant("crawler", 40, 9)], {}, new SeededRng(3));
    expect(classes.map((c) => [c.id, c.tenantIds])).toEqual([
      ["periodic-0", ["web-1", "web-2"]],
      ["constant-0", ["crawler"]],
    ]);
  });

  it("weights class utilization by servers", () => {
    const a = { ...constantTenant("a", 20, 1, 3), series: series("a", new Array<number>(2016).fill(20)) };
    const b = { ...constantTenant("b", 24, 2, 1), series: series("b", new Array<number>(2016).fill(24)) };
    const [only] = classify([a, b], {}, new SeededRng(1));
    expect(only!.average).toBeCloseTo(21, 9); // (3 x 20 + 1 x 24) / 4
    expect(only!.current).toBeCloseTo(21, 9);
  });

  it("gives the same classes for the same seed", () => {
    const tenants = [5, 15, 25, 40, 55, 60, 80, 90].map((m, i) => constantTenant(`t-${i}`, m, 400 + i));
    const first = classify(tenants, {}, new SeededRng(42));
    const second = classify(tenants, {}, new SeededRng(42));
    expect(second).toEqual(first);
    expect(first.length).toBeGreaterThan(1);
    expect(first.length).toBeLessThanOrEqual(4);
  });

  it("never makes more classes than maxClassesPerPattern", () => {
    const tenants = [5, 25, 45, 65, 85].map((m, i) => constantTenant(`t-${i}`, m, 500 + i));
    expect(classify(tenants, { maxClassesPerPattern: 2 }, new SeededRng(1))).toHaveLength(2);
  });

  it("rejects a tenant listed twice", () => {
    const t = constantTenant("dup", 10, 1);
    expect(() => classify([t, t], {}, new SeededRng(1))).toThrow(HarvestError);
  });

  it("gives the same classes from features extracted one tenant at a time (classifyFeatures)", () => {
    const patterns = ["periodic", "constant", "unpredictable"] as const;
    const tenants: TenantInput[] = Array.from({ length: 24 }, (_, i) => ({
      tenantId: `t-${i}`,
      servers: Array.from({ length: 1 + (i % 3) }, (_, s) => `t-${i}-s${s}`),
      series: generateUtilization({
        pattern: patterns[i % 3]!,
        days: 7,
        stepSec: STEP_SEC,
        meanPct: 10 + ((i * 29) % 80),
        seed: 600 + i,
      }),
    }));
    const options = { maxClassesPerPattern: 3 };
    const whole = classify(tenants, options, new SeededRng(7));
    const resolved = resolveClassifierOptions(options);
    const featured = tenants.map((t) => ({
      tenantId: t.tenantId,
      servers: t.servers,
      features: tenantFeatures(t.series, resolved),
    }));
    expect(classifyFeatures(featured, options, new SeededRng(7))).toEqual(whole);
    expect(new Set(whole.map((c) => c.pattern))).toEqual(new Set(patterns));
  });

  it("rejects a tenant listed twice among features", () => {
    const features = tenantFeatures(constantTenant("dup", 10, 1).series);
    const t = { tenantId: "dup", servers: ["s"], features };
    expect(() => classifyFeatures([t, t], {}, new SeededRng(1))).toThrow(HarvestError);
  });
});

describe("resolveClassifierOptions", () => {
  it("returns resolved options as they are, frozen", () => {
    const resolved = resolveClassifierOptions({ peakPercentile: 90 });
    expect(resolveClassifierOptions(resolved)).toBe(resolved);
    expect(Object.isFrozen(resolved)).toBe(true);
    expect(resolved.peakPercentile).toBe(90);
  });

  it("names the invalid field", () => {
    try {
      resolveClassifierOptions({ periodicMinDailyShare: 2 });
      expect.unreachable();
    } catch (err) {
      expect(err).toBeInstanceOf(HarvestError);
      expect((err as HarvestError).code).toBe("CONFIG_INVALID");
      expect(detailsOf(err as HarvestError, "INVALID_ARGUMENT", "CONFIG_INVALID")?.field).toBe("periodicMinDailyShare");
    }
  });
});

const dataDir = sharedDataDir();
if (!dataDir) console.warn("classifier.test: ../shared/data not found, skipping the real-trace pattern tests");

describe.skipIf(!dataDir)("patternOf on the real traces in shared/data", () => {
  const read = (rel: string): Promise<UtilizationSeries> =>
    readUtilizationFile(join(dataDir!, rel), undefined, { duplicateTimes: "merge" });
  const bitbrains = (vm: number): string => join("bitbrains_rnd_2013-7", "raw", `${vm}.csv`);

  it("calls Bitbrains VMs 288 and 411 periodic", async () => {
    for (const vm of [288, 411]) expect(patternOf(await read(bitbrains(vm))).pattern, `VM ${vm}`).toBe("periodic");
  });

  it("calls Bitbrains VMs 239 and 9 constant", async () => {
    for (const vm of [239, 9]) expect(patternOf(await read(bitbrains(vm))).pattern, `VM ${vm}`).toBe("constant");
  });

  it("does not call NAB's bursty EC2 series periodic", async () => {
    for (const id of ["77c1ca", "fe7f93"]) {
      const s = await read(join("nab_aws_cloudwatch", "realAWSCloudwatch", `ec2_cpu_utilization_${id}.csv`));
      expect(patternOf(s).pattern, id).not.toBe("periodic");
    }
  });
});

describe("the classify bench's baseline clustering", () => {
  // 30 tenants over the three patterns, in two clear utilization groups each, with some spread inside a group.
  const featured = Array.from({ length: 30 }, (_, i) => {
    const pattern = (["periodic", "constant", "unpredictable"] as const)[i % 3]!;
    const average = (i % 2 === 0 ? 10 : 70) + (i % 5);
    return {
      tenantId: `t${i}`,
      servers: Array.from({ length: 1 + (i % 3) }, (_, s) => `s${i}-${s}`),
      features: { average, peak: average + 15 + (i % 4), current: average, stddev: 3 + (i % 2), pattern },
    };
  });

  it("gives the live classes, stddev included, so that the bench can report them identical", () => {
    const o = resolveClassifierOptions({});
    const live = classifyFeatures(featured, o, new SeededRng(7));
    expect(live.length).toBeGreaterThan(3);
    expect(naiveClusterFeatures(featured, o, new SeededRng(7))).toEqual(live);
  });
});
