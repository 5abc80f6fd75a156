import { describe, expect, it } from "vitest";
import { detailsOf, HarvestError } from "../../common/errors.js";
import type { Resources } from "../../common/resource.js";
import { SeededRng } from "../../common/rng.js";
import {
  classHeadroomMilli,
  DEFAULT_CLASS_WEIGHTS,
  HistorySchedulerPolicy,
  jobTypeOf,
  jobTypeThresholds,
  requirementMilli,
  resolveClassWeights,
  selectClasses,
  utilizationFor,
} from "../../resourcemanager/policy/class-selection.js";
import type { ClassView, ClassWeights, JobType } from "../../resourcemanager/policy/class-selection.js";
import type { UtilizationPattern } from "../../resourcemanager/policy/classifier.js";
import type { AppView, NodeView } from "../../resourcemanager/policy/scheduler.js";
import { AM_PRIORITY, Scheduler } from "../../resourcemanager/policy/scheduler.js";

/** A class of one server with no reserve and nothing allocated: its headroom is capacity x (1 - u/100). */
function oneServerClass(
  classId: string,
  pattern: UtilizationPattern,
  capacityMilli: number,
  util: { average?: number; peak?: number; current?: number } = {},
): ClassView {
  return {
    classId,
    pattern,
    average: util.average ?? 0,
    peak: util.peak ?? 0,
    current: util.current ?? 0,
    servers: [{ serverId: `${classId}-s1`, capacityMilli, reserveMilli: 0, allocatedMilli: 0 }],
  };
}

/** Pick counts per class id over `n` selections from one seeded stream. */
function pickCounts(
  n: number,
  seed: number,
  input: Omit<Parameters<typeof selectClasses>[0], "rng">,
): Record<string, number> {
  const rng = new SeededRng(seed);
  const counts: Record<string, number> = {};
  for (let i = 0; i < n; i++) {
    const sel = selectClasses({ ...input, rng });
    for (const id of sel.classIds) counts[id] = (counts[id] ?? 0) + 1;
  }
  return counts;
}

describe("job type from history", () => {
  // 301 past jobs lasting 0 s, 1 s, ..., 300 s. Rank of the 33.3th percentile: 0.333 x 300 = 99.9, so 99.9 s;
  // of the 66.7th: 0.667 x 300 = 200.1, so 200.1 s.
  const history = Array.from({ length: 301 }, (_, i) => i * 1000);

  it("puts the thresholds at the 33.3th and 66.7th percentiles of past durations", () => {
    const t = jobTypeThresholds(history);
    expect(t?.shortMaxMs).toBeCloseTo(99_900, 6);
    expect(t?.longMinMs).toBeCloseTo(200_100, 6);
  });

  it("takes configurable percentiles, interpolating between ranks", () => {
    expect(jobTypeThresholds([50, 10, 40, 20, 30], { shortPercentile: 25, longPercentile: 75 })).toEqual({
      shortMaxMs: 20,
      longMinMs: 40,
    });
    expect(jobTypeThresholds([0, 100], { shortPercentile: 10, longPercentile: 90, minHistory: 2 })).toEqual({
      shortMaxMs: 10,
      longMinMs: 90,
    });
  });

  it("calls a job never seen before medium", () => {
    expect(jobTypeOf(undefined, history)).toBe("medium");
  });

  it("calls a job short, medium or long by where its last run falls", () => {
    expect(jobTypeOf(50_000, history)).toBe("short");
    expect(jobTypeOf(150_000, history)).toBe("medium");
    expect(jobTypeOf(250_000, history)).toBe("long");
  });

  it("counts a last run exactly on a threshold as medium", () => {
    const t = { shortPercentile: 25, longPercentile: 75 };
    expect(jobTypeOf(20, [10, 20, 30, 40, 50], t)).toBe("medium");
    expect(jobTypeOf(40, [10, 20, 30, 40, 50], t)).toBe("medium");
    expect(jobTypeOf(19, [10, 20, 30, 40, 50], t)).toBe("short");
    expect(jobTypeOf(41, [10, 20, 30, 40, 50], t)).toBe("long");
  });

  it("calls every job medium while history is shorter than minHistory", () => {
    expect(jobTypeThresholds([1000, 2000])).toBeUndefined();
    expect(jobTypeOf(1, [1000, 2000])).toBe("medium");
    expect(jobTypeOf(10_000_000, [1000, 2000])).toBe("medium");
    expect(jobTypeOf(1, [1000, 2000, 3000, 4000], { minHistory: 5 })).toBe("medium");
  });

  it("ignores unusable past durations", () => {
    expect(jobTypeThresholds([1000, Number.NaN, -5, 2000])).toBeUndefined();
  });

  it("rejects a bad option, naming the field", () => {
    const err = (() => {
      try {
        jobTypeThresholds(history, { shortPercentile: 80, longPercentile: 20 });
      } catch (e) {
        return e;
      }
      return undefined;
    })();
    expect(err).toBeInstanceOf(HarvestError);
    expect(err).toMatchObject({ code: "CONFIG_INVALID", details: { field: "longPercentile" } });
    expect(() => jobTypeOf(1, history, { minHistory: 0 })).toThrow(HarvestError);
  });
});

describe("class headroom", () => {
  // Two servers: s1 8 cores with 0.8 reserved and 1.0 allocated; s2 4 cores with 0.4 reserved.
  // average 30 %, peak 70 %, current 20 %.
  const cls: ClassView = {
    classId: "k",
    pattern: "periodic",
    average: 30,
    peak: 70,
    current: 20,
    servers: [
      { serverId: "s1", capacityMilli: 8000, reserveMilli: 800, allocatedMilli: 1000 },
      { serverId: "s2", capacityMilli: 4000, reserveMilli: 400, allocatedMilli: 0 },
    ],
  };

  it("plans a short job around the current utilization", () => {
    expect(utilizationFor("short", cls)).toBe(20);
    // s1: 8000 x 0.8 - 800 - 1000 = 4600; s2: 4000 x 0.8 - 400 = 2800.
    expect(classHeadroomMilli(cls, "short")).toBe(7400);
  });

  it("plans a medium job around the larger of average and current", () => {
    expect(utilizationFor("medium", cls)).toBe(30);
    // s1: 8000 x 0.7 - 1800 = 3800; s2: 4000 x 0.7 - 400 = 2400.
    expect(classHeadroomMilli(cls, "medium")).toBe(6200);
    // Current above average: current wins. s1: 8000 x 0.5 - 1800 = 2200; s2: 4000 x 0.5 - 400 = 1600.
    expect(classHeadroomMilli({ ...cls, current: 50 }, "medium")).toBe(3800);
  });

  it("plans a long job around the larger of peak and current", () => {
    expect(utilizationFor("long", cls)).toBe(70);
    // s1: 8000 x 0.3 - 1800 = 600; s2: 4000 x 0.3 - 400 = 800.
    expect(classHeadroomMilli(cls, "long")).toBe(1400);
  });

  it("floors each server at zero instead of letting an overcommitted server cancel another's room", () => {
    // u = 80: s1: 8000 x 0.2 - 1800 = -200 -> 0; s2: 4000 x 0.2 - 400 = 400.
    expect(classHeadroomMilli({ ...cls, peak: 80 }, "long")).toBe(400);
  });

  it("has no headroom without live servers", () => {
    expect(classHeadroomMilli({ ...cls, servers: [] }, "short")).toBe(0);
  });

  it("sizes a job's requirement as max concurrency times task size", () => {
    expect(requirementMilli(469, 1000)).toBe(469_000);
    expect(requirementMilli(0, 1000)).toBe(0);
  });
});

describe("class headroom by the Cantelli bound (classHeadroom: cantelli)", () => {
  const cls: ClassView = {
    classId: "periodic-0",
    pattern: "periodic",
    average: 40,
    peak: 60,
    current: 30,
    stddev: 10,
    servers: [{ serverId: "s1", capacityMilli: 4000, reserveMilli: 400, allocatedMilli: 0 }],
  };

  it("keeps the primary's overrun under the threshold: C - mu - sigma x sqrt((1 - theta) / theta), within what is free now", () => {
    // mu = 1600, sigma = 400, C = 4000 - 400 = 3600; theta 0.1: 3600 - 1600 - 400 x 3 = 800.
    expect(classHeadroomMilli(cls, "medium", 0.1)).toBe(800);
    expect(classHeadroomMilli(cls, "long", 0.1)).toBe(800);
    // theta 0.5: 3600 - 1600 - 400 x 1 = 1600; free now is 4000 x 0.7 - 400 = 2400.
    expect(classHeadroomMilli(cls, "medium", 0.5)).toBe(1600);
    // A calm class: sigma 0 gives 3600 - 1600 = 2000, but the primary leaves only 4000 x 0.3 - 400 = 800 now.
    expect(classHeadroomMilli({ ...cls, stddev: 0, current: 70 }, "long", 0.1)).toBe(800);
    // Allocated work comes off.
    const busy = { ...cls, servers: [{ ...cls.servers[0]!, allocatedMilli: 500 }] };
    expect(classHeadroomMilli(busy, "medium", 0.1)).toBe(300);
  });

  it("leaves short jobs, and classes with no deviation known, on the utilization rule", () => {
    // Short: current 30 % -> 4000 x 0.7 - 400 = 2400. Medium without stddev: max(40, 30) -> 4000 x 0.6 - 400 = 2000.
    expect(classHeadroomMilli(cls, "short", 0.1)).toBe(2400);
    const { stddev: _unknown, ...noDeviation } = cls;
    expect(classHeadroomMilli(noDeviation, "medium", 0.1)).toBe(2000);
    expect(classHeadroomMilli(cls, "medium")).toBe(2000);
  });
});

describe("class weights", () => {
  const rank = (w: ClassWeights, type: JobType): UtilizationPattern[] =>
    (["periodic", "constant", "unpredictable"] as const).slice().sort((a, b) => w[type][b] - w[type][a]);

  it("rank the patterns per job type as seeds/004 section 4.1 does", () => {
    expect(rank(DEFAULT_CLASS_WEIGHTS, "long")).toEqual(["constant", "periodic", "unpredictable"]);
    expect(rank(DEFAULT_CLASS_WEIGHTS, "medium")).toEqual(["periodic", "constant", "unpredictable"]);
    expect(rank(DEFAULT_CLASS_WEIGHTS, "short")).toEqual(["unpredictable", "periodic", "constant"]);
  });

  it("fill what a config leaves out from the defaults", () => {
    const w = resolveClassWeights({ long: { unpredictable: 0 } });
    expect(w.long).toEqual({ constant: 3, periodic: 2, unpredictable: 0 });
    expect(w.short).toEqual(DEFAULT_CLASS_WEIGHTS.short);
    expect(DEFAULT_CLASS_WEIGHTS.long.unpredictable).toBe(1);
  });

  it("reject a negative, infinite or unknown weight, naming the field", () => {
    const fieldOf = (input: unknown): string | undefined => {
      try {
        resolveClassWeights(input as Parameters<typeof resolveClassWeights>[0]);
      } catch (e) {
        expect(e).toBeInstanceOf(HarvestError);
        expect((e as HarvestError).code).toBe("CONFIG_INVALID");
        return detailsOf(e as HarvestError, "INVALID_ARGUMENT", "CONFIG_INVALID")?.field;
      }
      return undefined;
    };
    expect(fieldOf({ long: { constant: -1 } })).toBe("long.constant");
    expect(fieldOf({ medium: { periodic: Number.POSITIVE_INFINITY } })).toBe("medium.periodic");
    expect(fieldOf({ short: { bursty: 1 } })).toBe("short.bursty");
    expect(fieldOf({ huge: {} })).toBe("huge");
  });

  it("steer each job type to its top-ranked pattern when the headroom is equal", () => {
    // Three classes with 5 cores free each: the weights alone decide, 3 : 2 : 1.
    const classes = [
      oneServerClass("p", "periodic", 5000),
      oneServerClass("c", "constant", 5000),
      oneServerClass("u", "unpredictable", 5000),
    ];
    const top: Record<JobType, string> = { long: "c", medium: "p", short: "u" };
    for (const jobType of ["short", "medium", "long"] as const) {
      const counts = pickCounts(6000, 7, {
        jobType,
        requirementMilli: 1000,
        classes,
        weights: DEFAULT_CLASS_WEIGHTS,
      });
      const ordered = Object.entries(counts)
        .sort((a, b) => b[1] - a[1])
        .map(([id]) => id);
      expect(ordered[0]).toBe(top[jobType]);
      expect((counts[top[jobType]] ?? 0) / 6000).toBeCloseTo(3 / 6, 1);
    }
  });
});

describe("selectClasses", () => {
  // A long job (u = peak) needing 1 core. Headroom: a 10 x 0.8 = 2000 (weighted 3 x 2000 = 6000),
  // b 10 x 0.7 = 3000 (2 x 3000 = 6000), d 10 x 0.8 = 8000 (1 x 8000 = 8000), e 10 x 0.05 = 500 (too small).
  // Shares among the fitting classes: 6000 / 20000 = 0.3, 0.3, 8000 / 20000 = 0.4.
  const classes = [
    oneServerClass("a", "constant", 10_000, { peak: 80 }),
    oneServerClass("b", "periodic", 10_000, { peak: 70 }),
    oneServerClass("d", "unpredictable", 10_000, { peak: 20 }),
    oneServerClass("e", "constant", 10_000, { peak: 95 }),
  ];

  it("picks one fitting class with probability proportional to weight x headroom", () => {
    const n = 20_000;
    const counts = pickCounts(n, 42, {
      jobType: "long",
      requirementMilli: 1000,
      classes,
      weights: DEFAULT_CLASS_WEIGHTS,
    });
    expect((counts.a ?? 0) / n).toBeGreaterThan(0.3 - 0.015);
    expect((counts.a ?? 0) / n).toBeLessThan(0.3 + 0.015);
    expect((counts.b ?? 0) / n).toBeGreaterThan(0.3 - 0.015);
    expect((counts.b ?? 0) / n).toBeLessThan(0.3 + 0.015);
    expect((counts.d ?? 0) / n).toBeGreaterThan(0.4 - 0.015);
    expect((counts.d ?? 0) / n).toBeLessThan(0.4 + 0.015);
    expect(counts.e).toBeUndefined();
  });

  it("reports the single class, the headroom of every class and a readable reason", () => {
    const sel = selectClasses({
      jobType: "long",
      requirementMilli: 1000,
      classes,
      weights: DEFAULT_CLASS_WEIGHTS,
      rng: new SeededRng(1),
    });
    expect(sel.kind).toBe("single");
    expect(sel.classIds).toHaveLength(1);
    expect(sel.requirementMilli).toBe(1000);
    expect(sel.headroomMilli).toEqual({ a: 2000, b: 3000, d: 8000, e: 500 });
    expect(sel.reason).toMatch(/^one of 3 classes with headroom for 1\.0 vcores: [abd] \(/);
  });

  it("is deterministic for a seed", () => {
    const run = (seed: number): string[] => {
      const rng = new SeededRng(seed);
      return Array.from(
        { length: 50 },
        () =>
          selectClasses({ jobType: "long", requirementMilli: 1000, classes, weights: DEFAULT_CLASS_WEIGHTS, rng })
            .classIds[0] ?? "",
      );
    };
    expect(run(9)).toEqual(run(9));
    expect(new Set(run(9)).size).toBeGreaterThan(1);
  });

  it("never picks a weight-0 class while a fitting class has weight", () => {
    const weights = resolveClassWeights({ long: { constant: 0 } });
    const counts = pickCounts(2000, 3, { jobType: "long", requirementMilli: 1000, classes, weights });
    expect(counts.a).toBeUndefined();
    expect((counts.b ?? 0) + (counts.d ?? 0)).toBe(2000);
  });

  it("falls back to headroom alone when every fitting class has weight 0, and says so", () => {
    // Without d, only a (2000) and b (3000) fit 1.5 cores; both have weight 0, so shares are 2/5 and 3/5.
    const withoutD = classes.filter((c) => c.classId !== "d");
    const weights = resolveClassWeights({ long: { constant: 0, periodic: 0 } });
    const n = 10_000;
    const counts = pickCounts(n, 5, { jobType: "long", requirementMilli: 1500, classes: withoutD, weights });
    expect((counts.a ?? 0) / n).toBeCloseTo(0.4, 1);
    expect((counts.b ?? 0) / n).toBeCloseTo(0.6, 1);
    expect(counts.e).toBeUndefined();
    const sel = selectClasses({
      jobType: "long",
      requirementMilli: 1500,
      classes: withoutD,
      weights,
      rng: new SeededRng(1),
    });
    expect(sel.reason).toContain("weight 0");
  });

  it("treats a requirement of zero as any class with some headroom", () => {
    const sel = selectClasses({
      jobType: "short",
      requirementMilli: 0,
      classes: [oneServerClass("full", "periodic", 4000, { current: 100 }), oneServerClass("room", "periodic", 4000)],
      weights: DEFAULT_CLASS_WEIGHTS,
      rng: new SeededRng(1),
    });
    expect(sel).toMatchObject({ kind: "single", classIds: ["room"], requirementMilli: 1 });
  });

  describe("when no single class is big enough", () => {
    // Short job (u = current = 0): headroom equals capacity. Needs 10 cores; x has 6, y 5, z 3. Only x + y reach 10
    // among pairs; x + z = 9 and y + z = 8 fall short, so any valid choice contains both x and y.
    const small = [
      oneServerClass("x", "periodic", 6000),
      oneServerClass("y", "constant", 5000),
      oneServerClass("z", "unpredictable", 3000),
    ];

    it("picks several classes that together have the headroom, each needed to get there", () => {
      const rng = new SeededRng(11);
      const seen = new Set<string>();
      for (let i = 0; i < 500; i++) {
        const sel = selectClasses({
          jobType: "short",
          requirementMilli: 10_000,
          classes: small,
          weights: DEFAULT_CLASS_WEIGHTS,
          rng,
        });
        expect(sel.kind).toBe("multi");
        expect(new Set(sel.classIds).size).toBe(sel.classIds.length);
        const room = sel.classIds.map((id) => sel.headroomMilli[id] ?? 0);
        const sum = room.reduce((a, b) => a + b, 0);
        expect(sum).toBeGreaterThanOrEqual(10_000);
        // The draw stopped as soon as it had enough: without the last class it was short.
        expect(sum - (room[room.length - 1] ?? 0)).toBeLessThan(10_000);
        expect(sel.classIds).toEqual(expect.arrayContaining(["x", "y"]));
        seen.add(sel.classIds.join("+"));
      }
      // The draw order varies: it is a weighted draw, not a fixed greedy order.
      expect(seen.size).toBeGreaterThan(1);
    });

    it("names the chosen classes in the reason", () => {
      const sel = selectClasses({
        jobType: "short",
        requirementMilli: 11_000,
        classes: small,
        weights: DEFAULT_CLASS_WEIGHTS,
        rng: new SeededRng(2),
      });
      expect(sel.kind).toBe("multi");
      expect(sel.reason).toMatch(/^no single class has headroom for 11\.0 vcores; \d together: /);
      expect(sel.reason).toContain("x (periodic, 6.0 free)");
    });

    it("still uses weight-0 classes when the weighted ones are not enough", () => {
      const weights = resolveClassWeights({ short: { constant: 0 } });
      const sel = selectClasses({
        jobType: "short",
        requirementMilli: 13_000,
        classes: small,
        weights,
        rng: new SeededRng(4),
      });
      expect(sel.kind).toBe("multi");
      expect([...sel.classIds].sort()).toEqual(["x", "y", "z"]);
      // y has weight 0, so it is drawn only after the weighted classes.
      expect(sel.classIds[2]).toBe("y");
    });

    it("picks nothing when all classes together fall short, saying by how much", () => {
      const sel = selectClasses({
        jobType: "short",
        requirementMilli: 12_000,
        classes: [oneServerClass("x", "periodic", 4500), oneServerClass("y", "constant", 3000)],
        weights: DEFAULT_CLASS_WEIGHTS,
        rng: new SeededRng(1),
      });
      expect(sel).toMatchObject({ kind: "none", classIds: [], requirementMilli: 12_000 });
      expect(sel.reason).toBe("no class has headroom for 12.0 vcores (all classes together: 7.5)");
    });
  });

  it("picks nothing before the classifier has produced classes", () => {
    const sel = selectClasses({
      jobType: "medium",
      requirementMilli: 1000,
      classes: [],
      weights: DEFAULT_CLASS_WEIGHTS,
      rng: new SeededRng(1),
    });
    expect(sel).toEqual({
      kind: "none",
      classIds: [],
      requirementMilli: 1000,
      headroomMilli: {},
      reason: "no utilization classes yet",
    });
  });
});

describe("HistorySchedulerPolicy", () => {
  const app: AppView = { appId: "job", order: 1, maxConcurrency: 4 };
  const node = (nodeId: string): NodeView => {
    const zero = { vcoresMilli: 0, memoryMb: 0 };
    return { nodeId, rack: "/r", capacity: zero, primaryUsage: zero, allocated: zero, headroom: zero, containers: 0 };
  };

  it("lets the job manager's container go anywhere, even before classes are chosen", () => {
    const policy = new HistorySchedulerPolicy();
    expect(policy.allows(app, node("n9"), AM_PRIORITY)).toBe(true);
    policy.assign("job", ["n1"]);
    expect(policy.allows(app, node("n9"), AM_PRIORITY)).toBe(true);
  });

  it("gives tasks nothing until the job has an assignment, then only its servers", () => {
    const policy = new HistorySchedulerPolicy();
    expect(policy.allows(app, node("n1"), 0)).toBe(false);
    policy.assign("job", new Set(["n1", "n2"]));
    expect(policy.allows(app, node("n1"), 0)).toBe(true);
    expect(policy.allows(app, node("n2"), 3)).toBe(true);
    expect(policy.allows(app, node("n3"), 0)).toBe(false);
    expect([...(policy.assigned("job") ?? [])].sort()).toEqual(["n1", "n2"]);
  });

  it("opens a job that waited too long to every server, and forgets it on unassign", () => {
    const policy = new HistorySchedulerPolicy();
    policy.assign("job", ["n1"]);
    policy.openToAll("job");
    expect(policy.isOpenToAll("job")).toBe(true);
    expect(policy.assigned("job")).toBeUndefined();
    expect(policy.allows(app, node("n3"), 0)).toBe(true);
    policy.unassign("job");
    expect(policy.isOpenToAll("job")).toBe(false);
    expect(policy.allows(app, node("n3"), 0)).toBe(false);
    expect(policy.allows(app, node("n3"), AM_PRIORITY)).toBe(true);
  });

  it("makes the scheduler grant task containers only on the job's assigned nodes", () => {
    const policy = new HistorySchedulerPolicy();
    let seq = 0;
    const s = new Scheduler(policy, { reserveFraction: 0.1, maxAllocationsPerHeartbeat: 0 }, (id) => `${id}/c${++seq}`);
    const res = (vcoresMilli: number): Resources => ({ vcoresMilli, memoryMb: 100 });
    for (const n of ["n1", "n2", "n3", "n4"]) s.addNode(n, { vcoresMilli: 4000, memoryMb: 8192 });
    s.addApp("job", 1);
    s.setAsks("job", [
      { priority: AM_PRIORITY, resource: res(1000), count: 1 },
      { priority: 0, resource: res(1000), count: 10 },
    ]);

    // Before selection only the job manager's container is placed.
    const first = s.allocateOnNode("n4");
    expect(first.map((a) => a.priority)).toEqual([AM_PRIORITY]);
    expect(s.allocateOnNode("n3")).toEqual([]);

    policy.assign("job", ["n1", "n2"]);
    expect(s.allocateOnNode("n3")).toEqual([]);
    expect(s.allocateOnNode("n4")).toEqual([]);
    // 4 cores minus the 0.4 reserve hold three 1-core tasks per node.
    const onAssigned = [...s.allocateOnNode("n1"), ...s.allocateOnNode("n2")];
    expect(onAssigned).toHaveLength(6);
    expect(onAssigned.every((a) => a.priority === 0 && (a.nodeId === "n1" || a.nodeId === "n2"))).toBe(true);
    expect(s.outstanding("job")).toBe(4);

    // Opened to all after waiting too long: the rest may use the other nodes.
    policy.openToAll("job");
    expect(s.allocateOnNode("n3")).toHaveLength(3);
  });

  it("lets a later job with an assignment use a node an earlier unassigned job is waiting on", () => {
    const policy = new HistorySchedulerPolicy();
    let seq = 0;
    const s = new Scheduler(policy, { reserveFraction: 0.1, maxAllocationsPerHeartbeat: 0 }, (id) => `${id}/c${++seq}`);
    s.addNode("n1", { vcoresMilli: 4000, memoryMb: 8192 });
    s.addApp("early", 1);
    s.addApp("late", 2);
    s.setAsks("early", [{ priority: 0, resource: { vcoresMilli: 1000, memoryMb: 100 }, count: 2 }]);
    s.setAsks("late", [{ priority: 0, resource: { vcoresMilli: 1000, memoryMb: 100 }, count: 2 }]);
    policy.assign("late", ["n1"]);
    expect(s.allocateOnNode("n1").map((a) => a.appId)).toEqual(["late", "late"]);
    expect(s.outstanding("early")).toBe(2);
  });
});
