import { describe, expect, it } from "vitest";
import { ManualClock } from "../../common/clock.js";
import { profileWatts, resolvePowerProfile } from "../../common/power-profiles.js";
import type { Resources } from "../../common/resource.js";
import {
  budgetAllows,
  chassisScore,
  domainPower,
  PowerAwarePolicy,
  predictedWattsWith,
  primaryOutlook,
  rankPowerNodes,
  serverScore,
} from "../../resourcemanager/policy/power-placement.js";
import type { PowerNode } from "../../resourcemanager/policy/power-placement.js";
import { Scheduler, StockSchedulerPolicy } from "../../resourcemanager/policy/scheduler.js";
import type { AppView, NodeView, SchedulerPolicy } from "../../resourcemanager/policy/scheduler.js";

const PROFILE = resolvePowerProfile("dell-r740-xeon-8180");

/** A 4-core node in `chassis` (a budgetless domain unless given) with a non-critical idle primary. */
function node(nodeId: string, chassis: string, o: Partial<PowerNode> = {}, chassisBudgetWatts = 0): PowerNode {
  return {
    nodeId,
    domains: [
      { path: chassis, budgetWatts: chassisBudgetWatts },
      { path: "row", budgetWatts: 0 },
    ],
    profile: PROFILE,
    capacityMilli: 4000,
    primaryP95Milli: 0,
    primaryNowMilli: 0,
    allocatedMilli: 0,
    primaryCritical: false,
    drawWatts: 0,
    limitWatts: 0,
    ...o,
  };
}

describe("power-aware scoring (seeds/000 Algorithm 1, adapted)", () => {
  it("prefers the node whose chassis has the most predicted headroom", () => {
    const nodes = [
      node("a1", "chassisA", { primaryP95Milli: 3600 }),
      node("a2", "chassisA", { primaryP95Milli: 3600 }),
      node("b1", "chassisB", { primaryP95Milli: 400 }),
      node("b2", "chassisB", { primaryP95Milli: 3600 }),
    ];
    const ranked = rankPowerNodes(nodes, 0.8);
    expect(ranked[0]!.nodeId).toBe("b1");
    const domains = domainPower(nodes);
    // kappa = 1 - predicted / (sum of peaks) of each chassis.
    const peak = profileWatts(PROFILE, 1);
    const predictedA = 2 * profileWatts(PROFILE, 0.9);
    expect(chassisScore(nodes[0]!, domains)).toBeCloseTo(1 - predictedA / (2 * peak), 10);
    expect(chassisScore(nodes[2]!, domains)).toBeGreaterThan(chassisScore(nodes[0]!, domains));
    // b1 and b2 share a chassis: the same kappa, so the server term decides between them.
    expect(chassisScore(nodes[2]!, domains)).toBe(chassisScore(nodes[3]!, domains));
  });

  it("measures headroom against a budget when the domain has one, and takes the tightest budgeted ancestor", () => {
    const tight = [node("a1", "chassisA", { primaryP95Milli: 2000 }, 200)];
    const loose = [node("a1", "chassisA", { primaryP95Milli: 2000 }, 3000)];
    expect(chassisScore(tight[0]!, domainPower(tight))).toBe(0);
    expect(chassisScore(loose[0]!, domainPower(loose))).toBeCloseTo(1 - profileWatts(PROFILE, 0.5) / 3000, 10);
    // A row with a budget close to its predicted draw makes every chassis under it a poor place.
    const underRow: PowerNode = {
      ...loose[0]!,
      domains: [
        { path: "chassisA", budgetWatts: 3000 },
        { path: "row", budgetWatts: 300 },
      ],
    };
    expect(chassisScore(underRow, domainPower([underRow]))).toBeCloseTo(1 - profileWatts(PROFILE, 0.5) / 300, 10);
  });

  it("balances critical primary load against cap-able secondary load with alpha = 0.8", () => {
    // Same chassis (same kappa): only the server term differs.
    const critical = node("crit", "c", { primaryP95Milli: 2000, primaryCritical: true });
    const batch = node("batch", "c", { primaryP95Milli: 2000, primaryCritical: false });
    const crowded = node("crowded", "c", { primaryP95Milli: 2000, primaryCritical: true, allocatedMilli: 2000 });
    expect(serverScore(critical)).toBe(0.75); // 1/2 (1 + 2000/4000)
    expect(serverScore(batch)).toBe(0.5);
    expect(serverScore(crowded)).toBe(0.5); // 1/2 (1 + (2000 - 2000)/4000)
    const ranked = rankPowerNodes([batch, crowded, critical], 0.8);
    expect(ranked.map((r) => r.nodeId)).toEqual(["crit", "batch", "crowded"]);
    const domains = domainPower([batch, crowded, critical]);
    const kappa = chassisScore(critical, domains);
    expect(ranked[0]!.score).toBeCloseTo(0.8 * kappa + 0.2 * 0.75, 12);
    // With alpha = 1 the server term does not matter: every node in the chassis scores the same.
    const flat = rankPowerNodes([batch, critical], 1);
    expect(flat[0]!.score).toBe(flat[1]!.score);
  });

  it("skips a node whose predicted draw with the container exceeds its power limit", () => {
    const n = node("n", "c", { primaryNowMilli: 2000, allocatedMilli: 1000, drawWatts: 0 });
    const withOne = predictedWattsWith(n, 1000);
    expect(withOne).toBeCloseTo(profileWatts(PROFILE, 1), 10);
    expect(budgetAllows({ ...n, limitWatts: withOne }, 1000)).toBe(true);
    expect(budgetAllows({ ...n, limitWatts: withOne - 1 }, 1000)).toBe(false);
    expect(budgetAllows({ ...n, limitWatts: 0 }, 1000)).toBe(true);
    // A meter above the model is the base (seeds/001: current draw plus the container's predicted power).
    const metered = { ...n, drawWatts: 400 };
    expect(predictedWattsWith(metered, 1000)).toBeCloseTo(
      400 + profileWatts(PROFILE, 1) - profileWatts(PROFILE, 0.75),
      10,
    );
  });

  it("predicts the primary from its tenant's history and treats an unknown server as critical", () => {
    expect(primaryOutlook(4000, 500, { peakPct: 60, declared: "", measured: "non-critical" })).toEqual({
      primaryP95Milli: 2400,
      primaryCritical: false,
    });
    expect(primaryOutlook(4000, 3000, { peakPct: 60, pattern: "periodic" })).toEqual({
      primaryP95Milli: 3000,
      primaryCritical: true,
    });
    expect(primaryOutlook(4000, 100, { pattern: "constant" }).primaryCritical).toBe(false);
    expect(primaryOutlook(4000, 100, { declared: "critical", measured: "non-critical" }).primaryCritical).toBe(true);
    expect(primaryOutlook(4000, 100, {})).toEqual({ primaryP95Milli: 100, primaryCritical: true });
  });
});

// ---------------------------------------------------------------------------------------------------------------------

/** A scheduler over `nodes` (4 cores each) whose policy is `policy(inner, source)`; power facts from `facts`. */
function cluster(
  facts: Record<string, Partial<PowerNode> & { chassis: string }>,
  makePolicy: (source: { nodes(): Iterable<NodeView>; power(v: NodeView): PowerNode | undefined }) => SchedulerPolicy,
  cores: number,
) {
  let seq = 0;
  let scheduler: Scheduler | undefined;
  const source = {
    nodes: () => scheduler!.nodeViews(),
    power: (v: NodeView): PowerNode | undefined => {
      const f = facts[v.nodeId];
      if (!f) return undefined;
      const { chassis, ...rest } = f;
      return node(v.nodeId, chassis, {
        ...rest,
        primaryNowMilli: v.primaryUsage.vcoresMilli,
        allocatedMilli: v.allocated.vcoresMilli,
      });
    },
  };
  scheduler = new Scheduler(
    makePolicy(source),
    { reserveFraction: 0, maxAllocationsPerHeartbeat: 0 },
    (appId) => `${appId}/c${++seq}`,
  );
  for (const id of Object.keys(facts)) scheduler.addNode(id, { vcoresMilli: 4000, memoryMb: 8192 });
  scheduler.addApp("app", 1);
  scheduler.setAsks("app", ASK(cores));
  return scheduler;
}

const ASK = (count: number, vcoresMilli = 1000): { priority: number; resource: Resources; count: number }[] => [
  { priority: 0, resource: { vcoresMilli, memoryMb: 100 }, count },
];

/** A scheduler over nodes with `facts` (and an application asking for `cores` one-core containers) whose policy is power-aware placement over stock YARN's, on `clock`. */
function powerAwareCluster(
  facts: Record<string, Partial<PowerNode> & { chassis: string }>,
  clock: ManualClock,
  cores: number,
  options: ConstructorParameters<typeof PowerAwarePolicy>[2] = {},
): ReturnType<typeof cluster> {
  return cluster(facts, (source) => new PowerAwarePolicy(new StockSchedulerPolicy(), source, options, clock), cores);
}

describe("the power-aware scheduler policy", () => {
  const facts = {
    hot: { chassis: "full", primaryP95Milli: 3000 },
    hot2: { chassis: "full", primaryP95Milli: 3000 },
    cool: { chassis: "empty", primaryP95Milli: 0 },
  };

  it("leaves the stock node choice untouched: any node with headroom takes the containers", () => {
    const s = cluster(facts, () => new StockSchedulerPolicy(), 2);
    expect(s.allocateOnNode("hot")).toHaveLength(2);
  });

  it("declines a node below the best score and lets the best one take the containers on its heartbeat", () => {
    const clock = new ManualClock(0);
    const s = powerAwareCluster(facts, clock, 2);
    expect(s.allocateOnNode("hot")).toHaveLength(0);
    expect(s.allocateOnNode("cool").map((a) => a.nodeId)).toEqual(["cool", "cool"]);
  });

  it("re-scores each container: once the best node fills up, the next one takes the rest", () => {
    const clock = new ManualClock(0);
    const even = {
      a: { chassis: "c1", primaryP95Milli: 0 },
      b: { chassis: "c2", primaryP95Milli: 0 },
    };
    const s = powerAwareCluster(even, clock, 4);
    // Both empty: a takes one, then its chassis is fuller than b's and it stops; b takes one to even them, and one
    // more (a tie is within the tolerance); a takes the last. A stock scheduler would have put all four on a.
    expect(s.allocateOnNode("a")).toHaveLength(1);
    expect(s.allocateOnNode("b")).toHaveLength(2);
    expect(s.allocateOnNode("a")).toHaveLength(1);
    expect(s.nodeView("a")?.containers).toBe(2);
    expect(s.nodeView("b")?.containers).toBe(2);
  });

  it("gives up waiting for the best node after the wait bound", () => {
    const clock = new ManualClock(0);
    const s = powerAwareCluster(facts, clock, 1, { waitMs: 3000 });
    expect(s.allocateOnNode("hot")).toHaveLength(0);
    clock.advance(2999);
    expect(s.allocateOnNode("hot")).toHaveLength(0);
    clock.advance(1);
    expect(s.allocateOnNode("hot")).toHaveLength(1);
  });

  it("never places on a node over its power limit, even after the wait", () => {
    const clock = new ManualClock(0);
    const limited = { only: { chassis: "c", limitWatts: profileWatts(PROFILE, 0.5) } };
    const s = powerAwareCluster(limited, clock, 4, { waitMs: 0 });
    // Two cores of four fit under the limit (the profile at 50 %); the third would exceed it.
    expect(s.allocateOnNode("only")).toHaveLength(2);
    clock.advance(60_000);
    expect(s.allocateOnNode("only")).toHaveLength(0);
  });

  it("chooses for the simulator as on heartbeats: the first offer within the tolerance of the best, or none", () => {
    const clock = new ManualClock(0);
    const none = { nodes: () => [], power: () => undefined };
    const policy = new PowerAwarePolicy(new StockSchedulerPolicy(), none, {}, clock);
    const hot = node("hot", "full", { primaryP95Milli: 3000 });
    const hot2 = node("hot2", "full", { primaryP95Milli: 3000 });
    const cool = node("cool", "empty");
    const twin = node("twin", "empty2");
    const all = [hot, hot2, cool, twin];
    const ask = { key: PowerAwarePolicy.askKey("app", 0), containerMilli: 1000 };
    // hot heartbeats first and is declined; cool and twin tie for the best, and cool's heartbeat comes first.
    expect(policy.choose(ask, [hot, cool, twin], domainPower(all))?.nodeId).toBe("cool");
    expect(policy.choose(ask, [twin, hot, cool], domainPower(all))?.nodeId).toBe("twin");
    // A node over its limit is never chosen: with no other offer, the ask waits.
    const limited = { ...cool, limitWatts: profileWatts(PROFILE, 0.1) };
    expect(policy.choose(ask, [limited], domainPower(all))).toBeUndefined();
    expect(policy.choose(ask, [hot2, limited], domainPower(all))?.nodeId).toBe("hot2");
  });

  it("keeps the inner policy's restrictions", () => {
    const clock = new ManualClock(0);
    const onlyHot: SchedulerPolicy = { name: "only-hot", allows: (_a: AppView, n: NodeView) => n.nodeId === "hot" };
    const s = cluster(facts, (source) => new PowerAwarePolicy(onlyHot, source, {}, clock), 1);
    // cool scores best but the inner policy forbids it, so hot is the best allowed node.
    expect(s.allocateOnNode("cool")).toHaveLength(0);
    expect(s.allocateOnNode("hot")).toHaveLength(1);
  });
});
