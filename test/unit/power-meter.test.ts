import { chmodSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { DEFAULT_POWER_PROFILE_ID, profileWatts, resolvePowerProfile } from "../../common/power-profiles.js";
import { createPowerMeter, parsePowerTrace, raplAvailable, RaplPowerMeter } from "../../nodemanager/power-meter.js";
import { thrown } from "../error-code.js";
import { detailsOf } from "../../common/errors.js";

const tmp = mkdtempSync(join(tmpdir(), "harvest-power-meter-"));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));
let counter = 0;

const idleInputs = { utilization: () => 0 };

/** A fake powercap tree: zones by directory name, each with its files. */
function fakeSysfs(zones: Record<string, Record<string, string | number>>): string {
  const root = join(tmp, `powercap-${counter++}`);
  mkdirSync(root);
  for (const [zone, files] of Object.entries(zones)) {
    mkdirSync(join(root, zone));
    for (const [name, value] of Object.entries(files)) writeFileSync(join(root, zone, name), `${value}\n`);
  }
  return root;
}

function setEnergy(root: string, zone: string, uj: number): void {
  writeFileSync(join(root, zone, "energy_uj"), `${uj}\n`);
}

const MAX_UJ = 262_143_328_850;

function twoPackages(): string {
  return fakeSysfs({
    "intel-rapl:0": { name: "package-0", energy_uj: 1_000_000, max_energy_range_uj: MAX_UJ },
    "intel-rapl:1": { name: "package-1", energy_uj: 5_000_000, max_energy_range_uj: MAX_UJ },
    // Neither a subzone (core/dram, counted inside or beside the package) nor psys (the platform) is summed.
    "intel-rapl:0:0": { name: "core", energy_uj: 0, max_energy_range_uj: MAX_UJ },
    "intel-rapl:2": { name: "psys", energy_uj: 0, max_energy_range_uj: MAX_UJ },
  });
}

describe("the RAPL meter on fake sysfs counters", () => {
  it("sums the package counters: no reading first, then joules over seconds", () => {
    const root = twoPackages();
    const meter = createPowerMeter("rapl", idleInputs, { raplRoot: root });
    expect(meter.kind).toBe("rapl");
    expect(meter.description).toBe(`rapl: ${join(root, "intel-rapl:0")} + ${join(root, "intel-rapl:1")}`);
    expect(meter.read(10_000)).toBeUndefined();
    // 50 J + 30 J over 2 s = 40 W; the core and psys counters moving changes nothing.
    setEnergy(root, "intel-rapl:0", 51_000_000);
    setEnergy(root, "intel-rapl:1", 35_000_000);
    setEnergy(root, "intel-rapl:0:0", 999_000_000);
    setEnergy(root, "intel-rapl:2", 999_000_000);
    expect(meter.read(12_000)).toEqual({ timeMs: 12_000, watts: 40, idleWatts: 40 });
    // 120 J over 1 s.
    setEnergy(root, "intel-rapl:0", 111_000_000);
    setEnergy(root, "intel-rapl:1", 95_000_000);
    const r = meter.read(13_000)!;
    expect(r.watts).toBeCloseTo(120, 9);
    expect(r.idleWatts).toBe(40); // the lowest reading so far
  });

  it("handles a counter wrapping around at max_energy_range_uj", () => {
    const root = fakeSysfs({
      "intel-rapl:0": { name: "package-0", energy_uj: MAX_UJ - 10_000_000, max_energy_range_uj: MAX_UJ },
    });
    const meter = new RaplPowerMeter({ raplRoot: root });
    expect(meter.read(0)).toBeUndefined();
    setEnergy(root, "intel-rapl:0", 15_000_000); // 10 J to the wrap, 15 J after it
    expect(meter.read(500)!.watts).toBeCloseTo(50, 9);
  });

  it("gives no reading for an unreadable counter or a clock that does not move, and recovers after", () => {
    const root = twoPackages();
    const meter = createPowerMeter("rapl", idleInputs, { raplRoot: root, idleWatts: 30 });
    expect(meter.read(0)).toBeUndefined();
    setEnergy(root, "intel-rapl:0", 11_000_000);
    expect(meter.read(0)).toBeUndefined();
    expect(meter.read(1000)).toEqual({ timeMs: 1000, watts: 10, idleWatts: 30 });
    writeFileSync(join(root, "intel-rapl:1", "energy_uj"), "garbage\n");
    expect(meter.read(2000)).toBeUndefined();
    setEnergy(root, "intel-rapl:1", 5_000_000);
    expect(meter.read(3000)).toBeUndefined(); // a fresh baseline
    setEnergy(root, "intel-rapl:0", 12_000_000);
    expect(meter.read(4000)!.watts).toBeCloseTo(1, 9);
  });

  it("is refused when there is no package counter to read, and 'auto' falls back to the model", () => {
    const empty = fakeSysfs({});
    const err = thrown(() => createPowerMeter("rapl", idleInputs, { raplRoot: empty }));
    expect(err.code).toBe("CONFIG_INVALID");
    expect(detailsOf(err, "INVALID_ARGUMENT", "CONFIG_INVALID")?.field).toBe("powerMeter");
    expect(raplAvailable(empty)).toBe(false);
    const auto = createPowerMeter("auto", { utilization: () => 0.5 }, { raplRoot: empty });
    expect(auto.kind).toBe("model");
    expect(auto.read(0)!.watts).toBeCloseTo(profileWatts(resolvePowerProfile(DEFAULT_POWER_PROFILE_ID), 0.5), 9);
    const root = twoPackages();
    expect(raplAvailable(root)).toBe(true);
    expect(createPowerMeter("auto", idleInputs, { raplRoot: root }).kind).toBe("rapl");
  });

  it.skipIf(process.getuid?.() === 0)("treats a root-only energy_uj as unavailable", () => {
    const root = twoPackages();
    chmodSync(join(root, "intel-rapl:0", "energy_uj"), 0o000);
    chmodSync(join(root, "intel-rapl:1", "energy_uj"), 0o000);
    expect(raplAvailable(root)).toBe(false);
    expect(createPowerMeter("auto", idleInputs, { raplRoot: root }).kind).toBe("model");
  });
});

describe("the model meter", () => {
  it("reads the server's utilization through the named profile", () => {
    let u = 0.25;
    const meter = createPowerMeter("model:hpe-dl325g10p-epyc-7763", { utilization: () => u });
    const profile = resolvePowerProfile("hpe-dl325g10p-epyc-7763");
    expect(meter.kind).toBe("model");
    expect(meter.description).toContain(profile.name);
    expect(meter.read(5)).toEqual({ timeMs: 5, watts: profileWatts(profile, 0.25), idleWatts: profile.idleWatts });
    u = 1;
    expect(meter.read(6)!.watts).toBe(268);
    u = Number.NaN;
    expect(meter.read(7)).toBeUndefined();
  });

  it("uses the default profile for plain 'model' and refuses an unknown profile", () => {
    expect(createPowerMeter("model", idleInputs).read(0)!.idleWatts).toBe(
      resolvePowerProfile(DEFAULT_POWER_PROFILE_ID).idleWatts,
    );
    expect(
      detailsOf(
        thrown(() => createPowerMeter("model:nope", idleInputs)),
        "INVALID_ARGUMENT",
        "CONFIG_INVALID",
      )?.field,
    ).toBe("profile");
    expect(
      detailsOf(
        thrown(() => createPowerMeter("wattmeter", idleInputs)),
        "INVALID_ARGUMENT",
        "CONFIG_INVALID",
      )?.field,
    ).toBe("powerMeter");
  });
});

function traceFile(text: string): string {
  const file = join(tmp, `power-${counter++}.csv`);
  writeFileSync(file, text);
  return file;
}

describe("the trace meter", () => {
  it("replays from the first read, holds each sample, and loops", () => {
    const file = traceFile("time_s,watts\n100,150\n110,180\n120,240\n");
    const meter = createPowerMeter(`trace:${file}`, idleInputs);
    expect(meter.kind).toBe("trace");
    expect(meter.description).toMatch(/^trace: power-\d+\.csv$/);
    const at = (sec: number): number | undefined => meter.read(1_000_000 + sec * 1000)?.watts;
    expect(at(0)).toBe(150);
    expect(meter.read(1_000_000)!.idleWatts).toBe(150); // the lowest watts in the file
    expect(at(9.9)).toBe(150);
    expect(at(10)).toBe(180);
    expect(at(25)).toBe(240);
    // One loop is the span (20 s) plus the median step (10 s).
    expect(at(30)).toBe(150);
    expect(at(41)).toBe(180);
  });

  it("plays faster with @speed and needs no header", () => {
    const file = traceFile("0,100\n10,200\n");
    const meter = createPowerMeter(`trace:${file}@2`, idleInputs, { idleWatts: 90 });
    expect(meter.read(0)).toEqual({ timeMs: 0, watts: 100, idleWatts: 90 });
    expect(meter.read(5000)!.watts).toBe(200);
    expect(meter.description).toContain("at 2x");
  });

  it("rejects a truncated or malformed file naming the line", () => {
    const cases: [string, string][] = [
      ["time_s,watts\n0,100\n10,", "3"],
      ["time_s,watts\n0,100\n10", "3"],
      ["0,100\n0,120\n", "2"],
      ["0,100\n5,-3\n", "2"],
      ["0,100\n5,abc\n", "2"],
    ];
    for (const [text, line] of cases) {
      const err = thrown(() => createPowerMeter(`trace:${traceFile(text)}`, idleInputs));
      expect(err.code).toBe("TRACE_MALFORMED");
      expect(detailsOf(err, "TRACE_MALFORMED", "CONFIG_INVALID")?.line).toBe(line);
    }
    expect(thrown(() => parsePowerTrace("time_s,watts\n", "empty.csv")).code).toBe("TRACE_MALFORMED");
  });

  it("refuses a missing file and a speed that is not positive", () => {
    const missing = thrown(() => createPowerMeter(`trace:${join(tmp, "none.csv")}`, idleInputs));
    expect(missing.code).toBe("CONFIG_INVALID");
    const file = traceFile("0,100\n");
    expect(thrown(() => createPowerMeter(`trace:${file}@0`, idleInputs)).code).toBe("CONFIG_INVALID");
    expect(thrown(() => createPowerMeter("trace:", idleInputs)).code).toBe("CONFIG_INVALID");
  });
});
