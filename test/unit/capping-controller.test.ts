import { describe, expect, it } from "vitest";
import { isHarvestError } from "../../common/errors.js";
import { SeededRng } from "../../common/rng.js";
import type { CappingContainer, CappingDecision, CappingInput } from "../../nodemanager/policy/capping-controller.js";
import { CappingController, resolveCappingOptions } from "../../nodemanager/policy/capping-controller.js";

function container(
  containerId: string,
  allocationMilli: number,
  startedMs: number,
  extra: Partial<CappingContainer> = {},
): CappingContainer {
  return { containerId, allocationMilli, startedMs, isAm: false, criticality: 0, ...extra };
}

function input(
  nowMs: number,
  drawWatts: number | undefined,
  containers: readonly CappingContainer[],
  ...budget: [budgetWatts: number | undefined] | []
): CappingInput {
  // The budget defaults to 200 W; an explicit undefined means no budget in force.
  return { nowMs, drawWatts, budgetWatts: budget.length === 0 ? 200 : budget[0], containers };
}

function limits(d: CappingDecision): Record<string, number> {
  return Object.fromEntries(d.limitsMilli);
}

/**
 * A small plant: the server draws idle + primary + wattsPerMilli x what the secondary containers run, each running
 * at min(its demand, its quota). The meter reads the draw of the quotas in force during the last period, i.e. the
 * previous decision, like a real meter polled after the period.
 */
class Plant {
  constructor(
    readonly idleWatts: number,
    readonly wattsPerMilli: number,
    readonly demandMilli: ReadonlyMap<string, number>,
  ) {}
  drawWatts(containers: readonly CappingContainer[], d: CappingDecision | undefined, primaryWatts = 0): number {
    let running = 0;
    for (const c of containers) {
      const quota = d?.limitsMilli.get(c.containerId) ?? c.allocationMilli;
      running += Math.min(this.demandMilli.get(c.containerId) ?? c.allocationMilli, quota);
    }
    return this.idleWatts + primaryWatts + this.wattsPerMilli * running;
  }
}

describe("resolveCappingOptions", () => {
  it("fills the documented defaults", () => {
    expect(resolveCappingOptions()).toEqual({
      capFraction: 1,
      targetFraction: 0.95,
      uncapFraction: 0.9,
      quietMs: 30_000,
      floorFraction: 0.1,
      floorMinMilli: 50,
      stepMs: 200,
      containersPerStep: 2,
      stepFraction: 0.25,
      killDeadlineMs: 2_000,
      killIntervalMs: 1_000,
      staleAfterPeriods: 3,
    });
  });

  it("rejects thresholds out of order, naming the field", () => {
    const codeAndField = (o: Parameters<typeof resolveCappingOptions>[0]): string[] => {
      try {
        resolveCappingOptions(o);
        return [];
      } catch (err) {
        if (!isHarvestError(err, "CONFIG_INVALID")) throw err;
        return [err.code, err.details.field ?? "", err.message];
      }
    };
    expect(codeAndField({ uncapFraction: 0.96 }).slice(0, 2)).toEqual(["CONFIG_INVALID", "uncapFraction"]);
    expect(codeAndField({ targetFraction: 1.0 }).slice(0, 2)).toEqual(["CONFIG_INVALID", "targetFraction"]);
    expect(codeAndField({ uncapFraction: 0 }).slice(0, 2)).toEqual(["CONFIG_INVALID", "uncapFraction"]);
    expect(codeAndField({ containersPerStep: 1.5 }).slice(0, 2)).toEqual(["CONFIG_INVALID", "containersPerStep"]);
    expect(codeAndField({ stepFraction: 0 }).slice(0, 2)).toEqual(["CONFIG_INVALID", "stepFraction"]);
    expect(codeAndField({ staleAfterPeriods: 0 }).slice(0, 2)).toEqual(["CONFIG_INVALID", "staleAfterPeriods"]);
    expect(codeAndField({ quietMs: Number.NaN }).slice(0, 2)).toEqual(["CONFIG_INVALID", "quietMs"]);
    expect(codeAndField({ targetFraction: 1.0 })[2]).toMatch(/capping option targetFraction must be < capFraction/);
  });
});

describe("CappingController", () => {
  const cs = [container("a", 1000, 10), container("b", 2000, 20), container("tiny", 300, 30)];

  it("stays uncapped while the draw is at or under the budget", () => {
    const ctl = new CappingController();
    for (const draw of [150, 190, 199.9, 200]) {
      const d = ctl.tick(input(0, draw, cs));
      expect(d.state).toBe("uncapped");
      expect(d.limitsMilli.size).toBe(0);
      expect(d.kills).toEqual([]);
    }
  });

  it("drops every secondary container to its floor at once when the draw goes over the cap", () => {
    const ctl = new CappingController();
    const d = ctl.tick(input(0, 210, cs));
    expect(d.state).toBe("capped");
    // 10 % of the allocation, at least 50 milli-cores.
    expect(limits(d)).toEqual({ a: 100, b: 200, tiny: 50 });
    expect(d.kills).toEqual([]);
    expect(d.reason).toMatch(/capped: draw 210\.0 W > cap 200\.0 W/);
    expect(ctl.stats()).toMatchObject({ caps: 1, floorDrops: 1, kills: 0 });
  });

  it("leaves a container already at or under the smallest floor unthrottled", () => {
    const ctl = new CappingController();
    const d = ctl.tick(input(0, 250, [container("small", 40, 1), container("big", 1000, 2)]));
    expect(limits(d)).toEqual({ big: 100 });
  });

  it("raises a few containers per step while under the target, most critical first, then oldest first", () => {
    const ctl = new CappingController({ containersPerStep: 2, stepFraction: 0.25 });
    const set = [
      container("low-old", 1000, 5),
      container("low-new", 1000, 10),
      container("high-new", 1000, 30, { criticality: 5 }),
      container("high-old", 1000, 20, { criticality: 5 }),
    ];
    ctl.tick(input(0, 250, set));
    // Under the target (190 W) but within a step of the floor drop: nothing yet.
    expect(limits(ctl.tick(input(100, 150, set)))).toEqual({
      "low-old": 100,
      "low-new": 100,
      "high-new": 100,
      "high-old": 100,
    });
    // The floor drop saved 100 W for 3600 milli-cores, so the headroom (40 W = 1440 milli) allows full steps.
    let d = ctl.tick(input(200, 150, set));
    expect(limits(d)).toEqual({ "low-old": 100, "low-new": 100, "high-new": 350, "high-old": 350 });
    // A raise waits for a reading taken wholly at the quotas in force: the one right after a raise spans it.
    const step = (t: number): CappingDecision => {
      expect(ctl.tick(input(t - 100, 150, set)).reason).toMatch(/waiting for a reading at these quotas/);
      return ctl.tick(input(t, 150, set));
    };
    // The most critical are raised to their allocation before anything else is raised.
    d = step(400);
    d = step(600);
    expect(limits(d)).toEqual({ "low-old": 100, "low-new": 100, "high-new": 850, "high-old": 850 });
    d = step(800);
    // At its allocation a container leaves the map (absent = unthrottled); then the oldest of the rest goes first.
    expect(limits(d)).toEqual({ "low-old": 100, "low-new": 100 });
    d = step(1000);
    expect(limits(d)).toEqual({ "low-old": 350, "low-new": 350 });
    expect(d.state).toBe("capped");
  });

  it("raises by no more than the estimated headroom to the target", () => {
    const ctl = new CappingController();
    const set = [container("a", 1000, 1), container("b", 1000, 2)];
    ctl.tick(input(0, 300, set));
    // The drop took 1800 milli-cores away and saved 180 W: 0.1 W per milli-core (read before the next step is due).
    ctl.tick(input(100, 120, set));
    // Target 190 W, draw 120 W: 70 W of headroom = 700 milli-cores, room for two full steps.
    expect(limits(ctl.tick(input(200, 120, set)))).toEqual({ a: 350, b: 350 });
    ctl.tick(input(300, 185, set));
    // Draw 185 W at the new quotas: 5 W of headroom = 50 milli-cores, all to the first container in order.
    expect(limits(ctl.tick(input(400, 185, set)))).toEqual({ a: 400, b: 350 });
  });

  it("raises only containers that use their quota, and counts quota left unused against the headroom", () => {
    const ctl = new CappingController();
    const am = container("am", 500, 1, { isAm: true });
    const busy = container("busy", 1000, 2);
    const starved = container("starved", 1000, 3);
    const seen = (t: number, draw: number, usage: [number, number, number]): CappingDecision =>
      ctl.tick(
        input(t, draw, [
          { ...am, usageMilli: usage[0] },
          { ...busy, usageMilli: usage[1] },
          { ...starved, usageMilli: usage[2] },
        ]),
      );
    seen(0, 300, [0, 1000, 1000]);
    seen(100, 120, [0, 150, 150]);
    // 180 W saved for 1800 milli-cores used: 0.1 W per milli-core. The idle job manager stays at its floor.
    expect(limits(seen(200, 120, [0, 100, 100]))).toEqual({ am: 50, busy: 350, starved: 350 });
    seen(300, 150, [0, 400, 200]);
    // "starved" uses 200 of its 350 (other work takes the CPU): not raised. The quota left unused (its 150 and the
    // job manager's 50 milli-cores, 20 W) is kept free, so of the 40 W to the 190 W target 20 W go to "busy".
    expect(limits(seen(400, 150, [0, 350, 200]))).toEqual({ am: 50, busy: 550, starved: 350 });
  });

  it("stops raising at the target and holds there, and drops back to the floor when over the cap again", () => {
    const ctl = new CappingController();
    const set = [container("a", 1000, 1), container("b", 1000, 2)];
    ctl.tick(input(0, 250, set));
    ctl.tick(input(200, 150, set));
    const raised = limits(ctl.tick(input(400, 150, set)));
    expect(raised.a).toBeGreaterThan(100);
    for (let t = 600; t <= 3000; t += 200) {
      const d = ctl.tick(input(t, 195, set));
      expect(d.state).toBe("capped");
      expect(limits(d)).toEqual(raised);
      expect(d.reason).toMatch(/holding/);
    }
    const d = ctl.tick(input(3200, 205, set));
    expect(limits(d)).toEqual({ a: 100, b: 100 });
    expect(ctl.stats().floorDrops).toBe(2);
    expect(ctl.stats().caps).toBe(1);
  });

  it("kills after the floor deadline, least critical and youngest first, the job manager's container last", () => {
    const ctl = new CappingController({ killDeadlineMs: 2000, killIntervalMs: 1000 });
    const set = [
      container("am", 500, 400, { isAm: true }),
      container("low-old", 1000, 100),
      container("low-new", 1000, 300),
      container("high-new", 1000, 500, { criticality: 9 }),
    ];
    const live = new Set(set.map((c) => c.containerId));
    const kills: [number, string[]][] = [];
    // The draw stays over budget whatever is throttled (the secondary draws nothing measurable): one kill per step.
    for (let t = 0; t <= 8000; t += 200) {
      const d = ctl.tick(
        input(
          t,
          250,
          set.filter((c) => live.has(c.containerId)),
        ),
      );
      if (d.kills.length > 0) kills.push([t, d.kills]);
      // A killed container lingers in the input for a period before it is gone.
      if (t % 400 === 0) for (const [, ids] of kills) for (const id of ids) live.delete(id);
    }
    expect(kills).toEqual([
      [2000, ["low-new"]],
      [3000, ["low-old"]],
      [4000, ["high-new"]],
      [5000, ["am"]],
    ]);
    expect(ctl.stats().kills).toBe(4);
  });

  it("does not kill while the draw is back under the budget at the floor", () => {
    const ctl = new CappingController();
    const set = [container("a", 1000, 1), container("b", 1000, 2)];
    ctl.tick(input(0, 250, set));
    for (let t = 200; t <= 6000; t += 200) expect(ctl.tick(input(t, 199, set)).kills).toEqual([]);
  });

  it("kills as few containers per step as the proportional estimate says are needed", () => {
    const set = [
      container("c1", 1000, 1),
      container("c2", 1000, 2),
      container("c3", 1000, 3),
      container("c4", 1000, 4),
    ];
    // Budget 250 W. The floor drop takes 3600 milli-cores away and saves 48 W: 1.33 W per container at its floor.
    const run = (drawAtFloor: number): string[] => {
      const ctl = new CappingController();
      ctl.tick(input(0, 300, set, 250));
      let kills: string[] = [];
      for (let t = 200; t <= 2000; t += 200) kills = ctl.tick(input(t, drawAtFloor, set, 250)).kills;
      return kills;
    };
    // 1 W over: one container covers it; 2 W over: two are needed.
    expect(run(252 - 1)).toEqual(["c4"]);
    expect(run(252)).toEqual(["c4", "c3"]);
    // Far over (the drop saved 1 W only, so the estimate says all four): never more than containersPerStep at once.
    expect(run(300 - 1)).toEqual(["c4", "c3"]);
  });

  it("engages once and does not flap when a noisy draw wanders around the cap threshold", () => {
    const ctl = new CappingController();
    const set = [container("a", 1000, 1), container("b", 1000, 2)];
    const rng = new SeededRng(7);
    const states: string[] = [];
    let state = "uncapped";
    for (let t = 0; t <= 60_000; t += 200) {
      // Around the cap threshold before capping; around the target (and often under the uncap threshold) after.
      const d = ctl.tick(input(t, t < 2000 ? 185 : (state === "uncapped" ? 199 : 186) + rng.normal(0, 4), set));
      state = d.state;
      if (states[states.length - 1] !== d.state) states.push(d.state);
    }
    expect(states).toEqual(["uncapped", "capped"]);
    expect(ctl.stats().caps).toBe(1);
    expect(ctl.stats().kills).toBe(0);
  });

  it("does not lift the cap while the draw keeps touching the uncap threshold", () => {
    const ctl = new CappingController();
    const set = [container("a", 1000, 1)];
    ctl.tick(input(0, 250, set));
    for (let t = 200; t <= 120_000; t += 200) {
      // 176 W and 184 W alternately: under the 180 W uncap threshold only half of the time.
      const d = ctl.tick(input(t, (t / 200) % 2 === 0 ? 176 : 184, set));
      expect(d.state).toBe("capped");
    }
  });

  it("lifts the cap after the draw stays under the uncap threshold for the quiet period", () => {
    const ctl = new CappingController({ quietMs: 30_000 });
    const set = [container("a", 1000, 1), container("b", 1000, 2)];
    ctl.tick(input(0, 250, set));
    let d = ctl.tick(input(200, 170, set));
    for (let t = 400; t < 30_200; t += 200) {
      d = ctl.tick(input(t, 170, set));
      expect(d.state).toBe("capped");
    }
    d = ctl.tick(input(30_200, 170, set));
    expect(d.state).toBe("uncapped");
    expect(d.limitsMilli.size).toBe(0);
    expect(d.reason).toMatch(/cap lifted/);
    // Capping engages again on the next excursion over the cap.
    expect(ctl.tick(input(30_400, 230, set)).state).toBe("capped");
    expect(ctl.stats().caps).toBe(2);
  });

  it("floors every container on stale telemetry, kills nothing, and raises step by step once readings return", () => {
    const ctl = new CappingController({ staleAfterPeriods: 3 });
    const set = [container("a", 1000, 1), container("b", 1000, 2)];
    expect(ctl.tick(input(0, 150, set)).state).toBe("uncapped");
    expect(ctl.tick(input(200, undefined, set)).state).toBe("uncapped");
    expect(ctl.tick(input(400, undefined, set)).state).toBe("uncapped");
    let d = ctl.tick(input(600, undefined, set));
    expect(d.state).toBe("stale");
    expect(limits(d)).toEqual({ a: 100, b: 100 });
    // Long past the kill deadline, still no kills without a reading; a newcomer starts at its floor.
    const withNew = [...set, container("c", 2000, 3)];
    for (let t = 800; t <= 10_000; t += 200) {
      d = ctl.tick(input(t, undefined, withNew));
      expect(d.state).toBe("stale");
      expect(d.kills).toEqual([]);
    }
    expect(limits(d)).toEqual({ a: 100, b: 100, c: 200 });
    expect(ctl.stats().staleEpisodes).toBe(1);
    // Readings return under the target: capped, raised a step at a time, not all at once.
    d = ctl.tick(input(10_200, 120, withNew));
    expect(d.state).toBe("capped");
    const raisedNow = [...d.limitsMilli].filter(([id, l]) => l > (id === "c" ? 200 : 100)).length;
    expect(raisedNow).toBeLessThanOrEqual(2);
    expect(d.limitsMilli.size).toBe(3);
  });

  it("ignores missing readings when no budget is in force", () => {
    const ctl = new CappingController();
    const set = [container("a", 1000, 1)];
    for (let t = 0; t <= 2000; t += 200) {
      const d = ctl.tick(input(t, undefined, set, undefined));
      expect(d.state).toBe("uncapped");
      expect(d.limitsMilli.size).toBe(0);
    }
  });

  it("uncaps at once when the budget is lifted", () => {
    for (const lifted of [undefined, 0]) {
      const ctl = new CappingController();
      const set = [container("a", 1000, 1)];
      expect(ctl.tick(input(0, 250, set)).state).toBe("capped");
      const d = ctl.tick(input(200, 250, set, lifted));
      expect(d.state).toBe("uncapped");
      expect(d.limitsMilli.size).toBe(0);
      expect(d.kills).toEqual([]);
    }
  });

  it("starts a container that arrives while capped at its floor and forgets one that leaves", () => {
    const ctl = new CappingController();
    const set = [container("a", 1000, 1), container("b", 1000, 2)];
    ctl.tick(input(0, 250, set));
    let d = ctl.tick(input(200, 195, [...set, container("new", 4000, 150)]));
    expect(limits(d)).toEqual({ a: 100, b: 100, new: 400 });
    d = ctl.tick(input(400, 195, [container("b", 1000, 2), container("new", 4000, 150)]));
    expect(limits(d)).toEqual({ b: 100, new: 400 });
    // "a" coming back is a new container: it starts at its floor too.
    d = ctl.tick(input(600, 195, [container("a", 1000, 500), container("b", 1000, 2)]));
    expect(limits(d)).toEqual({ a: 100, b: 100 });
  });

  it("counts the time containers spend throttled", () => {
    const ctl = new CappingController();
    const set = [container("a", 1000, 1), container("b", 1000, 2)];
    ctl.tick(input(0, 250, set));
    ctl.tick(input(1000, 195, set));
    // Two containers throttled for 1000 ms.
    expect(ctl.stats().throttledContainerMs).toBe(2000);
  });

  it("never names a container outside its input (the primary tenant is never in it)", () => {
    const rng = new SeededRng(42);
    const ctl = new CappingController({ killDeadlineMs: 600, killIntervalMs: 200, quietMs: 2000 });
    let pool: CappingContainer[] = [];
    let seq = 0;
    const killedEver = new Set<string>();
    for (let t = 0; t <= 60_000; t += 200) {
      if (rng.next() < 0.2) pool.push(container(`c${seq++}`, 100 + rng.int(4000), t, { criticality: rng.int(3) }));
      if (rng.next() < 0.1 && pool.length > 0) pool.splice(rng.int(pool.length), 1);
      const draw = rng.next() < 0.1 ? undefined : 100 + rng.next() * 150;
      const budget = rng.next() < 0.02 ? undefined : 200;
      const d = ctl.tick(input(t, draw, pool, budget));
      const ids = new Set(pool.map((c) => c.containerId));
      for (const [id, limit] of d.limitsMilli) {
        expect(ids.has(id)).toBe(true);
        const c = pool.find((x) => x.containerId === id)!;
        expect(limit).toBeGreaterThanOrEqual(Math.min(c.allocationMilli, Math.max(50, c.allocationMilli * 0.1)) - 1);
        expect(limit).toBeLessThan(c.allocationMilli);
      }
      for (const id of d.kills) {
        expect(ids.has(id)).toBe(true);
        expect(killedEver.has(id)).toBe(false);
        killedEver.add(id);
      }
      if (d.state === "uncapped") expect(d.limitsMilli.size).toBe(0);
      if (d.state === "stale") expect(d.kills).toEqual([]);
      // The node manager removes killed containers.
      pool = pool.filter((c) => !killedEver.has(c.containerId));
    }
  });

  describe("against a plant (draw = idle + watts per milli-core x running quota)", () => {
    const set = Array.from({ length: 6 }, (_, i) =>
      container(`c${i}`, 1000, i * 10, { criticality: i % 2, isAm: i === 0 }),
    );

    it("brings the draw under the budget and settles between the uncap threshold and the target", () => {
      // Unthrottled: 100 + 0.05 x 6000 = 400 W against a 300 W budget.
      const plant = new Plant(100, 0.05, new Map());
      const ctl = new CappingController();
      let d: CappingDecision | undefined;
      const draws: number[] = [];
      for (let t = 0; t <= 60_000; t += 200) {
        const draw = plant.drawWatts(set, d);
        draws.push(draw);
        d = ctl.tick(input(t, draw, set, 300));
        expect(d.kills).toEqual([]);
      }
      // After the first tick over the cap, never over the budget again.
      expect(Math.max(...draws.slice(1))).toBeLessThanOrEqual(300);
      const settled = draws.slice(-50);
      expect(Math.min(...settled)).toBeGreaterThan(300 * 0.9);
      expect(Math.max(...settled)).toBeLessThan(300 * 0.95 + 1e-9);
      expect(d?.state).toBe("capped");
      expect(ctl.stats().floorDrops).toBe(1);
      // The secondary keeps most of what the budget allows: about (285 - 100) / 0.05 = 3700 milli-cores.
      const running = set.reduce((sum, c) => sum + (d?.limitsMilli.get(c.containerId) ?? c.allocationMilli), 0);
      expect(running).toBeGreaterThan(3400);
    });

    it("learns watts per milli-core from what containers really used, so idle ones do not push it past the target", () => {
      // Three of the six containers idle at 100 milli-cores (their floor): dropping them to the floor saves nothing,
      // so crediting the drop with quota - floor halves the watts-per-milli-core estimate and each raise overshoots.
      const demand = new Map(set.map((c, i) => [c.containerId, i < 3 ? 100 : 1000]));
      const plant = new Plant(100, 0.1, demand);
      const settledMax = (withUsage: boolean): number => {
        const ctl = new CappingController();
        let d: CappingDecision | undefined;
        let max = 0;
        for (let t = 0; t <= 30_000; t += 200) {
          const draw = plant.drawWatts(set, d);
          if (t >= 5_000) max = Math.max(max, draw);
          const seen = set.map((c) => {
            const used = Math.min(demand.get(c.containerId)!, d?.limitsMilli.get(c.containerId) ?? c.allocationMilli);
            return withUsage ? { ...c, usageMilli: used } : c;
          });
          // Unthrottled: 100 + 0.1 x 3300 = 430 W against a 300 W budget (target 285 W).
          d = ctl.tick(input(t, draw, seen, 300));
        }
        return max;
      };
      expect(settledMax(true)).toBeLessThanOrEqual(285 + 1e-9);
      // Without usage the climb settles above the target (the bias the option removes).
      expect(settledMax(false)).toBeGreaterThan(285);
    });

    it("with a noisy meter stays capped, rarely goes over the budget and never kills", () => {
      const plant = new Plant(100, 0.05, new Map());
      const ctl = new CappingController();
      const rng = new SeededRng(3);
      let d: CappingDecision | undefined;
      let over = 0;
      let ticks = 0;
      for (let t = 0; t <= 120_000; t += 200) {
        const draw = plant.drawWatts(set, d) + rng.normal(0, 3);
        if (t > 0 && draw > 300) over += 1;
        ticks += 1;
        d = ctl.tick(input(t, draw, set, 300));
      }
      expect(ctl.stats().caps).toBe(1);
      expect(ctl.stats().kills).toBe(0);
      expect(over / ticks).toBeLessThan(0.05);
    });

    it("settles under the budget although every quota write lets a container run over its quota for a period", () => {
      // The capping bench's step that never settled (issue 15), as a deterministic plant. A CFS quota write refills the
      // group's runtime, so in the period after a write a burning container runs over its new quota q by up to half of
      // min(q, 1000 - q) milli-cores (one extra kernel period of 100 ms, bounded by the period's length, over a 200 ms
      // reading; measured: 0.30 -> 0.45 cores); the job manager's container is the oldest and idle; the meter reads the
      // period just ended, with noise. Uncapped 200 W against a 170 W budget.
      const procs = [
        container("am", 500, 0, { isAm: true }),
        container("burn-1", 1000, 10),
        container("burn-2", 1000, 20),
      ];
      const demand = new Map([
        ["am", 0],
        ["burn-1", 1000],
        ["burn-2", 1000],
      ]);
      const rng = new SeededRng(15);
      const ctl = new CappingController();
      let inForce = new Map<string, number>();
      let written = new Set<string>();
      const draws: { t: number; watts: number }[] = [];
      for (let t = 0; t <= 10_000; t += 200) {
        const used = procs.map((c) => {
          const quota = inForce.get(c.containerId) ?? c.allocationMilli;
          const burst = written.has(c.containerId) ? Math.min(quota, 1000 - quota) / 2 : 0;
          return Math.min(demand.get(c.containerId)!, c.allocationMilli, quota + burst);
        });
        // The primary's sample beats against its own duty cycle (+-3 W every other period), plus meter noise.
        const primary = (t / 200) % 2 === 0 ? 3 : -3;
        const watts = 100 + 0.05 * used.reduce((a, b) => a + b, 0) + primary + rng.normal(0, 1);
        draws.push({ t, watts });
        const d = ctl.tick(
          input(
            t,
            watts,
            procs.map((c, i) => ({ ...c, usageMilli: used[i] })),
            170,
          ),
        );
        expect(d.kills).toEqual([]);
        const next = new Map(procs.map((c) => [c.containerId, d.limitsMilli.get(c.containerId) ?? c.allocationMilli]));
        written = new Set(procs.map((c) => c.containerId).filter((id) => next.get(id) !== inForce.get(id)));
        inForce = next;
      }
      // Settled: at most the one reading that taught the controller how large the transient is went over the budget,
      // none after the first 2 s, and the budget's first drop to the floor was the only one.
      expect(draws.filter((p) => p.t > 0 && p.watts > 170).length).toBeLessThanOrEqual(1);
      const late = draws.filter((p) => p.t >= 2_000);
      expect(late.filter((p) => p.watts > 170)).toEqual([]);
      expect(ctl.stats().floorDrops).toBe(1);
      // And the budget is still used: the burning containers get back most of what it leaves them.
      expect(Math.max(...late.slice(-10).map((p) => p.watts))).toBeGreaterThan(170 * 0.85);
    });

    it("kills when a primary surge leaves no room even at the floor, and lifts the cap when the surge ends", () => {
      const plant = new Plant(100, 0.05, new Map());
      const ctl = new CappingController({ quietMs: 10_000 });
      let d: CappingDecision | undefined;
      let live = [...set];
      const killed: string[] = [];
      const states = new Set<string>();
      for (let t = 0; t <= 60_000; t += 200) {
        // The primary draws 190 W for 20 s: idle 100 + primary 190 + the floor (6 x 100 x 0.05 = 30) > 300 W budget.
        const primary = t >= 1000 && t < 21_000 ? 190 : 0;
        const draw = plant.drawWatts(live, d, primary);
        d = ctl.tick(input(t, draw, live, 300));
        states.add(d.state);
        killed.push(...d.kills);
        live = live.filter((c) => !d!.kills.includes(c.containerId));
        if (t > 5000 && t < 21_000) expect(draw).toBeLessThanOrEqual(300 + 30);
      }
      // 390 W at the floor is 20 W over the budget... minus what the kills free (5 W each at the floor).
      expect(killed.length).toBeGreaterThan(0);
      expect(killed).not.toContain("c0"); // the job manager's container goes last, and is not needed here
      expect(d?.state).toBe("uncapped");
      expect(d?.limitsMilli.size).toBe(0);
    });
  });
});
