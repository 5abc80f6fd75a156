import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { alibabaJobToDag, parseAlibabaTasks, readAlibabaJobs } from "../../common/alibaba-dag.js";
import type { AlibabaJob } from "../../common/alibaba-dag.js";
import { maxConcurrency, upstreamOf, vertexLayers } from "../../common/dag-spec.js";
import type { DagSpec } from "../../common/dag-spec.js";
import { HarvestError } from "../../common/errors.js";
import { sharedDataDir } from "../../common/paths.js";

const dataDir = sharedDataDir();
const traceFile = dataDir ? join(dataDir, "alibaba2018_batch_dag_sample", "sample_tasks.csv") : undefined;
if (!dataDir)
  console.warn(
    "alibaba-dag.test: shared data not found (../shared/data or HARVEST_SHARED_DATA); skipping trace checks",
  );

describe.skipIf(traceFile === undefined)("the Alibaba 2018 one-hour sample (facts from its README)", () => {
  let jobs: AlibabaJob[] = [];
  let dags: DagSpec[] = [];

  beforeAll(async () => {
    jobs = await readAlibabaJobs(traceFile!);
    dags = jobs.map((job) => alibabaJobToDag(job, { maxParallelism: 100 }));
  });

  it("holds 16,749 jobs and 67,634 tasks", () => {
    expect(jobs.length).toBe(16_749);
    expect(jobs.reduce((n, j) => n + j.tasks.length, 0)).toBe(67_634);
  });

  it("has 15,478 jobs with DAG-named tasks and 1,271 with only independent tasks", () => {
    const named = jobs.filter((j) => j.tasks.some((t) => t.type !== "task")).length;
    const independent = jobs.filter((j) => j.tasks.every((t) => t.type === "task")).length;
    expect({ named, independent }).toEqual({ named: 15_478, independent: 1_271 });
  });

  it("converts every job to an acyclic DAG with no dangling dependency", () => {
    // alibabaJobToDag validates each DAG, so reaching here means none had a cycle or a dangling reference.
    expect(dags.length).toBe(jobs.length);
    const unplaced = dags.filter((dag) => vertexLayers(dag).flat().length !== dag.vertices.length);
    expect(unplaced).toEqual([]);
  });

  it("turns the 52,833 dependency references into edges, less the 4 repeated in truncated names", () => {
    const references = jobs.reduce(
      (n, j) => n + j.tasks.reduce((m, t) => m + (t.type === "task" ? 0 : t.name.split("_").length - 1), 0),
      0,
    );
    expect(references).toBe(52_833);
    expect(dags.reduce((n, d) => n + d.edges.length, 0)).toBe(52_829);
  });

  it("has DAGs of at most 91 tasks and a critical path of at most 20 (median 3)", () => {
    const named = dags.filter((_, i) => jobs[i]!.tasks.some((t) => t.type !== "task"));
    const depths = named.map((d) => vertexLayers(d).length).sort((a, b) => a - b);
    expect(Math.max(...named.map((d) => d.vertices.length))).toBe(91);
    expect(depths[depths.length - 1]).toBe(20);
    expect(depths[Math.floor(depths.length / 2)]).toBe(3);
  });

  it("reads the first job's dependencies and resources as the trace writes them", () => {
    const job = jobs[0]!;
    expect(job.name).toBe("j_1446403");
    const j25 = job.tasks.find((t) => t.name === "J25_16_18_24")!;
    expect(j25).toMatchObject({
      id: "25",
      type: "J",
      deps: ["16", "18", "24"],
      durationS: 382,
      cpuMilli: 500,
      instances: 9,
    });
    expect(upstreamOf(dags[0]!, "J25").map((e) => e.from)).toEqual(["R16", "R18", "J24"]);
  });

  it("caps parallelism at maxParallelism", () => {
    const widest = Math.max(...dags.flatMap((d) => d.vertices.map((v) => v.parallelism)));
    expect(widest).toBe(100);
    expect(Math.max(...dags.map(maxConcurrency))).toBeLessThanOrEqual(100 * 91);
  });
});

describe("parseAlibabaTasks and alibabaJobToDag on small inputs", () => {
  let dir = "";
  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), "harvest-alibaba-"));
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  const good = [
    "5,j_1,M1,10,100.0,0.5,4",
    "5,j_1,M2,12,50.0,0.3,2",
    "5,j_1,R3_1_2,7,50.0,0.2,1",
    "6,j_2,task_ab+c/d==,3,100.0,1.0,30",
  ];

  it("groups tasks into jobs and builds a scatter-gather DAG with scaled durations", () => {
    const jobs = parseAlibabaTasks(good.join("\n") + "\n");
    expect(jobs.map((j) => [j.name, j.arrivalS, j.tasks.length])).toEqual([
      ["j_1", 5, 3],
      ["j_2", 6, 1],
    ]);
    const dag = alibabaJobToDag(jobs[0]!, {
      maxParallelism: 3,
      durationScale: 0.1,
      command: (task, durationS) => ["work", task.name, String(durationS)],
      maxResource: { vcoresMilli: 750, memoryMb: 100_000 },
    });
    expect(dag.vertices.map((v) => [v.name, v.parallelism, v.command[2], v.resources.vcoresMilli])).toEqual([
      ["M1", 3, "1", 750],
      ["M2", 2, "1.2", 500],
      ["R3", 1, "0.7", 500],
    ]);
    expect(dag.edges).toEqual([
      { from: "M1", to: "R3", type: "scatter-gather" },
      { from: "M2", to: "R3", type: "scatter-gather" },
    ]);
    expect(alibabaJobToDag(jobs[1]!).vertices[0]?.name).toBe("task_ab-c_d");
  });

  it("reports a malformed line with its line number", async () => {
    const cases: [string, string][] = [
      ["5,j_1,M4,abc,100.0,0.5,1", "duration_s"],
      ["5,j_1,M4,10,100.0,0.5", "line"],
      ["5,j_1,M4-x,10,100.0,0.5,1", "task_name"],
      ["5,j_1,M4,10,100.0,0.5,0", "instance_num"],
      ["5,j_1,M1_9,10,100.0,0.5,1", "task_name"],
    ];
    for (const [bad, field] of cases) {
      const file = join(dir, "bad.csv");
      writeFileSync(file, [good[0], good[1], "", bad, good[2]].join("\n"));
      const err = await readAlibabaJobs(file).then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(err).toBeInstanceOf(HarvestError);
      expect((err as HarvestError).code).toBe("TRACE_MALFORMED");
      expect((err as HarvestError).details).toMatchObject({ line: "4", field });
      expect((err as HarvestError).message).toContain("bad.csv:4");
    }
  });

  it("rejects a dependency on a task the job does not have", () => {
    const [job] = parseAlibabaTasks("0,j_9,M1,1,100,1,1\n0,j_9,R2_7,1,100,1,1\n");
    expect(() => alibabaJobToDag(job!)).toThrow(expect.objectContaining({ code: "TRACE_MALFORMED" }));
  });
});
