/**
 * Mutual TLS under the cluster CA, and who is calling. Every server asks its peer for a certificate and refuses a call
 * whose peer has none signed by the cluster CA (or an expired one) with UNAUTHENTICATED, in an interceptor, before any
 * handler runs; handlers read the caller's identity (name and role, from the certificate's subject) with
 * {@link callIdentity}. Clients present their own certificate and check the server's against the CA and the host they
 * dialled. The certificates come from `harvest security issue` (localcluster/cluster-ca.ts).
 */
import * as grpc from "@grpc/grpc-js";
import { readFileSync } from "node:fs";
import type { PeerCertificate } from "node:tls";
import { HarvestError, toServiceError } from "./errors.js";
import { isValidHost } from "./net-address.js";

export { isValidHost };

/** The roles a certificate can carry (its subject's OU). */
export const IDENTITY_ROLES = ["daemon", "user", "admin"] as const;
/** One of {@link IDENTITY_ROLES}. */
export type IdentityRole = (typeof IDENTITY_ROLES)[number];

/** Who a peer is, by its certificate. */
export interface Identity {
  /** The subject's CN: a daemon's name or a user's name. */
  name: string;
  role: IdentityRole;
}

/** PEM files a daemon or a client presents and trusts. */
export interface TlsFiles {
  /** The cluster CA's certificate. */
  ca: string;
  /** This party's certificate, issued by the CA. */
  cert: string;
  /** Its private key. */
  key: string;
}

/**
 * Names that carry power in the coordination service (etcd takes a certificate's CN as its user): `root` is etcd's
 * superuser, `harvest-master` the only user that may use Harvest's keys, `harvest-etcd` the only peer the members
 * accept. The CA issues them to daemons only (localcluster/cluster-ca.ts), and no node may take one as its id.
 */
export const RESERVED_IDENTITY_NAMES: readonly string[] = ["root", "harvest-master", "harvest-etcd"];

/**
 * Why a server may not take `name` as its node id (a node manager's `nodeId`, a datanode's `datanodeId`), or
 * undefined when it may: a server's daemon certificate is issued under its name (docs/deploying.md), and one of
 * {@link RESERVED_IDENTITY_NAMES} there would carry the coordination service's power.
 */
export function reservedNodeName(name: string): string | undefined {
  if (!RESERVED_IDENTITY_NAMES.includes(name)) return undefined;
  return (
    `must not be ${name}: ${RESERVED_IDENTITY_NAMES.join(", ")} are the coordination service's superuser, masters ` +
    "and members (etcd takes a certificate's name as its user, and a server's certificate is issued under its name)"
  );
}

const NAME = /^[A-Za-z0-9_.@-]{1,64}$/;

/** True for a name a certificate may carry: 1-64 characters of [A-Za-z0-9_.@-]. */
export function isValidIdentityName(name: string): boolean {
  return NAME.test(name);
}

/** The identity a verified peer certificate names, or undefined when its subject is not one of ours. */
export function identityOfCertificate(cert: Pick<PeerCertificate, "subject"> | undefined): Identity | undefined {
  const subject = cert?.subject as Record<string, string | string[] | undefined> | undefined;
  if (!subject) return undefined;
  const one = (v: string | string[] | undefined): string | undefined => (Array.isArray(v) ? undefined : v);
  const name = one(subject["CN"]);
  const role = one(subject["OU"]);
  if (!name || !isValidIdentityName(name) || !IDENTITY_ROLES.includes(role as IdentityRole)) return undefined;
  return { name, role: role as IdentityRole };
}

/** The identity of the peer of a server call (undefined on a plaintext server or without a valid certificate). */
export function callIdentity(call: {
  getAuthContext(): { sslPeerCertificate?: Pick<PeerCertificate, "subject"> } | null;
}): Identity | undefined {
  return identityOfCertificate(call.getAuthContext()?.sslPeerCertificate);
}

function readPem(file: string, what: string): Buffer {
  try {
    return readFileSync(file);
  } catch (err) {
    throw new HarvestError("CONFIG_INVALID", `cannot read the ${what} ${file}: ${(err as Error).message}`, {
      cause: err,
    });
  }
}

/**
 * Decides, before any handler runs, whether a call may go on: undefined lets it through, a HarvestError refuses it
 * (sent as the call's status). Given the method's path, the peer's verified identity (undefined without a valid
 * certificate) and the call's metadata.
 */
export type CallGate = (
  methodPath: string,
  identity: Identity | undefined,
  metadata: grpc.Metadata,
) => HarvestError | undefined;

/** The default gate: a peer needs a certificate signed by the cluster CA, nothing more. */
export const requireCertificate: CallGate = (methodPath, identity) =>
  identity
    ? undefined
    : new HarvestError(
        "UNAUTHENTICATED",
        `${methodPath} refused: the peer presented no certificate signed by the cluster CA (or an expired one)`,
      );

/**
 * Server credentials: plaintext without `tls`; else TLS that asks every peer for a certificate, with an interceptor
 * that asks `gate` about every call once its metadata has arrived and, on a refusal, ends the call with that status
 * before the method's handler is started (a refused call's messages are dropped unread).
 */
export function serverCredentials(
  tls: TlsFiles | undefined,
  gate: CallGate = requireCertificate,
): grpc.ServerCredentials {
  if (!tls) return grpc.ServerCredentials.createInsecure();
  const ca = readPem(tls.ca, "CA certificate");
  const cert = readPem(tls.cert, "certificate");
  const key = readPem(tls.key, "private key");
  const interceptor: grpc.ServerInterceptor = (method, call) => {
    let refused = false;
    return new grpc.ServerInterceptingCall(call, {
      start: (next) =>
        next({
          onReceiveMetadata: (metadata, pass) => {
            let refusal: HarvestError | undefined;
            try {
              refusal = gate(method.path, callIdentity(call), metadata);
            } catch (err) {
              refusal = new HarvestError("UNAUTHENTICATED", `${method.path} refused: ${(err as Error).message}`);
            }
            if (!refusal) {
              pass(metadata);
              return;
            }
            refused = true;
            const status = toServiceError(refusal);
            call.sendStatus({ code: status.code!, details: status.details!, metadata: status.metadata! });
          },
          onReceiveMessage: (message, pass) => {
            if (!refused) pass(message);
          },
          onReceiveHalfClose: (pass) => {
            if (!refused) pass();
          },
        }),
    });
  };
  return new ClusterServerCredentials(ca, cert, key, [interceptor]);
}

/**
 * TLS that asks every peer for a certificate but lets a peer without one finish the handshake, so that the refusal is
 * a gRPC status the caller can read (UNAUTHENTICATED, from the interceptor) rather than a reset connection. Node's TLS
 * still verifies whatever is presented against the CA: an unverified certificate yields no identity.
 */
class ClusterServerCredentials extends grpc.ServerCredentials {
  constructor(
    ca: Buffer,
    cert: Buffer,
    key: Buffer,
    private readonly interceptors: grpc.ServerInterceptor[],
  ) {
    super({ requestCert: true, rejectUnauthorized: false }, { ca, cert, key });
  }

  override _getInterceptors(): grpc.ServerInterceptor[] {
    return this.interceptors;
  }

  _equals(other: grpc.ServerCredentials): boolean {
    return other === this;
  }
}

/**
 * What a client trusts and presents: the CA always; its own certificate and key unless it authenticates by a token
 * instead (a job's containers hold only the CA certificate and their tokens).
 */
export interface ClientTls {
  ca: string;
  cert?: string;
  key?: string;
}

/**
 * Channel credentials: plaintext without `tls`; else TLS trusting the cluster CA (the server's certificate must name
 * the host dialled), presenting this party's certificate when it has one.
 */
export function channelCredentials(tls: ClientTls | undefined): grpc.ChannelCredentials {
  if (!tls) return grpc.credentials.createInsecure();
  dropIpServerNameWarning();
  if (!tls.cert !== !tls.key)
    throw new HarvestError("CONFIG_INVALID", "a client certificate needs its key, and a key its certificate");
  return grpc.credentials.createSsl(
    readPem(tls.ca, "CA certificate"),
    tls.key ? readPem(tls.key, "private key") : null,
    tls.cert ? readPem(tls.cert, "certificate") : null,
  );
}

let warningFiltered = false;

/**
 * grpc-js passes the dialled host to TLS as the server name, and Node warns (DEP0123, once per process, on stderr of
 * every CLI command) when that is an IP address. Server names play no part in Harvest's TLS (the server's certificate
 * is checked against the dialled address, IPs included), so that one warning is dropped; every other passes.
 */
export function dropIpServerNameWarning(): void {
  if (warningFiltered) return;
  warningFiltered = true;
  const emit = process.emitWarning.bind(process) as (...args: unknown[]) => void;
  process.emitWarning = ((...args: unknown[]) => {
    const [warning, typeOrOptions, code] = args;
    const codeOf =
      typeof typeOrOptions === "object" && typeOrOptions !== null
        ? (typeOrOptions as { code?: unknown }).code
        : (code ?? (warning as { code?: unknown } | undefined)?.code);
    if (codeOf === "DEP0123") return;
    emit(...args);
  }) as typeof process.emitWarning;
}
