/**
 * HDFS-H replica placement (seeds/004, section 4.2, Algorithm 2): primary tenants are sorted into a 3x3 grid of
 * reimage frequency (rows) by peak CPU utilisation (columns), and the replicas of a block go to cells that share no
 * row and no column, on tenants of distinct environments, so that no single reimaging wave or load spike takes every
 * replica away. A pure policy over plain data, shared by the namenode and the simulator.
 */
import type { Rng } from "../../common/rng.js";
import { shuffle } from "../../common/rng.js";
import { StockPlacementPolicy } from "./placement.js";
import type { DatanodeView, PlacementPolicy, PlacementRequest } from "./placement.js";

/** Rows and columns of the grid. */
const GRID_SIZE = 3;
/** Random draws tried before falling back to a scan (of a cell's tenants, or of a tenant's servers). */
const SAMPLE_TRIES = 4;
/** Algorithm 2 forgets the rows and columns it used after this many replicas (line 15). */
const MEMORY_SPAN = 3;

/** What the placement policy needs to know of a primary tenant (an environment, machine-function pair). */
export interface PlacementTenant {
  readonly tenantId: string;
  /** The AutoPilot-style environment; tenants of one environment are reimaged together, so count as one. */
  readonly environment: string;
  /** Historical disk reimages per server per month. */
  readonly reimagesPerServerMonth: number;
  /** Historical peak CPU utilisation of the tenant's average server, in percent. */
  readonly peakCpuPct: number;
  /** The tenant's servers (server ids equal datanode ids). */
  readonly servers: readonly string[];
}

/** A cell of the grid: row = reimage-frequency tier, column = peak-CPU tier, both 0 (lowest) to 2. */
export interface GridPosition {
  readonly row: number;
  readonly col: number;
}

/** A tenant as placed in the grid, with the free space counted for it and the servers it owns. */
export interface GridTenant extends PlacementTenant, GridPosition {
  readonly freeBytes: number;
}

/** The smallest and largest value of a statistic among a tier's tenants. */
export interface TierRange {
  readonly min: number;
  readonly max: number;
}

/** One of the nine cells. */
export interface DiversityCell extends GridPosition {
  /** Its tenants, by tenantId. */
  readonly tenants: readonly GridTenant[];
  readonly freeBytes: number;
  readonly serverCount: number;
  /** Peak CPU of its tenants; undefined for an empty cell. These are the column boundaries within the row. */
  readonly peakCpuPct: TierRange | undefined;
}

/** One reimage-frequency tier. */
export interface DiversityRow {
  readonly row: number;
  /** Reimage rates of its tenants; undefined for an empty row. These are the row boundaries. */
  readonly reimagesPerServerMonth: TierRange | undefined;
  readonly freeBytes: number;
  /** Its three cells, by column. */
  readonly cells: readonly DiversityCell[];
}

/** The 3x3 grid of Algorithm 2, built by {@link buildDiversityGrid}. */
export interface DiversityGrid {
  readonly tenantCount: number;
  readonly totalFreeBytes: number;
  /** The three rows, lowest reimage rate first. */
  readonly rows: readonly DiversityRow[];
  /** The nine cells, row-major. */
  readonly cells: readonly DiversityCell[];
  /** The cell at (row, col), or undefined outside 0..2. */
  cell(row: number, col: number): DiversityCell | undefined;
  cellOf(tenantId: string): GridPosition | undefined;
  /** The cell of a server's tenant; undefined for a server of no tenant. */
  cellOfServer(serverId: string): GridPosition | undefined;
  tenantOfServer(serverId: string): GridTenant | undefined;
}

/**
 * Sorts tenants into the 3x3 grid of seeds/004, Algorithm 2 (lines 4-5: "9 classes, each with the same total space").
 * The paper gives no procedure, so we read it as: rows are equal-space tertiles of reimage rate over all tenants (sort
 * by rate, then tenantId; a tenant belongs to the tier in which the midpoint of its span of cumulative free space
 * falls, cuts at 1/3 and 2/3 of the total), and within each row the columns are equal-space tertiles of peak CPU over
 * that row's tenants, the same way. Tenants are atomic, so cells hold about, not exactly, 1/9 of the space. A tenant
 * with no free space still gets the cell its position gives; when a whole set has no free space the tertiles count
 * tenants instead. A tenantId listed twice keeps its first entry; a server listed by two tenants belongs to the one
 * whose tenantId sorts first. An unknown (NaN) rate sorts as the highest.
 */
export function buildDiversityGrid(
  tenants: readonly PlacementTenant[],
  freeBytesByServer: ReadonlyMap<string, number>,
): DiversityGrid {
  const seen = new Set<string>();
  const unique: PlacementTenant[] = [];
  for (const t of tenants) {
    if (seen.has(t.tenantId)) continue;
    seen.add(t.tenantId);
    unique.push(t);
  }
  unique.sort((a, b) => compareIds(a.tenantId, b.tenantId));

  const owner = new Set<string>();
  const sized = unique.map((t) => {
    const servers: string[] = [];
    let freeBytes = 0;
    for (const s of t.servers) {
      if (owner.has(s)) continue;
      owner.add(s);
      servers.push(s);
      const free = freeBytesByServer.get(s) ?? 0;
      if (free > 0) freeBytes += free;
    }
    return { tenant: t, servers, freeBytes };
  });

  const rowTiers = tertiles(sized, (x) => x.tenant.reimagesPerServerMonth);
  const placed: GridTenant[] = [];
  for (let row = 0; row < GRID_SIZE; row++) {
    const members = sized.filter((_, i) => rowTiers[i] === row);
    const colTiers = tertiles(members, (x) => x.tenant.peakCpuPct);
    members.forEach((m, i) => {
      const t = m.tenant;
      placed.push({
        tenantId: t.tenantId,
        environment: t.environment,
        reimagesPerServerMonth: t.reimagesPerServerMonth,
        peakCpuPct: t.peakCpuPct,
        servers: m.servers,
        freeBytes: m.freeBytes,
        row,
        col: colTiers[i] ?? 0,
      });
    });
  }
  placed.sort((a, b) => compareIds(a.tenantId, b.tenantId));

  const byTenant = new Map<string, GridTenant>();
  const byServer = new Map<string, GridTenant>();
  for (const t of placed) {
    byTenant.set(t.tenantId, t);
    for (const s of t.servers) byServer.set(s, t);
  }
  const cells: DiversityCell[] = [];
  for (let row = 0; row < GRID_SIZE; row++) {
    for (let col = 0; col < GRID_SIZE; col++) {
      const members = placed.filter((t) => t.row === row && t.col === col);
      cells.push({
        row,
        col,
        tenants: members,
        freeBytes: sum(members.map((t) => t.freeBytes)),
        serverCount: sum(members.map((t) => t.servers.length)),
        peakCpuPct: range(members.map((t) => t.peakCpuPct)),
      });
    }
  }
  const rows: DiversityRow[] = [];
  for (let row = 0; row < GRID_SIZE; row++) {
    const members = placed.filter((t) => t.row === row);
    rows.push({
      row,
      reimagesPerServerMonth: range(members.map((t) => t.reimagesPerServerMonth)),
      freeBytes: sum(members.map((t) => t.freeBytes)),
      cells: cells.slice(row * GRID_SIZE, (row + 1) * GRID_SIZE),
    });
  }
  const position = (t: GridTenant | undefined): GridPosition | undefined =>
    t ? { row: t.row, col: t.col } : undefined;
  return {
    tenantCount: placed.length,
    totalFreeBytes: sum(placed.map((t) => t.freeBytes)),
    rows,
    cells,
    cell: (row, col) => (inGrid(row) && inGrid(col) ? cells[row * GRID_SIZE + col] : undefined),
    cellOf: (tenantId) => position(byTenant.get(tenantId)),
    cellOfServer: (serverId) => position(byServer.get(serverId)),
    tenantOfServer: (serverId) => byServer.get(serverId),
  };
}

/** Options of {@link DiversityPlacementPolicy}. */
export interface DiversityPlacementOptions {
  /**
   * Told, with a readable reason, whenever a replica could only be placed by relaxing a rule of Algorithm 2, and once
   * per call when there are no tenants and placement falls back to the stock policy. @default undefined (silent)
   */
  readonly onDegrade?: (reason: string) => void;
  /** The primary tenants to start with; {@link DiversityPlacementPolicy.setTenants} replaces them. @default [] */
  readonly tenants?: readonly PlacementTenant[];
  /** Free space per server for the initial grid. @default empty (every tenant counts zero space) */
  readonly freeBytesByServer?: ReadonlyMap<string, number>;
}

/** A tenant of a cell as the policy samples it. */
interface TenantSlot {
  readonly tenant: GridTenant;
  /** Sampling weight: its free space, at least 1 so that tenants without space are uniform among themselves. */
  readonly weight: number;
  /** Its servers, as indices into {@link GridIndex.serverIds}. */
  readonly servers: Int32Array;
}

/** A cell's tenants with prefix sums of their weights, for O(log n) weighted draws. */
interface CellSlot {
  readonly row: number;
  readonly col: number;
  readonly tenants: readonly TenantSlot[];
  readonly cumulative: Float64Array;
}

/** What setTenants precomputes: grid servers are numbered so that the hot path avoids string-keyed maps. */
interface GridIndex {
  readonly cells: readonly CellSlot[];
  readonly serverIds: readonly string[];
  readonly serverNumbers: ReadonlyMap<string, number>;
  /** The tenant of each numbered server. */
  readonly tenantOfServer: readonly TenantSlot[];
}

function indexGrid(grid: DiversityGrid): GridIndex {
  const serverIds: string[] = [];
  const serverNumbers = new Map<string, number>();
  const tenantOfServer: TenantSlot[] = [];
  const cells = grid.cells.map((cell) => {
    const tenants = cell.tenants.map((tenant) => {
      const servers = new Int32Array(tenant.servers.length);
      const slot: TenantSlot = { tenant, weight: Math.max(1, tenant.freeBytes), servers };
      tenant.servers.forEach((id, i) => {
        servers[i] = serverIds.length;
        serverNumbers.set(id, serverIds.length);
        serverIds.push(id);
        tenantOfServer.push(slot);
      });
      return slot;
    });
    const cumulative = new Float64Array(tenants.length);
    let acc = 0;
    tenants.forEach((t, i) => {
      acc += t.weight;
      cumulative[i] = acc;
    });
    return { row: cell.row, col: cell.col, tenants, cumulative };
  });
  return { cells, serverIds, serverNumbers, tenantOfServer };
}

/**
 * Where each datanode sits in a `req.datanodes` array. Kept while the same array (same length) comes back, so that a
 * caller reusing one array pays O(1) per lookup; every hit is checked against the id, and a miss on a known id (the
 * array was rearranged in place) rebuilds the index, at most once per call.
 */
class DatanodeIndex {
  private array: readonly DatanodeView[] = [];
  private length = -1;
  private stale = true;
  private rebuiltThisCall = false;
  /** Position of each datanode that is not a grid server. */
  private positions = new Map<string, number>();
  /** Position of each numbered grid server in the array, -1 when it is not a live datanode. */
  private gridPositions = new Int32Array(0);

  constructor(private grid: GridIndex) {}

  setGrid(grid: GridIndex): void {
    this.grid = grid;
    this.stale = true;
  }

  begin(datanodes: readonly DatanodeView[]): void {
    if (this.stale || datanodes !== this.array || datanodes.length !== this.length) this.rebuild(datanodes);
    this.rebuiltThisCall = false;
  }

  byId(id: string): DatanodeView | undefined {
    const server = this.grid.serverNumbers.get(id);
    if (server !== undefined) return this.byServer(server);
    const at = this.positions.get(id);
    if (at === undefined) return undefined;
    const view = this.array[at];
    if (view?.datanodeId === id) return view;
    return this.retry() ? this.byId(id) : undefined;
  }

  /** The view of numbered grid server `server`. */
  byServer(server: number): DatanodeView | undefined {
    const at = this.gridPositions[server] ?? -1;
    if (at < 0) return undefined;
    const view = this.array[at];
    if (view !== undefined && view.datanodeId === this.grid.serverIds[server]) return view;
    return this.retry() ? this.byServer(server) : undefined;
  }

  private retry(): boolean {
    if (this.rebuiltThisCall) return false;
    this.rebuiltThisCall = true;
    this.rebuild(this.array);
    return true;
  }

  private rebuild(datanodes: readonly DatanodeView[]): void {
    const positions = new Map<string, number>();
    const gridPositions = new Int32Array(this.grid.serverIds.length).fill(-1);
    for (let i = 0; i < datanodes.length; i++) {
      const id = (datanodes[i] as DatanodeView).datanodeId;
      const server = this.grid.serverNumbers.get(id);
      if (server !== undefined) gridPositions[server] = i;
      else positions.set(id, i);
    }
    this.positions = positions;
    this.gridPositions = gridPositions;
    this.array = datanodes;
    this.length = datanodes.length;
    this.stale = false;
  }
}

/**
 * HDFS-H placement (seeds/004, Algorithm 2). The first replica goes on the writer's datanode when it qualifies (not
 * excluded, primary not busy, room for a block), else like any other replica. Each next replica goes to a cell that
 * shares no row and no column with the cells used so far, chosen uniformly among the cells that can take it (the cells
 * hold about equal space by construction); within the cell to a tenant whose environment holds no replica yet, drawn
 * with probability proportional to its free space so that space fills evenly; within the tenant to a uniformly random
 * qualifying server. The row/column memory is forgotten after every third replica; environments stay distinct for as
 * long as possible. When the cluster cannot meet the rules, they are relaxed in order (row/column, then environment,
 * then the grid itself) and each relaxation is reported through `onDegrade`; fewer targets come back only when fewer
 * datanodes qualify at all.
 *
 * Cost per call: the grid, per-cell tenant lists and per-tenant (numbered) server lists are built in
 * {@link setTenants}. The position of each datanode in `req.datanodes` is indexed once per distinct array (identity
 * and length), so a caller that reuses one array, replacing views in place, pays O(1) per lookup; a fresh array per
 * call costs one O(n) pass, as the stock policy does. Cells, tenants and servers are drawn at random and checked, with
 * a scan only after a few misses. Only the last relaxation (outside the grid) scans all datanodes.
 */
export class DiversityPlacementPolicy implements PlacementPolicy {
  readonly name = "diversity";
  private readonly onDegrade: ((reason: string) => void) | undefined;
  private readonly stock = new StockPlacementPolicy();
  private currentGrid: DiversityGrid;
  private index: GridIndex;
  private readonly datanodeIndex: DatanodeIndex;

  constructor(options: DiversityPlacementOptions = {}) {
    this.onDegrade = options.onDegrade;
    this.currentGrid = buildDiversityGrid(options.tenants ?? [], options.freeBytesByServer ?? new Map());
    this.index = indexGrid(this.currentGrid);
    this.datanodeIndex = new DatanodeIndex(this.index);
  }

  /** The grid placement currently uses. */
  get grid(): DiversityGrid {
    return this.currentGrid;
  }

  /** Rebuilds the grid from fresh tenant statistics and free space (the namenode calls it on every tenant refresh). */
  setTenants(tenants: readonly PlacementTenant[], freeBytesByServer: ReadonlyMap<string, number>): void {
    this.currentGrid = buildDiversityGrid(tenants, freeBytesByServer);
    this.index = indexGrid(this.currentGrid);
    this.datanodeIndex.setGrid(this.index);
  }

  /** The grid cell of a server (datanode), or undefined when it belongs to no tenant. */
  cellOfServer(serverId: string): GridPosition | undefined {
    return this.currentGrid.cellOfServer(serverId);
  }

  chooseTargets(req: PlacementRequest): DatanodeView[] {
    if (this.currentGrid.tenantCount === 0) {
      this.onDegrade?.("no primary tenants known; placed like the stock policy");
      return this.stock.chooseTargets(req);
    }
    this.datanodeIndex.begin(req.datanodes);
    const placement = new Placement(req, this.index, this.datanodeIndex, this.onDegrade);
    for (const id of req.existing ?? []) placement.replay(id);
    for (let i = 0; i < req.replication; i++) if (!placement.next()) break;
    return placement.chosen;
  }
}

/** The state of one chooseTargets call: what is chosen, and the rows, columns and environments already used. */
class Placement {
  /** Replicas are few, so plain arrays beat sets here. */
  private readonly taken: string[] = [];
  private readonly environments: string[] = [];
  /** Bit i set: row (column) i holds a replica since the memory was last forgotten. */
  private rowMask = 0;
  private colMask = 0;
  private replicas = 0;
  /** The datanodes chosen so far, in pipeline order. */
  readonly chosen: DatanodeView[] = [];

  constructor(
    private readonly req: PlacementRequest,
    private readonly grid: GridIndex,
    private readonly datanodes: DatanodeIndex,
    private readonly report: ((reason: string) => void) | undefined,
  ) {}

  /** Accounts for a replica that already exists, as if this call had chosen it. */
  replay(id: string): void {
    this.taken.push(id);
    this.remember(this.tenantOf(id));
  }

  /** Chooses the next replica, relaxing rules as needed; undefined when no datanode qualifies at all. */
  next(): DatanodeView | undefined {
    const chosen = this.choose();
    if (chosen) {
      this.chosen.push(chosen.view);
      this.taken.push(chosen.view.datanodeId);
      this.remember(chosen.tenant ?? this.tenantOf(chosen.view.datanodeId));
    }
    return chosen?.view;
  }

  private choose(): Choice | undefined {
    const n = this.replicas + 1;
    const writer = this.req.writerDatanodeId;
    if (this.replicas === 0 && writer !== undefined) {
      const view = this.datanodes.byId(writer);
      if (view && this.qualifies(view)) return { view };
    }
    const rows = this.rowMask;
    const cols = this.colMask;
    const free = (c: CellSlot): boolean => ((rows >> c.row) & 1) === 0 && ((cols >> c.col) & 1) === 0;
    const strict = this.fromCells(free, true);
    if (strict) return strict;
    const reasons: string[] = [];
    if (rows !== 0 || cols !== 0) {
      reasons.push(
        `replica ${n}: no cell free of rows ${maskText(rows)} and columns ${maskText(cols)} has a qualifying server ` +
          `in a new environment; relaxed the row/column rule`,
      );
      const anyCell = this.fromCells(() => true, true);
      if (anyCell) return this.degraded(reasons, anyCell);
    }
    // With no environment used yet the rule excluded nothing, so relaxing it cannot help.
    if (this.environments.length > 0) {
      reasons.push(
        `replica ${n}: no qualifying server of a tenant in a new environment (used: {${this.environments.join(", ")}}); ` +
          `relaxed the environment rule`,
      );
      const anyTenant = this.fromCells(() => true, false);
      if (anyTenant) return this.degraded(reasons, anyTenant);
    }
    reasons.push(`replica ${n}: no qualifying server of a primary tenant left; placed outside the grid`);
    const outside = this.outsideGrid();
    return outside ? this.degraded(reasons, { view: outside }) : undefined;
  }

  private degraded(reasons: readonly string[], choice: Choice): Choice {
    if (this.report) for (const r of reasons) this.report(r);
    return choice;
  }

  /** A qualifying server in a uniformly random cell among those passing `cellOk` that can take one. */
  private fromCells(cellOk: (c: CellSlot) => boolean, newEnvironment: boolean): Choice | undefined {
    const candidates = this.grid.cells.filter((c) => c.tenants.length > 0 && cellOk(c));
    // Trying the cells in random order makes the first that can take the replica a uniform choice among those.
    shuffle(candidates, this.req.rng);
    for (const cell of candidates) {
      const choice = this.fromCell(cell, newEnvironment);
      if (choice) return choice;
    }
    return undefined;
  }

  /** A server of a tenant of `cell` drawn in proportion to free space, among tenants with a qualifying server. */
  private fromCell(cell: CellSlot, newEnvironment: boolean): Choice | undefined {
    const rng = this.req.rng;
    const acceptable = (s: TenantSlot): boolean => !newEnvironment || !this.environments.includes(s.tenant.environment);
    const tried: TenantSlot[] = [];
    const total = cell.cumulative[cell.cumulative.length - 1] ?? 0;
    for (let i = 0; i < SAMPLE_TRIES; i++) {
      const slot = cell.tenants[upperBound(cell.cumulative, rng.next() * total)];
      if (!slot || tried.includes(slot)) continue;
      tried.push(slot);
      if (!acceptable(slot)) continue;
      const view = this.fromTenant(slot);
      if (view) return { view, tenant: slot };
    }
    // Exponential races (key -ln(u)/w, smallest first) give a weighted order without replacement, so the first
    // tenant in it that can take the replica is still a draw in proportion to weight among those that can.
    const order = cell.tenants
      .filter((s) => !tried.includes(s) && acceptable(s))
      .map((s) => ({ s, key: -Math.log(1 - rng.next()) / s.weight }))
      .sort((a, b) => a.key - b.key);
    for (const { s } of order) {
      const view = this.fromTenant(s);
      if (view) return { view, tenant: s };
    }
    return undefined;
  }

  /** A uniformly random qualifying server of a tenant. */
  private fromTenant(tenant: TenantSlot): DatanodeView | undefined {
    const rng = this.req.rng;
    const servers = tenant.servers;
    for (let i = 0; i < SAMPLE_TRIES && servers.length > 0; i++) {
      const view = this.datanodes.byServer(servers[pickIndex(rng, servers.length)] ?? -1);
      if (view && this.qualifies(view)) return view;
    }
    const all: DatanodeView[] = [];
    for (const server of servers) {
      const view = this.datanodes.byServer(server);
      if (view && this.qualifies(view)) all.push(view);
    }
    return all[pickIndex(rng, all.length)];
  }

  /** Any qualifying datanode, tenant or not (the grid's servers are exhausted by the time this runs). */
  private outsideGrid(): DatanodeView | undefined {
    const all = this.req.datanodes.filter((d) => this.qualifies(d));
    return all[pickIndex(this.req.rng, all.length)];
  }

  private qualifies(d: DatanodeView): boolean {
    return (
      !d.primaryBusy &&
      d.remainingBytes >= this.req.blockSizeBytes &&
      !this.req.excluded.has(d.datanodeId) &&
      !this.taken.includes(d.datanodeId)
    );
  }

  private tenantOf(id: string): TenantSlot | undefined {
    const server = this.grid.serverNumbers.get(id);
    return server === undefined ? undefined : this.grid.tenantOfServer[server];
  }

  /** Records a replica's cell and environment (Algorithm 2, lines 9-13) and forgets rows and columns (line 16). */
  private remember(slot: TenantSlot | undefined): void {
    if (slot) {
      this.rowMask |= 1 << slot.tenant.row;
      this.colMask |= 1 << slot.tenant.col;
      if (!this.environments.includes(slot.tenant.environment)) this.environments.push(slot.tenant.environment);
    }
    this.replicas++;
    if (this.replicas % MEMORY_SPAN === 0) {
      this.rowMask = 0;
      this.colMask = 0;
    }
  }
}

/** A chosen datanode and, when it was drawn from the grid, its tenant. */
interface Choice {
  readonly view: DatanodeView;
  readonly tenant?: TenantSlot;
}

/** Equal-weight tertiles of `items` by `key` (see buildDiversityGrid); the tier of each item, in input order. */
function tertiles<T extends { tenant: PlacementTenant; freeBytes: number }>(
  items: readonly T[],
  key: (item: T) => number,
): number[] {
  const total = sum(items.map((x) => x.freeBytes));
  const weight = (x: T): number => (total > 0 ? x.freeBytes : 1);
  const totalWeight = total > 0 ? total : items.length;
  const order = items.map((_, i) => i);
  const sortKey = (i: number): number => {
    const k = key(items[i] as T);
    return Number.isNaN(k) ? Infinity : k;
  };
  order.sort(
    (a, b) => sortKey(a) - sortKey(b) || compareIds((items[a] as T).tenant.tenantId, (items[b] as T).tenant.tenantId),
  );
  const tiers = new Array<number>(items.length).fill(0);
  let cumulative = 0;
  for (const i of order) {
    const w = weight(items[i] as T);
    const midpoint = cumulative + w / 2;
    tiers[i] = Math.min(GRID_SIZE - 1, Math.floor((GRID_SIZE * midpoint) / totalWeight));
    cumulative += w;
  }
  return tiers;
}

/** Code-unit order, independent of the locale. */
function compareIds(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

function sum(values: readonly number[]): number {
  let s = 0;
  for (const v of values) s += v;
  return s;
}

function range(values: readonly number[]): TierRange | undefined {
  if (values.length === 0) return undefined;
  return { min: Math.min(...values), max: Math.max(...values) };
}

function inGrid(i: number): boolean {
  return Number.isInteger(i) && i >= 0 && i < GRID_SIZE;
}

/** The first index whose prefix sum exceeds `x`. */
function upperBound(cumulative: Float64Array, x: number): number {
  let lo = 0;
  let hi = cumulative.length - 1;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if ((cumulative[mid] ?? 0) > x) hi = mid;
    else lo = mid + 1;
  }
  return lo;
}

/** A uniform index in [0, n); -1 when n is 0, which indexes nothing. */
function pickIndex(rng: Rng, n: number): number {
  return Math.min(n - 1, Math.floor(rng.next() * n));
}

function maskText(mask: number): string {
  const bits: number[] = [];
  for (let i = 0; i < GRID_SIZE; i++) if ((mask >> i) & 1) bits.push(i);
  return `{${bits.join(", ")}}`;
}
