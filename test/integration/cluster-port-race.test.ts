/**
 * A local cluster draws its daemons' ports before the daemons bind them; another cluster starting beside it (the
 * suite runs several at once) may bind one in between. Here a process holds the port the cluster draws for one daemon.
 */
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { createServer } from "node:net";
import type { Server } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it, vi } from "vitest";
import { readCluster, restartDaemon, startCluster, stopCluster, stopProcess } from "../../localcluster/cluster.js";
import { requireBuild } from "./harness.js";
import type * as PortsModule from "../../localcluster/ports.js";

/** The port the next draw returns instead of a free one (then draws are free again). */
const steal: { nth?: number; port?: number; calls: number } = { calls: 0 };

vi.mock("../../localcluster/ports.js", async (importOriginal) => {
  const real = await importOriginal<typeof PortsModule>();
  return {
    ...real,
    stablePort: async (...args: Parameters<typeof real.stablePort>) => {
      steal.calls++;
      if (steal.nth === steal.calls && steal.port) return steal.port;
      return real.stablePort(...args);
    },
  };
});

async function holdPort(): Promise<Server> {
  const server = createServer().listen(0, "127.0.0.1");
  await new Promise((ok, fail) => server.once("listening", ok).once("error", fail));
  return server;
}

const portOf = (s: Server): number => (s.address() as { port: number }).port;

describe("a local cluster whose drawn port another process took first", () => {
  const dirs: string[] = [];
  const holders: Server[] = [];
  afterEach(async () => {
    for (const d of dirs.splice(0)) {
      await stopCluster(d).catch(() => undefined);
      rmSync(d, { recursive: true, force: true });
    }
    for (const h of holders.splice(0)) h.close();
    steal.calls = 0;
    delete steal.nth;
    delete steal.port;
  });

  const up = (dir: string, nmHttpPort?: number) =>
    startCluster({
      dir,
      primaries: ["proc"],
      speed: 1,
      vcores: 1,
      memoryMb: 1024,
      storage: false,
      insecure: true,
      startTimeoutMs: 30_000,
      ...(nmHttpPort ? { nm: { httpPort: nmHttpPort } } : {}),
    });

  it("starts that daemon again on other ports, and a restart keeps them", async () => {
    requireBuild();
    const dir = mkdtempSync(join(tmpdir(), "harvest-port-race-"));
    dirs.push(dir);
    const holder = await holdPort();
    holders.push(holder);
    // Draws: the resource manager's port, its web port, then the node manager's port: that one is taken.
    steal.nth = 3;
    steal.port = portOf(holder);
    const desc = await up(dir);
    const nm = readCluster(dir).nodes[0]!;
    expect(nm.address).not.toContain(`:${steal.port}`);
    expect(readFileSync(nm.log, "utf8")).toContain("EADDRINUSE");
    expect(desc.nodes).toHaveLength(1);
    // The ports it ended on are in its config: a restart binds the same ones.
    expect(await stopProcess(nm, 3_000)).toBe(true);
    const { restarted } = await restartDaemon(dir, "server-1-nm");
    expect(restarted.map((d) => d.address)).toEqual([nm.address]);
  });

  it("fails, naming the port, when the taken port is one the user gave", async () => {
    requireBuild();
    const dir = mkdtempSync(join(tmpdir(), "harvest-port-race-"));
    dirs.push(dir);
    const holder = await holdPort();
    holders.push(holder);
    await expect(up(dir, portOf(holder))).rejects.toThrow(new RegExp(`EADDRINUSE.*:${portOf(holder)}`));
  });
});
