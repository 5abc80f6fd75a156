/**
 * The resource manager's power-aware placement as the power experiment plays it: the `PowerNode` view of every
 * server (what its heartbeats tell the resource manager), each domain's predicted draw, and the choice made by the
 * resource manager's own `PowerAwarePolicy.choose` as heartbeats come round the servers.
 */
import type { SeededRng } from "../../common/rng.js";
import type { Clock } from "../../common/clock.js";
import {
  domainPower,
  PowerAwarePolicy,
  predictedP95Watts,
  primaryOutlook,
  StockSchedulerPolicy,
} from "../../resourcemanager/index.js";
import type {
  DomainPower,
  PowerDomains,
  PowerNode,
  PowerPlacementOptions,
  PrimaryHistory,
} from "../../resourcemanager/index.js";
import type { ServerSet } from "./server-set.js";

/** Every server as the power-aware placement reads it, and the placement's choice. */
export class PowerPlacement {
  /** The resource manager's `powerNode` view of each server, kept up to date on every change. */
  readonly nodes: PowerNode[] = [];
  /** The resource manager's power-aware policy (power-aware placement only). */
  private readonly policy: PowerAwarePolicy | undefined;
  private readonly predictedWatts: Float64Array;
  private domainPredictions: Map<string, DomainPower> = new Map();
  /** Where the heartbeats are. */
  private heartbeatCursor = 0;

  /**
   * `powerAware`: the run places by the power-aware policy (otherwise the view is kept for the figures only);
   * `history`: what the resource manager knows of each primary from the history before the experiment.
   */
  constructor(
    private readonly power: PowerDomains,
    nodeIds: readonly string[],
    capMilli: Int32Array,
    private readonly history: readonly PrimaryHistory[],
    powerAware: boolean,
    options: PowerPlacementOptions,
    clock: Clock,
  ) {
    this.policy = powerAware
      ? new PowerAwarePolicy(
          new StockSchedulerPolicy(),
          // The simulator offers each task through `choose`; the scheduler hook `allows` (and so this) is unused.
          { nodes: () => [], power: () => undefined },
          options,
          clock,
        )
      : undefined;
    this.predictedWatts = new Float64Array(nodeIds.length);
    for (let s = 0; s < nodeIds.length; s++) {
      const facts = power.placementFacts(nodeIds[s]!)!;
      this.nodes.push({
        nodeId: nodeIds[s]!,
        domains: facts.domains,
        profile: facts.profile,
        capacityMilli: capMilli[s]!,
        primaryNowMilli: 0,
        allocatedMilli: 0,
        drawWatts: 0,
        limitWatts: 0,
        ...primaryOutlook(capMilli[s]!, 0, history[s]!),
      });
    }
  }

  /** The power-aware policy places tasks (else a random server with room takes them). */
  get powerAware(): boolean {
    return this.policy !== undefined;
  }

  /** The budgets were set: each node's domains as the resource manager now gives them, and the predictions anew. */
  budgetsSet(): void {
    for (const node of this.nodes) node.domains = this.power.placementFacts(node.nodeId)!.domains;
    if (this.policy) this.domainPredictions = domainPower(this.nodes);
  }

  /** The resource manager's periodic recount of the domains' predicted draws (sums drift by rounding only). */
  recount(): void {
    if (this.policy) this.domainPredictions = domainPower(this.nodes);
  }

  /**
   * Server `s`'s heartbeat: its primary, allocation and draw; with `predict`, its primary outlook and its domains'
   * predicted draws too.
   */
  heartbeat(s: number, primaryMilli: number, allocatedMilli: number, drawWatts: number, predict: boolean): void {
    const node = this.nodes[s]!;
    node.primaryNowMilli = primaryMilli;
    node.allocatedMilli = allocatedMilli;
    node.drawWatts = drawWatts;
    if (!predict) return;
    const outlook = primaryOutlook(node.capacityMilli, primaryMilli, this.history[s]!);
    node.primaryP95Milli = outlook.primaryP95Milli;
    node.primaryCritical = outlook.primaryCritical;
    const predicted = predictedP95Watts(node);
    const delta = predicted - this.predictedWatts[s]!;
    this.predictedWatts[s] = predicted;
    if (delta !== 0)
      for (const dom of node.domains) {
        const e = this.domainPredictions.get(dom.path);
        if (e) e.predictedWatts += delta;
      }
  }

  /**
   * The resource manager's power-aware choice, made by its own code (`PowerAwarePolicy.choose`, the steps its scheduler
   * hook takes on each heartbeat): the task is offered to the servers with room in the order their heartbeats come,
   * and the first that passes the budget filter (`budgetAllows`: predicted draw with the task within the node budget in
   * force) with a score (`powerScore`, Algorithm 1) within `scoreTolerance` of the best such server takes it. Heartbeats
   * come round the servers in a fixed cycle: a drain starts at a random point of it (the next heartbeat after an
   * arbitrary instant), and after a grant the same server is offered the next task first (one heartbeat grants while
   * the node takes them, each container judged anew). The best server always takes it, so the gate's bounded wait
   * never runs out here: the simulator offers every server at the same instant, where the daemon's best node takes it
   * on its own heartbeat, within one interval (not modelled, as for the stock choice).
   * Returns the server, or -1 for none; `fresh`: the first choice of a drain.
   */
  choose(taskId: number, taskMilli: number, free: ServerSet, rng: SeededRng, fresh: boolean): number {
    const policy = this.policy!;
    const n = this.nodes.length;
    if (fresh) this.heartbeatCursor = rng.int(n);
    const offers: PowerNode[] = [];
    const servers: number[] = [];
    for (let i = 0; i < n; i++) {
      const s = (this.heartbeatCursor + i) % n;
      if (!free.has(s)) continue;
      const node = this.nodes[s]!;
      // placementFacts' limit: the node budget in force (no server has a budget of its own here).
      node.limitWatts = this.power.nodeBudget(node.nodeId)?.budgetWatts ?? 0;
      offers.push(node);
      servers.push(s);
    }
    const ask = { key: PowerAwarePolicy.askKey(`task${taskId}`, 0), containerMilli: taskMilli };
    const chosen = policy.choose(ask, offers, this.domainPredictions);
    if (!chosen) return -1;
    const s = servers[offers.indexOf(chosen)]!;
    this.heartbeatCursor = s;
    return s;
  }
}
