/** The replication monitor's decisions over a block map (pure: blocks, live datanodes and time are passed in). */
import { describe, expect, it } from "vitest";
import { SeededRng } from "../../common/rng.js";
import { BlockManager } from "../../namenode/block-manager.js";
import { StockPlacementPolicy } from "../../namenode/placement.js";
import type { DatanodeView } from "../../namenode/placement.js";
import { classifyBlock, ReplicationMonitor } from "../../namenode/replication-monitor.js";

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

/** A block map with committed blocks of 1 KiB and replicas on the given datanodes. */
function blockMap(blocks: { id: number; expected?: number; on: string[] }[]): BlockManager {
  const bm = new BlockManager();
  for (const b of blocks) {
    const block = { blockId: b.id, genStamp: 1000, numBytes: 1024 };
    bm.addBlock(block, 10, b.expected ?? 3, true);
    for (const dn of b.on) bm.received(dn, block);
  }
  return bm;
}

function monitor(maxReplicationStreams = 4, pendingTimeoutMs = 30_000): ReplicationMonitor {
  return new ReplicationMonitor(new StockPlacementPolicy(), new SeededRng(3), {
    maxReplicationStreams,
    pendingTimeoutMs,
  });
}

describe("the replication monitor", () => {
  it("schedules a block with a single live replica before blocks that have two", () => {
    // dn1 is the only possible source and may run one copy at a time.
    const bm = blockMap([
      { id: 1, on: ["dn1", "dn2"] },
      { id: 2, on: ["dn1", "dn3"] },
      { id: 3, on: ["dn1"] },
    ]);
    const live = nodes(6, { dn2: { primaryBusy: true }, dn3: { primaryBusy: true } });
    const work = monitor(1).tick(bm.all(), live, 0);
    expect(work.underReplicated).toEqual([1, 2]);
    expect(work.replicate.map((t) => [t.block.blockId, t.sourceId, t.priority])).toEqual([[3, "dn1", 0]]);
    const targets = work.replicate[0]?.targets.map((t) => t.datanodeId) ?? [];
    expect(targets).toHaveLength(2);
    expect(targets).not.toContain("dn1");
  });

  it("limits the copies in flight per source datanode and schedules the rest on later ticks", () => {
    const bm = blockMap(Array.from({ length: 6 }, (_, i) => ({ id: i + 1, expected: 2, on: ["dn1"] })));
    const m = monitor(2);
    const first = m.tick(bm.all(), nodes(4), 0);
    expect(first.replicate).toHaveLength(2);
    expect(m.inFlight("dn1")).toBe(2);
    // Nothing new while both copies are in flight.
    expect(m.tick(bm.all(), nodes(4), 100).replicate).toHaveLength(0);
    // The targets report their replicas: the streams are free again.
    for (const t of first.replicate) for (const target of t.targets) bm.received(target.datanodeId, t.block);
    const third = m.tick(bm.all(), nodes(4), 200);
    expect(third.replicate).toHaveLength(2);
    expect(third.replicate.map((t) => t.block.blockId)).not.toContain(first.replicate[0]?.block.blockId);
  });

  it("schedules a copy again once the pending one times out", () => {
    const bm = blockMap([{ id: 1, expected: 2, on: ["dn1"] }]);
    const m = monitor(4, 1_000);
    expect(m.tick(bm.all(), nodes(3), 0).replicate).toHaveLength(1);
    expect(m.tick(bm.all(), nodes(3), 500).replicate).toHaveLength(0);
    const later = m.tick(bm.all(), nodes(3), 1_000);
    expect(later.timedOut).toBe(1);
    expect(later.replicate).toHaveLength(1);
  });

  it("deletes surplus replicas of an over-replicated block from the nodes with the least free space", () => {
    const bm = blockMap([{ id: 1, expected: 2, on: ["dn1", "dn2", "dn3", "dn4"] }]);
    const live = nodes(4, { dn2: { remainingBytes: GiB }, dn4: { remainingBytes: 2 * GiB } });
    const work = monitor().tick(bm.all(), live, 0);
    expect(work.replicate).toEqual([]);
    expect(work.delete.map((d) => [d.datanodeId, d.reason]).sort()).toEqual([
      ["dn2", "over-replicated"],
      ["dn4", "over-replicated"],
    ]);
  });

  it("does not count corrupt replicas as live, copies from a good one and deletes the corrupt one", () => {
    const bm = blockMap([{ id: 1, expected: 3, on: ["dn1", "dn2", "dn3"] }]);
    expect(bm.markCorrupt("dn2", 1, "checksum")).toBe(true);
    expect(classifyBlock(bm.get(1)!)).toEqual({ health: "under-replicated", live: 2, corrupt: 1 });
    const work = monitor().tick(bm.all(), nodes(5), 0);
    expect(work.delete).toEqual([
      { datanodeId: "dn2", block: { blockId: 1, genStamp: 1000, numBytes: 1024 }, reason: "corrupt" },
    ]);
    expect(work.replicate).toHaveLength(1);
    expect(work.replicate[0]?.sourceId).not.toBe("dn2");
    expect(work.replicate[0]?.targets.map((t) => t.datanodeId)).not.toContain("dn2");
  });

  it("marks replicas with a stale gen stamp or a wrong length corrupt when reported", () => {
    const bm = blockMap([{ id: 1, expected: 3, on: ["dn1"] }]);
    bm.received("dn2", { blockId: 1, genStamp: 999, numBytes: 1024 });
    bm.received("dn3", { blockId: 1, genStamp: 1000, numBytes: 10 });
    expect(bm.liveReplicas(1).map((r) => r.datanodeId)).toEqual(["dn1"]);
    expect(classifyBlock(bm.get(1)!).corrupt).toBe(2);
  });

  it("reports blocks with no live replica as missing and schedules nothing for them", () => {
    const bm = blockMap([
      { id: 1, on: [] },
      { id: 2, on: ["dn1"] },
    ]);
    bm.markCorrupt("dn1", 2, "checksum");
    const work = monitor().tick(bm.all(), nodes(4), 0);
    expect(work.missing.map((b) => b.blockId).sort()).toEqual([1, 2]);
    expect(work.replicate).toEqual([]);
    // The only replica, though corrupt, is kept: it may be all that is left of the data.
    expect(work.delete).toEqual([]);
  });

  it("never copies from a datanode whose primary tenant is busy", () => {
    const bm = blockMap([{ id: 1, on: ["dn1", "dn2"] }]);
    const work = monitor().tick(bm.all(), nodes(5, { dn1: { primaryBusy: true } }), 0);
    expect(work.replicate.map((t) => t.sourceId)).toEqual(["dn2"]);
  });

  it("forgets a datanode's replicas when it dies, making its blocks under-replicated", () => {
    const bm = blockMap([{ id: 1, on: ["dn1", "dn2", "dn3"] }]);
    expect(bm.removeDatanode("dn3")).toBe(1);
    const live = nodes(4).filter((d) => d.datanodeId !== "dn3");
    const work = monitor().tick(bm.all(), live, 0);
    expect(work.underReplicated).toEqual([0, 1]);
    expect(work.replicate[0]?.targets.map((t) => t.datanodeId)).toEqual(["dn4"]);
  });

  it("ignores a replica it told a datanode to delete until a report shows it gone", () => {
    const bm = blockMap([{ id: 1, expected: 2, on: ["dn1", "dn2", "dn3"] }]);
    const work = monitor().tick(bm.all(), nodes(3), 0);
    const [deletion] = work.delete;
    expect(deletion?.reason).toBe("over-replicated");
    bm.invalidate(deletion!.datanodeId, 1);
    // A full report sent before the datanode acted still lists the replica: it does not come back.
    bm.fullReport(deletion!.datanodeId, [{ blockId: 1, genStamp: 1000, numBytes: 1024 }]);
    expect(bm.liveReplicas(1)).toHaveLength(2);
    expect(monitor().tick(bm.all(), nodes(3), 0).delete).toEqual([]);
    // Once a report shows it deleted, a later copy to that datanode counts again.
    bm.fullReport(deletion!.datanodeId, []);
    bm.received(deletion!.datanodeId, { blockId: 1, genStamp: 1000, numBytes: 1024 });
    expect(bm.liveReplicas(1)).toHaveLength(3);
  });
});
