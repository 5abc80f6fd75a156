/** The compute sweep: load x utilization x seeds, every policy per cell, the same jobs at every level, the goals. */
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { isHarvestError } from "../../common/errors.js";
import type { ComputeRunResult } from "../../sim/compute.js";
import {
  renderComputeSweepReport,
  resolveComputeSweepOptions,
  runComputeSweep,
} from "../../sim/experiments/sweep/compute-sweep.js";
import type { ComputeSweepOutcome, SweepRun } from "../../sim/experiments/sweep/compute-sweep.js";
import type { ComputePolicy } from "../../sim/results.js";

const tmp = mkdtempSync(join(tmpdir(), "harvest-compute-sweep-"));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));

/** The rows of the first markdown table after the line starting with `intro`, each row's cells trimmed. */
function tableAfter(markdown: string, intro: string): string[][] {
  const lines = markdown.split("\n");
  const at = lines.findIndex((l) => l.startsWith(intro));
  expect(at, `no line starts with ${JSON.stringify(intro)}`).toBeGreaterThanOrEqual(0);
  const rows: string[][] = [];
  for (const line of lines.slice(at + 1)) {
    if (line.startsWith("|"))
      rows.push(
        line
          .slice(1, -1)
          .split(" | ")
          .map((c) => c.trim()),
      );
    else if (rows.length > 0) break;
  }
  return rows.slice(2); // the header and the delimiter
}

function mean(values: readonly number[]): number {
  return values.reduce((a, v) => a + v, 0) / values.length;
}

describe("compute sweep", () => {
  it("runs every policy in every cell on the same jobs at every level, and writes the heat maps", async () => {
    const out = join(tmp, "sweep");
    const { runs, files, report } = await runComputeSweep({
      servers: 30,
      days: 2,
      seeds: [1],
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
      "compute-sweep-heatmap-gap-closed.svg",
      "compute-sweep-heatmap-vs-stock-unaware.svg",
      "compute-sweep-heatmap-vs-stock.svg",
      "compute-sweep.csv",
      "compute-sweep.md",
    ]);
    const md = readFileSync(join(out, "compute-sweep.md"), "utf8");
    expect(md).toContain("harvest sim sweep --servers 30");
    expect(md).toContain("| load \\ utilization |");
    for (const svg of ["heatmap-vs-stock", "heatmap-gap-closed"])
      expect(readFileSync(join(out, `compute-sweep-${svg}.svg`), "utf8").startsWith("<svg")).toBe(true);
    expect(existsSync(join(out, "compute-sweep.csv"))).toBe(true);
    expect(report.csv.split("\n")[0]).toContain("effective_load");
  }, 120_000);

  describe("over two seeds", () => {
    let sweep: ComputeSweepOutcome;
    beforeAll(async () => {
      sweep = await runComputeSweep({ servers: 30, days: 2, seeds: [2, 1], loads: [0.3], utilizationPct: [55] });
    }, 120_000);
    const runsOf = (policy: ComputePolicy, peak = "percentile"): SweepRun[] =>
      sweep.runs.filter((r) => r.policy === policy && r.peak === peak);

    it("runs the whole sweep once per seed, each seed its own cluster and jobs", () => {
      // 3 policies and the median-daily-max variant, per seed, the seeds in ascending order.
      expect(sweep.runs.map((r) => r.seed)).toEqual([1, 1, 1, 1, 2, 2, 2, 2]);
      const stock = runsOf("stock");
      expect(stock[0]!.result.seed).toBe(1);
      expect(stock[1]!.result.seed).toBe(2);
      expect(stock[0]!.result.avgJobTimeS).not.toBe(stock[1]!.result.avgJobTimeS);
      expect(stock[0]!.measuredPct).not.toBe(stock[1]!.measuredPct);
      // The table of every run and the CSV name each run's seed.
      const rows = sweep.report.runsTable.split("\n").slice(2);
      expect(rows.map((r) => r.split("|")[1]!.trim())).toEqual(["1", "1", "1", "1", "2", "2", "2", "2"]);
      const csv = sweep.report.csv.trim().split("\n");
      expect(csv[0]!.split(",")[0]).toBe("seed");
      expect(csv.slice(1).map((l) => l.split(",")[0])).toEqual(["1", "1", "1", "1", "2", "2", "2", "2"]);
    });

    it("reports each cell's mean over the seeds, per policy", () => {
      const [cell] = sweep.cells;
      expect(sweep.cells).toHaveLength(1);
      expect(cell!.seeds).toEqual([1, 2]);
      const table = tableAfter(sweep.report.summary, "Each cell's figures per policy");
      for (const [policy, peak, label] of [
        ["stock", "percentile", "stock"],
        ["stock-unaware", "percentile", "stock-unaware"],
        ["history", "percentile", "history"],
        ["history", "median-daily-max", "history (mdm)"],
      ] as const) {
        const runs = runsOf(policy, peak);
        expect(runs).toHaveLength(2);
        const avg = mean(runs.map((r) => r.result.avgJobTimeS));
        const kills = mean(runs.map((r) => r.result.taskKills));
        const means = cell!.policies.find((p) => p.policy === policy && p.peak === peak)!;
        expect(means.avgJobTimeS).toBeCloseTo(avg, 9);
        expect(means.taskKills).toBeCloseTo(kills, 9);
        const row = table.find((r) => r[2] === label)!;
        expect(row[3]).toBe(avg.toLocaleString("en-US", { minimumFractionDigits: 1, maximumFractionDigits: 1 }));
      }
      // The change against stock is the change of the means.
      const avgOf = (p: ComputePolicy) => mean(runsOf(p).map((r) => r.result.avgJobTimeS));
      const change = (avgOf("history") / avgOf("stock") - 1) * 100;
      const vsStock = tableAfter(sweep.report.summary, "History-based placement's change");
      expect(vsStock[0]![1]!.startsWith(`${change > 0 ? "+" : ""}${change.toFixed(1)}%`)).toBe(true);
    });

    it("prints the share of the stock-to-unaware gap history closes, where stock finishes and is 3 % slower", () => {
      const s = mean(runsOf("stock").map((r) => r.result.avgJobTimeS));
      const u = mean(runsOf("stock-unaware").map((r) => r.result.avgJobTimeS));
      const h = mean(runsOf("history").map((r) => r.result.avgJobTimeS));
      const stockFinished = runsOf("stock").every((r) => r.result.jobsUnfinished === 0);
      // This cell is one where the goal applies: its stock finishes every job and runs more than 3 % slower.
      expect(stockFinished).toBe(true);
      expect(s / u - 1).toBeGreaterThanOrEqual(0.03);
      const gap = (s - h) / (s - u);
      expect(tableAfter(sweep.report.summary, "Gap closed:")).toEqual([["0.3", `${Math.round(gap * 100)} %`]]);
      const cell = sweep.cells[0]!;
      expect(cell.gapClosed.kind === "closed" && cell.gapClosed.share).toBeCloseTo(gap, 9);
      const unfinished = (p: ComputePolicy) => mean(runsOf(p).map((r) => r.result.jobsUnfinished));
      const met = h <= s * 1.01 && unfinished("history") <= unfinished("stock");
      const lose = tableAfter(sweep.report.summary, "Never lose:");
      expect(lose[0]![1]!.startsWith(met ? "met: " : "not met: ")).toBe(true);
      expect(sweep.report.summary.split("\n")[0]).toContain(`Never lose holds in ${met ? 1 : 0} of the 1 cells`);
    });

    it("judges the goals on each cell's figures: gap closed only where stock finishes and trails the bound", () => {
      // The same runs with chosen job times, in four cells: the gap closed and "never lose" follow from them alone.
      const o = resolveComputeSweepOptions({ seeds: [1, 2], loads: [0.2, 0.4], utilizationPct: [15, 55] });
      const template = runsOf("stock")[0]!.result;
      const run = (
        load: number,
        pct: number,
        seed: number,
        policy: ComputePolicy,
        avgJobTimeS: number,
        jobsUnfinished = 0,
      ): SweepRun => {
        const result: ComputeRunResult = { ...template, seed, policy, avgJobTimeS, jobsUnfinished };
        result.jobs = result.jobsSubmitted - jobsUnfinished;
        return {
          seed,
          load,
          utilizationPct: pct,
          measuredPct: pct,
          effectiveLoad: load,
          policy,
          peak: "percentile",
          result,
        };
      };
      const cell = (
        load: number,
        pct: number,
        times: Record<ComputePolicy, [number, number]>,
        stockUnfinished: [number, number] = [0, 0],
      ) =>
        (["stock", "stock-unaware", "history"] as const).flatMap((p) =>
          [1, 2].map((seed, i) => run(load, pct, seed, p, times[p][i]!, p === "stock" ? stockUnfinished[i] : 0)),
        );
      const runs = [
        // Stock 1,100 s on average, the bound 1,000 s, history 1,040 s: 60 % of the gap closed, never lost.
        ...cell(0.2, 15, { stock: [1000, 1200], "stock-unaware": [900, 1100], history: [1000, 1080] }),
        // History 1,210 s against stock's 1,100 s: a gap of -110 %, lost.
        ...cell(0.2, 55, { stock: [1100, 1100], "stock-unaware": [1000, 1000], history: [1200, 1220] }),
        // Stock within 2 % of the bound: nothing to win; history 0.5 % slower still counts as not losing.
        ...cell(0.4, 15, { stock: [1020, 1020], "stock-unaware": [1000, 1000], history: [1025, 1025] }),
        // Stock leaves jobs unfinished in one seed: the gap is not judged; history finishes more, and is faster.
        ...cell(0.4, 55, { stock: [2000, 2000], "stock-unaware": [1000, 1000], history: [1900, 1900] }, [1, 0]),
      ];
      const { summary } = renderComputeSweepReport(runs, o);
      expect(tableAfter(summary, "Gap closed:")).toEqual([
        ["0.2", "60 %", "-110 %"],
        ["0.4", "- (b)", "- (a)"],
      ]);
      expect(tableAfter(summary, "Never lose:")).toEqual([
        ["0.2", "met: -5.5%, 0 / 0", "not met: +10.0%, 0 / 0"],
        ["0.4", "met: +0.5%, 0 / 0", "met: -5.0%, 0 / 0.5"],
      ]);
      const goals = summary.split("\n")[0]!;
      expect(goals).toContain("Never lose holds in 3 of the 4 cells");
      expect(goals).toContain(
        "Win where there is something to win holds in 2 of the 4 cells: 1 of the 2 with a gap to close close at " +
          "least 50 % of it, 1 has no gap (stock within 3 % of the bound), 1 is not judged (stock left jobs unfinished).",
      );
    });
  });

  it("takes the busiest level as the reference by default, and rejects bad options naming the field", () => {
    expect(resolveComputeSweepOptions({ utilizationPct: [20, 50] }).referencePct).toBe(50);
    expect(resolveComputeSweepOptions({}).seeds).toEqual([1, 2, 3]);
    expect(resolveComputeSweepOptions({ seeds: [3, 1, 3] }).seeds).toEqual([1, 3]);
    for (const [bad, field] of [
      [{ loads: [] }, "loads"],
      [{ loads: [-1] }, "loads"],
      [{ utilizationPct: [120] }, "utilizationPct"],
      [{ days: 1 }, "days"],
      [{ seeds: [] }, "seeds"],
      [{ seeds: [1.5] }, "seeds"],
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
