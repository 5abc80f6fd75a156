/**
 * Admission control (seeds/003) as a feature of the compute simulation: its options and resolver, and the resource
 * manager's `AdmissionQueue` in front of job submission.
 */
import type { UtilizationSeries } from "../../common/trace-io.js";
import {
  AdmissionOutlook,
  AdmissionQueue,
  DemandProfile,
  JobDemandModel,
  LifetimeModel,
  neverAdmissible,
  tenantFeatures,
  thresholdOf,
} from "../../resourcemanager/index.js";
import type {
  AdmissionCandidate,
  AdmissionServer,
  AdmittedJob,
  PrimaryDemandSource,
} from "../../resourcemanager/index.js";
import type { ResolvedComputeOptions } from "../compute-options.js";
import type { FeatureFigures } from "../engine/compute-result.js";
import type { ComputeState } from "../engine/compute-state.js";
import type { SimJob } from "../jobs.js";
import { DAY_MS } from "../model.js";
import type { Attempt, JobRun } from "../roles/job-run.js";
import type { AdmissionState, WaitingJob } from "./admission-options.js";
import { ADMISSION_WINDOW } from "./admission-options.js";
import type { SimFeature } from "./feature.js";

/**
 * A profile's moments read from a table of one entry per slot of the day (one entry when not periodic): a profile's
 * answer depends only on the slot of the asked time within the period (`DemandProfile.moments`), so the table gives
 * the same answers, and each pass over the admission queue, which asks every server at every step of the horizon,
 * costs a lookup per server and step instead of a sum over the slot's window.
 */
export function slotTable(profile: DemandProfile, slotMs: number, daily: boolean): PrimaryDemandSource {
  if (!profile.options.periodic) {
    const m = profile.moments(0);
    return { moments: () => m };
  }
  const slots = daily ? DAY_MS / slotMs : 1;
  const table = Array.from({ length: slots }, (_, k) => profile.moments(k * slotMs));
  return {
    moments: (atMs) => {
      const k = Math.floor((((atMs % DAY_MS) + DAY_MS) % DAY_MS) / slotMs);
      return table[Math.min(slots - 1, k)]!;
    },
  };
}

/** See the file header. */
export class AdmissionFeature implements SimFeature {
  /** Whether a run has admission control (the policy "none" submits every job on arrival, as without it). */
  static wanted(o: ResolvedComputeOptions): boolean {
    return o.admission !== undefined && o.admission.policy !== "none";
  }

  /** Admission control's state, built on the first arrival. */
  private state: AdmissionState | undefined;

  constructor(private readonly sim: ComputeState) {}

  /** A container ends: what it held counts in its admitted job's demand. */
  containerEnded(a: Attempt, heldCoreMs: number): void {
    const admitted = this.state?.admitted.get(a.run.appId);
    if (admitted) admitted.heldCoreMs += heldCoreMs;
  }

  /**
   * A job arrives: refused when even an idle cluster would not admit it (`neverAdmissible`), else queued behind the
   * jobs before it, and the queue is evaluated at once. Either way the feature takes it.
   */
  jobArrived(job: SimJob): boolean {
    const adm = (this.state ??= this.startAdmission());
    const now = this.sim.engine.clock.nowMs();
    // What the job can hold at most (its DAG never runs more than its max concurrency at once), capped at the pool:
    // a job wider than the cluster runs in waves of at most the whole pool.
    // What its past runs held on average (the resource manager's `JobDemandModel`), never more than that.
    const demandMilli = adm.demand.demandMilli(
      job.shape.name,
      Math.min(adm.poolMilli, this.sim.cost.jobManagerMilli + job.shape.maxConcurrency * this.sim.taskMilli),
    );
    const waiting: WaitingJob = { appId: `j${job.id}`, priority: 0, job, demandMilli, arrivedMs: now };
    if (neverAdmissible(adm.servers, this.admissionCandidate(adm, waiting), adm.options)) {
      adm.jobsRejected++;
      return true;
    }
    if (adm.options.backfill || (adm.backlogHead === adm.backlog.length && adm.queue.size < ADMISSION_WINDOW)) {
      adm.queue.enqueue(waiting, now);
      adm.queued.set(waiting.appId, waiting);
    } else adm.backlog.push(waiting);
    this.evaluateAdmission();
    return true;
  }

  /** A waiting job as the policy judges it: its demand for its predicted lifetime (the model's, from its name). */
  private admissionCandidate(adm: AdmissionState, w: WaitingJob): AdmissionCandidate {
    return { appId: w.appId, demandMilli: w.demandMilli, lifetimeMs: adm.lifetime.jobRemainingMs(w.job.shape.name, 0) };
  }

  /** Jobs waiting for admission: in the queue and in the backlog behind it. */
  private admissionWaiting(adm: AdmissionState): number {
    return adm.queue.size + adm.backlog.length - adm.backlogHead;
  }

  /**
   * The resource manager's pass over its admission queue (on an arrival, a job's end and the admission tick): the
   * cluster as the scheduler sees it now, one `AdmissionOutlook`, and every job the queue lets through (strict order
   * unless `backfill`) is submitted. While jobs wait, the tick comes back every `tickMs`.
   *
   * Under strict order (one priority here) no job behind the first held one is judged, so the `AdmissionQueue` holds
   * only the first `ADMISSION_WINDOW` waiting jobs and the rest wait in `backlog`, in arrival order with their arrival
   * times; when the queue has admitted all it held, it takes the next ones and the pass goes on, as one more pass at
   * the same time (the jobs just admitted are then among the admitted jobs, with the demand and end they were
   * committed with). The decisions are those of one queue of every waiting job, without a walk over thousands of
   * blocked jobs at every pass of an overloaded run.
   */
  private evaluateAdmission(): void {
    const adm = this.state;
    if (!adm) return;
    const now = this.sim.engine.clock.nowMs();
    for (;;) {
      while (adm.queue.size < ADMISSION_WINDOW && adm.backlogHead < adm.backlog.length) {
        const w = adm.backlog[adm.backlogHead++]!;
        adm.queue.enqueue(w, w.arrivedMs);
        adm.queued.set(w.appId, w);
      }
      if (adm.backlogHead > 1024 && adm.backlogHead * 2 > adm.backlog.length) {
        adm.backlog = adm.backlog.slice(adm.backlogHead);
        adm.backlogHead = 0;
      }
      if (adm.queue.size === 0) break;
      this.admitFromQueue(adm, now);
      // A held job stops the pass; an emptied queue takes the next jobs of the backlog.
      if (adm.queue.size > 0 || adm.backlogHead === adm.backlog.length) break;
    }
    if (this.admissionWaiting(adm) > 0 && !adm.tickPending) {
      adm.tickPending = true;
      this.sim.at(now + adm.tickMs, () => {
        adm.tickPending = false;
        this.evaluateAdmission();
      });
    }
  }

  /** One `AdmissionOutlook` of the cluster now, and the queue's walk under it: the admitted jobs are submitted. */
  private admitFromQueue(adm: AdmissionState, now: number): void {
    adm.servers.forEach((server, s) => {
      server.allocatedMilli = this.sim.secondaryMilli[s]!;
      server.primaryNowMilli = this.sim.seenMilli[s]!;
    });
    const admitted: AdmittedJob[] = [];
    for (const [appId, j] of adm.admitted) {
      const run = this.sim.runs.get(appId);
      let allocatedMilli = run?.jobManager?.milli ?? 0;
      if (run) for (const a of run.attempts) allocatedMilli += a.milli;
      // Re-predicted from its uptime (seeds/002), so a job running past its first prediction is expected to end
      // later rather than counted at every step of the horizon.
      const endMs = now + adm.lifetime.jobRemainingMs(j.name, now - j.admittedAtMs);
      admitted.push({ appId, demandMilli: j.demandMilli, allocatedMilli, endMs });
    }
    // The outlook sums the primaries at every step up to the horizon, whatever the candidates need; a candidate is
    // judged only at the steps before its predicted end, so a horizon cut to the longest prediction among the queued
    // jobs gives the same decisions at a fraction of the cost.
    let longestMs = 0;
    for (const w of adm.queued.values()) longestMs = Math.max(longestMs, this.admissionCandidate(adm, w).lifetimeMs);
    const options =
      longestMs < adm.options.horizonMs ? { ...adm.options, horizonMs: Math.ceil(longestMs) } : adm.options;
    // A server out of service (reclaimed, draining) takes no work: the resource manager's view leaves it out.
    const servers = adm.servers.filter((_, s) => this.sim.servers.inService(s));
    const outlook = new AdmissionOutlook({ servers, admitted }, now, options);
    const entries = adm.queue.admitReady(now, (w) => {
      const candidate = this.admissionCandidate(adm, w);
      const decision = outlook.decide(candidate);
      if (decision.admit) outlook.commit(candidate);
      return decision;
    });
    for (const e of entries) {
      const { job } = e.job;
      adm.queued.delete(e.job.appId);
      adm.admitted.set(e.job.appId, {
        name: job.shape.name,
        demandMilli: e.job.demandMilli,
        admittedAtMs: now,
        heldCoreMs: 0,
      });
      adm.jobsAdmitted++;
      adm.waitMs += e.waitedMs;
      this.sim.jobManagers.submit(job);
    }
  }

  /**
   * An admitted job ended: the lifetime model learns its run time (admission to end: what a prediction made at
   * admission is for), and the queue is evaluated once this event is over (the job's containers are released by then).
   */
  jobDone(run: JobRun): void {
    const adm = this.state;
    const j = adm?.admitted.get(run.appId);
    if (!adm || !j) return;
    const now = this.sim.engine.clock.nowMs();
    adm.admitted.delete(run.appId);
    adm.lifetime.observeJob(j.name, now - j.admittedAtMs);
    if (now > j.admittedAtMs) adm.demand.observe(j.name, (1000 * j.heldCoreMs) / (now - j.admittedAtMs));
    if (this.admissionWaiting(adm) > 0 && !adm.passPending) {
      adm.passPending = true;
      this.sim.at(now, () => {
        adm.passPending = false;
        this.evaluateAdmission();
      });
    }
  }

  /**
   * Admission control's view of the cluster, built once: every server's capacity and the scheduler's reserve, and its
   * primary's `DemandProfile` from the history before the experiment, [0, historyMs) (the window the classifier reads
   * at the start). The profile is by time of day when the classifier calls the tenant periodic on that window
   * (`tenantFeatures`, the tenant registry's test, on the tenant's average-server series), from all samples otherwise.
   * Each server's own series (its tenant's plus its offset) is what its node manager reports. The profiles are not
   * rebuilt during the run (the resource manager rebuilds them every few minutes; over a few days the history barely
   * moves). A server with too little history counts at its primary's live usage with no variance, as the resource
   * manager does.
   */
  private startAdmission(): AdmissionState {
    const { cluster } = this.sim;
    const resolved = this.sim.o.admission!;
    const slotMs = cluster.slotMs;
    const to = Math.floor(cluster.historyMs / slotMs);
    const timesMs: number[] = [];
    for (let k = 0; k < to; k++) timesMs.push(k * slotMs);
    const daily = DAY_MS % slotMs === 0 && DAY_MS / slotMs >= 3;
    const periodic = cluster.tenants.map((t) => {
      const cpuPct = Array.from(t.utilization.subarray(0, Math.min(to, t.utilization.length)));
      if (!daily || cpuPct.length === 0) return false;
      const series: UtilizationSeries = {
        name: t.id,
        stepSec: slotMs / 1000,
        startMs: 0,
        timesMs: timesMs.slice(0, cpuPct.length),
        cpuPct,
      };
      return tenantFeatures(series, this.sim.o.classifier).pattern === "periodic";
    });
    let poolMilli = 0;
    const servers = cluster.servers.map((server): AdmissionServer => {
      const s = server.index;
      const tenant = cluster.tenants[server.tenant]!;
      const series = tenant.utilization;
      const cpuPct: number[] = [];
      for (let k = 0; k < to && k < series.length; k++) {
        const u = series[k]! + server.offsetPct;
        cpuPct.push(u < 0 ? 0 : u > 100 ? 100 : u);
      }
      const profile = new DemandProfile(
        { timesMs: timesMs.slice(0, cpuPct.length), cpuPct },
        // Not periodic: the period only has to be a whole number of slots.
        { periodic: periodic[server.tenant]!, slotMs, periodMs: daily ? DAY_MS : 3 * slotMs },
      );
      const live: PrimaryDemandSource = {
        moments: () => ({
          mean: (this.sim.seenMilli[s]! / this.sim.capMilli[s]!) * 100,
          variance: 0,
          samples: 0,
          basis: "prior",
        }),
      };
      poolMilli += Math.max(0, this.sim.capMilli[s]! - this.sim.reserveMilli[s]!);
      return {
        serverId: server.id,
        capacityMilli: this.sim.capMilli[s]!,
        reserveMilli: this.sim.reserveMilli[s]!,
        allocatedMilli: 0,
        primaryNowMilli: 0,
        primary: profile.samples >= profile.options.minSamples ? slotTable(profile, slotMs, daily) : live,
        tenant: tenant.id,
      };
    });
    return {
      options: resolved.options,
      tickMs: resolved.tickMs,
      queue: new AdmissionQueue<WaitingJob>({ backfill: resolved.options.backfill }),
      lifetime: new LifetimeModel(resolved.lifetime),
      servers,
      poolMilli,
      admitted: new Map(),
      demand: new JobDemandModel(),
      queued: new Map(),
      backlog: [],
      backlogHead: 0,
      tickPending: false,
      passPending: false,
      jobsAdmitted: 0,
      jobsRejected: 0,
      waitMs: 0,
    };
  }

  /** The admission figures (as of now, the horizon once the run has returned). */
  figures(): Partial<FeatureFigures> {
    const adm = this.state;
    const options = this.sim.o.admission!.options;
    return {
      admission: options.policy,
      admissionThreshold: thresholdOf(options),
      jobsAdmitted: adm ? adm.jobsAdmitted : 0,
      jobsRejected: adm?.jobsRejected ?? 0,
      jobsQueuedAtEnd: adm ? this.admissionWaiting(adm) : 0,
      avgAdmissionWaitS: adm && adm.jobsAdmitted > 0 ? adm.waitMs / adm.jobsAdmitted / 1000 : 0,
    };
  }
}
