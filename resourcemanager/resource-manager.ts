/**
 * The resource manager daemon: the services (client, application-master, resource-tracker and admin protocols) and
 * the wiring of its parts. Node tracking is `NodeTracker` (node-tracker.ts), the application lifecycle (attempts, the
 * AM protocol, recovery after a restart) is `Applications` (applications.ts), with the allocate and heartbeat paths
 * (Allocate, what nodes report of the jobs' containers, grants) in `AppAllocations` (app-allocations.ts), drains are
 * `DrainService` (drain-service.ts), quotes are `JobQuotes`; this class holds the policies they use and the periodic
 * monitor. Its web server (UI, REST, `/metrics`: web.ts, web-pages.ts, rm-metrics.ts) reads what gRPC answers with.
 */
import { ClusterHistory } from "./cluster-history.js";
import { LocalityPolicy } from "./policy/locality.js";
import { ensureDirMode } from "../common/atomic-file.js";
import { join } from "node:path";
import { systemClock } from "../common/clock.js";
import type { Clock } from "../common/clock.js";
import { amTokenVerifier, ANY_CERTIFICATE, Gate, requireAccess } from "../common/auth.js";
import type { CallContext } from "../common/auth.js";
import { INSECURE_WARNING } from "../common/options.js";
import { AdmissionControl, readAdmissionThresholds } from "./admission-control.js";
import { JobDemandModel } from "./policy/admission-queue.js";
import { errorMessage, HarvestError } from "../common/errors.js";
import { bindServer, createServer, loadHarvestProto, shutdownServer, unary } from "../common/grpc.js";
import { Logger } from "../common/log.js";
import { daemonRegistry, grpcServerMetrics } from "../common/metrics.js";
import { dagOfRecord } from "./app-reports.js";
import type { UtilizationSeries } from "../common/trace-io.js";
import type { DaemonState } from "../common/lifecycle.js";
import { ServingDaemon, type ServingOptions } from "../common/serving-daemon.js";
import { WebTokens } from "../common/web-token.js";
import { NodeWebTokens } from "../common/node-web-token.js";
import { averageServerSeries } from "./policy/average-server.js";
import { RmMetrics } from "./rm-metrics.js";
import type { RmGaugeSource } from "./rm-metrics.js";
import { registerRmApi, serviceStateOf } from "./web.js";
import type { RmWebSource } from "./web.js";
import { registerRmPages } from "./web-pages.js";
import { historyPlacementOptions, resolveResourceManagerOptions } from "./options.js";
import type { ResourceManagerOptions } from "./options.js";
import { Applications } from "./applications.js";
import { JobQuotes } from "./job-quotes.js";
import { JobDfsCleanup, keptLogsOf } from "./job-dfs-cleanup.js";
import { logCopySource } from "./log-copies.js";
import { NodeTracker } from "./node-tracker.js";
import type { NodeEntry, NodeEvents, NodeStream } from "./node-tracker.js";
import { AM_PRIORITY, Scheduler, StockSchedulerPolicy } from "./policy/scheduler.js";
import type { NodeView, SchedulerPolicy } from "./policy/scheduler.js";
import { HistorySchedulerPolicy } from "./policy/class-selection.js";
import { SeededRng } from "../common/rng.js";
import { RmStateStore } from "./state-store.js";
import type { RmStore } from "./state-store.js";
import type { RmHaTerm } from "./etcd-state-store.js";
import { haAdminHandlers, loadHaAdminProto, notHaAdmin } from "../common/ha-admin.js";
import { haGauges } from "../common/ha-metrics.js";
import { DrainTracker } from "./policy/drain.js";
import { DrainService } from "./drain-service.js";
import { LifetimeModel } from "./policy/lifetime.js";
import { LifetimeNodeChoice } from "./policy/node-choice.js";
import { PowerDomains } from "./policy/power-domains.js";
import { listMessage, powerAdminHandlers } from "./power-admin.js";
import { PowerAwarePolicy, primaryHistoryOf, primaryOutlook } from "./policy/power-placement.js";
import type { PowerNode } from "./policy/power-placement.js";
import { classesMessage, tenantAdminHandlers, tenantsMessage } from "./tenant-admin.js";
import { TenantRegistry } from "./tenant-registry.js";
import type { ClassSnapshot } from "./tenant-registry.js";
import { HistoryPlacement, LiveClassViews, liveNodeOf, liveUtilization } from "./policy/history-placement.js";
import type { LiveNode } from "./policy/history-placement.js";
import type { ClusterNodesResponse } from "../proto/generated/harvest/v1/ClusterNodesResponse.js";
import type { GetJobHistoryResponse } from "../proto/generated/harvest/v1/GetJobHistoryResponse.js";
import type { ListClassesResponse } from "../proto/generated/harvest/v1/ListClassesResponse.js";
import type { ListTenantsResponse } from "../proto/generated/harvest/v1/ListTenantsResponse.js";

/** How long node managers are told of a finished application (so that one back from a short outage hears of it too). */
const FINISHED_APPS_ANNOUNCED_MS = 10 * 60_000;

/** The resource manager daemon. */
export class ResourceManager extends ServingDaemon {
  readonly options: ResourceManagerOptions;
  protected readonly log: Logger;
  private readonly clock: Clock;
  /** Prometheus metrics of this daemon (process, gRPC calls, `harvest_rm_*`), served at `/metrics`. */
  private readonly registry = daemonRegistry("resourcemanager");
  private readonly server = createServer([grpcServerMetrics(this.registry)]);
  private readonly metrics: RmMetrics;
  private readonly usageHistory: ClusterHistory;
  /** Signs the web UI's login tokens (GetWebToken); its key lives in the data directory, so set at start. */
  private webTokens: WebTokens | undefined;
  /** Who may call what (common/auth.ts); TLS when `tls` is set. */
  private readonly gate: Gate;
  private readonly store: RmStore;
  /** The active term it serves in when highly available (ha-resource-manager.ts); undefined: not HA. */
  private readonly ha: RmHaTerm | undefined;
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
  /** How long tasks and jobs live, learned from the job history (policy/lifetime.ts): drains and node choice ask it. */
  private readonly lifetimes: LifetimeModel;
  /** Power domains: draws per domain, alerts, node budgets. */
  private readonly power: PowerDomains;
  /** The power-aware node choice; undefined under stock placement. */
  private readonly powerPolicy: PowerAwarePolicy | undefined;
  /** The node managers: registration, heartbeats, liveness, kills. */
  private readonly nodes: NodeTracker;
  /** The applications: attempts, the AM protocol, recovery. */
  private readonly apps: Applications;
  /** Where the next offer of every node starts (offerNodes). */
  private offerCursor = 0;
  /** Cancels ended jobs' delegation tokens at the namenode (`nnAddress`). */
  private readonly jobCleanup: JobDfsCleanup;
  /** The drains as the `NodeAdmin` service and the monitor carry them out. */
  private readonly drainService: DrainService;
  private monitorTimer: NodeJS.Timeout | undefined;
  private epoch = 0;

  protected get serving(): ServingOptions {
    return this.options;
  }

  constructor(
    options: Partial<ResourceManagerOptions> & { dataDir: string },
    deps: { clock?: Clock; logger?: Logger; ha?: RmHaTerm } = {},
  ) {
    super("resource manager");
    this.options = resolveResourceManagerOptions(options);
    this.clock = deps.clock ?? systemClock;
    this.gate = new Gate(this.options.tls, { "am-token": amTokenVerifier(this.options.secret, this.clock) });
    this.log = deps.logger ?? new Logger("rm");
    this.ha = deps.ha;
    this.store = deps.ha?.store ?? new RmStateStore(join(this.options.dataDir, "rm-state"));
    this.tenants = new TenantRegistry(
      join(this.options.dataDir, "rm-tenants"),
      this.options.tenants,
      this.clock,
      this.log.child("tenants"),
    );
    this.lifetimes = new LifetimeModel(this.options.lifetimes);
    let policy: SchedulerPolicy = new StockSchedulerPolicy();
    if (this.options.schedulerPolicy === "history") {
      policy = new HistorySchedulerPolicy();
      this.classViews = new LiveClassViews(() => this.liveNodes());
      this.history = new HistoryPlacement(
        policy as HistorySchedulerPolicy,
        historyPlacementOptions(this.options),
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
        admitted: (now) => this.apps.admittedJobs(now),
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
          keyOf: (app, priority) => this.apps.allocations.containerKey(app.appId, priority),
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
        locality: new LocalityPolicy(
          {
            policy: this.options.localityPolicy,
            nodeDelayMs: this.options.nodeLocalityDelayMs,
            rackDelayMs: this.options.rackLocalityDelayMs,
          },
          this.clock,
        ),
      },
      (appId) => this.apps.allocations.newContainerId(appId),
    );
    const choice = this.nodeChoice;
    if (choice)
      this.scheduler.setListener({
        granted: (a) =>
          choice.onGranted({
            containerId: a.containerId,
            nodeId: a.nodeId,
            key: this.apps.allocations.containerKey(a.appId, a.priority),
            startMs: this.clock.nowMs(),
            resource: a.resource,
          }),
        released: (a) => choice.onReleased(a.containerId),
      });
    // Counters are fed as things happen; gauges read the live state at each scrape.
    this.metrics = new RmMetrics(this.registry, this.gaugeSource());
    this.usageHistory = new ClusterHistory(() => this.scheduler.nodeViews(), this.clock, this.options.historySampleMs);
    haGauges(this.registry, () => this.haAdmin().status());
    this.nodes = new NodeTracker(this.options, {
      scheduler: this.scheduler,
      power: this.power,
      drains: this.drains,
      tenants: this.tenants,
      clock: this.clock,
      log: this.log,
      epoch: () => this.epoch,
      haEpoch: () => this.ha?.epoch ?? 0,
      isRunning: () => this.lifecycle.running,
      events: this.nodeEvents(),
    });
    this.jobCleanup = new JobDfsCleanup(
      this.options.nnAddress,
      this.options.tls,
      this.store,
      this.log.child("job-cleanup"),
      undefined,
      keptLogsOf(this.options),
    );
    this.apps = new Applications({
      options: this.options,
      store: this.store,
      scheduler: this.scheduler,
      nodes: this.nodes,
      admission: this.admission,
      demand: this.demand,
      lifetimes: this.lifetimes,
      history: this.history,
      quotes: new JobQuotes(this.tenants, this.lifetimes, this.store, this.scheduler, this.options, this.log),
      powerPolicy: this.powerPolicy,
      nodeChoice: this.nodeChoice,
      clock: this.clock,
      log: this.log,
      // Job managers follow the active one of the list when highly available.
      address: () => this.options.haRmAddresses || this.address,
      epoch: () => this.epoch,
      haEpoch: () => this.ha?.epoch ?? 0,
      observer: this.usageHistory.observing(this.metrics),
      jobCleanup: this.jobCleanup,
      offerNodes: () => this.offerNodes(),
    });
    this.drainService = new DrainService({
      tracker: this.drains,
      scheduler: this.scheduler,
      nodes: this.nodes,
      apps: this.apps,
      store: this.store,
      lifetimes: this.lifetimes,
      clock: this.clock,
      log: this.log,
    });
  }

  /** The nodes that may receive containers (a draining server does not). */
  private *schedulableNodeViews(): IterableIterator<NodeView> {
    for (const v of this.scheduler.nodeViews()) if (!this.drains.isDraining(v.nodeId)) yield v;
  }

  /** Its policy, what it recovered and its power domains, for the "serving" log line. */
  protected onServing(): Record<string, unknown> {
    return {
      policy: this.scheduler.policy.name,
      recoveredApps: this.apps.size,
      powerDomains: this.power.config.domains.length,
    };
  }

  /** Opens the store, recovers applications, binds the server; resolves once serving. */
  protected async startSteps(): Promise<void> {
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
    this.webTokens = new WebTokens(this.ha?.webTokenKey ?? this.options.dataDir, this.clock);
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
    const clusterTs = await this.store.clusterTimestamp(this.epoch);
    for (const d of await this.store.drains()) this.drains.start(d.nodeId, d.startedMs, d.deadlineMs);
    await this.loadLifetimes();
    await this.apps.recover(clusterTs);
    if (this.options.tls && !this.jobCleanup.enabled)
      this.log.warn(
        "no nnAddress: jobs' delegation tokens are not cancelled when the jobs end (they live until they expire)",
      );
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
        GetNewApplication: ["user", "admin"],
        SubmitApplication: ["user", "admin"],
        GetApplication: ANY_CERTIFICATE,
        ListApplications: ANY_CERTIFICATE,
        KillApplication: ["user", "admin"],
        GetClusterNodes: ANY_CERTIFICATE,
        GetJobHistory: ANY_CERTIFICATE,
        // Only a certificate begets a web token (WebTokens.issue refuses a token-holder).
        GetWebToken: ANY_CERTIFICATE,
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
    this.server.addService(proto.ResourceTracker.service, { NodeChannel: (s: NodeStream) => this.nodes.onStream(s) });
    // A job manager acts only on its own application and its current attempt: the AM token names them, and a token of
    // an earlier attempt is refused even when the request names the current one.
    const own = <R extends { appId: string; attempt: number }>(req: R, c: CallContext): R => {
      const who = gate.principal(c);
      if (gate.secure)
        requireAccess(
          who.appId === req.appId &&
            who.attempt === req.attempt &&
            this.apps.get(req.appId)?.record.attempt === req.attempt,
          who,
          `act for ${req.appId} attempt ${req.attempt}`,
        );
      return req;
    };
    this.server.addService(proto.ApplicationMasterService.service, {
      RegisterApplicationMaster: unary((req: { appId: string; attempt: number; maxConcurrency: number }, c) =>
        this.apps.registerAm(own(req, c)),
      ),
      // The token's expiry decides whether the answer carries a fresh one.
      Allocate: unary((req: { appId: string; attempt: number }, c) =>
        this.apps.allocations.allocate(own(req, c) as never, gate.principal(c).expiresMs),
      ),
      FinishApplicationMaster: unary((req: { appId: string; attempt: number }, c) =>
        this.apps.finishAm(own(req, c) as never),
      ),
    });
    this.server.addService(proto.ApplicationClientService.service, {
      GetNewApplication: unary((_req, c) => this.apps.reserveAppId(gate.principal(c).name)),
      SubmitApplication: unary(
        async (req: { dagJson: string; user: string; dfsToken: string; appId: string; stagingDir: string }, c) => {
          // With TLS the submitter is the certificate's name, whatever the request claims.
          const who = gate.principal(c, req.user);
          const s = await this.apps.submit(req.dagJson, who.name, req.dfsToken, req.appId, req.stagingDir);
          // The node managers decide the account; the submitter learns what the running ones said they do.
          return { appId: s.appId, containersRunAs: this.nodes.containersRunAs(), quote: s.quote ?? null };
        },
      ),
      GetApplication: unary((req: { appId: string }) => this.apps.report(this.apps.getApp(req.appId))),
      ListApplications: unary((req: { states: string[] }) => this.apps.list(req.states)),
      KillApplication: unary((req: { appId: string }, c) => {
        const app = this.apps.getApp(req.appId);
        const who = gate.principal(c);
        requireAccess(
          !gate.secure || who.role === "admin" || who.name === app.record.user,
          who,
          `kill ${req.appId} (submitted by ${app.record.user})`,
        );
        return this.apps.kill(req.appId, who.name);
      }),
      GetClusterNodes: unary(() => this.clusterNodes()),
      GetJobHistory: unary((req: { name: string; limit: number }) => this.jobHistory(req.name, req.limit)),
      GetWebToken: unary((req: { lifetimeMs: number }, c) =>
        this.tokens().issue(gate.principal(c), req.lifetimeMs, this.httpUrl ?? ""),
      ),
    });
    this.server.addService(
      proto.TenantAdmin.service,
      tenantAdminHandlers({
        registry: this.tenants,
        nowMs: () => this.clock.nowMs(),
        liveUtilization: (servers) => this.liveUtilizationOf(servers),
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
      Drain: unary((req: { nodeIds: string[]; deadlineMs: number }) =>
        this.drainService.drain(req.nodeIds, req.deadlineMs),
      ),
      Undrain: unary((req: { nodeIds: string[] }) => this.drainService.undrain(req.nodeIds)),
      GetDrainStatus: unary(() => this.drainService.report()),
    });
    const haProto = loadHaAdminProto();
    gate.allow(haProto.HaAdmin.service, { GetHaStatus: ["admin"], Failover: ["admin"] });
    this.server.addService(haProto.HaAdmin.service, haAdminHandlers(this.haAdmin()));
    if (!gate.secure) this.log.warn(INSECURE_WARNING);
    this.boundPort = await bindServer(this.server, this.options.host, this.options.port, gate.credentials());
    this.apps.openResyncWindows();
    // Started after the gRPC bind; on failure the gRPC server and the stores are shut again and the error thrown.
    await this.startWeb({
      title: "Harvest resource manager",
      metrics: this.registry,
      log: this.log.child("web"),
      tokens: this.tokens().verify,
      routes: (web) => {
        const source = this.webSource();
        registerRmApi(web, source);
        registerRmPages(web, source);
      },
      undo: async () => {
        this.lifecycle.beginStop();
        await shutdownServer(this.server, 1_000);
        await this.store.close().catch(() => undefined);
        await this.tenants.close().catch(() => undefined);
        this.lifecycle.stopped();
      },
    });
    await this.jobCleanup.resume();
    this.monitorTimer = setInterval(() => this.monitor(), this.options.monitorIntervalMs);
    await this.usageHistory.restore(this.store, this.log.child("history"));
    this.usageHistory.start();
    this.reclusterTimer = setInterval(() => void this.recluster("periodic"), this.options.reclusterIntervalMs);
  }

  /** Stops serving and closes the store; idempotent. */
  protected async stopSteps(_was: DaemonState): Promise<void> {
    this.jobCleanup.stop();
    if (this.monitorTimer) clearInterval(this.monitorTimer);
    if (this.reclusterTimer) clearInterval(this.reclusterTimer);
    await this.web?.stop();
    await shutdownServer(this.server, 1_000);
    this.nodes.close();
    await this.usageHistory.close();
    await this.store.close().catch(() => undefined);
    await this.tenants.close().catch(() => undefined);
  }

  // ---------------------------------------------------------------------------------------------- web and metrics

  /** HaAdmin's answers: the HA daemon's when highly available, else role "none" (and no failover). */
  private haAdmin(): ReturnType<typeof notHaAdmin> {
    return (
      this.ha?.admin ??
      notHaAdmin(
        "rm",
        () => this.address,
        () => this.httpUrl ?? "",
      )
    );
  }

  private tokens(): WebTokens {
    if (!this.webTokens) throw new HarvestError("UNAVAILABLE", "the resource manager is not started");
    return this.webTokens;
  }

  /** GetClusterNodes' answer (the REST API's nodes are this, plus drain, class and power). */
  private clusterNodes(): ClusterNodesResponse {
    return { nodes: [...this.nodes.all()].map((n) => this.nodes.report(n)) };
  }

  /** GetJobHistory's answer. */
  private async jobHistory(name: string, limit: number): Promise<GetJobHistoryResponse> {
    return { entries: await this.store.history(name, limit) };
  }

  /** TenantAdmin.ListTenants' answer for every tenant: the very function its handler calls. */
  private tenantList(): ListTenantsResponse {
    return tenantsMessage({ registry: this.tenants, liveUtilization: (servers) => this.liveUtilizationOf(servers) });
  }

  /** TenantAdmin.ListClasses' answer: the very function its handler calls. */
  private classList(): ListClassesResponse {
    return classesMessage(this.tenants.snapshot, { liveUtilization: (servers) => this.liveUtilizationOf(servers) });
  }

  /** Live primary utilization (CPU %) averaged over those of `servers` that heartbeat, if any does. */
  private liveUtilizationOf(servers: readonly string[]): number | undefined {
    return liveUtilization(this.liveNodes(servers));
  }

  /** A tenant's average server over the last `days` days, from its servers' stored history. */
  private async tenantSeries(name: string, days: number): Promise<UtilizationSeries> {
    const tenant = this.tenants.tenant(name);
    const now = this.clock.nowMs();
    const fromMs = now - days * 86_400_000;
    const series = await Promise.all(tenant.servers.map((s) => this.tenants.serverSeries(s, fromMs, now + 1)));
    return averageServerSeries(series, { slotSec: this.tenants.options.slotSec, windowDays: days, name });
  }

  /** What the web server reads: the functions the gRPC handlers answer with, and a few facts. */
  private webSource(): RmWebSource {
    const nodeTokens = this.options.secret ? new NodeWebTokens(this.options.secret, this.clock) : undefined;
    return {
      nodeWebUrl: (nodeId) => this.nodes.get(nodeId)?.webUrl ?? "",
      nodeWebToken: (viewer) => (viewer && nodeTokens?.issue(viewer)) || undefined,
      ...logCopySource(this.options.nnAddress, this.options.tls, (appId) => this.apps.getApp(appId).record),
      listApplications: (states) => this.apps.list(states),
      getApplication: (appId) => this.apps.report(this.apps.getApp(appId)),
      dagOf: (appId) => dagOfRecord(this.apps.get(appId)?.record, this.options.maxParallelism),
      getClusterNodes: () => this.clusterNodes(),
      getJobHistory: (name, limit) => this.jobHistory(name, limit),
      listTenants: () => this.tenantList(),
      listClasses: () => this.classList(),
      listDomains: () => listMessage(this.power.snapshot()),
      getDrainStatus: () => this.drainService.report(),
      nodeClass: (nodeId) => this.tenants.snapshot.stats.get(this.tenants.ownerOf(nodeId)?.name ?? "")?.classId ?? "",
      nodeSamples: (nodeId) => this.nodes.get(nodeId)?.recent.toArray() ?? [],
      clusterHistory: () => this.usageHistory,
      serverUtilization: (nodeId, fromMs, toMs) => this.tenants.serverSeries(nodeId, fromMs, toMs),
      tenantUtilization: (tenant, days) => this.tenantSeries(tenant, days),
      info: () => ({
        state: this.lifecycle.state,
        startedMs: this.epoch,
        rmAddress: this.address,
        secure: this.gate.secure,
        schedulerPolicy: this.options.schedulerPolicy,
        nodeChoice: this.options.nodeChoice,
        admission: this.options.admission,
        powerPlacement: this.options.powerPlacement,
        reserveFraction: this.options.reserveFraction,
        heartbeatIntervalMs: this.options.heartbeatIntervalMs,
        admissionQueueLength: this.admission.waiting,
        ha: { role: this.haAdmin().status().role ?? "none", epoch: this.ha?.epoch ?? 0 },
      }),
    };
  }

  /** What the `harvest_rm_*` gauges read at each scrape. */
  private gaugeSource(): RmGaugeSource {
    return {
      nodesByState: () => {
        const drains = new Map(this.drains.status().map((d) => [d.nodeId, d.state]));
        const by: Record<string, number> = {};
        for (const n of this.nodes.all()) {
          const state = serviceStateOf(n.state, drains.get(n.nodeId) ?? "");
          by[state] = (by[state] ?? 0) + 1;
        }
        return by;
      },
      containersRunning: () => {
        const by = { job_manager: 0, task: 0 };
        for (const v of this.scheduler.nodeViews())
          for (const a of this.scheduler.containersOn(v.nodeId))
            by[a.priority === AM_PRIORITY ? "job_manager" : "task"]++;
        return by;
      },
      appsByState: () => {
        const by: Record<string, number> = {};
        for (const a of this.apps.list([]).apps) by[a.state ?? ""] = (by[a.state ?? ""] ?? 0) + 1;
        return by;
      },
      admissionQueueLength: () => this.admission.waiting,
      millicores: () => {
        const v = { capacity: 0, primary: 0, allocated: 0 };
        // The scheduler holds the registered nodes that are not lost.
        for (const n of this.scheduler.nodeViews()) {
          v.capacity += n.capacity.vcoresMilli;
          v.primary += n.primaryUsage.vcoresMilli;
          v.allocated += n.allocated.vcoresMilli;
        }
        return v;
      },
      powerDomains: () => this.power.snapshot().domains,
    };
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
    const entries = ids ? ids.flatMap((id) => this.nodes.get(id) ?? []) : [...this.nodes.all()];
    const out: LiveNode[] = [];
    for (const n of entries) {
      if (n.state !== "RUNNING") continue;
      const view = this.scheduler.nodeView(n.nodeId);
      if (view) out.push(liveNodeOf(view, this.options.reserveFraction));
    }
    return out;
  }

  // ---------------------------------------------------------------------------------------------- node events

  private nodeEvents(): NodeEvents {
    return {
      containers: (node, statuses, how) => this.apps.allocations.onNodeContainers(node, statuses, how),
      atRisk: (node, ids) => this.apps.allocations.onAtRisk(node, ids),
      heartbeat: (node) => {
        this.metrics.onHeartbeat();
        this.logPowerAlerts();
        this.grantOn(node);
      },
      lost: (node, allocations) => this.apps.allocations.onNodeLost(node, allocations),
      finishedApps: () => this.apps.finishedSince(this.clock.nowMs() - FINISHED_APPS_ANNOUNCED_MS),
    };
  }

  /** Grants what the scheduler gives on `node` now, and hands each grant to its job. */
  private grantOn(node: NodeEntry): void {
    for (const alloc of this.scheduler.allocateOnNode(node.nodeId)) {
      this.metrics.onAllocated(alloc.priority === AM_PRIORITY ? "job_manager" : "task", alloc.locality);
      this.apps.allocations.onAllocated(alloc, node);
    }
  }

  /**
   * Offers every running node to the scheduler at once, for new demand (a job manager asking for more, a job waiting
   * for its job manager's container), instead of waiting up to a heartbeat interval for each node's next heartbeat. The
   * scheduler sees each node as its last heartbeat left it, less what it granted since. The offer starts one node
   * further on each time, so that the first node in the list is not always the first offered.
   */
  private offerNodes(): void {
    if (!this.lifecycle.running) return;
    const running = [...this.nodes.all()].filter((n) => n.state === "RUNNING");
    if (running.length === 0) return;
    const start = this.offerCursor++ % running.length;
    for (let i = 0; i < running.length; i++) this.grantOn(running[(start + i) % running.length]!);
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

  private monitor(): void {
    const now = this.clock.nowMs();
    this.nodes.expire(now);
    this.apps.tick(now);
    this.drainService.step(now);
    this.nodeChoice?.tick(now);
    this.history?.retryWaiting();
    this.power.tick();
    this.logPowerAlerts();
  }

  // ---------------------------------------------------------------------------------------------- admission

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
    for (const n of this.nodes.all()) {
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

  /** Whether a server's tenant was found periodic at the last classification. */
  private isPeriodic(server: string): boolean {
    const tenant = this.tenants.ownerOf(server);
    if (!tenant) return false;
    return this.tenants.snapshot.classes.some((c) => c.pattern === "periodic" && c.tenantIds.includes(tenant.name));
  }

  // ---------------------------------------------------------------------------------------------- lifetimes

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
}
