/**
 * `harvest sim calibration`: every job of a compute simulation quoted at submission by the resource manager's survival
 * quote, and the quotes compared with what happened (sim/experiments/calibration/): a reliability table and plot, the
 * Brier score beside a constant forecast's, re-runs and completion bands. Progress on stderr, the report, a CSV, a
 * JSON table and an SVG plot in `--out`.
 */
import type { Command } from "commander";
import type {
  CalibrationExperimentOptions,
  CalibrationOutcome,
} from "../sim/experiments/calibration/calibration-experiment.js";
import { UTILIZATION_LEVELS } from "../sim/model.js";
import type { UtilizationLevel } from "../sim/model.js";
import { action, badFlag, oneOf, positiveInt, positiveNumber, print, rethrowAsFlagError } from "./command-kit.js";
import { duration } from "./format.js";
import { GENERATED_TRACES_FLAG, parseTraceSource, SIM_JSON_FLAG } from "./sim-flags.js";
import type { SimCommandKit } from "./sim-storage-sweep.js";

/** Where the report goes without `--out`. */
export const DEFAULT_CALIBRATION_OUT = "docs/results/calibration";

/** The flags of `harvest sim calibration`, as commander hands them over. */
export interface CalibrationFlags {
  servers: string;
  days: string;
  load: string;
  utilization: string;
  seed: string;
  policy: string;
  killSlack?: string;
  priorRuns?: string;
  traces: string;
  out: string;
  json?: boolean;
}

const FLAG_OF: Readonly<Record<string, string>> = {
  servers: "--servers",
  days: "--days",
  load: "--load",
  level: "--utilization",
  seed: "--seed",
  policy: "--policy",
  killSlackPct: "--kill-slack",
  priorRuns: "--prior-runs",
  traces: "--traces",
};

/** The experiment's options from the flags (INVALID_ARGUMENT naming the flag when one does not parse). */
export function calibrationOptionsFromFlags(o: CalibrationFlags): CalibrationExperimentOptions {
  const seed = Number(o.seed);
  if (!(Number.isInteger(seed) && seed >= 0))
    badFlag("--seed", `must be an integer >= 0 (got ${JSON.stringify(o.seed)})`);
  const slack = o.killSlack === undefined ? undefined : Number(o.killSlack);
  if (slack !== undefined && !(Number.isFinite(slack) && slack >= 0))
    badFlag("--kill-slack", `must be a number of CPU-% points >= 0 (got ${JSON.stringify(o.killSlack)})`);
  return {
    servers: positiveInt(o.servers, "--servers"),
    days: positiveNumber(o.days, "--days"),
    load: positiveNumber(o.load, "--load"),
    level: oneOf<UtilizationLevel>(o.utilization, UTILIZATION_LEVELS, "--utilization"),
    seed,
    policy: oneOf(o.policy, ["stock", "history"] as const, "--policy"),
    ...(slack !== undefined ? { killSlackPct: slack } : {}),
    ...(o.priorRuns !== undefined ? { priorRuns: positiveNumber(o.priorRuns, "--prior-runs") } : {}),
    traces: parseTraceSource(o.traces),
    out: o.out,
  };
}

function outcomeText(o: CalibrationOutcome): string {
  return [
    `Calibration experiment (${o.traces} traces) in ${duration(o.result.wallMs)}`,
    "",
    o.report.summary,
    ...(o.files.length > 0 ? ["", `wrote ${o.files.join(", ")}`] : []),
  ].join("\n");
}

/** Adds `calibration` to the `sim` command. */
export function registerCalibrationCommand(sim: Command, kit: Omit<SimCommandKit, "outDir">): void {
  sim
    .command("calibration")
    .description(
      "survival quotes against outcomes: every job quoted at submission, then a reliability table and plot by decile " +
        "of the quoted probability of no kill, the Brier score beside a constant forecast's (default: under a minute)",
    )
    .option("--servers <n>", "servers in the simulated cluster", "60")
    .option("--days <d>", "simulated days after 30 days of history", "3")
    .option("--load <share>", "offered batch work as a share of the harvestable core-hours", "0.6")
    .option("--utilization <level>", "average primary utilization: low, medium or high", "medium")
    .option("--seed <s>", "seed of the cluster, the jobs and every random choice", "1")
    .option("--policy <policy>", "task placement: history or stock", "history")
    .option("--kill-slack <points>", "the quote's killSlackPct (default: the resource manager's)")
    .option("--prior-runs <w>", "the quote's priorRuns (default: the resource manager's)")
    .option(...GENERATED_TRACES_FLAG)
    .option("--out <dir>", "directory for calibration.md, .csv, .json and the plot", DEFAULT_CALIBRATION_OUT)
    .option(...SIM_JSON_FLAG)
    .action(
      action(async (o: CalibrationFlags) => {
        const options = calibrationOptionsFromFlags(o);
        const { runCalibrationExperiment } = await import("../sim/experiments/calibration/calibration-experiment.js");
        let outcome: CalibrationOutcome;
        try {
          outcome = await runCalibrationExperiment({
            ...options,
            command: kit.commandLine(),
            onProgress: kit.reporter().onProgress,
          });
        } catch (err) {
          rethrowAsFlagError(err, FLAG_OF);
        }
        print(o, { calibration: outcome.calibration, files: outcome.files }, () => outcomeText(outcome));
      }),
    );
}
