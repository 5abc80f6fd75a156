/**
 * Survival quotes in the simulator: the simulator's path (a job shape) and the resource manager's (a DAG file) give
 * the same quote, the calibration figures are what their definitions say, and a small calibration run quotes every
 * job with a probability and scores it.
 */
import { describe, expect, it } from "vitest";
import { validateDag } from "../../common/dag-spec.js";
import { Logger } from "../../common/log.js";
import { freeTaskSlots, LifetimeModel, quoteJob, quoteVerticesOfDag } from "../../resourcemanager/index.js";
import type { QuoteServer, SurvivalQuote } from "../../resourcemanager/index.js";
import { JobQuotes } from "../../resourcemanager/job-quotes.js";
import { jobShape } from "../../sim/jobs.js";
import type { SimCluster } from "../../sim/model.js";
import { calibrationOf } from "../../sim/experiments/calibration/calibration.js";
import { runCalibrationExperiment } from "../../sim/experiments/calibration/calibration-experiment.js";
import {
  QuoteRecorder,
  quoteVerticesOfShape,
  serverKillRates,
} from "../../sim/experiments/calibration/quote-recorder.js";
import type { QuotedJob } from "../../sim/experiments/calibration/quote-recorder.js";

const MIN = 60_000;

describe("survival quotes in the simulator", () => {
  it("quotes a simulated job as the resource manager quotes the same DAG", () => {
    // Declared out of order: both paths must put extract first.
    const shape = jobShape("etl", [
      { name: "load", tasks: 2, taskMs: MIN, inputs: ["extract"] },
      { name: "extract", tasks: 6, taskMs: MIN },
    ]);
    const dag = validateDag({
      name: "etl",
      vertices: [
        { name: "load", parallelism: 2, command: ["true"], resources: { vcoresMilli: 1000, memoryMb: 256 } },
        { name: "extract", parallelism: 6, command: ["true"], resources: { vcoresMilli: 1000, memoryMb: 256 } },
      ],
      edges: [{ from: "extract", to: "load", type: "scatter-gather" }],
    });
    expect(quoteVerticesOfShape(shape)).toEqual(quoteVerticesOfDag(dag));
    const lifetimes = new LifetimeModel();
    for (const ms of [5, 7, 9]) lifetimes.observeTask("etl", "extract", ms * MIN);
    const common = { job: "etl", lifetimes, serverKillsPerHour: [0.1, 0.3], slots: 4, tasksPerServer: 2 };
    const sim = quoteJob({ ...common, vertices: quoteVerticesOfShape(shape) });
    const rm = quoteJob({ ...common, vertices: quoteVerticesOfDag(dag) });
    expect(sim).toEqual(rm);
    expect(sim.pNoKill).toBeGreaterThan(0);
    expect(sim.pNoKill).toBeLessThan(1);
  });

  it("quotes a job alike through the resource manager's JobQuotes and the simulator's recorder", async () => {
    // Two tenants of one server each over two days of 5-minute slots: one spiky, one flat.
    const slotMs = 300_000;
    const slots = 576;
    const spiky = Float32Array.from({ length: slots }, (_, k) => (k % 24 < 2 ? 80 : 20));
    const flatSeries = Float32Array.from({ length: slots }, () => 30);
    const cluster: SimCluster = {
      servers: [0, 1].map((i) => ({
        index: i,
        id: `s${i}`,
        rack: "r0",
        tenant: i,
        cores: 4,
        diskBytes: 0,
        offsetPct: 0,
      })),
      tenants: [spiky, flatSeries].map((utilization, i) => ({
        index: i,
        id: `t${i}`,
        environment: "e",
        machineFunction: "f",
        pattern: "unpredictable" as const,
        servers: [i],
        utilization,
        reimagesPerServerMonth: 0,
      })),
      racks: 1,
      slotMs,
      historyMs: slots * slotMs,
      horizonMs: slots * slotMs,
      reimages: [],
      level: "medium",
      source: "generated",
      seed: 1,
    };
    const shape = jobShape("etl", [
      { name: "extract", tasks: 6, taskMs: MIN },
      { name: "load", tasks: 2, taskMs: MIN, inputs: ["extract"] },
    ]);
    const dag = validateDag({
      name: "etl",
      vertices: ["extract", "load"].map((name) => ({
        name,
        parallelism: name === "extract" ? 6 : 2,
        command: ["true"],
        resources: { vcoresMilli: 1000, memoryMb: 256 },
      })),
      edges: [{ from: "extract", to: "load", type: "scatter-gather" }],
    });
    // Room: 4 cores less 1 for the primary, 0.4 for the reserve and 0.6 held: 2 task slots on each server.
    const room: QuoteServer[] = [0, 1].map(() => ({
      capacityMilli: 4000,
      primaryMilli: 1000,
      reserveMilli: 400,
      allocatedMilli: 600,
    }));

    const recorder = new QuoteRecorder(serverKillRates(cluster, 0, cluster.historyMs, 2));
    const free = freeTaskSlots(room, 1000);
    const job = { id: 0, shape, submitMs: 0, durationScale: 1 };
    recorder.observer().onJobSubmitted!({
      job,
      nowMs: 0,
      freeTaskSlots: free.slots,
      serversWithRoom: free.serversWithRoom,
    });
    const simQuote = recorder.jobs.get(0)!.quote;

    const series = (i: number) => ({
      name: `s${i}`,
      stepSec: slotMs / 1000,
      startMs: 0,
      timesMs: Array.from({ length: slots }, (_, k) => k * slotMs),
      cpuPct: Array.from(cluster.tenants[i]!.utilization),
    });
    const rm = new JobQuotes(
      {
        snapshot: { clusteredMs: cluster.historyMs, classes: [], stats: new Map(), unclassified: [] },
        options: { windowDays: cluster.historyMs / 86_400_000 } as never,
        tenants: () => [0, 1].map((i) => ({ name: `t${i}`, servers: [`s${i}`] }) as never),
        ownerOf: (server: string) => ({ name: `t${server.slice(1)}` }) as never,
        serverSeries: (server: string) => Promise.resolve(series(Number(server.slice(1)))),
      },
      new LifetimeModel(),
      { history: () => Promise.resolve([]) },
      {
        *nodeViews() {
          for (const i of [0, 1])
            yield {
              nodeId: `s${i}`,
              capacity: { vcoresMilli: 4000, memoryMb: 4096 },
              primaryUsage: { vcoresMilli: 1000, memoryMb: 0 },
              allocated: { vcoresMilli: 600, memoryMb: 0 },
            } as never;
        },
      },
      { survivalQuote: { killSlackPct: 2 }, reserveFraction: 0.1 },
      new Logger("test", "error"),
    );
    const rmQuote: SurvivalQuote | undefined = await rm.quote(dag);
    expect(rmQuote).toEqual(simQuote);
    // The spiky tenant kills: the mean rate is above 0.
    expect(simQuote.killsPerHour).toBeGreaterThan(0);
    expect(simQuote.pNoKill).toBeLessThan(1);
  });

  it("scores quotes by the Brier score beside the constant forecast of the kill-free share", () => {
    const job = (p: number, kills: number, durationMs?: number): QuotedJob => ({
      id: 0,
      name: "j",
      submitMs: 0,
      kills,
      ...(durationMs !== undefined ? { durationMs } : {}),
      quote: { pNoKill: p, expectedReruns: 0, etaP10Ms: 1, etaP50Ms: 2, etaP90Ms: 3, killsPerHour: 0, basis: "" },
    });
    const c = calibrationOf([job(0.9, 0, 1), job(0.2, 2, 3), job(0.6, 0, 4), job(0.5, 1)]);
    expect(c.jobs).toBe(3);
    expect(c.brier).toBeCloseTo((0.1 ** 2 + 0.2 ** 2 + 0.4 ** 2) / 3, 12);
    expect(c.killFreeShare).toBeCloseTo(2 / 3, 12);
    expect(c.baselineBrier).toBeCloseTo(2 / 9, 12);
    expect(c.buckets[9]).toMatchObject({ jobs: 1, observed: 1 });
    expect(c.buckets[2]).toMatchObject({ jobs: 1, observed: 0, meanObservedReruns: 2 });
    // Durations 1, 3, 4 against p10 1, p50 2, p90 3.
    expect([c.byP10, c.byP50, c.byP90]).toEqual([1 / 3, 1 / 3, 2 / 3]);
  });

  it("quotes every job of a small run with a probability, and the buckets hold every finished job", async () => {
    const o = await runCalibrationExperiment({ servers: 20, days: 1, load: 0.6 });
    const finished = o.jobs.filter((j) => j.durationMs !== undefined);
    expect(finished.length).toBeGreaterThan(20);
    for (const j of o.jobs) {
      expect(j.quote.pNoKill).toBeGreaterThanOrEqual(0);
      expect(j.quote.pNoKill).toBeLessThanOrEqual(1);
      expect(j.quote.etaP10Ms).toBeLessThanOrEqual(j.quote.etaP90Ms);
    }
    expect(o.calibration.buckets.reduce((a, b) => a + b.jobs, 0)).toBe(finished.length);
    expect(o.calibration.observedReruns).toBe(finished.reduce((a, j) => a + j.kills, 0));
    // The run's kills are the jobs' kills (jobs still running at the horizon included).
    expect(o.jobs.reduce((a, j) => a + j.kills, 0)).toBe(o.result.taskKills);
    expect(o.report.markdown).toContain("Brier score of the quote");
  });
});
