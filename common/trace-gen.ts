/**
 * Seeded synthetic primary-tenant utilization, for when the real traces in `../shared/data` are absent (a user's fresh
 * clone). The three shapes follow seeds/004 section 3.2: periodic (user-facing, diurnal), roughly constant (crawlers,
 * scrubbers; the majority of tenants) and unpredictable (testing and development).
 */
import { mkdir } from "node:fs/promises";
import { join } from "node:path";
import { HarvestError } from "./errors.js";
import { SeededRng } from "./rng.js";
import type { UtilizationSeries } from "./trace-io.js";
import { writeUtilizationCsv } from "./trace-io.js";

/** The utilization patterns of seeds/004 section 3.2. */
export type UtilizationPattern = "periodic" | "constant" | "unpredictable";

/** What to generate. */
export interface GenerateUtilizationOptions {
  /** The shape of the series. */
  pattern: UtilizationPattern;
  /** Length of the series in days (fractions allowed). */
  days: number;
  /** Distance between samples in seconds. */
  stepSec: number;
  /** The series' mean CPU % before spikes and clamping. */
  meanPct: number;
  /**
   * periodic: half the peak-to-trough swing of the daily sine; constant: the noise's standard deviation;
   * unpredictable: the spread of the regime levels around the mean.
   * @default periodic 0.6 x min(mean, 100 - mean); constant 1.5; unpredictable 0.8 x min(mean, 100 - mean)
   */
  amplitudePct?: number;
  /**
   * Sharp spikes to 92..100 % per day, each lasting one to three steps, at random times.
   * @default 0
   */
  spikes?: number;
  /** The seed: the same options and seed give the same series. */
  seed: number;
  /**
   * The series' name.
   * @default `${pattern}-${seed}`
   */
  name?: string;
  /**
   * The time of the first sample (Unix ms).
   * @default 0
   */
  startMs?: number;
}

const DAY_MS = 86_400_000;
/** Noise on top of the periodic sine and the unpredictable regimes, in CPU-% points (standard deviation). */
const SHAPE_NOISE_SD_PCT = 2;
/** Mean length of an unpredictable regime (a level held before the next change). */
const REGIME_MEAN_MS = 3 * 3_600_000;
/** Random bursts of the unpredictable pattern, per day. */
const UNPREDICTABLE_BURSTS_PER_DAY = 4;

/** A seeded synthetic utilization series of the given pattern. */
export function generateUtilization(options: GenerateUtilizationOptions): UtilizationSeries {
  const { pattern, days, stepSec, meanPct, seed } = options;
  if (!(days > 0)) throw invalid("days", days);
  if (!(stepSec > 0)) throw invalid("stepSec", stepSec);
  if (!(meanPct >= 0 && meanPct <= 100)) throw invalid("meanPct", meanPct);
  const spikesPerDay = options.spikes ?? 0;
  if (!(spikesPerDay >= 0)) throw invalid("spikes", spikesPerDay);
  const headroomPct = Math.min(meanPct, 100 - meanPct);

  const rng = new SeededRng(seed);
  const stepMs = stepSec * 1000;
  const n = Math.max(2, Math.round((days * DAY_MS) / stepMs));
  const startMs = options.startMs ?? 0;
  const timesMs: number[] = [];
  const cpuPct: number[] = [];

  switch (pattern) {
    case "periodic": {
      const amplitude = options.amplitudePct ?? 0.6 * headroomPct;
      // Peak in the (UTC) afternoon, with a per-tenant shift of up to +-2 hours.
      const peakHour = 15 + (rng.next() * 4 - 2);
      for (let i = 0; i < n; i++) {
        const hour = ((((startMs + i * stepMs) % DAY_MS) + DAY_MS) % DAY_MS) / 3_600_000;
        const phase = (2 * Math.PI * (hour - peakHour)) / 24;
        cpuPct.push(meanPct + amplitude * Math.cos(phase) + rng.normal(0, SHAPE_NOISE_SD_PCT));
      }
      break;
    }
    case "constant": {
      const sd = options.amplitudePct ?? 1.5;
      for (let i = 0; i < n; i++) cpuPct.push(meanPct + rng.normal(0, sd));
      break;
    }
    case "unpredictable": {
      const spread = options.amplitudePct ?? 0.8 * headroomPct;
      let level = meanPct;
      let regimeEndMs = 0;
      let burstLeft = 0;
      let burstPct = 0;
      const burstChancePerStep = (UNPREDICTABLE_BURSTS_PER_DAY * stepMs) / DAY_MS;
      for (let i = 0; i < n; i++) {
        const tMs = i * stepMs;
        if (tMs >= regimeEndMs) {
          // Regime changes: a new level held for an exponentially distributed time.
          level = meanPct + (rng.next() * 2 - 1) * spread;
          regimeEndMs = tMs + -Math.log(Math.max(rng.next(), 1e-9)) * REGIME_MEAN_MS;
        }
        if (burstLeft === 0 && rng.next() < burstChancePerStep) {
          burstLeft = 1 + rng.int(Math.max(1, Math.round(1_800_000 / stepMs)));
          burstPct = level + (100 - level) * (0.4 + 0.5 * rng.next());
        }
        const base = burstLeft > 0 ? burstPct : level;
        if (burstLeft > 0) burstLeft--;
        cpuPct.push(base + rng.normal(0, SHAPE_NOISE_SD_PCT));
      }
      break;
    }
    default:
      throw new HarvestError("INVALID_ARGUMENT", `unknown utilization pattern ${JSON.stringify(pattern)}`, {
        details: { field: "pattern" },
      });
  }

  const spikeCount = Math.round(spikesPerDay * days);
  for (let s = 0; s < spikeCount; s++) addSpike(cpuPct, rng.int(n), 1 + rng.int(3), 92 + rng.next() * 8);

  for (let i = 0; i < n; i++) {
    timesMs.push(startMs + i * stepMs);
    cpuPct[i] = round3(Math.min(100, Math.max(0, cpuPct[i]!)));
  }
  return {
    name: options.name ?? `${pattern}-${seed}`,
    stepSec,
    startMs,
    timesMs,
    cpuPct,
  };
}

/** Sets `lengthSteps` samples from `atStep` to `heightPct` (a primary spike), clipped at the series' end. */
function addSpike(cpuPct: number[], atStep: number, lengthSteps: number, heightPct: number): void {
  for (let i = atStep; i < Math.min(cpuPct.length, atStep + lengthSteps); i++) cpuPct[i] = heightPct;
}

/** The step of the demo traces: the real traces' 5 minutes. */
export const DEMO_STEP_SEC = 300;
/**
 * The demo replays at 600x (a 5-minute step lasts 0.5 s); its first 30 s of replay are the traces' first 60 steps,
 * and every demo trace spikes inside them.
 */
export const DEMO_EARLY_STEPS = 60;

/** Steps at the start of each demo trace that stay below 40 %. */
export const DEMO_LEAD_IN_STEPS = 4;

/**
 * The demo's mix of patterns, loosely after seeds/004 section 3.2: most tenants roughly constant, periodic ones diurnal
 * (they hold ~40 % of the servers), a few unpredictable.
 */
const DEMO_PATTERNS: readonly UtilizationPattern[] = ["constant", "periodic", "constant", "unpredictable", "periodic"];

/**
 * Writes `count` demo traces (plain `time_s,cpu_pct`, two days at 5-minute steps) into `dir` and returns their paths.
 * Each has a low baseline (mostly below 40 %) and at least one sharp spike above 90 % within its first
 * DEMO_EARLY_STEPS steps, at a different step per trace, so that a fast replay preempts secondary work early.
 */
export async function generateDemoTraces(dir: string, count: number, seed: number): Promise<string[]> {
  if (!(Number.isInteger(count) && count >= 0)) throw invalid("count", count);
  await mkdir(dir, { recursive: true });
  const rng = new SeededRng(seed);
  const paths: string[] = [];
  for (let i = 0; i < count; i++) {
    const pattern = DEMO_PATTERNS[i % DEMO_PATTERNS.length]!;
    const meanPct = 15 + rng.next() * 15;
    const series = generateUtilization({
      pattern,
      days: 2,
      stepSec: DEMO_STEP_SEC,
      meanPct,
      // Keep the unpredictable regimes and the periodic swing from sitting above 40 % for long.
      amplitudePct: pattern === "constant" ? 2 : pattern === "periodic" ? 0.7 * meanPct : 0.6 * meanPct,
      seed: (seed * 7919 + i * 104_729) >>> 0,
      name: `primary-${String(i).padStart(2, "0")}-${pattern}`,
    });
    // A calm lead-in (2 s at 600x) so that secondary work gets placed before the primary wakes up.
    for (let k = 0; k < DEMO_LEAD_IN_STEPS; k++) series.cpuPct[k] = Math.min(series.cpuPct[k]!, 35);
    // Later spikes, about three a day, keep preempting work after the opening act.
    const n = series.cpuPct.length;
    for (let s = 0; s < 6; s++) {
      addSpike(
        series.cpuPct,
        DEMO_EARLY_STEPS + rng.int(n - DEMO_EARLY_STEPS),
        1 + rng.int(3),
        round3(92 + rng.next() * 8),
      );
    }
    // The early spikes: the first lands somewhere in steps 4..35 (2..18 s into a 600x replay), the second one 10..25
    // steps later; each lasts two to four steps (1..2 s at 600x).
    const first = DEMO_LEAD_IN_STEPS + rng.int(32);
    addSpike(series.cpuPct, first, 2 + rng.int(3), round3(93 + rng.next() * 6));
    addSpike(series.cpuPct, first + 10 + rng.int(16), 2 + rng.int(3), round3(91 + rng.next() * 8));
    const path = join(dir, `${series.name}.csv`);
    await writeUtilizationCsv(path, series);
    paths.push(path);
  }
  return paths;
}

function invalid(field: string, value: unknown): HarvestError {
  return new HarvestError("INVALID_ARGUMENT", `invalid ${field}: ${String(value)}`, { details: { field } });
}

function round3(x: number): number {
  return Math.round(x * 1000) / 1000;
}
