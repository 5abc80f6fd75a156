/**
 * Reading a container's log kept in the DFS (common/container-logs.ts), as `harvest job logs` and the resource
 * manager's log page both do once the node manager that ran it cannot answer.
 */
import type { DfsClient } from "./dfs-client.js";
import { isHarvestError } from "../common/errors.js";
import type { LogPart } from "../common/log-view.js";

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
  let size: number;
  try {
    size = Number((await dfs.stat(path)).length);
  } catch (err) {
    if (isHarvestError(err, "NAMENODE_FILE_NOT_FOUND")) return undefined;
    throw err;
  }
  const offset = Math.min(size, start < 0 ? Math.max(0, size + start) : start);
  const length = Math.min(size - offset, maxBytes);
  const chunks: Buffer[] = [];
  if (length > 0)
    for await (const chunk of dfs.createReadStream(path, { offset, length })) chunks.push(chunk as Buffer);
  return { data: Buffer.concat(chunks).subarray(0, length), totalBytes: size, offset };
}
