/**
 * Data-local placement: where an ask's containers would rather run (the servers holding a replica of each task's input
 * split, and their racks), and how long an ask waits for such a server before it takes a worse one.
 *
 * The "delay" policy is delay scheduling (Zaharia et al., EuroSys 2010; YARN's node- and rack-locality delays,
 * Spark's `spark.locality.wait`): a server that heartbeats with room, but holds none of an ask's splits, is passed
 * over until the ask has waited `nodeDelayMs` since it last got a node-local container; then it takes a server in one
 * of its splits' racks, and after `rackDelayMs` more, any server. The "none" policy is the stock baseline the claim is
 * measured against: it still prefers a server holding a split when that one heartbeats, but never waits, so the first
 * server with room gets the work (what a scheduler without locality gives).
 *
 * Containers of an ask that have no preference (`count` above `located`) go anywhere at once under both. Pure: the
 * clock is injected, and the scheduler (resourcemanager/policy/scheduler.ts) calls this for the daemon and the
 * simulator alike.
 */
import type { Clock } from "../../common/clock.js";

/** The locality policies: delay scheduling, and the stock baseline that never waits. */
export type LocalityPolicyName = "delay" | "none";

export const LOCALITY_POLICIES: readonly LocalityPolicyName[] = ["delay", "none"];

/** How good a grant is for the ask it serves, best first. */
export type LocalityLevel = "node" | "rack" | "any";

/** Settings of the locality policy. */
export interface LocalityOptions {
  policy: LocalityPolicyName;
  /** How long an ask passes over servers holding none of its splits before it takes one in their racks. */
  nodeDelayMs: number;
  /** How much longer before it takes any server. */
  rackDelayMs: number;
}

export const DEFAULT_LOCALITY: LocalityOptions = { policy: "delay", nodeDelayMs: 3_000, rackDelayMs: 3_000 };

/**
 * Where an ask's containers would rather run: how many of them prefer each node (by node id, which is the server's
 * datanode id too) and each rack, and how many of the ask's `count` have a preference at all. YARN's per-host and
 * per-rack request counts. A task whose split has three replicas adds one to each of the three nodes.
 */
export interface LocalityDemand {
  nodes: Map<string, number>;
  racks: Map<string, number>;
  /** How many of the ask's containers have a preference (<= its count). */
  located: number;
}

/** What the locality policy decides for the next container of an ask on a heartbeating node. */
export type LocalityGrant =
  | { level: LocalityLevel; located: boolean }
  /** Pass this node over for now (the ask waits for a better one). */
  | undefined;

/** A deep copy of a demand (asks are copied in and out of the scheduler). */
export function copyDemand(d: LocalityDemand): LocalityDemand {
  return { nodes: new Map(d.nodes), racks: new Map(d.racks), located: d.located };
}

/** The locality policy: pure, with the clock injected. */
export class LocalityPolicy {
  constructor(
    readonly options: LocalityOptions,
    private readonly clock: Clock,
  ) {}

  get name(): LocalityPolicyName {
    return this.options.policy;
  }

  nowMs(): number {
    return this.clock.nowMs();
  }

  /**
   * The widest level an ask may take now. `waitingSinceMs` is when it was first passed over since its last node-local
   * grant (undefined: it has not waited).
   */
  allowedLevel(waitingSinceMs: number | undefined): LocalityLevel {
    if (this.options.policy === "none") return "any";
    if (waitingSinceMs === undefined) return "node";
    const waited = this.clock.nowMs() - waitingSinceMs;
    if (waited >= this.options.nodeDelayMs + this.options.rackDelayMs) return "any";
    if (waited >= this.options.nodeDelayMs) return "rack";
    return "node";
  }

  /**
   * The grant for the next container of an ask of `count` containers with `demand` on a node of `rack`, when the ask
   * may go as wide as `allowed`: node-local if the node holds one of its splits, else rack-local if allowed and the
   * rack holds one, else a container without preference, else (allowed "any") a located one off its racks.
   */
  grantFor(demand: LocalityDemand, count: number, nodeId: string, rack: string, allowed: LocalityLevel): LocalityGrant {
    if (demand.located > 0 && (demand.nodes.get(nodeId) ?? 0) > 0) return { level: "node", located: true };
    if (allowed !== "node" && demand.located > 0 && (demand.racks.get(rack) ?? 0) > 0)
      return { level: "rack", located: true };
    if (count > demand.located) return { level: "any", located: false };
    if (allowed === "any") return { level: "any", located: true };
    return undefined;
  }
}

/**
 * Takes one container granted on `nodeId` (of `rack`) out of `demand`, as `grantFor` judged it. The other replicas'
 * nodes of the task it serves keep their counts until the job manager sends its asks again (as YARN's counts do).
 */
export function takeFromDemand(
  demand: LocalityDemand,
  grant: NonNullable<LocalityGrant>,
  nodeId: string,
  rack: string,
): void {
  if (!grant.located) return;
  demand.located = Math.max(0, demand.located - 1);
  if (grant.level === "node") decrement(demand.nodes, nodeId);
  if (grant.level !== "any") decrement(demand.racks, rack);
}

function decrement(counts: Map<string, number>, key: string): void {
  const n = (counts.get(key) ?? 0) - 1;
  if (n > 0) counts.set(key, n);
  else counts.delete(key);
}

/** The level a container on `nodeId` of `rack` gives a task whose split lives on `hosts` in `racks`. */
export function localityOf(
  nodeId: string,
  rack: string | undefined,
  hosts: readonly string[],
  racks: readonly string[],
): LocalityLevel {
  if (hosts.includes(nodeId)) return "node";
  if (rack !== undefined && racks.includes(rack)) return "rack";
  return "any";
}
