import { describe, expect, it } from "vitest";
import type { YieldContainer } from "../../nodemanager/policy/yield-controller.js";
import { chooseVictims } from "../../nodemanager/policy/yield-controller.js";

function container(containerId: string, vcoresMilli: number, startedMs: number, isAm = false): YieldContainer {
  return { containerId, vcoresMilli, startedMs, isAm };
}

/** Victims on a node of `capacityMilli` whose primary uses `primaryMilli`, keeping `reserveMilli` free for it. */
function choose(capacityMilli: number, primaryMilli: number, reserveMilli: number, containers: YieldContainer[]) {
  return chooseVictims({ capacityMilli, primaryMilli, reserveMilli, containers });
}

describe("chooseVictims", () => {
  it("kills nothing when the secondary fits in capacity minus primary minus reserve", () => {
    // 4000 - 1500 - 400 = 2100 allowed; 1000 + 1000 = 2000 held.
    const decision = choose(4000, 1500, 400, [container("c1", 1000, 10), container("c2", 1000, 20)]);
    expect(decision.victims).toEqual([]);
    expect(decision.allowanceMilli).toBe(2100);
    expect(decision.secondaryMilli).toBe(2000);
  });

  it("kills nothing when the secondary exactly fills the allowance", () => {
    const decision = choose(4000, 1600, 400, [container("c1", 1000, 10), container("c2", 1000, 20)]);
    expect(decision.victims).toEqual([]);
  });

  it("kills the youngest container first", () => {
    // Allowance 4000 - 2000 - 400 = 1600; held 3 x 1000 = 3000: two must go, the two started last.
    const decision = choose(4000, 2000, 400, [
      container("old", 1000, 100),
      container("newest", 1000, 300),
      container("middle", 1000, 200),
    ]);
    expect(decision.victims).toEqual(["newest", "middle"]);
  });

  it("kills only as many containers as needed for the rest to fit", () => {
    // Allowance 4000 - 1000 - 400 = 2600; held 4 x 800 = 3200: one kill leaves 2400, which fits.
    const decision = choose(4000, 1000, 400, [
      container("a", 800, 1),
      container("b", 800, 2),
      container("c", 800, 3),
      container("d", 800, 4),
    ]);
    expect(decision.victims).toEqual(["d"]);
  });

  it("goes by age, not size: it kills young small containers before an old large one", () => {
    // Allowance 2000 - 500 - 200 = 1300; held 1500 + 200 + 200 = 1900; must free 600: both young 200s then the old 1500.
    const decision = choose(2000, 500, 200, [
      container("big-old", 1500, 1),
      container("small-1", 200, 5),
      container("small-2", 200, 6),
    ]);
    expect(decision.victims).toEqual(["small-2", "small-1", "big-old"]);
  });

  it("kills the job manager's container last even when it is the youngest", () => {
    // Allowance 3000 - 1000 - 300 = 1700; held 3 x 1000 = 3000: two must go; the AM is the youngest but is spared.
    const decision = choose(3000, 1000, 300, [
      container("task-old", 1000, 1),
      container("am", 1000, 50, true),
      container("task-new", 1000, 2),
    ]);
    expect(decision.victims).toEqual(["task-new", "task-old"]);
    expect(decision.victims).not.toContain("am");
  });

  it("kills every container, the job manager's last, when the primary alone exceeds capacity minus reserve", () => {
    const decision = choose(4000, 3800, 400, [
      container("am", 500, 1, true),
      container("t1", 500, 2),
      container("t2", 500, 3),
    ]);
    expect(decision.allowanceMilli).toBe(-200);
    expect(decision.victims).toEqual(["t2", "t1", "am"]);
  });

  it("kills zero-sized containers too when the primary alone exceeds capacity minus reserve", () => {
    const decision = choose(1000, 1000, 100, [container("tiny", 0, 1)]);
    expect(decision.victims).toEqual(["tiny"]);
  });

  it("never names more victims than the containers it was given, each once", () => {
    const containers = [container("a", 100, 1), container("b", 100, 2, true), container("c", 100, 3)];
    const decision = choose(1000, 5000, 100, containers);
    expect(decision.victims).toHaveLength(3);
    expect(new Set(decision.victims)).toEqual(new Set(["a", "b", "c"]));
  });

  it("returns no victims for a node without secondary containers, however busy the primary is", () => {
    const decision = choose(1000, 5000, 100, []);
    expect(decision.victims).toEqual([]);
    expect(decision.secondaryMilli).toBe(0);
  });

  it("breaks ties between containers started at the same time by id, the later-granted id first, whatever the input order", () => {
    const a = container("container_1_0001_01_000001", 1000, 100);
    const b = container("container_1_0001_01_000002", 1000, 100);
    const c = container("container_1_0001_01_000003", 1000, 100);
    const input = (list: YieldContainer[]) => ({
      capacityMilli: 3000,
      primaryMilli: 1000,
      reserveMilli: 300,
      containers: list,
    });
    // Allowance 1700, held 3000: two victims.
    const first = chooseVictims(input([a, b, c])).victims;
    expect(first).toEqual(["container_1_0001_01_000003", "container_1_0001_01_000002"]);
    expect(chooseVictims(input([c, b, a])).victims).toEqual(first);
    expect(chooseVictims(input([b, a, c])).victims).toEqual(first);
    expect(chooseVictims(input([c, a, b])).victims).toEqual(first);
  });

  it("does not modify the container list it is given", () => {
    const containers = [container("a", 1000, 1), container("b", 1000, 2)];
    const before = containers.map((c) => c.containerId);
    choose(1000, 1000, 0, containers);
    expect(containers.map((c) => c.containerId)).toEqual(before);
  });

  it("kills the youngest containers until the secondary fits in the memory the primary leaves, with cores to spare", () => {
    const big = (id: string, started: number, memoryMb: number): YieldContainer => ({
      ...container(id, 500, started),
      memoryMb,
    });
    const containers = [big("old", 1, 2048), big("mid", 2, 2048), big("young", 3, 2048)];
    // Cores are plentiful (1500 held of 7000 allowed); memory: 8192 - 2000 primary - 819 reserve = 5373 MB allowed.
    const d = chooseVictims({
      capacityMilli: 8000,
      primaryMilli: 500,
      reserveMilli: 500,
      capacityMemoryMb: 8192,
      primaryMemoryMb: 2000,
      reserveMemoryMb: 819,
      containers,
    });
    expect(d.secondaryMemoryMb).toBe(6144);
    expect(d.victims).toEqual(["young"]);
    // The primary grows to 6 GB: even the oldest container alone no longer fits.
    const more = chooseVictims({
      capacityMilli: 8000,
      primaryMilli: 500,
      reserveMilli: 500,
      capacityMemoryMb: 8192,
      primaryMemoryMb: 6000,
      reserveMemoryMb: 819,
      containers,
    });
    expect(more.victims).toEqual(["young", "mid", "old"]);
  });

  it("leaves memory out when the primary's memory is not measured", () => {
    const d = choose(4000, 0, 0, [{ ...container("a", 1000, 1), memoryMb: 1 << 20 }]);
    expect(d.victims).toEqual([]);
    expect(d.memoryAllowanceMb).toBe(Infinity);
  });
});
