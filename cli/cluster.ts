/**
 * A local Harvest cluster: one resource manager and N node managers ("servers") as separate OS processes on loopback,
 * each server with its own primary tenant. `startCluster` writes a descriptor (`cluster.json`) into the cluster
 * directory that every other command reads; `stopCluster` stops exactly the processes it started.
 */
import { spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { existsSync, mkdirSync, openSync, closeSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { homedir } from "node:os";
import { join, resolve } from "node:path";
import { HarvestError } from "../common/errors.js";
import { distEntry } from "../common/paths.js";
import { DfsClient } from "../client/dfs-client.js";
import { JobClient } from "../client/job-client.js";

/** One daemon process of a cluster. */
export interface DaemonRecord {
  pid: number;
  address: string;
  dataDir: string;
  log: string;
  entry: string;
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
  nodes: NodeRecord[];
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
}

/** The cluster directory: --dir, else $HARVEST_CLUSTER_DIR, else ~/.harvest/cluster. */
export function resolveClusterDir(dir?: string): string {
  return resolve(dir ?? process.env["HARVEST_CLUSTER_DIR"] ?? join(homedir(), ".harvest", "cluster"));
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

/** True when `pid` is alive and runs `entry` (so a reused pid is never mistaken for ours). */
export function isOurProcess(pid: number, entry: string): boolean {
  try {
    const cmdline = readFileSync(`/proc/${pid}/cmdline`, "utf8");
    return cmdline.includes(entry);
  } catch {
    return false;
  }
}

/** Starts a cluster and resolves to its descriptor once every node has registered with the resource manager. */
export async function startCluster(opts: ClusterUpOptions): Promise<ClusterDescriptor> {
  const dir = resolve(opts.dir);
  if (existsSync(join(dir, "cluster.json"))) {
    const existing = readCluster(dir);
    if (isOurProcess(existing.rm.pid, existing.rm.entry)) {
      throw new HarvestError(
        "CLUSTER_ALREADY_RUNNING",
        `a cluster is already running in ${dir}; stop it with 'harvest cluster down --dir ${dir}' or use another --dir`,
      );
    }
  }
  mkdirSync(join(dir, "logs"), { recursive: true });
  mkdirSync(join(dir, "run"), { recursive: true });
  const secret = randomBytes(16).toString("hex");
  const started: DaemonRecord[] = [];
  try {
    const withStorage = opts.storage ?? true;
    // The resource manager first (the namenode reads tenants from it), then the namenode, then every server's daemons
    // (in parallel).
    const rm = await launchDaemon(
      dir,
      "rm",
      distEntry("resourcemanager/main.js"),
      { dataDir: join(dir, "rm"), secret, ...opts.rm },
      opts.startTimeoutMs,
    );
    started.push(rm);
    const nn = withStorage
      ? await launchDaemon(
          dir,
          "nn",
          distEntry("namenode/main.js"),
          { dataDir: join(dir, "nn"), rmAddress: rm.address, ...opts.nn },
          opts.startTimeoutMs,
        )
      : undefined;
    if (nn) started.push(nn);
    const nodes = await Promise.all(
      opts.primaries.map(async (primary, i): Promise<NodeRecord> => {
        const nodeId = `server-${i + 1}`;
        const rack = `/rack-${(i % 2) + 1}`;
        const primaryOffsetMs = opts.offsetsMs?.[i] ?? i * 3_600_000;
        // A server's datanode watches the same primary tenant as its node manager.
        const shared = { rack, primary, primarySpeed: opts.speed, primaryOffsetMs };
        const nmConfig = {
          nodeId,
          rmAddress: rm.address,
          nnAddress: nn?.address ?? "",
          dataDir: join(dir, "nodes", nodeId),
          capacity: { vcoresMilli: Math.round(opts.vcores * 1000), memoryMb: opts.memoryMb },
          secret,
          ...shared,
          ...opts.nm,
        };
        const [nm, dn] = await Promise.all([
          launchDaemon(dir, nodeId, distEntry("nodemanager/main.js"), nmConfig, opts.startTimeoutMs),
          nn
            ? launchDaemon(
                dir,
                `${nodeId}-dn`,
                distEntry("datanode/main.js"),
                {
                  datanodeId: nodeId,
                  namenodeAddress: nn.address,
                  dataDir: join(dir, "datanodes", nodeId),
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
    const descriptor: ClusterDescriptor = { version: 1, dir, createdMs: Date.now(), rm, ...(nn ? { nn } : {}), nodes };
    writeFileSync(join(dir, "cluster.json"), JSON.stringify(descriptor, null, 2));
    await waitForNodes(rm.address, nodes.length, opts.startTimeoutMs);
    if (nn) await waitForDatanodes(nn.address, nodes.length, opts.startTimeoutMs);
    return descriptor;
  } catch (err) {
    for (const d of started.reverse()) await stopProcess(d.pid, d.entry, 3_000);
    throw err;
  }
}

async function launchDaemon(
  dir: string,
  name: string,
  entry: string,
  config: object,
  timeoutMs: number,
): Promise<DaemonRecord> {
  const configFile = join(dir, "run", `${name}.json`);
  const readyFile = join(dir, "run", `${name}.ready`);
  const log = join(dir, "logs", `${name}.log`);
  rmSync(readyFile, { force: true });
  writeFileSync(configFile, JSON.stringify(config, null, 2));
  const fd = openSync(log, "a");
  const child = spawn(process.execPath, [entry, "--config", configFile, "--ready-file", readyFile], {
    detached: true,
    stdio: ["ignore", fd, fd],
    env: process.env,
  });
  closeSync(fd);
  child.unref();
  let exitCode: number | null = null;
  child.once("exit", (code) => (exitCode = code ?? -1));
  const deadline = Date.now() + timeoutMs;
  while (!existsSync(readyFile)) {
    if (exitCode !== null || Date.now() > deadline) {
      if (exitCode === null && child.pid) await stopProcess(child.pid, entry, 1_000);
      const tail = existsSync(log) ? readFileSync(log, "utf8").split("\n").slice(-8).join("\n") : "";
      throw new HarvestError(
        "UNAVAILABLE",
        `${name} did not start (${exitCode !== null ? `exited with ${exitCode}` : "timed out"}); its log ${log} ends with:\n${tail}`,
      );
    }
    await sleep(50);
  }
  const ready = JSON.parse(readFileSync(readyFile, "utf8")) as { address: string; pid: number };
  return { pid: ready.pid, address: ready.address, dataDir: (config as { dataDir: string }).dataDir, log, entry };
}

async function waitForNodes(rmAddress: string, count: number, timeoutMs: number): Promise<void> {
  const client = new JobClient(rmAddress);
  try {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const nodes = await client.nodes();
      if (nodes.filter((n) => n.state === "RUNNING").length >= count) return;
      if (Date.now() > deadline)
        throw new HarvestError("UNAVAILABLE", `only ${nodes.length} of ${count} node managers registered in time`);
      await sleep(100);
    }
  } finally {
    client.close();
  }
}

async function waitForDatanodes(nnAddress: string, count: number, timeoutMs: number): Promise<void> {
  const client = new DfsClient(nnAddress);
  try {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const live = (await client.datanodes()).filter((d) => d.state === "LIVE").length;
      if (live >= count) return;
      if (Date.now() > deadline)
        throw new HarvestError("UNAVAILABLE", `only ${live} of ${count} datanodes registered in time`);
      await sleep(100);
    }
  } finally {
    client.close();
  }
}

/** Stops a process we started: SIGTERM, then SIGKILL after `graceMs`. Returns whether it was running. */
export async function stopProcess(pid: number, entry: string, graceMs: number): Promise<boolean> {
  if (!isOurProcess(pid, entry)) return false;
  try {
    process.kill(pid, "SIGTERM");
  } catch {
    return false;
  }
  const deadline = Date.now() + graceMs;
  while (Date.now() < deadline) {
    if (!isOurProcess(pid, entry)) return true;
    await sleep(50);
  }
  try {
    process.kill(pid, "SIGKILL");
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
  for (const group of [servers, [...(c.nn ? [c.nn] : []), c.rm]]) {
    const results = await Promise.all(group.map((d) => stopProcess(d.pid, d.entry, 5_000)));
    stopped += results.filter(Boolean).length;
  }
  for (const n of c.nodes) killContainerLeftovers(n.dataDir);
  rmSync(join(dir, "cluster.json"), { force: true });
  return { stopped };
}

/** Kills container process groups recorded under a node manager's data directory (after a node manager was killed). */
export function killContainerLeftovers(nmDataDir: string): void {
  const root = join(nmDataDir, "containers");
  if (!existsSync(root)) return;
  for (const app of readdirSync(root)) {
    for (const id of readdirSync(join(root, app))) {
      try {
        const pid = Number(readFileSync(join(root, app, id, "pid"), "utf8"));
        if (pid > 0) process.kill(-pid, "SIGKILL");
      } catch {
        // Gone already.
      }
    }
  }
}

function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}
