/**
 * The resource manager's side of Algorithm 1 (seeds/004, section 4.1): for every job it keeps the job type (from the
 * job history), the requirement (max concurrency x task size), the chosen classes, and, while no class has room, why
 * the job waits. The choice itself is the pure `selectClasses`; this module assembles its inputs from the live nodes
 * and the last classification, and tells the `HistorySchedulerPolicy` which servers each job may use.
 */
import type { Logger } from "../common/log.js";
import type { Rng } from "../common/rng.js";
import type { Resources } from "../common/resource.js";
import { requirementMilli, selectClasses } from "./class-selection.js";
import type { ClassView, ClassWeights, HistorySchedulerPolicy, JobType, ServerCapacity } from "./class-selection.js";
import type { TenantClass } from "./classifier.js";

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
}

/** Chooses classes for jobs and keeps the scheduler policy's server sets up to date. */
export class HistoryPlacement {
  private classes: readonly TenantClass[] = [];
  private readonly apps = new Map<string, AppEntry>();

  constructor(
    private readonly policy: HistorySchedulerPolicy,
    private readonly options: HistoryPlacementOptions,
    private readonly rng: Rng,
    private readonly log: Logger,
  ) {}

  /** The classes of the last classification (chosen classes of running jobs are kept). */
  setClasses(classes: readonly TenantClass[]): void {
    this.classes = classes;
  }

  /** A job manager registered: its type and maximum concurrency. */
  register(appId: string, jobType: JobType, maxConcurrency: number): void {
    const prev = this.apps.get(appId);
    if (prev?.decided) {
      // A new attempt of a job keeps its classes.
      prev.maxConcurrency = maxConcurrency;
      return;
    }
    this.apps.set(appId, {
      jobType,
      maxConcurrency,
      taskMilli: 0,
      classIds: [],
      note: "waiting for the job's first task request",
      waitingSinceMs: undefined,
      decided: false,
    });
  }

  /** The job asks for task containers of `taskMilli` vcores-milli; chooses its classes when not yet done. */
  onAsk(appId: string, taskMilli: number, nowMs: number, nodes: () => readonly LiveNode[]): void {
    const app = this.apps.get(appId);
    if (!app || app.decided || taskMilli <= 0) return;
    app.taskMilli = Math.max(app.taskMilli, taskMilli);
    app.waitingSinceMs ??= nowMs;
    this.decide(appId, app, nowMs, nodes());
  }

  /** Retries every waiting job (called periodically: headroom changes as primaries and jobs come and go). */
  retryWaiting(nowMs: number, nodes: () => readonly LiveNode[]): void {
    let live: readonly LiveNode[] | undefined;
    for (const [appId, app] of this.apps) {
      if (app.decided || app.waitingSinceMs === undefined) continue;
      live ??= nodes();
      this.decide(appId, app, nowMs, live);
    }
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

  /** The classes as Algorithm 1 sees them now: the last classification's, with live capacity and utilization. */
  classViews(nodes: readonly LiveNode[]): ClassView[] {
    const live = new Map(nodes.map((n) => [n.nodeId, n]));
    const covered = new Set<string>();
    const views: ClassView[] = [];
    for (const c of this.classes) {
      const members = c.servers.flatMap((s) => {
        covered.add(s);
        const n = live.get(s);
        return n ? [n] : [];
      });
      views.push({
        classId: c.id,
        pattern: c.pattern,
        average: c.average,
        peak: c.peak,
        current: liveUtilization(members) ?? c.current,
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

  private decide(appId: string, app: AppEntry, nowMs: number, nodes: readonly LiveNode[]): void {
    const views = this.classViews(nodes);
    const requirement = requirementMilli(Math.max(1, app.maxConcurrency), app.taskMilli);
    const selection = selectClasses({
      jobType: app.jobType,
      requirementMilli: requirement,
      classes: views,
      weights: this.options.weights,
      rng: this.rng,
    });
    if (selection.kind !== "none") {
      const chosen = new Set(selection.classIds);
      const servers = views.filter((v) => chosen.has(v.classId)).flatMap((v) => v.servers.map((s) => s.serverId));
      // Every server of a chosen class, live now or not: a class's servers that come back are fair game.
      for (const c of this.classes) if (chosen.has(c.id)) servers.push(...c.servers);
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
      return;
    }
    const waited = nowMs - (app.waitingSinceMs ?? nowMs);
    if (this.options.classWaitMs > 0 && waited >= this.options.classWaitMs) {
      this.policy.openToAll(appId);
      app.decided = true;
      app.classIds = [];
      app.note = `${selection.reason}; waited ${Math.round(waited / 1000)} s, so it runs on any server`;
      this.log.warn("job found no class in time; running it on any server", { appId, reason: selection.reason });
      return;
    }
    app.note = `waiting: ${selection.reason}`;
  }
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
