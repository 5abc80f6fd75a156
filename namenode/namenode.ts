/**
 * The namenode daemon: serves the client protocol (namespace, block allocation, fsck) and one stream per datanode
 * (registration, block reports, heartbeats answered with commands). Namespace changes are durable in LevelDB before
 * the reply; block locations live only in memory and are rebuilt from block reports after a restart, during which
 * the namenode stays in safe mode (reads answered, mutations refused) until enough blocks are reported. Safe mode and
 * the replication monitor count committed blocks only: the last block of an open file has no final length yet.
 *
 * Lease recovery (block-recovery.ts): a file whose writer went silent is closed with its last block at the length
 * every surviving replica of its pipeline holds, asked over the datanodes' streams, and marked recovered. A datanode
 * silent for `staleAfterMs` is stale: fsck lists its replicas as suspect, and new blocks and copies avoid it.
 *
 * Decommissioning (the NamenodeAdmin service, admins only): the policy is the replication monitor's (decommission.ts);
 * this class checks who asks and which datanodes, persists the records before answering, keeps draining datanodes out
 * of new pipelines, orders reads with them last, and reports drains in fsck, GetDatanodes and GetDecommissionStatus.
 */
import type * as grpc from "@grpc/grpc-js";
import { join } from "node:path";
import { ensureDirMode } from "../common/atomic-file.js";
import { BlockKeyManager } from "../common/block-token.js";
import { systemClock } from "../common/clock.js";
import type { Clock } from "../common/clock.js";
import { callErrorOf, errorMessage, HarvestError } from "../common/errors.js";
import { Lifecycle } from "../common/lifecycle.js";
import type { DaemonState } from "../common/lifecycle.js";
import { CLAIMED_USER_METADATA } from "../common/fs-permission.js";
import { isValidIdentityName } from "../common/tls.js";
import { ANY_CERTIFICATE, Gate, requireAccess } from "../common/auth.js";
import type { CallContext, ServiceRules } from "../common/auth.js";
import { DelegationTokens } from "../common/delegation-token.js";
import { INSECURE_WARNING } from "../common/options.js";
import { serveWorkerStream } from "../common/worker-stream.js";
import { formatAddress, parseHostPort } from "../common/net-address.js";
import {
  bindServer,
  call,
  createServer,
  loadHarvestProto,
  makeClient,
  shutdownServer,
  unary,
  undecodable,
} from "../common/grpc.js";
import { Logger } from "../common/log.js";
import { daemonRegistry, grpcServerMetrics } from "../common/metrics.js";
import { startDaemonWeb, WebServer } from "../common/web-server.js";
import { WebTokens } from "../common/web-token.js";
import type { Principal } from "../common/auth.js";
import { SeededRng } from "../common/rng.js";
import { orderReplicas } from "./policy/read-order.js";
import { replicatedBlockMap } from "./block-manager.js";
import { BlockRecoveries } from "./block-recovery.js";
import type { RecoveryAnswer, RecoveryOutcome, BlockRecoveryRecord } from "./block-recovery.js";
import type { BlockRecoveryReportOutput } from "../proto/generated/harvest/v1/BlockRecoveryReport.js";
import type { BlockManager } from "./block-manager.js";
import type { ReplicaDeletion } from "./block-manager.js";
import { Namespace } from "./namespace.js";
import type { NamespaceListener } from "./namespace.js";
import { NamespaceStore } from "./namespace-store.js";
import type { Caller } from "./policy/permissions.js";
import type { DatanodeRecord } from "./namespace-store.js";
import { resolveNameNodeOptions } from "./options.js";
import type { NameNodeOptions } from "./options.js";
import { StockPlacementPolicy } from "./policy/placement.js";
import { DiversityPlacementPolicy } from "./policy/diversity-placement.js";
import type { TenantAdminClient } from "../proto/generated/harvest/v1/TenantAdmin.js";
import type { DatanodeView, PlacementPolicy } from "./policy/placement.js";
import { NameNodeMetrics } from "./nn-metrics.js";
import type { BlockHealthCounts, DatanodeCounts, NameNodeSummary } from "./nn-metrics.js";
import { registerNameNodeApi } from "./web-api.js";
import { registerNameNodePages } from "./web-pages.js";
import { placementReport } from "./web.js";
import type { FileBlockLocations, NameNodeWebSource, PlacementReport } from "./web.js";
import type { ReplicationMonitor } from "./policy/replication-monitor.js";
import type { AdminState } from "./policy/decommission.js";
import type { AbandonBlockRequestOutput } from "../proto/generated/harvest/v1/AbandonBlockRequest.js";
import type { AddBlockRequestOutput } from "../proto/generated/harvest/v1/AddBlockRequest.js";
import type { BlockReportOutput } from "../proto/generated/harvest/v1/BlockReport.js";
import type { BlocksReceivedOutput } from "../proto/generated/harvest/v1/BlocksReceived.js";
import type { CompleteRequestOutput } from "../proto/generated/harvest/v1/CompleteRequest.js";
import type { CreateRequestOutput } from "../proto/generated/harvest/v1/CreateRequest.js";
import type { DatanodeHeartbeatOutput } from "../proto/generated/harvest/v1/DatanodeHeartbeat.js";
import type { DatanodeInfoOutput } from "../proto/generated/harvest/v1/DatanodeInfo.js";
import type { DatanodeReportOutput } from "../proto/generated/harvest/v1/DatanodeReport.js";
import type { DatanodeToNamenodeOutput } from "../proto/generated/harvest/v1/DatanodeToNamenode.js";
import type { DatanodeAdminStatus } from "../proto/generated/harvest/v1/DatanodeAdminStatus.js";
import type { DecommissionRequestOutput } from "../proto/generated/harvest/v1/DecommissionRequest.js";
import type { DecommissionStatusResponse } from "../proto/generated/harvest/v1/DecommissionStatusResponse.js";
import type { FsckReportOutput } from "../proto/generated/harvest/v1/FsckReport.js";
import type { GetBlockLocationsRequestOutput } from "../proto/generated/harvest/v1/GetBlockLocationsRequest.js";
import type { FileStatusOutput } from "../proto/generated/harvest/v1/FileStatus.js";
import type { LocatedBlock } from "../proto/generated/harvest/v1/LocatedBlock.js";
import type { NamespaceCallOutput } from "../proto/generated/harvest/v1/NamespaceCall.js";
import type { NamespaceResult } from "../proto/generated/harvest/v1/NamespaceResult.js";
import type { NamenodeToDatanode } from "../proto/generated/harvest/v1/NamenodeToDatanode.js";
import type { RegisterDatanodeOutput } from "../proto/generated/harvest/v1/RegisterDatanode.js";
import type { ReportBadBlocksRequestOutput } from "../proto/generated/harvest/v1/ReportBadBlocksRequest.js";
import type { SafeModeStatusOutput } from "../proto/generated/harvest/v1/SafeModeStatus.js";
import type { DatanodeEntry, DatanodeStream } from "./datanode-entry.js";
import { blockHealth, datanodeCounts, fsckReport } from "./health.js";
import type { HealthSource } from "./health.js";

/** A ClientNamenode.NamespaceCalls stream, server side. */
type NamespaceStream = grpc.ServerDuplexStream<NamespaceCallOutput, NamespaceResult>;
/** Unanswered calls a NamespaceCalls stream may have before the namenode stops reading it. */
const MAX_STREAMED_CALLS = 64;

const DATANODE_ID = /^[A-Za-z0-9_.:-]{1,128}$/;
/** Where a replica's datanode ranks among the idle (or the busy) ones for reads: leaving datanodes last. */
const READ_RANK: Readonly<Record<AdminState, number>> = { NORMAL: 0, DECOMMISSION_IN_PROGRESS: 1, DECOMMISSIONED: 2 };
/** The user of a plaintext call that claims none (it gets only the "other" permission bits). */
const ANONYMOUS_USER = "nobody";

/** The namenode daemon. */
export class NameNode {
  readonly options: NameNodeOptions;
  private readonly lifecycle = new Lifecycle("namenode");
  private readonly log: Logger;
  private readonly clock: Clock;
  /** Signs block access tokens; undefined when the namenode issues none (`blockTokens: false`). */
  private readonly blockKeys: BlockKeyManager | undefined;
  /** The daemon's Prometheus metrics (gRPC calls, process, and `harvest_nn_*`), served at the web server's /metrics. */
  private readonly registry = daemonRegistry("namenode");
  private readonly metrics: NameNodeMetrics;
  private readonly server = createServer([grpcServerMetrics(this.registry)]);
  /** The web UI, REST API and /metrics (set while started). */
  private web: WebServer | undefined;
  /** Issues and checks web tokens (secure namenodes only). */
  private webTokens: WebTokens | undefined;
  /** What `copiesArrived` was at the last replication tick (the metrics count the difference). */
  private copiesArrivedSeen = 0;
  /** Who may call what (common/auth.ts); TLS when `tls` is set. */
  private readonly gate: Gate;
  /** Issues and checks delegation tokens (secure namenodes only). */
  private delegation: DelegationTokens | undefined;
  private readonly store: NamespaceStore;
  private readonly namespace: Namespace;
  /** The block map; every change feeds the replication monitor (`replicatedBlockMap`). */
  private readonly blocks: BlockManager;
  private readonly placement: PlacementPolicy;
  private readonly monitor: ReplicationMonitor;
  private readonly rng: SeededRng;
  private readonly datanodes = new Map<string, DatanodeEntry>();
  /** Persisted storage ids and reimage counts, also of datanodes not registered since the start. */
  private readonly datanodeRecords = new Map<string, DatanodeRecord>();
  private safeModeOn = true;
  private safeModeReachedMs: number | undefined;
  private lastMissing = 0;
  private livenessTimer: NodeJS.Timeout | undefined;
  private replicationTimer: NodeJS.Timeout | undefined;
  private tenantTimer: NodeJS.Timeout | undefined;
  /** The diversity policy and the resource manager it reads tenants from (diversity placement only). */
  private readonly diversity: DiversityPlacementPolicy | undefined;
  private tenantAdmin: TenantAdminClient | undefined;
  private tenantRefreshing = false;
  /** When each degrade reason was last logged, so a small cluster does not flood the log. */
  private readonly degradeLogged = new Map<string, number>();
  private recovering = false;
  /** Last blocks of files whose lease expired, being recovered from their datanodes. */
  private readonly recoveries: BlockRecoveries;
  private boundPort = 0;
  /** Decommission records are written one after another, each with the state current when it runs (latest wins). */
  private adminWrites: Promise<void> = Promise.resolve();

  constructor(options: Partial<NameNodeOptions> & { dataDir: string }, deps: { clock?: Clock; logger?: Logger } = {}) {
    this.options = resolveNameNodeOptions(options);
    this.clock = deps.clock ?? systemClock;
    this.gate = new Gate(this.options.tls, {
      "dfs-token": (token) => {
        const claims = this.delegation?.verify(token, this.clock.nowMs());
        return claims ? { name: claims.owner, role: "task", via: "token" } : undefined;
      },
    });
    this.blockKeys = this.options.blockTokens
      ? new BlockKeyManager(() => this.clock.nowMs(), {
          tokenLifetimeMs: this.options.blockTokenLifetimeMs,
          keyUpdateIntervalMs: this.options.blockKeyUpdateIntervalMs,
        })
      : undefined;
    this.log = deps.logger ?? new Logger("nn");
    this.rng = new SeededRng(this.options.seed);
    this.metrics = new NameNodeMetrics(this.registry, () => this.summary());
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
    this.recoveries = new BlockRecoveries({ answerTimeoutMs: this.options.blockRecoveryTimeoutMs });
    this.store = new NamespaceStore(join(this.options.dataDir, "namespace"));
    const listener: NamespaceListener = {
      blockAllocated: (block, inodeId, replication) => this.blocks.addBlock(block, inodeId, replication, false),
      blockCommitted: (block) => this.blocks.commitBlock(block),
      blocksRemoved: (removed) => this.queueDeletions(this.blocks.removeBlocks(removed)),
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
  }

  /** Current lifecycle state. */
  get state(): DaemonState {
    return this.lifecycle.state;
  }

  /** host:port the daemon serves on (valid once started). */
  get address(): string {
    return formatAddress(this.options.advertiseHost, this.boundPort);
  }

  /** Base URL of the web UI, REST API and /metrics (valid once started). */
  get httpUrl(): string | undefined {
    return this.web?.url;
  }

  /** True while mutations are refused (after a start, until enough blocks are reported). */
  get inSafeMode(): boolean {
    return this.safeModeOn;
  }

  /** Opens the store, loads the namespace, rebuilds the block map, binds the server; resolves once serving. */
  async start(): Promise<void> {
    this.lifecycle.beginStart();
    // The namespace, its edits and the delegation key are the namenode's alone.
    if (!ensureDirMode(this.options.dataDir, 0o700))
      this.log.warn("cannot make the data directory private (0700)", { dir: this.options.dataDir });
    if (this.options.tls) {
      this.delegation = new DelegationTokens(
        DelegationTokens.keyFromFile(join(this.options.dataDir, "delegation.key")),
        this.options.delegationTokenMaxLifetimeMs,
      );
      this.webTokens = new WebTokens(this.options.dataDir, this.clock);
    }
    await this.store.open();
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
      .allow(proto.NamenodeAdmin.service, {
        Decommission: ["admin"],
        Recommission: ["admin"],
        GetDecommissionStatus: ["admin"],
      });
    if (!gate.secure) this.log.warn(INSECURE_WARNING);
    this.server.addService(proto.DatanodeProtocol.service, {
      DatanodeChannel: (s: DatanodeStream) => this.onDatanodeStream(s),
    });
    this.server.addService(proto.ClientNamenode.service, {
      Mkdirs: unary((req: { path: string; owner: string }, c) =>
        this.metrics.observe("mkdirs", () => {
          this.checkWritable();
          const caller = this.callerOf(c, req.owner);
          return this.namespace.mkdirs(req.path, caller.user, this.checked(caller));
        }),
      ),
      Create: unary((req: CreateRequestOutput, c) => this.createFile(req, c)),
      AddBlock: unary((req: AddBlockRequestOutput) => this.addBlockCall(req)),
      AbandonBlock: unary((req: AbandonBlockRequestOutput) =>
        this.metrics.observe("abandonBlock", async () => {
          this.checkWritable();
          const pipeline = await this.namespace.abandonBlock(req.path, req.clientName, req.block);
          // Its datanodes may have kept what they got when the writer hung up on them (for lease recovery): not
          // needed.
          if (req.block) for (const dn of pipeline) this.queueDeletions([{ datanodeId: dn, block: req.block }]);
          return {};
        }),
      ),
      Complete: unary((req: CompleteRequestOutput) => this.completeFile(req)),
      NamespaceCalls: (stream: NamespaceStream) => this.onNamespaceStream(stream),
      // Not refused in safe mode: a writer keeps its leases while the namenode waits for block reports.
      RenewLease: unary((req: { clientName: string }, c) =>
        this.metrics.observe("renewLease", () => ({
          renewed: this.namespace.renewLease(req.clientName, this.checked(this.callerOf(c))),
        })),
      ),
      GetBlockLocations: unary((req: GetBlockLocationsRequestOutput, c) => {
        const caller = this.callerOf(c);
        const located = this.locateBlocks(req.path, req.offset, req.length, this.checked(caller));
        return {
          fileLength: located.fileLength,
          complete: located.complete,
          blocks: located.blocks.map((b) => ({
            ...b,
            blockToken: this.blockKeys?.issue(b.block.blockId, "READ", caller.user) ?? "",
          })),
        };
      }),
      List: unary((req: { path: string }, c) => ({ entries: this.list(req.path, this.checked(this.callerOf(c))) })),
      Stat: unary((req: { path: string }, c) => this.stat(req.path, this.checked(this.callerOf(c)))),
      Delete: unary((req: { path: string; recursive: boolean }, c) =>
        this.metrics.observe("delete", async () => {
          this.checkWritable();
          return { deleted: await this.namespace.delete(req.path, req.recursive, this.checked(this.callerOf(c))) };
        }),
      ),
      Rename: unary((req: { src: string; dst: string }, c) =>
        this.metrics.observe("rename", () => {
          this.checkWritable();
          return this.namespace.rename(req.src, req.dst, this.checked(this.callerOf(c)));
        }),
      ),
      SetPermission: unary((req: { path: string; mode: number }, c) =>
        this.metrics.observe("setPermission", () => {
          this.checkWritable();
          return this.namespace.setPermission(req.path, req.mode, this.checked(this.callerOf(c)));
        }),
      ),
      SetOwner: unary((req: { path: string; owner: string; group: string }, c) =>
        this.metrics.observe("setOwner", () => {
          this.checkWritable();
          return this.namespace.setOwner(req.path, req.owner, req.group, this.checked(this.callerOf(c)));
        }),
      ),
      ReportBadBlocks: unary((req: ReportBadBlocksRequestOutput) =>
        this.metrics.observe("reportBadBlocks", () => this.reportBadBlocks(req)),
      ),
      Fsck: unary((req: { path: string }) => this.fsck(req.path || "/")),
      GetDatanodes: unary(() => ({ datanodes: this.datanodeReports() })),
      GetSafeMode: unary(() => this.safeModeStatus()),
      GetDelegationToken: unary((req: { lifetimeMs: number }, c) => {
        if (!this.delegation) return { token: "", owner: "", expiresMs: 0 };
        const owner = gate.principal(c).name;
        const issued = this.delegation.issue(owner, this.clock.nowMs(), req.lifetimeMs);
        this.log.info("delegation token issued", { owner, expiresMs: issued.expiresMs });
        return { token: issued.token, owner, expiresMs: issued.expiresMs };
      }),
      // On an insecure namenode the web UI is open to all: there is nothing to log in to.
      GetWebToken: unary((req: { lifetimeMs: number }, c) => {
        const url = this.httpUrl ?? "";
        if (!this.webTokens) return { token: "", owner: "", role: "", expiresMs: 0, url };
        const issued = this.webTokens.issue(gate.principal(c), req.lifetimeMs, url);
        this.log.info("web token issued", { owner: issued.owner, role: issued.role, expiresMs: issued.expiresMs });
        return issued;
      }),
    });
    this.server.addService(proto.NamenodeAdmin.service, {
      Decommission: unary((req: DecommissionRequestOutput, c) => {
        this.requireAdmin(c, "decommission datanodes");
        return this.decommission(req.datanodeIds, req.deadlineMs);
      }),
      Recommission: unary((req: { datanodeIds: string[] }, c) => {
        this.requireAdmin(c, "recommission datanodes");
        return this.recommission(req.datanodeIds);
      }),
      GetDecommissionStatus: unary((req: { datanodeIds: string[] }, c) => {
        this.requireAdmin(c, "read the decommission status");
        return this.adminReport(
          req.datanodeIds.length > 0 ? this.knownDatanodes(req.datanodeIds) : this.allDatanodeIds(),
        );
      }),
    });
    this.boundPort = await bindServer(this.server, this.options.host, this.options.port, gate.credentials());
    const web = new WebServer({
      host: this.options.httpHost,
      port: this.options.httpPort,
      advertiseHost: this.options.advertiseHost,
      tls: this.options.tls,
      ...(this.webTokens ? { tokens: this.webTokens.verify } : {}),
      metrics: this.registry,
      title: "Harvest namenode",
      log: this.log,
    });
    const source = this.webSource();
    registerNameNodeApi(web, source);
    registerNameNodePages(web, source);
    await startDaemonWeb(web, "namenode", () => shutdownServer(this.server, 0));
    this.web = web;
    this.livenessTimer = setInterval(() => this.checkLiveness(), this.options.monitorIntervalMs);
    this.replicationTimer = setInterval(() => this.replicationTick(), this.options.replicationIntervalMs);
    if (this.diversity) {
      this.tenantAdmin = makeClient(proto.TenantAdmin, this.options.rmAddress, this.options.tls);
      void this.refreshTenants();
      this.tenantTimer = setInterval(() => void this.refreshTenants(), this.options.tenantRefreshMs);
    }
    this.lifecycle.started();
    const counts = this.namespace.counts();
    this.log.info("namenode serving", {
      address: this.address,
      httpUrl: this.httpUrl,
      placement: this.placement.name,
      ...counts,
      safeMode: this.safeModeOn,
    });
  }

  /** Stops serving and closes the store; idempotent. */
  async stop(): Promise<void> {
    const was = this.lifecycle.beginStop();
    if (was === undefined) return;
    const wasRunning = was !== "new";
    if (this.livenessTimer) clearInterval(this.livenessTimer);
    if (this.replicationTimer) clearInterval(this.replicationTimer);
    if (this.tenantTimer) clearInterval(this.tenantTimer);
    this.tenantAdmin?.close();
    for (const d of this.datanodes.values()) d.stream?.end();
    await shutdownServer(this.server, 1_000);
    await this.web?.stop();
    if (wasRunning) {
      await this.namespace.drain();
      await this.adminWrites;
      await this.store.close().catch(() => undefined);
    }
    this.lifecycle.stopped();
  }

  // ---------------------------------------------------------------------------------------------- client protocol

  /**
   * Who is calling: the identity of the TLS peer certificate when there is one (the `admin` role is the superuser),
   * and then any claimed user is ignored. Only on a plaintext connection is a claim trusted, as in HDFS's simple
   * authentication: the `harvest-user` metadata, else `claimedUser` (the owner Create and Mkdirs carry); the claimed
   * name equal to the `superuser` option is the superuser. A plaintext call that claims no one is "nobody".
   */
  private callerOf(c: CallContext, claimedUser = ""): Caller {
    if (this.gate.secure) return this.callerOfPrincipal(this.gate.principal(c));
    const fromMetadata = c.metadata.get(CLAIMED_USER_METADATA)[0];
    const claimed = (typeof fromMetadata === "string" ? fromMetadata : "") || claimedUser || ANONYMOUS_USER;
    if (!isValidIdentityName(claimed))
      throw new HarvestError("INVALID_ARGUMENT", `bad user name ${JSON.stringify(claimed)}`, {
        details: { field: "user" },
      });
    return { user: claimed, groups: this.groupsOf(claimed), superuser: claimed === this.options.superuser };
  }

  /** An authenticated caller: the certificate's (or token's) name; the `admin` role is the superuser. */
  private callerOfPrincipal(who: Principal): Caller {
    return { user: who.name, groups: this.groupsOf(who.name), superuser: who.role === "admin" };
  }

  /** The caller the namespace checks, or undefined when permissions are off (`permissions: false`). */
  private checked(caller: Caller): Caller | undefined {
    return this.options.permissions ? caller : undefined;
  }

  private groupsOf(user: string): string[] {
    return [user, ...(this.options.userGroups[user] ?? [])];
  }

  private checkWritable(): void {
    if (!this.safeModeOn) return;
    const { total, reported } = this.blocks.reportedCounts();
    throw new HarvestError(
      "NAMENODE_SAFE_MODE",
      `the namenode is in safe mode: ${reported} of ${total} blocks reported, ` +
        `${Math.ceil(total * this.options.safeModeThreshold)} needed (threshold ${this.options.safeModeThreshold}); ` +
        "retry once the datanodes have reported",
      { details: { blocksReported: String(reported), blocksTotal: String(total) } },
    );
  }

  /** ClientNamenode.Create, on its own or on a NamespaceCalls stream. */
  private createFile(req: CreateRequestOutput, c: CallContext): Promise<FileStatusOutput> {
    return this.metrics.observe("create", () => {
      this.checkWritable();
      const caller = this.callerOf(c, req.owner);
      return this.namespace.create({ ...req, owner: caller.user, blockSizeBytes: req.blockSize }, this.checked(caller));
    });
  }

  /** ClientNamenode.AddBlock, on its own or on a NamespaceCalls stream. */
  private addBlockCall(req: AddBlockRequestOutput): Promise<LocatedBlock> {
    return this.metrics.observe("addBlock", () => this.addBlock(req));
  }

  /** ClientNamenode.Complete, on its own or on a NamespaceCalls stream. */
  private completeFile(req: CompleteRequestOutput): Promise<FileStatusOutput> {
    return this.metrics.observe("complete", () => {
      this.checkWritable();
      return this.namespace.complete(req.path, req.clientName, req.last);
    });
  }

  /**
   * ClientNamenode.NamespaceCalls: each message is one Create, AddBlock or Complete, run as its unary call runs (the
   * caller is the stream's), answered by id as soon as it is done; a failure is that call's coded error, and the
   * stream goes on. A client with more than MAX_STREAMED_CALLS unanswered is not read until some are answered.
   */
  private onNamespaceStream(stream: NamespaceStream): void {
    let inFlight = 0;
    let ended = false;
    const closeIfDone = (): void => {
      if (ended && inFlight === 0) stream.end();
    };
    stream.on("data", (msg: NamespaceCallOutput) => {
      inFlight++;
      if (inFlight >= MAX_STREAMED_CALLS) stream.pause();
      const why = undecodable(msg);
      Promise.resolve()
        .then((): Promise<NamespaceResult> => {
          if (why !== undefined)
            throw new HarvestError("INVALID_ARGUMENT", `the request's bytes are not a valid message: ${why}`);
          if (msg.create) return this.createFile(msg.create, stream).then((r) => ({ id: msg.id, create: r }));
          if (msg.addBlock) return this.addBlockCall(msg.addBlock).then((r) => ({ id: msg.id, addBlock: r }));
          if (msg.complete) return this.completeFile(msg.complete).then((r) => ({ id: msg.id, complete: r }));
          throw new HarvestError("INVALID_ARGUMENT", "a NamespaceCall names no call (create, addBlock or complete)");
        })
        .catch((err: unknown) => ({ id: msg.id, error: callErrorOf(err) }))
        .then((result) => {
          inFlight--;
          if (stream.isPaused() && inFlight < MAX_STREAMED_CALLS) stream.resume();
          if (!stream.cancelled && !stream.destroyed) stream.write(result);
          closeIfDone();
        })
        .catch(() => undefined);
    });
    stream.on("end", () => {
      ended = true;
      closeIfDone();
    });
    stream.on("error", () => undefined);
  }

  private async addBlock(req: AddBlockRequestOutput): Promise<LocatedBlock> {
    this.checkWritable();
    const excluded = new Set(req.excludedDatanodes);
    const { block, offset, targets } = await this.namespace.addBlock(
      { path: req.path, clientName: req.clientName, previous: req.previous },
      (file) => {
        // A datanode out of service takes no new replica; a stale one only when fresh ones are too few.
        const live = this.liveViews().filter((d) => this.monitor.adminState(d.datanodeId) === "NORMAL");
        const request = {
          writerDatanodeId: file.inode.writerDatanodeId || undefined,
          blockSizeBytes: file.inode.blockSizeBytes,
          rng: this.rng,
        };
        const chosen = this.placement.chooseTargets({
          ...request,
          replication: file.inode.replication,
          excluded,
          datanodes: live.filter((d) => !d.stale),
        });
        if (chosen.length < file.inode.replication && live.some((d) => d.stale))
          chosen.push(
            ...this.placement.chooseTargets({
              ...request,
              replication: file.inode.replication - chosen.length,
              excluded: new Set([...excluded, ...chosen.map((d) => d.datanodeId)]),
              existing: chosen.map((d) => d.datanodeId),
              datanodes: live,
            }),
          );
        if (chosen.length === 0)
          throw new HarvestError(
            "NAMENODE_NOT_ENOUGH_DATANODES",
            `no datanode can take a block of ${file.path}: ${live.length} live in service, ${excluded.size} ` +
              "excluded by the client, the rest busy or without room",
            { details: { live: String(live.length) } },
          );
        return chosen;
      },
      (chosen) => chosen.map((d) => d.datanodeId),
    );
    return {
      block,
      offset,
      locations: targets.map((t) => this.info(t.datanodeId)),
      blockToken: this.blockKeys?.issue(block.blockId, "WRITE", req.clientName) ?? "",
    };
  }

  /**
   * The blocks of a file overlapping `offset`..`offset + length` (`length` 0: to the end; the block being written
   * counts once the range reaches it), each with its good replicas in read order: GetBlockLocations, which adds block
   * tokens, and the REST API, which shows none. READ on the file.
   */
  private locateBlocks(path: string, offset: number, length: number, caller: Caller | undefined): FileBlockLocations {
    return this.metrics.observe("getBlockLocations", () => {
      if (!(offset >= 0) || !(length >= 0))
        throw new HarvestError("INVALID_ARGUMENT", "offset and length must be >= 0", { details: { field: "offset" } });
      const file = this.namespace.file(path, caller);
      const end = length > 0 ? offset + length : Infinity;
      const blocks: FileBlockLocations["blocks"] = [];
      for (const b of file.blocks) {
        const overlaps =
          b.offset < end && (b.offset + b.block.numBytes > offset || (!b.committed && b.offset >= offset));
        if (overlaps) blocks.push({ block: b.block, offset: b.offset, locations: this.readOrder(b.block.blockId) });
      }
      return { fileLength: file.length, blocks, complete: file.inode.complete };
    });
  }

  /** A directory's entries, or a file's own status (List; the REST API's LISTSTATUS). */
  private list(path: string, caller: Caller | undefined): FileStatusOutput[] {
    return this.metrics.observe("listing", () => this.namespace.list(path, caller));
  }

  /** A file's or directory's status (Stat; the REST API's GETFILESTATUS). */
  private stat(path: string, caller: Caller | undefined): FileStatusOutput {
    return this.metrics.observe("getFileInfo", () => this.namespace.stat(path, caller));
  }

  /**
   * Good replicas on live datanodes: those whose primary is not busy first (a busy one refuses reads), and within each
   * group the in-service ones, then draining, then decommissioned ones (HDFS sorts those last too: they are leaving).
   */
  private readOrder(blockId: number): DatanodeInfoOutput[] {
    const groups: DatanodeEntry[][] = Array.from({ length: 6 }, () => []);
    for (const r of this.blocks.liveReplicas(blockId)) {
      const d = this.datanodes.get(r.datanodeId);
      // A stale datanode may be dead: read from it only after the others, as from a busy one.
      if (d?.state === "LIVE")
        groups[(d.primaryBusy || this.isStale(d) ? 3 : 0) + READ_RANK[this.monitor.adminState(d.datanodeId)]]!.push(d);
    }
    const policy = this.options.randomizeReadOrder ? "request" : "block";
    return orderReplicas(groups, blockId, policy, (d) => d.datanodeId, this.options.seed, this.rng).map((d) =>
      this.info(d.datanodeId),
    );
  }

  private reportBadBlocks(req: ReportBadBlocksRequestOutput): Record<string, never> {
    for (const bad of req.blocks) {
      if (!bad.block)
        throw new HarvestError("INVALID_ARGUMENT", "a bad block needs its block", { details: { field: "block" } });
      if (this.blocks.markCorrupt(bad.datanodeId, bad.block.blockId, bad.reason))
        this.log.warn("replica reported corrupt", {
          blockId: bad.block.blockId,
          datanodeId: bad.datanodeId,
          reason: bad.reason,
        });
    }
    return {};
  }

  /**
   * Walks a subtree. `missing`: committed blocks without a good replica on a live datanode (they make it unhealthy);
   * `underReplicated`: fewer good replicas on live in-service datanodes than expected (replicas on draining or
   * decommissioned datanodes are counted apart: a block fully replicated without them is healthy); `corrupt`: blocks
   * with a corrupt replica, listing its holders.
   */
  private fsck(path: string): FsckReportOutput {
    return this.metrics.observe("fsck", () => this.fsckReport(path));
  }

  private fsckReport(path: string): FsckReportOutput {
    return fsckReport(path, this.healthSource());
  }

  /** What the health reports read (health.ts). */
  private healthSource(): HealthSource {
    return {
      namespace: this.namespace,
      blocks: this.blocks,
      monitor: this.monitor,
      datanodes: this.datanodes,
      liveViews: () => this.liveViews(),
      isStale: (d) => this.isStale(d),
      safeModeOn: this.safeModeOn,
    };
  }

  private safeModeStatus(): SafeModeStatusOutput {
    const { total, reported } = this.blocks.reportedCounts();
    return {
      on: this.safeModeOn,
      blocksTotal: total,
      blocksReported: reported,
      threshold: this.options.safeModeThreshold,
      reason: this.safeModeOn ? `${reported} of ${total} blocks reported` : "",
    };
  }

  // ---------------------------------------------------------------------------------------------- web and metrics

  /** What the web routes read: the functions the gRPC services call (web.ts). */
  private webSource(): NameNodeWebSource {
    return {
      summary: () => this.summary(),
      callerOf: (principal) => this.webCaller(principal),
      list: (path, caller) => this.list(path, caller),
      stat: (path, caller) => this.stat(path, caller),
      contentSummary: (path, caller) =>
        this.metrics.observe("getContentSummary", () => this.namespace.contentSummary(path, caller)),
      blockLocations: (path, offset, length, caller) => this.locateBlocks(path, offset, length, caller),
      fsck: (path) => this.fsck(path),
      datanodes: () => this.datanodeReports(),
      placement: () => this.placementReport(),
    };
  }

  /**
   * The DFS caller of a web request: its certificate's or web token's identity, as over gRPC; on an insecure namenode,
   * where the web server authenticates nobody, the superuser (as the gRPC gate's principal is an admin then).
   */
  private webCaller(principal: Principal | undefined): Caller | undefined {
    const su = this.options.superuser;
    return this.checked(
      principal ? this.callerOfPrincipal(principal) : { user: su, groups: this.groupsOf(su), superuser: true },
    );
  }

  /** The namenode at a glance: `/ws/v1/nn/info`, the overview page and the metrics' gauges. */
  private summary(): NameNodeSummary {
    return {
      address: this.address,
      httpUrl: this.httpUrl ?? "",
      state: this.lifecycle.state,
      safeMode: this.safeModeStatus(),
      placementPolicy: this.placement.name,
      ...this.namespace.counts(),
      blockHealth: this.blockHealth(),
      datanodes: this.datanodeCounts(),
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

  /** Every datanode the namenode has heard from since its start, by id (GetDatanodes; `/ws/v1/nn/datanodes`). */
  private datanodeReports(): DatanodeReportOutput[] {
    return [...this.datanodes.values()]
      .sort((a, b) => (a.datanodeId < b.datanodeId ? -1 : 1))
      .map((d) => this.datanodeReport(d));
  }

  /** Where the good replicas of committed blocks on live datanodes sit in the diversity grid. */
  private placementReport(): PlacementReport {
    const live = new Set(this.liveViews().map((d) => d.datanodeId));
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

  // ---------------------------------------------------------------------------------------------- decommissioning

  /**
   * Admin RPCs: with TLS the gate already let only `admin` certificates through; on a plaintext namenode the claimed
   * user must be the superuser, as HDFS's dfsadmin requires (unless permissions are off).
   */
  private requireAdmin(c: grpc.ServerUnaryCall<unknown, unknown>, action: string): void {
    if (this.gate.secure || !this.options.permissions) return;
    const caller = this.callerOf(c);
    requireAccess(caller.superuser, { name: caller.user, role: "user", via: "claim" }, action);
  }

  /** The datanodes the namenode knows: registered since its start, or recorded (registered once, or out of service). */
  private allDatanodeIds(): string[] {
    const ids = new Set([...this.datanodes.keys(), ...this.datanodeRecords.keys(), ...this.monitor.outOfService()]);
    return [...ids].sort();
  }

  /** The requested ids, deduplicated and sorted; any unknown one fails the call before anything changes. */
  private knownDatanodes(ids: readonly string[]): string[] {
    if (ids.length === 0)
      throw new HarvestError("INVALID_ARGUMENT", "name at least one datanode", { details: { field: "datanodeIds" } });
    const unknown = ids.filter(
      (id) => !this.datanodes.has(id) && !this.datanodeRecords.has(id) && this.monitor.adminState(id) === "NORMAL",
    );
    if (unknown.length > 0)
      throw new HarvestError(
        "NAMENODE_DATANODE_NOT_FOUND",
        `unknown datanode${unknown.length > 1 ? "s" : ""} ${unknown.map((id) => JSON.stringify(id)).join(", ")}: ` +
          "the namenode knows only datanodes that have registered with it (see GetDatanodes)",
        { details: { datanodeId: unknown[0]!, unknown: unknown.join(",") } },
      );
    return [...new Set(ids)].sort();
  }

  private async decommission(datanodeIds: readonly string[], deadlineMs: number): Promise<DecommissionStatusResponse> {
    const ids = this.knownDatanodes(datanodeIds);
    if (!(Number.isSafeInteger(deadlineMs) && deadlineMs >= 0))
      throw new HarvestError("INVALID_ARGUMENT", "deadline_ms must be ms since the epoch, or 0 for none", {
        details: { field: "deadlineMs" },
      });
    const now = this.clock.nowMs();
    for (const id of ids) {
      const entry = this.datanodes.get(id);
      // A datanode that registered but has not reported yet holds blocks the namenode does not know of yet.
      const awaitReport = entry?.state === "LIVE" && !entry.blockReported;
      const started = this.monitor.decommission(id, this.blocks.blocksOn(id), { nowMs: now, deadlineMs, awaitReport });
      const status = this.monitor.decommissionStatus(id, now);
      this.log.info(started ? "decommission started" : "decommission asked again", {
        datanodeId: id,
        state: status?.state,
        deadlineMs: status?.deadlineMs,
        blocks: status?.blocks,
        blocksNeedingCopies: status?.blocksNeedingCopies,
      });
    }
    await Promise.all(ids.map((id) => this.persistAdminState(id)));
    return this.adminReport(ids);
  }

  private async recommission(datanodeIds: readonly string[]): Promise<DecommissionStatusResponse> {
    const ids = this.knownDatanodes(datanodeIds);
    for (const id of ids)
      if (this.monitor.recommission(id, this.blocks.blocksOn(id)))
        this.log.info("datanode back in service", { datanodeId: id });
    await Promise.all(ids.map((id) => this.persistAdminState(id)));
    return this.adminReport(ids);
  }

  /**
   * Writes a datanode's admin state as it is when the write runs (its record, or none when NORMAL), after every
   * earlier such write: LevelDB does not order concurrent writes, and the last one must hold the latest state.
   * Rejects (and logs) if the write failed.
   */
  private persistAdminState(datanodeId: string): Promise<void> {
    const write = this.adminWrites.then(async () => {
      const record = this.monitor.decommissionRecord(datanodeId);
      if (record) await this.store.putDecommission(record);
      else await this.store.deleteDecommission(datanodeId);
    });
    this.adminWrites = write.catch((err: unknown) =>
      this.log.error("could not persist a datanode's admin state", { datanodeId, error: errorMessage(err) }),
    );
    return write;
  }

  private adminReport(ids: readonly string[]): DecommissionStatusResponse {
    const now = this.clock.nowMs();
    return { datanodes: ids.map((id) => this.adminStatus(id, now)) };
  }

  private adminStatus(datanodeId: string, nowMs: number): DatanodeAdminStatus {
    const liveness = this.datanodes.get(datanodeId)?.state ?? "UNKNOWN";
    const s = this.monitor.decommissionStatus(datanodeId, nowMs);
    if (!s) return { datanodeId, state: "NORMAL", blocks: this.blocks.replicaCount(datanodeId), liveness };
    let message = "";
    if (s.deadlinePassed) message = `deadline passed with ${s.blocksNeedingCopies} blocks not yet copied`;
    else if (s.awaitingReport) message = "waiting for the datanode's first block report";
    else if (s.state === "DECOMMISSIONED" && s.blocksNeedingCopies > 0)
      message = `decommissioned, but ${s.blocksNeedingCopies} of its blocks lack replicas elsewhere again`;
    return {
      datanodeId,
      state: s.state,
      deadlineMs: s.deadlineMs,
      blocks: s.blocks,
      blocksNeedingCopies: s.blocksNeedingCopies,
      startedMs: s.startedMs,
      finishedMs: s.finishedMs,
      deadlinePassed: s.deadlinePassed,
      liveness,
      awaitingBlockReport: s.awaitingReport,
      message,
    };
  }

  // ---------------------------------------------------------------------------------------------- datanodes

  private onDatanodeStream(stream: DatanodeStream): void {
    let datanodeId: string | undefined;
    // Messages of one stream are handled in order (a registration writes the store before it is answered).
    serveWorkerStream(stream, {
      what: "datanode",
      log: this.log,
      context: () => ({ datanodeId }),
      isRunning: () => this.lifecycle.running,
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
    const now = this.clock.nowMs();
    const existing = this.datanodes.get(id);
    if (existing?.stream && existing.stream !== stream) existing.stream.end();
    const record = this.datanodeRecords.get(id);
    const entry: DatanodeEntry = existing ?? {
      datanodeId: id,
      address: reg.address,
      transferAddress: reg.transferAddress,
      rack: "",
      storageId: record?.storageId ?? reg.storageId,
      capacityBytes: 0,
      usedBytes: 0,
      remainingBytes: 0,
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
      rack: reg.rack || "/default-rack",
      capacityBytes: reg.capacityBytes,
      usedBytes: reg.usedBytes,
      remainingBytes: Math.max(0, reg.capacityBytes - reg.usedBytes),
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
    entry.primaryBusy = hb.primaryBusy;
    entry.activeTransfers = hb.activeTransfers;
    const replicate = entry.replicate;
    entry.replicate = [];
    const deletes = entry.deletes.splice(0, this.options.maxDeletesPerHeartbeat);
    entry.stream?.write({ commands: { seq: hb.seq, replicate, delete: deletes, reregister: false } });
  }

  private onBlockReport(entry: DatanodeEntry, report: BlockReportOutput): void {
    const unknown = this.blocks.fullReport(entry.datanodeId, report.blocks);
    entry.deletes.push(...unknown);
    entry.blockReported = true;
    this.monitor.datanodeReported(entry.datanodeId);
    this.log.info("block report", {
      datanodeId: entry.datanodeId,
      blocks: report.blocks.length,
      unknown: unknown.length,
    });
    this.checkSafeMode();
  }

  private onBlocksReceived(entry: DatanodeEntry, msg: BlocksReceivedOutput): void {
    for (const b of msg.received) {
      const unknown = this.blocks.received(entry.datanodeId, b);
      if (unknown) entry.deletes.push(unknown);
    }
    for (const b of msg.deleted) this.blocks.removeReplica(entry.datanodeId, b.blockId);
    if (this.safeModeOn) this.checkSafeMode();
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
    this.recoveries.onAnswer(entry.datanodeId, answer);
    // Answers move the recovery on at once rather than at the next tick.
    this.recoveryTick();
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
    this.datanodeRecords.set(entry.datanodeId, record);
  }

  /** The block keys as the datanodes' stream carries them (none without block tokens). */
  private wireBlockKeys(): { keyId: number; secret: Buffer; expiresMs: number }[] {
    return this.blockKeys?.keys().map((k) => ({ keyId: k.keyId, secret: k.secret, expiresMs: k.expiresMs })) ?? [];
  }

  private checkLiveness(): void {
    // A rolled key reaches every live datanode at once, before any token it signs can.
    if (this.blockKeys?.maybeRoll()) {
      const blockKeys = this.wireBlockKeys();
      for (const d of this.datanodes.values())
        if (d.state === "LIVE")
          d.stream?.write({ commands: { seq: 0, replicate: [], delete: [], reregister: false, blockKeys } });
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
    this.checkSafeMode();
    if (!this.safeModeOn) {
      this.recoverLeases();
      this.recoveryTick();
    }
  }

  private checkSafeMode(): void {
    if (!this.safeModeOn) return;
    const { total, reported } = this.blocks.reportedCounts();
    if (total > 0 && reported / total < this.options.safeModeThreshold) {
      this.safeModeReachedMs = undefined;
      return;
    }
    const now = this.clock.nowMs();
    this.safeModeReachedMs ??= now;
    if (now - this.safeModeReachedMs < this.options.safeModeExtensionMs) return;
    this.safeModeOn = false;
    this.log.info("leaving safe mode", { blocksTotal: total, blocksReported: reported });
  }

  private recoverLeases(): void {
    if (this.recovering) return;
    const expired = this.namespace.expiredLeases(this.options.leaseTimeoutMs);
    if (expired.length === 0) return;
    this.recovering = true;
    const work = async (): Promise<void> => {
      for (const path of expired) {
        const begun = await this.namespace.beginRecovery(path, this.options.leaseTimeoutMs);
        if (begun === "closed") this.log.warn("lease expired: file closed (no block was being written)", { path });
        else if (begun) {
          this.recoveries.start(path, begun.inodeId, begun.block, begun.pipeline, this.clock.nowMs());
          this.log.warn("lease expired: recovering the last block from its datanodes", {
            path,
            blockId: begun.block.blockId,
            pipeline: begun.pipeline,
          });
        }
      }
      this.recoveryTick();
    };
    work()
      .catch((err: unknown) => this.log.error("lease recovery failed", { error: errorMessage(err) }))
      .finally(() => {
        this.recovering = false;
      });
  }

  /** Sends the block recoveries' commands and applies the recoveries that ended to the namespace. */
  private recoveryTick(): void {
    if (this.recoveries.size === 0 || !this.lifecycle.running) return;
    for (const r of [...this.recoveries.all()])
      if (!this.namespace.isRecovering(r.inodeId)) this.recoveries.forget(r.inodeId);
    const work = this.recoveries.tick(this.clock.nowMs(), (id) => {
      const d = this.datanodes.get(id);
      return d?.state === "LIVE" && d.stream !== undefined;
    });
    const send = (datanodeId: string, commands: Partial<NamenodeToDatanode["commands"]>): void => {
      this.datanodes.get(datanodeId)?.stream?.write({
        commands: { seq: 0, replicate: [], delete: [], reregister: false, ...commands },
      });
    };
    for (const a of work.asks) send(a.datanodeId, { recover: [{ block: a.block, recoveryId: a.recoveryId }] });
    for (const c of work.commits)
      send(c.datanodeId, { commitRecovery: [{ block: c.block, recoveryId: c.recoveryId, length: c.length }] });
    for (const r of work.restarted)
      this.log.warn("block recovery: no datanode holding the block answered in time; asking again", {
        path: r.path,
        blockId: r.block.blockId,
        pipeline: r.pipeline,
        attempt: r.attempts,
      });
    for (const { recovery, outcome } of work.finished)
      this.finishRecovery(recovery, outcome).catch((err: unknown) =>
        this.log.error("could not close a recovered file", { path: recovery.path, error: errorMessage(err) }),
      );
  }

  private async finishRecovery(r: BlockRecoveryRecord, outcome: RecoveryOutcome): Promise<void> {
    const reason =
      outcome.kind === "commit"
        ? outcome.reason
        : `lease expired; last block ${r.block.blockId} dropped: ${outcome.reason}`;
    const length = outcome.kind === "commit" ? outcome.length : 0;
    if (!(await this.namespace.finishRecovery(r.inodeId, r.block.blockId, length, reason))) {
      this.log.info("block recovery ended: the file was deleted or replaced meanwhile", { path: r.path });
      return;
    }
    if (outcome.kind === "drop")
      this.queueDeletions(outcome.holders.map((datanodeId) => ({ datanodeId, block: r.block })));
    this.log.warn("lease recovered: file closed", { path: r.path, blockId: r.block.blockId, length, reason });
  }

  private replicationTick(): void {
    if (this.safeModeOn || !this.lifecycle.running) return;
    // The monitor keeps the under-replicated blocks itself, fed by the block map's events: a tick looks at those only.
    const work = this.monitor.tick(this.liveViews(), this.clock.nowMs());
    const arrived = this.monitor.copiesArrived();
    this.metrics.replicationCompleted.inc(arrived - this.copiesArrivedSeen);
    this.copiesArrivedSeen = arrived;
    this.metrics.replicationScheduled.inc(work.replicate.length);
    this.metrics.replicationTimedOut.inc(work.timedOut);
    for (const task of work.replicate) {
      const source = this.datanodes.get(task.sourceId);
      source?.replicate.push({
        block: task.block,
        targets: task.targets.map((t) => this.info(t.datanodeId)),
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
      this.persistAdminState(id).catch(() => undefined);
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

  private queueDeletions(deletions: readonly ReplicaDeletion[]): void {
    for (const d of deletions) {
      const entry = this.datanodes.get(d.datanodeId);
      if (entry?.state === "LIVE") entry.deletes.push(d.block);
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

  private onPlacementDegraded(reason: string): void {
    const now = this.clock.nowMs();
    const last = this.degradeLogged.get(reason);
    if (last !== undefined && now - last < 60_000) return;
    this.degradeLogged.set(reason, now);
    if (this.degradeLogged.size > 1_000) this.degradeLogged.clear();
    this.log.warn("replica placement relaxed a diversity rule", { reason });
  }

  private liveViews(): DatanodeView[] {
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
  private isStale(d: DatanodeEntry): boolean {
    return d.state === "LIVE" && this.clock.nowMs() - d.lastHeartbeatMs > this.options.staleAfterMs;
  }

  private info(datanodeId: string): DatanodeInfoOutput {
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
      blocks: this.blocks.replicaCount(d.datanodeId),
      lastHeartbeatMs: d.lastHeartbeatMs,
      primaryBusy: d.primaryBusy,
      reimages: d.reimages,
      adminState: this.monitor.adminState(d.datanodeId),
      stale: this.isStale(d),
    };
  }
}
