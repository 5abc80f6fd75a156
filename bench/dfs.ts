/**
 * `npm run bench -- dfs`: put and get of a large file through Harvest's file system on a local cluster (namenode and
 * datanodes as separate processes on loopback, one disk), with replication 1 and 3, against `cp` of the same file on
 * the same disk in the same run, with the issue's goals (issue 17) beside the ratios. The cluster runs plaintext
 * (`insecure`). Blocks move over the datanodes' block transfer ports; `--grpc` repeats every put and get over their
 * gRPC DataTransfer service (the data path before the ports) and prints port / gRPC. After the replication-3 get,
 * `--readers` (16) clients read that file at once while the datanodes' resident sizes are sampled. Each put and each
 * get runs twice and the second is timed: the first warms the path up (V8 compiles it as it runs). The datanodes
 * serve short-circuit reads: after each get over the transfer port, a second client, which reads the replicas' files
 * itself (client/short-circuit.ts), gets the file the same way; its rows and goal line stand apart from the network's.
 *
 * With `--tls` the same puts and gets run twice in this run: on a plaintext cluster, then on a cluster started as
 * `harvest cluster up` starts one by default: a CA made in the (temporary) cluster directory, a `daemon` certificate
 * per daemon, mutual TLS on every connection (client to namenode, client to datanodes, datanode to datanode in the
 * write pipeline, datanodes to the namenode) and block tokens checked at the datanodes; the client presents the
 * cluster's admin certificate. The report adds TLS / plaintext of every MB/s, with the issue's goal (DFS get with TLS
 * >= 0.7x plaintext) next to the gets. Each cluster is started and stopped around its own runs, so only one runs at a
 * time.
 */
import { execFileSync } from "node:child_process";
import { chmodSync, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { localDfsClient, startCluster, stopCluster } from "../localcluster/cluster.js";
import { daemonNodeOptions } from "../localcluster/node-options.js";
import { clockTicksPerSecond, procStatFields } from "../common/proc-stats.js";
import { SUBDIR_COUNT } from "../datanode/index.js";
import { daemonEnvironment, TUNABLES_VARIABLE } from "../localcluster/malloc-tunables.js";
import type { BenchDefinition, BenchReport } from "./definition.js";
import { parseFlags } from "./flags.js";
import type { FlagSpec } from "./flags.js";
import { makeCeilingTls, nodeCeilingMs } from "./node-ceiling.js";
import { fmt, goalRatio, ratio, table, timed, timedAsync } from "./report.js";
import { RepeatingSource, sameAs } from "./dfs-content.js";

const FLAGS = {
  "size-mib": { kind: "int", default: 1024, min: 1, help: "file size in MiB" },
  rounds: {
    kind: "int",
    default: 3,
    min: 1,
    help: "timed puts and gets of each kind after the warm-up; the fastest counts, as cp + sync's fastest of 3 does",
  },
  servers: { kind: "int", default: 4, min: 3, help: "datanodes (one per server)" },
  "block-mib": { kind: "int", default: 128, min: 1, help: "block size in MiB (the namenode's default)" },
  tls: { kind: "bool", help: "also run on a mutual-TLS cluster and compare it with plaintext" },
  readers: {
    kind: "int",
    default: 16,
    min: 0,
    help: "concurrent readers of the replication-3 file whose datanode memory is measured (0: skip)",
  },
  grpc: {
    kind: "bool",
    help: "also move the blocks over the datanodes' gRPC DataTransfer service (the data path before the transfer port)",
  },
  "randomize-read-order": {
    kind: "bool",
    help: "the namenode shuffles a block's replicas on every request (randomizeReadOrder) instead of one order per block",
  },
  "page-cache": {
    kind: "bool",
    help: "datanodes write replicas through the page cache (directWrites false, stock HDFS) instead of with O_DIRECT",
  },
  "buffered-reads": {
    kind: "bool",
    help: "datanodes read and verify every piece of a plaintext read before sending it (zeroCopyReads false) instead of sending it from the block file with sendfile",
  },
  "every-hop": {
    kind: "bool",
    help: "every datanode of a write pipeline verifies packets before it forwards them (pipelineVerify every-hop) instead of only the last",
  },
} as const satisfies Record<string, FlagSpec>;

const MiB = 1024 * 1024;

/** cp + sync runs of the baseline; the fastest counts. */
const CP_RUNS = 3;

/** Issue 17: a datanode serving 16 concurrent readers stays under this resident size. */
const DATANODE_RSS_GOAL_BYTES = 200 * MiB;

/** CPU seconds an operation cost: this process (the client) and the datanodes together. */
interface CpuSeconds {
  client: number;
  datanodes: number;
}

/** A process's CPU time so far (user + system), in seconds; 0 when it is gone. */
function processCpuSeconds(pid: number): number {
  const fields = procStatFields(pid);
  // utime and stime are fields 14 and 15, at index k - 3.
  return fields ? (Number(fields[11]) + Number(fields[12])) / clockTicksPerSecond() : 0;
}

/** Runs `fn` and measures what it cost this process and the processes `pids`. */
async function withCpu<T>(pids: readonly number[], fn: () => Promise<T>): Promise<[T, CpuSeconds]> {
  const client0 = process.cpuUsage();
  const dn0 = pids.map(processCpuSeconds);
  const out = await fn();
  const client = process.cpuUsage(client0);
  const datanodes = pids.reduce((sum, pid, i) => sum + processCpuSeconds(pid) - dn0[i]!, 0);
  return [out, { client: (client.user + client.system) / 1e6, datanodes }];
}

/** Resident bytes of a process (VmRSS), 0 when it is gone. */
function rssBytes(pid: number): number {
  try {
    const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, "utf8"));
    return m ? Number(m[1]) * 1024 : 0;
  } catch {
    return 0;
  }
}

/** Issue 17: put r1, get and put r3 at least these fractions of cp + sync, on plaintext and on TLS. */
const GOALS: Record<Transport, { put1: number; get: number; put3: number }> = {
  plaintext: { put1: 0.5, get: 0.6, put3: 0.25 },
  TLS: { put1: 0.35, get: 0.45, put3: 0.2 },
};

/** Issue 12: DFS get with TLS at least this fraction of plaintext. */
const TARGET_TLS_GET_RATIO = 0.7;

/** Plaintext, or mutual TLS under the cluster's CA. */
type Transport = "plaintext" | "TLS";

/** How the block data moves: the block transfer port, or the gRPC DataTransfer service (the baseline). */
type DataPath = "transfer port" | "gRPC";

/**
 * The malloc setting of the bench's client (this process, and the Node baseline's receivers it starts) and of the
 * datanodes, which their launcher gives the setting when the variable is unset.
 */
function mallocSetting(env: NodeJS.ProcessEnv): string {
  const show = (v: string | undefined): string =>
    v === undefined || v === "" ? "glibc's defaults" : `${TUNABLES_VARIABLE}=${v}`;
  const client = show(env[TUNABLES_VARIABLE]);
  const datanodes = show(daemonEnvironment("datanode", env)[TUNABLES_VARIABLE]);
  return client === datanodes ? `client and datanodes ${client}` : `client ${client}, datanodes ${datanodes}`;
}

/** Node's baselines over mutual TLS (`--tls`): milliseconds of the fastest timed transfer of each. */
interface TlsCeiling {
  /** File -> TLS -> file + fsync. */
  oneMs: number;
  /** A chain of three such processes. */
  threeMs: number;
  /** File -> TLS -> a process that writes nothing: the transport alone. */
  aloneMs: number;
  /** A chain of three processes that write nothing. */
  alone3Ms: number;
}

/** One replication's put and get on one cluster. */
interface DfsRun {
  transport: Transport;
  path: DataPath;
  replication: number;
  /** The fastest timed put and get. */
  putMs: number;
  getMs: number;
  /** Every timed put and get, in the order they ran. */
  putRoundsMs: number[];
  getRoundsMs: number[];
  ok: boolean;
  /** CPU of the fastest timed put and get: the client (this process) and the datanodes. */
  putCpu: CpuSeconds;
  getCpu: CpuSeconds;
  /** On the transfer port's runs: the same get by a client reading the replicas' files (short-circuit). */
  localGetMs?: number;
  localGetRoundsMs?: number[];
  localGetCpu?: CpuSeconds;
  localOk?: boolean;
}

/** The fastest of timed runs, its CPU, and every run's time. */
interface Fastest<T> {
  ms: number;
  cpu: CpuSeconds;
  roundsMs: number[];
  /** Every run's value. */
  values: T[];
}

/**
 * Runs `fn` `rounds` times, each timed with its CPU (after `before`, untimed), and keeps the fastest: the estimator
 * the cp + sync baseline uses, so a ratio compares like with like on a VM whose speed drifts.
 */
async function fastestOf<T>(
  rounds: number,
  pids: readonly number[],
  fn: () => Promise<T>,
  before?: (round: number) => Promise<void>,
): Promise<Fastest<T>> {
  let best: { ms: number; cpu: CpuSeconds } | undefined;
  const roundsMs: number[] = [];
  const values: T[] = [];
  for (let round = 0; round < rounds; round++) {
    await before?.(round);
    const [[value, ms], cpu] = await withCpu(pids, () => timedAsync(fn));
    roundsMs.push(ms);
    values.push(value);
    if (!best || ms < best.ms) best = { ms, cpu };
  }
  return { ms: best!.ms, cpu: best!.cpu, roundsMs, values };
}

async function run(argv: readonly string[], progress: (line: string) => void): Promise<BenchReport> {
  const f = parseFlags(argv, FLAGS);
  const bytes = f["size-mib"] * MiB;
  const work = mkdtempSync(join(tmpdir(), "harvest-bench-dfs-"));
  // The clusters live below: their containers' account (when run as root) must pass through.
  chmodSync(work, 0o755);
  try {
    progress(`writing a ${f["size-mib"]} MiB random file`);
    const source = join(work, "source.bin");
    const expected = new RepeatingSource(bytes);
    expected.writeTo(source);

    // Baseline: cp on the same disk, flushed (the file system's writes are fsynced at every block end).
    execFileSync("sync");
    // Three times, the fastest counts: a single cp + sync swung from 470 to 1,300 MB/s between runs here (writing a new
    // file's pages costs more while the page cache grows into memory the VM has not touched yet), and the fastest is
    // the harder baseline for every ratio below.
    const cpRuns: { cpMs: number; syncMs: number }[] = [];
    for (let i = 0; i < CP_RUNS; i++) {
      const [, cpMs] = timed(() => execFileSync("cp", [join(work, "source.bin"), join(work, "copy.bin")]));
      const [, syncMs] = timed(() => execFileSync("sync"));
      rmSync(join(work, "copy.bin"));
      execFileSync("sync");
      cpRuns.push({ cpMs, syncMs });
    }
    const { cpMs, syncMs } = cpRuns.reduce((a, b) => (b.cpMs + b.syncMs < a.cpMs + a.syncMs ? b : a));
    progress(
      `node: file -> loopback TCP -> file + fsync (no protocol, no checksums; a warm-up, then ${timedRuns(f.rounds)})`,
    );
    const copies = [1, 2, 3].map((i) => join(work, `node-copy-${i}.bin`));
    const ceilingRounds = { rounds: f.rounds };
    const nodeMs = await nodeCeilingMs(source, copies.slice(0, 1), ceilingRounds);
    progress("node: file -> loopback TCP -> a chain of 3 processes, each writing its file + fsync");
    const node3Ms = await nodeCeilingMs(source, copies, ceilingRounds);
    let tlsCeiling: TlsCeiling | undefined;
    if (f.tls) {
      const ceiling = { ...ceilingRounds, tls: await makeCeilingTls(join(work, "ceiling-ca")) };
      progress("node over mutual TLS: file -> file + fsync, and a chain of 3 such processes");
      const oneMs = await nodeCeilingMs(source, copies.slice(0, 1), ceiling);
      const threeMs = await nodeCeilingMs(source, copies, ceiling);
      progress("node over mutual TLS, writing no file: 1 process, and a chain of 3 (the transport alone)");
      const aloneMs = await nodeCeilingMs(source, [null], ceiling);
      const alone3Ms = await nodeCeilingMs(source, [null, null, null], ceiling);
      tlsCeiling = { oneMs, threeMs, aloneMs, alone3Ms };
    }

    const idle = join(work, "idle.csv");
    writeFileSync(idle, "time_s,cpu_pct\n0,0\n300,0\n600,0\n");
    const rows: DfsRun[] = [];
    let readersRun: ReadersRun | undefined;
    const transports: Transport[] = f.tls ? ["plaintext", "TLS"] : ["plaintext"];
    for (const transport of transports) {
      const clusterDir = join(work, `cluster-${transport.toLowerCase()}`);
      progress(`starting a ${f.servers}-server ${transport} cluster`);
      const desc = await startCluster({
        dir: clusterDir,
        primaries: Array.from({ length: f.servers }, () => `trace:${idle}`),
        speed: 1,
        vcores: 4,
        memoryMb: 4096,
        startTimeoutMs: 30_000,
        insecure: transport === "plaintext",
        // The datanodes serve short-circuit reads; only the client made for them asks (`localDfs` below).
        dn: {
          shortCircuitReads: true,
          directWrites: !f["page-cache"],
          zeroCopyReads: !f["buffered-reads"],
          pipelineVerify: f["every-hop"] ? "every-hop" : "tail",
        },
        nn: { randomizeReadOrder: f["randomize-read-order"] },
      });
      const paths: DataPath[] = f.grpc ? ["transfer port", "gRPC"] : ["transfer port"];
      const dnPids = desc.nodes.flatMap((n) => (n.datanode ? [n.datanode.pid] : []));
      try {
        for (const dataPath of paths) {
          // As the admin who started it: the admin certificate on the TLS cluster, plaintext on the other.
          const dfs = localDfsClient(desc, { transferProtocol: dataPath === "transfer port", shortCircuit: false });
          const localDfs = dataPath === "transfer port" ? localDfsClient(desc, { shortCircuit: true }) : undefined;
          try {
            for (const replication of [1, 3]) {
              progress(
                `${transport}, ${dataPath}: put with replication ${replication} (a warm-up put, then ${timedRuns(f.rounds)})`,
              );
              const path = `/bench/r${replication}.bin`;
              const putOpts = { replication, blockSizeBytes: f["block-mib"] * MiB };
              // As for the get below: the first put of a cluster's life took up to 1.8x the time of the puts after
              // it here (V8 compiles the write path as it runs, and the page cache's copies cost more the first
              // time), so a warm-up put of the same file goes first. Every timed put starts as the first did: the
              // file before it deleted, its replicas gone and synced.
              const warmPath = `/bench/warm-r${replication}.bin`;
              await dfs.put(source, warmPath, putOpts);
              await deleteAndSettle(dfs, warmPath, desc);
              const put = await fastestOf(
                f.rounds,
                dnPids,
                () => dfs.put(source, path, putOpts),
                async (round) => {
                  if (round > 0) await deleteAndSettle(dfs, path, desc);
                },
              );
              progress(
                `${transport}, ${dataPath}: get with replication ${replication} (a warm-up read, then ${timedRuns(f.rounds)})`,
              );
              // The first read of a cluster's life warms up the client's and the datanodes' read paths (V8 compiles
              // them as they run, connections open): it ran 1.3-2x slower than the reads after it. It is checked too.
              const warm = await sameAs(dfs.createReadStream(path), expected);
              const get = await fastestOf(f.rounds, dnPids, () => sameAs(dfs.createReadStream(path), expected));
              const ok = warm && get.values.every((same) => same);
              const run: DfsRun = {
                transport,
                path: dataPath,
                replication,
                putMs: put.ms,
                getMs: get.ms,
                putRoundsMs: put.roundsMs,
                getRoundsMs: get.roundsMs,
                ok,
                putCpu: put.cpu,
                getCpu: get.cpu,
              };
              if (localDfs) {
                progress(
                  `${transport}: short-circuit get with replication ${replication} (warm-up, then ${timedRuns(f.rounds)})`,
                );
                const localWarm = await sameAs(localDfs.createReadStream(path), expected);
                const local = await fastestOf(f.rounds, dnPids, () =>
                  sameAs(localDfs.createReadStream(path), expected),
                );
                run.localGetMs = local.ms;
                run.localGetRoundsMs = local.roundsMs;
                run.localGetCpu = local.cpu;
                run.localOk =
                  localWarm && local.values.every((same) => same) && localDfs.readStats.shortCircuitReads > 0;
              }
              rows.push(run);
              if (replication === 3 && dataPath === "transfer port" && f.readers > 0 && !readersRun) {
                readersRun = await concurrentReaders(dfs, path, f.readers, expected, dnPids, progress);
              }
              await dfs.delete(path);
            }
          } finally {
            dfs.close();
            localDfs?.close();
          }
        }
      } finally {
        await stopCluster(clusterDir);
      }
    }
    const mbps = (ms: number): number => bytes / 1e6 / (ms / 1000);
    const cpTotal = cpMs + syncMs;
    /**
     * One put or get: MB/s, seconds, against both baselines, and whether the bytes came back identical. A put with
     * replication 3 is held against Node's chain of three; a get reads one replica, as Node's single copy does.
     */
    const dfsRow = (
      what: string,
      ms: number,
      identical: string,
      cpu: CpuSeconds | undefined,
      node = nodeMs,
    ): string[] => [
      what,
      fmt(mbps(ms)),
      fmt(ms / 1000, 2),
      ratio(mbps(ms), mbps(cpTotal)),
      ratio(mbps(ms), mbps(node)),
      cpu ? fmt(cpu.client, 2) : "-",
      cpu ? fmt(cpu.datanodes, 2) : "-",
      identical,
    ];
    const baselineRow = (what: string, ms: number): string[] => [
      what,
      fmt(mbps(ms)),
      fmt(ms / 1000, 2),
      ratio(mbps(ms), mbps(cpTotal)),
      "-",
      "-",
      "-",
    ];
    /** What a put is held against in the vs-node column: Node's copy or chain, over TLS for a TLS put. */
    const nodeBaselineMs = (r: DfsRun): number =>
      r.transport === "TLS" && tlsCeiling
        ? r.replication === 3
          ? tlsCeiling.threeMs
          : tlsCeiling.oneMs
        : r.replication === 3
          ? node3Ms
          : nodeMs;
    const label = (op: string, r: DfsRun): string =>
      `${op}, replication ${r.replication}${f.tls ? `, ${r.transport}` : ""}${f.grpc ? `, ${r.path}` : ""}`;
    const lines = [
      `dfs throughput: ${f["size-mib"]} MiB file, ${f.servers} datanodes on one disk (loopback), block ${f["block-mib"]} MiB` +
        (f.tls ? "; a plaintext cluster, then a mutual-TLS one" : "; plaintext"),
      "  put: local file -> client -> pipeline of datanodes, every block fsynced at every replica before it counts;",
      `       a warm-up put, then ${timedRuns(f.rounds)}, each after the file before it was deleted, its replicas`,
      "       gone and synced, as cp's copy is before each timed cp",
      "  get: datanodes -> client, every 512-byte chunk's CRC32C verified, every byte compared with the source's (the",
      `       random pattern it repeats, in memory); a warm-up read, then ${timedRuns(f.rounds)}`,
      "  get, short-circuit: the same, by a client that reads the replicas' files itself (its datanodes are on its",
      "       server); the other gets read over the network",
      `  datanodes' Node options (HARVEST_DATANODE_OPTS): ${daemonNodeOptions("datanode").join(" ") || "none"}; the client's (this process): ${process.execArgv.join(" ") || "none"}`,
      `  glibc's malloc (localcluster/malloc-tunables.ts): ${mallocSetting(process.env)}`,
      `  readers try a block's replicas ${f["randomize-read-order"] ? "in a fresh random order per request (--randomize-read-order)" : "in one order per block (HDFS's default; --randomize-read-order: per request)"}`,
      `  write pipelines verify packets ${f["every-hop"] ? "at every datanode before it forwards them (--every-hop)" : "at their last datanode, as HDFS (pipelineVerify tail; --every-hop: at each)"}`,
      `  plaintext reads ${f["buffered-reads"] ? "are read and verified by the datanode, then sent (--buffered-reads)" : "send their data from the block files with sendfile (zeroCopyReads; --buffered-reads: read, verify, send)"}`,
      `  datanodes write replicas ${f["page-cache"] ? "through the page cache (--page-cache, stock HDFS)" : "with O_DIRECT (directWrites; --page-cache for the page cache)"}`,
      "",
      ...table(
        ["operation", "MB/s", "seconds", "vs cp+sync", "vs node", "client CPU s", "datanodes CPU s", "byte-identical"],
        [
          ["cp + sync (baseline, fastest of 3)", fmt(mbps(cpTotal)), fmt(cpTotal / 1000, 2), "1.00x", "-", "-", "-"],
          baselineRow("node: file -> TCP -> file", nodeMs),
          baselineRow("node: file -> TCP -> 3 files, chained", node3Ms),
          ...(tlsCeiling
            ? [
                baselineRow("node: file -> TLS -> file", tlsCeiling.oneMs),
                baselineRow("node: file -> TLS -> 3 files, chained", tlsCeiling.threeMs),
                baselineRow("node: file -> TLS, no file (TLS alone)", tlsCeiling.aloneMs),
                baselineRow("node: file -> TLS -> 3, chained, no files", tlsCeiling.alone3Ms),
              ]
            : []),
          ...rows.flatMap((r) => [
            dfsRow(label("put", r), r.putMs, "-", r.putCpu, nodeBaselineMs(r)),
            dfsRow(label("get", r), r.getMs, r.ok ? "yes" : "NO", r.getCpu),
            ...(r.localGetMs === undefined
              ? []
              : [dfsRow(label("get, short-circuit", r), r.localGetMs, r.localOk ? "yes" : "NO", r.localGetCpu)]),
          ]),
        ],
      ),
      "",
      `  cp + sync runs: ${cpRuns.map((r) => fmt(mbps(r.cpMs + r.syncMs))).join(", ")} MB/s (the fastest is the baseline)`,
      ...roundLines(rows, mbps, f.rounds),
      "  replication 3 writes three copies to the same disk here; on real servers each replica has its own disk",
      "  node: the same bytes from a Node process over loopback TCP into a file in another, fsynced: no protocol, no",
      "  checksums, no acknowledgements (a plain Node data path; cp copies inside the kernel, with copy_file_range);",
      "  chained: three such processes, each writing its file and forwarding to the next, as a pipeline of",
      "  replication 3 does. Puts with replication 3 are held against the chain in the vs-node column. Each",
      `  transfers once to warm up, then ${timedRuns(f.rounds)}; its figure swings widely from run to run here`,
      ...(tlsCeiling
        ? [
            "  TLS: the same over mutual TLS with the transfer port's cipher order; TLS puts are held against these. No",
            "  file: the receivers drop the bytes, so the row is what Node's TLS alone carries through those hops; a put",
            "  over them also writes every replica",
          ]
        : []),
      "  CPU: seconds of user + system time of the fastest timed run, in the client (this process; a get's includes",
      "  comparing every byte with the source's) and in all datanodes together. On a VM whose speed drifts, paired",
      "  runs compare these better than MB/s",
      "",
      ...goalLines(rows, mbps(cpTotal), mbps),
      ...(tlsCeiling ? tlsBoundLines(tlsCeiling, rows, mbps(cpTotal), mbps) : []),
      ...localGoalLines(rows, mbps(cpTotal), mbps),
    ];
    if (f.grpc) lines.push("", ...grpcComparison(rows, mbps));
    if (readersRun)
      lines.push(
        "",
        `${readersRun.readers} concurrent readers of the replication-3 file (transfer port): ${fmt(
          (readersRun.readers * bytes) / 1e6 / (readersRun.ms / 1000),
        )} MB/s in all, every read byte-identical: ${readersRun.ok ? "yes" : "NO"}; largest datanode resident size ${fmt(
          readersRun.maxRssBytes / MiB,
        )} MiB (goal < ${fmt(DATANODE_RSS_GOAL_BYTES / MiB, 0)} MiB: ${readersRun.maxRssBytes < DATANODE_RSS_GOAL_BYTES ? "met" : "NOT met"})`,
      );
    const result: Record<string, unknown> = {
      flags: f,
      bytes,
      cpMs,
      syncMs,
      cpRuns,
      nodeMs,
      node3Ms,
      tlsCeiling,
      runs: rows,
      goals: GOALS,
      readersRun,
    };
    if (f.tls) {
      const comparison = tlsComparison(rows, mbps);
      lines.push("", ...comparison.lines);
      result["tls"] = { goalRatio: TARGET_TLS_GET_RATIO, figures: comparison.figures };
    }
    return { lines, result };
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
}

/** Concurrent reads of one file and the datanodes' largest resident size meanwhile. */
interface ReadersRun {
  readers: number;
  ms: number;
  ok: boolean;
  maxRssBytes: number;
}

async function concurrentReaders(
  dfs: ReturnType<typeof localDfsClient>,
  path: string,
  readers: number,
  source: RepeatingSource,
  /** The datanodes' processes, whose resident sizes are sampled. */
  pids: readonly number[],
  progress: (line: string) => void,
): Promise<ReadersRun> {
  progress(`${readers} concurrent readers of ${path}`);
  let maxRssBytes = 0;
  const sample = (): void => {
    for (const pid of pids) maxRssBytes = Math.max(maxRssBytes, rssBytes(pid));
  };
  const timer = setInterval(sample, 100);
  try {
    const [hashes, ms] = await timedAsync(() =>
      Promise.all(Array.from({ length: readers }, () => sameAs(dfs.createReadStream(path), source))),
    );
    sample();
    return { readers, ms, ok: hashes.every((same) => same), maxRssBytes };
  } finally {
    clearInterval(timer);
  }
}

/**
 * Deletes a file, waits until no datanode has a replica of it left on disk, its trash included (deletions are paced,
 * datanode/replica-trash.ts), then syncs, as the cp baseline removes its copy and syncs before each timed run. A put
 * timed while the datanodes were still freeing the warm-up file's blocks measured that too: before deletions were
 * paced, on a file system mounted with `discard` (this machine's), a finalize's fsync waited up to 0.5 s for the freed
 * blocks' discards, and replication-3 puts ran at 350 MB/s instead of 430-450.
 */
async function deleteAndSettle(
  dfs: ReturnType<typeof localDfsClient>,
  path: string,
  desc: Awaited<ReturnType<typeof startCluster>>,
): Promise<void> {
  const ids = (await dfs.blockLocations(path)).blocks.map((b) => b.block?.blockId ?? 0);
  const dataDirs = desc.nodes.flatMap((n) => (n.datanode ? [n.datanode.dataDir] : []));
  const replicaFiles = dataDirs.flatMap((dir) =>
    ids.map((id) => join(dir, "current", `subdir${id % SUBDIR_COUNT}`, `blk_${id}`)),
  );
  // Waiting for files that were never there would time nothing: the layout is datanode/block-store.ts's.
  if (!replicaFiles.some((f) => existsSync(f))) throw new Error(`no replica file of ${path} found to wait for`);
  await dfs.delete(path);
  const deadline = Date.now() + 60_000;
  const trashEmpty = (dir: string): boolean =>
    !existsSync(join(dir, "trash")) || readdirSync(join(dir, "trash")).length === 0;
  while (replicaFiles.some((f) => existsSync(f)) || !dataDirs.every(trashEmpty)) {
    if (Date.now() > deadline) throw new Error(`the datanodes did not delete ${path}'s replicas within 60 s`);
    await new Promise((r) => setTimeout(r, 100));
  }
  execFileSync("sync");
}

/** "the timed one" or "3 timed ones, the fastest counting". */
function timedRuns(rounds: number): string {
  return rounds === 1 ? "the timed one" : `${rounds} timed ones, the fastest counting`;
}

/** Every timed run's MB/s, when there was more than one of each. */
function roundLines(rows: readonly DfsRun[], mbps: (ms: number) => number, rounds: number): string[] {
  if (rounds < 2) return [];
  const list = (ms: readonly number[]): string => ms.map((m) => fmt(mbps(m))).join(", ");
  const out = [`  timed runs, MB/s in the order they ran (the fastest counts, as for cp + sync):`];
  for (const r of rows) {
    const where = `, ${r.transport}${r.path === "gRPC" ? ", gRPC" : ""}`;
    out.push(
      `    replication ${r.replication}${where}: put ${list(r.putRoundsMs)}; get ${list(r.getRoundsMs)}` +
        (r.localGetRoundsMs ? `; short-circuit get ${list(r.localGetRoundsMs)}` : ""),
    );
  }
  return out;
}

/** The run of `transport` and `replication` over the block transfer port (the path the goals judge). */
function transferPortRun(rows: readonly DfsRun[], transport: Transport, replication: number): DfsRun | undefined {
  return rows.find((r) => r.transport === transport && r.path === "transfer port" && r.replication === replication);
}

/** The issue's goals against cp + sync, for the block transfer port's runs. */
function goalLines(rows: readonly DfsRun[], cpMBps: number, mbps: (ms: number) => number): string[] {
  const out: string[] = [];
  for (const transport of ["plaintext", "TLS"] as const) {
    const goal = GOALS[transport];
    const r1 = transferPortRun(rows, transport, 1);
    const r3 = transferPortRun(rows, transport, 3);
    if (!r1 || !r3) continue;
    const checks = [
      ["put, replication 1", goalRatio(mbps(r1.putMs), cpMBps, goal.put1)],
      ["get", goalRatio(Math.min(mbps(r1.getMs), mbps(r3.getMs)), cpMBps, goal.get)],
      ["put, replication 3", goalRatio(mbps(r3.putMs), cpMBps, goal.put3)],
    ] as const;
    out.push(
      `goals, ${transport} (issue 17, vs cp + sync): ` +
        checks.map(([what, c]) => `${what} ${c.text} ${c.verdict}`).join("; "),
    );
  }
  return out;
}

/** What Node's TLS alone carried, against the TLS put goals: about the most a put over those hops could reach. */
function tlsBoundLines(c: TlsCeiling, rows: readonly DfsRun[], cpMBps: number, mbps: (ms: number) => number): string[] {
  const bound = (ms: number, goal: number, replication: number): string => {
    const put = transferPortRun(rows, "TLS", replication);
    const share = put
      ? `; the TLS put with replication ${replication} ran at ${ratio(mbps(put.putMs), mbps(ms))} of it`
      : "";
    return `${fmt(mbps(ms))} MB/s, ${ratio(mbps(ms), cpMBps)} of cp + sync (the goal asks ${fmt(goal, 2)}x)${share}`;
  };
  return [
    "  Node's TLS alone through the same hops, no file written (a TLS put also writes every replica):",
    `    1 hop: ${bound(c.aloneMs, GOALS.TLS.put1, 1)}`,
    `    3 hops: ${bound(c.alone3Ms, GOALS.TLS.put3, 3)}`,
  ];
}

/** Short-circuit gets against the issue's get goals (a reader on the datanodes' server: not what the goals measure). */
function localGoalLines(rows: readonly DfsRun[], cpMBps: number, mbps: (ms: number) => number): string[] {
  const out: string[] = [];
  for (const transport of ["plaintext", "TLS"] as const) {
    const local = rows.filter((r) => r.transport === transport && r.localGetMs !== undefined);
    if (local.length === 0) continue;
    const c = goalRatio(Math.min(...local.map((r) => mbps(r.localGetMs!))), cpMBps, GOALS[transport].get);
    out.push(`short-circuit get, ${transport} (a reader on the datanodes' server): ${c.text} ${c.verdict}`);
  }
  return out;
}

/** The block transfer port against the gRPC DataTransfer service, same cluster, same run. */
function grpcComparison(rows: readonly DfsRun[], mbps: (ms: number) => number): string[] {
  const out: string[][] = [];
  for (const r of rows) {
    if (r.path !== "transfer port") continue;
    const g = rows.find((x) => x.path === "gRPC" && x.transport === r.transport && x.replication === r.replication);
    if (!g) continue;
    for (const op of ["put", "get"] as const) {
      const a = mbps(op === "put" ? r.putMs : r.getMs);
      const b = mbps(op === "put" ? g.putMs : g.getMs);
      out.push([`${op}, replication ${r.replication}, ${r.transport}`, fmt(b), fmt(a), ratio(a, b)]);
    }
  }
  return [
    "dfs, block transfer port vs the gRPC DataTransfer service (same cluster, same run):",
    "",
    ...table(["operation", "gRPC MB/s", "transfer port MB/s", "port / gRPC"], out),
  ];
}

/** One operation's MB/s on both transports. */
interface TlsFigure {
  operation: string;
  plaintextMBps: number;
  tlsMBps: number;
  ratio: number;
  /** Gets are judged against the goal; puts are shown beside them. */
  judged: boolean;
}

/** TLS vs plaintext MB/s of every put and get, the gets judged against the issue's goal. */
function tlsComparison(
  rows: readonly DfsRun[],
  mbps: (ms: number) => number,
): { lines: string[]; figures: TlsFigure[] } {
  const figures: TlsFigure[] = [];
  const out: string[][] = [];
  const gets: string[] = [];
  let allMet = true;
  for (const replication of [1, 3]) {
    const plain = transferPortRun(rows, "plaintext", replication);
    const tls = transferPortRun(rows, "TLS", replication);
    if (!plain || !tls) continue;
    for (const op of ["put", "get"] as const) {
      const a = mbps(op === "put" ? plain.putMs : plain.getMs);
      const b = mbps(op === "put" ? tls.putMs : tls.getMs);
      const check = goalRatio(b, a, TARGET_TLS_GET_RATIO);
      const judged = op === "get";
      const operation = `${op}, replication ${replication}`;
      if (judged) {
        allMet &&= check.met;
        gets.push(`replication ${replication} ${check.text}`);
      }
      figures.push({ operation, plaintextMBps: a, tlsMBps: b, ratio: check.ratio, judged });
      out.push([operation, fmt(a), fmt(b), check.text, judged ? check.verdict : ""]);
    }
  }
  return {
    figures,
    lines: [
      `dfs, TLS vs plaintext (issue 12 goal: DFS get with TLS >= ${fmt(TARGET_TLS_GET_RATIO, 1)}x plaintext MB/s):`,
      "",
      ...table(["operation", "plaintext MB/s", "TLS MB/s", "TLS / plaintext", "goal"], out),
      "",
      `DFS get with TLS vs goal ${fmt(TARGET_TLS_GET_RATIO, 1)}x plaintext: ${allMet && gets.length > 0 ? "met" : "NOT met"} (${gets.join(", ")})`,
    ],
  };
}

/** The dfs benchmark. */
export const dfsBench: BenchDefinition = {
  name: "dfs",
  summary: "put/get of a large file through the file system (replication 1 and 3) vs cp on the same disk",
  flags: FLAGS,
  run,
};
