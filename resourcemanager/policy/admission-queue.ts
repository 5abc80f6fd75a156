/** The admission queue (priority, then submission order) and a job's demand as admission counts it (seeds/003). */
import { HarvestError } from "../../common/errors.js";
import type { AdmissionDecision } from "./admission.js";

// ---------------------------------------------------------------------------------------------------------------------
// A job's demand.

/**
 * What a recurring job holds on average over its life, learned from its past runs: the cores its containers held
 * (job manager included), integrated over the run, divided by the run's length. seeds/003's deployments have a fixed
 * size; a batch job's size changes stage by stage, and counting its widest stage for its whole life (the only safe
 * figure for a job never seen) overstates what the moment estimates should add to E[D] several times over. The mean
 * of the last `maxRuns` runs is the job's demand, never above its widest stage; a job never seen counts at its widest.
 * Pure; the resource manager and the simulator feed it the same way (at each successful end).
 */
export class JobDemandModel {
  private readonly runs = new Map<string, number[]>();

  constructor(private readonly maxRuns = 20) {}

  /** One finished run of `name`: it held `meanMilli` milli-cores on average. Odd values are ignored. */
  observe(name: string, meanMilli: number): void {
    if (!(Number.isFinite(meanMilli) && meanMilli > 0)) return;
    const list = this.runs.get(name) ?? [];
    list.push(meanMilli);
    if (list.length > this.maxRuns) list.shift();
    this.runs.set(name, list);
  }

  /** The demand to count for a run of `name` whose widest stage (with its job manager) holds `widestMilli`. */
  demandMilli(name: string, widestMilli: number): number {
    const list = this.runs.get(name);
    if (!list || list.length === 0) return widestMilli;
    const mean = list.reduce((a, b) => a + b, 0) / list.length;
    return Math.min(widestMilli, Math.ceil(mean));
  }
}

// ---------------------------------------------------------------------------------------------------------------------
// The queue.

/** What the queue needs of a job; the caller's type may carry more (demand, lifetime). */
export interface QueuedJob {
  appId: string;
  /** Higher goes first. */
  priority: number;
}

/** One waiting job as `snapshot()` reports it. */
export interface QueueEntry {
  appId: string;
  priority: number;
  /** 1-based place in the queue. */
  position: number;
  waitingSinceMs: number;
  /** When the policy last judged it (absent: not yet). */
  lastCheckedMs?: number;
  /** Why it waits, for `harvest job status`. */
  reason: string;
  /** The job it waits behind under strict order, when that is why it waits. */
  blockedBy?: string;
  /** The policy's last decision on it. */
  decision?: AdmissionDecision;
}

/** A job `admitReady` let through. */
export interface AdmittedEntry<J> {
  job: J;
  decision: AdmissionDecision;
  waitedMs: number;
}

interface Slot<J> {
  job: J;
  seq: number;
  waitingSinceMs: number;
  lastCheckedMs?: number;
  reason: string;
  blockedBy?: string;
  decision?: AdmissionDecision;
}

/**
 * Jobs waiting for admission: pure bookkeeping. Order: higher priority first, then the order of `enqueue` (FIFO; a
 * restarted daemon re-enqueues in submission order with the original times).
 *
 * By default the order is strict: `admitReady` stops at the first job the policy holds back, and everyone behind it
 * (lower or equal priority, or later) waits behind it. seeds/003 takes requests first-come first-served (section 6.1),
 * and strict order is what keeps a large job from starving: under backfill a stream of small jobs keeps the bound
 * just under the threshold and the large one never fits. `backfill: true` lets a job that fits pass a held one (higher
 * utilization, no starvation guarantee).
 *
 * Invariant: `slots` is sorted by (priority descending, seq ascending), and `byId` holds exactly the jobs of `slots`.
 */
export class AdmissionQueue<J extends QueuedJob = QueuedJob> {
  readonly backfill: boolean;
  private slots: Slot<J>[] = [];
  private readonly byId = new Map<string, Slot<J>>();
  private seq = 0;

  constructor(options: { backfill?: boolean } = {}) {
    this.backfill = options.backfill ?? false;
  }

  /** How many jobs wait. */
  get size(): number {
    return this.slots.length;
  }

  has(appId: string): boolean {
    return this.byId.has(appId);
  }

  /** A waiting job, or undefined. */
  get(appId: string): J | undefined {
    return this.byId.get(appId)?.job;
  }

  /** Adds a job waiting since `sinceMs`, behind every job of its priority or higher. INVALID_ARGUMENT if queued. */
  enqueue(job: J, sinceMs: number): void {
    if (this.byId.has(job.appId))
      throw new HarvestError("INVALID_ARGUMENT", `admission queue: ${job.appId} is already queued`, {
        details: { appId: job.appId },
      });
    if (!Number.isFinite(job.priority))
      throw new HarvestError("INVALID_ARGUMENT", `admission queue: ${job.appId} priority must be a number`, {
        details: { appId: job.appId },
      });
    const slot: Slot<J> = { job, seq: this.seq++, waitingSinceMs: sinceMs, reason: "queued: not yet evaluated" };
    // After every job of priority >= its own: a later job never passes an earlier one of its priority.
    let i = this.slots.length;
    while (i > 0 && this.slots[i - 1]!.job.priority < job.priority) i--;
    this.slots.splice(i, 0, slot);
    this.byId.set(job.appId, slot);
  }

  /** Removes a job (killed, or admitted by other means); false when it was not queued. */
  remove(appId: string): boolean {
    const slot = this.byId.get(appId);
    if (!slot) return false;
    this.byId.delete(appId);
    this.slots = this.slots.filter((s) => s !== slot);
    return true;
  }

  /**
   * Walks the queue in order and admits (removes and returns) each job `evaluate` admits. `evaluate` is called in
   * queue order and must count the jobs it admitted earlier in this walk (`AdmissionOutlook.commit`). Under strict
   * order the walk stops at the first held job; the jobs behind it are not evaluated and their reason says whom they
   * wait behind. Every held job keeps the decision's reason and the time it was judged.
   */
  admitReady(nowMs: number, evaluate: (job: J) => AdmissionDecision): AdmittedEntry<J>[] {
    const out: AdmittedEntry<J>[] = [];
    let head: Slot<J> | undefined;
    for (const slot of [...this.slots]) {
      if (head && !this.backfill) {
        slot.reason = `waits behind ${head.job.appId} (strict order: priority, then submission), which ${head.reason}`;
        slot.blockedBy = head.job.appId;
        continue;
      }
      const decision = evaluate(slot.job);
      slot.lastCheckedMs = nowMs;
      slot.decision = decision;
      if (decision.admit) {
        this.remove(slot.job.appId);
        out.push({ job: slot.job, decision, waitedMs: nowMs - slot.waitingSinceMs });
      } else {
        slot.reason = decision.reason;
        delete slot.blockedBy;
        head ??= slot;
      }
    }
    return out;
  }

  /** The waiting jobs in order, with why each waits. */
  snapshot(): QueueEntry[] {
    return this.slots.map((s, i) => ({
      appId: s.job.appId,
      priority: s.job.priority,
      position: i + 1,
      waitingSinceMs: s.waitingSinceMs,
      ...(s.lastCheckedMs !== undefined ? { lastCheckedMs: s.lastCheckedMs } : {}),
      reason: s.reason,
      ...(s.blockedBy !== undefined ? { blockedBy: s.blockedBy } : {}),
      ...(s.decision !== undefined ? { decision: s.decision } : {}),
    }));
  }
}
