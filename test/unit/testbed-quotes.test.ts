import { describe, expect, it } from "vitest";
import type { TestbedJob } from "../../labs/testbed.js";
import { calibrationRows, testbedCalibration } from "../../labs/testbed-quotes.js";

function job(name: string, p: number, kills: { task?: number; am?: number }, durationMs?: number): TestbedJob {
  return {
    name,
    run: 1,
    appId: `app-${name}`,
    plannedSubmitMs: 0,
    submitMs: 0,
    finishMs: durationMs ?? 0,
    state: durationMs === undefined ? "KILLED" : "FINISHED",
    durationMs: durationMs ?? NaN,
    jobType: "short",
    classes: [],
    tasksRun: 3,
    taskKills: kills.task ?? 0,
    tasksLostWithJobManager: 0,
    amKills: kills.am ?? 0,
    quote: { pNoKill: p, expectedReruns: 1 - p, etaP10Ms: 1_000, etaP50Ms: 2_000, etaP90Ms: 3_000 },
  };
}

describe("the testbed's survival quotes against what happened", () => {
  it("scores finished quoted jobs only, a job manager's kill counting as a kill", () => {
    const { quote: _q, ...unquoted } = job("u", 0.5, {}, 1_500);
    const c = testbedCalibration([
      job("a", 0.9, {}, 1_500),
      job("b", 0.8, { am: 1 }, 2_500),
      job("c", 0.2, { task: 2 }, 3_500),
      job("never-ended", 0.9, {}),
      unquoted,
    ]);
    expect(c.jobs).toBe(3);
    expect(c.killFreeShare).toBeCloseTo(1 / 3);
    // (0.9 - 1)^2 + (0.8 - 0)^2 + (0.2 - 0)^2 over 3.
    expect(c.brier).toBeCloseTo((0.01 + 0.64 + 0.04) / 3);
    expect(c.observedReruns).toBe(3);
    expect(c.byP50).toBeCloseTo(1 / 3);
    expect(c.byP90).toBeCloseTo(2 / 3);
    const [row] = calibrationRows({ history: c });
    expect(row?.[0]).toBe("history");
    expect(row?.[2]).toBe((1.9 / 3).toFixed(2));
  });
});
