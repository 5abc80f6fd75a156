import { describe, expect, it } from "vitest";
import { detailsOf } from "../../common/errors.js";
import { resolveNodeManagerOptions } from "../../nodemanager/options.js";
import { chooseVictims } from "../../nodemanager/policy/yield-controller.js";
import type { YieldContainer, YieldInput } from "../../nodemanager/policy/yield-controller.js";
import { expectedRemainingMs, lostWorkOf } from "../../nodemanager/policy/work-lost.js";
import { thrown } from "../error-code.js";

const S = 1000;

function task(containerId: string, vcoresMilli: number, startedMs: number, extra: Partial<YieldContainer> = {}) {
  return { containerId, vcoresMilli, startedMs, isAm: false, ...extra };
}

/** What the secondary still holds once `victims` are gone, and what it may hold. */
function after(input: YieldInput, victims: readonly string[]) {
  const kept = input.containers.filter((c) => !victims.includes(c.containerId));
  const held = kept.reduce((sum, c) => sum + c.vcoresMilli, 0);
  const heldMemoryMb = kept.reduce((sum, c) => sum + (c.memoryMb ?? 0), 0);
  return {
    held,
    heldMemoryMb,
    allowance: input.capacityMilli - input.primaryMilli - input.reserveMilli,
    memoryAllowance: (input.capacityMemoryMb ?? Infinity) - (input.primaryMemoryMb ?? 0) - (input.reserveMemoryMb ?? 0),
  };
}

describe("chooseVictims, work-lost order", () => {
  it("frees the cores and the memory the primary needs in the same tick", () => {
    // Cores: 16000 - 8000 - 1600 = 6400 allowed of 8000 held (one container would do). Memory: 32768 - 20000 - 3277
    // = 9491 MB allowed of 16384 held: 6893 MB must go, two containers' worth.
    const containers = [
      task("a", 2000, 10 * S, { memoryMb: 4096 }),
      task("b", 2000, 20 * S, { memoryMb: 4096 }),
      task("c", 2000, 30 * S, { memoryMb: 4096 }),
      task("d", 2000, 40 * S, { memoryMb: 4096 }),
    ];
    const input: YieldInput = {
      capacityMilli: 16000,
      primaryMilli: 8000,
      reserveMilli: 1600,
      capacityMemoryMb: 32768,
      primaryMemoryMb: 20000,
      reserveMemoryMb: 3277,
      containers,
      order: "work-lost",
      nowMs: 100 * S,
    };
    const { victims } = chooseVictims(input);
    const left = after(input, victims);
    expect(left.held).toBeLessThanOrEqual(left.allowance);
    expect(left.heldMemoryMb).toBeLessThanOrEqual(left.memoryAllowance);
    // Two 4 GB containers are the fewest that free 6893 MB; the two that ran least go.
    expect([...victims].sort()).toEqual(["c", "d"]);
  });

  it("spares a job manager and a task near its end when the other tasks free enough", () => {
    // Allowance 8000 - 4000 - 800 = 3200 of 5000 held: 1800 must go.
    const containers = [
      { ...task("am", 1000, 95 * S), isAm: true },
      // Ran 20 s and reports 95 %: about 1 s left.
      task("nearly-done", 1000, 80 * S, { progress: 0.95 }),
      task("early", 1000, 40 * S, { progress: 0.1 }),
      task("middle", 1000, 50 * S, { progress: 0.5 }),
      task("silent", 1000, 60 * S),
    ];
    const input: YieldInput = {
      capacityMilli: 8000,
      primaryMilli: 4000,
      reserveMilli: 800,
      containers,
      order: "work-lost",
      nowMs: 100 * S,
      nearEndMs: 10 * S,
    };
    const { victims } = chooseVictims(input);
    expect(victims).not.toContain("am");
    expect(victims).not.toContain("nearly-done");
    // The two of the other tasks that ran least: 40 s and 50 s of work lost, not "early"'s 60 s.
    expect(victims).toEqual(["silent", "middle"]);
    const left = after(input, victims);
    expect(left.held).toBeLessThanOrEqual(left.allowance);
  });

  it("kills a task near its end before a job manager when the other tasks are not enough", () => {
    // Allowance 4000 - 2000 - 400 = 1600 of 3000 held: 1400 must go, more than the one ordinary task holds.
    const containers = [
      { ...task("am", 1000, 99 * S), isAm: true },
      task("nearly-done", 1000, 50 * S, { progress: 0.99 }),
      task("ordinary", 1000, 10 * S),
    ];
    const { victims } = chooseVictims({
      capacityMilli: 4000,
      primaryMilli: 2000,
      reserveMilli: 400,
      containers,
      order: "work-lost",
      nowMs: 100 * S,
      nearEndMs: 10 * S,
    });
    expect(victims).toEqual(["ordinary", "nearly-done"]);
  });

  it("loses less work than youngest-first where a young wide container is all youngest-first sees", () => {
    // 500 milli-cores must go. Youngest-first kills the 8-core container that ran 60 s; an older 1-core one that ran
    // 120 s frees enough and loses a quarter of the work.
    const containers = [task("wide", 8000, 40 * S), task("narrow", 1000, -20 * S), task("old", 1000, -400 * S)];
    const base = { capacityMilli: 16000, primaryMilli: 6500, reserveMilli: 0, containers, nowMs: 100 * S };
    const youngest = chooseVictims({ ...base, order: "youngest" }).victims;
    const workLost = chooseVictims({ ...base, order: "work-lost" }).victims;
    expect(youngest).toEqual(["wide"]);
    expect(workLost).toEqual(["narrow"]);
    const lost = (victims: string[]) => lostWorkOf(containers, victims, base.nowMs);
    // Milli-core-ms: 8000 x 60 s against 1000 x 120 s.
    expect(lost(youngest)).toBe(480_000_000);
    expect(lost(workLost)).toBe(120_000_000);
    const left = after(base, workLost);
    expect(left.held).toBeLessThanOrEqual(left.allowance);
  });

  it("takes the one container that covers alone when it loses less than the cheapest-per-core ones together", () => {
    // 2500 milli-cores must go. Per milli-core the 1-core tasks that ran 7 s are cheapest, but all three are needed
    // (21 core-s lost), while one 4-core task that ran 5 s covers alone and loses 20 core-s.
    const containers = [
      task("t1", 1000, 93 * S),
      task("t2", 1000, 93 * S),
      task("t3", 1000, 93 * S),
      task("big", 4000, 95 * S),
      task("anchor", 4000, 0),
    ];
    const input: YieldInput = {
      capacityMilli: 12000,
      primaryMilli: 3500,
      reserveMilli: 0,
      containers,
      order: "work-lost",
      nowMs: 100 * S,
    };
    const { victims } = chooseVictims(input);
    expect(lostWorkOf(containers, victims, 100 * S)).toBe(20_000_000);
    expect(victims).toEqual(["big"]);
  });

  it("kills every container, the job managers last, when the primary alone exceeds what it may leave", () => {
    const containers = [{ ...task("am", 500, 1), isAm: true }, task("t1", 500, 2), task("t2", 500, 3)];
    const { victims } = chooseVictims({
      capacityMilli: 4000,
      primaryMilli: 3800,
      reserveMilli: 400,
      containers,
      order: "work-lost",
      nowMs: 10,
    });
    expect(victims).toHaveLength(3);
    expect(victims[2]).toBe("am");
  });

  it("chooses the same victims whatever the order of its input", () => {
    const containers = [
      task("c-1", 1000, 100),
      task("c-2", 1000, 100),
      task("c-3", 1000, 100),
      task("c-4", 1000, 50, { progress: 0.3 }),
    ];
    const choose = (list: YieldContainer[]) =>
      chooseVictims({
        capacityMilli: 4000,
        primaryMilli: 1800,
        reserveMilli: 0,
        containers: list,
        order: "work-lost",
        nowMs: 1000,
      }).victims;
    const first = choose(containers);
    // Equal work lost: the later-granted ids go first, as under youngest-first.
    expect(first).toEqual(["c-3", "c-2"]);
    expect(choose([...containers].reverse())).toEqual(first);
    expect(choose([containers[2]!, containers[0]!, containers[3]!, containers[1]!])).toEqual(first);
  });

  it("kills nothing when the secondary fits", () => {
    const { victims } = chooseVictims({
      capacityMilli: 4000,
      primaryMilli: 1000,
      reserveMilli: 400,
      containers: [task("a", 1000, 0)],
      order: "work-lost",
      nowMs: 10,
    });
    expect(victims).toEqual([]);
  });
});

describe("expectedRemainingMs", () => {
  it("reads a task at progress p after an elapsed e as having e x (1 - p) / p left, and knows nothing without p", () => {
    expect(expectedRemainingMs(90 * S, 0.9)).toBeCloseTo(10 * S);
    expect(expectedRemainingMs(10 * S, 1)).toBe(0);
    expect(expectedRemainingMs(10 * S, 0)).toBe(Infinity);
    expect(expectedRemainingMs(10 * S, undefined)).toBe(Infinity);
  });
});

describe("the node manager's victimOrder option", () => {
  const base = { nodeId: "n1", rmAddress: "127.0.0.1:1", dataDir: "/d" };

  it("keeps stock YARN's youngest-first unless told otherwise, and takes work-lost", () => {
    expect(resolveNodeManagerOptions(base).victimOrder).toBe("youngest");
    const o = resolveNodeManagerOptions({ ...base, victimOrder: "work-lost", victimNearEndMs: 5000 });
    expect([o.victimOrder, o.victimNearEndMs]).toEqual(["work-lost", 5000]);
  });

  it("refuses an unknown order and a negative near-end window, naming the field", () => {
    const cases: [Record<string, unknown>, string][] = [
      [{ victimOrder: "oldest" }, "victimOrder"],
      [{ victimNearEndMs: -1 }, "victimNearEndMs"],
    ];
    for (const [extra, field] of cases) {
      const err = thrown(() => resolveNodeManagerOptions({ ...base, ...extra }));
      expect([err.code, detailsOf(err, "CONFIG_INVALID")?.field]).toEqual(["CONFIG_INVALID", field]);
    }
  });
});
