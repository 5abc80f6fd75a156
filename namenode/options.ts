/** Namenode options: every field has a default; `resolveNameNodeOptions` fills and validates them. */
import { localUserName } from "../common/fs-permission.js";
import { isValidHost, isWildcardHost, resolveAdvertiseHost } from "../common/net-address.js";
import { checkSecurityOptions, invalidOption, mergeOptions } from "../common/options.js";
import type { TlsOption } from "../common/options.js";
import { checkHaCoordination } from "../common/ha/coordination.js";
import type { HaCoordination } from "../common/ha/coordination.js";
import type { PlacementPolicyName } from "./policy/placement.js";

/** Settings of a namenode. */
export interface NameNodeOptions {
  /** Interface to bind. @default "127.0.0.1" */
  host: string;
  /** Port to bind; 0 picks a free one. @default 0 */
  port: number;
  /** Interface the web server (UI, REST API, `/metrics`) binds. @default the bind `host` */
  httpHost: string;
  /** Port of the web server; 0 picks a free one (`httpUrl` reports it). @default 0 */
  httpPort: number;
  /**
   * Issue block access tokens, which datanodes then require for every read and write (HDFS's block tokens). @default true
   */
  blockTokens: boolean;
  /** A block token is valid this long. @default 3600000 (1 h) */
  blockTokenLifetimeMs: number;
  /** The key that signs block tokens is replaced this often (older keys verify until their tokens expire). @default 1800000 */
  blockKeyUpdateIntervalMs: number;
  /**
   * Host name or IP that peers and clients use to reach this daemon (what it registers and writes in ready files).
   * @default the bind `host`, or this machine's host name when `host` is a wildcard (0.0.0.0, ::)
   */
  advertiseHost: string;
  /** Directory of the LevelDB namespace store. Required. */
  dataDir: string;
  /**
   * Mutual TLS under the cluster CA (`{ ca, cert, key }`, a `daemon` certificate naming advertiseHost): callers are
   * who their certificate says (the `admin` role is the superuser) or hold a delegation token. Without it the
   * namenode serves plaintext and trusts the user a client claims. @default none
   */
  tls?: TlsOption;
  /** Says that serving without `tls` is intended (a throwaway local cluster); `harvest daemon` requires one. */
  insecure: boolean;
  /** The longest a delegation token (what a job's tasks act as their submitter with) is issued for. @default 7 days */
  delegationTokenMaxLifetimeMs: number;
  /**
   * WebHDFS: how long the ticket in an OPEN or CREATE redirect to a datanode stays valid (the client must follow the
   * redirect within it; the transfer then runs as long as it needs, up to `webHdfsTransferMaxMs`). @default 60000
   */
  webHdfsTicketLifetimeMs: number;
  /**
   * WebHDFS: the longest a redirected read or write may take (the life of the delegation token the ticket holds for
   * the datanode to act as the caller with; the datanode cancels it when the transfer ends). @default 21600000 (6 h)
   */
  webHdfsTransferMaxMs: number;
  /** Replication of files created without one. @default 3 */
  defaultReplication: number;
  /** Largest replication a file may ask for. @default 32 */
  maxReplication: number;
  /**
   * Block size of files created without one (a multiple of 512). HDFS 2's `dfs.blocksize`: every block's end costs a
   * drained pipeline, an fsync and a namenode call, so larger blocks write faster, and a writer keeps up to one block in
   * memory for a failover's replay. @default 134217728 (128 MiB)
   */
  defaultBlockSizeBytes: number;
  /** A datanode silent for this long is dead and its replicas are gone. @default 30000 */
  datanodeExpiryMs: number;
  /**
   * A live datanode silent for this long is stale (HDFS's stale datanode interval): fsck lists its replicas as
   * suspect, and new blocks and copies avoid it as a target (it is a copy source of last resort) until it heartbeats
   * again or is declared dead. @default 5 × heartbeatIntervalMs, at most datanodeExpiryMs
   */
  staleAfterMs: number;
  /**
   * Lease recovery waits this long for the datanodes of the last block's pipeline to answer (and then to finalize the
   * replica) before it goes on without the silent ones, or, when none holding the block answered, tries again.
   * @default 10000
   */
  blockRecoveryTimeoutMs: number;
  /** Datanodes heartbeat this often (told at registration). @default 1000 */
  heartbeatIntervalMs: number;
  /** Safe mode ends once this fraction of the committed blocks has a reported replica. @default 0.999 */
  safeModeThreshold: number;
  /** Stay in safe mode this long after the threshold is reached. @default 0 */
  safeModeExtensionMs: number;
  /** How often the replication monitor runs. @default 1000 */
  replicationIntervalMs: number;
  /** Copies in flight per source datanode. @default 4 */
  maxReplicationStreams: number;
  /** A copy not reported within this time is scheduled again. @default 30000 */
  replicationTimeoutMs: number;
  /** Under-replicated blocks the replication monitor looks at per run at most; 0 for no cap. @default 0 */
  maxReplicationWorkPerRun: number;
  /**
   * Copies in flight to one target datanode at most (one receiving this many is left out of target choice, as HDFS's
   * considerLoad leaves out overloaded datanodes); 0 for no limit. @default 0
   */
  maxReplicationReceiveStreams: number;
  /**
   * An open file whose writer is silent this long is recovered: its last block is kept at the length every surviving
   * replica holds, and the file is closed and marked recovered. @default 60000
   */
  leaseTimeoutMs: number;
  /** How often datanode liveness, leases and safe mode are checked. @default 500 */
  monitorIntervalMs: number;
  /** Delete commands sent per heartbeat answer at most. @default 1000 */
  maxDeletesPerHeartbeat: number;
  /**
   * Replica placement: "stock" (HDFS's rack-aware default) or "diversity" (seeds/004 Algorithm 2: a 3x3 grid of
   * reimage frequency x peak CPU, replicas in distinct rows, columns and environments; needs `rmAddress`).
   * @default "stock"
   */
  placementPolicy: PlacementPolicyName;
  /** The resource manager whose TenantAdmin service gives the tenants' reimage and peak-CPU history. @default "" */
  rmAddress: string;
  /** How often the diversity grid is rebuilt from the resource manager's tenants and the datanodes' free space. @default 30000 */
  tenantRefreshMs: number;
  /** Seed of the random source behind placement and replication choices. @default 1 */
  seed: number;
  /**
   * The order of a block's equally good replicas in GetBlockLocations: false (HDFS's default for
   * `dfs.namenode.randomize-block-locations-per-block`) keeps one pseudo-random order per block for every reader, so
   * repeated reads of a block find its pages in one server's page cache; true shuffles them on every request
   * (namenode/policy/read-order.ts). @default false
   */
  randomizeReadOrder: boolean;
  /** Check HDFS-style permissions on every client call (HDFS's `dfs.permissions.enabled`). @default true */
  permissions: boolean;
  /**
   * On a plaintext (insecure) namenode, the claimed user name that is the superuser; with TLS the `admin` role is.
   * Also the owner of a new root directory and of inodes stored before permissions existed.
   * @default the account running the namenode (`$USER`, else the OS user name), as in HDFS
   */
  superuser: string;
  /**
   * Extra groups of each user, e.g. `{ "alice": ["analysts"] }` (a static group mapping); every user is also in a
   * group of its own name. The resource managers' certificate names belong in the log group (node manager
   * `containerLogGroup`, "harvest-logs"), e.g. `{ "master": ["harvest-logs"] }`, so they read and expire the
   * containers' kept logs. @default {}
   */
  userGroups: Record<string, string[]>;
  /**
   * HA: the coordination service (etcd) this namenode shares an edit log and an election with, e.g.
   * `{ "endpoints": ["https://10.0.0.1:2379", ...], "ca": ..., "cert": <CN harvest-master>, "key": ... }`
   * (common/ha/coordination.ts; docs/ha.md). Without it the namenode is alone, its namespace in its LevelDB only.
   * @default none
   */
  haCoordination?: HaCoordination;
  /** HA: this namenode's name among its peers (its `applied/` mark in the log). @default advertiseHost:port */
  haId: string;
  /**
   * HA: the most shared-log entries kept whatever the standby has applied (a standby further behind must be
   * bootstrapped again). @default 100000
   */
  haLogRetainEntries: number;
}

/** User and group names (those a certificate may carry). */
const NAME = /^[A-Za-z0-9_.@-]{1,64}$/;

/** Fills defaults and validates; throws CONFIG_INVALID naming the field. */
export function resolveNameNodeOptions(partial: Partial<NameNodeOptions> & { dataDir: string }): NameNodeOptions {
  const o: NameNodeOptions = {
    // Each option given must have its default's kind: an object where a number belongs is CONFIG_INVALID naming the
    // field, not a TypeError from the checks below.
    ...mergeOptions(
      "namenode",
      {
        host: "127.0.0.1",
        port: 0,
        httpHost: "",
        httpPort: 0,
        blockTokens: true,
        blockTokenLifetimeMs: 3_600_000,
        blockKeyUpdateIntervalMs: 1_800_000,
        advertiseHost: "",
        insecure: false,
        delegationTokenMaxLifetimeMs: 7 * 86_400_000,
        webHdfsTicketLifetimeMs: 60_000,
        webHdfsTransferMaxMs: 6 * 3_600_000,
        defaultReplication: 3,
        maxReplication: 32,
        defaultBlockSizeBytes: 128 * 1024 * 1024,
        datanodeExpiryMs: 30_000,
        staleAfterMs: 0,
        blockRecoveryTimeoutMs: 10_000,
        heartbeatIntervalMs: 1_000,
        safeModeThreshold: 0.999,
        safeModeExtensionMs: 0,
        replicationIntervalMs: 1_000,
        maxReplicationStreams: 4,
        replicationTimeoutMs: 30_000,
        maxReplicationWorkPerRun: 0,
        maxReplicationReceiveStreams: 0,
        leaseTimeoutMs: 60_000,
        monitorIntervalMs: 500,
        maxDeletesPerHeartbeat: 1_000,
        placementPolicy: "stock",
        rmAddress: "",
        tenantRefreshMs: 30_000,
        seed: 1,
        randomizeReadOrder: false,
        permissions: true,
        superuser: "",
        userGroups: {},
        haId: "",
        haLogRetainEntries: 100_000,
      },
      partial,
    ),
    dataDir: partial.dataDir,
  };
  const bad = (field: string, why: string): never => invalidOption("namenode", field, why);
  checkSecurityOptions("namenode", o);
  if (!(o.delegationTokenMaxLifetimeMs > 0))
    bad("delegationTokenMaxLifetimeMs", "must be a positive number of milliseconds");
  if (!(o.webHdfsTicketLifetimeMs > 0)) bad("webHdfsTicketLifetimeMs", "must be a positive number of milliseconds");
  if (!(o.webHdfsTransferMaxMs > 0)) bad("webHdfsTransferMaxMs", "must be a positive number of milliseconds");
  if (!o.dataDir) bad("dataDir", "is required");
  if (typeof o.blockTokens !== "boolean") bad("blockTokens", "must be true or false");
  for (const f of ["blockTokenLifetimeMs", "blockKeyUpdateIntervalMs"] as const)
    if (!(Number.isFinite(o[f]) && o[f] > 0)) bad(f, "must be a positive number of milliseconds");
  for (const f of ["port", "httpPort"] as const)
    if (!Number.isInteger(o[f]) || o[f] < 0 || o[f] > 65535) bad(f, "must be an integer in 0..65535");
  o.advertiseHost = resolveAdvertiseHost("namenode", o.host, o.advertiseHost);
  // The web server binds beside the gRPC server unless told otherwise (the host is valid by now).
  o.httpHost ||= o.host;
  if (typeof o.httpHost !== "string" || !(isWildcardHost(o.httpHost) || isValidHost(o.httpHost)))
    bad("httpHost", `must be an IP address or host name to bind (got ${JSON.stringify(o.httpHost)})`);
  if (!Number.isInteger(o.maxReplication) || o.maxReplication < 1) bad("maxReplication", "must be an integer >= 1");
  if (!Number.isInteger(o.defaultReplication) || o.defaultReplication < 1 || o.defaultReplication > o.maxReplication)
    bad("defaultReplication", "must be an integer in 1..maxReplication");
  if (!Number.isSafeInteger(o.defaultBlockSizeBytes) || o.defaultBlockSizeBytes <= 0 || o.defaultBlockSizeBytes % 512)
    bad("defaultBlockSizeBytes", "must be a positive multiple of 512");
  for (const f of [
    "datanodeExpiryMs",
    "heartbeatIntervalMs",
    "replicationIntervalMs",
    "replicationTimeoutMs",
    "leaseTimeoutMs",
    "monitorIntervalMs",
    "tenantRefreshMs",
    "blockRecoveryTimeoutMs",
  ] as const) {
    if (!(o[f] > 0)) bad(f, "must be a positive number of milliseconds");
  }
  if (o.heartbeatIntervalMs > 2 ** 31 - 1) bad("heartbeatIntervalMs", "must fit in an int32");
  if (o.datanodeExpiryMs <= o.heartbeatIntervalMs) bad("datanodeExpiryMs", "must be longer than heartbeatIntervalMs");
  if (!(Number.isFinite(o.staleAfterMs) && o.staleAfterMs >= 0)) bad("staleAfterMs", "must be >= 0 (0: the default)");
  o.staleAfterMs ||= Math.min(5 * o.heartbeatIntervalMs, o.datanodeExpiryMs);
  if (o.staleAfterMs <= o.heartbeatIntervalMs || o.staleAfterMs > o.datanodeExpiryMs)
    bad("staleAfterMs", "must be longer than heartbeatIntervalMs and at most datanodeExpiryMs");
  if (!(o.safeModeThreshold >= 0 && o.safeModeThreshold <= 1)) bad("safeModeThreshold", "must be in [0, 1]");
  if (!(o.safeModeExtensionMs >= 0)) bad("safeModeExtensionMs", "must be >= 0");
  if (!Number.isInteger(o.maxReplicationStreams) || o.maxReplicationStreams < 1)
    bad("maxReplicationStreams", "must be an integer >= 1");
  for (const f of ["maxReplicationWorkPerRun", "maxReplicationReceiveStreams"] as const)
    if (!Number.isInteger(o[f]) || o[f] < 0) bad(f, "must be an integer >= 0 (0: no limit)");
  if (!Number.isInteger(o.maxDeletesPerHeartbeat) || o.maxDeletesPerHeartbeat < 1)
    bad("maxDeletesPerHeartbeat", "must be an integer >= 1");
  if (o.placementPolicy !== "stock" && o.placementPolicy !== "diversity")
    bad("placementPolicy", `must be "stock" or "diversity" (got ${JSON.stringify(o.placementPolicy)})`);
  if (o.placementPolicy === "diversity" && !o.rmAddress)
    bad("rmAddress", "is required by the diversity placement (it reads the tenants from the resource manager)");
  if (o.tenantRefreshMs > 2 ** 31 - 1) bad("tenantRefreshMs", "must fit in an int32");
  if (!Number.isInteger(o.seed)) bad("seed", "must be an integer");
  if (typeof o.randomizeReadOrder !== "boolean") bad("randomizeReadOrder", "must be true or false");
  if (typeof o.permissions !== "boolean") bad("permissions", "must be true or false");
  o.superuser ||= localUserName();
  if (typeof o.superuser !== "string" || !NAME.test(o.superuser))
    bad("superuser", "must be 1-64 characters of [A-Za-z0-9_.@-]");
  if (typeof o.userGroups !== "object" || o.userGroups === null || Array.isArray(o.userGroups))
    bad("userGroups", 'must map user names to lists of groups, e.g. { "alice": ["analysts"] }');
  for (const [user, groups] of Object.entries(o.userGroups))
    if (!Array.isArray(groups) || !groups.every((g) => typeof g === "string" && NAME.test(g)))
      bad(`userGroups.${user}`, "must be a list of group names (1-64 characters of [A-Za-z0-9_.@-])");
  if (o.haCoordination !== undefined)
    o.haCoordination = checkHaCoordination(o.haCoordination, "namenode option haCoordination");
  if (o.haId && !/^[A-Za-z0-9_.@:-]{1,128}$/.test(o.haId)) bad("haId", "must be 1-128 characters of [A-Za-z0-9_.@:-]");
  if (!Number.isInteger(o.haLogRetainEntries) || o.haLogRetainEntries < 100)
    bad("haLogRetainEntries", "must be an integer >= 100");
  return o;
}
