/**
 * Power domains on a real resource manager over gRPC on loopback: the PowerAdmin service (ListDomains, SetBudget,
 * SetDomains, durable across a restart, coded errors for malformed requests) and the node budgets the resource manager
 * sends in heartbeat acks when a domain nears its budget. The node managers are played by the test over the real
 * ResourceTracker stream (RegisterNode, then heartbeats carrying power readings), as a node manager with a meter speaks
 * it; the node-manager side (real capping) is tested with real node managers elsewhere.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { JobClient } from "../../client/job-client.js";
import { PowerAdminClient } from "../../client/power-admin-client.js";
import { Logger } from "../../common/log.js";
import { ResourceManager } from "../../resourcemanager/resource-manager.js";
import type { ResourceManagerOptions } from "../../resourcemanager/options.js";
import type { HeartbeatAckOutput } from "../../proto/generated/harvest/v1/HeartbeatAck.js";
import { codeOf } from "../error-code.js";
import { PlayedNode as PlayedNodeBase } from "../played-node.js";
import { cpuVertex } from "./harness.js";

const quiet = new Logger("test", "error");

/** A played node manager that reports the watts it is told to (0: no reading). */
class PlayedNode extends PlayedNodeBase {
  watts(watts: number, extra: Record<string, unknown> = {}): Promise<HeartbeatAckOutput> {
    return this.heartbeat({ powerWatts: watts, ...extra });
  }
}

const CHASSIS = "row1/rack1/chassis1";

describe("power domains on the resource manager", () => {
  let dir: string;
  let rm: ResourceManager;
  let admin: PowerAdminClient;
  let n1: PlayedNode;
  let n2: PlayedNode;
  const options = (): Partial<ResourceManagerOptions> & { dataDir: string } => ({
    dataDir: join(dir, "rm"),
    // The test heartbeats when it wants: keep the played nodes from going silent or lost meanwhile.
    nodeExpiryMs: 120_000,
    powerStaleHeartbeats: 100,
    powerDomains: [{ path: CHASSIS, budgetWatts: 1000 }],
    powerNodeDomains: { n1: CHASSIS, n2: CHASSIS },
  });

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), "harvest-power-"));
    rm = new ResourceManager(options(), { logger: quiet });
    await rm.start();
    admin = new PowerAdminClient(rm.address);
    n1 = new PlayedNode(rm.address, "n1");
    n2 = new PlayedNode(rm.address, "n2");
    await n1.register({ powerProfile: "dell-r730-xeon-e5-2699v3" });
    await n2.register();
  });
  afterAll(async () => {
    n1?.close();
    n2?.close();
    admin?.close();
    await rm?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  it("lists the configured tree with the registered nodes, their profiles and draws", async () => {
    await n1.watts(300);
    await n2.watts(0);
    const t = await admin.list();
    expect(t.alertFraction).toBe(0.97);
    expect(t.uncapFraction).toBe(0.9);
    expect(t.domains.map((d) => d.path)).toEqual(["row1", "row1/rack1", CHASSIS, `${CHASSIS}/n1`, `${CHASSIS}/n2`]);
    const chassis = t.domains.find((d) => d.path === CHASSIS)!;
    expect(chassis).toMatchObject({
      budgetWatts: 1000,
      nodes: 2,
      alert: false,
      configured: true,
      nodeIds: ["n1", "n2"],
    });
    const nodes = Object.fromEntries(t.nodes.map((n) => [n.nodeId, n]));
    expect(nodes["n1"]).toMatchObject({
      domain: CHASSIS,
      domainSource: "assigned",
      drawWatts: 300,
      drawSource: "measured",
      powerMeter: "trace: played.csv",
      powerProfile: "dell-r730-xeon-e5-2699v3",
      cappingState: "uncapped",
    });
    // No reading: estimated from the default profile at the node's (idle) utilization.
    expect(nodes["n2"]).toMatchObject({ drawSource: "estimated", powerProfile: "dell-r740-xeon-8180" });
    expect(nodes["n2"]!.drawWatts).toBeCloseTo(52.3, 5);
    expect(chassis.drawWatts).toBeCloseTo(352.3, 5);
  });

  it("sends each node its even share from 97 % of the budget and lifts it under 90 %", async () => {
    expect((await n1.watts(400)).nodeBudgetWatts).toBe(0);
    expect((await n2.watts(400)).nodeBudgetWatts).toBe(0); // 800 W
    expect((await n1.watts(560)).nodeBudgetWatts).toBe(0); // 960 W: 96 %
    const tripped = await n1.watts(570); // 970 W: 97 %
    expect(tripped).toMatchObject({ nodeBudgetWatts: 500, budgetDomain: CHASSIS });
    expect(await n2.watts(400)).toMatchObject({ nodeBudgetWatts: 500, budgetDomain: CHASSIS });
    const listed = (await admin.list(CHASSIS)).domains[0]!;
    expect(listed).toMatchObject({ path: CHASSIS, alert: true, shareWatts: 500, budgetedNodes: 2 });
    expect(listed.alertSinceMs).toBeGreaterThan(0);
    // The capping agents bring it down to 92 %: still over the uncap threshold, so the budgets stay.
    expect((await n2.watts(460)).nodeBudgetWatts).toBe(500);
    const held = await n1.watts(460, { powerCapped: true, cappingState: "capped", throttledContainers: 3 });
    expect(held.nodeBudgetWatts).toBe(500);
    const capped = (await admin.list()).domains.find((d) => d.path === CHASSIS)!;
    expect(capped).toMatchObject({ cappedNodes: 1, throttledContainers: 3, alert: true });
    // 900 W is not under 90 %; 890 W is: lifted.
    expect((await n1.watts(440)).nodeBudgetWatts).toBe(500);
    expect((await n1.watts(430)).nodeBudgetWatts).toBe(0);
    expect(await n2.watts(440)).toMatchObject({ nodeBudgetWatts: 0, budgetDomain: "" });
  });

  it("applies a budget cut at once, and a removed budget lifts the caps", async () => {
    const cut = await admin.setBudget(CHASSIS, 800); // 870 W drawn
    expect(cut).toMatchObject({ path: CHASSIS, budgetWatts: 800, alert: true, shareWatts: 400 });
    expect((await n1.watts(440)).nodeBudgetWatts).toBe(400);
    // The rack gets a budget too: the node takes the smaller of the two shares.
    await admin.setBudget("row1/rack1", 600);
    expect(await n2.watts(440)).toMatchObject({ nodeBudgetWatts: 300, budgetDomain: "row1/rack1" });
    expect((await admin.setBudget("/row1/rack1/", 0)).budgetWatts).toBe(0);
    expect((await admin.setBudget(CHASSIS, 0)).alert).toBe(false);
    expect((await n1.watts(440)).nodeBudgetWatts).toBe(0);
  });

  it("replaces the tree with SetDomains, including a server's own budget", async () => {
    const t = await admin.setDomains({
      domains: [
        { path: "row1/rack1/chassisA", budgetWatts: 2000 },
        { path: "row1/rack1/chassisB/n2", budgetWatts: 300 },
      ],
      nodes: { n1: "row1/rack1/chassisA", n2: "row1/rack1/chassisB" },
    });
    expect(t.updatedMs).toBeGreaterThan(0);
    expect(t.assignments).toEqual([
      { nodeId: "n1", domain: "row1/rack1/chassisA" },
      { nodeId: "n2", domain: "row1/rack1/chassisB" },
    ]);
    expect(t.domains.map((d) => d.path)).not.toContain(CHASSIS);
    const server = t.domains.find((d) => d.path === "row1/rack1/chassisB/n2")!;
    expect(server).toMatchObject({ kind: "server", budgetWatts: 300, alert: true, shareWatts: 300 });
    expect(await n2.watts(440)).toMatchObject({ nodeBudgetWatts: 300, budgetDomain: "row1/rack1/chassisB/n2" });
    expect((await n1.watts(440)).nodeBudgetWatts).toBe(0);
  });

  it("answers malformed requests with coded errors and changes nothing", async () => {
    const before = await admin.list();
    expect(await codeOf(admin.setBudget("row1/rack1/chassisA", -5))).toBe("INVALID_ARGUMENT");
    expect(await codeOf(admin.setBudget("row1/rack1/chassisA", Number.POSITIVE_INFINITY))).toBe("INVALID_ARGUMENT");
    expect(await codeOf(admin.setBudget("row7", 100))).toBe("POWER_DOMAIN_NOT_FOUND");
    expect(await codeOf(admin.setBudget("row1/../etc", 100))).toBe("POWER_DOMAIN_BAD_PATH");
    expect(await codeOf(admin.setBudget("", 100))).toBe("POWER_DOMAIN_BAD_PATH");
    expect(await codeOf(admin.list("row1/rack1/nowhere"))).toBe("POWER_DOMAIN_NOT_FOUND");
    expect(
      await codeOf(
        admin.setDomains({
          domains: [
            { path: "row2", budgetWatts: 100 },
            { path: "row2/../../x", budgetWatts: 100 },
          ],
        }),
      ),
    ).toBe("POWER_DOMAIN_BAD_PATH");
    expect(await codeOf(admin.setDomains({ domains: [{ path: "row2", budgetWatts: -1 }] }))).toBe("INVALID_ARGUMENT");
    expect(await codeOf(admin.setDomains({ domains: [], nodes: { "../n1": "row2" } }))).toBe("INVALID_ARGUMENT");
    const after = await admin.list();
    expect(after.configured).toEqual(before.configured);
    expect(after.assignments).toEqual(before.assignments);
    // On the node stream: a malformed chassis at registration and a negative reading close the stream with a code.
    const bad = new PlayedNode(rm.address, "n9");
    expect(await codeOf(bad.register({ chassis: "row1/../../etc" }))).toBe("POWER_DOMAIN_BAD_PATH");
    bad.close();
    const liar = new PlayedNode(rm.address, "n8");
    await liar.register();
    expect(await codeOf(liar.watts(-20))).toBe("INVALID_ARGUMENT");
    liar.close();
    expect(rm.state).toBe("running");
  });

  it("keeps the tree set through the admin API across a restart, over its configuration", async () => {
    await admin.setBudget("row1/rack1/chassisA", 1500);
    const before = await admin.list();
    n1.close();
    n2.close();
    admin.close();
    await rm.stop();
    rm = new ResourceManager(options(), { logger: quiet });
    await rm.start();
    admin = new PowerAdminClient(rm.address);
    const after = await admin.list();
    expect(after.configured).toEqual([
      { path: "row1/rack1/chassisA", budgetWatts: 1500 },
      { path: "row1/rack1/chassisB/n2", budgetWatts: 300 },
    ]);
    expect(after.assignments).toEqual(before.assignments);
    expect(after.updatedMs).toBe(before.updatedMs);
    // The nodes come back into the stored tree when they register again.
    n1 = new PlayedNode(rm.address, "n1");
    n2 = new PlayedNode(rm.address, "n2");
    await n1.register();
    await n2.register();
    expect(await n2.watts(295)).toMatchObject({ nodeBudgetWatts: 300, budgetDomain: "row1/rack1/chassisB/n2" });
    expect((await admin.list("row1/rack1/chassisA")).domains[0]).toMatchObject({ nodeIds: ["n1"], nodes: 1 });
  });
});

describe("power-aware node choice on the resource manager", () => {
  /** Where the job manager's container of a fresh job goes when node "hot" heartbeats first, then "cool". */
  async function amNode(powerPlacement: "stock" | "power-aware"): Promise<string> {
    const dir = mkdtempSync(join(tmpdir(), "harvest-power-place-"));
    const rm = new ResourceManager(
      {
        dataDir: join(dir, "rm"),
        nodeExpiryMs: 120_000,
        powerStaleHeartbeats: 100,
        powerPlacement,
        // hot's chassis is near its budget: hot is held to 400 W and already draws 395 W.
        powerDomains: [{ path: "row1/hot-chassis", budgetWatts: 400 }],
        powerNodeDomains: { hot: "row1/hot-chassis", cool: "row1/cool-chassis" },
      },
      { logger: quiet },
    );
    await rm.start();
    const hot = new PlayedNode(rm.address, "hot");
    const cool = new PlayedNode(rm.address, "cool");
    const client = new JobClient(rm.address);
    try {
      await hot.register();
      await cool.register();
      expect((await hot.watts(395)).nodeBudgetWatts).toBe(400);
      await cool.watts(100);
      const appId = await client.submit(JSON.stringify({ name: "power-place", vertices: [cpuVertex("a", 1)] }));
      await hot.watts(395);
      await cool.watts(100);
      const report = await client.status(appId);
      const am = report.containers.find((c) => c.isAm);
      await client.kill(appId);
      return am?.nodeId ?? "none";
    } finally {
      hot.close();
      cool.close();
      client.close();
      await rm.stop();
      rmSync(dir, { recursive: true, force: true });
    }
  }

  it("keeps the stock choice under stock placement: the first node with headroom", async () => {
    expect(await amNode("stock")).toBe("hot");
  });

  it("skips a node whose predicted draw with the container exceeds its node budget", async () => {
    expect(await amNode("power-aware")).toBe("cool");
  });
});
