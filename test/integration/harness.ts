/**
 * Test harness: real clusters of separate processes (resource manager, node managers, job managers, tasks) on loopback,
 * through the same launcher `harvest cluster up` uses, in a temporary directory that is removed afterwards.
 */
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll } from "vitest";
import { waitFor } from "../wait-for.js";
import type { DfsClient, DfsClientOptions } from "../../client/dfs-client.js";
import { JobClient } from "../../client/job-client.js";
import type { JobReport } from "../../client/job-client.js";
import { Logger } from "../../common/log.js";
import { StepPrimaryMonitor } from "../../common/step-monitor.js";
import type { PrimaryMonitor } from "../../common/primary-monitor.js";
import { DataNode } from "../../datanode/index.js";
import type { DataNodeOptionsInput } from "../../datanode/index.js";
import { distEntry } from "../../common/paths.js";
import { NameNode } from "../../namenode/index.js";
import type { NameNodeOptions } from "../../namenode/index.js";
import { NodeManager } from "../../nodemanager/node-manager.js";
import type { NodeManagerOptions } from "../../nodemanager/options.js";
import { ResourceManager } from "../../resourcemanager/resource-manager.js";
import type { ResourceManagerOptions } from "../../resourcemanager/options.js";
import { localDfsClient, localJobClient, startCluster, stopCluster } from "../../localcluster/cluster.js";
import type { ClusterDescriptor } from "../../localcluster/cluster.js";

/** A running test cluster. */
export interface TestCluster {
  dir: string;
  desc: ClusterDescriptor;
  client: JobClient;
  /** A directory for the test's own files (local copies, certificates), removed with the cluster. */
  work: string;
  /** A new DFS client of this cluster (its security unless `options` name other), closed by `stop()`. */
  dfs(options?: Partial<DfsClientOptions>): DfsClient;
  stop(): Promise<void>;
}

/** Fails fast with a clear message when the build is missing (npm test builds first). */
export function requireBuild(): void {
  if (!existsSync(distEntry("resourcemanager/main.js")))
    throw new Error("dist/ is missing: run 'npm run build' (npm test does it)");
}

/** What `startTestCluster` starts: the servers' primary tenants and each daemon's options. */
export interface TestClusterOptions {
  primaries?: string[];
  idleServers?: number;
  speed?: number;
  offsetsMs?: number[];
  vcores?: number;
  rm?: Record<string, unknown>;
  nm?: Record<string, unknown>;
  nn?: Record<string, unknown>;
  dn?: Record<string, unknown>;
  storage?: boolean;
  /** Plaintext, no authentication (`harvest cluster up --insecure`). @default false: secure */
  insecure?: boolean;
  /** Highly available masters over an etcd ensemble (`harvest cluster up --ha`; needs TLS). @default false */
  ha?: boolean;
}

/**
 * Starts a test cluster before the tests of the enclosing `describe` and stops it after them; the function returned
 * gives that cluster inside a test or a later hook.
 */
export function suiteCluster(opts: TestClusterOptions): () => TestCluster {
  let c: TestCluster | undefined;
  beforeAll(async () => {
    c = await startTestCluster(opts);
  });
  afterAll(() => c?.stop());
  return () => {
    if (!c) throw new Error("the suite's cluster did not start");
    return c;
  };
}

/** Starts a cluster with one server per primary spec, or `idleServers` servers whose primary tenants stay idle. */
export async function startTestCluster(opts: TestClusterOptions): Promise<TestCluster> {
  requireBuild();
  const dir = mkdtempSync(join(tmpdir(), "harvest-it-"));
  const work = join(dir, "work");
  mkdirSync(work);
  const primaries = opts.primaries ?? Array<string>(opts.idleServers ?? 0).fill(idleTraceSpec(work));
  const desc = await startCluster({
    dir,
    primaries,
    speed: opts.speed ?? 1,
    offsetsMs: opts.offsetsMs ?? primaries.map(() => 0),
    vcores: opts.vcores ?? 4,
    memoryMb: 4096,
    startTimeoutMs: 30_000,
    ...(opts.rm ? { rm: opts.rm } : {}),
    ...(opts.nm ? { nm: opts.nm } : {}),
    ...(opts.nn ? { nn: opts.nn } : {}),
    ...(opts.dn ? { dn: opts.dn } : {}),
    ...(opts.storage !== undefined ? { storage: opts.storage } : {}),
    ...(opts.insecure ? { insecure: true } : {}),
    ...(opts.ha ? { ha: true } : {}),
  });
  const client = localJobClient(desc);
  const dfsClients: DfsClient[] = [];
  return {
    dir,
    desc,
    client,
    work,
    dfs(options = {}) {
      const dfs = localDfsClient(desc, options);
      dfsClients.push(dfs);
      return dfs;
    },
    async stop() {
      for (const dfs of dfsClients) dfs.close();
      client.close();
      await stopCluster(dir).catch(() => undefined);
      // HARVEST_KEEP_TEST_CLUSTERS=1 keeps the directory, with every daemon's log, to look into a failure.
      if (process.env["HARVEST_KEEP_TEST_CLUSTERS"] === "1") console.log(`kept test cluster ${dir}`);
      else rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** Writes a plain `time_s,cpu_pct` trace with the given per-step values and returns `trace:<path>`. */
export function traceSpec(dir: string, name: string, stepSec: number, cpuPct: number[]): string {
  const path = join(dir, `${name}.csv`);
  writeFileSync(path, "time_s,cpu_pct\n" + cpuPct.map((v, i) => `${i * stepSec},${v}`).join("\n") + "\n");
  return `trace:${path}`;
}

/** A trace (in `dir`) whose primary tenant stays idle for 30,000 s, longer than any test: `trace:<path>`. */
export function idleTraceSpec(dir: string): string {
  return traceSpec(dir, "idle", 300, Array<number>(100).fill(0));
}

/** A cpu-work vertex that burns `cpuSeconds` and then holds its container (asleep) until `holdSeconds` have passed. */
export function cpuVertex(
  name: string,
  parallelism: number,
  opts: { cpuSeconds?: number; holdSeconds?: number; vcores?: number; extra?: string[] } = {},
): object {
  return {
    name,
    parallelism,
    command: [
      "node",
      "${HARVEST_HOME}/dist/examples/tasks/cpu-work.js",
      "--seconds",
      String(opts.cpuSeconds ?? 0.05),
      "--hold-seconds",
      String(opts.holdSeconds ?? 0),
      ...(opts.extra ?? []),
    ],
    resources: { vcores: opts.vcores ?? 1, memoryMb: 128 },
  };
}

/**
 * Polls a job until `pred` holds (or, unless `stopOnEnd` is false, the job ends); returns the last report. With
 * `retryOnError` a failed call counts as "not yet" (the resource manager is restarting: the client's channel may still be
 * backing off from the old one).
 */
export async function waitForJob(
  client: JobClient,
  appId: string,
  pred: (r: JobReport) => boolean,
  opts: { timeoutMs?: number; stopOnEnd?: boolean; retryOnError?: boolean } = {},
): Promise<JobReport> {
  let last: JobReport | undefined;
  return waitFor(
    async () => {
      last = await client.status(appId);
      const ended = ["FINISHED", "FAILED", "KILLED"].includes(last.state);
      return pred(last) || ((opts.stopOnEnd ?? true) && ended) ? last : undefined;
    },
    {
      what: () => `${appId}: state ${last?.state}, progress ${JSON.stringify(last?.progress)}`,
      timeoutMs: opts.timeoutMs ?? 60_000,
      intervalMs: 200,
      retryOnError: opts.retryOnError ?? false,
    },
  );
}

/** Files named `name` anywhere under `dir`. */
export function findFiles(dir: string, name: string): string[] {
  const out: string[] = [];
  if (!existsSync(dir)) return out;
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const p = join(dir, entry.name);
    if (entry.isDirectory()) out.push(...findFiles(p, name));
    else if (entry.name === name) out.push(p);
  }
  return out;
}

/**
 * The output files named `name` that the tasks of job `appId` left on the servers of the cluster in `dir` (each in
 * its container's output directory, on its own node).
 */
export function taskOutputs(dir: string, appId: string, name: string): string[] {
  return findFiles(dir, name).filter((p) => p.includes(`/containers/${appId}/`) && p.includes("/output/"));
}

/** An in-process resource manager and one node manager (real gRPC on loopback, idle primary), for protocol tests. */
export interface LocalCluster {
  dir: string;
  rm: ResourceManager;
  nm: NodeManager;
  client: JobClient;
  /** Things to stop at the end, run in reverse order by `stop()`. */
  onStop: (() => Promise<void>)[];
  stop(): Promise<void>;
}

const quietLogger = new Logger("test", "error");

/**
 * Starts an in-process namenode: its data in `<dir>/nn`, plaintext, datanode heartbeats every 200 ms, quiet logs;
 * `extra` overrides or adds options.
 */
export async function startTestNameNode(dir: string, extra: Partial<NameNodeOptions> = {}): Promise<NameNode> {
  const nn = new NameNode(
    { dataDir: join(dir, "nn"), insecure: true, heartbeatIntervalMs: 200, ...extra },
    { logger: quietLogger },
  );
  await nn.start();
  return nn;
}

/**
 * Starts an in-process datanode `datanodeId` against `namenodeAddress`: its data in `<dir>/<datanodeId>`, 1 GiB of
 * capacity, a primary tenant that stays idle (unless `monitor` is another), quiet logs; `extra` overrides or adds
 * options (another `dataDir` or `capacityBytes`, for instance).
 */
export async function startTestDataNode(
  dir: string,
  datanodeId: string,
  namenodeAddress: string,
  extra: Partial<DataNodeOptionsInput> = {},
  monitor: PrimaryMonitor = new StepPrimaryMonitor({ capacityMilli: 1000 }),
): Promise<DataNode> {
  const dn = new DataNode(
    { datanodeId, namenodeAddress, dataDir: join(dir, datanodeId), capacityBytes: 1 << 30, ...extra },
    { logger: quietLogger, monitor },
  );
  await dn.start();
  return dn;
}

/** Starts an RM and a node manager "n1" whose primary tenant replays an idle trace, and waits for the node. */
export async function startLocalCluster(
  opts: { rm?: Partial<ResourceManagerOptions>; nm?: Partial<NodeManagerOptions> } = {},
): Promise<LocalCluster> {
  requireBuild();
  const dir = mkdtempSync(join(tmpdir(), "harvest-local-"));
  // The node manager's containers run as an unprivileged account (when the tests run as root), which must get in.
  chmodSync(dir, 0o755);
  const trace = join(dir, "idle.csv");
  writeFileSync(trace, "time_s,cpu_pct\n0,0\n300,0\n600,0\n");
  const onStop: (() => Promise<void>)[] = [async () => rmSync(dir, { recursive: true, force: true })];
  const rm = new ResourceManager({ dataDir: join(dir, "rm"), ...opts.rm }, { logger: quietLogger });
  await rm.start();
  onStop.push(() => rm.stop());
  const nm = new NodeManager(
    {
      nodeId: "n1",
      rmAddress: rm.address,
      dataDir: join(dir, "n1"),
      primary: `trace:${trace}`,
      cgroups: "none",
      ...opts.nm,
    },
    { logger: quietLogger },
  );
  await nm.start();
  onStop.push(() => nm.stop());
  const client = new JobClient(rm.address);
  onStop.push(async () => client.close());
  await waitFor(async () => (await client.nodes()).length > 0, { what: "node manager n1 to register", intervalMs: 25 });
  return {
    dir,
    rm,
    nm,
    client,
    onStop,
    async stop() {
      for (const s of onStop.reverse()) await s().catch(() => undefined);
    },
  };
}

/**
 * Stops the cluster's resource manager and starts a new one on the same port and store, so that the node manager and
 * the job managers find it again; `whileDown` runs in between. The new one's stop is pushed last on `c.onStop`.
 */
export async function restartLocalRm(c: LocalCluster, whileDown?: () => Promise<void>): Promise<ResourceManager> {
  const port = Number(c.rm.address.split(":")[1]);
  await c.rm.stop();
  await whileDown?.();
  const rm = new ResourceManager({ dataDir: join(c.dir, "rm"), port }, { logger: quietLogger });
  await rm.start();
  c.onStop.push(() => rm.stop());
  return rm;
}
