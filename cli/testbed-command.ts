/**
 * `harvest sim validate`: registered on `harvest sim`; the testbed and the simulator load only when it runs (see
 * labs/testbed-validate.ts).
 */
import type { Command } from "commander";
import { HarvestError } from "../common/errors.js";
import { action, commandLine, positiveInt, positiveNumber, print } from "./command-kit.js";

/** The flags of `harvest sim validate`. */
interface ValidateFlags {
  servers: string;
  minutes: string;
  speedup: string;
  seed: string;
  traces: string;
  historyDays: string;
  load: string;
  out: string;
  keep?: boolean;
  json?: boolean;
}

/** "auto", "real", "generated", or a comma list of trace files. */
function parseTraces(v: string): "auto" | "real" | "generated" | string[] {
  const t = v.trim();
  if (t === "auto" || t === "real" || t === "generated") return t;
  const files = t
    .split(",")
    .map((f) => f.trim())
    .filter((f) => f !== "");
  if (files.length === 0)
    throw new HarvestError("INVALID_ARGUMENT", "--traces must be auto, real, generated or trace files", {
      details: { flag: "--traces" },
    });
  return files;
}

/** Adds `harvest sim validate` to `sim`. */
export function registerValidateCommand(sim: Command): void {
  sim
    .command("validate")
    .description(
      "the simulator against a real loopback cluster: a resource manager and node managers whose primaries replay " +
        "traces at a speed-up run recurring DAG jobs under stock and under history, then the simulator runs the same " +
        "servers, traces and jobs; prints both sides' job times and kills and how far the changes are apart " +
        "(about 10 minutes by default)",
    )
    .option("--servers <n>", "servers (a node manager each)", "8")
    .option("--minutes <m>", "testbed minutes per policy; jobs arrive in the first three quarters", "4")
    .option("--speedup <x>", "trace time per testbed time: at 120 a 5-minute trace step lasts 2.5 s", "120")
    .option("--seed <s>", "seed of the traces' replay points, the jobs and every random choice", "1")
    .option(
      "--traces <source>",
      "primary utilization: auto (real when ../shared/data is there, else generated), real, generated, or trace " +
        "files (a comma list, given to the servers in turn)",
      "auto",
    )
    .option("--history-days <d>", "days of each primary's history registered before its replay", "12")
    .option("--load <share>", "offered work as a share of the harvestable core-time while jobs arrive", "0.4")
    .option("--out <dir>", "directory for validation.md (and validation.json with --json)", "sim-results")
    .option("--keep", "keep the clusters' directories (daemon logs, traces, task outputs)")
    .option("--json", "print the report as JSON and write validation.json (progress still goes to stderr)")
    .action(
      action(async (o: ValidateFlags) => {
        const seed = Number(o.seed);
        if (!Number.isSafeInteger(seed) || seed < 0)
          throw new HarvestError("INVALID_ARGUMENT", `--seed must be an integer >= 0 (got ${JSON.stringify(o.seed)})`, {
            details: { flag: "--seed" },
          });
        const { runValidation } = await import("../labs/testbed-validate.js");
        const { reportText } = await import("../labs/testbed-report.js");
        const outcome = await runValidation({
          servers: positiveInt(o.servers, "--servers"),
          minutes: positiveNumber(o.minutes, "--minutes"),
          speedup: positiveNumber(o.speedup, "--speedup"),
          seed,
          traces: parseTraces(o.traces),
          historyDays: positiveNumber(o.historyDays, "--history-days"),
          load: positiveNumber(o.load, "--load"),
          out: o.out,
          json: o.json ?? false,
          keep: o.keep ?? false,
          command: commandLine(),
          onProgress: (m) => void process.stderr.write(m + "\n"),
        });
        if (outcome.workDir) process.stderr.write(`kept the clusters in ${outcome.workDir}\n`);
        print(o, outcome.report, () => reportText(outcome.report, outcome.files));
      }),
    );
}
