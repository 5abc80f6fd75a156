/** The daily-harmonic share of a series' spectral power (Goertzel or fft.js), for the utilization pattern test. */
import FFT from "fft.js";
import type { ClassifierOptions } from "./classifier-options.js";

/**
 * A Goertzel step (one bin, one sample) costs about this share of one `N log2 N` unit of fft.js's real transform
 * (measured on the 2-core development machine: 21 bins x 21,600 samples in about 0.5 ms, the 32,768-point transform
 * in about 1.1 ms), so the bins are computed one by one while that takes fewer than `N log2 N / share` steps.
 */
const GOERTZEL_STEP_PER_FFT_UNIT = 0.5;

/**
 * Share of non-DC power of the mean-removed series, zero-padded to size N, in the daily-harmonic bands (see
 * `patternOf`). The non-DC total is Parseval's: sum over k = 1..N/2 of |X_k|^2 = (N sum y^2 - X_0^2 + X_{N/2}^2) / 2.
 * The few band bins (21 for the defaults at a 2-minute step) come from the Goertzel recurrence, O(bins x n), which
 * is about twice as fast as the full transform for the defaults; with many harmonics the fft.js transform is used.
 * Both agree up to rounding: the shares differ by less than 1e-9 for 30 days of 2-minute samples (the unit tests
 * hold them to that), by up to about 1e-7 for second-level steps, where the recurrence's rounding grows.
 */
export function dailyPowerShare(x: readonly number[], mean: number, stepSec: number, o: ClassifierOptions): number {
  const n = x.length;
  let size = 2;
  while (size < n) size *= 2;
  const half = size / 2;
  const dailyBin = (size * stepSec) / 86_400;
  const width = Math.ceil(size / n) + o.binTolerance;
  // Each bin once, in the order the bands list them (bands of neighbouring harmonics may overlap).
  const bins: number[] = [];
  const counted = new Set<number>();
  for (let h = 1; h <= o.dailyHarmonics; h++) {
    const centre = Math.round(h * dailyBin);
    for (let k = Math.max(1, centre - width); k <= Math.min(half, centre + width); k++) {
      if (counted.has(k)) continue;
      counted.add(k);
      bins.push(k);
    }
  }
  const goertzel = bins.length * n * GOERTZEL_STEP_PER_FFT_UNIT <= size * Math.log2(size);
  return goertzel ? goertzelShare(x, mean, size, bins) : fftShare(x, mean, size, bins);
}

/**
 * How far the daily band stands out of its neighbourhood: the mean power per bin of the 24 h band (its nearest bin
 * +- the band width w, as in `dailyPowerShare`) over the mean power per bin of the w bins either side of it (never
 * the DC bin). A daily cycle is a peak, so the ratio is large; a random walk's spectrum falls smoothly as 1/f^2, so over
 * a short history, where the daily band sits among the lowest frequencies and holds much of the power, the band is
 * still no higher than its neighbours (ratio around 1 or below).
 */
export function dailyPeakRatio(x: readonly number[], mean: number, stepSec: number, o: ClassifierOptions): number {
  const n = x.length;
  let size = 2;
  while (size < n) size *= 2;
  const half = size / 2;
  const centre = Math.round((size * stepSec) / 86_400);
  const width = Math.ceil(size / n) + o.binTolerance;
  const band: number[] = [];
  const around: number[] = [];
  for (let k = Math.max(1, centre - 2 * width); k <= Math.min(half, centre + 2 * width); k++)
    (Math.abs(k - centre) <= width ? band : around).push(k);
  if (band.length === 0 || around.length === 0) return Infinity;
  if (spectrumScratch.length < n) spectrumScratch = new Float64Array(n);
  const y = spectrumScratch;
  for (let i = 0; i < n; i++) y[i] = x[i]! - mean;
  const powers = goertzelPowers(y, n, size, [...band, ...around]);
  let inBand = 0;
  let outside = 0;
  for (let b = 0; b < band.length; b++) inBand += powers[b]!;
  for (let b = band.length; b < powers.length; b++) outside += powers[b]!;
  inBand /= band.length;
  outside /= around.length;
  return outside > 0 ? inBand / outside : Infinity;
}

/** The mean-removed series; reused across calls like `percentileScratch`. */
let spectrumScratch = new Float64Array(0);

/** `dailyPowerShare` by Parseval's total and Goertzel's recurrence for `bins`. */
function goertzelShare(x: readonly number[], mean: number, size: number, bins: readonly number[]): number {
  const n = x.length;
  if (spectrumScratch.length < n) spectrumScratch = new Float64Array(n);
  const y = spectrumScratch;
  let sum = 0;
  let squares = 0;
  let alternating = 0;
  for (let i = 0; i < n; i++) {
    const v = x[i]! - mean;
    y[i] = v;
    sum += v;
    squares += v * v;
    alternating += (i & 1) === 0 ? v : -v;
  }
  const total = (size * squares - sum * sum + alternating * alternating) / 2;
  if (!(total > 0)) return 0;
  let daily = 0;
  const powers = goertzelPowers(y, n, size, bins);
  for (let b = 0; b < bins.length; b++) daily += powers[b]!;
  return daily / total;
}

/**
 * |X_k|^2 for each k of `bins`, X the size-point DFT of y[0..n) zero-padded: s_i = y_i + 2 cos(2 pi k / N) s_(i-1) -
 * s_(i-2), then |X_k|^2 = s_(n-1)^2 + s_(n-2)^2 - 2 cos(2 pi k / N) s_(n-1) s_(n-2) (the padding leaves |X_k| alone).
 */
function goertzelPowers(y: Float64Array, n: number, size: number, bins: readonly number[]): Float64Array {
  const powers = new Float64Array(bins.length);
  const last = bins.length - 1;
  const coefficient = (b: number): number => 2 * Math.cos((2 * Math.PI * bins[Math.min(b, last)]!) / size);
  // Eight independent recurrences per pass over y: each waits on its own multiply-add at every sample, so fewer leave
  // the core idle (measured: eight per pass take about 60 % of the time of four). Two samples per step let s and t
  // take turns holding the newest value instead of shifting. A short last group repeats its final bin and drops the
  // copies.
  const even = n - (n % 2);
  for (let b = 0; b <= last; b += 8) {
    const c0 = coefficient(b);
    const c1 = coefficient(b + 1);
    const c2 = coefficient(b + 2);
    const c3 = coefficient(b + 3);
    const c4 = coefficient(b + 4);
    const c5 = coefficient(b + 5);
    const c6 = coefficient(b + 6);
    const c7 = coefficient(b + 7);
    // s holds s_(i-1) and t holds s_(i-2) before each step.
    let s0 = 0;
    let s1 = 0;
    let s2 = 0;
    let s3 = 0;
    let s4 = 0;
    let s5 = 0;
    let s6 = 0;
    let s7 = 0;
    let t0 = 0;
    let t1 = 0;
    let t2 = 0;
    let t3 = 0;
    let t4 = 0;
    let t5 = 0;
    let t6 = 0;
    let t7 = 0;
    for (let i = 0; i < even; i += 2) {
      const v = y[i]!;
      const w = y[i + 1]!;
      t0 = v - t0 + c0 * s0;
      s0 = w - s0 + c0 * t0;
      t1 = v - t1 + c1 * s1;
      s1 = w - s1 + c1 * t1;
      t2 = v - t2 + c2 * s2;
      s2 = w - s2 + c2 * t2;
      t3 = v - t3 + c3 * s3;
      s3 = w - s3 + c3 * t3;
      t4 = v - t4 + c4 * s4;
      s4 = w - s4 + c4 * t4;
      t5 = v - t5 + c5 * s5;
      s5 = w - s5 + c5 * t5;
      t6 = v - t6 + c6 * s6;
      s6 = w - s6 + c6 * t6;
      t7 = v - t7 + c7 * s7;
      s7 = w - s7 + c7 * t7;
    }
    if (even < n) {
      // One sample left: the plain step, which shifts.
      const v = y[even]!;
      [s0, t0] = [v - t0 + c0 * s0, s0];
      [s1, t1] = [v - t1 + c1 * s1, s1];
      [s2, t2] = [v - t2 + c2 * s2, s2];
      [s3, t3] = [v - t3 + c3 * s3, s3];
      [s4, t4] = [v - t4 + c4 * s4, s4];
      [s5, t5] = [v - t5 + c5 * s5, s5];
      [s6, t6] = [v - t6 + c6 * s6, s6];
      [s7, t7] = [v - t7 + c7 * s7, s7];
    }
    const group = [
      s0 * s0 + t0 * t0 - c0 * s0 * t0,
      s1 * s1 + t1 * t1 - c1 * s1 * t1,
      s2 * s2 + t2 * t2 - c2 * s2 * t2,
      s3 * s3 + t3 * t3 - c3 * s3 * t3,
      s4 * s4 + t4 * t4 - c4 * s4 * t4,
      s5 * s5 + t5 * t5 - c5 * s5 * t5,
      s6 * s6 + t6 * t6 - c6 * s6 * t6,
      s7 * s7 + t7 * t7 - c7 * s7 * t7,
    ];
    for (let j = 0; j < 8 && b + j <= last; j++) powers[b + j] = group[j]!;
  }
  return powers;
}

/** One fft.js transform of each size with its buffers: building the twiddle tables costs more than a transform. */
interface FftWorkspace {
  fft: FFT;
  input: Float64Array;
  out: Float64Array;
}

const fftWorkspaces = new Map<number, FftWorkspace>();
/** Workspaces kept (the oldest goes first); a classifier run sees one or two series lengths. */
const MAX_FFT_WORKSPACES = 4;

function fftWorkspace(size: number): FftWorkspace {
  let ws = fftWorkspaces.get(size);
  if (ws) return ws;
  if (fftWorkspaces.size >= MAX_FFT_WORKSPACES) fftWorkspaces.delete(fftWorkspaces.keys().next().value!);
  ws = { fft: new FFT(size), input: new Float64Array(size), out: new Float64Array(2 * size) };
  fftWorkspaces.set(size, ws);
  return ws;
}

/** `dailyPowerShare` by a full real FFT of the zero-padded series. */
function fftShare(x: readonly number[], mean: number, size: number, bins: readonly number[]): number {
  const n = x.length;
  const { fft, input, out } = fftWorkspace(size);
  for (let i = 0; i < n; i++) input[i] = x[i]! - mean;
  input.fill(0, n);
  // realTransform writes bins 0..N/2 from the input alone, so `out` needs no clearing between calls.
  fft.realTransform(out, input);
  const half = size / 2;
  let total = 0;
  for (let k = 1; k <= half; k++) total += out[2 * k]! * out[2 * k]! + out[2 * k + 1]! * out[2 * k + 1]!;
  if (total === 0) return 0;
  let daily = 0;
  for (const k of bins) daily += out[2 * k]! * out[2 * k]! + out[2 * k + 1]! * out[2 * k + 1]!;
  return daily / total;
}
