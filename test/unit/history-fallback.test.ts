/**
 * The graceful Algorithm 1 (issue 44): near saturation, and when no class has room, a job is placed as the stock policy
 * places it instead of waiting for a class; seeds/004's wait stays selectable.
 */
import { describe, expect, it } from "vitest";
import { ManualClock } from "../../common/clock.js";
import { Logger } from "../../common/log.js";
import { SeededRng } from "../../common/rng.js";
import { HistorySchedulerPolicy, resolveClassWeights } from "../../resourcemanager/policy/class-selection.js";
import type { ClassView } from "../../resourcemanager/policy/class-selection.js";
import { HistoryPlacement, occupiedShare } from "../../resourcemanager/policy/history-placement.js";
import type { HistoryPlacementOptions } from "../../resourcemanager/policy/history-placement.js";
import type { AppView, NodeView } from "../../resourcemanager/policy/scheduler.js";

/** A class of `n` 10-core servers (1 core reserve), `allocated` cores held on each, its primaries at `current` %. */
function cls(id: string, n: number, current: number, allocatedCores: number): ClassView {
  return {
    classId: id,
    pattern: "constant",
    average: current,
    peak: current,
    current,
    servers: Array.from({ length: n }, (_, i) => ({
      serverId: `${id}-${i}`,
      capacityMilli: 10_000,
      reserveMilli: 1_000,
      allocatedMilli: allocatedCores * 1000,
    })),
  };
}

function placementOver(views: ClassView[], options: Partial<HistoryPlacementOptions> = {}) {
  const policy = new HistorySchedulerPolicy();
  const clock = new ManualClock(0);
  const placement = new HistoryPlacement(
    policy,
    { weights: resolveClassWeights({}), classWaitMs: 60_000, ...options },
    { classViews: () => views },
    clock,
    new SeededRng(1),
    new Logger("test", "error", () => undefined),
  );
  return { policy, clock, placement };
}

const app = (appId: string): AppView => ({ appId, order: 1, maxConcurrency: 4 });
const node = (nodeId: string): NodeView => ({
  nodeId,
  rack: "/r",
  capacity: { vcoresMilli: 10_000, memoryMb: 1 },
  primaryUsage: { vcoresMilli: 0, memoryMb: 0 },
  allocated: { vcoresMilli: 0, memoryMb: 0 },
  headroom: { vcoresMilli: 1_000, memoryMb: 1 },
  containers: 0,
});

describe("the graceful Algorithm 1", () => {
  it("measures how full Harvest is against what the primaries leave", () => {
    // 10 cores at 50 % leave 5, less 1 reserve: 4 usable. Holding 2 of 4 is half.
    expect(occupiedShare([cls("a", 2, 50, 2)])).toBeCloseTo(0.5, 10);
    // A primary that grew into Harvest's containers: what is held counts as full, not as more.
    expect(occupiedShare([cls("a", 1, 90, 3)])).toBe(1);
    expect(occupiedShare([])).toBe(0);
  });

  it("confines a job to a class while the cluster has room, and places it as stock near saturation", () => {
    const roomy = placementOver([cls("a", 4, 20, 1), cls("b", 4, 20, 1)]);
    roomy.placement.register("app1", "long", 4);
    const d1 = roomy.placement.onAsk("app1", 1000);
    expect(d1?.kind).toBe("classes");
    const chosen = d1?.kind === "classes" ? d1.classIds[0]! : "";
    const other = chosen === "a" ? "b" : "a";
    expect(roomy.policy.allows(app("app1"), node(`${chosen}-0`), 0)).toBe(true);
    expect(roomy.policy.allows(app("app1"), node(`${other}-0`), 0)).toBe(false);

    // 10 cores at 20 % leave 7 usable; 6 held on each is 86 %, above the default 80 %. Either class still has room for
    // the job's 4 cores, but confining it there would only queue it.
    const busy = placementOver([cls("a", 4, 20, 6), cls("b", 4, 20, 6)]);
    busy.placement.register("app1", "long", 4);
    const d2 = busy.placement.onAsk("app1", 1000);
    expect(d2?.kind).toBe("any");
    expect(d2?.reason).toMatch(/near saturation/);
    for (const id of ["a-0", "b-3"]) expect(busy.policy.allows(app("app1"), node(id), 0)).toBe(true);

    // The guard off (1): Algorithm 1 as before.
    const off = placementOver([cls("a", 4, 20, 6), cls("b", 4, 20, 6)], { saturationShare: 1 });
    off.placement.register("app1", "long", 4);
    expect(off.placement.onAsk("app1", 1000)?.kind).toBe("classes");
  });

  it("places a job no class can hold as stock at once, or makes it wait when told to (seeds/004)", () => {
    // 2 servers x (10 - 1 reserve) = 18 cores; the job wants 30 at once.
    const views = [cls("a", 2, 0, 0)];
    const graceful = placementOver(views, { saturationShare: 1 });
    graceful.placement.register("wide", "medium", 30);
    expect(graceful.placement.onAsk("wide", 1000)?.kind).toBe("any");
    expect(graceful.policy.isOpenToAll("wide")).toBe(true);

    const paper = placementOver(views, { saturationShare: 1, classFallback: "wait" });
    paper.placement.register("wide", "medium", 30);
    expect(paper.placement.onAsk("wide", 1000)?.kind).toBe("wait");
    expect(paper.policy.allows(app("wide"), node("a-0"), 0)).toBe(false);
    paper.clock.set(60_000);
    expect(paper.placement.retryWaiting().map((d) => d.kind)).toEqual(["any"]);
  });
});
