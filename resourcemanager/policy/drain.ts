/**
 * Graceful drain of a server before a planned reimage or maintenance: YARN's graceful decommissioning with the order of
 * LARS (seeds/002 section 4.4). Pure bookkeeping, no I/O and no timers: the resource manager calls `step` on its
 * monitor tick with the containers still on each draining server, and the simulator does the same at simulated time.
 *
 * From `start` on, the server gets no new containers (the caller marks it unschedulable). Then, at every step:
 * - a container predicted (re-predicted now, from its uptime) to end before the deadline is left to finish;
 * - the others are preempted, the one with the longest predicted remaining lifetime first (LARS: while the long ones
 *   are moved, the short ones end on their own, so fewer are disrupted), at most `preemptionsPerSecond` (a token bucket
 *   with a burst of `burst`), as LARS moves VMs in small batches; job managers go last, as the yield controller kills
 *   them last, since a job manager's preemption stops its whole job until its next attempt registers;
 * - at the deadline, whatever is left is preempted at once, and counted as killed at the deadline.
 * Preempted work re-runs elsewhere and is never a failure (`PREEMPTED_BY_DRAIN`). A drain without a deadline never
 * preempts: it waits for the server's containers to end, as a YARN decommission without a timeout does.
 *
 * `order: "arbitrary"` keeps the baseline LARS is measured against: the same rate and the same rule for what must go,
 * in the order the containers were granted, oldest first.
 */
import { optionResolution } from "../../common/options.js";

/** Settings of the drain. */
export interface DrainOptions {
  /** The steady rate of drain preemptions, per server. @default 1 */
  preemptionsPerSecond: number;
  /** At most this many preemptions at once on one server (the bucket's size). @default 2 */
  burst: number;
  /** A container must be predicted to end this long before the deadline to be left to finish, ms. @default 2000 */
  marginMs: number;
  /** `lars`: longest predicted remaining first; `arbitrary`: the baseline, oldest grant first. @default "lars" */
  order: "lars" | "arbitrary";
}

export const DEFAULT_DRAIN_OPTIONS: DrainOptions = {
  preemptionsPerSecond: 1,
  burst: 2,
  marginMs: 2_000,
  order: "lars",
};

export function resolveDrainOptions(partial: Partial<DrainOptions> = {}): DrainOptions {
  const { o, bad } = optionResolution("drain", DEFAULT_DRAIN_OPTIONS, partial);
  if (!(Number.isFinite(o.preemptionsPerSecond) && o.preemptionsPerSecond > 0))
    bad("preemptionsPerSecond", "must be > 0");
  if (!(Number.isInteger(o.burst) && o.burst >= 1)) bad("burst", "must be an integer >= 1");
  if (!(Number.isFinite(o.marginMs) && o.marginMs >= 0)) bad("marginMs", "must be >= 0");
  if (o.order !== "lars" && o.order !== "arbitrary") bad("order", 'must be "lars" or "arbitrary"');
  return o;
}

/** A container on a draining server, as the drain sees it. */
export interface DrainContainer {
  containerId: string;
  /** When it was granted (ms). */
  startMs: number;
  isJobManager: boolean;
  /** Its predicted remaining lifetime now, ms (re-predicted by the caller from the lifetime model at every step). */
  remainingMs: number;
}

/** Where a drain stands, as `harvest admin drain --status` shows it. */
export interface DrainStatus {
  nodeId: string;
  /** DRAINING while containers are left; DRAINED once none is. */
  state: "DRAINING" | "DRAINED";
  startedMs: number;
  /** 0: no deadline. */
  deadlineMs: number;
  finishedMs: number;
  /** Containers on the server now. */
  containersLeft: number;
  /** Of those, predicted to end before the deadline (left to finish). */
  predictedToFinish: number;
  /** Containers that were there at the start (or granted before the server stopped taking work) and ended on their own. */
  finishedOnTheirOwn: number;
  /** Preempted before the deadline, in LARS order. */
  preempted: number;
  /** Preempted because the deadline came. */
  killedAtDeadline: number;
}

/** What one step decided for a server. */
export interface DrainStep {
  /** Containers to preempt now, in order. */
  preempt: string[];
  /** True when these are the deadline's kills. */
  atDeadline: boolean;
}

interface DrainEntry extends DrainStatus {
  tokens: number;
  tokensAtMs: number;
  /** Containers seen on the server and not yet gone, and those this drain preempted. */
  seen: Set<string>;
  preemptedIds: Set<string>;
}

/** The drains in progress (and finished ones, until undrained). */
export class DrainTracker {
  readonly options: DrainOptions;
  private readonly drains = new Map<string, DrainEntry>();

  constructor(options: Partial<DrainOptions> = {}) {
    this.options = resolveDrainOptions(options);
  }

  /** Starts (or re-times) the drain of a server. `deadlineMs` 0 or undefined: no deadline. */
  start(nodeId: string, nowMs: number, deadlineMs = 0): DrainStatus {
    const existing = this.drains.get(nodeId);
    if (existing) {
      existing.deadlineMs = deadlineMs;
      if (existing.state === "DRAINED" && existing.containersLeft > 0) existing.state = "DRAINING";
      return this.statusOf(existing);
    }
    const entry: DrainEntry = {
      nodeId,
      state: "DRAINING",
      startedMs: nowMs,
      deadlineMs,
      finishedMs: 0,
      containersLeft: 0,
      predictedToFinish: 0,
      finishedOnTheirOwn: 0,
      preempted: 0,
      killedAtDeadline: 0,
      tokens: this.options.burst,
      tokensAtMs: nowMs,
      seen: new Set(),
      preemptedIds: new Set(),
    };
    this.drains.set(nodeId, entry);
    return this.statusOf(entry);
  }

  /** Ends a server's drain (undrain); returns whether it was draining. */
  stop(nodeId: string): boolean {
    return this.drains.delete(nodeId);
  }

  isDraining(nodeId: string): boolean {
    return this.drains.has(nodeId);
  }

  /** Servers with a drain (draining or drained). */
  nodeIds(): string[] {
    return [...this.drains.keys()];
  }

  /**
   * One step of a server's drain, with the containers on it now (their remaining lifetimes re-predicted by the caller).
   * Returns the containers to preempt now; the caller kills them with `PREEMPTED_BY_DRAIN`.
   */
  step(nodeId: string, nowMs: number, containers: readonly DrainContainer[]): DrainStep {
    const d = this.drains.get(nodeId);
    if (!d) return { preempt: [], atDeadline: false };
    const here = new Set(containers.map((c) => c.containerId));
    for (const id of d.seen) {
      if (here.has(id)) continue;
      d.seen.delete(id);
      if (!d.preemptedIds.delete(id)) d.finishedOnTheirOwn += 1;
    }
    for (const id of here) d.seen.add(id);
    // Tokens accrue at the steady rate up to the burst.
    d.tokens = Math.min(
      this.options.burst,
      d.tokens + ((nowMs - d.tokensAtMs) / 1_000) * this.options.preemptionsPerSecond,
    );
    d.tokensAtMs = nowMs;
    const live = containers.filter((c) => !d.preemptedIds.has(c.containerId));
    d.containersLeft = live.length;
    if (live.length === 0) {
      if (d.state === "DRAINING") {
        d.state = "DRAINED";
        d.finishedMs = nowMs;
      }
      d.predictedToFinish = 0;
      return { preempt: [], atDeadline: false };
    }
    d.state = "DRAINING";
    d.finishedMs = 0;
    if (d.deadlineMs > 0 && nowMs >= d.deadlineMs) {
      const preempt = drainOrder(live, "lars").map((c) => c.containerId);
      for (const id of preempt) d.preemptedIds.add(id);
      d.killedAtDeadline += preempt.length;
      d.predictedToFinish = 0;
      return { preempt, atDeadline: true };
    }
    if (d.deadlineMs <= 0) {
      d.predictedToFinish = live.length;
      return { preempt: [], atDeadline: false };
    }
    const mustGo = live.filter((c) => nowMs + c.remainingMs > d.deadlineMs - this.options.marginMs);
    d.predictedToFinish = live.length - mustGo.length;
    const preempt: string[] = [];
    for (const c of drainOrder(mustGo, this.options.order)) {
      if (d.tokens < 1) break;
      d.tokens -= 1;
      preempt.push(c.containerId);
      d.preemptedIds.add(c.containerId);
      d.preempted += 1;
    }
    return { preempt, atDeadline: false };
  }

  /** Where each drain stands, by server id. */
  status(nodeId?: string): DrainStatus[] {
    const out: DrainStatus[] = [];
    for (const d of this.drains.values()) if (!nodeId || d.nodeId === nodeId) out.push(this.statusOf(d));
    return out.sort((a, b) => a.nodeId.localeCompare(b.nodeId));
  }

  private statusOf(d: DrainEntry): DrainStatus {
    return {
      nodeId: d.nodeId,
      state: d.state,
      startedMs: d.startedMs,
      deadlineMs: d.deadlineMs,
      finishedMs: d.finishedMs,
      containersLeft: d.containersLeft,
      predictedToFinish: d.predictedToFinish,
      finishedOnTheirOwn: d.finishedOnTheirOwn,
      preempted: d.preempted,
      killedAtDeadline: d.killedAtDeadline,
    };
  }
}

/**
 * The order in which a drain preempts: tasks before job managers; among each, `lars` puts the longest predicted
 * remaining lifetime first (ties: the younger first), `arbitrary` the oldest grant first.
 */
export function drainOrder<T extends DrainContainer>(containers: readonly T[], order: "lars" | "arbitrary"): T[] {
  return [...containers].sort((a, b) => {
    if (a.isJobManager !== b.isJobManager) return a.isJobManager ? 1 : -1;
    if (order === "lars" && a.remainingMs !== b.remainingMs) return b.remainingMs - a.remainingMs;
    return order === "lars" ? b.startMs - a.startMs : a.startMs - b.startMs;
  });
}
