/**
 * The resource manager's own `Scheduler` driven by simulated heartbeats: asks, grants, Algorithm 1 placement
 * (`HistoryPlacement`), classification, and heartbeats in the order of the node choice by lifetimes (NILAS, LAVA) that
 * the lifetimes feature wraps around the placement policy.
 */
import type { UtilizationSeries } from "../../common/trace-io.js";
import { AM_PRIORITY, classifyFeatures, tenantFeatures } from "../../resourcemanager/index.js";
import type {
  Allocation,
  AppView,
  ContainerKey,
  FeaturedTenant,
  NodeChoiceSource,
  NodeView,
  PlacementDecision,
} from "../../resourcemanager/index.js";
import type { ComputeState, DriverPort } from "../engine/compute-state.js";
import { taskDurationMs } from "../jobs.js";
import type { Attempt, JobRun } from "./job-run.js";
import { JOB_MANAGER, TASK_STRIDE } from "./job-run.js";

/** See the file header. */
export class SchedulerDriver implements DriverPort {
  constructor(private readonly sim: ComputeState) {}

  /** After kills: the jobs that lost containers ask again, the servers in `gained` heartbeat, the jobs look for room. */
  reAsk(touched: Set<JobRun>, gained: readonly number[]): void {
    for (const run of touched) this.sim.jobManagers.updateAsk(run);
    for (const s of gained) this.heartbeat(s);
    for (const run of touched) if (this.sim.runs.has(run.appId)) this.place(run);
  }

  /** Heartbeats of the free servers the job may use, until its ask is met or they are full. */
  place(run: JobRun): void {
    if (this.sim.nodeChoice) {
      this.placeBestFirst(run);
      return;
    }
    if (this.sim.jobManagers.needsJobManager(run)) {
      // The job manager may run anywhere (the history policy restricts only tasks).
      while (run.jobManager === undefined && this.sim.free.size > 0) {
        const s = this.sim.free.at(this.sim.serverRng.int(this.sim.free.size));
        if (this.heartbeat(s) === 0 && this.sim.free.has(s)) break;
      }
      return;
    }
    if (!run.decided || this.sim.jobManagers.queued(run) === 0) return;
    const allowed = run.allowed;
    if (allowed) {
      const n = allowed.length;
      const from = this.sim.serverRng.int(n);
      for (let i = 0; i < n && this.sim.jobManagers.queued(run) > 0; i++) {
        const s = allowed[(from + i) % n]!;
        if (this.sim.free.has(s)) this.heartbeat(s);
      }
      return;
    }
    if (run.avoidSent && run.avoidSent.size < this.sim.nodeIds.length) {
      this.placeAvoiding(run, run.avoidSent);
      return;
    }
    while (this.sim.jobManagers.queued(run) > 0 && this.sim.free.size > 0) {
      const s = this.sim.free.at(this.sim.serverRng.int(this.sim.free.size));
      // A free server grants at least one container to some job that may use it (this job may use any), or it learns
      // of its primary's growth and leaves the free list: every heartbeat here makes progress. Should neither happen,
      // stop rather than spin.
      if (this.heartbeat(s) === 0 && this.sim.free.has(s)) break;
    }
  }

  /**
   * `place` for a job that may use any server but avoids `avoid` after preemption notices: the free servers it does not
   * avoid heartbeat from a random one on (a heartbeat of an avoided server would grant it nothing, so the loop above
   * could stop on one).
   */
  private placeAvoiding(run: JobRun, avoid: ReadonlySet<number>): void {
    const candidates: number[] = [];
    for (let i = 0; i < this.sim.free.size; i++) {
      const s = this.sim.free.at(i);
      if (!avoid.has(s)) candidates.push(s);
    }
    const n = candidates.length;
    if (n === 0) return;
    const from = this.sim.serverRng.int(n);
    for (let i = 0; i < n && this.sim.jobManagers.queued(run) > 0; i++) {
      const s = candidates[(from + i) % n]!;
      if (this.sim.free.has(s)) this.heartbeat(s);
    }
  }

  /**
   * One node heartbeat: it reports the primary's usage as it is now, and the scheduler grants what fits there.
   * Returns the grants.
   */
  heartbeat(s: number): number {
    if (this.sim.aware) this.sim.servers.report(s);
    this.sim.notices?.beforeGrant();
    const allocs = this.sim.scheduler.allocateOnNode(this.sim.nodeIds[s]!);
    for (const alloc of allocs) {
      this.grant(alloc, s);
      if (this.sim.nodeChoice) this.settleKey(alloc);
    }
    this.refreshFree(s);
    return allocs.length;
  }

  /** A container was granted on server `s`: it is held from now, and its job manager or task starts after launch. */
  private grant(alloc: Allocation, s: number): void {
    const run = this.sim.runs.get(alloc.appId)!;
    const now = this.sim.engine.clock.nowMs();
    const isAm = alloc.priority === AM_PRIORITY;
    let task = JOB_MANAGER;
    if (!isAm) {
      // The scheduler counted the grant against the ask: the job manager gives it its next runnable task.
      task = run.queue[run.head]!;
      this.sim.taskWaitMs += now - run.queuedAtMs[run.head]!;
      run.head++;
      if (run.head > 1024 && run.head * 2 > run.queue.length) {
        run.queue = run.queue.slice(run.head);
        run.queuedAtMs = run.queuedAtMs.slice(run.head);
        run.head = 0;
      }
    }
    const milli = alloc.resource.vcoresMilli;
    const a: Attempt = {
      run,
      task,
      server: s,
      startMs: now,
      containerId: alloc.containerId,
      milli,
      isAm,
      alive: true,
      launched: false,
      workLeftMs: 0,
      sinceMs: now,
      rate: 1,
      version: 0,
    };
    this.sim.running[s]!.add(a);
    this.sim.servers.changeHeld(s, () => {
      this.sim.secondaryMilli[s]! += milli;
    });
    this.sim.liveNodes[s]!.allocated.vcoresMilli += milli;
    if (isAm) {
      run.jobManager = a;
      const delay = this.sim.jobManagers.launchDelayMs(false);
      if (delay > 0) this.sim.at(now + delay, () => this.sim.jobManagers.jobManagerUp(a));
      else this.sim.jobManagers.jobManagerUp(a);
      return;
    }
    run.attempts.add(a);
    this.sim.tasksRun++;
    const vertex = Math.floor(task / TASK_STRIDE);
    const index = task % TASK_STRIDE;
    a.workLeftMs = taskDurationMs(this.sim.stream, run.job, vertex, index);
    a.workMs = a.workLeftMs;
    this.sim.o.observer?.onTaskStart?.({ job: run.job, vertex, task: index, server: s, nowMs: now });
    const delay = this.sim.jobManagers.launchDelayMs(true);
    if (delay > 0) this.sim.at(now + delay, () => this.sim.jobManagers.launch(a));
    else this.sim.jobManagers.launch(a);
  }

  // ---------------------------------------------------------------------------------------------- free servers

  refreshFree(s: number): void {
    const room =
      this.sim.capMilli[s]! - this.sim.seenMilli[s]! - this.sim.reserveMilli[s]! - this.sim.secondaryMilli[s]!;
    this.sim.free.set(s, room >= this.sim.taskMilli && this.sim.servers.inService(s));
  }

  // ---------------------------------------------------------------------------------------------- Algorithm 1

  /**
   * Classifies the tenants on their average-server series over the last `historyMs` before `nowMs` (seeds/004 section
   * 4.1: periodically, on the most recent history). Tenants with no slot in the window are left unclassified.
   */
  classify(nowMs: number): void {
    const { cluster } = this.sim;
    const slotMs = cluster.slotMs;
    const to = Math.floor(nowMs / slotMs);
    const from = Math.max(0, to - Math.floor(cluster.historyMs / slotMs));
    const featured: FeaturedTenant[] = [];
    if (to > from) {
      const timesMs: number[] = [];
      for (let k = from; k < to; k++) timesMs.push(k * slotMs);
      for (const t of cluster.tenants) {
        if (t.servers.length === 0) continue;
        const cpuPct = Array.from(t.utilization.subarray(from, Math.min(to, t.utilization.length)));
        if (cpuPct.length === 0) continue;
        const series: UtilizationSeries = {
          name: t.id,
          stepSec: slotMs / 1000,
          startMs: timesMs[0]!,
          timesMs: cpuPct.length === timesMs.length ? timesMs : timesMs.slice(0, cpuPct.length),
          cpuPct,
        };
        featured.push({
          tenantId: t.id,
          servers: t.servers.map((s) => this.sim.nodeIds[s]!),
          features: tenantFeatures(series, this.sim.o.classifier),
        });
      }
    }
    const tenantClasses =
      featured.length > 0 ? classifyFeatures(featured, this.sim.o.classifier, this.sim.kmeansRng) : [];
    this.sim.classViews!.setClasses(tenantClasses);
    this.sim.o.observer?.onClassified?.({ classes: tenantClasses, nowMs });
    this.sim.classifications++;
  }

  /** Acts on what the placement decided for a job: start it on its classes' servers (or any), or keep it waiting. */
  onDecision(run: JobRun, decision: PlacementDecision, place = true): void {
    this.sim.o.observer?.onDecision?.({
      job: run.job,
      jobType: run.type,
      decision,
      nowMs: this.sim.engine.clock.nowMs(),
    });
    if (decision.kind === "wait") {
      if (!run.waited) {
        run.waited = true;
        this.sim.jobsWaited++;
        this.scheduleRetry();
      }
      return;
    }
    run.decided = true;
    if (decision.kind === "classes") {
      // Heartbeats visit the servers the scheduler policy now allows the job, in the order the placement gave them.
      const assigned = this.sim.history!.assigned(run.appId)!;
      const servers: number[] = [];
      for (const id of assigned) {
        const s = this.sim.serverIndex.get(id);
        if (s !== undefined) servers.push(s);
      }
      run.allowed = Int32Array.from(servers);
      this.sim.o.observer?.onJobPlaced?.({ job: run.job, jobType: run.type, classIds: decision.classIds, servers });
      // Confined jobs are opened to all near saturation: the monitor tick looks.
      if (this.sim.o.saturationShare < 1) this.scheduleRetry();
    } else {
      // A job placed as stock, or one confined earlier and opened near saturation.
      run.allowed = undefined;
      this.sim.jobsOpenedToAll++;
      this.sim.o.observer?.onJobPlaced?.({ job: run.job, jobType: run.type });
    }
    if (!place) return;
    this.sim.jobManagers.updateAsk(run);
    this.place(run);
  }

  /** While jobs wait for a class, the resource manager's monitor tick retries them every `retryIntervalMs`. */
  private scheduleRetry(): void {
    if (this.sim.retryScheduled) return;
    this.sim.retryScheduled = true;
    this.sim.at(this.sim.engine.clock.nowMs() + this.sim.o.retryIntervalMs, () => {
      this.sim.retryScheduled = false;
      let waiting = false;
      for (const decision of this.sim.placement!.retryWaiting()) {
        const run = this.sim.runs.get(decision.appId);
        if (!run) continue;
        if (decision.kind === "wait") waiting = true;
        this.onDecision(run, decision);
      }
      if (waiting || (this.sim.o.saturationShare < 1 && this.sim.placement!.confinedJobs() > 0)) this.scheduleRetry();
    });
  }

  /** What node choice (NILAS, LAVA) reads of the cluster: the nodes it weighs, the key of a job's next container. */
  nodeChoiceSource(): NodeChoiceSource {
    return {
      nodes: () => this.nodeChoiceNodes(),
      keyOf: (app, priority) => this.keyOfNext(app.appId, priority),
      node: (id) => this.sim.scheduler.nodeView(id),
    };
  }

  /** The smallest container any job asks for: a task, or a job manager's. */
  private minAskMilli(): number {
    const am = this.sim.cost.jobManagerMilli;
    return am > 0 && am < this.sim.taskMilli ? am : this.sim.taskMilli;
  }

  /**
   * The nodes the node choice weighs (its `NodeChoiceSource.nodes`): those in service with room for the smallest ask
   * (a node without cannot take any container, so it is no rival), or, for its `tick`, every node in service.
   */
  private *nodeChoiceNodes(): IterableIterator<NodeView> {
    const need = this.minAskMilli();
    for (let s = 0; s < this.sim.nodeIds.length; s++) {
      if (!this.sim.servers.inService(s) || (!this.sim.tickingAll && this.sim.servers.roomMilli(s) < need)) continue;
      const view = this.sim.scheduler.nodeView(this.sim.nodeIds[s]!);
      if (view) yield view;
    }
  }

  /** The key of the next container of `appId`'s ask at `priority` (the node choice's `keyOf`). */
  private keyOfNext(appId: string, priority: number): ContainerKey {
    const run = this.sim.runs.get(appId);
    if (!run) return { job: "", vertex: "", isJobManager: priority === AM_PRIORITY };
    if (priority === AM_PRIORITY) return this.sim.lifetimes.jobManagerKey(run);
    const i = run.head + (this.sim.keysInFlight.get(appId) ?? 0);
    const task = run.queue[i] ?? run.queue[run.head];
    return task === undefined
      ? { job: run.job.shape.name, vertex: "", isJobManager: false }
      : this.sim.lifetimes.taskKey(run, task);
  }

  /**
   * The key of a container the scheduler just granted (its listener runs inside the heartbeat, before `grant` gives
   * the container its task): the task it will run, counted in `keysInFlight` until `settleKey`. A job manager that
   * registers inside the same heartbeat (zero launch time) may take a task in between: the keys of that heartbeat's
   * tasks of one job are then permuted among them.
   */
  keyOfGrant(alloc: Allocation): ContainerKey {
    const key = this.keyOfNext(alloc.appId, alloc.priority);
    if (alloc.priority !== AM_PRIORITY)
      this.sim.keysInFlight.set(alloc.appId, (this.sim.keysInFlight.get(alloc.appId) ?? 0) + 1);
    return key;
  }

  /** `grant` gave a task container its task: it is no longer in flight. */
  private settleKey(alloc: Allocation): void {
    if (alloc.priority === AM_PRIORITY) return;
    const n = (this.sim.keysInFlight.get(alloc.appId) ?? 0) - 1;
    if (n > 0) this.sim.keysInFlight.set(alloc.appId, n);
    else this.sim.keysInFlight.delete(alloc.appId);
  }

  /**
   * `place` under NILAS or LAVA: the servers that could take the job's next container now (in service with room for
   * it, and in the job's classes under history), ranked by the node choice's `order` and heartbeating best first, so
   * that its gate takes each container on the best one. Each server heartbeats once: its rank depends only on its own
   * containers, so the order stays right for those not visited yet. The gate may still decline (LAVA: only recycling
   * servers of the container's class or lower are left); it lets any server take an ask declined for `waitMs`, and
   * the resource manager's servers heartbeat every second, so the job tries again after that wait (twice at most
   * without a grant: a job that cannot be placed for another reason waits for the next change, as under stock).
   */
  private placeBestFirst(run: JobRun): void {
    const choice = this.sim.nodeChoice!;
    const am = this.sim.jobManagers.needsJobManager(run);
    if (!am && (!run.decided || this.sim.jobManagers.queued(run) === 0)) return;
    const need = am ? this.sim.cost.jobManagerMilli : this.sim.taskMilli;
    const servers: number[] = [];
    if (am) {
      for (let s = 0; s < this.sim.nodeIds.length; s++)
        if (this.sim.servers.inService(s) && this.sim.servers.roomMilli(s) >= need) servers.push(s);
    } else if (run.allowed) {
      for (const s of run.allowed) if (this.sim.free.has(s)) servers.push(s);
    } else for (let i = 0; i < this.sim.free.size; i++) servers.push(this.sim.free.at(i));
    if (servers.length === 0) return;
    // Ties keep their order: by server index, whatever order the free list is in.
    servers.sort((a, b) => a - b);
    const views = servers.map((s) => this.sim.scheduler.nodeView(this.sim.nodeIds[s]!)!);
    const app: AppView = { appId: run.appId, order: run.job.id, maxConcurrency: run.job.shape.maxConcurrency };
    const hungry = (): boolean =>
      this.sim.runs.get(run.appId) === run &&
      (am ? this.sim.jobManagers.needsJobManager(run) : run.decided && this.sim.jobManagers.queued(run) > 0);
    const queuedBefore = this.sim.jobManagers.queued(run);
    for (const view of choice.order(app, am ? AM_PRIORITY : 0, views)) {
      if (!hungry()) break;
      this.heartbeat(this.sim.serverIndex.get(view.nodeId)!);
    }
    if (!hungry() || !servers.some((s) => this.sim.servers.inService(s) && this.sim.servers.roomMilli(s) >= need)) {
      this.sim.gateRetries.delete(run.appId);
      return;
    }
    const progressed = !am && this.sim.jobManagers.queued(run) < queuedBefore;
    const tries = progressed ? 0 : (this.sim.gateRetries.get(run.appId) ?? 0);
    if (tries >= 2) return;
    this.sim.gateRetries.set(run.appId, tries + 1);
    this.sim.at(this.sim.engine.clock.nowMs() + choice.options.waitMs + 1, () => {
      if (this.sim.runs.get(run.appId) === run) this.place(run);
    });
  }
}
