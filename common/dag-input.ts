/**
 * A vertex's DFS input (`"input"` in the DAG file): the files it reads, cut into splits, one task per split (Hadoop's
 * FileInputFormat, Tez's MRInput with its splits computed in the application master). The job manager computes the
 * splits when it starts (jobmanager/input-splits.ts), which sets the vertex's parallelism; until then the vertex's
 * `parallelism` is 0, as is that of the vertices joined to it by one-to-one edges, which take the same count.
 *
 *   "input": { "paths": ["dfs:/data/logs"], "splitMb": 64, "recordBytes": 100 }
 *
 * - `paths`: DFS files or directories (a directory's files, not its subdirectories, and not names starting with `_` or
 *   `.`, which are markers such as `_SUCCESS` or a job's `_temporary`).
 * - `splitMb`: the split size; absent, each file's own block size (one task per block).
 * - `recordBytes`: fixed-length records of that many bytes (splits end on a record boundary); absent, lines (a split's
 *   task reads the lines that start in it: harvest/task's `readSplit`).
 */
import { normalizeDfsPath } from "./dfs-path.js";
import { errorMessage, HarvestError } from "./errors.js";
import { expectObject, invalid, rejectUnknownFields, show } from "./dag-fields.js";

/** A vertex's DFS input, as the DAG file gives it. */
export interface VertexInputSpec {
  /** `dfs:/absolute/path` of files or directories, in the order their splits are numbered. */
  paths: string[];
  /** The split size in MiB (fractions allowed); absent: each file's block size. */
  splitMb?: number;
  /** Fixed-length records of this many bytes; absent: lines. */
  recordBytes?: number;
}

const INPUT_FIELDS = ["paths", "splitMb", "recordBytes"];
/** At most this many input paths per vertex. */
const MAX_INPUT_PATHS = 1_000;
/** The largest fixed record, 1 MiB. */
export const MAX_RECORD_BYTES = 1024 * 1024;

/** Parses a vertex's `input` field (`at` is its field path, e.g. `vertices[0].input`); undefined when absent. */
export function parseVertexInput(raw: unknown, at: string): VertexInputSpec | undefined {
  if (raw === undefined) return undefined;
  const obj = expectObject(raw, at, `${at} must be an object like { "paths": ["dfs:/data/in"] }`);
  rejectUnknownFields(obj, INPUT_FIELDS, at);
  const paths = obj["paths"];
  if (!Array.isArray(paths) || paths.length === 0 || paths.length > MAX_INPUT_PATHS)
    invalid(
      `${at}.paths`,
      `${at}.paths must be 1 to ${MAX_INPUT_PATHS} DFS paths like "dfs:/data/in", got ${show(paths)}`,
    );
  const normalized = paths.map((p: unknown, i: number) => {
    const here = `${at}.paths[${i}]`;
    if (typeof p !== "string" || !p.startsWith("dfs:/"))
      invalid(here, `${here} must be a DFS path like "dfs:/data/in", got ${show(p)}`);
    try {
      return `dfs:${normalizeDfsPath(p.slice("dfs:".length), here)}`;
    } catch (err) {
      return invalid(here, `${here} ${JSON.stringify(p)} is not a valid DFS path: ${errorMessage(err)}`);
    }
  });
  const out: VertexInputSpec = { paths: normalized };
  const splitMb = obj["splitMb"];
  if (splitMb !== undefined) {
    if (typeof splitMb !== "number" || !(splitMb >= 1 / 1024 && splitMb <= 1024 * 1024))
      invalid(`${at}.splitMb`, `${at}.splitMb must be a number of MiB from 1/1024 to 1048576, got ${show(splitMb)}`);
    out.splitMb = splitMb;
  }
  const recordBytes = obj["recordBytes"];
  if (recordBytes !== undefined) {
    if (
      typeof recordBytes !== "number" ||
      !Number.isInteger(recordBytes) ||
      recordBytes < 1 ||
      recordBytes > MAX_RECORD_BYTES
    )
      invalid(
        `${at}.recordBytes`,
        `${at}.recordBytes must be a whole number of bytes from 1 to ${MAX_RECORD_BYTES}, got ${show(recordBytes)}`,
      );
    out.recordBytes = recordBytes;
  }
  return out;
}

/** The vertices whose parallelism their input sets, and those joined to them by one-to-one edges (transitively). */
export function splitDrivenVertices(
  vertices: readonly { name: string; input?: VertexInputSpec }[],
  edges: readonly { from: string; to: string; type: string }[],
): Set<string> {
  const driven = new Set(vertices.filter((v) => v.input).map((v) => v.name));
  for (let grew = true; grew;) {
    grew = false;
    for (const e of edges) {
      if (e.type !== "one-to-one") continue;
      for (const [a, b] of [
        [e.from, e.to],
        [e.to, e.from],
      ] as const)
        if (driven.has(a) && !driven.has(b)) {
          driven.add(b);
          grew = true;
        }
    }
  }
  return driven;
}

/**
 * The DAG with the parallelism the splits set: each input vertex gets its split count, and every vertex joined to it
 * by one-to-one edges the same. Fails when two inputs joined by one-to-one edges have different split counts.
 */
export function withSplitParallelism<
  V extends { name: string; parallelism: number; input?: VertexInputSpec },
  D extends { vertices: V[]; edges: { from: string; to: string; type: string }[] },
>(dag: D, splitCounts: ReadonlyMap<string, number>): D {
  const counts = new Map(splitCounts);
  for (let grew = true; grew;) {
    grew = false;
    for (const e of dag.edges) {
      if (e.type !== "one-to-one") continue;
      const a = counts.get(e.from);
      const b = counts.get(e.to);
      if (a !== undefined && b !== undefined && a !== b)
        throw new HarvestError(
          "DAG_ONE_TO_ONE_MISMATCH",
          `the one-to-one edge ${e.from} -> ${e.to} joins vertices of ${a} and ${b} input splits; their inputs must ` +
            `split alike, or use a scatter-gather edge`,
          { details: { field: "edges" } },
        );
      const known = a ?? b;
      if (known !== undefined && (a === undefined || b === undefined)) {
        counts.set(a === undefined ? e.from : e.to, known);
        grew = true;
      }
    }
  }
  return {
    ...dag,
    vertices: dag.vertices.map((v) => (v.parallelism === 0 ? { ...v, parallelism: counts.get(v.name) ?? 0 } : v)),
  };
}
