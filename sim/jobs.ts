/**
 * Job streams for the compute experiment: recurring DAG jobs whose runs the simulated job managers execute. Two
 * sources of shapes: TPC-DS-like queries (seeds/004, Figure 7: query 19's mappers and reducers with parallelisms 469,
 * 138, 126, 113, 6 and 1, plus a small family of similar star-join shapes) and the Alibaba cluster-trace-v2018 DAG
 * sample (`common/alibaba-dag.ts`). Every job recurs: the same name runs several times over the experiment with some
 * noise in its task durations, so that the job-length history Algorithm 1 types jobs by (seeds/004 section 4.1, line
 * 3) exists. Pure but for `loadAlibabaSample`, which reads the sample from ../shared/data when it is there.
 */
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { parseAlibabaTasks } from "../common/alibaba-dag.js";
import type { AlibabaJob } from "../common/alibaba-dag.js";
import { maxConcurrency, validateDag, vertexLayers } from "../common/dag-spec.js";
import type { DagSpec, EdgeType } from "../common/dag-spec.js";
import { HarvestError } from "../common/errors.js";
import { sharedDataDir } from "../common/paths.js";
import { SeededRng } from "../common/rng.js";
import { DAY_MS } from "./model.js";
import type { SimCluster } from "./model.js";
import { checkAboveZero, checkAtLeastZero, checkFraction, invalidArgument } from "./options.js";
import { streamSeed } from "./streams.js";

/** Where a stream's job shapes come from. */
export type JobSource = "alibaba" | "tpcds" | "mixed";

/** The job sources, in the order the docs list them. */
export const JOB_SOURCES: readonly JobSource[] = ["alibaba", "tpcds", "mixed"];

/** A vertex of a simulated job: `tasks` tasks of `taskMs` each, runnable once every input vertex has finished. */
export interface SimVertex {
  readonly name: string;
  readonly tasks: number;
  /** Duration of one task at the job's nominal size (before a run's noise). */
  readonly taskMs: number;
  /** Indices (in `SimJobShape.vertices`) of the vertices whose output this one reads; all are earlier in the list. */
  readonly inputs: readonly number[];
}

/** The DAG of a recurring job: what every run of one job name executes. Built by `jobShape`. */
export interface SimJobShape {
  /** The job name; runs of one name share the job-length history Algorithm 1 reads. */
  readonly name: string;
  /** In topological order (`vertexLayers`). */
  readonly vertices: readonly SimVertex[];
  /** Max concurrent tasks from the DAG (`maxConcurrency`, seeds/004 Algorithm 1 line 4). */
  readonly maxConcurrency: number;
  readonly totalTasks: number;
  /** Sum of tasks x taskMs over the vertices: a run's work in task-ms at durationScale 1. */
  readonly taskMsTotal: number;
}

/** One run of a recurring job. */
export interface SimJob {
  /** Position in `JobStream.jobs` (the submission order; the scheduler's FIFO order). */
  readonly id: number;
  readonly shape: SimJobShape;
  readonly submitMs: number;
  /** Multiplies every task duration of this run (the run-to-run noise). */
  readonly durationScale: number;
}

/** A job stream: runs ascending by submission time, and how it was made. */
export interface JobStream {
  readonly jobs: readonly SimJob[];
  /** The shapes actually used ("tpcds" when "alibaba" or "mixed" was asked for and the sample is absent). */
  readonly source: JobSource;
  /** Cores every task asks for (what the load was computed with; `runCompute`'s default). */
  readonly taskCores: number;
  /**
   * Spread of task durations within a vertex: task i takes taskMs x durationScale x (1 + jitter x u), u in [-1, 1)
   * from a hash of (job, vertex, task), so a task takes the same time in every run of the simulation, re-runs and
   * other policies included.
   */
  readonly taskJitter: number;
  /** Distinct job names (recurring jobs). */
  readonly names: number;
  /** Work offered by the stream (tasks x duration x taskCores), core-hours. */
  readonly offeredCoreHours: number;
  /** Harvestable core-hours over the arrival window (0 when not computed, e.g. for `jobStream`). */
  readonly harvestableCoreHours: number;
  /** Fallbacks taken while generating, in words. */
  readonly notes: readonly string[];
}

// ------------------------------------------------------------------------------------------------ the pure forms

/** A vertex as `jobShape` takes it. */
export interface SimVertexInput {
  name: string;
  tasks: number;
  taskMs: number;
  /** Names of the vertices it reads. @default [] */
  inputs?: readonly string[];
  /** How it reads them (matters only for the DAG's validation). @default "scatter-gather" */
  edgeType?: EdgeType;
}

/**
 * A job shape from vertices: validated as a DAG job (`validateDag`: names, parallelism, no cycle), ordered
 * topologically, with its max concurrency. Throws the DAG_* errors of `validateDag`, or INVALID_ARGUMENT for a task
 * duration that is not a positive finite number.
 */
export function jobShape(name: string, vertices: readonly SimVertexInput[]): SimJobShape {
  const dag = validateDag({
    name,
    vertices: vertices.map((v) => ({
      name: v.name,
      parallelism: v.tasks,
      command: ["sim"],
      resources: { vcoresMilli: 1000, memoryMb: 1024 },
    })),
    edges: vertices.flatMap((v) =>
      (v.inputs ?? []).map((from) => ({ from, to: v.name, type: v.edgeType ?? "scatter-gather" })),
    ),
  });
  const byName = new Map(vertices.map((v) => [v.name, v]));
  for (const v of vertices) {
    if (!(Number.isFinite(v.taskMs) && v.taskMs > 0))
      throw new HarvestError("INVALID_ARGUMENT", `job ${name}: vertex ${v.name} taskMs must be > 0, got ${v.taskMs}`, {
        details: { field: `${v.name}.taskMs` },
      });
  }
  return shapeOfDag(dag, (vertex) => byName.get(vertex)!.taskMs);
}

/** A shape from a validated DAG and each vertex's task duration. */
function shapeOfDag(dag: DagSpec, taskMsOf: (vertex: string) => number): SimJobShape {
  const order = vertexLayers(dag).flat();
  const index = new Map(order.map((n, i) => [n, i]));
  const parallelism = new Map(dag.vertices.map((v) => [v.name, v.parallelism]));
  const vertices: SimVertex[] = order.map((vname) => ({
    name: vname,
    tasks: parallelism.get(vname)!,
    taskMs: taskMsOf(vname),
    inputs: dag.edges.filter((e) => e.to === vname).map((e) => index.get(e.from)!),
  }));
  let totalTasks = 0;
  let taskMsTotal = 0;
  for (const v of vertices) {
    totalTasks += v.tasks;
    taskMsTotal += v.tasks * v.taskMs;
  }
  return { name: dag.name, vertices, maxConcurrency: maxConcurrency(dag), totalTasks, taskMsTotal };
}

/** One run as `jobStream` takes it. */
export interface SimJobInput {
  shape: SimJobShape;
  submitMs: number;
  /** @default 1 */
  durationScale?: number;
}

/** Options of `jobStream`. */
export interface JobStreamInputOptions {
  /** @default 1 */
  taskCores?: number;
  /** @default 0 (every task of a vertex takes exactly its taskMs x durationScale) */
  taskJitter?: number;
}

/**
 * A job stream from explicit runs (tests, hand-made scenarios): sorted by submission time (ties keep input order) and
 * numbered in that order.
 */
export function jobStream(runs: readonly SimJobInput[], options: JobStreamInputOptions = {}): JobStream {
  const taskCores = options.taskCores ?? 1;
  const taskJitter = options.taskJitter ?? 0;
  checkTaskCores(taskCores);
  checkFraction(WHAT, "taskJitter", taskJitter);
  const sorted = runs
    .map((r, i) => ({ r, i }))
    .sort((a, b) => a.r.submitMs - b.r.submitMs || a.i - b.i)
    .map(({ r }, id): SimJob => {
      const durationScale = r.durationScale ?? 1;
      if (!(Number.isFinite(r.submitMs) && r.submitMs >= 0))
        invalidArgument(WHAT, `runs[${id}].submitMs`, `must be a time >= 0 (got ${r.submitMs})`);
      checkAboveZero(WHAT, `runs[${id}].durationScale`, durationScale);
      return { id, shape: r.shape, submitMs: r.submitMs, durationScale };
    });
  let taskMs = 0;
  for (const j of sorted) taskMs += j.shape.taskMsTotal * j.durationScale;
  return {
    jobs: sorted,
    source: "tpcds",
    taskCores,
    taskJitter,
    names: new Set(sorted.map((j) => j.shape.name)).size,
    offeredCoreHours: (taskMs * taskCores) / 3_600_000,
    harvestableCoreHours: 0,
    notes: [],
  };
}

/**
 * How long task `task` of vertex `vertex` of `job` runs: the vertex's taskMs x the run's durationScale x a jitter
 * from a hash of the three (see `JobStream.taskJitter`), at least 1 ms.
 */
export function taskDurationMs(stream: JobStream, job: SimJob, vertex: number, task: number): number {
  const v = job.shape.vertices[vertex]!;
  let ms = v.taskMs * job.durationScale;
  if (stream.taskJitter > 0) ms *= 1 + stream.taskJitter * (2 * hash01(job.id, vertex, task) - 1);
  return Math.max(1, Math.round(ms));
}

/** A uniform value in [0, 1) from three integers (murmur3's finalizer over a mix of them). */
function hash01(a: number, b: number, c: number): number {
  let h = Math.imul(a ^ 0x9e3779b9, 0x85ebca6b) ^ Math.imul(b + 0x7f4a7c15, 0xc2b2ae35) ^ Math.imul(c + 1, 0x27d4eb2f);
  h ^= h >>> 16;
  h = Math.imul(h, 0x85ebca6b);
  h ^= h >>> 13;
  h = Math.imul(h, 0xc2b2ae35);
  h ^= h >>> 16;
  return (h >>> 0) / 4294967296;
}

// ------------------------------------------------------------------------------------------------ TPC-DS-like shapes

/** A TPC-DS-like query: vertices as [name, parallelism at full size, task duration relative to the fact-table scan]. */
export interface TpcdsQuery {
  readonly query: string;
  readonly vertices: readonly (readonly [name: string, parallelism: number, relativeDuration: number])[];
  readonly edges: readonly (readonly [from: string, to: string, type: EdgeType])[];
}

/**
 * The TPC-DS-like family. q19 is seeds/004's Figure 7 as `test/unit/dag-spec.test.ts` reads it (max concurrency 469);
 * the others are star joins of the same kind with the parallelisms of their fact-table scans (our own, not measured):
 * a dimension or two broadcast into the big scan, shuffles into joins, a group-by and a one-task order-by.
 */
export const TPCDS_QUERIES: readonly TpcdsQuery[] = [
  {
    query: "q19",
    vertices: [
      ["mapper-1", 8, 0.2],
      ["mapper-2", 469, 1],
      ["mapper-8", 2, 0.2],
      ["mapper-9", 1, 0.2],
      ["mapper-10", 1, 0.2],
      ["mapper-11", 3, 0.2],
      ["reducer-3", 113, 0.6],
      ["reducer-4", 126, 0.6],
      ["reducer-5", 138, 0.5],
      ["reducer-6", 6, 0.3],
      ["reducer-7", 1, 0.1],
    ],
    edges: [
      ["mapper-1", "mapper-2", "broadcast"],
      ["mapper-2", "reducer-3", "scatter-gather"],
      ["mapper-8", "reducer-3", "scatter-gather"],
      ["reducer-3", "reducer-4", "scatter-gather"],
      ["mapper-9", "reducer-4", "scatter-gather"],
      ["reducer-4", "reducer-5", "scatter-gather"],
      ["mapper-10", "reducer-5", "scatter-gather"],
      ["mapper-11", "reducer-5", "broadcast"],
      ["reducer-5", "reducer-6", "scatter-gather"],
      ["reducer-6", "reducer-7", "scatter-gather"],
    ],
  },
  {
    query: "q3",
    vertices: [
      ["mapper-1", 4, 0.2],
      ["mapper-2", 6, 0.2],
      ["mapper-3", 400, 1],
      ["reducer-4", 60, 0.5],
      ["reducer-5", 1, 0.1],
    ],
    edges: [
      ["mapper-1", "mapper-3", "broadcast"],
      ["mapper-2", "mapper-3", "broadcast"],
      ["mapper-3", "reducer-4", "scatter-gather"],
      ["reducer-4", "reducer-5", "scatter-gather"],
    ],
  },
  {
    query: "q42",
    vertices: [
      ["mapper-1", 2, 0.2],
      ["mapper-2", 250, 1],
      ["reducer-3", 30, 0.4],
      ["reducer-4", 1, 0.1],
    ],
    edges: [
      ["mapper-1", "mapper-2", "broadcast"],
      ["mapper-2", "reducer-3", "scatter-gather"],
      ["reducer-3", "reducer-4", "scatter-gather"],
    ],
  },
  {
    query: "q7",
    vertices: [
      ["mapper-1", 3, 0.2],
      ["mapper-2", 2, 0.2],
      ["mapper-3", 5, 0.2],
      ["mapper-4", 1, 0.2],
      ["mapper-5", 350, 1],
      ["reducer-6", 80, 0.5],
      ["reducer-7", 1, 0.1],
    ],
    edges: [
      ["mapper-1", "mapper-5", "broadcast"],
      ["mapper-2", "mapper-5", "broadcast"],
      ["mapper-3", "mapper-5", "broadcast"],
      ["mapper-4", "mapper-5", "broadcast"],
      ["mapper-5", "reducer-6", "scatter-gather"],
      ["reducer-6", "reducer-7", "scatter-gather"],
    ],
  },
  {
    query: "q64",
    vertices: [
      ["mapper-1", 300, 1],
      ["mapper-2", 200, 0.8],
      ["reducer-3", 150, 0.7],
      ["mapper-4", 120, 0.8],
      ["reducer-5", 100, 0.6],
      ["reducer-6", 40, 0.4],
      ["reducer-7", 1, 0.1],
    ],
    edges: [
      ["mapper-1", "reducer-3", "scatter-gather"],
      ["mapper-2", "reducer-3", "scatter-gather"],
      ["reducer-3", "reducer-5", "scatter-gather"],
      ["mapper-4", "reducer-5", "scatter-gather"],
      ["reducer-5", "reducer-6", "scatter-gather"],
      ["reducer-6", "reducer-7", "scatter-gather"],
    ],
  },
  {
    query: "q88",
    vertices: [
      ["mapper-1", 100, 1],
      ["mapper-2", 100, 1],
      ["mapper-3", 100, 1],
      ["mapper-4", 100, 1],
      ["reducer-5", 1, 0.2],
      ["reducer-6", 1, 0.2],
      ["reducer-7", 1, 0.2],
      ["reducer-8", 1, 0.2],
      ["reducer-9", 1, 0.1],
    ],
    edges: [
      ["mapper-1", "reducer-5", "scatter-gather"],
      ["mapper-2", "reducer-6", "scatter-gather"],
      ["mapper-3", "reducer-7", "scatter-gather"],
      ["mapper-4", "reducer-8", "scatter-gather"],
      ["reducer-5", "reducer-9", "scatter-gather"],
      ["reducer-6", "reducer-9", "scatter-gather"],
      ["reducer-7", "reducer-9", "scatter-gather"],
      ["reducer-8", "reducer-9", "scatter-gather"],
    ],
  },
];

/**
 * A TPC-DS-like job shape: `query`'s DAG with every parallelism times `widthScale` (rounded, at least 1) and every
 * task taking its relative duration x `scanTaskMs` (at least 1 s).
 */
export function tpcdsShape(name: string, query: TpcdsQuery, widthScale: number, scanTaskMs: number): SimJobShape {
  return jobShape(
    name,
    query.vertices.map(([vname, parallelism, rel]) => ({
      name: vname,
      tasks: Math.max(1, Math.round(parallelism * widthScale)),
      taskMs: Math.max(1000, Math.round(rel * scanTaskMs)),
      inputs: query.edges.filter((e) => e[1] === vname).map((e) => e[0]),
      edgeType: query.edges.find((e) => e[1] === vname)?.[2] ?? "scatter-gather",
    })),
  );
}

// ------------------------------------------------------------------------------------------------ Alibaba shapes

const ALIBABA_SAMPLE = join("alibaba2018_batch_dag_sample", "sample_tasks.csv");
let alibabaCache: { dir: string; jobs: AlibabaJob[] } | undefined;

/**
 * The Alibaba 2018 DAG sample (16,749 jobs of one hour) from `dataDir`, or undefined when it is absent (a fresh
 * clone). Read synchronously and kept for the process, since every experiment of a grid uses it.
 */
export function loadAlibabaSample(dataDir: string | undefined = sharedDataDir()): AlibabaJob[] | undefined {
  if (dataDir === undefined) return undefined;
  if (alibabaCache?.dir === dataDir) return alibabaCache.jobs;
  const path = join(dataDir, ALIBABA_SAMPLE);
  let text: string;
  try {
    text = readFileSync(path, "utf8");
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ENOENT") return undefined;
    throw err;
  }
  const jobs = parseAlibabaTasks(text, path);
  alibabaCache = { dir: dataDir, jobs };
  return jobs;
}

/** Trace jobs the generator replays: DAG-named jobs (not lone `task_` tasks) with 2 to `maxVertices` vertices. */
export function alibabaCandidates(jobs: readonly AlibabaJob[], maxVertices = 8): AlibabaJob[] {
  return jobs.filter((j) => j.tasks.length >= 2 && j.tasks.length <= maxVertices && j.tasks[0]!.type !== "task");
}

/**
 * A job shape from a trace job: one vertex per trace task with instances x `widthScale` tasks (at least 1, at most
 * `maxTasks`) of the trace duration (at least 1 s). Instances shorter than `minTaskMs` are merged, k to a task, so that
 * a task runs at least that long (coarse tasks: the same work in fewer scheduling events; a vertex's instances then
 * run k deep). Throws TRACE_MALFORMED or DAG_CYCLE as `alibabaJobToDag` would (the sample has neither).
 */
export function alibabaShape(
  name: string,
  job: AlibabaJob,
  opts: { widthScale: number; maxTasks: number; minTaskMs: number },
): SimJobShape {
  const ids = new Set(job.tasks.map((t) => t.id));
  return jobShape(
    name,
    job.tasks.map((t) => {
      let tasks = Math.min(opts.maxTasks, Math.max(1, Math.round(t.instances * opts.widthScale)));
      let taskMs = Math.max(1000, t.durationS * 1000);
      if (taskMs < opts.minTaskMs && tasks > 1) {
        const k = Math.min(tasks, Math.ceil(opts.minTaskMs / taskMs));
        tasks = Math.ceil(tasks / k);
        taskMs *= k;
      }
      const missing = t.deps.find((d) => !ids.has(d));
      if (missing !== undefined)
        throw new HarvestError(
          "TRACE_MALFORMED",
          `job ${job.name}: task ${t.name} depends on missing task ${missing}`,
          {
            details: { job: job.name, task: t.name, field: "task_name" },
          },
        );
      return { name: `${t.type}${t.id}`, tasks, taskMs, inputs: t.deps.map((d) => alibabaVertex(job, d)) };
    }),
  );
}

function alibabaVertex(job: AlibabaJob, id: string): string {
  const t = job.tasks.find((x) => x.id === id)!;
  return `${t.type}${t.id}`;
}

// ------------------------------------------------------------------------------------------------ the generator

/** Options of `generateJobStream`; every field has a default. */
export interface JobStreamOptions {
  /**
   * Days of arrivals from the start of the experiment (`cluster.historyMs`); the last `cooldown` of them stays free of
   * new jobs so that runs submitted late can finish before the horizon.
   * @default the cluster's experiment days
   */
  days?: number;
  /**
   * Seeds every choice of the generator.
   * @default cluster.seed
   */
  seed?: number;
  /**
   * Job shapes: TPC-DS-like queries, Alibaba trace DAGs, or each recurring job either with even odds. "alibaba" and
   * "mixed" fall back to "tpcds", with a note, when the Alibaba sample is absent.
   * @default "tpcds"
   */
  source?: JobSource;
  /**
   * Work offered, as a fraction of the harvestable core-hours of the arrival window (capacity - primary - reserve,
   * summed over servers and slots). Re-runs of killed tasks come on top. 0.3 keeps a 1,000-server, 30-day comparison
   * of both policies in a few minutes on a 2-core machine (about 20,000 runs and 7 million tasks).
   * @default 0.3
   */
  load?: number;
  /**
   * Cores each task asks for; the load is computed with it (pass the same to `runCompute`, which defaults to it).
   * @default 1
   */
  taskCores?: number;
  /**
   * The reserve the harvestable capacity is computed with (the scheduler's).
   * @default 0.1
   */
  reserveFraction?: number;
  /**
   * Spread of task durations within a vertex (see `JobStream.taskJitter`).
   * @default 0.2
   */
  taskJitter?: number;
  /**
   * Log-normal sigma of a run's durationScale around 1: how much one run of a job differs from the next.
   * @default 0.15
   */
  runNoise?: number;
  /**
   * Trace jobs to draw Alibaba shapes from, instead of reading the sample (tests, other traces).
   * @default loadAlibabaSample()
   */
  alibabaJobs?: readonly AlibabaJob[];
  /**
   * Alibaba instances shorter than this are merged into longer tasks (see `alibabaShape`).
   * @default 30000
   */
  minTaskMs?: number;
}

/** How often a recurring job runs, hours (each job draws one). */
const PERIODS_H = [1, 2, 4, 6, 8, 12, 24] as const;
/** The harvestable cores a 1,000-server medium cluster offers on average: jobs are sized for it, then scaled. */
const REFERENCE_HARVESTABLE_CORES = 8000;
/** TPC-DS widths: the full parallelism times a log-normal factor of this median (clamped to [0.05, 1.5]). */
const TPCDS_WIDTH_MEDIAN = 0.35;
const TPCDS_WIDTH_LOG_SD = 0.6;
/** TPC-DS scan-task durations: log-uniform between these (ms): from two-minute jobs to jobs of several hours. */
const TPCDS_SCAN_MIN_MS = 20_000;
const TPCDS_SCAN_MAX_MS = 90 * 60_000;
/** No vertex gets more tasks than this x the cluster scale (Alibaba instance counts reach 25,152). */
const MAX_TASKS_PER_VERTEX = 500;
/** Arrivals stop this long before the horizon (or at 80 % of the window when that is shorter). */
const COOLDOWN_MS = 12 * 3_600_000;

/** Independent random streams, one per purpose. */
const Stream = { Templates: 1, Runs: 2 } as const;

/** Whose options the messages name: INVALID_ARGUMENT "job stream option <field> ...". */
const WHAT = "job stream";

function checkTaskCores(taskCores: number): void {
  checkAboveZero(WHAT, "taskCores", taskCores);
}

/** Harvestable core-ms of `cluster` in [fromMs, toMs): per server and slot, capacity - primary - reserve, floored at 0. */
export function harvestableCoreMs(cluster: SimCluster, fromMs: number, toMs: number, reserveFraction: number): number {
  let total = 0;
  const first = Math.floor(fromMs / cluster.slotMs);
  const last = Math.ceil(toMs / cluster.slotMs);
  for (const s of cluster.servers) {
    const series = cluster.tenants[s.tenant]!.utilization;
    const reserve = Math.ceil(s.cores * 1000 * reserveFraction) / 1000;
    let sum = 0;
    for (let k = first; k < last; k++) {
      const lo = Math.max(fromMs, k * cluster.slotMs);
      const hi = Math.min(toMs, (k + 1) * cluster.slotMs);
      if (hi <= lo) continue;
      let u = series[Math.min(series.length - 1, k)]! + s.offsetPct;
      u = u < 0 ? 0 : u > 100 ? 100 : u;
      const free = s.cores * (1 - u / 100) - reserve;
      if (free > 0) sum += free * (hi - lo);
    }
    total += sum;
  }
  return total;
}

/**
 * A seeded stream of recurring jobs offering `load` x the cluster's harvestable core-hours over the arrival window.
 * Recurring jobs are drawn one at a time until their runs offer that much: each gets a shape (a TPC-DS-like query at a
 * random width and scan duration, or a random trace job with 2 to 8 vertices and its own durations and instance
 * counts), a period of 1 to 24 hours (at most a third of the window, so that it runs at least three times), a phase
 * (a trace job's arrival within its hour, scaled to the period), and per run a log-normal durationScale. Widths scale
 * with the cluster's harvestable cores, so the arrival rate and job sizes both follow the cluster.
 */
export function generateJobStream(cluster: SimCluster, options: JobStreamOptions = {}): JobStream {
  const experimentDays = (cluster.horizonMs - cluster.historyMs) / DAY_MS;
  const days = options.days ?? experimentDays;
  const seed = options.seed ?? cluster.seed;
  const load = options.load ?? 0.3;
  const taskCores = options.taskCores ?? 1;
  const reserveFraction = options.reserveFraction ?? 0.1;
  const taskJitter = options.taskJitter ?? 0.2;
  const runNoise = options.runNoise ?? 0.15;
  const minTaskMs = options.minTaskMs ?? 30_000;
  let source = options.source ?? "tpcds";
  if (!(days > 0 && days <= experimentDays + 1e-9))
    invalidArgument(WHAT, "days", `must be in (0, ${experimentDays}] (the cluster's experiment days), got ${days}`);
  if (!Number.isSafeInteger(seed)) invalidArgument(WHAT, "seed", `must be an integer (got ${seed})`);
  if (!JOB_SOURCES.includes(source))
    invalidArgument(WHAT, "source", `must be one of ${JOB_SOURCES.join(", ")} (got ${source})`);
  if (!(Number.isFinite(load) && load >= 0)) invalidArgument(WHAT, "load", `must be a number >= 0 (got ${load})`);
  checkTaskCores(taskCores);
  checkFraction(WHAT, "reserveFraction", reserveFraction);
  checkFraction(WHAT, "taskJitter", taskJitter);
  checkAtLeastZero(WHAT, "runNoise", runNoise);
  checkAtLeastZero(WHAT, "minTaskMs", minTaskMs);

  const notes: string[] = [];
  let candidates: AlibabaJob[] = [];
  if (source !== "tpcds") {
    const trace = options.alibabaJobs ?? loadAlibabaSample();
    candidates = trace ? alibabaCandidates(trace) : [];
    if (candidates.length === 0) {
      notes.push(
        trace
          ? "no Alibaba trace job has 2 to 8 DAG vertices; using TPC-DS-like jobs"
          : "Alibaba DAG sample absent (../shared/data); using TPC-DS-like jobs",
      );
      source = "tpcds";
    }
  }

  const windowStart = cluster.historyMs;
  const windowMs = days * DAY_MS;
  const arrivalsMs = windowMs - Math.min(COOLDOWN_MS, 0.2 * windowMs);
  const harvestable = harvestableCoreMs(cluster, windowStart, windowStart + arrivalsMs, reserveFraction);
  const meanCores = harvestable / arrivalsMs;
  const clusterScale = Math.min(1, meanCores / REFERENCE_HARVESTABLE_CORES);
  const maxTasks = Math.max(1, Math.round(MAX_TASKS_PER_VERTEX * clusterScale));
  const targetCoreMs = load * harvestable;

  const templates = new SeededRng(streamSeed(seed, Stream.Templates));
  const runsRng = new SeededRng(streamSeed(seed, Stream.Runs));
  const periods = PERIODS_H.map((h) => h * 3_600_000).filter((p) => 3 * p <= arrivalsMs);
  if (periods.length === 0) periods.push(arrivalsMs / 3);

  const runs: { shape: SimJobShape; submitMs: number; durationScale: number }[] = [];
  let offered = 0;
  let names = 0;
  while (offered < targetCoreMs) {
    const n = names++;
    const period = periods[templates.int(periods.length)]!;
    let shape: SimJobShape;
    let phase: number;
    const useTrace = source === "alibaba" || (source === "mixed" && templates.next() < 0.5);
    if (useTrace) {
      const job = candidates[templates.int(candidates.length)]!;
      shape = alibabaShape(`alibaba-${job.name}-${n}`, job, { widthScale: clusterScale, maxTasks, minTaskMs });
      phase = ((job.arrivalS % 3600) / 3600) * period;
    } else {
      const query = TPCDS_QUERIES[templates.int(TPCDS_QUERIES.length)]!;
      const width = Math.min(
        1.5,
        Math.max(0.05, TPCDS_WIDTH_MEDIAN * Math.exp(templates.normal(0, TPCDS_WIDTH_LOG_SD))),
      );
      const scanMs = TPCDS_SCAN_MIN_MS * Math.pow(TPCDS_SCAN_MAX_MS / TPCDS_SCAN_MIN_MS, templates.next());
      shape = tpcdsShape(`tpcds-${query.query}-${n}`, query, width * clusterScale, scanMs);
      phase = templates.next() * period;
    }
    for (let t = phase; t < arrivalsMs; t += period) {
      // Recurring jobs drift a little around their schedule (±5 % of the period).
      const submit = Math.min(arrivalsMs - 1, Math.max(0, t + (runsRng.next() - 0.5) * 0.1 * period));
      const durationScale = Math.exp(runsRng.normal(0, runNoise));
      runs.push({ shape, submitMs: windowStart + Math.round(submit), durationScale });
      offered += shape.taskMsTotal * durationScale * taskCores;
    }
  }
  const stream = jobStream(runs, { taskCores, taskJitter });
  return {
    ...stream,
    source,
    harvestableCoreHours: harvestable / 3_600_000,
    notes,
  };
}
