/**
 * Lifetime-aware node choice: NILAS and LAVA (seeds/002, sections 4.2 and 4.3) (LARS, 4.4, is the drain's order: drain.ts),
 * adapted from VMs on hosts to containers on harvested servers. Pure: no I/O; the clock and the predictor are injected.
 *
 * Both aim at empty servers: a server whose secondary containers all end together can be handed back whole (to its
 * primary tenant, to a reimage, to a large container). Every container's remaining lifetime is re-predicted from its
 * uptime each time a node is judged (`LifetimePredictor`, lifetime.ts), so a misprediction is corrected as soon as the
 * container outlives it.
 *
 * - NILAS (4.2): a server's exit time is the latest predicted exit of its containers; the temporal cost of placing a
 *   container of predicted lifetime L on it now is the bucket of max(now + L - exit, 0) (an empty server: L), and a
 *   lower cost is preferred, ties keeping the order they come in. The seed's buckets are for VMs (30 min to a week);
 *   tasks live seconds to hours, so the default buckets (`nilasBucketsMs`) run from 10 s to 12 h, about x2-3 apart:
 *   fine where most tasks are (under a few minutes, where a 30 min bucket would call everything cost 0) and coarse in
 *   the tail, where predictions are rough anyway and the quantization should make ties for the next criterion.
 * - LAVA (4.3): lifetime classes an order of magnitude apart (default < 10 s, < 100 s, < 1000 s, < 10000 s, longer),
 *   numbered from 0. A server is empty, open or recycling. An empty server that takes a container opens with the
 *   container's class and a deadline of now + `deadlineFactor` x the class's bound. An open server more than
 *   `recyclingFraction` full becomes recycling, its containers then residual. Preference, best first: recycling
 *   servers of a class above the container's (the closest first), open servers of its class, any other non-empty
 *   server, empty servers; ties by NILAS cost, then the order they come in. When a recycling server's residual
 *   containers have all left, its class steps down by one and the rest become residual (overprediction); when a
 *   server passes its deadline, its class steps up by one, its containers become residual and the deadline is renewed
 *   (underprediction); a server whose last container leaves is empty.
 *
 * Where the seed is silent, chosen here:
 * - "Full" on a harvested server is allocated / (allocated + headroom), on cores and on memory, the larger: the share
 *   of what Harvest may use there (capacity - primary - reserve) that it holds. A primary that grows fills the server
 *   too, which is right: a server with no room left should be left to drain.
 * - A server past its deadline becomes recycling, whatever it was (an open server's containers becoming "residual"
 *   means as much): it has proven long-lived, and the containers it should now take are the shorter ones.
 * - Each class change renews the deadline from now with the new class's bound; the top class has none.
 * - Recycling servers take only lower classes. On heartbeats that is a refusal bounded by the same wait as the gate
 *   (below), so a job is never starved by it; in the simulator's `order` they come last.
 * - A container granted while its server was recycling is residual when it started no later than the moment the server
 *   turned recycling (or changed class): the grants of the heartbeat that filled it, reported after the heartbeat.
 *
 * YARN grants on node heartbeats, so, as in power-placement.ts, "place on the best node" is a gate: a node takes a
 * container when no rival that could take it now (the ask fits its headroom and the inner policy allows it there)
 * ranks strictly better; otherwise it declines and the better node takes it on its own heartbeat. After an ask has
 * been declined for `waitMs` any node takes it, until a best-ranked node does (delay scheduling's bound). The simulator
 * asks `order` instead, the same ranks sorted. The registry of live containers learns of grants only through
 * `onGranted`, which the daemon calls after a heartbeat: within one heartbeat each container is judged against the
 * registry as it was before the heartbeat, but with the node views as they are (`perContainer`), so an open server
 * that fills up stops taking its own class at once. A node's exit time is computed once per node per clock reading
 * (recomputed after a grant or a release there): the answer is a function of the registry and the time, so nothing
 * stale is kept, and a heartbeat's many asks do not re-predict every container of the cluster each.
 */
import type { Clock } from "../../common/clock.js";
import { invalidOption, stripUndefined } from "../../common/options.js";
import { fits } from "../../common/resource.js";
import type { Resources } from "../../common/resource.js";
import type { ContainerKey, LifetimePredictor } from "./lifetime.js";
import type { AppView, NodeView, SchedulerPolicy } from "./scheduler.js";

/** Which node choice runs: the stock one (the inner policy's), NILAS, or LAVA. */
export type NodeChoiceKind = "stock" | "nilas" | "lava";

/** Settings of the lifetime-aware node choice. */
export interface NodeChoiceOptions {
  /** Which rank the gate and `order` use ("stock": every node ranks the same). @default "nilas" */
  kind: NodeChoiceKind;
  /**
   * NILAS's quantization of ΔT, ms: the temporal cost is the index of the last boundary <= ΔT. Starts at 0, strictly
   * increasing. @default [0, 10 s, 30 s, 1 min, 2 min, 5 min, 10 min, 30 min, 1 h, 3 h, 12 h]
   */
  nilasBucketsMs: readonly number[];
  /**
   * LAVA's class upper bounds, ms, exclusive, strictly increasing; one more class above the last is unbounded.
   * @default [10 s, 100 s, 1000 s, 10000 s]
   */
  lavaClassBoundsMs: readonly number[];
  /** An open server more than this full (cores or memory, of what Harvest may use there) turns recycling. @default 0.9 */
  recyclingFraction: number;
  /** A server's deadline is this times its class's bound after it opened or changed class (seeds/002: 1.1). @default 1.1 */
  deadlineFactor: number;
  /** An ask declined for this long takes any node (the bounded wait of the gate). @default 3000 */
  waitMs: number;
}

/** The defaults of every `NodeChoiceOptions` field. */
export const DEFAULT_NODE_CHOICE_OPTIONS: Readonly<NodeChoiceOptions> = Object.freeze({
  kind: "nilas",
  nilasBucketsMs: Object.freeze([
    0, 10_000, 30_000, 60_000, 120_000, 300_000, 600_000, 1_800_000, 3_600_000, 10_800_000, 43_200_000,
  ]),
  lavaClassBoundsMs: Object.freeze([10_000, 100_000, 1_000_000, 10_000_000]),
  recyclingFraction: 0.9,
  deadlineFactor: 1.1,
  waitMs: 3_000,
});

const KINDS: readonly NodeChoiceKind[] = ["stock", "nilas", "lava"];
/** More boundaries than this is a configuration mistake, not a finer policy. */
const MAX_BOUNDARIES = 64;

/** Fills defaults and validates, naming the offending field in a CONFIG_INVALID error. */
export function resolveNodeChoiceOptions(partial: Partial<NodeChoiceOptions> = {}): NodeChoiceOptions {
  const o: NodeChoiceOptions = { ...DEFAULT_NODE_CHOICE_OPTIONS, ...stripUndefined(partial) };
  const bad = (field: string, why: string): never => invalidOption("node choice", field, why);
  if (!KINDS.includes(o.kind)) bad("kind", `must be one of ${KINDS.join(", ")}`);
  const increasing = (field: string, xs: unknown): void => {
    if (!Array.isArray(xs) || xs.length === 0 || xs.length > MAX_BOUNDARIES)
      bad(field, `must be a list of 1 to ${MAX_BOUNDARIES} durations in ms`);
    (xs as unknown[]).forEach((x, i) => {
      if (!(typeof x === "number" && Number.isFinite(x) && x >= 0)) bad(field, "must hold finite numbers >= 0");
      if (i > 0 && !((x as number) > (xs as number[])[i - 1]!)) bad(field, "must be strictly increasing");
    });
  };
  increasing("nilasBucketsMs", o.nilasBucketsMs);
  if (o.nilasBucketsMs[0] !== 0) bad("nilasBucketsMs", "must start at 0");
  increasing("lavaClassBoundsMs", o.lavaClassBoundsMs);
  if (!(o.lavaClassBoundsMs[0]! > 0)) bad("lavaClassBoundsMs", "must hold bounds > 0");
  if (!(typeof o.recyclingFraction === "number" && o.recyclingFraction > 0 && o.recyclingFraction <= 1))
    bad("recyclingFraction", "must be in (0, 1]");
  if (!(typeof o.deadlineFactor === "number" && Number.isFinite(o.deadlineFactor) && o.deadlineFactor >= 1))
    bad("deadlineFactor", "must be a finite number >= 1");
  if (!(typeof o.waitMs === "number" && Number.isFinite(o.waitMs) && o.waitMs >= 0)) bad("waitMs", "must be >= 0");
  return { ...o, nilasBucketsMs: [...o.nilasBucketsMs], lavaClassBoundsMs: [...o.lavaClassBoundsMs] };
}

/** NILAS's temporal cost of a ΔT (ms): the index of the last bucket boundary <= ΔT (seeds/002, 4.2: 70 min -> 2). */
export function nilasBucket(deltaMs: number, bucketsMs: readonly number[]): number {
  let i = 0;
  while (i + 1 < bucketsMs.length && bucketsMs[i + 1]! <= deltaMs) i++;
  return i;
}

/**
 * NILAS's temporal cost of placing a container of predicted lifetime `lifetimeMs` at `nowMs` on a server whose
 * predicted exit is `serverExitMs` (undefined: an empty server, which costs the whole lifetime).
 */
export function temporalCost(
  lifetimeMs: number,
  nowMs: number,
  serverExitMs: number | undefined,
  bucketsMs: readonly number[],
): number {
  const delta = serverExitMs === undefined ? lifetimeMs : Math.max(nowMs + lifetimeMs - serverExitMs, 0);
  return nilasBucket(delta, bucketsMs);
}

/** LAVA's class of a lifetime (ms): the first bound it is below, or one past the last bound (0 = shortest). */
export function lifetimeClassOf(lifetimeMs: number, boundsMs: readonly number[]): number {
  let c = 0;
  while (c < boundsMs.length && !(lifetimeMs < boundsMs[c]!)) c++;
  return c;
}

/**
 * How full a harvested server is: allocated / (allocated + headroom) on cores and on memory, the larger (headroom is
 * what Harvest may still use there: capacity - primary - reserve - allocated). 0 when nothing is allocated.
 */
export function harvestFill(view: NodeView): number {
  const share = (allocated: number, headroom: number): number =>
    allocated <= 0 ? 0 : allocated / (allocated + Math.max(0, headroom));
  return Math.max(
    share(view.allocated.vcoresMilli, view.headroom.vcoresMilli),
    share(view.allocated.memoryMb, view.headroom.memoryMb),
  );
}

/** A LAVA server state (seeds/002, 4.3). */
export type LavaServerState = "empty" | "open" | "recycling";

/** What LAVA holds of one server, for reports and tests. */
export interface LavaStateView {
  state: LavaServerState;
  /** Its lifetime class (0 = shortest); undefined when empty. */
  lifetimeClass: number | undefined;
  /** When it is found underpredicted (ms; Infinity in the top class); undefined when empty. */
  deadlineMs: number | undefined;
  /** Live containers on it. */
  containers: number;
  /** Ids of its residual containers, sorted (empty unless recycling). */
  residual: string[];
}

/** A container the caller reports granted (or found running). */
export interface GrantedContainer {
  containerId: string;
  nodeId: string;
  key: ContainerKey;
  /** When it was granted, ms (its uptime counts from here). */
  startMs: number;
  resource: Resources;
  /** The node as it is with the container, for LAVA's fill check; else `source.node` is asked, if it exists. */
  node?: NodeView;
}

/** A live container in the registry. */
export interface LiveContainer {
  containerId: string;
  nodeId: string;
  key: ContainerKey;
  startMs: number;
  resource: Resources;
}

/** Where the lifetime-aware policy reads the cluster. */
export interface NodeChoiceSource {
  /** Every node that may receive containers now (leave draining nodes out: they would be waited for in vain). */
  nodes(): Iterable<NodeView>;
  /** What the predictor should be asked about a container of `app`'s ask at `priority`. */
  keyOf(app: AppView, priority: number): ContainerKey;
  /** One node's view, when the source can give it cheaply (used after a grant to check LAVA's fill). */
  node?(nodeId: string): NodeView | undefined;
}

/** A node's rank for one container: lexicographic, lower is better. */
type Rank = readonly [tier: number, distance: number, cost: number];

/** LAVA's tiers, best first; INELIGIBLE: a recycling server of a class not above the container's. */
const TIER_RECYCLING = 0;
const TIER_OPEN_SAME = 1;
const TIER_NON_EMPTY = 2;
const TIER_EMPTY = 3;
const TIER_INELIGIBLE = 4;

function compareRanks(a: Rank, b: Rank): number {
  return a[0] - b[0] || a[1] - b[1] || a[2] - b[2];
}

interface ServerState {
  readonly nodeId: string;
  readonly containers: Map<string, LiveContainer>;
  /** Invariant: a non-empty server is open or recycling; an empty one is not kept. */
  state: "open" | "recycling";
  lifetimeClass: number;
  deadlineMs: number;
  /** Invariant: a subset of `containers`' ids, empty while open. */
  readonly residual: Set<string>;
  /** Containers started at or before this are residual (the last recycling transition or class change). */
  residualCutoffMs: number;
  /** The exit time computed at `exitAtMs`; undefined once a grant or release changed the server. */
  exitMemo: { atMs: number; exitMs: number } | undefined;
}

/**
 * NILAS or LAVA as a scheduler policy (see the module comment): wraps the job's placement policy (stock or history),
 * keeps its restrictions, keeps the registry of live containers that both need, and gates each node by its rank.
 */
export class LifetimeNodeChoice implements SchedulerPolicy {
  readonly name: NodeChoiceKind;
  readonly perContainer = true;
  readonly options: NodeChoiceOptions;
  private readonly servers = new Map<string, ServerState>();
  /** Which node each live container is on. */
  private readonly where = new Map<string, string>();
  /** Since when each ask (job and priority) has been declined on a node that was not among the best. */
  private readonly declinedSince = new Map<string, number>();
  /** No server's deadline is before this (a lower bound; the servers are scanned only once it has passed). */
  private nextDeadlineMs = Number.POSITIVE_INFINITY;

  constructor(
    readonly inner: SchedulerPolicy,
    private readonly source: NodeChoiceSource,
    private readonly predictor: LifetimePredictor,
    options: Partial<NodeChoiceOptions>,
    private readonly clock: Clock,
  ) {
    this.options = resolveNodeChoiceOptions(options);
    this.name = this.options.kind;
  }

  /** The gate's key of an ask of `appId` at `priority`. */
  static askKey(appId: string, priority: number): string {
    return `${appId}#${priority}`;
  }

  /** The inner policy's answer, then the rank gate (the scheduler's heartbeat hook). */
  allows(app: AppView, node: NodeView, priority: number, resource?: Resources): boolean {
    if (!this.inner.allows(app, node, priority, resource)) return false;
    if (!resource || this.options.kind === "stock") return true;
    const now = this.clock.nowMs();
    this.expireDeadlines(now);
    const lifetimeMs = this.predictor.remainingMs(this.source.keyOf(app, priority), 0);
    const cls = lifetimeClassOf(lifetimeMs, this.options.lavaClassBoundsMs);
    const mine = this.rank(node, lifetimeMs, cls, now);
    const askKey = LifetimeNodeChoice.askKey(app.appId, priority);
    if (mine[0] !== TIER_INELIGIBLE && !this.betterRival(app, node, priority, resource, mine, lifetimeMs, cls, now)) {
      this.declinedSince.delete(askKey);
      return true;
    }
    const since = this.declinedSince.get(askKey);
    if (since === undefined) {
      this.declinedSince.set(askKey, now);
      return this.options.waitMs === 0;
    }
    return now - since >= this.options.waitMs;
  }

  /**
   * The simulator's operation: `candidates` (the nodes that could take a container of `app`'s ask at `priority` now)
   * best first by the rank `allows` gates on; ties keep their order; LAVA's ineligible recycling servers come last.
   */
  order(app: AppView, priority: number, candidates: readonly NodeView[]): NodeView[] {
    if (this.options.kind === "stock") return [...candidates];
    const now = this.clock.nowMs();
    this.expireDeadlines(now);
    const lifetimeMs = this.predictor.remainingMs(this.source.keyOf(app, priority), 0);
    const cls = lifetimeClassOf(lifetimeMs, this.options.lavaClassBoundsMs);
    return candidates
      .map((view) => ({ view, rank: this.rank(view, lifetimeMs, cls, now) }))
      .sort((a, b) => compareRanks(a.rank, b.rank))
      .map((r) => r.view);
  }

  /** Records a container granted (or found running) on a node; a container already known is left as it is. */
  onGranted(c: GrantedContainer): void {
    if (this.where.has(c.containerId)) return;
    const now = this.clock.nowMs();
    let server = this.servers.get(c.nodeId);
    if (!server) {
      // An empty server opens with the class of the container it takes (seeds/002, 4.3).
      const cls = lifetimeClassOf(this.predictor.remainingMs(c.key, now - c.startMs), this.options.lavaClassBoundsMs);
      server = {
        nodeId: c.nodeId,
        containers: new Map(),
        state: "open",
        lifetimeClass: cls,
        deadlineMs: this.deadlineFrom(now, cls),
        residual: new Set(),
        residualCutoffMs: now,
        exitMemo: undefined,
      };
      this.servers.set(c.nodeId, server);
    }
    const live: LiveContainer = {
      containerId: c.containerId,
      nodeId: c.nodeId,
      key: c.key,
      startMs: c.startMs,
      resource: { ...c.resource },
    };
    server.containers.set(c.containerId, live);
    this.where.set(c.containerId, c.nodeId);
    server.exitMemo = undefined;
    if (server.state === "recycling" && c.startMs <= server.residualCutoffMs) server.residual.add(c.containerId);
    const view = c.node ?? this.source.node?.(c.nodeId);
    if (view) this.checkFill(server, view, now);
    this.expireDeadlines(now);
  }

  /** Records a container gone (finished, killed, lost with its node); an unknown one is ignored. */
  onReleased(containerId: string): void {
    const nodeId = this.where.get(containerId);
    if (nodeId === undefined) return;
    this.where.delete(containerId);
    const server = this.servers.get(nodeId);
    if (!server) return;
    server.containers.delete(containerId);
    server.exitMemo = undefined;
    const now = this.clock.nowMs();
    if (server.containers.size === 0) {
      this.servers.delete(nodeId);
      return;
    }
    const wasResidual = server.residual.delete(containerId);
    if (wasResidual && server.state === "recycling" && server.residual.size === 0) {
      // Overprediction (Figure 5(b)): the residual containers left early; what remains is the next class down.
      this.reclassify(server, Math.max(0, server.lifetimeClass - 1), now);
    }
    this.expireDeadlines(now);
  }

  /**
   * Periodic upkeep: servers past their deadline step up a class (underprediction, Figure 5(c)), and open servers the
   * source shows more than `recyclingFraction` full turn recycling (a primary that grew fills a server too).
   */
  tick(nowMs: number): void {
    this.expireDeadlines(nowMs);
    for (const view of this.source.nodes()) {
      const server = this.servers.get(view.nodeId);
      if (server) this.checkFill(server, view, nowMs);
    }
  }

  /** Forgets a job's waits (it finished). */
  forget(appId: string): void {
    for (const key of this.declinedSince.keys()) if (key.startsWith(`${appId}#`)) this.declinedSince.delete(key);
  }

  /**
   * NILAS's server exit time: the latest of now + the re-predicted remaining lifetime of each of its containers;
   * undefined for an empty server. Re-predicted on every call.
   */
  serverExitMs(nodeId: string, nowMs: number): number | undefined {
    const server = this.servers.get(nodeId);
    return server ? this.computeExit(server, nowMs) : undefined;
  }

  /** LAVA's state of a server (an unknown server is empty). */
  lavaState(nodeId: string): LavaStateView {
    const s = this.servers.get(nodeId);
    if (!s) return { state: "empty", lifetimeClass: undefined, deadlineMs: undefined, containers: 0, residual: [] };
    return {
      state: s.state,
      lifetimeClass: s.lifetimeClass,
      deadlineMs: s.deadlineMs,
      containers: s.containers.size,
      residual: [...s.residual].sort(),
    };
  }

  /** The live containers of a node (for a drain's LARS order). */
  containersOn(nodeId: string): LiveContainer[] {
    const s = this.servers.get(nodeId);
    return s ? [...s.containers.values()] : [];
  }

  /** The rank of `view` for a container of predicted lifetime `lifetimeMs` and class `cls` (lower is better). */
  private rank(view: NodeView, lifetimeMs: number, cls: number, now: number): Rank {
    const server = this.servers.get(view.nodeId);
    if (server) this.checkFill(server, view, now);
    const cost = temporalCost(
      lifetimeMs,
      now,
      server ? this.memoExit(server, now) : undefined,
      this.options.nilasBucketsMs,
    );
    if (this.options.kind !== "lava") return [0, 0, cost];
    if (!server) return [TIER_EMPTY, 0, cost];
    if (server.state === "recycling")
      return server.lifetimeClass > cls
        ? [TIER_RECYCLING, server.lifetimeClass - cls, cost]
        : [TIER_INELIGIBLE, 0, cost];
    return server.lifetimeClass === cls ? [TIER_OPEN_SAME, 0, cost] : [TIER_NON_EMPTY, 0, cost];
  }

  /** True when some other node that could take the container now ranks strictly better than `mine`. */
  private betterRival(
    app: AppView,
    node: NodeView,
    priority: number,
    resource: Resources,
    mine: Rank,
    lifetimeMs: number,
    cls: number,
    now: number,
  ): boolean {
    for (const v of this.source.nodes()) {
      if (v.nodeId === node.nodeId || !fits(resource, v.headroom)) continue;
      // The inner policy is asked last, and only of a better node: the rank is this module's own arithmetic.
      if (compareRanks(this.rank(v, lifetimeMs, cls, now), mine) < 0 && this.inner.allows(app, v, priority, resource))
        return true;
    }
    return false;
  }

  private computeExit(server: ServerState, now: number): number {
    let exit = Number.NEGATIVE_INFINITY;
    for (const c of server.containers.values())
      exit = Math.max(exit, now + this.predictor.remainingMs(c.key, now - c.startMs));
    return exit;
  }

  /** The exit time, computed once per server per clock reading (a grant or release there clears it). */
  private memoExit(server: ServerState, now: number): number {
    const m = server.exitMemo;
    if (m && m.atMs === now) return m.exitMs;
    const exitMs = this.computeExit(server, now);
    server.exitMemo = { atMs: now, exitMs };
    return exitMs;
  }

  /** An open server more than `recyclingFraction` full turns recycling; its containers become residual. */
  private checkFill(server: ServerState, view: NodeView, now: number): void {
    if (server.state !== "open" || harvestFill(view) <= this.options.recyclingFraction) return;
    server.state = "recycling";
    this.markResidual(server, now);
  }

  /** Every server past its deadline steps up a class and turns recycling (cheap until the earliest deadline). */
  private expireDeadlines(now: number): void {
    if (!(now > this.nextDeadlineMs)) return;
    let next = Number.POSITIVE_INFINITY;
    for (const s of this.servers.values()) {
      if (now > s.deadlineMs) {
        s.state = "recycling";
        this.reclassify(s, Math.min(this.options.lavaClassBoundsMs.length, s.lifetimeClass + 1), now);
      }
      next = Math.min(next, s.deadlineMs);
    }
    this.nextDeadlineMs = next;
  }

  /** A class change: every container becomes residual and the deadline runs from now. */
  private reclassify(server: ServerState, cls: number, now: number): void {
    server.lifetimeClass = cls;
    server.deadlineMs = this.deadlineFrom(now, cls);
    this.nextDeadlineMs = Math.min(this.nextDeadlineMs, server.deadlineMs);
    this.markResidual(server, now);
  }

  private markResidual(server: ServerState, now: number): void {
    server.residual.clear();
    for (const id of server.containers.keys()) server.residual.add(id);
    server.residualCutoffMs = now;
  }

  private deadlineFrom(now: number, cls: number): number {
    const bound = this.options.lavaClassBoundsMs[cls];
    const deadline = bound === undefined ? Number.POSITIVE_INFINITY : now + this.options.deadlineFactor * bound;
    this.nextDeadlineMs = Math.min(this.nextDeadlineMs, deadline);
    return deadline;
  }
}
