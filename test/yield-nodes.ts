/**
 * Random nodes for the parity tests of the yield step and the preemption notice: the same containers as the node
 * manager keeps them (`YieldSource`) and as the compute simulator does (`Attempt`), with the progress the tasks
 * reported.
 */
import type { SeededRng } from "../common/rng.js";
import type { YieldSource } from "../nodemanager/yield-inputs.js";
import { SimJobManagers } from "../sim/roles/job-manager.js";
import type { Attempt } from "../sim/roles/job-run.js";

export const CAPACITY = { vcoresMilli: 16_000, memoryMb: 65_536 };
export const RESERVE_FRACTION = 0.1;
export const NOW_MS = 1_000_000;

/** One node: containers as the node manager keeps them and as the simulator does, alike. */
export interface YieldNode {
  primaryMilli: number;
  daemon: YieldSource[];
  sim: Attempt[];
  progress: Map<string, number>;
  /** What the containers hold, milli-cores. */
  held: number;
}

/** How a random node is drawn. */
export interface YieldNodeShape {
  /** Each task was granted up to this long before its process started. */
  maxLaunchMs: number;
  /** The primary is drawn from `capacity - held - primaryBelowMilli` to `held + primarySpanMilli` above that. */
  primaryBelowMilli: number;
  primarySpanMilli: number;
}

/**
 * A random node of up to 12 containers (one in five a job manager) of 0.5, 1 or 2 cores, some of them done. The
 * simulator's stock model ages containers from their grant, work-lost from their start, as the node manager does.
 */
export function randomYieldNode(rng: SeededRng, index: number, shape: YieldNodeShape): YieldNode {
  const progressOf = new SimJobManagers(undefined as never);
  const n = 1 + rng.int(12);
  const daemon: YieldSource[] = [];
  const sim: Attempt[] = [];
  const progress = new Map<string, number>();
  for (let i = 0; i < n; i++) {
    const containerId = `container_${index}_${String(i).padStart(3, "0")}`;
    const isAm = rng.next() < 0.2;
    const milli = isAm ? 500 : [500, 1000, 2000][rng.int(3)]!;
    const startedMs = NOW_MS - rng.int(600_000);
    const workMs = 1000 + rng.int(900_000);
    // Work left as of now at full speed: anything from none to all of it.
    const workLeftMs = Math.min(workMs, rng.int(workMs + 1));
    const attempt = {
      containerId,
      startMs: isAm ? startedMs : startedMs - rng.int(shape.maxLaunchMs + 1),
      launchedMs: startedMs,
      milli,
      isAm,
      launched: true,
      alive: true,
      workMs: isAm ? 0 : workMs,
      workLeftMs: isAm ? 0 : workLeftMs,
      sinceMs: NOW_MS,
      rate: 1,
      version: 0,
    } as unknown as Attempt;
    sim.push(attempt);
    daemon.push({ spec: { containerId, vcoresMilli: milli, memoryMb: 1024, isAm }, startedMs });
    // What the task reported, as the node manager's status poll keeps it.
    const p = progressOf.progressOf(attempt, NOW_MS);
    if (p !== undefined && rng.next() < 0.8) progress.set(containerId, p);
  }
  const held = sim.reduce((sum, a) => sum + a.milli, 0);
  const primaryMilli = Math.max(
    0,
    CAPACITY.vcoresMilli - held - shape.primaryBelowMilli + rng.int(held + shape.primarySpanMilli),
  );
  return { primaryMilli, daemon, sim, progress, held };
}
