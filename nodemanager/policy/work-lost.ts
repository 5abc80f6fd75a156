/**
 * The yield controller's "work-lost" victim choice: of the containers on a node, the set whose kill frees the cores and
 * memory the primary needs this tick while throwing away the least work. A container's lost work is its elapsed
 * running time x its cores (milli-core-ms): everything it ran is run again. Three tiers, each used only when the ones
 * before cannot cover the deficit on their own:
 *
 *   0. tasks                                     (the least work lost among them)
 *   1. tasks near their end: a reported progress p after an elapsed e leaves about e x (1 - p) / p to run; at most
 *      `nearEndMs` of it is "near the end" (such a task frees its cores soon anyway and is often its stage's last)
 *   2. job managers (killing one costs its whole job's bookkeeping and every task it runs)
 *
 * Within the tier that completes the cover, the choice is greedy by lost work per share of the deficit a container
 * frees, with, at every step, the cheapest single container that completes the cover as an alternative (for a
 * one-dimensional cover this is within twice the least lost work; with equal-sized containers, the common case, it is
 * the least). Then a reverse pass spares every chosen container, job managers and near-end tasks first, whose kill
 * the others already make unnecessary. Deterministic: ties go to the younger container, then to the later-granted id.
 */

/**
 * Expected time left under which a task counts as near its end, when `nearEndMs` is not given: 0, only a task that
 * reported all its work done. Wider windows (10 s, 30 s) lost more work and no job time in the simulator
 * (docs/policies.md): sparing a short task near its end means killing a longer-running one in its place.
 */
export const DEFAULT_NEAR_END_MS = 0;

/** What the choice reads of a container (a `YieldContainer`). */
export interface WorkLostContainer {
  containerId: string;
  vcoresMilli: number;
  memoryMb?: number;
  /** When its process started: its running time counts from here. */
  startedMs: number;
  isAm: boolean;
  /** Its task's last reported progress, 0..1 (undefined: none). */
  progress?: number;
}

/** What the primary needs freed this tick (<= 0: that resource already fits). */
export interface YieldDeficit {
  milli: number;
  memoryMb: number;
}

/** A candidate as the work-lost choice weighs it. */
interface Candidate {
  c: WorkLostContainer;
  /** Milli-core-ms its kill throws away. */
  lost: number;
  tier: number;
}

/** A task's expected time left from its reported progress after `elapsedMs`; Infinity when it reports none (or 0). */
export function expectedRemainingMs(elapsedMs: number, progress: number | undefined): number {
  if (progress === undefined || !(progress > 0)) return Infinity;
  if (progress >= 1) return 0;
  return (elapsedMs * (1 - progress)) / progress;
}

/** The milli-core-ms a container's kill throws away at `nowMs`: its elapsed running time x its cores. */
export function lostWork(c: WorkLostContainer, nowMs: number): number {
  return Math.max(0, nowMs - c.startedMs) * c.vcoresMilli;
}

/** Kill order among candidates of one tier: least lost work first, then the younger, then the later-granted id. */
function cheaperFirst(a: Candidate, b: Candidate): number {
  if (a.tier !== b.tier) return a.tier - b.tier;
  if (a.lost !== b.lost) return a.lost - b.lost;
  if (a.c.startedMs !== b.c.startedMs) return b.c.startedMs - a.c.startedMs;
  return a.c.containerId < b.c.containerId ? 1 : a.c.containerId > b.c.containerId ? -1 : 0;
}

/** What `set` frees. */
function freedBy(set: readonly Candidate[]): YieldDeficit {
  const freed = { milli: 0, memoryMb: 0 };
  for (const x of set) {
    freed.milli += x.c.vcoresMilli;
    freed.memoryMb += x.c.memoryMb ?? 0;
  }
  return freed;
}

function covers(set: readonly Candidate[], need: YieldDeficit): boolean {
  const freed = freedBy(set);
  return freed.milli >= need.milli && freed.memoryMb >= need.memoryMb;
}

/**
 * A cheap cover of `need` from `pool` (which covers it whole): the greedy prefix by lost work per share of the deficit
 * freed, plus the one cheapest container after it that completes the cover, at whichever prefix loses least.
 */
function cover(pool: readonly Candidate[], need: YieldDeficit): Candidate[] {
  if (need.milli <= 0 && need.memoryMb <= 0) return [];
  // A container's share of what is needed, each resource capped at what is short (over-freeing is worth nothing).
  const share = (x: Candidate): number =>
    (need.milli > 0 ? Math.min(x.c.vcoresMilli, need.milli) / need.milli : 0) +
    (need.memoryMb > 0 ? Math.min(x.c.memoryMb ?? 0, need.memoryMb) / need.memoryMb : 0);
  const order = pool
    .filter((x) => share(x) > 0)
    .map((x) => ({ x, ratio: x.lost / share(x) }))
    .sort((a, b) => a.ratio - b.ratio || cheaperFirst(a.x, b.x))
    .map((r) => r.x);
  let best: Candidate[] = order;
  let bestCost = Infinity;
  let milli = 0;
  let memoryMb = 0;
  let prefixCost = 0;
  for (let i = 0; i < order.length && prefixCost < bestCost; i++) {
    let completion: Candidate | undefined;
    for (let j = i; j < order.length; j++) {
      const x = order[j]!;
      const completes = milli + x.c.vcoresMilli >= need.milli && memoryMb + (x.c.memoryMb ?? 0) >= need.memoryMb;
      if (completes && (completion === undefined || cheaperFirst(x, completion) < 0)) completion = x;
    }
    if (completion !== undefined && prefixCost + completion.lost < bestCost) {
      best = [...order.slice(0, i), completion];
      bestCost = prefixCost + completion.lost;
    }
    const next = order[i]!;
    milli += next.c.vcoresMilli;
    memoryMb += next.c.memoryMb ?? 0;
    prefixCost += next.lost;
    // The prefix covers on its own: a longer one only loses more.
    if (milli >= need.milli && memoryMb >= need.memoryMb) break;
  }
  return best;
}

/**
 * The containers to kill, in kill order, so that `deficit` is freed with the least work lost (see the file header).
 * When even every container does not cover it (the primary alone exceeds what it may leave), every one is killed.
 */
export function workLostVictims(
  containers: readonly WorkLostContainer[],
  deficit: YieldDeficit,
  nowMs: number,
  nearEndMs: number = DEFAULT_NEAR_END_MS,
): string[] {
  const candidates: Candidate[] = containers.map((c) => {
    const lost = lostWork(c, nowMs);
    const nearEnd = expectedRemainingMs(Math.max(0, nowMs - c.startedMs), c.progress) <= nearEndMs;
    return { c, lost, tier: c.isAm ? 2 : nearEnd ? 1 : 0 };
  });
  let chosen: Candidate[] = [];
  if (!covers(candidates, deficit)) chosen = candidates;
  else {
    // The first tier with which the cover is possible: all of the tiers before it go, and the cover of what is left
    // comes from it.
    for (let tier = 0; tier <= 2; tier++) {
      const before = candidates.filter((x) => x.tier < tier);
      const upTo = candidates.filter((x) => x.tier <= tier);
      if (!covers(upTo, deficit)) continue;
      const freed = freedBy(before);
      const rest = { milli: deficit.milli - freed.milli, memoryMb: deficit.memoryMb - freed.memoryMb };
      chosen = [
        ...before,
        ...cover(
          candidates.filter((x) => x.tier === tier),
          rest,
        ),
      ];
      break;
    }
    // Spare what the others make unnecessary: the most valuable first (job managers, near-end tasks, the most work).
    const spareOrder = [...chosen].sort((a, b) => -cheaperFirst(a, b));
    for (const x of spareOrder) {
      const without = chosen.filter((y) => y !== x);
      if (covers(without, deficit)) chosen = without;
    }
  }
  return chosen.sort(cheaperFirst).map((x) => x.c.containerId);
}

/** The lost work (milli-core-ms) of killing `victims` among `containers` at `nowMs`. */
export function lostWorkOf(
  containers: readonly WorkLostContainer[],
  victims: readonly string[],
  nowMs: number,
): number {
  const byId = new Map(containers.map((c) => [c.containerId, c]));
  let total = 0;
  for (const id of victims) {
    const c = byId.get(id);
    if (c) total += lostWork(c, nowMs);
  }
  return total;
}
