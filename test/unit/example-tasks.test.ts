import { spawn } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parseDag, taskInputs, taskOutputs, TASK_ENV } from "../../common/dag-spec.js";
import type { DagSpec, TaskInput, TaskOutput } from "../../common/dag-spec.js";
import { packageRoot } from "../../common/paths.js";

const root = packageRoot();
const tsx = join(root, "node_modules", ".bin", "tsx");
const corpus = join(root, "examples", "data", "corpus.txt");

interface Run {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** Runs an example task from its TypeScript source, as the node manager would run its compiled form. */
function runTask(script: string, args: string[], env: Record<string, string>): Promise<Run> {
  return new Promise((resolve, reject) => {
    const child = spawn(tsx, [join(root, "examples", "tasks", script), ...args], {
      env: { ...process.env, ...env },
      stdio: ["ignore", "pipe", "pipe"],
    });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (d: Buffer) => (stdout += d.toString()));
    child.stderr.on("data", (d: Buffer) => (stderr += d.toString()));
    child.on("error", reject);
    child.on("close", (code) => resolve({ code, stdout, stderr }));
  });
}

function taskEnv(vertex: string, index: number, outputDir: string, inputs: TaskInput[], outputs: TaskOutput[]) {
  mkdirSync(outputDir, { recursive: true });
  return {
    [TASK_ENV.vertex]: vertex,
    [TASK_ENV.taskIndex]: String(index),
    [TASK_ENV.outputDir]: outputDir,
    [TASK_ENV.inputs]: JSON.stringify(inputs),
    [TASK_ENV.outputs]: JSON.stringify(outputs),
  };
}

/** The DAG's argv after the program: `${HARVEST_HOME}` expanded, the compiled script swapped for its source. */
function commandOf(dag: DagSpec, vertex: string): { script: string; args: string[] } {
  const v = dag.vertices.find((x) => x.name === vertex)!;
  const [node, program, ...args] = v.command.map((a) => a.replaceAll("${HARVEST_HOME}", root));
  expect(node).toBe("node");
  const match = /\/dist\/examples\/tasks\/([a-z-]+)\.js$/.exec(program ?? "");
  expect(match).not.toBeNull();
  return { script: `${match![1]}.ts`, args };
}

function readTsv(file: string): [string, number][] {
  return readFileSync(file, "utf8")
    .split("\n")
    .filter((l) => l !== "")
    .map((l) => {
      const [word, count] = l.split("\t");
      return [word!, Number(count)];
    });
}

/** What cpu-work writes to result.json. */
interface CpuWorkResult {
  vertex: string;
  task: number;
  inputFiles: number;
  inputBytes: number;
  inputDigest: string;
  cpuSeconds: number;
  partitions: number;
}

function readResult(file: string): CpuWorkResult {
  return JSON.parse(readFileSync(file, "utf8")) as CpuWorkResult;
}

let work = "";
beforeAll(() => {
  work = mkdtempSync(join(tmpdir(), "harvest-tasks-"));
});
afterAll(() => rmSync(work, { recursive: true, force: true }));

describe("the word-count example tasks", () => {
  it("count every word of the corpus exactly once through map -> reduce -> merge", async () => {
    const dag = parseDag(readFileSync(join(root, "examples", "dags", "wordcount.json"), "utf8"));
    const out = join(work, "wordcount");
    const dirOf = (vertex: string, i: number): string => join(out, vertex, String(i));

    for (const vertex of ["map", "reduce", "merge"]) {
      const { script, args } = commandOf(dag, vertex);
      const parallelism = dag.vertices.find((v) => v.name === vertex)!.parallelism;
      const runs = await Promise.all(
        Array.from({ length: parallelism }, (_, i) =>
          runTask(
            script,
            args,
            taskEnv(vertex, i, dirOf(vertex, i), taskInputs(dag, vertex, i, dirOf), taskOutputs(dag, vertex)),
          ),
        ),
      );
      for (const run of runs) expect(run, `${vertex}: ${run.stderr}`).toMatchObject({ code: 0 });
    }

    // An independent count: the whole file at once, split on anything that is not a letter or a digit.
    const expected = new Map<string, number>();
    for (const word of readFileSync(corpus, "utf8")
      .toLowerCase()
      .split(/[^\p{L}\p{N}]+/u)) {
      if (word !== "") expected.set(word, (expected.get(word) ?? 0) + 1);
    }
    expect(expected.size).toBeGreaterThan(1000);

    // The reducers partition the words: together they hold every word once, with its full count.
    const reduced = [0, 1].flatMap((i) => readTsv(join(dirOf("reduce", i), "counts.tsv")));
    expect(reduced.length).toBe(expected.size);
    expect(new Map(reduced)).toEqual(expected);

    // The merge keeps the 50 most frequent, ties by word.
    const ranked = [...expected.entries()].sort(([wa, ca], [wb, cb]) => cb - ca || (wa < wb ? -1 : 1));
    expect(readTsv(join(dirOf("merge", 0), "top.tsv"))).toEqual(ranked.slice(0, 50));
  });

  it("exit non-zero with a clear message when a partition is missing or the environment is not set", async () => {
    const empty = join(work, "empty-map");
    mkdirSync(empty, { recursive: true });
    const inputs: TaskInput[] = [{ vertex: "map", edgeType: "scatter-gather", sources: [empty] }];
    const reduce = await runTask("wordcount-reduce.ts", [], taskEnv("reduce", 0, join(work, "bad-reduce"), inputs, []));
    expect(reduce.code).toBe(2);
    expect(reduce.stderr).toMatch(/^wordcount-reduce: cannot read input .*part-0/);

    const map = await runTask("wordcount-map.ts", [corpus, "--splits", "2"], {});
    expect(map.code).toBe(2);
    expect(map.stderr).toMatch(/HARVEST_VERTEX is not set/);
  });
});

describe("the cpu-work example task", () => {
  it("passes data along scatter-gather and one-to-one edges and fails once when given a marker", async () => {
    const out = join(work, "cpu");
    const producer = join(out, "extract", "0");
    const made = await runTask(
      "cpu-work.ts",
      ["--seconds", "0.05", "--output-kb", "2"],
      taskEnv("extract", 0, producer, [], [{ vertex: "transform", edgeType: "scatter-gather", partitions: 2 }]),
    );
    expect(made, made.stderr).toMatchObject({ code: 0 });
    expect(readdirSync(producer).sort()).toEqual(["part-0", "part-1", "result.json"]);
    // CPU time, not wall time: the task measures its own process.cpuUsage(), so this holds on a loaded machine too.
    expect(readResult(join(producer, "result.json")).cpuSeconds).toBeGreaterThanOrEqual(0.05);

    const marker = join(out, "transform-1.failed-once");
    const consumerEnv = taskEnv(
      "transform",
      1,
      join(out, "transform", "1"),
      [{ vertex: "extract", edgeType: "scatter-gather", sources: [producer] }],
      [{ vertex: "load", edgeType: "one-to-one", partitions: 2 }],
    );
    const args = ["--seconds", "0", "--fail-once-marker", marker];
    const first = await runTask("cpu-work.ts", args, consumerEnv);
    expect(first.code).toBe(3);
    expect(first.stderr).toMatch(/injected failure/);
    expect(existsSync(marker)).toBe(true);
    const retry = await runTask("cpu-work.ts", args, consumerEnv);
    expect(retry, retry.stderr).toMatchObject({ code: 0 });
    const result = readResult(join(out, "transform", "1", "result.json"));
    expect(result).toMatchObject({ vertex: "transform", task: 1, inputFiles: 1, partitions: 0 });
    expect(result.inputBytes).toBeGreaterThan(2048);
  });
});
