/**
 * Container tokens: the resource manager signs every container it grants (id, app, node, size, job priority) with the cluster secret;
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
