/** The compute simulator: job streams, and task placement by the real scheduler policies on a simulated cluster. */
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { parseAlibabaTasks } from "../../common/alibaba-dag.js";
import { SeededRng } from "../../common/rng.js";
import { generateCluster } from "../../sim/cluster-gen.js";
import { DEFAULT_KILL_COST, NO_KILL_COST, runCompute } from "../../sim/compute.js";
import type { ComputeObserver, ComputeRunResult } from "../../sim/compute.js";
import { alibabaShape, generateJobStream, jobShape, jobStream, TPCDS_QUERIES, tpcdsShape } from "../../sim/jobs.js";
import type { JobStream } from "../../sim/jobs.js";
import { DAY_MS } from "../../sim/model.js";
import type { SimCluster } from "../../sim/model.js";
import { fieldOf, figures, flatJob, handCluster, runSimCommand, threePatternCluster } from "../sim-hand-cluster.js";
import type { TenantSpec } from "../sim-hand-cluster.js";

const MINUTE_MS = 60_000;
const HOUR_MS = 60 * MINUTE_MS;
const SLOT_MS = 5 * MINUTE_MS;

/** Servers named s000, s001, ... (padded, so they sort in order). */
const SERVER_ID = (i: number): string => `s${String(i).padStart(3, "0")}`;

/** A cluster built by hand (5-minute slots), its servers named by `SERVER_ID`. */
function paddedCluster(tenants: readonly TenantSpec[], historyMs: number, experimentMs: number): SimCluster {
  return handCluster(tenants, historyMs, experimentMs, { serverId: SERVER_ID });
}

/**
 * One 8-core server after a day of history, for a day: its primary idles except in the slot starting 10 minutes into
 * the experiment, when it takes `pct` % of the cores.
 */
function spikeCluster(pct: number): SimCluster {
  const spikeSlot = DAY_MS / SLOT_MS + 2;
  return paddedCluster(
    [{ pattern: "constant", servers: 1, cores: 8, pct: (k) => (k === spikeSlot ? pct : 0) }],
    DAY_MS,
    DAY_MS,
  );
}

const tmp = mkdtempSync(join(tmpdir(), "harvest-sim-compute-"));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));

describe("job streams", () => {
  const cluster = generateCluster({ servers: 40, historyDays: 3, days: 3, seed: 3 });

  it("offers the asked share of the harvestable core-hours in jobs that recur under the same name", () => {
    const stream = generateJobStream(cluster, { seed: 9, load: 0.2 });
    expect(stream.source).toBe("tpcds");
    expect(stream.offeredCoreHours).toBeGreaterThanOrEqual(0.2 * stream.harvestableCoreHours);
    // Overshoot is at most the last recurring job's runs.
    expect(stream.offeredCoreHours).toBeLessThan(0.3 * stream.harvestableCoreHours);
    const runsByName = new Map<string, number>();
    for (const j of stream.jobs) runsByName.set(j.shape.name, (runsByName.get(j.shape.name) ?? 0) + 1);
    expect(runsByName.size).toBe(stream.names);
    for (const runs of runsByName.values()) expect(runs).toBeGreaterThanOrEqual(3);
    for (const [i, j] of stream.jobs.entries()) {
      expect(j.id).toBe(i);
      expect(j.submitMs).toBeGreaterThanOrEqual(cluster.historyMs);
      expect(j.submitMs).toBeLessThan(cluster.horizonMs);
      if (i > 0) expect(j.submitMs).toBeGreaterThanOrEqual(stream.jobs[i - 1]!.submitMs);
    }
    // Runs of one job differ a little, not in shape.
    const scales = stream.jobs.filter((j) => j.shape === stream.jobs[0]!.shape).map((j) => j.durationScale);
    expect(new Set(scales).size).toBe(scales.length);
  });

  it("builds the same stream from the same seed and another from another seed", () => {
    const a = generateJobStream(cluster, { seed: 4 });
    const b = generateJobStream(cluster, { seed: 4 });
    const c = generateJobStream(cluster, { seed: 5 });
    const key = (s: JobStream): string =>
      JSON.stringify(s.jobs.map((j) => [j.shape.name, j.submitMs, j.durationScale, j.shape.totalTasks]));
    expect(key(a)).toBe(key(b));
    expect(key(a)).not.toBe(key(c));
  });

  it("keeps query 19's shape from Figure 7, its 469-task scan scaled with the width", () => {
    const q19 = TPCDS_QUERIES.find((q) => q.query === "q19")!;
    expect(tpcdsShape("q19", q19, 1, 60_000).maxConcurrency).toBe(469);
    const half = tpcdsShape("q19", q19, 0.5, 60_000);
    expect(half.maxConcurrency).toBe(235);
    expect(half.vertices.map((v) => v.name).slice(-1)).toEqual(["reducer-7"]);
    expect(half.vertices.find((v) => v.name === "mapper-2")!.taskMs).toBe(60_000);
  });

  it("replays trace DAGs with their durations and instance counts, merging instances shorter than minTaskMs", () => {
    const trace = parseAlibabaTasks(
      [
        "10,j_1,M1,100,50,0.1,4",
        "10,j_1,M2,5,50,0.1,60",
        "10,j_1,R3_1_2,200,50,0.1,1",
        "20,j_2,task_abc,30,100,0.1,1",
        "30,j_3,M1,40,100,0.2,2",
        "30,j_3,J2_1,50,100,0.2,3",
      ].join("\n"),
    );
    const j1 = alibabaShape("j1", trace[0]!, { widthScale: 1, maxTasks: 500, minTaskMs: 30_000 });
    expect(j1.vertices.map((v) => [v.name, v.tasks, v.taskMs, v.inputs.map((i) => j1.vertices[i]!.name)])).toEqual([
      ["M1", 4, 100_000, []],
      // 5-second instances are merged six to a task: 10 tasks of 30 s.
      ["M2", 10, 30_000, []],
      ["R3", 1, 200_000, ["M1", "M2"]],
    ]);
    expect(j1.maxConcurrency).toBe(14);
    const stream = generateJobStream(cluster, { source: "alibaba", alibabaJobs: trace, seed: 2, load: 0.05 });
    expect(stream.source).toBe("alibaba");
    // The lone-task job j_2 is never replayed; the DAG jobs are, under recurring names.
    const names = new Set(stream.jobs.map((j) => j.shape.name));
    expect(names.size).toBe(stream.names);
    for (const n of names) expect(n).toMatch(/^alibaba-j_[13]-\d+$/);
  });

  it("falls back to TPC-DS-like jobs, with a note, when the trace has no DAG job to replay", () => {
    const stream = generateJobStream(cluster, { source: "mixed", alibabaJobs: [], load: 0.05 });
    expect(stream.source).toBe("tpcds");
    expect(stream.notes.join(" ")).toContain("TPC-DS");
  });

  it("rejects options out of range, naming the field", () => {
    expect(fieldOf(() => generateJobStream(cluster, { load: -1 }))).toBe("INVALID_ARGUMENT:load");
    expect(fieldOf(() => generateJobStream(cluster, { days: 4 }))).toBe("INVALID_ARGUMENT:days");
    expect(fieldOf(() => jobShape("x", [{ name: "a", tasks: 1, taskMs: 0 }]))).toBe("INVALID_ARGUMENT:a.taskMs");
  });
});

describe("what a kill costs (the kill-cost model)", () => {
  const instant = { ...NO_KILL_COST };

  it("kills only at the node manager's next yield tick, and the primary slows the tasks until then", () => {
    // One 8-core server, no reserve; four 1-core tasks of 30 min. At minute 10 the primary takes 6 cores for one slot:
    // until the tick the four tasks share the 2 cores it leaves (half speed), then the two youngest die and the two
    // survivors run at full speed again. The survivors end late by half the lag; without the slowdown, on time.
    const cluster = spikeCluster(75);
    const stream = jobStream([{ shape: flatJob("etl", 4, 30 * MINUTE_MS), submitMs: DAY_MS }]);
    for (const throttleSlowdown of [true, false]) {
      const killedAt: number[] = [];
      const endedAt: number[] = [];
      const r = runCompute(cluster, stream, {
        policy: "stock",
        reserveFraction: 0,
        checkInvariants: true,
        killCost: { ...instant, yieldTickMs: 60_000, throttleSlowdown },
        observer: {
          onTaskKilled: (e) => killedAt.push(e.nowMs - DAY_MS),
          onTaskEnded: (e) => endedAt.push(e.nowMs - DAY_MS),
        },
      });
      expect(killedAt).toHaveLength(2);
      const lag = killedAt[0]! - 10 * MINUTE_MS;
      expect(lag).toBeGreaterThanOrEqual(0);
      expect(lag).toBeLessThanOrEqual(60_000);
      expect(killedAt[1]).toBe(killedAt[0]);
      const survivors = endedAt.slice(0, 2);
      const late = throttleSlowdown ? lag / 2 : 0;
      for (const t of survivors) expect(t).toBeCloseTo(30 * MINUTE_MS + late, 6);
      expect(r.jobs).toBe(1);
      expect(r.primaryCoreHoursTaken).toBe(0);
    }
  });

  it("loses a killed job manager's running tasks, and the next attempt re-runs only the unfinished ones", () => {
    // One 8-core server; a job of two vertices: 4 tasks of 5 min, then 4 tasks of 30 min. At minute 10 the primary
    // takes the whole server for one slot: the yield controller kills everything, the job manager last. The next
    // attempt starts when the spike ends and re-runs the second vertex only.
    const cluster = spikeCluster(100);
    const shape = jobShape("two-stage", [
      { name: "map", tasks: 4, taskMs: 5 * MINUTE_MS },
      { name: "reduce", tasks: 4, taskMs: 30 * MINUTE_MS, inputs: ["map"] },
    ]);
    const stream = jobStream([{ shape, submitMs: DAY_MS }]);
    const started: string[] = [];
    const r = runCompute(cluster, stream, {
      policy: "stock",
      checkInvariants: true,
      killCost: { ...instant, jobManagerMilli: 500 },
      observer: { onTaskStart: (e) => started.push(`${e.vertex}/${e.task}`) },
    });
    expect(r.jobManagerKills).toBe(1);
    expect(r.taskKills).toBe(4);
    expect(r.tasksRun).toBe(12);
    expect(r.tasksCompleted).toBe(8);
    expect(started.filter((t) => t.startsWith("0/"))).toHaveLength(4);
    expect(r.jobs).toBe(1);
    // The reduce tasks restart when the spike ends (minute 15) and run 30 minutes.
    expect(r.avgJobTimeS).toBe(45 * 60);
    // Without a job-manager container the same spike costs the four running tasks only.
    const noJm = runCompute(cluster, stream, { policy: "stock", killCost: instant });
    expect(noJm.jobManagerKills).toBe(0);
    expect(noJm.taskKills).toBe(4);
  });

  it("offers a freed container only at the server's next heartbeat, and starts tasks after their launch", () => {
    // A 2-core server whose primary uses one core (reserve 0): one 1-core task at a time. A job of two 1-minute tasks
    // runs them one after the other; the second is granted at the heartbeat after the first ends.
    const cluster = paddedCluster([{ pattern: "constant", servers: 1, cores: 2, pct: () => 50 }], DAY_MS, DAY_MS);
    const stream = jobStream([{ shape: flatJob("pair", 2, MINUTE_MS), submitMs: DAY_MS }]);
    const run = (killCost: Partial<typeof NO_KILL_COST>) =>
      runCompute(cluster, stream, { policy: "stock", reserveFraction: 0, checkInvariants: true, killCost });
    expect(run(instant).avgJobTimeS).toBe(120);
    const heartbeats = run({ ...instant, heartbeatIntervalMs: 1000 });
    expect(heartbeats.avgJobTimeS).toBeGreaterThan(120);
    expect(heartbeats.avgJobTimeS).toBeLessThanOrEqual(121);
    expect(heartbeats.avgTaskWaitS).toBeGreaterThan(30);
    const launches = run({ ...instant, launchMedianMs: 200, launchP90Ms: 400, amHeartbeatMs: 300 });
    expect(launches.avgJobTimeS).toBeGreaterThan(120);
    expect(launches.avgJobTimeS).toBeLessThan(125);
  });

  it("rejects a kill-cost model out of range, naming the field", () => {
    const cluster = paddedCluster([{ pattern: "constant", servers: 1, cores: 4, pct: () => 0 }], DAY_MS, DAY_MS);
    const stream = jobStream([{ shape: flatJob("x", 1, MINUTE_MS), submitMs: DAY_MS }]);
    for (const [killCost, field] of [
      [{ yieldTickMs: -1 }, "killCost.yieldTickMs"],
      [{ launchMedianMs: 300, launchP90Ms: 100 }, "killCost.launchP90Ms"],
      [{ jobManagerMilli: 5000 }, "killCost.jobManagerMilli"],
    ] as const) {
      expect(() => runCompute(cluster, stream, { policy: "stock", killCost })).toThrow(field);
    }
  });
});

describe("runCompute", () => {
  it("gives the same figures for the same seed, and others for another seed", () => {
    const cluster = generateCluster({ servers: 30, historyDays: 7, days: 2, seed: 7 });
    const stream = generateJobStream(cluster, { seed: 7, load: 0.4 });
    for (const policy of ["stock", "stock-unaware", "history"] as const) {
      const a = runCompute(cluster, stream, { policy, seed: 1 });
      const b = runCompute(cluster, stream, { policy, seed: 1 });
      const c = runCompute(cluster, stream, { policy, seed: 2 });
      expect(a.jobs).toBeGreaterThan(100);
      expect(figures(a)).toEqual(figures(b));
      expect(figures(a)).not.toEqual(figures(c));
    }
    const other = generateJobStream(cluster, { seed: 8, load: 0.4 });
    expect(figures(runCompute(cluster, other, { policy: "stock", seed: 1 }))).not.toEqual(
      figures(runCompute(cluster, stream, { policy: "stock", seed: 1 })),
    );
  });

  it("never lets a server run more secondary cores than its primary leaves, even through random spikes", () => {
    const rng = new SeededRng(11);
    const spikes = Array.from({ length: 2000 }, () => (rng.next() < 0.15 ? 60 + 40 * rng.next() : 5 * rng.next()));
    const cluster = paddedCluster(
      [
        { pattern: "unpredictable", servers: 3, cores: 8, pct: (k) => spikes[k % spikes.length]! },
        { pattern: "constant", servers: 2, cores: 8, pct: () => 20 },
      ],
      DAY_MS,
      DAY_MS,
    );
    const shapes = [flatJob("a", 6, 20 * MINUTE_MS), flatJob("b", 3, 2 * MINUTE_MS), flatJob("c", 10, 45 * MINUTE_MS)];
    const stream = jobStream(
      Array.from({ length: 60 }, (_, i) => ({
        shape: shapes[i % 3]!,
        submitMs: DAY_MS + i * 17 * MINUTE_MS,
        durationScale: 1 + (i % 5) / 10,
      })),
    );
    for (const policy of ["stock", "history"] as const) {
      // Under the kill-cost model too: the scheduler's view lags, the yield comes at the tick, job managers die.
      for (const killCost of [NO_KILL_COST, DEFAULT_KILL_COST]) {
        const r = runCompute(cluster, stream, { policy, checkInvariants: true, killCost });
        expect(r.taskKills).toBeGreaterThan(0);
        expect(r.primaryCoreHoursTaken).toBe(0);
        expect(r.jobs).toBe(60);
      }
    }
    // Primary-unaware stock rides through the same spikes: nothing killed, the primaries pay instead.
    const unaware = runCompute(cluster, stream, { policy: "stock-unaware", checkInvariants: true });
    expect(unaware.taskKills).toBe(0);
    expect(unaware.wastedCoreHours).toBe(0);
    expect(unaware.tasksRun).toBe(unaware.tasksCompleted);
    expect(unaware.primaryCoreHoursTaken).toBeGreaterThan(0);
    expect(unaware.jobs).toBe(60);
  });

  it("never kills under stock-unaware, and counts the primary core-hours its tasks held", () => {
    // One 8-core server; its primary jumps to 100 % for the slot starting 10 minutes into the experiment. The four
    // 1-core tasks keep running: for those 5 minutes the primary is 4 cores short (min(8, 8 + 4 - 8)).
    const cluster = spikeCluster(100);
    const stream = jobStream([{ shape: flatJob("etl", 4, 30 * MINUTE_MS), submitMs: DAY_MS }]);
    const killed: number[] = [];
    const r = runCompute(cluster, stream, {
      killCost: NO_KILL_COST,
      policy: "stock-unaware",
      checkInvariants: true,
      observer: { onTaskKilled: (e) => killed.push(e.nowMs) },
    });
    expect(killed).toEqual([]);
    expect(r.taskKills).toBe(0);
    expect(r.tasksRun).toBe(4);
    expect(r.wastedCoreHours).toBe(0);
    // The job's time is its time without interference (stock loses 15 minutes to the spike: 45 minutes).
    expect(r.avgJobTimeS).toBe(30 * 60);
    expect(r.primaryCoreHoursTaken).toBeCloseTo((4 * 5) / 60, 9);
    for (const policy of ["stock", "history"] as const)
      expect(
        runCompute(cluster, stream, { policy, checkInvariants: true, killCost: NO_KILL_COST }).primaryCoreHoursTaken,
      ).toBe(0);

    // The same job beside an idle primary takes nothing from it.
    const idle = paddedCluster([{ pattern: "constant", servers: 1, cores: 8, pct: () => 0 }], DAY_MS, DAY_MS);
    const quiet = runCompute(idle, stream, { policy: "stock-unaware", checkInvariants: true, killCost: NO_KILL_COST });
    expect(quiet.taskKills).toBe(0);
    expect(quiet.primaryCoreHoursTaken).toBe(0);
    expect(quiet.avgJobTimeS).toBe(30 * 60);
  });

  it("fills a server's full capacity under stock-unaware, primary or not", () => {
    // An 8-core server whose primary always uses 75 %: stock leaves 8 - 6 - 0.8 = 1.2 cores (one task at a time),
    // stock-unaware ignores the primary and its reserve and runs all eight tasks at once.
    const cluster = paddedCluster([{ pattern: "constant", servers: 1, cores: 8, pct: () => 75 }], DAY_MS, DAY_MS);
    const stream = jobStream([{ shape: flatJob("scan", 8, 10 * MINUTE_MS), submitMs: DAY_MS }]);
    const stock = runCompute(cluster, stream, { policy: "stock", checkInvariants: true, killCost: NO_KILL_COST });
    const unaware = runCompute(cluster, stream, {
      policy: "stock-unaware",
      checkInvariants: true,
      killCost: NO_KILL_COST,
    });
    expect(stock.avgJobTimeS).toBe(8 * 10 * 60);
    expect(unaware.avgJobTimeS).toBe(10 * 60);
    // 8 tasks beside a 6-core primary on 8 cores: the primary is 6 cores short for 10 minutes.
    expect(unaware.primaryCoreHoursTaken).toBeCloseTo((6 * 10) / 60, 9);
  });

  it("runs all three policies on one cluster and job stream with sim compute --compare", async () => {
    const dir = join(tmp, "compare");
    const printed = await runSimCommand([
      "sim",
      "compute",
      "--compare",
      "--servers",
      "20",
      "--days",
      "1",
      "--out",
      dir,
      "--json",
    ]);
    expect(process.exitCode).toBe(0);
    const outcome = JSON.parse(printed) as { results: ComputeRunResult[] };
    expect(outcome.results.map((r) => r.policy)).toEqual(["stock", "stock-unaware", "history"]);
    const [stock, unaware, history] = outcome.results;
    expect(unaware!.taskKills).toBe(0);
    expect(stock!.primaryCoreHoursTaken).toBe(0);
    expect(history!.primaryCoreHoursTaken).toBe(0);
    const csv = readFileSync(join(dir, "compute.csv"), "utf8").trim().split("\n");
    expect(csv[0]).toContain("primary_core_hours_taken");
    expect(csv).toHaveLength(1 + 3);
    const md = readFileSync(join(dir, "compute.md"), "utf8");
    expect(md).toContain("history vs stock-unaware");
  });

  it("re-runs tasks killed by a primary spike without counting a failure, and the job still finishes", () => {
    // One 8-core server; its primary jumps to 100 % for the slot starting 10 minutes into the experiment.
    const cluster = spikeCluster(100);
    const stream = jobStream([{ shape: flatJob("etl", 4, 30 * MINUTE_MS), submitMs: DAY_MS }]);
    const killed: number[] = [];
    const observer: ComputeObserver = { onTaskKilled: (e) => killed.push(e.nowMs - DAY_MS) };
    for (const policy of ["stock", "history"] as const) {
      killed.length = 0;
      const r = runCompute(cluster, stream, { policy, observer, killCost: NO_KILL_COST });
      // All four attempts die at minute 10 and start again when the spike ends at minute 15.
      expect(killed).toEqual([10, 10, 10, 10].map((m) => m * MINUTE_MS));
      expect(r.taskKills).toBe(4);
      expect(r.tasksRun).toBe(8);
      expect(r.tasksCompleted).toBe(4);
      expect(r.wastedCoreHours).toBeCloseTo((4 * 10) / 60, 9);
      expect(r.jobs).toBe(1);
      expect(r.jobsUnfinished).toBe(0);
      expect(r.avgJobTimeS).toBe(45 * 60);
    }
  });

  it("runs each history job's tasks only on the servers of the classes Algorithm 1 chose for it", () => {
    const tenants = { servers: 4, cores: 16, constantPct: 10, noisePct: 80 };
    const cluster = threePatternCluster(tenants, DAY_MS, { serverId: SERVER_ID });
    const shapes = [flatJob("small", 4, 2 * MINUTE_MS), flatJob("mid", 8, 15 * MINUTE_MS), flatJob("big", 12, HOUR_MS)];
    const stream = jobStream(
      Array.from({ length: 45 }, (_, i) => ({ shape: shapes[i % 3]!, submitMs: 7 * DAY_MS + i * 20 * MINUTE_MS })),
    );
    const allowed = new Map<number, Set<number>>();
    const patternsUsed = new Set<string>();
    let starts = 0;
    const r = runCompute(cluster, stream, {
      policy: "history",
      // Algorithm 1's confinement alone: a killed job stays in its classes (the next test lets it leave).
      killedJobsLeaveClasses: false,
      observer: {
        onJobPlaced: (e) => {
          expect(e.classIds).toBeDefined();
          for (const id of e.classIds!) patternsUsed.add(id.split("-")[0]!);
          allowed.set(e.job.id, new Set(e.servers));
          // The chosen classes are the tenants of their pattern, as the cluster was built.
          for (const s of e.servers!) {
            const pattern = cluster.tenants[cluster.servers[s]!.tenant]!.pattern;
            expect(e.classIds!.some((id) => id.startsWith(`${pattern}-`))).toBe(true);
          }
        },
        onTaskStart: (e) => {
          starts++;
          expect(allowed.get(e.job.id)!.has(e.server)).toBe(true);
        },
      },
    });
    expect(r.jobs).toBe(45);
    expect(r.jobsOpenedToAll).toBe(0);
    expect(starts).toBe(r.tasksRun);
    expect(r.classes.map((c) => c.split("-")[0]).sort()).toEqual(["constant", "periodic", "unpredictable"]);
    expect(patternsUsed.size).toBeGreaterThan(1);
  });

  it("opens a confined job to every server once a primary killed its task (killedJobsLeaveClasses, the default)", () => {
    const tenants = { servers: 4, cores: 16, constantPct: 10, noisePct: 80 };
    const cluster = threePatternCluster(tenants, DAY_MS, { serverId: SERVER_ID });
    const shapes = [flatJob("small", 4, 2 * MINUTE_MS), flatJob("mid", 8, 15 * MINUTE_MS), flatJob("big", 12, HOUR_MS)];
    const stream = jobStream(
      Array.from({ length: 45 }, (_, i) => ({ shape: shapes[i % 3]!, submitMs: 7 * DAY_MS + i * 20 * MINUTE_MS })),
    );
    const run = (killedJobsLeaveClasses: boolean) => {
      const killed = new Set<number>();
      const opened = new Set<number>();
      const r = runCompute(cluster, stream, {
        policy: "history",
        killedJobsLeaveClasses,
        checkInvariants: true,
        observer: {
          onTaskKilled: (e) => killed.add(e.job.id),
          onJobPlaced: (e) => {
            if (e.classIds === undefined) opened.add(e.job.id);
          },
        },
      });
      return { r, killed, opened };
    };
    const leave = run(true);
    const stay = run(false);
    expect(leave.r.jobs).toBe(45);
    expect(stay.r.jobsOpenedToAll).toBe(0);
    // Every job opened was one a primary had killed a task of; some were.
    expect(leave.opened.size).toBeGreaterThan(0);
    for (const id of leave.opened) expect(leave.killed.has(id)).toBe(true);
    expect(leave.r.jobsOpenedToAll).toBe(leave.opened.size);
  });

  it.each([
    ["wait", "waits classWaitMs, then runs on any server", 60],
    ["stock", "runs on any server at once, as stock places it", 0],
  ] as const)("lets a history job that no class can hold (fallback %s): it %s", (classFallback, _, waitS) => {
    // Two 8-core servers leave 14 cores after the reserve; a job of 20 concurrent tasks fits no class, alone or together.
    const cluster = paddedCluster([{ pattern: "constant", servers: 2, cores: 8, pct: () => 0 }], DAY_MS, DAY_MS);
    const stream = jobStream([{ shape: flatJob("wide", 20, 10 * MINUTE_MS), submitMs: DAY_MS }]);
    const starts: number[] = [];
    const r = runCompute(cluster, stream, {
      killCost: NO_KILL_COST,
      policy: "history",
      classFallback,
      observer: { onTaskStart: (e) => starts.push(e.nowMs - DAY_MS) },
    });
    expect(r.jobsWaited).toBe(classFallback === "wait" ? 1 : 0);
    expect(r.jobsOpenedToAll).toBe(1);
    expect(r.jobs).toBe(1);
    expect(Math.min(...starts)).toBe(waitS * 1000);
    // 14 tasks at once, then the other 6 when the first end.
    expect(r.avgJobTimeS).toBe(waitS + 2 * 10 * 60);
  });

  it("keeps long jobs off a tenant that spikes every hour, where the stock policy loses their work", () => {
    // Tenant A: four servers flat at 10 %. Tenant B: four servers idle but at 100 % for the first five minutes of
    // every hour, so its p95 ("peak") is 100 % and Algorithm 1 gives a long job no headroom there at all, whatever the
    // draw. A long job runs 8 two-hour tasks, so every one of its tasks placed on B dies at the next hour. The stock
    // policy takes any server with room, and B's servers are half of them: it puts all 8 tasks of a run on A only
    // with probability 2^-8, so over 15 runs it loses work on B; history never places a long-typed run there. A job's
    // first run is typed medium (no history yet), so medium jobs are told to rank B last (weight 0) and the report's
    // first run is safe too. Short and medium jobs are submitted mid-hour and end before the next spike.
    const hourSlots = HOUR_MS / SLOT_MS;
    const cluster = paddedCluster(
      [
        { pattern: "constant", servers: 4, cores: 16, pct: () => 10 },
        { pattern: "unpredictable", servers: 4, cores: 16, pct: (k) => (k % hourSlots === 0 ? 100 : 0) },
      ],
      3 * DAY_MS,
      2 * DAY_MS,
    );
    const long = flatJob("nightly-report", 8, 2 * HOUR_MS);
    const medium = flatJob("hourly-etl", 4, 10 * MINUTE_MS);
    const short = flatJob("dashboard", 2, MINUTE_MS);
    const runs = [];
    for (let round = 0; round < 15; round++) {
      const t = 3 * DAY_MS + round * 3 * HOUR_MS;
      runs.push({ shape: long, submitMs: t + 10 * MINUTE_MS });
      runs.push({ shape: medium, submitMs: t + 20 * MINUTE_MS });
      runs.push({ shape: short, submitMs: t + 30 * MINUTE_MS });
    }
    const stream = jobStream(runs);
    const onB = (server: number): boolean => cluster.servers[server]!.tenant === 1;
    const longTasksOnB = { stock: 0, history: 0 };
    const result = (policy: "stock" | "history"): ComputeRunResult => {
      const typeOf = new Map<number, string>();
      return runCompute(cluster, stream, {
        killCost: NO_KILL_COST,
        policy,
        weights: { medium: { unpredictable: 0 } },
        observer: {
          onJobPlaced: (e) => typeOf.set(e.job.id, e.jobType),
          onTaskStart: (e) => {
            if (typeOf.get(e.job.id) === "long" && onB(e.server)) longTasksOnB[policy]++;
          },
        },
      });
    };
    const stock = result("stock");
    const history = result("history");
    for (const r of [stock, history]) {
      expect(r.jobs).toBe(45);
      expect(r.byType.long.jobs).toBeGreaterThanOrEqual(12);
      expect(r.killsByType.short).toBe(0);
    }
    expect(longTasksOnB.history).toBe(0);
    expect(longTasksOnB.stock).toBeGreaterThan(0);
    expect(history.taskKills).toBe(0);
    expect(history.byType.long.avgJobTimeS).toBe(2 * 3600);
    expect(stock.killsByType.long).toBeGreaterThan(0);
    expect(stock.byType.long.avgJobTimeS).toBeGreaterThan(history.byType.long.avgJobTimeS);
    expect(stock.taskKills).toBeGreaterThan(history.taskKills);
    expect(stock.wastedCoreHours).toBeGreaterThan(history.wastedCoreHours);
  });

  it("rejects options out of range and jobs outside the experiment, naming the field", () => {
    const cluster = paddedCluster([{ pattern: "constant", servers: 1, cores: 4, pct: () => 0 }], DAY_MS, DAY_MS);
    const ok = jobStream([{ shape: flatJob("a", 1, MINUTE_MS), submitMs: DAY_MS }]);
    expect(fieldOf(() => runCompute(cluster, ok, { policy: "stock", reserveFraction: 1 }))).toBe(
      "INVALID_ARGUMENT:reserveFraction",
    );
    expect(fieldOf(() => runCompute(cluster, ok, { policy: "stock", taskCores: 4 }))).toBe(
      "INVALID_ARGUMENT:taskCores",
    );
    const early = jobStream([{ shape: flatJob("a", 1, MINUTE_MS), submitMs: 0 }]);
    expect(fieldOf(() => runCompute(cluster, early, { policy: "stock" }))).toBe("INVALID_ARGUMENT:jobs[0].submitMs");
  });
});
