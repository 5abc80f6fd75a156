/**
 * One policy path for the yield step: the node manager's tick (`yieldInput` from its running containers, its primary
 * sample, its options and its tasks' reported progress, then `chooseVictims`) and the compute simulator's
 * (`yieldVictims` over its attempts, with their progress from `SimJobManagers.progressOf`) choose the same victims for
 * the same containers, under both victim orders.
 */
import { describe, expect, it } from "vitest";
import { SeededRng } from "../../common/rng.js";
import { chooseVictims } from "../../nodemanager/policy/yield-controller.js";
import type { VictimOrder } from "../../nodemanager/policy/yield-controller.js";
import { yieldInput } from "../../nodemanager/yield-inputs.js";
import type { YieldSource } from "../../nodemanager/yield-inputs.js";
import { SimJobManagers } from "../../sim/roles/job-manager.js";
import type { Attempt } from "../../sim/roles/job-run.js";
import { yieldVictims } from "../../sim/roles/yield-step.js";

const CAPACITY = { vcoresMilli: 16_000, memoryMb: 65_536 };
const RESERVE_FRACTION = 0.1;
const NOW_MS = 1_000_000;

/** One node: containers as the node manager keeps them and as the simulator does, alike. */
interface Node {
  primaryMilli: number;
  daemon: YieldSource[];
  sim: Attempt[];
  progress: Map<string, number>;
}

/**
 * A random node of up to 12 containers (one in five a job manager) of 0.5, 1 or 2 cores, some of them done. Each task
 * was granted up to `maxLaunchMs` before its process started (the simulator's stock model ages containers from their
 * grant, work-lost from their start, as the node manager does).
 */
function randomNode(rng: SeededRng, index: number, maxLaunchMs: number): Node {
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
      startMs: isAm ? startedMs : startedMs - rng.int(maxLaunchMs + 1),
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
  // A primary from leaving them all room to leaving none.
  const primaryMilli = Math.max(0, CAPACITY.vcoresMilli - held - 2000 + rng.int(held + 4000));
  return { primaryMilli, daemon, sim, progress };
}

describe("the yield step's parity between the node manager and the simulator", () => {
  for (const order of ["youngest", "work-lost"] as VictimOrder[])
    it(`chooses the same victims on either path under ${order}`, () => {
      const rng = new SeededRng(44);
      let withVictims = 0;
      for (let i = 0; i < 300; i++) {
        // Youngest-first ages a simulated container from its grant: the same as the daemon's only when launch is instant.
        const node = randomNode(rng, i, order === "work-lost" ? 5000 : 0);
        const nearEndMs = [0, 30_000][i % 2]!;
        const options = {
          capacity: CAPACITY,
          reserveFraction: RESERVE_FRACTION,
          victimOrder: order,
          victimNearEndMs: nearEndMs,
        };
        const sample = { cpuMilli: node.primaryMilli, utilization: node.primaryMilli / CAPACITY.vcoresMilli };
        const daemon = chooseVictims(
          yieldInput(node.daemon, sample, options, NOW_MS, (id) => node.progress.get(id)),
        ).victims;
        const sim = yieldVictims(
          {
            capacityMilli: CAPACITY.vcoresMilli,
            primaryMilli: node.primaryMilli,
            reserveMilli: Math.ceil(CAPACITY.vcoresMilli * RESERVE_FRACTION),
            heldMilli: node.sim.reduce((sum, a) => sum + a.milli, 0),
            taskMilli: 1000,
          },
          node.sim,
          {
            order,
            nowMs: NOW_MS,
            nearEndMs,
            progressOf: (a) => node.progress.get(a.containerId),
          },
        ).map((a) => a.containerId);
        expect(sim).toEqual(daemon);
        if (daemon.length > 0) withVictims++;
      }
      // The scenarios exercise the choice, not only nodes with room.
      expect(withVictims).toBeGreaterThan(100);
    });

  it("is a real choice: the two orders differ on some of the same nodes", () => {
    const rng = new SeededRng(44);
    let differ = 0;
    for (let i = 0; i < 300; i++) {
      const node = randomNode(rng, i, 0);
      const sample = { cpuMilli: node.primaryMilli, utilization: 0 };
      const victims = (order: VictimOrder) =>
        chooseVictims(
          yieldInput(
            node.daemon,
            sample,
            { capacity: CAPACITY, reserveFraction: RESERVE_FRACTION, victimOrder: order, victimNearEndMs: 0 },
            NOW_MS,
            (id) => node.progress.get(id),
          ),
        ).victims;
      if (JSON.stringify(victims("youngest")) !== JSON.stringify(victims("work-lost"))) differ++;
    }
    expect(differ).toBeGreaterThan(10);
  });
});
