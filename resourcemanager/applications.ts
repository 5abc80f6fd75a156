/**
 * The resource manager's application lifecycle: submission and admission, job-manager attempts (launch, liveness,
 * the next attempt), the application-master protocol (register, allocate, finish), the containers each job holds, and
 * recovery after a restart. Every state change goes through `moveApp` and `moveAttempt` (app-runtime.ts: the
 * transition tables of app-state.ts and attempt-state.ts). Beside it: app-submission.ts (accepting a job, asks),
 * app-containers.ts (container references and how they ended), app-reports.ts (reports, history), job-manager-launch.ts.
 *
 * Work-preserving restarts (YARN's work-preserving RM restart and keep-containers-across-attempts, in Harvest's terms):
 * - A restarted resource manager keeps each unfinished job's attempt. Node managers re-register with the containers
 *   they still run (and those that finished while it was down); containers granted before the restart are adopted into
 *   the scheduler, not killed. A job manager that calls Allocate is told to resync: it registers again (same attempt)
 *   and goes on. A job whose job manager no node reported within `resyncWindowMs` gets a new attempt.
 * - A new attempt of a job keeps the job's running task containers: the resource manager hands them to the new job
 *   manager at registration, and the job manager takes over those its journal names.
 */
import { errorMessage, HarvestError } from "../common/errors.js";
import { emitEvent } from "../common/events.js";
import { containerIdParts, formatContainerId, parseAppId } from "../common/ids.js";
import { fromWire } from "../common/resource.js";
import {
  containerOf,
  endedStatus,
  moveContainer,
  recordEnd,
  noteTaskStatus,
  settleClaims,
  trackRef,
  vertexOf,
} from "./app-containers.js";
import { historyRecordOf, jobTypeFromHistory, reportOf } from "./app-reports.js";
import { moveApp, moveAttempt, newRuntime } from "./app-runtime.js";
import type { AppRuntime, ApplicationDeps } from "./app-runtime.js";
import { isTerminal, nextAppState } from "./app-state.js";
import type { AppEvent } from "./app-state.js";
import { AppIdReservations } from "./app-id-reservations.js";
import { acceptJob, checkStagingDir, admittedJobOf, checkAsk, netAsks } from "./app-submission.js";
import type { WireAsk } from "./app-submission.js";
import { startJobManager } from "./job-manager-launch.js";
import type { NodeEntry } from "./node-tracker.js";
import type { AdmittedJob } from "./policy/admission.js";
import type { ContainerKey } from "./policy/lifetime.js";
import { AM_PRIORITY } from "./policy/scheduler.js";
import type { Allocation } from "./policy/scheduler.js";
import type { AppRecord } from "./state-store.js";
import type { ApplicationReport } from "../proto/generated/harvest/v1/ApplicationReport.js";
import type { ContainerOutput } from "../proto/generated/harvest/v1/Container.js";
import type { ContainerStatus } from "../proto/generated/harvest/v1/ContainerStatus.js";
import type { ExitCauseOutput } from "../proto/generated/harvest/v1/ExitCause.js";
import type { JobProgress, JobProgressOutput } from "../proto/generated/harvest/v1/JobProgress.js";

export type { AppRuntime, ApplicationDeps, ApplicationObserver } from "./app-runtime.js";

/** Servers a job's manager avoids at most (the newest failures). */
const MAX_AM_AVOID = 8;

/** The applications of one resource manager. */
export class Applications {
  private readonly apps = new Map<string, AppRuntime>();
  /** Granted containers not yet reported by their node manager, with the time granted. */
  private readonly launchPending = new Map<string, number>();
  private clusterTs = 0;
  /** Until then node managers may still be re-registering after a restart (the largest node may be missing). */
  private nodesSettleMs = 0;
  /**
   * After a restart, until then a claimed container no node reported may still be on a node that has not re-registered
   * yet (its node manager restarting too): a node silent as long as the node expiry is lost by the usual rule.
   */
  private claimsSettleMs = 0;
  private containerSeq = 0;
  /** Ids handed out by GetNewApplication, not yet used. */
  private readonly reservations: AppIdReservations;

  constructor(private readonly deps: ApplicationDeps) {
    this.reservations = new AppIdReservations(deps.store, deps.clock);
  }

  get(appId: string): AppRuntime | undefined {
    return this.apps.get(appId);
  }

  get size(): number {
    return this.apps.size;
  }

  /** What the lifetime model is asked about a container of `appId` at `priority`. */
  containerKey(appId: string, priority: number): ContainerKey {
    const app = this.apps.get(appId);
    const job = app?.record.name ?? "";
    if (priority === AM_PRIORITY) return { job, vertex: "", isJobManager: true };
    return {
      job,
      vertex: (app && vertexOf(app, priority, this.deps.options.maxParallelism)) ?? "",
      isJobManager: false,
    };
  }

  /** When a container started, as its node reported it (0: not yet). */
  startedMs(appId: string, containerId: string): number {
    return Number(this.apps.get(appId)?.containers.get(containerId)?.startedMs ?? 0);
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
    this.nodesSettleMs = now + this.deps.options.resyncWindowMs;
    this.claimsSettleMs = now + Math.max(this.deps.options.resyncWindowMs, this.deps.options.nodeExpiryMs);
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

  // -------------------------------------------------------------------------------------------- what nodes report

  /**
   * Container statuses from a node's registration or heartbeat. Returns the completed ones now recorded. A container
   * this resource manager does not hold is adopted when it was granted before a restart and its job goes on, and
   * killed otherwise. At a registration, containers held here that the node no longer has died with its previous run.
   */
  onNodeContainers(node: NodeEntry, statuses: ContainerStatus[], how: { registration: boolean; wasLost: boolean }) {
    const recorded: string[] = [];
    const seen = new Set<string>();
    for (const st of statuses) {
      const id = st.containerId ?? "";
      seen.add(id);
      noteTaskStatus(this.apps.get(st.appId ?? "")?.containers.get(id), st);
      if (st.state === "COMPLETE") {
        this.launchPending.delete(id);
        recorded.push(id);
        const alloc = this.deps.scheduler.release(id);
        if (alloc) this.onContainerCompleted(alloc, { ...st, nodeId: node.nodeId });
        else this.onUnheldCompletion({ ...st, nodeId: node.nodeId });
        continue;
      }
      const alloc = this.deps.scheduler.allocation(id);
      if (alloc) {
        this.launchPending.delete(id);
        const ref = this.apps.get(alloc.appId)?.containers.get(id);
        if (ref && ref.state === "ALLOCATED") {
          moveContainer(ref, "launched");
          ref.startedMs = st.startedMs;
        }
      } else if (!how.wasLost && this.adopt(node, st)) {
        this.launchPending.delete(id);
      } else {
        // After a node was declared lost its jobs were told to re-run that work: it ends LOST, as the jobs were told.
        // Or its job was told it was lost (its node came back after the claims were settled): it ends LOST too.
        const toldLost = how.wasLost || this.apps.get(st.appId ?? "")?.toldLost.has(id) === true;
        this.deps.nodes.kill(node.nodeId, id, toldLost ? "LOST" : "RELEASED", false);
      }
    }
    if (how.registration) this.reconcileNode(node, seen);
    return recorded;
  }

  /**
   * Takes over a running container granted before this resource manager restarted, when its job goes on (a job
   * manager only for its current attempt). False: it is to be killed.
   */
  private adopt(node: NodeEntry, st: ContainerStatus): boolean {
    const id = st.containerId ?? "";
    const app = this.apps.get(st.appId ?? "");
    if (!app || isTerminal(app.record.state) || !this.fromBeforeRestart(id) || app.toldLost.has(id)) return false;
    const isAm = st.isAm === true;
    if (isAm && (containerIdParts(id)?.attempt !== app.record.attempt || app.amContainerId !== undefined)) return false;
    const priority = isAm ? AM_PRIORITY : Math.max(0, Number(st.priority ?? 0));
    const alloc: Allocation = {
      containerId: id,
      appId: app.record.appId,
      nodeId: node.nodeId,
      priority,
      resource: fromWire(st.resource),
    };
    if (!this.deps.scheduler.recover(alloc)) return false;
    trackRef(app, {
      containerId: id,
      nodeId: node.nodeId,
      nmAddress: node.nmAddress,
      isAm,
      state: "RUNNING",
      startedMs: st.startedMs ?? 0,
    });
    noteTaskStatus(app.containers.get(id), st);
    (isAm ? app.amCounts : app.taskCounts).allocated += 1;
    if (isAm) {
      moveAttempt(app, "adopted");
      app.amContainerId = id;
      app.lastAmContactMs = this.deps.clock.nowMs();
    }
    this.deps.log.info("recovered a running container from before the restart", {
      appId: app.record.appId,
      containerId: id,
      nodeId: node.nodeId,
      isAm,
    });
    return true;
  }

  /**
   * A completion for a container this resource manager does not hold: recorded, and passed on to its job when it was
   * granted before a restart (the job manager may not have heard of it; it finished while this one was down).
   */
  private onUnheldCompletion(st: ContainerStatus): void {
    const id = st.containerId ?? "";
    const app = this.apps.get(st.appId ?? "");
    recordEnd(this.deps, app, st);
    if (!app || isTerminal(app.record.state) || !this.fromBeforeRestart(id) || app.forwarded.has(id)) return;
    if (app.toldLost.has(id)) return; // Its job already re-ran that work.
    app.forwarded.add(id);
    if (st.isAm) {
      // The current attempt's job manager ended while this resource manager was down.
      if (containerIdParts(id)?.attempt === app.record.attempt && app.amContainerId === undefined)
        this.amAttemptEnded(
          app,
          (st.cause ?? "FAILED") as ExitCauseOutput,
          st.diagnostics || `job manager container exited with code ${st.exitCode ?? "?"}`,
          st.nodeId ?? "",
        );
      return;
    }
    app.completed.push(st);
  }

  /** Containers held on a re-registered node that it does not report: they died with its previous run (LOST). */
  private reconcileNode(node: NodeEntry, reported: ReadonlySet<string>): void {
    for (const alloc of this.deps.scheduler.containersOn(node.nodeId)) {
      // A grant not yet launched may still be started by its job manager (the launch expiry covers it).
      if (reported.has(alloc.containerId) || this.launchPending.has(alloc.containerId)) continue;
      this.deps.scheduler.release(alloc.containerId);
      const why = `node ${node.nodeId} re-registered without this container (its node manager restarted)`;
      this.onContainerCompleted(alloc, endedStatus(alloc, "LOST", why, this.deps.clock.nowMs()));
    }
  }

  /** A node went silent: its containers are reported LOST to their jobs. */
  onNodeLost(node: NodeEntry, lost: Allocation[]): void {
    for (const alloc of lost) {
      this.launchPending.delete(alloc.containerId);
      const why = `node ${node.nodeId} lost (no heartbeat for ${this.deps.options.nodeExpiryMs} ms)`;
      this.onContainerCompleted(alloc, endedStatus(alloc, "LOST", why, this.deps.clock.nowMs()));
      emitEvent({
        type: "container-lost-with-node",
        daemon: "rm",
        containerId: alloc.containerId,
        nodeId: node.nodeId,
      });
    }
  }

  /** True for a container id granted by an earlier incarnation of this resource manager. */
  private fromBeforeRestart(containerId: string): boolean {
    const epoch = containerIdParts(containerId)?.epoch;
    return epoch !== undefined && epoch < this.deps.epoch();
  }

  // -------------------------------------------------------------------------------------------- periodic checks

  /** Launch and job-manager expiries, ended resync windows, admission. */
  tick(now: number): void {
    const { options, scheduler, log } = this.deps;
    for (const [containerId, grantedMs] of this.launchPending) {
      if (now - grantedMs <= options.containerLaunchExpiryMs) continue;
      this.launchPending.delete(containerId);
      const alloc = scheduler.release(containerId);
      if (!alloc) continue;
      this.deps.nodes.kill(alloc.nodeId, containerId, "RELEASED");
      const why = `not launched within ${options.containerLaunchExpiryMs} ms`;
      this.onContainerCompleted(alloc, endedStatus(alloc, "RELEASED", why));
    }
    this.endResyncs(now);
    for (const app of this.apps.values())
      if (app.claims && !isTerminal(app.record.state))
        settleClaims(this.deps, app, this.deps.clock.nowMs() < this.claimsSettleMs);
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

  // -------------------------------------------------------------------------------------------- containers

  /** A container id for a grant to `appId`: this incarnation's epoch, the job, its attempt, a sequence number. */
  newContainerId(appId: string): string {
    const app = this.apps.get(appId);
    return formatContainerId(this.deps.epoch(), app?.record.seq ?? 0, app?.record.attempt ?? 0, ++this.containerSeq);
  }

  /** A grant on a node's heartbeat: the job manager's is launched here, a task's goes to the job manager. */
  onAllocated(alloc: Allocation, node: NodeEntry): void {
    const app = this.apps.get(alloc.appId);
    if (!app || isTerminal(app.record.state)) {
      this.deps.scheduler.release(alloc.containerId);
      return;
    }
    const isAm = alloc.priority === AM_PRIORITY;
    // A job manager's container starts its attempt: refused before anything is recorded unless the attempt waits for one.
    if (isAm) moveAttempt(app, "launched");
    this.launchPending.set(alloc.containerId, this.deps.clock.nowMs());
    const container = containerOf(this.deps.options.secret, app, alloc, node);
    trackRef(app, {
      containerId: alloc.containerId,
      nodeId: node.nodeId,
      nmAddress: node.nmAddress,
      isAm,
      state: "ALLOCATED",
    });
    (isAm ? app.amCounts : app.taskCounts).allocated += 1;
    if (isAm) {
      app.amContainerId = alloc.containerId;
      app.lastAmContactMs = this.deps.clock.nowMs();
      void this.launchAm(app, container);
    } else {
      app.delivery.push(container);
    }
  }

  private async launchAm(app: AppRuntime, container: ContainerOutput): Promise<void> {
    const { scheduler, log } = this.deps;
    const { appId, attempt } = app.record;
    try {
      await startJobManager(this.deps, app, container);
    } catch (err) {
      log.warn("could not launch the job manager", { appId, attempt, error: errorMessage(err) });
      const alloc = scheduler.release(container.id);
      this.launchPending.delete(container.id);
      if (alloc && app.amContainerId === container.id)
        this.amAttemptEnded(app, "FAILED", `job manager launch failed: ${errorMessage(err)}`, container.nodeId);
    }
  }

  /** A container this resource manager held ended (reported, lost, expired or preempted). */
  onContainerCompleted(alloc: Allocation, st: ContainerStatus): void {
    const app = this.apps.get(alloc.appId);
    if (!app) return;
    recordEnd(this.deps, app, st, alloc.priority, alloc.resource.vcoresMilli);
    if (isTerminal(app.record.state)) {
      if (app.amContainerId === alloc.containerId) this.deps.scheduler.removeApp(alloc.appId);
      return;
    }
    if (app.amContainerId === alloc.containerId) {
      this.amAttemptEnded(
        app,
        (st.cause ?? "FAILED") as ExitCauseOutput,
        st.diagnostics || `job manager container exited with code ${st.exitCode ?? "?"}`,
        alloc.nodeId,
      );
    } else {
      app.completed.push(st);
    }
  }

  /** Releases a container the resource manager takes back (drain, power): its job hears of it as completed. */
  preempt(containerId: string, cause: ExitCauseOutput, diagnostics: string): void {
    const alloc = this.deps.scheduler.release(containerId);
    if (!alloc) return;
    this.launchPending.delete(containerId);
    this.deps.nodes.kill(alloc.nodeId, containerId, cause);
    this.onContainerCompleted(alloc, endedStatus(alloc, cause, diagnostics, this.deps.clock.nowMs()));
  }

  /** Releases every container of an application (except, optionally, its job manager) and tells the nodes to kill them. */
  private releaseAll(app: AppRuntime, cause: ExitCauseOutput, keepAm: boolean): void {
    for (const id of [...app.containers.keys()]) {
      if (keepAm && id === app.amContainerId) continue;
      this.release(id, cause);
    }
  }

  private release(containerId: string, cause: ExitCauseOutput): void {
    const alloc = this.deps.scheduler.release(containerId);
    this.launchPending.delete(containerId);
    if (alloc) this.deps.nodes.kill(alloc.nodeId, containerId, cause);
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
    if (app.amContainerId) this.release(app.amContainerId, "RELEASED");
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
    for (const c of app.delivery) this.release(c.id, "RELEASED");
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
  ): Promise<{ appId: string }> {
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
    return { appId };
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
    settleClaims(this.deps, app, clock.nowMs() < this.claimsSettleMs);
    app.record.diagnostics = "";
    app.record.maxConcurrency = Math.max(0, Math.floor(req.maxConcurrency));
    if (app.record.startMs === 0) app.record.startMs = clock.nowMs();
    await store.putApp(app.record);
    scheduler.setMaxConcurrency(req.appId, app.record.maxConcurrency);
    if (history) {
      const jobType = await jobTypeFromHistory(store, options, app.record.name);
      history.register(req.appId, jobType, app.record.maxConcurrency);
    }
    const previous = this.runningTaskContainers(app);
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

  /** The job's task containers held now (granted to this or earlier attempts, or before a restart). */
  private runningTaskContainers(app: AppRuntime): ContainerOutput[] {
    const out: ContainerOutput[] = [];
    const undelivered = new Set(app.delivery.map((c) => c.id));
    for (const id of app.containers.keys()) {
      const alloc = this.deps.scheduler.allocation(id);
      if (!alloc || alloc.priority === AM_PRIORITY || undelivered.has(id)) continue;
      const node = this.deps.nodes.get(alloc.nodeId);
      if (node) out.push(containerOf(this.deps.options.secret, app, alloc, node));
    }
    return out;
  }

  allocate(req: {
    appId: string;
    attempt: number;
    asks: WireAsk[];
    releases: string[];
    progress: JobProgressOutput | null;
  }): object {
    const { scheduler, history, clock } = this.deps;
    const app = this.activeApp(req.appId, req.attempt);
    if (isTerminal(app.record.state)) return { allocated: [], completed: [], shutdown: true, resync: false };
    app.lastAmContactMs = clock.nowMs();
    // This resource manager restarted (or never saw the registration): register again, then go on.
    if (app.attemptState !== "REGISTERED") return { allocated: [], completed: [], shutdown: false, resync: true };
    const max = scheduler.maxNodeCapacity();
    // Right after a restart the largest nodes may not have re-registered yet: an ask that fit when the job was
    // submitted must not fail the job then (found by the soak).
    const settled = max.vcoresMilli > 0 && clock.nowMs() >= this.nodesSettleMs;
    for (const [i, ask] of req.asks.entries()) checkAsk(i, ask, settled ? max : undefined);
    for (const id of req.releases) {
      if (id === app.amContainerId) continue;
      const alloc = scheduler.allocation(id);
      if (!alloc || alloc.appId !== req.appId) continue;
      this.release(id, "RELEASED");
    }
    // Granted since the last call: the job manager made these asks without them.
    const undelivered = app.delivery;
    app.delivery = [];
    const before = scheduler.outstanding(req.appId);
    scheduler.setAsks(
      req.appId,
      netAsks(req.asks, undelivered, (nodeId) => scheduler.nodeView(nodeId)?.rack),
    );
    // New demand (a stage became ready, a task is to run again) is offered the nodes now, and what they grant goes back
    // in this answer, rather than a heartbeat interval later.
    if (scheduler.outstanding(req.appId) > before) this.deps.offerNodes?.();
    const delivered = [...undelivered, ...app.delivery];
    app.delivery = [];
    if (history) {
      let taskMilli = 0;
      for (const a of req.asks) if (a.count > 0) taskMilli = Math.max(taskMilli, fromWire(a.resource).vcoresMilli);
      history.onAsk(req.appId, taskMilli);
    }
    if (req.progress) app.progress = req.progress;
    const completed = app.completed;
    app.completed = [];
    return { allocated: delivered, completed, shutdown: false, resync: false };
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

  private async finish(
    app: AppRuntime,
    event: AppEvent,
    outcome: AppRecord["outcome"],
    diagnostics: string,
    progress: JobProgress | undefined,
  ): Promise<void> {
    const { store, scheduler, clock, log } = this.deps;
    if (isTerminal(app.record.state)) return;
    const now = clock.nowMs();
    moveApp(app, event);
    const state = app.record.state;
    app.record.outcome = outcome;
    app.record.diagnostics = diagnostics;
    app.record.finishMs = now;
    if (progress) app.progress = progress;
    const history = historyRecordOf(app, outcome, now, this.deps.options.amResource.vcoresMilli);
    if (history.meanDemandMilli !== undefined) {
      this.deps.demand.observe(app.record.name, history.meanDemandMilli);
      this.deps.lifetimes.observeJob(app.record.name, history.durationMs);
    }
    // The job's delegation token is of no more use to it (no attempt starts after its end): it leaves the record, and
    // is stored with the end as one to cancel at the namenode, with the staging directory to remove, so that a restart
    // still does both.
    const dfsToken = app.record.dfsToken ?? "";
    delete app.record.dfsToken;
    const cleanup = this.deps.jobCleanup.cleanupOf(app.record, dfsToken);
    // Durable before anyone is told.
    await store.finishApp(app.record, history, cleanup);
    if (cleanup) this.deps.jobCleanup.cleanUp(app.record.appId, cleanup);
    this.deps.observer?.finished(app.record.appId, state, outcome);
    await this.evictCompleted();
    const keepAm = state !== "KILLED" && app.amContainerId !== undefined;
    this.releaseAll(app, state === "KILLED" ? "KILLED_BY_USER" : "RELEASED", keepAm);
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
