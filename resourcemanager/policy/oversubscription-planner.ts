/**
 * The oversubscription planner of seeds/000 section III-E: from a history of power draws and of the critical /
 * non-critical split of the CPU work, the lowest power budget per domain (chassis, rack, row) whose capping events stay
 * within an acceptable rate and depth, plus a buffer; compared with traditional provisioning (nameplate) and with
 * full-server capping, as seeds/000 Table IV does. Pure: no I/O, no clock.
 *
 * In Harvest terms: "critical" work is the primary tenants' (never throttled by the capping agent, DESIGN.md principle
 * 3, only by the full-server RAPL backstop); "non-critical" work is Harvest's secondary containers, which the capping
 * agent throttles first. seeds/000's per-VM capping is Harvest's per-container capping.
 *
 * Its input, the draws history (the draws CSV, or a generated one), is `draws-history.ts`.
 */
import { HarvestError } from "../../common/errors.js";
import { dvfsWatts, profileWatts } from "../../common/power-profiles.js";
import type { PowerProfile } from "../../common/power-profiles.js";
import { percentileSorted } from "./percentiles.js";
import type { DrawSample, DrawsHistory } from "./draws-history.js";

// ------------------------------------------------------------------------------------------------ options

/** The planner's knobs: seeds/000's emax/fmin per kind of work, the buffer, and two modelling choices. */
export interface OversubscriptionOptions {
  /**
   * emax_UF: the largest acceptable share of readings whose capping throttles critical work.
   * @default 0.001 (seeds/000 Table IV, "minimal UF impact")
   */
  emaxCritical: number;
  /**
   * emax_NUF: the largest acceptable share of readings with a capping event (every event throttles non-critical work).
   * @default 0.01
   */
  emaxNoncritical: number;
  /**
   * fmin_UF: the lowest core frequency, as a share of the nominal one, critical work may be throttled to.
   * @default 0.75
   */
  fminCritical: number;
  /**
   * fmin_NUF: the same for non-critical work; seeds/000's controller drops it to the minimum p-state, half the nominal.
   * @default 0.5
   */
  fminNoncritical: number;
  /**
   * Step 5: the share added to the step-4 budget for future variability of the mix and of utilization.
   * @default 0.1
   */
  bufferShare: number;
  /**
   * DVFS model: at a fixed utilization, dynamic power (draw minus idle) scales as f^k. seeds/000 section IV-A measured
   * 112..310 W at nominal frequency and 111..169 W at half of it: 58 W / 198 W of dynamic power = 0.5^1.77.
   * @default 1.77
   */
  dvfsExponent: number;
  /**
   * Step 1's "P95" utilization: the percentile of each server's series (linear interpolation between ranks, as the
   * classifier's peak), averaged over servers.
   * @default 95
   */
  utilPercentile: number;
}

/** The defaults of every `OversubscriptionOptions` field. */
export const DEFAULT_OVERSUBSCRIPTION_OPTIONS: Readonly<OversubscriptionOptions> = Object.freeze({
  emaxCritical: 0.001,
  emaxNoncritical: 0.01,
  fminCritical: 0.75,
  fminNoncritical: 0.5,
  bufferShare: 0.1,
  dvfsExponent: 1.77,
  utilPercentile: 95,
});

/**
 * Fills defaults and validates; INVALID_ARGUMENT names the offending option, by its `labels` entry (a CLI flag) when
 * one is given.
 */
export function resolveOversubscriptionOptions(
  options: Partial<OversubscriptionOptions> = {},
  labels: Partial<Record<keyof OversubscriptionOptions, string>> = {},
): OversubscriptionOptions {
  const o: OversubscriptionOptions = { ...DEFAULT_OVERSUBSCRIPTION_OPTIONS };
  for (const [k, v] of Object.entries(options)) if (v !== undefined) (o as unknown as Record<string, number>)[k] = v;
  const check = (field: keyof OversubscriptionOptions, ok: (v: number) => boolean, what: string): void => {
    const v = o[field];
    if (typeof v !== "number" || !Number.isFinite(v) || !ok(v)) {
      const name = labels[field] ?? field;
      throw new HarvestError("INVALID_ARGUMENT", `${name} must be ${what} (got ${String(v)})`, {
        details: { field: name },
      });
    }
  };
  check("emaxCritical", (v) => v >= 0 && v <= 1, "a share in 0..1 (0%..100%)");
  check("emaxNoncritical", (v) => v >= 0 && v <= 1, "a share in 0..1 (0%..100%)");
  check("fminCritical", (v) => v > 0 && v <= 1, "a share of the nominal frequency in (0, 1] (e.g. 75%)");
  check("fminNoncritical", (v) => v > 0 && v <= 1, "a share of the nominal frequency in (0, 1] (e.g. 50%)");
  check("bufferShare", (v) => v >= 0 && v <= 1, "a share in 0..1 (0%..100%)");
  check("dvfsExponent", (v) => v > 0 && v <= 4, "in (0, 4]");
  check("utilPercentile", (v) => v > 0 && v <= 100, "in (0, 100]");
  return o;
}

// ------------------------------------------------------------------------------------------------ the planner

/** Which lower bound set the step-4 budget. */
export type BindingConstraint = "event-rate" | "critical-event-rate" | "power-reduction";

/** The capping approaches compared. */
export type CappingApproach = "per-container" | "full-server";

/** Step 1: what the history says about the mix of work. */
export interface HistoryStats {
  source: string;
  servers: number;
  domains: number;
  serversPerDomain: number;
  slots: number;
  /** The median distance between slots (0 with a single slot). */
  slotSec: number;
  /** Domain readings: domains x slots. */
  readings: number;
  /** True when draws were measured, false when modelled from the profile. */
  measured: boolean;
  /** beta: the critical share of the busy CPU over the whole history (seeds/000's UF share of allocated cores). */
  criticalShare: number;
  /** The percentile of each server's critical / non-critical CPU share, averaged over servers (share of the server). */
  criticalPeakServerShare: number;
  noncriticalPeakServerShare: number;
  /**
   * util_UF, util_NUF: the utilization of the cores each kind of work occupies, i.e. its peak share of the server over
   * its share of the busy CPU (capped at 1).
   */
  criticalUtil: number;
  noncriticalUtil: number;
  maxReadingWatts: number;
  meanReadingWatts: number;
}

/** Step 2: one point of the per-frequency power curves (one server running one kind of work at its peak utilization). */
export interface PowerCurvePoint {
  /** Share of the nominal core frequency. */
  frequency: number;
  criticalServerWatts: number;
  noncriticalServerWatts: number;
}

/** Steps 3 to 5 for one capping approach. */
export interface CappingPlan {
  approach: CappingApproach;
  /** The event-rate limit applied to all events, and the critical-event limit (per-container only). */
  maxEvents: number;
  maxCriticalEvents: number;
  /** The largest reduction per domain capping can attain (non-critical and critical floors together). */
  maxReductionWatts: number;
  /** Per-container: the part of it from throttling non-critical work alone. */
  noncriticalReductionWatts: number;
  /** The three lower bounds on the budget (null when a bound does not apply). */
  bounds: { eventRateWatts: number | null; criticalEventRateWatts: number | null; powerReductionWatts: number };
  binding: BindingConstraint;
  /** Step 4: the lowest budget meeting every constraint (per domain). */
  minBudgetWatts: number;
  eventsAtMinBudget: number;
  criticalEventsAtMinBudget: number;
  eventRateAtMinBudgetPct: number;
  criticalEventRateAtMinBudgetPct: number;
  /** Events per domain per week at the step-4 budget (null when the history has a single slot). */
  eventsPerDomainWeekAtMinBudget: number | null;
  /** Step 5: plus the buffer, never above traditional provisioning (per domain and per server). */
  budgetWatts: number;
  budgetWattsPerServer: number;
  /** True when the buffered budget was cut back to traditional provisioning. */
  cappedAtTraditional: boolean;
  eventsAtBudget: number;
  eventRateAtBudgetPct: number;
  /** seeds/000 Table IV's "chassis budget delta": how much lower than traditional provisioning, in %. */
  oversubscriptionPct: number;
  /** How many more servers the same power feeds: traditional / budget - 1, in %. */
  extraServersPct: number;
}

/** The planner's answer. */
export interface OversubscriptionPlan {
  options: OversubscriptionOptions;
  profile: { id: string; name: string; idleWatts: number; peakWatts: number };
  history: HistoryStats;
  /** Step 2's curves, highest frequency first (the floors included). */
  curves: PowerCurvePoint[];
  /** Traditional provisioning: every server at its profile's peak (100 % load) draw, per domain. */
  traditionalWatts: number;
  perContainer: CappingPlan;
  fullServer: CappingPlan;
  /** How much lower the per-container budget is than the full-server one, in % of the full-server budget. */
  perContainerBelowFullServerPct: number;
  /** Per-container oversubscription over full-server oversubscription (seeds/000: "2x"); null when the latter is 0. */
  oversubscriptionRatio: number | null;
}

const WEEK_S = 7 * 86_400;

/**
 * The five steps of seeds/000 section III-E over `history` (from `parseDrawsCsv` or `generateDrawsHistory`) on
 * servers of `profile`:
 * 1. beta, the critical share of the busy CPU, and the peak ("P95") utilization of each kind of work's cores;
 * 2. per-frequency power curves at those utilizations: idle + (profile(util) - idle) x f^k;
 * 3. the domain readings sorted in descending order;
 * 4. the lowest budget whose events (readings above it) stay within emax and whose excesses capping can shave:
 *    per-container capping throttles non-critical work first (down to fmin_NUF) and critical work only for the rest
 *    (down to fmin_UF, counted as a critical event); full-server capping throttles every core alike, so every event is
 *    a critical one and must meet both kinds' limits (rate <= min emax, frequency >= max fmin: seeds/000's
 *    "state of the art" row, emax 0.1 %, fmin 75 %);
 * 5. plus the buffer, never above traditional provisioning.
 * The reduction a domain can attain is estimated from steps 1 and 2, as the seed does, not from each reading's own mix.
 */
export function planOversubscription(
  history: DrawsHistory,
  profile: PowerProfile,
  options: Partial<OversubscriptionOptions> = {},
): OversubscriptionPlan {
  const o = resolveOversubscriptionOptions(options);
  const peakWatts = profile.loadWatts[profile.loadWatts.length - 1] ?? profile.idleWatts;
  const serverWatts = (s: DrawSample): number =>
    s.watts ?? profileWatts(profile, Math.min(1, s.criticalUtil + s.noncriticalUtil));

  // Readings: one per domain per slot. Samples are in time order, so a slot's readings are contiguous.
  const domainIdx = new Map(history.domains.map((d, i) => [d, i]));
  const readings: number[] = [];
  let slotBase = -1;
  let slotTime = NaN;
  for (const s of history.samples) {
    if (s.timeS !== slotTime) {
      slotTime = s.timeS;
      slotBase = readings.length;
      for (let d = 0; d < history.domains.length; d++) readings.push(0);
    }
    readings[slotBase + domainIdx.get(s.domain)!]! += serverWatts(s);
  }

  // Step 1.
  const stats = historyStats(history, readings, o);
  const beta = stats.criticalShare;

  // Step 2: one server whose cores all run one kind of work at its peak utilization, at frequency f.
  const curve = (util: number) => {
    const nominalWatts = profileWatts(profile, util);
    return (f: number): number => dvfsWatts(profile, nominalWatts, f, o.dvfsExponent);
  };
  const criticalCurve = curve(stats.criticalUtil);
  const noncriticalCurve = curve(stats.noncriticalUtil);
  const frequencies = [...new Set([1, 0.9, 0.8, 0.7, 0.6, 0.5, o.fminCritical, o.fminNoncritical])].sort(
    (a, b) => b - a,
  );
  const curves = frequencies.map((f) => ({
    frequency: f,
    criticalServerWatts: criticalCurve(f),
    noncriticalServerWatts: noncriticalCurve(f),
  }));
  // The reduction per domain from throttling each kind of work (beta of the cores critical, the rest not) to f.
  const S = history.serversPerDomain;
  const criticalCut = (f: number): number => S * beta * (criticalCurve(1) - criticalCurve(f));
  const noncriticalCut = (f: number): number => S * (1 - beta) * (noncriticalCurve(1) - noncriticalCurve(f));

  // Step 3.
  const sorted = [...readings].sort((a, b) => b - a);
  const n = sorted.length;
  const allowed = (emax: number): number => Math.floor(emax * n + 1e-9);
  const traditionalWatts = S * peakWatts;

  // Step 4, per-container capping.
  const perRn = noncriticalCut(o.fminNoncritical);
  const perRc = criticalCut(o.fminCritical);
  const perMaxEvents = allowed(o.emaxNoncritical);
  const perMaxCritical = allowed(o.emaxCritical);
  const perContainer = finishPlan(
    {
      approach: "per-container",
      maxEvents: perMaxEvents,
      maxCriticalEvents: perMaxCritical,
      noncriticalReductionWatts: perRn,
      maxReductionWatts: perRn + perRc,
      // Events are the readings above the budget: at most maxEvents of them means budget >= the next reading.
      eventRateWatts: perMaxEvents < n ? sorted[perMaxEvents]! : null,
      // A critical event is one that non-critical throttling alone cannot absorb: excess > perRn.
      criticalEventRateWatts: perMaxCritical < n ? sorted[perMaxCritical]! - perRn : null,
      powerReductionWatts: sorted[0]! - perRn - perRc,
    },
    sorted,
    stats,
    traditionalWatts,
    o,
  );

  // Step 4, full-server capping: every core throttled alike, each event a critical one.
  const fullF = Math.max(o.fminCritical, o.fminNoncritical);
  const fullR = criticalCut(fullF) + noncriticalCut(fullF);
  const fullMaxEvents = allowed(Math.min(o.emaxCritical, o.emaxNoncritical));
  const fullServer = finishPlan(
    {
      approach: "full-server",
      maxEvents: fullMaxEvents,
      maxCriticalEvents: fullMaxEvents,
      noncriticalReductionWatts: 0,
      maxReductionWatts: fullR,
      eventRateWatts: fullMaxEvents < n ? sorted[fullMaxEvents]! : null,
      criticalEventRateWatts: null,
      powerReductionWatts: sorted[0]! - fullR,
    },
    sorted,
    stats,
    traditionalWatts,
    o,
  );

  const fullOver = fullServer.oversubscriptionPct;
  return {
    options: o,
    profile: { id: profile.id, name: profile.name, idleWatts: profile.idleWatts, peakWatts },
    history: stats,
    curves,
    traditionalWatts,
    perContainer,
    fullServer,
    perContainerBelowFullServerPct:
      (100 * (fullServer.budgetWatts - perContainer.budgetWatts)) / fullServer.budgetWatts,
    oversubscriptionRatio: fullOver > 1e-9 ? perContainer.oversubscriptionPct / fullOver : null,
  };
}

/** Step 1 (and the reading statistics). */
function historyStats(history: DrawsHistory, readings: number[], o: OversubscriptionOptions): HistoryStats {
  let criticalSum = 0;
  let busySum = 0;
  const perServer = new Map<string, { c: number[]; n: number[] }>();
  for (const s of history.samples) {
    criticalSum += s.criticalUtil;
    busySum += s.criticalUtil + s.noncriticalUtil;
    let e = perServer.get(s.server);
    if (!e) perServer.set(s.server, (e = { c: [], n: [] }));
    e.c.push(s.criticalUtil);
    e.n.push(s.noncriticalUtil);
  }
  const peakMean = (pick: (e: { c: number[]; n: number[] }) => number[]): number => {
    let sum = 0;
    for (const e of perServer.values())
      sum += percentileSorted(
        [...pick(e)].sort((a, b) => a - b),
        o.utilPercentile,
      );
    return sum / perServer.size;
  };
  const beta = busySum > 0 ? criticalSum / busySum : 0;
  const criticalPeak = peakMean((e) => e.c);
  const noncriticalPeak = peakMean((e) => e.n);
  const steps = history.timesS.slice(1).map((t, i) => t - history.timesS[i]!);
  steps.sort((a, b) => a - b);
  const slotSec = steps.length > 0 ? steps[Math.floor(steps.length / 2)]! : 0;
  return {
    source: history.source,
    servers: perServer.size,
    domains: history.domains.length,
    serversPerDomain: history.serversPerDomain,
    slots: history.timesS.length,
    slotSec,
    readings: readings.length,
    measured: history.measured,
    criticalShare: beta,
    criticalPeakServerShare: criticalPeak,
    noncriticalPeakServerShare: noncriticalPeak,
    // The cores a kind of work occupies: its share of the busy CPU (beta or 1 - beta) of the server.
    criticalUtil: beta > 0 ? Math.min(1, criticalPeak / beta) : 0,
    noncriticalUtil: beta < 1 ? Math.min(1, noncriticalPeak / (1 - beta)) : 0,
    maxReadingWatts: readings.reduce((a, b) => Math.max(a, b), -Infinity),
    meanReadingWatts: readings.reduce((a, b) => a + b, 0) / readings.length,
  };
}

interface PlanInput {
  approach: CappingApproach;
  maxEvents: number;
  maxCriticalEvents: number;
  noncriticalReductionWatts: number;
  maxReductionWatts: number;
  eventRateWatts: number | null;
  criticalEventRateWatts: number | null;
  powerReductionWatts: number;
}

/**
 * The lowest budget is the largest of the lower bounds. seeds/000 scans the sorted draws downwards and stops at the
 * first candidate that breaks a constraint; every constraint is monotone in the budget (a lower budget has more events,
 * more critical events and larger excesses), so that scan's answer is this maximum. Unlike a scan over the draws
 * themselves, the budget may fall between two draws when the reduction constraint binds (the seed's example budgets
 * "just below" a draw, at 2890 W under 2900 W).
 */
function finishPlan(
  p: PlanInput,
  sorted: readonly number[],
  stats: HistoryStats,
  traditionalWatts: number,
  o: OversubscriptionOptions,
): CappingPlan {
  const candidates: [BindingConstraint, number | null][] = [
    ["event-rate", p.eventRateWatts],
    ["critical-event-rate", p.criticalEventRateWatts],
    ["power-reduction", p.powerReductionWatts],
  ];
  let binding: BindingConstraint = "power-reduction";
  let minBudget = -Infinity;
  for (const [name, bound] of candidates)
    if (bound !== null && bound > minBudget + 1e-9) {
      minBudget = bound;
      binding = name;
    }
  minBudget = Math.max(0, minBudget);

  const n = sorted.length;
  const eps = 1e-9 * Math.max(1, sorted[0]!);
  const over = (budget: number, cutWatts = 0): number => {
    let k = 0;
    while (k < n && sorted[k]! > budget + cutWatts + eps) k++;
    return k;
  };
  const events = over(minBudget);
  const criticalEvents = p.approach === "full-server" ? events : over(minBudget, p.noncriticalReductionWatts);
  const buffered = minBudget * (1 + o.bufferShare);
  const budgetWatts = Math.min(buffered, traditionalWatts);
  const weeks = (stats.slots * stats.slotSec) / WEEK_S;
  const eventsAtBudget = over(budgetWatts);
  return {
    approach: p.approach,
    maxEvents: p.maxEvents,
    maxCriticalEvents: p.maxCriticalEvents,
    maxReductionWatts: p.maxReductionWatts,
    noncriticalReductionWatts: p.noncriticalReductionWatts,
    bounds: {
      eventRateWatts: p.eventRateWatts,
      criticalEventRateWatts: p.criticalEventRateWatts,
      powerReductionWatts: p.powerReductionWatts,
    },
    binding,
    minBudgetWatts: minBudget,
    eventsAtMinBudget: events,
    criticalEventsAtMinBudget: criticalEvents,
    eventRateAtMinBudgetPct: (100 * events) / n,
    criticalEventRateAtMinBudgetPct: (100 * criticalEvents) / n,
    eventsPerDomainWeekAtMinBudget: weeks > 0 ? events / stats.domains / weeks : null,
    budgetWatts,
    budgetWattsPerServer: budgetWatts / stats.serversPerDomain,
    cappedAtTraditional: buffered > traditionalWatts,
    eventsAtBudget,
    eventRateAtBudgetPct: (100 * eventsAtBudget) / n,
    oversubscriptionPct: (100 * (traditionalWatts - budgetWatts)) / traditionalWatts,
    extraServersPct: budgetWatts > 0 ? 100 * (traditionalWatts / budgetWatts - 1) : Infinity,
  };
}
