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
  // A job whose DAG (with its record) is larger than the resource manager's state store takes in one write (etcd's
  // request limit when the resource managers are highly available).
  DAG_TOO_LARGE: GrpcStatus.INVALID_ARGUMENT,
  TRACE_MALFORMED: GrpcStatus.INVALID_ARGUMENT,
  CONFIG_INVALID: GrpcStatus.INVALID_ARGUMENT,
  // Things that do not exist.
  APP_NOT_FOUND: GrpcStatus.NOT_FOUND,
  APP_ATTEMPT_UNKNOWN: GrpcStatus.FAILED_PRECONDITION,
  // A submission named an application id that is not one this resource manager reserved for the caller and that no
  // job has used yet (GetNewApplication hands them out).
  APP_ID_INVALID: GrpcStatus.INVALID_ARGUMENT,
  // An application event its state does not accept (resourcemanager/app-state.ts): a bug or a stale job manager.
  APP_INVALID_TRANSITION: GrpcStatus.FAILED_PRECONDITION,
  // An event another state machine (attempt, container, node, job-manager task) does not accept in its state: a bug.
  STATE_INVALID_TRANSITION: GrpcStatus.INTERNAL,
  NODE_NOT_REGISTERED: GrpcStatus.FAILED_PRECONDITION,
  // A node id no resource manager has ever seen (a typo in `harvest admin drain`).
  NODE_NOT_FOUND: GrpcStatus.NOT_FOUND,
  // A job admission control can never admit: it needs more than the harvestable capacity even when the cluster is idle.
  ADMISSION_IMPOSSIBLE: GrpcStatus.FAILED_PRECONDITION,
  CONTAINER_NOT_FOUND: GrpcStatus.NOT_FOUND,
  CONTAINER_TOKEN_INVALID: GrpcStatus.PERMISSION_DENIED,
  CONTAINER_ALREADY_EXISTS: GrpcStatus.ALREADY_EXISTS,
  CONTAINER_LAUNCH_FAILED: GrpcStatus.INTERNAL,
  // A task's output the shuffle service does not have (its node lost it, or the container never ran here).
  SHUFFLE_OUTPUT_NOT_FOUND: GrpcStatus.NOT_FOUND,
  // A fetch of the outputs of a container that is still running.
  SHUFFLE_OUTPUT_NOT_READY: GrpcStatus.FAILED_PRECONDITION,
  // A container's local resource could not be fetched: not in the DFS, not readable by its submitter, not public.
  LOCALIZATION_FAILED: GrpcStatus.FAILED_PRECONDITION,
  // A vertex's DFS input cannot be split: a path is missing or not the submitter's to read, or it has too many splits.
  JOB_INPUT_INVALID: GrpcStatus.FAILED_PRECONDITION,
  // An archive resource the node manager will not unpack: an entry that would land outside its directory, a device
  // file, a zip bomb, a damaged or unknown format (nodemanager/archive-unpack.ts).
  ARCHIVE_REFUSED: GrpcStatus.FAILED_PRECONDITION,
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
  // A highly available master cannot reach its coordination service (etcd): nothing it would write can be durable.
  COORDINATION_UNAVAILABLE: GrpcStatus.UNAVAILABLE,
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
  // A write waited its whole deadline (writeWaitMs, `fs put --wait`) for a datanode that could take its next block:
  // the datanodes stayed busy with their primary tenants, full, or out of service (details say how many of each).
  DFS_DATANODES_UNAVAILABLE: GrpcStatus.UNAVAILABLE,
  DFS_READ_FAILED: GrpcStatus.UNAVAILABLE,
  // HDFS permissions refused the caller (details: path, user, access).
  DFS_PERMISSION_DENIED: GrpcStatus.PERMISSION_DENIED,
  LOCAL_FILE_EXISTS: GrpcStatus.ALREADY_EXISTS,
  // Who is calling, and whether they may.
  UNAUTHENTICATED: GrpcStatus.UNAUTHENTICATED,
  PERMISSION_DENIED: GrpcStatus.PERMISSION_DENIED,
  // A delegation token to cancel that the namenode did not issue, or that has expired: there is nothing to cancel.
  DELEGATION_TOKEN_INVALID: GrpcStatus.INVALID_ARGUMENT,
  CA_EXISTS: GrpcStatus.ALREADY_EXISTS,
  CA_NOT_FOUND: GrpcStatus.NOT_FOUND,
  // The web server has no page, API resource or asset at that path.
  WEB_NOT_FOUND: GrpcStatus.NOT_FOUND,
  // HA (docs/ha.md). A standby master refused a call: only the active serves (details: the active's advertised address
  // when known); callers made from a list of addresses retry there (common/failover.ts).
  NOT_ACTIVE: GrpcStatus.UNAVAILABLE,
  // A worker refused a message from a master of an older term than one it has already heard from (fencing).
  STALE_EPOCH: GrpcStatus.FAILED_PRECONDITION,
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

/** No details. */
type NoDetails = { readonly [key: string]: never };
/** A request or option field that is wrong (`vertices[0].parallelism`, `--policy`). */
interface FieldDetails {
  /** The offending field, by its path in the request or options. */
  field?: string;
}
/** A file read line by line that has a bad line (1-based `line`, as a decimal string). */
interface FileLineDetails {
  file?: string;
  line?: string;
  reason?: string;
}

/**
 * The details each error code carries, by code: `new HarvestError(code, message, { details })` is type-checked against
 * it and `detailsOf(err, code)` reads it. Every value is a string: details travel as a JSON object of strings in gRPC
 * trailers (`toServiceError`) and in the block transfer protocol's ERROR frame, and decode to the same.
 */
export interface ErrorDetails {
  INVALID_ARGUMENT: FieldDetails & {
    /** The command-line flag that is wrong (`--seed`). */
    flag?: string;
    file?: string;
    spec?: string;
    /** The job a queue refused (admission). */
    appId?: string;
  };
  DAG_MALFORMED_JSON: FieldDetails & { position?: string; line?: string; column?: string };
  DAG_INVALID_FIELD: FieldDetails & { line?: string };
  DAG_CYCLE: FieldDetails & { cycle?: string; vertices?: string };
  DAG_UNKNOWN_VERTEX: FieldDetails & { vertex?: string };
  DAG_DUPLICATE_NAME: FieldDetails;
  DAG_BAD_PARALLELISM: FieldDetails;
  DAG_ONE_TO_ONE_MISMATCH: FieldDetails;
  DAG_RESOURCES_TOO_LARGE: FieldDetails;
  /** `bytes`: the job's record as it would be stored; `limitBytes`: the most the store takes (decimal strings). */
  DAG_TOO_LARGE: FieldDetails & { bytes?: string; limitBytes?: string };
  TRACE_MALFORMED: FieldDetails &
    FileLineDetails & {
      job?: string;
      task?: string;
      source?: string;
      dir?: string;
      /** How many trace files were tried. */
      files?: string;
    };
  CONFIG_INVALID: FieldDetails & { file?: string; spec?: string; dir?: string; line?: string; reason?: string };
  APP_NOT_FOUND: { appId?: string };
  APP_ATTEMPT_UNKNOWN: { appId?: string };
  /** `reason`: "malformed", "not-reserved" (never, or its reservation lapsed), "used", "reserved-by-another-user". */
  APP_ID_INVALID: { appId?: string; reason?: string };
  APP_INVALID_TRANSITION: TransitionDetails;
  STATE_INVALID_TRANSITION: TransitionDetails & {
    /** Which state machine refused (`attempt`, `container`, `node`, `task`). */
    machine: string;
    /** The id of the thing that was to change. */
    id?: string;
  };
  NODE_NOT_REGISTERED: { nodeId?: string };
  NODE_NOT_FOUND: { nodeId?: string };
  ADMISSION_IMPOSSIBLE: { demandMilli?: string; policy?: string };
  CONTAINER_NOT_FOUND: FieldDetails;
  CONTAINER_TOKEN_INVALID: NoDetails;
  CONTAINER_ALREADY_EXISTS: FieldDetails;
  CONTAINER_LAUNCH_FAILED: FieldDetails;
  SHUFFLE_OUTPUT_NOT_FOUND: NoDetails;
  SHUFFLE_OUTPUT_NOT_READY: NoDetails;
  /**
   * The resource's name in the container's directory, its DFS path, and the code of the failure behind it; for an
   * archive refused (cause ARCHIVE_REFUSED), the entry and the reason.
   */
  LOCALIZATION_FAILED: { resource?: string; path?: string; cause?: string; entry?: string; reason?: string };
  /**
   * `entry`: the archive's entry to blame (absent: the archive as a whole); `reason`: "unsafe-path", "link-outside",
   * "special-file", "duplicate", "too-large", "too-many-entries", "corrupt" or "unsupported".
   */
  ARCHIVE_REFUSED: { entry?: string; reason: string };
  /** The vertex, the input path, and the code of the failure behind it. */
  JOB_INPUT_INVALID: { vertex?: string; path?: string; cause?: string };
  NODE_INSUFFICIENT_RESOURCES: NoDetails;
  APP_ALREADY_FINISHED: NoDetails;
  CLUSTER_NOT_FOUND: NoDetails;
  TENANT_NOT_FOUND: { name?: string };
  TENANT_BAD_NAME: FieldDetails;
  HISTORY_TOO_LARGE: FieldDetails;
  CLUSTER_ALREADY_RUNNING: NoDetails;
  DAEMON_ALREADY_RUNNING: NoDetails;
  COORDINATION_UNAVAILABLE: NoDetails;
  DAEMON_NOT_RUNNING: NoDetails;
  /** A daemon object asked to start twice, or to report itself started after a stop (common/lifecycle.ts). */
  DAEMON_INVALID_TRANSITION: { daemon: string; from: string; event: string };
  POWER_DOMAIN_BAD_PATH: FieldDetails;
  POWER_DOMAIN_NOT_FOUND: FieldDetails & { domain?: string };
  DFS_BAD_PATH: FieldDetails & { path?: string; src?: string; dst?: string };
  NAMENODE_FILE_NOT_FOUND: { path?: string };
  NAMENODE_FILE_EXISTS: { path?: string };
  NAMENODE_NOT_A_DIRECTORY: { path?: string };
  NAMENODE_IS_A_DIRECTORY: { path?: string };
  NAMENODE_DIRECTORY_NOT_EMPTY: { path?: string };
  NAMENODE_PARENT_NOT_FOUND: { path?: string };
  NAMENODE_SAFE_MODE: { blocksReported?: string; blocksTotal?: string };
  /**
   * Live datanodes (decimal strings) and, of them, how many were excluded by the client, out of service, busy with
   * their primary tenant, or full (common/placement-refusal.ts).
   */
  NAMENODE_NOT_ENOUGH_DATANODES: PlacementRefusalDetails;
  NAMENODE_LEASE_MISMATCH: { path?: string };
  NAMENODE_FILE_INCOMPLETE: { path?: string; visibleBytes?: string };
  NAMENODE_BLOCK_MISMATCH: NoDetails;
  /** `datanodeId`: the first unknown one; `unknown`: all of them, comma-separated. */
  NAMENODE_DATANODE_NOT_FOUND: { datanodeId?: string; unknown?: string };
  DATANODE_PRIMARY_BUSY: NoDetails;
  DATANODE_BLOCK_NOT_FOUND: { blockId?: string };
  DATANODE_BLOCK_EXISTS: { blockId?: string };
  DATANODE_CORRUPT_BLOCK: { blockId?: string };
  DATANODE_CHECKSUM_MISMATCH: { blockId?: string };
  DATANODE_BAD_BLOCK_ID: FieldDetails;
  DATANODE_NO_SPACE: WriteFailureDetails & { blockId?: string };
  /**
   * `datanodeId`: the datanode the pipeline failed at (the one a writer excludes next); `code`: the error code that
   * datanode reported, when it reported one.
   */
  DATANODE_PIPELINE_FAILED: { datanodeId?: string; code?: string };
  DATANODE_PROTOCOL_ERROR: FieldDetails;
  DATANODE_BAD_TOKEN: NoDetails;
  DATANODE_SHORT_CIRCUIT_REFUSED: { blockId?: string };
  DFS_WRITE_FAILED: WriteFailureDetails;
  /** The refusal last met (as NAMENODE_NOT_ENOUGH_DATANODES's), the path, and how long the write waited (ms). */
  DFS_DATANODES_UNAVAILABLE: PlacementRefusalDetails & { path?: string; waitedMs?: string };
  DFS_READ_FAILED: { path?: string };
  DFS_PERMISSION_DENIED: { path?: string; user?: string; access?: string };
  LOCAL_FILE_EXISTS: FieldDetails & { path?: string };
  UNAUTHENTICATED: NoDetails;
  PERMISSION_DENIED: { identity?: string; role?: string; action?: string };
  DELEGATION_TOKEN_INVALID: NoDetails;
  CA_EXISTS: NoDetails;
  CA_NOT_FOUND: NoDetails;
  WEB_NOT_FOUND: NoDetails;
  /**
   * `active`: the active master's advertised gRPC address (host:port) when this standby knows it; `epoch`: the active
   * term it knows of (a decimal string), absent when none.
   */
  NOT_ACTIVE: { active?: string; epoch?: string };
  /** `epoch`: the term the refused message carried; `seen`: the highest term the worker has heard from (decimal). */
  STALE_EPOCH: { epoch: string; seen: string };
  UNAVAILABLE: RmWaitDetails;
  DEADLINE_EXCEEDED: RmWaitDetails;
  INTERNAL: RmWaitDetails & {
    /** The namespace call answered with nothing usable. */
    call?: string;
    /** A file the daemon needs and did not find. */
    file?: string;
  };
}

/** An event a state machine's state does not accept. */
interface TransitionDetails {
  state: string;
  event: string;
}

/** Live datanodes and why none could take a block, each a decimal string (common/placement-refusal.ts). */
interface PlacementRefusalDetails {
  live?: string;
  excluded?: string;
  decommissioning?: string;
  busy?: string;
  full?: string;
}

/** A write that gave up: its path and the datanodes it excluded (comma-separated). */
interface WriteFailureDetails {
  path?: string;
  excluded?: string;
}

/** A wait on a job that gave up because the resource manager stayed unreachable. */
interface RmWaitDetails {
  appId?: string;
  rmAddress?: string;
}

/** The details a HarvestError with code `C` carries (every key optional: details decoded from the wire are unchecked). */
export type DetailsOf<C extends ErrorCode> = Partial<ErrorDetails[C]>;

/** A Harvest domain error: a stable `code`, a human message and details typed by the code (e.g. the offending field). */
export class HarvestError<C extends ErrorCode = ErrorCode> extends Error {
  readonly code: C;
  readonly details: DetailsOf<C>;

  constructor(code: C, message: string, options: { details?: ErrorDetails[C]; cause?: unknown } = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = "HarvestError";
    this.code = code;
    this.details = options.details ?? {};
  }
}

/** True when `err` is a HarvestError with one of `codes` (any code when none are given); narrows its details. */
export function isHarvestError<C extends ErrorCode = ErrorCode>(err: unknown, ...codes: C[]): err is HarvestError<C> {
  return err instanceof HarvestError && (codes.length === 0 || codes.includes(err.code as C));
}

/** The details of `err` when it is a HarvestError with one of `codes`, else undefined. */
export function detailsOf<C extends ErrorCode>(err: unknown, ...codes: [C, ...C[]]): DetailsOf<C> | undefined {
  return isHarvestError(err, ...codes) ? err.details : undefined;
}

/** Details as they travel (a JSON object of strings); the one place details lose their type. */
function wireDetails(details: DetailsOf<ErrorCode>): Record<string, string> {
  return Object.fromEntries(Object.entries(details).map(([k, v]) => [k, String(v)]));
}

/**
 * Details decoded from the wire (gRPC trailers, a stream's call error, a block transfer ERROR frame): the peer's object
 * taken as its code's details. The one place details are not type-checked: a peer of the same build sent them typed.
 */
export function detailsFromWire(raw: unknown): ErrorDetails[ErrorCode] {
  return (raw && typeof raw === "object" && !Array.isArray(raw) ? raw : {}) as ErrorDetails[ErrorCode];
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
    const details = Object.fromEntries(
      Object.entries(wireDetails(herr.details)).map(([k, v]) => [k, forHeader(v, 512)]),
    );
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
  return { code: herr.code, message: herr.message, details: wireDetails(herr.details) };
}

/** The HarvestError a `callErrorOf` message stands for (an unknown code is INTERNAL, naming it). */
export function fromCallError(e: {
  code: string;
  message: string;
  details?: Record<string, string> | null;
}): HarvestError {
  const details = detailsFromWire(e.details);
  if (e.code in ERROR_CODES) return new HarvestError<ErrorCode>(e.code as ErrorCode, e.message, { details });
  return new HarvestError<ErrorCode>("INTERNAL", `${e.code}: ${e.message}`, { details });
}

/** Turns an error from a gRPC call back into a HarvestError; transport failures become UNAVAILABLE/DEADLINE_EXCEEDED. */
export function fromGrpcError(err: unknown): HarvestError {
  if (err instanceof HarvestError) return err;
  const serr = (err ?? {}) as Partial<ServiceError>;
  const codeValue = serr.metadata?.get(CODE_METADATA_KEY)[0];
  const message = serr.details ?? errorMessage(err);
  if (typeof codeValue === "string" && codeValue in ERROR_CODES) {
    let details: ErrorDetails[ErrorCode] = {};
    const raw = serr.metadata?.get(DETAILS_METADATA_KEY)[0];
    if (raw instanceof Buffer) {
      try {
        details = detailsFromWire(JSON.parse(raw.toString("utf8")));
      } catch {
        details = {};
      }
    }
    return new HarvestError<ErrorCode>(codeValue as ErrorCode, message, { details, cause: err });
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
