/**
 * `npm run bench -- namenode`: metadata operations per second of a real NameNode over gRPC (create + addBlock +
 * complete of small files, each durable in LevelDB before the answer) from N concurrent clients, against read-only
 * `stat` calls in the same run; then the namenode's heap per million blocks after building at least 200,000 blocks.
 * Datanodes are played over the real DatanodeChannel stream: they register and report every block as received, as a
 * real datanode would after finalizing it.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type * as grpc from "@grpc/grpc-js";
import { call, loadHarvestProto, makeClient } from "../common/grpc.js";
import { Logger } from "../common/log.js";
import { NameNode } from "../namenode/namenode.js";
import type { ClientNamenodeClient } from "../proto/generated/harvest/v1/ClientNamenode.js";
import type { DatanodeToNamenode } from "../proto/generated/harvest/v1/DatanodeToNamenode.js";
import type { NamenodeToDatanodeOutput } from "../proto/generated/harvest/v1/NamenodeToDatanode.js";
import type { BenchDefinition, BenchReport } from "./definition.js";
import { parseFlags } from "./flags.js";
import { fmt, mib, ratio, settledMemory, table } from "./report.js";

const FLAGS = {
  clients: { kind: "int", default: 32, min: 1, help: "concurrent clients (calls in flight)" },
  seconds: { kind: "number", default: 10, min: 1, help: "measured seconds of each throughput run" },
  blocks: { kind: "int", default: 200_000, min: 1000, help: "blocks to build for the memory figure" },
  "blocks-per-file": { kind: "int", default: 50, min: 1, help: "blocks per file in the memory build" },
} as const;

/** Hadoop's published NNThroughputBenchmark figure for `open` against a remote namenode, ops/s. */
const HADOOP_ANCHOR_OPS = 10_500;
/** HDFS's rule of thumb: about 1 GB of namenode heap per million blocks (with their files). */
const HDFS_BYTES_PER_MILLION_BLOCKS = 1e9;
const BLOCK_BYTES = 1024;

type DnStream = grpc.ClientDuplexStream<DatanodeToNamenode, NamenodeToDatanodeOutput>;

/** A datanode played over the real stream: registers, heartbeats, reports blocks as received. */
function fakeDatanode(address: string, id: string, rack: string): { id: string; stream: DnStream; stop(): void } {
  const proto = loadHarvestProto();
  const client = makeClient(proto.DatanodeProtocol, address);
  const stream = client.datanodeChannel();
  stream.on("data", () => undefined);
  stream.on("error", () => undefined);
  stream.write({
    register: {
      datanodeId: id,
      address: `127.0.0.1:${9000 + Number(id.slice(-1))}`,
      rack,
      capacityBytes: 2 ** 50,
      usedBytes: 0,
      storageId: `DS-${id}`,
    },
  });
  stream.write({ blockReport: { blocks: [] } });
  let seq = 0;
  const beat = setInterval(
    () =>
      stream.write({
        heartbeat: { seq: ++seq, capacityBytes: 2 ** 50, usedBytes: 0, remainingBytes: 2 ** 50, primaryBusy: false },
      }),
    500,
  );
  return {
    id,
    stream,
    stop() {
      clearInterval(beat);
      stream.end();
      client.close();
    },
  };
}

async function run(argv: readonly string[], progress: (line: string) => void): Promise<BenchReport> {
  const f = parseFlags(argv, FLAGS);
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
  const clients: ClientNamenodeClient[] = Array.from({ length: f.clients }, () =>
    makeClient(loadHarvestProto().ClientNamenode, nn.address),
  );
  try {
    // Wait until the three datanodes are live.
    for (let i = 0; i < 100; i++) {
      const live = (await call(clients[0]!, clients[0]!.getDatanodes, {})).datanodes.filter(
        (d) => d.state === "LIVE",
      ).length;
      if (live === 3) break;
      await new Promise((r) => setTimeout(r, 50));
    }
    await call(clients[0]!, clients[0]!.mkdirs, { path: "/bench", owner: "bench" });

    /** Reports a block received by every datanode of its pipeline, as the real datanodes do. */
    const received = (blockId: number, genStamp: number, locations: string[]): void => {
      for (const dn of dns) {
        if (locations.includes(dn.id))
          dn.stream.write({ received: { received: [{ blockId, genStamp, numBytes: BLOCK_BYTES }], deleted: [] } });
      }
    };

    /** One small file: create, one block, complete. Three durable metadata operations. */
    const writeFile = async (c: ClientNamenodeClient, path: string, blocks: number, name: string): Promise<void> => {
      await call(c, c.create, {
        path,
        owner: "bench",
        replication: 3,
        blockSize: 0,
        overwrite: false,
        clientName: name,
      });
      let previous: { blockId: number; genStamp: number; numBytes: number } | undefined;
      for (let b = 0; b < blocks; b++) {
        const lb = await call(c, c.addBlock, {
          path,
          clientName: name,
          ...(previous ? { previous } : {}),
          excludedDatanodes: [],
        });
        const blk = lb.block!;
        received(
          blk.blockId,
          blk.genStamp,
          lb.locations.map((l) => l.datanodeId),
        );
        previous = { blockId: blk.blockId, genStamp: blk.genStamp, numBytes: BLOCK_BYTES };
      }
      await call(c, c.complete, { path, clientName: name, ...(previous ? { last: previous } : {}) });
    };

    // (1) Durable metadata operations.
    progress(`create + addBlock + complete from ${f.clients} clients for ${f.seconds} s`);
    let files = 0;
    let deadline = performance.now() + f.seconds * 1000;
    let t0 = performance.now();
    await Promise.all(
      clients.map(async (c, i) => {
        for (let j = 0; performance.now() < deadline; j++) {
          await writeFile(c, `/bench/c${i}-f${j}`, 1, `bench-${i}`);
          files++;
        }
      }),
    );
    const writeSecs = (performance.now() - t0) / 1000;
    const writeOps = (files * 3) / writeSecs;

    // Baseline: read-only stat calls (no disk) at the same concurrency.
    progress(`stat from ${f.clients} clients for ${f.seconds} s (baseline)`);
    let stats = 0;
    deadline = performance.now() + f.seconds * 1000;
    t0 = performance.now();
    await Promise.all(
      clients.map(async (c, i) => {
        while (performance.now() < deadline) {
          await call(c, c.stat, { path: `/bench/c${i}-f0` });
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
      clients.map(async (c, i) => {
        for (;;) {
          const k = next++;
          if (k >= needFiles) return;
          await writeFile(c, `/bench/m${k}`, perFile, `bench-m-${i}`);
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
      "  every create/addBlock/complete is in LevelDB (synced) before its answer",
      "",
      ...table(
        ["operation", "ops/s", "files/s", "vs stat baseline", "vs Hadoop anchor (10.5k/s open)"],
        [
          [
            "create + addBlock + complete",
            fmt(writeOps, 0),
            fmt(files / writeSecs, 0),
            ratio(writeOps, statOps),
            ratio(writeOps, HADOOP_ANCHOR_OPS),
          ],
          ["stat (baseline, read-only)", fmt(statOps, 0), "-", "1.00x", ratio(statOps, HADOOP_ANCHOR_OPS)],
        ],
      ),
      "",
      `namenode memory: ${totalFiles.toLocaleString("en-US")} files, ${totalBlocks.toLocaleString("en-US")} blocks (each reported by 3 datanodes), built in ${fmt(buildSecs, 1)} s (${fmt((totalBlocks + 2 * totalFiles) / buildSecs, 0)} durable ops/s)`,
      `  heap ${mib(heapBytes)} over the empty process: ${fmt(heapBytes / totalBlocks, 0)} B per block with its share of files = ${mib(perMillion)} per million blocks`,
      `  HDFS rule of thumb: ~1 GB per million blocks; ratio ${ratio(perMillion, HDFS_BYTES_PER_MILLION_BLOCKS)}`,
    ];
    return {
      lines,
      result: {
        flags: f,
        writeOps,
        statOps,
        files,
        totalBlocks,
        totalFiles,
        heapBytes,
        bytesPerMillionBlocks: perMillion,
      },
    };
  } finally {
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
