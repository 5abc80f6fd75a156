/**
 * Scheduler throughput and heartbeat ingest.
 *
 * (1) Allocation: the pure Scheduler (stock policy, as the resource manager runs it) over `--nodes` simulated nodes of
 *     16 vcores / 64 GB whose primary tenants use a random 0-50 % of the cores and 0-50 % of the memory (each node's
 *     level jitters +-10 % of it per heartbeat). Applications arrive whenever fewer than DEMAND_CONTAINERS containers
 *     are outstanding, each asking 10..500 containers of 1 vcore / 1 GB; every application re-sends its remaining
 *     asks once per round, as a job manager's Allocate does. Node heartbeats come in round-robin order; at its
 *     heartbeat a node first reports its containers that finished (each lives 1..`lifetime-rounds` of its node's
 *     heartbeats), then updates its primary usage, then the scheduler grants on it: the resource manager's order of
 *     work. Finished applications are removed. Runs for `--seconds` of wall time after a warm-up of
 *     `lifetime-rounds` + 2 rounds.
 *     Baseline in this process: the same workload on `--baseline-nodes` nodes, to show how throughput scales with
 *     the cluster. Anchor: YARN's published > 40,000 allocations/s per scheduler (on far bigger hardware).
 *     Heap: measured after full collections around building the node table and around the warm-up.
 * (2) Heartbeat ingest: a real ResourceManager in this process on loopback; a helper process (node-swarm.js) opens
 *     `--sim-nodes` NodeChannel streams (one HTTP/2 connection each unless `--nodes-per-connection`), registers each
 *     node, then heartbeats open-loop at `--rate` heartbeats/s in total for `--seconds`, measuring heartbeat -> ack by
 *     seq. The nodes are idle (no containers, no applications). Baseline in the same run: the same swarm against an
 *     echo server (echo-tracker.js, a fresh process) that only answers: the gRPC transport floor.
 *     Memory per idle node = (settled memory once every node registered - settled memory before) / nodes.
 *     With `--tls` the same runs are made twice in this run, plaintext and then mutual TLS (ECDSA P-256 certificates
 *     from a CA made in a temp dir, as `harvest security` issues them: the servers present a `daemon` certificate for
 *     127.0.0.1, and every swarm connection presents a `daemon` certificate too, as NodeChannel admits only daemons;
 *     the resource manager applies its access rules to every stream). Each swarm connection is one TLS session, set up
 *     during registration; the window measures heartbeats over established sessions. The report adds TLS vs plaintext
 *     of the resource manager's heartbeats acked per second at the offered rate, p50 latency and p99 after the
 *     window's first second, judged against the issue's goal (>= 0.8x; for latencies the ratio is plaintext / TLS, so
 *     0.8x means at most 1.25x as long), with CPU per heartbeat (the cost behind capacity), memory per idle node and
 *     registration time beside them, and the same figures for the echo server, the transport's share of the
 *     difference. Both transports run on the same machine as the swarm: on few cores, CPU that TLS costs the swarm is
 *     CPU the server does not get, which real node managers on their own machines would not take from it.
 */
import { mkdtemp, rm as removeDir } from "node:fs/promises";
import { randomBytes } from "node:crypto";
import { cpus, loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { fileURLToPath } from "node:url";
import type { EventLoopUtilization } from "node:perf_hooks";
import { formatAppId, formatContainerId } from "../common/ids.js";
import { Logger } from "../common/log.js";
import type { Resources } from "../common/resource.js";
import { SeededRng } from "../common/rng.js";
import { readProcStatTotals } from "../common/proc-stats.js";
import type { TlsFiles } from "../common/tls.js";
import { createCa, issueCertificate } from "../localcluster/cluster-ca.js";
import { ResourceManager } from "../resourcemanager/resource-manager.js";
import { Scheduler, StockSchedulerPolicy } from "../resourcemanager/scheduler.js";
import type { Allocation } from "../resourcemanager/scheduler.js";
import type { BenchDefinition, BenchReport } from "./definition.js";
import { parseFlags } from "./flags.js";
import type { FlagSpec, Flags } from "./flags.js";
import { HelperProcess } from "./line-channel.js";
import type { HelperMessage } from "./line-channel.js";
import { canCollectGarbage, fmt, goalRatio, mib, ratio, settledMemory, table } from "./report.js";
import type { GoalCheck, MemorySnapshot, Summary } from "./report.js";

const FLAGS = {
  nodes: { kind: "int", default: 10_000, min: 1, help: "simulated nodes for the allocation run" },
  "baseline-nodes": { kind: "int", default: 1_000, min: 1, help: "nodes of the allocation baseline run" },
  seconds: { kind: "number", default: 10, min: 0.1, help: "measured wall seconds of each run" },
  "lifetime-rounds": { kind: "int", default: 5, min: 1, help: "containers live 1..n heartbeats of their node" },
  "sim-nodes": { kind: "int", default: 2_000, min: 1, help: "node managers the swarm simulates (streams)" },
  rate: { kind: "number", default: 10_000, min: 1, help: "offered heartbeats/s in total" },
  "nodes-per-connection": { kind: "int", default: 1, min: 1, help: "swarm streams sharing one HTTP/2 connection" },
  part: { kind: "choice", default: "all", choices: ["all", "alloc", "ingest"], help: "which part to run" },
  tls: { kind: "bool", help: "ingest: run plaintext and mutual TLS in this run and compare them" },
  seed: { kind: "int", default: 1, min: 0, help: "seed of the simulated workload" },
} as const satisfies Record<string, FlagSpec>;

type SchedulerFlags = Flags<typeof FLAGS>;

/** Anchor from YARN's published scheduler throughput (far bigger hardware); the target here, on one core. */
const TARGET_ALLOCATIONS_PER_SEC = 40_000;
const TARGET_HEARTBEATS_PER_SEC = 10_000;
const TARGET_BYTES_PER_IDLE_NODE = 4 * 1024;
/** Issue 12: heartbeat ingest with TLS at least this fraction of plaintext. */
const TARGET_TLS_INGEST_RATIO = 0.8;
/** A run during which the machine's cores were this busy measured queueing for a core more than the server. */
const SATURATED_MACHINE_FRACTION = 0.9;
const NODE_CAPACITY: Resources = { vcoresMilli: 16_000, memoryMb: 65_536 };
const CONTAINER: Resources = { vcoresMilli: 1_000, memoryMb: 1_024 };
/** New applications arrive whenever fewer containers than this are outstanding, so the scheduler always has work. */
const DEMAND_CONTAINERS = 5_000;
const EPOCH = 1_700_000_000_000;

// ------------------------------------------------------------------------------------------------ (1) allocation

/** What one allocation run measured. */
interface AllocationResult {
  nodes: number;
  wallMs: number;
  /** Time inside Scheduler calls (heartbeat handling and asks), a subset of wallMs. */
  schedulerMs: number;
  heartbeats: number;
  allocations: number;
  releases: number;
  appsSubmitted: number;
  appsFinished: number;
  liveContainers: number;
  hungryApps: number;
  allocationsPerSec: number;
  allocationsPerSchedulerSec: number;
  heartbeatsPerSec: number;
  heapNodeTableBytes: number;
  heapLiveStateBytes: number;
  liveContainersAtHeapCheck: number;
}

interface SimApp {
  seq: number;
  total: number;
  granted: number;
  released: number;
}

/** Drives the pure Scheduler with the workload described at the top of this file. */
async function runAllocation(nodeCount: number, f: SchedulerFlags): Promise<AllocationResult> {
  const rng = new SeededRng(f.seed);
  const lifetimeRounds = f["lifetime-rounds"];
  // Harness state first, so that the heap deltas below are the scheduler's.
  const nodeIds = Array.from({ length: nodeCount }, (_, i) => `node-${String(i).padStart(5, "0")}`);
  const basePrimaryMilli = Int32Array.from({ length: nodeCount }, () => rng.int(NODE_CAPACITY.vcoresMilli / 2));
  const basePrimaryMb = Int32Array.from({ length: nodeCount }, () => rng.int(NODE_CAPACITY.memoryMb / 2));
  const dueIds: string[][] = Array.from({ length: nodeCount }, () => []);
  const dueRounds: number[][] = Array.from({ length: nodeCount }, () => []);
  const apps = new Map<string, SimApp>();
  const hungry = new Set<string>();
  let containerSeq = 0;
  let appSeq = 0;
  let outstanding = 0;
  let heartbeats = 0;
  let allocations = 0;
  let releases = 0;
  let appsSubmitted = 0;
  let appsFinished = 0;

  const heap0 = await settledMemory();
  // The resource manager's id generator looks the application up the same way.
  const scheduler = new Scheduler(
    new StockSchedulerPolicy(),
    { reserveFraction: 0.1, maxAllocationsPerHeartbeat: 0 },
    (appId) => formatContainerId(EPOCH, apps.get(appId)?.seq ?? 0, 1, ++containerSeq),
  );
  for (const id of nodeIds) scheduler.addNode(id, NODE_CAPACITY);
  const heap1 = await settledMemory();

  // Time inside Scheduler calls only; the harness's own bookkeeping around them is not counted.
  let schedulerMs = 0;
  const submit = (): void => {
    const seq = ++appSeq;
    const appId = formatAppId(EPOCH, seq);
    const total = 10 + rng.int(491);
    apps.set(appId, { seq, total, granted: 0, released: 0 });
    hungry.add(appId);
    const t0 = performance.now();
    scheduler.addApp(appId, seq);
    scheduler.setAsks(appId, [{ priority: 0, resource: CONTAINER, count: total }]);
    schedulerMs += performance.now() - t0;
    outstanding += total;
    appsSubmitted++;
  };
  const onReleased = (alloc: Allocation): void => {
    releases++;
    const app = apps.get(alloc.appId);
    if (!app) return;
    app.released++;
    if (app.released === app.total) {
      const t0 = performance.now();
      scheduler.removeApp(alloc.appId);
      schedulerMs += performance.now() - t0;
      apps.delete(alloc.appId);
      appsFinished++;
    }
  };
  const finishing: string[] = [];
  const released: (Allocation | undefined)[] = [];
  // One node heartbeat, in the resource manager's order: completions, primary usage, grants.
  const heartbeat = (): void => {
    const i = heartbeats % nodeCount;
    const round = Math.floor(heartbeats / nodeCount);
    const nodeId = nodeIds[i]!;
    const ids = dueIds[i]!;
    const due = dueRounds[i]!;
    if (i === 0) {
      // Each job manager re-sends its remaining asks once a round (absolute counts, as Allocate does).
      const asks = [...hungry].map((appId) => {
        const app = apps.get(appId)!;
        return { appId, asks: [{ priority: 0, resource: CONTAINER, count: app.total - app.granted }] };
      });
      const t0 = performance.now();
      for (const a of asks) scheduler.setAsks(a.appId, a.asks);
      schedulerMs += performance.now() - t0;
    }
    finishing.length = 0;
    let kept = 0;
    for (let q = 0; q < ids.length; q++) {
      if (due[q]! <= round) {
        finishing.push(ids[q]!);
      } else {
        ids[kept] = ids[q]!;
        due[kept] = due[q]!;
        kept++;
      }
    }
    ids.length = kept;
    due.length = kept;
    const base = basePrimaryMilli[i]!;
    const usage = { vcoresMilli: base + Math.round((rng.next() - 0.5) * 0.2 * base), memoryMb: basePrimaryMb[i]! };
    const t0 = performance.now();
    released.length = 0;
    for (const id of finishing) released.push(scheduler.release(id));
    scheduler.updatePrimaryUsage(nodeId, usage);
    const granted = scheduler.allocateOnNode(nodeId);
    schedulerMs += performance.now() - t0;
    for (const alloc of released) if (alloc) onReleased(alloc);
    for (const alloc of granted) {
      ids.push(alloc.containerId);
      due.push(round + 1 + rng.int(lifetimeRounds));
      const app = apps.get(alloc.appId)!;
      app.granted++;
      if (app.granted === app.total) hungry.delete(alloc.appId);
    }
    allocations += granted.length;
    outstanding -= granted.length;
    while (outstanding < DEMAND_CONTAINERS) submit();
    heartbeats++;
  };

  // Warm-up: fill the cluster and let the JIT settle; not measured.
  const warmupHeartbeats = (lifetimeRounds + 2) * nodeCount;
  while (heartbeats < warmupHeartbeats) heartbeat();
  const liveAtHeapCheck = scheduler.stats().containers;
  const heap2 = await settledMemory();

  const counts0 = { heartbeats, allocations, releases, appsSubmitted, appsFinished };
  schedulerMs = 0;
  const start = performance.now();
  const deadline = start + f.seconds * 1000;
  for (;;) {
    for (let n = 0; n < 512; n++) heartbeat();
    if (performance.now() >= deadline) break;
  }
  const wallMs = performance.now() - start;
  const stats = scheduler.stats();
  const allocated = allocations - counts0.allocations;
  return {
    nodes: nodeCount,
    wallMs,
    schedulerMs,
    heartbeats: heartbeats - counts0.heartbeats,
    allocations: allocated,
    releases: releases - counts0.releases,
    appsSubmitted: appsSubmitted - counts0.appsSubmitted,
    appsFinished: appsFinished - counts0.appsFinished,
    liveContainers: stats.containers,
    hungryApps: stats.hungryApps,
    allocationsPerSec: allocated / (wallMs / 1000),
    allocationsPerSchedulerSec: allocated / (schedulerMs / 1000),
    heartbeatsPerSec: (heartbeats - counts0.heartbeats) / (wallMs / 1000),
    heapNodeTableBytes: heap1.heapUsedBytes - heap0.heapUsedBytes,
    heapLiveStateBytes: heap2.heapUsedBytes - heap1.heapUsedBytes,
    liveContainersAtHeapCheck: liveAtHeapCheck,
  };
}

// ------------------------------------------------------------------------------------------------ (2) ingest

/** Cumulative load figures of a server process. */
interface LoadSnapshot {
  cpuMs: number;
  elu: EventLoopUtilization;
  rssBytes: number;
  heapUsedBytes: number;
}

/** Plaintext, or mutual TLS under a bench CA. */
type Transport = "plaintext" | "TLS";

/** A heartbeat server under test: the resource manager in this process, or the echo baseline in its own. */
interface IngestServer {
  readonly kind: "rm" | "echo";
  readonly transport: Transport;
  readonly label: string;
  readonly address: string;
  /** Memory after full collections. */
  memory(): Promise<MemorySnapshot>;
  /** Cumulative CPU and event-loop use, and current memory (no collection). */
  load(): Promise<LoadSnapshot>;
  stop(): Promise<void>;
}

function localLoad(): LoadSnapshot {
  const cpu = process.cpuUsage();
  const m = process.memoryUsage();
  return {
    cpuMs: (cpu.user + cpu.system) / 1000,
    elu: performance.eventLoopUtilization(),
    rssBytes: m.rss,
    heapUsedBytes: m.heapUsed,
  };
}

/** What a TLS run uses: the servers' certificate and the swarm's, both `daemon` ones from one bench CA. */
interface BenchPki {
  dir: string;
  server: TlsFiles;
  swarm: TlsFiles;
}

/** A CA in a temp dir and the two certificates the TLS runs present. */
async function makeBenchPki(): Promise<BenchPki> {
  const dir = await mkdtemp(join(tmpdir(), "harvest-bench-pki-"));
  const caDir = join(dir, "ca");
  const ca = (await createCa(caDir, { name: "Harvest bench CA" })).cert;
  const hosts = ["127.0.0.1", "localhost"];
  const server = await issueCertificate(caDir, dir, { name: "resourcemanager", role: "daemon", hosts });
  const swarm = await issueCertificate(caDir, dir, { name: "node-swarm", role: "daemon", hosts });
  return { dir, server: { ca, ...server }, swarm: { ca, ...swarm } };
}

/** The label of a server in the tables: its transport is named only when the run compares transports. */
function serverLabel(name: string, where: string, transport: Transport, f: SchedulerFlags): string {
  return f.tls ? `${name}, ${transport} (${where})` : `${name} (${where})`;
}

async function startResourceManager(f: SchedulerFlags, tls?: TlsFiles): Promise<IngestServer> {
  const dir = await mkdtemp(join(tmpdir(), "harvest-bench-ingest-"));
  // Node expiry is raised so that the first nodes registered are not expired while the rest register and the idle
  // memory is measured (the swarm heartbeats only after that); it changes no per-heartbeat work.
  // With TLS the resource manager needs a secret (it signs container and AM tokens; no containers here).
  const security = tls ? { tls, secret: randomBytes(16).toString("hex") } : { insecure: true };
  const rm = new ResourceManager(
    { dataDir: dir, nodeExpiryMs: 120_000, ...security },
    { logger: new Logger("rm", "warn") },
  );
  await rm.start();
  const transport: Transport = tls ? "TLS" : "plaintext";
  return {
    kind: "rm",
    transport,
    label: serverLabel("resource manager", "this process", transport, f),
    address: rm.address,
    memory: settledMemory,
    load: () => Promise.resolve(localLoad()),
    stop: async () => {
      await rm.stop();
      await removeDir(dir, { recursive: true, force: true });
    },
  };
}

async function startEchoServer(f: SchedulerFlags, tls?: TlsFiles): Promise<IngestServer> {
  const helper = new HelperProcess(fileURLToPath(new URL("./echo-tracker.js", import.meta.url)), tlsArgs(tls), [
    "--expose-gc",
  ]);
  const { address } = await helper.next<HelperMessage & { address: string }>("listening", 15_000);
  const transport: Transport = tls ? "TLS" : "plaintext";
  return {
    kind: "echo",
    transport,
    label: serverLabel("echo server", "baseline, own process", transport, f),
    address,
    memory: async () => {
      helper.send("mem");
      return helper.next<HelperMessage & MemorySnapshot>("mem", 15_000);
    },
    load: async () => {
      helper.send("load");
      return helper.next<HelperMessage & LoadSnapshot>("load", 15_000);
    },
    stop: async () => {
      helper.send("stop");
      await helper.close();
    },
  };
}

/** The helper processes' TLS arguments (none: plaintext). */
function tlsArgs(tls: TlsFiles | undefined): string[] {
  return tls ? ["--ca", tls.ca, "--cert", tls.cert, "--key", tls.key] : [];
}

/** What the swarm reports at the end of its window. */
interface SwarmResult extends HelperMessage {
  nodes: number;
  connections: number;
  intervalMs: number;
  windowMs: number;
  sent: number;
  acksInWindow: number;
  acksAfterWindow: number;
  unanswered: number;
  streamErrors: number;
  lastError: string;
  maxSendLagMs: number;
  latencyMs: Summary;
  /** Latency of heartbeats sent after the window's first second. */
  steadyLatencyMs: Summary;
  clientCpuMs: number;
  clientEventLoopUtilization: number;
}

/** What one ingest run measured. */
interface IngestResult {
  server: string;
  kind: IngestServer["kind"];
  transport: Transport;
  registerWallMs: number;
  registerLatencyMs: Summary;
  swarm: SwarmResult;
  sentPerSec: number;
  ackedPerSec: number;
  serverCpuFraction: number;
  serverEventLoopUtilization: number;
  /** Busy fraction of all the machine's cores during the window (anything else running included). */
  machineBusyFraction: number;
  before: MemorySnapshot;
  idle: MemorySnapshot;
  after: MemorySnapshot;
  peakRssBytes: number;
  peakHeapBytes: number;
  rssPerIdleNodeBytes: number;
  heapPerIdleNodeBytes: number;
  externalPerIdleNodeBytes: number;
}

async function runIngest(
  server: IngestServer,
  f: SchedulerFlags,
  progress: (line: string) => void,
  swarmTls?: TlsFiles,
): Promise<IngestResult> {
  const before = await server.memory();
  const swarm = new HelperProcess(fileURLToPath(new URL("./node-swarm.js", import.meta.url)), [
    "--target",
    server.address,
    "--nodes",
    String(f["sim-nodes"]),
    "--rate",
    String(f.rate),
    "--seconds",
    String(f.seconds),
    "--per-connection",
    String(f["nodes-per-connection"]),
    ...tlsArgs(swarmTls),
  ]);
  try {
    const registered = await swarm.next<HelperMessage & { registerWallMs: number; registerLatencyMs: Summary }>(
      "registered",
      180_000,
    );
    progress(
      `${server.label}: ${f["sim-nodes"]} nodes registered in ${fmt(registered.registerWallMs / 1000, 2)} s; heartbeating`,
    );
    const idle = await server.memory();
    const load0 = await server.load();
    const machine0 = readProcStatTotals();
    swarm.send("go");
    const windowEnd = Date.now() + f.seconds * 1000;
    let peakRss = load0.rssBytes;
    let peakHeap = load0.heapUsedBytes;
    while (Date.now() < windowEnd) {
      await sleep(Math.min(500, Math.max(0, windowEnd - Date.now())));
      const l = await server.load();
      peakRss = Math.max(peakRss, l.rssBytes);
      peakHeap = Math.max(peakHeap, l.heapUsedBytes);
    }
    const load1 = await server.load();
    const machine1 = readProcStatTotals();
    const result = await swarm.next<SwarmResult>("result", 60_000);
    const after = await server.memory();
    const wallMs = load1.elu.idle + load1.elu.active - (load0.elu.idle + load0.elu.active);
    const n = f["sim-nodes"];
    return {
      server: server.label,
      kind: server.kind,
      transport: server.transport,
      registerWallMs: registered.registerWallMs,
      registerLatencyMs: registered.registerLatencyMs,
      swarm: result,
      sentPerSec: result.sent / (result.windowMs / 1000),
      ackedPerSec: result.acksInWindow / (result.windowMs / 1000),
      serverCpuFraction: (load1.cpuMs - load0.cpuMs) / wallMs,
      serverEventLoopUtilization: (load1.elu.active - load0.elu.active) / wallMs,
      machineBusyFraction: (machine1.busyMs - machine0.busyMs) / Math.max(1, machine1.totalMs - machine0.totalMs),
      before,
      idle,
      after,
      peakRssBytes: peakRss,
      peakHeapBytes: peakHeap,
      rssPerIdleNodeBytes: (idle.rssBytes - before.rssBytes) / n,
      heapPerIdleNodeBytes: (idle.heapUsedBytes - before.heapUsedBytes) / n,
      externalPerIdleNodeBytes: (idle.externalBytes - before.externalBytes) / n,
    };
  } finally {
    swarm.send("stop");
    await swarm.close();
  }
}

// ------------------------------------------------------------------------------------------------ report

function allocationLines(run: AllocationResult, base: AllocationResult | undefined, f: SchedulerFlags): string[] {
  const row = (label: string, r: AllocationResult): string[] => [
    label,
    r.nodes.toLocaleString("en-US"),
    fmt(r.heartbeatsPerSec, 0),
    fmt(r.allocationsPerSec, 0),
    fmt(r.allocationsPerSchedulerSec, 0),
    fmt(r.allocations / r.heartbeats, 2),
    r.liveContainers.toLocaleString("en-US"),
    r.appsFinished.toLocaleString("en-US"),
  ];
  const rows = [row("this run", run)];
  if (base) {
    rows.push(row("baseline (smaller cluster)", base));
    rows.push([
      "ratio run / baseline",
      "",
      ratio(run.heartbeatsPerSec, base.heartbeatsPerSec),
      ratio(run.allocationsPerSec, base.allocationsPerSec),
      ratio(run.allocationsPerSchedulerSec, base.allocationsPerSchedulerSec),
      "",
      "",
      "",
    ]);
  }
  const perNode = run.heapNodeTableBytes / run.nodes;
  const perContainer = run.heapLiveStateBytes / Math.max(1, run.liveContainersAtHeapCheck);
  return [
    `scheduler allocations: pure Scheduler (stock policy), ${fmt(f.seconds, 1)} s per run, one thread`,
    `  nodes 16 vcores / 64 GB, primary 0-50 % random (+-10 % per heartbeat), reserve 10 %; apps ask 10..500 x 1 vcore / 1 GB;`,
    `  containers live 1..${f["lifetime-rounds"]} heartbeats of their node; >= ${DEMAND_CONTAINERS.toLocaleString("en-US")} containers always outstanding`,
    "",
    ...table(
      [
        "",
        "nodes",
        "heartbeats/s",
        "allocations/s",
        "allocs/s in scheduler",
        "allocs/hb",
        "live containers",
        "apps done",
      ],
      rows,
    ),
    "",
    `allocations/s vs target ${TARGET_ALLOCATIONS_PER_SEC.toLocaleString("en-US")}/s (YARN's published figure, far bigger hardware): ${ratio(run.allocationsPerSec, TARGET_ALLOCATIONS_PER_SEC)} (${run.allocationsPerSec >= TARGET_ALLOCATIONS_PER_SEC ? "met" : "NOT met"})`,
    `scheduler heap: node table ${mib(run.heapNodeTableBytes)} for ${run.nodes.toLocaleString("en-US")} nodes (${fmt(perNode, 0)} B/node, ids not counted);` +
      ` live state +${mib(run.heapLiveStateBytes)} with ${run.liveContainersAtHeapCheck.toLocaleString("en-US")} containers (${fmt(perContainer, 0)} B/container, incl. apps and ~16 B/container of harness queues)`,
    ...(canCollectGarbage() ? [] : ["  (no --expose-gc: heap figures include garbage)"]),
  ];
}

function ingestLines(runs: IngestResult[], f: SchedulerFlags): string[] {
  const find = (kind: IngestResult["kind"], transport: Transport): IngestResult | undefined =>
    runs.find((r) => r.kind === kind && r.transport === transport);
  const transports: Transport[] = f.tls ? ["plaintext", "TLS"] : ["plaintext"];
  const suffix = (t: Transport): string => (f.tls ? `, ${t}` : "");
  const conn = runs[0]?.swarm.connections ?? 0;
  const row = (r: IngestResult): string[] => [
    r.server,
    fmt(r.sentPerSec, 0),
    fmt(r.ackedPerSec, 0),
    fmt(r.swarm.latencyMs.p50, 2),
    fmt(r.swarm.latencyMs.p99, 2),
    fmt(r.swarm.latencyMs.max, 1),
    fmt(r.swarm.steadyLatencyMs.p99, 2),
    `${fmt(r.serverCpuFraction * 100, 0)} %`,
    `${fmt(r.serverEventLoopUtilization * 100, 0)} %`,
    `${fmt((r.swarm.clientCpuMs / r.swarm.windowMs) * 100, 0)} %`,
    `${fmt(r.machineBusyFraction * 100, 0)} % of ${cpus().length}`,
    String(r.swarm.unanswered + r.swarm.streamErrors),
  ];
  // a / b of every figure of a row (latency ratios > 1 mean a is slower).
  const ratioRow = (label: string, a: IngestResult, b: IngestResult): string[] => [
    label,
    ratio(a.sentPerSec, b.sentPerSec),
    ratio(a.ackedPerSec, b.ackedPerSec),
    ratio(a.swarm.latencyMs.p50, b.swarm.latencyMs.p50),
    ratio(a.swarm.latencyMs.p99, b.swarm.latencyMs.p99),
    ratio(a.swarm.latencyMs.max, b.swarm.latencyMs.max),
    ratio(a.swarm.steadyLatencyMs.p99, b.swarm.steadyLatencyMs.p99),
    ratio(a.serverCpuFraction, b.serverCpuFraction),
    "",
    ratio(a.swarm.clientCpuMs / a.swarm.windowMs, b.swarm.clientCpuMs / b.swarm.windowMs),
    "",
    "",
  ];
  const rows = runs.map(row);
  for (const t of transports) {
    const rm = find("rm", t);
    const echo = find("echo", t);
    if (rm && echo) rows.push(ratioRow(`ratio RM / echo${suffix(t)}`, rm, echo));
  }
  if (f.tls) {
    for (const kind of ["rm", "echo"] as const) {
      const plain = find(kind, "plaintext");
      const tls = find(kind, "TLS");
      if (plain && tls) rows.push(ratioRow(`ratio ${kind === "rm" ? "RM" : "echo"} TLS / plaintext`, tls, plain));
    }
  }
  const memRows = runs.map((r) => [
    r.server,
    fmt(r.rssPerIdleNodeBytes / 1024, 2),
    fmt(r.heapPerIdleNodeBytes / 1024, 2),
    fmt(r.externalPerIdleNodeBytes / 1024, 2),
    mib(r.idle.rssBytes),
    mib(r.idle.heapUsedBytes),
    mib(r.peakRssBytes),
    mib(r.peakHeapBytes),
  ]);
  for (const t of transports) {
    const rm = find("rm", t);
    const echo = find("echo", t);
    if (!rm || !echo) continue;
    memRows.push([
      `RM's own (RM - echo)${suffix(t)}`,
      fmt((rm.rssPerIdleNodeBytes - echo.rssPerIdleNodeBytes) / 1024, 2),
      fmt((rm.heapPerIdleNodeBytes - echo.heapPerIdleNodeBytes) / 1024, 2),
      fmt((rm.externalPerIdleNodeBytes - echo.externalPerIdleNodeBytes) / 1024, 2),
      "",
      "",
      "",
      "",
    ]);
  }
  const lines = [
    `heartbeat ingest: ${f["sim-nodes"].toLocaleString("en-US")} NodeChannel streams over ${conn.toLocaleString("en-US")} connections from a helper process,` +
      ` offered ${fmt(f.rate, 0)} heartbeats/s open-loop (every ${fmt(runs[0]?.swarm.intervalMs ?? 0, 0)} ms per node) for ${fmt(f.seconds, 1)} s; idle nodes` +
      (f.tls ? "; plaintext, then mutual TLS" : ""),
    "",
    ...table(
      [
        "server",
        "sent/s",
        "acked/s",
        "p50 ms",
        "p99 ms",
        "max ms",
        "p99 after 1st s",
        "server CPU",
        "server loop",
        "swarm CPU",
        "machine busy",
        "lost",
      ],
      rows,
    ),
    "",
    "latency is measured in the swarm (send -> ack by seq), so it includes the swarm's own delays; the echo baseline has",
    "the same swarm. server CPU is of one core; server loop is its event loop's busy share (waiting for a core included).",
    "",
    ...table(
      ["memory per idle node", "RSS KiB", "heap KiB", "external KiB", "RSS idle", "heap idle", "RSS peak", "heap peak"],
      memRows,
    ),
    "",
  ];
  for (const t of transports) {
    const rm = find("rm", t);
    if (!rm) continue;
    lines.push(
      `RM${f.tls ? ` (${t})` : ""} sustained ${fmt(rm.ackedPerSec, 0)} heartbeats/s vs target ${TARGET_HEARTBEATS_PER_SEC.toLocaleString("en-US")}: ${rm.ackedPerSec >= TARGET_HEARTBEATS_PER_SEC * 0.99 ? "met" : "NOT met"}` +
        `; memory per idle node ${fmt(rm.rssPerIdleNodeBytes / 1024, 2)} KiB RSS, ${fmt(rm.heapPerIdleNodeBytes / 1024, 2)} KiB heap vs target < ${TARGET_BYTES_PER_IDLE_NODE / 1024} KiB: ${Math.max(rm.rssPerIdleNodeBytes, rm.heapPerIdleNodeBytes) < TARGET_BYTES_PER_IDLE_NODE ? "met" : "NOT met"}`,
    );
    lines.push(
      `RM${f.tls ? ` (${t})` : ""} after the run (settled): RSS ${mib(rm.after.rssBytes)}, heap ${mib(rm.after.heapUsedBytes)}; registration of ${f["sim-nodes"].toLocaleString("en-US")} nodes took ${fmt(rm.registerWallMs / 1000, 2)} s (p99 ${fmt(rm.registerLatencyMs.p99, 1)} ms each, ${100} in flight)`,
    );
    if (rm.swarm.streamErrors > 0)
      lines.push(`  stream errors: ${rm.swarm.streamErrors} (last: ${rm.swarm.lastError})`);
  }
  for (const r of runs) {
    if (r.swarm.maxSendLagMs > 50)
      lines.push(
        `  note: the swarm fell up to ${fmt(r.swarm.maxSendLagMs, 0)} ms behind its schedule against the ${r.server.split(" (")[0]}`,
      );
  }
  const comparison = tlsComparison(runs, f);
  if (comparison) lines.push("", ...comparison.lines);
  return lines;
}

/** One figure of the TLS comparison: plaintext, TLS and TLS vs plaintext with the goal. */
interface TlsFigure {
  figure: string;
  plaintext: number;
  tls: number;
  check: GoalCheck;
  /** Only the resource manager's heartbeat figures are judged against the goal; the rest explain. */
  judged: boolean;
}

/** TLS vs plaintext, for --tls: the issue's goal on the resource manager's figures, the echo server's for context. */
function tlsComparison(runs: IngestResult[], f: SchedulerFlags): { lines: string[]; figures: TlsFigure[] } | undefined {
  if (!f.tls) return undefined;
  const figures: TlsFigure[] = [];
  for (const kind of ["rm", "echo"] as const) {
    const plain = runs.find((r) => r.kind === kind && r.transport === "plaintext");
    const tls = runs.find((r) => r.kind === kind && r.transport === "TLS");
    if (!plain || !tls) continue;
    const who = kind === "rm" ? "RM" : "echo";
    const judged = kind === "rm";
    const add = (
      figure: string,
      pick: (r: IngestResult) => number,
      lowerIsBetter: boolean,
      isJudged = judged,
    ): void => {
      figures.push({
        figure: `${who} ${figure}`,
        plaintext: pick(plain),
        tls: pick(tls),
        check: goalRatio(pick(tls), pick(plain), TARGET_TLS_INGEST_RATIO, lowerIsBetter),
        judged: isJudged,
      });
    };
    // Judged: what an ingesting resource manager is for (heartbeats taken in at the offered rate, and how soon each is
    // answered once running; the window's first second is JIT warm-up and the first burst after the idle pause).
    add("acked heartbeats/s", (r) => r.ackedPerSec, false);
    add("p50 latency ms", (r) => r.swarm.latencyMs.p50, true);
    add("p99 after 1st s ms", (r) => r.swarm.steadyLatencyMs.p99, true);
    add("p99 latency ms", (r) => r.swarm.latencyMs.p99, true, false);
    // CPU per heartbeat is the cost behind capacity (1e6 / us = heartbeats/s one core could take), and it is less
    // disturbed by whatever else runs on the machine than latency is.
    add("server CPU us/heartbeat", (r) => (r.serverCpuFraction * 1e6) / r.ackedPerSec, true, false);
    add("swarm CPU us/heartbeat", (r) => (r.swarm.clientCpuMs * 1e3) / Math.max(1, r.swarm.sent), true, false);
    add("RSS KiB per idle node", (r) => r.rssPerIdleNodeBytes / 1024, true, false);
    add("registration s", (r) => r.registerWallMs / 1000, true, false);
  }
  if (figures.length === 0) return undefined;
  const digits = (name: string): number => (/ ms$| s$/.test(name) ? 2 : /KiB|us\//.test(name) ? 1 : 0);
  const judged = figures.filter((x) => x.judged);
  const allMet = judged.length > 0 && judged.every((x) => x.check.met);
  const lines = [
    `heartbeat ingest, TLS vs plaintext (issue 12 goal: TLS >= ${fmt(TARGET_TLS_INGEST_RATIO, 1)}x plaintext at the offered ${fmt(f.rate, 0)} heartbeats/s):`,
    "",
    ...table(
      ["figure", "plaintext", "TLS", "TLS vs plaintext", "goal"],
      figures.map((x) => [
        x.figure,
        fmt(x.plaintext, digits(x.figure)),
        fmt(x.tls, digits(x.figure)),
        x.check.text,
        x.judged ? x.check.verdict : "",
      ]),
    ),
    "",
    "TLS vs plaintext is TLS / plaintext for rates and plaintext / TLS for latencies, CPU, memory and time (a speed: 0.80x",
    "means 1.25x as long or as much); the goal is judged on the resource manager's acked heartbeats/s, p50 latency and p99",
    "after the window's first second (JIT warm-up and the first burst after the idle pause land in that second).",
    `heartbeat ingest with TLS vs goal ${fmt(TARGET_TLS_INGEST_RATIO, 1)}x plaintext: ${allMet ? "met" : "NOT met"}` +
      ` (${judged.map((x) => `${x.figure.replace(/^RM /, "")} ${x.check.text}`).join(", ")})`,
  ];
  const saturated = runs.filter((r) => r.machineBusyFraction >= SATURATED_MACHINE_FRACTION);
  if (saturated.length > 0)
    lines.push(
      `  note: the machine's cores were >= ${fmt(SATURATED_MACHINE_FRACTION * 100, 0)} % busy during the run${saturated.length > 1 ? "s" : ""} against the ` +
        `${saturated.map((r) => r.server.split(" (")[0]).join("; ")}: latencies there are mostly waiting for a core (the swarm shares ` +
        "the machine), and the ratios of CPU per heartbeat tell TLS's cost better; compare latency at a --rate with headroom",
    );
  return { lines, figures };
}

async function run(argv: readonly string[], progress: (line: string) => void): Promise<BenchReport> {
  const f = parseFlags(argv, FLAGS);
  const load = loadavg();
  const lines: string[] = [`machine load average before the run: ${load.map((x) => fmt(x, 2)).join(" ")}`, ""];
  const result: Record<string, unknown> = { flags: f, loadAverage: load };
  // Ingest first: the resource manager's memory is measured in a process not yet grown by the allocation runs.
  if (f.part !== "alloc") {
    const runs: IngestResult[] = [];
    const pki = f.tls ? await makeBenchPki() : undefined;
    try {
      // Plaintext first, then TLS: each transport's resource manager run and its echo baseline side by side.
      for (const tls of pki ? [undefined, pki] : [undefined]) {
        for (const start of [startResourceManager, startEchoServer]) {
          const server = await start(f, tls?.server);
          try {
            runs.push(await runIngest(server, f, progress, tls?.swarm));
          } finally {
            await server.stop();
          }
        }
      }
    } finally {
      if (pki) await removeDir(pki.dir, { recursive: true, force: true });
    }
    lines.push(...ingestLines(runs, f), "");
    result["ingest"] = runs;
    const comparison = tlsComparison(runs, f);
    if (comparison) result["tls"] = { goalRatio: TARGET_TLS_INGEST_RATIO, figures: comparison.figures };
  }
  if (f.part !== "ingest") {
    progress(`allocation: ${f.nodes} nodes for ${f.seconds} s`);
    const main = await runAllocation(f.nodes, f);
    let base: AllocationResult | undefined;
    if (f["baseline-nodes"] !== f.nodes) {
      progress(`allocation baseline: ${f["baseline-nodes"]} nodes for ${f.seconds} s`);
      base = await runAllocation(f["baseline-nodes"], f);
    }
    lines.push(...allocationLines(main, base, f));
    result["allocation"] = { run: main, baseline: base, targetPerSec: TARGET_ALLOCATIONS_PER_SEC };
  }
  return { lines, result };
}

/** `scheduler`: allocations/s of the pure scheduler and heartbeats/s the resource manager ingests over gRPC. */
export const schedulerBench: BenchDefinition = {
  name: "scheduler",
  summary: "allocations/s of the pure scheduler; heartbeat ingest of a real RM from a node swarm",
  flags: FLAGS,
  run,
};
