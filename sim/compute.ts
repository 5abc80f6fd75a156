/**
 * The compute experiment (seeds/004, section 4.1 and its evaluation of task scheduling): a stream of recurring DAG jobs
 * runs on servers whose primary tenants follow their utilization series, placed by the very scheduler the resource
 * manager runs (`Scheduler` with the stock policy, or with `HistorySchedulerPolicy` and Algorithm 1's class choice),
 * and yielding to the primary as the node manager does (`chooseVictims`: youngest first). A killed task re-runs, as the
 * job manager re-runs a preempted task. Measured: job execution time (submission to last task end) overall and per
 * job type, task kills and the core-hours they wasted. A third baseline, primary-unaware stock YARN ("stock-unaware"),
 * places with the same stock policy on each server's full capacity (the scheduler is never told the primary's usage)
 * and never kills; what it costs is measured on the primary's side instead, as the core-hours the primary wanted but
 * the secondary tasks held.
 *
 * Like YARN's Scheduler Load Simulator, the policies are not re-implemented here: this module only plays the
 * daemons' parts around them (heartbeats become events; see `runCompute` for the model's choices).
 */
import { performance } from "node:perf_hooks";
import { HarvestError } from "../common/errors.js";
import { stripUndefined } from "../common/options.js";
import type { Resources } from "../common/resource.js";
import { SeededRng } from "../common/rng.js";
import { ServerSet } from "./server-set.js";
import { yieldVictims } from "./yield-step.js";
import type { UtilizationSeries } from "../common/trace-io.js";
import { Logger } from "../common/log.js";
import {
  AM_PRIORITY,
  classifyFeatures,
  HistoryPlacement,
  HistorySchedulerPolicy,
  jobTypeOf,
  LiveClassViews,
  liveNodeOf,
  resolveClassifierOptions,
  resolveClassWeights,
  resolveJobTypeOptions,
  Scheduler,
  StockSchedulerPolicy,
  tenantFeatures,
} from "../resourcemanager/index.js";
import type {
  Allocation,
  ClassifierOptions,
  ClassWeights,
  ClassWeightsInput,
  FeaturedTenant,
  JobType,
  JobTypeOptions,
  LiveNode,
  PlacementDecision,
  TenantClass,
} from "../resourcemanager/index.js";
import { SimEngine } from "./engine.js";
import type { EngineProgress } from "./engine.js";
import { taskDurationMs } from "./jobs.js";
import type { JobStream, SimJob } from "./jobs.js";
import { DAY_MS } from "./model.js";
import type { SimCluster } from "./model.js";
import type { ComputePolicy, ComputeResult, JobTypeFigures, SimJobType } from "./results.js";

/** Options of {@link runCompute}; {@link resolveComputeOptions} fills the defaults and validates. */
export interface ComputeOptions {
  /**
   * Task placement: any server with headroom beside the primary, yielding to it (stock); any server with room in its
   * full capacity, never yielding (stock-unaware); or the servers of Algorithm 1's classes, yielding (history).
   */
  policy: ComputePolicy;
  /**
   * Seeds every random choice of the run (Algorithm 1's draws, K-Means, which free server a heartbeat comes from).
   * @default cluster.seed
   */
  seed?: number;
  /**
   * Fraction of each server's cores kept free for its primary tenant (the scheduler's and node manager's reserve).
   * Not kept under stock-unaware, which knows of no primary (its scheduler's reserve is 0).
   * @default 0.1
   */
  reserveFraction?: number;
  /**
   * Job managers may hold at most this share of the harvestable cores (the resource manager's maxAmShare); 1: no
   * limit.
   * @default 1
   */
  maxAmShare?: number;
  /**
   * Cores each task asks for.
   * @default the stream's taskCores
   */
  taskCores?: number;
  /**
   * Algorithm 1's ranking weights (see `DEFAULT_CLASS_WEIGHTS`).
   * @default {}
   */
  weights?: ClassWeightsInput;
  /**
   * How past job durations become the short/long thresholds (see `JobTypeOptions`).
   * @default {}
   */
  jobTypes?: Partial<JobTypeOptions>;
  /**
   * Job types are judged against this many most recent finished jobs (the resource manager's jobHistoryWindow).
   * @default 1000
   */
  jobHistoryWindow?: number;
  /**
   * Classifier settings (see `ClassifierOptions`).
   * @default {}
   */
  classifier?: Partial<ClassifierOptions>;
  /**
   * Under the history policy, a job that finds no class with room for this long runs on any server (0: waits for
   * ever), as the resource manager's classWaitMs.
   * @default 60000
   */
  classWaitMs?: number;
  /**
   * Under the history policy, waiting jobs retry Algorithm 1 this often (the resource manager's monitor tick).
   * @default 5000
   */
  retryIntervalMs?: number;
  /**
   * The classes are rebuilt this often from the most recent `historyMs` of utilization (the resource manager's
   * reclusterIntervalMs); 0 classifies once, on the history window [0, historyMs).
   * @default 86400000 (daily)
   */
  reclassifyIntervalMs?: number;
  /**
   * Checks after every event that no server runs more secondary cores than capacity - primary - reserve (or none when
   * that is negative; under stock-unaware, than its capacity), that the simulation's books agree with the scheduler's
   * and that the primaries' shortfall is kept right (and 0 where the policy yields); a violation throws INTERNAL. Costs
   * O(servers) per event: tests only.
   * @default false
   */
  checkInvariants?: boolean;
  /**
   * What a kill costs beyond the killed attempt's work: the node manager's detection lag, the scheduler's heartbeat
   * lag, container launch, the job manager's own container, and the slowdown of tasks the primary out-competes before
   * the kill (see {@link KillCostModel}; `NO_KILL_COST` turns all of it off).
   * @default DEFAULT_KILL_COST
   */
  killCost?: Partial<KillCostModel>;
  /**
   * Told about every `progressEvery` events (see `SimEngine.run`).
   * @default undefined
   */
  onProgress?: (p: EngineProgress) => void;
  /** @default 1000000 */
  progressEvery?: number;
  /**
   * Told about placements as they happen (tests, traces).
   * @default undefined
   */
  observer?: ComputeObserver;
}

/**
 * What yielding costs on a real cluster, beyond the killed attempt's lost work; each part is measured on the real
 * daemons or taken from their options, and each can be turned off (0 / false) to see what it weighs.
 */
export interface KillCostModel {
  /**
   * The node manager's yield tick (its yieldTickMs): a primary that grows into what Harvest holds is noticed at the
   * server's next tick (each server ticks at its own phase), not at once. 0: at once.
   * @default 250
   */
  yieldTickMs: number;
  /**
   * Node heartbeats (the resource manager's heartbeatIntervalMs): the scheduler learns a server's primary usage, and
   * grants the room a finished task or a shrinking primary left, only at the server's next heartbeat. Until then it
   * may grant on a server whose primary has already grown (that task is killed at the next yield tick). 0: at once.
   * @default 1000
   */
  heartbeatIntervalMs: number;
  /**
   * The job manager asks for containers every amHeartbeatMs (its HARVEST_AM_HEARTBEAT_MS): a granted container is
   * picked up after a uniform 0..amHeartbeatMs wait, then launched. 0: at once.
   * @default 300
   */
  amHeartbeatMs: number;
  /**
   * Container launch (the node manager's startContainer to the task running), log-normal with this median and 90th
   * percentile; the defaults are what `npm run bench -- yield` measured on the real node manager here (90 containers
   * of `node -e`, startContainer called to the task's first line: p50 76 ms, p90 166 ms). The container is held (and
   * may be killed) while it launches. 0: at once.
   * @default 80 / 170
   */
  launchMedianMs: number;
  launchP90Ms: number;
  /**
   * Each job runs its job manager in a container of this many milli-cores (the resource manager's amResource), placed
   * anywhere with room before any task, on a harvested server like any container. The yield controller kills it
   * last; when it is killed, every running task of the job is lost and a new attempt starts (a new container, a new
   * launch, Algorithm 1 again) and recovers the finished tasks from its journal, as the real job manager does. 0: no
   * job-manager container.
   * @default 500
   */
  jobManagerMilli: number;
  /**
   * Before the yield tick kills, the primary out-competes the tasks (they run at the lowest CPU weight): while
   * primary + running tasks exceed the server's cores, the tasks progress at the share of their cores the primary
   * leaves them, and finish later. false: they run at full speed until killed.
   * @default true
   */
  throttleSlowdown: boolean;
}

/** The kill-cost model's defaults: the daemons' own defaults and what the yield benchmark measured. */
export const DEFAULT_KILL_COST: Readonly<KillCostModel> = Object.freeze({
  yieldTickMs: 250,
  heartbeatIntervalMs: 1000,
  amHeartbeatMs: 300,
  launchMedianMs: 80,
  launchP90Ms: 170,
  jobManagerMilli: 500,
  throttleSlowdown: true,
});

/** A kill costs only the killed attempt's work: the model of earlier releases (and of the paper's simulator). */
export const NO_KILL_COST: Readonly<KillCostModel> = Object.freeze({
  yieldTickMs: 0,
  heartbeatIntervalMs: 0,
  amHeartbeatMs: 0,
  launchMedianMs: 0,
  launchP90Ms: 0,
  jobManagerMilli: 0,
  throttleSlowdown: false,
});

/** Hooks into a run, for tests and traces. */
export interface ComputeObserver {
  /**
   * A job's servers were decided: `classIds` from Algorithm 1 (history), or undefined with `servers` undefined when it
   * may use any server (stock, or history after waiting `classWaitMs`).
   */
  onJobPlaced?(e: {
    job: SimJob;
    jobType: SimJobType;
    classIds?: readonly string[];
    servers?: readonly number[];
  }): void;
  /**
   * The placement decided for a job (history only): on its first ask and on every retry while it waits, waits
   * included. What the resource manager's `HistoryPlacement` returned, at simulated time `nowMs`.
   */
  onDecision?(e: { job: SimJob; jobType: SimJobType; decision: PlacementDecision; nowMs: number }): void;
  /** The classes were rebuilt (history only), as the tenant registry's classification gives them. */
  onClassified?(e: { classes: readonly TenantClass[]; nowMs: number }): void;
  /** A task attempt started on server index `server`. */
  onTaskStart?(e: { job: SimJob; vertex: number; task: number; server: number; nowMs: number }): void;
  /** A task attempt was killed because the server's primary tenant needed its cores. */
  onTaskKilled?(e: { job: SimJob; vertex: number; task: number; server: number; nowMs: number }): void;
  /** A task attempt ran to its end. */
  onTaskEnded?(e: { job: SimJob; vertex: number; task: number; server: number; nowMs: number }): void;
  /** A job finished. */
  onJobFinished?(e: { job: SimJob; jobType: SimJobType; durationMs: number }): void;
}

/** {@link ComputeOptions} with every default filled in. */
export type ResolvedComputeOptions = Required<
  Omit<ComputeOptions, "onProgress" | "observer" | "weights" | "killCost">
> &
  Pick<ComputeOptions, "onProgress" | "observer"> & { weights: ClassWeights; killCost: KillCostModel };

/** A compute run's figures: the shared {@link ComputeResult} and what the simulator also counts. */
export interface ComputeRunResult extends ComputeResult {
  /** Runs submitted, and those still running at the horizon (not in the averages). */
  jobsSubmitted: number;
  jobsUnfinished: number;
  /** Task attempts that completed (`tasksRun` counts every attempt started, killed ones included). */
  tasksCompleted: number;
  /** Jobs that ran on any server after waiting `classWaitMs` for a class (history only). */
  jobsOpenedToAll: number;
  /** Task kills per job type (the type of the job the task belonged to). */
  killsByType: Record<SimJobType, number>;
  /** Times the classes were built. */
  classifications: number;
  /** Classes of the last classification, "pattern-index: servers" (history only). */
  classes: string[];
  /** Simulation events per wall-clock second. */
  eventsPerSec: number;
}

function invalid(field: string, why: string): never {
  throw new HarvestError("INVALID_ARGUMENT", `compute option ${field} ${why}`, { details: { field } });
}

/** Fills defaults into `options` for `cluster` and `jobs` and validates every field, naming the offending one. */
export function resolveComputeOptions(
  cluster: SimCluster,
  jobs: JobStream,
  options: ComputeOptions,
): ResolvedComputeOptions {
  const o: ResolvedComputeOptions = {
    policy: options.policy,
    seed: options.seed ?? cluster.seed,
    reserveFraction: options.reserveFraction ?? 0.1,
    maxAmShare: options.maxAmShare ?? 1,
    taskCores: options.taskCores ?? jobs.taskCores,
    weights: resolveClassWeights(options.weights ?? {}),
    jobTypes: resolveJobTypeOptions(options.jobTypes ?? {}),
    jobHistoryWindow: options.jobHistoryWindow ?? 1000,
    classifier: resolveClassifierOptions(options.classifier ?? {}),
    classWaitMs: options.classWaitMs ?? 60_000,
    retryIntervalMs: options.retryIntervalMs ?? 5000,
    reclassifyIntervalMs: options.reclassifyIntervalMs ?? DAY_MS,
    checkInvariants: options.checkInvariants ?? false,
    killCost: { ...DEFAULT_KILL_COST, ...stripUndefined(options.killCost ?? {}) },
    progressEvery: options.progressEvery ?? 1_000_000,
    ...(options.onProgress !== undefined ? { onProgress: options.onProgress } : {}),
    ...(options.observer !== undefined ? { observer: options.observer } : {}),
  };
  if (o.policy !== "stock" && o.policy !== "stock-unaware" && o.policy !== "history")
    invalid("policy", `must be "stock", "stock-unaware" or "history" (got ${String(o.policy)})`);
  if (!Number.isSafeInteger(o.seed)) invalid("seed", `must be an integer (got ${o.seed})`);
  if (!(o.reserveFraction >= 0 && o.reserveFraction < 1))
    invalid("reserveFraction", `must be in [0, 1) (got ${o.reserveFraction})`);
  if (!(o.maxAmShare > 0 && o.maxAmShare <= 1)) invalid("maxAmShare", `must be in (0, 1] (got ${o.maxAmShare})`);
  if (!(Number.isFinite(o.taskCores) && o.taskCores > 0)) invalid("taskCores", `must be > 0 (got ${o.taskCores})`);
  const taskMilli = Math.round(o.taskCores * 1000);
  const fitsSomewhere = cluster.servers.some(
    (s) => s.cores * 1000 - Math.ceil(s.cores * 1000 * o.reserveFraction) >= taskMilli,
  );
  if (cluster.servers.length > 0 && !fitsSomewhere)
    invalid("taskCores", `${o.taskCores} cores fit on no server once the reserve is kept`);
  if (!(Number.isSafeInteger(o.jobHistoryWindow) && o.jobHistoryWindow >= 1))
    invalid("jobHistoryWindow", `must be an integer >= 1 (got ${o.jobHistoryWindow})`);
  if (!(Number.isFinite(o.classWaitMs) && o.classWaitMs >= 0))
    invalid("classWaitMs", `must be >= 0 (got ${o.classWaitMs})`);
  if (!(Number.isFinite(o.retryIntervalMs) && o.retryIntervalMs > 0))
    invalid("retryIntervalMs", `must be > 0 (got ${o.retryIntervalMs})`);
  if (!(Number.isFinite(o.reclassifyIntervalMs) && o.reclassifyIntervalMs >= 0))
    invalid("reclassifyIntervalMs", `must be >= 0 (got ${o.reclassifyIntervalMs})`);
  const k = o.killCost;
  for (const field of [
    "yieldTickMs",
    "heartbeatIntervalMs",
    "amHeartbeatMs",
    "launchMedianMs",
    "launchP90Ms",
  ] as const) {
    if (!(Number.isFinite(k[field]) && k[field] >= 0)) invalid(`killCost.${field}`, `must be >= 0 (got ${k[field]})`);
  }
  if (k.launchP90Ms < k.launchMedianMs)
    invalid("killCost.launchP90Ms", `must be >= launchMedianMs (${k.launchMedianMs}), got ${k.launchP90Ms}`);
  if (!(Number.isSafeInteger(k.jobManagerMilli) && k.jobManagerMilli >= 0))
    invalid("killCost.jobManagerMilli", `must be an integer >= 0 (got ${k.jobManagerMilli})`);
  if (k.jobManagerMilli > taskMilli)
    invalid("killCost.jobManagerMilli", `must be at most a task's ${taskMilli} milli-cores (got ${k.jobManagerMilli})`);
  if (typeof k.throttleSlowdown !== "boolean")
    invalid("killCost.throttleSlowdown", `must be true or false (got ${String(k.throttleSlowdown)})`);
  if (!(Number.isSafeInteger(o.progressEvery) && o.progressEvery >= 1))
    invalid("progressEvery", `must be an integer >= 1 (got ${o.progressEvery})`);
  for (const [i, j] of jobs.jobs.entries()) {
    if (!(j.submitMs >= cluster.historyMs && j.submitMs < cluster.horizonMs))
      invalid(`jobs[${i}].submitMs`, `must be in [${cluster.historyMs}, ${cluster.horizonMs}) (got ${j.submitMs})`);
  }
  return o;
}

/**
 * Runs one compute experiment: `jobs` under `options.policy` over the cluster's experiment period [historyMs,
 * horizonMs). Deterministic: the same cluster, jobs and options give the same result but for `wallMs` and
 * `eventsPerSec`.
 *
 * The model:
 * - Primary tenants: at every slot boundary each server's primary uses capacity x utilization (its tenant's series
 *   plus its offset, as `serverUtilization`); only tenants whose value changed are visited. Within a slot the primary
 *   is flat. What a kill costs is `options.killCost` (`KillCostModel`; `NO_KILL_COST` gives the instant model of
 *   earlier releases, figure for figure): the scheduler learns the primary's usage at the server's next heartbeat,
 *   and the node manager acts on it at its next yield tick; until then the primary out-competes the tasks, which run
 *   at the share of their cores it leaves them.
 * - Yielding (the node manager's yield controller, seeds/004 section 4.1): at the tick after a server's primary grows
 *   past what the reserve covers, `chooseVictims` picks the youngest containers, the job manager's last, until the
 *   rest fit in capacity - primary - reserve; they are killed in the same event. A killed task goes back to its job's
 *   queue and runs again from the start (a preemption, not a failure); its held time x cores is wasted. A killed job
 *   manager takes its job's running tasks with it; a new attempt gets a container, launches, registers (Algorithm 1
 *   again) and re-runs only the unfinished tasks (its journal).
 * - Scheduling: every job is an application of the real `Scheduler`: first one ask for its job manager's container
 *   (AM_PRIORITY, anywhere), then, once that has launched and registered, one ask (priority 0, taskCores each) for its
 *   runnable tasks. Grants happen at node heartbeats, each of which reports the primary's usage first. Heartbeats are
 *   events, not ticks: when a job's ask grows the free servers it may use are visited (stock: drawn at random from
 *   the servers with room for a task, as heartbeats arrive in no useful order; history: its classes' servers from a
 *   random start), and a server that gains room (a container ends, its primary shrinks) heartbeats at its next
 *   heartbeat time. Each visit is `allocateOnNode`, so FIFO order among jobs and the policy's rule are the
 *   scheduler's. A granted container is held from the grant; its task starts after the job manager's next allocate
 *   call and the container's launch.
 * - History policy: the resource manager's own `HistoryPlacement`, reading its classes through the resource manager's
 *   `LiveClassViews` over the scheduler's nodes (`liveNodeOf`, as the resource manager's live nodes), on the simulated
 *   clock. The tenants' average-server series over the last `historyMs` are classified (`tenantFeatures`,
 *   `classifyFeatures`) at the start and every `reclassifyIntervalMs`. A job's type is `jobTypeOf` its name's last
 *   duration among the last `jobHistoryWindow` finished jobs (none when older: medium, as the resource manager's
 *   history query finds it) against those jobs' thresholds; at submission the job registers with its
 *   DAG's max concurrency and asks for taskCores containers, and Algorithm 1 (`selectClasses`) picks classes from their
 *   live headroom; the job's tasks may use only the servers the placement assigned it in `HistorySchedulerPolicy`. Jobs
 *   that find none are retried together (`retryWaiting`) every `retryIntervalMs` and run anywhere after `classWaitMs`.
 *   Under the stock policy the type is computed the same way, for the per-type figures only.
 * - DAGs: a vertex's tasks become runnable when all its input vertices have finished; they run as far as containers
 *   are granted; a job ends with its last task. Task durations (at full speed) come from the stream
 *   (`taskDurationMs`), the same in every policy and for every attempt.
 * - Jobs still running at the horizon are not in the averages (`jobsUnfinished`).
 * - Stock-unaware: the stock policy's scheduler with no reserve and the primary's usage never reported (0), so it
 *   grants up to each server's full capacity; no yield step runs and its containers share the CPU with the primary
 *   as equals, so no task is ever killed or slowed (the tasks are taken to win their share) and job times are the
 *   jobs' times without interference from the primary. The primary pays: on every server, at every moment, it is short
 *   of min(primary, max(0, primary + secondary held - capacity)) cores, integrated exactly over the run (the primary is
 *   flat within a slot; the integral steps whenever a slot begins or a task starts or ends) as
 *   `primaryCoreHoursTaken`. The same integral is kept under the other policies, where yielding makes it 0.
 */
export function runCompute(cluster: SimCluster, jobs: JobStream, options: ComputeOptions): ComputeRunResult {
  const o = resolveComputeOptions(cluster, jobs, options);
  const started = performance.now();
  const sim = new ComputeSim(cluster, jobs, o);
  sim.run();
  return sim.result(performance.now() - started);
}

// ------------------------------------------------------------------------------------------------ the simulation

/** Independent random streams, one per purpose, so that one decision does not shift another's draws. */
export const Stream = { Classes: 1, Kmeans: 2, Servers: 3, Launch: 4 } as const;

/** The seed of a run's random stream `stream` (Algorithm 1's draws are `Stream.Classes`). */
export function streamSeed(seed: number, stream: number): number {
  let h = (seed ^ Math.imul(stream, 0x9e3779b9)) >>> 0;
  h = Math.imul(h ^ (h >>> 16), 0x85ebca6b) >>> 0;
  h = Math.imul(h ^ (h >>> 13), 0xc2b2ae35) >>> 0;
  return (h ^ (h >>> 16)) >>> 0;
}

/** A task's place in its job: vertex x TASK_STRIDE + task index (parallelism is at most 10,000). */
const TASK_STRIDE = 65_536;
/** The `task` of the job manager's container. */
const JOB_MANAGER = -1;
/** The standard normal's 90th percentile: a log-normal's p90 / median = exp(sigma x this). */
const Z90 = 1.2815515655446004;

/** One run of a job, as its job manager and the resource manager know it. */
interface JobRun {
  readonly job: SimJob;
  readonly appId: string;
  readonly type: JobType;
  /** Per vertex: input vertices not finished yet. */
  readonly inputsLeft: Int32Array;
  /** Per vertex: tasks not completed yet. */
  readonly tasksLeft: Int32Array;
  /** Per vertex: the vertices that read it. */
  readonly consumers: readonly (readonly number[])[];
  /** Runnable tasks not granted a container yet (vertex x TASK_STRIDE + task), from `head` on. */
  queue: number[];
  /** When each queued task became runnable (parallel to `queue`). */
  queuedAtMs: number[];
  head: number;
  tasksRemaining: number;
  /** Its containers now: the job manager's and the tasks' (launching or running). */
  readonly attempts: Set<Attempt>;
  /** The job manager's container, from its grant until it is killed (undefined: none, or the model has none). */
  jobManager: Attempt | undefined;
  /** The job may ask for task containers: its job manager registered and Algorithm 1 (if any) placed it. */
  decided: boolean;
  /** The servers it may use; undefined: any. */
  allowed: Int32Array | undefined;
  waitingSinceMs: number;
  waited: boolean;
}

/** A container: a task attempt, or a job manager (`task` JOB_MANAGER). */
interface Attempt {
  readonly run: JobRun;
  readonly task: number;
  readonly server: number;
  /** When it was granted (the yield controller's age). */
  readonly startMs: number;
  readonly containerId: string;
  readonly milli: number;
  readonly isAm: boolean;
  alive: boolean;
  /** Launched: a task's work progresses (a job manager has registered). */
  launched: boolean;
  /** A task's work left at full speed, ms, as of `sinceMs`, and the share of full speed it has run at since then. */
  workLeftMs: number;
  sinceMs: number;
  rate: number;
  /** Bumped whenever its end is rescheduled: an end event of an older version is stale. */
  version: number;
}

/** The placement's log: the simulator keeps none. */
const SILENT_LOG = new Logger("sim/placement", "error", () => undefined);

/** A fraction in [0, 1) from a hash of server `s` and `salt`: where in its period a server's timer fires. */
function phaseOf(s: number, salt: number): number {
  return streamSeed(s, salt) / 4_294_967_296;
}

class ComputeSim {
  private readonly engine = new SimEngine();
  private readonly scheduler: Scheduler;
  private readonly history: HistorySchedulerPolicy | undefined;
  /** The resource manager's Algorithm 1 and its class views (history policy only). */
  private readonly placement: HistoryPlacement | undefined;
  private readonly classViews: LiveClassViews | undefined;
  private readonly taskMilli: number;
  private readonly taskResource: Resources;
  private readonly jobManagerResource: Resources;
  private readonly cost: KillCostModel;
  /** The scheduler and node manager know the primary (stock, history); false under stock-unaware. */
  private readonly aware: boolean;
  private readonly kmeansRng: SeededRng;
  private readonly serverRng: SeededRng;
  private readonly launchRng: SeededRng;
  private readonly launchSigma: number;

  // Per server.
  private readonly nodeIds: string[];
  private readonly capMilli: Int32Array;
  private readonly reserveMilli: Int32Array;
  /** What the primary wants (whether or not the scheduler knows yet; see `seenMilli`). */
  private readonly primaryMilli: Int32Array;
  /** The primary usage the scheduler was last told (at the server's last heartbeat; 0 under stock-unaware). */
  private readonly seenMilli: Int32Array;
  /** Held by containers (launching or running, job managers included). */
  private readonly secondaryMilli: Int32Array;
  /** Held by launched tasks: what competes with the primary for the CPU. */
  private readonly runningTaskMilli: Int32Array;
  /** The share of full speed the launched tasks run at (1 unless the primary out-competes them). */
  private readonly rate: Float64Array;
  private readonly yieldPending: Uint8Array;
  private readonly heartbeatPending: Uint8Array;
  private readonly running: Set<Attempt>[];
  private readonly serverIndex: Map<string, number>;
  /**
   * Every server as the resource manager's live nodes show it (`liveNodeOf` its scheduler view), kept current in place
   * rather than rebuilt for every decision; `checkInvariants` checks it against the scheduler.
   */
  private readonly liveNodes: LiveNode[];
  /** Servers with room for one task, as the scheduler sees them. */
  private readonly free: ServerSet;

  private readonly runs = new Map<string, JobRun>();
  private retryScheduled = false;
  private containerSeq = 0;
  private nextJob = 0;

  // Job history, as the resource manager's store keeps it.
  /** Per job name, its last run: duration and place among finished jobs (`jobsFinished` after it). */
  private readonly lastRun = new Map<string, { durationMs: number; seq: number }>();
  /** The last `jobHistoryWindow` durations, ascending; `recentRing` holds them in the order they came. */
  private readonly recentDurationsMs: number[] = [];
  private readonly recentRing: number[] = [];
  private recentNext = 0;

  // Figures.
  private tasksRun = 0;
  private tasksCompleted = 0;
  private taskKills = 0;
  private jobManagerKills = 0;
  private wastedCoreMs = 0;
  private taskWaitMs = 0;
  /** The primary's shortfall (milli-cores) summed over servers now, its integral so far, and when it last changed. */
  private takenMilli = 0;
  private takenMilliMs = 0;
  private takenSinceMs = 0;
  private jobsFinished = 0;
  private jobsWaited = 0;
  private jobsOpenedToAll = 0;
  private classifications = 0;
  private readonly timeByType: Record<SimJobType, { jobs: number; sumMs: number; kills: number }> = {
    short: { jobs: 0, sumMs: 0, kills: 0 },
    medium: { jobs: 0, sumMs: 0, kills: 0 },
    long: { jobs: 0, sumMs: 0, kills: 0 },
  };

  constructor(
    private readonly cluster: SimCluster,
    private readonly stream: JobStream,
    private readonly o: ResolvedComputeOptions,
  ) {
    this.taskMilli = Math.round(o.taskCores * 1000);
    this.taskResource = { vcoresMilli: this.taskMilli, memoryMb: Math.ceil(o.taskCores * 1024) };
    this.cost = o.killCost;
    this.jobManagerResource = { vcoresMilli: this.cost.jobManagerMilli, memoryMb: 256 };
    this.kmeansRng = new SeededRng(streamSeed(o.seed, Stream.Kmeans));
    this.serverRng = new SeededRng(streamSeed(o.seed, Stream.Servers));
    this.launchRng = new SeededRng(streamSeed(o.seed, Stream.Launch));
    this.launchSigma =
      this.cost.launchMedianMs > 0 ? Math.log(this.cost.launchP90Ms / this.cost.launchMedianMs) / Z90 : 0;
    this.aware = o.policy !== "stock-unaware";
    // Primary-unaware YARN keeps nothing back for a primary it does not know of.
    const reserveFraction = this.aware ? o.reserveFraction : 0;
    this.history = o.policy === "history" ? new HistorySchedulerPolicy() : undefined;
    if (this.history) {
      // What the resource manager's live nodes would say of every server (all of them run for the whole experiment).
      this.classViews = new LiveClassViews(() => this.liveNodes);
      this.placement = new HistoryPlacement(
        this.history,
        { weights: o.weights, classWaitMs: o.classWaitMs },
        this.classViews,
        this.engine.clock,
        new SeededRng(streamSeed(o.seed, Stream.Classes)),
        SILENT_LOG,
      );
    }
    this.scheduler = new Scheduler(
      this.history ?? new StockSchedulerPolicy(),
      { reserveFraction, maxAllocationsPerHeartbeat: 0, maxAmShare: o.maxAmShare },
      () => `c${++this.containerSeq}`,
    );
    const n = cluster.servers.length;
    this.nodeIds = cluster.servers.map((s) => s.id);
    this.capMilli = new Int32Array(n);
    this.reserveMilli = new Int32Array(n);
    this.primaryMilli = new Int32Array(n);
    this.seenMilli = new Int32Array(n);
    this.secondaryMilli = new Int32Array(n);
    this.runningTaskMilli = new Int32Array(n);
    this.rate = new Float64Array(n).fill(1);
    this.yieldPending = new Uint8Array(n);
    this.heartbeatPending = new Uint8Array(n);
    this.running = Array.from({ length: n }, () => new Set<Attempt>());
    this.serverIndex = new Map(this.nodeIds.map((id, i) => [id, i]));
    this.liveNodes = [];
    this.free = new ServerSet(n);
    for (const s of cluster.servers) {
      const cap = s.cores * 1000;
      this.capMilli[s.index] = cap;
      // The scheduler's own rounding, so that "room for a task" here is exactly its headroom.
      this.reserveMilli[s.index] = Math.ceil(cap * reserveFraction);
      // Memory never binds: every node has 8 GB per core, a task 1 GB per core.
      this.scheduler.addNode(s.id, { vcoresMilli: cap, memoryMb: s.cores * 8192 }, s.rack);
      const view = this.scheduler.nodeView(s.id)!;
      this.liveNodes.push(
        liveNodeOf(
          {
            nodeId: s.id,
            capacity: { ...view.capacity },
            primaryUsage: { ...view.primaryUsage },
            allocated: { ...view.allocated },
          },
          reserveFraction,
        ),
      );
    }
  }

  run(): void {
    const { cluster, engine } = this;
    const start = cluster.historyMs;
    this.takenSinceMs = start;
    const firstSlot = Math.floor(start / cluster.slotMs);
    this.at(start, () => this.slot(firstSlot, true));
    if (this.history) {
      this.at(start, () => this.classify(start));
      if (this.o.reclassifyIntervalMs > 0) {
        const again = (t: number): void => {
          if (t >= cluster.horizonMs) return;
          this.at(t, () => {
            this.classify(t);
            again(t + this.o.reclassifyIntervalMs);
          });
        };
        again(start + this.o.reclassifyIntervalMs);
      }
    }
    this.scheduleNextJob();
    engine.run(cluster.horizonMs, this.o.onProgress, this.o.progressEvery);
    this.accrueTaken(cluster.horizonMs);
  }

  /** Schedules `fn` at `t`, wrapped in the invariant check when asked for. */
  private at(t: number, fn: () => void): void {
    if (!this.o.checkInvariants) this.engine.at(t, fn);
    else
      this.engine.at(t, () => {
        fn();
        this.checkInvariants();
      });
  }

  /** The next time, from now on, that server `s`'s timer of period `periodMs` fires (each server has its own phase). */
  private nextTick(s: number, periodMs: number, salt: number): number {
    const now = this.engine.clock.nowMs();
    const phase = phaseOf(s, salt) * periodMs;
    return phase + Math.ceil((now - phase) / periodMs) * periodMs;
  }

  // ---------------------------------------------------------------------------------------------- primary tenants

  /**
   * Slot `k` begins: every server of a tenant whose utilization changed gets its new primary usage. The node manager
   * acts on it at its next yield tick, the scheduler learns it at the server's next heartbeat (both at once when the
   * kill-cost model says 0).
   */
  private slot(k: number, first: boolean): void {
    const { cluster } = this;
    const touched = new Set<JobRun>();
    const gained: number[] = [];
    const instantYield = this.cost.yieldTickMs === 0;
    const instantHeartbeat = this.cost.heartbeatIntervalMs === 0;
    for (const t of cluster.tenants) {
      const series = t.utilization;
      const last = series.length - 1;
      const now = series[Math.min(k, last)]!;
      if (!first && k > 0 && now === series[Math.min(k - 1, last)]) continue;
      for (const s of t.servers) {
        let u = now + cluster.servers[s]!.offsetPct;
        u = u < 0 ? 0 : u > 100 ? 100 : u;
        const primary = Math.round((this.capMilli[s]! * u) / 100);
        const before = this.primaryMilli[s]!;
        if (primary === before) continue;
        this.changeHeld(s, () => {
          this.primaryMilli[s] = primary;
        });
        // Primary-unaware YARN neither yields nor learns of the primary: its room is unchanged.
        if (!this.aware) continue;
        this.updateRate(s);
        if (instantHeartbeat) this.report(s);
        else this.requestHeartbeat(s);
        if (primary > before) {
          if (instantYield) this.yieldOn(s, touched);
          else this.requestYield(s);
        } else if (instantHeartbeat) gained.push(s);
        this.refreshFree(s);
      }
    }
    // Every server starts out with its room known (primaries equal to the initial 0 were skipped above).
    if (first) for (let s = 0; s < this.nodeIds.length; s++) this.refreshFree(s);
    // Killed tasks ask again first (FIFO keeps their jobs' order), then freed servers heartbeat, then the re-asking
    // jobs look for servers of their own.
    this.reAsk(touched, gained);
    const next = (k + 1) * cluster.slotMs;
    if (next < cluster.horizonMs) this.at(next, () => this.slot(k + 1, false));
  }

  /** After kills: the jobs that lost containers ask again, the servers in `gained` heartbeat, the jobs look for room. */
  private reAsk(touched: Set<JobRun>, gained: readonly number[]): void {
    for (const run of touched) this.updateAsk(run);
    for (const s of gained) this.heartbeat(s);
    for (const run of touched) if (this.runs.has(run.appId)) this.place(run);
  }

  /** Server `s` heartbeats: the scheduler learns its primary usage as it is now. */
  private report(s: number): void {
    const primary = this.primaryMilli[s]!;
    if (this.seenMilli[s] === primary) return;
    this.seenMilli[s] = primary;
    this.liveNodes[s]!.primaryUsage.vcoresMilli = primary;
    this.scheduler.updatePrimaryUsage(this.nodeIds[s]!, { vcoresMilli: primary, memoryMb: 0 });
    this.refreshFree(s);
  }

  /** Server `s`'s next heartbeat (once, however many changes it carries): report, then offer its room. */
  private requestHeartbeat(s: number): void {
    if (this.heartbeatPending[s]) return;
    this.heartbeatPending[s] = 1;
    this.at(this.nextTick(s, this.cost.heartbeatIntervalMs, 11), () => {
      this.heartbeatPending[s] = 0;
      this.report(s);
      this.heartbeat(s);
    });
  }

  /** Server `s` has room again (a container ended): offered at once, or at its next heartbeat. */
  private roomFreed(s: number): void {
    if (this.cost.heartbeatIntervalMs === 0) this.heartbeat(s);
    else this.requestHeartbeat(s);
  }

  /** Server `s`'s next yield tick (once): kill what no longer fits, and let the jobs that lost containers ask again. */
  private requestYield(s: number): void {
    if (this.yieldPending[s]) return;
    this.yieldPending[s] = 1;
    const when = this.cost.yieldTickMs > 0 ? this.nextTick(s, this.cost.yieldTickMs, 12) : this.engine.clock.nowMs();
    this.at(when, () => {
      this.yieldPending[s] = 0;
      const touched = new Set<JobRun>();
      this.yieldOn(s, touched);
      if (touched.size > 0) this.roomFreed(s);
      this.reAsk(touched, []);
    });
  }

  /** The cores (milli) server `s`'s primary wants but cannot have because secondary tasks hold them. */
  private shortfall(s: number): number {
    // A primary-aware node manager runs containers at the lowest CPU weight: the primary gets every core it wants and
    // the tasks slow down instead (`updateRate`).
    if (this.aware) return 0;
    const primary = this.primaryMilli[s]!;
    const over = primary + this.secondaryMilli[s]! - this.capMilli[s]!;
    return over <= 0 ? 0 : over < primary ? over : primary;
  }

  /** Adds the primaries' shortfall since it last changed to its integral. */
  private accrueTaken(nowMs: number): void {
    if (nowMs > this.takenSinceMs) {
      this.takenMilliMs += this.takenMilli * (nowMs - this.takenSinceMs);
      this.takenSinceMs = nowMs;
    }
  }

  /** Runs `change` (to server `s`'s primary or secondary), keeping the primaries' shortfall and its integral. */
  private changeHeld(s: number, change: () => void): void {
    this.accrueTaken(this.engine.clock.nowMs());
    this.takenMilli -= this.shortfall(s);
    change();
    this.takenMilli += this.shortfall(s);
  }

  /**
   * The speed server `s`'s launched tasks run at: all of it while the primary leaves them their cores, else the share
   * it leaves (the primary wins the CPU by weight until the yield tick kills). Reschedules their ends when it changes.
   */
  private updateRate(s: number): void {
    if (!this.cost.throttleSlowdown || !this.aware) return;
    const demand = this.runningTaskMilli[s]!;
    const left = this.capMilli[s]! - this.primaryMilli[s]!;
    const rate = demand <= left ? 1 : Math.max(0, left) / demand;
    if (rate === this.rate[s]) return;
    this.rate[s] = rate;
    const now = this.engine.clock.nowMs();
    for (const a of this.running[s]!) {
      if (a.isAm || !a.launched) continue;
      a.workLeftMs = Math.max(0, a.workLeftMs - (now - a.sinceMs) * a.rate);
      a.sinceMs = now;
      a.rate = rate;
      this.scheduleEnd(a);
    }
  }

  /** The node manager's yield step: kill the youngest attempts until the rest fit beside the primary and reserve. */
  private yieldOn(s: number, touched: Set<JobRun>): void {
    const server = {
      capacityMilli: this.capMilli[s]!,
      primaryMilli: this.primaryMilli[s]!,
      reserveMilli: this.reserveMilli[s]!,
      heldMilli: this.secondaryMilli[s]!,
      taskMilli: this.taskMilli,
    };
    for (const a of yieldVictims(server, this.running[s]!)) {
      // A job manager killed earlier in this step took its job's tasks with it.
      if (!a.alive) continue;
      if (a.isAm) this.killJobManager(a, touched);
      else this.killTask(a, touched);
    }
  }

  /** A task attempt is killed: its work so far is lost and the job manager re-runs the task. */
  private killTask(a: Attempt, touched: Set<JobRun>): void {
    const now = this.engine.clock.nowMs();
    this.endAttempt(a);
    this.taskKills++;
    this.timeByType[a.run.type].kills++;
    this.wastedCoreMs += ((now - a.startMs) * a.milli) / 1000;
    // The job manager re-runs a preempted task; it waits for a container like any runnable task.
    a.run.queue.push(a.task);
    a.run.queuedAtMs.push(now);
    touched.add(a.run);
    this.o.observer?.onTaskKilled?.({
      job: a.run.job,
      vertex: Math.floor(a.task / TASK_STRIDE),
      task: a.task % TASK_STRIDE,
      server: a.server,
      nowMs: now,
    });
  }

  /**
   * A job manager is killed: the resource manager releases every container of its attempt (the running tasks are
   * lost) and starts another attempt, which asks for a container of its own, registers (Algorithm 1 runs again) and
   * recovers the finished tasks from its journal: only the unfinished ones run again.
   */
  private killJobManager(am: Attempt, touched: Set<JobRun>): void {
    const run = am.run;
    const now = this.engine.clock.nowMs();
    this.jobManagerKills++;
    this.wastedCoreMs += ((now - am.startMs) * am.milli) / 1000;
    this.endAttempt(am);
    run.jobManager = undefined;
    for (const a of [...run.attempts]) {
      this.killTask(a, touched);
      if (a.server !== am.server) this.roomFreed(a.server);
    }
    run.decided = false;
    run.allowed = undefined;
    this.placement?.remove(run.appId);
    touched.add(run);
  }

  // ---------------------------------------------------------------------------------------------- jobs

  private scheduleNextJob(): void {
    const job = this.stream.jobs[this.nextJob];
    if (!job || job.submitMs >= this.cluster.horizonMs) return;
    this.at(job.submitMs, () => {
      this.nextJob++;
      this.submit(job);
      this.scheduleNextJob();
    });
  }

  private submit(job: SimJob): void {
    const now = this.engine.clock.nowMs();
    const { vertices } = job.shape;
    const inputsLeft = new Int32Array(vertices.length);
    const tasksLeft = new Int32Array(vertices.length);
    const consumers: number[][] = vertices.map(() => []);
    vertices.forEach((v, i) => {
      inputsLeft[i] = v.inputs.length;
      tasksLeft[i] = v.tasks;
      for (const from of v.inputs) consumers[from]!.push(i);
    });
    // Algorithm 1, line 3, as the resource manager does at registration: the name's last duration against the recent
    // history's thresholds.
    const type = jobTypeOf(this.lastDurationInWindow(job.shape.name), this.recentDurationsMs, this.o.jobTypes);
    const run: JobRun = {
      job,
      appId: `j${job.id}`,
      type,
      inputsLeft,
      tasksLeft,
      consumers,
      queue: [],
      queuedAtMs: [],
      head: 0,
      tasksRemaining: job.shape.totalTasks,
      attempts: new Set(),
      jobManager: undefined,
      decided: false,
      allowed: undefined,
      waitingSinceMs: now,
      waited: false,
    };
    this.runs.set(run.appId, run);
    this.scheduler.addApp(run.appId, job.id);
    vertices.forEach((v, i) => {
      if (v.inputs.length === 0) this.enqueueVertex(run, i);
    });
    if (this.cost.jobManagerMilli > 0) {
      // The resource manager asks for the job manager's container first; the tasks wait for it to register.
      this.updateAsk(run);
      this.place(run);
    } else this.registered(run);
  }

  /** The job manager registered (its DAG's max concurrency) and asks for its first tasks. */
  private registered(run: JobRun): void {
    this.scheduler.setMaxConcurrency(run.appId, run.job.shape.maxConcurrency);
    if (this.placement) {
      // Algorithm 1 runs on the first ask.
      this.placement.register(run.appId, run.type, run.job.shape.maxConcurrency);
      const decision = this.placement.onAsk(run.appId, this.taskMilli);
      if (decision) this.onDecision(run, decision);
    } else {
      run.decided = true;
      this.o.observer?.onJobPlaced?.({ job: run.job, jobType: run.type });
      this.updateAsk(run);
      this.place(run);
    }
  }

  private enqueueVertex(run: JobRun, v: number): void {
    const n = run.job.shape.vertices[v]!.tasks;
    const now = this.engine.clock.nowMs();
    for (let t = 0; t < n; t++) {
      run.queue.push(v * TASK_STRIDE + t);
      run.queuedAtMs.push(now);
    }
  }

  private queued(run: JobRun): number {
    return run.queue.length - run.head;
  }

  /** Whether the job is waiting for a job-manager container. */
  private needsJobManager(run: JobRun): boolean {
    return this.cost.jobManagerMilli > 0 && run.jobManager === undefined;
  }

  /**
   * The job's asks at the resource manager: its job manager's container while it has none, else (once placed) one
   * container per queued task (the job manager's allocate call).
   */
  private updateAsk(run: JobRun): void {
    if (this.needsJobManager(run))
      this.scheduler.setAsks(run.appId, [{ priority: AM_PRIORITY, resource: this.jobManagerResource, count: 1 }]);
    else if (run.decided)
      this.scheduler.setAsks(run.appId, [{ priority: 0, resource: this.taskResource, count: this.queued(run) }]);
    else this.scheduler.setAsks(run.appId, []);
  }

  /** Heartbeats of the free servers the job may use, until its ask is met or they are full. */
  private place(run: JobRun): void {
    if (this.needsJobManager(run)) {
      // The job manager may run anywhere (the history policy restricts only tasks).
      while (run.jobManager === undefined && this.free.size > 0) {
        const s = this.free.at(this.serverRng.int(this.free.size));
        if (this.heartbeat(s) === 0 && this.free.has(s)) break;
      }
      return;
    }
    if (!run.decided || this.queued(run) === 0) return;
    const allowed = run.allowed;
    if (allowed) {
      const n = allowed.length;
      const from = this.serverRng.int(n);
      for (let i = 0; i < n && this.queued(run) > 0; i++) {
        const s = allowed[(from + i) % n]!;
        if (this.free.has(s)) this.heartbeat(s);
      }
      return;
    }
    while (this.queued(run) > 0 && this.free.size > 0) {
      const s = this.free.at(this.serverRng.int(this.free.size));
      // A free server grants at least one container to some job that may use it (this job may use any), or it learns
      // of its primary's growth and leaves the free list: every heartbeat here makes progress. Should neither happen,
      // stop rather than spin.
      if (this.heartbeat(s) === 0 && this.free.has(s)) break;
    }
  }

  /**
   * One node heartbeat: it reports the primary's usage as it is now, and the scheduler grants what fits there.
   * Returns the grants.
   */
  private heartbeat(s: number): number {
    if (this.aware) this.report(s);
    const allocs = this.scheduler.allocateOnNode(this.nodeIds[s]!);
    for (const alloc of allocs) this.grant(alloc, s);
    this.refreshFree(s);
    return allocs.length;
  }

  /** Log-normal container launch time, plus (for a task) the job manager's wait for its next allocate call. */
  private launchDelayMs(task: boolean): number {
    const c = this.cost;
    let ms = c.launchMedianMs > 0 ? c.launchMedianMs * Math.exp(this.launchSigma * this.launchRng.normal(0, 1)) : 0;
    if (task && c.amHeartbeatMs > 0) ms += c.amHeartbeatMs * this.launchRng.next();
    return ms;
  }

  /** A container was granted on server `s`: it is held from now, and its job manager or task starts after launch. */
  private grant(alloc: Allocation, s: number): void {
    const run = this.runs.get(alloc.appId)!;
    const now = this.engine.clock.nowMs();
    const isAm = alloc.priority === AM_PRIORITY;
    let task = JOB_MANAGER;
    if (!isAm) {
      // The scheduler counted the grant against the ask: the job manager gives it its next runnable task.
      task = run.queue[run.head]!;
      this.taskWaitMs += now - run.queuedAtMs[run.head]!;
      run.head++;
      if (run.head > 1024 && run.head * 2 > run.queue.length) {
        run.queue = run.queue.slice(run.head);
        run.queuedAtMs = run.queuedAtMs.slice(run.head);
        run.head = 0;
      }
    }
    const milli = alloc.resource.vcoresMilli;
    const a: Attempt = {
      run,
      task,
      server: s,
      startMs: now,
      containerId: alloc.containerId,
      milli,
      isAm,
      alive: true,
      launched: false,
      workLeftMs: 0,
      sinceMs: now,
      rate: 1,
      version: 0,
    };
    this.running[s]!.add(a);
    this.changeHeld(s, () => {
      this.secondaryMilli[s]! += milli;
    });
    this.liveNodes[s]!.allocated.vcoresMilli += milli;
    if (isAm) {
      run.jobManager = a;
      const delay = this.launchDelayMs(false);
      if (delay > 0) this.at(now + delay, () => this.jobManagerUp(a));
      else this.jobManagerUp(a);
      return;
    }
    run.attempts.add(a);
    this.tasksRun++;
    const vertex = Math.floor(task / TASK_STRIDE);
    const index = task % TASK_STRIDE;
    a.workLeftMs = taskDurationMs(this.stream, run.job, vertex, index);
    this.o.observer?.onTaskStart?.({ job: run.job, vertex, task: index, server: s, nowMs: now });
    const delay = this.launchDelayMs(true);
    if (delay > 0) this.at(now + delay, () => this.launch(a));
    else this.launch(a);
  }

  /** The job manager's container launched: it registers and the job asks for its tasks. */
  private jobManagerUp(a: Attempt): void {
    if (!a.alive) return;
    a.launched = true;
    this.registered(a.run);
  }

  /** A task's container launched: its work starts, at the speed its server's primary leaves it. */
  private launch(a: Attempt): void {
    if (!a.alive) return;
    const s = a.server;
    a.launched = true;
    a.sinceMs = this.engine.clock.nowMs();
    a.rate = this.rate[s]!;
    this.runningTaskMilli[s]! += a.milli;
    this.scheduleEnd(a);
    this.updateRate(s);
  }

  /** Schedules a launched task's end from its work left and speed (none while it is stopped). */
  private scheduleEnd(a: Attempt): void {
    const version = ++a.version;
    if (a.rate <= 0) return;
    this.at(a.sinceMs + a.workLeftMs / a.rate, () => {
      if (a.alive && a.version === version) this.finish(a);
    });
  }

  /** Releases a container (it ended or was killed). */
  private endAttempt(a: Attempt): void {
    const s = a.server;
    a.alive = false;
    this.scheduler.release(a.containerId);
    this.running[s]!.delete(a);
    a.run.attempts.delete(a);
    this.changeHeld(s, () => {
      this.secondaryMilli[s]! -= a.milli;
    });
    this.liveNodes[s]!.allocated.vcoresMilli -= a.milli;
    if (a.launched && !a.isAm) {
      this.runningTaskMilli[s]! -= a.milli;
      this.updateRate(s);
    }
    this.refreshFree(s);
  }

  /** A task attempt ran to its end. */
  private finish(a: Attempt): void {
    this.endAttempt(a);
    this.tasksCompleted++;
    const run = a.run;
    const v = Math.floor(a.task / TASK_STRIDE);
    this.o.observer?.onTaskEnded?.({
      job: run.job,
      vertex: v,
      task: a.task % TASK_STRIDE,
      server: a.server,
      nowMs: this.engine.clock.nowMs(),
    });
    run.tasksRemaining--;
    let grew = false;
    if (--run.tasksLeft[v]! === 0) {
      for (const c of run.consumers[v]!) {
        if (--run.inputsLeft[c]! === 0) {
          this.enqueueVertex(run, c);
          grew = true;
        }
      }
    }
    if (run.tasksRemaining === 0) this.jobDone(run);
    else if (grew) this.updateAsk(run);
    // The server has room again: its next heartbeat offers it (to the FIFO-first job that may use it).
    this.roomFreed(a.server);
    if (grew && run.tasksRemaining > 0) this.place(run);
  }

  private jobDone(run: JobRun): void {
    const now = this.engine.clock.nowMs();
    const durationMs = now - run.job.submitMs;
    const am = run.jobManager;
    if (am) {
      // The job manager unregisters and exits: its container is released.
      this.endAttempt(am);
      run.jobManager = undefined;
      this.roomFreed(am.server);
    }
    this.scheduler.removeApp(run.appId);
    this.placement?.remove(run.appId);
    this.runs.delete(run.appId);
    this.jobsFinished++;
    const figures = this.timeByType[run.type];
    figures.jobs++;
    figures.sumMs += durationMs;
    this.lastRun.set(run.job.shape.name, { durationMs, seq: this.jobsFinished });
    this.remember(durationMs);
    this.o.observer?.onJobFinished?.({ job: run.job, jobType: run.type, durationMs });
  }

  /**
   * The duration of the last run of `name` if it is among the last `jobHistoryWindow` finished jobs, as the resource
   * manager finds it in its history query; undefined (a job never seen, so medium) when older or never run.
   */
  private lastDurationInWindow(name: string): number | undefined {
    const last = this.lastRun.get(name);
    return last && last.seq > this.jobsFinished - this.o.jobHistoryWindow ? last.durationMs : undefined;
  }

  /**
   * Adds a finished job's duration to the last `jobHistoryWindow` (what the resource manager's history query returns),
   * kept both in arrival order (to evict the oldest) and sorted: `jobTypeOf` sorts its input, and sorting sorted input
   * is linear, where sorting the ring would cost O(n log n) per job.
   */
  private remember(durationMs: number): void {
    const sorted = this.recentDurationsMs;
    if (this.recentRing.length < this.o.jobHistoryWindow) this.recentRing.push(durationMs);
    else {
      const evicted = this.recentRing[this.recentNext]!;
      this.recentRing[this.recentNext] = durationMs;
      this.recentNext = (this.recentNext + 1) % this.o.jobHistoryWindow;
      sorted.splice(lowerBound(sorted, evicted), 1);
    }
    sorted.splice(lowerBound(sorted, durationMs), 0, durationMs);
  }

  // ---------------------------------------------------------------------------------------------- free servers

  private refreshFree(s: number): void {
    const room = this.capMilli[s]! - this.seenMilli[s]! - this.reserveMilli[s]! - this.secondaryMilli[s]!;
    this.free.set(s, room >= this.taskMilli);
  }

  // ---------------------------------------------------------------------------------------------- Algorithm 1

  /**
   * Classifies the tenants on their average-server series over the last `historyMs` before `nowMs` (seeds/004 section
   * 4.1: periodically, on the most recent history). Tenants with no slot in the window are left unclassified.
   */
  private classify(nowMs: number): void {
    const { cluster } = this;
    const slotMs = cluster.slotMs;
    const to = Math.floor(nowMs / slotMs);
    const from = Math.max(0, to - Math.floor(cluster.historyMs / slotMs));
    const featured: FeaturedTenant[] = [];
    if (to > from) {
      const timesMs: number[] = [];
      for (let k = from; k < to; k++) timesMs.push(k * slotMs);
      for (const t of cluster.tenants) {
        if (t.servers.length === 0) continue;
        const cpuPct = Array.from(t.utilization.subarray(from, Math.min(to, t.utilization.length)));
        if (cpuPct.length === 0) continue;
        const series: UtilizationSeries = {
          name: t.id,
          stepSec: slotMs / 1000,
          startMs: timesMs[0]!,
          timesMs: cpuPct.length === timesMs.length ? timesMs : timesMs.slice(0, cpuPct.length),
          cpuPct,
        };
        featured.push({
          tenantId: t.id,
          servers: t.servers.map((s) => this.nodeIds[s]!),
          features: tenantFeatures(series, this.o.classifier),
        });
      }
    }
    const tenantClasses = featured.length > 0 ? classifyFeatures(featured, this.o.classifier, this.kmeansRng) : [];
    this.classViews!.setClasses(tenantClasses);
    this.o.observer?.onClassified?.({ classes: tenantClasses, nowMs });
    this.classifications++;
  }

  /** Acts on what the placement decided for a job: start it on its classes' servers (or any), or keep it waiting. */
  private onDecision(run: JobRun, decision: PlacementDecision): void {
    this.o.observer?.onDecision?.({ job: run.job, jobType: run.type, decision, nowMs: this.engine.clock.nowMs() });
    if (decision.kind === "wait") {
      if (!run.waited) {
        run.waited = true;
        this.jobsWaited++;
        this.scheduleRetry();
      }
      return;
    }
    run.decided = true;
    if (decision.kind === "classes") {
      // Heartbeats visit the servers the scheduler policy now allows the job, in the order the placement gave them.
      const assigned = this.history!.assigned(run.appId)!;
      const servers: number[] = [];
      for (const id of assigned) {
        const s = this.serverIndex.get(id);
        if (s !== undefined) servers.push(s);
      }
      run.allowed = Int32Array.from(servers);
      this.o.observer?.onJobPlaced?.({ job: run.job, jobType: run.type, classIds: decision.classIds, servers });
    } else {
      this.jobsOpenedToAll++;
      this.o.observer?.onJobPlaced?.({ job: run.job, jobType: run.type });
    }
    this.updateAsk(run);
    this.place(run);
  }

  /** While jobs wait for a class, the resource manager's monitor tick retries them every `retryIntervalMs`. */
  private scheduleRetry(): void {
    if (this.retryScheduled) return;
    this.retryScheduled = true;
    this.at(this.engine.clock.nowMs() + this.o.retryIntervalMs, () => {
      this.retryScheduled = false;
      let waiting = false;
      for (const decision of this.placement!.retryWaiting()) {
        const run = this.runs.get(decision.appId);
        if (!run) continue;
        if (decision.kind === "wait") waiting = true;
        this.onDecision(run, decision);
      }
      if (waiting) this.scheduleRetry();
    });
  }

  // ---------------------------------------------------------------------------------------------- checks and figures

  private checkInvariants(): void {
    const now = this.engine.clock.nowMs();
    const fail = (why: string): never => {
      throw new HarvestError("INTERNAL", `compute simulation invariant broken at ${now} ms: ${why}`);
    };
    for (let s = 0; s < this.nodeIds.length; s++) {
      const id = this.nodeIds[s]!;
      const secondary = this.secondaryMilli[s]!;
      // What the node manager lets Harvest hold once its yield tick has run (the scheduler may have granted more on a
      // stale view of the primary, or the primary grown, since: then a tick is pending).
      const allowance = this.capMilli[s]! - (this.aware ? this.primaryMilli[s]! : 0) - this.reserveMilli[s]!;
      if (!this.yieldPending[s] && secondary > Math.max(0, allowance))
        fail(
          `server ${id} runs ${secondary} secondary milli-cores with only ${allowance} harvestable and no yield due`,
        );
      if (this.aware && !this.heartbeatPending[s] && this.seenMilli[s] !== this.primaryMilli[s])
        fail(`server ${id}: the scheduler's primary usage is stale with no heartbeat due`);
      let held = 0;
      let runningTasks = 0;
      for (const a of this.running[s]!) {
        if (!a.alive) fail(`server ${id} lists an ended container ${a.containerId}`);
        held += a.milli;
        if (a.launched && !a.isAm) runningTasks += a.milli;
      }
      if (secondary !== held) fail(`server ${id} counts ${secondary} milli-cores for containers holding ${held}`);
      if (runningTasks !== this.runningTaskMilli[s])
        fail(`server ${id} counts ${this.runningTaskMilli[s]} running milli-cores for ${runningTasks}`);
      const view = this.scheduler.nodeView(id)!;
      if (view.allocated.vcoresMilli !== secondary)
        fail(`server ${id}: the scheduler has ${view.allocated.vcoresMilli} allocated, we ${secondary}`);
      if (view.primaryUsage.vcoresMilli !== this.seenMilli[s])
        fail(`server ${id}: the scheduler's primary usage differs from what it was told`);
      const live = this.liveNodes[s]!;
      const want = liveNodeOf(view, this.aware ? this.o.reserveFraction : 0);
      if (
        live.nodeId !== want.nodeId ||
        live.capacity.vcoresMilli !== want.capacity.vcoresMilli ||
        live.primaryUsage.vcoresMilli !== want.primaryUsage.vcoresMilli ||
        live.allocated.vcoresMilli !== want.allocated.vcoresMilli ||
        live.reserveMilli !== want.reserveMilli
      )
        fail(`server ${id}: the placement's live node differs from the scheduler's view`);
      const free = this.capMilli[s]! - this.seenMilli[s]! - this.reserveMilli[s]! - secondary >= this.taskMilli;
      if (free !== this.free.has(s)) fail(`server ${id} is ${free ? "missing from" : "wrongly in"} the free list`);
    }
    let taken = 0;
    for (let s = 0; s < this.nodeIds.length; s++) taken += this.shortfall(s);
    if (taken !== this.takenMilli)
      fail(`the primaries' shortfall is ${taken} milli-cores but ${this.takenMilli} is kept`);
    for (const run of this.runs.values()) {
      const want = this.needsJobManager(run) ? 1 : run.decided ? this.queued(run) : 0;
      if (this.scheduler.outstanding(run.appId) !== want)
        fail(
          `job ${run.appId} should ask for ${want} containers but asks for ${this.scheduler.outstanding(run.appId)}`,
        );
      for (const a of run.attempts) if (!a.alive) fail(`job ${run.appId} lists an ended attempt ${a.containerId}`);
    }
  }

  result(wallMs: number): ComputeRunResult {
    const { cluster } = this;
    const byType = {} as Record<SimJobType, JobTypeFigures>;
    const killsByType = {} as Record<SimJobType, number>;
    let sumMs = 0;
    for (const type of ["short", "medium", "long"] as const) {
      const f = this.timeByType[type];
      byType[type] = { jobs: f.jobs, avgJobTimeS: f.jobs > 0 ? f.sumMs / f.jobs / 1000 : 0 };
      killsByType[type] = f.kills;
      sumMs += f.sumMs;
    }
    const events = this.engine.events;
    return {
      level: cluster.level,
      servers: cluster.servers.length,
      days: (cluster.horizonMs - cluster.historyMs) / DAY_MS,
      seed: this.o.seed,
      traces: cluster.source,
      policy: this.o.policy,
      jobs: this.jobsFinished,
      avgJobTimeS: this.jobsFinished > 0 ? sumMs / this.jobsFinished / 1000 : 0,
      byType,
      tasksRun: this.tasksRun,
      taskKills: this.taskKills,
      jobManagerKills: this.jobManagerKills,
      avgTaskWaitS: this.tasksRun > 0 ? this.taskWaitMs / this.tasksRun / 1000 : 0,
      wastedCoreHours: this.wastedCoreMs / 3_600_000,
      jobsWaited: this.jobsWaited,
      primaryCoreHoursTaken: this.takenMilliMs / 1000 / 3_600_000,
      events,
      wallMs,
      jobsSubmitted: this.nextJob,
      jobsUnfinished: this.runs.size,
      tasksCompleted: this.tasksCompleted,
      jobsOpenedToAll: this.jobsOpenedToAll,
      killsByType,
      classifications: this.classifications,
      classes: this.classViews?.classViews().map((v) => `${v.classId}: ${v.servers.length}`) ?? [],
      eventsPerSec: wallMs > 0 ? events / (wallMs / 1000) : 0,
    };
  }
}

/** The first index of ascending `sorted` whose value is >= `v`. */
function lowerBound(sorted: readonly number[], v: number): number {
  let lo = 0;
  let hi = sorted.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (sorted[mid]! < v) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}
