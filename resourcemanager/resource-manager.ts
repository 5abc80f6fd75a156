/**
 * The resource manager daemon: tracks node managers over one heartbeat stream each, runs the scheduler on every
 * heartbeat, launches each job's job manager in a container (with a limited number of attempts), serves the
 * application-master and client protocols, and keeps applications and job history in LevelDB.
 */
import type * as grpc from "@grpc/grpc-js";
import { mkdir, open } from "node:fs/promises";
import { ensureDirMode } from "../common/atomic-file.js";
import { join } from "node:path";
import { systemClock } from "../common/clock.js";
import type { Clock } from "../common/clock.js";
import { amTokenVerifier, ANY_CERTIFICATE, Gate, requireAccess } from "../common/auth.js";
import type { CallContext } from "../common/auth.js";
import { signAmToken, signContainer } from "../common/container-token.js";
import { INSECURE_WARNING } from "../common/options.js";
import { maxConcurrency, parseDag, topologicalOrder } from "../common/dag-spec.js";
import type { DagSpec } from "../common/dag-spec.js";
import { AdmissionControl, readAdmissionThresholds } from "./admission-control.js";
import { JobDemandModel } from "./admission.js";
import type { AdmittedJob } from "./admission.js";
import { errorMessage, HarvestError } from "../common/errors.js";
import { serveWorkerStream } from "../common/worker-stream.js";
import { formatAddress } from "../common/net-address.js";
import { bindServer, call, createServer, loadHarvestProto, makeClient, shutdownServer, unary } from "../common/grpc.js";
import { formatAppId, formatContainerId, parseAppId } from "../common/ids.js";
import { Logger } from "../common/log.js";
import { packageRoot } from "../common/paths.js";
import { fits, fromWire } from "../common/resource.js";
import type { Resources } from "../common/resource.js";
import { resolveResourceManagerOptions } from "./options.js";
import type { ResourceManagerOptions } from "./options.js";
import { AM_PRIORITY, Scheduler, StockSchedulerPolicy } from "./scheduler.js";
import type { Allocation, NodeView, SchedulerPolicy } from "./scheduler.js";
import { HistorySchedulerPolicy, jobTypeOf, resolveClassWeights } from "./class-selection.js";
import { SeededRng } from "../common/rng.js";
import { MAX_DURATIONS_PER_VERTEX, RmStateStore } from "./state-store.js";
import { DrainTracker } from "./drain.js";
import { LifetimeModel } from "./lifetime.js";
import type { ContainerKey } from "./lifetime.js";
import { LifetimeNodeChoice } from "./node-choice.js";
import type { DrainContainer, DrainStatus } from "./drain.js";
import { DEFAULT_POWER_PROFILE_ID, resolvePowerProfile } from "../common/power-profiles.js";
import type { PowerProfile } from "../common/power-profiles.js";
import { normalizeDomainPath, PowerDomains } from "./power-domains.js";
import { powerAdminHandlers } from "./power-admin.js";
import { PowerAwarePolicy, primaryHistoryOf, primaryOutlook } from "./power-placement.js";
import type { PowerNode } from "./power-placement.js";
import { tenantAdminHandlers } from "./tenant-admin.js";
import { TenantRegistry } from "./tenant-registry.js";
import type { ClassSnapshot } from "./tenant-registry.js";
import { HistoryPlacement, LiveClassViews, liveNodeOf, liveUtilization } from "./history-placement.js";
import type { JobPlacement, LiveNode } from "./history-placement.js";
import type { AppRecord, AppState, HistoryRecord, StoredDrain } from "./state-store.js";
import type { ContainerOutput } from "../proto/generated/harvest/v1/Container.js";
import type { ContainerManagerClient } from "../proto/generated/harvest/v1/ContainerManager.js";
import type { ContainerStatus } from "../proto/generated/harvest/v1/ContainerStatus.js";
import type { ExitCauseOutput } from "../proto/generated/harvest/v1/ExitCause.js";
import type { JobProgress, JobProgressOutput } from "../proto/generated/harvest/v1/JobProgress.js";
import type { ApplicationReport } from "../proto/generated/harvest/v1/ApplicationReport.js";
import type { NodeReport } from "../proto/generated/harvest/v1/NodeReport.js";
import type { NodeToRmOutput } from "../proto/generated/harvest/v1/NodeToRm.js";
import type { RmToNode } from "../proto/generated/harvest/v1/RmToNode.js";
import type { NodeHeartbeatOutput } from "../proto/generated/harvest/v1/NodeHeartbeat.js";
import type { RegisterNodeOutput } from "../proto/generated/harvest/v1/RegisterNode.js";
import type { ContainerRef } from "../proto/generated/harvest/v1/ContainerRef.js";
import type { NodeDrain } from "../proto/generated/harvest/v1/NodeDrain.js";

/** Kept per application for `harvest job logs` and status. */
const MAX_CONTAINER_REFS = 5_000;

/** Lifecycle of a daemon. */
export type DaemonState = "new" | "starting" | "running" | "stopping" | "stopped";

type NodeStream = grpc.ServerDuplexStream<NodeToRmOutput, RmToNode>;

interface NodeEntry {
  nodeId: string;
  nmAddress: string;
  rack: string;
  capacity: Resources;
  primaryUsage: Resources;
  primarySource: string;
  lastHeartbeatMs: number;
  state: "RUNNING" | "LOST";
  stream: NodeStream | undefined;
  /** Kills to send with the next heartbeat answer. */
  pendingKills: Map<string, ExitCauseOutput>;
}

interface AppRuntime {
  record: AppRecord;
  amContainerId: string | undefined;
  registered: boolean;
  lastAmContactMs: number;
  /** Granted containers not yet handed to the job manager. */
  delivery: ContainerOutput[];
  /** Completed containers not yet reported to the job manager. */
  completed: ContainerStatus[];
  progress: JobProgress | undefined;
  containers: Map<string, ContainerRef>;
  taskCounts: ContainerCounts;
  amCounts: ContainerCounts;
  /** Algorithm 1's decision, kept for reports once the job ended. */
  placement?: JobPlacement | undefined;
  /** Vertex names by container priority (the job manager asks at a vertex's topological position), parsed once. */
  vertices?: string[];
  /** Run times of the tasks that succeeded, by vertex (for the job history and the lifetime model). */
  taskDurations: Map<string, number[]>;
  /** Core-ms its ended containers held (admission's mean demand). */
  heldCoreMs: number;
}

/** How an application's containers ended, counted over all its attempts. */
interface ContainerCounts {
  allocated: number;
  succeeded: number;
  failed: number;
  preempted: number;
  lost: number;
  killed: number;
}

function zeroCounts(): ContainerCounts {
  return { allocated: 0, succeeded: 0, failed: 0, preempted: 0, lost: 0, killed: 0 };
}

/** The resource manager daemon. */
export class ResourceManager {
  readonly options: ResourceManagerOptions;
  private stateValue: DaemonState = "new";
  private readonly log: Logger;
  private readonly clock: Clock;
  private readonly server = createServer();
  /** Who may call what (common/auth.ts); TLS when `tls` is set. */
  private readonly gate: Gate;
  private readonly store: RmStateStore;
  private readonly tenants: TenantRegistry;
  /** Algorithm 1's per-job state; undefined under the stock policy. */
  private readonly history: HistoryPlacement | undefined;
  /** The classes as Algorithm 1 sees them: the last classification over the running nodes (history policy only). */
  private readonly classViews: LiveClassViews | undefined;
  private reclusterTimer: NodeJS.Timeout | undefined;
  private readonly scheduler: Scheduler;
  /** Servers being drained before a planned reimage or maintenance (`harvest admin drain`). */
  private readonly drains: DrainTracker;
  /** Jobs waiting to be admitted (seeds/003); `admission: none` admits every job at once. */
  private readonly admission: AdmissionControl;
  /** NILAS or LAVA node choice (seeds/002); undefined under the stock node choice. */
  private readonly nodeChoice: LifetimeNodeChoice | undefined;
  /** What each recurring job held on average in its past runs (admission counts it). */
  private readonly demand = new JobDemandModel();
  /** How long tasks and jobs live, learned from the job history (lifetime.ts): drains and node choice ask it. */
  private readonly lifetimes: LifetimeModel;
  /** Power domains: draws per domain, alerts, node budgets. */
  private readonly power: PowerDomains;
  /** The power-aware node choice; undefined under stock placement. */
  private readonly powerPolicy: PowerAwarePolicy | undefined;
  /** Power profiles by id, resolved once (a spec:<n> id reads the SPECpower file). */
  private readonly profiles = new Map<string, PowerProfile>();
  private readonly nodes = new Map<string, NodeEntry>();
  private readonly apps = new Map<string, AppRuntime>();
  /** Granted containers not yet reported by their node manager, with the time granted. */
  private readonly launchPending = new Map<string, number>();
  private readonly nmClients = new Map<string, ContainerManagerClient>();
  private monitorTimer: NodeJS.Timeout | undefined;
  private boundPort = 0;
  private epoch = 0;
  private clusterTs = 0;
  private containerSeq = 0;

  constructor(
    options: Partial<ResourceManagerOptions> & { dataDir: string },
    deps: { clock?: Clock; logger?: Logger } = {},
  ) {
    this.options = resolveResourceManagerOptions(options);
    this.gate = new Gate(this.options.tls, { "am-token": amTokenVerifier(this.options.secret) });
    this.clock = deps.clock ?? systemClock;
    this.log = deps.logger ?? new Logger("rm");
    this.store = new RmStateStore(join(this.options.dataDir, "rm-state"));
    this.tenants = new TenantRegistry(
      join(this.options.dataDir, "rm-tenants"),
      this.options.tenants,
      this.clock,
      this.log.child("tenants"),
    );
    this.lifetimes = new LifetimeModel(this.options.lifetimes);
    let policy: SchedulerPolicy = new StockSchedulerPolicy();
    if (this.options.schedulerPolicy === "history") {
      const historyPolicy = new HistorySchedulerPolicy();
      policy = historyPolicy;
      this.classViews = new LiveClassViews(() => this.liveNodes());
      this.history = new HistoryPlacement(
        historyPolicy,
        {
          weights: resolveClassWeights(this.options.classWeights),
          classWaitMs: this.options.classWaitMs,
          ...(this.options.classHeadroom === "cantelli"
            ? { cantelliThreshold: this.options.classHeadroomThreshold }
            : {}),
        },
        this.classViews,
        this.clock,
        new SeededRng(this.options.seed),
        this.log.child("placement"),
      );
    }
    this.drains = new DrainTracker(this.options.drain);
    this.admission = new AdmissionControl(
      this.options.admission,
      {
        ...(this.options.admissionThresholdsFile ? readAdmissionThresholds(this.options.admissionThresholdsFile) : {}),
        ...this.options.admissionOptions,
      },
      {
        servers: () => this.admissionServers(),
        admitted: (now) => this.admittedJobs(now),
        lifetimeMs: (name) => this.lifetimes.jobRemainingMs(name, 0),
        history: (server, from, to) => this.tenants.serverSeries(server, from, to),
        periodic: (server) => this.isPeriodic(server),
        nowMs: () => this.clock.nowMs(),
      },
      this.log.child("admission"),
    );
    this.power = new PowerDomains(
      { domains: this.options.powerDomains, nodes: this.options.powerNodeDomains },
      {
        alertFraction: this.options.powerAlertFraction,
        uncapFraction: this.options.powerUncapFraction,
        staleAfterMs: this.options.powerStaleHeartbeats * this.options.heartbeatIntervalMs,
      },
      this.clock,
    );
    if (this.options.nodeChoice !== "stock") {
      // Inside the power-aware gate: lifetimes choose among the servers the job may use, power has the last word.
      this.nodeChoice = new LifetimeNodeChoice(
        policy,
        {
          nodes: () => this.schedulableNodeViews(),
          keyOf: (app, priority) => this.containerKey(app.appId, priority),
          node: (id) => this.scheduler.nodeView(id),
        },
        this.lifetimes,
        { ...this.options.nodeChoiceOptions, kind: this.options.nodeChoice },
        this.clock,
      );
      policy = this.nodeChoice;
    }
    if (this.options.powerPlacement === "power-aware") {
      this.powerPolicy = new PowerAwarePolicy(
        policy,
        { nodes: () => this.scheduler.nodeViews(), power: (view) => this.powerNode(view) },
        { alpha: this.options.powerAlpha, waitMs: this.options.powerPlacementWaitMs },
        this.clock,
      );
      policy = this.powerPolicy;
    }
    this.scheduler = new Scheduler(
      policy,
      {
        reserveFraction: this.options.reserveFraction,
        maxAllocationsPerHeartbeat: 0,
        maxAmShare: this.options.maxAmShare,
      },
      (appId) => this.newContainerId(appId),
    );
    const choice = this.nodeChoice;
    if (choice)
      this.scheduler.setListener({
        granted: (a) =>
          choice.onGranted({
            containerId: a.containerId,
            nodeId: a.nodeId,
            key: this.containerKey(a.appId, a.priority),
            startMs: this.clock.nowMs(),
            resource: a.resource,
          }),
        released: (a) => choice.onReleased(a.containerId),
      });
  }

  /** What the lifetime model is asked about a container of `appId` at `priority`. */
  private containerKey(appId: string, priority: number): ContainerKey {
    const app = this.apps.get(appId);
    const job = app?.record.name ?? "";
    if (priority === AM_PRIORITY) return { job, vertex: "", isJobManager: true };
    return { job, vertex: (app && this.vertexOf(app, priority)) ?? "", isJobManager: false };
  }

  /** The nodes that may receive containers (a draining server does not). */
  private *schedulableNodeViews(): IterableIterator<NodeView> {
    for (const v of this.scheduler.nodeViews()) if (!this.drains.isDraining(v.nodeId)) yield v;
  }

  /** Current lifecycle state. */
  get state(): DaemonState {
    return this.stateValue;
  }

  /** host:port the daemon serves on (valid once started). */
  get address(): string {
    return formatAddress(this.options.advertiseHost, this.boundPort);
  }

  /** Opens the store, recovers applications, binds the server; resolves once serving. */
  async start(): Promise<void> {
    if (this.stateValue !== "new") throw new Error(`resource manager cannot start from state ${this.stateValue}`);
    this.stateValue = "starting";
    // Containers (other accounts) pass through the data and staging directories to their job's directory; the
    // state stores are the resource manager's alone.
    for (const [dir, mode] of [
      [this.options.dataDir, 0o711],
      [this.options.stagingDir, 0o711],
      [join(this.options.dataDir, "rm-state"), 0o700],
      [join(this.options.dataDir, "rm-tenants"), 0o700],
    ] as const)
      if (!ensureDirMode(dir, mode))
        this.log.warn("cannot set the mode of a directory", { dir, mode: mode.toString(8) });
    await this.store.open();
    await this.tenants.open();
    await this.recluster("startup");
    const storedPower = await this.store.powerDomains();
    // The tree set through the admin API survives restarts and wins over the configuration, which only seeds it.
    if (storedPower) {
      try {
        this.power.setConfig(storedPower, storedPower.updatedMs);
      } catch (err) {
        this.log.error("stored power domains are invalid; using the configured ones", { error: errorMessage(err) });
      }
    }
    this.epoch = this.clock.nowMs();
    this.clusterTs = await this.store.clusterTimestamp(this.epoch);
    for (const d of await this.store.drains()) this.drains.start(d.nodeId, d.startedMs, d.deadlineMs);
    await this.loadLifetimes();
    await this.recover();
    const proto = loadHarvestProto();
    const gate = this.gate;
    gate
      .allow(proto.ResourceTracker.service, { NodeChannel: ["daemon"] })
      .allow(proto.ApplicationMasterService.service, {
        RegisterApplicationMaster: ["am-token"],
        Allocate: ["am-token"],
        FinishApplicationMaster: ["am-token"],
      })
      .allow(proto.ApplicationClientService.service, {
        SubmitApplication: ["user", "admin"],
        GetApplication: ANY_CERTIFICATE,
        ListApplications: ANY_CERTIFICATE,
        KillApplication: ["user", "admin"],
        GetClusterNodes: ANY_CERTIFICATE,
        GetJobHistory: ANY_CERTIFICATE,
      })
      .allow(proto.TenantAdmin.service, {
        RegisterTenant: ["admin"],
        AssignServers: ["admin"],
        StreamSamples: ["admin"],
        ImportHistory: ["admin"],
        RecordReimage: ["admin"],
        // The namenode reads the classes for diversity-aware placement.
        ListTenants: ["admin", "daemon"],
        ListClasses: ["admin", "daemon"],
        Recluster: ["admin"],
      })
      .allow(proto.PowerAdmin.service, { ListDomains: ["admin"], SetBudget: ["admin"], SetDomains: ["admin"] })
      .allow(proto.NodeAdmin.service, { Drain: ["admin"], Undrain: ["admin"], GetDrainStatus: ["admin"] });
    this.server.addService(proto.ResourceTracker.service, { NodeChannel: (s: NodeStream) => this.onNodeStream(s) });
    // A job manager acts only on its own application and attempt: the AM token names them.
    const own = <R extends { appId: string; attempt: number }>(req: R, c: CallContext): R => {
      const who = gate.principal(c);
      if (gate.secure)
        requireAccess(
          who.appId === req.appId && this.apps.get(req.appId)?.record.attempt === req.attempt,
          who,
          `act for ${req.appId} attempt ${req.attempt}`,
        );
      return req;
    };
    this.server.addService(proto.ApplicationMasterService.service, {
      RegisterApplicationMaster: unary((req: { appId: string; attempt: number; maxConcurrency: number }, c) =>
        this.registerAm(own(req, c)),
      ),
      Allocate: unary((req: { appId: string; attempt: number }, c) => this.allocate(own(req, c) as never)),
      FinishApplicationMaster: unary((req: { appId: string; attempt: number }, c) =>
        this.finishAm(own(req, c) as never),
      ),
    });
    this.server.addService(proto.ApplicationClientService.service, {
      SubmitApplication: unary((req: { dagJson: string; user: string; dfsToken: string }, c) => {
        // With TLS the submitter is the certificate's name, whatever the request claims.
        const who = gate.principal(c, req.user);
        return this.submit(req.dagJson, who.name, req.dfsToken);
      }),
      GetApplication: unary((req: { appId: string }) => this.report(this.getApp(req.appId))),
      ListApplications: unary((req: { states: string[] }) => this.listApps(req.states)),
      KillApplication: unary((req: { appId: string }, c) => {
        const app = this.getApp(req.appId);
        const who = gate.principal(c);
        requireAccess(
          !gate.secure || who.role === "admin" || who.name === app.record.user,
          who,
          `kill ${req.appId} (submitted by ${app.record.user})`,
        );
        return this.killApp(req.appId, who.name);
      }),
      GetClusterNodes: unary(() => ({ nodes: [...this.nodes.values()].map((n) => this.nodeReport(n)) })),
      GetJobHistory: unary(async (req: { name: string; limit: number }) => ({
        entries: await this.store.history(req.name, req.limit),
      })),
    });
    this.server.addService(
      proto.TenantAdmin.service,
      tenantAdminHandlers({
        registry: this.tenants,
        nowMs: () => this.clock.nowMs(),
        liveUtilization: (servers) => liveUtilization(this.liveNodes(servers)),
        onReclustered: (snapshot) => this.onReclustered(snapshot),
      }),
    );
    this.server.addService(
      proto.PowerAdmin.service,
      powerAdminHandlers({
        domains: this.power,
        nowMs: () => this.clock.nowMs(),
        persist: (config, updatedMs) => this.store.putPowerDomains({ ...config, updatedMs }),
        onChanged: (what) => this.log.info("power domains changed", { what }),
      }),
    );
    this.server.addService(proto.NodeAdmin.service, {
      Drain: unary((req: { nodeIds: string[]; deadlineMs: number }) => this.drain(req.nodeIds, req.deadlineMs)),
      Undrain: unary((req: { nodeIds: string[] }) => this.undrain(req.nodeIds)),
      GetDrainStatus: unary(() => this.drainReport()),
    });
    if (!gate.secure) this.log.warn(INSECURE_WARNING);
    this.boundPort = await bindServer(this.server, this.options.host, this.options.port, gate.credentials());
    this.monitorTimer = setInterval(() => this.monitor(), this.options.monitorIntervalMs);
    this.reclusterTimer = setInterval(() => void this.recluster("periodic"), this.options.reclusterIntervalMs);
    this.stateValue = "running";
    this.log.info("resource manager serving", {
      address: this.address,
      policy: this.scheduler.policy.name,
      recoveredApps: this.apps.size,
      powerDomains: this.power.config.domains.length,
    });
  }

  /** Stops serving and closes the store; idempotent. */
  async stop(): Promise<void> {
    if (this.stateValue === "stopped" || this.stateValue === "stopping") return;
    this.stateValue = "stopping";
    if (this.monitorTimer) clearInterval(this.monitorTimer);
    if (this.reclusterTimer) clearInterval(this.reclusterTimer);
    for (const n of this.nodes.values()) n.stream?.end();
    await shutdownServer(this.server, 1_000);
    for (const c of this.nmClients.values()) c.close();
    await this.store.close().catch(() => undefined);
    await this.tenants.close().catch(() => undefined);
    this.stateValue = "stopped";
  }

  // ---------------------------------------------------------------------------------------------- tenants

  private async recluster(why: string): Promise<void> {
    try {
      this.onReclustered(await this.tenants.recluster());
    } catch (err) {
      this.log.warn("recluster failed", { why, error: errorMessage(err) });
    }
  }

  private onReclustered(snapshot: ClassSnapshot): void {
    this.classViews?.setClasses(snapshot.classes);
  }

  /** The running nodes among `ids` (all running nodes when omitted), as placement sees them. */
  private liveNodes(ids?: readonly string[]): LiveNode[] {
    const entries = ids ? ids.flatMap((id) => this.nodes.get(id) ?? []) : [...this.nodes.values()];
    const out: LiveNode[] = [];
    for (const n of entries) {
      if (n.state !== "RUNNING") continue;
      const view = this.scheduler.nodeView(n.nodeId);
      if (view) out.push(liveNodeOf(view, this.options.reserveFraction));
    }
    return out;
  }

  // ---------------------------------------------------------------------------------------------- node managers

  private onNodeStream(stream: NodeStream): void {
    let nodeId: string | undefined;
    serveWorkerStream(stream, {
      what: "node",
      log: this.log,
      context: () => ({ nodeId }),
      isRunning: () => this.stateValue === "running",
      onMessage: (msg: NodeToRmOutput) => {
        if (msg.register) {
          nodeId = this.registerNode(msg.register, stream);
        } else if (msg.heartbeat) {
          if (!nodeId || this.nodes.get(nodeId)?.stream !== stream) {
            throw new HarvestError("NODE_NOT_REGISTERED", "send RegisterNode before heartbeats on a node stream");
          }
          this.onHeartbeat(nodeId, msg.heartbeat);
        } else {
          throw new HarvestError("INVALID_ARGUMENT", "node message carries neither register nor heartbeat");
        }
      },
      onClose: () => {
        const entry = nodeId ? this.nodes.get(nodeId) : undefined;
        if (entry && entry.stream === stream) entry.stream = undefined;
      },
    });
  }

  private registerNode(reg: RegisterNodeOutput, stream: NodeStream): string {
    const nodeId = reg.nodeId;
    const capacity = fromWire(reg.capacity);
    if (!/^[A-Za-z0-9_.:-]{1,128}$/.test(nodeId))
      throw new HarvestError("INVALID_ARGUMENT", `bad node id ${JSON.stringify(nodeId)}`, {
        details: { field: "nodeId" },
      });
    if (!(capacity.vcoresMilli > 0 && capacity.memoryMb > 0))
      throw new HarvestError("INVALID_ARGUMENT", "node capacity must be positive", { details: { field: "capacity" } });
    if (!reg.nmAddress)
      throw new HarvestError("INVALID_ARGUMENT", "node registration needs nmAddress", {
        details: { field: "nmAddress" },
      });
    const chassis = reg.chassis ? normalizeDomainPath(reg.chassis, "chassis") : "";
    const profile = this.powerProfile(reg.powerProfile, nodeId);
    const now = this.clock.nowMs();
    const existing = this.nodes.get(nodeId);
    if (existing?.stream && existing.stream !== stream) existing.stream.end();
    const entry: NodeEntry = {
      nodeId,
      nmAddress: reg.nmAddress,
      rack: reg.rack || "/default-rack",
      capacity,
      primaryUsage: existing?.primaryUsage ?? { vcoresMilli: 0, memoryMb: 0 },
      primarySource: reg.primarySource,
      lastHeartbeatMs: now,
      state: "RUNNING",
      stream,
      pendingKills: existing?.pendingKills ?? new Map(),
    };
    if (existing && existing.nmAddress !== reg.nmAddress) this.dropClient(existing.nmAddress);
    this.nodes.set(nodeId, entry);
    this.scheduler.addNode(nodeId, capacity, entry.rack);
    // A draining server stays out of service when its node manager restarts or comes back from being lost.
    if (this.drains.isDraining(nodeId)) this.scheduler.setSchedulable(nodeId, false);
    this.power.addNode({ nodeId, rack: entry.rack, ...(chassis ? { domain: chassis } : {}), profile });
    // Containers the node still runs that this resource manager does not hold are killed: after a restart every job
    // starts a new attempt, and after a node was declared lost its jobs were already told to re-run that work (so
    // they end LOST, as the jobs were told, not RELEASED).
    const cause = existing?.state === "LOST" ? "LOST" : "RELEASED";
    for (const st of reg.containers) {
      if (st.state !== "COMPLETE" && !this.scheduler.allocation(st.containerId))
        entry.pendingKills.set(st.containerId, cause);
    }
    stream.write({
      registered: { nodeId, heartbeatIntervalMs: this.options.heartbeatIntervalMs, rmEpoch: this.epoch },
    });
    this.log.info(existing ? "node re-registered" : "node registered", {
      nodeId,
      nmAddress: reg.nmAddress,
      capacity,
      primary: reg.primarySource,
      powerProfile: profile.id,
    });
    return nodeId;
  }

  /** The power profile a node names (the default when it names none, or one this resource manager cannot resolve). */
  private powerProfile(id: string, nodeId: string): PowerProfile {
    const wanted = id.trim() || DEFAULT_POWER_PROFILE_ID;
    let profile = this.profiles.get(wanted);
    if (profile) return profile;
    try {
      profile = resolvePowerProfile(wanted);
    } catch (err) {
      // The node's meter already accepted the id (its data may be missing here): predict with the default rather than
      // keep the node out of the cluster.
      this.log.warn("unknown power profile; predicting this node's power with the default profile", {
        nodeId,
        powerProfile: wanted,
        default: DEFAULT_POWER_PROFILE_ID,
        error: errorMessage(err),
      });
      return resolvePowerProfile(DEFAULT_POWER_PROFILE_ID);
    }
    this.profiles.set(wanted, profile);
    return profile;
  }

  /** What the power-aware placement knows of a node, from the power domains, the scheduler and the tenant history. */
  private powerNode(view: NodeView): PowerNode | undefined {
    const facts = this.power.placementFacts(view.nodeId);
    if (!facts) return undefined;
    const tenant = this.tenants.ownerOf(view.nodeId);
    const stats = tenant ? this.tenants.snapshot.stats.get(tenant.name) : undefined;
    const outlook = primaryOutlook(
      view.capacity.vcoresMilli,
      view.primaryUsage.vcoresMilli,
      primaryHistoryOf(tenant, stats),
    );
    return {
      nodeId: view.nodeId,
      domains: facts.domains,
      profile: facts.profile,
      capacityMilli: view.capacity.vcoresMilli,
      primaryNowMilli: view.primaryUsage.vcoresMilli,
      allocatedMilli: view.allocated.vcoresMilli,
      drawWatts: facts.drawWatts,
      limitWatts: facts.limitWatts,
      ...outlook,
    };
  }

  private onHeartbeat(nodeId: string, hb: NodeHeartbeatOutput): void {
    const node = this.nodes.get(nodeId);
    if (!node) return;
    checkPowerFields(hb);
    node.lastHeartbeatMs = this.clock.nowMs();
    node.primaryUsage = fromWire(hb.primaryUsage);
    this.scheduler.updatePrimaryUsage(nodeId, node.primaryUsage);
    // The primary's live utilization joins its history (seeds/004: the history the classes are built from).
    const cpuPct = (100 * node.primaryUsage.vcoresMilli) / node.capacity.vcoresMilli;
    if (Number.isFinite(cpuPct))
      this.tenants.addSamples([
        { server: nodeId, timeMs: node.lastHeartbeatMs, cpuPct: Math.min(100, Math.max(0, cpuPct)) },
      ]);
    const recorded: string[] = [];
    for (const st of hb.containers) {
      this.launchPending.delete(st.containerId);
      if (st.state === "COMPLETE") {
        recorded.push(st.containerId);
        const alloc = this.scheduler.release(st.containerId);
        if (alloc) this.onContainerCompleted(alloc, { ...st, nodeId });
        // Released earlier (job killed, container given back): still record how it ended.
        else this.recordEnd(this.apps.get(st.appId), st);
      } else if (!this.scheduler.allocation(st.containerId)) {
        // Keep a more specific cause already queued (a user's kill).
        if (!node.pendingKills.has(st.containerId)) node.pendingKills.set(st.containerId, "RELEASED");
      } else {
        const ref = this.apps.get(st.appId)?.containers.get(st.containerId);
        if (ref && ref.state === "ALLOCATED") {
          ref.state = "RUNNING";
          ref.startedMs = st.startedMs;
        }
      }
    }
    const allocated = this.scheduler.nodeView(nodeId)?.allocated.vcoresMilli ?? 0;
    this.power.report(nodeId, {
      watts: hb.powerWatts,
      meter: hb.powerMeter.slice(0, 256),
      capped: hb.powerCapped,
      cappingState: hb.cappingState.slice(0, 32),
      throttledContainers: hb.throttledContainers,
      powerKills: hb.powerKills,
      utilization: (node.primaryUsage.vcoresMilli + allocated) / node.capacity.vcoresMilli,
    });
    this.logPowerAlerts();
    for (const alloc of this.scheduler.allocateOnNode(nodeId)) this.onAllocated(alloc, node);
    const kills = [...node.pendingKills].map(([containerId, cause]) => ({ containerId, cause }));
    node.pendingKills.clear();
    const budget = this.power.nodeBudget(nodeId);
    node.stream?.write({
      ack: {
        seq: hb.seq,
        containersToKill: kills,
        completedRecorded: recorded,
        nodeBudgetWatts: budget?.budgetWatts ?? 0,
        budgetDomain: budget?.domain ?? "",
      },
    });
  }

  private logPowerAlerts(): void {
    for (const e of this.power.drainEvents()) {
      const fields = {
        domain: e.domain,
        drawWatts: Math.round(e.drawWatts),
        budgetWatts: e.budgetWatts,
        nodes: e.nodes,
      };
      if (e.alert) this.log.warn("power domain near its budget: its nodes get their even share", fields);
      else if (e.budgetWatts <= 0) this.log.info("power domain budget removed: node budgets lifted", fields);
      else this.log.info("power domain back under its uncap threshold: node budgets lifted", fields);
    }
  }

  private markNodeLost(node: NodeEntry): void {
    node.state = "LOST";
    node.stream?.end();
    node.stream = undefined;
    const lost = this.scheduler.removeNode(node.nodeId);
    this.power.markLost(node.nodeId);
    this.log.warn("node lost: no heartbeat within the expiry", { nodeId: node.nodeId, containersLost: lost.length });
    for (const alloc of lost) {
      this.launchPending.delete(alloc.containerId);
      this.onContainerCompleted(alloc, {
        containerId: alloc.containerId,
        appId: alloc.appId,
        nodeId: alloc.nodeId,
        state: "COMPLETE",
        cause: "LOST",
        exitCode: -1,
        diagnostics: `node ${node.nodeId} lost (no heartbeat for ${this.options.nodeExpiryMs} ms)`,
        resource: alloc.resource,
        finishedMs: this.clock.nowMs(),
      });
    }
  }

  private monitor(): void {
    const now = this.clock.nowMs();
    for (const node of this.nodes.values()) {
      if (node.state === "RUNNING" && now - node.lastHeartbeatMs > this.options.nodeExpiryMs) this.markNodeLost(node);
    }
    for (const [containerId, grantedMs] of this.launchPending) {
      if (now - grantedMs <= this.options.containerLaunchExpiryMs) continue;
      this.launchPending.delete(containerId);
      const alloc = this.scheduler.release(containerId);
      if (!alloc) continue;
      this.nodes.get(alloc.nodeId)?.pendingKills.set(containerId, "RELEASED");
      this.onContainerCompleted(alloc, {
        containerId,
        appId: alloc.appId,
        nodeId: alloc.nodeId,
        state: "COMPLETE",
        cause: "RELEASED",
        exitCode: -1,
        diagnostics: `not launched within ${this.options.containerLaunchExpiryMs} ms`,
        resource: alloc.resource,
      });
    }
    for (const app of this.apps.values()) {
      // From its launch on, a job manager must register and then heartbeat within the expiry (YARN's AM liveness).
      const launched = app.amContainerId !== undefined && this.scheduler.allocation(app.amContainerId) !== undefined;
      if (isTerminal(app.record.state) || !launched || now - app.lastAmContactMs <= this.options.amExpiryMs) continue;
      const what = app.registered ? "sent no heartbeat" : "did not register";
      this.log.warn(`job manager ${what} within its expiry`, { appId: app.record.appId, attempt: app.record.attempt });
      this.amAttemptEnded(app, "FAILED", `job manager ${what} for ${this.options.amExpiryMs} ms`);
    }
    this.stepDrains(now);
    this.nodeChoice?.tick(now);
    if (this.admission.waiting > 0) this.admitQueued();
    this.history?.retryWaiting();
    this.power.tick();
    this.logPowerAlerts();
  }

  // ---------------------------------------------------------------------------------------------- admission

  /**
   * The cores admission control counts for a job: what its past runs held on average (`JobDemandModel`), never more
   * than its job manager and its widest stage (capped at the cluster's); a job never seen counts at that.
   */
  private jobDemandMilli(dag: DagSpec): number {
    let taskMilli = 0;
    for (const v of dag.vertices) taskMilli = Math.max(taskMilli, v.resources.vcoresMilli);
    let clusterMilli = 0;
    for (const v of this.scheduler.nodeViews()) clusterMilli += v.capacity.vcoresMilli;
    const wide = maxConcurrency(dag) * taskMilli;
    // A stage wider than the cluster runs in waves: it never holds more than the cluster.
    const widest = this.options.amResource.vcoresMilli + (clusterMilli > 0 ? Math.min(wide, clusterMilli) : wide);
    // What its past runs held on average (a job never seen: its widest stage).
    return this.demand.demandMilli(dag.name, widest);
  }

  private queueForAdmission(app: AppRuntime): void {
    const r = app.record;
    this.admission.enqueue(
      { appId: r.appId, priority: r.priority ?? 0, demandMilli: r.demandMilli ?? 0, name: r.name },
      r.submitMs,
    );
  }

  /** Lets in what admission control admits now; the others' reasons become their diagnostics. */
  private admitQueued(): void {
    const now = this.clock.nowMs();
    for (const { job, decision, waitedMs } of this.admission.admitReady()) {
      const app = this.apps.get(job.appId);
      if (!app || app.record.state !== "QUEUED") continue;
      app.record.state = "ACCEPTED";
      app.record.admittedMs = now;
      app.record.diagnostics = `admitted after ${(waitedMs / 1000).toFixed(1)} s (${decision.reason}); waiting for a container for the job manager`;
      this.scheduler.addApp(job.appId, app.record.seq);
      this.scheduler.setAsks(job.appId, [{ priority: AM_PRIORITY, resource: this.options.amResource, count: 1 }]);
      this.log.info("application admitted", { appId: job.appId, waitedMs, reason: decision.reason });
      this.store
        .putApp(app.record)
        .catch((err: unknown) =>
          this.log.error("could not record an admission", { appId: job.appId, error: errorMessage(err) }),
        );
    }
    for (const e of this.admission.snapshot()) {
      const app = this.apps.get(e.appId);
      if (app) app.record.diagnostics = `waiting for admission (${e.position} in the queue): ${e.reason}`;
    }
  }

  /** The servers admission control counts: registered and running, not draining. */
  private admissionServers(): {
    serverId: string;
    capacityMilli: number;
    reserveMilli: number;
    allocatedMilli: number;
    primaryNowMilli: number;
    tenant: string | undefined;
  }[] {
    const out = [];
    for (const n of this.nodes.values()) {
      if (n.state !== "RUNNING" || this.drains.isDraining(n.nodeId)) continue;
      const view = this.scheduler.nodeView(n.nodeId);
      out.push({
        serverId: n.nodeId,
        capacityMilli: n.capacity.vcoresMilli,
        reserveMilli: Math.ceil(n.capacity.vcoresMilli * this.options.reserveFraction),
        allocatedMilli: view?.allocated.vcoresMilli ?? 0,
        primaryNowMilli: n.primaryUsage.vcoresMilli,
        tenant: this.tenants.ownerOf(n.nodeId)?.name,
      });
    }
    return out;
  }

  /** Every admitted job that has not ended, with its demand and its end re-predicted from its uptime. */
  private admittedJobs(now: number): AdmittedJob[] {
    const out: AdmittedJob[] = [];
    for (const app of this.apps.values()) {
      const r = app.record;
      if (isTerminal(r.state) || r.state === "QUEUED") continue;
      const since = r.admittedMs || r.submitMs;
      out.push({
        appId: r.appId,
        demandMilli: r.demandMilli ?? 0,
        allocatedMilli: this.scheduler.allocatedMilliOf(r.appId),
        endMs: now + this.lifetimes.jobRemainingMs(r.name, now - since),
      });
    }
    return out;
  }

  /** Whether a server's tenant was found periodic at the last classification. */
  private isPeriodic(server: string): boolean {
    const tenant = this.tenants.ownerOf(server);
    if (!tenant) return false;
    return this.tenants.snapshot.classes.some((c) => c.pattern === "periodic" && c.tenantIds.includes(tenant.name));
  }

  // ---------------------------------------------------------------------------------------------- drains

  /** Starts (or re-times) the drain of servers; durable before the answer. */
  private async drain(nodeIds: readonly string[], deadlineMs: number): Promise<{ drains: NodeDrain[] }> {
    this.checkNodeIds(nodeIds);
    if (!(Number.isInteger(deadlineMs) && deadlineMs >= 0))
      throw new HarvestError("INVALID_ARGUMENT", "deadlineMs must be a Unix time in ms, or 0 for none", {
        details: { field: "deadlineMs" },
      });
    const now = this.clock.nowMs();
    for (const id of nodeIds) {
      this.drains.start(id, now, deadlineMs);
      this.scheduler.setSchedulable(id, false);
    }
    await this.persistDrains();
    this.log.info("draining servers", { nodeIds, deadline: deadlineMs ? new Date(deadlineMs).toISOString() : "none" });
    // The first step now, so that the status answered shows what will be left to finish.
    this.stepDrains(now);
    return this.drainReport(nodeIds);
  }

  private async undrain(nodeIds: readonly string[]): Promise<{ drains: NodeDrain[] }> {
    this.checkNodeIds(nodeIds);
    const report = this.drainReport(nodeIds);
    for (const id of nodeIds) {
      this.drains.stop(id);
      this.scheduler.setSchedulable(id, true);
    }
    await this.persistDrains();
    this.log.info("servers back in service", { nodeIds });
    return report;
  }

  /** Rejects an empty list and ids this resource manager has never seen (typos), naming the known ones. */
  private checkNodeIds(nodeIds: readonly string[]): void {
    if (nodeIds.length === 0)
      throw new HarvestError("INVALID_ARGUMENT", "name at least one server", { details: { field: "nodeIds" } });
    for (const id of nodeIds) {
      if (this.nodes.has(id) || this.drains.isDraining(id)) continue;
      const known = [...this.nodes.keys()].sort().join(", ") || "none";
      throw new HarvestError("NODE_NOT_FOUND", `no server ${JSON.stringify(id)}; known servers: ${known}`, {
        details: { nodeId: id },
      });
    }
  }

  private async persistDrains(): Promise<void> {
    const stored: StoredDrain[] = this.drains
      .status()
      .map((d) => ({ nodeId: d.nodeId, startedMs: d.startedMs, deadlineMs: d.deadlineMs }));
    await this.store.putDrains(stored);
  }

  private drainReport(nodeIds?: readonly string[]): { drains: NodeDrain[] } {
    const wanted = nodeIds ? new Set(nodeIds) : undefined;
    const drains = this.drains
      .status()
      .filter((d) => !wanted || wanted.has(d.nodeId))
      .map((d: DrainStatus) => ({ ...d, registered: this.nodes.get(d.nodeId)?.state === "RUNNING" }));
    return { drains };
  }

  /** One step of every drain: preempts what will not end before its server's deadline (LARS order, bounded rate). */
  private stepDrains(now: number): void {
    for (const nodeId of this.drains.nodeIds()) {
      const containers: DrainContainer[] = this.scheduler.containersOn(nodeId).map((alloc) => {
        const app = this.apps.get(alloc.appId);
        const ref = app?.containers.get(alloc.containerId);
        const startMs = Number(ref?.startedMs ?? 0) || now;
        return {
          containerId: alloc.containerId,
          startMs,
          isJobManager: alloc.priority === AM_PRIORITY,
          remainingMs: this.lifetimes.remainingMs(this.containerKey(alloc.appId, alloc.priority), now - startMs),
        };
      });
      const step = this.drains.step(nodeId, now, containers);
      if (step.preempt.length === 0) continue;
      this.log.info(step.atDeadline ? "drain deadline: preempting what is left" : "drain: preempting", {
        nodeId,
        containers: step.preempt,
      });
      for (const id of step.preempt) this.preemptForDrain(id, step.atDeadline);
    }
  }

  /** Preempts a container of a draining server: its job re-runs the work elsewhere (never a failure). */
  private preemptForDrain(containerId: string, atDeadline: boolean): void {
    const alloc = this.scheduler.release(containerId);
    if (!alloc) return;
    this.launchPending.delete(containerId);
    this.nodes.get(alloc.nodeId)?.pendingKills.set(containerId, "PREEMPTED_BY_DRAIN");
    this.onContainerCompleted(alloc, {
      containerId,
      appId: alloc.appId,
      nodeId: alloc.nodeId,
      state: "COMPLETE",
      cause: "PREEMPTED_BY_DRAIN",
      exitCode: -1,
      diagnostics: atDeadline
        ? `server ${alloc.nodeId} reached its drain deadline`
        : `server ${alloc.nodeId} is draining and this container was predicted to outlast its deadline`,
      resource: alloc.resource,
      finishedMs: this.clock.nowMs(),
    });
  }

  /** The vertex a container of `app` at `priority` runs (undefined: the job manager, or unknown). */
  private vertexOf(app: AppRuntime, priority: number): string | undefined {
    if (priority === AM_PRIORITY) return undefined;
    if (!app.vertices) {
      try {
        app.vertices = topologicalOrder(parseDag(app.record.dagJson, { maxParallelism: this.options.maxParallelism }));
      } catch {
        app.vertices = [];
      }
    }
    return app.vertices[priority];
  }

  // ---------------------------------------------------------------------------------------------- containers

  private newContainerId(appId: string): string {
    const app = this.apps.get(appId);
    return formatContainerId(this.epoch, app?.record.seq ?? 0, app?.record.attempt ?? 0, ++this.containerSeq);
  }

  private onAllocated(alloc: Allocation, node: NodeEntry): void {
    const app = this.apps.get(alloc.appId);
    if (!app || isTerminal(app.record.state)) {
      this.scheduler.release(alloc.containerId);
      return;
    }
    this.launchPending.set(alloc.containerId, this.clock.nowMs());
    const container: ContainerOutput = {
      id: alloc.containerId,
      nodeId: node.nodeId,
      nmAddress: node.nmAddress,
      resource: alloc.resource,
      priority: alloc.priority,
      jobPriority: app.record.priority ?? 0,
      user: app.record.user,
      token: signContainer(this.options.secret, {
        containerId: alloc.containerId,
        appId: alloc.appId,
        nodeId: node.nodeId,
        resource: alloc.resource,
        jobPriority: app.record.priority ?? 0,
        user: app.record.user,
      }),
    };
    this.trackRef(app, {
      containerId: alloc.containerId,
      nodeId: node.nodeId,
      nmAddress: node.nmAddress,
      isAm: alloc.priority === AM_PRIORITY,
      state: "ALLOCATED",
    });
    (alloc.priority === AM_PRIORITY ? app.amCounts : app.taskCounts).allocated += 1;
    if (alloc.priority === AM_PRIORITY) {
      app.amContainerId = alloc.containerId;
      app.lastAmContactMs = this.clock.nowMs();
      void this.launchAm(app, container);
    } else {
      app.delivery.push(container);
    }
  }

  private async launchAm(app: AppRuntime, container: ContainerOutput): Promise<void> {
    const { appId, attempt } = app.record;
    const env: Record<string, string> = {
      HARVEST_HOME: packageRoot(),
      HARVEST_APP_ID: appId,
      HARVEST_ATTEMPT: String(attempt),
      HARVEST_RM_ADDRESS: this.address,
      HARVEST_STAGING_DIR: this.options.stagingDir,
      HARVEST_DAG_FILE: join(this.options.stagingDir, appId, "dag.json"),
      // The job manager's only credentials: its AM token and the submitter's file-system token (passed on to tasks).
      ...(this.options.secret ? { HARVEST_AM_TOKEN: signAmToken(this.options.secret, { appId, attempt }) } : {}),
      ...(app.record.dfsToken ? { HARVEST_DFS_TOKEN: app.record.dfsToken } : {}),
    };
    try {
      const client = this.nmClient(container.nmAddress);
      await call(client, client.startContainer, {
        container,
        appId,
        argv: this.options.jobManagerCommand,
        env,
        isAm: true,
      });
      this.log.info("job manager launched", { appId, attempt, containerId: container.id, nodeId: container.nodeId });
    } catch (err) {
      this.log.warn("could not launch the job manager", { appId, attempt, error: errorMessage(err) });
      const alloc = this.scheduler.release(container.id);
      this.launchPending.delete(container.id);
      if (alloc && app.amContainerId === container.id)
        this.amAttemptEnded(app, "FAILED", `job manager launch failed: ${errorMessage(err)}`);
    }
  }

  private onContainerCompleted(alloc: Allocation, st: ContainerStatus): void {
    const app = this.apps.get(alloc.appId);
    if (!app) return;
    this.recordEnd(app, st, alloc.priority, alloc.resource.vcoresMilli);
    if (isTerminal(app.record.state)) {
      if (app.amContainerId === alloc.containerId) this.scheduler.removeApp(alloc.appId);
      return;
    }
    if (app.amContainerId === alloc.containerId) {
      this.amAttemptEnded(
        app,
        (st.cause ?? "FAILED") as ExitCauseOutput,
        st.diagnostics || `job manager container exited with code ${st.exitCode ?? "?"}`,
      );
    } else {
      app.completed.push(st);
    }
  }

  /** Marks a container's reference complete and counts how it ended (once per container). */
  private recordEnd(app: AppRuntime | undefined, st: ContainerStatus, priority?: number, milli = 0): void {
    const ref = app?.containers.get(st.containerId ?? "");
    if (!app || !ref || ref.state === "COMPLETE") return;
    // After a user's kill every container ends because of it, including a job manager that exits on its own.
    const cause: ExitCauseOutput =
      app.record.state === "KILLED" ? "KILLED_BY_USER" : ((st.cause ?? "EXIT_CAUSE_UNSPECIFIED") as ExitCauseOutput);
    ref.state = "COMPLETE";
    ref.cause = cause;
    if (st.startedMs) ref.startedMs = st.startedMs;
    ref.finishedMs = st.finishedMs ?? this.clock.nowMs();
    const counts = ref.isAm ? app.amCounts : app.taskCounts;
    const ranMs = Number(ref.finishedMs) - Number(ref.startedMs ?? 0);
    if (Number(ref.startedMs ?? 0) > 0 && ranMs > 0) app.heldCoreMs += (ranMs * milli) / 1000;
    if (cause === "SUCCEEDED" && !ref.isAm && priority !== undefined && Number(ref.startedMs ?? 0) > 0 && ranMs >= 0)
      this.recordTaskDuration(app, priority, ranMs);
    if (cause === "SUCCEEDED") counts.succeeded++;
    else if (cause === "FAILED" || cause === "EXCEEDED_MEMORY") counts.failed++;
    else if (cause === "PREEMPTED_BY_PRIMARY" || cause === "PREEMPTED_BY_POWER" || cause === "PREEMPTED_BY_DRAIN")
      counts.preempted++;
    else if (cause === "LOST") counts.lost++;
    else counts.killed++;
  }

  /** A task that succeeded: its run time joins the lifetime model now and its job's history record at the end. */
  private recordTaskDuration(app: AppRuntime, priority: number, durationMs: number): void {
    const vertex = this.vertexOf(app, priority);
    if (vertex === undefined) return;
    this.lifetimes.observeTask(app.record.name, vertex, durationMs);
    const list = app.taskDurations.get(vertex) ?? [];
    if (list.length < MAX_DURATIONS_PER_VERTEX) list.push(durationMs);
    app.taskDurations.set(vertex, list);
  }

  /** Rebuilds the lifetime model from the job history (the newest jobs first, up to the model's sample limits). */
  private async loadLifetimes(): Promise<void> {
    const history = await this.store.history("", this.options.lifetimeHistoryJobs);
    // Oldest first, so that each key keeps its most recent samples.
    for (const h of history.reverse()) {
      if (h.outcome === "JOB_SUCCEEDED") this.lifetimes.observeJob(h.name, h.durationMs);
      if (h.meanDemandMilli !== undefined) this.demand.observe(h.name, h.meanDemandMilli);
      for (const [vertex, durations] of Object.entries(h.taskDurations ?? {}))
        for (const d of durations) this.lifetimes.observeTask(h.name, vertex, d);
    }
  }

  private nmClient(address: string): ContainerManagerClient {
    let c = this.nmClients.get(address);
    if (!c) {
      c = makeClient(loadHarvestProto().ContainerManager, address, this.options.tls);
      this.nmClients.set(address, c);
    }
    return c;
  }

  private dropClient(address: string): void {
    this.nmClients.get(address)?.close();
    this.nmClients.delete(address);
  }

  private trackRef(app: AppRuntime, ref: ContainerRef): void {
    if (app.containers.size >= MAX_CONTAINER_REFS) {
      const oldest = app.containers.keys().next().value;
      if (oldest !== undefined) app.containers.delete(oldest);
    }
    app.containers.set(ref.containerId ?? "", ref);
  }

  /** Releases every container of an application (except, optionally, its job manager) and tells the nodes to kill them. */
  private releaseAll(app: AppRuntime, cause: ExitCauseOutput, keepAm: boolean): void {
    const ids = [...app.containers.keys()];
    for (const id of ids) {
      if (keepAm && id === app.amContainerId) continue;
      const alloc = this.scheduler.release(id);
      this.launchPending.delete(id);
      if (alloc) this.nodes.get(alloc.nodeId)?.pendingKills.set(id, cause);
    }
  }

  // ---------------------------------------------------------------------------------------------- applications

  private async recover(): Promise<void> {
    for (const record of await this.store.loadApps()) {
      const app = this.newRuntime(record);
      this.apps.set(record.appId, app);
      if (isTerminal(record.state)) continue;
      if (record.state === "QUEUED") {
        // Still waiting for admission: back in the queue with its submission time, in submission order (loadApps is).
        this.queueForAdmission(app);
        continue;
      }
      // A resource manager restart is not the job manager's fault: start a new attempt without counting a failure.
      this.scheduler.addApp(record.appId, record.seq);
      await this.startAttempt(app, "resource manager restarted");
    }
  }

  private newRuntime(record: AppRecord): AppRuntime {
    return {
      record,
      amContainerId: undefined,
      registered: false,
      lastAmContactMs: 0,
      delivery: [],
      completed: [],
      progress: undefined,
      containers: new Map(),
      taskCounts: zeroCounts(),
      amCounts: zeroCounts(),
      taskDurations: new Map(),
      heldCoreMs: 0,
    };
  }

  private async submit(dagJson: string, user: string, dfsToken = ""): Promise<{ appId: string }> {
    const max = this.scheduler.maxNodeCapacity();
    const dag = parseDag(dagJson, {
      maxParallelism: this.options.maxParallelism,
      ...(max.vcoresMilli > 0 ? { maxResource: max } : {}),
    });
    const demandMilli = this.jobDemandMilli(dag);
    // A job that even an idle cluster would not admit is refused now, not queued for ever.
    if (this.admission.enabled)
      this.admission.checkAdmissible({ name: dag.name, priority: dag.priority ?? 0, demandMilli });
    const seq = await this.store.nextAppSeq();
    const appId = formatAppId(this.clusterTs, seq);
    const record: AppRecord = {
      appId,
      seq,
      name: dag.name,
      user: user || "unknown",
      dagJson,
      state: this.admission.enabled ? "QUEUED" : "ACCEPTED",
      outcome: "JOB_OUTCOME_UNSPECIFIED",
      diagnostics: this.admission.enabled
        ? `waiting for admission (${this.options.admission}-moment policy)`
        : "waiting for a container for the job manager",
      demandMilli,
      submitMs: this.clock.nowMs(),
      startMs: 0,
      finishMs: 0,
      attempt: 1,
      failedAttempts: 0,
      maxConcurrency: 0,
      priority: dag.priority ?? 0,
      ...(dfsToken ? { dfsToken } : {}),
    };
    // The job manager reads its DAG from the staging directory (as YARN's job files); both writes precede the reply.
    const jobDir = join(this.options.stagingDir, appId);
    await mkdir(jobDir, { recursive: true });
    await writeFileDurably(join(jobDir, "dag.json"), dagJson);
    await this.store.putApp(record);
    const app = this.newRuntime(record);
    this.apps.set(appId, app);
    if (this.admission.enabled) {
      this.queueForAdmission(app);
      this.admitQueued();
    } else {
      this.scheduler.addApp(appId, seq);
      this.scheduler.setAsks(appId, [{ priority: AM_PRIORITY, resource: this.options.amResource, count: 1 }]);
    }
    this.log.info("application submitted", { appId, name: dag.name, user: record.user, vertices: dag.vertices.length });
    return { appId };
  }

  /** Ends the current job-manager attempt; starts another or fails the job. */
  private amAttemptEnded(app: AppRuntime, cause: ExitCauseOutput, diagnostics: string): void {
    if (isTerminal(app.record.state)) return;
    // Preemption by a primary tenant, a power cap or a drain, and a lost node are not the job manager's failures (YARN does the
    // same for preemption).
    const countsAsFailure =
      cause !== "PREEMPTED_BY_PRIMARY" &&
      cause !== "PREEMPTED_BY_POWER" &&
      cause !== "PREEMPTED_BY_DRAIN" &&
      cause !== "LOST";
    if (countsAsFailure) app.record.failedAttempts += 1;
    if (app.amContainerId) {
      const alloc = this.scheduler.release(app.amContainerId);
      if (alloc) this.nodes.get(alloc.nodeId)?.pendingKills.set(app.amContainerId, "RELEASED");
    }
    const preemptedOrLost = app.record.attempt - app.record.failedAttempts;
    this.log.warn("job manager attempt ended", {
      appId: app.record.appId,
      attempt: app.record.attempt,
      cause,
      diagnostics,
      failedAttempts: app.record.failedAttempts,
    });
    if (app.record.failedAttempts >= this.options.maxAmAttempts) {
      this.finishInBackground(
        app,
        `job manager failed ${app.record.failedAttempts} time(s) (limit ${this.options.maxAmAttempts}); last: ${diagnostics}`,
      );
      return;
    }
    if (!countsAsFailure && preemptedOrLost > this.options.maxAmPreemptions) {
      this.finishInBackground(
        app,
        `job manager preempted or lost ${preemptedOrLost} times (limit ${this.options.maxAmPreemptions}); last: ${diagnostics}`,
      );
      return;
    }
    void this.startAttempt(app, diagnostics).catch((err: unknown) =>
      this.log.error("could not start a new attempt", { appId: app.record.appId, error: errorMessage(err) }),
    );
  }

  /** Fails the job from a non-async path; a store error is logged (the job stays in its state and is retried on restart). */
  private finishInBackground(app: AppRuntime, diagnostics: string): void {
    this.finish(app, "FAILED", "JOB_FAILED", diagnostics, undefined).catch((err: unknown) =>
      this.log.error("could not record a failed job", { appId: app.record.appId, error: errorMessage(err) }),
    );
  }

  private async startAttempt(app: AppRuntime, why: string): Promise<void> {
    this.releaseAll(app, "RELEASED", false);
    // Always a new number: a job manager of the previous attempt (even one launched just before a restart of this
    // resource manager) must never pass for the current one.
    app.record.attempt += 1;
    app.record.state = "ACCEPTED";
    app.record.diagnostics = `attempt ${app.record.attempt} waiting for a container (${why})`;
    app.amContainerId = undefined;
    app.registered = false;
    app.delivery = [];
    app.completed = [];
    await this.store.putApp(app.record);
    this.scheduler.setAsks(app.record.appId, [{ priority: AM_PRIORITY, resource: this.options.amResource, count: 1 }]);
  }

  private activeApp(appId: string, attempt: number): AppRuntime {
    const app = this.getApp(appId);
    if (app.record.attempt !== attempt) {
      throw new HarvestError(
        "APP_ATTEMPT_UNKNOWN",
        `attempt ${attempt} of ${appId} is not current (current: ${app.record.attempt}); this job manager must exit`,
      );
    }
    return app;
  }

  private getApp(appId: string): AppRuntime {
    parseAppId(appId);
    const app = this.apps.get(appId);
    if (!app)
      throw new HarvestError("APP_NOT_FOUND", `no application ${appId}; 'harvest job list' shows the known ones`, {
        details: { appId },
      });
    return app;
  }

  private async registerAm(req: { appId: string; attempt: number; maxConcurrency: number }): Promise<object> {
    const app = this.activeApp(req.appId, req.attempt);
    if (isTerminal(app.record.state))
      throw new HarvestError("APP_ALREADY_FINISHED", `${req.appId} already ended (${app.record.state})`);
    app.registered = true;
    app.lastAmContactMs = this.clock.nowMs();
    app.record.state = "RUNNING";
    app.record.diagnostics = "";
    app.record.maxConcurrency = Math.max(0, Math.floor(req.maxConcurrency));
    if (app.record.startMs === 0) app.record.startMs = this.clock.nowMs();
    await this.store.putApp(app.record);
    this.scheduler.setMaxConcurrency(req.appId, app.record.maxConcurrency);
    if (this.history) {
      // Algorithm 1, line 3: the job's type from the duration of its last run against the history's thresholds.
      const past = (await this.store.history("", this.options.jobHistoryWindow)).filter(
        (h) => h.outcome === "JOB_SUCCEEDED",
      );
      const last = past.find((h) => h.name === app.record.name);
      const jobType = jobTypeOf(
        last?.durationMs,
        past.map((h) => h.durationMs),
        this.options.jobTypes,
      );
      this.history.register(req.appId, jobType, app.record.maxConcurrency);
    }
    this.log.info("job manager registered", {
      appId: req.appId,
      attempt: req.attempt,
      maxConcurrency: app.record.maxConcurrency,
    });
    return { dagJson: app.record.dagJson, maxResource: this.scheduler.maxNodeCapacity(), name: app.record.name };
  }

  private allocate(req: {
    appId: string;
    attempt: number;
    asks: { priority: number; resource: { vcoresMilli: number; memoryMb: number } | null; count: number }[];
    releases: string[];
    progress: JobProgressOutput | null;
  }): object {
    const app = this.activeApp(req.appId, req.attempt);
    if (isTerminal(app.record.state)) return { allocated: [], completed: [], shutdown: true };
    if (!app.registered) throw new HarvestError("APP_ATTEMPT_UNKNOWN", "register the job manager before allocating");
    app.lastAmContactMs = this.clock.nowMs();
    const max = this.scheduler.maxNodeCapacity();
    for (const [i, ask] of req.asks.entries()) {
      const r = fromWire(ask.resource);
      if (!Number.isInteger(ask.priority) || ask.priority < 0)
        throw new HarvestError("INVALID_ARGUMENT", `asks[${i}].priority must be an integer >= 0`, {
          details: { field: `asks[${i}].priority` },
        });
      if (!(r.vcoresMilli > 0 && r.memoryMb > 0))
        throw new HarvestError("INVALID_ARGUMENT", `asks[${i}].resource must be positive`, {
          details: { field: `asks[${i}].resource` },
        });
      if (!fits(r, max))
        throw new HarvestError("DAG_RESOURCES_TOO_LARGE", `asks[${i}] asks for more than any node has`, {
          details: { field: `asks[${i}].resource` },
        });
      if (!(ask.count >= 0 && ask.count <= 1_000_000))
        throw new HarvestError("INVALID_ARGUMENT", `asks[${i}].count out of range`, {
          details: { field: `asks[${i}].count` },
        });
    }
    for (const id of req.releases) {
      if (id === app.amContainerId) continue;
      const alloc = this.scheduler.allocation(id);
      if (!alloc || alloc.appId !== req.appId) continue;
      this.scheduler.release(id);
      this.launchPending.delete(id);
      this.nodes.get(alloc.nodeId)?.pendingKills.set(id, "RELEASED");
    }
    const delivered = app.delivery;
    app.delivery = [];
    // The job manager counted its needs before seeing these containers: subtract them (asks are absolute).
    const deliveredByPriority = new Map<number, number>();
    for (const c of delivered) deliveredByPriority.set(c.priority, (deliveredByPriority.get(c.priority) ?? 0) + 1);
    this.scheduler.setAsks(
      req.appId,
      req.asks.map((a) => ({
        priority: a.priority,
        resource: fromWire(a.resource),
        count: Math.max(0, a.count - (deliveredByPriority.get(a.priority) ?? 0)),
      })),
    );
    if (this.history) {
      let taskMilli = 0;
      for (const a of req.asks) if (a.count > 0) taskMilli = Math.max(taskMilli, fromWire(a.resource).vcoresMilli);
      this.history.onAsk(req.appId, taskMilli);
    }
    if (req.progress) app.progress = req.progress;
    const completed = app.completed;
    app.completed = [];
    return { allocated: delivered, completed, shutdown: false };
  }

  private async finishAm(req: {
    appId: string;
    attempt: number;
    outcome: string;
    diagnostics: string;
    progress: JobProgressOutput | null;
  }): Promise<object> {
    const app = this.activeApp(req.appId, req.attempt);
    if (isTerminal(app.record.state)) return {};
    const outcome =
      req.outcome === "JOB_SUCCEEDED" ? "JOB_SUCCEEDED" : req.outcome === "JOB_KILLED" ? "JOB_KILLED" : "JOB_FAILED";
    const state: AppState = outcome === "JOB_SUCCEEDED" ? "FINISHED" : outcome === "JOB_KILLED" ? "KILLED" : "FAILED";
    await this.finish(app, state, outcome, req.diagnostics, req.progress ?? undefined);
    return {};
  }

  private async finish(
    app: AppRuntime,
    state: AppState,
    outcome: AppRecord["outcome"],
    diagnostics: string,
    progress: JobProgress | undefined,
  ): Promise<void> {
    if (isTerminal(app.record.state)) return;
    const now = this.clock.nowMs();
    app.record.state = state;
    app.record.outcome = outcome;
    app.record.diagnostics = diagnostics;
    app.record.finishMs = now;
    if (progress) app.progress = progress;
    const history: HistoryRecord = {
      appId: app.record.appId,
      name: app.record.name,
      durationMs: now - app.record.submitMs,
      outcome,
      finishMs: now,
      tasksRun: app.progress?.tasksRun ?? 0,
      tasksPreempted: app.progress?.tasksPreempted ?? 0,
      taskDurations: Object.fromEntries(app.taskDurations),
    };
    const ranMs = now - (app.record.admittedMs || app.record.submitMs);
    if (outcome === "JOB_SUCCEEDED" && ranMs > 0) {
      // The job manager's container (still running now) held its cores for the whole run.
      const amHeld = ((app.record.startMs ? now - app.record.startMs : 0) * this.options.amResource.vcoresMilli) / 1000;
      history.meanDemandMilli = Math.round((1000 * (app.heldCoreMs + amHeld)) / ranMs);
      this.demand.observe(app.record.name, history.meanDemandMilli);
      this.lifetimes.observeJob(app.record.name, history.durationMs);
    }
    // Durable before anyone is told.
    await this.store.finishApp(app.record, history);
    await this.evictCompleted();
    const keepAm = state !== "KILLED" && app.amContainerId !== undefined;
    this.releaseAll(app, state === "KILLED" ? "KILLED_BY_USER" : "RELEASED", keepAm);
    if (this.history) {
      app.placement = this.history.placement(app.record.appId);
      this.history.remove(app.record.appId);
    }
    this.powerPolicy?.forget(app.record.appId);
    this.nodeChoice?.forget(app.record.appId);
    this.admission.remove(app.record.appId);
    if (!keepAm) this.scheduler.removeApp(app.record.appId);
    else this.scheduler.setAsks(app.record.appId, []);
    this.log.info("application ended", {
      appId: app.record.appId,
      state,
      outcome,
      durationMs: history.durationMs,
      diagnostics,
    });
  }

  /** Forgets the oldest finished applications beyond `maxCompletedApps` (their history entries stay). */
  private async evictCompleted(): Promise<void> {
    const finished = [...this.apps.values()].filter((a) => isTerminal(a.record.state));
    const excess = finished.length - this.options.maxCompletedApps;
    if (excess <= 0) return;
    // Keep an application while its job manager container still runs, so its end is still recorded.
    const victims = finished
      .filter((a) => !a.amContainerId || !this.scheduler.allocation(a.amContainerId))
      .sort((a, b) => a.record.finishMs - b.record.finishMs)
      .slice(0, excess);
    for (const a of victims) this.apps.delete(a.record.appId);
    await this.store.deleteApps(victims.map((a) => a.record.appId));
  }

  private async killApp(appId: string, by = ""): Promise<{ state: string }> {
    const app = this.getApp(appId);
    if (!isTerminal(app.record.state))
      await this.finish(app, "KILLED", "JOB_KILLED", by ? `killed by ${by}` : "killed by user", undefined);
    return { state: app.record.state };
  }

  private listApps(states: string[]): { apps: ApplicationReport[] } {
    const wanted = new Set(states.map((s) => s.toUpperCase()));
    const apps = [...this.apps.values()]
      .filter((a) => wanted.size === 0 || wanted.has(a.record.state))
      .map((a) => this.report(a, false));
    return { apps };
  }

  private report(app: AppRuntime, withContainers = true): ApplicationReport {
    const r = app.record;
    return {
      appId: r.appId,
      name: r.name,
      user: r.user,
      state: r.state,
      outcome: r.outcome,
      diagnostics: r.diagnostics,
      submitMs: r.submitMs,
      startMs: r.startMs,
      finishMs: r.finishMs,
      attempts: r.attempt,
      progress: app.progress ?? null,
      containers: withContainers ? [...app.containers.values()] : [],
      taskContainers: app.taskCounts,
      amContainers: app.amCounts,
      ...this.placementOf(r.appId),
    };
  }

  private placementOf(appId: string): { jobType: string; classes: string[]; placementNote: string } {
    const p = this.history?.placement(appId);
    const q = p ?? this.apps.get(appId)?.placement;
    return { jobType: q?.jobType ?? "", classes: q?.classIds ?? [], placementNote: q?.note ?? "" };
  }

  private nodeReport(n: NodeEntry): NodeReport {
    const view = this.scheduler.nodeView(n.nodeId);
    return {
      nodeId: n.nodeId,
      nmAddress: n.nmAddress,
      rack: n.rack,
      state: n.state,
      capacity: n.capacity,
      primaryUsage: n.primaryUsage,
      allocated: view?.allocated ?? { vcoresMilli: 0, memoryMb: 0 },
      containers: view?.containers ?? 0,
      lastHeartbeatMs: n.lastHeartbeatMs,
      primarySource: n.primarySource,
    };
  }
}

/** Writes a file and fsyncs it before resolving. */
async function writeFileDurably(path: string, data: string): Promise<void> {
  const fh = await open(path, "w");
  try {
    await fh.writeFile(data);
    await fh.sync();
  } finally {
    await fh.close();
  }
}

/** Rejects power fields no meter can produce (the node's stream is closed with the code, as for any bad message). */
function checkPowerFields(hb: NodeHeartbeatOutput): void {
  const bad = (field: string, why: string): never => {
    throw new HarvestError("INVALID_ARGUMENT", `heartbeat ${field} ${why}`, { details: { field } });
  };
  if (!(Number.isFinite(hb.powerWatts) && hb.powerWatts >= 0)) bad("powerWatts", "must be watts >= 0 (0: no reading)");
  if (!(hb.throttledContainers >= 0)) bad("throttledContainers", "must be >= 0");
  if (!(hb.powerKills >= 0)) bad("powerKills", "must be >= 0");
}

function isTerminal(state: AppState): boolean {
  return state === "FINISHED" || state === "FAILED" || state === "KILLED";
}
