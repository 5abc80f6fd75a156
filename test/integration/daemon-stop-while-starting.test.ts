/**
 * A daemon stopped while its `start()` is still under way (common/lifecycle.ts): the start fails with
 * DAEMON_INVALID_TRANSITION, the daemon ends stopped, and nothing it opened meanwhile (servers, timers) is left to keep
 * the process alive.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { Logger } from "../../common/log.js";
import { StepPrimaryMonitor } from "../../common/step-monitor.js";
import { DataNode } from "../../datanode/index.js";
import { NameNode } from "../../namenode/index.js";
import { NodeManager } from "../../nodemanager/index.js";
import { ResourceManager } from "../../resourcemanager/index.js";

const quiet = new Logger("test", "error");

/** The handles that keep a process alive, by kind ("Timeout", "TCPServerWrap"), counted. */
function liveHandles(): Map<string, number> {
  const counts = new Map<string, number>();
  for (const kind of process.getActiveResourcesInfo()) counts.set(kind, (counts.get(kind) ?? 0) + 1);
  return counts;
}

/** The kinds of which `after` holds more than `before`. */
function leftBehind(before: Map<string, number>, after: Map<string, number>): string[] {
  return [...after].filter(([kind, n]) => n > (before.get(kind) ?? 0)).map(([kind, n]) => `${kind} x${n}`);
}

interface Daemon {
  start(): Promise<void>;
  stop(): Promise<void>;
  readonly state: string;
}

const DAEMONS: { name: string; make: (dir: string) => Daemon }[] = [
  {
    name: "datanode",
    make: (dir) =>
      new DataNode(
        { datanodeId: "dn1", namenodeAddress: "127.0.0.1:1", dataDir: dir },
        { logger: quiet, monitor: new StepPrimaryMonitor({ capacityMilli: 1000 }) },
      ),
  },
  {
    name: "node manager",
    make: (dir) =>
      new NodeManager(
        { nodeId: "n1", rmAddress: "127.0.0.1:1", dataDir: dir, cgroups: "none", orphanReaper: false },
        { logger: quiet, monitor: new StepPrimaryMonitor({ capacityMilli: 1000 }) },
      ),
  },
  { name: "namenode", make: (dir) => new NameNode({ dataDir: dir }, { logger: quiet }) },
  { name: "resource manager", make: (dir) => new ResourceManager({ dataDir: dir }, { logger: quiet }) },
];

describe("a daemon stopped while it starts", () => {
  let dir: string | undefined;
  afterEach(() => {
    if (dir) rmSync(dir, { recursive: true, force: true });
    dir = undefined;
  });

  it.each(DAEMONS)("the $name ends stopped, its start refused, nothing left open", async ({ make }) => {
    dir = mkdtempSync(join(tmpdir(), "harvest-stop-starting-"));
    const before = liveHandles();
    const daemon = make(dir);
    const starting = daemon.start();
    const refused = expect(starting).rejects.toMatchObject({ code: "DAEMON_INVALID_TRANSITION" });
    await daemon.stop();
    await refused;
    expect(daemon.state).toBe("stopped");
    // Closed sockets leave the active list within a few turns of the event loop (a stream's last immediates run too).
    await new Promise((resolve) => setTimeout(resolve, 50));
    expect(leftBehind(before, liveHandles())).toEqual([]);
  });
});
