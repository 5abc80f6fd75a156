/**
 * The cluster generator's random helpers: cheap normal draws, its own stream seeds, weighted orders and small numeric
 * helpers.
 */
import type { SeededRng } from "../../common/rng.js";

/** Quantiles of the standard normal at (i + 0.5) / size: a table lookup is a cheap normal draw for per-slot noise. */
export const GAUSSIAN_TABLE_SIZE = 4096;
export const GAUSSIAN_TABLE = Float64Array.from({ length: GAUSSIAN_TABLE_SIZE }, (_, i) =>
  normalQuantile((i + 0.5) / GAUSSIAN_TABLE_SIZE),
);

/**
 * A standard normal draw for noise, one uniform per draw (Box-Muller's log, root and cosine cost six times as much, and
 * a year of hourly slots for 1,250 tenants needs tens of millions of draws). Truncated at +-3.5 sd.
 */
export function gaussian(rng: SeededRng): number {
  return GAUSSIAN_TABLE[(rng.next() * GAUSSIAN_TABLE_SIZE) | 0]!;
}

/** The standard normal quantile function (Acklam's rational approximation, relative error below 1.2e-9). */
export function normalQuantile(p: number): number {
  const a = [
    -39.69683028665376, 220.9460984245205, -275.9285104469687, 138.357751867269, -30.66479806614716, 2.506628277459239,
  ];
  const b = [-54.47609879822406, 161.5858368580409, -155.6989798598866, 66.80131188771972, -13.28068155288572];
  const c = [
    -0.007784894002430293, -0.3223964580411365, -2.400758277161838, -2.549732539343734, 4.374664141464968,
    2.938163982698783,
  ];
  const d = [0.007784695709041462, 0.3224671290700398, 2.445134137142996, 3.754408661907416];
  const tail = (q: number): number =>
    (((((c[0]! * q + c[1]!) * q + c[2]!) * q + c[3]!) * q + c[4]!) * q + c[5]!) /
    ((((d[0]! * q + d[1]!) * q + d[2]!) * q + d[3]!) * q + 1);
  if (p < 0.02425) return tail(Math.sqrt(-2 * Math.log(p)));
  if (p > 1 - 0.02425) return -tail(Math.sqrt(-2 * Math.log(1 - p)));
  const q = p - 0.5;
  const r = q * q;
  return (
    ((((((a[0]! * r + a[1]!) * r + a[2]!) * r + a[3]!) * r + a[4]!) * r + a[5]!) * q) /
    (((((b[0]! * r + b[1]!) * r + b[2]!) * r + b[3]!) * r + b[4]!) * r + 1)
  );
}

/** A seed for stream `stream` (and item `index`) of `seed`: a 32-bit integer hash, so that streams are unrelated. */
export function streamSeed(seed: number, stream: number, index = 0): number {
  let h = hash32((seed >>> 0) ^ hash32(Math.floor(seed / 4294967296) >>> 0));
  h = hash32(h ^ Math.imul(stream, 0x9e3779b1));
  return hash32(h + Math.imul(index + 1, 0x85ebca6b));
}

/** A 32-bit integer hash with full avalanche (Chris Wellons' "lowbias32"). */
export function hash32(x: number): number {
  x = Math.imul(x ^ (x >>> 16), 0x7feb352d);
  x = Math.imul(x ^ (x >>> 15), 0x846ca68b);
  return (x ^ (x >>> 16)) >>> 0;
}

/** `candidates` in a random order where larger weights tend to come first (Efraimidis-Spirakis keys). */
export function weightedOrder(rng: SeededRng, candidates: readonly number[], weight: (t: number) => number): number[] {
  const keyed = candidates.map((t) => ({ t, key: exponential(rng, 1) / weight(t) }));
  keyed.sort((a, b) => a.key - b.key || a.t - b.t);
  return keyed.map((k) => k.t);
}

/** Takes tenants in `order` until their servers reach `target`, skipping any that would overshoot by > `tolerance`. */
export function fillTo(
  order: readonly number[],
  sizes: readonly number[],
  target: number,
  tolerance: number,
  take: (t: number) => void,
): void {
  let assigned = 0;
  for (const t of order) {
    if (assigned >= target) return;
    if (assigned + sizes[t]! > target + tolerance) continue;
    take(t);
    assigned += sizes[t]!;
  }
}

export function meanOf(x: Float32Array): number {
  let sum = 0;
  for (let k = 0; k < x.length; k++) sum += x[k]!;
  return x.length > 0 ? sum / x.length : 0;
}

export function clampPct(v: number): number {
  return v < 0 ? 0 : v > 100 ? 100 : v;
}

export function round4(x: number): number {
  return Math.round(x * 10_000) / 10_000;
}

export function exponential(rng: SeededRng, perMs: number): number {
  return -Math.log(1 - rng.next()) / perMs;
}
