/**
 * The namenode's web side, what its two halves share: a read-only REST API (WebHDFS shapes under `/webhdfs/v1`,
 * Harvest's own under `/ws/v1/nn`: web-api.ts) and server-rendered pages (web-pages.ts) on the daemon's `WebServer`.
 * Neither keeps data of its own: every route reads through {@link NameNodeWebSource}, whose functions are the ones the
 * gRPC services call (the same listing, the same fsck, the same datanode reports), with the web caller held to the
 * same DFS permissions.
 */
import type { Caller } from "./policy/permissions.js";
import type { ContentSummary } from "./namespace.js";
import type { DiversityGrid, TierRange } from "./policy/diversity-placement.js";
import type { NameNodeSummary } from "./nn-metrics.js";
import type { Principal } from "../common/auth.js";
import type { BlockOutput } from "../proto/generated/harvest/v1/Block.js";
import type { DatanodeInfoOutput } from "../proto/generated/harvest/v1/DatanodeInfo.js";
import type { DatanodeReportOutput } from "../proto/generated/harvest/v1/DatanodeReport.js";
import type { FileStatusOutput } from "../proto/generated/harvest/v1/FileStatus.js";
import type { FsckReportOutput } from "../proto/generated/harvest/v1/FsckReport.js";

/** A block of a file with where its good replicas are, in the order a reader would try them. */
export interface LocatedBlockView {
  block: BlockOutput;
  /** Offset of its first byte in the file. */
  offset: number;
  locations: DatanodeInfoOutput[];
}

/** The blocks of (a range of) a file: what GetBlockLocations answers, without the block tokens. */
export interface FileBlockLocations {
  fileLength: number;
  /** False while a writer holds the file open (its last block has no final length yet). */
  complete: boolean;
  blocks: LocatedBlockView[];
}

/** What the web routes read, each function shared with the gRPC service that answers the same question. */
export interface NameNodeWebSource {
  /** The namenode at a glance (also what the metrics' gauges read). */
  summary(): NameNodeSummary;
  /**
   * The DFS caller of a web request: the certificate's or web token's name (the `admin` role is the superuser); on an
   * insecure namenode (no principal) the superuser. Undefined when permissions are off (nothing is checked).
   */
  callerOf(principal: Principal | undefined): Caller | undefined;
  /** ClientNamenode.List. */
  list(path: string, caller: Caller | undefined): FileStatusOutput[];
  /** ClientNamenode.Stat. */
  stat(path: string, caller: Caller | undefined): FileStatusOutput;
  /** What a subtree holds (HDFS's getContentSummary; READ_EXECUTE on its directories). */
  contentSummary(path: string, caller: Caller | undefined): ContentSummary;
  /** ClientNamenode.GetBlockLocations without tokens; `length` 0 means to the end of the file. */
  blockLocations(path: string, offset: number, length: number, caller: Caller | undefined): FileBlockLocations;
  /** ClientNamenode.Fsck (READ_EXECUTE on every directory it walks). */
  fsck(path: string, caller: Caller | undefined): FsckReportOutput;
  /** ClientNamenode.GetDatanodes, sorted by id. */
  datanodes(): DatanodeReportOutput[];
  /** Where the good replicas sit in the diversity grid. */
  placement(): PlacementReport;
}

// ------------------------------------------------------------------------------------------------ placement grid

/** Names of the three tiers of a grid axis, lowest first. */
export const TIER_NAMES = ["low", "medium", "high"] as const;

/** One cell of the placement grid: its tenants and how many good replicas sit on their servers. */
export interface PlacementCellReport {
  /** Reimage-frequency tier, 0 (rarest) to 2. */
  row: number;
  /** Peak-CPU tier, 0 (calmest) to 2. */
  col: number;
  tenants: string[];
  servers: number;
  freeBytes: number;
  /** Peak CPU of its tenants; null for an empty cell. */
  peakCpuPct: TierRange | null;
  /** Good replicas on live datanodes of its tenants' servers. */
  replicas: number;
}

/** One reimage-frequency tier of the grid. */
export interface PlacementRowReport {
  row: number;
  /** Reimage rates of its tenants; null for an empty row. */
  reimagesPerServerMonth: TierRange | null;
  /** Its three cells, by peak-CPU tier. */
  cells: PlacementCellReport[];
}

/**
 * The replica placement grid of seeds/004 Algorithm 2 (rows: reimage frequency, columns: peak CPU) with the replicas in
 * each cell. Under the stock policy the namenode reads no tenants: the grid is empty and every replica is outside it.
 */
export interface PlacementReport {
  /** "stock" or "diversity". */
  policy: string;
  /** Tenants in the grid. */
  tenants: number;
  rows: PlacementRowReport[];
  /** Good replicas of committed blocks on live datanodes. */
  replicas: number;
  /** Those on a datanode of no tenant. */
  replicasOutsideGrid: number;
  /** Committed blocks with a good replica on a live datanode. */
  blocks: number;
  /** Blocks two of whose replicas share a row or a column: what Algorithm 2 avoids (it relaxes when it must). */
  blocksSharingRowOrColumn: number;
}

/**
 * Counts the good replicas of each block (their datanode ids) into the cells of `grid` (undefined: no grid, as under
 * the stock policy). Pure: the namenode passes its block map's live replicas.
 */
export function placementReport(
  policy: string,
  grid: DiversityGrid | undefined,
  replicasOfBlocks: Iterable<readonly string[]>,
): PlacementReport {
  const counts = new Map<string, number>();
  let replicas = 0;
  let outside = 0;
  let blocks = 0;
  let sharing = 0;
  for (const holders of replicasOfBlocks) {
    if (holders.length === 0) continue;
    blocks += 1;
    const rows = new Set<number>();
    const cols = new Set<number>();
    let shares = false;
    for (const id of holders) {
      replicas += 1;
      const at = grid?.cellOfServer(id);
      if (!at) {
        outside += 1;
        continue;
      }
      const key = `${at.row},${at.col}`;
      counts.set(key, (counts.get(key) ?? 0) + 1);
      if (rows.has(at.row) || cols.has(at.col)) shares = true;
      rows.add(at.row);
      cols.add(at.col);
    }
    if (shares) sharing += 1;
  }
  const rows: PlacementRowReport[] = TIER_NAMES.map((_, row) => {
    const r = grid?.rows[row];
    return {
      row,
      reimagesPerServerMonth: r?.reimagesPerServerMonth ?? null,
      cells: TIER_NAMES.map((__, col) => {
        const c = grid?.cell(row, col);
        return {
          row,
          col,
          tenants: c ? c.tenants.map((t) => t.tenantId) : [],
          servers: c?.serverCount ?? 0,
          freeBytes: c?.freeBytes ?? 0,
          peakCpuPct: c?.peakCpuPct ?? null,
          replicas: counts.get(`${row},${col}`) ?? 0,
        };
      }),
    };
  });
  return {
    policy,
    tenants: grid?.tenantCount ?? 0,
    rows,
    replicas,
    replicasOutsideGrid: outside,
    blocks,
    blocksSharingRowOrColumn: sharing,
  };
}
