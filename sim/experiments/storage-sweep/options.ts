/** The storage sweep's options, their defaults and their resolver (see run.ts for the sweep). */
import { UTILIZATION_LEVELS } from "../../model.js";
import type { TraceSource, UtilizationLevel } from "../../model.js";
import { invalidArgument } from "../../../common/options.js";
import { checkIntAtLeast, checkTraces } from "../../options.js";
import { outputOptions } from "../../experiments.js";
import type { ExperimentOutput, Resolved } from "../../experiments.js";

/** Confidence of the ratio's interval. */
export const RATIO_CONFIDENCE = 0.95;

/**
 * Utilization resolution of the sweep's clusters: hourly, the storage experiment's (`STORAGE_SLOT_MS` in
 * sim/experiments.ts), so that a sweep cell and `harvest sim storage` at the same size see the same cluster.
 */
export const STORAGE_SLOT_MS = 3_600_000;

/** Options of {@link runStorageSweep}; {@link resolveStorageSweepOptions} fills the defaults and validates. */
export interface StorageSweepOptions extends ExperimentOutput {
  /**
   * Servers in each seed's cluster. The default fits the whole default sweep (120 runs) in about 4 minutes on a
   * 2-core machine: a run's cost grows faster than the blocks each server stores, so 1,000 servers take twice that.
   * @default 500
   */
  servers?: number;
  /**
   * Simulated days of each run (after the 30 days of history the placement policies learn from).
   * @default 365
   */
  days?: number;
  /**
   * Seeds, each a cluster of its own and the random choices of its runs; at least 3, since the interval is estimated
   * from the spread between them.
   * @default [1, 2, 3, 4, 5]
   */
  seeds?: readonly number[];
  /**
   * Re-replication bandwidth each server gives, MB/s (10^6 bytes).
   * @default [5, 10, 20, 50]
   */
  reReplicationMBps?: readonly number[];
  /**
   * Blocks written per server over the run (`runStorage`'s `blocksPerDay` = this x servers / days); 30 is the
   * storage experiment's default.
   * @default [30, 60, 120]
   */
  blocksPerServer?: readonly number[];
  /**
   * Average primary utilization of every seed's cluster.
   * @default "high"
   */
  level?: UtilizationLevel;
  /**
   * Replication factors, each run with both placements.
   * @default [3]
   */
  replications?: readonly number[];
  /**
   * Primary-tenant utilization: generated, or real traces from ../shared/data (falls back to generated, with a note).
   * @default "generated"
   */
  traces?: TraceSource;
  /**
   * Directory to write `storage-sweep.md`, `.csv`, `-runs.csv` and `-data-loss.svg` to; none: render only.
   * @default undefined
   */
  out?: string;
}

/** {@link StorageSweepOptions} with every default filled in (lists deduplicated and sorted). */
export type ResolvedStorageSweepOptions = Resolved<StorageSweepOptions>;

/** The defaults of {@link StorageSweepOptions}. */
export const STORAGE_SWEEP_DEFAULTS = Object.freeze({
  servers: 500,
  days: 365,
  seeds: Object.freeze([1, 2, 3, 4, 5]),
  reReplicationMBps: Object.freeze([5, 10, 20, 50]),
  blocksPerServer: Object.freeze([30, 60, 120]),
  level: "high" as UtilizationLevel,
  replications: Object.freeze([3]),
  traces: "generated" as TraceSource,
});

/** `values` deduplicated and ascending, each checked by `ok` (INVALID_ARGUMENT naming `field` and `what`). */
function checkedList(field: string, values: readonly number[], ok: (v: number) => boolean, what: string): number[] {
  if (values.length === 0) invalidArgument("storage sweep", field, "must name at least one value");
  for (const v of values) if (!ok(v)) invalidArgument("storage sweep", field, `has ${v}; use ${what}`);
  return [...new Set(values)].sort((a, b) => a - b);
}

/** Fills the defaults into `o` and validates every field (INVALID_ARGUMENT naming it). */
export function resolveStorageSweepOptions(o: StorageSweepOptions = {}): ResolvedStorageSweepOptions {
  const d = STORAGE_SWEEP_DEFAULTS;
  const servers = checkIntAtLeast("storage sweep", "servers", o.servers ?? d.servers, 1);
  const days = checkIntAtLeast("storage sweep", "days", o.days ?? d.days, 1);
  const seeds = checkedList(
    "seeds",
    o.seeds ?? d.seeds,
    (v) => Number.isInteger(v) && v >= 0 && v <= 0xffffffff,
    "integers in 0..4294967295",
  );
  // The interval's width comes from the spread between seeds: two seeds leave one degree of freedom per placement.
  if (seeds.length < 3)
    invalidArgument("storage sweep", "seeds", `must name at least 3 distinct seeds (got ${seeds.length})`);
  const level = o.level ?? d.level;
  if (!UTILIZATION_LEVELS.includes(level))
    invalidArgument("storage sweep", "level", `must be one of ${UTILIZATION_LEVELS.join(", ")} (got ${String(level)})`);
  const traces = checkTraces("storage sweep", o.traces ?? d.traces);
  return {
    servers,
    days,
    seeds,
    reReplicationMBps: checkedList(
      "reReplicationMBps",
      o.reReplicationMBps ?? d.reReplicationMBps,
      (v) => Number.isFinite(v) && v > 0,
      "numbers > 0 (MB/s)",
    ),
    blocksPerServer: checkedList(
      "blocksPerServer",
      o.blocksPerServer ?? d.blocksPerServer,
      (v) => Number.isFinite(v) && v > 0,
      "numbers > 0",
    ),
    level,
    replications: checkedList(
      "replications",
      o.replications ?? d.replications,
      (v) => Number.isInteger(v) && v >= 1 && v <= 10,
      "factors in 1..10",
    ),
    traces,
    ...outputOptions(o),
  };
}
