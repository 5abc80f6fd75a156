/**
 * The yield controller (seeds/004, sections 1 and 4.1): each tick it computes what secondary work may use on the node
 * and, when the secondary holds more, picks victims to kill. Pure: the node manager feeds it and carries out the kills.
 *
 *   allowance = capacity - primary usage - reserve        (for cores, and the same for memory)
 *
 * Secondary usage is taken as the containers' allocations (the cgroup ceiling each one can burst to within 100 ms),
 * not their measured usage, so the primary's need plus the reserve is guaranteed free once the victims are gone.
 * Victims are the youngest containers first (the least work lost), the job manager's own container last (killing it
 * costs the whole job's bookkeeping), until the secondary fits in both the cores and the memory the primary leaves, so
 * secondary work never pushes the primary into swapping or the OOM killer. The primary is never touched.
 */

/** A secondary container as the controller sees it. */
export interface YieldContainer {
  containerId: string;
  vcoresMilli: number;
  /** Its memory grant (what its cgroup lets it use). @default 0 */
  memoryMb?: number;
  startedMs: number;
  isAm: boolean;
}

/** One tick's inputs. */
export interface YieldInput {
  capacityMilli: number;
  primaryMilli: number;
  reserveMilli: number;
  /** The node's memory, the primary's and the reserve, MB; memory is not considered without `capacityMemoryMb`. */
  capacityMemoryMb?: number;
  primaryMemoryMb?: number;
  reserveMemoryMb?: number;
  containers: readonly YieldContainer[];
}

/** One tick's decision. */
export interface YieldDecision {
  /** What the secondary may hold (may be negative when the primary alone exceeds capacity minus reserve). */
  allowanceMilli: number;
  /** What the secondary holds now. */
  secondaryMilli: number;
  /** The same for memory, MB (Infinity when memory is not considered). */
  memoryAllowanceMb: number;
  secondaryMemoryMb: number;
  /** Containers to kill, in kill order. */
  victims: string[];
}

/** Chooses the containers to kill so that the secondary fits in what the primary leaves. */
export function chooseVictims(input: YieldInput): YieldDecision {
  const allowanceMilli = input.capacityMilli - input.primaryMilli - input.reserveMilli;
  const memoryAllowanceMb =
    input.capacityMemoryMb === undefined
      ? Infinity
      : input.capacityMemoryMb - (input.primaryMemoryMb ?? 0) - (input.reserveMemoryMb ?? 0);
  let secondaryMilli = 0;
  let secondaryMemoryMb = 0;
  for (const c of input.containers) {
    secondaryMilli += c.vcoresMilli;
    secondaryMemoryMb += c.memoryMb ?? 0;
  }
  const decision: YieldDecision = { allowanceMilli, secondaryMilli, memoryAllowanceMb, secondaryMemoryMb, victims: [] };
  if (secondaryMilli <= allowanceMilli && secondaryMemoryMb <= memoryAllowanceMb) return decision;
  const order = [...input.containers].sort((a, b) => {
    if (a.isAm !== b.isAm) return a.isAm ? 1 : -1;
    if (a.startedMs !== b.startedMs) return b.startedMs - a.startedMs;
    return a.containerId < b.containerId ? 1 : -1;
  });
  let held = secondaryMilli;
  let heldMemory = secondaryMemoryMb;
  for (const c of order) {
    if (held <= allowanceMilli && heldMemory <= memoryAllowanceMb) break;
    decision.victims.push(c.containerId);
    held -= c.vcoresMilli;
    heldMemory -= c.memoryMb ?? 0;
  }
  return decision;
}
