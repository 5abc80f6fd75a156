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
import {
  DrainTracker,
  LifetimeNodeChoice,
  OraclePredictor,
  resolveDrainOptions,
  resolveNodeChoiceOptions,
} from "../resourcemanager/index.js";
import type {
  AppView,
  ContainerKey,
  DrainContainer,
  DrainOptions,
  LifetimePredictor,
  NodeChoiceKind,
  NodeChoiceOptions,
  NodeView,
  SchedulerPolicy,
} from "../resourcemanager/index.js";
import type { EngineProgress } from "./engine.js";
import { taskDurationMs } from "./jobs.js";
import type { JobStream, SimJob } from "./jobs.js";
import { DAY_MS } from "./model.js";
import type { SimCluster } from "./model.js";
import type { ComputePolicy, ComputeResult, JobTypeFigures, SimJobType } from "./results.js";
import {
  AdmissionOutlook,
  AdmissionQueue,
  JobDemandModel,
  DemandProfile,
  LifetimeModel,
  neverAdmissible,
  resolveAdmissionOptions,
  resolveLifetimeOptions,
  thresholdOf,
} from "../resourcemanager/index.js";
import type {
  AdmissionCandidate,
  AdmissionOptions,
  AdmissionPolicy,
  AdmissionServer,
  AdmittedJob,
  LifetimeOptions,
  PrimaryDemandSource,
  QueuedJob,
} from "../resourcemanager/index.js";
import { harvestableCoreMs } from "./jobs.js";
import { isHarvestError } from "../common/errors.js";

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
   * Node choice by container lifetimes (seeds/002, sections 4.2 and 4.3): "stock" leaves it to the placement policy (a
   * random free server, or the job's classes from a random start); "nilas" and "lava" wrap the placement policy in the
   * resource manager's `LifetimeNodeChoice` and offer the servers best first. Absent or "stock": the figures of a run
   * without this option, figure for figure.
   * @default "stock"
   */
  nodeChoice?: NodeChoiceKind;
  /**
   * NILAS's buckets, LAVA's classes and the gate's wait (`NodeChoiceOptions`; the resource manager's defaults).
   * @default {}
   */
  nodeChoiceOptions?: Partial<Omit<NodeChoiceOptions, "kind">>;
  /**
   * Where node choice and drains get container lifetimes: "learned" (a `LifetimeModel` fed as the resource manager
   * feeds its own: every completed task's run time, every finished job's duration) or "oracle" (`OraclePredictor`:
   * each task's true duration from the stream; see `runCompute` for what it does not know).
   * @default "learned"
   */
  lifetimes?: LifetimeSource;
  /**
   * Whole-server reclaims (a primary's spike to the whole server, a reimage without notice), see
   * {@link ReclaimOptions}.
   * @default undefined (none)
   */
  reclaims?: ReclaimOptions;
  /**
   * Planned reimages announced ahead, met with or without a graceful drain, see {@link PlannedReimageOptions}.
   * @default undefined (none)
   */
  reimages?: PlannedReimageOptions;
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
  /**
   * Admission control (seeds/003; see {@link SimAdmissionOptions}): arriving jobs wait in the resource manager's
   * `AdmissionQueue` until the policy admits them. Absent or policy "none": every job is submitted on arrival, as
   * without admission control, figure for figure.
   * @default undefined
   */
  admission?: SimAdmissionOptions;
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
  Omit<ComputeOptions, "onProgress" | "observer" | "weights" | "killCost" | "admission" | "reclaims" | "reimages">
> &
  Pick<ComputeOptions, "onProgress" | "observer"> & {
    weights: ClassWeights;
    killCost: KillCostModel;
    admission?: ResolvedSimAdmissionOptions;
    reclaims: ResolvedReclaimOptions | undefined;
    reimages: ResolvedPlannedReimageOptions | undefined;
  };

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
  /** The node choice and the lifetimes it was given. */
  nodeChoice: NodeChoiceKind;
  lifetimes: LifetimeSource;
  /**
   * Time-averaged share of servers with no secondary container (job managers count), over the experiment; a server
   * away for a reclaim or reimage has none.
   */
  emptyServerShare: number;
  /** The same among the servers in service whose primary (and reserve) leaves room for a task; 0 when none ever did. */
  emptyShareWithRoom: number;
  /** Whole-server reclaims, the share of them that found the server empty, and the core-hours their kills lost. */
  reclaims: number;
  reclaimsHittingEmpty: number;
  reclaimKilledCoreHours: number;
  /** What planned reimages cost (only with `reimages`). `taskKills` and `wastedCoreHours` count these kills too. */
  reimages?: ReimageFigures;
  /** Simulation events per wall-clock second. */
  eventsPerSec: number;
  /** The admission policy ("none" without admission control) and the threshold it compared with (1 for none). */
  admission: AdmissionPolicy;
  admissionThreshold: number;
  /**
   * Jobs the admission policy let in, jobs it refused on arrival because even an idle cluster would not admit them
   * (`neverAdmissible`: never queued, never run, not in `jobs`), and jobs still waiting at the horizon. Without
   * admission control every arrival counts as admitted at once.
   */
  jobsAdmitted: number;
  jobsRejected: number;
  jobsQueuedAtEnd: number;
  /** Average wait in the admission queue of the admitted jobs, s (also inside their job times). */
  avgAdmissionWaitS: number;
  /**
   * Core-hours held by secondary containers (tasks and job managers, from grant to release or the horizon, launches
   * included) over the experiment period.
   */
  secondaryCoreHours: number;
  /** Core-hours harvestable over the experiment period: capacity - primary - reserve, floored at 0 per server. */
  harvestableCoreHours: number;
  /** secondaryCoreHours / harvestableCoreHours (above 1 only under stock-unaware, which takes the primary's cores). */
  harvestedUtilization: number;
  /**
   * The SLA metric of admission control: the core-hours killed containers held up to their kill
   * (`wastedCoreHours`) over `secondaryCoreHours`, i.e. the share of what secondary containers held that kills threw
   * away. 0 when nothing ran.
   */
  killedTaskHoursFraction: number;
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
    nodeChoice: options.nodeChoice ?? "stock",
    nodeChoiceOptions: options.nodeChoiceOptions ?? {},
    lifetimes: options.lifetimes ?? "learned",
    reclaims:
      options.reclaims === undefined
        ? undefined
        : resolveReclaims(cluster, options.seed ?? cluster.seed, options.reclaims),
    reimages: options.reimages === undefined ? undefined : resolveReimages(cluster, options.reimages),
    ...(options.onProgress !== undefined ? { onProgress: options.onProgress } : {}),
    ...(options.observer !== undefined ? { observer: options.observer } : {}),
    ...(options.admission !== undefined ? { admission: resolveSimAdmissionOptions(options.admission) } : {}),
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
  checkNodeChoice(o);
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
 * - Admission control (seeds/003, `admission`): an arriving job is refused when even the idle cluster would not
 *   admit it (`neverAdmissible`), else waits in the resource manager's `AdmissionQueue` (strict order unless
 *   `backfill`), which is passed over on every arrival, every admitted job's end and every `tickMs` while jobs wait;
 *   an admitted job is submitted then, its job time still counting from its arrival. The policy sees every server in
 *   service with its capacity, the scheduler's reserve, what it holds, its primary's usage as last reported and its
 *   primary's `DemandProfile` from the history before the run (by time of day for the tenants the classifier calls
 *   periodic), and every admitted job not yet ended with its demand (job manager + max concurrency x task, at most the
 *   pool) until its end re-predicted by the resource manager's `LifetimeModel` from its uptime (learned from the
 *   admitted jobs' run times, admission to end). See `ComputeSim.startAdmission` and `evaluateAdmission`.
 *   `killedTaskHoursFraction` and `harvestedUtilization` are kept under every policy.
 * - Jobs still running at the horizon are not in the averages (`jobsUnfinished`).
 * - Stock-unaware: the stock policy's scheduler with no reserve and the primary's usage never reported (0), so it
 *   grants up to each server's full capacity; no yield step runs and its containers share the CPU with the primary
 *   as equals, so no task is ever killed or slowed (the tasks are taken to win their share) and job times are the
 *   jobs' times without interference from the primary. The primary pays: on every server, at every moment, it is short
 *   of min(primary, max(0, primary + secondary held - capacity)) cores, integrated exactly over the run (the primary is
 *   flat within a slot; the integral steps whenever a slot begins or a task starts or ends) as
 *   `primaryCoreHoursTaken`. The same integral is kept under the other policies, where yielding makes it 0.
 * - Lifetimes (seeds/002): under `nodeChoice` "nilas" or "lava" the placement policy is wrapped in the resource
 *   manager's `LifetimeNodeChoice`, told of every grant and release by the scheduler's listener and ticked every
 *   `retryIntervalMs`; where stock draws a random free server, the free servers that fit the job's next container (in
 *   its classes under history; for a job manager, every server in service with room for one) heartbeat in the order
 *   of `order`, best first, so that the gate takes the container on the best one. The learned model is fed as the
 *   resource manager feeds its own: each completed task's run time (launch to end) under its job's name and vertex,
 *   each finished job's duration. The oracle knows each task's duration at full speed, not its launch (under a second)
 *   nor its slowdown by a primary that out-competes it; for a job manager it knows nothing (its job's remaining time
 *   depends on the run itself) and asks the model. The empty-server share counts job managers as containers and a
 *   server away for a reclaim or a reimage as empty. Reclaims and planned reimages: see `ReclaimOptions` and
 *   `PlannedReimageOptions`; their kills count in `taskKills`, `jobManagerKills` and `wastedCoreHours` too.
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
export const Stream = { Classes: 1, Kmeans: 2, Servers: 3, Launch: 4, Reclaims: 5, Reimages: 6 } as const;

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
  /** When a task launched (its run time counts from here); undefined until then and for job managers. */
  launchedMs?: number;
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
      this.withNodeChoice(this.history ?? new StockSchedulerPolicy()),
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
    this.startLifetimes();
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
    this.scheduleServerEvents();
    engine.run(cluster.horizonMs, this.o.onProgress, this.o.progressEvery);
    this.accrueTaken(cluster.horizonMs);
    this.accrueOccupancy(cluster.horizonMs);
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
      // The heartbeat reports the primary first, when the policy is primary-aware (stock-unaware never learns it).
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
    this.noteOccupancy(s);
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
      // With admission control the job waits in the admission queue, which submits it once admitted.
      if (this.o.admission !== undefined && this.o.admission.policy !== "none") this.arrive(job);
      else this.submit(job);
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
    if (this.nodeChoice) {
      this.placeBestFirst(run);
      return;
    }
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
    for (const alloc of allocs) {
      this.grant(alloc, s);
      if (this.nodeChoice) this.settleKey(alloc);
    }
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
    a.launchedMs = a.sinceMs;
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
    this.countHeld(a);
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
    this.taskCompleted(a);
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
    this.jobCompleted(run, durationMs, am);
    this.admittedJobDone(run);
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
    this.free.set(s, room >= this.taskMilli && this.inService(s));
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

  // ---------------------------------------------------------------------------------------------- lifetimes
  // Node choice by lifetimes (NILAS, LAVA), whole-server reclaims, planned reimages and their drains (LARS), and the
  // empty-server figures. Set up by the constructor (`withNodeChoice`, `startLifetimes`): field initializers run before
  // it has its options.

  /** The lifetime model, fed as the resource manager feeds its own (undefined when nothing asks it). */
  private lifetimeModel: LifetimeModel | undefined;
  /** What node choice and drains ask: the model, or the oracle in front of it. */
  private predictor: LifetimePredictor | undefined;
  /** NILAS or LAVA around the placement policy; undefined under the stock node choice. */
  private nodeChoice: LifetimeNodeChoice | undefined;
  /**
   * Per job: task containers granted in the heartbeat under way whose task `grant` has not taken from the queue yet.
   * The scheduler tells its listener of a grant before the simulator assigns the task, so the task a grant will run
   * is the queue's head plus this many.
   */
  private readonly keysInFlight = new Map<string, number>();
  /** Jobs with a retry pending after the node choice's gate declined them (see `placeBestFirst`). */
  private readonly gateRetries = new Map<string, number>();
  /** While true, the node choice's source lists every server in service (for `tick`), not only those with room. */
  private tickingAll = false;
  /** Per server: away (a reclaim or a reimage) until `downUntilMs`; draining for the reimage at `drainForMs`. */
  private down = new Uint8Array(0);
  private downUntilMs = new Float64Array(0);
  private draining = new Uint8Array(0);
  private drainForMs = new Float64Array(0);
  private drains: DrainTracker | undefined;
  /** Per server: no secondary container; in service, with room for a task beside its primary and reserve. */
  private emptyFlag = new Uint8Array(0);
  private roomFlag = new Uint8Array(0);
  private emptyCount = 0;
  private roomCount = 0;
  private emptyRoomCount = 0;
  /** Integrals (server-ms) of the counts above since the experiment began, up to `occupancySinceMs`. */
  private emptyMs = 0;
  private roomMs = 0;
  private emptyRoomMs = 0;
  private occupancySinceMs = 0;
  private reclaimCount = 0;
  private reclaimsOnEmpty = 0;
  private reclaimKilledCoreMs = 0;
  private readonly reimageTally = {
    reimages: 0,
    containersAtNotice: 0,
    preempted: 0,
    preemptedCoreMs: 0,
    killedAtReimage: 0,
    killedAtReimageCoreMs: 0,
    finishedOnTheirOwn: 0,
  };

  /**
   * Builds the lifetime model and predictor when node choice or a drain asks for them, and wraps `inner` (the
   * placement policy) in NILAS or LAVA as the resource manager does (inside any power gate; the simulator has none).
   */
  private withNodeChoice(inner: SchedulerPolicy): SchedulerPolicy {
    const o = this.o;
    if (o.nodeChoice !== "stock" || (o.reimages !== undefined && o.reimages.drain !== "none")) {
      this.lifetimeModel = new LifetimeModel();
      this.predictor = o.lifetimes === "oracle" ? new OraclePredictor(this.lifetimeModel) : this.lifetimeModel;
    }
    if (o.nodeChoice === "stock") return inner;
    this.nodeChoice = new LifetimeNodeChoice(
      inner,
      {
        nodes: () => this.nodeChoiceNodes(),
        keyOf: (app, priority) => this.keyOfNext(app.appId, priority),
        node: (id) => this.scheduler.nodeView(id),
      },
      this.predictor!,
      { ...o.nodeChoiceOptions, kind: o.nodeChoice },
      this.engine.clock,
    );
    return this.nodeChoice;
  }

  /** Per-server state of reclaims, reimages and the empty-server figures; the node choice hears of every container. */
  private startLifetimes(): void {
    const n = this.nodeIds.length;
    this.down = new Uint8Array(n);
    this.downUntilMs = new Float64Array(n);
    this.draining = new Uint8Array(n);
    this.drainForMs = new Float64Array(n);
    this.emptyFlag = new Uint8Array(n).fill(1);
    this.emptyCount = n;
    this.roomFlag = new Uint8Array(n);
    for (let s = 0; s < n; s++) {
      if (this.capMilli[s]! - this.reserveMilli[s]! < this.taskMilli) continue;
      this.roomFlag[s] = 1;
      this.roomCount++;
      this.emptyRoomCount++;
    }
    this.occupancySinceMs = this.cluster.historyMs;
    const reimages = this.o.reimages;
    if (reimages && reimages.drain !== "none") this.drains = new DrainTracker(reimages.drainOptions);
    const choice = this.nodeChoice;
    if (choice)
      this.scheduler.setListener({
        granted: (alloc) =>
          choice.onGranted({
            containerId: alloc.containerId,
            nodeId: alloc.nodeId,
            key: this.keyOfGrant(alloc),
            startMs: this.engine.clock.nowMs(),
            resource: alloc.resource,
          }),
        released: (alloc) => choice.onReleased(alloc.containerId),
      });
  }

  /** Schedules the node choice's upkeep, the reclaims and the planned reimages (none of them under plain stock). */
  private scheduleServerEvents(): void {
    const { cluster } = this;
    const choice = this.nodeChoice;
    if (choice) {
      // The resource manager's monitor tick (`retryIntervalMs` models it here too): LAVA's deadlines and fill.
      const tick = (t: number): void => {
        if (t >= cluster.horizonMs) return;
        this.at(t, () => {
          this.tickingAll = true;
          choice.tick(t);
          this.tickingAll = false;
          tick(t + this.o.retryIntervalMs);
        });
      };
      tick(cluster.historyMs + this.o.retryIntervalMs);
    }
    const reclaims = this.o.reclaims;
    if (reclaims)
      for (const e of reclaims.events)
        this.at(e.atMs, () =>
          this.reclaim(reclaims.choose === "emptiest" ? this.emptiest(e.server) : e.server, reclaims.durationMs),
        );
    const reimages = this.o.reimages;
    if (reimages)
      for (const e of reimages.events) {
        if (reimages.drain !== "none")
          this.at(Math.max(cluster.historyMs, e.atMs - reimages.noticeMs), () => this.startDrain(e));
        this.at(e.atMs, () => this.reimage(e));
      }
  }

  /** Whether server `s` may receive containers: neither away nor draining. */
  private inService(s: number): boolean {
    return this.down.length === 0 || (this.down[s] === 0 && this.draining[s] === 0);
  }

  /** Server `s`'s headroom as the scheduler sees it (capacity - reported primary - reserve - held), milli-cores. */
  private roomMilli(s: number): number {
    return this.capMilli[s]! - this.seenMilli[s]! - this.reserveMilli[s]! - this.secondaryMilli[s]!;
  }

  /** The smallest container any job asks for: a task, or a job manager's. */
  private minAskMilli(): number {
    const am = this.cost.jobManagerMilli;
    return am > 0 && am < this.taskMilli ? am : this.taskMilli;
  }

  /**
   * The nodes the node choice weighs (its `NodeChoiceSource.nodes`): those in service with room for the smallest ask
   * (a node without cannot take any container, so it is no rival), or, for its `tick`, every node in service.
   */
  private *nodeChoiceNodes(): IterableIterator<NodeView> {
    const need = this.minAskMilli();
    for (let s = 0; s < this.nodeIds.length; s++) {
      if (!this.inService(s) || (!this.tickingAll && this.roomMilli(s) < need)) continue;
      const view = this.scheduler.nodeView(this.nodeIds[s]!);
      if (view) yield view;
    }
  }

  /** What the predictor is told of task `task` (vertex x TASK_STRIDE + index) of `run`. */
  private taskKey(run: JobRun, task: number): ContainerKey {
    const v = Math.floor(task / TASK_STRIDE);
    const key: ContainerKey = { job: run.job.shape.name, vertex: run.job.shape.vertices[v]!.name, isJobManager: false };
    // The oracle's truth: the task's duration at full speed (its launch and any slowdown by the primary are not in it).
    if (this.o.lifetimes === "oracle") key.trueLifetimeMs = taskDurationMs(this.stream, run.job, v, task % TASK_STRIDE);
    return key;
  }

  /**
   * What the predictor is told of `run`'s job manager. The oracle knows no truth for it (a job's remaining time
   * depends on the run under way), so it asks the model: the job's past durations.
   */
  private jobManagerKey(run: JobRun): ContainerKey {
    return { job: run.job.shape.name, vertex: "", isJobManager: true };
  }

  /** The key of the next container of `appId`'s ask at `priority` (the node choice's `keyOf`). */
  private keyOfNext(appId: string, priority: number): ContainerKey {
    const run = this.runs.get(appId);
    if (!run) return { job: "", vertex: "", isJobManager: priority === AM_PRIORITY };
    if (priority === AM_PRIORITY) return this.jobManagerKey(run);
    const i = run.head + (this.keysInFlight.get(appId) ?? 0);
    const task = run.queue[i] ?? run.queue[run.head];
    return task === undefined ? { job: run.job.shape.name, vertex: "", isJobManager: false } : this.taskKey(run, task);
  }

  /**
   * The key of a container the scheduler just granted (its listener runs inside the heartbeat, before `grant` gives
   * the container its task): the task it will run, counted in `keysInFlight` until `settleKey`. A job manager that
   * registers inside the same heartbeat (zero launch time) may take a task in between: the keys of that heartbeat's
   * tasks of one job are then permuted among them.
   */
  private keyOfGrant(alloc: Allocation): ContainerKey {
    const key = this.keyOfNext(alloc.appId, alloc.priority);
    if (alloc.priority !== AM_PRIORITY)
      this.keysInFlight.set(alloc.appId, (this.keysInFlight.get(alloc.appId) ?? 0) + 1);
    return key;
  }

  /** `grant` gave a task container its task: it is no longer in flight. */
  private settleKey(alloc: Allocation): void {
    if (alloc.priority === AM_PRIORITY) return;
    const n = (this.keysInFlight.get(alloc.appId) ?? 0) - 1;
    if (n > 0) this.keysInFlight.set(alloc.appId, n);
    else this.keysInFlight.delete(alloc.appId);
  }

  /**
   * `place` under NILAS or LAVA: the servers that could take the job's next container now (in service with room for
   * it, and in the job's classes under history), ranked by the node choice's `order` and heartbeating best first, so
   * that its gate takes each container on the best one. Each server heartbeats once: its rank depends only on its own
   * containers, so the order stays right for those not visited yet. The gate may still decline (LAVA: only recycling
   * servers of the container's class or lower are left); it lets any server take an ask declined for `waitMs`, and
   * the resource manager's servers heartbeat every second, so the job tries again after that wait (twice at most
   * without a grant: a job that cannot be placed for another reason waits for the next change, as under stock).
   */
  private placeBestFirst(run: JobRun): void {
    const choice = this.nodeChoice!;
    const am = this.needsJobManager(run);
    if (!am && (!run.decided || this.queued(run) === 0)) return;
    const need = am ? this.cost.jobManagerMilli : this.taskMilli;
    const servers: number[] = [];
    if (am) {
      for (let s = 0; s < this.nodeIds.length; s++) if (this.inService(s) && this.roomMilli(s) >= need) servers.push(s);
    } else if (run.allowed) {
      for (const s of run.allowed) if (this.free.has(s)) servers.push(s);
    } else for (let i = 0; i < this.free.size; i++) servers.push(this.free.at(i));
    if (servers.length === 0) return;
    // Ties keep their order: by server index, whatever order the free list is in.
    servers.sort((a, b) => a - b);
    const views = servers.map((s) => this.scheduler.nodeView(this.nodeIds[s]!)!);
    const app: AppView = { appId: run.appId, order: run.job.id, maxConcurrency: run.job.shape.maxConcurrency };
    const hungry = (): boolean =>
      this.runs.get(run.appId) === run && (am ? this.needsJobManager(run) : run.decided && this.queued(run) > 0);
    const queuedBefore = this.queued(run);
    for (const view of choice.order(app, am ? AM_PRIORITY : 0, views)) {
      if (!hungry()) break;
      this.heartbeat(this.serverIndex.get(view.nodeId)!);
    }
    if (!hungry() || !servers.some((s) => this.inService(s) && this.roomMilli(s) >= need)) {
      this.gateRetries.delete(run.appId);
      return;
    }
    const progressed = !am && this.queued(run) < queuedBefore;
    const tries = progressed ? 0 : (this.gateRetries.get(run.appId) ?? 0);
    if (tries >= 2) return;
    this.gateRetries.set(run.appId, tries + 1);
    this.at(this.engine.clock.nowMs() + choice.options.waitMs + 1, () => {
      if (this.runs.get(run.appId) === run) this.place(run);
    });
  }

  /** A task attempt completed: the model learns its run time (launch to end, as the node manager reports it). */
  private taskCompleted(a: Attempt): void {
    if (this.lifetimeModel) {
      const vertex = a.run.job.shape.vertices[Math.floor(a.task / TASK_STRIDE)]!.name;
      this.lifetimeModel.observeTask(
        a.run.job.shape.name,
        vertex,
        this.engine.clock.nowMs() - (a.launchedMs ?? a.startMs),
      );
    }
    if (this.draining[a.server] === 1) this.reimageTally.finishedOnTheirOwn++;
  }

  /** A job finished: the model learns its duration, the node choice forgets its waits. */
  private jobCompleted(run: JobRun, durationMs: number, jobManager: Attempt | undefined): void {
    this.lifetimeModel?.observeJob(run.job.shape.name, durationMs);
    this.nodeChoice?.forget(run.appId);
    this.gateRetries.delete(run.appId);
    if (jobManager && this.draining[jobManager.server] === 1) this.reimageTally.finishedOnTheirOwn++;
  }

  /** Server `s`'s containers or room may have changed: keeps the empty-server counts and their integrals. */
  private noteOccupancy(s: number): void {
    if (this.emptyFlag.length === 0) return;
    const empty = this.running[s]!.size === 0 ? 1 : 0;
    const room = this.hasRoom(s) ? 1 : 0;
    const wasEmpty = this.emptyFlag[s]!;
    const hadRoom = this.roomFlag[s]!;
    if (empty === wasEmpty && room === hadRoom) return;
    this.accrueOccupancy(this.engine.clock.nowMs());
    this.emptyCount += empty - wasEmpty;
    this.roomCount += room - hadRoom;
    this.emptyRoomCount += empty * room - wasEmpty * hadRoom;
    this.emptyFlag[s] = empty;
    this.roomFlag[s] = room;
  }

  /** In service, with room for a task beside its primary (as it is, reported or not) and reserve. */
  private hasRoom(s: number): boolean {
    return this.inService(s) && this.capMilli[s]! - this.primaryMilli[s]! - this.reserveMilli[s]! >= this.taskMilli;
  }

  private accrueOccupancy(nowMs: number): void {
    const dt = nowMs - this.occupancySinceMs;
    if (dt <= 0) return;
    this.emptyMs += this.emptyCount * dt;
    this.roomMs += this.roomCount * dt;
    this.emptyRoomMs += this.emptyRoomCount * dt;
    this.occupancySinceMs = nowMs;
  }

  /** Tells the scheduler whether server `s` takes containers, and offers it at once when it is back. */
  private applyService(s: number): void {
    const inService = this.inService(s);
    this.scheduler.setSchedulable(this.nodeIds[s]!, inService);
    this.refreshFree(s);
    this.noteOccupancy(s);
    if (inService) this.roomFreed(s);
  }

  /** Server `s` is away until `untilMs` (a reimage or reclaim); a later one extends it. */
  private takeDown(s: number, untilMs: number): void {
    this.downUntilMs[s] = Math.max(this.downUntilMs[s]!, untilMs);
    if (this.down[s] === 1) return;
    this.down[s] = 1;
    this.applyService(s);
    const back = (): void => {
      const until = this.downUntilMs[s]!;
      if (this.engine.clock.nowMs() < until) {
        this.at(until, back);
        return;
      }
      this.down[s] = 0;
      this.applyService(s);
    };
    if (untilMs < this.cluster.horizonMs) this.at(untilMs, back);
  }

  /**
   * Kills `containers` (tasks first, then job managers, each taking its job's running tasks) and lets their jobs ask
   * again. Returns the core-hours lost (held time x cores), core-ms.
   */
  private killAll(containers: readonly Attempt[]): number {
    const before = this.wastedCoreMs;
    const touched = new Set<JobRun>();
    for (const a of containers) if (a.alive && !a.isAm) this.killTask(a, touched);
    for (const a of containers) if (a.alive && a.isAm) this.killJobManager(a, touched);
    this.reAsk(touched, []);
    return this.wastedCoreMs - before;
  }

  /** The server with the fewest secondary cores now, among those not away (ties: `preferred`, then the lowest index). */
  private emptiest(preferred: number): number {
    const now = this.engine.clock.nowMs();
    const coresOn = (s: number): number => {
      let milli = 0;
      for (const a of this.running[s]!) milli += a.milli;
      return milli;
    };
    let best = preferred;
    let bestMilli = this.downUntilMs[preferred]! > now ? Infinity : coresOn(preferred);
    for (let s = 0; s < this.running.length && bestMilli > 0; s++) {
      if (s === preferred || this.downUntilMs[s]! > now) continue;
      const m = coresOn(s);
      if (m < bestMilli) {
        best = s;
        bestMilli = m;
      }
    }
    return best;
  }

  /** A whole-server reclaim: the server goes away first (nothing is placed back on it), then all on it is killed. */
  private reclaim(s: number, durationMs: number): void {
    this.reclaimCount++;
    if (this.running[s]!.size === 0) this.reclaimsOnEmpty++;
    this.takeDown(s, this.engine.clock.nowMs() + durationMs);
    this.reclaimKilledCoreMs += this.killAll([...this.running[s]!]);
  }

  /** A planned reimage's notice: the server drains (unless it already drains for an earlier reimage). */
  private startDrain(e: ServerEvent): void {
    const s = e.server;
    if (this.draining[s] === 1) return;
    this.draining[s] = 1;
    this.drainForMs[s] = e.atMs;
    this.reimageTally.containersAtNotice += this.running[s]!.size;
    this.drains!.start(this.nodeIds[s]!, this.engine.clock.nowMs(), e.atMs);
    this.applyService(s);
    const step = (): void => {
      if (this.draining[s] !== 1 || this.drainForMs[s] !== e.atMs) return;
      this.stepDrain(s);
      // Nothing arrives on a draining server: once it is empty, only the reimage is left.
      const next = this.engine.clock.nowMs() + this.o.reimages!.stepIntervalMs;
      if (this.running[s]!.size > 0 && next < e.atMs) this.at(next, step);
    };
    step();
  }

  /** One step of server `s`'s drain: the containers the tracker picks (LARS or arbitrary order) are preempted. */
  private stepDrain(s: number): void {
    const now = this.engine.clock.nowMs();
    const byId = new Map<string, Attempt>();
    const containers: DrainContainer[] = [];
    for (const a of this.running[s]!) {
      byId.set(a.containerId, a);
      const startMs = a.launchedMs ?? now;
      const key = a.isAm ? this.jobManagerKey(a.run) : this.taskKey(a.run, a.task);
      containers.push({
        containerId: a.containerId,
        startMs,
        isJobManager: a.isAm,
        remainingMs: this.predictor!.remainingMs(key, now - startMs),
      });
    }
    const step = this.drains!.step(this.nodeIds[s]!, now, containers);
    const victims = step.preempt.map((id) => byId.get(id)).filter((a): a is Attempt => a !== undefined);
    if (victims.length === 0) return;
    const lostMs = this.killAll(victims);
    const t = this.reimageTally;
    if (step.atDeadline) {
      t.killedAtReimage += victims.length;
      t.killedAtReimageCoreMs += lostMs;
    } else {
      t.preempted += victims.length;
      t.preemptedCoreMs += lostMs;
    }
  }

  /**
   * A planned reimage: the server goes away first; a drain for this reimage takes its deadline step (whatever is left
   * is killed) and ends; without one, everything on the server is killed.
   */
  private reimage(e: ServerEvent): void {
    const s = e.server;
    const t = this.reimageTally;
    t.reimages++;
    this.takeDown(s, this.engine.clock.nowMs() + this.o.reimages!.outageMs);
    if (this.draining[s] === 1 && this.drainForMs[s] === e.atMs) {
      this.stepDrain(s);
      this.drains!.stop(this.nodeIds[s]!);
      this.draining[s] = 0;
      this.applyService(s);
    }
    const left = [...this.running[s]!];
    if (left.length === 0) return;
    t.killedAtReimage += left.length;
    t.killedAtReimageCoreMs += this.killAll(left);
  }

  /**
   * `checkInvariants`' part: the node choice's registry holds exactly the containers each server runs, no server away
   * or draining holds a container it was granted since, nothing is in flight between heartbeats, and the empty-server
   * counts match the servers.
   */
  private checkLifetimeBooks(fail: (why: string) => never): void {
    let empty = 0;
    let room = 0;
    let emptyRoom = 0;
    for (let s = 0; s < this.nodeIds.length; s++) {
      const id = this.nodeIds[s]!;
      const held = this.running[s]!.size;
      const known = this.nodeChoice?.containersOn(id).length ?? held;
      if (known !== held) fail(`server ${id}: the node choice knows ${known} containers, it runs ${held}`);
      if (this.down[s] === 1 && held > 0) fail(`server ${id} is away but runs ${held} containers`);
      const e = held === 0 ? 1 : 0;
      const r = this.hasRoom(s) ? 1 : 0;
      if (this.emptyFlag[s] !== e || this.roomFlag[s] !== r) fail(`server ${id}: the empty-server flags are stale`);
      empty += e;
      room += r;
      emptyRoom += e * r;
    }
    if (empty !== this.emptyCount || room !== this.roomCount || emptyRoom !== this.emptyRoomCount)
      fail("the empty-server counts differ from the servers'");
    if (this.keysInFlight.size > 0) fail("task grants are in flight between heartbeats");
  }

  /** The figures of node choice, reclaims and reimages (as of the horizon, once `run` has returned). */
  private lifetimeFigures(): Pick<
    ComputeRunResult,
    | "nodeChoice"
    | "lifetimes"
    | "emptyServerShare"
    | "emptyShareWithRoom"
    | "reclaims"
    | "reclaimsHittingEmpty"
    | "reclaimKilledCoreHours"
    | "reimages"
  > {
    const { cluster } = this;
    const spanMs = (cluster.horizonMs - cluster.historyMs) * cluster.servers.length;
    const t = this.reimageTally;
    const hours = (coreMs: number): number => coreMs / 3_600_000;
    return {
      nodeChoice: this.o.nodeChoice,
      lifetimes: this.o.lifetimes,
      emptyServerShare: spanMs > 0 ? this.emptyMs / spanMs : 0,
      emptyShareWithRoom: this.roomMs > 0 ? this.emptyRoomMs / this.roomMs : 0,
      reclaims: this.reclaimCount,
      reclaimsHittingEmpty: this.reclaimCount > 0 ? this.reclaimsOnEmpty / this.reclaimCount : 0,
      reclaimKilledCoreHours: hours(this.reclaimKilledCoreMs),
      ...(this.o.reimages
        ? {
            reimages: {
              drain: this.o.reimages.drain,
              reimages: t.reimages,
              containersAtNotice: t.containersAtNotice,
              preempted: t.preempted,
              preemptedCoreHours: hours(t.preemptedCoreMs),
              killedAtReimage: t.killedAtReimage,
              killedAtReimageCoreHours: hours(t.killedAtReimageCoreMs),
              finishedOnTheirOwn: t.finishedOnTheirOwn,
            },
          }
        : {}),
    };
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
      const free =
        this.capMilli[s]! - this.seenMilli[s]! - this.reserveMilli[s]! - secondary >= this.taskMilli &&
        this.inService(s);
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
    this.checkLifetimeBooks(fail);
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
      ...this.lifetimeFigures(),
      ...this.admissionFigures(),
    };
  }

  // ---------------------------------------------------------------------------------------------- admission control
  // seeds/003 in front of `submit`, as the resource manager runs it (resourcemanager/admission.ts). The state is built
  // on the first arrival, since field initializers run before the constructor has its options.

  /** Admission control's state once a job has arrived under a policy other than none. */
  private admissionState: AdmissionState | undefined;
  /** Core-ms held by containers that have ended (see `countHeld`). */
  private endedHeldCoreMs = 0;

  /** A container ends: adds what it held, from its grant until now, to the secondary core-hours. */
  private countHeld(a: Attempt): void {
    const coreMs = ((this.engine.clock.nowMs() - a.startMs) * a.milli) / 1000;
    this.endedHeldCoreMs += coreMs;
    const admitted = this.admissionState?.admitted.get(a.run.appId);
    if (admitted) admitted.heldCoreMs += coreMs;
  }

  /**
   * A job arrives under admission control: refused when even an idle cluster would not admit it (`neverAdmissible`),
   * else queued behind the jobs before it, and the queue is evaluated at once.
   */
  private arrive(job: SimJob): void {
    const adm = (this.admissionState ??= this.startAdmission());
    const now = this.engine.clock.nowMs();
    // What the job can hold at most (its DAG never runs more than its max concurrency at once), capped at the pool:
    // a job wider than the cluster runs in waves of at most the whole pool.
    // What its past runs held on average (the resource manager's `JobDemandModel`), never more than that.
    const demandMilli = adm.demand.demandMilli(
      job.shape.name,
      Math.min(adm.poolMilli, this.cost.jobManagerMilli + job.shape.maxConcurrency * this.taskMilli),
    );
    const waiting: WaitingJob = { appId: `j${job.id}`, priority: 0, job, demandMilli, arrivedMs: now };
    if (neverAdmissible(adm.servers, this.admissionCandidate(adm, waiting), adm.options)) {
      adm.jobsRejected++;
      return;
    }
    if (adm.options.backfill || (adm.backlogHead === adm.backlog.length && adm.queue.size < ADMISSION_WINDOW)) {
      adm.queue.enqueue(waiting, now);
      adm.queued.set(waiting.appId, waiting);
    } else adm.backlog.push(waiting);
    this.evaluateAdmission();
  }

  /** A waiting job as the policy judges it: its demand for its predicted lifetime (the model's, from its name). */
  private admissionCandidate(adm: AdmissionState, w: WaitingJob): AdmissionCandidate {
    return { appId: w.appId, demandMilli: w.demandMilli, lifetimeMs: adm.lifetime.jobRemainingMs(w.job.shape.name, 0) };
  }

  /** Jobs waiting for admission: in the queue and in the backlog behind it. */
  private admissionWaiting(adm: AdmissionState): number {
    return adm.queue.size + adm.backlog.length - adm.backlogHead;
  }

  /**
   * The resource manager's pass over its admission queue (on an arrival, a job's end and the admission tick): the
   * cluster as the scheduler sees it now, one `AdmissionOutlook`, and every job the queue lets through (strict order
   * unless `backfill`) is submitted. While jobs wait, the tick comes back every `tickMs`.
   *
   * Under strict order (one priority here) no job behind the first held one is judged, so the `AdmissionQueue` holds
   * only the first `ADMISSION_WINDOW` waiting jobs and the rest wait in `backlog`, in arrival order with their arrival
   * times; when the queue has admitted all it held, it takes the next ones and the pass goes on, as one more pass at
   * the same time (the jobs just admitted are then among the admitted jobs, with the demand and end they were
   * committed with). The decisions are those of one queue of every waiting job, without a walk over thousands of
   * blocked jobs at every pass of an overloaded run.
   */
  private evaluateAdmission(): void {
    const adm = this.admissionState;
    if (!adm) return;
    const now = this.engine.clock.nowMs();
    for (;;) {
      while (adm.queue.size < ADMISSION_WINDOW && adm.backlogHead < adm.backlog.length) {
        const w = adm.backlog[adm.backlogHead++]!;
        adm.queue.enqueue(w, w.arrivedMs);
        adm.queued.set(w.appId, w);
      }
      if (adm.backlogHead > 1024 && adm.backlogHead * 2 > adm.backlog.length) {
        adm.backlog = adm.backlog.slice(adm.backlogHead);
        adm.backlogHead = 0;
      }
      if (adm.queue.size === 0) break;
      this.admitFromQueue(adm, now);
      // A held job stops the pass; an emptied queue takes the next jobs of the backlog.
      if (adm.queue.size > 0 || adm.backlogHead === adm.backlog.length) break;
    }
    if (this.admissionWaiting(adm) > 0 && !adm.tickPending) {
      adm.tickPending = true;
      this.at(now + adm.tickMs, () => {
        adm.tickPending = false;
        this.evaluateAdmission();
      });
    }
  }

  /** One `AdmissionOutlook` of the cluster now, and the queue's walk under it: the admitted jobs are submitted. */
  private admitFromQueue(adm: AdmissionState, now: number): void {
    adm.servers.forEach((server, s) => {
      server.allocatedMilli = this.secondaryMilli[s]!;
      server.primaryNowMilli = this.seenMilli[s]!;
    });
    const admitted: AdmittedJob[] = [];
    for (const [appId, j] of adm.admitted) {
      const run = this.runs.get(appId);
      let allocatedMilli = run?.jobManager?.milli ?? 0;
      if (run) for (const a of run.attempts) allocatedMilli += a.milli;
      // Re-predicted from its uptime (seeds/002), so a job running past its first prediction is expected to end
      // later rather than counted at every step of the horizon.
      const endMs = now + adm.lifetime.jobRemainingMs(j.name, now - j.admittedAtMs);
      admitted.push({ appId, demandMilli: j.demandMilli, allocatedMilli, endMs });
    }
    // The outlook sums the primaries at every step up to the horizon, whatever the candidates need; a candidate is
    // judged only at the steps before its predicted end, so a horizon cut to the longest prediction among the queued
    // jobs gives the same decisions at a fraction of the cost.
    let longestMs = 0;
    for (const w of adm.queued.values()) longestMs = Math.max(longestMs, this.admissionCandidate(adm, w).lifetimeMs);
    const options =
      longestMs < adm.options.horizonMs ? { ...adm.options, horizonMs: Math.ceil(longestMs) } : adm.options;
    // A server out of service (reclaimed, draining) takes no work: the resource manager's view leaves it out.
    const servers = adm.servers.filter((_, s) => this.inService(s));
    const outlook = new AdmissionOutlook({ servers, admitted }, now, options);
    const entries = adm.queue.admitReady(now, (w) => {
      const candidate = this.admissionCandidate(adm, w);
      const decision = outlook.decide(candidate);
      if (decision.admit) outlook.commit(candidate);
      return decision;
    });
    for (const e of entries) {
      const { job } = e.job;
      adm.queued.delete(e.job.appId);
      adm.admitted.set(e.job.appId, {
        name: job.shape.name,
        demandMilli: e.job.demandMilli,
        admittedAtMs: now,
        heldCoreMs: 0,
      });
      adm.jobsAdmitted++;
      adm.waitMs += e.waitedMs;
      this.submit(job);
    }
  }

  /**
   * An admitted job ended: the lifetime model learns its run time (admission to end: what a prediction made at
   * admission is for), and the queue is evaluated once this event is over (the job's containers are released by then).
   */
  private admittedJobDone(run: JobRun): void {
    const adm = this.admissionState;
    const j = adm?.admitted.get(run.appId);
    if (!adm || !j) return;
    const now = this.engine.clock.nowMs();
    adm.admitted.delete(run.appId);
    adm.lifetime.observeJob(j.name, now - j.admittedAtMs);
    if (now > j.admittedAtMs) adm.demand.observe(j.name, (1000 * j.heldCoreMs) / (now - j.admittedAtMs));
    if (this.admissionWaiting(adm) > 0 && !adm.passPending) {
      adm.passPending = true;
      this.at(now, () => {
        adm.passPending = false;
        this.evaluateAdmission();
      });
    }
  }

  /**
   * Admission control's view of the cluster, built once: every server's capacity and the scheduler's reserve, and its
   * primary's `DemandProfile` from the history before the experiment, [0, historyMs) (the window the classifier reads
   * at the start). The profile is by time of day when the classifier calls the tenant periodic on that window
   * (`tenantFeatures`, the tenant registry's test, on the tenant's average-server series), from all samples otherwise.
   * Each server's own series (its tenant's plus its offset) is what its node manager reports. The profiles are not
   * rebuilt during the run (the resource manager rebuilds them every few minutes; over a few days the history barely
   * moves). A server with too little history counts at its primary's live usage with no variance, as the resource
   * manager does.
   */
  private startAdmission(): AdmissionState {
    const { cluster } = this;
    const resolved = this.o.admission!;
    const slotMs = cluster.slotMs;
    const to = Math.floor(cluster.historyMs / slotMs);
    const timesMs: number[] = [];
    for (let k = 0; k < to; k++) timesMs.push(k * slotMs);
    const daily = DAY_MS % slotMs === 0 && DAY_MS / slotMs >= 3;
    const periodic = cluster.tenants.map((t) => {
      const cpuPct = Array.from(t.utilization.subarray(0, Math.min(to, t.utilization.length)));
      if (!daily || cpuPct.length === 0) return false;
      const series: UtilizationSeries = {
        name: t.id,
        stepSec: slotMs / 1000,
        startMs: 0,
        timesMs: timesMs.slice(0, cpuPct.length),
        cpuPct,
      };
      return tenantFeatures(series, this.o.classifier).pattern === "periodic";
    });
    let poolMilli = 0;
    const servers = cluster.servers.map((server): AdmissionServer => {
      const s = server.index;
      const tenant = cluster.tenants[server.tenant]!;
      const series = tenant.utilization;
      const cpuPct: number[] = [];
      for (let k = 0; k < to && k < series.length; k++) {
        const u = series[k]! + server.offsetPct;
        cpuPct.push(u < 0 ? 0 : u > 100 ? 100 : u);
      }
      const profile = new DemandProfile(
        { timesMs: timesMs.slice(0, cpuPct.length), cpuPct },
        // Not periodic: the period only has to be a whole number of slots.
        { periodic: periodic[server.tenant]!, slotMs, periodMs: daily ? DAY_MS : 3 * slotMs },
      );
      const live: PrimaryDemandSource = {
        moments: () => ({
          mean: (this.seenMilli[s]! / this.capMilli[s]!) * 100,
          variance: 0,
          samples: 0,
          basis: "prior",
        }),
      };
      poolMilli += Math.max(0, this.capMilli[s]! - this.reserveMilli[s]!);
      return {
        serverId: server.id,
        capacityMilli: this.capMilli[s]!,
        reserveMilli: this.reserveMilli[s]!,
        allocatedMilli: 0,
        primaryNowMilli: 0,
        primary: profile.samples >= profile.options.minSamples ? slotTable(profile, slotMs, daily) : live,
        tenant: tenant.id,
      };
    });
    return {
      options: resolved.options,
      tickMs: resolved.tickMs,
      queue: new AdmissionQueue<WaitingJob>({ backfill: resolved.options.backfill }),
      lifetime: new LifetimeModel(resolved.lifetime),
      servers,
      poolMilli,
      admitted: new Map(),
      demand: new JobDemandModel(),
      queued: new Map(),
      backlog: [],
      backlogHead: 0,
      tickPending: false,
      passPending: false,
      jobsAdmitted: 0,
      jobsRejected: 0,
      waitMs: 0,
    };
  }

  /** The admission and utilization figures of `result` (as of now, the horizon once `run` has returned). */
  private admissionFigures(): Pick<
    ComputeRunResult,
    | "admission"
    | "admissionThreshold"
    | "jobsAdmitted"
    | "jobsRejected"
    | "jobsQueuedAtEnd"
    | "avgAdmissionWaitS"
    | "secondaryCoreHours"
    | "harvestableCoreHours"
    | "harvestedUtilization"
    | "killedTaskHoursFraction"
  > {
    const { cluster } = this;
    const now = this.engine.clock.nowMs();
    let heldCoreMs = this.endedHeldCoreMs;
    for (const containers of this.running)
      for (const a of containers) heldCoreMs += ((now - a.startMs) * a.milli) / 1000;
    const harvestable = harvestableCoreMs(cluster, cluster.historyMs, cluster.horizonMs, this.o.reserveFraction);
    const adm = this.admissionState;
    const options = this.o.admission?.options;
    return {
      admission: options?.policy ?? "none",
      admissionThreshold: options ? thresholdOf(options) : 1,
      jobsAdmitted: adm ? adm.jobsAdmitted : options && options.policy !== "none" ? 0 : this.nextJob,
      jobsRejected: adm?.jobsRejected ?? 0,
      jobsQueuedAtEnd: adm ? this.admissionWaiting(adm) : 0,
      avgAdmissionWaitS: adm && adm.jobsAdmitted > 0 ? adm.waitMs / adm.jobsAdmitted / 1000 : 0,
      secondaryCoreHours: heldCoreMs / 3_600_000,
      harvestableCoreHours: harvestable / 3_600_000,
      harvestedUtilization: harvestable > 0 ? heldCoreMs / harvestable : 0,
      killedTaskHoursFraction: heldCoreMs > 0 ? this.wastedCoreMs / heldCoreMs : 0,
    };
  }
}

// ------------------------------------------------------------------------------------------------ lifetimes

/** Where node choice and drains get container lifetimes: the learned model, or the truth from the job stream. */
export type LifetimeSource = "learned" | "oracle";

/** Something that happens to one whole server (a reclaim, a planned reimage): server index and simulated time. */
export interface ServerEvent {
  readonly server: number;
  readonly atMs: number;
}

/**
 * Whole-server reclaims: a primary's spike to the whole server, or a reimage or maintenance without notice. Each takes
 * one server for `durationMs`: every secondary container there is killed at once (a task re-runs, a job manager's kill
 * takes its job's running tasks, as in the yield step) and the server gets nothing until it is back.
 */
export interface ReclaimOptions {
  /**
   * Reclaims drawn at random (a Poisson process of this rate per server, each on a server drawn uniformly) from the
   * run's own random stream (`Stream.Reclaims`), so every policy of a comparison sees the same reclaims.
   * @default 0
   */
  perServerPerDay?: number;
  /**
   * Reclaims at given times and servers (tests, replayed traces), besides the drawn ones.
   * @default []
   */
  events?: readonly ServerEvent[];
  /** How long each reclaim keeps the server, ms. */
  durationMs: number;
  /**
   * Which server a reclaim takes: "random", the drawn one (a primary's spike, a failure: nobody chooses); or
   * "emptiest", the server with the fewest secondary cores on it at that moment (ties: the drawn one, then the lowest
   * index), among those not already away: maintenance, a reimage or a large primary deployment that may pick its
   * server, which is where empty servers pay (seeds/002: empty hosts for maintenance and large VMs).
   * @default "random"
   */
  choose?: "random" | "emptiest";
}

/** {@link ReclaimOptions} resolved: every reclaim of the run, ascending by time. */
export interface ResolvedReclaimOptions {
  perServerPerDay: number;
  durationMs: number;
  choose: "random" | "emptiest";
  events: readonly ServerEvent[];
}

/** How a planned reimage is met: not at all, or by a graceful drain in LARS order or in the baseline's order. */
export type DrainMode = "none" | "lars" | "arbitrary";

/**
 * Planned reimages: each announced `noticeMs` before it. Without a drain ("none") the notice is ignored and at the
 * reimage everything on the server is killed. With one, the server takes nothing new from the notice on and the
 * resource manager's `DrainTracker` steps every `stepIntervalMs`: containers predicted (re-predicted at each step, from
 * their uptime) to end before the reimage are left to finish, the others are preempted at a bounded rate, the longest
 * predicted first (LARS, seeds/002 section 4.4) or the oldest first ("arbitrary"); at the reimage whatever is left is
 * killed. Either way the server is then away for `outageMs`.
 */
export interface PlannedReimageOptions {
  events: readonly ServerEvent[];
  /** @default 1800000 (30 minutes) */
  noticeMs?: number;
  /** @default "lars" */
  drain?: DrainMode;
  /** How long a reimage keeps the server away, ms. @default 1800000 */
  outageMs?: number;
  /** The drain's step (the resource manager's monitor tick), ms. @default 10000 */
  stepIntervalMs?: number;
  /** The drain's rate, burst and margin (`DrainOptions`; its order comes from `drain`). @default {} */
  drainOptions?: Partial<Omit<DrainOptions, "order">>;
}

/** {@link PlannedReimageOptions} resolved. */
export interface ResolvedPlannedReimageOptions {
  events: readonly ServerEvent[];
  noticeMs: number;
  drain: DrainMode;
  outageMs: number;
  stepIntervalMs: number;
  drainOptions: DrainOptions;
}

/** What planned reimages cost in a run (`ComputeRunResult.reimages`). */
export interface ReimageFigures {
  drain: DrainMode;
  /** Reimages that happened within the run. */
  reimages: number;
  /** Containers on a server when its drain started (0 without a drain). */
  containersAtNotice: number;
  /**
   * Containers the drain preempted before the reimage, and the core-hours lost with them: held time x cores of each,
   * and of the running tasks a preempted job manager took with it, wherever they ran.
   */
  preempted: number;
  preemptedCoreHours: number;
  /** Containers on the server at the reimage (all of them without a drain), killed, and the core-hours lost. */
  killedAtReimage: number;
  killedAtReimageCoreHours: number;
  /** Containers of a draining server that ended on their own (tasks that completed, job managers whose job ended). */
  finishedOnTheirOwn: number;
}

/**
 * Whole-server events drawn as a Poisson process of `perServerPerDay` per server over the experiment [historyMs,
 * horizonMs), each on a server drawn uniformly, from the run's random stream `stream` of `seed`; ascending by time.
 */
export function drawServerEvents(
  cluster: SimCluster,
  seed: number,
  stream: number,
  perServerPerDay: number,
): ServerEvent[] {
  const n = cluster.servers.length;
  const events: ServerEvent[] = [];
  if (!(perServerPerDay > 0) || n === 0) return events;
  const rng = new SeededRng(streamSeed(seed, stream));
  const perMs = (perServerPerDay * n) / DAY_MS;
  let t = cluster.historyMs;
  for (;;) {
    t += -Math.log(1 - rng.next()) / perMs;
    if (!(t < cluster.horizonMs)) return events;
    events.push({ server: rng.int(n), atMs: Math.floor(t) });
  }
}

/** Validates explicit server events: known servers, times within the experiment. */
function checkServerEvents(cluster: SimCluster, field: string, events: readonly ServerEvent[]): void {
  events.forEach((e, i) => {
    if (!(Number.isInteger(e.server) && e.server >= 0 && e.server < cluster.servers.length))
      invalid(`${field}[${i}].server`, `must be a server index in [0, ${cluster.servers.length}) (got ${e.server})`);
    if (!(e.atMs >= cluster.historyMs && e.atMs < cluster.horizonMs))
      invalid(`${field}[${i}].atMs`, `must be in [${cluster.historyMs}, ${cluster.horizonMs}) (got ${e.atMs})`);
  });
}

/** Runs a resource manager resolver, turning its CONFIG_INVALID into INVALID_ARGUMENT naming `field.<inner>`. */
function resolvedAs<T>(field: string, resolve: () => T): T {
  try {
    return resolve();
  } catch (err) {
    if (!isHarvestError(err, "CONFIG_INVALID")) throw err;
    const inner = err.details.field;
    return invalid(inner ? `${field}.${inner}` : field, `is invalid: ${err.message}`);
  }
}

function resolveReclaims(cluster: SimCluster, seed: number, r: ReclaimOptions): ResolvedReclaimOptions {
  const perServerPerDay = r.perServerPerDay ?? 0;
  if (!(Number.isFinite(perServerPerDay) && perServerPerDay >= 0))
    invalid("reclaims.perServerPerDay", `must be >= 0 (got ${perServerPerDay})`);
  if (!(Number.isFinite(r.durationMs) && r.durationMs > 0))
    invalid("reclaims.durationMs", `must be > 0 (got ${r.durationMs})`);
  const given = r.events ?? [];
  checkServerEvents(cluster, "reclaims.events", given);
  const events = [...given, ...drawServerEvents(cluster, seed, Stream.Reclaims, perServerPerDay)].sort(
    (a, b) => a.atMs - b.atMs,
  );
  const choose = r.choose ?? "random";
  if (choose !== "random" && choose !== "emptiest") invalid("reclaims.choose", `must be "random" or "emptiest"`);
  return { perServerPerDay, durationMs: r.durationMs, choose, events };
}

function resolveReimages(cluster: SimCluster, p: PlannedReimageOptions): ResolvedPlannedReimageOptions {
  const noticeMs = p.noticeMs ?? 30 * 60_000;
  const drain = p.drain ?? "lars";
  const outageMs = p.outageMs ?? 30 * 60_000;
  const stepIntervalMs = p.stepIntervalMs ?? 10_000;
  if (!(Number.isFinite(noticeMs) && noticeMs >= 0)) invalid("reimages.noticeMs", `must be >= 0 (got ${noticeMs})`);
  if (drain !== "none" && drain !== "lars" && drain !== "arbitrary")
    invalid("reimages.drain", `must be "none", "lars" or "arbitrary" (got ${String(drain)})`);
  if (!(Number.isFinite(outageMs) && outageMs >= 0)) invalid("reimages.outageMs", `must be >= 0 (got ${outageMs})`);
  if (!(Number.isFinite(stepIntervalMs) && stepIntervalMs > 0))
    invalid("reimages.stepIntervalMs", `must be > 0 (got ${stepIntervalMs})`);
  checkServerEvents(cluster, "reimages.events", p.events);
  const drainOptions = resolvedAs("reimages.drainOptions", () =>
    resolveDrainOptions({ ...(p.drainOptions ?? {}), order: drain === "arbitrary" ? "arbitrary" : "lars" }),
  );
  const events = [...p.events].sort((a, b) => a.atMs - b.atMs);
  return { events, noticeMs, drain, outageMs, stepIntervalMs, drainOptions };
}

/** Validates the node-choice fields of resolved options. */
function checkNodeChoice(o: ResolvedComputeOptions): void {
  if (o.nodeChoice !== "stock" && o.nodeChoice !== "nilas" && o.nodeChoice !== "lava")
    invalid("nodeChoice", `must be "stock", "nilas" or "lava" (got ${String(o.nodeChoice)})`);
  if (o.lifetimes !== "learned" && o.lifetimes !== "oracle")
    invalid("lifetimes", `must be "learned" or "oracle" (got ${String(o.lifetimes)})`);
  resolvedAs("nodeChoiceOptions", () => resolveNodeChoiceOptions({ ...o.nodeChoiceOptions, kind: o.nodeChoice }));
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

// ------------------------------------------------------------------------------------------------ admission control

/**
 * Admission control in the compute simulator (`ComputeOptions.admission`): seeds/003's policies with the resource
 * manager's settings (`AdmissionOptions`: thresholds, horizon, steps, correlation, backfill), plus how often the queue
 * is re-evaluated and the lifetime model's settings.
 */
export interface SimAdmissionOptions extends Partial<Omit<AdmissionOptions, "policy">> {
  /** "none": no queue; every job is submitted on arrival, exactly as without admission control. */
  policy: AdmissionPolicy;
  /**
   * While jobs wait, the queue is re-evaluated this often (the resource manager's monitor tick), besides on every
   * arrival and every job's end.
   * @default 60000
   */
  tickMs?: number;
  /**
   * The lifetime model that predicts a job's run time from its name's past runs (`LifetimeModel`; its
   * `defaultLifetimeMs` is the prediction before any job has finished).
   * @default {}
   */
  lifetime?: Partial<LifetimeOptions>;
}

/** {@link SimAdmissionOptions} resolved. */
export interface ResolvedSimAdmissionOptions {
  policy: AdmissionPolicy;
  options: AdmissionOptions;
  tickMs: number;
  lifetime: LifetimeOptions;
}

/**
 * Fills the defaults of `admission` and validates it: INVALID_ARGUMENT naming `admission.<field>`, as every compute
 * option (the resource manager's resolvers say CONFIG_INVALID, which is about a daemon's configuration).
 */
export function resolveSimAdmissionOptions(admission: SimAdmissionOptions): ResolvedSimAdmissionOptions {
  const { tickMs = 60_000, lifetime = {}, ...rest } = admission;
  const named = <T>(prefix: string, resolve: () => T): T => {
    try {
      return resolve();
    } catch (err) {
      if (!isHarvestError(err, "CONFIG_INVALID")) throw err;
      invalid(`admission.${prefix}${String(err.details.field)}`, `is invalid: ${err.message}`);
    }
  };
  const options = named("", () => resolveAdmissionOptions(rest));
  const lifetimeOptions = named("lifetime.", () => resolveLifetimeOptions(lifetime));
  if (!(Number.isFinite(tickMs) && tickMs > 0)) invalid("admission.tickMs", `must be > 0 (got ${tickMs})`);
  return { policy: options.policy, options, tickMs, lifetime: lifetimeOptions };
}

/** A job in the simulated admission queue: the job and its demand (job manager + max concurrency x task size). */
interface WaitingJob extends QueuedJob {
  job: SimJob;
  demandMilli: number;
  arrivedMs: number;
}

/** Waiting jobs the simulated `AdmissionQueue` holds under strict order; the rest wait in a backlog behind them. */
const ADMISSION_WINDOW = 16;

/** Admission control's state in a run (see `ComputeSim.startAdmission`). */
interface AdmissionState {
  readonly options: AdmissionOptions;
  readonly tickMs: number;
  readonly queue: AdmissionQueue<WaitingJob>;
  readonly lifetime: LifetimeModel;
  /** Every server as the policy sees it; allocation and live primary usage are refreshed before each pass. */
  readonly servers: AdmissionServer[];
  /** Capacity - reserve summed over servers (the paper's C): no job's demand counts above it. */
  readonly poolMilli: number;
  /** Admitted jobs not yet ended, by application id. */
  readonly admitted: Map<string, { name: string; demandMilli: number; admittedAtMs: number; heldCoreMs: number }>;
  /** What each recurring job held on average in its past runs: the demand the policies count. */
  readonly demand: JobDemandModel;
  /** Jobs waiting behind the queue's `ADMISSION_WINDOW` (strict order only), from `backlogHead` on. */
  backlog: WaitingJob[];
  backlogHead: number;
  /** The jobs in `queue`, by application id. */
  readonly queued: Map<string, WaitingJob>;
  /** A tick, or a pass after a job's end, is scheduled. */
  tickPending: boolean;
  passPending: boolean;
  jobsAdmitted: number;
  jobsRejected: number;
  /** Sum of the admitted jobs' waits in the queue. */
  waitMs: number;
}

/**
 * A profile's moments read from a table of one entry per slot of the day (one entry when not periodic): a profile's
 * answer depends only on the slot of the asked time within the period (`DemandProfile.moments`), so the table gives
 * the same answers, and each pass over the admission queue, which asks every server at every step of the horizon,
 * costs a lookup per server and step instead of a sum over the slot's window.
 */
function slotTable(profile: DemandProfile, slotMs: number, daily: boolean): PrimaryDemandSource {
  if (!profile.options.periodic) {
    const m = profile.moments(0);
    return { moments: () => m };
  }
  const slots = daily ? DAY_MS / slotMs : 1;
  const table = Array.from({ length: slots }, (_, k) => profile.moments(k * slotMs));
  return {
    moments: (atMs) => {
      const k = Math.floor((((atMs % DAY_MS) + DAY_MS) % DAY_MS) / slotMs);
      return table[Math.min(slots - 1, k)]!;
    },
  };
}
