/**
 * Simulated clusters calibrated to seeds/004 section 3: many primary tenants of heavy-tailed sizes grouped into
 * environments; per-tenant CPU utilization that is periodic, (roughly) constant or unpredictable in the proportions of
 * figures 2 and 3, either generated or replayed from the real traces (`real-traces.ts`); and disk reimages whose rates
 * follow figures 4 to 6 (most servers at one or fewer a month, a tail far above, tenants keeping their rank) with
 * correlated reimages of whole tenants and environments. Pure and deterministic: the options and seed fix the cluster.
 *
 * Independent random streams (per purpose, per tenant) keep a seed's structure stable across options: the same seed at
 * another level, slot length or horizon has the same tenants, environments, servers and reimage rates, and a longer
 * horizon extends the reimage history of a shorter one.
 */
import { HarvestError } from "../common/errors.js";
import { SeededRng, shuffle } from "../common/rng.js";
import type { UtilizationPattern } from "../common/trace-gen.js";
import type { UtilizationSeries } from "../common/trace-io.js";
import { patternOf } from "../resourcemanager/index.js";
import type { SimCluster, SimReimage, SimServer, SimTenant, TraceSource, UtilizationLevel } from "./model.js";
import { DAY_MS, MONTH_MS, UTILIZATION_LEVELS } from "./model.js";
import type { RealTemplate } from "./real-traces.js";
import { templateCycle } from "./real-traces.js";

/** What cluster to build. `resolveClusterGenOptions` fills the defaults and validates. */
export interface ClusterGenOptions {
  /**
   * Number of servers.
   * @default 1000
   */
  servers: number;
  /**
   * Average primary utilization of the cluster (see `LEVEL_MEAN_PCT`).
   * @default "medium"
   */
  level: UtilizationLevel;
  /**
   * Days of history before the experiment: the window the policies learn from.
   * @default 30
   */
  historyDays: number;
  /**
   * Days of experiment after the history.
   * @default 30
   */
  days: number;
  /**
   * Resolution of the utilization series: 5 minutes suits compute runs, 1 hour year-long storage runs. Memory is
   * tenants x slots x 4 bytes (about 1,250 tenants for 10,000 servers).
   * @default 300000
   */
  slotMs: number;
  /**
   * The seed: the same options and seed give the same cluster.
   * @default 1
   */
  seed: number;
  /**
   * "generated" shapes, or "real" traces replayed (then `templates` is required).
   * @default "generated"
   */
  source: TraceSource;
  /** @default 16 */
  coresPerServer: number;
  /**
   * Disk space Harvest may use on each server: 2 TB, half of a typical 4 TB data disk left to the primary.
   * @default 2000000000000
   */
  diskBytes: number;
  /** @default 40 */
  serversPerRack: number;
  /**
   * The real series tenants replay when `source` is "real", from `loadRealTemplates()`.
   * @default undefined
   */
  templates?: readonly RealTemplate[];
  /**
   * The cluster-wide average primary utilization, %, in place of the level's (`LEVEL_MEAN_PCT`): the compute sweep
   * runs five levels up to 65 %. `level` still labels the cluster.
   * @default LEVEL_MEAN_PCT[level]
   */
  meanPct?: number;
}

/** The defaults of every `ClusterGenOptions` field but `templates`. */
export const DEFAULT_CLUSTER_GEN: Readonly<Required<Omit<ClusterGenOptions, "templates" | "meanPct">>> = Object.freeze({
  servers: 1000,
  level: "medium",
  historyDays: 30,
  days: 30,
  slotMs: 300_000,
  seed: 1,
  source: "generated",
  coresPerServer: 16,
  diskBytes: 2_000_000_000_000,
  serversPerRack: 40,
});

/**
 * Cluster-wide average primary CPU utilization (over servers and time) of each level. seeds/004 hides absolute
 * utilizations and sweeps the range instead; 15 / 35 / 55 % span lightly loaded clusters to busy ones.
 */
export const LEVEL_MEAN_PCT: Readonly<Record<UtilizationLevel, number>> = Object.freeze({
  low: 15,
  medium: 35,
  high: 55,
});

/** Fills defaults into `options` and validates every field, naming the offending one (CONFIG_INVALID). */
export function resolveClusterGenOptions(options: Partial<ClusterGenOptions> = {}): Readonly<ClusterGenOptions> {
  const o: ClusterGenOptions = { ...DEFAULT_CLUSTER_GEN };
  for (const [k, v] of Object.entries(options)) if (v !== undefined) (o as unknown as Record<string, unknown>)[k] = v;
  const check = (field: keyof ClusterGenOptions, ok: boolean, what: string): void => {
    if (!ok) {
      throw new HarvestError(
        "CONFIG_INVALID",
        `cluster option ${field} must be ${what}, got ${String(o[field] as unknown)}`,
        {
          details: { field },
        },
      );
    }
  };
  const int = (v: number, min: number): boolean => Number.isSafeInteger(v) && v >= min;
  check("servers", int(o.servers, 1), "an integer >= 1");
  check("level", UTILIZATION_LEVELS.includes(o.level), UTILIZATION_LEVELS.join(" | "));
  if (o.meanPct !== undefined)
    check("meanPct", Number.isFinite(o.meanPct) && o.meanPct > 0 && o.meanPct < 95, "in (0, 95)");
  check("historyDays", Number.isFinite(o.historyDays) && o.historyDays >= 0, "a number >= 0");
  check("days", Number.isFinite(o.days) && o.days > 0, "a number > 0");
  check("slotMs", int(o.slotMs, 1000) && o.slotMs <= DAY_MS, `an integer in 1000..${DAY_MS}`);
  check("seed", Number.isSafeInteger(o.seed), "an integer");
  check("source", o.source === "generated" || o.source === "real", "generated | real");
  check("coresPerServer", int(o.coresPerServer, 1), "an integer >= 1");
  check("diskBytes", Number.isFinite(o.diskBytes) && o.diskBytes > 0, "a number > 0");
  check("serversPerRack", int(o.serversPerRack, 1), "an integer >= 1");
  if (o.source === "real") {
    if (o.templates === undefined || o.templates.length === 0) {
      throw new HarvestError("CONFIG_INVALID", 'cluster option templates must hold real series when source is "real"', {
        details: { field: "templates" },
      });
    }
  }
  return Object.freeze(o);
}

// --- Calibration (seeds/004 section 3) ---------------------------------------------------------------------------

/** Tenant sizes: round(lognormal) servers, median 3, heavy tail (mean about 8 servers, so 1,250 tenants per 10,000). */
const SIZE_MEDIAN = 3;
const SIZE_LOG_SD = 1.4;
/** No tenant holds more than this share of the cluster, so that small clusters still mix patterns. */
const MAX_TENANT_SHARE = 0.1;
/** Figure 3: periodic tenants hold about 40 % of the servers; periodic + constant about 75 %. */
const PERIODIC_SERVER_SHARE = 0.4;
const UNPREDICTABLE_SERVER_SHARE = 0.25;
/**
 * Figure 2: periodic tenants are a small minority, so they are drawn with probability growing with size (big
 * user-facing services); unpredictable ones (development and testing) lean small; the many small rest are constant.
 */
const PERIODIC_SIZE_BIAS = 1;
const UNPREDICTABLE_SIZE_BIAS = 0.5;
/** Spread of tenant means around the level's, on the logit scale. */
const MEAN_LOGIT_SD = 0.8;
const MAX_MEAN_PCT = 90;
/** A daily swing and a random walk need room above 0 % to be seen (and classified) as such. */
const MIN_MEAN_PCT: Readonly<Record<UtilizationPattern, number>> = { periodic: 12, unpredictable: 10, constant: 1 };

/**
 * Figures 4 and 5: at least 90 % of servers see one reimage a month or fewer, a 10 % tail of servers (20 % of tenants:
 * smaller ones, more often development and testing) far more. "Frequent" tenants are drawn to hold 7 % of the servers
 * (Poisson-like counts lift a few more servers of infrequent tenants above one a month), leaning small (weight
 * size^-0.5, twice for unpredictable tenants) and never among the big ones (over 1 % of the cluster).
 */
const FREQUENT_REIMAGE_SERVER_SHARE = 0.07;
const FREQUENT_SIZE_BIAS = 0.5;
const FREQUENT_MAX_TENANT_SHARE = 0.01;
/** Monthly reimage rates per server: infrequent tenants lognormal (median 0.15) capped below 1, frequent 1 + lognormal. */
const INFREQUENT_RATE_MEDIAN = 0.15;
const INFREQUENT_RATE_LOG_SD = 1;
const INFREQUENT_RATE_MAX = 0.85;
const FREQUENT_EXCESS_MEDIAN = 1.5;
const FREQUENT_EXCESS_LOG_SD = 0.6;
/**
 * Figure 6: a tenant's rate changes from month to month (base x lognormal jitter of this log-sd, mean 1) but it keeps
 * its rank.
 */
const MONTHLY_RATE_LOG_SD = 0.35;
/** Section 3.3: reimages are often correlated. Per tenant, this range of its reimages comes from tenant-wide events. */
const CORRELATED_SHARE_MIN = 0.3;
const CORRELATED_SHARE_MAX = 0.8;
/** A tenant-wide event hits the whole tenant half of the time, otherwise a random 50..100 % of it. */
const WHOLE_TENANT_CHANCE = 0.5;
/** Environment-wide events (repurposing, redeployment): a quarter of the environment's least-reimaged tenant's rate... */
const ENVIRONMENT_RATE_SHARE = 0.25;
/** ... but at most this many per month. */
const ENVIRONMENT_RATE_MAX = 0.05;
/**
 * Gamma shapes of the gaps between a tenant's single-server and between its tenant-wide reimages. Most reimages are
 * deliberate (redeploys, AutoPilot's resilience tests, disk maintenance rounds), so they come more regularly than a
 * Poisson process (shape 1) would bring them, which also steadies tenants' monthly counts (figure 6).
 */
const SINGLE_REIMAGE_REGULARITY = 3;
const TENANT_REIMAGE_REGULARITY = 3;
/** The servers of one correlated event are reimaged within this window (a rolling redeploy). */
const CORRELATED_SPREAD_MS = 10 * 60_000;
/** `summarizeCluster` counts a reimage as correlated when another one hits its environment this close in time. */
export const CORRELATION_WINDOW_MS = 30 * 60_000;

const ENVIRONMENT_KINDS = ["prod", "batch", "dev", "test"] as const;
type EnvironmentKind = (typeof ENVIRONMENT_KINDS)[number];
/** Machine functions by pattern: user-facing services are periodic, crawlers and pipelines constant, test rigs not. */
const MACHINE_FUNCTIONS: Readonly<Record<UtilizationPattern, readonly string[]>> = {
  periodic: ["frontend", "ranking", "index-serve", "query-cache", "api-gateway", "ads-serve", "mail-serve"],
  constant: ["crawler", "scrubber", "index-build", "log-ingest", "blob-store", "analytics", "backup", "monitoring"],
  unpredictable: ["build", "integration-test", "load-test", "dev-box", "staging", "canary", "experiment"],
};
/** Tenants per environment: 1 + geometric, mean this, at most `MAX_TENANTS_PER_ENVIRONMENT`. */
const MEAN_TENANTS_PER_ENVIRONMENT = 3;
const MAX_TENANTS_PER_ENVIRONMENT = 10;

/** Random streams, one per purpose, so that each decision is independent of the options that do not concern it. */
const Stream = {
  Sizes: 1,
  Patterns: 2,
  Means: 3,
  ReimageRates: 4,
  Environments: 5,
  Layout: 6,
  Offsets: 7,
  Utilization: 8,
  ReimageJitter: 9,
  SingleReimages: 10,
  TenantReimages: 11,
  EnvironmentReimages: 12,
} as const;

// --- Generation ---------------------------------------------------------------------------------------------------

/** What the generator decided about a tenant before any time series. */
interface TenantPlan {
  size: number;
  /** The pattern it is generated with (real traces: the one its template is chosen for). */
  pattern: UtilizationPattern;
  /** Its mean on the logit scale, relative to the level's. */
  meanZ: number;
  frequent: boolean;
  reimagesPerServerMonth: number;
  correlatedShare: number;
  environment: number;
  machineFunction: string;
  servers: number[];
}

interface EnvironmentPlan {
  name: string;
  tenants: number[];
  reimagesPerMonth: number;
}

/**
 * A simulated cluster (see the module comment). Generating 10,000 servers x 395 days at 1-hour slots, or 1,000 servers
 * x 60 days at 5-minute slots, takes about a second.
 */
export function generateCluster(options: Partial<ClusterGenOptions> = {}): SimCluster {
  const o = resolveClusterGenOptions(options);
  const historyMs = Math.round(o.historyDays * DAY_MS);
  const horizonMs = Math.round((o.historyDays + o.days) * DAY_MS);
  const slots = Math.ceil(horizonMs / o.slotMs);

  const plans = planTenants(o.servers, o.seed);
  const environments = planEnvironments(plans, o.seed);
  const servers = layOutServers(plans, o);
  const meanPct = o.meanPct ?? LEVEL_MEAN_PCT[o.level];
  const means = tenantMeans(plans, meanPct);

  const real = o.source === "real";
  const series = real
    ? replayTemplates(plans, means, o.templates!, o.slotMs, slots, o.seed)
    : plans.map((p, t) =>
        generateShape(p.pattern, means[t]!, slots, o.slotMs, new SeededRng(streamSeed(o.seed, Stream.Utilization, t))),
      );
  matchClusterMean(series, plans, meanPct);
  // A replayed tenant's pattern is what the classifier finds in the history the policies will learn from.
  const historySlots = Math.min(slots, Math.ceil(historyMs / o.slotMs));
  const window = historySlots >= 2 ? historySlots : slots;
  const patterns = real
    ? series.map((s) => patternOf(gridSeries("tenant", s, 0, window, o.slotMs / 1000)).pattern)
    : plans.map((p) => p.pattern);

  const idWidth = Math.max(4, String(plans.length - 1).length);
  const tenants: SimTenant[] = plans.map((p, t) => ({
    index: t,
    id: `t${String(t).padStart(idWidth, "0")}`,
    environment: environments[p.environment]!.name,
    machineFunction: p.machineFunction,
    pattern: patterns[t]!,
    servers: p.servers,
    utilization: series[t]!,
    reimagesPerServerMonth: p.reimagesPerServerMonth,
  }));

  return {
    servers,
    tenants,
    racks: Math.ceil(o.servers / o.serversPerRack),
    slotMs: o.slotMs,
    historyMs,
    horizonMs,
    reimages: generateReimages(plans, environments, horizonMs, o.seed),
    level: o.level,
    source: o.source,
    seed: o.seed,
  };
}

/** Tenant sizes, patterns and reimage rates. */
function planTenants(servers: number, seed: number): TenantPlan[] {
  const sizeRng = new SeededRng(streamSeed(seed, Stream.Sizes));
  const maxSize = Math.max(1, Math.round(MAX_TENANT_SHARE * servers));
  const sizes: number[] = [];
  for (let left = servers; left > 0;) {
    const size = Math.min(
      left,
      maxSize,
      Math.max(1, Math.round(Math.exp(sizeRng.normal(Math.log(SIZE_MEDIAN), SIZE_LOG_SD)))),
    );
    sizes.push(size);
    left -= size;
  }
  const plans: TenantPlan[] = sizes.map((size) => ({
    size,
    pattern: "constant",
    meanZ: 0,
    frequent: false,
    reimagesPerServerMonth: 0,
    correlatedShare: 0,
    environment: 0,
    machineFunction: "",
    servers: [],
  }));
  const tolerance = Math.max(1, Math.round(0.01 * servers));
  const all = plans.map((_, t) => t);

  const patternRng = new SeededRng(streamSeed(seed, Stream.Patterns));
  const periodicOrder = weightedOrder(patternRng, all, (t) => sizes[t]! ** PERIODIC_SIZE_BIAS);
  fillTo(periodicOrder, sizes, PERIODIC_SERVER_SHARE * servers, tolerance, (t) => (plans[t]!.pattern = "periodic"));
  const rest = all.filter((t) => plans[t]!.pattern !== "periodic");
  const unpredictableOrder = weightedOrder(patternRng, rest, (t) => sizes[t]! ** UNPREDICTABLE_SIZE_BIAS);
  fillTo(
    unpredictableOrder,
    sizes,
    UNPREDICTABLE_SERVER_SHARE * servers,
    tolerance,
    (t) => (plans[t]!.pattern = "unpredictable"),
  );

  const meanRng = new SeededRng(streamSeed(seed, Stream.Means));
  for (const p of plans) p.meanZ = meanRng.normal(0, MEAN_LOGIT_SD);

  const rateRng = new SeededRng(streamSeed(seed, Stream.ReimageRates));
  // Frequently reimaged tenants lean small and towards development and testing (section 3.3's first reimage type).
  const frequentOrder = weightedOrder(rateRng, all, (t) =>
    sizes[t]! > FREQUENT_MAX_TENANT_SHARE * servers
      ? 0
      : (plans[t]!.pattern === "unpredictable" ? 2 : 1) / sizes[t]! ** FREQUENT_SIZE_BIAS,
  );
  fillTo(frequentOrder, sizes, FREQUENT_REIMAGE_SERVER_SHARE * servers, tolerance, (t) => (plans[t]!.frequent = true));
  for (const p of plans) {
    p.reimagesPerServerMonth = p.frequent
      ? 1 + Math.exp(rateRng.normal(Math.log(FREQUENT_EXCESS_MEDIAN), FREQUENT_EXCESS_LOG_SD))
      : Math.min(
          INFREQUENT_RATE_MAX,
          Math.exp(rateRng.normal(Math.log(INFREQUENT_RATE_MEDIAN), INFREQUENT_RATE_LOG_SD)),
        );
    const share = CORRELATED_SHARE_MIN + (CORRELATED_SHARE_MAX - CORRELATED_SHARE_MIN) * rateRng.next();
    p.correlatedShare = p.size >= 2 ? share : 0;
  }
  return plans;
}

/** Groups tenants into environments of one kind each, and gives each tenant a machine function. */
function planEnvironments(plans: TenantPlan[], seed: number): EnvironmentPlan[] {
  const rng = new SeededRng(streamSeed(seed, Stream.Environments));
  const byKind = new Map<EnvironmentKind, number[]>(ENVIRONMENT_KINDS.map((k) => [k, []]));
  for (let t = 0; t < plans.length; t++) byKind.get(environmentKind(plans[t]!.pattern, rng.next()))!.push(t);
  const environments: EnvironmentPlan[] = [];
  for (const kind of ENVIRONMENT_KINDS) {
    const members = byKind.get(kind)!;
    shuffle(members, rng);
    let count = 0;
    for (let i = 0; i < members.length;) {
      const geometric = Math.floor(Math.log(1 - rng.next()) / Math.log(1 - 1 / MEAN_TENANTS_PER_ENVIRONMENT));
      const take = Math.min(MAX_TENANTS_PER_ENVIRONMENT, 1 + geometric, members.length - i);
      const env = environments.length;
      const tenants = members.slice(i, i + take);
      environments.push({ name: `${kind}-${String(count++).padStart(3, "0")}`, tenants, reimagesPerMonth: 0 });
      const used = new Map<string, number>();
      for (const t of tenants) {
        const p = plans[t]!;
        p.environment = env;
        p.machineFunction = machineFunction(MACHINE_FUNCTIONS[p.pattern], used, rng);
      }
      i += take;
    }
  }
  for (const env of environments) {
    let least = Infinity;
    for (const t of env.tenants) least = Math.min(least, plans[t]!.reimagesPerServerMonth);
    env.reimagesPerMonth = Math.min(ENVIRONMENT_RATE_MAX, ENVIRONMENT_RATE_SHARE * least);
  }
  return environments;
}

/**
 * Where a tenant of `pattern` lives: user-facing (periodic) services in production, constant ones in production or
 * batch environments, unpredictable ones in development or testing (section 3.2). `u` is uniform in [0, 1).
 */
function environmentKind(pattern: UtilizationPattern, u: number): EnvironmentKind {
  switch (pattern) {
    case "periodic":
      return "prod";
    case "constant":
      return u < 0.6 ? "prod" : "batch";
    case "unpredictable":
      return u < 0.5 ? "dev" : "test";
  }
}

/** A machine function not yet used in the environment when one is left, else a numbered repeat. */
function machineFunction(labels: readonly string[], used: Map<string, number>, rng: SeededRng): string {
  const start = rng.int(labels.length);
  for (let k = 0; k < labels.length; k++) {
    const label = labels[(start + k) % labels.length]!;
    if (!used.has(label)) {
      used.set(label, 1);
      return label;
    }
  }
  const label = labels[start]!;
  const n = used.get(label)! + 1;
  used.set(label, n);
  return `${label}-${n}`;
}

/**
 * Servers: each tenant holds a contiguous run of server indices, tenants in a random order, racks filled in index
 * order (a tenant is deployed rack by rack, so big tenants span racks and small ones share them).
 */
function layOutServers(plans: TenantPlan[], o: ClusterGenOptions): SimServer[] {
  const rng = new SeededRng(streamSeed(o.seed, Stream.Layout));
  const order = plans.map((_, t) => t);
  shuffle(order, rng);
  const idWidth = Math.max(5, String(o.servers - 1).length);
  const rackWidth = Math.max(3, String(Math.ceil(o.servers / o.serversPerRack) - 1).length);
  const servers: SimServer[] = [];
  for (const t of order) {
    const p = plans[t]!;
    const offsetRng = new SeededRng(streamSeed(o.seed, Stream.Offsets, t));
    // Load is not perfectly balanced (section 3.2): offsets around the tenant's average server, mean zero.
    const sd = 0.5 + 2.5 * offsetRng.next();
    const offsets = Array.from({ length: p.size }, () => offsetRng.normal(0, sd));
    const mean = offsets.reduce((a, b) => a + b, 0) / p.size;
    for (let k = 0; k < p.size; k++) {
      const index = servers.length;
      p.servers.push(index);
      servers.push({
        index,
        id: `s${String(index).padStart(idWidth, "0")}`,
        rack: `r${String(Math.floor(index / o.serversPerRack)).padStart(rackWidth, "0")}`,
        tenant: t,
        cores: o.coresPerServer,
        diskBytes: o.diskBytes,
        offsetPct: Math.round((offsets[k]! - mean) * 1000) / 1000,
      });
    }
  }
  return servers;
}

/**
 * Each tenant's mean utilization: logistic(logit(level) + z + shift), clamped per pattern, with the shift found by
 * bisection so that the server-weighted mean is the level's.
 */
function tenantMeans(plans: TenantPlan[], levelPct: number): number[] {
  const base = Math.log(levelPct / (100 - levelPct));
  const meanAt = (p: TenantPlan, shift: number): number => {
    const v = 100 / (1 + Math.exp(-(base + p.meanZ + shift)));
    return Math.min(MAX_MEAN_PCT, Math.max(MIN_MEAN_PCT[p.pattern], v));
  };
  let total = 0;
  for (const p of plans) total += p.size;
  let lo = -8;
  let hi = 8;
  for (let i = 0; i < 50; i++) {
    const mid = (lo + hi) / 2;
    let sum = 0;
    for (const p of plans) sum += p.size * meanAt(p, mid);
    if (sum / total < levelPct) lo = mid;
    else hi = mid;
  }
  const shift = (lo + hi) / 2;
  return plans.map((p) => meanAt(p, shift));
}

/** Average CPU utilization per slot for one tenant of `pattern` with mean `meanPct` (seeds/004 section 3.2). */
function generateShape(
  pattern: UtilizationPattern,
  meanPct: number,
  slots: number,
  slotMs: number,
  rng: SeededRng,
): Float32Array {
  const out = new Float32Array(slots);
  const headroom = Math.min(meanPct, 100 - meanPct);
  switch (pattern) {
    case "periodic": {
      // A diurnal cycle peaking in the afternoon (+- 2 h per tenant), a second harmonic for a sharper peak, and for
      // half the tenants quieter weekends. Slot 0 is a Monday midnight.
      const amplitude = Math.min(headroom, Math.max(9, (0.5 + 0.3 * rng.next()) * headroom));
      const second = amplitude * 0.25 * rng.next();
      const peakHour = 13 + 4 * rng.next();
      const weekendFactor = rng.next() < 0.5 ? 1 : 0.6 + 0.3 * rng.next();
      const noiseSd = 1 + 1.5 * rng.next();
      for (let k = 0; k < slots; k++) {
        const tMs = (k + 0.5) * slotMs;
        const phase = (2 * Math.PI * ((tMs % DAY_MS) / 3_600_000 - peakHour)) / 24;
        const weekend = Math.floor(tMs / DAY_MS) % 7 >= 5;
        const f = weekend ? weekendFactor : 1;
        const swing = amplitude * Math.cos(phase) + second * Math.cos(2 * phase);
        out[k] = meanPct + f * swing - (1 - f) * 0.5 * amplitude + noiseSd * gaussian(rng);
      }
      break;
    }
    case "constant": {
      // A flat level with small noise and a slow drift of about a point (crawlers, scrubbers).
      const noiseSd = 0.4 + 1.2 * rng.next();
      const decay = Math.exp(-slotMs / (3 * DAY_MS));
      const step = Math.sqrt(1 - decay * decay);
      let drift = rng.normal(0, 1);
      for (let k = 0; k < slots; k++) {
        drift = drift * decay + step * gaussian(rng);
        out[k] = meanPct + drift + noiseSd * gaussian(rng);
      }
      break;
    }
    case "unpredictable": {
      // A mean-reverting random walk (time constant 6..48 h) reflected into 0..100, plus bursts (testing, dev).
      const spread = Math.max(6, (0.3 + 0.3 * rng.next()) * headroom);
      const tauMs = 6 * 3_600_000 * 8 ** rng.next();
      const decay = Math.exp(-slotMs / tauMs);
      const step = spread * Math.sqrt(1 - decay * decay);
      let x = meanPct + rng.normal(0, spread);
      for (let k = 0; k < slots; k++) {
        x = meanPct + (x - meanPct) * decay + step * gaussian(rng);
        if (x < 0) x = -x;
        if (x > 100) x = 200 - x;
        out[k] = x;
      }
      const burstsPerMs = (0.5 + 2.5 * rng.next()) / DAY_MS;
      const horizonMs = slots * slotMs;
      for (let t = exponential(rng, burstsPerMs); t < horizonMs; t += exponential(rng, burstsPerMs)) {
        const lengthMs = 10 * 60_000 * 18 ** rng.next();
        const first = Math.floor(t / slotMs);
        const height = out[first]! + (100 - out[first]!) * (0.3 + 0.5 * rng.next());
        for (let k = first; k < slots && k * slotMs < t + lengthMs; k++) {
          const overlap = Math.min((k + 1) * slotMs, t + lengthMs) - Math.max(k * slotMs, t);
          out[k] = out[k]! + (height - out[k]!) * (overlap / slotMs);
        }
      }
      for (let k = 0; k < slots; k++) out[k] = out[k]! + 1.5 * gaussian(rng);
      break;
    }
  }
  centre(out, meanPct);
  return out;
}

/** Shifts `series` so that its mean is `meanPct`, then clamps it to 0..100. */
function centre(series: Float32Array, meanPct: number): void {
  let sum = 0;
  for (let k = 0; k < series.length; k++) sum += series[k]!;
  const delta = meanPct - sum / series.length;
  for (let k = 0; k < series.length; k++) series[k] = clampPct(series[k]! + delta);
}

/** Shifts every tenant by the same amount until the server-weighted mean is the level's (clamping bends it a bit). */
function matchClusterMean(series: Float32Array[], plans: TenantPlan[], levelPct: number): void {
  let total = 0;
  for (const p of plans) total += p.size;
  for (let round = 0; round < 3; round++) {
    let sum = 0;
    for (let t = 0; t < series.length; t++) sum += plans[t]!.size * meanOf(series[t]!);
    const delta = levelPct - sum / total;
    if (Math.abs(delta) < 0.05) return;
    for (const s of series) for (let k = 0; k < s.length; k++) s[k] = clampPct(s[k]! + delta);
  }
}

/**
 * Real utilization: each tenant replays one real series chosen among those whose own pattern (at this slot length)
 * is the tenant's planned one (any series when none is), from a random phase, looped to the horizon, scaled (at most
 * 2x either way; constant series are only offset so that they stay flat) and offset to the tenant's mean.
 */
function replayTemplates(
  plans: TenantPlan[],
  means: number[],
  templates: readonly RealTemplate[],
  slotMs: number,
  slots: number,
  seed: number,
): Float32Array[] {
  const cycles = templates.map((t) => templateCycle(t.series, slotMs));
  const native = cycles.map((c) => patternOf(gridSeries("template", c, 0, c.length, slotMs / 1000)).pattern);
  const cycleMeans = cycles.map(meanOf);
  return plans.map((p, t) => {
    const rng = new SeededRng(streamSeed(seed, Stream.Utilization, t));
    const candidates = cycles.map((_, i) => i).filter((i) => native[i] === p.pattern);
    const pool = candidates.length > 0 ? candidates : cycles.map((_, i) => i);
    const chosen = pool[rng.int(pool.length)]!;
    const cycle = cycles[chosen]!;
    const phase = rng.int(cycle.length);
    const mean = means[t]!;
    const m = cycleMeans[chosen]!;
    const scale = native[chosen] === "constant" || m < 0.5 ? 1 : Math.min(2, Math.max(0.5, mean / m));
    const out = new Float32Array(slots);
    for (let k = 0, j = phase; k < slots; k++, j = j + 1 === cycle.length ? 0 : j + 1) out[k] = scale * cycle[j]!;
    centre(out, mean);
    return out;
  });
}

/** Reimages over [0, horizonMs), ascending by time (then server). */
function generateReimages(
  plans: TenantPlan[],
  environments: EnvironmentPlan[],
  horizonMs: number,
  seed: number,
): SimReimage[] {
  const times: number[] = [];
  const servers: number[] = [];
  const add = (atMs: number, server: number): void => {
    if (atMs < horizonMs) {
      times.push(atMs);
      servers.push(server);
    }
  };
  const months = Math.ceil(horizonMs / MONTH_MS);
  for (let t = 0; t < plans.length; t++) {
    const p = plans[t]!;
    // One stream per process, so that a longer horizon extends a shorter one's reimages rather than redrawing them.
    const jitterRng = new SeededRng(streamSeed(seed, Stream.ReimageJitter, t));
    const singlesRng = new SeededRng(streamSeed(seed, Stream.SingleReimages, t));
    const rng = new SeededRng(streamSeed(seed, Stream.TenantReimages, t));
    // The environment's events already cover part of the tenant's rate.
    const own = Math.max(0, p.reimagesPerServerMonth - environments[p.environment]!.reimagesPerMonth);
    const meanHit = WHOLE_TENANT_CHANCE + (1 - WHOLE_TENANT_CHANCE) * 0.75;
    const tenantEventsPerMonth = (p.correlatedShare * own) / meanHit;
    const singlesPerMonth = (1 - p.correlatedShare) * own * p.size;
    const singles = new Renewals(SINGLE_REIMAGE_REGULARITY, singlesRng);
    const tenantWide = new Renewals(TENANT_REIMAGE_REGULARITY, rng);
    const pool = [...p.servers];
    for (let m = 0; m < months; m++) {
      const jitter = monthlyJitter(jitterRng);
      const to = Math.min(horizonMs, (m + 1) * MONTH_MS);
      singles.run((singlesPerMonth * jitter) / MONTH_MS, to, (at) => add(at, p.servers[singlesRng.int(p.size)]!));
      tenantWide.run((tenantEventsPerMonth * jitter) / MONTH_MS, to, (at) => {
        const whole = rng.next() < WHOLE_TENANT_CHANCE;
        const hit = whole ? p.size : Math.max(1, Math.round(p.size * (0.5 + 0.5 * rng.next())));
        // A partial Fisher-Yates shuffle picks `hit` distinct servers.
        for (let i = 0; i < hit; i++) {
          const j = i + rng.int(p.size - i);
          const s = pool[j]!;
          pool[j] = pool[i]!;
          pool[i] = s;
          add(at + rng.next() * CORRELATED_SPREAD_MS, s);
        }
      });
    }
  }
  for (let e = 0; e < environments.length; e++) {
    const env = environments[e]!;
    if (!(env.reimagesPerMonth > 0)) continue;
    const rng = new SeededRng(streamSeed(seed, Stream.EnvironmentReimages, e));
    const events = new Renewals(1, rng);
    for (let m = 0; m < months; m++) {
      const jitter = monthlyJitter(rng);
      const to = Math.min(horizonMs, (m + 1) * MONTH_MS);
      events.run((env.reimagesPerMonth * jitter) / MONTH_MS, to, (at) => {
        for (const t of env.tenants) for (const s of plans[t]!.servers) add(at + rng.next() * CORRELATED_SPREAD_MS, s);
      });
    }
  }
  const order = times.map((_, i) => i);
  order.sort((a, b) => times[a]! - times[b]! || servers[a]! - servers[b]!);
  return order.map((i) => ({ atMs: Math.floor(times[i]!), server: servers[i]! }));
}

/** A month's rate multiplier: lognormal with mean 1. */
function monthlyJitter(rng: SeededRng): number {
  return Math.exp(rng.normal(-(MONTHLY_RATE_LOG_SD ** 2) / 2, MONTHLY_RATE_LOG_SD));
}

/**
 * A renewal process whose gaps are gamma-distributed with integer shape `regularity` (1: Poisson; larger: closer to
 * a schedule) and whose rate may change between calls; the pending arrival carries over.
 */
class Renewals {
  private nextMs: number | undefined;
  constructor(
    private readonly regularity: number,
    private readonly rng: SeededRng,
  ) {}

  /** Calls `at` for each arrival before `toMs` at rate `perMs` (arrivals per ms). */
  run(perMs: number, toMs: number, at: (tMs: number) => void): void {
    if (!(perMs > 0)) return;
    // The first arrival falls a uniform share of a gap after time 0, as in a process that started long before.
    this.nextMs ??= this.rng.next() * this.gap(perMs);
    while (this.nextMs < toMs) {
      at(this.nextMs);
      this.nextMs += this.gap(perMs);
    }
  }

  private gap(perMs: number): number {
    let g = 0;
    for (let i = 0; i < this.regularity; i++) g += exponential(this.rng, perMs * this.regularity);
    return g;
  }
}

function exponential(rng: SeededRng, perMs: number): number {
  return -Math.log(1 - rng.next()) / perMs;
}

// --- Views and summary --------------------------------------------------------------------------------------------

/**
 * A tenant's average-server series over [fromMs, toMs) (default: the history window) as the classifier takes it,
 * with times in ms since the simulation's epoch.
 */
export function tenantSeries(
  cluster: SimCluster,
  tenant: number,
  fromMs = 0,
  toMs: number = cluster.historyMs,
): UtilizationSeries {
  const t = cluster.tenants[tenant]!;
  const first = Math.max(0, Math.floor(fromMs / cluster.slotMs));
  const end = Math.min(t.utilization.length, Math.ceil(toMs / cluster.slotMs));
  return gridSeries(t.id, t.utilization, first, end, cluster.slotMs / 1000);
}

function gridSeries(
  name: string,
  values: Float32Array,
  first: number,
  end: number,
  stepSec: number,
): UtilizationSeries {
  const stepMs = stepSec * 1000;
  const timesMs: number[] = [];
  const cpuPct: number[] = [];
  for (let k = first; k < end; k++) {
    timesMs.push(k * stepMs);
    cpuPct.push(values[k]!);
  }
  return { name, stepSec, startMs: first * stepMs, timesMs, cpuPct };
}

/** The calibration figures of a cluster, to compare with seeds/004 section 3. Shares are fractions (0..1). */
export interface ClusterSummary {
  servers: number;
  tenants: number;
  environments: number;
  racks: number;
  largestTenantServers: number;
  medianTenantServers: number;
  /** Figure 2: share of tenants per pattern. */
  tenantShare: Record<UtilizationPattern, number>;
  /** Figure 3: share of servers per pattern (the paper: periodic about 40 %, periodic + constant about 75 %). */
  serverShare: Record<UtilizationPattern, number>;
  /** Mean server CPU utilization over servers and the whole horizon (offsets and clamping included), percent. */
  meanUtilizationPct: number;
  reimages: number;
  /** Reimages per server per month over the horizon. */
  reimagesPerServerMonth: number;
  /** Figure 4: share of servers reimaged once a month or less on average (the paper: at least 90 %). */
  serversAtMostOneReimagePerMonth: number;
  /** Share of servers reimaged more than twice a month on average (the tail). */
  serversAboveTwoReimagesPerMonth: number;
  /** Figure 5: share of tenants reimaged once per server per month or less (the paper: at least 80 %). */
  tenantsAtMostOneReimagePerServerMonth: number;
  /** Share of reimages within `CORRELATION_WINDOW_MS` of another one in the same environment. */
  correlatedReimageShare: number;
  /**
   * Figure 6: mean Spearman rank correlation, over pairs of consecutive whole months, of tenants' reimages per server
   * in one month and in the next (NaN with fewer than two whole months).
   */
  reimageRankSpearman: number;
}

/** The calibration figures of `cluster`. */
export function summarizeCluster(cluster: SimCluster): ClusterSummary {
  const { tenants, servers, reimages } = cluster;
  const patterns: UtilizationPattern[] = ["periodic", "constant", "unpredictable"];
  const tenantShare = { periodic: 0, constant: 0, unpredictable: 0 };
  const serverShare = { periodic: 0, constant: 0, unpredictable: 0 };
  for (const t of tenants) {
    tenantShare[t.pattern] += 1 / tenants.length;
    serverShare[t.pattern] += t.servers.length / servers.length;
  }
  for (const p of patterns) {
    tenantShare[p] = round4(tenantShare[p]);
    serverShare[p] = round4(serverShare[p]);
  }

  let utilizationSum = 0;
  for (const t of tenants) utilizationSum += tenantServersMean(cluster, t);
  const sizes = tenants.map((t) => t.servers.length).sort((a, b) => a - b);

  const months = cluster.horizonMs / MONTH_MS;
  const perServer = new Float64Array(servers.length);
  for (const r of reimages) perServer[r.server]! += 1;
  let atMostOne = 0;
  let aboveTwo = 0;
  for (let s = 0; s < servers.length; s++) {
    if (perServer[s]! / months <= 1) atMostOne++;
    if (perServer[s]! / months > 2) aboveTwo++;
  }
  let tenantsAtMostOne = 0;
  for (const t of tenants) {
    let n = 0;
    for (const s of t.servers) n += perServer[s]!;
    if (n / t.servers.length / months <= 1) tenantsAtMostOne++;
  }

  return {
    servers: servers.length,
    tenants: tenants.length,
    environments: new Set(tenants.map((t) => t.environment)).size,
    racks: cluster.racks,
    largestTenantServers: sizes[sizes.length - 1] ?? 0,
    medianTenantServers: sizes[sizes.length >> 1] ?? 0,
    tenantShare,
    serverShare,
    meanUtilizationPct: round4(utilizationSum / servers.length),
    reimages: reimages.length,
    reimagesPerServerMonth: round4(reimages.length / servers.length / months),
    serversAtMostOneReimagePerMonth: round4(atMostOne / servers.length),
    serversAboveTwoReimagesPerMonth: round4(aboveTwo / servers.length),
    tenantsAtMostOneReimagePerServerMonth: round4(tenantsAtMostOne / tenants.length),
    correlatedReimageShare: round4(correlatedShare(cluster)),
    reimageRankSpearman: round4(rankStability(cluster)),
  };
}

/** The sum over a tenant's servers of their mean utilization over the horizon (offset and clamping included). */
function tenantServersMean(cluster: SimCluster, tenant: SimTenant): number {
  const u = tenant.utilization;
  const n = u.length;
  if (n === 0) return 0;
  let minOffset = 0;
  let maxOffset = 0;
  for (const s of tenant.servers) {
    const offset = cluster.servers[s]!.offsetPct;
    minOffset = Math.min(minOffset, offset);
    maxOffset = Math.max(maxOffset, offset);
  }
  // Clamping adds back what an offset pushes below 0 and removes what it pushes above 100. Only the values within the
  // offsets' reach of a bound can be clamped: those few, sorted with prefix sums, give each server's share of it in
  // two binary searches.
  let sum = 0;
  const low: number[] = [];
  const high: number[] = [];
  for (let k = 0; k < n; k++) {
    const v = u[k]!;
    sum += v;
    if (v < -minOffset) low.push(v);
    else if (v > 100 - maxOffset) high.push(v);
  }
  const lowSorted = Float64Array.from(low).sort();
  const highSorted = Float64Array.from(high).sort();
  const lowPrefix = prefixSums(lowSorted);
  const highPrefix = prefixSums(highSorted);
  let total = 0;
  for (const s of tenant.servers) {
    const offset = cluster.servers[s]!.offsetPct;
    const below = lowerBound(lowSorted, -offset);
    const above = lowerBound(highSorted, 100 - offset);
    const raised = -(lowPrefix[below]! + below * offset);
    const cut = highPrefix[highSorted.length]! - highPrefix[above]! + (highSorted.length - above) * (offset - 100);
    total += (sum + n * offset + raised - cut) / n;
  }
  return total;
}

function prefixSums(a: Float64Array): Float64Array {
  const prefix = new Float64Array(a.length + 1);
  for (let i = 0; i < a.length; i++) prefix[i + 1] = prefix[i]! + a[i]!;
  return prefix;
}

/** The first index of ascending `a` whose value is >= `v`. */
function lowerBound(a: Float64Array, v: number): number {
  let lo = 0;
  let hi = a.length;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if (a[mid]! < v) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

/** Share of reimages that have another reimage of their environment within `CORRELATION_WINDOW_MS`. */
function correlatedShare(cluster: SimCluster): number {
  const { reimages } = cluster;
  if (reimages.length === 0) return 0;
  const environmentOf = new Map<string, number>();
  const serverEnvironment = new Int32Array(cluster.servers.length);
  for (const s of cluster.servers) {
    const name = cluster.tenants[s.tenant]!.environment;
    if (!environmentOf.has(name)) environmentOf.set(name, environmentOf.size);
    serverEnvironment[s.index] = environmentOf.get(name)!;
  }
  const last = new Float64Array(environmentOf.size).fill(-Infinity);
  const lastIndex = new Int32Array(environmentOf.size).fill(-1);
  const correlated = new Uint8Array(reimages.length);
  for (let i = 0; i < reimages.length; i++) {
    const r = reimages[i]!;
    const e = serverEnvironment[r.server]!;
    if (r.atMs - last[e]! <= CORRELATION_WINDOW_MS) {
      correlated[i] = 1;
      correlated[lastIndex[e]!] = 1;
    }
    last[e] = r.atMs;
    lastIndex[e] = i;
  }
  let n = 0;
  for (let i = 0; i < correlated.length; i++) n += correlated[i]!;
  return n / reimages.length;
}

/**
 * Month-to-month consistency of tenants' reimage rates (seeds/004 figure 6): the mean Spearman correlation of tenants'
 * reimages per server between consecutive whole months (NaN with fewer than two).
 */
function rankStability(cluster: SimCluster): number {
  const months = Math.floor(cluster.horizonMs / MONTH_MS);
  if (months < 2) return NaN;
  const { tenants } = cluster;
  const counts = tenants.map(() => new Float64Array(months));
  for (const r of cluster.reimages) {
    const m = Math.floor(r.atMs / MONTH_MS);
    if (m < months) counts[cluster.servers[r.server]!.tenant]![m]! += 1;
  }
  let sum = 0;
  let pairs = 0;
  let previous = ranks(tenants.map((t, i) => counts[i]![0]! / t.servers.length));
  for (let m = 1; m < months; m++) {
    const current = ranks(tenants.map((t, i) => counts[i]![m]! / t.servers.length));
    const rho = pearson(previous, current);
    if (Number.isFinite(rho)) {
      sum += rho;
      pairs++;
    }
    previous = current;
  }
  return pairs > 0 ? sum / pairs : NaN;
}

/** 1-based ranks, ties sharing their mean rank. */
function ranks(x: readonly number[]): number[] {
  const order = x.map((_, i) => i).sort((i, j) => x[i]! - x[j]!);
  const out = new Array<number>(x.length);
  for (let i = 0; i < order.length;) {
    let j = i;
    while (j + 1 < order.length && x[order[j + 1]!] === x[order[i]!]) j++;
    for (let k = i; k <= j; k++) out[order[k]!] = (i + j) / 2 + 1;
    i = j + 1;
  }
  return out;
}

function pearson(a: readonly number[], b: readonly number[]): number {
  const ma = a.reduce((s, v) => s + v, 0) / a.length;
  const mb = b.reduce((s, v) => s + v, 0) / b.length;
  let ab = 0;
  let aa = 0;
  let bb = 0;
  for (let i = 0; i < a.length; i++) {
    ab += (a[i]! - ma) * (b[i]! - mb);
    aa += (a[i]! - ma) ** 2;
    bb += (b[i]! - mb) ** 2;
  }
  return ab / Math.sqrt(aa * bb);
}

// --- Helpers ------------------------------------------------------------------------------------------------------

/** Quantiles of the standard normal at (i + 0.5) / size: a table lookup is a cheap normal draw for per-slot noise. */
const GAUSSIAN_TABLE_SIZE = 4096;
const GAUSSIAN_TABLE = Float64Array.from({ length: GAUSSIAN_TABLE_SIZE }, (_, i) =>
  normalQuantile((i + 0.5) / GAUSSIAN_TABLE_SIZE),
);

/**
 * A standard normal draw for noise, one uniform per draw (Box-Muller's log, root and cosine cost six times as much, and
 * a year of hourly slots for 1,250 tenants needs tens of millions of draws). Truncated at +-3.5 sd.
 */
function gaussian(rng: SeededRng): number {
  return GAUSSIAN_TABLE[(rng.next() * GAUSSIAN_TABLE_SIZE) | 0]!;
}

/** The standard normal quantile function (Acklam's rational approximation, relative error below 1.2e-9). */
function normalQuantile(p: number): number {
  const a = [
    -39.69683028665376, 220.9460984245205, -275.9285104469687, 138.357751867269, -30.66479806614716, 2.506628277459239,
  ];
  const b = [-54.47609879822406, 161.5858368580409, -155.6989798598866, 66.80131188771972, -13.28068155288572];
  const c = [
    -0.007784894002430293, -0.3223964580411365, -2.400758277161838, -2.549732539343734, 4.374664141464968,
    2.938163982698783,
  ];
  const d = [0.007784695709041462, 0.3224671290700398, 2.445134137142996, 3.754408661907416];
  const tail = (q: number): number =>
    (((((c[0]! * q + c[1]!) * q + c[2]!) * q + c[3]!) * q + c[4]!) * q + c[5]!) /
    ((((d[0]! * q + d[1]!) * q + d[2]!) * q + d[3]!) * q + 1);
  if (p < 0.02425) return tail(Math.sqrt(-2 * Math.log(p)));
  if (p > 1 - 0.02425) return -tail(Math.sqrt(-2 * Math.log(1 - p)));
  const q = p - 0.5;
  const r = q * q;
  return (
    ((((((a[0]! * r + a[1]!) * r + a[2]!) * r + a[3]!) * r + a[4]!) * r + a[5]!) * q) /
    (((((b[0]! * r + b[1]!) * r + b[2]!) * r + b[3]!) * r + b[4]!) * r + 1)
  );
}

/** A seed for stream `stream` (and item `index`) of `seed`: a 32-bit integer hash, so that streams are unrelated. */
function streamSeed(seed: number, stream: number, index = 0): number {
  let h = hash32((seed >>> 0) ^ hash32(Math.floor(seed / 4294967296) >>> 0));
  h = hash32(h ^ Math.imul(stream, 0x9e3779b1));
  return hash32(h + Math.imul(index + 1, 0x85ebca6b));
}

/** A 32-bit integer hash with full avalanche (Chris Wellons' "lowbias32"). */
function hash32(x: number): number {
  x = Math.imul(x ^ (x >>> 16), 0x7feb352d);
  x = Math.imul(x ^ (x >>> 15), 0x846ca68b);
  return (x ^ (x >>> 16)) >>> 0;
}

/** `candidates` in a random order where larger weights tend to come first (Efraimidis-Spirakis keys). */
function weightedOrder(rng: SeededRng, candidates: readonly number[], weight: (t: number) => number): number[] {
  const keyed = candidates.map((t) => ({ t, key: exponential(rng, 1) / weight(t) }));
  keyed.sort((a, b) => a.key - b.key || a.t - b.t);
  return keyed.map((k) => k.t);
}

/** Takes tenants in `order` until their servers reach `target`, skipping any that would overshoot by > `tolerance`. */
function fillTo(
  order: readonly number[],
  sizes: readonly number[],
  target: number,
  tolerance: number,
  take: (t: number) => void,
): void {
  let assigned = 0;
  for (const t of order) {
    if (assigned >= target) return;
    if (assigned + sizes[t]! > target + tolerance) continue;
    take(t);
    assigned += sizes[t]!;
  }
}

function meanOf(x: Float32Array): number {
  let sum = 0;
  for (let k = 0; k < x.length; k++) sum += x[k]!;
  return x.length > 0 ? sum / x.length : 0;
}

function clampPct(v: number): number {
  return v < 0 ? 0 : v > 100 ? 100 : v;
}

function round4(x: number): number {
  return Math.round(x * 10_000) / 10_000;
}
