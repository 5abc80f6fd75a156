/** Percentiles and means of utilization values, by a sampled selection that avoids sorting whole series. */

/** The `pct` percentile of an ascending array, by linear interpolation between closest ranks. */
export function percentileSorted(sorted: readonly number[], pct: number): number {
  if (sorted.length === 0) return NaN;
  const rank = (pct / 100) * (sorted.length - 1);
  const lo = Math.floor(rank);
  const hi = Math.ceil(rank);
  return sorted[lo]! + (sorted[hi]! - sorted[lo]!) * (rank - lo);
}

/** The mean of `x` (NaN when empty). */
export function meanOf(x: readonly number[]): number {
  let sum = 0;
  for (let i = 0; i < x.length; i++) sum += x[i]!;
  return sum / x.length;
}

/** Values sampled to bracket a percentile's ranks in `percentileAndSum`; shorter series are ordered whole. */
const PERCENTILE_SAMPLE = 512;
const percentileSample = new Float64Array(PERCENTILE_SAMPLE);
/** Reused across calls (nothing here is re-entered), grown to the longest series seen. */
let percentileScratch = new Float64Array(0);

/** The `pcts` percentiles of `x` (non-empty), see `percentileAndSum`. */
export function percentilesOf(x: readonly number[], pcts: readonly number[]): number[] {
  return pcts.map((pct) => percentileAndSum(x, pct).percentile);
}

/**
 * The `pct` percentile of `x` (non-empty), equal to `percentileSorted` of a sorted copy, and the sum of `x` (left to
 * right) from the same pass. No sort: order statistics of an evenly spaced sample bracket the two closest ranks (+- 3
 * standard deviations of the sample quantile), one pass counts the values below the bracket and copies those inside
 * it, and only the copies are ordered (Floyd-Rivest). When the bracket misses the ranks (an unlucky sample: a few in
 * a thousand for independent values) the whole series is copied and ordered.
 */
export function percentileAndSum(x: readonly number[], pct: number): { percentile: number; sum: number } {
  const n = x.length;
  const rank = (pct / 100) * (n - 1);
  const lo = Math.floor(rank);
  const hi = Math.ceil(rank);
  if (percentileScratch.length < n) percentileScratch = new Float64Array(n);
  const a = percentileScratch;
  let sum = 0;
  let below = 0;
  let inside = 0;
  if (n >= 4 * PERCENTILE_SAMPLE) {
    const m = PERCENTILE_SAMPLE;
    const sample = percentileSample;
    for (let j = 0; j < m; j++) sample[j] = x[Math.floor(((j + 0.5) * n) / m)]!;
    const q = lo / (n - 1);
    const margin = Math.ceil(3 * Math.sqrt(m * q * (1 - q))) + 2;
    const from = Math.floor(q * (m - 1)) - margin;
    const to = Math.ceil(q * (m - 1)) + margin;
    let low = -Infinity;
    let high = Infinity;
    if (from >= 0) {
      selectNth(sample, from, 0, m - 1);
      low = sample[from]!;
    }
    if (to < m) {
      selectNth(sample, to, Math.max(0, from + 1), m - 1);
      high = sample[to]!;
    }
    for (let i = 0; i < n; i++) {
      const v = x[i]!;
      sum += v;
      if (v < low) below++;
      else if (v <= high) a[inside++] = v;
    }
  }
  if (!(below <= lo && hi < below + inside)) {
    sum = 0;
    below = 0;
    inside = n;
    for (let i = 0; i < n; i++) {
      const v = x[i]!;
      sum += v;
      a[i] = v;
    }
  }
  // Sorted, the series is: the `below` values under the bracket, then the bracket's values ordered, then the rest.
  selectNth(a, lo - below, 0, inside - 1);
  if (hi > lo) selectNth(a, hi - below, lo - below + 1, inside - 1);
  const vLo = a[lo - below]!;
  const vHi = a[hi - below]!;
  return { percentile: vLo + (vHi - vLo) * (rank - lo), sum };
}

/**
 * Partially orders a[left..right] so that a[k] holds the value it would have if sorted, everything before it is <=
 * and everything after >= (Floyd and Rivest, "Algorithm 489: SELECT", CACM 18(3), 1975; an extreme is one scan).
 */
function selectNth(a: Float64Array, k: number, left: number, right: number): void {
  if (k === left || k === right) {
    let at = k;
    if (k === left) {
      for (let i = left + 1; i <= right; i++) if (a[i]! < a[at]!) at = i;
    } else {
      for (let i = left; i < right; i++) if (a[i]! > a[at]!) at = i;
    }
    swap(a, k, at);
    return;
  }
  while (right > left) {
    if (right - left > 600) {
      // Recurse on a sample window expected to hold the k-th value, so the partition below splits right next to k.
      const n = right - left + 1;
      const m = k - left + 1;
      const z = Math.log(n);
      const s = 0.5 * Math.exp((2 * z) / 3);
      const sd = 0.5 * Math.sqrt((z * s * (n - s)) / n) * (m - n / 2 < 0 ? -1 : 1);
      const newLeft = Math.max(left, Math.floor(k - (m * s) / n + sd));
      const newRight = Math.min(right, Math.floor(k + ((n - m) * s) / n + sd));
      selectNth(a, k, newLeft, newRight);
    }
    const t = a[k]!;
    let i = left;
    let j = right;
    swap(a, left, k);
    if (a[right]! > t) swap(a, left, right);
    while (i < j) {
      swap(a, i, j);
      i++;
      j--;
      while (a[i]! < t) i++;
      while (a[j]! > t) j--;
    }
    if (a[left] === t) swap(a, left, j);
    else {
      j++;
      swap(a, j, right);
    }
    if (j <= k) left = j + 1;
    if (k <= j) right = j - 1;
  }
}

function swap(a: Float64Array, i: number, j: number): void {
  const v = a[i]!;
  a[i] = a[j]!;
  a[j] = v;
}
