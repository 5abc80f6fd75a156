/**
 * Resource manager options: every field has a default; `resolveResourceManagerOptions` fills and validates them.
 *
 * Not an option: the directory the daemon appends its typed events to (`events.jsonl`, common/events.ts) comes from
 * the environment variable `HARVEST_EVENTS_DIR`, which the local-cluster launcher sets to the cluster's `logs/`;
 * unset, the daemon writes no events.
 */
import { join } from "node:path";
import { parseHostPort, resolveAdvertiseHost } from "../common/net-address.js";
import { checkSecurityOptions, invalidOption, mergeOptions } from "../common/options.js";
import type { TlsOption } from "../common/options.js";
import type { Resources } from "../common/resource.js";
import { resolveClassWeights, resolveJobTypeOptions } from "./policy/class-selection.js";
import type { ClassWeightsInput, JobLengthRule, JobTypeOptions } from "./policy/class-selection.js";
import {
  CLASS_FALLBACKS,
  DEFAULT_CLASS_FALLBACK,
  DEFAULT_JOB_LENGTH,
  DEFAULT_KILLED_JOBS_LEAVE_CLASSES,
  DEFAULT_LEARN_FROM_KILLS,
  DEFAULT_SATURATION_SHARE,
  JOB_LENGTH_RULES,
  mustBeOneOf,
} from "./policy/history-placement.js";
import type { HistoryPlacementOptions } from "./policy/history-placement.js";
import { detailsOf, isHarvestError } from "../common/errors.js";
import { validatePowerDomainConfig } from "./policy/power-domains.js";
import type { PowerDomainSpec } from "./policy/power-domains.js";
import { resolveTenantRegistryOptions } from "./tenant-registry.js";
import { resolveDrainOptions } from "./policy/drain.js";
import { DEFAULT_LOCALITY, LOCALITY_POLICIES } from "./policy/locality.js";
import { DEFAULT_MAX_AM_SHARE } from "./policy/scheduler.js";
import type { LocalityPolicyName } from "./policy/locality.js";
import type { DrainOptions } from "./policy/drain.js";
import { resolveLifetimeOptions } from "./policy/lifetime.js";
import type { LifetimeOptions } from "./policy/lifetime.js";
import { resolveNodeChoiceOptions } from "./policy/node-choice.js";
import { resolveAdmissionOptions } from "./policy/admission-options.js";
import type { AdmissionOptions, AdmissionPolicy } from "./policy/admission-options.js";
import type { NodeChoiceKind, NodeChoiceOptions } from "./policy/node-choice.js";
import { resolveSurvivalQuoteOptions } from "./policy/survival-quote.js";
import type { SurvivalQuoteOptions } from "./policy/survival-quote.js";
import type { TenantRegistryOptions } from "./tenant-registry.js";
import { checkHaCoordination } from "../common/ha/coordination.js";
import type { HaCoordination } from "../common/ha/coordination.js";

/** The longest AM token lifetime: 30 days. */
const MAX_AM_TOKEN_LIFETIME_MS = 2_592_000_000;

/** Settings of a resource manager. */
export interface ResourceManagerOptions {
  /** Interface to bind. @default "127.0.0.1" */
  host: string;
  /** Port to bind; 0 picks a free one. @default 0 */
  port: number;
  /** Interface the web server (UI, REST API, `/metrics`) binds. @default the bind `host` */
  httpHost: string;
  /** Port of the web server; 0 picks a free one (the ready file and `harvest cluster up` record the URL). @default 0 */
  httpPort: number;
  /**
   * Host name or IP that peers and clients use to reach this daemon (what it registers and writes in ready files).
   * @default the bind `host`, or this machine's host name when `host` is a wildcard (0.0.0.0, ::)
   */
  advertiseHost: string;
  /** Directory of the LevelDB state store and the staging area. Required. */
  dataDir: string;
  /** Where the jobs' DAG files and their job managers' recovery journals are kept. @default `<dataDir>/staging` */
  stagingDir: string;
  /** A node that has not heartbeated for this long is lost. @default 10000 */
  nodeExpiryMs: number;
  /** Node managers heartbeat this often. @default 1000 */
  heartbeatIntervalMs: number;
  /** Fraction of each node's cores kept free for its primary tenant. @default 0.1 */
  reserveFraction: number;
  /** Size of the job manager's own container. @default { vcoresMilli: 500, memoryMb: 256 } */
  amResource: Resources;
  /** Real failures of the job manager allowed before the job fails. @default 2 */
  maxAmAttempts: number;
  /** Job-manager attempts preempted by a primary tenant or lost with their node before the job fails. @default 20 */
  maxAmPreemptions: number;
  /**
   * Job managers may hold at most this share of the cluster's harvestable cores; one always may run (YARN's
   * maximum-am-resource-percent, over what Harvest may use): it keeps a busy cluster's job managers from holding the
   * cores their tasks need (`harvest sim sweep --max-am-share 1` shows what no limit costs); 1: no limit. @default 0.1
   */
  maxAmShare: number;
  /**
   * argv that starts a job manager inside its container; `${HARVEST_HOME}` is the task runtime the node manager
   * localized, and "node" its Node binary. @default ["node", "${HARVEST_HOME}/dist/jobmanager/main.js"]
   */
  jobManagerCommand: string[];
  /**
   * How long a job manager keeps its new tasks off a server after a preemption notice from it (node managers'
   * `preemptionNotice`); given to job managers as HARVEST_NOTICE_AVOID_MS; 0: never. @default 120000 (the job
   * manager's DEFAULT_NOTICE_AVOID_MS)
   */
  noticeAvoidMs: number;
  /** A granted container the node manager has not reported running within this time is released. @default 30000 */
  containerLaunchExpiryMs: number;
  /** A running job manager silent for this long is considered dead. @default 30000 */
  amExpiryMs: number;
  /**
   * How long a job manager's AM token is valid (YARN's AMRMToken). A job manager whose token has less than half of it
   * left receives a fresh one in its next Allocate answer; a token that expired is refused by the resource manager and
   * the node managers. It must comfortably exceed a job manager's start and the longest pause between its calls.
   * Between 1000 ms and 30 days. @default 86400000 (24 h)
   */
  amTokenLifetimeMs: number;
  /**
   * After a restart, how long the resource manager waits for node managers to re-register with the containers they
   * still run before it starts a new job-manager attempt for a job whose job manager no node reported (YARN's
   * work-preserving recovery wait). Running containers are kept either way. @default 10000
   */
  resyncWindowMs: number;
  /**
   * Where a job's containers may go: "stock" (any server with headroom, history-oblivious YARN) or "history"
   * (seeds/004 Algorithm 1: only servers of the utilization classes chosen for the job). @default "stock"
   */
  schedulerPolicy: "stock" | "history";
  /** Algorithm 1's weights by job type and utilization pattern (see `DEFAULT_CLASS_WEIGHTS`). @default {} */
  classWeights: ClassWeightsInput;
  /** How past job durations become the short/long thresholds (see `JobTypeOptions`). @default {} */
  jobTypes: Partial<JobTypeOptions>;
  /** Under the history policy, a job that finds no class with room for this long runs anywhere; 0 waits for ever. @default 60000 */
  classWaitMs: number;
  /**
   * Under the history policy, what a job does when no class nor combination of classes has room: "stock" places it as
   * the stock policy does at once; "wait" (seeds/004's "do not pick classes") waits up to `classWaitMs`.
   * @default "stock"
   */
  classFallback: "stock" | "wait";
  /**
   * Under the history policy, a job is placed as stock places it when Harvest's containers already hold at least this
   * share of the cores the primaries leave now (near saturation, confining a job to classes only queues it); 1: never.
   * @default 0.65
   */
  classSaturationShare: number;
  /**
   * Under the history policy, long jobs' tasks avoid a server whose primary killed Harvest's work, for as long as its
   * class's bursts last (30 min when unknown). Off by default: in the simulator's busy cells it queued long jobs'
   * tasks (docs/experiments.md). @default false
   */
  classLearnFromKills: boolean;
  /**
   * Under the history policy, a short or medium job kept to its classes whose task a primary killed runs on any server
   * from then on, its re-run first (otherwise the re-run goes back to the classes that killed it); long jobs stay in
   * their classes. @default true
   */
  classKilledJobsLeave: boolean;
  /**
   * Under the history policy, how a job's type (short, medium, long) is judged: "terciles" of the recent job lengths,
   * the same in every class (seeds/004), or "per-class": its last run against each class's mean time between its
   * primaries' bursts (short where it will likely finish before the next one). @default "terciles"
   */
  classJobLength: JobLengthRule;
  /**
   * Algorithm 1's class headroom for medium and long jobs: "utilization" (seeds/004: capacity less the class's average
   * or peak) or "cantelli" (seeds/003's second moment per class: what keeps the probability that the primary needs the
   * cores back under `classHeadroomThreshold`, from the class's mean and standard deviation). @default "utilization"
   */
  classHeadroom: "utilization" | "cantelli";
  /** The Cantelli bound's threshold for `classHeadroom: cantelli`. @default 0.05 */
  classHeadroomThreshold: number;
  /** Tenant registry and classifier settings (see `TenantRegistryOptions`). @default {} */
  tenants: Partial<TenantRegistryOptions>;
  /** How often the classes are rebuilt from the history. @default 86400000 (daily) */
  reclusterIntervalMs: number;
  /** Job types are judged against this many most recent successful jobs. @default 1000 */
  jobHistoryWindow: number;
  /** Seed of Algorithm 1's random class choice. @default 1 */
  seed: number;
  /** Secret that signs container tokens; empty disables the check. @default "" */
  secret: string;
  /**
   * The namenode (`host:port`) that issues the jobs' delegation tokens: when a job ends (finished, failed or killed)
   * the resource manager removes the job's DFS staging directory there and cancels its token with its own
   * certificate, so that nothing acts as the submitter with it afterwards. Empty: staging directories stay, and
   * tokens are not cancelled and stay valid until they expire. @default ""
   */
  nnAddress: string;
  /**
   * How long after a job ends its delegation token is cancelled: the node managers copy the logs of the job's last
   * containers into the DFS with it meanwhile (YARN waits 30 s for its log aggregation). @default 10000
   */
  jobTokenCancelDelayMs: number;
  /**
   * Containers' logs copied into the DFS (`/user/<name>/.logs/<appId>`, node manager `logUpload`) are removed this
   * many hours after their application's directory was last written, by a sweep of every home each
   * `logRetentionCheckMs` (resourcemanager/log-retention.ts; on a secure cluster the namenode's `userGroups` must put
   * this resource manager's certificate name in the log group). 0 keeps them. @default 168
   */
  logRetentionHours: number;
  /** How often the homes are swept for kept logs past `logRetentionHours`. @default 3600000 */
  logRetentionCheckMs: number;
  /**
   * Mutual TLS under the cluster CA (`{ ca, cert, key }`, a `daemon` certificate naming advertiseHost): every caller
   * must present a certificate or a token, and roles decide what it may call (common/auth.ts). Without it the
   * resource manager serves plaintext and authenticates nobody. @default none
   */
  tls?: TlsOption;
  /** Says that serving without `tls` is intended (a throwaway local cluster); `harvest daemon` requires one. */
  insecure: boolean;
  /** Largest vertex parallelism accepted at submit. @default 10000 */
  maxParallelism: number;
  /** Finished applications kept (in memory and in the store) for status and list; the job history keeps every job. @default 1000 */
  maxCompletedApps: number;
  /** How often the liveness monitor runs. @default 500 */
  monitorIntervalMs: number;
  /**
   * How often the cluster page's history (cores harvested, kills) takes a sample; the last day is kept, at most 1440
   * samples, in the resource manager's store (LevelDB, or etcd with HA): each sample rewrites its clock hour's record
   * (60 samples at the default), so a much shorter period means larger writes. @default 60000
   */
  historySampleMs: number;
  /**
   * Power domains and their budgets in watts, e.g. `[{ path: "row1/rack1/chassis1", budgetWatts: 1200 }]` (paths are
   * '/'-separated, see `power-domains.ts`; a budget of 0 tracks the domain without capping it). They seed an empty
   * store: once PowerAdmin.SetDomains or SetBudget has changed the tree, the stored tree wins at restart. @default []
   */
  powerDomains: PowerDomainSpec[];
  /** Node id -> the path of the node's own domain (its chassis). Unassigned nodes fall in their rack's domain. @default {} */
  powerNodeDomains: Record<string, string>;
  /** A domain alerts (its nodes get their even share as node budgets) at budget x this. @default 0.97 */
  powerAlertFraction: number;
  /** An alerting domain's node budgets are lifted when its draw falls below budget x this. @default 0.9 */
  powerUncapFraction: number;
  /** A node silent for this many heartbeat intervals is counted at its power profile's peak. @default 3 */
  powerStaleHeartbeats: number;
  /**
   * Node choice: "stock" (the placement policy's choice untouched) or "power-aware" (seeds/000 Algorithm 1 adapted:
   * prefer nodes whose chassis has headroom and that balance critical primary load against cap-able secondary load,
   * and skip nodes whose predicted draw with the container exceeds their power budget; see `power-placement.ts`).
   * @default "stock"
   */
  powerPlacement: "stock" | "power-aware";
  /** Weight of the chassis headroom against the server balance in the power-aware score. @default 0.8 */
  powerAlpha: number;
  /** Under power-aware placement, a job declined by better-scored nodes for this long takes any node. @default 3000 */
  powerPlacementWaitMs: number;
  /**
   * Data-local placement of tasks over DFS input splits (policy/locality.ts): "delay" (delay scheduling: a task waits
   * up to `nodeLocalityDelayMs` for a server holding a replica of its split, then up to `rackLocalityDelayMs` more for
   * one in its racks, then takes any) or "none" (the stock baseline: the first server with room).
   * @default "delay"
   */
  localityPolicy: LocalityPolicyName;
  /** Under "delay": how long a task over a split waits for a server holding a replica of it. @default 3000 */
  nodeLocalityDelayMs: number;
  /** Under "delay": how much longer it waits for a server in one of its split's racks. @default 3000 */
  rackLocalityDelayMs: number;
  /**
   * How tasks' and jobs' lifetimes are learned from the job history (seeds/002 section 3; see `LifetimeOptions` in
   * `lifetime.ts`): drains and the lifetime-aware node choice re-predict every container's remaining time from them.
   * @default {}
   */
  lifetimes: Partial<LifetimeOptions>;
  /**
   * Node choice by lifetimes (seeds/002), among the servers the placement policy allows: "stock" (any, as before),
   * "nilas" (prefer servers whose containers will outlive the new one, so servers empty out together) or "lava"
   * (servers in lifetime classes: short containers fill servers held by a long one). See `node-choice.ts`.
   * @default "stock"
   */
  nodeChoice: NodeChoiceKind;
  /** NILAS buckets, LAVA classes and the gate's wait (`NodeChoiceOptions`, task-scale defaults). @default {} */
  nodeChoiceOptions: Partial<Omit<NodeChoiceOptions, "kind">>;
  /**
   * The survival quote every job gets at submission (`SurvivalQuoteOptions` in `survival-quote.ts`): the kill slack
   * of the servers' kill rates and how much the job's past runs weigh. @default {}
   */
  survivalQuote: Partial<SurvivalQuoteOptions>;
  /**
   * Admission control (seeds/003): "none" (jobs start at once, as stock YARN), or jobs wait in a queue until the
   * "zeroth" (secondary share of the harvestable cores), "first" (Markov) or "second" (Cantelli) moment estimate of
   * overrunning capacity over the job's predicted lifetime stays under its threshold. See `admission.ts`.
   * @default "none"
   */
  admission: AdmissionPolicy;
  /** Thresholds, horizon, steps, queue order (`AdmissionOptions`). Wins over `admissionThresholdsFile`. @default {} */
  admissionOptions: Partial<Omit<AdmissionOptions, "policy">>;
  /** Thresholds tuned by `harvest sim admission --sla` (its admission-thresholds.json). @default "" (none) */
  admissionThresholdsFile: string;
  /** At start the lifetime model reads this many most recent jobs of the history. @default 2000 */
  lifetimeHistoryJobs: number;
  /** Graceful drains (`harvest admin drain`): preemption rate, order (LARS or the baseline), margin. @default {} */
  drain: Partial<DrainOptions>;
  /**
   * Highly available resource managers (docs/ha.md): the coordination service (etcd) they elect the active one in and
   * keep the state in (`{ endpoints, ca, cert, key, clusterId?, sessionTtlS? }`, the masters' certificate). The
   * resource manager starts as a standby, which answers every call with NOT_ACTIVE naming the active, and becomes
   * active when elected. Undefined: not highly available (the state in LevelDB under `dataDir`). @default none
   */
  haCoordination?: HaCoordination;
  /**
   * Every resource manager's advertised gRPC address, comma-separated (this one's included), when they are highly
   * available: job managers are given this list so that they follow the active one. @default "" (this one's address)
   */
  haRmAddresses: string;
}

/** Fills defaults and validates; throws CONFIG_INVALID naming the field. */
export function resolveResourceManagerOptions(
  partial: Partial<ResourceManagerOptions> & { dataDir: string },
): ResourceManagerOptions {
  const o: ResourceManagerOptions = {
    ...mergeOptions(
      "resource manager",
      {
        host: "127.0.0.1",
        port: 0,
        httpHost: "",
        httpPort: 0,
        advertiseHost: "",
        stagingDir: join(partial.dataDir, "staging"),
        nodeExpiryMs: 10_000,
        heartbeatIntervalMs: 1_000,
        reserveFraction: 0.1,
        amResource: { vcoresMilli: 500, memoryMb: 256 },
        maxAmAttempts: 2,
        maxAmPreemptions: 20,
        maxAmShare: DEFAULT_MAX_AM_SHARE,
        jobManagerCommand: ["node", "${HARVEST_HOME}/dist/jobmanager/main.js"],
        noticeAvoidMs: 120_000,
        containerLaunchExpiryMs: 30_000,
        amExpiryMs: 30_000,
        amTokenLifetimeMs: 86_400_000,
        resyncWindowMs: 10_000,
        schedulerPolicy: "stock",
        classWeights: {},
        jobTypes: {},
        classWaitMs: 60_000,
        classFallback: DEFAULT_CLASS_FALLBACK,
        classSaturationShare: DEFAULT_SATURATION_SHARE,
        classLearnFromKills: DEFAULT_LEARN_FROM_KILLS,
        classKilledJobsLeave: DEFAULT_KILLED_JOBS_LEAVE_CLASSES,
        classJobLength: DEFAULT_JOB_LENGTH,
        classHeadroom: "utilization",
        classHeadroomThreshold: 0.05,
        tenants: {},
        reclusterIntervalMs: 86_400_000,
        seed: 1,
        jobHistoryWindow: 1_000,
        secret: "",
        nnAddress: "",
        jobTokenCancelDelayMs: 10_000,
        logRetentionHours: 168,
        logRetentionCheckMs: 3_600_000,
        insecure: false,
        maxParallelism: 10_000,
        monitorIntervalMs: 500,
        historySampleMs: 60_000,
        maxCompletedApps: 1_000,
        powerDomains: [],
        powerNodeDomains: {},
        powerAlertFraction: 0.97,
        powerUncapFraction: 0.9,
        powerStaleHeartbeats: 3,
        powerPlacement: "stock",
        powerAlpha: 0.8,
        powerPlacementWaitMs: 3_000,
        localityPolicy: DEFAULT_LOCALITY.policy,
        nodeLocalityDelayMs: DEFAULT_LOCALITY.nodeDelayMs,
        rackLocalityDelayMs: DEFAULT_LOCALITY.rackDelayMs,
        lifetimes: {},
        lifetimeHistoryJobs: 2_000,
        nodeChoice: "stock",
        nodeChoiceOptions: {},
        survivalQuote: {},
        admission: "none",
        admissionOptions: {},
        admissionThresholdsFile: "",
        drain: {},
        haRmAddresses: "",
      },
      partial,
    ),
    dataDir: partial.dataDir,
  };
  const bad = (field: string, why: string): never => invalidOption("resource manager", field, why);
  if (!o.dataDir) bad("dataDir", "is required");
  if (!Number.isInteger(o.port) || o.port < 0 || o.port > 65535) bad("port", "must be an integer in 0..65535");
  if (!Number.isInteger(o.httpPort) || o.httpPort < 0 || o.httpPort > 65535)
    bad("httpPort", "must be an integer in 0..65535");
  o.httpHost ||= o.host;
  if (o.httpPort !== 0 && o.httpPort === o.port && o.httpHost === o.host)
    bad("httpPort", "must differ from port: the web server and the gRPC server each need their own");
  if (typeof o.secret !== "string" || o.secret.startsWith("REPLACE-WITH"))
    bad("secret", "must be the cluster's secret (the example config's placeholder is not one: openssl rand -hex 32)");
  o.advertiseHost = resolveAdvertiseHost("resource manager", o.host, o.advertiseHost);
  checkSecurityOptions("resource manager", o);
  if (!(Number.isInteger(o.jobTokenCancelDelayMs) && o.jobTokenCancelDelayMs >= 0))
    bad("jobTokenCancelDelayMs", "must be an integer >= 0");
  if (!(o.logRetentionHours >= 0)) bad("logRetentionHours", "must be >= 0 (0 keeps the logs)");
  if (!(Number.isInteger(o.logRetentionCheckMs) && o.logRetentionCheckMs >= 100))
    bad("logRetentionCheckMs", "must be an integer >= 100");
  if (o.tls && !o.secret) bad("secret", "is required with tls: it signs the container and job-manager tokens");
  if (
    typeof o.nnAddress !== "string" ||
    (o.nnAddress !== "" && !o.nnAddress.split(",").every((a) => parseHostPort(a.trim())))
  )
    bad(
      "nnAddress",
      `must be the namenode's host:port (HA: both, comma-separated), or empty (got ${JSON.stringify(o.nnAddress)})`,
    );
  for (const f of [
    "nodeExpiryMs",
    "heartbeatIntervalMs",
    "containerLaunchExpiryMs",
    "amExpiryMs",
    "resyncWindowMs",
    "monitorIntervalMs",
    "reclusterIntervalMs",
    "historySampleMs",
  ] as const) {
    if (!(o[f] > 0)) bad(f, "must be a positive number of milliseconds");
  }
  if (
    !Number.isInteger(o.amTokenLifetimeMs) ||
    o.amTokenLifetimeMs < 1_000 ||
    o.amTokenLifetimeMs > MAX_AM_TOKEN_LIFETIME_MS
  )
    bad(
      "amTokenLifetimeMs",
      `must be an integer number of milliseconds in [1000, ${MAX_AM_TOKEN_LIFETIME_MS}] (30 days)`,
    );
  if (!(Number.isSafeInteger(o.noticeAvoidMs) && o.noticeAvoidMs >= 0))
    bad("noticeAvoidMs", "must be a whole number of milliseconds >= 0 (0: no server is avoided)");
  if (o.nodeExpiryMs <= o.heartbeatIntervalMs) bad("nodeExpiryMs", "must be longer than heartbeatIntervalMs");
  if (!(o.reserveFraction >= 0 && o.reserveFraction < 1)) bad("reserveFraction", "must be in [0, 1)");
  if (!(o.amResource.vcoresMilli > 0 && o.amResource.memoryMb > 0)) bad("amResource", "must be positive");
  if (!Number.isInteger(o.maxAmAttempts) || o.maxAmAttempts < 1) bad("maxAmAttempts", "must be an integer >= 1");
  if (!Number.isInteger(o.maxAmPreemptions) || o.maxAmPreemptions < 0)
    bad("maxAmPreemptions", "must be an integer >= 0");
  if (!(o.maxAmShare > 0 && o.maxAmShare <= 1)) bad("maxAmShare", "must be in (0, 1]");
  if (o.jobManagerCommand.length === 0) bad("jobManagerCommand", "must not be empty");
  if (o.schedulerPolicy !== "stock" && o.schedulerPolicy !== "history")
    bad("schedulerPolicy", `must be "stock" or "history" (got ${JSON.stringify(o.schedulerPolicy)})`);
  if (!(o.classWaitMs >= 0)) bad("classWaitMs", "must be >= 0");
  if (!CLASS_FALLBACKS.includes(o.classFallback)) bad("classFallback", mustBeOneOf(CLASS_FALLBACKS, o.classFallback));
  if (typeof o.classLearnFromKills !== "boolean") bad("classLearnFromKills", "must be true or false");
  if (typeof o.classKilledJobsLeave !== "boolean") bad("classKilledJobsLeave", "must be true or false");
  if (!JOB_LENGTH_RULES.includes(o.classJobLength))
    bad("classJobLength", mustBeOneOf(JOB_LENGTH_RULES, o.classJobLength));
  if (!(o.classSaturationShare > 0 && o.classSaturationShare <= 1)) bad("classSaturationShare", "must be in (0, 1]");
  if (!LOCALITY_POLICIES.includes(o.localityPolicy))
    bad("localityPolicy", `must be one of ${LOCALITY_POLICIES.join(", ")} (got ${JSON.stringify(o.localityPolicy)})`);
  if (!(o.nodeLocalityDelayMs >= 0)) bad("nodeLocalityDelayMs", "must be >= 0");
  if (!(o.rackLocalityDelayMs >= 0)) bad("rackLocalityDelayMs", "must be >= 0");
  if (o.classHeadroom !== "utilization" && o.classHeadroom !== "cantelli")
    bad("classHeadroom", `must be "utilization" or "cantelli" (got ${JSON.stringify(o.classHeadroom)})`);
  if (!(o.classHeadroomThreshold > 0 && o.classHeadroomThreshold < 1))
    bad("classHeadroomThreshold", "must be in (0, 1)");
  if (o.reclusterIntervalMs > 2 ** 31 - 1) bad("reclusterIntervalMs", "must be at most 2147483647 (about 24 days)");
  if (!Number.isInteger(o.seed)) bad("seed", "must be an integer");
  if (!Number.isInteger(o.jobHistoryWindow) || o.jobHistoryWindow < 1)
    bad("jobHistoryWindow", "must be an integer >= 1");
  // Each throws CONFIG_INVALID naming its field.
  resolveClassWeights(o.classWeights);
  resolveJobTypeOptions(o.jobTypes);
  resolveTenantRegistryOptions(o.tenants);
  if (!Number.isInteger(o.maxCompletedApps) || o.maxCompletedApps < 0)
    bad("maxCompletedApps", "must be an integer >= 0");
  if (!Number.isInteger(o.maxParallelism) || o.maxParallelism < 1) bad("maxParallelism", "must be an integer >= 1");
  resolvePowerOptionsOf(o, bad);
  resolveNested("lifetimes", () => resolveLifetimeOptions(o.lifetimes), bad);
  resolveNested("drain", () => resolveDrainOptions(o.drain), bad);
  if (!["stock", "nilas", "lava"].includes(o.nodeChoice))
    bad("nodeChoice", `must be "stock", "nilas" or "lava" (got ${JSON.stringify(o.nodeChoice)})`);
  resolveNested("nodeChoiceOptions", () => resolveNodeChoiceOptions(o.nodeChoiceOptions), bad);
  resolveNested("survivalQuote", () => resolveSurvivalQuoteOptions(o.survivalQuote), bad);
  if (!["none", "zeroth", "first", "second"].includes(o.admission))
    bad("admission", `must be "none", "zeroth", "first" or "second" (got ${JSON.stringify(o.admission)})`);
  if (typeof o.admissionThresholdsFile !== "string") bad("admissionThresholdsFile", "must be a file path");
  resolveNested("admissionOptions", () => resolveAdmissionOptions(o.admissionOptions), bad);
  if (!(Number.isInteger(o.lifetimeHistoryJobs) && o.lifetimeHistoryJobs >= 0))
    bad("lifetimeHistoryJobs", "must be an integer >= 0");
  if (o.haCoordination !== undefined) checkHaCoordination(o.haCoordination, "haCoordination");
  for (const a of o.haRmAddresses.split(",").filter((x) => x.trim() !== ""))
    if (!parseHostPort(a.trim())) bad("haRmAddresses", `must list host:port addresses (got ${JSON.stringify(a)})`);
  return o;
}

/** Runs a nested option group's own validation, naming the resource manager's field (`drain.order`). */
function resolveNested(group: string, resolve: () => unknown, bad: (field: string, why: string) => never): void {
  try {
    resolve();
  } catch (err) {
    if (isHarvestError(err, "CONFIG_INVALID")) {
      const inner = err.details.field ?? "";
      bad(inner ? `${group}.${inner}` : group, `is invalid: ${err.message}`);
    }
    throw err;
  }
}

/** Validates the power options, naming the resource manager's field (`powerDomains[2].path`, `powerAlpha`). */
function resolvePowerOptionsOf(o: ResourceManagerOptions, bad: (field: string, why: string) => never): void {
  if (o.powerPlacement !== "stock" && o.powerPlacement !== "power-aware")
    bad("powerPlacement", `must be "stock" or "power-aware" (got ${JSON.stringify(o.powerPlacement)})`);
  if (!Number.isInteger(o.powerStaleHeartbeats) || o.powerStaleHeartbeats < 1)
    bad("powerStaleHeartbeats", "must be an integer >= 1");
  // The same rules as resolvePowerDomainOptions and resolvePowerPlacementOptions, named as this daemon's fields.
  if (!(o.powerAlertFraction > 0 && o.powerAlertFraction <= 1)) bad("powerAlertFraction", "must be in (0, 1]");
  if (!(o.powerUncapFraction > 0 && o.powerUncapFraction < o.powerAlertFraction))
    bad("powerUncapFraction", "must be in (0, powerAlertFraction)");
  if (!(o.powerAlpha >= 0 && o.powerAlpha <= 1)) bad("powerAlpha", "must be in [0, 1]");
  if (!(o.powerPlacementWaitMs >= 0 && Number.isFinite(o.powerPlacementWaitMs)))
    bad("powerPlacementWaitMs", "must be >= 0");
  if (!Array.isArray(o.powerDomains)) bad("powerDomains", "must be a list of { path, budgetWatts }");
  if (typeof o.powerNodeDomains !== "object" || o.powerNodeDomains === null || Array.isArray(o.powerNodeDomains))
    bad("powerNodeDomains", "must map node ids to domain paths");
  try {
    validatePowerDomainConfig({ domains: o.powerDomains, nodes: o.powerNodeDomains });
  } catch (err) {
    // Its fields are domains[i].path and nodes.<id>: here they are powerDomains[i].path and powerNodeDomains.<id>.
    if (isHarvestError(err)) {
      const inner = detailsOf(err, "INVALID_ARGUMENT", "POWER_DOMAIN_BAD_PATH")?.field ?? "";
      const field = inner.startsWith("domains")
        ? `power${inner[0]!.toUpperCase()}${inner.slice(1)}`
        : `powerNodeDomains${inner.slice("nodes".length)}`;
      bad(field, `is invalid: ${err.message}`);
    }
    throw err;
  }
}

/** The history placement's settings from the resource manager's options. */
export function historyPlacementOptions(o: ResourceManagerOptions): HistoryPlacementOptions {
  return {
    weights: resolveClassWeights(o.classWeights),
    classWaitMs: o.classWaitMs,
    classFallback: o.classFallback,
    saturationShare: o.classSaturationShare,
    learnFromKills: o.classLearnFromKills,
    killedJobsLeaveClasses: o.classKilledJobsLeave,
    jobLength: o.classJobLength,
    cantelliThreshold: o.classHeadroom === "cantelli" ? o.classHeadroomThreshold : undefined,
  };
}
