/**
 * The pure parts of the namenode's web side and metrics: WebHDFS paths and file statuses, the priority counts of an
 * fsck report, the placement grid's replica counts, and the operation counter's outcomes.
 */
import { processFacts } from "../../common/web-page.js";
import { Registry } from "prom-client";
import { describe, expect, it } from "vitest";
import { buildDiversityGrid } from "../../namenode/policy/diversity-placement.js";
import { NameNodeMetrics } from "../../namenode/nn-metrics.js";
import type { NameNodeSummary } from "../../namenode/nn-metrics.js";
import { fsckPriorities, intParam, webHdfsFileStatus, webHdfsPath } from "../../namenode/web-api.js";
import { placementReport } from "../../namenode/web.js";
import { HarvestError } from "../../common/errors.js";
import type { FileStatusOutput } from "../../proto/generated/harvest/v1/FileStatus.js";
import type { FsckBlockOutput } from "../../proto/generated/harvest/v1/FsckBlock.js";
import type { FsckReportOutput } from "../../proto/generated/harvest/v1/FsckReport.js";
import { parsePromText, sumSamples } from "../prom-text.js";
import { thrown } from "../error-code.js";

const FILE: FileStatusOutput = {
  path: "/data/part-0",
  isDir: false,
  length: 1234,
  replication: 3,
  blockSize: 65536,
  owner: "alice",
  group: "analysts",
  mode: 0o640,
  mtimeMs: 1_700_000_000_000,
  ctimeMs: 1_700_000_000_000,
  complete: true,
  blocks: 1,
  recoveredMs: 0,
  recoveredReason: "",
};

describe("WebHDFS paths and statuses", () => {
  it("takes the DFS path from the URL path after /webhdfs/v1, normalised", () => {
    expect(webHdfsPath("/webhdfs/v1")).toBe("/");
    expect(webHdfsPath("/webhdfs/v1/")).toBe("/");
    expect(webHdfsPath("/webhdfs/v1/data/part-0")).toBe("/data/part-0");
    expect(webHdfsPath("/webhdfs/v1/data/")).toBe("/data");
  });

  it("refuses dot components, empty components and NUL as DFS_BAD_PATH instead of resolving them", () => {
    for (const p of [
      "/webhdfs/v1/data/../etc",
      "/webhdfs/v1/./data",
      "/webhdfs/v1/a//b",
      "/webhdfs//v1/a",
      "/webhdfs/v1/a\0b",
    ])
      expect(thrown(() => webHdfsPath(p)).code, p).toBe("DFS_BAD_PATH");
  });

  it("shows a file as WebHDFS does, with the permission in octal", () => {
    expect(webHdfsFileStatus(FILE, "part-0")).toEqual({
      pathSuffix: "part-0",
      type: "FILE",
      length: 1234,
      owner: "alice",
      group: "analysts",
      permission: "640",
      replication: 3,
      blockSize: 65536,
      modificationTime: 1_700_000_000_000,
      complete: true,
      blocks: 1,
      recoveredTime: 0,
    });
    expect(webHdfsFileStatus({ ...FILE, isDir: true, mode: 0o44 }, "").permission).toBe("044");
    expect(webHdfsFileStatus({ ...FILE, isDir: true }, "").type).toBe("DIRECTORY");
  });

  it("reads offsets and lengths as non-negative integers only", () => {
    const q = new URLSearchParams("offset=512&length=&bad=-1&frac=1.5&huge=99999999999999999999");
    expect(intParam(q, "offset", 0)).toBe(512);
    expect(intParam(q, "length", 7)).toBe(7);
    expect(intParam(q, "absent", 3)).toBe(3);
    for (const name of ["bad", "frac", "huge"])
      expect(thrown(() => intParam(q, name, 0)).code).toBe("INVALID_ARGUMENT");
  });
});

describe("fsck priorities", () => {
  const block = (live: number, expected: number, leaving = 0): FsckBlockOutput => ({
    path: "/f",
    block: { blockId: 1, genStamp: 1, numBytes: 1 },
    liveReplicas: live,
    expectedReplicas: expected,
    datanodes: [],
    decommissioningReplicas: leaving,
    decommissionedReplicas: 0,
    outOfServiceDatanodes: [],
  });

  it("sorts under-replicated blocks into the replication monitor's levels", () => {
    const report = { underReplicated: [block(1, 3), block(0, 3, 2), block(2, 10), block(2, 3), block(4, 5)] };
    expect(fsckPriorities(report as FsckReportOutput)).toEqual({
      highest: 2,
      veryUnderReplicated: 1,
      underReplicated: 2,
    });
  });
});

describe("the placement grid report", () => {
  // Nine tenants, one server each: reimage rate picks the row, peak CPU the column.
  const tenants = [0, 1, 2].flatMap((row) =>
    [0, 1, 2].map((col) => ({
      tenantId: `t${row}${col}`,
      environment: `env${row}${col}`,
      reimagesPerServerMonth: row + 0.1 * col,
      peakCpuPct: 10 + 30 * col,
      servers: [`s${row}${col}`],
    })),
  );
  const grid = buildDiversityGrid(tenants, new Map(tenants.map((t) => [t.servers[0]!, 1000])));

  it("counts each replica in its server's cell and the blocks whose replicas share a row or a column", () => {
    const r = placementReport("diversity", grid, [
      ["s00", "s11", "s22"], // diverse
      ["s00", "s01"], // same row
      ["s02", "s12", "dn-x"], // same column, one outside
      [],
    ]);
    expect(r).toMatchObject({
      policy: "diversity",
      tenants: 9,
      replicas: 8,
      replicasOutsideGrid: 1,
      blocks: 3,
      blocksSharingRowOrColumn: 2,
    });
    const cell = (row: number, col: number): number => r.rows[row]!.cells[col]!.replicas;
    expect([0, 1, 2].map((row) => [0, 1, 2].map((col) => cell(row, col)))).toEqual([
      [2, 1, 1],
      [0, 1, 1],
      [0, 0, 1],
    ]);
    expect(r.rows[1]!.cells[2]).toMatchObject({ tenants: ["t12"], servers: 1, freeBytes: 1000 });
    expect(r.rows[2]!.reimagesPerServerMonth).toEqual({ min: 2, max: 2.2 });
  });

  it("shows an empty grid with every replica outside it when there is no grid (the stock policy)", () => {
    const r = placementReport("stock", undefined, [["a", "b"], ["c"]]);
    expect(r).toMatchObject({
      tenants: 0,
      replicas: 3,
      replicasOutsideGrid: 3,
      blocks: 2,
      blocksSharingRowOrColumn: 0,
    });
    expect(r.rows.flatMap((row) => row.cells.map((c) => c.replicas))).toEqual(new Array<number>(9).fill(0));
  });
});

describe("the namenode's metrics", () => {
  const summary: NameNodeSummary = {
    address: "nn:8020",
    httpUrl: "https://nn:9870",
    ha: { role: "standby", epoch: 7, active: "nn2:8020", appliedTxid: 12 },
    process: processFacts(Date.now() - 60_000),
    state: "running",
    safeMode: { on: true, blocksTotal: 4, blocksReported: 1, threshold: 0.999, reason: "1 of 4 blocks reported" },
    placementPolicy: "stock",
    files: 3,
    directories: 2,
    blocks: 4,
    blockHealth: {
      underReplicated: 3,
      underReplicatedByPriority: { highest: 1, veryUnderReplicated: 0, underReplicated: 2 },
      missing: 1,
      corrupt: 0,
      pendingReplication: 0,
    },
    datanodes: {
      live: 2,
      stale: 1,
      dead: 1,
      decommissioning: 0,
      decommissioned: 0,
      primaryBusy: 1,
      capacityBytes: 3000,
      usedBytes: 1000,
      nonDfsUsedBytes: 500,
      remainingBytes: 1500,
      fileSystems: 2,
    },
  };

  it("counts operations by outcome, synchronous or not, and reads the gauges from the summary", async () => {
    const registry = new Registry();
    const metrics = new NameNodeMetrics(registry, () => summary);
    expect(metrics.observe("listing", () => 42)).toBe(42);
    expect(await metrics.observe("create", () => Promise.resolve("made"))).toBe("made");
    expect(() =>
      metrics.observe("getFileInfo", () => {
        throw new HarvestError("NAMENODE_FILE_NOT_FOUND", "no such file");
      }),
    ).toThrow("no such file");
    await expect(
      metrics.observe("delete", () => Promise.reject(new HarvestError("DFS_PERMISSION_DENIED", "not yours"))),
    ).rejects.toThrow("not yours");
    await expect(metrics.observe("rename", () => Promise.reject(new Error("boom")))).rejects.toThrow("boom");
    const m = parsePromText(await registry.metrics());
    const ops = (op: string, outcome: string): number => sumSamples(m, "harvest_nn_ops_total", { op, outcome });
    expect([
      ops("listing", "ok"),
      ops("create", "ok"),
      ops("getFileInfo", "NAMENODE_FILE_NOT_FOUND"),
      ops("delete", "DFS_PERMISSION_DENIED"),
      ops("rename", "INTERNAL"),
    ]).toEqual([1, 1, 1, 1, 1]);
    expect(sumSamples(m, "harvest_nn_op_duration_seconds_count")).toBe(5);
    expect(sumSamples(m, "harvest_nn_safe_mode")).toBe(1);
    expect(sumSamples(m, "harvest_nn_under_replicated_blocks")).toBe(3);
    expect(sumSamples(m, "harvest_nn_under_replicated_blocks", { priority: "highest" })).toBe(1);
    expect(sumSamples(m, "harvest_nn_datanodes", { state: "stale" })).toBe(1);
    expect(sumSamples(m, "harvest_nn_remaining_bytes")).toBe(1500);
    expect(sumSamples(m, "harvest_nn_non_dfs_used_bytes")).toBe(500);
    expect(sumSamples(m, "harvest_nn_datanodes_primary_busy")).toBe(1);
    // A standby says how far it follows the shared log.
    expect(sumSamples(m, "harvest_nn_ha_applied_txid")).toBe(12);
    // Every harvest_nn_ metric says what it is.
    const text = await registry.metrics();
    for (const name of new Set([...text.matchAll(/^# TYPE (harvest_nn_\S+)/gm)].map((x) => x[1])))
      expect(text, name).toMatch(new RegExp(`^# HELP ${name} \\S`, "m"));
  });
});
