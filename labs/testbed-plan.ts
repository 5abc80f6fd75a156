/**
 * What `harvest sim validate` runs, decided before anything starts, so that both policies and the simulator see the
 * same thing: each server's primary-tenant trace (the history the resource manager learns from, then the part the
 * node manager replays at a speed-up), and the schedule of recurring DAG jobs whose tasks only hold their containers.
 * Pure but for reading trace files; seeded, so the same options give the same plan.
 */
import { HarvestError } from "../common/errors.js";
import { SeededRng, shuffle } from "../common/rng.js";
import { DEMO_STEP_SEC } from "../common/trace-gen.js";
import type { UtilizationPattern } from "../common/trace-gen.js";
import type { UtilizationSeries } from "../common/trace-io.js";
import { tenantFeatures } from "../resourcemanager/index.js";
import { generateCluster } from "../sim/cluster-gen.js";
import { loadRealTemplates, readTracesReporting, templateCycle } from "../sim/real-traces.js";

/** Where the primaries' utilization comes from: ../shared/data, the project's generator, or the user's files. */
export type TestbedTraceSource = "real" | "generated" | "files";

/** What to plan. `resolvePlanOptions` fills the defaults and validates. */
export interface TestbedPlanOptions {
  /** Servers (one node manager each, each with its own primary tenant). @default 8 */
  servers: number;
  /** Cores each server offers. @default 4 */
  vcores: number;
  /** Memory each server offers, MB. @default 4096 */
  memoryMb: number;
  /** Length of one policy's run on the testbed, minutes: jobs arrive in the first `submitShare` of it. @default 4 */
  minutes: number;
  /** Share of the run during which jobs are submitted; the rest lets them finish. @default 0.75 */
  submitShare: number;
  /** Trace time per testbed time: at 120 a 5-minute trace step lasts 2.5 s. @default 120 */
  speedup: number;
  /** Seeds the trace choice, the job stream, the resource manager's draws and the simulator's. @default 1 */
  seed: number;
  /** "auto": real traces from ../shared/data when present, else generated ones; or a list of trace files. @default "auto" */
  traces: "auto" | "real" | "generated" | readonly string[];
  /** Days of primary history registered before the replay (the classifier's window). @default 12 */
  historyDays: number;
  /** Offered work as a share of the harvestable core-time while jobs arrive. @default 0.4 */
  load: number;
  /** Fraction of each server's cores kept free for its primary (resource manager and node manager). @default 0.1 */
  reserveFraction: number;
  /** Cores each task asks for. @default 1 */
  taskVcores: number;
  /** Memory each task asks for, MB. @default 128 */
  taskMemoryMb: number;
  /** Told about choices worth knowing (fallbacks, trace quirks). @default ignore */
  onNote?: (message: string) => void;
}

/** One server of the testbed and its primary tenant's utilization. */
export interface PlannedServer {
  /** "server-3", as `startCluster` names it. */
  readonly nodeId: string;
  /** "tenant-3": every server has a primary tenant of its own. */
  readonly tenant: string;
  /** Where its trace comes from, e.g. "bitbrains/44 from day 14.3". */
  readonly label: string;
  /** What the classifier calls its history (for the report; the resource manager and simulator decide for real). */
  readonly pattern: UtilizationPattern;
  /** CPU % per trace step before the replay: registered with the resource manager as the tenant's history. */
  readonly history: Float32Array;
  /** CPU % per trace step from the end of the history on: what its node manager replays. */
  readonly replay: Float32Array;
}

/** A vertex of a planned job: `tasks` tasks that each hold a container for `holdMs` (before the run's scale). */
export interface PlannedVertex {
  readonly name: string;
  readonly tasks: number;
  readonly holdMs: number;
  /** The vertices it reads (scatter-gather). */
  readonly inputs: readonly string[];
}

/** One run of a recurring job. */
export interface PlannedJob {
  /** The recurring job's name; its runs share the job-length history Algorithm 1 types jobs by. */
  readonly name: string;
  /** Which run of `name` (0, 1, ...). */
  readonly run: number;
  /** When to submit it, testbed ms after the run's start. */
  readonly submitOffsetMs: number;
  /** This run's tasks hold `holdMs` x this. */
  readonly durationScale: number;
  readonly vertices: readonly PlannedVertex[];
}

/** Everything a validation run does, for both policies and the simulator. */
export interface TestbedPlan {
  readonly options: Readonly<Omit<TestbedPlanOptions, "onNote">>;
  readonly source: TestbedTraceSource;
  /** The traces' step, seconds (5 minutes for the real and generated ones). */
  readonly stepSec: number;
  readonly servers: readonly PlannedServer[];
  /** Ascending by submission time. */
  readonly jobs: readonly PlannedJob[];
  /** Testbed ms of one policy's run, of its submission window, and the hard deadline for the last job. */
  readonly runMs: number;
  readonly submitWindowMs: number;
  readonly deadlineMs: number;
  /** Work the jobs offer (task-ms at one task per core) and the harvestable core-ms while they arrive. */
  readonly offeredCoreMs: number;
  readonly harvestableCoreMs: number;
}

/** The defaults of every plan option. */
export const DEFAULT_PLAN_OPTIONS: Readonly<Omit<TestbedPlanOptions, "onNote">> = Object.freeze({
  servers: 8,
  vcores: 4,
  memoryMb: 4096,
  minutes: 4,
  submitShare: 0.75,
  speedup: 120,
  seed: 1,
  traces: "auto",
  historyDays: 12,
  load: 0.4,
  reserveFraction: 0.1,
  taskVcores: 1,
  taskMemoryMb: 128,
});

/** The deadline for a run's last job, as a multiple of the run's length. */
const DEADLINE_FACTOR = 1.5;
/** Replayed trace beyond the deadline: covers the cluster's start-up and the tenants' registration. */
const REPLAY_MARGIN_MS = 120_000;

function invalid(field: string, why: string): never {
  throw new HarvestError("INVALID_ARGUMENT", `validation option ${field} ${why}`, { details: { field } });
}

/** Fills defaults into `options` and validates every field, naming the offending one (INVALID_ARGUMENT). */
export function resolvePlanOptions(options: Partial<TestbedPlanOptions> = {}): Omit<TestbedPlanOptions, "onNote"> {
  const o = { ...DEFAULT_PLAN_OPTIONS };
  for (const [k, v] of Object.entries(options))
    if (v !== undefined && k !== "onNote") (o as Record<string, unknown>)[k] = v;
  const int = (v: number, min: number): boolean => Number.isSafeInteger(v) && v >= min;
  if (!int(o.servers, 1)) invalid("servers", `must be an integer >= 1 (got ${o.servers})`);
  if (!int(o.vcores, 1)) invalid("vcores", `must be an integer >= 1 (got ${o.vcores})`);
  if (!int(o.memoryMb, 256)) invalid("memoryMb", `must be an integer >= 256 (got ${o.memoryMb})`);
  if (!(o.minutes > 0 && o.minutes <= 600)) invalid("minutes", `must be in (0, 600] (got ${o.minutes})`);
  if (!(o.submitShare > 0 && o.submitShare <= 1)) invalid("submitShare", `must be in (0, 1] (got ${o.submitShare})`);
  if (!(o.speedup >= 1 && Number.isFinite(o.speedup))) invalid("speedup", `must be >= 1 (got ${o.speedup})`);
  if (!(Number.isSafeInteger(o.seed) && o.seed >= 0)) invalid("seed", `must be an integer >= 0 (got ${o.seed})`);
  if (!(o.historyDays >= 1 && o.historyDays <= 60)) invalid("historyDays", `must be in [1, 60] (got ${o.historyDays})`);
  if (!(o.load > 0 && o.load <= 2)) invalid("load", `must be in (0, 2] (got ${o.load})`);
  if (!(o.reserveFraction >= 0 && o.reserveFraction < 1))
    invalid("reserveFraction", `must be in [0, 1) (got ${o.reserveFraction})`);
  if (!(o.taskVcores > 0 && o.taskVcores <= o.vcores * (1 - o.reserveFraction)))
    invalid("taskVcores", `must be > 0 and fit beside the reserve of a ${o.vcores}-core server (got ${o.taskVcores})`);
  if (!int(o.taskMemoryMb, 16)) invalid("taskMemoryMb", `must be an integer >= 16 (got ${o.taskMemoryMb})`);
  if (typeof o.traces !== "string" && o.traces.length === 0) invalid("traces", "must name at least one file");
  return o;
}

/**
 * Plans a validation run: one trace per server (history, then replay) and the job schedule. Real traces are spread
 * over the patterns the classifier finds in them (unpredictable, periodic, constant in turn, each list shuffled by the
 * seed), each replayed from a random point with `historyDays` before it; generated traces are the servers of a
 * `generateCluster` cluster; given files are used in order, each from a random point. Throws CONFIG_INVALID when real
 * traces are asked for and absent, TRACE_MALFORMED when no given file is readable.
 */
export async function planValidation(options: Partial<TestbedPlanOptions> = {}): Promise<TestbedPlan> {
  const o = resolvePlanOptions(options);
  const note = options.onNote ?? (() => undefined);
  const runMs = Math.round(o.minutes * 60_000);
  const submitWindowMs = Math.round(runMs * o.submitShare);
  const deadlineMs = Math.round(runMs * DEADLINE_FACTOR);
  const rng = new SeededRng(mix(o.seed, 0x7e57));
  const { source, stepSec, servers } = await planServers(o, deadlineMs, rng, note);
  const stepTestbedMs = (stepSec * 1000) / o.speedup;
  const harvestableCoreMs = harvestable(servers, o, submitWindowMs, stepTestbedMs);
  const { jobs, offeredCoreMs } = planJobs(o, submitWindowMs, harvestableCoreMs, new SeededRng(mix(o.seed, 0x10b5)));
  return {
    options: o,
    source,
    stepSec,
    servers,
    jobs,
    runMs,
    submitWindowMs,
    deadlineMs,
    offeredCoreMs,
    harvestableCoreMs,
  };
}

// ------------------------------------------------------------------------------------------------ traces

/** A series on a regular grid of `stepSec`, with what the classifier calls it. */
interface GridTrace {
  label: string;
  cpuPct: Float32Array;
  pattern: UtilizationPattern;
}

async function planServers(
  o: Omit<TestbedPlanOptions, "onNote">,
  deadlineMs: number,
  rng: SeededRng,
  note: (message: string) => void,
): Promise<{ source: TestbedTraceSource; stepSec: number; servers: PlannedServer[] }> {
  let source: TestbedTraceSource;
  let traces: GridTrace[];
  let stepSec = DEMO_STEP_SEC;
  if (typeof o.traces !== "string") {
    source = "files";
    const { traces: read } = await readTracesReporting(o.traces, {}, (m) => note(`trace ${m}`));
    stepSec = read[0]!.series.stepSec;
    traces = read.map((t) => gridTrace(t.file, t.series, stepSec));
  } else if (o.traces === "generated") {
    source = "generated";
    traces = generatedTraces(o, deadlineMs);
  } else {
    try {
      const templates = await loadRealTemplates(undefined, { warn: (m) => note(`real traces: ${m}`) });
      source = "real";
      traces = templates.map((t) => gridTrace(t.name, t.series, stepSec));
    } catch (err) {
      if (o.traces === "real") throw err;
      note(`no real traces (${err instanceof Error ? err.message : String(err)}); replaying generated ones`);
      source = "generated";
      traces = generatedTraces(o, deadlineMs);
    }
  }
  const historySteps = Math.round((o.historyDays * 86_400) / stepSec);
  // The replay must outlast the deadline (plus start-up) at the speed-up; a longer file is cut, a shorter one wraps.
  const replaySteps = Math.ceil(((deadlineMs + REPLAY_MARGIN_MS) * o.speedup) / 1000 / stepSec) + 1;
  const order = source === "real" ? byPattern(traces, rng) : traces;
  const servers: PlannedServer[] = [];
  for (let i = 0; i < o.servers; i++) {
    const t = order[i % order.length]!;
    const n = t.cpuPct.length;
    // Generated series were made for exactly this: history first, then the replay. Others start at a random point
    // with a whole history before it (anywhere, wrapping, when the file is too short for both).
    const from =
      source === "generated"
        ? historySteps
        : n >= historySteps + replaySteps
          ? historySteps + rng.int(n - historySteps - replaySteps + 1)
          : rng.int(n);
    if (source !== "generated" && n < historySteps + replaySteps)
      note(`${t.label} holds ${n} steps, fewer than ${historySteps} of history + ${replaySteps} of replay: it wraps`);
    const history = circular(t.cpuPct, from - historySteps, historySteps);
    servers.push({
      nodeId: `server-${i + 1}`,
      tenant: `tenant-${i + 1}`,
      label: source === "generated" ? t.label : `${t.label} from day ${((from * stepSec) / 86_400).toFixed(1)}`,
      pattern: patternOfHistory(history, stepSec),
      history,
      replay: circular(t.cpuPct, from, replaySteps),
    });
  }
  return { source, stepSec, servers };
}

/** `count` values of `values` from `from` on, wrapping around at both ends. */
function circular(values: Float32Array, from: number, count: number): Float32Array {
  const n = values.length;
  const out = new Float32Array(count);
  for (let k = 0; k < count; k++) out[k] = values[(((from + k) % n) + n) % n]!;
  return out;
}

function gridTrace(label: string, series: UtilizationSeries, stepSec: number): GridTrace {
  const cpuPct = templateCycle(series, stepSec * 1000);
  return { label, cpuPct, pattern: patternOfHistory(cpuPct, stepSec) };
}

function patternOfHistory(cpuPct: Float32Array, stepSec: number): UtilizationPattern {
  const timesMs = Array.from(cpuPct, (_, k) => k * stepSec * 1000);
  return tenantFeatures({ name: "plan", stepSec, startMs: 0, timesMs, cpuPct: Array.from(cpuPct) }).pattern;
}

/**
 * The real traces in the order servers get them: unpredictable, periodic and constant in turn (each list shuffled by
 * the seed), so that a few servers already carry every pattern; a list that runs out is skipped.
 */
function byPattern(traces: readonly GridTrace[], rng: SeededRng): GridTrace[] {
  const lists = (["unpredictable", "periodic", "constant"] as const).map((p) =>
    shuffle(
      traces.filter((t) => t.pattern === p),
      rng,
    ),
  );
  const out: GridTrace[] = [];
  for (let round = 0; out.length < traces.length; round++)
    for (const list of lists) if (round < list.length) out.push(list[round]!);
  return out;
}

/** The servers of a generated cluster (`generateCluster`, medium utilization): each server's own series. */
function generatedTraces(o: Omit<TestbedPlanOptions, "onNote">, deadlineMs: number): GridTrace[] {
  const replayDays = ((deadlineMs + REPLAY_MARGIN_MS) * o.speedup) / 86_400_000;
  const cluster = generateCluster({
    servers: o.servers,
    historyDays: o.historyDays,
    days: Math.ceil(replayDays) + 1,
    slotMs: DEMO_STEP_SEC * 1000,
    coresPerServer: o.vcores,
    seed: o.seed,
  });
  return cluster.servers.map((s) => {
    const t = cluster.tenants[s.tenant]!;
    const cpuPct = t.utilization.map((v) => Math.min(100, Math.max(0, v + s.offsetPct)));
    return { label: `generated ${t.pattern} (${t.id})`, cpuPct, pattern: t.pattern };
  });
}

/** Harvestable core-ms (capacity - primary - reserve, floored at 0) over the first `windowMs` of every replay. */
function harvestable(
  servers: readonly PlannedServer[],
  o: Omit<TestbedPlanOptions, "onNote">,
  windowMs: number,
  stepTestbedMs: number,
): number {
  const reserve = Math.ceil(o.vcores * 1000 * o.reserveFraction) / 1000;
  let total = 0;
  for (const s of servers)
    for (let k = 0; k * stepTestbedMs < windowMs; k++) {
      const ms = Math.min(stepTestbedMs, windowMs - k * stepTestbedMs);
      total += Math.max(0, o.vcores * (1 - s.replay[k]! / 100) - reserve) * ms;
    }
  return total;
}

// ------------------------------------------------------------------------------------------------ jobs

/** Recurring jobs per server (at least 4): "several job names". */
const NAMES_PER_SERVER = 0.75;
const MIN_NAMES = 4;
/** Every recurring job runs at least this often, so that its history (and so its type) exists. */
const MIN_RUNS = 3;
const MAX_RUNS = 40;
/** Task hold times: log-uniform between these (s); the longest is capped at a tenth of the run. */
const MIN_HOLD_S = 2;
const MAX_HOLD_S = 24;
/** Log-normal sigma of a run's duration scale: one run of a job differs a little from the next. */
const RUN_NOISE = 0.1;

/**
 * The job schedule: `max(4, 0.75 x servers)` recurring jobs, each a DAG of 1 to 3 vertices (a map; map -> reduce; map
 * -> join -> final) of 2 to 8 tasks per vertex that hold their containers for 2 to 24 s (log-uniform per job; reduce
 * tasks 0.6x, final 0.3x), each job's runs spread evenly over the submission window from a random phase so that every
 * job offers an equal share of `load` x the harvestable core-time (at least 3 runs each).
 */
function planJobs(
  o: Omit<TestbedPlanOptions, "onNote">,
  submitWindowMs: number,
  harvestableCoreMs: number,
  rng: SeededRng,
): { jobs: PlannedJob[]; offeredCoreMs: number } {
  const names = Math.max(MIN_NAMES, Math.round(o.servers * NAMES_PER_SERVER));
  const maxHoldS = Math.max(MIN_HOLD_S * 2, Math.min(MAX_HOLD_S, submitWindowMs / 1000 / 10));
  const shareCoreMs = (o.load * harvestableCoreMs) / names;
  const jobs: PlannedJob[] = [];
  let offeredCoreMs = 0;
  for (let n = 0; n < names; n++) {
    const holdMs = Math.round(1000 * MIN_HOLD_S * Math.pow(maxHoldS / MIN_HOLD_S, rng.next()));
    const maps = 2 + rng.int(7);
    const kind = rng.int(3);
    const vertices: PlannedVertex[] =
      kind === 0
        ? [{ name: "map", tasks: maps, holdMs, inputs: [] }]
        : [
            { name: "map", tasks: maps, holdMs, inputs: [] },
            { name: "reduce", tasks: 1 + rng.int(3), holdMs: Math.round(holdMs * 0.6), inputs: ["map"] },
            ...(kind === 2 ? [{ name: "final", tasks: 1, holdMs: Math.round(holdMs * 0.3), inputs: ["reduce"] }] : []),
          ];
    const workMs = vertices.reduce((a, v) => a + v.tasks * v.holdMs * o.taskVcores, 0);
    const runs = Math.min(MAX_RUNS, Math.max(MIN_RUNS, Math.round(shareCoreMs / workMs)));
    const periodMs = submitWindowMs / runs;
    const phaseMs = rng.next() * periodMs;
    const name = `recurring-${n + 1}-${vertices.map((v) => v.name).join("-")}`;
    for (let r = 0; r < runs; r++) {
      const durationScale = Math.exp(rng.normal(0, RUN_NOISE));
      jobs.push({ name, run: r, submitOffsetMs: Math.round(phaseMs + r * periodMs), durationScale, vertices });
      offeredCoreMs += workMs * durationScale;
    }
  }
  jobs.sort((a, b) => a.submitOffsetMs - b.submitOffsetMs || a.name.localeCompare(b.name));
  return { jobs, offeredCoreMs };
}

/** The DAG file of a planned job run: every task holds its container (examples/tasks/hold.ts) for its scaled time. */
export function dagOf(job: PlannedJob, o: Pick<TestbedPlanOptions, "taskVcores" | "taskMemoryMb">): string {
  return JSON.stringify({
    name: job.name,
    vertices: job.vertices.map((v) => ({
      name: v.name,
      parallelism: v.tasks,
      command: [
        "node",
        "${HARVEST_HOME}/dist/examples/tasks/hold.js",
        "--seconds",
        holdSeconds(v.holdMs, job.durationScale),
      ],
      resources: { vcores: o.taskVcores, memoryMb: o.taskMemoryMb },
    })),
    edges: job.vertices.flatMap((v) => v.inputs.map((from) => ({ from, to: v.name, type: "scatter-gather" }))),
  });
}

/** A task's hold time in seconds, to the millisecond (what the simulator's duration is taken from too). */
export function holdSeconds(holdMs: number, durationScale: number): string {
  return ((holdMs * durationScale) / 1000).toFixed(3);
}

/** A 32-bit mix of a seed and a purpose, so that each random stream of the plan is independent. */
function mix(seed: number, purpose: number): number {
  let h = (seed ^ Math.imul(purpose, 0x9e3779b9)) >>> 0;
  h = Math.imul(h ^ (h >>> 16), 0x85ebca6b) >>> 0;
  h = Math.imul(h ^ (h >>> 13), 0xc2b2ae35) >>> 0;
  return (h ^ (h >>> 16)) >>> 0;
}
