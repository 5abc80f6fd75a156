/**
 * The power experiment runner (`harvest sim power`): per utilization level, one generated cluster (racks of 3 chassis
 * of 12 servers, seeds/000 Table I), one plan of the power budgets on its history (`planPowerBudgets`), and every
 * asked combination of capping mode and placement run on it under those budgets, so that the runs of a comparison see
 * the same primaries, the same secondary arrivals and the same budgets. Renders (and, given `out`, writes) the report.
 */
import { invalidArgument } from "../../../common/options.js";
import { checkList, checkPositiveInt, checkSeed32, checkTraces } from "../../options.js";
import { performance } from "node:perf_hooks";
import { HarvestError } from "../../../common/errors.js";
import { resolvePowerProfile } from "../../../common/power-profiles.js";
import { generateCluster } from "../../cluster-gen.js";
import { chooseTraces, RunTracker } from "../../experiments.js";
import type { ExperimentEvent, ExperimentOptions, ExperimentOutcome } from "../../experiments.js";
import { UTILIZATION_LEVELS } from "../../model.js";
import type { SimCluster, TraceSource, UtilizationLevel } from "../../model.js";
import { CAPPING_MODES, POWER_DOMAIN_LEVELS, POWER_PLACEMENTS } from "./options.js";
import type { CappingMode, PowerDomainLevel, PowerOptions, PowerPlacement, PowerResult } from "./options.js";
import { planPowerBudgets, runPower } from "./run.js";
import { renderPowerReport } from "./report.js";
import { writeReport } from "../../report.js";

/** The power experiment's default size: a week on 200 servers (17 chassis) runs in about a minute. */
export const POWER_DEFAULTS = Object.freeze({ servers: 200, days: 7 });

/** Options of the power experiment. */
export interface PowerExperimentOptions extends ExperimentOptions {
  /**
   * Capping modes to run.
   * @default ["full-server", "per-container"]
   */
  cappings?: readonly CappingMode[];
  /**
   * Placements to run, each with every capping mode.
   * @default ["stock", "power-aware"]
   */
  placements?: readonly PowerPlacement[];
  /**
   * Chassis per rack (a rack is one hardware generation; seeds/000 Table I: 3).
   * @default 3
   */
  chassisPerRack?: number;
  /**
   * What of `PowerOptions` the runs share (budget fraction, plan buffer, domain level, profiles, load, period, ...).
   * @default {}
   */
  power?: Omit<
    PowerOptions,
    "capping" | "placement" | "seed" | "budgets" | "observer" | "onProgress" | "progressEvery"
  >;
}

/** Power experiment options with every default filled in. */
export interface ResolvedPowerExperimentOptions {
  servers: number;
  days: number;
  seed: number;
  levels: readonly UtilizationLevel[];
  traces: TraceSource;
  cappings: readonly CappingMode[];
  placements: readonly PowerPlacement[];
  chassisPerRack: number;
  power: NonNullable<PowerExperimentOptions["power"]>;
  out: string | undefined;
  command: string | undefined;
  onProgress: ((e: ExperimentEvent) => void) | undefined;
}

/** Fills the power experiment's defaults and validates (INVALID_ARGUMENT naming the field). */
export function resolvePowerExperimentOptions(o: PowerExperimentOptions = {}): ResolvedPowerExperimentOptions {
  const seed = checkSeed32("experiment", o.seed ?? 1);
  const traces = checkTraces("experiment", o.traces ?? "generated");
  const power = o.power ?? {};
  // An unknown profile fails here, before any cluster is generated.
  for (const id of power.profiles ?? [])
    try {
      resolvePowerProfile(id);
    } catch (err) {
      throw new HarvestError("INVALID_ARGUMENT", `experiment option power.profiles: ${(err as Error).message}`, {
        details: { field: "power.profiles" },
        cause: err,
      });
    }
  if (power.domainLevel !== undefined && !POWER_DOMAIN_LEVELS.includes(power.domainLevel as PowerDomainLevel))
    invalidArgument(
      "experiment",
      "power.domainLevel",
      `must be ${POWER_DOMAIN_LEVELS.join(" or ")} (got ${String(power.domainLevel)})`,
    );
  return {
    servers: checkPositiveInt("experiment", "servers", o.servers ?? POWER_DEFAULTS.servers),
    days: checkPositiveInt("experiment", "days", o.days ?? POWER_DEFAULTS.days),
    seed,
    levels: checkList<UtilizationLevel>("experiment", "levels", o.levels ?? ["medium"], UTILIZATION_LEVELS),
    traces,
    cappings: checkList("experiment", "cappings", o.cappings ?? CAPPING_MODES, CAPPING_MODES),
    placements: checkList("experiment", "placements", o.placements ?? POWER_PLACEMENTS, POWER_PLACEMENTS),
    chassisPerRack: checkPositiveInt("experiment", "chassisPerRack", o.chassisPerRack ?? 3),
    power,
    out: o.out,
    command: o.command,
    onProgress: o.onProgress,
  };
}

/** Events between progress reports: about one a second at the simulator's speed. */
const PROGRESS_EVERY = 200_000;
/** Utilization resolution of the cluster: 5-minute slots, the step of the real traces. */
const POWER_SLOT_MS = 300_000;

/**
 * Runs each capping mode with each placement on each level's cluster, under the budgets planned once per level from
 * that cluster's history (or `power.budgetFraction` of the nameplate).
 */
export async function runPowerExperiment(
  options: PowerExperimentOptions = {},
): Promise<ExperimentOutcome<PowerResult>> {
  const o = resolvePowerExperimentOptions(options);
  const runs = o.levels.length * (1 + o.cappings.length * o.placements.length);
  const tracker = new RunTracker(runs, o.onProgress);
  const traces = await chooseTraces(o.traces, (m) => tracker.note(m));
  const serversPerChassis = o.power.serversPerChassis ?? 12;
  const results: PowerResult[] = [];
  for (const level of o.levels) {
    tracker.note(
      `generating the ${level}-utilization cluster: ${o.servers} servers, ${o.days} days (${traces.source} traces)`,
    );
    const cluster: SimCluster = generateCluster({
      servers: o.servers,
      level,
      days: o.days,
      slotMs: POWER_SLOT_MS,
      seed: o.seed,
      source: traces.source,
      serversPerRack: serversPerChassis * o.chassisPerRack,
      ...(traces.templates ? { templates: traces.templates } : {}),
    });
    const shared: PowerOptions = { ...o.power, seed: o.seed, progressEvery: PROGRESS_EVERY };
    const planDays = shared.planDays ?? Math.min(7, cluster.historyMs / 86_400_000);
    const planned = tracker.track(
      `power ${level} plan (${planDays} days of history, uncapped)`,
      cluster.historyMs - planDays * 86_400_000,
      (onProgress) => {
        const started = performance.now();
        const budgets = planPowerBudgets(cluster, { ...shared, onProgress });
        return { budgets, events: budgets.history.events, wallMs: performance.now() - started };
      },
    );
    const budgets = planned.budgets;
    for (const p of budgets.plans)
      tracker.note(
        `plan ${level} ${p.profileId}: full-server ${p.plan.fullServer.oversubscriptionPct.toFixed(1)}%, ` +
          `per-container ${p.plan.perContainer.oversubscriptionPct.toFixed(1)}% below nameplate; enforcing ` +
          `${(budgets.perServerWatts[p.profileId] ?? 0).toFixed(1)} W per server (${budgets.source})`,
      );
    for (const capping of o.cappings)
      for (const placement of o.placements)
        results.push(
          tracker.track(`power ${level} ${capping} ${placement}`, cluster.historyMs, (onProgress) =>
            runPower(cluster, { ...shared, capping, placement, budgets, onProgress }),
          ),
        );
  }
  const report = renderPowerReport(results, o.command !== undefined ? { command: o.command } : {});
  return {
    results,
    report,
    files: o.out !== undefined ? writeReport(o.out, report) : [],
    traces: traces.source,
  };
}
