/**
 * Reading a container's log kept in the DFS (common/container-logs.ts), as `harvest job logs` and the resource
 * manager's log page both do once the node manager that ran it cannot answer.
 */
import { Readable } from "node:stream";
import type { DfsClient } from "./dfs-client.js";
import { isHarvestError } from "../common/errors.js";
import { logRange } from "../common/log-view.js";
import type { LogPart, LogStreamPart } from "../common/log-view.js";

/**
 * Bytes of the kept log at `path` from `start` (negative: that many before the end) to its end, at most `maxBytes`;
 * undefined when no copy is there.
 */
export async function readKeptLog(
  dfs: DfsClient,
  path: string,
  start: number,
  maxBytes: number,
): Promise<LogPart | undefined> {
  const range = await keptRange(dfs, path, start, maxBytes);
  if (!range) return undefined;
  const { offset, length, totalBytes } = range;
  const chunks: Buffer[] = [];
  if (length > 0)
    for await (const chunk of dfs.createReadStream(path, { offset, length })) chunks.push(chunk as Buffer);
  return { data: Buffer.concat(chunks).subarray(0, length), totalBytes, offset };
}

/** The same part, whatever its size, as a stream from the DFS (a script's whole log); undefined when no copy is there. */
export async function streamKeptLog(dfs: DfsClient, path: string, start: number): Promise<LogStreamPart | undefined> {
  const range = await keptRange(dfs, path, start, Number.MAX_SAFE_INTEGER);
  if (!range) return undefined;
  const { offset, length } = range;
  const stream = length > 0 ? dfs.createReadStream(path, { offset, length }) : Readable.from([]);
  return { stream, ...range };
}

/** Where the part from `start` lies in the kept log at `path` (its size now); undefined when there is no copy. */
async function keptRange(
  dfs: DfsClient,
  path: string,
  start: number,
  maxBytes: number,
): Promise<ReturnType<typeof logRange> | undefined> {
  let size: number;
  try {
    size = Number((await dfs.stat(path)).length);
  } catch (err) {
    if (isHarvestError(err, "NAMENODE_FILE_NOT_FOUND")) return undefined;
    throw err;
  }
  return logRange(size, start, maxBytes);
}
