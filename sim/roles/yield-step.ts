/**
 * The node manager's yield step on a simulated server: the tasks the yield controller (`chooseVictims`, the daemon's
 * own policy) kills when the primary grows into what Harvest holds, in kill order, and those the preemption notice
 * (`containersAtRisk`) names at risk, on the same input.
 */
import { chooseVictims, containersAtRisk } from "../../nodemanager/index.js";
import type { VictimOrder, YieldContainer, YieldInput } from "../../nodemanager/index.js";

/** A running task as the simulators keep it. */
export interface SimTask {
  containerId: string;
  startMs: number;
  /** What it holds, milli-cores. @default the server's taskMilli */
  milli?: number;
  /** The job manager's container (killed last). @default false */
  isAm?: boolean;
  /**
   * When its task started running (the node manager's `startedMs`, which "work-lost" counts running time from);
   * undefined while it launches. @default undefined
   */
  launchedMs?: number;
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

/** How the step orders its victims, as the node manager's `victimOrder` and `victimNearEndMs`. */
export interface SimVictimChoice<T> {
  order: VictimOrder;
  nowMs: number;
  nearEndMs: number;
  /** A task's progress now, 0..1, as it would report it (undefined: none). */
  progressOf?: (t: T) => number | undefined;
}

/**
 * The yield controller's view of `running`: under "youngest" each container's age counts from its grant (the
 * simulators' stock model); under "work-lost" from its launch, as the node manager's `startedMs` (a task still
 * launching has run nothing; a job manager, whose launch the simulators do not stamp, counts from its grant), with the
 * task's progress.
 */
export function simYieldContainers<T extends SimTask>(
  server: Pick<YieldServer, "taskMilli">,
  running: Iterable<T>,
  choice?: SimVictimChoice<T>,
): YieldContainer[] {
  const containers: YieldContainer[] = [];
  const workLost = choice?.order === "work-lost";
  for (const t of running) {
    const progress = workLost && !t.isAm ? choice.progressOf?.(t) : undefined;
    containers.push({
      containerId: t.containerId,
      vcoresMilli: t.milli ?? server.taskMilli,
      startedMs: workLost ? (t.launchedMs ?? (t.isAm ? t.startMs : choice.nowMs)) : t.startMs,
      isAm: t.isAm ?? false,
      ...(progress !== undefined ? { progress } : {}),
    });
  }
  return containers;
}

/** The yield controller's whole input for `running` on `server` (what the node manager's `yieldInput` builds). */
export function simYieldInput<T extends SimTask>(
  server: YieldServer,
  running: Iterable<T>,
  choice?: SimVictimChoice<T>,
): YieldInput {
  return {
    capacityMilli: server.capacityMilli,
    primaryMilli: server.primaryMilli,
    reserveMilli: server.reserveMilli,
    containers: simYieldContainers(server, running, choice),
    ...(choice ? { order: choice.order, nowMs: choice.nowMs, nearEndMs: choice.nearEndMs } : {}),
  };
}

/**
 * The tasks to kill so that the rest fit beside the primary and the reserve (none when they already fit), in the
 * order `choice` names (youngest first without one).
 */
export function yieldVictims<T extends SimTask>(
  server: YieldServer,
  running: Iterable<T>,
  choice?: SimVictimChoice<T>,
): T[] {
  if (server.heldMilli <= server.capacityMilli - server.primaryMilli - server.reserveMilli) return [];
  return yieldStep(server, running, choice, 0).victims;
}

/**
 * One yield step with the preemption notice: the victims (as `yieldVictims`) and the tasks at risk were the primary
 * `marginMilli` higher (`containersAtRisk`, victims excluded), both in kill order and from one input.
 */
export function yieldStep<T extends SimTask>(
  server: YieldServer,
  running: Iterable<T>,
  choice: SimVictimChoice<T> | undefined,
  marginMilli: number,
): { victims: T[]; atRisk: T[] } {
  const byId = new Map<string, T>();
  for (const t of running) byId.set(t.containerId, t);
  const input = simYieldInput(server, byId.values(), choice);
  const victims = chooseVictims(input).victims.map((id) => byId.get(id)!);
  const atRisk = marginMilli > 0 ? containersAtRisk(input, marginMilli).map((id) => byId.get(id)!) : [];
  return { victims, atRisk };
}
