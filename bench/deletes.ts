/**
 * `npm run bench -- deletes`: what a datanode's deletions cost the primary tenant's disk. A block store (the
 * datanode's, on real files in the temp directory: `TMPDIR` picks the disk) holds `--replicas` replicas; all are deleted at once, as a namenode's delete
 * commands for a large file arrive in one heartbeat, while a stand-in for the primary (a worker thread writing 4 KiB
 * and calling fdatasync every 5 ms on the same file system, as a database commits) records each fsync's latency.
 *
 * Baseline, in this run: the stock deletion (`deleteBytesPerSecond: 0`), which removes each replica's files when the
 * command comes, as HDFS does. Against it, Harvest's paced deletion (datanode/replica-trash.ts): the replicas go to a
 * trash directory and are freed `--chunk-mib` at a time at `--rate-mib` per second. A run with no deletion at all
 * gives the disk's own fsync latency. On a file system mounted without online discard the two deletions cost about
 * the same; the difference this bench shows is the discards' (see README, Deploying, "Data disks").
 */
import { randomBytes } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { Worker } from "node:worker_threads";
import { execFileSync } from "node:child_process";
import { BlockStore, chunkChecksums } from "../datanode/index.js";
import type { BenchDefinition, BenchReport } from "./definition.js";
import { parseFlags } from "./flags.js";
import type { FlagSpec, Flags } from "./flags.js";
import { fmt, ratio, summarize, table } from "./report.js";
import type { Summary } from "./report.js";

const FLAGS = {
  replicas: { kind: "int", default: 48, min: 1, help: "replicas deleted at once" },
  "replica-mib": { kind: "int", default: 64, min: 1, help: "size of each replica in MiB" },
  "rate-mib": { kind: "int", default: 1024, min: 1, help: "paced deletion: MiB freed a second (deleteBytesPerSecond)" },
  "chunk-mib": { kind: "int", default: 8, min: 1, help: "paced deletion: MiB freed at a time (deleteChunkBytes)" },
} as const satisfies Record<string, FlagSpec>;

type DeletesFlags = Flags<typeof FLAGS>;

const MiB = 1024 * 1024;
/** An fsync slower than this counts as a stall the primary would notice. */
const STALL_MS = 5;
/** The primary stand-in's period between commits. */
const PROBE_PERIOD_MS = 5;
/** Probing before the deletions start and after the space is freed. */
const SETTLE_MS = 1_000;

/** The primary stand-in: 4 KiB write + fdatasync every PROBE_PERIOD_MS until told to stop; posts the latencies. */
const PROBE = `
const { parentPort, workerData } = require("node:worker_threads");
const fs = require("node:fs");
const fd = fs.openSync(workerData.file, "w");
const page = Buffer.alloc(4096, 7);
const latencies = [];
let stop = false, offset = 0;
parentPort.on("message", () => { stop = true; });
const tick = () => {
  if (stop) { fs.closeSync(fd); parentPort.postMessage(latencies); return; }
  const t = performance.now();
  fs.writeSync(fd, page, 0, page.length, offset);
  fs.fdatasyncSync(fd);
  latencies.push([performance.timeOrigin + t, performance.now() - t]);
  offset = (offset + page.length) % (1 << 20);
  setTimeout(tick, workerData.periodMs);
};
tick();
`;

/** Starts the primary stand-in; `stop()` resolves with [start time (epoch ms), latency ms] of each fsync. */
function startProbe(file: string): { stop(): Promise<[number, number][]> } {
  const worker = new Worker(PROBE, { eval: true, workerData: { file, periodMs: PROBE_PERIOD_MS } });
  const result = new Promise<[number, number][]>((resolve, reject) => {
    worker.once("message", (m: [number, number][]) => resolve(m));
    worker.once("error", reject);
  });
  return {
    async stop() {
      worker.postMessage("stop");
      const r = await result;
      await worker.terminate();
      return r;
    },
  };
}

type Mode = "none" | "stock" | "paced";

interface ModeResult {
  mode: Mode;
  /** Latency of the primary's fsyncs from the deletions' start until the space was freed and SETTLE_MS more. */
  fsync: Summary;
  stalls: number;
  /** From the deletions' start until every replica's space was freed. */
  freedMs: number;
}

async function writeReplicas(store: BlockStore, count: number, bytes: number, data: Buffer): Promise<void> {
  for (let id = 1; id <= count; id++) {
    const w = await store.createRbw({ blockId: id, genStamp: 1 });
    for (let at = 0; at < bytes; at += data.length) {
      const piece = data.subarray(0, Math.min(data.length, bytes - at));
      await w.write(at, piece, chunkChecksums(piece));
    }
    await w.finalize(bytes);
  }
}

async function runMode(mode: Mode, root: string, f: DeletesFlags): Promise<ModeResult> {
  const dir = mkdtempSync(join(root, `harvest-bench-deletes-${mode}-`));
  const replicas = f.replicas;
  const replicaBytes = f["replica-mib"] * MiB;
  try {
    const store = await BlockStore.open({
      dataDir: join(dir, "dn"),
      directWrites: true,
      deleteBytesPerSecond: mode === "paced" ? f["rate-mib"] * MiB : 0,
      deleteChunkBytes: f["chunk-mib"] * MiB,
    });
    if (mode !== "none") await writeReplicas(store, replicas, replicaBytes, randomBytes(MiB));
    execFileSync("sync");
    await sleep(SETTLE_MS);
    const probe = startProbe(join(dir, "primary.db"));
    await sleep(SETTLE_MS);
    const start = performance.timeOrigin + performance.now();
    if (mode !== "none") {
      await Promise.all(Array.from({ length: replicas }, (_, i) => store.delete({ blockId: i + 1, genStamp: 1 })));
      await store.trashDrained();
    }
    const freedMs = performance.timeOrigin + performance.now() - start;
    await sleep(SETTLE_MS);
    const samples = (await probe.stop()).filter(([at]) => at >= start);
    await store.close();
    const latencies = samples.map(([, ms]) => ms);
    return {
      mode,
      fsync: summarize(latencies),
      stalls: latencies.filter((ms) => ms > STALL_MS).length,
      freedMs,
    };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

export const deletesBench: BenchDefinition = {
  name: "deletes",
  summary: "the primary's fsync latency while a datanode deletes replicas: stock (at once) vs paced",
  flags: FLAGS,
  async run(argv, progress): Promise<BenchReport> {
    const f = parseFlags(argv, FLAGS);
    const root = tmpdir();
    const results: ModeResult[] = [];
    for (const mode of ["none", "stock", "paced"] as const) {
      progress(`deletes: ${mode}`);
      results.push(await runMode(mode, root, f));
    }
    const byMode = (m: Mode): ModeResult => results.find((r) => r.mode === m)!;
    const stock = byMode("stock");
    const paced = byMode("paced");
    const label: Record<Mode, string> = {
      none: "no deletion (the disk alone)",
      stock: "stock: every replica removed at once",
      paced: `paced: ${f["chunk-mib"]} MiB at a time, ${f["rate-mib"]} MiB/s`,
    };
    const lines = [
      `The primary's 4 KiB write + fdatasync every ${PROBE_PERIOD_MS} ms while ${f.replicas} replicas of ` +
        `${f["replica-mib"]} MiB are deleted at once (${root})`,
      "",
      ...table(
        ["deletion", "fsyncs", "p50 ms", "p99 ms", "max ms", `> ${STALL_MS} ms`, "space freed after s"],
        results.map((r) => [
          label[r.mode],
          String(r.fsync.count),
          fmt(r.fsync.p50, 2),
          fmt(r.fsync.p99, 1),
          fmt(r.fsync.max, 1),
          String(r.stalls),
          r.mode === "none" ? "-" : fmt(r.freedMs / 1000, 2),
        ]),
      ),
      "",
      `stock / paced: p99 ${ratio(stock.fsync.p99, paced.fsync.p99)}, max ${ratio(stock.fsync.max, paced.fsync.max)}, ` +
        `fsyncs over ${STALL_MS} ms ${stock.stalls} against ${paced.stalls}`,
    ];
    return { lines, result: { root, results } };
  },
};
