/**
 * The block map: for every block of the namespace, the file it belongs to, the replication it should have and the
 * datanodes holding a finalized replica. Built from the namespace at start with no locations: as in HDFS, locations
 * come only from the datanodes' block reports. Pure bookkeeping (no I/O, no timers); the daemon turns the deletions
 * it returns into commands. Every change is told to an optional listener (the replication monitor: see
 * `replicatedBlockMap`).
 */
import type { Rng } from "../common/rng.js";
import type { BlockRecord } from "./namespace-store.js";
import type { PlacementPolicy } from "./policy/placement.js";
import { ReplicationMonitor } from "./policy/replication-monitor.js";
import type { BlockEventListener, ReplicationMonitorOptions } from "./policy/replication-monitor.js";

/** A replica a datanode reported. */
export interface ReplicaInfo {
  readonly datanodeId: string;
  genStamp: number;
  numBytes: number;
  /** A corrupt replica does not count as live and is never a copy source. */
  corrupt: boolean;
  /** Why it is corrupt (stale gen stamp, wrong length, a reader's checksum report). */
  reason: string;
}

/** A block the namespace knows. */
export interface BlockInfo {
  readonly blockId: number;
  genStamp: number;
  /** The committed length (0 until committed). */
  numBytes: number;
  inodeId: number;
  expectedReplication: number;
  /** The length is final (every block but the last of an open file). */
  committed: boolean;
  readonly replicas: Map<string, ReplicaInfo>;
  /** Datanodes told to delete their replica that have not confirmed it yet: no copy goes to them meanwhile. */
  readonly deleting: Set<string>;
}

/** A replica to delete: the datanode and the block as it holds it. */
export interface ReplicaDeletion {
  datanodeId: string;
  block: BlockRecord;
}

/** The block map. */
export class BlockManager {
  private readonly blocks = new Map<number, BlockInfo>();
  /** Block ids with a replica on each datanode. */
  private readonly byDatanode = new Map<string, Set<number>>();
  /**
   * Replicas the namenode told a datanode to delete that it has not confirmed yet: a report still listing one (sent
   * before the datanode acted) must not bring it back as a good replica.
   */
  private readonly invalidated = new Map<string, Set<number>>();

  /** Told of every block, replica and datanode change. */
  listener: BlockEventListener | undefined;

  constructor(listener?: BlockEventListener) {
    this.listener = listener;
  }

  /** Adds a block of the namespace (at start, or when allocated). */
  addBlock(block: BlockRecord, inodeId: number, expectedReplication: number, committed: boolean): void {
    this.blocks.set(block.blockId, {
      blockId: block.blockId,
      genStamp: block.genStamp,
      numBytes: block.numBytes,
      inodeId,
      expectedReplication,
      committed,
      replicas: new Map(),
      deleting: new Set(),
    });
    this.listener?.blockChanged(block.blockId);
  }

  /** Makes a block's length final; replicas of another length become corrupt. */
  commitBlock(block: BlockRecord): void {
    const info = this.blocks.get(block.blockId);
    if (!info) return;
    info.numBytes = block.numBytes;
    info.committed = true;
    for (const r of info.replicas.values()) this.judge(info, r);
    this.listener?.blockChanged(block.blockId);
  }

  /** The file's replication changed: its blocks should have `expectedReplication` replicas. */
  setExpectedReplication(blockId: number, expectedReplication: number): void {
    const info = this.blocks.get(blockId);
    if (!info || info.expectedReplication === expectedReplication) return;
    info.expectedReplication = expectedReplication;
    this.listener?.blockChanged(blockId);
  }

  /** Forgets blocks that left the namespace; returns their replicas, which the datanodes should delete. */
  removeBlocks(blocks: readonly BlockRecord[]): ReplicaDeletion[] {
    const out: ReplicaDeletion[] = [];
    for (const b of blocks) {
      const info = this.blocks.get(b.blockId);
      if (!info) continue;
      for (const r of info.replicas.values()) {
        out.push({
          datanodeId: r.datanodeId,
          block: { blockId: b.blockId, genStamp: r.genStamp, numBytes: r.numBytes },
        });
        this.byDatanode.get(r.datanodeId)?.delete(b.blockId);
      }
      this.blocks.delete(b.blockId);
      this.listener?.blockRemoved(b.blockId);
    }
    return out;
  }

  /** A block by id. */
  get(blockId: number): BlockInfo | undefined {
    return this.blocks.get(blockId);
  }

  /** Every block. */
  all(): IterableIterator<BlockInfo> {
    return this.blocks.values();
  }

  /** The good (not corrupt) replicas of a block. */
  liveReplicas(blockId: number): ReplicaInfo[] {
    return [...(this.blocks.get(blockId)?.replicas.values() ?? [])].filter((r) => !r.corrupt);
  }

  /** Replicas recorded on a datanode. */
  replicaCount(datanodeId: string): number {
    return this.byDatanode.get(datanodeId)?.size ?? 0;
  }

  /** The ids of the blocks with a replica (good or corrupt) on a datanode (a copy: the caller may change the map). */
  blocksOn(datanodeId: string): number[] {
    return [...(this.byDatanode.get(datanodeId) ?? [])];
  }

  /** Committed blocks, and how many of them have at least one good replica (safe mode's measure). */
  reportedCounts(): { total: number; reported: number } {
    let total = 0;
    let reported = 0;
    for (const info of this.blocks.values()) {
      if (!info.committed) continue;
      total += 1;
      for (const r of info.replicas.values()) {
        if (!r.corrupt) {
          reported += 1;
          break;
        }
      }
    }
    return { total, reported };
  }

  /**
   * A full block report: the datanode holds exactly `reported`. Replicas the namespace does not know are to be
   * deleted (returned); recorded replicas missing from the report are forgotten.
   */
  fullReport(datanodeId: string, reported: readonly BlockRecord[]): BlockRecord[] {
    const previous = new Set(this.byDatanode.get(datanodeId) ?? []);
    const pendingDeletes = this.invalidated.get(datanodeId);
    const listed = new Set(reported.map((b) => b.blockId));
    // Deletions the report shows done are settled.
    for (const blockId of pendingDeletes ?? []) if (!listed.has(blockId)) this.settleDeletion(datanodeId, blockId);
    const toDelete: BlockRecord[] = [];
    for (const b of reported) {
      previous.delete(b.blockId);
      const del = this.received(datanodeId, b);
      if (del) toDelete.push(del);
    }
    for (const blockId of previous) this.removeReplica(datanodeId, blockId);
    return toDelete;
  }

  /**
   * One finalized replica on a datanode (incremental report). Returns the block if the namespace does not know it
   * (the datanode should delete it). A stale gen stamp or, for a committed block, a wrong length marks it corrupt.
   */
  received(datanodeId: string, b: BlockRecord): BlockRecord | undefined {
    const info = this.blocks.get(b.blockId);
    if (!info) return { blockId: b.blockId, genStamp: b.genStamp, numBytes: b.numBytes };
    if (this.invalidated.get(datanodeId)?.has(b.blockId)) return undefined;
    const existing = info.replicas.get(datanodeId);
    const replica: ReplicaInfo = existing ?? { datanodeId, genStamp: 0, numBytes: 0, corrupt: false, reason: "" };
    // A reader's checksum report sticks to that generation of the replica (a block report cannot see bad bytes).
    if (existing && existing.genStamp !== b.genStamp) {
      replica.corrupt = false;
      replica.reason = "";
    }
    replica.genStamp = b.genStamp;
    replica.numBytes = b.numBytes;
    info.replicas.set(datanodeId, replica);
    this.index(datanodeId).add(b.blockId);
    this.judge(info, replica);
    this.listener?.blockChanged(b.blockId);
    return undefined;
  }

  /** A replica the datanode reports deleted (incremental report). */
  removeReplica(datanodeId: string, blockId: number): boolean {
    const settled = this.settleDeletion(datanodeId, blockId);
    this.byDatanode.get(datanodeId)?.delete(blockId);
    const removed = this.blocks.get(blockId)?.replicas.delete(datanodeId) ?? false;
    if (removed || settled) this.listener?.blockChanged(blockId);
    return removed;
  }

  /** A deletion the namenode asked for is done (or moot): the datanode may receive the block again. */
  private settleDeletion(datanodeId: string, blockId: number): boolean {
    const settled = this.invalidated.get(datanodeId)?.delete(blockId) ?? false;
    this.blocks.get(blockId)?.deleting.delete(datanodeId);
    return settled;
  }

  /** The namenode told the datanode to delete this replica: it no longer counts, and reports of it are ignored. */
  invalidate(datanodeId: string, blockId: number): void {
    this.removeReplica(datanodeId, blockId);
    this.blocks.get(blockId)?.deleting.add(datanodeId);
    let ids = this.invalidated.get(datanodeId);
    if (!ids) {
      ids = new Set();
      this.invalidated.set(datanodeId, ids);
    }
    ids.add(blockId);
  }

  /** A reader found bad checksums in this replica; false if no such replica is recorded. */
  markCorrupt(datanodeId: string, blockId: number, reason: string): boolean {
    const r = this.blocks.get(blockId)?.replicas.get(datanodeId);
    if (!r) return false;
    r.corrupt = true;
    r.reason = `reported: ${reason || "bad checksum"}`;
    this.listener?.blockChanged(blockId);
    return true;
  }

  /** All replicas on a datanode are gone (it died, or its disk was wiped); returns how many. */
  removeDatanode(datanodeId: string): number {
    for (const blockId of this.invalidated.get(datanodeId) ?? []) this.blocks.get(blockId)?.deleting.delete(datanodeId);
    this.invalidated.delete(datanodeId);
    const ids = this.byDatanode.get(datanodeId);
    if (!ids) {
      // It held nothing, but copies to or from it may be in flight.
      this.listener?.datanodeRemoved(datanodeId, []);
      return 0;
    }
    for (const blockId of ids) this.blocks.get(blockId)?.replicas.delete(datanodeId);
    this.byDatanode.delete(datanodeId);
    this.listener?.datanodeRemoved(datanodeId, ids);
    return ids.size;
  }

  private index(datanodeId: string): Set<number> {
    let ids = this.byDatanode.get(datanodeId);
    if (!ids) {
      ids = new Set();
      this.byDatanode.set(datanodeId, ids);
    }
    return ids;
  }

  /** Marks a replica corrupt if its gen stamp or (committed) length disagrees with the namespace. */
  private judge(info: BlockInfo, r: ReplicaInfo): void {
    if (r.corrupt && r.reason.startsWith("reported")) return;
    if (r.genStamp !== info.genStamp) {
      r.corrupt = true;
      r.reason = `stale gen stamp ${r.genStamp} (expected ${info.genStamp})`;
    } else if (info.committed && r.numBytes !== info.numBytes) {
      r.corrupt = true;
      r.reason = `length ${r.numBytes} (expected ${info.numBytes})`;
    } else {
      r.corrupt = false;
      r.reason = "";
    }
  }
}

/**
 * A block map whose every change feeds a replication monitor reading it: the namenode's wiring, also used by tests
 * that drive the monitor as the namenode does.
 */
export function replicatedBlockMap(
  policy: PlacementPolicy,
  rng: Rng,
  options: Partial<ReplicationMonitorOptions> = {},
): { blocks: BlockManager; monitor: ReplicationMonitor } {
  const blocks = new BlockManager();
  const monitor = new ReplicationMonitor(policy, rng, blocks, options);
  blocks.listener = monitor;
  return { blocks, monitor };
}
