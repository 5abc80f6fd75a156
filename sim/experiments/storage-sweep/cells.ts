/** The storage sweep's cells: its runs grouped by replication, blocks per server and bandwidth, with their figures. */
import type { StoragePlacement, StorageResult } from "../../results.js";
import { lossRatio } from "./ratio.js";
import type { LossRatio, SeedLoss } from "./ratio.js";

/** One run of the sweep: a storage run and the cell it belongs to. */
export interface StorageSweepRun extends StorageResult {
  /** Blocks written per server over the run (the cell's). */
  blocksPerServer: number;
}

/** One placement's figures in a cell, pooled over its seeds. */
export interface PlacementFigures {
  /** Blocks lost and written per seed, in the cell's seed order. */
  bySeed: SeedLoss[];
  lost: number;
  blocks: number;
  /** lost / blocks: the mean over seeds of the lost fraction, each seed weighted by the blocks it wrote. */
  lostFraction: number;
  accesses: number;
  unavailableAccesses: number;
  /** unavailableAccesses / accesses, pooled over seeds. */
  unavailableFraction: number;
}

/** One cell of the sweep: a replication factor, blocks per server and bandwidth, over every seed. */
export interface StorageSweepCell {
  replication: number;
  blocksPerServer: number;
  reReplicationMBps: number;
  seeds: number[];
  stock: PlacementFigures;
  diversity: PlacementFigures;
  /** Stock's lost fraction over diversity's, with its interval. */
  ratio: LossRatio;
}

/** The key of a cell. */
function cellKey(replication: number, blocksPerServer: number, mbps: number): string {
  return `${replication}/${blocksPerServer}/${mbps}`;
}

function figures(runs: readonly StorageSweepRun[]): PlacementFigures {
  const sum = (f: (r: StorageSweepRun) => number): number => runs.reduce((a, r) => a + f(r), 0);
  const lost = sum((r) => r.blocksLost);
  const blocks = sum((r) => r.blocks);
  const accesses = sum((r) => r.accesses);
  const unavailableAccesses = sum((r) => r.unavailableAccesses);
  return {
    bySeed: runs.map((r) => ({ lost: r.blocksLost, blocks: r.blocks })),
    lost,
    blocks,
    lostFraction: blocks > 0 ? lost / blocks : NaN,
    accesses,
    unavailableAccesses,
    unavailableFraction: accesses > 0 ? unavailableAccesses / accesses : NaN,
  };
}

/**
 * The sweep's cells from its runs, ordered by replication, blocks per server, then bandwidth. A cell takes the seeds
 * both placements ran with (a run missing for either placement leaves that seed out of the cell).
 */
export function summarizeStorageSweep(runs: readonly StorageSweepRun[]): StorageSweepCell[] {
  const byCell = new Map<string, Map<StoragePlacement, Map<number, StorageSweepRun>>>();
  for (const r of runs) {
    const key = cellKey(r.replication, r.blocksPerServer, r.reReplicationMBps);
    const cell = byCell.get(key) ?? new Map<StoragePlacement, Map<number, StorageSweepRun>>();
    byCell.set(key, cell);
    const bySeed = cell.get(r.placement) ?? new Map<number, StorageSweepRun>();
    cell.set(r.placement, bySeed);
    bySeed.set(r.seed, r);
  }
  const cells: StorageSweepCell[] = [];
  for (const cell of byCell.values()) {
    const stock = cell.get("stock") ?? new Map<number, StorageSweepRun>();
    const diversity = cell.get("diversity") ?? new Map<number, StorageSweepRun>();
    const seeds = [...stock.keys()].filter((s) => diversity.has(s)).sort((a, b) => a - b);
    if (seeds.length === 0) continue;
    const first = stock.get(seeds[0]!)!;
    const s = figures(seeds.map((seed) => stock.get(seed)!));
    const d = figures(seeds.map((seed) => diversity.get(seed)!));
    cells.push({
      replication: first.replication,
      blocksPerServer: first.blocksPerServer,
      reReplicationMBps: first.reReplicationMBps,
      seeds,
      stock: s,
      diversity: d,
      ratio: lossRatio(s.bySeed, d.bySeed),
    });
  }
  return cells.sort(
    (a, b) =>
      a.replication - b.replication ||
      a.blocksPerServer - b.blocksPerServer ||
      a.reReplicationMBps - b.reReplicationMBps,
  );
}
