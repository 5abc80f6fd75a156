/** The storage experiment: its options and runs (what the other experiments, the CLI and the tests use). */
export { DEFAULT_RE_REPLICATION_BYTES_PER_SEC, resolveStorageOptions } from "./options.js";
export type {
  PlannedReimageFigures,
  PlannedStorageReimages,
  ResolvedPlannedStorageReimages,
  ResolvedStorageOptions,
  StorageDrainMode,
  StorageObserver,
  StorageOptions,
  StorageReimage,
  StorageRunResult,
  StorageWrite,
} from "./options.js";
export { runStorage } from "./run.js";
export { replicationRngSeed } from "./sim.js";
export { learnPlacementTenants, storageMonitorOptions } from "../../roles/storage-namenode.js";
export {
  renderStorageReport,
  STORAGE_CSV_HEADER,
  storageCsv,
  storagePlots,
  storageRunsMarkdown,
  storageSummaryMarkdown,
} from "./report.js";
