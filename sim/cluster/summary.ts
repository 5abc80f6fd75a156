/**
 * Views of a simulated cluster (a tenant's series as the classifier takes it) and its summary against the calibration
 * targets.
 */
import type { UtilizationPattern } from "../../common/trace-gen.js";
import type { UtilizationSeries } from "../../common/trace-io.js";
import type { SimCluster, SimTenant } from "../model.js";
import { MONTH_MS } from "../model.js";
import { CORRELATION_WINDOW_MS } from "./calibration.js";
import { round4 } from "./random.js";
import { gridSeries } from "./utilization.js";

/**
 * A tenant's average-server series over [fromMs, toMs) (default: the history window) as the classifier takes it,
 * with times in ms since the simulation's epoch.
 */
export function tenantSeries(
  cluster: SimCluster,
  tenant: number,
  fromMs = 0,
  toMs: number = cluster.historyMs,
): UtilizationSeries {
  const t = cluster.tenants[tenant]!;
  const first = Math.max(0, Math.floor(fromMs / cluster.slotMs));
  const end = Math.min(t.utilization.length, Math.ceil(toMs / cluster.slotMs));
  return gridSeries(t.id, t.utilization, first, end, cluster.slotMs / 1000);
}

/** The calibration figures of a cluster, to compare with seeds/004 section 3. Shares are fractions (0..1). */
export interface ClusterSummary {
  servers: number;
  tenants: number;
  environments: number;
  racks: number;
  largestTenantServers: number;
  medianTenantServers: number;
  /** Figure 2: share of tenants per pattern. */
  tenantShare: Record<UtilizationPattern, number>;
  /** Figure 3: share of servers per pattern (the paper: periodic about 40 %, periodic + constant about 75 %). */
  serverShare: Record<UtilizationPattern, number>;
  /** Mean server CPU utilization over servers and the whole horizon (offsets and clamping included), percent. */
  meanUtilizationPct: number;
  reimages: number;
  /** Reimages per server per month over the horizon. */
  reimagesPerServerMonth: number;
  /** Figure 4: share of servers reimaged once a month or less on average (the paper: at least 90 %). */
  serversAtMostOneReimagePerMonth: number;
  /** Share of servers reimaged more than twice a month on average (the tail). */
  serversAboveTwoReimagesPerMonth: number;
  /** Figure 5: share of tenants reimaged once per server per month or less (the paper: at least 80 %). */
  tenantsAtMostOneReimagePerServerMonth: number;
  /** Share of reimages within `CORRELATION_WINDOW_MS` of another one in the same environment. */
  correlatedReimageShare: number;
  /**
   * Figure 6: mean Spearman rank correlation, over pairs of consecutive whole months, of tenants' reimages per server
   * in one month and in the next (NaN with fewer than two whole months).
   */
  reimageRankSpearman: number;
}

/** The calibration figures of `cluster`. */
export function summarizeCluster(cluster: SimCluster): ClusterSummary {
  const { tenants, servers, reimages } = cluster;
  const patterns: UtilizationPattern[] = ["periodic", "constant", "unpredictable"];
  const tenantShare = { periodic: 0, constant: 0, unpredictable: 0 };
  const serverShare = { periodic: 0, constant: 0, unpredictable: 0 };
  for (const t of tenants) {
    tenantShare[t.pattern] += 1 / tenants.length;
    serverShare[t.pattern] += t.servers.length / servers.length;
  }
  for (const p of patterns) {
    tenantShare[p] = round4(tenantShare[p]);
    serverShare[p] = round4(serverShare[p]);
  }

  let utilizationSum = 0;
  for (const t of tenants) utilizationSum += tenantServersMean(cluster, t);
  const sizes = tenants.map((t) => t.servers.length).sort((a, b) => a - b);

  const months = cluster.horizonMs / MONTH_MS;
  const perServer = new Float64Array(servers.length);
  for (const r of reimages) perServer[r.server]! += 1;
  let atMostOne = 0;
  let aboveTwo = 0;
  for (let s = 0; s < servers.length; s++) {
    if (perServer[s]! / months <= 1) atMostOne++;
    if (perServer[s]! / months > 2) aboveTwo++;
  }
  let tenantsAtMostOne = 0;
  for (const t of tenants) {
    let n = 0;
    for (const s of t.servers) n += perServer[s]!;
    if (n / t.servers.length / months <= 1) tenantsAtMostOne++;
  }

  return {
    servers: servers.length,
    tenants: tenants.length,
    environments: new Set(tenants.map((t) => t.environment)).size,
    racks: cluster.racks,
    largestTenantServers: sizes[sizes.length - 1] ?? 0,
    medianTenantServers: sizes[sizes.length >> 1] ?? 0,
    tenantShare,
    serverShare,
    meanUtilizationPct: round4(utilizationSum / servers.length),
    reimages: reimages.length,
    reimagesPerServerMonth: round4(reimages.length / servers.length / months),
    serversAtMostOneReimagePerMonth: round4(atMostOne / servers.length),
    serversAboveTwoReimagesPerMonth: round4(aboveTwo / servers.length),
    tenantsAtMostOneReimagePerServerMonth: round4(tenantsAtMostOne / tenants.length),
    correlatedReimageShare: round4(correlatedShare(cluster)),
    reimageRankSpearman: round4(rankStability(cluster)),
  };
}

/** The sum over a tenant's servers of their mean utilization over the horizon (offset and clamping included). */
function tenantServersMean(cluster: SimCluster, tenant: SimTenant): number {
  const u = tenant.utilization;
  const n = u.length;
  if (n === 0) return 0;
  let minOffset = 0;
  let maxOffset = 0;
  for (const s of tenant.servers) {
    const offset = cluster.servers[s]!.offsetPct;
    minOffset = Math.min(minOffset, offset);
    maxOffset = Math.max(maxOffset, offset);
  }
  // Clamping adds back what an offset pushes below 0 and removes what it pushes above 100. Only the values within the
  // offsets' reach of a bound can be clamped: those few, sorted with prefix sums, give each server's share of it in
  // two binary searches.
  let sum = 0;
  const low: number[] = [];
  const high: number[] = [];
  for (let k = 0; k < n; k++) {
    const v = u[k]!;
    sum += v;
    if (v < -minOffset) low.push(v);
    else if (v > 100 - maxOffset) high.push(v);
  }
  const lowSorted = Float64Array.from(low).sort();
  const highSorted = Float64Array.from(high).sort();
  const lowPrefix = prefixSums(lowSorted);
  const highPrefix = prefixSums(highSorted);
  let total = 0;
  for (const s of tenant.servers) {
    const offset = cluster.servers[s]!.offsetPct;
    const below = lowerBound(lowSorted, -offset);
    const above = lowerBound(highSorted, 100 - offset);
    const raised = -(lowPrefix[below]! + below * offset);
    const cut = highPrefix[highSorted.length]! - highPrefix[above]! + (highSorted.length - above) * (offset - 100);
    total += (sum + n * offset + raised - cut) / n;
  }
  return total;
}

function prefixSums(a: Float64Array): Float64Array {
  const prefix = new Float64Array(a.length + 1);
  for (let i = 0; i < a.length; i++) prefix[i + 1] = prefix[i]! + a[i]!;
  return prefix;
}

/** The first index of ascending `a` whose value is >= `v`. */
function lowerBound(a: Float64Array, v: number): number {
  let lo = 0;
  let hi = a.length;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if (a[mid]! < v) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

/** Share of reimages that have another reimage of their environment within `CORRELATION_WINDOW_MS`. */
function correlatedShare(cluster: SimCluster): number {
  const { reimages } = cluster;
  if (reimages.length === 0) return 0;
  const environmentOf = new Map<string, number>();
  const serverEnvironment = new Int32Array(cluster.servers.length);
  for (const s of cluster.servers) {
    const name = cluster.tenants[s.tenant]!.environment;
    if (!environmentOf.has(name)) environmentOf.set(name, environmentOf.size);
    serverEnvironment[s.index] = environmentOf.get(name)!;
  }
  const last = new Float64Array(environmentOf.size).fill(-Infinity);
  const lastIndex = new Int32Array(environmentOf.size).fill(-1);
  const correlated = new Uint8Array(reimages.length);
  for (let i = 0; i < reimages.length; i++) {
    const r = reimages[i]!;
    const e = serverEnvironment[r.server]!;
    if (r.atMs - last[e]! <= CORRELATION_WINDOW_MS) {
      correlated[i] = 1;
      correlated[lastIndex[e]!] = 1;
    }
    last[e] = r.atMs;
    lastIndex[e] = i;
  }
  let n = 0;
  for (let i = 0; i < correlated.length; i++) n += correlated[i]!;
  return n / reimages.length;
}

/**
 * Month-to-month consistency of tenants' reimage rates (seeds/004 figure 6): the mean Spearman correlation of tenants'
 * reimages per server between consecutive whole months (NaN with fewer than two).
 */
function rankStability(cluster: SimCluster): number {
  const months = Math.floor(cluster.horizonMs / MONTH_MS);
  if (months < 2) return NaN;
  const { tenants } = cluster;
  const counts = tenants.map(() => new Float64Array(months));
  for (const r of cluster.reimages) {
    const m = Math.floor(r.atMs / MONTH_MS);
    if (m < months) counts[cluster.servers[r.server]!.tenant]![m]! += 1;
  }
  let sum = 0;
  let pairs = 0;
  let previous = ranks(tenants.map((t, i) => counts[i]![0]! / t.servers.length));
  for (let m = 1; m < months; m++) {
    const current = ranks(tenants.map((t, i) => counts[i]![m]! / t.servers.length));
    const rho = pearson(previous, current);
    if (Number.isFinite(rho)) {
      sum += rho;
      pairs++;
    }
    previous = current;
  }
  return pairs > 0 ? sum / pairs : NaN;
}

/** 1-based ranks, ties sharing their mean rank. */
function ranks(x: readonly number[]): number[] {
  const order = x.map((_, i) => i).sort((i, j) => x[i]! - x[j]!);
  const out = new Array<number>(x.length);
  for (let i = 0; i < order.length;) {
    let j = i;
    while (j + 1 < order.length && x[order[j + 1]!] === x[order[i]!]) j++;
    for (let k = i; k <= j; k++) out[order[k]!] = (i + j) / 2 + 1;
    i = j + 1;
  }
  return out;
}

function pearson(a: readonly number[], b: readonly number[]): number {
  const ma = a.reduce((s, v) => s + v, 0) / a.length;
  const mb = b.reduce((s, v) => s + v, 0) / b.length;
  let ab = 0;
  let aa = 0;
  let bb = 0;
  for (let i = 0; i < a.length; i++) {
    ab += (a[i]! - ma) * (b[i]! - mb);
    aa += (a[i]! - ma) ** 2;
    bb += (b[i]! - mb) ** 2;
  }
  return ab / Math.sqrt(aa * bb);
}
