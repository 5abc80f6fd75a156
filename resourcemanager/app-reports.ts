/**
 * What the resource manager tells about an application: its report (`harvest job status`, the web UI) and, once it
 * ends, the history record that later runs of the same job learn from.
 */
import { parseDag } from "../common/dag-spec.js";
import type { DagSpec } from "../common/dag-spec.js";
import type { AppRuntime } from "./app-runtime.js";
import type { ResourceManagerOptions } from "./options.js";
import { jobTypeOf } from "./policy/class-selection.js";
import type { JobType } from "./policy/class-selection.js";
import type { HistoryPlacement } from "./policy/history-placement.js";
import type { AppRecord, HistoryRecord, RmStore } from "./state-store.js";
import type { ApplicationReport } from "../proto/generated/harvest/v1/ApplicationReport.js";

/** An application's report, with its containers or without them (a listing). */
export function reportOf(
  app: AppRuntime,
  history: HistoryPlacement | undefined,
  withContainers: boolean,
): ApplicationReport {
  const r = app.record;
  // Algorithm 1's decision: the live one while the job runs, the one kept at its end afterwards.
  const p = history?.placement(r.appId) ?? app.placement;
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
    jobType: p?.jobType ?? "",
    classes: p?.classIds ?? [],
    placementNote: p?.note ?? "",
    quote: r.quote ?? null,
  };
}

/**
 * The history record of a job that ends now with `outcome`. A job that succeeded also gets its mean demand: the
 * core-ms its containers held, plus its job manager's (still running now, it held its cores for the whole run), over
 * the time since its admission.
 */
export function historyRecordOf(
  app: AppRuntime,
  outcome: AppRecord["outcome"],
  now: number,
  amVcoresMilli: number,
): HistoryRecord {
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
  let located = 0;
  let nodeLocal = 0;
  for (const v of app.progress?.vertices ?? []) {
    located += (v.nodeLocal ?? 0) + (v.rackLocal ?? 0) + (v.offSwitch ?? 0);
    nodeLocal += v.nodeLocal ?? 0;
  }
  if (located > 0) Object.assign(history, { locatedStarts: located, nodeLocalStarts: nodeLocal });
  const ranMs = now - (app.record.admittedMs || app.record.submitMs);
  if (outcome === "JOB_SUCCEEDED" && ranMs > 0) {
    const amHeld = ((app.record.startMs ? now - app.record.startMs : 0) * amVcoresMilli) / 1000;
    history.meanDemandMilli = Math.round((1000 * (app.heldCoreMs + amHeld)) / ranMs);
  }
  return history;
}

/** Algorithm 1, line 3: a job's type from the duration of its last successful run against the history's thresholds. */
export async function jobTypeFromHistory(
  store: RmStore,
  options: Pick<ResourceManagerOptions, "jobHistoryWindow" | "jobTypes">,
  name: string,
): Promise<{ jobType: JobType; lastDurationMs: number | undefined }> {
  const past = (await store.history("", options.jobHistoryWindow)).filter((h) => h.outcome === "JOB_SUCCEEDED");
  const last = past.find((h) => h.name === name);
  const jobType = jobTypeOf(
    last?.durationMs,
    past.map((h) => h.durationMs),
    options.jobTypes,
  );
  return { jobType, lastDurationMs: last?.durationMs };
}

/** A job's DAG, parsed from its stored file (undefined for an unknown job or an unreadable file). */
export function dagOfRecord(
  record: Pick<AppRecord, "dagJson"> | undefined,
  maxParallelism: number,
): DagSpec | undefined {
  if (!record) return undefined;
  try {
    return parseDag(record.dagJson, { maxParallelism });
  } catch {
    return undefined;
  }
}
