/**
 * Issue 13: tenants whose load repeats every day as a short burst (a nightly backup, a batch window) are periodic by
 * the day fold, a burst on one weekday only is not, other labels do not move, and the "median-daily-max" peak sees the
 * burst that the p95 misses.
 */
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { HarvestError } from "../../common/errors.js";
import { sharedDataDir } from "../../common/paths.js";
import { SeededRng } from "../../common/rng.js";
import type { UtilizationSeries } from "../../common/trace-io.js";
import { readUtilizationFile } from "../../common/trace-io.js";
import { patternOf, resolveClassifierOptions, tenantFeatures } from "../../resourcemanager/classifier.js";

const STEP_SEC = 300;
const DAY_STEPS = 86_400 / STEP_SEC;
const BASE_PCT = 5;
const WIDTHS_MIN = [30, 60, 120, 180];
const HEIGHTS_PCT = [20, 45, 80];
/** The spectral rule alone: the day fold switched off. */
const SPECTRAL_ONLY = { dailyFoldMinCorrelation: 0 };
/** The day fold on, at the threshold its option documents (it is off by default until it tells hourly spikes apart). */
const DAILY_FOLD = { dailyFoldMinCorrelation: 0.6 };

function series(name: string, cpuPct: number[], stepSec = STEP_SEC): UtilizationSeries {
  return { name, stepSec, startMs: 0, timesMs: cpuPct.map((_, i) => i * stepSec * 1000), cpuPct };
}

function clamp(v: number): number {
  return Math.min(100, Math.max(0, v));
}

/**
 * `days` days at `stepSec` of a `BASE_PCT` level with noise (sd 1.5), bursting to `heightPct` for `widthMin` minutes
 * from `startHour` on the days `burstDay` accepts (day 0 is a Monday).
 */
function bursts(opts: {
  days: number;
  widthMin: number;
  heightPct: number;
  seed: number;
  stepSec?: number;
  startHour?: number;
  burstDay?: (day: number) => boolean;
}): UtilizationSeries {
  const stepSec = opts.stepSec ?? STEP_SEC;
  const perDay = 86_400 / stepSec;
  const rng = new SeededRng(opts.seed);
  const from = ((opts.startHour ?? 2) * 3600) / stepSec;
  const to = from + (opts.widthMin * 60) / stepSec;
  const x = Array.from({ length: opts.days * perDay }, (_, i) => {
    const day = Math.floor(i / perDay);
    const slot = i % perDay;
    const on = slot >= from && slot < to && (opts.burstDay ?? (() => true))(day);
    return clamp((on ? opts.heightPct : BASE_PCT) + rng.normal(0, 1.5));
  });
  return series(`burst-${opts.widthMin}m-${opts.heightPct}`, x, stepSec);
}

describe("daily bursts (day fold)", () => {
  it("calls daily bursts of 30 min to 3 h at 20, 45 and 80 % over a 5 % base periodic, most of which the spectral rule misses", () => {
    let spectralMisses = 0;
    let minFold = Infinity;
    for (const widthMin of WIDTHS_MIN) {
      for (const heightPct of HEIGHTS_PCT) {
        for (const [days, seed] of [
          [14, 1],
          [30, 2],
          [7, 3],
        ] as const) {
          const s = bursts({ days, widthMin, heightPct, seed: seed * 100 + widthMin + heightPct });
          const p = patternOf(s, DAILY_FOLD);
          expect(p.pattern, `${widthMin} min at ${heightPct} % over ${days} d: ${JSON.stringify(p)}`).toBe("periodic");
          if (patternOf(s, SPECTRAL_ONLY).pattern !== "periodic") {
            spectralMisses++;
            expect(p.foldCorrelation!).toBeGreaterThanOrEqual(0.6);
            minFold = Math.min(minFold, p.foldCorrelation!);
          }
        }
      }
    }
    // The spectral rule alone calls most of them constant (a low burst) or unpredictable.
    expect(spectralMisses).toBeGreaterThan(WIDTHS_MIN.length * HEIGHTS_PCT.length * 3 * 0.5);
  });

  it("finds a daily burst sampled every two minutes, and one that crosses the series' day boundary", () => {
    expect(
      patternOf(bursts({ days: 30, widthMin: 60, heightPct: 45, seed: 9, stepSec: 120 }), DAILY_FOLD).pattern,
    ).toBe("periodic");
    // The series starts at 00:00; the burst runs 23:30 to 00:30, half at the end of each fold day and half at the start.
    const x = bursts({ days: 14, widthMin: 30, heightPct: 45, seed: 10, startHour: 23.5 }).cpuPct.map((v, i) =>
      i % DAY_STEPS < 6 && i >= DAY_STEPS ? clamp(45 + (v - BASE_PCT)) : v,
    );
    expect(patternOf(series("midnight", x), DAILY_FOLD).pattern).toBe("periodic");
  });

  it("does not call a burst on one weekday only periodic, but does call a weekday-only (five of seven) burst periodic", () => {
    for (const widthMin of [60, 180]) {
      for (const heightPct of [45, 80]) {
        const mondays = bursts({
          days: 28,
          widthMin,
          heightPct,
          seed: widthMin + heightPct,
          burstDay: (d) => d % 7 === 0,
        });
        const p = patternOf(mondays, DAILY_FOLD);
        expect(p.pattern, `Mondays ${widthMin} min at ${heightPct} %: ${JSON.stringify(p)}`).not.toBe("periodic");
        expect(p.foldCorrelation!).toBeLessThan(0.3);
        const weekdays = bursts({ days: 28, widthMin, heightPct, seed: widthMin, burstDay: (d) => d % 7 < 5 });
        expect(patternOf(weekdays, DAILY_FOLD).pattern, `weekdays ${widthMin} min at ${heightPct} %`).toBe("periodic");
      }
    }
  });

  it("leaves flat series, random walks and random bursts with the labels the spectral rule gives them", () => {
    const seen = new Set<string>();
    const maxFold: Record<string, number> = {};
    for (let seed = 1; seed <= 20; seed++) {
      const rng = new SeededRng(seed);
      const flat = Array.from({ length: 14 * DAY_STEPS }, () => clamp(30 + rng.normal(0, 1.5)));
      let w = 50;
      const walk = Array.from({ length: 7 * DAY_STEPS }, () => (w = Math.min(95, Math.max(5, w + rng.normal(0, 6)))));
      let level = 50;
      const slowWalk = Array.from({ length: 14 * DAY_STEPS }, () => (level = clamp(level + rng.normal(0, 1.5))));
      let left = 0;
      const random = Array.from({ length: 14 * DAY_STEPS }, () => {
        if (left === 0 && rng.next() < 0.01) left = 1 + rng.int(24);
        const v = clamp((left > 0 ? 80 : 10) + rng.normal(0, 2));
        if (left > 0) left--;
        return v;
      });
      for (const [name, x] of Object.entries({ flat, walk, slowWalk, random })) {
        const s = series(`${name}-${seed}`, x);
        const p = patternOf(s, DAILY_FOLD);
        expect(p.pattern, `${name} seed ${seed}: ${JSON.stringify(p)}`).toBe(patternOf(s, SPECTRAL_ONLY).pattern);
        expect(p.pattern).not.toBe("periodic");
        maxFold[name] = Math.max(maxFold[name] ?? -1, p.foldCorrelation ?? -1);
        seen.add(`${name}:${p.pattern}`);
      }
    }
    expect(seen.has("flat:constant")).toBe(true);
    expect(seen.has("walk:unpredictable")).toBe(true);
    expect(seen.has("random:unpredictable")).toBe(true);
  });

  it("keeps a faint daily ripple on a flat level constant (dailyFoldMinAmplitudePct)", () => {
    const s = bursts({ days: 14, widthMin: 120, heightPct: 12, seed: 4 });
    const p = patternOf(s, DAILY_FOLD);
    expect(p.foldCorrelation!).toBeGreaterThan(0.6);
    expect(p.pattern).toBe("constant");
    expect(patternOf(s, { ...DAILY_FOLD, dailyFoldMinAmplitudePct: 3 }).pattern).toBe("periodic");
  });

  it("validates the new options", () => {
    for (const bad of [
      { dailyFoldMinCorrelation: 1.5 },
      { dailyFoldMinCorrelation: -0.1 },
      { dailyFoldMinAmplitudePct: -1 },
      { dailyFoldMinAmplitudePct: Number.NaN },
      { peakStatistic: "max" as never },
    ]) {
      try {
        resolveClassifierOptions(bad);
        expect.unreachable();
      } catch (err) {
        expect(err).toBeInstanceOf(HarvestError);
        expect((err as HarvestError).details["field"]).toBe(Object.keys(bad)[0]);
      }
    }
    expect(resolveClassifierOptions({}).peakStatistic).toBe("percentile");
  });
});

describe("peakStatistic", () => {
  it("reads a 1 h/day burst to 45 % as about 45 with median-daily-max and under 10 with the p95", () => {
    const s = bursts({ days: 30, widthMin: 60, heightPct: 45, seed: 11, stepSec: 120 });
    const daily = tenantFeatures(s, { peakStatistic: "median-daily-max" }).peak;
    const p95 = tenantFeatures(s).peak;
    expect(daily).toBeGreaterThan(43);
    expect(daily).toBeLessThan(50);
    expect(p95).toBeLessThan(10);
    expect(tenantFeatures(s, { peakStatistic: "percentile", peakPercentile: 95 }).peak).toBe(p95);
  });

  it("over the sweep: median-daily-max holds each burst's height, the p95 only once the burst is over 5 % of the day", () => {
    for (const widthMin of WIDTHS_MIN) {
      for (const heightPct of HEIGHTS_PCT) {
        const s = bursts({ days: 14, widthMin, heightPct, seed: widthMin * heightPct });
        const daily = tenantFeatures(s, { peakStatistic: "median-daily-max" }).peak;
        const p95 = tenantFeatures(s).peak;
        const what = `${widthMin} min at ${heightPct} %: daily max ${daily}, p95 ${p95}`;
        expect(daily, what).toBeGreaterThan(heightPct - 1);
        expect(daily, what).toBeLessThan(heightPct + 7);
        // 72 min is 5 % of a day: narrower bursts leave the p95 on the base, wider ones lift it to the burst.
        if (widthMin * 60 < 0.05 * 86_400) expect(p95, what).toBeLessThan(BASE_PCT + 5);
        else expect(p95, what).toBeGreaterThan(heightPct - 5);
      }
    }
  });

  it("is not moved by a spike on one day, nor by a burst on fewer than half of the days", () => {
    const rng = new SeededRng(12);
    const x = Array.from({ length: 14 * DAY_STEPS }, () => clamp(30 + rng.normal(0, 1)));
    x[5 * DAY_STEPS + 7] = 100;
    const peak = tenantFeatures(series("spike", x), { peakStatistic: "median-daily-max" }).peak;
    expect(peak).toBeGreaterThan(31);
    expect(peak).toBeLessThan(36);
    const mondays = bursts({ days: 28, widthMin: 60, heightPct: 80, seed: 13, burstDay: (d) => d % 7 === 0 });
    expect(tenantFeatures(mondays, { peakStatistic: "median-daily-max" }).peak).toBeLessThan(15);
  });

  it("falls back to the percentile for a series shorter than one day", () => {
    const x = Array.from({ length: 101 }, (_, i) => i);
    expect(tenantFeatures(series("short", x), { peakStatistic: "median-daily-max" }).peak).toBe(95);
  });
});

const dataDir = sharedDataDir();
if (!dataDir)
  console.warn("classifier-daily-bursts.test: ../shared/data not found, skipping the real-trace label tests");

describe.skipIf(!dataDir)("the day fold on the real traces in shared/data", () => {
  const read = (rel: string): Promise<UtilizationSeries> =>
    readUtilizationFile(join(dataDir!, rel), undefined, { duplicateTimes: "merge" });
  // Every file's label before the day fold (the spectral rule alone); the fold must not move any of them.
  const labels: Record<string, string> = {
    "bitbrains_rnd_2013-7/raw/239.csv": "constant",
    "bitbrains_rnd_2013-7/raw/288.csv": "periodic",
    "bitbrains_rnd_2013-7/raw/308.csv": "constant",
    "bitbrains_rnd_2013-7/raw/39.csv": "constant",
    "bitbrains_rnd_2013-7/raw/411.csv": "periodic",
    "bitbrains_rnd_2013-7/raw/44.csv": "unpredictable",
    "bitbrains_rnd_2013-7/raw/483.csv": "constant",
    "bitbrains_rnd_2013-7/raw/9.csv": "constant",
    "nab_aws_cloudwatch/realAWSCloudwatch/ec2_cpu_utilization_24ae8d.csv": "constant",
    "nab_aws_cloudwatch/realAWSCloudwatch/ec2_cpu_utilization_53ea38.csv": "constant",
    "nab_aws_cloudwatch/realAWSCloudwatch/ec2_cpu_utilization_5f5533.csv": "constant",
    "nab_aws_cloudwatch/realAWSCloudwatch/ec2_cpu_utilization_77c1ca.csv": "unpredictable",
    "nab_aws_cloudwatch/realAWSCloudwatch/ec2_cpu_utilization_825cc2.csv": "unpredictable",
    "nab_aws_cloudwatch/realAWSCloudwatch/ec2_cpu_utilization_ac20cd.csv": "unpredictable",
    "nab_aws_cloudwatch/realAWSCloudwatch/ec2_cpu_utilization_c6585a.csv": "constant",
    "nab_aws_cloudwatch/realAWSCloudwatch/ec2_cpu_utilization_fe7f93.csv": "unpredictable",
    "nab_aws_cloudwatch/realAWSCloudwatch/rds_cpu_utilization_cc0c53.csv": "constant",
    "nab_aws_cloudwatch/realAWSCloudwatch/rds_cpu_utilization_e47b3b.csv": "unpredictable",
  };

  it("gives every Bitbrains and NAB file the label the spectral rule alone gives it", async () => {
    for (const [rel, label] of Object.entries(labels)) {
      const s = await read(rel);
      expect(patternOf(s, SPECTRAL_ONLY).pattern, `${rel} without the fold`).toBe(label);
      expect(
        patternOf(s, DAILY_FOLD).pattern,
        `${rel} with the fold: ${JSON.stringify(patternOf(s, DAILY_FOLD))}`,
      ).toBe(label);
    }
  });
});
