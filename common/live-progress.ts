/**
 * A running job's per-vertex progress as `harvest job status` and the job page show it (Tez's vertex progress): the
 * job manager's counts (its tasks succeeded, its succeeded tasks' counters) joined with what its running tasks last
 * reported through their node managers (each container's task report in the application report). A succeeded task
 * counts 1, a running one the fraction it reported, over the vertex's tasks; counters add the running tasks' so far to
 * the succeeded ones'. A task's report leaves the sum when its container ends and its final counters join the job
 * manager's a heartbeat later, so a counter may dip for a moment then.
 */
import type { ApplicationReportOutput } from "../proto/generated/harvest/v1/ApplicationReport.js";
import type { VertexProgressOutput } from "../proto/generated/harvest/v1/VertexProgress.js";

/** One vertex's live progress: its name, tasks and succeeded tasks as its job manager reported them, and: */
export interface LiveVertexProgress extends Pick<VertexProgressOutput, "name" | "total" | "succeeded"> {
  /** (succeeded + the running tasks' reported fractions) / total, 0..1. */
  progress: number;
  /** Running tasks that reported a progress or counters. */
  reporting: number;
  /** The succeeded tasks' counters plus the running tasks' so far, by name. */
  counters: Record<string, number>;
  /** The running tasks' part of `counters`. */
  runningCounters: Record<string, number>;
}

/** Per vertex of the report's progress, in its order: the live progress and counters. */
export function liveVertexProgress(
  report: Pick<ApplicationReportOutput, "progress" | "containers">,
): LiveVertexProgress[] {
  // Per vertex, per task index: the running container's report (the furthest, should a task run twice for a moment).
  const running = new Map<string, Map<number, { progress: number; counters: Record<string, number> }>>();
  for (const c of report.containers ?? []) {
    const r = c.taskReport;
    if (c.isAm || c.state !== "RUNNING" || !c.vertex || !r) continue;
    let tasks = running.get(c.vertex);
    if (!tasks) running.set(c.vertex, (tasks = new Map()));
    const seen = tasks.get(c.taskIndex);
    if (!seen || r.progress > seen.progress) tasks.set(c.taskIndex, { progress: r.progress, counters: r.counters });
  }
  return (report.progress?.vertices ?? []).map((v) => {
    const tasks = [...(running.get(v.name)?.values() ?? [])];
    const runningCounters: Record<string, number> = {};
    for (const t of tasks) addInto(runningCounters, t.counters);
    const counters: Record<string, number> = { ...v.counters };
    addInto(counters, runningCounters);
    const done = v.succeeded + tasks.reduce((sum, t) => sum + clamp01(t.progress), 0);
    return {
      name: v.name,
      counters,
      runningCounters,
      progress: v.total > 0 ? clamp01(done / v.total) : 0,
      reporting: tasks.length,
      total: v.total,
      succeeded: v.succeeded,
    };
  });
}

function addInto(sums: Record<string, number>, add: Record<string, number>): void {
  for (const [name, n] of Object.entries(add)) sums[name] = (sums[name] ?? 0) + Number(n);
}

function clamp01(v: number): number {
  return Number.isFinite(v) ? Math.min(1, Math.max(0, v)) : 0;
}
