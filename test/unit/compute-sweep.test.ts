/** The compute sweep: load x utilization, every policy per cell, the same jobs at every level, heat maps. */
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { isHarvestError } from "../../common/errors.js";
import { resolveComputeSweepOptions, runComputeSweep } from "../../sim/experiments/sweep/compute-sweep.js";

const tmp = mkdtempSync(join(tmpdir(), "harvest-compute-sweep-"));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));

describe("compute sweep", () => {
  it("runs every policy in every cell on the same jobs at every level, and writes the heat maps", async () => {
    const out = join(tmp, "sweep");
    const { runs, files, report } = await runComputeSweep({
      servers: 30,
      days: 2,
      loads: [0.3, 0.8],
      utilizationPct: [15, 55],
      out,
      command: "harvest sim sweep --servers 30",
    });
    // 2 loads x 2 levels x 3 policies, and history with the median-daily-max peak at the middle load (0.3) per level.
    expect(runs).toHaveLength(2 * 2 * 3 + 2);
    for (const load of [0.3, 0.8]) {
      const cells = runs.filter((r) => r.load === load && r.peak === "percentile");
      for (const pct of [15, 55])
        expect(cells.filter((r) => r.utilizationPct === pct).map((r) => r.policy)).toEqual([
          "stock",
          "stock-unaware",
          "history",
        ]);
      // One job stream per load: every level and policy is offered the same jobs.
      expect(new Set(cells.map((r) => r.result.jobsSubmitted)).size).toBe(1);
      // ... and a busier cluster has less room for them.
      const at = (pct: number) => cells.find((r) => r.utilizationPct === pct)!.effectiveLoad;
      expect(at(55)).toBeGreaterThan(at(15));
    }
    expect(runs.filter((r) => r.peak === "median-daily-max").every((r) => r.load === 0.3)).toBe(true);
    // The levels are what was asked for (the generator matches the mean within a point or two).
    for (const r of runs) expect(Math.abs(r.measuredPct - r.utilizationPct)).toBeLessThan(3);
    // Stock-unaware never kills; the primary-aware policies never take the primary's cores.
    for (const r of runs) {
      if (r.policy === "stock-unaware") expect(r.result.taskKills).toBe(0);
      else expect(r.result.primaryCoreHoursTaken).toBe(0);
    }
    expect(files.map((f) => f.split("/").pop()).sort()).toEqual([
      "compute-sweep-heatmap-vs-stock-unaware.svg",
      "compute-sweep-heatmap-vs-stock.svg",
      "compute-sweep.csv",
      "compute-sweep.md",
    ]);
    const md = readFileSync(join(out, "compute-sweep.md"), "utf8");
    expect(md).toContain("harvest sim sweep --servers 30");
    expect(md).toContain("| load \\ utilization |");
    const svg = readFileSync(join(out, "compute-sweep-heatmap-vs-stock.svg"), "utf8");
    expect(svg.startsWith("<svg")).toBe(true);
    expect(existsSync(join(out, "compute-sweep.csv"))).toBe(true);
    expect(report.csv.split("\n")[0]).toContain("effective_load");
  }, 120_000);

  it("takes the busiest level as the reference by default, and rejects bad options naming the field", () => {
    expect(resolveComputeSweepOptions({ utilizationPct: [20, 50] }).referencePct).toBe(50);
    for (const [bad, field] of [
      [{ loads: [] }, "loads"],
      [{ loads: [-1] }, "loads"],
      [{ utilizationPct: [120] }, "utilizationPct"],
      [{ days: 1 }, "days"],
      [{ killCost: "free" as "none" }, "killCost"],
    ] as const) {
      let err: unknown;
      try {
        resolveComputeSweepOptions(bad);
      } catch (e) {
        err = e;
      }
      expect(isHarvestError(err, "INVALID_ARGUMENT")).toBe(true);
      expect((err as { details: { field: string } }).details.field).toBe(field);
    }
  });
});
