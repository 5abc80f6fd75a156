/**
 * The yield controller (seeds/004, sections 1 and 4.1): each tick it computes what secondary work may use on the node
 * and, when the secondary holds more, picks victims to kill. Pure: the node manager feeds it and carries out the kills.
 *
 *   allowance = capacity - primary usage - reserve
 *
 * Secondary usage is taken as the containers' allocations (the cgroup ceiling each one can burst to within 100 ms),
 * not their measured usage, so the primary's need plus the reserve is guaranteed free once the victims are gone.
 * Victims are the youngest containers first (the least work lost), the job manager's own container last (killing it
 * costs the whole job's bookkeeping). The primary is never touched.
 */

/** A secondary container as the controller sees it. */
export interface YieldContainer {
  containerId: string;
  vcoresMilli: number;
  startedMs: number;
  isAm: boolean;
}

/** One tick's inputs. */
export interface YieldInput {
  capacityMilli: number;
  primaryMilli: number;
  reserveMilli: number;
  containers: readonly YieldContainer[];
}

/** One tick's decision. */
export interface YieldDecision {
  /** What the secondary may hold (may be negative when the primary alone exceeds capacity minus reserve). */
  allowanceMilli: number;
  /** What the secondary holds now. */
  secondaryMilli: number;
  /** Containers to kill, in kill order. */
  victims: string[];
}

/** Chooses the containers to kill so that the secondary fits in what the primary leaves. */
export function chooseVictims(input: YieldInput): YieldDecision {
  const allowanceMilli = input.capacityMilli - input.primaryMilli - input.reserveMilli;
  let secondaryMilli = 0;
  for (const c of input.containers) secondaryMilli += c.vcoresMilli;
  const decision: YieldDecision = { allowanceMilli, secondaryMilli, victims: [] };
  if (secondaryMilli <= allowanceMilli) return decision;
  const order = [...input.containers].sort((a, b) => {
    if (a.isAm !== b.isAm) return a.isAm ? 1 : -1;
    if (a.startedMs !== b.startedMs) return b.startedMs - a.startedMs;
    return a.containerId < b.containerId ? 1 : -1;
  });
  let held = secondaryMilli;
  for (const c of order) {
    if (held <= allowanceMilli) break;
    decision.victims.push(c.containerId);
    held -= c.vcoresMilli;
  }
  return decision;
}
