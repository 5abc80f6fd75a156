/**
 * Web tokens (`harvest ui login`): a caller with a certificate asks a daemon (GetWebToken) for a short-lived token that
 * stands in for its certificate in a browser, which rarely holds one. The token names the caller and its role, and is
 * signed with a key kept in the daemon's data directory (mode 0600), so it outlives a restart; each daemon signs its
 * own (a resource manager's token does not open the namenode's UI). Same scheme as DFS delegation tokens, kind "w1".
 */
import { join } from "node:path";
import type { Principal } from "./auth.js";
import type { Clock } from "./clock.js";
import { DelegationTokens } from "./delegation-token.js";
import { HarvestError } from "./errors.js";
import { IDENTITY_ROLES } from "./tls.js";
import type { IdentityRole } from "./tls.js";
import type { WebTokenVerifier } from "./web-server.js";

/** A web token's longest life. */
export const WEB_TOKEN_MAX_LIFETIME_MS = 12 * 3600_000;

/** Issues and checks one daemon's web tokens. */
export class WebTokens {
  private readonly tokens: DelegationTokens;

  /**
   * `keyOrDataDir`: the signing key itself (highly available masters share one, kept in the coordination service), or
   * the data directory whose `web-token.key` holds it (made on first use).
   */
  constructor(
    keyOrDataDir: string | Buffer,
    private readonly clock: Clock,
    maxLifetimeMs = WEB_TOKEN_MAX_LIFETIME_MS,
  ) {
    this.tokens = new DelegationTokens(
      typeof keyOrDataDir === "string"
        ? DelegationTokens.keyFromFile(join(keyOrDataDir, "web-token.key"))
        : keyOrDataDir,
      maxLifetimeMs,
      "w1",
    );
  }

  /** Checks a token: its holder as a principal, or undefined. */
  readonly verify: WebTokenVerifier = (token) => {
    const claims = this.tokens.verify(token, this.clock.nowMs());
    if (!claims || !IDENTITY_ROLES.includes(claims.role as IdentityRole)) return undefined;
    return { name: claims.owner, role: claims.role as IdentityRole, via: "token" };
  };

  /**
   * A token for `who`, which must have called with a certificate (a token does not beget tokens), and the daemon's
   * web `url`. On an insecure daemon (`who` is an unchecked claim) there is nothing to log in to: the token is empty.
   */
  issue(
    who: Principal,
    lifetimeMs: number,
    url = "",
  ): { token: string; owner: string; role: string; expiresMs: number; url: string } {
    if (who.via === "claim") return { token: "", owner: who.name, role: who.role, expiresMs: 0, url };
    if (who.via !== "certificate")
      throw new HarvestError("PERMISSION_DENIED", "a web token is issued only to a caller with a certificate");
    const { token, expiresMs } = this.tokens.issue(who.name, this.clock.nowMs(), Math.max(0, lifetimeMs), {
      role: who.role,
    });
    return { token, owner: who.name, role: who.role, expiresMs, url };
  }
}
