/**
 * The resource manager's side of the preemption notice (nodemanager/policy/preemption-notice.ts): the containers a
 * node manager reports at risk on its heartbeat go, as YARN's PreemptionMessage, to their jobs' next Allocate answers;
 * and the servers a job manager asks its tasks to avoid (`avoid_nodes`, fed by those notices) are checked here before
 * the scheduler takes them (`Scheduler.setTaskAvoid`). Both lists come from the wire and are bounded.
 */
import { HarvestError } from "../common/errors.js";

/** The most container ids of one heartbeat's `containers_at_risk` read; the rest are ignored. */
export const MAX_AT_RISK_IDS = 1000;

/** The most notices one job keeps for its next Allocate answer; older ones are dropped first. */
export const MAX_QUEUED_NOTICES = 1000;

/** The most servers one Allocate may ask its tasks to avoid. */
export const MAX_AVOID_NODES = 1000;

/** One container at risk, as its job manager is told it (the wire's `PreemptionNotice.AtRisk`). */
export interface AtRisk {
  containerId: string;
  nodeId: string;
}

/** Where the scheduler holds a container: its application and node (undefined when it does not hold it). */
export type AllocationOf = (containerId: string) => { appId: string; nodeId: string } | undefined;

/**
 * A heartbeat's at-risk ids from node `nodeId`, grouped by application: only the containers the scheduler holds on
 * that node (an unknown id, or one held elsewhere, is ignored), each once, from the first MAX_AT_RISK_IDS ids.
 */
export function atRiskByApp(nodeId: string, ids: readonly string[], allocationOf: AllocationOf): Map<string, AtRisk[]> {
  const out = new Map<string, AtRisk[]>();
  const seen = new Set<string>();
  for (const containerId of ids.slice(0, MAX_AT_RISK_IDS)) {
    if (typeof containerId !== "string" || seen.has(containerId)) continue;
    seen.add(containerId);
    const alloc = allocationOf(containerId);
    if (!alloc || alloc.nodeId !== nodeId) continue;
    let list = out.get(alloc.appId);
    if (!list) out.set(alloc.appId, (list = []));
    list.push({ containerId, nodeId });
  }
  return out;
}

/** Adds `fresh` to a job's queued notices (a container already queued is not queued twice), keeping the newest. */
export function queueNotices(queue: AtRisk[], fresh: readonly AtRisk[]): void {
  const queued = new Set(queue.map((n) => n.containerId));
  for (const n of fresh) {
    if (queued.has(n.containerId)) continue;
    queued.add(n.containerId);
    queue.push(n);
  }
  if (queue.length > MAX_QUEUED_NOTICES) queue.splice(0, queue.length - MAX_QUEUED_NOTICES);
}

/** An Allocate's `avoid_nodes`, deduplicated; INVALID_ARGUMENT naming the field when it is not a list of node names. */
export function checkAvoidNodes(value: unknown): string[] {
  const bad = (why: string): never => {
    throw new HarvestError("INVALID_ARGUMENT", `avoidNodes ${why}`, { details: { field: "avoidNodes" } });
  };
  if (value === undefined || value === null) return [];
  if (!Array.isArray(value)) return bad("must be a list of node ids");
  if (value.length > MAX_AVOID_NODES) bad(`names ${value.length} servers; at most ${MAX_AVOID_NODES}`);
  const out = new Set<string>();
  for (const id of value as unknown[]) {
    if (typeof id !== "string" || id.length === 0 || id.length > 256) bad("must hold node ids of 1-256 characters");
    out.add(id as string);
  }
  return [...out];
}
