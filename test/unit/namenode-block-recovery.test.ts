/**
 * Block recovery's decisions (namenode/block-recovery.ts) and the stale-datanode rules of the replication monitor,
 * as pure code: which prefix is kept, who is skipped, that a block is never dropped for lack of answers, and that a
 * copy never goes to a stale datanode.
 */
import { describe, expect, it } from "vitest";
import { SeededRng } from "../../common/rng.js";
import { replicatedBlockMap } from "../../namenode/block-manager.js";
import { BlockRecoveries } from "../../namenode/block-recovery.js";
import type { RecoveryAnswer } from "../../namenode/block-recovery.js";
import type { DatanodeView } from "../../namenode/policy/placement.js";
import { StockPlacementPolicy } from "../../namenode/policy/placement.js";

const BLOCK = { blockId: 42, genStamp: 1001, numBytes: 0 };
const PIPELINE = ["dn1", "dn2", "dn3"];
const TIMEOUT_MS = 1_000;

function answer(recoveryId: number, over: Partial<RecoveryAnswer> = {}): RecoveryAnswer {
  return {
    recoveryId,
    blockId: BLOCK.blockId,
    state: "REPLICA_BEING_WRITTEN",
    numBytes: 0,
    verifiedBytes: 0,
    committed: false,
    ...over,
  };
}

function started(): { r: BlockRecoveries; id: () => number } {
  const r = new BlockRecoveries({ answerTimeoutMs: TIMEOUT_MS });
  r.start("/f", 7, BLOCK, PIPELINE, 0);
  return { r, id: () => [...r.all()][0]!.recoveryId };
}

describe("block recovery", () => {
  it("keeps the shortest verified length among the replicas and finishes once they are finalized at it", () => {
    const { r, id } = started();
    const first = r.tick(0, () => true);
    expect(first.asks.map((a) => a.datanodeId)).toEqual(PIPELINE);
    r.onAnswer("dn1", answer(id(), { numBytes: 9000, verifiedBytes: 9000 }));
    r.onAnswer("dn2", answer(id(), { numBytes: 8800, verifiedBytes: 8192 }));
    r.onAnswer("dn3", answer(id(), { numBytes: 9000, verifiedBytes: 9000 }));
    const decided = r.tick(10, () => true);
    expect(decided.commits.map((c) => [c.datanodeId, c.length])).toEqual([
      ["dn1", 8192],
      ["dn2", 8192],
      ["dn3", 8192],
    ]);
    for (const dn of PIPELINE) r.onAnswer(dn, answer(id(), { numBytes: 8192, committed: true }));
    const done = r.tick(20, () => true);
    expect(done.finished).toHaveLength(1);
    expect(done.finished[0]!.outcome).toMatchObject({ kind: "commit", length: 8192, replicas: PIPELINE });
    expect(r.size).toBe(0);
  });

  it("skips a datanode that is down once the answer timeout passes", () => {
    const { r, id } = started();
    const asks = r.tick(0, (dn) => dn !== "dn2").asks.map((a) => a.datanodeId);
    expect(asks).toEqual(["dn1", "dn3"]);
    r.onAnswer("dn1", answer(id(), { numBytes: 4096, verifiedBytes: 4096 }));
    r.onAnswer("dn3", answer(id(), { numBytes: 5000, verifiedBytes: 5000 }));
    expect(r.tick(TIMEOUT_MS / 2, () => false).commits).toEqual([]);
    const decided = r.tick(TIMEOUT_MS, () => false);
    expect(decided.commits.map((c) => [c.datanodeId, c.length])).toEqual([
      ["dn1", 4096],
      ["dn3", 4096],
    ]);
  });

  it("never drops the block when no datanode answers: it asks again, and ignores answers to the old attempt", () => {
    const { r, id } = started();
    r.tick(0, () => false);
    const old = id();
    const retried = r.tick(TIMEOUT_MS, () => false);
    expect(retried.restarted).toHaveLength(1);
    expect(retried.finished).toEqual([]);
    expect(id()).not.toBe(old);
    r.onAnswer("dn1", answer(old, { numBytes: 100, verifiedBytes: 100 }));
    for (let t = 2; t < 10; t++) expect(r.tick(t * TIMEOUT_MS, () => false).finished).toEqual([]);
    // The datanodes come back: the next attempt asks them and keeps what they hold.
    const asks = r.tick(10 * TIMEOUT_MS, () => true).asks;
    expect(asks.map((a) => a.datanodeId)).toEqual(PIPELINE);
    for (const dn of PIPELINE) r.onAnswer(dn, answer(id(), { numBytes: 700, verifiedBytes: 700 }));
    expect(r.tick(10 * TIMEOUT_MS + 1, () => true).commits.map((c) => c.length)).toEqual([700, 700, 700]);
  });

  it("drops the block only when every datanode of the pipeline says it holds none of it", () => {
    const { r, id } = started();
    r.tick(0, () => true);
    for (const dn of PIPELINE) r.onAnswer(dn, answer(id(), { state: "REPLICA_MISSING" }));
    const done = r.tick(1, () => true);
    expect(done.finished[0]!.outcome.kind).toBe("drop");
  });
});

describe("the replication monitor and stale datanodes", () => {
  it("copies a block to a fresh datanode, never to a stale one, and reads from a stale source only as a last resort", () => {
    const { blocks, monitor } = replicatedBlockMap(new StockPlacementPolicy(), new SeededRng(3), {
      maxReplicationStreams: 4,
      pendingTimeoutMs: 60_000,
    });
    const view = (id: string, stale: boolean): DatanodeView => ({
      datanodeId: id,
      rack: "/r",
      remainingBytes: 1 << 30,
      primaryBusy: false,
      stale,
    });
    const block = { blockId: 1, genStamp: 5, numBytes: 1000 };
    blocks.addBlock(block, 10, 3, true);
    blocks.received("a", block);
    blocks.received("s1", block);
    // Needs one more replica: "s2" is stale (maybe dead), "f" is fresh.
    const work = monitor.tick([view("a", false), view("s1", true), view("s2", true), view("f", false)], 0);
    expect(work.replicate).toHaveLength(1);
    expect(work.replicate[0]!.targets.map((t) => t.datanodeId)).toEqual(["f"]);
    expect(work.replicate[0]!.sourceId).toBe("a");

    // Only stale candidates left as targets: nothing is scheduled, and the block waits for a fresh one.
    const other = { blockId: 2, genStamp: 5, numBytes: 1000 };
    blocks.addBlock(other, 11, 2, true);
    blocks.received("a", other);
    const none = monitor.tick([view("a", false), view("s1", true)], 1);
    expect(none.replicate.filter((w) => w.block.blockId === 2)).toEqual([]);
  });
});
