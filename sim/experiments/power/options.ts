/**
 * The power experiment's options (what a run may set, with their defaults), its observer hooks and its figures;
 * `resolvePowerOptions` fills the defaults and validates every field. The model is described at `runPower` (run.ts).
 */
import { HarvestError } from "../../../common/errors.js";
import { invalidArgument } from "../../../common/options.js";
import { DEFAULT_POWER_PROFILE_ID, resolvePowerProfile } from "../../../common/power-profiles.js";
import type { PowerProfile } from "../../../common/power-profiles.js";
import { resolveCappingOptions } from "../../../nodemanager/index.js";
import type { CappingOptions } from "../../../nodemanager/index.js";
import {
  DEFAULT_OVERSUBSCRIPTION_OPTIONS,
  resolveOversubscriptionOptions,
  resolvePowerDomainOptions,
  resolvePowerPlacementOptions,
} from "../../../resourcemanager/index.js";
import type {
  CappingApproach,
  OversubscriptionOptions,
  OversubscriptionPlan,
  PowerDomainOptions,
  PowerPlacementOptions,
} from "../../../resourcemanager/index.js";
import type { EngineProgress } from "../../engine/engine.js";
import { DAY_MS } from "../../model.js";
import type { SimCluster } from "../../model.js";
import type { RunSetup } from "../../results.js";

// ------------------------------------------------------------------------------------------------ types

/**
 * How a server is brought under its budget: the full-server baseline (RAPL-like) or Harvest's per-container agent
 * (the oversubscription planner's approaches).
 */
export type CappingMode = CappingApproach;
/** Capping modes in report order: the baseline first. */
export const CAPPING_MODES: readonly CappingMode[] = ["full-server", "per-container"];

/** Where secondary tasks go: a random server with room (stock), or the resource manager's power-aware score. */
export type PowerPlacement = "stock" | "power-aware";
/** Placements in report order: the baseline first. */
export const POWER_PLACEMENTS: readonly PowerPlacement[] = ["stock", "power-aware"];

/** The level of the power hierarchy that has budgets (seeds/000 evaluates chassis budgets). */
export type PowerDomainLevel = "chassis" | "rack";
/** The domain levels a run may budget. */
export const POWER_DOMAIN_LEVELS: readonly PowerDomainLevel[] = ["chassis", "rack"];

/** Options of {@link runPower} and {@link planPowerBudgets}; {@link resolvePowerOptions} fills the defaults. */
export interface PowerOptions {
  /** @default "per-container" */
  capping?: CappingMode;
  /** @default "stock" */
  placement?: PowerPlacement;
  /**
   * Seeds the task arrivals, their durations and the stock placement's draws.
   * @default cluster.seed
   */
  seed?: number;
  /**
   * Servers per chassis; a rack is cut into chassis of this many servers (seeds/000 Table I: 12 blades per chassis,
   * 3 chassis per rack).
   * @default 12
   */
  serversPerChassis?: number;
  /** @default "chassis" */
  domainLevel?: PowerDomainLevel;
  /**
   * Hardware profiles (ids of `resolvePowerProfile`), given to racks in turn (a rack is one hardware generation).
   * @default [DEFAULT_POWER_PROFILE_ID]
   */
  profiles?: readonly string[];
  /**
   * The budget of a domain as a fraction of its servers' nameplate (the profile's 100 % draw): 0.8 oversubscribes
   * by 20 %. Unset: the planner's budget (see `planApproach`) from the last `planDays` of history.
   * @default undefined
   */
  budgetFraction?: number;
  /**
   * Which of the planner's budgets is enforced when `budgetFraction` is unset: the one planned for per-container
   * capping (lower: the oversubscription Harvest claims) or for full-server capping. Both capping modes run under it,
   * so that they are compared at the same oversubscription.
   * @default "per-container"
   */
  planApproach?: CappingApproach;
  /**
   * The buffer added to the planner's step-4 budget for the enforced one (seeds/000 III-E step 5 adds 10 % "to
   * account for future variability"; `planner.bufferShare` still sets the buffer of the reported plan). 0 enforces the
   * lowest budget the planner finds acceptable, where capping happens at about the planned rate: with the buffer, a
   * week of the same workload rarely reaches the budget, and the capping modes could not be told apart.
   * @default 0
   */
  planBufferShare?: number;
  /**
   * Days of history (ending where the experiment starts) simulated without capping to give the planner its draws.
   * @default 7
   */
  planDays?: number;
  /**
   * The planner's settings (seeds/000 III-E: emax, fmin, buffer).
   * @default {} (the planner's defaults)
   */
  planner?: Partial<OversubscriptionOptions>;
  /**
   * Share of each server's cores kept free for its primary tenant (the scheduler's and yield controller's reserve).
   * @default 0.1
   */
  reserveFraction?: number;
  /**
   * Cores each secondary task asks for.
   * @default 2
   */
  taskCores?: number;
  /**
   * Median duration of a secondary task at full speed (log-normal).
   * @default 300000 (5 minutes)
   */
  taskMedianMs?: number;
  /**
   * Log-normal sigma of task durations.
   * @default 1
   */
  taskLogSd?: number;
  /**
   * No task is longer than this at full speed.
   * @default 7200000 (2 hours)
   */
  taskMaxMs?: number;
  /**
   * Secondary work offered, as a fraction of the harvestable core-hours of the experiment (capacity - primary -
   * reserve); kills' re-runs come on top.
   * @default 0.7
   */
  secondaryLoad?: number;
  /**
   * The capping loop's period: the domain is evaluated and every server's controller (or RAPL model) ticks this
   * often while a domain alerts or a server is capped. The node manager ticks every 200 ms; 1 s keeps week-long runs
   * fast, and the controller's timings (kill deadline 2 s, quiet period 30 s) are several periods long either way.
   * @default 1000
   */
  controlPeriodMs?: number;
  /**
   * The capping controller's settings (`CappingOptions`), also used by the full-server baseline for its cap threshold.
   * @default {}
   */
  cappingOptions?: Partial<CappingOptions>;
  /**
   * The power domains' alert thresholds (`PowerDomainOptions`: alert at 97 % of the budget, lift under 90 %).
   * @default {}
   */
  domainOptions?: Partial<Pick<PowerDomainOptions, "alertFraction" | "uncapFraction">>;
  /**
   * The power-aware placement's settings (`PowerPlacementOptions`: alpha 0.8).
   * @default {}
   */
  placementOptions?: Partial<PowerPlacementOptions>;
  /**
   * The lowest frequency (share of nominal) the full-server cap may set: seeds/000's minimum p-state, half the nominal.
   * @default 0.5
   */
  raplMinFrequency?: number;
  /**
   * DVFS model: at a fixed utilization, dynamic power scales as f^k (the planner's `dvfsExponent`).
   * @default 1.77
   */
  dvfsExponent?: number;
  /**
   * Simulated time before the experiment (no capping, not measured) that fills the cluster with running tasks.
   * @default 7200000 (2 hours)
   */
  warmupMs?: number;
  /**
   * Budgets from an earlier {@link planPowerBudgets} on the same cluster and options (the experiment plans once and
   * runs every capping and placement under the same budgets).
   * @default undefined (planned by this run)
   */
  budgets?: PowerBudgets;
  /**
   * Told about control periods and kills (tests, traces).
   * @default undefined
   */
  observer?: PowerObserver;
  /**
   * Checks the books after every event (secondary allocation within capacity - primary - reserve after yielding,
   * domain draws the sums of their servers'); a violation throws INTERNAL. Tests only.
   * @default false
   */
  checkInvariants?: boolean;
  /** @default undefined */
  onProgress?: (p: EngineProgress) => void;
  /** @default 1000000 */
  progressEvery?: number;
}

/** {@link PowerOptions} with every default filled in. */
export interface ResolvedPowerOptions {
  capping: CappingMode;
  placement: PowerPlacement;
  seed: number;
  serversPerChassis: number;
  domainLevel: PowerDomainLevel;
  profiles: readonly PowerProfile[];
  budgetFraction: number | undefined;
  planApproach: CappingApproach;
  planBufferShare: number;
  planDays: number;
  planner: OversubscriptionOptions;
  reserveFraction: number;
  taskCores: number;
  taskMedianMs: number;
  taskLogSd: number;
  taskMaxMs: number;
  secondaryLoad: number;
  controlPeriodMs: number;
  cappingOptions: CappingOptions;
  domainOptions: PowerDomainOptions;
  placementOptions: PowerPlacementOptions;
  raplMinFrequency: number;
  dvfsExponent: number;
  warmupMs: number;
  budgets: PowerBudgets | undefined;
  observer: PowerObserver | undefined;
  checkInvariants: boolean;
  onProgress: ((p: EngineProgress) => void) | undefined;
  progressEvery: number;
}

/** One domain's control period, as the observer sees it (after the period's decisions took effect). */
export interface PowerPeriodEvent {
  nowMs: number;
  domain: string;
  /** The domain's draw the period's decisions were made on, and its budget. */
  drawWatts: number;
  budgetWatts: number;
  /** The domain alerted this period (its servers had their even share as a budget). */
  alert: boolean;
  /** How long the domain has been over its budget without a break (0: not over). */
  overBudgetForMs: number;
  /**
   * True when no capping could bring the domain under budget: each server over its share at the lowest draw the mode
   * can reach (per-container: every secondary container gone; full-server: every core at the lowest frequency).
   */
  beyondReach: boolean;
}

/** Hooks into a run. */
export interface PowerObserver {
  onControlPeriod?(e: PowerPeriodEvent): void;
  /** A task attempt was killed: by the capping agent ("capping") or because its primary grew ("yield"). */
  onTaskKilled?(e: { nowMs: number; server: number; cause: "capping" | "yield" }): void;
}

/** The budgets a run enforces and the plan they came from. */
export interface PowerBudgets {
  /** Budget per server of each profile id (a domain's budget is the sum over its servers). */
  perServerWatts: Readonly<Record<string, number>>;
  /** Where they came from. */
  source: "plan" | "fraction";
  /** The planner's answer per profile, on the uncapped history. */
  plans: readonly ProfilePlan[];
  /** The uncapped history run the plans were made on. */
  history: { days: number; events: number; wallMs: number; samples: number };
}

/** The planner's answer for the domains of one hardware profile. */
export interface ProfilePlan {
  profileId: string;
  /** The domains it was planned on (the most common size among the profile's domains) and their size. */
  domains: number;
  serversPerDomain: number;
  plan: OversubscriptionPlan;
}

/** What the planner found achievable (server-weighted over profiles), for the reports. */
export interface OversubscriptionFigures {
  /** Budget below nameplate, % (seeds/000 Table IV's "chassis budget delta"), per capping approach. */
  fullServerPct: number;
  perContainerPct: number;
  /** Per-container over full-server oversubscription (seeds/000: about 2x); NaN when full-server finds none. */
  ratio: number;
  /** The enforced budget below nameplate, %. */
  enforcedPct: number;
  budgetSource: "plan" | "fraction";
}

/** One power run's figures. */
export interface PowerResult extends RunSetup {
  capping: CappingMode;
  placement: PowerPlacement;
  domainLevel: PowerDomainLevel;
  domains: number;
  /** Sum of the domains' budgets, and of the servers' nameplate draws. */
  budgetWatts: number;
  nameplateWatts: number;
  oversubscription: OversubscriptionFigures;
  /** Times a domain's alert went on (the even share sent to its servers). */
  domainAlerts: number;
  /** Times a server's cap engaged (the controller's caps, or the RAPL-like cap's). */
  serverCaps: number;
  /** Server-hours with a cap engaged (the controller not uncapped, or the RAPL-like cap on). */
  cappedServerHours: number;
  /** Domain-hours with the domain's draw over its budget, and their share of all domain-hours. */
  overBudgetDomainHours: number;
  overBudgetShare: number;
  /** Over-budget stretches, the longest, and domain-hours over budget that no capping could have avoided. */
  overBudgetEpisodes: number;
  maxOverBudgetS: number;
  /** The longest over-budget stretch in which capping could have reached the budget (the settling time seen). */
  maxReachableOverBudgetS: number;
  beyondReachDomainHours: number;
  /** Core-hours of work lost to throttling: critical (primary tenants), of which user-facing ones, and secondary. */
  criticalThrottledCoreHours: number;
  userFacingThrottledCoreHours: number;
  noncriticalThrottledCoreHours: number;
  /** Secondary task attempts killed by the capping agent, and by the yield controller (primary growth). */
  cappingKills: number;
  yieldKills: number;
  /** Core-hours of secondary work lost in killed attempts. */
  wastedCoreHours: number;
  tasksSubmitted: number;
  tasksCompleted: number;
  /** Secondary core-hours completed (work of finished tasks at full speed). */
  secondaryCoreHours: number;
  /** Mean runtime of a completed task's last attempt over its full-speed duration. */
  meanTaskSlowdown: number;
  /** Mean time an attempt waited for a server, seconds. */
  meanQueueWaitS: number;
  /** Mean server draw, watts, and the largest domain draw over its budget. */
  meanServerWatts: number;
  peakDomainLoad: number;
  events: number;
  wallMs: number;
  eventsPerSec: number;
}

/** Fills the defaults of `options` for `cluster` and validates every field (INVALID_ARGUMENT naming it). */
export function resolvePowerOptions(cluster: SimCluster, options: PowerOptions = {}): ResolvedPowerOptions {
  const capping = options.capping ?? "per-container";
  if (!CAPPING_MODES.includes(capping))
    invalidArgument("power", "capping", `must be ${CAPPING_MODES.join(" or ")} (got ${capping})`);
  const placement = options.placement ?? "stock";
  if (!POWER_PLACEMENTS.includes(placement))
    invalidArgument("power", "placement", `must be ${POWER_PLACEMENTS.join(" or ")} (got ${placement})`);
  const domainLevel = options.domainLevel ?? "chassis";
  if (!POWER_DOMAIN_LEVELS.includes(domainLevel))
    invalidArgument("power", "domainLevel", `must be ${POWER_DOMAIN_LEVELS.join(" or ")} (got ${domainLevel})`);
  const planApproach = options.planApproach ?? "per-container";
  if (planApproach !== "per-container" && planApproach !== "full-server")
    invalidArgument("power", "planApproach", `must be per-container or full-server (got ${String(planApproach)})`);
  const ids = options.profiles ?? [DEFAULT_POWER_PROFILE_ID];
  if (ids.length === 0) invalidArgument("power", "profiles", "must name at least one hardware profile");
  const profiles = ids.map((id) => {
    try {
      return resolvePowerProfile(id);
    } catch (err) {
      throw new HarvestError("INVALID_ARGUMENT", `power option profiles: ${(err as Error).message}`, {
        details: { field: "profiles" },
        cause: err,
      });
    }
  });
  const o: ResolvedPowerOptions = {
    capping,
    placement,
    seed: options.seed ?? cluster.seed,
    serversPerChassis: options.serversPerChassis ?? 12,
    domainLevel,
    profiles,
    budgetFraction: options.budgetFraction,
    planApproach,
    planBufferShare: options.planBufferShare ?? 0,
    planDays: options.planDays ?? Math.min(7, cluster.historyMs / DAY_MS),
    planner: resolveOversubscriptionOptions(options.planner ?? {}),
    reserveFraction: options.reserveFraction ?? 0.1,
    taskCores: options.taskCores ?? 2,
    taskMedianMs: options.taskMedianMs ?? 300_000,
    taskLogSd: options.taskLogSd ?? 1,
    taskMaxMs: options.taskMaxMs ?? 7_200_000,
    secondaryLoad: options.secondaryLoad ?? 0.7,
    controlPeriodMs: options.controlPeriodMs ?? 1000,
    cappingOptions: resolveCappingOptions(options.cappingOptions ?? {}),
    // The simulated resource manager hears of every change at once, so no node is ever silent (stale).
    domainOptions: resolvePowerDomainOptions({ ...(options.domainOptions ?? {}), staleAfterMs: NEVER_STALE_MS }),
    placementOptions: resolvePowerPlacementOptions(options.placementOptions ?? {}),
    raplMinFrequency: options.raplMinFrequency ?? 0.5,
    dvfsExponent: options.dvfsExponent ?? DEFAULT_OVERSUBSCRIPTION_OPTIONS.dvfsExponent,
    warmupMs: options.warmupMs ?? 7_200_000,
    budgets: options.budgets,
    observer: options.observer,
    checkInvariants: options.checkInvariants ?? false,
    onProgress: options.onProgress,
    progressEvery: options.progressEvery ?? 1_000_000,
  };
  if (!Number.isSafeInteger(o.seed)) invalidArgument("power", "seed", `must be an integer (got ${o.seed})`);
  if (!(Number.isSafeInteger(o.serversPerChassis) && o.serversPerChassis >= 1))
    invalidArgument("power", "serversPerChassis", `must be an integer >= 1 (got ${o.serversPerChassis})`);
  if (!(o.planBufferShare >= 0 && o.planBufferShare <= 1))
    invalidArgument("power", "planBufferShare", `must be in [0, 1] (got ${o.planBufferShare})`);
  if (o.budgetFraction !== undefined && !(o.budgetFraction > 0 && o.budgetFraction <= 1))
    invalidArgument("power", "budgetFraction", `must be in (0, 1] of the nameplate draw (got ${o.budgetFraction})`);
  const historyDays = cluster.historyMs / DAY_MS;
  if (!(o.planDays > 0 && o.planDays <= historyDays + 1e-9))
    invalidArgument(
      "power",
      "planDays",
      `must be in (0, ${historyDays}] (the cluster's days of history), got ${o.planDays}`,
    );
  if (!(o.reserveFraction >= 0 && o.reserveFraction < 1))
    invalidArgument("power", "reserveFraction", `must be in [0, 1) (got ${o.reserveFraction})`);
  if (!(Number.isFinite(o.taskCores) && o.taskCores > 0))
    invalidArgument("power", "taskCores", `must be > 0 (got ${o.taskCores})`);
  const taskMilli = Math.round(o.taskCores * 1000);
  if (
    cluster.servers.length > 0 &&
    !cluster.servers.some((s) => s.cores * 1000 - Math.ceil(s.cores * 1000 * o.reserveFraction) >= taskMilli)
  )
    invalidArgument("power", "taskCores", `${o.taskCores} cores fit on no server once the reserve is kept`);
  if (!(Number.isFinite(o.taskMedianMs) && o.taskMedianMs >= 1))
    invalidArgument("power", "taskMedianMs", `must be >= 1 (got ${o.taskMedianMs})`);
  if (!(Number.isFinite(o.taskLogSd) && o.taskLogSd >= 0))
    invalidArgument("power", "taskLogSd", `must be >= 0 (got ${o.taskLogSd})`);
  if (!(Number.isFinite(o.taskMaxMs) && o.taskMaxMs >= o.taskMedianMs))
    invalidArgument("power", "taskMaxMs", `must be >= taskMedianMs (${o.taskMedianMs}), got ${o.taskMaxMs}`);
  if (!(Number.isFinite(o.secondaryLoad) && o.secondaryLoad >= 0 && o.secondaryLoad <= 2))
    invalidArgument("power", "secondaryLoad", `must be in [0, 2] (got ${o.secondaryLoad})`);
  if (!(Number.isSafeInteger(o.controlPeriodMs) && o.controlPeriodMs >= 10 && o.controlPeriodMs <= 60_000))
    invalidArgument("power", "controlPeriodMs", `must be an integer in 10..60000 (got ${o.controlPeriodMs})`);
  if (!(o.raplMinFrequency > 0 && o.raplMinFrequency <= 1))
    invalidArgument("power", "raplMinFrequency", `must be in (0, 1] (got ${o.raplMinFrequency})`);
  if (!(o.dvfsExponent > 0 && o.dvfsExponent <= 4))
    invalidArgument("power", "dvfsExponent", `must be in (0, 4] (got ${o.dvfsExponent})`);
  if (!(Number.isFinite(o.warmupMs) && o.warmupMs >= 0))
    invalidArgument("power", "warmupMs", `must be >= 0 (got ${o.warmupMs})`);
  if (!(Number.isSafeInteger(o.progressEvery) && o.progressEvery >= 1))
    invalidArgument("power", "progressEvery", `must be an integer >= 1 (got ${o.progressEvery})`);
  if (o.budgets) {
    for (const p of o.profiles)
      if (!(o.budgets.perServerWatts[p.id]! > 0))
        invalidArgument("power", "budgets", `has no budget for profile ${p.id}`);
  }
  return o;
}

/** The simulated resource manager hears every change at once: no node is silent for this long. */
const NEVER_STALE_MS = Number.MAX_SAFE_INTEGER;
