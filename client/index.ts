/** Harvest's public TypeScript API. */
export { JobClient, TERMINAL_STATES } from "./job-client.js";
export type { JobHistoryEntry, JobReport, NodeInfo, SubmittedJob } from "./job-client.js";
export { DfsClient, chunkChecksums, CHUNK_BYTES } from "./dfs-client.js";
export type { DfsClientOptions, DfsCreateOptions, DfsDatanode, DfsFileStatus, DfsFsckReport } from "./dfs-client.js";
export type { WriteWaitEvent } from "./write-wait.js";
export type { PlacementRefusal } from "../common/placement-refusal.js";
export { HarvestError, isHarvestError } from "../common/errors.js";
export type { ErrorCode } from "../common/errors.js";
export { parseDag, maxConcurrency } from "../common/dag-spec.js";
export type { DagSpec, EdgeSpec, VertexSpec } from "../common/dag-spec.js";
export { TenantAdminClient } from "./tenant-admin-client.js";
export type { HistoryFormat, ImportResult, TenantClasses, TenantInfo } from "./tenant-admin-client.js";
export { PowerAdminClient } from "./power-admin-client.js";
export type { PowerDomainInfo, PowerDomainTree, PowerDomainsSpec, PowerNodeInfo } from "./power-admin-client.js";
export { NamenodeAdminClient } from "./namenode-admin-client.js";
export type { DatanodeAdminStatus } from "./namenode-admin-client.js";
export { findClientConfig, loadClientConfig, parseClientConfig, defaultClientConfigFile } from "./client-config.js";
export type { ClientConfig } from "./client-config.js";
/** The namespace-call stream under `DfsClient` (the namenode bench drives it directly). */
export { NamespaceChannel } from "./namespace-channel.js";
export type { StreamedCalls } from "./namespace-channel.js";
