/**
 * The health of the namenode's blocks and datanodes as fsck, the web pages and the metrics report it: pure functions
 * over the namespace, the block map, the replication monitor and the datanode table.
 */
import type { RecoveredFileOutput } from "../proto/generated/harvest/v1/RecoveredFile.js";
import type { BlockManager } from "./block-manager.js";
import type { Namespace } from "./namespace.js";
import type { Caller } from "./policy/permissions.js";
import type { DatanodeView } from "./policy/placement.js";
import { countReplicas } from "./policy/replication-monitor.js";
import { capacityTotals } from "./capacity.js";
import { countPriority } from "./nn-metrics.js";
import type { BlockHealthCounts, DatanodeCounts } from "./nn-metrics.js";
import type { ReplicationMonitor } from "./policy/replication-monitor.js";
import type { AdminState } from "./policy/decommission.js";
import type { FsckBlockOutput } from "../proto/generated/harvest/v1/FsckBlock.js";
import type { FsckReportOutput } from "../proto/generated/harvest/v1/FsckReport.js";
import type { DatanodeEntry } from "./datanode-entry.js";

/** What a health report reads of the namenode. */
export interface HealthSource {
  namespace: Namespace;
  blocks: BlockManager;
  monitor: ReplicationMonitor;
  datanodes: ReadonlyMap<string, DatanodeEntry>;
  /** The live datanodes as placement sees them (stale ones flagged). */
  liveViews: () => DatanodeView[];
  /** Live, but silent for longer than the stale interval. */
  isStale: (d: DatanodeEntry) => boolean;
  safeModeOn: boolean;
}

/**
 * The fsck report of the files under `path` (see ClientProtocol's fsck, client-protocol.ts); `caller` must have
 * READ_EXECUTE on every directory walked (Namespace.walk), none when permissions are off.
 */
export function fsckReport(path: string, src: HealthSource, caller: Caller | undefined): FsckReportOutput {
  const { files, directories } = src.namespace.walk(path, caller);
  const views = src.liveViews();
  const liveIds = new Set(views.map((d) => d.datanodeId));
  const staleIds = new Set(views.filter((d) => d.stale).map((d) => d.datanodeId));
  const suspect: FsckBlockOutput[] = [];
  let suspectReplicas = 0;
  const recovered: RecoveredFileOutput[] = [];
  const adminState = (id: string): AdminState => src.monitor.adminState(id);
  const under: FsckBlockOutput[] = [];
  const missing: FsckBlockOutput[] = [];
  const corrupt: FsckBlockOutput[] = [];
  let blocks = 0;
  let totalBytes = 0;
  let decommissioningReplicas = 0;
  let decommissionedReplicas = 0;
  for (const f of files) {
    totalBytes += f.length;
    if (f.inode.recovered)
      recovered.push({
        path: f.path,
        recoveredMs: f.inode.recovered.atMs,
        reason: f.inode.recovered.reason,
        length: f.length,
      });
    for (const lb of f.blocks) {
      blocks += 1;
      const info = src.blocks.get(lb.block.blockId);
      // A block being written has no final length and no settled replicas yet: fsck leaves open blocks alone.
      if (!info || !lb.committed) continue;
      const c = countReplicas(info, liveIds, adminState);
      decommissioningReplicas += c.decommissioning;
      decommissionedReplicas += c.decommissioned;
      // Holders of corrupt replicas, or of good ones in service (or out of service).
      const holders = (wantCorrupt: boolean, inService = true): string[] =>
        [...info.replicas.values()]
          .filter(
            (r) =>
              liveIds.has(r.datanodeId) &&
              r.corrupt === wantCorrupt &&
              (wantCorrupt || (adminState(r.datanodeId) === "NORMAL") === inService),
          )
          .map((r) => r.datanodeId)
          .sort();
      const entry = (datanodes: string[]): FsckBlockOutput => ({
        path: f.path,
        block: lb.block,
        liveReplicas: c.live,
        expectedReplicas: info.expectedReplication,
        datanodes,
        decommissioningReplicas: c.decommissioning,
        decommissionedReplicas: c.decommissioned,
        outOfServiceDatanodes: holders(false, false),
      });
      if (c.health === "missing") missing.push(entry(holders(false)));
      else if (c.health === "under-replicated") under.push(entry(holders(false)));
      if (c.corrupt > 0) corrupt.push(entry(holders(true)));
      // Replicas on datanodes that stopped heartbeating still count until they are declared dead: suspect.
      const onStale = [...info.replicas.values()]
        .filter((r) => !r.corrupt && staleIds.has(r.datanodeId))
        .map((r) => r.datanodeId)
        .sort();
      if (onStale.length > 0) {
        suspectReplicas += onStale.length;
        suspect.push(entry(onStale));
      }
    }
  }
  let live = 0;
  let dead = 0;
  for (const d of src.datanodes.values()) {
    if (d.state === "LIVE") live += 1;
    else if (adminState(d.datanodeId) !== "DECOMMISSIONED") dead += 1;
  }
  const out = { decommissioning: 0, decommissioned: 0 };
  for (const id of src.monitor.outOfService())
    out[adminState(id) === "DECOMMISSIONED" ? "decommissioned" : "decommissioning"] += 1;
  return {
    files: files.length,
    directories,
    blocks,
    totalBytes,
    underReplicated: under,
    missing,
    corrupt,
    liveDatanodes: live,
    deadDatanodes: dead,
    healthy: missing.length === 0,
    safeMode: src.safeModeOn,
    decommissioningReplicas,
    decommissionedReplicas,
    decommissioningDatanodes: out.decommissioning,
    decommissionedDatanodes: out.decommissioned,
    staleDatanodes: staleIds.size,
    suspect,
    suspectReplicas,
    recovered,
  };
}

/** Committed blocks by health over the whole block map, judged as fsck judges them (one pass, no namespace walk). */
export function blockHealth(src: HealthSource): BlockHealthCounts {
  const liveIds = new Set(src.liveViews().map((d) => d.datanodeId));
  const adminState = (id: string): AdminState => src.monitor.adminState(id);
  const out: BlockHealthCounts = {
    underReplicated: 0,
    underReplicatedByPriority: { highest: 0, veryUnderReplicated: 0, underReplicated: 0 },
    missing: 0,
    corrupt: 0,
    pendingReplication: src.monitor.pendingBlocks(),
  };
  for (const info of src.blocks.all()) {
    if (!info.committed) continue;
    const c = countReplicas(info, liveIds, adminState);
    if (c.health === "missing") out.missing += 1;
    else if (c.health === "under-replicated") {
      out.underReplicated += 1;
      countPriority(
        out.underReplicatedByPriority,
        c.live,
        info.expectedReplication,
        c.decommissioning + c.decommissioned,
      );
    }
    if (c.corrupt > 0) out.corrupt += 1;
  }
  return out;
}

/** Datanodes by liveness and admin state, and the live ones' space. Dead counts as fsck does (not DECOMMISSIONED). */
export function datanodeCounts(src: HealthSource): DatanodeCounts {
  const out: DatanodeCounts = {
    live: 0,
    stale: 0,
    dead: 0,
    decommissioning: 0,
    decommissioned: 0,
    primaryBusy: 0,
    capacityBytes: 0,
    usedBytes: 0,
    nonDfsUsedBytes: 0,
    remainingBytes: 0,
    fileSystems: 0,
  };
  const live: DatanodeEntry[] = [];
  for (const d of src.datanodes.values()) {
    if (d.state !== "LIVE") {
      if (src.monitor.adminState(d.datanodeId) !== "DECOMMISSIONED") out.dead += 1;
      continue;
    }
    if (src.isStale(d)) out.stale += 1;
    else out.live += 1;
    if (d.primaryBusy) out.primaryBusy += 1;
    live.push(d);
  }
  // A file system several datanodes share (a local cluster on one disk) counts once.
  const space = capacityTotals(live);
  out.capacityBytes = space.capacityBytes;
  out.usedBytes = space.dfsUsedBytes;
  out.nonDfsUsedBytes = space.nonDfsUsedBytes;
  out.remainingBytes = space.remainingBytes;
  out.fileSystems = space.fileSystems;
  for (const id of src.monitor.outOfService())
    out[src.monitor.adminState(id) === "DECOMMISSIONED" ? "decommissioned" : "decommissioning"] += 1;
  return out;
}
