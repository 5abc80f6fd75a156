/**
 * File-system delegation tokens (HDFS's DelegationTokenSecretManager, simplified): a user with a certificate asks the
 * namenode for a token at job submission, naming the job; the job's containers, which hold no certificate, present it
 * (metadata `harvest-dfs-token`) to act on the file system as that user until it expires or is cancelled (the
 * resource manager cancels it when the job ends). The namenode signs tokens with a key kept in its data directory
 * (mode 0600), so tokens outlive a namenode restart; it keeps the cancelled ones itself (namenode/cancelled-tokens.ts)
 * and tells this class through `isCancelled`. A token is `d1.<payload, base64url JSON>.<HMAC-SHA256, base64url>`.
 * Pure apart from the key file; the clock is passed in.
 */
import { createHmac, randomBytes, timingSafeEqual } from "node:crypto";
import { existsSync, readFileSync } from "node:fs";
import { writeFileAtomic } from "./atomic-file.js";

/** What a token says. */
export interface DelegationClaims {
  /** The user the holder acts as. */
  owner: string;
  /** The owner's certificate role, for web tokens (`harvest ui login`), which stand in for the certificate. */
  role?: string;
  /** The application the token was issued for (a DFS token of a job); absent in tokens that name none. */
  job?: string;
  expiresMs: number;
  /** Random, so that two tokens for one owner differ; what a cancellation is recorded by. */
  nonce: string;
}

/** What a token's signature and expiry say of it: its claims, and whether it was cancelled since. */
export interface CheckedToken {
  claims: DelegationClaims;
  cancelled: boolean;
}

/**
 * Issues and checks delegation tokens with one secret key. The same scheme, with kind "w1" and a key of its own, signs
 * the web tokens of `harvest ui login`: a token of one kind never passes as the other.
 */
export class DelegationTokens {
  constructor(
    private readonly key: Buffer,
    /** The longest lifetime a token is issued for. */
    readonly maxLifetimeMs: number,
    /** The token's first part: "d1" for DFS delegation tokens, "w1" for web tokens. @default "d1" */
    private readonly kind = "d1",
    /** True for a token cancelled before it expired: `verify` refuses it. @default none is */
    private readonly isCancelled: (claims: DelegationClaims) => boolean = () => false,
  ) {}

  /** The key in `file`, created (32 random bytes, mode 0600) when there is none. */
  static keyFromFile(file: string): Buffer {
    if (existsSync(file)) {
      const key = Buffer.from(readFileSync(file, "utf8").trim(), "hex");
      if (key.length >= 32) return key;
    }
    const key = randomBytes(32);
    writeFileAtomic(file, key.toString("hex") + "\n", 0o600);
    return key;
  }

  /**
   * A token for `owner`, valid `lifetimeMs` (at most the maximum; 0 asks for the maximum) from `nowMs`, naming the
   * owner's `role` (web tokens) or the `job` it is for (DFS tokens) when given.
   */
  issue(
    owner: string,
    nowMs: number,
    lifetimeMs = 0,
    names: { role?: string; job?: string } = {},
  ): { token: string; expiresMs: number } {
    const life = lifetimeMs > 0 ? Math.min(lifetimeMs, this.maxLifetimeMs) : this.maxLifetimeMs;
    const claims: DelegationClaims = {
      owner,
      expiresMs: nowMs + life,
      nonce: randomBytes(8).toString("hex"),
      ...(names.role !== undefined ? { role: names.role } : {}),
      ...(names.job ? { job: names.job } : {}),
    };
    const body = `${this.kind}.${Buffer.from(JSON.stringify(claims)).toString("base64url")}`;
    return { token: `${body}.${this.sign(body).toString("base64url")}`, expiresMs: claims.expiresMs };
  }

  /** The claims of a valid, unexpired token that was not cancelled; undefined for anything else (never throws). */
  verify(token: unknown, nowMs: number): DelegationClaims | undefined {
    const checked = this.check(token, nowMs);
    return checked && !checked.cancelled ? checked.claims : undefined;
  }

  /**
   * A token this key signed that has not expired, with whether it was cancelled since (what a cancellation needs to
   * tell "already cancelled" from "not a token"); undefined for anything else (never throws).
   */
  check(token: unknown, nowMs: number): CheckedToken | undefined {
    if (typeof token !== "string" || token.length > 2048) return undefined;
    const parts = token.split(".");
    if (parts.length !== 3 || parts[0] !== this.kind) return undefined;
    const expected = this.sign(`${parts[0]}.${parts[1]}`);
    const given = Buffer.from(parts[2]!, "base64url");
    if (given.length !== expected.length || !timingSafeEqual(given, expected)) return undefined;
    let claims: DelegationClaims;
    try {
      claims = JSON.parse(Buffer.from(parts[1]!, "base64url").toString("utf8")) as DelegationClaims;
    } catch {
      return undefined;
    }
    if (typeof claims.owner !== "string" || typeof claims.nonce !== "string" || !(claims.expiresMs > nowMs))
      return undefined;
    return { claims, cancelled: this.isCancelled(claims) };
  }

  private sign(body: string): Buffer {
    return createHmac("sha256", this.key).update(body).digest();
  }
}

/**
 * The owner a delegation token names, read without checking its signature: what its holder learns of itself (the home
 * its relative paths resolve against). Never a ground to grant anything; undefined for anything that is not a token.
 */
export function unverifiedTokenOwner(token: string): string | undefined {
  const parts = token.split(".");
  if (parts.length !== 3 || token.length > 2048) return undefined;
  try {
    const claims = JSON.parse(Buffer.from(parts[1]!, "base64url").toString("utf8")) as Partial<DelegationClaims>;
    return typeof claims.owner === "string" ? claims.owner : undefined;
  } catch {
    return undefined;
  }
}
