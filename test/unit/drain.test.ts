import { describe, expect, it } from "vitest";
import { DrainTracker, drainOrder } from "../../resourcemanager/policy/drain.js";
import type { DrainContainer } from "../../resourcemanager/policy/drain.js";

const c = (containerId: string, startMs: number, remainingMs: number, isJobManager = false): DrainContainer => ({
  containerId,
  startMs,
  remainingMs,
  isJobManager,
});

describe("drain order (LARS)", () => {
  it("puts the longest predicted remaining first, job managers last; the baseline keeps grant order", () => {
    const list = [c("short", 0, 5_000), c("am", 1, 900_000, true), c("long", 2, 600_000), c("mid", 3, 60_000)];
    expect(drainOrder(list, "lars").map((x) => x.containerId)).toEqual(["long", "mid", "short", "am"]);
    expect(drainOrder(list, "arbitrary").map((x) => x.containerId)).toEqual(["short", "long", "mid", "am"]);
  });
});

describe("DrainTracker", () => {
  it("leaves what ends before the deadline, preempts the rest longest first at the bounded rate, kills the rest at the deadline", () => {
    const t = new DrainTracker({ preemptionsPerSecond: 1, burst: 1, marginMs: 0 });
    t.start("n1", 0, 100_000);
    const on = [c("a", 0, 10_000), c("b", 0, 500_000), c("c", 0, 200_000), c("d", 0, 300_000)];
    // a ends before the deadline; b, c, d do not. One token: b (the longest) goes first.
    expect(t.step("n1", 0, on)).toEqual({ preempt: ["b"], atDeadline: false });
    // No token accrued yet at 500 ms.
    expect(t.step("n1", 500, on).preempt).toEqual([]);
    // At 1 s one token: d (300 s) before c (200 s).
    expect(t.step("n1", 1_000, on.slice(0, 1).concat(on.slice(2))).preempt).toEqual(["d"]);
    // a ended on its own; c's prediction dropped so that it now ends before the deadline: nothing to preempt.
    const s = t.step("n1", 5_000, [c("c", 0, 20_000)]);
    expect(s.preempt).toEqual([]);
    let [status] = t.status("n1");
    expect(status).toMatchObject({ state: "DRAINING", preempted: 2, finishedOnTheirOwn: 1, predictedToFinish: 1 });
    // c outlives its prediction: at the deadline it is killed.
    expect(t.step("n1", 100_000, [c("c", 0, 20_000)])).toEqual({ preempt: ["c"], atDeadline: true });
    expect(t.step("n1", 101_000, []).preempt).toEqual([]);
    [status] = t.status("n1");
    expect(status).toMatchObject({ state: "DRAINED", killedAtDeadline: 1, preempted: 2, finishedMs: 101_000 });
    expect(t.stop("n1")).toBe(true);
    expect(t.isDraining("n1")).toBe(false);
  });

  it("never preempts without a deadline: it waits for the containers to end", () => {
    const t = new DrainTracker();
    t.start("n1", 0);
    expect(t.step("n1", 0, [c("x", 0, 1e9)]).preempt).toEqual([]);
    expect(t.step("n1", 1e9, [c("x", 0, 1e9)]).preempt).toEqual([]);
    expect(t.step("n1", 1e9 + 1, []).preempt).toEqual([]);
    expect(t.status()[0]).toMatchObject({ state: "DRAINED", finishedOnTheirOwn: 1, preempted: 0 });
  });

  it("rejects bad options", () => {
    expect(() => new DrainTracker({ preemptionsPerSecond: 0 })).toThrow(/preemptionsPerSecond/);
    expect(() => new DrainTracker({ order: "random" as "lars" })).toThrow(/order/);
  });
});
