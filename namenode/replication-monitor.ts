/**
 * The replication monitor: finds blocks with too few or too many good replicas and decides the copies and deletions
 * that fix them. Pure (the blocks, the live datanodes, the time and a random source are passed in), so the daemon and
 * the simulator drive the same code; the daemon turns the work it returns into commands on heartbeat answers.
 *
 * Priorities, as in HDFS's UnderReplicatedBlocks (simplified): 0 = a single good replica left, 1 = fewer than
 * expected. A block with no good replica is missing: reported, never scheduled (there is nothing to copy from).
 * Only committed blocks are considered (a block being written has no final length yet).
 */
import type { Rng } from "../common/rng.js";
import type { BlockRecord } from "./namespace-store.js";
import type { DatanodeView, PlacementPolicy } from "./placement.js";

/** What the monitor sees of a block (the block manager's BlockInfo is one). */
export interface BlockView {
  readonly blockId: number;
  readonly genStamp: number;
  readonly numBytes: number;
  readonly expectedReplication: number;
  readonly committed: boolean;
  /** Replicas by datanode id. */
  readonly replicas: ReadonlyMap<string, { readonly corrupt: boolean }>;
}

/** How a block stands. */
export type BlockHealth = "healthy" | "under-replicated" | "over-replicated" | "missing";

/** A block's health with its good and corrupt replica counts (among `liveDatanodes` when given). */
export function classifyBlock(
  b: BlockView,
  liveDatanodes?: ReadonlySet<string>,
): { health: BlockHealth; live: number; corrupt: number } {
  let live = 0;
  let corrupt = 0;
  for (const [id, r] of b.replicas) {
    if (liveDatanodes && !liveDatanodes.has(id)) continue;
    if (r.corrupt) corrupt += 1;
    else live += 1;
  }
  const health: BlockHealth =
    live === 0
      ? "missing"
      : live < b.expectedReplication
        ? "under-replicated"
        : live > b.expectedReplication
          ? "over-replicated"
          : "healthy";
  return { health, live, corrupt };
}

/** Monitor settings. */
export interface ReplicationMonitorOptions {
  /** Copies in flight (scheduled, not yet reported done) per source datanode. @default 4 */
  maxReplicationStreams: number;
  /** A copy not reported within this time is forgotten and scheduled again. @default 30000 */
  pendingTimeoutMs: number;
}

/** A copy to make: the source datanode sends its replica down the targets' pipeline. */
export interface ReplicationTask {
  sourceId: string;
  block: BlockRecord;
  targets: DatanodeView[];
  /** 0 or 1, see the module comment. */
  priority: number;
}

/** A replica a datanode should delete. */
export interface DeletionTask {
  datanodeId: string;
  block: BlockRecord;
  reason: "corrupt" | "over-replicated";
}

/** What one tick decided. */
export interface ReplicationWork {
  replicate: ReplicationTask[];
  delete: DeletionTask[];
  /** Committed blocks with no good replica on a live datanode. */
  missing: BlockRecord[];
  /** Under-replicated blocks found, by priority (scheduled or not). */
  underReplicated: [number, number];
  /** Copies given up on this tick (not reported within the timeout). */
  timedOut: number;
}

interface PendingReplication {
  sourceId: string;
  /** Targets that have not reported the replica yet. */
  targets: Set<string>;
  deadlineMs: number;
}

interface Needy {
  block: BlockView;
  live: string[];
  needed: number;
}

/** Pending copies and the per-tick decision. */
export class ReplicationMonitor {
  private readonly options: ReplicationMonitorOptions;
  private readonly pending = new Map<number, PendingReplication[]>();

  constructor(
    readonly policy: PlacementPolicy,
    private readonly rng: Rng,
    options: Partial<ReplicationMonitorOptions> = {},
  ) {
    this.options = { maxReplicationStreams: 4, pendingTimeoutMs: 30_000, ...options };
  }

  /** Copies in flight from a datanode. */
  inFlight(sourceId: string): number {
    let n = 0;
    for (const list of this.pending.values()) for (const p of list) if (p.sourceId === sourceId) n += 1;
    return n;
  }

  /** Blocks with a copy in flight. */
  pendingBlocks(): number {
    return this.pending.size;
  }

  /**
   * One pass over every block: settles pending copies, then schedules copies (priority 0 first) within each source's
   * stream limit, and deletes corrupt replicas (once a good one exists) and surplus ones (least free space first).
   */
  tick(blocks: Iterable<BlockView>, datanodes: readonly DatanodeView[], nowMs: number): ReplicationWork {
    const nodes = new Map(datanodes.map((d) => [d.datanodeId, d]));
    const liveIds = new Set(nodes.keys());
    const work: ReplicationWork = { replicate: [], delete: [], missing: [], underReplicated: [0, 0], timedOut: 0 };
    const queues: [Needy[], Needy[]] = [[], []];
    const seen = new Set<number>();
    for (const b of blocks) {
      if (!b.committed) continue;
      seen.add(b.blockId);
      const inFlight = this.settle(b, liveIds, nowMs, work);
      const live: string[] = [];
      const corrupt: string[] = [];
      for (const [id, r] of b.replicas) if (liveIds.has(id)) (r.corrupt ? corrupt : live).push(id);
      const block = { blockId: b.blockId, genStamp: b.genStamp, numBytes: b.numBytes };
      if (live.length === 0) {
        work.missing.push(block);
        continue;
      }
      for (const id of corrupt) work.delete.push({ datanodeId: id, block, reason: "corrupt" });
      if (live.length < b.expectedReplication) {
        const priority = live.length === 1 ? 0 : 1;
        work.underReplicated[priority] += 1;
        const needed = b.expectedReplication - live.length - inFlight;
        if (needed > 0) queues[priority].push({ block: b, live, needed });
      } else if (live.length > b.expectedReplication && inFlight === 0) {
        // Free the fullest nodes first (HDFS also weighs racks here; the stock monitor keeps it simple).
        const byRoom = live
          .map((id) => nodes.get(id) as DatanodeView)
          .sort((x, y) => x.remainingBytes - y.remainingBytes || (x.datanodeId < y.datanodeId ? -1 : 1));
        for (const d of byRoom.slice(0, live.length - b.expectedReplication))
          work.delete.push({ datanodeId: d.datanodeId, block, reason: "over-replicated" });
      }
    }
    for (const blockId of this.pending.keys()) if (!seen.has(blockId)) this.pending.delete(blockId);
    const streams = new Map<string, number>();
    for (const list of this.pending.values())
      for (const p of list) streams.set(p.sourceId, (streams.get(p.sourceId) ?? 0) + 1);
    for (const [priority, queue] of queues.entries()) {
      for (const needy of queue) {
        const task = this.schedule(needy, nodes, streams, datanodes, nowMs);
        if (task) work.replicate.push({ ...task, priority });
      }
    }
    return work;
  }

  /** Drops arrived, dead and timed-out targets of a block's pending copies; returns the copies still expected. */
  private settle(b: BlockView, liveIds: ReadonlySet<string>, nowMs: number, work: ReplicationWork): number {
    const list = this.pending.get(b.blockId);
    if (!list) return 0;
    let inFlight = 0;
    const kept = list.filter((p) => {
      if (nowMs >= p.deadlineMs) {
        work.timedOut += 1;
        return false;
      }
      for (const t of p.targets) if (b.replicas.has(t) || !liveIds.has(t)) p.targets.delete(t);
      inFlight += p.targets.size;
      return p.targets.size > 0;
    });
    if (kept.length > 0) this.pending.set(b.blockId, kept);
    else this.pending.delete(b.blockId);
    return inFlight;
  }

  private schedule(
    needy: Needy,
    nodes: ReadonlyMap<string, DatanodeView>,
    streams: Map<string, number>,
    datanodes: readonly DatanodeView[],
    nowMs: number,
  ): Omit<ReplicationTask, "priority"> | undefined {
    const b = needy.block;
    const limit = this.options.maxReplicationStreams;
    // A busy primary makes its datanode refuse reads, so it cannot be a source right now.
    const sources = needy.live.filter((id) => !nodes.get(id)?.primaryBusy && (streams.get(id) ?? 0) < limit);
    if (sources.length === 0) return undefined;
    const fewest = Math.min(...sources.map((id) => streams.get(id) ?? 0));
    const idle = sources.filter((id) => (streams.get(id) ?? 0) === fewest);
    const sourceId = idle[Math.min(idle.length - 1, Math.floor(this.rng.next() * idle.length))] as string;
    const excluded = new Set<string>(b.replicas.keys());
    for (const p of this.pending.get(b.blockId) ?? []) for (const t of p.targets) excluded.add(t);
    const targets = this.policy.chooseTargets({
      replication: needy.needed,
      excluded,
      existing: needy.live,
      datanodes,
      blockSizeBytes: b.numBytes,
      rng: this.rng,
    });
    if (targets.length === 0) return undefined;
    streams.set(sourceId, (streams.get(sourceId) ?? 0) + 1);
    const list = this.pending.get(b.blockId) ?? [];
    list.push({
      sourceId,
      targets: new Set(targets.map((t) => t.datanodeId)),
      deadlineMs: nowMs + this.options.pendingTimeoutMs,
    });
    this.pending.set(b.blockId, list);
    return { sourceId, block: { blockId: b.blockId, genStamp: b.genStamp, numBytes: b.numBytes }, targets };
  }
}
