/**
 * Container tokens: the resource manager signs every container it grants (id, app, node, size) with the cluster secret;
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
}

function payload(f: TokenFields): string {
  return [f.containerId, f.appId, f.nodeId, f.resource.vcoresMilli, f.resource.memoryMb].join("|");
}

/** Signs a container grant. With an empty secret tokens are empty and not checked (single-user local clusters). */
export function signContainer(secret: string, fields: TokenFields): string {
  if (!secret) return "";
  return createHmac("sha256", secret).update(payload(fields)).digest("hex");
}

/** True when `token` matches the grant (always true with an empty secret). */
export function verifyContainer(secret: string, fields: TokenFields, token: string): boolean {
  if (!secret) return true;
  const expected = Buffer.from(signContainer(secret, fields), "hex");
  const given = Buffer.from(token, "hex");
  return given.length === expected.length && timingSafeEqual(given, expected);
}
