/**
 * Bind and advertised addresses. A daemon binds `host` (an interface, or 0.0.0.0 / :: for all of them) and tells peers
 * and clients `advertiseHost`, the name or IP they reach it by; the two differ on any real deployment.
 */
import { hostname, networkInterfaces } from "node:os";
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

/** An IP as a socket reports it, IPv4-mapped IPv6 ("::ffff:10.0.0.1") as plain IPv4. */
function plainIp(ip: string): string {
  return ip.startsWith("::ffff:") && isIP(ip.slice(7)) === 4 ? ip.slice(7) : ip;
}

function isLoopbackIp(ip: string): boolean {
  const p = plainIp(ip);
  return p === "::1" || (isIP(p) === 4 && p.startsWith("127."));
}

/**
 * True when a connection's peer is on this server: its address is a loopback one, or the very address it reached this
 * server at (the kernel delivers a connection to one of its own addresses locally). What a datanode asks before it
 * tells a client where a replica's files are.
 */
export function isLocalPeer(remoteAddress: string | undefined, localAddress: string | undefined): boolean {
  if (!remoteAddress) return false;
  if (isLoopbackIp(remoteAddress)) return true;
  return localAddress !== undefined && plainIp(remoteAddress) === plainIp(localAddress);
}

/**
 * True when `host` names this server: "localhost", this machine's host name, a loopback address or one of its
 * interfaces' addresses. Other host names are not resolved: false. What a client asks before it tries a short-circuit
 * read (a datanode that advertises a name resolving here but not equal to the host name is read over the network).
 */
export function isThisServer(host: string): boolean {
  if (host === "localhost" || host.toLowerCase() === hostname().toLowerCase()) return true;
  if (!isIP(host)) return false;
  if (isLoopbackIp(host)) return true;
  const ip = plainIp(host);
  return Object.values(networkInterfaces()).some((list) => (list ?? []).some((a) => a.address === ip));
}
