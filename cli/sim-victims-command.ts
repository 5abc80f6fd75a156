/**
 * `harvest sim victims`: the node manager's yield step with its stock victim order (youngest first) beside "work-lost"
 * (the least running time x cores lost), under stock and history placement at a few cells of the compute sweep
 * (sim/experiments/victims/). Like the other `sim` experiments it shows progress on stderr, prints its table and
 * writes a markdown report and a CSV to `--out`.
 */
import type { Command } from "commander";
import type { ComputePolicy } from "../sim/results.js";
import type {
  VictimExperimentOptions,
  VictimExperimentOutcome,
} from "../sim/experiments/victims/victims-experiment.js";
import { action, badFlag, oneOf, positiveInt, positiveNumber, print, rethrowAsFlagError } from "./command-kit.js";
import { GENERATED_TRACES_FLAG, parseTraceSource, SIM_JSON_FLAG } from "./sim-flags.js";
import type { AdmissionCommandKit } from "./sim-admission-command.js";

/** Where the report goes without `--out`. */
export const DEFAULT_VICTIMS_OUT = "docs/results/victims";

/** The flags of `harvest sim victims`, as commander hands them over. */
export interface VictimFlags {
  servers: string;
  days: string;
  seeds: string;
  load: string;
  utilization: string;
  reference: string;
  policy: string;
  maxAmShare: string;
  nearEndMs?: string;
  traces: string;
  out: string;
  json?: boolean;
}

/** The flag of each experiment option, to name the flag when the experiment rejects an option. */
const FLAG_OF: Readonly<Record<string, string>> = {
  servers: "--servers",
  days: "--days",
  seeds: "--seeds",
  loads: "--load",
  utilizationPct: "--utilization",
  policies: "--policy",
  maxAmShare: "--max-am-share",
  nearEndMs: "--near-end-ms",
  traces: "--traces",
};

const list = (v: string, flag: string): number[] => v.split(",").map((x) => positiveNumber(x.trim(), flag));

/** The experiment's options from the flags (INVALID_ARGUMENT naming the flag when one does not parse). */
export function victimOptionsFromFlags(o: VictimFlags): VictimExperimentOptions {
  const seeds = o.seeds.split(",").map((s) => {
    const n = Number(s.trim());
    if (!(Number.isInteger(n) && n >= 0)) badFlag("--seeds", `must be integers >= 0 (got ${JSON.stringify(s)})`);
    return n;
  });
  let nearEndMs: number | undefined;
  if (o.nearEndMs !== undefined) {
    nearEndMs = Number(o.nearEndMs);
    if (!(Number.isFinite(nearEndMs) && nearEndMs >= 0))
      badFlag("--near-end-ms", `must be a number of milliseconds >= 0 (got ${JSON.stringify(o.nearEndMs)})`);
  }
  return {
    servers: positiveInt(o.servers, "--servers"),
    days: positiveInt(o.days, "--days"),
    seeds,
    loads: list(o.load, "--load"),
    utilizationPct: list(o.utilization, "--utilization"),
    referencePct: positiveNumber(o.reference, "--reference"),
    policies: o.policy.split(",").map((p) => oneOf<ComputePolicy>(p.trim(), ["stock", "history"], "--policy")),
    maxAmShare: positiveNumber(o.maxAmShare, "--max-am-share"),
    ...(nearEndMs !== undefined ? { nearEndMs } : {}),
    traces: parseTraceSource(o.traces),
    out: o.out,
  };
}

async function runFromFlags(o: VictimFlags, kit: AdmissionCommandKit): Promise<VictimExperimentOutcome> {
  const options = victimOptionsFromFlags(o);
  const { runVictimExperiment } = await import("../sim/experiments/victims/victims-experiment.js");
  try {
    return await runVictimExperiment({ ...options, command: kit.commandLine(), onProgress: kit.reporter().onProgress });
  } catch (err) {
    rethrowAsFlagError(err, FLAG_OF);
  }
}

/** Adds `victims` to the `sim` command. */
export function registerVictimsCommand(sim: Command, kit: AdmissionCommandKit): void {
  sim
    .command("victims")
    .description(
      "the yield step's victim order, youngest first (stock) vs work-lost (the least running time x cores lost), " +
        "under stock and history placement at cells of the sweep: kills, wasted core-hours and job time " +
        "(npm run experiments)",
    )
    .option("--servers <n>", "servers in every cluster", "200")
    .option("--days <d>", "simulated days after the 30 days of history", "10")
    .option("--seeds <list>", "seeds of the clusters, jobs and runs; figures are their means", "1,2,3")
    .option("--load <list>", "offered loads, fractions of the reference cluster's harvestable core-hours", "0.6,0.8")
    .option("--utilization <list>", "average primary utilization of each level, %", "45,55")
    .option("--reference <pct>", "utilization of the cluster the loads are fractions of, %", "65")
    .option("--policy <list>", "placements to run each victim order under: stock, history", "stock,history")
    .option(
      "--max-am-share <share>",
      "job managers hold at most this share of the harvestable cores (1: no limit)",
      "1",
    )
    .option("--near-end-ms <ms>", "work-lost spares a task expected to end within this (default: the node manager's)")
    .option(...GENERATED_TRACES_FLAG)
    .option("--out <dir>", "directory for victims.md and victims.csv", DEFAULT_VICTIMS_OUT)
    .option(...SIM_JSON_FLAG)
    .action(
      action(async (o: VictimFlags) => {
        const outcome = await runFromFlags(o, kit);
        print(
          o,
          {
            runs: outcome.runs.map((r) => ({ ...r, result: { ...r.result } })),
            files: outcome.files,
            traces: outcome.traces,
          },
          () => [outcome.report.summary, "", ...outcome.files.map((f) => `wrote ${f}`)].join("\n"),
        );
      }),
    );
}
