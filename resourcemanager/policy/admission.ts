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
import { fixedDemand } from "./demand-profile.js";
import type { PrimaryDemandSource } from "./demand-profile.js";
import { resolveAdmissionOptions, thresholdOf } from "./admission-options.js";
import type { AdmissionOptions, AdmissionPolicy } from "./admission-options.js";

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
