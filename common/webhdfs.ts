/**
 * What the namenode's and the datanodes' WebHDFS sides share (HDFS's WebHDFS REST API): the URL layout, the query
 * parameters, WebHDFS's error shape, and the ticket a redirect carries.
 *
 * As in HDFS, the namenode answers OPEN and CREATE with a 307 to a datanode's HTTPS server, which streams the data. The
 * redirect's `delegation` parameter carries a ticket that stands in for the caller there (HDFS passes a delegation
 * token the same way): it names the operation, the path, the user and its parameters, expires soon, and holds the DFS
 * delegation token the datanode acts as that user with. It is sealed (AES-256-GCM) with a key derived from the
 * namenode's current block key, which every datanode holds already (common/block-token.ts): a datanode can read and
 * check it, nobody else can read or forge it. On a cluster without block keys (plaintext, `blockTokens: false`) the
 * ticket is plain JSON that only a plaintext datanode accepts, as anything a plaintext cluster hears is a claim.
 */
import { createCipheriv, createDecipheriv, createHmac, randomBytes } from "node:crypto";
import type { BlockKey, BlockKeySets } from "./block-token.js";
import { normalizeDfsPath } from "./dfs-path.js";
import { asHarvestError, HarvestError } from "./errors.js";
import { httpStatusOf } from "./web-server.js";
import type { WebResponse } from "./web-server.js";

/** Where WebHDFS paths begin. */
export const WEBHDFS_PREFIX = "/webhdfs/v1";

/** The query parameter that carries a redirect's ticket (HDFS's delegation token parameter). */
export const WEBHDFS_TICKET_PARAM = "delegation";

/** The operations a namenode redirects to a datanode. */
export type WebHdfsDataOp = "OPEN" | "CREATE";

/** What a ticket lets its holder do at a datanode, and as whom. */
export interface WebHdfsTicket {
  op: WebHdfsDataOp;
  /** The DFS path, normalized. */
  path: string;
  /** Who the namenode admitted (the certificate's or web token's name; on a plaintext cluster `user.name`). */
  user: string;
  /**
   * A DFS delegation token for `user` that the datanode's client presents to the namenode; "" on a plaintext cluster,
   * where the datanode claims `user`.
   */
  dfsToken: string;
  /** The namenode's web URL: a created file's Location names it. */
  namenodeUrl: string;
  /** OPEN: the first byte and how many (0: to the end). */
  offset?: number;
  length?: number;
  /** CREATE: its parameters, checked by the namenode already (0: the namenode's default). */
  overwrite?: boolean;
  replication?: number;
  blockSize?: number;
  /** Permission bits of the new file; absent: the namenode's default. */
  permission?: number;
  /** After this (ms since the epoch) the redirect is refused: it must be followed at once. */
  expiresMs: number;
}

// ------------------------------------------------------------------------------------------------ URL and params

/** The DFS path a WebHDFS request names (the URL path after `/webhdfs/v1`); DFS_BAD_PATH if it is not a valid one. */
export function webHdfsPath(requestPath: string): string {
  if (requestPath === WEBHDFS_PREFIX) return "/";
  if (!requestPath.startsWith(WEBHDFS_PREFIX + "/"))
    throw new HarvestError("DFS_BAD_PATH", `bad path in ${JSON.stringify(requestPath)}: it has an empty component`, {
      details: { field: "path", path: requestPath },
    });
  return normalizeDfsPath(requestPath.slice(WEBHDFS_PREFIX.length));
}

/** A DFS path in a URL: each component percent-encoded. */
export function encodeDfsPath(path: string): string {
  return path === "/" ? "/" : path.split("/").map(encodeURIComponent).join("/");
}

/** A non-negative integer query parameter (`fallback` when absent); INVALID_ARGUMENT naming it otherwise. */
export function intParam(query: URLSearchParams, name: string, fallback: number): number {
  const text = query.get(name);
  if (text === null || text === "") return fallback;
  const n = Number(text);
  if (!/^\d+$/.test(text) || !Number.isSafeInteger(n))
    throw new HarvestError("INVALID_ARGUMENT", `${name} must be a non-negative integer (got ${JSON.stringify(text)})`, {
      details: { field: name },
    });
  return n;
}

/** A `true`/`false` query parameter (any case; `fallback` when absent); INVALID_ARGUMENT naming it otherwise. */
export function boolParam(query: URLSearchParams, name: string, fallback: boolean): boolean {
  const text = (query.get(name) ?? "").toLowerCase();
  if (text === "") return fallback;
  if (text === "true" || text === "false") return text === "true";
  throw new HarvestError("INVALID_ARGUMENT", `${name} must be true or false (got ${JSON.stringify(text)})`, {
    details: { field: name },
  });
}

/** WebHDFS's `permission`: octal bits 0..777 (HDFS's 1777 sticky bit is not supported); undefined when absent. */
export function permissionParam(query: URLSearchParams): number | undefined {
  const text = query.get("permission");
  if (text === null || text === "") return undefined;
  if (!/^0?[0-7]{1,3}$/.test(text))
    throw new HarvestError(
      "INVALID_ARGUMENT",
      `permission must be octal bits 0..777 (got ${JSON.stringify(text)}; sticky and setuid bits are not supported)`,
      { details: { field: "permission" } },
    );
  return parseInt(text, 8);
}

// ------------------------------------------------------------------------------------------------ errors

/** HDFS's exception for a Harvest error code: its simple name, Java class and HTTP status (WebHDFS's ExceptionHandler). */
function exceptionOf(err: HarvestError): { exception: string; javaClassName: string; status: number } {
  const io = (status: number): { exception: string; javaClassName: string; status: number } => ({
    exception: "IOException",
    javaClassName: "java.io.IOException",
    status,
  });
  switch (err.code) {
    case "NAMENODE_FILE_NOT_FOUND":
    case "NAMENODE_PARENT_NOT_FOUND":
    case "WEB_NOT_FOUND":
      return { exception: "FileNotFoundException", javaClassName: "java.io.FileNotFoundException", status: 404 };
    case "DFS_PERMISSION_DENIED":
    case "PERMISSION_DENIED":
      return {
        exception: "AccessControlException",
        javaClassName: "org.apache.hadoop.security.AccessControlException",
        status: 403,
      };
    case "NAMENODE_FILE_EXISTS":
      return {
        exception: "FileAlreadyExistsException",
        javaClassName: "org.apache.hadoop.fs.FileAlreadyExistsException",
        status: 403,
      };
    case "NAMENODE_DIRECTORY_NOT_EMPTY":
      return {
        exception: "PathIsNotEmptyDirectoryException",
        javaClassName: "org.apache.hadoop.fs.PathIsNotEmptyDirectoryException",
        status: 403,
      };
    case "UNAUTHENTICATED":
      return { exception: "SecurityException", javaClassName: "java.lang.SecurityException", status: 401 };
    case "DATANODE_BAD_TOKEN":
      return {
        exception: "InvalidToken",
        javaClassName: "org.apache.hadoop.security.token.SecretManager$InvalidToken",
        status: 403,
      };
    case "NOT_ACTIVE":
      return { exception: "StandbyException", javaClassName: "org.apache.hadoop.ipc.StandbyException", status: 503 };
    case "NAMENODE_SAFE_MODE":
      return {
        exception: "RetriableException",
        javaClassName: "org.apache.hadoop.ipc.RetriableException",
        status: 503,
      };
    default: {
      const status = httpStatusOf(err);
      if (status === 400)
        return {
          exception: "IllegalArgumentException",
          javaClassName: "java.lang.IllegalArgumentException",
          status: 400,
        };
      return io(status);
    }
  }
}

/**
 * An error as WebHDFS answers it: `{ "RemoteException": { exception, javaClassName, message } }` with the status HDFS
 * gives that exception, and Harvest's `{ "error": { code, message } }` beside it (stock clients read the first).
 */
export function webHdfsErrorResponse(err: unknown): WebResponse {
  const h = asHarvestError(err);
  const { exception, javaClassName, status } = exceptionOf(h);
  return {
    status,
    json: {
      RemoteException: { exception, javaClassName, message: h.message },
      error: { code: h.code, message: h.message },
    },
  };
}

// ------------------------------------------------------------------------------------------------ tickets

/** The ticket's key: derived from a block key's secret, so that no block token and no ticket share a key. */
function ticketKey(key: BlockKey): Buffer {
  return createHmac("sha256", key.secret).update("harvest webhdfs ticket v1").digest();
}

/**
 * Seals a ticket with the namenode's current block key (`wh1.<key id>.<iv>.<sealed>`), or, with none (a cluster
 * without block keys), writes it in the clear (`wh0.<json>`).
 */
export function sealWebHdfsTicket(ticket: WebHdfsTicket, key: BlockKey | undefined): string {
  const json = Buffer.from(JSON.stringify(ticket), "utf8");
  if (!key) return `wh0.${json.toString("base64url")}`;
  const iv = randomBytes(12);
  const head = `wh1.${key.keyId}`;
  const cipher = createCipheriv("aes-256-gcm", ticketKey(key), iv);
  cipher.setAAD(Buffer.from(head));
  const sealed = Buffer.concat([cipher.update(json), cipher.final(), cipher.getAuthTag()]);
  return `${head}.${iv.toString("base64url")}.${sealed.toString("base64url")}`;
}

/**
 * Opens a ticket at a datanode and checks it is for `op` on `path` and still valid: sealed with one of `keys` (the
 * namenodes' block keys), or `"off"` when the datanode holds none, where only a clear ticket is accepted, and only by a
 * plaintext datanode (`secure` false). Throws UNAUTHENTICATED (no ticket) or DATANODE_BAD_TOKEN (forged, expired, or
 * for another operation or path), saying what is wrong and nothing a stranger could use.
 */
export function openWebHdfsTicket(
  text: string | null,
  keys: BlockKeySets | "off",
  secure: boolean,
  expected: { op: WebHdfsDataOp; path: string },
  nowMs: number,
): WebHdfsTicket {
  const bad = (why: string): never => {
    throw new HarvestError("DATANODE_BAD_TOKEN", `WebHDFS ticket refused: ${why}`);
  };
  if (!text)
    throw new HarvestError(
      "UNAUTHENTICATED",
      `a datanode's WebHDFS URL needs the ${WEBHDFS_TICKET_PARAM} parameter of the namenode's redirect: ask the namenode`,
    );
  if (text.length > 16_384) bad("malformed ticket");
  const parts = text.split(".");
  let json: Buffer | undefined;
  if (parts[0] === "wh0" && parts.length === 2) {
    if (secure || keys !== "off") bad("this datanode accepts only sealed tickets");
    json = Buffer.from(parts[1]!, "base64url");
  } else if (parts[0] === "wh1" && parts.length === 4) {
    if (keys === "off") bad("this datanode holds no block keys to open a sealed ticket with");
    const keyId = Number(parts[1]);
    const sets = (Array.isArray(keys) ? keys : [keys]) as readonly ReadonlyMap<number, BlockKey>[];
    const candidates = sets
      .map((set) => set.get(keyId))
      .filter((k): k is BlockKey => k !== undefined && k.expiresMs > nowMs);
    if (candidates.length === 0) bad("sealed with an unknown or expired key");
    const iv = Buffer.from(parts[2]!, "base64url");
    const sealed = Buffer.from(parts[3]!, "base64url");
    if (iv.length !== 12 || sealed.length < 16) bad("malformed ticket");
    for (const key of candidates) {
      try {
        const decipher = createDecipheriv("aes-256-gcm", ticketKey(key), iv);
        decipher.setAAD(Buffer.from(`wh1.${parts[1]}`));
        decipher.setAuthTag(sealed.subarray(sealed.length - 16));
        json = Buffer.concat([decipher.update(sealed.subarray(0, sealed.length - 16)), decipher.final()]);
        break;
      } catch {
        // Another namenode's key of the same id (HA), or a forgery: try the next.
      }
    }
    if (!json) bad("not sealed by a namenode of this cluster");
  } else bad("malformed ticket");
  let ticket: WebHdfsTicket;
  try {
    ticket = JSON.parse(json!.toString("utf8")) as WebHdfsTicket;
  } catch {
    return bad("malformed ticket");
  }
  if (typeof ticket.user !== "string" || typeof ticket.path !== "string" || typeof ticket.dfsToken !== "string")
    bad("malformed ticket");
  if (!(ticket.expiresMs > nowMs)) bad("expired: follow the namenode's redirect at once, or ask it again");
  if (ticket.op !== expected.op) bad(`issued for ${String(ticket.op)}, not ${expected.op}`);
  if (ticket.path !== expected.path) bad("issued for another path");
  return ticket;
}

/** The newest of a namenode's block keys: the one it signs block tokens with now. */
export function newestBlockKey(keys: readonly BlockKey[]): BlockKey | undefined {
  let newest: BlockKey | undefined;
  for (const k of keys) if (!newest || k.expiresMs > newest.expiresMs) newest = k;
  return newest;
}
