/**
 * The storage experiment's options (what a run may set, with their defaults), its observer hooks, planned reimages
 * and its figures; `resolveStorageOptions` fills the defaults and validates every field. The model is described at
 * `runStorage` (run.ts).
 */
import { invalidArgument } from "../../../common/options.js";
import type { EngineProgress } from "../../engine/engine.js";
import { DAY_MS } from "../../model.js";
import type { SimCluster } from "../../model.js";
import type { StoragePlacement, StorageResult } from "../../results.js";

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
 * reimage as the drain's deadline (HDFS's decommissioning, namenode/policy/decommission.ts).
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
    invalidArgument("storage", "placement", `must be "stock" or "diversity" (got ${String(o.placement)})`);
  const positiveInt = (field: keyof ResolvedStorageOptions, v: number): void => {
    if (!Number.isSafeInteger(v) || v < 1) invalidArgument("storage", field, `must be an integer >= 1 (got ${v})`);
  };
  const positive = (field: keyof ResolvedStorageOptions, v: number): void => {
    if (!(Number.isFinite(v) && v > 0)) invalidArgument("storage", field, `must be a number > 0 (got ${v})`);
  };
  const nonNegative = (field: keyof ResolvedStorageOptions, v: number): void => {
    if (!(Number.isFinite(v) && v >= 0)) invalidArgument("storage", field, `must be a number >= 0 (got ${v})`);
  };
  positiveInt("replication", o.replication);
  if (o.replication > 255) invalidArgument("storage", "replication", `must be at most 255 (got ${o.replication})`);
  if (!Number.isSafeInteger(o.seed)) invalidArgument("storage", "seed", `must be an integer (got ${o.seed})`);
  positive("blockBytes", o.blockBytes);
  nonNegative("blocksPerDay", o.blocksPerDay);
  positive("reReplicationBytesPerSec", o.reReplicationBytesPerSec);
  positiveInt("replicationStreams", o.replicationStreams);
  positive("replicationIntervalMs", o.replicationIntervalMs);
  if (!(o.busyThresholdPct > 0 && o.busyThresholdPct <= 100))
    invalidArgument("storage", "busyThresholdPct", `must be in (0, 100] (got ${o.busyThresholdPct})`);
  nonNegative("accessesPerDay", o.accessesPerDay);
  positive("gridRefreshMs", o.gridRefreshMs);
  positiveInt("stockWindowServers", o.stockWindowServers);
  for (const [i, w] of (o.writes ?? []).entries()) {
    if (!(w.atMs >= cluster.historyMs && w.atMs < cluster.horizonMs))
      invalidArgument(
        "storage",
        `writes[${i}].atMs`,
        `must be in [${cluster.historyMs}, ${cluster.horizonMs}) (got ${w.atMs})`,
      );
    if (!(Number.isInteger(w.writer) && w.writer >= 0 && w.writer < servers))
      invalidArgument(
        "storage",
        `writes[${i}].writer`,
        `must be a server index in 0..${servers - 1} (got ${w.writer})`,
      );
  }
  return o;
}

/** Fills the defaults of planned reimages and validates them (INVALID_ARGUMENT naming the field). */
function resolvePlanned(cluster: SimCluster, p: PlannedStorageReimages): ResolvedPlannedStorageReimages {
  const noticeMs = p.noticeMs ?? 30 * 60_000;
  const drain = p.drain ?? "decommission";
  if (!(Number.isFinite(noticeMs) && noticeMs >= 0))
    invalidArgument("storage", "planned.noticeMs", `must be >= 0 (got ${noticeMs})`);
  if (drain !== "none" && drain !== "decommission")
    invalidArgument("storage", "planned.drain", `must be "none" or "decommission" (got ${String(drain)})`);
  const servers = cluster.servers.length;
  p.events.forEach((e, i) => {
    if (!(Number.isInteger(e.server) && e.server >= 0 && e.server < servers))
      invalidArgument(
        "storage",
        `planned.events[${i}].server`,
        `must be a server index in 0..${servers - 1} (got ${e.server})`,
      );
    if (!(e.atMs >= cluster.historyMs && e.atMs < cluster.horizonMs))
      invalidArgument(
        "storage",
        `planned.events[${i}].atMs`,
        `must be in [${cluster.historyMs}, ${cluster.horizonMs}) (got ${e.atMs})`,
      );
  });
  // A stable sort: reimages of one instant keep the caller's order (the cluster's own give the same run as without).
  const events = p.events.map((e) => ({ server: e.server, atMs: e.atMs })).sort((a, b) => a.atMs - b.atMs);
  return { events, noticeMs, drain };
}
