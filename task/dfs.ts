/**
 * Reading and writing Harvest's file system from a task: arguments written `dfs:/path` name files there. The client
 * library (and gRPC with it) is loaded only when a task uses such a path, so plain tasks start as fast as before.
 * The namenode's address comes from HARVEST_NN_ADDRESS, which the node manager sets in every container; on a secure
 * cluster the task trusts HARVEST_CA and acts as the job's submitter with the token in HARVEST_TOKEN_FILE; on a
 * plaintext one it claims the submitter the node manager names in HARVEST_DFS_USER.
 */
import type { DfsClient } from "../client/dfs-client.js";
import { TaskError } from "./context.js";

/** The prefix that marks a path in Harvest's file system. */
export const DFS_PREFIX = "dfs:";

/** True for `dfs:/...` arguments. */
export function isDfsPath(arg: string): boolean {
  return arg.startsWith(DFS_PREFIX);
}

/**
 * A client of the cluster's file system acting as the job's submitter (with the job's DFS token): the caller closes
 * it. For files the `dfs:` helpers below do not cover (streams, listings, renames).
 */
export async function dfsClient(): Promise<DfsClient> {
  if (!process.env["HARVEST_NN_ADDRESS"])
    throw new TaskError("a dfs: path needs HARVEST_NN_ADDRESS (the cluster runs no namenode?)");
  const lib = await import("../client/dfs-client.js");
  return lib.DfsClient.fromTaskEnv();
}

const client = dfsClient;

/** The whole content of `dfs:/path`. */
export async function readDfsFile(arg: string): Promise<Buffer> {
  const c = await client();
  try {
    const chunks: Buffer[] = [];
    for await (const chunk of c.createReadStream(arg.slice(DFS_PREFIX.length))) chunks.push(chunk as Buffer);
    return Buffer.concat(chunks);
  } catch (err) {
    throw new TaskError(`cannot read ${arg}: ${(err as Error).message}`);
  } finally {
    c.close();
  }
}

/** Writes `data` to `dfs:/path`, replacing what is there (a re-run task rewrites its output). */
export async function writeDfsFile(arg: string, data: Buffer | string): Promise<void> {
  const c = await client();
  try {
    const path = arg.slice(DFS_PREFIX.length);
    await c.mkdir(path.slice(0, path.lastIndexOf("/")) || "/");
    await new Promise<void>((resolve, reject) => {
      const out = c.createWriteStream(path, { overwrite: true });
      out.on("finish", resolve);
      out.on("error", reject);
      out.end(data);
    });
  } catch (err) {
    throw new TaskError(`cannot write ${arg}: ${(err as Error).message}`);
  } finally {
    c.close();
  }
}
