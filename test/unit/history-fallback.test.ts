/**
 * The history policy's refinements (issue 44), each beside its seeds/004 baseline: near saturation, and when no class
 * has room, a job is placed as the stock policy places it instead of waiting for a class; long jobs avoid a server that
 * just killed work; a job's length judged against each class's time between bursts.
 */
import { describe, expect, it } from "vitest";
import { ManualClock } from "../../common/clock.js";
import { Logger } from "../../common/log.js";
import { SeededRng } from "../../common/rng.js";
import {
  HistorySchedulerPolicy,
  jobTypeForClass,
  resolveClassWeights,
} from "../../resourcemanager/policy/class-selection.js";
import { tenantFeatures } from "../../resourcemanager/policy/classifier.js";
import type { ClassView } from "../../resourcemanager/policy/class-selection.js";
import {
  DEFAULT_KILL_HOLD_MS,
  HistoryPlacement,
  KillMemory,
  occupiedShare,
} from "../../resourcemanager/policy/history-placement.js";
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

function placementOver(views: ClassView[], options: Partial<HistoryPlacementOptions> = {}, seed = 1) {
  const policy = new HistorySchedulerPolicy();
  const clock = new ManualClock(0);
  const placement = new HistoryPlacement(
    policy,
    { weights: resolveClassWeights({}), classWaitMs: 60_000, ...options },
    { classViews: () => views },
    clock,
    new SeededRng(seed),
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

    // 10 cores at 20 % leave 7 usable; 6 held on each is 86 %, above the default 65 %. Either class still has room for
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

describe("a killed job leaving its classes", () => {
  it("opens a confined short job to every server once a primary killed its task, and only then", () => {
    // Two classes: the job is kept to one; the other's servers are closed to it until the kill.
    const views = [cls("a", 2, 10, 0), cls("b", 2, 10, 0)];
    const { policy, placement } = placementOver(views, { saturationShare: 1 });
    placement.register("job", "short", 2);
    expect(placement.onAsk("job", 1000)?.kind).toBe("classes");
    const mine = placement.placement("job")!.classIds;
    expect(mine).toHaveLength(1);
    const other = mine[0] === "a" ? "b" : "a";
    expect(policy.allows(app("job"), node(`${other}-0`), 0)).toBe(false);
    // A kill of another job's task, or of no known job, changes nothing for this one.
    expect(placement.noteKill(`${mine[0]}-0`, "someone-else")).toBeUndefined();
    expect(placement.noteKill(`${mine[0]}-0`)).toBeUndefined();
    expect(policy.allows(app("job"), node(`${other}-0`), 0)).toBe(false);
    const opened = placement.noteKill(`${mine[0]}-0`, "job");
    expect(opened?.kind).toBe("any");
    expect(policy.allows(app("job"), node(`${other}-0`), 0)).toBe(true);
    expect(placement.placement("job")!.note).toMatch(/killed one of its tasks/);
    // Once open, later kills decide nothing more.
    expect(placement.noteKill(`${other}-0`, "job")).toBeUndefined();

    // A long job stays in its classes.
    placement.register("long", "long", 2);
    expect(placement.onAsk("long", 1000)?.kind).toBe("classes");
    const longClass = placement.placement("long")!.classIds[0]!;
    expect(placement.noteKill(`${longClass}-1`, "long")).toBeUndefined();
    expect(placement.placement("long")!.classIds).toEqual([longClass]);

    // Off (seeds/004): the job stays in its classes.
    const off = placementOver(views, { saturationShare: 1, killedJobsLeaveClasses: false });
    off.placement.register("job", "short", 2);
    off.placement.onAsk("job", 1000);
    const kept = off.placement.placement("job")!.classIds[0]!;
    expect(off.placement.noteKill(`${kept}-0`, "job")).toBeUndefined();
    expect(off.policy.allows(app("job"), node(`${kept === "a" ? "b" : "a"}-0`), 0)).toBe(false);
  });
});

describe("learning from kills", () => {
  it("keeps long jobs' tasks off a server whose primary just killed work, for its class's burst length", () => {
    const views = [cls("a", 4, 10, 0)];
    const { policy, clock, placement } = placementOver(views, { saturationShare: 1, learnFromKills: true });
    placement.register("long1", "long", 2);
    placement.register("short1", "short", 2);
    expect(placement.onAsk("long1", 1000)?.kind).toBe("classes");
    expect(placement.onAsk("short1", 1000)?.kind).toBe("classes");
    clock.set(1_000);
    placement.noteKill("a-1");
    // The class has no burst length: the default hold.
    expect(policy.allows(app("long1"), node("a-1"), 0)).toBe(false);
    expect(policy.allows(app("long1"), node("a-2"), 0)).toBe(true);
    expect(policy.allows(app("short1"), node("a-1"), 0)).toBe(true);
    // The job manager goes anywhere.
    expect(policy.allows(app("long1"), node("a-1"), -1)).toBe(true);
    clock.set(1_000 + DEFAULT_KILL_HOLD_MS - 1);
    expect(policy.allows(app("long1"), node("a-1"), 0)).toBe(false);
    clock.set(1_000 + DEFAULT_KILL_HOLD_MS);
    expect(policy.allows(app("long1"), node("a-1"), 0)).toBe(true);

    // A long job placed as stock (no class holds it) takes what any server offers, held or not.
    placement.register("wide", "long", 100);
    expect(placement.onAsk("wide", 1000)?.kind).toBe("any");
    placement.noteKill("a-2");
    expect(policy.allows(app("wide"), node("a-2"), 0)).toBe(true);
    expect(policy.allows(app("long1"), node("a-2"), 0)).toBe(false);

    // Off (the default): nothing is held.
    const off = placementOver(views, { saturationShare: 1 });
    off.placement.register("long1", "long", 2);
    off.placement.onAsk("long1", 1000);
    off.placement.noteKill("a-1");
    expect(off.policy.allows(app("long1"), node("a-1"), 0)).toBe(true);
  });

  it("holds a server for its class's burst length when the classes know it", () => {
    const memory = new KillMemory((s) => (s === "bursty" ? 10 * 60_000 : undefined));
    memory.record("bursty", 0);
    memory.record("quiet", 0);
    expect(memory.held("bursty", 10 * 60_000 - 1)).toBe(true);
    expect(memory.held("bursty", 10 * 60_000)).toBe(false);
    expect(memory.held("quiet", 10 * 60_000)).toBe(true);
    expect(memory.held("never", 0)).toBe(false);
  });

  it("measures a tenant's bursts: how long they last and how far apart they start", () => {
    // One sample a minute over 20 minutes: two bursts to 90 %, of 2 and 4 minutes, over a 10 % floor.
    const cpuPct = Array.from({ length: 20 }, (_, i) => ((i >= 3 && i < 5) || (i >= 12 && i < 16) ? 90 : 10));
    const f = tenantFeatures({
      name: "t",
      stepSec: 60,
      startMs: 0,
      timesMs: cpuPct.map((_, i) => i * 60_000),
      cpuPct,
    });
    // Mean 34 %, deviation 37 %: both bursts lie above 71 %; 20 minutes over two bursts is one every 10.
    expect(f.burstMs).toBe(3 * 60_000);
    expect(f.burstGapMs).toBe(10 * 60_000);
    const flat = tenantFeatures({ name: "f", stepSec: 60, startMs: 0, timesMs: [0, 60_000], cpuPct: [5, 5] });
    expect(flat.burstMs).toBeUndefined();
  });
});

describe("a job's length judged per class", () => {
  it("is short where it will likely finish before the class's next burst, long where it will likely see two", () => {
    const hour = 3_600_000;
    expect(jobTypeForClass(0.5 * hour, hour, "medium")).toBe("short");
    expect(jobTypeForClass(hour, hour, "short")).toBe("medium");
    expect(jobTypeForClass(2 * hour, hour, "short")).toBe("long");
    // A class that never bursts; a job never seen before keeps the history's type.
    expect(jobTypeForClass(10 * hour, undefined, "long")).toBe("short");
    expect(jobTypeForClass(undefined, hour, "long")).toBe("long");
  });

  it("sends an hour-long job to a quiet class rather than to a class that bursts every 20 minutes", () => {
    const quiet = { ...cls("quiet", 4, 30, 0), pattern: "constant" as const, peak: 40, burstGapMs: 24 * 3_600_000 };
    const bursty = { ...cls("bursty", 4, 30, 0), pattern: "unpredictable" as const, peak: 95, burstGapMs: 20 * 60_000 };
    // By terciles the job is short: short jobs rank unpredictable first, and both classes have room now.
    let toBursty = 0;
    for (let seed = 1; seed <= 40; seed++) {
      const views = [quiet, bursty];
      const terciles = placementOver(views, { saturationShare: 1 }, seed);
      const perClass = placementOver(views, { saturationShare: 1, jobLength: "per-class" }, seed);
      for (const [p, name] of [
        [terciles, "t"],
        [perClass, "p"],
      ] as const) {
        p.placement.register(`${name}${seed}`, "short", 4, 3_600_000);
      }
      const t = terciles.placement.onAsk(`t${seed}`, 1000);
      const pc = perClass.placement.onAsk(`p${seed}`, 1000);
      if (t?.kind === "classes" && t.classIds[0] === "bursty") toBursty++;
      // Per class, it is long on the bursty class, whose peak leaves it no room: the quiet class every time.
      expect(pc?.kind === "classes" ? pc.classIds : []).toEqual(["quiet"]);
    }
    expect(toBursty).toBeGreaterThan(0);
  });
});
