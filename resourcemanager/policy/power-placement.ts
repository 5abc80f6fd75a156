/**
 * Power-aware node choice: seeds/000 section III-C, Algorithm 1 (criticality- and utilization-aware placement), adapted
 * to harvesting, with seeds/001 section 3's power-capped allocation as a filter. Pure: no I/O; the clock is injected.
 *
 * Algorithm 1 scores each candidate server as alpha x ScoreChassis + (1 - alpha) x ScoreServer (alpha = 0.8, seeds/000
 * section IV-E) and places the VM on the best. Harvest places secondary containers, and the adaptation is:
 *
 * - Chassis headroom (kappa, lines 8-13). The seed sums the predicted P95 CPU of the VMs in the chassis over its cores:
 *   a proxy for power, since CPUs dominate dynamic power. Harvest knows each server's power profile, so it predicts
 *   watts directly: each server of the node's domain at profileWatts((primary P95 + secondary allocated) / capacity),
 *   summed, against the domain's budget, or, with no budget, against the sum of its servers' peak (100 % load) watts.
 *   kappa = 1 - predicted / capacity, clamped to [0, 1]. The seed knows only the chassis; Harvest's domains nest, so
 *   kappa is the smallest such headroom over the node's own domain (its chassis) and every ancestor that has a budget:
 *   a rack near its budget is as bad a place as a full chassis.
 * - Server balance (eta, lines 14-22). The seed sums predicted P95 x cores of the user-facing (UF) and the other (NUF)
 *   VMs on the server, and for a NUF VM scores 1/2 x (1 + (gammaUF - gammaNUF) / cores): a non-critical VM goes where
 *   there is critical load to protect and little cap-able load, so every server keeps power it can shed without
 *   touching critical work. A secondary container is always NUF. gammaUF is the primary tenant's predicted P95 when
 *   the primary is critical (declared critical, or found user-facing by seeds/000's Compare8 test, or periodic by
 *   seeds/004's pattern when nothing else is known; a server with no history at all is conservatively critical, as
 *   seeds/000 section III-B does with series too short to classify), 0 otherwise: a non-critical primary is neither
 *   load to protect nor load the capping agent may touch (the primary always wins, DESIGN.md principle 3), so it only
 *   counts in kappa and in the filter. gammaNUF is the secondary containers' allocation (batch tasks are assumed to use
 *   all of it at their P95).
 * - Primary P95: the owning tenant's peak (the classifier's `peakPercentile` of its average server, P95 by default)
 *   times the server's capacity, or the live primary usage when higher (a primary above its usual peak right now is
 *   the better predictor); the live usage alone when the server has no history.
 * - Filter (seeds/001, step 4): a node is skipped when its predicted draw with the new container exceeds its power
 *   limit: its node budget in force (the share its alerting domain sends it) or its own server budget, the smaller.
 *   seeds/001 predicts "the power consumption of the container" on top of "the current total power consumption of the
 *   server": predicted = max(counted draw, model(before)) + model(after) - model(before), with model(u) = the profile's
 *   watts at utilization u, before = (primary now + allocated) / capacity and after = before + container / capacity.
 *   The max keeps containers granted but not yet running (so not yet in the meter) in the base.
 *
 * YARN grants containers on node heartbeats, not by sorting servers, so "place on the best" becomes a gate: a node
 * takes a container when its score is within `scoreTolerance` of the best score among the nodes that could take it
 * now (the same policy allows the job there, the ask fits the headroom, the filter passes); otherwise it declines, and
 * the better node takes it on its own heartbeat, within one interval. Like YARN's delay scheduling, the wait is
 * bounded: a job declined for `waitMs` takes any node that passes the filter until a best-scored node takes one. Each
 * container is judged with the node as it is after the previous grant (`perContainer`), as Algorithm 1 re-sorts per VM.
 */
import type { Clock } from "../../common/clock.js";
import { optionResolution } from "../../common/options.js";
import { profileWatts } from "../../common/power-profiles.js";
import type { PowerProfile } from "../../common/power-profiles.js";
import { fits } from "../../common/resource.js";
import type { Resources } from "../../common/resource.js";
import type { AppView, NodeView, SchedulerPolicy } from "./scheduler.js";

/** Settings of the power-aware placement. */
export interface PowerPlacementOptions {
  /** Weight of the chassis headroom against the server balance (seeds/000 Algorithm 1, line 6; IV-E). @default 0.8 */
  alpha: number;
  /** A node within this much of the best score takes the container (scores are in [0, 1]). @default 0.02 */
  scoreTolerance: number;
  /** A job declined for this long takes any node that passes the budget filter. @default 3000 */
  waitMs: number;
}

/** The defaults of every `PowerPlacementOptions` field. */
export const DEFAULT_POWER_PLACEMENT_OPTIONS: Readonly<PowerPlacementOptions> = Object.freeze({
  alpha: 0.8,
  scoreTolerance: 0.02,
  waitMs: 3_000,
});

/** Fills defaults and validates, naming the offending field in a CONFIG_INVALID error. */
export function resolvePowerPlacementOptions(partial: Partial<PowerPlacementOptions> = {}): PowerPlacementOptions {
  const { o, bad } = optionResolution("power placement", DEFAULT_POWER_PLACEMENT_OPTIONS, partial);
  if (!(typeof o.alpha === "number" && o.alpha >= 0 && o.alpha <= 1)) bad("alpha", "must be in [0, 1]");
  if (!(typeof o.scoreTolerance === "number" && o.scoreTolerance >= 0 && o.scoreTolerance <= 1))
    bad("scoreTolerance", "must be in [0, 1]");
  if (!(typeof o.waitMs === "number" && Number.isFinite(o.waitMs) && o.waitMs >= 0)) bad("waitMs", "must be >= 0");
  return o;
}

/** What the power-aware placement knows of one node. */
export interface PowerNode {
  nodeId: string;
  /** The node's own domain (its chassis) first, then each ancestor up to the top, with budgets (0: none). */
  domains: readonly { path: string; budgetWatts: number }[];
  profile: PowerProfile;
  capacityMilli: number;
  /** Predicted P95 of the primary tenant's CPU, milli-cores. */
  primaryP95Milli: number;
  /** The primary tenant's CPU now, milli-cores. */
  primaryNowMilli: number;
  /** Secondary containers allocated on the node, milli-cores. */
  allocatedMilli: number;
  /** The primary is critical (user-facing): its load is what capping must protect. */
  primaryCritical: boolean;
  /** The draw counted for the node now (measured or estimated), watts. */
  drawWatts: number;
  /** The limit on its draw: node budget in force or its own server budget, the smaller; 0: none. */
  limitWatts: number;
}

/** A node's score and its parts. */
export interface PowerScore {
  nodeId: string;
  /** kappa: the smallest headroom of its chassis and budgeted ancestors, [0, 1]. */
  chassis: number;
  /** eta: critical primary load against cap-able secondary load, [0, 1]. */
  server: number;
  /** alpha x chassis + (1 - alpha) x server. */
  score: number;
}

/** Predicted watts and capacity of one domain, summed over its nodes. */
export interface DomainPower {
  predictedWatts: number;
  capacityWatts: number;
}

function clamp01(x: number): number {
  return Number.isFinite(x) ? Math.min(1, Math.max(0, x)) : 0;
}

/** The node's predicted P95 draw: its profile at (primary P95 + secondary allocated) / capacity. */
export function predictedP95Watts(n: PowerNode): number {
  return profileWatts(n.profile, clamp01((n.primaryP95Milli + n.allocatedMilli) / Math.max(1, n.capacityMilli)));
}

/**
 * Every domain's predicted P95 draw (sum over `nodes`) and capacity (its budget when it has one, else the sum of its
 * nodes' peak watts); `nodes` must be every node that counts, not only the candidates.
 */
export function domainPower(nodes: Iterable<PowerNode>): Map<string, DomainPower> {
  const out = new Map<string, DomainPower & { peakWatts: number; budgetWatts: number }>();
  for (const n of nodes) {
    const predicted = predictedP95Watts(n);
    const peak = profileWatts(n.profile, 1);
    for (const d of n.domains) {
      let e = out.get(d.path);
      if (!e) {
        e = { predictedWatts: 0, capacityWatts: 0, peakWatts: 0, budgetWatts: d.budgetWatts };
        out.set(d.path, e);
      }
      e.predictedWatts += predicted;
      e.peakWatts += peak;
    }
  }
  for (const e of out.values()) e.capacityWatts = e.budgetWatts > 0 ? e.budgetWatts : e.peakWatts;
  return out;
}

/** kappa (Algorithm 1, ScoreChassis): 1 - predicted / capacity of the node's chassis and its budgeted ancestors, the smallest. */
export function chassisScore(n: PowerNode, domains: ReadonlyMap<string, DomainPower>): number {
  let kappa = 1;
  n.domains.forEach((d, i) => {
    if (i > 0 && d.budgetWatts <= 0) return;
    const p = domains.get(d.path);
    if (!p || p.capacityWatts <= 0) return;
    kappa = Math.min(kappa, clamp01(1 - p.predictedWatts / p.capacityWatts));
  });
  return kappa;
}

/** eta (Algorithm 1, ScoreServer for a non-critical VM): 1/2 x (1 + (gammaUF - gammaNUF) / cores). */
export function serverScore(n: PowerNode): number {
  const gammaUF = n.primaryCritical ? n.primaryP95Milli : 0;
  const gammaNUF = n.allocatedMilli;
  return clamp01(0.5 * (1 + (gammaUF - gammaNUF) / Math.max(1, n.capacityMilli)));
}

/** The node's score (Algorithm 1, line 6). */
export function powerScore(n: PowerNode, domains: ReadonlyMap<string, DomainPower>, alpha: number): PowerScore {
  const chassis = chassisScore(n, domains);
  const server = serverScore(n);
  return { nodeId: n.nodeId, chassis, server, score: alpha * chassis + (1 - alpha) * server };
}

/** Every node scored, best first (ties by node id), as Algorithm 1's SortCandidates returns them. */
export function rankPowerNodes(nodes: readonly PowerNode[], alpha: number): PowerScore[] {
  const domains = domainPower(nodes);
  return nodes
    .map((n) => powerScore(n, domains, alpha))
    .sort((a, b) => b.score - a.score || (a.nodeId < b.nodeId ? -1 : a.nodeId > b.nodeId ? 1 : 0));
}

/** The node's predicted draw with a new container of `containerMilli` (seeds/001, power-capped allocation). */
export function predictedWattsWith(n: PowerNode, containerMilli: number): number {
  const cap = Math.max(1, n.capacityMilli);
  const before = profileWatts(n.profile, clamp01((n.primaryNowMilli + n.allocatedMilli) / cap));
  const after = profileWatts(n.profile, clamp01((n.primaryNowMilli + n.allocatedMilli + containerMilli) / cap));
  return Math.max(n.drawWatts, before) + (after - before);
}

/** True when the node may take a container of `containerMilli` under its power limit (always, with no limit). */
export function budgetAllows(n: PowerNode, containerMilli: number): boolean {
  return n.limitWatts <= 0 || predictedWattsWith(n, containerMilli) <= n.limitWatts;
}

/** What the history says of a node's primary tenant (all optional: a server may have no tenant or no history). */
export interface PrimaryHistory {
  /** The tenant's peak (the classifier's peak percentile, P95 by default), CPU % of the server. */
  peakPct?: number | undefined;
  /** Declared criticality ("critical" / "non-critical"), or "" to go by the history. */
  declared?: string | undefined;
  /** seeds/000's Compare8 verdict from the history ("critical" / "non-critical"), or "" when too short. */
  measured?: string | undefined;
  /** seeds/004's utilization pattern, when the tenant was classified. */
  pattern?: string | undefined;
}

/**
 * What the tenant registry knows of a server's primary tenant, as the power-aware placement reads it: the declared
 * criticality of its record, and the peak, pattern and Compare8 verdict of its last classification (`TenantStats`,
 * computed by `tenantHistoryVerdict` in criticality.ts). Either may be missing (no tenant, or not classified).
 */
export function primaryHistoryOf(
  tenant: { criticality: string } | undefined,
  stats: { features?: { peak: number; pattern: string } | undefined; measuredCriticality: string } | undefined,
): PrimaryHistory {
  return {
    peakPct: stats?.features?.peak,
    declared: tenant?.criticality,
    measured: stats?.measuredCriticality,
    pattern: stats?.features?.pattern,
  };
}

/**
 * A node's predicted primary P95 (milli-cores) and criticality from its tenant's history and its live usage, as the
 * module comment describes: the peak x capacity or the live usage, the larger; critical by declaration, else by
 * Compare8, else by a periodic pattern, else (nothing known) critical.
 */
export function primaryOutlook(
  capacityMilli: number,
  primaryNowMilli: number,
  h: PrimaryHistory,
): { primaryP95Milli: number; primaryCritical: boolean } {
  const fromHistory = h.peakPct !== undefined && Number.isFinite(h.peakPct) ? (h.peakPct / 100) * capacityMilli : 0;
  const verdict = h.declared || h.measured || "";
  const primaryCritical = verdict !== "" ? verdict === "critical" : h.pattern ? h.pattern === "periodic" : true;
  return { primaryP95Milli: Math.max(primaryNowMilli, fromHistory), primaryCritical };
}

/** Where the power-aware policy reads the cluster. */
export interface PowerPlacementSource {
  /** Every node the scheduler holds. */
  nodes(): Iterable<NodeView>;
  /** The power facts of a node, or undefined when it has none (then no power rule applies to it). */
  power(view: NodeView): PowerNode | undefined;
}

/** One container ask as the power-aware gate sees it. */
export interface PowerAsk {
  /** Whose wait it is: the (job, priority) of the ask; one key per ask whose decline time the gate keeps. */
  key: string;
  /** The container's CPU, milli-cores. */
  containerMilli: number;
}

/**
 * The power-aware scheduler policy: wraps the job's placement policy (stock or history), keeps its restrictions, and
 * adds the budget filter and the score gate described above.
 *
 * It decides in two ways, through the same steps (`bestScore`, then `gate`): `allows`, the scheduler's hook, judges the
 * one node that heartbeats; `choose`, the simulator's operation, offers the ask to nodes in the order their heartbeats
 * come and returns the first that takes it. Both read the injected clock for the wait.
 */
export class PowerAwarePolicy implements SchedulerPolicy {
  readonly name: string;
  readonly perContainer = true;
  readonly options: PowerPlacementOptions;
  /** Since when each ask (job and priority) has been declined on a node that was not among the best. */
  private readonly declinedSince = new Map<string, number>();

  constructor(
    readonly inner: SchedulerPolicy,
    private readonly source: PowerPlacementSource,
    options: Partial<PowerPlacementOptions>,
    private readonly clock: Clock,
  ) {
    this.options = resolvePowerPlacementOptions(options);
    this.name = `${inner.name}+power-aware`;
  }

  /** The gate's key of an ask of `appId` at `priority`. */
  static askKey(appId: string, priority: number): string {
    return `${appId}#${priority}`;
  }

  /** The inner policy's answer, then the budget filter, then the score gate (the scheduler's heartbeat hook). */
  allows(app: AppView, node: NodeView, priority: number, resource?: Resources): boolean {
    if (!this.inner.allows(app, node, priority, resource)) return false;
    if (!resource) return true;
    const me = this.source.power(node);
    if (!me) return true;
    if (!budgetAllows(me, resource.vcoresMilli)) return false;
    const all: PowerNode[] = [];
    // The nodes that could take the container now: the same policy allows the job there, the ask fits the headroom.
    const rivals: PowerNode[] = [];
    for (const v of this.source.nodes()) {
      const p: PowerNode | undefined = v.nodeId === node.nodeId ? me : this.source.power(v);
      if (!p) continue;
      all.push(p);
      if (p === me || (fits(resource, v.headroom) && this.inner.allows(app, v, priority, resource))) rivals.push(p);
    }
    const domains = domainPower(all);
    const ask = { key: PowerAwarePolicy.askKey(app.appId, priority), containerMilli: resource.vcoresMilli };
    const best = this.bestScore(ask, rivals, domains);
    return this.gate(ask, powerScore(me, domains, this.options.alpha).score, best);
  }

  /**
   * The simulator's operation, the decisions `allows` makes on heartbeats: offers `ask` to each of `offers` in turn (the
   * nodes that could take it now, in the order their heartbeats come) and returns the first that takes it, or undefined
   * when none does (the ask waits for the next heartbeats). A node takes it when it passes the budget filter and its
   * score is within `scoreTolerance` of the best among the offers that pass it, or when the ask has waited `waitMs`
   * since its first decline. `domains`: the predicted draws of every node that counts (`domainPower` of them all, or
   * the same sums kept up to date).
   */
  choose(
    ask: PowerAsk,
    offers: readonly PowerNode[],
    domains: ReadonlyMap<string, DomainPower>,
  ): PowerNode | undefined {
    const best = this.bestScore(ask, offers, domains);
    for (const n of offers)
      if (budgetAllows(n, ask.containerMilli) && this.gate(ask, powerScore(n, domains, this.options.alpha).score, best))
        return n;
    return undefined;
  }

  /** Forgets a job (it finished). */
  forget(appId: string): void {
    for (const key of this.declinedSince.keys()) if (key.startsWith(`${appId}#`)) this.declinedSince.delete(key);
  }

  /** The best score among `rivals` that pass the budget filter for `ask` (-Infinity: none). */
  private bestScore(ask: PowerAsk, rivals: readonly PowerNode[], domains: ReadonlyMap<string, DomainPower>): number {
    let best = -Infinity;
    for (const r of rivals)
      if (budgetAllows(r, ask.containerMilli)) best = Math.max(best, powerScore(r, domains, this.options.alpha).score);
    return best;
  }

  /**
   * The score gate for a node that passed the budget filter: takes the ask when `score` is within the tolerance of
   * `best`, else declines it, until the ask has been declined for `waitMs` (from its first decline).
   */
  private gate(ask: PowerAsk, score: number, best: number): boolean {
    if (score >= best - this.options.scoreTolerance) {
      this.declinedSince.delete(ask.key);
      return true;
    }
    const now = this.clock.nowMs();
    const since = this.declinedSince.get(ask.key);
    if (since === undefined) {
      this.declinedSince.set(ask.key, now);
      return this.options.waitMs === 0;
    }
    return now - since >= this.options.waitMs;
  }
}
