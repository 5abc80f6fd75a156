/**
 * `npm run bench -- dfs`: put and get of a large file through Harvest's file system on a local cluster (namenode and
 * datanodes as separate processes on loopback, one disk), with replication 1 and 3, against `cp` of the same file on
 * the same disk in the same run.
 */
import { execFileSync } from "node:child_process";
import { createHash, randomBytes } from "node:crypto";
import { closeSync, createReadStream, mkdtempSync, openSync, rmSync, writeFileSync, writeSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { DfsClient } from "../client/dfs-client.js";
import { startCluster, stopCluster } from "../cli/cluster.js";
import type { BenchDefinition, BenchReport } from "./definition.js";
import { parseFlags } from "./flags.js";
import { fmt, ratio, table } from "./report.js";

const FLAGS = {
  "size-mib": { kind: "int", default: 1024, min: 1, help: "file size in MiB" },
  servers: { kind: "int", default: 4, min: 3, help: "datanodes (one per server)" },
  "block-mib": { kind: "int", default: 64, min: 1, help: "block size in MiB" },
} as const;

const MiB = 1024 * 1024;

async function sha256(stream: NodeJS.ReadableStream): Promise<string> {
  const h = createHash("sha256");
  for await (const chunk of stream) h.update(chunk as Buffer);
  return h.digest("hex");
}

function timed<T>(fn: () => T): [T, number] {
  const t0 = performance.now();
  const v = fn();
  return [v, performance.now() - t0];
}

async function timedAsync<T>(fn: () => Promise<T>): Promise<[T, number]> {
  const t0 = performance.now();
  const v = await fn();
  return [v, performance.now() - t0];
}

async function run(argv: readonly string[], progress: (line: string) => void): Promise<BenchReport> {
  const f = parseFlags(argv, FLAGS);
  const bytes = f["size-mib"] * MiB;
  const work = mkdtempSync(join(tmpdir(), "harvest-bench-dfs-"));
  const clusterDir = join(work, "cluster");
  try {
    progress(`writing a ${f["size-mib"]} MiB random file`);
    const source = join(work, "source.bin");
    const fd = openSync(source, "w");
    const block = randomBytes(4 * MiB);
    for (let left = bytes; left > 0; left -= block.length) writeSync(fd, block, 0, Math.min(left, block.length));
    closeSync(fd);
    const sourceHash = await sha256(createReadStream(source));

    // Baseline: cp on the same disk, flushed (the file system's writes are fsynced at every block end).
    execFileSync("sync");
    const [, cpMs] = timed(() => execFileSync("cp", [join(work, "source.bin"), join(work, "copy.bin")]));
    const [, syncMs] = timed(() => execFileSync("sync"));
    rmSync(join(work, "copy.bin"));

    const idle = join(work, "idle.csv");
    writeFileSync(idle, "time_s,cpu_pct\n0,0\n300,0\n600,0\n");
    progress(`starting a ${f.servers}-server cluster`);
    const desc = await startCluster({
      dir: clusterDir,
      primaries: Array.from({ length: f.servers }, () => `trace:${idle}`),
      speed: 1,
      vcores: 4,
      memoryMb: 4096,
      startTimeoutMs: 30_000,
    });
    const dfs = new DfsClient(desc.nn!.address);
    const rows: { replication: number; putMs: number; getMs: number; ok: boolean }[] = [];
    try {
      for (const replication of [1, 3]) {
        progress(`put with replication ${replication}`);
        const path = `/bench/r${replication}.bin`;
        const [, putMs] = await timedAsync(() =>
          dfs.put(source, path, { replication, blockSizeBytes: f["block-mib"] * MiB }),
        );
        progress(`get with replication ${replication}`);
        const [hash, getMs] = await timedAsync(() => sha256(dfs.createReadStream(path)));
        rows.push({ replication, putMs, getMs, ok: hash === sourceHash });
        await dfs.delete(path);
      }
    } finally {
      dfs.close();
      await stopCluster(clusterDir);
    }
    const mbps = (ms: number): number => bytes / 1e6 / (ms / 1000);
    const cpTotal = cpMs + syncMs;
    const lines = [
      `dfs throughput: ${f["size-mib"]} MiB file, ${f.servers} datanodes on one disk (loopback), block ${f["block-mib"]} MiB`,
      "  put: local file -> client -> pipeline of datanodes, every block fsynced at every replica before it counts",
      "  get: datanodes -> client, every 512-byte chunk's CRC32C verified, SHA-256 of the result compared",
      "",
      ...table(
        ["operation", "MB/s", "seconds", "vs cp+sync", "byte-identical"],
        [
          ["cp + sync (baseline)", fmt(mbps(cpTotal)), fmt(cpTotal / 1000, 2), "1.00x", "-"],
          ...rows.flatMap((r) => [
            [
              `put, replication ${r.replication}`,
              fmt(mbps(r.putMs)),
              fmt(r.putMs / 1000, 2),
              ratio(mbps(r.putMs), mbps(cpTotal)),
              "-",
            ],
            [
              `get, replication ${r.replication}`,
              fmt(mbps(r.getMs)),
              fmt(r.getMs / 1000, 2),
              ratio(mbps(r.getMs), mbps(cpTotal)),
              r.ok ? "yes" : "NO",
            ],
          ]),
        ],
      ),
      "",
      "  replication 3 writes three copies to the same disk here; on real servers each replica has its own disk",
    ];
    return { lines, result: { flags: f, bytes, cpMs, syncMs, runs: rows } };
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
}

/** The dfs benchmark. */
export const dfsBench: BenchDefinition = {
  name: "dfs",
  summary: "put/get of a large file through the file system (replication 1 and 3) vs cp on the same disk",
  flags: FLAGS,
  run,
};
