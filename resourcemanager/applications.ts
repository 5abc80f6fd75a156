/**
 * The resource manager's application lifecycle: submission and admission, job-manager attempts (launch asked for,
 * liveness, the next attempt, the end of the job), registration and the end reported by a job manager, kills,
 * retention of finished jobs, and recovery after a restart. Every state change goes through `moveApp` and `moveAttempt`
 * (app-runtime.ts: the transition tables of app-state.ts and attempt-state.ts). The allocate and heartbeat paths (a job
 * manager's Allocate, the containers nodes report, grants, preemption) are `AppAllocations` (app-allocations.ts), which
 * this owns. Beside it: app-submission.ts (accepting a job, asks), app-containers.ts (container references and how they
 * ended), app-reports.ts (reports, history), job-manager-launch.ts.
 *
 * Work-preserving restarts (YARN's work-preserving RM restart and keep-containers-across-attempts, in Harvest's terms):
 * - A restarted resource manager keeps each unfinished job's attempt. Node managers re-register with the containers
 *   they still run (and those that finished while it was down); containers granted before the restart are adopted into
 *   the scheduler (app-allocations.ts), not killed. A job manager that calls Allocate is told to resync: it registers
 *   again (same attempt) and goes on. A job whose job manager no node reported within `resyncWindowMs` gets a new
 *   attempt.
 * - A new attempt of a job keeps the job's running task containers: the resource manager hands them to the new job
 *   manager at registration, and the job manager takes over those its journal names.
 */
import { errorMessage, HarvestError } from "../common/errors.js";
import { emitEvent } from "../common/events.js";
import { parseAppId } from "../common/ids.js";
import { settleClaims } from "./app-containers.js";
import { AppAllocations } from "./app-allocations.js";
import { historyRecordOf, jobTypeFromHistory, reportOf } from "./app-reports.js";
import { moveApp, moveAttempt, newRuntime } from "./app-runtime.js";
import type { AppRuntime, ApplicationDeps } from "./app-runtime.js";
import { isTerminal, nextAppState } from "./app-state.js";
import type { AppEvent } from "./app-state.js";
import { AppIdReservations } from "./app-id-reservations.js";
import { acceptJob, checkStagingDir, admittedJobOf } from "./app-submission.js";
import type { AdmittedJob } from "./policy/admission.js";
import type { SurvivalQuote } from "./policy/survival-quote.js";
import { AM_PRIORITY } from "./policy/scheduler.js";
import type { AppRecord } from "./state-store.js";
import type { ApplicationReport } from "../proto/generated/harvest/v1/ApplicationReport.js";
import type { ExitCauseOutput } from "../proto/generated/harvest/v1/ExitCause.js";
import type { JobProgress, JobProgressOutput } from "../proto/generated/harvest/v1/JobProgress.js";

export type { AppRuntime, ApplicationDeps, ApplicationObserver } from "./app-runtime.js";
export type { AppAllocations } from "./app-allocations.js";

/** Servers a job's manager avoids at most (the newest failures). */
const MAX_AM_AVOID = 8;

/** The applications of one resource manager. */
export class Applications {
  private readonly apps = new Map<string, AppRuntime>();
  /** The allocate and heartbeat paths: what Allocate and the node managers' reports do to the jobs' containers. */
  readonly allocations: AppAllocations;
  private clusterTs = 0;
  /** Ids handed out by GetNewApplication, not yet used. */
  private readonly reservations: AppIdReservations;

  constructor(private readonly deps: ApplicationDeps) {
    this.reservations = new AppIdReservations(deps.store, deps.clock);
    this.allocations = new AppAllocations(deps, this.apps, {
      activeApp: (appId, attempt) => this.activeApp(appId, attempt),
      attemptEnded: (app, cause, diagnostics, nodeId) => this.amAttemptEnded(app, cause, diagnostics, nodeId),
    });
  }

  get(appId: string): AppRuntime | undefined {
    return this.apps.get(appId);
  }

  get size(): number {
    return this.apps.size;
  }

  // -------------------------------------------------------------------------------------------- recovery

  /**
   * Loads the applications from the store after a (re)start: finished ones as they are, the others resyncing once
   * `openResyncWindows` is called.
   */
  async recover(clusterTs: number): Promise<void> {
    this.clusterTs = clusterTs;
    await this.reservations.load();
    for (const record of await this.deps.store.loadApps()) {
      const waiting = isTerminal(record.state) || record.state === "QUEUED";
      const app = newRuntime(record, waiting ? "WAITING" : "RECOVERED");
      this.apps.set(record.appId, app);
      if (isTerminal(record.state)) continue;
      if (record.state === "QUEUED") {
        // Still waiting for admission: back in the queue with its submission time, in submission order (loadApps is).
        this.queueForAdmission(app);
        continue;
      }
      // Its job manager and containers may still run: wait for the nodes to report them before anything new starts.
      this.deps.scheduler.addApp(record.appId, record.seq);
      this.deps.scheduler.setAmAvoid(record.appId, record.amAvoidNodes ?? []);
    }
  }

  /**
   * Opens the resync windows of the recovered jobs. Called when the resource manager starts serving, not when it loads
   * its store: a node manager cannot report before then, and loading, binding and starting the web server of a busy
   * server take part of a short window.
   */
  openResyncWindows(): void {
    const now = this.deps.clock.nowMs();
    this.allocations.openSettleWindows(now);
    let resyncing = 0;
    for (const app of this.apps.values()) {
      if (app.attemptState !== "RECOVERED") continue;
      moveAttempt(app, "window-opened");
      if (isTerminal(app.record.state)) continue;
      app.resyncUntilMs = now + this.deps.options.resyncWindowMs;
      app.lastAmContactMs = now;
      resyncing++;
    }
    if (resyncing > 0)
      this.deps.log.info("waiting for node managers to report running containers", {
        jobs: resyncing,
        windowMs: this.deps.options.resyncWindowMs,
      });
  }

  /** Ends resync windows that ran out: a job whose job manager no node reported gets a new attempt. */
  private endResyncs(now: number): void {
    for (const app of this.apps.values()) {
      if (app.resyncUntilMs === 0 || now < app.resyncUntilMs) continue;
      app.resyncUntilMs = 0;
      if (isTerminal(app.record.state)) continue;
      // Still RESYNCING (a job whose job manager is back, reported by a node or registered again, left it and its
      // window closed with it): its job manager is gone.
      // A resource manager restart is not the job manager's fault: a new attempt without counting a failure.
      this.deps.log.info("no node reported the job manager after the restart; starting a new attempt", {
        appId: app.record.appId,
        attempt: app.record.attempt,
      });
      this.startAttemptInBackground(app, "resource manager restarted and no node reported the job manager");
    }
  }

  // -------------------------------------------------------------------------------------------- periodic checks

  /** Launch and job-manager expiries, ended resync windows, admission. */
  tick(now: number): void {
    const { options, scheduler, log } = this.deps;
    this.allocations.expireLaunches(now);
    this.endResyncs(now);
    this.allocations.settleClaims();
    for (const app of this.apps.values()) {
      // From its launch on, a job manager must register and then heartbeat within the expiry (YARN's AM liveness).
      const launched = app.amContainerId !== undefined && scheduler.allocation(app.amContainerId) !== undefined;
      if (isTerminal(app.record.state) || !launched || now - app.lastAmContactMs <= options.amExpiryMs) continue;
      const what = app.attemptState === "REGISTERED" ? "sent no heartbeat" : "did not register";
      log.warn(`job manager ${what} within its expiry`, { appId: app.record.appId, attempt: app.record.attempt });
      this.amAttemptEnded(
        app,
        "FAILED",
        `job manager ${what} for ${options.amExpiryMs} ms`,
        scheduler.allocation(app.amContainerId ?? "")?.nodeId ?? "",
      );
    }
    if (this.deps.admission.waiting > 0) this.admitQueued();
  }

  // -------------------------------------------------------------------------------------------- admission

  private queueForAdmission(app: AppRuntime): void {
    const r = app.record;
    this.deps.admission.enqueue(
      { appId: r.appId, priority: r.priority ?? 0, demandMilli: r.demandMilli ?? 0, name: r.name },
      r.submitMs,
    );
  }

  /** Lets in what admission control admits now; the others' reasons become their diagnostics. */
  private admitQueued(): void {
    const now = this.deps.clock.nowMs();
    for (const { job, decision, waitedMs } of this.deps.admission.admitReady()) {
      const app = this.apps.get(job.appId);
      if (!app || app.record.state !== "QUEUED") continue;
      moveApp(app, { kind: "admit" });
      app.record.admittedMs = now;
      app.record.diagnostics = `admitted after ${(waitedMs / 1000).toFixed(1)} s (${decision.reason}); waiting for a container for the job manager`;
      this.deps.scheduler.addApp(job.appId, app.record.seq);
      this.askForJobManager(app);
      this.deps.log.info("application admitted", { appId: job.appId, waitedMs, reason: decision.reason });
      this.deps.store
        .putApp(app.record)
        .catch((err: unknown) =>
          this.deps.log.error("could not record an admission", { appId: job.appId, error: errorMessage(err) }),
        );
    }
    for (const e of this.deps.admission.snapshot()) {
      const app = this.apps.get(e.appId);
      if (app) app.record.diagnostics = `waiting for admission (${e.position} in the queue): ${e.reason}`;
    }
  }

  /** Every admitted job that has not ended, with its demand and its end re-predicted from its uptime. */
  admittedJobs(now: number): AdmittedJob[] {
    return [...this.apps.values()].flatMap((app) => admittedJobOf(this.deps, app.record, now) ?? []);
  }
  // -------------------------------------------------------------------------------------------- attempts

  /** Ends the current job-manager attempt; starts another or fails the job. */
  private amAttemptEnded(app: AppRuntime, cause: ExitCauseOutput, diagnostics: string, nodeId: string): void {
    const { options, log } = this.deps;
    if (isTerminal(app.record.state)) return;
    // Preemption by a primary tenant, a power cap or a drain, and a lost node are not the job manager's failures (YARN
    // does the same for preemption).
    const countsAsFailure =
      cause !== "PREEMPTED_BY_PRIMARY" &&
      cause !== "PREEMPTED_BY_POWER" &&
      cause !== "PREEMPTED_BY_DRAIN" &&
      cause !== "LOST";
    if (countsAsFailure) app.record.failedAttempts += 1;
    if (app.amContainerId) this.allocations.release(app.amContainerId, "RELEASED");
    // Its next attempt goes elsewhere when it can (YARN's AM blacklisting): a server that could not keep this job's
    // manager (a power cap it cannot meet, a busy primary, a broken disk) likely cannot keep the next one either.
    if (nodeId && cause !== "LOST") this.avoidForAm(app, nodeId);
    const preemptedOrLost = app.record.attempt - app.record.failedAttempts;
    log.warn("job manager attempt ended", {
      appId: app.record.appId,
      attempt: app.record.attempt,
      cause,
      diagnostics,
      failedAttempts: app.record.failedAttempts,
      nodeId,
    });
    if (app.record.failedAttempts >= options.maxAmAttempts) {
      this.failInBackground(
        app,
        `job manager failed ${app.record.failedAttempts} time(s) (limit ${options.maxAmAttempts}); last: ${diagnostics}`,
      );
      return;
    }
    if (!countsAsFailure && preemptedOrLost > options.maxAmPreemptions) {
      this.failInBackground(
        app,
        `job manager preempted or lost ${preemptedOrLost} times (limit ${options.maxAmPreemptions}); last: ${diagnostics}`,
      );
      return;
    }
    this.startAttemptInBackground(app, diagnostics);
  }

  private avoidForAm(app: AppRuntime, nodeId: string): void {
    const list = (app.record.amAvoidNodes ?? []).filter((n) => n !== nodeId);
    list.push(nodeId);
    app.record.amAvoidNodes = list.slice(-MAX_AM_AVOID);
    this.deps.scheduler.setAmAvoid(app.record.appId, app.record.amAvoidNodes);
  }

  /** Fails the job from a non-async path; a store error is logged (the job stays in its state and is retried on restart). */
  private failInBackground(app: AppRuntime, diagnostics: string): void {
    this.finish(app, { kind: "fail" }, "JOB_FAILED", diagnostics, undefined).catch((err: unknown) =>
      this.deps.log.error("could not record a failed job", { appId: app.record.appId, error: errorMessage(err) }),
    );
  }

  private startAttemptInBackground(app: AppRuntime, why: string): void {
    this.startAttempt(app, why).catch((err: unknown) =>
      this.deps.log.error("could not start a new attempt", { appId: app.record.appId, error: errorMessage(err) }),
    );
  }

  /**
   * A new job-manager attempt. The job's running task containers are kept for it (it takes over those its journal
   * names); only grants never handed to the previous attempt are released.
   */
  private async startAttempt(app: AppRuntime, why: string): Promise<void> {
    for (const c of app.delivery) this.allocations.release(c.id, "RELEASED");
    // Always a new number: a job manager of the previous attempt (even one launched just before a restart of this
    // resource manager) must never pass for the current one.
    app.record.attempt += 1;
    moveApp(app, { kind: "attempt-ended" });
    moveAttempt(app, "ended");
    app.record.diagnostics = `attempt ${app.record.attempt} waiting for a container (${why})`;
    app.amContainerId = undefined;
    app.delivery = [];
    await this.deps.store.putApp(app.record);
    this.askForJobManager(app);
  }

  /** Asks for a container for the job's next job manager; the nodes are offered once the caller has returned. */
  private askForJobManager(app: AppRuntime): void {
    this.deps.scheduler.setAsks(app.record.appId, [
      { priority: AM_PRIORITY, resource: this.deps.options.amResource, count: 1 },
    ]);
    if (this.deps.offerNodes) setImmediate(this.deps.offerNodes);
  }

  private activeApp(appId: string, attempt: number): AppRuntime {
    const app = this.getApp(appId);
    if (app.record.attempt !== attempt) {
      throw new HarvestError(
        "APP_ATTEMPT_UNKNOWN",
        `attempt ${attempt} of ${appId} is not current (current: ${app.record.attempt}); this job manager must exit`,
      );
    }
    return app;
  }

  /** An application by id; APP_NOT_FOUND naming where to look. */
  getApp(appId: string): AppRuntime {
    parseAppId(appId);
    const app = this.apps.get(appId);
    if (!app)
      throw new HarvestError("APP_NOT_FOUND", `no application ${appId}; 'harvest job list' shows the known ones`, {
        details: { appId },
      });
    return app;
  }

  // -------------------------------------------------------------------------------------------- client protocol

  /** Reserves an application id for a submission by `user` (GetNewApplication); durable before the answer. */
  async reserveAppId(user: string): Promise<{ appId: string }> {
    return { appId: await this.reservations.reserve(this.clusterTs, user) };
  }

  /**
   * Accepts a job: validated, durable (record and DAG file) before the answer, then queued or asking for its manager.
   * With `reservedId`, the job takes that id, which must be reserved (for `user`, on a secure cluster) and unused.
   */
  async submit(
    dagJson: string,
    user: string,
    dfsToken = "",
    reservedId = "",
    stagingDir = "",
  ): Promise<{ appId: string; quote: SurvivalQuote | undefined }> {
    const { scheduler, admission, log } = this.deps;
    if (stagingDir) checkStagingDir(stagingDir, user, reservedId, dfsToken, this.deps.options.tls !== undefined);
    const reserved = reservedId
      ? this.reservations.take(reservedId, user, this.deps.options.tls !== undefined, (id) => this.apps.has(id))
      : undefined;
    let accepted: Awaited<ReturnType<typeof acceptJob>>;
    try {
      accepted = await acceptJob(this.deps, this.clusterTs, {
        dagJson,
        user,
        dfsToken,
        ...(reserved ? { reserved } : {}),
        ...(stagingDir ? { stagingDir } : {}),
      });
    } catch (err) {
      // A DAG to fix, or a store that failed: the id stays the caller's to submit with again.
      if (reserved) this.reservations.restore(reserved);
      throw err;
    }
    const { record, dag } = accepted;
    const { appId, seq } = record;
    const app = newRuntime(record);
    this.apps.set(appId, app);
    if (admission.enabled) {
      this.queueForAdmission(app);
      this.admitQueued();
    } else {
      scheduler.addApp(appId, seq);
      this.askForJobManager(app);
    }
    log.info("application submitted", { appId, name: dag.name, user: record.user, vertices: dag.vertices.length });
    this.deps.observer?.submitted(appId);
    return { appId, quote: record.quote };
  }

  /** Kills a job (its containers end KILLED_BY_USER); answers its state. */
  async kill(appId: string, by = ""): Promise<{ state: string }> {
    const app = this.getApp(appId);
    if (!isTerminal(app.record.state))
      await this.finish(app, { kind: "kill" }, "JOB_KILLED", by ? `killed by ${by}` : "killed by user", undefined);
    return { state: app.record.state };
  }

  list(states: string[]): { apps: ApplicationReport[] } {
    const wanted = new Set(states.map((s) => s.toUpperCase()));
    const apps = [...this.apps.values()]
      .filter((a) => wanted.size === 0 || wanted.has(a.record.state))
      .map((a) => this.report(a, false));
    return { apps };
  }

  /** An application's report (with its containers unless listing). */
  report(app: AppRuntime, withContainers = true): ApplicationReport {
    return reportOf(app, this.deps.history, withContainers);
  }

  // -------------------------------------------------------------------------------------------- AM protocol

  /**
   * A job manager registers (its attempt's first call, or again after a restart of this resource manager). Answers
   * the job's DAG and the containers still running from earlier attempts, which it takes over.
   */
  async registerAm(req: {
    appId: string;
    attempt: number;
    maxConcurrency: number;
    runningContainers?: string[];
  }): Promise<object> {
    const { store, scheduler, history, options, log, clock } = this.deps;
    const app = this.activeApp(req.appId, req.attempt);
    if (isTerminal(app.record.state))
      throw new HarvestError("APP_ALREADY_FINISHED", `${req.appId} already ended (${app.record.state})`);
    const again = app.record.state === "RUNNING";
    // Both machines accept the registration before either moves (the application's refusal comes first, as it did).
    const state = nextAppState(app.record.state, { kind: "registered" });
    moveAttempt(app, "registered");
    app.record.state = state;
    app.lastAmContactMs = clock.nowMs();
    app.claims = new Set((req.runningContainers ?? []).slice(0, 100_000));
    // Right after a restart the nodes may not all have reported yet: claims no node reported wait for them (tick).
    settleClaims(this.deps, app, this.allocations.claimsUnsettled(clock.nowMs()));
    app.record.diagnostics = "";
    app.record.maxConcurrency = Math.max(0, Math.floor(req.maxConcurrency));
    if (app.record.startMs === 0) app.record.startMs = clock.nowMs();
    await store.putApp(app.record);
    scheduler.setMaxConcurrency(req.appId, app.record.maxConcurrency);
    if (history) {
      const { jobType, lastDurationMs } = await jobTypeFromHistory(store, options, app.record.name);
      history.register(req.appId, jobType, app.record.maxConcurrency, lastDurationMs);
    }
    const previous = this.allocations.runningTaskContainers(app);
    log.info(again ? "job manager registered again (resync)" : "job manager registered", {
      appId: req.appId,
      attempt: req.attempt,
      maxConcurrency: app.record.maxConcurrency,
      previousContainers: previous.length,
    });
    emitEvent({ type: "job-manager-registered", daemon: "rm", appId: req.appId, attempt: req.attempt, resync: again });
    return {
      dagJson: app.record.dagJson,
      maxResource: scheduler.maxNodeCapacity(),
      name: app.record.name,
      previousContainers: previous,
    };
  }

  async finishAm(req: {
    appId: string;
    attempt: number;
    outcome: string;
    diagnostics: string;
    progress: JobProgressOutput | null;
  }): Promise<object> {
    const app = this.activeApp(req.appId, req.attempt);
    if (isTerminal(app.record.state)) return {};
    const outcome =
      req.outcome === "JOB_SUCCEEDED" ? "JOB_SUCCEEDED" : req.outcome === "JOB_KILLED" ? "JOB_KILLED" : "JOB_FAILED";
    // A job manager that finished while this resource manager was restarting has not registered again: it may still
    // report its outcome for its current attempt.
    if (app.record.state === "ACCEPTED") moveApp(app, { kind: "registered" });
    await this.finish(app, { kind: "finish", outcome }, outcome, req.diagnostics, req.progress ?? undefined);
    return {};
  }

  /**
   * Ends a job: durable before anyone is told, so a caller that sees the job ended also finds its history entry. A
   * second end asked while one is being written waits for that one.
   */
  private finish(
    app: AppRuntime,
    event: AppEvent,
    outcome: AppRecord["outcome"],
    diagnostics: string,
    progress: JobProgress | undefined,
  ): Promise<void> {
    if (isTerminal(app.record.state)) return Promise.resolve();
    app.ending ??= this.end(app, event, outcome, diagnostics, progress).finally(() => {
      app.ending = undefined;
    });
    return app.ending;
  }

  private async end(
    app: AppRuntime,
    event: AppEvent,
    outcome: AppRecord["outcome"],
    diagnostics: string,
    progress: JobProgress | undefined,
  ): Promise<void> {
    const { store, scheduler, clock, log } = this.deps;
    const now = clock.nowMs();
    // The end is applied only once it is stored: until then reports show the job running (a failed write leaves it
    // so, as a restart would find it), never ended without its history.
    const ended: AppRecord = {
      ...app.record,
      state: nextAppState(app.record.state, event),
      outcome,
      diagnostics,
      finishMs: now,
    };
    const state = ended.state;
    if (progress) app.progress = progress;
    const history = historyRecordOf(app, outcome, now, this.deps.options.amResource.vcoresMilli);
    // The job's delegation token is of no more use to it (no attempt starts after its end): it leaves the record, and
    // is stored with the end as one to cancel at the namenode, with the staging directory to remove, so that a restart
    // still does both.
    const dfsToken = ended.dfsToken ?? "";
    delete ended.dfsToken;
    const cleanup = this.deps.jobCleanup.cleanupOf(ended, dfsToken);
    await store.finishApp(ended, history, cleanup);
    Object.assign(app.record, { state, outcome, diagnostics, finishMs: now });
    delete app.record.dfsToken;
    if (history.meanDemandMilli !== undefined) {
      this.deps.demand.observe(app.record.name, history.meanDemandMilli);
      this.deps.lifetimes.observeJob(app.record.name, history.durationMs);
    }
    if (cleanup) this.deps.jobCleanup.cleanUp(app.record.appId, cleanup);
    this.deps.observer?.finished(app.record.appId, state, outcome);
    await this.evictCompleted();
    const keepAm = state !== "KILLED" && app.amContainerId !== undefined;
    this.allocations.releaseAll(app, state === "KILLED" ? "KILLED_BY_USER" : "RELEASED", keepAm);
    if (this.deps.history) {
      app.placement = this.deps.history.placement(app.record.appId);
      this.deps.history.remove(app.record.appId);
    }
    this.deps.powerPolicy?.forget(app.record.appId);
    this.deps.nodeChoice?.forget(app.record.appId);
    this.deps.admission.remove(app.record.appId);
    if (!keepAm) scheduler.removeApp(app.record.appId);
    else scheduler.setAsks(app.record.appId, []);
    log.info("application ended", {
      appId: app.record.appId,
      state,
      outcome,
      durationMs: history.durationMs,
      diagnostics,
    });
  }

  /** The applications that ended at or after `sinceMs`. */
  finishedSince(sinceMs: number): string[] {
    const out: string[] = [];
    for (const app of this.apps.values())
      if (isTerminal(app.record.state) && app.record.finishMs >= sinceMs) out.push(app.record.appId);
    return out;
  }

  /** Forgets the oldest finished applications beyond `maxCompletedApps` (their history entries stay). */
  private async evictCompleted(): Promise<void> {
    const finished = [...this.apps.values()].filter((a) => isTerminal(a.record.state));
    const excess = finished.length - this.deps.options.maxCompletedApps;
    if (excess <= 0) return;
    // Keep an application while its job manager container still runs, so its end is still recorded.
    const victims = finished
      .filter((a) => !a.amContainerId || !this.deps.scheduler.allocation(a.amContainerId))
      .sort((a, b) => a.record.finishMs - b.record.finishMs)
      .slice(0, excess);
    for (const a of victims) this.apps.delete(a.record.appId);
    await this.deps.store.deleteApps(victims.map((a) => a.record.appId));
  }
}
