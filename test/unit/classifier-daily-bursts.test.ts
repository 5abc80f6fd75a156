/**
 * Issue 13: tenants whose load repeats every day as a short burst (a nightly backup, a batch window) are periodic by
 * the day fold, on by default; a burst on one weekday only is not, nor is load that repeats every few hours (the
 * sub-daily guard), other labels do not move, and the "median-daily-max" peak sees the burst that the p95 misses.
 */
import { readdirSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { detailsOf, HarvestError } from "../../common/errors.js";
import { sharedDataDir } from "../../common/paths.js";
import { SeededRng } from "../../common/rng.js";
import type { UtilizationSeries } from "../../common/trace-io.js";
import { readUtilizationFile } from "../../common/trace-io.js";
import type { PatternProfile } from "../../resourcemanager/policy/utilization-pattern.js";
import { patternOf } from "../../resourcemanager/policy/utilization-pattern.js";
import { resolveClassifierOptions } from "../../resourcemanager/policy/classifier-options.js";
import { tenantFeatures } from "../../resourcemanager/policy/classifier.js";

const STEP_SEC = 300;
const DAY_STEPS = 86_400 / STEP_SEC;
const BASE_PCT = 5;
const WIDTHS_MIN = [30, 60, 120, 180];
const HEIGHTS_PCT = [20, 45, 80];
/** The spectral rule alone: the day fold switched off. */
const SPECTRAL_ONLY = { dailyFoldMinCorrelation: 0 };
/** The day fold without its guard against sub-daily repetition. */
const NO_GUARD = { dailyFoldMaxSubDailyShare: 1 };

function series(name: string, cpuPct: number[], stepSec = STEP_SEC): UtilizationSeries {
  return { name, stepSec, startMs: 0, timesMs: cpuPct.map((_, i) => i * stepSec * 1000), cpuPct };
}

function clamp(v: number): number {
  return Math.min(100, Math.max(0, v));
}

/**
 * `days` days at `stepSec` of a `basePct` level (`BASE_PCT` by default) with noise (sd `noiseSd`, 1.5 by default),
 * bursting to `heightPct` for `widthMin` minutes from `startHour` on the days `burstDay` accepts (day 0 is a Monday).
 */
function bursts(opts: {
  days: number;
  widthMin: number;
  heightPct: number;
  seed: number;
  stepSec?: number;
  startHour?: number;
  burstDay?: (day: number) => boolean;
  basePct?: number;
  noiseSd?: number;
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
    return clamp((on ? opts.heightPct : (opts.basePct ?? BASE_PCT)) + rng.normal(0, opts.noiseSd ?? 1.5));
  });
  return series(`burst-${opts.widthMin}m-${opts.heightPct}`, x, stepSec);
}

/**
 * `days` days at 5-minute steps of a 20 % level with noise (sd 1.5), rising `risePct` points for `widthMin` minutes
 * every `periodMin` minutes (the first rise at 00:10).
 */
function everyPeriod(opts: {
  days: number;
  periodMin: number;
  widthMin: number;
  risePct: number;
  seed: number;
}): UtilizationSeries {
  const rng = new SeededRng(opts.seed);
  const x = Array.from({ length: opts.days * DAY_STEPS }, (_, i) => {
    const on = (i * (STEP_SEC / 60) - 10 + opts.periodMin) % opts.periodMin < opts.widthMin;
    return clamp(20 + (on ? opts.risePct : 0) + rng.normal(0, 1.5));
  });
  return series(`every-${opts.periodMin}m-${opts.widthMin}m-${opts.risePct}`, x);
}

function show(p: PatternProfile): string {
  return JSON.stringify(p);
}

describe("daily bursts (day fold, on by default)", () => {
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
          const p = patternOf(s);
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

  it("calls daily bursts of 30 min, 1 h, 2 h and 3 h rising 15, 30 and 45 points over a 20 % base periodic", () => {
    for (const widthMin of WIDTHS_MIN) {
      for (const risePct of [15, 30, 45]) {
        for (const days of [7, 14, 30]) {
          for (const noiseSd of [1.5, 3]) {
            // Under noise sd 3, a 30-minute rise of 15 points is six samples a day each about as likely noise as
            // burst: single days correlate with the rest by only 0.45 to 0.58, under dailyFoldMinCorrelation.
            if (noiseSd === 3 && widthMin === 30 && risePct === 15) continue;
            const s = bursts({
              days,
              widthMin,
              heightPct: 20 + risePct,
              basePct: 20,
              noiseSd,
              seed: days * 1000 + widthMin + risePct + noiseSd,
            });
            const p = patternOf(s);
            expect(p.pattern, `${widthMin} min +${risePct} over ${days} d, sd ${noiseSd}: ${show(p)}`).toBe("periodic");
          }
        }
      }
    }
  });

  it("finds a daily burst sampled every two minutes, and one that crosses the series' day boundary", () => {
    expect(patternOf(bursts({ days: 30, widthMin: 60, heightPct: 45, seed: 9, stepSec: 120 })).pattern).toBe(
      "periodic",
    );
    // The series starts at 00:00; the burst runs 23:30 to 00:30, half at the end of each fold day and half at the start.
    const x = bursts({ days: 14, widthMin: 30, heightPct: 45, seed: 10, startHour: 23.5 }).cpuPct.map((v, i) =>
      i % DAY_STEPS < 6 && i >= DAY_STEPS ? clamp(45 + (v - BASE_PCT)) : v,
    );
    expect(patternOf(series("midnight", x)).pattern).toBe("periodic");
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
        const p = patternOf(mondays);
        expect(p.pattern, `Mondays ${widthMin} min at ${heightPct} %: ${JSON.stringify(p)}`).not.toBe("periodic");
        expect(p.foldCorrelation!).toBeLessThan(0.3);
        const weekdays = bursts({ days: 28, widthMin, heightPct, seed: widthMin, burstDay: (d) => d % 7 < 5 });
        expect(patternOf(weekdays).pattern, `weekdays ${widthMin} min at ${heightPct} %`).toBe("periodic");
      }
    }
  });

  it("does not call weekend-only bursts or a busy Monday periodic, but does call a daily burst taller on Mondays periodic", () => {
    for (const [widthMin, heightPct] of [
      [60, 45],
      [180, 80],
    ] as const) {
      const what = `${widthMin} min at ${heightPct} %`;
      const weekends = bursts({ days: 28, widthMin, heightPct, seed: 31, burstDay: (d) => d % 7 >= 5 });
      expect(patternOf(weekends).pattern, `weekends ${what}`).not.toBe("periodic");
      // Repeats every week and every day: a nightly burst, taller on Mondays (by its height again, up to 100 %).
      const daily = bursts({ days: 28, widthMin, heightPct, seed: 32 });
      const x = daily.cpuPct.map((v, i) =>
        Math.floor(i / DAY_STEPS) % 7 === 0 && v > heightPct / 2 ? clamp(v + heightPct) : v,
      );
      expect(patternOf(series("daily-and-weekly", x)).pattern, `daily, taller Mondays ${what}`).toBe("periodic");
    }
    // A whole busy Monday each week (60 % over 10 %): a weekly pattern, not a daily one.
    const rng = new SeededRng(33);
    const monday = Array.from({ length: 28 * DAY_STEPS }, (_, i) =>
      clamp((Math.floor(i / DAY_STEPS) % 7 === 0 ? 60 : 10) + rng.normal(0, 1.5)),
    );
    expect(patternOf(series("busy-monday", monday)).pattern).not.toBe("periodic");
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
        const p = patternOf(s);
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
    const p = patternOf(s);
    expect(p.foldCorrelation!).toBeGreaterThan(0.6);
    expect(p.pattern).toBe("constant");
    expect(patternOf(s, { dailyFoldMinAmplitudePct: 3 }).pattern).toBe("periodic");
  });

  it("validates the new options", () => {
    for (const bad of [
      { dailyFoldMinCorrelation: 1.5 },
      { dailyFoldMinCorrelation: -0.1 },
      { dailyFoldMinAmplitudePct: -1 },
      { dailyFoldMinAmplitudePct: Number.NaN },
      { dailyFoldMaxSubDailyShare: 1.5 },
      { dailyFoldMaxSubDailyShare: -0.1 },
      { peakStatistic: "max" as never },
    ]) {
      try {
        resolveClassifierOptions(bad);
        expect.unreachable();
      } catch (err) {
        expect(err).toBeInstanceOf(HarvestError);
        expect(detailsOf(err as HarvestError, "INVALID_ARGUMENT", "CONFIG_INVALID")?.field).toBe(Object.keys(bad)[0]);
      }
    }
    expect(resolveClassifierOptions({}).peakStatistic).toBe("percentile");
  });
});

describe("the day fold's guard against sub-daily repetition (dailyFoldMaxSubDailyShare)", () => {
  it("does not call spikes every 1, 2, 3, 4 or 6 h periodic, which the fold without its guard would", () => {
    for (const periodMin of [60, 120, 180, 240, 360]) {
      for (const widthMin of [5, 15, 30]) {
        for (const risePct of [15, 30, 45]) {
          for (const days of [7, 14]) {
            const s = everyPeriod({ days, periodMin, widthMin, risePct, seed: periodMin + widthMin + risePct + days });
            const what = `${widthMin} min +${risePct} every ${periodMin} min over ${days} d`;
            const p = patternOf(s);
            expect(p.pattern, `${what}: ${show(p)}`).not.toBe("periodic");
            // Its days do repeat: only the guard keeps it out.
            expect(patternOf(s, NO_GUARD).pattern, what).toBe("periodic");
          }
        }
      }
    }
  });

  it("does not call the simulator's hourly-spike tenant (100 % for 5 minutes every hour, idle otherwise) periodic", () => {
    const x = Array.from({ length: 3 * DAY_STEPS }, (_, i) => (i % 12 === 0 ? 100 : 0));
    expect(patternOf(series("hourly-spike", x)).pattern).toBe("unpredictable");
    expect(patternOf(series("hourly-spike", x), NO_GUARD).pattern).toBe("periodic");
  });

  it("keeps windows that repeat every 12 h or 8 h periodic: the spectral rule counts those periods as daily", () => {
    for (const periodMin of [720, 480]) {
      for (const widthMin of [30, 60]) {
        for (const risePct of [15, 30, 45]) {
          for (const days of [7, 14]) {
            const s = everyPeriod({ days, periodMin, widthMin, risePct, seed: periodMin + widthMin + risePct + days });
            const p = patternOf(s);
            expect(p.pattern, `${widthMin} min +${risePct} every ${periodMin} min: ${show(p)}`).toBe("periodic");
          }
        }
      }
    }
  });

  it("keeps a nightly burst periodic when faint hourly blips ride on its base", () => {
    for (const [widthMin, risePct] of [
      [30, 30],
      [120, 45],
    ] as const) {
      const nightly = bursts({ days: 14, widthMin, heightPct: 20 + risePct, basePct: 20, seed: widthMin });
      // A 5-minute blip of 8 points at the top of every hour.
      const x = nightly.cpuPct.map((v, i) => (i % 12 === 0 ? v + 8 : v));
      const p = patternOf(series("nightly-and-hourly", x));
      expect(p.pattern, `${widthMin} min +${risePct} with hourly blips: ${show(p)}`).toBe("periodic");
    }
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
  const dirs = [
    "bitbrains_rnd_2013-7/raw",
    "nab_aws_cloudwatch/realAWSCloudwatch",
    "nab_aws_cloudwatch/realKnownCause",
  ];
  const files = dataDir
    ? dirs.flatMap((d) =>
        readdirSync(join(dataDir, d))
          .filter((f) => f.endsWith(".csv"))
          .map((f) => `${d}/${f}`),
      )
    : [];
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
    // 100 % for a few minutes at the top of every hour, over 62 days: its days repeat, but only because its hours do.
    "nab_aws_cloudwatch/realKnownCause/cpu_utilization_asg_misconfiguration.csv": "unpredictable",
    // A latency series, not CPU, but read by the same readers; included so that every file is covered.
    "nab_aws_cloudwatch/realKnownCause/ec2_request_latency_system_failure.csv": "constant",
  };

  it("labels every Bitbrains and NAB file the same with the fold on (the default) as with the spectral rule alone", async () => {
    expect(files.sort()).toEqual(Object.keys(labels).sort());
    for (const rel of files) {
      const s = await read(rel);
      expect(patternOf(s, SPECTRAL_ONLY).pattern, `${rel} without the fold`).toBe(labels[rel]);
      const p = patternOf(s);
      expect(p.pattern, `${rel} with the fold: ${show(p)}`).toBe(labels[rel]);
    }
  });

  it("keeps NAB's hourly-spiking asg_misconfiguration series out of periodic by the sub-daily guard alone", async () => {
    const s = await read("nab_aws_cloudwatch/realKnownCause/cpu_utilization_asg_misconfiguration.csv");
    expect(patternOf(s).pattern).toBe("unpredictable");
    expect(patternOf(s, NO_GUARD).pattern).toBe("periodic");
  });
});
