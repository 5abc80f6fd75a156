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
import { yieldStep } from "../../sim/roles/yield-step.js";
import { CAPACITY, NOW_MS, randomYieldNode, RESERVE_FRACTION } from "../yield-nodes.js";
import type { YieldNode } from "../yield-nodes.js";

/** A random node whose primary goes from well clear of the kill level to past it. */
function randomNode(rng: SeededRng, index: number): YieldNode {
  return randomYieldNode(rng, index, { maxLaunchMs: 0, primaryBelowMilli: 5000, primarySpanMilli: 6000 });
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
