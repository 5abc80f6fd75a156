/**
 * gRPC plumbing shared by every daemon and client: loading the protos (with the options the generated types assume),
 * binding servers, creating clients, and turning unary calls into promises that throw HarvestErrors.
 */
import * as grpc from "@grpc/grpc-js";
import * as protoLoader from "@grpc/proto-loader";
import { join } from "node:path";
import { errorMessage, fromGrpcError, HarvestError, toServiceError } from "./errors.js";
import { failoverClient, failoverOf, splitAddresses } from "./failover.js";
import { bindAddress } from "./net-address.js";
import { packageRoot } from "./paths.js";
import { channelCredentials } from "./tls.js";
import type { ClientTls } from "./tls.js";
import type { ProtoGrpcType as ClientProto } from "../proto/generated/application_client.js";
import type { ProtoGrpcType as TrackerProto } from "../proto/generated/resource_tracker.js";
import type { ProtoGrpcType as ContainerProto } from "../proto/generated/container_manager.js";
import type { ProtoGrpcType as NamenodeProto } from "../proto/generated/namenode.js";
import type { ProtoGrpcType as DatanodeProto } from "../proto/generated/datanode.js";
import type { ProtoGrpcType as TenantAdminProto } from "../proto/generated/tenant_admin.js";
import type { ProtoGrpcType as PowerAdminProto } from "../proto/generated/power_admin.js";
import type { ProtoGrpcType as NodeAdminProto } from "../proto/generated/node_admin.js";

/** Every Harvest service, typed from the generated proto types. */
export type HarvestProto = ClientProto["harvest"]["v1"] &
  TrackerProto["harvest"]["v1"] &
  ContainerProto["harvest"]["v1"] &
  NamenodeProto["harvest"]["v1"] &
  DatanodeProto["harvest"]["v1"] &
  TenantAdminProto["harvest"]["v1"] &
  PowerAdminProto["harvest"]["v1"] &
  NodeAdminProto["harvest"]["v1"];

// Must match the flags in scripts/gen-proto.mjs, or the generated types lie.
const LOADER_OPTIONS: protoLoader.Options = {
  keepCase: false,
  longs: Number,
  enums: String,
  defaults: true,
  oneofs: true,
};

let cached: HarvestProto | undefined;

/** The service files of `proto/` (each imports what it needs, common.proto and application_master.proto included). */
export const HARVEST_PROTO_FILES: readonly string[] = [
  "application_client.proto",
  "resource_tracker.proto",
  "container_manager.proto",
  "namenode.proto",
  "datanode.proto",
  "tenant_admin.proto",
  "power_admin.proto",
  "node_admin.proto",
];

/** Loads all .proto files of the package once. */
export function loadHarvestProto(): HarvestProto {
  if (cached) return cached;
  const protoDir = join(packageRoot(), "proto");
  const definition = protoLoader.loadSync([...HARVEST_PROTO_FILES], { ...LOADER_OPTIONS, includeDirs: [protoDir] });
  tolerateUndecodableRequests(definition);
  const loaded = grpc.loadPackageDefinition(definition) as unknown as { harvest: { v1: HarvestProto } };
  cached = loaded.harvest.v1;
  return cached;
}

/** Marks a request whose bytes did not decode (see `tolerateUndecodableRequests`). */
const UNDECODABLE = Symbol("undecodable request");

/**
 * grpc-js answers a request whose bytes do not decode with a bare INTERNAL, before any Harvest code runs. Instead
 * each server method decodes such bytes to an empty request marked UNDECODABLE, which `unary` refuses with
 * INVALID_ARGUMENT (a stream handler sees a message with no fields, which it refuses as it refuses any bad message).
 */
function tolerateUndecodableRequests(definition: protoLoader.PackageDefinition): void {
  for (const service of Object.values(definition)) {
    for (const method of Object.values(service as Record<string, unknown>)) {
      const m = method as { requestDeserialize?: (b: Buffer) => unknown } | null;
      if (typeof m !== "object" || m === null || typeof m.requestDeserialize !== "function") continue;
      const decode = m.requestDeserialize.bind(m);
      m.requestDeserialize = (bytes: Buffer): unknown => {
        try {
          return decode(bytes);
        } catch (err) {
          return { [UNDECODABLE]: errorMessage(err) };
        }
      };
    }
  }
}

export function undecodable(request: unknown): string | undefined {
  if (typeof request !== "object" || request === null) return undefined;
  return (request as { [UNDECODABLE]?: string })[UNDECODABLE];
}

/**
 * Channel options used by every server and client: keepalives notice a dead peer within seconds, and a channel whose
 * peer went away tries again at most every 2 s. gRPC's default reconnect backoff grows to 120 s, so a datanode whose
 * link came back after a 150 s partition waited 80 s to rejoin; a cluster's daemons are few and the reconnect is cheap.
 */
export const CHANNEL_OPTIONS: grpc.ChannelOptions = {
  "grpc.initial_reconnect_backoff_ms": 500,
  "grpc.max_reconnect_backoff_ms": 2_000,
  "grpc.keepalive_time_ms": 5_000,
  "grpc.keepalive_timeout_ms": 5_000,
  "grpc.keepalive_permit_without_calls": 1,
  "grpc.http2.min_ping_interval_without_data_ms": 4_000,
  "grpc.max_receive_message_length": 64 * 1024 * 1024,
};

const SERVER_OPTIONS: grpc.ServerOptions = {
  ...CHANNEL_OPTIONS,
  "grpc.http2.min_ping_interval_without_data_ms": 1_000,
  "grpc.http2.max_ping_strikes": 0,
};

/**
 * Creates a gRPC server with Harvest's options and `interceptors` (a daemon passes `grpcServerMetrics(registry)` from
 * common/metrics.ts; taken as a parameter so that job managers, tasks and the CLI never load prom-client).
 */
export function createServer(interceptors: grpc.ServerInterceptor[] = []): grpc.Server {
  return new grpc.Server({ ...SERVER_OPTIONS, ...(interceptors.length > 0 ? { interceptors } : {}) });
}

/**
 * Binds `server` on host:port (port 0 picks a free one) with `credentials` (a daemon's {@link Gate}; plaintext by
 * default) and resolves to the port bound.
 */
export function bindServer(
  server: grpc.Server,
  host: string,
  port: number,
  credentials: grpc.ServerCredentials = grpc.ServerCredentials.createInsecure(),
): Promise<number> {
  return new Promise((resolve, reject) => {
    server.bindAsync(bindAddress(host, port), credentials, (err, bound) => {
      if (err) reject(err);
      else resolve(bound);
    });
  });
}

/** Gracefully shuts a server down, forcing it after `graceMs`. */
export function shutdownServer(server: grpc.Server, graceMs = 2_000): Promise<void> {
  return new Promise((resolve) => {
    const timer = setTimeout(() => {
      server.forceShutdown();
      resolve();
    }, graceMs);
    server.tryShutdown(() => {
      clearTimeout(timer);
      resolve();
    });
  });
}

/**
 * Wraps an async handler as a gRPC unary handler: a thrown HarvestError travels with its code; any other throw becomes
 * INTERNAL. A handler can never crash the daemon.
 */
export function unary<Req, Res>(
  fn: (req: Req, call: grpc.ServerUnaryCall<Req, Res>) => Promise<Res> | Res,
): grpc.handleUnaryCall<Req, Res> {
  return (call, callback) => {
    Promise.resolve()
      .then(() => {
        const why = undecodable(call.request);
        if (why !== undefined)
          throw new HarvestError("INVALID_ARGUMENT", `the request's bytes are not a valid message: ${why}`);
        return fn(call.request, call);
      })
      .then(
        (res) => callback(null, res),
        (err: unknown) => callback(toServiceError(err) as grpc.ServiceError),
      );
  };
}

// Typed after the last overload the generated clients declare, `(argument, callback)`, because TypeScript infers from
// an overloaded method's last signature; at run time the method is called with metadata and options too.
type UnaryMethod<Req, Res> = (req: Req, cb: (err: grpc.ServiceError | null, res?: Res) => void) => unknown;
type FullUnaryMethod = (
  req: unknown,
  metadata: grpc.Metadata,
  options: grpc.CallOptions,
  cb: (err: grpc.ServiceError | null, res?: unknown) => void,
) => unknown;

/** Calls a unary method as a promise with a deadline (and optional metadata); errors come back as HarvestErrors. */
export function call<Req, Res>(
  client: grpc.Client,
  method: UnaryMethod<Req, Res>,
  req: Req,
  timeoutMs = 10_000,
  metadata: grpc.Metadata = new grpc.Metadata(),
): Promise<Res> {
  return new Promise((resolve, reject) => {
    (method as unknown as FullUnaryMethod).call(
      client,
      req,
      metadata,
      { deadline: Date.now() + timeoutMs },
      (err, res) => {
        if (err) reject(fromGrpcError(err));
        else resolve(res as Res);
      },
    );
  });
}

/** Metadata key to token value, e.g. a job manager's AM token; an empty value is not sent. */
export type CallTokens = Readonly<Record<string, string>>;

/**
 * How a client reaches the cluster: plaintext when undefined; else TLS trusting `ca`, presenting `cert`/`key` when it
 * has them, and sending `tokens` with every call. A function is read at each call, so that a token renewed after the
 * client was made (a job manager's AM token) goes with the calls that follow.
 */
export type ClientSecurity = ClientTls & { tokens?: CallTokens | (() => CallTokens) };

/** The client of `address` in `clients` (one per peer), made with {@link makeClient} and kept there on first use. */
export function cachedClient<C extends grpc.Client>(
  clients: Map<string, C>,
  ctor: new (address: string, creds: grpc.ChannelCredentials, options?: grpc.ChannelOptions) => C,
  address: string,
  security?: ClientSecurity,
): C {
  let c = clients.get(address);
  if (!c) {
    c = makeClient(ctor, address, security);
    clients.set(address, c);
  }
  return c;
}

/** The address each client {@link makeClient} made for one address was made for. */
const addressOfClient = new WeakMap<grpc.Client, string>();

/**
 * A client for one service at `address`; `options` are added to CHANNEL_OPTIONS. An address that lists several
 * masters, comma-separated, gives a client that follows the active one (common/failover.ts): callers use it as any
 * other, and a call a standby refuses goes to the active unseen.
 */
export function makeClient<C extends grpc.Client>(
  ctor: new (address: string, creds: grpc.ChannelCredentials, options?: grpc.ChannelOptions) => C,
  address: string,
  security?: ClientSecurity,
  options: grpc.ChannelOptions = {},
): C {
  if (address.includes(",")) {
    const list = splitAddresses(address);
    if (list.length > 1) return failoverClient(ctor, list, (one) => makeClient(ctor, one, security, options));
    address = list[0] ?? address;
  }
  let creds = channelCredentials(security);
  const given = security?.tokens;
  const tokensNow = typeof given === "function" ? given : () => given ?? {};
  if (security && (typeof given === "function" || Object.values(tokensNow()).some((v) => v))) {
    const perCall = grpc.credentials.createFromMetadataGenerator((_params, done) => {
      const md = new grpc.Metadata();
      for (const [k, v] of Object.entries(tokensNow())) if (v) md.set(k, v);
      done(null, md);
    });
    creds = grpc.credentials.combineChannelCredentials(creds, perCall);
  }
  const client = new ctor(address, creds, { ...CHANNEL_OPTIONS, ...options });
  addressOfClient.set(client, address);
  return client;
}

/** The master a client made by {@link makeClient} talks to now (for logs and `harvest admin ha status`). */
export function currentAddress(client: grpc.Client): string {
  const failover = failoverOf(client);
  if (failover) return failover.masters.current;
  return addressOfClient.get(client) ?? client.getChannel().getTarget();
}
