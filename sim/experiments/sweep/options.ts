/** The compute sweep's options: what {@link resolveComputeSweepOptions} fills in and checks. */
import {
  CLASS_FALLBACKS,
  DEFAULT_CLASS_FALLBACK,
  DEFAULT_JOB_LENGTH,
  DEFAULT_KILLED_JOBS_LEAVE_CLASSES,
  DEFAULT_LEARN_FROM_KILLS,
  DEFAULT_MAX_AM_SHARE,
  DEFAULT_SATURATION_SHARE,
  JOB_LENGTH_RULES,
  mustBeOneOf,
} from "../../../resourcemanager/index.js";
import type { ClassFallback, JobLengthRule } from "../../../resourcemanager/index.js";
import { outputOptions } from "../../experiments.js";
import type { ExperimentOutput, Resolved } from "../../experiments.js";
import type { TraceSource } from "../../model.js";
import { checkDays, checkIntAtLeast, checkShare, checkTraces, invalidArgument } from "../../options.js";
import type { ComputePolicy } from "../../results.js";

/** The policies every cell runs, the baselines first. */
export const SWEEP_POLICIES: readonly ComputePolicy[] = ["stock", "stock-unaware", "history"];

/** How a history run takes a tenant's peak (`ClassifierOptions.peakStatistic`). */
export type PeakVariant = "percentile" | "median-daily-max";

/** Options of `runComputeSweep`; {@link resolveComputeSweepOptions} fills the defaults and validates. */
export interface ComputeSweepOptions extends ExperimentOutput {
  /**
   * Servers of every cluster. The default keeps one seed's sweep (80 runs) near 7 minutes on a 2-core machine.
   * @default 200
   */
  servers?: number;
  /**
   * Simulated days of each run (after 30 days of history); the last day or so only drains (no arrivals).
   * @default 10
   */
  days?: number;
  /**
   * Seeds, each a whole sweep of its own: its clusters, job streams and every random choice of its runs. The tables
   * report each cell's mean over them; the table of every run and the CSV list each seed's runs.
   * @default [1, 2, 3]
   */
  seeds?: readonly number[];
  /**
   * Offered batch load: fractions of the reference cluster's harvestable core-hours over the arrival window.
   * @default [0.2, 0.4, 0.6, 0.8, 1.0]
   */
  loads?: readonly number[];
  /**
   * Average primary utilization of each level, %.
   * @default [15, 30, 45, 55, 65]
   */
  utilizationPct?: readonly number[];
  /**
   * The utilization of the cluster whose harvestable core-hours the loads are fractions of. The busiest level's by
   * default, so that load 1.0 just fills it and no cell is overloaded (an overloaded cell's queue grows for as long
   * as jobs arrive, and its job times measure the horizon more than the policy).
   * @default the highest of `utilizationPct`
   */
  referencePct?: number;
  /**
   * What a kill costs (see `KillCostModel`); "none" is the instant model.
   * @default "modelled"
   */
  killCost?: "modelled" | "none";
  /**
   * The resource manager's maxAmShare in every run (1: no limit).
   * @default 0.1 (DEFAULT_MAX_AM_SHARE, the resource manager's)
   */
  maxAmShare?: number;
  /** History's fallback when no class has room (`ComputeOptions.classFallback`). @default "stock" */
  classFallback?: ClassFallback;
  /** History places as stock from this share of what the primaries leave (`ComputeOptions.saturationShare`). @default 0.65 */
  saturationShare?: number;
  /** History's job length rule (`ComputeOptions.jobLength`). @default "terciles" */
  jobLength?: JobLengthRule;
  /** History's learning from kills (`ComputeOptions.learnFromKills`). @default false */
  learnFromKills?: boolean;
  /** History's confined jobs leave their classes after a kill (`ComputeOptions.killedJobsLeaveClasses`). @default true */
  killedJobsLeaveClasses?: boolean;
  /**
   * Run history with the "median-daily-max" peak too, at the load nearest the middle of `loads` (in every seed).
   * @default true
   */
  peakVariant?: boolean;
  /** @default "generated" */
  traces?: TraceSource;
  /** Directory for compute-sweep.md, .csv and the heat-map SVGs; none: render only. */
  out?: string;
}

/** {@link ComputeSweepOptions} with the defaults filled in. */
export type ResolvedComputeSweepOptions = Resolved<ComputeSweepOptions>;

/** Whose options the messages name: INVALID_ARGUMENT "compute sweep option <field> ...". */
const WHAT = "compute sweep";

/** Fills the defaults and validates every field (INVALID_ARGUMENT naming it). */
export function resolveComputeSweepOptions(o: ComputeSweepOptions = {}): ResolvedComputeSweepOptions {
  const r: ResolvedComputeSweepOptions = {
    servers: o.servers ?? 200,
    days: o.days ?? 10,
    seeds: [...new Set(o.seeds ?? [1, 2, 3])].sort((a, b) => a - b),
    loads: [...(o.loads ?? [0.2, 0.4, 0.6, 0.8, 1.0])].sort((a, b) => a - b),
    utilizationPct: [...(o.utilizationPct ?? [15, 30, 45, 55, 65])].sort((a, b) => a - b),
    referencePct: o.referencePct ?? Math.max(...(o.utilizationPct ?? [65])),
    killCost: o.killCost ?? "modelled",
    maxAmShare: o.maxAmShare ?? DEFAULT_MAX_AM_SHARE,
    classFallback: o.classFallback ?? DEFAULT_CLASS_FALLBACK,
    saturationShare: o.saturationShare ?? DEFAULT_SATURATION_SHARE,
    jobLength: o.jobLength ?? DEFAULT_JOB_LENGTH,
    learnFromKills: o.learnFromKills ?? DEFAULT_LEARN_FROM_KILLS,
    killedJobsLeaveClasses: o.killedJobsLeaveClasses ?? DEFAULT_KILLED_JOBS_LEAVE_CLASSES,
    peakVariant: o.peakVariant ?? true,
    traces: o.traces ?? "generated",
    ...outputOptions(o),
  };
  checkIntAtLeast(WHAT, "servers", r.servers, 1);
  checkDays(WHAT, r.days, 2);
  if (r.seeds.length === 0) invalidArgument(WHAT, "seeds", "must name at least one seed");
  for (const s of r.seeds)
    if (!(Number.isInteger(s) && s >= 0 && s <= 0xffffffff))
      invalidArgument(WHAT, "seeds", `has ${s}; use integers in 0..4294967295`);
  if (r.loads.length === 0) invalidArgument(WHAT, "loads", "must name at least one load");
  for (const l of r.loads)
    if (!(Number.isFinite(l) && l > 0 && l <= 5)) invalidArgument(WHAT, "loads", `has ${l}; use (0, 5]`);
  if (r.utilizationPct.length === 0) invalidArgument(WHAT, "utilizationPct", "must name at least one level");
  for (const u of [...r.utilizationPct, r.referencePct])
    if (!(Number.isFinite(u) && u > 0 && u < 95)) invalidArgument(WHAT, "utilizationPct", `has ${u}; use (0, 95) %`);
  if (r.killCost !== "modelled" && r.killCost !== "none")
    invalidArgument(WHAT, "killCost", `must be "modelled" or "none" (got ${String(r.killCost)})`);
  checkShare(WHAT, "maxAmShare", r.maxAmShare);
  if (!CLASS_FALLBACKS.includes(r.classFallback))
    invalidArgument(WHAT, "classFallback", mustBeOneOf(CLASS_FALLBACKS, r.classFallback));
  checkShare(WHAT, "saturationShare", r.saturationShare);
  if (!JOB_LENGTH_RULES.includes(r.jobLength))
    invalidArgument(WHAT, "jobLength", mustBeOneOf(JOB_LENGTH_RULES, r.jobLength));
  checkTraces(WHAT, r.traces, false);
  return r;
}
