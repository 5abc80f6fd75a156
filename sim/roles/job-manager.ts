/**
 * The simulated job managers (as Hadoop SLS's AMSimulator): the DAG runner of every job: submission, registration,
 * runnable task queues, attempts, launches, re-runs after kills, job ends and the job history.
 */
import { AM_PRIORITY, freeTaskSlots, jobTypeOf } from "../../resourcemanager/index.js";
import type { QuoteServer } from "../../resourcemanager/index.js";
import type { ComputeState, JobManagersPort } from "../engine/compute-state.js";
import type { SimJob } from "../jobs.js";
import type { Attempt, JobRun } from "./job-run.js";
import { TASK_STRIDE } from "./job-run.js";

/** The first index of ascending `sorted` whose value is >= `v`. */
export function lowerBound(sorted: readonly number[], v: number): number {
  let lo = 0;
  let hi = sorted.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (sorted[mid]! < v) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

/** See the file header. */
export class SimJobManagers implements JobManagersPort {
  constructor(private readonly sim: ComputeState) {}

  /** A task attempt is killed: its work so far is lost and the job manager re-runs the task. */
  killTask(a: Attempt, touched: Set<JobRun>): void {
    const now = this.sim.engine.clock.nowMs();
    this.endAttempt(a);
    this.sim.notices?.killed(a);
    this.sim.taskKills++;
    this.sim.timeByType[a.run.type].kills++;
    this.sim.wastedCoreMs += ((now - a.startMs) * a.milli) / 1000;
    // The job manager re-runs a preempted task; it waits for a container like any runnable task.
    a.run.queue.push(a.task);
    a.run.queuedAtMs.push(now);
    touched.add(a.run);
    this.sim.o.observer?.onTaskKilled?.({
      job: a.run.job,
      vertex: Math.floor(a.task / TASK_STRIDE),
      task: a.task % TASK_STRIDE,
      server: a.server,
      nowMs: now,
    });
  }

  /**
   * A job manager is killed: the resource manager releases every container of its attempt (the running tasks are
   * lost) and starts another attempt, which asks for a container of its own, registers (Algorithm 1 runs again) and
   * recovers the finished tasks from its journal: only the unfinished ones run again.
   */
  killJobManager(am: Attempt, touched: Set<JobRun>): void {
    const run = am.run;
    const now = this.sim.engine.clock.nowMs();
    this.sim.jobManagerKills++;
    this.sim.wastedCoreMs += ((now - am.startMs) * am.milli) / 1000;
    this.endAttempt(am);
    this.sim.notices?.killed(am);
    run.jobManager = undefined;
    this.sim.notices?.jobManagerLost(run);
    for (const a of [...run.attempts]) {
      this.killTask(a, touched);
      if (a.server !== am.server) this.sim.servers.roomFreed(a.server);
    }
    run.decided = false;
    run.allowed = undefined;
    this.sim.placement?.remove(run.appId);
    touched.add(run);
  }

  // ---------------------------------------------------------------------------------------------- jobs

  scheduleNextJob(): void {
    const job = this.sim.stream.jobs[this.sim.nextJob];
    if (!job || job.submitMs >= this.sim.cluster.horizonMs) return;
    this.sim.at(job.submitMs, () => {
      this.sim.nextJob++;
      // A feature may take the job (admission control queues it, and submits it once admitted).
      if (!this.sim.features.jobArrived(job)) this.submit(job);
      this.scheduleNextJob();
    });
  }

  submit(job: SimJob): void {
    const now = this.sim.engine.clock.nowMs();
    const { vertices } = job.shape;
    const inputsLeft = new Int32Array(vertices.length);
    const tasksLeft = new Int32Array(vertices.length);
    const consumers: number[][] = vertices.map(() => []);
    vertices.forEach((v, i) => {
      inputsLeft[i] = v.inputs.length;
      tasksLeft[i] = v.tasks;
      for (const from of v.inputs) consumers[from]!.push(i);
    });
    // Algorithm 1, line 3, as the resource manager does at registration: the name's last duration against the recent
    // history's thresholds.
    const type = jobTypeOf(this.lastDurationInWindow(job.shape.name), this.sim.recentDurationsMs, this.sim.o.jobTypes);
    const run: JobRun = {
      job,
      appId: `j${job.id}`,
      type,
      inputsLeft,
      tasksLeft,
      consumers,
      queue: [],
      queuedAtMs: [],
      head: 0,
      tasksRemaining: job.shape.totalTasks,
      attempts: new Set(),
      jobManager: undefined,
      decided: false,
      allowed: undefined,
      waitingSinceMs: now,
      waited: false,
    };
    this.sim.runs.set(run.appId, run);
    if (this.sim.o.observer?.onJobSubmitted)
      this.sim.o.observer.onJobSubmitted({ job, nowMs: now, ...this.freeTaskSlots() });
    this.sim.scheduler.addApp(run.appId, job.id);
    vertices.forEach((v, i) => {
      if (v.inputs.length === 0) this.enqueueVertex(run, i);
    });
    if (this.sim.cost.jobManagerMilli > 0) {
      // The resource manager asks for the job manager's container first; the tasks wait for it to register.
      this.updateAsk(run);
      this.sim.driver.place(run);
    } else this.registered(run);
  }

  /** Task containers free on the servers in service, counted as the resource manager's quotes count them. */
  private freeTaskSlots(): { freeTaskSlots: number; serversWithRoom: number } {
    const sim = this.sim;
    const servers: QuoteServer[] = [];
    for (let s = 0; s < sim.capMilli.length; s++) {
      if (!sim.servers.inService(s)) continue;
      servers.push({
        capacityMilli: sim.capMilli[s]!,
        primaryMilli: sim.seenMilli[s]!,
        reserveMilli: sim.reserveMilli[s]!,
        allocatedMilli: sim.secondaryMilli[s]!,
      });
    }
    const { slots, serversWithRoom } = freeTaskSlots(servers, sim.taskMilli);
    return { freeTaskSlots: slots, serversWithRoom };
  }

  /** The job manager registered (its DAG's max concurrency) and asks for its first tasks. */
  private registered(run: JobRun): void {
    this.sim.scheduler.setMaxConcurrency(run.appId, run.job.shape.maxConcurrency);
    if (this.sim.placement) {
      // Algorithm 1 runs on the first ask.
      const last = this.lastDurationInWindow(run.job.shape.name);
      this.sim.placement.register(run.appId, run.type, run.job.shape.maxConcurrency, last);
      const decision = this.sim.placement.onAsk(run.appId, this.sim.taskMilli);
      if (decision) this.sim.driver.onDecision(run, decision);
    } else {
      run.decided = true;
      this.sim.o.observer?.onJobPlaced?.({ job: run.job, jobType: run.type });
      this.updateAsk(run);
      this.sim.driver.place(run);
    }
  }

  private enqueueVertex(run: JobRun, v: number): void {
    const n = run.job.shape.vertices[v]!.tasks;
    const now = this.sim.engine.clock.nowMs();
    for (let t = 0; t < n; t++) {
      run.queue.push(v * TASK_STRIDE + t);
      run.queuedAtMs.push(now);
    }
  }

  queued(run: JobRun): number {
    return run.queue.length - run.head;
  }

  /** Whether the job is waiting for a job-manager container. */
  needsJobManager(run: JobRun): boolean {
    return this.sim.cost.jobManagerMilli > 0 && run.jobManager === undefined;
  }

  /**
   * The job's asks at the resource manager: its job manager's container while it has none, else (once placed) one
   * container per queued task (the job manager's allocate call).
   */
  updateAsk(run: JobRun): void {
    if (this.needsJobManager(run))
      this.sim.scheduler.setAsks(run.appId, [
        { priority: AM_PRIORITY, resource: this.sim.jobManagerResource, count: 1 },
      ]);
    else if (run.decided)
      this.sim.scheduler.setAsks(run.appId, [
        { priority: 0, resource: this.sim.taskResource, count: this.queued(run) },
      ]);
    else this.sim.scheduler.setAsks(run.appId, []);
  }

  /** Log-normal container launch time, plus (for a task) the job manager's wait for its next allocate call. */
  launchDelayMs(task: boolean): number {
    const c = this.sim.cost;
    let ms =
      c.launchMedianMs > 0 ? c.launchMedianMs * Math.exp(this.sim.launchSigma * this.sim.launchRng.normal(0, 1)) : 0;
    if (task && c.amHeartbeatMs > 0) ms += c.amHeartbeatMs * this.sim.launchRng.next();
    return ms;
  }

  /** The job manager's container launched: it registers and the job asks for its tasks. */
  jobManagerUp(a: Attempt): void {
    if (!a.alive) return;
    a.launched = true;
    this.registered(a.run);
  }

  /** A task's container launched: its work starts, at the speed its server's primary leaves it. */
  launch(a: Attempt): void {
    if (!a.alive) return;
    const s = a.server;
    a.launched = true;
    a.sinceMs = this.sim.engine.clock.nowMs();
    a.launchedMs = a.sinceMs;
    a.rate = this.sim.rate[s]!;
    this.sim.runningTaskMilli[s]! += a.milli;
    this.scheduleEnd(a);
    this.sim.servers.updateRate(s);
  }

  /**
   * A launched task's progress at `nowMs`, 0..1, as its harvest/task would report it: the share of its work done
   * (undefined for a job manager and a task still launching).
   */
  progressOf(a: Attempt, nowMs: number): number | undefined {
    if (a.isAm || !a.launched || !a.workMs) return undefined;
    const left = Math.max(0, a.workLeftMs - (nowMs - a.sinceMs) * a.rate);
    return Math.min(1, Math.max(0, 1 - left / a.workMs));
  }

  /** Schedules a launched task's end from its work left and speed (none while it is stopped). */
  scheduleEnd(a: Attempt): void {
    const version = ++a.version;
    if (a.rate <= 0) return;
    this.sim.at(a.sinceMs + a.workLeftMs / a.rate, () => {
      if (a.alive && a.version === version) this.finish(a);
    });
  }

  /** Releases a container (it ended or was killed). */
  private endAttempt(a: Attempt): void {
    const s = a.server;
    a.alive = false;
    // What it held, from its grant until now, counts in the secondary core-hours.
    const heldCoreMs = ((this.sim.engine.clock.nowMs() - a.startMs) * a.milli) / 1000;
    this.sim.endedHeldCoreMs += heldCoreMs;
    this.sim.features.containerEnded(a, heldCoreMs);
    this.sim.scheduler.release(a.containerId);
    this.sim.running[s]!.delete(a);
    a.run.attempts.delete(a);
    this.sim.servers.changeHeld(s, () => {
      this.sim.secondaryMilli[s]! -= a.milli;
    });
    this.sim.liveNodes[s]!.allocated.vcoresMilli -= a.milli;
    if (a.launched && !a.isAm) {
      this.sim.runningTaskMilli[s]! -= a.milli;
      this.sim.servers.updateRate(s);
    }
    this.sim.driver.refreshFree(s);
  }

  /** A task attempt ran to its end. */
  private finish(a: Attempt): void {
    this.endAttempt(a);
    this.sim.tasksCompleted++;
    this.sim.features.taskCompleted(a);
    const run = a.run;
    const v = Math.floor(a.task / TASK_STRIDE);
    this.sim.o.observer?.onTaskEnded?.({
      job: run.job,
      vertex: v,
      task: a.task % TASK_STRIDE,
      server: a.server,
      nowMs: this.sim.engine.clock.nowMs(),
    });
    run.tasksRemaining--;
    let grew = false;
    if (--run.tasksLeft[v]! === 0) {
      for (const c of run.consumers[v]!) {
        if (--run.inputsLeft[c]! === 0) {
          this.enqueueVertex(run, c);
          grew = true;
        }
      }
    }
    if (run.tasksRemaining === 0) this.jobDone(run);
    else if (grew) this.updateAsk(run);
    // The server has room again: its next heartbeat offers it (to the FIFO-first job that may use it).
    this.sim.servers.roomFreed(a.server);
    if (grew && run.tasksRemaining > 0) this.sim.driver.place(run);
  }

  private jobDone(run: JobRun): void {
    const now = this.sim.engine.clock.nowMs();
    const durationMs = now - run.job.submitMs;
    const am = run.jobManager;
    if (am) {
      // The job manager unregisters and exits: its container is released.
      this.endAttempt(am);
      run.jobManager = undefined;
      this.sim.servers.roomFreed(am.server);
    }
    this.sim.scheduler.removeApp(run.appId);
    this.sim.placement?.remove(run.appId);
    this.sim.runs.delete(run.appId);
    this.sim.jobsFinished++;
    const figures = this.sim.timeByType[run.type];
    figures.jobs++;
    figures.sumMs += durationMs;
    this.sim.lastRun.set(run.job.shape.name, { durationMs, seq: this.sim.jobsFinished });
    this.remember(durationMs);
    this.sim.gateRetries.delete(run.appId);
    this.sim.features.jobDone(run, durationMs, am);
    this.sim.o.observer?.onJobFinished?.({ job: run.job, jobType: run.type, durationMs });
  }

  /**
   * The duration of the last run of `name` if it is among the last `jobHistoryWindow` finished jobs, as the resource
   * manager finds it in its history query; undefined (a job never seen, so medium) when older or never run.
   */
  private lastDurationInWindow(name: string): number | undefined {
    const last = this.sim.lastRun.get(name);
    return last && last.seq > this.sim.jobsFinished - this.sim.o.jobHistoryWindow ? last.durationMs : undefined;
  }

  /**
   * Adds a finished job's duration to the last `jobHistoryWindow` (what the resource manager's history query returns),
   * kept both in arrival order (to evict the oldest) and sorted: `jobTypeOf` sorts its input, and sorting sorted input
   * is linear, where sorting the ring would cost O(n log n) per job.
   */
  private remember(durationMs: number): void {
    const sorted = this.sim.recentDurationsMs;
    if (this.sim.recentRing.length < this.sim.o.jobHistoryWindow) this.sim.recentRing.push(durationMs);
    else {
      const evicted = this.sim.recentRing[this.sim.recentNext]!;
      this.sim.recentRing[this.sim.recentNext] = durationMs;
      this.sim.recentNext = (this.sim.recentNext + 1) % this.sim.o.jobHistoryWindow;
      sorted.splice(lowerBound(sorted, evicted), 1);
    }
    sorted.splice(lowerBound(sorted, durationMs), 0, durationMs);
  }
}
