/**
 * Domain errors with stable codes. Codes are the contract; messages may change. One table maps each code to a gRPC
 * status; servers send the code in trailing metadata and clients turn it back into a HarvestError, so no daemon ever
 * parses message text.
 */
import { Metadata, status as GrpcStatus } from "@grpc/grpc-js";
import type { ServiceError } from "@grpc/grpc-js";

/** Every error code Harvest puts on the wire, with the gRPC status it travels as. */
export const ERROR_CODES = {
  // Requests that are malformed or name something invalid.
  INVALID_ARGUMENT: GrpcStatus.INVALID_ARGUMENT,
  DAG_MALFORMED_JSON: GrpcStatus.INVALID_ARGUMENT,
  DAG_INVALID_FIELD: GrpcStatus.INVALID_ARGUMENT,
  DAG_CYCLE: GrpcStatus.INVALID_ARGUMENT,
  DAG_UNKNOWN_VERTEX: GrpcStatus.INVALID_ARGUMENT,
  DAG_DUPLICATE_NAME: GrpcStatus.INVALID_ARGUMENT,
  DAG_BAD_PARALLELISM: GrpcStatus.INVALID_ARGUMENT,
  DAG_ONE_TO_ONE_MISMATCH: GrpcStatus.INVALID_ARGUMENT,
  DAG_RESOURCES_TOO_LARGE: GrpcStatus.INVALID_ARGUMENT,
  TRACE_MALFORMED: GrpcStatus.INVALID_ARGUMENT,
  CONFIG_INVALID: GrpcStatus.INVALID_ARGUMENT,
  // Things that do not exist.
  APP_NOT_FOUND: GrpcStatus.NOT_FOUND,
  APP_ATTEMPT_UNKNOWN: GrpcStatus.FAILED_PRECONDITION,
  // An application event its state does not accept (resourcemanager/app-state.ts): a bug or a stale job manager.
  APP_INVALID_TRANSITION: GrpcStatus.FAILED_PRECONDITION,
  NODE_NOT_REGISTERED: GrpcStatus.FAILED_PRECONDITION,
  // A node id no resource manager has ever seen (a typo in `harvest admin drain`).
  NODE_NOT_FOUND: GrpcStatus.NOT_FOUND,
  // A job admission control can never admit: it needs more than the harvestable capacity even when the cluster is idle.
  ADMISSION_IMPOSSIBLE: GrpcStatus.FAILED_PRECONDITION,
  CONTAINER_NOT_FOUND: GrpcStatus.NOT_FOUND,
  CONTAINER_TOKEN_INVALID: GrpcStatus.PERMISSION_DENIED,
  CONTAINER_ALREADY_EXISTS: GrpcStatus.ALREADY_EXISTS,
  CONTAINER_LAUNCH_FAILED: GrpcStatus.INTERNAL,
  NODE_INSUFFICIENT_RESOURCES: GrpcStatus.RESOURCE_EXHAUSTED,
  APP_ALREADY_FINISHED: GrpcStatus.FAILED_PRECONDITION,
  CLUSTER_NOT_FOUND: GrpcStatus.NOT_FOUND,
  TENANT_NOT_FOUND: GrpcStatus.NOT_FOUND,
  TENANT_BAD_NAME: GrpcStatus.INVALID_ARGUMENT,
  HISTORY_TOO_LARGE: GrpcStatus.RESOURCE_EXHAUSTED,
  CLUSTER_ALREADY_RUNNING: GrpcStatus.ALREADY_EXISTS,
  DAEMON_ALREADY_RUNNING: GrpcStatus.ALREADY_EXISTS,
  DAEMON_NOT_RUNNING: GrpcStatus.FAILED_PRECONDITION,
  DAEMON_INVALID_TRANSITION: GrpcStatus.FAILED_PRECONDITION,
  // Power domains.
  POWER_DOMAIN_BAD_PATH: GrpcStatus.INVALID_ARGUMENT,
  POWER_DOMAIN_NOT_FOUND: GrpcStatus.NOT_FOUND,
  // The distributed file system.
  DFS_BAD_PATH: GrpcStatus.INVALID_ARGUMENT,
  NAMENODE_FILE_NOT_FOUND: GrpcStatus.NOT_FOUND,
  NAMENODE_FILE_EXISTS: GrpcStatus.ALREADY_EXISTS,
  NAMENODE_NOT_A_DIRECTORY: GrpcStatus.FAILED_PRECONDITION,
  NAMENODE_IS_A_DIRECTORY: GrpcStatus.FAILED_PRECONDITION,
  NAMENODE_DIRECTORY_NOT_EMPTY: GrpcStatus.FAILED_PRECONDITION,
  NAMENODE_PARENT_NOT_FOUND: GrpcStatus.NOT_FOUND,
  NAMENODE_SAFE_MODE: GrpcStatus.UNAVAILABLE,
  NAMENODE_NOT_ENOUGH_DATANODES: GrpcStatus.RESOURCE_EXHAUSTED,
  NAMENODE_LEASE_MISMATCH: GrpcStatus.FAILED_PRECONDITION,
  NAMENODE_FILE_INCOMPLETE: GrpcStatus.FAILED_PRECONDITION,
  NAMENODE_BLOCK_MISMATCH: GrpcStatus.FAILED_PRECONDITION,
  // An admin call named a datanode the namenode has never seen register (details: datanodeId, unknown).
  NAMENODE_DATANODE_NOT_FOUND: GrpcStatus.NOT_FOUND,
  DATANODE_PRIMARY_BUSY: GrpcStatus.UNAVAILABLE,
  DATANODE_BLOCK_NOT_FOUND: GrpcStatus.NOT_FOUND,
  DATANODE_BLOCK_EXISTS: GrpcStatus.ALREADY_EXISTS,
  DATANODE_CORRUPT_BLOCK: GrpcStatus.DATA_LOSS,
  DATANODE_CHECKSUM_MISMATCH: GrpcStatus.DATA_LOSS,
  DATANODE_BAD_BLOCK_ID: GrpcStatus.INVALID_ARGUMENT,
  DATANODE_NO_SPACE: GrpcStatus.RESOURCE_EXHAUSTED,
  DATANODE_PIPELINE_FAILED: GrpcStatus.UNAVAILABLE,
  DATANODE_PROTOCOL_ERROR: GrpcStatus.INVALID_ARGUMENT,
  DATANODE_BAD_TOKEN: GrpcStatus.PERMISSION_DENIED,
  // A short-circuit read was refused: the datanode does not serve them, or the client is not on its server.
  DATANODE_SHORT_CIRCUIT_REFUSED: GrpcStatus.FAILED_PRECONDITION,
  DFS_WRITE_FAILED: GrpcStatus.UNAVAILABLE,
  DFS_READ_FAILED: GrpcStatus.UNAVAILABLE,
  // HDFS permissions refused the caller (details: path, user, access).
  DFS_PERMISSION_DENIED: GrpcStatus.PERMISSION_DENIED,
  LOCAL_FILE_EXISTS: GrpcStatus.ALREADY_EXISTS,
  // Who is calling, and whether they may.
  UNAUTHENTICATED: GrpcStatus.UNAUTHENTICATED,
  PERMISSION_DENIED: GrpcStatus.PERMISSION_DENIED,
  CA_EXISTS: GrpcStatus.ALREADY_EXISTS,
  CA_NOT_FOUND: GrpcStatus.NOT_FOUND,
  // The web server has no page, API resource or asset at that path.
  WEB_NOT_FOUND: GrpcStatus.NOT_FOUND,
  // The peer is not there or not serving.
  UNAVAILABLE: GrpcStatus.UNAVAILABLE,
  DEADLINE_EXCEEDED: GrpcStatus.DEADLINE_EXCEEDED,
  INTERNAL: GrpcStatus.INTERNAL,
} as const;

/** A stable error code. */
export type ErrorCode = keyof typeof ERROR_CODES;

const CODE_METADATA_KEY = "harvest-code";
// Binary ("-bin") metadata: details may hold any text (a field name from user input), which ASCII metadata rejects.
const DETAILS_METADATA_KEY = "harvest-details-bin";

/** A Harvest domain error: a stable `code`, a human message and optional typed details (e.g. the offending field). */
export class HarvestError extends Error {
  readonly code: ErrorCode;
  readonly details: Record<string, string>;

  constructor(code: ErrorCode, message: string, options: { details?: Record<string, string>; cause?: unknown } = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = "HarvestError";
    this.code = code;
    this.details = options.details ?? {};
  }
}

/** True when `err` is a HarvestError with one of `codes` (any code when none are given). */
export function isHarvestError(err: unknown, ...codes: ErrorCode[]): err is HarvestError {
  return err instanceof HarvestError && (codes.length === 0 || codes.includes(err.code));
}

/** Turns any thrown value into the error object a gRPC handler passes to its callback. */
/** `err` itself when it is a HarvestError, else an INTERNAL one carrying its message (and it as the cause). */
export function asHarvestError(err: unknown): HarvestError {
  return err instanceof HarvestError ? err : new HarvestError("INTERNAL", errorMessage(err), { cause: err });
}

export function toServiceError(err: unknown): Partial<ServiceError> {
  const herr = asHarvestError(err);
  const metadata = new Metadata();
  metadata.set(CODE_METADATA_KEY, herr.code);
  if (Object.keys(herr.details).length > 0) {
    const details = Object.fromEntries(Object.entries(herr.details).map(([k, v]) => [k, forHeader(String(v), 512)]));
    metadata.set(DETAILS_METADATA_KEY, Buffer.from(JSON.stringify(details), "utf8"));
  }
  return { code: ERROR_CODES[herr.code], details: forHeader(herr.message, MAX_WIRE_MESSAGE_CHARS), metadata };
}

// The message and details travel in HTTP/2 trailers: one over the peer's header-list limit (a request's 100 kB name
// quoted back) broke the whole connection, and grpc-js throws on a lone surrogate (a user's text cut mid-pair, as
// JSON.parse's messages do), which left the call unanswered. Both are bounded and made well-formed here.
const MAX_WIRE_MESSAGE_CHARS = 2_000;

/** `text` cut to `max` characters (marked "..."), with every lone UTF-16 surrogate replaced by U+FFFD. */
function forHeader(text: string, max: number): string {
  const cut = text.length > max ? text.slice(0, max) + "..." : text;
  return cut.replace(/[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/g, "\uFFFD");
}

/**
 * An error as a message field (a call answered on a stream, e.g. ClientNamenode.NamespaceCalls): the HarvestError's
 * code, message and details, as a unary call carries them in its status.
 */
export function callErrorOf(err: unknown): { code: string; message: string; details: Record<string, string> } {
  const herr = asHarvestError(err);
  return { code: herr.code, message: herr.message, details: { ...herr.details } };
}

/** The HarvestError a `callErrorOf` message stands for (an unknown code is INTERNAL, naming it). */
export function fromCallError(e: {
  code: string;
  message: string;
  details?: Record<string, string> | null;
}): HarvestError {
  const details = { ...(e.details ?? {}) };
  if (e.code in ERROR_CODES) return new HarvestError(e.code as ErrorCode, e.message, { details });
  return new HarvestError("INTERNAL", `${e.code}: ${e.message}`, { details });
}

/** Turns an error from a gRPC call back into a HarvestError; transport failures become UNAVAILABLE/DEADLINE_EXCEEDED. */
export function fromGrpcError(err: unknown): HarvestError {
  if (err instanceof HarvestError) return err;
  const serr = (err ?? {}) as Partial<ServiceError>;
  const codeValue = serr.metadata?.get(CODE_METADATA_KEY)[0];
  const message = serr.details ?? errorMessage(err);
  if (typeof codeValue === "string" && codeValue in ERROR_CODES) {
    let details: Record<string, string> = {};
    const raw = serr.metadata?.get(DETAILS_METADATA_KEY)[0];
    if (raw instanceof Buffer) {
      try {
        details = JSON.parse(raw.toString("utf8")) as Record<string, string>;
      } catch {
        details = {};
      }
    }
    return new HarvestError(codeValue as ErrorCode, message, { details, cause: err });
  }
  switch (serr.code) {
    case GrpcStatus.UNAVAILABLE:
      return new HarvestError("UNAVAILABLE", message, { cause: err });
    case GrpcStatus.DEADLINE_EXCEEDED:
      return new HarvestError("DEADLINE_EXCEEDED", message, { cause: err });
    case GrpcStatus.INVALID_ARGUMENT:
      return new HarvestError("INVALID_ARGUMENT", message, { cause: err });
    default:
      return new HarvestError("INTERNAL", message, { cause: err });
  }
}

/** The message of any thrown value. */
export function errorMessage(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}
