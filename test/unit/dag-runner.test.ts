import { describe, expect, it } from "vitest";
import type { DagSpec } from "../../common/dag-spec.js";
import { parseDag } from "../../common/dag-spec.js";
import { DagRunner } from "../../jobmanager/dag-runner.js";

function vertex(name: string, parallelism: number): Record<string, unknown> {
  return {
    name,
    parallelism,
    command: ["node", "task.js"],
    resources: { vcores: 0.5, memoryMb: 128 },
  };
}

/** A DAG of independent vertices of `name:parallelism`, parsed as the job manager parses a submitted one. */
function independent(name: string, ...vertices: [string, number][]): DagSpec {
  return parseDag(JSON.stringify({ name, vertices: vertices.map(([v, n]) => vertex(v, n)) }));
}

/** map (3 tasks) -> reduce (2 tasks). */
function mapReduce(): DagSpec {
  return parseDag(
    JSON.stringify({
      name: "wordcount",
      vertices: [vertex("map", 3), vertex("reduce", 2)],
      edges: [{ from: "map", to: "reduce", type: "scatter-gather" }],
    }),
  );
}

/** left and right (1 task each) both feed join (1 task). */
function diamond(): DagSpec {
  return parseDag(
    JSON.stringify({
      name: "join",
      vertices: [vertex("left", 1), vertex("right", 1), vertex("join", 1)],
      edges: [
        { from: "left", to: "join", type: "scatter-gather" },
        { from: "right", to: "join", type: "broadcast" },
      ],
    }),
  );
}

/** Pending counts per vertex name, as the runner asks for them. */
function asked(runner: DagRunner): Record<string, number> {
  return Object.fromEntries(runner.asks().map((a) => [a.vertex.name, a.count]));
}

let nextContainer = 0;
/** Runs one attempt of some pending task of `vertexName` to `end`; returns the task index and the verdict. */
function runOnce(runner: DagRunner, vertexName: string, end: Parameters<DagRunner["ended"]>[1], diagnostics = "") {
  const containerId = `container-${++nextContainer}`;
  const task = runner.assign(containerId, runner.priorityOf(vertexName));
  if (!task) throw new Error(`no pending task of ${vertexName} to run`);
  runner.launched(containerId);
  const verdict = runner.ended(containerId, end, diagnostics, `/out/${vertexName}/${task.index}`);
  return { index: task.index, verdict };
}

function succeedAll(runner: DagRunner, vertexName: string, parallelism: number): void {
  for (let i = 0; i < parallelism; i++) runOnce(runner, vertexName, "SUCCEEDED");
}

describe("DagRunner asks", () => {
  it("asks only for the source vertices at the start, one container per task", () => {
    const runner = new DagRunner(mapReduce());
    expect(asked(runner)).toEqual({ map: 3 });
  });

  it("gives upstream vertices a lower priority number than their consumers", () => {
    const runner = new DagRunner(mapReduce());
    expect(runner.priorityOf("map")).toBeLessThan(runner.priorityOf("reduce"));
  });

  it("asks for a vertex only once every one of its inputs has succeeded", () => {
    const runner = new DagRunner(diamond());
    expect(asked(runner)).toEqual({ left: 1, right: 1 });
    runOnce(runner, "left", "SUCCEEDED");
    expect(asked(runner)).toEqual({ right: 1 });
    runOnce(runner, "right", "SUCCEEDED");
    expect(asked(runner)).toEqual({ join: 1 });
  });

  it("does not ask for a consumer while some producer tasks have not succeeded", () => {
    const runner = new DagRunner(mapReduce());
    runOnce(runner, "map", "SUCCEEDED");
    runOnce(runner, "map", "SUCCEEDED");
    expect(asked(runner)).toEqual({ map: 1 });
  });

  it("stops asking for tasks that hold a container", () => {
    const runner = new DagRunner(mapReduce());
    runner.assign("c1", runner.priorityOf("map"));
    runner.assign("c2", runner.priorityOf("map"));
    expect(asked(runner)).toEqual({ map: 1 });
  });

  it("asks for nothing once every task has succeeded", () => {
    const runner = new DagRunner(mapReduce());
    succeedAll(runner, "map", 3);
    succeedAll(runner, "reduce", 2);
    expect(runner.asks()).toEqual([]);
    expect(runner.succeeded).toBe(true);
  });
});

describe("DagRunner.assign", () => {
  it("hands each container to a different pending task of the vertex at that priority", () => {
    const runner = new DagRunner(mapReduce());
    const p = runner.priorityOf("map");
    const tasks = ["c1", "c2", "c3"].map((id) => runner.assign(id, p));
    expect(tasks.map((t) => t?.vertex)).toEqual(["map", "map", "map"]);
    expect(new Set(tasks.map((t) => t?.index))).toEqual(new Set([0, 1, 2]));
    expect(tasks.every((t) => t?.state === "LAUNCHING")).toBe(true);
    expect(runner.taskOf("c2")).toBe(tasks[1]);
    expect(runner.activeContainers().sort()).toEqual(["c1", "c2", "c3"]);
  });

  it("returns undefined for a container at a vertex that is not runnable yet", () => {
    const runner = new DagRunner(mapReduce());
    expect(runner.assign("c1", runner.priorityOf("reduce"))).toBeUndefined();
    expect(runner.taskOf("c1")).toBeUndefined();
  });

  it("returns undefined for a container beyond the vertex's pending tasks", () => {
    const runner = new DagRunner(mapReduce());
    const p = runner.priorityOf("map");
    for (const id of ["c1", "c2", "c3"]) expect(runner.assign(id, p)).toBeDefined();
    expect(runner.assign("c4", p)).toBeUndefined();
  });

  it("returns undefined for a priority no vertex has", () => {
    const runner = new DagRunner(mapReduce());
    expect(runner.assign("c1", 99)).toBeUndefined();
  });

  it("marks the task running once its container has launched", () => {
    const runner = new DagRunner(mapReduce());
    const task = runner.assign("c1", runner.priorityOf("map"));
    runner.launched("c1");
    expect(task?.state).toBe("RUNNING");
  });
});

describe("DagRunner attempt ends", () => {
  it.each([
    ["killed by a primary spike", "PREEMPTED_BY_PRIMARY", { preemptions: 1 }],
    ["killed to keep its server under a power budget", "PREEMPTED_BY_POWER", { preemptions: 1 }],
    ["lost with its node", "LOST", { losses: 1 }],
    ["whose container the resource manager released", "RELEASED", {}],
  ] as const)("re-runs a task %s without counting a failure", (_what, cause, counts) => {
    const runner = new DagRunner(mapReduce());
    const { index, verdict } = runOnce(runner, "map", cause);
    expect(verdict).toEqual({ kind: "retry", counted: false });
    expect(runner.task("map", index)).toMatchObject({ state: "PENDING", failures: 0, ...counts });
    expect(asked(runner)).toEqual({ map: 3 });
  });

  it("never fails the job however often a task is preempted, lost or released", () => {
    const runner = new DagRunner(mapReduce());
    for (let i = 0; i < 10; i++) {
      expect(runOnce(runner, "map", "PREEMPTED_BY_PRIMARY").verdict.kind).toBe("retry");
      expect(runOnce(runner, "map", "LOST").verdict.kind).toBe("retry");
      expect(runOnce(runner, "map", "RELEASED").verdict.kind).toBe("retry");
    }
    expect(runner.failure).toBeUndefined();
    expect(asked(runner)).toEqual({ map: 3 });
  });

  it("counts a real failure and re-runs the task", () => {
    const runner = new DagRunner(mapReduce());
    const { index, verdict } = runOnce(runner, "map", "FAILED", "exit code 1");
    expect(verdict).toEqual({ kind: "retry", counted: true });
    expect(runner.task("map", index)).toMatchObject({ state: "PENDING", failures: 1, lastDiagnostics: "exit code 1" });
    expect(asked(runner)).toEqual({ map: 3 });
  });

  it("fails the job on the fourth failure of one task, naming the task", () => {
    const dag = independent("one", ["solo", 1]);
    const runner = new DagRunner(dag);
    for (let i = 0; i < 3; i++)
      expect(runOnce(runner, "solo", "FAILED", `boom ${i}`).verdict).toEqual({ kind: "retry", counted: true });
    expect(runner.failure).toBeUndefined();
    const { verdict } = runOnce(runner, "solo", "FAILED", "boom 3");
    expect(verdict.kind).toBe("job-failed");
    const diagnostics = verdict.kind === "job-failed" ? verdict.diagnostics : "";
    expect(diagnostics).toContain("solo[0]");
    expect(diagnostics).toContain("boom 3");
    expect(runner.failure).toBe(diagnostics);
  });

  it("does not add up failures of different tasks towards the limit", () => {
    const runner = new DagRunner(mapReduce());
    // Three failures of each of two different tasks: six in all, none at four.
    const p = runner.priorityOf("map");
    for (let round = 0; round < 3; round++) {
      const a = runner.assign(`a${round}`, p);
      const b = runner.assign(`b${round}`, p);
      expect([a?.index, b?.index]).toEqual([0, 1]);
      expect(runner.ended(`a${round}`, "FAILED", "x").kind).toBe("retry");
      expect(runner.ended(`b${round}`, "FAILED", "x").kind).toBe("retry");
    }
    expect(runner.failure).toBeUndefined();
    expect(runner.totals().taskFailures).toBe(6);
  });

  it("asks for and assigns nothing more once the job has failed", () => {
    const dag = independent("one", ["solo", 1], ["other", 2]);
    const runner = new DagRunner(dag);
    for (let i = 0; i < 4; i++) runOnce(runner, "solo", "FAILED");
    expect(runner.asks()).toEqual([]);
    expect(runner.assign("late", runner.priorityOf("other"))).toBeUndefined();
  });

  it("keeps the first failure's diagnostics when a second task also exhausts its attempts", () => {
    const dag = independent("two", ["a", 1], ["b", 1]);
    const runner = new DagRunner(dag);
    // Interleave so that both tasks reach their fourth failure; a fails first.
    for (let i = 0; i < 3; i++) {
      for (const v of ["a", "b"]) {
        const id = `${v}-${i}`;
        runner.assign(id, runner.priorityOf(v));
        runner.ended(id, "FAILED", `${v} broke`);
      }
    }
    runner.assign("a-last", runner.priorityOf("a"));
    runner.assign("b-last", runner.priorityOf("b"));
    const first = runner.ended("a-last", "FAILED", "a broke");
    const second = runner.ended("b-last", "FAILED", "b broke");
    expect(first.kind).toBe("job-failed");
    expect(second.kind).toBe("job-failed");
    expect(runner.failure).toContain("a[0]");
    expect(second.kind === "job-failed" ? second.diagnostics : "").toContain("a[0]");
  });

  it("records a success with its output directory and does not run the task again", () => {
    const runner = new DagRunner(mapReduce());
    const task = runner.assign("c1", runner.priorityOf("map"));
    expect(runner.ended("c1", "SUCCEEDED", "", "/data/map-0")).toEqual({ kind: "succeeded" });
    expect(runner.outputDirOf("map", task!.index)).toBe("/data/map-0");
    expect(runner.task("map", task!.index)?.state).toBe("SUCCEEDED");
    expect(asked(runner)).toEqual({ map: 2 });
  });

  it("reports the job killed when a user killed a task's container", () => {
    const runner = new DagRunner(mapReduce());
    expect(runOnce(runner, "map", "KILLED_BY_USER").verdict).toEqual({ kind: "job-killed" });
  });

  it("ignores the end of a container it does not know or has already seen end", () => {
    const runner = new DagRunner(mapReduce());
    expect(runner.ended("stranger", "FAILED", "")).toEqual({ kind: "unknown" });
    runner.assign("c1", runner.priorityOf("map"));
    runner.ended("c1", "FAILED", "");
    expect(runner.ended("c1", "FAILED", "")).toEqual({ kind: "unknown" });
    expect(runner.totals().taskFailures).toBe(1);
    expect(runner.activeContainers()).toEqual([]);
  });

  it("fails the job after ten launch failures of one task but retries before that without counting a failure", () => {
    const dag = independent("one", ["solo", 1]);
    const runner = new DagRunner(dag);
    for (let i = 0; i < 9; i++)
      expect(runOnce(runner, "solo", "LAUNCH_FAILED").verdict).toEqual({ kind: "retry", counted: false });
    expect(runner.task("solo", 0)?.failures).toBe(0);
    const last = runOnce(runner, "solo", "LAUNCH_FAILED").verdict;
    expect(last.kind).toBe("job-failed");
    expect(last.kind === "job-failed" ? last.diagnostics : "").toContain("solo[0]");
  });
});

describe("DagRunner.replay", () => {
  it("does not ask again for a task the journal says succeeded, and keeps its output", () => {
    const runner = new DagRunner(mapReduce());
    expect(runner.replay("map", 1, "SUCCEEDED", "", "/data/map-1")).toEqual({ kind: "succeeded" });
    expect(asked(runner)).toEqual({ map: 2 });
    expect(runner.outputDirOf("map", 1)).toBe("/data/map-1");
    const p = runner.priorityOf("map");
    const indexes = [runner.assign("c1", p)?.index, runner.assign("c2", p)?.index];
    expect(indexes.sort()).toEqual([0, 2]);
    expect(runner.assign("c3", p)).toBeUndefined();
  });

  it("makes downstream vertices runnable when the journal shows all their inputs succeeded", () => {
    const runner = new DagRunner(mapReduce());
    for (let i = 0; i < 3; i++) runner.replay("map", i, "SUCCEEDED", "", `/data/map-${i}`);
    expect(asked(runner)).toEqual({ reduce: 2 });
  });

  it("carries over the counts of earlier attempts", () => {
    const runner = new DagRunner(mapReduce());
    runner.replay("map", 0, "FAILED", "e1");
    runner.replay("map", 0, "PREEMPTED_BY_PRIMARY", "");
    runner.replay("map", 0, "LOST", "");
    runner.replay("map", 0, "SUCCEEDED", "", "/data/map-0");
    runner.replay("map", 2, "FAILED", "e2");
    expect(runner.totals()).toEqual({ tasksRun: 5, tasksPreempted: 1, tasksLost: 1, taskFailures: 2 });
  });

  it("counts journalled failures towards the limit, so the job fails on the fourth in all", () => {
    const dag = independent("one", ["solo", 1]);
    const runner = new DagRunner(dag);
    for (let i = 0; i < 3; i++) runner.replay("solo", 0, "FAILED", "old");
    const { verdict } = runOnce(runner, "solo", "FAILED", "new");
    expect(verdict.kind).toBe("job-failed");
  });

  it("ignores a journal entry for a task already marked succeeded or for a task that does not exist", () => {
    const runner = new DagRunner(mapReduce());
    runner.replay("map", 0, "SUCCEEDED", "", "/data/first");
    expect(runner.replay("map", 0, "FAILED", "late")).toEqual({ kind: "unknown" });
    expect(runner.replay("map", 7, "SUCCEEDED", "")).toEqual({ kind: "unknown" });
    expect(runner.task("map", 0)).toMatchObject({ state: "SUCCEEDED", failures: 0, outputDir: "/data/first" });
    expect(runner.totals().tasksRun).toBe(1);
  });
});

describe("DagRunner reports", () => {
  it("totals every attempt started and every preemption, loss and failure", () => {
    const runner = new DagRunner(mapReduce());
    runOnce(runner, "map", "PREEMPTED_BY_PRIMARY");
    runOnce(runner, "map", "PREEMPTED_BY_PRIMARY");
    runOnce(runner, "map", "LOST");
    runOnce(runner, "map", "FAILED");
    runOnce(runner, "map", "RELEASED");
    runner.assign("still-running", runner.priorityOf("map"));
    expect(runner.totals()).toEqual({ tasksRun: 6, tasksPreempted: 2, tasksLost: 1, taskFailures: 1 });
  });

  it("reports every vertex waiting before any container is granted", () => {
    const runner = new DagRunner(mapReduce());
    expect(runner.progress()).toEqual([
      {
        name: "map",
        total: 3,
        succeeded: 0,
        running: 0,
        preempted: 0,
        failedAttempts: 0,
        lost: 0,
        state: "WAITING",
        nodeLocal: 0,
        rackLocal: 0,
        offSwitch: 0,
      },
      {
        name: "reduce",
        total: 2,
        succeeded: 0,
        running: 0,
        preempted: 0,
        failedAttempts: 0,
        lost: 0,
        state: "WAITING",
        nodeLocal: 0,
        rackLocal: 0,
        offSwitch: 0,
      },
    ]);
  });

  it("reports a vertex running while its tasks hold containers, with their counts", () => {
    const runner = new DagRunner(mapReduce());
    runOnce(runner, "map", "SUCCEEDED");
    runOnce(runner, "map", "PREEMPTED_BY_PRIMARY");
    runOnce(runner, "map", "LOST");
    runOnce(runner, "map", "FAILED");
    runner.assign("c-launching", runner.priorityOf("map"));
    runner.assign("c-running", runner.priorityOf("map"));
    runner.launched("c-running");
    const [map, reduce] = runner.progress();
    expect(map).toEqual({
      name: "map",
      total: 3,
      succeeded: 1,
      running: 2,
      preempted: 1,
      failedAttempts: 1,
      lost: 1,
      state: "RUNNING",
      nodeLocal: 0,
      rackLocal: 0,
      offSwitch: 0,
    });
    expect(reduce?.state).toBe("WAITING");
  });

  it("reports a vertex running when some tasks succeeded and the rest wait for containers again", () => {
    const runner = new DagRunner(mapReduce());
    runOnce(runner, "map", "SUCCEEDED");
    runOnce(runner, "map", "PREEMPTED_BY_PRIMARY");
    expect(runner.progress()[0]).toMatchObject({ name: "map", running: 0, succeeded: 1, state: "RUNNING" });
  });

  it("reports a vertex succeeded once all its tasks have, and the consumer still waiting", () => {
    const runner = new DagRunner(mapReduce());
    succeedAll(runner, "map", 3);
    const [map, reduce] = runner.progress();
    expect(map).toMatchObject({ succeeded: 3, state: "SUCCEEDED" });
    expect(reduce).toMatchObject({ succeeded: 0, state: "WAITING" });
  });

  it("reports the vertex whose task exhausted its attempts as failed", () => {
    const runner = new DagRunner(mapReduce());
    for (let i = 0; i < 4; i++) runOnce(runner, "map", "FAILED");
    const [map, reduce] = runner.progress();
    expect(map).toMatchObject({ failedAttempts: 4, state: "FAILED" });
    expect(reduce?.state).toBe("WAITING");
  });
});
