/** The compute simulator with lifetime-aware node choice (NILAS, LAVA; seeds/002) and whole-server reclaims. */
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { generateCluster } from "../../sim/cluster-gen.js";
import { NO_KILL_COST, runCompute } from "../../sim/compute.js";
import type { ComputeOptions } from "../../sim/compute.js";
import { generateJobStream, jobStream } from "../../sim/jobs.js";
import { DAY_MS } from "../../sim/model.js";
import type { SimJobInput } from "../../sim/jobs.js";
import { fieldOf, figures, flatJob, handCluster, runSimCommand } from "../sim-hand-cluster.js";

const MINUTE_MS = 60_000;
const HOUR_MS = 60 * MINUTE_MS;

const tmp = mkdtempSync(join(tmpdir(), "harvest-sim-lifetime-"));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));

describe("node choice in the compute simulator", () => {
  it("gives the figures of the release before node choice when it is absent or stock", () => {
    const cluster = generateCluster({ servers: 30, historyDays: 2, days: 1, seed: 7 });
    const stream = generateJobStream(cluster, { seed: 7, load: 0.5 });
    // Recorded from sim/compute.ts as committed before node choice (226d8e8) on this cluster, stream and seed: a
    // regression check, the only one that cannot be worked out by hand.
    const before = {
      stock: { jobs: 1104, avgJobTimeS: 2562.584061536573, tasksRun: 13557, taskKills: 263, jobManagerKills: 3 },
      history: { jobs: 1104, avgJobTimeS: 2587.156662091697, tasksRun: 13545, taskKills: 251, jobManagerKills: 1 },
    };
    const events = { stock: 56450, history: 56344 };
    const wasted = { stock: 25.67708365870512, history: 27.100866936780733 };
    // That release's rules: job managers unlimited, a history job with no class waits, no saturation guard, a killed
    // job stays in its classes.
    const then = { maxAmShare: 1, classFallback: "wait", saturationShare: 1, killedJobsLeaveClasses: false } as const;
    for (const policy of ["stock", "history"] as const) {
      const absent = runCompute(cluster, stream, { policy, ...then });
      const stock = runCompute(cluster, stream, { policy, nodeChoice: "stock", ...then });
      const { jobs, avgJobTimeS, tasksRun, taskKills, jobManagerKills } = absent;
      expect({ jobs, avgJobTimeS, tasksRun, taskKills, jobManagerKills }).toEqual(before[policy]);
      expect(absent.events).toBe(events[policy]);
      expect(absent.wastedCoreHours).toBe(wasted[policy]);
      expect(figures(stock)).toEqual(figures(absent));
    }
  });

  describe("one long task and a stream of short ones on four idle servers", () => {
    // Four 4-core servers, no primary, no reserve. A 10-hour task arrives first, then a 1-minute task every other
    // minute for two hours (never two at once). Some server holds the long task all the time, so at most three of
    // four servers can be empty: 0.75 is the most any node choice can reach. NILAS reaches it: beside the long task
    // a short one costs nothing (the server's exit is later than the short task's end: bucket 0), while an empty
    // server costs the short task's whole lifetime (1 minute: bucket 3). LAVA reaches it too: any non-empty server
    // ranks above an empty one. Stock sends each short task to a random free server.
    const cluster = handCluster([{ pattern: "constant", servers: 4, cores: 4, pct: () => 0 }], HOUR_MS, 2 * HOUR_MS);
    const runs: SimJobInput[] = [{ shape: flatJob("long", 1, 10 * HOUR_MS), submitMs: HOUR_MS }];
    for (let k = 0; k < 59; k++)
      runs.push({ shape: flatJob("short", 1, MINUTE_MS), submitMs: HOUR_MS + (1 + 2 * k) * MINUTE_MS });
    const stream = jobStream(runs);
    // Reclaims of the three servers the long task is not on under NILAS and LAVA (server 0: all servers tie for the
    // first task, and ties go to the lowest index), each in the middle of a short task.
    const reclaims = {
      events: [11.5, 31.5, 51.5, 71.5, 91.5].map((m, i) => ({ server: 1 + (i % 3), atMs: HOUR_MS + m * MINUTE_MS })),
      durationMs: 10 * MINUTE_MS,
    };
    const run = (o: Partial<ComputeOptions>) =>
      runCompute(cluster, stream, {
        policy: "stock",
        reserveFraction: 0,
        killCost: NO_KILL_COST,
        checkInvariants: true,
        reclaims,
        ...o,
      });
    const stock = run({});

    it("keeps as many servers empty as possible under NILAS and LAVA with oracle lifetimes, more than stock", () => {
      for (const nodeChoice of ["nilas", "lava"] as const) {
        const r = run({ nodeChoice, lifetimes: "oracle" });
        expect(r.emptyServerShare).toBeCloseTo(0.75, 12);
        expect(r.jobs).toBe(59);
        expect(r.jobsUnfinished).toBe(1);
        expect(r.emptyServerShare).toBeGreaterThanOrEqual(stock.emptyServerShare);
      }
      // 59 short tasks each on a random one of four free servers: all on the long task's is a 4^-59 chance.
      expect(stock.emptyServerShare).toBeLessThan(0.75);
      expect(stock.jobs).toBe(59);
    });

    it("loses nothing to the reclaims under NILAS and LAVA, which all find their server empty", () => {
      for (const nodeChoice of ["nilas", "lava"] as const) {
        const r = run({ nodeChoice, lifetimes: "oracle" });
        expect(r.reclaims).toBe(5);
        expect(r.reclaimsHittingEmpty).toBe(1);
        expect(r.reclaimKilledCoreHours).toBe(0);
        expect(r.reclaimKilledCoreHours).toBeLessThanOrEqual(stock.reclaimKilledCoreHours);
      }
      expect(stock.reclaims).toBe(5);
    });

    it("re-predicts a long task first taken for a short one, and NILAS packs beside it all the same", () => {
      // Learned lifetimes: the long task's job has no history, so it is predicted to last the model's default minute;
      // once it has outlived that, it is predicted to live as long again as it has (the model's rule past every
      // sample), always beyond the next short task's end.
      const r = run({ nodeChoice: "nilas", lifetimes: "learned" });
      expect(r.emptyServerShare).toBeCloseTo(0.75, 12);
      expect(r.reclaimKilledCoreHours).toBe(0);
    });
  });

  it("kills everything on a reclaimed server at once, gives it nothing until it is back, and counts the loss", () => {
    // One 4-core server; a job of two 30-minute tasks at the start. A reclaim at minute 10 takes the server for 20
    // minutes: both tasks die after 10 minutes (20 core-minutes lost) and run again from minute 30 to 60.
    const cluster = handCluster([{ pattern: "constant", servers: 1, cores: 4, pct: () => 0 }], HOUR_MS, 2 * HOUR_MS);
    const stream = jobStream([{ shape: flatJob("pair", 2, 30 * MINUTE_MS), submitMs: HOUR_MS }]);
    const r = runCompute(cluster, stream, {
      policy: "stock",
      reserveFraction: 0,
      killCost: NO_KILL_COST,
      checkInvariants: true,
      reclaims: { events: [{ server: 0, atMs: HOUR_MS + 10 * MINUTE_MS }], durationMs: 20 * MINUTE_MS },
    });
    expect(r.reclaims).toBe(1);
    expect(r.reclaimsHittingEmpty).toBe(0);
    expect(r.reclaimKilledCoreHours).toBeCloseTo(20 / 60, 12);
    expect(r.taskKills).toBe(2);
    expect(r.wastedCoreHours).toBeCloseTo(20 / 60, 12);
    expect(r.avgJobTimeS).toBe(60 * 60);
    // Busy during [0, 10) and [30, 60) of 120 minutes; away during [10, 30).
    expect(r.emptyServerShare).toBeCloseTo(80 / 120, 12);
    // In service with room for 100 minutes, of which empty [60, 120).
    expect(r.emptyShareWithRoom).toBeCloseTo(60 / 100, 12);
  });

  it("lets a reclaim that may choose take the emptiest server: nothing is killed while one is empty", () => {
    // Two 4-core servers, one 2-task job of 30 minutes on one of them (no reserve: both tasks fit on one server). A
    // reclaim drawn on the busy server kills 2 tasks at minute 10; one that may choose takes the empty server instead.
    const cluster = handCluster([{ pattern: "constant", servers: 2, cores: 4, pct: () => 0 }], HOUR_MS, 2 * HOUR_MS);
    const stream = jobStream([{ shape: flatJob("pair", 2, 30 * MINUTE_MS), submitMs: HOUR_MS }]);
    const base = runCompute(cluster, stream, { policy: "stock", reserveFraction: 0, killCost: NO_KILL_COST });
    expect(base.taskKills).toBe(0);
    const busy = (r: { reclaimsHittingEmpty: number }): number => r.reclaimsHittingEmpty;
    const at = HOUR_MS + 10 * MINUTE_MS;
    const run = (server: number, choose: "random" | "emptiest") =>
      runCompute(cluster, stream, {
        policy: "stock",
        reserveFraction: 0,
        killCost: NO_KILL_COST,
        reclaims: { events: [{ server, atMs: at }], durationMs: 20 * MINUTE_MS, choose },
      });
    // Which server the job took: the one a drawn reclaim hits with kills.
    const hits = [0, 1].map((s) => run(s, "random"));
    const loaded = hits.findIndex((r) => r.taskKills === 2);
    expect(loaded).toBeGreaterThanOrEqual(0);
    expect(busy(hits[loaded]!)).toBe(0);
    const chosen = run(loaded, "emptiest");
    expect(chosen.taskKills).toBe(0);
    expect(chosen.reclaimKilledCoreHours).toBe(0);
    expect(chosen.reclaimsHittingEmpty).toBe(1);
  });

  it("draws the same reclaims for every node choice from the seed", () => {
    const cluster = handCluster([{ pattern: "constant", servers: 20, cores: 8, pct: () => 20 }], HOUR_MS, 3 * DAY_MS);
    const stream = jobStream([{ shape: flatJob("etl", 10, 20 * MINUTE_MS), submitMs: HOUR_MS }]);
    const reclaims = { perServerPerDay: 1, durationMs: 30 * MINUTE_MS };
    const counts = (["stock", "nilas", "lava"] as const).map(
      (nodeChoice) => runCompute(cluster, stream, { policy: "stock", nodeChoice, reclaims }).reclaims,
    );
    // About 1 x 20 servers x 3 days.
    expect(counts[0]).toBeGreaterThan(30);
    expect(counts[0]).toBeLessThan(90);
    expect(new Set(counts).size).toBe(1);
  });

  it("rejects node-choice and reclaim options out of range, naming the field", () => {
    const cluster = handCluster([{ pattern: "constant", servers: 2, cores: 4, pct: () => 0 }], HOUR_MS, HOUR_MS);
    const stream = jobStream([{ shape: flatJob("x", 1, MINUTE_MS), submitMs: HOUR_MS }]);
    const bad = (o: Partial<ComputeOptions>) => fieldOf(() => runCompute(cluster, stream, { policy: "stock", ...o }));
    expect(bad({ nodeChoice: "best" as "nilas" })).toBe("INVALID_ARGUMENT:nodeChoice");
    expect(bad({ lifetimes: "psychic" as "oracle" })).toBe("INVALID_ARGUMENT:lifetimes");
    expect(bad({ nodeChoice: "lava", nodeChoiceOptions: { recyclingFraction: 2 } })).toBe(
      "INVALID_ARGUMENT:nodeChoiceOptions.recyclingFraction",
    );
    expect(bad({ reclaims: { durationMs: 0 } })).toBe("INVALID_ARGUMENT:reclaims.durationMs");
    expect(bad({ reclaims: { perServerPerDay: -1, durationMs: 1 } })).toBe("INVALID_ARGUMENT:reclaims.perServerPerDay");
    expect(bad({ reclaims: { events: [{ server: 2, atMs: HOUR_MS }], durationMs: 1 } })).toBe(
      "INVALID_ARGUMENT:reclaims.events[0].server",
    );
  });
});

describe("harvest sim lifetime", () => {
  it("runs stock, NILAS and LAVA with both lifetimes on one tiny cluster and writes the report", async () => {
    const dir = join(tmp, "lifetime");
    const printed = await runSimCommand(
      ["sim", "lifetime", "--compare", "--servers", "10", "--days", "1", "--traces", "generated"].concat([
        "--out",
        dir,
        "--json",
      ]),
    );
    expect(process.exitCode).toBe(0);
    const outcome = JSON.parse(printed) as {
      runs: { nodeChoice: string; lifetimes: string; emptyDeltaPp: number | null; emptyServerShare: number }[];
      files: string[];
    };
    expect(outcome.runs.map((r) => `${r.nodeChoice}/${r.lifetimes}`)).toEqual([
      "stock/learned",
      "nilas/learned",
      "nilas/oracle",
      "lava/learned",
      "lava/oracle",
    ]);
    expect(outcome.runs[0]!.emptyDeltaPp).toBe(0);
    for (const r of outcome.runs) expect(r.emptyServerShare).toBeGreaterThan(0);
    for (const f of ["lifetime.md", "lifetime.csv", "lifetime.json", "lifetime-empty-servers.svg"])
      expect(existsSync(join(dir, f))).toBe(true);
    expect(readFileSync(join(dir, "lifetime.md"), "utf8")).toContain("+2.3 to 9.2 pp");
  });
});
