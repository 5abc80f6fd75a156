/**
 * The preemption notice in the compute simulation (nodemanager/policy/preemption-notice.ts,
 * jobmanager/policy/noticed-servers.ts): what the node manager names at risk at a yield step reaches the job managers
 * one node heartbeat and one allocate call later, as on the daemons (the node manager reports at its next heartbeat,
 * the resource manager answers at the job manager's next allocate call); each job manager keeps its own
 * `NoticedServers` and sends its list with its allocate calls, which the scheduler takes as `setTaskAvoid`. Only runs
 * with the notice on have one of these, so a stock run costs nothing.
 */
import { NoticedServers } from "../../jobmanager/index.js";
import type { ComputeState, NoticesPort } from "../engine/compute-state.js";
import { phaseOf } from "../engine/streams.js";
import type { Attempt, JobRun } from "./job-run.js";

/** The salt of the job managers' allocate-call phases (the servers' timers use 11 and 12). */
const ALLOCATE_SALT = 13;

/** See the file header. */
export class SimNotices implements NoticesPort {
  /** Containers named in a notice (each attempt once). */
  sent = 0;

  /** Of those, the ones a primary killed afterwards. */
  noticedKilled = 0;

  /** Notices delivered to a job manager that was still running the job. */
  delivered = 0;

  /** Jobs whose avoid list is not empty or not sent yet: the only ones the scheduler's lists are refreshed for. */
  private readonly avoiding = new Set<JobRun>();

  constructor(private readonly sim: ComputeState) {}

  /** The margin below the kill level on server `s`, milli-cores. */
  marginMilli(s: number): number {
    return Math.round(this.sim.capMilli[s]! * this.sim.o.noticeMarginFraction);
  }

  /** The yield step on server `s` named `atRisk` (kill order): each container not warned of yet goes in a notice. */
  warn(s: number, atRisk: readonly Attempt[]): void {
    let jobs: Set<JobRun> | undefined;
    for (const a of atRisk) {
      if (!a.alive || a.noticed) continue;
      a.noticed = true;
      this.sent++;
      (jobs ??= new Set()).add(a.run);
    }
    if (!jobs) return;
    const period = this.sim.cost.heartbeatIntervalMs;
    const reportedMs = period > 0 ? this.sim.nextTick(s, period, 11) : this.sim.engine.clock.nowMs();
    for (const run of jobs) this.sim.at(this.nextAllocateMs(run, reportedMs), () => this.deliver(run, s));
  }

  /** A killed container: counted when it had been warned of. */
  killed(a: Attempt): void {
    if (a.noticed) this.noticedKilled++;
  }

  /** The job's job manager was killed: its next attempt starts with no list (YARN's blacklist is per attempt). */
  jobManagerLost(run: JobRun): void {
    if (!run.noticed) return;
    run.noticed = undefined;
    run.avoidSent = undefined;
    this.avoiding.delete(run);
    this.sim.scheduler.setTaskAvoid(run.appId, []);
  }

  /**
   * Before a node heartbeat grants: every job whose list changed sends it at its allocate call (the list goes with
   * each call, so it is refreshed at most once per `amHeartbeatMs`), and a job whose list emptied is dropped.
   */
  beforeGrant(): void {
    if (this.avoiding.size === 0) return;
    const now = this.sim.engine.clock.nowMs();
    for (const run of this.avoiding) {
      if (this.sim.runs.get(run.appId) !== run || !run.noticed) {
        this.avoiding.delete(run);
        continue;
      }
      if (now < (run.avoidSendMs ?? 0)) continue;
      const list = run.noticed.avoided(now);
      this.sim.scheduler.setTaskAvoid(run.appId, list);
      run.avoidSent = list.length > 0 ? new Set(list.map((id) => this.sim.serverIndex.get(id)!)) : undefined;
      run.avoidSendMs = now + this.sim.cost.amHeartbeatMs;
      if (list.length === 0) this.avoiding.delete(run);
    }
  }

  /** The job manager's allocate response names server `s`: it avoids it from its next allocate call on. */
  private deliver(run: JobRun, s: number): void {
    if (this.sim.runs.get(run.appId) !== run) return;
    const now = this.sim.engine.clock.nowMs();
    this.delivered++;
    run.noticed ??= new NoticedServers(this.sim.o.noticeAvoidMs);
    run.noticed.note(this.sim.nodeIds[s]!, now);
    run.avoidSendMs = now + this.sim.cost.amHeartbeatMs;
    this.avoiding.add(run);
    this.sim.o.observer?.onNotice?.({ job: run.job, server: s, nowMs: now });
  }

  /** The job manager's first allocate call at or after `t` (each job calls every `amHeartbeatMs` at its own phase). */
  private nextAllocateMs(run: JobRun, t: number): number {
    const period = this.sim.cost.amHeartbeatMs;
    if (!(period > 0)) return t;
    const phase = phaseOf(run.job.id, ALLOCATE_SALT) * period;
    return phase + Math.ceil((t - phase) / period) * period;
  }
}
