/**
 * The survival quote (resourcemanager/policy/survival-quote.ts): expected values computed by hand from the model's
 * formulas, monotonicity in the job's length and the servers' kill rate, the kill rate of a primary's history, and the
 * job's past runs blended in.
 */
import { describe, expect, it } from "vitest";
import { validateDag } from "../../common/dag-spec.js";
import {
  freeTaskSlots,
  killsPerHourOf,
  LifetimeModel,
  quoteJob,
  quoteVerticesOfDag,
  survivalQuote,
} from "../../resourcemanager/index.js";
import type { QuoteVertex, VertexDurations } from "../../resourcemanager/index.js";

const MIN = 60_000;
const HOUR = 60 * MIN;
const flat = (ms: number): VertexDurations => ({ meanMs: ms, p10Ms: ms, p90Ms: ms });

/** A map of 4 tasks feeding a reduce of 1. */
const MAP_REDUCE: QuoteVertex[] = [
  { name: "map", tasks: 4, inputs: [] },
  { name: "reduce", tasks: 1, inputs: [0] },
];

describe("survivalQuote", () => {
  it("quotes certainty and no re-runs on servers whose primaries never kill", () => {
    const q = survivalQuote({
      vertices: MAP_REDUCE,
      durations: [flat(30 * MIN), flat(HOUR)],
      killsPerHour: 0,
      slots: 10,
    });
    expect(q.pNoKill).toBe(1);
    expect(q.expectedReruns).toBe(0);
    // The critical path: one wave of maps (30 min), then the reduce (60 min).
    expect([q.etaP10Ms, q.etaP50Ms, q.etaP90Ms]).toEqual([90 * MIN, 90 * MIN, 90 * MIN]);
  });

  it("gives P(no kill) = exp(-lambda x task-hours) and re-runs sum n (e^(lambda d) - 1) for independent tasks", () => {
    const q = survivalQuote({
      vertices: MAP_REDUCE,
      durations: [flat(30 * MIN), flat(HOUR)],
      killsPerHour: 0.5,
      slots: 10,
    });
    // 4 maps of 0.5 h and a reduce of 1 h: 3 task-hours at 0.5 kills per hour.
    expect(q.pNoKill).toBeCloseTo(Math.exp(-1.5), 12);
    expect(q.expectedReruns).toBeCloseTo(4 * (Math.exp(0.25) - 1) + (Math.exp(0.5) - 1), 12);
    // Each vertex stretched by its expected attempts: 30 min x e^0.25, then 60 min x e^0.5.
    expect(q.etaP50Ms).toBe(Math.round(30 * MIN * Math.exp(0.25) + HOUR * Math.exp(0.5)));
  });

  it("counts a spike once for the tasks that share its server, and waves when slots are short", () => {
    const q = survivalQuote({
      vertices: MAP_REDUCE,
      durations: [{ meanMs: 30 * MIN, p10Ms: 20 * MIN, p90Ms: 40 * MIN }, flat(HOUR)],
      killsPerHour: 0.5,
      slots: 2,
      tasksPerServer: 2,
    });
    // Maps: 2 waves of 2 tasks on 1 server each, 0.5 h per wave = 1 server-hour; the reduce: 1 server-hour.
    expect(q.pNoKill).toBeCloseTo(Math.exp(-0.5 * 2), 12);
    // Re-runs count tasks, not servers.
    expect(q.expectedReruns).toBeCloseTo(4 * (Math.exp(0.25) - 1) + (Math.exp(0.5) - 1), 12);
    // p10: 2 waves of 20 min, then 60 min; p90: 2 waves of 40 min x e^(0.5 x 2/3), then 60 min x e^0.5.
    expect(q.etaP10Ms).toBe(100 * MIN);
    expect(q.etaP90Ms).toBe(Math.round(2 * 40 * MIN * Math.exp(0.5 * (40 / 60)) + HOUR * Math.exp(0.5)));
  });

  it("quotes a longer job or a riskier class a lower probability and more re-runs", () => {
    const quote = (taskMs: number, killsPerHour: number) =>
      survivalQuote({ vertices: MAP_REDUCE, durations: [flat(taskMs), flat(taskMs)], killsPerHour, slots: 4 });
    let last = quote(5 * MIN, 0.2);
    for (const ms of [10 * MIN, 30 * MIN, HOUR, 3 * HOUR]) {
      const q = quote(ms, 0.2);
      expect(q.pNoKill).toBeLessThan(last.pNoKill);
      expect(q.expectedReruns).toBeGreaterThan(last.expectedReruns);
      last = q;
    }
    last = quote(30 * MIN, 0.01);
    for (const rate of [0.1, 0.5, 2]) {
      const q = quote(30 * MIN, rate);
      expect(q.pNoKill).toBeLessThan(last.pNoKill);
      expect(q.expectedReruns).toBeGreaterThan(last.expectedReruns);
      expect(q.etaP50Ms).toBeGreaterThan(last.etaP50Ms);
      last = q;
    }
  });

  it("rejects a DAG out of topological order and a negative kill rate", () => {
    const bad = [
      { name: "b", tasks: 1, inputs: [1] },
      { name: "a", tasks: 1, inputs: [] },
    ];
    expect(() =>
      survivalQuote({ vertices: bad, durations: [flat(MIN), flat(MIN)], killsPerHour: 0, slots: 1 }),
    ).toThrow(/out of order/);
    expect(() =>
      survivalQuote({ vertices: MAP_REDUCE, durations: [flat(MIN), flat(MIN)], killsPerHour: -1, slots: 1 }),
    ).toThrow(/kill rate/);
  });
});

describe("killsPerHourOf", () => {
  it("measures how soon the primary rises past a task's room, per hour of exposure", () => {
    // 1-minute slots; a task placed mid-slot at 10 % dies when the primary passes 15 %.
    const series = { stepSec: 60, timesMs: [0, 1, 2, 3, 4].map((i) => i * MIN), cpuPct: [10, 10, 30, 10, 10] };
    // t0: killed at 2 min (90 s of exposure); t1: killed at 2 min (30 s); t2 (30 %) never passes 35 %: censored at the
    // end, 5 min (150 s); t3 and t4 never pass 15 % again: 90 s and 30 s. Two kills in 390 s.
    expect(killsPerHourOf(series, 5)).toBeCloseTo((2 * 3600) / 390, 10);
  });

  it("sees no kill on a flat or falling primary, and none within the slack", () => {
    const times = [0, 1, 2, 3].map((i) => i * MIN);
    expect(killsPerHourOf({ stepSec: 60, timesMs: times, cpuPct: [20, 20, 20, 20] }, 0)).toBe(0);
    expect(killsPerHourOf({ stepSec: 60, timesMs: times, cpuPct: [40, 30, 20, 10] }, 0)).toBe(0);
    expect(killsPerHourOf({ stepSec: 60, timesMs: times, cpuPct: [10, 12, 10, 12] }, 2)).toBe(0);
    expect(killsPerHourOf({ stepSec: 60, timesMs: times, cpuPct: [10, 12, 10, 12] }, 1)).toBeGreaterThan(0);
  });
});

describe("freeTaskSlots", () => {
  it("counts whole task containers beside the primary, the reserve and what is held, and the servers with one", () => {
    const server = (primaryMilli: number, allocatedMilli: number) => ({
      capacityMilli: 8000,
      primaryMilli,
      reserveMilli: 800,
      allocatedMilli,
    });
    // Rooms of 5,200, 1,200 and 200 milli-cores: 2, 0 and 0 tasks of 2 cores; 5, 1 and 0 of one.
    const servers = [server(2000, 0), server(6000, 0), server(3000, 4000)];
    expect(freeTaskSlots(servers, 2000)).toEqual({ slots: 2, serversWithRoom: 1 });
    expect(freeTaskSlots(servers, 1000)).toEqual({ slots: 6, serversWithRoom: 2 });
  });
});

describe("quoteJob", () => {
  const dag = validateDag({
    name: "etl",
    vertices: ["extract", "load"].map((name) => ({
      name,
      parallelism: name === "extract" ? 4 : 1,
      command: ["true"],
      resources: { vcoresMilli: 1000, memoryMb: 256 },
    })),
    edges: [{ from: "extract", to: "load", type: "scatter-gather" }],
  });

  it("reads the DAG in topological order and the durations from the lifetime model", () => {
    expect(quoteVerticesOfDag(dag)).toEqual([
      { name: "extract", tasks: 4, inputs: [] },
      { name: "load", tasks: 1, inputs: [0] },
    ]);
    const lifetimes = new LifetimeModel();
    for (const ms of [20, 30, 40]) lifetimes.observeTask("etl", "extract", ms * MIN);
    for (const ms of [60, 60, 60]) lifetimes.observeTask("etl", "load", ms * MIN);
    const q = quoteJob({
      job: "etl",
      vertices: quoteVerticesOfDag(dag),
      lifetimes,
      serverKillsPerHour: [0.25, 0.75],
      slots: 10,
    });
    // Mean rate 0.5 per hour, means 30 and 60 min: as the hand computation above.
    expect(q.pNoKill).toBeCloseTo(Math.exp(-1.5), 12);
    expect(q.killsPerHour).toBe(0.5);
    expect(q.basis).toBe("vertex");
  });

  it("blends the job's own past runs in, the model counting as priorRuns runs, and takes their band", () => {
    const lifetimes = new LifetimeModel();
    const input = { job: "etl", vertices: quoteVerticesOfDag(dag), lifetimes, serverKillsPerHour: [0.5], slots: 10 };
    const model = quoteJob(input);
    const pastRuns = [
      { tasksPreempted: 0, durationMs: 10 * MIN, succeeded: true },
      { tasksPreempted: 3, durationMs: 20 * MIN, succeeded: true },
      { tasksPreempted: 0, durationMs: 30 * MIN, succeeded: true },
    ];
    const q = quoteJob({ ...input, pastRuns, options: { priorRuns: 5 } });
    expect(q.pNoKill).toBeCloseTo((5 * model.pNoKill + 2) / 8, 12);
    expect(q.expectedReruns).toBeCloseTo((5 * model.expectedReruns + 3) / 8, 12);
    expect([q.etaP10Ms, q.etaP50Ms, q.etaP90Ms]).toEqual([12 * MIN, 20 * MIN, 28 * MIN]);
    expect(q.basis).toBe("default, 3 past runs");
  });
});
