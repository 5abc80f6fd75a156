/**
 * Simulated clusters calibrated to seeds/004 section 3: many primary tenants of heavy-tailed sizes grouped into
 * environments; per-tenant CPU utilization that is periodic, (roughly) constant or unpredictable in the proportions of
 * figures 2 and 3, either generated or replayed from the real traces (`real-traces.ts`); and disk reimages whose rates
 * follow figures 4 to 6 (most servers at one or fewer a month, a tail far above, tenants keeping their rank) with
 * correlated reimages of whole tenants and environments. Pure and deterministic: the options and seed fix the cluster.
 *
 * Independent random streams (per purpose, per tenant) keep a seed's structure stable across options: the same seed at
 * another level, slot length or horizon has the same tenants, environments, servers and reimage rates, and a longer
 * horizon extends the reimage history of a shorter one.
 */
import { SeededRng } from "../common/rng.js";
import { patternOf } from "../resourcemanager/index.js";
import type { SimCluster, SimTenant } from "./model.js";
import { DAY_MS } from "./model.js";
import { Stream } from "./cluster/calibration.js";
import { layOutServers, planEnvironments, planTenants } from "./cluster/tenants.js";
import { generateShape, gridSeries, matchClusterMean, replayTemplates, tenantMeans } from "./cluster/utilization.js";
import { generateReimages } from "./cluster/reimages.js";
import { streamSeed } from "./cluster/random.js";
import { LEVEL_MEAN_PCT, resolveClusterGenOptions } from "./cluster/options.js";
import type { ClusterGenOptions } from "./cluster/options.js";

export { DEFAULT_CLUSTER_GEN, LEVEL_MEAN_PCT, resolveClusterGenOptions } from "./cluster/options.js";
export type { ClusterGenOptions } from "./cluster/options.js";
export { CORRELATION_WINDOW_MS } from "./cluster/calibration.js";
export { summarizeCluster, tenantSeries } from "./cluster/summary.js";
export type { ClusterSummary } from "./cluster/summary.js";

/**
 * A simulated cluster (see the module comment). Generating 10,000 servers x 395 days at 1-hour slots, or 1,000 servers
 * x 60 days at 5-minute slots, takes about a second.
 */
export function generateCluster(options: Partial<ClusterGenOptions> = {}): SimCluster {
  const o = resolveClusterGenOptions(options);
  const historyMs = Math.round(o.historyDays * DAY_MS);
  const horizonMs = Math.round((o.historyDays + o.days) * DAY_MS);
  const slots = Math.ceil(horizonMs / o.slotMs);

  const plans = planTenants(o.servers, o.seed);
  const environments = planEnvironments(plans, o.seed);
  const servers = layOutServers(plans, o);
  const meanPct = o.meanPct ?? LEVEL_MEAN_PCT[o.level];
  const means = tenantMeans(plans, meanPct);

  const real = o.source === "real";
  const series = real
    ? replayTemplates(plans, means, o.templates!, o.slotMs, slots, o.seed)
    : plans.map((p, t) =>
        generateShape(p.pattern, means[t]!, slots, o.slotMs, new SeededRng(streamSeed(o.seed, Stream.Utilization, t))),
      );
  matchClusterMean(series, plans, meanPct);
  // A replayed tenant's pattern is what the classifier finds in the history the policies will learn from.
  const historySlots = Math.min(slots, Math.ceil(historyMs / o.slotMs));
  const window = historySlots >= 2 ? historySlots : slots;
  const patterns = real
    ? series.map((s) => patternOf(gridSeries("tenant", s, 0, window, o.slotMs / 1000)).pattern)
    : plans.map((p) => p.pattern);

  const idWidth = Math.max(4, String(plans.length - 1).length);
  const tenants: SimTenant[] = plans.map((p, t) => ({
    index: t,
    id: `t${String(t).padStart(idWidth, "0")}`,
    environment: environments[p.environment]!.name,
    machineFunction: p.machineFunction,
    pattern: patterns[t]!,
    servers: p.servers,
    utilization: series[t]!,
    reimagesPerServerMonth: p.reimagesPerServerMonth,
  }));

  return {
    servers,
    tenants,
    racks: Math.ceil(o.servers / o.serversPerRack),
    slotMs: o.slotMs,
    historyMs,
    horizonMs,
    reimages: generateReimages(plans, environments, horizonMs, o.seed),
    level: o.level,
    source: o.source,
    seed: o.seed,
  };
}
