/**
 * The namenode's datanode tracker: one stream per datanode (registration, heartbeats answered with commands, block
 * reports, received and deleted replicas, reimage and recovery reports), liveness (stale, then dead after the expiry)
 * and the persisted storage ids and reimage counts.
 */
import type { BlockKeyManager } from "../common/block-token.js";
import type { Clock } from "../common/clock.js";
import { errorMessage, HarvestError } from "../common/errors.js";
import { capacityTotals, datanodeCapacity } from "./capacity.js";
import type { CapacityTotals } from "./capacity.js";
import type { Logger } from "../common/log.js";
import { parseHostPort } from "../common/net-address.js";
import { serveWorkerStream } from "../common/worker-stream.js";
import type { BlockRecoveryReportOutput } from "../proto/generated/harvest/v1/BlockRecoveryReport.js";
import type { BlockReportOutput } from "../proto/generated/harvest/v1/BlockReport.js";
import type { BlocksReceivedOutput } from "../proto/generated/harvest/v1/BlocksReceived.js";
import type { DatanodeHeartbeatOutput } from "../proto/generated/harvest/v1/DatanodeHeartbeat.js";
import type { DatanodeInfoOutput } from "../proto/generated/harvest/v1/DatanodeInfo.js";
import type { DatanodeReportOutput } from "../proto/generated/harvest/v1/DatanodeReport.js";
import type { DatanodeToNamenodeOutput } from "../proto/generated/harvest/v1/DatanodeToNamenode.js";
import type { RegisterDatanodeOutput } from "../proto/generated/harvest/v1/RegisterDatanode.js";
import type { BlockManager, ReplicaDeletion } from "./block-manager.js";
import type { RecoveryAnswer } from "./block-recovery.js";
import type { DatanodeEntry, DatanodeStream } from "./datanode-entry.js";
import type { BlockRecord, DatanodeRecord, NamespaceStore } from "./namespace-store.js";
import type { NameNodeOptions } from "./options.js";
import type { DatanodeView } from "./policy/placement.js";
import type { ReplicationMonitor } from "./policy/replication-monitor.js";

const DATANODE_ID = /^[A-Za-z0-9_.:-]{1,128}$/;
/** The most blocks a standby keeps reports of before its log brings them. */
const MAX_POSTPONED = 1_000_000;

/** What the tracker uses of the namenode: its parts, and the safe mode and lease recovery it reports to. */
export interface DatanodeTrackerHost {
  options: NameNodeOptions;
  clock: Clock;
  log: Logger;
  blocks: BlockManager;
  monitor: ReplicationMonitor;
  store: NamespaceStore;
  /** Signs block access tokens; undefined when the namenode issues none. */
  blockKeys: BlockKeyManager | undefined;
  /** True while the daemon is running (messages are refused otherwise). */
  isRunning(): boolean;
  safeModeOn(): boolean;
  /** Leaves safe mode once enough blocks are reported. */
  checkSafeMode(): void;
  /** A datanode answered a block recovery (lease recovery moves it on at once rather than at the next tick). */
  recoveryAnswered(datanodeId: string, answer: RecoveryAnswer): void;
  /** HA: the term this namenode serves or last saw (0 without HA), sent with every answer. */
  epoch(): number;
  /** False on an HA standby: it keeps the block map from reports but commands nothing. */
  isActive(): boolean;
}

/** The datanodes the namenode has heard from since its start, and those it recorded before. */
export class DatanodeTracker {
  /** Datanodes registered since the start, by id. */
  readonly datanodes = new Map<string, DatanodeEntry>();
  /** Persisted storage ids and reimage counts, also of datanodes not registered since the start. */
  readonly records = new Map<string, DatanodeRecord>();
  private readonly options: NameNodeOptions;
  private readonly clock: Clock;
  private readonly log: Logger;
  private readonly blocks: BlockManager;
  private readonly monitor: ReplicationMonitor;
  private readonly store: NamespaceStore;
  private readonly blockKeys: BlockKeyManager | undefined;
  /**
   * HA standby: replicas reported of blocks its namespace does not hold yet (the shared log is behind the datanode),
   * by block id, replayed as the log brings the blocks ({@link replayPostponed}); HDFS's standby queues them too.
   */
  private readonly postponed = new Map<number, { datanodeId: string; block: BlockRecord }[]>();

  constructor(private readonly host: DatanodeTrackerHost) {
    ({
      options: this.options,
      clock: this.clock,
      log: this.log,
      blocks: this.blocks,
      monitor: this.monitor,
      store: this.store,
      blockKeys: this.blockKeys,
    } = host);
  }

  /** Serves one DatanodeProtocol.DatanodeChannel stream. */
  onStream(stream: DatanodeStream): void {
    let datanodeId: string | undefined;
    // Messages of one stream are handled in order (a registration writes the store before it is answered).
    serveWorkerStream(stream, {
      what: "datanode",
      log: this.log,
      context: () => ({ datanodeId }),
      isRunning: () => this.host.isRunning(),
      onMessage: async (msg: DatanodeToNamenodeOutput) => {
        if (msg.register) {
          datanodeId = await this.registerDatanode(msg.register, stream);
          return;
        }
        const entry = datanodeId ? this.datanodes.get(datanodeId) : undefined;
        if (!entry || entry.stream !== stream || entry.state !== "LIVE")
          throw new HarvestError("NODE_NOT_REGISTERED", "send RegisterDatanode first on a datanode stream");
        if (msg.heartbeat) this.onHeartbeat(entry, msg.heartbeat);
        else if (msg.blockReport) this.onBlockReport(entry, msg.blockReport);
        else if (msg.received) this.onBlocksReceived(entry, msg.received);
        else if (msg.reimage) this.onReimageReport(entry);
        else if (msg.recovery) this.onRecoveryReport(entry, msg.recovery);
        else throw new HarvestError("INVALID_ARGUMENT", "datanode message carries nothing");
      },
      onClose: () => {
        const entry = datanodeId ? this.datanodes.get(datanodeId) : undefined;
        if (entry && entry.stream === stream) entry.stream = undefined;
      },
    });
  }

  private async registerDatanode(reg: RegisterDatanodeOutput, stream: DatanodeStream): Promise<string> {
    const id = reg.datanodeId;
    if (!DATANODE_ID.test(id))
      throw new HarvestError("INVALID_ARGUMENT", `bad datanode id ${JSON.stringify(id)}`, {
        details: { field: "datanodeId" },
      });
    if (!reg.address)
      throw new HarvestError("INVALID_ARGUMENT", "datanode registration needs its address", {
        details: { field: "address" },
      });
    // Clients dial it: a registration naming something that is not host:port is refused, not passed on to them.
    if (reg.transferAddress && !parseHostPort(reg.transferAddress))
      throw new HarvestError(
        "INVALID_ARGUMENT",
        `datanode ${id}: transfer address ${JSON.stringify(reg.transferAddress.slice(0, 100))} is not host:port`,
        { details: { field: "transferAddress" } },
      );
    // WebHDFS sends callers there: only an http(s) origin, never a path, credentials or another scheme.
    const webUrl = webOrigin(reg.webUrl);
    if (reg.webUrl && webUrl === undefined)
      throw new HarvestError(
        "INVALID_ARGUMENT",
        `datanode ${id}: web URL ${JSON.stringify(reg.webUrl.slice(0, 100))} is not http(s)://host:port`,
        { details: { field: "webUrl" } },
      );
    const now = this.clock.nowMs();
    const existing = this.datanodes.get(id);
    if (existing?.stream && existing.stream !== stream) existing.stream.end();
    const record = this.records.get(id);
    const entry: DatanodeEntry = existing ?? {
      datanodeId: id,
      address: reg.address,
      transferAddress: reg.transferAddress,
      webUrl: webUrl ?? "",
      rack: "",
      storageId: record?.storageId ?? reg.storageId,
      capacityBytes: 0,
      usedBytes: 0,
      remainingBytes: 0,
      machineId: "",
      fsId: "",
      fsCapacityBytes: 0,
      fsAvailableBytes: 0,
      primaryBusy: false,
      activeTransfers: 0,
      lastHeartbeatMs: now,
      state: "LIVE",
      stream,
      replicate: [],
      deletes: [],
      reimages: record?.reimages ?? 0,
      sessionWipeCounted: false,
      reportedWipeOf: "",
      blockReported: false,
    };
    const wiped = entry.storageId !== "" && reg.storageId !== entry.storageId;
    Object.assign(entry, {
      address: reg.address,
      transferAddress: reg.transferAddress,
      webUrl: webUrl ?? "",
      rack: reg.rack || "/default-rack",
      capacityBytes: reg.capacityBytes,
      usedBytes: reg.usedBytes,
      remainingBytes: Math.max(
        0,
        Math.min(reg.capacityBytes - reg.usedBytes, reg.fsCapacityBytes > 0 ? reg.fsAvailableBytes : Infinity),
      ),
      machineId: reg.machineId.slice(0, 200),
      fsId: reg.fsId.slice(0, 200),
      fsCapacityBytes: reg.fsCapacityBytes,
      fsAvailableBytes: reg.fsAvailableBytes,
      lastHeartbeatMs: now,
      state: "LIVE",
      stream,
    });
    // Copies queued for an earlier life of the datanode may no longer apply (the monitor reschedules them once they
    // time out); queued deletions still do.
    entry.replicate = [];
    entry.blockReported = false;
    this.datanodes.set(id, entry);
    if (wiped) this.onWipe(entry, `new storage id ${reg.storageId}`, entry.reportedWipeOf !== entry.storageId);
    entry.sessionWipeCounted = wiped;
    entry.reportedWipeOf = "";
    entry.storageId = reg.storageId;
    if (record?.storageId !== entry.storageId || record.reimages !== entry.reimages) await this.persistDatanode(entry);
    stream.write({
      registered: {
        datanodeId: id,
        heartbeatIntervalMs: this.options.heartbeatIntervalMs,
        blockTokens: this.blockKeys !== undefined,
        blockKeys: this.wireBlockKeys(),
        epoch: this.host.epoch(),
        active: this.host.isActive(),
      },
    });
    this.log.info(existing ? "datanode re-registered" : "datanode registered", {
      datanodeId: id,
      address: reg.address,
      rack: entry.rack,
      capacityBytes: reg.capacityBytes,
    });
    return id;
  }

  private onHeartbeat(entry: DatanodeEntry, hb: DatanodeHeartbeatOutput): void {
    entry.lastHeartbeatMs = this.clock.nowMs();
    entry.capacityBytes = hb.capacityBytes;
    entry.usedBytes = hb.usedBytes;
    entry.remainingBytes = hb.remainingBytes;
    // A datanode that does not report its file system keeps what its registration said.
    if (hb.fsCapacityBytes > 0) {
      entry.fsCapacityBytes = hb.fsCapacityBytes;
      entry.fsAvailableBytes = hb.fsAvailableBytes;
    }
    entry.primaryBusy = hb.primaryBusy;
    entry.activeTransfers = hb.activeTransfers;
    if (!this.host.isActive()) {
      entry.replicate = [];
      entry.deletes = [];
      entry.stream?.write({ commands: { seq: hb.seq, replicate: [], delete: [], reregister: false, epoch: 0 } });
      return;
    }
    const replicate = entry.replicate;
    entry.replicate = [];
    const deletes = entry.deletes.splice(0, this.options.maxDeletesPerHeartbeat);
    entry.stream?.write({
      commands: { seq: hb.seq, replicate, delete: deletes, reregister: false, epoch: this.host.epoch() },
    });
  }

  private onBlockReport(entry: DatanodeEntry, report: BlockReportOutput): void {
    const unknown = this.blocks.fullReport(entry.datanodeId, report.blocks);
    if (this.host.isActive()) entry.deletes.push(...unknown);
    else for (const b of unknown) this.postpone(entry.datanodeId, b);
    entry.blockReported = true;
    this.monitor.datanodeReported(entry.datanodeId);
    this.log.info("block report", {
      datanodeId: entry.datanodeId,
      blocks: report.blocks.length,
      unknown: unknown.length,
    });
    this.host.checkSafeMode();
  }

  private onBlocksReceived(entry: DatanodeEntry, msg: BlocksReceivedOutput): void {
    for (const b of msg.received) {
      const unknown = this.blocks.received(entry.datanodeId, b);
      if (!unknown) continue;
      if (this.host.isActive()) entry.deletes.push(unknown);
      else this.postpone(entry.datanodeId, unknown);
    }
    for (const b of msg.deleted) this.blocks.removeReplica(entry.datanodeId, b.blockId);
    if (this.host.safeModeOn()) this.host.checkSafeMode();
  }

  private onRecoveryReport(entry: DatanodeEntry, report: BlockRecoveryReportOutput): void {
    if (!report.block) throw new HarvestError("INVALID_ARGUMENT", "a recovery report needs its block");
    const answer: RecoveryAnswer = {
      recoveryId: report.recoveryId,
      blockId: report.block.blockId,
      state: report.state,
      numBytes: report.numBytes,
      verifiedBytes: report.verifiedBytes,
      committed: report.committed,
    };
    this.host.recoveryAnswered(entry.datanodeId, answer);
  }

  private onReimageReport(entry: DatanodeEntry): void {
    const count = !entry.sessionWipeCounted;
    if (count) entry.reportedWipeOf = entry.storageId;
    entry.sessionWipeCounted = true;
    this.onWipe(entry, "reimage report", count);
    if (count)
      this.persistDatanode(entry).catch((err: unknown) =>
        this.log.error("could not persist a datanode's reimage count", { error: errorMessage(err) }),
      );
  }

  /** The datanode's disk was wiped: every replica on it is gone. */
  private onWipe(entry: DatanodeEntry, why: string, count: boolean): void {
    const lost = this.blocks.removeDatanode(entry.datanodeId);
    if (count) entry.reimages += 1;
    this.log.warn("datanode storage wiped", {
      datanodeId: entry.datanodeId,
      why,
      replicasLost: lost,
      reimages: entry.reimages,
    });
  }

  private async persistDatanode(entry: DatanodeEntry): Promise<void> {
    const record: DatanodeRecord = {
      datanodeId: entry.datanodeId,
      storageId: entry.storageId,
      reimages: entry.reimages,
    };
    await this.store.putDatanode(record);
    this.records.set(entry.datanodeId, record);
  }

  private postpone(datanodeId: string, block: BlockRecord): void {
    let list = this.postponed.get(block.blockId);
    if (!list) {
      // Bounded: a standby far behind forgets the oldest; the datanode's next full report brings them again.
      if (this.postponed.size >= MAX_POSTPONED) this.postponed.delete(this.postponed.keys().next().value!);
      this.postponed.set(block.blockId, (list = []));
    }
    list.push({ datanodeId, block });
  }

  /**
   * The shared log brought blocks: the replicas reported of them before are added now. At promotion (`final`), what
   * is still unknown is not in the namespace at all and is deleted as the active deletes unknown replicas.
   */
  replayPostponed(final = false): void {
    for (const [blockId, list] of this.postponed) {
      if (!this.blocks.get(blockId) && !final) continue;
      this.postponed.delete(blockId);
      for (const { datanodeId, block } of list) {
        if (!this.datanodes.has(datanodeId)) continue;
        const unknown = this.blocks.received(datanodeId, block);
        if (unknown && final) this.datanodes.get(datanodeId)?.deletes.push(unknown);
      }
    }
  }

  /** The block keys as the datanodes' stream carries them (none without block tokens). */
  wireBlockKeys(): { keyId: number; secret: Buffer; expiresMs: number }[] {
    return this.blockKeys?.keys().map((k) => ({ keyId: k.keyId, secret: k.secret, expiresMs: k.expiresMs })) ?? [];
  }

  /** Sends a rolled block key to every live datanode, and marks dead those silent for longer than the expiry. */
  expire(): void {
    // A rolled key reaches every live datanode at once, before any token it signs can.
    if (this.blockKeys?.maybeRoll()) {
      const blockKeys = this.wireBlockKeys();
      for (const d of this.datanodes.values())
        if (d.state === "LIVE")
          d.stream?.write({
            commands: { seq: 0, replicate: [], delete: [], reregister: false, blockKeys, epoch: this.host.epoch() },
          });
    }
    const now = this.clock.nowMs();
    for (const d of this.datanodes.values()) {
      if (d.state !== "LIVE" || now - d.lastHeartbeatMs <= this.options.datanodeExpiryMs) continue;
      d.state = "DEAD";
      d.stream?.end();
      d.stream = undefined;
      d.replicate = [];
      d.deletes = [];
      const lost = this.blocks.removeDatanode(d.datanodeId);
      const context = { datanodeId: d.datanodeId, expiryMs: this.options.datanodeExpiryMs, replicasLost: lost };
      // A decommissioned datanode going away is the point of decommissioning it: no alarm.
      if (this.monitor.adminState(d.datanodeId) === "DECOMMISSIONED")
        this.log.info("decommissioned datanode gone: no heartbeat within the expiry", context);
      else this.log.warn("datanode dead: no heartbeat within the expiry", context);
    }
  }

  /** The epoch commands go out with (0 without HA). */
  commandEpoch(): number {
    return this.host.epoch();
  }

  /** Queues replica deletions for the next heartbeat answers of their (live) datanodes. */
  queueDeletions(deletions: readonly ReplicaDeletion[]): void {
    for (const d of deletions) {
      const entry = this.datanodes.get(d.datanodeId);
      if (entry?.state === "LIVE") entry.deletes.push(d.block);
    }
  }

  /**
   * Rebuilds the diversity grid from the resource manager's tenants (reimage rate, peak CPU, environment, servers) and
   * the datanodes' free space. An unreachable resource manager keeps the last grid.

  /** The live datanodes as placement sees them (stale ones flagged). */
  liveViews(): DatanodeView[] {
    const out: DatanodeView[] = [];
    for (const d of this.datanodes.values()) {
      if (d.state !== "LIVE") continue;
      out.push({
        datanodeId: d.datanodeId,
        rack: d.rack,
        remainingBytes: d.remainingBytes,
        primaryBusy: d.primaryBusy,
        stale: this.isStale(d),
      });
    }
    return out;
  }

  /** Live, but silent for longer than the stale interval (it may be dead). */
  isStale(d: DatanodeEntry): boolean {
    return d.state === "LIVE" && this.clock.nowMs() - d.lastHeartbeatMs > this.options.staleAfterMs;
  }

  /** A datanode as clients and pipelines name it. */
  info(datanodeId: string): DatanodeInfoOutput {
    const d = this.datanodes.get(datanodeId);
    return { datanodeId, address: d?.address ?? "", rack: d?.rack ?? "", transferAddress: d?.transferAddress ?? "" };
  }

  private datanodeReport(d: DatanodeEntry): DatanodeReportOutput {
    return {
      datanodeId: d.datanodeId,
      address: d.address,
      rack: d.rack,
      state: d.state,
      capacityBytes: d.capacityBytes,
      usedBytes: d.usedBytes,
      remainingBytes: d.remainingBytes,
      nonDfsUsedBytes: datanodeCapacity(d).nonDfsUsedBytes,
      machineId: d.machineId,
      fsId: d.fsId,
      blocks: this.blocks.replicaCount(d.datanodeId),
      lastHeartbeatMs: d.lastHeartbeatMs,
      primaryBusy: d.primaryBusy,
      reimages: d.reimages,
      adminState: this.monitor.adminState(d.datanodeId),
      stale: this.isStale(d),
    };
  }

  /** The live datanodes' space in total, each file system counted once (capacity.ts). */
  liveCapacity(): CapacityTotals & { liveDatanodes: number } {
    const live = [...this.datanodes.values()].filter((d) => d.state === "LIVE");
    return { ...capacityTotals(live), liveDatanodes: live.length };
  }

  datanodeReports(): DatanodeReportOutput[] {
    return [...this.datanodes.values()]
      .sort((a, b) => (a.datanodeId < b.datanodeId ? -1 : 1))
      .map((d) => this.datanodeReport(d));
  }
}

/** `url` when it is an http(s) origin (`https://host:port`, nothing after), else undefined. */
function webOrigin(url: string): string | undefined {
  if (!url) return undefined;
  try {
    const u = new URL(url);
    const bare = u.pathname === "/" && !url.endsWith("/") && !u.search && !u.hash && !u.username && !u.password;
    if ((u.protocol !== "https:" && u.protocol !== "http:") || !bare) return undefined;
    return u.origin;
  } catch {
    return undefined;
  }
}
