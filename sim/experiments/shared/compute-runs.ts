/**
 * The skeleton the compute experiments share (options -> runs -> report): the run size (cluster, days, load, seed,
 * level, traces) of the lifetime and drain experiments with its cluster and job stream, the job figures of the
 * experiments' runs tables and CSVs, and writing a report with its JSON beside it. The options every experiment ends
 * with are in output.ts.
 */
import { mkdirSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { generateCluster } from "../../cluster-gen.js";
import type { ComputeRunResult } from "../../compute.js";
import { chooseTraces } from "../../experiments.js";
import type { RunTracker } from "../../experiments.js";
import { generateJobStream } from "../../jobs.js";
import type { JobStream } from "../../jobs.js";
import type { SimCluster, TraceSource } from "../../model.js";
import { checkRunSize } from "../../options.js";
import type { RunSize } from "../../options.js";
import { formatNumber, right, SIM_JOB_TYPES, writeReport } from "../../report.js";
import type { Column, RenderedReport } from "../../report.js";

/**
 * The run size of the experiments under whole-server events (lifetime: reclaims; drain: planned reimages) when none is
 * given: 100 servers for a week at load 0.4 (stock then has empty servers a quarter to a third of the time), on real
 * traces when ../shared/data is there.
 */
export const RECLAIM_RUN_SIZE: Readonly<RunSize> = Object.freeze({
  servers: 100,
  days: 7,
  load: 0.4,
  seed: 1,
  level: "medium",
  traces: "real",
});

/**
 * `o`'s run size with `defaults` where it sets none, validated (INVALID_ARGUMENT `<what> option <field>` naming the
 * first field out of range).
 */
export function resolveRunSize(what: string, o: Partial<RunSize>, defaults: RunSize = RECLAIM_RUN_SIZE): RunSize {
  const r: RunSize = {
    servers: o.servers ?? defaults.servers,
    days: o.days ?? defaults.days,
    load: o.load ?? defaults.load,
    seed: o.seed ?? defaults.seed,
    level: o.level ?? defaults.level,
    traces: o.traces ?? defaults.traces,
  };
  checkRunSize(what, r);
  return r;
}

/** The job shapes of a run on `traces`: real traces also mean real job shapes (half from the Alibaba DAG sample). */
export function jobSource(traces: TraceSource): "mixed" | "tpcds" {
  return traces === "real" ? "mixed" : "tpcds";
}

/** One cluster and job stream, generated once from the seed so that every run of an experiment sees the same. */
export interface ComputeWorld {
  cluster: SimCluster;
  jobs: JobStream;
  /** The traces actually used ("generated" when "real" was asked for but ../shared/data is absent). */
  traces: TraceSource;
}

/** Generates the cluster and job stream of run size `o`, telling `tracker` what it does. */
export async function generateComputeWorld(o: RunSize, tracker: RunTracker): Promise<ComputeWorld> {
  const traces = await chooseTraces(o.traces, (m) => tracker.note(m));
  tracker.note(
    `generating the ${o.level}-utilization cluster: ${o.servers} servers, ${o.days} days (${traces.source} traces)`,
  );
  const cluster = generateCluster({
    servers: o.servers,
    level: o.level,
    days: o.days,
    seed: o.seed,
    source: traces.source,
    ...(traces.templates ? { templates: traces.templates } : {}),
  });
  const jobs = generateJobStream(cluster, { seed: o.seed, load: o.load, source: jobSource(traces.source) });
  for (const note of jobs.notes) tracker.note(`job stream: ${note}`);
  return { cluster, jobs, traces: traces.source };
}

/** What `chooseTraces` chose: the trace source and, for real traces, their templates. */
export type ChosenTraces = Awaited<ReturnType<typeof chooseTraces>>;

/**
 * The generated cluster of `servers` x `days` for `seed` whose primaries average `meanPct` % (the sweep's and the
 * victim and notice experiments' utilization levels), on the chosen traces.
 */
export function clusterAtUtilization(
  o: { servers: number; days: number },
  seed: number,
  meanPct: number,
  traces: ChosenTraces,
): SimCluster {
  return generateCluster({
    servers: o.servers,
    days: o.days,
    seed,
    meanPct,
    source: traces.source,
    ...(traces.templates ? { templates: traces.templates } : {}),
  });
}

/** The run size as a report's setup line begins it. */
export function runSizeLine(o: RunSize, traces: TraceSource): string {
  return (
    `${formatNumber(o.servers)} servers, ${o.days} simulated days after 30 days of history, ${o.level} utilization, ` +
    `seed ${o.seed}, ${traces} traces, offered load ${o.load}`
  );
}

/** The run size as a JSON setup begins it. */
export function runSizeJson(o: RunSize, traces: TraceSource): RunSize {
  return { servers: o.servers, days: o.days, load: o.load, seed: o.seed, level: o.level, traces };
}

/** "finished / submitted" jobs of a run. */
export function jobsCell(r: ComputeRunResult): string {
  return `${formatNumber(r.jobs)} / ${formatNumber(r.jobsSubmitted)}`;
}

/** The job columns of a runs table: jobs, average job time, per job type, and the kills. */
export const JOB_RUN_COLUMNS: readonly Column[] = [
  right("jobs"),
  right("avg job time (s)"),
  ...SIM_JOB_TYPES.map((t) => right(`${t} (s)`)),
  right("task kills"),
  right("job-manager kills"),
];

/** A run's cells under {@link JOB_RUN_COLUMNS} ("-" for a job type with no jobs). */
export function jobRunCells(r: ComputeRunResult): string[] {
  return [
    jobsCell(r),
    formatNumber(r.avgJobTimeS, 1),
    ...SIM_JOB_TYPES.map((t) => (r.byType[t].jobs > 0 ? formatNumber(r.byType[t].avgJobTimeS, 1) : "-")),
    formatNumber(r.taskKills),
    formatNumber(r.jobManagerKills),
  ];
}

/** The CSV columns of the per-type average job times. */
export const JOB_TYPE_CSV_HEADER: readonly string[] = SIM_JOB_TYPES.map((t) => `${t}_avg_job_time_s`);

/** A run's values under {@link JOB_TYPE_CSV_HEADER}. */
export function jobTypeCsv(r: ComputeRunResult): number[] {
  return SIM_JOB_TYPES.map((t) => r.byType[t].avgJobTimeS);
}

/** Writes `value` as indented JSON (and a newline) to `path` (its directory created if needed); returns the path. */
export function writeJson(path: string, value: unknown): string {
  mkdirSync(dirname(path), { recursive: true });
  writeFileSync(path, JSON.stringify(value, null, 2) + "\n");
  return path;
}

/** Writes the report's files and `<name>.json` beside them into `out` (none: nothing); returns the paths. */
export function writeReportAndJson(out: string | undefined, report: RenderedReport, json: () => unknown): string[] {
  if (out === undefined) return [];
  return [...writeReport(out, report), writeJson(join(out, `${report.name}.json`), json())];
}
