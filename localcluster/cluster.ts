/**
 * A local Harvest cluster: one resource manager and N node managers ("servers") as separate OS processes on loopback,
 * each server with its own primary tenant. `startCluster` writes a descriptor (`cluster.json`) into the cluster
 * directory that every other command reads; `stopCluster` stops exactly the processes it started.
 */
import { spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { chmodSync, existsSync, mkdirSync, openSync, closeSync, readFileSync, rmSync } from "node:fs";
import { homedir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { killContainerLeftovers as killRecordedContainers, processStartTime } from "../common/container-leftovers.js";
import { writeFileAtomic } from "../common/atomic-file.js";
import { errorMessage, HarvestError } from "../common/errors.js";
import { assertCanEnter, leasedAccountName, lookupAccount } from "../nodemanager/run-as.js";
import { DEFAULT_UID_RANGE, parseUidRange } from "../nodemanager/uid-leases.js";
import { DEFAULT_LOG_GROUP } from "../common/container-logs.js";
import { clusterCgroupKey, containerCgroupName } from "../nodemanager/cgroups.js";
import { distEntry } from "../common/paths.js";
import { EVENTS_DIR_VARIABLE, EVENTS_FILE_NAME, readEvents } from "../common/events.js";
import type { EventsRead } from "../common/events.js";
import type * as CaModule from "./cluster-ca.js";
import {
  haCoordinationOf,
  isMemberRunning,
  readEnsemble,
  restartEtcdMember,
  startEnsemble,
  stopEnsemble,
} from "./etcd-ensemble.js";
import type { EnsembleDescriptor, EtcdMemberRecord } from "./etcd-ensemble.js";
import { DfsClient } from "../client/dfs-client.js";
import type { DfsClientOptions } from "../client/dfs-client.js";
import { JobClient } from "../client/job-client.js";
import type { DaemonKind } from "./daemon-kinds.js";
import { daemonEnvironment } from "./malloc-tunables.js";
import { daemonNodeOptions } from "./node-options.js";
import { stablePort } from "./ports.js";
import { localUserName } from "../common/fs-permission.js";
import type { ClientSecurity } from "../common/grpc.js";

/** One daemon process of a cluster. */
export interface DaemonRecord {
  /** Its name in the cluster: "rm", "nn", "server-N" (node manager), "server-N-dn" (datanode). */
  name?: string;
  /** Which daemon runs (absent in descriptors written before `harvest daemon`). */
  kind?: DaemonKind;
  pid: number;
  /** The process's start time (/proc/<pid>/stat field 22), so that a reused pid is never taken for it. */
  startTime?: string;
  address: string;
  /** Base URL of its web server (UI, REST API, /metrics); absent for daemons that serve none or older descriptors. */
  httpUrl?: string;
  dataDir: string;
  log: string;
  /** The program it runs (the `harvest` CLI, or a daemon's main.js in old descriptors). */
  entry: string;
  /** Its options file, `<dir>/run/<name>.json`; the port it first bound is pinned there, so a restart keeps it. */
  config?: string;
}

/** A node manager of a cluster and its primary tenant. */
export interface NodeRecord extends DaemonRecord {
  nodeId: string;
  primary: string;
  /** The server's datanode (absent without storage). */
  datanode?: DaemonRecord;
}

/** The cluster descriptor written to `<dir>/cluster.json`. */
export interface ClusterDescriptor {
  version: 1;
  dir: string;
  createdMs: number;
  rm: DaemonRecord;
  /** Absent in descriptors written before the storage layer. */
  nn?: DaemonRecord;
  /** `--ha`: the second resource manager and namenode (each pair elects its active one in `etcd`). */
  rm2?: DaemonRecord;
  nn2?: DaemonRecord;
  nodes: NodeRecord[];
  /**
   * The local admin's TLS files (the cluster CA's certificate, the admin's certificate and key), which the CLI
   * presents to this cluster; absent for a cluster started `--insecure` (and in descriptors written before TLS).
   */
  security?: { ca: string; cert: string; key: string };
  /**
   * The coordination service's etcd ensemble (`cluster up --ha`): its members' processes, URLs and data directories,
   * and the masters' certificate for it. Absent without --ha.
   */
  etcd?: EnsembleDescriptor;
}

/** How to bring a cluster up. */
export interface ClusterUpOptions {
  dir: string;
  /** Primary-tenant spec per server ("proc", "trace:<file>", "burn:<file>"); its length is the server count. */
  primaries: string[];
  /** Trace replay speed. @default 1 */
  speed: number;
  /** Offset into each server's trace (ms of trace time); defaults to spreading servers apart. */
  offsetsMs?: number[];
  /** Per-server capacity. @default 4 vcores, 4096 MB */
  vcores: number;
  memoryMb: number;
  /** Extra resource manager options (JSON-able). */
  rm?: Record<string, unknown>;
  /** Extra node manager options (JSON-able). */
  nm?: Record<string, unknown>;
  /** Start the storage layer too: a namenode and one datanode per server. @default true */
  storage?: boolean;
  /** Extra namenode options (JSON-able). */
  nn?: Record<string, unknown>;
  /** Extra datanode options (JSON-able). */
  dn?: Record<string, unknown>;
  /** How long to wait for each daemon. @default 20000 */
  startTimeoutMs: number;
  /**
   * Plaintext and no authentication (a throwaway cluster; the daemons log that they are insecure). By default the
   * cluster gets its own CA in `<dir>/security`, a certificate per daemon and one for the local admin. @default false
   */
  insecure?: boolean;
  /**
   * Start the coordination service for highly available masters too: a three-member etcd ensemble on loopback in
   * `<dir>/etcd`, under the cluster CA (localcluster/etcd-ensemble.ts). Needs TLS. @default false
   */
  ha?: boolean;
}

/** Where root's local cluster lives by default: a system daemon's state, outside root's home. */
export const ROOT_CLUSTER_DIR = "/var/lib/harvest/cluster";

/**
 * The cluster directory: --dir, else $HARVEST_CLUSTER_DIR, else ~/.harvest/cluster, or for root /var/lib/harvest/cluster:
 * root's containers run as unprivileged accounts, which must pass through the cluster directory to their own, and
 * root's home is usually mode 700.
 */
export function resolveClusterDir(dir?: string): string {
  const fallback = process.getuid?.() === 0 ? ROOT_CLUSTER_DIR : join(homedir(), ".harvest", "cluster");
  return resolve(dir ?? process.env["HARVEST_CLUSTER_DIR"] ?? fallback);
}

/** Reads the descriptor, or fails with CLUSTER_NOT_FOUND saying what to do. */
export function readCluster(dir: string): ClusterDescriptor {
  const file = join(dir, "cluster.json");
  if (!existsSync(file)) {
    throw new HarvestError(
      "CLUSTER_NOT_FOUND",
      `no cluster in ${dir}: start one with 'harvest cluster up --dir ${dir}' or pass the --dir it was started with`,
    );
  }
  return JSON.parse(readFileSync(file, "utf8")) as ClusterDescriptor;
}

/**
 * True when `pid` is alive and is the process we started: its command line names `marker` (a daemon's config file, or
 * its entry in old descriptors) and, when recorded, its start time matches, so a reused pid is never mistaken for ours.
 */
export function isOurProcess(pid: number, marker: string, startTime?: string): boolean {
  try {
    if (startTime !== undefined && processStartTime(pid) !== startTime) return false;
    const cmdline = readFileSync(`/proc/${pid}/cmdline`, "utf8");
    return cmdline.split("\0").some((arg) => arg.includes(marker));
  } catch {
    return false;
  }
}

/** True when the daemon a record names is running. */
export function isRunning(d: DaemonRecord): boolean {
  return isOurProcess(d.pid, d.config ?? d.entry, d.startTime);
}

/** Starts a cluster and resolves to its descriptor once every node has registered with the resource manager. */
export async function startCluster(opts: ClusterUpOptions): Promise<ClusterDescriptor> {
  const dir = resolve(opts.dir);
  if (opts.ha && opts.insecure)
    throw new HarvestError(
      "CONFIG_INVALID",
      "--ha needs TLS: only the masters' certificate may use the coordination service's keys; drop --insecure",
      { details: { field: "insecure" } },
    );
  if (existsSync(join(dir, "cluster.json"))) {
    const existing = readCluster(dir);
    if (allDaemons(existing).some(isRunning)) {
      throw new HarvestError(
        "CLUSTER_ALREADY_RUNNING",
        `a cluster is already running in ${dir}; stop it with 'harvest cluster down --dir ${dir}' or use another --dir`,
      );
    }
  }
  // Node managers running as root start containers as unprivileged accounts, which must get through the cluster
  // directory to the job staging and container work directories below it, and read the cluster CA's certificate in
  // security/ (where every key is 0600); the daemons' configs (the cluster secret) and logs stay the launcher's.
  const asRoot = process.getuid?.() === 0;
  mkdirSync(dir, { recursive: true });
  if (asRoot) {
    // Harvest's own /var/lib/harvest, as a node manager of an older harvest made it (closed to all but root).
    if (resolve(dir) === ROOT_CLUSTER_DIR) chmodSync(dirname(ROOT_CLUSTER_DIR), 0o755);
    chmodSync(dir, 0o755);
    checkContainersCanEnter(dir, opts.nm ?? {});
  }
  for (const own of ["logs", "run"]) {
    mkdirSync(join(dir, own), { recursive: true, mode: 0o700 });
    chmodSync(join(dir, own), 0o700);
  }
  const secret = randomBytes(16).toString("hex");
  const started: DaemonRecord[] = [];
  const withStorage = opts.storage ?? true;
  const serverNames = opts.primaries.map((_, i) => `server-${i + 1}`);
  const masterNames = (name: string): string[] => (opts.ha ? [name, `${name}2`] : [name]);
  const daemonNames = [
    ...masterNames("rm"),
    ...(withStorage ? masterNames("nn") : []),
    ...serverNames.flatMap((n) => [n, `${n}-dn`]),
  ];
  // Daemons serve on loopback; the admin is whoever started the cluster. Searchable, so containers read the CA's
  // certificate (every key in it is 0600).
  let security: Awaited<ReturnType<typeof CaModule.issueClusterCertificates>> | undefined;
  if (!opts.insecure) {
    // X.509 is a large import, loaded only where certificates are made: every `harvest` command and daemon loads
    // this module.
    const { issueClusterCertificates } = await import("./cluster-ca.js");
    security = await issueClusterCertificates(join(dir, "security"), {
      caName: `Harvest local cluster CA (${dir})`,
      daemons: Object.fromEntries(daemonNames.map((n) => [n, ["127.0.0.1", "localhost"]])),
      admin: localUserName(),
      dirMode: 0o755,
    });
  }
  if (security && asRoot) chmodSync(join(dir, "security"), 0o711);
  // Every daemon binds and advertises loopback: this is the one place that assumes a single machine.
  const loopback = { host: "127.0.0.1", advertiseHost: "127.0.0.1", port: 0 };
  const localFor = (name: string): Record<string, unknown> => ({
    ...loopback,
    ...(security ? { tls: security.daemons[name] } : { insecure: true }),
  });
  const admin = security?.admin;
  let etcd: EnsembleDescriptor | undefined;
  try {
    if (opts.ha) {
      // Before the masters, which will need it. A stopped cluster's ensemble starts again on its own data.
      etcd = await startEnsemble({ dir: join(dir, "etcd"), caDir: join(dir, "security") });
    }
    // The resource manager first (the namenode reads tenants from it), then the namenode, then every server's daemons
    // (in parallel). The resource manager cancels jobs' delegation tokens at the namenode: the masters' ports are
    // chosen before any starts. With --ha each master is a pair electing its active one in the ensemble; everyone
    // else is given both addresses and follows the active (common/failover.ts).
    const ports = async (name: string, given: unknown): Promise<number[]> =>
      Promise.all(masterNames(name).map(async (_, i) => (i === 0 && Number(given)) || (await stablePort())));
    const rmPorts = await ports("rm", opts.rm?.["port"]);
    const nnPorts = withStorage ? await ports("nn", opts.nn?.["port"]) : [];
    const list = (p: number[]): string => p.map((port) => `${loopback.advertiseHost}:${port}`).join(",");
    const rmList = list(rmPorts);
    const nnList = list(nnPorts);
    // Each master of a kind: its own name, data directory and port (the given port is the first one's).
    const launchMasters = (
      kind: string,
      entry: DaemonKind,
      ports: number[],
      own: (name: string) => Record<string, unknown>,
      given: Record<string, unknown> | undefined,
    ): Promise<DaemonRecord[]> =>
      Promise.all(
        masterNames(kind).map((name, i) =>
          launchDaemon(
            dir,
            name,
            entry,
            {
              ...localFor(name),
              port: ports[i],
              dataDir: join(dir, name),
              ...(etcd ? { haCoordination: { ...haCoordinationOf(etcd), clusterId: "local" } } : {}),
              ...own(name),
              ...given,
              ...(i > 0 ? { port: ports[i] } : {}),
            },
            opts.startTimeoutMs,
          ),
        ),
      );
    const rms = await launchMasters(
      "rm",
      "resourcemanager",
      rmPorts,
      () => ({
        secret,
        // A local cluster's few cores would run one job manager at a time under the default share (0.1 of the
        // harvestable cores, sized for a fleet): it runs them all, as YARN users raise the limit on small clusters.
        maxAmShare: 1,
        ...(etcd ? { haRmAddresses: rmList } : {}),
        ...(withStorage ? { nnAddress: nnList } : {}),
      }),
      opts.rm,
    );
    started.push(...rms);
    const rm = rms[0]!;
    const nns = withStorage
      ? await launchMasters(
          "nn",
          "namenode",
          nnPorts,
          (name) => ({
            rmAddress: rmList,
            // The resource managers' certificates read and expire the containers' kept logs (common/container-logs.ts).
            userGroups: Object.fromEntries(masterNames("rm").map((n) => [n, [DEFAULT_LOG_GROUP]])),
            ...(etcd ? { haId: name } : {}),
          }),
          opts.nn,
        )
      : [];
    started.push(...nns);
    const nn = nns[0];
    const nodes = await Promise.all(
      opts.primaries.map(async (primary, i): Promise<NodeRecord> => {
        const nodeId = `server-${i + 1}`;
        const rack = `/rack-${(i % 2) + 1}`;
        const primaryOffsetMs = opts.offsetsMs?.[i] ?? i * 3_600_000;
        // A server's datanode watches the same primary tenant as its node manager.
        const shared = { rack, primary, primarySpeed: opts.speed, primaryOffsetMs };
        // Containers' cgroups keyed by this cluster too: another cluster on this host has a server-1 as well.
        const cgroupCluster = clusterCgroupKey(dir);
        const nmConfig = {
          ...localFor(nodeId),
          nodeId,
          rmAddress: rmList,
          nnAddress: nnList,
          dataDir: join(dir, "nodes", nodeId),
          capacity: { vcoresMilli: Math.round(opts.vcores * 1000), memoryMb: opts.memoryMb },
          secret,
          cgroupCluster,
          ...shared,
          ...opts.nm,
        };
        const [nm, dn] = await Promise.all([
          launchDaemon(dir, nodeId, "nodemanager", nmConfig, opts.startTimeoutMs),
          nn
            ? launchDaemon(
                dir,
                `${nodeId}-dn`,
                "datanode",
                {
                  ...localFor(`${nodeId}-dn`),
                  datanodeId: nodeId,
                  namenodeAddress: nnList,
                  dataDir: join(dir, "datanodes", nodeId),
                  secondaryCgroup: containerCgroupName({ nodeId, cgroupCluster }),
                  ...shared,
                  ...opts.dn,
                },
                opts.startTimeoutMs,
              )
            : undefined,
        ]);
        started.push(nm);
        if (dn) started.push(dn);
        return { ...nm, nodeId, primary, ...(dn ? { datanode: dn } : {}) };
      }),
    );
    const descriptor: ClusterDescriptor = {
      version: 1,
      dir,
      createdMs: Date.now(),
      rm,
      ...(nn ? { nn } : {}),
      ...(rms[1] ? { rm2: rms[1] } : {}),
      ...(nns[1] ? { nn2: nns[1] } : {}),
      nodes,
      ...(admin ? { security: admin } : {}),
      ...(etcd ? { etcd } : {}),
    };
    writeDescriptor(descriptor);
    // The cluster is also a client configuration: `harvest --config <dir>/client.json` works like `--dir <dir>`.
    writeAtomic(
      join(dir, "client.json"),
      JSON.stringify({ rmAddress: rmList, ...(nn ? { nnAddress: nnList } : {}), ...admin }, null, 2) + "\n",
    );
    await waitForNodes(rmList, nodes.length, opts.startTimeoutMs, admin);
    if (nn) await waitForDatanodes(nnList, nodes.length, opts.startTimeoutMs, admin);
    return descriptor;
  } catch (err) {
    for (const d of started.reverse()) await stopProcess(d, 3_000);
    if (etcd) await stopEnsemble(etcd);
    throw err;
  }
}

/** A job client of a local cluster, as the admin who started it (plaintext when it runs insecure). */
export function localJobClient(c: ClusterDescriptor): JobClient {
  return new JobClient(rmAddressesOf(c), {
    ...(c.security ? { security: c.security } : {}),
    nnAddress: nnAddressesOf(c),
  });
}

/** A file-system client of a local cluster, as the admin who started it (plaintext when it runs insecure). */
export function localDfsClient(c: ClusterDescriptor, options: Partial<DfsClientOptions> = {}): DfsClient {
  if (!c.nn) throw new HarvestError("CLUSTER_NOT_FOUND", `the cluster in ${c.dir} runs no namenode`);
  return new DfsClient(nnAddressesOf(c), { ...(c.security ? { security: c.security } : {}), ...options });
}

/** The resource managers' addresses, comma-separated (two with --ha): what clients are given. */
export function rmAddressesOf(c: ClusterDescriptor): string {
  return [c.rm, c.rm2].flatMap((d) => (d ? [d.address] : [])).join(",");
}

/** The namenodes' addresses, comma-separated ("" without the storage layer). */
export function nnAddressesOf(c: ClusterDescriptor): string {
  return [c.nn, c.nn2].flatMap((d) => (d ? [d.address] : [])).join(",");
}

/**
 * Fails before anything starts when the account containers run as cannot get into the cluster directory (say, one
 * under root's 0700 home), rather than every job failing at its first launch.
 */
function checkContainersCanEnter(dir: string, nm: Record<string, unknown>): void {
  // An account of the application's own is in no group: it gets through by the "other" bits, as the range's last uid.
  const fixed = nm["containerRunAs"] === "fixed";
  const uid = parseUidRange(String(nm["containerUidRange"] ?? DEFAULT_UID_RANGE)).max;
  const account = fixed
    ? lookupAccount(String(nm["containerUser"] ?? "nobody"))
    : { name: leasedAccountName(uid), uid, gid: uid, home: "" };
  if (!account) return; // The node managers name it at start.
  try {
    assertCanEnter(dir, account, "the cluster directory");
  } catch (err) {
    throw new HarvestError(
      "CONFIG_INVALID",
      `${errorMessage(err)}; start the cluster in a directory every account can pass through, e.g. --dir /var/tmp/harvest`,
    );
  }
}

/** The typed events the daemons of the cluster in `dir` have appended (common/events.ts), in file order. */
export function readClusterEvents(dir: string): EventsRead {
  return readEvents(join(dir, "logs", EVENTS_FILE_NAME));
}

/** Every daemon a descriptor names: the masters, then each server's node manager and datanode. */
export function allDaemons(c: ClusterDescriptor): DaemonRecord[] {
  return [
    { ...c.rm, name: c.rm.name ?? "rm" },
    ...(c.rm2 ? [{ ...c.rm2, name: c.rm2.name ?? "rm2" }] : []),
    ...(c.nn ? [{ ...c.nn, name: c.nn.name ?? "nn" }] : []),
    ...(c.nn2 ? [{ ...c.nn2, name: c.nn2.name ?? "nn2" }] : []),
    ...c.nodes.flatMap((n) => [
      { ...n, name: n.name ?? n.nodeId },
      ...(n.datanode ? [{ ...n.datanode, name: n.datanode.name ?? `${n.nodeId}-dn` }] : []),
    ]),
  ];
}

/** Writes a file whole or not at all, readable by its owner only (daemon configs hold the cluster's secret). */
function writeAtomic(file: string, text: string): void {
  writeFileAtomic(file, text, 0o600);
}

function writeDescriptor(c: ClusterDescriptor): void {
  writeAtomic(join(c.dir, "cluster.json"), JSON.stringify(c, null, 2) + "\n");
}

/**
 * Starts `harvest daemon <kind>` on `<dir>/run/<name>.json` and waits for its ready file.
 */
async function launchDaemon(
  dir: string,
  name: string,
  kind: DaemonKind,
  config: Record<string, unknown>,
  timeoutMs: number,
): Promise<DaemonRecord> {
  const configFile = join(dir, "run", `${name}.json`);
  const given = config;
  // Ports below the kernel's ephemeral range (ports.ts): a restart must find them free. A drawn port is free when it
  // is drawn, not when the daemon binds it a second later: another cluster starting beside this one (tests run
  // several at once) may draw it in between. A daemon that lost that race is started again on new ports. The ports
  // are in its config file, so a restart binds the same ones.
  for (let attempt = 1; ; attempt++) {
    config = { ...given };
    if (!config["port"]) config = { ...config, port: await stablePort() };
    if (!config["httpPort"]) config = { ...config, httpPort: await stablePort() };
    writeAtomic(configFile, JSON.stringify(config, null, 2) + "\n");
    try {
      return await spawnDaemon(dir, name, kind, configFile, timeoutMs);
    } catch (err) {
      const message = errorMessage(err);
      const drawn = (["port", "httpPort"] as const).filter((k) => !given[k]).map((k) => `:${String(config[k])}`);
      const lostRace = message.includes("EADDRINUSE") && drawn.some((p) => message.includes(p));
      if (!lostRace || attempt >= 3) throw err;
    }
  }
}

async function spawnDaemon(
  dir: string,
  name: string,
  kind: DaemonKind,
  configFile: string,
  timeoutMs: number,
): Promise<DaemonRecord> {
  const readyFile = join(dir, "run", `${name}.ready`);
  const log = join(dir, "logs", `${name}.log`);
  const entry = distEntry("cli/harvest.js");
  rmSync(readyFile, { force: true });
  const fd = openSync(log, "a");
  // HARVEST_DAEMON_CPU_PROF=<dir>: every daemon writes a V8 CPU profile there when it exits (DEVELOPERS.md).
  const profileDir = process.env["HARVEST_DAEMON_CPU_PROF"];
  const nodeArgs = [
    ...daemonNodeOptions(kind),
    ...(profileDir ? ["--cpu-prof", `--cpu-prof-dir=${profileDir}`, `--cpu-prof-name=${name}.cpuprofile`] : []),
  ];
  const args = [...nodeArgs, entry, "daemon", kind, "--config", configFile, "--ready-file", readyFile];
  const child = spawn(process.execPath, args, {
    detached: true,
    stdio: ["ignore", fd, fd],
    // Every daemon of the cluster appends its typed events (common/events.ts) to logs/events.jsonl.
    env: { ...daemonEnvironment(kind), [EVENTS_DIR_VARIABLE]: join(dir, "logs") },
  });
  closeSync(fd);
  child.unref();
  let exitCode: number | null = null;
  child.once("exit", (code) => (exitCode = code ?? -1));
  const startTime = child.pid ? processStartTime(child.pid) : undefined;
  const deadline = Date.now() + timeoutMs;
  while (!existsSync(readyFile)) {
    if (exitCode !== null || Date.now() > deadline) {
      if (exitCode === null && child.pid)
        await stopProcess({ pid: child.pid, entry, config: configFile, address: "", dataDir: "", log }, 1_000);
      const tail = existsSync(log) ? readFileSync(log, "utf8").split("\n").slice(-8).join("\n") : "";
      throw new HarvestError(
        "UNAVAILABLE",
        `${name} did not start (${exitCode !== null ? `exited with ${exitCode}` : "timed out"}); its log ${log} ends with:\n${tail}`,
      );
    }
    await sleep(50);
  }
  const ready = JSON.parse(readFileSync(readyFile, "utf8")) as { address: string; pid: number; httpUrl?: string };
  const dataDir = (JSON.parse(readFileSync(configFile, "utf8")) as { dataDir: string }).dataDir;
  return {
    name,
    kind,
    pid: ready.pid,
    ...(startTime ? { startTime } : {}),
    address: ready.address,
    ...(ready.httpUrl ? { httpUrl: ready.httpUrl } : {}),
    dataDir,
    log,
    entry,
    config: configFile,
  };
}

/** The daemons of a local cluster with whether each runs, then its etcd members (`--ha`). */
export function clusterDaemons(dir: string): (DaemonRecord & { name: string; running: boolean })[] {
  const c = readCluster(dir);
  const etcd = c.etcd ? (readEnsemble(c.etcd.dir) ?? c.etcd) : undefined;
  return [
    ...allDaemons(c).map((d) => ({ ...d, name: d.name ?? "?", running: isRunning(d) })),
    ...(etcd?.members ?? []).map((m) => ({ ...etcdMemberDaemon(m), name: m.name, running: isMemberRunning(m) })),
  ];
}

/** An etcd member as the daemon lists show it (no kind: it is not a Harvest daemon). */
function etcdMemberDaemon(m: EtcdMemberRecord): DaemonRecord {
  return { name: m.name, pid: m.pid, address: m.clientUrl, dataDir: m.dataDir, log: m.log, entry: "etcd" };
}

/**
 * Starts stopped or dead daemons of a local cluster again, each on its own data directory and config (so on the same
 * address): `target` is "rm", "nn", "server-N" (its node manager and datanode, whichever are down), "server-N-nm" or
 * "server-N-dn". Fails with DAEMON_ALREADY_RUNNING when everything it names runs. The new processes are recorded in
 * cluster.json, so `cluster down` stops them.
 */
export async function restartDaemon(
  dir: string,
  target: string,
  timeoutMs = 20_000,
): Promise<{ restarted: DaemonRecord[]; running: string[] }> {
  const c = readCluster(dir);
  const etcd = c.etcd ? (readEnsemble(c.etcd.dir) ?? c.etcd) : undefined;
  if (etcd?.members.some((m) => m.name === target)) {
    const fresh = await restartEtcdMember(etcd, target, { startTimeoutMs: timeoutMs });
    writeDescriptor({ ...readCluster(dir), etcd: fresh });
    return { restarted: fresh.members.filter((m) => m.name === target).map(etcdMemberDaemon), running: [] };
  }
  const aliases: Record<string, string> = { resourcemanager: "rm", namenode: "nn" };
  const want = aliases[target] ?? target;
  const named = allDaemons(c).filter((d) => {
    if (d.name === want) return true;
    if (want.endsWith("-nm")) return d.name === want.slice(0, -3);
    return want.startsWith("server-") && d.name === `${want}-dn`;
  });
  if (named.length === 0)
    throw new HarvestError(
      "INVALID_ARGUMENT",
      `no daemon ${JSON.stringify(target)} in ${dir}; daemons: ${[...allDaemons(c), ...(etcd?.members ?? [])]
        .map((d) => d.name)
        .join(", ")} (server-N restarts both of a server's daemons, server-N-nm only its node manager)`,
    );
  // A daemon killed a moment ago may still be exiting (a SIGKILL is not instant for a large process): wait a little.
  const deadline = Date.now() + 3_000;
  let down = named.filter((d) => !isRunning(d));
  while (down.length === 0 && Date.now() < deadline) {
    await new Promise((r) => setTimeout(r, 50));
    down = named.filter((d) => !isRunning(d));
  }
  if (down.length === 0)
    throw new HarvestError(
      "DAEMON_ALREADY_RUNNING",
      `${named.map((d) => `${d.name} (process ${d.pid})`).join(" and ")} already running; stop a daemon before restarting it`,
    );
  const restarted: DaemonRecord[] = [];
  for (const d of down) {
    if (!d.config || !d.kind)
      throw new HarvestError(
        "CLUSTER_NOT_FOUND",
        `${d.name} was started by an older harvest that recorded no config; restart the whole cluster`,
      );
    // A dead node manager's containers may still run: they are lost with it (the node manager also checks at start).
    if (d.kind === "nodemanager") killRecordedContainers(d.dataDir);
    const fresh = await spawnDaemon(dir, d.name!, d.kind, d.config, timeoutMs);
    if (fresh.address !== d.address)
      throw new HarvestError(
        "INTERNAL",
        `${d.name} came back on ${fresh.address}, not ${d.address}: its config ${d.config} does not pin its port`,
      );
    restarted.push(fresh);
    // Record it at once, so that `cluster down` stops it even if a later restart in this call fails.
    const now = readCluster(dir);
    if (d.name === "rm") now.rm = { ...now.rm, ...fresh };
    else if (d.name === "rm2" && now.rm2) now.rm2 = { ...now.rm2, ...fresh };
    else if (d.name === "nn" && now.nn) now.nn = { ...now.nn, ...fresh };
    else if (d.name === "nn2" && now.nn2) now.nn2 = { ...now.nn2, ...fresh };
    else
      for (const n of now.nodes) {
        if (n.nodeId === d.name) Object.assign(n, fresh);
        else if (n.datanode && `${n.nodeId}-dn` === d.name) n.datanode = { ...n.datanode, ...fresh };
      }
    writeDescriptor(now);
  }
  return { restarted, running: named.filter((d) => !down.includes(d)).map((d) => d.name!) };
}

/**
 * Polls `poll` every 100 ms until it says the cluster has registered `count` of something; after `timeoutMs`, throws
 * UNAVAILABLE with the message of its last answer. Closes `client` either way.
 */
async function waitForRegistered<C extends { close(): void }>(
  client: C,
  timeoutMs: number,
  poll: (client: C) => Promise<{ enough: boolean; shortfall: string }>,
): Promise<void> {
  try {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const { enough, shortfall } = await poll(client);
      if (enough) return;
      if (Date.now() > deadline) throw new HarvestError("UNAVAILABLE", shortfall);
      await sleep(100);
    }
  } finally {
    client.close();
  }
}

async function waitForNodes(
  rmAddress: string,
  count: number,
  timeoutMs: number,
  security?: ClientSecurity,
): Promise<void> {
  await waitForRegistered(new JobClient(rmAddress, security ? { security } : {}), timeoutMs, async (client) => {
    const nodes = await client.nodes();
    return {
      enough: nodes.filter((n) => n.state === "RUNNING").length >= count,
      shortfall: `only ${nodes.length} of ${count} node managers registered in time`,
    };
  });
}

async function waitForDatanodes(
  nnAddress: string,
  count: number,
  timeoutMs: number,
  security?: ClientSecurity,
): Promise<void> {
  await waitForRegistered(new DfsClient(nnAddress, security ? { security } : {}), timeoutMs, async (client) => {
    const live = (await client.datanodes()).filter((d) => d.state === "LIVE").length;
    return { enough: live >= count, shortfall: `only ${live} of ${count} datanodes registered in time` };
  });
}

/** Stops a daemon we started: SIGTERM, then SIGKILL after `graceMs`. Returns whether it was running. */
export async function stopProcess(d: DaemonRecord, graceMs: number): Promise<boolean> {
  if (!isRunning(d)) return false;
  try {
    process.kill(d.pid, "SIGTERM");
  } catch {
    return false;
  }
  const deadline = Date.now() + graceMs;
  while (Date.now() < deadline) {
    if (!isRunning(d)) return true;
    await sleep(50);
  }
  try {
    process.kill(d.pid, "SIGKILL");
  } catch {
    // Exited just now.
  }
  return true;
}

/** Stops every daemon the descriptor names and any container processes they left; returns how many daemons ran. */
export async function stopCluster(dir: string): Promise<{ stopped: number }> {
  const c = readCluster(dir);
  let stopped = 0;
  // Servers first (in parallel), then the masters, so nothing reports to a master that is already gone.
  const servers = c.nodes.flatMap((n) => [n, ...(n.datanode ? [n.datanode] : [])]);
  const masters = [c.nn, c.nn2, c.rm, c.rm2].filter((d): d is DaemonRecord => d !== undefined);
  for (const group of [servers, masters]) {
    const results = await Promise.all(group.map((d) => stopProcess(d, 5_000)));
    stopped += results.filter(Boolean).length;
  }
  if (c.etcd) {
    // Last: the masters may use it until they stop. ensemble.json is the freshest record (a replaced member).
    stopped += (await stopEnsemble(readEnsemble(c.etcd.dir) ?? c.etcd)).stopped;
  }
  for (const n of c.nodes) killContainerLeftovers(n.dataDir);
  rmSync(join(dir, "cluster.json"), { force: true });
  return { stopped };
}

/**
 * Kills the container processes a node manager recorded under its data directory (after the node manager was killed):
 * only those proven its own, by their cgroup or by pid and start time.
 */
export function killContainerLeftovers(nmDataDir: string): void {
  killRecordedContainers(nmDataDir);
}

function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}
