/**
 * Real primary-tenant utilization for the simulator: the Bitbrains GWA-T-12 VMs and NAB AWS CloudWatch series in
 * `../shared/data`, loaded once (reading files is async) and handed to the synchronous, pure `generateCluster` as
 * templates that its tenants replay. The folder is absent on a user's fresh clone: the loader then throws and the
 * caller decides whether to fall back to generated utilization. Every file goes through the shared normalization of
 * common/trace-io.ts (clamping, merged timestamps, bridged gaps, skipped lines); its counts are printed once per file.
 */
import { readdir } from "node:fs/promises";
import { join } from "node:path";
import { HarvestError, isHarvestError } from "../common/errors.js";
import { sharedDataDir } from "../common/paths.js";
import type {
  ReadTraceOptions,
  TraceFormat,
  TraceWarnings,
  UnreadableTrace,
  UtilizationSeries,
} from "../common/trace-io.js";
import {
  describeTraceWarnings,
  describeUnreadableTrace,
  hasTraceWarnings,
  readTraceFiles,
  resample,
} from "../common/trace-io.js";

/** One real utilization series a simulated tenant can replay. */
export interface RealTemplate {
  /** "bitbrains/411", "nab/ec2_cpu_utilization_5f5533". */
  readonly name: string;
  readonly series: UtilizationSeries;
  /** What reading the file changed (clamped values, merged timestamps, gaps, skipped lines); set by the loader. */
  readonly warnings?: TraceWarnings;
  /** The file it was read from; set by the loader. */
  readonly file?: string;
}

/** A folder of real traces under the shared data directory. */
interface TraceSet {
  readonly prefix: string;
  readonly dir: string;
  readonly format: TraceFormat;
  readonly options: ReadTraceOptions;
}

/** The folders `loadRealTemplates` reads, with the shared normalization's default options. */
const TRACE_SETS: readonly TraceSet[] = [
  { prefix: "bitbrains", dir: join("bitbrains_rnd_2013-7", "raw"), format: "bitbrains", options: {} },
  { prefix: "nab", dir: join("nab_aws_cloudwatch", "realAWSCloudwatch"), format: "nab", options: {} },
];

/** Where `loadRealTemplates` reports a file's quirks and skipped files. */
export interface LoadRealTemplatesOptions {
  /** @default one `real traces: ...` line per message on stderr */
  warn?: (message: string) => void;
}

/**
 * `readTraceFiles` that reports, one line each to `warn`, every file it skips as unreadable (after `onSkip`) and every
 * file read with quirks (clamped values, merged timestamps, gaps, skipped lines). The simulator's real traces and the
 * testbed plan's trace files are read through it.
 */
export async function readTracesReporting(
  paths: readonly string[],
  options: ReadTraceOptions & { format?: TraceFormat },
  warn: (message: string) => void,
  onSkip?: (skipped: UnreadableTrace) => void,
): ReturnType<typeof readTraceFiles> {
  const read = await readTraceFiles(paths, {
    ...options,
    onSkip: (s) => {
      onSkip?.(s);
      warn(describeUnreadableTrace(s));
    },
  });
  for (const t of read.traces)
    if (hasTraceWarnings(t.warnings)) warn(`${t.file}: ${describeTraceWarnings(t.warnings)}`);
  return read;
}

/**
 * Reads every real CPU series of `dataDir` (default `sharedDataDir()`), in a fixed order (by set, then file name) so
 * that a seed picks the same templates on every machine. A missing set is skipped; an unreadable file is reported to
 * `warn` (file and line) and skipped, a file with quirks is reported once with the counts. Throws CONFIG_INVALID
 * (details: field "source", dir) when the directory is absent or holds no trace file at all, and TRACE_MALFORMED when
 * there are trace files but none is readable.
 */
export async function loadRealTemplates(
  dataDir: string | undefined = sharedDataDir(),
  opts: LoadRealTemplatesOptions = {},
): Promise<RealTemplate[]> {
  const warn = opts.warn ?? ((message: string): void => void process.stderr.write(`real traces: ${message}\n`));
  if (dataDir === undefined) {
    throw new HarvestError(
      "CONFIG_INVALID",
      "real primary traces need ../shared/data (or HARVEST_SHARED_DATA pointing at it), which is not there; " +
        "use generated traces instead",
      { details: { field: "source", dir: "../shared/data" } },
    );
  }
  const templates: RealTemplate[] = [];
  let firstUnreadable: UnreadableTrace | undefined;
  let fileCount = 0;
  for (const set of TRACE_SETS) {
    const dir = join(dataDir, set.dir);
    let files: string[];
    try {
      files = (await readdir(dir)).filter((f) => f.endsWith(".csv")).sort();
    } catch {
      continue;
    }
    fileCount += files.length;
    // Each unreadable file is reported through onSkip; "nothing readable" is decided over all sets below.
    const paths = files.map((f) => join(dir, f));
    const { traces } = await readTracesReporting(paths, { ...set.options, format: set.format }, warn, (s) => {
      firstUnreadable ??= s;
    }).catch((err: unknown) => {
      if (!isHarvestError(err, "TRACE_MALFORMED")) throw err;
      return { traces: [] };
    });
    for (const t of traces)
      templates.push({ name: `${set.prefix}/${t.series.name}`, series: t.series, warnings: t.warnings, file: t.file });
  }
  if (templates.length === 0 && fileCount > 0) {
    throw new HarvestError(
      "TRACE_MALFORMED",
      `none of the ${fileCount} real primary trace file(s) under ${dataDir} is readable; use generated traces instead`,
      {
        details: {
          dir: dataDir,
          files: String(fileCount),
          file: firstUnreadable?.file ?? dataDir,
          ...(firstUnreadable?.line !== undefined ? { line: String(firstUnreadable.line) } : {}),
        },
      },
    );
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
