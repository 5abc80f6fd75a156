/**
 * The power meter contract, run against every implementation: the RAPL reader over a fake powercap tree, the model
 * (utilization through a power profile) and the trace replay. Each meter's own arithmetic is tested in
 * power-meter.test.ts.
 */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { createPowerMeter } from "../../../nodemanager/power-meter.js";
import type { PowerMeter } from "../../../nodemanager/power-meter.js";

const tmp = mkdtempSync(join(tmpdir(), "harvest-meter-contract-"));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));
let made = 0;

/** A meter under test, and how to make its next reading's load `load` (0..1) over `dtMs`. */
interface MeterCase {
  name: string;
  /** Whether a higher load gives a higher reading (a replayed trace ignores the load). */
  followsLoad: boolean;
  make(): { meter: PowerMeter; step(load: number, dtMs: number): void };
}

const cases: MeterCase[] = [
  {
    name: "rapl (fake powercap)",
    followsLoad: true,
    make: () => {
      const root = join(tmp, `powercap-${made++}`);
      const zone = join(root, "intel-rapl:0");
      mkdirSync(zone, { recursive: true });
      writeFileSync(join(zone, "name"), "package-0\n");
      writeFileSync(join(zone, "max_energy_range_uj"), "262143328850\n");
      let energyUj = 1_000_000;
      const write = (): void => writeFileSync(join(zone, "energy_uj"), `${energyUj}\n`);
      write();
      return {
        meter: createPowerMeter("rapl", { utilization: () => 0 }, { raplRoot: root }),
        // 40 W idle, 200 W at full load: energy accrues at that rate.
        step: (load, dtMs) => {
          energyUj += Math.round((40 + 160 * load) * dtMs * 1000);
          write();
        },
      };
    },
  },
  {
    name: "model",
    followsLoad: true,
    make: () => {
      let utilization = 0;
      return {
        meter: createPowerMeter("model", { utilization: () => utilization }),
        step: (load) => (utilization = load),
      };
    },
  },
  {
    name: "trace",
    followsLoad: false,
    make: () => {
      const file = join(tmp, `power-${made++}.csv`);
      writeFileSync(file, "time_s,watts\n0,120\n1,180\n2,90\n3,240\n");
      return { meter: createPowerMeter(`trace:${file}`, { utilization: () => 0 }), step: () => undefined };
    },
  },
];

/** Readings at `loads`, one a second from t = 10 s; the first read primes a meter that needs a baseline. */
function readings(c: MeterCase, loads: readonly number[]): ({ watts: number; idleWatts: number } | undefined)[] {
  const { meter, step } = c.make();
  let now = 10_000;
  meter.read(now);
  return loads.map((load) => {
    now += 1_000;
    step(load, 1_000);
    const r = meter.read(now);
    if (r) expect(r.timeMs).toBe(now);
    return r && { watts: r.watts, idleWatts: r.idleWatts };
  });
}

describe.each(cases)("the power meter contract: $name", (c) => {
  it("names its kind and what it measures", () => {
    const { meter } = c.make();
    expect(["rapl", "model", "trace"]).toContain(meter.kind);
    expect(meter.description).toMatch(new RegExp(`^${meter.kind}: .+`));
  });

  it("reads finite, non-negative watts, never below the idle watts it reports", () => {
    const got = readings(c, [0, 0.3, 1, 0.5, 0, 0.8]);
    expect(got.every((r) => r !== undefined)).toBe(true);
    for (const r of got) {
      expect(Number.isFinite(r!.watts)).toBe(true);
      expect(r!.idleWatts).toBeGreaterThanOrEqual(0);
      expect(r!.watts).toBeGreaterThanOrEqual(r!.idleWatts);
    }
  });

  it.runIf(c.followsLoad)("reads more watts for more load (more energy in the same time)", () => {
    const loads = [0, 0.25, 0.5, 0.75, 1];
    const watts = readings(c, loads).map((r) => r!.watts);
    for (let i = 1; i < watts.length; i++) expect(watts[i]!).toBeGreaterThan(watts[i - 1]!);
  });

  it("reads the same for the same inputs", () => {
    const loads = [0.1, 0.9, 0.4];
    expect(readings(c, loads)).toEqual(readings(c, loads));
  });

  it("reads nothing once closed, and closes twice without harm", () => {
    const { meter, step } = c.make();
    meter.read(1_000);
    meter.close();
    meter.close();
    step(0.5, 1_000);
    expect(meter.read(2_000)).toBeUndefined();
  });
});
