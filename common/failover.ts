/**
 * Following the active one of several masters (HDFS's failover proxy provider): an address option may name every
 * master, comma-separated ("10.0.0.1:8020,10.0.0.2:8020"). A standby refuses calls with NOT_ACTIVE, naming the active
 * when it knows it; callers move there (or to the next address) and retry within the call's deadline, unseen by the
 * code that made the call. `MasterAddresses` is the list and which one is current; `failoverClient` is the gRPC client
 * that `makeClient` (common/grpc.ts) returns for a list; workers' registered streams and the DFS client's namespace
 * channel use `MasterAddresses` to dial the next master themselves.
 */
import * as grpc from "@grpc/grpc-js";
import { EventEmitter } from "node:events";
import { fromGrpcError, HarvestError, isHarvestError } from "./errors.js";

/** The addresses of a comma-separated list (blanks around commas and empty entries ignored). */
export function splitAddresses(spec: string): string[] {
  return spec
    .split(",")
    .map((a) => a.trim())
    .filter((a) => a !== "");
}

/** True when an address option names more than one master. */
export function isAddressList(spec: string): boolean {
  return splitAddresses(spec).length > 1;
}

/**
 * The masters a caller knows, and the one it talks to now. Invariant: `list` is never empty and `index` is within it.
 * With one address every method is a no-op that returns it.
 */
export class MasterAddresses {
  readonly list: readonly string[];
  private index = 0;

  constructor(addresses: string | readonly string[]) {
    const list = typeof addresses === "string" ? splitAddresses(addresses) : [...addresses];
    if (list.length === 0) throw new HarvestError("CONFIG_INVALID", "a master's address list is empty");
    this.list = list;
  }

  /** The master to talk to now. */
  get current(): string {
    return this.list[this.index]!;
  }

  /** Whether there is anywhere else to go. */
  get many(): boolean {
    return this.list.length > 1;
  }

  /** Moves to the next address (round robin) and returns it. */
  next(): string {
    this.index = (this.index + 1) % this.list.length;
    return this.current;
  }

  /**
   * After the current master refused: moves to `active` when it is another one of the list, else to the next address,
   * and returns the new current one. An active outside the list is not followed: a standby's answer must not send
   * callers (and their tokens) anywhere else; one naming the master that refused is stale, and not followed either.
   */
  follow(active: string | undefined): string {
    const i = active === undefined ? -1 : this.list.indexOf(active.trim());
    if (i >= 0 && i !== this.index) this.index = i;
    else this.next();
    return this.current;
  }

  /**
   * Where to go after `err` ended a call or a stream sent to `from`: the active a NOT_ACTIVE names (see `follow`), else
   * the next address. Returns true when it moved to an active the error named (worth going to at once). When another
   * call already moved on from `from`, nothing moves (and it returns true: go where that one went).
   */
  afterFailure(err: unknown, from: string = this.current): boolean {
    if (from !== this.current) return true;
    const active = isHarvestError(err, "NOT_ACTIVE") ? err.details.active?.trim() : undefined;
    const named = active !== undefined && this.list.includes(active) && active !== this.current;
    this.follow(active);
    return named;
  }
}

/** The NOT_ACTIVE a standby answers with: `active` is the active's advertised gRPC host:port when the standby knows it. */
export function notActiveError(service: string, active?: string, epoch?: number): HarvestError<"NOT_ACTIVE"> {
  return new HarvestError(
    "NOT_ACTIVE",
    `this ${service} is a standby${active ? `; the active one is at ${active}` : " and knows no active one yet"}`,
    { details: { ...(active ? { active } : {}), ...(epoch ? { epoch: String(epoch) } : {}) } },
  );
}

/** True for an UNAVAILABLE that grpc-js made itself (no Harvest code): the peer is down, refused or went away. */
function transportFailure(err: grpc.ServiceError): boolean {
  return err.code === grpc.status.UNAVAILABLE && (err.metadata?.get("harvest-code").length ?? 0) === 0;
}

/**
 * Methods whose call may be sent twice: a retry after the answer was lost on a live connection does no harm. Reads
 * (Get*, List*, Stat, Fsck) and RenewLease. The Get* calls that make something (GetNewApplication's reservation, a
 * delegation or web token) only leave an unused one behind, which expires. Everything else (SubmitApplication, Create,
 * Delete, Rename, Allocate...) is not retried after a lost answer: it may have been applied, and a second Create or
 * Rename would fail or, worse, succeed twice. HDFS draws the same line (@Idempotent and @AtMostOnce; Harvest's masters
 * keep no retry cache, so there is no "at most once" here).
 */
export function isIdempotentMethod(name: string): boolean {
  return /^(Get|List)([A-Z]|$)/.test(name) || ["Stat", "Fsck", "RenewLease"].includes(name);
}

/** How a failover client waits. */
export interface FailoverTiming {
  /** How long to wait for a connection to a master before trying the next one (a host that is down drops SYNs). */
  connectTimeoutMs: number;
  /** The first wait after every master was tried in vain, doubling up to `backoffMaxMs`. */
  backoffMinMs: number;
  backoffMaxMs: number;
  /** The whole budget of a call made without a deadline. */
  noDeadlineBudgetMs: number;
}

/** @default connectTimeoutMs 2 s, backoff 50 ms to 1 s, 30 s for a call without a deadline. */
export const DEFAULT_FAILOVER_TIMING: FailoverTiming = {
  connectTimeoutMs: 2_000,
  backoffMinMs: 50,
  backoffMaxMs: 1_000,
  noDeadlineBudgetMs: 30_000,
};

type Callback = (err: grpc.ServiceError | null, res?: unknown) => void;
type RawUnary = (req: unknown, md: grpc.Metadata, opts: grpc.CallOptions, cb: Callback) => grpc.ClientUnaryCall;

/** The per-list state behind a failover client: one real client per master, made on first use. */
export class Failover<C extends grpc.Client> {
  readonly masters: MasterAddresses;
  private readonly clients = new Map<string, C>();
  private closed = false;

  constructor(
    addresses: string | readonly string[],
    private readonly make: (address: string) => C,
    readonly timing: FailoverTiming = DEFAULT_FAILOVER_TIMING,
  ) {
    this.masters = new MasterAddresses(addresses);
  }

  /** The real client of `address`. */
  clientOf(address: string): C {
    let c = this.clients.get(address);
    if (!c) {
      c = this.make(address);
      this.clients.set(address, c);
    }
    return c;
  }

  /** The real client of the current master. */
  get current(): C {
    return this.clientOf(this.masters.current);
  }

  close(): void {
    this.closed = true;
    for (const c of this.clients.values()) c.close();
    this.clients.clear();
  }

  /**
   * The client of the first master, from the current one on, that has (or makes within `connectTimeoutMs`) a
   * connection; waits with backoff between rounds until `deadline`, then fails with UNAVAILABLE. A connection says
   * nothing of the role: the caller learns that from the answer.
   */
  async connected(deadline: number, isCancelled: () => boolean = () => false): Promise<{ address: string; client: C }> {
    const backoff = new RoundBackoff(this.masters.list.length, this.timing);
    for (;;) {
      if (this.closed || isCancelled()) throw new HarvestError("UNAVAILABLE", "the client is closed");
      const address = this.masters.current;
      const client = this.clientOf(address);
      if (await connect(client, Math.min(deadline, Date.now() + this.timing.connectTimeoutMs)))
        return { address, client };
      const tried = address;
      if (this.masters.current === address) this.masters.next();
      if (!(await backoff.wait(false, deadline)))
        throw new HarvestError("UNAVAILABLE", `no master reachable (last tried ${tried})`);
    }
  }

  /**
   * One unary call with failover (see the file comment): each attempt goes to a connected master; NOT_ACTIVE moves to
   * the active it names and tries again; a connection lost with the call on it is retried only for an idempotent
   * method; any other answer, success or error, is the call's.
   */
  invoke(method: string, req: unknown, metadata: grpc.Metadata, options: grpc.CallOptions, cb: Callback): Handle {
    const handle = new Handle();
    const given = options.deadline;
    const deadline =
      given === undefined
        ? Date.now() + this.timing.noDeadlineBudgetMs
        : given instanceof Date
          ? given.getTime()
          : given;
    const backoff = new RoundBackoff(this.masters.list.length, this.timing);
    const attempt = async (): Promise<grpc.ServiceError | null> => {
      let last: grpc.ServiceError | undefined;
      for (;;) {
        let address: string, client: C;
        try {
          ({ address, client } = await this.connected(deadline, () => handle.cancelled));
        } catch (err) {
          if (handle.cancelled) return cancelledError();
          return last ?? unavailableError(fromGrpcError(err).message);
        }
        const [err, res] = await new Promise<[grpc.ServiceError | null, unknown]>((resolve) => {
          const raw = (client as unknown as Record<string, RawUnary>)[method]!;
          handle.inFlight = raw.call(client, req, metadata.clone(), options, (e, r) => resolve([e, r]));
        });
        handle.inFlight = undefined;
        if (!err) {
          handle.result = res;
          return null;
        }
        if (handle.cancelled) return err;
        const herr = fromGrpcError(err);
        if (isHarvestError(herr, "NOT_ACTIVE")) {
          // A standby did nothing with the call: sending it to the active is safe for any method.
          const named = this.masters.afterFailure(herr, address);
          last = err;
          if (!(await backoff.wait(named, deadline))) return err;
        } else if (transportFailure(err) && isIdempotentMethod(method)) {
          // The connection was up when the call went out: the master may have applied it, so only a call that may
          // run twice is sent again (to the next master: this one just went away).
          this.masters.afterFailure(herr, address);
          last = err;
          if (!(await backoff.wait(false, deadline))) return err;
        } else {
          // Any other error is the call's. After a lost connection (the call may have been applied, so it is not sent
          // again) the next call tries the next master: a standby sends it back here if this one is still active.
          if (transportFailure(err)) this.masters.afterFailure(herr, address);
          return err;
        }
      }
    };
    attempt().then(
      (err) => (err ? cb(err) : cb(null, handle.result)),
      (err: unknown) => cb(unavailableError(fromGrpcError(err).message)),
    );
    return handle;
  }
}

/**
 * Waits between attempts: none while going round the masters the first time (or straight to an active an answer
 * named), then `backoffMinMs` doubling to `backoffMaxMs` per round. Resolves false when the wait would pass `deadline`.
 */
class RoundBackoff {
  private hops = 0;
  private delayMs: number;

  constructor(
    private readonly masters: number,
    private readonly timing: FailoverTiming,
  ) {
    this.delayMs = timing.backoffMinMs;
  }

  async wait(named: boolean, deadline: number): Promise<boolean> {
    this.hops++;
    if (named && this.hops <= this.masters) return Date.now() < deadline;
    if (this.hops < this.masters) return Date.now() < deadline;
    if (Date.now() + this.delayMs >= deadline) return false;
    await new Promise((r) => setTimeout(r, this.delayMs));
    this.delayMs = Math.min(this.delayMs * 2, this.timing.backoffMaxMs);
    this.hops = 0;
    return true;
  }
}

/**
 * Whether `client` has a connection, or makes one before `until`. A channel in TRANSIENT_FAILURE failed its last
 * attempt (grpc-js keeps it there, trying again in the background, until one succeeds): that master is skipped now.
 * A call is sent only on a connection that is up, so a failure before one is up never leaves a call half done.
 */
async function connect(client: grpc.Client, until: number): Promise<boolean> {
  const channel = client.getChannel();
  let state = channel.getConnectivityState(true);
  while (state !== grpc.connectivityState.READY) {
    if (state === grpc.connectivityState.TRANSIENT_FAILURE || state === grpc.connectivityState.SHUTDOWN) return false;
    if (Date.now() >= until) return false;
    const from = state;
    const changed = await new Promise<boolean>((resolve) =>
      channel.watchConnectivityState(from, until, (err) => resolve(!err)),
    );
    if (!changed) return false;
    state = channel.getConnectivityState(true);
  }
  return true;
}

/** What a failover client's unary method returns in place of grpc-js's call object: it can be cancelled. */
class Handle extends EventEmitter {
  cancelled = false;
  inFlight: grpc.ClientUnaryCall | undefined;
  result: unknown;

  cancel(): void {
    this.cancelled = true;
    this.inFlight?.cancel();
  }

  getPeer(): string {
    return this.inFlight?.getPeer() ?? "";
  }
}

function serviceError(code: grpc.status, details: string): grpc.ServiceError {
  return Object.assign(new Error(`${code} ${grpc.status[code]}: ${details}`), {
    code,
    details,
    metadata: new grpc.Metadata(),
  });
}

function unavailableError(details: string): grpc.ServiceError {
  return serviceError(grpc.status.UNAVAILABLE, details);
}

function cancelledError(): grpc.ServiceError {
  return serviceError(grpc.status.CANCELLED, "Cancelled on client");
}

const FAILOVER = Symbol("failover");

type ServiceCtor = { service?: grpc.ServiceDefinition };

/**
 * A client of the service `ctor` serves, at whichever of `addresses` is active: its unary methods fail over (see
 * `Failover.invoke`); streaming methods and everything else go to the current master's client; `close()` closes them
 * all. Callers use it as the client `ctor` makes (`call(client, client.Method, req)`).
 */
export function failoverClient<C extends grpc.Client>(
  ctor: new (...args: never[]) => C,
  addresses: string | readonly string[],
  make: (address: string) => C,
  timing?: FailoverTiming,
): C {
  const state = new Failover(addresses, make, timing);
  // Both spellings of each unary method (SubmitApplication, submitApplication) lead to its proto name.
  const unaryNames = new Map<string | symbol, string>();
  for (const [name, def] of Object.entries((ctor as ServiceCtor).service ?? {})) {
    if (def.requestStream || def.responseStream) continue;
    unaryNames.set(name, name);
    if (def.originalName) unaryNames.set(def.originalName, name);
  }
  const wrappers = new Map<string, (...args: unknown[]) => Handle>();
  const wrapper = (name: string): ((...args: unknown[]) => Handle) => {
    let w = wrappers.get(name);
    if (!w) {
      w = (...args: unknown[]): Handle => {
        // grpc-js's overloads: (req, [metadata], [options], callback).
        const cb = args.pop() as Callback;
        const [req, a, b] = args;
        const metadata = a instanceof grpc.Metadata ? a : new grpc.Metadata();
        const options = ((a instanceof grpc.Metadata ? b : a) ?? {}) as grpc.CallOptions;
        return state.invoke(name, req, metadata, options, cb);
      };
      wrappers.set(name, w);
    }
    return w;
  };
  const target = Object.create((ctor as unknown as { prototype: object }).prototype) as C;
  return new Proxy(target, {
    get(_target, prop) {
      if (prop === FAILOVER) return state;
      if (prop === "close") return () => state.close();
      const unary = unaryNames.get(prop);
      if (unary !== undefined) return wrapper(unary);
      const current = state.current;
      const value: unknown = Reflect.get(current, prop, current);
      return typeof value === "function" ? (value as (...a: unknown[]) => unknown).bind(current) : value;
    },
  });
}

/** The failover state of a client `failoverClient` made; undefined for a client of one address. */
export function failoverOf<C extends grpc.Client>(client: C): Failover<C> | undefined {
  return (client as unknown as { [FAILOVER]?: Failover<C> })[FAILOVER];
}
