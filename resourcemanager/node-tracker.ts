/**
 * Node tracking for the resource manager: one heartbeat stream per node manager, registration (with the containers the
 * node still runs), liveness (a node silent past `nodeExpiryMs` is lost), the kills queued for each node's next
 * heartbeat answer, the power reports, and the clients that reach each node manager. What the reported containers mean
 * for their jobs is the business of the applications' heartbeat paths (`app-allocations.ts`), reached through `NodeEvents`.
 */
import type * as grpc from "@grpc/grpc-js";
import type { Clock } from "../common/clock.js";
import { errorMessage, HarvestError } from "../common/errors.js";
import { cachedClient, loadHarvestProto } from "../common/grpc.js";
import type { Logger } from "../common/log.js";
import { DEFAULT_POWER_PROFILE_ID, resolvePowerProfile } from "../common/power-profiles.js";
import type { PowerProfile } from "../common/power-profiles.js";
import { fromWire } from "../common/resource.js";
import type { Resources } from "../common/resource.js";
import { serveWorkerStream } from "../common/worker-stream.js";
import type { DrainTracker } from "./policy/drain.js";
import { NODE_MACHINE } from "./node-state.js";
import type { NodeState } from "./node-state.js";
import type { ResourceManagerOptions } from "./options.js";
import { normalizeDomainPath } from "./policy/power-domains.js";
import type { PowerDomains } from "./policy/power-domains.js";
import type { Allocation, Scheduler } from "./policy/scheduler.js";
import type { TenantRegistry } from "./tenant-registry.js";
import type { ContainerManagerClient } from "../proto/generated/harvest/v1/ContainerManager.js";
import type { ContainerStatus } from "../proto/generated/harvest/v1/ContainerStatus.js";
import type { ExitCauseOutput } from "../proto/generated/harvest/v1/ExitCause.js";
import type { NodeHeartbeatOutput } from "../proto/generated/harvest/v1/NodeHeartbeat.js";
import type { NodeReport } from "../proto/generated/harvest/v1/NodeReport.js";
import type { NodeToRmOutput } from "../proto/generated/harvest/v1/NodeToRm.js";
import type { RegisterNodeOutput } from "../proto/generated/harvest/v1/RegisterNode.js";
import type { RmToNode } from "../proto/generated/harvest/v1/RmToNode.js";

/** A node manager's stream to the resource manager. */
export type NodeStream = grpc.ServerDuplexStream<NodeToRmOutput, RmToNode>;

/** What the resource manager knows of one node. */
export interface NodeEntry {
  nodeId: string;
  nmAddress: string;
  rack: string;
  capacity: Resources;
  primaryUsage: Resources;
  primarySource: string;
  /** Which account its containers run as, in the node manager's words; "" when it did not say (an older one). */
  containersRunAs: string;
  /** The node manager's web server, whose pages serve its containers' logs; "" when it serves none. */
  webUrl: string;
  lastHeartbeatMs: number;
  /** Changed only through NODE_MACHINE. Invariant: stream === undefined when state is LOST. */
  state: NodeState;
  stream: NodeStream | undefined;
  /** Kills to send with the next heartbeat answer. */
  pendingKills: Map<string, ExitCauseOutput>;
  /** The last heartbeats' samples, oldest first (the web UI's live charts); kept across re-registrations. */
  recent: RingBuffer<NodeSample>;
}

/** Longest account description a node may register (one human line). */
const MAX_RUN_AS_CHARS = 512;

/** What stands for the account of a node that registered without describing it (an older node manager). */
export const UNKNOWN_RUN_AS = "unknown";

/** Heartbeat samples kept per node for the live charts (two minutes at the default 1 s interval). */
export const NODE_SAMPLES_KEPT = 120;

/** What one heartbeat showed of a node. */
export interface NodeSample {
  timeMs: number;
  /** The primary tenant's cores. */
  primaryMilli: number;
  /** Harvest's containers' cores. */
  allocatedMilli: number;
  /** The draw the power domains count for the node (0: no reading and no estimate yet). */
  drawWatts: number;
}

/** A bounded first-in first-out buffer: once full, each push drops the oldest item. */
export class RingBuffer<T> {
  private readonly items: T[] = [];
  private next = 0;

  constructor(readonly capacity: number) {
    if (!(Number.isInteger(capacity) && capacity > 0))
      throw new HarvestError("INVALID_ARGUMENT", `ring buffer capacity must be an integer > 0, got ${capacity}`);
  }

  /** Adds an item, dropping the oldest when full. */
  push(item: T): void {
    if (this.items.length < this.capacity) this.items.push(item);
    else this.items[this.next] = item;
    this.next = (this.next + 1) % this.capacity;
  }

  /** How many items it holds. */
  get size(): number {
    return this.items.length;
  }

  /** The items, oldest first (a copy). */
  toArray(): T[] {
    if (this.items.length < this.capacity) return [...this.items];
    return [...this.items.slice(this.next), ...this.items.slice(0, this.next)];
  }
}

/** What node tracking tells the rest of the resource manager. */
export interface NodeEvents {
  /**
   * A node registered (`registration`: with every container it still runs or recently finished) or heartbeated with
   * these container statuses; `wasLost`: this resource manager had declared it lost. Returns the completed containers
   * now recorded (the node stops reporting them).
   */
  containers(node: NodeEntry, statuses: ContainerStatus[], how: { registration: boolean; wasLost: boolean }): string[];
  /** A heartbeat named containers at risk of preemption (the node manager's notice; ids straight from the wire). */
  atRisk(node: NodeEntry, containerIds: readonly string[]): void;
  /** After a heartbeat's bookkeeping: grant containers on the node, log alerts. */
  heartbeat(node: NodeEntry): void;
  /** The node went silent; these allocations died with it. */
  lost(node: NodeEntry, allocations: Allocation[]): void;
  /** Applications that ended recently, whose data node managers may remove. */
  finishedApps(): string[];
}

/** The node managers of a cluster, as the resource manager tracks them. */
export class NodeTracker {
  private readonly nodes = new Map<string, NodeEntry>();
  private readonly clients = new Map<string, ContainerManagerClient>();
  /** Power profiles by id, resolved once (a spec:<n> id reads the SPECpower file). */
  private readonly profiles = new Map<string, PowerProfile>();

  constructor(
    private readonly options: ResourceManagerOptions,
    private readonly deps: {
      scheduler: Scheduler;
      power: PowerDomains;
      drains: DrainTracker;
      tenants: TenantRegistry;
      clock: Clock;
      log: Logger;
      epoch: () => number;
      /** The active term when highly available (0: not): in every registration answer and ack. */
      haEpoch: () => number;
      isRunning: () => boolean;
      events: NodeEvents;
    },
  ) {}

  /** One node, or undefined. */
  get(nodeId: string): NodeEntry | undefined {
    return this.nodes.get(nodeId);
  }

  has(nodeId: string): boolean {
    return this.nodes.has(nodeId);
  }

  /** Every node this resource manager has seen since it started. */
  all(): IterableIterator<NodeEntry> {
    return this.nodes.values();
  }

  /**
   * The distinct accounts containers run as on the running nodes, as their node managers described them, sorted;
   * `UNKNOWN_RUN_AS` for a node that did not say (what `harvest job submit` shows).
   */
  containersRunAs(): string[] {
    const lines = new Set<string>();
    for (const n of this.nodes.values()) if (n.state === "RUNNING") lines.add(n.containersRunAs || UNKNOWN_RUN_AS);
    return [...lines].sort();
  }

  /** Node ids, sorted (for messages). */
  ids(): string[] {
    return [...this.nodes.keys()].sort();
  }

  /** Queues a kill for the node's next heartbeat answer, keeping a more specific cause already queued. */
  kill(nodeId: string, containerId: string, cause: ExitCauseOutput, override = true): void {
    const node = this.nodes.get(nodeId);
    if (!node || (!override && node.pendingKills.has(containerId))) return;
    node.pendingKills.set(containerId, cause);
  }

  /** Serves one node manager's stream: a registration, then heartbeats. */
  onStream(stream: NodeStream): void {
    let nodeId: string | undefined;
    serveWorkerStream(stream, {
      what: "node",
      log: this.deps.log,
      context: () => ({ nodeId }),
      isRunning: this.deps.isRunning,
      onMessage: (msg: NodeToRmOutput) => {
        if (msg.register) {
          nodeId = this.register(msg.register, stream);
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

  private register(reg: RegisterNodeOutput, stream: NodeStream): string {
    const { scheduler, power, drains, clock, log } = this.deps;
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
    if (reg.containersRunAs.length > MAX_RUN_AS_CHARS || /\p{Cc}/u.test(reg.containersRunAs))
      throw new HarvestError(
        "INVALID_ARGUMENT",
        `containersRunAs must be one line of at most ${MAX_RUN_AS_CHARS} characters without control characters`,
        { details: { field: "containersRunAs" } },
      );
    if (reg.webUrl && !/^https?:\/\/[A-Za-z0-9_.:[\]-]{1,300}$/.test(reg.webUrl))
      throw new HarvestError("INVALID_ARGUMENT", "webUrl must be http(s)://host:port", {
        details: { field: "webUrl" },
      });
    const chassis = reg.chassis ? normalizeDomainPath(reg.chassis, "chassis") : "";
    const profile = this.powerProfile(reg.powerProfile, nodeId);
    const existing = this.nodes.get(nodeId);
    if (existing?.stream && existing.stream !== stream) existing.stream.end();
    const entry: NodeEntry = {
      nodeId,
      nmAddress: reg.nmAddress,
      rack: reg.rack || "/default-rack",
      capacity,
      primaryUsage: existing?.primaryUsage ?? { vcoresMilli: 0, memoryMb: 0 },
      primarySource: reg.primarySource,
      containersRunAs: reg.containersRunAs,
      webUrl: reg.webUrl,
      lastHeartbeatMs: clock.nowMs(),
      state: existing ? NODE_MACHINE.next(existing.state, "registered", nodeId) : "RUNNING",
      stream,
      pendingKills: existing?.pendingKills ?? new Map(),
      recent: existing?.recent ?? new RingBuffer<NodeSample>(NODE_SAMPLES_KEPT),
    };
    if (existing && existing.nmAddress !== reg.nmAddress) this.dropClient(existing.nmAddress);
    this.nodes.set(nodeId, entry);
    scheduler.addNode(nodeId, capacity, entry.rack);
    // A draining server stays out of service when its node manager restarts or comes back from being lost.
    if (drains.isDraining(nodeId)) scheduler.setSchedulable(nodeId, false);
    power.addNode({ nodeId, rack: entry.rack, ...(chassis ? { domain: chassis } : {}), profile });
    this.deps.events.containers(entry, reg.containers, {
      registration: true,
      wasLost: existing?.state === "LOST",
    });
    stream.write({
      registered: {
        nodeId,
        heartbeatIntervalMs: this.options.heartbeatIntervalMs,
        rmEpoch: this.deps.epoch(),
        epoch: this.deps.haEpoch(),
      },
    });
    log.info(existing ? "node re-registered" : "node registered", {
      nodeId,
      nmAddress: reg.nmAddress,
      capacity,
      primary: reg.primarySource,
      powerProfile: profile.id,
      containers: reg.containers.length,
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
      this.deps.log.warn("unknown power profile; predicting this node's power with the default profile", {
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

  private onHeartbeat(nodeId: string, hb: NodeHeartbeatOutput): void {
    const { scheduler, power, tenants, clock } = this.deps;
    const node = this.nodes.get(nodeId);
    if (!node) return;
    checkPowerFields(hb);
    node.lastHeartbeatMs = clock.nowMs();
    node.primaryUsage = fromWire(hb.primaryUsage);
    scheduler.updatePrimaryUsage(nodeId, node.primaryUsage);
    // The primary's live utilization joins its history (seeds/004: the history the classes are built from).
    const cpuPct = (100 * node.primaryUsage.vcoresMilli) / node.capacity.vcoresMilli;
    if (Number.isFinite(cpuPct))
      tenants.addSamples([
        { server: nodeId, timeMs: node.lastHeartbeatMs, cpuPct: Math.min(100, Math.max(0, cpuPct)) },
      ]);
    const recorded = this.deps.events.containers(node, hb.containers, { registration: false, wasLost: false });
    if (hb.containersAtRisk.length > 0) this.deps.events.atRisk(node, hb.containersAtRisk);
    const allocated = scheduler.nodeView(nodeId)?.allocated.vcoresMilli ?? 0;
    power.report(nodeId, {
      watts: hb.powerWatts,
      meter: hb.powerMeter.slice(0, 256),
      capped: hb.powerCapped,
      cappingState: hb.cappingState.slice(0, 32),
      throttledContainers: hb.throttledContainers,
      powerKills: hb.powerKills,
      utilization: (node.primaryUsage.vcoresMilli + allocated) / node.capacity.vcoresMilli,
    });
    this.deps.events.heartbeat(node);
    node.recent.push({
      timeMs: node.lastHeartbeatMs,
      primaryMilli: node.primaryUsage.vcoresMilli,
      allocatedMilli: scheduler.nodeView(nodeId)?.allocated.vcoresMilli ?? 0,
      drawWatts: power.placementFacts(nodeId)?.drawWatts ?? 0,
    });
    const kills = [...node.pendingKills].map(([containerId, cause]) => ({ containerId, cause }));
    node.pendingKills.clear();
    const budget = power.nodeBudget(nodeId);
    node.stream?.write({
      ack: {
        seq: hb.seq,
        epoch: this.deps.haEpoch(),
        containersToKill: kills,
        completedRecorded: recorded,
        nodeBudgetWatts: budget?.budgetWatts ?? 0,
        budgetDomain: budget?.domain ?? "",
        finishedApps: this.deps.events.finishedApps(),
      },
    });
  }

  /** Declares silent nodes lost (their containers are reported LOST to their jobs). */
  expire(now: number): void {
    for (const node of this.nodes.values()) {
      if (node.state === "RUNNING" && now - node.lastHeartbeatMs > this.options.nodeExpiryMs) this.markLost(node);
    }
  }

  private markLost(node: NodeEntry): void {
    node.state = NODE_MACHINE.next(node.state, "expired", node.nodeId);
    node.stream?.end();
    node.stream = undefined;
    const lost = this.deps.scheduler.removeNode(node.nodeId);
    this.deps.power.markLost(node.nodeId);
    this.deps.log.warn("node lost: no heartbeat within the expiry", {
      nodeId: node.nodeId,
      containersLost: lost.length,
    });
    this.deps.events.lost(node, lost);
  }

  /** A client of the node manager at `address` (kept per address). */
  client(address: string): ContainerManagerClient {
    return cachedClient(this.clients, loadHarvestProto().ContainerManager, address, this.options.tls);
  }

  private dropClient(address: string): void {
    this.clients.get(address)?.close();
    this.clients.delete(address);
  }

  /** Ends every node stream and closes every client (the resource manager is stopping). */
  close(): void {
    for (const n of this.nodes.values()) n.stream?.end();
    for (const c of this.clients.values()) c.close();
  }

  /** What `harvest cluster nodes` shows of a node. */
  report(n: NodeEntry): NodeReport {
    const view = this.deps.scheduler.nodeView(n.nodeId);
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

/** Rejects power fields no meter can produce (the node's stream is closed with the code, as for any bad message). */
function checkPowerFields(hb: NodeHeartbeatOutput): void {
  const bad = (field: string, why: string): never => {
    throw new HarvestError("INVALID_ARGUMENT", `heartbeat ${field} ${why}`, { details: { field } });
  };
  if (!(Number.isFinite(hb.powerWatts) && hb.powerWatts >= 0)) bad("powerWatts", "must be watts >= 0 (0: no reading)");
  if (!(hb.throttledContainers >= 0)) bad("throttledContainers", "must be >= 0");
  if (!(hb.powerKills >= 0)) bad("powerKills", "must be >= 0");
}
