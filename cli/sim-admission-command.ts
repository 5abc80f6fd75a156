/**
 * `harvest sim admission`: seeds/003's admission policies in front of the compute simulator, each threshold tuned by
 * binary search to a kill SLA on one period and evaluated on the next (sim/experiments/admission/). Like the other
 * `sim` experiments it shows progress on stderr, prints its table and writes a markdown report, a CSV, a JSON table
 * and an SVG plot to `--out`; it also writes the tuned thresholds as `admission-thresholds.json`, the file the resource
 * manager's `admissionThresholdsFile` option reads.
 */
import type { Command } from "commander";
import type {
  AdmissionExperimentOptions,
  AdmissionExperimentOutcome,
  TunedPolicy,
} from "../sim/experiments/admission/admission-experiment.js";
import { action, badFlag, oneOf, positiveInt, positiveNumber, print, rethrowAsFlagError } from "./command-kit.js";
import { parseTraceSource, REAL_TRACES_FLAG, SIM_JSON_FLAG } from "./sim-flags.js";
import { duration } from "./format.js";
import { parseShareFlag } from "./power-plan-command.js";
import type { SimCommandKit } from "./sim-storage-sweep.js";

/** Where the report goes without `--out`. */
export const DEFAULT_ADMISSION_OUT = "docs/results/admission";

const POLICIES: readonly TunedPolicy[] = ["zeroth", "first", "second"];

/** The flags of `harvest sim admission`, as commander hands them over. */
export interface AdmissionFlags {
  sla: string;
  compare?: boolean;
  policy?: string;
  servers: string;
  days: string;
  load: string;
  utilization: string;
  seed: string;
  iterations: string;
  traces: string;
  out: string;
  json?: boolean;
}

/** The flag of each experiment option, to name the flag when the experiment rejects an option. */
const FLAG_OF: Readonly<Record<string, string>> = {
  sla: "--sla",
  policies: "--policy",
  servers: "--servers",
  days: "--days",
  load: "--load",
  utilizationPct: "--utilization",
  seed: "--seed",
  iterations: "--iterations",
  traces: "--traces",
};

/**
 * The experiment's options from the flags (INVALID_ARGUMENT naming the flag when one does not parse): `--compare`
 * tunes all three policies, otherwise `--policy` alone (second by default); both at once is an error.
 */
export function admissionOptionsFromFlags(o: AdmissionFlags): AdmissionExperimentOptions {
  if (o.compare && o.policy !== undefined) badFlag("--policy", "cannot go with --compare, which tunes every policy");
  const seed = Number(o.seed);
  if (!(Number.isInteger(seed) && seed >= 0))
    badFlag("--seed", `must be an integer >= 0 (got ${JSON.stringify(o.seed)})`);
  const iterations = Number(o.iterations);
  if (!(Number.isInteger(iterations) && iterations >= 0))
    badFlag("--iterations", `must be an integer >= 0 (got ${JSON.stringify(o.iterations)})`);
  return {
    sla: parseShareFlag(o.sla, "--sla"),
    policies: o.compare ? POLICIES : [oneOf(o.policy ?? "second", POLICIES, "--policy")],
    servers: positiveInt(o.servers, "--servers"),
    days: positiveNumber(o.days, "--days"),
    load: positiveNumber(o.load, "--load"),
    utilizationPct: positiveNumber(o.utilization, "--utilization"),
    seed,
    iterations,
    traces: parseTraceSource(o.traces),
    out: o.out,
  };
}

/** Runs the experiment, turning a rejected option into INVALID_ARGUMENT naming its flag. */
async function runFromFlags(o: AdmissionFlags, kit: AdmissionCommandKit): Promise<AdmissionExperimentOutcome> {
  const options = admissionOptionsFromFlags(o);
  const { runAdmissionExperiment } = await import("../sim/experiments/admission/admission-experiment.js");
  try {
    return await runAdmissionExperiment({
      ...options,
      command: kit.commandLine(),
      onProgress: kit.reporter().onProgress,
    });
  } catch (err) {
    rethrowAsFlagError(err, FLAG_OF);
  }
}

function outcomeText(o: AdmissionExperimentOutcome): string {
  return [
    `Admission experiment (${o.traces} traces) in ${duration(o.wallMs)}`,
    "",
    o.report.summary,
    "",
    `thresholds for the resource manager (admissionThresholdsFile): ${JSON.stringify(o.thresholds.admissionOptions)}`,
    ...(o.files.length > 0 ? ["", `wrote ${o.files.join(", ")}`] : []),
  ].join("\n");
}

function outcomeJson(o: AdmissionExperimentOutcome): unknown {
  const { traces, wallMs, thresholds, verdict, policies, files } = o;
  return { traces, wallMs, thresholds, verdict, policies, files };
}

/** What the subcommand takes from the `sim` command family that registers it (its reports go to their own folder). */
export type AdmissionCommandKit = Omit<SimCommandKit, "outDir">;

/** Adds `admission` to the `sim` command. */
export function registerAdmissionCommand(sim: Command, kit: AdmissionCommandKit): void {
  sim
    .command("admission")
    .description(
      "zeroth-, first- and second-moment admission control (seeds/003): each threshold tuned by binary search to a " +
        "kill SLA on one period and evaluated on the next; harvested utilization per policy at the SLA beside no " +
        "admission control, and the tuned thresholds as admission-thresholds.json (default: about 3 minutes)",
    )
    .option("--sla <kill rate>", "largest share of the task-hours run that kills may throw away, e.g. 5% or 0.05", "5%")
    .option("--compare", "tune all three policies (zeroth, first, second) and compare them")
    .option("--policy <policy>", "the one policy to tune without --compare: zeroth, first or second (default: second)")
    .option("--servers <n>", "servers in the simulated cluster", "80")
    .option("--days <d>", "days of each period: tuning, then held out (after 30 days of history)", "3")
    .option("--load <share>", "offered batch work as a share of the harvestable core-hours", "1")
    .option("--utilization <pct>", "average primary utilization, %", "45")
    .option("--seed <s>", "seed of the cluster and the tuning jobs (the held-out jobs use seed + 1)", "1")
    .option("--iterations <n>", "binary-search iterations per policy, each one simulated run", "5")
    .option(...REAL_TRACES_FLAG)
    .option("--out <dir>", "directory for the report, the table and admission-thresholds.json", DEFAULT_ADMISSION_OUT)
    .option(...SIM_JSON_FLAG)
    .action(
      action(async (o: AdmissionFlags) => {
        const outcome = await runFromFlags(o, kit);
        print(o, outcomeJson(outcome), () => outcomeText(outcome));
      }),
    );
}
