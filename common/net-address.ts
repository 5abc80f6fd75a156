/**
 * Bind and advertised addresses. A daemon binds `host` (an interface, or 0.0.0.0 / :: for all of them) and tells peers
 * and clients `advertiseHost`, the name or IP they reach it by; the two differ on any real deployment.
 */
import { hostname } from "node:os";
import { isIP } from "node:net";
import { invalidOption } from "./options.js";

const WILDCARDS = new Set(["0.0.0.0", "::", "[::]", ""]);
const HOST_NAME =
  /^(?=.{1,253}$)[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?(\.[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*$/;

/** True for an address that means "every interface". */
export function isWildcardHost(host: string): boolean {
  return WILDCARDS.has(host);
}

/** True for an IPv4/IPv6 literal or a DNS host name (no port, no scheme). */
export function isValidHost(host: string): boolean {
  const bare = host.startsWith("[") && host.endsWith("]") ? host.slice(1, -1) : host;
  return isIP(bare) !== 0 || HOST_NAME.test(host);
}

/**
 * Validates a daemon's `host` and `advertiseHost` options and returns the advertised host: the option when set, else the
 * bind host, else (binding every interface) this machine's host name, which peers must be able to resolve.
 */
export function resolveAdvertiseHost(daemon: string, host: string, advertiseHost: string | undefined): string {
  if (typeof host !== "string" || !(isWildcardHost(host) || isValidHost(host)))
    invalidOption(daemon, "host", `must be an IP address or host name to bind (got ${JSON.stringify(host)})`);
  if (advertiseHost !== undefined && advertiseHost !== "") {
    if (typeof advertiseHost !== "string" || !isValidHost(advertiseHost) || isWildcardHost(advertiseHost))
      invalidOption(
        daemon,
        "advertiseHost",
        `must be the IP address or host name peers reach this daemon by, without a port (got ${JSON.stringify(advertiseHost)})`,
      );
    return advertiseHost;
  }
  return isWildcardHost(host) ? hostname() : host;
}

/** `host:port`, with brackets around an IPv6 literal. */
export function formatAddress(host: string, port: number): string {
  const bare = host.startsWith("[") && host.endsWith("]") ? host.slice(1, -1) : host;
  return isIP(bare) === 6 ? `[${bare}]:${port}` : `${bare}:${port}`;
}

/** The host:port string gRPC binds for `host` (IPv6 wildcard and literals bracketed). */
export function bindAddress(host: string, port: number): string {
  if (host === "") return `0.0.0.0:${port}`;
  return formatAddress(host === "[::]" ? "::" : host, port);
}

/** Splits a peer's `host:port` (IPv6 in brackets); undefined unless the host is valid and the port in 1..65535. */
export function parseHostPort(address: string): { host: string; port: number } | undefined {
  const m = /^\[([^\]]+)\]:(\d{1,5})$/.exec(address) ?? /^([^:[\]]+):(\d{1,5})$/.exec(address);
  if (!m) return undefined;
  const port = Number(m[2]);
  if (!(port >= 1 && port <= 65_535) || !isValidHost(m[1]!)) return undefined;
  return { host: m[1]!, port };
}
