/** The resource manager: daemon, options and the pure scheduler it shares with benchmarks and the simulator. */
export { ResourceManager } from "./resource-manager.js";
export type { DaemonState } from "./resource-manager.js";
export { resolveResourceManagerOptions } from "./options.js";
export type { ResourceManagerOptions } from "./options.js";
export { Scheduler, StockSchedulerPolicy } from "./scheduler.js";
export type { Allocation, Ask, AppView, NodeView, SchedulerOptions, SchedulerPolicy } from "./scheduler.js";
export { averageServerSeries, classify, patternOf, resolveClassifierOptions, tenantFeatures } from "./classifier.js";
export type { ClassifierOptions, PatternProfile, TenantClass, TenantInput } from "./classifier.js";
export { criticality, resolveCriticalityOptions } from "./criticality.js";
export type { CriticalityOptions } from "./criticality.js";
