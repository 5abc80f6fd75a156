/**
 * The compute path end to end with real processes on loopback: resource manager, node managers, job managers and tasks.
 */
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { isHarvestError } from "../../common/errors.js";
import { packageRoot } from "../../common/paths.js";
import { cpuVertex, taskOutputs, startTestCluster, waitForJob } from "./harness.js";
import type { TestCluster } from "./harness.js";
import { chmodSync } from "node:fs";

describe("a cluster with idle primary tenants", () => {
  let c: TestCluster;
  let markers: string;
  beforeAll(async () => {
    c = await startTestCluster({ idleServers: 2 });
    markers = c.work;
    // The flaky task below leaves its marker here, as the containers' unprivileged account.
    chmodSync(markers, 0o1777);
  });
  afterAll(() => c?.stop());

  it("runs a 3-vertex word-count DAG of real processes to a correct result and records it in the job history", async () => {
    const dagJson = readFileSync(join(packageRoot(), "examples", "dags", "wordcount.json"), "utf8");
    const appId = await c.client.submit(dagJson);
    const r = await c.client.waitForCompletion(appId, undefined, 200);
    expect(r.state).toBe("FINISHED");
    expect(r.outcome).toBe("JOB_SUCCEEDED");
    expect(r.progress?.vertices.map((v) => [v.name, v.succeeded])).toEqual([
      ["map", 4],
      ["reduce", 2],
      ["merge", 1],
    ]);

    // The merged top 50 equals a direct count of the corpus.
    const tops = taskOutputs(c.dir, appId, "top.tsv");
    expect(tops).toHaveLength(1);
    const counts = new Map<string, number>();
    const corpus = readFileSync(join(packageRoot(), "examples", "data", "corpus.txt"), "utf8").toLowerCase();
    for (const w of corpus.match(/[\p{L}\p{N}]+/gu) ?? []) counts.set(w, (counts.get(w) ?? 0) + 1);
    const expected = [...counts].sort(([a, x], [b, y]) => y - x || (a < b ? -1 : 1)).slice(0, 50);
    // The tasks' counters, summed per vertex by the job manager: every word read once by the maps, and each distinct
    // word counted by exactly one reducer.
    const counter = (vertex: string, name: string) =>
      r.progress?.vertices.find((v) => v.name === vertex)?.counters[name];
    expect(Number(counter("map", "words"))).toBe([...counts.values()].reduce((a, n) => a + n, 0));
    expect(Number(counter("reduce", "distinct words"))).toBe(counts.size);
    const got = readFileSync(tops[0]!, "utf8")
      .trim()
      .split("\n")
      .map((l) => l.split("\t"))
      .map(([w, n]) => [w, Number(n)]);
    expect(got).toEqual(expected);

    const history = await c.client.history("wordcount");
    expect(history.map((h) => [h.appId, h.outcome])).toContainEqual([appId, "JOB_SUCCEEDED"]);
    expect(history.find((h) => h.appId === appId)?.durationMs).toBeGreaterThan(0);
  });

  it("rejects bad DAGs at submit with their error codes and creates no job", async () => {
    const before = (await c.client.list()).length;
    const cases: [string, string][] = [
      ["{ not json", "DAG_MALFORMED_JSON"],
      [
        JSON.stringify({
          name: "cyc",
          vertices: [cpuVertex("a", 1), cpuVertex("b", 1)],
          edges: [
            { from: "a", to: "b", type: "broadcast" },
            { from: "b", to: "a", type: "broadcast" },
          ],
        }),
        "DAG_CYCLE",
      ],
      [
        JSON.stringify({
          name: "unk",
          vertices: [cpuVertex("a", 1)],
          edges: [{ from: "a", to: "zz", type: "broadcast" }],
        }),
        "DAG_UNKNOWN_VERTEX",
      ],
      [JSON.stringify({ name: "dup", vertices: [cpuVertex("a", 1), cpuVertex("a", 2)] }), "DAG_DUPLICATE_NAME"],
      [JSON.stringify({ name: "par", vertices: [cpuVertex("a", 0)] }), "DAG_BAD_PARALLELISM"],
      [JSON.stringify({ name: "big", vertices: [cpuVertex("a", 1, { vcores: 64 })] }), "DAG_RESOURCES_TOO_LARGE"],
      [
        JSON.stringify({
          name: "o2o",
          vertices: [cpuVertex("a", 2), cpuVertex("b", 3)],
          edges: [{ from: "a", to: "b", type: "one-to-one" }],
        }),
        "DAG_ONE_TO_ONE_MISMATCH",
      ],
    ];
    for (const [dag, code] of cases) {
      const err = await c.client.submit(dag).then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(isHarvestError(err) ? err.code : err, `submitting ${dag.slice(0, 40)}`).toBe(code);
    }
    expect((await c.client.list()).length).toBe(before);
  });

  it("retries a task that fails once and fails the job when a task fails 4 times, naming it", async () => {
    const marker = join(markers, "fail-once-${HARVEST_TASK_INDEX}");
    const flaky = await c.client.submit(
      JSON.stringify({ name: "flaky", vertices: [cpuVertex("f", 2, { extra: ["--fail-once-marker", marker] })] }),
    );
    const ok = await c.client.waitForCompletion(flaky, undefined, 200);
    expect(ok.state).toBe("FINISHED");
    expect(ok.taskContainers?.failed).toBe(2);
    expect(ok.taskContainers?.succeeded).toBe(2);

    const doomed = await c.client.submit(
      JSON.stringify({
        name: "doomed",
        vertices: [cpuVertex("ok", 1), cpuVertex("bad", 1, { extra: ["--fail-rate", "1"] })],
      }),
    );
    const failed = await c.client.waitForCompletion(doomed, undefined, 200);
    expect(failed.state).toBe("FAILED");
    expect(failed.outcome).toBe("JOB_FAILED");
    expect(failed.taskContainers?.failed).toBe(4);
    expect(failed.diagnostics).toContain("bad[0] failed 4 times");
    expect((await c.client.history("doomed"))[0]?.outcome).toBe("JOB_FAILED");
  });

  it("kills a running job and all its containers", async () => {
    const appId = await c.client.submit(
      JSON.stringify({ name: "to-kill", vertices: [cpuVertex("hold", 2, { holdSeconds: 60 })] }),
    );
    await waitForJob(c.client, appId, (r) => r.containers.filter((x) => !x.isAm && x.state === "RUNNING").length === 2);
    expect(await c.client.kill(appId)).toBe("KILLED");
    const r = await c.client.status(appId);
    expect(r.state).toBe("KILLED");
    // Every container ends: the node managers report them complete.
    const done = await waitForJob(c.client, appId, (x) => x.containers.every((k) => k.state === "COMPLETE"), {
      timeoutMs: 20_000,
      stopOnEnd: false,
    });
    expect(done.containers.map((k) => k.cause).sort()).toEqual(["KILLED_BY_USER", "KILLED_BY_USER", "KILLED_BY_USER"]);
    expect((await c.client.history("to-kill"))[0]?.outcome).toBe("JOB_KILLED");
  });
});
