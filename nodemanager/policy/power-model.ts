/**
 * Per-container power estimation (seeds/001, section 3: WattsApp's power model, equations 1-4).
 *
 * The seed splits a server's draw into static and dynamic power, P_server = P_static + P_dynamic (eq. 1), makes the
 * dynamic power the sum of what the running containers draw (eq. 2), and models each container's draw as a weighted
 * sum of its resource usage, P_k = a*U_cpu + b*U_ram + c*U_disk + d*U_net (eq. 3). It fits a Keras network per
 * container; Harvest fits one linear model per server instead, choices and reasons:
 *
 * - One set of coefficients per server, shared by every entity on it (containers and the primary tenant): a watt per
 *   core-second costs the same whoever spends it, a per-container model needs that container's training run (Harvest's
 *   containers are short-lived and new), and only the server's total is ever measured.
 * - Fitted online: the dynamic watts of each meter reading (meter watts minus the meter's idle) against the usage
 *   summed over all entities at that moment, over a sliding window of the most recent samples, refitted every
 *   `refitEverySamples` samples (and on demand), so the model follows frequency and workload changes.
 * - Non-negative least squares without an intercept: a resource never gives watts back, and the static power is the
 *   meter's, never spread over the entities. Features are scaled to unit root-mean-square before the solve (not
 *   centred: there is no intercept to absorb a mean); Lawson-Hanson on the Gram matrix, with a tiny ridge so that two
 *   features that move together (cycles and CPU time) still give a well-posed solve.
 * - Attribution: each entity's share is its predicted watts, rescaled so that the shares sum exactly to the measured
 *   dynamic power (the model explains the split, the meter the total). When every predicted share is zero (no fit
 *   yet, or no entity uses a feature with a positive coefficient) the split falls back to CPU cores, and to an even
 *   split when no entity uses any CPU either. A dynamic power below zero (a reading under the idle estimate: noise)
 *   is attributed as zero to everyone.
 *
 * Pure: no timers, no I/O; sample times come from the caller.
 */
import { HarvestError } from "../../common/errors.js";
import { invalidOption, stripUndefined } from "../../common/options.js";

/**
 * A usage feature of an entity, in per-second or level units. The first four are the seed's (eq. 3); the hardware
 * counters can be read per cgroup with perf and explain power the CPU time does not (frequency, memory stalls).
 */
export type UsageFeature =
  | "cpuCores"
  | "memoryMb"
  | "diskBytesPerSec"
  | "netBytesPerSec"
  | "cpuCyclesPerSec"
  | "instructionsPerSec"
  | "cacheMissesPerSec";

/** Every feature the model knows, in a fixed order. */
export const USAGE_FEATURES: readonly UsageFeature[] = [
  "cpuCores",
  "memoryMb",
  "diskBytesPerSec",
  "netBytesPerSec",
  "cpuCyclesPerSec",
  "instructionsPerSec",
  "cacheMissesPerSec",
];

/** The seed's features (seeds/001, eq. 3): CPU, memory, disk and network. */
export const SEED_USAGE_FEATURES: readonly UsageFeature[] = [
  "cpuCores",
  "memoryMb",
  "diskBytesPerSec",
  "netBytesPerSec",
];

/** What an entity uses now; a missing feature counts as 0. */
export type EntityUsage = Partial<Record<UsageFeature, number>>;

/** One consumer of dynamic power on a server: a container or the primary tenant. */
export interface PowerEntity {
  id: string;
  usage: EntityUsage;
}

/** One training sample: a meter reading and the usage summed over every entity at that time. */
export interface PowerSample {
  timeMs: number;
  /** Meter watts minus the meter's idle watts (may be slightly negative from noise). */
  dynamicWatts: number;
  /** Usage summed over all entities (primary and containers); see sumUsage. */
  usage: EntityUsage;
}

/** Settings of the power model. */
export interface PowerModelOptions {
  /** Features the regression uses. @default SEED_USAGE_FEATURES (cpuCores, memoryMb, diskBytesPerSec, netBytesPerSec) */
  features: readonly UsageFeature[];
  /** Samples kept in the sliding window (at one reading per second, 10 minutes). @default 600 */
  windowSamples: number;
  /** Refit automatically after this many new samples; 0 refits only when `refit()` is called. @default 30 */
  refitEverySamples: number;
  /** A fit needs at least this many samples in the window. @default 20 */
  minSamplesToFit: number;
  /** Ridge added to the standardized Gram matrix's diagonal, relative to the sample count. @default 1e-6 */
  ridge: number;
}

const DEFAULTS: PowerModelOptions = {
  features: SEED_USAGE_FEATURES,
  windowSamples: 600,
  refitEverySamples: 30,
  minSamplesToFit: 20,
  ridge: 1e-6,
};

/** Fills defaults and validates; throws CONFIG_INVALID naming the field. */
export function resolvePowerModelOptions(options: Partial<PowerModelOptions> = {}): PowerModelOptions {
  const o: PowerModelOptions = { ...DEFAULTS, ...stripUndefined(options) };
  const daemon = "power model";
  if (!Array.isArray(o.features) || o.features.length === 0)
    invalidOption(daemon, "features", "must name at least one feature");
  for (const f of o.features)
    if (!USAGE_FEATURES.includes(f)) invalidOption(daemon, "features", `has unknown feature ${JSON.stringify(f)}`);
  if (new Set(o.features).size !== o.features.length) invalidOption(daemon, "features", "names a feature twice");
  if (!Number.isInteger(o.windowSamples) || o.windowSamples < 1)
    invalidOption(daemon, "windowSamples", `must be an integer >= 1 (got ${o.windowSamples})`);
  if (!Number.isInteger(o.refitEverySamples) || o.refitEverySamples < 0)
    invalidOption(daemon, "refitEverySamples", `must be an integer >= 0 (got ${o.refitEverySamples})`);
  if (!Number.isInteger(o.minSamplesToFit) || o.minSamplesToFit < 1)
    invalidOption(daemon, "minSamplesToFit", `must be an integer >= 1 (got ${o.minSamplesToFit})`);
  if (o.minSamplesToFit > o.windowSamples)
    invalidOption(daemon, "minSamplesToFit", `must be <= windowSamples (${o.minSamplesToFit} > ${o.windowSamples})`);
  if (!(Number.isFinite(o.ridge) && o.ridge >= 0)) invalidOption(daemon, "ridge", `must be >= 0 (got ${o.ridge})`);
  return { ...o, features: [...o.features] };
}

/** The fitted model. */
export interface PowerModelCoefficients {
  /** Watts per unit of each feature used (>= 0); features not used are absent. */
  wattsPerUnit: EntityUsage;
  /** Samples the fit used. */
  samples: number;
  /** Time of the newest sample in the fit. */
  fittedAtMs: number;
  /** Root-mean-square error of the fit on its own samples, in watts. */
  rmseWatts: number;
}

/** How a dynamic power was split. */
export type AttributionBasis = "model" | "cpu" | "even" | "none";

/** One entity's share of the dynamic power. */
export interface EntityPower {
  id: string;
  /** Its share of the measured dynamic power; the shares sum to max(0, dynamicWatts). */
  watts: number;
  /** What the model predicts it draws on its own, before rescaling (0 without a fit). */
  predictedWatts: number;
}

/** The split of one reading's dynamic power. */
export interface PowerAttribution {
  basis: AttributionBasis;
  /** The dynamic power that was split (max(0, the given dynamic watts)). */
  dynamicWatts: number;
  /** The model's total prediction for these entities (0 without a fit). */
  predictedWatts: number;
  entities: EntityPower[];
}

/** The usage of `entities` summed feature by feature (the server's usage for a training sample). */
export function sumUsage(entities: readonly PowerEntity[]): EntityUsage {
  const total: EntityUsage = {};
  for (const e of entities)
    for (const f of USAGE_FEATURES) {
      const v = e.usage[f];
      if (v !== undefined) total[f] = (total[f] ?? 0) + v;
    }
  return total;
}

/**
 * The online per-server power regression: observe samples, refit over the window, predict and attribute.
 */
export class PowerModel {
  readonly options: PowerModelOptions;
  // Ring buffer of the window: rows of feature values (in options.features order) and targets.
  private readonly rows: Float64Array[];
  private readonly targets: Float64Array;
  private readonly times: Float64Array;
  private next = 0;
  private count = 0;
  private sinceFit = 0;
  private fit: { coefficients: Float64Array; samples: number; fittedAtMs: number; rmseWatts: number } | undefined;

  constructor(options: Partial<PowerModelOptions> = {}) {
    this.options = resolvePowerModelOptions(options);
    const n = this.options.windowSamples;
    this.rows = Array.from({ length: n }, () => new Float64Array(this.options.features.length));
    this.targets = new Float64Array(n);
    this.times = new Float64Array(n);
  }

  /** Samples in the window now. */
  get sampleCount(): number {
    return this.count;
  }

  /**
   * Adds a sample to the window (dropping the oldest when full) and refits when `refitEverySamples` new samples have
   * come in. Throws INVALID_ARGUMENT for a sample with a non-finite or negative usage or non-finite watts.
   */
  observe(sample: PowerSample): void {
    if (!Number.isFinite(sample.dynamicWatts))
      throw new HarvestError("INVALID_ARGUMENT", `power sample has dynamicWatts ${sample.dynamicWatts}`, {
        details: { field: "dynamicWatts" },
      });
    const row = this.rows[this.next]!;
    this.options.features.forEach((f, j) => {
      const v = sample.usage[f] ?? 0;
      if (!(Number.isFinite(v) && v >= 0))
        throw new HarvestError("INVALID_ARGUMENT", `power sample has ${f} ${v}, not a finite number >= 0`, {
          details: { field: f },
        });
      row[j] = v;
    });
    this.targets[this.next] = sample.dynamicWatts;
    this.times[this.next] = sample.timeMs;
    this.next = (this.next + 1) % this.options.windowSamples;
    this.count = Math.min(this.count + 1, this.options.windowSamples);
    this.sinceFit++;
    if (this.options.refitEverySamples > 0 && this.sinceFit >= this.options.refitEverySamples) this.refit();
  }

  /** Refits on the window now. Returns false (keeping the previous fit) when the window has too few samples. */
  refit(): boolean {
    this.sinceFit = 0;
    if (this.count < this.options.minSamplesToFit) return false;
    const rows: Float64Array[] = [];
    const targets: number[] = [];
    let newest = -Infinity;
    for (let i = 0; i < this.count; i++) {
      rows.push(this.rows[i]!);
      targets.push(this.targets[i]!);
      newest = Math.max(newest, this.times[i]!);
    }
    const coefficients = fitNonNegative(rows, targets, this.options.ridge);
    let sse = 0;
    for (let i = 0; i < rows.length; i++) sse += (dot(coefficients, rows[i]!) - targets[i]!) ** 2;
    this.fit = { coefficients, samples: rows.length, fittedAtMs: newest, rmseWatts: Math.sqrt(sse / rows.length) };
    return true;
  }

  /** The current fit, or undefined before the first successful fit. */
  coefficients(): PowerModelCoefficients | undefined {
    const fit = this.fit;
    if (!fit) return undefined;
    const wattsPerUnit: EntityUsage = {};
    this.options.features.forEach((f, j) => (wattsPerUnit[f] = fit.coefficients[j]!));
    return { wattsPerUnit, samples: fit.samples, fittedAtMs: fit.fittedAtMs, rmseWatts: fit.rmseWatts };
  }

  /** The dynamic watts the model predicts for `usage` (0 without a fit). */
  predictDynamicWatts(usage: EntityUsage): number {
    const fit = this.fit;
    if (!fit) return 0;
    let w = 0;
    this.options.features.forEach((f, j) => {
      const v = usage[f] ?? 0;
      // A bad usage figure predicts nothing rather than poisoning the split.
      if (Number.isFinite(v) && v > 0) w += fit.coefficients[j]! * v;
    });
    return w;
  }

  /**
   * Splits `dynamicWatts` (the meter's watts minus its idle) over `entities` in proportion to their predicted watts,
   * so that the shares sum to max(0, dynamicWatts); see the file comment for the fallbacks.
   */
  attribute(entities: readonly PowerEntity[], dynamicWatts: number): PowerAttribution {
    const total = Number.isFinite(dynamicWatts) ? Math.max(0, dynamicWatts) : 0;
    const predicted = entities.map((e) => this.predictDynamicWatts(e.usage));
    const predictedTotal = predicted.reduce((a, b) => a + b, 0);
    if (entities.length === 0) return { basis: "none", dynamicWatts: total, predictedWatts: 0, entities: [] };
    let basis: AttributionBasis;
    let weights: number[];
    if (predictedTotal > 0) {
      basis = "model";
      weights = predicted;
    } else {
      const cores = entities.map((e) => {
        const v = e.usage.cpuCores ?? 0;
        return Number.isFinite(v) && v > 0 ? v : 0;
      });
      const coresTotal = cores.reduce((a, b) => a + b, 0);
      basis = coresTotal > 0 ? "cpu" : "even";
      weights = coresTotal > 0 ? cores : entities.map(() => 1);
    }
    const weightTotal = weights.reduce((a, b) => a + b, 0);
    const shares = weights.map((w) => (total * w) / weightTotal);
    // Rounding can leave the sum of the scaled shares a few ulps off; the largest share takes the remainder, so the
    // shares add up to the meter's dynamic power (to the last bit or so, whatever the order of summation).
    let largest = 0;
    for (let i = 1; i < shares.length; i++) if (shares[i]! > shares[largest]!) largest = i;
    const others = shares.reduce((a, s, i) => (i === largest ? a : a + s), 0);
    shares[largest] = Math.max(0, total - others);
    return {
      basis,
      dynamicWatts: total,
      predictedWatts: predictedTotal,
      entities: entities.map((e, i) => ({ id: e.id, watts: shares[i]!, predictedWatts: predicted[i]! })),
    };
  }
}

function dot(a: ArrayLike<number>, b: ArrayLike<number>): number {
  let s = 0;
  for (let i = 0; i < a.length; i++) s += a[i]! * b[i]!;
  return s;
}

/**
 * Non-negative least squares, min ||X c - y|| subject to c >= 0, in the units of `rows` (each row one sample's
 * features). Columns are scaled to unit root-mean-square first and an all-zero column gets coefficient 0. `ridge`
 * is added to the scaled Gram matrix's diagonal times the row count.
 */
export function fitNonNegative(
  rows: readonly ArrayLike<number>[],
  targets: readonly number[],
  ridge = 0,
): Float64Array {
  const k = rows[0]?.length ?? 0;
  const n = rows.length;
  const out = new Float64Array(k);
  if (n === 0 || k === 0) return out;
  const scale = new Float64Array(k);
  for (const r of rows) for (let j = 0; j < k; j++) scale[j]! += r[j]! * r[j]!;
  for (let j = 0; j < k; j++) scale[j] = Math.sqrt(scale[j]! / n);
  const used = [...Array(k).keys()].filter((j) => scale[j]! > 0);
  if (used.length === 0) return out;
  const m = used.length;
  const gram = Array.from({ length: m }, () => new Float64Array(m));
  const rhs = new Float64Array(m);
  for (let i = 0; i < n; i++) {
    const r = rows[i]!;
    const y = targets[i]!;
    for (let a = 0; a < m; a++) {
      const xa = r[used[a]!]! / scale[used[a]!]!;
      rhs[a]! += xa * y;
      for (let b = a; b < m; b++) gram[a]![b]! += (xa * r[used[b]!]!) / scale[used[b]!]!;
    }
  }
  for (let a = 0; a < m; a++) {
    for (let b = 0; b < a; b++) gram[a]![b] = gram[b]![a]!;
    gram[a]![a]! += ridge * n;
  }
  const z = solveNnlsGram(gram, rhs);
  used.forEach((j, a) => (out[j] = z[a]! / scale[j]!));
  return out;
}

/**
 * Lawson-Hanson active-set NNLS on the normal equations: minimises 1/2 x'Gx - h'x subject to x >= 0 for a symmetric
 * positive (semi)definite G. Exact after finitely many steps for the few features used here; `maxIterations` bounds
 * the outer loop all the same.
 */
export function solveNnlsGram(
  gram: readonly ArrayLike<number>[],
  rhs: ArrayLike<number>,
  maxIterations = 100,
): Float64Array {
  const k = rhs.length;
  const x = new Float64Array(k);
  const passive = new Array<boolean>(k).fill(false);
  // Variables that made the passive system singular (exactly collinear features without ridge) stay at zero.
  const excluded = new Array<boolean>(k).fill(false);
  let hMax = 0;
  for (let j = 0; j < k; j++) hMax = Math.max(hMax, Math.abs(rhs[j]!));
  const tol = 1e-12 * Math.max(1, hMax);
  const gradient = (): Float64Array => {
    const w = new Float64Array(k);
    for (let i = 0; i < k; i++) {
      let s = rhs[i]!;
      for (let j = 0; j < k; j++) s -= gram[i]![j]! * x[j]!;
      w[i] = s;
    }
    return w;
  };
  for (let iter = 0; iter < maxIterations; iter++) {
    const w = gradient();
    let best = -1;
    for (let j = 0; j < k; j++)
      if (!passive[j] && !excluded[j] && w[j]! > tol && (best < 0 || w[j]! > w[best]!)) best = j;
    if (best < 0) break; // KKT conditions hold: optimal.
    passive[best] = true;
    // Inner loop: solve on the passive set and step back towards feasibility until the solution is positive.
    for (let inner = 0; inner <= k; inner++) {
      const z = solvePassive(gram, rhs, passive);
      if (!z) {
        // Singular on this set (collinear features without ridge): drop the variable just added.
        passive[best] = false;
        excluded[best] = true;
        break;
      }
      let alpha = 1;
      let blocked = false;
      for (let j = 0; j < k; j++) {
        if (passive[j] && z[j]! <= 0) {
          blocked = true;
          const denom = x[j]! - z[j]!;
          if (denom > 0) alpha = Math.min(alpha, x[j]! / denom);
        }
      }
      if (!blocked) {
        x.set(z);
        break;
      }
      for (let j = 0; j < k; j++) x[j] = x[j]! + alpha * (z[j]! - x[j]!);
      for (let j = 0; j < k; j++) {
        if (passive[j] && x[j]! <= tol) {
          passive[j] = false;
          x[j] = 0;
        }
      }
    }
  }
  for (let j = 0; j < k; j++) if (x[j]! < 0) x[j] = 0;
  return x;
}

/** Solves G[P,P] z = h[P] by Gaussian elimination with partial pivoting; z is 0 off P. Undefined when singular. */
function solvePassive(
  gram: readonly ArrayLike<number>[],
  rhs: ArrayLike<number>,
  passive: readonly boolean[],
): Float64Array | undefined {
  const idx = passive.flatMap((p, j) => (p ? [j] : []));
  const m = idx.length;
  const a = idx.map((i) => Float64Array.from([...idx.map((j) => gram[i]![j]!), rhs[i]!]));
  let diagMax = 0;
  for (let r = 0; r < m; r++) diagMax = Math.max(diagMax, Math.abs(a[r]![r]!));
  const eps = 1e-12 * Math.max(diagMax, Number.MIN_VALUE);
  for (let c = 0; c < m; c++) {
    let p = c;
    for (let r = c + 1; r < m; r++) if (Math.abs(a[r]![c]!) > Math.abs(a[p]![c]!)) p = r;
    if (Math.abs(a[p]![c]!) <= eps) return undefined;
    [a[c], a[p]] = [a[p]!, a[c]!];
    for (let r = c + 1; r < m; r++) {
      const f = a[r]![c]! / a[c]![c]!;
      if (f === 0) continue;
      for (let cc = c; cc <= m; cc++) a[r]![cc]! -= f * a[c]![cc]!;
    }
  }
  const z = new Float64Array(passive.length);
  const sol = new Float64Array(m);
  for (let r = m - 1; r >= 0; r--) {
    let s = a[r]![m]!;
    for (let c = r + 1; c < m; c++) s -= a[r]![c]! * sol[c]!;
    sol[r] = s / a[r]![r]!;
  }
  idx.forEach((j, r) => (z[j] = sol[r]!));
  return z;
}
