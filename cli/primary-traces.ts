/**
 * Choosing the primary tenants of a local cluster: the `--primary` flag of `harvest cluster up` becomes one monitor
 * spec per server. Real utilization series from `../shared/data` are used when that folder is there; a user's fresh
 * clone falls back to traces from the project's own generator.
 */
import { existsSync } from "node:fs";
import { join } from "node:path";
import { HarvestError } from "../common/errors.js";
import { sharedDataDir } from "../common/paths.js";
import { generateDemoTraces } from "../common/trace-gen.js";
import type { TraceWarnings } from "../common/trace-io.js";
import {
  describeTraceWarnings,
  describeUnreadableTrace,
  hasTraceWarnings,
  readTraceFiles,
  valueAt,
} from "../common/trace-io.js";

/** One server's primary tenant: its monitor spec and where its replay starts. */
export interface PrimaryChoice {
  spec: string;
  offsetMs: number;
  /** Where the trace comes from, for the demo's summary. */
  label: string;
  /** What reading the trace file changed (clamped values, merged timestamps, gaps, skipped lines); absent for proc. */
  warnings?: TraceWarnings;
}

/**
 * Real series paired so that a small cluster has both bursty and calm primary tenants (measured: Bitbrains VM 44 and
 * NAB ec2 77c1ca burst to ~100 %, VM 9 is near-constant ~23 %, VM 288 is daily-periodic, fe7f93 is irregular).
 */
const REAL_SERIES = [
  "bitbrains_rnd_2013-7/raw/44.csv",
  "bitbrains_rnd_2013-7/raw/9.csv",
  "nab_aws_cloudwatch/realAWSCloudwatch/ec2_cpu_utilization_77c1ca.csv",
  "bitbrains_rnd_2013-7/raw/288.csv",
  "nab_aws_cloudwatch/realAWSCloudwatch/ec2_cpu_utilization_fe7f93.csv",
  "nab_aws_cloudwatch/realAWSCloudwatch/ec2_cpu_utilization_5f5533.csv",
];

/** Replay windows for demos: calm long enough for work to be placed, then a spike soon after. */
export interface SpikeWindow {
  /** Samples at the start that stay below `calmBelowPct`. @default 14 */
  calmSteps: number;
  calmBelowPct: number;
  /** A sample at or above `spikePct` must come within this many steps after the calm lead-in. @default 36 */
  spikeWithinSteps: number;
  spikePct: number;
}

const DEFAULT_WINDOW: SpikeWindow = { calmSteps: 14, calmBelowPct: 50, spikeWithinSteps: 36, spikePct: 85 };

/** The first sample index where `window` holds, or undefined. */
export function findSpikeWindow(cpuPct: readonly number[], window: SpikeWindow = DEFAULT_WINDOW): number | undefined {
  outer: for (let i = 0; i + window.calmSteps + window.spikeWithinSteps <= cpuPct.length; i++) {
    for (let k = 0; k < window.calmSteps; k++) if ((cpuPct[i + k] ?? 0) >= window.calmBelowPct) continue outer;
    for (let k = window.calmSteps; k < window.calmSteps + window.spikeWithinSteps; k++)
      if ((cpuPct[i + k] ?? 0) >= window.spikePct) return i;
  }
  return undefined;
}

/**
 * Turns `--primary` into one choice per server:
 * - `proc`: the real /proc monitor (right for one node manager per real server),
 * - `trace:<file>` / `burn:<file>`: every server replays that file, from different points,
 * - `trace` / `burn` (no file): real series from ../shared/data when present, else generated traces in `<dir>/traces`.
 * With `spiky`, each bursty series starts at a window where a spike follows a calm lead-in (for the demo).
 * Every file goes through the shared normalization of common/trace-io.ts; a file with quirks is reported once to
 * `warn` with the counts, an unreadable one is reported (file and line) and left out, and only when no file is
 * readable does this fail (TRACE_MALFORMED).
 */
export async function choosePrimaries(
  flag: string,
  servers: number,
  clusterDir: string,
  opts: { spiky?: boolean; seed?: number; warn?: (message: string) => void } = {},
): Promise<PrimaryChoice[]> {
  const warn = opts.warn ?? ((message: string): void => void process.stderr.write(`warning: ${message}\n`));
  if (flag === "proc")
    return Array.from({ length: servers }, () => ({ spec: "proc", offsetMs: 0, label: "proc (real /proc/stat)" }));
  const m = /^(trace|burn)(?::(.+))?$/.exec(flag);
  if (!m)
    throw new HarvestError(
      "CONFIG_INVALID",
      `--primary must be proc, trace, burn, trace:<file> or burn:<file> (got ${JSON.stringify(flag)})`,
      { details: { field: "primary" } },
    );
  const kind = m[1] as "trace" | "burn";
  const file = m[2];
  if (file && !existsSync(file)) {
    throw new HarvestError("CONFIG_INVALID", `--primary ${kind}:${file}: no such file`, {
      details: { field: "primary" },
    });
  }
  const shared = sharedDataDir();
  const real = file ? [file] : shared ? REAL_SERIES.map((f) => join(shared, f)).filter((f) => existsSync(f)) : [];
  const candidates =
    real.length > 0 ? real : await generateDemoTraces(join(clusterDir, "traces"), servers, opts.seed ?? 2016);
  const { traces } = await readTraceFiles(candidates, {
    onSkip: (s) => warn(`primary trace ${describeUnreadableTrace(s)}`),
  });
  for (const t of traces)
    if (hasTraceWarnings(t.warnings)) warn(`primary trace ${t.file}: ${describeTraceWarnings(t.warnings)}`);
  const files = traces.map((t) => t.file);
  const out: PrimaryChoice[] = [];
  for (let i = 0; i < servers; i++) {
    const { file: path, series, warnings } = traces[i % traces.length]!;
    const spanMs = series.timesMs[series.timesMs.length - 1]! - series.timesMs[0]!;
    // Later servers sharing a file start later in it, so that they are not in lockstep.
    let offsetMs = Math.floor((spanMs * i) / servers);
    if (opts.spiky) {
      // Search on a regular grid of what the replay will show (step-hold at the median step): real traces have gaps.
      const stepMs = series.stepSec * 1000;
      const grid = Array.from({ length: Math.floor(spanMs / stepMs) + 1 }, (_, k) => valueAt(series, k * stepMs));
      let from = 0;
      let found: number | undefined;
      for (let round = 0; round <= Math.floor(i / files.length); round++) {
        const at = findSpikeWindow(grid.slice(from));
        if (at === undefined) break;
        found = from + at;
        from = found + DEFAULT_WINDOW.calmSteps + DEFAULT_WINDOW.spikeWithinSteps;
      }
      if (found !== undefined) offsetMs = found * stepMs;
    }
    const label =
      file ?? (real.length > 0 ? path.split("/").slice(-2).join("/") : `generated ${path.split("/").pop() ?? path}`);
    out.push({ spec: `${kind}:${path}`, offsetMs, label, warnings });
  }
  return out;
}
