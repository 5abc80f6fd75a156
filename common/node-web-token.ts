/**
 * Web tokens for the node managers' log pages. A browser on the resource manager's job page holds the resource
 * manager's web token, which no node manager can check (each daemon signs its own: web-token.ts). Node managers have
 * no `harvest ui login` of their own; instead every node manager and the resource manager derive one key from the
 * cluster secret they already share (it signs container tokens), and the resource manager's job page links each
 * container's log through the node manager's `/login?token=` with a short-lived token of this kind ("n1") naming the
 * viewer, as HDFS's namenode hands a datanode redirect a delegation token. The node manager then checks the viewer
 * against the container's job (its owner or an admin), as `harvest job logs` is checked.
 */
import { createHmac } from "node:crypto";
import type { Principal } from "./auth.js";
import type { Clock } from "./clock.js";
import { DelegationTokens } from "./delegation-token.js";
import { IDENTITY_ROLES } from "./tls.js";
import type { IdentityRole } from "./tls.js";
import type { WebTokenVerifier } from "./web-server.js";

/** How long a node web token the resource manager's job page hands out lasts (the cookie it sets, too). */
export const NODE_WEB_TOKEN_LIFETIME_MS = 3600_000;

/** Issues and checks web tokens valid on every node manager of a cluster, keyed by the cluster secret. */
export class NodeWebTokens {
  private readonly tokens: DelegationTokens;

  constructor(
    clusterSecret: string,
    private readonly clock: Clock,
  ) {
    const key = createHmac("sha256", clusterSecret).update("harvest node-manager web tokens v1").digest();
    this.tokens = new DelegationTokens(key, NODE_WEB_TOKEN_LIFETIME_MS, "n1");
  }

  /** Checks a token: its holder as a principal, or undefined. */
  readonly verify: WebTokenVerifier = (token) => {
    const claims = this.tokens.verify(token, this.clock.nowMs());
    if (!claims || !IDENTITY_ROLES.includes(claims.role as IdentityRole)) return undefined;
    return { name: claims.owner, role: claims.role as IdentityRole, via: "token" };
  };

  /**
   * A token for `who`, already authenticated by the resource manager's web server (a certificate or its own web
   * token); undefined for a principal no node manager should trust (an unchecked claim, or a job manager's role).
   */
  issue(who: Principal): string | undefined {
    if (who.via === "claim" || !IDENTITY_ROLES.includes(who.role as IdentityRole)) return undefined;
    return this.tokens.issue(who.name, this.clock.nowMs(), NODE_WEB_TOKEN_LIFETIME_MS, { role: who.role }).token;
  }
}
