/**
 * The flags that several `harvest sim` commands declare alike, each with one help text and default, and the parser of
 * `--traces`: a command adds them with `.option(...FLAG)` so that the same flag never reads differently.
 */
import { oneOf } from "./command-kit.js";
import type { TraceSource } from "../sim/model.js";

/** `--json` of an experiment: the results as JSON, progress still on stderr. */
export const SIM_JSON_FLAG = ["--json", "print the results as JSON (progress still goes to stderr)"] as const;

/** `--seed` of the grid, which runs several clusters from one seed. */
export const CLUSTERS_SEED_FLAG = [
  "--seed <s>",
  "seed of the clusters, the jobs and every random choice",
  "1",
] as const;

/** `--traces` of the experiments that default to generated traces. */
export const GENERATED_TRACES_FLAG = [
  "--traces <source>",
  "primary utilization: generated, or real (../shared/data, when present)",
  "generated",
] as const;

/** `--traces` of the experiments that default to real traces (generated ones when the data is absent). */
export const REAL_TRACES_FLAG = [
  "--traces <source>",
  "primary utilization: real (../shared/data, else generated) or generated",
  "real",
] as const;

/** The value of `--traces`: generated or real. */
export function parseTraceSource(v: string): TraceSource {
  return oneOf<TraceSource>(v, ["generated", "real"], "--traces");
}
