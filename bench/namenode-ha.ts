/**
 * `npm run bench -- namenode --ha` (issue 43): in one run, on a three-member etcd ensemble on loopback,
 * (1) durable create+addBlock+complete per second, sent as DfsClient sends them, of a lone namenode and of an HA pair
 * (the same load against the active; each group commit is one fenced append to the shared log in etcd, acknowledged
 * by a majority, before the local LevelDB batch), with the shared-log appends made (edits per consensus write);
 * (2) the ensemble's own ceiling: puts/s with the masters' certificate, one at a time and at the clients' concurrency,
 * of values the size of the log entries just written, and the latency of one synced LevelDB batch on the same disk,
 * so that the HA figure can be read against what the service and the disk allow; (3) failover time: two namenode
 * processes (dist/namenode/main.js), kill -9 of the active, time until the other is active (its /metrics) and until a
 * write through a client of both addresses is acknowledged, the killed one restarted as a standby; repeated `--kills`
 * times with the default session TTL (5 s) and with 2 s.
 */
import { spawn } from "node:child_process";
import type { ChildProcess } from "node:child_process";
import { closeSync, existsSync, mkdirSync, mkdtempSync, openSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { availableParallelism, tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { Level } from "level";
import { call, loadHarvestProto, makeClient } from "../common/grpc.js";
import { Logger } from "../common/log.js";
import { NameNode } from "../namenode/index.js";
import { createCa } from "../localcluster/cluster-ca.js";
import {
  DEFAULT_ETCD_BINARY,
  etcdBinary,
  haCoordinationOf,
  masterClient,
  startEnsemble,
  stopEnsemble,
} from "../localcluster/etcd-ensemble.js";
import type { EnsembleDescriptor } from "../localcluster/etcd-ensemble.js";
import type { ClientNamenodeClient } from "../proto/generated/harvest/v1/ClientNamenode.js";
import type { BenchReport } from "./definition.js";
import * as load from "./nn-load.js";
import { fmt, goalRatio, quantile, table } from "./report.js";
import { clockTicksPerSecond, procStatFields } from "../common/proc-stats.js";

/** Issue 43: HA durable ops/s at least this fraction of a lone namenode's... */
const HA_GOAL = 0.5;
/** ...or, when the ensemble cannot sustain that, at least this fraction of the ensemble's own put ceiling. */
const CEILING_GOAL = 0.8;
/** The session TTLs the failover is measured with: the default, and a short one. */
const FAILOVER_TTLS_S = [5, 2];
/** The issue's failover goal: a new active within this long of the loss. */
const FAILOVER_GOAL_MS = 10_000;

/** The flags runHa reads (bench/namenode.ts parses them). */
export interface HaBenchFlags {
  clients: number;
  seconds: number;
  kills: number;
  rounds: number;
}

/** The runs of one kind together: their files and appends over their seconds; cores and lag as the mean. */
function combine(runs: readonly Throughput[]): Throughput {
  const sum = (pick: (t: Throughput) => number): number => runs.reduce((a, t) => a + pick(t), 0);
  const mean = (pick: (t: Throughput) => number): number => sum(pick) / runs.length;
  const secs = sum((t) => t.secs);
  return {
    ops: (sum((t) => t.files) * 3) / secs,
    files: sum((t) => t.files),
    secs,
    appends: sum((t) => t.appends),
    standbyLag: Math.max(...runs.map((t) => t.standbyLag)),
    cores: {
      bench: mean((t) => t.cores.bench),
      standby: mean((t) => t.cores.standby),
      etcd: mean((t) => t.cores.etcd),
    },
  };
}

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** Polls `check` every `everyMs` until it returns true; throws naming `what` after `timeoutMs`. */
async function until(what: string, check: () => boolean | Promise<boolean>, timeoutMs = 60_000, everyMs = 20) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (await check()) return;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await sleep(everyMs);
  }
}

interface Throughput {
  ops: number;
  files: number;
  secs: number;
  /** Shared-log entries appended during the run (HA only). */
  appends: number;
  /** Entries the standby was behind the active when the run ended (HA only). */
  standbyLag: number;
  /** Cores busy during the run: this process (clients, datanodes, the namenode), the standby, the etcd members. */
  cores: { bench: number; standby: number; etcd: number };
}

/** CPU time (ms) `pids` have used so far (gone processes count 0). */
function cpuMsOf(pids: readonly number[]): number {
  const tick = 1000 / clockTicksPerSecond();
  let ms = 0;
  for (const pid of pids) {
    const rest = procStatFields(pid);
    if (rest) ms += (Number(rest[11]) + Number(rest[12])) * tick;
  }
  return ms;
}

/** A gauge's value on a namenode's /metrics (undefined when it does not answer). */
async function metric(p: NnProcess, name: string): Promise<number | undefined> {
  try {
    const res = await fetch(p.metricsUrl, { signal: AbortSignal.timeout(1_000) });
    const m = new RegExp(`^${name}(?:\\{[^}]*\\})? (\\S+)$`, "m").exec(await res.text());
    return m ? Number(m[1]) : undefined;
  } catch {
    return undefined;
  }
}

/**
 * Runs the durable load against `nn` (the clients call it), with an HA standby process beside it when given (the
 * datanodes report to both, as real ones do), then stops them.
 */
async function throughput(
  f: HaBenchFlags,
  e: EnsembleDescriptor,
  nn: NameNode,
  standby: NnProcess | undefined,
  label: string,
  progress: (l: string) => void,
): Promise<Throughput> {
  await nn.start();
  let dns: load.FakeDatanode[] = [];
  try {
    await until("the in-process namenode to be active", () => nn.haStatus.role === "active");
    if (standby) {
      await startProcess(standby);
      await until("the standby process to follow", async () => (await metric(standby, "harvest_ha_active")) === 0);
    }
    dns = [nn.address, ...(standby ? [standby.address] : [])].flatMap((address) =>
      ["dn-1", "dn-2", "dn-3"].map((id, i) => load.fakeDatanode(address, id, `/rack-${(i % 2) + 1}`)),
    );
    const { clients, channels } = load.namespaceClients(nn.address, f.clients);
    try {
      await load.waitForLiveDatanodes(clients[0]!, 3);
      await call(clients[0]!, clients[0]!.mkdirs, { path: "/bench", owner: "bench" });
      const txid0 = nn.haStatus.appliedTxid;
      const etcdPids = e.members.map((m) => m.pid);
      const standbyPids = standby?.child?.pid ? [standby.child.pid] : [];
      const cpu0 = { bench: process.cpuUsage(), standby: cpuMsOf(standbyPids), etcd: cpuMsOf(etcdPids) };
      progress(`create + addBlock + complete (stream), ${label}, from ${f.clients} clients for ${f.seconds} s`);
      const run = await load.durableRun(
        f.clients,
        f.seconds,
        (i) => load.streamCalls(channels[i]!),
        load.reporter(dns),
        "/bench/f",
      );
      const used = process.cpuUsage(cpu0.bench);
      const cores = {
        bench: (used.user + used.system) / 1000 / (run.secs * 1000),
        standby: (cpuMsOf(standbyPids) - cpu0.standby) / (run.secs * 1000),
        etcd: (cpuMsOf(etcdPids) - cpu0.etcd) / (run.secs * 1000),
      };
      const appends = nn.haStatus.appliedTxid - txid0;
      const standbyTxid = standby ? await metric(standby, "harvest_nn_ha_applied_txid") : undefined;
      const standbyLag = standbyTxid === undefined ? 0 : nn.haStatus.appliedTxid - standbyTxid;
      return { ...run, appends, standbyLag, cores };
    } finally {
      for (const ch of channels) ch.close();
      for (const c of clients) c.close();
    }
  } finally {
    // The namenodes first: datanodes that leave before them would be mourned as lost replicas.
    if (standby) await stopProcess(standby);
    await nn.stop();
    for (const d of dns) d.stop();
  }
}

/** A namenode of the throughput runs, in this process. */
function benchNameNode(
  dataDir: string,
  ha?: { coordination: ReturnType<typeof haCoordinationOf>; id: string; clusterId: string },
) {
  return new NameNode(
    {
      dataDir,
      host: "127.0.0.1",
      defaultReplication: 3,
      defaultBlockSizeBytes: load.BLOCK_BYTES * 1024,
      replicationIntervalMs: 5_000,
      // The clients claim the user "bench", which owns the namespace here (it makes /bench under the root).
      superuser: "bench",
      ...(ha ? { haCoordination: { ...ha.coordination, clusterId: ha.clusterId }, haId: ha.id } : {}),
    },
    { logger: new Logger(ha ? ha.id : "nn", "warn") },
  );
}

/** Sizes (bytes) of the newest shared-log entries of cluster `clusterId` (at most 256), for the ceiling's values. */
async function logEntrySizes(e: EnsembleDescriptor, clusterId: string): Promise<number[]> {
  const client = await masterClient(e);
  try {
    const kvs = await client
      .getAll()
      .prefix(`/harvest/${clusterId}/nn/log/`)
      .sort("Key", "Descend")
      .limit(256)
      .buffers();
    return Object.values(kvs).map((v) => v.length);
  } finally {
    client?.close();
  }
}

/**
 * Puts/s of `bytes`-byte values with the masters' certificate: `concurrency` puts in flight for `seconds`. `fenced`:
 * each put is a shared-log append's transaction instead (the fence key's create revision and the new key's absence
 * compared, then the put).
 */
async function putCeiling(e: EnsembleDescriptor, bytes: number, concurrency: number, seconds: number, fenced = false) {
  const client = await masterClient(e);
  const value = Buffer.alloc(bytes, "x");
  const prefix = "/harvest/bench-ceiling/";
  const latencies: number[] = [];
  try {
    await client.put(`${prefix}fence`).value("x");
    const fence = Number((await client.get(`${prefix}fence`).exec()).kvs[0]?.create_revision ?? 0);
    const deadline = performance.now() + seconds * 1000;
    const t0 = performance.now();
    await Promise.all(
      Array.from({ length: concurrency }, async (_, w) => {
        for (let i = 0; performance.now() < deadline; i++) {
          const s = performance.now();
          if (fenced) {
            const key = `${prefix}log/${w}-${i}`;
            await client
              .if(`${prefix}fence`, "Create", "==", fence)
              .and(key, "Create", "==", 0)
              .then(client.put(key).value(value))
              .commit();
          } else await client.put(`${prefix}w${w}/${i % 100}`).value(value);
          latencies.push(performance.now() - s);
        }
      }),
    );
    const secs = (performance.now() - t0) / 1000;
    latencies.sort((a, b) => a - b);
    return { putsPerSec: latencies.length / secs, p50Ms: quantile(latencies, 0.5) };
  } finally {
    await client
      .delete()
      .prefix(prefix)
      .catch(() => undefined);
    client.close();
  }
}

/** Milliseconds of one synced LevelDB batch (`bytes` of value) on the disk of `dir`: what a namenode's group commit pays. */
async function levelSyncMs(dir: string, bytes: number, seconds: number): Promise<number> {
  const db = new Level<string, string>(dir, { valueEncoding: "utf8" });
  await db.open();
  const value = "x".repeat(bytes);
  const times: number[] = [];
  try {
    const deadline = performance.now() + seconds * 1000;
    for (let i = 0; performance.now() < deadline; i++) {
      const s = performance.now();
      await db.batch([{ type: "put", key: `k${i % 100}`, value }], { sync: true } as never);
      times.push(performance.now() - s);
    }
  } finally {
    await db.close();
  }
  times.sort((a, b) => a - b);
  return quantile(times, 0.5);
}

/** One namenode process of the failover runs. */
interface NnProcess {
  id: string;
  config: string;
  ready: string;
  log: string;
  address: string;
  metricsUrl: string;
  child?: ChildProcess;
}

/** Starts (or starts again) `p` as `node dist/namenode/main.js` and waits for its ready file. */
async function startProcess(p: NnProcess): Promise<void> {
  rmSync(p.ready, { force: true });
  const out = openSync(p.log, "a");
  const main = fileURLToPath(new URL("../namenode/main.js", import.meta.url));
  p.child = spawn(process.execPath, [main, "--config", p.config, "--ready-file", p.ready], {
    stdio: ["ignore", out, out],
  });
  closeSync(out);
  const child = p.child;
  await until(`namenode ${p.id} to start (see ${p.log})`, () => {
    if (child.exitCode !== null) throw new Error(`namenode ${p.id} exited with ${child.exitCode}; see ${p.log}`);
    return existsSync(p.ready);
  });
  if (p.address) return;
  // First start, on ports the kernel picked: later starts take the same ones (the clients know them).
  const ready = JSON.parse(readFileSync(p.ready, "utf8")) as { address: string; httpUrl: string };
  p.address = ready.address;
  p.metricsUrl = `${ready.httpUrl.replace(/\/$/, "")}/metrics`;
  const config = JSON.parse(readFileSync(p.config, "utf8")) as Record<string, unknown>;
  const port = (url: string): number => Number(/:(\d+)\/?$/.exec(url)?.[1]);
  writeFileSync(p.config, JSON.stringify({ ...config, port: port(ready.address), httpPort: port(ready.httpUrl) }));
}

/** Whether the namenode's /metrics says it is active (false when it does not answer). */
async function isActive(p: NnProcess): Promise<boolean> {
  return (await metric(p, "harvest_ha_active")) === 1;
}

/** Stops the process (SIGTERM, SIGKILL after 10 s). */
async function stopProcess(p: NnProcess): Promise<void> {
  const child = p.child;
  if (!child || child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise<void>((r) => child.once("exit", () => r()));
  child.kill("SIGTERM");
  const timer = setTimeout(() => child.kill("SIGKILL"), 10_000);
  await exited;
  clearTimeout(timer);
}

/** A namenode process of an HA pair in `dir` (not started; its address is known once it has started). */
function nnProcess(
  dir: string,
  id: string,
  coordination: ReturnType<typeof haCoordinationOf> & { clusterId: string; sessionTtlS?: number },
): NnProcess {
  const config = join(dir, `${id}.json`);
  writeFileSync(
    config,
    JSON.stringify({
      dataDir: join(dir, id),
      host: "127.0.0.1",
      insecure: true,
      superuser: "bench",
      defaultBlockSizeBytes: load.BLOCK_BYTES * 1024,
      haCoordination: coordination,
      haId: id,
    }),
  );
  return {
    id,
    config,
    ready: join(dir, `${id}.ready`),
    log: join(dir, `${id}.log`),
    address: "",
    metricsUrl: "",
  };
}

/** Failover times (ms) of `kills` kill -9s of the active namenode of a pair of processes with session TTL `ttlS`. */
async function failovers(
  e: EnsembleDescriptor,
  root: string,
  ttlS: number,
  kills: number,
  progress: (l: string) => void,
) {
  const dir = join(root, `failover-ttl${ttlS}`);
  mkdirSync(dir, { recursive: true });
  const coordination = { ...haCoordinationOf(e), clusterId: `failover-ttl${ttlS}`, sessionTtlS: ttlS };
  const procs = [nnProcess(dir, "nn-a", coordination), nnProcess(dir, "nn-b", coordination)];
  const toActive: number[] = [];
  const toWrite: number[] = [];
  let client: ClientNamenodeClient | undefined;
  try {
    await Promise.all(procs.map((p) => startProcess(p)));
    client = makeClient(loadHarvestProto().ClientNamenode, procs.map((p) => p.address).join(","));
    await until("an active namenode", async () => (await Promise.all(procs.map(isActive))).some(Boolean));
    await call(client, client.mkdirs, { path: "/failover", owner: "bench" }, 30_000);
    for (let k = 0; k < kills; k++) {
      const states = await Promise.all(procs.map(isActive));
      const victim = procs[states.indexOf(true)]!;
      const survivor = procs.find((p) => p !== victim)!;
      const t0 = performance.now();
      victim.child!.kill("SIGKILL");
      // A write through a client of both addresses, retried until acknowledged, beside the survivor's own word.
      const written = (async () => {
        for (;;) {
          try {
            await call(client, client.mkdirs, { path: `/failover/k${k}`, owner: "bench" }, 5_000);
            return performance.now() - t0;
          } catch {
            await sleep(20);
          }
        }
      })();
      await until(`${survivor.id} to become active`, () => isActive(survivor), 60_000);
      toActive.push(performance.now() - t0);
      toWrite.push(await written);
      progress(
        `  ttl ${ttlS} s, kill ${k + 1}/${kills}: ${survivor.id} active after ${fmt(toActive.at(-1)! / 1000, 2)} s, ` +
          `write acknowledged after ${fmt(toWrite.at(-1)! / 1000, 2)} s`,
      );
      // The killed one comes back on its data directory, as a standby.
      await new Promise<void>((r) =>
        victim.child!.exitCode !== null || victim.child!.signalCode !== null
          ? r()
          : victim.child!.once("exit", () => r()),
      );
      await startProcess(victim);
      if (await isActive(victim)) throw new Error(`${victim.id} came back active, not standby`);
    }
  } finally {
    client?.close();
    await Promise.all(procs.map((p) => stopProcess(p)));
  }
  const stats = (xs: number[]) => {
    const s = [...xs].sort((a, b) => a - b);
    return { p50Ms: quantile(s, 0.5), maxMs: s.at(-1) ?? 0 };
  };
  return { ttlS, kills, toActive: stats(toActive), toWrite: stats(toWrite), toActiveMs: toActive, toWriteMs: toWrite };
}

/** The HA figures (see the file comment); a clear skip without an etcd program. */
export async function runHa(f: HaBenchFlags, progress: (line: string) => void): Promise<BenchReport> {
  if (!etcdBinary()) {
    const where = process.env["HARVEST_ETCD"] ?? DEFAULT_ETCD_BINARY;
    const why = `no etcd program at ${where} (install Debian's etcd-server, or set $HARVEST_ETCD)`;
    return { lines: [`namenode --ha: skipped: ${why}`], result: { skipped: why } };
  }
  const root = mkdtempSync(join(tmpdir(), "harvest-bench-nnha-"));
  const caDir = join(root, "ca");
  await createCa(caDir);
  progress("starting a 3-member etcd ensemble on loopback");
  const e = await startEnsemble({ dir: join(root, "etcd"), caDir });
  try {
    const coordination = haCoordinationOf(e);
    // Rounds of both, alternating which goes first: the machine's other load changes from minute to minute.
    const plainRuns: Throughput[] = [];
    const haRuns: Throughput[] = [];
    for (let r = 1; r <= f.rounds; r++) {
      const tag = `round ${r}/${f.rounds}`;
      const lone = async () =>
        plainRuns.push(
          await throughput(f, e, benchNameNode(join(root, `plain-${r}`)), undefined, `lone, ${tag}`, progress),
        );
      const pair = async () => {
        const dir = join(root, `ha-${r}`);
        mkdirSync(dir);
        const active = benchNameNode(join(dir, "nn-a"), { coordination, id: "nn-a", clusterId: `bench-${r}` });
        const standby = nnProcess(dir, "nn-b", { ...coordination, clusterId: `bench-${r}` });
        haRuns.push(await throughput(f, e, active, standby, `HA pair, ${tag}`, progress));
      };
      if (r % 2 === 1) {
        await lone();
        await pair();
      } else {
        await pair();
        await lone();
      }
    }
    const plain = combine(plainRuns);
    const ha = combine(haRuns);
    const sizes = await logEntrySizes(e, `bench-${f.rounds}`);
    const entryBytes = sizes.length ? Math.round(sizes.reduce((a, b) => a + b, 0) / sizes.length) : 1024;
    const ceilSecs = Math.max(3, f.seconds / 2);
    progress(`etcd put ceiling: ${entryBytes}-byte values, 1 and ${f.clients} in flight, ${ceilSecs} s each`);
    const seq = await putCeiling(e, entryBytes, 1, ceilSecs);
    const conc = await putCeiling(e, entryBytes, f.clients, ceilSecs);
    const txn = await putCeiling(e, entryBytes, 1, ceilSecs, true);
    const syncMs = await levelSyncMs(join(root, "level-sync"), entryBytes, Math.min(3, ceilSecs));
    const failover = [];
    if (f.kills > 0)
      for (const ttl of FAILOVER_TTLS_S) {
        progress(`failover: ${f.kills} kill -9s of the active namenode process, session TTL ${ttl} s`);
        failover.push(await failovers(e, root, ttl, f.kills, progress));
      }

    const editsPerAppend = ha.appends > 0 ? ha.ops / (ha.appends / ha.secs) : 0;
    const cycleMs = ha.appends > 0 ? (ha.secs * 1000) / ha.appends : 0;
    const vsPlain = goalRatio(ha.ops, plain.ops, HA_GOAL);
    const vsCeiling = goalRatio(ha.ops, conc.putsPerSec, CEILING_GOAL);
    const s = (ms: number): string => `${fmt(ms / 1000, 2)} s`;
    const cores = (t: Throughput): string =>
      `${fmt(t.cores.bench, 2)}/${t === plain ? "-" : fmt(t.cores.standby, 2)}/${t === plain ? "-" : fmt(t.cores.etcd, 2)}`;
    const lines = [
      `namenode HA: durable create+addBlock+complete from ${f.clients} clients on NamespaceCalls streams (DfsClient's way),`,
      `  ${f.rounds} rounds of ${f.seconds} s each (alternating which goes first), 3 datanodes played over the real stream; etcd ${e.members.length} members on loopback (mutual TLS)`,
      "  lone: each group commit is one synced LevelDB batch; HA: one fenced append to the shared log in etcd (majority)",
      "  and then the synced LevelDB batch; the active runs in this process with the clients, the standby in its own",
      "",
      ...table(
        [
          "namenode",
          "ops/s",
          "files/s",
          "log appends",
          "edits per append",
          "ms per group commit",
          "cores: bench/standby/etcd",
        ],
        [
          ["lone (LevelDB)", fmt(plain.ops, 0), fmt(plain.files / plain.secs, 0), "-", "-", "-", cores(plain)],
          [
            "HA pair, active",
            fmt(ha.ops, 0),
            fmt(ha.files / ha.secs, 0),
            String(ha.appends),
            fmt(editsPerAppend, 1),
            fmt(cycleMs, 2),
            cores(ha),
          ],
        ],
      ),
      `  ops/s per round, lone/HA: ${plainRuns.map((p, i) => `${fmt(p.ops, 0)}/${fmt(haRuns[i]!.ops, 0)}`).join(", ")}`,
      `  the standby was at most ${ha.standbyLag} entries behind when a run ended; this machine has ${availableParallelism()} cores`,
      "",
      `etcd's own ceiling (${entryBytes}-byte values, the mean size of the last log entries; masters' certificate):`,
      ...table(
        ["puts in flight", "puts/s", "p50 ms"],
        [
          ["1", fmt(seq.putsPerSec, 0), fmt(seq.p50Ms, 2)],
          [String(f.clients), fmt(conc.putsPerSec, 0), fmt(conc.p50Ms, 2)],
          ["1, as a log append (fenced txn)", fmt(txn.putsPerSec, 0), fmt(txn.p50Ms, 2)],
        ],
      ),
      `  one synced LevelDB batch of that size on this disk: p50 ${fmt(syncMs, 2)} ms`,
      `  a group commit in HA took ${fmt(cycleMs, 2)} ms vs one log append alone (${fmt(txn.p50Ms, 2)} ms) + one LevelDB sync (${fmt(syncMs, 2)} ms)`,
      "",
      `goal (issue 43): HA ${vsPlain.text} of the lone namenode: ${vsPlain.verdict}`,
      `  else HA ops/s ${vsCeiling.text} of etcd's puts/s at ${f.clients} in flight: ${vsCeiling.verdict}`,
    ];
    for (const fo of failover)
      lines.push(
        "",
        `failover, session TTL ${fo.ttlS} s, ${fo.kills} kill -9s of the active namenode process (the other a standby):`,
        `  to the other active (its /metrics): p50 ${s(fo.toActive.p50Ms)}, max ${s(fo.toActive.maxMs)}`,
        `  to a write acknowledged through a client of both addresses: p50 ${s(fo.toWrite.p50Ms)}, max ${s(fo.toWrite.maxMs)}`,
        `  goal (issue 43): a new active within ${s(FAILOVER_GOAL_MS)}: ${fo.toActive.maxMs <= FAILOVER_GOAL_MS ? "met" : "MISSED"} (max)`,
      );
    return {
      lines,
      result: {
        flags: f,
        plain,
        ha,
        plainRuns,
        haRuns,
        editsPerAppend,
        groupCommitMs: cycleMs,
        ratio: ha.ops / plain.ops,
        ceiling: { entryBytes, sequential: seq, concurrent: conc, fencedAppend: txn, levelSyncP50Ms: syncMs },
        ratioToCeiling: ha.ops / conc.putsPerSec,
        failover,
      },
    };
  } finally {
    await stopEnsemble(e);
    rmSync(root, { recursive: true, force: true });
  }
}
