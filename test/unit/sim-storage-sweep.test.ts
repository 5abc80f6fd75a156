/** The storage sweep: every cell of bandwidth x blocks per server over its seeds, and the stock/diversity ratio. */
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Command } from "commander";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { detailsOf, HarvestError } from "../../common/errors.js";
import { registerStorageSweepCommand, resolveStorageSweepFlags } from "../../cli/sim-storage-sweep.js";
import {
  incompleteBeta,
  lossRatio,
  resolveStorageSweepOptions,
  runStorageSweep,
  STORAGE_SWEEP_DEFAULTS,
} from "../../sim/experiments/storage-sweep/index.js";
import type { SeedLoss, StorageSweepOutcome } from "../../sim/experiments/storage-sweep/index.js";

/** The error `fn` throws or rejects with (fails the test when it does neither). */
async function errorOf(fn: () => unknown): Promise<HarvestError> {
  try {
    await fn();
  } catch (err) {
    expect(err).toBeInstanceOf(HarvestError);
    return err as HarvestError;
  }
  throw new Error("expected an error");
}

const seeds = (lost: readonly number[], blocks = 10_000): SeedLoss[] => lost.map((l) => ({ lost: l, blocks }));

describe("the storage sweep", () => {
  let out: string;
  let sweep: StorageSweepOutcome;
  const options = {
    servers: 40,
    days: 14,
    seeds: [1, 2, 3],
    blocksPerServer: [30, 120],
    // 1 MB/s makes a copy of a 256 MiB block take about nine minutes: slow enough for stock to lose blocks here.
    reReplicationMBps: [50, 1],
    command: "harvest sim storage-sweep --servers 40 --days 14",
  };

  beforeAll(async () => {
    out = mkdtempSync(join(tmpdir(), "harvest-storage-sweep-"));
    sweep = await runStorageSweep({ ...options, out });
  });
  afterAll(() => rmSync(out, { recursive: true, force: true }));

  it("reports every cell of bandwidth x blocks per server, each over every seed with both placements", () => {
    expect(sweep.runs).toHaveLength(3 * 2 * 2 * 2);
    expect(sweep.cells.map((c) => [c.replication, c.blocksPerServer, c.reReplicationMBps])).toEqual([
      [3, 30, 1],
      [3, 30, 50],
      [3, 120, 1],
      [3, 120, 50],
    ]);
    for (const c of sweep.cells) {
      expect(c.seeds).toEqual([1, 2, 3]);
      for (const p of [c.stock, c.diversity]) {
        expect(p.bySeed).toHaveLength(3);
        expect(p.lost).toBe(p.bySeed.reduce((a, s) => a + s.lost, 0));
        expect(p.lostFraction).toBeGreaterThanOrEqual(0);
        expect(p.lostFraction).toBeLessThanOrEqual(1);
        expect(p.unavailableFraction).toBeGreaterThanOrEqual(0);
      }
    }
    // More blocks per server means more blocks written (the same write process, scaled).
    const written = (bps: number) => sweep.cells.find((c) => c.blocksPerServer === bps)!.stock.blocks;
    expect(written(120)).toBeGreaterThan(2 * written(30));
  });

  it("runs every cell and placement of a seed on that seed's cluster: the same reimages", () => {
    for (const seed of options.seeds) {
      const reimages = new Set(sweep.runs.filter((r) => r.seed === seed).map((r) => r.reimages));
      expect(reimages.size).toBe(1);
    }
  });

  it("gives every cell a ratio whose interval contains its estimate, and says when there is only a bound", () => {
    expect(sweep.cells.some((c) => c.stock.lost > 0)).toBe(true);
    for (const { ratio, stock, diversity } of sweep.cells) {
      expect(ratio.low).toBeLessThanOrEqual(ratio.high);
      if (stock.lost === 0 && diversity.lost === 0) {
        expect(ratio.kind).toBe("none");
        continue;
      }
      expect(ratio.low).toBeLessThanOrEqual(ratio.estimate);
      expect(ratio.estimate).toBeLessThanOrEqual(ratio.high);
      if (diversity.lost === 0) {
        expect(ratio.kind).toBe("lower-bound");
        expect(ratio.high).toBe(Infinity);
        expect(ratio.low).toBeGreaterThan(0);
        expect(Number.isFinite(ratio.low)).toBe(true);
      }
    }
  });

  it("writes the report with the command that made it, the cells' and runs' CSV and the plot", () => {
    expect(sweep.files.map((f) => f.slice(out.length + 1)).sort()).toEqual([
      "storage-sweep-data-loss.svg",
      "storage-sweep-runs.csv",
      "storage-sweep.csv",
      "storage-sweep.md",
    ]);
    const md = readFileSync(join(out, "storage-sweep.md"), "utf8");
    expect(md).toContain(options.command);
    expect(md).toContain("stock / diversity (95% interval)");
    expect(md).toContain("![");
    const csv = readFileSync(join(out, "storage-sweep.csv"), "utf8").trim().split("\n");
    expect(csv).toHaveLength(1 + sweep.cells.length);
    const runsCsv = readFileSync(join(out, "storage-sweep-runs.csv"), "utf8").trim().split("\n");
    expect(runsCsv).toHaveLength(1 + sweep.runs.length);
    expect(existsSync(join(out, "storage-sweep-data-loss.svg"))).toBe(true);
  });
});

describe("the stock/diversity loss ratio", () => {
  it("is 1 with an interval around it when both placements lose the same", () => {
    const r = lossRatio(seeds([10, 10, 10]), seeds([10, 10, 10]));
    expect(r.kind).toBe("estimate");
    expect(r.estimate).toBeCloseTo(1, 12);
    expect(r.dispersion).toEqual({ stock: 1, diversity: 1 });
    expect(r.low).toBeLessThan(1);
    expect(r.high).toBeGreaterThan(1);
    // Symmetric on a log scale: stock's share of 60 lost blocks is binomial with p = 1/2.
    expect(r.low * r.high).toBeCloseTo(1, 6);
  });

  it("when diversity lost none in any seed, gives only a lower bound: the exact one for every loss being stock's", () => {
    const r = lossRatio(seeds([20, 20, 20]), seeds([0, 0, 0]));
    expect(r.kind).toBe("lower-bound");
    expect(r.estimate).toBe(Infinity);
    expect(r.high).toBe(Infinity);
    // Clopper-Pearson with 60 of 60 losses stock's: p >= 0.025^(1/60), ratio = p / (1 - p).
    const p = 0.025 ** (1 / 60);
    expect(r.low).toBeCloseTo(p / (1 - p), 6);
  });

  it("when stock lost none, gives only an upper bound; with no losses at all, no ratio", () => {
    const up = lossRatio(seeds([0, 0, 0]), seeds([5, 5, 5]));
    expect(up.kind).toBe("upper-bound");
    expect(up.estimate).toBe(0);
    expect(up.high).toBeGreaterThan(0);
    const none = lossRatio(seeds([0, 0, 0]), seeds([0, 0, 0]));
    expect(none.kind).toBe("none");
    expect(Number.isNaN(none.estimate)).toBe(true);
  });

  it("widens the interval when the seeds disagree more than Poisson counts would", () => {
    const steady = lossRatio(seeds([30, 30, 30]), seeds([10, 10, 10]));
    const bursty = lossRatio(seeds([90, 0, 0]), seeds([10, 10, 10]));
    expect(bursty.estimate).toBeCloseTo(steady.estimate, 12);
    expect(steady.dispersion.stock).toBe(1);
    expect(bursty.dispersion.stock).toBeGreaterThan(10);
    expect(bursty.dispersion.diversity).toBe(1);
    expect(bursty.low).toBeLessThan(steady.low);
    expect(bursty.high).toBeGreaterThan(steady.high);
  });

  it("weighs each placement's losses by the blocks it wrote", () => {
    const r = lossRatio(seeds([10, 10, 10], 1000), seeds([10, 10, 10], 2000));
    expect(r.estimate).toBeCloseTo(2, 12);
    expect(r.low).toBeLessThan(2);
    expect(r.high).toBeGreaterThan(2);
  });

  it("computes the incomplete beta function the intervals rest on", () => {
    expect(incompleteBeta(0.5, 2, 2)).toBeCloseTo(0.5, 12);
    expect(incompleteBeta(0.3, 1, 1)).toBeCloseTo(0.3, 12);
    // I_x(a, 1) = x^a and I_x(1, b) = 1 - (1 - x)^b.
    expect(incompleteBeta(0.9, 40, 1)).toBeCloseTo(0.9 ** 40, 12);
    expect(incompleteBeta(0.01, 1, 300)).toBeCloseTo(1 - 0.99 ** 300, 12);
  });
});

describe("the storage sweep's options and flags", () => {
  it("rejects an invalid option with INVALID_ARGUMENT naming the field", async () => {
    const cases: [Parameters<typeof resolveStorageSweepOptions>[0], string][] = [
      [{ seeds: [1, 2] }, "seeds"],
      [{ seeds: [1, 2, -3] }, "seeds"],
      [{ reReplicationMBps: [0] }, "reReplicationMBps"],
      [{ blocksPerServer: [] }, "blocksPerServer"],
      [{ replications: [11] }, "replications"],
      [{ servers: 0 }, "servers"],
      [{ level: "extreme" as never }, "level"],
    ];
    for (const [o, field] of cases) {
      const err = await errorOf(() => resolveStorageSweepOptions(o));
      expect(err.code).toBe("INVALID_ARGUMENT");
      expect(detailsOf(err, "INVALID_ARGUMENT", "CONFIG_INVALID")?.field).toBe(field);
    }
  });

  it("rejects an invalid flag with INVALID_ARGUMENT naming the flag", async () => {
    const cases: [Parameters<typeof resolveStorageSweepFlags>[0], string][] = [
      [{ bandwidth: "5,fast" }, "--bandwidth"],
      [{ bandwidth: "5,-10" }, "--bandwidth"],
      [{ seeds: "1,2" }, "--seeds"],
      [{ blocksPerServer: "30,,60" }, "--blocks-per-server"],
      [{ utilization: "extreme" }, "--utilization"],
      [{ replication: "3,12" }, "--replication"],
      [{ traces: "recorded" }, "--traces"],
    ];
    for (const [flags, flag] of cases) {
      const err = await errorOf(() => resolveStorageSweepFlags(flags));
      expect(err.code).toBe("INVALID_ARGUMENT");
      expect(detailsOf(err, "INVALID_ARGUMENT")?.flag).toBe(flag);
      expect(err.message).toContain(flag);
    }
  });

  it("turns flags into the options they name, and leaves the rest to the sweep's defaults", async () => {
    const o = await resolveStorageSweepFlags({ seeds: "7,3,5", bandwidth: "20, 5", utilization: "medium" });
    expect(o.seeds).toEqual([3, 5, 7]);
    expect(o.reReplicationMBps).toEqual([5, 20]);
    expect(o.level).toBe("medium");
    expect(o.blocksPerServer).toEqual([...STORAGE_SWEEP_DEFAULTS.blocksPerServer]);
    expect(o.servers).toBe(STORAGE_SWEEP_DEFAULTS.servers);
  });

  it("documents the sweep's real defaults in its help", () => {
    const sim = new Command("sim");
    registerStorageSweepCommand(sim, {
      reporter: () => ({ onProgress: () => {} }),
      commandLine: () => "harvest sim storage-sweep",
      outDir: "sim-results",
    });
    const command = sim.commands.find((c) => c.name() === "storage-sweep")!;
    const help = command.options.map((o) => o.description).join("\n");
    const d = STORAGE_SWEEP_DEFAULTS;
    expect(help).toContain(`(default: ${d.servers.toLocaleString("en-US")})`);
    expect(help).toContain(`(default: ${d.days})`);
    expect(help).toContain(`(default: ${d.seeds.join(",")})`);
    expect(help).toContain(`(default: ${d.reReplicationMBps.join(",")})`);
    expect(help).toContain(`(default: ${d.blocksPerServer.join(",")})`);
    expect(help).toContain(`(default: ${d.level})`);
    expect(help).toContain(`(default: ${d.replications.join(",")})`);
    expect(help).toContain(`(default: ${d.traces})`);
  });
});
