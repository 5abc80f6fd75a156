/**
 * One policy path for the preemption notice: the node manager's (`containersAtRisk` on `yieldInput` from its live
 * containers, its primary sample and its options) and the compute simulator's (`yieldStep` over its attempts, which
 * builds its input with `simYieldContainers`) name the same containers at risk, in the same order, under both victim
 * orders and a few margins, and the simulator's step kills what the daemon's kills.
 */
import { describe, expect, it } from "vitest";
import { SeededRng } from "../../common/rng.js";
import { containersAtRisk } from "../../nodemanager/policy/preemption-notice.js";
import { chooseVictims } from "../../nodemanager/policy/yield-controller.js";
import type { VictimOrder } from "../../nodemanager/policy/yield-controller.js";
import { yieldInput } from "../../nodemanager/yield-inputs.js";
import type { YieldSource } from "../../nodemanager/yield-inputs.js";
import { SimJobManagers } from "../../sim/roles/job-manager.js";
import type { Attempt } from "../../sim/roles/job-run.js";
import { yieldStep } from "../../sim/roles/yield-step.js";

const CAPACITY = { vcoresMilli: 16_000, memoryMb: 65_536 };
const RESERVE_FRACTION = 0.1;
const NOW_MS = 1_000_000;

/** A random node of up to 12 containers (one in five a job manager), as the node manager and the simulator keep it. */
function randomNode(rng: SeededRng, index: number) {
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
    const attempt = {
      containerId,
      startMs: startedMs,
      launchedMs: startedMs,
      milli,
      isAm,
      launched: true,
      alive: true,
      workMs: isAm ? 0 : workMs,
      workLeftMs: isAm ? 0 : Math.min(workMs, rng.int(workMs + 1)),
      sinceMs: NOW_MS,
      rate: 1,
      version: 0,
    } as unknown as Attempt;
    sim.push(attempt);
    daemon.push({ spec: { containerId, vcoresMilli: milli, memoryMb: 1024, isAm }, startedMs });
    const p = progressOf.progressOf(attempt, NOW_MS);
    if (p !== undefined && rng.next() < 0.8) progress.set(containerId, p);
  }
  const held = sim.reduce((sum, a) => sum + a.milli, 0);
  // From well clear of the kill level to past it.
  const primaryMilli = Math.max(0, CAPACITY.vcoresMilli - held - 5000 + rng.int(held + 6000));
  return { primaryMilli, daemon, sim, progress, held };
}

describe("the preemption notice's parity between the node manager and the simulator", () => {
  for (const order of ["youngest", "work-lost"] as VictimOrder[])
    it(`names the same containers at risk on either path under ${order}`, () => {
      const rng = new SeededRng(4404);
      let withRisk = 0;
      let withRiskAndKills = 0;
      for (let i = 0; i < 300; i++) {
        const node = randomNode(rng, i);
        const marginMilli = [800, 1600, 3200][i % 3]!;
        const nearEndMs = [0, 30_000][i % 2]!;
        const options = {
          capacity: CAPACITY,
          reserveFraction: RESERVE_FRACTION,
          victimOrder: order,
          victimNearEndMs: nearEndMs,
        };
        const sample = { cpuMilli: node.primaryMilli, utilization: node.primaryMilli / CAPACITY.vcoresMilli };
        const input = yieldInput(node.daemon, sample, options, NOW_MS, (id) => node.progress.get(id));
        const daemonAtRisk = containersAtRisk(input, marginMilli);
        const daemonVictims = chooseVictims(input).victims;
        const sim = yieldStep(
          {
            capacityMilli: CAPACITY.vcoresMilli,
            primaryMilli: node.primaryMilli,
            reserveMilli: Math.ceil(CAPACITY.vcoresMilli * RESERVE_FRACTION),
            heldMilli: node.held,
            taskMilli: 1000,
          },
          node.sim,
          { order, nowMs: NOW_MS, nearEndMs, progressOf: (a) => node.progress.get(a.containerId) },
          marginMilli,
        );
        expect(sim.atRisk.map((a) => a.containerId)).toEqual(daemonAtRisk);
        expect(sim.victims.map((a) => a.containerId)).toEqual(daemonVictims);
        if (daemonAtRisk.length > 0) withRisk++;
        if (daemonAtRisk.length > 0 && daemonVictims.length > 0) withRiskAndKills++;
      }
      // The nodes exercise the notice: many have containers at risk, some beside kills in the same step.
      expect(withRisk).toBeGreaterThan(60);
      expect(withRiskAndKills).toBeGreaterThan(10);
    });
});
