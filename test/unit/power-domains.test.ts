import { describe, expect, it } from "vitest";
import { ManualClock } from "../../common/clock.js";
import { detailsOf, isHarvestError } from "../../common/errors.js";
import { profileWatts, resolvePowerProfile } from "../../common/power-profiles.js";
import type { PowerProfile } from "../../common/power-profiles.js";
import {
  normalizeDomainPath,
  PowerDomains,
  rackDomain,
  resolvePowerDomainOptions,
  validatePowerDomainConfig,
} from "../../resourcemanager/policy/power-domains.js";
import type { PowerDomainConfig, PowerReport } from "../../resourcemanager/policy/power-domains.js";
import { resolveResourceManagerOptions } from "../../resourcemanager/options.js";
import type { ResourceManagerOptions } from "../../resourcemanager/options.js";

const PROFILE: PowerProfile = resolvePowerProfile("dell-r740-xeon-8180");

function reading(watts: number, extra: Partial<PowerReport> = {}): PowerReport {
  return {
    watts,
    meter: "trace: test.csv",
    capped: false,
    cappingState: "uncapped",
    throttledContainers: 0,
    powerKills: 0,
    utilization: 0,
    ...extra,
  };
}

/** Domains over a manual clock with nodes n1..n<count> assigned as given. */
function setup(config: PowerDomainConfig, nodes: Record<string, string>, staleAfterMs = 3_000) {
  const clock = new ManualClock(1_000_000);
  const d = new PowerDomains(config, { staleAfterMs }, clock);
  for (const [nodeId, rack] of Object.entries(nodes)) d.addNode({ nodeId, rack, profile: PROFILE });
  return { clock, d };
}

const CHASSIS: PowerDomainConfig = {
  domains: [{ path: "row1/rack1/chassis1", budgetWatts: 1000 }],
  nodes: { n1: "row1/rack1/chassis1", n2: "row1/rack1/chassis1", n3: "row1/rack1/chassis1", n4: "row1/rack1/chassis1" },
};
const FOUR = { n1: "/r", n2: "/r", n3: "/r", n4: "/r" };

function domain(d: PowerDomains, path: string) {
  const v = d.snapshot().domains.find((x) => x.path === path);
  if (!v) throw new Error(`no domain ${path}`);
  return v;
}

describe("power domains", () => {
  it("sums each node's draw into its domain and every ancestor", () => {
    const { d } = setup(CHASSIS, FOUR);
    d.report("n1", reading(200));
    d.report("n2", reading(150));
    d.report("n3", reading(100));
    d.report("n4", reading(50));
    for (const path of ["row1", "row1/rack1", "row1/rack1/chassis1"]) expect(domain(d, path).drawWatts).toBe(500);
    expect(domain(d, "row1/rack1/chassis1/n2")).toMatchObject({ kind: "server", drawWatts: 150, nodes: 1 });
    // A later reading replaces the earlier one.
    d.report("n1", reading(300));
    expect(domain(d, "row1").drawWatts).toBe(600);
  });

  it("does not alert below 97 % of the budget and alerts at it, with each node's even share", () => {
    const { d } = setup(CHASSIS, FOUR);
    for (const n of ["n1", "n2", "n3"]) d.report(n, reading(240));
    d.report("n4", reading(249)); // 969 W: 96.9 %
    expect(domain(d, "row1/rack1/chassis1").alert).toBe(false);
    expect(d.nodeBudget("n1")).toBeUndefined();
    d.report("n4", reading(250)); // 970 W: 97 %
    expect(domain(d, "row1/rack1/chassis1")).toMatchObject({ alert: true, shareWatts: 250, budgetedNodes: 4 });
    for (const n of ["n1", "n2", "n3", "n4"])
      expect(d.nodeBudget(n)).toEqual({ budgetWatts: 250, domain: "row1/rack1/chassis1" });
    expect(d.drainEvents()).toEqual([expect.objectContaining({ domain: "row1/rack1/chassis1", alert: true })]);
  });

  it("keeps the alert between the uncap and the alert thresholds and lifts it under the uncap threshold", () => {
    const { d } = setup(CHASSIS, FOUR);
    for (const n of ["n1", "n2", "n3", "n4"]) d.report(n, reading(250)); // 1000 W
    expect(d.nodeBudget("n3")?.budgetWatts).toBe(250);
    // Capped to 93 %: under the alert threshold but over the uncap one, so the budgets stay.
    for (const n of ["n1", "n2", "n3", "n4"]) d.report(n, reading(232.5));
    expect(domain(d, "row1/rack1/chassis1").alert).toBe(true);
    expect(d.nodeBudget("n3")?.budgetWatts).toBe(250);
    // 90 % exactly is not under it.
    for (const n of ["n1", "n2", "n3", "n4"]) d.report(n, reading(225));
    expect(domain(d, "row1/rack1/chassis1").alert).toBe(true);
    d.report("n1", reading(224));
    expect(domain(d, "row1/rack1/chassis1").alert).toBe(false);
    for (const n of ["n1", "n2", "n3", "n4"]) expect(d.nodeBudget(n)).toBeUndefined();
    expect(d.drainEvents().map((e) => e.alert)).toEqual([true, false]);
    // And it does not come back until 97 % again.
    for (const n of ["n1", "n2", "n3", "n4"]) d.report(n, reading(240));
    expect(domain(d, "row1/rack1/chassis1").alert).toBe(false);
  });

  it("gives a node under several alerting domains the smallest share, naming the domain", () => {
    const config: PowerDomainConfig = {
      domains: [
        { path: "row1", budgetWatts: 1200 }, // 4 nodes: 300 W each
        { path: "row1/rack1/chassis1", budgetWatts: 500 }, // 2 nodes: 250 W each
      ],
      nodes: {
        n1: "row1/rack1/chassis1",
        n2: "row1/rack1/chassis1",
        n3: "row1/rack1/chassis2",
        n4: "row1/rack1/chassis2",
      },
    };
    const { d } = setup(config, FOUR);
    for (const n of ["n1", "n2", "n3", "n4"]) d.report(n, reading(295)); // row 1180 W (98 %), chassis1 590 W (118 %)
    expect(domain(d, "row1")).toMatchObject({ alert: true, shareWatts: 300 });
    expect(domain(d, "row1/rack1/chassis1")).toMatchObject({ alert: true, shareWatts: 250 });
    expect(d.nodeBudget("n1")).toEqual({ budgetWatts: 250, domain: "row1/rack1/chassis1" });
    expect(d.nodeBudget("n3")).toEqual({ budgetWatts: 300, domain: "row1" });
    // A server's own budget is a domain like any other: its share is the whole budget.
    const withServer = d.withBudget("row1/rack1/chassis2/n4", 200);
    d.setConfig(withServer);
    expect(d.nodeBudget("n4")).toEqual({ budgetWatts: 200, domain: "row1/rack1/chassis2/n4" });
  });

  it("lifts the node budgets when the budget is removed and alerts at once when one is cut below the draw", () => {
    const { d } = setup(CHASSIS, FOUR);
    for (const n of ["n1", "n2", "n3", "n4"]) d.report(n, reading(200)); // 800 W of 1000
    expect(d.nodeBudget("n1")).toBeUndefined();
    d.setConfig(d.withBudget("row1/rack1/chassis1", 800));
    expect(d.nodeBudget("n1")).toEqual({ budgetWatts: 200, domain: "row1/rack1/chassis1" });
    d.setConfig(d.withBudget("/row1/rack1/chassis1/", 0));
    expect(d.nodeBudget("n1")).toBeUndefined();
    expect(domain(d, "row1/rack1/chassis1")).toMatchObject({ budgetWatts: 0, configured: true, alert: false });
  });

  it("counts a silent node at its profile's peak and a lost one not at all", () => {
    const { d, clock } = setup(CHASSIS, FOUR, 3_000);
    for (const n of ["n1", "n2", "n3", "n4"]) d.report(n, reading(150));
    clock.advance(2_000);
    for (const n of ["n1", "n2", "n3"]) d.report(n, reading(150));
    d.tick();
    expect(domain(d, "row1").drawWatts).toBe(600);
    clock.advance(1_500); // n4 silent for 3.5 s
    for (const n of ["n1", "n2", "n3"]) d.report(n, reading(150));
    d.tick();
    const peak = profileWatts(PROFILE, 1);
    expect(domain(d, "row1")).toMatchObject({ drawWatts: 450 + peak, staleNodes: 1 });
    expect(d.snapshot().nodes.find((n) => n.nodeId === "n4")).toMatchObject({
      state: "stale",
      drawSource: "stale-peak",
      drawWatts: peak,
    });
    // 450 + 457 = 907 W: under 97 % of 1000. Lost, n4 leaves the sums and the share count.
    d.markLost("n4");
    expect(domain(d, "row1")).toMatchObject({ drawWatts: 450, nodes: 3 });
    d.setConfig(d.withBudget("row1/rack1/chassis1", 450));
    expect(d.nodeBudget("n1")?.budgetWatts).toBe(150);
    expect(d.nodeBudget("n4")).toBeUndefined();
    // Registering again brings it back.
    d.addNode({ nodeId: "n4", rack: "/r", profile: PROFILE });
    expect(domain(d, "row1").nodes).toBe(4);
  });

  it("estimates a node without a reading from its profile at its utilization", () => {
    const { d } = setup(CHASSIS, FOUR);
    d.report("n1", reading(0, { meter: "", utilization: 0.5 }));
    const v = d.snapshot().nodes.find((n) => n.nodeId === "n1");
    expect(v).toMatchObject({ drawSource: "estimated", drawWatts: profileWatts(PROFILE, 0.5), reportedWatts: 0 });
  });

  it("places a node by assignment, then by what it registered, then by its rack", () => {
    const clock = new ManualClock(0);
    const d = new PowerDomains({ domains: [], nodes: { a: "row9/chassis9" } }, {}, clock);
    d.addNode({ nodeId: "a", rack: "/rackA", domain: "row1/chassis1", profile: PROFILE });
    d.addNode({ nodeId: "b", rack: "/rackB", domain: "/row1/chassis1/", profile: PROFILE });
    d.addNode({ nodeId: "c", rack: "/default-rack", profile: PROFILE });
    d.addNode({ nodeId: "e", rack: "/dc 1/rack#2", profile: PROFILE });
    // Node ids are keys of the assignment map, never its prototype's.
    d.addNode({ nodeId: "constructor", rack: "/r9", profile: PROFILE });
    const nodes = Object.fromEntries(d.snapshot().nodes.map((n) => [n.nodeId, [n.domain, n.domainSource]]));
    expect(nodes).toEqual({
      a: ["row9/chassis9", "assigned"],
      b: ["row1/chassis1", "registered"],
      c: ["default-rack", "rack"],
      e: ["dc_1/rack_2", "rack"],
      constructor: ["r9", "rack"],
    });
    expect(domain(d, "row1/chassis1").nodeIds).toEqual(["b"]);
    expect(domain(d, "default-rack/c").kind).toBe("server");
    d.setConfig({ domains: [], nodes: JSON.parse('{"__proto__": "row1/odd", "constructor": "row1/odd"}') });
    expect(d.snapshot().nodes.find((n) => n.nodeId === "constructor")?.domain).toBe("row1/odd");
    expect(Object.keys(d.config.nodes).sort()).toEqual(["__proto__", "constructor"]);
  });

  it("lists parents before children and a subtree on its own", () => {
    const { d } = setup(
      { domains: [{ path: "b", budgetWatts: 0 }], nodes: { n1: "a/x", n2: "a/w", n3: "b/y", n4: "a" } },
      FOUR,
    );
    expect(d.snapshot().domains.map((x) => x.path)).toEqual([
      "a",
      "a/n4",
      "a/w",
      "a/w/n2",
      "a/x",
      "a/x/n1",
      "b",
      "b/y",
      "b/y/n3",
    ]);
    const sub = d.snapshot("a/x");
    expect(sub.domains.map((x) => x.path)).toEqual(["a/x", "a/x/n1"]);
    expect(sub.nodes.map((n) => n.nodeId)).toEqual(["n1"]);
  });

  it("rejects bad paths, negative budgets, duplicates and unknown domains with codes naming the field", () => {
    const code = (fn: () => unknown): string => {
      try {
        fn();
        return "OK";
      } catch (err) {
        return isHarvestError(err)
          ? `${err.code} ${detailsOf(err, "INVALID_ARGUMENT", "CONFIG_INVALID", "POWER_DOMAIN_BAD_PATH")?.field ?? detailsOf(err, "POWER_DOMAIN_NOT_FOUND")?.domain}`
          : String(err);
      }
    };
    expect(normalizeDomainPath("/row1/rack2/")).toBe("row1/rack2");
    expect(code(() => normalizeDomainPath("row1/../etc"))).toBe("POWER_DOMAIN_BAD_PATH domain");
    expect(code(() => normalizeDomainPath("row1//rack"))).toBe("POWER_DOMAIN_BAD_PATH domain");
    expect(code(() => normalizeDomainPath(""))).toBe("POWER_DOMAIN_BAD_PATH domain");
    expect(code(() => normalizeDomainPath("a/b/c/d/e/f/g/h/i"))).toBe("POWER_DOMAIN_BAD_PATH domain");
    expect(code(() => normalizeDomainPath("rack 1"))).toBe("POWER_DOMAIN_BAD_PATH domain");
    expect(code(() => validatePowerDomainConfig({ domains: [{ path: "a", budgetWatts: -1 }], nodes: {} }))).toBe(
      "INVALID_ARGUMENT domains[0].budgetWatts",
    );
    expect(
      code(() =>
        validatePowerDomainConfig({
          domains: [
            { path: "a", budgetWatts: 1 },
            { path: "/a", budgetWatts: 2 },
          ],
          nodes: {},
        }),
      ),
    ).toBe("INVALID_ARGUMENT domains[1].path");
    expect(code(() => validatePowerDomainConfig({ domains: [], nodes: { n1: "../x" } }))).toBe(
      "POWER_DOMAIN_BAD_PATH nodes.n1",
    );
    const { d } = setup(CHASSIS, FOUR);
    expect(code(() => d.withBudget("row2", 100))).toBe("POWER_DOMAIN_NOT_FOUND row2");
    expect(code(() => d.withBudget("row1", Number.NaN))).toBe("INVALID_ARGUMENT budgetWatts");
    expect(code(() => d.snapshot("nowhere"))).toBe("POWER_DOMAIN_NOT_FOUND nowhere");
    expect(code(() => resolvePowerDomainOptions({ alertFraction: 0.9, uncapFraction: 0.95 }))).toBe(
      "CONFIG_INVALID uncapFraction",
    );
    expect(rackDomain("/")).toBe("default-rack");
  });

  it("validates the resource manager's power options, naming the field", () => {
    const field = (o: Partial<ResourceManagerOptions>): string => {
      try {
        resolveResourceManagerOptions({ dataDir: "/tmp/unused", ...o });
        return "OK";
      } catch (err) {
        return isHarvestError(err, "CONFIG_INVALID") ? (err.details["field"] ?? "?") : String(err);
      }
    };
    const o = resolveResourceManagerOptions({ dataDir: "/tmp/unused" });
    expect(o).toMatchObject({
      powerDomains: [],
      powerNodeDomains: {},
      powerAlertFraction: 0.97,
      powerUncapFraction: 0.9,
      powerStaleHeartbeats: 3,
      powerPlacement: "stock",
      powerAlpha: 0.8,
      powerPlacementWaitMs: 3000,
    });
    expect(field({ powerDomains: [{ path: "row1/../x", budgetWatts: 1 }] })).toBe("powerDomains[0].path");
    expect(field({ powerDomains: [{ path: "row1", budgetWatts: -1 }] })).toBe("powerDomains[0].budgetWatts");
    expect(field({ powerNodeDomains: { n1: "a//b" } })).toBe("powerNodeDomains.n1");
    expect(field({ powerPlacement: "greedy" as never })).toBe("powerPlacement");
    expect(field({ powerUncapFraction: 0.98 })).toBe("powerUncapFraction");
    expect(field({ powerAlpha: 1.5 })).toBe("powerAlpha");
    expect(field({ powerStaleHeartbeats: 0 })).toBe("powerStaleHeartbeats");
  });
});
