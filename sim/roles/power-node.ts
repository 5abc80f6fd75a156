/**
 * The node manager's capping role in the power experiment, for every simulated server: per-container capping by the
 * node manager's own `CappingAgent` (a meter reading the simulated draw, a throttler setting the tasks' quotas, kills
 * that re-run the tasks), or the full-server baseline (a RAPL-like cap that slows every core alike, seeds/000 II-B).
 * The simulation (`sim/experiments/power/sim.ts`) owns the servers and tasks and calls `step` every control period.
 */
import { dvfsWatts, profileWatts } from "../../common/power-profiles.js";
import type { PowerProfile } from "../../common/power-profiles.js";
import { Logger } from "../../common/log.js";
import { CappingAgent } from "../../nodemanager/index.js";
import type { AgentContainer, CappingState } from "../../nodemanager/index.js";
import type { ResolvedPowerOptions } from "../experiments/power/options.js";

/** How the simulation runs: a capping mode, or "plan" (the uncapped history run that records draws for the planner). */
export type PowerSimMode = ResolvedPowerOptions["capping"] | "plan";

/** A running secondary task as the node manager sees it (its container). */
export interface PowerNodeTask {
  readonly containerId: string;
  readonly server: number;
  readonly startMs: number;
  /** Progress rate (0..1]: its quota over its allocation, or the full-server cap's frequency. */
  readonly speed: number;
}

/** What the capping role reads of the simulated servers and does to their tasks (the simulation implements it). */
export interface PowerNodeHost<T extends PowerNodeTask> {
  readonly o: ResolvedPowerOptions;
  readonly measureFromMs: number;
  readonly taskMilli: number;
  readonly capMilli: Int32Array;
  readonly primaryMilli: Int32Array;
  readonly allocMilli: Int32Array;
  readonly drawWatts: Float64Array;
  readonly profileOf: readonly PowerProfile[];
  readonly tasks: readonly Set<T>[];
  /** Running tasks by container id (the agent names containers). */
  readonly byContainer: ReadonlyMap<string, T>;
  now(): number;
  /** Milli-cores a running task uses now. */
  usedOf(task: T): number;
  setSpeed(task: T, speed: number): void;
  kill(task: T, cause: "capping", update: boolean): void;
  /** Adds server `s`'s integrals up to now (before a change), and takes a change of server `s` into account. */
  accumulate(s: number): void;
  changed(s: number): void;
  refreshFree(s: number): void;
}

/** Every server's capping: its agent (per-container) or its RAPL-like cap (full-server). */
export class PowerNodes<T extends PowerNodeTask> {
  /** The full-server cap's frequency (1: uncapped), and whether that cap is engaged. */
  readonly frequency: Float64Array;
  readonly raplCapped: Uint8Array;
  /** Each server's capping agent (per-container mode), its state after its last tick, and its kills. */
  readonly agents: (CappingAgent | undefined)[];
  readonly controllerState: CappingState[];
  readonly agentKills: Int32Array;
  /** Full-server caps engaged since the figures began. */
  raplCaps = 0;
  /** Set while an agent ticks: its quota changes or kills touched the server. */
  private agentTouched = false;

  constructor(
    private readonly host: PowerNodeHost<T>,
    private readonly mode: PowerSimMode,
    n: number,
  ) {
    this.frequency = new Float64Array(n).fill(1);
    this.raplCapped = new Uint8Array(n);
    this.agents = Array.from({ length: n }, (_, s) => (mode === "per-container" ? this.newAgent(s) : undefined));
    this.controllerState = Array.from({ length: n }, () => "uncapped" as CappingState);
    this.agentKills = new Int32Array(n);
  }

  /** Server `s` is capped (its agent's controller, or the full-server cap). */
  capped(s: number): boolean {
    return this.controllerState[s] !== "uncapped" || this.raplCapped[s] === 1;
  }

  /** The capping state server `s` reports in its heartbeat. */
  cappingState(s: number): CappingState {
    return this.mode === "per-container" ? this.controllerState[s]! : this.raplCapped[s] ? "capped" : "uncapped";
  }

  /** Caps engaged over the run: the agents' and the full-server baseline's. */
  serverCaps(): number {
    let caps = this.raplCaps;
    for (const a of this.agents) if (a) caps += a.snapshot().stats.caps;
    return caps;
  }

  /** The node manager tells server `s`'s agent that a container ended. */
  forget(s: number, containerId: string): void {
    this.agents[s]?.forget(containerId);
  }

  /**
   * The lowest draw capping can take server `s` to: per-container, with no secondary work left; full-server, with
   * every core at the lowest frequency.
   */
  lowestWatts(s: number): number {
    const { host } = this;
    const p = host.profileOf[s]!;
    if (this.mode === "per-container") return profileWatts(p, host.primaryMilli[s]! / host.capMilli[s]!);
    const u = Math.min(1, (host.primaryMilli[s]! + host.allocMilli[s]!) / host.capMilli[s]!);
    return dvfsWatts(p, profileWatts(p, u), host.o.raplMinFrequency, host.o.dvfsExponent);
  }

  /**
   * Server `s`'s capping step for one control period under the node budget its domain gives it (none once the alert
   * ends). Returns true while its loop must go on (a budget in force or a cap engaged).
   */
  step(s: number, nowMs: number, nodeBudget: { budgetWatts: number; domain: string } | undefined): boolean {
    if (this.mode === "per-container") return this.perContainerStep(s, nowMs, nodeBudget);
    this.fullServerStep(s, nodeBudget?.budgetWatts);
    return nodeBudget !== undefined || this.raplCapped[s] === 1;
  }

  /**
   * A server's capping agent, as the node manager builds it, over the simulator: a meter reading the server's draw, a
   * throttler setting its tasks' quotas, kills re-running the tasks, a silent log.
   */
  private newAgent(s: number): CappingAgent {
    const { host } = this;
    const profile = host.profileOf[s]!;
    return new CappingAgent(
      {
        meter: {
          kind: "model",
          description: `model (simulated): ${profile.name}`,
          read: (nowMs) => ({ timeMs: nowMs, watts: host.drawWatts[s]!, idleWatts: profile.idleWatts }),
          close: () => undefined,
        },
        throttler: {
          mode: "none",
          setLimit: (containerId, limitMilli) => {
            const task = host.byContainer.get(containerId);
            if (!task || task.server !== s) return;
            const quota = limitMilli === undefined ? host.taskMilli : Math.min(host.taskMilli, limitMilli);
            if (quota / host.taskMilli === task.speed) return;
            host.setSpeed(task, quota / host.taskMilli);
            this.agentTouched = true;
          },
          forget: () => undefined,
          close: () => undefined,
        },
        log: SILENT_LOG,
        kill: (containerId) => {
          const task = host.byContainer.get(containerId);
          if (!task || task.server !== s) return;
          this.agentKills[s]!++;
          host.kill(task, "capping", false);
          this.agentTouched = true;
        },
      },
      host.capMilli[s]!,
      { capping: host.o.cappingOptions },
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
    const { host } = this;
    const agent = this.agents[s]!;
    agent.setDomainBudget(nodeBudget?.budgetWatts, nodeBudget?.domain ?? "");
    const budgetWatts = agent.budget().watts;
    // An uncapped agent whose draw is within its cap threshold decides nothing this period (its controller answers
    // "uncapped: draw <= cap" and only the agent's power model learns a sample), so the simulator skips that tick:
    // the decisions are the same, and most servers of an alerting domain are in this case.
    if (
      this.controllerState[s] === "uncapped" &&
      (budgetWatts === undefined || host.drawWatts[s]! <= budgetWatts * host.o.cappingOptions.capFraction)
    )
      return budgetWatts !== undefined;
    const containers: AgentContainer[] = [];
    for (const t of host.tasks[s]!)
      containers.push({
        containerId: t.containerId,
        allocationMilli: host.taskMilli,
        memoryMb: Math.ceil(host.o.taskCores * 1024),
        startedMs: t.startMs,
        isAm: false,
        criticality: 0,
        cpuCores: host.usedOf(t) / 1000,
        pids: NO_PIDS,
      });
    host.accumulate(s);
    this.agentTouched = false;
    agent.tick(nowMs, host.primaryMilli[s]! / 1000, containers);
    const state = agent.snapshot().state;
    const touched = this.agentTouched || state !== this.controllerState[s];
    this.controllerState[s] = state;
    if (touched) {
      host.changed(s);
      host.refreshFree(s);
    }
    return agent.budget().watts !== undefined || state !== "uncapped";
  }

  /**
   * The full-server baseline for one period: a RAPL-like cap engages when the draw exceeds the budget and then holds
   * the highest frequency whose draw stays under it, slowing every core alike; it lets go when the budget goes.
   */
  private fullServerStep(s: number, budgetWatts: number | undefined): void {
    const { host } = this;
    let f = 1;
    const wasCapped = this.raplCapped[s]!;
    host.accumulate(s);
    if (budgetWatts === undefined) this.raplCapped[s] = 0;
    else {
      const draw = host.drawWatts[s]!;
      if (!this.raplCapped[s] && draw > budgetWatts * host.o.cappingOptions.capFraction) {
        this.raplCapped[s] = 1;
        if (host.now() >= host.measureFromMs) this.raplCaps++;
      }
      if (this.raplCapped[s]) {
        const p = host.profileOf[s]!;
        const u = Math.min(1, (host.primaryMilli[s]! + host.allocMilli[s]!) / host.capMilli[s]!);
        const dynamic = profileWatts(p, u) - p.idleWatts;
        const room = RAPL_TARGET_FRACTION * budgetWatts - p.idleWatts;
        f = dynamic <= 0 ? 1 : room <= 0 ? 0 : (room / dynamic) ** (1 / host.o.dvfsExponent);
        f = Math.min(1, Math.max(host.o.raplMinFrequency, f));
      }
    }
    if (f === this.frequency[s] && wasCapped === this.raplCapped[s]) return;
    this.frequency[s] = f;
    for (const t of host.tasks[s]!) if (t.speed !== f) host.setSpeed(t, f);
    host.changed(s);
  }
}

/** The agents' log: the simulator reports figures, not a daemon's log lines. */
const SILENT_LOG = new Logger("sim", "error", () => undefined);
const NO_PIDS = (): readonly number[] => [];
/** The RAPL-like cap holds the draw this far under the budget (its feedback loop averages just below the limit). */
const RAPL_TARGET_FRACTION = 0.99;
