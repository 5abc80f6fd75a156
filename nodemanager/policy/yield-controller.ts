/**
 * The yield controller (seeds/004, sections 1 and 4.1): each tick it computes what secondary work may use on the node
 * and, when the secondary holds more, picks victims to kill. Pure: the node manager feeds it and carries out the kills.
 *
 *   allowance = capacity - primary usage - reserve        (for cores, and the same for memory)
 *
 * Secondary usage is taken as the containers' allocations (the cgroup ceiling each one can burst to within 100 ms),
 * not their measured usage, so the primary's need plus the reserve is guaranteed free once the victims are gone.
 * Victims are chosen by `order` until the secondary fits in both the cores and the memory the primary leaves, so
 * secondary work never pushes the primary into swapping or the OOM killer; the primary is never touched:
 * - "youngest" (stock, YARN's): the youngest containers first, the job manager's own container last (killing it costs
 *   the whole job's bookkeeping);
 * - "work-lost": the set that frees enough with the least work lost (elapsed running time x cores), sparing tasks near
 *   their end and job managers while others suffice (work-lost.ts).
 * Both free at least what is needed in the same tick: neither kills fewer containers than the deficit requires.
 */
import { DEFAULT_NEAR_END_MS, workLostVictims } from "./work-lost.js";

/** How the yield controller picks its victims (see the file header). */
export type VictimOrder = "youngest" | "work-lost";

/** Every victim order, the stock one first. */
export const VICTIM_ORDERS: readonly VictimOrder[] = ["youngest", "work-lost"];

/** A secondary container as the controller sees it. */
export interface YieldContainer {
  containerId: string;
  vcoresMilli: number;
  /** Its memory grant (what its cgroup lets it use). @default 0 */
  memoryMb?: number;
  /** When its process started (its running time counts from here). */
  startedMs: number;
  isAm: boolean;
  /** The task's last reported progress, 0..1; undefined when it reports none ("work-lost" only). @default undefined */
  progress?: number;
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
  /** Which containers go first. @default "youngest" */
  order?: VictimOrder;
  /** Now, for each container's running time ("work-lost" only). @default the latest `startedMs` */
  nowMs?: number;
  /** Under "work-lost", a task expected to end within this is spared while others suffice. @default 0 */
  nearEndMs?: number;
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
  if ((input.order ?? "youngest") === "work-lost") {
    const nowMs = input.nowMs ?? Math.max(...input.containers.map((c) => c.startedMs));
    const deficit = { milli: secondaryMilli - allowanceMilli, memoryMb: secondaryMemoryMb - memoryAllowanceMb };
    decision.victims = workLostVictims(input.containers, deficit, nowMs, input.nearEndMs ?? DEFAULT_NEAR_END_MS);
    return decision;
  }
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
