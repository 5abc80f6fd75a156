/**
 * The simulator's one options resolver kit: every experiment's, job stream's and simulated policy's `resolveXxx()`
 * throws INVALID_ARGUMENT `<what> option <field> <why>` through {@link invalidArgument}, and the numeric checks the
 * experiments share live here instead of one copy each.
 */
import { isHarvestError } from "../common/errors.js";
import { invalidArgument } from "../common/options.js";
import { UTILIZATION_LEVELS, type SimCluster, type TraceSource, type UtilizationLevel } from "./model.js";

export { invalidArgument };

/** Checks that `v` is a finite number >= 0 ("must be >= 0"); returns it. */
export function checkAtLeastZero(what: string, field: string, v: number): number {
  if (!(Number.isFinite(v) && v >= 0)) invalidArgument(what, field, `must be >= 0 (got ${v})`);
  return v;
}

/** Checks that `v` is a finite number > 0 ("must be > 0"); returns it. */
export function checkAboveZero(what: string, field: string, v: number): number {
  if (!(Number.isFinite(v) && v > 0)) invalidArgument(what, field, `must be > 0 (got ${v})`);
  return v;
}

/** Checks that `v` is a safe integer >= `min` ("must be an integer >= min"); returns it. */
export function checkIntAtLeast(what: string, field: string, v: number, min: number): number {
  if (!(Number.isSafeInteger(v) && v >= min)) invalidArgument(what, field, `must be an integer >= ${min} (got ${v})`);
  return v;
}

/** Checks that `v` is an integer >= 1 ("must be a positive integer"); returns it. */
export function checkPositiveInt(what: string, field: string, v: number): number {
  if (!Number.isInteger(v) || v < 1) invalidArgument(what, field, `must be a positive integer (got ${v})`);
  return v;
}

/** Checks that `v` is a finite number > 0 ("must be a positive number"); returns it. */
export function checkPositive(what: string, field: string, v: number): number {
  if (!Number.isFinite(v) || v <= 0) invalidArgument(what, field, `must be a positive number (got ${v})`);
  return v;
}

/** Checks a fraction kept back, such as the primary's reserve: in [0, 1). Returns it. */
export function checkFraction(what: string, field: string, v: number): number {
  if (!(v >= 0 && v < 1)) invalidArgument(what, field, `must be in [0, 1) (got ${v})`);
  return v;
}

/** Checks a share of a whole, such as the job managers' share of the cluster: in (0, 1]. Returns it. */
export function checkShare(what: string, field: string, v: number): number {
  if (!(v > 0 && v <= 1)) invalidArgument(what, field, `must be in (0, 1] (got ${v})`);
  return v;
}

/**
 * Checks a non-empty list of values out of `allowed` and returns each value once, in the canonical order of
 * `allowed` (the baseline first).
 */
export function checkList<T>(what: string, field: string, values: readonly T[], allowed: readonly T[]): readonly T[] {
  if (values.length === 0) invalidArgument(what, field, "must name at least one value");
  for (const v of values)
    if (!allowed.includes(v))
      invalidArgument(what, field, `has ${JSON.stringify(v)}; use ${allowed.map(String).join(", ")}`);
  return allowed.filter((a) => values.includes(a));
}

/** Checks a seed that must fit a 32-bit unsigned integer (the seeded RNG's state); returns it. */
export function checkSeed32(what: string, seed: number): number {
  if (!Number.isInteger(seed) || seed < 0 || seed > 0xffffffff)
    invalidArgument(what, "seed", `must be an integer in 0..4294967295 (got ${seed})`);
  return seed;
}

/** Checks the `traces` option: "generated" or "real" (the message echoes the value given when `echo`). Returns it. */
export function checkTraces(what: string, traces: TraceSource, echo = true): TraceSource {
  if (traces !== "generated" && traces !== "real")
    invalidArgument(what, "traces", `must be "generated" or "real"${echo ? ` (got ${String(traces)})` : ""}`);
  return traces;
}

/** Checks a run's length in days: a finite number >= `min` ("must be at least min"). */
export function checkDays(what: string, days: number, min: number): void {
  if (!(Number.isFinite(days) && days >= min)) invalidArgument(what, "days", `must be at least ${min} (got ${days})`);
}

/** Checks that `atMs` falls within the cluster's experiment period [historyMs, horizonMs). */
export function checkExperimentTime(what: string, field: string, cluster: SimCluster, atMs: number): void {
  if (!(atMs >= cluster.historyMs && atMs < cluster.horizonMs))
    invalidArgument(what, field, `must be in [${cluster.historyMs}, ${cluster.horizonMs}) (got ${atMs})`);
}

/** The size of a generated run shared by the compute experiments: its cluster, days, load, seed and traces. */
export interface RunSize {
  servers: number;
  days: number;
  load: number;
  seed: number;
  level: UtilizationLevel;
  traces: TraceSource;
}

/** Checks a run size, naming the first field out of range in INVALID_ARGUMENT `<what> option <field>`. */
export function checkRunSize(what: string, r: RunSize): void {
  checkIntAtLeast(what, "servers", r.servers, 1);
  checkDays(what, r.days, 1);
  checkLoad(what, r.load);
  checkIntAtLeast(what, "seed", r.seed, 0);
  if (!UTILIZATION_LEVELS.includes(r.level))
    invalidArgument(what, "level", `must be one of ${UTILIZATION_LEVELS.join(", ")}`);
  checkTraces(what, r.traces, false);
}

/** Checks a load factor of the generated job stream: in (0, 5]. */
export function checkLoad(what: string, load: number): void {
  if (!(Number.isFinite(load) && load > 0 && load <= 5))
    invalidArgument(what, "load", `must be in (0, 5] (got ${load})`);
}

/**
 * Runs a resource manager resolver, turning its CONFIG_INVALID (about a daemon's configuration) into INVALID_ARGUMENT
 * naming `field.<inner>` among `what`'s options.
 */
export function resolvedAs<T>(what: string, field: string, resolve: () => T): T {
  try {
    return resolve();
  } catch (err) {
    if (!isHarvestError(err, "CONFIG_INVALID")) throw err;
    const inner = err.details.field;
    return invalidArgument(what, inner ? `${field}.${inner}` : field, `is invalid: ${err.message}`);
  }
}
