/**
 * The options of the compute simulation (`runCompute`): what each means, its default, the kill-cost model, and the
 * one resolver that fills the defaults and validates them.
 */
import { stripUndefined } from "../common/options.js";
import {
  CLASS_FALLBACKS,
  DEFAULT_CLASS_FALLBACK,
  DEFAULT_JOB_LENGTH,
  DEFAULT_KILLED_JOBS_LEAVE_CLASSES,
  DEFAULT_LEARN_FROM_KILLS,
  DEFAULT_MAX_AM_SHARE,
  DEFAULT_SATURATION_SHARE,
  JOB_LENGTH_RULES,
  mustBeOneOf,
  resolveClassifierOptions,
  resolveClassWeights,
  resolveJobTypeOptions,
  resolveNodeChoiceOptions,
} from "../resourcemanager/index.js";
import type {
  ClassifierOptions,
  ClassWeights,
  ClassWeightsInput,
  JobLengthRule,
  JobTypeOptions,
  NodeChoiceKind,
  NodeChoiceOptions,
  ClassFallback,
  PlacementDecision,
  TenantClass,
} from "../resourcemanager/index.js";
import {
  DEFAULT_NEAR_END_MS,
  DEFAULT_NOTICE_MARGIN_FRACTION,
  PREEMPTION_NOTICES,
  VICTIM_ORDERS,
} from "../nodemanager/index.js";
import type { PreemptionNotice, VictimOrder } from "../nodemanager/index.js";
import { DEFAULT_NOTICE_AVOID_MS } from "../jobmanager/index.js";
import type { EngineProgress } from "./engine/engine.js";
import type { ResolvedSimAdmissionOptions, SimAdmissionOptions } from "./features/admission-options.js";
import { resolveSimAdmissionOptions } from "./features/admission-options.js";
import type {
  PlannedReimageOptions,
  ReclaimOptions,
  ResolvedPlannedReimageOptions,
  ResolvedReclaimOptions,
} from "./features/server-events-options.js";
import { resolveReclaims, resolveReimages } from "./features/server-events-options.js";
import type { JobStream, SimJob } from "./jobs.js";
import { DAY_MS } from "./model.js";
import type { SimCluster } from "./model.js";
import {
  checkAboveZero,
  checkAtLeastZero,
  checkExperimentTime,
  checkFraction,
  checkIntAtLeast,
  checkShare,
  invalidArgument,
  resolvedAs,
} from "./options.js";
import type { ComputePolicy, SimJobType } from "./results.js";

/** Where node choice and drains get container lifetimes: the learned model, or the truth from the job stream. */
export type LifetimeSource = "learned" | "oracle";

/**
 * How a primary moves between two samples of its utilization series: "step" holds each sample for its slot; "ramp"
 * moves from each sample to the next in a straight line, one sub-step every `rampStepMs` (each a yield step where it
 * grows), reaching the next sample when "step" would jump to it.
 */
export type PrimaryShape = "step" | "ramp";

/** Every primary shape, the stock one first. */
export const PRIMARY_SHAPES: readonly PrimaryShape[] = ["step", "ramp"];

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
   * @default 0.1 (DEFAULT_MAX_AM_SHARE)
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
   * Under the history policy, what a job does when no class has room (the resource manager's classNoRoom): "stock"
   * places it as stock at once, "wait" waits up to `classWaitMs` (seeds/004).
   * @default "stock"
   */
  classFallback?: ClassFallback;
  /**
   * Under the history policy, a job is placed as stock when Harvest holds at least this share of what the primaries
   * leave (the resource manager's classSaturationShare); 1: never.
   * @default 0.65
   */
  saturationShare?: number;
  /**
   * Under the history policy, long jobs' tasks avoid a server whose primary killed work, for its class's burst length
   * (the resource manager's classLearnFromKills).
   * @default false (it measured slower in the sweep's busy cells)
   */
  learnFromKills?: boolean;
  /**
   * Under the history policy, a confined short or medium job whose task a primary killed runs on any server from then
   * on (the resource manager's classKilledJobsLeave). @default true
   */
  killedJobsLeaveClasses?: boolean;
  /**
   * Under the history policy, how a job's type is judged (the resource manager's classJobLength): "terciles" of the
   * recent job lengths, or "per-class" against each class's mean time between bursts.
   * @default "terciles"
   */
  jobLength?: JobLengthRule;
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
   * Which containers the node manager's yield step kills (its victimOrder, `chooseVictims`): "youngest" (stock YARN)
   * or "work-lost" (the least running time x cores lost, with each task's progress; tasks near their end and job
   * managers spared while others suffice).
   * @default "youngest"
   */
  victimOrder?: VictimOrder;
  /**
   * Under "work-lost", a task expected to end within this is spared while others suffice (the node manager's
   * victimNearEndMs).
   * @default 0
   */
  victimNearEndMs?: number;
  /**
   * The node manager's preemption notice (nodemanager/policy/preemption-notice.ts, its preemptionNotice): "off"
   * (stock) or "notice": at each yield step, after its kills, the containers `containersAtRisk` names reach their job
   * managers one node heartbeat and one allocate call later, and each job's tasks avoid that server for
   * `noticeAvoidMs` (`NoticedServers`, the scheduler's `setTaskAvoid`). Kills are never delayed.
   * @default "off"
   */
  preemptionNotice?: PreemptionNotice;
  /**
   * The notice's margin below the kill level, a fraction of each server's cores (the node manager's
   * noticeMarginFraction).
   * @default 0.1 (DEFAULT_NOTICE_MARGIN_FRACTION)
   */
  noticeMarginFraction?: number;
  /**
   * How long a job's tasks avoid a server after its last notice (the job manager's noticeAvoidMs).
   * @default 120000 (DEFAULT_NOTICE_AVOID_MS)
   */
  noticeAvoidMs?: number;
  /**
   * How the primaries move between the samples of their utilization series (see {@link PrimaryShape}).
   * @default "step"
   */
  primaryShape?: PrimaryShape;
  /**
   * Under "ramp", the primaries move one sub-step this often (a divisor of the slot is best; the last sub-step of a
   * slot is shorter otherwise).
   * @default 30000
   */
  rampStepMs?: number;
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
  /**
   * A job was submitted (after admission, when admission control holds it) with `freeTaskSlots` task containers free
   * on the `serversWithRoom` servers in service with room for one now (beside the primary as last reported and the
   * reserve).
   */
  onJobSubmitted?(e: { job: SimJob; nowMs: number; freeTaskSlots: number; serversWithRoom: number }): void;
  /** A task attempt started on server index `server`. */
  onTaskStart?(e: { job: SimJob; vertex: number; task: number; server: number; nowMs: number }): void;
  /** A preemption notice about server index `server` reached `job`'s job manager (notices on). */
  onNotice?(e: { job: SimJob; server: number; nowMs: number }): void;
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

/** Whose options the messages name: INVALID_ARGUMENT "compute option <field> ...". */
export const WHAT = "compute";

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
    maxAmShare: options.maxAmShare ?? DEFAULT_MAX_AM_SHARE,
    taskCores: options.taskCores ?? jobs.taskCores,
    weights: resolveClassWeights(options.weights ?? {}),
    jobTypes: resolveJobTypeOptions(options.jobTypes ?? {}),
    jobHistoryWindow: options.jobHistoryWindow ?? 1000,
    classifier: resolveClassifierOptions(options.classifier ?? {}),
    classWaitMs: options.classWaitMs ?? 60_000,
    classFallback: options.classFallback ?? DEFAULT_CLASS_FALLBACK,
    saturationShare: options.saturationShare ?? DEFAULT_SATURATION_SHARE,
    learnFromKills: options.learnFromKills ?? DEFAULT_LEARN_FROM_KILLS,
    killedJobsLeaveClasses: options.killedJobsLeaveClasses ?? DEFAULT_KILLED_JOBS_LEAVE_CLASSES,
    jobLength: options.jobLength ?? DEFAULT_JOB_LENGTH,
    retryIntervalMs: options.retryIntervalMs ?? 5000,
    reclassifyIntervalMs: options.reclassifyIntervalMs ?? DAY_MS,
    victimOrder: options.victimOrder ?? "youngest",
    victimNearEndMs: options.victimNearEndMs ?? DEFAULT_NEAR_END_MS,
    preemptionNotice: options.preemptionNotice ?? "off",
    noticeMarginFraction: options.noticeMarginFraction ?? DEFAULT_NOTICE_MARGIN_FRACTION,
    noticeAvoidMs: options.noticeAvoidMs ?? DEFAULT_NOTICE_AVOID_MS,
    primaryShape: options.primaryShape ?? "step",
    rampStepMs: options.rampStepMs ?? 30_000,
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
    invalidArgument(WHAT, "policy", `must be "stock", "stock-unaware" or "history" (got ${String(o.policy)})`);
  if (!Number.isSafeInteger(o.seed)) invalidArgument(WHAT, "seed", `must be an integer (got ${o.seed})`);
  checkFraction(WHAT, "reserveFraction", o.reserveFraction);
  if (!VICTIM_ORDERS.includes(o.victimOrder))
    invalidArgument(WHAT, "victimOrder", `must be "youngest" or "work-lost" (got ${String(o.victimOrder)})`);
  checkAtLeastZero(WHAT, "victimNearEndMs", o.victimNearEndMs);
  if (!PREEMPTION_NOTICES.includes(o.preemptionNotice))
    invalidArgument(WHAT, "preemptionNotice", mustBeOneOf(PREEMPTION_NOTICES, o.preemptionNotice));
  checkFraction(WHAT, "noticeMarginFraction", o.noticeMarginFraction);
  checkAtLeastZero(WHAT, "noticeAvoidMs", o.noticeAvoidMs);
  if (!PRIMARY_SHAPES.includes(o.primaryShape))
    invalidArgument(WHAT, "primaryShape", mustBeOneOf(PRIMARY_SHAPES, o.primaryShape));
  if (!(Number.isInteger(o.rampStepMs) && o.rampStepMs >= 1000))
    invalidArgument(WHAT, "rampStepMs", `must be an integer >= 1000 ms (got ${o.rampStepMs})`);
  checkShare(WHAT, "maxAmShare", o.maxAmShare);
  checkAboveZero(WHAT, "taskCores", o.taskCores);
  const taskMilli = Math.round(o.taskCores * 1000);
  const fitsSomewhere = cluster.servers.some(
    (s) => s.cores * 1000 - Math.ceil(s.cores * 1000 * o.reserveFraction) >= taskMilli,
  );
  if (cluster.servers.length > 0 && !fitsSomewhere)
    invalidArgument(WHAT, "taskCores", `${o.taskCores} cores fit on no server once the reserve is kept`);
  checkIntAtLeast(WHAT, "jobHistoryWindow", o.jobHistoryWindow, 1);
  checkAtLeastZero(WHAT, "classWaitMs", o.classWaitMs);
  if (!CLASS_FALLBACKS.includes(o.classFallback))
    invalidArgument(WHAT, "classFallback", mustBeOneOf(CLASS_FALLBACKS, o.classFallback));
  checkShare(WHAT, "saturationShare", o.saturationShare);
  if (!JOB_LENGTH_RULES.includes(o.jobLength))
    invalidArgument(WHAT, "jobLength", mustBeOneOf(JOB_LENGTH_RULES, o.jobLength));
  checkAboveZero(WHAT, "retryIntervalMs", o.retryIntervalMs);
  checkAtLeastZero(WHAT, "reclassifyIntervalMs", o.reclassifyIntervalMs);
  const k = o.killCost;
  for (const field of [
    "yieldTickMs",
    "heartbeatIntervalMs",
    "amHeartbeatMs",
    "launchMedianMs",
    "launchP90Ms",
  ] as const) {
    checkAtLeastZero(WHAT, `killCost.${field}`, k[field]);
  }
  if (k.launchP90Ms < k.launchMedianMs)
    invalidArgument(
      WHAT,
      "killCost.launchP90Ms",
      `must be >= launchMedianMs (${k.launchMedianMs}), got ${k.launchP90Ms}`,
    );
  checkIntAtLeast(WHAT, "killCost.jobManagerMilli", k.jobManagerMilli, 0);
  if (k.jobManagerMilli > taskMilli)
    invalidArgument(
      WHAT,
      "killCost.jobManagerMilli",
      `must be at most a task's ${taskMilli} milli-cores (got ${k.jobManagerMilli})`,
    );
  if (typeof k.throttleSlowdown !== "boolean")
    invalidArgument(WHAT, "killCost.throttleSlowdown", `must be true or false (got ${String(k.throttleSlowdown)})`);
  checkIntAtLeast(WHAT, "progressEvery", o.progressEvery, 1);
  for (const [i, j] of jobs.jobs.entries()) {
    checkExperimentTime(WHAT, `jobs[${i}].submitMs`, cluster, j.submitMs);
  }
  checkNodeChoice(o);
  return o;
}

/** Validates the node-choice fields of resolved options. */
export function checkNodeChoice(o: ResolvedComputeOptions): void {
  if (o.nodeChoice !== "stock" && o.nodeChoice !== "nilas" && o.nodeChoice !== "lava")
    invalidArgument(WHAT, "nodeChoice", `must be "stock", "nilas" or "lava" (got ${String(o.nodeChoice)})`);
  if (o.lifetimes !== "learned" && o.lifetimes !== "oracle")
    invalidArgument(WHAT, "lifetimes", `must be "learned" or "oracle" (got ${String(o.lifetimes)})`);
  resolvedAs(WHAT, "nodeChoiceOptions", () => resolveNodeChoiceOptions({ ...o.nodeChoiceOptions, kind: o.nodeChoice }));
}
