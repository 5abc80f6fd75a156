/**
 * The storage sweep's stock/diversity loss ratio with its confidence interval over the seeds: Poisson counts with an
 * overdispersion correction, the exact (Clopper-Pearson) interval of the binomial share, and the beta functions it
 * needs.
 */

import { invalidArgument } from "../../../common/options.js";
import { RATIO_CONFIDENCE } from "./options.js";

/** One seed's losses of one placement in one cell. */
export interface SeedLoss {
  /** Blocks lost. */
  lost: number;
  /** Blocks written. */
  blocks: number;
}

/**
 * The stock/diversity ratio of lost-block fractions over a cell's seeds, with its interval:
 * - "estimate": both placements lost blocks; `low` <= `estimate` <= `high`, all finite.
 * - "lower-bound": only stock lost blocks (diversity lost 0 in every seed): `estimate` and `high` are Infinity, and
 *   the data say only that the ratio is above `low`.
 * - "upper-bound": only diversity lost blocks: `estimate` and `low` are 0, the ratio is below `high`.
 * - "none": neither lost a block: no ratio (`estimate` NaN, interval [0, Infinity]).
 */
export interface LossRatio {
  kind: "estimate" | "lower-bound" | "upper-bound" | "none";
  /** (stock lost / stock blocks) / (diversity lost / diversity blocks), each pooled over the seeds. */
  estimate: number;
  low: number;
  high: number;
  /** The confidence of [low, high]. */
  confidence: number;
  /**
   * Each placement's seed-to-seed overdispersion φ >= 1, which widened the interval: the Pearson chi-square of its
   * per-seed counts around its pooled rate over k - 1 degrees of freedom; 1 when they vary no more than Poisson counts,
   * and 1 for a placement that lost nothing (zero counts show no dispersion: see {@link lossRatio}).
   */
  dispersion: { stock: number; diversity: number };
}

/**
 * The ratio of two placements' lost-block fractions and its interval, from each seed's losses (`stock[i]` and
 * `diversity[i]` are the same seed's).
 *
 * Lost blocks are counted as Poisson events with the blocks written as exposure; conditional on the total lost,
 * stock's share is binomial, so the exact (Clopper-Pearson) interval of that share gives the interval of the ratio of
 * rates. Losses come in bursts (one correlated reimage destroys many blocks at once) and clusters differ, so the seeds
 * vary more than Poisson counts: each placement's count and exposure are first divided by its dispersion φ
 * (quasi-Poisson: the information of S lost blocks is that of S / φ independent ones), which widens the interval and
 * leaves the estimate alone. A zero count takes no continuity correction: its side of the interval is unbounded.
 * When diversity lost nothing its φ is 1, i.e. the bound assumes its losses, had there been any, would have come one
 * at a time; had they come in bursts of b blocks, the lower bound would be about b times lower.
 */
export function lossRatio(
  stock: readonly SeedLoss[],
  diversity: readonly SeedLoss[],
  confidence = RATIO_CONFIDENCE,
): LossRatio {
  if (!(confidence > 0 && confidence < 1))
    invalidArgument("storage sweep", "confidence", `must be in (0, 1) (got ${confidence})`);
  const total = (xs: readonly SeedLoss[]) => ({
    lost: xs.reduce((a, x) => a + x.lost, 0),
    blocks: xs.reduce((a, x) => a + x.blocks, 0),
  });
  const s = total(stock);
  const d = total(diversity);
  const dispersion = { stock: overdispersion(stock), diversity: overdispersion(diversity) };
  // Effective counts and exposures: x lost of stock's sBlocks, y of diversity's dBlocks.
  const x = s.lost / dispersion.stock;
  const y = d.lost / dispersion.diversity;
  const exposure = d.blocks / dispersion.diversity / (s.blocks / dispersion.stock);
  // The ratio of rates from stock's share p of the effective losses: p / (1 - p) x the exposures' ratio.
  const ratioOf = (p: number, oneMinusP: number): number => (oneMinusP > 0 ? (p / oneMinusP) * exposure : Infinity);
  const base = { confidence, dispersion };
  if (s.lost === 0 && d.lost === 0) return { kind: "none", estimate: NaN, low: 0, high: Infinity, ...base };
  const tail = (1 - confidence) / 2;
  if (d.lost === 0) {
    // Clopper-Pearson with every loss stock's: p_low = tail^(1/x), 1 - p_low = -expm1(ln(tail) / x).
    const low = ratioOf(Math.exp(Math.log(tail) / x), -Math.expm1(Math.log(tail) / x));
    return { kind: "lower-bound", estimate: Infinity, low, high: Infinity, ...base };
  }
  if (s.lost === 0) {
    const high = ratioOf(-Math.expm1(Math.log(tail) / y), Math.exp(Math.log(tail) / y));
    return { kind: "upper-bound", estimate: 0, low: 0, high, ...base };
  }
  const pLow = betaQuantile(tail, x, y + 1);
  const pHigh = betaQuantile(1 - tail, x + 1, y);
  const estimate = s.lost / s.blocks / (d.lost / d.blocks);
  return { kind: "estimate", estimate, low: ratioOf(pLow, 1 - pLow), high: ratioOf(pHigh, 1 - pHigh), ...base };
}

/**
 * Pearson chi-square of per-seed counts around their pooled rate over k - 1 degrees of freedom; at least 1 (never
 * narrower than Poisson), and 1 with fewer than 2 seeds or no loss at all.
 */
function overdispersion(seeds: readonly SeedLoss[]): number {
  const lost = seeds.reduce((a, x) => a + x.lost, 0);
  const blocks = seeds.reduce((a, x) => a + x.blocks, 0);
  if (seeds.length < 2 || lost === 0 || blocks === 0) return 1;
  const rate = lost / blocks;
  let chi2 = 0;
  for (const x of seeds) {
    const expected = x.blocks * rate;
    if (expected > 0) chi2 += (x.lost - expected) ** 2 / expected;
  }
  return Math.max(1, chi2 / (seeds.length - 1));
}

/** ln Γ(x) for x > 0 (Lanczos, g = 7, 9 terms: about 15 significant digits). */
function logGamma(x: number): number {
  const c = [
    0.99999999999980993, 676.5203681218851, -1259.1392167224028, 771.32342877765313, -176.61502916214059,
    12.507343278686905, -0.13857109526572012, 9.9843695780195716e-6, 1.5056327351493116e-7,
  ];
  if (x < 0.5) return Math.log(Math.PI / Math.sin(Math.PI * x)) - logGamma(1 - x);
  const z = x - 1;
  let a = c[0]!;
  for (let i = 1; i < 9; i++) a += c[i]! / (z + i);
  const t = z + 7.5;
  return 0.5 * Math.log(2 * Math.PI) + (z + 0.5) * Math.log(t) - t + Math.log(a);
}

/** The regularized incomplete beta function I_x(a, b), a, b > 0 (Numerical Recipes' continued fraction). */
export function incompleteBeta(x: number, a: number, b: number): number {
  if (x <= 0) return 0;
  if (x >= 1) return 1;
  const front = Math.exp(a * Math.log(x) + b * Math.log1p(-x) - logGamma(a) - logGamma(b) + logGamma(a + b));
  // The fraction converges quickly below (a + 1) / (a + b + 2); above it, I_x(a, b) = 1 - I_(1-x)(b, a).
  if (x < (a + 1) / (a + b + 2)) return (front * betaFraction(x, a, b)) / a;
  return 1 - (front * betaFraction(1 - x, b, a)) / b;
}

/** The continued fraction of the incomplete beta function (modified Lentz). */
function betaFraction(x: number, a: number, b: number): number {
  const tiny = 1e-300;
  const guard = (v: number): number => (Math.abs(v) < tiny ? tiny : v);
  let c = 1;
  let d = 1 / guard(1 - ((a + b) * x) / (a + 1));
  let h = d;
  for (let m = 1; m <= 100_000; m++) {
    const even = (m * (b - m) * x) / ((a + 2 * m - 1) * (a + 2 * m));
    d = 1 / guard(1 + even * d);
    c = guard(1 + even / c);
    h *= d * c;
    const odd = (-(a + m) * (a + b + m) * x) / ((a + 2 * m) * (a + 2 * m + 1));
    d = 1 / guard(1 + odd * d);
    c = guard(1 + odd / c);
    const step = d * c;
    h *= step;
    if (Math.abs(step - 1) < 1e-15) break;
  }
  return h;
}

/** The p in (0, 1) with I_p(a, b) = q, by bisection (I is increasing in p). */
export function betaQuantile(q: number, a: number, b: number): number {
  let lo = 0;
  let hi = 1;
  for (let i = 0; i < 200; i++) {
    const mid = (lo + hi) / 2;
    if (mid === lo || mid === hi) break;
    if (incompleteBeta(mid, a, b) < q) lo = mid;
    else hi = mid;
  }
  return (lo + hi) / 2;
}
