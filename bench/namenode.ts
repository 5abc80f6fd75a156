/**
 * `npm run bench -- namenode`: metadata operations per second of a real NameNode over gRPC (create + addBlock +
 * complete of small files, each durable in LevelDB before the answer) from N concurrent clients, sent as DfsClient sends
 * them (on a ClientNamenode.NamespaceCalls stream per client, through client/namespace-channel.ts) and as one unary
 * call each, against read-only unary `stat` calls in the same run; then the namenode's heap per million blocks after building at least 200,000 blocks.
 * Datanodes are played over the real DatanodeChannel stream: they register and report every block as received, as a
 * real datanode would after finalizing it (bench/nn-load.ts). With `--ha`: the HA figures instead (bench/namenode-ha.ts).
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { call } from "../common/grpc.js";
import { Logger } from "../common/log.js";
import { NameNode } from "../namenode/index.js";
import type { BenchDefinition, BenchReport } from "./definition.js";
import { parseFlags } from "./flags.js";
import { goalRatio, fmt, mib, ratio, settledMemory, table } from "./report.js";
import {
  BLOCK_BYTES,
  durableRun,
  fakeDatanode,
  namespaceClients,
  reporter,
  streamCalls,
  waitForLiveDatanodes,
  writeSmallFile,
} from "./nn-load.js";
import type { DurableCalls } from "./nn-load.js";
import { runHa } from "./namenode-ha.js";

const FLAGS = {
  clients: { kind: "int", default: 32, min: 1, help: "concurrent clients (calls in flight)" },
  seconds: { kind: "number", default: 10, min: 1, help: "measured seconds of each throughput run" },
  blocks: { kind: "int", default: 200_000, min: 1000, help: "blocks to build for the memory figure" },
  "blocks-per-file": { kind: "int", default: 50, min: 1, help: "blocks per file in the memory build" },
  ha: {
    kind: "bool",
    help: "instead: durable ops/s of an HA pair (3-member etcd on loopback) beside a lone namenode, the ensemble's own put ceiling, and failover times",
  },
  rounds: { kind: "int", default: 3, min: 1, help: "with --ha: rounds of the lone and the HA throughput runs" },
  kills: {
    kind: "int",
    default: 10,
    min: 0,
    help: "with --ha: kill -9 of the active namenode per session TTL (5 s, 2 s)",
  },
} as const;

/** Hadoop's published NNThroughputBenchmark figure for `open` against a remote namenode, ops/s. */
const HADOOP_ANCHOR_OPS = 10_500;
/** HDFS's rule of thumb: about 1 GB of namenode heap per million blocks (with their files). */
const HDFS_BYTES_PER_MILLION_BLOCKS = 1e9;
/** Issue 17: durable create+addBlock+complete at least this fraction of the stat baseline's ops/s. */
const DURABLE_GOAL = 0.8;

async function run(argv: readonly string[], progress: (line: string) => void): Promise<BenchReport> {
  const f = parseFlags(argv, FLAGS);
  if (f.ha) return runHa(f, progress);
  const dir = mkdtempSync(join(tmpdir(), "harvest-bench-nn-"));
  const before = await settledMemory();
  const nn = new NameNode(
    {
      dataDir: dir,
      defaultReplication: 3,
      defaultBlockSizeBytes: BLOCK_BYTES * 1024,
      replicationIntervalMs: 5_000,
      // The clients below claim the user "bench", which owns the namespace here (it makes /bench under the root).
      superuser: "bench",
    },
    { logger: new Logger("nn", "warn") },
  );
  await nn.start();
  const dns = ["dn-1", "dn-2", "dn-3"].map((id, i) => fakeDatanode(nn.address, id, `/rack-${(i % 2) + 1}`));
  const { clients, channels } = namespaceClients(nn.address, f.clients);
  try {
    await waitForLiveDatanodes(clients[0]!, 3);
    await call(clients[0]!, clients[0]!.mkdirs, { path: "/bench", owner: "bench" });

    const received = reporter(dns);

    /** How the durable calls travel: one unary call each, or on a NamespaceCalls stream per client (DfsClient's way). */
    type Via = "unary" | "stream";
    const calls = (i: number, via: Via): DurableCalls => {
      const c = clients[i]!;
      if (via === "stream") return streamCalls(channels[i]!);
      return {
        create: (req) => call(c, c.create, req),
        addBlock: (req) => call(c, c.addBlock, req),
        complete: (req) => call(c, c.complete, req),
      };
    };
    const writeFile = (i: number, via: Via, path: string, blocks: number, name: string): Promise<void> =>
      writeSmallFile(calls(i, via), received, path, blocks, name);

    // (1) Durable metadata operations, on the stream as DfsClient sends them, then as unary calls.
    let files = 0;
    const durable: Record<Via, { ops: number; files: number; secs: number }> = {
      stream: { ops: 0, files: 0, secs: 0 },
      unary: { ops: 0, files: 0, secs: 0 },
    };
    for (const via of ["stream", "unary"] as const) {
      progress(`create + addBlock + complete (${via}) from ${f.clients} clients for ${f.seconds} s`);
      durable[via] = await durableRun(f.clients, f.seconds, (i) => calls(i, via), received, `/bench/${via}`);
      files += durable[via].files;
    }
    const writeOps = durable.stream.ops;

    // Baseline: read-only stat calls (no disk) at the same concurrency.
    progress(`stat from ${f.clients} clients for ${f.seconds} s (baseline)`);
    let stats = 0;
    let deadline = performance.now() + f.seconds * 1000;
    let t0 = performance.now();
    await Promise.all(
      clients.map(async (c, i) => {
        while (performance.now() < deadline) {
          await call(c, c.stat, { path: `/bench/stream-c${i}-f0` });
          stats++;
        }
      }),
    );
    const statOps = stats / ((performance.now() - t0) / 1000);

    // (2) Memory: grow the namespace to at least f.blocks blocks, then measure the heap after full collections.
    const perFile = f["blocks-per-file"];
    const already = files;
    const needFiles = Math.max(0, Math.ceil((f.blocks - already) / perFile));
    progress(`building ${needFiles} files x ${perFile} blocks (${needFiles * perFile + already} blocks in all)`);
    let next = 0;
    t0 = performance.now();
    await Promise.all(
      clients.map(async (_, i) => {
        for (;;) {
          const k = next++;
          if (k >= needFiles) return;
          await writeFile(i, "stream", `/bench/m${k}`, perFile, `bench-m-${i}`);
          if (k % 500 === 0) progress(`  ${k * perFile} blocks`);
        }
      }),
    );
    const buildSecs = (performance.now() - t0) / 1000;
    const totalBlocks = already + needFiles * perFile;
    const totalFiles = already + needFiles;
    const after = await settledMemory();
    const heapBytes = after.heapUsedBytes - before.heapUsedBytes;
    const perMillion = (heapBytes / totalBlocks) * 1e6;
    const lines = [
      `namenode metadata throughput: a real NameNode over gRPC on loopback, ${f.clients} concurrent clients, 3 datanodes (played over the real stream)`,
      "  every create/addBlock/complete is in LevelDB (synced) before its answer; stream: on one NamespaceCalls stream per",
      "  client, as DfsClient sends them; unary: one gRPC call each (stat is one unary call each)",
      "",
      ...table(
        ["operation", "ops/s", "files/s", "vs stat baseline", "vs Hadoop anchor (10.5k/s open)"],
        [
          ...(["stream", "unary"] as const).map((via) => [
            via === "stream" ? "create + addBlock + complete, stream" : "create + addBlock + complete, unary",
            fmt(durable[via].ops, 0),
            fmt(durable[via].files / durable[via].secs, 0),
            ratio(durable[via].ops, statOps),
            ratio(durable[via].ops, HADOOP_ANCHOR_OPS),
          ]),
          ["stat (baseline, read-only)", fmt(statOps, 0), "-", "1.00x", ratio(statOps, HADOOP_ANCHOR_OPS)],
        ],
      ),
      "",
      `namenode memory: ${totalFiles.toLocaleString("en-US")} files, ${totalBlocks.toLocaleString("en-US")} blocks (each reported by 3 datanodes)${needFiles > 0 ? `, the last ${(needFiles * perFile).toLocaleString("en-US")} built in ${fmt(buildSecs, 1)} s (${fmt((needFiles * (perFile + 2)) / buildSecs, 0)} durable ops/s)` : ""}`,
      `  heap ${mib(heapBytes)} over the empty process: ${fmt(heapBytes / totalBlocks, 0)} B per block with its share of files = ${mib(perMillion)} per million blocks`,
      `  HDFS rule of thumb: ~1 GB per million blocks; ratio ${ratio(perMillion, HDFS_BYTES_PER_MILLION_BLOCKS)}`,
      "",
      `goal (issue 17): durable create+addBlock+complete as DfsClient sends them ${goalRatio(writeOps, statOps, DURABLE_GOAL).text} of stat: ${goalRatio(writeOps, statOps, DURABLE_GOAL).verdict}`,
    ];
    return {
      lines,
      result: {
        flags: f,
        writeOps,
        durable,
        statOps,
        files,
        totalBlocks,
        totalFiles,
        heapBytes,
        bytesPerMillionBlocks: perMillion,
      },
    };
  } finally {
    for (const ch of channels) ch.close();
    for (const c of clients) c.close();
    for (const d of dns) d.stop();
    await nn.stop();
    rmSync(dir, { recursive: true, force: true });
  }
}

/** The namenode benchmark. */
export const namenodeBench: BenchDefinition = {
  name: "namenode",
  summary: "durable create+addBlock+complete ops/s over gRPC vs stat; namenode heap per million blocks",
  flags: FLAGS,
  run,
};
