/**
 * The coordination service HA masters share: an etcd ensemble (3.4), reached with the cluster CA's mutual TLS and the
 * masters' certificate (CN `harvest-master`, the only etcd user allowed Harvest's keys). Everything Harvest keeps there
 * lives under `/harvest/<clusterId>/`; each master service has its own folder below (`nn/`, `rm/`).
 *
 * Why etcd (and not ZooKeeper): it speaks gRPC through the grpc-js Harvest already uses, a transaction can compare a
 * key's create revision (the leader key's is the fencing epoch, see election.ts), leases are sessions, watches tail a
 * log, and it authenticates clients by the CN of a certificate from the cluster CA. docs/ha.md says how to run it.
 */
import { readFileSync } from "node:fs";
import { BrokenCircuitError, ExponentialBackoff, noop } from "cockatiel";
import type { IDefaultPolicyContext, IPolicy } from "cockatiel";
import { castGrpcError, Etcd3, GRPCDeadlineExceededError, GRPCUnavailableError } from "etcd3";
import type { IOptions, Namespace } from "etcd3";
import { HarvestError } from "../errors.js";

/** How a master reaches the coordination service (a daemon option; undefined: no HA, LevelDB stores as always). */
export interface HaCoordination {
  /** The members' client URLs: `https://host:2379`, one per member. */
  endpoints: string[];
  /** The cluster CA's certificate (PEM file). */
  ca: string;
  /** The masters' certificate (CN harvest-master) and its key (PEM files). */
  cert: string;
  key: string;
  /** Keys live under `/harvest/<clusterId>/`: one ensemble may serve several clusters. @default "harvest" */
  clusterId?: string;
  /** The election session's lifetime (s): how long after losing its host an active stays active. @default 5 */
  sessionTtlS?: number;
}

/**
 * Per-call deadline of unary etcd calls: a member cut off answers nothing, and the call moves to the next member
 * after this (etcd3 retries a deadline on another one). A healthy ensemble answers in milliseconds (a 1 MiB log
 * append in tens); a failover waits for at most one such deadline, the member's pause then keeps calls off it.
 */
const CALL_DEADLINE_MS = 2_000;
/**
 * A member that missed a deadline, refused a connection or dropped one gets no calls for this long (they go to the
 * others), unless every member is paused (then each is tried, as after a partition of this master heals). The pause
 * outlasts a failover (a session's TTL and etcd's own re-election), so no call of the new active's promotion waits on
 * the member that was lost.
 */
const MEMBER_PAUSE_MS = 10_000;
/** The longest wait before a broken watch is opened again. */
const WATCH_BACKOFF_MAX_MS = 1_000;
/** How long the first connection to a member may take (TLS included). */
const DIAL_TIMEOUT_MS = 5_000;

/**
 * A connection to a member is pinged this often, and closed when a ping goes unanswered this long: a member whose host
 * was cut off drops packets without a reset, and the streams on it (the election's watch, the lease's keep-alive)
 * would otherwise wait for TCP to give up, many seconds after the session lapsed. The members must allow pings this
 * often (etcd's `--grpc-keepalive-min-time`, 500ms in the ensembles Harvest starts; docs/ha.md).
 */
const KEEPALIVE_MS = 1_000;
const KEEPALIVE_TIMEOUT_MS = 1_500;

/**
 * Whether an etcd call failed because the member could not be reached, dropped the connection or did not answer in
 * time: the only failures that say the member is down. A cancelled stream (every election that ends cancels its lease
 * and watch streams) and etcd's own answers (an expired lease, a refused comparison, permission denied) say nothing
 * about the member.
 */
export function isMemberUnreachable(err: Error): boolean {
  const e = castGrpcError(err);
  // UNAVAILABLE from etcd itself ("etcdserver: leader changed", "no leader", "request timed out") is the member
  // answering while the ensemble elects a leader: every member says so then, and none of them is down.
  if (e instanceof GRPCUnavailableError) return !/etcdserver:/.test(e.message);
  return e instanceof GRPCDeadlineExceededError;
}

/**
 * Whether etcd refused a call because its users or roles changed between the member's permission check and the
 * request's turn in the log ("etcdserver: revision of auth store is old"): the request was not applied, and sent
 * again it is checked against the new auth store. Right after `auth enable`, or while an operator grants a role, any
 * call may meet it; etcd's Go client sends such calls again, and so does Harvest's.
 */
export function isAuthRevisionOld(err: Error): boolean {
  return /revision of auth store is old/.test(err.message);
}

/**
 * How many times a call refused with {@link isAuthRevisionOld} is sent, to the same member, waiting 20 ms doubling to
 * at most AUTH_OLD_WAIT_MAX_MS (each wait jittered by -50 % to +50 %), about 1.5 s in all.
 */
const AUTH_OLD_RETRIES = 8;
const AUTH_OLD_WAIT_MAX_MS = 320;

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

/** Which members are paused (see MEMBER_PAUSE_MS), shared by the per-member policies of one client. */
class MemberPauses {
  private readonly until = new Map<string, number>();

  add(member: string): void {
    if (!this.until.has(member)) this.until.set(member, 0);
  }

  /** Whether to skip `member` now: it is paused and some other member is not. */
  skip(member: string): boolean {
    const now = Date.now();
    if ((this.until.get(member) ?? 0) <= now) return false;
    return [...this.until].some(([other, until]) => other !== member && until <= now);
  }

  pause(member: string): void {
    this.until.set(member, Date.now() + MEMBER_PAUSE_MS);
  }

  resume(member: string): void {
    this.until.set(member, 0);
  }
}

/** etcd3's policy for one member: skips it while paused, pauses it on {@link isMemberUnreachable}. */
function memberPolicy(member: string, pauses: MemberPauses): IPolicy {
  pauses.add(member);
  return {
    _altReturn: undefined as never,
    onSuccess: noop.onSuccess,
    onFailure: noop.onFailure,
    async execute<T>(fn: (context: IDefaultPolicyContext) => PromiseLike<T> | T, signal?: AbortSignal): Promise<T> {
      // Thrown before calling through, etcd3 goes to the next member.
      if (pauses.skip(member)) throw new BrokenCircuitError();
      for (let attempt = 1; ; attempt++) {
        try {
          const result = await fn({ signal: signal ?? new AbortController().signal });
          pauses.resume(member);
          return result;
        } catch (err) {
          if (err instanceof Error && isMemberUnreachable(err)) pauses.pause(member);
          if (!(err instanceof Error && isAuthRevisionOld(err)) || attempt >= AUTH_OLD_RETRIES) throw err;
          await sleep(Math.min(AUTH_OLD_WAIT_MAX_MS, 10 * 2 ** attempt) * (0.5 + Math.random()));
        }
      }
    },
  };
}

/**
 * The fault handling of every etcd client Harvest makes. Per member, {@link memberPolicy}: a member that failed with
 * {@link isMemberUnreachable} is paused for MEMBER_PAUSE_MS, its calls going to the others; never all of them.
 * etcd3's default breaker also counted CANCELLED, so three ended elections in a row on one connection cut a lone member
 * off for 5 s ("Execution prevented because the circuit breaker is open"); and a breaker per member, knowing nothing of
 * the others, could leave none to call. The retry across members stays etcd3's default.
 */
export function etcdFaultHandling(): NonNullable<IOptions["faultHandling"]> {
  const pauses = new MemberPauses();
  return {
    // A watch that broke (its member died or was cut off) is opened again soon, on another member: an election waits
    // on a watch for the leader's key to go. etcd3's default backs off up to 30 s after a few failures.
    watchBackoff: new ExponentialBackoff({ initialDelay: 100, maxDelay: WATCH_BACKOFF_MAX_MS }).next(),
    host: (member) => memberPolicy(member, pauses),
  };
}

/** Checks a coordination option as given in a daemon's options file; throws CONFIG_INVALID saying what is wrong. */
export function checkHaCoordination(value: unknown, field: string): HaCoordination {
  const bad = (why: string): never => {
    throw new HarvestError("CONFIG_INVALID", `${field} ${why}`, { details: { field } });
  };
  if (typeof value !== "object" || value === null || Array.isArray(value))
    bad('must be an object like { "endpoints": ["https://host:2379"], "ca": ..., "cert": ..., "key": ... }');
  const o = value as Record<string, unknown>;
  for (const k of Object.keys(o))
    if (!["endpoints", "ca", "cert", "key", "clusterId", "sessionTtlS"].includes(k)) bad(`.${k} is not an option`);
  if (!Array.isArray(o.endpoints) || o.endpoints.length === 0) bad(".endpoints must list the members' client URLs");
  for (const e of o.endpoints as unknown[])
    if (typeof e !== "string" || !/^https:\/\/[^/\s]+:\d+$/.test(e))
      bad(`.endpoints: ${JSON.stringify(e)} is not https://host:port (the service is always reached over TLS)`);
  for (const k of ["ca", "cert", "key"]) if (typeof o[k] !== "string" || !o[k]) bad(`.${k} must name a PEM file`);
  if (o.clusterId !== undefined && (typeof o.clusterId !== "string" || !/^[A-Za-z0-9_.-]{1,64}$/.test(o.clusterId)))
    bad(".clusterId must be 1-64 characters of [A-Za-z0-9_.-]");
  if (
    o.sessionTtlS !== undefined &&
    (typeof o.sessionTtlS !== "number" || !Number.isInteger(o.sessionTtlS) || o.sessionTtlS < 2)
  )
    bad(".sessionTtlS must be a whole number of seconds, at least 2");
  return o as unknown as HaCoordination;
}

/** A connection to the coordination service, scoped to one cluster's keys. */
export class Coordination {
  readonly client: Etcd3;
  /** `/harvest/<clusterId>/`. */
  readonly root: Namespace;
  readonly sessionTtlS: number;
  readonly clusterId: string;

  constructor(readonly options: HaCoordination) {
    this.clusterId = options.clusterId ?? "harvest";
    this.sessionTtlS = options.sessionTtlS ?? 5;
    this.client = new Etcd3({
      hosts: options.endpoints,
      credentials: {
        rootCertificate: readFileSync(options.ca),
        privateKey: readFileSync(options.key),
        certChain: readFileSync(options.cert),
      },
      dialTimeout: DIAL_TIMEOUT_MS,
      defaultCallOptions: (context) => (context.isStream ? {} : { deadline: Date.now() + CALL_DEADLINE_MS }),
      grpcOptions: {
        "grpc.keepalive_time_ms": KEEPALIVE_MS,
        "grpc.keepalive_timeout_ms": KEEPALIVE_TIMEOUT_MS,
        // Only while calls are open (a watch, a session's keep-alive, a call in flight): etcd answers pings on an idle
        // connection by closing it (its enforcement does not permit them without streams).
        "grpc.keepalive_permit_without_calls": 0,
      },
      faultHandling: etcdFaultHandling(),
    });
    this.root = this.client.namespace(`/harvest/${this.clusterId}/`);
  }

  /** The folder of one master service (`nn`, `rm`). */
  service(name: string): Namespace {
    return this.root.namespace(`${name}/`);
  }

  close(): void {
    this.client.close();
  }
}
