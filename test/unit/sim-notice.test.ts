/** The preemption notice and the ramping primary in the compute simulator, and the notice experiment. */
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { noticeOptionsFromFlags } from "../../cli/sim-notice-command.js";
import { isHarvestError } from "../../common/errors.js";
import { generateCluster } from "../../sim/cluster-gen.js";
import { DEFAULT_KILL_COST, runCompute } from "../../sim/compute.js";
import type { ComputeOptions, ComputeRunResult } from "../../sim/compute.js";
import { runNoticeExperiment } from "../../sim/experiments/notice/notice-experiment.js";
import { generateJobStream } from "../../sim/jobs.js";
import { replayPrimarySlot } from "../../sim/roles/server.js";

const tmp = mkdtempSync(join(tmpdir(), "harvest-sim-notice-"));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));

const cluster = generateCluster({ servers: 16, historyDays: 3, days: 1, seed: 7, meanPct: 55 });
const stream = generateJobStream(cluster, { seed: 7, load: 0.9 });

/** A run's figures without its wall-clock ones. */
function figures(r: ComputeRunResult): Omit<ComputeRunResult, "wallMs" | "eventsPerSec"> {
  const { wallMs: _wall, eventsPerSec: _rate, ...rest } = r;
  return rest;
}

describe("the ramping primary", () => {
  it("moves each server's primary in a straight line from one sample to the next", () => {
    const c = generateCluster({ servers: 4, historyDays: 1, days: 1, seed: 3, meanPct: 50 });
    const cap = c.servers.map((s) => s.cores * 1000);
    const at = (k: number, fraction: number): number[] => {
      const primary = new Array<number>(c.servers.length).fill(-1);
      replayPrimarySlot(c, k, true, cap, primary, (s, p) => (primary[s] = p), fraction);
      return primary;
    };
    const k = 10;
    const [from, to, half] = [at(k, 0), at(k + 1, 0), at(k, 0.5)];
    for (let s = 0; s < c.servers.length; s++)
      expect(Math.abs(half[s]! - (from[s]! + to[s]!) / 2)).toBeLessThanOrEqual(1);
    expect(from).not.toEqual(to);
  });
});

describe("the preemption notice in the compute simulator", () => {
  it("with the notice off, or on with no margin, decides exactly as a run without the option", () => {
    for (const policy of ["stock", "history"] as const) {
      const base: ComputeOptions = { policy, seed: 3 };
      const stock = figures(runCompute(cluster, stream, base));
      expect(stock.taskKills).toBeGreaterThan(0);
      expect(stock.noticesSent).toBe(0);
      expect(figures(runCompute(cluster, stream, { ...base, preemptionNotice: "off", primaryShape: "step" }))).toEqual(
        stock,
      );
      expect(
        figures(runCompute(cluster, stream, { ...base, preemptionNotice: "notice", noticeMarginFraction: 0 })),
      ).toEqual(stock);
    }
  });

  it("on a ramping primary warns job managers, whose next tasks go to other servers for the hold", () => {
    const holdMs = 120_000;
    const notices: { job: number; server: number; nowMs: number }[] = [];
    const starts = new Map<number, { server: number; nowMs: number }[]>();
    const result = runCompute(cluster, stream, {
      policy: "stock",
      seed: 3,
      primaryShape: "ramp",
      preemptionNotice: "notice",
      noticeAvoidMs: holdMs,
      // No job-manager containers: a restarted job manager would start with an empty list.
      killCost: { ...DEFAULT_KILL_COST, jobManagerMilli: 0 },
      checkInvariants: true,
      observer: {
        onNotice: (e) => notices.push({ job: e.job.id, server: e.server, nowMs: e.nowMs }),
        onTaskStart: (e) => {
          const list = starts.get(e.job.id) ?? [];
          list.push({ server: e.server, nowMs: e.nowMs });
          starts.set(e.job.id, list);
        },
      },
    });
    expect(result.noticesSent).toBeGreaterThan(0);
    expect(notices.length).toBeGreaterThan(0);
    expect(result.noticedKilled).toBeLessThanOrEqual(result.noticesSent);
    // The list reaches the scheduler with the job manager's next allocate call after the notice.
    const sentAfterMs = DEFAULT_KILL_COST.amHeartbeatMs;
    let movedElsewhere = 0;
    for (const n of notices) {
      for (const start of starts.get(n.job) ?? []) {
        if (start.nowMs < n.nowMs + sentAfterMs || start.nowMs >= n.nowMs + holdMs) continue;
        expect(start.server).not.toBe(n.server);
        movedElsewhere++;
      }
    }
    expect(movedElsewhere).toBeGreaterThan(0);
  });

  it("refuses an unknown notice setting or primary shape, naming the option", () => {
    for (const [field, options] of [
      ["preemptionNotice", { preemptionNotice: "loud" as never }],
      ["primaryShape", { primaryShape: "sine" as never }],
      ["noticeMarginFraction", { noticeMarginFraction: 1.5 }],
    ] as const) {
      let err: unknown;
      try {
        runCompute(cluster, stream, { policy: "stock", ...options });
      } catch (e) {
        err = e;
      }
      expect(isHarvestError(err, "INVALID_ARGUMENT") && err.details.field).toBe(field);
    }
  });
});

describe("the notice experiment", () => {
  it("puts the notice off and on side by side per placement and primary shape and writes its report", async () => {
    const out = join(tmp, "notice");
    const outcome = await runNoticeExperiment({
      ...noticeOptionsFromFlags({
        servers: "10",
        days: "2",
        seeds: "1",
        load: "0.8",
        utilization: "55",
        reference: "65",
        policy: "stock",
        shape: "step,ramp",
        rampStepMs: "60000",
        traces: "generated",
        out,
      }),
    });
    expect(outcome.runs.map((r) => `${r.policy} ${r.shape} ${r.notice}`)).toEqual([
      "stock step off",
      "stock step notice",
      "stock ramp off",
      "stock ramp notice",
    ]);
    for (const r of outcome.runs) expect(r.result.noticesSent > 0).toBe(r.notice === "notice");
    for (const f of ["notice.md", "notice.csv", "notice.json"]) expect(existsSync(join(out, f))).toBe(true);
    const md = readFileSync(join(out, "notice.md"), "utf8");
    expect(md).toContain("notices sent");
    const json = JSON.parse(readFileSync(join(out, "notice.json"), "utf8")) as { cells: unknown[] };
    expect(json.cells).toHaveLength(4);
  });
});
