/**
 * The namenode's replica placement as the storage experiment plays it: the simulated servers as the placement
 * policies' datanode views, the run's policy (the namenode's own stock rack-aware policy or diversity grid) asked for
 * targets by the writes and by the namenode's own ReplicationMonitor (the stock policy on sampled windows of large
 * clusters), the tenants the policies learn from the history, and the options the simulation gives the monitor.
 */
import { DiversityPlacementPolicy, StockPlacementPolicy } from "../../namenode/index.js";
import type {
  DatanodeView,
  LiveDatanodes,
  PlacementPolicy,
  PlacementRequest,
  PlacementTenant,
  ReplicationMonitorOptions,
} from "../../namenode/index.js";
import { DEFAULT_CLASSIFIER_OPTIONS, percentileSorted } from "../../resourcemanager/index.js";
import type { Rng } from "../../common/rng.js";
import { MONTH_MS } from "../model.js";
import type { SimCluster } from "../model.js";
import type { ResolvedStorageOptions } from "../experiments/storage/options.js";

/** The stock policy sees every datanode on clusters of at most this many times `stockWindowServers` servers. */
const STOCK_WINDOW_MIN_CLUSTER_FACTOR = 8;
/** Servers of the second replica's rack sampled first for the stock policy's third replica. */
const BESIDE_SAMPLE = 8;

/** Blocks the monitor looks at per run: this many per datanode (HDFS's work multiplier), at least the minimum. */
const WORK_PER_DATANODE = 2;
const WORK_MIN_BLOCKS = 64;

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

/** A server as the placement policies see it: always live, free space and primary load read from the simulation. */
class ServerView implements DatanodeView {
  constructor(
    readonly datanodeId: string,
    readonly rack: string,
    private readonly sim: StorageServers,
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

/** The server of a view the policies returned (they return views from the array they were given: ServerViews). */
export function serverOf(view: DatanodeView): number {
  return (view as ServerView).server;
}

/** What the views read of the simulated servers (the simulation implements it). */
export interface StorageServers {
  /** Free space on server `server`, bytes (stored and incoming replicas taken). */
  remainingBytes(server: number): number;
  /** Server `server`'s primary is busy now (the datanode denies access). */
  busy(server: number): boolean;
}

/** The namenode's placement over the simulated servers: the views, the run's policy, and the stock policy's windows. */
export class StorageNamenode {
  /** One view per server, all live, in one array reused for the whole run (the diversity policy's O(1) lookups). */
  readonly views: ServerView[];
  /** The servers as the monitor's live datanodes (all of them, always). */
  readonly liveServers: LiveDatanodes;
  /** Server index by datanode id. */
  readonly serverIndex = new Map<string, number>();
  /** Degraded placements the diversity policy reported (too few grid cells or environments left). */
  degrades = 0;
  private readonly n: number;
  private readonly ids: string[];
  private readonly policy: PlacementPolicy;
  private readonly diversity: DiversityPlacementPolicy | undefined;
  private readonly learnt: PlacementTenant[];
  private readonly rackOf: Int32Array;
  private readonly rackServers: Int32Array[];
  /** Scratch marks for stock windows. */
  private readonly windowMark: Int32Array;
  private windowStamp = 0;

  constructor(
    cluster: SimCluster,
    private readonly o: Pick<ResolvedStorageOptions, "placement" | "stockWindowServers" | "blockBytes">,
    servers: StorageServers,
  ) {
    const n = cluster.servers.length;
    this.n = n;
    this.ids = cluster.servers.map((s) => s.id);
    this.ids.forEach((id, i) => this.serverIndex.set(id, i));
    this.views = cluster.servers.map((s, i) => new ServerView(s.id, s.rack, servers, i));
    this.liveServers = { all: this.views, get: (id) => this.views[this.serverIndex.get(id) ?? -1] };
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
    this.windowMark = new Int32Array(n);
    this.learnt = learnPlacementTenants(cluster);
    if (o.placement === "diversity") {
      this.diversity = new DiversityPlacementPolicy({ onDegrade: () => this.degrades++ });
      this.policy = this.diversity;
    } else {
      this.policy = new StockPlacementPolicy();
    }
  }

  /** The run places by the diversity grid (which learns the tenants and free space, see `refreshGrid`). */
  get hasGrid(): boolean {
    return this.diversity !== undefined;
  }

  /** The diversity policy learns the tenants and each server's free space anew. */
  refreshGrid(free: ReadonlyMap<string, number>): void {
    this.diversity!.setTenants(this.learnt, free);
  }

  /** The policy the monitor asks for re-replication targets (the run's, on windows for the stock one). */
  monitorPlacement(): PlacementPolicy {
    return { name: this.policy.name, chooseTargets: (req) => this.chooseFor(req) };
  }

  /** The monitor's placement questions, answered by the run's policy (on windows for the stock one, see `choose`). */
  private chooseFor(req: PlacementRequest): DatanodeView[] {
    const placed = (req.existing ?? []).map((id) => this.serverIndex.get(id)!);
    const writer = req.writerDatanodeId === undefined ? -1 : this.serverIndex.get(req.writerDatanodeId)!;
    return this.choose(req.replication, writer, placed, req.excluded, req.rng).map((s) => this.views[s]!);
  }

  /**
   * Up to `count` targets from the policy, as server indices. `placed` are the block's live replicas (re-replication:
   * `existing`), `excluded` what the namenode excludes, `rng` the caller's random source (the writes' own, or the
   * monitor's).
   */
  choose(count: number, writer: number, placed: readonly number[], excluded: ReadonlySet<string>, rng: Rng): number[] {
    if (this.diversity || this.n <= STOCK_WINDOW_MIN_CLUSTER_FACTOR * this.o.stockWindowServers)
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
}
