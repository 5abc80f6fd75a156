/**
 * The namenode's WebHDFS (HDFS's REST API under `/webhdfs/v1/<path>?op=...`): the namespace operations answered here
 * (MKDIRS, DELETE, RENAME, and the reads of web-api.ts: LISTSTATUS, GETFILESTATUS, ...), and OPEN and CREATE answered
 * as HDFS does, with a 307 to a datanode's HTTPS server carrying a sealed, short-lived ticket (common/webhdfs.ts) that
 * names the caller, the operation and the path: `curl -L` follows it, and the datanode streams the data with a DFS
 * client acting as the caller. The caller is the certificate's or web token's name (a plaintext namenode believes
 * `user.name`, as HDFS's simple authentication does), held to the DFS permissions `harvest fs` is: OPEN and CREATE are
 * checked here before the redirect, and again by the namenode when the datanode's client opens or creates the file.
 * Errors take WebHDFS's shape, `{ "RemoteException": { exception, javaClassName, message } }`, with HDFS's statuses.
 */
import type { Principal } from "../common/auth.js";
import type { BlockKey } from "../common/block-token.js";
import { normalizeDfsPath } from "../common/dfs-path.js";
import { HarvestError } from "../common/errors.js";
import { isValidIdentityName } from "../common/tls.js";
import { SELF_AUTHENTICATED } from "../common/web-server.js";
import type { WebRequest, WebResponse, WebServer } from "../common/web-server.js";
import {
  boolParam,
  encodeDfsPath,
  intParam,
  permissionParam,
  sealWebHdfsTicket,
  WEBHDFS_PREFIX,
  WEBHDFS_TICKET_PARAM,
  webHdfsErrorResponse,
  webHdfsPath,
} from "../common/webhdfs.js";
import type { WebHdfsTicket } from "../common/webhdfs.js";
import type { Caller } from "./policy/permissions.js";
import { WEBHDFS_READ_OPS, webHdfsRead } from "./web-api.js";
import type { NameNodeWebSource } from "./web.js";

/** A datanode a WebHDFS redirect may go to. */
export interface WebHdfsDatanode {
  datanodeId: string;
  /** Its web server's base URL, `https://host:port`. */
  webUrl: string;
  /** Its primary tenant is busy: it refuses reads and writes for now. */
  busy: boolean;
}

/** What WebHDFS needs of the namenode beyond the read-only web source: its mutations, datanodes and keys. */
export interface WebHdfsSource extends NameNodeWebSource {
  /** True when callers are authenticated (TLS). */
  secure: boolean;
  /** The superuser's name: a plaintext caller that names nobody acts as it, as on the other web routes. */
  superuser: string;
  /** How long a redirect's ticket stays valid. */
  ticketLifetimeMs: number;
  /** How long the delegation token a ticket holds stays valid: the longest a redirected transfer may take. */
  transferMaxMs: number;
  nowMs(): number;
  /** This namenode's web URL (a created file's Location names it). */
  webUrl(): string;
  /** ClientNamenode.Mkdirs: creates `path` and its missing parents, owned by `owner`. */
  mkdirs(path: string, owner: string, caller: Caller | undefined): Promise<void>;
  /** ClientNamenode.SetPermission. */
  setPermission(path: string, mode: number, caller: Caller | undefined): Promise<void>;
  /** ClientNamenode.Delete: false when there was nothing to delete. */
  delete(path: string, recursive: boolean, caller: Caller | undefined): Promise<boolean>;
  /** ClientNamenode.Rename. */
  rename(src: string, dst: string, caller: Caller | undefined): Promise<void>;
  /** The live, in-service datanodes that serve WebHDFS, by id. */
  webHdfsDatanodes(): WebHdfsDatanode[];
  /** The block key tickets are sealed with now; undefined without block keys (then tickets are in the clear). */
  ticketKey(): BlockKey | undefined;
  /** A DFS delegation token for `user`, valid `lifetimeMs`; "" on a plaintext namenode (the datanode claims `user`). */
  dfsTokenFor(user: string, lifetimeMs: number): string;
}

/** The operations served, by method (`op=`, any case). */
export const WEBHDFS_OPS = {
  GET: ["OPEN", "GETHOMEDIRECTORY", ...WEBHDFS_READ_OPS],
  PUT: ["CREATE", "MKDIRS", "RENAME"],
  DELETE: ["DELETE"],
} as const;

/**
 * Serves WebHDFS on the namenode's web server. The routes authenticate their callers themselves, so that a refusal
 * too has WebHDFS's error shape.
 */
export function registerWebHdfs(server: WebServer, source: WebHdfsSource): void {
  const serve =
    (fn: (req: WebRequest, who: WebCaller, op: string) => WebResponse | Promise<WebResponse>) =>
    async (req: WebRequest): Promise<WebResponse> => {
      try {
        const op = (req.query.get("op") ?? "").toUpperCase();
        return await fn(req, webCaller(req, source), op);
      } catch (err) {
        return webHdfsErrorResponse(err);
      }
    };
  server
    .route(
      "GET",
      `${WEBHDFS_PREFIX}/*`,
      SELF_AUTHENTICATED,
      serve((req, who, op) => {
        if (op === "OPEN") return open(req, who, source);
        // Where relative paths resolve, as `harvest fs` resolves them (it may not exist yet).
        if (op === "GETHOMEDIRECTORY") return { json: { Path: `/user/${who.user}` } };
        if ((WEBHDFS_OPS.GET as readonly string[]).includes(op))
          return { json: webHdfsRead({ ...req, principal: who.principal }, source) };
        throw unknownOp(op, "GET");
      }),
    )
    .route(
      "PUT",
      `${WEBHDFS_PREFIX}/*`,
      SELF_AUTHENTICATED,
      serve((req, who, op) => {
        if (op === "CREATE") return create(req, who, source);
        if (op === "MKDIRS") return mkdirs(req, who, source);
        if (op === "RENAME") return rename(req, who, source);
        throw unknownOp(op, "PUT");
      }),
    )
    .route(
      "DELETE",
      `${WEBHDFS_PREFIX}/*`,
      SELF_AUTHENTICATED,
      serve(async (req, who, op) => {
        if (op !== "DELETE") throw unknownOp(op, "DELETE");
        const path = webHdfsPath(req.path);
        const recursive = boolParam(req.query, "recursive", false);
        return { json: { boolean: await source.delete(path, recursive, who.caller) } };
      }),
    );
}

/** Who a WebHDFS request acts as. */
interface WebCaller {
  /** The name the DFS knows the caller by (owner of what it creates). */
  user: string;
  /** What the read routes take the caller from. */
  principal: Principal | undefined;
  /** What the namespace checks (undefined when permissions are off). */
  caller: Caller | undefined;
}

/**
 * The caller: with TLS, the certificate's or web token's name (none: UNAUTHENTICATED); on a plaintext namenode the
 * `user.name` it claims (HDFS's simple authentication), else the superuser, as the other web routes take it.
 */
function webCaller(req: WebRequest, source: WebHdfsSource): WebCaller {
  if (source.secure) {
    const principal = req.principal;
    if (!principal)
      throw new HarvestError(
        "UNAUTHENTICATED",
        "WebHDFS needs a client certificate signed by the cluster CA or a web token (Authorization: Bearer): run " +
          "'harvest ui login'",
      );
    return { user: principal.name, principal, caller: source.callerOf(principal) };
  }
  const claimed = req.query.get("user.name") ?? "";
  if (claimed === "") return { user: source.superuser, principal: undefined, caller: source.callerOf(undefined) };
  if (!isValidIdentityName(claimed) || claimed === "." || claimed === "..")
    throw new HarvestError("INVALID_ARGUMENT", `bad user.name ${JSON.stringify(claimed.slice(0, 100))}`, {
      details: { field: "user.name" },
    });
  const principal: Principal = { name: claimed, role: claimed === source.superuser ? "admin" : "user", via: "claim" };
  return { user: claimed, principal, caller: source.callerOf(principal) };
}

function unknownOp(op: string, method: string): HarvestError {
  const served = WEBHDFS_OPS[method as keyof typeof WEBHDFS_OPS];
  return new HarvestError(
    "INVALID_ARGUMENT",
    `${op ? `op=${op} is not served for ${method}` : "op is missing"}: WebHDFS serves ${served.join(", ")} for ${method}`,
    { details: { field: "op" } },
  );
}

/** GET ?op=OPEN[&offset=][&length=]: a 307 to a datanode holding the first block read (any datanode for none). */
function open(req: WebRequest, who: WebCaller, source: WebHdfsSource): WebResponse {
  const path = webHdfsPath(req.path);
  const offset = intParam(req.query, "offset", 0);
  const length = intParam(req.query, "length", 0);
  const status = source.stat(path, who.caller);
  if (status.isDir)
    throw new HarvestError("NAMENODE_FILE_NOT_FOUND", `${path} is a directory, not a file`, { details: { path } });
  if (offset > status.length)
    throw new HarvestError("INVALID_ARGUMENT", `offset ${offset} is past the end of ${path} (${status.length} bytes)`, {
      details: { field: "offset" },
    });
  // READ on the file, as GetBlockLocations checks it; its first block's replicas in read order, busy ones last.
  const located = source.blockLocations(path, offset, status.length > offset ? 1 : 0, who.caller);
  const holders = located.blocks[0]?.locations.map((l) => l.datanodeId) ?? [];
  const target = chooseDatanode(source, holders);
  return redirect(req, source, target, path, who, { op: "OPEN", offset, length });
}

/** PUT ?op=CREATE[&overwrite=][&replication=][&blocksize=][&permission=]: a 307 to a datanode that takes the data. */
function create(req: WebRequest, who: WebCaller, source: WebHdfsSource): WebResponse {
  const path = webHdfsPath(req.path);
  if (path === "/") throw new HarvestError("DFS_BAD_PATH", "the root directory is not a file", { details: { path } });
  const overwrite = boolParam(req.query, "overwrite", false);
  const replication = intParam(req.query, "replication", 0);
  const blockSize = intParam(req.query, "blocksize", 0);
  const permission = permissionParam(req.query);
  // What the namenode would refuse at once, refused before any data moves.
  let existing;
  try {
    existing = source.stat(path, who.caller);
  } catch (err) {
    if (!(err instanceof HarvestError && err.code === "NAMENODE_FILE_NOT_FOUND")) throw err;
  }
  if (existing?.isDir) throw new HarvestError("NAMENODE_FILE_EXISTS", `${path} is a directory`, { details: { path } });
  if (existing && !overwrite)
    throw new HarvestError("NAMENODE_FILE_EXISTS", `${path} exists: add overwrite=true to replace it`, {
      details: { path },
    });
  const target = chooseDatanode(source, []);
  return redirect(req, source, target, path, who, {
    op: "CREATE",
    overwrite,
    replication,
    blockSize,
    ...(permission !== undefined ? { permission } : {}),
  });
}

/** PUT ?op=MKDIRS[&permission=]: `{ "boolean": true }` once `path` and its missing parents exist. */
async function mkdirs(req: WebRequest, who: WebCaller, source: WebHdfsSource): Promise<WebResponse> {
  const path = webHdfsPath(req.path);
  const permission = permissionParam(req.query);
  await source.mkdirs(path, who.user, who.caller);
  if (permission !== undefined) await source.setPermission(path, permission, who.caller);
  return { json: { boolean: true } };
}

/** PUT ?op=RENAME&destination=/p: `{ "boolean": true }`, or false when the source does not exist (as HDFS answers). */
async function rename(req: WebRequest, who: WebCaller, source: WebHdfsSource): Promise<WebResponse> {
  const path = webHdfsPath(req.path);
  const destination = req.query.get("destination");
  if (!destination)
    throw new HarvestError("INVALID_ARGUMENT", "RENAME needs destination=<absolute path>", {
      details: { field: "destination" },
    });
  const dst = normalizeDfsPath(destination, "destination");
  try {
    await source.rename(path, dst, who.caller);
  } catch (err) {
    if (err instanceof HarvestError && err.code === "NAMENODE_FILE_NOT_FOUND" && missing(source, path, who.caller))
      return { json: { boolean: false } };
    throw err;
  }
  return { json: { boolean: true } };
}

/** True when `path` does not exist (and the caller may see that). */
function missing(source: WebHdfsSource, path: string, caller: Caller | undefined): boolean {
  try {
    source.stat(path, caller);
    return false;
  } catch (err) {
    return err instanceof HarvestError && err.code === "NAMENODE_FILE_NOT_FOUND";
  }
}

/**
 * The datanode to redirect to: the first of `preferred` (a block's replicas in read order) that serves WebHDFS and is
 * not busy, else any such datanode, else a busy one (it may be calm by the time the client arrives).
 */
function chooseDatanode(source: WebHdfsSource, preferred: readonly string[]): WebHdfsDatanode {
  const all = source.webHdfsDatanodes();
  if (all.length === 0)
    throw new HarvestError(
      "NAMENODE_NOT_ENOUGH_DATANODES",
      "no live datanode serves WebHDFS (each serves it on its web port once it has registered)",
    );
  const byId = new Map(all.map((d) => [d.datanodeId, d]));
  const calm = all.filter((d) => !d.busy);
  return (
    preferred.map((id) => byId.get(id)).find((d) => d !== undefined && !d.busy) ??
    calm[Math.floor(Math.random() * calm.length)] ??
    preferred.map((id) => byId.get(id)).find((d) => d !== undefined) ??
    all[Math.floor(Math.random() * all.length)]!
  );
}

/**
 * The 307 to `target`'s WebHDFS URL for `path`, with a sealed ticket for the caller (and, on a secure namenode, a
 * delegation token for it inside). `noredirect=true` answers 200 with `{ "Location": url }` instead, as HDFS does.
 */
function redirect(
  req: WebRequest,
  source: WebHdfsSource,
  target: WebHdfsDatanode,
  path: string,
  who: WebCaller,
  params: Omit<WebHdfsTicket, "path" | "user" | "dfsToken" | "namenodeUrl" | "expiresMs">,
): WebResponse {
  const noredirect = boolParam(req.query, "noredirect", false);
  const now = source.nowMs();
  const ticket: WebHdfsTicket = {
    ...params,
    path,
    user: who.user,
    dfsToken: source.dfsTokenFor(who.user, source.transferMaxMs),
    namenodeUrl: source.webUrl(),
    expiresMs: now + source.ticketLifetimeMs,
  };
  const query = new URLSearchParams({ op: params.op });
  if (params.op === "OPEN") {
    if (params.offset) query.set("offset", String(params.offset));
    if (params.length) query.set("length", String(params.length));
  }
  query.set(WEBHDFS_TICKET_PARAM, sealWebHdfsTicket(ticket, source.ticketKey()));
  const location = `${target.webUrl}${WEBHDFS_PREFIX}${encodeDfsPath(path)}?${query.toString()}`;
  if (noredirect) return { json: { Location: location } };
  return { status: 307, headers: { location }, json: { Location: location } };
}
