/** Test helper: a whole DFS file (or a range of it) read through the client's read stream into one buffer. */
import type { DfsClient } from "../client/dfs-client.js";

export async function readAll(
  dfs: DfsClient,
  path: string,
  opts: { offset?: number; length?: number } = {},
): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const chunk of dfs.createReadStream(path, opts)) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks);
}
