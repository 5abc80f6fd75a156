/**
 * Whole-server reclaims and planned reimages with their drains (LARS) as a feature of the compute simulation: their
 * options and resolvers, and the events that take servers away and give them back.
 */
import type { DrainContainer } from "../../resourcemanager/index.js";
import type { ComputeState, ServerEventsPort } from "../engine/compute-state.js";
import type { Attempt, JobRun } from "../roles/job-run.js";
import type { ServerEvent } from "./server-events-options.js";

/** See the file header. */
export class ServerEventsFeature implements ServerEventsPort {
  constructor(private readonly sim: ComputeState) {}

  /** Schedules the node choice's upkeep, the reclaims and the planned reimages (none of them under plain stock). */
  scheduleServerEvents(): void {
    const { cluster } = this.sim;
    const choice = this.sim.nodeChoice;
    if (choice) {
      // The resource manager's monitor tick (`retryIntervalMs` models it here too): LAVA's deadlines and fill.
      const tick = (t: number): void => {
        if (t >= cluster.horizonMs) return;
        this.sim.at(t, () => {
          this.sim.tickingAll = true;
          choice.tick(t);
          this.sim.tickingAll = false;
          tick(t + this.sim.o.retryIntervalMs);
        });
      };
      tick(cluster.historyMs + this.sim.o.retryIntervalMs);
    }
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

  /** Tells the scheduler whether server `s` takes containers, and offers it at once when it is back. */
  private applyService(s: number): void {
    const inService = this.sim.servers.inService(s);
    this.sim.scheduler.setSchedulable(this.sim.nodeIds[s]!, inService);
    this.sim.driver.refreshFree(s);
    this.sim.servers.noteOccupancy(s);
    if (inService) this.sim.servers.roomFreed(s);
  }

  /** Server `s` is away until `untilMs` (a reimage or reclaim); a later one extends it. */
  private takeDown(s: number, untilMs: number): void {
    this.sim.downUntilMs[s] = Math.max(this.sim.downUntilMs[s]!, untilMs);
    if (this.sim.down[s] === 1) return;
    this.sim.down[s] = 1;
    this.applyService(s);
    const back = (): void => {
      const until = this.sim.downUntilMs[s]!;
      if (this.sim.engine.clock.nowMs() < until) {
        this.sim.at(until, back);
        return;
      }
      this.sim.down[s] = 0;
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
    let bestMilli = this.sim.downUntilMs[preferred]! > now ? Infinity : coresOn(preferred);
    for (let s = 0; s < this.sim.running.length && bestMilli > 0; s++) {
      if (s === preferred || this.sim.downUntilMs[s]! > now) continue;
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
    this.sim.reclaimCount++;
    if (this.sim.running[s]!.size === 0) this.sim.reclaimsOnEmpty++;
    this.takeDown(s, this.sim.engine.clock.nowMs() + durationMs);
    this.sim.reclaimKilledCoreMs += this.killAll([...this.sim.running[s]!]);
  }

  /** A planned reimage's notice: the server drains (unless it already drains for an earlier reimage). */
  private startDrain(e: ServerEvent): void {
    const s = e.server;
    if (this.sim.draining[s] === 1) return;
    this.sim.draining[s] = 1;
    this.sim.drainForMs[s] = e.atMs;
    this.sim.reimageTally.containersAtNotice += this.sim.running[s]!.size;
    this.sim.drains!.start(this.sim.nodeIds[s]!, this.sim.engine.clock.nowMs(), e.atMs);
    this.applyService(s);
    const step = (): void => {
      if (this.sim.draining[s] !== 1 || this.sim.drainForMs[s] !== e.atMs) return;
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
    const byId = new Map<string, Attempt>();
    const containers: DrainContainer[] = [];
    for (const a of this.sim.running[s]!) {
      byId.set(a.containerId, a);
      const startMs = a.launchedMs ?? now;
      const key = a.isAm ? this.sim.lifetimes.jobManagerKey(a.run) : this.sim.lifetimes.taskKey(a.run, a.task);
      containers.push({
        containerId: a.containerId,
        startMs,
        isJobManager: a.isAm,
        remainingMs: this.sim.predictor!.remainingMs(key, now - startMs),
      });
    }
    const step = this.sim.drains!.step(this.sim.nodeIds[s]!, now, containers);
    const victims = step.preempt.map((id) => byId.get(id)).filter((a): a is Attempt => a !== undefined);
    if (victims.length === 0) return;
    const lostMs = this.killAll(victims);
    const t = this.sim.reimageTally;
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
    const t = this.sim.reimageTally;
    t.reimages++;
    this.takeDown(s, this.sim.engine.clock.nowMs() + this.sim.o.reimages!.outageMs);
    if (this.sim.draining[s] === 1 && this.sim.drainForMs[s] === e.atMs) {
      this.stepDrain(s);
      this.sim.drains!.stop(this.sim.nodeIds[s]!);
      this.sim.draining[s] = 0;
      this.applyService(s);
    }
    const left = [...this.sim.running[s]!];
    if (left.length === 0) return;
    t.killedAtReimage += left.length;
    t.killedAtReimageCoreMs += this.killAll(left);
  }
}
