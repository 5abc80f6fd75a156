/**
 * A primary tenant's CPU demand as admission control sees it (seeds/003, Propositions 4.3 and 4.5): the mean and
 * variance at a future time, from its utilization history (`DemandProfile`, by time of day for periodic tenants). Pure.
 */
import { HarvestError } from "../../common/errors.js";
import { invalidOption, stripUndefined } from "../../common/options.js";

const DAY_MS = 86_400_000;

// ---------------------------------------------------------------------------------------------------------------------
// Demand moments of a primary tenant.

/** Mean and variance of a primary tenant's CPU demand at one time, in percent of its server (0..100, %^2). */
export interface DemandMoments {
  mean: number;
  variance: number;
  /** How many history samples the estimate rests on (0: the prior). */
  samples: number;
  /** Where the estimate came from: samples at that time of day, all samples, or the prior (too little history). */
  basis: "time-of-day" | "all" | "prior";
}

/** Anything that can say what a primary tenant's demand will be at a time: a `DemandProfile`, or a model or a fake. */
export interface PrimaryDemandSource {
  moments(atMs: number): DemandMoments;
}

/** How a `DemandProfile` reads a history. */
export interface DemandProfileOptions {
  /**
   * Estimate per time of day (the classifier found the tenant periodic: `features.pattern === "periodic"`); otherwise
   * one estimate from every sample, since a constant or unpredictable tenant's time of day tells nothing.
   * @default false
   */
  periodic: boolean;
  /** Slot length of the history, ms: the tenant registry's `slotSec` x 1000. @default 120000 */
  slotMs: number;
  /** The period of a periodic tenant, ms; a whole number of slots. @default 86400000 (one day) */
  periodMs: number;
  /**
   * Slots either side of the slot of the asked time that count too (periodic only). With 2-minute slots, 1 gives a
   * 6-minute window: three times the samples per estimate, robust to a daily shape that shifts by a few minutes, and a
   * ramp inside the window widens the variance (conservative) rather than hiding the peak.
   * @default 1
   */
  neighbourSlots: number;
  /**
   * Fewer samples than this give no estimate: a periodic window falls back to all samples, and all samples to the
   * prior. Two is the least that has a variance; three is what one day of history gives a window with one neighbour.
   * @default 3
   */
  minSamples: number;
  /**
   * The moments when the history has fewer than `minSamples` usable samples. The default assumes the primary may take
   * its whole server (mean 100 %, no variance): with nothing known, nothing harvestable is promised, as the power-aware
   * placement treats a server with no history as critical. Until a new server has a few slots of history (minutes),
   * jobs that would need it wait. A caller with a better prior (the cluster's pooled moments, as seeds/003's population
   * prior, or the live usage) passes it here.
   * @default { mean: 100, variance: 0 }
   */
  prior: { mean: number; variance: number };
}

/** The defaults of every `DemandProfileOptions` field. */
export const DEFAULT_DEMAND_PROFILE_OPTIONS: Readonly<DemandProfileOptions> = Object.freeze({
  periodic: false,
  slotMs: 120_000,
  periodMs: DAY_MS,
  neighbourSlots: 1,
  minSamples: 3,
  prior: Object.freeze({ mean: 100, variance: 0 }),
});

/** Fills defaults and validates, naming the offending field in a CONFIG_INVALID error. */
export function resolveDemandProfileOptions(partial: Partial<DemandProfileOptions> = {}): DemandProfileOptions {
  const o: DemandProfileOptions = { ...DEFAULT_DEMAND_PROFILE_OPTIONS, ...stripUndefined(partial) };
  const bad = (field: string, why: string): never => invalidOption("demand profile", field, why);
  if (typeof o.periodic !== "boolean") bad("periodic", "must be true or false");
  if (!(Number.isInteger(o.slotMs) && o.slotMs > 0)) bad("slotMs", "must be a whole number of ms > 0");
  if (!(Number.isInteger(o.periodMs) && o.periodMs > 0 && o.periodMs % o.slotMs === 0))
    bad("periodMs", `must be a whole number of slots (slotMs ${o.slotMs})`);
  const slots = o.periodMs / o.slotMs;
  if (!(Number.isInteger(o.neighbourSlots) && o.neighbourSlots >= 0 && 2 * o.neighbourSlots + 1 <= slots))
    bad("neighbourSlots", `must be an integer >= 0 whose window (2 x neighbourSlots + 1) fits in the ${slots} slots`);
  if (!(Number.isInteger(o.minSamples) && o.minSamples >= 2)) bad("minSamples", "must be an integer >= 2");
  const p = o.prior as { mean?: unknown; variance?: unknown } | undefined;
  if (!(p && typeof p.mean === "number" && p.mean >= 0 && p.mean <= 100))
    bad("prior.mean", "must be a CPU percentage in [0, 100]");
  if (!(p && typeof p.variance === "number" && Number.isFinite(p.variance) && p.variance >= 0))
    bad("prior.variance", "must be a finite number >= 0");
  return o;
}

/** Running sums of shifted samples: count, sum of (x - ref), sum of (x - ref)^2. */
interface Sums {
  n: number;
  s: number;
  q: number;
}

/**
 * A primary tenant's demand moments precomputed from its history: per slot of the period (periodic tenants) the count,
 * sum and sum of squares of its samples, and the same over all samples, so that `moments(atMs)` costs
 * O(neighbourSlots) however long the history. Slots are aligned to the Unix epoch (UTC days), as the tenant registry
 * stores them.
 *
 * Odd history, explicitly: a sample whose time or value is not a finite number is skipped (it is no measurement); a
 * value outside 0..100 is clamped into it, as the trace readers do; the order of samples does not matter; `timesMs`
 * and `cpuPct` of different lengths is a caller bug (INVALID_ARGUMENT). The variance is the sample variance (divided by
 * n - 1): the history is a sample of the tenant's behaviour, and the unbiased estimate is the larger, safer one.
 */
export class DemandProfile implements PrimaryDemandSource {
  readonly options: DemandProfileOptions;
  private readonly slotsPerPeriod: number;
  /** Per slot of the period (periodic only): sums of its samples. Empty when not periodic. */
  private readonly slotN: Float64Array;
  private readonly slotS: Float64Array;
  private readonly slotQ: Float64Array;
  private readonly total: Sums = { n: 0, s: 0, q: 0 };
  /**
   * The shift of the sums (the first usable sample): sums of squares of values near the mean, not of raw values,
   * so that a nearly constant tenant's variance does not cancel away in floating point.
   */
  private readonly ref: number;

  constructor(
    series: { readonly timesMs: readonly number[]; readonly cpuPct: readonly number[] },
    options: Partial<DemandProfileOptions> = {},
  ) {
    this.options = resolveDemandProfileOptions(options);
    if (series.timesMs.length !== series.cpuPct.length)
      throw new HarvestError(
        "INVALID_ARGUMENT",
        `demand profile: timesMs has ${series.timesMs.length} samples but cpuPct has ${series.cpuPct.length}`,
      );
    this.slotsPerPeriod = this.options.periodMs / this.options.slotMs;
    const perSlot = this.options.periodic ? this.slotsPerPeriod : 0;
    this.slotN = new Float64Array(perSlot);
    this.slotS = new Float64Array(perSlot);
    this.slotQ = new Float64Array(perSlot);
    let ref: number | undefined;
    for (let i = 0; i < series.timesMs.length; i++) {
      const t = series.timesMs[i]!;
      const raw = series.cpuPct[i]!;
      if (!Number.isFinite(t) || !Number.isFinite(raw)) continue;
      const x = Math.min(100, Math.max(0, raw));
      ref ??= x;
      const d = x - ref;
      this.total.n += 1;
      this.total.s += d;
      this.total.q += d * d;
      if (perSlot > 0) {
        const k = this.slotOf(t);
        this.slotN[k]! += 1;
        this.slotS[k]! += d;
        this.slotQ[k]! += d * d;
      }
    }
    this.ref = ref ?? 0;
  }

  /** Number of usable samples in the history. */
  get samples(): number {
    return this.total.n;
  }

  /**
   * The demand moments at `atMs`: for a periodic tenant from the samples in the slot of `atMs` within the period and
   * `neighbourSlots` either side, across every period of the history; otherwise (or when that window has fewer than
   * `minSamples`) from all samples; with fewer than `minSamples` usable samples in all, the prior.
   */
  moments(atMs: number): DemandMoments {
    const { minSamples, prior, neighbourSlots } = this.options;
    if (this.options.periodic && Number.isFinite(atMs)) {
      const k0 = this.slotOf(atMs);
      const w: Sums = { n: 0, s: 0, q: 0 };
      for (let j = -neighbourSlots; j <= neighbourSlots; j++) {
        const k = (((k0 + j) % this.slotsPerPeriod) + this.slotsPerPeriod) % this.slotsPerPeriod;
        w.n += this.slotN[k]!;
        w.s += this.slotS[k]!;
        w.q += this.slotQ[k]!;
      }
      if (w.n >= minSamples) return this.fromSums(w, "time-of-day");
    }
    if (this.total.n >= minSamples) return this.fromSums(this.total, "all");
    return { mean: prior.mean, variance: prior.variance, samples: 0, basis: "prior" };
  }

  private slotOf(tMs: number): number {
    const inPeriod = ((tMs % this.options.periodMs) + this.options.periodMs) % this.options.periodMs;
    return Math.min(this.slotsPerPeriod - 1, Math.floor(inPeriod / this.options.slotMs));
  }

  private fromSums(w: Sums, basis: DemandMoments["basis"]): DemandMoments {
    const meanShift = w.s / w.n;
    // Clamped: rounding can leave a constant tenant's sum of squares a hair below s^2 / n.
    const variance = Math.max(0, (w.q - w.s * meanShift) / (w.n - 1));
    return { mean: Math.min(100, Math.max(0, this.ref + meanShift)), variance, samples: w.n, basis };
  }
}

/**
 * The demand moments of a primary tenant at `opts.atMs` from its history (`UtilizationSeries` or any pair of arrays),
 * in percent of its server: `new DemandProfile(series, opts).moments(opts.atMs)`. Build a `DemandProfile` once instead
 * when asking about many times.
 */
export function primaryDemandMoments(
  series: { readonly timesMs: readonly number[]; readonly cpuPct: readonly number[] },
  opts: Partial<DemandProfileOptions> & { atMs: number },
): DemandMoments {
  const { atMs, ...rest } = opts;
  return new DemandProfile(series, rest).moments(atMs);
}

/** A source whose demand never changes (an idle primary: `fixedDemand(0, 0)`; a model's constant estimate). */
export function fixedDemand(meanPct: number, variancePct2: number): PrimaryDemandSource {
  const m: DemandMoments = { mean: meanPct, variance: variancePct2, samples: 0, basis: "prior" };
  return { moments: () => m };
}
