/**
 * Highly available resource managers as real processes (from dist/) over a real etcd: kill -9 the active in the middle
 * of a job of real task processes; the standby becomes active (the time is printed), the node manager registers with
 * it, and the job finishes with no task that had finished run again. The old active, started again, is a standby; a
 * state write of its old term is refused (NOT_ACTIVE) and the node manager refuses a container grant of that term
 * (STALE_EPOCH).
 */
import { spawn } from "node:child_process";
import { chmodSync, existsSync, mkdtempSync, openSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { JobClient } from "../../client/job-client.js";
import { signContainer } from "../../common/container-token.js";
import { isHarvestError } from "../../common/errors.js";
import type { Coordination } from "../../common/ha/coordination.js";
import { call, loadHarvestProto, makeClient } from "../../common/grpc.js";
import { distEntry } from "../../common/paths.js";
import { readCluster, restartDaemon } from "../../localcluster/cluster.js";
import { EtcdRmStore } from "../../resourcemanager/etcd-state-store.js";
import { startTestCluster } from "../integration/harness.js";
import type { TestCluster } from "../integration/harness.js";
import { freePort, haveEtcd, startTestEtcd } from "../helpers/etcd.js";
import { haCall, nodesAt } from "../helpers/masters.js";
import type { TestEtcd } from "../helpers/etcd.js";
import { codeOf } from "../error-code.js";
import { alive } from "../processes.js";
import { waitFor } from "../wait-for.js";

/** A task that writes "start i" when it starts and "done i" after 2 + 0.8 i seconds, in the shared log. */
const TASK = [
  'const fs = require("fs");',
  "const [log, i] = process.argv.slice(1);",
  'fs.appendFileSync(log, "start " + i + "\\n");',
  'setTimeout(() => fs.appendFileSync(log, "done " + i + "\\n"), 2000 + 800 * Number(i));',
].join(" ");

function runs(log: string): { starts: Map<string, number>; dones: Map<string, number> } {
  const starts = new Map<string, number>();
  const dones = new Map<string, number>();
  for (const line of (existsSync(log) ? readFileSync(log, "utf8") : "").split("\n")) {
    const [what, i] = line.split(" ");
    if (i === undefined) continue;
    const m = what === "start" ? starts : dones;
    m.set(i, (m.get(i) ?? 0) + 1);
  }
  return { starts, dones };
}

describe.skipIf(!haveEtcd)("resource manager failover (kill -9 the active)", () => {
  let etcd: TestEtcd;
  let coord: Coordination;
  let c: TestCluster;
  let staging: string;
  let addrA = "";
  let addrB = "";
  let pidB = 0;

  beforeAll(async () => {
    etcd = await startTestEtcd();
    coord = etcd.connect({ clusterId: "failover" });
    const [pA, hA, pB, hB] = [await freePort(), await freePort(), await freePort(), await freePort()];
    addrA = `127.0.0.1:${pA}`;
    addrB = `127.0.0.1:${pB}`;
    // Both resource managers stage jobs in one directory (on two hosts: the DFS).
    staging = mkdtempSync(join(tmpdir(), "harvest-rm-staging-"));
    chmodSync(staging, 0o755);
    // Job managers follow the active through the list once clients fail over (common/failover.ts); without it they
    // keep the address they were given and a new attempt replaces them after amExpiryMs.
    const jmFollows = existsSync(distEntry("common/failover.js"));
    const rm = {
      port: pA,
      httpPort: hA,
      stagingDir: staging,
      resyncWindowMs: 4_000,
      amExpiryMs: 15_000,
      haCoordination: etcd.coordination({ clusterId: "failover", sessionTtlS: 2 }),
      ...(jmFollows ? { haRmAddresses: `${addrA},${addrB}` } : {}),
    };
    c = await startTestCluster({
      idleServers: 2,
      storage: false,
      insecure: true,
      rm,
      nm: { rmAddress: `${addrA},${addrB}`, reconnectMinMs: 100, reconnectMaxMs: 500 },
    });
    chmodSync(c.work, 0o1777);
    // The second resource manager: the same configuration, its own data directory and ports.
    const configA = JSON.parse(readFileSync(join(c.dir, "run", "rm.json"), "utf8")) as Record<string, unknown>;
    const configB = join(c.dir, "run", "rm-b.json");
    writeFileSync(configB, JSON.stringify({ ...configA, dataDir: join(c.dir, "rm-b"), port: pB, httpPort: hB }));
    const ready = join(c.dir, "run", "rm-b.ready");
    const log = openSync(join(c.dir, "logs", "rm-b.log"), "a");
    const child = spawn(
      process.execPath,
      [distEntry("resourcemanager/main.js"), "--config", configB, "--ready-file", ready],
      {
        detached: true,
        stdio: ["ignore", log, log],
      },
    );
    child.unref();
    pidB = child.pid ?? 0;
    await waitFor(() => existsSync(ready), { what: "the second resource manager to serve", timeoutMs: 30_000 });
  }, 180_000);

  afterAll(async () => {
    if (pidB && alive(pidB)) process.kill(pidB, "SIGKILL");
    coord?.close();
    await c?.stop();
    await etcd?.stop();
    if (staging) rmSync(staging, { recursive: true, force: true });
  });

  it("the standby takes over, the node managers follow, the job finishes with no finished task run again", async () => {
    expect((await haCall(addrB)).role).toBe("standby");
    const refused = await nodesAt(addrB).catch((err: unknown) => err);
    expect(isHarvestError(refused, "NOT_ACTIVE")).toBe(true);
    if (isHarvestError(refused, "NOT_ACTIVE")) expect(refused.details.active).toBe(addrA);
    const first = await haCall(addrA);
    expect(first.role).toBe("active");

    const log = join(c.work, "failover.log");
    writeFileSync(log, "", { mode: 0o666 });
    chmodSync(log, 0o666);
    const dag = {
      name: "failover",
      vertices: [
        {
          name: "work",
          parallelism: 5,
          command: ["node", "-e", TASK, log, "${HARVEST_TASK_INDEX}"],
          resources: { vcores: 1, memoryMb: 64 },
        },
      ],
    };
    const appId = await c.client.submit(JSON.stringify(dag));
    await waitFor(() => runs(log).starts.size === 5, { what: "every task to start", timeoutMs: 60_000 });
    // The old term's leader key, to write with it later.
    const leaders = await coord.service("rm").namespace("election/leader/").getAll().exec();
    const oldLeader = leaders.kvs.find((kv) => Number(kv.create_revision) === Number(first.epoch));
    expect(oldLeader).toBeDefined();

    const killedMs = Date.now();
    process.kill(readCluster(c.dir).rm.pid, "SIGKILL");
    await waitFor(async () => (await haCall(addrB).catch(() => undefined))?.role === "active", {
      what: "the standby to become active",
      timeoutMs: 30_000,
      intervalMs: 50,
    });
    const activeMs = Date.now() - killedMs;
    await waitFor(async () => (await nodesAt(addrB).catch(() => [] as string[])).length === 2, {
      what: "both node managers to register with the new active",
      timeoutMs: 30_000,
      intervalMs: 50,
    });
    const registeredMs = Date.now() - killedMs;
    console.log(`rm failover: new active ${activeMs} ms after kill -9, node managers registered at ${registeredMs} ms`);
    const second = await haCall(addrB);
    expect(second.epoch).toBeGreaterThan(first.epoch);

    const client = new JobClient(addrB);
    try {
      const r = await client.waitForCompletion(appId, undefined, 200);
      expect(r.state).toBe("FINISHED");
      const { starts, dones } = runs(log);
      expect([...starts.values()]).toEqual([1, 1, 1, 1, 1]);
      expect([...dones.keys()].sort()).toEqual(["0", "1", "2", "3", "4"]);
      expect([...dones.values()]).toEqual([1, 1, 1, 1, 1]);
    } finally {
      client.close();
    }

    // The old active comes back as a standby that names the new active.
    await restartDaemon(c.dir, "rm");
    await waitFor(async () => (await haCall(addrA).catch(() => undefined))?.activeAddress === addrB, {
      what: "the restarted resource manager to follow the new active",
    });
    expect((await haCall(addrA)).role).toBe("standby");

    // Fencing: a write of the old term is refused, and so is a container grant of the old term.
    const stale = new EtcdRmStore(coord, { key: oldLeader!.key.toString(), epoch: Number(first.epoch) });
    expect(await codeOf(stale.putDrains([]))).toBe("NOT_ACTIVE");
    const secret = String(
      (JSON.parse(readFileSync(join(c.dir, "run", "rm.json"), "utf8")) as { secret: string }).secret,
    );
    const node = readCluster(c.dir).nodes[0]!;
    const cm = makeClient(loadHarvestProto().ContainerManager, node.address);
    const id = "container_1_0001_01_000099";
    const resource = { vcoresMilli: 500, memoryMb: 64 };
    const epoch = Number(first.epoch);
    const token = signContainer(secret, { containerId: id, appId, nodeId: node.nodeId, resource, epoch });
    const container = { id, nodeId: node.nodeId, nmAddress: node.address, resource, priority: 1, epoch, token };
    try {
      expect(
        await codeOf(call(cm, cm.startContainer, { container, appId, argv: ["true"], env: {}, isAm: false })),
      ).toBe("STALE_EPOCH");
    } finally {
      cm.close();
    }
  }, 240_000);
});
