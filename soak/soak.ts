/**
 * The soak: a real local cluster (resource manager, namenode, node managers, datanodes, job managers, tasks, all
 * separate processes) runs a stream of DAG jobs and DFS writers and readers while a chaos loop kill -9s a random daemon
 * every few seconds and starts it again as an operator would (`harvest cluster restart`). At the end it checks what a
 * user was promised:
 * - every file whose write was acknowledged reads back byte-identical;
 * - every job whose submission was acknowledged finished, or failed with a stated reason;
 * - no task ran twice to completion (the tasks write their own record of each start and end);
 * - fsck is healthy once re-replication had its time; no process of the cluster is left after `cluster down`.
 * Jepsen-style in spirit: the workload keeps going through the faults, and only the final state is judged.
 *
 * With `ha` the cluster is `harvest cluster up --ha`'s (an etcd ensemble, two resource managers, two namenodes), every
 * other kill is of the active resource manager or namenode in turn (ha-chaos.ts times how long until another master is
 * active), and the other kills include etcd members, one at a time.
 */
import { createHash } from "node:crypto";
import {
  chmodSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Readable } from "node:stream";
import { pipeline } from "node:stream/promises";
import {
  clusterDaemons,
  localDfsClient,
  localJobClient,
  readCluster,
  readClusterEvents,
  restartDaemon,
  startCluster,
  stopCluster,
} from "../localcluster/cluster.js";
import type { DfsClient } from "../client/index.js";
import type { JobClient } from "../client/index.js";
import { containerProcessFile } from "../common/container-leftovers.js";
import { errorMessage, isHarvestError } from "../common/errors.js";
import { eventsOfType } from "../common/events.js";
import type { DaemonEvent } from "../common/events.js";
import { SeededRng } from "../common/rng.js";
import { activeMaster, emptyHaReport, etcdMemberToKill, haSummary, timeToNewActive } from "./ha-chaos.js";
import type { HaService, SoakHaReport } from "./ha-chaos.js";

/** What a soak runs. */
export interface SoakOptions {
  /** Minutes of chaos (the workload runs through them; checks follow). */
  minutes: number;
  /** Seeds the chaos, the workload and the file contents. @default 1 */
  seed: number;
  /** A kill every this many ms, drawn uniformly. @default [3000, 6000] */
  killEveryMs: [number, number];
  /** Servers (a node manager and a datanode each). @default 3 */
  servers: number;
  /** Jobs in flight at once. @default 2 */
  jobsInFlight: number;
  /** Highly available masters (`cluster up --ha`), whose active ones the chaos kills too. @default false */
  ha: boolean;
  /** Where the cluster lives (removed afterwards unless `keep`). @default a temporary directory */
  dir?: string;
  keep: boolean;
  /** Progress lines. */
  log: (line: string) => void;
}

/** Which daemons a soak kills. */
export type SoakTarget = "rm" | "nn" | "nm" | "dn" | "jm";

/** What a soak saw and found. */
export interface SoakReport {
  minutes: number;
  seed: number;
  kills: Record<SoakTarget, number>;
  jobs: { submitted: number; finished: number; failed: number; killed: number; unfinished: number };
  /**
   * Tasks whose work finished (they wrote "done"); of them, those run again after a success the cluster had recorded
   * (a node manager wrote the exit down: a broken promise), and those run again because their server died between the
   * work's end and the exit being recorded, or went silent past the node expiry so that the job was told the run was
   * lost (at-least-once, as in Hadoop: a success nobody recorded in time is re-run).
   */
  tasks: { completed: number; completedTwice: number; rerunUnrecorded: number };
  files: { written: number; bytes: number; verified: number; mismatched: number };
  /** Calls that failed during the faults and were tried again. */
  retries: { submit: number; status: number; write: number; read: number };
  fsckHealthy: boolean;
  leftoverProcesses: number;
  /** With `ha`: failovers and how long each took. The kills of "rm" and "nn" are then of the active master. */
  ha?: SoakHaReport;
  /** Broken promises: empty when the soak passed. */
  violations: string[];
}

/** A report with nothing counted yet (fsck not yet found healthy). */
export function emptySoakReport(minutes: number, seed: number): SoakReport {
  return {
    minutes,
    seed,
    kills: { rm: 0, nn: 0, nm: 0, dn: 0, jm: 0 },
    jobs: { submitted: 0, finished: 0, failed: 0, killed: 0, unfinished: 0 },
    tasks: { completed: 0, completedTwice: 0, rerunUnrecorded: 0 },
    files: { written: 0, bytes: 0, verified: 0, mismatched: 0 },
    retries: { submit: 0, status: 0, write: 0, read: 0 },
    fsckHealthy: false,
    leftoverProcesses: 0,
    violations: [],
  };
}

const DEFAULTS: Omit<SoakOptions, "minutes"> = {
  seed: 1,
  killEveryMs: [3_000, 6_000],
  servers: 3,
  jobsInFlight: 2,
  ha: false,
  keep: false,
  log: () => undefined,
};

/**
 * A task that records "start <app> <vertex> <index> <container>" when it starts and "done ..." when its work is over.
 */
const TASK = [
  'const fs = require("fs");',
  "const [log, app, v, i, ms, container] = process.argv.slice(1);",
  'const line = (w) => fs.appendFileSync(log, w + " " + app + " " + v + " " + i + " " + container + "\\n");',
  'line("start");',
  'setTimeout(() => line("done"), Number(ms));',
].join(" ");

/** Runs a soak; resolves with its report (violations listed, never thrown). */
export async function runSoak(partial: Partial<SoakOptions> & { minutes: number }): Promise<SoakReport> {
  const o: SoakOptions = { ...DEFAULTS, ...partial };
  const rng = new SeededRng(o.seed);
  const dir = o.dir ?? mkdtempSync(join(tmpdir(), "harvest-soak-"));
  mkdirSync(dir, { recursive: true });
  chmodSync(dir, 0o755);
  const taskLogDir = join(dir, "task-log");
  mkdirSync(taskLogDir, { recursive: true });
  // The tasks write their record as the containers' unprivileged account.
  chmodSync(taskLogDir, 0o1777);
  const taskLog = join(taskLogDir, "tasks.log");
  // Made here, writable by all: every job's containers run as an account of their own, and a file the first job's
  // task created would be closed to the others.
  writeFileSync(taskLog, "");
  chmodSync(taskLog, 0o666);
  const report = emptySoakReport(o.minutes, o.seed);
  if (o.ha) report.ha = emptyHaReport();
  o.log(`soak: starting a ${o.servers}-server ${o.ha ? "highly available " : ""}cluster in ${dir}`);
  const trace = join(dir, "idle.csv");
  writeFileSync(trace, "time_s,cpu_pct\n0,0\n86400,0\n");
  await startCluster({
    dir,
    primaries: Array.from({ length: o.servers }, () => `trace:${trace}`),
    speed: 1,
    vcores: 4,
    memoryMb: 4096,
    startTimeoutMs: 60_000,
    rm: { resyncWindowMs: 3_000, nodeExpiryMs: 5_000, amExpiryMs: 15_000 },
    nm: { reconnectMaxMs: 1_000 },
    nn: { datanodeExpiryMs: 8_000 },
    ...(o.ha ? { ha: true } : {}),
  });
  const jobs = localJobClient(readCluster(dir));
  const dfs = localDfsClient(readCluster(dir));
  const acked = new Map<string, { sha256: string; bytes: number }>();
  const submitted = new Set<string>();
  const stopAt = Date.now() + o.minutes * 60_000;
  let running = true;
  try {
    const files: FileWorkload = { dfs, rng, acked, report, going: () => Date.now() < stopAt };
    const chaos = chaosLoop(dir, o, rng, report, () => running && Date.now() < stopAt, jobs);
    const work = Promise.all([
      jobLoop(jobs, taskLog, o, rng, submitted, report, () => Date.now() < stopAt),
      writeLoop(files),
      readLoop(files),
    ]);
    await chaos;
    running = false;
    await work;
    o.log("soak: chaos over; every daemon up again; waiting for the jobs to end");
    await ensureAllUp(dir);
    await settleJobs(jobs, submitted, report, o);
    await verifyFiles(dfs, acked, report, o);
    report.fsckHealthy = await waitForHealthyFsck(dfs, 120_000);
    if (!report.fsckHealthy) report.violations.push("fsck not healthy (missing, corrupt or under-replicated blocks)");
    const { events } = readClusterEvents(dir);
    countTaskRuns(taskLog, recordedSuccesses(events), report, toldNodeLost(events));
  } catch (err) {
    report.violations.push(`soak aborted: ${errorMessage(err)}`);
  } finally {
    running = false;
    jobs.close();
    dfs.close();
    await stopCluster(dir).catch(() => undefined);
    report.leftoverProcesses = await leftoverProcesses(dir);
    if (report.leftoverProcesses > 0)
      report.violations.push(`${report.leftoverProcesses} process(es) of the cluster left after cluster down`);
    if (!o.keep) rmSync(dir, { recursive: true, force: true });
  }
  return report;
}

// ------------------------------------------------------------------------------------------------ chaos

async function chaosLoop(
  dir: string,
  o: SoakOptions,
  rng: SeededRng,
  report: SoakReport,
  going: () => boolean,
  jobs: JobClient,
): Promise<void> {
  const targets: SoakTarget[] = ["rm", "nn", "nm", "dn", "jm"];
  // With --ha every other kill is of an active master, the resource manager's and the namenode's in turn, so that
  // each fails over within the first four kills; the rest are drawn from the servers' daemons and the etcd members.
  const haTargets: (SoakTarget | "etcd")[] = ["nm", "dn", "jm", "etcd"];
  for (let round = 0; going(); round++) {
    await sleep(o.killEveryMs[0] + rng.next() * (o.killEveryMs[1] - o.killEveryMs[0]));
    if (!going()) break;
    if (report.ha && round % 2 === 0) {
      await killActive(dir, round % 4 === 0 ? "rm" : "nn", o, rng, report, report.ha);
      continue;
    }
    const target = report.ha
      ? haTargets[Math.floor(rng.next() * haTargets.length)]!
      : targets[Math.floor(rng.next() * targets.length)]!;
    const c = readCluster(dir);
    const server = c.nodes[Math.floor(rng.next() * c.nodes.length)]!;
    let name: string | undefined;
    let pid: number | undefined;
    if (target === "rm") [name, pid] = ["rm", c.rm.pid];
    else if (target === "nn" && c.nn) [name, pid] = ["nn", c.nn.pid];
    else if (target === "nm") [name, pid] = [server.nodeId, server.pid];
    else if (target === "dn" && server.datanode) [name, pid] = [`${server.nodeId}-dn`, server.datanode.pid];
    else if (target === "jm") pid = await jobManagerPid(dir, jobs);
    else if (target === "etcd") {
      const m = etcdMemberToKill(dir, rng.next());
      if (m) [name, pid] = [m.name, m.pid];
    }
    if (pid === undefined) continue;
    try {
      process.kill(pid, "SIGKILL");
    } catch {
      continue;
    }
    if (target === "etcd") report.ha!.etcdKills++;
    else report.kills[target]++;
    o.log(`soak: kill -9 ${name ?? "a job manager"} (process ${pid})`);
    if (!name) continue;
    // Down for a moment, as an operator takes to notice and restart it.
    await sleep(500 + rng.next() * 2_000);
    await restartWhenDead(dir, name);
  }
}

/**
 * Kills the active master of `service` (-9), restarts it after a moment, and records how long the service went
 * without an active one: until a master answers "active" under a higher epoch (a violation after 60 s).
 */
async function killActive(
  dir: string,
  service: HaService,
  o: SoakOptions,
  rng: SeededRng,
  report: SoakReport,
  ha: SoakHaReport,
): Promise<void> {
  const active = await activeMaster(dir, service);
  if (!active) {
    o.log(`soak: no ${service} master answers active; no kill this round`);
    return;
  }
  const { master, epoch } = active;
  try {
    process.kill(master.pid, "SIGKILL");
  } catch {
    return;
  }
  const killedAtMs = Date.now();
  report.kills[service]++;
  o.log(`soak: kill -9 the active ${service}, ${master.name} (process ${master.pid}, epoch ${epoch})`);
  const newActive = timeToNewActive(dir, service, epoch, killedAtMs, 60_000);
  await sleep(500 + rng.next() * 2_000);
  await restartWhenDead(dir, master.name);
  const ms = await newActive;
  if (ms === undefined) {
    report.violations.push(
      `no ${service} master became active within 60 s of the kill -9 of the active ${master.name}`,
    );
    return;
  }
  ha.failovers[service]++;
  ha.newActiveMs[service].push(ms);
  o.log(`soak: a new active ${service} ${ms} ms after the kill`);
}

/** Restarts a killed daemon once its process is gone. */
async function restartWhenDead(dir: string, name: string): Promise<void> {
  for (let i = 0; i < 100; i++) {
    try {
      await restartDaemon(dir, name, 60_000);
      return;
    } catch (err) {
      if (!isHarvestError(err, "DAEMON_ALREADY_RUNNING")) throw err;
      await sleep(100);
    }
  }
}

/** Restarts whatever is down (a kill whose restart was cut short by the end of the chaos). */
async function ensureAllUp(dir: string): Promise<void> {
  // A node manager by its own name ("server-N-nm"): "server-N" would restart its datanode too.
  for (const d of clusterDaemons(dir))
    if (!d.running) await restartWhenDead(dir, d.kind === "nodemanager" ? `${d.name}-nm` : d.name);
}

/** The pid of a running job manager, from its container's launch record (undefined: none runs). */
async function jobManagerPid(dir: string, jobs: JobClient): Promise<number | undefined> {
  try {
    const running = await jobs.list(["RUNNING"]);
    if (running.length === 0) return undefined;
    const app = await jobs.status(running[0]!.appId);
    const am = app.containers.find((x) => x.isAm && x.state !== "COMPLETE");
    const node = readCluster(dir).nodes.find((n) => n.nodeId === am?.nodeId);
    if (!am || !node) return undefined;
    const record = JSON.parse(
      readFileSync(containerProcessFile(join(node.dataDir, "containers", app.appId, am.containerId)), "utf8"),
    ) as { pid?: unknown };
    return typeof record.pid === "number" ? record.pid : undefined;
  } catch {
    return undefined;
  }
}

// ------------------------------------------------------------------------------------------------ workload

async function jobLoop(
  jobs: JobClient,
  taskLog: string,
  o: SoakOptions,
  rng: SeededRng,
  submitted: Set<string>,
  report: SoakReport,
  going: () => boolean,
): Promise<void> {
  const inFlight = new Set<string>();
  let n = 0;
  while (going()) {
    for (const id of [...inFlight]) {
      try {
        const r = await jobs.status(id);
        if (["FINISHED", "FAILED", "KILLED"].includes(r.state)) inFlight.delete(id);
      } catch {
        report.retries.status++;
      }
    }
    if (inFlight.size < o.jobsInFlight) {
      const dag = soakDag(`soak-${n++}`, taskLog, rng);
      try {
        const id = await jobs.submit(dag);
        submitted.add(id);
        inFlight.add(id);
        report.jobs.submitted++;
      } catch {
        // Not acknowledged (the resource manager is down): nothing was promised; try again.
        report.retries.submit++;
      }
    }
    await sleep(500);
  }
}

/** Two stages of marked tasks: three of 1-3 s, then one of 1 s. */
function soakDag(name: string, taskLog: string, rng: SeededRng): string {
  const task = (vertex: string, ms: number): string[] => [
    "node",
    "-e",
    TASK,
    taskLog,
    "${HARVEST_APP_ID}",
    vertex,
    "${HARVEST_TASK_INDEX}",
    String(ms),
    "${HARVEST_CONTAINER_ID}",
  ];
  return JSON.stringify({
    name,
    vertices: [
      {
        name: "map",
        parallelism: 3,
        command: task("map", Math.round(1_000 + rng.next() * 2_000)),
        resources: { vcores: 0.5, memoryMb: 64 },
      },
      { name: "reduce", parallelism: 1, command: task("reduce", 1_000), resources: { vcores: 0.5, memoryMb: 64 } },
    ],
    edges: [{ from: "map", to: "reduce", type: "scatter-gather" }],
  });
}

/** What the file workload's writer and reader share: the acknowledged files (path -> digest) and the report. */
interface FileWorkload {
  dfs: DfsClient;
  rng: SeededRng;
  acked: Map<string, { sha256: string; bytes: number }>;
  report: SoakReport;
  going: () => boolean;
}

async function writeLoop({ dfs, rng, acked, report, going }: FileWorkload): Promise<void> {
  let n = 0;
  while (going()) {
    const path = `/soak/f-${String(n++).padStart(5, "0")}`;
    const bytes = Math.round(16 * 1024 + rng.next() * 2 * 1024 * 1024);
    const data = pseudoRandomBytes(rng, bytes);
    try {
      await pipeline(Readable.from([data]), dfs.createWriteStream(path));
      // Acknowledged: from here on it must read back whole.
      acked.set(path, { sha256: sha256(data), bytes });
      report.files.written++;
      report.files.bytes += bytes;
    } catch {
      report.retries.write++;
    }
    await sleep(200);
  }
}

async function readLoop({ dfs, rng, acked, report, going }: FileWorkload): Promise<void> {
  while (going()) {
    await sleep(700);
    const paths = [...acked.keys()];
    if (paths.length === 0) continue;
    const path = paths[Math.floor(rng.next() * paths.length)]!;
    try {
      const got = await readAll(dfs, path);
      if (sha256(got) !== acked.get(path)!.sha256) {
        report.files.mismatched++;
        report.violations.push(`${path} read back different from what was written (${got.length} bytes)`);
      }
    } catch {
      report.retries.read++;
    }
  }
}

// ------------------------------------------------------------------------------------------------ checks

async function settleJobs(jobs: JobClient, submitted: Set<string>, report: SoakReport, o: SoakOptions): Promise<void> {
  const deadline = Date.now() + 5 * 60_000;
  const pending = new Set(submitted);
  while (pending.size > 0 && Date.now() < deadline) {
    for (const id of [...pending]) {
      try {
        const r = await jobs.status(id);
        if (!["FINISHED", "FAILED", "KILLED"].includes(r.state)) continue;
        pending.delete(id);
        if (r.state === "FINISHED") report.jobs.finished++;
        else {
          if (r.state === "FAILED") report.jobs.failed++;
          else report.jobs.killed++;
          o.log(`soak: ${id} ${r.state}: ${r.diagnostics}`);
          if (!r.diagnostics.trim()) report.violations.push(`${id} ended ${r.state} without a reason`);
        }
      } catch {
        report.retries.status++;
      }
    }
    if (pending.size > 0) await sleep(1_000);
  }
  report.jobs.unfinished = pending.size;
  for (const id of pending) report.violations.push(`${id} did not end within 5 minutes of the chaos`);
}

async function verifyFiles(
  dfs: DfsClient,
  acked: Map<string, { sha256: string; bytes: number }>,
  report: SoakReport,
  o: SoakOptions,
): Promise<void> {
  o.log(`soak: reading back ${acked.size} acknowledged files`);
  for (const [path, want] of acked) {
    let got: Buffer | undefined;
    for (let attempt = 0; attempt < 20 && !got; attempt++) {
      try {
        got = await readAll(dfs, path);
      } catch (err) {
        report.retries.read++;
        if (attempt === 19) report.violations.push(`${path} cannot be read: ${errorMessage(err)}`);
        else await sleep(1_000);
      }
    }
    if (!got) continue;
    if (sha256(got) === want.sha256) report.files.verified++;
    else {
      report.files.mismatched++;
      report.violations.push(`${path}: ${got.length} bytes read back, ${want.bytes} written, content differs`);
    }
  }
}

async function waitForHealthyFsck(dfs: DfsClient, timeoutMs: number): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    try {
      const f = await dfs.fsck("/");
      if (f.healthy && f.underReplicated.length === 0 && f.missing.length === 0 && f.corrupt.length === 0) return true;
    } catch {
      // The namenode may still be leaving safe mode.
    }
    if (Date.now() > deadline) return false;
    await sleep(1_000);
  }
}

/** The containers whose success a node manager recorded (its `container-finished` event, emitted once written down). */
export function recordedSuccesses(events: readonly DaemonEvent[]): Set<string> {
  const out = new Set<string>();
  for (const e of eventsOfType(events, "container-finished")) if (e.cause === "SUCCEEDED") out.add(e.containerId);
  return out;
}

/**
 * The containers the resource manager reported lost with their node (silent past the node expiry; its
 * `container-lost-with-node` event): a success such a node records afterwards comes too late, and the job has run the
 * task again.
 */
export function toldNodeLost(events: readonly DaemonEvent[]): Set<string> {
  return new Set(eventsOfType(events, "container-lost-with-node").map((e) => e.containerId));
}

/**
 * Counts tasks that completed, and those whose work ran to its end again after a run whose success was recorded (a
 * promise broken). A run whose success nothing recorded (its server died as it ended), or recorded only after its job
 * was told the node was lost, may run again: counted apart.
 */
export function countTaskRuns(
  taskLog: string,
  recorded: ReadonlySet<string>,
  report: SoakReport,
  nodeLost: ReadonlySet<string> = new Set(),
): void {
  const done = new Map<string, string[]>();
  const text = existsSync(taskLog) ? readFileSync(taskLog, "utf8") : "";
  for (const line of text.split("\n")) {
    const [what, app, vertex, index, container] = line.split(" ");
    if (what !== "done" || !container) continue;
    const k = `${app} ${vertex} ${index}`;
    done.set(k, [...(done.get(k) ?? []), container]);
  }
  report.tasks.completed = done.size;
  for (const [k, runs] of done) {
    if (runs.length < 2) continue;
    // Every run but the last was followed by another: a broken promise when the cluster had recorded its success.
    const known = runs.slice(0, -1).filter((c) => recorded.has(c) && !nodeLost.has(c));
    if (known.length === 0) {
      report.tasks.rerunUnrecorded++;
      continue;
    }
    report.tasks.completedTwice++;
    report.violations.push(`task ${k} ran to completion ${runs.length} times (after ${known.join(", ")} succeeded)`);
  }
}

/** Processes whose command line or environment names the cluster directory (after `cluster down`). */
async function leftoverProcesses(dir: string): Promise<number> {
  await sleep(1_000);
  // This process and the ones that started it (a shell, `timeout`) name the directory too.
  const ancestors = new Set<number>();
  for (let pid = process.pid; pid > 1 && !ancestors.has(pid);) {
    ancestors.add(pid);
    try {
      pid = Number(readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1]?.split(" ")[1] ?? 0);
    } catch {
      break;
    }
  }
  let n = 0;
  for (const pid of readdirSync("/proc").filter((p) => /^\d+$/.test(p))) {
    if (ancestors.has(Number(pid))) continue;
    try {
      const cmd = readFileSync(`/proc/${pid}/cmdline`, "utf8");
      const env = readFileSync(`/proc/${pid}/environ`, "utf8");
      if (cmd.includes(dir) || env.includes(dir)) n++;
    } catch {
      // Gone, or not ours to read.
    }
  }
  return n;
}

// ------------------------------------------------------------------------------------------------ helpers

async function readAll(dfs: DfsClient, path: string): Promise<Buffer> {
  const parts: Buffer[] = [];
  for await (const chunk of dfs.createReadStream(path)) parts.push(chunk as Buffer);
  return Buffer.concat(parts);
}

function pseudoRandomBytes(rng: SeededRng, n: number): Buffer {
  const b = Buffer.alloc(n);
  for (let i = 0; i + 4 <= n; i += 4) b.writeUInt32LE(Math.floor(rng.next() * 0x1_0000_0000), i);
  return b;
}

function sha256(b: Buffer): string {
  return createHash("sha256").update(b).digest("hex");
}

function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}

/** The report as lines for a terminal. */
export function soakSummary(r: SoakReport): string {
  const k = r.kills;
  return [
    `soak: ${r.minutes} min, seed ${r.seed}`,
    `kills: rm ${k.rm}, nn ${k.nn}, nm ${k.nm}, dn ${k.dn}, jm ${k.jm} (total ${k.rm + k.nn + k.nm + k.dn + k.jm})`,
    ...(r.ha ? haSummary(r.ha) : []),
    `jobs: ${r.jobs.submitted} submitted, ${r.jobs.finished} finished, ${r.jobs.failed} failed, ${r.jobs.killed} killed, ${r.jobs.unfinished} unfinished`,
    `tasks: ${r.tasks.completed} completed, ${r.tasks.completedTwice} run again after a recorded success, ${r.tasks.rerunUnrecorded} run again after their server died or went silent as they ended`,
    `files: ${r.files.written} written (${(r.files.bytes / 1024 / 1024).toFixed(1)} MiB), ${r.files.verified} verified, ${r.files.mismatched} mismatched`,
    `retries: submit ${r.retries.submit}, status ${r.retries.status}, write ${r.retries.write}, read ${r.retries.read}`,
    `fsck healthy: ${r.fsckHealthy ? "yes" : "NO"}; leftover processes: ${r.leftoverProcesses}`,
    r.violations.length === 0
      ? "violations: none"
      : `violations (${r.violations.length}):\n  ${r.violations.join("\n  ")}`,
  ].join("\n");
}
