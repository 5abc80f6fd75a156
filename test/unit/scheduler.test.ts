import { describe, expect, it } from "vitest";
import type { Resources } from "../../common/resource.js";
import type {
  Allocation,
  AppView,
  NodeView,
  SchedulerOptions,
  SchedulerPolicy,
} from "../../resourcemanager/policy/scheduler.js";
import { AM_PRIORITY, Scheduler, StockSchedulerPolicy } from "../../resourcemanager/policy/scheduler.js";

const DEFAULTS: SchedulerOptions = {
  reserveFraction: 0.1,
  maxAllocationsPerHeartbeat: 0,
};

/** A scheduler whose container ids are `<appId>/c<n>`, numbered per scheduler. */
function newScheduler(
  policy: SchedulerPolicy = new StockSchedulerPolicy(),
  options: SchedulerOptions = DEFAULTS,
): Scheduler {
  let seq = 0;
  return new Scheduler(policy, options, (appId) => `${appId}/c${++seq}`);
}

function res(vcoresMilli: number, memoryMb = 100): Resources {
  return { vcoresMilli, memoryMb };
}

function countBy(allocs: Allocation[], key: (a: Allocation) => string | number): Record<string, number> {
  const out: Record<string, number> = {};
  for (const a of allocs) out[String(key(a))] = (out[String(key(a))] ?? 0) + 1;
  return out;
}

describe("Scheduler with the stock policy", () => {
  it("grants only what fits in capacity minus the 10% core reserve", () => {
    const s = newScheduler();
    s.addNode("n1", res(4000, 8192));
    s.addApp("app1", 1);
    s.setAsks("app1", [{ priority: 0, resource: res(1000, 256), count: 10 }]);
    // 4000 - 400 reserve = 3600: three 1-core containers fit, a fourth would not.
    const granted = s.allocateOnNode("n1");
    expect(granted).toHaveLength(3);
    expect(granted.every((a) => a.nodeId === "n1" && a.appId === "app1")).toBe(true);
    expect(s.outstanding("app1")).toBe(7);
  });

  it("grants a set of containers that exactly fills the harvestable headroom", () => {
    const s = newScheduler();
    s.addNode("n1", res(4000, 8192));
    s.addApp("app1", 1);
    s.setAsks("app1", [{ priority: 0, resource: res(900, 256), count: 5 }]);
    // 4 x 900 = 3600 = 4000 - 400.
    expect(s.allocateOnNode("n1")).toHaveLength(4);
  });

  it("gives each granted container a distinct id and the asked resources", () => {
    const s = newScheduler();
    s.addNode("n1", res(8000, 8192));
    s.addApp("app1", 1);
    s.setAsks("app1", [{ priority: 3, resource: res(1500, 700), count: 3 }]);
    const granted = s.allocateOnNode("n1");
    expect(new Set(granted.map((a) => a.containerId)).size).toBe(3);
    for (const a of granted) {
      expect(a.resource).toEqual({ vcoresMilli: 1500, memoryMb: 700 });
      expect(a.priority).toBe(3);
      expect(s.allocation(a.containerId)).toEqual(a);
    }
  });

  it("counts containers already allocated on the node against later heartbeats", () => {
    const s = newScheduler();
    s.addNode("n1", res(4000, 8192));
    s.addApp("app1", 1);
    s.setAsks("app1", [{ priority: 0, resource: res(1000), count: 10 }]);
    expect(s.allocateOnNode("n1")).toHaveLength(3);
    expect(s.allocateOnNode("n1")).toHaveLength(0);
    expect(s.outstanding("app1")).toBe(7);
  });

  it("uses capacity freed by a release on a later heartbeat", () => {
    const s = newScheduler();
    s.addNode("n1", res(4000, 8192));
    s.addApp("app1", 1);
    s.setAsks("app1", [{ priority: 0, resource: res(1000), count: 10 }]);
    const first = s.allocateOnNode("n1");
    const released = s.release(first[0]!.containerId);
    expect(released?.containerId).toBe(first[0]!.containerId);
    expect(s.allocation(first[0]!.containerId)).toBeUndefined();
    const second = s.allocateOnNode("n1");
    expect(second).toHaveLength(1);
    expect(s.outstanding("app1")).toBe(6);
  });

  it("treats releasing an unknown or already released container as a no-op", () => {
    const s = newScheduler();
    s.addNode("n1", res(4000, 8192));
    s.addApp("app1", 1);
    s.setAsks("app1", [{ priority: 0, resource: res(1000), count: 10 }]);
    const [a] = s.allocateOnNode("n1");
    expect(s.release(a!.containerId)).toBeDefined();
    expect(s.release(a!.containerId)).toBeUndefined();
    expect(s.release("no-such-container")).toBeUndefined();
    // A double release must not free capacity twice: one slot is free, not two.
    expect(s.allocateOnNode("n1")).toHaveLength(1);
  });

  it("grants fewer containers when the primary tenant uses more of the node", () => {
    const s = newScheduler();
    s.addNode("n1", res(4000, 8192));
    s.addApp("app1", 1);
    s.setAsks("app1", [{ priority: 0, resource: res(1000), count: 10 }]);
    s.updatePrimaryUsage("n1", res(2000, 0));
    // 4000 - 2000 - 400 = 1600: one container.
    expect(s.allocateOnNode("n1")).toHaveLength(1);
  });

  it("grants nothing more after the primary grows into the room already granted", () => {
    const s = newScheduler();
    s.addNode("n1", res(4000, 8192));
    s.addApp("app1", 1);
    s.setAsks("app1", [{ priority: 0, resource: res(1000), count: 10 }]);
    expect(s.allocateOnNode("n1")).toHaveLength(3);
    s.updatePrimaryUsage("n1", res(1500, 0));
    expect(s.allocateOnNode("n1")).toEqual([]);
    // The headroom a policy sees is floored at zero, not negative.
    expect(s.nodeView("n1")?.headroom.vcoresMilli).toBe(0);
  });

  it("grants again when the primary tenant's usage drops", () => {
    const s = newScheduler();
    s.addNode("n1", res(4000, 8192));
    s.addApp("app1", 1);
    s.setAsks("app1", [{ priority: 0, resource: res(1000), count: 10 }]);
    s.updatePrimaryUsage("n1", res(3600, 0));
    expect(s.allocateOnNode("n1")).toHaveLength(0);
    s.updatePrimaryUsage("n1", res(600, 0));
    expect(s.allocateOnNode("n1")).toHaveLength(3);
  });

  it("treats memory as a second dimension that also limits grants", () => {
    const s = newScheduler();
    s.addNode("n1", res(16000, 1024));
    s.addApp("app1", 1);
    s.setAsks("app1", [{ priority: 0, resource: res(500, 300), count: 10 }]);
    // Plenty of cores, but 1024 MB fits only three 300 MB containers.
    expect(s.allocateOnNode("n1")).toHaveLength(3);
  });

  it("subtracts the primary tenant's memory from what containers may use", () => {
    const s = newScheduler();
    s.addNode("n1", res(16000, 1024));
    s.addApp("app1", 1);
    s.setAsks("app1", [{ priority: 0, resource: res(500, 300), count: 10 }]);
    s.updatePrimaryUsage("n1", res(0, 500));
    // 1024 - 500 = 524 MB: one container.
    expect(s.allocateOnNode("n1")).toHaveLength(1);
  });

  it("serves applications first-in first-out by their order, not by when they asked", () => {
    const s = newScheduler();
    s.addNode("n1", res(4000, 8192));
    s.addApp("late", 2);
    s.addApp("early", 1);
    s.setAsks("late", [{ priority: 0, resource: res(1000), count: 2 }]);
    s.setAsks("early", [{ priority: 0, resource: res(1000), count: 2 }]);
    // Room for three: both of the earlier app's, then one of the later app's.
    const granted = s.allocateOnNode("n1");
    expect(granted.map((a) => a.appId)).toEqual(["early", "early", "late"]);
  });

  it("serves a later application once the earlier one's asks are satisfied", () => {
    const s = newScheduler();
    s.addNode("n1", res(4000, 8192));
    s.addNode("n2", res(4000, 8192));
    s.addApp("a", 1);
    s.addApp("b", 2);
    s.setAsks("a", [{ priority: 0, resource: res(1000), count: 3 }]);
    s.setAsks("b", [{ priority: 0, resource: res(1000), count: 3 }]);
    expect(countBy(s.allocateOnNode("n1"), (x) => x.appId)).toEqual({ a: 3 });
    expect(countBy(s.allocateOnNode("n2"), (x) => x.appId)).toEqual({ b: 3 });
  });

  it("grants an application's lower priority numbers first", () => {
    const s = newScheduler();
    s.addNode("n1", res(4000, 8192));
    s.addApp("app1", 1);
    s.setAsks("app1", [
      { priority: 5, resource: res(1000), count: 2 },
      { priority: 1, resource: res(1000), count: 2 },
    ]);
    const granted = s.allocateOnNode("n1");
    expect(granted.map((a) => a.priority)).toEqual([1, 1, 5]);
  });

  it("replaces an application's asks rather than adding to them", () => {
    const s = newScheduler();
    s.addNode("n1", res(16000, 8192));
    s.addApp("app1", 1);
    s.setAsks("app1", [{ priority: 0, resource: res(1000), count: 5 }]);
    s.setAsks("app1", [{ priority: 0, resource: res(1000), count: 2 }]);
    expect(s.outstanding("app1")).toBe(2);
    expect(s.allocateOnNode("n1")).toHaveLength(2);
  });

  it("drops a priority that a new set of asks no longer mentions", () => {
    const s = newScheduler();
    s.addNode("n1", res(16000, 8192));
    s.addApp("app1", 1);
    s.setAsks("app1", [
      { priority: 0, resource: res(1000), count: 2 },
      { priority: 1, resource: res(1000), count: 2 },
    ]);
    s.setAsks("app1", [{ priority: 1, resource: res(1000), count: 1 }]);
    expect(s.allocateOnNode("n1").map((a) => a.priority)).toEqual([1]);
  });

  it("stops granting to an application whose asks are set to none", () => {
    const s = newScheduler();
    s.addNode("n1", res(16000, 8192));
    s.addApp("app1", 1);
    s.setAsks("app1", [{ priority: 0, resource: res(1000), count: 5 }]);
    s.setAsks("app1", []);
    expect(s.outstanding("app1")).toBe(0);
    expect(s.allocateOnNode("n1")).toEqual([]);
    expect(s.stats().hungryApps).toBe(0);
  });

  it("takes a new set of asks after partial grants as the whole remaining demand", () => {
    const s = newScheduler();
    s.addNode("n1", res(4000, 8192));
    s.addNode("n2", res(4000, 8192));
    s.addApp("app1", 1);
    s.setAsks("app1", [{ priority: 0, resource: res(1000), count: 5 }]);
    expect(s.allocateOnNode("n1")).toHaveLength(3);
    s.setAsks("app1", [{ priority: 0, resource: res(1000), count: 1 }]);
    expect(s.allocateOnNode("n2")).toHaveLength(1);
  });

  it("serves an application again when it asks after its earlier asks were all granted", () => {
    const s = newScheduler();
    s.addNode("n1", res(8000, 8192));
    s.addApp("app1", 1);
    s.setAsks("app1", [{ priority: 0, resource: res(1000), count: 2 }]);
    expect(s.allocateOnNode("n1")).toHaveLength(2);
    s.setAsks("app1", [{ priority: 1, resource: res(1000), count: 2 }]);
    expect(s.allocateOnNode("n1").map((a) => a.priority)).toEqual([1, 1]);
  });

  it("ignores asks for an application it does not know", () => {
    const s = newScheduler();
    s.addNode("n1", res(8000, 8192));
    s.setAsks("ghost", [{ priority: 0, resource: res(1000), count: 2 }]);
    expect(s.outstanding("ghost")).toBe(0);
    expect(s.allocateOnNode("n1")).toEqual([]);
  });

  it("returns the allocations that were on a removed node, and only those", () => {
    const s = newScheduler();
    s.addNode("n1", res(4000, 8192));
    s.addNode("n2", res(4000, 8192));
    s.addApp("app1", 1);
    s.setAsks("app1", [{ priority: 0, resource: res(1000), count: 6 }]);
    const onN1 = s.allocateOnNode("n1");
    const onN2 = s.allocateOnNode("n2");
    const lost = s.removeNode("n1");
    expect(lost.map((a) => a.containerId).sort()).toEqual(onN1.map((a) => a.containerId).sort());
    expect(s.hasNode("n1")).toBe(false);
    for (const a of onN1) expect(s.allocation(a.containerId)).toBeUndefined();
    for (const a of onN2) expect(s.allocation(a.containerId)).toEqual(a);
    expect(s.stats().containers).toBe(onN2.length);
    expect(s.removeNode("n1")).toEqual([]);
  });

  it("grants nothing on a node it does not know", () => {
    const s = newScheduler();
    s.addApp("app1", 1);
    s.setAsks("app1", [{ priority: 0, resource: res(1000), count: 6 }]);
    expect(s.allocateOnNode("nowhere")).toEqual([]);
    expect(s.outstanding("app1")).toBe(6);
  });

  it("releases an application's containers when it is removed, so others can use the room", () => {
    const s = newScheduler();
    s.addNode("n1", res(4000, 8192));
    s.addApp("a", 1);
    s.addApp("b", 2);
    s.setAsks("a", [{ priority: 0, resource: res(1000), count: 3 }]);
    s.setAsks("b", [{ priority: 0, resource: res(1000), count: 3 }]);
    const ofA = s.allocateOnNode("n1");
    expect(countBy(ofA, (x) => x.appId)).toEqual({ a: 3 });
    const released = s.removeApp("a");
    expect(released.map((x) => x.containerId).sort()).toEqual(ofA.map((x) => x.containerId).sort());
    for (const x of ofA) expect(s.allocation(x.containerId)).toBeUndefined();
    expect(countBy(s.allocateOnNode("n1"), (x) => x.appId)).toEqual({ b: 3 });
  });

  it("forgets a removed application's outstanding asks", () => {
    const s = newScheduler();
    s.addNode("n1", res(4000, 8192));
    s.addApp("a", 1);
    s.setAsks("a", [{ priority: 0, resource: res(1000), count: 3 }]);
    s.removeApp("a");
    expect(s.allocateOnNode("n1")).toEqual([]);
    expect(s.stats()).toMatchObject({ apps: 0, hungryApps: 0 });
  });

  it("reports the largest container any node can hold, cores net of the reserve", () => {
    const s = newScheduler();
    expect(s.maxNodeCapacity()).toEqual({ vcoresMilli: 0, memoryMb: 0 });
    s.addNode("n1", res(4000, 8192));
    s.addNode("n2", res(8000, 2048));
    // Cores from n2 (8000 - 800), memory from n1.
    expect(s.maxNodeCapacity()).toEqual({ vcoresMilli: 7200, memoryMb: 8192 });
    s.removeNode("n2");
    expect(s.maxNodeCapacity()).toEqual({ vcoresMilli: 3600, memoryMb: 8192 });
  });

  it("uses a re-added node's new capacity and reserve", () => {
    const s = newScheduler();
    s.addNode("n1", res(2000, 8192));
    s.addNode("n1", res(8000, 8192));
    expect(s.maxNodeCapacity()).toEqual({ vcoresMilli: 7200, memoryMb: 8192 });
    s.addApp("app1", 1);
    s.setAsks("app1", [{ priority: 0, resource: res(1000), count: 10 }]);
    expect(s.allocateOnNode("n1")).toHaveLength(7);
  });

  it("honours a reserve fraction other than the default", () => {
    const s = newScheduler(new StockSchedulerPolicy(), {
      reserveFraction: 0.5,
      maxAllocationsPerHeartbeat: 0,
    });
    s.addNode("n1", res(4000, 8192));
    s.addApp("app1", 1);
    s.setAsks("app1", [{ priority: 0, resource: res(1000), count: 10 }]);
    expect(s.allocateOnNode("n1")).toHaveLength(2);
  });

  it("grants at most the configured number of containers per heartbeat", () => {
    const s = newScheduler(new StockSchedulerPolicy(), {
      reserveFraction: 0.1,
      maxAllocationsPerHeartbeat: 2,
    });
    s.addNode("n1", res(16000, 8192));
    s.addApp("a", 1);
    s.addApp("b", 2);
    s.setAsks("a", [{ priority: 0, resource: res(1000), count: 1 }]);
    s.setAsks("b", [{ priority: 0, resource: res(1000), count: 5 }]);
    expect(s.allocateOnNode("n1").map((x) => x.appId)).toEqual(["a", "b"]);
    expect(s.allocateOnNode("n1").map((x) => x.appId)).toEqual(["b", "b"]);
  });
});

describe("Scheduler with a custom policy", () => {
  /** Keeps every application off the listed nodes. */
  class ExcludeNodes implements SchedulerPolicy {
    readonly name = "exclude-nodes";
    readonly seen: { appId: string; nodeId: string }[] = [];
    constructor(private readonly excluded: Set<string>) {}
    allows(app: AppView, node: NodeView): boolean {
      this.seen.push({ appId: app.appId, nodeId: node.nodeId });
      return !this.excluded.has(node.nodeId);
    }
  }

  /** Keeps one application off one node; everything else is allowed. */
  class KeepAppOffNode implements SchedulerPolicy {
    readonly name = "keep-app-off-node";
    constructor(
      private readonly appId: string,
      private readonly nodeId: string,
    ) {}
    allows(app: AppView, node: NodeView): boolean {
      return !(app.appId === this.appId && node.nodeId === this.nodeId);
    }
  }

  it("grants nothing on a node the policy disallows, however much room it has", () => {
    const policy = new ExcludeNodes(new Set(["n1"]));
    const s = newScheduler(policy);
    s.addNode("n1", res(16000, 8192));
    s.addNode("n2", res(4000, 8192));
    s.addApp("app1", 1);
    s.setAsks("app1", [{ priority: 0, resource: res(1000), count: 5 }]);
    expect(s.allocateOnNode("n1")).toEqual([]);
    expect(s.outstanding("app1")).toBe(5);
    expect(policy.seen).toContainEqual({ appId: "app1", nodeId: "n1" });
    const onN2 = s.allocateOnNode("n2");
    expect(onN2).toHaveLength(3);
    expect(onN2.every((a) => a.nodeId === "n2")).toBe(true);
  });

  it("lets a later application use a node the policy keeps an earlier one off", () => {
    const s = newScheduler(new KeepAppOffNode("early", "n1"));
    s.addNode("n1", res(4000, 8192));
    s.addApp("early", 1);
    s.addApp("late", 2);
    s.setAsks("early", [{ priority: 0, resource: res(1000), count: 3 }]);
    s.setAsks("late", [{ priority: 0, resource: res(1000), count: 3 }]);
    expect(countBy(s.allocateOnNode("n1"), (a) => a.appId)).toEqual({ late: 3 });
    expect(s.outstanding("early")).toBe(3);
  });

  it("shows the policy the node's capacity, primary usage, allocation and headroom", () => {
    const views: NodeView[] = [];
    const policy: SchedulerPolicy = {
      name: "recording",
      allows(_app, node) {
        views.push(node);
        return true;
      },
    };
    const s = newScheduler(policy);
    s.addNode("n1", res(4000, 8192), "/rack-7");
    s.updatePrimaryUsage("n1", res(1000, 1000));
    s.addApp("app1", 1);
    s.setAsks("app1", [{ priority: 0, resource: res(1000, 100), count: 1 }]);
    s.allocateOnNode("n1");
    expect(views[0]).toMatchObject({
      nodeId: "n1",
      rack: "/rack-7",
      capacity: { vcoresMilli: 4000, memoryMb: 8192 },
      primaryUsage: { vcoresMilli: 1000, memoryMb: 1000 },
      allocated: { vcoresMilli: 0, memoryMb: 0 },
      headroom: { vcoresMilli: 2600, memoryMb: 7192 },
      containers: 0,
    });
  });
});

describe("maxAmShare: job managers hold at most a share of the harvestable cores", () => {
  const am = (s: Scheduler, appId: string, order: number): void => {
    s.addApp(appId, order);
    s.setAsks(appId, [{ priority: AM_PRIORITY, resource: res(500), count: 1 }]);
  };

  it("grants a second job manager only when it fits in the share, and always one", () => {
    const s = newScheduler(new StockSchedulerPolicy(), {
      reserveFraction: 0,
      maxAllocationsPerHeartbeat: 0,
      maxAmShare: 0.1,
    });
    s.addNode("n1", res(4000, 8192));
    s.addNode("n2", res(4000, 8192));
    am(s, "a1", 1);
    am(s, "a2", 2);
    // 10 % of 8 harvestable cores is 800 milli: one 500-milli job manager fits, two do not.
    const first = s.allocateOnNode("n1");
    expect(first.map((a) => a.appId)).toEqual(["a1"]);
    expect(s.allocateOnNode("n2")).toEqual([]);
    // Task asks are not limited.
    s.setAsks("a1", [{ priority: 0, resource: res(1000), count: 3 }]);
    expect(s.allocateOnNode("n2").map((a) => a.appId)).toEqual(["a1", "a1", "a1"]);
    // When the first job manager ends, the second one is granted.
    s.release(first[0]!.containerId);
    expect(s.allocateOnNode("n1").map((a) => a.appId)).toEqual(["a2"]);
    // A primary that takes nearly everything still leaves room for one job manager.
    const t = newScheduler(new StockSchedulerPolicy(), {
      reserveFraction: 0,
      maxAllocationsPerHeartbeat: 0,
      maxAmShare: 0.1,
    });
    t.addNode("n1", res(4000, 8192));
    t.updatePrimaryUsage("n1", res(3400, 0));
    am(t, "b1", 1);
    expect(t.allocateOnNode("n1").map((a) => a.appId)).toEqual(["b1"]);
  });

  it("limits job managers to a tenth of the harvestable cores by default, and grants every one that fits at 1", () => {
    const limited = newScheduler(new StockSchedulerPolicy(), { reserveFraction: 0, maxAllocationsPerHeartbeat: 0 });
    for (let n = 1; n <= 5; n++) limited.addNode(`n${n}`, res(4000, 8192));
    for (let i = 1; i <= 4; i++) am(limited, `a${i}`, i);
    // 10 % of 20 harvestable cores is 2,000 milli: four 500-milli job managers, not a fifth.
    am(limited, "a5", 5);
    expect([1, 2, 3, 4, 5].flatMap((n) => limited.allocateOnNode(`n${n}`)).map((a) => a.appId)).toEqual([
      "a1",
      "a2",
      "a3",
      "a4",
    ]);
    const unlimited = newScheduler(new StockSchedulerPolicy(), {
      reserveFraction: 0,
      maxAllocationsPerHeartbeat: 0,
      maxAmShare: 1,
    });
    unlimited.addNode("n1", res(4000, 8192));
    for (let i = 1; i <= 4; i++) am(unlimited, `a${i}`, i);
    expect(unlimited.allocateOnNode("n1")).toHaveLength(4);
  });
});

describe("job-manager placement memory (AM blacklisting)", () => {
  it("sends a job's next job manager to another node than the one it failed on", () => {
    const s = newScheduler();
    s.addNode("a", res(4000, 4096));
    s.addNode("b", res(4000, 4096));
    s.addApp("app1", 1);
    s.setAmAvoid("app1", ["a"]);
    s.setAsks("app1", [{ priority: AM_PRIORITY, resource: res(500), count: 1 }]);
    expect(s.allocateOnNode("a")).toEqual([]);
    expect(s.allocateOnNode("b").map((x) => x.nodeId)).toEqual(["b"]);
  });

  it("still places it when every node is on the list, rather than starve the job", () => {
    const s = newScheduler();
    s.addNode("a", res(4000, 4096));
    s.addApp("app1", 1);
    s.setAmAvoid("app1", ["a"]);
    s.setAsks("app1", [{ priority: AM_PRIORITY, resource: res(500), count: 1 }]);
    expect(s.allocateOnNode("a").map((x) => x.nodeId)).toEqual(["a"]);
  });

  it("lets tasks use an avoided node: only the job manager stays away", () => {
    const s = newScheduler();
    s.addNode("a", res(4000, 4096));
    s.addNode("b", res(4000, 4096));
    s.addApp("app1", 1);
    s.setAmAvoid("app1", ["a"]);
    s.setAsks("app1", [{ priority: 0, resource: res(1000), count: 2 }]);
    expect(s.allocateOnNode("a")).toHaveLength(2);
  });
});

describe("servers a job's tasks avoid after a preemption notice", () => {
  it("keeps the job's tasks off them while another server has room, and lets other jobs and its job manager use them", () => {
    const s = newScheduler();
    s.addNode("a", res(4000, 4096));
    s.addNode("b", res(4000, 4096));
    s.addApp("app1", 1);
    s.addApp("app2", 2);
    s.setTaskAvoid("app1", ["a"]);
    s.setAsks("app1", [
      { priority: AM_PRIORITY, resource: res(500), count: 1 },
      { priority: 0, resource: res(1000), count: 2 },
    ]);
    s.setAsks("app2", [{ priority: 0, resource: res(1000), count: 1 }]);
    const onA = s.allocateOnNode("a");
    expect(onA.map((x) => `${x.appId}:${x.priority}`).sort()).toEqual(["app1:-1", "app2:0"]);
    expect(s.allocateOnNode("b").map((x) => `${x.appId}:${x.priority}`)).toEqual(["app1:0", "app1:0"]);
  });

  it("places the tasks when every server is on the list, and forgets a list replaced by an empty one", () => {
    const s = newScheduler();
    s.addNode("a", res(4000, 4096));
    s.addApp("app1", 1);
    s.setTaskAvoid("app1", ["a"]);
    s.setAsks("app1", [{ priority: 0, resource: res(1000), count: 1 }]);
    expect(s.allocateOnNode("a")).toHaveLength(1);
    s.addNode("b", res(4000, 4096));
    s.setTaskAvoid("app1", ["a"]);
    s.setAsks("app1", [{ priority: 0, resource: res(1000), count: 1 }]);
    expect(s.allocateOnNode("a")).toEqual([]);
    s.setTaskAvoid("app1", []);
    expect(s.allocateOnNode("a")).toHaveLength(1);
  });
});

describe("recovering allocations a node reports after a restart", () => {
  it("counts a recovered container against its node and job, once", () => {
    const s = newScheduler();
    s.addNode("a", res(4000, 4096));
    s.addApp("app1", 1);
    const alloc = { containerId: "c-old", appId: "app1", nodeId: "a", priority: 0, resource: res(1000, 100) };
    expect(s.recover(alloc)).toBe(true);
    expect(s.recover(alloc)).toBe(false);
    expect(s.nodeView("a")?.allocated.vcoresMilli).toBe(1000);
    expect(s.allocatedMilliOf("app1")).toBe(1000);
    expect(s.release("c-old")?.nodeId).toBe("a");
    expect(s.nodeView("a")?.allocated.vcoresMilli).toBe(0);
  });

  it("refuses a container of an unknown node or job", () => {
    const s = newScheduler();
    s.addNode("a", res(4000, 4096));
    s.addApp("app1", 1);
    expect(s.recover({ containerId: "x", appId: "app1", nodeId: "zz", priority: 0, resource: res(1) })).toBe(false);
    expect(s.recover({ containerId: "y", appId: "nope", nodeId: "a", priority: 0, resource: res(1) })).toBe(false);
  });
});
