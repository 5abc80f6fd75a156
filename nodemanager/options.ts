/**
 * Node manager options: every field has a default; `resolveNodeManagerOptions` fills and validates them.
 *
 * Not an option: the directory the daemon appends its typed events to (`events.jsonl`, common/events.ts) comes from
 * the environment variable `HARVEST_EVENTS_DIR`, which the local-cluster launcher sets to the cluster's `logs/`;
 * unset, the daemon writes no events.
 */
import { isAbsolute } from "node:path";
import { errorMessage } from "../common/errors.js";
import { isValidHost, isWildcardHost, resolveAdvertiseHost } from "../common/net-address.js";
import { checkSecurityOptions, invalidOption, mergeOptions } from "../common/options.js";
import type { TlsOption } from "../common/options.js";
import { DEFAULT_POWER_PROFILE_ID, resolvePowerProfile } from "../common/power-profiles.js";
import type { Resources } from "../common/resource.js";
import { DEFAULT_LOG_GROUP } from "../common/container-logs.js";
import { isValidIdentityName, reservedNodeName } from "../common/tls.js";
import { resolveCappingOptions } from "./policy/capping-controller.js";
import { isAccountName, lookupAccount } from "./run-as.js";
import type { RunAsMode } from "./run-as.js";
import { DEFAULT_UID_RANGE, parseUidRange } from "./uid-leases.js";
import type { CappingOptions } from "./policy/capping-controller.js";
import { VICTIM_ORDERS } from "./policy/yield-controller.js";
import type { VictimOrder } from "./policy/yield-controller.js";
import { DEFAULT_NEAR_END_MS } from "./policy/work-lost.js";
import { DEFAULT_NOTICE_MARGIN_FRACTION, PREEMPTION_NOTICES } from "./policy/preemption-notice.js";
import type { PreemptionNotice } from "./policy/preemption-notice.js";

/** Settings of a node manager. */
export interface NodeManagerOptions {
  /**
   * This server's name in the cluster: 1-64 characters of [A-Za-z0-9_.-], and not root, harvest-master or
   * harvest-etcd (the coordination service's users, common/tls.ts). Required.
   */
  nodeId: string;
  /** host:port of the resource manager; with HA, every one's, comma-separated (it follows the active). Required. */
  rmAddress: string;
  /** Where container working directories and logs go. Required. */
  dataDir: string;
  /**
   * host:port of the namenode (with HA, every one's, comma-separated), passed to containers (empty until the storage
   * layer runs). @default ""
   */
  nnAddress: string;
  /** Interface of the ContainerManager service. @default "127.0.0.1" */
  host: string;
  /** Port; 0 picks a free one. @default 0 */
  port: number;
  /** Interface of the web server (`/metrics`). @default the bind `host` */
  httpHost: string;
  /** Port of the web server; 0 picks a free one. @default 0 */
  httpPort: number;
  /**
   * Host name or IP that peers and clients use to reach this daemon (what it registers and writes in ready files).
   * @default the bind `host`, or this machine's host name when `host` is a wildcard (0.0.0.0, ::)
   */
  advertiseHost: string;
  /** Rack label. @default "/default-rack" */
  rack: string;
  /** What this server offers. @default { vcoresMilli: 4000, memoryMb: 4096 } */
  capacity: Resources;
  /** Primary-tenant monitor: "proc", "trace:<file>" or "burn:<file>". @default "proc" */
  primary: string;
  /** Trace replay speed (trace seconds per real second). @default 1 */
  primarySpeed: number;
  /** Where in the trace replay starts, so servers sharing a file are not in lockstep. @default 0 */
  primaryOffsetMs: number;
  /** Yield-controller period. @default 250 */
  yieldTickMs: number;
  /** Fraction of cores kept free for the primary. @default 0.1 */
  reserveFraction: number;
  /**
   * Which containers the yield controller kills when the primary needs its cores back: "youngest" (stock YARN: the
   * youngest first) or "work-lost" (the set that frees enough with the least running time x cores thrown away, tasks
   * near their end spared while others suffice). Job managers go last either way. @default "youngest"
   */
  victimOrder: VictimOrder;
  /**
   * Under "work-lost", a task whose reported progress says it ends within this many ms (elapsed x (1 - p) / p) is
   * killed only when the other tasks cannot free enough. @default 0
   */
  victimNearEndMs: number;
  /**
   * The preemption notice: "notice" reports, on the next heartbeat, each container the yield controller would kill if
   * the primary rose by `noticeMarginFraction` of the node's cores (it does not kill it; kills are unchanged), and the
   * resource manager tells its job manager, which keeps new tasks off this server a while. "off" (stock YARN) sends
   * none. @default "off"
   */
  preemptionNotice: PreemptionNotice;
  /** The notice's margin below the kill level, as a fraction of the node's cores. @default 0.1 */
  noticeMarginFraction: number;
  /** Heartbeat period until the resource manager says otherwise. @default 1000 */
  heartbeatIntervalMs: number;
  /** SIGTERM-to-SIGKILL grace when killing a container. @default 250 */
  killGraceMs: number;
  /**
   * The primary tenant's utilization (0..1) from which the shuffle service paces what it sends (the datanode's
   * `busyThreshold` refuses I/O there; a refused shuffle fetch would re-run the producer, so it is slowed instead).
   * @default 0.9
   */
  shuffleBusyUtilization: number;
  /** The shuffle service's pace while the primary tenant is busy, in MB/s. @default 32 */
  shuffleBusyMBps: number;
  /**
   * How long a finished application's intermediate outputs and private file cache stay after the node manager hears
   * it ended (YARN's delete delay), to look into what its tasks left; 0 removes them at once. @default 60000
   */
  finishedAppRetentionMs: number;
  /**
   * The most an archive resource may unpack to, in MiB (for a tar, its uncompressed stream): a larger one, a zip
   * bomb, is refused (ARCHIVE_REFUSED) and its job fails. @default 4096
   */
  archiveMaxMb: number;
  /** The most entries (files, directories, links) an archive resource may hold. @default 100000 */
  archiveMaxEntries: number;
  /**
   * How long a completion the resource manager recorded is still reported when this node registers again, so that a
   * resource manager that restarted before passing it to its job manager learns of it. @default 600000
   */
  completedRetentionMs: number;
  /**
   * Copy each container's stdout and stderr into the DFS when it exits, as its submitter, to
   * `/user/<name>/.logs/<appId>/<containerId>/` (docs/web-ui.md); its exit is reported once copied (or failed, or
   * timed out). Needs `nnAddress`. @default true
   */
  logUpload: boolean;
  /** How long a container's completion waits for its logs' copy into the DFS. @default 10000 */
  logUploadTimeoutMs: number;
  /**
   * The DFS group of the kept logs' directories (mode 0770): the namenode's `userGroups` puts the resource managers'
   * certificate names in it, so they show a job's logs after it ended and remove those past their retention
   * (docs/web-ui.md). @default "harvest-logs"
   */
  containerLogGroup: string;
  /**
   * Containers die with their node manager: a watchdog process kills them when this node manager dies (kill -9), so
   * that no orphan keeps running while its task re-runs elsewhere. false leaves them to a restart's cleanup. @default true
   */
  orphanReaper: boolean;
  /** Which cgroup interface to use. @default "auto" */
  cgroups: "auto" | "v1" | "v2" | "none";
  /**
   * A key of the cluster in its containers' cgroup path, `harvest/<cgroupCluster>/<nodeId>` (0-64 characters of
   * [A-Za-z0-9_.-]), for hosts that run servers of several clusters with the same names; `harvest cluster up` sets one
   * from its directory. Its datanode's `secondaryCgroup` must name the same group. "": `harvest/<nodeId>`. @default ""
   */
  cgroupCluster: string;
  /**
   * Whom a root node manager runs containers as (run-as.ts): "application", an account of each application's own (a
   * uid leased from `containerUidRange`); "submitter", the submitter's own account on this server when it has one with
   * uid >= `containerMinUid` and `tls` authenticates it, else the application's own; "fixed", every container as
   * `containerUser` (jobs can then read and signal each other). @default "application"
   */
  containerRunAs: RunAsMode;
  /**
   * The uids (gid the same) leased to applications' accounts, "min-max": no account in the user database may use them
   * (those that do are skipped). @default "61184-65519"
   */
  containerUidRange: string;
  /**
   * The host-wide directory of uid leases (one file per leased uid), shared by every node manager of the host, so no
   * two hand out one uid; it outlives a restart. @default "/var/lib/harvest/container-uids"
   */
  containerUidLeaseDir: string;
  /**
   * Whether a root node manager gives each container a private /tmp (in its work directory) and /dev/shm (a tmpfs of
   * at most its memory) in a mount namespace of its own; without it (or not root), TMPDIR names a directory in the
   * work directory. @default true
   */
  containerPrivateTmp: boolean;
  /** The one account of `containerRunAs` "fixed"; never root. @default "nobody" */
  containerUser: string;
  /** The lowest uid of a submitter's own account that containers may run as ("submitter"). @default 1000 */
  containerMinUid: number;
  /** Cluster secret that container tokens are checked against; empty skips the check. @default "" */
  secret: string;
  /**
   * Mutual TLS under the cluster CA (`{ ca, cert, key }`, a `daemon` certificate naming advertiseHost), for this
   * node manager's server and its stream to the resource manager. The CA certificate's path is also given to
   * containers (HARVEST_CA), which authenticate by their tokens. Without it: plaintext, nobody authenticated.
   */
  tls?: TlsOption;
  /** Says that serving without `tls` is intended (a throwaway local cluster); `harvest daemon` requires one. */
  insecure: boolean;
  /** Reconnect backoff bounds. @default 200 / 2000 */
  reconnectMinMs: number;
  reconnectMaxMs: number;
  /**
   * A registration not answered in this time drops the channel and dials again: a connection attempt through a cut
   * link waits for the kernel's SYN retries (minutes), and gRPC has no connect timeout. @default 3000
   */
  registerTimeoutMs: number;
  /**
   * Power meter: "auto" (RAPL when readable, else the model), "rapl", "model" (the hardware profile at the server's
   * measured CPU utilization), or "trace:<file>[@speed]" (a replay of measured watts).
   * @default "auto"
   */
  powerMeter: string;
  /** Hardware power profile of this server (a built-in id or "spec:<n>"), for the model meter and the RM. @default DEFAULT_POWER_PROFILE_ID */
  powerProfile: string;
  /** This server's own power budget in watts; 0: none (the power domain may still impose one). @default 0 */
  powerBudgetWatts: number;
  /** Capping agent period (seeds/000 polls the PSU every 200 ms). @default 200 */
  cappingPeriodMs: number;
  /** Capping controller settings (thresholds, floor, steps, kill deadline, quiet period). @default {} */
  capping: Partial<CappingOptions>;
  /** How throttling is enforced: cgroup quotas, SIGSTOP/SIGCONT duty cycles, or "auto" (cgroups when present). @default "auto" */
  throttle: "auto" | "cgroup" | "signal" | "none";
  /** The power domain this server sits in, e.g. "row1/rack2/chassis3" ("": the RM places it by its rack). @default "" */
  powerDomain: string;
}

/** Fills defaults and validates; throws CONFIG_INVALID naming the field. */
export function resolveNodeManagerOptions(
  partial: Partial<NodeManagerOptions> & { nodeId: string; rmAddress: string; dataDir: string },
): NodeManagerOptions {
  const o: NodeManagerOptions = {
    ...mergeOptions(
      "node manager",
      {
        nnAddress: "",
        host: "127.0.0.1",
        port: 0,
        httpHost: "",
        httpPort: 0,
        advertiseHost: "",
        rack: "/default-rack",
        capacity: { vcoresMilli: 4000, memoryMb: 4096 },
        primary: "proc",
        primarySpeed: 1,
        primaryOffsetMs: 0,
        yieldTickMs: 250,
        reserveFraction: 0.1,
        victimOrder: "youngest",
        victimNearEndMs: DEFAULT_NEAR_END_MS,
        preemptionNotice: "off",
        noticeMarginFraction: DEFAULT_NOTICE_MARGIN_FRACTION,
        heartbeatIntervalMs: 1_000,
        killGraceMs: 250,
        shuffleBusyUtilization: 0.9,
        shuffleBusyMBps: 32,
        finishedAppRetentionMs: 60_000,
        archiveMaxMb: 4096,
        archiveMaxEntries: 100_000,
        completedRetentionMs: 600_000,
        logUpload: true,
        logUploadTimeoutMs: 10_000,
        containerLogGroup: DEFAULT_LOG_GROUP,
        orphanReaper: true,
        cgroups: "auto",
        cgroupCluster: "",
        containerRunAs: "application",
        containerUidRange: DEFAULT_UID_RANGE,
        containerUidLeaseDir: "/var/lib/harvest/container-uids",
        containerPrivateTmp: true,
        containerUser: "nobody",
        containerMinUid: 1000,
        secret: "",
        insecure: false,
        reconnectMinMs: 200,
        reconnectMaxMs: 2_000,
        registerTimeoutMs: 3_000,
        powerMeter: "auto",
        powerProfile: DEFAULT_POWER_PROFILE_ID,
        powerBudgetWatts: 0,
        cappingPeriodMs: 200,
        capping: {},
        throttle: "auto",
        powerDomain: "",
      },
      partial,
    ),
    nodeId: partial.nodeId,
    rmAddress: partial.rmAddress,
    dataDir: partial.dataDir,
  };
  const bad = (field: string, why: string): never => invalidOption("node manager", field, why);
  if (!/^[A-Za-z0-9_.-]{1,64}$/.test(o.nodeId)) bad("nodeId", "must be 1-64 characters of [A-Za-z0-9_.-]");
  const reservedNodeId = reservedNodeName(o.nodeId);
  if (reservedNodeId) bad("nodeId", reservedNodeId);
  if (!o.rmAddress) bad("rmAddress", "is required (host:port of the resource manager)");
  if (!o.dataDir) bad("dataDir", "is required");
  if (!(Number.isInteger(o.port) && o.port >= 0 && o.port <= 65_535)) bad("port", "must be an integer in 0..65535");
  if (!(Number.isInteger(o.httpPort) && o.httpPort >= 0 && o.httpPort <= 65_535))
    bad("httpPort", "must be an integer in 0..65535 (0 picks a free port)");
  if (typeof o.secret !== "string" || o.secret.startsWith("REPLACE-WITH"))
    bad("secret", "must be the cluster's secret (the example config's placeholder is not one: openssl rand -hex 32)");
  o.advertiseHost = resolveAdvertiseHost("node manager", o.host, o.advertiseHost);
  o.httpHost ||= o.host;
  if (!(isWildcardHost(o.httpHost) || isValidHost(o.httpHost)))
    bad("httpHost", `must be an IP address or host name to bind (got ${JSON.stringify(o.httpHost)})`);
  checkSecurityOptions("node manager", o);
  if (o.tls && !o.secret) bad("secret", "is required with tls: container and job-manager tokens are checked with it");
  if (!(o.capacity.vcoresMilli > 0 && o.capacity.memoryMb > 0)) bad("capacity", "must be positive");
  if (!(o.primarySpeed > 0)) bad("primarySpeed", "must be positive");
  for (const f of [
    "yieldTickMs",
    "heartbeatIntervalMs",
    "reconnectMinMs",
    "reconnectMaxMs",
    "registerTimeoutMs",
  ] as const)
    if (!(o[f] > 0)) bad(f, "must be positive");
  if (!(o.killGraceMs >= 0)) bad("killGraceMs", "must be >= 0");
  if (!(o.shuffleBusyUtilization > 0 && o.shuffleBusyUtilization <= 1))
    bad("shuffleBusyUtilization", "must be in (0, 1]");
  if (!(o.shuffleBusyMBps > 0)) bad("shuffleBusyMBps", "must be a positive number of MB/s");
  if (!(o.finishedAppRetentionMs >= 0)) bad("finishedAppRetentionMs", "must be a number of milliseconds >= 0");
  if (!(o.completedRetentionMs >= 0)) bad("completedRetentionMs", "must be >= 0");
  if (typeof o.logUpload !== "boolean") bad("logUpload", "must be true or false");
  if (!(Number.isInteger(o.logUploadTimeoutMs) && o.logUploadTimeoutMs > 0))
    bad("logUploadTimeoutMs", "must be a positive integer");
  if (typeof o.containerLogGroup !== "string" || !isValidIdentityName(o.containerLogGroup))
    bad("containerLogGroup", "must be 1-64 characters of [A-Za-z0-9_.@-]");
  if (!(o.archiveMaxMb > 0)) bad("archiveMaxMb", "must be a positive number of MiB");
  if (!(Number.isInteger(o.archiveMaxEntries) && o.archiveMaxEntries > 0))
    bad("archiveMaxEntries", "must be a positive integer");
  if (typeof o.orphanReaper !== "boolean") bad("orphanReaper", "must be true or false");
  if (!(o.reserveFraction >= 0 && o.reserveFraction < 1)) bad("reserveFraction", "must be in [0, 1)");
  if (!VICTIM_ORDERS.includes(o.victimOrder)) bad("victimOrder", 'must be "youngest" or "work-lost"');
  if (!(Number.isFinite(o.victimNearEndMs) && o.victimNearEndMs >= 0))
    bad("victimNearEndMs", "must be a number of milliseconds >= 0");
  if (!PREEMPTION_NOTICES.includes(o.preemptionNotice)) bad("preemptionNotice", 'must be "off" or "notice"');
  if (!(o.noticeMarginFraction > 0 && o.noticeMarginFraction < 1)) bad("noticeMarginFraction", "must be in (0, 1)");
  if (!["auto", "v1", "v2", "none"].includes(o.cgroups)) bad("cgroups", 'must be "auto", "v1", "v2" or "none"');
  if (typeof o.cgroupCluster !== "string" || !/^[A-Za-z0-9_.-]{0,64}$/.test(o.cgroupCluster))
    bad("cgroupCluster", "must be 0-64 characters of [A-Za-z0-9_.-]");
  if (!["application", "submitter", "fixed"].includes(o.containerRunAs))
    bad("containerRunAs", 'must be "application", "submitter" or "fixed"');
  try {
    parseUidRange(String(o.containerUidRange));
  } catch (err) {
    bad("containerUidRange", errorMessage(err));
  }
  if (typeof o.containerUidLeaseDir !== "string" || !isAbsolute(o.containerUidLeaseDir))
    bad("containerUidLeaseDir", "must be an absolute path");
  if (typeof o.containerPrivateTmp !== "boolean") bad("containerPrivateTmp", "must be true or false");
  if (typeof o.containerUser !== "string" || !isAccountName(o.containerUser))
    bad("containerUser", "must be an account name like nobody");
  if (o.containerRunAs === "fixed") {
    const fixed = lookupAccount(o.containerUser);
    if (fixed && (fixed.uid === 0 || fixed.gid === 0))
      bad(
        "containerUser",
        `must not be root or in group root: ${o.containerUser} is uid ${fixed.uid}, gid ${fixed.gid}`,
      );
    if (!fixed && process.getuid?.() === 0)
      bad("containerUser", `names no account on this server (${o.containerUser}): containers need one to run as`);
  }
  if (!(Number.isInteger(o.containerMinUid) && o.containerMinUid >= 1))
    bad("containerMinUid", "must be an integer >= 1 (uid 0 is root)");
  if (!(Number.isFinite(o.powerBudgetWatts) && o.powerBudgetWatts >= 0))
    bad("powerBudgetWatts", "must be a number of watts >= 0 (0: no budget of its own)");
  if (!(o.cappingPeriodMs > 0)) bad("cappingPeriodMs", "must be positive");
  if (!["auto", "cgroup", "signal", "none"].includes(o.throttle))
    bad("throttle", 'must be "auto", "cgroup", "signal" or "none"');
  if (typeof o.powerMeter !== "string" || o.powerMeter.trim() === "")
    bad("powerMeter", 'must be "auto", "rapl", "model" or "trace:<file>"');
  if (o.powerDomain.split("/").some((p) => p === ".." || p === "."))
    bad("powerDomain", "must be a path of domain names like row1/rack2/chassis3");
  // Both throw CONFIG_INVALID naming what is wrong (an unknown profile, out-of-order capping thresholds).
  resolvePowerProfile(o.powerProfile);
  resolveCappingOptions(o.capping);
  return o;
}
