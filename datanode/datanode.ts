/**
 * The datanode daemon, one per server: keeps replicas on the server's spare disk, serves the DataTransfer service
 * (pipeline writes, reads, reimage), refuses both while the server's primary tenant is busy, and talks to the namenode
 * over one long-lived DatanodeChannel stream (register, full block report, heartbeats, incremental reports; commands
 * come back in the answers), reconnecting with backoff when the namenode goes away. With HA it keeps one such stream
 * to every namenode and obeys only the active one of the newest term (namenode-links.ts).
 */
import { ensureDirMode } from "../common/atomic-file.js";
import { verifyBlockToken, verifyBlockTokenSignature } from "../common/block-token.js";
import type { BlockAccess } from "../common/block-token.js";
import { ANY_CERTIFICATE, Gate } from "../common/auth.js";
import { INSECURE_WARNING } from "../common/options.js";
import { cgroupCpuMs } from "../common/proc-stats.js";
import type * as grpc from "@grpc/grpc-js";
import { availableParallelism } from "node:os";
import { systemClock } from "../common/clock.js";
import type { Clock } from "../common/clock.js";
import { detailsOf, errorMessage, HarvestError } from "../common/errors.js";
import { formatAddress } from "../common/net-address.js";
import { bindServer, call, createServer, loadHarvestProto, makeClient, shutdownServer } from "../common/grpc.js";
import { Logger } from "../common/log.js";
import { grpcServerMetrics } from "../common/metrics.js";
import type { DaemonState } from "../common/lifecycle.js";
import { ServingDaemon, type ServingOptions } from "../common/serving-daemon.js";
import { createPrimaryMonitor } from "../common/primary-monitor.js";
import type { PrimaryMonitor, PrimarySample } from "../common/primary-monitor.js";
import { sendBlock } from "./block-sender.js";
import { BlockStore } from "./block-store.js";
import { checkBlockKey } from "./replica-files.js";
import type { StoredReplica } from "./replica-files.js";
import { DataTransferService } from "./data-transfer.js";
import { BlockServer } from "./block-server.js";
import { zeroCopyAvailable } from "./zero-copy.js";
import type { Identity } from "../common/tls.js";
import { DataNodeMetrics } from "./dn-metrics.js";
import { resolveDataNodeOptions } from "./options.js";
import type { DataNodeOptions, DataNodeOptionsInput } from "./options.js";
import type { Block } from "../proto/generated/harvest/v1/Block.js";
import type { ClientNamenodeClient } from "../proto/generated/harvest/v1/ClientNamenode.js";
import type { DatanodeCommandsOutput } from "../proto/generated/harvest/v1/DatanodeCommands.js";
import type { DatanodeToNamenode } from "../proto/generated/harvest/v1/DatanodeToNamenode.js";
import type { DatanodeHeartbeat } from "../proto/generated/harvest/v1/DatanodeHeartbeat.js";
import type { RegisterDatanode } from "../proto/generated/harvest/v1/RegisterDatanode.js";
import { NamenodeLinks } from "./namenode-links.js";
import { fileSystemId, machineId } from "./machine-id.js";
import type { ReimageResponse } from "../proto/generated/harvest/v1/ReimageResponse.js";
import type { ReplicateCommandOutput } from "../proto/generated/harvest/v1/ReplicateCommand.js";
import type { RecoverBlockCommandOutput } from "../proto/generated/harvest/v1/RecoverBlockCommand.js";
import type { CommitRecoveryCommandOutput } from "../proto/generated/harvest/v1/CommitRecoveryCommand.js";
import { registerDatanodeWebHdfs } from "./webhdfs-server.js";

/** Things a datanode can be given instead of building them from options (tests, benchmarks). */
export interface DataNodeDeps {
  clock?: Clock;
  logger?: Logger;
  /** A primary-tenant monitor to use instead of the one `options.primary` names. */
  monitor?: PrimaryMonitor;
}

/** The datanode daemon. */
export class DataNode extends ServingDaemon {
  readonly options: DataNodeOptions;
  private readonly clock: Clock;
  protected readonly log: Logger;
  /** Prometheus metrics (dn-metrics.ts); the gRPC server counts its calls there too. */
  private readonly metrics: DataNodeMetrics;
  private readonly server: grpc.Server;
  private storeValue: BlockStore | undefined;
  private transfer: DataTransferService | undefined;
  private blockServer: BlockServer | undefined;
  /** The bound block transfer port (0: none). */
  private transferBoundPort = 0;
  private monitor: PrimaryMonitor | undefined;
  private lastSample: PrimarySample = { cpuMilli: 0, utilization: 0 };
  private busy = false;
  private nnClient: ClientNamenodeClient | undefined;
  /** The registered streams to the namenodes (one, or every one with HA): reports out, commands back, fencing. */
  private readonly links: NamenodeLinks;
  private monitorTimer: NodeJS.Timeout | undefined;
  private readonly badBlocks = new Map<number, { replica: StoredReplica; reason: string }>();
  private reportingBad = false;
  private readonly replications: ReplicateCommandOutput[] = [];
  private replicating = 0;
  private readonly stopping = new AbortController();

  protected get serving(): ServingOptions {
    return this.options;
  }

  constructor(
    options: DataNodeOptionsInput,
    private readonly deps: DataNodeDeps = {},
  ) {
    super("datanode");
    this.options = resolveDataNodeOptions(options);
    this.clock = deps.clock ?? systemClock;
    this.log = deps.logger ?? new Logger(`dn:${this.options.datanodeId}`);
    this.metrics = new DataNodeMetrics(this.options.datanodeId, {
      store: () => this.storeValue,
      activeTransfers: () => this.activeTransfers,
      primaryBusy: () => this.busy,
    });
    this.server = createServer([grpcServerMetrics(this.metrics.registry)]);
    this.links = new NamenodeLinks(this.options.namenodeAddress, {
      log: this.log,
      datanodeId: this.options.datanodeId,
      dataDir: this.options.dataDir,
      timing: this.options,
      isRunning: () => this.lifecycle.running,
      dial: (address) => makeClient(loadHarvestProto().DatanodeProtocol, address, this.options.tls),
      registration: () => this.registration(),
      blockReport: () => this.blockReportBlocks(),
      heartbeat: () => this.heartbeatBody(),
      afterHeartbeat: () => this.afterHeartbeat(),
      execute: (cmds, reply) => this.onCommands(cmds, reply),
      staleCommands: () => this.metrics.staleEpochCommands(),
    });
  }

  /** host:port of the block transfer port ("" when it serves blocks over gRPC only). */
  get transferAddress(): string {
    return this.transferBoundPort > 0 ? formatAddress(this.options.advertiseHost, this.transferBoundPort) : "";
  }

  /**
   * Who may move blocks on the transfer port, as on the gRPC port: a certificate under the cluster CA, or a block
   * token the namenode signed (a job's tasks hold no certificate). Each operation then checks its token's block and
   * mode. A plaintext cluster admits everyone (it says so at start).
   */
  private admitTransfer(identity: Identity | undefined, token: string): void {
    if (!this.options.tls || identity || this.blockTokenUser(token) !== undefined) return;
    throw new HarvestError(
      "UNAUTHENTICATED",
      "block transfer refused: the peer presented no certificate signed by the cluster CA and no valid block token",
    );
  }

  /** Who a block token was issued to, when the namenode signed it and it has not expired (its mode is checked later). */
  private blockTokenUser(token: string): string | undefined {
    const keys = this.links.blockKeys();
    if (keys === "off") return undefined;
    try {
      return verifyBlockTokenSignature(token, keys, this.clock.nowMs()).user;
    } catch {
      return undefined;
    }
  }

  /** The replicas (valid once started). */
  get store(): BlockStore {
    if (!this.storeValue) throw new HarvestError("INTERNAL", "datanode not started");
    return this.storeValue;
  }

  /** The storage id this datanode registers with (changes on a reimage). */
  get storageId(): string {
    return this.store.storageId;
  }

  /** Whether a namenode (with HA: at least one) has acknowledged this datanode's registration on its current stream. */
  get isRegistered(): boolean {
    return this.links.registered;
  }

  /** The latest primary-tenant sample. */
  get primarySample(): PrimarySample {
    return this.lastSample;
  }

  /** Whether the primary tenant is at or above the busy threshold (reads and writes are refused). */
  isPrimaryBusy(): boolean {
    return this.busy;
  }

  /**
   * Whether reads on the transfer port send replica data from its files (zero-copy.ts): "on"; "off" (configured so,
   * or no transfer port); "TLS" (a secure cluster encrypts in the process); "unavailable" (the native routine was not
   * built, or HARVEST_ZERO_COPY_READS=0).
   */
  get zeroCopyReadsState(): "on" | "off" | "TLS" | "unavailable" {
    if (!this.options.zeroCopyReads || this.options.transferPort < 0) return "off";
    if (this.options.tls) return "TLS";
    return zeroCopyAvailable() ? "on" : "unavailable";
  }

  /** Transfers in progress: pipeline writes, reads and replications. */
  get activeTransfers(): number {
    return (this.transfer?.activeTransfers ?? 0) + this.replicating;
  }

  /** Registers with the namenodes (their streams reconnect from here on); its storage, for the "serving" log line. */
  protected onServing(): Record<string, unknown> {
    this.links.connect();
    return {
      storageId: this.store.storageId,
      replicas: this.store.scan.replicas,
      capacityBytes: this.store.capacityBytes,
      directWrites: this.store.directWritesState,
      zeroCopyReads: this.zeroCopyReadsState,
      primary: this.monitor?.source,
    };
  }

  /** Opens the storage, starts the monitor and the server, connects to the namenode. */
  protected async startSteps(): Promise<void> {
    // Blocks are served only through the data-transfer port, with a token: no local account reads them directly
    // (unless the operator lets the datanode's group read them, for short-circuit reads).
    const mode = parseInt(this.options.dataDirMode, 8);
    if (!ensureDirMode(this.options.dataDir, mode))
      this.log.warn("cannot set the data directory's mode", {
        dir: this.options.dataDir,
        mode: this.options.dataDirMode,
      });
    const store = await BlockStore.open({
      dataDir: this.options.dataDir,
      capacityBytes: this.options.capacityBytes,
      directWrites: this.options.directWrites,
      deleteBytesPerSecond: this.options.deleteBytesPerSecond,
      deleteChunkBytes: this.options.deleteChunkBytes,
      // Freeing is disk work on the primary's disk: none of it while the primary is busy, as for reads and writes.
      deletesPaused: () => this.busy,
      listener: {
        finalized: (r) => this.links.queueReceived(r, "received"),
        deleted: (r) => this.links.queueReceived(r, "deleted"),
        corrupt: (r, reason) => this.onCorrupt(r, reason),
        directWritesOff: (reason) => this.log.warn("writing replicas through the page cache", { reason }),
        trashFailed: (file, reason) => this.log.warn("could not free a deleted replica", { file, reason }),
      },
    });
    this.storeValue = store;
    if (store.trashBytes > 0)
      this.log.info("freeing deleted replicas left in trash/ by the last run", { bytes: store.trashBytes });
    if (store.scan.rbwRemoved > 0 || store.scan.orphansRemoved > 0)
      this.log.info("removed unfinished replicas", { rbw: store.scan.rbwRemoved, orphans: store.scan.orphansRemoved });
    // Their writers may have been acknowledged: kept until the namenode's lease recovery settles them (or the TTL).
    if (store.scan.rbwKept > 0)
      this.log.info("kept unfinished replicas for lease recovery", {
        replicas: store.keptReplicas().map((r) => `${r.blockId}@${r.genStamp}:${r.numBytes}`),
        ttlMs: this.options.keptReplicaTtlMs,
      });
    this.monitor =
      this.deps.monitor ??
      createPrimaryMonitor(this.options.primary, {
        capacityMilli: availableParallelism() * 1000,
        clock: this.clock,
        log: this.log,
        speed: this.options.primarySpeed,
        offsetMs: this.options.primaryOffsetMs,
        // Harvest's own containers on this server (its node manager's cgroup) are not the primary's load.
        containerCpuMs: () => cgroupCpuMs(this.options.secondaryCgroup),
      });
    await this.monitor.start();
    this.sampleMonitor();
    this.monitorTimer = setInterval(() => this.sampleMonitor(), this.options.monitorTickMs);
    const transfer = new DataTransferService({
      datanodeId: this.options.datanodeId,
      store,
      log: this.log,
      isPrimaryBusy: () => this.busy,
      reimage: () => this.reimage(),
      checkBlockToken: (token, blockId, access) => this.checkBlockToken(token, blockId, access),
      ackTimeoutMs: this.options.pipelineAckTimeoutMs,
      pipelineVerify: this.options.pipelineVerify,
      metrics: this.metrics,
      ...(this.options.tls ? { clientSecurity: this.options.tls } : {}),
    });
    this.transfer = transfer;
    // Clients, daemons and tasks (by a block token the namenode signed) move blocks; each block still needs its own
    // token for its mode. Only an admin reimages.
    const proto = loadHarvestProto();
    const gate = new Gate(this.options.tls, {
      "block-token": (token) => {
        const user = this.blockTokenUser(token);
        return user === undefined ? undefined : { name: user, role: "task", via: "token" };
      },
    }).allow(proto.DataTransfer.service, {
      WriteBlock: [...ANY_CERTIFICATE, "block-token"],
      ReadBlock: [...ANY_CERTIFICATE, "block-token"],
      Reimage: ["admin"],
    });
    if (!gate.secure) this.log.warn(INSECURE_WARNING);
    this.server.addService(proto.DataTransfer.service, transfer.handlers());
    this.boundPort = await bindServer(this.server, this.options.host, this.options.port, gate.credentials());
    if (this.options.transferPort >= 0) {
      this.blockServer = new BlockServer(
        {
          transfer,
          log: this.log,
          admit: (identity, token) => this.admitTransfer(identity, token),
          shortCircuitReads: this.options.shortCircuitReads,
          zeroCopyReads: this.options.zeroCopyReads,
        },
        this.options.tls,
      );
      this.transferBoundPort = await this.blockServer.listen(this.options.host, this.options.transferPort);
    }
    // `/metrics`, and WebHDFS's OPEN and CREATE where the namenode redirects them (uploads stream for as long as
    // they take).
    await this.startWeb({
      title: "Harvest datanode",
      metrics: this.metrics.registry,
      log: this.log,
      routes: (web) =>
        registerDatanodeWebHdfs(web, {
          datanodeId: this.options.datanodeId,
          namenodeAddress: this.options.namenodeAddress,
          tls: this.options.tls,
          log: this.log,
          blockKeys: () => this.links.blockKeys(),
          nowMs: () => this.clock.nowMs(),
        }),
      requestTimeoutMs: 0,
      undo: () => shutdownServer(this.server, 0),
    });
  }

  /** Fails the writes in progress, closes the stream and the server; idempotent. */
  protected async stopSteps(was: DaemonState): Promise<void> {
    const wasStarted = was !== "new";
    if (this.monitorTimer) clearInterval(this.monitorTimer);
    this.stopping.abort();
    await this.transfer?.abortAll("UNAVAILABLE", `datanode ${this.options.datanodeId} is stopping`, true);
    await this.blockServer?.close();
    this.links.close();
    this.nnClient?.close();
    if (wasStarted) await shutdownServer(this.server, 1_000);
    await this.web?.stop();
    this.transfer?.close();
    await this.monitor?.stop();
    await this.storeValue?.close();
  }

  /** Wipes the storage as a disk reimage would and tells the namenode: re-register, ReimageReport, empty report. */
  async reimage(): Promise<ReimageResponse> {
    if (!this.lifecycle.running) throw new HarvestError("UNAVAILABLE", "datanode is not running");
    await this.transfer?.abortAll("UNAVAILABLE", `datanode ${this.options.datanodeId} is being reimaged`);
    const { storageId, wiped } = await this.store.wipe();
    this.badBlocks.clear();
    this.log.warn("storage wiped (reimage)", { storageId, blocksWiped: wiped });
    // The registered answers trigger the ReimageReport and the (now empty) full block report.
    this.links.reregisterAfterReimage(this.clock.nowMs());
    return { storageId, blocksWiped: wiped };
  }

  // ---------------------------------------------------------------------------------------------- primary tenant

  private sampleMonitor(): void {
    if (!this.monitor) return;
    try {
      this.lastSample = this.monitor.sample();
    } catch (err) {
      this.log.warn("primary monitor failed; keeping the last sample", { error: errorMessage(err) });
      return;
    }
    const busy = this.lastSample.utilization >= this.options.busyThreshold;
    if (busy !== this.busy) {
      this.busy = busy;
      this.log.info(busy ? "primary tenant busy: refusing reads and writes" : "primary tenant calm: serving again", {
        utilization: Number(this.lastSample.utilization.toFixed(3)),
      });
      this.links.heartbeatSoon();
    }
  }

  // ---------------------------------------------------------------------------------------------- namenode

  private registration(): RegisterDatanode {
    return {
      datanodeId: this.options.datanodeId,
      address: this.address,
      transferAddress: this.transferAddress,
      webUrl: this.httpUrl ?? "",
      rack: this.options.rack,
      capacityBytes: this.store.capacityBytes,
      usedBytes: this.store.usedBytes(),
      storageId: this.store.storageId,
      machineId: machineId(),
      fsId: fileSystemId(this.store.fileSystem.device),
      fsCapacityBytes: this.store.fileSystem.sizeBytes,
      fsAvailableBytes: this.store.fileSystem.availableBytes,
    };
  }

  /**
   * Block access tokens, when a namenode requires them (namenode-links.ts): signed by one of its keys, for this block
   * and mode. A WRITE token must name the newest namenode term this datanode has seen (HA fencing): an old active's
   * token gets no write acknowledged.
   */
  private checkBlockToken(token: string, blockId: number, access: BlockAccess): void {
    const keys = this.links.blockKeys();
    if (keys === "off") return;
    const claims = verifyBlockToken(token, keys, blockId, access, this.clock.nowMs());
    if (access === "WRITE") this.links.fence.check(claims.epoch ?? 0, "the block token");
  }

  /** Commands the fence let through; `reply` answers the namenode that sent them (lease recovery). */
  private onCommands(cmds: DatanodeCommandsOutput, reply: (msg: DatanodeToNamenode) => void): void {
    for (const b of cmds.delete) {
      let key;
      try {
        key = checkBlockKey(b);
      } catch (err) {
        this.log.warn("delete command with a bad block; ignored", { error: errorMessage(err) });
        continue;
      }
      this.store.delete(key).then(
        (deleted) => {
          if (!deleted) this.log.debug("delete command for a replica not held", { blockId: key.blockId });
        },
        (err: unknown) =>
          this.log.warn("could not delete a replica", { blockId: key.blockId, error: errorMessage(err) }),
      );
    }
    for (const r of cmds.replicate) this.replications.push(r);
    this.pumpReplications();
    for (const r of cmds.recover)
      this.recoverBlock(r, reply).catch((err: unknown) =>
        this.log.warn("block recovery failed", { blockId: r.block?.blockId, error: errorMessage(err) }),
      );
    for (const c of cmds.commitRecovery)
      this.commitRecovery(c, reply).catch((err: unknown) =>
        this.log.warn("could not finalize a recovered replica", {
          blockId: c.block?.blockId,
          error: errorMessage(err),
        }),
      );
  }

  /** Lease recovery, first step: stop any write of the block, keep its replica, tell the namenode what is there. */
  private async recoverBlock(cmd: RecoverBlockCommandOutput, reply: (msg: DatanodeToNamenode) => void): Promise<void> {
    const key = checkBlockKey(cmd.block);
    await this.transfer?.stopWritesOf(key.blockId);
    const st = await this.store.recoveryState(key);
    this.log.info("block recovery: replica state", { blockId: key.blockId, ...st });
    reply({
      recovery: {
        block: { ...key, numBytes: st.numBytes },
        recoveryId: cmd.recoveryId,
        state: st.state,
        numBytes: st.numBytes,
        verifiedBytes: st.verifiedBytes,
        committed: false,
      },
    });
  }

  /** Lease recovery, second step: finalize the kept replica at the length the namenode chose, and say so. */
  private async commitRecovery(
    cmd: CommitRecoveryCommandOutput,
    reply: (msg: DatanodeToNamenode) => void,
  ): Promise<void> {
    const key = checkBlockKey(cmd.block);
    const replica = await this.store.commitRecovered(key, cmd.length);
    this.log.info("block recovery: replica finalized", { blockId: key.blockId, bytes: replica.numBytes });
    reply({
      recovery: {
        block: replica,
        recoveryId: cmd.recoveryId,
        state: "REPLICA_FINALIZED",
        numBytes: replica.numBytes,
        verifiedBytes: replica.numBytes,
        committed: true,
      },
    });
  }

  /** A full block report's replicas (corrupt ones left out); undefined before the store is open. */
  private blockReportBlocks(): Block[] | undefined {
    const store = this.storeValue;
    return store?.list().filter((r) => !store.isCorrupt(r.blockId));
  }

  private heartbeatBody(): Omit<DatanodeHeartbeat, "seq"> | undefined {
    const store = this.storeValue;
    if (!store) return undefined;
    return {
      capacityBytes: store.capacityBytes,
      usedBytes: store.usedBytes(),
      remainingBytes: store.remainingBytes(),
      primaryBusy: this.busy,
      activeTransfers: this.activeTransfers,
      fsCapacityBytes: store.fileSystem.sizeBytes,
      fsAvailableBytes: store.fileSystem.availableBytes,
    };
  }

  /** Chores paced by the heartbeats (of one namenode, with HA). */
  private afterHeartbeat(): void {
    const store = this.store;
    // Replicas kept for a lease recovery that never came (the namenode deleted the file, or was away too long) go.
    store
      .dropKeptReplicas(this.clock.nowMs() - this.options.keptReplicaTtlMs)
      .then((n) => {
        if (n > 0) this.log.info("dropped replicas kept for a lease recovery that never came", { replicas: n });
      })
      .catch((err: unknown) => this.log.warn("cannot drop kept replicas", { error: errorMessage(err) }));
    // For the next heartbeat: the file system is shared with the primary, whose files change its free space.
    store
      .refreshDiskStats()
      .catch((err: unknown) => this.log.warn("cannot read the disk's free space", { error: errorMessage(err) }));
    if (this.badBlocks.size > 0) this.reportBadBlocks();
  }

  private onCorrupt(replica: StoredReplica, reason: string): void {
    this.metrics.checksumFailed("read");
    this.log.warn("corrupt replica", { blockId: replica.blockId, genStamp: replica.genStamp, reason });
    this.badBlocks.set(replica.blockId, { replica, reason });
    this.reportBadBlocks();
  }

  /** Reports corrupt replicas through ClientNamenode.ReportBadBlocks; what fails is retried on the next heartbeat. */
  private reportBadBlocks(): void {
    if (this.reportingBad || this.badBlocks.size === 0 || !this.lifecycle.running) return;
    this.reportingBad = true;
    this.nnClient ??= makeClient(loadHarvestProto().ClientNamenode, this.options.namenodeAddress, this.options.tls);
    const client = this.nnClient;
    const batch = [...this.badBlocks.values()];
    call(client, client.reportBadBlocks, {
      blocks: batch.map((b) => ({ block: b.replica, datanodeId: this.options.datanodeId, reason: b.reason })),
    })
      .then(
        () => {
          for (const b of batch)
            if (this.badBlocks.get(b.replica.blockId) === b) this.badBlocks.delete(b.replica.blockId);
          this.log.info("reported corrupt replicas", { blockIds: batch.map((b) => b.replica.blockId) });
        },
        (err: unknown) => this.log.warn("could not report corrupt replicas; will retry", { error: errorMessage(err) }),
      )
      .finally(() => (this.reportingBad = false));
  }

  // ---------------------------------------------------------------------------------------------- replication

  private pumpReplications(): void {
    while (
      this.lifecycle.running &&
      this.replicating < this.options.maxConcurrentReplications &&
      this.replications.length > 0
    ) {
      const cmd = this.replications.shift()!;
      this.replicating++;
      this.replicate(cmd)
        .catch((err: unknown) => {
          this.metrics.replicationFailed();
          this.log.warn("replication failed", {
            blockId: cmd.block?.blockId,
            targets: cmd.targets.map((t) => t.datanodeId),
            error: errorMessage(err),
            failedDatanodeId: detailsOf(err, "DATANODE_PIPELINE_FAILED")?.datanodeId,
          });
        })
        .finally(() => {
          this.replicating--;
          this.pumpReplications();
        });
    }
  }

  /** Copies a local replica to the command's targets as a pipeline; the targets report what they received. */
  private async replicate(cmd: ReplicateCommandOutput): Promise<void> {
    const key = checkBlockKey(cmd.block);
    const [first, ...rest] = cmd.targets;
    if (!first?.address) throw new HarvestError("INVALID_ARGUMENT", `replicate block ${key.blockId}: no target`);
    if (this.busy) {
      this.metrics.refusedBusy("replicate");
      throw new HarvestError("DATANODE_PRIMARY_BUSY", "the primary tenant is busy; not replicating now");
    }
    const replica = this.store.get(key.blockId);
    if (!replica || replica.genStamp !== key.genStamp)
      throw new HarvestError("DATANODE_BLOCK_NOT_FOUND", `no replica of block ${key.blockId} to copy`);
    const transfer = this.transfer!;
    const result = await sendBlock({
      open: () => transfer.openDownstream(first),
      targetId: first.datanodeId,
      block: replica,
      downstream: rest,
      clientName: `datanode:${this.options.datanodeId}`,
      blockToken: cmd.blockToken,
      pieces: this.store.read(key),
      bandwidthBytesPerSec: this.options.replicationBandwidth,
      // The namenode replicates committed blocks only: a target's kept replica of it is stale.
      transfer: true,
      signal: this.stopping.signal,
    });
    this.metrics.replicationSent(result.numBytes);
    this.log.info("replicated", {
      blockId: key.blockId,
      bytes: result.numBytes,
      targets: cmd.targets.map((t) => t.datanodeId),
    });
  }
}
