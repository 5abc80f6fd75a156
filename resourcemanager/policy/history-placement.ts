/**
 * The resource manager's side of Algorithm 1 (seeds/004, section 4.1): for every job it keeps the job type (from the
 * job history), the requirement (max concurrency x task size), the chosen classes, and, while no class has room, why
 * the job waits. The choice itself is the pure `selectClasses`; this module assembles its inputs from a
 * `ClassViewSource` (the resource manager's live nodes and last classification, or the simulator's servers) and tells
 * the `HistorySchedulerPolicy` which servers each job may use.
 */
import type { Clock } from "../../common/clock.js";
import type { Logger } from "../../common/log.js";
import type { Rng } from "../../common/rng.js";
import type { Resources } from "../../common/resource.js";
import { requirementMilli, selectClasses } from "./class-selection.js";
import type {
  ClassView,
  ClassWeights,
  HistorySchedulerPolicy,
  JobLengthRule,
  JobType,
  ServerCapacity,
} from "./class-selection.js";
import type { TenantClass } from "./classifier.js";
import type { NodeView } from "./scheduler.js";

/** The id of the pseudo-class of live servers no class covers (no tenant, or a tenant without history yet). */
export const UNCLASSIFIED_CLASS = "unclassified";

/** What the placement needs to know of a live node. */
export interface LiveNode {
  nodeId: string;
  capacity: Resources;
  primaryUsage: Resources;
  allocated: Resources;
  reserveMilli: number;
}

/** Per-job placement state, as reports show it. */
export interface JobPlacement {
  jobType: JobType;
  classIds: string[];
  note: string;
}

interface AppEntry extends JobPlacement {
  maxConcurrency: number;
  /** The job's last run, ms (for the per-class job length); undefined for a job never seen. */
  lastDurationMs: number | undefined;
  taskMilli: number;
  /** When the job first asked for task containers (ms), while it waits for a class. */
  waitingSinceMs: number | undefined;
  decided: boolean;
}

/** Settings of the history placement. */
export interface HistoryPlacementOptions {
  weights: ClassWeights;
  /** A job that finds no class with room for this long runs on any server (0: wait for ever). */
  classWaitMs: number;
  /** Medium and long jobs' class headroom by the Cantelli bound at this threshold (absent: by utilization). */
  cantelliThreshold?: number | undefined;
  /**
   * What a job does when no class, nor any combination of classes, has room for it: "stock" places it as the stock
   * policy does at once (its tasks on any server with headroom); "wait" is seeds/004's "do not pick classes": it waits
   * for a class, up to `classWaitMs`, its job manager holding cores meanwhile. @default "stock"
   */
  classFallback?: ClassFallback;
  /**
   * Near saturation a job is placed as stock places it: when Harvest's containers already hold at least this share of
   * the cores the primaries leave now (capacity x (1 - current utilization) - reserve, over every live server),
   * confining a job to some classes only queues its tasks while other servers could run them. 1: never.
   * @default 0.65
   */
  saturationShare?: number;
  /**
   * Learning from kills: a server whose primary killed Harvest's work is avoided by the tasks of long jobs kept to their
   * classes for as long as its class's bursts last (`TenantClass.burstMs`; `DEFAULT_KILL_HOLD_MS` without one); a job
   * placed as stock is not held back. Off by default: in the sweep's busy cells it queued long jobs' tasks
   * behind their held servers (`harvest sim sweep --learn-from-kills`). @default false
   */
  learnFromKills?: boolean;
  /**
   * A short or medium job kept to its classes whose task a primary killed runs on any server from then on, its re-run
   * first: Algorithm 1 confines short jobs to the classes most likely to kill them, and the re-run would otherwise go
   * back to the same servers. Long jobs stay in their (steady) classes: letting them leave too cost history 0.2-1.9
   * points of its gain over stock at 1,000 servers. On by default: it keeps history within 1 % of stock in every cell
   * of the sweep (`harvest sim sweep --no-killed-jobs-leave` measures without). @default true
   */
  killedJobsLeaveClasses?: boolean;
  /**
   * How a job's type is judged: "terciles" of the history's job lengths, the same type in every class (seeds/004), or
   * "per-class": its last run against each class's mean time between bursts (`jobTypeForClass`). @default "terciles"
   */
  jobLength?: JobLengthRule;
}

/** How long a server that killed work is avoided by long jobs when its class has no burst length. */
export const DEFAULT_KILL_HOLD_MS = 30 * 60_000;

/**
 * When each server's primary last killed Harvest's work, and whether it is still held: for `holdOf(server)` ms after
 * (its class's burst length), or `DEFAULT_KILL_HOLD_MS`. Pure: times are given.
 */
export class KillMemory {
  private readonly lastKillMs = new Map<string, number>();

  constructor(private readonly holdOf: (serverId: string) => number | undefined) {}

  /** The primary of `serverId` killed a container at `nowMs`. */
  record(serverId: string, nowMs: number): void {
    this.lastKillMs.set(serverId, nowMs);
  }

  /** True while `serverId` is held after its last kill. */
  held(serverId: string, nowMs: number): boolean {
    const last = this.lastKillMs.get(serverId);
    if (last === undefined) return false;
    const hold = this.holdOf(serverId) ?? DEFAULT_KILL_HOLD_MS;
    if (nowMs - last < hold) return true;
    this.lastKillMs.delete(serverId);
    return false;
  }
}

/** See `HistoryPlacementOptions.classFallback`. */
export type ClassFallback = "stock" | "wait";

/** The history policy's choices, and their defaults (the resource manager's and the simulator's). */
export const CLASS_FALLBACKS: readonly ClassFallback[] = ["stock", "wait"];
export const JOB_LENGTH_RULES: readonly JobLengthRule[] = ["terciles", "per-class"];
export const DEFAULT_CLASS_FALLBACK: ClassFallback = "stock";
export const DEFAULT_SATURATION_SHARE = 0.65;
export const DEFAULT_LEARN_FROM_KILLS = false;
export const DEFAULT_KILLED_JOBS_LEAVE_CLASSES = true;
export const DEFAULT_JOB_LENGTH: JobLengthRule = "terciles";

/** "must be "a" or "b"": the message of a choice outside `allowed`. */
export function mustBeOneOf(allowed: readonly string[], got: unknown): string {
  return `must be ${allowed.map((a) => JSON.stringify(a)).join(" or ")} (got ${JSON.stringify(got)})`;
}

/**
 * How full Harvest is now: the cores its containers hold over the cores the primaries leave (capacity x (1 - the
 * class's current utilization) - reserve, floored at zero, plus what is held: a server whose primary grew into
 * Harvest's containers counts them as used, not as more than full). 0 for no servers.
 */
export function occupiedShare(views: readonly ClassView[]): number {
  let held = 0;
  let usable = 0;
  for (const v of views) {
    const current = Number.isFinite(v.current) ? Math.min(100, Math.max(0, v.current)) : 100;
    for (const s of v.servers) {
      const left = Math.floor((s.capacityMilli * (100 - current)) / 100) - s.reserveMilli;
      held += s.allocatedMilli;
      usable += Math.max(left, s.allocatedMilli, 0);
    }
  }
  return usable > 0 ? held / usable : 0;
}

/**
 * Where the placement reads the classes as Algorithm 1 sees them now. The resource manager's is `LiveClassViews` over
 * its running nodes and the tenant registry's last classification; the simulator gives the same class its simulated
 * servers at simulated time.
 */
export interface ClassViewSource {
  /** The classes now (ids unique), each with its live servers and live utilization. */
  classViews(): readonly ClassView[];
  /**
   * Every server of class `classId`, live now or not (a class's servers that come back are fair game for the jobs
   * placed in it). When omitted, a class's servers are those of its view.
   */
  members?(classId: string): readonly string[];
  /** How long the bursts of the class of `serverId` last (`TenantClass.burstMs`), ms; undefined when unknown. */
  burstMsOf?(serverId: string): number | undefined;
}

/** What the placement decided for a job when asked (`onAsk`) or retried (`retryWaiting`). */
export type PlacementDecision =
  /** Algorithm 1 chose classes: the job's tasks may use their servers (now assigned in the scheduler policy). */
  | { kind: "classes"; appId: string; classIds: string[]; reason: string }
  /** No class had room for `classWaitMs`: the job's tasks may use any server. */
  | { kind: "any"; appId: string; reason: string }
  /** No class has room now; the job waits and is retried. */
  | { kind: "wait"; appId: string; reason: string };

/**
 * Chooses classes for jobs and keeps the scheduler policy's server sets up to date. Pure policy: the classes come from
 * an injected `ClassViewSource`, time from an injected `Clock`, draws from an injected `Rng`; the resource manager and
 * the simulator drive the same class.
 */
export class HistoryPlacement {
  private readonly apps = new Map<string, AppEntry>();
  private readonly kills: KillMemory;

  constructor(
    private readonly policy: HistorySchedulerPolicy,
    private readonly options: HistoryPlacementOptions,
    private readonly source: ClassViewSource,
    private readonly clock: Clock,
    private readonly rng: Rng,
    private readonly log: Logger,
  ) {
    this.kills = new KillMemory((serverId) => source.burstMsOf?.(serverId));
    if (options.learnFromKills ?? DEFAULT_LEARN_FROM_KILLS)
      policy.setAvoid((appId, nodeId) => {
        // Only a job kept to its classes: one placed as stock (near saturation, or with no class to hold it) takes
        // what any server offers, or it would queue behind every recent kill.
        const app = this.apps.get(appId);
        return app?.jobType === "long" && app.classIds.length > 0 && this.kills.held(nodeId, this.clock.nowMs());
      });
  }

  /**
   * The primary of `serverId` killed one of Harvest's containers now (a yield, not a drain or a cap), of job `appId`
   * when known. Returns the job's new placement when the kill opens it to every server (`killedJobsLeaveClasses`).
   */
  noteKill(serverId: string, appId?: string): PlacementDecision | undefined {
    if (this.options.learnFromKills ?? DEFAULT_LEARN_FROM_KILLS) this.kills.record(serverId, this.clock.nowMs());
    if (!(this.options.killedJobsLeaveClasses ?? DEFAULT_KILLED_JOBS_LEAVE_CLASSES) || appId === undefined)
      return undefined;
    const app = this.apps.get(appId);
    // A long job stays: its classes are the steady ones, and a job that runs for hours meets a kill anywhere.
    if (!app?.decided || app.classIds.length === 0 || app.jobType === "long") return undefined;
    return this.openToAll(
      appId,
      app,
      `placed in ${app.classIds.join(", ")}; a primary killed one of its tasks on ${serverId}, so it runs on any server`,
    );
  }

  /** A job manager registered: its type, maximum concurrency and last run (ms; undefined for a job never seen). */
  register(appId: string, jobType: JobType, maxConcurrency: number, lastDurationMs?: number): void {
    const prev = this.apps.get(appId);
    if (prev?.decided) {
      // A new attempt of a job keeps its classes.
      prev.maxConcurrency = maxConcurrency;
      return;
    }
    this.apps.set(appId, {
      jobType,
      maxConcurrency,
      lastDurationMs,
      taskMilli: 0,
      classIds: [],
      note: "waiting for the job's first task request",
      waitingSinceMs: undefined,
      decided: false,
    });
  }

  /**
   * The job asks for task containers of `taskMilli` vcores-milli; chooses its classes when not yet done. Returns what
   * was decided, or undefined when nothing was to decide (unknown or already decided job, no task ask).
   */
  onAsk(appId: string, taskMilli: number): PlacementDecision | undefined {
    const app = this.apps.get(appId);
    if (!app || app.decided || taskMilli <= 0) return undefined;
    app.taskMilli = Math.max(app.taskMilli, taskMilli);
    app.waitingSinceMs ??= this.clock.nowMs();
    const views = this.source.classViews();
    return this.decide(appId, app, this.clock.nowMs(), views, occupiedShare(views));
  }

  /**
   * Retries every waiting job, in registration order, against one reading of the class views (called periodically:
   * headroom changes as primaries and jobs come and go); near saturation (`saturationShare`), also opens every job
   * confined to classes to all servers. Returns the decisions, waits included.
   */
  retryWaiting(): PlacementDecision[] {
    const out: PlacementDecision[] = [];
    let views: readonly ClassView[] | undefined;
    let share: number | undefined;
    const nowMs = this.clock.nowMs();
    for (const [appId, app] of this.apps) {
      if (app.decided || app.waitingSinceMs === undefined) continue;
      views ??= this.source.classViews();
      share ??= occupiedShare(views);
      out.push(this.decide(appId, app, nowMs, views, share));
    }
    // Near saturation, the jobs confined to classes earlier run anywhere from now on: their tasks would queue on their
    // classes' servers while others have room.
    const saturationShare = this.options.saturationShare ?? DEFAULT_SATURATION_SHARE;
    if (saturationShare < 1 && this.confinedJobs() > 0) {
      views ??= this.source.classViews();
      share ??= occupiedShare(views);
      if (share >= saturationShare)
        for (const [appId, app] of this.apps)
          if (app.decided && app.classIds.length > 0)
            out.push(
              this.openToAll(
                appId,
                app,
                `placed in ${app.classIds.join(", ")}; the cluster neared saturation (Harvest holds ${Math.round(share * 100)} % of what the primaries leave), so it runs on any server`,
              ),
            );
    }
    return out;
  }

  /** Jobs whose tasks are kept to their classes' servers now. */
  confinedJobs(): number {
    let n = 0;
    for (const app of this.apps.values()) if (app.decided && app.classIds.length > 0) n++;
    return n;
  }

  /** Forgets a job. */
  remove(appId: string): void {
    this.apps.delete(appId);
    this.policy.unassign(appId);
  }

  /** The job's placement as reports show it. */
  placement(appId: string): JobPlacement | undefined {
    const app = this.apps.get(appId);
    return app ? { jobType: app.jobType, classIds: app.classIds, note: app.note } : undefined;
  }

  /** Algorithm 1 for one job, on `views` read once per call and Harvest's `share` of them (`occupiedShare`). */
  private decide(
    appId: string,
    app: AppEntry,
    nowMs: number,
    views: readonly ClassView[],
    share: number,
  ): PlacementDecision {
    const saturationShare = this.options.saturationShare ?? DEFAULT_SATURATION_SHARE;
    if (saturationShare < 1 && share >= saturationShare)
      return this.openToAll(
        appId,
        app,
        `the cluster is near saturation (Harvest holds ${Math.round(share * 100)} % of what the primaries leave), so it runs on any server`,
      );
    const requirement = requirementMilli(Math.max(1, app.maxConcurrency), app.taskMilli);
    const selection = selectClasses({
      jobType: app.jobType,
      requirementMilli: requirement,
      classes: views,
      weights: this.options.weights,
      rng: this.rng,
      cantelliThreshold: this.options.cantelliThreshold,
      perClass: this.options.jobLength === "per-class" ? { lastDurationMs: app.lastDurationMs } : undefined,
    });
    if (selection.kind !== "none") {
      const chosen = new Set(selection.classIds);
      const servers: string[] = [];
      for (const v of views) {
        if (!chosen.has(v.classId)) continue;
        for (const s of v.servers) servers.push(s.serverId);
        // Every server of a chosen class, live now or not: a class's servers that come back are fair game.
        const members = this.source.members?.(v.classId);
        if (members) for (const s of members) servers.push(s);
      }
      this.policy.assign(appId, servers);
      app.decided = true;
      app.classIds = selection.classIds;
      app.note = selection.reason;
      this.log.info("job placed in classes", {
        appId,
        jobType: app.jobType,
        classes: selection.classIds.join(","),
        requirementMilli: requirement,
        reason: selection.reason,
      });
      return { kind: "classes", appId, classIds: selection.classIds, reason: selection.reason };
    }
    if ((this.options.classFallback ?? DEFAULT_CLASS_FALLBACK) === "stock")
      return this.openToAll(appId, app, `${selection.reason}, so it runs on any server`);
    const waited = nowMs - (app.waitingSinceMs ?? nowMs);
    if (this.options.classWaitMs > 0 && waited >= this.options.classWaitMs)
      return this.openToAll(
        appId,
        app,
        `${selection.reason}; waited ${Math.round(waited / 1000)} s, so it runs on any server`,
      );
    app.note = `waiting: ${selection.reason}`;
    return { kind: "wait", appId, reason: app.note };
  }

  /** Places the job as the stock policy would: its tasks on any server. */
  private openToAll(appId: string, app: AppEntry, note: string): PlacementDecision {
    this.policy.openToAll(appId);
    app.decided = true;
    app.classIds = [];
    app.note = note;
    this.log.info("job placed as stock places it", { appId, reason: note });
    return { kind: "any", appId, reason: note };
  }
}

/**
 * The resource manager's class-view source: the tenant registry's last classification (`setClasses`) over the running
 * nodes `nodes()` returns (see `classViewsOf`).
 */
export class LiveClassViews implements ClassViewSource {
  private classes: readonly TenantClass[] = [];
  private byId = new Map<string, TenantClass>();
  private burstByServer = new Map<string, number>();

  constructor(private readonly nodes: () => readonly LiveNode[]) {}

  /** The classes of the last classification (chosen classes of running jobs are kept). */
  setClasses(classes: readonly TenantClass[]): void {
    this.classes = classes;
    this.byId = new Map(classes.map((c) => [c.id, c]));
    this.burstByServer = new Map();
    for (const c of classes)
      if (c.burstMs !== undefined) for (const s of c.servers) this.burstByServer.set(s, c.burstMs);
  }

  burstMsOf(serverId: string): number | undefined {
    return this.burstByServer.get(serverId);
  }

  classViews(): ClassView[] {
    return classViewsOf(this.classes, this.nodes());
  }

  members(classId: string): readonly string[] {
    return this.byId.get(classId)?.servers ?? [];
  }
}

/**
 * The classes as Algorithm 1 sees them now: each class of `classes` with its live members among `nodes` (their
 * capacity, reserve and allocation) and their mean primary utilization as `current` (the class's own `current` when
 * none is live); then, when live nodes remain that no class covers, the pseudo-class `UNCLASSIFIED_CLASS` of them,
 * unpredictable, its average, peak and current all their live utilization. Servers keep the order of their class (the
 * unclassified ones, of `nodes`).
 */
export function classViewsOf(classes: readonly TenantClass[], nodes: readonly LiveNode[]): ClassView[] {
  const live = new Map<string, LiveNode>();
  for (const n of nodes) live.set(n.nodeId, n);
  const covered = new Set<string>();
  const views: ClassView[] = [];
  for (const c of classes) {
    const members: LiveNode[] = [];
    for (const s of c.servers) {
      covered.add(s);
      const n = live.get(s);
      if (n) members.push(n);
    }
    views.push({
      classId: c.id,
      pattern: c.pattern,
      average: c.average,
      peak: c.peak,
      current: liveUtilization(members) ?? c.current,
      ...(c.stddev !== undefined ? { stddev: c.stddev } : {}),
      ...(c.burstGapMs !== undefined ? { burstGapMs: c.burstGapMs } : {}),
      servers: members.map(capacityOf),
    });
  }
  const rest = nodes.filter((n) => !covered.has(n.nodeId));
  if (rest.length > 0) {
    // Nothing is known of these servers' history: treat them as unpredictable, at their live level.
    const u = liveUtilization(rest) ?? 0;
    views.push({
      classId: UNCLASSIFIED_CLASS,
      pattern: "unpredictable",
      average: u,
      peak: u,
      current: u,
      servers: rest.map(capacityOf),
    });
  }
  return views;
}

/**
 * A scheduler node as the placement sees it (the resource manager's `liveNodes` maps each running node so): its
 * reserve is the scheduler's, capacity x `reserveFraction` rounded up.
 */
export function liveNodeOf(
  view: Pick<NodeView, "nodeId" | "capacity" | "primaryUsage" | "allocated">,
  reserveFraction: number,
): LiveNode {
  return {
    nodeId: view.nodeId,
    capacity: view.capacity,
    primaryUsage: view.primaryUsage,
    allocated: view.allocated,
    reserveMilli: Math.ceil(view.capacity.vcoresMilli * reserveFraction),
  };
}

function capacityOf(n: LiveNode): ServerCapacity {
  return {
    serverId: n.nodeId,
    capacityMilli: n.capacity.vcoresMilli,
    reserveMilli: n.reserveMilli,
    allocatedMilli: n.allocated.vcoresMilli,
  };
}

/** Mean primary CPU % of `nodes`, or undefined for none. */
export function liveUtilization(nodes: readonly LiveNode[]): number | undefined {
  if (nodes.length === 0) return undefined;
  let sum = 0;
  for (const n of nodes) sum += (100 * n.primaryUsage.vcoresMilli) / Math.max(1, n.capacity.vcoresMilli);
  return sum / nodes.length;
}
