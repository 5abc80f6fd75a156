/**
 * Real primary-tenant utilization for the simulator: the Bitbrains GWA-T-12 VMs and NAB AWS CloudWatch series in
 * `../shared/data`, loaded once (reading files is async) and handed to the synchronous, pure `generateCluster` as
 * templates that its tenants replay. The folder is absent on a user's fresh clone: the loader then throws and the
 * caller decides whether to fall back to generated utilization.
 */
import { readdir } from "node:fs/promises";
import { join } from "node:path";
import { HarvestError } from "../common/errors.js";
import { sharedDataDir } from "../common/paths.js";
import type { ReadTraceOptions, TraceFormat, UtilizationSeries } from "../common/trace-io.js";
import { readUtilizationFile, resample } from "../common/trace-io.js";

/** One real utilization series a simulated tenant can replay. */
export interface RealTemplate {
  /** "bitbrains/411", "nab/ec2_cpu_utilization_5f5533". */
  readonly name: string;
  readonly series: UtilizationSeries;
}

/** A folder of real traces under the shared data directory. */
interface TraceSet {
  readonly prefix: string;
  readonly dir: string;
  readonly format: TraceFormat;
  readonly options: ReadTraceOptions;
}

/**
 * The folders `loadRealTemplates` reads. NAB needs `merge`: one of its files folds a daylight-saving hour onto repeated
 * timestamps (see `ReadTraceOptions.duplicateTimes`).
 */
const TRACE_SETS: readonly TraceSet[] = [
  { prefix: "bitbrains", dir: join("bitbrains_rnd_2013-7", "raw"), format: "bitbrains", options: {} },
  {
    prefix: "nab",
    dir: join("nab_aws_cloudwatch", "realAWSCloudwatch"),
    format: "nab",
    options: { duplicateTimes: "merge" },
  },
];

/**
 * Reads every real CPU series of `dataDir` (default `sharedDataDir()`), in a fixed order (by set, then file name) so
 * that a seed picks the same templates on every machine. A missing set is skipped; throws CONFIG_INVALID (details:
 * field "source", dir) when the directory is absent or holds no trace at all, and TRACE_MALFORMED for a bad file.
 */
export async function loadRealTemplates(dataDir: string | undefined = sharedDataDir()): Promise<RealTemplate[]> {
  if (dataDir === undefined) {
    throw new HarvestError(
      "CONFIG_INVALID",
      "real primary traces need ../shared/data (or HARVEST_SHARED_DATA pointing at it), which is not there; " +
        "use generated traces instead",
      { details: { field: "source", dir: "../shared/data" } },
    );
  }
  const templates: RealTemplate[] = [];
  for (const set of TRACE_SETS) {
    const dir = join(dataDir, set.dir);
    let files: string[];
    try {
      files = (await readdir(dir)).filter((f) => f.endsWith(".csv")).sort();
    } catch {
      continue;
    }
    const series = await Promise.all(files.map((f) => readUtilizationFile(join(dir, f), set.format, set.options)));
    for (const s of series) templates.push({ name: `${set.prefix}/${s.name}`, series: s });
  }
  if (templates.length === 0) {
    throw new HarvestError(
      "CONFIG_INVALID",
      `no real primary traces under ${dataDir} (expected ${TRACE_SETS.map((s) => s.dir).join(" and ")}); ` +
        "use generated traces instead",
      { details: { field: "source", dir: dataDir } },
    );
  }
  return templates;
}

/**
 * One replay cycle of `series` on a grid of `slotMs` slots from its first sample: each slot is the mean of the
 * samples in it, a slot without samples holds the previous one (`resample`). Pure.
 */
export function templateCycle(series: UtilizationSeries, slotMs: number): Float32Array {
  const grid = resample(series, slotMs / 1000);
  return Float32Array.from(grid.cpuPct);
}
