/** The victim order in the compute simulator and the victim experiment (`harvest sim victims`). */
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { victimOptionsFromFlags } from "../../cli/sim-victims-command.js";
import { isHarvestError } from "../../common/errors.js";
import { generateCluster } from "../../sim/cluster-gen.js";
import { runCompute } from "../../sim/compute.js";
import { runVictimExperiment } from "../../sim/experiments/victims/victims-experiment.js";
import { generateJobStream } from "../../sim/jobs.js";

const tmp = mkdtempSync(join(tmpdir(), "harvest-sim-victims-"));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));

describe("the victim order in the compute simulator", () => {
  it("gives the primary its cores at every yield under work-lost as under youngest-first, on the same jobs", () => {
    const cluster = generateCluster({ servers: 12, historyDays: 3, days: 1, seed: 7, meanPct: 55 });
    const stream = generateJobStream(cluster, { seed: 7, load: 0.9 });
    for (const policy of ["stock", "history"] as const) {
      // checkInvariants throws INTERNAL after any event that leaves a server holding more than its primary leaves.
      const runs = (["youngest", "work-lost"] as const).map((victimOrder) =>
        runCompute(cluster, stream, { policy, seed: 3, victimOrder, checkInvariants: true }),
      );
      for (const r of runs) {
        expect(r.taskKills).toBeGreaterThan(0);
        expect(r.jobs).toBeGreaterThan(20);
      }
    }
  });

  it("refuses an unknown victim order, naming the option", () => {
    const cluster = generateCluster({ servers: 4, historyDays: 2, days: 1, seed: 1 });
    const stream = generateJobStream(cluster, { seed: 1, load: 0.2 });
    let err: unknown;
    try {
      runCompute(cluster, stream, { policy: "stock", victimOrder: "oldest" as never });
    } catch (e) {
      err = e;
    }
    expect(isHarvestError(err, "INVALID_ARGUMENT") && err.details.field).toBe("victimOrder");
  });
});

describe("the victim experiment", () => {
  it("puts youngest-first and work-lost side by side per placement and writes victims.md and victims.csv", async () => {
    const out = join(tmp, "victims");
    const outcome = await runVictimExperiment({
      servers: 10,
      days: 2,
      seeds: [1],
      loads: [0.8],
      utilizationPct: [55],
      out,
    });
    expect(outcome.runs.map((r) => `${r.policy} ${r.order}`)).toEqual([
      "stock youngest",
      "stock work-lost",
      "history youngest",
      "history work-lost",
    ]);
    for (const r of outcome.runs) expect(r.result.jobsSubmitted).toBeGreaterThan(0);
    expect(existsSync(join(out, "victims.md"))).toBe(true);
    const csv = readFileSync(join(out, "victims.csv"), "utf8").trim().split("\n");
    expect(csv[0]).toContain("victim_order");
    expect(csv).toHaveLength(5);
    expect(outcome.report.summary).toMatch(/\| history\s+\| work-lost\s+\|/);
  });

  it("reads its flags, naming the flag that does not parse", () => {
    const flags = {
      servers: "60",
      days: "3",
      seeds: "1,2",
      load: "0.6",
      utilization: "45,55",
      reference: "65",
      policy: "stock",
      maxAmShare: "1",
      traces: "generated",
      out: "x",
    };
    const o = victimOptionsFromFlags({ ...flags, nearEndMs: "30000" });
    expect([o.seeds, o.utilizationPct, o.policies, o.nearEndMs]).toEqual([[1, 2], [45, 55], ["stock"], 30000]);
    for (const [extra, flag] of [
      [{ seeds: "1,x" }, "--seeds"],
      [{ policy: "stock-unaware" }, "--policy"],
      [{ nearEndMs: "-5" }, "--near-end-ms"],
    ] as const) {
      let err: unknown;
      try {
        victimOptionsFromFlags({ ...flags, ...extra });
      } catch (e) {
        err = e;
      }
      expect(isHarvestError(err, "INVALID_ARGUMENT") && String(err.message)).toContain(flag);
    }
  });
});
