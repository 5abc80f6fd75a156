/** The stock (HDFS default) replica placement policy. */
import { describe, expect, it } from "vitest";
import { SeededRng } from "../../common/rng.js";
import { StockPlacementPolicy } from "../../namenode/policy/placement.js";
import type { DatanodeView, PlacementRequest } from "../../namenode/policy/placement.js";

const GiB = 1024 ** 3;
const BLOCK = 64 * 1024 * 1024;

function node(datanodeId: string, rack: string, extra: Partial<DatanodeView> = {}): DatanodeView {
  return { datanodeId, rack, remainingBytes: 10 * GiB, primaryBusy: false, ...extra };
}

/** Three racks of four nodes: r1-n1 .. r3-n4. */
function cluster(racks = 3, perRack = 4): DatanodeView[] {
  const out: DatanodeView[] = [];
  for (let r = 1; r <= racks; r++) for (let n = 1; n <= perRack; n++) out.push(node(`r${r}-n${n}`, `/r${r}`));
  return out;
}

function request(datanodes: DatanodeView[], extra: Partial<PlacementRequest> = {}): PlacementRequest {
  return {
    replication: 3,
    excluded: new Set(),
    datanodes,
    blockSizeBytes: BLOCK,
    rng: new SeededRng(7),
    ...extra,
  };
}

const policy = new StockPlacementPolicy();
const ids = (views: DatanodeView[]): string[] => views.map((v) => v.datanodeId);

describe("the stock placement policy", () => {
  it("puts the first replica on the writer's datanode", () => {
    for (let seed = 0; seed < 20; seed++) {
      const chosen = policy.chooseTargets(request(cluster(), { writerDatanodeId: "r2-n3", rng: new SeededRng(seed) }));
      expect(chosen[0]?.datanodeId).toBe("r2-n3");
    }
  });

  it("does not put the first replica on the writer's datanode when it has no room or is excluded", () => {
    const nodes = cluster().map((d) => (d.datanodeId === "r2-n3" ? { ...d, remainingBytes: BLOCK - 1 } : d));
    expect(ids(policy.chooseTargets(request(nodes, { writerDatanodeId: "r2-n3" })))).not.toContain("r2-n3");
    expect(
      ids(policy.chooseTargets(request(cluster(), { writerDatanodeId: "r2-n3", excluded: new Set(["r2-n3"]) }))),
    ).not.toContain("r2-n3");
  });

  it("spreads three replicas over two racks: the second off the first's rack, the third beside the second", () => {
    const nodes = cluster(2, 4);
    for (let seed = 0; seed < 30; seed++) {
      const chosen = policy.chooseTargets(request(nodes, { writerDatanodeId: "r1-n1", rng: new SeededRng(seed) }));
      expect(chosen).toHaveLength(3);
      const [a, b, c] = chosen as [DatanodeView, DatanodeView, DatanodeView];
      expect(a.rack).toBe("/r1");
      expect(b.rack).toBe("/r2");
      expect(c.rack).toBe("/r2");
      expect(c.datanodeId).not.toBe(b.datanodeId);
    }
  });

  it("chooses the same targets for the same seed and different ones across seeds", () => {
    const run = (seed: number): string[] =>
      ids(policy.chooseTargets(request(cluster(), { replication: 4, rng: new SeededRng(seed) })));
    expect(run(42)).toEqual(run(42));
    const distinct = new Set(Array.from({ length: 10 }, (_, s) => run(s).join(",")));
    expect(distinct.size).toBeGreaterThan(1);
  });

  it("puts a re-replicated copy on another rack when every existing replica shares one rack", () => {
    const nodes = cluster(2, 4);
    for (let seed = 0; seed < 20; seed++) {
      const chosen = policy.chooseTargets(
        request(nodes, {
          replication: 1,
          existing: ["r1-n1"],
          excluded: new Set(["r1-n1"]),
          rng: new SeededRng(seed),
        }),
      );
      expect(chosen.map((d) => d.rack)).toEqual(["/r2"]);
    }
  });
});
