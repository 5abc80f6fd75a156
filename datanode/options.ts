/** Datanode options: every field has a default; `resolveDataNodeOptions` fills and validates them. */
import { isValidHost, isWildcardHost, parseHostPort, resolveAdvertiseHost } from "../common/net-address.js";
import { checkSecurityOptions, invalidOption, stripUndefined } from "../common/options.js";
import type { TlsOption } from "../common/options.js";
import { reservedNodeName } from "../common/tls.js";
import { DELETE_CHUNK_BYTES } from "./block-store.js";
import type { PipelineVerify } from "./data-transfer.js";

/** Settings of a datanode. */
export interface DataNodeOptions {
  /**
   * This server's name in the cluster: 1-64 characters of [A-Za-z0-9_.-], and not root, harvest-master or
   * harvest-etcd (the coordination service's users, common/tls.ts). Required.
   */
  datanodeId: string;
  /**
   * host:port of the namenode (its DatanodeProtocol and ClientNamenode services); with HA, every namenode's,
   * comma-separated: the datanode registers and reports to each of them (a standby's block map stays current) and
   * takes commands only from the active one of the newest term. Required.
   */
  namenodeAddress: string;
  /** Where replicas live (`current/`, `rbw/`, `VERSION`). Required. */
  dataDir: string;
  /** Interface of the DataTransfer service. @default "127.0.0.1" */
  host: string;
  /** Port; 0 picks a free one. @default 0 */
  port: number;
  /**
   * Port of the block transfer protocol (block data off the RPC layer, common/block-transfer.ts; HDFS's 9866); 0 picks
   * a free one, -1 serves blocks over gRPC only. @default 0
   */
  transferPort: number;
  /**
   * Let a client on this server read a finalized replica straight from its files (HDFS's short-circuit local read,
   * `dfs.client.read.shortcircuit`): on its transfer port the datanode checks the block token and the primary's load
   * and answers where the files are; the client reads and verifies them itself. The client also needs the operating
   * system's permission to read this datanode's `current/` directory (run it as the datanode's account, or give that
   * account's group read access); without it, the client falls back to the transfer port. The primary-busy refusal
   * then applies per block instead of per 512 KiB piece. @default false
   */
  shortCircuitReads: boolean;
  /**
   * Write replica data with O_DIRECT from aligned memory, past the page cache (datanode/direct-write.ts): less CPU per
   * byte, and the primary's page cache left alone. false writes through the page cache, as stock HDFS does. A file system that refuses direct writes
   * (ramfs) gets buffered ones, with a warning. @default true
   */
  directWrites: boolean;
  /**
   * Send the data of reads on the plaintext transfer port straight from the block files with sendfile (HDFS's
   * `transferTo`, datanode/zero-copy.ts): the bytes never enter the datanode, which reads only their checksums; the
   * client verifies every chunk and reports a bad replica to the namenode. false reads every piece into memory and
   * verifies it before sending (as reads over TLS and gRPC always do). Without the native routine (no C compiler at
   * build) reads take that path anyway. @default true
   */
  zeroCopyReads: boolean;
  /**
   * Which datanodes of a write pipeline verify each packet's checksums on its way in: "tail", only the last one, as
   * HDFS does (the others forward and write it, and check their copy on disk only when downstream reports a mismatch,
   * to name the node that first got it bad); "every-hop", each node before it forwards, so a bad packet never travels
   * on, at the cost of one more CRC pass over the data per upstream node. @default "tail"
   */
  pipelineVerify: PipelineVerify;
  /**
   * Mode of `dataDir` (HDFS's `dfs.datanode.data.dir.perm`): "700", only the datanode's account reads replicas; "750",
   * accounts in its group may too, which short-circuit reads by clients of other accounts need. They can then read any
   * replica without a block token (HDFS's legacy short-circuit trust): give that group only to trusted accounts.
   * @default "700"
   */
  dataDirMode: "700" | "750";
  /** Interface of the web server (`/metrics`). @default the bind `host` */
  httpHost: string;
  /** Port of the web server; 0 picks a free one. @default 0 */
  httpPort: number;
  /**
   * Host name or IP that peers and clients use to reach this daemon (what it registers and writes in ready files).
   * @default the bind `host`, or this machine's host name when `host` is a wildcard (0.0.0.0, ::)
   */
  advertiseHost: string;
  /**
   * Mutual TLS under the cluster CA (`{ ca, cert, key }`, a `daemon` certificate naming advertiseHost), for the
   * data-transfer server, the stream to the namenode and pipelines to other datanodes. A caller without a certificate
   * (a task) must present a block token signed by the namenode. Without it: plaintext. @default none
   */
  tls?: TlsOption;
  /** Says that serving without `tls` is intended (a throwaway local cluster); `harvest daemon` requires one. */
  insecure: boolean;
  /**
   * Rack label, e.g. "/rack-1": set it to the same rack as this server's node manager (its `rack`), since replica
   * placement spreads replicas over racks and the scheduler's locality compares the two. @default "/default-rack"
   */
  rack: string;
  /** Bytes this datanode may fill; 0 takes the size of the data directory's file system. @default 0 */
  capacityBytes: number;
  /** Primary-tenant monitor: "proc", "trace:<file>" or "burn:<file>". @default "proc" */
  primary: string;
  /** Trace replay speed (trace seconds per real second). @default 1 */
  primarySpeed: number;
  /** Where in the trace replay starts, so servers sharing a file are not in lockstep. @default 0 */
  primaryOffsetMs: number;
  /**
   * Primary utilization (0..1] at or above which the datanode refuses reads and writes (seeds/004, section 4.2: a
   * datanode denies access while its primary tenant is busy). 0.9 leaves the primary the last tenth of the machine.
   * @default 0.9
   */
  busyThreshold: number;
  /**
   * The cgroup holding Harvest's own containers on this server (its node manager's), whose CPU the `proc` monitor
   * does not count as the primary's. @default `harvest/<datanodeId>` (a node manager's group for a server of that name)
   */
  secondaryCgroup: string;
  /** How often the primary monitor is sampled; reads and writes see the latest sample. @default 250 */
  monitorTickMs: number;
  /** Heartbeat period until the namenode says otherwise. @default 1000 */
  heartbeatIntervalMs: number;
  /** Period of full block reports. @default 60000 */
  blockReportIntervalMs: number;
  /** Reconnect backoff bounds. @default 200 / 2000 */
  reconnectMinMs: number;
  reconnectMaxMs: number;
  /**
   * A registration not answered in this time drops the channel and dials again: a connection attempt through a cut
   * link waits for the kernel's SYN retries (minutes), and gRPC has no connect timeout. @default 3000
   */
  registerTimeoutMs: number;
  /** Replications copied at once; more wait in line. @default 2 */
  maxConcurrentReplications: number;
  /** Bytes per second one replication may send; 0 means unthrottled. @default 0 */
  replicationBandwidth: number;
  /**
   * Deleted replicas are freed at most this many bytes per second, cut `deleteChunkBytes` at a time (from `trash/`
   * in the data directory, datanode/replica-trash.ts), and not at all while the primary is busy: on a disk that
   * discards freed blocks, a burst of deletions stalls every fsync of the primary's. They count as used space until
   * freed. 0 removes a replica's files as soon as the namenode deletes it, as stock HDFS does. @default 1073741824
   * (1 GiB/s)
   */
  deleteBytesPerSecond: number;
  /** Bytes a paced deletion frees at a time (a multiple of 4096). @default 8388608 (8 MiB) */
  deleteChunkBytes: number;
  /**
   * In a write pipeline, a downstream datanode that acknowledges nothing for this long while a packet waits (alive
   * but silent: keepalives catch only dead peers) fails the pipeline, named, so the writer replaces it. @default 30000
   */
  pipelineAckTimeoutMs: number;
  /**
   * A replica whose writer went away mid-block is kept this long for the namenode's lease recovery (which finalizes
   * it at the length every surviving replica holds, or deletes it); then it is deleted. @default 3600000 (1 h)
   */
  keptReplicaTtlMs: number;
}

/** What a caller must give; everything else has a default. */
export type DataNodeOptionsInput = Partial<DataNodeOptions> & {
  datanodeId: string;
  namenodeAddress: string;
  dataDir: string;
};

/** Fills defaults and validates; throws CONFIG_INVALID naming the field. */
export function resolveDataNodeOptions(partial: DataNodeOptionsInput): DataNodeOptions {
  const o: DataNodeOptions = {
    host: "127.0.0.1",
    port: 0,
    transferPort: 0,
    shortCircuitReads: false,
    directWrites: true,
    zeroCopyReads: true,
    pipelineVerify: "tail",
    dataDirMode: "700",
    httpHost: "",
    httpPort: 0,
    advertiseHost: "",
    insecure: false,
    rack: "/default-rack",
    capacityBytes: 0,
    primary: "proc",
    primarySpeed: 1,
    primaryOffsetMs: 0,
    busyThreshold: 0.9,
    secondaryCgroup: `harvest/${partial.datanodeId}`,
    monitorTickMs: 250,
    heartbeatIntervalMs: 1_000,
    blockReportIntervalMs: 60_000,
    reconnectMinMs: 200,
    reconnectMaxMs: 2_000,
    registerTimeoutMs: 3_000,
    maxConcurrentReplications: 2,
    replicationBandwidth: 0,
    deleteBytesPerSecond: 1024 * 1024 * 1024,
    deleteChunkBytes: DELETE_CHUNK_BYTES,
    pipelineAckTimeoutMs: 30_000,
    keptReplicaTtlMs: 3_600_000,
    ...stripUndefined(partial),
    datanodeId: partial.datanodeId,
    namenodeAddress: partial.namenodeAddress,
    dataDir: partial.dataDir,
  };
  const bad = (field: string, why: string): never => invalidOption("datanode", field, why);
  if (typeof o.datanodeId !== "string" || !/^[A-Za-z0-9_.-]{1,64}$/.test(o.datanodeId))
    bad("datanodeId", "must be 1-64 characters of [A-Za-z0-9_.-]");
  const reservedDatanodeId = reservedNodeName(o.datanodeId);
  if (reservedDatanodeId) bad("datanodeId", reservedDatanodeId);
  if (typeof o.namenodeAddress !== "string" || !o.namenodeAddress)
    bad("namenodeAddress", "is required (host:port of the namenode)");
  const namenodes = splitAddressList(o.namenodeAddress);
  for (const a of namenodes)
    if (!parseHostPort(a))
      bad("namenodeAddress", `must be host:port, or several comma-separated (got ${JSON.stringify(a)})`);
  if (namenodes.length === 0) bad("namenodeAddress", "is required (host:port of the namenode)");
  if (new Set(namenodes).size !== namenodes.length) bad("namenodeAddress", "names one namenode twice");
  if (typeof o.dataDir !== "string" || !o.dataDir) bad("dataDir", "is required");
  if (!(Number.isInteger(o.port) && o.port >= 0 && o.port <= 65_535)) bad("port", "must be an integer in 0..65535");
  if (!(Number.isInteger(o.transferPort) && o.transferPort >= -1 && o.transferPort <= 65_535))
    bad("transferPort", "must be an integer in 0..65535, or -1 for none");
  if (typeof o.shortCircuitReads !== "boolean") bad("shortCircuitReads", "must be true or false");
  if (typeof o.directWrites !== "boolean") bad("directWrites", "must be true or false");
  if (typeof o.zeroCopyReads !== "boolean") bad("zeroCopyReads", "must be true or false");
  if (o.pipelineVerify !== "tail" && o.pipelineVerify !== "every-hop")
    bad("pipelineVerify", 'must be "tail" (the pipeline\'s last datanode verifies) or "every-hop"');
  if (o.dataDirMode !== "700" && o.dataDirMode !== "750")
    bad("dataDirMode", 'must be "700" (the datanode\'s account only) or "750" (its group may read replicas too)');
  if (!(Number.isInteger(o.httpPort) && o.httpPort >= 0 && o.httpPort <= 65_535))
    bad("httpPort", "must be an integer in 0..65535 (0 picks a free port)");
  o.advertiseHost = resolveAdvertiseHost("datanode", o.host, o.advertiseHost);
  if (typeof o.httpHost !== "string") bad("httpHost", "must be an IP address or host name to bind");
  o.httpHost ||= o.host;
  if (!(isWildcardHost(o.httpHost) || isValidHost(o.httpHost)))
    bad("httpHost", `must be an IP address or host name to bind (got ${JSON.stringify(o.httpHost)})`);
  checkSecurityOptions("datanode", o);
  if (!(Number.isSafeInteger(o.capacityBytes) && o.capacityBytes >= 0))
    bad("capacityBytes", "must be a non-negative integer (0 = the file system's size)");
  if (typeof o.primary !== "string" || !o.primary) bad("primary", 'must be "proc", "trace:<file>" or "burn:<file>"');
  if (!(o.primarySpeed > 0)) bad("primarySpeed", "must be positive");
  if (!Number.isFinite(o.primaryOffsetMs)) bad("primaryOffsetMs", "must be a number");
  if (!(o.busyThreshold > 0 && o.busyThreshold <= 1)) bad("busyThreshold", "must be in (0, 1]");
  for (const f of [
    "monitorTickMs",
    "heartbeatIntervalMs",
    "blockReportIntervalMs",
    "reconnectMinMs",
    "reconnectMaxMs",
    "registerTimeoutMs",
    "pipelineAckTimeoutMs",
    "keptReplicaTtlMs",
  ] as const)
    if (!(Number.isFinite(o[f]) && o[f] > 0)) bad(f, "must be positive");
  if (o.reconnectMaxMs < o.reconnectMinMs) bad("reconnectMaxMs", "must be >= reconnectMinMs");
  if (!(Number.isInteger(o.maxConcurrentReplications) && o.maxConcurrentReplications > 0))
    bad("maxConcurrentReplications", "must be a positive integer");
  if (!(Number.isFinite(o.replicationBandwidth) && o.replicationBandwidth >= 0))
    bad("replicationBandwidth", "must be >= 0 (0 = unthrottled)");
  if (!(Number.isSafeInteger(o.deleteBytesPerSecond) && o.deleteBytesPerSecond >= 0))
    bad("deleteBytesPerSecond", "must be a non-negative integer (0 = remove replicas at once, unpaced)");
  if (!(Number.isSafeInteger(o.deleteChunkBytes) && o.deleteChunkBytes >= 4096 && o.deleteChunkBytes % 4096 === 0))
    bad("deleteChunkBytes", "must be a positive multiple of 4096");
  return o;
}

/** The addresses of a comma-separated list (blanks around commas and empty entries ignored). */
export function splitAddressList(spec: string): string[] {
  return spec
    .split(",")
    .map((a) => a.trim())
    .filter((a) => a !== "");
}
