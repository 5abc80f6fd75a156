/**
 * `npm run bench -- sort`: TeraSort on a local cluster against GNU sort on the same records, in the same run.
 *
 * The data set is `--size-mb` MiB of TeraSort's 100-byte records (a 10-byte random key, a 90-byte value;
 * examples/tasks/terasort-lib.ts generates them from `--seed`). Before any clock starts, the bench writes them into
 * Harvest's file system as `--maps` input files (replication 1) and, as lines GNU sort orders the same way, into one
 * local file.
 *
 * Harvest: a DAG of a map vertex (terasort-map: each task reads its input file from the file system, sorts it, and
 * writes each reducer's key range as a part file on its node) and a reduce vertex (terasort-reduce: each task fetches
 * its key range from every map through the node managers' shuffle services, merges the sorted runs, and writes its
 * file to the file system with replication 1), joined by a scatter-gather edge, on a secure cluster of `--servers`
 * servers whose primary tenants stay idle. Timed from the submission to the job's end as the client sees it (polled
 * every 200 ms), after an untimed warm-up job of the same shape on a few records (it localizes the task runtime on
 * every node, as a cluster that has run a job before has it). Checked after the clock stops: the output files, in
 * reducer order, hold every record of the data set exactly once, byte for byte, in key order.
 *
 * GNU sort: `LC_ALL=C sort --parallel=2` from a local file to a local file, timed alone (the file's dirty pages are
 * synced before it starts; its output's writeback is timed apart and not counted). Its output is checked to hold the
 * records in the same order as Harvest's.
 */
import { execFileSync } from "node:child_process";
import {
  closeSync,
  chmodSync,
  existsSync,
  mkdtempSync,
  openSync,
  readFileSync,
  readSync,
  rmSync,
  writeFileSync,
} from "node:fs";
import { writeSync } from "node:fs";
import * as https from "node:https";
import { availableParallelism, loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import type { DfsClient } from "../client/dfs-client.js";
import type { JobClient, JobReport } from "../client/job-client.js";
import { localDfsClient, localJobClient, startCluster, stopCluster } from "../localcluster/cluster.js";
import { DATA_CLIENT_NODE_OPTIONS } from "../localcluster/node-options.js";
import type { ClusterDescriptor, DaemonRecord } from "../localcluster/cluster.js";
import {
  generateRecords,
  LINE_BYTES,
  lineRecordNumber,
  outputFileName,
  RECORD_BYTES,
  SortedOutputCheck,
  sortLines,
  parseStatsLine,
  splitRecords,
} from "../examples/tasks/terasort-lib.js";
import type { SortCheckResult, TaskStats } from "../examples/tasks/terasort-lib.js";
import type { BenchDefinition, BenchReport } from "./definition.js";
import { parseFlags } from "./flags.js";
import type { FlagSpec } from "./flags.js";
import { fmt, quantile, ratio, table, timed, timedAsync } from "./report.js";
import { clockTicksPerSecond, procStatFields, processTreesCpuMs, readProcStatTotals } from "../common/proc-stats.js";

const FLAGS = {
  "size-mb": { kind: "int", default: 1024, min: 1, help: "data set size in MiB, in records of 100 bytes" },
  maps: {
    kind: "int",
    default: 8,
    min: 1,
    help: "map tasks: the data set is written as this many files of one block each, one split each",
  },
  reduces: { kind: "int", default: 4, min: 1, help: "reduce tasks, one output file each" },
  servers: {
    kind: "int",
    default: 4,
    min: 1,
    help: "servers of the local cluster (a node manager and a datanode each)",
  },
  "server-vcores": {
    kind: "number",
    default: 2.5,
    min: 1,
    help: "vcores per server: two tasks of 1 vcore each, and the job manager's 0.5 on one of them, so 8 maps run at once",
  },
  seed: { kind: "int", default: 1, min: 0, help: "seed of the record generator" },
  locality: {
    kind: "choice",
    default: "delay",
    choices: ["delay", "none"],
    help: "the resource manager's localityPolicy: delay scheduling, or the stock baseline that never waits",
  },
  keep: { kind: "bool", help: "keep the cluster's directory (its daemons' and containers' logs) and print where" },
} as const satisfies Record<string, FlagSpec>;

const MiB = 1024 * 1024;

/** The goal: GNU sort's time / Harvest's time, on the 2-core development machine. */
const GOAL_RATIO = 0.3;

/** GNU sort's threads: the development machine's cores. */
const GNU_PARALLEL = 2;

/** Records per map input file of the warm-up job. */
const WARMUP_RECORDS_PER_MAP = 1000;

/** How often the client asks for the job's state while the clock runs. */
const POLL_MS = 200;

/** The DFS directories of one sort job. */
interface JobPaths {
  input: string;
  output: string;
}

/** Where the time of the timed job went, in ms, from the job report's containers and the tasks' own timings. */
interface Breakdown {
  /** Submission to the job manager's container started by its node manager. */
  jobManagerLaunchMs: number;
  /** The job manager's container started to the first map's container started (it starts, registers, asks). */
  jobManagerToFirstMapMs: number;
  /** First map container started to the last map container ended. */
  mapPhaseMs: number;
  /** Last map ended to the first reduce container started (the reduces wait for every map). */
  mapsToReducesMs: number;
  /** First reduce container started to the last one ended. */
  reducePhaseMs: number;
  /** Last reduce container ended to the job's end as the client saw it. */
  tailMs: number;
  /** Mean per map task: launch (container started -> program running), its phases, its exit. */
  map: Record<string, MeanPhase>;
  /** Mean per reduce task. */
  reduce: Record<string, MeanPhase>;
}

/** The shuffle's throughput, from the reducers' fetch timings and the node managers' counters. */
interface ShuffleFigures {
  /** Bytes the reducers fetched (their own count). */
  fetchedBytes: number;
  /** Bytes the node managers' shuffle services sent during the job (harvest_nm_shuffle_bytes_total). */
  servedBytes: number | undefined;
  /** First fetch started to last fetch done, over every reducer. */
  spanMs: number;
  /** fetchedBytes over that span. */
  MBps: number;
  /** Each reducer's own fetch: its bytes over its fetch time. */
  perReducerMBps: number[];
}

async function run(argv: readonly string[], progress: (line: string) => void): Promise<BenchReport> {
  const f = parseFlags(argv, FLAGS);
  const records = Math.floor((f["size-mb"] * MiB) / RECORD_BYTES);
  if (records < f.maps) throw new Error(`--size-mb ${f["size-mb"]} holds fewer records than --maps ${f.maps}`);
  const bytes = records * RECORD_BYTES;
  const load0 = loadavg();
  const work = mkdtempSync(join(tmpdir(), "harvest-bench-sort-"));
  // The cluster lives below: its containers' account (when run as root) must pass through.
  chmodSync(work, 0o755);
  const clusterDir = join(work, "cluster");
  try {
    const mapFileMiB = Math.ceil(bytes / f.maps / MiB);
    const reduceFileMiB = Math.ceil(bytes / f.reduces / MiB);
    // A map holds its split and the sort's scratch copy; a reduce its runs (in the pieces they came in) and the few
    // buffers the merge fills; and each some room for Node and the file-system client.
    const mapMemoryMb = 2 * mapFileMiB + 256;
    const reduceMemoryMb = Math.ceil(1.5 * reduceFileMiB) + 256;
    const serverMemoryMb = 2 * Math.max(mapMemoryMb, reduceMemoryMb) + 512;
    progress(`starting a ${f.servers}-server cluster (mutual TLS, idle primaries, ${f["server-vcores"]} vcores each)`);
    const idle = join(work, "idle.csv");
    writeFileSync(idle, "time_s,cpu_pct\n" + Array.from({ length: 100 }, (_, i) => `${i * 300},0`).join("\n") + "\n");
    const desc = await startCluster({
      dir: clusterDir,
      primaries: Array.from({ length: f.servers }, () => `trace:${idle}`),
      speed: 1,
      offsetsMs: Array.from({ length: f.servers }, () => 0),
      vcores: f["server-vcores"],
      memoryMb: serverMemoryMb,
      startTimeoutMs: 30_000,
      rm: { localityPolicy: f.locality },
    });
    const dfs = localDfsClient(desc);
    const jobs = localJobClient(desc);
    try {
      const linesIn = join(work, "gnu-in.txt");
      const linesOut = join(work, "gnu-out.txt");
      const main: JobPaths = { input: "/sort/in", output: "/sort/out" };
      const warm: JobPaths = { input: "/sort/warm/in", output: "/sort/warm/out" };

      progress(
        `writing ${fmt(bytes / MiB)} MiB (${records.toLocaleString("en-US")} records) as ${f.maps} DFS files and as GNU sort's lines`,
      );
      const [, loadMs] = await timedAsync(() => loadInput(dfs, main.input, f.seed, records, f.maps, linesIn));
      await loadInput(dfs, warm.input, f.seed + 1, WARMUP_RECORDS_PER_MAP * f.maps, f.maps);

      progress(
        `GNU sort: LC_ALL=C sort --parallel=${GNU_PARALLEL} on ${fmt((records * LINE_BYTES) / MiB)} MiB of lines`,
      );
      execFileSync("sync");
      const gnuLoad = loadavg();
      const gnuCpu0 = { sort: reapedChildrenCpuMs(), machine: readProcStatTotals().busyMs };
      const [, gnuMs] = timed(() =>
        execFileSync("sort", [`--parallel=${GNU_PARALLEL}`, "-T", work, "-o", linesOut, linesIn], {
          env: { ...process.env, LC_ALL: "C" },
          stdio: ["ignore", "ignore", "inherit"],
        }),
      );
      const gnuCpuMs = reapedChildrenCpuMs() - gnuCpu0.sort;
      const gnuOthersCpuMs = readProcStatTotals().busyMs - gnuCpu0.machine - gnuCpuMs;
      const [, gnuSyncMs] = timed(() => execFileSync("sync"));

      const dag = (paths: JobPaths): string => sortDag(paths, f.reduces, mapMemoryMb, reduceMemoryMb);
      progress("warm-up job (untimed): the same DAG on a few records");
      const warmAppId = await jobs.submit(dag(warm));
      const warmReport = await jobs.waitForCompletion(warmAppId, undefined, { pollMs: POLL_MS });
      if (warmReport.outcome !== "JOB_SUCCEEDED")
        throw new Error(`the warm-up job ${warmAppId} ended ${warmReport.outcome}: ${warmReport.diagnostics}`);
      const warmCheck = await checkOutput(dfs, warm.output, f.reduces, f.seed + 1, WARMUP_RECORDS_PER_MAP * f.maps);
      if (!warmCheck.ok) throw new Error(`the warm-up job's output is wrong: ${JSON.stringify(warmCheck)}`);

      const served0 = await shuffleBytesServed(desc);
      const harvestLoad = loadavg();
      const cpu0 = cpuSnapshot(desc);
      progress(`Harvest: ${f.maps} maps and ${f.reduces} reduces (timed from submission to the job's end)`);
      const t0 = Date.now();
      const appId = await jobs.submit(dag(main));
      const report = await jobs.waitForCompletion(appId, undefined, { pollMs: POLL_MS });
      const harvestEndMs = Date.now();
      const harvestMs = harvestEndMs - t0;
      const cpu = cpuSpent(cpu0, cpuSnapshot(desc));
      if (report.outcome !== "JOB_SUCCEEDED")
        throw new Error(
          `the sort job ${appId} ended ${report.outcome}: ${report.diagnostics}\n${await failedTaskLogs(jobs, report)}`,
        );
      const served1 = await shuffleBytesServed(desc);

      progress("checking the output: every record once, byte for byte, in key order, and in GNU sort's order");
      const stats = await readStats(jobs, report);
      if (stats.length !== f.maps + f.reduces)
        throw new Error(`${stats.length} of the ${f.maps + f.reduces} tasks' containers printed their timings`);
      const order = new Uint32Array(records);
      const check = await checkOutput(dfs, main.output, f.reduces, f.seed, records, order);
      const gnuSameOrder = sameOrderAsLines(linesOut, order, records);

      const breakdown = timeBreakdown(report, stats, t0, harvestEndMs);
      const shuffle = shuffleFigures(
        stats,
        served0 !== undefined && served1 !== undefined ? served1 - served0 : undefined,
      );
      const launches = launchLatencies(report, stats);
      const cpuRows = cpuTable(cpu, stats, harvestMs);
      const mbps = (ms: number): number => bytes / 1e6 / (ms / 1000);
      const speed = gnuMs / harvestMs;
      const failedAttempts = failedTasks(report);
      const failedLines =
        failedAttempts.length === 0
          ? []
          : [
              `task attempts that did not succeed (re-run, their time counted): ${failedAttempts.length}`,
              await failedTaskLogs(jobs, report),
            ];

      const lines = [
        `sort: ${fmt(bytes / MiB)} MiB, ${records.toLocaleString("en-US")} records of 100 bytes (10-byte random key, seed ${f.seed})`,
        `  Harvest: ${f.maps} maps -> scatter-gather -> ${f.reduces} reduces, on ${f.servers} servers of ${f["server-vcores"]} vcores (tasks of 1 vcore),`,
        "           mutual TLS, idle primaries; input and output in the DFS with replication 1; timed from submission to",
        "           the job's end as the client saw it",
        `  GNU sort: LC_ALL=C sort --parallel=${GNU_PARALLEL}, local file to local file; the records as ${LINE_BYTES}-byte lines`,
        "           (the key in 20 hex digits, the value as it is, a newline), so it sorts 11 % more bytes",
        `  load average (1 min) at the start ${fmt(load0[0]!, 2)}, before GNU sort ${fmt(gnuLoad[0]!, 2)}, before the Harvest job ${fmt(harvestLoad[0]!, 2)}`,
        "",
        ...table(
          ["sort", "seconds", "MB/s", "GNU time / this"],
          [
            ["GNU sort", fmt(gnuMs / 1000, 2), fmt(mbps(gnuMs)), "1.00x"],
            ["Harvest (job)", fmt(harvestMs / 1000, 2), fmt(mbps(harvestMs)), ratio(gnuMs, harvestMs)],
          ],
        ),
        "",
        `GNU time / Harvest time: ${fmt(speed, 2)}x (goal >= ${fmt(GOAL_RATIO, 2)}x: ${speed >= GOAL_RATIO ? "met" : "NOT met"})`,
        `output: ${check.ok ? "every record once, byte for byte, in key order" : `WRONG: ${JSON.stringify(check)}`}; GNU sort's order ${gnuSameOrder ? "the same" : "DIFFERENT"}`,
        `GNU sort used ${fmt(gnuCpuMs / 1000, 2)} CPU s; the rest of the machine (the idle cluster, anything else) ${fmt(gnuOthersCpuMs / 1000, 2)} meanwhile`,
        `GNU sort's output written back by a sync afterwards in ${fmt(gnuSyncMs / 1000, 2)} s (not counted; the DFS's`,
        "  datanodes write their blocks with O_DIRECT and fsync them before a file is complete)",
        `input loaded (untimed) in ${fmt(loadMs / 1000, 2)} s; warm-up job ${fmt((warmReport.finishMs - warmReport.submitMs) / 1000, 2)} s`,
        "",
        "Where Harvest's time went (ms, from the job report's containers and the tasks' own clocks):",
        "",
        ...table(
          ["span", "ms"],
          [
            ["submission -> job manager's container started", fmt(breakdown.jobManagerLaunchMs, 0)],
            ["job manager started -> first map started", fmt(breakdown.jobManagerToFirstMapMs, 0)],
            ["map phase: first map started -> last map ended", fmt(breakdown.mapPhaseMs, 0)],
            ["last map ended -> first reduce started", fmt(breakdown.mapsToReducesMs, 0)],
            ["reduce phase: first reduce started -> last ended", fmt(breakdown.reducePhaseMs, 0)],
            ["last reduce ended -> job's end seen by the client", fmt(breakdown.tailMs, 0)],
          ],
        ),
        "",
        ...phaseTable("map", f.maps, breakdown.map),
        "",
        ...phaseTable("reduce", f.reduces, breakdown.reduce),
        "",
        `peak resident memory (MiB, the most of any task): map ${fmt(peakRss(stats, "map"), 0)} of its ${mapMemoryMb} MB container, reduce ${fmt(peakRss(stats, "reduce"), 0)} of ${reduceMemoryMb} MB`,
        `node-local map starts (the server held the map's block; localityPolicy ${f.locality}): ${localityLine(report)}`,
        `task launch (node manager started the container -> the task's program running): p50 ${fmt(launches.p50, 0)} ms, p90 ${fmt(launches.p90, 0)} ms, max ${fmt(launches.max, 0)} ms over ${launches.count} tasks`,
        ...failedLines,
        "",
        `CPU during the Harvest job (${fmt(harvestMs / 1000, 2)} s, ${cpu.cores} cores: ${fmt((cpu.cores * harvestMs) / 1000, 1)} CPU seconds to spend):`,
        "",
        ...table(["who", "CPU s", "share of the machine"], cpuRows),
        "",
        `shuffle: ${fmt(shuffle.fetchedBytes / MiB)} MiB fetched by the reducers in ${fmt(shuffle.spanMs, 0)} ms from the first fetch's start to the last's end: ${fmt(shuffle.MBps)} MB/s` +
          ` (each reducer: ${shuffle.perReducerMBps.map((x) => fmt(x)).join(", ")} MB/s); the node managers counted ${shuffle.servedBytes === undefined ? "-" : fmt(shuffle.servedBytes / MiB)} MiB served`,
      ];
      return {
        lines,
        result: {
          flags: f,
          records,
          bytes,
          loadAverage: { start: load0, gnu: gnuLoad, harvest: harvestLoad },
          gnuMs,
          gnuCpuMs,
          gnuOthersCpuMs,
          gnuSyncMs,
          harvestMs,
          gnuOverHarvest: speed,
          goal: GOAL_RATIO,
          appId,
          rmJobMs: report.finishMs - report.submitMs,
          warmupMs: warmReport.finishMs - warmReport.submitMs,
          loadMs,
          check,
          gnuSameOrder,
          breakdown,
          shuffle,
          launchMs: launches,
          mapLocality: {
            nodeLocal: report.progress?.vertices.find((v) => v.name === "map")?.nodeLocal ?? 0,
            rackLocal: report.progress?.vertices.find((v) => v.name === "map")?.rackLocal ?? 0,
            offSwitch: report.progress?.vertices.find((v) => v.name === "map")?.offSwitch ?? 0,
          },
          cpu,
          tasks: stats,
        },
      };
    } finally {
      dfs.close();
      jobs.close();
      await stopCluster(clusterDir);
    }
  } finally {
    if (f.keep) progress(`kept ${work}: the cluster's logs are under ${clusterDir}`);
    else rmSync(work, { recursive: true, force: true });
  }
}

/** The job's task containers that ended other than SUCCEEDED. */
function failedTasks(report: JobReport): JobReport["containers"] {
  return report.containers.filter((c) => !c.isAm && c.cause !== "SUCCEEDED" && c.cause !== "EXIT_CAUSE_UNSPECIFIED");
}

/** "6 of 8 (75 %), 2 rack-local, 0 off-switch" for the map vertex of a sort job. */
function localityLine(report: JobReport): string {
  const map = report.progress?.vertices.find((v) => v.name === "map");
  const node = map?.nodeLocal ?? 0;
  const rack = map?.rackLocal ?? 0;
  const off = map?.offSwitch ?? 0;
  const starts = node + rack + off;
  if (starts === 0) return "-";
  return `${node} of ${starts} (${Math.round((100 * node) / starts)} %), ${rack} rack-local, ${off} off-switch`;
}

/** The last lines of failed task containers' stderr (the first and the last two), for the report and errors. */
async function failedTaskLogs(jobs: JobClient, report: JobReport): Promise<string> {
  const failed = failedTasks(report);
  // The first failure (often the cause of the rest) and the last ones.
  const shown = failed.length > 3 ? [failed[0]!, ...failed.slice(-2)] : failed;
  const logs = await Promise.all(
    shown.map(async (c) => {
      const log = await jobs.containerLog(report.appId, c.containerId, "stderr", 4096).catch((e: Error) => e.message);
      return `--- ${c.containerId} (${c.cause}) stderr:\n${log.trim().split("\n").slice(-15).join("\n")}`;
    }),
  );
  return logs.join("\n");
}

/**
 * The DAG of one sort: the map vertex reads `<input>/part-<index>`, the reduce vertex writes `<output>/part-NNNNN`.
 * The tasks start with the Node options of a process that moves file data as a client (localcluster/node-options.ts,
 * as `harvest fs put` and `get` do): without them V8 ran 5-6 full collections per map and 15-16 per reduce of a 256 MiB
 * sort (the fetched and read buffers, outside its heap, count against the old generation's room), with them 1 and 3,
 * and the tasks spent 10-30 % less CPU.
 */
function sortDag(paths: JobPaths, reduces: number, mapMemoryMb: number, reduceMemoryMb: number): string {
  const task = (name: string): string[] => [
    "node",
    ...DATA_CLIENT_NODE_OPTIONS,
    `\${HARVEST_HOME}/dist/examples/tasks/${name}.js`,
  ];
  return JSON.stringify({
    name: "terasort",
    vertices: [
      {
        // One task per block of the input's files (one block each), placed where its block is.
        name: "map",
        input: { paths: [`dfs:${paths.input}`], recordBytes: RECORD_BYTES },
        command: task("terasort-map"),
        resources: { vcores: 1, memoryMb: mapMemoryMb },
      },
      {
        name: "reduce",
        parallelism: reduces,
        command: [...task("terasort-reduce"), "--output", `dfs:${paths.output}`],
        resources: { vcores: 1, memoryMb: reduceMemoryMb },
      },
    ],
    edges: [{ from: "map", to: "reduce", type: "scatter-gather" }],
  });
}

/**
 * Writes records 0 .. `records` - 1 of data set `seed` as `maps` files `<dir>/part-<i>` (replication 1), and, with
 * `linesFile`, the same records as GNU sort's lines into that local file.
 */
async function loadInput(
  dfs: DfsClient,
  dir: string,
  seed: number,
  records: number,
  maps: number,
  linesFile?: string,
): Promise<void> {
  await dfs.mkdir(dir);
  const starts = splitRecords(records, maps);
  const fd = linesFile === undefined ? undefined : openSync(linesFile, "w");
  try {
    for (let i = 0; i < maps; i++) {
      const data = generateRecords(seed, starts[i]!, starts[i + 1]! - starts[i]!);
      const done = writeDfs(dfs, `${dir}/part-${i}`, data);
      if (fd !== undefined) {
        const lines = sortLines(data);
        for (let at = 0; at < lines.length;) at += writeSync(fd, lines, at, lines.length - at);
      }
      await done;
    }
  } finally {
    if (fd !== undefined) closeSync(fd);
  }
}

/** Writes `data` as one block (replication 1): the map vertex's input gets one split, so one task, per file. */
function writeDfs(dfs: DfsClient, path: string, data: Buffer): Promise<void> {
  const blockSizeBytes = Math.max(512, Math.ceil(data.length / 512) * 512);
  return new Promise((resolve, reject) => {
    const out = dfs.createWriteStream(path, { replication: 1, overwrite: true, blockSizeBytes });
    out.on("finish", resolve);
    out.on("error", reject);
    out.end(data);
  });
}

/** Reads the reducers' files in reducer order through the check; `order`, when given, gets the record numbers. */
async function checkOutput(
  dfs: DfsClient,
  dir: string,
  reduces: number,
  seed: number,
  records: number,
  order?: Uint32Array,
): Promise<SortCheckResult> {
  const check = new SortedOutputCheck(seed, records, order);
  for (let r = 0; r < reduces; r++)
    for await (const chunk of dfs.createReadStream(`${dir}/${outputFileName(r)}`)) check.push(chunk as Buffer);
  return check.finish();
}

/** True when GNU sort's output file holds exactly `records` lines whose record numbers run as `order` does. */
function sameOrderAsLines(file: string, order: Uint32Array, records: number): boolean {
  const fd = openSync(file, "r");
  try {
    const buf = Buffer.allocUnsafe(LINE_BYTES * 65_536);
    let i = 0;
    let carry = 0;
    for (;;) {
      const got = readSync(fd, buf, carry, buf.length - carry, null);
      const have = carry + got;
      let at = 0;
      for (; at + LINE_BYTES <= have; at += LINE_BYTES) {
        if (i >= records || lineRecordNumber(buf, at) !== order[i]) return false;
        i++;
      }
      if (got === 0) return at === have && i === records;
      buf.copy(buf, 0, at, have);
      carry = have - at;
    }
  } finally {
    closeSync(fd);
  }
}

/** The timings every task of the job printed last on its stdout, read from its node manager. */
async function readStats(jobs: JobClient, report: JobReport): Promise<TaskStats[]> {
  const out: TaskStats[] = [];
  for (const c of report.containers) {
    if (c.isAm || c.cause !== "SUCCEEDED") continue;
    const stats = parseStatsLine(await jobs.containerLog(report.appId, c.containerId, "stdout"));
    if (stats) out.push(stats);
  }
  return out;
}

/** The spans of the job, from its containers (node managers' clocks) and the tasks' stats; every clock is this host's. */
function timeBreakdown(report: JobReport, stats: readonly TaskStats[], submittedMs: number, endMs: number): Breakdown {
  const byId = new Map(report.containers.map((c) => [c.containerId, c]));
  const am = report.containers.find((c) => c.isAm);
  const of = (vertex: string) =>
    stats.filter((s) => s.vertex === vertex).map((s) => ({ s, c: byId.get(s.containerId) }));
  const maps = of("map");
  const reduces = of("reduce");
  const started = (xs: typeof maps): number[] => xs.map((x) => x.c?.startedMs ?? Number.NaN);
  const ended = (xs: typeof maps): number[] => xs.map((x) => x.c?.finishedMs ?? Number.NaN);
  const firstMap = Math.min(...started(maps));
  const lastMap = Math.max(...ended(maps));
  const firstReduce = Math.min(...started(reduces));
  const lastReduce = Math.max(...ended(reduces));
  const amStarted = am?.startedMs ?? Number.NaN;
  return {
    jobManagerLaunchMs: amStarted - submittedMs,
    jobManagerToFirstMapMs: firstMap - amStarted,
    mapPhaseMs: lastMap - firstMap,
    mapsToReducesMs: firstReduce - lastMap,
    reducePhaseMs: lastReduce - firstReduce,
    tailMs: endMs - lastReduce,
    map: meanPhases(maps),
    reduce: meanPhases(reduces),
  };
}

/** The largest peak resident memory (MiB) a vertex's tasks reported. */
function peakRss(stats: readonly TaskStats[], vertex: string): number {
  return Math.max(...stats.filter((s) => s.vertex === vertex).map((s) => s.maxRssMiB ?? Number.NaN));
}

/** A phase's mean over a vertex's tasks: wall-clock ms and the task's CPU ms (NaN where a task cannot tell). */
interface MeanPhase {
  wallMs: number;
  cpuMs: number;
}

/**
 * Each phase's mean over the tasks: launch (container started by its node manager -> program running; its CPU is
 * Node's start and the program's modules), the task's own phases, and exit (done -> the node manager saw it end).
 */
function meanPhases(
  xs: readonly { s: TaskStats; c: { startedMs: number; finishedMs: number } | undefined }[],
): Record<string, MeanPhase> {
  const sums = new Map<string, MeanPhase>();
  const add = (k: string, wallMs: number, cpuMs: number): void => {
    const m = sums.get(k) ?? { wallMs: 0, cpuMs: 0 };
    sums.set(k, { wallMs: m.wallMs + wallMs, cpuMs: m.cpuMs + cpuMs });
  };
  for (const { s, c } of xs) {
    add("launch", s.mainStartMs - (c?.startedMs ?? Number.NaN), s.startupCpuMs);
    for (const [name, p] of Object.entries(s.phases)) add(name, p.endMs - p.startMs, p.cpuMs);
    add("exit", (c?.finishedMs ?? Number.NaN) - s.endMs, Number.NaN);
  }
  const n = Math.max(1, xs.length);
  return Object.fromEntries([...sums].map(([k, v]) => [k, { wallMs: v.wallMs / n, cpuMs: v.cpuMs / n }]));
}

/** A table of a vertex's mean phases. */
function phaseTable(vertex: string, count: number, phases: Record<string, MeanPhase>): string[] {
  return table(
    [`a ${vertex} task (mean of ${count})`, "wall ms", "CPU ms"],
    Object.entries(phases).map(([k, v]) => [k, fmt(v.wallMs, 0), fmt(v.cpuMs, 0)]),
  );
}

/** Container started (node manager) -> program running (the task's clock), over every task of the job. */
function launchLatencies(report: JobReport, stats: readonly TaskStats[]) {
  const byId = new Map(report.containers.map((c) => [c.containerId, c]));
  const sorted = Float64Array.from(
    stats.flatMap((s) => {
      const c = byId.get(s.containerId);
      return c && c.startedMs > 0 ? [s.mainStartMs - c.startedMs] : [];
    }),
  ).sort();
  return {
    count: sorted.length,
    p50: quantile(sorted, 0.5),
    p90: quantile(sorted, 0.9),
    max: sorted[sorted.length - 1] ?? Number.NaN,
  };
}

function shuffleFigures(stats: readonly TaskStats[], servedBytes: number | undefined): ShuffleFigures {
  const fetches = stats.flatMap((s) =>
    s.vertex === "reduce" && s.phases["fetch"] ? [{ s, f: s.phases["fetch"] }] : [],
  );
  const fetchedBytes = fetches.reduce((sum, x) => sum + x.s.bytesIn, 0);
  const spanMs = Math.max(...fetches.map((x) => x.f.endMs)) - Math.min(...fetches.map((x) => x.f.startMs));
  return {
    fetchedBytes,
    servedBytes,
    spanMs,
    MBps: fetchedBytes / 1e6 / (spanMs / 1000),
    perReducerMBps: fetches.map((x) => x.s.bytesIn / 1e6 / ((x.f.endMs - x.f.startMs) / 1000)),
  };
}

/** CPU time (ms) of this process's children that have exited and been waited for (cutime + cstime). */
function reapedChildrenCpuMs(): number {
  const f = procStatFields(process.pid);
  // Fields 16 and 17 (cutime, cstime) are at index 13 and 14.
  return f ? ((Number(f[13]) + Number(f[14])) * 1000) / clockTicksPerSecond() : Number.NaN;
}

/** CPU time so far (ms): the cluster's daemons by kind, the containers the node managers have reaped, and the machine. */
interface CpuSnapshot {
  resourceManager: number;
  namenode: number;
  nodeManagers: number;
  datanodes: number;
  /** Containers (job managers and tasks), running or exited: the node managers' process trees but themselves. */
  containers: number;
  /** This process (the bench: its client polls the job). */
  bench: number;
  machineBusy: number;
  cores: number;
}

function cpuSnapshot(desc: ClusterDescriptor): CpuSnapshot {
  const msPerTick = 1000 / clockTicksPerSecond();
  // Fields 14 and 15 (utime, stime) are at index 11 and 12.
  const own = (d: DaemonRecord | undefined): number => {
    const f = d ? procStatFields(d.pid) : undefined;
    return f ? (Number(f[11]) + Number(f[12])) * msPerTick : 0;
  };
  // A node manager's tree: itself, its live containers, and (cutime, cstime) those it has reaped.
  const trees = processTreesCpuMs(desc.nodes.map((n) => n.pid));
  const self = process.cpuUsage();
  return {
    resourceManager: own(desc.rm),
    namenode: own(desc.nn),
    nodeManagers: desc.nodes.reduce((sum, n) => sum + own(n), 0),
    datanodes: desc.nodes.reduce((sum, n) => sum + own(n.datanode), 0),
    containers: desc.nodes.reduce((sum, n) => sum + (trees.get(n.pid) ?? 0) - own(n), 0),
    bench: (self.user + self.system) / 1000,
    machineBusy: readProcStatTotals().busyMs,
    cores: availableParallelism(),
  };
}

function cpuSpent(a: CpuSnapshot, b: CpuSnapshot): CpuSnapshot {
  const out = { ...b };
  for (const k of Object.keys(a) as (keyof CpuSnapshot)[]) if (k !== "cores") out[k] = b[k] - a[k];
  return out;
}

/** Who used the machine's CPU during the job: the tasks (their own count), the daemons, and everything else. */
function cpuTable(cpu: CpuSnapshot, stats: readonly TaskStats[], jobMs: number): string[][] {
  const tasks = (vertex: string): number => stats.filter((s) => s.vertex === vertex).reduce((a, s) => a + s.cpuMs, 0);
  const maps = tasks("map");
  const reduces = tasks("reduce");
  const ours = cpu.resourceManager + cpu.namenode + cpu.nodeManagers + cpu.datanodes + cpu.containers + cpu.bench;
  const capacity = cpu.cores * jobMs;
  const row = (who: string, ms: number): string[] => [who, fmt(ms / 1000, 2), `${fmt((100 * ms) / capacity, 0)} %`];
  return [
    row("map tasks", maps),
    row("reduce tasks", reduces),
    row("job manager, and tasks after their last figure", cpu.containers - maps - reduces),
    row("datanodes", cpu.datanodes),
    row("node managers (shuffle services)", cpu.nodeManagers),
    row("resource manager and namenode", cpu.resourceManager + cpu.namenode),
    row("the bench (polling the job)", cpu.bench),
    row("anything else on the machine", cpu.machineBusy - ours),
    row("machine busy", cpu.machineBusy),
  ];
}

/** The node managers' harvest_nm_shuffle_bytes_total, summed; undefined when one cannot be read. */
async function shuffleBytesServed(desc: ClusterDescriptor): Promise<number | undefined> {
  let total = 0;
  for (const nm of desc.nodes) {
    const url = httpUrlOf(desc, nm);
    if (!url) return undefined;
    const body = await httpsGet(desc, `${url}/metrics`).catch(() => undefined);
    if (body === undefined) return undefined;
    for (const m of body.matchAll(/^harvest_nm_shuffle_bytes_total(?:\{[^}]*\})?\s+(\S+)/gm)) total += Number(m[1]);
  }
  return total;
}

/** A daemon's web server URL: from the descriptor, else from its ready file. */
function httpUrlOf(desc: ClusterDescriptor, d: DaemonRecord): string | undefined {
  if (d.httpUrl) return d.httpUrl;
  const ready = join(desc.dir, "run", `${d.name ?? "?"}.ready`);
  return existsSync(ready) ? (JSON.parse(readFileSync(ready, "utf8")) as { httpUrl?: string }).httpUrl : undefined;
}

/** GETs `url` trusting the cluster CA, as the admin. */
function httpsGet(desc: ClusterDescriptor, url: string): Promise<string> {
  const sec = desc.security;
  return new Promise((resolve, reject) => {
    const req = https.get(
      url,
      {
        ...(sec ? { ca: readFileSync(sec.ca), cert: readFileSync(sec.cert), key: readFileSync(sec.key) } : {}),
        headers: { accept: "text/plain" },
      },
      (res) => {
        const parts: Buffer[] = [];
        res.on("data", (b: Buffer) => parts.push(b));
        res.on("end", () =>
          res.statusCode === 200
            ? resolve(Buffer.concat(parts).toString("utf8"))
            : reject(new Error(`GET ${url}: ${res.statusCode}`)),
        );
        res.on("error", reject);
      },
    );
    req.on("error", reject);
    req.setTimeout(10_000, () => req.destroy(new Error(`GET ${url} timed out`)));
  });
}

/** The sort benchmark. */
export const sortBench: BenchDefinition = {
  name: "sort",
  summary: "TeraSort of 1 GiB (100-byte records) DFS to DFS through a map and a reduce vertex vs GNU sort",
  flags: FLAGS,
  run,
};
