/** The node manager: daemon, options, the yield policy and the primary-tenant monitors. */
export { NodeManager } from "./node-manager.js";
export type { NodeManagerDeps, NodeManagerState, PreemptionEvent } from "./node-manager.js";
export { resolveNodeManagerOptions } from "./options.js";
export type { NodeManagerOptions } from "./options.js";
export { chooseVictims } from "./yield-controller.js";
export type { YieldContainer, YieldDecision, YieldInput } from "./yield-controller.js";
export { createPrimaryMonitor } from "../common/primary-monitor.js";
export type { PrimaryMonitor, PrimarySample } from "../common/primary-monitor.js";
export { detectCgroups } from "./cgroups.js";
export type { CgroupController, CgroupMode } from "./cgroups.js";
export { StepPrimaryMonitor } from "../common/step-monitor.js";
export type { StepRecord } from "../common/step-monitor.js";
