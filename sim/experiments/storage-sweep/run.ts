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
import { generateCluster } from "../../cluster-gen.js";
import { chooseTraces, RunTracker } from "../../experiments.js";
import type { SimCluster, TraceSource } from "../../model.js";
import { formatNumber, STORAGE_PLACEMENTS } from "../../report.js";
import type { StorageResult } from "../../results.js";
import { runStorage } from "../storage/index.js";
import { STORAGE_SLOT_MS, resolveStorageSweepOptions } from "./options.js";
import type { ResolvedStorageSweepOptions, StorageSweepOptions } from "./options.js";
import { renderStorageSweepReport, writeStorageSweepReport } from "./report.js";
import type { StorageSweepReport } from "./report.js";
import { summarizeStorageSweep } from "./cells.js";
import type { StorageSweepCell, StorageSweepRun } from "./cells.js";

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

/** Every field of a StorageResult: the compiler names one added to the type and missing here. */
const STORAGE_RESULT_FIELDS: Readonly<Record<keyof StorageResult, true>> = {
  level: true,
  servers: true,
  days: true,
  seed: true,
  traces: true,
  placement: true,
  replication: true,
  blocks: true,
  blocksLost: true,
  accesses: true,
  unavailableAccesses: true,
  reimages: true,
  reReplicationBytes: true,
  reReplicationMBps: true,
  events: true,
  wallMs: true,
};

/** The shared figures of a storage run (what the sweep keeps of each; the simulator's extra counters are dropped). */
function storageResultOf(r: StorageResult): StorageResult {
  const kept: Partial<Record<keyof StorageResult, unknown>> = {};
  for (const k of Object.keys(STORAGE_RESULT_FIELDS) as (keyof StorageResult)[]) kept[k] = r[k];
  return kept as StorageResult;
}
