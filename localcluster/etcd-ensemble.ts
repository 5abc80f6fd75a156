/**
 * The coordination service's ensemble (issue 43, /work/tools/ha-design.md): N etcd members as real processes, each
 * with its own data directory, client URL and peer URL, all under the cluster CA: clients and peers must present a
 * certificate the CA signed, peers one whose CN is `harvest-etcd`. Once the members agree on a leader, auth is set up
 * (idempotently: a restarted ensemble already is): user `root` (role root, a random password never kept), role
 * `harvest-master` with readwrite on `/harvest/`, user `harvest-master` with that role, then `auth enable`. etcd takes a
 * TLS client's CN as its user name, so from then on only a certificate with CN `harvest-master` (which the CA issues
 * to daemons only) reads or writes Harvest's keys; a user's certificate is refused, and no certificate cannot connect.
 *
 * Root's power comes only from the CA's key: setting up auth and replacing a member (both need root) issue a
 * certificate with CN `root` into a private temporary directory, use it, and delete it.
 *
 * `harvest cluster up --ha` starts one on loopback (localcluster/cluster.ts); docs/ha.md says how an operator runs one
 * on three hosts and how to replace a lost member, with the same steps as {@link replaceEtcdMember}.
 */
import { spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { closeSync, existsSync, mkdirSync, mkdtempSync, openSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import type { Etcd3 } from "etcd3";
import { writeFileAtomic } from "../common/atomic-file.js";
import { processStartTime } from "../common/container-leftovers.js";
import { errorMessage, HarvestError } from "../common/errors.js";
import { dropIpServerNameWarning, isValidHost } from "../common/tls.js";
import { stablePort } from "./ports.js";
import type { TlsFiles } from "../common/tls.js";

/** Debian's etcd-server; `$HARVEST_ETCD` names another. */
export const DEFAULT_ETCD_BINARY = "/usr/bin/etcd";
/** The CN every member's certificate carries; peers accept no other (`--peer-cert-allowed-cn`). */
export const ETCD_MEMBER_NAME = "harvest-etcd";
/** The CN (and etcd user) of the masters' certificate: the only identity that reads or writes Harvest's keys. */
export const ETCD_MASTER_NAME = "harvest-master";
/** etcd's superuser; a certificate with this CN is made only for a moment, to set up auth or change membership. */
export const ETCD_ROOT_NAME = "root";
/** Every Harvest key lives below this prefix (`/harvest/<clusterId>/...`). */
export const HARVEST_KEY_PREFIX = "/harvest/";
/** etcd's `--grpc-keepalive-min-time`: below the masters' keepalive interval (KEEPALIVE_MS in coordination.ts). */
export const ETCD_KEEPALIVE_MIN_TIME = "500ms";

/** One member of an ensemble. */
export interface EtcdMemberRecord {
  /** Its etcd name (`etcd-1`, ...), unique in the ensemble. */
  name: string;
  /** The host name or IP it serves on (its certificate names it). */
  host: string;
  pid: number;
  /** The process's start time (/proc/<pid>/stat field 22), so that a reused pid is never taken for it. */
  startTime?: string;
  /** `https://<host>:<port>`: where clients (the masters) reach it. */
  clientUrl: string;
  /** `https://<host>:<port>`: where the other members reach it. */
  peerUrl: string;
  dataDir: string;
  log: string;
}

/** An ensemble as started: what the cluster descriptor keeps, and what stops, restarts and replaces members. */
export interface EnsembleDescriptor {
  version: 1;
  /** Where its members' data directories and logs are, and its own copy of this descriptor (ensemble.json). */
  dir: string;
  /** The CA that issued its certificates (and issues the transient root certificate). */
  caDir: string;
  /** `--initial-cluster-token`: keeps two ensembles on one network from joining each other. */
  token: string;
  /** What every member presents and trusts (CN harvest-etcd). */
  memberTls: TlsFiles;
  /** What the masters present (CN harvest-master): the only certificate that may use Harvest's keys. */
  masterTls: TlsFiles;
  quotaBackendBytes: number;
  compactionRetentionRevisions: number;
  heartbeatMs: number;
  electionTimeoutMs: number;
  members: EtcdMemberRecord[];
}

/** How to start an ensemble. */
export interface EnsembleOptions {
  /** The ensemble's directory (each member's data directory and log go below it). */
  dir: string;
  /** The cluster CA's directory: its ca.pem and ca-key.pem, and where the member and master certificates go. */
  caDir: string;
  /** One host (name or IP) per member. @default three members on 127.0.0.1 */
  hosts?: string[];
  /**
   * The client and peer port of every member, for members on hosts of their own (etcd's are 2379 and 2380).
   * @default ports free on the member's host now (members sharing a host, e.g. loopback)
   */
  ports?: { client: number; peer: number };
  /** Hosts the masters' certificate names (it is a daemon's). @default ["127.0.0.1", "localhost"] */
  masterHosts?: string[];
  /** The backend's size limit (`--quota-backend-bytes`): past it etcd refuses writes with an alarm. @default 1 GiB */
  quotaBackendBytes?: number;
  /** Revisions kept by auto-compaction (`--auto-compaction-mode revision`): history stays bounded. @default 1000 */
  compactionRetentionRevisions?: number;
  /** Raft heartbeat (`--heartbeat-interval`). @default 100, etcd's */
  heartbeatMs?: number;
  /** Raft election timeout (`--election-timeout`). @default 1000, etcd's */
  electionTimeoutMs?: number;
  /** How long to wait for a healthy ensemble. @default 30000 */
  startTimeoutMs?: number;
  /** The etcd program. @default $HARVEST_ETCD, else /usr/bin/etcd */
  etcdBinary?: string;
  /** Argv put before etcd's, per member (e.g. `ip netns exec <host>` in a lab); it must exec etcd in place. */
  wrap?: (member: string) => string[];
}

/** What one member says about itself. */
export interface EtcdMemberHealth {
  name: string;
  clientUrl: string;
  running: boolean;
  /** It answered a status call over its client URL. */
  healthy: boolean;
  /** The leader's member id as it sees it (hex), when it answered. */
  leader?: string;
  error?: string;
}

/** The etcd program this machine would run, or undefined when it has none. */
export function etcdBinary(given?: string): string | undefined {
  const bin = given ?? process.env["HARVEST_ETCD"] ?? DEFAULT_ETCD_BINARY;
  return existsSync(bin) ? bin : undefined;
}

/** The masters' etcd endpoints (`https://host:port`, one per member): what `haCoordination.endpoints` takes. */
export function etcdEndpoints(e: Pick<EnsembleDescriptor, "members">): string[] {
  return e.members.map((m) => m.clientUrl);
}

/**
 * The `haCoordination` option (common/ha/coordination.ts) of a master of this ensemble: its members' client URLs and
 * the masters' certificate.
 */
export function haCoordinationOf(e: EnsembleDescriptor): TlsFiles & { endpoints: string[] } {
  return { endpoints: etcdEndpoints(e), ...e.masterTls };
}

/** The certificates an ensemble needs, made by {@link issueEnsembleCertificates}. */
export interface EnsembleCertificates {
  member: TlsFiles;
  master: TlsFiles;
}

/**
 * Issues into `outDir` (default: the CA's directory) the members' certificate (CN harvest-etcd, role daemon, naming
 * every member's host: one file serves every member; an operator may issue one per host instead) and the masters'
 * certificate (CN harvest-master, role daemon). Replaces ones already there (same CA, so what runs keeps working).
 */
export async function issueEnsembleCertificates(
  caDir: string,
  opts: { memberHosts: string[]; masterHosts: string[]; outDir?: string },
): Promise<EnsembleCertificates> {
  const { caFiles, issueCertificate } = await import("./cluster-ca.js");
  const ca = caFiles(caDir).cert;
  const out = opts.outDir ?? caDir;
  const unique = (hosts: string[]): string[] => [...new Set(hosts)];
  const member = await issueCertificate(caDir, out, {
    name: ETCD_MEMBER_NAME,
    role: "daemon",
    hosts: unique(opts.memberHosts),
  });
  const master = await issueCertificate(caDir, out, {
    name: ETCD_MASTER_NAME,
    role: "daemon",
    hosts: unique(opts.masterHosts),
  });
  return { member: { ca, ...member }, master: { ca, ...master } };
}

/** The ensemble's own copy of its descriptor. */
function descriptorFile(dir: string): string {
  return join(resolve(dir), "ensemble.json");
}

/** Reads `<dir>/ensemble.json`, or undefined when no ensemble was started there. */
export function readEnsemble(dir: string): EnsembleDescriptor | undefined {
  const file = descriptorFile(dir);
  if (!existsSync(file)) return undefined;
  return JSON.parse(readFileSync(file, "utf8")) as EnsembleDescriptor;
}

function writeEnsemble(e: EnsembleDescriptor): void {
  writeFileAtomic(descriptorFile(e.dir), JSON.stringify(e, null, 2) + "\n", 0o600);
}

/** True when the process a member record names runs: same pid, same start time, and its own data directory. */
export function isMemberRunning(m: EtcdMemberRecord): boolean {
  try {
    if (m.startTime !== undefined && processStartTime(m.pid) !== m.startTime) return false;
    return readFileSync(`/proc/${m.pid}/cmdline`, "utf8").split("\0").includes(`--data-dir=${m.dataDir}`);
  } catch {
    return false;
  }
}

/**
 * Starts an ensemble and resolves once every member answers, they agree on a leader, and auth is set up. When `dir`
 * already holds one (ensemble.json), its members start again on their own data, names and ports (a stopped ensemble
 * comes back with its keys); members already running are left alone.
 */
export async function startEnsemble(opts: EnsembleOptions): Promise<EnsembleDescriptor> {
  const bin = etcdBinary(opts.etcdBinary);
  if (!bin)
    throw new HarvestError(
      "CONFIG_INVALID",
      `no etcd program at ${opts.etcdBinary ?? process.env["HARVEST_ETCD"] ?? DEFAULT_ETCD_BINARY}: install Debian's ` +
        `etcd-server (apt-get install etcd-server etcd-client) or set $HARVEST_ETCD`,
    );
  const dir = resolve(opts.dir);
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  const timeoutMs = opts.startTimeoutMs ?? 30_000;
  const existing = readEnsemble(dir);
  if (existing) {
    const down = existing.members.filter((m) => !isMemberRunning(m));
    const lost = down.find((m) => !existsSync(m.dataDir) || readdirSync(m.dataDir).length === 0);
    if (lost)
      throw new HarvestError(
        "CONFIG_INVALID",
        `etcd member ${lost.name} lost its data directory ${lost.dataDir}: replace it (docs/ha.md, "Replacing a lost member")`,
      );
    try {
      for (const m of down) Object.assign(m, spawnMember(existing, m, "existing", bin, opts.wrap));
      writeEnsemble(existing);
      await waitForHealthy(existing, timeoutMs);
      await setupEnsembleAuth(existing);
      return existing;
    } catch (err) {
      await stopEnsemble({ members: down });
      throw err;
    }
  }
  const hosts = opts.hosts ?? ["127.0.0.1", "127.0.0.1", "127.0.0.1"];
  if (hosts.length === 0 || hosts.length > 9)
    throw new HarvestError("INVALID_ARGUMENT", `an ensemble has 1 to 9 members (3 or 5 usually), not ${hosts.length}`);
  const badHost = hosts.find((h) => !isValidHost(h));
  if (badHost !== undefined)
    throw new HarvestError("INVALID_ARGUMENT", `bad etcd host ${JSON.stringify(badHost)}: a DNS name or an IP`);
  if (opts.ports && new Set(hosts).size < hosts.length)
    throw new HarvestError(
      "INVALID_ARGUMENT",
      `fixed ports need a host per member; ${hosts.join(", ")} names one twice (leave the ports out to pick free ones)`,
    );
  // Data without ensemble.json (a start that died half-way) belongs to no ensemble this code knows: etcd would rejoin
  // the membership stored there, not the one this start would make.
  const stale = hosts.map((_, i) => join(dir, `etcd-${i + 1}`)).find((d) => existsSync(d) && readdirSync(d).length > 0);
  if (stale)
    throw new HarvestError(
      "CONFIG_INVALID",
      `${stale} holds etcd data but ${descriptorFile(dir)} records no ensemble: remove ${dir} to start afresh`,
    );
  const certs = await issueEnsembleCertificates(opts.caDir, {
    memberHosts: hosts.includes("127.0.0.1") ? [...hosts, "localhost"] : hosts,
    masterHosts: opts.masterHosts ?? ["127.0.0.1", "localhost"],
  });
  const e: EnsembleDescriptor = {
    version: 1,
    dir,
    caDir: resolve(opts.caDir),
    token: `harvest-${randomBytes(8).toString("hex")}`,
    memberTls: certs.member,
    masterTls: certs.master,
    quotaBackendBytes: opts.quotaBackendBytes ?? 1024 ** 3,
    compactionRetentionRevisions: opts.compactionRetentionRevisions ?? 1000,
    heartbeatMs: opts.heartbeatMs ?? 100,
    electionTimeoutMs: opts.electionTimeoutMs ?? 1000,
    members: [],
  };
  for (const [i, host] of hosts.entries()) {
    // Both ports are chosen now: every member must know every peer URL before the first starts.
    const [clientPort, peerPort] = opts.ports
      ? [opts.ports.client, opts.ports.peer]
      : [await stablePort(host), await stablePort(host)];
    const name = `etcd-${i + 1}`;
    e.members.push({
      name,
      host,
      pid: 0,
      clientUrl: `https://${urlHost(host)}:${clientPort}`,
      peerUrl: `https://${urlHost(host)}:${peerPort}`,
      dataDir: join(dir, name),
      log: join(dir, `${name}.log`),
    });
  }
  try {
    for (const m of e.members) Object.assign(m, spawnMember(e, m, "new", bin, opts.wrap));
    writeEnsemble(e);
    await waitForHealthy(e, timeoutMs);
    await setupEnsembleAuth(e);
    return e;
  } catch (err) {
    await stopEnsemble(e);
    throw err;
  }
}

/** A host as it goes in a URL (an IPv6 address in brackets). */
function urlHost(host: string): string {
  return host.includes(":") ? `[${host}]` : host;
}

/**
 * etcd's flags for `m`: TLS for clients and peers under the cluster CA (peers only with CN harvest-etcd), bounded
 * history and backend, and no HTTP gateway (its requests would not carry the caller's certificate).
 */
export function memberArgs(e: EnsembleDescriptor, m: EtcdMemberRecord, state: "new" | "existing"): string[] {
  const t = e.memberTls;
  return [
    `--name=${m.name}`,
    `--data-dir=${m.dataDir}`,
    `--listen-client-urls=${m.clientUrl}`,
    `--advertise-client-urls=${m.clientUrl}`,
    `--listen-peer-urls=${m.peerUrl}`,
    `--initial-advertise-peer-urls=${m.peerUrl}`,
    `--initial-cluster=${e.members.map((x) => `${x.name}=${x.peerUrl}`).join(",")}`,
    `--initial-cluster-token=${e.token}`,
    `--initial-cluster-state=${state}`,
    "--client-cert-auth",
    `--trusted-ca-file=${t.ca}`,
    `--cert-file=${t.cert}`,
    `--key-file=${t.key}`,
    "--peer-client-cert-auth",
    `--peer-trusted-ca-file=${t.ca}`,
    `--peer-cert-file=${t.cert}`,
    `--peer-key-file=${t.key}`,
    `--peer-cert-allowed-cn=${ETCD_MEMBER_NAME}`,
    "--auto-compaction-mode=revision",
    `--auto-compaction-retention=${e.compactionRetentionRevisions}`,
    `--quota-backend-bytes=${e.quotaBackendBytes}`,
    `--heartbeat-interval=${e.heartbeatMs}`,
    `--election-timeout=${e.electionTimeoutMs}`,
    // A member cut off keeps calling elections, each in a higher Raft term; without pre-vote it deposes the leader
    // the moment its link heals, and every write waits out another election (etcd 3.5 turns it on by default).
    "--pre-vote",
    "--enable-grpc-gateway=false",
    // The masters ping every second to notice a member cut off (common/ha/coordination.ts); etcd's default would
    // answer pings more often than every 5 s by closing the connection.
    `--grpc-keepalive-min-time=${ETCD_KEEPALIVE_MIN_TIME}`,
    "--logger=zap",
    "--log-outputs=stderr",
  ];
}

/** Starts one member's process (detached, its output to its log); returns its pid and start time. */
function spawnMember(
  e: EnsembleDescriptor,
  m: EtcdMemberRecord,
  state: "new" | "existing",
  bin: string,
  wrap?: (member: string) => string[],
): Pick<EtcdMemberRecord, "pid" | "startTime"> {
  const argv = [...(wrap?.(m.name) ?? []), bin, ...memberArgs(e, m, state)];
  const fd = openSync(m.log, "a", 0o600);
  const child = spawn(argv[0]!, argv.slice(1), { detached: true, stdio: ["ignore", fd, fd] });
  closeSync(fd);
  child.unref();
  child.once("error", () => undefined); // A missing program shows as a member that never answers; its log says why.
  if (!child.pid) throw new HarvestError("UNAVAILABLE", `could not start etcd member ${m.name} (${argv[0]})`);
  const startTime = processStartTime(child.pid);
  return { pid: child.pid, ...(startTime ? { startTime } : {}) };
}

/** The last lines of a member's log, for an error that says why it did not come up. */
function logTail(m: EtcdMemberRecord, lines = 5): string {
  try {
    return readFileSync(m.log, "utf8").trimEnd().split("\n").slice(-lines).join("\n");
  } catch {
    return "";
  }
}

/** A client of the given endpoints with the given certificate; every call has a deadline of `callMs`. */
async function etcdClient(endpoints: string[], tls: TlsFiles, callMs = 3_000): Promise<Etcd3> {
  // Loaded on first use: a cluster without --ha never loads etcd3.
  const [{ Etcd3 }, { etcdFaultHandling }] = await Promise.all([
    import("etcd3"),
    import("../common/ha/coordination.js"),
  ]);
  dropIpServerNameWarning();
  return new Etcd3({
    hosts: endpoints,
    credentials: {
      rootCertificate: readFileSync(tls.ca),
      privateKey: readFileSync(tls.key),
      certChain: readFileSync(tls.cert),
    },
    dialTimeout: callMs,
    defaultCallOptions: () => ({ deadline: Date.now() + callMs }),
    faultHandling: etcdFaultHandling(),
  });
}

/** A client of the ensemble as the masters are (CN harvest-master). */
export function masterClient(e: EnsembleDescriptor, callMs?: number): Promise<Etcd3> {
  return etcdClient(etcdEndpoints(e), e.masterTls, callMs);
}

/** Each member's health: whether its process runs and it answers a status call over its own client URL. */
export async function ensembleHealth(e: EnsembleDescriptor): Promise<EtcdMemberHealth[]> {
  return Promise.all(
    e.members.map(async (m): Promise<EtcdMemberHealth> => {
      const base = { name: m.name, clientUrl: m.clientUrl, running: isMemberRunning(m) };
      if (!base.running) return { ...base, healthy: false, error: "not running" };
      const client = await etcdClient([m.clientUrl], e.masterTls, 2_000);
      try {
        const status = await client.maintenance.status();
        return { ...base, healthy: status.leader !== "0", leader: status.leader };
      } catch (err) {
        return { ...base, healthy: false, error: errorMessage(err) };
      } finally {
        client.close();
      }
    }),
  );
}

/** Waits until every member answers and all name the same leader; UNAVAILABLE with each member's state otherwise. */
async function waitForHealthy(e: EnsembleDescriptor, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const health = await ensembleHealth(e);
    const leaders = new Set(health.map((h) => h.leader));
    if (health.every((h) => h.healthy) && leaders.size === 1) return;
    const dead = e.members.find((m) => !isMemberRunning(m));
    if (Date.now() > deadline || dead)
      throw new HarvestError(
        "UNAVAILABLE",
        `the etcd ensemble in ${e.dir} is not healthy ${dead ? `(member ${dead.name} exited)` : `after ${timeoutMs} ms`}: ` +
          health.map((h) => `${h.name} ${h.healthy ? `leader ${h.leader}` : (h.error ?? "no leader")}`).join("; ") +
          (dead ? `\n${dead.log} ends with:\n${logTail(dead)}` : ""),
      );
    await sleep(200);
  }
}

/**
 * Runs `fn` with a certificate with CN root, issued now by the CA in `caDir` into a private temporary directory that
 * is removed afterwards: root's power exists only while the CA's holder uses it.
 */
export async function withRootCertificate<T>(caDir: string, fn: (root: TlsFiles) => Promise<T>): Promise<T> {
  const { caFiles, issueCertificate } = await import("./cluster-ca.js");
  const tmp = mkdtempSync(join(tmpdir(), "harvest-etcd-root-"));
  try {
    const root = await issueCertificate(caDir, tmp, { name: ETCD_ROOT_NAME, role: "daemon", hosts: ["localhost"] });
    return await fn({ ca: caFiles(caDir).cert, ...root });
  } finally {
    rmSync(tmp, { recursive: true, force: true });
  }
}

/** Runs `fn` with a client of `endpoints` as `tls`, closed afterwards. */
async function withClient<T>(endpoints: string[], tls: TlsFiles, fn: (client: Etcd3) => Promise<T>): Promise<T> {
  const client = await etcdClient(endpoints, tls, 5_000);
  try {
    return await fn(client);
  } finally {
    client.close();
  }
}

/**
 * Sets up the ensemble's auth once (a no-op on one already set up): user root with role root, role harvest-master
 * with readwrite on /harvest/, user harvest-master with it, then auth enable. Passwords are random and never kept:
 * every Harvest identity is its certificate.
 */
export async function setupEnsembleAuth(e: EnsembleDescriptor): Promise<void> {
  const { Range } = await import("etcd3");
  await withRootCertificate(e.caDir, (root) =>
    withClient(etcdEndpoints(e), root, async (client) => {
      // Every step is idempotent (etcd 3.4 has no AuthStatus): on a set-up ensemble, root's certificate still works
      // and each step finds its work done; auth enable on an enabled ensemble is a no-op.
      const password = (): string => randomBytes(24).toString("base64url");
      const users = new Set((await client.getUsers()).map((u) => u.name));
      const roles = new Set((await client.getRoles()).map((r) => r.name));
      if (!users.has(ETCD_ROOT_NAME)) await client.user(ETCD_ROOT_NAME).create(password());
      // etcd refuses auth enable unless root holds the root role.
      await client.user(ETCD_ROOT_NAME).addRole("root");
      if (!roles.has(ETCD_MASTER_NAME)) await client.role(ETCD_MASTER_NAME).create();
      await client.role(ETCD_MASTER_NAME).grant({ permission: "Readwrite", range: Range.prefix(HARVEST_KEY_PREFIX) });
      if (!users.has(ETCD_MASTER_NAME)) await client.user(ETCD_MASTER_NAME).create(password());
      await client.user(ETCD_MASTER_NAME).addRole(ETCD_MASTER_NAME);
      await client.auth.authEnable();
    }),
  );
}

/** Stops every running member (SIGTERM, SIGKILL after `graceMs`); returns how many ran. Data directories stay. */
export async function stopEnsemble(
  e: Pick<EnsembleDescriptor, "members">,
  graceMs = 5_000,
): Promise<{ stopped: number }> {
  const results = await Promise.all(e.members.map((m) => stopMember(m, graceMs)));
  return { stopped: results.filter(Boolean).length };
}

async function stopMember(m: EtcdMemberRecord, graceMs: number): Promise<boolean> {
  if (!m.pid || !isMemberRunning(m)) return false;
  const signal = (s: NodeJS.Signals): void => {
    try {
      process.kill(m.pid, s);
    } catch {
      // Gone already.
    }
  };
  signal("SIGTERM");
  const deadline = Date.now() + graceMs;
  while (isMemberRunning(m)) {
    if (Date.now() > deadline) signal("SIGKILL");
    await sleep(50);
  }
  return true;
}

function memberNamed(e: EnsembleDescriptor, name: string): EtcdMemberRecord {
  const m = e.members.find((x) => x.name === name);
  if (!m)
    throw new HarvestError(
      "INVALID_ARGUMENT",
      `no etcd member ${JSON.stringify(name)} in ${e.dir}; members: ${e.members.map((x) => x.name).join(", ")}`,
    );
  return m;
}

/**
 * Starts a stopped or dead member again on its own data directory and ports, and waits for a healthy ensemble.
 * DAEMON_ALREADY_RUNNING when it runs. Updates ensemble.json; the caller records the returned descriptor.
 */
export async function restartEtcdMember(
  e: EnsembleDescriptor,
  name: string,
  opts: Pick<EnsembleOptions, "etcdBinary" | "wrap" | "startTimeoutMs"> = {},
): Promise<EnsembleDescriptor> {
  const m = memberNamed(e, name);
  if (isMemberRunning(m))
    throw new HarvestError("DAEMON_ALREADY_RUNNING", `etcd member ${name} already runs (process ${m.pid})`);
  const bin = etcdBinary(opts.etcdBinary) ?? DEFAULT_ETCD_BINARY;
  Object.assign(m, spawnMember(e, m, "existing", bin, opts.wrap));
  writeEnsemble(e);
  await waitForHealthy(e, opts.startTimeoutMs ?? 30_000);
  return e;
}

/** Where a replacement member goes. */
export interface ReplacementOptions extends Pick<EnsembleOptions, "etcdBinary" | "wrap" | "startTimeoutMs" | "ports"> {
  /** The new member's name. @default etcd-<one more than the highest number in use> */
  name?: string;
  /** The host it serves on (its certificate must name it). @default the lost member's host */
  host?: string;
  /** Its data directory, which must not exist or be empty. @default <ensemble dir>/<name> */
  dataDir?: string;
}

/**
 * Replaces a lost member with a fresh one, as docs/ha.md tells an operator to: (1) with root (a transient certificate
 * from the CA), `member remove` the lost one, which must not be running; (2) `member add` the new one's peer URL;
 * (3) start it on an empty data directory with `--initial-cluster-state existing` and the current members in
 * `--initial-cluster`: it copies the ensemble's data from the leader; (4) wait until every member is healthy. The
 * quorum must hold throughout (two of three answering): membership changes go through raft.
 */
export async function replaceEtcdMember(
  e: EnsembleDescriptor,
  lost: string,
  opts: ReplacementOptions = {},
): Promise<EnsembleDescriptor> {
  const old = memberNamed(e, lost);
  if (isMemberRunning(old))
    throw new HarvestError(
      "DAEMON_ALREADY_RUNNING",
      `etcd member ${lost} still runs (process ${old.pid}): stop it before replacing it, or restart it if it is not lost`,
    );
  const bin = etcdBinary(opts.etcdBinary);
  if (!bin) throw new HarvestError("CONFIG_INVALID", `no etcd program (install etcd-server or set $HARVEST_ETCD)`);
  const highest = Math.max(0, ...e.members.map((m) => Number(/^etcd-(\d+)$/.exec(m.name)?.[1] ?? 0)));
  const name = opts.name ?? `etcd-${highest + 1}`;
  if (e.members.some((m) => m.name === name))
    throw new HarvestError("INVALID_ARGUMENT", `an etcd member named ${name} already exists in ${e.dir}`);
  const host = opts.host ?? old.host;
  const dataDir = resolve(opts.dataDir ?? join(e.dir, name));
  if (existsSync(dataDir) && readdirSync(dataDir).length > 0)
    throw new HarvestError(
      "INVALID_ARGUMENT",
      `${dataDir} is not empty: a replacement starts on an empty data directory and copies the ensemble's data`,
    );
  const fresh: EtcdMemberRecord = {
    name,
    host,
    pid: 0,
    clientUrl: `https://${urlHost(host)}:${opts.ports?.client ?? (await stablePort(host))}`,
    peerUrl: `https://${urlHost(host)}:${opts.ports?.peer ?? (await stablePort(host))}`,
    dataDir,
    log: join(e.dir, `${name}.log`),
  };
  const survivors = e.members.filter((m) => m !== old);
  const { GRPCUnavailableError } = await import("etcd3");
  await withRootCertificate(e.caDir, async (root) => {
    // etcd refuses a membership change (UNAVAILABLE, "unhealthy cluster") until its leader has been connected to a
    // quorum for 5 s, e.g. just after a member restarted: retried until the deadline, each time with a new client
    // (etcd3's circuit breaker would refuse calls after a few failures). Each step checks whether an earlier attempt
    // did it already.
    const deadline = Date.now() + (opts.startTimeoutMs ?? 60_000);
    for (;;) {
      try {
        return await withClient(etcdEndpoints({ members: survivors }), root, async (client) => {
          const { members = [] } = await client.cluster.memberList({});
          const gone = members.find((m) => m.name === old.name || m.peerURLs.includes(old.peerUrl));
          if (gone) await client.cluster.memberRemove({ ID: gone.ID });
          if (!members.some((m) => m.peerURLs.includes(fresh.peerUrl)))
            await client.cluster.memberAdd({ peerURLs: [fresh.peerUrl] });
        });
      } catch (err) {
        if (!(err instanceof GRPCUnavailableError) || Date.now() > deadline)
          throw new HarvestError("UNAVAILABLE", `could not replace etcd member ${lost}: ${errorMessage(err)}`, {
            cause: err,
          });
        await sleep(500);
      }
    }
  });
  e.members = [...survivors, fresh];
  writeEnsemble(e);
  Object.assign(fresh, spawnMember(e, fresh, "existing", bin, opts.wrap));
  writeEnsemble(e);
  await waitForHealthy(e, opts.startTimeoutMs ?? 60_000);
  return e;
}

function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}
