/** How `harvest cluster up` and the demo choose each server's primary tenant. */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { choosePrimaries, findSpikeWindow } from "../../cli/primary-traces.js";
import { readUtilizationFile, valueAt } from "../../common/trace-io.js";
import { isHarvestError } from "../../common/errors.js";

const window = { calmSteps: 3, calmBelowPct: 50, spikeWithinSteps: 4, spikePct: 85 };

describe("findSpikeWindow", () => {
  it("finds the first calm lead-in that a spike follows soon", () => {
    //            0   1   2   3   4   5   6   7   8   9  10  11
    const pct = [90, 10, 10, 10, 20, 30, 95, 10, 10, 10, 10, 10];
    expect(findSpikeWindow(pct, window)).toBe(1);
  });

  it("rejects a lead-in that is not calm, and a spike that comes too late", () => {
    expect(findSpikeWindow([10, 60, 10, 10, 10, 10, 10, 10, 10, 10], window)).toBeUndefined();
    // The only calm run ends four busy-but-not-spiking steps before the spike.
    expect(findSpikeWindow([10, 10, 10, 60, 60, 60, 60, 60, 95], window)).toBeUndefined();
  });
});

describe("choosePrimaries", () => {
  const dir = mkdtempSync(join(tmpdir(), "harvest-primaries-"));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it("gives every server the real /proc monitor for proc", async () => {
    expect((await choosePrimaries("proc", 3, dir)).map((p) => p.spec)).toEqual(["proc", "proc", "proc"]);
  });

  it("rejects an unknown source and a missing trace file with CONFIG_INVALID", async () => {
    for (const flag of ["tracer", "trace:/no/such/file.csv"]) {
      const err = await choosePrimaries(flag, 1, dir).catch((e: unknown) => e);
      expect(isHarvestError(err) ? err.code : err).toBe("CONFIG_INVALID");
    }
  });

  it("starts each demo primary where its trace has a calm lead-in followed by a spike", async () => {
    const choices = await choosePrimaries("trace", 4, dir, { spiky: true });
    expect(choices).toHaveLength(4);
    let spiky = 0;
    for (const c of choices) {
      const series = await readUtilizationFile(c.spec.replace(/^trace:/, ""), undefined, { duplicateTimes: "merge" });
      const step = series.stepSec * 1000;
      const lead = Array.from({ length: 14 }, (_, k) => valueAt(series, c.offsetMs + k * step));
      const after = Array.from({ length: 36 }, (_, k) => valueAt(series, c.offsetMs + (14 + k) * step));
      if (lead.every((v) => v < 50) && after.some((v) => v >= 85)) spiky++;
    }
    // Real traces (when ../shared/data is there) mix bursty and calm tenants; generated ones all spike early.
    expect(spiky).toBeGreaterThanOrEqual(2);
  });
});
