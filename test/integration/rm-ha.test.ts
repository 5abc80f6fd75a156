/**
 * Highly available resource managers in one process against a real etcd (one TLS member): the standby refuses every
 * call with NOT_ACTIVE naming the active and redirects its pages there; a graceful hand-over makes the standby active
 * under a higher term and the node manager follows it (registering again, work-preservingly); the old active steps
 * down and refuses in turn; a node manager refuses a container grant of the old term (STALE_EPOCH); a job too large for
 * the state store is refused at submission (DAG_TOO_LARGE).
 */
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { failover, masterRows } from "../../cli/ha-commands.js";
import { signContainer } from "../../common/container-token.js";
import { isHarvestError } from "../../common/errors.js";
import { call, loadHarvestProto, makeClient } from "../../common/grpc.js";
import { Logger } from "../../common/log.js";
import { NodeManager } from "../../nodemanager/node-manager.js";
import { HaResourceManager } from "../../resourcemanager/ha-resource-manager.js";
import { haveEtcd, startTestEtcd } from "../helpers/etcd.js";
import { haCall, nodesAt } from "../helpers/masters.js";
import type { TestEtcd } from "../helpers/etcd.js";
import { codeOf } from "../error-code.js";
import { waitFor } from "../wait-for.js";

const quiet = new Logger("test", process.env["RMHA_DEBUG"] ? "info" : "error");
const SECRET = "s3cret";

/** The error a call to the resource manager at `address` fails with (GetClusterNodes), or undefined if it answers. */
async function refusal(address: string): Promise<unknown> {
  const c = makeClient(loadHarvestProto().ApplicationClientService, address);
  try {
    await call(c, c.getClusterNodes, {}, 3_000);
    return undefined;
  } catch (err) {
    return err;
  } finally {
    c.close();
  }
}

describe.skipIf(!haveEtcd)("highly available resource managers", () => {
  let etcd: TestEtcd;
  let dir: string;
  let rmA: HaResourceManager;
  let rmB: HaResourceManager;
  let nm: NodeManager;
  let firstEpoch = 0;

  beforeAll(async () => {
    etcd = await startTestEtcd();
    dir = mkdtempSync(join(tmpdir(), "harvest-rmha-"));
    const trace = join(dir, "idle.csv");
    writeFileSync(trace, "time_s,cpu_pct\n0,0\n300,0\n600,0\n");
    const rm = (name: string): HaResourceManager =>
      new HaResourceManager(
        {
          dataDir: join(dir, name),
          stagingDir: join(dir, "staging"),
          insecure: true,
          secret: SECRET,
          resyncWindowMs: 2_000,
          haCoordination: etcd.coordination({ clusterId: "rm-ha-test", sessionTtlS: 2 }),
        },
        { logger: quiet },
      );
    rmA = rm("rmA");
    await rmA.start();
    await waitFor(() => rmA.role === "active", { what: "the first resource manager to become active" });
    firstEpoch = rmA.epoch;
    rmB = rm("rmB");
    await rmB.start();
    nm = new NodeManager(
      {
        nodeId: "n1",
        rmAddress: `${rmB.address},${rmA.address}`,
        dataDir: join(dir, "n1"),
        primary: `trace:${trace}`,
        cgroups: "none",
        secret: SECRET,
        insecure: true,
        reconnectMinMs: 100,
        reconnectMaxMs: 300,
      },
      { logger: quiet },
    );
    await nm.start();
    await waitFor(() => nm.isRegistered, { what: "the node manager to register with the active" });
  }, 90_000);

  afterAll(async () => {
    await nm?.stop();
    await rmB?.stop();
    await rmA?.stop();
    await etcd?.stop();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it("a standby refuses every call with NOT_ACTIVE naming the active, and redirects its pages there", async () => {
    expect(rmB.role).toBe("standby");
    const err = await refusal(rmB.address);
    expect(isHarvestError(err, "NOT_ACTIVE")).toBe(true);
    if (isHarvestError(err, "NOT_ACTIVE")) expect(err.details.active).toBe(rmA.address);
    expect(await nodesAt(rmA.address)).toEqual(["n1"]);
    const res = await fetch(`${rmB.httpUrl}/cluster/apps?x=1`, { redirect: "manual" });
    expect(res.status).toBe(307);
    expect(res.headers.get("location")).toBe(`${rmA.httpUrl}/cluster/apps?x=1`);
    // The active's REST API and pages say its role and term.
    const info = (await (await fetch(`${rmA.httpUrl}/ws/v1/cluster/info`)).json()) as { clusterInfo: { ha: object } };
    expect(info.clusterInfo.ha).toEqual({ role: "active", epoch: firstEpoch });
    expect(await (await fetch(`${rmA.httpUrl}/`)).text()).toContain(`is active in term ${firstEpoch}`);
    const status = await haCall(rmB.address, "getHaStatus");
    expect(status).toMatchObject({ role: "standby", activeAddress: rmA.address, service: "rm" });
    expect(await haCall(rmA.address, "getHaStatus")).toMatchObject({ role: "active", epoch: firstEpoch });
    expect(await codeOf(haCall(rmB.address, "failover"))).toBe("NOT_ACTIVE");
    // `harvest admin ha status`: both masters, one active.
    const rows = await masterRows({ rmAddress: `${rmA.address},${rmB.address}`, nnAddress: "", source: "test" }, "rm");
    expect(rows.map((r) => [r.address, r.role, r.active])).toEqual([
      [rmA.address, "active", rmA.address],
      [rmB.address, "standby", rmA.address],
    ]);
  });

  it("refuses at submission a job whose DAG the state store cannot hold in one write", async () => {
    const c = makeClient(loadHarvestProto().ApplicationClientService, rmA.address);
    const dag = {
      name: "huge",
      vertices: [
        {
          name: "v",
          parallelism: 1,
          command: ["node", "-e", "0", "x".repeat(700 * 1024)],
          resources: { vcores: 0.5, memoryMb: 64 },
        },
      ],
    };
    try {
      expect(await codeOf(call(c, c.submitApplication, { dagJson: JSON.stringify(dag), user: "alice" }, 10_000))).toBe(
        "DAG_TOO_LARGE",
      );
    } finally {
      c.close();
    }
  });

  it("hands over gracefully: the standby becomes active under a higher term and the node manager follows it", async () => {
    // What `harvest admin ha failover --service rm` does: the active resigns, and it waits for the new active.
    const target = { rmAddress: `${rmA.address},${rmB.address}`, nnAddress: "", source: "test" };
    const { from, to } = await failover(target, "rm");
    expect(from).toMatchObject({ address: rmA.address, epoch: firstEpoch });
    expect(to).toMatchObject({ address: rmB.address, role: "active" });
    expect(rmB.role).toBe("active");
    expect(rmB.epoch).toBe(to.epoch);
    expect(rmB.epoch).toBeGreaterThan(firstEpoch);
    await waitFor(async () => (await nodesAt(rmB.address).catch(() => [] as string[])).includes("n1"), {
      what: "the node manager to register with the new active",
      timeoutMs: 30_000,
    });
    await waitFor(() => rmA.role === "standby", { what: "the old active to step down" });
    await waitFor(
      async () => {
        const err = await refusal(rmA.address);
        return isHarvestError(err, "NOT_ACTIVE") && err.details.active === rmB.address;
      },
      { what: "the old active to refuse, naming the new one" },
    );
  }, 60_000);

  it("a node manager that heard the new term refuses a container grant of the old one (STALE_EPOCH)", async () => {
    await waitFor(() => nm.isRegistered && rmB.role === "active", { what: "the node manager to be registered" });
    const cm = makeClient(loadHarvestProto().ContainerManager, nm.address);
    const appId = "application_1_0001";
    const resource = { vcoresMilli: 500, memoryMb: 64 };
    const grant = (epoch: number) => {
      const id = `container_1_0001_01_00000${epoch === firstEpoch ? 1 : 2}`;
      return {
        id,
        nodeId: "n1",
        nmAddress: nm.address,
        resource,
        priority: 1,
        epoch,
        token: signContainer(SECRET, { containerId: id, appId, nodeId: "n1", resource, epoch }),
      };
    };
    const start = (container: object) =>
      codeOf(call(cm, cm.startContainer, { container, appId, argv: ["true"], env: {}, isAm: false }));
    try {
      expect(await start(grant(firstEpoch))).toBe("STALE_EPOCH");
      // The term is signed: claiming the new term on the old grant breaks its token.
      expect(await start({ ...grant(firstEpoch), epoch: rmB.epoch })).toBe("CONTAINER_TOKEN_INVALID");
    } finally {
      cm.close();
    }
  });
});
