/** Admission control in the compute simulator (seeds/003) and the admission experiment's thresholds file. */
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { admissionOptionsFromFlags } from "../../cli/sim-admission-command.js";
import { ManualClock } from "../../common/clock.js";
import { isHarvestError } from "../../common/errors.js";
import { readAdmissionThresholds } from "../../resourcemanager/admission-control.js";
import { runAdmissionExperiment, thresholdsFile } from "../../sim/experiments/admission/admission-experiment.js";
import { generateCluster } from "../../sim/cluster-gen.js";
import { NO_KILL_COST, runCompute } from "../../sim/compute.js";
import { generateJobStream, jobShape, jobStream } from "../../sim/jobs.js";
import { DAY_MS } from "../../sim/model.js";
import { figures, handCluster } from "../sim-hand-cluster.js";

const MINUTE_MS = 60_000;
const HOUR_MS = 60 * MINUTE_MS;
const SLOT_MS = 5 * MINUTE_MS;

const tmp = mkdtempSync(join(tmpdir(), "harvest-sim-admission-"));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));

describe("admission control in the compute simulator", () => {
  it("changes nothing without a policy: absent and none give the same figures, event for event", () => {
    const cluster = generateCluster({ servers: 12, historyDays: 3, days: 1, seed: 5, meanPct: 45 });
    const stream = generateJobStream(cluster, { seed: 5, load: 0.9 });
    for (const policy of ["stock", "history"] as const) {
      const absent = runCompute(cluster, stream, { policy, seed: 2 });
      const none = runCompute(cluster, stream, { policy, seed: 2, admission: { policy: "none" } });
      expect(absent.jobs).toBeGreaterThan(20);
      expect(absent.taskKills).toBeGreaterThan(0);
      expect(figures(none)).toEqual(figures(absent));
      expect(none.admission).toBe("none");
      // Every arrival goes straight to the scheduler.
      expect(none.jobsAdmitted).toBe(none.jobsSubmitted);
      expect(none.avgAdmissionWaitS).toBe(0);
      expect(none.jobsRejected).toBe(0);
      expect(none.jobsQueuedAtEnd).toBe(0);
    }
    // Markov's bound never exceeds 1, so the first-moment policy at threshold 1 admits every job on arrival: the same
    // run, but for the admission figures (the experiment reuses the run without admission control for it).
    const none = runCompute(cluster, stream, { policy: "stock", seed: 2 });
    const first = runCompute(cluster, stream, {
      policy: "stock",
      seed: 2,
      admission: { policy: "first", firstThreshold: 1 },
    });
    expect({ ...figures(first), admission: "none", admissionThreshold: 1 }).toEqual(figures(none));
  });

  it("holds a job that would overlap the primary's daily peak, admits it after, and loses nothing to kills", () => {
    // One periodic tenant on four 8-core servers: 10 % all day but 90 % from 12:00 to 14:00, for 7 days of history and
    // the experiment day. The reserve is 0.8 cores a server, so the pool is C = 4 x 7.2 = 28.8 cores, and from 12:00 to
    // 14:00 the primary leaves the tasks nothing (8 - 7.2 - 0.8 = 0). A job of eight 1-core tasks of 2 hours arrives at
    // 11:00; the lifetime model, knowing no run yet, predicts its default, set to 2 hours.
    const peak = (k: number): number => {
      const minute = ((k * SLOT_MS) % DAY_MS) / MINUTE_MS;
      return minute >= 12 * 60 && minute < 14 * 60 ? 90 : 10;
    };
    const cluster = handCluster([{ pattern: "periodic", servers: 4, cores: 8, pct: peak }], 7 * DAY_MS, DAY_MS);
    const arrival = 7 * DAY_MS + 11 * HOUR_MS;
    const stream = jobStream([
      { shape: jobShape("etl", [{ name: "work", tasks: 8, taskMs: 2 * HOUR_MS }]), submitMs: arrival },
    ]);
    const run = (policy: "none" | "second") => {
      const starts: number[] = [];
      const result = runCompute(cluster, stream, {
        policy: "stock",
        killCost: NO_KILL_COST,
        checkInvariants: true,
        admission: { policy, lifetime: { defaultLifetimeMs: 2 * HOUR_MS } },
        observer: { onTaskStart: (e) => starts.push(e.nowMs - 7 * DAY_MS) },
      });
      return { result, starts };
    };

    // Without admission control the tasks start at 11:00, all eight are killed at 12:00 after an hour each (8
    // core-hours lost), and re-run from 14:00 to 16:00: 24 core-hours held, a third of them killed, a 5-hour job.
    const none = run("none");
    expect(none.starts).toEqual([...Array<number>(8).fill(11 * HOUR_MS), ...Array<number>(8).fill(14 * HOUR_MS)]);
    expect(none.result.taskKills).toBe(8);
    expect(none.result.wastedCoreHours).toBeCloseTo(8, 9);
    expect(none.result.secondaryCoreHours).toBeCloseTo(24, 9);
    expect(none.result.killedTaskHoursFraction).toBeCloseTo(1 / 3, 9);
    expect(none.result.avgJobTimeS).toBe(5 * 3600);

    // The second-moment policy must hold it: every step of its predicted 2 hours from 11:00 reaches into the peak. At
    // 12:05 the primaries' expected demand is 4 x 90 % x 8 = 28.8 cores with no variance (every day alike), so with the
    // job's 8 cores the expected demand is above C and Cantelli's bound is 1. It must admit it at 14:05, the first tick
    // whose window of time-of-day samples (the slot and one either side) no longer touches the peak: at 14:00 the
    // window still holds 13:55 (90 %), a standard deviation of 38.6 % a server, and the bound 0.32 > 0.1; from 14:05
    // to 16:05 the primaries expect 4 x 10 % x 8 = 3.2 cores with no variance, 11.2 cores in all, bound 0. Run after
    // the peak, no task is killed: it must kill fewer task-hours than none.
    const second = run("second");
    expect(second.starts).toEqual(Array<number>(8).fill(14 * HOUR_MS + 5 * MINUTE_MS));
    expect(second.result.taskKills).toBe(0);
    expect(second.result.killedTaskHoursFraction).toBe(0);
    expect(second.result.secondaryCoreHours).toBeCloseTo(16, 9);
    expect(second.result.avgAdmissionWaitS).toBe(3 * 3600 + 5 * 60);
    // The wait is part of the job's time: 11:00 to 16:05.
    expect(second.result.avgJobTimeS).toBe(5 * 3600 + 5 * 60);
    expect(second.result.jobsAdmitted).toBe(1);
    expect(second.result.wastedCoreHours).toBeLessThan(none.result.wastedCoreHours);
  });

  it("refuses a job that even the idle cluster cannot hold: counted, never queued, never run", () => {
    // Two 4-core servers with a 0.4-core reserve each: a pool of 7.2 cores. A 10-task job asks for 10 cores (capped at
    // the 7.2 of the pool); with all of the pool expected in use, Cantelli's bound is 1 even with idle primaries.
    const cluster = handCluster([{ pattern: "constant", servers: 2, cores: 4, pct: () => 0 }], DAY_MS, DAY_MS);
    const stream = jobStream([
      { shape: jobShape("wide", [{ name: "scan", tasks: 10, taskMs: 10 * MINUTE_MS }]), submitMs: DAY_MS },
      { shape: jobShape("narrow", [{ name: "scan", tasks: 2, taskMs: 10 * MINUTE_MS }]), submitMs: DAY_MS + 1 },
    ]);
    const r = runCompute(cluster, stream, {
      policy: "stock",
      killCost: NO_KILL_COST,
      checkInvariants: true,
      admission: { policy: "second" },
    });
    expect(r).toMatchObject({ jobsSubmitted: 2, jobsRejected: 1, jobsAdmitted: 1, jobsQueuedAtEnd: 0 });
    // Only the narrow job ran: its two tasks, at once (nothing queued in front of it).
    expect(r).toMatchObject({ jobs: 1, tasksRun: 2, avgAdmissionWaitS: 0, avgJobTimeS: 600 });
  });

  it("rejects admission options out of range, naming the field", () => {
    const cluster = handCluster([{ pattern: "constant", servers: 1, cores: 4, pct: () => 0 }], DAY_MS, DAY_MS);
    const stream = jobStream([]);
    const fieldOf = (admission: Parameters<typeof runCompute>[2]["admission"]): unknown => {
      try {
        runCompute(cluster, stream, { policy: "stock", ...(admission ? { admission } : {}) });
      } catch (err) {
        return isHarvestError(err, "INVALID_ARGUMENT") ? err.details["field"] : err;
      }
      return undefined;
    };
    expect(fieldOf({ policy: "second", secondThreshold: 1 })).toBe("admission.secondThreshold");
    expect(fieldOf({ policy: "first", tickMs: 0 })).toBe("admission.tickMs");
    expect(fieldOf({ policy: "first", lifetime: { defaultLifetimeMs: -1 } })).toBe(
      "admission.lifetime.defaultLifetimeMs",
    );
  });
});

describe("the admission experiment's thresholds", () => {
  it("writes the three tuned thresholds where the resource manager reads them", async () => {
    // An SLA of 99 % of the task-hours is met at both ends of every search, so each threshold is its range's upper
    // end: 4 for zeroth (it may oversubscribe), 1 for first, 0.999 for second.
    const out = join(tmp, "experiment");
    const outcome = await runAdmissionExperiment({
      sla: 0.99,
      servers: 6,
      days: 1,
      load: 0.3,
      iterations: 1,
      traces: "generated",
      out,
      command: "harvest sim admission --sla 99% --compare",
      clock: new ManualClock(Date.UTC(2025, 0, 2, 3, 4, 5)),
    });
    const path = join(out, "admission-thresholds.json");
    expect(outcome.files).toContain(path);
    const file = JSON.parse(readFileSync(path, "utf8")) as Record<string, unknown>;
    expect(Object.keys(file).sort()).toEqual(["admissionOptions", "sla", "tunedAt", "tunedBy"]);
    expect(file["sla"]).toBe(0.99);
    expect(file["tunedBy"]).toBe("harvest sim admission --sla 99% --compare");
    expect(file["tunedAt"]).toBe("2025-01-02T03:04:05.000Z");
    const thresholds = file["admissionOptions"] as Record<string, number>;
    expect(Object.keys(thresholds).sort()).toEqual(["firstThreshold", "secondThreshold", "zerothThreshold"]);
    expect(thresholds["zerothThreshold"]).toBe(4);
    expect(thresholds["firstThreshold"]).toBe(1);
    expect(thresholds["secondThreshold"]).toBeCloseTo(0.999, 12);
    // The resource manager's reader takes exactly these.
    expect(readAdmissionThresholds(path)).toEqual(thresholds);
    // Beside it, the report: markdown, CSV, JSON table and the plot.
    for (const name of ["admission.md", "admission.csv", "admission.json", "admission-utilization.svg"])
      expect(existsSync(join(out, name))).toBe(true);
    // Two runs of each search (both ends), the held-out run of each policy and none on both periods.
    expect(outcome.policies.map((p) => [p.policy, p.search.length, p.heldOut !== undefined])).toEqual([
      ["none", 0, true],
      ["zeroth", 2, true],
      ["first", 2, true],
      ["second", 2, true],
    ]);
  });

  it("leaves out a policy whose SLA no threshold met, so the resource manager keeps its default", () => {
    const file = thresholdsFile(
      [
        { policy: "none", threshold: undefined },
        { policy: "zeroth", threshold: 0.75 },
        { policy: "first", threshold: undefined },
        { policy: "second", threshold: 0.05 },
      ],
      0.02,
      "harvest sim admission --compare",
      0,
    );
    expect(file).toEqual({
      admissionOptions: { zerothThreshold: 0.75, secondThreshold: 0.05 },
      sla: 0.02,
      tunedBy: "harvest sim admission --compare",
      tunedAt: "1970-01-01T00:00:00.000Z",
    });
  });

  it("takes the SLA as a percentage or a share, and refuses --policy beside --compare", () => {
    const flags = {
      sla: "5%",
      servers: "80",
      days: "3",
      load: "1",
      utilization: "45",
      seed: "1",
      iterations: "5",
      traces: "real",
      out: tmp,
    };
    expect(admissionOptionsFromFlags(flags)).toMatchObject({ sla: 0.05, policies: ["second"] });
    expect(admissionOptionsFromFlags({ ...flags, sla: "0.01", compare: true })).toMatchObject({
      sla: 0.01,
      policies: ["zeroth", "first", "second"],
    });
    expect(() => admissionOptionsFromFlags({ ...flags, compare: true, policy: "first" })).toThrow("--policy");
  });
});
