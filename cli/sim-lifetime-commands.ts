/**
 * `harvest sim lifetime` and `harvest sim drain`: lifetime-aware node choice (NILAS, LAVA) against stock, and graceful
 * drains before planned reimages (LARS order against an arbitrary order and no drain), both from seeds/002, on a
 * simulated cluster (sim/experiments/lifetime/, sim/experiments/drain/). Like the other `sim` experiments they show
 * progress on stderr, print their tables and write a markdown report, a CSV, a JSON file and an SVG plot to `--out`.
 */
import type { Command } from "commander";
import type { DrainExperimentOutcome } from "../sim/experiments/drain/drain-experiment.js";
import type { LifetimeExperimentOutcome, LifetimeVariant } from "../sim/experiments/lifetime/lifetime-experiment.js";
import { UTILIZATION_LEVELS } from "../sim/model.js";
import type { UtilizationLevel } from "../sim/model.js";
import { action, badFlag, experimentText, oneOf, positiveInt, positiveNumber, print } from "./command-kit.js";
import { parseTraceSource, REAL_TRACES_FLAG, SIM_JSON_FLAG } from "./sim-flags.js";
import type { SimCommandKit } from "./sim-storage-sweep.js";

/** What these subcommands take from the `sim` command family that registers them (its progress and command line). */
export type SimLifetimeKit = Omit<SimCommandKit, "outDir">;

/** Where the reports go without `--out`. */
export const DEFAULT_LIFETIME_OUT = "docs/results/lifetime";
export const DEFAULT_DRAIN_OUT = "docs/results/drain";

/** A seed: an integer in 0..2^32-1. */
function seedOf(v: string): number {
  const n = Number(v);
  if (!Number.isInteger(n) || n < 0 || n > 0xffffffff)
    badFlag("--seed", `must be an integer in 0..4294967295 (got ${JSON.stringify(v)})`);
  return n;
}

/** A number >= 0, or INVALID_ARGUMENT naming the flag. */
function nonNegative(v: string, flag: string): number {
  const n = v.trim() === "" ? NaN : Number(v);
  if (!(Number.isFinite(n) && n >= 0)) badFlag(flag, `must be a number >= 0 (got ${JSON.stringify(v)})`);
  return n;
}

/** The flags both commands take. */
interface SizeFlags {
  servers: string;
  days: string;
  load: string;
  seed: string;
  utilization: string;
  traces: string;
  json?: boolean;
}

function sizeOptions(o: SizeFlags) {
  return {
    servers: positiveInt(o.servers, "--servers"),
    days: positiveNumber(o.days, "--days"),
    load: positiveNumber(o.load, "--load"),
    seed: seedOf(o.seed),
    level: oneOf<UtilizationLevel>(o.utilization, UTILIZATION_LEVELS, "--utilization"),
    traces: parseTraceSource(o.traces),
  };
}

function addSizeFlags(cmd: Command): Command {
  return cmd
    .option("--servers <n>", "servers in the simulated cluster", "100")
    .option("--days <d>", "simulated days after the 30 days of history", "7")
    .option("--load <share>", "offered batch load, a fraction of the harvestable core-hours", "0.4")
    .option("--seed <s>", "seed of the cluster, the jobs, the reclaims or reimages and every random choice", "1")
    .option("--utilization <level>", "average primary utilization: low, medium or high", "medium")
    .option(...REAL_TRACES_FLAG)
    .option(...SIM_JSON_FLAG);
}

function lifetimeText(o: LifetimeExperimentOutcome): string {
  return experimentText(`Lifetime-aware node choice (${o.traces} traces)`, o);
}

function drainText(o: DrainExperimentOutcome): string {
  return experimentText(`Graceful drains before planned reimages (${o.traces} traces, ${o.events.length} reimages)`, o);
}

/** Adds `lifetime` and `drain` to the `sim` command. */
export function registerSimLifetimeCommands(sim: Command, kit: SimLifetimeKit): void {
  addSizeFlags(sim.command("lifetime"))
    .description(
      "empty servers, work killed by whole-server reclaims and job times under lifetime-aware node choice " +
        "(NILAS, LAVA; seeds/002) against stock, with learned or oracle lifetimes",
    )
    .option("--compare", "run stock, NILAS and LAVA, each with learned and with oracle lifetimes (five runs)")
    .option("--node-choice <kind>", "without --compare: nilas or lava, run beside stock", "nilas")
    .option(
      "--lifetimes <source>",
      "without --compare: learned (the lifetime model) or oracle (true durations)",
      "learned",
    )
    .option("--reclaims-per-day <n>", "whole-server reclaims per server per day", String(1 / 7))
    .option("--reclaim-minutes <m>", "how long a reclaim keeps its server, minutes", "30")
    .option(
      "--reclaim-choice <how>",
      "random (a primary's spike: nobody chooses the server) or emptiest (maintenance that may choose)",
      "random",
    )
    .option("--out <dir>", "directory for the markdown table, CSV, JSON and SVG plot", DEFAULT_LIFETIME_OUT)
    .action(
      action(
        async (
          o: SizeFlags & {
            compare?: boolean;
            nodeChoice: string;
            lifetimes: string;
            reclaimsPerDay: string;
            reclaimMinutes: string;
            reclaimChoice: string;
            out: string;
          },
          cmd: Command,
        ) => {
          for (const flag of ["nodeChoice", "lifetimes"])
            if (o.compare && cmd.getOptionValueSource(flag) === "cli")
              badFlag(`--${flag === "nodeChoice" ? "node-choice" : flag}`, "is for a single run; drop it or --compare");
          const single: LifetimeVariant = {
            nodeChoice: oneOf(o.nodeChoice, ["nilas", "lava"] as const, "--node-choice"),
            lifetimes: oneOf(o.lifetimes, ["learned", "oracle"] as const, "--lifetimes"),
          };
          const { LIFETIME_VARIANTS, lifetimeJson, resolveLifetimeExperimentOptions, runLifetimeExperiment } =
            await import("../sim/experiments/lifetime/lifetime-experiment.js");
          const options = {
            ...sizeOptions(o),
            reclaimsPerServerPerDay: nonNegative(o.reclaimsPerDay, "--reclaims-per-day"),
            reclaimDurationMs: positiveNumber(o.reclaimMinutes, "--reclaim-minutes") * 60_000,
            reclaimChoice: oneOf(o.reclaimChoice, ["random", "emptiest"] as const, "--reclaim-choice"),
            variants: o.compare
              ? LIFETIME_VARIANTS
              : [{ nodeChoice: "stock" as const, lifetimes: "learned" as const }, single],
          };
          const outcome = await runLifetimeExperiment({
            ...options,
            out: o.out,
            command: kit.commandLine(),
            onProgress: kit.reporter().onProgress,
          });
          const json = lifetimeJson(outcome.runs, resolveLifetimeExperimentOptions(options), outcome.traces);
          print(o, { ...(json as object), files: outcome.files }, () => lifetimeText(outcome));
        },
      ),
    );

  addSizeFlags(sim.command("drain"))
    .description(
      "work killed by planned reimages without a drain, and with a graceful drain in LARS order (seeds/002) or an " +
        "arbitrary order, each at the resource manager's preemption rate and at a rate that binds",
    )
    .option(
      "--reimage-rate <n>",
      "planned reimages per server per day, or cluster (the generated cluster's own schedule)",
      String(1 / 7),
    )
    .option("--notice-minutes <m>", "how long before a reimage it is announced, minutes", "30")
    .option("--outage-minutes <m>", "how long a reimage keeps its server, minutes", "30")
    .option("--step-seconds <s>", "the drain's step, seconds", "10")
    .option("--preemptions-per-minute <list>", "drain preemption rates per server to run, per minute", "60,1")
    .option("--out <dir>", "directory for the markdown table, CSV, JSON and SVG plot", DEFAULT_DRAIN_OUT)
    .action(
      action(
        async (
          o: SizeFlags & {
            reimageRate: string;
            noticeMinutes: string;
            outageMinutes: string;
            stepSeconds: string;
            preemptionsPerMinute: string;
            out: string;
          },
        ) => {
          const rates = o.preemptionsPerMinute
            .split(",")
            .map((v) => positiveNumber(v.trim(), "--preemptions-per-minute") / 60);
          const options = {
            ...sizeOptions(o),
            reimages:
              o.reimageRate === "cluster" ? ("cluster" as const) : positiveNumber(o.reimageRate, "--reimage-rate"),
            noticeMs: nonNegative(o.noticeMinutes, "--notice-minutes") * 60_000,
            outageMs: nonNegative(o.outageMinutes, "--outage-minutes") * 60_000,
            stepIntervalMs: positiveNumber(o.stepSeconds, "--step-seconds") * 1000,
            preemptionsPerSecond: rates,
          };
          const { drainJson, resolveDrainExperimentOptions, runDrainExperiment } =
            await import("../sim/experiments/drain/drain-experiment.js");
          const outcome = await runDrainExperiment({
            ...options,
            out: o.out,
            command: kit.commandLine(),
            onProgress: kit.reporter().onProgress,
          });
          const resolved = resolveDrainExperimentOptions(options);
          const json = drainJson(outcome.runs, resolved, outcome.traces, outcome.events.length, outcome.storage);
          print(o, { ...(json as object), files: outcome.files }, () => drainText(outcome));
        },
      ),
    );
}
