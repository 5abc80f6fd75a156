/**
 * Container tokens: the resource manager signs every container it grants (id, app, node, size, job priority, HA term) with the cluster secret;
 * a node manager launches a container only with a valid token, so a job manager cannot run more than it was granted.
 */
import { createHmac, timingSafeEqual } from "node:crypto";
import type { Resources } from "./resource.js";

/** The fields a token covers. */
export interface TokenFields {
  containerId: string;
  appId: string;
  nodeId: string;
  resource: Resources;
  /** The job's priority (0 when absent). */
  jobPriority?: number;
  /** The identity that submitted the job ("" when absent): whom the container runs as and who may read its logs. */
  user?: string;
  /**
   * The term of the highly available resource manager that granted it (0 or absent: not HA): signed, so that a node
   * manager can refuse a grant of an old active's term.
   */
  epoch?: number;
}

// JSON of an array, so no two different grants serialize alike (a plain separator could move between fields).
function payload(f: TokenFields): string {
  return JSON.stringify([
    f.containerId,
    f.appId,
    f.nodeId,
    f.resource.vcoresMilli,
    f.resource.memoryMb,
    f.jobPriority ?? 0,
    f.user ?? "",
    // Only when HA: the tokens of a resource manager that is not are unchanged.
    ...(f.epoch ? [f.epoch] : []),
  ]);
}

/** Signs a container grant. With an empty secret tokens are empty and not checked (single-user local clusters). */
export function signContainer(secret: string, fields: TokenFields): string {
  if (!secret) return "";
  return createHmac("sha256", secret).update(payload(fields)).digest("hex");
}

/** True when `token` matches the grant (always true with an empty secret). */
export function verifyContainer(secret: string, fields: TokenFields, token: string): boolean {
  if (!secret) return true;
  // Buffer.from(hex) stops silently at the first non-hex character, so check the exact shape first.
  if (!/^[0-9a-f]{64}$/.test(token)) return false;
  const expected = Buffer.from(signContainer(secret, fields), "hex");
  const given = Buffer.from(token, "hex");
  return given.length === expected.length && timingSafeEqual(given, expected);
}

/**
 * Application-master tokens (YARN's AMRMToken): the resource manager gives each job-manager attempt a token naming its
 * application, its attempt and when it expires, signed with the cluster secret. A job manager holds no certificate; it
 * presents the token (metadata {@link AM_TOKEN_METADATA}) to the resource manager's ApplicationMasterService and to
 * node managers, which share the secret, and may act only on its own application. An expired token is refused like a
 * forged one; the resource manager answers an Allocate whose token is past half its life with a fresh one
 * ({@link renewedAmToken}).
 */
export const AM_TOKEN_METADATA = "harvest-am-token";

/** What an AM token proves. */
export interface AmTokenFields {
  appId: string;
  attempt: number;
  /** When the token stops being valid, in milliseconds since the epoch. */
  expiresMs: number;
}

/** The largest expiry a token may carry (15 digits: an exact integer in a double, and a bounded token). */
const MAX_AM_EXPIRY_MS = 999_999_999_999_999;

/** `appId:attempt:expiresMs:hmac`, the expiry under the HMAC; empty with an empty secret. */
export function signAmToken(secret: string, f: AmTokenFields): string {
  if (!secret) return "";
  if (!Number.isSafeInteger(f.attempt) || f.attempt < 0 || f.attempt > 999_999)
    throw new RangeError(`an AM token's attempt must be an integer in [0, 999999], not ${f.attempt}`);
  if (!Number.isSafeInteger(f.expiresMs) || f.expiresMs < 0 || f.expiresMs > MAX_AM_EXPIRY_MS)
    throw new RangeError(`an AM token's expiry must be an integer in [0, ${MAX_AM_EXPIRY_MS}], not ${f.expiresMs}`);
  return `${f.appId}:${f.attempt}:${f.expiresMs}:${amMac(secret, f)}`;
}

function amMac(secret: string, f: AmTokenFields): string {
  return createHmac("sha256", secret)
    .update(JSON.stringify(["am", f.appId, f.attempt, f.expiresMs]))
    .digest("hex");
}

// Canonical decimals only (no sign, no leading zero, bounded length), so that one token has one spelling.
const AM_TOKEN_SHAPE = /^([A-Za-z0-9_]{1,64}):(0|[1-9]\d{0,5}):(0|[1-9]\d{0,14}):([0-9a-f]{64})$/;

/**
 * The application, attempt and expiry a valid AM token names, or undefined for anything else: a token not signed with
 * `secret`, malformed, or expired at `nowMs` (never throws).
 */
export function verifyAmToken(secret: string, token: unknown, nowMs: number): AmTokenFields | undefined {
  if (!secret || typeof token !== "string" || token.length > 256) return undefined;
  const m = AM_TOKEN_SHAPE.exec(token);
  if (!m) return undefined;
  const fields = { appId: m[1]!, attempt: Number(m[2]), expiresMs: Number(m[3]) };
  const expected = Buffer.from(amMac(secret, fields), "hex");
  const given = Buffer.from(m[4]!, "hex");
  if (given.length !== expected.length || !timingSafeEqual(given, expected)) return undefined;
  // The expiry means something only once the signature holds.
  return nowMs < fields.expiresMs ? fields : undefined;
}

/**
 * A fresh token for the attempt `held` names, valid `lifetimeMs` from `nowMs`, when `held` has less than half its
 * lifetime left; undefined while it still has more (or with an empty secret).
 */
export function renewedAmToken(
  secret: string,
  held: AmTokenFields,
  nowMs: number,
  lifetimeMs: number,
): string | undefined {
  if (!secret || held.expiresMs - nowMs >= lifetimeMs / 2) return undefined;
  return signAmToken(secret, { appId: held.appId, attempt: held.attempt, expiresMs: nowMs + lifetimeMs });
}

/**
 * A job's shuffle token: what its tasks present to node managers' shuffle services to fetch the outputs of the job's
 * other tasks (MapReduce's job token). `appId:hmac`; empty with an empty secret. It names one job: another job's token
 * fetches nothing of this one.
 */
export function signShuffleToken(secret: string, appId: string): string {
  if (!secret) return "";
  return `${appId}:${createHmac("sha256", secret)
    .update(JSON.stringify(["shuffle", appId]))
    .digest("hex")}`;
}

/** The application a valid shuffle token names, or undefined for anything else (never throws). */
export function verifyShuffleToken(secret: string, token: unknown): string | undefined {
  if (!secret || typeof token !== "string" || token.length > 256) return undefined;
  const m = /^([A-Za-z0-9_]{1,64}):([0-9a-f]{64})$/.exec(token);
  if (!m) return undefined;
  const expected = Buffer.from(signShuffleToken(secret, m[1]!).slice(-64), "hex");
  const given = Buffer.from(m[2]!, "hex");
  return given.length === expected.length && timingSafeEqual(given, expected) ? m[1] : undefined;
}
