/**
 * The survival quote of a job: the probability that it finishes with no task killed by a primary tenant, the expected
 * number of task re-runs those kills cause, and a band for its completion time. Pure: no I/O, no clock (times are
 * durations from the quote); the resource manager and the simulator call the same functions (docs/policies.md,
 * "Survival quotes").
 *
 * The model, chosen to be explained in one paragraph rather than to be exact:
 * - Kills come to a task as a Poisson process of rate lambda per hour, the mean kill rate of the servers the job may
 *   use. A server's rate comes from its primary's history (`killsPerHourOf`): for every slot of the history, how long
 *   until the primary first rises more than `killSlackPct` points above its level then, which is when a server the
 *   scheduler had filled at that moment must yield (the node manager kills when the primary grows into what Harvest
 *   holds, less the reserve, and the scheduler fills a server up to what the primary leaves it).
 * - A task of vertex v, of mean duration d_v (the lifetime model's distribution for the job's vertex), survives with
 *   s_v = exp(-lambda d_v); tasks are independent, so P(no kill) = prod_v s_v^n_v for n_v tasks. A killed task re-runs
 *   from the start until one attempt survives: its attempts are geometric, so it re-runs 1/s_v - 1 times on average,
 *   and the job sum_v n_v (1/s_v - 1) times.
 * - The completion band is the DAG's critical path: a vertex starts when its inputs end and takes ceil(n_v / slots)
 *   waves of its tasks (slots: the containers the job can hold at once); p10 with each vertex's p10 duration and no
 *   kill, p50 with its mean duration stretched by its expected attempts 1/s_v, p90 with its p90 duration stretched by
 *   exp(lambda d_p90). Waits for containers, launches and the job manager itself are not in it.
 */
import { HarvestError } from "../../common/errors.js";
import { optionResolution } from "../../common/options.js";
import { topologicalOrder } from "../../common/dag-spec.js";
import type { DagSpec } from "../../common/dag-spec.js";
import type { UtilizationSeries } from "../../common/trace-io.js";
import type { LifetimeModel, TaskLifetimeSource } from "./lifetime.js";

const HOUR_MS = 3_600_000;

/** Settings of the quote. */
export interface SurvivalQuoteOptions {
  /**
   * A rise of the primary of at most this many CPU-% points over its level when a task was placed does not kill it:
   * the room a server keeps beyond its last full task. Calibrated in the simulator (`harvest sim calibration`).
   * @default 2
   */
  killSlackPct: number;
  /**
   * How many past runs the model's quote counts as when the job's own past runs are blended in: P(no kill) and the
   * re-runs are (w x model + sum over the past runs) / (w + past runs), a beta-binomial posterior mean with the model
   * as the prior. Calibrated in the simulator. @default 5
   */
  priorRuns: number;
  /** The job's most recent runs read (`pastRuns`). @default 20 */
  pastRunsWindow: number;
  /** With at least this many past successful runs, the completion band is their p10, p50 and p90. @default 3 */
  minRunsForBand: number;
}

/** The defaults of every `SurvivalQuoteOptions` field. */
export const DEFAULT_SURVIVAL_QUOTE_OPTIONS: Readonly<SurvivalQuoteOptions> = Object.freeze({
  killSlackPct: 2,
  priorRuns: 5,
  pastRunsWindow: 20,
  minRunsForBand: 3,
});

/** Fills defaults and validates, naming the offending field in a CONFIG_INVALID error. */
export function resolveSurvivalQuoteOptions(partial: Partial<SurvivalQuoteOptions> = {}): SurvivalQuoteOptions {
  const { o, check } = optionResolution("survival quote", DEFAULT_SURVIVAL_QUOTE_OPTIONS, partial);
  check("killSlackPct", (v) => v >= 0 && v <= 100, "in [0, 100]");
  check("priorRuns", (v) => v > 0, "> 0");
  check("pastRunsWindow", (v) => Number.isInteger(v) && v >= 0, "an integer >= 0");
  check("minRunsForBand", (v) => Number.isInteger(v) && v >= 1, "an integer >= 1");
  return o;
}

// ---------------------------------------------------------------------------------------------------------------------
// Kill rates from a primary's history.

/**
 * The kill rate (kills per hour) a task sees on a server whose primary followed `series`: for each sample t, the time
 * until the first later sample above cpuPct[t] + `slackPct` (a task placed at t on a server filled up to the primary's
 * level is killed then), a task placed half-way through its slot; a sample with no such later one is censored at the
 * series' end. The rate is the exponential model's maximum-likelihood estimate, kills over exposure. 0 for a series
 * of fewer than two samples, or one that never rises so far. Non-finite samples are skipped.
 */
export function killsPerHourOf(
  series: Pick<UtilizationSeries, "timesMs" | "cpuPct" | "stepSec">,
  slackPct: number,
): number {
  const times: number[] = [];
  const values: number[] = [];
  for (let i = 0; i < series.cpuPct.length; i++) {
    const v = series.cpuPct[i]!;
    const t = series.timesMs[i];
    if (Number.isFinite(v) && t !== undefined && Number.isFinite(t)) {
      times.push(t);
      values.push(v);
    }
  }
  const n = values.length;
  if (n < 2) return 0;
  const halfStepMs = (series.stepSec * 1000) / 2;
  const endMs = times[n - 1]! + 2 * halfStepMs;
  // Scanning right to left, `stack` holds the later samples that exceed every sample between them and t (values
  // ascending from the top): the first sample above a level is always one of them, found by binary search.
  const stack: number[] = [];
  let kills = 0;
  let exposureMs = 0;
  for (let t = n - 1; t >= 0; t--) {
    const level = values[t]! + slackPct;
    let lo = 0;
    let hi = stack.length;
    // stack[0] is the bottom (largest value, farthest); find the top-most entry with value > level.
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if (values[stack[mid]!]! > level) lo = mid + 1;
      else hi = mid;
    }
    const placedMs = times[t]! + halfStepMs;
    if (lo > 0) {
      kills++;
      exposureMs += times[stack[lo - 1]!]! - placedMs;
    } else exposureMs += endMs - placedMs;
    while (stack.length > 0 && values[stack[stack.length - 1]!]! <= values[t]!) stack.pop();
    stack.push(t);
  }
  return exposureMs > 0 ? (kills * HOUR_MS) / exposureMs : 0;
}

/**
 * A tenant's kill rate (per hour): the mean of `killsPerHourOf` over its servers' series that hold two samples or
 * more; undefined when none does (no history: the tenant's servers are left out of quotes).
 */
export function tenantKillsPerHour(
  perServer: readonly Pick<UtilizationSeries, "timesMs" | "cpuPct" | "stepSec">[],
  slackPct: number,
): number | undefined {
  let sum = 0;
  let n = 0;
  for (const series of perServer) {
    if (series.cpuPct.length < 2) continue;
    sum += killsPerHourOf(series, slackPct);
    n++;
  }
  return n > 0 ? sum / n : undefined;
}

// ---------------------------------------------------------------------------------------------------------------------
// The quote.

/** A vertex of the job as the quote sees it. */
export interface QuoteVertex {
  name: string;
  /** Its tasks (parallelism). */
  tasks: number;
  /** Indices of the vertices it reads (in the same list). */
  inputs: readonly number[];
}

/** How long one task of a vertex runs, ms. */
export interface VertexDurations {
  meanMs: number;
  p10Ms: number;
  p90Ms: number;
}

/** What `survivalQuote` needs. */
export interface QuoteInput {
  vertices: readonly QuoteVertex[];
  /** Per vertex, parallel to `vertices`. */
  durations: readonly VertexDurations[];
  /** Kills per hour a task of the job sees (the mean of its servers' rates). */
  killsPerHour: number;
  /** Task containers the job can hold at once (at least 1 is assumed). */
  slots: number;
  /**
   * How many of the job's tasks share a server (a spike kills them together): the free task containers per server
   * with room. @default 1 (every task on a server of its own: independent kills)
   */
  tasksPerServer?: number;
}

/** A job's survival quote. Times are durations from when it was quoted, ms. */
export interface SurvivalQuote {
  /** Probability that the job finishes with no task killed, 0..1. */
  pNoKill: number;
  /** Expected task re-runs caused by kills. */
  expectedReruns: number;
  /** The completion band: p10, p50 and p90 of the time to the job's end, ms from the quote. */
  etaP10Ms: number;
  etaP50Ms: number;
  etaP90Ms: number;
  /** The kill rate the quote assumed, per task-hour. */
  killsPerHour: number;
  /** Where the task durations came from: the finest lifetime pool any vertex used (vertex, job, all, default). */
  basis: string;
}

/**
 * The quote of the module comment. Throws INVALID_ARGUMENT when `durations` is not parallel to `vertices`, an input
 * index is out of range or not earlier in the list (the DAG in topological order), or a rate or duration is negative.
 */
export function survivalQuote(input: QuoteInput): Omit<SurvivalQuote, "basis"> {
  const { vertices, durations } = input;
  if (durations.length !== vertices.length)
    throw new HarvestError("INVALID_ARGUMENT", "survival quote: one durations entry per vertex");
  const lambda = input.killsPerHour / HOUR_MS;
  if (!(lambda >= 0 && Number.isFinite(lambda)))
    throw new HarvestError("INVALID_ARGUMENT", `survival quote: kill rate must be >= 0, got ${input.killsPerHour}`);
  const slots = Math.max(1, Math.floor(input.slots) || 1);
  const perServer = Math.max(1, input.tasksPerServer ?? 1);
  let logP = 0;
  let reruns = 0;
  const end10 = new Array<number>(vertices.length).fill(0);
  const end50 = new Array<number>(vertices.length).fill(0);
  const end90 = new Array<number>(vertices.length).fill(0);
  let eta10 = 0;
  let eta50 = 0;
  let eta90 = 0;
  vertices.forEach((v, i) => {
    const d = durations[i]!;
    if (!(d.meanMs >= 0 && d.p10Ms >= 0 && d.p90Ms >= 0))
      throw new HarvestError("INVALID_ARGUMENT", `survival quote: vertex ${v.name} has a negative duration`);
    const n = Math.max(0, v.tasks);
    // Server-hours: each wave holds ceil(its tasks / tasksPerServer) servers for a task's duration.
    const waveServers = Math.ceil(Math.min(n, slots) / perServer);
    logP -= lambda * d.meanMs * (n > 0 ? Math.ceil(n / slots) * waveServers : 0);
    // 1/s - 1 with s = exp(-lambda d): expm1 keeps it exact for small lambda d.
    reruns += n * Math.expm1(lambda * d.meanMs);
    let start10 = 0;
    let start50 = 0;
    let start90 = 0;
    for (const j of v.inputs) {
      if (!(Number.isInteger(j) && j >= 0 && j < i))
        throw new HarvestError("INVALID_ARGUMENT", `survival quote: vertex ${v.name} reads an input out of order`);
      start10 = Math.max(start10, end10[j]!);
      start50 = Math.max(start50, end50[j]!);
      start90 = Math.max(start90, end90[j]!);
    }
    const waves = n > 0 ? Math.ceil(n / slots) : 0;
    end10[i] = start10 + waves * d.p10Ms;
    end50[i] = start50 + waves * d.meanMs * Math.exp(lambda * d.meanMs);
    end90[i] = start90 + waves * d.p90Ms * Math.exp(lambda * d.p90Ms);
    eta10 = Math.max(eta10, end10[i]!);
    eta50 = Math.max(eta50, end50[i]!);
    eta90 = Math.max(eta90, end90[i]!);
  });
  return {
    pNoKill: Math.exp(logP),
    expectedReruns: reruns,
    etaP10Ms: Math.round(eta10),
    etaP50Ms: Math.round(Math.max(eta10, eta50)),
    etaP90Ms: Math.round(Math.max(eta10, eta50, eta90)),
    killsPerHour: input.killsPerHour,
  };
}

// ---------------------------------------------------------------------------------------------------------------------
// A job's quote from what the resource manager (or the simulator) knows.

/** One past run of the job, as the job history records it. */
export interface PastRun {
  /** Its tasks killed by primaries (each re-ran). */
  tasksPreempted: number;
  /** Submission to end, ms. */
  durationMs: number;
  /** It succeeded (only successful runs' durations make the band). */
  succeeded: boolean;
}

/** What `quoteJob` needs: the job, where it may run and what is known of its tasks. */
export interface JobQuoteInput {
  /** The job's recurring name (the lifetime model's key). */
  job: string;
  vertices: readonly QuoteVertex[];
  /** The task durations learned from the job history. */
  lifetimes: Pick<LifetimeModel, "taskDistribution">;
  /** The kill rate (per hour) of each server the job may use; empty: none known, 0 assumed. */
  serverKillsPerHour: readonly number[];
  /** Task containers the job can hold at once: its max concurrency, at most the free task slots of its servers. */
  slots: number;
  /** Free task containers per server with room (`QuoteInput.tasksPerServer`). @default 1 */
  tasksPerServer?: number;
  /** The job's past runs, newest first (only the first `pastRunsWindow` are read). @default none */
  pastRuns?: readonly PastRun[];
  options?: Partial<SurvivalQuoteOptions>;
}

/** A server as the quote counts its room: its cores, its primary's, the scheduler's reserve and what Harvest holds. */
export interface QuoteServer {
  capacityMilli: number;
  primaryMilli: number;
  reserveMilli: number;
  allocatedMilli: number;
}

/**
 * The task containers of `taskMilli` free on `servers` (room beside the primary, the reserve and what is held), and
 * how many servers have room for one: `JobQuoteInput.slots` and `tasksPerServer` = slots / serversWithRoom.
 */
export function freeTaskSlots(
  servers: Iterable<QuoteServer>,
  taskMilli: number,
): { slots: number; serversWithRoom: number } {
  const size = Math.max(1, taskMilli);
  let slots = 0;
  let serversWithRoom = 0;
  for (const s of servers) {
    const room = s.capacityMilli - s.primaryMilli - s.reserveMilli - s.allocatedMilli;
    if (room < size) continue;
    slots += Math.floor(room / size);
    serversWithRoom++;
  }
  return { slots, serversWithRoom };
}

const SOURCE_RANK: Readonly<Record<TaskLifetimeSource, number>> = { vertex: 0, job: 1, all: 2, default: 3 };

/**
 * The quote of a job: each vertex's durations from the lifetime model (mean, p10, p90 of its pool), the mean kill rate
 * of its servers, `survivalQuote` over them; then the job's own past runs blended in (`priorRuns`), and, with
 * `minRunsForBand` successful ones, their durations' p10, p50 and p90 as the band (they hold what the critical path
 * leaves out: waits for containers, launches, kills). The one entry point of the resource manager and the simulator.
 */
export function quoteJob(input: JobQuoteInput): SurvivalQuote {
  const o = resolveSurvivalQuoteOptions(input.options);
  const model = modelQuote(input);
  const past = (input.pastRuns ?? []).slice(0, o.pastRunsWindow);
  if (past.length === 0) return model;
  const w = o.priorRuns;
  const n = past.length;
  const noKill = past.filter((r) => r.tasksPreempted === 0).length;
  const reruns = past.reduce((a, r) => a + Math.max(0, r.tasksPreempted), 0);
  const quote: SurvivalQuote = {
    ...model,
    pNoKill: (w * model.pNoKill + noKill) / (w + n),
    expectedReruns: (w * model.expectedReruns + reruns) / (w + n),
    basis: `${model.basis}, ${n} past run${n === 1 ? "" : "s"}`,
  };
  const durations = past
    .filter((r) => r.succeeded && Number.isFinite(r.durationMs) && r.durationMs >= 0)
    .map((r) => r.durationMs)
    .sort((a, b) => a - b);
  if (durations.length >= o.minRunsForBand) {
    quote.etaP10Ms = Math.round(quantileSorted(durations, 0.1));
    quote.etaP50Ms = Math.round(quantileSorted(durations, 0.5));
    quote.etaP90Ms = Math.round(quantileSorted(durations, 0.9));
  }
  return quote;
}

/** The q-quantile of ascending, non-empty `sorted`, linear between the nearest ranks. */
function quantileSorted(sorted: readonly number[], q: number): number {
  const rank = q * (sorted.length - 1);
  const lo = Math.floor(rank);
  const hi = Math.ceil(rank);
  return sorted[lo]! + (sorted[hi]! - sorted[lo]!) * (rank - lo);
}

/** The model's quote alone (no past runs). */
function modelQuote(input: JobQuoteInput): SurvivalQuote {
  let coarsest: TaskLifetimeSource = "vertex";
  const durations = input.vertices.map((v) => {
    const { distribution, source } = input.lifetimes.taskDistribution(input.job, v.name);
    if (SOURCE_RANK[source] > SOURCE_RANK[coarsest]) coarsest = source;
    return { meanMs: distribution.mean, p10Ms: distribution.quantile(0.1), p90Ms: distribution.quantile(0.9) };
  });
  const rates = input.serverKillsPerHour;
  const killsPerHour = rates.length > 0 ? rates.reduce((a, r) => a + r, 0) / rates.length : 0;
  return {
    ...survivalQuote({
      vertices: input.vertices,
      durations,
      killsPerHour,
      slots: input.slots,
      ...(input.tasksPerServer !== undefined ? { tasksPerServer: input.tasksPerServer } : {}),
    }),
    basis: coarsest,
  };
}

/** A DAG's vertices as the quote sees them, in topological order (a vertex over DFS splits not yet split has 0 tasks). */
export function quoteVerticesOfDag(dag: DagSpec): QuoteVertex[] {
  const order = topologicalOrder(dag);
  const index = new Map(order.map((name, i) => [name, i]));
  const byName = new Map(dag.vertices.map((v) => [v.name, v]));
  return order.map((name) => ({
    name,
    tasks: byName.get(name)?.parallelism ?? 0,
    inputs: dag.edges.filter((e) => e.to === name).map((e) => index.get(e.from)!),
  }));
}
