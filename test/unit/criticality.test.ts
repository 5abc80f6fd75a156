import { describe, expect, it } from "vitest";
import { HarvestError } from "../../common/errors.js";
import { SeededRng } from "../../common/rng.js";
import type { UtilizationSeries } from "../../common/trace-io.js";
import {
  criticality,
  resolveCriticalityOptions,
  tenantHistoryVerdict,
} from "../../resourcemanager/policy/criticality.js";

const STEP_SEC = 300;
const DAY_STEPS = 86_400 / STEP_SEC;

function series(name: string, cpuPct: number[]): UtilizationSeries {
  return { name, stepSec: STEP_SEC, startMs: 0, timesMs: cpuPct.map((_, i) => i * STEP_SEC * 1000), cpuPct };
}

function clamp(v: number): number {
  return Math.min(100, Math.max(0, v));
}

/** Office hours: high from 09:00 to 18:00 UTC, low at night, with noise. */
function userFacing(days: number, seed: number): UtilizationSeries {
  const rng = new SeededRng(seed);
  const x = Array.from({ length: days * DAY_STEPS }, (_, i) => {
    const hour = ((i % DAY_STEPS) * STEP_SEC) / 3600;
    const base = hour >= 9 && hour < 18 ? 70 : 15;
    return clamp(base + rng.normal(0, 4));
  });
  return series(`user-facing-${seed}`, x);
}

describe("criticality (seeds/000 section III-B)", () => {
  it("calls a strong, repeatable daily pattern user-facing", () => {
    for (const seed of [1, 2, 3]) {
      const r = criticality(userFacing(10, seed));
      expect(r.critical).toBe(true);
      expect(r.score).toBeLessThan(0.72);
    }
  });

  it("calls a daily sine with noise user-facing", () => {
    const rng = new SeededRng(9);
    const x = Array.from({ length: 7 * DAY_STEPS }, (_, i) =>
      clamp(50 + 30 * Math.sin((2 * Math.PI * i) / DAY_STEPS) + rng.normal(0, 3)),
    );
    expect(criticality(series("sine", x)).critical).toBe(true);
  });

  it("does not call a flat series user-facing", () => {
    const r = criticality(series("flat", new Array<number>(10 * DAY_STEPS).fill(40)));
    expect(r.critical).toBe(false);
  });

  it("does not call a flat series with noise user-facing", () => {
    const rng = new SeededRng(4);
    const x = Array.from({ length: 10 * DAY_STEPS }, () => clamp(40 + rng.normal(0, 2)));
    expect(criticality(series("noisy-flat", x)).critical).toBe(false);
  });

  it("does not call a random walk user-facing", () => {
    for (const seed of [5, 6, 7]) {
      const rng = new SeededRng(seed);
      let level = 50;
      const x: number[] = [];
      for (let i = 0; i < 10 * DAY_STEPS; i++) {
        level = clamp(level + rng.normal(0, 1));
        x.push(level);
      }
      expect(criticality(series(`walk-${seed}`, x)).critical, `seed ${seed}`).toBe(false);
    }
  });

  it("does not call a machine-generated 4-hour cycle user-facing", () => {
    // Periods dividing 24 h fit the 8 h template as well as the 24 h one (seeds/000's issue #3).
    const rng = new SeededRng(8);
    const cycle = (4 * 3600) / STEP_SEC;
    const x = Array.from({ length: 10 * DAY_STEPS }, (_, i) =>
      clamp((i % cycle < cycle / 2 ? 70 : 20) + rng.normal(0, 3)),
    );
    expect(criticality(series("cron", x)).critical).toBe(false);
  });

  it("conservatively calls a series shorter than five days user-facing", () => {
    const rng = new SeededRng(2);
    const x = Array.from({ length: 3 * DAY_STEPS }, () => clamp(40 + rng.normal(0, 2)));
    const r = criticality(series("short", x));
    expect(r.critical).toBe(true);
    expect(r.reason).toBe("too-short");
  });

  it("rejects a slot length that does not divide 8 hours", () => {
    expect(() => resolveCriticalityOptions({ slotSec: 7000 })).toThrow(HarvestError);
  });
});

describe("a tenant's history as the registry reads it (tenantHistoryVerdict)", () => {
  const DAY_MS = 86_400_000;

  it("averages its servers over the window, and takes the features and the verdict of that average server", () => {
    const a = userFacing(10, 3);
    const b = userFacing(10, 4);
    const endMs = 10 * DAY_MS;
    const v = tenantHistoryVerdict("web", [a, b], endMs, { windowDays: 7 });
    expect(v.historySlots).toBe(a.timesMs.length + b.timesMs.length);
    expect(v.measuredCriticality).toBe("critical");
    expect(v.compare8).toBeLessThan(0.72);
    expect(v.features?.pattern).toBe("periodic");
    // The peak is the classifier's P95 of the average server: between the office-hours level and the series' maximum.
    expect(v.features!.peak).toBeGreaterThan(60);
    expect(v.features!.peak).toBeLessThanOrEqual(Math.max(...a.cpuPct, ...b.cpuPct));
    expect(v.missing).toBeUndefined();
  });

  it("gives features but no verdict for a history too short to test, and neither for no history", () => {
    const short = tenantHistoryVerdict("new", [userFacing(2, 5)], 2 * DAY_MS);
    expect(short.features).toBeDefined();
    expect(short.measuredCriticality).toBe("");
    expect(short.compare8).toBeUndefined();
    // A server that reported before the window holds its last value into it; one that never reported gives nothing.
    const none = tenantHistoryVerdict("gone", [series("s1", [])], 100 * DAY_MS, { windowDays: 30 });
    expect(none.features).toBeUndefined();
    expect(none.measuredCriticality).toBe("");
    expect(none.missing).toBe("no utilization history in the last 30 days");
  });
});
