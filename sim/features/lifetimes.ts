/**
 * Lifetimes (seeds/002) as a feature of the compute simulation: the lifetime model and predictor the node choice and
 * drains ask, the keys it knows containers by, its books and the empty-server figures.
 */
import { DrainTracker } from "../../resourcemanager/index.js";
import type { ContainerKey } from "../../resourcemanager/index.js";
import type { ComputeState, LifetimeFigures, LifetimesPort } from "../engine/compute-state.js";
import { taskDurationMs } from "../jobs.js";
import type { JobRun } from "../roles/job-run.js";
import { TASK_STRIDE } from "../roles/job-run.js";

/** See the file header. */
export class LifetimesFeature implements LifetimesPort {
  constructor(private readonly sim: ComputeState) {}

  /** Per-server state of reclaims, reimages and the empty-server figures; the node choice hears of every container. */
  startLifetimes(): void {
    const n = this.sim.nodeIds.length;
    this.sim.down = new Uint8Array(n);
    this.sim.downUntilMs = new Float64Array(n);
    this.sim.draining = new Uint8Array(n);
    this.sim.drainForMs = new Float64Array(n);
    this.sim.emptyFlag = new Uint8Array(n).fill(1);
    this.sim.emptyCount = n;
    this.sim.roomFlag = new Uint8Array(n);
    for (let s = 0; s < n; s++) {
      if (this.sim.capMilli[s]! - this.sim.reserveMilli[s]! < this.sim.taskMilli) continue;
      this.sim.roomFlag[s] = 1;
      this.sim.roomCount++;
      this.sim.emptyRoomCount++;
    }
    this.sim.occupancySinceMs = this.sim.cluster.historyMs;
    const reimages = this.sim.o.reimages;
    if (reimages && reimages.drain !== "none") this.sim.drains = new DrainTracker(reimages.drainOptions);
    const choice = this.sim.nodeChoice;
    if (choice)
      this.sim.scheduler.setListener({
        granted: (alloc) =>
          choice.onGranted({
            containerId: alloc.containerId,
            nodeId: alloc.nodeId,
            key: this.sim.driver.keyOfGrant(alloc),
            startMs: this.sim.engine.clock.nowMs(),
            resource: alloc.resource,
          }),
        released: (alloc) => choice.onReleased(alloc.containerId),
      });
  }

  /** What the predictor is told of task `task` (vertex x TASK_STRIDE + index) of `run`. */
  taskKey(run: JobRun, task: number): ContainerKey {
    const v = Math.floor(task / TASK_STRIDE);
    const key: ContainerKey = { job: run.job.shape.name, vertex: run.job.shape.vertices[v]!.name, isJobManager: false };
    // The oracle's truth: the task's duration at full speed (its launch and any slowdown by the primary are not in it).
    if (this.sim.o.lifetimes === "oracle")
      key.trueLifetimeMs = taskDurationMs(this.sim.stream, run.job, v, task % TASK_STRIDE);
    return key;
  }

  /**
   * What the predictor is told of `run`'s job manager. The oracle knows no truth for it (a job's remaining time
   * depends on the run under way), so it asks the model: the job's past durations.
   */
  jobManagerKey(run: JobRun): ContainerKey {
    return { job: run.job.shape.name, vertex: "", isJobManager: true };
  }

  /**
   * `checkInvariants`' part: the node choice's registry holds exactly the containers each server runs, no server away
   * or draining holds a container it was granted since, nothing is in flight between heartbeats, and the empty-server
   * counts match the servers.
   */
  checkLifetimeBooks(fail: (why: string) => never): void {
    let empty = 0;
    let room = 0;
    let emptyRoom = 0;
    for (let s = 0; s < this.sim.nodeIds.length; s++) {
      const id = this.sim.nodeIds[s]!;
      const held = this.sim.running[s]!.size;
      const known = this.sim.nodeChoice?.containersOn(id).length ?? held;
      if (known !== held) fail(`server ${id}: the node choice knows ${known} containers, it runs ${held}`);
      if (this.sim.down[s] === 1 && held > 0) fail(`server ${id} is away but runs ${held} containers`);
      const e = held === 0 ? 1 : 0;
      const r = this.sim.servers.hasRoom(s) ? 1 : 0;
      if (this.sim.emptyFlag[s] !== e || this.sim.roomFlag[s] !== r)
        fail(`server ${id}: the empty-server flags are stale`);
      empty += e;
      room += r;
      emptyRoom += e * r;
    }
    if (empty !== this.sim.emptyCount || room !== this.sim.roomCount || emptyRoom !== this.sim.emptyRoomCount)
      fail("the empty-server counts differ from the servers'");
    if (this.sim.keysInFlight.size > 0) fail("task grants are in flight between heartbeats");
  }

  /** The figures of node choice, reclaims and reimages (as of the horizon, once `run` has returned). */
  lifetimeFigures(): LifetimeFigures {
    const { cluster } = this.sim;
    const spanMs = (cluster.horizonMs - cluster.historyMs) * cluster.servers.length;
    const t = this.sim.reimageTally;
    const hours = (coreMs: number): number => coreMs / 3_600_000;
    return {
      nodeChoice: this.sim.o.nodeChoice,
      lifetimes: this.sim.o.lifetimes,
      emptyServerShare: spanMs > 0 ? this.sim.emptyMs / spanMs : 0,
      emptyShareWithRoom: this.sim.roomMs > 0 ? this.sim.emptyRoomMs / this.sim.roomMs : 0,
      reclaims: this.sim.reclaimCount,
      reclaimsHittingEmpty: this.sim.reclaimCount > 0 ? this.sim.reclaimsOnEmpty / this.sim.reclaimCount : 0,
      reclaimKilledCoreHours: hours(this.sim.reclaimKilledCoreMs),
      ...(this.sim.o.reimages
        ? {
            reimages: {
              drain: this.sim.o.reimages.drain,
              reimages: t.reimages,
              containersAtNotice: t.containersAtNotice,
              preempted: t.preempted,
              preemptedCoreHours: hours(t.preemptedCoreMs),
              killedAtReimage: t.killedAtReimage,
              killedAtReimageCoreHours: hours(t.killedAtReimageCoreMs),
              finishedOnTheirOwn: t.finishedOnTheirOwn,
            },
          }
        : {}),
    };
  }
}
