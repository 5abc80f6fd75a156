/**
 * Option checks the storage and power experiments share (and `sim/experiments.ts` repeats): lists of allowed values,
 * positive integers, run seeds and trace sources, each throwing INVALID_ARGUMENT through `invalidArgument` with the
 * experiment's name. To be folded into the simulator's one options module (`sim/options.ts`).
 */
import { invalidArgument } from "../common/options.js";
import type { TraceSource } from "./model.js";

/** `values`, each one of `allowed`, in `allowed`'s order (at least one). */
export function checkList<T>(what: string, field: string, values: readonly T[], allowed: readonly T[]): readonly T[] {
  if (values.length === 0) invalidArgument(what, field, "must name at least one value");
  for (const v of values)
    if (!allowed.includes(v))
      invalidArgument(what, field, `has ${JSON.stringify(v)}; use ${allowed.map(String).join(", ")}`);
  return allowed.filter((a) => values.includes(a));
}

/** `v`, an integer >= 1. */
export function checkPositiveInt(what: string, field: string, v: number): number {
  if (!Number.isInteger(v) || v < 1) invalidArgument(what, field, `must be a positive integer (got ${v})`);
  return v;
}

/** `seed` (field "seed"), an integer in 0..2^32 - 1. */
export function checkSeed(what: string, seed: number): number {
  if (!Number.isInteger(seed) || seed < 0 || seed > 0xffffffff)
    invalidArgument(what, "seed", `must be an integer in 0..4294967295 (got ${seed})`);
  return seed;
}

/** `traces` (field "traces"), "generated" or "real". */
export function checkTraces(what: string, traces: TraceSource): TraceSource {
  if (traces !== "generated" && traces !== "real")
    invalidArgument(what, "traces", `must be "generated" or "real" (got ${String(traces)})`);
  return traces;
}
