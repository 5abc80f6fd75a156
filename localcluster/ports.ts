/**
 * Ports for daemons that must come back on the same address after a restart.
 *
 * A port the kernel picks for `listen(0)` lies in its ephemeral range, the range it also draws the local ports of
 * outgoing connections from. While a daemon is down, any connection on the machine may take its port as a local
 * port, and the restarted daemon then fails with EADDRINUSE. Hadoop's daemons avoid this with fixed well-known ports
 * below that range; a local cluster has no fixed ports (several run side by side), so it draws free ones from below
 * the range instead.
 */
import { readFileSync } from "node:fs";
import { createServer } from "node:net";
import type { AddressInfo } from "node:net";

/** The lowest port drawn from; the range ends just below the kernel's ephemeral ports. */
const LOWEST = 20_000;

/** The first port of the kernel's ephemeral range (Linux's default when it cannot be read). */
export function ephemeralLow(file = "/proc/sys/net/ipv4/ip_local_port_range"): number {
  try {
    const low = Number(readFileSync(file, "utf8").trim().split(/\s+/)[0]);
    return Number.isInteger(low) && low > 0 ? low : 32_768;
  } catch {
    return 32_768;
  }
}

/** Binds `port` on `host` and releases it: the port it got, or undefined when it is taken. */
async function probe(host: string, port: number): Promise<number | undefined> {
  const server = createServer();
  const bound = await new Promise<boolean>((resolve) => {
    server.once("error", () => resolve(false));
    server.listen({ port, host, exclusive: true }, () => resolve(true));
  });
  if (!bound) return undefined;
  const got = (server.address() as AddressInfo).port;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return got;
}

/**
 * A port free on `host` now, below the kernel's ephemeral range when that leaves room (else the kernel's pick). It is
 * released before it is returned: another process may take it first, rarely (a random draw from ~12k ports).
 */
export async function stablePort(host = "127.0.0.1", random: () => number = Math.random): Promise<number> {
  const high = ephemeralLow() - 1;
  if (high - LOWEST >= 1_000) {
    for (let attempt = 0; attempt < 64; attempt++) {
      const port = LOWEST + Math.floor(random() * (high - LOWEST + 1));
      if ((await probe(host, port)) !== undefined) return port;
    }
  }
  const any = await probe(host, 0);
  if (any === undefined) throw new Error(`no free port on ${host}`);
  return any;
}
