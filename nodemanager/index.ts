/**
 * The node manager: daemon, options, the primary-tenant monitors, and the pure policies it runs (`policy/`), which the
 * simulator, the benchmarks and the soak call from here and nowhere else (scripts/check-imports.mjs):
 * - the yield controller's choice of victims when the primary needs its cores (`chooseVictims`: youngest first, or by
 *   the work each would lose);
 * - the capping agent and its controller: throttle, raise and kill secondary containers under a power budget
 *   (`CappingAgent`, `resolveCappingOptions`);
 * - the per-container power model (`PowerModel`, seeds/001 section 3);
 * - the preemption notice: the containers a primary is close to taking back (`containersAtRisk`).
 * Beside them, the container parts the primary-burst bench drives alone (`ContainerProcess`, `ContainerAccounts`,
 * `detectCgroups`).
 */
export { NodeManager } from "./node-manager.js";
export type { DaemonState } from "../common/lifecycle.js";
export type { NodeManagerDeps, PreemptionEvent } from "./node-manager.js";
export { resolveNodeManagerOptions } from "./options.js";
export type { NodeManagerOptions } from "./options.js";
export { chooseVictims, VICTIM_ORDERS } from "./policy/yield-controller.js";
export type { VictimOrder, YieldContainer, YieldDecision, YieldInput } from "./policy/yield-controller.js";
export { DEFAULT_NEAR_END_MS, lostWorkOf } from "./policy/work-lost.js";
export { containersAtRisk, DEFAULT_NOTICE_MARGIN_FRACTION, PREEMPTION_NOTICES } from "./policy/preemption-notice.js";
export type { PreemptionNotice } from "./policy/preemption-notice.js";
export { createPrimaryMonitor } from "../common/primary-monitor.js";
export type { PrimaryMonitor, PrimarySample } from "../common/primary-monitor.js";
export { clusterCgroupKey, containerCgroupName, detectCgroups } from "./cgroups.js";
export type { CgroupController, CgroupMode } from "./cgroups.js";
export { StepPrimaryMonitor } from "../common/step-monitor.js";
export type { StepRecord } from "../common/step-monitor.js";
export { CappingAgent } from "./policy/capping-agent.js";
export type { AgentContainer, CappingAgentDeps } from "./policy/capping-agent.js";
export { resolveCappingOptions } from "./policy/capping-controller.js";
export type { CappingOptions, CappingState } from "./policy/capping-controller.js";
export { PowerModel, SEED_USAGE_FEATURES } from "./policy/power-model.js";
export type { EntityUsage, UsageFeature } from "./policy/power-model.js";
export { ContainerProcess, PRIVATE_TMP } from "./container.js";
export { ContainerAccounts, fixedContainerAccount, ownAccount } from "./run-as.js";
export type { ContainerAccount } from "./run-as.js";
