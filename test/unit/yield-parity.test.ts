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
import { yieldVictims } from "../../sim/roles/yield-step.js";
import { CAPACITY, NOW_MS, randomYieldNode, RESERVE_FRACTION } from "../yield-nodes.js";
import type { YieldNode } from "../yield-nodes.js";

/** A random node whose primary goes from leaving its containers all their room to leaving none. */
function randomNode(rng: SeededRng, index: number, maxLaunchMs: number): YieldNode {
  return randomYieldNode(rng, index, { maxLaunchMs, primaryBelowMilli: 2000, primarySpanMilli: 4000 });
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
