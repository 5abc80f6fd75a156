/**
 * The storage experiment (seeds/004, section 4.2 and its evaluation of data placement): blocks are written over the
 * experiment period and placed by the very policy code the namenode runs (the stock rack-aware policy or the diversity
 * grid of Algorithm 2); every disk reimage (section 3.3) destroys the replicas on its server at once; the namenode
 * re-replicates from surviving replicas within a per-server bandwidth limit, with the namenode's own
 * ReplicationMonitor (fewest live replicas first) deciding every copy; a block is
 * lost when its last replica goes before a copy completes. Sampled reads are unavailable when every live replica's
 * primary tenant is busy. The policies learn only from the history window: each tenant's reimage rate and peak CPU.
 * See `runStorage` for the model's choices; the simulation is in sim.ts, the namenode's and datanodes' parts in
 * `sim/roles/storage-*.ts`.
 */
import { performance } from "node:perf_hooks";
import type { SimCluster } from "../../model.js";
import { resolveStorageOptions } from "./options.js";
import type { StorageOptions, StorageRunResult } from "./options.js";
import { StorageSim } from "./sim.js";

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
