/**
 * Admission control for batch jobs: seeds/003 (the cluster admission problem), sections 2-5, applied to harvested
 * capacity. Pure: no I/O, no timers; the time is passed in as a number (the caller reads its injected `Clock`).
 *
 * Why: a job admitted into capacity that the primary tenants are about to take back only produces kills. So a
 * submitted job waits in an admission queue (`AdmissionQueue`) until the policy estimates that the probability of the
 * cluster's demand overrunning its capacity, over the job's predicted lifetime, stays within an SLA threshold.
 *
 * The mapping from seeds/003 to Harvest:
 * - The paper's cluster is a pool of C cores that deployments share, with no placement (section 2.1). Here C is the sum
 *   over servers of capacity - reserve: the reserve is what the yield controller keeps free for the primary, so demand
 *   beyond capacity - reserve is what makes a node manager kill secondary containers. The pool model ignores
 *   fragmentation across servers; placing containers on servers is the scheduler's job (scheduler.ts).
 * - The paper's deployments are random processes whose size the provider estimates (Propositions 4.3 and 4.5). Here the
 *   random part of the demand is the primary tenants': each server's primary demand at a future time t has a mean and
 *   a variance estimated from its utilization history (`DemandProfile`: at the same time of day for periodic tenants).
 *   Secondary jobs are deterministic: an admitted job counts with its whole demand (job manager + max concurrency x
 *   task size, as the caller sizes it) until its predicted end. That is an upper bound of what it can use (a Tez-like
 *   job never runs more than its max concurrency), so it adds to the mean and nothing to the variance.
 * - D(t) = sum over servers of the primary's demand at t + the admitted jobs still live at t + the candidate. Its mean
 *   and variance are sums over servers assuming the servers' primaries are independent, as seeds/003 assumes its
 *   deployments independent (Assumption 2 makes them so; Propositions 4.3 and 4.5 sum uncorrelated terms). Servers of
 *   one tenant are not independent in reality; the time-of-day means absorb the shared daily shape, and
 *   `primaryCorrelation` offers "tenant" (a tenant's servers fully correlated, tenants independent) and "full" (all
 *   fully correlated: standard deviations add), both more conservative.
 * - "In all future time steps" (Definitions 4.2 and 4.4) becomes: at steps of `stepMs` from now until the candidate's
 *   predicted end, capped at `horizonMs`. After its end the job's expected size is zero, so it is "marginal" there in
 *   the sense of seeds/003's marginal heuristic (section 6.1, Definition 6.1), which the paper uses when it has
 *   deployment-specific priors; Harvest's lifetime prediction is such a prior. The default horizon of one day loses
 *   nothing for our profiles: a profile's moments repeat daily and admitted demand only falls over time (Assumption 1:
 *   no future arrivals), so a step a day later is never worse than the same time of day within the first day.
 * - The paper rejects an arriving deployment (it goes to another cluster); Harvest keeps it waiting, and re-evaluates it
 *   as the cluster changes. A job that even an idle cluster would not admit (`neverAdmissible`) is refused at submit.
 * - The paper accepts when the estimate is "less than" the threshold; Harvest admits when it is at most the threshold
 *   (a job that exactly fills the zeroth policy's limit fits). For the continuous bounds this changes nothing.
 * - Thresholds: the paper tunes each policy's threshold by binary search until the simulated failure rate meets the SLA
 *   (section 5.2), because Markov's and Cantelli's bounds are loose (sections 4.2, 4.3). `tuneThreshold` is that search;
 *   the defaults below are starting points to be tuned the same way against the kill rate the operator accepts.
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

// ---------------------------------------------------------------------------------------------------------------------
// The bounds.

/**
 * Markov's inequality as the first-moment policy uses it (seeds/003 section 4.2, Definition 4.2): for a non-negative
 * demand D, P(D >= C) <= E[D] / C. Clamped to [0, 1] (a probability); 1 when C <= 0 or an input is not finite.
 */
export function markovBound(mean: number, capacity: number): number {
  if (!Number.isFinite(mean) || !Number.isFinite(capacity) || capacity <= 0) return 1;
  return Math.min(1, Math.max(0, mean / capacity));
}

/**
 * Cantelli's (one-sided Chebyshev) inequality as the second-moment policy uses it (seeds/003 section 4.3, Definition
 * 4.4): P(D - mu >= t) <= sigma^2 / (sigma^2 + t^2) with t = C - mu > 0; 1 when mu >= C (the paper's policy rejects
 * there) or an input is not finite. A variance below zero (rounding) counts as zero, so mu < C with no variance is 0.
 */
export function cantelliBound(mean: number, variance: number, capacity: number): number {
  if (!Number.isFinite(mean) || !Number.isFinite(variance) || !Number.isFinite(capacity)) return 1;
  const t = capacity - mean;
  if (t <= 0) return 1;
  const v = Math.max(0, variance);
  return v / (v + t * t);
}

/**
 * The largest extra deterministic demand x such that Cantelli's bound for mean + x stays within `threshold`:
 * sigma^2 / (sigma^2 + (C - mu - x)^2) <= theta  <=>  C - mu - x >= sigma x sqrt((1 - theta) / theta), so
 * x = C - mu - sigma x sqrt((1 - theta) / theta), floored at 0. With no variance it is C - mu, a supremum (at exactly
 * mu + x = C the bound is 1 by convention). Lets Algorithm 1's per-class headroom (seeds/004) plan with the second
 * moment instead of a fixed percentile. Any consistent unit. A non-finite input gives 0 (no headroom) rather than
 * poisoning a sum of headrooms; `threshold` must be in (0, 1] (INVALID_ARGUMENT).
 */
export function cantelliHeadroom(mean: number, variance: number, capacity: number, threshold: number): number {
  if (!(typeof threshold === "number" && threshold > 0 && threshold <= 1))
    throw new HarvestError("INVALID_ARGUMENT", `cantelliHeadroom: threshold must be in (0, 1], got ${threshold}`);
  if (!Number.isFinite(mean) || !Number.isFinite(variance) || !Number.isFinite(capacity)) return 0;
  const sigma = Math.sqrt(Math.max(0, variance));
  return Math.max(0, capacity - mean - sigma * Math.sqrt((1 - threshold) / threshold));
}

/**
 * The zeroth-moment test (seeds/003 section 4.1, Definition 4.1, mapped as `decideAdmission` describes): true when
 * the secondary demand after admission is at most `threshold` x the capacity harvestable now.
 */
export function zerothAdmits(secondaryAfterMilli: number, harvestableNowMilli: number, threshold: number): boolean {
  return secondaryAfterMilli <= threshold * Math.max(0, harvestableNowMilli);
}

// ---------------------------------------------------------------------------------------------------------------------
// Options.

/** The admission policy: none (the baseline: admit at once, as stock YARN) or seeds/003's three moment policies. */
export type AdmissionPolicy = "none" | "zeroth" | "first" | "second";

/** How the primaries' variances add up over servers (see the module comment). */
export type PrimaryCorrelation = "independent" | "tenant" | "full";

/** Settings of admission control. */
export interface AdmissionOptions {
  /** Which policy decides. "none" is the baseline beside the others (DESIGN.md principle 2). @default "none" */
  policy: AdmissionPolicy;
  /**
   * Zeroth: admit while the secondary demand after admission is at most this share of the cores harvestable now.
   * Below 1 keeps room for the primaries to grow before kills start, as the paper's threshold reserves cores for
   * scale-outs; above 1 (at most 4) oversubscribes, as seeds/003's zeroth-moment threshold may: a job's demand is its
   * widest stage for its whole life, which it rarely holds. Tune it (`tuneThreshold`).
   * @default 0.8
   */
  zerothThreshold: number;
  /**
   * First (Markov): admit while E[D] / C is at most this at every step. Markov's bound is loose, so this is tuned far
   * above the SLA itself (seeds/003 section 4.2): 0.8 keeps the expected demand a fifth below capacity.
   * @default 0.8
   */
  firstThreshold: number;
  /**
   * Second (Cantelli): admit while Cantelli's bound is at most this at every step. 0.1 keeps the expected demand three
   * standard deviations below capacity (sqrt(0.9 / 0.1) = 3), the usual three-sigma margin; like the paper's, it is a
   * starting point to tune, not the SLA.
   * @default 0.1
   */
  secondThreshold: number;
  /** The steps go at most this far ahead of now (the job's predicted lifetime, capped). @default 86400000 (a day) */
  horizonMs: number;
  /** Distance between the steps evaluated. @default 300000 (5 minutes) */
  stepMs: number;
  /** How the primaries' variances add up over servers. @default "independent" (as seeds/003) */
  primaryCorrelation: PrimaryCorrelation;
  /**
   * The queue lets a job that fits pass a waiting job before it (backfill) instead of keeping strict order (priority,
   * then submission: the head blocks everyone behind it). See `AdmissionQueue`.
   * @default false
   */
  backfill: boolean;
}

/** The defaults of every `AdmissionOptions` field. */
export const DEFAULT_ADMISSION_OPTIONS: Readonly<AdmissionOptions> = Object.freeze({
  policy: "none",
  zerothThreshold: 0.8,
  firstThreshold: 0.8,
  secondThreshold: 0.1,
  horizonMs: DAY_MS,
  stepMs: 300_000,
  primaryCorrelation: "independent",
  backfill: false,
});

/** Most steps one decision evaluates (horizonMs / stepMs): a day at 1-second steps is fine, a year is not. */
export const MAX_ADMISSION_STEPS = 100_000;

const POLICIES: readonly AdmissionPolicy[] = ["none", "zeroth", "first", "second"];
const CORRELATIONS: readonly PrimaryCorrelation[] = ["independent", "tenant", "full"];

/** Fills defaults and validates, naming the offending field in a CONFIG_INVALID error. */
export function resolveAdmissionOptions(partial: Partial<AdmissionOptions> = {}): AdmissionOptions {
  const o: AdmissionOptions = { ...DEFAULT_ADMISSION_OPTIONS, ...stripUndefined(partial) };
  const bad = (field: string, why: string): never => invalidOption("admission", field, why);
  if (!POLICIES.includes(o.policy)) bad("policy", `must be one of ${POLICIES.join(", ")}, got ${String(o.policy)}`);
  const fraction = (field: "zerothThreshold" | "firstThreshold", v: number, max: number): void => {
    if (!(typeof v === "number" && v > 0 && v <= max)) bad(field, `must be in (0, ${max}], got ${String(v)}`);
  };
  fraction("zerothThreshold", o.zerothThreshold, 4);
  // Markov's bound is a probability: 1 already admits everything.
  fraction("firstThreshold", o.firstThreshold, 1);
  // 1 would admit even when the expected demand exceeds capacity (Cantelli's bound never exceeds 1).
  if (!(typeof o.secondThreshold === "number" && o.secondThreshold > 0 && o.secondThreshold < 1))
    bad("secondThreshold", `must be in (0, 1), got ${String(o.secondThreshold)}`);
  if (!(Number.isInteger(o.stepMs) && o.stepMs > 0)) bad("stepMs", "must be a whole number of ms > 0");
  if (!(Number.isFinite(o.horizonMs) && o.horizonMs >= 0)) bad("horizonMs", "must be a number of ms >= 0");
  if (o.horizonMs / o.stepMs > MAX_ADMISSION_STEPS)
    bad("horizonMs", `must be at most ${MAX_ADMISSION_STEPS} steps of stepMs (${o.stepMs} ms)`);
  if (!CORRELATIONS.includes(o.primaryCorrelation))
    bad("primaryCorrelation", `must be one of ${CORRELATIONS.join(", ")}`);
  if (typeof o.backfill !== "boolean") bad("backfill", "must be true or false");
  return o;
}

/** The threshold `options.policy` compares with (1 for "none", which compares nothing). */
export function thresholdOf(options: AdmissionOptions): number {
  switch (options.policy) {
    case "none":
      return 1;
    case "zeroth":
      return options.zerothThreshold;
    case "first":
      return options.firstThreshold;
    case "second":
      return options.secondThreshold;
  }
}

// ---------------------------------------------------------------------------------------------------------------------
// The decision.

/** One server as admission sees it. Milli-cores throughout. */
export interface AdmissionServer {
  serverId: string;
  capacityMilli: number;
  /** Kept free for the primary (the scheduler's reserve). */
  reserveMilli: number;
  /** Secondary containers allocated on it now. */
  allocatedMilli: number;
  /** The primary tenant's usage now (the zeroth policy's harvestable capacity). */
  primaryNowMilli: number;
  /** The primary's demand at a time, in percent of this server (first and second policies). */
  primary: PrimaryDemandSource;
  /** The server's primary tenant, for `primaryCorrelation: "tenant"` (none: a tenant of its own). */
  tenant?: string | undefined;
}

/** A job admitted earlier and not finished: every running secondary job must be here. */
export interface AdmittedJob {
  appId: string;
  /** Its demand, milli-cores (as the candidate's was sized). */
  demandMilli: number;
  /** Of which allocated now. */
  allocatedMilli: number;
  /**
   * Its predicted end (Unix ms; Infinity: unknown). A job still running past it counts at every step: it holds its
   * containers until it ends, and we do not know when (the caller should re-predict it from its uptime).
   */
  endMs: number;
}

/** The cluster at the time of a decision. */
export interface AdmissionCluster {
  servers: readonly AdmissionServer[];
  admitted: readonly AdmittedJob[];
}

/** A job asking to be admitted. */
export interface AdmissionCandidate {
  appId?: string | undefined;
  /** Its demand, milli-cores: job manager + max concurrency x task size, capped as the caller decides. */
  demandMilli: number;
  /** Its predicted lifetime, ms (Infinity: unknown, so the whole horizon). */
  lifetimeMs: number;
}

/** What the policy decided, and why. */
export interface AdmissionDecision {
  admit: boolean;
  policy: AdmissionPolicy;
  /**
   * The worst estimate over the steps: first/second, the probability bound (0..1); zeroth, the secondary share of the
   * capacity harvestable now (Infinity when nothing is harvestable and something is asked); none, 0.
   */
  bound: number;
  threshold: number;
  /** The step where `bound` is worst (the earliest of equals); absent for "none". */
  atMs?: number;
  /** One sentence for an operator (`harvest job status`). */
  reason: string;
}

const LABELS: Record<AdmissionPolicy, string> = {
  none: "no admission control",
  zeroth: "zeroth-moment",
  first: "first-moment (Markov)",
  second: "second-moment (Cantelli)",
};

/**
 * The cluster's outlook from `nowMs` for repeated decisions: the primaries' mean and variance at every step of the
 * horizon and the admitted jobs' demand are summed once, so that each `decide` costs O(steps). When a queue admits
 * several jobs in one pass, `commit` each admitted one so that the next decision sees it:
 *
 *     const outlook = new AdmissionOutlook(cluster, now, options);
 *     queue.admitReady(now, (job) => { const d = outlook.decide(job); if (d.admit) outlook.commit(job); return d; });
 *
 * Steps are t_k = now + k x stepMs for k = 0, 1, ... while k x stepMs < horizonMs (at least now); a job of lifetime L
 * is evaluated at the steps with k x stepMs < min(L, horizonMs) (at least now).
 */
export class AdmissionOutlook {
  readonly options: AdmissionOptions;
  /** C: the sum of capacity - reserve, milli-cores. */
  readonly capacityMilli: number;
  /** The zeroth policy's capacity: the sum of capacity - reserve - primary now, each floored at 0, milli-cores. */
  readonly harvestableNowMilli: number;
  private readonly steps: number;
  /** Per step: the primaries' expected demand and its variance (as `primaryCorrelation` adds them), milli-cores. */
  private readonly primaryMean: Float64Array;
  private readonly primaryVar: Float64Array;
  /** Per step: the admitted (and committed) jobs' demand live then, plus allocations of jobs not listed. */
  private readonly secondary: Float64Array;
  /** Secondary allocated now, and admitted (or committed) demand not yet allocated: the zeroth policy's count. */
  private readonly allocatedNowMilli: number;
  private pendingNowMilli: number;

  constructor(
    cluster: AdmissionCluster,
    readonly nowMs: number,
    options: Partial<AdmissionOptions> = {},
  ) {
    this.options = resolveAdmissionOptions(options);
    if (!Number.isFinite(nowMs))
      throw new HarvestError("INVALID_ARGUMENT", `admission: now must be a time, got ${nowMs}`);
    let capacity = 0;
    let harvestable = 0;
    let allocated = 0;
    for (const s of cluster.servers) {
      for (const f of ["capacityMilli", "reserveMilli", "allocatedMilli", "primaryNowMilli"] as const)
        if (!(Number.isFinite(s[f]) && s[f] >= 0))
          throw new HarvestError("INVALID_ARGUMENT", `admission: server ${s.serverId} ${f} must be >= 0, got ${s[f]}`);
      capacity += Math.max(0, s.capacityMilli - s.reserveMilli);
      harvestable += Math.max(0, s.capacityMilli - s.reserveMilli - s.primaryNowMilli);
      allocated += s.allocatedMilli;
    }
    this.capacityMilli = capacity;
    this.harvestableNowMilli = harvestable;
    this.allocatedNowMilli = allocated;

    const o = this.options;
    this.steps = o.horizonMs > 0 ? Math.ceil(o.horizonMs / o.stepMs) : 1;
    const moments = o.policy === "first" || o.policy === "second";
    const k = moments ? this.steps : 0;
    this.primaryMean = new Float64Array(k);
    this.primaryVar = new Float64Array(k);
    this.secondary = new Float64Array(k);
    if (moments) this.sumPrimaries(cluster.servers);

    let pending = 0;
    let trackedAllocated = 0;
    for (const j of cluster.admitted) {
      if (!(
        Number.isFinite(j.demandMilli) &&
        j.demandMilli >= 0 &&
        Number.isFinite(j.allocatedMilli) &&
        j.allocatedMilli >= 0
      ))
        throw new HarvestError(
          "INVALID_ARGUMENT",
          `admission: admitted job ${j.appId} needs demandMilli and allocatedMilli >= 0`,
        );
      if (Number.isNaN(j.endMs))
        throw new HarvestError("INVALID_ARGUMENT", `admission: admitted job ${j.appId} endMs is NaN`);
      pending += Math.max(0, j.demandMilli - j.allocatedMilli);
      trackedAllocated += j.allocatedMilli;
      // Overdue: still running, end unknown, so every step.
      this.addSecondary(j.demandMilli, j.endMs <= nowMs ? Infinity : j.endMs - nowMs);
    }
    this.pendingNowMilli = pending;
    // Containers of jobs the caller did not list (e.g. started while the policy was "none") hold their cores too.
    this.addSecondary(Math.max(0, allocated - trackedAllocated), Infinity);
  }

  /** How many steps a job of `lifetimeMs` is evaluated at (at least now). */
  stepsFor(lifetimeMs: number): number {
    const window = Math.min(lifetimeMs, this.options.horizonMs);
    return window > 0 ? Math.min(this.steps, Math.ceil(window / this.options.stepMs)) : 1;
  }

  /** The decision for `candidate` against the outlook (the policy of `options`). */
  decide(candidate: AdmissionCandidate): AdmissionDecision {
    checkCandidate(candidate);
    const o = this.options;
    const threshold = thresholdOf(o);
    switch (o.policy) {
      case "none":
        return {
          admit: true,
          policy: "none",
          bound: 0,
          threshold,
          reason: "admitted: no admission control (policy none)",
        };
      case "zeroth":
        return this.decideZeroth(candidate, threshold);
      case "first":
      case "second":
        return this.decideMoments(candidate, threshold);
    }
  }

  /** Counts `candidate` as admitted now, for its lifetime, in every later `decide` of this outlook. */
  commit(candidate: AdmissionCandidate): void {
    checkCandidate(candidate);
    this.pendingNowMilli += candidate.demandMilli;
    this.addSecondary(candidate.demandMilli, candidate.lifetimeMs);
  }

  /**
   * Definition 4.1 mapped to harvesting: the paper admits while the cores active after admission stay under a share of
   * a fixed capacity. Here the capacity secondary jobs can have now is what the primaries leave (capacity - reserve -
   * primary usage now, per server), and the secondary demand counts what is allocated plus what admitted jobs may
   * still ask for (they grow to their full demand as a deployment scales out, and must then fit), plus the candidate.
   * Like the paper's, it is myopic: it ignores where the primaries are going.
   */
  private decideZeroth(c: AdmissionCandidate, threshold: number): AdmissionDecision {
    const after = this.allocatedNowMilli + this.pendingNowMilli + c.demandMilli;
    const h = this.harvestableNowMilli;
    const admit = zerothAdmits(after, h, threshold);
    const bound = h > 0 ? after / h : after > 0 ? Infinity : 0;

    const parts =
      `${cores(after)} secondary cores after admission (${cores(this.allocatedNowMilli)} allocated, ` +
      `${cores(this.pendingNowMilli)} admitted but not yet allocated, this job ${cores(c.demandMilli)}) ` +
      `of ${cores(h)} cores harvestable now`;
    const reason = admit
      ? `admitted: zeroth-moment share ${compared(bound, threshold)}: ${parts}`
      : `waits: zeroth-moment share ${compared(bound, threshold)}: ${parts}`;
    return { admit, policy: "zeroth", bound, threshold, atMs: this.nowMs, reason };
  }

  /** Definitions 4.2 and 4.4: the bound at every step of the candidate's lifetime, the worst against the threshold. */
  private decideMoments(c: AdmissionCandidate, threshold: number): AdmissionDecision {
    const policy = this.options.policy;
    const second = policy === "second";
    const n = this.stepsFor(c.lifetimeMs);
    const boundAt = (k: number): number => {
      const mean = this.primaryMean[k]! + this.secondary[k]! + c.demandMilli;
      return second
        ? cantelliBound(mean, this.primaryVar[k]!, this.capacityMilli)
        : markovBound(mean, this.capacityMilli);
    };
    let worst = 0;
    let worstBound = boundAt(0);
    const nowBound = worstBound;
    for (let k = 1; k < n; k++) {
      const b = boundAt(k);
      if (b > worstBound) {
        worst = k;
        worstBound = b;
      }
    }
    const admit = worstBound <= threshold;
    const atMs = this.nowMs + worst * this.options.stepMs;
    const when =
      worst === 0 ? "now" : `at ${clockTime(atMs)} (in ${duration(atMs - this.nowMs)}; now ${fmtNum(nowBound)})`;
    const label = LABELS[policy];
    const primaries = this.primaryMean[worst]!;
    const spread = second ? ` (sd ${cores(Math.sqrt(this.primaryVar[worst]!))})` : "";
    const mean = primaries + this.secondary[worst]! + c.demandMilli;
    const detail =
      `expected demand ${cores(mean)} of ${cores(this.capacityMilli)} cores: primaries ${cores(primaries)}${spread}, ` +
      `admitted jobs ${cores(this.secondary[worst]!)}, this job ${cores(c.demandMilli)}`;
    const reason = admit
      ? `admitted: ${label} bound ${compared(worstBound, threshold)} at worst, ${when}: ${detail}`
      : `waits: ${label} bound ${compared(worstBound, threshold)} ${when}: ${detail}`;
    return { admit, policy, bound: worstBound, threshold, atMs, reason };
  }

  /** Adds `demandMilli` to the steps before now + `forMs` (at least now). */
  private addSecondary(demandMilli: number, forMs: number): void {
    if (demandMilli === 0 || this.secondary.length === 0) return;
    const n = forMs > 0 ? Math.min(this.steps, Math.ceil(forMs / this.options.stepMs)) : 1;
    for (let k = 0; k < n; k++) this.secondary[k]! += demandMilli;
  }

  /** The primaries' mean and variance at every step, in milli-cores, summed as `primaryCorrelation` says. */
  private sumPrimaries(servers: readonly AdmissionServer[]): void {
    const groupOf = new Map<string, number>();
    const group = servers.map((s, i) => {
      const key =
        this.options.primaryCorrelation === "full"
          ? ""
          : this.options.primaryCorrelation === "tenant" && s.tenant !== undefined
            ? `t:${s.tenant}`
            : `s:${i}`;
      let g = groupOf.get(key);
      if (g === undefined) groupOf.set(key, (g = groupOf.size));
      return g;
    });
    const sd = new Float64Array(groupOf.size);
    for (let k = 0; k < this.steps; k++) {
      const t = this.nowMs + k * this.options.stepMs;
      sd.fill(0);
      let mean = 0;
      servers.forEach((s, i) => {
        const m = serverMomentsMilli(s, t);
        mean += m.mean;
        sd[group[i]!]! += Math.sqrt(m.variance);
      });
      let variance = 0;
      // Within a group, standard deviations add (fully correlated); groups are independent, so variances add.
      for (const x of sd) variance += x * x;
      this.primaryMean[k] = mean;
      this.primaryVar[k] = variance;
    }
  }
}

/**
 * A server's primary demand at `atMs` in milli-cores. The source's numbers are cleaned conservatively: a mean that
 * is not a finite number counts as the whole server (with no variance), a mean outside 0..100 % is clamped, and a
 * variance below zero (rounding) counts as zero.
 */
function serverMomentsMilli(s: AdmissionServer, atMs: number): { mean: number; variance: number } {
  const m = s.primary.moments(atMs);
  const perPct = s.capacityMilli / 100;
  if (!Number.isFinite(m.mean) || !Number.isFinite(m.variance)) return { mean: s.capacityMilli, variance: 0 };
  return {
    mean: Math.min(100, Math.max(0, m.mean)) * perPct,
    variance: Math.max(0, m.variance) * perPct * perPct,
  };
}

function checkCandidate(c: AdmissionCandidate): void {
  const name = c.appId ?? "candidate";
  if (!(Number.isFinite(c.demandMilli) && c.demandMilli >= 0))
    throw new HarvestError("INVALID_ARGUMENT", `admission: ${name} demandMilli must be >= 0, got ${c.demandMilli}`);
  if (!(c.lifetimeMs >= 0))
    throw new HarvestError("INVALID_ARGUMENT", `admission: ${name} lifetimeMs must be >= 0, got ${c.lifetimeMs}`);
}

/**
 * The admission decision for one candidate (seeds/003 Definitions 4.1, 4.2, 4.4 as mapped in the module comment):
 * `new AdmissionOutlook(cluster, nowMs, options).decide(candidate)`. Build the outlook once to decide many.
 * - none: admit.
 * - zeroth: admit when allocated + admitted-not-yet-allocated + candidate <= threshold x harvestable now.
 * - first: admit when at every step E[D(t)] / C <= threshold (Markov).
 * - second: admit when at every step Cantelli's bound on P(D(t) >= C) <= threshold.
 */
export function decideAdmission(
  cluster: AdmissionCluster,
  candidate: AdmissionCandidate,
  nowMs: number,
  options: Partial<AdmissionOptions> = {},
): AdmissionDecision {
  return new AdmissionOutlook(cluster, nowMs, options).decide(candidate);
}

/**
 * The decision an idle cluster would make: the same servers with every primary at zero demand (no variance), nothing
 * allocated and nothing admitted. Every bound grows with demand, so if this waits, the job waits in every state of
 * this cluster. Time plays no part, so the one step "now" (0) is evaluated.
 */
export function idleClusterDecision(
  servers: readonly Pick<AdmissionServer, "serverId" | "capacityMilli" | "reserveMilli">[],
  candidate: AdmissionCandidate,
  options: Partial<AdmissionOptions> = {},
): AdmissionDecision {
  const idle = fixedDemand(0, 0);
  const cluster: AdmissionCluster = {
    servers: servers.map((s) => ({
      serverId: s.serverId,
      capacityMilli: s.capacityMilli,
      reserveMilli: s.reserveMilli,
      allocatedMilli: 0,
      primaryNowMilli: 0,
      primary: idle,
    })),
    admitted: [],
  };
  return decideAdmission(cluster, { ...candidate, lifetimeMs: 0 }, 0, options);
}

/**
 * True when even an idle cluster would not admit the job, so the daemon should refuse it at submit (with a coded
 * error and `idleClusterDecision(...).reason`) rather than queue it for ever. False with no servers at all: the size
 * of a cluster whose node managers have not registered yet says nothing. The daemon should ask again for the queue's
 * head when servers leave, since a shrunken cluster can make a waiting job impossible.
 */
export function neverAdmissible(
  servers: readonly Pick<AdmissionServer, "serverId" | "capacityMilli" | "reserveMilli">[],
  candidate: AdmissionCandidate,
  options: Partial<AdmissionOptions> = {},
): boolean {
  if (servers.length === 0) return false;
  return !idleClusterDecision(servers, candidate, options).admit;
}

/**
 * The threshold tuning of seeds/003 section 5.2: a binary search for the largest threshold in [lo, hi] whose measured
 * failure rate (`measure`, e.g. the kill rate of a simulated run) is at most `sla`, assuming the rate does not fall as
 * the threshold rises (a higher threshold admits more, for every policy). Undefined when even `lo` fails the SLA.
 */
export function tuneThreshold(
  measure: (threshold: number) => number,
  sla: number,
  range: { lo: number; hi: number; iterations?: number },
): number | undefined {
  let { lo, hi } = range;
  if (!(lo <= hi)) throw new HarvestError("INVALID_ARGUMENT", `tuneThreshold: lo ${lo} must be <= hi ${hi}`);
  if (!(measure(lo) <= sla)) return undefined;
  if (measure(hi) <= sla) return hi;
  for (let i = 0; i < (range.iterations ?? 20); i++) {
    const mid = (lo + hi) / 2;
    if (measure(mid) <= sla) lo = mid;
    else hi = mid;
  }
  return lo;
}

// ---------------------------------------------------------------------------------------------------------------------
// A job's demand.

/**
 * What a recurring job holds on average over its life, learned from its past runs: the cores its containers held
 * (job manager included), integrated over the run, divided by the run's length. seeds/003's deployments have a fixed
 * size; a batch job's size changes stage by stage, and counting its widest stage for its whole life (the only safe
 * figure for a job never seen) overstates what the moment estimates should add to E[D] several times over. The mean
 * of the last `maxRuns` runs is the job's demand, never above its widest stage; a job never seen counts at its widest.
 * Pure; the resource manager and the simulator feed it the same way (at each successful end).
 */
export class JobDemandModel {
  private readonly runs = new Map<string, number[]>();

  constructor(private readonly maxRuns = 20) {}

  /** One finished run of `name`: it held `meanMilli` milli-cores on average. Odd values are ignored. */
  observe(name: string, meanMilli: number): void {
    if (!(Number.isFinite(meanMilli) && meanMilli > 0)) return;
    const list = this.runs.get(name) ?? [];
    list.push(meanMilli);
    if (list.length > this.maxRuns) list.shift();
    this.runs.set(name, list);
  }

  /** The demand to count for a run of `name` whose widest stage (with its job manager) holds `widestMilli`. */
  demandMilli(name: string, widestMilli: number): number {
    const list = this.runs.get(name);
    if (!list || list.length === 0) return widestMilli;
    const mean = list.reduce((a, b) => a + b, 0) / list.length;
    return Math.min(widestMilli, Math.ceil(mean));
  }
}

// ---------------------------------------------------------------------------------------------------------------------
// The queue.

/** What the queue needs of a job; the caller's type may carry more (demand, lifetime). */
export interface QueuedJob {
  appId: string;
  /** Higher goes first. */
  priority: number;
}

/** One waiting job as `snapshot()` reports it. */
export interface QueueEntry {
  appId: string;
  priority: number;
  /** 1-based place in the queue. */
  position: number;
  waitingSinceMs: number;
  /** When the policy last judged it (absent: not yet). */
  lastCheckedMs?: number;
  /** Why it waits, for `harvest job status`. */
  reason: string;
  /** The job it waits behind under strict order, when that is why it waits. */
  blockedBy?: string;
  /** The policy's last decision on it. */
  decision?: AdmissionDecision;
}

/** A job `admitReady` let through. */
export interface AdmittedEntry<J> {
  job: J;
  decision: AdmissionDecision;
  waitedMs: number;
}

interface Slot<J> {
  job: J;
  seq: number;
  waitingSinceMs: number;
  lastCheckedMs?: number;
  reason: string;
  blockedBy?: string;
  decision?: AdmissionDecision;
}

/**
 * Jobs waiting for admission: pure bookkeeping. Order: higher priority first, then the order of `enqueue` (FIFO; a
 * restarted daemon re-enqueues in submission order with the original times).
 *
 * By default the order is strict: `admitReady` stops at the first job the policy holds back, and everyone behind it
 * (lower or equal priority, or later) waits behind it. seeds/003 takes requests first-come first-served (section 6.1),
 * and strict order is what keeps a large job from starving: under backfill a stream of small jobs keeps the bound
 * just under the threshold and the large one never fits. `backfill: true` lets a job that fits pass a held one (higher
 * utilization, no starvation guarantee).
 *
 * Invariant: `slots` is sorted by (priority descending, seq ascending), and `byId` holds exactly the jobs of `slots`.
 */
export class AdmissionQueue<J extends QueuedJob = QueuedJob> {
  readonly backfill: boolean;
  private slots: Slot<J>[] = [];
  private readonly byId = new Map<string, Slot<J>>();
  private seq = 0;

  constructor(options: { backfill?: boolean } = {}) {
    this.backfill = options.backfill ?? false;
  }

  /** How many jobs wait. */
  get size(): number {
    return this.slots.length;
  }

  has(appId: string): boolean {
    return this.byId.has(appId);
  }

  /** A waiting job, or undefined. */
  get(appId: string): J | undefined {
    return this.byId.get(appId)?.job;
  }

  /** Adds a job waiting since `sinceMs`, behind every job of its priority or higher. INVALID_ARGUMENT if queued. */
  enqueue(job: J, sinceMs: number): void {
    if (this.byId.has(job.appId))
      throw new HarvestError("INVALID_ARGUMENT", `admission queue: ${job.appId} is already queued`, {
        details: { appId: job.appId },
      });
    if (!Number.isFinite(job.priority))
      throw new HarvestError("INVALID_ARGUMENT", `admission queue: ${job.appId} priority must be a number`, {
        details: { appId: job.appId },
      });
    const slot: Slot<J> = { job, seq: this.seq++, waitingSinceMs: sinceMs, reason: "queued: not yet evaluated" };
    // After every job of priority >= its own: a later job never passes an earlier one of its priority.
    let i = this.slots.length;
    while (i > 0 && this.slots[i - 1]!.job.priority < job.priority) i--;
    this.slots.splice(i, 0, slot);
    this.byId.set(job.appId, slot);
  }

  /** Removes a job (killed, or admitted by other means); false when it was not queued. */
  remove(appId: string): boolean {
    const slot = this.byId.get(appId);
    if (!slot) return false;
    this.byId.delete(appId);
    this.slots = this.slots.filter((s) => s !== slot);
    return true;
  }

  /**
   * Walks the queue in order and admits (removes and returns) each job `evaluate` admits. `evaluate` is called in
   * queue order and must count the jobs it admitted earlier in this walk (`AdmissionOutlook.commit`). Under strict
   * order the walk stops at the first held job; the jobs behind it are not evaluated and their reason says whom they
   * wait behind. Every held job keeps the decision's reason and the time it was judged.
   */
  admitReady(nowMs: number, evaluate: (job: J) => AdmissionDecision): AdmittedEntry<J>[] {
    const out: AdmittedEntry<J>[] = [];
    let head: Slot<J> | undefined;
    for (const slot of [...this.slots]) {
      if (head && !this.backfill) {
        slot.reason = `waits behind ${head.job.appId} (strict order: priority, then submission), which ${head.reason}`;
        slot.blockedBy = head.job.appId;
        continue;
      }
      const decision = evaluate(slot.job);
      slot.lastCheckedMs = nowMs;
      slot.decision = decision;
      if (decision.admit) {
        this.remove(slot.job.appId);
        out.push({ job: slot.job, decision, waitedMs: nowMs - slot.waitingSinceMs });
      } else {
        slot.reason = decision.reason;
        delete slot.blockedBy;
        head ??= slot;
      }
    }
    return out;
  }

  /** The waiting jobs in order, with why each waits. */
  snapshot(): QueueEntry[] {
    return this.slots.map((s, i) => ({
      appId: s.job.appId,
      priority: s.job.priority,
      position: i + 1,
      waitingSinceMs: s.waitingSinceMs,
      ...(s.lastCheckedMs !== undefined ? { lastCheckedMs: s.lastCheckedMs } : {}),
      reason: s.reason,
      ...(s.blockedBy !== undefined ? { blockedBy: s.blockedBy } : {}),
      ...(s.decision !== undefined ? { decision: s.decision } : {}),
    }));
  }
}

// ---------------------------------------------------------------------------------------------------------------------
// Formatting for reasons.

function cores(milli: number): string {
  return (milli / 1000).toFixed(1);
}

/** A bound or threshold: three decimals, or two significant digits when tiny. */
function fmtNum(x: number, digits = 3): string {
  if (x === 0) return "0";
  if (!Number.isFinite(x)) return String(x);
  return Math.abs(x) < 0.001 ? x.toExponential(digits - 2) : x.toFixed(digits);
}

/** "bound <= threshold" or "bound > threshold", with as many digits as it takes for unequal numbers to read unequal. */
function compared(bound: number, threshold: number): string {
  const op = bound <= threshold ? "<=" : ">";
  let digits = 3;
  while (digits < 9 && bound !== threshold && fmtNum(bound, digits) === fmtNum(threshold, digits)) digits++;
  return `${fmtNum(bound, digits)} ${op} ${fmtNum(threshold, digits)}`;
}

function clockTime(ms: number): string {
  return `${new Date(ms).toISOString().slice(11, 16)} UTC`;
}

function duration(ms: number): string {
  const totalMin = Math.round(ms / 60_000);
  if (totalMin < 1) return `${Math.round(ms / 1000)}s`;
  const h = Math.floor(totalMin / 60);
  const m = totalMin % 60;
  return h > 0 ? `${h}h${String(m).padStart(2, "0")}m` : `${m}m`;
}
