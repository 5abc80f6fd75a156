/**
 * Data-local placement: delay scheduling in the scheduler (node, then rack after the node delay, then any), the stock
 * baseline beside it, the job manager's splits of a DFS input, and harvest/task's line splits.
 */
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import type { Clock } from "../../common/clock.js";
import type { Resources } from "../../common/resource.js";
import { LocalityPolicy } from "../../resourcemanager/policy/locality.js";
import type { LocalityDemand, LocalityPolicyName } from "../../resourcemanager/policy/locality.js";
import { Scheduler, StockSchedulerPolicy } from "../../resourcemanager/policy/scheduler.js";
import type { Allocation } from "../../resourcemanager/policy/scheduler.js";
import { netAsks, widestStageTasks } from "../../resourcemanager/app-submission.js";
import { computeSplits } from "../../jobmanager/input-splits.js";
import type { SplitFile } from "../../jobmanager/input-splits.js";
import { lineBounds, readSplit } from "../../task/splits.js";
import type { InputSplit } from "../../common/task-contract.js";
import { dagToJson, DEFAULT_MAX_PARALLELISM, parseDag } from "../../common/dag-spec.js";
import { withSplitParallelism } from "../../common/dag-input.js";
import { DagRunner } from "../../jobmanager/dag-runner.js";
import { progressLines } from "../../cli/format.js";
import type { JobReport } from "../../client/job-client.js";

const TASK: Resources = { vcoresMilli: 1000, memoryMb: 100 };

class ManualClock implements Clock {
  now = 1_000_000;
  nowMs(): number {
    return this.now;
  }
}

/** Four 2-core nodes in two racks: n1, n2 in /r1; n3, n4 in /r2. */
function cluster(policy: LocalityPolicyName, clock: Clock): Scheduler {
  let seq = 0;
  const s = new Scheduler(
    new StockSchedulerPolicy(),
    {
      reserveFraction: 0,
      maxAllocationsPerHeartbeat: 0,
      locality: new LocalityPolicy({ policy, nodeDelayMs: 3000, rackDelayMs: 3000 }, clock),
    },
    (appId) => `${appId}/c${++seq}`,
  );
  for (const [n, rack] of [
    ["n1", "/r1"],
    ["n2", "/r1"],
    ["n3", "/r2"],
    ["n4", "/r2"],
  ] as const)
    s.addNode(n, { vcoresMilli: 2000, memoryMb: 4096 }, rack);
  return s;
}

function demand(nodes: Record<string, number>, racks: Record<string, number>, located: number): LocalityDemand {
  return { nodes: new Map(Object.entries(nodes)), racks: new Map(Object.entries(racks)), located };
}

describe("delay scheduling in the scheduler", () => {
  it("passes over a node without the task's data until the node delay, then takes its rack, then any node", () => {
    const clock = new ManualClock();
    const s = cluster("delay", clock);
    s.addApp("a", 1);
    // One task whose split lives on n1 only.
    s.setAsks("a", [{ priority: 0, resource: TASK, count: 1, locality: demand({ n1: 1 }, { "/r1": 1 }, 1) }]);
    expect(s.allocateOnNode("n3")).toEqual([]);
    expect(s.allocateOnNode("n2")).toEqual([]);
    clock.now += 2999;
    expect(s.allocateOnNode("n2")).toEqual([]);
    clock.now += 1;
    // The node delay is over: its rack (n2) will do, another rack (n4) not yet.
    expect(s.allocateOnNode("n4")).toEqual([]);
    const [rackLocal] = s.allocateOnNode("n2");
    expect(rackLocal?.locality).toBe("rack");
  });

  it("gives a node holding the data at once, and after both delays any node", () => {
    const clock = new ManualClock();
    const s = cluster("delay", clock);
    s.addApp("a", 1);
    s.setAsks("a", [{ priority: 0, resource: TASK, count: 1, locality: demand({ n1: 1 }, { "/r1": 1 }, 1) }]);
    expect(s.allocateOnNode("n1").map((a) => a.locality)).toEqual(["node"]);
    s.setAsks("a", [{ priority: 0, resource: TASK, count: 1, locality: demand({ n1: 1 }, { "/r1": 1 }, 1) }]);
    expect(s.allocateOnNode("n4")).toEqual([]);
    clock.now += 5999;
    expect(s.allocateOnNode("n4")).toEqual([]);
    clock.now += 1;
    expect(s.allocateOnNode("n4").map((a) => a.locality)).toEqual(["any"]);
  });

  it("keeps the wait across the job manager's repeated asks", () => {
    const clock = new ManualClock();
    const s = cluster("delay", clock);
    s.addApp("a", 1);
    const ask = () => [{ priority: 0, resource: TASK, count: 1, locality: demand({ n1: 1 }, { "/r1": 1 }, 1) }];
    s.setAsks("a", ask());
    expect(s.allocateOnNode("n3")).toEqual([]);
    clock.now += 4000;
    s.setAsks("a", ask());
    expect(s.allocateOnNode("n2").map((a) => a.locality)).toEqual(["rack"]);
  });

  it("gives containers without a preference anywhere at once, and does not hold up the next job", () => {
    const clock = new ManualClock();
    const s = cluster("delay", clock);
    s.addApp("a", 1);
    s.addApp("b", 2);
    s.setAsks("a", [{ priority: 0, resource: TASK, count: 3, locality: demand({ n1: 2 }, { "/r1": 2 }, 2) }]);
    s.setAsks("b", [{ priority: 0, resource: TASK, count: 1 }]);
    const onN3 = s.allocateOnNode("n3");
    // a's one task without data takes a core of n3; its two located tasks wait; b gets the other core.
    expect(onN3.map((x) => [x.appId, x.locality ?? "-"])).toEqual([
      ["a", "-"],
      ["b", "-"],
    ]);
    expect(s.allocateOnNode("n1").map((x) => x.locality)).toEqual(["node", "node"]);
  });

  it("under the stock baseline takes the first node with room", () => {
    const s = cluster("none", new ManualClock());
    s.addApp("a", 1);
    s.setAsks("a", [{ priority: 0, resource: TASK, count: 2, locality: demand({ n1: 2 }, { "/r1": 2 }, 2) }]);
    expect(s.allocateOnNode("n4").map((a) => a.locality)).toEqual(["any", "any"]);
  });

  it("places more tasks on their data under delay than under the baseline, on the same heartbeats", () => {
    // 16 tasks whose splits (replication 1) are all on n1 and n2, nodes heartbeating round-robin every 250 ms, tasks
    // ending 2 s after they start: the baseline hands half of them to n3 and n4, delay waits for n1 and n2.
    const share = (policy: LocalityPolicyName): number => {
      const clock = new ManualClock();
      const s = cluster(policy, clock);
      s.addApp("a", 1);
      const homes = Array.from({ length: 16 }, (_, i) => `n${1 + (i % 2)}`);
      const pending = new Set(homes.keys());
      const running: { alloc: Allocation; endMs: number }[] = [];
      let local = 0;
      for (let beat = 0; pending.size > 0 && beat < 10_000; beat++) {
        clock.now += 250;
        for (const r of running.splice(0).filter((r) => r.endMs > clock.now || !s.release(r.alloc.containerId)))
          running.push(r);
        const nodes: Record<string, number> = {};
        for (const i of pending) nodes[homes[i]!] = (nodes[homes[i]!] ?? 0) + 1;
        const racks: Record<string, number> = {};
        for (const [n, c] of Object.entries(nodes))
          racks[n < "n3" ? "/r1" : "/r2"] = (racks[n < "n3" ? "/r1" : "/r2"] ?? 0) + c;
        s.setAsks("a", [
          { priority: 0, resource: TASK, count: pending.size, locality: demand(nodes, racks, pending.size) },
        ]);
        for (const alloc of s.allocateOnNode(`n${1 + (beat % 4)}`)) {
          const mine = [...pending].find((i) => homes[i] === alloc.nodeId) ?? [...pending][0]!;
          if (homes[mine] === alloc.nodeId) local++;
          pending.delete(mine);
          running.push({ alloc, endMs: clock.now + 2000 });
        }
      }
      return local / 16;
    };
    const delay = share("delay");
    const stock = share("none");
    expect(delay).toBe(1);
    expect(stock).toBeLessThanOrEqual(0.6);
  });
});

describe("netAsks with locality", () => {
  it("takes a container delivered with this answer out of its node's and rack's counts", () => {
    const asks = netAsks(
      [
        {
          priority: 0,
          resource: { vcoresMilli: 1000, memoryMb: 100 },
          count: 2,
          nodes: { n1: 1, n3: 1 },
          racks: { "/r1": 1, "/r2": 1 },
          located: 2,
        },
      ],
      [
        {
          id: "c1",
          nodeId: "n1",
          nmAddress: "",
          resource: null,
          priority: 0,
          token: "",
          jobPriority: 0,
          user: "",
          rack: "/r1",
          epoch: 0,
        },
      ],
      (n) => (n === "n1" ? "/r1" : "/r2"),
    );
    expect(asks[0]?.count).toBe(1);
    expect(Object.fromEntries(asks[0]?.locality?.nodes ?? [])).toEqual({ n3: 1 });
    expect(Object.fromEntries(asks[0]?.locality?.racks ?? [])).toEqual({ "/r2": 1 });
    expect(asks[0]?.locality?.located).toBe(1);
  });
});

function file(path: string, length: number, blockSize: number, hostsOf: (block: number) => string[]): SplitFile {
  const blocks = [];
  for (let off = 0, i = 0; off < length; off += blockSize, i++)
    blocks.push({
      offset: off,
      length: Math.min(blockSize, length - off),
      hosts: hostsOf(i),
      racks: hostsOf(i).map(() => "/r"),
    });
  return { path, length, blockSize, blocks };
}

describe("input splits", () => {
  it("gives one split per block, named by the block's replicas", () => {
    const f = file("dfs:/in/a", 250, 100, (b) => [`n${b + 1}`, `n${b + 2}`]);
    const splits = computeSplits([f], {});
    expect(splits.map((s) => [s.offset, s.length, s.hosts.join(",")])).toEqual([
      [0, 100, "n1,n2"],
      [100, 100, "n2,n3"],
      [200, 50, "n3,n4"],
    ]);
  });

  it("lets the last split of a file take up to 10 % more rather than leave a sliver", () => {
    expect(computeSplits([file("dfs:/a", 105, 100, () => ["n1"])], {}).map((s) => s.length)).toEqual([105]);
    expect(computeSplits([file("dfs:/a", 111, 100, () => ["n1"])], {}).map((s) => s.length)).toEqual([100, 11]);
  });

  it("cuts fixed-length records on a record boundary and skips empty files", () => {
    const splits = computeSplits([file("dfs:/a", 1000, 1000, () => ["n1"]), file("dfs:/b", 0, 1000, () => [])], {
      splitMb: 250 / 1024 / 1024,
      recordBytes: 100,
    });
    expect(splits.map((s) => [s.path, s.offset, s.length])).toEqual([
      ["dfs:/a", 0, 200],
      ["dfs:/a", 200, 200],
      ["dfs:/a", 400, 200],
      ["dfs:/a", 600, 200],
      ["dfs:/a", 800, 200],
    ]);
  });

  it("names the hosts of the block holding most of a split", () => {
    const f = file("dfs:/a", 300, 100, (b) => [`n${b}`]);
    const [first] = computeSplits([f], { splitMb: 150 / 1024 / 1024 });
    expect(first?.hosts).toEqual(["n0"]);
    const second = computeSplits([f], { splitMb: 150 / 1024 / 1024 })[1];
    // [150, 300): 50 bytes of block 1, 100 of block 2.
    expect(second?.hosts).toEqual(["n2"]);
  });
});

describe("line splits", () => {
  it("give every line of a file exactly once, in order, whatever the split size", async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.array(fc.stringMatching(/^[a-z]{0,12}$/), { maxLength: 40 }),
        fc.boolean(),
        fc.integer({ min: 1, max: 50 }),
        async (lines, trailingNewline, splitBytes) => {
          const text = lines.join("\n") + (trailingNewline && lines.length > 0 ? "\n" : "");
          const data = Buffer.from(text);
          const read = (offset: number, length: number): Promise<Buffer> =>
            Promise.resolve(Buffer.from(data.subarray(offset, offset + length)));
          const splits = computeSplits([file("dfs:/t", data.length, 1 << 20, () => [])], {
            splitMb: splitBytes / 1024 / 1024,
          });
          const parts: Buffer[] = [];
          for (const s of splits) parts.push(await readSplit(s as InputSplit, read));
          expect(Buffer.concat(parts).toString()).toBe(text);
        },
      ),
      { numRuns: 300 },
    );
  });

  it("own no line when the split holds only the middle of one", () => {
    const buf = Buffer.from("abcdefghij\nk");
    // The split [3, 6) lies inside the first line.
    expect(lineBounds(buf, 0, 3, 6)).toEqual({ begin: 11, end: 11 });
  });
});

describe("a vertex over a DFS input", () => {
  const dagJson = (
    map: Record<string, unknown>,
    extra: Record<string, unknown>[] = [],
    edges: unknown[] = [],
  ): string =>
    JSON.stringify({
      name: "j",
      vertices: [{ name: "map", command: ["node", "m.js"], resources: { vcores: 1, memoryMb: 128 }, ...map }, ...extra],
      edges,
    });

  it("leaves its parallelism to the splits, and refuses one set beside an input", () => {
    const dag = parseDag(dagJson({ input: { paths: ["dfs:/in/"], recordBytes: 100 } }));
    expect(dag.vertices[0]?.parallelism).toBe(0);
    expect(dag.vertices[0]?.input).toEqual({ paths: ["dfs:/in"], recordBytes: 100 });
    expect(parseDag(dagToJson(dag))).toEqual(dag);
    expect(() => parseDag(dagJson({ parallelism: 3, input: { paths: ["dfs:/in"] } }))).toThrow(
      expect.objectContaining({ code: "DAG_INVALID_FIELD", details: { field: "vertices[0].parallelism" } }),
    );
  });

  it.each([
    [{ paths: [] }, "vertices[0].input.paths"],
    [{ paths: ["/no-scheme"] }, "vertices[0].input.paths[0]"],
    [{ paths: ["dfs:/a/../../etc"] }, "vertices[0].input.paths[0]"],
    [{ paths: ["dfs:/a"], splitMb: 0 }, "vertices[0].input.splitMb"],
    [{ paths: ["dfs:/a"], recordBytes: 1.5 }, "vertices[0].input.recordBytes"],
    [{ paths: ["dfs:/a"], format: "csv" }, "vertices[0].input.format"],
  ])("refuses the input %j naming %s", (input, field) => {
    expect(() => parseDag(dagJson({ input }))).toThrow(
      expect.objectContaining({ details: expect.objectContaining({ field }) }),
    );
  });

  it("gives a one-to-one consumer the input vertex's split count", () => {
    const consumer = { name: "filter", command: ["node", "f.js"], resources: { vcores: 1, memoryMb: 128 } };
    const dag = parseDag(
      dagJson({ input: { paths: ["dfs:/in"] } }, [consumer], [{ from: "map", to: "filter", type: "one-to-one" }]),
    );
    const resolved = withSplitParallelism(dag, new Map([["map", 7]]));
    expect(resolved.vertices.map((v) => v.parallelism)).toEqual([7, 7]);
    // A consumer without an input of its own may not set its count, nor may a vertex without one leave it out.
    expect(() =>
      parseDag(
        dagJson(
          { input: { paths: ["dfs:/in"] } },
          [{ ...consumer, parallelism: 2 }],
          [{ from: "map", to: "filter", type: "one-to-one" }],
        ),
      ),
    ).toThrow(expect.objectContaining({ code: "DAG_INVALID_FIELD" }));
    expect(() => parseDag(dagJson({ parallelism: 1 }, [consumer]))).toThrow(
      expect.objectContaining({ code: "DAG_BAD_PARALLELISM", details: { field: "vertices[1].parallelism" } }),
    );
  });

  it("counts as wide as a vertex may be for admission control until its splits are known", () => {
    const reduce = { name: "r", parallelism: 3, command: ["node", "r.js"], resources: { vcores: 1, memoryMb: 128 } };
    const dag = parseDag(
      dagJson({ input: { paths: ["dfs:/in"] } }, [reduce], [{ from: "map", to: "r", type: "scatter-gather" }]),
    );
    expect(widestStageTasks(dag)).toBe(DEFAULT_MAX_PARALLELISM);
    expect(widestStageTasks(withSplitParallelism(dag, new Map([["map", 2]])))).toBe(3);
  });

  it("runs each task on the server holding its split when it can, and counts how local each start was", () => {
    const dag = withSplitParallelism(parseDag(dagJson({ input: { paths: ["dfs:/in"] } })), new Map([["map", 3]]));
    const at = (hosts: string[], racks: string[], offset: number): InputSplit => ({
      path: "dfs:/in/a",
      offset,
      length: 10,
      fileLength: 30,
      hosts,
      racks,
    });
    const splits = [at(["n1"], ["/r1"], 0), at(["n2"], ["/r1"], 10), at(["n3"], ["/r2"], 20)];
    const runner = new DagRunner(dag, undefined, new Map([["map", splits]]));
    const [ask] = runner.asks();
    expect(ask?.locality).toEqual({ nodes: { n1: 1, n2: 1, n3: 1 }, racks: { "/r1": 2, "/r2": 1 }, located: 3 });
    expect(runner.assign("c1", 0, "n3", "/r2")?.index).toBe(2);
    expect(runner.assign("c2", 0, "n4", "/r1")?.index).toBe(0);
    expect(runner.assign("c3", 0, "n9", "/r9")?.index).toBe(1);
    expect(runner.progress()[0]).toMatchObject({ nodeLocal: 1, rackLocal: 1, offSwitch: 1 });
    // What the job manager journals with each launch, and a later attempt counts again from the journal.
    expect([0, 1, 2].map((i) => runner.task("map", i)?.locality)).toEqual(["rack", "any", "node"]);
    const next = new DagRunner(dag, undefined, new Map([["map", splits]]));
    for (const i of [0, 1, 2]) next.countLocality("map", runner.task("map", i)!.locality!);
    expect(next.progress()[0]).toMatchObject({ nodeLocal: 1, rackLocal: 1, offSwitch: 1 });
  });
});

describe("the node-local share in harvest job status", () => {
  it("is a line under a vertex over an input, and absent for other vertices", () => {
    const vertex = (name: string, nodeLocal: number, rackLocal: number, offSwitch: number) => ({
      name,
      total: 8,
      succeeded: 8,
      running: 0,
      preempted: 0,
      failedAttempts: 0,
      lost: 0,
      state: "SUCCEEDED",
      counters: {},
      nodeLocal,
      rackLocal,
      offSwitch,
    });
    const report = {
      appId: "application_1_0001",
      name: "sort",
      state: "FINISHED",
      submitMs: 1000,
      startMs: 2000,
      finishMs: 9000,
      attempts: 1,
      diagnostics: "",
      containers: [],
      progress: { vertices: [vertex("map", 6, 1, 1), vertex("reduce", 0, 0, 0)] },
    } as unknown as JobReport;
    const lines = progressLines(report, 9000);
    const mapAt = lines.findIndex((l) => l.trimStart().startsWith("map"));
    const reduceAt = lines.findIndex((l) => l.trimStart().startsWith("reduce"));
    const between = lines.slice(mapAt + 1, reduceAt).join("\n");
    expect(between).toContain("input: 6 of 8 task starts node-local (75 %), 1 rack-local, 1 off-switch");
    expect(lines.slice(reduceAt + 1).join("\n")).not.toContain("node-local");
  });
});
