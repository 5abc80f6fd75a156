/**
 * The compute simulation's core (the SLS-style harness): the state every role and feature reads, the ports through
 * which they call each other, the event loop that drives time (slots, classification, arrivals, server events), the
 * invariants and the result. See docs/simulator.md.
 */
import { HarvestError } from "../../common/errors.js";
import { Logger } from "../../common/log.js";
import type { Resources } from "../../common/resource.js";
import { SeededRng } from "../../common/rng.js";
import {
  HistoryPlacement,
  HistorySchedulerPolicy,
  LiveClassViews,
  liveNodeOf,
  Scheduler,
  StockSchedulerPolicy,
} from "../../resourcemanager/index.js";
import type {
  Allocation,
  ContainerKey,
  LiveNode,
  NodeChoiceSource,
  PlacementDecision,
  LifetimeNodeChoice,
} from "../../resourcemanager/index.js";
import type { KillCostModel, ResolvedComputeOptions } from "../compute-options.js";
import { SimEngine } from "./engine.js";
import type { LifetimesPort, SimFeature } from "../features/feature.js";
import { harvestableCoreMs } from "../jobs.js";
import type { JobStream, SimJob } from "../jobs.js";
import { DAY_MS } from "../model.js";
import type { SimCluster } from "../model.js";
import type { JobTypeFigures, SimJobType } from "../results.js";
import type { Attempt, JobRun } from "../roles/job-run.js";
import { ServerSet } from "../roles/server-set.js";
import type { ComputeRunResult } from "./compute-result.js";
import { FeatureBus } from "./feature-bus.js";
import { phaseOf, Stream, streamSeed } from "./streams.js";

/** The standard normal's 90th percentile: a log-normal's p90 / median = exp(sigma x this). */
export const Z90 = 1.2815515655446004;

/** The placement's log: the simulator keeps none. */
export const SILENT_LOG = new Logger("sim/placement", "error", () => undefined);

/** What the other parts call of {@link SimServers}. */
export interface ServersPort {
  slot(k: number, first: boolean): void;
  report(s: number): void;
  roomFreed(s: number): void;
  shortfall(s: number): number;
  accrueTaken(nowMs: number): void;
  changeHeld(s: number, change: () => void): void;
  updateRate(s: number): void;
  inService(s: number): boolean;
  roomMilli(s: number): number;
  noteOccupancy(s: number): void;
  hasRoom(s: number): boolean;
  accrueOccupancy(nowMs: number): void;
}

/** What the other parts call of {@link SimJobManagers}. */
export interface JobManagersPort {
  killTask(a: Attempt, touched: Set<JobRun>): void;
  killJobManager(am: Attempt, touched: Set<JobRun>): void;
  scheduleNextJob(): void;
  submit(job: SimJob): void;
  queued(run: JobRun): number;
  needsJobManager(run: JobRun): boolean;
  updateAsk(run: JobRun): void;
  launchDelayMs(task: boolean): number;
  jobManagerUp(a: Attempt): void;
  launch(a: Attempt): void;
  scheduleEnd(a: Attempt): void;
  progressOf(a: Attempt, nowMs: number): number | undefined;
}

/** What the other parts call of {@link SchedulerDriver}. */
export interface DriverPort {
  reAsk(touched: Set<JobRun>, gained: readonly number[]): void;
  place(run: JobRun): void;
  heartbeat(s: number): number;
  refreshFree(s: number): void;
  classify(nowMs: number): void;
  /** Applies a placement decision; with `place` false the caller asks and places the job afterwards (`reAsk`). */
  onDecision(run: JobRun, decision: PlacementDecision, place?: boolean): void;
  nodeChoiceSource(): NodeChoiceSource;
  keyOfGrant(alloc: Allocation): ContainerKey;
}

/** What the other parts call of {@link SimNotices} (the preemption notice; only in runs with it on). */
export interface NoticesPort {
  /** Containers named in a notice, and of those the ones killed afterwards. */
  readonly sent: number;
  readonly noticedKilled: number;
  marginMilli(s: number): number;
  warn(s: number, atRisk: readonly Attempt[]): void;
  killed(a: Attempt): void;
  jobManagerLost(run: JobRun): void;
  beforeGrant(): void;
}

/** The roles and features of one run, made by `runCompute` around its {@link ComputeState}. */
export interface SimParts {
  servers: ServersPort;
  jobManagers: JobManagersPort;
  driver: DriverPort;
  /** The preemption notice's part; undefined when it is off. */
  notices: NoticesPort | undefined;
  /** The features, in the order they hear each event. */
  features: SimFeature[];
}

/** See the file header. */
export class ComputeState {
  readonly servers: ServersPort;
  readonly jobManagers: JobManagersPort;
  readonly driver: DriverPort;
  /** The run's features; roles publish their events here and never name a feature. */
  readonly features: FeatureBus;
  /** Container keys and the lifetime predictor, from the lifetimes feature (stock keys and none without it). */
  readonly lifetimes: LifetimesPort;

  readonly engine = new SimEngine();

  readonly scheduler: Scheduler;

  readonly history: HistorySchedulerPolicy | undefined;

  /** The resource manager's Algorithm 1 and its class views (history policy only). */
  readonly placement: HistoryPlacement | undefined;

  readonly classViews: LiveClassViews | undefined;

  readonly taskMilli: number;

  readonly taskResource: Resources;

  readonly jobManagerResource: Resources;

  readonly cost: KillCostModel;

  /** The preemption notice's delivery and books; undefined when it is off (a stock run pays nothing for it). */
  readonly notices: NoticesPort | undefined;

  /** The scheduler and node manager know the primary (stock, history); false under stock-unaware. */
  readonly aware: boolean;

  readonly kmeansRng: SeededRng;

  readonly serverRng: SeededRng;

  readonly launchRng: SeededRng;

  readonly launchSigma: number;

  // Per server.
  readonly nodeIds: string[];

  readonly capMilli: Int32Array;

  readonly reserveMilli: Int32Array;

  /** What the primary wants (whether or not the scheduler knows yet; see `seenMilli`). */
  readonly primaryMilli: Int32Array;

  /** The primary usage the scheduler was last told (at the server's last heartbeat; 0 under stock-unaware). */
  readonly seenMilli: Int32Array;

  /** Held by containers (launching or running, job managers included). */
  readonly secondaryMilli: Int32Array;

  /** Held by launched tasks: what competes with the primary for the CPU. */
  readonly runningTaskMilli: Int32Array;

  /** The share of full speed the launched tasks run at (1 unless the primary out-competes them). */
  readonly rate: Float64Array;

  readonly yieldPending: Uint8Array;

  readonly heartbeatPending: Uint8Array;

  readonly running: Set<Attempt>[];

  readonly serverIndex: Map<string, number>;

  /**
   * Every server as the resource manager's live nodes show it (`liveNodeOf` its scheduler view), kept current in place
   * rather than rebuilt for every decision; `checkInvariants` checks it against the scheduler.
   */
  readonly liveNodes: LiveNode[];

  /** Servers with room for one task, as the scheduler sees them. */
  readonly free: ServerSet;

  readonly runs = new Map<string, JobRun>();

  retryScheduled = false;

  private containerSeq = 0;

  nextJob = 0;

  // Job history, as the resource manager's store keeps it.
  /** Per job name, its last run: duration and place among finished jobs (`jobsFinished` after it). */
  readonly lastRun = new Map<string, { durationMs: number; seq: number }>();

  /** The last `jobHistoryWindow` durations, ascending; `recentRing` holds them in the order they came. */
  readonly recentDurationsMs: number[] = [];

  readonly recentRing: number[] = [];

  recentNext = 0;

  // Figures.
  tasksRun = 0;

  tasksCompleted = 0;

  taskKills = 0;

  jobManagerKills = 0;

  wastedCoreMs = 0;

  taskWaitMs = 0;

  /** The primary's shortfall (milli-cores) summed over servers now, its integral so far, and when it last changed. */
  takenMilli = 0;

  takenMilliMs = 0;

  takenSinceMs = 0;

  jobsFinished = 0;

  jobsWaited = 0;

  jobsOpenedToAll = 0;

  classifications = 0;

  readonly timeByType: Record<SimJobType, { jobs: number; sumMs: number; kills: number }> = {
    short: { jobs: 0, sumMs: 0, kills: 0 },
    medium: { jobs: 0, sumMs: 0, kills: 0 },
    long: { jobs: 0, sumMs: 0, kills: 0 },
  };

  constructor(
    readonly cluster: SimCluster,
    readonly stream: JobStream,
    readonly o: ResolvedComputeOptions,
    parts: (sim: ComputeState) => SimParts,
  ) {
    const made = parts(this);
    this.servers = made.servers;
    this.jobManagers = made.jobManagers;
    this.driver = made.driver;
    this.notices = made.notices;
    this.features = new FeatureBus(made.features);
    this.lifetimes = this.features.lifetimes;
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
        {
          weights: o.weights,
          classWaitMs: o.classWaitMs,
          classFallback: o.classFallback,
          saturationShare: o.saturationShare,
          learnFromKills: o.learnFromKills,
          killedJobsLeaveClasses: o.killedJobsLeaveClasses,
          jobLength: o.jobLength,
        },
        this.classViews,
        this.engine.clock,
        new SeededRng(streamSeed(o.seed, Stream.Classes)),
        SILENT_LOG,
      );
    }
    this.scheduler = new Scheduler(
      this.features.schedulerPolicy(this.history ?? new StockSchedulerPolicy()),
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
    this.away = new Uint8Array(n);
    this.emptyFlag = new Uint8Array(n).fill(1);
    this.emptyCount = n;
    this.roomFlag = new Uint8Array(n);
    for (let s = 0; s < n; s++) {
      if (this.capMilli[s]! - this.reserveMilli[s]! < this.taskMilli) continue;
      this.roomFlag[s] = 1;
      this.roomCount++;
      this.emptyRoomCount++;
    }
    this.occupancySinceMs = cluster.historyMs;
    this.features.setUp();
  }

  run(): void {
    const { cluster, engine } = this;
    const start = cluster.historyMs;
    this.takenSinceMs = start;
    const firstSlot = Math.floor(start / cluster.slotMs);
    this.at(start, () => this.servers.slot(firstSlot, true));
    if (this.history) {
      this.at(start, () => this.driver.classify(start));
      if (this.o.reclassifyIntervalMs > 0) {
        const again = (t: number): void => {
          if (t >= cluster.horizonMs) return;
          this.at(t, () => {
            this.driver.classify(t);
            again(t + this.o.reclassifyIntervalMs);
          });
        };
        again(start + this.o.reclassifyIntervalMs);
      }
    }
    this.jobManagers.scheduleNextJob();
    this.features.runStarted();
    engine.run(cluster.horizonMs, this.o.onProgress, this.o.progressEvery);
    this.servers.accrueTaken(cluster.horizonMs);
    this.servers.accrueOccupancy(cluster.horizonMs);
  }

  /** Schedules `fn` at `t`, wrapped in the invariant check when asked for. */
  at(t: number, fn: () => void): void {
    if (!this.o.checkInvariants) this.engine.at(t, fn);
    else
      this.engine.at(t, () => {
        fn();
        this.checkInvariants();
      });
  }

  /** The next time, from now on, that server `s`'s timer of period `periodMs` fires (each server has its own phase). */
  nextTick(s: number, periodMs: number, salt: number): number {
    const now = this.engine.clock.nowMs();
    const phase = phaseOf(s, salt) * periodMs;
    return phase + Math.ceil((now - phase) / periodMs) * periodMs;
  }

  // The state of node choice by lifetimes (NILAS, LAVA; the lifetimes feature installs it), of servers out of service
  // (the server-events feature takes them out) and of the empty-server figures.

  /** NILAS or LAVA around the placement policy, when a feature wrapped it in one; undefined under stock node choice. */
  nodeChoice: LifetimeNodeChoice | undefined;

  /**
   * Per job: task containers granted in the heartbeat under way whose task `grant` has not taken from the queue yet.
   * The scheduler tells its listener of a grant before the simulator assigns the task, so the task a grant will run
   * is the queue's head plus this many.
   */
  readonly keysInFlight = new Map<string, number>();

  /** Jobs with a retry pending after the node choice's gate declined them (see `placeBestFirst`). */
  readonly gateRetries = new Map<string, number>();

  /** While true, the node choice's source lists every server in service (for `tick`), not only those with room. */
  tickingAll = false;

  /** Per server: 1 while it takes no containers (a feature took it out of service: away, or draining). */
  readonly away: Uint8Array;

  /** Per server: no secondary container; in service, with room for a task beside its primary and reserve. */
  readonly emptyFlag: Uint8Array;

  readonly roomFlag: Uint8Array;

  emptyCount = 0;

  roomCount = 0;

  emptyRoomCount = 0;

  /** Integrals (server-ms) of the counts above since the experiment began, up to `occupancySinceMs`. */
  emptyMs = 0;

  roomMs = 0;

  emptyRoomMs = 0;

  occupancySinceMs = 0;

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
        this.servers.inService(s);
      if (free !== this.free.has(s)) fail(`server ${id} is ${free ? "missing from" : "wrongly in"} the free list`);
    }
    let taken = 0;
    for (let s = 0; s < this.nodeIds.length; s++) taken += this.servers.shortfall(s);
    if (taken !== this.takenMilli)
      fail(`the primaries' shortfall is ${taken} milli-cores but ${this.takenMilli} is kept`);
    for (const run of this.runs.values()) {
      const want = this.jobManagers.needsJobManager(run) ? 1 : run.decided ? this.jobManagers.queued(run) : 0;
      if (this.scheduler.outstanding(run.appId) !== want)
        fail(
          `job ${run.appId} should ask for ${want} containers but asks for ${this.scheduler.outstanding(run.appId)}`,
        );
      for (const a of run.attempts) if (!a.alive) fail(`job ${run.appId} lists an ended attempt ${a.containerId}`);
    }
    let empty = 0;
    let room = 0;
    let emptyRoom = 0;
    for (let s = 0; s < this.nodeIds.length; s++) {
      const e = this.running[s]!.size === 0 ? 1 : 0;
      const r = this.servers.hasRoom(s) ? 1 : 0;
      if (this.emptyFlag[s] !== e || this.roomFlag[s] !== r)
        fail(`server ${this.nodeIds[s]}: the empty-server flags are stale`);
      empty += e;
      room += r;
      emptyRoom += e * r;
    }
    if (empty !== this.emptyCount || room !== this.roomCount || emptyRoom !== this.emptyRoomCount)
      fail("the empty-server counts differ from the servers'");
    if (this.keysInFlight.size > 0) fail("task grants are in flight between heartbeats");
    this.features.checkBooks(fail);
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
    const spanMs = (cluster.horizonMs - cluster.historyMs) * cluster.servers.length;
    const now = this.engine.clock.nowMs();
    let heldCoreMs = this.endedHeldCoreMs;
    for (const containers of this.running)
      for (const a of containers) heldCoreMs += ((now - a.startMs) * a.milli) / 1000;
    const harvestable = harvestableCoreMs(cluster, cluster.historyMs, cluster.horizonMs, this.o.reserveFraction);
    // Without a feature, a figure keeps the value of a run without it.
    const f = this.features.figures({
      reclaims: 0,
      reclaimsHittingEmpty: 0,
      reclaimKilledCoreHours: 0,
      admission: "none",
      admissionThreshold: 1,
      jobsAdmitted: this.nextJob,
      jobsRejected: 0,
      jobsQueuedAtEnd: 0,
      avgAdmissionWaitS: 0,
    });
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
      nodeChoice: this.o.nodeChoice,
      lifetimes: this.o.lifetimes,
      emptyServerShare: spanMs > 0 ? this.emptyMs / spanMs : 0,
      emptyShareWithRoom: this.roomMs > 0 ? this.emptyRoomMs / this.roomMs : 0,
      reclaims: f.reclaims,
      reclaimsHittingEmpty: f.reclaimsHittingEmpty,
      reclaimKilledCoreHours: f.reclaimKilledCoreHours,
      ...(f.reimages ? { reimages: f.reimages } : {}),
      admission: f.admission,
      admissionThreshold: f.admissionThreshold,
      jobsAdmitted: f.jobsAdmitted,
      jobsRejected: f.jobsRejected,
      jobsQueuedAtEnd: f.jobsQueuedAtEnd,
      avgAdmissionWaitS: f.avgAdmissionWaitS,
      secondaryCoreHours: heldCoreMs / 3_600_000,
      harvestableCoreHours: harvestable / 3_600_000,
      harvestedUtilization: harvestable > 0 ? heldCoreMs / harvestable : 0,
      killedTaskHoursFraction: heldCoreMs > 0 ? this.wastedCoreMs / heldCoreMs : 0,
      noticesSent: this.notices?.sent ?? 0,
      noticedKilled: this.notices?.noticedKilled ?? 0,
    };
  }

  /** Core-ms held by containers that have ended (from grant to end; see `secondaryCoreHours`). */
  endedHeldCoreMs = 0;
}
