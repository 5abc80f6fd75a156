/**
 * The storage experiment (seeds/004, section 4.2 and its evaluation of data placement): blocks are written over the
 * experiment period and placed by the very policy code the namenode runs (the stock rack-aware policy or the diversity
 * grid of Algorithm 2); every disk reimage (section 3.3) destroys the replicas on its server at once; the namenode
 * re-replicates from surviving replicas within a per-server bandwidth limit, with the namenode's own
 * ReplicationMonitor (fewest live replicas first) deciding every copy; a block is
 * lost when its last replica goes before a copy completes. Sampled reads are unavailable when every live replica's
 * primary tenant is busy. The policies learn only from the history window: each tenant's reimage rate and peak CPU.
 *
 * The state is kept in typed arrays (blocks x replication, copies x replication, streams per server) so that a
 * 10,000-server year with hundreds of thousands of blocks and a million copies runs in about a minute; see
 * `runStorage` for the model's choices.
 */
import { performance } from "node:perf_hooks";
import { HarvestError } from "../common/errors.js";
import { SeededRng } from "../common/rng.js";
import { DiversityPlacementPolicy, ReplicationMonitor, StockPlacementPolicy } from "../namenode/index.js";
import type {
  BlockSource,
  BlockView,
  DatanodeView,
  LiveDatanodes,
  PlacementPolicy,
  PlacementRequest,
  PlacementTenant,
  ReplicationMonitorOptions,
} from "../namenode/index.js";
import { DEFAULT_CLASSIFIER_OPTIONS, percentileSorted } from "../resourcemanager/index.js";
import type { Rng } from "../common/rng.js";
import { SimEngine } from "./engine/engine.js";
import type { EngineProgress } from "./engine/engine.js";
import { DAY_MS, MONTH_MS, serverUtilization } from "./model.js";
import type { SimCluster } from "./model.js";
import type { StoragePlacement, StorageResult } from "./results.js";

const MiB = 1024 * 1024;

/** One block write of an explicit write schedule. */
/** Re-replication bandwidth per server when none is given: 50 MB/s (see `reReplicationBytesPerSec`). */
export const DEFAULT_RE_REPLICATION_BYTES_PER_SEC = 50_000_000;

export interface StorageWrite {
  /** When the block is written, in [cluster.historyMs, cluster.horizonMs). */
  readonly atMs: number;
  /** Index of the server the writing task runs on (it gets the first replica when it qualifies). */
  readonly writer: number;
}

/** Hooks into a run, for tests and debugging; each is optional and costs nothing when absent. */
export interface StorageObserver {
  /** A replica was created on `server`: by the block's write (in pipeline order) or by a completed copy. */
  readonly onPlaced?: (block: number, server: number, atMs: number, by: "write" | "copy") => void;
  /** A block's last live replica was destroyed. */
  readonly onLost?: (block: number, atMs: number) => void;
  /** A reimage wiped `server` (before the replication monitor hears of it). */
  readonly onReimage?: (server: number, atMs: number) => void;
  /** The replication monitor ran (its tick) at `atMs`. */
  readonly onMonitorTick?: (atMs: number) => void;
  /** The monitor scheduled a copy of `block` from `source` down the pipeline of `targets`. */
  readonly onCopy?: (block: number, source: number, targets: readonly number[], atMs: number) => void;
  /** The run is over; `replicasOf` gives a block's live replica servers at the end. */
  readonly onEnd?: (replicasOf: (block: number) => number[]) => void;
}

/** A planned reimage: `server`'s disk is wiped at `atMs` (an index into `SimCluster.servers`). */
export interface StorageReimage {
  readonly server: number;
  readonly atMs: number;
}

/**
 * How the namenode meets a planned reimage: "none" ignores the notice (the wipe at its time, re-replication after it,
 * as for the cluster's own reimages); "decommission" takes the server's datanode out of service at the notice, with the
 * reimage as the drain's deadline (HDFS's decommissioning, namenode/decommission.ts).
 */
export type StorageDrainMode = "none" | "decommission";

/**
 * Planned reimages with notice (`StorageOptions.planned`): they replace `cluster.reimages` as the run's wipes. With
 * "decommission", at each notice the server's datanode is decommissioned (the monitor's `decommission`, deadline = the
 * reimage): its replicas stop counting, so the monitor copies its blocks elsewhere under the same stream and bandwidth
 * limits as any re-replication, preferring it as the source; it takes no new write or copy. At the reimage its disk is
 * wiped whether or not the drain completed, and the datanode comes back empty and in service (recommissioned). A
 * reimage announced while its server still drains for an earlier one waits: its drain starts after that reimage.
 */
export interface PlannedStorageReimages {
  /** The reimages, each in [cluster.historyMs, cluster.horizonMs); those of one instant are applied in this order. */
  readonly events: readonly StorageReimage[];
  /**
   * How long before its reimage each is announced (a notice that would come before the experiment comes at its
   * start).
   * @default 1800000 (30 minutes)
   */
  readonly noticeMs?: number;
  /** @default "decommission" */
  readonly drain?: StorageDrainMode;
}

/** {@link PlannedStorageReimages} resolved: events sorted by time (stably), defaults filled. */
export interface ResolvedPlannedStorageReimages {
  readonly events: readonly StorageReimage[];
  readonly noticeMs: number;
  readonly drain: StorageDrainMode;
}

/** What planned reimages did to a run (`StorageRunResult.planned`, only with `StorageOptions.planned`). */
export interface PlannedReimageFigures {
  drain: StorageDrainMode;
  noticeMs: number;
  /** Planned reimages applied. */
  reimages: number;
  /**
   * Blocks below the replication factor on disk, integrated over the experiment, block-hours: replicas count wherever
   * they are, a draining server's too (it holds its data until the wipe), so a drain that completes leaves none; lost
   * blocks and the instant a write's pipeline is built do not count.
   */
  underReplicatedBlockHours: number;
  /** Most blocks below the replication factor at once (after each event). */
  peakUnderReplicated: number;
  /** Drains started ("decommission" only: one per reimage). */
  drainsStarted: number;
  /** Drains DECOMMISSIONED by their reimage (the deadline), and those still in progress at it. */
  drainsCompleted: number;
  drainsMissed: number;
  /** The missed drains' blocks still needing copies at their deadline (the monitor's `blocksNeedingCopies`), summed. */
  blocksNeedingCopiesAtMissedDeadlines: number;
  /** Notice to DECOMMISSIONED of the completed drains, ms: mean and longest (0 when none completed). */
  drainMsMean: number;
  drainMsMax: number;
  /**
   * Replicas created by completed copies of blocks that had a replica on an out-of-service server when the copy was
   * scheduled (the drains' copies), and by every other copy (re-replication after wipes); bytes = x blockBytes.
   */
  drainCopies: number;
  drainCopyBytes: number;
  wipeCopies: number;
  wipeCopyBytes: number;
}

/** Options of {@link runStorage}; {@link resolveStorageOptions} fills the defaults and validates. */
export interface StorageOptions {
  /** The replica placement policy: HDFS's rack-aware one, or the diversity grid of seeds/004, Algorithm 2. */
  placement: StoragePlacement;
  /**
   * Replicas per block.
   * @default 3
   */
  replication?: number;
  /**
   * Seeds every random choice (writers, write and access times, placement, replication sources).
   * @default cluster.seed
   */
  seed?: number;
  /**
   * Bytes per block (every block is full).
   * @default 268435456 (256 MiB)
   */
  blockBytes?: number;
  /**
   * Mean blocks written per day (a Poisson process over the experiment period), each by a task on a uniformly random
   * server. The default writes 30 blocks per server over the run (300,000 at 10,000 servers), whatever its length.
   * @default 30 x servers / experiment days
   */
  blocksPerDay?: number;
  /**
   * An explicit write schedule instead of `blocksPerDay` (tests, traces). Writes outside the experiment period are
   * rejected.
   * @default undefined
   */
  writes?: readonly StorageWrite[];
  /**
   * Bandwidth each server gives re-replication, bytes/s, shared evenly by its streams: a copy takes
   * blockBytes x replicationStreams / reReplicationBytesPerSec. 50 MB/s is a throttled share of a disk or a 1 Gb/s NIC
   * left over by the primary tenant.
   * @default 50000000
   */
  reReplicationBytesPerSec?: number;
  /**
   * Copies a server sends at once, and copies it receives at once: the monitor's `maxReplicationStreams` and
   * `maxReceiveStreams` (HDFS's dfs.namenode.replication.max-streams; see `storageMonitorOptions`).
   * @default 2
   */
  replicationStreams?: number;
  /**
   * Period of the replication monitor while blocks wait for a copy (HDFS's dfs.namenode.replication.interval).
   * @default 3000
   */
  replicationIntervalMs?: number;
  /**
   * A datanode refuses reads, writes and copies while its primary tenant's CPU utilization is at least this (percent),
   * like the datanode's `busyThreshold` of 0.9.
   * @default 90
   */
  busyThresholdPct?: number;
  /**
   * Mean reads per day of a uniformly random block that is not lost (a Poisson process), counted unavailable when
   * every live replica's server is busy.
   * @default servers (10,000 a day at 10,000 servers)
   */
  accessesPerDay?: number;
  /**
   * How often the diversity grid is rebuilt with the current free space (the namenode's tenant refresh).
   * @default 86400000 (a day)
   */
  gridRefreshMs?: number;
  /**
   * The stock policy filters every datanode it is given, so on clusters of more than 8 x this many servers each call
   * gets a window instead of the whole cluster: the servers its rules single out plus this many drawn uniformly (see
   * `runStorage`).
   * @default 16
   */
  stockWindowServers?: number;
  /**
   * Planned reimages announced ahead, met with or without decommissioning (see {@link PlannedStorageReimages}); they
   * replace `cluster.reimages`. Absent: the cluster's reimages, without notice, figure for figure as before.
   * @default undefined
   */
  planned?: PlannedStorageReimages;
  /**
   * Verify after every reimage, and at the end, that no replica outlived a reimage of its server and that the block
   * and server tables agree (O(blocks x replication) each time: tests only). A violation throws INTERNAL.
   * @default false
   */
  checkInvariants?: boolean;
  /**
   * Hooks into the run (tests, debugging).
   * @default undefined
   */
  observer?: StorageObserver;
  /**
   * Told about every `progressEvery` events (see `SimEngine.run`).
   * @default undefined
   */
  onProgress?: (p: EngineProgress) => void;
}

/** {@link StorageOptions} with every default filled in. */
export type ResolvedStorageOptions = Required<Omit<StorageOptions, "writes" | "observer" | "onProgress" | "planned">> &
  Pick<StorageOptions, "writes" | "observer" | "onProgress"> & { planned?: ResolvedPlannedStorageReimages };

/** A storage run's figures: the shared {@link StorageResult} and what the simulator also counts. */
export interface StorageRunResult extends StorageResult {
  /** Replicas destroyed by reimages. */
  replicasLost: number;
  /** Replicas created by completed re-replication copies (reReplicationBytes / blockBytes). */
  reReplications: number;
  /** Copies (per target) cut short because their source or target was reimaged mid-copy. */
  copiesFailed: number;
  /** Writes that found no datanode at all (every one busy or full); they are not counted in `blocks`. */
  writesFailed: number;
  /** Blocks written with fewer replicas than asked (too few qualifying datanodes at the time). */
  writesShort: number;
  /** Blocks alive at the end with fewer live replicas than the replication factor. */
  underReplicatedAtEnd: number;
  /** Times the diversity policy relaxed a rule of Algorithm 2 (0 for stock). */
  placementDegrades: number;
  /** Simulation events per wall-clock second. */
  eventsPerSec: number;
  /** What planned reimages did (only with `StorageOptions.planned`). */
  planned?: PlannedReimageFigures;
}

function invalid(field: string, why: string): never {
  throw new HarvestError("INVALID_ARGUMENT", `storage option ${field} ${why}`, { details: { field } });
}

/** Fills defaults into `options` for `cluster` and validates every field, naming the offending one. */
export function resolveStorageOptions(cluster: SimCluster, options: StorageOptions): ResolvedStorageOptions {
  const days = (cluster.horizonMs - cluster.historyMs) / DAY_MS;
  const servers = cluster.servers.length;
  const o: ResolvedStorageOptions = {
    placement: options.placement,
    replication: options.replication ?? 3,
    seed: options.seed ?? cluster.seed,
    blockBytes: options.blockBytes ?? 256 * MiB,
    blocksPerDay: options.blocksPerDay ?? (days > 0 ? (30 * servers) / days : 0),
    reReplicationBytesPerSec: options.reReplicationBytesPerSec ?? DEFAULT_RE_REPLICATION_BYTES_PER_SEC,
    replicationStreams: options.replicationStreams ?? 2,
    replicationIntervalMs: options.replicationIntervalMs ?? 3000,
    busyThresholdPct: options.busyThresholdPct ?? 90,
    accessesPerDay: options.accessesPerDay ?? servers,
    gridRefreshMs: options.gridRefreshMs ?? DAY_MS,
    stockWindowServers: options.stockWindowServers ?? 16,
    checkInvariants: options.checkInvariants ?? false,
    ...(options.writes !== undefined ? { writes: options.writes } : {}),
    ...(options.observer !== undefined ? { observer: options.observer } : {}),
    ...(options.onProgress !== undefined ? { onProgress: options.onProgress } : {}),
    ...(options.planned !== undefined ? { planned: resolvePlanned(cluster, options.planned) } : {}),
  };
  if (o.placement !== "stock" && o.placement !== "diversity")
    invalid("placement", `must be "stock" or "diversity" (got ${String(o.placement)})`);
  const positiveInt = (field: keyof ResolvedStorageOptions, v: number): void => {
    if (!Number.isSafeInteger(v) || v < 1) invalid(field, `must be an integer >= 1 (got ${v})`);
  };
  const positive = (field: keyof ResolvedStorageOptions, v: number): void => {
    if (!(Number.isFinite(v) && v > 0)) invalid(field, `must be a number > 0 (got ${v})`);
  };
  const nonNegative = (field: keyof ResolvedStorageOptions, v: number): void => {
    if (!(Number.isFinite(v) && v >= 0)) invalid(field, `must be a number >= 0 (got ${v})`);
  };
  positiveInt("replication", o.replication);
  if (o.replication > 255) invalid("replication", `must be at most 255 (got ${o.replication})`);
  if (!Number.isSafeInteger(o.seed)) invalid("seed", `must be an integer (got ${o.seed})`);
  positive("blockBytes", o.blockBytes);
  nonNegative("blocksPerDay", o.blocksPerDay);
  positive("reReplicationBytesPerSec", o.reReplicationBytesPerSec);
  positiveInt("replicationStreams", o.replicationStreams);
  positive("replicationIntervalMs", o.replicationIntervalMs);
  if (!(o.busyThresholdPct > 0 && o.busyThresholdPct <= 100))
    invalid("busyThresholdPct", `must be in (0, 100] (got ${o.busyThresholdPct})`);
  nonNegative("accessesPerDay", o.accessesPerDay);
  positive("gridRefreshMs", o.gridRefreshMs);
  positiveInt("stockWindowServers", o.stockWindowServers);
  for (const [i, w] of (o.writes ?? []).entries()) {
    if (!(w.atMs >= cluster.historyMs && w.atMs < cluster.horizonMs))
      invalid(`writes[${i}].atMs`, `must be in [${cluster.historyMs}, ${cluster.horizonMs}) (got ${w.atMs})`);
    if (!(Number.isInteger(w.writer) && w.writer >= 0 && w.writer < servers))
      invalid(`writes[${i}].writer`, `must be a server index in 0..${servers - 1} (got ${w.writer})`);
  }
  return o;
}

/** Fills the defaults of planned reimages and validates them (INVALID_ARGUMENT naming the field). */
function resolvePlanned(cluster: SimCluster, p: PlannedStorageReimages): ResolvedPlannedStorageReimages {
  const noticeMs = p.noticeMs ?? 30 * 60_000;
  const drain = p.drain ?? "decommission";
  if (!(Number.isFinite(noticeMs) && noticeMs >= 0)) invalid("planned.noticeMs", `must be >= 0 (got ${noticeMs})`);
  if (drain !== "none" && drain !== "decommission")
    invalid("planned.drain", `must be "none" or "decommission" (got ${String(drain)})`);
  const servers = cluster.servers.length;
  p.events.forEach((e, i) => {
    if (!(Number.isInteger(e.server) && e.server >= 0 && e.server < servers))
      invalid(`planned.events[${i}].server`, `must be a server index in 0..${servers - 1} (got ${e.server})`);
    if (!(e.atMs >= cluster.historyMs && e.atMs < cluster.horizonMs))
      invalid(`planned.events[${i}].atMs`, `must be in [${cluster.historyMs}, ${cluster.horizonMs}) (got ${e.atMs})`);
  });
  // A stable sort: reimages of one instant keep the caller's order (the cluster's own give the same run as without).
  const events = p.events.map((e) => ({ server: e.server, atMs: e.atMs })).sort((a, b) => a.atMs - b.atMs);
  return { events, noticeMs, drain };
}

/**
 * What the placement policies know of each tenant, learnt from the history window [0, cluster.historyMs) only:
 * reimages per server per month (as the resource manager's tenant registry counts them) and peak CPU, the classifier's
 * `peakPercentile` (p95) of the tenant's average-server utilization. Without history both are 0.
 */
export function learnPlacementTenants(cluster: SimCluster): PlacementTenant[] {
  const reimages = new Float64Array(cluster.tenants.length);
  for (const r of cluster.reimages) {
    if (r.atMs >= cluster.historyMs) break;
    reimages[cluster.servers[r.server]!.tenant]! += 1;
  }
  const months = cluster.historyMs / MONTH_MS;
  const slots = Math.ceil(cluster.historyMs / cluster.slotMs);
  return cluster.tenants.map((t) => {
    const history = t.utilization.subarray(0, Math.min(slots, t.utilization.length));
    const sorted = Array.from(Float64Array.from(history).sort());
    const peak = percentileSorted(sorted, DEFAULT_CLASSIFIER_OPTIONS.peakPercentile);
    return {
      tenantId: t.id,
      environment: t.environment,
      reimagesPerServerMonth: months > 0 && t.servers.length > 0 ? reimages[t.index]! / t.servers.length / months : 0,
      peakCpuPct: Number.isNaN(peak) ? 0 : peak,
      servers: t.servers.map((s) => cluster.servers[s]!.id),
    };
  });
}

/**
 * Runs one storage experiment: `options.placement` at `options.replication` over the cluster's experiment period
 * [historyMs, horizonMs). Deterministic: the same cluster and options give the same result but for `wallMs` and
 * `eventsPerSec`.
 *
 * The model:
 * - Writes: a task on a random server writes a block; the policy chooses its targets as for the namenode's addBlock
 *   (the writer first when it qualifies). Fewer targets than asked: the block is under-replicated from the start.
 * - Reimages (`cluster.reimages`) destroy every replica on the server at once; the datanode is back at once, empty.
 *   The namenode learns of it at once (the datanode's reimage report) and cancels copies from or to the server.
 * - Re-replication is decided by the namenode's own ReplicationMonitor, fed the block events the model produces
 *   (a block written, a copy arrived, a server's replicas destroyed) as the namenode's block map feeds it, with the
 *   options of `storageMonitorOptions`: blocks are taken by HDFS's priority levels (fewest live replicas first); the
 *   source is a live replica whose primary is not busy and that has a free send stream (fewest in use, then random);
 *   the targets come from the same placement policy with `existing` = live replicas and `excluded` = replicas, pending
 *   targets and servers with no free receive stream (`maxReceiveStreams`, HDFS's considerLoad). The simulator applies
 *   the copies it returns with its bandwidth model: a copy is a pipeline from one source to its targets, holds one
 *   send stream of the source and one receive stream of each target, and takes blockBytes x streams / bandwidth. The
 *   monitor runs (at most every `replicationIntervalMs`, at most 2 x servers blocks a run, as HDFS) whenever a block
 *   falls short or a stream frees up; a block whose every source is busy, or for which the policy finds no target
 *   while no server is left out for load, is parked by the monitor until the next utilization slot (`wake()`), since
 *   nothing it waits for changes before then.
 * - A block is lost when its last live replica is destroyed; a copy whose source is reimaged fails with it, one whose
 *   target is reimaged loses that target.
 * - Free space: a server holds diskBytes; stored and incoming replicas take blockBytes each; a full server does not
 *   qualify (the views' remainingBytes).
 * - Policy views: one `DatanodeView` per server, all live, whose `remainingBytes` and `primaryBusy` read the current
 *   state, in one array reused for the whole run (the diversity policy's O(1) lookups).
 * - The stock policy filters every datanode it is given (a fraction of a microsecond each), so on large clusters it is
 *   asked about one replica at a time, each time over a fresh window: the servers its rules single out (the writer,
 *   the placed replicas) and `stockWindowServers` servers drawn uniformly. A uniform sample keeps its "another rack"
 *   and "any node" choices uniform over the cluster (they fall back to the rule's own fallback only when no sampled
 *   server qualifies, which at 16 is vanishingly rare). Its third-replica rule ("beside the second, when the first is
 *   on another rack") is asked over a uniform sample of the second's rack, then the whole rack, so it picks exactly
 *   as over the whole cluster; only when no server of that rack qualifies does the rule's fallback ("any node") get
 *   a sample of the cluster. The first two replicas of a write share one call (the writer, then "another rack").
 * - The diversity policy gets the learnt tenants (`learnPlacementTenants`) and current free space at the start and
 *   every `gridRefreshMs`.
 * - Accesses: Poisson reads of a uniformly random written block that is not lost; unavailable when every live
 *   replica's server has primary utilization >= busyThresholdPct at that time.
 * - Planned reimages (`planned`) replace the cluster's; with "decommission" a server is out of service from its notice
 *   to its reimage (see {@link PlannedStorageReimages}): the monitor (which completes drains on its ticks) is also asked
 *   to check its drains after every copy lands and at the drain's start, since it ticks only while blocks wait; writes
 *   leave out-of-service servers out (as the namenode's addBlock does), and a block may then hold more replicas than
 *   its replication (the in-service ones plus those on out-of-service servers) until the wipe.
 */
export function runStorage(cluster: SimCluster, options: StorageOptions): StorageRunResult {
  const o = resolveStorageOptions(cluster, options);
  const started = performance.now();
  const sim = new StorageSim(cluster, o);
  sim.run();
  const wallMs = performance.now() - started;
  return sim.result(wallMs);
}

// ------------------------------------------------------------------------------------------------ the simulation

/** The stock policy sees every datanode on clusters of at most this many times `stockWindowServers` servers. */
const STOCK_WINDOW_MIN_CLUSTER_FACTOR = 8;
/** Servers of the second replica's rack sampled first for the stock policy's third replica. */
const BESIDE_SAMPLE = 8;

/** Blocks the monitor looks at per run: this many per datanode (HDFS's work multiplier), at least the minimum. */
const WORK_PER_DATANODE = 2;
const WORK_MIN_BLOCKS = 64;

/** Block flags. */
const LOST = 2;

/** A replica as the monitor sees it (the model has no corrupt replicas). */
const GOOD = { corrupt: false } as const;

/**
 * The options the simulator gives the namenode's ReplicationMonitor, beside the daemon's defaults:
 * - `maxReplicationStreams` and `maxReceiveStreams` = `replicationStreams` (the daemon limits only what a datanode
 *   sends; here a server's bandwidth is shared by what it sends and what it receives, so both are limited);
 * - `maxWorkPerRun` = max(64, 2 x servers), HDFS's blocks per run (the daemon looks at every waiting block);
 * - `pendingTimeoutMs` = Infinity: the simulation tells the monitor of every copy that fails (its source or target
 *   reimaged), so none is ever lost unreported, while a throttled copy may well take longer than the daemon's 30 s;
 * - `parkBlocked`: a block that only a change of primary load or free space can help waits for the next utilization
 *   slot instead of being looked at on every run (an exact shortcut: nothing it waits for changes before then).
 */
export function storageMonitorOptions(
  o: Pick<ResolvedStorageOptions, "replicationStreams">,
  servers: number,
): Partial<ReplicationMonitorOptions> {
  return {
    maxReplicationStreams: o.replicationStreams,
    maxReceiveStreams: o.replicationStreams,
    maxWorkPerRun: Math.max(WORK_MIN_BLOCKS, WORK_PER_DATANODE * servers),
    pendingTimeoutMs: Infinity,
    parkBlocked: true,
  };
}

/** Independent random streams, one per purpose, so that one decision does not shift another's draws. */
const Stream = { Writes: 1, Accesses: 2, Placement: 3, Sources: 4 } as const;

/** The seed of the replication monitor's random source (copy sources and re-replication targets) for a run's seed. */
export function replicationRngSeed(seed: number): number {
  return streamSeed(seed, Stream.Sources);
}

function streamSeed(seed: number, stream: number): number {
  let h = (seed ^ Math.imul(stream, 0x9e3779b9)) >>> 0;
  h = Math.imul(h ^ (h >>> 16), 0x85ebca6b) >>> 0;
  h = Math.imul(h ^ (h >>> 13), 0xc2b2ae35) >>> 0;
  return (h ^ (h >>> 16)) >>> 0;
}

function exponentialMs(rng: SeededRng, perMs: number): number {
  return -Math.log(1 - rng.next()) / perMs;
}

/** A server as the placement policies see it: always live, free space and primary load read from the simulation. */
class ServerView implements DatanodeView {
  constructor(
    readonly datanodeId: string,
    readonly rack: string,
    private readonly sim: StorageSim,
    /** Index in `SimCluster.servers`. */
    readonly server: number,
  ) {}
  get remainingBytes(): number {
    return this.sim.remainingBytes(this.server);
  }
  get primaryBusy(): boolean {
    return this.sim.busy(this.server);
  }
}

/** Per server, a growable list of the blocks with a replica on it (replicas leave a server only all at once). */
class ServerBlocks {
  private lists: Int32Array[];
  readonly count: Int32Array;
  constructor(servers: number) {
    this.lists = Array.from({ length: servers }, () => new Int32Array(8));
    this.count = new Int32Array(servers);
  }
  push(server: number, block: number): void {
    let list = this.lists[server]!;
    const n = this.count[server]!;
    if (n === list.length) {
      const grown = new Int32Array(list.length * 2);
      grown.set(list);
      this.lists[server] = list = grown;
    }
    list[n] = block;
    this.count[server] = n + 1;
  }
  list(server: number): Int32Array {
    return this.lists[server]!.subarray(0, this.count[server]!);
  }
  clear(server: number): void {
    this.count[server] = 0;
  }
}

/** One run: the cluster's state in typed arrays, and the handlers of its events (see `runStorage`). */
class StorageSim {
  private readonly engine = new SimEngine();
  private readonly R: number;
  /**
   * Replica slots per block in `rep`: R, or more with decommissioning, where a block keeps its replicas on
   * out-of-service servers beside R in-service ones (grown by `widen` when a block needs more).
   */
  private W: number;
  private readonly S: number;
  private readonly n: number;
  private readonly copyMs: number;
  private readonly policy: PlacementPolicy;
  private readonly diversity: DiversityPlacementPolicy | undefined;
  private readonly learnt: PlacementTenant[];
  private readonly writeRng: SeededRng;
  private readonly accessRng: SeededRng;
  private readonly placeRng: SeededRng;
  /** The namenode's replication monitor, fed this simulation's block events. */
  private readonly monitor: ReplicationMonitor;
  /** The servers as the monitor's live datanodes (all of them, always). */
  private readonly liveServers: LiveDatanodes;
  private readonly serverIndex = new Map<string, number>();

  // Servers.
  private readonly ids: string[];
  private readonly views: ServerView[];
  private readonly disk: Float64Array;
  private readonly rackOf: Int32Array;
  private readonly rackServers: Int32Array[];
  private readonly stored: Int32Array;
  private readonly incoming: Int32Array;
  /** Bumped by every reimage: a replica is valid only with its server's epoch at placement. */
  private readonly epoch: Int32Array;
  private readonly serverBlocks: ServerBlocks;
  /** Copy ids sending from (receiving on) each server, `S` slots per server, -1 free. */
  private readonly outSlots: Int32Array;
  private readonly inSlots: Int32Array;
  private readonly outUsed: Int32Array;
  private readonly inUsed: Int32Array;
  /** Busy flags cached per utilization slot. */
  private readonly busySlot: Float64Array;
  private readonly busyFlag: Uint8Array;
  /** Scratch marks for stock windows. */
  private readonly windowMark: Int32Array;
  private windowStamp = 0;

  // Blocks: replication slots per block; the first live[b] of rep hold the live replicas, in the order they were
  // placed (the order the namenode's block map keeps them in).
  private blockCap: number;
  private blockCount = 0;
  private rep: Int32Array;
  private repEpoch: Int32Array;
  private live: Uint8Array;
  private flags: Uint8Array;

  // Copies: a pool reused through a free list; `copySerial` tells a completion event whether its copy still stands.
  private copyCap = 0;
  private copyBlock: Int32Array = new Int32Array(0);
  private copySource: Int32Array = new Int32Array(0);
  private copySerial: Int32Array = new Int32Array(0);
  private copyTargets: Int32Array = new Int32Array(0);
  private copyLeft: Uint8Array = new Uint8Array(0);
  private readonly freeCopies: number[] = [];

  // The monitor's runs.
  private tickPending = false;
  private lastTickMs = -Infinity;
  private wakePending = false;

  // Scratch for policy calls.
  private readonly noneExcluded: ReadonlySet<string> = new Set<string>();

  // Planned reimages (`o.planned`); all empty or 0 without.
  private readonly decommissioning: boolean;
  /** Invariant: the ids of the servers with `outFlag` set, i.e. out of service at the monitor (draining or done). */
  private readonly outOfService = new Set<string>();
  private readonly outFlag: Uint8Array;
  /** Per server, the times of its announced reimages not yet applied, in order; the first is its drain's deadline. */
  private readonly announced: number[][];
  /** Per copy: 1 when its block had a replica on an out-of-service server when it was scheduled (a drain's copy). */
  private copyForDrain: Uint8Array = new Uint8Array(0);
  /** Blocks (not lost) below R replicas on disk, and their integral over time (see `PlannedReimageFigures`). */
  private readonly trackUnder: boolean;
  private under = 0;
  private underSinceMs = 0;
  private underMs = 0;
  private peakUnder = 0;
  private drainsStarted = 0;
  private drainsCompleted = 0;
  private drainsMissed = 0;
  private blocksNeedingAtMissed = 0;
  private readonly drainMs: number[] = [];
  private drainReplicas = 0;

  // Figures.
  private blocksLost = 0;
  private replicasLost = 0;
  private reReplications = 0;
  private copiesFailed = 0;
  private writesFailed = 0;
  private writesShort = 0;
  private accesses = 0;
  private unavailable = 0;
  private reimagesApplied = 0;
  private degrades = 0;

  constructor(
    private readonly cluster: SimCluster,
    private readonly o: ResolvedStorageOptions,
  ) {
    const n = cluster.servers.length;
    this.n = n;
    this.R = o.replication;
    this.decommissioning = o.planned?.drain === "decommission";
    this.W = this.decommissioning ? this.R + 1 : this.R;
    this.trackUnder = o.planned !== undefined;
    this.outFlag = new Uint8Array(n);
    this.announced = this.decommissioning ? Array.from({ length: n }, () => []) : [];
    this.S = o.replicationStreams;
    this.copyMs = ((o.blockBytes * o.replicationStreams) / o.reReplicationBytesPerSec) * 1000;
    this.writeRng = new SeededRng(streamSeed(o.seed, Stream.Writes));
    this.accessRng = new SeededRng(streamSeed(o.seed, Stream.Accesses));
    this.placeRng = new SeededRng(streamSeed(o.seed, Stream.Placement));

    this.ids = cluster.servers.map((s) => s.id);
    this.ids.forEach((id, i) => this.serverIndex.set(id, i));
    this.views = cluster.servers.map((s, i) => new ServerView(s.id, s.rack, this, i));
    this.liveServers = { all: this.views, get: (id) => this.views[this.serverIndex.get(id) ?? -1] };
    this.disk = Float64Array.from(cluster.servers, (s) => s.diskBytes);
    const rackIndex = new Map<string, number>();
    const members: number[][] = [];
    this.rackOf = new Int32Array(n);
    cluster.servers.forEach((s, i) => {
      let r = rackIndex.get(s.rack);
      if (r === undefined) {
        r = members.length;
        rackIndex.set(s.rack, r);
        members.push([]);
      }
      this.rackOf[i] = r;
      members[r]!.push(i);
    });
    this.rackServers = members.map((m) => Int32Array.from(m));
    this.stored = new Int32Array(n);
    this.incoming = new Int32Array(n);
    this.epoch = new Int32Array(n);
    this.serverBlocks = new ServerBlocks(n);
    this.outSlots = new Int32Array(n * this.S).fill(-1);
    this.inSlots = new Int32Array(n * this.S).fill(-1);
    this.outUsed = new Int32Array(n);
    this.inUsed = new Int32Array(n);
    this.busySlot = new Float64Array(n).fill(NaN);
    this.busyFlag = new Uint8Array(n);
    this.windowMark = new Int32Array(n);

    const days = (cluster.horizonMs - cluster.historyMs) / DAY_MS;
    const expected = o.writes ? o.writes.length : o.blocksPerDay * days;
    this.blockCap = Math.max(16, Math.ceil(expected + 6 * Math.sqrt(expected) + 16));
    this.rep = new Int32Array(this.blockCap * this.W);
    this.repEpoch = new Int32Array(this.blockCap * this.W);
    this.live = new Uint8Array(this.blockCap);
    this.flags = new Uint8Array(this.blockCap);
    this.growCopies(64);

    this.learnt = learnPlacementTenants(cluster);
    if (o.placement === "diversity") {
      this.diversity = new DiversityPlacementPolicy({ onDegrade: () => this.degrades++ });
      this.policy = this.diversity;
    } else {
      this.policy = new StockPlacementPolicy();
    }
    const blocks: BlockSource = { get: (b) => this.blockView(b) };
    const placement: PlacementPolicy = {
      name: this.policy.name,
      chooseTargets: (req) => this.chooseFor(req),
    };
    this.monitor = new ReplicationMonitor(
      placement,
      new SeededRng(replicationRngSeed(o.seed)),
      blocks,
      storageMonitorOptions(o, n),
    );
  }

  /** Block `b` as the monitor reads it: committed, full, its live replicas in placement order. */
  private blockView(b: number): BlockView | undefined {
    if (!(b >= 0 && b < this.blockCount)) return undefined;
    const replicas = new Map<string, { corrupt: boolean }>();
    for (let k = b * this.W; k < b * this.W + this.live[b]!; k++) replicas.set(this.ids[this.rep[k]!]!, GOOD);
    return {
      blockId: b,
      genStamp: 0,
      numBytes: this.o.blockBytes,
      expectedReplication: this.R,
      committed: true,
      replicas,
    };
  }

  /** The monitor's placement questions, answered by the run's policy (on windows for the stock one, see `choose`). */
  private chooseFor(req: PlacementRequest): DatanodeView[] {
    const placed = (req.existing ?? []).map((id) => this.serverIndex.get(id)!);
    const writer = req.writerDatanodeId === undefined ? -1 : this.serverIndex.get(req.writerDatanodeId)!;
    return this.choose(req.replication, writer, placed, req.excluded, req.rng).map((s) => this.views[s]!);
  }

  // ---------------------------------------------------------------------------------------------- state for views

  remainingBytes(server: number): number {
    return this.disk[server]! - (this.stored[server]! + this.incoming[server]!) * this.o.blockBytes;
  }

  busy(server: number): boolean {
    const slot = Math.floor(this.engine.clock.nowMs() / this.cluster.slotMs);
    if (this.busySlot[server] !== slot) {
      this.busySlot[server] = slot;
      const u = serverUtilization(this.cluster, server, this.engine.clock.nowMs());
      this.busyFlag[server] = u >= this.o.busyThresholdPct ? 1 : 0;
    }
    return this.busyFlag[server] === 1;
  }

  // ---------------------------------------------------------------------------------------------- running

  run(): void {
    const { cluster, o, engine } = this;
    const from = cluster.historyMs;
    const until = cluster.horizonMs;
    engine.clock.advanceTo(from);
    if (this.diversity) {
      this.refreshGrid();
      for (let t = from + o.gridRefreshMs; t < until; t += o.gridRefreshMs) engine.at(t, () => this.refreshGrid());
    }
    this.scheduleWrites(from, until);
    this.scheduleAccesses(from, until);
    this.underSinceMs = from;
    if (o.planned) this.schedulePlanned(o.planned, from, until);
    else this.scheduleReimages(from, until);
    engine.run(until, o.onProgress);
    if (this.trackUnder) this.countUnder(until, 0);
    if (o.checkInvariants) this.check([]);
    o.observer?.onEnd?.((b) => {
      if (!(b >= 0 && b < this.blockCount)) return [];
      return Array.from(this.rep.subarray(b * this.W, b * this.W + this.live[b]!));
    });
  }

  result(wallMs: number): StorageRunResult {
    const { cluster, o } = this;
    let under = 0;
    for (let b = 0; b < this.blockCount; b++) if ((this.flags[b]! & LOST) === 0 && this.live[b]! < this.R) under++;
    const events = this.engine.events;
    return {
      level: cluster.level,
      servers: this.n,
      days: (cluster.horizonMs - cluster.historyMs) / DAY_MS,
      seed: o.seed,
      traces: cluster.source,
      placement: o.placement,
      replication: this.R,
      blocks: this.blockCount,
      blocksLost: this.blocksLost,
      accesses: this.accesses,
      unavailableAccesses: this.unavailable,
      reimages: this.reimagesApplied,
      reReplicationBytes: this.reReplications * o.blockBytes,
      reReplicationMBps: o.reReplicationBytesPerSec / 1e6,
      events,
      wallMs,
      replicasLost: this.replicasLost,
      reReplications: this.reReplications,
      copiesFailed: this.copiesFailed,
      writesFailed: this.writesFailed,
      writesShort: this.writesShort,
      underReplicatedAtEnd: under,
      placementDegrades: this.degrades,
      eventsPerSec: wallMs > 0 ? events / (wallMs / 1000) : 0,
      ...(o.planned ? { planned: this.plannedFigures(o.planned) } : {}),
    };
  }

  private plannedFigures(p: ResolvedPlannedStorageReimages): PlannedReimageFigures {
    const bytes = this.o.blockBytes;
    const wipeCopies = this.reReplications - this.drainReplicas;
    const drains = this.drainMs;
    return {
      drain: p.drain,
      noticeMs: p.noticeMs,
      reimages: this.reimagesApplied,
      underReplicatedBlockHours: this.underMs / 3_600_000,
      peakUnderReplicated: this.peakUnder,
      drainsStarted: this.drainsStarted,
      drainsCompleted: this.drainsCompleted,
      drainsMissed: this.drainsMissed,
      blocksNeedingCopiesAtMissedDeadlines: this.blocksNeedingAtMissed,
      drainMsMean: drains.length > 0 ? drains.reduce((a, x) => a + x, 0) / drains.length : 0,
      drainMsMax: drains.reduce((a, x) => Math.max(a, x), 0),
      drainCopies: this.drainReplicas,
      drainCopyBytes: this.drainReplicas * bytes,
      wipeCopies,
      wipeCopyBytes: wipeCopies * bytes,
    };
  }

  private refreshGrid(): void {
    const free = new Map<string, number>();
    for (let s = 0; s < this.n; s++) free.set(this.ids[s]!, Math.max(0, this.remainingBytes(s)));
    this.diversity!.setTenants(this.learnt, free);
  }

  private scheduleWrites(from: number, until: number): void {
    const { engine, o } = this;
    if (o.writes) {
      for (const w of o.writes) engine.at(w.atMs, () => this.write(w.writer));
      return;
    }
    const perMs = o.blocksPerDay / DAY_MS;
    if (!(perMs > 0)) return;
    const rng = this.writeRng;
    const next = (): void => {
      this.write(Math.min(this.n - 1, Math.floor(rng.next() * this.n)));
      const at = engine.clock.nowMs() + exponentialMs(rng, perMs);
      if (at < until) engine.at(at, next);
    };
    const first = from + exponentialMs(rng, perMs);
    if (first < until) engine.at(first, next);
  }

  private scheduleAccesses(from: number, until: number): void {
    const { engine } = this;
    const perMs = this.o.accessesPerDay / DAY_MS;
    if (!(perMs > 0)) return;
    const rng = this.accessRng;
    const next = (): void => {
      this.access();
      const at = engine.clock.nowMs() + exponentialMs(rng, perMs);
      if (at < until) engine.at(at, next);
    };
    const first = from + exponentialMs(rng, perMs);
    if (first < until) engine.at(first, next);
  }

  private scheduleReimages(from: number, until: number): void {
    const reimages = this.cluster.reimages;
    let i = 0;
    while (i < reimages.length && reimages[i]!.atMs < from) i++;
    // All reimages of one instant are applied together, before the monitor looks: a correlated wave is one event.
    const batch = (): void => {
      const at = reimages[i]!.atMs;
      const hit: number[] = [];
      while (i < reimages.length && reimages[i]!.atMs === at) hit.push(reimages[i++]!.server);
      for (const s of hit) this.reimage(s);
      if (this.o.checkInvariants) this.check(hit);
      if (i < reimages.length && reimages[i]!.atMs < until) this.engine.at(reimages[i]!.atMs, batch);
    };
    if (i < reimages.length && reimages[i]!.atMs < until) this.engine.at(reimages[i]!.atMs, batch);
  }

  /**
   * Planned reimages in place of the cluster's: batched by instant as `scheduleReimages` does; with decommissioning,
   * every notice is scheduled first, so a notice at its reimage's instant (no notice) comes before it.
   */
  private schedulePlanned(p: ResolvedPlannedStorageReimages, from: number, until: number): void {
    const events = p.events;
    if (this.decommissioning)
      for (const e of events)
        this.engine.at(Math.max(from, e.atMs - p.noticeMs), () => this.announce(e.server, e.atMs));
    let i = 0;
    const batch = (): void => {
      const at = events[i]!.atMs;
      const hit: number[] = [];
      while (i < events.length && events[i]!.atMs === at) hit.push(events[i++]!.server);
      for (const s of hit) this.plannedReimage(s);
      if (this.o.checkInvariants) this.check(hit);
      if (i < events.length && events[i]!.atMs < until) this.engine.at(events[i]!.atMs, batch);
    };
    if (events.length > 0 && events[0]!.atMs < until) this.engine.at(events[0]!.atMs, batch);
  }

  // ---------------------------------------------------------------------------------------------- writes and reads

  private write(writer: number): void {
    // Out-of-service datanodes take no new block (the namenode leaves them out of addBlock's targets).
    const excluded = this.outOfService.size > 0 ? this.outOfService : this.noneExcluded;
    const targets = this.choose(this.R, writer, [], excluded, this.placeRng);
    if (targets.length === 0) {
      this.writesFailed++;
      return;
    }
    const b = this.newBlock();
    for (const t of targets) {
      this.addReplica(b, t);
      this.o.observer?.onPlaced?.(b, t, this.engine.clock.nowMs(), "write");
    }
    if (targets.length < this.R) this.writesShort++;
    if (this.trackUnder) this.countUnder(this.engine.clock.nowMs(), this.underDelta(b, 0));
    // The namenode learns of the block with its replicas; one written short waits for a copy.
    this.monitor.blockChanged(b);
    this.workWaits();
  }

  private access(): void {
    if (this.blockCount === 0) return;
    const rng = this.accessRng;
    // Lost blocks are few; a handful of draws finds a live one (or the read is not attempted).
    for (let tries = 0; tries < 16; tries++) {
      const b = Math.min(this.blockCount - 1, Math.floor(rng.next() * this.blockCount));
      if ((this.flags[b]! & LOST) !== 0) continue;
      this.accesses++;
      const base = b * this.W;
      const live = this.live[b]!;
      let available = false;
      for (let k = 0; k < live; k++) {
        if (!this.busy(this.rep[base + k]!)) {
          available = true;
          break;
        }
      }
      if (!available) this.unavailable++;
      return;
    }
  }

  private newBlock(): number {
    if (this.blockCount === this.blockCap) this.growBlocks();
    return this.blockCount++;
  }

  private growBlocks(): void {
    const cap = this.blockCap * 2;
    const grow32 = (a: Int32Array): Int32Array => {
      const g = new Int32Array(cap * this.W);
      g.set(a);
      return g;
    };
    const grow8 = (a: Uint8Array): Uint8Array => {
      const g = new Uint8Array(cap);
      g.set(a);
      return g;
    };
    this.rep = grow32(this.rep);
    this.repEpoch = grow32(this.repEpoch);
    this.live = grow8(this.live);
    this.flags = grow8(this.flags);
    this.blockCap = cap;
  }

  private addReplica(b: number, server: number): void {
    if (this.live[b] === this.W) this.widen();
    const at = b * this.W + this.live[b]!;
    this.rep[at] = server;
    this.repEpoch[at] = this.epoch[server]!;
    this.live[b]!++;
    this.stored[server]!++;
    this.serverBlocks.push(server, b);
  }

  /**
   * One more replica slot per block (decommissioning only: a block holds replicas on out-of-service servers beside R
   * in-service ones, more than one such server only when drains overlap).
   */
  private widen(): void {
    const W = this.W;
    const wider = W + 1;
    const rep = new Int32Array(this.blockCap * wider);
    const repEpoch = new Int32Array(this.blockCap * wider);
    for (let b = 0; b < this.blockCount; b++) {
      rep.set(this.rep.subarray(b * W, b * W + this.live[b]!), b * wider);
      repEpoch.set(this.repEpoch.subarray(b * W, b * W + this.live[b]!), b * wider);
    }
    this.rep = rep;
    this.repEpoch = repEpoch;
    this.W = wider;
  }

  /**
   * Block-hours below R replicas: integrates the count up to `nowMs`, then applies `delta` (+1: a block fell below R,
   * -1: one reached R again or was lost).
   */
  private countUnder(nowMs: number, delta: number): void {
    this.underMs += this.under * (nowMs - this.underSinceMs);
    this.underSinceMs = nowMs;
    this.under += delta;
    if (this.under > this.peakUnder) this.peakUnder = this.under;
  }

  /** `countUnder`'s delta for block `b`, whose live replicas went from `before` to `live[b]` (0: new, or lost). */
  private underDelta(b: number, before: number): number {
    const after = this.live[b]!;
    return (after > 0 && after < this.R ? 1 : 0) - (before > 0 && before < this.R ? 1 : 0);
  }

  /** Removes a replica, keeping the others in placement order (as the block map's replica map does). */
  private removeReplica(b: number, server: number): void {
    const base = b * this.W;
    const last = base + this.live[b]! - 1;
    for (let k = base; k <= last; k++) {
      if (this.rep[k] !== server) continue;
      this.rep.copyWithin(k, k + 1, last + 1);
      this.repEpoch.copyWithin(k, k + 1, last + 1);
      this.live[b]!--;
      return;
    }
    throw new HarvestError("INTERNAL", `block ${b} has no replica on server ${server} to remove`);
  }

  // ---------------------------------------------------------------------------------------------- placement

  /**
   * Up to `count` targets from the policy, as server indices. `placed` are the block's live replicas (re-replication:
   * `existing`), `excluded` what the namenode excludes, `rng` the caller's random source (the writes' own, or the
   * monitor's).
   */
  private choose(
    count: number,
    writer: number,
    placed: readonly number[],
    excluded: ReadonlySet<string>,
    rng: Rng,
  ): number[] {
    if (this.o.placement === "diversity" || this.n <= STOCK_WINDOW_MIN_CLUSTER_FACTOR * this.o.stockWindowServers)
      return this.ask(count, writer, placed, excluded, this.views, rng);
    // The stock policy on windows (see runStorage). Each call draws a fresh sample, so that replicas the rules leave
    // free ("another rack", "any node") are as independent of each other as when the policy sees every datanode. The
    // first two replicas of a write share a call: the first is the writer, the second "another rack" from the sample.
    const out: number[] = [];
    const sofar = [...placed];
    while (out.length < count) {
      const want = sofar.length === 0 ? Math.min(2, count - out.length) : 1;
      let chosen: number[] = [];
      const beside = sofar.length === 2 && this.rackOf[sofar[0]!] !== this.rackOf[sofar[1]!] ? sofar[1]! : -1;
      if (beside >= 0) {
        // "Beside the second": a uniform sample of its rack, then the whole rack, are the rule's candidates; only
        // when none qualifies does its fallback ("any node") get a sample of the cluster.
        chosen = this.ask(1, -1, sofar, excluded, this.window(-1, sofar, beside, BESIDE_SAMPLE, 0, rng), rng);
        if (chosen.length === 0)
          chosen = this.ask(1, -1, sofar, excluded, this.window(-1, sofar, beside, Infinity, 0, rng), rng);
      }
      if (chosen.length === 0) {
        const first = sofar.length === 0 ? writer : -1;
        const window = this.window(first, sofar, -1, 0, this.o.stockWindowServers, rng);
        chosen = this.ask(want, first, sofar, excluded, window, rng);
      }
      if (chosen.length === 0) break;
      for (const s of chosen) {
        out.push(s);
        sofar.push(s);
      }
    }
    return out;
  }

  /** One chooseTargets call of the policy, in server indices. */
  private ask(
    count: number,
    writer: number,
    placed: readonly number[],
    excluded: ReadonlySet<string>,
    datanodes: readonly ServerView[],
    rng: Rng,
  ): number[] {
    const chosen = this.policy.chooseTargets({
      replication: count,
      writerDatanodeId: writer >= 0 ? this.ids[writer] : undefined,
      excluded,
      existing: placed.map((s) => this.ids[s]!),
      datanodes,
      blockSizeBytes: this.o.blockBytes,
      rng,
    });
    return chosen.map(serverOf);
  }

  /**
   * A window for the stock policy: the writer, the placed replicas, up to `fromRack` servers of `rackOf`'s rack and
   * `sample` servers of the cluster, both distinct and drawn uniformly (a fresh draw per call).
   */
  private window(
    writer: number,
    placed: readonly number[],
    rackOf: number,
    fromRack: number,
    sample: number,
    rng: Rng,
  ): ServerView[] {
    const stamp = ++this.windowStamp;
    const out: ServerView[] = [];
    if (writer >= 0) this.addToWindow(out, writer, stamp);
    for (const s of placed) this.addToWindow(out, s, stamp);
    if (rackOf >= 0) {
      const rack = this.rackServers[this.rackOf[rackOf]!]!;
      if (fromRack >= rack.length) for (const s of rack) this.addToWindow(out, s, stamp);
      else {
        // Distinct members by rejection (a few draws: the sample is a fraction of the rack).
        const want = out.length + fromRack;
        for (let tries = 0; out.length < want && tries < 4 * fromRack; tries++)
          this.addToWindow(out, rack[Math.min(rack.length - 1, Math.floor(rng.next() * rack.length))]!, stamp);
      }
    }
    // Distinct servers by rejection: the sample is far smaller than the clusters this path serves.
    const want = out.length + Math.min(this.n - out.length, sample);
    while (out.length < want) this.addToWindow(out, Math.min(this.n - 1, Math.floor(rng.next() * this.n)), stamp);
    return out;
  }

  private addToWindow(out: ServerView[], s: number, stamp: number): void {
    if (this.windowMark[s] === stamp) return;
    this.windowMark[s] = stamp;
    out.push(this.views[s]!);
  }

  // ---------------------------------------------------------------------------------------------- reimages

  private reimage(s: number): void {
    this.reimagesApplied++;
    this.epoch[s]!++;
    this.o.observer?.onReimage?.(s, this.engine.clock.nowMs());
    const S = this.S;
    // Copies from s fail whole; copies to s lose that target. Both before the replicas go, so that a block whose
    // last replica goes here has no copy left in flight.
    for (let k = s * S; k < (s + 1) * S; k++) {
      const c = this.outSlots[k]!;
      if (c >= 0) this.cancelCopy(c);
    }
    for (let k = s * S; k < (s + 1) * S; k++) {
      const c = this.inSlots[k]!;
      if (c >= 0) this.dropTarget(c, s);
    }
    const blocks = this.serverBlocks.list(s);
    for (let j = 0; j < blocks.length; j++) {
      const b = blocks[j]!;
      const before = this.live[b]!;
      this.removeReplica(b, s);
      if (this.trackUnder) this.countUnder(this.engine.clock.nowMs(), this.underDelta(b, before));
      this.replicasLost++;
      if (this.live[b] === 0) {
        this.flags[b]! |= LOST;
        this.blocksLost++;
        this.o.observer?.onLost?.(b, this.engine.clock.nowMs());
      }
    }
    // The namenode learns of it (the datanode's reimage report): its copies are dropped, its blocks looked at again.
    this.monitor.datanodeRemoved(this.ids[s]!, blocks);
    this.serverBlocks.clear(s);
    this.stored[s] = 0;
    this.workWaits();
  }

  // ---------------------------------------------------------------------------------------------- planned reimages

  /** A planned reimage of `s` at `atMs` is announced: its drain starts now, or after the one it is in finishes. */
  private announce(s: number, atMs: number): void {
    const queue = this.announced[s]!;
    queue.push(atMs);
    if (queue.length === 1) this.startDrain(s, atMs);
  }

  /** Decommissions `s`'s datanode with `deadlineMs`: copies on their way to it are given up, its blocks queue. */
  private startDrain(s: number, deadlineMs: number): void {
    const now = this.engine.clock.nowMs();
    const id = this.ids[s]!;
    this.drainsStarted++;
    // The monitor gives up the copies to it (they no longer help); the model's copies lose that target with them.
    for (let k = s * this.S; k < (s + 1) * this.S; k++) {
      const c = this.inSlots[k]!;
      if (c >= 0) this.dropTarget(c, s);
    }
    this.outOfService.add(id);
    this.outFlag[s] = 1;
    this.monitor.decommission(id, this.serverBlocks.list(s), { nowMs: now, deadlineMs });
    // A server that holds nothing to copy is decommissioned at once.
    this.monitor.checkDecommissions(now);
    this.workWaits();
  }

  /**
   * A planned reimage: with decommissioning, the drain is judged at its deadline (completed, or missed with the blocks
   * still needing copies), the disk is wiped as for any reimage, and the empty datanode is back in service; the next
   * reimage announced for it, if any, starts its drain.
   */
  private plannedReimage(s: number): void {
    if (!this.decommissioning) {
      this.reimage(s);
      return;
    }
    const now = this.engine.clock.nowMs();
    const id = this.ids[s]!;
    if (this.outFlag[s] === 1) {
      this.monitor.checkDecommissions(now);
      const status = this.monitor.decommissionStatus(id, now);
      if (status?.state === "DECOMMISSIONED") {
        this.drainsCompleted++;
        this.drainMs.push(status.finishedMs - status.startedMs);
      } else {
        this.drainsMissed++;
        this.blocksNeedingAtMissed += status?.blocksNeedingCopies ?? 0;
      }
    }
    this.reimage(s);
    const queue = this.announced[s]!;
    queue.shift();
    if (this.outFlag[s] === 1) {
      this.monitor.recommission(id, []);
      this.outOfService.delete(id);
      this.outFlag[s] = 0;
    }
    if (queue.length > 0) this.startDrain(s, queue[0]!);
  }

  /** Whether block `b` has a replica on an out-of-service server. */
  private heldOutOfService(b: number): boolean {
    for (let k = b * this.W; k < b * this.W + this.live[b]!; k++) if (this.outFlag[this.rep[k]!] === 1) return true;
    return false;
  }

  // ---------------------------------------------------------------------------------------------- copies

  private growCopies(cap: number): void {
    const R = this.R;
    const grow = (a: Int32Array, width: number): Int32Array => {
      const g = new Int32Array(cap * width);
      g.set(a);
      return g;
    };
    this.copyBlock = grow(this.copyBlock, 1);
    this.copySource = grow(this.copySource, 1);
    this.copySerial = grow(this.copySerial, 1);
    this.copyTargets = grow(this.copyTargets, R);
    const left = new Uint8Array(cap);
    left.set(this.copyLeft);
    this.copyLeft = left;
    const forDrain = new Uint8Array(cap);
    forDrain.set(this.copyForDrain);
    this.copyForDrain = forDrain;
    for (let c = cap - 1; c >= this.copyCap; c--) this.freeCopies.push(c);
    this.copyCap = cap;
  }

  private startCopy(b: number, source: number, targets: readonly number[]): void {
    if (this.freeCopies.length === 0) this.growCopies(this.copyCap * 2);
    const c = this.freeCopies.pop()!;
    const serial = this.copySerial[c]!;
    this.copyBlock[c] = b;
    this.copySource[c] = source;
    this.copyLeft[c] = targets.length;
    if (this.decommissioning) this.copyForDrain[c] = this.heldOutOfService(b) ? 1 : 0;
    takeSlot(this.outSlots, this.outUsed, this.S, source, c);
    for (let i = 0; i < this.R; i++) {
      const t = i < targets.length ? targets[i]! : -1;
      this.copyTargets[c * this.R + i] = t;
      if (t < 0) continue;
      takeSlot(this.inSlots, this.inUsed, this.S, t, c);
      this.incoming[t]!++;
    }
    this.engine.at(this.engine.clock.nowMs() + this.copyMs, () => this.finishCopy(c, serial));
  }

  private finishCopy(c: number, serial: number): void {
    if (this.copySerial[c] !== serial) return;
    const b = this.copyBlock[c]!;
    for (let i = 0; i < this.R; i++) {
      const t = this.copyTargets[c * this.R + i]!;
      if (t < 0) continue;
      this.releaseTarget(c, i, t);
      const before = this.live[b]!;
      this.addReplica(b, t);
      if (this.trackUnder) this.countUnder(this.engine.clock.nowMs(), this.underDelta(b, before));
      this.reReplications++;
      if (this.copyForDrain[c] === 1) this.drainReplicas++;
      this.o.observer?.onPlaced?.(b, t, this.engine.clock.nowMs(), "copy");
    }
    this.freeCopy(c);
    // The targets' replicas reach the namenode: the copy is settled (a target dropped on the way leaves it short).
    this.monitor.blockChanged(b);
    // The monitor completes drains on its ticks, which run only while blocks wait: the last copy of a drain must be
    // seen now, not at whatever tick comes next.
    if (this.outOfService.size > 0) this.monitor.checkDecommissions(this.engine.clock.nowMs());
    this.workWaits();
  }

  /** The source was reimaged: every target of the copy fails (the monitor learns of it from the reimage). */
  private cancelCopy(c: number): void {
    for (let i = 0; i < this.R; i++) {
      const t = this.copyTargets[c * this.R + i]!;
      if (t < 0) continue;
      this.releaseTarget(c, i, t);
      this.copiesFailed++;
    }
    this.freeCopy(c);
  }

  /** Target `t` of copy `c` was reimaged: the copy goes on to its other targets, if any. */
  private dropTarget(c: number, t: number): void {
    for (let i = 0; i < this.R; i++) {
      if (this.copyTargets[c * this.R + i] !== t) continue;
      this.releaseTarget(c, i, t);
      this.copiesFailed++;
      this.copyLeft[c]!--;
    }
    if (this.copyLeft[c] === 0) this.freeCopy(c);
  }

  private releaseTarget(c: number, i: number, t: number): void {
    this.copyTargets[c * this.R + i] = -1;
    freeSlot(this.inSlots, this.inUsed, this.S, t, c);
    this.incoming[t]!--;
  }

  private freeCopy(c: number): void {
    freeSlot(this.outSlots, this.outUsed, this.S, this.copySource[c]!, c);
    this.copySerial[c]!++;
    this.freeCopies.push(c);
  }

  // ---------------------------------------------------------------------------------------------- the monitor

  /** Blocks wait at the monitor: it runs (see `ensureTick`). */
  private workWaits(): void {
    if (this.monitor.waiting() > 0) this.ensureTick();
  }

  /**
   * The monitor runs at once when idle, else one interval after its last run. It runs only when something it waits
   * for has changed (a block fell short, a copy ended, a work limit cut its last run short, a new utilization slot woke
   * parked blocks); a periodic monitor would find nothing new on the other ticks.
   */
  private ensureTick(): void {
    if (this.tickPending) return;
    this.tickPending = true;
    const now = this.engine.clock.nowMs();
    this.engine.at(Math.max(now, this.lastTickMs + this.o.replicationIntervalMs), () => this.tick());
  }

  /** One run of the namenode's monitor; its copies start at once, under the bandwidth model. */
  private tick(): void {
    this.tickPending = false;
    const now = this.engine.clock.nowMs();
    this.lastTickMs = now;
    this.o.observer?.onMonitorTick?.(now);
    const work = this.monitor.tick(this.liveServers, now);
    if (work.delete.length > 0)
      throw new HarvestError(
        "INTERNAL",
        `the monitor deleted replicas (${work.delete.length}): the model has no surplus`,
      );
    for (const task of work.replicate) {
      const source = this.serverIndex.get(task.sourceId)!;
      const targets = task.targets.map(serverOf);
      this.o.observer?.onCopy?.(task.block.blockId, source, targets, now);
      this.startCopy(task.block.blockId, source, targets);
    }
    // Blocks left for a later run by the work limit; parked ones get another look at the next utilization slot.
    if (work.deferred > 0) this.ensureTick();
    if (this.monitor.parkedBlocks() > 0) this.wakeAtNextSlot();
  }

  private wakeAtNextSlot(): void {
    if (this.wakePending) return;
    this.wakePending = true;
    const slotMs = this.cluster.slotMs;
    const next = (Math.floor(this.engine.clock.nowMs() / slotMs) + 1) * slotMs;
    this.engine.at(next, () => {
      this.wakePending = false;
      this.monitor.wake();
      this.workWaits();
    });
  }

  // ---------------------------------------------------------------------------------------------- invariants

  /**
   * Throws INTERNAL unless: no server just reimaged holds a replica; every live replica was placed at its server's
   * current epoch (no replica outlived a reimage); the block table, server lists and counters agree; lost blocks have
   * no replica and no copy.
   */
  private check(reimaged: readonly number[]): void {
    const fail = (why: string): never => {
      throw new HarvestError("INTERNAL", `storage simulation invariant broken at ${this.engine.clock.nowMs()}: ${why}`);
    };
    for (const s of reimaged)
      if (this.serverBlocks.count[s] !== 0) fail(`server ${s} holds replicas after its reimage`);
    const R = this.R;
    const W = this.W;
    const perServer = new Int32Array(this.n);
    let under = 0;
    for (let b = 0; b < this.blockCount; b++) {
      const live = this.live[b]!;
      const inflight = this.monitor.pendingTargets(b).length;
      if ((this.flags[b]! & LOST) !== 0 && (live !== 0 || inflight !== 0)) fail(`lost block ${b} has replicas`);
      // Replicas on out-of-service servers do not count: they are what a drain copies.
      let inService = 0;
      for (let k = 0; k < live; k++) if (this.outFlag[this.rep[b * W + k]!] === 0) inService++;
      if (inService + inflight > R) fail(`block ${b} has ${inService} replicas in service and ${inflight} copies`);
      if (live > 0 && live < R) under++;
      for (let k = 0; k < live; k++) {
        const s = this.rep[b * W + k]!;
        if (reimaged.includes(s)) fail(`block ${b} has a replica on server ${s}, reimaged just now`);
        if (this.repEpoch[b * W + k] !== this.epoch[s]) fail(`block ${b}'s replica on ${s} outlived a reimage`);
        for (let j = 0; j < k; j++) if (this.rep[b * W + j] === s) fail(`block ${b} has two replicas on ${s}`);
        perServer[s]!++;
      }
    }
    if (this.trackUnder && under !== this.under) fail(`${under} blocks below ${R} replicas, counted ${this.under}`);
    for (const id of this.outOfService)
      if (this.monitor.adminState(id) === "NORMAL")
        fail(`server ${id} is out of service here, in service at the monitor`);
    for (let s = 0; s < this.n; s++) {
      if (perServer[s] !== this.stored[s] || perServer[s] !== this.serverBlocks.count[s])
        fail(
          `server ${s} counts ${this.stored[s]} replicas, lists ${this.serverBlocks.count[s]}, holds ${perServer[s]}`,
        );
    }
  }
}

/** The server of a view the policies returned (they return views from the array they were given: ServerViews). */
function serverOf(view: DatanodeView): number {
  return (view as ServerView).server;
}

function takeSlot(slots: Int32Array, used: Int32Array, S: number, server: number, copy: number): void {
  for (let k = server * S; k < (server + 1) * S; k++) {
    if (slots[k] !== -1) continue;
    slots[k] = copy;
    used[server]!++;
    return;
  }
  throw new HarvestError("INTERNAL", `server ${server} has no free stream for copy ${copy}`);
}

function freeSlot(slots: Int32Array, used: Int32Array, S: number, server: number, copy: number): void {
  for (let k = server * S; k < (server + 1) * S; k++) {
    if (slots[k] !== copy) continue;
    slots[k] = -1;
    used[server]!--;
    return;
  }
}
