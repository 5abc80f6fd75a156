import { describe, expect, it } from "vitest";
import { containersAtRisk } from "../../nodemanager/policy/preemption-notice.js";
import { chooseVictims } from "../../nodemanager/policy/yield-controller.js";
import type { YieldInput } from "../../nodemanager/policy/yield-controller.js";
import { NoticedServers } from "../../jobmanager/policy/noticed-servers.js";

/** A 10-core server with a 1-core reserve holding four 2-core tasks (8 cores), started 1, 2, 3 and 4 s in. */
function server(primaryMilli: number, order: YieldInput["order"] = "youngest"): YieldInput {
  return {
    capacityMilli: 10_000,
    primaryMilli,
    reserveMilli: 1_000,
    containers: [1, 2, 3, 4].map((i) => ({
      containerId: `t${i}`,
      vcoresMilli: 2_000,
      startedMs: i * 1_000,
      isAm: false,
    })),
    order,
    nowMs: 10_000,
  };
}

describe("the preemption notice", () => {
  it("names nothing while the primary is further than the margin from Harvest's work", () => {
    // Allowance 10 - 0.5 - 1 = 8.5 cores >= 8 held; 0.5 more still fits.
    expect(containersAtRisk(server(500), 500)).toEqual([]);
  });

  it("names the containers the next kill would take once the primary is within the margin, and kills none", () => {
    // 1.5 cores of primary: 7.5 allowed, 8 held: one kill now (6 left). One core more would still leave room for 6;
    // two more would take a second one.
    const now = server(1_500);
    expect(chooseVictims(now).victims).toEqual(["t4"]);
    expect(containersAtRisk(now, 1_000)).toEqual([]);
    expect(containersAtRisk(now, 2_000)).toEqual(["t3"]);
    // Just below the kill level: the youngest is at risk, nothing is killed.
    const below = server(900);
    expect(chooseVictims(below).victims).toEqual([]);
    expect(containersAtRisk(below, 1_000)).toEqual(["t4"]);
  });

  it("follows the victim order the yield controller uses", () => {
    // Under "work-lost" the one that has run least goes first: the youngest here too, but its age is counted from now.
    const atRisk = containersAtRisk(server(900, "work-lost"), 3_000);
    expect(atRisk.length).toBeGreaterThanOrEqual(2);
    expect(atRisk[0]).toBe("t4");
  });

  it("sends nothing with no margin (the stock baseline)", () => {
    expect(containersAtRisk(server(900), 0)).toEqual([]);
    expect(containersAtRisk(server(900), Number.NaN)).toEqual([]);
  });
});

describe("the servers a job manager avoids after notices", () => {
  it("avoids a server for the hold after its last notice, then forgets it", () => {
    const noticed = new NoticedServers(60_000);
    noticed.note("b", 0);
    noticed.note("a", 10_000);
    expect(noticed.avoided(30_000)).toEqual(["a", "b"]);
    noticed.note("b", 50_000);
    expect(noticed.avoided(65_000)).toEqual(["a", "b"]);
    expect(noticed.has("a", 70_000)).toBe(false);
    expect(noticed.avoided(70_000)).toEqual(["b"]);
    expect(noticed.avoided(110_000)).toEqual([]);
  });

  it("avoids nothing with no hold, and ignores an empty server id", () => {
    const off = new NoticedServers(0);
    off.note("a", 0);
    expect(off.avoided(1)).toEqual([]);
    const on = new NoticedServers(1_000);
    on.note("", 0);
    expect(on.avoided(1)).toEqual([]);
  });
});
