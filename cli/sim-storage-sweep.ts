/**
 * `harvest sim storage-sweep`: the storage experiment swept over re-replication bandwidth x blocks per server x seeds
 * with both placements (sim/experiments/storage-sweep). Like the other `sim` experiments it shows progress on stderr, prints
 * its tables and writes a markdown report, CSVs and an SVG plot to `--out`.
 */
import type { Command } from "commander";
import type { ExperimentEvent } from "../sim/experiments.js";
import { UTILIZATION_LEVELS } from "../sim/model.js";
import type { UtilizationLevel } from "../sim/model.js";
import type {
  ResolvedStorageSweepOptions,
  StorageSweepOptions,
  StorageSweepOutcome,
} from "../sim/experiments/storage-sweep/index.js";
import { action, badFlag, oneOf, positiveInt, print, rethrowAsFlagError } from "./command-kit.js";
import { parseTraceSource, SIM_JSON_FLAG } from "./sim-flags.js";
import { duration } from "./format.js";

/**
 * What the subcommand takes from the `sim` command family (cli/sim-commands.ts) that registers it, so that this module
 * does not import that one (which imports this one).
 */
export interface SimCommandKit {
  /** A fresh progress reporter writing to stderr, as every `sim` experiment's. */
  reporter: () => { onProgress: (e: ExperimentEvent) => void };
  /** The command line as the user typed it (shown in the report). */
  commandLine: () => string;
  /** Where reports go without `--out`. */
  outDir: string;
}

/** The flags of `harvest sim storage-sweep`, as commander hands them over (undefined: the sweep's default). */
export interface StorageSweepFlags {
  servers?: string;
  days?: string;
  seeds?: string;
  bandwidth?: string;
  blocksPerServer?: string;
  utilization?: string;
  replication?: string;
  traces?: string;
  out?: string;
  json?: boolean;
}

/** The flag of each sweep option, to name the flag when the sweep rejects an option. */
const FLAG_OF: Readonly<Record<string, string>> = {
  servers: "--servers",
  days: "--days",
  seeds: "--seeds",
  reReplicationMBps: "--bandwidth",
  blocksPerServer: "--blocks-per-server",
  level: "--utilization",
  replications: "--replication",
  traces: "--traces",
};

/** A comma list of numbers ("5,10,20,50"); INVALID_ARGUMENT naming `flag` for anything else. */
function numberList(v: string, flag: string): number[] {
  const parts = v.split(",").map((s) => s.trim());
  return parts.map((s) => {
    const n = s === "" ? NaN : Number(s);
    if (!Number.isFinite(n)) badFlag(flag, `must be a comma list of numbers (got ${JSON.stringify(v)})`);
    return n;
  });
}

/**
 * Turns the flags into sweep options (INVALID_ARGUMENT naming the flag when one does not parse); the sweep fills the
 * defaults and checks the ranges (see {@link resolveStorageSweepFlags}).
 */
export function storageSweepOptionsFromFlags(o: StorageSweepFlags): StorageSweepOptions {
  return {
    ...(o.servers !== undefined ? { servers: positiveInt(o.servers, "--servers") } : {}),
    ...(o.days !== undefined ? { days: positiveInt(o.days, "--days") } : {}),
    ...(o.seeds !== undefined ? { seeds: numberList(o.seeds, "--seeds") } : {}),
    ...(o.bandwidth !== undefined ? { reReplicationMBps: numberList(o.bandwidth, "--bandwidth") } : {}),
    ...(o.blocksPerServer !== undefined
      ? { blocksPerServer: numberList(o.blocksPerServer, "--blocks-per-server") }
      : {}),
    ...(o.utilization !== undefined
      ? { level: oneOf<UtilizationLevel>(o.utilization, UTILIZATION_LEVELS, "--utilization") }
      : {}),
    ...(o.replication !== undefined ? { replications: numberList(o.replication, "--replication") } : {}),
    ...(o.traces !== undefined ? { traces: parseTraceSource(o.traces) } : {}),
    ...(o.out !== undefined ? { out: o.out } : {}),
  };
}

/**
 * The complete sweep options of the flags: parsed, defaults filled and checked, an invalid one rejected with
 * INVALID_ARGUMENT naming its flag (`details.flag`). Loads the simulator (ECharts) only when called.
 */
export async function resolveStorageSweepFlags(o: StorageSweepFlags): Promise<ResolvedStorageSweepOptions> {
  const options = storageSweepOptionsFromFlags(o);
  const { resolveStorageSweepOptions } = await import("../sim/experiments/storage-sweep/index.js");
  try {
    return resolveStorageSweepOptions(options);
  } catch (err) {
    rethrowAsFlagError(err, FLAG_OF);
  }
}

function outcomeText(o: StorageSweepOutcome): string {
  return [
    `Storage sweep (${o.traces} traces): ${o.runs.length} runs in ${duration(o.wallMs)}`,
    "",
    o.report.summary,
    ...(o.files.length > 0 ? ["", `wrote ${o.files.join(", ")}`] : []),
  ].join("\n");
}

function outcomeJson(o: StorageSweepOutcome): unknown {
  // JSON has no Infinity: an unbounded end of a ratio's interval prints as null (its `kind` says which end).
  return { traces: o.traces, options: o.options, wallMs: o.wallMs, cells: o.cells, runs: o.runs, files: o.files };
}

/** Adds `storage-sweep` to the `sim` command. */
export function registerStorageSweepCommand(sim: Command, kit: SimCommandKit): void {
  sim
    .command("storage-sweep")
    .description(
      "blocks lost by stock and diversity placement over re-replication bandwidth x blocks per server x seeds, " +
        "with the stock/diversity ratio and its confidence interval (default: 120 runs, about 5 minutes)",
    )
    .option("--servers <n>", "servers in each seed's cluster (default: 500)")
    .option("--days <d>", "simulated days after the 30 days of history (default: 365)")
    .option("--seeds <list>", "seeds, at least 3, each a cluster of its own (default: 1,2,3,4,5)")
    .option("--bandwidth <list>", "re-replication bandwidth each server gives, MB/s (default: 5,10,20,50)")
    .option("--blocks-per-server <list>", "blocks written per server over the run (default: 30,60,120)")
    .option("--utilization <level>", "average primary utilization: low, medium or high (default: high)")
    .option("--replication <list>", "replication factors: 3, or 3,4 (default: 3)")
    .option(
      "--traces <source>",
      "primary utilization: generated, or real (../shared/data, when present) (default: generated)",
    )
    .option("--out <dir>", `directory for the markdown report, CSVs and SVG plot (default: ${kit.outDir})`)
    .option(...SIM_JSON_FLAG)
    .action(
      action(async (o: StorageSweepFlags) => {
        const options = await resolveStorageSweepFlags({ ...o, out: o.out ?? kit.outDir });
        const { runStorageSweep } = await import("../sim/experiments/storage-sweep/index.js");
        const outcome = await runStorageSweep({
          ...options,
          command: kit.commandLine(),
          onProgress: kit.reporter().onProgress,
        });
        print(o, outcomeJson(outcome), () => outcomeText(outcome));
      }),
    );
}
