/**
 * The replication monitor: keeps the blocks with too few or too many good replicas and decides the copies and
 * deletions that fix them. Pure (blocks are read through a `BlockSource`, the live datanodes, the time and a random
 * source are passed in), so the daemon and the simulator drive the same code; the daemon turns the work it returns into
 * commands on heartbeat answers, the simulator into timed copies.
 *
 * Incremental, like HDFS's LowRedundancyBlocks: the monitor is told of block events (`blockChanged`, `blockRemoved`,
 * `datanodeRemoved`; `replicatedBlockMap` wires them from a BlockManager) and keeps each under-replicated block in one
 * of five priority queues. A tick takes blocks from the queues, level by level, each level in the order its blocks
 * came in, and looks at no other block. Levels (HDFS's):
 * - 0, highest: a single good replica left;
 * - 1, very under-replicated: good replicas x 3 < expected;
 * - 2, under-replicated: any other shortfall;
 * - 3, badly distributed (enough replicas, all on one rack): the numbering is HDFS's, but this monitor queues no block
 *   there, since its surplus deletion is not rack-aware and would undo the fix;
 * - 4, missing: no good replica (none, or corrupt ones only). Reported, never scheduled (nothing to copy from).
 * A block whose shortfall is covered by copies in flight leaves the queues; it comes back when a copy fails, times
 * out or arrives short. Only committed blocks are considered (a block being written has no final length yet).
 *
 * Decommissioning (decommission.ts; HDFS's DatanodeAdminManager): the replicas of a datanode out of service do not
 * count as live, so its blocks queue as under-replicated; a block whose only good replicas are on such datanodes waits
 * at level 0, as in HDFS, not as missing. A draining datanode is the preferred copy source (it takes no new writes), a
 * decommissioned one only the source of last resort, and neither is ever a target. Its surplus replicas are never
 * deleted (they leave with the datanode). The copies go through the same queues and limits as any other.
 */
import type { Rng } from "../../common/rng.js";
import { DecommissionTracker } from "./decommission.js";
import type {
  AdminState,
  DecommissionOptions,
  DecommissionProgress,
  DecommissionRecord,
  DecommissionStatus,
} from "./decommission.js";
import type { BlockRecord } from "../namespace-store.js";
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
  /** Datanodes deleting their replica (not yet confirmed): never a copy's target until they have. */
  readonly deleting?: ReadonlySet<string>;
}

/** Where the monitor reads blocks (the block manager, or the simulator's block table). */
export interface BlockSource {
  get(blockId: number): BlockView | undefined;
}

/** The live datanodes of one tick: all of them (for placement) and a lookup by id. */
export interface LiveDatanodes {
  readonly all: readonly DatanodeView[];
  get(datanodeId: string): DatanodeView | undefined;
}

/** The block events the monitor is fed (a BlockManager's listener). */
export interface BlockEventListener {
  /** A replica was added, removed or judged, the block was added, committed or its replication changed. */
  blockChanged(blockId: number): void;
  /** The block left the namespace. */
  blockRemoved(blockId: number): void;
  /** Every replica on the datanode is gone (it died, or its disk was wiped); `blockIds` are the blocks it held. */
  datanodeRemoved(datanodeId: string, blockIds: Iterable<number>): void;
}

/** How a block stands. */
export type BlockHealth = "healthy" | "under-replicated" | "over-replicated" | "missing";

/** A block's health with its good and corrupt replica counts (among `liveDatanodes` when given). */
export function classifyBlock(
  b: BlockView,
  liveDatanodes?: ReadonlySet<string>,
): { health: BlockHealth; live: number; corrupt: number } {
  const { health, live, corrupt } = countReplicas(b, liveDatanodes);
  return { health, live, corrupt };
}

/** A block's replicas by kind (fsck's view): good ones on in-service, draining and decommissioned datanodes apart. */
export interface ReplicaCounts {
  /** Missing: no good replica at all; under/over-replicated and healthy compare `live` with the replication. */
  health: BlockHealth;
  /** Good replicas on in-service (NORMAL) datanodes: the block's live replication. */
  live: number;
  corrupt: number;
  /** Good replicas on DECOMMISSION_IN_PROGRESS datanodes (readable, not counted). */
  decommissioning: number;
  /** Good replicas on DECOMMISSIONED datanodes (readable until the datanode goes, not counted). */
  decommissioned: number;
}

/**
 * Counts a block's replicas (among `liveDatanodes` when given), apart by the admin state of their datanode
 * (`adminState`, all NORMAL when absent). A block fully replicated on in-service datanodes is healthy whatever its
 * draining replicas; one whose only good replicas are on draining or decommissioned datanodes is under-replicated,
 * not missing (it can still be read and copied).
 */
export function countReplicas(
  b: BlockView,
  liveDatanodes?: ReadonlySet<string>,
  adminState?: (datanodeId: string) => AdminState,
): ReplicaCounts {
  const counts = { live: 0, corrupt: 0, decommissioning: 0, decommissioned: 0 };
  for (const [id, r] of b.replicas) {
    if (liveDatanodes && !liveDatanodes.has(id)) continue;
    if (r.corrupt) counts.corrupt += 1;
    else {
      const state = adminState?.(id) ?? "NORMAL";
      if (state === "NORMAL") counts.live += 1;
      else if (state === "DECOMMISSION_IN_PROGRESS") counts.decommissioning += 1;
      else counts.decommissioned += 1;
    }
  }
  const { live } = counts;
  const health: BlockHealth =
    live + counts.decommissioning + counts.decommissioned === 0
      ? "missing"
      : live < b.expectedReplication
        ? "under-replicated"
        : live > b.expectedReplication
          ? "over-replicated"
          : "healthy";
  return { health, ...counts };
}

/** HDFS's priority levels (see the module comment). */
export const ReplicationPriority = {
  Highest: 0,
  VeryUnderReplicated: 1,
  UnderReplicated: 2,
  BadlyDistributed: 3,
  Missing: 4,
} as const;

/** Number of priority levels. */
export const PRIORITY_LEVELS = 5;

/**
 * The queue of a block with `live` good in-service replicas out of `expected`, and `outOfService` good replicas on
 * draining or decommissioned datanodes; undefined when it is not short. A block held only out of service is at the
 * highest level (HDFS's getPriority: it can still be copied, and soon it cannot).
 */
export function replicationPriority(live: number, expected: number, outOfService = 0): number | undefined {
  if (live >= expected) return undefined;
  if (live === 0) return outOfService > 0 ? ReplicationPriority.Highest : ReplicationPriority.Missing;
  if (live === 1) return ReplicationPriority.Highest;
  if (live * 3 < expected) return ReplicationPriority.VeryUnderReplicated;
  return ReplicationPriority.UnderReplicated;
}

/** Monitor settings. */
export interface ReplicationMonitorOptions {
  /** Copies in flight (scheduled, not yet reported done) per source datanode. @default 4 */
  maxReplicationStreams: number;
  /** A copy not reported within this time is forgotten and scheduled again (Infinity: never). @default 30000 */
  pendingTimeoutMs: number;
  /** Queued blocks looked at per tick at most (HDFS looks at about 2 per live datanode). @default Infinity */
  maxWorkPerRun: number;
  /**
   * Copies in flight to one target datanode at most: a datanode receiving this many is left out of target choice, as
   * HDFS's considerLoad leaves out overloaded datanodes. @default Infinity
   */
  maxReceiveStreams: number;
  /**
   * A block that no tick could schedule because of datanode state alone (every source's primary busy, or the policy
   * found no target without any datanode left out for load) waits, out of the queue, until one of its replicas changes
   * or `wake()` says datanode state changed; otherwise every tick looks at it again. @default false
   */
  parkBlocked: boolean;
}

/** A copy to make: the source datanode sends its replica down the targets' pipeline. */
export interface ReplicationTask {
  sourceId: string;
  block: BlockRecord;
  targets: DatanodeView[];
  /** The block's priority level, 0..2 (see the module comment). */
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
  /** Copies, in the order scheduled (by priority level, then queue order). */
  replicate: ReplicationTask[];
  /**
   * Deletions, each returned once: the caller applies it (BlockManager.invalidate), whose event settles the block.
   */
  delete: DeletionTask[];
  /** Committed blocks with no good replica (see `missingBlocks`). */
  missing: number;
  /** Blocks waiting in each priority queue when the tick began (parked ones included; index 4 = missing). */
  underReplicated: number[];
  /** Copies given up on this tick (not reported within the timeout). */
  timedOut: number;
  /** Waiting blocks left for a later tick by `maxWorkPerRun`. */
  deferred: number;
  /** Datanodes whose drain completed on this tick (now DECOMMISSIONED; see `checkDecommissions`). */
  decommissioned: string[];
  /** Drains whose deadline passed since the last tick, each reported once, with the blocks still to copy. */
  decommissionOverdue: DecommissionProgress["overdue"];
}

interface Pending {
  readonly blockId: number;
  readonly sourceId: string;
  /** Targets that have not reported the replica yet. */
  readonly targets: Set<string>;
  readonly deadlineMs: number;
  done: boolean;
}

/** What one block's turn at a tick came to. */
type Outcome = "done" | "wait" | "blocked";

const DEFAULTS: ReplicationMonitorOptions = {
  maxReplicationStreams: 4,
  pendingTimeoutMs: 30_000,
  maxWorkPerRun: Infinity,
  maxReceiveStreams: Infinity,
  parkBlocked: false,
};

/** Priority queues of under-replicated blocks, copies in flight, and the per-tick decision. */
export class ReplicationMonitor implements BlockEventListener {
  private readonly options: ReplicationMonitorOptions;
  /** Waiting blocks per level, in arrival order. */
  private readonly queues: Set<number>[] = Array.from({ length: PRIORITY_LEVELS }, () => new Set<number>());
  /** The level of every queued or parked block. */
  private readonly levelOf = new Map<number, number>();
  /** Blocks set aside by `parkBlocked`, by id, and how many per level. */
  private readonly parked = new Set<number>();
  private readonly parkedPerLevel: number[] = new Array<number>(PRIORITY_LEVELS).fill(0);
  /** Blocks that may have a corrupt or surplus replica to delete (looked at by the next tick). */
  private readonly excess = new Set<number>();
  private readonly pending = new Map<number, Pending[]>();
  private readonly bySource = new Map<string, Set<Pending>>();
  private readonly byTarget = new Map<string, Set<Pending>>();
  /** Datanodes at `maxReceiveStreams`. */
  private readonly receiveFull = new Set<string>();
  /** Copies by deadline (finite timeouts only). */
  private deadlines: Pending[] = [];
  private deadlineHead = 0;
  /** Datanodes out of service: their replicas do not count, they are never targets (see decommission.ts). */
  private readonly admin = new DecommissionTracker();
  /** Good replicas that scheduled copies delivered to their targets, since the monitor was made (metrics). */
  private arrived = 0;

  constructor(
    readonly policy: PlacementPolicy,
    private readonly rng: Rng,
    private readonly blocks: BlockSource,
    options: Partial<ReplicationMonitorOptions> = {},
  ) {
    this.options = { ...DEFAULTS };
    for (const [k, v] of Object.entries(options)) if (v !== undefined) Object.assign(this.options, { [k]: v });
    const o = this.options;
    const atLeastOne = (v: number): boolean => v === Infinity || (Number.isInteger(v) && v >= 1);
    if (!atLeastOne(o.maxReplicationStreams)) throw new RangeError("maxReplicationStreams must be an integer >= 1");
    if (!atLeastOne(o.maxReceiveStreams)) throw new RangeError("maxReceiveStreams must be an integer >= 1");
    if (!atLeastOne(o.maxWorkPerRun)) throw new RangeError("maxWorkPerRun must be an integer >= 1");
    if (!(o.pendingTimeoutMs > 0)) throw new RangeError("pendingTimeoutMs must be > 0");
  }

  // ------------------------------------------------------------------------------------------------ observers

  /** Copies in flight from a datanode. */
  inFlight(sourceId: string): number {
    return this.bySource.get(sourceId)?.size ?? 0;
  }

  /** Copies in flight to a datanode. */
  incoming(targetId: string): number {
    return this.byTarget.get(targetId)?.size ?? 0;
  }

  /** Good replicas that scheduled copies delivered, since the monitor was made (a count that only grows). */
  copiesArrived(): number {
    return this.arrived;
  }

  /** Blocks with a copy in flight. */
  pendingBlocks(): number {
    return this.pending.size;
  }

  /** Targets of a block's copies in flight. */
  pendingTargets(blockId: number): string[] {
    const out: string[] = [];
    for (const p of this.pending.get(blockId) ?? []) out.push(...p.targets);
    return out;
  }

  /** The priority level a block waits at, undefined when it waits for nothing. */
  priorityOf(blockId: number): number | undefined {
    return this.levelOf.get(blockId);
  }

  /** Blocks a tick would look at now (queued at levels 0..3, not parked). */
  waiting(): number {
    let n = 0;
    for (let level = 0; level < ReplicationPriority.Missing; level++) n += this.queues[level]!.size;
    return n;
  }

  /** Blocks parked by `parkBlocked`. */
  parkedBlocks(): number {
    return this.parked.size;
  }

  /** A datanode's admin state: NORMAL, DECOMMISSION_IN_PROGRESS or DECOMMISSIONED. */
  adminState(datanodeId: string): AdminState {
    return this.admin.adminState(datanodeId);
  }

  /** The datanodes out of service (draining or decommissioned), in the order their drains started. */
  outOfService(): string[] {
    return [...this.admin.datanodes()];
  }

  /** An out-of-service datanode's drain: state, times, blocks and what still needs copies; undefined if NORMAL. */
  decommissionStatus(datanodeId: string, nowMs: number): DecommissionStatus | undefined {
    return this.admin.status(datanodeId, nowMs);
  }

  /** What to persist of an out-of-service datanode; undefined if NORMAL. */
  decommissionRecord(datanodeId: string): DecommissionRecord | undefined {
    return this.admin.record(datanodeId);
  }

  /** Up to `limit` missing blocks (no good replica), oldest first. */
  missingBlocks(limit = Infinity): BlockRecord[] {
    const out: BlockRecord[] = [];
    for (const id of this.queues[ReplicationPriority.Missing]!) {
      if (out.length >= limit) break;
      const b = this.blocks.get(id);
      if (b) out.push(record(b));
    }
    return out;
  }

  // ------------------------------------------------------------------------------------------------ events

  blockChanged(blockId: number): void {
    const b = this.blocks.get(blockId);
    if (!b) {
      this.blockRemoved(blockId);
      return;
    }
    // Targets that now hold the block (or a corrupt copy of it) have reported: their copies are settled.
    for (const p of [...(this.pending.get(blockId) ?? [])])
      for (const t of [...p.targets]) {
        const r = b.replicas.get(t);
        if (!r) continue;
        if (!r.corrupt) this.arrived += 1;
        this.dropTarget(p, t);
      }
    this.classify(blockId, b);
  }

  blockRemoved(blockId: number): void {
    for (const p of [...(this.pending.get(blockId) ?? [])]) this.close(p);
    this.unqueue(blockId);
    this.excess.delete(blockId);
    this.admin.forget(blockId);
  }

  datanodeRemoved(datanodeId: string, blockIds: Iterable<number>): void {
    this.admin.removed(datanodeId);
    const touched = new Set<number>(blockIds);
    for (const p of [...(this.bySource.get(datanodeId) ?? [])]) {
      touched.add(p.blockId);
      this.close(p);
    }
    for (const p of [...(this.byTarget.get(datanodeId) ?? [])]) {
      touched.add(p.blockId);
      this.dropTarget(p, datanodeId);
    }
    for (const id of touched) this.blockChanged(id);
  }

  /** Datanode state (primary load, free space) changed: parked blocks go back to their queues. */
  wake(): void {
    for (const id of this.parked) {
      const level = this.levelOf.get(id);
      if (level !== undefined) this.queues[level]!.add(id);
    }
    this.parked.clear();
    this.parkedPerLevel.fill(0);
  }

  // ------------------------------------------------------------------------------------------------ decommissioning

  /**
   * Takes a datanode out of service (HDFS's startDecommission): its replicas stop counting, so `blockIds` (the blocks
   * it holds) queue for copies; copies in flight to it are given up. True when a drain started; on a datanode already
   * out of service only a non-zero deadline is replaced (false).
   */
  decommission(datanodeId: string, blockIds: Iterable<number>, options: DecommissionOptions): boolean {
    if (!this.admin.start(datanodeId, options)) return false;
    this.reclassify(datanodeId, blockIds);
    return true;
  }

  /** Brings back a persisted drain before any block report (a namenode's start): see DecommissionTracker.restore. */
  restoreDecommission(record: DecommissionRecord, blockIds: Iterable<number>, awaitReport: boolean): void {
    this.admin.restore(record, awaitReport);
    this.reclassify(record.datanodeId, blockIds);
  }

  /**
   * Puts a datanode back in service (HDFS's stopDecommission): its replicas count again. A block that is then
   * over-replicated loses its surplus at the next tick, from the fullest datanodes (which need not be this one), as
   * HDFS's processExtraRedundancyBlocksOnInService does. False when it was in service already.
   */
  recommission(datanodeId: string, blockIds: Iterable<number>): boolean {
    if (!this.admin.end(datanodeId)) return false;
    this.reclassify(datanodeId, blockIds);
    return true;
  }

  /** The datanode sent a full block report: a drain waiting for it may complete. */
  datanodeReported(datanodeId: string): void {
    this.admin.reported(datanodeId);
  }

  /**
   * Completes the drains with no block left to copy (DECOMMISSIONED at `nowMs`) and reports overdue ones once. Every
   * tick runs it; a caller that ticks only when blocks wait (the simulator) calls it after copies land.
   */
  checkDecommissions(nowMs: number): DecommissionProgress {
    return this.admin.check(nowMs);
  }

  /** A datanode's admin state changed: copies in flight to it no longer help, and its blocks count differently. */
  private reclassify(datanodeId: string, blockIds: Iterable<number>): void {
    const touched = new Set<number>(blockIds);
    if (this.admin.outOfService(datanodeId))
      for (const p of [...(this.byTarget.get(datanodeId) ?? [])]) {
        touched.add(p.blockId);
        this.dropTarget(p, datanodeId);
      }
    for (const id of touched) this.blockChanged(id);
  }

  // ------------------------------------------------------------------------------------------------ the tick

  /**
   * Settles timed-out copies, returns the deletions of blocks with corrupt replicas (once the good ones reach the
   * replication, or every datanode without a corrupt replica holds a good one) or surplus ones (least free space
   * first), then takes waiting blocks, level 0 first and each level in order, up to `maxWorkPerRun`, and schedules a
   * copy for each within the streams limits: the source is a good replica on a live datanode whose primary is not
   * busy, with the fewest copies in flight (random among equals); the targets come from the placement policy with the
   * good replicas as `existing` and the replicas, pending targets and datanodes at `maxReceiveStreams` excluded. A
   * block it could not fully cover goes to the back of its queue (or is parked).
   */
  tick(datanodes: readonly DatanodeView[] | LiveDatanodes, nowMs: number): ReplicationWork {
    const live = liveDatanodes(datanodes);
    const work: ReplicationWork = {
      replicate: [],
      delete: [],
      missing: 0,
      underReplicated: [],
      timedOut: 0,
      deferred: 0,
      decommissioned: [],
      decommissionOverdue: [],
    };
    this.expire(nowMs, work);
    this.deletions(live, work);
    const counts = this.queues.map((q, level) => q.size + this.parkedPerLevel[level]!);
    work.underReplicated = counts;
    work.missing = counts[ReplicationPriority.Missing]!;
    let budget = this.options.maxWorkPerRun;
    for (let level = 0; level < ReplicationPriority.Missing; level++) {
      const queue = this.queues[level]!;
      const batch: number[] = [];
      for (const id of queue) {
        if (batch.length >= budget) break;
        batch.push(id);
      }
      budget -= batch.length;
      work.deferred += queue.size - batch.length;
      for (const id of batch) {
        // An earlier block's copy may have settled this one (it cannot, today, but the queue is the truth).
        if (!queue.has(id)) continue;
        const outcome = this.schedule(id, level, live, nowMs, work);
        queue.delete(id);
        if (outcome === "done") this.levelOf.delete(id);
        else if (outcome === "blocked" && this.options.parkBlocked) {
          this.parked.add(id);
          this.parkedPerLevel[level]! += 1;
        } else queue.add(id);
      }
    }
    const progress = this.checkDecommissions(nowMs);
    work.decommissioned = progress.decommissioned;
    work.decommissionOverdue = progress.overdue;
    return work;
  }

  /** Copies past their deadline are given up; their blocks are looked at again. */
  private expire(nowMs: number, work: ReplicationWork): void {
    const list = this.deadlines;
    while (this.deadlineHead < list.length) {
      const p = list[this.deadlineHead]!;
      if (!p.done && p.deadlineMs > nowMs) break;
      this.deadlineHead += 1;
      if (p.done) continue;
      work.timedOut += 1;
      this.close(p);
      this.blockChanged(p.blockId);
    }
    if (this.deadlineHead > 1024 && this.deadlineHead * 2 > list.length) {
      this.deadlines = list.slice(this.deadlineHead);
      this.deadlineHead = 0;
    }
  }

  private deletions(live: LiveDatanodes, work: ReplicationWork): void {
    for (const id of this.excess) {
      const b = this.blocks.get(id);
      if (!b?.committed) continue;
      const good: DatanodeView[] = [];
      const corrupt: string[] = [];
      let outOfService = 0;
      for (const [dn, r] of b.replicas) {
        const d = live.get(dn);
        if (!d) continue;
        if (r.corrupt) corrupt.push(dn);
        // A draining or decommissioned datanode's replicas leave with it: never deleted as surplus.
        else if (this.admin.size > 0 && this.admin.outOfService(dn)) outOfService += 1;
        else good.push(d);
      }
      // The only replicas, though corrupt, are kept: they may be all that is left of the data (or a report was wrong).
      if (good.length + outOfService === 0) continue;
      const block = record(b);
      // Corrupt replicas go only once the good ones reach the replication, or as many as the datanodes without a
      // corrupt one can hold: the good copy is made first (HDFS invalidates reported replicas only then).
      const enough = Math.min(b.expectedReplication, live.all.length - corrupt.length);
      if (good.length >= Math.max(1, enough))
        for (const dn of corrupt) work.delete.push({ datanodeId: dn, block, reason: "corrupt" });
      if (good.length > b.expectedReplication && !this.pending.has(id)) {
        // Free the fullest nodes first (HDFS also weighs racks here; the stock monitor keeps it simple).
        good.sort((x, y) => x.remainingBytes - y.remainingBytes || (x.datanodeId < y.datanodeId ? -1 : 1));
        for (const d of good.slice(0, good.length - b.expectedReplication))
          work.delete.push({ datanodeId: d.datanodeId, block, reason: "over-replicated" });
      }
    }
    this.excess.clear();
  }

  /** One block's turn: at most one copy (one source, its targets in a pipeline). */
  private schedule(id: number, level: number, live: LiveDatanodes, nowMs: number, work: ReplicationWork): Outcome {
    const b = this.blocks.get(id);
    if (!b?.committed) return "done";
    // Good replicas on live datanodes: in service (they count), and out of service (sources only).
    const good: string[] = [];
    const draining: string[] = [];
    const decommissioned: string[] = [];
    const anyOut = this.admin.size > 0;
    for (const [dn, r] of b.replicas) {
      if (r.corrupt || !live.get(dn)) continue;
      const state = anyOut ? this.admin.adminState(dn) : "NORMAL";
      if (state === "NORMAL") good.push(dn);
      else (state === "DECOMMISSION_IN_PROGRESS" ? draining : decommissioned).push(dn);
    }
    let inFlight = 0;
    for (const p of this.pending.get(id) ?? []) inFlight += p.targets.size;
    const needed = b.expectedReplication - good.length - inFlight;
    // Sources in order of preference: a draining datanode takes no new writes and its replicas must go anyway (HDFS
    // prefers it too); a decommissioned one only when nothing else holds the block.
    const byPreference = draining.length + good.length > 0 ? [draining, good] : [decommissioned];
    if (byPreference.every((t) => t.length === 0) || needed <= 0) return "done";
    // A stale datanode (silent, maybe dead) is a source only when no fresh one of the same tier is there.
    const tiers = byPreference.flatMap((t) => [
      t.filter((dn) => !live.get(dn)!.stale),
      t.filter((dn) => live.get(dn)!.stale),
    ]);
    // A busy primary makes its datanode refuse reads, so it cannot be a source right now.
    const limit = this.options.maxReplicationStreams;
    let idle = false;
    const sources: string[] = [];
    for (const tier of tiers) {
      let fewest = Infinity;
      for (const dn of tier) {
        if (live.get(dn)!.primaryBusy) continue;
        idle = true;
        const used = this.inFlight(dn);
        if (used >= limit || used > fewest) continue;
        if (used < fewest) {
          fewest = used;
          sources.length = 0;
        }
        sources.push(dn);
      }
      if (sources.length > 0) break;
    }
    // Every source at its stream limit: one frees up within a copy's time.
    if (sources.length === 0) return idle ? "wait" : "blocked";
    // The persistent set of loaded datanodes, with the block's replicas and pending targets for this call only.
    const excluded = this.receiveFull;
    const loadExcluded = excluded.size > 0;
    const added: string[] = [];
    const exclude = (dn: string): void => {
      if (excluded.has(dn)) return;
      excluded.add(dn);
      added.push(dn);
    };
    for (const dn of b.replicas.keys()) exclude(dn);
    for (const dn of b.deleting ?? []) exclude(dn);
    for (const p of this.pending.get(id) ?? []) for (const t of p.targets) exclude(t);
    // Never a target: a datanode out of service (the policy then places the copy by the in-service replicas alone),
    // nor a stale one (a copy sent to a datanode that may be dead waits a whole timeout to be found lost).
    if (anyOut) for (const dn of this.admin.datanodes()) exclude(dn);
    let staleExcluded = false;
    for (const d of live.all)
      if (d.stale) {
        exclude(d.datanodeId);
        staleExcluded = true;
      }
    let targets: DatanodeView[];
    try {
      targets = this.policy.chooseTargets({
        replication: needed,
        excluded,
        existing: good,
        datanodes: live.all,
        blockSizeBytes: b.numBytes,
        rng: this.rng,
      });
    } finally {
      for (const dn of added) excluded.delete(dn);
    }
    // No target: a receive stream frees within a copy's time, a stale datanode heartbeats again or is declared dead;
    // primary load and free space change with datanode state.
    if (targets.length === 0) return loadExcluded || staleExcluded ? "wait" : "blocked";
    const sourceId = sources[Math.min(sources.length - 1, Math.floor(this.rng.next() * sources.length))]!;
    this.open({
      blockId: id,
      sourceId,
      targets: new Set(targets.map((t) => t.datanodeId)),
      deadlineMs: nowMs + this.options.pendingTimeoutMs,
      done: false,
    });
    work.replicate.push({ sourceId, block: record(b), targets, priority: level });
    if (targets.length >= needed) return "done";
    return loadExcluded || staleExcluded ? "wait" : "blocked";
  }

  // ------------------------------------------------------------------------------------------------ bookkeeping

  /** Puts a block in the queue its replicas say, or takes it out. */
  private classify(id: number, b: BlockView): void {
    // Good replicas in service (live) and out of service: only the first count toward the replication.
    let live = 0;
    let outOfService = 0;
    let corrupt = 0;
    const anyOut = this.admin.size > 0;
    for (const [dn, r] of b.replicas) {
      if (r.corrupt) corrupt += 1;
      else if (anyOut && this.admin.outOfService(dn)) outOfService += 1;
      else live += 1;
    }
    // Before the committed test: a drain waits for the blocks being written on its datanode too.
    if (anyOut) this.admin.observe(id, b.replicas, live, b.expectedReplication);
    if (!b.committed) {
      this.unqueue(id);
      return;
    }
    if (live + outOfService > 0 && (corrupt > 0 || live > b.expectedReplication)) this.excess.add(id);
    const level = replicationPriority(live, b.expectedReplication, outOfService);
    let inFlight = 0;
    for (const p of this.pending.get(id) ?? []) inFlight += p.targets.size;
    const waits =
      level !== undefined && (level === ReplicationPriority.Missing || live + inFlight < b.expectedReplication);
    if (!waits) {
      this.unqueue(id);
      return;
    }
    const current = this.levelOf.get(id);
    // A block keeps its place while its level holds; any change to a parked block is worth another look.
    if (current === level && !this.parked.has(id)) return;
    this.unqueue(id);
    this.levelOf.set(id, level);
    this.queues[level]!.add(id);
  }

  private unqueue(id: number): void {
    const level = this.levelOf.get(id);
    if (level === undefined) return;
    this.levelOf.delete(id);
    this.queues[level]!.delete(id);
    if (this.parked.delete(id)) this.parkedPerLevel[level]! -= 1;
  }

  private open(p: Pending): void {
    let list = this.pending.get(p.blockId);
    if (!list) {
      list = [];
      this.pending.set(p.blockId, list);
    }
    list.push(p);
    indexAdd(this.bySource, p.sourceId, p);
    for (const t of p.targets) {
      indexAdd(this.byTarget, t, p);
      if (this.incoming(t) >= this.options.maxReceiveStreams) this.receiveFull.add(t);
    }
    if (Number.isFinite(p.deadlineMs)) this.deadlines.push(p);
  }

  /** Target `t` of copy `p` is settled (arrived, or gone); the copy ends with its last target. */
  private dropTarget(p: Pending, t: string): void {
    if (!p.targets.delete(t)) return;
    this.byTarget.get(t)?.delete(p);
    if (this.incoming(t) < this.options.maxReceiveStreams) this.receiveFull.delete(t);
    if (p.targets.size === 0) this.close(p);
  }

  /** Copy `p` ends: its source stream and remaining target streams are free. */
  private close(p: Pending): void {
    if (p.done) return;
    p.done = true;
    for (const t of [...p.targets]) this.dropTarget(p, t);
    this.bySource.get(p.sourceId)?.delete(p);
    const list = this.pending.get(p.blockId);
    if (!list) return;
    const i = list.indexOf(p);
    if (i >= 0) list.splice(i, 1);
    if (list.length === 0) this.pending.delete(p.blockId);
  }
}

function record(b: BlockView): BlockRecord {
  return { blockId: b.blockId, genStamp: b.genStamp, numBytes: b.numBytes };
}

function indexAdd(index: Map<string, Set<Pending>>, key: string, p: Pending): void {
  let set = index.get(key);
  if (!set) {
    set = new Set();
    index.set(key, set);
  }
  set.add(p);
}

function liveDatanodes(datanodes: readonly DatanodeView[] | LiveDatanodes): LiveDatanodes {
  if (!Array.isArray(datanodes)) return datanodes as LiveDatanodes;
  const byId = new Map(datanodes.map((d) => [d.datanodeId, d]));
  return { all: datanodes, get: (id) => byId.get(id) };
}
