/**
 * The namenode daemon: serves the client protocol (namespace, block allocation, fsck) and one stream per datanode
 * (registration, block reports, heartbeats answered with commands). Namespace changes are durable in LevelDB before
 * the reply; block locations live only in memory and are rebuilt from block reports after a restart, during which
 * the namenode stays in safe mode (reads answered, mutations refused) until enough blocks are reported. Safe mode and
 * the replication monitor count committed blocks only: the last block of an open file has no final length yet.
 *
 * This class wires its parts and runs the timers: the client protocol (client-protocol.ts), the datanode tracker
 * (datanode-tracker.ts; a datanode silent for `staleAfterMs` is stale: fsck lists its replicas as suspect, and new
 * blocks and copies avoid it), safe mode (safe-mode.ts), lease recovery (lease-recovery.ts, block-recovery.ts) and
 * decommissioning (decommission-admin.ts: the NamenodeAdmin service, admins only; the policy is the replication
 * monitor's, decommission.ts). Draining datanodes are kept out of new pipelines, read last, and reported in fsck,
 * GetDatanodes and GetDecommissionStatus.
 */
import { processFacts } from "../common/web-page.js";
import { randomInt } from "node:crypto";
import { join } from "node:path";
import { ensureDirMode } from "../common/atomic-file.js";
import { BlockKeyManager } from "../common/block-token.js";
import { systemClock } from "../common/clock.js";
import type { Clock } from "../common/clock.js";
import { errorMessage, toServiceError } from "../common/errors.js";
import type { HarvestError } from "../common/errors.js";
import { guardUnary } from "../common/ha/standby-guard.js";
import { haAdminHandlers, loadHaAdminProto, notHaAdmin } from "../common/ha-admin.js";
import type { HaAdminSource } from "../common/ha-admin.js";
import { haGauges } from "../common/ha-metrics.js";
import { NameNodeHa, serveCheckpoint } from "./ha-role.js";
import type { BatchOp } from "./namespace-store.js";
import { ANY_CERTIFICATE, Gate } from "../common/auth.js";
import type { ServiceRules } from "../common/auth.js";
import { DelegationTokens } from "../common/delegation-token.js";
import { newestBlockKey } from "../common/webhdfs.js";
import { CancelledTokens } from "./cancelled-tokens.js";
import { INSECURE_WARNING } from "../common/options.js";
import { bindServer, call, createServer, loadHarvestProto, makeClient, shutdownServer } from "../common/grpc.js";
import { Logger } from "../common/log.js";
import { daemonRegistry, grpcServerMetrics } from "../common/metrics.js";
import type { DaemonState } from "../common/lifecycle.js";
import { ServingDaemon, type ServingOptions } from "../common/serving-daemon.js";
import { WebTokens } from "../common/web-token.js";
import { SeededRng } from "../common/rng.js";
import { replicatedBlockMap } from "./block-manager.js";
import type { BlockManager } from "./block-manager.js";
import { Namespace } from "./namespace.js";
import type { NamespaceListener } from "./namespace.js";
import { NamespaceStore } from "./namespace-store.js";
import type { DatanodeRecord } from "./namespace-store.js";
import { resolveNameNodeOptions } from "./options.js";
import type { NameNodeOptions } from "./options.js";
import { StockPlacementPolicy } from "./policy/placement.js";
import { DiversityPlacementPolicy } from "./policy/diversity-placement.js";
import type { TenantAdminClient } from "../proto/generated/harvest/v1/TenantAdmin.js";
import type { PlacementPolicy } from "./policy/placement.js";
import { NameNodeMetrics } from "./nn-metrics.js";
import type { BlockHealthCounts, DatanodeCounts, NameNodeSummary } from "./nn-metrics.js";
import { registerNameNodeApi } from "./web-api.js";
import { registerWebHdfs } from "./webhdfs.js";
import type { WebHdfsSource } from "./webhdfs.js";
import { registerNameNodePages } from "./web-pages.js";
import { placementReport } from "./web.js";
import type { NameNodeWebSource, PlacementReport } from "./web.js";
import type { ReplicationMonitor } from "./policy/replication-monitor.js";
import type { DatanodeEntry, DatanodeStream } from "./datanode-entry.js";
import { blockHealth, datanodeCounts } from "./health.js";
import type { HealthSource } from "./health.js";
import { ClientProtocol } from "./client-protocol.js";
import { DatanodeTracker } from "./datanode-tracker.js";
import { DecommissionAdmin } from "./decommission-admin.js";
import { LeaseRecovery } from "./lease-recovery.js";
import { SafeMode } from "./safe-mode.js";

/** How often cancellations of delegation tokens that have expired since are forgotten. */
const CANCELLED_TOKEN_PRUNE_MS = 10 * 60_000;

/** The namenode daemon. */
export class NameNode extends ServingDaemon {
  readonly options: NameNodeOptions;
  protected readonly log: Logger;
  private readonly clock: Clock;
  /** Signs block access tokens; undefined when the namenode issues none (`blockTokens: false`). */
  private readonly blockKeys: BlockKeyManager | undefined;
  /** The daemon's Prometheus metrics (gRPC calls, process, and `harvest_nn_*`), served at the web server's /metrics. */
  private readonly registry = daemonRegistry("namenode");
  private readonly metrics: NameNodeMetrics;
  private readonly server = createServer([grpcServerMetrics(this.registry)]);
  /** Issues and checks web tokens (secure namenodes only). */
  private webTokens: WebTokens | undefined;
  /** What `copiesArrived` was at the last replication tick (the metrics count the difference). */
  private copiesArrivedSeen = 0;
  /** Who may call what (common/auth.ts); TLS when `tls` is set. */
  private readonly gate: Gate;
  /** Issues and checks delegation tokens (secure namenodes only). */
  private delegation: DelegationTokens | undefined;
  /** The delegation tokens cancelled before they expired, kept in the store: `delegation` refuses them. */
  private readonly cancelledTokens: CancelledTokens;
  private readonly store: NamespaceStore;
  private readonly namespace: Namespace;
  /** The block map; every change feeds the replication monitor (`replicatedBlockMap`). */
  private readonly blocks: BlockManager;
  private readonly placement: PlacementPolicy;
  private readonly monitor: ReplicationMonitor;
  private readonly rng: SeededRng;
  /** Registrations, heartbeats and liveness of the datanodes. */
  private readonly tracker: DatanodeTracker;
  /** The tracker's datanodes and records. */
  private readonly datanodes: ReadonlyMap<string, DatanodeEntry>;
  private readonly datanodeRecords: Map<string, DatanodeRecord>;
  private readonly safeMode: SafeMode;
  private readonly leases: LeaseRecovery;
  private readonly admin: DecommissionAdmin;
  private readonly client: ClientProtocol;
  private lastMissing = 0;
  private livenessTimer: NodeJS.Timeout | undefined;
  private replicationTimer: NodeJS.Timeout | undefined;
  private tenantTimer: NodeJS.Timeout | undefined;
  private cancelledPruneTimer: NodeJS.Timeout | undefined;
  /** The diversity policy and the resource manager it reads tenants from (diversity placement only). */
  private readonly diversity: DiversityPlacementPolicy | undefined;
  private tenantAdmin: TenantAdminClient | undefined;
  private tenantRefreshing = false;
  /** When each degrade reason was last logged, so a small cluster does not flood the log. */
  private readonly degradeLogged = new Map<string, number>();
  /** HA: this namenode's role in its pair (undefined without `haCoordination`). */
  private ha: NameNodeHa | undefined;
  /** HA: what this namenode announces while active (filled in once it is bound). */
  private readonly haMe = { id: "", address: "", webUrl: "" };
  private demote: (reason: string) => void = () => undefined;
  /**
   * HA: settles with the reason when this namenode's active term ended (its memory may be ahead of the shared log):
   * the process stops it and starts a fresh one, a standby on its store (main.ts).
   */
  readonly demoted = new Promise<string>((resolve) => (this.demote = resolve));

  protected get serving(): ServingOptions {
    return this.options;
  }

  constructor(options: Partial<NameNodeOptions> & { dataDir: string }, deps: { clock?: Clock; logger?: Logger } = {}) {
    super("namenode");
    this.options = resolveNameNodeOptions(options);
    this.clock = deps.clock ?? systemClock;
    this.gate = new Gate(this.options.tls, {
      "dfs-token": (token) => {
        const claims = this.delegation?.verify(token, this.clock.nowMs());
        return claims ? { name: claims.owner, role: "task", via: "token" } : undefined;
      },
    });
    this.blockKeys = this.options.blockTokens
      ? new BlockKeyManager(
          () => this.clock.nowMs(),
          {
            tokenLifetimeMs: this.options.blockTokenLifetimeMs,
            keyUpdateIntervalMs: this.options.blockKeyUpdateIntervalMs,
          },
          undefined,
          // HA: both namenodes send their keys to every datanode, which tries each key of a token's id.
          this.options.haCoordination ? randomInt(1, 2 ** 30) : 1,
        )
      : undefined;
    this.log = deps.logger ?? new Logger("nn");
    this.rng = new SeededRng(this.options.seed);
    this.metrics = new NameNodeMetrics(this.registry, () => this.summary());
    haGauges(this.registry, () => this.haAdmin().status());
    if (this.options.placementPolicy === "diversity") {
      this.diversity = new DiversityPlacementPolicy({ onDegrade: (reason) => this.onPlacementDegraded(reason) });
      this.placement = this.diversity;
    } else {
      this.placement = new StockPlacementPolicy();
    }
    ({ blocks: this.blocks, monitor: this.monitor } = replicatedBlockMap(this.placement, this.rng, {
      maxReplicationStreams: this.options.maxReplicationStreams,
      pendingTimeoutMs: this.options.replicationTimeoutMs,
      maxWorkPerRun: this.options.maxReplicationWorkPerRun || Infinity,
      maxReceiveStreams: this.options.maxReplicationReceiveStreams || Infinity,
    }));
    this.store = new NamespaceStore(join(this.options.dataDir, "namespace"));
    this.cancelledTokens = new CancelledTokens(this.store);
    const listener: NamespaceListener = {
      blockAllocated: (block, inodeId, replication) => this.blocks.addBlock(block, inodeId, replication, false),
      blockCommitted: (block) => this.blocks.commitBlock(block),
      blocksRemoved: (removed) => this.tracker.queueDeletions(this.blocks.removeBlocks(removed)),
    };
    this.namespace = new Namespace(
      this.store,
      {
        defaultReplication: this.options.defaultReplication,
        defaultBlockSizeBytes: this.options.defaultBlockSizeBytes,
        maxReplication: this.options.maxReplication,
        superuser: this.options.superuser,
      },
      { clock: this.clock, listener },
    );
    const parts = {
      options: this.options,
      clock: this.clock,
      log: this.log,
      store: this.store,
      namespace: this.namespace,
      blocks: this.blocks,
      monitor: this.monitor,
      blockKeys: this.blockKeys,
      isRunning: () => this.lifecycle.running,
    };
    this.safeMode = new SafeMode(this.options, this.clock, this.log, this.blocks);
    this.tracker = new DatanodeTracker({
      ...parts,
      safeModeOn: () => this.safeModeOn,
      checkSafeMode: () => this.checkSafeMode(),
      recoveryAnswered: (datanodeId, answer) => this.leases.onAnswer(datanodeId, answer),
      epoch: () => this.ha?.epoch ?? 0,
      isActive: () => this.isActive,
    });
    this.datanodes = this.tracker.datanodes;
    this.datanodeRecords = this.tracker.records;
    this.leases = new LeaseRecovery({ ...parts, tracker: this.tracker });
    this.admin = new DecommissionAdmin({ ...parts, tracker: this.tracker });
    this.client = new ClientProtocol({
      ...parts,
      notActive: () => this.notActive(),
      gate: this.gate,
      metrics: this.metrics,
      placement: this.placement,
      rng: this.rng,
      tracker: this.tracker,
      safeMode: this.safeMode,
      delegation: () => this.delegation,
      cancelledTokens: this.cancelledTokens,
      webTokens: () => this.webTokens,
      httpUrl: () => this.httpUrl,
      healthSource: () => this.healthSource(),
    });
  }

  /** True without HA, and while this namenode is the active one of its pair. */
  get isActive(): boolean {
    return !this.ha || this.ha.role === "active";
  }

  /** HA: this namenode's role and epoch ("active", 0 without HA). */
  get haStatus(): { role: string; epoch: number; active: string; appliedTxid: number } {
    if (!this.ha) return { role: "active", epoch: 0, active: this.address, appliedTxid: 0 };
    return {
      role: this.ha.role,
      epoch: this.ha.epoch,
      active: this.ha.leader?.address ?? "",
      appliedTxid: this.ha.appliedTxid,
    };
  }

  /** HaAdmin's answers (`harvest admin ha status|failover`), active or standby. */
  private haAdmin(): HaAdminSource {
    const ha = this.ha;
    if (!ha)
      return notHaAdmin(
        "nn",
        () => this.address,
        () => this.httpUrl ?? "",
      );
    const status: HaAdminSource["status"] = () => {
      const active = ha.leader;
      return {
        service: "nn",
        id: this.haMe.id,
        role: ha.role,
        epoch: ha.epoch,
        address: this.address,
        webUrl: this.httpUrl ?? "",
        activeAddress: active?.address ?? "",
        activeWebUrl: active?.webUrl ?? "",
      };
    };
    return {
      status,
      failover: async () => {
        const refused = this.notActive();
        if (refused) throw refused;
        await ha.handOver();
        return status();
      },
    };
  }

  /** HA: the error a standby answers callers with; undefined when this namenode serves them. */
  private notActive(): HarvestError | undefined {
    return this.isActive ? undefined : this.ha?.notActive();
  }

  /** True while mutations are refused (after a start, until enough blocks are reported). */
  get inSafeMode(): boolean {
    return this.safeModeOn;
  }

  /** Its placement policy, namespace counts and whether it is in safe mode, for the "serving" log line. */
  protected onServing(): Record<string, unknown> {
    return { placement: this.placement.name, ...this.namespace.counts(), safeMode: this.safeModeOn };
  }

  /** Opens the store, loads the namespace, rebuilds the block map, binds the server; resolves once serving. */
  protected async startSteps(): Promise<void> {
    // The namespace, its edits and the delegation key are the namenode's alone.
    if (!ensureDirMode(this.options.dataDir, 0o700))
      this.log.warn("cannot make the data directory private (0700)", { dir: this.options.dataDir });
    if (this.options.haCoordination) this.ha = this.haRole(this.options.haCoordination);
    if (this.options.tls) {
      this.delegation = new DelegationTokens(
        this.ha
          ? await this.ha.sharedSecret("delegation-key")
          : DelegationTokens.keyFromFile(join(this.options.dataDir, "delegation.key")),
        this.options.delegationTokenMaxLifetimeMs,
        "d1",
        (claims) => this.cancelledTokens.has(claims),
      );
      this.webTokens = new WebTokens(this.options.dataDir, this.clock);
    }
    await this.store.open();
    // Before the server binds: a token cancelled before a restart is refused from the first call after it.
    await this.cancelledTokens.load(this.clock.nowMs());
    await this.namespace.load();
    for (const { block, inodeId, replication, committed } of this.namespace.allBlocks())
      this.blocks.addBlock(block, inodeId, replication, committed);
    for (const record of await this.store.loadDatanodes()) this.datanodeRecords.set(record.datanodeId, record);
    // Drains resume where they were; one in progress waits for its datanode's first block report to complete.
    for (const record of await this.store.loadDecommissions())
      this.monitor.restoreDecommission(record, [], record.state === "DECOMMISSION_IN_PROGRESS");
    this.checkSafeMode();
    const proto = loadHarvestProto();
    // Datanodes (daemon certificates) on their stream; people, daemons, and tasks with their submitter's delegation
    // token on the client protocol. Only a certificate may ask for a delegation token or a web token (a token does
    // not mint one).
    const anyone = [...ANY_CERTIFICATE, "dfs-token"] as const;
    const clientRules = Object.fromEntries(
      Object.keys(proto.ClientNamenode.service).map((m) => [
        m,
        m === "GetDelegationToken" ? ["user", "admin"] : m === "GetWebToken" ? ANY_CERTIFICATE : anyone,
      ]),
    ) as ServiceRules;
    const gate = this.gate
      .allow(proto.DatanodeProtocol.service, { DatanodeChannel: ["daemon"] })
      .allow(proto.ClientNamenode.service, clientRules)
      .allow(proto.NamenodeCheckpoint.service, { GetCheckpoint: ["admin"] })
      .allow(proto.NamenodeAdmin.service, {
        Decommission: ["admin"],
        Recommission: ["admin"],
        GetDecommissionStatus: ["admin"],
      });
    if (!gate.secure) this.log.warn(INSECURE_WARNING);
    this.server.addService(proto.DatanodeProtocol.service, {
      DatanodeChannel: (s: DatanodeStream) => this.tracker.onStream(s),
    });
    this.server.addService(proto.NamenodeCheckpoint.service, {
      GetCheckpoint: (c: Parameters<typeof serveCheckpoint>[0] & { emit(e: "error", err: unknown): void }) => {
        serveCheckpoint(c, this.store, this.ha).then(
          (pages) => this.log.info("checkpoint sent to a new standby", { standbyId: c.request.standbyId, pages }),
          (err: unknown) => c.emit("error", toServiceError(err)),
        );
      },
    });
    const haProto = loadHaAdminProto();
    gate.allow(haProto.HaAdmin.service, { GetHaStatus: ["admin"], Failover: ["admin"] });
    this.server.addService(haProto.HaAdmin.service, haAdminHandlers(this.haAdmin()));
    const standby = (): HarvestError | undefined => this.notActive();
    this.server.addService(proto.ClientNamenode.service, guardUnary(this.client.service(), standby));
    this.server.addService(
      proto.NamenodeAdmin.service,
      guardUnary(
        this.admin.service((c, action) => this.client.requireAdmin(c, action)),
        standby,
      ),
    );
    this.boundPort = await bindServer(this.server, this.options.host, this.options.port, gate.credentials());
    await this.startWeb({
      title: "Harvest namenode",
      metrics: this.registry,
      log: this.log,
      tokens: this.webTokens?.verify,
      routes: (web) => {
        const source = this.webSource();
        registerNameNodeApi(web, source);
        registerWebHdfs(web, this.webHdfsSource(source));
        registerNameNodePages(web, source);
      },
      undo: () => shutdownServer(this.server, 0),
      standby: () => {
        const error = this.notActive();
        // Never to itself: promoting, it is the leader but not serving yet (503 NOT_ACTIVE, which clients retry).
        const active = this.ha?.leader;
        const elsewhere = active && active.id !== this.haMe.id ? active.webUrl || undefined : undefined;
        return error ? { error, activeWebUrl: elsewhere } : undefined;
      },
    });
    this.livenessTimer = setInterval(() => this.checkLiveness(), this.options.monitorIntervalMs);
    this.replicationTimer = setInterval(() => this.replicationTick(), this.options.replicationIntervalMs);
    this.cancelledPruneTimer = setInterval(() => this.pruneCancelledTokens(), CANCELLED_TOKEN_PRUNE_MS);
    if (this.diversity) {
      this.tenantAdmin = makeClient(proto.TenantAdmin, this.options.rmAddress, this.options.tls);
      void this.refreshTenants();
      this.tenantTimer = setInterval(() => void this.refreshTenants(), this.options.tenantRefreshMs);
    }
    // Serving first (datanodes report to a standby too), then following the log and campaigning.
    if (this.ha) {
      Object.assign(this.haMe, {
        id: this.options.haId || `${this.options.advertiseHost}:${this.boundPort}`,
        address: this.address,
        webUrl: this.httpUrl ?? "",
      });
      await this.ha.start();
    }
  }

  /** The HA role, wired to this namenode (ha-role.ts). */
  private haRole(coordination: NonNullable<NameNodeOptions["haCoordination"]>): NameNodeHa {
    return new NameNodeHa(
      coordination,
      this.haMe,
      {
        log: this.log,
        store: this.store,
        applyToMemory: (ops: readonly BatchOp[]) => {
          this.namespace.applyReplicated(ops);
          this.tracker.replayPostponed();
        },
        becomeActive: (epoch) => this.becomeActive(epoch),
        stepDown: (reason) => this.demote(reason),
      },
      this.options.haLogRetainEntries,
    );
  }

  /**
   * HA: the shared log is applied to its end: take up what a standby leaves alone (the datanode records, drains and
   * cancelled tokens its store got from the log, fresh leases for open files, the replicas reported ahead of the log)
   * and leave safe mode as soon as the block map, kept current by the datanodes' reports, allows.
   */
  private async becomeActive(epoch: number): Promise<void> {
    // Write tokens name the term: datanodes refuse those of an older one (an old active back from a partition).
    this.blockKeys?.setEpoch(epoch);
    for (const record of await this.store.loadDatanodes()) this.datanodeRecords.set(record.datanodeId, record);
    for (const record of await this.store.loadDecommissions())
      if (!this.monitor.decommissionRecord(record.datanodeId))
        this.monitor.restoreDecommission(record, [], record.state === "DECOMMISSION_IN_PROGRESS");
    await this.cancelledTokens.load(this.clock.nowMs());
    for (const { block, replication } of this.namespace.allBlocks())
      this.blocks.setExpectedReplication(block.blockId, replication);
    this.namespace.renewAllLeases();
    this.tracker.replayPostponed(true);
    this.checkSafeMode();
    this.log.info("serving as the active namenode", { epoch, safeMode: this.safeModeOn });
  }

  /** Stops serving and closes the store; idempotent. */
  protected async stopSteps(was: DaemonState): Promise<void> {
    const wasRunning = was !== "new";
    await this.ha?.stop().catch(() => undefined);
    if (this.livenessTimer) clearInterval(this.livenessTimer);
    if (this.replicationTimer) clearInterval(this.replicationTimer);
    if (this.tenantTimer) clearInterval(this.tenantTimer);
    if (this.cancelledPruneTimer) clearInterval(this.cancelledPruneTimer);
    this.tenantAdmin?.close();
    for (const d of this.datanodes.values()) d.stream?.end();
    await shutdownServer(this.server, 1_000);
    await this.web?.stop();
    if (wasRunning) {
      await this.namespace.drain();
      await this.adminWrites;
      await this.store.close().catch(() => undefined);
    }
  }

  /** What the health reports read (health.ts). */
  private healthSource(): HealthSource {
    return {
      namespace: this.namespace,
      blocks: this.blocks,
      monitor: this.monitor,
      datanodes: this.datanodes,
      liveViews: () => this.tracker.liveViews(),
      isStale: (d) => this.tracker.isStale(d),
      safeModeOn: this.safeModeOn,
    };
  }

  // ---------------------------------------------------------------------------------------------- web and metrics

  /** What the web routes read: the functions the gRPC services call (web.ts). */
  private webSource(): NameNodeWebSource {
    return {
      summary: () => this.summary(),
      callerOf: (principal) => this.client.webCaller(principal),
      list: (path, caller) => this.client.list(path, caller),
      stat: (path, caller) => this.client.stat(path, caller),
      contentSummary: (path, caller) =>
        this.metrics.observe("getContentSummary", () => this.namespace.contentSummary(path, caller)),
      blockLocations: (path, offset, length, caller) => this.client.locateBlocks(path, offset, length, caller),
      fsck: (path, caller) => this.client.fsck(path, caller),
      datanodes: () => this.tracker.datanodeReports(),
      placement: () => this.placementReport(),
    };
  }

  /** What WebHDFS reads and changes (webhdfs.ts): the web source, the namespace calls, the datanodes' web URLs, keys. */
  private webHdfsSource(source: NameNodeWebSource): WebHdfsSource {
    const writing = <T>(op: "mkdirs" | "setPermission" | "delete" | "rename", fn: () => Promise<T>): Promise<T> =>
      this.metrics.observe(op, () => {
        this.safeMode.checkWritable();
        return fn();
      });
    return {
      ...source,
      secure: this.options.tls !== undefined,
      superuser: this.options.superuser,
      ticketLifetimeMs: this.options.webHdfsTicketLifetimeMs,
      transferMaxMs: this.options.webHdfsTransferMaxMs,
      nowMs: () => this.clock.nowMs(),
      webUrl: () => this.httpUrl ?? "",
      mkdirs: (path, owner, caller) =>
        writing("mkdirs", () => this.namespace.mkdirs(path, owner, caller)).then(() => {}),
      setPermission: (path, mode, caller) =>
        writing("setPermission", () => this.namespace.setPermission(path, mode, caller)).then(() => {}),
      delete: (path, recursive, caller) => writing("delete", () => this.namespace.delete(path, recursive, caller)),
      rename: (src, dst, caller) => writing("rename", () => this.namespace.rename(src, dst, caller)).then(() => {}),
      webHdfsDatanodes: () =>
        [...this.datanodes.values()]
          .filter((d) => d.state === "LIVE" && d.webUrl && this.monitor.adminState(d.datanodeId) === "NORMAL")
          .map((d) => ({ datanodeId: d.datanodeId, webUrl: d.webUrl, busy: d.primaryBusy }))
          .sort((a, b) => a.datanodeId.localeCompare(b.datanodeId)),
      ticketKey: () => newestBlockKey(this.blockKeys?.keys() ?? []),
      dfsTokenFor: (user, lifetimeMs) => this.delegation?.issue(user, this.clock.nowMs(), lifetimeMs).token ?? "",
    };
  }

  /** The namenode at a glance: `/ws/v1/nn/info`, the overview page and the metrics' gauges. */
  private summary(): NameNodeSummary {
    return {
      address: this.address,
      httpUrl: this.httpUrl ?? "",
      state: this.lifecycle.state,
      safeMode: this.safeMode.status(),
      placementPolicy: this.placement.name,
      ...this.namespace.counts(),
      blockHealth: this.blockHealth(),
      datanodes: this.datanodeCounts(),
      ha: this.haStatus,
      process: processFacts(this.servingSinceMs),
    };
  }

  /** Committed blocks by health over the whole block map, judged as fsck judges them (one pass, no namespace walk). */
  private blockHealth(): BlockHealthCounts {
    return blockHealth(this.healthSource());
  }

  /** Datanodes by liveness and admin state, and the live ones' space. Dead counts as fsck does (not DECOMMISSIONED). */
  private datanodeCounts(): DatanodeCounts {
    return datanodeCounts(this.healthSource());
  }

  /** Where the good replicas of committed blocks on live datanodes sit in the diversity grid. */
  private placementReport(): PlacementReport {
    const live = new Set(this.tracker.liveViews().map((d) => d.datanodeId));
    const blocks = this.blocks;
    function* holders(): Generator<string[]> {
      for (const info of blocks.all()) {
        if (!info.committed) continue;
        const ids: string[] = [];
        for (const r of info.replicas.values()) if (!r.corrupt && live.has(r.datanodeId)) ids.push(r.datanodeId);
        yield ids;
      }
    }
    return placementReport(this.placement.name, this.diversity?.grid, holders());
  }

  private checkLiveness(): void {
    this.tracker.expire();
    this.checkSafeMode();
    if (!this.safeModeOn && this.isActive) {
      this.leases.recoverLeases();
      this.leases.tick();
    }
  }

  /** True while mutations are refused. */
  private get safeModeOn(): boolean {
    return this.safeMode.on;
  }

  private checkSafeMode(): void {
    this.safeMode.check();
  }

  /** Settles once every admin-state write queued so far has. */
  private get adminWrites(): Promise<void> {
    return this.admin.writes;
  }

  private replicationTick(): void {
    if (this.safeModeOn || !this.lifecycle.running || !this.isActive) return;
    // The monitor keeps the under-replicated blocks itself, fed by the block map's events: a tick looks at those only.
    const work = this.monitor.tick(this.tracker.liveViews(), this.clock.nowMs());
    const arrived = this.monitor.copiesArrived();
    this.metrics.replicationCompleted.inc(arrived - this.copiesArrivedSeen);
    this.copiesArrivedSeen = arrived;
    this.metrics.replicationScheduled.inc(work.replicate.length);
    this.metrics.replicationTimedOut.inc(work.timedOut);
    for (const task of work.replicate) {
      const source = this.datanodes.get(task.sourceId);
      source?.replicate.push({
        block: task.block,
        targets: task.targets.map((t) => this.tracker.info(t.datanodeId)),
        blockToken: this.blockKeys?.issue(task.block.blockId, "WRITE", "namenode") ?? "",
      });
    }
    for (const del of work.delete) {
      this.metrics.replicaDeletions.inc({ reason: del.reason });
      this.blocks.invalidate(del.datanodeId, del.block.blockId);
      this.datanodes.get(del.datanodeId)?.deletes.push(del.block);
    }
    if (work.replicate.length > 0 || work.delete.length > 0 || work.timedOut > 0)
      this.log.info("replication work scheduled", {
        copies: work.replicate.length,
        deletions: work.delete.length,
        timedOut: work.timedOut,
        underReplicated: work.underReplicated,
        deferred: work.deferred,
      });
    for (const id of work.decommissioned) {
      const status = this.monitor.decommissionStatus(id, this.clock.nowMs());
      this.log.info("datanode decommissioned: every block it holds has enough replicas elsewhere", {
        datanodeId: id,
        blocks: status?.blocks ?? 0,
        tookMs: status ? status.finishedMs - status.startedMs : 0,
      });
      // Failures are logged by persistAdminState; a restart then resumes the drain, which completes again.
      this.admin.persistAdminState(id).catch(() => undefined);
    }
    for (const { datanodeId, blocksNeedingCopies } of work.decommissionOverdue)
      this.log.warn(`decommission deadline passed with ${blocksNeedingCopies} blocks not yet copied`, {
        datanodeId,
        blocksNeedingCopies,
        deadlineMs: this.monitor.decommissionRecord(datanodeId)?.deadlineMs ?? 0,
      });
    if (work.missing !== this.lastMissing) {
      this.lastMissing = work.missing;
      if (work.missing > 0)
        this.log.error("blocks missing: no good replica on a live datanode", {
          missing: work.missing,
          first: this.monitor.missingBlocks(5).map((b) => b.blockId),
        });
    }
  }

  /**
   * Rebuilds the diversity grid from the resource manager's tenants (reimage rate, peak CPU, environment, servers) and
   * the datanodes' free space. An unreachable resource manager keeps the last grid.
   */
  private async refreshTenants(): Promise<void> {
    const admin = this.tenantAdmin;
    if (!admin || !this.diversity || this.tenantRefreshing) return;
    this.tenantRefreshing = true;
    try {
      const res = await call(admin, admin.listTenants, { name: "" }, 10_000);
      const free = new Map<string, number>();
      for (const d of this.datanodes.values()) if (d.state === "LIVE") free.set(d.datanodeId, d.remainingBytes);
      const tenants = res.tenants.map((t) => ({
        tenantId: t.name,
        environment: t.environment,
        reimagesPerServerMonth: t.reimagesPerServerMonth,
        peakCpuPct: t.peakPct,
        servers: t.servers,
      }));
      this.diversity.setTenants(tenants, free);
      this.log.debug("diversity grid rebuilt", { tenants: tenants.length, datanodes: free.size });
    } catch (err) {
      this.log.warn("cannot read tenants from the resource manager; keeping the last grid", {
        rm: this.options.rmAddress,
        error: errorMessage(err),
      });
    } finally {
      this.tenantRefreshing = false;
    }
  }

  /** Forgets cancellations of tokens that have expired since (they are refused as expired now). */
  private pruneCancelledTokens(): void {
    if (!this.lifecycle.running) return;
    this.cancelledTokens.prune(this.clock.nowMs()).catch((err: unknown) =>
      this.log.warn("cannot forget expired cancelled delegation tokens; will try again", {
        error: errorMessage(err),
      }),
    );
  }

  private onPlacementDegraded(reason: string): void {
    const now = this.clock.nowMs();
    const last = this.degradeLogged.get(reason);
    if (last !== undefined && now - last < 60_000) return;
    this.degradeLogged.set(reason, now);
    if (this.degradeLogged.size > 1_000) this.degradeLogged.clear();
    this.log.warn("replica placement relaxed a diversity rule", { reason });
  }
}
