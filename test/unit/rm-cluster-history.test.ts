import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { ManualClock } from "../../common/clock.js";
import { Logger } from "../../common/log.js";
import { ClusterHistory, MAX_HISTORY_SAMPLES } from "../../resourcemanager/cluster-history.js";
import { RmStateStore } from "../../resourcemanager/state-store.js";
import type { ApplicationObserver } from "../../resourcemanager/app-runtime.js";

const HOUR = 3_600_000;

function server(capacity: number, primary: number, allocated: number, containers: number) {
  return {
    capacity: { vcoresMilli: capacity },
    primaryUsage: { vcoresMilli: primary },
    allocated: { vcoresMilli: allocated },
    containers,
  };
}

/** An observer that records what it is told, as the metrics would count it. */
function recorder(): ApplicationObserver & { told: string[] } {
  const told: string[] = [];
  return {
    told,
    submitted: (appId) => told.push(`submitted ${appId}`),
    finished: (appId, state) => told.push(`finished ${appId} ${state}`),
    containerEnded: (isAm, cause, nodeId) => told.push(`ended ${isAm} ${cause} ${nodeId ?? ""}`),
  };
}

describe("the cluster's last day", () => {
  it("samples the cluster's cores, summed over the servers", () => {
    const clock = new ManualClock(10 * HOUR);
    const h = new ClusterHistory(() => [server(4000, 1000, 2500, 3), server(8000, 500, 0, 0)], clock, 60_000);
    h.sample();
    expect(h.snapshot().samples).toEqual([
      { timeMs: 10 * HOUR, capacityMilli: 12_000, primaryMilli: 1500, harvestedMilli: 2500, containers: 3 },
    ]);
  });

  it("keeps one day at most, and never more than the cap of samples", () => {
    const clock = new ManualClock(0);
    const h = new ClusterHistory(() => [server(1000, 0, 0, 0)], clock, 1_000);
    for (let i = 0; i < MAX_HISTORY_SAMPLES + 10; i++) {
      clock.advance(1_000);
      h.sample();
    }
    const samples = h.snapshot().samples;
    expect(samples).toHaveLength(MAX_HISTORY_SAMPLES);
    expect(samples[0]!.timeMs).toBe(11_000);
    // A minute apart: after 25 hours, only the last day is shown.
    const daily = new ClusterHistory(() => [server(1000, 0, 0, 0)], clock, 60_000);
    for (let i = 0; i < 25 * 60; i++) {
      clock.advance(60_000);
      daily.sample();
    }
    const last = daily.snapshot().samples;
    expect(last.length).toBeLessThanOrEqual(24 * 60);
    expect(last[0]!.timeMs).toBeGreaterThan(clock.nowMs() - 24 * HOUR);
  });

  it("counts kills per clock hour and per server, not other endings, and still tells the metrics everything", () => {
    const clock = new ManualClock(100 * HOUR + 5 * 60_000);
    const h = new ClusterHistory(() => [], clock, 60_000);
    const inner = recorder();
    const o = h.observing(inner);
    o.containerEnded(false, "PREEMPTED_BY_PRIMARY", "n1");
    o.containerEnded(false, "PREEMPTED_BY_PRIMARY", "n1");
    o.containerEnded(false, "SUCCEEDED", "n1");
    o.containerEnded(false, "FAILED", "n2");
    clock.advance(HOUR);
    o.containerEnded(false, "PREEMPTED_BY_POWER", "n2");
    o.containerEnded(true, "PREEMPTED_BY_DRAIN", "n1");
    const snap = h.snapshot();
    expect(snap.killsPerHour).toHaveLength(24);
    expect(snap.killsPerHour.at(-1)).toEqual({ hourMs: 101 * HOUR, kills: 2 });
    expect(snap.killsPerHour.at(-2)).toEqual({ hourMs: 100 * HOUR, kills: 2 });
    expect(snap.killsPerHour.slice(0, -2).every((k) => k.kills === 0)).toBe(true);
    expect(h.killsOn("n1")).toEqual({ primary: 2, power: 0, drain: 1, lastMs: clock.nowMs() });
    expect(h.killsOn("n2")).toMatchObject({ primary: 0, power: 1, drain: 0 });
    expect(h.killsOn("n3")).toEqual({ primary: 0, power: 0, drain: 0, lastMs: 0 });
    expect(inner.told).toHaveLength(6);
    // A day later the old hours have left the window.
    clock.advance(24 * HOUR);
    expect(h.snapshot().killsPerHour.every((k) => k.kills === 0)).toBe(true);
  });

  it("counts jobs submitted and ended by final state", () => {
    const h = new ClusterHistory(() => [], new ManualClock(0), 60_000);
    const inner = recorder();
    const o = h.observing(inner);
    for (const id of ["a", "b", "c", "d"]) o.submitted(id);
    o.finished("a", "FINISHED", "JOB_SUCCEEDED");
    o.finished("b", "FAILED", "JOB_FAILED");
    o.finished("c", "KILLED", "JOB_KILLED");
    expect(h.snapshot().counters).toMatchObject({ submitted: 4, finished: 1, failed: 1, killed: 1 });
    expect(inner.told).toContain("finished b FAILED");
  });

  it("continues after a restart from the store: the same samples, kills and counters; hours past the day dropped", async () => {
    const dir = mkdtempSync(join(tmpdir(), "harvest-history-"));
    const log = new Logger("test", "error");
    const store = new RmStateStore(join(dir, "rm-state"));
    await store.open();
    try {
      const clock = new ManualClock(100 * HOUR);
      const cores = () => [server(4000, 1000, 2000, 2)];
      const first = new ClusterHistory(cores, clock, 600_000);
      await first.restore(store, log);
      const observer = first.observing(recorder());
      first.start();
      first.stop();
      observer.submitted("app_1");
      observer.finished("app_1", "KILLED", "JOB_KILLED");
      observer.containerEnded(false, "PREEMPTED_BY_PRIMARY", "n1");
      for (let i = 0; i < 8; i++) {
        clock.advance(600_000);
        first.sample();
      }
      await first.saved();
      const before = first.snapshot();
      expect(before.samples).toHaveLength(9);
      // A new resource manager on the same store (a restart): the same day, not a fresh one.
      clock.advance(60_000);
      const second = new ClusterHistory(cores, clock, 600_000);
      await second.restore(store, log);
      second.start();
      second.stop();
      await second.saved();
      const after = second.snapshot();
      expect(after.samples.slice(0, 9)).toEqual(before.samples);
      expect(after.samples).toHaveLength(10);
      expect(after.counters).toEqual(before.counters);
      expect(after.counters).toMatchObject({ submitted: 1, killed: 1 });
      expect(after.killsPerHour).toEqual(before.killsPerHour);
      expect(second.killsOn("n1")).toEqual(first.killsOn("n1"));
      // A day and more later, the first hours leave the store.
      clock.advance(26 * HOUR);
      second.sample();
      await second.saved();
      const hours = [...(await store.usageHistory()).hours.keys()];
      expect(Math.min(...hours)).toBeGreaterThanOrEqual(clock.nowMs() - 25 * HOUR);
    } finally {
      await store.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
