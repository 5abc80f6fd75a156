/**
 * Mutual TLS under the cluster CA, and who is calling. Every server asks its peer for a certificate and refuses a call
 * whose peer has none signed by the cluster CA (or an expired one) with UNAUTHENTICATED, in an interceptor, before any
 * handler runs; handlers read the caller's identity (name and role, from the certificate's subject) with
 * {@link callIdentity}. Clients present their own certificate and check the server's against the CA and the host they
 * dialled. The certificates come from `harvest security issue` (cli/cluster-ca.ts).
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
 * Server credentials: plaintext without `tls`; else TLS that asks every peer for a certificate, with an interceptor
 * that refuses a call from a peer without a valid one (UNAUTHENTICATED) unless `allowAnonymous(methodPath)` says the
 * method authenticates its callers otherwise (by a token).
 */
export function serverCredentials(
  tls: TlsFiles | undefined,
  allowAnonymous: (methodPath: string) => boolean = () => false,
): grpc.ServerCredentials {
  if (!tls) return grpc.ServerCredentials.createInsecure();
  const ca = readPem(tls.ca, "CA certificate");
  const cert = readPem(tls.cert, "certificate");
  const key = readPem(tls.key, "private key");
  const authenticate: grpc.ServerInterceptor = (method, call) =>
    new grpc.ServerInterceptingCall(call, {
      start: (next) => {
        if (callIdentity(call) || allowAnonymous(method.path)) {
          next();
          return;
        }
        const err = toServiceError(
          new HarvestError(
            "UNAUTHENTICATED",
            `${method.path} refused: the peer presented no certificate signed by the cluster CA (or an expired one)`,
          ),
        );
        call.sendStatus({ code: err.code!, details: err.details!, metadata: err.metadata! });
      },
    });
  return new ClusterServerCredentials(ca, cert, key, [authenticate]);
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

/** Channel credentials: plaintext without `tls`; else TLS presenting this party's certificate and trusting the CA. */
export function channelCredentials(tls: TlsFiles | undefined): grpc.ChannelCredentials {
  if (!tls) return grpc.credentials.createInsecure();
  return grpc.credentials.createSsl(
    readPem(tls.ca, "CA certificate"),
    readPem(tls.key, "private key"),
    readPem(tls.cert, "certificate"),
  );
}
