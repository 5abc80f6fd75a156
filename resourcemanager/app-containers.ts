/**
 * The containers an application holds, as the resource manager keeps them for reports and for its job manager: the
 * grant with its signed token, the container references (each through CONTAINER_MACHINE), how each ended (counts,
 * held cores, task run times for the lifetime model), and the claims a registering job manager makes.
 */
import { signContainer } from "../common/container-token.js";
import { TASK_STATUS_LIMITS } from "../common/task-contract.js";
import { parseDag, topologicalOrder } from "../common/dag-spec.js";
import type { AppRuntime, ApplicationDeps } from "./app-runtime.js";
import { CONTAINER_MACHINE } from "./container-state.js";
import type { RmContainerEvent, RmContainerState } from "./container-state.js";
import { AM_PRIORITY } from "./policy/scheduler.js";
import type { Allocation } from "./policy/scheduler.js";
import { MAX_DURATIONS_PER_VERTEX } from "./state-store.js";
import type { ContainerOutput } from "../proto/generated/harvest/v1/Container.js";
import type { ContainerRef } from "../proto/generated/harvest/v1/ContainerRef.js";
import type { ContainerStatus } from "../proto/generated/harvest/v1/ContainerStatus.js";
import type { ExitCauseOutput } from "../proto/generated/harvest/v1/ExitCause.js";

/** Kept per application for `harvest job logs` and status. */
const MAX_CONTAINER_REFS = 5_000;

/** The grant as the job manager and the node manager see it, with its signed token (of HA term `epoch`, 0: not HA). */
export function containerOf(
  secret: string,
  app: AppRuntime,
  alloc: Allocation,
  node: { nodeId: string; nmAddress: string; rack: string },
  epoch: number,
): ContainerOutput {
  return {
    id: alloc.containerId,
    nodeId: node.nodeId,
    nmAddress: node.nmAddress,
    rack: node.rack,
    resource: alloc.resource,
    priority: alloc.priority,
    jobPriority: app.record.priority ?? 0,
    user: app.record.user,
    epoch,
    token: signContainer(secret, {
      containerId: alloc.containerId,
      appId: alloc.appId,
      nodeId: node.nodeId,
      resource: alloc.resource,
      jobPriority: app.record.priority ?? 0,
      user: app.record.user,
      epoch,
    }),
  };
}

/** The status of a held container that the resource manager ends itself (lost, expired, released or preempted). */
export function endedStatus(
  alloc: Allocation,
  cause: ExitCauseOutput,
  diagnostics: string,
  finishedMs?: number,
): ContainerStatus {
  return {
    containerId: alloc.containerId,
    appId: alloc.appId,
    nodeId: alloc.nodeId,
    state: "COMPLETE",
    cause,
    exitCode: -1,
    diagnostics,
    resource: alloc.resource,
    ...(finishedMs !== undefined ? { finishedMs } : {}),
  };
}

/** Moves a container reference through its one transition function (CONTAINER_MACHINE). */
export function moveContainer(ref: ContainerRef, event: RmContainerEvent): void {
  ref.state = CONTAINER_MACHINE.next(ref.state as RmContainerState, event, ref.containerId);
}

/**
 * Keeps what a node reports of a task on its reference: its vertex and index, and its latest progress and counters (a
 * status without a report means no news). A report that is not sane (the node manager checked the task's file) is
 * dropped.
 */
export function noteTaskStatus(ref: ContainerRef | undefined, st: ContainerStatus): void {
  if (!ref || ref.isAm) return;
  if (st.vertex) {
    ref.vertex = st.vertex;
    ref.taskIndex = st.taskIndex ?? 0;
  }
  const r = st.taskReport;
  const progress = Number(r?.progress ?? 0);
  if (
    r &&
    Number.isFinite(progress) &&
    progress >= 0 &&
    progress <= 1 &&
    Object.keys(r.counters ?? {}).length <= TASK_STATUS_LIMITS.maxCounters
  )
    ref.taskReport = r;
}

/** Keeps a container's reference for reports (the oldest beyond MAX_CONTAINER_REFS is forgotten). */
export function trackRef(app: AppRuntime, ref: ContainerRef): void {
  if (app.containers.size >= MAX_CONTAINER_REFS) {
    const oldest = app.containers.keys().next().value;
    if (oldest !== undefined) app.containers.delete(oldest);
  }
  app.containers.set(ref.containerId ?? "", ref);
}

/** Marks a container's reference complete and counts how it ended (once per container). */
export function recordEnd(
  deps: ApplicationDeps,
  app: AppRuntime | undefined,
  st: ContainerStatus,
  priority?: number,
  milli = 0,
): void {
  const ref = app?.containers.get(st.containerId ?? "");
  if (!app || !ref || ref.state === "COMPLETE") return;
  // After a user's kill every container ends because of it, including a job manager that exits on its own.
  const cause: ExitCauseOutput =
    app.record.state === "KILLED" ? "KILLED_BY_USER" : ((st.cause ?? "EXIT_CAUSE_UNSPECIFIED") as ExitCauseOutput);
  moveContainer(ref, "ended");
  ref.cause = cause;
  ref.exitCode = st.exitCode ?? 0;
  if (st.startedMs) ref.startedMs = st.startedMs;
  ref.finishedMs = st.finishedMs ?? deps.clock.nowMs();
  const counts = ref.isAm ? app.amCounts : app.taskCounts;
  const ranMs = Number(ref.finishedMs) - Number(ref.startedMs ?? 0);
  if (Number(ref.startedMs ?? 0) > 0 && ranMs > 0) app.heldCoreMs += (ranMs * milli) / 1000;
  if (cause === "SUCCEEDED" && !ref.isAm && priority !== undefined && Number(ref.startedMs ?? 0) > 0 && ranMs >= 0)
    recordTaskDuration(deps, app, priority, ranMs);
  if (cause === "SUCCEEDED") counts.succeeded++;
  else if (cause === "FAILED" || cause === "EXCEEDED_MEMORY") counts.failed++;
  else if (cause === "PREEMPTED_BY_PRIMARY" || cause === "PREEMPTED_BY_POWER" || cause === "PREEMPTED_BY_DRAIN")
    counts.preempted++;
  else if (cause === "LOST") counts.lost++;
  else counts.killed++;
  // Learning from kills: the history placement keeps long jobs off a server whose primary just took work back.
  if (cause === "PREEMPTED_BY_PRIMARY" && ref.nodeId) deps.history?.noteKill(ref.nodeId, app.record.appId);
  deps.observer?.containerEnded(ref.isAm === true, cause, ref.nodeId || undefined);
}

/** A task that succeeded: its run time joins the lifetime model now and its job's history record at the end. */
function recordTaskDuration(deps: ApplicationDeps, app: AppRuntime, priority: number, durationMs: number): void {
  const vertex = vertexOf(app, priority, deps.options.maxParallelism);
  if (vertex === undefined) return;
  deps.lifetimes.observeTask(app.record.name, vertex, durationMs);
  const list = app.taskDurations.get(vertex) ?? [];
  if (list.length < MAX_DURATIONS_PER_VERTEX) list.push(durationMs);
  app.taskDurations.set(vertex, list);
}

/** The vertex a container of `app` at `priority` runs (undefined: the job manager, or unknown). */
export function vertexOf(app: AppRuntime, priority: number, maxParallelism: number): string | undefined {
  if (priority === AM_PRIORITY) return undefined;
  if (!app.vertices) {
    try {
      app.vertices = topologicalOrder(parseDag(app.record.dagJson, { maxParallelism }));
    } catch {
      app.vertices = [];
    }
  }
  return app.vertices[priority];
}

/**
 * Answers every container the job manager claims to run that this resource manager no longer holds: with how it
 * ended when that is known, as LOST otherwise (no node reported it), but never while a node that has not
 * re-registered since a restart could still report it (`mayStillReport`, until `claimsSettleMs`): a task answered LOST
 * is run again, and the first run may be finishing on that node. Duplicates are harmless to a job manager (an end it
 * already saw is ignored); a task waiting for ever on a container that is gone is not.
 */
export function settleClaims(deps: ApplicationDeps, app: AppRuntime, mayStillReport: boolean): void {
  const claims = app.claims;
  if (!claims) return;
  const queued = new Set(app.completed.map((c) => c.containerId));
  let settled = 0;
  for (const id of claims) {
    if (deps.scheduler.allocation(id) || queued.has(id)) {
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
      finishedMs: Number(ref?.finishedMs ?? 0) || deps.clock.nowMs(),
      startedMs: ref?.startedMs ?? 0,
    });
    settled++;
  }
  if (claims.size === 0) app.claims = undefined;
  if (settled > 0)
    deps.log.info("containers a job manager claimed are gone; told it", { appId: app.record.appId, settled });
}
