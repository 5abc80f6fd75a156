/** Planned reimages in the compute simulator: no drain, or a graceful drain in LARS or arbitrary order (seeds/002). */
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { NO_KILL_COST, runCompute } from "../../sim/compute.js";
import type { ComputeOptions, DrainMode, ReimageFigures } from "../../sim/compute.js";
import { jobShape, jobStream } from "../../sim/jobs.js";
import { fieldOf, handCluster, runSimCommand } from "../sim-hand-cluster.js";

const MINUTE_MS = 60_000;
const HOUR_MS = 60 * MINUTE_MS;

const tmp = mkdtempSync(join(tmpdir(), "harvest-sim-drain-"));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));

describe("planned reimages", () => {
  it("leaves every container to finish when the notice is longer than every task, where no drain kills them", () => {
    // One 4-core server, no reserve. A recurring job of two 10-minute tasks runs at minutes 1 and 2 (the lifetime
    // model learns four 10-minute tasks), 20, 35 and 50. The server is reimaged at minute 57, announced 30 minutes
    // ahead (minute 27).
    // Drained: at the notice the two tasks of minute 20 have run 7 minutes and are predicted to need 3 more, well
    // before the reimage: left to finish (minute 30). Nothing new comes; the runs of minutes 35 and 50 wait for the
    // server to come back. At the reimage the server is empty.
    // Not drained: the runs of 35 and 50 go on; at the reimage the two tasks of minute 50 have run 7 minutes: killed,
    // 2 x 7 core-minutes lost.
    const cluster = handCluster([{ pattern: "constant", servers: 1, cores: 4, pct: () => 0 }], HOUR_MS, 4 * HOUR_MS);
    const shape = jobShape("etl", [{ name: "work", tasks: 2, taskMs: 10 * MINUTE_MS }]);
    const stream = jobStream([1, 2, 20, 35, 50].map((m) => ({ shape, submitMs: HOUR_MS + m * MINUTE_MS })));
    const run = (drain: DrainMode): ReimageFigures => {
      const r = runCompute(cluster, stream, {
        policy: "stock",
        reserveFraction: 0,
        killCost: NO_KILL_COST,
        checkInvariants: true,
        reimages: { events: [{ server: 0, atMs: HOUR_MS + 57 * MINUTE_MS }], noticeMs: 30 * MINUTE_MS, drain },
      });
      expect(r.jobs).toBe(5);
      return r.reimages!;
    };
    for (const drain of ["lars", "arbitrary"] as const) {
      const f = run(drain);
      expect(f).toEqual({
        drain,
        reimages: 1,
        containersAtNotice: 2,
        preempted: 0,
        preemptedCoreHours: 0,
        killedAtReimage: 0,
        killedAtReimageCoreHours: 0,
        finishedOnTheirOwn: 2,
      });
    }
    const none = run("none");
    expect(none.killedAtReimage).toBe(2);
    expect(none.killedAtReimageCoreHours).toBeCloseTo((2 * 7) / 60, 12);
    expect(none.preempted).toBe(0);
  });

  it("preempts fewer containers in LARS order than oldest first when the rate binds and short ones would end", () => {
    // One 16-core server, no reserve; a recurring job of four tasks, one vertex. Two runs at minute 0 teach the model
    // its durations: four of 10 minutes and (a run 10 times slower) four of 100 minutes. Then run C (10-minute tasks)
    // at minute 108.5 and run D (100-minute tasks) at minute 113; the reimage at minute 135 is announced at 115, and
    // the drain may preempt one container a minute, stepping every minute.
    // At the notice every task looks alike to the model (same job and vertex) but for its uptime: E[T - u | T > u]
    // over {10 x4, 100 x4} minutes is 55 - u, so C (u = 6.5) needs 48.5 more minutes and D (u = 2) 53: all eight must
    // go (the reimage is 20 minutes away). C really ends at minute 118.5.
    // LARS, longest predicted first: D at 115, 116, 117, 118 (uptimes 2, 3, 4, 5); C ends on its own at 118.5. Four
    // preempted, 14 core-minutes lost.
    // Oldest first: C at 115 to 118 (uptimes 6.5 to 9.5), then D at 119 to 122 (uptimes 6 to 9). Eight preempted,
    // 62 core-minutes lost.
    const cluster = handCluster([{ pattern: "constant", servers: 1, cores: 16, pct: () => 0 }], HOUR_MS, 6 * HOUR_MS);
    const shape = jobShape("mix", [{ name: "work", tasks: 4, taskMs: 10 * MINUTE_MS }]);
    const stream = jobStream([
      { shape, submitMs: HOUR_MS },
      { shape, submitMs: HOUR_MS, durationScale: 10 },
      { shape, submitMs: HOUR_MS + 108.5 * MINUTE_MS },
      { shape, submitMs: HOUR_MS + 113 * MINUTE_MS, durationScale: 10 },
    ]);
    const run = (drain: DrainMode): ReimageFigures =>
      runCompute(cluster, stream, {
        policy: "stock",
        reserveFraction: 0,
        killCost: NO_KILL_COST,
        checkInvariants: true,
        reimages: {
          events: [{ server: 0, atMs: HOUR_MS + 135 * MINUTE_MS }],
          noticeMs: 20 * MINUTE_MS,
          drain,
          stepIntervalMs: MINUTE_MS,
          drainOptions: { preemptionsPerSecond: 1 / 60, burst: 1 },
        },
      }).reimages!;
    const lars = run("lars");
    const arbitrary = run("arbitrary");
    expect(lars.containersAtNotice).toBe(8);
    expect(arbitrary.containersAtNotice).toBe(8);
    expect(lars.preempted).toBe(4);
    expect(lars.finishedOnTheirOwn).toBe(4);
    expect(lars.preemptedCoreHours).toBeCloseTo(14 / 60, 12);
    expect(arbitrary.preempted).toBe(8);
    expect(arbitrary.finishedOnTheirOwn).toBe(0);
    expect(arbitrary.preemptedCoreHours).toBeCloseTo(62 / 60, 12);
    expect(lars.killedAtReimage + arbitrary.killedAtReimage).toBe(0);
    expect(lars.preempted).toBeLessThan(arbitrary.preempted);
  });

  it("rejects reimage options out of range, naming the field", () => {
    const cluster = handCluster([{ pattern: "constant", servers: 2, cores: 4, pct: () => 0 }], HOUR_MS, HOUR_MS);
    const shape = jobShape("x", [{ name: "work", tasks: 1, taskMs: MINUTE_MS }]);
    const stream = jobStream([{ shape, submitMs: HOUR_MS }]);
    const at = HOUR_MS + MINUTE_MS;
    const bad = (reimages: ComputeOptions["reimages"]) =>
      fieldOf(() => runCompute(cluster, stream, { policy: "stock", reimages }));
    expect(bad({ events: [{ server: 0, atMs: at }], drain: "eventually" as DrainMode })).toBe(
      "INVALID_ARGUMENT:reimages.drain",
    );
    expect(bad({ events: [{ server: 5, atMs: at }] })).toBe("INVALID_ARGUMENT:reimages.events[0].server");
    expect(bad({ events: [{ server: 0, atMs: 0 }] })).toBe("INVALID_ARGUMENT:reimages.events[0].atMs");
    expect(bad({ events: [], noticeMs: -1 })).toBe("INVALID_ARGUMENT:reimages.noticeMs");
    expect(bad({ events: [], drainOptions: { burst: 0 } })).toBe("INVALID_ARGUMENT:reimages.drainOptions.burst");
  });
});

describe("harvest sim drain", () => {
  it("runs no drain, then LARS and arbitrary at each rate, on one tiny cluster and writes the report", async () => {
    const dir = join(tmp, "drain");
    const printed = await runSimCommand(
      ["sim", "drain", "--servers", "10", "--days", "1", "--traces", "generated", "--reimage-rate", "1"].concat([
        "--out",
        dir,
        "--json",
      ]),
    );
    expect(process.exitCode).toBe(0);
    const outcome = JSON.parse(printed) as {
      setup: { reimages: number };
      runs: { drain: string; preemptionsPerSecond: number | null; reimages: number; preempted: number }[];
    };
    expect(outcome.runs.map((r) => r.drain)).toEqual(["none", "lars", "arbitrary", "lars", "arbitrary"]);
    expect(outcome.runs.map((r) => r.preemptionsPerSecond)).toEqual([null, 1, 1, 1 / 60, 1 / 60]);
    expect(outcome.setup.reimages).toBeGreaterThan(0);
    for (const r of outcome.runs) expect(r.reimages).toBe(outcome.setup.reimages);
    expect(outcome.runs[0]!.preempted).toBe(0);
    for (const f of ["drain.md", "drain.csv", "drain.json", "drain-disruptions.svg"])
      expect(existsSync(join(dir, f))).toBe(true);
  });
});
