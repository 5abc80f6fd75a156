/**
 * The power experiment's simulation (`PowerSim`): the servers with their primaries, the secondary tasks (arrivals, the
 * FIFO queue, placement, yields), the power domains through the resource manager's own `PowerDomains`, and the
 * figures. The node managers' capping is the role in `sim/roles/power-node.ts`; the resource manager's power-aware
 * placement the one in `sim/roles/power-placement.ts`. The model is described at `runPower` (run.ts).
 */
import { HarvestError } from "../../../common/errors.js";
import { dvfsWatts, profileWatts } from "../../../common/power-profiles.js";
import type { PowerProfile } from "../../../common/power-profiles.js";
import { SeededRng } from "../../../common/rng.js";
import { PowerDomains } from "../../../resourcemanager/index.js";
import type { PowerDomainConfig } from "../../../resourcemanager/index.js";
import { SimEngine } from "../../engine/engine.js";
import { harvestableCoreMs } from "../../jobs.js";
import { DAY_MS } from "../../model.js";
import type { SimCluster } from "../../model.js";
import { ServerSet } from "../../roles/server-set.js";
import { streamSeed } from "../../streams.js";
import { replayPrimarySlot } from "../../roles/server.js";
import { yieldVictims } from "../../roles/yield-step.js";
import { primaryHistories } from "../../roles/power-history.js";
import { PowerNodes } from "../../roles/power-node.js";
import type { PowerNodeHost, PowerSimMode } from "../../roles/power-node.js";
import { PowerPlacement } from "../../roles/power-placement.js";
import { oversubscriptionFigures, peakWatts, powerLayout } from "./budgets.js";
import type { RecordedHistory, SimPowerDomain } from "./budgets.js";
import type { PowerBudgets, PowerResult, ResolvedPowerOptions } from "./options.js";

/** Independent random streams, one per purpose, so that one decision does not shift another's draws. */
const Stream = { Arrivals: 1, Durations: 2, Placement: 3 } as const;

/** A secondary task; one object carries it through every attempt. */
export interface Task {
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

/** One run of the power experiment, or the plan run (see `runPower` in run.ts for the model). */
export class PowerSim implements PowerNodeHost<Task> {
  private readonly engine = new SimEngine();
  private readonly arrivalRng: SeededRng;
  private readonly durationRng: SeededRng;
  private readonly placementRng: SeededRng;
  readonly taskMilli: number;
  private readonly startMs: number;
  private readonly endMs: number;
  /** Figures count from here; budgets are in force from here (experiment runs). */
  readonly measureFromMs: number;
  private budgetsActive = false;
  private readonly arrivalsPerMs: number;
  private readonly durationMu: number;
  /** The resource manager's power domains (the policy code itself). */
  private readonly power: PowerDomains;
  private readonly domainByPath = new Map<string, DomainState>();

  // Per server.
  private readonly n: number;
  private readonly nodeIds: string[];
  readonly capMilli: Int32Array;
  private readonly reserveMilli: Int32Array;
  readonly primaryMilli: Int32Array;
  readonly allocMilli: Int32Array;
  /** Milli-cores the secondary tasks use now (quotas applied). */
  private readonly usedMilli: Float64Array;
  readonly drawWatts: Float64Array;
  /** The primary is user-facing (the criticality test on its history, as the power-aware placement reads it). */
  private readonly userFacing: Uint8Array;
  readonly tasks: Set<Task>[];
  /** The node managers' capping (agents or full-server caps). */
  private readonly nodes: PowerNodes<Task>;
  /** Running tasks by container id (the agent names containers). */
  readonly byContainer = new Map<string, Task>();
  readonly profileOf: PowerProfile[];
  private readonly domainOf: Int32Array;
  private readonly domains: DomainState[];
  /** Servers with room for one task. */
  private readonly free: ServerSet;
  private readonly queue: Task[] = [];
  private queueHead = 0;
  private containerSeq = 0;
  private taskSeq = 0;

  /** What the power-aware placement reads (the resource manager's `powerNode` view), and its choice. */
  private readonly placement: PowerPlacement;

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
    readonly o: ResolvedPowerOptions,
    private readonly mode: PowerSimMode,
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
    this.nodes = new PowerNodes(this, mode, n);

    // The domains are tracked from the start; their budgets are set when the experiment begins (see `run`).
    this.power = new PowerDomains(this.domainConfig(false), o.domainOptions, this.engine.clock);
    for (const s of cluster.servers)
      this.power.addNode({ nodeId: s.id, rack: s.rack, profile: this.profileOf[s.index]! });

    // What the resource manager knows of each primary from the history before the experiment: its tenant registry's
    // reading (the classifier's peak and pattern, seeds/000's Compare8 verdict), the registry's own code.
    this.userFacing = new Uint8Array(n);
    this.placement = new PowerPlacement(
      this.power,
      this.nodeIds,
      this.capMilli,
      primaryHistories(cluster),
      o.placement === "power-aware",
      o.placementOptions,
      this.engine.clock,
    );
    for (let s = 0; s < n; s++) this.userFacing[s] = this.placement.nodes[s]!.primaryCritical ? 1 : 0;
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
        this.placement.budgetsSet();
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

  now(): number {
    return this.engine.clock.nowMs();
  }

  // ---------------------------------------------------------------------------------------------- power and books

  /** A server's draw now: its profile at its utilization, scaled by the full-server cap's frequency. */
  private serverDraw(s: number): number {
    const p = this.profileOf[s]!;
    const u = Math.min(1, (this.primaryMilli[s]! + this.usedMilli[s]!) / this.capMilli[s]!);
    const full = profileWatts(p, u);
    const f = this.nodes.frequency[s]!;
    return f >= 1 ? full : dvfsWatts(p, full, f, this.o.dvfsExponent);
  }

  private sumDraw(d: DomainState): number {
    let sum = 0;
    for (const s of d.spec.servers) sum += this.drawWatts[s]!;
    return sum;
  }

  /** Adds server `s`'s integrals (energy, throttled work, plan records) up to now, at its current state. */
  accumulate(s: number): void {
    const now = this.now();
    const from = Math.max(this.lastMs[s]!, this.measureFromMs);
    this.lastMs[s] = now;
    const dt = now - from;
    if (!(dt > 0)) return;
    this.energyJ += (this.drawWatts[s]! * dt) / 1000;
    if (this.nodes.capped(s)) this.cappedMs += dt;
    const f = this.nodes.frequency[s]!;
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
  changed(s: number): void {
    const draw = this.serverDraw(s);
    this.drawWatts[s] = draw;
    const d = this.domains[this.domainOf[s]!]!;
    const now = this.now();
    this.accumulateDomain(d, now);
    d.drawWatts = this.sumDraw(d);
    this.overBudgetTransition(d, now);
    this.placement.heartbeat(
      s,
      this.primaryMilli[s]!,
      this.allocMilli[s]!,
      draw,
      this.o.placement === "power-aware" && this.mode !== "plan",
    );
    if (this.mode === "plan") return;
    this.power.report(this.nodeIds[s]!, {
      watts: draw,
      meter: "model (simulated)",
      capped: this.nodes.capped(s),
      cappingState: this.nodes.cappingState(s),
      throttledContainers: 0,
      powerKills: this.nodes.agentKills[s]!,
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
    replayPrimarySlot(cluster, k, first, this.capMilli, this.primaryMilli, (s, primary, before) => {
      this.accumulate(s);
      this.primaryMilli[s] = primary;
      if (primary > before) this.yieldOn(s);
      else gained = true;
      this.changed(s);
      this.refreshFree(s);
    });
    if (first) for (let s = 0; s < this.n; s++) this.refreshFree(s);
    if (this.mode !== "plan") {
      // The resource manager's periodic recount (incremental sums drift by rounding only), and the placement's.
      this.power.tick();
      this.handleAlerts();
      this.placement.recount();
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
    if (!this.placement.powerAware || this.mode === "plan") return this.free.at(this.placementRng.int(this.free.size));
    return this.placement.choose(task.id, this.taskMilli, this.free, this.placementRng, fresh);
  }

  private start(task: Task, s: number): void {
    const now = this.now();
    this.accumulate(s);
    task.containerId = `c${++this.containerSeq}`;
    task.server = s;
    task.startMs = now;
    task.remainingMs = task.nominalMs;
    task.lastMs = now;
    task.speed = this.nodes.frequency[s]!;
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
  setSpeed(task: Task, speed: number): void {
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
  usedOf(task: Task): number {
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
    this.nodes.forget(s, task.containerId);
    this.allocMilli[s]! -= this.taskMilli;
    this.usedMilli[s]! -= this.usedOf(task);
    // Sums of quotas drift by rounding only; an empty server uses nothing.
    if (this.tasks[s]!.size === 0) this.usedMilli[s] = 0;
    task.version++;
    task.server = -1;
    task.containerId = "";
  }

  /** Kills a running attempt; the task re-runs from the start at the back of the queue. */
  kill(task: Task, cause: "capping" | "yield", update = true): void {
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

  refreshFree(s: number): void {
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
      if (this.nodes.step(s, now, nodeBudget)) busy = true;
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
      reachable += Math.min(draw, Math.max(share, this.nodes.lowestWatts(s)));
    }
    return reachable > d.budgetWatts * (1 + 1e-9);
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
      if (this.mode !== "full-server" && this.nodes.frequency[s] !== 1) fail(`server ${id}'s cores were slowed`);
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
    const serverCaps = this.nodes.serverCaps();
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
