import { describe, expect, it } from "vitest";
import { isHarvestError } from "../../common/errors.js";
import { StepPrimaryMonitor } from "../../common/step-monitor.js";

describe("StepPrimaryMonitor (model primary tenant)", () => {
  it("reports the level it was last set to, on the node's capacity scale", async () => {
    const monitor = new StepPrimaryMonitor({ capacityMilli: 4000 });
    await monitor.start();
    expect(monitor.sample()).toEqual({ cpuMilli: 0, utilization: 0 });
    monitor.set(3100);
    expect(monitor.sample()).toEqual({ cpuMilli: 3100, utilization: 0.775 });
    monitor.set(500);
    expect(monitor.sample().cpuMilli).toBe(500);
    await monitor.stop();
  });

  it("clamps levels to 0..capacity like the real monitors' readings", async () => {
    const monitor = new StepPrimaryMonitor({ capacityMilli: 2000, initialMilli: 9000 });
    await monitor.start();
    expect(monitor.sample()).toEqual({ cpuMilli: 2000, utilization: 1 });
    monitor.set(-50);
    expect(monitor.sample().cpuMilli).toBe(0);
  });

  it("records when a step was set and when a sampler first saw it", async () => {
    const monitor = new StepPrimaryMonitor({ capacityMilli: 4000 });
    await monitor.start();
    monitor.set(3000);
    const step = monitor.lastStep;
    expect(step.cpuMilli).toBe(3000);
    expect(step.seenAtMs).toBeUndefined();
    monitor.sample();
    const seen = monitor.lastStep.seenAtMs;
    expect(seen).toBeGreaterThanOrEqual(step.setAtMs);
    // Later samples do not move the first sighting.
    monitor.sample();
    expect(monitor.lastStep.seenAtMs).toBe(seen);
  });

  it("refuses to sample before start() and rejects a capacity that is not positive", () => {
    const monitor = new StepPrimaryMonitor({ capacityMilli: 1000 });
    expect(() => monitor.sample()).toThrow(/before start/);
    let caught: unknown;
    try {
      new StepPrimaryMonitor({ capacityMilli: 0 });
    } catch (err) {
      caught = err;
    }
    expect(isHarvestError(caught, "CONFIG_INVALID")).toBe(true);
  });
});
