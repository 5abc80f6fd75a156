/**
 * Reader for the Alibaba cluster-trace-v2018 batch task table (the one-hour sample with DAG task names), and its
 * conversion into Harvest DAG jobs, so that the simulator and the demo can replay real job shapes.
 *
 * Format (no header, 7 columns): arrival_s,job_name,task_name,duration_s,plan_cpu,plan_mem,instance_num.
 * plan_cpu is in 1/100 core (50 = half a core); plan_mem is normalized (a share of a machine's memory, where 100 is a
 * whole machine). task_name encodes the DAG: `J25_16_18_24` is task 25 of type J depending on tasks 16, 18 and 24;
 * `task_<hash>` is an independent task.
 */
import { readFile } from "node:fs/promises";
import { validateDag } from "./dag-spec.js";
import type { DagLimits, DagSpec, VertexSpec } from "./dag-spec.js";
import { HarvestError } from "./errors.js";
import type { Resources } from "./resource.js";

/** One task (a vertex with `instances` instances) of a trace job. */
export interface AlibabaTask {
  /** The task's number for DAG-named tasks ("25" in J25_16_18_24), the whole name for independent tasks. */
  id: string;
  /** The name as written in the trace. */
  name: string;
  /** The letter prefix of DAG-named tasks (M, R, J, ...), "task" for independent tasks. */
  type: string;
  /** Ids of the tasks this one waits for (deduplicated, in trace order). */
  deps: string[];
  durationS: number;
  /** plan_cpu converted to thousandths of a core (plan_cpu 50 = 500). */
  cpuMilli: number;
  /** plan_mem as in the trace (normalized; 100 = a whole machine). */
  memNorm: number;
  instances: number;
}

/** One trace job: its tasks in trace order. */
export interface AlibabaJob {
  name: string;
  /** Seconds from the start of the trace window. */
  arrivalS: number;
  tasks: AlibabaTask[];
}

const COLUMNS = ["arrival_s", "job_name", "task_name", "duration_s", "plan_cpu", "plan_mem", "instance_num"];
const DAG_TASK_RE = /^([A-Za-z]+)(\d+)((?:_\d+)*)$/;

/** Reads a trace file; see `parseAlibabaTasks`. */
export async function readAlibabaJobs(path: string): Promise<AlibabaJob[]> {
  return parseAlibabaTasks(await readFile(path, "utf8"), path);
}

/**
 * Parses trace text into jobs, in order of each job's first line. Blank lines are skipped; anything else that is not a
 * well-formed row throws HarvestError("TRACE_MALFORMED") with `details.line` (1-based) and `details.field`.
 */
export function parseAlibabaTasks(text: string, source = "trace"): AlibabaJob[] {
  const jobs = new Map<string, AlibabaJob>();
  const taskLine = new Map<string, number>();
  const lines = text.split("\n");
  for (let i = 0; i < lines.length; i++) {
    const lineNo = i + 1;
    const line = lines[i]!.replace(/\r$/, "");
    if (line.trim() === "") continue;
    const cols = line.split(",");
    if (cols.length !== COLUMNS.length) {
      malformed(
        source,
        lineNo,
        "line",
        `has ${cols.length} columns, expected ${COLUMNS.length} (${COLUMNS.join(",")})`,
      );
    }
    const [arrivalText, jobName, taskName, durationText, cpuText, memText, instancesText] = cols as [
      string,
      string,
      string,
      string,
      string,
      string,
      string,
    ];
    const arrivalS = number(source, lineNo, "arrival_s", arrivalText);
    if (jobName.trim() === "") malformed(source, lineNo, "job_name", "is empty");
    const durationS = number(source, lineNo, "duration_s", durationText);
    const planCpu = number(source, lineNo, "plan_cpu", cpuText);
    const memNorm = number(source, lineNo, "plan_mem", memText);
    const instances = number(source, lineNo, "instance_num", instancesText);
    if (!Number.isInteger(instances) || instances < 1) {
      malformed(source, lineNo, "instance_num", `must be a whole number >= 1, got "${instancesText}"`);
    }
    const task = parseTaskName(source, lineNo, taskName);
    const job = jobs.get(jobName) ?? { name: jobName, arrivalS, tasks: [] };
    jobs.set(jobName, job);
    // The trace gives every row of a job the same arrival; keep the earliest should a file disagree.
    job.arrivalS = Math.min(job.arrivalS, arrivalS);
    const key = `${jobName}\u0000${task.id}`;
    const firstLine = taskLine.get(key);
    if (firstLine !== undefined) {
      malformed(source, lineNo, "task_name", `repeats task ${task.id} of job ${jobName} (first on line ${firstLine})`);
    }
    taskLine.set(key, lineNo);
    job.tasks.push({ ...task, durationS, cpuMilli: Math.round(planCpu * 10), memNorm, instances });
  }
  return [...jobs.values()];
}

/** How a trace job becomes a DAG job. */
export interface AlibabaDagOptions {
  /**
   * The argv of a task, given the task and its scaled duration.
   * @default cpu-work burning `durationS` CPU seconds: ["node", "${HARVEST_HOME}/dist/examples/tasks/cpu-work.js", "--seconds", S]
   */
  command?: (task: AlibabaTask, durationS: number) => string[];
  /** Caps each vertex's parallelism (instances can reach 25,152). @default 10000 */
  maxParallelism?: number;
  /** Multiplies every duration (e.g. 0.01 to replay an hour in under a minute). @default 1 */
  durationScale?: number;
  /** Memory of a whole machine in MB: plan_mem 100 maps to this. @default 65536 */
  machineMemoryMb?: number;
  /** A vertex never asks for less memory than this. @default 64 */
  minMemoryMb?: number;
  /** When set, resources are clamped to it so every task fits on a node. @default unclamped */
  maxResource?: Resources;
  /** Extra environment for every vertex. @default {} */
  env?: Record<string, string>;
}

/**
 * Converts a trace job to a validated DagSpec: one vertex per task (parallelism = min(instances, maxParallelism)), a
 * scatter-gather edge from each dependency. A dependency on a task the job does not have throws TRACE_MALFORMED; a
 * cyclic job throws DAG_CYCLE (the sample has neither).
 */
export function alibabaJobToDag(job: AlibabaJob, options: AlibabaDagOptions = {}): DagSpec {
  const maxParallelism = options.maxParallelism ?? 10_000;
  const durationScale = options.durationScale ?? 1;
  const machineMemoryMb = options.machineMemoryMb ?? 65_536;
  const minMemoryMb = options.minMemoryMb ?? 64;
  const command = options.command ?? defaultCommand;
  const vertexNameById = new Map(job.tasks.map((t) => [t.id, alibabaVertexName(t)]));

  const vertices: VertexSpec[] = job.tasks.map((task) => {
    let resources: Resources = {
      vcoresMilli: Math.max(1, task.cpuMilli),
      memoryMb: Math.max(minMemoryMb, Math.round((task.memNorm / 100) * machineMemoryMb)),
    };
    if (options.maxResource) {
      resources = {
        vcoresMilli: Math.min(resources.vcoresMilli, options.maxResource.vcoresMilli),
        memoryMb: Math.min(resources.memoryMb, options.maxResource.memoryMb),
      };
    }
    return {
      name: vertexNameById.get(task.id)!,
      parallelism: Math.min(task.instances, maxParallelism),
      // Millisecond precision, so 12 s scaled by 0.1 is passed as 1.2 and not 1.2000000000000002.
      command: command(task, Math.round(task.durationS * durationScale * 1000) / 1000),
      resources,
      env: { ...(options.env ?? {}) },
    };
  });
  const edges = job.tasks.flatMap((task) =>
    task.deps.map((dep) => {
      const from = vertexNameById.get(dep);
      if (from === undefined) {
        throw new HarvestError(
          "TRACE_MALFORMED",
          `job ${job.name}: task ${task.name} depends on task ${dep}, which the job does not have`,
          { details: { job: job.name, task: task.name, field: "task_name" } },
        );
      }
      return { from, to: vertexNameById.get(task.id)!, type: "scatter-gather" as const };
    }),
  );
  const limits: DagLimits = { maxParallelism };
  return validateDag({ name: job.name, vertices, edges }, limits);
}

/**
 * The vertex name of a trace task: type and id for DAG-named tasks ("J25"), and for independent tasks the name with
 * its base64 hash made path-safe ("+" to "-", "/" to "_", "=" padding dropped), which keeps names distinct.
 */
export function alibabaVertexName(task: AlibabaTask): string {
  if (task.type !== "task") return `${task.type}${task.id}`;
  return task.name.replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "").slice(0, 64);
}

function defaultCommand(_task: AlibabaTask, durationS: number): string[] {
  return ["node", "${HARVEST_HOME}/dist/examples/tasks/cpu-work.js", "--seconds", String(durationS)];
}

function parseTaskName(
  source: string,
  lineNo: number,
  name: string,
): Pick<AlibabaTask, "id" | "name" | "type" | "deps"> {
  if (name.startsWith("task_") && name.length > "task_".length) return { id: name, name, type: "task", deps: [] };
  const m = DAG_TASK_RE.exec(name);
  if (!m) {
    malformed(
      source,
      lineNo,
      "task_name",
      `"${name}" is neither <Type><id>[_<dep>...] (e.g. J25_16_18) nor task_<hash>`,
    );
  }
  // The trace truncates long task names, so the last dependency may be cut short and repeat an earlier one
  // (4 names in the sample, e.g. R28_1_2_..._18_1); repeats are dropped rather than turned into duplicate edges.
  const deps = (m[3] ?? "").split("_").filter((d) => d !== "");
  // Ids are compared as numbers written without leading zeros, so "M07" and a dependency "7" meet.
  const id = String(Number(m[2]));
  return { id, name, type: m[1]!, deps: [...new Set(deps.map((d) => String(Number(d))))] };
}

function number(source: string, lineNo: number, field: string, text: string): number {
  const value = text.trim() === "" ? NaN : Number(text);
  if (!Number.isFinite(value) || value < 0) {
    malformed(source, lineNo, field, `must be a non-negative number, got "${text}"`);
  }
  return value;
}

function malformed(source: string, lineNo: number, field: string, problem: string): never {
  throw new HarvestError(
    "TRACE_MALFORMED",
    `${source}:${lineNo}: ${field} ${problem}; fix or remove that line (format: ${COLUMNS.join(",")})`,
    { details: { line: String(lineNo), field, source } },
  );
}
