/**
 * Accuracy of the per-container power regression (nodemanager/policy/power-model.ts, after seeds/001 section 3) on measured
 * data: the Kepler nx12 stress-ng set in `../shared/data/kepler_nx12_stressng` (one 2-socket Xeon E5-2667 v3 server,
 * whole-server ACPI watts every 3 s beside CPU time, cgroup memory and hardware counters; the ACPI and RAPL files are
 * joined on `timestamp`). It is a single server, so the regression is fitted on the server's total usage, which is
 * exactly what the node manager fits (the usage summed over the entities); the per-entity split cannot be checked
 * here, since nothing measures a container's own watts.
 *
 * Models, each fitted on training time ranges and scored on held-back ones (time-based splits only: neighbouring
 * 3 s samples are nearly copies, so a random split would flatter every model):
 * - `nnls-seed`: the PowerModel with the seed's features (CPU cores, memory MB; this data has no disk or network
 *   columns, so those stay 0 and get no weight);
 * - `nnls-counters`: the PowerModel with the hardware counters added (cycles, instructions, cache misses per second);
 * - baselines on CPU alone: `ols-cpu`, the linear CPU-only model with a free intercept (the data README's
 *   216.4 W + 0.0041 W per bpf_cpu_time_us); `idle-linear`, the SPECpower-profile style idle + slope x utilization
 *   with the idle measured; `profile-curve`, an 11-point SPECpower-style profile (idle and 10 load levels) binned from
 *   the training data and read through profileWatts, as the model meter reads a server.
 * Idle ("the static part the meter knows") is the 1st percentile of the training watts for every model that needs one.
 *
 * Splits: train on the first `--train-share` of the time and test on the rest; and blocked k-fold (`--folds`
 * contiguous time ranges, each one tested with the model fitted on the others; the pooled figure scores every sample
 * exactly once). Plus the online mode the node manager runs: walk the samples in time order, predict each one with the
 * current fit, then observe it (window `--window` samples, refit every `--refit-every`), idle the lowest watts so far.
 *
 * Units read from the files: bpf_cpu_time_us is taken as CPU milliseconds per second (so /1000 = busy cores; its
 * 5-95 % range is 1.3k-28.9k on a 32-thread machine); cpu_cycles, cpu_instructions and cache_miss as counts per
 * second; cgroupfs_memory_usage_bytes as bytes. The regression is invariant to a constant factor on any feature.
 */
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { HarvestError } from "../common/errors.js";
import { sharedDataDir } from "../common/paths.js";
import { PROFILE_LOAD_LEVELS, profileWatts } from "../common/power-profiles.js";
import type { PowerProfile } from "../common/power-profiles.js";
import { PowerModel, SEED_USAGE_FEATURES } from "../nodemanager/index.js";
import type { EntityUsage, UsageFeature } from "../nodemanager/index.js";
import type { BenchDefinition, BenchReport } from "./definition.js";
import { BenchUsageError, parseFlags } from "./flags.js";
import type { FlagSpec, Flags } from "./flags.js";
import { fmt, quantile, table } from "./report.js";

const FLAGS = {
  folds: { kind: "int", default: 5, min: 2, help: "contiguous time ranges of the blocked k-fold cross-validation" },
  "train-share": { kind: "number", default: 0.7, min: 0.05, help: "share of time trained on in the hold-out split" },
  window: { kind: "int", default: 600, min: 2, help: "samples in the online model's sliding window (3 s each)" },
  "refit-every": { kind: "int", default: 10, min: 1, help: "online model: refit after this many new samples" },
} as const satisfies Record<string, FlagSpec>;

type PowerModelBenchFlags = Flags<typeof FLAGS>;

/** The Kepler folder under the shared data directory. */
export const KEPLER_RELATIVE_DIR = "kepler_nx12_stressng";
const ACPI_FILE = "preprocess_abs_default_acpi_Basic.csv";
const RAPL_FILE = "preprocess_abs_default_rapl_Basic.csv";
/** Hardware threads of the nx12 server (2 x Xeon E5-2667 v3: 8 cores, 16 threads per socket). */
export const KEPLER_HW_THREADS = 32;
/** Seeds/001 reports the share of samples estimated within this error. */
const GOOD_ERROR_SHARE = 0.1;
/** Idle watts = this quantile of the training watts. */
const IDLE_QUANTILE = 0.01;

/** One joined 3 s sample of the Kepler data. */
export interface KeplerSample {
  timeSec: number;
  /** Whole-server watts from the ACPI meter. */
  platformWatts: number;
  /** RAPL package and DRAM watts (for reference; not a model input). */
  packageWatts: number;
  dramWatts: number;
  /** The server's usage in the power model's features. */
  usage: EntityUsage;
}

/** The Kepler folder, or undefined when the shared data (or that folder) is absent. */
export function keplerDataDir(): string | undefined {
  const root = sharedDataDir();
  if (root === undefined) return undefined;
  const dir = join(root, KEPLER_RELATIVE_DIR);
  return existsSync(join(dir, ACPI_FILE)) && existsSync(join(dir, RAPL_FILE)) ? dir : undefined;
}

/** A parsed CSV with a header: column index by name and rows of numbers, with their 1-based line numbers. */
interface NumericCsv {
  column: Map<string, number>;
  rows: { line: number; values: number[] }[];
}

function readNumericCsv(file: string, required: readonly string[]): NumericCsv {
  let text: string;
  try {
    text = readFileSync(file, "utf8");
  } catch (err) {
    throw new HarvestError("CONFIG_INVALID", `cannot read ${file}: ${(err as Error).message}`, {
      details: { field: "source", file },
      cause: err,
    });
  }
  const malformed = (line: number, reason: string): HarvestError =>
    new HarvestError("TRACE_MALFORMED", `${file}:${line}: ${reason}`, {
      details: { file, line: String(line), reason },
    });
  const lines = text.replace(/^\uFEFF/, "").split(/\r?\n/);
  if (lines[lines.length - 1] === "") lines.pop();
  const header = (lines[0] ?? "").split(",").map((h) => h.trim());
  const column = new Map(header.map((h, i) => [h, i]));
  const missing = required.filter((c) => !column.has(c));
  if (missing.length > 0) throw malformed(1, `header lacks column(s) ${missing.join(", ")}`);
  const rows: NumericCsv["rows"] = [];
  for (let i = 1; i < lines.length; i++) {
    const parts = lines[i]!.split(",");
    if (parts.length !== header.length)
      throw malformed(i + 1, `${parts.length} field(s) where the header has ${header.length} (truncated row?)`);
    const values = parts.map(Number);
    for (const c of required) {
      const v = values[column.get(c)!]!;
      if (!Number.isFinite(v) || parts[column.get(c)!]!.trim() === "")
        throw malformed(i + 1, `${c} is ${JSON.stringify(parts[column.get(c)!])}, not a number`);
    }
    rows.push({ line: i + 1, values });
  }
  if (rows.length === 0) throw malformed(2, "no rows under the header");
  return { column, rows };
}

/**
 * Loads and joins the Kepler ACPI and RAPL files of `dir` on `timestamp` (rows of one file without a partner in the
 * other are dropped), in time order. Throws TRACE_MALFORMED with the line for a truncated or malformed row.
 */
export function loadKeplerSamples(dir: string): KeplerSample[] {
  const usageColumns = [
    "timestamp",
    "bpf_cpu_time_us",
    "cgroupfs_memory_usage_bytes",
    "cpu_cycles",
    "cpu_instructions",
    "cache_miss",
  ];
  const acpi = readNumericCsv(join(dir, ACPI_FILE), [...usageColumns, "platform_power"]);
  const rapl = readNumericCsv(join(dir, RAPL_FILE), ["timestamp", "package_power", "dram_power"]);
  const raplByTime = new Map<number, number[]>();
  const rt = rapl.column.get("timestamp")!;
  for (const r of rapl.rows) raplByTime.set(r.values[rt]!, r.values);
  const col = (name: string): number => acpi.column.get(name)!;
  const samples: KeplerSample[] = [];
  for (const r of acpi.rows) {
    const v = r.values;
    const timeSec = v[col("timestamp")]!;
    const partner = raplByTime.get(timeSec);
    if (!partner) continue;
    samples.push({
      timeSec,
      platformWatts: v[col("platform_power")]!,
      packageWatts: partner[rapl.column.get("package_power")!]!,
      dramWatts: partner[rapl.column.get("dram_power")!]!,
      usage: {
        cpuCores: v[col("bpf_cpu_time_us")]! / 1000,
        memoryMb: v[col("cgroupfs_memory_usage_bytes")]! / (1024 * 1024),
        diskBytesPerSec: 0,
        netBytesPerSec: 0,
        cpuCyclesPerSec: v[col("cpu_cycles")]!,
        instructionsPerSec: v[col("cpu_instructions")]!,
        cacheMissesPerSec: v[col("cache_miss")]!,
      },
    });
  }
  samples.sort((a, b) => a.timeSec - b.timeSec);
  return samples;
}

// ------------------------------------------------------------------------------------------------ models

/** Fitted on training samples, predicts whole-server watts. */
type Predictor = (s: KeplerSample) => number;
type Trainer = (train: readonly KeplerSample[]) => Predictor;

/** A model under evaluation. */
interface ModelSpec {
  name: string;
  description: string;
  baseline: boolean;
  train: Trainer;
}

/** Features of the counters model. */
export const COUNTER_FEATURES: readonly UsageFeature[] = [
  "cpuCores",
  "memoryMb",
  "cpuCyclesPerSec",
  "instructionsPerSec",
  "cacheMissesPerSec",
];

function idleOf(train: readonly KeplerSample[]): number {
  return quantile(Float64Array.from(train.map((s) => s.platformWatts)).sort(), IDLE_QUANTILE);
}

function utilization(s: KeplerSample): number {
  return Math.min(1, (s.usage.cpuCores ?? 0) / KEPLER_HW_THREADS);
}

/** The PowerModel as the node manager runs it, fitted once on all of `train`. */
function powerModelTrainer(features: readonly UsageFeature[]): Trainer {
  return (train) => {
    const idle = idleOf(train);
    const model = new PowerModel({
      features,
      windowSamples: train.length,
      refitEverySamples: 0,
      minSamplesToFit: 1,
    });
    for (const s of train)
      model.observe({ timeMs: s.timeSec * 1000, dynamicWatts: s.platformWatts - idle, usage: s.usage });
    model.refit();
    return (s) => idle + model.predictDynamicWatts(s.usage);
  };
}

const olsCpuTrainer: Trainer = (train) => {
  const n = train.length;
  let sx = 0;
  let sy = 0;
  for (const s of train) {
    sx += s.usage.cpuCores ?? 0;
    sy += s.platformWatts;
  }
  const mx = sx / n;
  const my = sy / n;
  let sxy = 0;
  let sxx = 0;
  for (const s of train) {
    const dx = (s.usage.cpuCores ?? 0) - mx;
    sxy += dx * (s.platformWatts - my);
    sxx += dx * dx;
  }
  const slope = sxx > 0 ? sxy / sxx : 0;
  const intercept = my - slope * mx;
  return (s) => intercept + slope * (s.usage.cpuCores ?? 0);
};

/** Idle measured, then the least-squares slope through it: watts = idle + slope x utilization. */
function idleLinearFit(train: readonly KeplerSample[]): { idle: number; slope: number } {
  const idle = idleOf(train);
  let sxy = 0;
  let sxx = 0;
  for (const s of train) {
    const u = utilization(s);
    sxy += u * (s.platformWatts - idle);
    sxx += u * u;
  }
  return { idle, slope: sxx > 0 ? Math.max(0, sxy / sxx) : 0 };
}

const idleLinearTrainer: Trainer = (train) => {
  const { idle, slope } = idleLinearFit(train);
  return (s) => idle + slope * utilization(s);
};

/**
 * A SPECpower-style profile of the training data: idle, then the median watts of the samples within 5 points of
 * each 10 % load level; a level without samples is interpolated between its neighbours, or continued along the
 * idle + linear slope past the last level seen; the curve is then made non-decreasing.
 */
export function profileFromSamples(train: readonly KeplerSample[]): PowerProfile {
  const { idle, slope } = idleLinearFit(train);
  const levels: (number | undefined)[] = [];
  for (let b = 1; b <= PROFILE_LOAD_LEVELS; b++) {
    const level = b / PROFILE_LOAD_LEVELS;
    const w = train.filter((s) => Math.abs(utilization(s) - level) <= 0.5 / PROFILE_LOAD_LEVELS);
    levels.push(w.length > 0 ? quantile(Float64Array.from(w.map((s) => s.platformWatts)).sort(), 0.5) : undefined);
  }
  const points = [idle, ...levels];
  for (let i = 1; i < points.length; i++) {
    if (points[i] !== undefined) continue;
    const nextKnown = points.findIndex((p, j) => j > i && p !== undefined);
    const lo = points[i - 1]!;
    points[i] =
      nextKnown < 0 ? lo + slope / PROFILE_LOAD_LEVELS : lo + (points[nextKnown]! - lo) / (nextKnown - (i - 1));
  }
  const loadWatts: number[] = [];
  let previous = idle;
  for (let i = 1; i < points.length; i++) {
    previous = Math.max(previous, points[i]!);
    loadWatts.push(previous);
  }
  return { id: "kepler-nx12-fitted", name: "nx12 (fitted)", source: "training samples", idleWatts: idle, loadWatts };
}

const profileCurveTrainer: Trainer = (train) => {
  const profile = profileFromSamples(train);
  return (s) => profileWatts(profile, utilization(s));
};

const MODELS: readonly ModelSpec[] = [
  {
    name: "nnls-seed",
    description: "PowerModel, seed features (CPU cores, memory; no disk/net here)",
    baseline: false,
    train: powerModelTrainer(SEED_USAGE_FEATURES),
  },
  {
    name: "nnls-counters",
    description: "PowerModel, + cycles, instructions, cache misses",
    baseline: false,
    train: powerModelTrainer(COUNTER_FEATURES),
  },
  {
    name: "ols-cpu",
    description: "baseline: linear CPU-only, a + b x cores (OLS)",
    baseline: true,
    train: olsCpuTrainer,
  },
  {
    name: "idle-linear",
    description: "baseline: SPECpower style idle + slope x utilization",
    baseline: true,
    train: idleLinearTrainer,
  },
  {
    name: "profile-curve",
    description: "baseline: 11-point SPECpower-style profile from the training data",
    baseline: true,
    train: profileCurveTrainer,
  },
];

// ------------------------------------------------------------------------------------------------ evaluation

/** Errors of a model's predictions on held-back samples. */
export interface ErrorFigures {
  samples: number;
  /** Mean absolute percentage error of the whole-server watts, in percent. */
  mapePct: number;
  /** Mean absolute error in watts. */
  maeWatts: number;
  /** 90th percentile of the absolute percentage error, in percent. */
  p90ApePct: number;
  /** Share of samples estimated within 10 % (seeds/001 quotes "nearly 90 %"). */
  within10PctShare: number;
}

/** One model's figures under every split. */
export interface ModelEvaluation {
  name: string;
  description: string;
  baseline: boolean;
  holdout: ErrorFigures;
  /** Every sample scored once, by the model fitted on the other folds. */
  kfoldPooled: ErrorFigures;
  /** MAPE of each fold, in time order. */
  kfoldMapePct: number[];
}

/** Settings of an evaluation (the bench's flags). */
export interface PowerModelEvaluationOptions {
  folds: number;
  trainShare: number;
  windowSamples: number;
  refitEverySamples: number;
}

/** What evaluatePowerModels measured. */
export interface PowerModelEvaluation {
  samples: number;
  spanSec: number;
  wattsRange: [number, number];
  models: ModelEvaluation[];
  /** The node manager's online mode (predict, then observe), per feature set. */
  online: { name: string; features: readonly UsageFeature[]; figures: ErrorFigures }[];
  /** The counters model fitted on all samples: watts per unit, and its idle. */
  fullFit: { idleWatts: number; wattsPerUnit: EntityUsage; rmseWatts: number };
}

function errorFigures(actual: readonly number[], predicted: readonly number[]): ErrorFigures {
  const ape = actual.map((a, i) => Math.abs(predicted[i]! - a) / a);
  const n = ape.length;
  const sorted = Float64Array.from(ape).sort();
  let mae = 0;
  for (let i = 0; i < n; i++) mae += Math.abs(predicted[i]! - actual[i]!);
  return {
    samples: n,
    mapePct: (100 * ape.reduce((a, b) => a + b, 0)) / n,
    maeWatts: mae / n,
    p90ApePct: 100 * quantile(sorted, 0.9),
    within10PctShare: ape.filter((e) => e < GOOD_ERROR_SHARE).length / n,
  };
}

function score(predict: Predictor, test: readonly KeplerSample[]): { actual: number[]; predicted: number[] } {
  return { actual: test.map((s) => s.platformWatts), predicted: test.map(predict) };
}

/** Fits and scores every model on `samples` (in time order) under the hold-out, k-fold and online splits. */
export function evaluatePowerModels(
  samples: readonly KeplerSample[],
  options: PowerModelEvaluationOptions,
): PowerModelEvaluation {
  const n = samples.length;
  const cut = Math.round(n * options.trainShare);
  if (cut < 2 || cut > n - 1)
    throw new HarvestError("INVALID_ARGUMENT", `train share ${options.trainShare} leaves no test samples`, {
      details: { field: "trainShare" },
    });
  const edges = Array.from({ length: options.folds + 1 }, (_, i) => Math.round((i * n) / options.folds));
  const models = MODELS.map((m): ModelEvaluation => {
    const holdout = score(m.train(samples.slice(0, cut)), samples.slice(cut));
    const pooledActual: number[] = [];
    const pooledPredicted: number[] = [];
    const kfoldMapePct: number[] = [];
    for (let f = 0; f < options.folds; f++) {
      const test = samples.slice(edges[f], edges[f + 1]);
      const train = [...samples.slice(0, edges[f]), ...samples.slice(edges[f + 1])];
      const r = score(m.train(train), test);
      pooledActual.push(...r.actual);
      pooledPredicted.push(...r.predicted);
      kfoldMapePct.push(errorFigures(r.actual, r.predicted).mapePct);
    }
    return {
      name: m.name,
      description: m.description,
      baseline: m.baseline,
      holdout: errorFigures(holdout.actual, holdout.predicted),
      kfoldPooled: errorFigures(pooledActual, pooledPredicted),
      kfoldMapePct,
    };
  });

  const online = (
    [
      ["online nnls-seed", SEED_USAGE_FEATURES],
      ["online nnls-counters", COUNTER_FEATURES],
    ] as const
  ).map(([name, features]) => {
    const model = new PowerModel({
      features,
      windowSamples: options.windowSamples,
      refitEverySamples: options.refitEverySamples,
      minSamplesToFit: Math.min(options.windowSamples, 20),
    });
    let idle = Infinity;
    const actual: number[] = [];
    const predicted: number[] = [];
    for (const s of samples) {
      if (model.coefficients() !== undefined) {
        actual.push(s.platformWatts);
        predicted.push(idle + model.predictDynamicWatts(s.usage));
      }
      // Like the RAPL meter: the idle estimate is the lowest reading so far.
      idle = Math.min(idle, s.platformWatts);
      model.observe({ timeMs: s.timeSec * 1000, dynamicWatts: s.platformWatts - idle, usage: s.usage });
    }
    return { name, features, figures: errorFigures(actual, predicted) };
  });

  const idleAll = idleOf(samples);
  const full = new PowerModel({
    features: COUNTER_FEATURES,
    windowSamples: n,
    refitEverySamples: 0,
    minSamplesToFit: 1,
  });
  for (const s of samples)
    full.observe({ timeMs: s.timeSec * 1000, dynamicWatts: s.platformWatts - idleAll, usage: s.usage });
  full.refit();
  const c = full.coefficients()!;
  const watts = samples.map((s) => s.platformWatts);
  return {
    samples: n,
    spanSec: samples[n - 1]!.timeSec - samples[0]!.timeSec,
    wattsRange: [Math.min(...watts), Math.max(...watts)],
    models,
    online,
    fullFit: { idleWatts: idleAll, wattsPerUnit: c.wattsPerUnit, rmseWatts: c.rmseWatts },
  };
}

// ------------------------------------------------------------------------------------------------ bench

async function run(argv: readonly string[], progress: (line: string) => void): Promise<BenchReport> {
  const f = parseFlags(argv, FLAGS);
  if (f["train-share"] >= 1) throw new BenchUsageError(`--train-share must be < 1 (got ${f["train-share"]})`);
  const dir = keplerDataDir();
  if (dir === undefined) {
    const reason =
      `this benchmark needs the Kepler nx12 data (${KEPLER_RELATIVE_DIR}/${ACPI_FILE} and ${RAPL_FILE}) in ` +
      "../shared/data beside the checkout, or a directory named by HARVEST_SHARED_DATA; it is not there, so nothing " +
      "was measured";
    return { lines: [`powermodel: ${reason}.`], result: { skipped: true, reason } };
  }
  progress(`loading ${dir}`);
  const samples = loadKeplerSamples(dir);
  progress(`${samples.length} joined samples; fitting`);
  const t0 = performance.now();
  const e = evaluatePowerModels(samples, {
    folds: f.folds,
    trainShare: f["train-share"],
    windowSamples: f.window,
    refitEverySamples: f["refit-every"],
  });
  const elapsedMs = performance.now() - t0;
  return { lines: reportLines(e, f, dir, elapsedMs), result: { flags: f, data: dir, elapsedMs, ...e } };
}

function reportLines(e: PowerModelEvaluation, f: PowerModelBenchFlags, dir: string, elapsedMs: number): string[] {
  const pct = (x: number): string => fmt(x, 2);
  const share = (x: number): string => `${fmt(100 * x, 1)} %`;
  const testPct = Math.round(100 * (1 - f["train-share"]));
  return [
    `powermodel: ${dir}`,
    `${e.samples.toLocaleString("en-US")} samples of 3 s over ${fmt(e.spanSec / 3600, 2)} h, whole-server ` +
      `${fmt(e.wattsRange[0], 0)}-${fmt(e.wattsRange[1], 0)} W (ACPI meter); MAPE of the whole-server watts on ` +
      `held-back time ranges (seeds/001 reports 1-6 %)`,
    "",
    ...table(
      [
        "model",
        `hold-out MAPE % (last ${testPct} %)`,
        `${f.folds}-fold MAPE % (pooled)`,
        "per fold",
        "k-fold MAE W",
        "k-fold p90 APE %",
        "k-fold within 10 %",
      ],
      e.models.map((m) => [
        m.name,
        pct(m.holdout.mapePct),
        pct(m.kfoldPooled.mapePct),
        m.kfoldMapePct.map((x) => fmt(x, 1)).join(" / "),
        fmt(m.kfoldPooled.maeWatts, 1),
        pct(m.kfoldPooled.p90ApePct),
        share(m.kfoldPooled.within10PctShare),
      ]),
    ),
    "",
    ...e.models.map((m) => `  ${m.name.padEnd(14)}${m.description}`),
    "",
    ...table(
      [
        `online (predict, then observe; window ${f.window}, refit every ${f["refit-every"]})`,
        "samples",
        "MAPE %",
        "MAE W",
        "within 10 %",
      ],
      e.online.map((o) => [
        o.name,
        String(o.figures.samples),
        pct(o.figures.mapePct),
        fmt(o.figures.maeWatts, 1),
        share(o.figures.within10PctShare),
      ]),
    ),
    "",
    `nnls-counters fitted on all samples: idle ${fmt(e.fullFit.idleWatts, 1)} W, rmse ${fmt(e.fullFit.rmseWatts, 1)} W; ` +
      `watts per unit: ${Object.entries(e.fullFit.wattsPerUnit)
        .map(([k, v]) => `${k} ${v.toExponential(3)}`)
        .join(", ")}`,
    `fit and score time: ${fmt(elapsedMs, 0)} ms`,
  ];
}

/** `powermodel`: cross-validated accuracy of the power regression on the Kepler nx12 stress-ng data. */
export const powerModelBench: BenchDefinition = {
  name: "powermodel",
  summary: "power regression accuracy (MAPE) on the Kepler nx12 data, time-split, with CPU-only baselines",
  flags: FLAGS,
  run,
};
