/**
 * The power experiment (seeds/000 sections II-IV; seeds/001 section 3): servers grouped into power domains (chassis,
 * or racks) with a budget each, primary tenants that own the servers, and Harvest's secondary tasks on the spare
 * cores. When a domain nears its budget, its servers must get under their even share: either by the per-container
 * capping agent the node manager runs (`CappingAgent` and its `CappingController`: secondary containers throttled to
 * a floor, raised step by step, killed if need be; the primary never touched), or by the full-server baseline (a
 * RAPL-like cap that slows every core of the server alike, the primary's included). Tasks go to servers by the stock node choice (a random
 * server with room) or by the resource manager's power-aware placement. Measured: capping events, time over budget,
 * throttled core-seconds of critical (primary) and non-critical (secondary) work, task kills, and the oversubscription
 * the planner (`planOversubscription`, seeds/000 III-E) finds achievable on the cluster's own history.
 *
 * The policies are not re-implemented here: the capping controller, the yield controller's victim choice, the
 * criticality test, the planner, the hardware profiles, and the power-domain and power-placement policies of the
 * resource manager are the daemons' own code. This module plays the daemons' parts around them (see `runPower`).
 */
import { performance } from "node:perf_hooks";
import { HarvestError } from "../common/errors.js";
import { DEFAULT_POWER_PROFILE_ID, profileWatts, resolvePowerProfile } from "../common/power-profiles.js";
import type { PowerProfile } from "../common/power-profiles.js";
import { SeededRng } from "../common/rng.js";
import { ServerSet } from "./roles/server-set.js";
import { yieldVictims } from "./roles/yield-step.js";
import { Logger } from "../common/log.js";
import { CappingAgent, resolveCappingOptions } from "../nodemanager/index.js";
import type { AgentContainer, CappingOptions, CappingState } from "../nodemanager/index.js";
import {
  DEFAULT_HISTORY_WINDOW,
  DEFAULT_OVERSUBSCRIPTION_OPTIONS,
  domainPower,
  planOversubscription,
  PowerAwarePolicy,
  PowerDomains,
  predictedP95Watts,
  primaryHistoryOf,
  primaryOutlook,
  resolveOversubscriptionOptions,
  resolvePowerDomainOptions,
  resolvePowerPlacementOptions,
  StockSchedulerPolicy,
  tenantHistoryVerdict,
} from "../resourcemanager/index.js";
import type {
  CappingApproach,
  DomainPower,
  DrawSample,
  DrawsHistory,
  OversubscriptionOptions,
  OversubscriptionPlan,
  PowerDomainConfig,
  PowerDomainOptions,
  PowerNode,
  PowerPlacementOptions,
  PrimaryHistory,
  TenantHistoryVerdict,
} from "../resourcemanager/index.js";
import type { UtilizationSeries } from "../common/trace-io.js";
import { SimEngine } from "./engine/engine.js";
import type { EngineProgress } from "./engine/engine.js";
import { harvestableCoreMs } from "./jobs.js";
import { DAY_MS, serverUtilization } from "./model.js";
import type { SimCluster } from "./model.js";
import type { RunSetup } from "./results.js";

// ------------------------------------------------------------------------------------------------ types

/** How a server is brought under its budget: the full-server baseline (RAPL-like) or Harvest's per-container agent. */
export type CappingMode = "full-server" | "per-container";
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

// ------------------------------------------------------------------------------------------------ options

function invalid(field: string, why: string): never {
  throw new HarvestError("INVALID_ARGUMENT", `power option ${field} ${why}`, { details: { field } });
}

/** Fills the defaults of `options` for `cluster` and validates every field (INVALID_ARGUMENT naming it). */
export function resolvePowerOptions(cluster: SimCluster, options: PowerOptions = {}): ResolvedPowerOptions {
  const capping = options.capping ?? "per-container";
  if (!CAPPING_MODES.includes(capping)) invalid("capping", `must be ${CAPPING_MODES.join(" or ")} (got ${capping})`);
  const placement = options.placement ?? "stock";
  if (!POWER_PLACEMENTS.includes(placement))
    invalid("placement", `must be ${POWER_PLACEMENTS.join(" or ")} (got ${placement})`);
  const domainLevel = options.domainLevel ?? "chassis";
  if (!POWER_DOMAIN_LEVELS.includes(domainLevel))
    invalid("domainLevel", `must be ${POWER_DOMAIN_LEVELS.join(" or ")} (got ${domainLevel})`);
  const planApproach = options.planApproach ?? "per-container";
  if (planApproach !== "per-container" && planApproach !== "full-server")
    invalid("planApproach", `must be per-container or full-server (got ${String(planApproach)})`);
  const ids = options.profiles ?? [DEFAULT_POWER_PROFILE_ID];
  if (ids.length === 0) invalid("profiles", "must name at least one hardware profile");
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
  if (!Number.isSafeInteger(o.seed)) invalid("seed", `must be an integer (got ${o.seed})`);
  if (!(Number.isSafeInteger(o.serversPerChassis) && o.serversPerChassis >= 1))
    invalid("serversPerChassis", `must be an integer >= 1 (got ${o.serversPerChassis})`);
  if (!(o.planBufferShare >= 0 && o.planBufferShare <= 1))
    invalid("planBufferShare", `must be in [0, 1] (got ${o.planBufferShare})`);
  if (o.budgetFraction !== undefined && !(o.budgetFraction > 0 && o.budgetFraction <= 1))
    invalid("budgetFraction", `must be in (0, 1] of the nameplate draw (got ${o.budgetFraction})`);
  const historyDays = cluster.historyMs / DAY_MS;
  if (!(o.planDays > 0 && o.planDays <= historyDays + 1e-9))
    invalid("planDays", `must be in (0, ${historyDays}] (the cluster's days of history), got ${o.planDays}`);
  if (!(o.reserveFraction >= 0 && o.reserveFraction < 1))
    invalid("reserveFraction", `must be in [0, 1) (got ${o.reserveFraction})`);
  if (!(Number.isFinite(o.taskCores) && o.taskCores > 0)) invalid("taskCores", `must be > 0 (got ${o.taskCores})`);
  const taskMilli = Math.round(o.taskCores * 1000);
  if (
    cluster.servers.length > 0 &&
    !cluster.servers.some((s) => s.cores * 1000 - Math.ceil(s.cores * 1000 * o.reserveFraction) >= taskMilli)
  )
    invalid("taskCores", `${o.taskCores} cores fit on no server once the reserve is kept`);
  if (!(Number.isFinite(o.taskMedianMs) && o.taskMedianMs >= 1))
    invalid("taskMedianMs", `must be >= 1 (got ${o.taskMedianMs})`);
  if (!(Number.isFinite(o.taskLogSd) && o.taskLogSd >= 0)) invalid("taskLogSd", `must be >= 0 (got ${o.taskLogSd})`);
  if (!(Number.isFinite(o.taskMaxMs) && o.taskMaxMs >= o.taskMedianMs))
    invalid("taskMaxMs", `must be >= taskMedianMs (${o.taskMedianMs}), got ${o.taskMaxMs}`);
  if (!(Number.isFinite(o.secondaryLoad) && o.secondaryLoad >= 0 && o.secondaryLoad <= 2))
    invalid("secondaryLoad", `must be in [0, 2] (got ${o.secondaryLoad})`);
  if (!(Number.isSafeInteger(o.controlPeriodMs) && o.controlPeriodMs >= 10 && o.controlPeriodMs <= 60_000))
    invalid("controlPeriodMs", `must be an integer in 10..60000 (got ${o.controlPeriodMs})`);
  if (!(o.raplMinFrequency > 0 && o.raplMinFrequency <= 1))
    invalid("raplMinFrequency", `must be in (0, 1] (got ${o.raplMinFrequency})`);
  if (!(o.dvfsExponent > 0 && o.dvfsExponent <= 4))
    invalid("dvfsExponent", `must be in (0, 4] (got ${o.dvfsExponent})`);
  if (!(Number.isFinite(o.warmupMs) && o.warmupMs >= 0)) invalid("warmupMs", `must be >= 0 (got ${o.warmupMs})`);
  if (!(Number.isSafeInteger(o.progressEvery) && o.progressEvery >= 1))
    invalid("progressEvery", `must be an integer >= 1 (got ${o.progressEvery})`);
  if (o.budgets) {
    for (const p of o.profiles)
      if (!(o.budgets.perServerWatts[p.id]! > 0)) invalid("budgets", `has no budget for profile ${p.id}`);
  }
  return o;
}

// ------------------------------------------------------------------------------------------------ layout

/** A power domain of the simulated cluster. */
export interface SimPowerDomain {
  /** "r003/c1" (a chassis) or "r003" (a rack). */
  id: string;
  rack: string;
  servers: readonly number[];
  profile: PowerProfile;
}

/** The cluster's power domains and each server's profile, from `options` (racks in order, chassis within racks). */
export function powerLayout(
  cluster: SimCluster,
  o: Pick<ResolvedPowerOptions, "serversPerChassis" | "domainLevel" | "profiles">,
): { domains: SimPowerDomain[]; domainOf: Int32Array; profileOf: PowerProfile[] } {
  const racks = new Map<string, number[]>();
  for (const s of cluster.servers) {
    let list = racks.get(s.rack);
    if (!list) racks.set(s.rack, (list = []));
    list.push(s.index);
  }
  const domains: SimPowerDomain[] = [];
  const domainOf = new Int32Array(cluster.servers.length);
  const profileOf: PowerProfile[] = new Array<PowerProfile>(cluster.servers.length);
  let r = 0;
  for (const [rack, servers] of racks) {
    // A rack is one hardware generation: profiles go to racks in turn.
    const profile = o.profiles[r++ % o.profiles.length]!;
    const groups: number[][] = [];
    if (o.domainLevel === "rack") groups.push(servers);
    else
      for (let i = 0; i < servers.length; i += o.serversPerChassis)
        groups.push(servers.slice(i, i + o.serversPerChassis));
    groups.forEach((g, c) => {
      const id = o.domainLevel === "rack" ? rack : `${rack}/c${c}`;
      for (const s of g) {
        domainOf[s] = domains.length;
        profileOf[s] = profile;
      }
      domains.push({ id, rack, servers: g, profile });
    });
  }
  return { domains, domainOf, profileOf };
}

// ------------------------------------------------------------------------------------------------ budgets

/** The nameplate (100 % load) draw of a profile. */
function peakWatts(p: PowerProfile): number {
  return p.loadWatts[p.loadWatts.length - 1] ?? p.idleWatts;
}

/**
 * The budgets a power run enforces: the planner's (seeds/000 III-E) on the cluster's own draws over the last
 * `planDays` of history, simulated without capping under the stock placement with the same secondary workload (each
 * server's primary and secondary shares averaged per slot of the cluster, as telemetry gives them); or, with
 * `budgetFraction`, that share of the nameplate. The plan is made either way, for the oversubscription figures.
 */
export function planPowerBudgets(cluster: SimCluster, options: PowerOptions = {}): PowerBudgets {
  const o = resolvePowerOptions(cluster, { ...options, budgets: undefined, observer: undefined });
  const started = performance.now();
  const sim = new PowerSim(cluster, o, "plan");
  sim.run();
  const history = sim.drawHistory();
  const wallMs = performance.now() - started;
  const layout = powerLayout(cluster, o);
  const plans: ProfilePlan[] = [];
  const perServerWatts: Record<string, number> = {};
  for (const profile of uniqueProfiles(o.profiles)) {
    const domains = layout.domains.filter((d) => d.profile.id === profile.id);
    if (domains.length === 0) continue;
    // The planner serves domains of one size (one budget per hardware generation): the most common size.
    const sizes = new Map<number, number>();
    for (const d of domains) sizes.set(d.servers.length, (sizes.get(d.servers.length) ?? 0) + 1);
    const size = [...sizes.entries()].sort((a, b) => b[1] - a[1] || b[0] - a[0])[0]![0];
    const chosen = domains.filter((d) => d.servers.length === size);
    const plan = planOversubscription(drawsHistoryOf(history, chosen), profile, o.planner);
    plans.push({ profileId: profile.id, domains: chosen.length, serversPerDomain: size, plan });
    const approach = o.planApproach === "per-container" ? plan.perContainer : plan.fullServer;
    const planned = Math.min(peakWatts(profile), (approach.minBudgetWatts * (1 + o.planBufferShare)) / size);
    perServerWatts[profile.id] = o.budgetFraction !== undefined ? o.budgetFraction * peakWatts(profile) : planned;
  }
  return {
    perServerWatts,
    source: o.budgetFraction !== undefined ? "fraction" : "plan",
    plans,
    history: { days: o.planDays, events: sim.events, wallMs, samples: history.slots * cluster.servers.length },
  };
}

function uniqueProfiles(profiles: readonly PowerProfile[]): PowerProfile[] {
  const seen = new Map<string, PowerProfile>();
  for (const p of profiles) if (!seen.has(p.id)) seen.set(p.id, p);
  return [...seen.values()];
}

/** Per server and slot of the plan window: the share of the server busy with primary and with secondary work. */
interface RecordedHistory {
  slots: number;
  slotSec: number;
  startMs: number;
  serverIds: readonly string[];
  critical: Float32Array[];
  noncritical: Float32Array[];
}

/** The planner's input for `domains` from a recorded history. */
function drawsHistoryOf(h: RecordedHistory, domains: readonly SimPowerDomain[]): DrawsHistory {
  const samples: DrawSample[] = [];
  const timesS: number[] = [];
  for (let k = 0; k < h.slots; k++) {
    const timeS = h.startMs / 1000 + k * h.slotSec;
    timesS.push(timeS);
    for (const d of domains)
      for (const s of d.servers)
        samples.push({
          timeS,
          domain: d.id,
          server: h.serverIds[s]!,
          criticalUtil: h.critical[s]![k]!,
          noncriticalUtil: h.noncritical[s]![k]!,
        });
  }
  return {
    source: "simulated history",
    samples,
    timesS,
    domains: domains.map((d) => d.id).sort(),
    serversPerDomain: domains[0]?.servers.length ?? 0,
    measured: false,
  };
}

/** Server-weighted oversubscription figures of `budgets` over the servers' profiles. */
function oversubscriptionFigures(budgets: PowerBudgets, profileOf: readonly PowerProfile[]): OversubscriptionFigures {
  const byId = new Map(budgets.plans.map((p) => [p.profileId, p.plan]));
  let nameplate = 0;
  let full = 0;
  let per = 0;
  let enforced = 0;
  for (const p of profileOf) {
    const plan = byId.get(p.id);
    const peak = peakWatts(p);
    nameplate += peak;
    full += plan ? plan.fullServer.budgetWattsPerServer : peak;
    per += plan ? plan.perContainer.budgetWattsPerServer : peak;
    enforced += budgets.perServerWatts[p.id] ?? peak;
  }
  const fullServerPct = nameplate > 0 ? (100 * (nameplate - full)) / nameplate : 0;
  const perContainerPct = nameplate > 0 ? (100 * (nameplate - per)) / nameplate : 0;
  return {
    fullServerPct,
    perContainerPct,
    ratio: fullServerPct > 1e-9 ? perContainerPct / fullServerPct : Number.NaN,
    enforcedPct: nameplate > 0 ? (100 * (nameplate - enforced)) / nameplate : 0,
    budgetSource: budgets.source,
  };
}

// ------------------------------------------------------------------------------------------------ primary history

/**
 * Server `s`'s primary CPU (%) per slot over [fromMs, toMs), as its node manager reports it to the tenant registry:
 * the tenant's series plus the server's offset, clamped to 0..100 (`serverUtilization`), one sample per slot.
 */
export function primaryUsageSeries(cluster: SimCluster, s: number, fromMs: number, toMs: number): UtilizationSeries {
  const series = cluster.tenants[cluster.servers[s]!.tenant]!.utilization;
  const first = Math.max(0, Math.floor(fromMs / cluster.slotMs));
  const end = Math.min(series.length, Math.ceil(toMs / cluster.slotMs));
  const timesMs: number[] = [];
  const cpuPct: number[] = [];
  for (let k = first; k < end; k++) {
    timesMs.push(k * cluster.slotMs);
    cpuPct.push(serverUtilization(cluster, s, k * cluster.slotMs));
  }
  return {
    name: cluster.servers[s]!.id,
    stepSec: cluster.slotMs / 1000,
    startMs: first * cluster.slotMs,
    timesMs,
    cpuPct,
  };
}

/**
 * What the resource manager's tenant registry finds in each tenant's history when it classifies at `endMs` (by tenant
 * index; undefined for a tenant without servers): its own `tenantHistoryVerdict`, with its default window, over the
 * series its servers reported (`primaryUsageSeries`).
 */
export function registryVerdicts(
  cluster: SimCluster,
  endMs: number = cluster.historyMs,
): (TenantHistoryVerdict | undefined)[] {
  // The window's samples, and the one before it (the value a server holds into the window).
  const fromMs = endMs - DEFAULT_HISTORY_WINDOW.windowDays * DAY_MS - cluster.slotMs;
  return cluster.tenants.map((t) =>
    t.servers.length === 0
      ? undefined
      : tenantHistoryVerdict(
          t.id,
          t.servers.map((s) => primaryUsageSeries(cluster, s, fromMs, endMs)),
          endMs,
        ),
  );
}

/**
 * Per server, what the power-aware placement reads of its primary (`primaryHistoryOf`, as the resource manager builds
 * it): the registry's verdict on its tenant at `endMs`. Simulated tenants declare no criticality.
 */
export function primaryHistories(cluster: SimCluster, endMs: number = cluster.historyMs): PrimaryHistory[] {
  const verdicts = registryVerdicts(cluster, endMs);
  return cluster.servers.map((srv) => primaryHistoryOf({ criticality: "" }, verdicts[srv.tenant]));
}

// ------------------------------------------------------------------------------------------------ running

/**
 * Runs one power experiment over the cluster's experiment period [historyMs, horizonMs). Deterministic: the same
 * cluster and options give the same figures but for `wallMs` and `eventsPerSec`.
 *
 * The model:
 * - Layout: racks (the cluster's) cut into chassis of `serversPerChassis`; budgets at the chassis (or rack) level, a
 *   domain's budget the sum of its servers' per-server budgets (see {@link planPowerBudgets}). A rack's servers share a
 *   hardware profile; a server draws `profileWatts(profile, (primary + secondary used) / capacity)`.
 * - Primary tenants: each server's primary uses capacity x its utilization (the tenant's series plus the server's
 *   offset), step-held per slot. Critical work is the primary's: Harvest never throttles it (DESIGN.md principle 3).
 *   Of it, user-facing is what the power-aware placement calls critical (`primaryOutlook`: seeds/000's Compare8 verdict
 *   on the tenant's history, else its seeds/004 pattern, as the tenant registry finds them: `primaryHistories`),
 *   reported apart.
 * - Secondary tasks: independent tasks of `taskCores`, Poisson arrivals offering `secondaryLoad` of the harvestable
 *   core-hours, log-normal durations (median `taskMedianMs`, capped at `taskMaxMs`), in one FIFO queue. A simpler
 *   process than the compute experiment's DAG jobs on purpose: power depends on how many cores are busy where, not on
 *   a job's shape, and the same arrivals in every run make the comparison exact. A task runs at its full allocation
 *   unless throttled; throttling slows its progress in proportion (quota / allocation, or the frequency).
 * - Placement: when a task heads the queue and servers have room (capacity - primary - reserve - allocated >= the
 *   task), stock picks one at random (heartbeats come in no useful order); power-aware offers it to them in heartbeat
 *   order through the resource manager's `PowerAwarePolicy.choose`, and the first that passes the budget filter with a
 *   score within the tolerance of the best takes it (see `choosePowerAware`). Nothing is placed while the head task
 *   fits nowhere (FIFO).
 * - Yielding: when a primary grows past what the reserve covers, the yield controller's `chooseVictims` kills the
 *   youngest tasks. Every killed task (yield or capping) re-runs from the start at the back of the queue.
 * - Domains: the resource manager's `PowerDomains` hears every change of a server's draw at once (a heartbeat on
 *   change) and alerts with its hysteresis (from 97 % of the budget until under 90 %); the budgets are set when the
 *   experiment starts. While a domain alerts its servers' node managers run their capping loops every control period
 *   (from the first period boundary after the alert, the agents' next tick), each under the node budget the domain
 *   gives it (`nodeBudget`, the even share, sent in the heartbeat acknowledgement), or none once the alert ends; the
 *   loops stop when no server of the domain has a budget or a cap left.
 * - Per-container capping: each server runs the node manager's `CappingAgent` every period, with a meter that reads
 *   the simulated draw and a throttler that carries the quotas out on the tasks (a throttled task uses, and progresses
 *   at, its quota); the containers it kills re-run. The agent keeps a budget the domain lifted until its controller
 *   lifts the cap after its quiet period, as the daemon does. The primary is never an input.
 * - Full-server capping (the baseline, seeds/000 II-B): a RAPL-like cap holds a server whose draw exceeds its budget
 *   at the highest frequency f in [raplMinFrequency, 1] whose draw idle + (profile(u) - idle) x f^k stays under it,
 *   recomputed every period while the budget is in force (RAPL settles well within a period of 1 s: "less than 2
 *   seconds"). Every core slows alike: the primary loses (1 - f) of its work, every task runs at f. No kills.
 * - Figures are measured from `historyMs`; the `warmupMs` before it (no budgets in force) fills the cluster.
 */
export function runPower(cluster: SimCluster, options: PowerOptions = {}): PowerResult {
  const budgets = options.budgets ?? planPowerBudgets(cluster, { ...options, onProgress: undefined });
  const o = resolvePowerOptions(cluster, { ...options, budgets });
  const started = performance.now();
  const sim = new PowerSim(cluster, o, o.capping);
  sim.run();
  return sim.result(performance.now() - started, budgets);
}

// ------------------------------------------------------------------------------------------------ the simulation

/** Independent random streams, one per purpose, so that one decision does not shift another's draws. */
const Stream = { Arrivals: 1, Durations: 2, Placement: 3 } as const;

function streamSeed(seed: number, stream: number): number {
  let h = (seed ^ Math.imul(stream, 0x9e3779b9)) >>> 0;
  h = Math.imul(h ^ (h >>> 16), 0x85ebca6b) >>> 0;
  h = Math.imul(h ^ (h >>> 13), 0xc2b2ae35) >>> 0;
  return (h ^ (h >>> 16)) >>> 0;
}

/** A secondary task; one object carries it through every attempt. */
interface Task {
  readonly id: number;
  readonly nominalMs: number;
  /** When the current attempt entered the queue. */
  queuedMs: number;
  /** The current attempt's container ("" while queued), server (-1 while queued) and start. */
  containerId: string;
  server: number;
  startMs: number;
  /** Full-speed milliseconds of work left as of `lastMs`, at progress rate `speed` (0..1]. */
  remainingMs: number;
  lastMs: number;
  speed: number;
  /** Bumped whenever the finish event is rescheduled or the attempt ends: stale events check it. */
  version: number;
}

/** "plan": the uncapped history run that records draws for the planner. */
type SimMode = CappingMode | "plan";

interface DomainState {
  readonly spec: SimPowerDomain;
  readonly budgetWatts: number;
  drawWatts: number;
  /** Its servers' capping loops are running (the domain alerts, or one of them is still capped). */
  ticking: boolean;
  lastMs: number;
  /** When the current over-budget stretch began (NaN: under budget), and whether capping could have ended it. */
  overSinceMs: number;
  overBeyondReach: boolean;
}

class PowerSim {
  private readonly engine = new SimEngine();
  private readonly arrivalRng: SeededRng;
  private readonly durationRng: SeededRng;
  private readonly placementRng: SeededRng;
  private readonly taskMilli: number;
  private readonly startMs: number;
  private readonly endMs: number;
  /** Figures count from here; budgets are in force from here (experiment runs). */
  private readonly measureFromMs: number;
  private budgetsActive = false;
  private readonly arrivalsPerMs: number;
  private readonly durationMu: number;
  /** The resource manager's power domains (the policy code itself). */
  private readonly power: PowerDomains;
  private readonly domainByPath = new Map<string, DomainState>();

  // Per server.
  private readonly n: number;
  private readonly nodeIds: string[];
  private readonly capMilli: Int32Array;
  private readonly reserveMilli: Int32Array;
  private readonly primaryMilli: Int32Array;
  private readonly allocMilli: Int32Array;
  /** Milli-cores the secondary tasks use now (quotas applied). */
  private readonly usedMilli: Float64Array;
  /** The full-server cap's frequency (1: uncapped), and whether that cap is engaged. */
  private readonly frequency: Float64Array;
  private readonly raplCapped: Uint8Array;
  private readonly drawWatts: Float64Array;
  /** The primary is user-facing (the criticality test on its history, as the power-aware placement reads it). */
  private readonly userFacing: Uint8Array;
  private readonly tasks: Set<Task>[];
  /** Each server's capping agent (per-container mode), its state after its last tick, and its kills. */
  private readonly agents: (CappingAgent | undefined)[];
  private readonly controllerState: CappingState[];
  private readonly agentKills: Int32Array;
  /** Running tasks by container id (the agent names containers). */
  private readonly byContainer = new Map<string, Task>();
  /** Set while an agent ticks: its quota changes or kills touched the server. */
  private agentTouched = false;
  private readonly profileOf: PowerProfile[];
  private readonly domainOf: Int32Array;
  private readonly domains: DomainState[];
  /** Servers with room for one task. */
  private readonly free: ServerSet;
  private readonly queue: Task[] = [];
  private queueHead = 0;
  private containerSeq = 0;
  private taskSeq = 0;

  // What the power-aware placement reads (the resource manager's `powerNode` view), kept up to date on every change.
  private readonly history: PrimaryHistory[];
  /** The resource manager's power-aware policy (power-aware placement only), and where the heartbeats are. */
  private readonly placement: PowerAwarePolicy | undefined;
  private heartbeatCursor = 0;
  private readonly powerNodes: PowerNode[];
  private readonly predictedWatts: Float64Array;
  private domainPredictions: Map<string, DomainPower> = new Map();

  // Integrals, per server, since `lastMs[s]`.
  private readonly lastMs: Float64Array;
  private energyJ = 0;
  private cappedMs = 0;
  private criticalLostMilliMs = 0;
  private userFacingLostMilliMs = 0;
  private noncriticalLostMilliMs = 0;

  // Plan recording.
  private readonly recordCritical: Float64Array;
  private readonly recordNoncritical: Float64Array;
  private readonly recordedCritical: number[][] = [];
  private readonly recordedNoncritical: number[][] = [];
  private recordSlotStartMs = 0;

  // Figures.
  private domainAlerts = 0;
  private raplCaps = 0;
  private overBudgetMs = 0;
  private overBudgetEpisodes = 0;
  private maxOverBudgetMs = 0;
  private maxReachableOverBudgetMs = 0;
  private beyondReachMs = 0;
  private peakDomainLoad = 0;
  private cappingKills = 0;
  private yieldKills = 0;
  private wastedMilliMs = 0;
  private tasksSubmitted = 0;
  private tasksCompleted = 0;
  private completedWorkMs = 0;
  private slowdownSum = 0;
  private attempts = 0;
  private waitSumMs = 0;

  constructor(
    private readonly cluster: SimCluster,
    private readonly o: ResolvedPowerOptions,
    private readonly mode: SimMode,
  ) {
    this.arrivalRng = new SeededRng(streamSeed(o.seed, Stream.Arrivals));
    this.durationRng = new SeededRng(streamSeed(o.seed, Stream.Durations));
    this.placementRng = new SeededRng(streamSeed(o.seed, Stream.Placement));
    this.taskMilli = Math.round(o.taskCores * 1000);
    if (mode === "plan") {
      this.startMs = Math.max(0, Math.round(cluster.historyMs - o.planDays * DAY_MS));
      this.endMs = cluster.historyMs;
      this.measureFromMs = this.startMs;
    } else {
      this.startMs = Math.max(0, cluster.historyMs - o.warmupMs);
      this.endMs = cluster.horizonMs;
      this.measureFromMs = cluster.historyMs;
    }
    // Arrivals offer secondaryLoad x the experiment's mean harvestable cores (the same rate in the plan window, so
    // that the planner sees the workload the experiment runs).
    const experimentMs = Math.max(1, cluster.horizonMs - cluster.historyMs);
    const harvestableCores =
      harvestableCoreMs(cluster, cluster.historyMs, cluster.horizonMs, o.reserveFraction) / experimentMs;
    this.durationMu = Math.log(o.taskMedianMs);
    const meanTaskMs = Math.min(o.taskMaxMs, o.taskMedianMs * Math.exp((o.taskLogSd * o.taskLogSd) / 2));
    this.arrivalsPerMs = (o.secondaryLoad * harvestableCores) / (o.taskCores * meanTaskMs);

    const n = cluster.servers.length;
    this.n = n;
    this.nodeIds = cluster.servers.map((s) => s.id);
    this.capMilli = new Int32Array(n);
    this.reserveMilli = new Int32Array(n);
    this.primaryMilli = new Int32Array(n);
    this.allocMilli = new Int32Array(n);
    this.usedMilli = new Float64Array(n);
    this.frequency = new Float64Array(n).fill(1);
    this.raplCapped = new Uint8Array(n);
    this.drawWatts = new Float64Array(n);
    this.lastMs = new Float64Array(n).fill(this.startMs);
    this.recordCritical = new Float64Array(n);
    this.recordNoncritical = new Float64Array(n);
    this.tasks = Array.from({ length: n }, () => new Set<Task>());
    this.free = new ServerSet(n);
    for (const s of cluster.servers) {
      this.capMilli[s.index] = s.cores * 1000;
      this.reserveMilli[s.index] = Math.ceil(s.cores * 1000 * o.reserveFraction);
    }
    const layout = powerLayout(cluster, o);
    this.profileOf = layout.profileOf;
    this.domainOf = layout.domainOf;
    const perServer = o.budgets?.perServerWatts ?? {};
    this.domains = layout.domains.map((spec) => ({
      spec,
      budgetWatts:
        mode === "plan"
          ? Infinity
          : spec.servers.reduce((sum, s) => sum + (perServer[layout.profileOf[s]!.id] ?? Infinity), 0),
      drawWatts: 0,
      ticking: false,
      lastMs: this.startMs,
      overSinceMs: Number.NaN,
      overBeyondReach: false,
    }));
    for (const d of this.domains) this.domainByPath.set(d.spec.id, d);
    this.agents = cluster.servers.map((srv) => (mode === "per-container" ? this.newAgent(srv.index) : undefined));
    this.controllerState = cluster.servers.map(() => "uncapped" as CappingState);
    this.agentKills = new Int32Array(n);

    // The domains are tracked from the start; their budgets are set when the experiment begins (see `run`).
    this.power = new PowerDomains(this.domainConfig(false), o.domainOptions, this.engine.clock);
    for (const s of cluster.servers)
      this.power.addNode({ nodeId: s.id, rack: s.rack, profile: this.profileOf[s.index]! });

    // What the resource manager knows of each primary from the history before the experiment: its tenant registry's
    // reading (the classifier's peak and pattern, seeds/000's Compare8 verdict), the registry's own code.
    this.userFacing = new Uint8Array(n);
    this.history = primaryHistories(cluster);
    this.placement =
      o.placement === "power-aware"
        ? new PowerAwarePolicy(
            new StockSchedulerPolicy(),
            // The simulator offers each task through `choose`; the scheduler hook `allows` (and so this) is unused.
            { nodes: () => [], power: () => undefined },
            o.placementOptions,
            this.engine.clock,
          )
        : undefined;
    this.powerNodes = [];
    this.predictedWatts = new Float64Array(n);
    for (let s = 0; s < n; s++) {
      const h = this.history[s]!;
      const facts = this.power.placementFacts(this.nodeIds[s]!)!;
      const node: PowerNode = {
        nodeId: this.nodeIds[s]!,
        domains: facts.domains,
        profile: facts.profile,
        capacityMilli: this.capMilli[s]!,
        primaryNowMilli: 0,
        allocatedMilli: 0,
        drawWatts: 0,
        limitWatts: 0,
        ...primaryOutlook(this.capMilli[s]!, 0, h),
      };
      this.powerNodes.push(node);
      this.userFacing[s] = node.primaryCritical ? 1 : 0;
    }
    for (let s = 0; s < n; s++) this.drawWatts[s] = this.serverDraw(s);
    for (const d of this.domains) d.drawWatts = this.sumDraw(d);
  }

  /** The power-domain tree: every domain with its budget (or none before the experiment), every node in its own. */
  private domainConfig(withBudgets: boolean): PowerDomainConfig {
    const nodes: Record<string, string> = {};
    for (const d of this.domains) for (const s of d.spec.servers) nodes[this.nodeIds[s]!] = d.spec.id;
    return {
      domains: this.domains.map((d) => ({
        path: d.spec.id,
        budgetWatts: withBudgets && Number.isFinite(d.budgetWatts) ? d.budgetWatts : 0,
      })),
      nodes,
    };
  }

  get events(): number {
    return this.engine.events;
  }

  run(): void {
    const { cluster } = this;
    const firstSlot = Math.floor(this.startMs / cluster.slotMs);
    this.recordSlotStartMs = this.startMs;
    this.at(this.startMs, () => this.slot(firstSlot, true));
    if (this.mode !== "plan")
      this.at(this.measureFromMs, () => {
        this.flushAll();
        this.budgetsActive = true;
        // The operator sets the budgets (PowerAdmin.SetDomains): alerts may start at once.
        this.power.setConfig(this.domainConfig(true), this.measureFromMs);
        for (const node of this.powerNodes) node.domains = this.power.placementFacts(node.nodeId)!.domains;
        if (this.o.placement === "power-aware") this.domainPredictions = domainPower(this.powerNodes);
        for (const d of this.domains) this.overBudgetTransition(d, this.measureFromMs);
        this.handleAlerts();
      });
    this.scheduleArrival(this.startMs);
    this.engine.run(this.endMs, this.o.onProgress, this.o.progressEvery);
    this.flushAll();
    if (this.mode === "plan") this.recordSlot();
    for (const d of this.domains) this.closeOverBudget(d, this.endMs);
  }

  private at(t: number, fn: () => void): void {
    if (!this.o.checkInvariants) this.engine.at(t, fn);
    else
      this.engine.at(t, () => {
        fn();
        this.checkInvariants();
      });
  }

  private now(): number {
    return this.engine.clock.nowMs();
  }

  // ---------------------------------------------------------------------------------------------- power and books

  /** A server's draw now: its profile at its utilization, scaled by the full-server cap's frequency. */
  private serverDraw(s: number): number {
    const p = this.profileOf[s]!;
    const u = Math.min(1, (this.primaryMilli[s]! + this.usedMilli[s]!) / this.capMilli[s]!);
    const full = profileWatts(p, u);
    const f = this.frequency[s]!;
    return f >= 1 ? full : p.idleWatts + (full - p.idleWatts) * f ** this.o.dvfsExponent;
  }

  private sumDraw(d: DomainState): number {
    let sum = 0;
    for (const s of d.spec.servers) sum += this.drawWatts[s]!;
    return sum;
  }

  /** Adds server `s`'s integrals (energy, throttled work, plan records) up to now, at its current state. */
  private accumulate(s: number): void {
    const now = this.now();
    const from = Math.max(this.lastMs[s]!, this.measureFromMs);
    this.lastMs[s] = now;
    const dt = now - from;
    if (!(dt > 0)) return;
    this.energyJ += (this.drawWatts[s]! * dt) / 1000;
    if (this.controllerState[s] !== "uncapped" || this.raplCapped[s]) this.cappedMs += dt;
    const f = this.frequency[s]!;
    if (f < 1) {
      const lost = this.primaryMilli[s]! * (1 - f) * dt;
      this.criticalLostMilliMs += lost;
      if (this.userFacing[s]) this.userFacingLostMilliMs += lost;
    }
    // Secondary work lost: allocation minus what the tasks progress at (quota and frequency both slow them).
    if (this.allocMilli[s]! > 0) {
      let progress = 0;
      for (const t of this.tasks[s]!) progress += t.speed;
      this.noncriticalLostMilliMs += (this.allocMilli[s]! - progress * this.taskMilli) * dt;
    }
    if (this.mode === "plan") {
      this.recordCritical[s]! += this.primaryMilli[s]! * dt;
      this.recordNoncritical[s]! += this.usedMilli[s]! * dt;
    }
  }

  private flushAll(): void {
    for (let s = 0; s < this.n; s++) this.accumulate(s);
    const now = this.now();
    for (const d of this.domains) this.accumulateDomain(d, now);
  }

  /**
   * Server `s` changed (its caller accumulated its integrals first): its new draw, its domain's, its heartbeat to the
   * resource manager (power report, placement facts) and any alert that starts or ends.
   */
  private changed(s: number): void {
    const draw = this.serverDraw(s);
    this.drawWatts[s] = draw;
    const d = this.domains[this.domainOf[s]!]!;
    const now = this.now();
    this.accumulateDomain(d, now);
    d.drawWatts = this.sumDraw(d);
    this.overBudgetTransition(d, now);
    const node = this.powerNodes[s]!;
    node.primaryNowMilli = this.primaryMilli[s]!;
    node.allocatedMilli = this.allocMilli[s]!;
    node.drawWatts = draw;
    if (this.o.placement === "power-aware" && this.mode !== "plan") {
      const outlook = primaryOutlook(this.capMilli[s]!, this.primaryMilli[s]!, this.history[s]!);
      node.primaryP95Milli = outlook.primaryP95Milli;
      node.primaryCritical = outlook.primaryCritical;
      const predicted = predictedP95Watts(node);
      const delta = predicted - this.predictedWatts[s]!;
      this.predictedWatts[s] = predicted;
      if (delta !== 0)
        for (const dom of node.domains) {
          const e = this.domainPredictions.get(dom.path);
          if (e) e.predictedWatts += delta;
        }
    }
    if (this.mode === "plan") return;
    this.power.report(this.nodeIds[s]!, {
      watts: draw,
      meter: "model (simulated)",
      capped: this.controllerState[s] !== "uncapped" || this.raplCapped[s] === 1,
      cappingState:
        this.mode === "per-container" ? this.controllerState[s]! : this.raplCapped[s] ? "capped" : "uncapped",
      throttledContainers: 0,
      powerKills: this.agentKills[s]!,
      utilization: Math.min(1, (this.primaryMilli[s]! + this.allocMilli[s]!) / this.capMilli[s]!),
    });
    this.handleAlerts();
  }

  /** Alerts that started since the last call: counted, and the domain's capping loops started. */
  private handleAlerts(): void {
    for (const e of this.power.drainEvents()) {
      if (!e.alert) continue;
      const d = this.domainByPath.get(e.domain);
      if (!d) continue;
      if (this.budgetsActive) this.domainAlerts++;
      this.startTicking(d);
    }
  }

  private accumulateDomain(d: DomainState, now: number): void {
    const from = Math.max(d.lastMs, this.measureFromMs);
    d.lastMs = now;
    if (!(now > from) || !this.budgetsActive) return;
    if (d.drawWatts > d.budgetWatts) this.overBudgetMs += now - from;
  }

  private overBudgetTransition(d: DomainState, now: number): void {
    if (!this.budgetsActive) return;
    const over = d.drawWatts > d.budgetWatts;
    this.peakDomainLoad = Math.max(this.peakDomainLoad, d.drawWatts / d.budgetWatts);
    if (over && Number.isNaN(d.overSinceMs)) {
      d.overSinceMs = now;
      d.overBeyondReach = false;
      this.overBudgetEpisodes++;
    } else if (!over && !Number.isNaN(d.overSinceMs)) this.closeOverBudget(d, now);
  }

  private closeOverBudget(d: DomainState, now: number): void {
    if (Number.isNaN(d.overSinceMs)) return;
    const length = now - d.overSinceMs;
    this.maxOverBudgetMs = Math.max(this.maxOverBudgetMs, length);
    if (d.overBeyondReach) this.beyondReachMs += length;
    else this.maxReachableOverBudgetMs = Math.max(this.maxReachableOverBudgetMs, length);
    d.overSinceMs = Number.NaN;
  }

  // ---------------------------------------------------------------------------------------------- primary tenants

  /** Slot `k` begins: every server of a tenant whose utilization changed gets its new primary usage. */
  private slot(k: number, first: boolean): void {
    const { cluster } = this;
    if (this.mode === "plan" && !first) this.recordSlot();
    let gained = false;
    for (const t of cluster.tenants) {
      const series = t.utilization;
      const last = series.length - 1;
      const value = series[Math.min(k, last)]!;
      if (!first && k > 0 && value === series[Math.min(k - 1, last)]) continue;
      for (const s of t.servers) {
        let u = value + cluster.servers[s]!.offsetPct;
        u = u < 0 ? 0 : u > 100 ? 100 : u;
        const primary = Math.round((this.capMilli[s]! * u) / 100);
        const before = this.primaryMilli[s]!;
        if (primary === before) continue;
        this.accumulate(s);
        this.primaryMilli[s] = primary;
        if (primary > before) this.yieldOn(s);
        else gained = true;
        this.changed(s);
        this.refreshFree(s);
      }
    }
    if (first) for (let s = 0; s < this.n; s++) this.refreshFree(s);
    if (this.mode !== "plan") {
      // The resource manager's periodic recount (incremental sums drift by rounding only), and the placement's.
      this.power.tick();
      this.handleAlerts();
      if (this.o.placement === "power-aware") this.domainPredictions = domainPower(this.powerNodes);
    }
    if (gained || first) this.drain();
    const next = (k + 1) * cluster.slotMs;
    if (next < this.endMs) this.at(next, () => this.slot(k + 1, false));
  }

  /** Closes the plan's current slot: each server's time-averaged primary and secondary shares. */
  private recordSlot(): void {
    const now = this.now();
    const span = now - this.recordSlotStartMs;
    if (!(span > 0)) return;
    for (let s = 0; s < this.n; s++) this.accumulate(s);
    const critical: number[] = new Array<number>(this.n);
    const noncritical: number[] = new Array<number>(this.n);
    for (let s = 0; s < this.n; s++) {
      const cap = this.capMilli[s]! * span;
      const c = Math.min(1, this.recordCritical[s]! / cap);
      critical[s] = c;
      noncritical[s] = Math.min(1 - c, this.recordNoncritical[s]! / cap);
      this.recordCritical[s] = 0;
      this.recordNoncritical[s] = 0;
    }
    this.recordedCritical.push(critical);
    this.recordedNoncritical.push(noncritical);
    this.recordSlotStartMs = now;
  }

  /** The plan run's records, for the planner: one sample per server per slot. */
  drawHistory(): RecordedHistory {
    const slots = this.recordedCritical.length;
    const critical = Array.from({ length: this.n }, () => new Float32Array(slots));
    const noncritical = Array.from({ length: this.n }, () => new Float32Array(slots));
    for (let k = 0; k < slots; k++)
      for (let s = 0; s < this.n; s++) {
        critical[s]![k] = this.recordedCritical[k]![s]!;
        noncritical[s]![k] = this.recordedNoncritical[k]![s]!;
      }
    return {
      slots,
      slotSec: this.cluster.slotMs / 1000,
      startMs: this.startMs,
      serverIds: this.nodeIds,
      critical,
      noncritical,
    };
  }

  /** The node manager's yield step: kill the youngest attempts until the rest fit beside the primary and reserve. */
  private yieldOn(s: number): void {
    const server = {
      capacityMilli: this.capMilli[s]!,
      primaryMilli: this.primaryMilli[s]!,
      reserveMilli: this.reserveMilli[s]!,
      heldMilli: this.allocMilli[s]!,
      taskMilli: this.taskMilli,
    };
    for (const t of yieldVictims(server, this.tasks[s]!)) this.kill(t, "yield", false);
  }

  // ---------------------------------------------------------------------------------------------- secondary tasks

  /** Schedules the next arrival of the Poisson process after `fromMs`. */
  private scheduleArrival(fromMs: number): void {
    if (!(this.arrivalsPerMs > 0)) return;
    const gap = -Math.log(1 - this.arrivalRng.next()) / this.arrivalsPerMs;
    const next = fromMs + Math.max(1, Math.round(gap));
    if (next < this.endMs) this.at(next, () => this.arrive());
  }

  private arrive(): void {
    const now = this.now();
    const z = this.o.taskLogSd > 0 ? this.durationRng.normal(0, 1) : 0;
    const nominalMs = Math.max(
      1,
      Math.min(this.o.taskMaxMs, Math.round(Math.exp(this.durationMu + this.o.taskLogSd * z))),
    );
    const task: Task = {
      id: this.taskSeq++,
      nominalMs,
      queuedMs: now,
      containerId: "",
      server: -1,
      startMs: 0,
      remainingMs: nominalMs,
      lastMs: now,
      speed: 1,
      version: 0,
    };
    if (now >= this.measureFromMs) this.tasksSubmitted++;
    this.queue.push(task);
    this.drain();
    this.scheduleArrival(now);
  }

  /** Places queued tasks, head first, while servers have room. */
  private drain(): void {
    let heartbeats = false;
    while (this.queueHead < this.queue.length && this.free.size > 0) {
      const task = this.queue[this.queueHead]!;
      const s = this.choose(task, !heartbeats);
      heartbeats = true;
      if (s < 0) break;
      this.queueHead++;
      if (this.queueHead > 1024 && this.queueHead * 2 > this.queue.length) {
        this.queue.splice(0, this.queueHead);
        this.queueHead = 0;
      }
      this.start(task, s);
    }
  }

  /** The server for the queue's head task, or -1 for none; `fresh`: the first choice of a drain. */
  private choose(task: Task, fresh: boolean): number {
    if (!this.placement || this.mode === "plan") return this.free.at(this.placementRng.int(this.free.size));
    return this.choosePowerAware(this.placement, task, fresh);
  }

  /**
   * The resource manager's power-aware choice, made by its own code (`PowerAwarePolicy.choose`, the steps its scheduler
   * hook takes on each heartbeat): the task is offered to the servers with room in the order their heartbeats come,
   * and the first that passes the budget filter (`budgetAllows`: predicted draw with the task within the node budget in
   * force) with a score (`powerScore`, Algorithm 1) within `scoreTolerance` of the best such server takes it. Heartbeats
   * come round the servers in a fixed cycle: a drain starts at a random point of it (the next heartbeat after an
   * arbitrary instant), and after a grant the same server is offered the next task first (one heartbeat grants while
   * the node takes them, each container judged anew). The best server always takes it, so the gate's bounded wait
   * never runs out here: the simulator offers every server at the same instant, where the daemon's best node takes it
   * on its own heartbeat, within one interval (not modelled, as for the stock choice).
   */
  private choosePowerAware(policy: PowerAwarePolicy, task: Task, fresh: boolean): number {
    if (fresh) this.heartbeatCursor = this.placementRng.int(this.n);
    const offers: PowerNode[] = [];
    const servers: number[] = [];
    for (let i = 0; i < this.n; i++) {
      const s = (this.heartbeatCursor + i) % this.n;
      if (!this.free.has(s)) continue;
      const node = this.powerNodes[s]!;
      // placementFacts' limit: the node budget in force (no server has a budget of its own here).
      node.limitWatts = this.power.nodeBudget(node.nodeId)?.budgetWatts ?? 0;
      offers.push(node);
      servers.push(s);
    }
    const ask = { key: PowerAwarePolicy.askKey(`task${task.id}`, 0), containerMilli: this.taskMilli };
    const chosen = policy.choose(ask, offers, this.domainPredictions);
    if (!chosen) return -1;
    const s = servers[offers.indexOf(chosen)]!;
    this.heartbeatCursor = s;
    return s;
  }

  private start(task: Task, s: number): void {
    const now = this.now();
    this.accumulate(s);
    task.containerId = `c${++this.containerSeq}`;
    task.server = s;
    task.startMs = now;
    task.remainingMs = task.nominalMs;
    task.lastMs = now;
    task.speed = this.frequency[s]!;
    task.version++;
    if (now >= this.measureFromMs) {
      this.attempts++;
      this.waitSumMs += now - task.queuedMs;
    }
    this.tasks[s]!.add(task);
    this.byContainer.set(task.containerId, task);
    this.allocMilli[s]! += this.taskMilli;
    // A new container runs at its allocation until the capping agent's next period sees it.
    this.usedMilli[s]! += this.usedOf(task);
    this.scheduleFinish(task);
    this.changed(s);
    this.refreshFree(s);
  }

  private scheduleFinish(task: Task): void {
    const version = task.version;
    const at = task.lastMs + Math.max(1, Math.ceil(task.remainingMs / task.speed));
    if (at < this.endMs) this.at(at, () => this.finish(task, version));
  }

  /** Changes a running task's progress rate (and, under per-container capping, what it uses), rescheduling its end. */
  private setSpeed(task: Task, speed: number): void {
    const now = this.now();
    const s = task.server;
    const oldUsed = this.usedOf(task);
    task.remainingMs = Math.max(0, task.remainingMs - (now - task.lastMs) * task.speed);
    task.lastMs = now;
    task.speed = speed;
    task.version++;
    this.usedMilli[s]! += this.usedOf(task) - oldUsed;
    this.scheduleFinish(task);
  }

  /** Milli-cores a running task uses: its quota under per-container capping, its allocation otherwise. */
  private usedOf(task: Task): number {
    return this.mode === "per-container" ? task.speed * this.taskMilli : this.taskMilli;
  }

  private finish(task: Task, version: number): void {
    if (task.version !== version || task.server < 0) return;
    const now = this.now();
    const s = task.server;
    this.endAttempt(task);
    if (now >= this.measureFromMs) {
      this.tasksCompleted++;
      this.completedWorkMs += task.nominalMs;
      this.slowdownSum += (now - task.startMs) / task.nominalMs;
    }
    this.changed(s);
    this.refreshFree(s);
    this.drain();
  }

  private endAttempt(task: Task): void {
    const s = task.server;
    this.accumulate(s);
    this.tasks[s]!.delete(task);
    this.byContainer.delete(task.containerId);
    // The node manager tells the agent a container ended.
    this.agents[s]?.forget(task.containerId);
    this.allocMilli[s]! -= this.taskMilli;
    this.usedMilli[s]! -= this.usedOf(task);
    // Sums of quotas drift by rounding only; an empty server uses nothing.
    if (this.tasks[s]!.size === 0) this.usedMilli[s] = 0;
    task.version++;
    task.server = -1;
    task.containerId = "";
  }

  /** Kills a running attempt; the task re-runs from the start at the back of the queue. */
  private kill(task: Task, cause: "capping" | "yield", update = true): void {
    const now = this.now();
    const s = task.server;
    const done = task.nominalMs - Math.max(0, task.remainingMs - (now - task.lastMs) * task.speed);
    this.endAttempt(task);
    if (now >= this.measureFromMs) {
      if (cause === "capping") this.cappingKills++;
      else this.yieldKills++;
      this.wastedMilliMs += done * this.taskMilli;
    }
    task.queuedMs = now;
    this.queue.push(task);
    this.o.observer?.onTaskKilled?.({ nowMs: now, server: s, cause });
    if (update) {
      this.changed(s);
      this.refreshFree(s);
    }
  }

  private refreshFree(s: number): void {
    const room = this.capMilli[s]! - this.primaryMilli[s]! - this.reserveMilli[s]! - this.allocMilli[s]!;
    this.free.set(s, room >= this.taskMilli);
  }

  // ---------------------------------------------------------------------------------------------- capping

  /** Runs the domain's servers' capping loops from the next control-period boundary (the agents' next tick). */
  private startTicking(d: DomainState): void {
    if (d.ticking || this.mode === "plan") return;
    d.ticking = true;
    const period = this.o.controlPeriodMs;
    const at = Math.ceil(this.now() / period) * period;
    if (at < this.endMs) this.at(at, () => this.tick(d));
    else d.ticking = false;
  }

  /** One control period of a domain's servers: each one's capping step under the node budget the domain gives it. */
  private tick(d: DomainState): void {
    const now = this.now();
    const drawWatts = d.drawWatts;
    const over = drawWatts > d.budgetWatts;
    const beyondReach = over && this.beyondReach(d);
    if (beyondReach) d.overBeyondReach = true;
    let alert = false;
    let busy = false;
    for (const s of d.spec.servers) {
      const nodeBudget = this.power.nodeBudget(this.nodeIds[s]!);
      if (nodeBudget !== undefined) alert = true;
      if (this.mode === "per-container") {
        if (this.perContainerStep(s, now, nodeBudget)) busy = true;
      } else {
        this.fullServerStep(s, nodeBudget?.budgetWatts);
        if (nodeBudget !== undefined || this.raplCapped[s]) busy = true;
      }
    }
    this.o.observer?.onControlPeriod?.({
      nowMs: now,
      domain: d.spec.id,
      drawWatts,
      budgetWatts: d.budgetWatts,
      alert,
      overBudgetForMs: Number.isNaN(d.overSinceMs) ? 0 : now - d.overSinceMs,
      beyondReach,
    });
    this.drain();
    const next = now + this.o.controlPeriodMs;
    if (next >= this.endMs) return;
    if (busy) this.at(next, () => this.tick(d));
    else {
      d.ticking = false;
      // An alert that started during this period (its event was drained while ticking) restarts the loops.
      if (this.power.nodeBudget(this.nodeIds[d.spec.servers[0]!]!) !== undefined) this.startTicking(d);
    }
  }

  /**
   * True when the domain would stay over budget even if every server over its share went as low as the mode can take
   * it: per-container, with no secondary work left; full-server, with every core at the lowest frequency.
   */
  private beyondReach(d: DomainState): boolean {
    const share = d.budgetWatts / d.spec.servers.length;
    let reachable = 0;
    for (const s of d.spec.servers) {
      const draw = this.drawWatts[s]!;
      if (draw <= share) {
        reachable += draw;
        continue;
      }
      const p = this.profileOf[s]!;
      let lowest: number;
      if (this.mode === "per-container") lowest = profileWatts(p, this.primaryMilli[s]! / this.capMilli[s]!);
      else {
        const u = Math.min(1, (this.primaryMilli[s]! + this.allocMilli[s]!) / this.capMilli[s]!);
        lowest = p.idleWatts + (profileWatts(p, u) - p.idleWatts) * this.o.raplMinFrequency ** this.o.dvfsExponent;
      }
      reachable += Math.min(draw, Math.max(share, lowest));
    }
    return reachable > d.budgetWatts * (1 + 1e-9);
  }

  /**
   * A server's capping agent, as the node manager builds it, over the simulator: a meter reading the server's draw, a
   * throttler setting its tasks' quotas, kills re-running the tasks, a silent log.
   */
  private newAgent(s: number): CappingAgent {
    const profile = this.profileOf[s]!;
    return new CappingAgent(
      {
        meter: {
          kind: "model",
          description: `model (simulated): ${profile.name}`,
          read: (nowMs) => ({ timeMs: nowMs, watts: this.drawWatts[s]!, idleWatts: profile.idleWatts }),
          close: () => undefined,
        },
        throttler: {
          mode: "none",
          setLimit: (containerId, limitMilli) => {
            const task = this.byContainer.get(containerId);
            if (!task || task.server !== s) return;
            const quota = limitMilli === undefined ? this.taskMilli : Math.min(this.taskMilli, limitMilli);
            if (quota / this.taskMilli === task.speed) return;
            this.setSpeed(task, quota / this.taskMilli);
            this.agentTouched = true;
          },
          forget: () => undefined,
          close: () => undefined,
        },
        log: SILENT_LOG,
        kill: (containerId) => {
          const task = this.byContainer.get(containerId);
          if (!task || task.server !== s) return;
          this.agentKills[s]!++;
          this.kill(task, "capping", false);
          this.agentTouched = true;
        },
      },
      this.capMilli[s]!,
      { capping: this.o.cappingOptions },
    );
  }

  /**
   * The node manager's capping agent for one period: the heartbeat acknowledgement's node budget, then the agent's
   * tick. Returns true while the agent has a budget in force or a cap engaged (its loop must go on).
   */
  private perContainerStep(
    s: number,
    nowMs: number,
    nodeBudget: { budgetWatts: number; domain: string } | undefined,
  ): boolean {
    const agent = this.agents[s]!;
    agent.setDomainBudget(nodeBudget?.budgetWatts, nodeBudget?.domain ?? "");
    const budgetWatts = agent.budget().watts;
    // An uncapped agent whose draw is within its cap threshold decides nothing this period (its controller answers
    // "uncapped: draw <= cap" and only the agent's power model learns a sample), so the simulator skips that tick:
    // the decisions are the same, and most servers of an alerting domain are in this case.
    if (
      this.controllerState[s] === "uncapped" &&
      (budgetWatts === undefined || this.drawWatts[s]! <= budgetWatts * this.o.cappingOptions.capFraction)
    )
      return budgetWatts !== undefined;
    const containers: AgentContainer[] = [];
    for (const t of this.tasks[s]!)
      containers.push({
        containerId: t.containerId,
        allocationMilli: this.taskMilli,
        memoryMb: Math.ceil(this.o.taskCores * 1024),
        startedMs: t.startMs,
        isAm: false,
        criticality: 0,
        cpuCores: this.usedOf(t) / 1000,
        pids: NO_PIDS,
      });
    this.accumulate(s);
    this.agentTouched = false;
    agent.tick(nowMs, this.primaryMilli[s]! / 1000, containers);
    const state = agent.snapshot().state;
    const touched = this.agentTouched || state !== this.controllerState[s];
    this.controllerState[s] = state;
    if (touched) {
      this.changed(s);
      this.refreshFree(s);
    }
    return agent.budget().watts !== undefined || state !== "uncapped";
  }

  /**
   * The full-server baseline for one period: a RAPL-like cap engages when the draw exceeds the budget and then holds
   * the highest frequency whose draw stays under it, slowing every core alike; it lets go when the budget goes.
   */
  private fullServerStep(s: number, budgetWatts: number | undefined): void {
    let f = 1;
    const wasCapped = this.raplCapped[s]!;
    this.accumulate(s);
    if (budgetWatts === undefined) this.raplCapped[s] = 0;
    else {
      const draw = this.drawWatts[s]!;
      if (!this.raplCapped[s] && draw > budgetWatts * this.o.cappingOptions.capFraction) {
        this.raplCapped[s] = 1;
        if (this.now() >= this.measureFromMs) this.raplCaps++;
      }
      if (this.raplCapped[s]) {
        const p = this.profileOf[s]!;
        const u = Math.min(1, (this.primaryMilli[s]! + this.allocMilli[s]!) / this.capMilli[s]!);
        const dynamic = profileWatts(p, u) - p.idleWatts;
        const room = RAPL_TARGET_FRACTION * budgetWatts - p.idleWatts;
        f = dynamic <= 0 ? 1 : room <= 0 ? 0 : (room / dynamic) ** (1 / this.o.dvfsExponent);
        f = Math.min(1, Math.max(this.o.raplMinFrequency, f));
      }
    }
    if (f === this.frequency[s] && wasCapped === this.raplCapped[s]) return;
    this.frequency[s] = f;
    for (const t of this.tasks[s]!) if (t.speed !== f) this.setSpeed(t, f);
    this.changed(s);
  }

  // ---------------------------------------------------------------------------------------------- checks and figures

  private checkInvariants(): void {
    const now = this.now();
    const fail = (why: string): never => {
      throw new HarvestError("INTERNAL", `power simulation invariant broken at ${now} ms: ${why}`);
    };
    for (let s = 0; s < this.n; s++) {
      const id = this.nodeIds[s]!;
      if (this.allocMilli[s] !== this.tasks[s]!.size * this.taskMilli)
        fail(`server ${id} counts ${this.allocMilli[s]} milli-cores for ${this.tasks[s]!.size} tasks`);
      const allowance = this.capMilli[s]! - this.primaryMilli[s]! - this.reserveMilli[s]!;
      if (this.allocMilli[s]! > Math.max(0, allowance))
        fail(`server ${id} holds ${this.allocMilli[s]} secondary milli-cores with ${allowance} harvestable`);
      let used = 0;
      for (const t of this.tasks[s]!) used += this.usedOf(t);
      if (Math.abs(used - this.usedMilli[s]!) > 1e-6)
        fail(`server ${id}: tasks use ${used} milli-cores, the books say ${this.usedMilli[s]}`);
      if (Math.abs(this.drawWatts[s]! - this.serverDraw(s)) > 1e-9) fail(`server ${id}'s draw is stale`);
      if (this.mode !== "full-server" && this.frequency[s] !== 1) fail(`server ${id}'s cores were slowed`);
      const free =
        this.capMilli[s]! - this.primaryMilli[s]! - this.reserveMilli[s]! - this.allocMilli[s]! >= this.taskMilli;
      if (free !== this.free.has(s)) fail(`server ${id} is ${free ? "missing from" : "wrongly in"} the free list`);
    }
    for (const d of this.domains)
      if (Math.abs(d.drawWatts - this.sumDraw(d)) > 1e-6) fail(`domain ${d.spec.id}'s draw is stale`);
  }

  result(wallMs: number, budgets: PowerBudgets): PowerResult {
    const { cluster } = this;
    const experimentMs = this.endMs - this.measureFromMs;
    const domainMs = experimentMs * this.domains.length;
    let serverCaps = this.raplCaps;
    for (const a of this.agents) if (a) serverCaps += a.snapshot().stats.caps;
    const events = this.engine.events;
    const coreHours = (milliMs: number): number => milliMs / 1000 / 3_600_000;
    let nameplate = 0;
    for (const p of this.profileOf) nameplate += peakWatts(p);
    let budget = 0;
    for (const d of this.domains) budget += d.budgetWatts;
    const attempts = this.attempts;
    return {
      level: cluster.level,
      servers: this.n,
      days: (cluster.horizonMs - cluster.historyMs) / DAY_MS,
      seed: this.o.seed,
      traces: cluster.source,
      capping: this.o.capping,
      placement: this.o.placement,
      domainLevel: this.o.domainLevel,
      domains: this.domains.length,
      budgetWatts: budget,
      nameplateWatts: nameplate,
      oversubscription: oversubscriptionFigures(budgets, this.profileOf),
      domainAlerts: this.domainAlerts,
      serverCaps,
      cappedServerHours: this.cappedMs / 3_600_000,
      overBudgetDomainHours: this.overBudgetMs / 3_600_000,
      overBudgetShare: domainMs > 0 ? this.overBudgetMs / domainMs : 0,
      overBudgetEpisodes: this.overBudgetEpisodes,
      maxOverBudgetS: this.maxOverBudgetMs / 1000,
      maxReachableOverBudgetS: this.maxReachableOverBudgetMs / 1000,
      beyondReachDomainHours: this.beyondReachMs / 3_600_000,
      criticalThrottledCoreHours: coreHours(this.criticalLostMilliMs),
      userFacingThrottledCoreHours: coreHours(this.userFacingLostMilliMs),
      noncriticalThrottledCoreHours: coreHours(this.noncriticalLostMilliMs),
      cappingKills: this.cappingKills,
      yieldKills: this.yieldKills,
      wastedCoreHours: coreHours(this.wastedMilliMs),
      tasksSubmitted: this.tasksSubmitted,
      tasksCompleted: this.tasksCompleted,
      secondaryCoreHours: (this.completedWorkMs * this.o.taskCores) / 3_600_000,
      meanTaskSlowdown: this.tasksCompleted > 0 ? this.slowdownSum / this.tasksCompleted : Number.NaN,
      meanQueueWaitS: attempts > 0 ? this.waitSumMs / attempts / 1000 : 0,
      meanServerWatts: experimentMs > 0 && this.n > 0 ? (this.energyJ * 1000) / experimentMs / this.n : 0,
      peakDomainLoad: this.peakDomainLoad,
      events,
      wallMs,
      eventsPerSec: wallMs > 0 ? events / (wallMs / 1000) : 0,
    };
  }
}

/** The agents' log: the simulator reports figures, not a daemon's log lines. */
const SILENT_LOG = new Logger("sim", "error", () => undefined);
const NO_PIDS = (): readonly number[] => [];
/** The RAPL-like cap holds the draw this far under the budget (its feedback loop averages just below the limit). */
const RAPL_TARGET_FRACTION = 0.99;
/** The simulated resource manager hears every change at once: no node is silent for this long. */
const NEVER_STALE_MS = Number.MAX_SAFE_INTEGER;
