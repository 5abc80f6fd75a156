// The compute simulation's feature bus: features are called in list order, the first feature that takes an arriving
// job stops the others from seeing it, figures merge in list order over the values of a run without features, and
// the stock lifetime keys answer when no feature provides them.
import { describe, expect, it } from "vitest";
import { FeatureBus } from "../../sim/engine/feature-bus.js";
import type { FeatureFigures } from "../../sim/engine/compute-result.js";
import type { SimFeature } from "../../sim/features/feature.js";
import type { SimJob } from "../../sim/jobs.js";
import type { Attempt, JobRun } from "../../sim/roles/job-run.js";
import type { SchedulerPolicy } from "../../resourcemanager/index.js";

const job = { id: 7 } as unknown as SimJob;
const run = { job: { shape: { name: "etl" }, vertexNames: ["map"] } } as unknown as JobRun;
const attempt = {} as Attempt;

function recorder(name: string, calls: string[], takes = false): SimFeature {
  return {
    setUp: () => calls.push(`${name}.setUp`),
    runStarted: () => calls.push(`${name}.runStarted`),
    jobArrived: () => {
      calls.push(`${name}.jobArrived`);
      return takes;
    },
    containerEnded: (_a, held) => calls.push(`${name}.containerEnded ${held}`),
    taskCompleted: () => calls.push(`${name}.taskCompleted`),
    jobDone: (_r, ms) => calls.push(`${name}.jobDone ${ms}`),
  };
}

describe("FeatureBus", () => {
  it("calls every listening feature in list order and skips features without the hook", () => {
    const calls: string[] = [];
    const bus = new FeatureBus([recorder("a", calls), {}, recorder("b", calls)]);
    bus.setUp();
    bus.runStarted();
    bus.containerEnded(attempt, 42);
    bus.taskCompleted(attempt);
    bus.jobDone(run, 1000, undefined);
    expect(calls).toEqual([
      "a.setUp",
      "b.setUp",
      "a.runStarted",
      "b.runStarted",
      "a.containerEnded 42",
      "b.containerEnded 42",
      "a.taskCompleted",
      "b.taskCompleted",
      "a.jobDone 1000",
      "b.jobDone 1000",
    ]);
  });

  it("stops at the first feature that takes an arriving job, and reports that it was taken", () => {
    const calls: string[] = [];
    const taking = new FeatureBus([recorder("a", calls), recorder("queue", calls, true), recorder("c", calls)]);
    expect(taking.jobArrived(job)).toBe(true);
    expect(calls).toEqual(["a.jobArrived", "queue.jobArrived"]);

    calls.length = 0;
    const passing = new FeatureBus([recorder("a", calls), recorder("c", calls)]);
    expect(passing.jobArrived(job)).toBe(false);
    expect(calls).toEqual(["a.jobArrived", "c.jobArrived"]);
    expect(new FeatureBus([]).jobArrived(job)).toBe(false);
  });

  it("merges figures in list order over the values of a run without features", () => {
    const base = { reclaims: 0, reimages: 0 } as unknown as FeatureFigures;
    const bus = new FeatureBus([
      { figures: () => ({ reclaims: 3 }) },
      { figures: () => ({ reclaims: 5, reimages: 2 }) },
    ]);
    const merged = bus.figures(base);
    expect(merged.reclaims).toBe(5);
    expect(merged.reimages).toBe(2);
  });

  it("wraps the placement policy with the first feature innermost", () => {
    const named = (name: string): SchedulerPolicy => ({ name }) as unknown as SchedulerPolicy;
    const wrap = (tag: string): SimFeature => ({
      schedulerPolicy: (inner) => named(`${tag}(${(inner as unknown as { name: string }).name})`),
    });
    const bus = new FeatureBus([wrap("lifetimes"), {}, wrap("power")]);
    expect((bus.schedulerPolicy(named("history")) as unknown as { name: string }).name).toBe(
      "power(lifetimes(history))",
    );
  });

  it("answers lifetime keys from the first feature that provides them, else the stock keys", () => {
    const stock = new FeatureBus([{}]);
    expect(stock.lifetimes.jobManagerKey(run)).toEqual({ job: "etl", vertex: "", isJobManager: true });
    expect(stock.lifetimes.predictor).toBeUndefined();

    const port = { ...stock.lifetimes, jobManagerKey: () => ({ job: "learned", vertex: "", isJobManager: true }) };
    const bus = new FeatureBus([{}, { lifetimes: port }, { lifetimes: stock.lifetimes }]);
    expect(bus.lifetimes.jobManagerKey(run).job).toBe("learned");
  });
});
