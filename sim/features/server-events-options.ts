/**
 * The options of whole-server reclaims and planned reimages (with their drains) in the compute simulation, their
 * resolvers, and the seeded draw of server events.
 */
import { SeededRng } from "../../common/rng.js";
import { resolveDrainOptions } from "../../resourcemanager/index.js";
import type { DrainOptions } from "../../resourcemanager/index.js";
import { Stream, streamSeed } from "../engine/streams.js";
import { DAY_MS } from "../model.js";
import type { SimCluster } from "../model.js";
import { checkAboveZero, checkAtLeastZero, checkExperimentTime, invalidArgument, resolvedAs } from "../options.js";

/** Whose options the messages name: INVALID_ARGUMENT "compute option <field> ...". */
export const WHAT = "compute";

/** Something that happens to one whole server (a reclaim, a planned reimage): server index and simulated time. */
export interface ServerEvent {
  readonly server: number;
  readonly atMs: number;
}

/**
 * Whole-server reclaims: a primary's spike to the whole server, or a reimage or maintenance without notice. Each takes
 * one server for `durationMs`: every secondary container there is killed at once (a task re-runs, a job manager's kill
 * takes its job's running tasks, as in the yield step) and the server gets nothing until it is back.
 */
export interface ReclaimOptions {
  /**
   * Reclaims drawn at random (a Poisson process of this rate per server, each on a server drawn uniformly) from the
   * run's own random stream (`Stream.Reclaims`), so every policy of a comparison sees the same reclaims.
   * @default 0
   */
  perServerPerDay?: number;
  /**
   * Reclaims at given times and servers (tests, replayed traces), besides the drawn ones.
   * @default []
   */
  events?: readonly ServerEvent[];
  /** How long each reclaim keeps the server, ms. */
  durationMs: number;
  /**
   * Which server a reclaim takes: "random", the drawn one (a primary's spike, a failure: nobody chooses); or
   * "emptiest", the server with the fewest secondary cores on it at that moment (ties: the drawn one, then the lowest
   * index), among those not already away: maintenance, a reimage or a large primary deployment that may pick its
   * server, which is where empty servers pay (seeds/002: empty hosts for maintenance and large VMs).
   * @default "random"
   */
  choose?: "random" | "emptiest";
}

/** {@link ReclaimOptions} resolved: every reclaim of the run, ascending by time. */
export interface ResolvedReclaimOptions {
  perServerPerDay: number;
  durationMs: number;
  choose: "random" | "emptiest";
  events: readonly ServerEvent[];
}

/** How a planned reimage is met: not at all, or by a graceful drain in LARS order or in the baseline's order. */
export type DrainMode = "none" | "lars" | "arbitrary";

/**
 * Planned reimages: each announced `noticeMs` before it. Without a drain ("none") the notice is ignored and at the
 * reimage everything on the server is killed. With one, the server takes nothing new from the notice on and the
 * resource manager's `DrainTracker` steps every `stepIntervalMs`: containers predicted (re-predicted at each step, from
 * their uptime) to end before the reimage are left to finish, the others are preempted at a bounded rate, the longest
 * predicted first (LARS, seeds/002 section 4.4) or the oldest first ("arbitrary"); at the reimage whatever is left is
 * killed. Either way the server is then away for `outageMs`.
 */
export interface PlannedReimageOptions {
  events: readonly ServerEvent[];
  /** @default 1800000 (30 minutes) */
  noticeMs?: number;
  /** @default "lars" */
  drain?: DrainMode;
  /** How long a reimage keeps the server away, ms. @default 1800000 */
  outageMs?: number;
  /** The drain's step (the resource manager's monitor tick), ms. @default 10000 */
  stepIntervalMs?: number;
  /** The drain's rate, burst and margin (`DrainOptions`; its order comes from `drain`). @default {} */
  drainOptions?: Partial<Omit<DrainOptions, "order">>;
}

/** {@link PlannedReimageOptions} resolved. */
export interface ResolvedPlannedReimageOptions {
  events: readonly ServerEvent[];
  noticeMs: number;
  drain: DrainMode;
  outageMs: number;
  stepIntervalMs: number;
  drainOptions: DrainOptions;
}

/** What planned reimages cost in a run (`ComputeRunResult.reimages`). */
export interface ReimageFigures {
  drain: DrainMode;
  /** Reimages that happened within the run. */
  reimages: number;
  /** Containers on a server when its drain started (0 without a drain). */
  containersAtNotice: number;
  /**
   * Containers the drain preempted before the reimage, and the core-hours lost with them: held time x cores of each,
   * and of the running tasks a preempted job manager took with it, wherever they ran.
   */
  preempted: number;
  preemptedCoreHours: number;
  /** Containers on the server at the reimage (all of them without a drain), killed, and the core-hours lost. */
  killedAtReimage: number;
  killedAtReimageCoreHours: number;
  /** Containers of a draining server that ended on their own (tasks that completed, job managers whose job ended). */
  finishedOnTheirOwn: number;
}

/**
 * Whole-server events drawn as a Poisson process of `perServerPerDay` per server over the experiment [historyMs,
 * horizonMs), each on a server drawn uniformly, from the run's random stream `stream` of `seed`; ascending by time.
 */
export function drawServerEvents(
  cluster: SimCluster,
  seed: number,
  stream: number,
  perServerPerDay: number,
): ServerEvent[] {
  const n = cluster.servers.length;
  const events: ServerEvent[] = [];
  if (!(perServerPerDay > 0) || n === 0) return events;
  const rng = new SeededRng(streamSeed(seed, stream));
  const perMs = (perServerPerDay * n) / DAY_MS;
  let t = cluster.historyMs;
  for (;;) {
    t += -Math.log(1 - rng.next()) / perMs;
    if (!(t < cluster.horizonMs)) return events;
    events.push({ server: rng.int(n), atMs: Math.floor(t) });
  }
}

/** Validates explicit server events: known servers, times within the experiment. */
export function checkServerEvents(cluster: SimCluster, field: string, events: readonly ServerEvent[]): void {
  events.forEach((e, i) => {
    if (!(Number.isInteger(e.server) && e.server >= 0 && e.server < cluster.servers.length))
      invalidArgument(
        WHAT,
        `${field}[${i}].server`,
        `must be a server index in [0, ${cluster.servers.length}) (got ${e.server})`,
      );
    checkExperimentTime(WHAT, `${field}[${i}].atMs`, cluster, e.atMs);
  });
}

export function resolveReclaims(cluster: SimCluster, seed: number, r: ReclaimOptions): ResolvedReclaimOptions {
  const perServerPerDay = r.perServerPerDay ?? 0;
  checkAtLeastZero(WHAT, "reclaims.perServerPerDay", perServerPerDay);
  checkAboveZero(WHAT, "reclaims.durationMs", r.durationMs);
  const given = r.events ?? [];
  checkServerEvents(cluster, "reclaims.events", given);
  const events = [...given, ...drawServerEvents(cluster, seed, Stream.Reclaims, perServerPerDay)].sort(
    (a, b) => a.atMs - b.atMs,
  );
  const choose = r.choose ?? "random";
  if (choose !== "random" && choose !== "emptiest")
    invalidArgument(WHAT, "reclaims.choose", `must be "random" or "emptiest"`);
  return { perServerPerDay, durationMs: r.durationMs, choose, events };
}

export function resolveReimages(cluster: SimCluster, p: PlannedReimageOptions): ResolvedPlannedReimageOptions {
  const noticeMs = p.noticeMs ?? 30 * 60_000;
  const drain = p.drain ?? "lars";
  const outageMs = p.outageMs ?? 30 * 60_000;
  const stepIntervalMs = p.stepIntervalMs ?? 10_000;
  checkAtLeastZero(WHAT, "reimages.noticeMs", noticeMs);
  if (drain !== "none" && drain !== "lars" && drain !== "arbitrary")
    invalidArgument(WHAT, "reimages.drain", `must be "none", "lars" or "arbitrary" (got ${String(drain)})`);
  checkAtLeastZero(WHAT, "reimages.outageMs", outageMs);
  checkAboveZero(WHAT, "reimages.stepIntervalMs", stepIntervalMs);
  checkServerEvents(cluster, "reimages.events", p.events);
  const drainOptions = resolvedAs(WHAT, "reimages.drainOptions", () =>
    resolveDrainOptions({ ...(p.drainOptions ?? {}), order: drain === "arbitrary" ? "arbitrary" : "lars" }),
  );
  const events = [...p.events].sort((a, b) => a.atMs - b.atMs);
  return { events, noticeMs, drain, outageMs, stepIntervalMs, drainOptions };
}
