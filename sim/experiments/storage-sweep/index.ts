/** The storage sweep: its options, the loss ratio, its cells, runs and report (what the CLI and the tests use). */
export { RATIO_CONFIDENCE, resolveStorageSweepOptions, STORAGE_SWEEP_DEFAULTS } from "./options.js";
export type { ResolvedStorageSweepOptions, StorageSweepOptions } from "./options.js";
export { betaQuantile, incompleteBeta, lossRatio } from "./ratio.js";
export type { LossRatio, SeedLoss } from "./ratio.js";
export { summarizeStorageSweep } from "./cells.js";
export type { PlacementFigures, StorageSweepCell, StorageSweepRun } from "./cells.js";
export { runStorageSweep } from "./run.js";
export type { StorageSweepOutcome } from "./run.js";
export {
  formatLossRatio,
  formatRatio,
  renderStorageSweepReport,
  storageSweepCsv,
  storageSweepPlot,
  storageSweepRunsCsv,
  storageSweepRunsMarkdown,
  storageSweepSummaryMarkdown,
  writeStorageSweepReport,
} from "./report.js";
export type { StorageSweepReport, StorageSweepReportContext } from "./report.js";
