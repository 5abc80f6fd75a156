/**
 * The node manager daemon, one per server: launches containers as real processes, watches the server's primary tenant,
 * kills its own work when the primary needs the cores back (the yield controller: youngest first, or the least work
 * lost), and heartbeats the resource manager over one long-lived stream, reconnecting with backoff when the resource
 * manager goes away.
 */
import type * as grpc from "@grpc/grpc-js";
import type { ChildProcess } from "node:child_process";
import { join, resolve } from "node:path";
import { systemClock } from "../common/clock.js";
import type { Clock } from "../common/clock.js";
import { amTokenVerifier, Gate, shuffleTokenVerifier } from "../common/auth.js";
import { ensureDirMode } from "../common/atomic-file.js";
import { INSECURE_WARNING } from "../common/options.js";
import { errorMessage, HarvestError } from "../common/errors.js";
import { RegisteredStream } from "../common/registered-stream.js";
import { RmChannel } from "./rm-follower.js";
import { bindServer, createServer, loadHarvestProto, shutdownServer } from "../common/grpc.js";
import { parseAppId } from "../common/ids.js";
import { Logger } from "../common/log.js";
import { grpcServerMetrics } from "../common/metrics.js";
import type { DaemonState } from "../common/lifecycle.js";
import { ServingDaemon, type ServingOptions } from "../common/serving-daemon.js";
import type { ContainerTokens } from "../common/task-contract.js";
import { containerCgroupName, detectCgroups } from "./cgroups.js";
import type { CgroupController } from "./cgroups.js";
import { ContainerProcess, privateTmpUnsupported } from "./container.js";
import { ContainerRecords, containerStatus, killLeftovers, startOrphanReaper } from "./container-records.js";
import { cappingInputs, containersCpuMs, containersMemoryBytes } from "./capping-inputs.js";
import type { CpuSeen } from "./capping-inputs.js";
import { TaskStatusTracker } from "./task-status.js";
import { removeApplicationData } from "./shuffle-service.js";
import { addShuffleService } from "./shuffle-server.js";
import { NodeFiles } from "./node-files.js";
import type { ExitCause } from "./container.js";
import { resolveNodeManagerOptions } from "./options.js";
import { ContainerAccounts } from "./run-as.js";
import { checkAccountReach, checkStartRequest, containerEnvironment } from "./container-launch.js";
import { reopenLeases, retireLeasedAccount } from "./retire-account.js";
import { parseUidRange, UidLeases } from "./uid-leases.js";
import type { ContainerAccount } from "./run-as.js";
import type { NodeManagerOptions } from "./options.js";
import { createPrimaryMonitor } from "../common/primary-monitor.js";
import type { PrimaryMonitor, PrimarySample } from "../common/primary-monitor.js";
import { CappingAgent, heartbeatPowerFields } from "./policy/capping-agent.js";
import type { CappingSnapshot } from "./policy/capping-agent.js";
import { createPowerMeter, nodePowerMeterSpec } from "./power-meter.js";
import type { PowerMeter } from "./power-meter.js";
import { createThrottler } from "./throttler.js";
import { chooseVictims } from "./policy/yield-controller.js";
import { yieldInput } from "./yield-inputs.js";
import { PreemptionNotices } from "./preemption-notices.js";
import { NodeManagerMetrics } from "./nm-metrics.js";
import type { ContainerStatus } from "../proto/generated/harvest/v1/ContainerStatus.js";
import type { NodeToRm } from "../proto/generated/harvest/v1/NodeToRm.js";
import type { RegisterNode } from "../proto/generated/harvest/v1/RegisterNode.js";
import type { RmToNodeOutput } from "../proto/generated/harvest/v1/RmToNode.js";
import type { StartContainerRequestOutput } from "../proto/generated/harvest/v1/StartContainerRequest.js";
import { emitEvent } from "../common/events.js";
import { NodeWebTokens } from "../common/node-web-token.js";
import { LogUploader, uploaderOptions } from "./log-upload.js";
import { registerNodeLogPages } from "./log-pages.js";
import { addContainerService } from "./container-service.js";

/** A preemption the yield controller carried out (for logs, tests and the yield benchmark). */
export interface PreemptionEvent {
  containerId: string;
  appId: string;
  atMs: number;
  primaryMilli: number;
  allowanceMilli: number;
}

/** Things a node manager can be given instead of building them from options (tests, benchmarks). */
export interface NodeManagerDeps {
  clock?: Clock;
  logger?: Logger;
  /** A primary-tenant monitor to use instead of the one `options.primary` names. */
  monitor?: PrimaryMonitor;
  onPreempt?: (e: PreemptionEvent) => void;
  /** A power meter to use instead of the one `options.powerMeter` names. */
  powerMeter?: PowerMeter;
}

/**
 * About the most bytes of running tasks' reports one heartbeat carries (measured: 32 tasks each with 32 counters of
 * 128-character names changing every second would send 147 KB a heartbeat); the rest wait for the next ones.
 */
const TASK_REPORT_BUDGET_BYTES = 32 * 1024;

/** The node manager daemon. */
export class NodeManager extends ServingDaemon {
  readonly options: NodeManagerOptions;
  private readonly clock: Clock;
  protected readonly log: Logger;
  /** Prometheus metrics (nm-metrics.ts); the gRPC server counts its calls there too. */
  private readonly metrics: NodeManagerMetrics;
  private readonly server: grpc.Server;
  /** Who may call what (common/auth.ts); TLS when `tls` is set. */
  private readonly gate: Gate;
  private readonly containers = new Map<string, ContainerProcess>();
  /** Exited containers whose logs are being copied into the DFS: reported complete once copied (log-upload.ts). */
  private readonly uploading = new Map<string, ContainerProcess>();
  /** Copies exited containers' logs into the DFS. */
  private readonly uploader: LogUploader;
  /** Completed containers not yet acknowledged by the resource manager. */
  private readonly unacked = new Map<string, ContainerProcess>();
  /** Containers being killed (by the yield controller, the capping agent, a release...): counted as killed once. */
  private readonly dying = new Set<string>();
  /** Containers whose resources are being localized: not started yet, their cores held. */
  private readonly localizing = new Map<string, { vcoresMilli: number; stopped: boolean }>();
  /** Finished applications whose data this node manager has removed (bounded). */
  private readonly cleanedApps = new Set<string>();
  /** When this node manager first heard that an application ended (its data goes `finishedAppRetentionMs` later). */
  private readonly finishedHeardMs = new Map<string, number>();
  /** When the yield controller chose each container it is killing (performance.now()), for the yield latency. */
  private readonly yieldChosenAt = new Map<string, number>();
  /** The preemption notice: containers newly at risk at each yield tick, for the next heartbeat. */
  private readonly notices: PreemptionNotices;
  /** The watchdog that kills the containers if this process dies. */
  private reaper: ChildProcess | undefined;
  /** Completions found on disk at start (a previous run of this node manager died before reporting them). */
  private readonly restored = new Map<string, ContainerStatus>();
  /** Completions the resource manager recorded, kept `completedRetentionMs` for a re-registration (oldest first). */
  private readonly recorded = new Map<string, ContainerProcess>();
  private cgroups!: CgroupController;
  /** The file cache, the localized task runtime and the Node binary containers run. */
  private files!: NodeFiles;
  /** Whom each container runs as (never root). */
  private readonly accounts: ContainerAccounts;
  /** The host's container uid leases, when this node manager is root and gives applications accounts of their own. */
  private readonly leases: UidLeases | undefined;
  /** A job's directory in a local staging directory, handed to its account at its job manager's launch (run-as.ts). */
  private readonly handedStaging = new Map<string, string>();
  /** Whether containers get a private /tmp and /dev/shm (decided at start: root, the option, and the server's support). */
  private privateTmp = false;
  /** What this node keeps of its containers on disk: owners, exits, logs (container-records.ts). */
  private readonly records: ContainerRecords;
  private monitor!: PrimaryMonitor;
  private lastSample: PrimarySample = { cpuMilli: 0, utilization: 0 };
  /** The registered stream to the resource manager: registration and heartbeats out, acks and kills back. */
  private readonly rmStream: RegisteredStream<NodeToRm, RmToNodeOutput, RmChannel>;
  private readonly rmChannel: RmChannel; // the resource managers (the active of a list) and the highest term heard
  private heartbeatIntervalMs: number;
  private heartbeatTimer: NodeJS.Timeout | undefined;
  private yieldTimer: NodeJS.Timeout | undefined;
  private urgentTimer: NodeJS.Timeout | undefined;
  private seq = 0;
  private capping!: CappingAgent;
  private cappingTimer: NodeJS.Timeout | undefined;
  /** Running tasks' progress and counters from their status files. */
  private readonly taskStatus = new TaskStatusTracker((containerId, reason, why) => {
    this.metrics.taskStatusRejected(reason);
    this.log.warn("ignoring a task's status file", { containerId, reason, why });
  });
  /** Per container: cumulative CPU ms and when it was read, for the CPU rate the capping agent needs. */
  private readonly cpuSeen = new Map<string, CpuSeen>();

  protected get serving(): ServingOptions {
    return this.options;
  }

  constructor(
    options: Partial<NodeManagerOptions> & { nodeId: string; rmAddress: string; dataDir: string },
    private readonly deps: NodeManagerDeps = {},
  ) {
    super("node manager");
    this.options = resolveNodeManagerOptions(options);
    const root = process.getuid?.() === 0;
    this.leases =
      root && this.options.containerRunAs !== "fixed"
        ? new UidLeases(this.options.containerUidLeaseDir, parseUidRange(this.options.containerUidRange), {
            dataDir: resolve(this.options.dataDir),
            nodeId: this.options.nodeId,
          })
        : undefined;
    this.accounts = new ContainerAccounts({
      mode: this.options.containerRunAs,
      fixed: this.options.containerUser,
      minUid: this.options.containerMinUid,
      trustSubmitter: this.options.tls !== undefined,
      ...(this.leases ? { leases: this.leases } : {}),
    });
    this.gate = new Gate(this.options.tls, {
      "am-token": amTokenVerifier(this.options.secret, deps.clock ?? systemClock),
      "shuffle-token": shuffleTokenVerifier(this.options.secret),
    });
    this.clock = deps.clock ?? systemClock;
    this.log = deps.logger ?? new Logger(`nm:${this.options.nodeId}`);
    this.notices = new PreemptionNotices(this.options);
    this.records = new ContainerRecords(this.options.dataDir, this.options.nodeId, this.log, (id) => {
      return (this.containers.get(id) ?? this.uploading.get(id) ?? this.unacked.get(id))?.spec.workDir;
    });
    this.uploader = new LogUploader(uploaderOptions(this.options), this.log);
    this.metrics = new NodeManagerMetrics(this.options.nodeId, {
      capacityMilli: this.options.capacity.vcoresMilli,
      running: () => this.runningSpecs(),
      primary: () => this.lastSample,
      capping: () => this.capping?.snapshot(),
    });
    this.server = createServer([grpcServerMetrics(this.metrics.registry)]);
    this.heartbeatIntervalMs = this.options.heartbeatIntervalMs;
    this.rmChannel = new RmChannel(this.options.rmAddress, this.options.tls, this.options.dataDir, this.log);
    this.rmStream = new RegisteredStream<NodeToRm, RmToNodeOutput, RmChannel>({
      master: "resource manager",
      timing: this.options,
      log: this.log,
      address: this.options.rmAddress,
      dial: () => this.rmChannel,
      openStream: (channel) => channel.open(),
      registration: () => ({ register: this.registration() }),
      onMessage: (msg) => this.onRmMessage(msg),
      onLost: () => {
        if (this.heartbeatTimer) clearInterval(this.heartbeatTimer);
        this.heartbeatTimer = undefined;
      },
      isRunning: () => this.lifecycle.running,
    });
  }

  /** Whether the resource manager has acknowledged this node's registration on the current stream. */
  get isRegistered(): boolean {
    return this.rmStream.registered;
  }

  /** The latest primary-tenant sample. */
  get primarySample(): PrimarySample {
    return this.lastSample;
  }

  /** The capping agent's view: draw, meter, budget in force, state, throttled containers, kills. */
  get power(): CappingSnapshot {
    return this.capping.snapshot();
  }

  /** Sets (or with 0 removes) this server's own power budget, on top of any its power domain imposes. */
  setPowerBudget(watts: number): void {
    this.capping.setNodeBudget(watts);
  }

  /** Registers with the resource manager (its stream reconnects from here on); its capacity and power, for the log. */
  protected onServing(): Record<string, unknown> {
    this.rmStream.connect();
    return {
      capacity: this.options.capacity,
      primary: this.monitor.source,
      powerMeter: this.capping.snapshot().meter,
      powerBudgetWatts: this.options.powerBudgetWatts || undefined,
    };
  }

  /** Detects cgroups, starts the monitor and the server, connects to the resource manager. */
  protected async startSteps(): Promise<void> {
    // Containers pass through to their own work directories below; nothing else here is theirs to list.
    for (const dir of [this.options.dataDir, join(this.options.dataDir, "containers")])
      if (!ensureDirMode(dir, 0o711)) this.log.warn("cannot set the mode of a directory", { dir, mode: "711" });
    for (const [id, st] of this.records.restoreExits(this.clock.nowMs() - this.options.completedRetentionMs))
      this.restored.set(id, st);
    if (this.restored.size > 0) this.log.info("exits recorded by a previous run", { containers: this.restored.size });
    killLeftovers(this.options.dataDir, this.log);
    this.uploader.recover(this.records.listContainers(), this.clock.nowMs() - this.options.completedRetentionMs);
    if (this.leases) reopenLeases(this.leases, this.options.dataDir, this.log);
    this.files = new NodeFiles(this.options, this.log);
    await this.files.open(this.accounts.switches ? this.accounts.probeAccount : undefined);
    if (this.options.orphanReaper) this.reaper = startOrphanReaper(this.options.dataDir, this.log);
    this.cgroups = detectCgroups(containerCgroupName(this.options), this.options.cgroups);
    this.log.info("cpu limits", { mode: this.cgroups.mode, detail: this.cgroups.reason });
    if (this.accounts.switches && this.options.containerPrivateTmp) {
      const why = privateTmpUnsupported();
      this.privateTmp = why === undefined;
      if (why) this.log.warn("containers share the server's /tmp and /dev/shm (TMPDIR is their own)", { why });
    }
    if (this.accounts.switches)
      this.log.info("containers run as", { ...this.accounts.describe(), privateTmp: this.privateTmp });
    else this.log.warn("the node manager is not root: containers run as its own user", this.accounts.describe());
    this.monitor =
      this.deps.monitor ??
      createPrimaryMonitor(this.options.primary, {
        capacityMilli: this.options.capacity.vcoresMilli,
        clock: this.clock,
        log: this.log,
        speed: this.options.primarySpeed,
        offsetMs: this.options.primaryOffsetMs,
        containerCpuMs: () => containersCpuMs(this.cgroups, this.containers.values()),
        capacityMemoryMb: this.options.capacity.memoryMb,
        containerMemoryBytes: () => this.containerMemoryBytes(),
      });
    await this.monitor.start();
    emitEvent({ type: "primary-monitor-started", daemon: this.options.nodeId });
    this.lastSample = this.monitor.sample();
    const proto = loadHarvestProto();
    const gate = addContainerService(this.server, this.gate, proto, {
      records: this.records,
      caPath: this.options.tls?.ca,
      start: (req) => this.startContainer(req),
      stop: (id) => this.stopContainer(id),
      status: (id) => this.status(this.getContainer(id)),
    });
    addShuffleService(this.server, this.gate, proto, {
      dataDir: this.options.dataDir,
      isLive: (id) => this.containers.has(id) || this.localizing.has(id),
      primaryBusy: () => this.lastSample.utilization >= this.options.shuffleBusyUtilization,
      busyBytesPerSec: this.options.shuffleBusyMBps * 1024 * 1024,
      served: (bytes) => this.metrics.shuffleServed(bytes),
    });
    if (!gate.secure) this.log.warn(INSECURE_WARNING);
    this.capping = this.createCappingAgent();
    this.boundPort = await bindServer(this.server, this.options.host, this.options.port, gate.credentials());
    // `/metrics` and the container log pages (log-pages.ts), with the cluster-wide node web tokens.
    await this.startWeb({
      title: "Harvest node manager",
      metrics: this.metrics.registry,
      log: this.log,
      ...(this.options.secret ? { tokens: new NodeWebTokens(this.options.secret, this.clock).verify } : {}),
      routes: (web) =>
        registerNodeLogPages(web, {
          nodeId: this.options.nodeId,
          records: this.records,
          secure: gate.secure,
          liveState: (id) => (this.containers.has(id) ? "RUNNING" : undefined),
        }),
      undo: () => shutdownServer(this.server, 0),
    });
    this.yieldTimer = setInterval(() => this.yieldTick(), this.options.yieldTickMs);
    this.cappingTimer = setInterval(() => this.cappingTick(), this.options.cappingPeriodMs);
  }

  /** Kills every container, closes the stream and the server; idempotent. */
  protected async stopSteps(_was: DaemonState): Promise<void> {
    for (const t of [this.heartbeatTimer, this.yieldTimer, this.urgentTimer, this.cappingTimer]) if (t) clearTimeout(t);
    // Continue every throttled container first: a stopped process does not act on SIGTERM.
    this.capping?.close();
    for (const c of this.containers.values()) {
      if (!this.dying.has(c.spec.containerId)) this.metrics.containerKilled("LOST");
      c.killNow("LOST");
    }
    await Promise.all([...this.containers.values()].map((c) => c.waitForExit()));
    await this.uploader.close();
    this.rmStream.close();
    await shutdownServer(this.server, 1_000);
    await this.web?.stop();
    await this.monitor?.stop();
    this.cgroups?.close();
    this.reaper?.stdin?.end();
  }

  // ---------------------------------------------------------------------------------------------- resource manager

  /** The registration: this node, its capacity, and every container a restarted resource manager needs to know. */
  private registration(): RegisterNode {
    return {
      nodeId: this.options.nodeId,
      nmAddress: this.address,
      rack: this.options.rack,
      capacity: this.options.capacity,
      primarySource: this.monitor.source,
      // Everything a restarted resource manager needs to keep the work: what runs, and what finished recently (it may
      // have recorded a completion and died before its job manager heard of it).
      containers: [
        ...this.statuses([...this.containers.values(), ...this.uploading.values(), ...this.unacked.values()], true),
        ...this.statuses([...this.recorded.values()], true),
        ...this.restored.values(),
      ],
      powerProfile: this.options.powerProfile,
      chassis: this.options.powerDomain,
      containersRunAs: String(this.accounts.describe().runAs),
      webUrl: this.httpUrl ?? "",
    };
  }

  private onRmMessage(msg: RmToNodeOutput): void {
    if (!this.rmChannel.accept(msg)) return;
    if (msg.registered) {
      this.rmStream.markRegistered();
      this.heartbeatIntervalMs = msg.registered.heartbeatIntervalMs || this.options.heartbeatIntervalMs;
      if (this.heartbeatTimer) clearInterval(this.heartbeatTimer);
      this.heartbeatTimer = setInterval(() => this.heartbeat(), this.heartbeatIntervalMs);
      this.log.info("registered with the resource manager", { rm: this.rmChannel.address });
      emitEvent({
        type: "node-registered",
        daemon: this.options.nodeId,
        heartbeatIntervalMs: this.heartbeatIntervalMs,
      });
      this.heartbeat();
    } else if (msg.ack) {
      this.capping.setDomainBudget(msg.ack.nodeBudgetWatts, msg.ack.budgetDomain);
      for (const id of msg.ack.completedRecorded) this.onRecorded(id);
      for (const k of msg.ack.containersToKill) {
        const c = this.containers.get(k.containerId);
        if (c) {
          this.log.info("killing container at the resource manager's request", {
            containerId: k.containerId,
            cause: k.cause,
          });
          this.countKill(k.containerId, k.cause as ExitCause);
          this.dying.add(k.containerId);
          this.capping.forget(k.containerId);
          c.kill(k.cause as ExitCause, this.options.killGraceMs);
        }
      }
      for (const appId of msg.ack.finishedApps) this.cleanUpApplication(appId);
    }
  }

  /**
   * An application ended: its tasks' intermediate outputs and its private file cache go `finishedAppRetentionMs` after
   * this node manager first heard so, once none of its containers runs here or has its logs being copied any more
   * (their logs stay, for `harvest job logs`). Each application once.
   */
  private cleanUpApplication(appId: string): void {
    if (this.cleanedApps.has(appId)) return;
    const now = Date.now();
    const heard = this.finishedHeardMs.get(appId) ?? now;
    this.finishedHeardMs.set(appId, heard);
    if (now - heard < this.options.finishedAppRetentionMs) return;
    for (const c of [...this.containers.values(), ...this.uploading.values()]) if (c.spec.appId === appId) return;
    try {
      parseAppId(appId);
    } catch {
      return;
    }
    this.finishedHeardMs.delete(appId);
    this.cleanedApps.add(appId);
    this.uploader.forgetApplication(appId);
    if (this.cleanedApps.size > 10_000) this.cleanedApps.delete(this.cleanedApps.values().next().value!);
    removeApplicationData(this.options.dataDir, appId)
      .then(async (removed) => {
        await this.files.fileCache.forgetApplication(appId);
        if (removed > 0) this.log.info("finished application's outputs removed", { appId, containers: removed });
        this.retireAccount(appId);
      })
      .catch((err: unknown) =>
        this.log.warn("could not remove a finished application's outputs", { appId, error: errorMessage(err) }),
      );
  }

  /** Ends a finished application's lease of its uid once nothing of it remains here (retire-account.ts). */
  private retireAccount(appId: string): void {
    if (!this.leases) return;
    const staging = this.handedStaging.get(appId);
    const done = retireLeasedAccount(this.leases, this.options.dataDir, appId, staging, this.log);
    if (done) this.handedStaging.delete(appId);
    // Still in use: tried again at the resource manager's next word that the application ended.
    else this.cleanedApps.delete(appId);
  }

  /** The resource manager recorded a completion: kept a while for a re-registration, then forgotten. */
  private onRecorded(containerId: string): void {
    this.restored.delete(containerId);
    const c = this.unacked.get(containerId);
    if (!c) return;
    this.unacked.delete(containerId);
    this.recorded.set(containerId, c);
    const cutoff = this.clock.nowMs() - this.options.completedRetentionMs;
    for (const [id, old] of this.recorded) {
      if (old.finishedMs >= cutoff) break;
      this.recorded.delete(id);
    }
  }

  private heartbeat(): void {
    if (!this.rmStream.registered) return;
    const containers = this.statuses([...this.containers.values(), ...this.unacked.values()], false);
    for (const st of this.restored.values()) containers.push(st);
    this.metrics.heartbeatSent();
    this.rmStream.send({
      heartbeat: {
        seq: ++this.seq,
        timeMs: this.clock.nowMs(),
        primaryUsage: {
          vcoresMilli: Math.round(this.lastSample.cpuMilli),
          memoryMb: Math.round(this.lastSample.memoryMb ?? 0),
        },
        containers,
        ...heartbeatPowerFields(this.capping.snapshot()),
        containersAtRisk: this.notices.takeForHeartbeat(),
      },
    });
    // The running tasks' status files, read for the next heartbeat (never waited for: task-status.ts).
    const tasks = [...this.containers.values()].filter((c) => !c.spec.isAm && c.state === "RUNNING");
    void this.taskStatus.poll(tasks.map((c) => ({ containerId: c.spec.containerId, workDir: c.spec.workDir })));
  }

  /** Sends a heartbeat soon (coalescing bursts) so the resource manager learns of completions without waiting. */
  private heartbeatSoon(): void {
    if (this.urgentTimer) return;
    this.urgentTimer = setTimeout(() => {
      this.urgentTimer = undefined;
      this.heartbeat();
    }, 20);
  }

  // ---------------------------------------------------------------------------------------------- yielding

  /** One yield-controller tick: sample the primary and kill the secondary work that no longer fits (victimOrder). */
  private yieldTick(): void {
    try {
      this.lastSample = this.monitor.sample();
    } catch (err) {
      this.log.warn("primary monitor failed; keeping the last sample", { error: errorMessage(err) });
    }
    const live = [...this.containers.values()].filter(
      (c) => c.state === "RUNNING" && c.cause === undefined && !this.dying.has(c.spec.containerId),
    );
    const input = yieldInput(live, this.lastSample, this.options, this.clock.nowMs(), (id) =>
      this.taskStatus.progress(id),
    );
    const decision = chooseVictims(input);
    for (const id of decision.victims) {
      const c = this.containers.get(id);
      if (!c) continue;
      this.countKill(id, "PREEMPTED_BY_PRIMARY");
      this.yieldChosenAt.set(id, performance.now());
      this.dying.add(id);
      this.log.info("primary tenant needs the cores: preempting", {
        containerId: id,
        primaryMilli: Math.round(this.lastSample.cpuMilli),
        allowanceMilli: decision.allowanceMilli,
        secondaryMilli: decision.secondaryMilli,
      });
      emitEvent({ type: "container-preempted", daemon: this.options.nodeId, containerId: id });
      this.capping.forget(id);
      c.kill("PREEMPTED_BY_PRIMARY", this.options.killGraceMs);
      this.deps.onPreempt?.({
        containerId: id,
        appId: c.spec.appId,
        atMs: this.clock.nowMs(),
        primaryMilli: this.lastSample.cpuMilli,
        allowanceMilli: decision.allowanceMilli,
      });
    }
    // After the kills, on the same input: the notice never delays nor changes them.
    for (const id of this.notices.tick(input)) {
      this.log.info("primary tenant close to needing the cores: preemption notice", {
        containerId: id,
        primaryMilli: Math.round(this.lastSample.cpuMilli),
      });
      this.metrics.preemptionNoticed();
      emitEvent({ type: "preemption-notice", daemon: this.options.nodeId, containerId: id });
    }
  }

  /** Memory this node's running containers use now: their cgroup's, else their process trees' resident memory. */
  private containerMemoryBytes(): number {
    return containersMemoryBytes(this.cgroups, containerCgroupName(this.options), this.containers.values());
  }

  // ---------------------------------------------------------------------------------------------- power capping

  private createCappingAgent(): CappingAgent {
    const inputs = { utilization: () => this.capping?.serverUtilization ?? 0 };
    const o = this.options;
    const meter = this.deps.powerMeter ?? createPowerMeter(nodePowerMeterSpec(o.powerMeter, o.powerProfile), inputs);
    const throttler = createThrottler(this.cgroups, { mode: o.throttle });
    this.log.info("power capping", {
      meter: meter.description,
      throttle: throttler.mode,
      budgetWatts: o.powerBudgetWatts || "none",
    });
    return new CappingAgent(
      {
        meter,
        throttler,
        log: this.log,
        kill: (id, reason) => {
          const c = this.containers.get(id);
          if (!c || this.dying.has(id)) return;
          this.countKill(id, "PREEMPTED_BY_POWER");
          this.dying.add(id);
          this.log.info("over the power budget after throttling: killing", { containerId: id, reason });
          c.kill("PREEMPTED_BY_POWER", this.options.killGraceMs);
        },
      },
      o.capacity.vcoresMilli,
      { capping: o.capping, nodeBudgetWatts: o.powerBudgetWatts },
    );
  }

  /** One capping-agent period: measure each container's CPU rate, then let the agent read the meter and act. */
  private cappingTick(): void {
    try {
      const now = this.clock.nowMs();
      // Containers being killed are out of the agent's hands (continued, never stopped again: SIGTERM must land).
      const live = [...this.containers.values()].filter(
        (c) => c.state === "RUNNING" && c.cause === undefined && !this.dying.has(c.spec.containerId),
      );
      const agentContainers = cappingInputs(live, this.cgroups, this.cpuSeen, now);
      this.capping.tick(now, this.lastSample.cpuMilli / 1000, agentContainers);
    } catch (err) {
      this.log.warn("capping tick failed", { error: errorMessage(err) });
    }
  }

  // ---------------------------------------------------------------------------------------------- containers

  private async startContainer(req: StartContainerRequestOutput): Promise<{ pid: number }> {
    if (!this.lifecycle.running) throw new HarvestError("UNAVAILABLE", "node manager is not running");
    const { grant, resource } = checkStartRequest(req, { ...this.options, minEpoch: this.rmChannel.epoch });
    if ([this.containers, this.uploading, this.unacked, this.localizing].some((m) => m.has(grant.id)))
      throw new HarvestError("CONTAINER_ALREADY_EXISTS", `container ${grant.id} was already started here`);
    let held = 0;
    for (const c of this.containers.values()) held += c.spec.vcoresMilli;
    for (const l of this.localizing.values()) held += l.vcoresMilli;
    if (held + resource.vcoresMilli > this.options.capacity.vcoresMilli) {
      throw new HarvestError(
        "NODE_INSUFFICIENT_RESOURCES",
        `node ${this.options.nodeId} holds ${held} millicores of ${this.options.capacity.vcoresMilli}; cannot add ${resource.vcoresMilli}`,
      );
    }
    this.files.recheckRuntime();
    const workDir = join(this.options.dataDir, "containers", req.appId, grant.id);
    const env = containerEnvironment(
      req,
      grant,
      resource,
      {
        ...this.options,
        address: this.address,
        runtimeDir: this.files.runtimeDir,
        tls: this.options.tls !== undefined,
      },
      workDir,
    );
    // Never root: the application's own account (or as configured) when this node manager is root, else its own.
    const account = this.accounts.accountFor(req.appId, grant.user);
    const links = await this.localize(req, grant.id, grant.user, resource.vcoresMilli, account);
    let proc: ContainerProcess;
    try {
      if (this.accounts.switches)
        checkAccountReach(req, env, account, {
          runtimeDir: this.files.runtimeDir,
          nodeBinary: this.files.nodeBinary,
          dataDir: this.options.dataDir,
        });
      const staging = req.env["HARVEST_STAGING_DIR"];
      if (req.isAm && staging) this.handedStaging.set(req.appId, join(staging, req.appId));
      proc = new ContainerProcess(
        {
          containerId: grant.id,
          appId: req.appId,
          argv: req.argv,
          env,
          vcoresMilli: resource.vcoresMilli,
          memoryMb: resource.memoryMb,
          isAm: req.isAm,
          priority: grant.priority,
          jobPriority: grant.jobPriority,
          account,
          workDir,
          tokens: req.tokens as ContainerTokens,
          nodeBinary: this.files.nodeBinary,
          links,
          // What it must reach even with a private /tmp (a test cluster lives below /tmp).
          ...(this.privateTmp
            ? { privateTmp: { keep: [this.options.dataDir, env["HARVEST_CA"] ?? "", staging ?? ""] } }
            : {}),
        },
        this.cgroups,
        this.clock.nowMs(),
        (c) => this.onContainerExit(c),
      );
    } catch (err) {
      throw new HarvestError("CONTAINER_LAUNCH_FAILED", `could not launch ${grant.id}: ${errorMessage(err)}`, {
        cause: err,
      });
    }
    this.containers.set(grant.id, proc);
    this.metrics.containerLaunched(req.isAm);
    this.log.info("container started", {
      containerId: grant.id,
      appId: req.appId,
      pid: proc.pid,
      isAm: req.isAm,
      vcoresMilli: resource.vcoresMilli,
    });
    this.heartbeatSoon();
    return { pid: proc.pid };
  }

  /**
   * Fetches the container's declared resources into the file cache with the job's file-system token, before the
   * container exists; its cores count as held meanwhile. A StopContainer that comes meanwhile cancels the launch.
   */
  private async localize(
    req: StartContainerRequestOutput,
    containerId: string,
    user: string,
    vcoresMilli: number,
    account: ContainerAccount,
  ): Promise<Record<string, string>> {
    if (req.resources.length === 0) return {};
    const entry = { vcoresMilli, stopped: false };
    this.localizing.set(containerId, entry);
    try {
      const r = await this.files.localize(req, containerId, user, this.accounts.switches ? account : undefined);
      this.metrics.resourcesLocalized(r.fetched, r.cached, r.bytes);
      if (entry.stopped)
        throw new HarvestError(
          "CONTAINER_LAUNCH_FAILED",
          `${containerId} was stopped while its resources were localized`,
        );
      if (!this.lifecycle.running) throw new HarvestError("UNAVAILABLE", "node manager is stopping");
      return r.links;
    } finally {
      this.localizing.delete(containerId);
    }
  }

  private onContainerExit(c: ContainerProcess): void {
    const id = c.spec.containerId;
    this.capping.forget(id);
    this.taskStatus.forget(id);
    this.cpuSeen.delete(id);
    this.containers.delete(id);
    this.dying.delete(id);
    const chosenAt = this.yieldChosenAt.get(id);
    this.yieldChosenAt.delete(id);
    if (chosenAt !== undefined && c.cause === "PREEMPTED_BY_PRIMARY")
      this.metrics.yieldCompleted((performance.now() - chosenAt) / 1000);
    this.metrics.containerCompleted(c.cause);
    this.records.persistExit(c.spec.workDir, this.status(c));
    this.log.info("container finished", { containerId: id, cause: c.cause, exitCode: c.exitCode });
    const owner = this.records.ownerOf(id);
    if (!this.uploader.enabled || !owner?.user) return this.reportExit(c);
    // Reported once its logs are in the DFS (or the copy failed or timed out: upload never rejects).
    this.uploading.set(id, c);
    const job = { appId: c.spec.appId, containerId: id, user: owner.user, workDir: c.spec.workDir };
    void this.uploader.upload({ ...job, dfsToken: c.spec.tokens?.["dfs-token"] ?? "" }).then((r) => {
      this.metrics.logsUploaded(r.ok, r.bytes);
      this.uploading.delete(id);
      this.reportExit(c);
    });
  }

  /** Tells the resource manager (the next heartbeat, soon) that a container ended. */
  private reportExit(c: ContainerProcess): void {
    const id = c.spec.containerId;
    this.unacked.set(id, c);
    const cause = c.cause ?? "FAILED"; // A completed container always has its cause: FAILED only satisfies the type.
    emitEvent({
      type: "container-finished",
      daemon: this.options.nodeId,
      containerId: id,
      cause,
      exitCode: c.exitCode,
    });
    this.heartbeatSoon();
  }

  private stopContainer(containerId: string): { wasRunning: boolean } {
    const c = this.containers.get(containerId);
    const localizing = this.localizing.get(containerId);
    if (!c && localizing) {
      localizing.stopped = true;
      return { wasRunning: false };
    }
    if (!c) {
      if (this.unacked.has(containerId) || this.uploading.has(containerId)) return { wasRunning: false };
      throw new HarvestError("CONTAINER_NOT_FOUND", `no container ${containerId} on ${this.options.nodeId}`);
    }
    this.countKill(containerId, "RELEASED");
    this.dying.add(containerId);
    this.capping.forget(containerId);
    c.kill("RELEASED", this.options.killGraceMs);
    return { wasRunning: true };
  }

  /** Counts a kill the node manager begins, once per container (the first cause wins, as in ContainerProcess.kill). */
  private countKill(containerId: string, cause: ExitCause): void {
    const c = this.containers.get(containerId);
    if (c && c.state === "RUNNING" && !this.dying.has(containerId)) this.metrics.containerKilled(cause);
  }

  /** The running containers' allocations, for the metrics' gauges. */
  private *runningSpecs(): Iterable<{ isAm: boolean; vcoresMilli: number; memoryMb: number }> {
    for (const c of this.containers.values()) if (c.state === "RUNNING") yield c.spec;
  }

  private getContainer(containerId: string): ContainerProcess {
    const c = this.containers.get(containerId) ?? this.uploading.get(containerId) ?? this.unacked.get(containerId);
    if (!c) throw new HarvestError("CONTAINER_NOT_FOUND", `no container ${containerId} on ${this.options.nodeId}`);
    return c;
  }

  /**
   * The statuses of `list` with their tasks' reports: those that changed since last sent, within the heartbeat's
   * budget (`all`: a registration, every report known).
   */
  private statuses(list: ContainerProcess[], all: boolean): ContainerStatus[] {
    const ids = list.map((c) => c.spec.containerId);
    const reports = this.taskStatus.takeChanged(ids, TASK_REPORT_BUDGET_BYTES, all);
    return list.map((c) => ({ ...this.status(c), taskReport: reports.get(c.spec.containerId) ?? null }));
  }

  private status(c: ContainerProcess): ContainerStatus {
    return containerStatus(c, this.options.nodeId, this.capping?.containerWatts(c.spec.containerId) ?? 0);
  }
}
