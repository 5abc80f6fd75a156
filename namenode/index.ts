/**
 * The namenode: daemon, options, and the pure modules it is built on: namespace, permissions, block map, and the
 * policies the simulator calls from here and nowhere else (scripts/check-imports.mjs):
 * - replica placement: stock rack-aware (`StockPlacementPolicy`) and the HDFS-H diversity grid
 *   (`DiversityPlacementPolicy`, Algorithm 2);
 * - re-replication: the incremental, prioritized `ReplicationMonitor`, wired to the block map by `replicatedBlockMap`;
 * - decommissioning: the monitor's `decommission`/`recommission` over a `DecommissionTracker` (datanode admin states).
 */
export { NameNode } from "./namenode.js";
export type { DaemonState } from "../common/lifecycle.js";
export type { DatanodeState } from "./namenode.js";
export { resolveNameNodeOptions } from "./options.js";
export type { NameNodeOptions } from "./options.js";
export { Namespace } from "./namespace.js";
export type {
  ContentSummary,
  CreateFileRequest,
  FileView,
  LocatedBlockRecord,
  NamespaceCounts,
  NamespaceListener,
  NamespaceOptions,
} from "./namespace.js";
export { NamespaceStore, ROOT_INODE_ID } from "./namespace-store.js";
export type {
  BlockRecord,
  Changeset,
  Counters,
  DatanodeRecord,
  DirRecord,
  FileRecord,
  InodeRecord,
  LoadedNamespace,
} from "./namespace-store.js";
export {
  accessName,
  ALL,
  check,
  checkPermission,
  checkSetOwner,
  DEFAULT_DIR_MODE,
  DEFAULT_FILE_MODE,
  DEFAULT_GROUP,
  EXECUTE,
  permissionDenied,
  permits,
  READ,
  UMASK,
  WRITE,
} from "./permissions.js";
export type { AccessRequest, Caller, PermissionNode, PermissionStatus, ResolvedPath } from "./permissions.js";
export { BlockManager, replicatedBlockMap } from "./block-manager.js";
export type { BlockInfo, ReplicaDeletion, ReplicaInfo } from "./block-manager.js";
export { StockPlacementPolicy } from "./placement.js";
export { DiversityPlacementPolicy } from "./diversity-placement.js";
export type { PlacementTenant } from "./diversity-placement.js";
export type { DatanodeView, PlacementPolicy, PlacementRequest } from "./placement.js";
export {
  classifyBlock,
  countReplicas,
  PRIORITY_LEVELS,
  ReplicationMonitor,
  ReplicationPriority,
  replicationPriority,
} from "./replication-monitor.js";
export type {
  BlockEventListener,
  BlockHealth,
  BlockSource,
  BlockView,
  DeletionTask,
  LiveDatanodes,
  ReplicaCounts,
  ReplicationMonitorOptions,
  ReplicationTask,
  ReplicationWork,
} from "./replication-monitor.js";
export { DecommissionTracker } from "./decommission.js";
export type {
  AdminState,
  DecommissionOptions,
  DecommissionProgress,
  DecommissionRecord,
  DecommissionStatus,
} from "./decommission.js";
