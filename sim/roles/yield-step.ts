/**
 * The node manager's yield step on a simulated server: the tasks the yield controller (`chooseVictims`, the daemon's
 * own policy) kills when the primary grows into what Harvest holds, in kill order.
 */
import { chooseVictims } from "../../nodemanager/index.js";
import type { YieldContainer } from "../../nodemanager/index.js";

/** A running task as the simulators keep it. */
export interface SimTask {
  containerId: string;
  startMs: number;
  /** What it holds, milli-cores. @default the server's taskMilli */
  milli?: number;
  /** The job manager's container (killed last). @default false */
  isAm?: boolean;
}

/** What the server looks like at the yield step. */
export interface YieldServer {
  capacityMilli: number;
  primaryMilli: number;
  reserveMilli: number;
  /** What Harvest's containers hold (each its `milli`, or `taskMilli`). */
  heldMilli: number;
  taskMilli: number;
}

/** The tasks to kill so that the rest fit beside the primary and the reserve (none when they already fit). */
export function yieldVictims<T extends SimTask>(server: YieldServer, running: Iterable<T>): T[] {
  if (server.heldMilli <= server.capacityMilli - server.primaryMilli - server.reserveMilli) return [];
  const byId = new Map<string, T>();
  const containers: YieldContainer[] = [];
  for (const t of running) {
    byId.set(t.containerId, t);
    containers.push({
      containerId: t.containerId,
      vcoresMilli: t.milli ?? server.taskMilli,
      startedMs: t.startMs,
      isAm: t.isAm ?? false,
    });
  }
  const decision = chooseVictims({
    capacityMilli: server.capacityMilli,
    primaryMilli: server.primaryMilli,
    reserveMilli: server.reserveMilli,
    containers,
  });
  return decision.victims.map((id) => byId.get(id)!);
}
