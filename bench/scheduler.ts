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
import { rm as removeDir } from "node:fs/promises";
import { cpus, loadavg } from "node:os";
import type { BenchDefinition, BenchReport } from "./definition.js";
import { parseFlags } from "./flags.js";
import { canCollectGarbage, fmt, goalRatio, mib, ratio, table } from "./report.js";
import type { GoalCheck } from "./report.js";
import {
  DEMAND_CONTAINERS,
  FLAGS,
  SATURATED_MACHINE_FRACTION,
  TARGET_ALLOCATIONS_PER_SEC,
  TARGET_BYTES_PER_IDLE_NODE,
  TARGET_HEARTBEATS_PER_SEC,
  TARGET_TLS_INGEST_RATIO,
} from "./scheduler-flags.js";
import type { SchedulerFlags } from "./scheduler-flags.js";
import { runAllocation } from "./scheduler-allocation.js";
import type { AllocationResult } from "./scheduler-allocation.js";
import { makeBenchPki, runIngest, startEchoServer, startResourceManager } from "./scheduler-ingest.js";
import type { IngestResult, Transport } from "./scheduler-ingest.js";

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
