/**
 * `harvest sim notice`: the node manager's preemption notice off and on, on primaries that step and that ramp between
 * their samples, under stock and history placement (sim/experiments/notice/). Like the other `sim` experiments it
 * shows progress on stderr, prints its table and writes a markdown report, a CSV and a JSON file to `--out`.
 */
import type { Command } from "commander";
import type { PrimaryShape } from "../sim/compute-options.js";
import type { NoticeExperimentOptions, NoticeExperimentOutcome } from "../sim/experiments/notice/notice-experiment.js";
import type { ComputePolicy } from "../sim/results.js";
import { action, badFlag, oneOf, positiveInt, positiveNumber, print, rethrowAsFlagError } from "./command-kit.js";
import { GENERATED_TRACES_FLAG, parseTraceSource, SIM_JSON_FLAG } from "./sim-flags.js";
import type { AdmissionCommandKit } from "./sim-admission-command.js";

/** Where the report goes without `--out`. */
export const DEFAULT_NOTICE_OUT = "docs/results/notice";

/** The flags of `harvest sim notice`, as commander hands them over. */
export interface NoticeFlags {
  servers: string;
  days: string;
  seeds: string;
  load: string;
  utilization: string;
  reference: string;
  policy: string;
  shape: string;
  margin?: string;
  avoidMs?: string;
  rampStepMs: string;
  maxAmShare?: string;
  traces: string;
  out: string;
  json?: boolean;
}

/** The flag of each experiment option, to name the flag when the experiment rejects an option. */
const FLAG_OF: Readonly<Record<string, string>> = {
  servers: "--servers",
  days: "--days",
  seeds: "--seeds",
  load: "--load",
  utilizationPct: "--utilization",
  referencePct: "--reference",
  policies: "--policy",
  shapes: "--shape",
  marginFraction: "--margin",
  avoidMs: "--avoid-ms",
  rampStepMs: "--ramp-step-ms",
  maxAmShare: "--max-am-share",
  traces: "--traces",
};

/** The experiment's options from the flags (INVALID_ARGUMENT naming the flag when one does not parse). */
export function noticeOptionsFromFlags(o: NoticeFlags): NoticeExperimentOptions {
  const seeds = o.seeds.split(",").map((s) => {
    const n = Number(s.trim());
    if (!(Number.isInteger(n) && n >= 0)) badFlag("--seeds", `must be integers >= 0 (got ${JSON.stringify(s)})`);
    return n;
  });
  return {
    servers: positiveInt(o.servers, "--servers"),
    days: positiveInt(o.days, "--days"),
    seeds,
    load: positiveNumber(o.load, "--load"),
    utilizationPct: positiveNumber(o.utilization, "--utilization"),
    referencePct: positiveNumber(o.reference, "--reference"),
    policies: o.policy.split(",").map((p) => oneOf<ComputePolicy>(p.trim(), ["stock", "history"], "--policy")),
    shapes: o.shape.split(",").map((s) => oneOf<PrimaryShape>(s.trim(), ["step", "ramp"], "--shape")),
    ...(o.margin !== undefined ? { marginFraction: positiveNumber(o.margin, "--margin") } : {}),
    ...(o.avoidMs !== undefined ? { avoidMs: positiveNumber(o.avoidMs, "--avoid-ms") } : {}),
    rampStepMs: positiveInt(o.rampStepMs, "--ramp-step-ms"),
    ...(o.maxAmShare !== undefined ? { maxAmShare: positiveNumber(o.maxAmShare, "--max-am-share") } : {}),
    traces: parseTraceSource(o.traces),
    out: o.out,
  };
}

async function runFromFlags(o: NoticeFlags, kit: AdmissionCommandKit): Promise<NoticeExperimentOutcome> {
  const options = noticeOptionsFromFlags(o);
  const { runNoticeExperiment } = await import("../sim/experiments/notice/notice-experiment.js");
  try {
    return await runNoticeExperiment({ ...options, command: kit.commandLine(), onProgress: kit.reporter().onProgress });
  } catch (err) {
    rethrowAsFlagError(err, FLAG_OF);
  }
}

/** Adds `notice` to the `sim` command. */
export function registerNoticeCommand(sim: Command, kit: AdmissionCommandKit): void {
  sim
    .command("notice")
    .description(
      "the node manager's preemption notice off vs on, on primaries that step and that ramp between samples, under " +
        "stock and history placement: job times, kills, wasted core-hours and notices (npm run experiments)",
    )
    .option("--servers <n>", "servers in the cluster", "200")
    .option("--days <d>", "simulated days after the 30 days of history", "5")
    .option("--seeds <list>", "seeds of the clusters, jobs and runs; figures are their means", "1,2,3")
    .option("--load <fraction>", "offered load, a fraction of the reference cluster's harvestable core-hours", "0.8")
    .option("--utilization <pct>", "average primary utilization of the cluster, %", "55")
    .option("--reference <pct>", "utilization of the cluster the load is a fraction of, %", "65")
    .option("--policy <list>", "placements to run under: stock, history", "stock,history")
    .option("--shape <list>", "primary shapes: step (samples held), ramp (straight lines between them)", "step,ramp")
    .option("--margin <fraction>", "the notice's margin below the kill level, a fraction of a server's cores")
    .option("--avoid-ms <ms>", "how long a noticed job avoids the server (default: the job manager's)")
    .option("--ramp-step-ms <ms>", "a ramping primary moves this often", "30000")
    .option("--max-am-share <share>", "job managers hold at most this share of the harvestable cores (1: no limit)")
    .option(...GENERATED_TRACES_FLAG)
    .option("--out <dir>", "directory for notice.md, notice.csv and notice.json", DEFAULT_NOTICE_OUT)
    .option(...SIM_JSON_FLAG)
    .action(
      action(async (o: NoticeFlags) => {
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
