/**
 * Whole-server reclaims and planned reimages with their drains (LARS) as a feature of the compute simulation: their
 * options and resolvers, and the events that take servers away and give them back.
 */
import { DrainTracker } from "../../resourcemanager/index.js";
import type { DrainContainer } from "../../resourcemanager/index.js";
import type { ResolvedComputeOptions } from "../compute-options.js";
import type { FeatureFigures } from "../engine/compute-result.js";
import type { ComputeState } from "../engine/compute-state.js";
import type { Attempt, JobRun } from "../roles/job-run.js";
import type { SimFeature } from "./feature.js";
import type { ServerEvent } from "./server-events-options.js";

/** See the file header. */
export class ServerEventsFeature implements SimFeature {
  /** Whether a run has any: reclaims or planned reimages. */
  static wanted(o: ResolvedComputeOptions): boolean {
    return o.reclaims !== undefined || o.reimages !== undefined;
  }

  /** Per server: away (a reclaim or a reimage) until `downUntilMs`; draining for the reimage at `drainForMs`. */
  private readonly down: Uint8Array;

  private readonly downUntilMs: Float64Array;

  private readonly draining: Uint8Array;

  private readonly drainForMs: Float64Array;

  /** The resource manager's drain order (LARS or arbitrary); undefined without drains. */
  private readonly drains: DrainTracker | undefined;

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

  constructor(private readonly sim: ComputeState) {
    const n = sim.cluster.servers.length;
    this.down = new Uint8Array(n);
    this.downUntilMs = new Float64Array(n);
    this.draining = new Uint8Array(n);
    this.drainForMs = new Float64Array(n);
    const reimages = sim.o.reimages;
    if (reimages && reimages.drain !== "none") this.drains = new DrainTracker(reimages.drainOptions);
  }

  /** Schedules the reclaims and the planned reimages (with the notices of their drains). */
  runStarted(): void {
    const { cluster } = this.sim;
    const reclaims = this.sim.o.reclaims;
    if (reclaims)
      for (const e of reclaims.events)
        this.sim.at(e.atMs, () =>
          this.reclaim(reclaims.choose === "emptiest" ? this.emptiest(e.server) : e.server, reclaims.durationMs),
        );
    const reimages = this.sim.o.reimages;
    if (reimages)
      for (const e of reimages.events) {
        if (reimages.drain !== "none")
          this.sim.at(Math.max(cluster.historyMs, e.atMs - reimages.noticeMs), () => this.startDrain(e));
        this.sim.at(e.atMs, () => this.reimage(e));
      }
  }

  /** Tells the core and the scheduler whether server `s` takes containers, and offers it at once when it is back. */
  private applyService(s: number): void {
    this.sim.away[s] = this.down[s]! | this.draining[s]!;
    const inService = this.sim.servers.inService(s);
    this.sim.scheduler.setSchedulable(this.sim.nodeIds[s]!, inService);
    this.sim.driver.refreshFree(s);
    this.sim.servers.noteOccupancy(s);
    if (inService) this.sim.servers.roomFreed(s);
  }

  /** Server `s` is away until `untilMs` (a reimage or reclaim); a later one extends it. */
  private takeDown(s: number, untilMs: number): void {
    this.downUntilMs[s] = Math.max(this.downUntilMs[s]!, untilMs);
    if (this.down[s] === 1) return;
    this.down[s] = 1;
    this.applyService(s);
    const back = (): void => {
      const until = this.downUntilMs[s]!;
      if (this.sim.engine.clock.nowMs() < until) {
        this.sim.at(until, back);
        return;
      }
      this.down[s] = 0;
      this.applyService(s);
    };
    if (untilMs < this.sim.cluster.horizonMs) this.sim.at(untilMs, back);
  }

  /**
   * Kills `containers` (tasks first, then job managers, each taking its job's running tasks) and lets their jobs ask
   * again. Returns the core-hours lost (held time x cores), core-ms.
   */
  private killAll(containers: readonly Attempt[]): number {
    const before = this.sim.wastedCoreMs;
    const touched = new Set<JobRun>();
    for (const a of containers) if (a.alive && !a.isAm) this.sim.jobManagers.killTask(a, touched);
    for (const a of containers) if (a.alive && a.isAm) this.sim.jobManagers.killJobManager(a, touched);
    this.sim.driver.reAsk(touched, []);
    return this.sim.wastedCoreMs - before;
  }

  /** The server with the fewest secondary cores now, among those not away (ties: `preferred`, then the lowest index). */
  private emptiest(preferred: number): number {
    const now = this.sim.engine.clock.nowMs();
    const coresOn = (s: number): number => {
      let milli = 0;
      for (const a of this.sim.running[s]!) milli += a.milli;
      return milli;
    };
    let best = preferred;
    let bestMilli = this.downUntilMs[preferred]! > now ? Infinity : coresOn(preferred);
    for (let s = 0; s < this.sim.running.length && bestMilli > 0; s++) {
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
    if (this.sim.running[s]!.size === 0) this.reclaimsOnEmpty++;
    this.takeDown(s, this.sim.engine.clock.nowMs() + durationMs);
    this.reclaimKilledCoreMs += this.killAll([...this.sim.running[s]!]);
  }

  /** A planned reimage's notice: the server drains (unless it already drains for an earlier reimage). */
  private startDrain(e: ServerEvent): void {
    const s = e.server;
    if (this.draining[s] === 1) return;
    this.draining[s] = 1;
    this.drainForMs[s] = e.atMs;
    this.reimageTally.containersAtNotice += this.sim.running[s]!.size;
    this.drains!.start(this.sim.nodeIds[s]!, this.sim.engine.clock.nowMs(), e.atMs);
    this.applyService(s);
    const step = (): void => {
      if (this.draining[s] !== 1 || this.drainForMs[s] !== e.atMs) return;
      this.stepDrain(s);
      // Nothing arrives on a draining server: once it is empty, only the reimage is left.
      const next = this.sim.engine.clock.nowMs() + this.sim.o.reimages!.stepIntervalMs;
      if (this.sim.running[s]!.size > 0 && next < e.atMs) this.sim.at(next, step);
    };
    step();
  }

  /** One step of server `s`'s drain: the containers the tracker picks (LARS or arbitrary order) are preempted. */
  private stepDrain(s: number): void {
    const now = this.sim.engine.clock.nowMs();
    const lifetimes = this.sim.lifetimes;
    const byId = new Map<string, Attempt>();
    const containers: DrainContainer[] = [];
    for (const a of this.sim.running[s]!) {
      byId.set(a.containerId, a);
      const startMs = a.launchedMs ?? now;
      const key = a.isAm ? lifetimes.jobManagerKey(a.run) : lifetimes.taskKey(a.run, a.task);
      containers.push({
        containerId: a.containerId,
        startMs,
        isJobManager: a.isAm,
        remainingMs: lifetimes.predictor!.remainingMs(key, now - startMs),
      });
    }
    const step = this.drains!.step(this.sim.nodeIds[s]!, now, containers);
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
    this.takeDown(s, this.sim.engine.clock.nowMs() + this.sim.o.reimages!.outageMs);
    if (this.draining[s] === 1 && this.drainForMs[s] === e.atMs) {
      this.stepDrain(s);
      this.drains!.stop(this.sim.nodeIds[s]!);
      this.draining[s] = 0;
      this.applyService(s);
    }
    const left = [...this.sim.running[s]!];
    if (left.length === 0) return;
    t.killedAtReimage += left.length;
    t.killedAtReimageCoreMs += this.killAll(left);
  }

  /** A task finished on a draining server before the drain had to preempt it. */
  taskCompleted(a: Attempt): void {
    if (this.draining[a.server] === 1) this.reimageTally.finishedOnTheirOwn++;
  }

  /** A job's job manager exited on a draining server: it too finished on its own. */
  jobDone(_run: JobRun, _durationMs: number, jobManager: Attempt | undefined): void {
    if (jobManager && this.draining[jobManager.server] === 1) this.reimageTally.finishedOnTheirOwn++;
  }

  /** No server away holds a container (it was not granted one since it went). */
  checkBooks(fail: (why: string) => never): void {
    for (let s = 0; s < this.sim.nodeIds.length; s++) {
      const held = this.sim.running[s]!.size;
      if (this.down[s] === 1 && held > 0) fail(`server ${this.sim.nodeIds[s]} is away but runs ${held} containers`);
    }
  }

  /** What the reclaims and the planned reimages cost. */
  figures(): Partial<FeatureFigures> {
    const t = this.reimageTally;
    const hours = (coreMs: number): number => coreMs / 3_600_000;
    const reimages = this.sim.o.reimages;
    return {
      reclaims: this.reclaimCount,
      reclaimsHittingEmpty: this.reclaimCount > 0 ? this.reclaimsOnEmpty / this.reclaimCount : 0,
      reclaimKilledCoreHours: hours(this.reclaimKilledCoreMs),
      ...(reimages
        ? {
            reimages: {
              drain: reimages.drain,
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
}
