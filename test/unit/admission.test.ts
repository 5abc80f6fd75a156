import { describe, expect, it } from "vitest";
import { HarvestError } from "../../common/errors.js";
import {
  AdmissionOutlook,
  cantelliBound,
  cantelliHeadroom,
  decideAdmission,
  idleClusterDecision,
  markovBound,
  neverAdmissible,
  tuneThreshold,
} from "../../resourcemanager/policy/admission.js";
import { AdmissionQueue, JobDemandModel } from "../../resourcemanager/policy/admission-queue.js";
import { DemandProfile, fixedDemand, primaryDemandMoments } from "../../resourcemanager/policy/demand-profile.js";
import { resolveAdmissionOptions } from "../../resourcemanager/policy/admission-options.js";
import type { AdmissionCluster, AdmissionDecision, AdmissionServer } from "../../resourcemanager/policy/admission.js";
import type { DemandMoments, PrimaryDemandSource } from "../../resourcemanager/policy/demand-profile.js";

const HOUR = 3_600_000;
const DAY = 24 * HOUR;
/** Midnight UTC of some day: slots and times of day are aligned to UTC days. */
const T0 = 19_000 * DAY;

/**
 * Two days of hourly samples of an office-hours tenant: 80 % from 09:00 to 17:59, 20 % otherwise, 5 points lower on
 * the first day and 5 higher on the second. So each hour of the day has the two samples base - 5 and base + 5.
 */
function officeHoursSeries(): { timesMs: number[]; cpuPct: number[] } {
  const timesMs: number[] = [];
  const cpuPct: number[] = [];
  for (let day = 0; day < 2; day++)
    for (let h = 0; h < 24; h++) {
      timesMs.push(T0 + day * DAY + h * HOUR);
      cpuPct.push((h >= 9 && h <= 17 ? 80 : 20) + (day === 0 ? -5 : 5));
    }
  return { timesMs, cpuPct };
}

/** Hourly slots, no neighbours: each hour of the day is estimated from its own two samples. */
const HOURLY = { periodic: true, slotMs: HOUR, neighbourSlots: 0, minSamples: 2 };

function server(id: string, o: Partial<AdmissionServer> = {}): AdmissionServer {
  return {
    serverId: id,
    capacityMilli: 100_000,
    reserveMilli: 0,
    allocatedMilli: 0,
    primaryNowMilli: 0,
    primary: fixedDemand(0, 0),
    ...o,
  };
}

/** A primary whose source must not be read (the zeroth policy ignores the primaries' distributions). */
const UNREADABLE: PrimaryDemandSource = {
  moments(): DemandMoments {
    throw new Error("the zeroth policy read a demand distribution");
  },
};

/** A primary at `beforePct` until `switchMs`, then at `afterPct`, with no variance. */
function stepDemand(switchMs: number, beforePct: number, afterPct: number): PrimaryDemandSource {
  return {
    moments: (atMs) => ({ mean: atMs < switchMs ? beforePct : afterPct, variance: 0, samples: 10, basis: "all" }),
  };
}

function codeOf(fn: () => unknown): string | undefined {
  try {
    fn();
  } catch (err) {
    return err instanceof HarvestError ? err.code : "not a HarvestError";
  }
  return undefined;
}

describe("the bounds (seeds/003 Definitions 4.2 and 4.4)", () => {
  it("computes Markov's bound as E[D] / C", () => {
    expect(markovBound(60, 100)).toBeCloseTo(0.6, 12);
    // A bound on a probability: at most 1, and 1 when there is no capacity.
    expect(markovBound(150, 100)).toBe(1);
    expect(markovBound(10, 0)).toBe(1);
  });

  it("computes Cantelli's bound as sigma^2 / (sigma^2 + (C - mu)^2), and 1 once the mean reaches capacity", () => {
    // 100 / (100 + 40^2) = 100 / 1700.
    expect(cantelliBound(60, 100, 100)).toBeCloseTo(0.0588235294, 9);
    expect(cantelliBound(100, 100, 100)).toBe(1);
    expect(cantelliBound(120, 0, 100)).toBe(1);
    // No variance and room to spare: no overrun possible.
    expect(cantelliBound(60, 0, 100)).toBe(0);
    expect(cantelliBound(Number.NaN, 1, 100)).toBe(1);
  });

  it("gives the Cantelli headroom in closed form, which puts the bound exactly at the threshold", () => {
    // sigma = 10, sqrt(0.9 / 0.1) = 3: 100 - 60 - 30 = 10; with 70: 100 / (100 + 30^2) = 0.1.
    expect(cantelliHeadroom(60, 100, 100, 0.1)).toBeCloseTo(10, 9);
    expect(cantelliBound(70, 100, 100)).toBeCloseTo(0.1, 12);
    // sqrt(0.8 / 0.2) = 2: 100 - 60 - 20 = 20; with 80: 100 / (100 + 20^2) = 0.2.
    expect(cantelliHeadroom(60, 100, 100, 0.2)).toBeCloseTo(20, 9);
    expect(cantelliBound(80, 100, 100)).toBeCloseTo(0.2, 12);
    // sqrt(0.99 / 0.01) = 9.95 standard deviations do not fit in 40: no headroom.
    expect(cantelliHeadroom(60, 100, 100, 0.01)).toBe(0);
    expect(cantelliHeadroom(60, 0, 100, 0.01)).toBe(40);
    expect(cantelliHeadroom(Number.NaN, 0, 100, 0.1)).toBe(0);
    expect(codeOf(() => cantelliHeadroom(60, 100, 100, 0))).toBe("INVALID_ARGUMENT");
  });
});

describe("demand moments of a primary tenant", () => {
  it("estimates a periodic tenant per time of day, from the same hour of every day", () => {
    // 13:30 is in slot 13: samples 75 and 85, mean 80, variance (5^2 + 5^2) / (2 - 1) = 50.
    expect(primaryDemandMoments(officeHoursSeries(), { ...HOURLY, atMs: T0 + 5 * DAY + 13.5 * HOUR })).toEqual({
      mean: 80,
      variance: 50,
      samples: 2,
      basis: "time-of-day",
    });
    // 03:00: samples 15 and 25.
    const night = primaryDemandMoments(officeHoursSeries(), { ...HOURLY, atMs: T0 + 7 * DAY + 3 * HOUR });
    expect(night.mean).toBeCloseTo(20, 12);
    expect(night.variance).toBeCloseTo(50, 12);
  });

  it("widens the window to the neighbouring slots, so a ramp shows up as variance", () => {
    const profile = new DemandProfile(officeHoursSeries(), { periodic: true, slotMs: HOUR, neighbourSlots: 1 });
    // 13:00 +- 1 h: 75, 85 three times: mean 80, variance 6 x 25 / 5 = 30.
    const noon = profile.moments(T0 + 13 * HOUR);
    expect(noon.samples).toBe(6);
    expect(noon.mean).toBeCloseTo(80, 12);
    expect(noon.variance).toBeCloseTo(30, 12);
    // 09:00 +- 1 h: 15, 25, 75, 85, 75, 85: mean 360 / 6 = 60; squared deviations 2025 + 1225 + 225 + 625 + 225 + 625
    // = 4950, over 5.
    const ramp = profile.moments(T0 + DAY + 9 * HOUR);
    expect(ramp.mean).toBeCloseTo(60, 12);
    expect(ramp.variance).toBeCloseTo(990, 9);
  });

  it("estimates a non-periodic tenant from all samples, whatever the time", () => {
    // The office-hours series read as unpredictable: mean (9 x 80 + 15 x 20) / 24 = 42.5; squared deviations per hour
    // of the day: office hours 32.5^2 + 42.5^2 = 2862.5 (x 9), nights 27.5^2 + 17.5^2 = 1062.5 (x 15); 41700 over 47.
    const all = primaryDemandMoments(officeHoursSeries(), { periodic: false, slotMs: HOUR, atMs: T0 + 13 * HOUR });
    expect(all).toMatchObject({ samples: 48, basis: "all" });
    expect(all.mean).toBeCloseTo(42.5, 12);
    expect(all.variance).toBeCloseTo(41700 / 47, 9);
    // A constant tenant alternating 38 and 42: mean 40 at any time, variance 48 x 2^2 / 47.
    const timesMs = Array.from({ length: 48 }, (_, i) => T0 + i * HOUR);
    const cpuPct = timesMs.map((_, i) => (i % 2 === 0 ? 38 : 42));
    const profile = new DemandProfile({ timesMs, cpuPct }, { slotMs: HOUR });
    for (const at of [T0 + 3 * HOUR, T0 + 13 * HOUR]) {
      expect(profile.moments(at).mean).toBeCloseTo(40, 12);
      expect(profile.moments(at).variance).toBeCloseTo(192 / 47, 12);
    }
  });

  it("falls back to all samples when the time of day has too little history, and to the prior with none", () => {
    // Only the night hours 00:00-05:00 of one day are known (20 % each).
    const timesMs = Array.from({ length: 6 }, (_, h) => T0 + h * HOUR);
    const nightOnly = { timesMs, cpuPct: timesMs.map(() => 20) };
    expect(primaryDemandMoments(nightOnly, { periodic: true, slotMs: HOUR, atMs: T0 + 13 * HOUR })).toEqual({
      mean: 20,
      variance: 0,
      samples: 6,
      basis: "all",
    });
    // No history: the default prior promises nothing (the primary may take its whole server).
    expect(primaryDemandMoments({ timesMs: [], cpuPct: [] }, { atMs: T0 })).toEqual({
      mean: 100,
      variance: 0,
      samples: 0,
      basis: "prior",
    });
    expect(
      primaryDemandMoments({ timesMs: [T0], cpuPct: [30] }, { atMs: T0, prior: { mean: 40, variance: 25 } }),
    ).toEqual({ mean: 40, variance: 25, samples: 0, basis: "prior" });
  });

  it("skips samples that are not numbers and clamps values outside 0..100", () => {
    // Usable: 100 (from 150), 0 (from -10), 50, 50: mean 50, variance (2500 + 2500 + 0 + 0) / 3.
    const series = {
      timesMs: [T0, T0 + HOUR, T0 + 2 * HOUR, Number.NaN, T0 + 4 * HOUR, T0 + 5 * HOUR],
      cpuPct: [Number.NaN, 150, -10, 70, 50, 50],
    };
    const m = primaryDemandMoments(series, { atMs: T0, slotMs: HOUR });
    expect(m.samples).toBe(4);
    expect(m.mean).toBeCloseTo(50, 12);
    expect(m.variance).toBeCloseTo(5000 / 3, 9);
    expect(codeOf(() => new DemandProfile({ timesMs: [T0], cpuPct: [] }))).toBe("INVALID_ARGUMENT");
    expect(codeOf(() => new DemandProfile(series, { slotMs: 7 * HOUR }))).toBe("CONFIG_INVALID");
  });
});

describe("the admission decision", () => {
  /** One 100-core server without reserve whose primary has the given moments (% and %^2). */
  const oneServer = (meanPct: number, varPct2: number): AdmissionCluster => ({
    servers: [server("s1", { primary: fixedDemand(meanPct, varPct2) })],
    admitted: [],
  });
  const now = T0 + 6 * HOUR;

  it("admits under the first moment but holds under the second when the primary's demand is spread wide", () => {
    // Primary 50 % +- 20 % of 100 cores: mean 50,000 milli, variance (20,000)^2. Candidate 10,000.
    const cluster = oneServer(50, 400);
    const candidate = { demandMilli: 10_000, lifetimeMs: HOUR };
    // Markov: 60,000 / 100,000 = 0.6 <= 0.8.
    const first = decideAdmission(cluster, candidate, now, { policy: "first" });
    expect(first).toMatchObject({ admit: true, policy: "first", threshold: 0.8, atMs: now });
    expect(first.bound).toBeCloseTo(0.6, 12);
    // Cantelli: 4e8 / (4e8 + 40,000^2) = 0.2 > 0.1.
    const second = decideAdmission(cluster, candidate, now, { policy: "second" });
    expect(second).toMatchObject({ admit: false, policy: "second", threshold: 0.1 });
    expect(second.bound).toBeCloseTo(0.2, 12);
    expect(second.reason).toBe(
      "waits: second-moment (Cantelli) bound 0.200 > 0.100 now: expected demand 60.0 of 100.0 cores: " +
        "primaries 50.0 (sd 20.0), admitted jobs 0.0, this job 10.0",
    );
  });

  it("admits under the second moment but holds under the first when the primary is busy but steady", () => {
    // Primary 85 % +- 1 %: Markov 90,000 / 100,000 = 0.9 > 0.8; Cantelli 1e6 / (1e6 + 10,000^2) = 1 / 101.
    const cluster = oneServer(85, 1);
    const candidate = { demandMilli: 5_000, lifetimeMs: HOUR };
    const first = decideAdmission(cluster, candidate, now, { policy: "first" });
    expect(first.admit).toBe(false);
    expect(first.bound).toBeCloseTo(0.9, 12);
    const second = decideAdmission(cluster, candidate, now, { policy: "second" });
    expect(second.admit).toBe(true);
    expect(second.bound).toBeCloseTo(1 / 101, 12);
  });

  describe("over the job's lifetime, with the primaries' daily peak ahead", () => {
    // Two 10-core servers with 1 core reserve each: C = 18,000 milli. Both primaries are the office-hours tenant. At
    // 06:00: mean 20 % = 2,000 milli each, variance 50 %^2 = 50 x 100^2 = 500,000 milli^2 each. At 09:00: 8,000 each.
    const profile = new DemandProfile(officeHoursSeries(), HOURLY);
    const cluster: AdmissionCluster = {
      servers: ["a", "b"].map((id) => server(id, { capacityMilli: 10_000, reserveMilli: 1_000, primary: profile })),
      admitted: [],
    };
    const at6 = T0 + 5 * DAY + 6 * HOUR;
    const opts = { policy: "second" as const, stepMs: HOUR };

    it("holds a job that fits now when the peak comes before it ends", () => {
      // Now: mu = 4,000 + 1,000, t = 13,000: 1e6 / (1e6 + 1.69e8) = 1 / 170. At 09:00: mu = 17,000, t = 1,000: 0.5.
      const d = decideAdmission(cluster, { demandMilli: 1_000, lifetimeMs: 4 * HOUR }, at6, opts);
      expect(d.admit).toBe(false);
      expect(d.atMs).toBe(at6 + 3 * HOUR);
      expect(d.bound).toBeCloseTo(0.5, 12);
      expect(d.reason).toBe(
        "waits: second-moment (Cantelli) bound 0.500 > 0.100 at 09:00 UTC (in 3h00m; now 0.006): expected demand " +
          "17.0 of 18.0 cores: primaries 16.0 (sd 1.0), admitted jobs 0.0, this job 1.0",
      );
      // Markov at 09:00: 17,000 / 18,000.
      const first = decideAdmission(cluster, { demandMilli: 1_000, lifetimeMs: 4 * HOUR }, at6, {
        ...opts,
        policy: "first",
      });
      expect(first.admit).toBe(false);
      expect(first.bound).toBeCloseTo(17 / 18, 12);
    });

    it("admits the same job when it ends before the peak, or when the horizon stops short of it", () => {
      // Steps 06:00, 07:00, 08:00: 1 / 170 at each, the worst being the earliest.
      const short = decideAdmission(cluster, { demandMilli: 1_000, lifetimeMs: 3 * HOUR }, at6, opts);
      expect(short.admit).toBe(true);
      expect(short.atMs).toBe(at6);
      expect(short.bound).toBeCloseTo(1 / 170, 12);
      expect(short.reason.startsWith("admitted: second-moment (Cantelli) bound 0.006 <= 0.100 at worst, now")).toBe(
        true,
      );
      const capped = decideAdmission(cluster, { demandMilli: 1_000, lifetimeMs: 4 * HOUR }, at6, {
        ...opts,
        horizonMs: 2 * HOUR,
      });
      expect(capped.admit).toBe(true);
    });
  });

  it("counts an admitted job until its predicted end, and a job past it at every step", () => {
    // One 100-core server with a 10-core reserve: C = 90,000. The primary goes from 30 % to 60 % two hours from now.
    // Admitted: 20,000 until one hour from now. Candidate 10,000 for three hours. Markov at 0 h: (30 + 20 + 10) / 90;
    // at 1 h: (30 + 10) / 90; at 2 h: (60 + 10) / 90 = 0.778 <= 0.8.
    const now = T0 + 6 * HOUR;
    const primary = stepDemand(now + 2 * HOUR, 30, 60);
    const base = { capacityMilli: 100_000, reserveMilli: 10_000, primary };
    const candidate = { demandMilli: 10_000, lifetimeMs: 3 * HOUR };
    const opts = { policy: "first" as const, stepMs: HOUR };
    const job = { appId: "a1", demandMilli: 20_000, allocatedMilli: 20_000 };
    const allocated = server("s1", { ...base, allocatedMilli: 20_000 });
    const ending = decideAdmission(
      { servers: [allocated], admitted: [{ ...job, endMs: now + HOUR }] },
      candidate,
      now,
      opts,
    );
    expect(ending.admit).toBe(true);
    expect(ending.atMs).toBe(now + 2 * HOUR);
    expect(ending.bound).toBeCloseTo(70 / 90, 12);
    // Past its predicted end it still runs, so it counts at 2 h: (60 + 20 + 10) / 90 = 1.
    const overdue = decideAdmission(
      { servers: [allocated], admitted: [{ ...job, endMs: now - 1 }] },
      candidate,
      now,
      opts,
    );
    expect(overdue.admit).toBe(false);
    expect(overdue.bound).toBe(1);
    // Allocated containers of a job nobody listed count the same way.
    const unlisted = decideAdmission({ servers: [allocated], admitted: [] }, candidate, now, opts);
    expect(unlisted.admit).toBe(false);
    expect(unlisted.bound).toBe(1);
  });

  it("adds the primaries' variances for independent servers and their deviations for correlated ones", () => {
    // Two 100-core servers, primaries 50 % +- 10 %: mean 100,000 of C = 200,000, t = 100,000, sd 10,000 each.
    const twins = (tenants: [string, string]): AdmissionCluster => ({
      servers: tenants.map((tenant, i) => server(`s${i}`, { primary: fixedDemand(50, 100), tenant })),
      admitted: [],
    });
    const c = { demandMilli: 0, lifetimeMs: 0 };
    const bound = (cluster: AdmissionCluster, primaryCorrelation: "independent" | "tenant" | "full"): number =>
      decideAdmission(cluster, c, T0, { policy: "second", primaryCorrelation }).bound;
    // Independent: variance 2e8, 2e8 / (2e8 + 1e10) = 2 / 102. Fully correlated: sd 20,000, 4e8 / (4e8 + 1e10).
    expect(bound(twins(["x", "x"]), "independent")).toBeCloseTo(2 / 102, 12);
    expect(bound(twins(["x", "x"]), "full")).toBeCloseTo(4 / 104, 12);
    expect(bound(twins(["x", "x"]), "tenant")).toBeCloseTo(4 / 104, 12);
    expect(bound(twins(["x", "y"]), "tenant")).toBeCloseTo(2 / 102, 12);
  });

  it("under the zeroth moment compares the secondary demand with a share of what is harvestable now", () => {
    // Two 10-core servers, 1-core reserve, primaries now at 3 and 5 cores: harvestable 6,000 + 4,000 = 10,000.
    // Allocated 2,000 + 1,000; the admitted job may still ask for 5,000 - 3,000 = 2,000. Limit 0.8 x 10,000 = 8,000.
    const cluster: AdmissionCluster = {
      servers: [
        server("a", {
          capacityMilli: 10_000,
          reserveMilli: 1_000,
          primaryNowMilli: 3_000,
          allocatedMilli: 2_000,
          primary: UNREADABLE,
        }),
        server("b", {
          capacityMilli: 10_000,
          reserveMilli: 1_000,
          primaryNowMilli: 5_000,
          allocatedMilli: 1_000,
          primary: UNREADABLE,
        }),
      ],
      admitted: [{ appId: "a1", demandMilli: 5_000, allocatedMilli: 3_000, endMs: T0 + HOUR }],
    };
    const fits = decideAdmission(cluster, { demandMilli: 3_000, lifetimeMs: DAY }, T0, { policy: "zeroth" });
    expect(fits).toMatchObject({ admit: true, policy: "zeroth", threshold: 0.8, atMs: T0 });
    expect(fits.bound).toBeCloseTo(0.8, 12);
    const over = decideAdmission(cluster, { demandMilli: 3_500, lifetimeMs: DAY }, T0, { policy: "zeroth" });
    expect(over.admit).toBe(false);
    expect(over.bound).toBeCloseTo(0.85, 12);
    expect(over.reason).toBe(
      "waits: zeroth-moment share 0.850 > 0.800: 8.5 secondary cores after admission (3.0 allocated, 2.0 admitted " +
        "but not yet allocated, this job 3.5) of 10.0 cores harvestable now",
    );
    // One milli-core over the limit still reads as over.
    const hair = decideAdmission(cluster, { demandMilli: 3_001, lifetimeMs: DAY }, T0, { policy: "zeroth" });
    expect(hair.reason.startsWith("waits: zeroth-moment share 0.8001 > 0.8000")).toBe(true);
  });

  it("admits everything under the baseline without reading the cluster", () => {
    const d = decideAdmission(
      { servers: [server("a", { primary: UNREADABLE })], admitted: [] },
      { demandMilli: 1e9, lifetimeMs: DAY },
      T0,
    );
    expect(d).toMatchObject({ admit: true, policy: "none" });
  });

  it("sees the jobs it committed earlier in the same pass", () => {
    // C = 90,000, primary 30,000: 30 + 25 = 55 / 90 admits; then 30 + 25 + 25 = 80 / 90 = 0.889 > 0.8.
    const outlook = new AdmissionOutlook(
      { servers: [server("s", { reserveMilli: 10_000, primary: fixedDemand(30, 0) })], admitted: [] },
      T0,
      { policy: "first" },
    );
    const job = { demandMilli: 25_000, lifetimeMs: HOUR };
    expect(outlook.decide(job).admit).toBe(true);
    outlook.commit(job);
    const second = outlook.decide(job);
    expect(second.admit).toBe(false);
    expect(second.bound).toBeCloseTo(80 / 90, 12);
  });

  it("refuses a job that even an idle cluster would not admit", () => {
    // Two 10-core servers with 1-core reserve: C = 18,000.
    const servers = ["a", "b"].map((id) => ({ serverId: id, capacityMilli: 10_000, reserveMilli: 1_000 }));
    const job = (demandMilli: number) => ({ demandMilli, lifetimeMs: DAY });
    // First, 0.8 x 18,000 = 14,400.
    expect(neverAdmissible(servers, job(14_400), { policy: "first" })).toBe(false);
    expect(neverAdmissible(servers, job(14_401), { policy: "first" })).toBe(true);
    // Second: an idle cluster has no variance, so anything below C fits and C itself does not.
    expect(neverAdmissible(servers, job(17_999), { policy: "second" })).toBe(false);
    expect(neverAdmissible(servers, job(18_000), { policy: "second" })).toBe(true);
    // Zeroth at 0.5: 9,000.
    expect(neverAdmissible(servers, job(9_000), { policy: "zeroth", zerothThreshold: 0.5 })).toBe(false);
    expect(neverAdmissible(servers, job(9_001), { policy: "zeroth", zerothThreshold: 0.5 })).toBe(true);
    expect(neverAdmissible(servers, job(1e9), { policy: "none" })).toBe(false);
    // No node manager registered yet: nothing to judge by.
    expect(neverAdmissible([], job(1), { policy: "first" })).toBe(false);
    expect(idleClusterDecision(servers, job(14_401), { policy: "first" }).reason).toContain("of 18.0 cores");
  });

  it("rejects malformed input and options with a coded error naming the field", () => {
    const cluster = { servers: [server("a")], admitted: [] };
    expect(codeOf(() => decideAdmission(cluster, { demandMilli: Number.NaN, lifetimeMs: 0 }, T0))).toBe(
      "INVALID_ARGUMENT",
    );
    expect(
      codeOf(() =>
        decideAdmission(
          { servers: [server("a", { capacityMilli: -1 })], admitted: [] },
          { demandMilli: 0, lifetimeMs: 0 },
          T0,
        ),
      ),
    ).toBe("INVALID_ARGUMENT");
    expect(resolveAdmissionOptions()).toMatchObject({ policy: "none", secondThreshold: 0.1, horizonMs: DAY });
    for (const [bad, field] of [
      [{ policy: "third" }, "policy"],
      [{ secondThreshold: 1 }, "secondThreshold"],
      [{ firstThreshold: 0 }, "firstThreshold"],
      [{ stepMs: 0 }, "stepMs"],
      [{ horizonMs: 365 * DAY, stepMs: 1000 }, "horizonMs"],
    ] as const) {
      try {
        resolveAdmissionOptions(bad as never);
        expect.unreachable(`accepted ${field}`);
      } catch (err) {
        expect(err).toBeInstanceOf(HarvestError);
        expect((err as HarvestError).code).toBe("CONFIG_INVALID");
        expect((err as HarvestError).message).toContain(`admission option ${field}`);
      }
    }
  });

  it("tunes a threshold to an SLA by binary search", () => {
    // A failure rate of threshold^2 meets 0.25 up to 0.5.
    expect(tuneThreshold((t) => t * t, 0.25, { lo: 0, hi: 1 })).toBeCloseTo(0.5, 5);
    expect(tuneThreshold((t) => t, 0.5, { lo: 0, hi: 0.4 })).toBe(0.4);
    expect(tuneThreshold(() => 1, 0.01, { lo: 0.1, hi: 1 })).toBeUndefined();
  });
});

describe("the admission queue", () => {
  interface Job {
    appId: string;
    priority: number;
  }
  const held = (id: string): AdmissionDecision => ({
    admit: false,
    policy: "second",
    bound: 0.5,
    threshold: 0.1,
    reason: `waits: ${id} does not fit`,
  });
  const ok: AdmissionDecision = { admit: true, policy: "second", bound: 0, threshold: 0.1, reason: "admitted" };

  /** a (priority 0), b (5), c (0), d (5), queued at 1, 2, 3, 4 ms. */
  function filled(backfill = false): AdmissionQueue<Job> {
    const q = new AdmissionQueue<Job>({ backfill });
    q.enqueue({ appId: "a", priority: 0 }, 1);
    q.enqueue({ appId: "b", priority: 5 }, 2);
    q.enqueue({ appId: "c", priority: 0 }, 3);
    q.enqueue({ appId: "d", priority: 5 }, 4);
    return q;
  }

  it("orders jobs by priority, then by arrival", () => {
    const q = filled();
    expect(q.snapshot().map((e) => [e.appId, e.position])).toEqual([
      ["b", 1],
      ["d", 2],
      ["a", 3],
      ["c", 4],
    ]);
    expect(q.snapshot()[0]!.reason).toBe("queued: not yet evaluated");
  });

  it("stops at a held job under strict order, and says whom the others wait behind", () => {
    const q = filled();
    const asked: string[] = [];
    const out = q.admitReady(100, (job) => {
      asked.push(job.appId);
      return job.appId === "d" ? held("d") : ok;
    });
    expect(out.map((e) => [e.job.appId, e.waitedMs])).toEqual([["b", 98]]);
    // a would fit, but it is behind d and is not even asked.
    expect(asked).toEqual(["b", "d"]);
    const snap = q.snapshot();
    expect(snap.map((e) => e.appId)).toEqual(["d", "a", "c"]);
    expect(snap[0]).toMatchObject({ reason: "waits: d does not fit", lastCheckedMs: 100, position: 1 });
    expect(snap[1]!.blockedBy).toBe("d");
    expect(snap[1]!.lastCheckedMs).toBeUndefined();
    expect(snap[1]!.reason).toBe(
      "waits behind d (strict order: priority, then submission), which waits: d does not fit",
    );
    // d fits later: everyone goes, in order.
    expect(q.admitReady(200, () => ok).map((e) => e.job.appId)).toEqual(["d", "a", "c"]);
    expect(q.size).toBe(0);
  });

  it("lets a job that fits pass a held one under backfill", () => {
    const q = filled(true);
    const asked: string[] = [];
    const out = q.admitReady(100, (job) => {
      asked.push(job.appId);
      return job.appId === "d" || job.appId === "c" ? held(job.appId) : ok;
    });
    expect(out.map((e) => e.job.appId)).toEqual(["b", "a"]);
    expect(asked).toEqual(["b", "d", "a", "c"]);
    expect(q.snapshot().map((e) => [e.appId, e.reason])).toEqual([
      ["d", "waits: d does not fit"],
      ["c", "waits: c does not fit"],
    ]);
  });

  it("removes jobs and refuses to queue one twice", () => {
    const q = filled();
    expect(q.remove("d")).toBe(true);
    expect(q.remove("d")).toBe(false);
    expect(q.has("d")).toBe(false);
    expect(q.snapshot().map((e) => e.appId)).toEqual(["b", "a", "c"]);
    expect(codeOf(() => q.enqueue({ appId: "a", priority: 9 }, 5))).toBe("INVALID_ARGUMENT");
  });

  it("admits through an outlook until the cluster is full, keeping the rest in order", () => {
    // C = 90,000, primary 30,000, Markov threshold 0.8 (72,000): two jobs of 20,000 fit (70,000), a third does not.
    const q = new AdmissionQueue<Job & { demandMilli: number; lifetimeMs: number }>();
    for (const id of ["j1", "j2", "j3", "j4"])
      q.enqueue({ appId: id, priority: 0, demandMilli: 20_000, lifetimeMs: HOUR }, 0);
    const outlook = new AdmissionOutlook(
      { servers: [server("s", { reserveMilli: 10_000, primary: fixedDemand(30, 0) })], admitted: [] },
      T0,
      { policy: "first" },
    );
    const out = q.admitReady(T0, (job) => {
      const d = outlook.decide(job);
      if (d.admit) outlook.commit(job);
      return d;
    });
    expect(out.map((e) => e.job.appId)).toEqual(["j1", "j2"]);
    const [head, next] = q.snapshot();
    // (30 + 20 + 20 + 20) / 90 = 1.
    expect(head!.decision!.bound).toBe(1);
    expect(head!.reason).toContain("waits: first-moment (Markov) bound 1.000 > 0.800 now");
    expect(next!.blockedBy).toBe("j3");
  });
});

describe("JobDemandModel: what a recurring job holds on average", () => {
  it("counts the mean of its past runs, never above its widest stage, and the widest for a job never seen", () => {
    const m = new JobDemandModel(2);
    expect(m.demandMilli("etl", 5_000)).toBe(5_000);
    m.observe("etl", 1_000);
    m.observe("etl", 3_000);
    // (1000 + 3000) / 2 = 2000; capped by a narrower widest stage.
    expect(m.demandMilli("etl", 5_000)).toBe(2_000);
    expect(m.demandMilli("etl", 1_500)).toBe(1_500);
    // Only the last two runs count: (3000 + 5000) / 2 = 4000. Odd values are ignored.
    m.observe("etl", 5_000);
    m.observe("etl", Number.NaN);
    m.observe("etl", -1);
    expect(m.demandMilli("etl", 10_000)).toBe(4_000);
    expect(m.demandMilli("other", 700)).toBe(700);
  });
});
