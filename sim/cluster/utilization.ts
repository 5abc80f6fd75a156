/**
 * The cluster generator's primary utilization: each tenant's mean, its generated or replayed series, and the cluster's
 * mean matched to the level.
 */
import type { UtilizationSeries } from "../../common/trace-io.js";
import { SeededRng } from "../../common/rng.js";
import type { UtilizationPattern } from "../../common/trace-gen.js";
import { patternOf } from "../../resourcemanager/index.js";
import { DAY_MS } from "../model.js";
import type { RealTemplate } from "../real-traces.js";
import { templateCycle } from "../real-traces.js";
import { MAX_MEAN_PCT, MIN_MEAN_PCT, Stream } from "./calibration.js";
import type { TenantPlan } from "./tenants.js";
import { clampPct, exponential, gaussian, meanOf, streamSeed } from "./random.js";

/**
 * Each tenant's mean utilization: logistic(logit(level) + z + shift), clamped per pattern, with the shift found by
 * bisection so that the server-weighted mean is the level's.
 */
export function tenantMeans(plans: TenantPlan[], levelPct: number): number[] {
  const base = Math.log(levelPct / (100 - levelPct));
  const meanAt = (p: TenantPlan, shift: number): number => {
    const v = 100 / (1 + Math.exp(-(base + p.meanZ + shift)));
    return Math.min(MAX_MEAN_PCT, Math.max(MIN_MEAN_PCT[p.pattern], v));
  };
  let total = 0;
  for (const p of plans) total += p.size;
  let lo = -8;
  let hi = 8;
  for (let i = 0; i < 50; i++) {
    const mid = (lo + hi) / 2;
    let sum = 0;
    for (const p of plans) sum += p.size * meanAt(p, mid);
    if (sum / total < levelPct) lo = mid;
    else hi = mid;
  }
  const shift = (lo + hi) / 2;
  return plans.map((p) => meanAt(p, shift));
}

/** Average CPU utilization per slot for one tenant of `pattern` with mean `meanPct` (seeds/004 section 3.2). */
export function generateShape(
  pattern: UtilizationPattern,
  meanPct: number,
  slots: number,
  slotMs: number,
  rng: SeededRng,
): Float32Array {
  const out = new Float32Array(slots);
  const headroom = Math.min(meanPct, 100 - meanPct);
  switch (pattern) {
    case "periodic": {
      // A diurnal cycle peaking in the afternoon (+- 2 h per tenant), a second harmonic for a sharper peak, and for
      // half the tenants quieter weekends. Slot 0 is a Monday midnight.
      const amplitude = Math.min(headroom, Math.max(9, (0.5 + 0.3 * rng.next()) * headroom));
      const second = amplitude * 0.25 * rng.next();
      const peakHour = 13 + 4 * rng.next();
      const weekendFactor = rng.next() < 0.5 ? 1 : 0.6 + 0.3 * rng.next();
      const noiseSd = 1 + 1.5 * rng.next();
      for (let k = 0; k < slots; k++) {
        const tMs = (k + 0.5) * slotMs;
        const phase = (2 * Math.PI * ((tMs % DAY_MS) / 3_600_000 - peakHour)) / 24;
        const weekend = Math.floor(tMs / DAY_MS) % 7 >= 5;
        const f = weekend ? weekendFactor : 1;
        const swing = amplitude * Math.cos(phase) + second * Math.cos(2 * phase);
        out[k] = meanPct + f * swing - (1 - f) * 0.5 * amplitude + noiseSd * gaussian(rng);
      }
      break;
    }
    case "constant": {
      // A flat level with small noise and a slow drift of about a point (crawlers, scrubbers).
      const noiseSd = 0.4 + 1.2 * rng.next();
      const decay = Math.exp(-slotMs / (3 * DAY_MS));
      const step = Math.sqrt(1 - decay * decay);
      let drift = rng.normal(0, 1);
      for (let k = 0; k < slots; k++) {
        drift = drift * decay + step * gaussian(rng);
        out[k] = meanPct + drift + noiseSd * gaussian(rng);
      }
      break;
    }
    case "unpredictable": {
      // A mean-reverting random walk (time constant 6..48 h) reflected into 0..100, plus bursts (testing, dev).
      const spread = Math.max(6, (0.3 + 0.3 * rng.next()) * headroom);
      const tauMs = 6 * 3_600_000 * 8 ** rng.next();
      const decay = Math.exp(-slotMs / tauMs);
      const step = spread * Math.sqrt(1 - decay * decay);
      let x = meanPct + rng.normal(0, spread);
      for (let k = 0; k < slots; k++) {
        x = meanPct + (x - meanPct) * decay + step * gaussian(rng);
        if (x < 0) x = -x;
        if (x > 100) x = 200 - x;
        out[k] = x;
      }
      const burstsPerMs = (0.5 + 2.5 * rng.next()) / DAY_MS;
      const horizonMs = slots * slotMs;
      for (let t = exponential(rng, burstsPerMs); t < horizonMs; t += exponential(rng, burstsPerMs)) {
        const lengthMs = 10 * 60_000 * 18 ** rng.next();
        const first = Math.floor(t / slotMs);
        const height = out[first]! + (100 - out[first]!) * (0.3 + 0.5 * rng.next());
        for (let k = first; k < slots && k * slotMs < t + lengthMs; k++) {
          const overlap = Math.min((k + 1) * slotMs, t + lengthMs) - Math.max(k * slotMs, t);
          out[k] = out[k]! + (height - out[k]!) * (overlap / slotMs);
        }
      }
      for (let k = 0; k < slots; k++) out[k] = out[k]! + 1.5 * gaussian(rng);
      break;
    }
  }
  centre(out, meanPct);
  return out;
}

/** Shifts `series` so that its mean is `meanPct`, then clamps it to 0..100. */
export function centre(series: Float32Array, meanPct: number): void {
  let sum = 0;
  for (let k = 0; k < series.length; k++) sum += series[k]!;
  const delta = meanPct - sum / series.length;
  for (let k = 0; k < series.length; k++) series[k] = clampPct(series[k]! + delta);
}

/** Shifts every tenant by the same amount until the server-weighted mean is the level's (clamping bends it a bit). */
export function matchClusterMean(series: Float32Array[], plans: TenantPlan[], levelPct: number): void {
  let total = 0;
  for (const p of plans) total += p.size;
  for (let round = 0; round < 3; round++) {
    let sum = 0;
    for (let t = 0; t < series.length; t++) sum += plans[t]!.size * meanOf(series[t]!);
    const delta = levelPct - sum / total;
    if (Math.abs(delta) < 0.05) return;
    for (const s of series) for (let k = 0; k < s.length; k++) s[k] = clampPct(s[k]! + delta);
  }
}

/**
 * Real utilization: each tenant replays one real series chosen among those whose own pattern (at this slot length)
 * is the tenant's planned one (any series when none is), from a random phase, looped to the horizon, scaled (at most
 * 2x either way; constant series are only offset so that they stay flat) and offset to the tenant's mean.
 */
export function replayTemplates(
  plans: TenantPlan[],
  means: number[],
  templates: readonly RealTemplate[],
  slotMs: number,
  slots: number,
  seed: number,
): Float32Array[] {
  const cycles = templates.map((t) => templateCycle(t.series, slotMs));
  const native = cycles.map((c) => patternOf(gridSeries("template", c, 0, c.length, slotMs / 1000)).pattern);
  const cycleMeans = cycles.map(meanOf);
  return plans.map((p, t) => {
    const rng = new SeededRng(streamSeed(seed, Stream.Utilization, t));
    const candidates = cycles.map((_, i) => i).filter((i) => native[i] === p.pattern);
    const pool = candidates.length > 0 ? candidates : cycles.map((_, i) => i);
    const chosen = pool[rng.int(pool.length)]!;
    const cycle = cycles[chosen]!;
    const phase = rng.int(cycle.length);
    const mean = means[t]!;
    const m = cycleMeans[chosen]!;
    const scale = native[chosen] === "constant" || m < 0.5 ? 1 : Math.min(2, Math.max(0.5, mean / m));
    const out = new Float32Array(slots);
    for (let k = 0, j = phase; k < slots; k++, j = j + 1 === cycle.length ? 0 : j + 1) out[k] = scale * cycle[j]!;
    centre(out, mean);
    return out;
  });
}

/** A series on the cluster's slot grid (slots [first, end) of `values`) as the classifier takes it. */
export function gridSeries(
  name: string,
  values: Float32Array,
  first: number,
  end: number,
  stepSec: number,
): UtilizationSeries {
  const stepMs = stepSec * 1000;
  const timesMs: number[] = [];
  const cpuPct: number[] = [];
  for (let k = first; k < end; k++) {
    timesMs.push(k * stepMs);
    cpuPct.push(values[k]!);
  }
  return { name, stepSec, startMs: first * stepMs, timesMs, cpuPct };
}
