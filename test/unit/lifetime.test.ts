import { describe, expect, it } from "vitest";
import {
  LifetimeDistribution,
  LifetimeModel,
  OraclePredictor,
  resolveLifetimeOptions,
} from "../../resourcemanager/policy/lifetime.js";
import type { ContainerKey } from "../../resourcemanager/policy/lifetime.js";
import { thrown } from "../error-code.js";
import { detailsOf } from "../../common/errors.js";

/** A model that learned 100 tasks of 10 s and 100 of 1000 s for etl/map. */
function bimodal(): LifetimeModel {
  const model = new LifetimeModel();
  for (let i = 0; i < 100; i++) {
    model.observeTask("etl", "map", 10_000);
    model.observeTask("etl", "map", 1_000_000);
  }
  return model;
}

const task = (job: string, vertex: string, trueLifetimeMs?: number): ContainerKey => ({
  job,
  vertex,
  isJobManager: false,
  ...(trueLifetimeMs === undefined ? {} : { trueLifetimeMs }),
});

describe("the empirical lifetime distribution (seeds/002, section 3)", () => {
  it("re-predicts a bimodal task: the mean at first, the long mode once it outlives the short one", () => {
    const model = bimodal();
    // (100 x 10 s + 100 x 1000 s) / 200 = 505 s.
    expect(model.taskRemainingMs("etl", "map", 0)).toBeCloseTo(505_000, 6);
    // Still in both modes at 5 s: 505 s - 5 s.
    expect(model.taskRemainingMs("etl", "map", 5_000)).toBeCloseTo(500_000, 6);
    // At 10 s the short mode is over (T > u is strict): only the 1000 s samples remain, 1000 s - 10 s.
    expect(model.taskRemainingMs("etl", "map", 10_000)).toBeCloseTo(990_000, 6);
    expect(model.taskRemainingMs("etl", "map", 20_000)).toBeCloseTo(980_000, 6);
    expect(model.taskDistribution("etl", "map").source).toBe("vertex");
  });

  it("assumes a container that outlived every sample lives as long again, and never predicts 0", () => {
    const d = LifetimeDistribution.of([10_000, 20_000]);
    expect(d.remainingMs(20_000)).toBe(20_000);
    expect(d.remainingMs(50_000)).toBe(50_000);
    // All samples 0 and uptime 0: nothing lived longer, and the floor of 1 ms holds.
    expect(LifetimeDistribution.of([0, 0, 0]).remainingMs(0)).toBe(1);
    // A negative uptime (a clock that went back) counts as 0: the mean.
    expect(d.remainingMs(-5_000)).toBe(15_000);
  });

  it("gives the exit time as now plus the remaining time at the current uptime", () => {
    const d = LifetimeDistribution.point(10_000);
    // Started at 1 s, now 6 s: uptime 5 s, 5 s remain, exit at 11 s.
    expect(d.exitMs(1_000, 6_000)).toBe(11_000);
  });

  it("reports count, mean and linear quantiles", () => {
    const d = LifetimeDistribution.of([40, 10, 30, 20]);
    expect(d.count).toBe(4);
    expect(d.mean).toBe(25);
    expect(d.quantile(0)).toBe(10);
    expect(d.quantile(1)).toBe(40);
    // Rank 0.5 x 3 = 1.5: halfway between 20 and 30.
    expect(d.quantile(0.5)).toBe(25);
    expect(thrown(() => d.quantile(1.5)).code).toBe("INVALID_ARGUMENT");
    expect(thrown(() => LifetimeDistribution.of([])).code).toBe("INVALID_ARGUMENT");
  });
});

describe("the lifetime model", () => {
  it("falls back from the vertex to the job's tasks, to every job's tasks, to the default", () => {
    const model = new LifetimeModel({ minSamples: 3, defaultLifetimeMs: 42_000 });
    expect(model.taskDistribution("a", "x").source).toBe("default");
    expect(model.taskRemainingMs("a", "x", 0)).toBe(42_000);

    model.observeTask("a", "x", 1_000);
    model.observeTask("a", "x", 3_000);
    // Two samples anywhere: still below minSamples at every level.
    expect(model.taskDistribution("a", "x").source).toBe("default");

    model.observeTask("b", "y", 5_000);
    // Every job's tasks pooled: (1 + 3 + 5) / 3 = 3 s.
    expect(model.taskDistribution("a", "x").source).toBe("all");
    expect(model.taskRemainingMs("a", "x", 0)).toBe(3_000);

    model.observeTask("a", "z", 7_000);
    // Job a's tasks of all its vertices: (1 + 3 + 7) / 3 s.
    expect(model.taskDistribution("a", "x").source).toBe("job");
    expect(model.taskRemainingMs("a", "x", 0)).toBeCloseTo(11_000 / 3, 6);

    model.observeTask("a", "x", 2_000);
    // The vertex itself: (1 + 3 + 2) / 3 = 2 s.
    expect(model.taskDistribution("a", "x").source).toBe("vertex");
    expect(model.taskRemainingMs("a", "x", 0)).toBe(2_000);

    // A job never seen takes every job's tasks: (1 + 3 + 5 + 7 + 2) / 5 = 3.6 s.
    expect(model.taskDistribution("c", "q").source).toBe("all");
    expect(model.taskRemainingMs("c", "q", 0)).toBe(3_600);
  });

  it("predicts the job manager's container from whole-job durations, with their own fallback", () => {
    const model = new LifetimeModel({ minSamples: 2, defaultLifetimeMs: 42_000 });
    const am: ContainerKey = { job: "etl", vertex: "", isJobManager: true };
    // Task samples say nothing about the job manager.
    for (let i = 0; i < 5; i++) model.observeTask("etl", "map", 1_000);
    expect(model.jobDistribution("etl").source).toBe("default");
    expect(model.remainingMs(am, 0)).toBe(42_000);

    model.observeJob("other", 100_000);
    model.observeJob("other", 300_000);
    expect(model.jobDistribution("etl").source).toBe("all");
    expect(model.jobRemainingMs("etl", 0)).toBe(200_000);

    model.observeJob("etl", 600_000);
    model.observeJob("etl", 800_000);
    expect(model.jobDistribution("etl").source).toBe("job");
    // After 650 s only the 800 s run is longer: 150 s remain.
    expect(model.remainingMs(am, 650_000)).toBe(150_000);
  });

  it("ignores negative and non-finite durations, counting them, without throwing", () => {
    const model = new LifetimeModel({ minSamples: 1, defaultLifetimeMs: 42_000 });
    for (const odd of [Number.NaN, -1, Number.POSITIVE_INFINITY, Number.NEGATIVE_INFINITY]) {
      model.observeTask("a", "x", odd);
      model.observeJob("a", odd);
    }
    expect(model.rejected).toBe(8);
    expect(model.taskDistribution("a", "x").source).toBe("default");
    expect(model.jobDistribution("a").source).toBe("default");
    model.observeTask("a", "x", 0);
    expect(model.rejected).toBe(8);
    expect(model.taskDistribution("a", "x").source).toBe("vertex");
  });

  it("keeps only the most recent samples of each key", () => {
    const model = new LifetimeModel({ maxSamplesPerKey: 3, minSamples: 3 });
    for (let i = 0; i < 3; i++) model.observeTask("a", "x", 1_000);
    expect(model.taskDistribution("a", "x").distribution.mean).toBe(1_000);
    for (let i = 0; i < 3; i++) model.observeTask("a", "x", 5_000);
    const d = model.taskDistribution("a", "x").distribution;
    expect(d.count).toBe(3);
    expect(d.mean).toBe(5_000);
    model.observeTask("a", "x", 2_000);
    // The oldest 5 s sample gave way: (5 + 5 + 2) / 3 = 4 s.
    expect(model.taskDistribution("a", "x").distribution.mean).toBe(4_000);
  });

  it("ignores a container's true lifetime; the oracle uses it and falls back to the model without one", () => {
    const model = new LifetimeModel({ defaultLifetimeMs: 42_000 });
    const oracle = new OraclePredictor(model);
    // The default, 42 s, 10 s into it: 32 s.
    expect(model.remainingMs(task("a", "x", 30_000), 10_000)).toBe(32_000);
    expect(oracle.remainingMs(task("a", "x", 30_000), 10_000)).toBe(20_000);
    // Live past its true end (between simulator events): about to go, but never 0.
    expect(oracle.remainingMs(task("a", "x", 30_000), 40_000)).toBe(1);
    expect(oracle.remainingMs(task("a", "x"), 10_000)).toBe(32_000);
  });

  it("rejects invalid options, naming the field", () => {
    expect(resolveLifetimeOptions({})).toEqual({ maxSamplesPerKey: 500, minSamples: 3, defaultLifetimeMs: 60_000 });
    for (const [partial, field] of [
      [{ maxSamplesPerKey: 1.5 }, "maxSamplesPerKey"],
      [{ minSamples: 0 }, "minSamples"],
      [{ maxSamplesPerKey: 2, minSamples: 3 }, "minSamples"],
      [{ defaultLifetimeMs: 0 }, "defaultLifetimeMs"],
      [{ defaultLifetimeMs: Number.NaN }, "defaultLifetimeMs"],
    ] as const) {
      const err = thrown(() => resolveLifetimeOptions(partial));
      expect(err.code).toBe("CONFIG_INVALID");
      expect(detailsOf(err, "INVALID_ARGUMENT", "CONFIG_INVALID")?.field).toBe(field);
    }
  });
});
