/**
 * The cluster generator's calibration to seeds/004 section 3 (tenant sizes, patterns, means, reimage rates and their
 * correlation), and its random streams.
 */
import type { UtilizationPattern } from "../../common/trace-gen.js";

/** Tenant sizes: round(lognormal) servers, median 3, heavy tail (mean about 8 servers, so 1,250 tenants per 10,000). */
export const SIZE_MEDIAN = 3;
export const SIZE_LOG_SD = 1.4;
/** No tenant holds more than this share of the cluster, so that small clusters still mix patterns. */
export const MAX_TENANT_SHARE = 0.1;
/** Figure 3: periodic tenants hold about 40 % of the servers; periodic + constant about 75 %. */
export const PERIODIC_SERVER_SHARE = 0.4;
export const UNPREDICTABLE_SERVER_SHARE = 0.25;
/**
 * Figure 2: periodic tenants are a small minority, so they are drawn with probability growing with size (big
 * user-facing services); unpredictable ones (development and testing) lean small; the many small rest are constant.
 */
export const PERIODIC_SIZE_BIAS = 1;
export const UNPREDICTABLE_SIZE_BIAS = 0.5;
/** Spread of tenant means around the level's, on the logit scale. */
export const MEAN_LOGIT_SD = 0.8;
export const MAX_MEAN_PCT = 90;
/** A daily swing and a random walk need room above 0 % to be seen (and classified) as such. */
export const MIN_MEAN_PCT: Readonly<Record<UtilizationPattern, number>> = {
  periodic: 12,
  unpredictable: 10,
  constant: 1,
};

/**
 * Figures 4 and 5: at least 90 % of servers see one reimage a month or fewer, a 10 % tail of servers (20 % of tenants:
 * smaller ones, more often development and testing) far more. "Frequent" tenants are drawn to hold 7 % of the servers
 * (Poisson-like counts lift a few more servers of infrequent tenants above one a month), leaning small (weight
 * size^-0.5, twice for unpredictable tenants) and never among the big ones (over 1 % of the cluster).
 */
export const FREQUENT_REIMAGE_SERVER_SHARE = 0.07;
export const FREQUENT_SIZE_BIAS = 0.5;
export const FREQUENT_MAX_TENANT_SHARE = 0.01;
/** Monthly reimage rates per server: infrequent tenants lognormal (median 0.15) capped below 1, frequent 1 + lognormal. */
export const INFREQUENT_RATE_MEDIAN = 0.15;
export const INFREQUENT_RATE_LOG_SD = 1;
export const INFREQUENT_RATE_MAX = 0.85;
export const FREQUENT_EXCESS_MEDIAN = 1.5;
export const FREQUENT_EXCESS_LOG_SD = 0.6;
/**
 * Figure 6: a tenant's rate changes from month to month (base x lognormal jitter of this log-sd, mean 1) but it keeps
 * its rank.
 */
export const MONTHLY_RATE_LOG_SD = 0.35;
/** Section 3.3: reimages are often correlated. Per tenant, this range of its reimages comes from tenant-wide events. */
export const CORRELATED_SHARE_MIN = 0.3;
export const CORRELATED_SHARE_MAX = 0.8;
/** A tenant-wide event hits the whole tenant half of the time, otherwise a random 50..100 % of it. */
export const WHOLE_TENANT_CHANCE = 0.5;
/** Environment-wide events (repurposing, redeployment): a quarter of the environment's least-reimaged tenant's rate... */
export const ENVIRONMENT_RATE_SHARE = 0.25;
/** ... but at most this many per month. */
export const ENVIRONMENT_RATE_MAX = 0.05;
/**
 * Gamma shapes of the gaps between a tenant's single-server and between its tenant-wide reimages. Most reimages are
 * deliberate (redeploys, AutoPilot's resilience tests, disk maintenance rounds), so they come more regularly than a
 * Poisson process (shape 1) would bring them, which also steadies tenants' monthly counts (figure 6).
 */
export const SINGLE_REIMAGE_REGULARITY = 3;
export const TENANT_REIMAGE_REGULARITY = 3;
/** The servers of one correlated event are reimaged within this window (a rolling redeploy). */
export const CORRELATED_SPREAD_MS = 10 * 60_000;
/** `summarizeCluster` counts a reimage as correlated when another one hits its environment this close in time. */
export const CORRELATION_WINDOW_MS = 30 * 60_000;

export const ENVIRONMENT_KINDS = ["prod", "batch", "dev", "test"] as const;
export type EnvironmentKind = (typeof ENVIRONMENT_KINDS)[number];
/** Machine functions by pattern: user-facing services are periodic, crawlers and pipelines constant, test rigs not. */
export const MACHINE_FUNCTIONS: Readonly<Record<UtilizationPattern, readonly string[]>> = {
  periodic: ["frontend", "ranking", "index-serve", "query-cache", "api-gateway", "ads-serve", "mail-serve"],
  constant: ["crawler", "scrubber", "index-build", "log-ingest", "blob-store", "analytics", "backup", "monitoring"],
  unpredictable: ["build", "integration-test", "load-test", "dev-box", "staging", "canary", "experiment"],
};
/** Tenants per environment: 1 + geometric, mean this, at most `MAX_TENANTS_PER_ENVIRONMENT`. */
export const MEAN_TENANTS_PER_ENVIRONMENT = 3;
export const MAX_TENANTS_PER_ENVIRONMENT = 10;

/** Random streams, one per purpose, so that each decision is independent of the options that do not concern it. */
export const Stream = {
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
