import { describe, expect, it } from "vitest";
import { Logger } from "../../common/log.js";
import { CappingAgent } from "../../nodemanager/policy/capping-agent.js";
import type { AgentContainer } from "../../nodemanager/policy/capping-agent.js";
import type { PowerMeter, PowerReading } from "../../nodemanager/power-meter.js";
import type { Throttler } from "../../nodemanager/throttler.js";

/**
 * A server model behind the agent's interfaces: each container burns min(allocation, quota) cores, the meter reads
 * idle + wattsPerCore x (primary + secondary cores). The agent never sees this model; it only meters and throttles.
 */
class Plant {
  readonly limits = new Map<string, number | undefined>();
  readonly setLimitCalls: string[] = [];
  readonly killed: string[] = [];
  readonly forgotten: string[] = [];
  primaryCores = 1;
  meterDown = false;
  constructor(
    readonly allocations: Map<string, number>,
    readonly idleWatts = 100,
    readonly wattsPerCore = 50,
  ) {}

  cores(id: string): number {
    const alloc = this.allocations.get(id)!;
    const limit = this.limits.get(id);
    return Math.min(alloc, limit ?? alloc) / 1000;
  }

  watts(): number {
    let cores = this.primaryCores;
    for (const id of this.allocations.keys()) cores += this.cores(id);
    return this.idleWatts + this.wattsPerCore * cores;
  }

  meter(): PowerMeter {
    return {
      kind: "model",
      description: "model: plant",
      read: (nowMs: number): PowerReading | undefined =>
        this.meterDown ? undefined : { timeMs: nowMs, watts: this.watts(), idleWatts: this.idleWatts },
      close: () => {},
    };
  }

  throttler(): Throttler {
    return {
      mode: "cgroup",
      setLimit: (id, limitMilli) => {
        this.setLimitCalls.push(id);
        this.limits.set(id, limitMilli);
      },
      forget: (id) => {
        this.forgotten.push(id);
        this.limits.delete(id);
      },
      close: () => {},
    };
  }

  containers(): AgentContainer[] {
    return [...this.allocations.keys()].map((id, i) => ({
      containerId: id,
      allocationMilli: this.allocations.get(id)!,
      memoryMb: 512,
      startedMs: i * 1000,
      isAm: false,
      criticality: 0,
      cpuCores: this.cores(id),
      pids: () => [],
    }));
  }
}

const quiet = new Logger("test", "error");

function setup(options: { nodeBudgetWatts?: number; quietMs?: number } = {}) {
  const plant = new Plant(
    new Map([
      ["c1", 1000],
      ["c2", 1000],
      ["c3", 1000],
    ]),
  );
  const agent = new CappingAgent(
    {
      meter: plant.meter(),
      throttler: plant.throttler(),
      log: quiet,
      kill: (id) => {
        plant.killed.push(id);
        plant.allocations.delete(id);
      },
    },
    4000,
    {
      capping: { quietMs: options.quietMs ?? 2000, killDeadlineMs: 1000, killIntervalMs: 200 },
      ...(options.nodeBudgetWatts !== undefined ? { nodeBudgetWatts: options.nodeBudgetWatts } : {}),
    },
  );
  let now = 0;
  const run = (ms: number): void => {
    for (let t = 0; t < ms; t += 200) {
      now += 200;
      agent.tick(now, plant.primaryCores, plant.containers());
    }
  };
  return { plant, agent, run };
}

/** A node as `setup` makes it, with `primaryCores` busy, capped after `runMs` under a budget of `watts` from domain "d". */
function cappedByDomain(watts: number, runMs: number, primaryCores?: number): ReturnType<typeof setup> {
  const s = setup();
  if (primaryCores !== undefined) s.plant.primaryCores = primaryCores;
  s.agent.setDomainBudget(watts, "d");
  s.run(runMs);
  expect(s.agent.snapshot().state).toBe("capped");
  return s;
}

/** Asserts that the node's cap, its budget and every container's limit are gone. */
function expectLifted({ agent, plant }: Pick<ReturnType<typeof setup>, "agent" | "plant">): void {
  expect(agent.snapshot().state).toBe("uncapped");
  expect(agent.snapshot().budgetWatts).toBeUndefined();
  expect([...plant.limits.values()].every((l) => l === undefined)).toBe(true);
}

describe("CappingAgent", () => {
  it("leaves containers alone with no budget and reports the meter's draw", () => {
    const { plant, agent, run } = setup();
    run(2000);
    // 1 primary core + 3 container cores at 50 W each over 100 W idle.
    expect(agent.snapshot().watts).toBe(300);
    expect(agent.snapshot().state).toBe("uncapped");
    expect(plant.setLimitCalls).toEqual([]);
  });

  it("throttles secondary containers until the draw is under a domain budget, never touching the primary", () => {
    const { plant, agent, run } = setup();
    run(1000);
    agent.setDomainBudget(240, "row1/rack1");
    run(5000);
    const snap = agent.snapshot();
    expect(snap.budgetWatts).toBe(240);
    expect(snap.budgetSource).toBe("domain");
    expect(snap.budgetDomain).toBe("row1/rack1");
    expect(snap.state).toBe("capped");
    expect(plant.watts()).toBeLessThanOrEqual(240);
    expect(snap.throttledContainers).toBeGreaterThan(0);
    expect(plant.primaryCores).toBe(1);
    expect(plant.killed).toEqual([]);
  });

  it("uses the smaller of the node's own budget and the domain's", () => {
    const { agent } = setup({ nodeBudgetWatts: 250 });
    expect(agent.budget()).toEqual({ watts: 250, source: "node", domain: "" });
    agent.setDomainBudget(260, "d");
    expect(agent.budget().watts).toBe(250);
    agent.setDomainBudget(200, "d");
    expect(agent.budget()).toEqual({ watts: 200, source: "domain", domain: "d" });
    agent.setNodeBudget(0);
    expect(agent.budget().watts).toBe(200);
  });

  it("keeps a lifted domain budget until its own quiet period has passed, then runs containers at full speed", () => {
    const { plant, agent, run } = cappedByDomain(240, 5000);
    // The domain is under its uncap threshold and lifts the budget: the node holds its cap rather than jump back.
    agent.setDomainBudget(0, "");
    run(200);
    expect(agent.snapshot().budgetWatts).toBe(240);
    expect(plant.watts()).toBeLessThanOrEqual(240);
    // Once the draw has stayed under the uncap threshold for the quiet period, the cap and the budget go.
    plant.primaryCores = 0;
    plant.allocations.delete("c3");
    agent.forget("c3");
    run(4000);
    expectLifted({ agent, plant });
  });

  it("never holds a node capped for more than one quiet period after its domain lifts the budget", () => {
    const { plant, agent, run } = cappedByDomain(240, 5000);
    // The operator removes the domain's budget while the containers still want every core: held at the target, the
    // node never draws under the uncap threshold, so only the bound on the lifted budget lets them run again.
    agent.setDomainBudget(0, "");
    run(1000);
    expect(agent.snapshot().budgetWatts).toBe(240);
    run(1400);
    expectLifted({ agent, plant });
    expect(plant.killed).toEqual([]);
  });

  it("drops a lifted domain budget at once when the node draws more than it (the budget was removed, not met)", () => {
    const { plant, agent, run } = cappedByDomain(250, 1000, 3);
    agent.setDomainBudget(0, "");
    run(400);
    expectLifted({ agent, plant });
    expect(plant.killed).toEqual([]);
  });

  it("kills the youngest container when the floor cannot meet the budget, after continuing it", () => {
    const { plant, agent, run } = setup();
    plant.primaryCores = 2;
    // Idle 100 W + primary 100 W = 200 W before any secondary work: the floors alone exceed 205 W.
    agent.setDomainBudget(205, "d");
    run(6000);
    expect(plant.killed.length).toBeGreaterThan(0);
    expect(plant.killed[0]).toBe("c3");
    expect(plant.forgotten).toContain("c3");
    expect(agent.snapshot().kills).toBe(plant.killed.length);
  });

  it("floors every container when the meter goes silent under a budget", () => {
    const { plant, agent, run } = setup();
    agent.setNodeBudget(400);
    run(1000);
    expect(agent.snapshot().state).toBe("uncapped");
    plant.meterDown = true;
    run(1000);
    expect(agent.snapshot().state).toBe("stale");
    for (const id of ["c1", "c2", "c3"]) expect(plant.limits.get(id)).toBeLessThan(1000);
    expect(plant.killed).toEqual([]);
  });

  it("splits the dynamic power among the primary and the containers so the parts add up to the meter", () => {
    const { plant, agent, run } = setup();
    run(10_000);
    const snap = agent.snapshot();
    let sum = snap.primaryWatts;
    for (const w of snap.containerWatts.values()) sum += w;
    expect(sum).toBeCloseTo(plant.watts() - plant.idleWatts, 6);
    expect(snap.containerWatts.size).toBe(3);
  });
});
