/**
 * The namenode's Prometheus metrics (`harvest_nn_*`, in the daemon's registry beside the gRPC and process metrics):
 * client operations by kind (a counter and a latency histogram), replication work, and gauges of the namespace, the
 * block health, the datanodes and safe mode. The gauges are read at scrape time from {@link NameNodeSummary}, the
 * same summary `/ws/v1/nn/info` serves, so the two never disagree.
 */
import type { ProcessFacts } from "../common/web-page.js";
import { Histogram } from "prom-client";
import type { Counter, Registry } from "prom-client";
import { counter, LATENCY_BUCKETS_SECONDS, scrapedLabelledGauge, subjectGauges } from "../common/metrics.js";
import { isHarvestError } from "../common/errors.js";
import { ReplicationPriority, replicationPriority } from "./policy/replication-monitor.js";

/** Client operations the namenode counts and times (HDFS's NameNodeActivity names, camel-cased as the RPCs). */
export type NameNodeOp =
  | "mkdirs"
  | "create"
  | "addBlock"
  | "abandonBlock"
  | "complete"
  | "renewLease"
  | "getBlockLocations"
  | "listing"
  | "getFileInfo"
  | "getContentSummary"
  | "delete"
  | "rename"
  | "setPermission"
  | "setOwner"
  | "reportBadBlocks"
  | "fsck";

/** Under-replicated blocks at each priority level that can be scheduled (replication-monitor.ts, HDFS's levels). */
export interface UnderReplicatedByPriority {
  /** One good replica left (or good replicas only on datanodes leaving service). */
  highest: number;
  /** Good replicas x 3 < expected. */
  veryUnderReplicated: number;
  /** Any other shortfall. */
  underReplicated: number;
}

/**
 * Adds a block with `live` good in-service replicas of `expected` (and `outOfService` on leaving datanodes) to the
 * count of its priority level (replication-monitor.ts's `replicationPriority`); a block that is not short is skipped.
 */
export function countPriority(
  counts: UnderReplicatedByPriority,
  live: number,
  expected: number,
  outOfService: number,
): void {
  const level = replicationPriority(live, expected, outOfService);
  if (level === ReplicationPriority.Highest) counts.highest += 1;
  else if (level === ReplicationPriority.VeryUnderReplicated) counts.veryUnderReplicated += 1;
  else if (level === ReplicationPriority.UnderReplicated) counts.underReplicated += 1;
}

/** Committed blocks by health, counted as fsck counts them over the whole namespace. */
export interface BlockHealthCounts {
  /** Blocks with fewer good replicas on live in-service datanodes than expected (not missing). */
  underReplicated: number;
  underReplicatedByPriority: UnderReplicatedByPriority;
  /** Blocks without a good replica on a live datanode. */
  missing: number;
  /** Blocks with at least one corrupt replica on a live datanode. */
  corrupt: number;
  /** Blocks with a copy in flight (scheduled, not yet reported by every target). */
  pendingReplication: number;
}

/** Datanodes by liveness, with their space (live ones only). */
export interface DatanodeCounts {
  /** Live and heartbeating within the stale interval. */
  live: number;
  /** Live but silent for longer than the stale interval. */
  stale: number;
  /** Silent for longer than the expiry, DECOMMISSIONED ones left out (as fsck counts them: those are meant to go). */
  dead: number;
  decommissioning: number;
  decommissioned: number;
  /** Live datanodes whose primary tenant is busy: they refuse reads and writes for now. */
  primaryBusy: number;
  /**
   * Space of the live datanodes, each file system counted once (namenode/capacity.ts): capacity = used (DFS used, the
   * replicas) + non-DFS used + remaining.
   */
  capacityBytes: number;
  usedBytes: number;
  nonDfsUsedBytes: number;
  remainingBytes: number;
  /** Distinct file systems the live datanodes store on. */
  fileSystems: number;
}

/** The namenode at a glance: what `/ws/v1/nn/info` answers and the gauges read. */
export interface NameNodeSummary {
  /** host:port of the gRPC services. */
  address: string;
  /** Base URL of the web server. */
  httpUrl: string;
  state: string;
  safeMode: { on: boolean; blocksTotal: number; blocksReported: number; threshold: number; reason: string };
  placementPolicy: string;
  files: number;
  directories: number;
  blocks: number;
  blockHealth: BlockHealthCounts;
  datanodes: DatanodeCounts;
  /** HA: role ("active" without HA), term (0 without HA), the active's address and the last log entry applied. */
  ha: { role: string; epoch: number; active: string; appliedTxid: number };
  /** Uptime, version and heap. */
  process: ProcessFacts;
}

/** What the gauges read; called once per scrape. */
export type NameNodeSummarySource = () => NameNodeSummary;

/** The namenode's metrics, registered in `registry`. */
export class NameNodeMetrics {
  private readonly ops: Counter<"op" | "outcome">;
  private readonly opSeconds: Histogram<"op">;
  /** Copies scheduled by the replication monitor. */
  readonly replicationScheduled: Counter;
  /** Scheduled copies whose target reported the replica. */
  readonly replicationCompleted: Counter;
  /** Scheduled copies given up after the replication timeout. */
  readonly replicationTimedOut: Counter;
  /** Replica deletions sent (corrupt or surplus replicas). */
  readonly replicaDeletions: Counter<"reason">;
  /** The summary of the scrape being served (every gauge of one scrape reads the same one). */
  private current: { summary: NameNodeSummary; atMs: number } | undefined;

  constructor(
    registry: Registry,
    private readonly source: NameNodeSummarySource,
  ) {
    const registers = [registry];
    this.ops = counter(
      registry,
      "harvest_nn_ops_total",
      "Client operations on the namespace (gRPC and the REST API alike), by operation and outcome (ok or the Harvest error code)",
      ["op", "outcome"],
    );
    this.opSeconds = new Histogram({
      name: "harvest_nn_op_duration_seconds",
      help: "Time the namenode took for a client operation (for a mutation: until it was durable), by operation",
      labelNames: ["op"],
      buckets: LATENCY_BUCKETS_SECONDS,
      registers,
    });
    this.replicationScheduled = counter(
      registry,
      "harvest_nn_replication_scheduled_total",
      "Block copies the replication monitor scheduled (one source, one or more targets)",
    );
    this.replicationCompleted = counter(
      registry,
      "harvest_nn_replication_completed_total",
      "Replicas that scheduled copies delivered (a target reported the block)",
    );
    this.replicationTimedOut = counter(
      registry,
      "harvest_nn_replication_timed_out_total",
      "Scheduled copies given up because no target reported the block within the replication timeout",
    );
    this.replicaDeletions = counter(
      registry,
      "harvest_nn_replica_deletions_total",
      "Replica deletions the replication monitor sent to datanodes, by reason (corrupt, over-replicated)",
      ["reason"],
    );
    // Every gauge of one scrape reads the same summary.
    const gauge = subjectGauges(registry, () => this.summary());
    const labelled = (
      name: string,
      help: string,
      label: string,
      read: (s: NameNodeSummary) => Record<string, number>,
    ): void => {
      scrapedLabelledGauge(registry, name, help, label, () => read(this.summary()));
    };
    gauge("harvest_nn_files", "Files in the namespace", (s) => s.files);
    gauge(
      "harvest_nn_ha_applied_txid",
      "The last shared edit log entry this namenode holds (0 without HA)",
      (s) => s.ha.appliedTxid,
    );
    gauge("harvest_nn_directories", "Directories in the namespace, the root included", (s) => s.directories);
    gauge("harvest_nn_blocks", "Blocks in the namespace (the last block of an open file included)", (s) => s.blocks);
    labelled(
      "harvest_nn_under_replicated_blocks",
      "Committed blocks with fewer good replicas on live in-service datanodes than their replication, by the " +
        "replication monitor's priority (highest: one replica left; very_under_replicated: replicas x 3 < expected)",
      "priority",
      (s) => ({
        highest: s.blockHealth.underReplicatedByPriority.highest,
        very_under_replicated: s.blockHealth.underReplicatedByPriority.veryUnderReplicated,
        under_replicated: s.blockHealth.underReplicatedByPriority.underReplicated,
      }),
    );
    gauge(
      "harvest_nn_missing_blocks",
      "Committed blocks with no good replica on a live datanode",
      (s) => s.blockHealth.missing,
    );
    gauge(
      "harvest_nn_corrupt_blocks",
      "Blocks with a corrupt replica on a live datanode",
      (s) => s.blockHealth.corrupt,
    );
    gauge(
      "harvest_nn_pending_replication_blocks",
      "Blocks with a copy in flight (scheduled, not yet reported by every target)",
      (s) => s.blockHealth.pendingReplication,
    );
    labelled(
      "harvest_nn_datanodes",
      "Datanodes by liveness: live (heartbeating), stale (silent for the stale interval), dead (silent for the expiry)",
      "state",
      (s) => ({ live: s.datanodes.live, stale: s.datanodes.stale, dead: s.datanodes.dead }),
    );
    labelled(
      "harvest_nn_datanodes_out_of_service",
      "Datanodes being drained (decommissioning) or drained (decommissioned), live or dead",
      "admin_state",
      (s) => ({ decommissioning: s.datanodes.decommissioning, decommissioned: s.datanodes.decommissioned }),
    );
    gauge(
      "harvest_nn_datanodes_primary_busy",
      "Live datanodes whose primary tenant is busy (they refuse reads and writes until it calms down)",
      (s) => s.datanodes.primaryBusy,
    );
    gauge(
      "harvest_nn_capacity_bytes",
      "Storage capacity of the live datanodes (a file system several share counted once): used + non-DFS used + remaining",
      (s) => s.datanodes.capacityBytes,
    );
    gauge("harvest_nn_used_bytes", "Bytes the live datanodes use for block replicas", (s) => s.datanodes.usedBytes);
    gauge(
      "harvest_nn_non_dfs_used_bytes",
      "Bytes of the live datanodes' capacity that other files take (neither replicas nor free)",
      (s) => s.datanodes.nonDfsUsedBytes,
    );
    gauge(
      "harvest_nn_remaining_bytes",
      "Bytes the live datanodes have free for blocks",
      (s) => s.datanodes.remainingBytes,
    );
    gauge("harvest_nn_safe_mode", "1 while the namenode is in safe mode (mutations refused), else 0", (s) =>
      s.safeMode.on ? 1 : 0,
    );
  }

  /**
   * Runs one client operation, counting it and timing it (until its promise settles, for an asynchronous one).
   * The outcome is "ok" or the Harvest error code it failed with.
   */
  observe<T>(op: NameNodeOp, fn: () => T): T {
    const end = this.opSeconds.startTimer({ op });
    const settle = (outcome: string): void => {
      end();
      this.ops.inc({ op, outcome });
    };
    const failed = (err: unknown): string => (isHarvestError(err) ? err.code : "INTERNAL");
    let out: T;
    try {
      out = fn();
    } catch (err) {
      settle(failed(err));
      throw err;
    }
    if (out instanceof Promise)
      return out.then(
        (v: unknown) => {
          settle("ok");
          return v;
        },
        (err: unknown) => {
          settle(failed(err));
          throw err;
        },
      ) as T;
    settle("ok");
    return out;
  }

  /** The summary for the scrape in progress: gauges read within a few ms of each other share one. */
  private summary(): NameNodeSummary {
    const now = Date.now();
    if (!this.current || now - this.current.atMs > 50) this.current = { summary: this.source(), atMs: now };
    return this.current.summary;
  }
}
