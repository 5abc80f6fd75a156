/**
 * The placement contracts, run against every implementation: the scheduler's node policies (stock and the history
 * policy of seeds/004, Algorithm 1) behind the `Scheduler` that consults them, and the namenode's replica placement
 * (stock rack-aware and the diversity grid of Algorithm 2). Each implementation's own choices are tested in its own file.
 */
import { describe, expect, it } from "vitest";
import { SeededRng } from "../../../common/rng.js";
import type { Resources } from "../../../common/resource.js";
import { DiversityPlacementPolicy, StockPlacementPolicy } from "../../../namenode/index.js";
import type { DatanodeView, PlacementPolicy, PlacementRequest } from "../../../namenode/index.js";
import { HistorySchedulerPolicy, Scheduler, StockSchedulerPolicy } from "../../../resourcemanager/index.js";
import type { Allocation, SchedulerPolicy } from "../../../resourcemanager/index.js";

const RESERVE_FRACTION = 0.1;
const NODES = 8;
const APPS = 5;

/** A scheduler policy under test, and how it is told that an app may run anywhere (its own gate opened). */
interface SchedulerPolicyCase {
  name: string;
  make(): { policy: SchedulerPolicy; admit(appId: string, nodeIds: readonly string[]): void };
}

const schedulerPolicies: SchedulerPolicyCase[] = [
  { name: "stock", make: () => ({ policy: new StockSchedulerPolicy(), admit: () => undefined }) },
  {
    name: "history",
    make: () => {
      const policy = new HistorySchedulerPolicy();
      return { policy, admit: (appId, nodeIds) => policy.assign(appId, nodeIds) };
    },
  },
];

/** A seeded cluster: nodes of random sizes and primary usage, apps with random asks; every heartbeat's grants. */
function runScheduler(c: SchedulerPolicyCase, seed: number) {
  const rng = new SeededRng(seed);
  const { policy, admit } = c.make();
  let seq = 0;
  const s = new Scheduler(policy, { reserveFraction: RESERVE_FRACTION, maxAllocationsPerHeartbeat: 0 }, (appId) => {
    seq += 1;
    return `${appId}/c${seq}`;
  });
  const nodes = new Map<string, { capacity: Resources; primary: Resources }>();
  for (let i = 0; i < NODES; i++) {
    const capacity = { vcoresMilli: 1000 * (2 + rng.int(7)), memoryMb: 1024 * (2 + rng.int(7)) };
    const primary = { vcoresMilli: rng.int(capacity.vcoresMilli), memoryMb: rng.int(capacity.memoryMb) };
    const id = `n${i}`;
    nodes.set(id, { capacity, primary });
    s.addNode(id, capacity, `/rack${i % 3}`);
    s.updatePrimaryUsage(id, primary);
  }
  const asks = new Map<string, Resources>();
  for (let a = 0; a < APPS; a++) {
    const appId = `app${a}`;
    const resource = { vcoresMilli: 250 * (1 + rng.int(6)), memoryMb: 128 * (1 + rng.int(8)) };
    asks.set(appId, resource);
    s.addApp(appId, a);
    admit(appId, [...nodes.keys()]);
    s.setAsks(appId, [{ priority: 0, resource, count: 20 }]);
  }
  const grants: Allocation[] = [];
  for (let round = 0; round < 3; round++) for (const id of nodes.keys()) grants.push(...s.allocateOnNode(id));
  return { nodes, asks, grants };
}

describe.each(schedulerPolicies)("the scheduler's node policy contract: $name", (c) => {
  it("never grants past a node's capacity less its reserve and its primary tenant's usage", () => {
    for (const seed of [1, 2, 3, 4, 5]) {
      const { nodes, grants } = runScheduler(c, seed);
      expect(grants.length).toBeGreaterThan(0);
      for (const [id, { capacity, primary }] of nodes) {
        const on = grants.filter((g) => g.nodeId === id);
        const cores = on.reduce((sum, g) => sum + g.resource.vcoresMilli, 0);
        const memory = on.reduce((sum, g) => sum + g.resource.memoryMb, 0);
        const coreRoom = Math.max(0, capacity.vcoresMilli * (1 - RESERVE_FRACTION) - primary.vcoresMilli);
        expect(cores).toBeLessThanOrEqual(coreRoom + 1e-9);
        expect(memory).toBeLessThanOrEqual(Math.max(0, capacity.memoryMb - primary.memoryMb));
      }
    }
  });

  it("grants each container the resources asked, under a distinct id", () => {
    const { asks, grants } = runScheduler(c, 7);
    expect(new Set(grants.map((g) => g.containerId)).size).toBe(grants.length);
    for (const g of grants) expect(g.resource).toEqual(asks.get(g.appId));
  });

  it("makes the same grants for the same seed", () => {
    expect(runScheduler(c, 11).grants).toEqual(runScheduler(c, 11).grants);
  });
});

/** A replica placement policy under test, built over the datanodes it will see. */
interface ReplicaPolicyCase {
  name: string;
  make(datanodes: readonly DatanodeView[]): PlacementPolicy;
}

const replicaPolicies: ReplicaPolicyCase[] = [
  { name: "stock", make: () => new StockPlacementPolicy() },
  {
    name: "diversity",
    // One tenant per datanode, spread over the grid's reimage and peak-CPU tiers, five environments.
    make: (datanodes) =>
      new DiversityPlacementPolicy({
        tenants: datanodes.map((d, i) => ({
          tenantId: `t${i}`,
          environment: `env${i % 5}`,
          reimagesPerServerMonth: i % 3,
          peakCpuPct: 20 + 30 * (Math.floor(i / 3) % 3),
          servers: [d.datanodeId],
        })),
        freeBytesByServer: new Map(datanodes.map((d) => [d.datanodeId, d.remainingBytes])),
      }),
  },
];

const BLOCK = 128 * 1024 * 1024;

/** Twelve datanodes on three racks; some full, some busy. */
function datanodes(seed: number): DatanodeView[] {
  const rng = new SeededRng(seed);
  return Array.from({ length: 12 }, (_, i) => ({
    datanodeId: `dn${i}`,
    rack: `/rack${i % 3}`,
    remainingBytes: rng.next() < 0.2 ? BLOCK - 1 : BLOCK * (1 + rng.int(100)),
    primaryBusy: rng.next() < 0.15,
  }));
}

function request(nodes: readonly DatanodeView[], seed: number, over: Partial<PlacementRequest> = {}): PlacementRequest {
  return {
    replication: 3,
    excluded: new Set(),
    datanodes: nodes,
    blockSizeBytes: BLOCK,
    rng: new SeededRng(seed),
    ...over,
  };
}

/** The nodes any policy may choose: not excluded, not busy, with room for the block. */
function eligible(req: PlacementRequest): DatanodeView[] {
  return req.datanodes.filter(
    (d) => !req.excluded.has(d.datanodeId) && !d.primaryBusy && d.remainingBytes >= req.blockSizeBytes,
  );
}

describe.each(replicaPolicies)("the replica placement contract: $name", (c) => {
  it("chooses distinct datanodes that are not excluded, not busy and have room for the block, as many as qualify", () => {
    for (const seed of [1, 2, 3, 4, 5, 6]) {
      const nodes = datanodes(seed);
      const policy = c.make(nodes);
      for (const replication of [1, 3, 5, 10]) {
        const req = request(nodes, seed, { replication, excluded: new Set([`dn${seed % 12}`]) });
        const ok = new Set(eligible(req).map((d) => d.datanodeId));
        const chosen = policy.chooseTargets(req).map((d) => d.datanodeId);
        expect(new Set(chosen).size).toBe(chosen.length);
        for (const id of chosen) expect(ok.has(id), `${id} was not eligible`).toBe(true);
        expect(chosen.length).toBe(Math.min(replication, ok.size));
      }
    }
  });

  it("chooses nothing when no datanode qualifies", () => {
    const nodes = datanodes(9).map((d) => ({ ...d, primaryBusy: true }));
    expect(c.make(nodes).chooseTargets(request(nodes, 9))).toEqual([]);
  });

  it("never chooses a datanode that already holds a replica when told to exclude it", () => {
    const nodes = datanodes(3);
    const existing = eligible(request(nodes, 3))
      .slice(0, 2)
      .map((d) => d.datanodeId);
    const req = request(nodes, 3, { replication: 1, existing, excluded: new Set(existing) });
    const chosen = c.make(nodes).chooseTargets(req);
    expect(chosen.map((d) => d.datanodeId).filter((id) => existing.includes(id))).toEqual([]);
  });

  it("chooses the same datanodes for the same seed", () => {
    const nodes = datanodes(4);
    const a = c.make(nodes).chooseTargets(request(nodes, 42));
    const b = c.make(nodes).chooseTargets(request(nodes, 42));
    expect(a).toEqual(b);
  });
});
