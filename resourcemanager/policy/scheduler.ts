/**
 * The scheduler: pure bookkeeping of node capacity and application demand that hands out containers on node heartbeats.
 * No I/O and no timers, so the daemon, the benchmarks and the simulator drive the very same code.
 *
 * Harvestable headroom of a node (seeds/004, section 4.1, made concrete):
 *   capacity - primary usage - reserve - secondary already allocated
 * The reserve (default 10 % of cores) is kept free so the primary tenant can grow a little before Harvest must yield.
 */
import { add, fits, sub, ZERO } from "../../common/resource.js";
import type { Resources } from "../../common/resource.js";
import { copyDemand, LocalityPolicy, takeFromDemand } from "./locality.js";
import type { LocalityDemand, LocalityLevel } from "./locality.js";

/** What a placement policy sees of a node. */
export interface NodeView {
  readonly nodeId: string;
  readonly rack: string;
  readonly capacity: Resources;
  readonly primaryUsage: Resources;
  readonly allocated: Resources;
  /** capacity - primary - reserve - allocated, floored at zero. */
  readonly headroom: Resources;
  /** Secondary containers allocated on the node. */
  readonly containers: number;
}

/** What a placement policy sees of an application that wants containers. */
export interface AppView {
  readonly appId: string;
  /** Submission order: lower goes first under FIFO. */
  readonly order: number;
  /** Max concurrent containers from the DAG (seeds/004, section 4.1); 0 until the job manager registers. */
  readonly maxConcurrency: number;
}

/**
 * Priority of the job manager's own container ask. Task asks use priorities >= 0, so the job manager's container sorts
 * first and policies can tell it apart (it runs before the job's utilization classes are chosen).
 */
export const AM_PRIORITY = -1;

/**
 * YARN's maximum-am-resource-percent default, over Harvest's harvestable cores: near saturation, unlimited job managers
 * hold the cores their tasks need, and each one a primary takes back kills its job's running tasks
 * (`harvest sim sweep --max-am-share 1` shows the collapse).
 */
export const DEFAULT_MAX_AM_SHARE = 0.1;

/**
 * Where an application's containers may go. The stock policy (history-oblivious, what YARN made primary-aware does)
 * allows every node with headroom; the history policy (`class-selection.ts`) restricts each job's tasks to the servers
 * of its chosen classes.
 */
export interface SchedulerPolicy {
  readonly name: string;
  /**
   * True when `app` may receive containers of its ask at `priority` (`AM_PRIORITY` or a task priority >= 0) of size
   * `resource` on `node`. Called on the heartbeat path for every ask that fits, so it must be cheap.
   */
  allows(app: AppView, node: NodeView, priority: number, resource?: Resources): boolean;
  /**
   * When true, `allows` is asked again before every further container of the same ask on the same heartbeat, with the
   * node as it is after the previous grant (the power-aware policy judges each container). Absent: asked once per ask.
   */
  readonly perContainer?: boolean;
}

/** The history-oblivious baseline: any node with enough harvestable headroom, applications in FIFO order. */
export class StockSchedulerPolicy implements SchedulerPolicy {
  readonly name = "stock";
  allows(): boolean {
    return true;
  }
}

/** Told of every grant and release (the lifetime-aware node choice keeps its registry of live containers with it). */
export interface SchedulerListener {
  granted?(alloc: Allocation): void;
  released?(alloc: Allocation): void;
}

/** One outstanding ask of an application at a priority. */
export interface Ask {
  priority: number;
  resource: Resources;
  count: number;
  /** Where its containers would rather run (tasks over DFS input splits); absent: anywhere. */
  locality?: LocalityDemand;
}

/** An ask as the scheduler holds it: since when it has been passed over for locality. */
interface HeldAsk extends Ask {
  /** When a node was first passed over for it since its last node-local grant (locality.ts `allowedLevel`). */
  waitingSinceMs?: number;
}

/** A container the scheduler granted. */
export interface Allocation {
  containerId: string;
  appId: string;
  nodeId: string;
  priority: number;
  resource: Resources;
  /** How local the container is to the ask's input splits; absent for an ask without locality. */
  locality?: LocalityLevel;
}

/** Scheduler settings. */
export interface SchedulerOptions {
  /** Fraction of each node's cores kept free for its primary tenant. @default 0.1 */
  reserveFraction: number;
  /** At most this many containers granted per node heartbeat (0 = no limit). @default 0 */
  maxAllocationsPerHeartbeat: number;
  /**
   * Job managers may hold at most this share of the cluster's harvestable cores (capacity - primary - reserve, summed
   * over nodes, as last reported); one is always allowed. YARN's maximum-am-resource-percent, over what Harvest may
   * use rather than over the cluster: without it, on a busy cluster every waiting job's job manager holds cores its
   * tasks could use, and each one a primary takes back kills its job's running tasks. 1: no limit.
   * @default DEFAULT_MAX_AM_SHARE (0.1)
   */
  maxAmShare?: number;
  /**
   * Data-local placement of asks that carry a locality demand (locality.ts): delay scheduling, or the stock baseline.
   * Absent: the baseline with no clock (never waits).
   */
  locality?: LocalityPolicy;
}

interface NodeState {
  nodeId: string;
  rack: string;
  capacity: Resources;
  primaryUsage: Resources;
  allocated: Resources;
  reserveMilli: number;
  containers: Set<string>;
  /** False while the node drains (`setSchedulable`): it keeps its containers and gets no new ones. */
  schedulable: boolean;
}

interface AppState extends AppView {
  maxConcurrency: number;
  /** Outstanding asks by priority. */
  asks: Map<number, HeldAsk>;
  outstanding: number;
  containers: Set<string>;
  /** Has an entry in `hungry` (kept with it, so that membership costs no scan). */
  inHungry: boolean;
  /** Nodes its job manager's container avoids (where the job's manager just failed or was preempted). */
  amAvoid: Set<string>;
  /** Nodes its tasks avoid (its job manager's blacklist: servers that gave a preemption notice). */
  taskAvoid: Set<string>;
}

/** Pure scheduler state: nodes, applications, outstanding asks and live allocations. */
export class Scheduler {
  private readonly nodes = new Map<string, NodeState>();
  private readonly apps = new Map<string, AppState>();
  /** Apps with outstanding asks, kept in FIFO order (by `order`). */
  private hungry: AppState[] = [];
  /**
   * A lower bound of the vcores of every outstanding ask: a node with less headroom can grant nothing, so a heartbeat
   * stops there instead of visiting every waiting application (thousands, on an overloaded cluster). Lowered as asks
   * come, made exact again whenever `hungry` is rebuilt.
   */
  private minAskMilli = Number.POSITIVE_INFINITY;
  /**
   * Entries of `hungry` that may have nothing outstanding any more: they are skipped, and dropped all at once when
   * they are many (dropping each as it empties costs a scan of every waiting application, per grant).
   */
  private staleHungry = 0;
  /** The job managers' containers' cores, and the harvestable cores of all nodes (for `maxAmShare`). */
  private amAllocatedMilli = 0;
  private harvestableMilli = 0;
  private readonly allocations = new Map<string, Allocation>();
  private listener: SchedulerListener | undefined;
  private readonly locality: LocalityPolicy;

  constructor(
    readonly policy: SchedulerPolicy,
    private readonly options: SchedulerOptions,
    private readonly newContainerId: (appId: string) => string,
  ) {
    this.locality =
      options.locality ?? new LocalityPolicy({ policy: "none", nodeDelayMs: 0, rackDelayMs: 0 }, { nowMs: () => 0 });
  }

  /** Sets the one listener told of grants and releases. */
  setListener(listener: SchedulerListener | undefined): void {
    this.listener = listener;
  }

  /** Adds (or re-adds with new capacity) a node. */
  addNode(nodeId: string, capacity: Resources, rack = "/default-rack"): void {
    const existing = this.nodes.get(nodeId);
    if (existing) {
      this.harvestableMilli -= harvestableOf(existing);
      existing.capacity = capacity;
      existing.rack = rack;
      existing.reserveMilli = Math.ceil(capacity.vcoresMilli * this.options.reserveFraction);
      this.harvestableMilli += harvestableOf(existing);
      return;
    }
    this.nodes.set(nodeId, {
      nodeId,
      rack,
      capacity,
      primaryUsage: { ...ZERO },
      allocated: { ...ZERO },
      reserveMilli: Math.ceil(capacity.vcoresMilli * this.options.reserveFraction),
      containers: new Set(),
      schedulable: true,
    });
    this.harvestableMilli += harvestableOf(this.nodes.get(nodeId)!);
  }

  /** Removes a node and returns the allocations that were on it (they are gone). */
  removeNode(nodeId: string): Allocation[] {
    const node = this.nodes.get(nodeId);
    if (!node) return [];
    const lost: Allocation[] = [];
    for (const id of [...node.containers]) {
      const alloc = this.release(id);
      if (alloc) lost.push(alloc);
    }
    this.harvestableMilli -= harvestableOf(node);
    this.nodes.delete(nodeId);
    return lost;
  }

  hasNode(nodeId: string): boolean {
    return this.nodes.has(nodeId);
  }

  /**
   * Whether the node may receive new containers (YARN's graceful decommissioning: a draining node keeps running what it
   * has and is offered nothing new). Kept across `addNode` calls of the same node.
   */
  setSchedulable(nodeId: string, schedulable: boolean): void {
    const node = this.nodes.get(nodeId);
    if (node) node.schedulable = schedulable;
  }

  /** The containers allocated on a node now. */
  containersOn(nodeId: string): Allocation[] {
    const node = this.nodes.get(nodeId);
    if (!node) return [];
    const out: Allocation[] = [];
    for (const id of node.containers) {
      const a = this.allocations.get(id);
      if (a) out.push(a);
    }
    return out;
  }

  /** Records what the node's primary tenant uses now. */
  updatePrimaryUsage(nodeId: string, usage: Resources): void {
    const node = this.nodes.get(nodeId);
    if (!node) return;
    this.harvestableMilli -= harvestableOf(node);
    node.primaryUsage = usage;
    this.harvestableMilli += harvestableOf(node);
  }

  /** A read-only view of one node. */
  nodeView(nodeId: string): NodeView | undefined {
    const node = this.nodes.get(nodeId);
    return node ? this.view(node) : undefined;
  }

  /** Read-only views of every node. */
  *nodeViews(): IterableIterator<NodeView> {
    for (const node of this.nodes.values()) yield this.view(node);
  }

  /** The largest resource any node can hold (for DAG validation). */
  maxNodeCapacity(): Resources {
    let max: Resources = { ...ZERO };
    for (const n of this.nodes.values()) {
      max = {
        vcoresMilli: Math.max(max.vcoresMilli, n.capacity.vcoresMilli - n.reserveMilli),
        memoryMb: Math.max(max.memoryMb, n.capacity.memoryMb),
      };
    }
    return max;
  }

  /** Registers an application; `order` sets its FIFO position. */
  addApp(appId: string, order: number): void {
    if (this.apps.has(appId)) return;
    this.apps.set(appId, {
      appId,
      order,
      maxConcurrency: 0,
      asks: new Map(),
      outstanding: 0,
      containers: new Set(),
      inHungry: false,
      amAvoid: new Set(),
      taskAvoid: new Set(),
    });
  }

  /**
   * Nodes where the application's job manager should not go (YARN's AM blacklisting): its last attempts failed or were
   * preempted there. Ignored while every schedulable node is on the list, so that a job is never starved by it.
   */
  setAmAvoid(appId: string, nodeIds: Iterable<string>): void {
    const app = this.apps.get(appId);
    if (app) app.amAvoid = new Set(nodeIds);
  }

  /**
   * Nodes where the application's tasks should not go (YARN's blacklist request, which Harvest's job managers fill from
   * preemption notices: jobmanager/policy/noticed-servers.ts). Absolute, replacing the last list. Ignored while every
   * schedulable node is on it, so that a job is never starved by it; the job manager's own container is not affected.
   */
  setTaskAvoid(appId: string, nodeIds: Iterable<string>): void {
    const app = this.apps.get(appId);
    if (app) app.taskAvoid = new Set(nodeIds);
  }

  /**
   * Re-tracks a container that a node reports running but this scheduler does not hold (after a restart of the
   * resource manager: the allocation is rebuilt from the node's report). The node and the application must be known;
   * the node may end up above its headroom, as it is in fact. False when it cannot be tracked.
   */
  recover(alloc: Allocation): boolean {
    const node = this.nodes.get(alloc.nodeId);
    const app = this.apps.get(alloc.appId);
    if (!node || !app || this.allocations.has(alloc.containerId)) return false;
    this.track({ ...alloc, resource: { ...alloc.resource } }, node, app);
    return true;
  }

  /** Records the DAG's max concurrency, sent by the job manager at registration. */
  setMaxConcurrency(appId: string, maxConcurrency: number): void {
    const app = this.apps.get(appId);
    if (app) app.maxConcurrency = maxConcurrency;
  }

  /** Removes an application, releasing every container it holds; returns those allocations. */
  removeApp(appId: string): Allocation[] {
    const app = this.apps.get(appId);
    if (!app) return [];
    const released: Allocation[] = [];
    for (const id of [...app.containers]) {
      const alloc = this.release(id);
      if (alloc) released.push(alloc);
    }
    this.apps.delete(appId);
    // Its entry in `hungry` (if any) is skipped from now on and dropped with the other stale ones.
    app.asks.clear();
    app.outstanding = 0;
    this.noteStale(app);
    return released;
  }

  /** Replaces an application's outstanding asks (absolute counts per priority). */
  setAsks(appId: string, asks: readonly Ask[]): void {
    const app = this.apps.get(appId);
    if (!app) return;
    // How long each priority has waited for locality carries over: the job manager re-sends its asks every heartbeat.
    const waited = new Map<number, number>();
    for (const a of app.asks.values()) if (a.waitingSinceMs !== undefined) waited.set(a.priority, a.waitingSinceMs);
    app.asks.clear();
    let outstanding = 0;
    for (const ask of asks) {
      if (ask.count <= 0) continue;
      const prev = app.asks.get(ask.priority);
      if (prev) {
        prev.count += ask.count;
        if (ask.locality) prev.locality = mergeDemand(prev.locality, ask.locality);
      } else {
        const held: HeldAsk = { priority: ask.priority, resource: { ...ask.resource }, count: ask.count };
        if (ask.locality && ask.locality.located > 0) {
          held.locality = copyDemand(ask.locality);
          held.locality.located = Math.min(held.locality.located, ask.count);
          const since = waited.get(ask.priority);
          if (since !== undefined) held.waitingSinceMs = since;
        }
        app.asks.set(ask.priority, held);
      }
      outstanding += ask.count;
      if (ask.resource.vcoresMilli < this.minAskMilli) this.minAskMilli = ask.resource.vcoresMilli;
    }
    app.outstanding = outstanding;
    this.refreshHunger(app);
  }

  /** The cores an application's containers hold now, milli-cores. */
  allocatedMilliOf(appId: string): number {
    let milli = 0;
    for (const id of this.apps.get(appId)?.containers ?? [])
      milli += this.allocations.get(id)?.resource.vcoresMilli ?? 0;
    return milli;
  }

  /** Outstanding container count of an application. */
  outstanding(appId: string): number {
    return this.apps.get(appId)?.outstanding ?? 0;
  }

  /**
   * Grants containers on `nodeId` for its heartbeat: applications in FIFO order, asks by priority (lower first), while
   * the node's harvestable headroom fits and the policy allows.
   */
  allocateOnNode(nodeId: string): Allocation[] {
    const node = this.nodes.get(nodeId);
    if (!node || !node.schedulable || this.hungry.length === 0) return [];
    const granted: Allocation[] = [];
    const limit = this.options.maxAllocationsPerHeartbeat || Number.POSITIVE_INFINITY;
    let headroom = this.headroomOf(node);
    let view: NodeView | undefined;
    let emptied = false;
    // Once one job manager does not fit in maxAmShare, none does during this heartbeat (only a job manager's grant
    // would change the sums, and none is made): apps asking for nothing else are passed over at once.
    let amBlocked = false;
    for (const app of this.hungry) {
      if (granted.length >= limit || headroom.vcoresMilli <= 0 || headroom.vcoresMilli < this.minAskMilli) break;
      if (app.outstanding === 0) continue;
      const single = app.asks.size === 1;
      if (single && amBlocked && app.asks.has(AM_PRIORITY)) continue;
      // A single ask (the common case) is visited without building a sorted list of one.
      const priorities = single ? app.asks.keys() : [...app.asks.keys()].sort((a, b) => a - b);
      for (const priority of priorities) {
        const ask = app.asks.get(priority);
        // The policy is asked per priority (the job manager's ask may go where task asks may not), and only for an ask
        // that could be granted here, so a full node costs no policy calls and no node view.
        if (!ask || !fits(ask.resource, headroom)) continue;
        if (priority === AM_PRIORITY && (amBlocked || !this.amFits(ask.resource))) {
          amBlocked = true;
          continue;
        }
        if (priority === AM_PRIORITY && app.amAvoid.has(nodeId) && this.anyNodeBesides(app.amAvoid)) continue;
        if (priority !== AM_PRIORITY && app.taskAvoid.has(nodeId) && this.anyNodeBesides(app.taskAvoid)) continue;
        view ??= this.view(node);
        if (!this.policy.allows(app, view, priority, ask.resource)) continue;
        let first = true;
        while (ask.count > 0 && granted.length < limit && fits(ask.resource, headroom)) {
          if (!first && this.policy.perContainer) {
            view = this.view(node);
            if (!this.policy.allows(app, view, priority, ask.resource)) break;
          }
          first = false;
          const level = this.localityGrant(ask, node);
          if (level === null) break;
          const alloc: Allocation = {
            containerId: this.newContainerId(app.appId),
            appId: app.appId,
            nodeId,
            priority,
            resource: { ...ask.resource },
            ...(level ? { locality: level } : {}),
          };
          this.track(alloc, node, app);
          granted.push(alloc);
          headroom = sub(headroom, ask.resource);
          ask.count -= 1;
          app.outstanding -= 1;
          view = undefined;
        }
        if (ask.count === 0) app.asks.delete(priority);
      }
      if (app.outstanding === 0) {
        emptied = true;
        this.staleHungry += 1;
      }
    }
    if (emptied) this.maybeCompactHungry();
    return granted;
  }

  /** Frees a container's resources; returns its allocation, or undefined if unknown (already released). */
  release(containerId: string): Allocation | undefined {
    const alloc = this.allocations.get(containerId);
    if (!alloc) return undefined;
    this.allocations.delete(containerId);
    if (alloc.priority === AM_PRIORITY) this.amAllocatedMilli -= alloc.resource.vcoresMilli;
    const node = this.nodes.get(alloc.nodeId);
    if (node) {
      node.allocated = sub(node.allocated, alloc.resource);
      node.containers.delete(containerId);
    }
    this.apps.get(alloc.appId)?.containers.delete(containerId);
    this.listener?.released?.(alloc);
    return alloc;
  }

  /** The live allocation of a container. */
  allocation(containerId: string): Allocation | undefined {
    return this.allocations.get(containerId);
  }

  /** Counts for status reports and benchmarks. */
  stats(): { nodes: number; apps: number; hungryApps: number; containers: number } {
    return {
      nodes: this.nodes.size,
      apps: this.apps.size,
      hungryApps: this.hungry.filter((a) => a.outstanding > 0).length,
      containers: this.allocations.size,
    };
  }

  /**
   * The locality of the next container of `ask` on `node`, taken out of the ask's demand: undefined for an ask without
   * locality, null when the ask passes this node over for now (and starts or goes on waiting).
   */
  private localityGrant(ask: HeldAsk, node: NodeState): LocalityLevel | undefined | null {
    const demand = ask.locality;
    if (!demand) return undefined;
    const policy = this.locality;
    const grant = policy.grantFor(demand, ask.count, node.nodeId, node.rack, policy.allowedLevel(ask.waitingSinceMs));
    if (!grant) {
      ask.waitingSinceMs ??= policy.nowMs();
      return null;
    }
    takeFromDemand(demand, grant, node.nodeId, node.rack);
    if (grant.level === "node") delete ask.waitingSinceMs;
    if (demand.located === 0) delete ask.locality;
    return grant.located ? grant.level : undefined;
  }

  /** True when some schedulable node is not in `avoid`. */
  private anyNodeBesides(avoid: ReadonlySet<string>): boolean {
    for (const n of this.nodes.values()) if (n.schedulable && !avoid.has(n.nodeId)) return true;
    return false;
  }

  /** Whether one more job manager of `resource` stays within `maxAmShare` (one is always allowed). */
  private amFits(resource: Resources): boolean {
    const share = this.options.maxAmShare ?? DEFAULT_MAX_AM_SHARE;
    if (share >= 1 || this.amAllocatedMilli === 0) return true;
    return this.amAllocatedMilli + resource.vcoresMilli <= share * this.harvestableMilli;
  }

  private track(alloc: Allocation, node: NodeState, app: AppState | undefined): void {
    if (alloc.priority === AM_PRIORITY) this.amAllocatedMilli += alloc.resource.vcoresMilli;
    this.allocations.set(alloc.containerId, alloc);
    node.allocated = add(node.allocated, alloc.resource);
    node.containers.add(alloc.containerId);
    app?.containers.add(alloc.containerId);
    this.listener?.granted?.(alloc);
  }

  private headroomOf(node: NodeState): Resources {
    const vcores =
      node.capacity.vcoresMilli - node.primaryUsage.vcoresMilli - node.reserveMilli - node.allocated.vcoresMilli;
    const memory = node.capacity.memoryMb - node.primaryUsage.memoryMb - node.allocated.memoryMb;
    return { vcoresMilli: Math.max(0, vcores), memoryMb: Math.max(0, memory) };
  }

  private view(node: NodeState): NodeView {
    return {
      nodeId: node.nodeId,
      rack: node.rack,
      capacity: node.capacity,
      primaryUsage: node.primaryUsage,
      allocated: node.allocated,
      headroom: this.headroomOf(node),
      containers: node.containers.size,
    };
  }

  private refreshHunger(app: AppState): void {
    if (app.outstanding > 0 && !app.inHungry) {
      // Insert keeping FIFO order; appends are the common case.
      let i = this.hungry.length;
      while (i > 0 && (this.hungry[i - 1]?.order ?? 0) > app.order) i--;
      this.hungry.splice(i, 0, app);
      app.inHungry = true;
    } else if (app.outstanding === 0) this.noteStale(app);
  }

  /** An app with an entry in `hungry` has nothing outstanding (or is gone): its entry is now stale. */
  private noteStale(app: AppState): void {
    if (!app.inHungry) return;
    this.staleHungry += 1;
    this.maybeCompactHungry();
  }

  /** Drops the stale entries of `hungry` once they are at least half of it, and makes `minAskMilli` exact. */
  private maybeCompactHungry(): void {
    if (this.staleHungry * 2 < this.hungry.length) return;
    let min = Number.POSITIVE_INFINITY;
    this.hungry = this.hungry.filter((a) => {
      if (a.outstanding === 0 || this.apps.get(a.appId) !== a) {
        a.inHungry = false;
        return false;
      }
      for (const ask of a.asks.values())
        if (ask.count > 0 && ask.resource.vcoresMilli < min) min = ask.resource.vcoresMilli;
      return true;
    });
    this.staleHungry = 0;
    this.minAskMilli = min;
  }
}

/** What Harvest may use on `node` beside its primary and reserve, milli-cores (0 when the primary leaves nothing). */
function harvestableOf(node: { capacity: Resources; primaryUsage: Resources; reserveMilli: number }): number {
  return Math.max(0, node.capacity.vcoresMilli - node.primaryUsage.vcoresMilli - node.reserveMilli);
}

/** Two demands of one priority, summed (an ask sent in parts). */
function mergeDemand(a: LocalityDemand | undefined, b: LocalityDemand): LocalityDemand {
  const out = a ? copyDemand(a) : { nodes: new Map<string, number>(), racks: new Map<string, number>(), located: 0 };
  for (const [k, n] of b.nodes) out.nodes.set(k, (out.nodes.get(k) ?? 0) + n);
  for (const [k, n] of b.racks) out.racks.set(k, (out.racks.get(k) ?? 0) + n);
  out.located += b.located;
  return out;
}
