/** The scheduler bench's part (2): heartbeat ingest of a real resource manager from a swarm of simulated nodes. */
import { mkdtemp, rm as removeDir } from "node:fs/promises";
import { randomBytes } from "node:crypto";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { fileURLToPath } from "node:url";
import type { EventLoopUtilization } from "node:perf_hooks";
import { Logger } from "../common/log.js";
import { readProcStatTotals } from "../common/proc-stats.js";
import type { TlsFiles } from "../common/tls.js";
import { createCa, issueCertificate } from "../localcluster/cluster-ca.js";
import { ResourceManager } from "../resourcemanager/index.js";
import { HelperProcess } from "./line-channel.js";
import type { HelperMessage } from "./line-channel.js";
import { fmt, settledMemory } from "./report.js";
import type { MemorySnapshot, Summary } from "./report.js";
import type { SchedulerFlags } from "./scheduler-flags.js";

// ------------------------------------------------------------------------------------------------ (2) ingest

/** Cumulative load figures of a server process. */
interface LoadSnapshot {
  cpuMs: number;
  elu: EventLoopUtilization;
  rssBytes: number;
  heapUsedBytes: number;
}

/** Plaintext, or mutual TLS under a bench CA. */
export type Transport = "plaintext" | "TLS";

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
export async function makeBenchPki(): Promise<BenchPki> {
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

export async function startResourceManager(f: SchedulerFlags, tls?: TlsFiles): Promise<IngestServer> {
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

export async function startEchoServer(f: SchedulerFlags, tls?: TlsFiles): Promise<IngestServer> {
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
export interface IngestResult {
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

export async function runIngest(
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
