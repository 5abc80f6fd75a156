/**
 * The resource manager: daemon, options, and the pure policies it runs (`policy/`), which the simulator, the
 * benchmarks and the soak call from here and nowhere else (scripts/check-imports.mjs):
 * - the scheduler (`Scheduler`, `StockSchedulerPolicy`; `HistorySchedulerPolicy` under Algorithm 1);
 * - the utilization classifier (`tenantFeatures`, `classifyFeatures`) and criticality (`criticality`,
 *   `tenantHistoryVerdict`), as the tenant registry runs them;
 * - history-based placement, Algorithm 1 (`HistoryPlacement` over a `ClassViewSource`; `selectClasses`);
 * - power: domains and budgets (`PowerDomains`), power-aware placement (`PowerAwarePolicy`), the oversubscription
 *   planner (`planOversubscription`);
 * - survival quotes (`quoteJob`, `killsPerHourOf`);
 * - admission (`AdmissionQueue`, `decideAdmission`), lifetimes and node choice (`LifetimeModel`,
 *   `LifetimeNodeChoice`), drains in LARS order (`DrainTracker`, `drainOrder`).
 */
export { ResourceManager } from "./resource-manager.js";
export type { DaemonState } from "../common/lifecycle.js";
export { resolveResourceManagerOptions } from "./options.js";
export type { ResourceManagerOptions } from "./options.js";
export { AM_PRIORITY, DEFAULT_MAX_AM_SHARE, Scheduler, StockSchedulerPolicy } from "./policy/scheduler.js";
export type {
  Allocation,
  Ask,
  AppView,
  NodeView,
  SchedulerListener,
  SchedulerOptions,
  SchedulerPolicy,
} from "./policy/scheduler.js";
export { averageServerSeries } from "./policy/average-server.js";
export { classesByPattern, classify, classifyFeatures, tenantFeatures } from "./policy/classifier.js";
export { DEFAULT_CLASSIFIER_OPTIONS, resolveClassifierOptions } from "./policy/classifier-options.js";
export { patternOf } from "./policy/utilization-pattern.js";
export { percentileSorted } from "./policy/percentiles.js";
export type { ClassifierOptions } from "./policy/classifier-options.js";
export type { FeaturedTenant, TenantClass, TenantFeatures, TenantInput } from "./policy/classifier.js";
export type { PatternProfile } from "./policy/utilization-pattern.js";
export {
  criticality,
  DEFAULT_HISTORY_WINDOW,
  resolveCriticalityOptions,
  tenantHistoryVerdict,
} from "./policy/criticality.js";
export type { CriticalityOptions, HistoryWindowOptions, TenantHistoryVerdict } from "./policy/criticality.js";
export {
  DEFAULT_CLASS_WEIGHTS,
  HistorySchedulerPolicy,
  classHeadroomMilli,
  jobTypeOf,
  jobTypeThresholds,
  requirementMilli,
  resolveClassWeights,
  resolveJobTypeOptions,
  selectClasses,
} from "./policy/class-selection.js";
export type {
  ClassSelection,
  ClassView,
  ClassWeights,
  ClassWeightsInput,
  JobLengthRule,
  JobType,
  JobTypeOptions,
  ServerCapacity,
} from "./policy/class-selection.js";
export {
  DEFAULT_POWER_DOMAIN_OPTIONS,
  PowerDomains,
  normalizeDomainPath,
  rackDomain,
  resolvePowerDomainOptions,
  validatePowerDomainConfig,
} from "./policy/power-domains.js";
export type {
  NodeBudget,
  PowerDomainConfig,
  PowerDomainOptions,
  PowerDomainSpec,
  PowerDomainsSnapshot,
  PowerReport,
} from "./policy/power-domains.js";
export {
  DEFAULT_POWER_PLACEMENT_OPTIONS,
  PowerAwarePolicy,
  budgetAllows,
  domainPower,
  powerScore,
  predictedP95Watts,
  predictedWattsWith,
  primaryHistoryOf,
  primaryOutlook,
  rankPowerNodes,
  resolvePowerPlacementOptions,
} from "./policy/power-placement.js";
export type {
  DomainPower,
  PowerAsk,
  PowerNode,
  PowerPlacementOptions,
  PowerScore,
  PrimaryHistory,
} from "./policy/power-placement.js";
export {
  DEFAULT_OVERSUBSCRIPTION_OPTIONS,
  planOversubscription,
  resolveOversubscriptionOptions,
} from "./policy/oversubscription-planner.js";
export type {
  CappingApproach,
  OversubscriptionOptions,
  OversubscriptionPlan,
} from "./policy/oversubscription-planner.js";
export type { DrawSample, DrawsHistory } from "./policy/draws-history.js";
export {
  CLASS_FALLBACKS,
  DEFAULT_CLASS_FALLBACK,
  DEFAULT_JOB_LENGTH,
  DEFAULT_KILLED_JOBS_LEAVE_CLASSES,
  DEFAULT_LEARN_FROM_KILLS,
  DEFAULT_SATURATION_SHARE,
  HistoryPlacement,
  JOB_LENGTH_RULES,
  LiveClassViews,
  UNCLASSIFIED_CLASS,
  classViewsOf,
  liveNodeOf,
  liveUtilization,
  mustBeOneOf,
  occupiedShare,
} from "./policy/history-placement.js";
export type {
  ClassViewSource,
  HistoryPlacementOptions,
  JobPlacement,
  LiveNode,
  ClassFallback,
  PlacementDecision,
} from "./policy/history-placement.js";
export { AdmissionOutlook, decideAdmission, neverAdmissible, tuneThreshold } from "./policy/admission.js";
export { AdmissionQueue, JobDemandModel } from "./policy/admission-queue.js";
export { DEFAULT_ADMISSION_OPTIONS, resolveAdmissionOptions, thresholdOf } from "./policy/admission-options.js";
export { DemandProfile } from "./policy/demand-profile.js";
export type {
  AdmissionCandidate,
  AdmissionCluster,
  AdmissionDecision,
  AdmissionServer,
  AdmittedJob,
} from "./policy/admission.js";
export type { AdmissionOptions, AdmissionPolicy } from "./policy/admission-options.js";
export type { DemandProfileOptions, PrimaryDemandSource } from "./policy/demand-profile.js";
export type { QueuedJob } from "./policy/admission-queue.js";
export {
  DEFAULT_LIFETIME_OPTIONS,
  LifetimeDistribution,
  MIN_REMAINING_MS,
  OraclePredictor,
} from "./policy/lifetime.js";
export type { ContainerKey, LifetimePredictor } from "./policy/lifetime.js";
// Admission control in the simulator predicts job lifetimes with the resource manager's model.
export { LifetimeModel, resolveLifetimeOptions } from "./policy/lifetime.js";
export type { LifetimeOptions } from "./policy/lifetime.js";
export {
  DEFAULT_NODE_CHOICE_OPTIONS,
  LifetimeNodeChoice,
  lifetimeClassOf,
  nilasBucket,
  resolveNodeChoiceOptions,
  temporalCost,
} from "./policy/node-choice.js";
export type {
  GrantedContainer,
  LavaServerState,
  LavaStateView,
  NodeChoiceKind,
  NodeChoiceOptions,
  NodeChoiceSource,
} from "./policy/node-choice.js";
export { DEFAULT_DRAIN_OPTIONS, DrainTracker, drainOrder, resolveDrainOptions } from "./policy/drain.js";
export type { DrainContainer, DrainOptions, DrainStatus, DrainStep } from "./policy/drain.js";
export {
  DEFAULT_SURVIVAL_QUOTE_OPTIONS,
  freeTaskSlots,
  killsPerHourOf,
  quoteJob,
  quoteVerticesOfDag,
  resolveSurvivalQuoteOptions,
  survivalQuote,
  tenantKillsPerHour,
} from "./policy/survival-quote.js";
export type {
  JobQuoteInput,
  PastRun,
  QuoteInput,
  QuoteServer,
  QuoteVertex,
  SurvivalQuote,
  SurvivalQuoteOptions,
  VertexDurations,
} from "./policy/survival-quote.js";
