/**
 * The capping controller: keeps a server's power draw under the budget its power domain gives it by throttling the
 * secondary (Harvest) containers first and killing them only when throttling is not enough. Pure: no timers, no I/O;
 * the node manager calls `tick()` every control period (200 ms, the PSU poll of seeds/000, section III-D) with the
 * meter reading and carries out the limits (through a Throttler) and the kills.
 *
 * From seeds/000 (sections II-B and III-D), adapted from per-VM DVFS to per-container CPU quotas, with the CPU-quota
 * lever of seeds/001 (section 3.2: take cores away from a container rather than throttle the whole server):
 *
 *   uncapped --draw > budget x capFraction--> capped: every secondary container drops to its floor at once
 *     (the seed's "minimum p-state": lower the draw as fast as possible, accepting an overshoot);
 *   capped, every stepMs while draw < budget x targetFraction: raise containersPerStep containers (most critical first,
 *     then oldest first) by stepFraction of their allocation, up to it (the seed's feedback loop, N cores per step),
 *     but by no more than the headroom to the target, estimated in watts per milli-core from what the floor drop saved
 *     (the seed keeps "the highest frequency that keeps the power below this threshold"), so that the climb settles
 *     under the target rather than overshooting the cap and falling back to the floor;
 *   capped, draw between target and cap: hold (stop raising);
 *   capped, draw > cap on the reading right after a raise: undo that raise (the rest stay where they were);
 *   capped, draw > cap again otherwise: back to the floor at once;
 *   capped, floor in force for killDeadlineMs and draw still > budget: kill (the seed falls back to RAPL on the whole
 *     socket here; Harvest must never slow the primary tenant, so it kills secondary work instead), one kill step every
 *     killIntervalMs, least critical first, youngest first within a criticality, the job manager's container last;
 *   capped, draw < budget x uncapFraction for quietMs: lift the cap (seed: "after some time, 30 secs by default").
 *
 * Raising acts only on what a reading can tell (the cause of capping-bench steps that never settled, issue 15):
 * - A raise waits for a clean reading, one whose whole period ran at the current quotas. The reading right after a
 *   change spans the change itself, and a CFS quota write refills the group's runtime for the current kernel period:
 *   a container just raised runs up to one kernel period (100 ms) more than its new quota, so that reading is inflated
 *   by as much as half the quota over a 200 ms period. Raising again on it (or on the next, lower, reading as if the
 *   raise had done nothing) made the climb cross the cap, drop to the floor and start over, period after period.
 * - Such a transient is real power, so a raise also leaves room for it under the cap: the largest excess of a reading
 *   right after a raise over the clean reading that follows, learned during the capped episode.
 * - Only containers that use (nearly) all of their quota are raised: raising an idle one (a job manager) or one that
 *   other work starves of CPU changes nothing now but lets it jump over the cap later. The quota they leave unused is
 *   counted as if used when the headroom is estimated, for the same reason.
 *
 * Hysteresis: the thresholds are strictly ordered (uncap < target < cap, checked by resolveCappingOptions), raising
 * stops at the target, short of the cap, and the cap is lifted only after a quiet period well below it, so a draw that
 * wanders around the cap threshold engages capping once and does not flap between capped and uncapped.
 *
 * Stale telemetry: with no meter reading for staleAfterPeriods consecutive ticks while a budget is in force and
 * containers exist, every secondary container goes to its floor (state "stale") and nothing is killed, because a
 * kill needs evidence; when readings return the controller continues as capped from the floor and raises step by step.
 * With no budget in force there is nothing to protect, so missing readings change nothing.
 *
 * Invariant: the primary tenant is never in the input (only secondary containers are), so it is never throttled or
 * killed; limits and kills only ever name containers of the current input.
 */
import { optionResolution } from "../../common/options.js";

/** Settings of the capping controller. Fractions are of the server's power budget. */
export interface CappingOptions {
  /** Cap when draw > budget x capFraction. @default 1.0 */
  capFraction: number;
  /**
   * Raise quotas only while draw < budget x targetFraction (seeds/000, IV-C runs a 225 W target under a 230 W cap).
   * @default 0.95
   */
  targetFraction: number;
  /** Lift the cap after draw stays < budget x uncapFraction for quietMs. @default 0.9 */
  uncapFraction: number;
  /**
   * How long the draw must stay under the uncap threshold before the cap is lifted (seeds/000, III-D: 30 s).
   * @default 30000
   */
  quietMs: number;
  /** Each secondary container's floor as a fraction of its allocation. @default 0.1 */
  floorFraction: number;
  /** The smallest floor in milli-cores (a container allocated less keeps its allocation as its floor). @default 50 */
  floorMinMilli: number;
  /** Time between two raising steps. @default 200 */
  stepMs: number;
  /** How many containers are raised per step (seeds/000, III-D: N = 4 cores per step). @default 2 */
  containersPerStep: number;
  /** How much of its allocation a container gets back per step. @default 0.25 */
  stepFraction: number;
  /** If still over budget this long after throttling everyone to the floor, kill. @default 2000 */
  killDeadlineMs: number;
  /** Time between two kill steps, so that the meter shows a kill's effect before the next is decided. @default 1000 */
  killIntervalMs: number;
  /** No meter reading for this many consecutive periods means stale: floor every secondary container. @default 3 */
  staleAfterPeriods: number;
}

const DEFAULTS: CappingOptions = {
  capFraction: 1.0,
  targetFraction: 0.95,
  uncapFraction: 0.9,
  quietMs: 30_000,
  floorFraction: 0.1,
  floorMinMilli: 50,
  stepMs: 200,
  containersPerStep: 2,
  stepFraction: 0.25,
  killDeadlineMs: 2_000,
  killIntervalMs: 1_000,
  staleAfterPeriods: 3,
};

/** Fills defaults and validates; throws CONFIG_INVALID naming the field. */
export function resolveCappingOptions(o: Partial<CappingOptions> = {}): CappingOptions {
  const { o: r, bad } = optionResolution("capping", DEFAULTS, o);
  for (const [field, value] of Object.entries(r))
    if (typeof value !== "number" || !Number.isFinite(value)) bad(field, "must be a finite number");
  if (!(r.uncapFraction > 0)) bad("uncapFraction", "must be > 0");
  if (!(r.uncapFraction < r.targetFraction))
    bad(
      "uncapFraction",
      `must be < targetFraction (${r.targetFraction}) so that a lifted cap does not re-engage at once`,
    );
  if (!(r.targetFraction < r.capFraction))
    bad("targetFraction", `must be < capFraction (${r.capFraction}) so that raising stops short of the cap`);
  if (!(r.capFraction <= 2)) bad("capFraction", "must be <= 2 (a cap far above the budget does not protect it)");
  if (!(r.quietMs >= 0)) bad("quietMs", "must be >= 0");
  if (!(r.floorFraction >= 0 && r.floorFraction <= 1)) bad("floorFraction", "must be in [0, 1]");
  if (!(r.floorMinMilli >= 0)) bad("floorMinMilli", "must be >= 0");
  if (!(r.stepMs > 0)) bad("stepMs", "must be > 0");
  if (!(Number.isInteger(r.containersPerStep) && r.containersPerStep >= 1))
    bad("containersPerStep", "must be an integer >= 1");
  if (!(r.stepFraction > 0 && r.stepFraction <= 1)) bad("stepFraction", "must be in (0, 1]");
  if (!(r.killDeadlineMs >= 0)) bad("killDeadlineMs", "must be >= 0");
  if (!(r.killIntervalMs >= 0)) bad("killIntervalMs", "must be >= 0");
  if (!(Number.isInteger(r.staleAfterPeriods) && r.staleAfterPeriods >= 1))
    bad("staleAfterPeriods", "must be an integer >= 1");
  return r;
}

/** A secondary container as the capping controller sees it. */
export interface CappingContainer {
  containerId: string;
  /** Its CPU allocation (the quota it runs at when unthrottled). */
  allocationMilli: number;
  startedMs: number;
  /** The job manager's own container: killed last. */
  isAm: boolean;
  /** Larger = more critical (job priority / criticality); the least critical are raised last and killed first. */
  criticality: number;
  /**
   * What it used over the last period, measured (milli-cores). Optional: when given, a drop to the floor is credited
   * with what the container really gave up, min(quota, usage) - floor, rather than quota - floor, so that an idle or
   * CPU-starved container does not make the watts-per-milli-core estimate too low (and every raise overshoot).
   */
  usageMilli?: number;
}

/** One control period's inputs. */
export interface CappingInput {
  nowMs: number;
  /** The server's measured (or modelled) draw; undefined: no reading this period. */
  drawWatts: number | undefined;
  /** The server's budget; undefined or 0: no budget in force. */
  budgetWatts: number | undefined;
  /** The secondary containers on the server (never the primary tenant). */
  containers: readonly CappingContainer[];
}

/** Where the controller is. */
export type CappingState = "uncapped" | "capped" | "stale";

/** One control period's decision. */
export interface CappingDecision {
  state: CappingState;
  /** Container -> CPU quota in milli-cores; a container absent from the map runs at its allocation (unthrottled). */
  limitsMilli: ReadonlyMap<string, number>;
  /** Containers to kill now, in order. */
  kills: string[];
  /** One line for logs and the CLI. */
  reason: string;
}

/** Counters for heartbeats and benchmarks. */
export interface CappingStats {
  /** Times capping engaged (uncapped -> capped on a reading over the cap threshold). */
  caps: number;
  /** Times every container was dropped to its floor (the first drop of each cap included). */
  floorDrops: number;
  /** Times the telemetry went stale. */
  staleEpisodes: number;
  /** Containers killed. */
  kills: number;
  /** Sum over containers of the time each ran below its allocation. */
  throttledContainerMs: number;
}

/**
 * The per-server capping loop (seeds/000, section III-D; seeds/001, section 3.2). Keeps, per container, the quota it
 * currently has; see the file header for the state machine.
 */
export class CappingController {
  private readonly options: CappingOptions;
  private state: CappingState = "uncapped";
  /** Current quota of each throttled-or-capped container; only meaningful while capped or stale. */
  private readonly limits = new Map<string, number>();
  /** Containers already handed out for killing (kept at their floor until they leave the input). */
  private readonly killed = new Set<string>();
  private missingReadings = 0;
  /**
   * Time of the last floor drop, raise or undone raise (raising waits stepMs after either). Invariant: a reading is
   * clean (its whole period ran at the current quotas) iff the tick before it came after this.
   */
  private lastChangeMs = 0;
  /** The previous tick's time: where this tick's reading began. */
  private windowStartMs: number | undefined;
  /** The last raise: when, the quotas before it, the draw it was decided on, and how many containers it raised. */
  private lastRaise: { atMs: number; before: Map<string, number>; drawWatts: number; count: number } | undefined;
  /** The reading right after the last raise, until the clean reading that follows it says how much was transient. */
  private afterRaiseWatts: number | undefined;
  /**
   * The largest transient per raised container seen in this capped episode: how much the reading that spans a raise
   * exceeded the clean reading after it (or, when it crossed the cap, the draw the raise was decided on), over the
   * number of containers raised (each quota write refills one group). Raises leave it free under the cap.
   */
  private transientWattsPerContainer = 0;
  /** Since when every container has been at its floor; undefined once one has been raised. */
  private floorSinceMs: number | undefined;
  private quietSinceMs: number | undefined;
  private lastKillMs: number | undefined;
  /** The draw on the tick that dropped everyone to the floor, and the milli-cores that drop took away. */
  private drop: { atMs: number; drawWatts: number; removedMilli: number } | undefined;
  /**
   * Estimated watts per milli-core of secondary quota: what the last floor drop saved over what it took away, from the
   * latest reading at the floor before anything was raised or killed. Kept for the whole capped episode.
   */
  private wattsPerMilli: number | undefined;
  /** This tick's allocations, by container. */
  private allocations = new Map<string, number>();
  private lastTickMs: number | undefined;
  private throttledCount = 0;
  private readonly counters: CappingStats = {
    caps: 0,
    floorDrops: 0,
    staleEpisodes: 0,
    kills: 0,
    throttledContainerMs: 0,
  };

  constructor(options: Partial<CappingOptions> = {}) {
    this.options = resolveCappingOptions(options);
  }

  /** The resolved options. */
  get resolvedOptions(): Readonly<CappingOptions> {
    return this.options;
  }

  /** Runs one control period. */
  tick(input: CappingInput): CappingDecision {
    // Throttled time accrues for the period that just ended, at the throttling the previous decision imposed.
    if (this.lastTickMs !== undefined && input.nowMs > this.lastTickMs)
      this.counters.throttledContainerMs += this.throttledCount * (input.nowMs - this.lastTickMs);
    this.windowStartMs = this.lastTickMs;
    this.lastTickMs = input.nowMs;
    const decision = this.decide(input);
    this.throttledCount = 0;
    for (const c of input.containers) {
      const limit = decision.limitsMilli.get(c.containerId);
      if (limit !== undefined && limit < c.allocationMilli) this.throttledCount += 1;
    }
    this.counters.kills += decision.kills.length;
    return decision;
  }

  /** Counters since construction: caps, floor drops, stale episodes, kills and throttled container-ms. */
  stats(): CappingStats {
    return { ...this.counters };
  }

  private decide(input: CappingInput): CappingDecision {
    const o = this.options;
    this.allocations = new Map(input.containers.map((c) => [c.containerId, c.allocationMilli]));
    // Containers that left the input are forgotten, so nothing is ever decided about one that is not there.
    for (const id of [...this.limits.keys()]) if (!this.allocations.has(id)) this.limits.delete(id);
    for (const id of [...this.killed]) if (!this.allocations.has(id)) this.killed.delete(id);

    const budget = input.budgetWatts;
    if (input.drawWatts === undefined) this.missingReadings += 1;
    else this.missingReadings = 0;

    if (budget === undefined || !(budget > 0)) {
      this.toUncapped();
      return this.result([], "uncapped: no budget in force");
    }
    const capWatts = budget * o.capFraction;
    const targetWatts = budget * o.targetFraction;
    const uncapWatts = budget * o.uncapFraction;
    const draw = input.drawWatts;

    if (draw === undefined) {
      if (this.missingReadings >= o.staleAfterPeriods && input.containers.length > 0) {
        if (this.state !== "stale") {
          this.counters.staleEpisodes += 1;
          this.state = "stale";
          this.allToFloor(input.containers, input.nowMs, undefined);
        } else {
          this.admitNewAtFloor(input.containers);
        }
        return this.result([], `stale: no meter reading for ${this.missingReadings} periods; ${this.floorText(input)}`);
      }
      if (this.state === "uncapped") return this.result([], "uncapped: no meter reading this period");
      // Capped, or stale with no containers: hold what is in force until evidence arrives.
      this.admitNewAtFloor(input.containers);
      return this.result([], `${this.state}: no meter reading this period; holding quotas`);
    }

    if (this.state === "stale") {
      // Readings are back: continue as capped from the floor the stale period imposed, raising step by step.
      this.state = "capped";
      this.admitNewAtFloor(input.containers);
      this.floorSinceMs ??= input.nowMs;
      this.quietSinceMs = undefined;
    }

    if (this.state === "uncapped") {
      if (draw <= capWatts) return this.result([], `uncapped: draw ${w(draw)} <= cap ${w(capWatts)}`);
      this.state = "capped";
      this.counters.caps += 1;
      this.quietSinceMs = undefined;
      this.allToFloor(input.containers, input.nowMs, draw);
      return this.result([], `capped: draw ${w(draw)} > cap ${w(capWatts)}; ${this.floorText(input)}`);
    }

    // Capped from here on.
    this.admitNewAtFloor(input.containers);
    const clean = this.readingIsClean();
    if (clean) {
      this.updateEstimate(input.nowMs, draw);
      this.learnTransient(draw);
    } else if (this.lastRaise?.atMs === this.lastChangeMs) {
      this.afterRaiseWatts = draw;
    }
    if (draw < uncapWatts) {
      this.quietSinceMs ??= input.nowMs;
      if (input.nowMs - this.quietSinceMs >= o.quietMs) {
        this.toUncapped();
        return this.result([], `uncapped: draw under ${w(uncapWatts)} for ${o.quietMs / 1000} s; cap lifted`);
      }
    } else {
      this.quietSinceMs = undefined;
    }

    if (draw > capWatts && !clean && this.lastRaise !== undefined && this.lastRaise.atMs === this.lastChangeMs) {
      // This reading spans the last raise, which is what most likely took the draw over: take back just that raise, and
      // count its whole rise as transient, so that no raise as large is tried again this episode.
      this.transientWattsPerContainer = Math.max(
        this.transientWattsPerContainer,
        (draw - this.lastRaise.drawWatts) / this.lastRaise.count,
      );
      this.undoRaise(input.nowMs);
      return this.result([], `capped: draw ${w(draw)} > cap ${w(capWatts)} right after a raise; raise undone`);
    }

    if (draw > capWatts && !this.everyoneAtFloor(input.containers)) {
      this.allToFloor(input.containers, input.nowMs, draw);
      return this.result([], `capped: draw ${w(draw)} > cap ${w(capWatts)} again; ${this.floorText(input)}`);
    }

    if (draw > budget && this.floorSinceMs !== undefined && input.nowMs - this.floorSinceMs >= o.killDeadlineMs) {
      if (this.lastKillMs !== undefined && input.nowMs - this.lastKillMs < o.killIntervalMs)
        return this.result([], `capped: draw ${w(draw)} > budget ${w(budget)}; waiting for the last kill to show`);
      const kills = this.chooseKills(input.containers, draw, budget);
      if (kills.length > 0) {
        this.lastKillMs = input.nowMs;
        for (const id of kills) this.killed.add(id);
        const since = ((input.nowMs - this.floorSinceMs) / 1000).toFixed(1);
        const why = `draw ${w(draw)} > budget ${w(budget)} ${since} s after the floor`;
        return this.result(kills, `capped: ${why}; killing ${kills.join(", ")}`);
      }
      return this.result([], `capped: draw ${w(draw)} > budget ${w(budget)} at the floor; nothing left to kill`);
    }

    if (draw >= targetWatts)
      return this.result([], `capped: draw ${w(draw)} >= target ${w(targetWatts)}; holding quotas`);

    if (!clean)
      return this.result(
        [],
        `capped: draw ${w(draw)} < target ${w(targetWatts)}; waiting for a reading at these quotas`,
      );
    if (input.nowMs - this.lastChangeMs < o.stepMs)
      return this.result([], `capped: draw ${w(draw)} < target ${w(targetWatts)}; next raise after ${o.stepMs} ms`);
    const before = new Map(this.limits);
    const raised = this.raise(input.containers, targetWatts - draw, capWatts - draw);
    if (raised.length === 0)
      return this.result(
        [],
        `capped: draw ${w(draw)} < target ${w(targetWatts)}; nothing to raise within the headroom`,
      );
    this.lastChangeMs = input.nowMs;
    this.floorSinceMs = undefined;
    this.lastRaise = { atMs: input.nowMs, before, drawWatts: draw, count: raised.length };
    this.afterRaiseWatts = undefined;
    return this.result([], `capped: draw ${w(draw)} < target ${w(targetWatts)}; raised ${raised.join(", ")}`);
  }

  private floorOf(c: CappingContainer): number {
    const floor = Math.max(this.options.floorMinMilli, this.options.floorFraction * c.allocationMilli);
    return Math.min(c.allocationMilli, Math.round(floor));
  }

  private quotaOf(c: CappingContainer): number {
    return this.limits.get(c.containerId) ?? c.allocationMilli;
  }

  private everyoneAtFloor(containers: readonly CappingContainer[]): boolean {
    return containers.every((c) => this.quotaOf(c) <= this.floorOf(c));
  }

  /** Drops every container to its floor; `drawWatts` is the reading that caused it (undefined when stale). */
  private allToFloor(containers: readonly CappingContainer[], nowMs: number, drawWatts: number | undefined): void {
    let removedMilli = 0;
    for (const c of containers) {
      const floor = this.floorOf(c);
      removedMilli += Math.max(0, Math.min(this.quotaOf(c), c.usageMilli ?? Infinity) - floor);
      this.limits.set(c.containerId, floor);
    }
    this.counters.floorDrops += 1;
    this.lastChangeMs = nowMs;
    this.floorSinceMs = nowMs;
    this.lastKillMs = undefined;
    this.lastRaise = undefined;
    this.afterRaiseWatts = undefined;
    this.drop = drawWatts !== undefined && removedMilli > 0 ? { atMs: nowMs, drawWatts, removedMilli } : undefined;
  }

  /** While capped or stale, a container that just arrived starts at its floor. */
  private admitNewAtFloor(containers: readonly CappingContainer[]): void {
    for (const c of containers) if (!this.limits.has(c.containerId)) this.limits.set(c.containerId, this.floorOf(c));
  }

  /**
   * Raises up to containersPerStep containers below their allocation that use their quota, most critical first, then
   * oldest first, each by stepFraction of its allocation, but in all by no more than the estimated headroom (seeds/000,
   * III-D: "the highest frequency that keeps the power below this threshold"): the room to the target, and to the cap
   * less the transient of each container raised, less what the quota containers leave unused would draw if they used
   * it, so that the climb settles under the target instead of overshooting the cap and dropping back to the floor.
   * Without an estimate, full steps. Returns the containers raised.
   */
  private raise(containers: readonly CappingContainer[], toTargetWatts: number, toCapWatts: number): string[] {
    const o = this.options;
    let unusedMilli = 0;
    for (const c of containers)
      if (!this.killed.has(c.containerId) && c.usageMilli !== undefined)
        unusedMilli += Math.max(0, this.quotaOf(c) - c.usageMilli);
    const order = containers
      .filter(
        (c) =>
          !this.killed.has(c.containerId) &&
          this.quotaOf(c) < c.allocationMilli &&
          (c.usageMilli === undefined || c.usageMilli >= USED_QUOTA_FRACTION * this.quotaOf(c)),
      )
      .sort(
        (a, b) =>
          b.criticality - a.criticality ||
          a.startedMs - b.startedMs ||
          (a.containerId < b.containerId ? -1 : a.containerId > b.containerId ? 1 : 0),
      );
    const perMilli = this.wattsPerMilli !== undefined && this.wattsPerMilli > 0 ? this.wattsPerMilli : undefined;
    const raised: string[] = [];
    let milli = 0;
    for (const c of order.slice(0, o.containersPerStep)) {
      const roomWatts = Math.min(toTargetWatts, toCapWatts - (raised.length + 1) * this.transientWattsPerContainer);
      const headroomMilli = perMilli === undefined ? Infinity : roomWatts / perMilli - unusedMilli - milli;
      const quota = this.quotaOf(c);
      const step = Math.floor(Math.min(o.stepFraction * c.allocationMilli, c.allocationMilli - quota, headroomMilli));
      // Steps smaller than the kernel's quota resolution (10 milli-cores: 1 ms per 100 ms) are not worth a write.
      if (step < MIN_RAISE_MILLI && quota + step < c.allocationMilli) break;
      if (step <= 0) break;
      this.limits.set(c.containerId, quota + step);
      milli += step;
      raised.push(c.containerId);
    }
    return raised;
  }

  /** Whether this tick's reading ran entirely at the current quotas (see lastChangeMs). */
  private readingIsClean(): boolean {
    return this.windowStartMs !== undefined && this.windowStartMs > this.lastChangeMs;
  }

  /** On the first clean reading after a raise: how much the reading that spanned the raise exceeded it. */
  private learnTransient(cleanWatts: number): void {
    if (this.afterRaiseWatts === undefined || !this.lastRaise) return;
    const perContainer = (this.afterRaiseWatts - cleanWatts) / this.lastRaise.count;
    this.transientWattsPerContainer = Math.max(this.transientWattsPerContainer, perContainer);
    this.afterRaiseWatts = undefined;
  }

  /** Puts back the quotas the last raise changed (a container raised to its allocation included). */
  private undoRaise(nowMs: number): void {
    const raise = this.lastRaise;
    if (!raise) return;
    for (const id of [...this.limits.keys()]) {
      const before = raise.before.get(id);
      if (before !== undefined) this.limits.set(id, before);
    }
    this.lastRaise = undefined;
    this.afterRaiseWatts = undefined;
    this.lastChangeMs = nowMs;
  }

  /** Measures watts per milli-core from the readings at the floor that follow a drop (before any raise or kill). */
  private updateEstimate(nowMs: number, drawWatts: number): void {
    if (!this.drop || this.floorSinceMs === undefined || this.lastKillMs !== undefined || nowMs <= this.drop.atMs)
      return;
    const saved = this.drop.drawWatts - drawWatts;
    if (saved > 0) this.wattsPerMilli = saved / this.drop.removedMilli;
  }

  /**
   * The fewest containers, in kill order, whose estimated draw at the floor covers the excess over the budget, at most
   * containersPerStep per step. Each container's share of the draw at the floor is estimated in proportion to its
   * quota (wattsPerMilli x floor); the estimate errs when containers used less than their quota, hence the per-step
   * bound. Without a usable estimate, one container per step.
   */
  private chooseKills(containers: readonly CappingContainer[], drawWatts: number, budgetWatts: number): string[] {
    const order = containers
      .filter((c) => !this.killed.has(c.containerId))
      .sort((a, b) => {
        if (a.isAm !== b.isAm) return a.isAm ? 1 : -1;
        return (
          a.criticality - b.criticality ||
          b.startedMs - a.startedMs ||
          (a.containerId < b.containerId ? 1 : a.containerId > b.containerId ? -1 : 0)
        );
      });
    const perWatt = this.wattsPerMilli ?? 0;
    const excess = drawWatts - budgetWatts;
    const kills: string[] = [];
    let freed = 0;
    for (const c of order) {
      if (kills.length >= this.options.containersPerStep) break;
      kills.push(c.containerId);
      freed += perWatt * this.quotaOf(c);
      if (perWatt <= 0 || freed >= excess) break;
    }
    return kills;
  }

  private toUncapped(): void {
    this.state = "uncapped";
    this.limits.clear();
    this.floorSinceMs = undefined;
    this.quietSinceMs = undefined;
    this.lastKillMs = undefined;
    this.drop = undefined;
    this.wattsPerMilli = undefined;
    this.lastRaise = undefined;
    this.afterRaiseWatts = undefined;
    this.transientWattsPerContainer = 0;
  }

  private floorText(input: CappingInput): string {
    return `${input.containers.length} container${input.containers.length === 1 ? "" : "s"} at the floor`;
  }

  private result(kills: string[], reason: string): CappingDecision {
    // Only containers below their allocation are listed: absent means unthrottled.
    const limitsMilli = new Map<string, number>();
    if (this.state !== "uncapped")
      for (const [id, limit] of this.limits)
        if (limit < (this.allocations.get(id) ?? Infinity)) limitsMilli.set(id, limit);
    return { state: this.state, limitsMilli, kills, reason };
  }
}

/** Raises smaller than this are skipped (the CFS quota's resolution at a 100 ms period is 10 milli-cores). */
const MIN_RAISE_MILLI = 10;
/** A container using at least this share of its quota is held back by it (and worth raising). */
const USED_QUOTA_FRACTION = 0.8;

function w(watts: number): string {
  return `${watts.toFixed(1)} W`;
}
