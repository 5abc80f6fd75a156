/**
 * Class selection for a batch job, seeds/004 section 4.1, Algorithm 1: classify the job as short, medium or long from
 * its last run, compute each utilization class's headroom for that type, and pick one class (or, when none is big
 * enough, several) with probability proportional to ranking weight x headroom. Also the scheduler policy that keeps a
 * job's tasks on the servers of its chosen classes. Pure: no I/O, no clock; randomness comes from an injected `Rng`.
 */
import { HarvestError } from "../../common/errors.js";
import { optionResolution } from "../../common/options.js";
import type { Rng } from "../../common/rng.js";
import { cantelliHeadroom } from "./admission.js";
import type { UtilizationPattern } from "./classifier.js";
import { AM_PRIORITY } from "./scheduler.js";
import type { AppView, NodeView, SchedulerPolicy } from "./scheduler.js";

/** A job's expected length (seeds/004 section 4.1, Algorithm 1 line 3). */
export type JobType = "short" | "medium" | "long";

const JOB_TYPES: readonly JobType[] = ["short", "medium", "long"];
const PATTERNS: readonly UtilizationPattern[] = ["periodic", "constant", "unpredictable"];

// ---------------------------------------------------------------------------------------------------------------------
// Job type from history.

/** How past job durations become the short/long thresholds. Every field has a default. */
export interface JobTypeOptions {
  /**
   * Jobs shorter than this percentile of past durations are short. seeds/004 sets the thresholds "based on the
   * historical distribution of job lengths" without naming them; terciles split the history into three equal groups.
   * @default 33.3
   */
  shortPercentile: number;
  /**
   * Jobs longer than this percentile of past durations are long.
   * @default 66.7
   */
  longPercentile: number;
  /**
   * Fewer past jobs than this give no thresholds, and every job is medium: percentiles of one or two runs say nothing.
   * @default 3
   */
  minHistory: number;
}

/** The defaults of every `JobTypeOptions` field. */
export const DEFAULT_JOB_TYPE_OPTIONS: Readonly<JobTypeOptions> = Object.freeze({
  shortPercentile: 33.3,
  longPercentile: 66.7,
  minHistory: 3,
});

/** Fills defaults and validates, naming the offending field in a CONFIG_INVALID error. */
export function resolveJobTypeOptions(options: Partial<JobTypeOptions> = {}): JobTypeOptions {
  const { o, check } = optionResolution("job type", DEFAULT_JOB_TYPE_OPTIONS, options);
  check("shortPercentile", (v) => v >= 0 && v <= 100, "in [0, 100]");
  check("longPercentile", (v) => v >= o.shortPercentile && v <= 100, "in [shortPercentile, 100]");
  check("minHistory", (v) => Number.isInteger(v) && v >= 1, "an integer >= 1");
  return o;
}

/** The duration thresholds that split jobs into short, medium and long (see `jobTypeOf`). */
export interface JobTypeThresholds {
  /** A last run strictly shorter than this is short. */
  shortMaxMs: number;
  /** A last run strictly longer than this is long. */
  longMinMs: number;
}

/**
 * The short/long thresholds from the distribution of past job durations (seeds/004 section 4.1): by default its
 * 33.3th and 66.7th percentiles, so history splits into three equally sized types. Percentiles interpolate linearly
 * between the closest ranks (rank p/100 x (n - 1) of the sorted durations). Non-finite or negative durations are
 * ignored. Undefined when fewer than `minHistory` usable durations remain.
 *
 * seeds/004 also weighs the thresholds by the capacity of each type's preferred classes (long jobs' total work in
 * proportion to the constant tenants' capacity); that is left to the operator through the percentile options.
 */
export function jobTypeThresholds(
  pastDurationsMs: readonly number[],
  opts: Partial<JobTypeOptions> = {},
): JobTypeThresholds | undefined {
  const o = resolveJobTypeOptions(opts);
  const sorted = pastDurationsMs.filter((d) => Number.isFinite(d) && d >= 0).sort((a, b) => a - b);
  if (sorted.length < o.minHistory) return undefined;
  return { shortMaxMs: percentile(sorted, o.shortPercentile), longMinMs: percentile(sorted, o.longPercentile) };
}

/**
 * The type of a job from the duration of its last run (seeds/004 section 4.1, Algorithm 1 line 3). A job never seen
 * before (`undefined`) is medium, as in the paper; so is every job while history is too short for thresholds. Otherwise
 * short below `shortMaxMs`, long above `longMinMs`, medium in between (both ends inclusive). The last duration only has
 * to land in the right third, not predict the run time.
 */
export function jobTypeOf(
  lastDurationMs: number | undefined,
  pastDurationsMs: readonly number[],
  opts: Partial<JobTypeOptions> = {},
): JobType {
  if (lastDurationMs === undefined || !Number.isFinite(lastDurationMs)) return "medium";
  const t = jobTypeThresholds(pastDurationsMs, opts);
  if (!t) return "medium";
  if (lastDurationMs < t.shortMaxMs) return "short";
  if (lastDurationMs > t.longMinMs) return "long";
  return "medium";
}

/** Linear-interpolation percentile of an ascending, non-empty array. */
function percentile(sorted: readonly number[], p: number): number {
  const rank = (p / 100) * (sorted.length - 1);
  const lo = Math.floor(rank);
  const hi = Math.min(lo + 1, sorted.length - 1);
  const a = sorted[lo] ?? 0;
  const b = sorted[hi] ?? a;
  return a + (b - a) * (rank - lo);
}

/** How a job's type is judged: against the history's terciles of job lengths (seeds/004), or per class. */
export type JobLengthRule = "terciles" | "per-class";

/**
 * A job's type for one class under the "per-class" rule: short when it will likely finish before the class's next
 * burst (its last run under ln 2 of the mean time between bursts: the chance of no burst while it runs, e^-x, is then
 * above one half), long when it will likely see two or more (at least twice that time), medium in between. A class
 * that never bursts makes every job short there. A job never seen before keeps its `fallback` type.
 */
export function jobTypeForClass(
  lastDurationMs: number | undefined,
  burstGapMs: number | undefined,
  fallback: JobType,
): JobType {
  if (lastDurationMs === undefined || !Number.isFinite(lastDurationMs) || lastDurationMs < 0) return fallback;
  if (burstGapMs === undefined || !(burstGapMs > 0)) return "short";
  const x = lastDurationMs / burstGapMs;
  if (x < Math.LN2) return "short";
  return x >= 2 ? "long" : "medium";
}

// ---------------------------------------------------------------------------------------------------------------------
// Headroom.

/** One live server of a class, as the resource manager knows it. `serverId` is the scheduler's node id. */
export interface ServerCapacity {
  serverId: string;
  /** Total cores of the server. */
  capacityMilli: number;
  /** Cores kept free for the primary tenant (the scheduler's reserve). */
  reserveMilli: number;
  /** Cores already allocated to secondary containers. */
  allocatedMilli: number;
}

/** What class selection sees of one utilization class (from the classifier plus the scheduler's live servers). */
export interface ClassView {
  classId: string;
  pattern: UtilizationPattern;
  /** Average CPU utilization of the class's average server over its history, in % (0..100). */
  average: number;
  /** Peak (high-percentile) CPU utilization of the class's average server, in % (0..100). */
  peak: number;
  /** CPU utilization of the class's servers now, in % (0..100). */
  current: number;
  /** Standard deviation of the class's utilization, in % (for the Cantelli headroom; absent: unknown). */
  stddev?: number;
  /** The mean time between its primaries' bursts, ms (`TenantClass.burstGapMs`; absent: they do not burst). */
  burstGapMs?: number;
  /** The class's live servers; an empty list means no headroom. */
  servers: readonly ServerCapacity[];
}

/**
 * The primary utilization (CPU %) a job of `type` must plan around in `cls` (seeds/004 section 4.1, last paragraph):
 * a short job only needs what is free now (current); a medium job must also survive the usual load (max of average and
 * current); a long job must survive the peak (max of peak and current). Clamped to 0..100; a non-finite value counts
 * as 100 (no headroom) rather than poisoning the sums.
 */
export function utilizationFor(type: JobType, cls: ClassView): number {
  let u: number;
  switch (type) {
    case "short":
      u = cls.current;
      break;
    case "medium":
      u = Math.max(cls.average, cls.current);
      break;
    case "long":
      u = Math.max(cls.peak, cls.current);
      break;
  }
  return Number.isFinite(u) ? Math.min(100, Math.max(0, u)) : 100;
}

/**
 * Headroom(type, c) of Algorithm 1, in absolute vcores-milli summed over the class's live servers (not a fraction, so
 * it compares directly with a job's requirement): for each server, capacity x (1 - u/100) - reserve - allocated,
 * floored at zero and rounded down to whole milli, with u = `utilizationFor(type, cls)`.
 */
export function classHeadroomMilli(cls: ClassView, type: JobType, cantelliThreshold?: number): number {
  if (cantelliThreshold !== undefined && type !== "short" && cls.stddev !== undefined)
    return cantelliClassHeadroomMilli(cls, cantelliThreshold);
  const freePct = 100 - utilizationFor(type, cls);
  let total = 0;
  for (const s of cls.servers) {
    // capacity x (100 - u) / 100 rather than x (1 - u/100): exact for whole percentages.
    const free = Math.floor((s.capacityMilli * freePct) / 100) - s.reserveMilli - s.allocatedMilli;
    if (free > 0) total += free;
  }
  return total;
}

/**
 * Headroom by the second moment (seeds/003's Cantelli bound, per class, the `classHeadroom: cantelli` option): on each
 * server, the most secondary work x such that P(primary >= capacity - reserve - x) <= threshold by Cantelli, with the
 * primary's mean and deviation those of the class (`cantelliHeadroom`), and never more than what the primary leaves
 * now; minus what is allocated. Short jobs keep the current-utilization rule (they only need what is free now).
 */
export function cantelliClassHeadroomMilli(cls: ClassView, threshold: number): number {
  const mean = Number.isFinite(cls.average) ? Math.min(100, Math.max(0, cls.average)) : 100;
  const sd = Number.isFinite(cls.stddev) ? Math.max(0, cls.stddev ?? 0) : 100;
  const nowFreePct = 100 - utilizationFor("short", cls);
  let total = 0;
  for (const s of cls.servers) {
    const usable = s.capacityMilli - s.reserveMilli;
    const mu = (s.capacityMilli * mean) / 100;
    const sigma = (s.capacityMilli * sd) / 100;
    const bound = cantelliHeadroom(mu, sigma * sigma, usable, threshold);
    const now = Math.floor((s.capacityMilli * nowFreePct) / 100) - s.reserveMilli;
    const free = Math.floor(Math.min(bound, now)) - s.allocatedMilli;
    if (free > 0) total += free;
  }
  return total;
}

/** A job's requirement for class selection (Algorithm 1 line 4): max concurrent tasks x cores per task. */
export function requirementMilli(maxConcurrency: number, taskVcoresMilli: number): number {
  return Math.max(0, maxConcurrency) * Math.max(0, taskVcoresMilli);
}

// ---------------------------------------------------------------------------------------------------------------------
// Ranking weights.

/** Ranking weights W[type, pattern] of Algorithm 1: higher ranks the pattern higher for that job type. */
export type ClassWeights = Record<JobType, Record<UtilizationPattern, number>>;

/** A partial override of `ClassWeights`, as a config file gives it. */
export type ClassWeightsInput = { [T in JobType]?: Partial<Record<UtilizationPattern, number>> };

/**
 * The ranking of seeds/004 section 4.1 as weights 3/2/1. Long jobs: constant > periodic > unpredictable (a constant
 * tenant with room now is unlikely to take it back). Medium: periodic > constant > unpredictable. Short: unpredictable >
 * periodic > constant (only the current utilization matters, so leave the predictable classes to longer jobs). 3/2/1
 * keeps every class in play (headroom still counts) while the ranking shifts the odds.
 */
export const DEFAULT_CLASS_WEIGHTS: Readonly<ClassWeights> = Object.freeze({
  long: Object.freeze({ constant: 3, periodic: 2, unpredictable: 1 }),
  medium: Object.freeze({ periodic: 3, constant: 2, unpredictable: 1 }),
  short: Object.freeze({ unpredictable: 3, periodic: 2, constant: 1 }),
});

/**
 * Fills `DEFAULT_CLASS_WEIGHTS` with the given overrides and validates: every weight finite and >= 0, no unknown job
 * type or pattern. Throws CONFIG_INVALID whose `details.field` names the weight, e.g. `long.constant`.
 */
export function resolveClassWeights(partial: ClassWeightsInput = {}): ClassWeights {
  const out = {} as ClassWeights;
  for (const type of JOB_TYPES) out[type] = { ...DEFAULT_CLASS_WEIGHTS[type] };
  for (const [type, row] of Object.entries(partial as Record<string, unknown>)) {
    if (!(JOB_TYPES as readonly string[]).includes(type)) {
      throw new HarvestError("CONFIG_INVALID", `class weights: unknown job type ${type} (short, medium or long)`, {
        details: { field: type },
      });
    }
    if (row === undefined) continue;
    if (typeof row !== "object" || row === null) {
      throw new HarvestError("CONFIG_INVALID", `class weights: ${type} must be an object of pattern weights`, {
        details: { field: type },
      });
    }
    for (const [pattern, w] of Object.entries(row)) {
      const field = `${type}.${pattern}`;
      if (!(PATTERNS as readonly string[]).includes(pattern)) {
        throw new HarvestError(
          "CONFIG_INVALID",
          `class weights: unknown pattern in ${field} (periodic, constant or unpredictable)`,
          { details: { field } },
        );
      }
      if (w === undefined) continue;
      if (typeof w !== "number" || !Number.isFinite(w) || w < 0) {
        throw new HarvestError(
          "CONFIG_INVALID",
          `class weight ${field} must be a finite number >= 0, got ${String(w)}`,
          {
            details: { field },
          },
        );
      }
      out[type as JobType][pattern as UtilizationPattern] = w;
    }
  }
  return out;
}

// ---------------------------------------------------------------------------------------------------------------------
// Algorithm 1.

/** What `selectClasses` needs. Class ids must be unique. */
export interface ClassSelectionInput {
  jobType: JobType;
  /** Cores the job needs at once (`requirementMilli`); <= 0 means "any class with any headroom" (1 milli). */
  requirementMilli: number;
  classes: readonly ClassView[];
  weights: ClassWeights;
  rng: Rng;
  /** Medium and long jobs' headroom by the Cantelli bound at this threshold (`cantelliClassHeadroomMilli`). */
  cantelliThreshold?: number | undefined;
  /**
   * With the job's last run, its type per class (`jobTypeForClass`) instead of `jobType` everywhere: each class's
   * headroom and weight are those of the job's type there.
   */
  perClass?: { lastDurationMs: number | undefined } | undefined;
}

/** The outcome of Algorithm 1. */
export interface ClassSelection {
  /** One class fits alone, several fit together, or none can host the job now. */
  kind: "single" | "multi" | "none";
  /** The chosen classes, in the order they were drawn; empty for `none`. */
  classIds: string[];
  /** The requirement the choice was made for (after treating <= 0 as 1 milli). */
  requirementMilli: number;
  /** Headroom of every class for the job's type, vcores-milli. */
  headroomMilli: Record<string, number>;
  /** Why, in words that fit a job status line. */
  reason: string;
}

interface Candidate {
  cls: ClassView;
  headroom: number;
  weighted: number;
}

/**
 * seeds/004 section 4.1, Algorithm 1. With h(c) = `classHeadroomMilli(c, jobType)` and w(c) = weights[jobType][pattern]:
 * - single: if some classes have h >= requirement, pick one of them with probability w x h / sum(w x h) over those
 *   classes (weight-0 or headroom-0 classes are never picked; if every fitting class has weight 0, by h alone);
 * - multi: else, if all classes together have enough, draw classes without replacement, each draw with probability
 *   w x h over the classes left, until the drawn headroom reaches the requirement; classes of weight 0 are drawn (by h)
 *   only once the weighted ones are used up. Every drawn class but the last was needed to get there;
 * - none: else.
 *
 * Each draw consumes exactly one `rng.next()` u and takes the first class, in input order, whose cumulative weight
 * exceeds u x total, so the outcome is a function of the inputs and the seed.
 */
export function selectClasses(input: ClassSelectionInput): ClassSelection {
  const { jobType, classes, weights, rng } = input;
  const req = input.requirementMilli > 0 ? input.requirementMilli : 1;
  const headroomMilli: Record<string, number> = {};
  if (classes.length === 0) {
    return { kind: "none", classIds: [], requirementMilli: req, headroomMilli, reason: "no utilization classes yet" };
  }
  const all: Candidate[] = classes.map((cls) => {
    const type = input.perClass ? jobTypeForClass(input.perClass.lastDurationMs, cls.burstGapMs, jobType) : jobType;
    const headroom = classHeadroomMilli(cls, type, input.cantelliThreshold);
    headroomMilli[cls.classId] = headroom;
    return { cls, headroom, weighted: weights[type][cls.pattern] * headroom };
  });
  const need = vcores(req);

  const fitting = all.filter((c) => c.headroom >= req);
  if (fitting.length > 0) {
    const weighted = fitting.filter((c) => c.weighted > 0);
    const byHeadroomOnly = weighted.length === 0;
    const pool = byHeadroomOnly ? fitting : weighted;
    const pick = draw(pool, byHeadroomOnly ? (c) => c.headroom : (c) => c.weighted, rng);
    const of = fitting.length === 1 ? "the only class" : `one of ${fitting.length} classes`;
    let reason = `${of} with headroom for ${need} vcores: ${describe(pick)}`;
    if (byHeadroomOnly) reason += `; all of them have weight 0 for ${jobType} jobs, so picked by headroom alone`;
    return { kind: "single", classIds: [pick.cls.classId], requirementMilli: req, headroomMilli, reason };
  }

  const total = all.reduce((sum, c) => sum + c.headroom, 0);
  if (total < req) {
    return {
      kind: "none",
      classIds: [],
      requirementMilli: req,
      headroomMilli,
      reason: `no class has headroom for ${need} vcores (all classes together: ${vcores(total)})`,
    };
  }

  // Enough in total, so the loop ends: at worst it draws every class with headroom.
  let weightedLeft = all.filter((c) => c.weighted > 0);
  let unweightedLeft = all.filter((c) => c.weighted <= 0 && c.headroom > 0);
  const chosen: Candidate[] = [];
  let got = 0;
  let usedUnweighted = false;
  while (got < req) {
    let pick: Candidate;
    if (weightedLeft.length > 0) {
      pick = draw(weightedLeft, (c) => c.weighted, rng);
      weightedLeft = weightedLeft.filter((c) => c !== pick);
    } else {
      pick = draw(unweightedLeft, (c) => c.headroom, rng);
      unweightedLeft = unweightedLeft.filter((c) => c !== pick);
      usedUnweighted = true;
    }
    chosen.push(pick);
    got += pick.headroom;
  }
  let reason = `no single class has headroom for ${need} vcores; ${chosen.length} together: ${chosen.map(describe).join(", ")}`;
  if (usedUnweighted) reason += `; includes classes of weight 0 for ${jobType} jobs`;
  return { kind: "multi", classIds: chosen.map((c) => c.cls.classId), requirementMilli: req, headroomMilli, reason };
}

/** One draw from a non-empty pool with probability proportional to `weightOf`; see `selectClasses`. */
function draw(pool: readonly Candidate[], weightOf: (c: Candidate) => number, rng: Rng): Candidate {
  const total = pool.reduce((sum, c) => sum + weightOf(c), 0);
  const target = rng.next() * total;
  let cumulative = 0;
  let last: Candidate | undefined;
  for (const c of pool) {
    const w = weightOf(c);
    if (w <= 0) continue;
    cumulative += w;
    last = c;
    if (target < cumulative) return c;
  }
  // Only reached through rounding when u is just below 1: the last class with positive weight.
  return last ?? (pool[0] as Candidate);
}

function describe(c: Candidate): string {
  return `${c.cls.classId} (${c.cls.pattern}, ${vcores(c.headroom)} free)`;
}

function vcores(milli: number): string {
  return (milli / 1000).toFixed(1);
}

// ---------------------------------------------------------------------------------------------------------------------
// The scheduler policy.

/**
 * The history-based policy (YARN-H of seeds/004): each job's tasks run only on the servers of the classes Algorithm 1
 * chose for it. The job manager's own container (`AM_PRIORITY`) goes anywhere, since it runs before the classes are
 * chosen; task asks of a job with no assignment yet get nothing. The resource manager keeps the sets current (assign on
 * selection, `openToAll` when a job has waited too long, `unassign` when it ends).
 */
export class HistorySchedulerPolicy implements SchedulerPolicy {
  readonly name = "history";
  private readonly allowed = new Map<string, ReadonlySet<string>>();
  private readonly open = new Set<string>();
  private avoid: ((appId: string, nodeId: string) => boolean) | undefined;

  /** Servers a job's tasks stay off for now, whatever its classes (learning from kills, `HistoryPlacement`). */
  setAvoid(avoid: ((appId: string, nodeId: string) => boolean) | undefined): void {
    this.avoid = avoid;
  }

  /** Restricts the app's tasks to `servers` (scheduler node ids), replacing any earlier assignment. */
  assign(appId: string, servers: Iterable<string>): void {
    this.open.delete(appId);
    this.allowed.set(appId, new Set(servers));
  }

  /** Lets the app's tasks run on every server: the fallback for a job that waited too long for its classes. */
  openToAll(appId: string): void {
    this.allowed.delete(appId);
    this.open.add(appId);
  }

  /** Forgets the app (it finished or was removed); its tasks are allowed nowhere again. */
  unassign(appId: string): void {
    this.allowed.delete(appId);
    this.open.delete(appId);
  }

  /** The servers the app's tasks are restricted to; undefined when not assigned yet or open to all. */
  assigned(appId: string): ReadonlySet<string> | undefined {
    return this.allowed.get(appId);
  }

  /** True when the app was opened to every server. */
  isOpenToAll(appId: string): boolean {
    return this.open.has(appId);
  }

  /**
   * The job manager's ask anywhere; task asks on the assigned servers (or anywhere once opened to all), except on a
   * server the avoid hook names for the job.
   */
  allows(app: AppView, node: NodeView, priority: number): boolean {
    if (priority === AM_PRIORITY) return true;
    if (this.avoid?.(app.appId, node.nodeId)) return false;
    if (this.open.has(app.appId)) return true;
    return this.allowed.get(app.appId)?.has(node.nodeId) ?? false;
  }
}
