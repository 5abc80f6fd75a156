/**
 * The resource manager's application lifecycle: submission and admission, job-manager attempts (launch, liveness,
 * the next attempt), the application-master protocol (register, allocate, finish), the containers each job holds, and
 * recovery after a restart. Every state change goes through `nextAppState` (app-state.ts).
 *
 * Work-preserving restarts (YARN's work-preserving RM restart and keep-containers-across-attempts, in Harvest's terms):
 * - A restarted resource manager keeps each unfinished job's attempt. Node managers re-register with the containers
 *   they still run (and those that finished while it was down); containers granted before the restart are adopted into
 *   the scheduler, not killed. A job manager that calls Allocate is told to resync: it registers again (same attempt)
 *   and goes on. A job whose job manager no node reported within `resyncWindowMs` gets a new attempt.
 * - A new attempt of a job keeps the job's running task containers: the resource manager hands them to the new job
 *   manager at registration, and the job manager takes over those its journal names.
 */
import { mkdir, open } from "node:fs/promises";
import { join } from "node:path";
import type { Clock } from "../common/clock.js";
import { signAmToken, signContainer } from "../common/container-token.js";
import { maxConcurrency, parseDag, topologicalOrder } from "../common/dag-spec.js";
import type { DagSpec } from "../common/dag-spec.js";
import { errorMessage, HarvestError } from "../common/errors.js";
import { call } from "../common/grpc.js";
import { containerIdParts, formatAppId, formatContainerId, parseAppId } from "../common/ids.js";
import type { Logger } from "../common/log.js";
import { packageRoot } from "../common/paths.js";
import { fits, fromWire } from "../common/resource.js";
import type { AdmissionControl } from "./admission-control.js";
import type { AdmittedJob } from "./policy/admission.js";
import type { JobDemandModel } from "./policy/admission-queue.js";
import { isTerminal, nextAppState } from "./app-state.js";
import { CONTAINER_MACHINE } from "./container-state.js";
import type { RmContainerEvent, RmContainerState } from "./container-state.js";
import type { AppEvent } from "./app-state.js";
import { jobTypeOf } from "./policy/class-selection.js";
import type { HistoryPlacement, JobPlacement } from "./policy/history-placement.js";
import type { ContainerKey, LifetimeModel } from "./policy/lifetime.js";
import type { LifetimeNodeChoice } from "./policy/node-choice.js";
import type { NodeEntry, NodeTracker } from "./node-tracker.js";
import type { ResourceManagerOptions } from "./options.js";
import type { PowerAwarePolicy } from "./policy/power-placement.js";
import { AM_PRIORITY } from "./policy/scheduler.js";
import type { Allocation, Scheduler } from "./policy/scheduler.js";
import { MAX_DURATIONS_PER_VERTEX } from "./state-store.js";
import type { AppRecord, HistoryRecord, RmStateStore } from "./state-store.js";
import type { ApplicationReport } from "../proto/generated/harvest/v1/ApplicationReport.js";
import type { ContainerOutput } from "../proto/generated/harvest/v1/Container.js";
import type { ContainerRef } from "../proto/generated/harvest/v1/ContainerRef.js";
import type { ContainerStatus } from "../proto/generated/harvest/v1/ContainerStatus.js";
import type { ExitCauseOutput } from "../proto/generated/harvest/v1/ExitCause.js";
import type { JobProgress, JobProgressOutput } from "../proto/generated/harvest/v1/JobProgress.js";
import { emitEvent } from "../common/events.js";

/** Kept per application for `harvest job logs` and status. */
const MAX_CONTAINER_REFS = 5_000;
/** Servers a job's manager avoids at most (the newest failures). */
const MAX_AM_AVOID = 8;

/** One application as the resource manager holds it in memory. */
export interface AppRuntime {
  record: AppRecord;
  amContainerId: string | undefined;
  registered: boolean;
  lastAmContactMs: number;
  /** Recovered after a restart and waiting for `openResyncWindows`. */
  resyncing: boolean;
  /** After a restart: until then, node managers may still report this job's job manager (0: not resyncing). */
  resyncUntilMs: number;
  /** Granted containers not yet handed to the job manager. */
  delivery: ContainerOutput[];
  /** Completed containers not yet reported to the job manager. */
  completed: ContainerStatus[];
  /** Completions from before a restart already passed on (a node reports them until it is told they are recorded). */
  forwarded: Set<string>;
  /** Containers the job manager said at registration it runs, to settle once the nodes had time to report them. */
  claims: Set<string> | undefined;
  /** Claims answered LOST: a node that reports one later (it came back late) has it killed, as the job was told. */
  toldLost: Set<string>;
  progress: JobProgress | undefined;
  containers: Map<string, ContainerRef>;
  taskCounts: ContainerCounts;
  amCounts: ContainerCounts;
  /** Algorithm 1's decision, kept for reports once the job ended. */
  placement?: JobPlacement | undefined;
  /** Vertex names by container priority (the job manager asks at a vertex's topological position), parsed once. */
  vertices?: string[];
  /** Run times of the tasks that succeeded, by vertex (for the job history and the lifetime model). */
  taskDurations: Map<string, number[]>;
  /** Core-ms its ended containers held (admission's mean demand). */
  heldCoreMs: number;
}

/** How an application's containers ended, counted over all its attempts. */
interface ContainerCounts {
  allocated: number;
  succeeded: number;
  failed: number;
  preempted: number;
  lost: number;
  killed: number;
}

function zeroCounts(): ContainerCounts {
  return { allocated: 0, succeeded: 0, failed: 0, preempted: 0, lost: 0, killed: 0 };
}

/** What the application lifecycle tells as it happens (the daemon's metrics count it). */
export interface ApplicationObserver {
  /** A job was accepted (durable). */
  submitted(appId: string): void;
  /** A job ended (durable), in its final state. */
  finished(appId: string, state: AppRecord["state"], outcome: AppRecord["outcome"]): void;
  /** A container this resource manager granted ended, once per container, with how it ended. */
  containerEnded(isAm: boolean, cause: ExitCauseOutput): void;
}

/** What the application lifecycle needs from the rest of the resource manager. */
export interface ApplicationDeps {
  options: ResourceManagerOptions;
  store: RmStateStore;
  scheduler: Scheduler;
  nodes: NodeTracker;
  admission: AdmissionControl;
  demand: JobDemandModel;
  lifetimes: LifetimeModel;
  history: HistoryPlacement | undefined;
  powerPolicy: PowerAwarePolicy | undefined;
  nodeChoice: LifetimeNodeChoice | undefined;
  clock: Clock;
  log: Logger;
  /** The resource manager's address (job managers call it). */
  address: () => string;
  /** This incarnation's start time: container ids carry it, so that a container from before a restart is told apart. */
  epoch: () => number;
  /** Told of submissions, ends and container completions. @default none */
  observer?: ApplicationObserver;
}

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

  constructor(private readonly deps: ApplicationDeps) {}

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
    return { job, vertex: (app && this.vertexOf(app, priority)) ?? "", isJobManager: false };
  }

  /** When a container started, as its node reported it (0: not yet). */
  startedMs(appId: string, containerId: string): number {
    return Number(this.apps.get(appId)?.containers.get(containerId)?.startedMs ?? 0);
  }

  // -------------------------------------------------------------------------------------------- state changes

  /** Moves an application through the one transition function. */
  private transition(app: AppRuntime, event: AppEvent): void {
    app.record.state = nextAppState(app.record.state, event);
  }

  // -------------------------------------------------------------------------------------------- recovery

  /**
   * Loads the applications from the store after a (re)start: finished ones as they are, the others resyncing once
   * `openResyncWindows` is called.
   */
  async recover(clusterTs: number): Promise<void> {
    this.clusterTs = clusterTs;
    for (const record of await this.deps.store.loadApps()) {
      const app = this.newRuntime(record);
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
      app.resyncing = true;
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
      if (!app.resyncing) continue;
      app.resyncing = false;
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
      // Its job manager is back (a node reported it, or it registered again): it goes on.
      if (app.amContainerId !== undefined || app.registered) continue;
      // A resource manager restart is not the job manager's fault: a new attempt without counting a failure.
      this.deps.log.info("no node reported the job manager after the restart; starting a new attempt", {
        appId: app.record.appId,
        attempt: app.record.attempt,
      });
      this.startAttemptInBackground(app, "resource manager restarted and no node reported the job manager");
    }
  }

  private newRuntime(record: AppRecord): AppRuntime {
    return {
      record,
      amContainerId: undefined,
      registered: false,
      lastAmContactMs: 0,
      resyncing: false,
      resyncUntilMs: 0,
      delivery: [],
      completed: [],
      forwarded: new Set(),
      claims: undefined,
      toldLost: new Set(),
      progress: undefined,
      containers: new Map(),
      taskCounts: zeroCounts(),
      amCounts: zeroCounts(),
      taskDurations: new Map(),
      heldCoreMs: 0,
    };
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
    this.trackRef(app, {
      containerId: id,
      nodeId: node.nodeId,
      nmAddress: node.nmAddress,
      isAm,
      state: "RUNNING",
      startedMs: st.startedMs ?? 0,
    });
    (isAm ? app.amCounts : app.taskCounts).allocated += 1;
    if (isAm) {
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
    this.recordEnd(app, st);
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
      this.onContainerCompleted(alloc, {
        containerId: alloc.containerId,
        appId: alloc.appId,
        nodeId: node.nodeId,
        state: "COMPLETE",
        cause: "LOST",
        exitCode: -1,
        diagnostics: `node ${node.nodeId} re-registered without this container (its node manager restarted)`,
        resource: alloc.resource,
        finishedMs: this.deps.clock.nowMs(),
      });
    }
  }

  /** A node went silent: its containers are reported LOST to their jobs. */
  onNodeLost(node: NodeEntry, lost: Allocation[]): void {
    for (const alloc of lost) {
      this.launchPending.delete(alloc.containerId);
      this.onContainerCompleted(alloc, {
        containerId: alloc.containerId,
        appId: alloc.appId,
        nodeId: alloc.nodeId,
        state: "COMPLETE",
        cause: "LOST",
        exitCode: -1,
        diagnostics: `node ${node.nodeId} lost (no heartbeat for ${this.deps.options.nodeExpiryMs} ms)`,
        resource: alloc.resource,
        finishedMs: this.deps.clock.nowMs(),
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
      this.onContainerCompleted(alloc, {
        containerId,
        appId: alloc.appId,
        nodeId: alloc.nodeId,
        state: "COMPLETE",
        cause: "RELEASED",
        exitCode: -1,
        diagnostics: `not launched within ${options.containerLaunchExpiryMs} ms`,
        resource: alloc.resource,
      });
    }
    this.endResyncs(now);
    for (const app of this.apps.values()) if (app.claims && !isTerminal(app.record.state)) this.settleClaims(app);
    for (const app of this.apps.values()) {
      // From its launch on, a job manager must register and then heartbeat within the expiry (YARN's AM liveness).
      const launched = app.amContainerId !== undefined && scheduler.allocation(app.amContainerId) !== undefined;
      if (isTerminal(app.record.state) || !launched || now - app.lastAmContactMs <= options.amExpiryMs) continue;
      const what = app.registered ? "sent no heartbeat" : "did not register";
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

  /**
   * The cores admission control counts for a job: what its past runs held on average (`JobDemandModel`), never more
   * than its job manager and its widest stage (capped at the cluster's); a job never seen counts at that.
   */
  private jobDemandMilli(dag: DagSpec): number {
    let taskMilli = 0;
    for (const v of dag.vertices) taskMilli = Math.max(taskMilli, v.resources.vcoresMilli);
    let clusterMilli = 0;
    for (const v of this.deps.scheduler.nodeViews()) clusterMilli += v.capacity.vcoresMilli;
    const wide = maxConcurrency(dag) * taskMilli;
    // A stage wider than the cluster runs in waves: it never holds more than the cluster.
    const widest = this.deps.options.amResource.vcoresMilli + (clusterMilli > 0 ? Math.min(wide, clusterMilli) : wide);
    return this.deps.demand.demandMilli(dag.name, widest);
  }

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
      this.transition(app, { kind: "admit" });
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
    const out: AdmittedJob[] = [];
    for (const app of this.apps.values()) {
      const r = app.record;
      if (isTerminal(r.state) || r.state === "QUEUED") continue;
      const since = r.admittedMs || r.submitMs;
      out.push({
        appId: r.appId,
        demandMilli: r.demandMilli ?? 0,
        allocatedMilli: this.deps.scheduler.allocatedMilliOf(r.appId),
        endMs: now + this.deps.lifetimes.jobRemainingMs(r.name, now - since),
      });
    }
    return out;
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
    this.launchPending.set(alloc.containerId, this.deps.clock.nowMs());
    const container = this.containerOf(app, alloc, node);
    this.trackRef(app, {
      containerId: alloc.containerId,
      nodeId: node.nodeId,
      nmAddress: node.nmAddress,
      isAm: alloc.priority === AM_PRIORITY,
      state: "ALLOCATED",
    });
    (alloc.priority === AM_PRIORITY ? app.amCounts : app.taskCounts).allocated += 1;
    if (alloc.priority === AM_PRIORITY) {
      app.amContainerId = alloc.containerId;
      app.lastAmContactMs = this.deps.clock.nowMs();
      void this.launchAm(app, container);
    } else {
      app.delivery.push(container);
    }
  }

  /** The grant as the job manager and the node manager see it, with its signed token. */
  private containerOf(
    app: AppRuntime,
    alloc: Allocation,
    node: { nodeId: string; nmAddress: string },
  ): ContainerOutput {
    const secret = this.deps.options.secret;
    return {
      id: alloc.containerId,
      nodeId: node.nodeId,
      nmAddress: node.nmAddress,
      resource: alloc.resource,
      priority: alloc.priority,
      jobPriority: app.record.priority ?? 0,
      user: app.record.user,
      token: signContainer(secret, {
        containerId: alloc.containerId,
        appId: alloc.appId,
        nodeId: node.nodeId,
        resource: alloc.resource,
        jobPriority: app.record.priority ?? 0,
        user: app.record.user,
      }),
    };
  }

  private async launchAm(app: AppRuntime, container: ContainerOutput): Promise<void> {
    const { options, scheduler, log } = this.deps;
    const { appId, attempt } = app.record;
    const env: Record<string, string> = {
      HARVEST_HOME: packageRoot(),
      HARVEST_APP_ID: appId,
      HARVEST_ATTEMPT: String(attempt),
      HARVEST_RM_ADDRESS: this.deps.address(),
      HARVEST_STAGING_DIR: options.stagingDir,
      HARVEST_DAG_FILE: join(options.stagingDir, appId, "dag.json"),
      // The job manager's only credentials: its AM token and the submitter's file-system token (passed on to tasks).
      ...(options.secret ? { HARVEST_AM_TOKEN: signAmToken(options.secret, { appId, attempt }) } : {}),
      ...(app.record.dfsToken ? { HARVEST_DFS_TOKEN: app.record.dfsToken } : {}),
    };
    try {
      const client = this.deps.nodes.client(container.nmAddress);
      await call(client, client.startContainer, {
        container,
        appId,
        argv: options.jobManagerCommand,
        env,
        isAm: true,
      });
      log.info("job manager launched", { appId, attempt, containerId: container.id, nodeId: container.nodeId });
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
    this.recordEnd(app, st, alloc.priority, alloc.resource.vcoresMilli);
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
    this.onContainerCompleted(alloc, {
      containerId,
      appId: alloc.appId,
      nodeId: alloc.nodeId,
      state: "COMPLETE",
      cause,
      exitCode: -1,
      diagnostics,
      resource: alloc.resource,
      finishedMs: this.deps.clock.nowMs(),
    });
  }

  /** Marks a container's reference complete and counts how it ended (once per container). */
  private recordEnd(app: AppRuntime | undefined, st: ContainerStatus, priority?: number, milli = 0): void {
    const ref = app?.containers.get(st.containerId ?? "");
    if (!app || !ref || ref.state === "COMPLETE") return;
    // After a user's kill every container ends because of it, including a job manager that exits on its own.
    const cause: ExitCauseOutput =
      app.record.state === "KILLED" ? "KILLED_BY_USER" : ((st.cause ?? "EXIT_CAUSE_UNSPECIFIED") as ExitCauseOutput);
    moveContainer(ref, "ended");
    ref.cause = cause;
    if (st.startedMs) ref.startedMs = st.startedMs;
    ref.finishedMs = st.finishedMs ?? this.deps.clock.nowMs();
    const counts = ref.isAm ? app.amCounts : app.taskCounts;
    const ranMs = Number(ref.finishedMs) - Number(ref.startedMs ?? 0);
    if (Number(ref.startedMs ?? 0) > 0 && ranMs > 0) app.heldCoreMs += (ranMs * milli) / 1000;
    if (cause === "SUCCEEDED" && !ref.isAm && priority !== undefined && Number(ref.startedMs ?? 0) > 0 && ranMs >= 0)
      this.recordTaskDuration(app, priority, ranMs);
    if (cause === "SUCCEEDED") counts.succeeded++;
    else if (cause === "FAILED" || cause === "EXCEEDED_MEMORY") counts.failed++;
    else if (cause === "PREEMPTED_BY_PRIMARY" || cause === "PREEMPTED_BY_POWER" || cause === "PREEMPTED_BY_DRAIN")
      counts.preempted++;
    else if (cause === "LOST") counts.lost++;
    else counts.killed++;
    this.deps.observer?.containerEnded(ref.isAm === true, cause);
  }

  /** A task that succeeded: its run time joins the lifetime model now and its job's history record at the end. */
  private recordTaskDuration(app: AppRuntime, priority: number, durationMs: number): void {
    const vertex = this.vertexOf(app, priority);
    if (vertex === undefined) return;
    this.deps.lifetimes.observeTask(app.record.name, vertex, durationMs);
    const list = app.taskDurations.get(vertex) ?? [];
    if (list.length < MAX_DURATIONS_PER_VERTEX) list.push(durationMs);
    app.taskDurations.set(vertex, list);
  }

  /** The vertex a container of `app` at `priority` runs (undefined: the job manager, or unknown). */
  private vertexOf(app: AppRuntime, priority: number): string | undefined {
    if (priority === AM_PRIORITY) return undefined;
    if (!app.vertices) {
      try {
        app.vertices = topologicalOrder(
          parseDag(app.record.dagJson, { maxParallelism: this.deps.options.maxParallelism }),
        );
      } catch {
        app.vertices = [];
      }
    }
    return app.vertices[priority];
  }

  private trackRef(app: AppRuntime, ref: ContainerRef): void {
    if (app.containers.size >= MAX_CONTAINER_REFS) {
      const oldest = app.containers.keys().next().value;
      if (oldest !== undefined) app.containers.delete(oldest);
    }
    app.containers.set(ref.containerId ?? "", ref);
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
    this.transition(app, { kind: "attempt-ended" });
    app.record.diagnostics = `attempt ${app.record.attempt} waiting for a container (${why})`;
    app.amContainerId = undefined;
    app.registered = false;
    app.resyncUntilMs = 0;
    app.delivery = [];
    await this.deps.store.putApp(app.record);
    this.askForJobManager(app);
  }

  private askForJobManager(app: AppRuntime): void {
    this.deps.scheduler.setAsks(app.record.appId, [
      { priority: AM_PRIORITY, resource: this.deps.options.amResource, count: 1 },
    ]);
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

  /** Accepts a job: validated, durable (record and DAG file) before the answer, then queued or asking for its manager. */
  async submit(dagJson: string, user: string, dfsToken = ""): Promise<{ appId: string }> {
    const { options, scheduler, admission, store, log } = this.deps;
    const max = scheduler.maxNodeCapacity();
    const dag = parseDag(dagJson, {
      maxParallelism: options.maxParallelism,
      ...(max.vcoresMilli > 0 ? { maxResource: max } : {}),
    });
    const demandMilli = this.jobDemandMilli(dag);
    // A job that even an idle cluster would not admit is refused now, not queued for ever.
    if (admission.enabled) admission.checkAdmissible({ name: dag.name, priority: dag.priority ?? 0, demandMilli });
    const seq = await store.nextAppSeq();
    const appId = formatAppId(this.clusterTs, seq);
    const record: AppRecord = {
      appId,
      seq,
      name: dag.name,
      user: user || "unknown",
      dagJson,
      state: admission.enabled ? "QUEUED" : "ACCEPTED",
      outcome: "JOB_OUTCOME_UNSPECIFIED",
      diagnostics: admission.enabled
        ? `waiting for admission (${options.admission}-moment policy)`
        : "waiting for a container for the job manager",
      demandMilli,
      submitMs: this.deps.clock.nowMs(),
      startMs: 0,
      finishMs: 0,
      attempt: 1,
      failedAttempts: 0,
      maxConcurrency: 0,
      priority: dag.priority ?? 0,
      ...(dfsToken ? { dfsToken } : {}),
    };
    // The job manager reads its DAG from the staging directory (as YARN's job files); both writes precede the reply.
    const jobDir = join(options.stagingDir, appId);
    await mkdir(jobDir, { recursive: true });
    await writeFileDurably(join(jobDir, "dag.json"), dagJson);
    await store.putApp(record);
    const app = this.newRuntime(record);
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

  report(app: AppRuntime, withContainers = true): ApplicationReport {
    const r = app.record;
    return {
      appId: r.appId,
      name: r.name,
      user: r.user,
      state: r.state,
      outcome: r.outcome,
      diagnostics: r.diagnostics,
      submitMs: r.submitMs,
      startMs: r.startMs,
      finishMs: r.finishMs,
      attempts: r.attempt,
      progress: app.progress ?? null,
      containers: withContainers ? [...app.containers.values()] : [],
      taskContainers: app.taskCounts,
      amContainers: app.amCounts,
      ...this.placementOf(r.appId),
    };
  }

  private placementOf(appId: string): { jobType: string; classes: string[]; placementNote: string } {
    const p = this.deps.history?.placement(appId);
    const q = p ?? this.apps.get(appId)?.placement;
    return { jobType: q?.jobType ?? "", classes: q?.classIds ?? [], placementNote: q?.note ?? "" };
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
    this.transition(app, { kind: "registered" });
    app.registered = true;
    app.lastAmContactMs = clock.nowMs();
    app.claims = new Set((req.runningContainers ?? []).slice(0, 100_000));
    // Right after a restart the nodes may not all have reported yet: claims no node reported wait for them (tick).
    this.settleClaims(app);
    app.record.diagnostics = "";
    app.record.maxConcurrency = Math.max(0, Math.floor(req.maxConcurrency));
    if (app.record.startMs === 0) app.record.startMs = clock.nowMs();
    await store.putApp(app.record);
    scheduler.setMaxConcurrency(req.appId, app.record.maxConcurrency);
    if (history) {
      // Algorithm 1, line 3: the job's type from the duration of its last run against the history's thresholds.
      const past = (await store.history("", options.jobHistoryWindow)).filter((h) => h.outcome === "JOB_SUCCEEDED");
      const last = past.find((h) => h.name === app.record.name);
      const jobType = jobTypeOf(
        last?.durationMs,
        past.map((h) => h.durationMs),
        options.jobTypes,
      );
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

  /**
   * Answers every container the job manager claims to run that this resource manager no longer holds: with how it
   * ended when that is known, as LOST otherwise (no node reported it), but never before a node that has not
   * re-registered since a restart could still report it (`claimsSettleMs`): a task answered LOST is run again, and
   * the first run may be finishing on that node. Duplicates are harmless to a job manager (an end it already saw is
   * ignored); a task waiting for ever on a container that is gone is not.
   */
  private settleClaims(app: AppRuntime): void {
    const claims = app.claims;
    if (!claims) return;
    const mayStillReport = this.deps.clock.nowMs() < this.claimsSettleMs;
    const queued = new Set(app.completed.map((c) => c.containerId));
    let settled = 0;
    for (const id of claims) {
      if (this.deps.scheduler.allocation(id) || queued.has(id)) {
        claims.delete(id);
        continue;
      }
      const ref = app.containers.get(id);
      const ended = ref?.state === "COMPLETE";
      if (!ended && mayStillReport) continue;
      claims.delete(id);
      if (!ended) app.toldLost.add(id);
      app.completed.push({
        containerId: id,
        appId: app.record.appId,
        nodeId: ref?.nodeId ?? "",
        state: "COMPLETE",
        cause: ended ? (ref.cause ?? "LOST") : "LOST",
        exitCode: -1,
        diagnostics: ended
          ? "ended while the job manager was away"
          : "no node reports this container any more (its node restarted or was lost)",
        finishedMs: Number(ref?.finishedMs ?? 0) || this.deps.clock.nowMs(),
        startedMs: ref?.startedMs ?? 0,
      });
      settled++;
    }
    if (claims.size === 0) app.claims = undefined;
    if (settled > 0)
      this.deps.log.info("containers a job manager claimed are gone; told it", { appId: app.record.appId, settled });
  }

  /** The job's task containers held now (granted to this or earlier attempts, or before a restart). */
  private runningTaskContainers(app: AppRuntime): ContainerOutput[] {
    const out: ContainerOutput[] = [];
    const undelivered = new Set(app.delivery.map((c) => c.id));
    for (const id of app.containers.keys()) {
      const alloc = this.deps.scheduler.allocation(id);
      if (!alloc || alloc.priority === AM_PRIORITY || undelivered.has(id)) continue;
      const node = this.deps.nodes.get(alloc.nodeId);
      if (node) out.push(this.containerOf(app, alloc, node));
    }
    return out;
  }

  allocate(req: {
    appId: string;
    attempt: number;
    asks: { priority: number; resource: { vcoresMilli: number; memoryMb: number } | null; count: number }[];
    releases: string[];
    progress: JobProgressOutput | null;
  }): object {
    const { scheduler, history, clock } = this.deps;
    const app = this.activeApp(req.appId, req.attempt);
    if (isTerminal(app.record.state)) return { allocated: [], completed: [], shutdown: true, resync: false };
    app.lastAmContactMs = clock.nowMs();
    // This resource manager restarted (or never saw the registration): register again, then go on.
    if (!app.registered) return { allocated: [], completed: [], shutdown: false, resync: true };
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
    const delivered = app.delivery;
    app.delivery = [];
    // The job manager counted its needs before seeing these containers: subtract them (asks are absolute).
    const deliveredByPriority = new Map<number, number>();
    for (const c of delivered) deliveredByPriority.set(c.priority, (deliveredByPriority.get(c.priority) ?? 0) + 1);
    scheduler.setAsks(
      req.appId,
      req.asks.map((a) => ({
        priority: a.priority,
        resource: fromWire(a.resource),
        count: Math.max(0, a.count - (deliveredByPriority.get(a.priority) ?? 0)),
      })),
    );
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
    if (app.record.state === "ACCEPTED") this.transition(app, { kind: "registered" });
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
    const state = nextAppState(app.record.state, event);
    app.record.state = state;
    app.record.outcome = outcome;
    app.record.diagnostics = diagnostics;
    app.record.finishMs = now;
    if (progress) app.progress = progress;
    const history: HistoryRecord = {
      appId: app.record.appId,
      name: app.record.name,
      durationMs: now - app.record.submitMs,
      outcome,
      finishMs: now,
      tasksRun: app.progress?.tasksRun ?? 0,
      tasksPreempted: app.progress?.tasksPreempted ?? 0,
      taskDurations: Object.fromEntries(app.taskDurations),
    };
    const ranMs = now - (app.record.admittedMs || app.record.submitMs);
    if (outcome === "JOB_SUCCEEDED" && ranMs > 0) {
      // The job manager's container (still running now) held its cores for the whole run.
      const amHeld =
        ((app.record.startMs ? now - app.record.startMs : 0) * this.deps.options.amResource.vcoresMilli) / 1000;
      history.meanDemandMilli = Math.round((1000 * (app.heldCoreMs + amHeld)) / ranMs);
      this.deps.demand.observe(app.record.name, history.meanDemandMilli);
      this.deps.lifetimes.observeJob(app.record.name, history.durationMs);
    }
    // Durable before anyone is told.
    await store.finishApp(app.record, history);
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

/** Rejects a malformed ask, and (given the largest node) one no node could ever grant. */
function checkAsk(
  i: number,
  ask: { priority: number; resource: { vcoresMilli: number; memoryMb: number } | null; count: number },
  max: { vcoresMilli: number; memoryMb: number } | undefined,
): void {
  const r = fromWire(ask.resource);
  if (!Number.isInteger(ask.priority) || ask.priority < 0)
    throw new HarvestError("INVALID_ARGUMENT", `asks[${i}].priority must be an integer >= 0`, {
      details: { field: `asks[${i}].priority` },
    });
  if (!(r.vcoresMilli > 0 && r.memoryMb > 0))
    throw new HarvestError("INVALID_ARGUMENT", `asks[${i}].resource must be positive`, {
      details: { field: `asks[${i}].resource` },
    });
  if (max && !fits(r, max))
    throw new HarvestError("DAG_RESOURCES_TOO_LARGE", `asks[${i}] asks for more than any node has`, {
      details: { field: `asks[${i}].resource` },
    });
  if (!(ask.count >= 0 && ask.count <= 1_000_000))
    throw new HarvestError("INVALID_ARGUMENT", `asks[${i}].count out of range`, {
      details: { field: `asks[${i}].count` },
    });
}

/** Writes a file and fsyncs it before resolving. */
async function writeFileDurably(path: string, data: string): Promise<void> {
  const fh = await open(path, "w");
  try {
    await fh.writeFile(data);
    await fh.sync();
  } finally {
    await fh.close();
  }
}

/** Moves a container reference through its one transition function (CONTAINER_MACHINE). */
function moveContainer(ref: ContainerRef, event: RmContainerEvent): void {
  ref.state = CONTAINER_MACHINE.next(ref.state as RmContainerState, event, ref.containerId);
}
