/**
 * The job manager's state machine over a DAG (Tez-like): which tasks need containers, which container runs which task,
 * and what an ended attempt means. Pure: the job manager process feeds it containers and completions.
 *
 * A vertex becomes runnable when every upstream vertex has succeeded. An attempt killed by a primary tenant, lost with
 * its node, or released by the resource manager is re-run and does not count as a failure (seeds/004, section 4.1:
 * preemption is the cost of harvesting, not the task's fault); a real failure is retried up to `maxTaskAttempts`.
 */
import { topologicalOrder, upstreamOf, vertexByName } from "../common/dag-spec.js";
import type { DagSpec, VertexSpec } from "../common/dag-spec.js";
import { TASK_MACHINE } from "./task-state.js";
import type { TaskEvent, TaskState } from "./task-state.js";
import type { ExitCauseOutput } from "../proto/generated/harvest/v1/ExitCause.js";
import type { InputSplit } from "../common/task-contract.js";

/** How local a task's container is to its input split: on a server holding a replica, in one of its racks, elsewhere. */
export type TaskLocality = "node" | "rack" | "any";

/** Where a vertex's pending tasks would rather run (the wire's ResourceRequest locality fields). */
export interface AskLocality {
  nodes: Record<string, number>;
  racks: Record<string, number>;
  located: number;
}

/** How a container ended: the wire's ExitCause names (common.proto), or its launch failed. */
export type AttemptEnd = Exclude<ExitCauseOutput, "EXIT_CAUSE_UNSPECIFIED"> | "LAUNCH_FAILED" | "INPUT_LOST";

/** One task of a vertex. */
export interface TaskRecord {
  vertex: string;
  index: number;
  /** Changed only by `move` (TASK_MACHINE). Invariant: containerId !== undefined iff state is LAUNCHING or RUNNING. */
  state: TaskState;
  /** Attempts started so far. */
  attempts: number;
  failures: number;
  preemptions: number;
  losses: number;
  containerId: string | undefined;
  /** Where the attempt that succeeded left its outputs (common/task-contract.ts, formatOutputLocation). */
  outputDir: string | undefined;
  lastDiagnostics: string;
  /** The part of the vertex's DFS input it reads (a vertex with an input). */
  split?: InputSplit;
  /** How local its last attempt's container was to its split. */
  locality?: TaskLocality;
}

/** Per-vertex counts for progress reports. */
export interface VertexCounts {
  name: string;
  total: number;
  succeeded: number;
  running: number;
  preempted: number;
  failedAttempts: number;
  lost: number;
  state: "WAITING" | "RUNNING" | "SUCCEEDED" | "FAILED";
  /** Attempts of tasks with an input split started on a server holding a replica, in one of its racks, elsewhere. */
  nodeLocal: number;
  rackLocal: number;
  offSwitch: number;
}

/** Result of feeding an attempt's end to the runner. */
export type EndVerdict =
  | { kind: "retry"; counted: boolean }
  | { kind: "succeeded" }
  | { kind: "job-failed"; diagnostics: string }
  | { kind: "job-killed" }
  | { kind: "unknown" };

/** Runner settings. */
export interface DagRunnerOptions {
  /** Real failures of one task before the job fails. @default 4 */
  maxTaskAttempts: number;
  /** Launch failures (node unreachable) of one task before the job fails. @default 10 */
  maxLaunchFailures: number;
}

/** The DAG's task-level state. */
export class DagRunner {
  private readonly tasks = new Map<string, TaskRecord[]>();
  private readonly byContainer = new Map<string, TaskRecord>();
  private readonly priority = new Map<string, number>();
  private readonly launchFailures = new Map<TaskRecord, number>();
  private readonly order: string[];
  private failedDiagnostics: string | undefined;
  /** Per vertex, its split tasks' attempts by locality. */
  private readonly localityCounts = new Map<string, Record<TaskLocality, number>>();

  /**
   * `splits`: per vertex with a DFS input, its splits, one per task (the DAG's parallelism of that vertex must be their
   * count: common/dag-input.ts `withSplitParallelism`).
   */
  constructor(
    readonly dag: DagSpec,
    private readonly options: DagRunnerOptions = { maxTaskAttempts: 4, maxLaunchFailures: 10 },
    splits: ReadonlyMap<string, readonly InputSplit[]> = new Map(),
  ) {
    this.order = topologicalOrder(dag);
    this.order.forEach((name, i) => this.priority.set(name, i));
    for (const v of dag.vertices) {
      this.tasks.set(
        v.name,
        Array.from({ length: v.parallelism }, (_, index) => ({
          vertex: v.name,
          index,
          state: "PENDING" as TaskState,
          attempts: 0,
          failures: 0,
          preemptions: 0,
          losses: 0,
          containerId: undefined,
          outputDir: undefined,
          lastDiagnostics: "",
          ...(splits.get(v.name)?.[index] ? { split: splits.get(v.name)?.[index] } : {}),
        })),
      );
    }
  }

  /** The container priority of a vertex (its topological position: upstream work first). */
  priorityOf(vertex: string): number {
    return this.priority.get(vertex) ?? 0;
  }

  /** The vertex asking at `priority`. */
  vertexAt(priority: number): VertexSpec | undefined {
    const name = this.order[priority];
    return name === undefined ? undefined : vertexByName(this.dag, name);
  }

  /** True when every upstream vertex of `vertex` has succeeded. */
  isRunnable(vertex: string): boolean {
    return upstreamOf(this.dag, vertex).every((e) => this.vertexSucceeded(e.from));
  }

  vertexSucceeded(vertex: string): boolean {
    return (this.tasks.get(vertex) ?? []).every((t) => t.state === "SUCCEEDED");
  }

  /**
   * Asks for containers: one per pending task of each runnable vertex, with where the tasks that read an input split
   * would rather run (the servers holding a replica of it, and their racks).
   */
  asks(): { priority: number; vertex: VertexSpec; count: number; locality?: AskLocality }[] {
    const out: { priority: number; vertex: VertexSpec; count: number; locality?: AskLocality }[] = [];
    if (this.failedDiagnostics) return out;
    for (const name of this.order) {
      if (!this.isRunnable(name)) continue;
      const pending = (this.tasks.get(name) ?? []).filter((t) => t.state === "PENDING");
      if (pending.length === 0) continue;
      const ask = { priority: this.priorityOf(name), vertex: vertexByName(this.dag, name), count: pending.length };
      const locality: AskLocality = { nodes: {}, racks: {}, located: 0 };
      for (const t of pending) {
        if (!t.split || t.split.hosts.length === 0) continue;
        locality.located += 1;
        for (const h of new Set(t.split.hosts)) locality.nodes[h] = (locality.nodes[h] ?? 0) + 1;
        for (const r of new Set(t.split.racks)) locality.racks[r] = (locality.racks[r] ?? 0) + 1;
      }
      out.push(locality.located > 0 ? { ...ask, locality } : ask);
    }
    return out;
  }

  /**
   * Assigns a granted container on `nodeId` (in `rack`, when known) to a pending task of the vertex at its priority:
   * one whose split has a replica there, else one whose split's racks include it, else one without a split, else the
   * first pending. Undefined means release it.
   */
  assign(containerId: string, priority: number, nodeId = "", rack?: string): TaskRecord | undefined {
    if (this.failedDiagnostics) return undefined;
    const vertex = this.vertexAt(priority);
    if (!vertex || !this.isRunnable(vertex.name)) return undefined;
    const pending = (this.tasks.get(vertex.name) ?? []).filter((t) => t.state === "PENDING");
    const task =
      pending.find((t) => t.split && localityOf(t.split, nodeId, rack) === "node") ??
      pending.find((t) => t.split && localityOf(t.split, nodeId, rack) === "rack") ??
      pending.find((t) => !t.split || t.split.hosts.length === 0) ??
      pending[0];
    if (!task) return undefined;
    if (task.split && task.split.hosts.length > 0) {
      task.locality = localityOf(task.split, nodeId, rack);
      this.countLocality(task.vertex, task.locality);
    }
    move(task, "assign");
    task.attempts += 1;
    task.containerId = containerId;
    this.byContainer.set(containerId, task);
    return task;
  }

  /** Counts a start of one of `vertex`'s split tasks at `level` (also an earlier job-manager attempt's, replayed). */
  countLocality(vertex: string, level: TaskLocality): void {
    let counts = this.localityCounts.get(vertex);
    if (!counts) this.localityCounts.set(vertex, (counts = { node: 0, rack: 0, any: 0 }));
    counts[level] += 1;
  }

  /** The container's process started on its node. */
  launched(containerId: string): void {
    const task = this.byContainer.get(containerId);
    if (task && task.state === "LAUNCHING") move(task, "launched");
  }

  /** Records how an attempt ended and decides what follows. */
  ended(containerId: string, end: AttemptEnd, diagnostics: string, outputDir?: string): EndVerdict {
    const task = this.byContainer.get(containerId);
    if (!task) return { kind: "unknown" };
    this.byContainer.delete(containerId);
    task.containerId = undefined;
    return this.apply(task, end, diagnostics, outputDir);
  }

  /**
   * Replays an attempt end from a previous job-manager attempt's journal (Tez-style recovery): a task that succeeded
   * keeps its output and is not re-run; counts carry over.
   */
  replay(vertex: string, index: number, end: AttemptEnd, diagnostics: string, outputDir?: string): EndVerdict {
    const task = this.task(vertex, index);
    if (!task || task.state === "SUCCEEDED") return { kind: "unknown" };
    task.attempts += 1;
    return this.apply(task, end, diagnostics, outputDir, true);
  }

  /**
   * Takes over a task a previous job-manager attempt launched on `containerId`, still running (keep-containers-across-
   * attempts): it counts as started, and its end arrives like any other. False when the task is not waiting for work.
   */
  adopt(containerId: string, vertex: string, index: number): boolean {
    const task = this.task(vertex, index);
    if (!task || task.state !== "PENDING" || this.byContainer.has(containerId)) return false;
    move(task, "adopt");
    task.attempts += 1;
    task.containerId = containerId;
    this.byContainer.set(containerId, task);
    return true;
  }

  /** Applies an attempt's end (`replayed`: from an earlier job manager's journal, to a task not started here). */
  private apply(
    task: TaskRecord,
    end: AttemptEnd,
    diagnostics: string,
    outputDir: string | undefined,
    replayed = false,
  ): EndVerdict {
    task.lastDiagnostics = diagnostics;
    const retry = (): void => move(task, replayed ? "replayed-retry" : "retry");
    switch (end) {
      case "SUCCEEDED":
        move(task, replayed ? "replayed-success" : "succeeded");
        task.outputDir = outputDir;
        return { kind: "succeeded" };
      case "PREEMPTED_BY_PRIMARY":
      case "PREEMPTED_BY_POWER":
      case "PREEMPTED_BY_DRAIN":
        task.preemptions += 1;
        retry();
        return { kind: "retry", counted: false };
      case "LOST":
        task.losses += 1;
        retry();
        return { kind: "retry", counted: false };
      // It could not fetch an input whose node lost it: the producer runs again, and this task after it.
      case "INPUT_LOST":
        retry();
        return { kind: "retry", counted: false };
      case "RELEASED":
        retry();
        return { kind: "retry", counted: false };
      case "LAUNCH_FAILED": {
        const n = (this.launchFailures.get(task) ?? 0) + 1;
        this.launchFailures.set(task, n);
        retry();
        if (n >= this.options.maxLaunchFailures)
          return this.fail(`task ${task.vertex}[${task.index}] could not be launched ${n} times; last: ${diagnostics}`);
        return { kind: "retry", counted: false };
      }
      case "KILLED_BY_USER":
        retry();
        return { kind: "job-killed" };
      // Using more memory than granted is the task's own fault, as in YARN: it counts.
      case "EXCEEDED_MEMORY":
      case "FAILED":
        task.failures += 1;
        retry();
        if (task.failures >= this.options.maxTaskAttempts) {
          return this.fail(`task ${task.vertex}[${task.index}] failed ${task.failures} times; last: ${diagnostics}`);
        }
        return { kind: "retry", counted: true };
    }
  }

  private fail(diagnostics: string): EndVerdict {
    this.failedDiagnostics ??= diagnostics;
    return { kind: "job-failed", diagnostics: this.failedDiagnostics };
  }

  /** Every task succeeded. */
  get succeeded(): boolean {
    return this.order.every((v) => this.vertexSucceeded(v));
  }

  /** Why the job failed, once it has. */
  get failure(): string | undefined {
    return this.failedDiagnostics;
  }

  /** The task a container holds. */
  taskOf(containerId: string): TaskRecord | undefined {
    return this.byContainer.get(containerId);
  }

  /** Containers currently holding a task. */
  activeContainers(): string[] {
    return [...this.byContainer.keys()];
  }

  /** A task by vertex and index. */
  task(vertex: string, index: number): TaskRecord | undefined {
    return this.tasks.get(vertex)?.[index];
  }

  /** Where a task's successful attempt left its outputs. */
  outputDirOf(vertex: string, index: number): string {
    return this.task(vertex, index)?.outputDir ?? "";
  }

  /**
   * A succeeded task's outputs are gone (its node was lost or reimaged before every consumer read them): it runs again,
   * not counted as a failure (a loss), and its consumers wait for it. False when it had not succeeded.
   */
  outputLost(vertex: string, index: number): boolean {
    const task = this.task(vertex, index);
    if (!task || task.state !== "SUCCEEDED") return false;
    move(task, "output-lost");
    task.outputDir = undefined;
    task.losses += 1;
    return true;
  }

  /** Counts per vertex, in topological order. */
  progress(): VertexCounts[] {
    return this.order.map((name) => {
      const tasks = this.tasks.get(name) ?? [];
      const succeeded = tasks.filter((t) => t.state === "SUCCEEDED").length;
      const running = tasks.filter((t) => t.state === "RUNNING" || t.state === "LAUNCHING").length;
      const failedAttempts = tasks.reduce((a, t) => a + t.failures, 0);
      const exhausted = tasks.some((t) => t.failures >= this.options.maxTaskAttempts);
      const locality = this.localityCounts.get(name);
      return {
        name,
        nodeLocal: locality?.node ?? 0,
        rackLocal: locality?.rack ?? 0,
        offSwitch: locality?.any ?? 0,
        total: tasks.length,
        succeeded,
        running,
        preempted: tasks.reduce((a, t) => a + t.preemptions, 0),
        failedAttempts,
        lost: tasks.reduce((a, t) => a + t.losses, 0),
        state: exhausted
          ? "FAILED"
          : succeeded === tasks.length
            ? "SUCCEEDED"
            : running > 0 || (this.isRunnable(name) && succeeded > 0)
              ? "RUNNING"
              : "WAITING",
      };
    });
  }

  /** Job-wide totals. */
  totals(): { tasksRun: number; tasksPreempted: number; tasksLost: number; taskFailures: number } {
    let tasksRun = 0;
    let tasksPreempted = 0;
    let tasksLost = 0;
    let taskFailures = 0;
    for (const tasks of this.tasks.values()) {
      for (const t of tasks) {
        tasksRun += t.attempts;
        tasksPreempted += t.preemptions;
        tasksLost += t.losses;
        taskFailures += t.failures;
      }
    }
    return { tasksRun, tasksPreempted, tasksLost, taskFailures };
  }
}

/** How local a container on `nodeId` (in `rack`) is to `split`. */
function localityOf(split: InputSplit, nodeId: string, rack: string | undefined): TaskLocality {
  if (split.hosts.includes(nodeId)) return "node";
  if (rack !== undefined && split.racks.includes(rack)) return "rack";
  return "any";
}

/** Moves a task through its one transition function (a refused move is a bug: STATE_INVALID_TRANSITION). */
function move(task: TaskRecord, event: TaskEvent): void {
  task.state = TASK_MACHINE.next(task.state, event, `${task.vertex}[${task.index}]`);
}
