/**
 * A vertex's input splits (common/dag-input.ts), computed by the job manager when it starts, as Tez's MRInput
 * initializer does in the application master: each file is cut into pieces of the split size (its block size unless
 * the DAG sets `splitMb`; on a record boundary for fixed-length records), the last piece of a file taking up to 10 %
 * more rather than leaving a sliver (Hadoop's SPLIT_SLOP). A split's hosts are the datanodes holding a replica of the
 * block that holds most of its bytes: the scheduler prefers those servers (resourcemanager/policy/locality.ts).
 *
 * `computeSplits` is pure; `inputFiles` asks the namenode with the job's DFS token.
 */
import type { DfsClient } from "../client/dfs-client.js";
import type { VertexInputSpec } from "../common/dag-input.js";
import { errorMessage, HarvestError, isHarvestError } from "../common/errors.js";
import type { InputSplit } from "../common/task-contract.js";
import { NOT_DATA_PREFIXES } from "../common/task-contract.js";

/** A file of the input with where its blocks are. */
export interface SplitFile {
  /** `dfs:/path`. */
  path: string;
  length: number;
  blockSize: number;
  blocks: { offset: number; length: number; hosts: string[]; racks: string[] }[];
}

/** The last split of a file may be this much longer than the split size (Hadoop's SPLIT_SLOP). */
const SPLIT_SLOP = 1.1;

/** The splits of `files`, in file order then offset order. Empty files give none. */
export function computeSplits(
  files: readonly SplitFile[],
  input: Pick<VertexInputSpec, "splitMb" | "recordBytes">,
): InputSplit[] {
  const out: InputSplit[] = [];
  for (const f of files) {
    let size = input.splitMb !== undefined ? Math.round(input.splitMb * 1024 * 1024) : f.blockSize;
    if (input.recordBytes) size = Math.max(input.recordBytes, Math.floor(size / input.recordBytes) * input.recordBytes);
    size = Math.max(1, size);
    let offset = 0;
    while (f.length - offset > size * SPLIT_SLOP) {
      out.push(split(f, offset, size, input.recordBytes));
      offset += size;
    }
    if (f.length > offset) out.push(split(f, offset, f.length - offset, input.recordBytes));
  }
  return out;
}

function split(f: SplitFile, offset: number, length: number, recordBytes: number | undefined): InputSplit {
  // The block holding most of the split's bytes (the first of equals) names its hosts.
  let best: SplitFile["blocks"][number] | undefined;
  let bestBytes = 0;
  for (const b of f.blocks) {
    const bytes = Math.min(b.offset + b.length, offset + length) - Math.max(b.offset, offset);
    if (bytes > bestBytes) {
      best = b;
      bestBytes = bytes;
    }
  }
  return {
    path: f.path,
    offset,
    length,
    fileLength: f.length,
    ...(recordBytes ? { recordBytes } : {}),
    hosts: best ? [...best.hosts] : [],
    racks: best ? [...best.racks] : [],
  };
}

/**
 * The files of a vertex's input with their block locations: each path's file, or a directory's files (not its
 * subdirectories, not names starting with `_` or `.`) in name order. Fails with JOB_INPUT_INVALID naming the vertex
 * and path when a path is missing or cannot be read with the job's token.
 */
export async function inputFiles(dfs: DfsClient, vertex: string, input: VertexInputSpec): Promise<SplitFile[]> {
  const out: SplitFile[] = [];
  for (const arg of input.paths) {
    const path = arg.slice("dfs:".length);
    const fail = (err: unknown): never => {
      throw new HarvestError(
        "JOB_INPUT_INVALID",
        `vertex ${vertex}: cannot read its input ${arg}: ${errorMessage(err)}`,
        { details: { vertex, path: arg, cause: isHarvestError(err) ? err.code : "" }, cause: err },
      );
    };
    const st = await dfs.stat(path).catch(fail);
    const files = st.isDir
      ? (await dfs.list(path).catch(fail))
          .filter((e) => !e.isDir && !NOT_DATA_PREFIXES.some((p) => baseName(e.path).startsWith(p)))
          .sort((a, b) => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0))
      : [st];
    for (const file of files) {
      const located = await dfs.blockLocations(file.path).catch(fail);
      out.push({
        path: `dfs:${file.path}`,
        length: Number(located.fileLength),
        blockSize: Number(file.blockSize),
        blocks: located.blocks.map((b) => ({
          offset: Number(b.offset),
          length: Number(b.block?.numBytes ?? 0),
          hosts: b.locations.map((d) => d.datanodeId),
          racks: b.locations.map((d) => d.rack),
        })),
      });
    }
  }
  return out;
}

function baseName(path: string): string {
  return path.slice(path.lastIndexOf("/") + 1);
}
