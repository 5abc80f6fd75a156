/**
 * The replication monitor's decisions over a block map, wired as the namenode wires them (`replicatedBlockMap`: the
 * block map's events feed the monitor's priority queues; live datanodes and time are passed to each tick).
 */
import { describe, expect, it } from "vitest";
import { SeededRng } from "../../common/rng.js";
import { replicatedBlockMap } from "../../namenode/block-manager.js";
import type { BlockManager } from "../../namenode/block-manager.js";
import { StockPlacementPolicy } from "../../namenode/policy/placement.js";
import type { DatanodeView } from "../../namenode/policy/placement.js";
import { classifyBlock, ReplicationPriority } from "../../namenode/policy/replication-monitor.js";
import type { ReplicationMonitor, ReplicationMonitorOptions } from "../../namenode/policy/replication-monitor.js";

const GiB = 1024 ** 3;

function nodes(n: number, extra: Record<string, Partial<DatanodeView>> = {}): DatanodeView[] {
  return Array.from({ length: n }, (_, i) => {
    const datanodeId = `dn${i + 1}`;
    return {
      datanodeId,
      rack: `/r${(i % 2) + 1}`,
      remainingBytes: 10 * GiB,
      primaryBusy: false,
      ...extra[datanodeId],
    };
  });
}

/**
 * A block map with committed blocks of 1 KiB and replicas on the given datanodes, and the monitor it feeds (the
 * namenode's wiring).
 */
function blockMap(
  blocks: { id: number; expected?: number; on: string[] }[],
  options: Partial<ReplicationMonitorOptions> = {},
): { bm: BlockManager; m: ReplicationMonitor } {
  const { blocks: bm, monitor: m } = replicatedBlockMap(new StockPlacementPolicy(), new SeededRng(3), options);
  for (const b of blocks) {
    const block = { blockId: b.id, genStamp: 1000, numBytes: 1024 };
    bm.addBlock(block, 10, b.expected ?? 3, true);
    for (const dn of b.on) bm.received(dn, block);
  }
  return { bm, m };
}

describe("the replication monitor", () => {
  it("schedules a block with a single live replica before blocks that have two", () => {
    // dn1 is the only possible source and may run one copy at a time.
    const { m } = blockMap(
      [
        { id: 1, on: ["dn1", "dn2"] },
        { id: 2, on: ["dn1", "dn3"] },
        { id: 3, on: ["dn1"] },
      ],
      { maxReplicationStreams: 1 },
    );
    const live = nodes(6, { dn2: { primaryBusy: true }, dn3: { primaryBusy: true } });
    const work = m.tick(live, 0);
    expect(work.underReplicated).toEqual([1, 0, 2, 0, 0]);
    expect(work.replicate.map((t) => [t.block.blockId, t.sourceId, t.priority])).toEqual([[3, "dn1", 0]]);
    const targets = work.replicate[0]?.targets.map((t) => t.datanodeId) ?? [];
    expect(targets).toHaveLength(2);
    expect(targets).not.toContain("dn1");
  });

  it("limits the copies in flight per source datanode and schedules the rest on later ticks", () => {
    const { bm, m } = blockMap(
      Array.from({ length: 6 }, (_, i) => ({ id: i + 1, expected: 2, on: ["dn1"] })),
      { maxReplicationStreams: 2 },
    );
    const first = m.tick(nodes(4), 0);
    expect(first.replicate).toHaveLength(2);
    expect(m.inFlight("dn1")).toBe(2);
    // Nothing new while both copies are in flight.
    expect(m.tick(nodes(4), 100).replicate).toHaveLength(0);
    // The targets report their replicas: the streams are free again.
    for (const t of first.replicate) for (const target of t.targets) bm.received(target.datanodeId, t.block);
    const third = m.tick(nodes(4), 200);
    expect(third.replicate).toHaveLength(2);
    expect(third.replicate.map((t) => t.block.blockId)).not.toContain(first.replicate[0]?.block.blockId);
  });

  it("schedules a copy again once the pending one times out", () => {
    const { m } = blockMap([{ id: 1, expected: 2, on: ["dn1"] }], { pendingTimeoutMs: 1_000 });
    expect(m.tick(nodes(3), 0).replicate).toHaveLength(1);
    expect(m.tick(nodes(3), 500).replicate).toHaveLength(0);
    const later = m.tick(nodes(3), 1_000);
    expect(later.timedOut).toBe(1);
    expect(later.replicate).toHaveLength(1);
  });

  it("deletes surplus replicas of an over-replicated block from the nodes with the least free space", () => {
    const { m } = blockMap([{ id: 1, expected: 2, on: ["dn1", "dn2", "dn3", "dn4"] }]);
    const live = nodes(4, { dn2: { remainingBytes: GiB }, dn4: { remainingBytes: 2 * GiB } });
    const work = m.tick(live, 0);
    expect(work.replicate).toEqual([]);
    expect(work.delete.map((d) => [d.datanodeId, d.reason]).sort()).toEqual([
      ["dn2", "over-replicated"],
      ["dn4", "over-replicated"],
    ]);
  });

  it("does not count corrupt replicas as live, copies from a good one, then deletes the corrupt one", () => {
    const { bm, m } = blockMap([{ id: 1, expected: 3, on: ["dn1", "dn2", "dn3"] }]);
    expect(bm.markCorrupt("dn2", 1, "checksum")).toBe(true);
    expect(classifyBlock(bm.get(1)!)).toEqual({ health: "under-replicated", live: 2, corrupt: 1 });
    const work = m.tick(nodes(5), 0);
    // The corrupt replica stays until the good ones are back to the replication.
    expect(work.delete).toEqual([]);
    expect(work.replicate).toHaveLength(1);
    expect(work.replicate[0]?.sourceId).not.toBe("dn2");
    const target = work.replicate[0]!.targets[0]!.datanodeId;
    expect(target).not.toBe("dn2");
    bm.received(target, { blockId: 1, genStamp: 1000, numBytes: 1024 });
    expect(m.tick(nodes(5), 1).delete).toEqual([
      { datanodeId: "dn2", block: { blockId: 1, genStamp: 1000, numBytes: 1024 }, reason: "corrupt" },
    ]);
  });

  it("keeps corrupt replicas while a good copy could still be made, and frees them when none fits", () => {
    const { bm, m } = blockMap([
      { id: 1, expected: 3, on: ["dn1", "dn2", "dn3"] },
      { id: 2, expected: 3, on: ["dn1", "dn2", "dn3"] },
    ]);
    // Block 1: two of three reported bad on five datanodes: copies first, nothing deleted.
    bm.markCorrupt("dn2", 1, "checksum");
    bm.markCorrupt("dn3", 1, "checksum");
    // Block 2: one reported bad where every datanode already holds a replica: the corrupt one must make room.
    bm.markCorrupt("dn3", 2, "checksum");
    const five = m.tick(nodes(5), 0);
    expect(five.delete.filter((d) => d.block.blockId === 1)).toEqual([]);
    expect(five.replicate.filter((r) => r.block?.blockId === 1)).toHaveLength(1);
    expect(five.delete.filter((d) => d.block.blockId === 2)).toEqual([]);
    const { bm: bm3, m: m3 } = blockMap([{ id: 2, expected: 3, on: ["dn1", "dn2", "dn3"] }]);
    bm3.markCorrupt("dn3", 2, "checksum");
    expect(m3.tick(nodes(3), 0).delete.map((d) => d.datanodeId)).toEqual(["dn3"]);
    // No copy goes to dn3 until it confirms the deletion (it would still hold the old replica).
    bm3.invalidate("dn3", 2);
    expect(m3.tick(nodes(3), 1).replicate).toEqual([]);
    bm3.removeReplica("dn3", 2);
    expect(m3.tick(nodes(3), 2).replicate.flatMap((r) => r.targets.map((t) => t.datanodeId))).toEqual(["dn3"]);
  });

  it("marks replicas with a stale gen stamp or a wrong length corrupt when reported", () => {
    const { bm } = blockMap([{ id: 1, expected: 3, on: ["dn1"] }]);
    bm.received("dn2", { blockId: 1, genStamp: 999, numBytes: 1024 });
    bm.received("dn3", { blockId: 1, genStamp: 1000, numBytes: 10 });
    expect(bm.liveReplicas(1).map((r) => r.datanodeId)).toEqual(["dn1"]);
    expect(classifyBlock(bm.get(1)!).corrupt).toBe(2);
  });

  it("reports blocks with no live replica as missing and schedules nothing for them", () => {
    const { bm, m } = blockMap([
      { id: 1, on: [] },
      { id: 2, on: ["dn1"] },
    ]);
    bm.markCorrupt("dn1", 2, "checksum");
    const work = m.tick(nodes(4), 0);
    expect(work.missing).toBe(2);
    expect(m.missingBlocks().map((b) => b.blockId)).toEqual([1, 2]);
    expect(m.priorityOf(2)).toBe(ReplicationPriority.Missing);
    expect(work.replicate).toEqual([]);
    // The only replica, though corrupt, is kept: it may be all that is left of the data.
    expect(work.delete).toEqual([]);
  });

  it("never copies from a datanode whose primary tenant is busy", () => {
    const { m } = blockMap([{ id: 1, on: ["dn1", "dn2"] }]);
    const work = m.tick(nodes(5, { dn1: { primaryBusy: true } }), 0);
    expect(work.replicate.map((t) => t.sourceId)).toEqual(["dn2"]);
  });

  it("forgets a datanode's replicas when it dies, making its blocks under-replicated", () => {
    const { bm, m } = blockMap([{ id: 1, on: ["dn1", "dn2", "dn3"] }]);
    expect(bm.removeDatanode("dn3")).toBe(1);
    const live = nodes(4).filter((d) => d.datanodeId !== "dn3");
    const work = m.tick(live, 0);
    expect(work.underReplicated).toEqual([0, 0, 1, 0, 0]);
    expect(work.replicate[0]?.targets.map((t) => t.datanodeId)).toEqual(["dn4"]);
  });

  it("ignores a replica it told a datanode to delete until a report shows it gone", () => {
    const { bm, m } = blockMap([{ id: 1, expected: 2, on: ["dn1", "dn2", "dn3"] }]);
    const work = m.tick(nodes(3), 0);
    const [deletion] = work.delete;
    expect(deletion?.reason).toBe("over-replicated");
    bm.invalidate(deletion!.datanodeId, 1);
    // A full report sent before the datanode acted still lists the replica: it does not come back.
    bm.fullReport(deletion!.datanodeId, [{ blockId: 1, genStamp: 1000, numBytes: 1024 }]);
    expect(bm.liveReplicas(1)).toHaveLength(2);
    expect(m.tick(nodes(3), 0).delete).toEqual([]);
    // Once a report shows it deleted, a later copy to that datanode counts again.
    bm.fullReport(deletion!.datanodeId, []);
    bm.received(deletion!.datanodeId, { blockId: 1, genStamp: 1000, numBytes: 1024 });
    expect(bm.liveReplicas(1)).toHaveLength(3);
  });
});

describe("the incremental replication monitor", () => {
  it("queues blocks by HDFS's levels and schedules them level by level, each in arrival order", () => {
    // Expected 10: 4 of 10 is under-replicated (2), 3 of 10 very (3 x 3 < 10: 1), 1 of 10 the highest (0).
    const on = (n: number, from: number): string[] => Array.from({ length: n }, (_, i) => `dn${from + i}`);
    const { m } = blockMap([
      { id: 1, expected: 10, on: on(4, 1) },
      { id: 2, expected: 10, on: on(3, 5) },
      { id: 3, expected: 10, on: on(1, 8) },
      { id: 4, expected: 10, on: on(3, 9) },
      { id: 5, expected: 10, on: on(1, 12) },
    ]);
    expect([1, 2, 3, 4, 5].map((id) => m.priorityOf(id))).toEqual([2, 1, 0, 1, 0]);
    const work = m.tick(nodes(40), 0);
    expect(work.underReplicated).toEqual([2, 2, 1, 0, 0]);
    expect(work.replicate.map((t) => [t.block.blockId, t.priority])).toEqual([
      [3, 0],
      [5, 0],
      [2, 1],
      [4, 1],
      [1, 2],
    ]);
  });

  it("looks at no more than maxWorkPerRun blocks a tick and leaves the rest for the next", () => {
    const { m } = blockMap(
      Array.from({ length: 5 }, (_, i) => ({ id: i + 1, expected: 2, on: [`dn${i + 1}`] })),
      { maxWorkPerRun: 2 },
    );
    const first = m.tick(nodes(8), 0);
    expect(first.replicate.map((t) => t.block.blockId)).toEqual([1, 2]);
    expect(first.deferred).toBe(3);
    expect(m.tick(nodes(8), 10).replicate.map((t) => t.block.blockId)).toEqual([3, 4]);
    expect(m.tick(nodes(8), 20).replicate.map((t) => t.block.blockId)).toEqual([5]);
    expect(m.waiting()).toBe(0);
  });

  it("leaves out a target receiving maxReceiveStreams copies and takes it again once one arrives", () => {
    // Two racks of one datanode plus dn3: copies of blocks on dn1 can only go to dn2 or dn3.
    const live = nodes(3);
    const { bm, m } = blockMap(
      [
        { id: 1, expected: 2, on: ["dn1"] },
        { id: 2, expected: 2, on: ["dn1"] },
        { id: 3, expected: 2, on: ["dn1"] },
      ],
      { maxReceiveStreams: 1 },
    );
    const first = m.tick(live, 0);
    const targets = first.replicate.map((t) => t.targets.map((d) => d.datanodeId)).flat();
    expect(targets.sort()).toEqual(["dn2", "dn3"]);
    expect(m.incoming("dn2")).toBe(1);
    expect(m.tick(live, 10).replicate).toEqual([]);
    const done = first.replicate[0]!;
    bm.received(done.targets[0]!.datanodeId, done.block);
    const next = m.tick(live, 20);
    expect(next.replicate.map((t) => [t.block.blockId, t.targets[0]?.datanodeId])).toEqual([
      [3, done.targets[0]!.datanodeId],
    ]);
  });

  it("takes a block out of the queues once its copies cover it, and forgets it once healthy", () => {
    const { bm, m } = blockMap([{ id: 1, expected: 3, on: ["dn1"] }]);
    expect(m.priorityOf(1)).toBe(ReplicationPriority.Highest);
    const work = m.tick(nodes(6), 0);
    expect(work.replicate[0]?.targets).toHaveLength(2);
    // Covered by the copy in flight: no longer waiting, and the next tick schedules nothing.
    expect(m.priorityOf(1)).toBeUndefined();
    expect(m.pendingTargets(1)).toHaveLength(2);
    expect(m.tick(nodes(6), 10).replicate).toEqual([]);
    for (const t of work.replicate[0]!.targets) bm.received(t.datanodeId, work.replicate[0]!.block);
    expect(m.pendingBlocks()).toBe(0);
    expect(m.inFlight(work.replicate[0]!.sourceId)).toBe(0);
    expect(m.priorityOf(1)).toBeUndefined();
    expect(m.tick(nodes(6), 20).underReplicated).toEqual([0, 0, 0, 0, 0]);
  });

  it("queues a healthy block again when a datanode holding a replica dies, at the level its survivors give", () => {
    const { bm, m } = blockMap([
      { id: 1, expected: 3, on: ["dn1", "dn2", "dn3"] },
      { id: 2, expected: 3, on: ["dn1", "dn2", "dn4"] },
    ]);
    expect(m.tick(nodes(6), 0).replicate).toEqual([]);
    bm.removeDatanode("dn3");
    expect([m.priorityOf(1), m.priorityOf(2)]).toEqual([ReplicationPriority.UnderReplicated, undefined]);
    bm.removeDatanode("dn2");
    expect([m.priorityOf(1), m.priorityOf(2)]).toEqual([
      ReplicationPriority.Highest,
      ReplicationPriority.UnderReplicated,
    ]);
    const live = nodes(6).filter((d) => d.datanodeId !== "dn2" && d.datanodeId !== "dn3");
    expect(m.tick(live, 10).replicate.map((t) => [t.block.blockId, t.sourceId, t.priority])).toEqual([
      [1, "dn1", 0],
      [2, expect.stringMatching(/^dn[14]$/), 2],
    ]);
  });

  it("drops the copies of a datanode that dies and schedules its blocks again without waiting for the timeout", () => {
    const { bm, m } = blockMap([{ id: 1, expected: 3, on: ["dn1", "dn2"] }], { pendingTimeoutMs: 60_000 });
    const first = m.tick(nodes(4, { dn2: { primaryBusy: true } }), 0);
    expect(first.replicate.map((t) => t.sourceId)).toEqual(["dn1"]);
    const target = first.replicate[0]!.targets[0]!.datanodeId;
    // The target dies: its copy is gone, the block waits again at once.
    bm.removeDatanode(target);
    expect(m.pendingBlocks()).toBe(0);
    expect(m.priorityOf(1)).toBe(ReplicationPriority.UnderReplicated);
    const live = nodes(4).filter((d) => d.datanodeId !== target);
    const again = m.tick(live, 10);
    expect(again.timedOut).toBe(0);
    expect(again.replicate).toHaveLength(1);
    expect(again.replicate[0]?.targets.map((t) => t.datanodeId)).not.toContain(target);
  });

  it("with parkBlocked, sets aside a block whose every source is busy until wake() or a replica change", () => {
    const { bm, m } = blockMap([{ id: 1, expected: 3, on: ["dn1"] }], { parkBlocked: true });
    const busy = nodes(5, { dn1: { primaryBusy: true } });
    expect(m.tick(busy, 0).replicate).toEqual([]);
    expect([m.waiting(), m.parkedBlocks()]).toEqual([0, 1]);
    expect(m.tick(busy, 10).underReplicated).toEqual([1, 0, 0, 0, 0]);
    m.wake();
    expect(m.waiting()).toBe(1);
    expect(m.tick(nodes(5), 20).replicate).toHaveLength(1);
    // Without parking (the daemon's default) the block is looked at on every tick.
    const daemon = blockMap([{ id: 2, expected: 3, on: ["dn1"] }]);
    expect(daemon.m.tick(busy, 0).replicate).toEqual([]);
    expect(daemon.m.waiting()).toBe(1);
    bm.removeBlocks([{ blockId: 1, genStamp: 1000, numBytes: 1024 }]);
    expect(m.pendingBlocks()).toBe(0);
  });
});
