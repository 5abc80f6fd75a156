/**
 * The allocate and heartbeat paths of the resource manager's applications: what a job manager's Allocate does (asks,
 * releases, the grants and completions it is answered), what node heartbeats and registrations do to the jobs'
 * containers (launched, completed, lost, adopted after a restart, expired before launch), the grants handed out on a
 * node's heartbeat (a job manager's container launched here, a task's kept for its job manager), and preemption. The
 * applications themselves, their attempts and their ends are `Applications` (applications.ts), which owns this and is
 * told through `AttemptHooks` when a job manager's container ended.
 */
import { renewedAmToken } from "../common/container-token.js";
import { errorMessage } from "../common/errors.js";
import { emitEvent } from "../common/events.js";
import { containerIdParts, formatContainerId } from "../common/ids.js";
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
import { moveAttempt } from "./app-runtime.js";
import type { AppRuntime, ApplicationDeps } from "./app-runtime.js";
import { isTerminal } from "./app-state.js";
import { checkAsk, netAsks } from "./app-submission.js";
import type { WireAsk } from "./app-submission.js";
import { startJobManager } from "./job-manager-launch.js";
import { atRiskByApp, checkAvoidNodes, queueNotices } from "./preemption-notices.js";
import type { NodeEntry } from "./node-tracker.js";
import type { ContainerKey } from "./policy/lifetime.js";
import { AM_PRIORITY } from "./policy/scheduler.js";
import type { Allocation } from "./policy/scheduler.js";
import type { ContainerOutput } from "../proto/generated/harvest/v1/Container.js";
import type { ContainerStatus } from "../proto/generated/harvest/v1/ContainerStatus.js";
import type { ExitCauseOutput } from "../proto/generated/harvest/v1/ExitCause.js";
import type { JobProgressOutput } from "../proto/generated/harvest/v1/JobProgress.js";

/** What the allocate and heartbeat paths need from the application lifecycle (applications.ts). */
export interface AttemptHooks {
  /** The application whose current attempt is `attempt`; APP_NOT_FOUND or APP_ATTEMPT_UNKNOWN otherwise. */
  activeApp(appId: string, attempt: number): AppRuntime;
  /** The current attempt's job manager ended (its container completed, was lost, or could not be launched). */
  attemptEnded(app: AppRuntime, cause: ExitCauseOutput, diagnostics: string, nodeId: string): void;
}

/** The containers of the resource manager's applications, as Allocate and the node heartbeats move them. */
export class AppAllocations {
  /** Granted containers not yet reported by their node manager, with the time granted. */
  private readonly launchPending = new Map<string, number>();
  /** Until then node managers may still be re-registering after a restart (the largest node may be missing). */
  private nodesSettleMs = 0;
  /**
   * After a restart, until then a claimed container no node reported may still be on a node that has not re-registered
   * yet (its node manager restarting too): a node silent as long as the node expiry is lost by the usual rule.
   */
  private claimsSettleMs = 0;
  private containerSeq = 0;

  constructor(
    private readonly deps: ApplicationDeps,
    private readonly apps: ReadonlyMap<string, AppRuntime>,
    private readonly attempts: AttemptHooks,
  ) {}

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

  /** Opens the windows in which node managers may still be re-registering after a restart (from `now`). */
  openSettleWindows(now: number): void {
    this.nodesSettleMs = now + this.deps.options.resyncWindowMs;
    this.claimsSettleMs = now + Math.max(this.deps.options.resyncWindowMs, this.deps.options.nodeExpiryMs);
  }

  /** True while a claimed container no node reported may still be on a node that has not re-registered. */
  claimsUnsettled(now: number): boolean {
    return now < this.claimsSettleMs;
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
        this.attempts.attemptEnded(
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

  /**
   * True for a container id granted by an earlier incarnation of this resource manager (or by another resource manager
   * of the cluster before a failover: another incarnation, whatever the two hosts' clocks say).
   */
  private fromBeforeRestart(containerId: string): boolean {
    const epoch = containerIdParts(containerId)?.epoch;
    return epoch !== undefined && epoch !== this.deps.epoch();
  }

  // -------------------------------------------------------------------------------------------- periodic checks

  /** Grants no node reported within the launch expiry are taken back (their jobs hear of them as completed). */
  expireLaunches(now: number): void {
    const { options, scheduler } = this.deps;
    for (const [containerId, grantedMs] of this.launchPending) {
      if (now - grantedMs <= options.containerLaunchExpiryMs) continue;
      this.launchPending.delete(containerId);
      const alloc = scheduler.release(containerId);
      if (!alloc) continue;
      this.deps.nodes.kill(alloc.nodeId, containerId, "RELEASED");
      const why = `not launched within ${options.containerLaunchExpiryMs} ms`;
      this.onContainerCompleted(alloc, endedStatus(alloc, "RELEASED", why));
    }
  }

  /** Settles the claims of registered job managers that no node reported (once the settle window is over). */
  settleClaims(): void {
    for (const app of this.apps.values())
      if (app.claims && !isTerminal(app.record.state))
        settleClaims(this.deps, app, this.deps.clock.nowMs() < this.claimsSettleMs);
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
    const container = containerOf(this.deps.options.secret, app, alloc, node, this.deps.haEpoch());
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
        this.attempts.attemptEnded(app, "FAILED", `job manager launch failed: ${errorMessage(err)}`, container.nodeId);
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
      this.attempts.attemptEnded(
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
  releaseAll(app: AppRuntime, cause: ExitCauseOutput, keepAm: boolean): void {
    for (const id of [...app.containers.keys()]) {
      if (keepAm && id === app.amContainerId) continue;
      this.release(id, cause);
    }
  }

  /** Takes a container back and tells its node to kill it (its job is not told: it released it, or it ended). */
  release(containerId: string, cause: ExitCauseOutput): void {
    const alloc = this.deps.scheduler.release(containerId);
    this.launchPending.delete(containerId);
    if (alloc) this.deps.nodes.kill(alloc.nodeId, containerId, cause);
  }

  /** A node's heartbeat named containers at risk of preemption: each goes to its job's next Allocate answer. */
  onAtRisk(node: NodeEntry, containerIds: readonly string[]): void {
    for (const [appId, notices] of atRiskByApp(node.nodeId, containerIds, (id) => this.deps.scheduler.allocation(id))) {
      const app = this.apps.get(appId);
      if (app && !isTerminal(app.record.state)) queueNotices(app.atRisk, notices);
    }
  }

  // -------------------------------------------------------------------------------------------- Allocate

  /** The job's task containers held now (granted to this or earlier attempts, or before a restart). */
  runningTaskContainers(app: AppRuntime): ContainerOutput[] {
    const out: ContainerOutput[] = [];
    const undelivered = new Set(app.delivery.map((c) => c.id));
    for (const id of app.containers.keys()) {
      const alloc = this.deps.scheduler.allocation(id);
      if (!alloc || alloc.priority === AM_PRIORITY || undelivered.has(id)) continue;
      const node = this.deps.nodes.get(alloc.nodeId);
      if (node) out.push(containerOf(this.deps.options.secret, app, alloc, node, this.deps.haEpoch()));
    }
    return out;
  }

  /**
   * A job manager's Allocate: its releases and asks (net of what was granted since its last call), answered with the
   * grants and completions since then; a job that ended is told to shut down, an attempt not registered to resync.
   * `tokenExpiresMs` is when the AM token the call presented expires (undefined on a plaintext cluster): past half its
   * lifetime, the answer carries a fresh one.
   */
  allocate(
    req: {
      appId: string;
      attempt: number;
      asks: WireAsk[];
      releases: string[];
      progress: JobProgressOutput | null;
      avoidNodes?: readonly string[];
    },
    tokenExpiresMs?: number,
  ): object {
    const { scheduler, history, clock } = this.deps;
    const app = this.attempts.activeApp(req.appId, req.attempt);
    if (isTerminal(app.record.state)) return { allocated: [], completed: [], shutdown: true, resync: false };
    app.lastAmContactMs = clock.nowMs();
    // This resource manager restarted (or never saw the registration): register again, then go on.
    if (app.attemptState !== "REGISTERED") return { allocated: [], completed: [], shutdown: false, resync: true };
    const max = scheduler.maxNodeCapacity();
    // Right after a restart the largest nodes may not have re-registered yet: an ask that fit when the job was
    // submitted must not fail the job then (found by the soak).
    const settled = max.vcoresMilli > 0 && clock.nowMs() >= this.nodesSettleMs;
    for (const [i, ask] of req.asks.entries()) checkAsk(i, ask, settled ? max : undefined);
    // Before the asks are offered the nodes: servers that gave this job a preemption notice.
    scheduler.setTaskAvoid(req.appId, checkAvoidNodes(req.avoidNodes));
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
    const amToken =
      tokenExpiresMs === undefined
        ? undefined
        : renewedAmToken(
            this.deps.options.secret,
            { appId: req.appId, attempt: req.attempt, expiresMs: tokenExpiresMs },
            clock.nowMs(),
            this.deps.options.amTokenLifetimeMs,
          );
    if (amToken) this.deps.log.info("renewed a job manager's AM token", { appId: req.appId, attempt: req.attempt });
    const atRisk = app.atRisk;
    app.atRisk = [];
    if (atRisk.length > 0) {
      this.deps.log.info("told a job manager of containers at risk of preemption", {
        appId: req.appId,
        containers: atRisk.map((n) => n.containerId),
      });
      this.deps.observer?.noticesDelivered?.(atRisk.length);
    }
    return {
      allocated: delivered,
      completed,
      shutdown: false,
      resync: false,
      ...(amToken ? { amToken } : {}),
      ...(atRisk.length > 0 ? { preemption: { containers: atRisk } } : {}),
    };
  }
}
