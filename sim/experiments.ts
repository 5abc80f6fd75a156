/**
 * The simulator's experiments: a compute experiment (task placement policies on one cluster and job stream), a
 * storage experiment (replica placements and replication factors on one cluster) and the grid of both that
 * `npm run experiments` runs. Each generates its cluster (and job stream) once per utilization level, so every policy
 * of a comparison sees the same traces, runs them, and renders (and, given `out`, writes) a report.
 */
import { performance } from "node:perf_hooks";
import { isHarvestError } from "../common/errors.js";
import { generateCluster } from "./cluster-gen.js";
import { DEFAULT_KILL_COST, NO_KILL_COST, runCompute } from "./compute.js";
import type { EngineProgress } from "./engine/engine.js";
import { generateJobStream } from "./jobs.js";
import { UTILIZATION_LEVELS } from "./model.js";
import type { SimCluster, TraceSource, UtilizationLevel } from "./model.js";
import { loadRealTemplates } from "./real-traces.js";
import type { RealTemplate } from "./real-traces.js";
import { COMPUTE_POLICIES, STORAGE_PLACEMENTS, writeReport } from "./report.js";
import type { RenderedReport } from "./report.js";
import type { ComputePolicy, ComputeResult, StoragePlacement, StorageResult } from "./results.js";
import { DEFAULT_RE_REPLICATION_BYTES_PER_SEC, runStorage } from "./experiments/storage/index.js";
import { renderComputeReport } from "./compute-report.js";
import { renderStorageReport } from "./experiments/storage/index.js";
import { checkList, checkPositive, checkPositiveInt, checkSeed32, checkTraces, invalidArgument } from "./options.js";

/** What an experiment tells its caller while it runs (the CLI turns these into a progress line). */
export type ExperimentEvent =
  | {
      kind: "note";
      /** A one-line message: what is being generated, a fallback taken. */
      message: string;
    }
  | {
      kind: "progress";
      /** The run: "compute medium history". */
      label: string;
      /** 1-based index of the run among the experiment's `runs`. */
      run: number;
      runs: number;
      /** Share of the run's simulated time done, 0..1. */
      fraction: number;
      events: number;
      eventsPerS: number;
      elapsedMs: number;
    }
  | {
      kind: "done";
      label: string;
      run: number;
      runs: number;
      events: number;
      eventsPerS: number;
      wallMs: number;
    };

/** The options every experiment ends with: where its report goes, the command shown in it, and who hears progress. */
export interface ExperimentOutput {
  /** Directory for the report's files; none: render only. */
  out?: string;
  /** The command line shown in the report. */
  command?: string;
  /** Told about progress, notes and finished runs. */
  onProgress?: (e: ExperimentEvent) => void;
}

/** An experiment's options `O` with every default filled in; the output options stay optional. */
export type Resolved<O extends ExperimentOutput> = Required<Omit<O, keyof ExperimentOutput>> &
  Pick<O, keyof ExperimentOutput>;

/** The output options of `o` that are set, to spread into its resolved options. */
export function outputOptions(o: ExperimentOutput): ExperimentOutput {
  return {
    ...(o.out !== undefined ? { out: o.out } : {}),
    ...(o.command !== undefined ? { command: o.command } : {}),
    ...(o.onProgress !== undefined ? { onProgress: o.onProgress } : {}),
  };
}

/** What every experiment's outcome ends with: its report, the files written, the traces used. */
export interface ExperimentReport {
  report: RenderedReport;
  /** Files written (empty without `out`). */
  files: string[];
  /** The traces actually used ("generated" when "real" was asked for but ../shared/data is absent). */
  traces: TraceSource;
}

/** Options both experiments take. */
export interface ExperimentOptions extends ExperimentOutput {
  /**
   * Servers in the simulated cluster.
   * @default 1000 (compute), 10000 (storage)
   */
  servers?: number;
  /**
   * Simulated days of the experiment (the history the policies learn from comes before them).
   * @default 30 (compute), 365 (storage)
   */
  days?: number;
  /**
   * The seed of the cluster, the job stream and every random choice: the same seed gives the same figures.
   * @default 1
   */
  seed?: number;
  /**
   * Average primary utilization levels to run, one cluster each.
   * @default ["medium"]
   */
  levels?: readonly UtilizationLevel[];
  /**
   * Primary-tenant utilization: generated, or real traces from ../shared/data ("real" falls back to generated, with a
   * note, when that folder is absent).
   * @default "generated"
   */
  traces?: TraceSource;
  /**
   * Directory to write the report to (`<name>.md`, `<name>.csv`, `<name>-*.svg`); none: render only.
   * @default undefined
   */
  out?: string;
}

/** Options of the compute experiment. */
export interface ComputeExperimentOptions extends ExperimentOptions {
  /**
   * Task placement policies to run on the same cluster and job stream.
   * @default ["stock", "stock-unaware", "history"] (COMPUTE_POLICIES)
   */
  policies?: readonly ComputePolicy[];
  /**
   * What a kill costs: the modelled lags, launches and job managers (`DEFAULT_KILL_COST`), or "none" (the instant
   * model of earlier releases, `NO_KILL_COST`).
   * @default "modelled"
   */
  killCost?: "modelled" | "none";
}

/** Options of the storage experiment. */
export interface StorageExperimentOptions extends ExperimentOptions {
  /**
   * Replica placement policies to run on the same cluster.
   * @default ["stock", "diversity"]
   */
  placements?: readonly StoragePlacement[];
  /**
   * Replication factors to run, each with every placement.
   * @default [3]
   */
  replications?: readonly number[];
  /**
   * Bandwidth each server gives re-replication, MB/s (10^6 bytes): the main lever on how long a block stays
   * under-replicated after a reimage.
   * @default 50
   */
  reReplicationMBps?: number;
}

/** What an experiment produced. */
export interface ExperimentOutcome<R> extends ExperimentReport {
  results: R[];
}

/** Compute experiment options with every default filled in. */
export type ResolvedComputeExperimentOptions = Resolved<ComputeExperimentOptions>;

/** Storage experiment options with every default filled in. */
export type ResolvedStorageExperimentOptions = Resolved<StorageExperimentOptions>;

/** Whose options the messages name: INVALID_ARGUMENT "experiment option <field> ...". */
const WHAT = "experiment";

function resolveCommon(o: ExperimentOptions, defaults: { servers: number; days: number }) {
  const seed = checkSeed32(WHAT, o.seed ?? 1);
  const traces = checkTraces(WHAT, o.traces ?? "generated");
  return {
    servers: checkPositiveInt(WHAT, "servers", o.servers ?? defaults.servers),
    days: checkPositiveInt(WHAT, "days", o.days ?? defaults.days),
    seed,
    levels: checkList<UtilizationLevel>(WHAT, "levels", o.levels ?? ["medium"], UTILIZATION_LEVELS),
    traces,
    ...outputOptions(o),
  };
}

/** Fills the compute experiment's defaults and validates (INVALID_ARGUMENT naming the field). */
export function resolveComputeExperimentOptions(o: ComputeExperimentOptions = {}): ResolvedComputeExperimentOptions {
  return {
    ...resolveCommon(o, { servers: 1000, days: 14 }),
    policies: checkList(WHAT, "policies", o.policies ?? COMPUTE_POLICIES, COMPUTE_POLICIES),
    killCost: checkList(WHAT, "killCost", [o.killCost ?? "modelled"], ["modelled", "none"] as const)[0]!,
  };
}

/** Fills the storage experiment's defaults and validates (INVALID_ARGUMENT naming the field). */
export function resolveStorageExperimentOptions(o: StorageExperimentOptions = {}): ResolvedStorageExperimentOptions {
  const replications = [...new Set(o.replications ?? [3])].sort((a, b) => a - b);
  if (replications.length === 0) invalidArgument(WHAT, "replications", "must name at least one replication factor");
  for (const r of replications)
    if (!Number.isInteger(r) || r < 1 || r > 10)
      invalidArgument(WHAT, "replications", `has ${r}; use factors in 1..10`);
  return {
    ...resolveCommon(o, { servers: 10_000, days: 365 }),
    placements: checkList(WHAT, "placements", o.placements ?? STORAGE_PLACEMENTS, STORAGE_PLACEMENTS),
    replications,
    reReplicationMBps: checkPositive(
      WHAT,
      "reReplicationMBps",
      o.reReplicationMBps ?? DEFAULT_RE_REPLICATION_BYTES_PER_SEC / 1e6,
    ),
  };
}

// ------------------------------------------------------------------------------------------------ running

/** Real templates when asked for and present; otherwise a note and generated traces. */
export async function chooseTraces(
  traces: TraceSource,
  note: (message: string) => void,
): Promise<{ source: TraceSource; templates?: RealTemplate[] }> {
  if (traces === "generated") return { source: "generated" };
  try {
    const templates = await loadRealTemplates();
    note(`real traces: ${templates.length} utilization series from ../shared/data`);
    return { source: "real", templates };
  } catch (err) {
    // A fresh clone has no ../shared/data: the experiments must still run, on the generator alone.
    if (!isHarvestError(err, "CONFIG_INVALID")) throw err;
    note(`real traces: none under ${err.details.dir ?? "../shared/data"}; using generated traces`);
    return { source: "generated" };
  }
}

/** Counts runs and turns engine progress into experiment events with events/s. */
export class RunTracker {
  private run = 0;
  constructor(
    private readonly runs: number,
    private readonly emit: ((e: ExperimentEvent) => void) | undefined,
  ) {}

  note(message: string): void {
    this.emit?.({ kind: "note", message });
  }

  /** Runs `fn` (one simulation of simulated time from `startMs`), reporting its progress under `label`. */
  track<R extends { events: number; wallMs: number }>(
    label: string,
    startMs: number,
    fn: (onProgress: (p: EngineProgress) => void) => R,
  ): R {
    const run = ++this.run;
    const started = performance.now();
    const emit = this.emit;
    const onProgress = (p: EngineProgress): void => {
      if (!emit) return;
      const elapsedMs = performance.now() - started;
      emit({
        kind: "progress",
        label,
        run,
        runs: this.runs,
        fraction: p.untilMs > startMs ? Math.min(1, Math.max(0, (p.nowMs - startMs) / (p.untilMs - startMs))) : 0,
        events: p.events,
        eventsPerS: elapsedMs > 0 ? p.events / (elapsedMs / 1000) : 0,
        elapsedMs,
      });
    };
    const result = fn(onProgress);
    emit?.({
      kind: "done",
      label,
      run,
      runs: this.runs,
      events: result.events,
      eventsPerS: result.wallMs > 0 ? result.events / (result.wallMs / 1000) : 0,
      wallMs: result.wallMs,
    });
    return result;
  }
}

/** Events between progress reports: about one a second at the simulators' speeds. */
const PROGRESS_EVERY = 100_000;

/** Utilization resolution: 5-minute slots for compute runs, hourly for year-long storage runs (memory). */
const COMPUTE_SLOT_MS = 300_000;
const STORAGE_SLOT_MS = 3_600_000;

function clusterFor(
  o: { servers: number; days: number; seed: number },
  slotMs: number,
  level: UtilizationLevel,
  traces: { source: TraceSource; templates?: RealTemplate[] },
  tracker: RunTracker,
): SimCluster {
  tracker.note(
    `generating the ${level}-utilization cluster: ${o.servers} servers, ${o.days} days (${traces.source} traces)`,
  );
  return generateCluster({
    servers: o.servers,
    level,
    days: o.days,
    slotMs,
    seed: o.seed,
    source: traces.source,
    ...(traces.templates ? { templates: traces.templates } : {}),
  });
}

/** Options of `buildCluster`. */
export interface BuildClusterOptions {
  /** @default 1000 */
  servers?: number;
  /** @default 30 */
  days?: number;
  /** @default 1 */
  seed?: number;
  /** @default "medium" */
  level?: UtilizationLevel;
  /** @default "generated" */
  traces?: TraceSource;
  /**
   * Resolution of the utilization series.
   * @default 300000 (the compute experiment's)
   */
  slotMs?: number;
  /** @default undefined */
  onProgress?: (e: ExperimentEvent) => void;
}

/** The cluster an experiment with these options would run on (for `harvest sim cluster`), and the traces it used. */
export async function buildCluster(
  options: BuildClusterOptions = {},
): Promise<{ cluster: SimCluster; traces: TraceSource }> {
  const o = resolveCommon({ ...options, levels: [options.level ?? "medium"] }, { servers: 1000, days: 30 });
  const tracker = new RunTracker(0, o.onProgress);
  const traces = await chooseTraces(o.traces, (m) => tracker.note(m));
  const cluster = clusterFor(o, options.slotMs ?? COMPUTE_SLOT_MS, o.levels[0]!, traces, tracker);
  return { cluster, traces: traces.source };
}

function finish<R>(
  results: R[],
  report: RenderedReport,
  out: string | undefined,
  traces: TraceSource,
): ExperimentOutcome<R> {
  return { results, report, files: out !== undefined ? writeReport(out, report) : [], traces };
}

/**
 * Runs each policy on each level's cluster and job stream (generated once per level from the seed, so the policies
 * of a comparison see the same traces and jobs).
 */
export async function runComputeExperiment(
  options: ComputeExperimentOptions = {},
): Promise<ExperimentOutcome<ComputeResult>> {
  const o = resolveComputeExperimentOptions(options);
  const tracker = new RunTracker(o.levels.length * o.policies.length, o.onProgress);
  const traces = await chooseTraces(o.traces, (m) => tracker.note(m));
  const results: ComputeResult[] = [];
  for (const level of o.levels) {
    const cluster = clusterFor(o, COMPUTE_SLOT_MS, level, traces, tracker);
    // Real traces also mean real job shapes: half the recurring jobs come from the Alibaba DAG sample.
    const jobs = generateJobStream(cluster, { seed: o.seed, source: traces.source === "real" ? "mixed" : "tpcds" });
    for (const note of jobs.notes) tracker.note(`job stream: ${note}`);
    for (const policy of o.policies)
      results.push(
        tracker.track(`compute ${level} ${policy}`, cluster.historyMs, (onProgress) =>
          runCompute(cluster, jobs, {
            policy,
            seed: o.seed,
            killCost: o.killCost === "none" ? NO_KILL_COST : DEFAULT_KILL_COST,
            onProgress,
            progressEvery: PROGRESS_EVERY,
          }),
        ),
      );
  }
  const report = renderComputeReport(results, o.command !== undefined ? { command: o.command } : {});
  return finish(results, report, o.out, traces.source);
}

/** Runs each placement and replication factor on each level's cluster (generated once per level from the seed). */
export async function runStorageExperiment(
  options: StorageExperimentOptions = {},
): Promise<ExperimentOutcome<StorageResult>> {
  const o = resolveStorageExperimentOptions(options);
  const tracker = new RunTracker(o.levels.length * o.placements.length * o.replications.length, o.onProgress);
  const traces = await chooseTraces(o.traces, (m) => tracker.note(m));
  const results: StorageResult[] = [];
  for (const level of o.levels) {
    const cluster = clusterFor(o, STORAGE_SLOT_MS, level, traces, tracker);
    for (const replication of o.replications)
      for (const placement of o.placements)
        results.push(
          tracker.track(`storage ${level} ${placement} r${replication}`, cluster.historyMs, (onProgress) =>
            runStorage(cluster, {
              placement,
              replication,
              seed: o.seed,
              reReplicationBytesPerSec: o.reReplicationMBps * 1e6,
              onProgress,
            }),
          ),
        );
  }
  const report = renderStorageReport(results, o.command !== undefined ? { command: o.command } : {});
  return finish(results, report, o.out, traces.source);
}

// ------------------------------------------------------------------------------------------------ the grid

/** Sizes of the comparison grid. */
export type GridPreset = "small" | "full";

/**
 * The grid's experiments. "full" is the paper-scale comparison `npm run experiments` runs; "small" runs in seconds
 * and is what the default test suite runs end to end.
 */
export const GRID_PRESETS: Record<
  GridPreset,
  { compute: { servers: number; days: number }; storage: { servers: number; days: number } }
> = {
  full: { compute: { servers: 1000, days: 14 }, storage: { servers: 10_000, days: 365 } },
  small: { compute: { servers: 40, days: 3 }, storage: { servers: 60, days: 14 } },
};

/** Options of the grid. */
export interface GridOptions {
  /** @default "full" */
  preset?: GridPreset;
  /**
   * Directory for `compute.*` and `storage.*`; none: render only.
   * @default undefined
   */
  out?: string;
  /** @default 1 */
  seed?: number;
  /** @default "generated" */
  traces?: TraceSource;
  /** @default undefined */
  command?: string;
  /** @default undefined */
  onProgress?: (e: ExperimentEvent) => void;
}

/** What the grid produced. */
export interface GridOutcome {
  compute: ExperimentOutcome<ComputeResult>;
  storage: ExperimentOutcome<StorageResult>;
}

/**
 * The full comparison: compute (both policies) and storage (both placements, replication 3 and 4) at every
 * utilization level, at the preset's scale.
 */
export async function runGrid(options: GridOptions = {}): Promise<GridOutcome> {
  const preset = options.preset ?? "full";
  if (!(preset in GRID_PRESETS)) invalidArgument(WHAT, "preset", `must be "small" or "full" (got ${String(preset)})`);
  const sizes = GRID_PRESETS[preset];
  const common = {
    levels: UTILIZATION_LEVELS,
    ...(options.seed !== undefined ? { seed: options.seed } : {}),
    ...(options.traces !== undefined ? { traces: options.traces } : {}),
    ...(options.out !== undefined ? { out: options.out } : {}),
    ...(options.command !== undefined ? { command: options.command } : {}),
    ...(options.onProgress !== undefined ? { onProgress: options.onProgress } : {}),
  };
  const compute = await runComputeExperiment({ ...common, ...sizes.compute, policies: COMPUTE_POLICIES });
  const storage = await runStorageExperiment({
    ...common,
    ...sizes.storage,
    placements: STORAGE_PLACEMENTS,
    replications: [3, 4],
  });
  return { compute, storage };
}
