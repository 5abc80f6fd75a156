import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import {
  dagToJson,
  downstreamOf,
  maxConcurrency,
  parseDag,
  taskInputs,
  taskOutputs,
  topologicalOrder,
  upstreamOf,
  validateDag,
  vertexLayers,
} from "../../common/dag-spec.js";
import type { DagLimits } from "../../common/dag-spec.js";
import { detailsOf, HarvestError } from "../../common/errors.js";
import type { ErrorCode } from "../../common/errors.js";
import { packageRoot } from "../../common/paths.js";

type RawVertex = Record<string, unknown>;

function vertex(name: string, parallelism = 1, extra: Record<string, unknown> = {}): RawVertex {
  return { name, parallelism, command: ["node", "task.js"], resources: { vcores: 1, memoryMb: 256 }, ...extra };
}

function dagJson(vertices: unknown[], edges?: unknown[], extra: Record<string, unknown> = {}): string {
  return JSON.stringify({ name: "job", vertices, ...(edges ? { edges } : {}), ...extra });
}

/** The HarvestError `parseDag` throws for `json`, checked for its code and the field it names. */
function rejection(
  json: string,
  code: Extract<ErrorCode, `DAG_${string}`>,
  field: string,
  limits?: DagLimits,
): HarvestError {
  let caught: unknown;
  try {
    parseDag(json, limits);
  } catch (err) {
    caught = err;
  }
  expect(caught).toBeInstanceOf(HarvestError);
  const err = caught as HarvestError;
  expect({ code: err.code, field: detailsOf(err, code)?.field }).toEqual({
    code,
    field,
  });
  return err;
}

function shape(parallelisms: Record<string, number>, edges: [string, string][]): string {
  return dagJson(
    Object.entries(parallelisms).map(([name, p]) => vertex(name, p)),
    edges.map(([from, to]) => ({ from, to, type: "scatter-gather" })),
  );
}

describe("parseDag accepts valid jobs", () => {
  it("parses a vertex with fractional vcores, env, and defaults edges to none", () => {
    const dag = parseDag(dagJson([vertex("solo", 3, { resources: { vcores: 0.5, memoryMb: 128 }, env: { K: "v" } })]));
    expect(dag).toEqual({
      name: "job",
      vertices: [
        {
          name: "solo",
          parallelism: 3,
          command: ["node", "task.js"],
          resources: { vcoresMilli: 500, memoryMb: 128 },
          env: { K: "v" },
        },
      ],
      edges: [],
    });
  });

  it("keeps a job priority from 0 to 100, and leaves it out when not given", () => {
    const json = (priority: unknown): string => JSON.stringify({ name: "job", priority, vertices: [vertex("a")] });
    expect(parseDag(json(0)).priority).toBe(0);
    expect(parseDag(json(100)).priority).toBe(100);
    expect(parseDag(dagJson([vertex("a")]))).not.toHaveProperty("priority");
    for (const bad of [-1, 101, 2.5, "high", null]) rejection(json(bad), "DAG_INVALID_FIELD", "priority");
  });

  it("round-trips through dagToJson and through JSON.stringify of the parsed spec", () => {
    const json = dagJson(
      [vertex("a", 2, { resources: { vcores: 0.25, memoryMb: 64 } }), vertex("b", 2, { env: { X: "1" } })],
      [{ from: "a", to: "b", type: "one-to-one" }],
    );
    const dag = parseDag(json);
    expect(parseDag(dagToJson(dag))).toEqual(dag);
    expect(parseDag(JSON.stringify(dag))).toEqual(dag);
    expect(validateDag(dag)).toEqual(dag);
  });

  it("parses the example DAG files shipped with the package", () => {
    for (const file of ["wordcount.json", "three-stage.json"]) {
      const dag = parseDag(readFileSync(join(packageRoot(), "examples", "dags", file), "utf8"));
      expect(dag.vertices.length).toBe(3);
      expect(topologicalOrder(dag)).toEqual(dag.vertices.map((v) => v.name));
    }
    const wordcount = parseDag(readFileSync(join(packageRoot(), "examples", "dags", "wordcount.json"), "utf8"));
    expect(maxConcurrency(wordcount)).toBe(4);
  });
});

describe("parseDag rejects bad jobs with a stable code and the offending field", () => {
  it("reports malformed JSON with its line and column", () => {
    const err = rejection('{\n  "name": "job",\n  "vertices": [}\n', "DAG_MALFORMED_JSON", "$");
    expect({
      line: detailsOf(err, "DAG_MALFORMED_JSON")?.line,
      column: detailsOf(err, "DAG_MALFORMED_JSON")?.column,
    }).toEqual({ line: "3", column: "16" });
    expect(err.message).toMatch(/line 3, column 16/);
  });

  it("locates a syntax error even where the engine gives no position", () => {
    expect(detailsOf(rejection('{"name": x}', "DAG_MALFORMED_JSON", "$"), "DAG_MALFORMED_JSON")?.position).toBe("9");
    // The first character that cannot continue a literal, as V8 reports it ("Unexpected token 'o'").
    expect(detailsOf(rejection('{"name": nope}', "DAG_MALFORMED_JSON", "$"), "DAG_MALFORMED_JSON")?.position).toBe(
      "10",
    );
    expect(detailsOf(rejection("", "DAG_MALFORMED_JSON", "$"), "DAG_MALFORMED_JSON")?.position).toBe("0");
  });

  // The position comes from a scan of our own, never from the engine's message: these are where V8 says the error is.
  it.each([
    ["-", 1],
    ["1.", 2],
    ["1e+", 3],
    ["01", 1],
    ['"\\u12g4"', 5],
    ['"\\u', 3],
    ['"a\\x"', 3],
    ['"abc', 4],
    ["[1,2", 4],
    ['{"a":1,}', 7],
    ["{a:1}", 1],
    ["[true false]", 6],
    ["{} x", 3],
  ])("locates the syntax error in %j at position %i, as the engine does", (json, position) => {
    expect(detailsOf(rejection(json, "DAG_MALFORMED_JSON", "$"), "DAG_MALFORMED_JSON")?.position).toBe(
      String(position),
    );
  });

  it("rejects wrong types and missing fields", () => {
    rejection("[]", "DAG_INVALID_FIELD", "$");
    rejection(JSON.stringify({ vertices: [vertex("a")] }), "DAG_INVALID_FIELD", "name");
    rejection(dagJson([]), "DAG_INVALID_FIELD", "vertices");
    rejection(JSON.stringify({ name: "job", vertices: {} }), "DAG_INVALID_FIELD", "vertices");
    rejection(dagJson(["a"]), "DAG_INVALID_FIELD", "vertices[0]");
    rejection(
      dagJson([vertex("a"), vertex("b", "2" as unknown as number)]),
      "DAG_INVALID_FIELD",
      "vertices[1].parallelism",
    );
    rejection(dagJson([vertex("a", 1, { command: [] })]), "DAG_INVALID_FIELD", "vertices[0].command");
    rejection(dagJson([vertex("a", 1, { command: "node x.js" })]), "DAG_INVALID_FIELD", "vertices[0].command");
    rejection(dagJson([vertex("a", 1, { command: ["node", 3] })]), "DAG_INVALID_FIELD", "vertices[0].command[1]");
    rejection(dagJson([vertex("a", 1, { resources: undefined })]), "DAG_INVALID_FIELD", "vertices[0].resources");
    rejection(
      dagJson([vertex("a", 1, { resources: { vcores: 0, memoryMb: 1 } })]),
      "DAG_INVALID_FIELD",
      "vertices[0].resources.vcores",
    );
    rejection(
      dagJson([vertex("a", 1, { resources: { vcores: 1, memoryMb: -5 } })]),
      "DAG_INVALID_FIELD",
      "vertices[0].resources.memoryMb",
    );
    rejection(dagJson([vertex("a")], {} as unknown[]), "DAG_INVALID_FIELD", "edges");
  });

  it("rejects env values that are not strings and env names the job manager sets", () => {
    const err = rejection(
      dagJson([vertex("a", 1, { env: { PORT: 8080 } })]),
      "DAG_INVALID_FIELD",
      "vertices[0].env.PORT",
    );
    expect(err.message).toMatch(/must be a string/);
    rejection(
      dagJson([vertex("a", 1, { env: { HARVEST_TASK_INDEX: "0" } })]),
      "DAG_INVALID_FIELD",
      "vertices[0].env.HARVEST_TASK_INDEX",
    );
  });

  it("takes local resources from the DFS, application files by default, and refuses unsafe names and non-DFS paths", () => {
    const res = (r: Record<string, unknown>) => dagJson([vertex("a", 1, { localResources: [r] })]);
    const ok = parseDag(
      dagJson([
        vertex("a", 1, {
          localResources: [
            { name: "tool.js", path: "dfs:/apps/tool.js/" },
            { name: "data", path: "dfs:/apps/data", visibility: "public" },
            { name: "lib", path: "dfs:/apps/lib.tar.gz", type: "archive" },
          ],
        }),
      ]),
    );
    expect(ok.vertices[0]?.localResources).toEqual([
      { name: "tool.js", path: "dfs:/apps/tool.js", visibility: "application", type: "file" },
      { name: "data", path: "dfs:/apps/data", visibility: "public", type: "file" },
      { name: "lib", path: "dfs:/apps/lib.tar.gz", visibility: "application", type: "archive" },
    ]);
    rejection(
      res({ name: "x", path: "dfs:/x.rar", type: "rar" }),
      "DAG_INVALID_FIELD",
      "vertices[0].localResources[0].type",
    );
    expect(parseDag(dagJson([vertex("a")])).vertices[0]?.localResources).toBeUndefined();
    for (const name of ["../x", "a/b", "..", "stdout", "container_tokens", ""])
      rejection(res({ name, path: "dfs:/x" }), "DAG_INVALID_FIELD", "vertices[0].localResources[0].name");
    for (const path of ["/x", "file:/etc/passwd", "dfs:/a/../etc", "dfs:relative", 7])
      rejection(res({ name: "x", path }), "DAG_INVALID_FIELD", "vertices[0].localResources[0].path");
    rejection(
      res({ name: "x", path: "dfs:/x", visibility: "world" }),
      "DAG_INVALID_FIELD",
      "vertices[0].localResources[0].visibility",
    );
    rejection(
      dagJson([
        vertex("a", 1, {
          localResources: [
            { name: "x", path: "dfs:/x" },
            { name: "x", path: "dfs:/y" },
          ],
        }),
      ]),
      "DAG_DUPLICATE_NAME",
      "vertices[0].localResources[1].name",
    );
  });

  it("rejects misspelt fields instead of ignoring them", () => {
    rejection(dagJson([vertex("a", 1, { envs: {} })]), "DAG_INVALID_FIELD", "vertices[0].envs");
    rejection(dagJson([vertex("a")], [], { edge: [] }), "DAG_INVALID_FIELD", "edge");
  });

  it("rejects vertex names that are not safe as directory names", () => {
    for (const name of ["a/b", "..", ".", "", "x".repeat(65), "sp ace"]) {
      rejection(dagJson([vertex("ok"), vertex(name)]), "DAG_INVALID_FIELD", "vertices[1].name");
    }
    expect(parseDag(dagJson([vertex("Map_1.v-2")])).vertices[0]?.name).toBe("Map_1.v-2");
  });

  it("rejects a duplicate vertex name", () => {
    const err = rejection(dagJson([vertex("a"), vertex("a")]), "DAG_DUPLICATE_NAME", "vertices[1].name");
    expect(err.message).toMatch(/vertices\[0\] and vertices\[1\]/);
  });

  it("rejects parallelism below 1, fractional or above the limit", () => {
    rejection(dagJson([vertex("a", 0)]), "DAG_BAD_PARALLELISM", "vertices[0].parallelism");
    rejection(dagJson([vertex("a", 1.5)]), "DAG_BAD_PARALLELISM", "vertices[0].parallelism");
    rejection(dagJson([vertex("a", 10_001)]), "DAG_BAD_PARALLELISM", "vertices[0].parallelism");
    rejection(dagJson([vertex("a", 10)]), "DAG_BAD_PARALLELISM", "vertices[0].parallelism", { maxParallelism: 8 });
    expect(parseDag(dagJson([vertex("a", 10_000)])).vertices[0]?.parallelism).toBe(10_000);
  });

  it("rejects a vertex larger than the largest node", () => {
    const limits = { maxResource: { vcoresMilli: 4000, memoryMb: 8192 } };
    const big = dagJson([vertex("a"), vertex("b", 1, { resources: { vcores: 2, memoryMb: 16384 } })]);
    const err = rejection(big, "DAG_RESOURCES_TOO_LARGE", "vertices[1].resources.memoryMb", limits);
    expect(err.message).toMatch(/8192 MB/);
    rejection(
      dagJson([vertex("a", 1, { resources: { vcores: 4.5, memoryMb: 1 } })]),
      "DAG_RESOURCES_TOO_LARGE",
      "vertices[0].resources.vcores",
      limits,
    );
  });

  it("rejects an edge naming an unknown vertex", () => {
    const err = rejection(
      dagJson([vertex("a"), vertex("b")], [{ from: "a", to: "c", type: "broadcast" }]),
      "DAG_UNKNOWN_VERTEX",
      "edges[0].to",
    );
    expect(err.message).toMatch(/"c".*a, b/);
  });

  it("rejects an unknown edge type", () => {
    rejection(
      dagJson([vertex("a"), vertex("b")], [{ from: "a", to: "b", type: "shuffle" }]),
      "DAG_INVALID_FIELD",
      "edges[0].type",
    );
  });

  it("rejects a duplicate edge", () => {
    rejection(
      dagJson(
        [vertex("a"), vertex("b")],
        [
          { from: "a", to: "b", type: "broadcast" },
          { from: "a", to: "b", type: "scatter-gather" },
        ],
      ),
      "DAG_INVALID_FIELD",
      "edges[1]",
    );
  });

  it("rejects one-to-one between vertices of different parallelism", () => {
    const err = rejection(
      dagJson([vertex("a", 4), vertex("b", 3)], [{ from: "a", to: "b", type: "one-to-one" }]),
      "DAG_ONE_TO_ONE_MISMATCH",
      "edges[0]",
    );
    expect(err.message).toMatch(/4.*3/);
  });

  it("rejects a self-loop", () => {
    const err = rejection(
      dagJson([vertex("a")], [{ from: "a", to: "a", type: "scatter-gather" }]),
      "DAG_CYCLE",
      "edges[0]",
    );
    expect(detailsOf(err, "DAG_CYCLE")?.cycle).toBe("a -> a");
  });

  it("rejects a cycle and names the vertices on it", () => {
    const err = rejection(
      shape({ src: 1, a: 1, b: 1, c: 1 }, [
        ["src", "a"],
        ["a", "b"],
        ["b", "c"],
        ["c", "a"],
      ]),
      "DAG_CYCLE",
      "edges[3]",
    );
    expect(detailsOf(err, "DAG_CYCLE")?.cycle).toBe("a -> b -> c -> a");
    expect(err.message).toContain("a -> b -> c -> a");
  });
});

describe("graph helpers", () => {
  const diamond = parseDag(
    shape({ d: 1, b: 4, c: 3, a: 2 }, [
      ["a", "b"],
      ["a", "c"],
      ["b", "d"],
      ["c", "d"],
    ]),
  );

  it("orders vertices after their inputs", () => {
    expect(topologicalOrder(diamond)).toEqual(["a", "b", "c", "d"]);
  });

  it("lists the edges into and out of a vertex", () => {
    expect(upstreamOf(diamond, "d").map((e) => e.from)).toEqual(["b", "c"]);
    expect(downstreamOf(diamond, "a").map((e) => e.to)).toEqual(["b", "c"]);
    expect(upstreamOf(diamond, "a")).toEqual([]);
    expect(() => upstreamOf(diamond, "zz")).toThrow(HarvestError);
  });

  it("builds the task environment's inputs and outputs per edge type", () => {
    const dag = parseDag(
      dagJson(
        [vertex("m", 3), vertex("side", 2), vertex("r", 2), vertex("out", 2)],
        [
          { from: "m", to: "r", type: "scatter-gather" },
          { from: "side", to: "r", type: "broadcast" },
          { from: "r", to: "out", type: "one-to-one" },
        ],
      ),
    );
    const dir = (v: string, i: number): string => `/o/${v}/${i}`;
    expect(taskInputs(dag, "r", 1, dir)).toEqual([
      { vertex: "m", edgeType: "scatter-gather", sources: ["/o/m/0", "/o/m/1", "/o/m/2"] },
      { vertex: "side", edgeType: "broadcast", sources: ["/o/side/0", "/o/side/1"] },
    ]);
    expect(taskInputs(dag, "out", 1, dir)).toEqual([{ vertex: "r", edgeType: "one-to-one", sources: ["/o/r/1"] }]);
    expect(taskOutputs(dag, "m")).toEqual([{ vertex: "r", edgeType: "scatter-gather", partitions: 2 }]);
  });
});

describe("maxConcurrency (breadth-first over the DAG, seeds/004 section 4.1)", () => {
  it("is the widest vertex of a chain", () => {
    expect(
      maxConcurrency(
        parseDag(
          shape({ a: 3, b: 5, c: 2 }, [
            ["a", "b"],
            ["b", "c"],
          ]),
        ),
      ),
    ).toBe(5);
  });

  it("adds up the branches of a diamond that run side by side", () => {
    const dag = parseDag(
      shape({ a: 2, b: 4, c: 3, d: 1 }, [
        ["a", "b"],
        ["a", "c"],
        ["b", "d"],
        ["c", "d"],
      ]),
    );
    expect(vertexLayers(dag)).toEqual([["a"], ["b", "c"], ["d"]]);
    expect(maxConcurrency(dag)).toBe(7);
  });

  it("adds up all the sources of a wide fan-in", () => {
    const sources = Object.fromEntries(Array.from({ length: 10 }, (_, i) => [`s${i}`, 5]));
    const dag = parseDag(
      shape(
        { ...sources, sink: 1 },
        Object.keys(sources).map((s): [string, string] => [s, "sink"]),
      ),
    );
    expect(maxConcurrency(dag)).toBe(50);
  });

  it("places a vertex one layer after its deepest input", () => {
    // v waits for t, so it runs beside u (layer 2), not beside t (layer 1).
    const dag = parseDag(
      shape({ s: 1, t: 10, u: 1, v: 20 }, [
        ["s", "t"],
        ["t", "u"],
        ["s", "v"],
        ["t", "v"],
      ]),
    );
    expect(vertexLayers(dag)).toEqual([["s"], ["t"], ["u", "v"]]);
    expect(maxConcurrency(dag)).toBe(21);
  });

  it("estimates 469 containers for TPC-DS query 19 (the paper's Figure 7)", () => {
    // The seed's text of Figure 7 is garbled ("(8)(469)Mapper 1Mapper 2(1)(469)(113)(138)(6)(1)Mapper 10Reducer 5
    // Reducer 6Reducer 7(2)(138)(6)(1)Mapper 8Reducer 3(1)(113)(126)Mapper 9Reducer 4(3)(126)Mapper 11(1)"). Our reading,
    // with each vertex's task count in parentheses and the repeated counts taken as the same vertex's label again:
    //   Mapper 1 (8, date_dim) broadcasts into Mapper 2 (469, store_sales, a map-side join);
    //   Mapper 2 and Mapper 8 (2) feed Reducer 3 (113); Reducer 3 and Mapper 9 (1) feed Reducer 4 (126);
    //   Reducer 4, Mapper 10 (1) and Mapper 11 (3, broadcast) feed Reducer 5 (138);
    //   Reducer 5 -> Reducer 6 (6, the group-by) -> Reducer 7 (1, the order-by with limit).
    // The expected 469 is the paper's number, not the output of this code.
    const dag = validateDag({
      name: "tpcds-q19",
      vertices: [
        ["mapper-1", 8],
        ["mapper-2", 469],
        ["mapper-8", 2],
        ["mapper-9", 1],
        ["mapper-10", 1],
        ["mapper-11", 3],
        ["reducer-3", 113],
        ["reducer-4", 126],
        ["reducer-5", 138],
        ["reducer-6", 6],
        ["reducer-7", 1],
      ].map(([name, parallelism]) => vertex(name as string, parallelism as number)),
      edges: [
        { from: "mapper-1", to: "mapper-2", type: "broadcast" },
        { from: "mapper-2", to: "reducer-3", type: "scatter-gather" },
        { from: "mapper-8", to: "reducer-3", type: "scatter-gather" },
        { from: "reducer-3", to: "reducer-4", type: "scatter-gather" },
        { from: "mapper-9", to: "reducer-4", type: "scatter-gather" },
        { from: "reducer-4", to: "reducer-5", type: "scatter-gather" },
        { from: "mapper-10", to: "reducer-5", type: "scatter-gather" },
        { from: "mapper-11", to: "reducer-5", type: "broadcast" },
        { from: "reducer-5", to: "reducer-6", type: "scatter-gather" },
        { from: "reducer-6", to: "reducer-7", type: "scatter-gather" },
      ],
    });
    expect(maxConcurrency(dag)).toBe(469);
  });
});
