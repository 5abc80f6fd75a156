/**
 * Who may call what, for one daemon's gRPC server. Every method of every service the daemon serves has a rule: the
 * certificate roles (daemon, user, admin) and the tokens (an AM token, a DFS delegation token, a block token) that may
 * call it. With TLS, the server's interceptor applies the rule before any handler runs: a peer with neither a valid
 * certificate nor an accepted token is refused UNAUTHENTICATED, a peer whose role or token the rule does not list is
 * refused PERMISSION_DENIED naming the identity and the method. Handlers then ask {@link Gate.principal} who called,
 * for the checks that need the request (a job killed only by its submitter, an AM acting only on its own job).
 *
 * Without TLS (`--insecure`), nobody is authenticated: every call passes, and the caller is whoever the request claims
 * to be, as in Hadoop's simple authentication. Daemons log loudly at start that they run so.
 */
import type * as grpc from "@grpc/grpc-js";
import { systemClock } from "./clock.js";
import type { Clock } from "./clock.js";
import { verifyAmToken, verifyShuffleToken } from "./container-token.js";
import { HarvestError } from "./errors.js";
import { callIdentity, serverCredentials } from "./tls.js";
import type { CallGate, IdentityRole, TlsFiles } from "./tls.js";

/** A token a caller without a certificate may present, in the call's metadata. */
export type TokenKind = "am-token" | "dfs-token" | "block-token" | "shuffle-token";

/** The metadata key that carries each kind of token. */
export const TOKEN_METADATA: Readonly<Record<TokenKind, string>> = {
  "am-token": "harvest-am-token",
  "dfs-token": "harvest-dfs-token",
  "block-token": "harvest-block-token",
  "shuffle-token": "harvest-shuffle-token",
};

/** What a rule can allow: a certificate role or a token kind. */
export type Access = IdentityRole | TokenKind;

/** Who called. */
export interface Principal {
  /** A certificate's name, a token's owner (a job's submitter), or an AM token's application id. */
  name: string;
  /** The certificate's role; "am" for a job manager's token; "task" for a task's DFS token or block token. */
  role: IdentityRole | "am" | "task";
  /** How it was established: a certificate, a token, or (without TLS) a claim nobody checked. */
  via: "certificate" | "token" | "claim";
  /** The application an AM token or a shuffle token is for. */
  appId?: string;
  /** The attempt an AM token is for. */
  attempt?: number;
  /** When an AM token expires (milliseconds since the epoch). */
  expiresMs?: number;
}

/** What {@link Gate.principal} reads of a server call (any unary or streaming call has it). */
export type CallContext = Parameters<typeof callIdentity>[0] & { readonly metadata: grpc.Metadata };

/** Checks one kind of token; returns who holds it, or undefined when it is not valid now. Never throws. */
export type TokenVerifier = (token: string) => Principal | undefined;

/** The roles everyone with a certificate has. */
export const ANY_CERTIFICATE: readonly Access[] = ["daemon", "user", "admin"];

/** A service's rules: each method's name (as in the .proto) and who may call it. */
export type ServiceRules = Readonly<Record<string, readonly Access[]>>;

/** The access rules and token checks of one daemon's server. */
export class Gate {
  private readonly rules = new Map<string, readonly Access[]>();
  private readonly tokens: Partial<Record<TokenKind, TokenVerifier>>;

  constructor(
    readonly tls: TlsFiles | undefined,
    tokens: Partial<Record<TokenKind, TokenVerifier>> = {},
  ) {
    this.tokens = tokens;
  }

  /** True when calls are authenticated (TLS is on). */
  get secure(): boolean {
    return this.tls !== undefined;
  }

  /**
   * Adds the rules of one service. Every method the service defines needs a rule, so a method added to a .proto
   * without one fails at start, not open.
   */
  allow(service: grpc.ServiceDefinition, rules: ServiceRules): this {
    for (const [name, method] of Object.entries(service)) {
      const rule = rules[name];
      if (!rule) throw new Error(`no access rule for ${method.path}`);
      this.rules.set(method.path, rule);
    }
    return this;
  }

  /** The server credentials that apply these rules (plaintext without TLS). */
  credentials(): grpc.ServerCredentials {
    return serverCredentials(this.tls, this.check);
  }

  /** The interceptor's decision for one call. */
  readonly check: CallGate = (path, identity, metadata) => {
    const rule = this.rules.get(path);
    const method = path.slice(path.lastIndexOf("/") + 1);
    if (!rule) return new HarvestError("PERMISSION_DENIED", `${method} is not served here`);
    if (identity) {
      if (rule.includes(identity.role)) return undefined;
      return new HarvestError(
        "PERMISSION_DENIED",
        `${identity.name} (role ${identity.role}) may not call ${method}: it needs ${describe(rule)}`,
        { details: { identity: identity.name, role: identity.role, action: method } },
      );
    }
    const fromToken = this.tokenPrincipal(metadata, rule);
    if (fromToken) return undefined;
    const tokenKinds = rule.filter((a): a is TokenKind => a in TOKEN_METADATA);
    return new HarvestError(
      "UNAUTHENTICATED",
      `${method} refused: the peer presented no certificate signed by the cluster CA` +
        (tokenKinds.length > 0 ? ` and no valid ${tokenKinds.join(" or ")}` : "") +
        " (or an expired one)",
    );
  };

  /**
   * Who made a call the interceptor let through: the certificate's identity, else the token's holder; without TLS,
   * `claimed` (or "nobody") with the admin role, since nothing is checked then.
   */
  principal(call: CallContext, claimed = ""): Principal {
    const identity = callIdentity(call);
    if (identity) return { ...identity, via: "certificate" };
    if (this.secure) {
      const p = this.tokenPrincipal(call.metadata, Object.keys(TOKEN_METADATA) as TokenKind[]);
      if (p) return p;
      throw new HarvestError("UNAUTHENTICATED", "the caller presented neither a certificate nor a valid token");
    }
    return { name: claimed || "nobody", role: "admin", via: "claim" };
  }

  private tokenPrincipal(metadata: grpc.Metadata, rule: readonly Access[]): Principal | undefined {
    for (const kind of Object.keys(TOKEN_METADATA) as TokenKind[]) {
      const verify = this.tokens[kind];
      if (!verify || !rule.includes(kind)) continue;
      const value = metadata.get(TOKEN_METADATA[kind])[0];
      if (typeof value !== "string" || value.length === 0) continue;
      const p = verify(value);
      if (p) return p;
    }
    return undefined;
  }
}

/**
 * Checks AM tokens signed with the cluster `secret` (the resource manager and the node managers share it): one that
 * expired by `clock` is refused like a forged one (UNAUTHENTICATED at the gate).
 */
export function amTokenVerifier(secret: string, clock: Clock = systemClock): TokenVerifier {
  return (token) => {
    const am = verifyAmToken(secret, token, clock.nowMs());
    return am
      ? { name: am.appId, role: "am", via: "token", appId: am.appId, attempt: am.attempt, expiresMs: am.expiresMs }
      : undefined;
  };
}

/** Checks a job's shuffle tokens (its tasks fetching each other's outputs): the principal is a task of that job. */
export function shuffleTokenVerifier(secret: string): TokenVerifier {
  return (token) => {
    const appId = verifyShuffleToken(secret, token);
    return appId ? { name: appId, role: "task", via: "token", appId } : undefined;
  };
}

/** Throws PERMISSION_DENIED naming the caller and the action, unless `allowed`. */
export function requireAccess(allowed: boolean, who: Principal, action: string): void {
  if (allowed) return;
  throw new HarvestError("PERMISSION_DENIED", `${who.name} (${who.role}) may not ${action}`, {
    details: { identity: who.name, role: who.role, action },
  });
}

function describe(rule: readonly Access[]): string {
  return rule.length === 0 ? "nothing (no one may)" : `one of: ${rule.join(", ")}`;
}
