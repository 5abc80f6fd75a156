/**
 * The resource manager's tenant registry as the power experiment plays it: each server's primary usage as its node
 * manager reports it, and the registry's own verdict on each tenant's history (`tenantHistoryVerdict`), which the
 * power-aware placement reads (`primaryHistoryOf`).
 */
import { DEFAULT_HISTORY_WINDOW, primaryHistoryOf, tenantHistoryVerdict } from "../../resourcemanager/index.js";
import type { PrimaryHistory, TenantHistoryVerdict } from "../../resourcemanager/index.js";
import type { UtilizationSeries } from "../../common/trace-io.js";
import { DAY_MS, serverUtilization } from "../model.js";
import type { SimCluster } from "../model.js";

/**
 * Server `s`'s primary CPU (%) per slot over [fromMs, toMs), as its node manager reports it to the tenant registry:
 * the tenant's series plus the server's offset, clamped to 0..100 (`serverUtilization`), one sample per slot.
 */
export function primaryUsageSeries(cluster: SimCluster, s: number, fromMs: number, toMs: number): UtilizationSeries {
  const series = cluster.tenants[cluster.servers[s]!.tenant]!.utilization;
  const first = Math.max(0, Math.floor(fromMs / cluster.slotMs));
  const end = Math.min(series.length, Math.ceil(toMs / cluster.slotMs));
  const timesMs: number[] = [];
  const cpuPct: number[] = [];
  for (let k = first; k < end; k++) {
    timesMs.push(k * cluster.slotMs);
    cpuPct.push(serverUtilization(cluster, s, k * cluster.slotMs));
  }
  return {
    name: cluster.servers[s]!.id,
    stepSec: cluster.slotMs / 1000,
    startMs: first * cluster.slotMs,
    timesMs,
    cpuPct,
  };
}

/**
 * What the resource manager's tenant registry finds in each tenant's history when it classifies at `endMs` (by tenant
 * index; undefined for a tenant without servers): its own `tenantHistoryVerdict`, with its default window, over the
 * series its servers reported (`primaryUsageSeries`).
 */
export function registryVerdicts(
  cluster: SimCluster,
  endMs: number = cluster.historyMs,
): (TenantHistoryVerdict | undefined)[] {
  // The window's samples, and the one before it (the value a server holds into the window).
  const fromMs = endMs - DEFAULT_HISTORY_WINDOW.windowDays * DAY_MS - cluster.slotMs;
  return cluster.tenants.map((t) =>
    t.servers.length === 0
      ? undefined
      : tenantHistoryVerdict(
          t.id,
          t.servers.map((s) => primaryUsageSeries(cluster, s, fromMs, endMs)),
          endMs,
        ),
  );
}

/**
 * Per server, what the power-aware placement reads of its primary (`primaryHistoryOf`, as the resource manager builds
 * it): the registry's verdict on its tenant at `endMs`. Simulated tenants declare no criticality.
 */
export function primaryHistories(cluster: SimCluster, endMs: number = cluster.historyMs): PrimaryHistory[] {
  const verdicts = registryVerdicts(cluster, endMs);
  return cluster.servers.map((srv) => primaryHistoryOf({ criticality: "" }, verdicts[srv.tenant]));
}
