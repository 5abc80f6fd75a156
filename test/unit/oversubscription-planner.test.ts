import { describe, expect, it } from "vitest";
import { detailsOf, HarvestError } from "../../common/errors.js";
import { DEFAULT_POWER_PROFILE_ID, resolvePowerProfile } from "../../common/power-profiles.js";
import type { PowerProfile } from "../../common/power-profiles.js";
import { generateDrawsHistory, parseDrawsCsv } from "../../resourcemanager/policy/draws-history.js";
import {
  planOversubscription,
  resolveOversubscriptionOptions,
} from "../../resourcemanager/policy/oversubscription-planner.js";
import type { OversubscriptionOptions } from "../../resourcemanager/policy/oversubscription-planner.js";

/** A server whose draw is linear in utilization: 100 W idle, 100 + 200 u W under load, 300 W at 100 %. */
const LINEAR: PowerProfile = {
  id: "linear-test",
  name: "linear test server",
  source: "test",
  idleWatts: 100,
  loadWatts: [120, 140, 160, 180, 200, 220, 240, 260, 280, 300],
};

/**
 * Two servers, one domain, ten 5-minute slots. Critical work holds 0.2 of each server throughout; non-critical work
 * varies. Draw of a slot = 2 x 100 + 200 x (0.4 + n_a + n_b).
 */
const SMALL = `time_s,server,critical_util,noncritical_util
0,a,0.2,0.6
0,b,0.2,0.6
300,a,0.2,0.6
300,b,0.2,0.2
600,a,0.2,0.1
600,b,0.2,0.6
900,a,20%,30%
900,b,20%,30%
1200,a,0.2,0.3
1200,b,0.2,0.3
1500,a,0.2,0.3
1500,b,0.2,0.2
1800,a,0.2,0.2
1800,b,0.2,0.2
2100,a,0.2,0.2
2100,b,0.2,0.2
2400,a,0.2,0.2
2400,b,0.2,0.2
2700,a,0.2,0.2
2700,b,0.2,0.2
`;

const SMALL_OPTIONS: Partial<OversubscriptionOptions> = {
  emaxCritical: 0.1,
  emaxNoncritical: 0.3,
  fminCritical: 0.9,
  fminNoncritical: 0.5,
  bufferShare: 0.1,
  dvfsExponent: 2,
};

function malformedLine(text: string): string | undefined {
  try {
    parseDrawsCsv(text, "h.csv");
  } catch (err) {
    expect(err).toBeInstanceOf(HarvestError);
    expect((err as HarvestError).code).toBe("TRACE_MALFORMED");
    return detailsOf(err as HarvestError, "TRACE_MALFORMED", "CONFIG_INVALID")?.line;
  }
  return undefined;
}

describe("the oversubscription planner (seeds/000 section III-E)", () => {
  it("returns the hand-checked budgets on a small history", () => {
    // Step 1. Critical: 20 rows x 0.2 = 4; non-critical: a sums to 3.0 and b to 3.0, so beta = 4 / (4 + 6) = 0.4.
    //   P95 per server (linear between ranks: rank 0.95 x 9 = 8.55 between the two largest values): critical 0.2;
    //   non-critical 0.6 for a (top two 0.6, 0.6) and for b (0.6, 0.6). Mean over servers: 0.2 and 0.6.
    //   util_critical = 0.2 / 0.4 = 0.5; util_noncritical = 0.6 / (1 - 0.4) = 1.0.
    // Step 2 (k = 2): critical cores at 50 %: 100 + 100 f^2 W; non-critical cores at 100 %: 100 + 200 f^2 W.
    //   Per-container, per domain (2 servers):
    //     non-critical to 0.5: 2 x 0.6 x 200 x (1 - 0.25) = 180 W;  critical to 0.9: 2 x 0.4 x 100 x (1 - 0.81) = 15.2 W.
    //   Full-server, all cores to max(0.9, 0.5) = 0.9: 2 x (0.4 x 100 + 0.6 x 200) x 0.19 = 60.8 W.
    // Step 3. Draws 200 + 200 x (0.4 + n_a + n_b): 520 440 420 400 400 380 360 360 360 360 (N = 10).
    // Step 4, per-container: at most floor(0.3 x 10) = 3 events and floor(0.1 x 10) = 1 critical event.
    //   event rate: budget >= 4th draw = 400;  critical events: budget >= 2nd draw - 180 = 260;
    //   reduction: budget >= 520 - 180 - 15.2 = 324.8.  -> 400 W, bound by the event rate; events 520, 440, 420
    //   (excesses 120, 40, 20 <= 180: none critical).
    // Step 4, full-server: at most floor(min(0.1, 0.3) x 10) = 1 event.
    //   event rate: budget >= 2nd draw = 440;  reduction: budget >= 520 - 60.8 = 459.2.  -> 459.2 W, bound by the
    //   reduction; one event (520).
    // Step 5: x 1.1 -> per-container 440 W, full-server 505.12 W; traditional 2 x 300 = 600 W.
    //   Oversubscription (Table IV's budget delta): (600 - 440) / 600 = 26.67 %; (600 - 505.12) / 600 = 15.81 %.
    //   Per-container below full-server: (505.12 - 440) / 505.12 = 12.89 %.
    const plan = planOversubscription(parseDrawsCsv(SMALL, "small.csv"), LINEAR, SMALL_OPTIONS);

    expect(plan.history.criticalShare).toBeCloseTo(0.4, 12);
    expect(plan.history.criticalUtil).toBeCloseTo(0.5, 12);
    expect(plan.history.noncriticalUtil).toBeCloseTo(1, 12);
    expect(plan.history.readings).toBe(10);
    expect(plan.history.slotSec).toBe(300);
    expect(plan.history.maxReadingWatts).toBeCloseTo(520, 9);
    expect(plan.traditionalWatts).toBe(600);

    const pc = plan.perContainer;
    expect(pc.noncriticalReductionWatts).toBeCloseTo(180, 9);
    expect(pc.maxReductionWatts).toBeCloseTo(195.2, 9);
    expect(pc.bounds.eventRateWatts).toBeCloseTo(400, 9);
    expect(pc.bounds.criticalEventRateWatts).toBeCloseTo(260, 9);
    expect(pc.bounds.powerReductionWatts).toBeCloseTo(324.8, 9);
    expect(pc.minBudgetWatts).toBeCloseTo(400, 9);
    expect(pc.binding).toBe("event-rate");
    expect(pc.eventsAtMinBudget).toBe(3);
    expect(pc.criticalEventsAtMinBudget).toBe(0);
    expect(pc.budgetWatts).toBeCloseTo(440, 9);
    expect(pc.budgetWattsPerServer).toBeCloseTo(220, 9);
    expect(pc.eventsAtBudget).toBe(1);
    expect(pc.oversubscriptionPct).toBeCloseTo(26.6667, 3);

    const fs = plan.fullServer;
    expect(fs.maxReductionWatts).toBeCloseTo(60.8, 9);
    expect(fs.bounds.eventRateWatts).toBeCloseTo(440, 9);
    expect(fs.minBudgetWatts).toBeCloseTo(459.2, 9);
    expect(fs.binding).toBe("power-reduction");
    expect(fs.eventsAtMinBudget).toBe(1);
    expect(fs.budgetWatts).toBeCloseTo(505.12, 9);
    expect(fs.oversubscriptionPct).toBeCloseTo(15.8133, 3);

    expect(plan.perContainerBelowFullServerPct).toBeCloseTo(12.892, 2);
  });

  it("leaves full-server capping no room when critical work may not be throttled at all", () => {
    // seeds/000 Table IV row 3 ("no UF impact"): emax_UF = 0, fmin_UF = 100 %. Full-server capping then may cap no
    // reading: its budget is the highest draw, 520 W (572 W with the buffer). Per-container capping still bounds at
    // the event rate: 400 W (non-critical throttling alone absorbs every excess: 520 - 400 = 120 <= 180).
    const plan = planOversubscription(parseDrawsCsv(SMALL), LINEAR, {
      ...SMALL_OPTIONS,
      emaxCritical: 0,
      fminCritical: 1,
    });
    expect(plan.fullServer.minBudgetWatts).toBeCloseTo(520, 9);
    expect(plan.fullServer.eventsAtMinBudget).toBe(0);
    expect(plan.fullServer.budgetWatts).toBeCloseTo(572, 9);
    expect(plan.perContainer.minBudgetWatts).toBeCloseTo(400, 9);
    expect(plan.perContainer.criticalEventsAtMinBudget).toBe(0);
  });

  it("binds on the critical event rate when non-critical throttling cannot absorb the peaks", () => {
    // Non-critical floor 0.9: it sheds 2 x 0.6 x 200 x 0.19 = 45.6 W. With every reading allowed to be an event
    // (emax_NUF = 100 %), the bounds are: critical events (<= 1): 440 - 45.6 = 394.4; reduction: 520 - 45.6 - 15.2 =
    // 459.2. The reduction binds: 459.2 W, with 1 critical event (520 - 459.2 = 60.8 > 45.6).
    const plan = planOversubscription(parseDrawsCsv(SMALL), LINEAR, {
      ...SMALL_OPTIONS,
      emaxNoncritical: 1,
      fminNoncritical: 0.9,
    });
    expect(plan.perContainer.bounds.eventRateWatts).toBeNull();
    expect(plan.perContainer.minBudgetWatts).toBeCloseTo(459.2, 9);
    expect(plan.perContainer.binding).toBe("power-reduction");
    expect(plan.perContainer.criticalEventsAtMinBudget).toBe(1);
    // With no critical event allowed (emax_UF = 0), every excess must fit in the 45.6 W non-critical throttling can
    // shed: 520 - 45.6 = 474.4 W, above the reduction bound (459.2 W); the critical event rate binds.
    const strict = planOversubscription(parseDrawsCsv(SMALL), LINEAR, {
      ...SMALL_OPTIONS,
      emaxNoncritical: 1,
      fminNoncritical: 0.9,
      emaxCritical: 0,
    });
    expect(strict.perContainer.minBudgetWatts).toBeCloseTo(474.4, 9);
    expect(strict.perContainer.binding).toBe("critical-event-rate");
    expect(strict.perContainer.criticalEventsAtMinBudget).toBe(0);
    expect(strict.perContainer.eventsAtMinBudget).toBe(1);
  });

  it("uses measured draws from a watts column and the profile only for the curves", () => {
    const text = "time_s,server,critical_util,noncritical_util,watts\n0,a,0.5,0.5,250\n300,a,0.5,0,210\n";
    const plan = planOversubscription(parseDrawsCsv(text), LINEAR, { emaxNoncritical: 0.5, emaxCritical: 0 });
    expect(plan.history.measured).toBe(true);
    expect(plan.history.maxReadingWatts).toBe(250);
    expect(plan.perContainer.bounds.eventRateWatts).toBe(210);
  });

  const history = parseDrawsCsv(generateDrawsHistory({ servers: 24, days: 7, seed: 7, serversPerDomain: 12 }));
  const profile = resolvePowerProfile(DEFAULT_POWER_PROFILE_ID);

  it("never raises the budget when the event limits loosen", () => {
    let previous = Infinity;
    for (const emax of [0, 0.001, 0.005, 0.01, 0.05, 0.2]) {
      const p = planOversubscription(history, profile, { emaxNoncritical: emax, emaxCritical: emax / 10 });
      expect(p.perContainer.minBudgetWatts).toBeLessThanOrEqual(previous + 1e-9);
      previous = p.perContainer.minBudgetWatts;
    }
    previous = Infinity;
    for (const fmin of [1, 0.9, 0.75, 0.5, 0.3]) {
      const p = planOversubscription(history, profile, { fminNoncritical: fmin, fminCritical: Math.max(fmin, 0.75) });
      expect(p.perContainer.minBudgetWatts).toBeLessThanOrEqual(previous + 1e-9);
      previous = p.perContainer.minBudgetWatts;
    }
  });

  it("raises the budget with the buffer, up to traditional provisioning", () => {
    let previous = 0;
    for (const buffer of [0, 0.05, 0.1, 0.2, 0.5, 1]) {
      const p = planOversubscription(history, profile, { bufferShare: buffer });
      expect(p.perContainer.budgetWatts).toBeGreaterThanOrEqual(previous);
      expect(p.perContainer.budgetWatts).toBeLessThanOrEqual(p.traditionalWatts);
      expect(p.perContainer.budgetWatts).toBeCloseTo(
        Math.min(p.perContainer.minBudgetWatts * (1 + buffer), p.traditionalWatts),
        9,
      );
      previous = p.perContainer.budgetWatts;
    }
  });

  it("lets per-container capping oversubscribe at least as much as full-server capping", () => {
    for (const seed of [1, 2, 3]) {
      const h = parseDrawsCsv(generateDrawsHistory({ servers: 12, days: 5, seed }));
      for (const o of [
        {},
        { emaxCritical: 0, fminCritical: 1 },
        { emaxCritical: 0.01, emaxNoncritical: 0.05, fminNoncritical: 0.3 },
      ]) {
        const p = planOversubscription(h, profile, o);
        expect(p.perContainer.budgetWatts).toBeLessThanOrEqual(p.fullServer.budgetWatts + 1e-9);
        expect(p.perContainer.oversubscriptionPct).toBeGreaterThanOrEqual(p.fullServer.oversubscriptionPct - 1e-9);
        // The events at the step-4 budget respect the limits they were chosen under.
        expect(p.perContainer.eventsAtMinBudget).toBeLessThanOrEqual(p.perContainer.maxEvents);
        expect(p.perContainer.criticalEventsAtMinBudget).toBeLessThanOrEqual(p.perContainer.maxCriticalEvents);
        expect(p.fullServer.eventsAtMinBudget).toBeLessThanOrEqual(p.fullServer.maxEvents);
      }
    }
  });

  it("rejects a malformed or truncated history with the line", () => {
    const lines = SMALL.trimEnd().split("\n");
    // The last row cut mid-way.
    expect(malformedLine([...lines.slice(0, -1), "2700,b,0.2"].join("\n"))).toBe("21");
    // The last row missing altogether: the final slot lacks server b.
    expect(malformedLine(lines.slice(0, -1).join("\n") + "\n")).toBe("20");
    // Out of range, not a number, over the whole server, time going back, a duplicate row, an unknown column.
    expect(malformedLine(SMALL.replace("300,b,0.2,0.2", "300,b,1.5,0"))).toBe("5");
    expect(malformedLine(SMALL.replace("300,b,0.2,0.2", "300,b,x,0"))).toBe("5");
    expect(malformedLine(SMALL.replace("300,b,0.2,0.2", "300,b,0.6,0.6"))).toBe("5");
    expect(malformedLine(SMALL.replace("600,a,0.2,0.1", "200,a,0.2,0.1"))).toBe("6");
    expect(malformedLine(SMALL.replace("300,b,0.2,0.2", "300,a,0.2,0.2"))).toBe("5");
    expect(malformedLine(SMALL.replace("noncritical_util", "noncritical_util,cores"))).toBe("1");
    expect(malformedLine("time_s,server,critical_util\n0,a,0.1\n")).toBe("1");
    expect(malformedLine("time_s,server,critical_util,noncritical_util\n")).toBeDefined();
    expect(malformedLine("")).toBeDefined();
    // A server that changes domain; domains of different sizes.
    expect(malformedLine("time_s,domain,server,critical_util,noncritical_util\n0,d1,a,0,0\n300,d2,a,0,0\n")).toBe("3");
    expect(
      malformedLine("time_s,domain,server,critical_util,noncritical_util\n0,d1,a,0,0\n0,d1,b,0,0\n0,d2,c,0,0\n"),
    ).toBeDefined();
  });

  it("rejects options out of range, naming the option", () => {
    const bad: [Partial<OversubscriptionOptions>, string][] = [
      [{ emaxCritical: -0.1 }, "emaxCritical"],
      [{ emaxNoncritical: 1.5 }, "emaxNoncritical"],
      [{ fminCritical: 0 }, "fminCritical"],
      [{ fminNoncritical: 1.2 }, "fminNoncritical"],
      [{ bufferShare: Number.NaN }, "bufferShare"],
      [{ dvfsExponent: 0 }, "dvfsExponent"],
    ];
    for (const [o, field] of bad) {
      expect(() => resolveOversubscriptionOptions(o)).toThrow(HarvestError);
      try {
        resolveOversubscriptionOptions(o, { fminCritical: "--fmin-critical" });
      } catch (err) {
        expect((err as HarvestError).code).toBe("INVALID_ARGUMENT");
        expect(detailsOf(err as HarvestError, "INVALID_ARGUMENT", "CONFIG_INVALID")?.field).toBe(
          field === "fminCritical" ? "--fmin-critical" : field,
        );
      }
    }
  });

  it("generates the same history for the same seed, and a complete, plannable one", () => {
    const a = generateDrawsHistory({ servers: 6, days: 1, seed: 42 });
    expect(generateDrawsHistory({ servers: 6, days: 1, seed: 42 })).toBe(a);
    expect(generateDrawsHistory({ servers: 6, days: 1, seed: 43 })).not.toBe(a);
    const h = parseDrawsCsv(a);
    expect(h.timesS).toHaveLength(288);
    expect(h.samples).toHaveLength(288 * 6);
    expect(h.domains).toHaveLength(1);
    const big = planOversubscription(history, profile);
    expect(big.history.domains).toBe(2);
    expect(big.history.criticalShare).toBeGreaterThan(0.25);
    expect(big.history.criticalShare).toBeLessThan(0.55);
    expect(big.perContainer.oversubscriptionPct).toBeGreaterThan(0);
    expect(() => generateDrawsHistory({ servers: 10, days: 1, seed: 1, serversPerDomain: 3 })).toThrow(HarvestError);
  });
});
