/**
 * The compute sweep (issue 13, "The regime, swept"): the compute experiment (`runCompute`, seeds/004 section 4.1) over
 * offered batch load x average primary utilization, every task placement policy in each cell, under the kill-cost
 * model. Where does history-based placement win, and by how much?
 *
 * One job stream per load, the same at every utilization level: the loads are fractions of the harvestable core-hours
 * of a reference cluster (the same servers and tenants at `referencePct` utilization), so a busier cluster gets the
 * same jobs with less room for them, and each cell reports its effective load (offered over its own harvestable
 * core-hours). Job widths are never rescaled per level. Each level is the same cluster (tenants, servers, patterns)
 * with its tenants' means shifted to the level's average (`generateCluster`'s meanPct).
 *
 * Every seed is a whole sweep (its clusters, job streams and every random choice of its runs); the report shows each
 * cell's mean over the seeds, and on those means issue 44's goals: the share of the gap between stock and the
 * primary-unaware bound that history closes, and whether history never loses to stock (cells.ts, report.ts).
 *
 * Also, at the middle load, the history policy with the classifier's "median-daily-max" peak statistic beside the
 * default p95, to show what a peak that sees recurring bursts changes.
 */
import { DEFAULT_KILL_COST, NO_KILL_COST, runCompute } from "../../compute.js";
import type { KillCostModel } from "../../compute.js";
import { chooseTraces, RunTracker } from "../../experiments.js";
import type { ExperimentReport } from "../../experiments.js";
import { generateJobStream, harvestableCoreMs } from "../../jobs.js";
import type { JobStream } from "../../jobs.js";
import { serverUtilization } from "../../model.js";
import type { SimCluster } from "../../model.js";
import { writeReport } from "../../report.js";
import type { ComputePolicy } from "../../results.js";
import { clusterAtUtilization, jobSource } from "../shared/compute-runs.js";
import type { ChosenTraces } from "../shared/compute-runs.js";
import { summarizeComputeSweep } from "./cells.js";
import type { SweepCell, SweepRun } from "./cells.js";
import { resolveComputeSweepOptions, SWEEP_POLICIES } from "./options.js";
import type { ComputeSweepOptions, PeakVariant, ResolvedComputeSweepOptions } from "./options.js";
import { renderComputeSweepReport } from "./report.js";

export {
  changePct,
  gapClosed,
  meansOf,
  neverLose,
  summarizeComputeSweep,
  SWEEP_GOALS,
  type GapClosed,
  type NeverLose,
  type PolicyMeans,
  type SweepCell,
  type SweepRun,
} from "./cells.js";
export {
  resolveComputeSweepOptions,
  SWEEP_POLICIES,
  type ComputeSweepOptions,
  type PeakVariant,
  type ResolvedComputeSweepOptions,
} from "./options.js";
export { renderComputeSweepReport } from "./report.js";

/** What the sweep produced. */
export interface ComputeSweepOutcome extends ExperimentReport {
  /** Every run, seed by seed. */
  runs: SweepRun[];
  /** Each cell's means over the seeds, with the goals judged on them. */
  cells: SweepCell[];
}

/** The server-weighted average primary utilization of `cluster` over its experiment period, %. */
function measuredUtilization(cluster: SimCluster): number {
  const first = Math.floor(cluster.historyMs / cluster.slotMs);
  const last = Math.ceil(cluster.horizonMs / cluster.slotMs);
  let sum = 0;
  let n = 0;
  for (let s = 0; s < cluster.servers.length; s++)
    for (let k = first; k < last; k++) {
      sum += serverUtilization(cluster, s, k * cluster.slotMs);
      n++;
    }
  return n > 0 ? sum / n : 0;
}

/**
 * Runs the sweep: for each seed, every load x level x policy (and the peak variant) on that seed's clusters and job
 * streams; one report over all of them.
 */
export async function runComputeSweep(options: ComputeSweepOptions = {}): Promise<ComputeSweepOutcome> {
  const o = resolveComputeSweepOptions(options);
  const perSeed =
    o.loads.length * o.utilizationPct.length * SWEEP_POLICIES.length + (o.peakVariant ? o.utilizationPct.length : 0);
  const tracker = new RunTracker(o.seeds.length * perSeed, o.onProgress);
  const traces = await chooseTraces(o.traces, (m) => tracker.note(m));
  const runs: SweepRun[] = [];
  for (const seed of o.seeds) runs.push(...sweepOneSeed(o, seed, traces, tracker));
  const report = renderComputeSweepReport(runs, o);
  const files = o.out ? writeReport(o.out, report) : [];
  return { runs, cells: summarizeComputeSweep(runs), report, files, traces: traces.source };
}

/** One seed's whole sweep: its clusters, its job streams and every run on them, seeded by `seed`. */
function sweepOneSeed(
  o: ResolvedComputeSweepOptions,
  seed: number,
  traces: ChosenTraces,
  tracker: RunTracker,
): SweepRun[] {
  const middle = o.loads[Math.floor((o.loads.length - 1) / 2)]!;
  const cluster = (meanPct: number): SimCluster => clusterAtUtilization(o, seed, meanPct, traces);
  const killCost: KillCostModel = o.killCost === "none" ? NO_KILL_COST : DEFAULT_KILL_COST;
  tracker.note(
    `seed ${seed}: generating the job streams on the ${o.referencePct} % reference cluster (${o.servers} servers)`,
  );
  const reference = cluster(o.referencePct);
  const source = jobSource(traces.source);
  const streams = new Map<number, JobStream>(
    o.loads.map((l) => [l, generateJobStream(reference, { seed, load: l, source })]),
  );
  const runs: SweepRun[] = [];
  for (const pct of o.utilizationPct) {
    tracker.note(`seed ${seed}: generating the ${pct} % cluster`);
    const c = cluster(pct);
    const measuredPct = measuredUtilization(c);
    for (const load of o.loads) {
      const stream = streams.get(load)!;
      // The arrival window the stream was sized on; its end is the last submission.
      const lastSubmit = stream.jobs.length > 0 ? stream.jobs[stream.jobs.length - 1]!.submitMs + 1 : c.historyMs + 1;
      const harvestable = harvestableCoreMs(c, c.historyMs, lastSubmit, 0.1) / 3_600_000;
      const effectiveLoad = harvestable > 0 ? stream.offeredCoreHours / harvestable : Infinity;
      const variants: { policy: ComputePolicy; peak: PeakVariant }[] = SWEEP_POLICIES.map((policy) => ({
        policy,
        peak: "percentile",
      }));
      if (o.peakVariant && load === middle) variants.push({ policy: "history", peak: "median-daily-max" });
      for (const v of variants) {
        const peak = v.peak === "percentile" ? "" : " (median-daily-max)";
        const label = `seed ${seed} load ${load} util ${pct}% ${v.policy}${peak}`;
        const result = tracker.track(label, c.historyMs, (onProgress) =>
          runCompute(c, stream, {
            policy: v.policy,
            seed,
            killCost,
            maxAmShare: o.maxAmShare,
            classFallback: o.classFallback,
            saturationShare: o.saturationShare,
            jobLength: o.jobLength,
            learnFromKills: o.learnFromKills,
            killedJobsLeaveClasses: o.killedJobsLeaveClasses,
            classifier: { peakStatistic: v.peak },
            onProgress,
            progressEvery: 100_000,
          }),
        );
        runs.push({
          seed,
          load,
          utilizationPct: pct,
          measuredPct,
          effectiveLoad,
          policy: v.policy,
          peak: v.peak,
          result,
        });
      }
    }
  }
  return runs;
}
