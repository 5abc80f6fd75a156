import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { isHarvestError } from "../../common/errors.js";
import {
  DEMO_EARLY_STEPS,
  DEMO_LEAD_IN_STEPS,
  generateDemoTraces,
  generateUtilization,
} from "../../common/trace-gen.js";
import type { UtilizationPattern } from "../../common/trace-gen.js";
import { readUtilizationFile } from "../../common/trace-io.js";

const tmp = mkdtempSync(join(tmpdir(), "harvest-trace-gen-"));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));

const mean = (xs: number[]): number => xs.reduce((a, b) => a + b, 0) / xs.length;
const sd = (xs: number[]): number => {
  const m = mean(xs);
  return Math.sqrt(mean(xs.map((x) => (x - m) ** 2)));
};
/** Autocorrelation at `lag` samples. */
function acf(xs: number[], lag: number): number {
  const m = mean(xs);
  let num = 0;
  let den = 0;
  for (let i = 0; i < xs.length; i++) {
    den += (xs[i]! - m) ** 2;
    if (i + lag < xs.length) num += (xs[i]! - m) * (xs[i + lag]! - m);
  }
  return den === 0 ? 0 : num / den;
}

describe("generateUtilization", () => {
  const base = { days: 7, stepSec: 300, meanPct: 30, seed: 42 };

  it("gives the same series for the same seed and a different one for another seed", () => {
    for (const pattern of ["periodic", "constant", "unpredictable"] as UtilizationPattern[]) {
      const a = generateUtilization({ ...base, pattern, spikes: 2 });
      const b = generateUtilization({ ...base, pattern, spikes: 2 });
      const c = generateUtilization({ ...base, pattern, spikes: 2, seed: 43 });
      expect(b).toEqual(a);
      expect(c.cpuPct).not.toEqual(a.cpuPct);
    }
  });

  it("samples every step for the requested days, within 0..100 and near the requested mean", () => {
    for (const pattern of ["periodic", "constant", "unpredictable"] as UtilizationPattern[]) {
      const s = generateUtilization({ ...base, pattern });
      expect(s.timesMs.length).toBe((7 * 86_400) / 300);
      expect(s.stepSec).toBe(300);
      expect(s.timesMs[1]! - s.timesMs[0]!).toBe(300_000);
      expect(Math.min(...s.cpuPct)).toBeGreaterThanOrEqual(0);
      expect(Math.max(...s.cpuPct)).toBeLessThanOrEqual(100);
      expect(Math.abs(mean(s.cpuPct) - 30)).toBeLessThan(pattern === "unpredictable" ? 12 : 3);
    }
  });

  it("makes periodic series repeat daily, constant ones flat and unpredictable ones neither", () => {
    const daySteps = 86_400 / 300;
    const periodic = generateUtilization({
      ...base,
      pattern: "periodic",
    }).cpuPct;
    const constant = generateUtilization({
      ...base,
      pattern: "constant",
    }).cpuPct;
    const unpredictable = generateUtilization({
      ...base,
      pattern: "unpredictable",
    }).cpuPct;
    expect(acf(periodic, daySteps)).toBeGreaterThan(0.6);
    // Half a day apart the diurnal sine is at its opposite phase.
    expect(acf(periodic, daySteps / 2)).toBeLessThan(-0.4);
    expect(sd(constant)).toBeLessThan(3);
    expect(sd(unpredictable)).toBeGreaterThan(sd(constant) * 2);
    expect(Math.abs(acf(unpredictable, daySteps))).toBeLessThan(0.5);
  });

  it("adds the requested sharp spikes above 90 %", () => {
    const calm = generateUtilization({ ...base, pattern: "constant" });
    const spiky = generateUtilization({
      ...base,
      pattern: "constant",
      spikes: 3,
    });
    expect(Math.max(...calm.cpuPct)).toBeLessThan(60);
    expect(Math.max(...spiky.cpuPct)).toBeGreaterThan(90);
    const spikeSamples = spiky.cpuPct.filter((p) => p > 90).length;
    // 21 spikes of one to three steps each (they may overlap).
    expect(spikeSamples).toBeGreaterThanOrEqual(3);
    expect(spikeSamples).toBeLessThanOrEqual(63);
  });

  it("rejects nonsense options with INVALID_ARGUMENT", () => {
    expect(() => generateUtilization({ ...base, pattern: "constant", days: 0 })).toThrow();
    expect(() => generateUtilization({ ...base, pattern: "constant", meanPct: 120 })).toThrow();
    try {
      generateUtilization({
        ...base,
        pattern: "sawtooth" as UtilizationPattern,
      });
      expect.unreachable();
    } catch (err) {
      expect(isHarvestError(err, "INVALID_ARGUMENT")).toBe(true);
    }
  });
});

describe("generateDemoTraces", () => {
  it("writes plain CSVs that spike above 90 % in their first 30 s at 600x and spend most time below 40 %", async () => {
    const dir = join(tmp, "demo");
    const paths = await generateDemoTraces(dir, 6, 7);
    expect(paths).toHaveLength(6);
    const firstSpikeSteps = new Set<number>();
    for (const path of paths) {
      expect(readFileSync(path, "utf8").startsWith("time_s,cpu_pct\n")).toBe(true);
      const s = await readUtilizationFile(path);
      expect(s.stepSec).toBe(300);
      // At 600x a 300 s step lasts 0.5 s: 30 s of replay = the first 60 steps.
      expect((DEMO_EARLY_STEPS * 300) / 600).toBe(30);
      const early = s.cpuPct.slice(0, DEMO_EARLY_STEPS);
      const firstSpike = early.findIndex((p) => p > 90);
      expect(firstSpike, `${path} has no early spike`).toBeGreaterThanOrEqual(0);
      firstSpikeSteps.add(firstSpike);
      // The first few seconds are calm, so that work gets placed before the primary wakes up.
      expect(Math.max(...s.cpuPct.slice(0, DEMO_LEAD_IN_STEPS))).toBeLessThan(40);
      expect(s.cpuPct.filter((p) => p < 40).length / s.cpuPct.length).toBeGreaterThan(0.5);
      expect(early.some((p) => p < 40)).toBe(true);
    }
    // The primaries do not all spike in lockstep.
    expect(firstSpikeSteps.size).toBeGreaterThan(1);
  });

  it("writes the same files for the same seed", async () => {
    const a = await generateDemoTraces(join(tmp, "a"), 3, 11);
    const b = await generateDemoTraces(join(tmp, "b"), 3, 11);
    const c = await generateDemoTraces(join(tmp, "c"), 3, 12);
    for (let i = 0; i < 3; i++) {
      expect(readFileSync(b[i]!, "utf8")).toBe(readFileSync(a[i]!, "utf8"));
    }
    expect(readFileSync(c[0]!, "utf8")).not.toBe(readFileSync(a[0]!, "utf8"));
  });
});
