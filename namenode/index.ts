/**
 * The namenode: its daemon class and options, and the pure modules it is built on. The pure policies live in
 * `policy/`, and this file is the only door to them for the simulator, the benches and the soak
 * (scripts/check-imports.mjs):
 * - replica placement: stock rack-aware (`StockPlacementPolicy`) and the HDFS-H diversity grid
 *   (`DiversityPlacementPolicy`, Algorithm 2);
 * - re-replication: the incremental, prioritized `ReplicationMonitor`, wired to the block map by `replicatedBlockMap`;
 * - decommissioning: the monitor's `decommission`/`recommission` over a `DecommissionTracker` (datanode admin states);
 * - permissions: HDFS's owner/group/mode checks;
 * - read order: the order of a block's replicas in GetBlockLocations.
 * The server parts (datanode tracking, safe mode, lease recovery, admin, the client protocol, the web) sit beside
 * `namenode.ts`, which wires them.
 */
export { bootstrapStandby } from "./bootstrap-standby.js";
export type { BootstrapOptions } from "./bootstrap-standby.js";
export { NameNode } from "./namenode.js";
export type { DaemonState } from "../common/lifecycle.js";
export type { DatanodeState } from "./datanode-entry.js";
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
} from "./policy/permissions.js";
export type { AccessRequest, Caller, PermissionNode, PermissionStatus, ResolvedPath } from "./policy/permissions.js";
export { BlockManager, replicatedBlockMap } from "./block-manager.js";
export type { BlockInfo, ReplicaDeletion, ReplicaInfo } from "./block-manager.js";
export { StockPlacementPolicy } from "./policy/placement.js";
export { DiversityPlacementPolicy } from "./policy/diversity-placement.js";
export { orderReplicas } from "./policy/read-order.js";
export type { ReadOrderPolicy } from "./policy/read-order.js";
export type { PlacementTenant } from "./policy/diversity-placement.js";
export type { DatanodeView, PlacementPolicy, PlacementPolicyName, PlacementRequest } from "./policy/placement.js";
export {
  classifyBlock,
  countReplicas,
  PRIORITY_LEVELS,
  ReplicationMonitor,
  ReplicationPriority,
  replicationPriority,
} from "./policy/replication-monitor.js";
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
} from "./policy/replication-monitor.js";
export { DecommissionTracker } from "./policy/decommission.js";
export type {
  AdminState,
  DecommissionOptions,
  DecommissionProgress,
  DecommissionRecord,
  DecommissionStatus,
} from "./policy/decommission.js";
