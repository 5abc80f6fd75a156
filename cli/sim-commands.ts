/**
 * `harvest sim ...`: the simulator's experiments. `compute` (task placement), `storage` (replica placement), `power`
 * (capping and power-aware placement), `grid` (compute and storage at every utilization level; `npm run experiments`)
 * and `cluster` (the generated cluster's calibration figures). Experiments show progress on stderr, print their
 * tables, and write a markdown table, a CSV and SVG plots to `--out` (default `sim-results/`).
 */
import type { Command } from "commander";
import { HarvestError } from "../common/errors.js";
import type { ClusterSummary } from "../sim/cluster-gen.js";
import type { ExperimentEvent, ExperimentOutcome, GridPreset } from "../sim/experiments.js";
import { UTILIZATION_LEVELS } from "../sim/model.js";
import type { TraceSource, UtilizationLevel } from "../sim/model.js";
import type { CappingMode, PowerDomainLevel, PowerPlacement } from "../sim/experiments/power/index.js";
import type { ComputePolicy, StoragePlacement } from "../sim/results.js";
import { action, commandLine, experimentText, oneOf, positiveInt, positiveNumber, print } from "./command-kit.js";
import { CLUSTERS_SEED_FLAG, GENERATED_TRACES_FLAG, parseTraceSource, SIM_JSON_FLAG } from "./sim-flags.js";
import { duration } from "./format.js";
import { parseShareFlag } from "./power-plan-command.js";
import { registerAdmissionCommand } from "./sim-admission-command.js";
import { registerCalibrationCommand } from "./sim-calibration-command.js";
import { registerSimLifetimeCommands } from "./sim-lifetime-commands.js";
import { registerStorageSweepCommand } from "./sim-storage-sweep.js";
import { registerNoticeCommand } from "./sim-notice-command.js";
import { registerVictimsCommand } from "./sim-victims-command.js";
import { registerValidateCommand } from "./testbed-command.js";

// The simulator's modules load ECharts (most of a second), so the actions import them when they run: every other
// `harvest` command starts without them.
const loadExperiments = () => import("../sim/experiments.js");

const COMPUTE_POLICIES: readonly ComputePolicy[] = ["stock", "stock-unaware", "history"];
const STORAGE_PLACEMENTS: readonly StoragePlacement[] = ["stock", "diversity"];
/** The experiments' default sizes (the full grid's: `GRID_PRESETS.full` in sim/experiments.ts). */
const COMPUTE_DEFAULTS = { servers: 1000, days: 14 };
const STORAGE_DEFAULTS = { servers: 10_000, days: 365 };
const CAPPING_MODES: readonly CappingMode[] = ["full-server", "per-container"];
const POWER_PLACEMENTS: readonly PowerPlacement[] = ["stock", "power-aware"];
/** What `--compare` says to a choice given beside it. */
const COMPARE_REFUSAL = {
  policy: "--compare runs all three policies; drop --policy",
  storage: "--compare runs both placements; drop --placement",
  power: (flag: string) => `--compare runs every capping and placement; drop --${flag}`,
};
/** The power experiment's default size (`POWER_DEFAULTS` in sim/experiments/power/experiment.ts). */
const POWER_DEFAULTS = { servers: 200, days: 7 };

/** 12,345 with `digits` decimals; "-" when not finite. */
function num(v: number, digits = 0): string {
  return Number.isFinite(v)
    ? v.toLocaleString("en-US", { minimumFractionDigits: digits, maximumFractionDigits: digits })
    : "-";
}

/** A share (0..1) as a percentage with one decimal. */
function pct(v: number): string {
  return Number.isFinite(v) ? `${(v * 100).toFixed(1)}%` : "-";
}

/** Where experiments write their reports unless told otherwise. */
export const DEFAULT_SIM_OUT = "sim-results";

/** Flags every experiment takes. */
interface SimFlags {
  servers?: string;
  days?: string;
  seed: string;
  utilization: string;
  traces: string;
  out: string;
  json?: boolean;
}

/** The flags of `sim cluster`. */
interface ClusterFlags extends Omit<SimFlags, "out"> {
  servers: string;
  days: string;
}

/** The flags of `sim sweep`: the seeds, load and utilization take comma lists; `--seed` is one seed. */
interface SweepFlags extends Omit<SimFlags, "seed"> {
  servers: string;
  days: string;
  seeds: string;
  seed?: string;
  load: string;
  reference?: string;
  killCost: string;
  maxAmShare: string;
  classFallback: string;
  saturationShare: string;
  jobLength: string;
  learnFromKills?: boolean;
  killedJobsLeave?: boolean;
  peakVariant: boolean;
}

// ------------------------------------------------------------------------------------------------ flag parsing

/** Utilization levels: "low", "medium,high" or "all". */
export function parseLevels(v: string, flag = "--utilization"): UtilizationLevel[] {
  if (v.trim() === "all") return [...UTILIZATION_LEVELS];
  const levels = v.split(",").map((s) => oneOf(s.trim(), [...UTILIZATION_LEVELS, "all"], flag));
  if (levels.includes("all")) return [...UTILIZATION_LEVELS];
  return UTILIZATION_LEVELS.filter((l) => levels.includes(l));
}

/** Replication factors: "3" or "3,4". */
export function parseReplications(v: string, flag = "--replication"): number[] {
  const factors = v.split(",").map((s) => positiveInt(s.trim(), flag));
  for (const f of factors)
    if (f > 10)
      throw new HarvestError("INVALID_ARGUMENT", `${flag} must be between 1 and 10 (got ${f})`, { details: { flag } });
  return [...new Set(factors)].sort((a, b) => a - b);
}

/** A seed: an integer in 0..2^32-1. */
export function parseSeed(v: string, flag = "--seed"): number {
  const n = Number(v);
  if (!Number.isInteger(n) || n < 0 || n > 0xffffffff)
    throw new HarvestError(
      "INVALID_ARGUMENT",
      `${flag} must be an integer in 0..4294967295 (got ${JSON.stringify(v)})`,
      {
        details: { flag },
      },
    );
  return n;
}

/** True when the user gave `--<name>` on the command line (not a default). */
function given(cmd: Command, name: string): boolean {
  return cmd.getOptionValueSource(name) === "cli";
}

/**
 * The values of `--<name>` a run covers: all of `allowed` under `--compare` (which refuses the flag given beside it,
 * with `refusal`), else the one value `v`.
 */
function compareOrOne<T extends string>(
  compare: boolean | undefined,
  cmd: Command,
  name: string,
  v: string,
  allowed: readonly T[],
  refusal: string,
): readonly T[] {
  if (compare && given(cmd, name))
    throw new HarvestError("INVALID_ARGUMENT", refusal, { details: { flag: `--${name}` } });
  return compare ? allowed : [oneOf<T>(v, allowed, `--${name}`)];
}

function commonFlags(o: SimFlags, defaults: { servers: number; days: number }) {
  return {
    servers: positiveInt(o.servers ?? String(defaults.servers), "--servers"),
    days: positiveInt(o.days ?? String(defaults.days), "--days"),
    seed: parseSeed(o.seed),
    levels: parseLevels(o.utilization),
    traces: parseTraceSource(o.traces),
    out: o.out,
  };
}

function addCommonFlags(cmd: Command, defaults: { servers: number; days: number }): Command {
  return cmd
    .option("--servers <n>", `servers in the simulated cluster (default: ${num(defaults.servers)})`)
    .option("--days <d>", `simulated days after the 30 days of history (default: ${defaults.days})`)
    .option("--seed <s>", "seed of the cluster, the jobs and every random choice", "1")
    .option("--utilization <level>", "average primary utilization: low, medium, high, a comma list, or all", "medium")
    .option(...GENERATED_TRACES_FLAG)
    .option("--out <dir>", "directory for the markdown table, CSV and SVG plots", DEFAULT_SIM_OUT)
    .option(...SIM_JSON_FLAG);
}

// ------------------------------------------------------------------------------------------------ progress

/**
 * Shows experiment progress on `out`: one line updated in place on a terminal; elsewhere (CI logs, pipes) a line
 * every `intervalMs`, plus every note and every finished run.
 */
export class ProgressReporter {
  private lastLineMs = 0;
  private inPlace = false;

  constructor(
    private readonly out: NodeJS.WriteStream = process.stderr,
    private readonly intervalMs = 10_000,
  ) {}

  /** The experiment's event handler. */
  readonly onProgress = (e: ExperimentEvent): void => {
    switch (e.kind) {
      case "note":
        this.line(e.message);
        break;
      case "progress": {
        const text =
          `[${e.run}/${e.runs}] ${e.label}  ${Math.floor(e.fraction * 100)}%  ` +
          `${num(e.events)} events  ${num(e.eventsPerS)} events/s  ${duration(e.elapsedMs)}`;
        if (this.out.isTTY) {
          this.out.write(`\r\x1b[K${text}`);
          this.inPlace = true;
        } else if (e.elapsedMs - this.lastLineMs >= this.intervalMs) {
          this.lastLineMs = e.elapsedMs;
          this.out.write(text + "\n");
        }
        break;
      }
      case "done":
        this.lastLineMs = 0;
        this.line(
          `[${e.run}/${e.runs}] ${e.label}  done: ${num(e.events)} events in ${duration(e.wallMs)} ` +
            `(${num(e.eventsPerS)} events/s)`,
        );
        break;
    }
  };

  /** A permanent line (replacing the in-place one on a terminal). */
  private line(text: string): void {
    this.out.write((this.inPlace ? "\r\x1b[K" : "") + text + "\n");
    this.inPlace = false;
  }
}

// ------------------------------------------------------------------------------------------------ output

function outcomeText(title: string, o: ExperimentOutcome<unknown>): string {
  return experimentText(`${title} (${o.traces} traces)`, o);
}

function outcomeJson(o: ExperimentOutcome<unknown>): unknown {
  return { traces: o.traces, results: o.results, files: o.files };
}

/** Prints an experiment's outcome: JSON with --json, else its summary under `title`. */
function printOutcome(o: { json?: boolean }, title: string, outcome: ExperimentOutcome<unknown>): void {
  print(o, outcomeJson(outcome), () => outcomeText(title, outcome));
}

/** What every experiment is run with from the command line: the command shown in its report, progress on stderr. */
function reporting(): { command: string; onProgress: (e: ExperimentEvent) => void } {
  return { command: commandLine(), onProgress: new ProgressReporter().onProgress };
}

function clusterText(s: ClusterSummary, traces: TraceSource): string {
  const patterns = (r: Record<string, number>): string =>
    Object.entries(r)
      .map(([k, v]) => `${k} ${pct(v)}`)
      .join(", ");
  return [
    `${num(s.servers)} servers in ${num(s.racks)} racks, ${num(s.tenants)} primary tenants in ${s.environments} environments (${traces} traces)`,
    `tenant size: median ${s.medianTenantServers} servers, largest ${s.largestTenantServers}`,
    `tenants per pattern: ${patterns(s.tenantShare)}`,
    `servers per pattern: ${patterns(s.serverShare)}  (seeds/004: periodic about 40%, periodic + constant about 75%)`,
    `mean server CPU utilization: ${num(s.meanUtilizationPct, 1)}%`,
    `reimages: ${num(s.reimages)}, ${num(s.reimagesPerServerMonth, 3)} per server per month`,
    `servers reimaged at most once a month: ${pct(s.serversAtMostOneReimagePerMonth)} (seeds/004: at least 90%); more than twice: ${pct(s.serversAboveTwoReimagesPerMonth)}`,
    `tenants reimaged at most once per server per month: ${pct(s.tenantsAtMostOneReimagePerServerMonth)} (seeds/004: at least 80%)`,
    `reimages correlated within their environment: ${pct(s.correlatedReimageShare)}`,
    `month-to-month rank correlation of tenants' reimage rates: ${Number.isFinite(s.reimageRankSpearman) ? num(s.reimageRankSpearman, 2) : "- (needs two whole months)"}`,
  ].join("\n");
}

// ------------------------------------------------------------------------------------------------ commands

/** Adds `harvest sim` and its subcommands. */
export function registerSimCommands(program: Command): void {
  const sim = program
    .command("sim")
    .description(
      "simulated experiments at datacenter scale: task placement, replica placement, power capping, the comparison grid",
    );
  registerValidateCommand(sim);

  addCommonFlags(sim.command("compute"), COMPUTE_DEFAULTS)
    .description(
      "job execution time, task kills and wasted core-hours of a task placement policy on a simulated cluster",
    )
    .option(
      "--policy <policy>",
      "task placement: stock (primary-aware, yields), stock-unaware (ignores the primary, never kills) or history",
      "history",
    )
    .option("--compare", "run all three policies on the same cluster and job stream")
    .option(
      "--kill-cost <model>",
      "what a kill costs: modelled (lags, launches, job managers) or none (instant)",
      "modelled",
    )
    .action(
      action(async (o: SimFlags & { policy: string; compare?: boolean; killCost: string }, cmd: Command) => {
        const policies = compareOrOne(o.compare, cmd, "policy", o.policy, COMPUTE_POLICIES, COMPARE_REFUSAL.policy);
        const flags = commonFlags(o, COMPUTE_DEFAULTS);
        const { runComputeExperiment } = await loadExperiments();
        const outcome = await runComputeExperiment({
          ...flags,
          policies,
          killCost: oneOf(o.killCost, ["modelled", "none"] as const, "--kill-cost"),
          ...reporting(),
        });
        printOutcome(o, "Compute experiment", outcome);
      }),
    );

  sim
    .command("sweep")
    .description(
      "history-based placement vs both stock baselines over offered load x primary utilization (the same jobs at " +
        "every level) x seeds, under the kill-cost model; on each cell's mean over the seeds: the gap to the " +
        "primary-unaware bound that history closes, whether it never loses to stock, heat maps (npm run experiments)",
    )
    .option("--servers <n>", "servers in every cluster", "200")
    .option("--days <d>", "simulated days after the 30 days of history", "10")
    .option(
      "--seeds <list>",
      "seeds, each a whole sweep (clusters, jobs, every random choice); tables show means",
      "1,2,3",
    )
    .option("--seed <s>", "a single seed: short for --seeds <s>")
    .option(
      "--load <list>",
      "offered loads, fractions of the reference cluster's harvestable core-hours",
      "0.2,0.4,0.6,0.8,1.0",
    )
    .option("--utilization <list>", "average primary utilization of each level, %", "15,30,45,55,65")
    .option(
      "--reference <pct>",
      "utilization of the cluster the loads are fractions of, % (default: the highest level)",
    )
    .option("--kill-cost <model>", "what a kill costs: modelled or none (instant)", "modelled")
    .option(
      "--max-am-share <share>",
      "job managers hold at most this share of the harvestable cores (1: no limit)",
      "0.1",
    )
    .option(
      "--class-fallback <fallback>",
      "history when no class has room: stock (place as stock) or wait (seeds/004)",
      "stock",
    )
    .option(
      "--saturation-share <share>",
      "history places as stock once Harvest holds this share of what the primaries leave (1: never)",
      "0.65",
    )
    .option("--job-length <rule>", "history's job types: terciles (seeds/004) or per-class (bursts)", "terciles")
    .option("--learn-from-kills", "history's long jobs avoid servers that just killed work (off by default)")
    .option("--no-killed-jobs-leave", "history's confined jobs stay in their classes after a primary killed a task")
    .option("--no-peak-variant", "skip the history runs with the median-daily-max peak")
    .option(...GENERATED_TRACES_FLAG)
    .option("--out <dir>", "directory for compute-sweep.md, .csv and the heat maps", DEFAULT_SIM_OUT)
    .option(...SIM_JSON_FLAG)
    .action(
      action(async (o: SweepFlags, cmd: Command) => {
        const list = (v: string, flag: string): number[] => v.split(",").map((x) => positiveNumber(x.trim(), flag));
        if (o.seed !== undefined && given(cmd, "seeds"))
          throw new HarvestError("INVALID_ARGUMENT", "--seed is short for --seeds <s>; give one of them", {
            details: { flag: "--seed" },
          });
        const seeds =
          o.seed !== undefined ? [parseSeed(o.seed)] : o.seeds.split(",").map((x) => parseSeed(x.trim(), "--seeds"));
        const { runComputeSweep } = await import("../sim/experiments/sweep/compute-sweep.js");
        const outcome = await runComputeSweep({
          servers: positiveInt(o.servers, "--servers"),
          days: positiveInt(o.days, "--days"),
          seeds,
          loads: list(o.load, "--load"),
          utilizationPct: list(o.utilization, "--utilization"),
          ...(o.reference !== undefined ? { referencePct: positiveNumber(o.reference, "--reference") } : {}),
          killCost: oneOf(o.killCost, ["modelled", "none"] as const, "--kill-cost"),
          maxAmShare: positiveNumber(o.maxAmShare, "--max-am-share"),
          classFallback: oneOf(o.classFallback, ["stock", "wait"] as const, "--class-fallback"),
          saturationShare: positiveNumber(o.saturationShare, "--saturation-share"),
          jobLength: oneOf(o.jobLength, ["terciles", "per-class"] as const, "--job-length"),
          learnFromKills: o.learnFromKills === true,
          killedJobsLeaveClasses: o.killedJobsLeave !== false,
          peakVariant: o.peakVariant,
          traces: parseTraceSource(o.traces),
          out: o.out,
          ...reporting(),
        });
        print(
          o,
          {
            runs: outcome.runs.map((r) => ({ ...r, result: { ...r.result } })),
            cells: outcome.cells,
            files: outcome.files,
            traces: outcome.traces,
          },
          () => [outcome.report.summary, "", ...outcome.files.map((f) => `wrote ${f}`)].join("\n"),
        );
      }),
    );

  addCommonFlags(sim.command("storage"), STORAGE_DEFAULTS)
    .description(
      "blocks lost, unavailable accesses and re-replication traffic of a replica placement on a simulated cluster",
    )
    .option("--placement <placement>", "replica placement: stock or diversity", "diversity")
    .option("--replication <r>", "replication factor: 3, 4, or a comma list", "3")
    .option("--compare", "run both placements on the same cluster")
    .option("--bandwidth <MBps>", "re-replication bandwidth each server gives, MB/s", "50")
    .action(
      action(
        async (
          o: SimFlags & { placement: string; replication: string; bandwidth: string; compare?: boolean },
          cmd: Command,
        ) => {
          const placements = compareOrOne(
            o.compare,
            cmd,
            "placement",
            o.placement,
            STORAGE_PLACEMENTS,
            COMPARE_REFUSAL.storage,
          );
          const flags = commonFlags(o, STORAGE_DEFAULTS);
          const { runStorageExperiment } = await loadExperiments();
          const outcome = await runStorageExperiment({
            ...flags,
            placements,
            replications: parseReplications(o.replication),
            reReplicationMBps: positiveNumber(o.bandwidth, "--bandwidth"),
            ...reporting(),
          });
          printOutcome(o, "Storage experiment", outcome);
        },
      ),
    );

  registerStorageSweepCommand(sim, { reporter: () => new ProgressReporter(), commandLine, outDir: DEFAULT_SIM_OUT });
  registerSimLifetimeCommands(sim, { reporter: () => new ProgressReporter(), commandLine });
  registerAdmissionCommand(sim, { reporter: () => new ProgressReporter(), commandLine });
  registerVictimsCommand(sim, { reporter: () => new ProgressReporter(), commandLine });
  registerNoticeCommand(sim, { reporter: () => new ProgressReporter(), commandLine });
  registerCalibrationCommand(sim, { reporter: () => new ProgressReporter(), commandLine });

  addCommonFlags(sim.command("power"), POWER_DEFAULTS)
    .description(
      "capping events, time over budget, throttled core-hours of critical and non-critical work, task kills and the " +
        "oversubscription the planner finds, for a capping mode and a placement on a simulated cluster",
    )
    .option(
      "--capping <mode>",
      "how servers get under budget: full-server (RAPL-like) or per-container",
      "per-container",
    )
    .option("--placement <placement>", "secondary task placement: stock or power-aware", "power-aware")
    .option("--compare", "run both capping modes with both placements on the same cluster and budgets")
    .option(
      "--budget-fraction <share>",
      "domain budget as a share of its servers' nameplate, e.g. 85% (default: planned)",
    )
    .option("--oversubscription <share>", "domain budget this far below nameplate, e.g. 15% (default: planned)")
    .option("--plan-buffer <share>", "buffer over the planner's lowest acceptable budget (seeds/000 step 5)", "0")
    .option("--domain <level>", "the power domains with budgets: chassis (12 servers) or rack (36)", "chassis")
    .option("--profile <ids>", "hardware profiles, a comma list given to racks in turn (default: dell-r740-xeon-8180)")
    .option("--load <share>", "secondary work offered, as a share of the harvestable core-hours", "0.7")
    .option("--period <ms>", "control period of the capping loops, ms", "1000")
    .action(
      action(
        async (
          o: SimFlags & {
            capping: string;
            placement: string;
            compare?: boolean;
            budgetFraction?: string;
            oversubscription?: string;
            planBuffer: string;
            domain: string;
            profile?: string;
            load: string;
            period: string;
          },
          cmd: Command,
        ) => {
          // Both refusals come before the budget flags' conflict.
          for (const flag of ["capping", "placement"])
            if (o.compare && given(cmd, flag))
              throw new HarvestError("INVALID_ARGUMENT", COMPARE_REFUSAL.power(flag), {
                details: { flag: `--${flag}` },
              });
          if (o.budgetFraction !== undefined && o.oversubscription !== undefined)
            throw new HarvestError(
              "INVALID_ARGUMENT",
              "--budget-fraction and --oversubscription both set the budget; give one",
              { details: { flag: "--oversubscription" } },
            );
          const refusal = COMPARE_REFUSAL.power;
          const cappings = compareOrOne(o.compare, cmd, "capping", o.capping, CAPPING_MODES, refusal("capping"));
          const placements = compareOrOne(
            o.compare,
            cmd,
            "placement",
            o.placement,
            POWER_PLACEMENTS,
            refusal("placement"),
          );
          const fraction = (v: string, flag: string): number => {
            const share = parseShareFlag(v, flag);
            if (!(share > 0 && share <= 1))
              throw new HarvestError("INVALID_ARGUMENT", `${flag} must be above 0% and at most 100% (got ${v})`, {
                details: { flag },
              });
            return share;
          };
          let budgetFraction: number | undefined;
          if (o.budgetFraction !== undefined) budgetFraction = fraction(o.budgetFraction, "--budget-fraction");
          if (o.oversubscription !== undefined) {
            const below = parseShareFlag(o.oversubscription, "--oversubscription");
            if (!(below >= 0 && below < 1))
              throw new HarvestError(
                "INVALID_ARGUMENT",
                `--oversubscription must be at least 0% and below 100% (got ${o.oversubscription})`,
                { details: { flag: "--oversubscription" } },
              );
            budgetFraction = 1 - below;
          }
          const planBufferShare = parseShareFlag(o.planBuffer, "--plan-buffer");
          if (planBufferShare < 0)
            throw new HarvestError("INVALID_ARGUMENT", `--plan-buffer must be >= 0 (got ${o.planBuffer})`, {
              details: { flag: "--plan-buffer" },
            });
          const flags = commonFlags(o, POWER_DEFAULTS);
          const { runPowerExperiment } = await import("../sim/experiments/power/index.js");
          const outcome = await runPowerExperiment({
            ...flags,
            cappings,
            placements,
            power: {
              ...(budgetFraction !== undefined ? { budgetFraction } : {}),
              planBufferShare,
              domainLevel: oneOf<PowerDomainLevel>(o.domain, ["chassis", "rack"], "--domain"),
              ...(o.profile !== undefined ? { profiles: o.profile.split(",").map((p) => p.trim()) } : {}),
              secondaryLoad: parseShareFlag(o.load, "--load"),
              controlPeriodMs: positiveInt(o.period, "--period"),
            },
            ...reporting(),
          });
          printOutcome(o, "Power experiment", outcome);
        },
      ),
    );

  sim
    .command("grid")
    .description(
      "the comparison grid at every utilization level: compute (all three policies) and storage (both placements, " +
        "replication 3 and 4); full: 1,000 servers x 14 days and 10,000 servers x 365 days (npm run experiments)",
    )
    .option("--preset <preset>", "full, or small (a few dozen servers for a few days: seconds)", "full")
    .option(...CLUSTERS_SEED_FLAG)
    .option(...GENERATED_TRACES_FLAG)
    .option("--out <dir>", "directory for compute.* and storage.* (tables, CSV, plots)", DEFAULT_SIM_OUT)
    .option(...SIM_JSON_FLAG)
    .action(
      action(async (o: { preset: string; seed: string; traces: string; out: string; json?: boolean }) => {
        const preset = oneOf<GridPreset>(o.preset, ["small", "full"], "--preset");
        const seed = parseSeed(o.seed);
        const traces = parseTraceSource(o.traces);
        const { runGrid } = await loadExperiments();
        const outcome = await runGrid({
          preset,
          seed,
          traces,
          out: o.out,
          ...reporting(),
        });
        print(o, { compute: outcomeJson(outcome.compute), storage: outcomeJson(outcome.storage) }, () =>
          [outcomeText("Compute", outcome.compute), "", outcomeText("Storage", outcome.storage)].join("\n"),
        );
      }),
    );

  sim
    .command("cluster")
    .description("generate a simulated cluster and print its calibration figures (tenant patterns, reimage rates)")
    .option("--servers <n>", "servers", "1000")
    .option("--days <d>", "simulated days after the 30 days of history", "30")
    .option("--seed <s>", "seed", "1")
    .option("--utilization <level>", "average primary utilization: low, medium or high", "medium")
    .option(...GENERATED_TRACES_FLAG)
    .option("--json", "machine-readable output")
    .action(
      action(async (o: ClusterFlags) => {
        const options = {
          servers: positiveInt(o.servers, "--servers"),
          days: positiveInt(o.days, "--days"),
          seed: parseSeed(o.seed),
          level: oneOf<UtilizationLevel>(o.utilization, UTILIZATION_LEVELS, "--utilization"),
          traces: parseTraceSource(o.traces),
          onProgress: new ProgressReporter().onProgress,
        };
        const { buildCluster } = await loadExperiments();
        const { summarizeCluster } = await import("../sim/cluster-gen.js");
        const { cluster, traces } = await buildCluster(options);
        const summary = summarizeCluster(cluster);
        print(o, { traces, ...summary }, () => clusterText(summary, traces));
      }),
    );
}
