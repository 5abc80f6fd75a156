/**
 * The DAG job spec: the JSON file a user submits, its validation (the resource manager at submit, the job manager on
 * start, the CLI before sending), graph helpers, the max-concurrency estimate of seeds/004 section 4.1, and the
 * environment contract between the job manager and the task programs it starts.
 *
 * The file format:
 *   { "name": "wordcount", "priority": 0,
 *     "vertices": [ { "name": "map", "parallelism": 4, "command": ["node", "..."],
 *                     "resources": { "vcores": 0.5, "memoryMb": 256 }, "env": { "K": "V" } } ],
 *     "edges": [ { "from": "map", "to": "reduce", "type": "scatter-gather" } ] }
 * `env` and `edges` are optional. `resources.vcores` may be fractional; `resources.vcoresMilli` (an integer) is
 * accepted instead, so that a parsed DagSpec serialized with JSON.stringify parses again. Unknown fields are rejected so
 * that a misspelt optional field ("envs") is reported rather than silently ignored.
 */
import { HarvestError } from "./errors.js";
import { expectObject, fail, invalid, rejectUnknownFields, show } from "./dag-fields.js";
import { parseLocalResources } from "./dag-resources.js";
import type { LocalResourceSpec } from "./dag-resources.js";
import type { Resources } from "./resource.js";
import { parseVertexInput, splitDrivenVertices } from "./dag-input.js";
import type { VertexInputSpec } from "./dag-input.js";
import { EDGE_TYPES, TASK_ENV } from "./task-contract.js";
import type { EdgeType, TaskInput, TaskOutput } from "./task-contract.js";

export { EDGE_TYPES, partitionFileName, TASK_ENV } from "./task-contract.js";
export type { EdgeType, TaskInput, TaskOutput } from "./task-contract.js";
export type { VertexInputSpec } from "./dag-input.js";
export { LOCAL_RESOURCE_TYPES, RESERVED_WORKDIR_NAMES, RESOURCE_VISIBILITIES } from "./dag-resources.js";
export type { LocalResourceSpec, LocalResourceType, ResourceVisibility } from "./dag-resources.js";

/** A vertex: `parallelism` tasks, each a process running `command` in a container of `resources`. */
export interface VertexSpec {
  name: string;
  parallelism: number;
  /** argv; `${NAME}` is expanded by the node manager from the container env and "node" means its own Node binary. */
  command: string[];
  resources: Resources;
  env: Record<string, string>;
  /**
   * Files, directories and archives of the DFS the node manager localizes into each task's directory (YARN's
   * LocalResources). Absent: none.
   */
  localResources?: LocalResourceSpec[];
  /**
   * The DFS files the vertex reads, one task per split (common/dag-input.ts): its `parallelism` is 0 in the file and
   * until the job manager has computed the splits.
   */
  input?: VertexInputSpec;
}

/** A data dependency: every task of `to` starts after every task of `from` has succeeded. */
export interface EdgeSpec {
  from: string;
  to: string;
  type: EdgeType;
}

/** A validated DAG job. */
export interface DagSpec {
  name: string;
  /**
   * How critical the job is, 0 (the default) to 100: under a power cap the node's capping agent raises the most
   * critical containers first and kills the least critical first (seeds/000 and seeds/001: per-VM priorities).
   */
  priority?: number;
  vertices: VertexSpec[];
  edges: EdgeSpec[];
}

/** Bounds a DAG must respect; the resource manager passes the largest container any node can hold. */
export interface DagLimits {
  /** @default 10000 */
  maxParallelism?: number;
  /** When set, a vertex asking for more than this on either dimension is rejected. @default unlimited */
  maxResource?: Resources;
}

/** Upper bound on a vertex's task count unless the caller sets another. */
export const DEFAULT_MAX_PARALLELISM = 10_000;

/** Vertex names become directory names on the node managers, so they are restricted to a path-safe alphabet. */
const VERTEX_NAME_RE = /^[A-Za-z0-9_.-]{1,64}$/;
const MAX_DAG_NAME_LENGTH = 256;
const ENV_NAME_RE = /^[A-Za-z_][A-Za-z0-9_]*$/;

const DAG_FIELDS = ["name", "priority", "vertices", "edges"];
/** Highest job priority. */
export const MAX_JOB_PRIORITY = 100;
const VERTEX_FIELDS = ["name", "parallelism", "command", "resources", "env", "localResources", "input"];
const RESOURCE_FIELDS = ["vcores", "vcoresMilli", "memoryMb"];
const EDGE_FIELDS = ["from", "to", "type"];

/** Parses and validates a DAG job file; throws a HarvestError (`DAG_*`) whose `details.field` is the offending path. */
export function parseDag(json: string, limits: DagLimits = {}): DagSpec {
  let value: unknown;
  try {
    value = JSON.parse(json);
  } catch (err) {
    // Located by a scan of our own, not read from the engine's message (whose wording is no contract).
    const position = locateJsonError(json);
    const { line, column } = lineAndColumn(json, position);
    const reason = err instanceof Error ? err.message : String(err);
    throw new HarvestError(
      "DAG_MALFORMED_JSON",
      `the DAG file is not valid JSON at line ${line}, column ${column} (position ${position}): ${reason}; ` +
        `fix the syntax there (a JSON linter shows it too)`,
      { details: { field: "$", position: String(position), line: String(line), column: String(column) }, cause: err },
    );
  }
  return validateDag(value, limits);
}

/**
 * Validates a DAG given as a value (a parsed file, or a DagSpec built in code, e.g. from a trace) and returns a fresh,
 * normalized DagSpec. Throws exactly what `parseDag` throws for the same content.
 */
export function validateDag(value: unknown, limits: DagLimits = {}): DagSpec {
  const maxParallelism = limits.maxParallelism ?? DEFAULT_MAX_PARALLELISM;
  const root = expectObject(value, "$", "the DAG file must be a JSON object with name, vertices and edges");
  rejectUnknownFields(root, DAG_FIELDS, "");

  const name = root["name"];
  if (typeof name !== "string" || name.trim() === "" || name.length > MAX_DAG_NAME_LENGTH) {
    invalid("name", `name must be a non-empty string of at most ${MAX_DAG_NAME_LENGTH} characters, got ${show(name)}`);
  }

  const priority = root["priority"];
  if (
    priority !== undefined &&
    !(typeof priority === "number" && Number.isInteger(priority) && priority >= 0 && priority <= MAX_JOB_PRIORITY)
  ) {
    invalid("priority", `priority must be an integer from 0 to ${MAX_JOB_PRIORITY}, got ${show(priority)}`);
  }

  const rawVertices = root["vertices"];
  if (!Array.isArray(rawVertices) || rawVertices.length === 0) {
    invalid("vertices", `vertices must be a non-empty array of vertex objects, got ${show(rawVertices)}`);
  }
  const vertices: VertexSpec[] = [];
  const indexByName = new Map<string, number>();
  rawVertices.forEach((raw: unknown, i: number) => {
    const vertex = parseVertex(raw, `vertices[${i}]`, maxParallelism, limits.maxResource);
    const earlier = indexByName.get(vertex.name);
    if (earlier !== undefined) {
      fail(
        "DAG_DUPLICATE_NAME",
        `vertices[${i}].name`,
        `vertex name "${vertex.name}" is used by vertices[${earlier}] and vertices[${i}]; give each vertex its own name`,
      );
    }
    indexByName.set(vertex.name, i);
    vertices.push(vertex);
  });

  const rawEdges = root["edges"] ?? [];
  if (!Array.isArray(rawEdges)) invalid("edges", `edges must be an array of edge objects, got ${show(rawEdges)}`);
  const edges: EdgeSpec[] = [];
  const edgeIndexByPair = new Map<string, number>();
  rawEdges.forEach((raw: unknown, i: number) => {
    const edge = parseEdge(raw, `edges[${i}]`, indexByName);
    const pair = `${edge.from}\u0000${edge.to}`;
    const earlier = edgeIndexByPair.get(pair);
    if (earlier !== undefined) {
      invalid(
        `edges[${i}]`,
        `edges[${i}] repeats edges[${earlier}] (${edge.from} -> ${edge.to}); keep one edge per pair of vertices`,
      );
    }
    edgeIndexByPair.set(pair, i);
    if (edge.type === "one-to-one") {
      // Task i of the consumer reads exactly task i of the producer, so both sides need the same task count.
      const from = vertices[indexByName.get(edge.from) ?? -1];
      const to = vertices[indexByName.get(edge.to) ?? -1];
      if (from && to && from.parallelism !== to.parallelism && from.parallelism !== 0 && to.parallelism !== 0) {
        fail(
          "DAG_ONE_TO_ONE_MISMATCH",
          `edges[${i}]`,
          `edges[${i}] is one-to-one but ${edge.from} has parallelism ${from.parallelism} and ${edge.to} has ` +
            `${to.parallelism}; make them equal or use a scatter-gather edge`,
        );
      }
    }
    edges.push(edge);
  });

  checkSplitParallelism(vertices, edges);
  const dag: DagSpec = { name: name.trim(), ...(priority !== undefined ? { priority } : {}), vertices, edges };
  const cycle = findCycle(dag);
  if (cycle) {
    const names = cycle.map((edgeIndex) => edges[edgeIndex]?.from ?? "?");
    const path = [...names, names[0]].join(" -> ");
    const closing = cycle[cycle.length - 1] ?? 0;
    throw new HarvestError(
      "DAG_CYCLE",
      `the edges form a cycle ${path}; a DAG job cannot wait on itself, remove one of these edges ` +
        `(edges[${closing}] closes it)`,
      { details: { field: `edges[${closing}]`, cycle: path, vertices: names.join(",") } },
    );
  }
  return dag;
}

/**
 * A vertex may leave `parallelism` out only when its input's splits set it (its own, or that of a vertex it is joined
 * to by one-to-one edges); such a vertex without an input of its own may not set it either.
 */
function checkSplitParallelism(vertices: VertexSpec[], edges: EdgeSpec[]): void {
  const driven = splitDrivenVertices(vertices, edges);
  vertices.forEach((v, i) => {
    if (v.parallelism === 0 && !driven.has(v.name))
      fail(
        "DAG_BAD_PARALLELISM",
        `vertices[${i}].parallelism`,
        `vertices[${i}].parallelism must be a whole number of tasks from 1, got none or 0; ` +
          `set it to the number of tasks vertex "${v.name}" runs, or give the vertex an input whose splits set it`,
      );
    if (v.parallelism !== 0 && driven.has(v.name))
      invalid(
        `vertices[${i}].parallelism`,
        `vertices[${i}] is joined one-to-one to a vertex whose input's splits set its parallelism; remove its ` +
          "parallelism",
      );
  });
}

/** The DAG file text (resources as fractional `vcores`), which `parseDag` reads back to an equal DagSpec. */
export function dagToJson(dag: DagSpec, indent = 2): string {
  const file = {
    name: dag.name,
    ...(dag.priority !== undefined ? { priority: dag.priority } : {}),
    vertices: dag.vertices.map((v) => ({
      name: v.name,
      ...(v.parallelism !== 0 ? { parallelism: v.parallelism } : {}),
      ...(v.input ? { input: v.input } : {}),
      command: v.command,
      resources: { vcores: v.resources.vcoresMilli / 1000, memoryMb: v.resources.memoryMb },
      ...(Object.keys(v.env).length > 0 ? { env: v.env } : {}),
    })),
    edges: dag.edges,
  };
  return JSON.stringify(file, null, indent);
}

/** Vertex names in an order where every vertex comes after all its inputs (ties keep declaration order). */
export function topologicalOrder(dag: DagSpec): string[] {
  return vertexLayers(dag).flat();
}

/** The edges into `vertex`, in declaration order (their `from` are its inputs). */
export function upstreamOf(dag: DagSpec, vertex: string): EdgeSpec[] {
  requireVertex(dag, vertex);
  return dag.edges.filter((e) => e.to === vertex);
}

/** The edges out of `vertex`, in declaration order (their `to` consume its output). */
export function downstreamOf(dag: DagSpec, vertex: string): EdgeSpec[] {
  requireVertex(dag, vertex);
  return dag.edges.filter((e) => e.from === vertex);
}

/** The vertex named `name`, or a DAG_UNKNOWN_VERTEX error. */
export function vertexByName(dag: DagSpec, name: string): VertexSpec {
  return requireVertex(dag, name);
}

/**
 * Breadth-first (Kahn) layers: layer 0 holds the sources and a vertex sits one layer after its deepest input, i.e. its
 * layer is the longest path from any source. Within a layer, vertices keep their declaration order.
 */
export function vertexLayers(dag: DagSpec): string[][] {
  const inDegree = new Map<string, number>(dag.vertices.map((v) => [v.name, 0]));
  const outgoing = new Map<string, string[]>(dag.vertices.map((v) => [v.name, []]));
  for (const e of dag.edges) {
    inDegree.set(e.to, (inDegree.get(e.to) ?? 0) + 1);
    outgoing.get(e.from)?.push(e.to);
  }
  const declared = new Map(dag.vertices.map((v, i) => [v.name, i]));
  const layers: string[][] = [];
  let current = dag.vertices.filter((v) => inDegree.get(v.name) === 0).map((v) => v.name);
  let placed = 0;
  while (current.length > 0) {
    layers.push(current);
    placed += current.length;
    const next: string[] = [];
    for (const name of current) {
      for (const to of outgoing.get(name) ?? []) {
        const left = (inDegree.get(to) ?? 0) - 1;
        inDegree.set(to, left);
        // A vertex joins the layer after its last input is placed, which is the longest path from a source.
        if (left === 0) next.push(to);
      }
    }
    current = next.sort((a, b) => (declared.get(a) ?? 0) - (declared.get(b) ?? 0));
  }
  if (placed !== dag.vertices.length) {
    const stuck = dag.vertices.filter((v) => (inDegree.get(v.name) ?? 0) > 0).map((v) => v.name);
    throw new HarvestError("DAG_CYCLE", `the DAG has a cycle through ${stuck.join(", ")}; validate it with parseDag`, {
      details: { field: "edges", vertices: stuck.join(",") },
    });
  }
  return layers;
}

/**
 * The job's maximum number of concurrent containers, estimated by a breadth-first traversal of the DAG
 * (seeds/004, section 4.1, "Max amount of concurrent resources from DAG" in Algorithm 1, line 4).
 *
 * The paper does not spell the traversal out. Our reading: group vertices into Kahn layers (`vertexLayers`: a vertex's
 * layer is its longest path from a source), sum the parallelism of each layer and take the largest sum. The vertices of
 * one layer can all run at once, because each starts as soon as its inputs are done and none of them feeds another;
 * vertices of different layers are assumed not to overlap (no slow start). For TPC-DS query 19 (the paper's Figure 7)
 * this gives the paper's 469: the big store_sales mapper alone in its layer.
 */
export function maxConcurrency(dag: DagSpec): number {
  const parallelism = new Map(dag.vertices.map((v) => [v.name, v.parallelism]));
  let best = 0;
  for (const layer of vertexLayers(dag)) {
    const sum = layer.reduce((acc, name) => acc + (parallelism.get(name) ?? 0), 0);
    best = Math.max(best, sum);
  }
  return best;
}

/** Total number of tasks over all vertices. */
export function totalTasks(dag: DagSpec): number {
  return dag.vertices.reduce((acc, v) => acc + v.parallelism, 0);
}

// ---- The task environment (common/task-contract.ts): the inputs and outputs each task container is given. ----

/** The `HARVEST_INPUTS` entries of task `taskIndex` of `vertex`, given where each producer task left its outputs. */
export function taskInputs(
  dag: DagSpec,
  vertex: string,
  taskIndex: number,
  outputOf: (vertex: string, taskIndex: number) => string,
): TaskInput[] {
  return upstreamOf(dag, vertex).map((e) => {
    const producer = requireVertex(dag, e.from);
    const sources =
      e.type === "one-to-one"
        ? [outputOf(e.from, taskIndex)]
        : Array.from({ length: producer.parallelism }, (_, i) => outputOf(e.from, i));
    return { vertex: e.from, edgeType: e.type, sources };
  });
}

/** The `HARVEST_OUTPUTS` entries of any task of `vertex`. */
export function taskOutputs(dag: DagSpec, vertex: string): TaskOutput[] {
  return downstreamOf(dag, vertex).map((e) => ({
    vertex: e.to,
    edgeType: e.type,
    partitions: requireVertex(dag, e.to).parallelism,
  }));
}

// ---- Parsing helpers ----

function parseVertex(raw: unknown, at: string, maxParallelism: number, maxResource?: Resources): VertexSpec {
  const obj = expectObject(raw, at, `${at} must be an object with name, parallelism, command and resources`);
  rejectUnknownFields(obj, VERTEX_FIELDS, at);

  const name = obj["name"];
  if (typeof name !== "string") invalid(`${at}.name`, `${at}.name must be a string, got ${show(name)}`);
  if (!VERTEX_NAME_RE.test(name) || name === "." || name === "..") {
    invalid(
      `${at}.name`,
      `${at}.name ${JSON.stringify(name)} is not a safe vertex name; use 1 to 64 characters from ` +
        `A-Z a-z 0-9 _ . - (not "." or "..") because it becomes a directory name`,
    );
  }

  const input = parseVertexInput(obj["input"], `${at}.input`);
  // 0: set by the splits of its input, or of the input vertex it is joined to one-to-one (checked with the edges).
  const parallelism = obj["parallelism"] ?? 0;
  if (input && parallelism !== 0)
    invalid(
      `${at}.parallelism`,
      `${at}.parallelism is set by the splits of ${at}.input (one task per split); remove it, or set input.splitMb`,
    );
  if (typeof parallelism !== "number") {
    invalid(`${at}.parallelism`, `${at}.parallelism must be a number of tasks, got ${show(parallelism)}`);
  }
  if (!Number.isInteger(parallelism) || parallelism < 0 || parallelism > maxParallelism) {
    fail(
      "DAG_BAD_PARALLELISM",
      `${at}.parallelism`,
      `${at}.parallelism must be a whole number from 1 to ${maxParallelism}, got ${parallelism}; ` +
        `set it to the number of tasks vertex "${name}" runs`,
    );
  }

  const command = obj["command"];
  if (!Array.isArray(command) || command.length === 0) {
    invalid(`${at}.command`, `${at}.command must be a non-empty argv array of strings, got ${show(command)}`);
  }
  command.forEach((arg: unknown, i: number) => {
    if (typeof arg !== "string") {
      invalid(`${at}.command[${i}]`, `${at}.command[${i}] must be a string (argv entry), got ${show(arg)}`);
    }
  });
  if (command[0] === "") invalid(`${at}.command[0]`, `${at}.command[0] must name the program to run, got ""`);

  const resources = parseResources(obj["resources"], `${at}.resources`);
  if (maxResource) {
    const tooMany: string[] = [];
    if (resources.vcoresMilli > maxResource.vcoresMilli) tooMany.push("vcores");
    if (resources.memoryMb > maxResource.memoryMb) tooMany.push("memoryMb");
    const first = tooMany[0];
    if (first !== undefined) {
      fail(
        "DAG_RESOURCES_TOO_LARGE",
        `${at}.resources.${first}`,
        `${at}.resources asks for ${resources.vcoresMilli / 1000} vcores and ${resources.memoryMb} MB but the ` +
          `largest node offers ${maxResource.vcoresMilli / 1000} vcores and ${maxResource.memoryMb} MB; ` +
          `lower ${tooMany.join(" and ")} so a task fits on one node`,
      );
    }
  }

  const env: Record<string, string> = {};
  const rawEnv = obj["env"];
  if (rawEnv !== undefined) {
    const envObj = expectObject(rawEnv, `${at}.env`, `${at}.env must be an object of string values`);
    for (const [key, val] of Object.entries(envObj)) {
      if (!ENV_NAME_RE.test(key)) {
        invalid(
          `${at}.env.${key}`,
          `${at}.env has a bad variable name ${JSON.stringify(key)}; use [A-Za-z_][A-Za-z0-9_]*`,
        );
      }
      if ((Object.values(TASK_ENV) as string[]).includes(key)) {
        invalid(`${at}.env.${key}`, `${at}.env sets ${key}, which the job manager sets for every task; remove it`);
      }
      if (typeof val !== "string" || val.includes("\u0000")) {
        invalid(`${at}.env.${key}`, `${at}.env.${key} must be a string without NUL, got ${show(val)}; quote numbers`);
      }
      env[key] = val;
    }
  }
  const localResources = parseLocalResources(obj["localResources"], `${at}.localResources`);
  return {
    name,
    parallelism,
    command: [...(command as string[])],
    resources,
    env,
    ...(localResources.length > 0 ? { localResources } : {}),
    ...(input ? { input } : {}),
  };
}

function parseResources(raw: unknown, at: string): Resources {
  const obj = expectObject(raw, at, `${at} must be an object like { "vcores": 1, "memoryMb": 256 }`);
  rejectUnknownFields(obj, RESOURCE_FIELDS, at);
  const vcores = obj["vcores"];
  const vcoresMilliRaw = obj["vcoresMilli"];
  let vcoresMilli: number;
  if (vcores !== undefined && vcoresMilliRaw !== undefined) {
    invalid(`${at}.vcoresMilli`, `${at} gives both vcores and vcoresMilli; keep only vcores`);
  }
  if (vcoresMilliRaw !== undefined) {
    if (typeof vcoresMilliRaw !== "number" || !Number.isInteger(vcoresMilliRaw) || vcoresMilliRaw < 1) {
      invalid(`${at}.vcoresMilli`, `${at}.vcoresMilli must be a whole number >= 1, got ${show(vcoresMilliRaw)}`);
    }
    vcoresMilli = vcoresMilliRaw;
  } else {
    if (typeof vcores !== "number" || !Number.isFinite(vcores) || vcores <= 0) {
      invalid(
        `${at}.vcores`,
        `${at}.vcores must be a positive number of cores (0.5 is half a core), got ${show(vcores)}`,
      );
    }
    vcoresMilli = Math.round(vcores * 1000);
    if (vcoresMilli < 1) invalid(`${at}.vcores`, `${at}.vcores ${vcores} is below the 0.001-core granularity`);
  }
  const memoryMb = obj["memoryMb"];
  if (typeof memoryMb !== "number" || !Number.isInteger(memoryMb) || memoryMb < 1) {
    invalid(`${at}.memoryMb`, `${at}.memoryMb must be a positive whole number of MB, got ${show(memoryMb)}`);
  }
  return { vcoresMilli, memoryMb };
}

function parseEdge(raw: unknown, at: string, indexByName: Map<string, number>): EdgeSpec {
  const obj = expectObject(raw, at, `${at} must be an object with from, to and type`);
  rejectUnknownFields(obj, EDGE_FIELDS, at);
  const ends: string[] = [];
  for (const side of ["from", "to"] as const) {
    const name = obj[side];
    if (typeof name !== "string") invalid(`${at}.${side}`, `${at}.${side} must be a vertex name, got ${show(name)}`);
    if (!indexByName.has(name)) {
      const known = [...indexByName.keys()];
      const list = known.slice(0, 10).join(", ") + (known.length > 10 ? ", ..." : "");
      fail(
        "DAG_UNKNOWN_VERTEX",
        `${at}.${side}`,
        `${at}.${side} names vertex ${JSON.stringify(name)}, which is not declared; use one of: ${list}`,
      );
    }
    ends.push(name);
  }
  const [from = "", to = ""] = ends;
  const type = obj["type"];
  if (typeof type !== "string" || !(EDGE_TYPES as readonly string[]).includes(type)) {
    invalid(`${at}.type`, `${at}.type must be one of ${EDGE_TYPES.join(", ")}, got ${show(type)}`);
  }
  if (from === to) {
    throw new HarvestError(
      "DAG_CYCLE",
      `${at} goes from ${from} to itself; a vertex cannot consume its own output, remove the edge`,
      { details: { field: at, cycle: `${from} -> ${from}`, vertices: from } },
    );
  }
  return { from, to, type: type as EdgeType };
}

/** Indices of the edges of one cycle, in order along the cycle, or undefined when the graph is acyclic. */
function findCycle(dag: DagSpec): number[] | undefined {
  const outgoing = new Map<string, number[]>(dag.vertices.map((v) => [v.name, []]));
  dag.edges.forEach((e, i) => outgoing.get(e.from)?.push(i));
  const state = new Map<string, "open" | "done">();
  const stack: number[] = [];
  // Iterative DFS so a long chain (the Alibaba trace has depth 20, generated DAGs may be deeper) cannot overflow.
  for (const start of dag.vertices) {
    if (state.has(start.name)) continue;
    const frames: { vertex: string; next: number }[] = [{ vertex: start.name, next: 0 }];
    state.set(start.name, "open");
    while (frames.length > 0) {
      const frame = frames[frames.length - 1]!;
      const out = outgoing.get(frame.vertex) ?? [];
      if (frame.next >= out.length) {
        state.set(frame.vertex, "done");
        frames.pop();
        stack.pop();
        continue;
      }
      const edgeIndex = out[frame.next++]!;
      const to = dag.edges[edgeIndex]!.to;
      const seen = state.get(to);
      if (seen === "open") {
        // The cycle is the part of the current path from `to` onwards, closed by this edge.
        const path = [...stack, edgeIndex];
        const begin = path.findIndex((i) => dag.edges[i]!.from === to);
        return path.slice(begin);
      }
      if (seen === undefined) {
        state.set(to, "open");
        stack.push(edgeIndex);
        frames.push({ vertex: to, next: 0 });
      }
    }
  }
  return undefined;
}

function requireVertex(dag: DagSpec, name: string): VertexSpec {
  const v = dag.vertices.find((x) => x.name === name);
  if (!v) {
    throw new HarvestError("DAG_UNKNOWN_VERTEX", `DAG "${dag.name}" has no vertex named ${JSON.stringify(name)}`, {
      details: { field: "vertex", vertex: name },
    });
  }
  return v;
}

function lineAndColumn(text: string, position: number): { line: number; column: number } {
  const before = text.slice(0, position);
  const line = before.split("\n").length;
  const column = position - (before.lastIndexOf("\n") + 1) + 1;
  return { line, column };
}

/**
 * The offset of the first JSON syntax error in `text`: the first character that cannot continue a JSON text, where
 * V8 reports it too (and also where V8's message gives no position, e.g. an unexpected token). A recursive-descent
 * recognizer; it only locates, JSON.parse still does the parsing.
 */
function locateJsonError(text: string): number {
  let pos = 0;
  const ws = (): void => {
    while (pos < text.length && " \t\n\r".includes(text[pos]!)) pos++;
  };
  const bad = (): never => {
    throw new JsonSyntaxAt(pos);
  };
  const literal = (word: string): void => {
    for (const ch of word) {
      if (text[pos] !== ch) bad();
      pos++;
    }
  };
  const string = (): void => {
    pos++; // opening quote
    while (pos < text.length) {
      const ch = text[pos]!;
      if (ch === '"') {
        pos++;
        return;
      }
      if (ch < " ") bad();
      if (ch === "\\") {
        pos++;
        const esc = text[pos];
        if (esc === "u") {
          for (let k = 0; k < 4; k++) {
            pos++;
            if (!/[0-9a-fA-F]/.test(text[pos] ?? "")) bad();
          }
        } else if (esc === undefined || !'"\\/bfnrt'.includes(esc)) bad();
      }
      pos++;
    }
    bad();
  };
  const digit = (): boolean => pos < text.length && text[pos]! >= "0" && text[pos]! <= "9";
  // Character by character, so that the first one that cannot continue the number is the one reported.
  const number = (): void => {
    if (text[pos] === "-") pos++;
    if (!digit()) bad();
    if (text[pos] === "0") pos++;
    else while (digit()) pos++;
    if (text[pos] === ".") {
      pos++;
      if (!digit()) bad();
      while (digit()) pos++;
    }
    if (text[pos] === "e" || text[pos] === "E") {
      pos++;
      if (text[pos] === "+" || text[pos] === "-") pos++;
      if (!digit()) bad();
      while (digit()) pos++;
    }
  };
  const value = (): void => {
    ws();
    const ch = text[pos];
    if (ch === "{") {
      pos++;
      ws();
      if (text[pos] === "}") {
        pos++;
        return;
      }
      for (;;) {
        ws();
        if (text[pos] !== '"') bad();
        string();
        ws();
        if (text[pos] !== ":") bad();
        pos++;
        value();
        ws();
        if (text[pos] === ",") pos++;
        else if (text[pos] === "}") {
          pos++;
          return;
        } else bad();
      }
    } else if (ch === "[") {
      pos++;
      ws();
      if (text[pos] === "]") {
        pos++;
        return;
      }
      for (;;) {
        value();
        ws();
        if (text[pos] === ",") pos++;
        else if (text[pos] === "]") {
          pos++;
          return;
        } else bad();
      }
    } else if (ch === '"') string();
    else if (ch === "t") literal("true");
    else if (ch === "f") literal("false");
    else if (ch === "n") literal("null");
    else number();
  };
  try {
    value();
    ws();
    return pos < text.length ? pos : text.length;
  } catch (err) {
    return err instanceof JsonSyntaxAt ? Math.min(err.position, text.length) : 0;
  }
}

/** Thrown inside `locateJsonError` to unwind to the offset of the first bad character. */
class JsonSyntaxAt extends Error {
  constructor(readonly position: number) {
    super(`JSON syntax error at position ${position}`);
  }
}
