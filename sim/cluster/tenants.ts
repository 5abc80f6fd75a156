/**
 * The cluster generator's tenants: sizes, patterns and reimage rates, environments with their machine functions, and
 * the servers laid out on racks.
 */
import { SeededRng, shuffle } from "../../common/rng.js";
import type { UtilizationPattern } from "../../common/trace-gen.js";
import type { SimServer } from "../model.js";
import type { ClusterGenOptions } from "./options.js";
import {
  CORRELATED_SHARE_MAX,
  CORRELATED_SHARE_MIN,
  ENVIRONMENT_KINDS,
  ENVIRONMENT_RATE_MAX,
  ENVIRONMENT_RATE_SHARE,
  FREQUENT_EXCESS_LOG_SD,
  FREQUENT_EXCESS_MEDIAN,
  FREQUENT_MAX_TENANT_SHARE,
  FREQUENT_REIMAGE_SERVER_SHARE,
  FREQUENT_SIZE_BIAS,
  INFREQUENT_RATE_LOG_SD,
  INFREQUENT_RATE_MAX,
  INFREQUENT_RATE_MEDIAN,
  MACHINE_FUNCTIONS,
  MAX_TENANTS_PER_ENVIRONMENT,
  MAX_TENANT_SHARE,
  MEAN_LOGIT_SD,
  MEAN_TENANTS_PER_ENVIRONMENT,
  PERIODIC_SERVER_SHARE,
  PERIODIC_SIZE_BIAS,
  SIZE_LOG_SD,
  SIZE_MEDIAN,
  Stream,
  UNPREDICTABLE_SERVER_SHARE,
  UNPREDICTABLE_SIZE_BIAS,
} from "./calibration.js";
import type { EnvironmentKind } from "./calibration.js";
import { fillTo, streamSeed, weightedOrder } from "./random.js";

/** What the generator decided about a tenant before any time series. */
export interface TenantPlan {
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

export interface EnvironmentPlan {
  name: string;
  tenants: number[];
  reimagesPerMonth: number;
}

/** Tenant sizes, patterns and reimage rates. */
export function planTenants(servers: number, seed: number): TenantPlan[] {
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
export function planEnvironments(plans: TenantPlan[], seed: number): EnvironmentPlan[] {
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
export function environmentKind(pattern: UtilizationPattern, u: number): EnvironmentKind {
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
export function machineFunction(labels: readonly string[], used: Map<string, number>, rng: SeededRng): string {
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
export function layOutServers(plans: TenantPlan[], o: ClusterGenOptions): SimServer[] {
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
