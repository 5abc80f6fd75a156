/**
 * The simulated servers (as Hadoop SLS's NMSimulator): each server's primary tenant replayed slot by slot, the node
 * manager's yield step, the CPU share tasks run at beside the primary, and when each server heartbeats.
 */
import type { PlacementDecision } from "../../resourcemanager/index.js";
import type { ComputeState, ServersPort } from "../engine/compute-state.js";
import type { SimCluster } from "../model.js";
import { yieldStep, yieldVictims } from "./yield-step.js";
import type { Attempt, JobRun } from "./job-run.js";

/**
 * The primary replay of slot `k` (every simulator's, the compute and the power one alike): for each server of a tenant
 * whose utilization changed since slot k - 1 (every tenant when `first`), its primary usage in milli-cores (the
 * tenant's utilization plus the server's offset, clamped to 0..100 % of `capMilli`); calls `change(s, primary,
 * before)` where it differs from `primaryMilli[s]`. The caller stores the new value (after its own bookkeeping).
 *
 * With `fraction` in (0, 1) the utilization is `fraction` of the way from slot k's sample to slot k + 1's (a primary
 * that ramps between its samples, the compute simulator's `primaryShape` "ramp"); 0 is the sample itself.
 */
export function replayPrimarySlot(
  cluster: SimCluster,
  k: number,
  first: boolean,
  capMilli: ArrayLike<number>,
  primaryMilli: ArrayLike<number>,
  change: (s: number, primary: number, before: number) => void,
  fraction = 0,
): void {
  for (const t of cluster.tenants) {
    const series = t.utilization;
    const last = series.length - 1;
    const at = series[Math.min(k, last)]!;
    let now = at;
    if (fraction > 0) {
      const next = series[Math.min(k + 1, last)]!;
      // A flat stretch was set at the slot's start.
      if (!first && next === at) continue;
      now = at + (next - at) * fraction;
    } else if (!first && k > 0 && now === series[Math.min(k - 1, last)]) continue;
    for (const s of t.servers) {
      let u = now + cluster.servers[s]!.offsetPct;
      u = u < 0 ? 0 : u > 100 ? 100 : u;
      const primary = Math.round((capMilli[s]! * u) / 100);
      const before = primaryMilli[s]!;
      if (primary !== before) change(s, primary, before);
    }
  }
}

/** See the file header. */
export class SimServers implements ServersPort {
  constructor(private readonly sim: ComputeState) {}

  // ---------------------------------------------------------------------------------------------- primary tenants

  /**
   * Slot `k` begins: every server of a tenant whose utilization changed gets its new primary usage. The node manager
   * acts on it at its next yield tick, the scheduler learns it at the server's next heartbeat (both at once when the
   * kill-cost model says 0). Under `primaryShape` "ramp" the slot's sub-steps follow, every `rampStepMs`.
   */
  slot(k: number, first: boolean): void {
    const { cluster } = this.sim;
    this.primaryStep(k, 0, first);
    const slotStartMs = k * cluster.slotMs;
    const next = (k + 1) * cluster.slotMs;
    if (this.sim.o.primaryShape === "ramp") {
      const now = this.sim.engine.clock.nowMs();
      const step = this.sim.o.rampStepMs;
      for (let t = slotStartMs + step; t < next && t < cluster.horizonMs; t += step)
        if (t > now) this.sim.at(t, () => this.primaryStep(k, (t - slotStartMs) / cluster.slotMs, false));
    }
    if (next < cluster.horizonMs) this.sim.at(next, () => this.slot(k + 1, false));
  }

  /** The primaries move to `fraction` of the way from slot k's sample to the next (0: the sample itself). */
  private primaryStep(k: number, fraction: number, first: boolean): void {
    const { cluster } = this.sim;
    const touched = new Set<JobRun>();
    const gained: number[] = [];
    const instantYield = this.sim.cost.yieldTickMs === 0;
    const instantHeartbeat = this.sim.cost.heartbeatIntervalMs === 0;
    const change = (s: number, primary: number, before: number): void => {
      this.changeHeld(s, () => {
        this.sim.primaryMilli[s] = primary;
      });
      // Primary-unaware YARN neither yields nor learns of the primary: its room is unchanged.
      if (!this.sim.aware) return;
      this.updateRate(s);
      if (instantHeartbeat) this.report(s);
      else this.requestHeartbeat(s);
      if (primary > before) {
        if (instantYield) this.yieldOn(s, touched);
        else this.requestYield(s);
      } else if (instantHeartbeat) gained.push(s);
      this.sim.driver.refreshFree(s);
    };
    replayPrimarySlot(cluster, k, first, this.sim.capMilli, this.sim.primaryMilli, change, fraction);
    // Every server starts out with its room known (primaries equal to the initial 0 were skipped above).
    if (first) for (let s = 0; s < this.sim.nodeIds.length; s++) this.sim.driver.refreshFree(s);
    // Killed tasks ask again first (FIFO keeps their jobs' order), then freed servers heartbeat, then the re-asking
    // jobs look for servers of their own.
    this.sim.driver.reAsk(touched, gained);
  }

  /** Server `s` heartbeats: the scheduler learns its primary usage as it is now. */
  report(s: number): void {
    const primary = this.sim.primaryMilli[s]!;
    if (this.sim.seenMilli[s] === primary) return;
    this.sim.seenMilli[s] = primary;
    this.sim.liveNodes[s]!.primaryUsage.vcoresMilli = primary;
    this.sim.scheduler.updatePrimaryUsage(this.sim.nodeIds[s]!, { vcoresMilli: primary, memoryMb: 0 });
    this.sim.driver.refreshFree(s);
  }

  /** Server `s`'s next heartbeat (once, however many changes it carries): report, then offer its room. */
  private requestHeartbeat(s: number): void {
    if (this.sim.heartbeatPending[s]) return;
    this.sim.heartbeatPending[s] = 1;
    this.sim.at(this.sim.nextTick(s, this.sim.cost.heartbeatIntervalMs, 11), () => {
      this.sim.heartbeatPending[s] = 0;
      // The heartbeat reports the primary first, when the policy is primary-aware (stock-unaware never learns it).
      this.sim.driver.heartbeat(s);
    });
  }

  /** Server `s` has room again (a container ended): offered at once, or at its next heartbeat. */
  roomFreed(s: number): void {
    if (this.sim.cost.heartbeatIntervalMs === 0) this.sim.driver.heartbeat(s);
    else this.requestHeartbeat(s);
  }

  /** Server `s`'s next yield tick (once): kill what no longer fits, and let the jobs that lost containers ask again. */
  private requestYield(s: number): void {
    if (this.sim.yieldPending[s]) return;
    this.sim.yieldPending[s] = 1;
    const when =
      this.sim.cost.yieldTickMs > 0
        ? this.sim.nextTick(s, this.sim.cost.yieldTickMs, 12)
        : this.sim.engine.clock.nowMs();
    this.sim.at(when, () => {
      this.sim.yieldPending[s] = 0;
      const touched = new Set<JobRun>();
      this.yieldOn(s, touched);
      if (touched.size > 0) this.roomFreed(s);
      this.sim.driver.reAsk(touched, []);
    });
  }

  /** The cores (milli) server `s`'s primary wants but cannot have because secondary tasks hold them. */
  shortfall(s: number): number {
    // A primary-aware node manager runs containers at the lowest CPU weight: the primary gets every core it wants and
    // the tasks slow down instead (`updateRate`).
    if (this.sim.aware) return 0;
    const primary = this.sim.primaryMilli[s]!;
    const over = primary + this.sim.secondaryMilli[s]! - this.sim.capMilli[s]!;
    return over <= 0 ? 0 : over < primary ? over : primary;
  }

  /** Adds the primaries' shortfall since it last changed to its integral. */
  accrueTaken(nowMs: number): void {
    if (nowMs > this.sim.takenSinceMs) {
      this.sim.takenMilliMs += this.sim.takenMilli * (nowMs - this.sim.takenSinceMs);
      this.sim.takenSinceMs = nowMs;
    }
  }

  /** Runs `change` (to server `s`'s primary or secondary), keeping the primaries' shortfall and its integral. */
  changeHeld(s: number, change: () => void): void {
    this.accrueTaken(this.sim.engine.clock.nowMs());
    this.sim.takenMilli -= this.shortfall(s);
    change();
    this.sim.takenMilli += this.shortfall(s);
    this.noteOccupancy(s);
  }

  /**
   * The speed server `s`'s launched tasks run at: all of it while the primary leaves them their cores, else the share
   * it leaves (the primary wins the CPU by weight until the yield tick kills). Reschedules their ends when it changes.
   */
  updateRate(s: number): void {
    if (!this.sim.cost.throttleSlowdown || !this.sim.aware) return;
    const demand = this.sim.runningTaskMilli[s]!;
    const left = this.sim.capMilli[s]! - this.sim.primaryMilli[s]!;
    const rate = demand <= left ? 1 : Math.max(0, left) / demand;
    if (rate === this.sim.rate[s]) return;
    this.sim.rate[s] = rate;
    const now = this.sim.engine.clock.nowMs();
    for (const a of this.sim.running[s]!) {
      if (a.isAm || !a.launched) continue;
      a.workLeftMs = Math.max(0, a.workLeftMs - (now - a.sinceMs) * a.rate);
      a.sinceMs = now;
      a.rate = rate;
      this.sim.jobManagers.scheduleEnd(a);
    }
  }

  /**
   * The node manager's yield step: kill attempts in the `victimOrder` (youngest first, or the least work lost, with
   * each task's progress) until the rest fit beside the primary and reserve; then, with the preemption notice on, warn
   * the job managers of the containers at risk, chosen on the same input.
   */
  private yieldOn(s: number, touched: Set<JobRun>): void {
    const server = {
      capacityMilli: this.sim.capMilli[s]!,
      primaryMilli: this.sim.primaryMilli[s]!,
      reserveMilli: this.sim.reserveMilli[s]!,
      heldMilli: this.sim.secondaryMilli[s]!,
      taskMilli: this.sim.taskMilli,
    };
    const nowMs = this.sim.engine.clock.nowMs();
    const choice = {
      order: this.sim.o.victimOrder,
      nowMs,
      nearEndMs: this.sim.o.victimNearEndMs,
      progressOf: (a: Attempt) => this.sim.jobManagers.progressOf(a, nowMs),
    };
    const notices = this.sim.notices;
    // The notice needs the input even when nothing is killed; without it the step stays as cheap as it was.
    const step = notices ? yieldStep(server, this.sim.running[s]!, choice, notices.marginMilli(s)) : undefined;
    const victims = step ? step.victims : yieldVictims(server, this.sim.running[s]!, choice);
    const opened: [JobRun, PlacementDecision][] = [];
    for (const a of victims) {
      // A job manager killed earlier in this step took its job's tasks with it.
      if (!a.alive) continue;
      const decision = this.sim.placement?.noteKill(this.sim.nodeIds[s]!, a.run.appId);
      if (decision) opened.push([a.run, decision]);
      if (a.isAm) this.sim.jobManagers.killJobManager(a, touched);
      else this.sim.jobManagers.killTask(a, touched);
    }
    // A job a kill opened to every server (killedJobsLeaveClasses): its kill put it in `touched`, so it asks again and
    // is placed with the others once the step is done. A job whose job manager died in the step is placed afresh by
    // its next attempt instead (its placement was forgotten with it).
    for (const [run, decision] of opened) if (run.decided) this.sim.driver.onDecision(run, decision, false);
    if (notices && step) notices.warn(s, step.atRisk);
  }

  /** Whether server `s` may receive containers: no feature took it out of service (away, draining). */
  inService(s: number): boolean {
    return this.sim.away[s] === 0;
  }

  /** Server `s`'s headroom as the scheduler sees it (capacity - reported primary - reserve - held), milli-cores. */
  roomMilli(s: number): number {
    return this.sim.capMilli[s]! - this.sim.seenMilli[s]! - this.sim.reserveMilli[s]! - this.sim.secondaryMilli[s]!;
  }

  /** Server `s`'s containers or room may have changed: keeps the empty-server counts and their integrals. */
  noteOccupancy(s: number): void {
    const empty = this.sim.running[s]!.size === 0 ? 1 : 0;
    const room = this.hasRoom(s) ? 1 : 0;
    const wasEmpty = this.sim.emptyFlag[s]!;
    const hadRoom = this.sim.roomFlag[s]!;
    if (empty === wasEmpty && room === hadRoom) return;
    this.accrueOccupancy(this.sim.engine.clock.nowMs());
    this.sim.emptyCount += empty - wasEmpty;
    this.sim.roomCount += room - hadRoom;
    this.sim.emptyRoomCount += empty * room - wasEmpty * hadRoom;
    this.sim.emptyFlag[s] = empty;
    this.sim.roomFlag[s] = room;
  }

  /** In service, with room for a task beside its primary (as it is, reported or not) and reserve. */
  hasRoom(s: number): boolean {
    return (
      this.inService(s) &&
      this.sim.capMilli[s]! - this.sim.primaryMilli[s]! - this.sim.reserveMilli[s]! >= this.sim.taskMilli
    );
  }

  accrueOccupancy(nowMs: number): void {
    const dt = nowMs - this.sim.occupancySinceMs;
    if (dt <= 0) return;
    this.sim.emptyMs += this.sim.emptyCount * dt;
    this.sim.roomMs += this.sim.roomCount * dt;
    this.sim.emptyRoomMs += this.sim.emptyRoomCount * dt;
    this.sim.occupancySinceMs = nowMs;
  }
}
