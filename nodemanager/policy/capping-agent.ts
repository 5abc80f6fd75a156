/**
 * The capping agent (DESIGN.md, node manager): once per control period it reads the server's power meter, splits the
 * dynamic power among the primary tenant and the containers with the per-container power model (seeds/001, section 3),
 * asks the capping controller what the secondary containers may use under the node's budget (seeds/000, section
 * III-D), and carries it out: quotas through the throttler, kills through the node manager.
 *
 * The budget in force is the smaller of the node's own configured budget and the one its power domain sent in the
 * last heartbeat acknowledgement (seeds/000, section III-C: a domain near its budget gives each server its share).
 * The primary tenant is never an input of the controller, so it is never throttled or killed.
 */
import type { Logger } from "../../common/log.js";
import { CappingController } from "./capping-controller.js";
import type { CappingOptions, CappingState, CappingStats } from "./capping-controller.js";
import type { PowerMeter, PowerReading } from "../power-meter.js";
import { PowerModel } from "./power-model.js";
import type { PowerEntity } from "./power-model.js";
import type { Throttler } from "../throttler.js";

/** A secondary container as the agent sees it on one tick. */
export interface AgentContainer {
  containerId: string;
  allocationMilli: number;
  memoryMb: number;
  startedMs: number;
  isAm: boolean;
  /** Larger = more critical; the least critical are raised last and killed first. */
  criticality: number;
  /** Cores it used over the last period, measured. */
  cpuCores: number;
  /** Its process-group leaders (the throttler's signal mode stops and continues them). */
  pids: () => readonly number[];
}

/** What the agent reports in heartbeats and logs. */
export interface CappingSnapshot {
  /** The last reading's watts; undefined before the first reading or while the meter gives none. */
  watts: number | undefined;
  /** The meter in use, e.g. "model: Dell PowerEdge R740 ...". */
  meter: string;
  state: CappingState;
  /** The budget in force (undefined: none) and where it came from. */
  budgetWatts: number | undefined;
  budgetSource: "domain" | "node" | "none";
  /** The power domain whose alert set the budget ("" unless budgetSource is "domain"). */
  budgetDomain: string;
  /** Containers running below their allocation now. */
  throttledContainers: number;
  /** Containers killed to get under budget, since start. */
  kills: number;
  /** The controller's last reason line. */
  reason: string;
  /** Each live container's share of the dynamic power, watts. */
  containerWatts: ReadonlyMap<string, number>;
  /** The primary tenant's share of the dynamic power, watts. */
  primaryWatts: number;
  stats: CappingStats;
}

/** The heartbeat's power fields of a capping snapshot (what the resource manager's power domains read). */
export function heartbeatPowerFields(p: CappingSnapshot): {
  powerWatts: number;
  powerMeter: string;
  powerCapped: boolean;
  cappingState: string;
  throttledContainers: number;
  powerKills: number;
} {
  return {
    powerWatts: p.watts ?? 0,
    powerMeter: p.meter,
    powerCapped: p.throttledContainers > 0,
    cappingState: p.state,
    throttledContainers: p.throttledContainers,
    powerKills: p.kills,
  };
}

/** What the agent needs from the node manager. */
export interface CappingAgentDeps {
  meter: PowerMeter;
  throttler: Throttler;
  log: Logger;
  /** Kills a container the controller gave up on (the node manager reports it as PREEMPTED_BY_POWER). */
  kill: (containerId: string, reason: string) => void;
}

/** Runs one server's capping loop; the node manager calls `tick` every control period. */
export class CappingAgent {
  private readonly controller: CappingController;
  private readonly model = new PowerModel();
  private nodeBudgetWatts: number | undefined;
  /**
   * The domain's budget. When the domain lifts it while this node is still capped and under it, it stays in force
   * ("lifted") until the controller lifts the cap itself after its quiet period, so that a domain hovering near its
   * uncap threshold does not make the node flap between capped and uncapped with every heartbeat.
   */
  /**
   * The budget the node's power domain sent. Once the domain lifts it, it is kept for at most one quiet period (from
   * the first tick after the lift) to ease the node back, never longer: a node held at its target under a lifted
   * budget is never quiet, and would stay capped for ever.
   */
  private domainBudget: { watts: number; domain: string; lifted: boolean; liftedAtMs?: number } | undefined;
  private utilization = 0;
  private lastReading: PowerReading | undefined;
  private lastState: CappingState = "uncapped";
  private lastReason = "no budget in force";
  private throttled = new Map<string, number>();
  private containerWattsById = new Map<string, number>();
  private primaryWatts = 0;
  private closed = false;

  constructor(
    private readonly deps: CappingAgentDeps,
    private readonly capacityMilli: number,
    options: { capping?: Partial<CappingOptions>; nodeBudgetWatts?: number } = {},
  ) {
    this.controller = new CappingController(options.capping);
    this.nodeBudgetWatts = positiveOrUndefined(options.nodeBudgetWatts);
  }

  /** Whole-server CPU utilization (0..1) at the last tick: the model meter's input. */
  get serverUtilization(): number {
    return this.utilization;
  }

  /** The node's own budget (config, or an operator's override); undefined or 0 removes it. */
  setNodeBudget(watts: number | undefined): void {
    this.nodeBudgetWatts = positiveOrUndefined(watts);
  }

  /** The budget the node's power domain sent (0 or undefined: the domain lifted it). */
  setDomainBudget(watts: number | undefined, domain: string): void {
    const w = positiveOrUndefined(watts);
    const before = this.domainBudget;
    if (w !== undefined) this.domainBudget = { watts: w, domain, lifted: false };
    else if (before && !before.lifted)
      this.domainBudget = this.lastState === "uncapped" ? undefined : { ...before, lifted: true };
    const changed = w === undefined ? before !== undefined && !before.lifted : before?.watts !== w || before.lifted;
    if (changed)
      this.deps.log.info(w === undefined ? "power domain lifted its budget" : "power domain set a budget", {
        domain: domain || before?.domain || "",
        budgetWatts: w ?? 0,
        ...(this.domainBudget?.lifted ? { keptUntilQuiet: true } : {}),
      });
  }

  /** The budget in force: the smaller of the node's and the domain's. */
  budget(): { watts: number | undefined; source: CappingSnapshot["budgetSource"]; domain: string } {
    const node = this.nodeBudgetWatts;
    const dom = this.domainBudget;
    if (dom && (node === undefined || dom.watts <= node))
      return { watts: dom.watts, source: "domain", domain: dom.domain };
    if (node !== undefined) return { watts: node, source: "node", domain: "" };
    return { watts: undefined, source: "none", domain: "" };
  }

  /** One control period: measure, attribute, decide, act. */
  tick(nowMs: number, primaryCores: number, containers: readonly AgentContainer[]): void {
    if (this.closed) return;
    let secondaryCores = 0;
    for (const c of containers) secondaryCores += c.cpuCores;
    this.utilization = Math.min(1, Math.max(0, (primaryCores + secondaryCores) / (this.capacityMilli / 1000)));
    const reading = this.readMeter(nowMs);
    if (reading) this.attribute(reading, primaryCores, containers);
    // A lifted budget is kept only to ease the node back: when the node draws more than it, the domain cannot have
    // lifted it for being under its threshold (the budget was removed or raised), so it goes at once.
    if (this.domainBudget?.lifted && reading && reading.watts > this.domainBudget.watts) this.domainBudget = undefined;
    if (this.domainBudget?.lifted) {
      this.domainBudget.liftedAtMs ??= nowMs;
      if (nowMs - this.domainBudget.liftedAtMs >= this.controller.resolvedOptions.quietMs)
        this.domainBudget = undefined;
    }
    const budget = this.budget();
    const decision = this.controller.tick({
      nowMs,
      drawWatts: reading?.watts,
      budgetWatts: budget.watts,
      containers: containers.map((c) => ({
        containerId: c.containerId,
        allocationMilli: c.allocationMilli,
        startedMs: c.startedMs,
        isAm: c.isAm,
        criticality: c.criticality,
        usageMilli: Math.round(c.cpuCores * 1000),
      })),
    });
    if (decision.state !== this.lastState)
      this.deps.log.info(`capping ${decision.state}`, {
        reason: decision.reason,
        watts: reading ? Math.round(reading.watts) : undefined,
        budgetWatts: budget.watts,
        budgetDomain: budget.domain || undefined,
      });
    this.lastState = decision.state;
    this.lastReason = decision.reason;
    if (this.domainBudget?.lifted && decision.state === "uncapped") this.domainBudget = undefined;
    const byId = new Map(containers.map((c) => [c.containerId, c]));
    const next = new Map<string, number>();
    for (const c of containers) {
      const limit = decision.limitsMilli.get(c.containerId);
      if (limit !== undefined) next.set(c.containerId, limit);
      // Only changes reach the throttler: a quota write or a duty-cycle change per container per step at most.
      if (this.throttled.get(c.containerId) !== limit)
        this.deps.throttler.setLimit(c.containerId, limit, c.allocationMilli, c.pids);
    }
    this.throttled = next;
    for (const id of decision.kills) {
      const c = byId.get(id);
      if (!c) continue;
      this.deps.throttler.forget(id);
      this.deps.kill(id, decision.reason);
    }
  }

  /** A container ended: stop throttling it and forget its estimate. */
  forget(containerId: string): void {
    this.throttled.delete(containerId);
    this.containerWattsById.delete(containerId);
    this.deps.throttler.forget(containerId);
  }

  /** A container's share of the dynamic power at the last reading, watts (0 without one). */
  containerWatts(containerId: string): number {
    return this.containerWattsById.get(containerId) ?? 0;
  }

  /** What heartbeats, logs and the CLI show. */
  snapshot(): CappingSnapshot {
    const budget = this.budget();
    const stats = this.controller.stats();
    return {
      watts: this.lastReading?.watts,
      meter: this.deps.meter.description,
      state: this.lastState,
      budgetWatts: budget.watts,
      budgetSource: budget.source,
      budgetDomain: budget.domain,
      throttledContainers: this.throttled.size,
      kills: stats.kills,
      reason: this.lastReason,
      containerWatts: this.containerWattsById,
      primaryWatts: this.primaryWatts,
      stats,
    };
  }

  /** Continues every throttled container and closes the meter; idempotent. */
  close(): void {
    if (this.closed) return;
    this.closed = true;
    this.deps.throttler.close();
    this.deps.meter.close();
  }

  private readMeter(nowMs: number): PowerReading | undefined {
    let reading: PowerReading | undefined;
    try {
      reading = this.deps.meter.read(nowMs);
    } catch (err) {
      // A meter that fails is stale telemetry, which the controller answers by flooring secondary work.
      this.deps.log.warn("power meter read failed", { meter: this.deps.meter.description, error: String(err) });
    }
    if (reading && !(Number.isFinite(reading.watts) && reading.watts >= 0)) reading = undefined;
    if (reading) this.lastReading = reading;
    return reading;
  }

  /** Splits the reading's dynamic power among the primary and the containers, and trains the model on it. */
  private attribute(reading: PowerReading, primaryCores: number, containers: readonly AgentContainer[]): void {
    const entities: PowerEntity[] = [
      { id: "", usage: { cpuCores: primaryCores } },
      ...containers.map((c) => ({ id: c.containerId, usage: { cpuCores: c.cpuCores, memoryMb: c.memoryMb } })),
    ];
    const dynamicWatts = reading.watts - reading.idleWatts;
    let usageCores = primaryCores;
    let usageMemoryMb = 0;
    for (const c of containers) {
      usageCores += c.cpuCores;
      usageMemoryMb += c.memoryMb;
    }
    this.model.observe({
      timeMs: reading.timeMs,
      dynamicWatts,
      usage: { cpuCores: usageCores, memoryMb: usageMemoryMb },
    });
    const split = this.model.attribute(entities, dynamicWatts);
    const watts = new Map<string, number>();
    for (const e of split.entities) {
      if (e.id === "") this.primaryWatts = e.watts;
      else watts.set(e.id, e.watts);
    }
    this.containerWattsById = watts;
  }
}

function positiveOrUndefined(v: number | undefined): number | undefined {
  return v !== undefined && Number.isFinite(v) && v > 0 ? v : undefined;
}
