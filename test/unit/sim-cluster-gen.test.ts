/** The simulator's cluster generator and its calibration to seeds/004 section 3. */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { detailsOf, isHarvestError } from "../../common/errors.js";
import { sharedDataDir } from "../../common/paths.js";
import { patternOf } from "../../resourcemanager/policy/utilization-pattern.js";
import type { ClusterGenOptions } from "../../sim/cluster-gen.js";
import {
  CORRELATION_WINDOW_MS,
  LEVEL_MEAN_PCT,
  generateCluster,
  resolveClusterGenOptions,
  summarizeCluster,
  tenantSeries,
} from "../../sim/cluster-gen.js";
import type { SimCluster } from "../../sim/model.js";
import { DAY_MS, MONTH_MS, UTILIZATION_LEVELS } from "../../sim/model.js";
import { loadRealTemplates } from "../../sim/real-traces.js";

const HOUR_MS = 3_600_000;
const SMALL: Partial<ClusterGenOptions> = { servers: 300, historyDays: 7, days: 7, slotMs: HOUR_MS, seed: 5 };
/** A year after a month of history, as the storage experiments run it (smaller, for test time). */
const YEAR: Partial<ClusterGenOptions> = { servers: 3000, historyDays: 30, days: 365, slotMs: HOUR_MS, seed: 11 };

const year = generateCluster(YEAR);
const yearSummary = summarizeCluster(year);

function codeOf(fn: () => unknown): unknown {
  try {
    fn();
  } catch (err) {
    return isHarvestError(err) ? `${err.code}:${detailsOf(err, "INVALID_ARGUMENT", "CONFIG_INVALID")?.field}` : err;
  }
  return undefined;
}

/** [min, max] of a series. */
function rangeOf(values: Float32Array): [number, number] {
  let min = Infinity;
  let max = -Infinity;
  for (const v of values) {
    if (v < min) min = v;
    if (v > max) max = v;
  }
  return [min, max];
}

/** The share of tenants whose classifier pattern over the history window is the generated one. */
function classifierAgreement(cluster: SimCluster): number {
  let agree = 0;
  for (const t of cluster.tenants) if (patternOf(tenantSeries(cluster, t.index)).pattern === t.pattern) agree++;
  return agree / cluster.tenants.length;
}

describe("generateCluster", () => {
  it("builds the same cluster from the same options and seed, and another from another seed", () => {
    const a = generateCluster(SMALL);
    const b = generateCluster(SMALL);
    expect(b).toEqual(a);
    const c = generateCluster({ ...SMALL, seed: 6 });
    expect(c.reimages).not.toEqual(a.reimages);
    expect(c.tenants.map((t) => t.servers.length)).not.toEqual(a.tenants.map((t) => t.servers.length));
  });

  it("keeps a seed's tenants, servers and reimages at every utilization level and only changes the load", () => {
    const low = generateCluster({ ...SMALL, level: "low" });
    const high = generateCluster({ ...SMALL, level: "high" });
    expect(high.servers).toEqual(low.servers);
    expect(high.reimages).toEqual(low.reimages);
    expect(high.tenants.map((t) => [t.environment, t.machineFunction, t.pattern, t.servers])).toEqual(
      low.tenants.map((t) => [t.environment, t.machineFunction, t.pattern, t.servers]),
    );
    expect(high.tenants[0]!.utilization).not.toEqual(low.tenants[0]!.utilization);
  });

  it("extends a shorter horizon's reimage history when run for longer", () => {
    const short = generateCluster({ ...SMALL, days: 40 });
    const long = generateCluster({ ...SMALL, days: 100 });
    expect(long.reimages.filter((r) => r.atMs < short.horizonMs)).toEqual(short.reimages);
  });

  it("lays out every server under exactly one tenant, with the requested hardware and racks", () => {
    const c = generateCluster({ ...SMALL, coresPerServer: 8, diskBytes: 1e12, serversPerRack: 20 });
    expect(c.servers).toHaveLength(300);
    expect(c.racks).toBe(15);
    expect(new Set(c.servers.map((s) => s.rack)).size).toBe(15);
    expect(new Set(c.servers.map((s) => s.id)).size).toBe(300);
    expect(new Set(c.tenants.map((t) => t.id)).size).toBe(c.tenants.length);
    const owned = c.tenants.flatMap((t) => t.servers.map((s) => [s, t.index]));
    expect(owned.sort((x, y) => x[0]! - y[0]!)).toEqual(c.servers.map((s) => [s.index, s.tenant]));
    for (const s of c.servers) {
      expect(s.cores).toBe(8);
      expect(s.diskBytes).toBe(1e12);
    }
    // Per-server offsets spread a tenant's load around its average server.
    for (const t of c.tenants.filter((x) => x.servers.length > 1)) {
      const mean = t.servers.reduce((sum, s) => sum + c.servers[s]!.offsetPct, 0) / t.servers.length;
      expect(Math.abs(mean)).toBeLessThan(0.01);
    }
    // Several tenants per environment on average, and environments of different sizes.
    const perEnvironment = new Map<string, number>();
    for (const t of c.tenants) perEnvironment.set(t.environment, (perEnvironment.get(t.environment) ?? 0) + 1);
    expect(c.tenants.length / perEnvironment.size).toBeGreaterThan(1.5);
    expect(new Set(perEnvironment.values()).size).toBeGreaterThan(2);
  });

  it("gives each tenant one utilization value per slot up to the horizon, within 0..100", () => {
    const c = generateCluster({ ...SMALL, days: 7.5, slotMs: 300_000 });
    expect(c.horizonMs).toBe(14.5 * DAY_MS);
    expect(c.historyMs).toBe(7 * DAY_MS);
    for (const t of c.tenants) {
      expect(t.utilization).toHaveLength(Math.ceil(c.horizonMs / c.slotMs));
    }
    const all = c.tenants.map((t) => rangeOf(t.utilization));
    expect(Math.min(...all.map((r) => r[0]))).toBeGreaterThanOrEqual(0);
    expect(Math.max(...all.map((r) => r[1]))).toBeLessThanOrEqual(100);
  });

  it("lists reimages in time order within the horizon, on existing servers", () => {
    for (const c of [year, generateCluster(SMALL)]) {
      expect(c.reimages.length).toBeGreaterThan(0);
      const bad = c.reimages.filter(
        (r, i) =>
          !(r.atMs >= 0 && r.atMs < c.horizonMs) ||
          !(Number.isInteger(r.server) && r.server >= 0 && r.server < c.servers.length) ||
          (i > 0 && r.atMs < c.reimages[i - 1]!.atMs),
      );
      expect(bad).toEqual([]);
    }
  });

  it("averages the primary utilization of each level, low < medium < high", () => {
    const means = UTILIZATION_LEVELS.map(
      (level) => summarizeCluster(generateCluster({ ...SMALL, level })).meanUtilizationPct,
    );
    expect(means[0]!).toBeLessThan(means[1]!);
    expect(means[1]!).toBeLessThan(means[2]!);
    UTILIZATION_LEVELS.forEach((level, i) => expect(Math.abs(means[i]! - LEVEL_MEAN_PCT[level])).toBeLessThan(1.5));
  });

  it("rejects bad options with CONFIG_INVALID naming the field", () => {
    expect(codeOf(() => resolveClusterGenOptions({ servers: 0 }))).toBe("CONFIG_INVALID:servers");
    expect(codeOf(() => resolveClusterGenOptions({ level: "extreme" as never }))).toBe("CONFIG_INVALID:level");
    expect(codeOf(() => resolveClusterGenOptions({ slotMs: 10 }))).toBe("CONFIG_INVALID:slotMs");
    expect(codeOf(() => resolveClusterGenOptions({ days: 0 }))).toBe("CONFIG_INVALID:days");
    expect(codeOf(() => generateCluster({ source: "real" }))).toBe("CONFIG_INVALID:templates");
  });
});

describe("calibration to seeds/004 section 3 (3,000 servers, a month of history and a year)", () => {
  it("draws heavy-tailed tenant sizes: many small tenants, a few big ones", () => {
    expect(yearSummary.tenants).toBeGreaterThan(200);
    expect(yearSummary.medianTenantServers).toBeLessThanOrEqual(5);
    expect(yearSummary.largestTenantServers).toBeGreaterThanOrEqual(10 * yearSummary.medianTenantServers);
  });

  it("gives about 40 % of servers to few periodic tenants and about 75 % to periodic or constant ones (figures 2, 3)", () => {
    const { serverShare, tenantShare } = yearSummary;
    expect(Math.abs(serverShare.periodic - 0.4)).toBeLessThan(0.03);
    expect(Math.abs(serverShare.periodic + serverShare.constant - 0.75)).toBeLessThan(0.03);
    expect(tenantShare.periodic).toBeLessThan(0.25);
    expect(tenantShare.constant).toBeGreaterThan(0.5);
    expect(tenantShare.constant).toBeGreaterThan(tenantShare.periodic + tenantShare.unpredictable);
  });

  it("shapes tenants so that the classifier finds their pattern in the history window", () => {
    expect(classifierAgreement(year)).toBeGreaterThanOrEqual(0.85);
    // At the compute runs' 5-minute resolution as well.
    expect(classifierAgreement(generateCluster({ ...SMALL, historyDays: 30, slotMs: 300_000 }))).toBeGreaterThanOrEqual(
      0.85,
    );
  });

  it("reimages most servers once a month or less, with a tail far above (figures 4, 5)", () => {
    expect(yearSummary.serversAtMostOneReimagePerMonth).toBeGreaterThanOrEqual(0.88);
    expect(yearSummary.serversAtMostOneReimagePerMonth).toBeLessThan(0.97);
    expect(yearSummary.serversAboveTwoReimagesPerMonth).toBeGreaterThanOrEqual(0.02);
    expect(yearSummary.tenantsAtMostOneReimagePerServerMonth).toBeGreaterThanOrEqual(0.7);
    // Several reimages a month in the tail.
    const months = year.horizonMs / MONTH_MS;
    const perServer = new Map<number, number>();
    for (const r of year.reimages) perServer.set(r.server, (perServer.get(r.server) ?? 0) + 1);
    expect(Math.max(...perServer.values()) / months).toBeGreaterThan(4);
  });

  it("keeps tenants' reimage ranks from month to month (figure 6)", () => {
    expect(yearSummary.reimageRankSpearman).toBeGreaterThanOrEqual(0.4);
  });

  it("reimages whole tenants and environments at once (section 3.3)", () => {
    expect(yearSummary.correlatedReimageShare).toBeGreaterThanOrEqual(0.3);
    // Some event takes every server of a tenant of ten or more within the correlation window.
    const wholeTenant = year.tenants.some((t) => {
      if (t.servers.length < 10) return false;
      const mine = new Set(t.servers);
      const times = year.reimages.filter((r) => mine.has(r.server)).map((r) => r.atMs);
      for (let i = 0; i + t.servers.length - 1 < times.length; i++)
        if (times[i + t.servers.length - 1]! - times[i]! <= CORRELATION_WINDOW_MS) return true;
      return false;
    });
    expect(wholeTenant).toBe(true);
    // Some event spans several tenants of one environment.
    const tenantOf = (server: number): number => year.servers[server]!.tenant;
    const environmentWide = year.reimages.some((r, i) => {
      const env = year.tenants[tenantOf(r.server)]!.environment;
      const tenants = new Set<number>();
      for (let j = i; j < year.reimages.length && year.reimages[j]!.atMs - r.atMs <= CORRELATION_WINDOW_MS; j++) {
        const t = tenantOf(year.reimages[j]!.server);
        if (year.tenants[t]!.environment === env) tenants.add(t);
      }
      return tenants.size >= 3;
    });
    expect(environmentWide).toBe(true);
  });
});

const dataDir = sharedDataDir();
if (!dataDir) console.warn("sim-cluster-gen.test: ../shared/data not found, skipping the real-trace cluster tests");

describe.skipIf(!dataDir)("clusters replaying the real traces in shared/data", () => {
  it("loads every Bitbrains and NAB series, in a fixed order", async () => {
    const templates = await loadRealTemplates();
    const names = templates.map((t) => t.name);
    expect(names.filter((n) => n.startsWith("bitbrains/")).length).toBeGreaterThanOrEqual(8);
    expect(names.filter((n) => n.startsWith("nab/")).length).toBeGreaterThanOrEqual(10);
    expect((await loadRealTemplates()).map((t) => t.name)).toEqual(names);
  });

  it("replays them at each level's mean, deterministically, with the classifier's pattern as the truth", async () => {
    const templates = await loadRealTemplates();
    const options = { ...SMALL, historyDays: 30, source: "real" as const, templates };
    const means: number[] = [];
    for (const level of UTILIZATION_LEVELS) {
      const c = generateCluster({ ...options, level });
      const s = summarizeCluster(c);
      means.push(s.meanUtilizationPct);
      expect(Math.abs(s.meanUtilizationPct - LEVEL_MEAN_PCT[level])).toBeLessThan(1.5);
      expect(c.source).toBe("real");
      expect(classifierAgreement(c)).toBe(1);
      const ranges = c.tenants.map((t) => rangeOf(t.utilization));
      expect(Math.min(...ranges.map((r) => r[0]))).toBeGreaterThanOrEqual(0);
      expect(Math.max(...ranges.map((r) => r[1]))).toBeLessThanOrEqual(100);
      // Most tenants flat, some periodic (Bitbrains VM 411 is diurnal), some not.
      expect(s.tenantShare.constant).toBeGreaterThan(0.4);
      expect(s.serverShare.periodic).toBeGreaterThan(0.1);
    }
    expect(means[0]!).toBeLessThan(means[1]!);
    expect(means[1]!).toBeLessThan(means[2]!);
    expect(generateCluster(options)).toEqual(generateCluster(options));
    expect(generateCluster(options).tenants[0]!.utilization).not.toEqual(
      generateCluster({ ...options, source: "generated" }).tenants[0]!.utilization,
    );
  });
});

describe("loadRealTemplates without the shared data", () => {
  const empty = mkdtempSync(join(tmpdir(), "harvest-no-data-"));
  afterAll(() => rmSync(empty, { recursive: true, force: true }));

  it("throws CONFIG_INVALID so that the caller can fall back to generated traces", async () => {
    const err = await loadRealTemplates(empty).catch((e: unknown) => e);
    expect(isHarvestError(err, "CONFIG_INVALID")).toBe(true);
  });
});
