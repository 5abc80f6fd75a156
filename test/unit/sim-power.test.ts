/** The power simulator: capping modes and placements on a small generated cluster, its report and its experiment. */
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { isHarvestError } from "../../common/errors.js";
import { resolveCappingOptions } from "../../nodemanager/policy/capping-controller.js";
import { generateCluster } from "../../sim/cluster-gen.js";
import { planPowerBudgets, powerLayout, resolvePowerOptions, runPower } from "../../sim/experiments/power/index.js";
import type { PowerOptions, PowerPeriodEvent, PowerResult } from "../../sim/experiments/power/index.js";
import {
  POWER_CSV_HEADER,
  renderPowerReport,
  resolvePowerExperimentOptions,
  runPowerExperiment,
} from "../../sim/experiments/power/index.js";
import type { PowerExperimentOptions } from "../../sim/experiments/power/index.js";

/** One rack of 3 chassis of 12 servers, half a day of experiment after 30 days of history. */
const cluster = generateCluster({ servers: 36, days: 0.5, seed: 7, level: "medium", serversPerRack: 36 });
/** 20 % below nameplate: tight enough that both capping modes act many times in half a day. */
const base: PowerOptions = { planDays: 2, budgetFraction: 0.8 };
const budgets = planPowerBudgets(cluster, base);
const PERIOD_MS = 1000;

/** The longest run of consecutive control periods in which a domain was over budget although capping could reach it. */
class ReachableOverBudget {
  private readonly since = new Map<string, number>();
  longestMs = 0;
  /** Control periods that began over budget. */
  overPeriods = 0;

  add(e: PowerPeriodEvent): void {
    if (e.drawWatts > e.budgetWatts) this.overPeriods++;
    if (e.drawWatts > e.budgetWatts && !e.beyondReach) {
      const start = this.since.get(e.domain) ?? e.nowMs;
      this.since.set(e.domain, start);
      this.longestMs = Math.max(this.longestMs, e.nowMs - start + PERIOD_MS);
    } else this.since.delete(e.domain);
  }
}

const results = new Map<string, PowerResult>();
/** Runs a configuration (the invariant checks on unless told otherwise), tracking its over-budget streaks. */
function run(capping: "full-server" | "per-container", placement: "stock" | "power-aware", checkInvariants = true) {
  const key = `${capping}/${placement}`;
  const periods = new ReachableOverBudget();
  const result = runPower(cluster, {
    ...base,
    capping,
    placement,
    budgets,
    controlPeriodMs: PERIOD_MS,
    checkInvariants,
    observer: { onControlPeriod: (e) => periods.add(e) },
  });
  results.set(key, result);
  return { result, periods };
}

/** The two capping modes under the stock placement, run once (by the first test) for every test. */
let perContainer: ReturnType<typeof run>;
let fullServer: ReturnType<typeof run>;

const withoutTiming = (r: PowerResult) => ({ ...r, wallMs: 0, eventsPerSec: 0 });

describe("the power simulator", () => {
  it("keeps its books after every event under both capping modes (secondary within what the primary leaves, draws current)", () => {
    // checkInvariants throws INTERNAL naming the broken invariant.
    perContainer = run("per-container", "stock");
    fullServer = run("full-server", "stock");
    expect(perContainer.result.events).toBeGreaterThan(0);
    expect(fullServer.result.events).toBeGreaterThan(0);
  });

  it("lays racks out in chassis of 12 servers, each with the rack's hardware profile", () => {
    const o = resolvePowerOptions(cluster, base);
    const { domains } = powerLayout(cluster, o);
    expect(domains.map((d) => d.id)).toEqual(["r000/c0", "r000/c1", "r000/c2"]);
    expect(domains.every((d) => d.servers.length === 12)).toBe(true);
    expect(perContainer.result.domains).toBe(3);
  });

  it("prints the same figures for the same seed", () => {
    const again = runPower(cluster, { ...base, capping: "per-container", placement: "stock", budgets });
    expect(withoutTiming(again)).toEqual(withoutTiming(perContainer.result));
    const aware = run("per-container", "power-aware", false).result;
    const awareAgain = runPower(cluster, { ...base, capping: "per-container", placement: "power-aware", budgets });
    expect(withoutTiming(awareAgain)).toEqual(withoutTiming(aware));
  });

  it("never throttles the primary under per-container capping, while full-server capping slows it when it caps", () => {
    expect(perContainer.result.serverCaps).toBeGreaterThan(0);
    expect(perContainer.result.noncriticalThrottledCoreHours).toBeGreaterThan(0);
    expect(perContainer.result.criticalThrottledCoreHours).toBe(0);
    expect(perContainer.result.userFacingThrottledCoreHours).toBe(0);

    expect(fullServer.result.serverCaps).toBeGreaterThan(0);
    expect(fullServer.result.criticalThrottledCoreHours).toBeGreaterThan(0);
    // Full-server capping kills nothing: it slows every core instead.
    expect(fullServer.result.cappingKills).toBe(0);
  });

  it("brings every domain back under budget within the controller's settling time unless no capping could", () => {
    const capping = resolveCappingOptions({});
    // Every container drops to its floor at once; kills start after the deadline, a step per interval, at most 8
    // tasks of 2 cores per 16-core server; one period more for the effect to show.
    const settleMs = capping.killDeadlineMs + 4 * capping.killIntervalMs + 2 * PERIOD_MS;
    expect(perContainer.periods.overPeriods).toBeGreaterThan(0);
    expect(perContainer.periods.longestMs).toBeLessThanOrEqual(settleMs);
    expect(perContainer.result.maxReachableOverBudgetS * 1000).toBeLessThanOrEqual(settleMs);
    // The RAPL-like cap solves for the frequency that fits: under budget from the period after it engaged.
    expect(fullServer.periods.overPeriods).toBeGreaterThan(0);
    expect(fullServer.periods.longestMs).toBeLessThanOrEqual(PERIOD_MS);
    expect(fullServer.result.maxReachableOverBudgetS * 1000).toBeLessThanOrEqual(PERIOD_MS);
    expect(fullServer.result.beyondReachDomainHours).toBe(0);
  });

  it("enforces the budget fraction of nameplate, and plans per-container oversubscription at least as deep as full-server", () => {
    expect(perContainer.result.budgetWatts).toBeCloseTo(0.8 * perContainer.result.nameplateWatts, 6);
    expect(perContainer.result.oversubscription.enforcedPct).toBeCloseTo(20, 6);
    const planned = planPowerBudgets(cluster, { planDays: 2 });
    expect(planned.source).toBe("plan");
    const plan = planned.plans[0]!;
    expect(plan.serversPerDomain).toBe(12);
    expect(plan.plan.perContainer.budgetWatts).toBeLessThanOrEqual(plan.plan.fullServer.budgetWatts);
    const perServer = planned.perServerWatts[plan.profileId]!;
    // The enforced budget is the planner's step-4 budget (no buffer by default), per server.
    expect(perServer).toBeCloseTo(plan.plan.perContainer.minBudgetWatts / 12, 6);
  });

  it("rejects options out of range, naming the field", () => {
    const field = (o: PowerOptions): string | undefined => {
      try {
        resolvePowerOptions(cluster, o);
        return undefined;
      } catch (err) {
        return isHarvestError(err, "INVALID_ARGUMENT") ? err.details["field"] : "wrong error";
      }
    };
    expect(field({ budgetFraction: 1.5 })).toBe("budgetFraction");
    expect(field({ planDays: 45 })).toBe("planDays");
    expect(field({ taskCores: 64 })).toBe("taskCores");
    expect(field({ controlPeriodMs: 5 })).toBe("controlPeriodMs");
    expect(field({ profiles: ["no-such-server"] })).toBe("profiles");
    expect(field({ capping: "rapl" as never })).toBe("capping");
  });

  it("renders a report with its tables, CSV and plots, byte for byte the same for the same results", () => {
    run("full-server", "power-aware", false);
    const all = [...results.values()];
    const report = renderPowerReport(all, { command: "harvest sim power --compare" });
    expect(report.name).toBe("power");
    expect(report.markdown).toContain("harvest sim power --compare");
    expect(report.summary).toContain("| utilization | capping       | placement   |");
    expect(report.csv.split("\n")[0]).toBe(POWER_CSV_HEADER.join(","));
    expect(report.csv.trim().split("\n")).toHaveLength(1 + all.length);
    expect(report.plots.map((p) => p.suffix)).toEqual(["throttled", "over-budget", "capping-events", "kills"]);
    for (const p of report.plots) expect(p.svg.startsWith("<svg")).toBe(true);
    expect(renderPowerReport(all, { command: "harvest sim power --compare" })).toEqual(report);
  });
});

describe("the power experiment", () => {
  const out = mkdtempSync(join(tmpdir(), "harvest-sim-power-"));
  afterAll(() => rmSync(out, { recursive: true, force: true }));

  it("runs every capping mode with every placement on one cluster and budget, and writes the report", async () => {
    const events: string[] = [];
    const outcome = await runPowerExperiment({
      servers: 24,
      days: 1,
      seed: 3,
      out,
      power: { planDays: 1, budgetFraction: 0.95 },
      onProgress: (e) => events.push(e.kind),
    });
    expect(outcome.results.map((r) => `${r.capping}/${r.placement}`)).toEqual([
      "full-server/stock",
      "full-server/power-aware",
      "per-container/stock",
      "per-container/power-aware",
    ]);
    expect(new Set(outcome.results.map((r) => r.budgetWatts)).size).toBe(1);
    expect(events.filter((k) => k === "done")).toHaveLength(5);
    for (const f of outcome.files) expect(existsSync(f)).toBe(true);
    expect(outcome.files.map((f) => f.slice(out.length + 1))).toEqual([
      "power.md",
      "power.csv",
      "power-throttled.svg",
      "power-over-budget.svg",
      "power-capping-events.svg",
      "power-kills.svg",
    ]);
  });
});

describe("the power experiment's options", () => {
  it("rejects a bad seed, trace source, count or list with INVALID_ARGUMENT naming the field and the value", () => {
    const rejection = (o: PowerExperimentOptions): string => {
      try {
        resolvePowerExperimentOptions(o);
        return "accepted";
      } catch (err) {
        return isHarvestError(err, "INVALID_ARGUMENT") ? `${err.details["field"]}: ${err.message}` : "wrong error";
      }
    };
    expect(rejection({ seed: -1 })).toBe("seed: experiment option seed must be an integer in 0..4294967295 (got -1)");
    expect(rejection({ traces: "recorded" as never })).toBe(
      'traces: experiment option traces must be "generated" or "real" (got recorded)',
    );
    expect(rejection({ servers: 0 })).toBe("servers: experiment option servers must be a positive integer (got 0)");
    expect(rejection({ cappings: [] })).toBe("cappings: experiment option cappings must name at least one value");
    expect(rejection({ placements: ["random" as never] })).toBe(
      'placements: experiment option placements has "random"; use stock, power-aware',
    );
  });
});
