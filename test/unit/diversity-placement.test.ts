/** The HDFS-H diversity placement policy (seeds/004, Algorithm 2) and the 3x3 grid behind it. */
import { describe, expect, it } from "vitest";
import { SeededRng } from "../../common/rng.js";
import { buildDiversityGrid, DiversityPlacementPolicy } from "../../namenode/policy/diversity-placement.js";
import type { GridPosition, PlacementTenant } from "../../namenode/policy/diversity-placement.js";
import { StockPlacementPolicy } from "../../namenode/policy/placement.js";
import type { DatanodeView, PlacementRequest } from "../../namenode/policy/placement.js";

const GiB = 1024 ** 3;
const BLOCK = 64 * 1024 * 1024;
const BLOCKS = 2000;

/** What the test knows of a server, from how it built the cluster (never from the code under test). */
interface Known {
  readonly tenantId: string;
  readonly environment: string;
  readonly cell: GridPosition;
}

interface Cluster {
  readonly tenants: PlacementTenant[];
  readonly free: Map<string, number>;
  readonly known: Map<string, Known>;
  /** Every datanode: the tenants' servers and a few servers of no tenant. */
  readonly serverIds: string[];
}

/**
 * 27 equal tenants of 5 servers, three per cell. Reimage rates put tenants k = 0-8 in row 0, 9-17 in row 1, 18-26 in
 * row 2 (each a third of the space); within a row peak CPU 10-12, 40-42, 70-72 splits them into columns of three.
 * Tenant k is in cell (floor(k / 9), floor(k / 3) mod 3) and environment env-(k mod environments); with the default 24,
 * t24-t26 in cell (2,2) share environments with t00-t02 in cell (0,0). Five more servers belong to no tenant.
 */
function richCluster(environments = 24): Cluster {
  const tenants: PlacementTenant[] = [];
  const free = new Map<string, number>();
  const known = new Map<string, Known>();
  const serverIds: string[] = [];
  for (let row = 0; row < 3; row++) {
    for (let col = 0; col < 3; col++) {
      for (let j = 0; j < 3; j++) {
        const k = row * 9 + col * 3 + j;
        const tenantId = `t${String(k).padStart(2, "0")}`;
        const environment = `env-${k % environments}`;
        const servers = Array.from({ length: 5 }, (_, s) => `server-${k * 5 + s}`);
        for (const s of servers) {
          free.set(s, 100 * GiB);
          known.set(s, { tenantId, environment, cell: { row, col } });
          serverIds.push(s);
        }
        tenants.push({
          tenantId,
          environment,
          reimagesPerServerMonth: row + 0.1 * (col * 3 + j),
          peakCpuPct: 10 + 30 * col + j,
          servers,
        });
      }
    }
  }
  for (let s = 900; s < 905; s++) serverIds.push(`server-${s}`);
  // Input order must not matter.
  tenants.reverse();
  return { tenants, free, known, serverIds };
}

function view(datanodeId: string, extra: Partial<DatanodeView> = {}): DatanodeView {
  return { datanodeId, rack: "/default", remainingBytes: 100 * GiB, primaryBusy: false, ...extra };
}

/** A cluster state for one block: a few datanodes busy, full or excluded, chosen by the test's own random source. */
function blockState(
  serverIds: readonly string[],
  rng: SeededRng,
): { datanodes: DatanodeView[]; excluded: Set<string>; unfit: Set<string> } {
  const excluded = new Set<string>();
  const unfit = new Set<string>();
  const datanodes = serverIds.map((id) => {
    const u = rng.next();
    if (u < 0.03) {
      unfit.add(id);
      return view(id, { primaryBusy: true });
    }
    if (u < 0.05) {
      unfit.add(id);
      return view(id, { remainingBytes: BLOCK - 1 });
    }
    if (u < 0.06) {
      unfit.add(id);
      excluded.add(id);
    }
    return view(id);
  });
  return { datanodes, excluded, unfit };
}

function request(datanodes: readonly DatanodeView[], extra: Partial<PlacementRequest> = {}): PlacementRequest {
  return { replication: 3, excluded: new Set(), datanodes, blockSizeBytes: BLOCK, rng: new SeededRng(7), ...extra };
}

function policyFor(cluster: Cluster, reasons: string[] = []): DiversityPlacementPolicy {
  const policy = new DiversityPlacementPolicy({ onDegrade: (r) => reasons.push(r) });
  policy.setTenants(cluster.tenants, cluster.free);
  return policy;
}

const ids = (views: readonly DatanodeView[]): string[] => views.map((v) => v.datanodeId);

/** Asserts no two of `cells` share a row or a column. */
function expectDiagonal(cells: readonly GridPosition[]): void {
  expect(new Set(cells.map((c) => c.row)).size).toBe(cells.length);
  expect(new Set(cells.map((c) => c.col)).size).toBe(cells.length);
}

describe("the diversity grid", () => {
  /**
   * Space in units of 10 GiB (one server each), 36 units, so each cell should hold 4. By reimage rate:
   * A4 B2 C2 D4 | E4 Z0 F4 G4 | H1 I3 J4 K4, cut at 12 and 24 (Z has no free space and sits at 16).
   * Row 0 by CPU: A(10) 0-4 | B(30) 4-6, C(35) 6-8 | D(70) 8-12.
   * Row 1 by CPU: Z(15) at 0, F(20) 0-4 | E(50) 4-8 | G(90) 8-12.
   * Row 2 by CPU: H(5) 0-1, I(6) 1-4 | J(60) 4-8 | K(95) 8-12.
   */
  const spec: [id: string, servers: number, rate: number, cpu: number][] = [
    ["A", 4, 0.1, 10],
    ["B", 2, 0.2, 30],
    ["C", 2, 0.3, 35],
    ["D", 4, 0.4, 70],
    ["E", 4, 1.0, 50],
    ["Z", 2, 1.05, 15],
    ["F", 4, 1.1, 20],
    ["G", 4, 1.2, 90],
    ["H", 1, 2.0, 5],
    ["I", 3, 2.1, 6],
    ["J", 4, 2.2, 60],
    ["K", 4, 2.3, 95],
  ];
  const tenants: PlacementTenant[] = spec.map(([id, n, rate, cpu]) => ({
    tenantId: id,
    environment: `env-${id}`,
    reimagesPerServerMonth: rate,
    peakCpuPct: cpu,
    servers: Array.from({ length: n }, (_, i) => `${id}-${i}`),
  }));
  const free = new Map<string, number>();
  for (const t of tenants) if (t.tenantId !== "Z") for (const s of t.servers) free.set(s, 10 * GiB);
  free.set("stray-server", 500 * GiB);

  it("cuts rows and columns into equal-space tertiles, so each of the nine cells holds a ninth of the space", () => {
    const grid = buildDiversityGrid([...tenants].reverse(), free);
    const expected: Record<string, string[]> = {
      "0,0": ["A"],
      "0,1": ["B", "C"],
      "0,2": ["D"],
      "1,0": ["F", "Z"],
      "1,1": ["E"],
      "1,2": ["G"],
      "2,0": ["H", "I"],
      "2,1": ["J"],
      "2,2": ["K"],
    };
    expect(grid.totalFreeBytes).toBe(360 * GiB);
    expect(grid.cells).toHaveLength(9);
    for (const cell of grid.cells) {
      expect(cell.tenants.map((t) => t.tenantId)).toEqual(expected[`${cell.row},${cell.col}`]);
      expect(cell.freeBytes).toBe(40 * GiB);
    }
    expect(grid.cellOf("C")).toEqual({ row: 0, col: 1 });
    expect(grid.cellOf("nobody")).toBeUndefined();
    expect(grid.cellOfServer("I-2")).toEqual({ row: 2, col: 0 });
    expect(grid.cellOfServer("stray-server")).toBeUndefined();
  });

  it("gives a tenant without free space a cell, and exposes the tier boundaries", () => {
    const grid = buildDiversityGrid(tenants, free);
    expect(grid.cellOf("Z")).toEqual({ row: 1, col: 0 });
    expect(grid.cellOfServer("Z-1")).toEqual({ row: 1, col: 0 });
    expect(grid.rows.map((r) => r.reimagesPerServerMonth)).toEqual([
      { min: 0.1, max: 0.4 },
      { min: 1.0, max: 1.2 },
      { min: 2.0, max: 2.3 },
    ]);
    expect(grid.rows.map((r) => r.freeBytes)).toEqual([120 * GiB, 120 * GiB, 120 * GiB]);
    expect(grid.cell(0, 1)?.peakCpuPct).toEqual({ min: 30, max: 35 });
    expect(grid.cell(1, 0)?.peakCpuPct).toEqual({ min: 15, max: 20 });
    expect(grid.cell(2, 0)?.serverCount).toBe(4);
    expect(grid.cell(3, 0)).toBeUndefined();
  });

  it("breaks ties in rate and CPU by tenantId, whatever the input order", () => {
    const same = (tenantId: string): PlacementTenant => ({
      tenantId,
      environment: tenantId,
      reimagesPerServerMonth: 1,
      peakCpuPct: 50,
      servers: [`${tenantId}-0`],
    });
    const space = new Map([
      ["a-0", GiB],
      ["b-0", GiB],
      ["c-0", GiB],
    ]);
    for (const order of [
      ["b", "a", "c"],
      ["c", "b", "a"],
    ]) {
      const grid = buildDiversityGrid(order.map(same), space);
      // Each row holds one tenant, whose midpoint (1/2 of the row) falls in the middle column.
      expect(grid.cellOf("a")).toEqual({ row: 0, col: 1 });
      expect(grid.cellOf("b")).toEqual({ row: 1, col: 1 });
      expect(grid.cellOf("c")).toEqual({ row: 2, col: 1 });
    }
  });
});

describe("the diversity placement policy", () => {
  it("puts three replicas in cells of distinct rows and columns, distinct environments and qualifying servers", () => {
    const cluster = richCluster();
    const reasons: string[] = [];
    const policy = policyFor(cluster, reasons);
    const stateRng = new SeededRng(11);
    const rng = new SeededRng(12);
    let onWriter = 0;
    for (let b = 0; b < BLOCKS; b++) {
      const { datanodes, excluded, unfit } = blockState(cluster.serverIds, stateRng);
      const writer = stateRng.next() < 0.8 ? cluster.serverIds[stateRng.int(cluster.serverIds.length)] : undefined;
      const chosen = ids(policy.chooseTargets(request(datanodes, { writerDatanodeId: writer, excluded, rng })));
      expect(chosen).toHaveLength(3);
      expect(new Set(chosen).size).toBe(3);
      for (const id of chosen) expect(unfit.has(id)).toBe(false);
      if (writer !== undefined && !unfit.has(writer)) {
        expect(chosen[0]).toBe(writer);
        onWriter++;
      }
      // A writer of no tenant still gets the first replica; the others must then be tenants' servers.
      const inGrid = chosen.map((id) => cluster.known.get(id)).filter((k) => k !== undefined);
      expect(inGrid.length).toBeGreaterThanOrEqual(2);
      expectDiagonal(inGrid.map((k) => k.cell));
      expect(new Set(inGrid.map((k) => k.environment)).size).toBe(inGrid.length);
    }
    expect(onWriter).toBeGreaterThan(BLOCKS / 2);
    expect(reasons).toEqual([]);
  });

  it("keeps a fourth replica in a new environment and lets it use any cell once the row/column memory is forgotten", () => {
    const cluster = richCluster();
    const reasons: string[] = [];
    const policy = policyFor(cluster, reasons);
    const stateRng = new SeededRng(21);
    const rng = new SeededRng(22);
    const tenantServers = [...cluster.known.keys()];
    const fourthCells = new Set<string>();
    for (let b = 0; b < BLOCKS; b++) {
      const { datanodes, excluded } = blockState(cluster.serverIds, stateRng);
      const writer = tenantServers[stateRng.int(tenantServers.length)];
      const replication = 4;
      const chosen = ids(
        policy.chooseTargets(request(datanodes, { replication, writerDatanodeId: writer, excluded, rng })),
      );
      expect(chosen).toHaveLength(replication);
      expect(new Set(chosen).size).toBe(replication);
      const known = chosen.map((id) => cluster.known.get(id));
      expect(known.every((k) => k !== undefined)).toBe(true);
      const cells = (known as Known[]).map((k) => k.cell);
      expect(new Set(known.map((k) => k?.environment)).size).toBe(replication);
      expectDiagonal(cells.slice(0, 3));
      const fourth = cells[3] as GridPosition;
      fourthCells.add(`${fourth.row},${fourth.col}`);
    }
    // Three diagonal replicas use every row and column: a fourth could only be placed without a relaxation (none was
    // reported) because the memory was forgotten, and then any of the nine cells may take it.
    expect(reasons).toEqual([]);
    expect(fourthCells.size).toBe(9);
  });

  it("puts replicas four to six on a second diagonal when every tenant has its own environment", () => {
    const cluster = richCluster(27);
    const reasons: string[] = [];
    const policy = policyFor(cluster, reasons);
    const stateRng = new SeededRng(41);
    const rng = new SeededRng(42);
    for (let b = 0; b < BLOCKS / 4; b++) {
      const { datanodes, excluded } = blockState(cluster.serverIds, stateRng);
      const chosen = ids(policy.chooseTargets(request(datanodes, { replication: 6, excluded, rng })));
      expect(new Set(chosen).size).toBe(6);
      const known = chosen.map((id) => cluster.known.get(id) as Known);
      expect(new Set(known.map((k) => k.environment)).size).toBe(6);
      expectDiagonal(known.slice(0, 3).map((k) => k.cell));
      expectDiagonal(known.slice(3, 6).map((k) => k.cell));
    }
    expect(reasons).toEqual([]);
  });

  it("uses every cell and every tenant across many blocks, about evenly per cell", () => {
    const cluster = richCluster();
    const policy = policyFor(cluster);
    const stateRng = new SeededRng(31);
    const rng = new SeededRng(32);
    const perCell = new Map<string, number>();
    const tenantsUsed = new Set<string>();
    for (let b = 0; b < BLOCKS; b++) {
      const { datanodes, excluded } = blockState(cluster.serverIds, stateRng);
      for (const id of ids(policy.chooseTargets(request(datanodes, { excluded, rng })))) {
        const k = cluster.known.get(id);
        if (!k) continue;
        const key = `${k.cell.row},${k.cell.col}`;
        perCell.set(key, (perCell.get(key) ?? 0) + 1);
        tenantsUsed.add(k.tenantId);
      }
    }
    expect(perCell.size).toBe(9);
    const mean = (3 * BLOCKS) / 9;
    for (const count of perCell.values()) {
      expect(count).toBeGreaterThan(mean * 0.7);
      expect(count).toBeLessThan(mean * 1.3);
    }
    expect(tenantsUsed.size).toBe(27);
  });

  it("re-replicates relative to the replicas that already exist", () => {
    const cluster = richCluster();
    const reasons: string[] = [];
    const policy = policyFor(cluster, reasons);
    const datanodes = cluster.serverIds.map((id) => view(id));
    const t00 = "server-0"; // t00: cell (0,0), env-0
    const t15 = "server-75"; // t15: cell (1,2), env-15
    const t12 = "server-60"; // t12: cell (1,1), env-12
    const t26 = "server-130"; // t26: cell (2,2), env-2
    for (let seed = 0; seed < 200; seed++) {
      const rng = new SeededRng(seed);
      // Two replicas left rows {0,1} and columns {0,2}: the only cell free of both is (2,1).
      const one = ids(
        policy.chooseTargets(
          request(datanodes, { replication: 1, existing: [t00, t15], excluded: new Set([t00, t15]), rng }),
        ),
      );
      expect(one).toHaveLength(1);
      expect(cluster.known.get(one[0] ?? "")?.cell).toEqual({ row: 2, col: 1 });

      // One replica in (0,0), env-0: two more must complete a diagonal and avoid env-0 (so never t24 in (2,2)).
      const two = ids(
        policy.chooseTargets(request(datanodes, { replication: 2, existing: [t00], excluded: new Set(), rng })),
      );
      expect(two).toHaveLength(2);
      expect(two).not.toContain(t00);
      const twoKnown = two.map((id) => cluster.known.get(id) as Known);
      expectDiagonal([{ row: 0, col: 0 }, ...twoKnown.map((k) => k.cell)]);
      expect(twoKnown.map((k) => k.environment)).not.toContain("env-0");
      expect(new Set(twoKnown.map((k) => k.environment)).size).toBe(2);

      // Three replicas fill the memory, which is then forgotten: the next two only avoid each other's rows and
      // columns, and every environment used so far.
      const existing = [t00, t12, t26];
      const more = ids(
        policy.chooseTargets(request(datanodes, { replication: 2, existing, excluded: new Set(), rng })),
      );
      expect(more).toHaveLength(2);
      for (const id of existing) expect(more).not.toContain(id);
      const moreKnown = more.map((id) => cluster.known.get(id) as Known);
      expectDiagonal(moreKnown.map((k) => k.cell));
      const envs = ["env-0", "env-12", "env-2", ...moreKnown.map((k) => k.environment)];
      expect(new Set(envs).size).toBe(5);
    }
    expect(reasons).toEqual([]);
  });

  it("degrades on a cluster too small for the rules: three distinct servers and a reason, no throw", () => {
    // Two tenants, one per row; alone in its row, each sits in the middle column, so they share column 1.
    const tenants: PlacementTenant[] = [
      { tenantId: "a", environment: "env-a", reimagesPerServerMonth: 1, peakCpuPct: 10, servers: ["a-0", "a-1"] },
      { tenantId: "b", environment: "env-b", reimagesPerServerMonth: 5, peakCpuPct: 90, servers: ["b-0", "b-1"] },
    ];
    const free = new Map(["a-0", "a-1", "b-0", "b-1"].map((s) => [s, 10 * GiB]));
    const datanodes = ["a-0", "a-1", "b-0", "b-1"].map((id) => view(id));
    for (let seed = 0; seed < 50; seed++) {
      const reasons: string[] = [];
      const policy = new DiversityPlacementPolicy({
        onDegrade: (r) => reasons.push(r),
        tenants,
        freeBytesByServer: free,
      });
      const chosen = ids(
        policy.chooseTargets(request(datanodes, { writerDatanodeId: "a-0", rng: new SeededRng(seed) })),
      );
      expect(chosen).toHaveLength(3);
      expect(new Set(chosen).size).toBe(3);
      expect(chosen[0]).toBe("a-0");
      // The second replica goes to b (the only new environment) only by giving up the column rule.
      expect(chosen[1]?.startsWith("b-")).toBe(true);
      expect(reasons.some((r) => /columns \{1\}.*relaxed the row\/column rule/.test(r))).toBe(true);
      expect(reasons.some((r) => /relaxed the environment rule/.test(r))).toBe(true);
    }
  });

  it("places outside the grid when every tenant's server is unfit, and returns fewer only when nodes run out", () => {
    const tenants: PlacementTenant[] = [
      { tenantId: "a", environment: "env-a", reimagesPerServerMonth: 1, peakCpuPct: 10, servers: ["a-0"] },
      { tenantId: "b", environment: "env-b", reimagesPerServerMonth: 5, peakCpuPct: 90, servers: ["b-0"] },
    ];
    const reasons: string[] = [];
    const policy = new DiversityPlacementPolicy({ onDegrade: (r) => reasons.push(r), tenants });
    const datanodes = [
      view("a-0", { primaryBusy: true }),
      view("b-0", { remainingBytes: 0 }),
      view("loose-1"),
      view("loose-2"),
    ];
    const chosen = ids(policy.chooseTargets(request(datanodes, { replication: 3 })));
    expect(chosen.sort()).toEqual(["loose-1", "loose-2"]);
    expect(reasons.some((r) => /placed outside the grid/.test(r))).toBe(true);
    expect(policy.chooseTargets(request(datanodes, { excluded: new Set(["loose-1", "loose-2"]) }))).toEqual([]);
  });

  it("places like the stock policy, saying so once per call, when it knows no tenants", () => {
    const reasons: string[] = [];
    const policy = new DiversityPlacementPolicy({ onDegrade: (r) => reasons.push(r) });
    const stock = new StockPlacementPolicy();
    const datanodes: DatanodeView[] = [];
    for (let r = 1; r <= 3; r++) for (let n = 1; n <= 4; n++) datanodes.push(view(`r${r}-n${n}`, { rack: `/r${r}` }));
    for (let seed = 0; seed < 20; seed++) {
      const asked = { writerDatanodeId: "r2-n3" };
      const got = ids(policy.chooseTargets(request(datanodes, { ...asked, rng: new SeededRng(seed) })));
      const want = ids(stock.chooseTargets(request(datanodes, { ...asked, rng: new SeededRng(seed) })));
      expect(got).toEqual(want);
      expect(got[0]).toBe("r2-n3");
    }
    expect(reasons).toHaveLength(20);
    expect(reasons.every((r) => /stock/.test(r))).toBe(true);
  });

  it("rebuilds the grid on setTenants and reports a datanode's cell", () => {
    const cluster = richCluster();
    const policy = policyFor(cluster);
    expect(policy.cellOfServer("server-0")).toEqual({ row: 0, col: 0 });
    expect(policy.cellOfServer("server-134")).toEqual({ row: 2, col: 2 });
    expect(policy.cellOfServer("server-900")).toBeUndefined();
    policy.setTenants(
      [{ tenantId: "solo", environment: "e", reimagesPerServerMonth: 1, peakCpuPct: 1, servers: ["server-900"] }],
      new Map([["server-900", GiB]]),
    );
    expect(policy.cellOfServer("server-0")).toBeUndefined();
    expect(policy.cellOfServer("server-900")).toEqual({ row: 1, col: 1 });
    expect(policy.grid.tenantCount).toBe(1);
  });

  it("sees views replaced in place in a datanode array it has seen before", () => {
    const cluster = richCluster();
    const policy = policyFor(cluster);
    const datanodes = cluster.serverIds.map((id) => view(id));
    const rng = new SeededRng(5);
    expect(ids(policy.chooseTargets(request(datanodes, { writerDatanodeId: "server-7", rng })))[0]).toBe("server-7");
    const at = datanodes.findIndex((d) => d.datanodeId === "server-7");
    datanodes[at] = view("server-7", { primaryBusy: true });
    for (let b = 0; b < 200; b++) {
      expect(ids(policy.chooseTargets(request(datanodes, { writerDatanodeId: "server-7", rng })))).not.toContain(
        "server-7",
      );
    }
  });
});
