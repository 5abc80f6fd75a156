/**
 * The lifetime model: how long a container will still live, re-predicted from its uptime (seeds/002, section 3).
 * Pure: no I/O, no clock; callers pass times in.
 *
 * seeds/002 predicts a distribution of VM lifetimes rather than one number, and re-predicts a VM's remaining lifetime
 * as E[T - u | T > u] each time it is asked, u being the uptime so far: a VM of a bimodal type (a day or a week) that
 * has run two days is expected to run five more. Harvest adapts VMs to containers: a task of a batch job lives seconds
 * to hours, and the job manager's container lives as long as its job. The seed learns the distribution with a GBDT over
 * many features; Harvest's features are the job (its recurring name, so history carries from run to run), the vertex,
 * and whether the container is the job manager, and the distribution is empirical: the most recent observed durations
 * of that key. That is the seed's "lookup table of survival curves" (section 7), which it found less accurate than a
 * GBDT on VMs; a task of a recurring batch job is far more repeatable than a cloud VM, and the table is explainable,
 * cheap and needs no training.
 *
 * Where a key has too few samples the model falls back to coarser pools: the vertex, then the job's tasks of all its
 * vertices pooled, then every job's tasks pooled, then a configured default. Each pool keeps its own most recent
 * `maxSamplesPerKey` samples, so an observation costs O(1) and a pool's memory is bounded.
 *
 * Re-prediction is the point (seeds/002, sections 3 and 4.2), so nothing is cached per container: every call computes
 * from the distribution and the uptime. The scheduler asks on heartbeats for every container of candidate nodes, so a
 * distribution keeps its samples sorted with suffix sums (rebuilt lazily after observations) and answers with one
 * binary search.
 */
import { HarvestError } from "../../common/errors.js";
import { optionResolution } from "../../common/options.js";

/**
 * The least remaining lifetime predicted for a live container, ms. A live container is never predicted to be gone:
 * a zero would make it vanish from a server's exit time while it still holds resources.
 */
export const MIN_REMAINING_MS = 1;

/**
 * An empirical distribution of durations (ms), built from samples.
 *
 * `remainingMs(u)` is E[T - u | T > u] over the samples above u. When no sample exceeds u (the container has outlived
 * every one seen), it returns u: the container is assumed to live as long again as it has so far (Lindy's rule, the
 * memoryless guess of a heavy tail). That grows with the uptime, as an outlier's remaining life should, and it is
 * never 0. The answer is never below `MIN_REMAINING_MS`.
 */
export class LifetimeDistribution {
  /** Samples, ascending. */
  private readonly sorted: Float64Array;
  /** suffix[i] = sum of sorted[i..n-1]; suffix[n] = 0. */
  private readonly suffix: Float64Array;

  private constructor(sorted: Float64Array) {
    this.sorted = sorted;
    this.suffix = new Float64Array(sorted.length + 1);
    for (let i = sorted.length - 1; i >= 0; i--) this.suffix[i] = this.suffix[i + 1]! + sorted[i]!;
  }

  /**
   * A distribution of `samples` (ms). Throws INVALID_ARGUMENT when there is none, or one is negative or not finite
   * (the model filters its inputs before they get here).
   */
  static of(samples: readonly number[]): LifetimeDistribution {
    if (samples.length === 0)
      throw new HarvestError("INVALID_ARGUMENT", "a lifetime distribution needs at least one sample");
    for (const s of samples)
      if (!(Number.isFinite(s) && s >= 0))
        throw new HarvestError("INVALID_ARGUMENT", `a lifetime sample must be a finite duration >= 0 ms, got ${s}`);
    return new LifetimeDistribution(Float64Array.from(samples).sort());
  }

  /** A distribution with all its mass at `ms` (what the model uses when it knows nothing). */
  static point(ms: number): LifetimeDistribution {
    return LifetimeDistribution.of([ms]);
  }

  /** How many samples it holds. */
  get count(): number {
    return this.sorted.length;
  }

  /** The mean duration, ms. */
  get mean(): number {
    return this.suffix[0]! / this.sorted.length;
  }

  /**
   * The q-quantile (q in [0, 1]), linear between the two nearest order statistics (the classifier's percentile rule).
   * Throws INVALID_ARGUMENT for q outside [0, 1].
   */
  quantile(q: number): number {
    if (!(q >= 0 && q <= 1)) throw new HarvestError("INVALID_ARGUMENT", `a quantile must be in [0, 1], got ${q}`);
    const rank = q * (this.sorted.length - 1);
    const lo = Math.floor(rank);
    const hi = Math.ceil(rank);
    return this.sorted[lo]! + (this.sorted[hi]! - this.sorted[lo]!) * (rank - lo);
  }

  /**
   * Expected remaining lifetime of a container that has lived `uptimeMs`: E[T - u | T > u] (seeds/002, section 3), or
   * u when nothing seen lived longer (see the class comment). A negative or non-finite uptime (a clock that went back)
   * counts as 0.
   */
  remainingMs(uptimeMs: number): number {
    const u = Number.isFinite(uptimeMs) && uptimeMs > 0 ? uptimeMs : 0;
    const n = this.sorted.length;
    // The first sample strictly above u.
    let lo = 0;
    let hi = n;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if (this.sorted[mid]! > u) hi = mid;
      else lo = mid + 1;
    }
    const above = n - lo;
    const remaining = above > 0 ? this.suffix[lo]! / above - u : u;
    return Math.max(MIN_REMAINING_MS, remaining);
  }

  /** Predicted exit time (ms) of a container started at `startMs`, as seen at `nowMs`: now + remaining. */
  exitMs(startMs: number, nowMs: number): number {
    return nowMs + this.remainingMs(nowMs - startMs);
  }
}

/** Settings of the lifetime model. */
export interface LifetimeOptions {
  /** Each pool (vertex, job, all jobs) keeps this many of its most recent samples. @default 500 */
  maxSamplesPerKey: number;
  /** A pool with fewer samples than this is skipped for the next coarser one. @default 3 */
  minSamples: number;
  /**
   * The lifetime assumed when no pool has enough samples (a fresh cluster): one minute, the middle of the range batch
   * tasks span (seconds to hours), so an unknown container is neither packed with seconds-long ones nor treated as one
   * that holds a server for hours. @default 60000
   */
  defaultLifetimeMs: number;
}

/** The defaults of every `LifetimeOptions` field. */
export const DEFAULT_LIFETIME_OPTIONS: Readonly<LifetimeOptions> = Object.freeze({
  maxSamplesPerKey: 500,
  minSamples: 3,
  defaultLifetimeMs: 60_000,
});

/** Fills defaults and validates, naming the offending field in a CONFIG_INVALID error. */
export function resolveLifetimeOptions(partial: Partial<LifetimeOptions> = {}): LifetimeOptions {
  const { o, bad } = optionResolution("lifetime model", DEFAULT_LIFETIME_OPTIONS, partial);
  if (!(Number.isInteger(o.maxSamplesPerKey) && o.maxSamplesPerKey >= 1))
    bad("maxSamplesPerKey", "must be an integer >= 1");
  if (!(Number.isInteger(o.minSamples) && o.minSamples >= 1 && o.minSamples <= o.maxSamplesPerKey))
    bad("minSamples", "must be an integer in [1, maxSamplesPerKey]");
  if (!(typeof o.defaultLifetimeMs === "number" && Number.isFinite(o.defaultLifetimeMs) && o.defaultLifetimeMs > 0))
    bad("defaultLifetimeMs", "must be a finite number of milliseconds > 0");
  return o;
}

/** Which pool a task's distribution came from, finest first. */
export type TaskLifetimeSource = "vertex" | "job" | "all" | "default";

/** Which pool a job's distribution came from. */
export type JobLifetimeSource = "job" | "all" | "default";

/** A distribution and the pool it came from. */
export interface SourcedDistribution<S extends string> {
  distribution: LifetimeDistribution;
  source: S;
}

/** What the predictors know of a container. */
export interface ContainerKey {
  /** The job's recurring identity (its DAG's name), shared by its runs; not the application id. */
  job: string;
  /** The vertex of the task (ignored for the job manager). */
  vertex: string;
  /** The job manager's container, which lives as long as its job. */
  isJobManager: boolean;
  /** The container's true lifetime, ms, when known (the simulator replaying a trace); only the oracle reads it. */
  trueLifetimeMs?: number;
}

/** Predicts a container's remaining lifetime from its uptime; asked again on every decision (re-prediction). */
export interface LifetimePredictor {
  /** Expected remaining lifetime, ms, of the container `key` that has lived `uptimeMs`; always > 0. */
  remainingMs(key: ContainerKey, uptimeMs: number): number;
}

/** The most recent samples of one pool, with its distribution built lazily. */
class SampleWindow {
  private readonly samples: number[] = [];
  /** Where the next sample goes once the window is full (the oldest one). */
  private next = 0;
  private cached: LifetimeDistribution | undefined;

  constructor(private readonly capacity: number) {}

  get size(): number {
    return this.samples.length;
  }

  add(ms: number): void {
    if (this.samples.length < this.capacity) this.samples.push(ms);
    else {
      this.samples[this.next] = ms;
      this.next = (this.next + 1) % this.capacity;
    }
    this.cached = undefined;
  }

  distribution(): LifetimeDistribution {
    this.cached ??= LifetimeDistribution.of(this.samples);
    return this.cached;
  }
}

interface JobEntry {
  /** Every task of the job, all vertices. */
  tasks: SampleWindow;
  vertices: Map<string, SampleWindow>;
  /** Whole-job durations (the job manager's container). */
  runs: SampleWindow;
}

/**
 * The empirical lifetime model: task durations per job and vertex, whole-job durations per job, with the fallback
 * chain of the module comment. Implements `LifetimePredictor` (it ignores `trueLifetimeMs`).
 */
export class LifetimeModel implements LifetimePredictor {
  readonly options: LifetimeOptions;
  private readonly jobs = new Map<string, JobEntry>();
  private readonly allTasks: SampleWindow;
  private readonly allRuns: SampleWindow;
  private readonly fallback: LifetimeDistribution;
  private rejectedCount = 0;

  constructor(options: Partial<LifetimeOptions> = {}) {
    this.options = resolveLifetimeOptions(options);
    this.allTasks = new SampleWindow(this.options.maxSamplesPerKey);
    this.allRuns = new SampleWindow(this.options.maxSamplesPerKey);
    this.fallback = LifetimeDistribution.point(this.options.defaultLifetimeMs);
  }

  /** Observations ignored because their duration was negative or not finite (real history can be odd). */
  get rejected(): number {
    return this.rejectedCount;
  }

  /** Records a finished task's duration (ms); an odd one is counted in `rejected` and ignored. */
  observeTask(job: string, vertex: string, durationMs: number): void {
    if (!valid(durationMs)) {
      this.rejectedCount += 1;
      return;
    }
    const entry = this.entry(job);
    let window = entry.vertices.get(vertex);
    if (!window) {
      window = new SampleWindow(this.options.maxSamplesPerKey);
      entry.vertices.set(vertex, window);
    }
    window.add(durationMs);
    entry.tasks.add(durationMs);
    this.allTasks.add(durationMs);
  }

  /** Records a finished job's duration (ms); an odd one is counted in `rejected` and ignored. */
  observeJob(job: string, durationMs: number): void {
    if (!valid(durationMs)) {
      this.rejectedCount += 1;
      return;
    }
    this.entry(job).runs.add(durationMs);
    this.allRuns.add(durationMs);
  }

  /**
   * The distribution of a task of `job`'s `vertex`: that vertex's samples, else the job's tasks of all its vertices
   * pooled, else every job's tasks pooled, else the default (each pool used once it has `minSamples`).
   */
  taskDistribution(job: string, vertex: string): SourcedDistribution<TaskLifetimeSource> {
    const min = this.options.minSamples;
    const entry = this.jobs.get(job);
    if (entry) {
      const v = entry.vertices.get(vertex);
      if (v && v.size >= min) return { distribution: v.distribution(), source: "vertex" };
      if (entry.tasks.size >= min) return { distribution: entry.tasks.distribution(), source: "job" };
    }
    if (this.allTasks.size >= min) return { distribution: this.allTasks.distribution(), source: "all" };
    return { distribution: this.fallback, source: "default" };
  }

  /** The distribution of `job`'s whole duration: its runs, else every job's runs pooled, else the default. */
  jobDistribution(job: string): SourcedDistribution<JobLifetimeSource> {
    const min = this.options.minSamples;
    const runs = this.jobs.get(job)?.runs;
    if (runs && runs.size >= min) return { distribution: runs.distribution(), source: "job" };
    if (this.allRuns.size >= min) return { distribution: this.allRuns.distribution(), source: "all" };
    return { distribution: this.fallback, source: "default" };
  }

  /** Expected remaining lifetime (ms) of a task of `job`'s `vertex` that has run `uptimeMs`. */
  taskRemainingMs(job: string, vertex: string, uptimeMs: number): number {
    return this.taskDistribution(job, vertex).distribution.remainingMs(uptimeMs);
  }

  /** Expected remaining lifetime (ms) of `job`'s job manager container (its job) after `uptimeMs`. */
  jobRemainingMs(job: string, uptimeMs: number): number {
    return this.jobDistribution(job).distribution.remainingMs(uptimeMs);
  }

  /** `LifetimePredictor`: the job's remaining time for the job manager, the task's otherwise. */
  remainingMs(key: ContainerKey, uptimeMs: number): number {
    return key.isJobManager
      ? this.jobRemainingMs(key.job, uptimeMs)
      : this.taskRemainingMs(key.job, key.vertex, uptimeMs);
  }

  private entry(job: string): JobEntry {
    let e = this.jobs.get(job);
    if (!e) {
      const cap = this.options.maxSamplesPerKey;
      e = { tasks: new SampleWindow(cap), vertices: new Map(), runs: new SampleWindow(cap) };
      this.jobs.set(job, e);
    }
    return e;
  }
}

function valid(durationMs: number): boolean {
  return typeof durationMs === "number" && Number.isFinite(durationMs) && durationMs >= 0;
}

/**
 * The oracle the simulator compares against (seeds/002, section 6.1, "a perfect (oracular) predictor"): a container's
 * remaining lifetime is its true lifetime minus its uptime, at least `MIN_REMAINING_MS` (a container still live past
 * its true end, between simulator events, is about to go). A container without `trueLifetimeMs` is asked of
 * `fallback`.
 */
export class OraclePredictor implements LifetimePredictor {
  constructor(private readonly fallback: LifetimePredictor) {}

  remainingMs(key: ContainerKey, uptimeMs: number): number {
    const truth = key.trueLifetimeMs;
    if (truth === undefined || !valid(truth)) return this.fallback.remainingMs(key, uptimeMs);
    const u = Number.isFinite(uptimeMs) && uptimeMs > 0 ? uptimeMs : 0;
    return Math.max(MIN_REMAINING_MS, truth - u);
  }
}
