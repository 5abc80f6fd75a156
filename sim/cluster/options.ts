/** What cluster to build: the generator's options, their defaults, the levels' mean utilization, and the resolver. */
import { HarvestError } from "../../common/errors.js";
import type { TraceSource, UtilizationLevel } from "../model.js";
import { DAY_MS, UTILIZATION_LEVELS } from "../model.js";
import type { RealTemplate } from "../real-traces.js";

/** What cluster to build. `resolveClusterGenOptions` fills the defaults and validates. */
export interface ClusterGenOptions {
  /**
   * Number of servers.
   * @default 1000
   */
  servers: number;
  /**
   * Average primary utilization of the cluster (see `LEVEL_MEAN_PCT`).
   * @default "medium"
   */
  level: UtilizationLevel;
  /**
   * Days of history before the experiment: the window the policies learn from.
   * @default 30
   */
  historyDays: number;
  /**
   * Days of experiment after the history.
   * @default 30
   */
  days: number;
  /**
   * Resolution of the utilization series: 5 minutes suits compute runs, 1 hour year-long storage runs. Memory is
   * tenants x slots x 4 bytes (about 1,250 tenants for 10,000 servers).
   * @default 300000
   */
  slotMs: number;
  /**
   * The seed: the same options and seed give the same cluster.
   * @default 1
   */
  seed: number;
  /**
   * "generated" shapes, or "real" traces replayed (then `templates` is required).
   * @default "generated"
   */
  source: TraceSource;
  /** @default 16 */
  coresPerServer: number;
  /**
   * Disk space Harvest may use on each server: 2 TB, half of a typical 4 TB data disk left to the primary.
   * @default 2000000000000
   */
  diskBytes: number;
  /** @default 40 */
  serversPerRack: number;
  /**
   * The real series tenants replay when `source` is "real", from `loadRealTemplates()`.
   * @default undefined
   */
  templates?: readonly RealTemplate[];
  /**
   * The cluster-wide average primary utilization, %, in place of the level's (`LEVEL_MEAN_PCT`): the compute sweep
   * runs five levels up to 65 %. `level` still labels the cluster.
   * @default LEVEL_MEAN_PCT[level]
   */
  meanPct?: number;
}

/** The defaults of every `ClusterGenOptions` field but `templates`. */
export const DEFAULT_CLUSTER_GEN: Readonly<Required<Omit<ClusterGenOptions, "templates" | "meanPct">>> = Object.freeze({
  servers: 1000,
  level: "medium",
  historyDays: 30,
  days: 30,
  slotMs: 300_000,
  seed: 1,
  source: "generated",
  coresPerServer: 16,
  diskBytes: 2_000_000_000_000,
  serversPerRack: 40,
});

/**
 * Cluster-wide average primary CPU utilization (over servers and time) of each level. seeds/004 hides absolute
 * utilizations and sweeps the range instead; 15 / 35 / 55 % span lightly loaded clusters to busy ones.
 */
export const LEVEL_MEAN_PCT: Readonly<Record<UtilizationLevel, number>> = Object.freeze({
  low: 15,
  medium: 35,
  high: 55,
});

/** Fills defaults into `options` and validates every field, naming the offending one (CONFIG_INVALID). */
export function resolveClusterGenOptions(options: Partial<ClusterGenOptions> = {}): Readonly<ClusterGenOptions> {
  const o: ClusterGenOptions = { ...DEFAULT_CLUSTER_GEN };
  for (const [k, v] of Object.entries(options)) if (v !== undefined) (o as unknown as Record<string, unknown>)[k] = v;
  const check = (field: keyof ClusterGenOptions, ok: boolean, what: string): void => {
    if (!ok) {
      throw new HarvestError(
        "CONFIG_INVALID",
        `cluster option ${field} must be ${what}, got ${String(o[field] as unknown)}`,
        {
          details: { field },
        },
      );
    }
  };
  const int = (v: number, min: number): boolean => Number.isSafeInteger(v) && v >= min;
  check("servers", int(o.servers, 1), "an integer >= 1");
  check("level", UTILIZATION_LEVELS.includes(o.level), UTILIZATION_LEVELS.join(" | "));
  if (o.meanPct !== undefined)
    check("meanPct", Number.isFinite(o.meanPct) && o.meanPct > 0 && o.meanPct < 95, "in (0, 95)");
  check("historyDays", Number.isFinite(o.historyDays) && o.historyDays >= 0, "a number >= 0");
  check("days", Number.isFinite(o.days) && o.days > 0, "a number > 0");
  check("slotMs", int(o.slotMs, 1000) && o.slotMs <= DAY_MS, `an integer in 1000..${DAY_MS}`);
  check("seed", Number.isSafeInteger(o.seed), "an integer");
  check("source", o.source === "generated" || o.source === "real", "generated | real");
  check("coresPerServer", int(o.coresPerServer, 1), "an integer >= 1");
  check("diskBytes", Number.isFinite(o.diskBytes) && o.diskBytes > 0, "a number > 0");
  check("serversPerRack", int(o.serversPerRack, 1), "an integer >= 1");
  if (o.source === "real") {
    if (o.templates === undefined || o.templates.length === 0) {
      throw new HarvestError("CONFIG_INVALID", 'cluster option templates must hold real series when source is "real"', {
        details: { field: "templates" },
      });
    }
  }
  return Object.freeze(o);
}
