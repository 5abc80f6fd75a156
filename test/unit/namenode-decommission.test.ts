/**
 * Decommissioning in the replication monitor, wired to a block map as the namenode wires it (`replicatedBlockMap`): a
 * draining datanode's replicas stop counting, it is the preferred copy source and never a target, the drain completes
 * once every block it holds has enough in-service replicas, and a recommission counts its replicas again.
 */
import { describe, expect, it } from "vitest";
import { SeededRng } from "../../common/rng.js";
import { replicatedBlockMap } from "../../namenode/block-manager.js";
import type { BlockManager } from "../../namenode/block-manager.js";
import { DiversityPlacementPolicy } from "../../namenode/policy/diversity-placement.js";
import type { PlacementTenant } from "../../namenode/policy/diversity-placement.js";
import { StockPlacementPolicy } from "../../namenode/policy/placement.js";
import type { DatanodeView, PlacementPolicy } from "../../namenode/policy/placement.js";
import { countReplicas, ReplicationPriority, replicationPriority } from "../../namenode/policy/replication-monitor.js";
import type { ReplicationMonitor, ReplicationMonitorOptions } from "../../namenode/policy/replication-monitor.js";

const GiB = 1024 ** 3;
const NONE = [0, 0, 0, 0, 0];

/** dn1..dnN on racks /r1 (odd) and /r2 (even), 10 GiB free, idle primaries. */
function nodes(n: number, extra: Record<string, Partial<DatanodeView>> = {}): DatanodeView[] {
  return Array.from({ length: n }, (_, i) => {
    const datanodeId = `dn${i + 1}`;
    return { datanodeId, rack: `/r${(i % 2) + 1}`, remainingBytes: 10 * GiB, primaryBusy: false, ...extra[datanodeId] };
  });
}

const block = (id: number): { blockId: number; genStamp: number; numBytes: number } => ({
  blockId: id,
  genStamp: 1000,
  numBytes: 1024,
});

/** Committed 1 KiB blocks with replicas on the given datanodes, and the monitor the block map feeds. */
function blockMap(
  blocks: { id: number; expected?: number; on: string[] }[],
  options: Partial<ReplicationMonitorOptions> = {},
  policy: PlacementPolicy = new StockPlacementPolicy(),
): { bm: BlockManager; m: ReplicationMonitor } {
  const { blocks: bm, monitor: m } = replicatedBlockMap(policy, new SeededRng(3), options);
  for (const b of blocks) {
    bm.addBlock(block(b.id), 10, b.expected ?? 3, true);
    for (const dn of b.on) bm.received(dn, block(b.id));
  }
  return { bm, m };
}

/** Source, block and targets of each copy a tick scheduled. */
function copies(work: { replicate: { sourceId: string; block: { blockId: number }; targets: DatanodeView[] }[] }) {
  return work.replicate.map((t) => ({
    block: t.block.blockId,
    source: t.sourceId,
    targets: t.targets.map((d) => d.datanodeId),
  }));
}

describe("decommissioning a datanode", () => {
  it("stops counting its replica, copies the block from it to an in-service datanode, and completes once it lands", () => {
    const { bm, m } = blockMap([{ id: 1, on: ["dn1", "dn2", "dn3"] }]);
    const live = nodes(5);
    expect(copies(m.tick(live, 0))).toEqual([]);

    expect(m.decommission("dn1", bm.blocksOn("dn1"), { nowMs: 50 })).toBe(true);
    expect(m.adminState("dn1")).toBe("DECOMMISSION_IN_PROGRESS");
    // Two of three replicas count: under-replicated (2 x 3 >= 3, so level 2), and still readable from dn1.
    expect(m.priorityOf(1)).toBe(ReplicationPriority.UnderReplicated);
    expect(countReplicas(bm.get(1)!, undefined, (id) => m.adminState(id))).toEqual({
      health: "under-replicated",
      live: 2,
      corrupt: 0,
      decommissioning: 1,
      decommissioned: 0,
    });
    expect(m.decommissionStatus("dn1", 50)).toMatchObject({ blocks: 1, blocksNeedingCopies: 1, startedMs: 50 });

    // Source: dn1, preferred to dn2 and dn3 (all idle, none busy copying). Target: the stock policy places the third
    // replica by the in-service ones, dn2 (/r2) then dn3 (/r1): on dn3's rack, so dn5 (dn1 is out of service).
    const work = m.tick(live, 100);
    expect(copies(work)).toEqual([{ block: 1, source: "dn1", targets: ["dn5"] }]);
    expect(work.decommissioned).toEqual([]);
    expect(m.adminState("dn1")).toBe("DECOMMISSION_IN_PROGRESS");

    bm.received("dn5", block(1));
    const done = m.tick(live, 200);
    expect(done.decommissioned).toEqual(["dn1"]);
    // Four good replicas, three in service: dn1's is not surplus to delete, it leaves with the datanode.
    expect(done.delete).toEqual([]);
    expect(m.decommissionStatus("dn1", 300)).toEqual({
      datanodeId: "dn1",
      state: "DECOMMISSIONED",
      startedMs: 50,
      deadlineMs: 0,
      finishedMs: 200,
      blocks: 1,
      blocksNeedingCopies: 0,
      awaitingReport: false,
      deadlinePassed: false,
    });

    // Wiping it now loses nothing and leaves nothing under-replicated.
    expect(bm.removeDatanode("dn1")).toBe(1);
    expect(m.priorityOf(1)).toBeUndefined();
    const after = m.tick(
      live.filter((d) => d.datanodeId !== "dn1"),
      300,
    );
    expect([after.missing, after.underReplicated, copies(after)]).toEqual([0, NONE, []]);
    expect(m.adminState("dn1")).toBe("DECOMMISSIONED");
  });

  it("never chooses a draining or decommissioned datanode as a target", () => {
    // Four datanodes, two of them out of service: a block on dn1 alone (expected 3) can only go to dn3 and dn4.
    const { bm, m } = blockMap([
      { id: 1, on: ["dn1"] },
      { id: 2, on: ["dn1", "dn3"] },
    ]);
    m.decommission("dn1", bm.blocksOn("dn1"), { nowMs: 0 });
    m.decommission("dn2", bm.blocksOn("dn2"), { nowMs: 0 });
    const work = m.tick(nodes(4), 10);
    expect(copies(work).map((c) => ({ ...c, targets: [...c.targets].sort() }))).toEqual([
      { block: 1, source: "dn1", targets: ["dn3", "dn4"] },
      { block: 2, source: "dn1", targets: ["dn4"] },
    ]);
    // dn2 held nothing: its drain completes at once; dn1 waits for its copies.
    expect(work.decommissioned).toEqual(["dn2"]);
    expect(m.adminState("dn1")).toBe("DECOMMISSION_IN_PROGRESS");
  });

  it("gives a block held only by out-of-service datanodes the highest priority, not missing", () => {
    expect(replicationPriority(0, 3, 1)).toBe(ReplicationPriority.Highest);
    expect(replicationPriority(0, 3, 0)).toBe(ReplicationPriority.Missing);
    const { bm, m } = blockMap([
      { id: 1, on: ["dn2", "dn3"] },
      { id: 2, expected: 2, on: ["dn1", "dn5"] },
    ]);
    expect([m.priorityOf(1), m.priorityOf(2)]).toEqual([ReplicationPriority.UnderReplicated, undefined]);
    m.decommission("dn1", bm.blocksOn("dn1"), { nowMs: 0 });
    m.decommission("dn5", bm.blocksOn("dn5"), { nowMs: 0 });
    expect(m.priorityOf(2)).toBe(ReplicationPriority.Highest);
    expect(countReplicas(bm.get(2)!, undefined, (id) => m.adminState(id)).health).toBe("under-replicated");
    const work = m.tick(nodes(6), 10);
    expect([work.missing, work.underReplicated]).toEqual([0, [1, 0, 1, 0, 0]]);
    // Block 2 (level 0) is scheduled before block 1 (level 2), which arrived first.
    expect(work.replicate.map((t) => [t.block.blockId, t.priority])).toEqual([
      [2, 0],
      [1, 2],
    ]);
  });

  it("copies from draining datanodes first but within the per-source stream limit", () => {
    const { bm, m } = blockMap(
      [1, 2, 3].map((id) => ({ id, expected: 2, on: ["dn1", "dn2"] })),
      { maxReplicationStreams: 1 },
    );
    m.decommission("dn1", bm.blocksOn("dn1"), { nowMs: 0 });
    // Block 1 from dn1 (draining, preferred); dn1 is then at its limit, so block 2 from dn2; block 3 waits.
    const work = m.tick(nodes(6), 10);
    expect(copies(work).map((c) => [c.block, c.source])).toEqual([
      [1, "dn1"],
      [2, "dn2"],
    ]);
    for (const c of copies(work)) expect(c.targets).not.toContain("dn1");
    expect([m.inFlight("dn1"), m.inFlight("dn2"), m.waiting()]).toEqual([1, 1, 1]);
  });

  it("does not complete a restored drain before its datanode's first block report", () => {
    // After a namenode restart: the block map knows the blocks, no datanode has reported yet.
    const { bm, m } = blockMap([{ id: 1, on: [] }]);
    m.restoreDecommission(
      { datanodeId: "dn1", state: "DECOMMISSION_IN_PROGRESS", startedMs: 5, deadlineMs: 0, finishedMs: 0 },
      [],
      true,
    );
    m.restoreDecommission(
      { datanodeId: "dn9", state: "DECOMMISSIONED", startedMs: 1, deadlineMs: 0, finishedMs: 4 },
      [],
      false,
    );
    expect(m.tick(nodes(4), 10).decommissioned).toEqual([]);
    expect(m.decommissionStatus("dn1", 10)).toMatchObject({ awaitingReport: true, blocks: 0 });
    for (const dn of ["dn1", "dn2", "dn3", "dn4"]) bm.received(dn, block(1));
    // dn2..dn4 hold three in-service replicas, so nothing needs copying; still dn1 has not sent its full report.
    expect(m.tick(nodes(4), 20).decommissioned).toEqual([]);
    m.datanodeReported("dn1");
    expect(m.tick(nodes(4), 30).decommissioned).toEqual(["dn1"]);
    expect(m.decommissionRecord("dn1")).toEqual({
      datanodeId: "dn1",
      state: "DECOMMISSIONED",
      startedMs: 5,
      deadlineMs: 0,
      finishedMs: 30,
    });
    expect(m.decommissionRecord("dn9")).toMatchObject({ state: "DECOMMISSIONED", finishedMs: 4 });
    expect(m.outOfService()).toEqual(["dn1", "dn9"]);
  });

  it("reports a passed deadline once, keeps draining, and reports a new deadline's passing again", () => {
    // Two datanodes: dn1's copy has nowhere to go (dn2 holds the block), so the drain cannot finish.
    const { bm, m } = blockMap([{ id: 1, expected: 2, on: ["dn1", "dn2"] }]);
    m.decommission("dn1", bm.blocksOn("dn1"), { nowMs: 0, deadlineMs: 1_000 });
    expect(m.tick(nodes(2), 500).decommissionOverdue).toEqual([]);
    expect(m.tick(nodes(2), 1_500).decommissionOverdue).toEqual([{ datanodeId: "dn1", blocksNeedingCopies: 1 }]);
    expect(m.tick(nodes(2), 2_000).decommissionOverdue).toEqual([]);
    expect(m.decommissionStatus("dn1", 2_000)).toMatchObject({
      state: "DECOMMISSION_IN_PROGRESS",
      deadlinePassed: true,
      blocksNeedingCopies: 1,
    });
    // Asked again: only the deadline changes (a zero one would keep the old).
    expect(m.decommission("dn1", [], { nowMs: 2_000, deadlineMs: 3_000 })).toBe(false);
    expect(m.decommission("dn1", [], { nowMs: 2_100, deadlineMs: 0 })).toBe(false);
    expect(m.decommissionStatus("dn1", 2_500)).toMatchObject({
      startedMs: 0,
      deadlineMs: 3_000,
      deadlinePassed: false,
    });
    expect(m.tick(nodes(2), 3_001).decommissionOverdue).toEqual([{ datanodeId: "dn1", blocksNeedingCopies: 1 }]);
  });

  it("counts a recommissioned datanode's replicas again and deletes the surplus from the fullest datanode", () => {
    const { bm, m } = blockMap([{ id: 1, on: ["dn1", "dn2", "dn3"] }]);
    const live = nodes(5, { dn3: { remainingBytes: 1 * GiB } });
    m.decommission("dn1", bm.blocksOn("dn1"), { nowMs: 0 });
    const [copy] = m.tick(live, 10).replicate;
    for (const t of copy!.targets) bm.received(t.datanodeId, copy!.block);
    expect(m.tick(live, 20).decommissioned).toEqual(["dn1"]);

    expect(m.recommission("dn1", bm.blocksOn("dn1"))).toBe(true);
    expect(m.adminState("dn1")).toBe("NORMAL");
    expect(m.decommissionStatus("dn1", 30)).toBeUndefined();
    expect(m.recommission("dn1", bm.blocksOn("dn1"))).toBe(false);
    // Four replicas in service for a replication of 3: one goes, from dn3, the datanode with the least free space.
    expect(m.tick(live, 30).delete.map((d) => [d.datanodeId, d.block.blockId, d.reason])).toEqual([
      ["dn3", 1, "over-replicated"],
    ]);
  });

  it("completes the drain of a datanode that dies: what it alone held is missing", () => {
    const { bm, m } = blockMap([
      { id: 1, expected: 2, on: ["dn1"] },
      { id: 2, expected: 2, on: ["dn1", "dn2"] },
    ]);
    m.decommission("dn1", bm.blocksOn("dn1"), { nowMs: 0 });
    expect(m.decommissionStatus("dn1", 0)).toMatchObject({ blocks: 2, blocksNeedingCopies: 2 });
    bm.removeDatanode("dn1");
    const work = m.tick(
      nodes(3).filter((d) => d.datanodeId !== "dn1"),
      10,
    );
    expect(work.decommissioned).toEqual(["dn1"]);
    expect(work.missing).toBe(1);
    expect(m.decommissionStatus("dn1", 10)).toMatchObject({ blocks: 0, blocksNeedingCopies: 0 });
  });

  it("reads from a decommissioned datanode only when nothing else holds the block", () => {
    const { bm, m } = blockMap([]);
    m.restoreDecommission(
      { datanodeId: "dn1", state: "DECOMMISSIONED", startedMs: 0, deadlineMs: 0, finishedMs: 1 },
      [],
      false,
    );
    bm.addBlock(block(1), 10, 2, true);
    bm.received("dn1", block(1));
    bm.addBlock(block(2), 10, 3, true);
    bm.received("dn1", block(2));
    bm.received("dn2", block(2));
    expect(m.decommissionStatus("dn1", 5)).toMatchObject({ blocks: 2, blocksNeedingCopies: 2 });
    const work = m.tick(nodes(5), 10);
    expect(copies(work).map((c) => [c.block, c.source])).toEqual([
      [1, "dn1"],
      [2, "dn2"],
    ]);
    for (const c of copies(work)) expect(c.targets).not.toContain("dn1");
  });

  it("keeps the diversity rules: the copy goes to the only other server in the cell the in-service replicas leave", () => {
    // A 3x3 grid of one tenant per cell, two servers each: row r = reimage tier r, column c = peak-CPU tier c, every
    // tenant in an environment of its own; equal free space, so the equal-space tertiles fall between the tiers.
    const tenants: PlacementTenant[] = [];
    const free = new Map<string, number>();
    const views: DatanodeView[] = [];
    for (let r = 0; r < 3; r++)
      for (let c = 0; c < 3; c++) {
        const servers = [`s${r}${c}a`, `s${r}${c}b`];
        tenants.push({
          tenantId: `t${r}${c}`,
          environment: `env${r}${c}`,
          reimagesPerServerMonth: r,
          peakCpuPct: 10 + 30 * c,
          servers,
        });
        for (const s of servers) {
          free.set(s, 100 * GiB);
          views.push({ datanodeId: s, rack: "/default", remainingBytes: 100 * GiB, primaryBusy: false });
        }
      }
    const policy = new DiversityPlacementPolicy();
    policy.setTenants(tenants, free);
    expect(policy.cellOfServer("s12b")).toEqual({ row: 1, col: 2 });
    const { bm, m } = blockMap([{ id: 1, on: ["s00a", "s11a", "s22a"] }], {}, policy);
    m.decommission("s00a", bm.blocksOn("s00a"), { nowMs: 0 });
    // The in-service replicas use rows 1, 2 and columns 1, 2: only cell (0,0) is left, and s00a is out of service.
    expect(copies(m.tick(views, 10))).toEqual([{ block: 1, source: "s00a", targets: ["s00b"] }]);
  });
});
