/**
 * A datanode's WebHDFS side: where the namenode's OPEN and CREATE redirects lead (HDFS's datanode WebHdfsHandler).
 * The URL carries the namenode's sealed ticket (common/webhdfs.ts), which this datanode opens with the block keys the
 * namenode sent it: it names the caller, the operation and the path, and holds the delegation token the datanode's DFS
 * client acts as the caller with, so that the namenode checks the caller's permissions again and owns what it creates.
 * Data streams both ways with backpressure, through the client's ordinary read and write paths (checksums, replica
 * failover, pipelines): a datanode holds a few packets of a transfer, never a file. When the transfer ends the
 * datanode cancels the ticket's delegation token, so a ticket serves one transfer.
 */
import { Readable } from "node:stream";
import { pipeline } from "node:stream/promises";
import type { BlockKeySets } from "../common/block-token.js";
import { asHarvestError, errorMessage, HarvestError } from "../common/errors.js";
import type { Logger } from "../common/log.js";
import type { TlsFiles } from "../common/tls.js";
import { SELF_AUTHENTICATED } from "../common/web-server.js";
import type { WebRequest, WebResponse, WebServer } from "../common/web-server.js";
import {
  encodeDfsPath,
  openWebHdfsTicket,
  WEBHDFS_PREFIX,
  WEBHDFS_TICKET_PARAM,
  webHdfsErrorResponse,
  webHdfsPath,
} from "../common/webhdfs.js";
import type { WebHdfsDataOp, WebHdfsTicket } from "../common/webhdfs.js";
import { DfsClient } from "../client/dfs-client.js";

/** What the WebHDFS routes use of their datanode. */
export interface WebHdfsServerHost {
  datanodeId: string;
  /** The namenode(s) its DFS clients call, as the datanode's options name them. */
  namenodeAddress: string;
  /** The datanode's TLS files: its clients trust the cluster CA (and present no certificate of their own). */
  tls: TlsFiles | undefined;
  log: Logger;
  /** The namenodes' block keys, which open tickets; "off" when they issue none. */
  blockKeys(): BlockKeySets | "off";
  nowMs(): number;
}

/** Serves a datanode's WebHDFS routes (GET ?op=OPEN, PUT ?op=CREATE) on its web server. */
export function registerDatanodeWebHdfs(server: WebServer, host: WebHdfsServerHost): void {
  server
    .route("GET", `${WEBHDFS_PREFIX}/*`, SELF_AUTHENTICATED, (req) => guarded(() => open(req, host)))
    .route("PUT", `${WEBHDFS_PREFIX}/*`, SELF_AUTHENTICATED, async (req) => {
      const answer = await guarded(() => create(req, host));
      // A refused upload may not have been read: the connection ends with the answer.
      return answer.status === 201 ? answer : { ...answer, headers: { ...answer.headers, connection: "close" } };
    });
}

async function guarded(fn: () => Promise<WebResponse>): Promise<WebResponse> {
  try {
    return await fn();
  } catch (err) {
    return webHdfsErrorResponse(err);
  }
}

/** The ticket of a request for `op`, checked against the URL's path and op. */
function ticketOf(req: WebRequest, host: WebHdfsServerHost, op: WebHdfsDataOp): WebHdfsTicket {
  const path = webHdfsPath(req.path);
  const asked = (req.query.get("op") ?? "").toUpperCase();
  if (asked !== op)
    throw new HarvestError(
      "INVALID_ARGUMENT",
      `a datanode serves ${op} for ${req.method} (got op=${JSON.stringify(asked.slice(0, 40))}): other operations ` +
        "go to the namenode",
      { details: { field: "op" } },
    );
  return openWebHdfsTicket(
    req.query.get(WEBHDFS_TICKET_PARAM),
    host.blockKeys(),
    host.tls !== undefined,
    { op, path },
    host.nowMs(),
  );
}

/** A DFS client acting as the ticket's user: its delegation token on a secure cluster, its name on a plaintext one. */
function clientFor(ticket: WebHdfsTicket, host: WebHdfsServerHost): DfsClient {
  return new DfsClient(host.namenodeAddress, {
    ...(host.tls ? { security: { ca: host.tls.ca }, dfsToken: ticket.dfsToken } : { user: ticket.user }),
    // A new file's first replica lands here, and reads try the replica here first (HDFS's datanode does the same).
    writerDatanodeId: host.datanodeId,
    clientName: `webhdfs-${host.datanodeId}-${Math.random().toString(36).slice(2, 10)}`,
    logger: host.log,
  });
}

/** Closes the client and cancels the ticket's delegation token (best effort: it expires anyway). */
function finish(dfs: DfsClient, ticket: WebHdfsTicket, host: WebHdfsServerHost): void {
  const close = (): void => dfs.close();
  if (!ticket.dfsToken) return close();
  dfs
    .nnCall(dfs.namenode.cancelDelegationToken, { token: ticket.dfsToken })
    .catch((err: unknown) =>
      host.log.debug("could not cancel a WebHDFS delegation token", { path: ticket.path, error: errorMessage(err) }),
    )
    .finally(close);
}

/** GET ?op=OPEN: the file (or `length` bytes from `offset`) as it is read, with its length up front. */
async function open(req: WebRequest, host: WebHdfsServerHost): Promise<WebResponse> {
  const ticket = ticketOf(req, host, "OPEN");
  const dfs = clientFor(ticket, host);
  try {
    const status = await dfs.stat(ticket.path);
    if (status.isDir)
      throw new HarvestError("NAMENODE_FILE_NOT_FOUND", `${ticket.path} is a directory, not a file`, {
        details: { path: ticket.path },
      });
    const offset = ticket.offset ?? 0;
    if (offset > status.length)
      throw new HarvestError("INVALID_ARGUMENT", `offset ${offset} is past the end of ${ticket.path}`, {
        details: { field: "offset" },
      });
    const available = status.length - offset;
    const bytes = ticket.length ? Math.min(ticket.length, available) : available;
    const stream = bytes === 0 ? Readable.from([]) : dfs.createReadStream(ticket.path, { offset, length: bytes });
    stream.once("close", () => finish(dfs, ticket, host));
    return { stream, contentType: "application/octet-stream", headers: { "content-length": String(bytes) } };
  } catch (err) {
    finish(dfs, ticket, host);
    throw err;
  }
}

/**
 * PUT ?op=CREATE: the request's body into a new file, streamed; 201 with the file's WebHDFS URL at the namenode once
 * every replica of its last block has it and the namenode has closed it. A write that fails (or whose client goes
 * away) leaves no half-written file behind.
 */
async function create(req: WebRequest, host: WebHdfsServerHost): Promise<WebResponse> {
  const ticket = ticketOf(req, host, "CREATE");
  if (!req.body) throw new HarvestError("INVALID_ARGUMENT", "CREATE needs the file's bytes as the request body");
  const dfs = clientFor(ticket, host);
  // Another writer's file still open is not this write's to remove should it fail.
  let othersOpen = false;
  try {
    othersOpen = (await statOrUndefined(dfs, ticket.path))?.complete === false;
    const out = dfs.createWriteStream(ticket.path, {
      overwrite: ticket.overwrite ?? false,
      ...(ticket.replication ? { replication: ticket.replication } : {}),
      ...(ticket.blockSize ? { blockSizeBytes: ticket.blockSize } : {}),
    });
    await pipeline(req.body(), out);
    if (ticket.permission !== undefined) await dfs.chmod(ticket.path, ticket.permission);
    host.log.info("WebHDFS file created", { path: ticket.path, user: ticket.user });
    return {
      status: 201,
      headers: { location: `${ticket.namenodeUrl}${WEBHDFS_PREFIX}${encodeDfsPath(ticket.path)}` },
      text: "",
    };
  } catch (err) {
    const h = asHarvestError(err);
    if (!othersOpen) await removeUnfinished(dfs, ticket.path, host);
    host.log.info("WebHDFS create failed", { path: ticket.path, user: ticket.user, code: h.code, error: h.message });
    throw h;
  } finally {
    finish(dfs, ticket, host);
  }
}

/** `path`'s status, or undefined when it does not exist. */
async function statOrUndefined(dfs: DfsClient, path: string): Promise<{ complete: boolean } | undefined> {
  try {
    return await dfs.stat(path);
  } catch (err) {
    if (err instanceof HarvestError && err.code === "NAMENODE_FILE_NOT_FOUND") return undefined;
    throw err;
  }
}

/**
 * Deletes `path` when it is a file still open for writing (this write's, which failed): a retry then finds nothing in
 * its way, and the namenode releases the lease with it. A complete file (what a refused create left) is kept.
 */
async function removeUnfinished(dfs: DfsClient, path: string, host: WebHdfsServerHost): Promise<void> {
  try {
    const status = await dfs.stat(path);
    if (!status.isDir && !status.complete) await dfs.delete(path);
  } catch (err) {
    host.log.debug("could not remove a failed WebHDFS write", { path, error: errorMessage(err) });
  }
}
