/**
 * The storage sweep (issue 13, "The regime, swept"): the storage experiment (`runStorage`, seeds/004 section 4.2) run
 * over re-replication bandwidth x blocks per server x seeds, with both replica placements at each replication factor
 * and one utilization level. Each seed is a cluster of its own (tenants, racks, reimages) and every random choice of
 * its runs, so the spread between seeds is the spread a reader should expect from another cluster of the same kind.
 *
 * Per cell it reports the fraction of blocks lost for stock and diversity placement, the stock/diversity ratio of those
 * fractions with a confidence interval over the seeds (`lossRatio`), and the fraction of accesses refused because every
 * replica's primary was busy.
 */
import { performance } from "node:perf_hooks";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { HarvestError } from "../../../common/errors.js";
import { generateCluster } from "../../cluster-gen.js";
import { chooseTraces, RunTracker } from "../../experiments.js";
import type { ExperimentEvent } from "../../experiments.js";
import { UTILIZATION_LEVELS } from "../../model.js";
import type { SimCluster, TraceSource, UtilizationLevel } from "../../model.js";
import {
  assembleReport,
  eventsPerSecond,
  formatFraction,
  formatNumber,
  markdownTable,
  renderBarPanels,
  STORAGE_PLACEMENTS,
  toCsv,
  writeReport,
} from "../../report.js";
import type { PlotPanel, RenderedReport } from "../../report.js";
import type { StoragePlacement, StorageResult } from "../../results.js";
import { runStorage } from "../storage/run.js";

/** Confidence of the ratio's interval. */
export const RATIO_CONFIDENCE = 0.95;

/**
 * Utilization resolution of the sweep's clusters: hourly, the storage experiment's (`STORAGE_SLOT_MS` in
 * sim/experiments.ts), so that a sweep cell and `harvest sim storage` at the same size see the same cluster.
 */
const STORAGE_SLOT_MS = 3_600_000;

/** Options of {@link runStorageSweep}; {@link resolveStorageSweepOptions} fills the defaults and validates. */
export interface StorageSweepOptions {
  /**
   * Servers in each seed's cluster. The default fits the whole default sweep (120 runs) in about 4 minutes on a
   * 2-core machine: a run's cost grows faster than the blocks each server stores, so 1,000 servers take twice that.
   * @default 500
   */
  servers?: number;
  /**
   * Simulated days of each run (after the 30 days of history the placement policies learn from).
   * @default 365
   */
  days?: number;
  /**
   * Seeds, each a cluster of its own and the random choices of its runs; at least 3, since the interval is estimated
   * from the spread between them.
   * @default [1, 2, 3, 4, 5]
   */
  seeds?: readonly number[];
  /**
   * Re-replication bandwidth each server gives, MB/s (10^6 bytes).
   * @default [5, 10, 20, 50]
   */
  reReplicationMBps?: readonly number[];
  /**
   * Blocks written per server over the run (`runStorage`'s `blocksPerDay` = this x servers / days); 30 is the
   * storage experiment's default.
   * @default [30, 60, 120]
   */
  blocksPerServer?: readonly number[];
  /**
   * Average primary utilization of every seed's cluster.
   * @default "high"
   */
  level?: UtilizationLevel;
  /**
   * Replication factors, each run with both placements.
   * @default [3]
   */
  replications?: readonly number[];
  /**
   * Primary-tenant utilization: generated, or real traces from ../shared/data (falls back to generated, with a note).
   * @default "generated"
   */
  traces?: TraceSource;
  /**
   * Directory to write `storage-sweep.md`, `.csv`, `-runs.csv` and `-data-loss.svg` to; none: render only.
   * @default undefined
   */
  out?: string;
  /**
   * The command line shown in the report.
   * @default undefined
   */
  command?: string;
  /**
   * Told about progress, notes and finished runs.
   * @default undefined
   */
  onProgress?: (e: ExperimentEvent) => void;
}

/** {@link StorageSweepOptions} with every default filled in (lists deduplicated and sorted). */
export type ResolvedStorageSweepOptions = Required<Omit<StorageSweepOptions, "out" | "command" | "onProgress">> &
  Pick<StorageSweepOptions, "out" | "command" | "onProgress">;

/** The defaults of {@link StorageSweepOptions}. */
export const STORAGE_SWEEP_DEFAULTS = Object.freeze({
  servers: 500,
  days: 365,
  seeds: Object.freeze([1, 2, 3, 4, 5]),
  reReplicationMBps: Object.freeze([5, 10, 20, 50]),
  blocksPerServer: Object.freeze([30, 60, 120]),
  level: "high" as UtilizationLevel,
  replications: Object.freeze([3]),
  traces: "generated" as TraceSource,
});

function invalid(field: string, why: string): never {
  throw new HarvestError("INVALID_ARGUMENT", `storage sweep option ${field} ${why}`, { details: { field } });
}

/** `values` deduplicated and ascending, each checked by `ok` (INVALID_ARGUMENT naming `field` and `what`). */
function checkedList(field: string, values: readonly number[], ok: (v: number) => boolean, what: string): number[] {
  if (values.length === 0) invalid(field, "must name at least one value");
  for (const v of values) if (!ok(v)) invalid(field, `has ${v}; use ${what}`);
  return [...new Set(values)].sort((a, b) => a - b);
}

/** Fills the defaults into `o` and validates every field (INVALID_ARGUMENT naming it). */
export function resolveStorageSweepOptions(o: StorageSweepOptions = {}): ResolvedStorageSweepOptions {
  const d = STORAGE_SWEEP_DEFAULTS;
  const servers = o.servers ?? d.servers;
  if (!Number.isSafeInteger(servers) || servers < 1) invalid("servers", `must be an integer >= 1 (got ${servers})`);
  const days = o.days ?? d.days;
  if (!Number.isSafeInteger(days) || days < 1) invalid("days", `must be an integer >= 1 (got ${days})`);
  const seeds = checkedList(
    "seeds",
    o.seeds ?? d.seeds,
    (v) => Number.isInteger(v) && v >= 0 && v <= 0xffffffff,
    "integers in 0..4294967295",
  );
  // The interval's width comes from the spread between seeds: two seeds leave one degree of freedom per placement.
  if (seeds.length < 3) invalid("seeds", `must name at least 3 distinct seeds (got ${seeds.length})`);
  const level = o.level ?? d.level;
  if (!UTILIZATION_LEVELS.includes(level))
    invalid("level", `must be one of ${UTILIZATION_LEVELS.join(", ")} (got ${String(level)})`);
  const traces = o.traces ?? d.traces;
  if (traces !== "generated" && traces !== "real") invalid("traces", `must be "generated" or "real" (got ${traces})`);
  return {
    servers,
    days,
    seeds,
    reReplicationMBps: checkedList(
      "reReplicationMBps",
      o.reReplicationMBps ?? d.reReplicationMBps,
      (v) => Number.isFinite(v) && v > 0,
      "numbers > 0 (MB/s)",
    ),
    blocksPerServer: checkedList(
      "blocksPerServer",
      o.blocksPerServer ?? d.blocksPerServer,
      (v) => Number.isFinite(v) && v > 0,
      "numbers > 0",
    ),
    level,
    replications: checkedList(
      "replications",
      o.replications ?? d.replications,
      (v) => Number.isInteger(v) && v >= 1 && v <= 10,
      "factors in 1..10",
    ),
    traces,
    ...(o.out !== undefined ? { out: o.out } : {}),
    ...(o.command !== undefined ? { command: o.command } : {}),
    ...(o.onProgress !== undefined ? { onProgress: o.onProgress } : {}),
  };
}

// ------------------------------------------------------------------------------------------------ the ratio

/** One seed's losses of one placement in one cell. */
export interface SeedLoss {
  /** Blocks lost. */
  lost: number;
  /** Blocks written. */
  blocks: number;
}

/**
 * The stock/diversity ratio of lost-block fractions over a cell's seeds, with its interval:
 * - "estimate": both placements lost blocks; `low` <= `estimate` <= `high`, all finite.
 * - "lower-bound": only stock lost blocks (diversity lost 0 in every seed): `estimate` and `high` are Infinity, and
 *   the data say only that the ratio is above `low`.
 * - "upper-bound": only diversity lost blocks: `estimate` and `low` are 0, the ratio is below `high`.
 * - "none": neither lost a block: no ratio (`estimate` NaN, interval [0, Infinity]).
 */
export interface LossRatio {
  kind: "estimate" | "lower-bound" | "upper-bound" | "none";
  /** (stock lost / stock blocks) / (diversity lost / diversity blocks), each pooled over the seeds. */
  estimate: number;
  low: number;
  high: number;
  /** The confidence of [low, high]. */
  confidence: number;
  /**
   * Each placement's seed-to-seed overdispersion φ >= 1, which widened the interval: the Pearson chi-square of its
   * per-seed counts around its pooled rate over k - 1 degrees of freedom; 1 when they vary no more than Poisson counts,
   * and 1 for a placement that lost nothing (zero counts show no dispersion: see {@link lossRatio}).
   */
  dispersion: { stock: number; diversity: number };
}

/**
 * The ratio of two placements' lost-block fractions and its interval, from each seed's losses (`stock[i]` and
 * `diversity[i]` are the same seed's).
 *
 * Lost blocks are counted as Poisson events with the blocks written as exposure; conditional on the total lost,
 * stock's share is binomial, so the exact (Clopper-Pearson) interval of that share gives the interval of the ratio of
 * rates. Losses come in bursts (one correlated reimage destroys many blocks at once) and clusters differ, so the seeds
 * vary more than Poisson counts: each placement's count and exposure are first divided by its dispersion φ
 * (quasi-Poisson: the information of S lost blocks is that of S / φ independent ones), which widens the interval and
 * leaves the estimate alone. A zero count takes no continuity correction: its side of the interval is unbounded.
 * When diversity lost nothing its φ is 1, i.e. the bound assumes its losses, had there been any, would have come one
 * at a time; had they come in bursts of b blocks, the lower bound would be about b times lower.
 */
export function lossRatio(
  stock: readonly SeedLoss[],
  diversity: readonly SeedLoss[],
  confidence = RATIO_CONFIDENCE,
): LossRatio {
  if (!(confidence > 0 && confidence < 1)) invalid("confidence", `must be in (0, 1) (got ${confidence})`);
  const total = (xs: readonly SeedLoss[]) => ({
    lost: xs.reduce((a, x) => a + x.lost, 0),
    blocks: xs.reduce((a, x) => a + x.blocks, 0),
  });
  const s = total(stock);
  const d = total(diversity);
  const dispersion = { stock: overdispersion(stock), diversity: overdispersion(diversity) };
  // Effective counts and exposures: x lost of stock's sBlocks, y of diversity's dBlocks.
  const x = s.lost / dispersion.stock;
  const y = d.lost / dispersion.diversity;
  const exposure = d.blocks / dispersion.diversity / (s.blocks / dispersion.stock);
  // The ratio of rates from stock's share p of the effective losses: p / (1 - p) x the exposures' ratio.
  const ratioOf = (p: number, oneMinusP: number): number => (oneMinusP > 0 ? (p / oneMinusP) * exposure : Infinity);
  const base = { confidence, dispersion };
  if (s.lost === 0 && d.lost === 0) return { kind: "none", estimate: NaN, low: 0, high: Infinity, ...base };
  const tail = (1 - confidence) / 2;
  if (d.lost === 0) {
    // Clopper-Pearson with every loss stock's: p_low = tail^(1/x), 1 - p_low = -expm1(ln(tail) / x).
    const low = ratioOf(Math.exp(Math.log(tail) / x), -Math.expm1(Math.log(tail) / x));
    return { kind: "lower-bound", estimate: Infinity, low, high: Infinity, ...base };
  }
  if (s.lost === 0) {
    const high = ratioOf(-Math.expm1(Math.log(tail) / y), Math.exp(Math.log(tail) / y));
    return { kind: "upper-bound", estimate: 0, low: 0, high, ...base };
  }
  const pLow = betaQuantile(tail, x, y + 1);
  const pHigh = betaQuantile(1 - tail, x + 1, y);
  const estimate = s.lost / s.blocks / (d.lost / d.blocks);
  return { kind: "estimate", estimate, low: ratioOf(pLow, 1 - pLow), high: ratioOf(pHigh, 1 - pHigh), ...base };
}

/**
 * Pearson chi-square of per-seed counts around their pooled rate over k - 1 degrees of freedom; at least 1 (never
 * narrower than Poisson), and 1 with fewer than 2 seeds or no loss at all.
 */
function overdispersion(seeds: readonly SeedLoss[]): number {
  const lost = seeds.reduce((a, x) => a + x.lost, 0);
  const blocks = seeds.reduce((a, x) => a + x.blocks, 0);
  if (seeds.length < 2 || lost === 0 || blocks === 0) return 1;
  const rate = lost / blocks;
  let chi2 = 0;
  for (const x of seeds) {
    const expected = x.blocks * rate;
    if (expected > 0) chi2 += (x.lost - expected) ** 2 / expected;
  }
  return Math.max(1, chi2 / (seeds.length - 1));
}

/** ln Γ(x) for x > 0 (Lanczos, g = 7, 9 terms: about 15 significant digits). */
function logGamma(x: number): number {
  const c = [
    0.99999999999980993, 676.5203681218851, -1259.1392167224028, 771.32342877765313, -176.61502916214059,
    12.507343278686905, -0.13857109526572012, 9.9843695780195716e-6, 1.5056327351493116e-7,
  ];
  if (x < 0.5) return Math.log(Math.PI / Math.sin(Math.PI * x)) - logGamma(1 - x);
  const z = x - 1;
  let a = c[0]!;
  for (let i = 1; i < 9; i++) a += c[i]! / (z + i);
  const t = z + 7.5;
  return 0.5 * Math.log(2 * Math.PI) + (z + 0.5) * Math.log(t) - t + Math.log(a);
}

/** The regularized incomplete beta function I_x(a, b), a, b > 0 (Numerical Recipes' continued fraction). */
export function incompleteBeta(x: number, a: number, b: number): number {
  if (x <= 0) return 0;
  if (x >= 1) return 1;
  const front = Math.exp(a * Math.log(x) + b * Math.log1p(-x) - logGamma(a) - logGamma(b) + logGamma(a + b));
  // The fraction converges quickly below (a + 1) / (a + b + 2); above it, I_x(a, b) = 1 - I_(1-x)(b, a).
  if (x < (a + 1) / (a + b + 2)) return (front * betaFraction(x, a, b)) / a;
  return 1 - (front * betaFraction(1 - x, b, a)) / b;
}

/** The continued fraction of the incomplete beta function (modified Lentz). */
function betaFraction(x: number, a: number, b: number): number {
  const tiny = 1e-300;
  const guard = (v: number): number => (Math.abs(v) < tiny ? tiny : v);
  let c = 1;
  let d = 1 / guard(1 - ((a + b) * x) / (a + 1));
  let h = d;
  for (let m = 1; m <= 100_000; m++) {
    const even = (m * (b - m) * x) / ((a + 2 * m - 1) * (a + 2 * m));
    d = 1 / guard(1 + even * d);
    c = guard(1 + even / c);
    h *= d * c;
    const odd = (-(a + m) * (a + b + m) * x) / ((a + 2 * m) * (a + 2 * m + 1));
    d = 1 / guard(1 + odd * d);
    c = guard(1 + odd / c);
    const step = d * c;
    h *= step;
    if (Math.abs(step - 1) < 1e-15) break;
  }
  return h;
}

/** The p in (0, 1) with I_p(a, b) = q, by bisection (I is increasing in p). */
export function betaQuantile(q: number, a: number, b: number): number {
  let lo = 0;
  let hi = 1;
  for (let i = 0; i < 200; i++) {
    const mid = (lo + hi) / 2;
    if (mid === lo || mid === hi) break;
    if (incompleteBeta(mid, a, b) < q) lo = mid;
    else hi = mid;
  }
  return (lo + hi) / 2;
}

// ------------------------------------------------------------------------------------------------ cells

/** One run of the sweep: a storage run and the cell it belongs to. */
export interface StorageSweepRun extends StorageResult {
  /** Blocks written per server over the run (the cell's). */
  blocksPerServer: number;
}

/** One placement's figures in a cell, pooled over its seeds. */
export interface PlacementFigures {
  /** Blocks lost and written per seed, in the cell's seed order. */
  bySeed: SeedLoss[];
  lost: number;
  blocks: number;
  /** lost / blocks: the mean over seeds of the lost fraction, each seed weighted by the blocks it wrote. */
  lostFraction: number;
  accesses: number;
  unavailableAccesses: number;
  /** unavailableAccesses / accesses, pooled over seeds. */
  unavailableFraction: number;
}

/** One cell of the sweep: a replication factor, blocks per server and bandwidth, over every seed. */
export interface StorageSweepCell {
  replication: number;
  blocksPerServer: number;
  reReplicationMBps: number;
  seeds: number[];
  stock: PlacementFigures;
  diversity: PlacementFigures;
  /** Stock's lost fraction over diversity's, with its interval. */
  ratio: LossRatio;
}

/** The key of a cell. */
function cellKey(replication: number, blocksPerServer: number, mbps: number): string {
  return `${replication}/${blocksPerServer}/${mbps}`;
}

function figures(runs: readonly StorageSweepRun[]): PlacementFigures {
  const sum = (f: (r: StorageSweepRun) => number): number => runs.reduce((a, r) => a + f(r), 0);
  const lost = sum((r) => r.blocksLost);
  const blocks = sum((r) => r.blocks);
  const accesses = sum((r) => r.accesses);
  const unavailableAccesses = sum((r) => r.unavailableAccesses);
  return {
    bySeed: runs.map((r) => ({ lost: r.blocksLost, blocks: r.blocks })),
    lost,
    blocks,
    lostFraction: blocks > 0 ? lost / blocks : NaN,
    accesses,
    unavailableAccesses,
    unavailableFraction: accesses > 0 ? unavailableAccesses / accesses : NaN,
  };
}

/**
 * The sweep's cells from its runs, ordered by replication, blocks per server, then bandwidth. A cell takes the seeds
 * both placements ran with (a run missing for either placement leaves that seed out of the cell).
 */
export function summarizeStorageSweep(runs: readonly StorageSweepRun[]): StorageSweepCell[] {
  const byCell = new Map<string, Map<StoragePlacement, Map<number, StorageSweepRun>>>();
  for (const r of runs) {
    const key = cellKey(r.replication, r.blocksPerServer, r.reReplicationMBps);
    const cell = byCell.get(key) ?? new Map<StoragePlacement, Map<number, StorageSweepRun>>();
    byCell.set(key, cell);
    const bySeed = cell.get(r.placement) ?? new Map<number, StorageSweepRun>();
    cell.set(r.placement, bySeed);
    bySeed.set(r.seed, r);
  }
  const cells: StorageSweepCell[] = [];
  for (const cell of byCell.values()) {
    const stock = cell.get("stock") ?? new Map<number, StorageSweepRun>();
    const diversity = cell.get("diversity") ?? new Map<number, StorageSweepRun>();
    const seeds = [...stock.keys()].filter((s) => diversity.has(s)).sort((a, b) => a - b);
    if (seeds.length === 0) continue;
    const first = stock.get(seeds[0]!)!;
    const s = figures(seeds.map((seed) => stock.get(seed)!));
    const d = figures(seeds.map((seed) => diversity.get(seed)!));
    cells.push({
      replication: first.replication,
      blocksPerServer: first.blocksPerServer,
      reReplicationMBps: first.reReplicationMBps,
      seeds,
      stock: s,
      diversity: d,
      ratio: lossRatio(s.bySeed, d.bySeed),
    });
  }
  return cells.sort(
    (a, b) =>
      a.replication - b.replication ||
      a.blocksPerServer - b.blocksPerServer ||
      a.reReplicationMBps - b.reReplicationMBps,
  );
}

// ------------------------------------------------------------------------------------------------ running

/** What the sweep produced. */
export interface StorageSweepOutcome {
  /** The options it ran with (callbacks left out). */
  options: Omit<ResolvedStorageSweepOptions, "onProgress">;
  runs: StorageSweepRun[];
  cells: StorageSweepCell[];
  report: StorageSweepReport;
  /** Files written (empty without `out`). */
  files: string[];
  /** The traces actually used ("generated" when "real" was asked for but ../shared/data is absent). */
  traces: TraceSource;
  /** Wall-clock time of the whole sweep, cluster generation included. */
  wallMs: number;
}

/**
 * Runs the sweep: for each seed, generates its cluster once, then runs every replication x blocks per server x
 * bandwidth x placement on it (so stock and diversity, and every bandwidth, see the same tenants and reimages).
 */
export async function runStorageSweep(options: StorageSweepOptions = {}): Promise<StorageSweepOutcome> {
  const o = resolveStorageSweepOptions(options);
  const started = performance.now();
  const runsPerSeed =
    o.replications.length * o.blocksPerServer.length * o.reReplicationMBps.length * STORAGE_PLACEMENTS.length;
  const tracker = new RunTracker(o.seeds.length * runsPerSeed, o.onProgress);
  const traces = await chooseTraces(o.traces, (m) => tracker.note(m));
  const runs: StorageSweepRun[] = [];
  for (const seed of o.seeds) {
    tracker.note(
      `seed ${seed}: generating the ${o.level}-utilization cluster: ${formatNumber(o.servers)} servers, ` +
        `${o.days} days (${traces.source} traces)`,
    );
    const cluster: SimCluster = generateCluster({
      servers: o.servers,
      level: o.level,
      days: o.days,
      slotMs: STORAGE_SLOT_MS,
      seed,
      source: traces.source,
      ...(traces.templates ? { templates: traces.templates } : {}),
    });
    for (const replication of o.replications)
      for (const blocksPerServer of o.blocksPerServer)
        for (const mbps of o.reReplicationMBps)
          for (const placement of STORAGE_PLACEMENTS) {
            const label = `seed ${seed} r${replication} ${blocksPerServer} blocks/server ${mbps} MB/s ${placement}`;
            const result = tracker.track(label, cluster.historyMs, (onProgress) =>
              runStorage(cluster, {
                placement,
                replication,
                seed,
                blocksPerDay: (blocksPerServer * o.servers) / o.days,
                reReplicationBytesPerSec: mbps * 1e6,
                onProgress,
              }),
            );
            runs.push({ ...storageResultOf(result), blocksPerServer });
          }
  }
  const cells = summarizeStorageSweep(runs);
  const wallMs = performance.now() - started;
  const { onProgress: _onProgress, ...shown } = o;
  const report = renderStorageSweepReport(cells, runs, {
    options: shown,
    traces: traces.source,
    wallMs,
    ...(o.command !== undefined ? { command: o.command } : {}),
  });
  const files = o.out !== undefined ? writeStorageSweepReport(o.out, report) : [];
  return { options: shown, runs, cells, report, files, traces: traces.source, wallMs };
}

/** The shared figures of a storage run (what the sweep keeps of each; the simulator's extra counters are dropped). */
function storageResultOf(r: StorageResult): StorageResult {
  return {
    level: r.level,
    servers: r.servers,
    days: r.days,
    seed: r.seed,
    traces: r.traces,
    placement: r.placement,
    replication: r.replication,
    blocks: r.blocks,
    blocksLost: r.blocksLost,
    accesses: r.accesses,
    unavailableAccesses: r.unavailableAccesses,
    reimages: r.reimages,
    reReplicationBytes: r.reReplicationBytes,
    reReplicationMBps: r.reReplicationMBps,
    events: r.events,
    wallMs: r.wallMs,
  };
}

// ------------------------------------------------------------------------------------------------ the report

/** The sweep's report: the rendered report (cells CSV) and a CSV of every run beside it. */
export interface StorageSweepReport extends RenderedReport {
  /** Every run, one row each (written as `<name>-runs.csv`). */
  runsCsv: string;
}

/** What the sweep's report says about how it was made. */
export interface StorageSweepReportContext {
  options: Omit<ResolvedStorageSweepOptions, "onProgress">;
  traces: TraceSource;
  /** Wall time of the sweep, shown in the report. */
  wallMs: number;
  /** @default none */
  command?: string;
  /** @default "storage-sweep" */
  name?: string;
}

/** A setting as typed: up to three decimals, thousands separators ("0.5", "1,000"). */
function setting(v: number): string {
  return v.toLocaleString("en-US", { maximumFractionDigits: 3 });
}

/** A ratio with three significant digits ("12.3", "1,234", "0.0456"). */
export function formatRatio(v: number): string {
  if (!Number.isFinite(v)) return v > 0 ? "∞" : "-";
  if (v >= 1000) return formatNumber(v, 0);
  return Number(v.toPrecision(3)).toString();
}

/** The ratio as a table cell: "12.3 [4.1, 37]", "> 3.6", "< 0.5" or "no losses". */
export function formatLossRatio(r: LossRatio): string {
  switch (r.kind) {
    case "estimate":
      return `${formatRatio(r.estimate)} [${formatRatio(r.low)}, ${formatRatio(r.high)}]`;
    case "lower-bound":
      return `> ${formatRatio(r.low)}`;
    case "upper-bound":
      return `< ${formatRatio(r.high)}`;
    case "none":
      return "no losses";
  }
}

/** The cells' table of one replication factor. */
function cellsTable(cells: readonly StorageSweepCell[]): string {
  const right = (header: string) => ({ header, align: "right" as const });
  const pct = `${Math.round(RATIO_CONFIDENCE * 100)}%`;
  return markdownTable(
    [
      right("blocks/server"),
      right("MB/s"),
      right("stock lost"),
      right("diversity lost"),
      right("blocks lost (stock / diversity)"),
      right(`stock / diversity (${pct} interval)`),
      right("φ (stock / diversity)"),
      right("stock unavailable"),
      right("diversity unavailable"),
    ],
    cells.map((c) => [
      setting(c.blocksPerServer),
      setting(c.reReplicationMBps),
      formatFraction(c.stock.lostFraction),
      formatFraction(c.diversity.lostFraction),
      `${formatNumber(c.stock.lost)} / ${formatNumber(c.diversity.lost)}`,
      formatLossRatio(c.ratio),
      `${formatNumber(c.ratio.dispersion.stock, 1)} / ${formatNumber(c.ratio.dispersion.diversity, 1)}`,
      formatFraction(c.stock.unavailableFraction),
      formatFraction(c.diversity.unavailableFraction),
    ]),
  );
}

/** The summary: a table per replication factor, then how to read it. */
export function storageSweepSummaryMarkdown(cells: readonly StorageSweepCell[]): string {
  const replications = [...new Set(cells.map((c) => c.replication))].sort((a, b) => a - b);
  const pct = `${Math.round(RATIO_CONFIDENCE * 100)}%`;
  const zeroCells = cells.filter((c) => c.ratio.kind === "lower-bound").length;
  return [
    ...replications.flatMap((r) => [
      `Replication ${r}: share of blocks lost (every replica destroyed before re-replication restored one) and of ` +
        "accesses refused (every replica's primary busy), pooled over the seeds:",
      "",
      cellsTable(cells.filter((c) => c.replication === r)),
      "",
    ]),
    "How to read the ratio:",
    "",
    `- "stock / diversity" is stock's lost fraction over diversity's, each pooled over the seeds (the mean of the ` +
      `per-seed fractions weighted by blocks written), with its ${pct} interval in brackets.`,
    "- The interval: lost blocks are counted as Poisson events with the blocks written as exposure; given the total " +
      "lost, stock's share of it is binomial, and the exact (Clopper-Pearson) interval of that share is turned into " +
      "the interval of the ratio.",
    "- The seeds disagree more than Poisson counts would (losses come in bursts, one correlated reimage destroying " +
      "many blocks at once, and each seed is another cluster), so each placement's count and exposure are first " +
      "divided by its overdispersion φ (the Pearson chi-square of its per-seed counts around its pooled rate over " +
      "k - 1 degrees of freedom, at least 1): S lost blocks weigh as S / φ independent ones. This widens the " +
      "interval and leaves the estimate alone.",
    `- Zeros take no continuity correction. When diversity lost no block in any seed the ratio has no upper end and ` +
      `the cell shows its lower ${pct} bound ("> X": stock loses at least X times diversity's share)` +
      `${zeroCells > 0 ? `; ${zeroCells} of ${cells.length} cells are such` : ""}. Zero counts show no dispersion, so ` +
      "such a bound takes diversity's φ as 1: it assumes diversity's losses, had there been any, would have come one " +
      'at a time; bursts of b blocks would make it b times lower. "no losses": neither placement lost a block.',
    "",
    "Loss fractions depend on the cluster's size and shape (how large a share of it one environment's correlated " +
      "reimage takes), which each seed draws anew: compare cells of this report with each other, not with the " +
      "10,000-server figures of storage.md.",
  ].join("\n");
}

/** Every run, one row each (seed, cell, placement). */
export function storageSweepRunsMarkdown(runs: readonly StorageSweepRun[]): string {
  const right = (header: string) => ({ header, align: "right" as const });
  return markdownTable(
    [
      right("seed"),
      right("replication"),
      right("blocks/server"),
      right("MB/s"),
      { header: "placement", align: "left" },
      right("blocks"),
      right("blocks lost"),
      right("lost"),
      right("accesses"),
      right("unavailable"),
      right("reimages"),
      right("events"),
      right("wall (s)"),
    ],
    sortRuns(runs).map((r) => [
      String(r.seed),
      String(r.replication),
      setting(r.blocksPerServer),
      setting(r.reReplicationMBps),
      r.placement,
      formatNumber(r.blocks),
      formatNumber(r.blocksLost),
      formatFraction(r.blocks > 0 ? r.blocksLost / r.blocks : NaN),
      formatNumber(r.accesses),
      formatNumber(r.unavailableAccesses),
      formatNumber(r.reimages),
      formatNumber(r.events),
      formatNumber(r.wallMs / 1000, 1),
    ]),
  );
}

function sortRuns(runs: readonly StorageSweepRun[]): StorageSweepRun[] {
  return [...runs].sort(
    (a, b) =>
      a.seed - b.seed ||
      a.replication - b.replication ||
      a.blocksPerServer - b.blocksPerServer ||
      a.reReplicationMBps - b.reReplicationMBps ||
      STORAGE_PLACEMENTS.indexOf(a.placement) - STORAGE_PLACEMENTS.indexOf(b.placement),
  );
}

/** A number for CSV with `digits` significant digits ("" when not finite: see the `ratio_kind` column). */
function precise(v: number, digits = 6): string {
  return Number.isFinite(v) ? Number(v.toPrecision(digits)).toString() : "";
}

/** The cells as CSV, one row each. */
export function storageSweepCsv(cells: readonly StorageSweepCell[]): string {
  return toCsv(
    [
      "replication",
      "blocks_per_server",
      "re_replication_mbps",
      "seeds",
      "stock_blocks",
      "stock_lost",
      "stock_lost_fraction",
      "diversity_blocks",
      "diversity_lost",
      "diversity_lost_fraction",
      "ratio_kind",
      "ratio",
      "ratio_low",
      "ratio_high",
      "ratio_confidence",
      "stock_dispersion",
      "diversity_dispersion",
      "stock_unavailable_fraction",
      "diversity_unavailable_fraction",
    ],
    cells.map((c) => [
      c.replication,
      c.blocksPerServer,
      c.reReplicationMBps,
      c.seeds.join(" "),
      c.stock.blocks,
      c.stock.lost,
      precise(c.stock.lostFraction),
      c.diversity.blocks,
      c.diversity.lost,
      precise(c.diversity.lostFraction),
      c.ratio.kind,
      precise(c.ratio.estimate, 4),
      precise(c.ratio.low, 4),
      precise(c.ratio.high, 4),
      c.ratio.confidence,
      precise(c.ratio.dispersion.stock, 4),
      precise(c.ratio.dispersion.diversity, 4),
      precise(c.stock.unavailableFraction),
      precise(c.diversity.unavailableFraction),
    ]),
  );
}

/** Every run as CSV, one row each. */
export function storageSweepRunsCsv(runs: readonly StorageSweepRun[]): string {
  return toCsv(
    [
      "seed",
      "level",
      "servers",
      "days",
      "traces",
      "replication",
      "blocks_per_server",
      "re_replication_mbps",
      "placement",
      "blocks",
      "blocks_lost",
      "accesses",
      "unavailable_accesses",
      "reimages",
      "re_replication_bytes",
      "events",
      "wall_ms",
      "events_per_s",
    ],
    sortRuns(runs).map((r) => [
      r.seed,
      r.level,
      r.servers,
      r.days,
      r.traces,
      r.replication,
      r.blocksPerServer,
      r.reReplicationMBps,
      r.placement,
      r.blocks,
      r.blocksLost,
      r.accesses,
      r.unavailableAccesses,
      r.reimages,
      Math.round(r.reReplicationBytes),
      r.events,
      Math.round(r.wallMs),
      Math.round(eventsPerSecond(r)),
    ]),
  );
}

/**
 * The plot: blocks lost per million written, by bandwidth and placement, a panel per replication factor and blocks
 * per server (one y scale for all, log when the values span decades).
 */
export function storageSweepPlot(cells: readonly StorageSweepCell[]): { suffix: string; title: string; svg: string } {
  const panels: PlotPanel[] = [];
  const groups = [...new Set(cells.map((c) => `${c.replication}/${c.blocksPerServer}`))];
  const multipleReplications = new Set(cells.map((c) => c.replication)).size > 1;
  for (const group of groups) {
    const row = cells.filter((c) => `${c.replication}/${c.blocksPerServer}` === group);
    const first = row[0]!;
    panels.push({
      title: `${multipleReplications ? `replication ${first.replication}, ` : ""}${setting(first.blocksPerServer)} blocks/server`,
      categories: row.map((c) => `${setting(c.reReplicationMBps)} MB/s`),
      series: STORAGE_PLACEMENTS.map((p) => ({
        name: p,
        values: row.map((c) => (p === "stock" ? c.stock : c.diversity).lostFraction * 1e6),
      })),
    });
  }
  const title = "Blocks lost per million written, by re-replication bandwidth, blocks per server and placement";
  return {
    suffix: "data-loss",
    title,
    svg: renderBarPanels({ title, yName: "blocks lost per million", sharedY: true, panels, log: "auto" }),
  };
}

/** The whole report of a sweep: markdown (tables, method, every run), the cells' CSV, every run's CSV, the plot. */
export function renderStorageSweepReport(
  cells: readonly StorageSweepCell[],
  runs: readonly StorageSweepRun[],
  ctx: StorageSweepReportContext,
): StorageSweepReport {
  const o = ctx.options;
  const list = (xs: readonly number[]): string => xs.map(setting).join(", ");
  const events = runs.reduce((a, r) => a + r.events, 0);
  const setup =
    `${formatNumber(o.servers)} servers, ${o.days} simulated days, ${o.level} utilization, ${ctx.traces} traces; ` +
    `seeds ${o.seeds.join(", ")} (each a cluster of its own); replication ${list(o.replications)}; ` +
    `${list(o.blocksPerServer)} blocks written per server; re-replication ${list(o.reReplicationMBps)} MB/s per ` +
    `server. ${formatNumber(runs.length)} runs, ${formatNumber(events)} simulated events, ` +
    `${formatNumber(ctx.wallMs / 60_000, 1)} minutes of wall time`;
  const title = "Storage sweep: blocks lost by re-replication bandwidth and blocks per server, diversity vs stock";
  const report = assembleReport(ctx.name ?? "storage-sweep", title, setup, ctx, {
    summary: storageSweepSummaryMarkdown(cells),
    runsTable: storageSweepRunsMarkdown(runs),
    csv: storageSweepCsv(cells),
    plots: cells.length > 0 ? [storageSweepPlot(cells)] : [],
  });
  return { ...report, runsCsv: storageSweepRunsCsv(runs) };
}

/** Writes `<name>.md`, `<name>.csv`, `<name>-runs.csv` and the plot into `outDir` (created if needed). */
export function writeStorageSweepReport(outDir: string, report: StorageSweepReport): string[] {
  const files = writeReport(outDir, report);
  const runsFile = join(outDir, `${report.name}-runs.csv`);
  writeFileSync(runsFile, report.runsCsv);
  return [...files, runsFile];
}
