import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, afterEach, describe, expect, it, vi } from "vitest";
import {
  BUILTIN_POWER_PROFILES,
  DEFAULT_POWER_PROFILE_ID,
  defaultSpecPowerFile,
  loadSpecPowerProfiles,
  parseSpecPowerText,
  powerProfileProblem,
  profileUtilization,
  profileWatts,
  resolvePowerProfile,
} from "../../common/power-profiles.js";
import type { PowerProfile } from "../../common/power-profiles.js";
import { thrown } from "../error-code.js";
import { detailsOf } from "../../common/errors.js";

const tmp = mkdtempSync(join(tmpdir(), "harvest-power-profiles-"));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));
afterEach(() => vi.unstubAllEnvs());

const LOADS = [10, 20, 30, 40, 50, 60, 70, 80, 90, 100];
const HEADER = [
  "Test_Sponsor",
  "Publication",
  ...LOADS.slice()
    .reverse()
    .map((l) => `${l}_AvgPower`),
  "ActiveIdle",
  "HW_Vendor",
  "HW_Model",
  "HW_CPUName",
  "HW_CPUsEnabled",
  "SUT_Notes",
].join("|");

/** A row in the column order of HEADER; loadWatts are 10 %..100 %. */
function specRow(idle: number, loadWatts: number[], notes = "none", model = "Box 1"): string {
  return [
    "Acme",
    "Jan 1, 2020",
    ...loadWatts.slice().reverse().map(String),
    String(idle),
    "Acme &quot;Servers&quot;",
    model,
    "Xeon Something",
    "16 cores, 2 chips, 8 cores/chip",
    notes,
  ].join("|");
}

const CURVE = [100, 110, 120, 130, 140, 150, 160, 170, 180, 200];

describe("builtin power profiles", () => {
  it("are well-formed, uniquely named SPECpower results and include the default", () => {
    const ids = BUILTIN_POWER_PROFILES.map((p) => p.id);
    expect(new Set(ids).size).toBe(ids.length);
    expect(BUILTIN_POWER_PROFILES.length).toBeGreaterThanOrEqual(3);
    expect(ids).toContain(DEFAULT_POWER_PROFILE_ID);
    for (const p of BUILTIN_POWER_PROFILES) {
      expect(powerProfileProblem(p)).toBeUndefined();
      expect(p.source).toMatch(/^SPECpower_ssj2008 result of .+ published .+ \(spec:\d+\)$/);
    }
  });

  it("cannot be changed by a caller", () => {
    const p = BUILTIN_POWER_PROFILES[0]!;
    expect(() => ((p.loadWatts as number[])[0] = 1)).toThrow(TypeError);
    const copy = resolvePowerProfile(p.id);
    copy.idleWatts = 1;
    expect(resolvePowerProfile(p.id).idleWatts).toBe(p.idleWatts);
  });
});

describe("profileWatts", () => {
  it("hits the published points of every builtin profile exactly at 0 %, 10 %, ..., 100 %", () => {
    for (const p of BUILTIN_POWER_PROFILES) {
      expect(profileWatts(p, 0)).toBe(p.idleWatts);
      LOADS.forEach((l, i) => expect(profileWatts(p, l / 100)).toBeCloseTo(p.loadWatts[i]!, 9));
    }
  });

  it("interpolates linearly between points and never decreases with load", () => {
    const p = resolvePowerProfile(DEFAULT_POWER_PROFILE_ID);
    expect(profileWatts(p, 0.05)).toBeCloseTo((p.idleWatts + p.loadWatts[0]!) / 2, 9);
    expect(profileWatts(p, 0.35)).toBeCloseTo((p.loadWatts[2]! + p.loadWatts[3]!) / 2, 9);
    for (const q of BUILTIN_POWER_PROFILES) {
      let previous = -Infinity;
      for (let u = 0; u <= 1.0000001; u += 0.001) {
        const w = profileWatts(q, u);
        expect(w).toBeGreaterThanOrEqual(previous);
        previous = w;
      }
    }
  });

  it("clamps utilization to 0..1 and reads NaN as idle", () => {
    const p = BUILTIN_POWER_PROFILES[1]!;
    expect(profileWatts(p, -0.5)).toBe(p.idleWatts);
    expect(profileWatts(p, Number.NaN)).toBe(p.idleWatts);
    expect(profileWatts(p, 1.7)).toBe(p.loadWatts[9]);
  });
});

describe("profileUtilization", () => {
  it("inverts profileWatts and clamps outside the curve", () => {
    for (const p of BUILTIN_POWER_PROFILES) {
      for (let u = 0.01; u < 1; u += 0.037) expect(profileUtilization(p, profileWatts(p, u))).toBeCloseTo(u, 9);
      expect(profileUtilization(p, p.idleWatts - 10)).toBe(0);
      expect(profileUtilization(p, p.loadWatts[9]! + 10)).toBe(1);
    }
  });

  it("gives the lowest utilization where the curve is flat", () => {
    const flat: PowerProfile = {
      id: "flat",
      name: "flat",
      source: "test",
      idleWatts: 50,
      loadWatts: [60, 70, 70, 70, 80, 90, 100, 110, 120, 130],
    };
    expect(profileUtilization(flat, 70)).toBeCloseTo(0.2, 12);
    expect(profileUtilization(flat, 75)).toBeCloseTo(0.45, 12);
  });
});

describe("parseSpecPowerText", () => {
  it("reads one profile per row with cores, sockets, quoted fields and decoded entities", () => {
    const text = [HEADER, specRow(50, CURVE, '"start /node [0|1]"'), specRow(40, CURVE, "x", "Box 2"), ""].join("\n");
    const profiles = parseSpecPowerText(text, "t.csv");
    expect(profiles).toHaveLength(2);
    expect(profiles[0]).toMatchObject({
      id: "spec:1",
      name: 'Acme "Servers" Box 1',
      idleWatts: 50,
      loadWatts: CURVE,
      cores: 16,
      sockets: 2,
    });
    expect(profiles[0]!.source).toContain("published Jan 1, 2020");
    expect(profiles[1]).toMatchObject({ id: "spec:2", idleWatts: 40 });
  });

  it("rejects a truncated file naming the line of the cut row", () => {
    const full = [HEADER, specRow(50, CURVE), specRow(40, CURVE)].join("\n");
    const cut = full.slice(0, full.length - 30);
    const err = thrown(() => parseSpecPowerText(cut, "cut.csv"));
    expect(err.code).toBe("TRACE_MALFORMED");
    expect(err.details).toMatchObject({ file: "cut.csv", line: "3" });
  });

  it("rejects a quote left open by a cut, a bad number, a falling curve and a header without the columns", () => {
    const open = [HEADER, specRow(50, CURVE, '"start /node [0|1')].join("\n");
    expect(thrown(() => parseSpecPowerText(open, "f")).details).toMatchObject({ line: "2" });
    const badNumber = [HEADER, specRow(50, CURVE), specRow(50, CURVE).replace("|200|", "|2OO|")].join("\n");
    expect(thrown(() => parseSpecPowerText(badNumber, "f")).details).toMatchObject({ line: "3" });
    const falling = [HEADER, specRow(50, [100, 110, 105, 130, 140, 150, 160, 170, 180, 200])].join("\n");
    const fallErr = thrown(() => parseSpecPowerText(falling, "f"));
    expect(fallErr.code).toBe("TRACE_MALFORMED");
    expect(fallErr.message).toMatch(/falls from 110 W to 105 W at 30 %/);
    const noColumns = ["a|b", "1|2"].join("\n");
    expect(thrown(() => parseSpecPowerText(noColumns, "f")).details).toMatchObject({ line: "1" });
    expect(thrown(() => parseSpecPowerText(HEADER + "\n", "f")).code).toBe("TRACE_MALFORMED");
  });
});

describe("loadSpecPowerProfiles and resolvePowerProfile without the data", () => {
  it("says CONFIG_INVALID on field source when the file is absent", () => {
    const err = thrown(() => loadSpecPowerProfiles(join(tmp, "nope.csv")));
    expect(err.code).toBe("CONFIG_INVALID");
    expect(detailsOf(err, "INVALID_ARGUMENT", "CONFIG_INVALID")?.field).toBe("source");
    vi.stubEnv("HARVEST_SHARED_DATA", join(tmp, "no-such-dir"));
    expect(defaultSpecPowerFile()).toBeUndefined();
    expect(
      detailsOf(
        thrown(() => loadSpecPowerProfiles()),
        "INVALID_ARGUMENT",
        "CONFIG_INVALID",
      )?.field,
    ).toBe("source");
    const spec = thrown(() => resolvePowerProfile("spec:3"));
    expect(spec.code).toBe("CONFIG_INVALID");
    expect(spec.message).toMatch(/needs the SPECpower file/);
  });

  it("reads a file given by path and rejects unknown ids and bad row numbers", () => {
    const file = join(tmp, "small.csv");
    writeFileSync(file, [HEADER, specRow(50, CURVE)].join("\n"));
    expect(loadSpecPowerProfiles(file)[0]!.loadWatts).toEqual(CURVE);
    for (const bad of ["no-such-server", "spec:0", "spec:x", "spec:-2", ""]) {
      const err = thrown(() => resolvePowerProfile(bad));
      expect(err.code).toBe("CONFIG_INVALID");
      expect(detailsOf(err, "INVALID_ARGUMENT", "CONFIG_INVALID")?.field).toBe("profile");
    }
  });
});

const specFile = defaultSpecPowerFile();

describe.skipIf(specFile === undefined)("the SPECpower_ssj2008 file in shared/data (facts from its README)", () => {
  it("parses all 619 results, every curve rising with load", () => {
    const profiles = loadSpecPowerProfiles();
    expect(profiles).toHaveLength(619);
    for (const p of profiles) {
      expect(powerProfileProblem(p)).toBeUndefined();
      expect(p.loadWatts[9]!).toBeGreaterThan(p.idleWatts);
    }
    const idle = profiles.map((p) => p.idleWatts).sort((a, b) => a - b);
    expect(idle[0]).toBeCloseTo(9.33, 2);
    expect(idle[idle.length - 1]).toBe(993);
    const sockets = new Map<number | undefined, number>();
    for (const p of profiles) sockets.set(p.sockets, (sockets.get(p.sockets) ?? 0) + 1);
    expect(Object.fromEntries(sockets)).toEqual({ 1: 136, 2: 406, 4: 67, 8: 10 });
  });

  it("holds the builtin profiles' numbers at the rows their sources name", () => {
    for (const b of BUILTIN_POWER_PROFILES) {
      const row = /\((spec:\d+)\)$/.exec(b.source)![1]!;
      const p = resolvePowerProfile(row);
      expect({ idle: p.idleWatts, load: p.loadWatts, cores: p.cores, sockets: p.sockets }).toEqual({
        idle: b.idleWatts,
        load: b.loadWatts,
        cores: b.cores,
        sockets: b.sockets,
      });
    }
    expect(thrown(() => resolvePowerProfile("spec:620")).message).toMatch(/rows 1\.\.619/);
  });

  it("rejects a copy cut in the middle of a row, naming that row's line", () => {
    const text = readFileSync(specFile!, "utf8");
    const lines = text.split("\n");
    // Cut line 301 (result row 300) in half: everything before it is whole.
    const cut = lines.slice(0, 300).join("\n") + "\n" + lines[300]!.slice(0, Math.floor(lines[300]!.length / 2));
    const file = join(tmp, "spec_cut.csv");
    writeFileSync(file, cut);
    const err = thrown(() => loadSpecPowerProfiles(file));
    expect(err.code).toBe("TRACE_MALFORMED");
    expect(detailsOf(err, "TRACE_MALFORMED", "CONFIG_INVALID")?.line).toBe("301");
  });
});
