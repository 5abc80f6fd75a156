/**
 * The simulator's cluster model: servers, racks, primary tenants (environment, machine function, utilization over
 * time) and disk reimages over time. Plain data built by a generator (`cluster-gen.ts`) or from real traces, read by
 * the compute and storage experiments. Time is ms since the simulation's epoch; the first `historyMs` are history the
 * policies learn from (the classifier's window), the experiment runs after it.
 */
import type { UtilizationPattern } from "../common/trace-gen.js";

/** Average primary utilization of the cluster, as seeds/004's simulations vary it. */
export type UtilizationLevel = "low" | "medium" | "high";
export const UTILIZATION_LEVELS: readonly UtilizationLevel[] = ["low", "medium", "high"];

/** Where primary-tenant utilization comes from. */
export type TraceSource = "generated" | "real";

/** A server. */
export interface SimServer {
  /** Position in `SimCluster.servers`. */
  readonly index: number;
  /** "s00042". */
  readonly id: string;
  readonly rack: string;
  /** Index of its primary tenant in `SimCluster.tenants`. */
  readonly tenant: number;
  readonly cores: number;
  /** Disk space Harvest may use on it. */
  readonly diskBytes: number;
  /** This server's utilization = its tenant's series + this offset (CPU-% points), clamped to 0..100. */
  readonly offsetPct: number;
}

/** A primary tenant. */
export interface SimTenant {
  readonly index: number;
  /** "t0042". */
  readonly id: string;
  /** Tenants of one environment are managed (and reimaged) together. */
  readonly environment: string;
  readonly machineFunction: string;
  /** The pattern the generator gave it (the truth the classifier should find); for replayed real traces, what `patternOf` finds in the history. */
  readonly pattern: UtilizationPattern;
  /** Its servers' indices. */
  readonly servers: readonly number[];
  /** Average-server CPU utilization (0..100) per slot of `SimCluster.slotMs`, from time 0 to the horizon. */
  readonly utilization: Float32Array;
  /** The reimage rate it was generated with, per server per month (the truth; experiments learn it from history). */
  readonly reimagesPerServerMonth: number;
}

/** A disk reimage: every Harvest replica on the server is gone at `atMs`. */
export interface SimReimage {
  readonly atMs: number;
  readonly server: number;
}

/** A cluster over time. */
export interface SimCluster {
  readonly servers: readonly SimServer[];
  readonly tenants: readonly SimTenant[];
  readonly racks: number;
  /** Resolution of the utilization series. */
  readonly slotMs: number;
  /** History before the experiment starts (the policies learn from [0, historyMs)). */
  readonly historyMs: number;
  /** End of the simulation (history included). */
  readonly horizonMs: number;
  /** Every reimage in [0, horizonMs), ascending by time. */
  readonly reimages: readonly SimReimage[];
  readonly level: UtilizationLevel;
  readonly source: TraceSource;
  readonly seed: number;
}

/** CPU utilization (0..100) of a server at time `tMs` (step-held per slot; the last slot holds after the horizon). */
export function serverUtilization(cluster: SimCluster, server: number, tMs: number): number {
  const s = cluster.servers[server]!;
  const series = cluster.tenants[s.tenant]!.utilization;
  const slot = Math.min(series.length - 1, Math.max(0, Math.floor(tMs / cluster.slotMs)));
  const v = series[slot]! + s.offsetPct;
  return v < 0 ? 0 : v > 100 ? 100 : v;
}

export const DAY_MS = 86_400_000;
export const MONTH_MS = 30 * DAY_MS;
