import { describe, expect, it } from "vitest";
import { ManualClock } from "../../common/clock.js";
import type { Resources } from "../../common/resource.js";
import { LifetimeModel } from "../../resourcemanager/policy/lifetime.js";
import type { ContainerKey, LifetimePredictor } from "../../resourcemanager/policy/lifetime.js";
import {
  harvestFill,
  lifetimeClassOf,
  LifetimeNodeChoice,
  nilasBucket,
  resolveNodeChoiceOptions,
  temporalCost,
} from "../../resourcemanager/policy/node-choice.js";
import type { NodeChoiceOptions, NodeChoiceSource } from "../../resourcemanager/policy/node-choice.js";
import { AM_PRIORITY, Scheduler, StockSchedulerPolicy } from "../../resourcemanager/policy/scheduler.js";
import type { AppView, NodeView, SchedulerPolicy } from "../../resourcemanager/policy/scheduler.js";
import { thrown } from "../error-code.js";
import { detailsOf } from "../../common/errors.js";

const S = 1_000;
const MIN = 60_000;
const H = 3_600_000;
const DEFAULT_BUCKETS = [0, 10 * S, 30 * S, MIN, 2 * MIN, 5 * MIN, 10 * MIN, 30 * MIN, H, 3 * H, 12 * H];

/** A predictor that knows every container's true lifetime (remaining = true - uptime, at least 1 ms). */
const truth: LifetimePredictor = {
  remainingMs: (key, uptimeMs) => Math.max(1, (key.trueLifetimeMs ?? 60_000) - Math.max(0, uptimeMs)),
};

const key = (trueLifetimeMs: number, vertex = "v"): ContainerKey => ({
  job: "job",
  vertex,
  isJobManager: false,
  trueLifetimeMs,
});

/** A 4-core, 4 GB node view with `allocatedMilli` of it allocated and the rest free (no primary, no reserve). */
function view(nodeId: string, allocatedMilli = 0, allocatedMb = 0): NodeView {
  return {
    nodeId,
    rack: "/r",
    capacity: { vcoresMilli: 4000, memoryMb: 4096 },
    primaryUsage: { vcoresMilli: 0, memoryMb: 0 },
    allocated: { vcoresMilli: allocatedMilli, memoryMb: allocatedMb },
    headroom: { vcoresMilli: 4000 - allocatedMilli, memoryMb: 4096 - allocatedMb },
    containers: 0,
  };
}

const ONE: Resources = { vcoresMilli: 1000, memoryMb: 100 };
const APP: AppView = { appId: "app", order: 1, maxConcurrency: 0 };

/** A policy over a fixed source whose every ask asks for a container of `lifetimeMs` (set per test). */
function standalone(
  options: Partial<NodeChoiceOptions>,
  clock: ManualClock,
  nodes: NodeView[] = [],
): { choice: LifetimeNodeChoice; ask: { lifetimeMs: number } } {
  const ask = { lifetimeMs: 60_000 };
  const source: NodeChoiceSource = { nodes: () => nodes, keyOf: () => key(ask.lifetimeMs, "new") };
  return { choice: new LifetimeNodeChoice(new StockSchedulerPolicy(), source, truth, options, clock), ask };
}

let seq = 0;
/** Reports a container of true lifetime `lifetimeMs` granted on `nodeId` now, the node then at `node`. */
function grant(choice: LifetimeNodeChoice, clock: ManualClock, nodeId: string, lifetimeMs: number, node?: NodeView) {
  const containerId = `c${++seq}`;
  choice.onGranted({
    containerId,
    nodeId,
    key: key(lifetimeMs),
    startMs: clock.nowMs(),
    resource: ONE,
    ...(node ? { node } : {}),
  });
  return containerId;
}

describe("NILAS temporal cost (seeds/002, 4.2)", () => {
  it("quantizes as the paper does: 70 min with {0, 30, 60, 90 min, ...} is cost 2", () => {
    const paper = [0, 30, 60, 90, 120, 180, 240, 360, 720, 1440, 10080].map((m) => m * MIN);
    expect(nilasBucket(70 * MIN, paper)).toBe(2);
    expect(nilasBucket(0, paper)).toBe(0);
    expect(nilasBucket(30 * MIN, paper)).toBe(1);
    expect(nilasBucket(1e12, paper)).toBe(10);
  });

  it("uses task-scale buckets by default", () => {
    expect(resolveNodeChoiceOptions({}).nilasBucketsMs).toEqual(DEFAULT_BUCKETS);
    expect(nilasBucket(9_999, DEFAULT_BUCKETS)).toBe(0);
    expect(nilasBucket(10 * S, DEFAULT_BUCKETS)).toBe(1);
    // 70 s: past 1 min, before 2 min.
    expect(nilasBucket(70 * S, DEFAULT_BUCKETS)).toBe(3);
    // 70 min: past 1 h, before 3 h.
    expect(nilasBucket(70 * MIN, DEFAULT_BUCKETS)).toBe(8);
  });

  it("costs an empty node the whole lifetime and a node whose containers outlive the new one nothing", () => {
    // Empty: 45 s is past 30 s, before 1 min.
    expect(temporalCost(45 * S, 0, undefined, DEFAULT_BUCKETS)).toBe(2);
    // The server exits at 10 min; a 45 s container placed at 1 min ends before that.
    expect(temporalCost(45 * S, MIN, 10 * MIN, DEFAULT_BUCKETS)).toBe(0);
    // The server exits at 20 s; a 90 s container placed at 0 extends it by 70 s.
    expect(temporalCost(90 * S, 0, 20 * S, DEFAULT_BUCKETS)).toBe(3);
  });

  it("ranks nodes by the re-predicted exit of their containers, ties keeping their order", () => {
    const clock = new ManualClock(0);
    const { choice, ask } = standalone({ kind: "nilas" }, clock);
    grant(choice, clock, "long", 600 * S);
    grant(choice, clock, "short", 120 * S);
    clock.set(100 * S);
    // Re-predicted at 100 s: long exits at 600 s, short at 120 s.
    expect(choice.serverExitMs("long", clock.nowMs())).toBe(600 * S);
    expect(choice.serverExitMs("short", clock.nowMs())).toBe(120 * S);
    expect(choice.serverExitMs("empty", clock.nowMs())).toBeUndefined();
    // A 90 s container: long costs 0; short 190 - 120 = 70 s (3); empty 90 s (3), a tie kept in the given order.
    ask.lifetimeMs = 90 * S;
    const ids = (ns: NodeView[]): string[] => ns.map((n) => n.nodeId);
    expect(ids(choice.order(APP, 0, [view("empty"), view("short"), view("long")]))).toEqual(["long", "empty", "short"]);
    expect(ids(choice.order(APP, 0, [view("short"), view("empty"), view("long")]))).toEqual(["long", "short", "empty"]);
  });

  it("re-predicts a server's exit from its containers' uptime with the learned distribution", () => {
    const model = new LifetimeModel();
    for (let i = 0; i < 100; i++) {
      model.observeTask("etl", "map", 10 * S);
      model.observeTask("etl", "map", 1000 * S);
    }
    const clock = new ManualClock(0);
    const source: NodeChoiceSource = {
      nodes: () => [],
      keyOf: () => ({ job: "etl", vertex: "map", isJobManager: false }),
    };
    const choice = new LifetimeNodeChoice(new StockSchedulerPolicy(), source, model, {}, clock);
    choice.onGranted({
      containerId: "m1",
      nodeId: "n",
      key: { job: "etl", vertex: "map", isJobManager: false },
      startMs: 0,
      resource: ONE,
    });
    // At start: the mean, 505 s. At 20 s the task is in the long mode: 980 s more, exit at 1000 s.
    expect(choice.serverExitMs("n", 0)).toBeCloseTo(505 * S, 6);
    expect(choice.serverExitMs("n", 20 * S)).toBeCloseTo(1000 * S, 6);
    choice.onReleased("m1");
    expect(choice.serverExitMs("n", 20 * S)).toBeUndefined();
  });
});

describe("LAVA server states (seeds/002, 4.3)", () => {
  it("classes lifetimes an order of magnitude apart, from 10 s", () => {
    const bounds = resolveNodeChoiceOptions({}).lavaClassBoundsMs;
    expect(bounds).toEqual([10 * S, 100 * S, 1000 * S, 10_000 * S]);
    expect(lifetimeClassOf(9_999, bounds)).toBe(0);
    expect(lifetimeClassOf(10 * S, bounds)).toBe(1);
    expect(lifetimeClassOf(500 * S, bounds)).toBe(2);
    expect(lifetimeClassOf(1e9, bounds)).toBe(4);
  });

  it("opens an empty server with the class of its first container and a deadline of 1.1 x the class bound", () => {
    const clock = new ManualClock(1_000);
    const { choice } = standalone({ kind: "lava" }, clock);
    expect(choice.lavaState("n").state).toBe("empty");
    grant(choice, clock, "n", 50 * S, view("n", 1000));
    expect(choice.lavaState("n")).toMatchObject({ state: "open", lifetimeClass: 1, containers: 1, residual: [] });
    expect(choice.lavaState("n").deadlineMs).toBeCloseTo(1_000 + 110 * S, 3);
  });

  it("turns an open server recycling once more than 90 % of its harvestable cores or memory is allocated", () => {
    const clock = new ManualClock(0);
    const { choice } = standalone({ kind: "lava" }, clock);
    const a = grant(choice, clock, "n", 50 * S, view("n", 1000));
    // 3600 / (3600 + 400) is exactly 90 %: not more.
    const b = grant(choice, clock, "n", 50 * S, view("n", 3600));
    expect(choice.lavaState("n").state).toBe("open");
    const c = grant(choice, clock, "n", 50 * S, view("n", 3700));
    expect(choice.lavaState("n").state).toBe("recycling");
    expect(choice.lavaState("n").residual).toEqual([a, b, c].sort());
    // Memory counts as well: 3700 MB of 4096 is over 90 % though the cores are a quarter used.
    grant(choice, clock, "m", 50 * S, view("m", 1000, 1000));
    expect(choice.lavaState("m").state).toBe("open");
    grant(choice, clock, "m", 50 * S, view("m", 1000, 3700));
    expect(choice.lavaState("m").state).toBe("recycling");
    // A primary tenant using most of the server leaves little headroom: that fills it as well.
    expect(harvestFill({ ...view("p", 500), headroom: { vcoresMilli: 0, memoryMb: 4000 } })).toBe(1);
  });

  it("steps a recycling server's class down once its residual containers have all left early", () => {
    const clock = new ManualClock(0);
    const { choice } = standalone({ kind: "lava" }, clock);
    const a = grant(choice, clock, "n", 500 * S, view("n", 1000));
    const b = grant(choice, clock, "n", 500 * S, view("n", 3700));
    expect(choice.lavaState("n")).toMatchObject({ state: "recycling", lifetimeClass: 2, residual: [a, b].sort() });
    clock.set(10 * S);
    // A later, shorter container is not residual.
    const c = grant(choice, clock, "n", 5 * S, view("n", 3900));
    expect(choice.lavaState("n").residual).toEqual([a, b].sort());
    clock.set(20 * S);
    choice.onReleased(a);
    expect(choice.lavaState("n")).toMatchObject({ state: "recycling", lifetimeClass: 2, residual: [b] });
    choice.onReleased(b);
    // Overpredicted: class 2 -> 1, what remains is residual, the deadline runs from now with the new bound.
    expect(choice.lavaState("n")).toMatchObject({ state: "recycling", lifetimeClass: 1, containers: 1, residual: [c] });
    expect(choice.lavaState("n").deadlineMs).toBeCloseTo(20 * S + 110 * S, 3);
    choice.onReleased(c);
    expect(choice.lavaState("n").state).toBe("empty");
    // Releasing an unknown or already released container changes nothing.
    choice.onReleased(c);
    choice.onReleased("nope");
    expect(choice.lavaState("n").state).toBe("empty");
  });

  it("steps a server's class up when it passes its deadline, making its containers residual", () => {
    const clock = new ManualClock(0);
    const { choice } = standalone({ kind: "lava" }, clock);
    const a = grant(choice, clock, "n", 50 * S, view("n", 1000));
    const b = grant(choice, clock, "n", 50 * S, view("n", 2000));
    expect(choice.lavaState("n").deadlineMs).toBeCloseTo(110 * S, 3);
    choice.tick(110 * S);
    expect(choice.lavaState("n")).toMatchObject({ state: "open", lifetimeClass: 1 });
    choice.tick(110 * S + 1);
    // Underpredicted: class 1 -> 2, recycling, deadline renewed with 1.1 x 1000 s.
    expect(choice.lavaState("n")).toMatchObject({
      state: "recycling",
      lifetimeClass: 2,
      containers: 2,
      residual: [a, b].sort(),
    });
    expect(choice.lavaState("n").deadlineMs).toBeCloseTo(110 * S + 1 + 1100 * S, 3);
  });

  it("checks deadlines without a tick when the clock has passed one and a node is judged", () => {
    const clock = new ManualClock(0);
    const { choice, ask } = standalone({ kind: "lava" }, clock);
    grant(choice, clock, "n", 5 * S, view("n", 1000));
    clock.set(11 * S + 1);
    ask.lifetimeMs = 5 * S;
    choice.order(APP, 0, [view("n", 1000)]);
    expect(choice.lavaState("n")).toMatchObject({ state: "recycling", lifetimeClass: 1 });
  });

  it("prefers the closest higher-class recycling server, then open of the same class, then non-empty, then empty", () => {
    const clock = new ManualClock(0);
    const { choice, ask } = standalone({ kind: "lava" }, clock);
    const full = (id: string): NodeView => view(id, 3700);
    grant(choice, clock, "R3", 5_000 * S, full("R3"));
    grant(choice, clock, "R2", 500 * S, full("R2"));
    grant(choice, clock, "R1", 50 * S, full("R1"));
    grant(choice, clock, "O1", 50 * S, view("O1", 1000));
    grant(choice, clock, "O2", 500 * S, view("O2", 1000));
    expect(choice.lavaState("R3")).toMatchObject({ state: "recycling", lifetimeClass: 3 });
    expect(choice.lavaState("O2")).toMatchObject({ state: "open", lifetimeClass: 2 });
    const ids = (ns: NodeView[]): string[] => ns.map((n) => n.nodeId);
    const all = [view("E"), full("R1"), view("O2", 1000), view("O1", 1000), full("R3"), full("R2")];
    // A class-1 container (50 s): R2 (one class above), R3 (two), O1 (open, same class), O2 (another class), the
    // empty E; R1 (recycling, not above class 1) takes it only as a last resort.
    ask.lifetimeMs = 50 * S;
    expect(ids(choice.order(APP, 0, all))).toEqual(["R2", "R3", "O1", "O2", "E", "R1"]);
    // A class-2 container (500 s): only R3 is a recycling server above it; O2 is its open class. Last, R2 and R1,
    // by NILAS cost: R2 (exits at 500 s) is not extended (0), R1 (50 s) by 450 s (5).
    ask.lifetimeMs = 500 * S;
    expect(ids(choice.order(APP, 0, all))).toEqual(["R3", "O2", "O1", "E", "R2", "R1"]);
  });

  it("breaks ties within a tier by NILAS cost", () => {
    const clock = new ManualClock(0);
    const { choice, ask } = standalone({ kind: "lava" }, clock);
    grant(choice, clock, "soon", 20 * S, view("soon", 1000));
    grant(choice, clock, "later", 90 * S, view("later", 1000));
    // Both open, class 1. A 50 s container extends "soon" by 30 s (cost 2) and "later" not at all (cost 0).
    ask.lifetimeMs = 50 * S;
    const order = choice.order(APP, 0, [view("soon", 1000), view("later", 1000)]);
    expect(order.map((n) => n.nodeId)).toEqual(["later", "soon"]);
  });
});

/** A scheduler over nodes a, b, c (4 cores each, no reserve) whose policy reads it back through the source. */
function cluster(
  options: Partial<NodeChoiceOptions>,
  clock: ManualClock,
  lifetimes: Record<string, number>,
  inner: SchedulerPolicy = new StockSchedulerPolicy(),
): { scheduler: Scheduler; choice: LifetimeNodeChoice; heartbeat: (nodeId: string) => string[] } {
  let scheduler: Scheduler | undefined;
  const source: NodeChoiceSource = {
    nodes: () => scheduler!.nodeViews(),
    node: (id) => scheduler!.nodeView(id),
    keyOf: (app) => ({
      job: app.appId,
      vertex: "v",
      isJobManager: false,
      trueLifetimeMs: lifetimes[app.appId] ?? 60_000,
    }),
  };
  const choice = new LifetimeNodeChoice(inner, source, truth, options, clock);
  let n = 0;
  scheduler = new Scheduler(choice, { reserveFraction: 0, maxAllocationsPerHeartbeat: 0 }, (id) => `${id}/c${++n}`);
  for (const id of ["a", "b", "c"]) scheduler.addNode(id, { vcoresMilli: 4000, memoryMb: 8192 });
  const s = scheduler;
  const heartbeat = (nodeId: string): string[] => {
    const granted = s.allocateOnNode(nodeId);
    for (const g of granted)
      choice.onGranted({
        containerId: g.containerId,
        nodeId: g.nodeId,
        key: source.keyOf({ appId: g.appId, order: 0, maxConcurrency: 0 }, g.priority),
        startMs: clock.nowMs(),
        resource: g.resource,
      });
    return granted.map((g) => g.nodeId);
  };
  return { scheduler: s, choice, heartbeat };
}

const ASK = [{ priority: 0, resource: ONE, count: 1 }];

describe("the lifetime-aware gate on heartbeats", () => {
  it("declines a worse node and lets the best take the container on its own heartbeat", () => {
    const clock = new ManualClock(0);
    const { scheduler, heartbeat } = cluster({ kind: "nilas" }, clock, { old: 600 * S, fresh: 90 * S });
    scheduler.addApp("old", 1);
    scheduler.setAsks("old", ASK);
    // Every node is empty: all tie, the first heartbeat takes it.
    expect(heartbeat("b")).toEqual(["b"]);
    scheduler.addApp("fresh", 2);
    scheduler.setAsks("fresh", ASK);
    // a and c are empty (cost of 90 s: 3); b outlives the new container (cost 0).
    expect(heartbeat("a")).toEqual([]);
    expect(heartbeat("c")).toEqual([]);
    expect(heartbeat("b")).toEqual(["b"]);
  });

  it("accepts any node once the ask has been declined for waitMs", () => {
    const clock = new ManualClock(0);
    const { scheduler, heartbeat } = cluster({ kind: "nilas", waitMs: 3000 }, clock, { old: 600 * S, fresh: 90 * S });
    scheduler.addApp("old", 1);
    scheduler.setAsks("old", ASK);
    heartbeat("b");
    scheduler.addApp("fresh", 2);
    scheduler.setAsks("fresh", ASK);
    expect(heartbeat("a")).toEqual([]);
    clock.advance(2999);
    expect(heartbeat("a")).toEqual([]);
    clock.advance(1);
    expect(heartbeat("a")).toEqual(["a"]);
  });

  it("does not wait for a better node the container does not fit on or the inner policy forbids", () => {
    const clock = new ManualClock(0);
    const notB: SchedulerPolicy = { name: "not-b", allows: (app, n) => app.appId === "old" || n.nodeId !== "b" };
    const { scheduler, heartbeat } = cluster({ kind: "nilas" }, clock, { old: 600 * S, fresh: 90 * S }, notB);
    scheduler.addApp("old", 1);
    scheduler.setAsks("old", ASK);
    heartbeat("b");
    scheduler.addApp("fresh", 2);
    scheduler.setAsks("fresh", ASK);
    // b would cost 0 but the inner policy keeps "fresh" off it: a is among the best allowed.
    expect(heartbeat("a")).toEqual(["a"]);

    const clock2 = new ManualClock(0);
    const full = cluster({ kind: "nilas" }, clock2, { old: 600 * S, fresh: 90 * S });
    full.scheduler.addApp("old", 1);
    // Four one-core containers of "old" fill b.
    full.scheduler.setAsks("old", [{ priority: 0, resource: ONE, count: 4 }]);
    expect(full.heartbeat("b")).toEqual(["b", "b", "b", "b"]);
    full.scheduler.addApp("fresh", 2);
    full.scheduler.setAsks("fresh", ASK);
    expect(full.heartbeat("a")).toEqual(["a"]);
  });

  it("keeps a recycling server to lower classes on heartbeats, until the wait runs out", () => {
    const clock = new ManualClock(0);
    const { scheduler, choice, heartbeat } = cluster({ kind: "lava", waitMs: 3000 }, clock, {
      long: 500 * S,
      same: 500 * S,
      short: 50 * S,
    });
    for (const id of ["a", "c"]) scheduler.removeNode(id);
    scheduler.addApp("long", 1);
    scheduler.setAsks("long", [{ priority: 0, resource: ONE, count: 4 }]);
    // b opens with class 2 and, full, turns recycling after the heartbeat reports its grants.
    expect(heartbeat("b")).toHaveLength(4);
    expect(choice.lavaState("b")).toMatchObject({ state: "recycling", lifetimeClass: 2 });
    const release = (): void => {
      const id = choice.containersOn("b")[0]!.containerId;
      scheduler.release(id);
      choice.onReleased(id);
    };
    release();
    scheduler.addApp("same", 2);
    scheduler.setAsks("same", ASK);
    scheduler.addApp("short", 3);
    scheduler.setAsks("short", ASK);
    // The class-1 container takes the freed core; the class-2 one waits, then takes b as a last resort.
    expect(heartbeat("b")).toEqual(["b"]);
    expect(scheduler.outstanding("short")).toBe(0);
    expect(scheduler.outstanding("same")).toBe(1);
    expect(choice.lavaState("b").containers).toBe(4);
    release();
    expect(heartbeat("b")).toEqual([]);
    clock.advance(3000);
    expect(heartbeat("b")).toEqual(["b"]);
    expect(scheduler.outstanding("same")).toBe(0);
  });

  it("lets every node through under the stock kind", () => {
    const clock = new ManualClock(0);
    const { scheduler, choice, heartbeat } = cluster({ kind: "stock" }, clock, { old: 600 * S, fresh: 90 * S });
    expect(choice.name).toBe("stock");
    scheduler.addApp("old", 1);
    scheduler.setAsks("old", ASK);
    heartbeat("b");
    scheduler.addApp("fresh", 2);
    scheduler.setAsks("fresh", [{ priority: AM_PRIORITY, resource: ONE, count: 1 }]);
    expect(heartbeat("a")).toEqual(["a"]);
    expect(choice.order(APP, 0, [view("c"), view("a")]).map((n) => n.nodeId)).toEqual(["c", "a"]);
  });
});

describe("node choice options", () => {
  it("rejects invalid options, naming the field", () => {
    expect(resolveNodeChoiceOptions({})).toMatchObject({
      kind: "nilas",
      recyclingFraction: 0.9,
      deadlineFactor: 1.1,
      waitMs: 3000,
    });
    for (const [partial, field] of [
      [{ kind: "best" as NodeChoiceOptions["kind"] }, "kind"],
      [{ nilasBucketsMs: [10, 20] }, "nilasBucketsMs"],
      [{ nilasBucketsMs: [0, 20, 20] }, "nilasBucketsMs"],
      [{ nilasBucketsMs: [] }, "nilasBucketsMs"],
      [{ lavaClassBoundsMs: [0, 10] }, "lavaClassBoundsMs"],
      [{ lavaClassBoundsMs: [10, 5] }, "lavaClassBoundsMs"],
      [{ recyclingFraction: 0 }, "recyclingFraction"],
      [{ recyclingFraction: 1.2 }, "recyclingFraction"],
      [{ deadlineFactor: 0.5 }, "deadlineFactor"],
      [{ waitMs: -1 }, "waitMs"],
    ] as const) {
      const err = thrown(() => resolveNodeChoiceOptions(partial));
      expect(err.code).toBe("CONFIG_INVALID");
      expect(detailsOf(err, "INVALID_ARGUMENT", "CONFIG_INVALID")?.field).toBe(field);
    }
  });
});
