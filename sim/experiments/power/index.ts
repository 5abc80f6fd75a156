/** The power experiment: its options, runs, budgets and report (what the CLI and the tests use). */
export { CAPPING_MODES, POWER_DOMAIN_LEVELS, POWER_PLACEMENTS, resolvePowerOptions } from "./options.js";
export type {
  CappingMode,
  OversubscriptionFigures,
  PowerBudgets,
  PowerDomainLevel,
  PowerObserver,
  PowerOptions,
  PowerPeriodEvent,
  PowerPlacement,
  PowerResult,
  ProfilePlan,
  ResolvedPowerOptions,
} from "./options.js";
export { powerLayout } from "./budgets.js";
export type { SimPowerDomain } from "./budgets.js";
export { planPowerBudgets, runPower } from "./run.js";
export { primaryHistories, primaryUsageSeries, registryVerdicts } from "../../roles/power-history.js";
export { POWER_DEFAULTS, resolvePowerExperimentOptions, runPowerExperiment } from "./experiment.js";
export type { PowerExperimentOptions, ResolvedPowerExperimentOptions } from "./experiment.js";
export {
  POWER_CSV_HEADER,
  powerCsv,
  powerPlots,
  powerRunsMarkdown,
  powerSummaryMarkdown,
  renderPowerReport,
  sortPowerResults,
} from "./report.js";
