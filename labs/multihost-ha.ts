/**
 * The HA proof (issue 43): highly available masters across Linux network namespaces. Two master hosts each run a
 * resource manager and a namenode; three servers each run a node manager and a datanode; an etcd member runs on each
 * master host and on server-1, so losing a master's host loses a member too. While a job runs and files are written,
 * the active masters' host is cut off the network (its link drops every packet; its processes keep running, believing
 * what they believed). The scenario reports what a user and an operator would see:
 * - how long until the other host's resource manager and namenode are active (the goal: within 10 s);
 * - the job finishes, and no task that had finished ran again (each task leaves a record of its one completion);
 * - every acknowledged file reads back byte-identical, and the write in flight completed or failed with a code;
 * - once healed, the old host's masters have stepped down, and acting as the old term from that host is refused:
 *   every datanode refuses a write token the old active namenode issued, every node manager a container the old
 *   active resource manager would grant (STALE_EPOCH).
 * Helpers inside the namespaces are in ha-probe.ts; the lab in netns-lab.ts.
 */
import { randomBytes } from "node:crypto";
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { execFileSync } from "node:child_process";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { DEFAULT_LOG_GROUP } from "../common/container-logs.js";
import { errorMessage, HarvestError } from "../common/errors.js";
import { distEntry } from "../common/paths.js";
import type { JobReport, NodeInfo } from "../client/job-client.js";
import type { DfsDatanode } from "../client/dfs-client.js";
import type { EnsembleDescriptor } from "../localcluster/etcd-ensemble.js";
import type * as CaModule from "../localcluster/cluster-ca.js";
import { NetnsLab, netnsAvailable } from "./netns-lab.js";
import type { LabClient } from "./netns-lab.js";
import type { MasterStatus, ProbeRequest } from "./ha-probe.js";
import type { ClientSecurity } from "../common/grpc.js";
import type { MultihostCheck } from "./multihost-result.js";
import { cliFailure, feedFifo, harvestCli, seconds, sleep, startServers, until, writeJson } from "./multihost-tools.js";
import type { CliResult, InFlightWrite } from "./multihost-tools.js";

const SUBNET = "10.214.0";
const MASTERS = ["master-a", "master-b"] as const;
const SERVERS = ["server-1", "server-2", "server-3"];
const PORTS = { rm: 8032, rmHttp: 8088, nn: 8020, nnHttp: 9870 };
const MiB = 1024 * 1024;
/** A takeover later than this fails the scenario (the goal, 10 s, is reported). */
const TAKEOVER_BOUND_MS = 15_000;

/** Settings of a run. */
export interface HaScenarioOptions {
  /** Where configs, logs and data go. @default a new directory under the system's temp dir */
  dir?: string;
  /** The masters' coordination session (a lapsed one ends the term). @default 5, the daemons' default */
  sessionTtlS?: number;
  /**
   * The ensemble's raft election timeout, ms (its heartbeat a tenth of it), as docs/deploying.md advises on a LAN: it
   * bounds how long the ensemble is without a leader when the lost host held it. @default 500
   */
  etcdElectionTimeoutMs?: number;
  /** Progress lines. @default stdout */
  print?: (line: string) => void;
}

/** What a run saw. */
export interface HaScenarioResult {
  ok: boolean;
  runDir: string;
  checks: MultihostCheck[];
  error?: string;
  totalMs?: number;
  /** From the cut to the other host's master reporting itself active, by service. */
  failoverMs: { rm?: number; nn?: number };
  /** From the kill -9 of the second host to the first one's masters active again, by service. */
  killFailoverMs: { rm?: number; nn?: number };
  /** Terms before and after, by service. */
  epochs: { rm?: [number, number]; nn?: [number, number] };
  /** Files acknowledged during the run, and how many read back identical. */
  files: { acknowledged: number; identical: number; failedWrites: string[] };
}

export async function runHaScenario(opts: HaScenarioOptions = {}): Promise<HaScenarioResult> {
  const avail = netnsAvailable();
  if (!avail.ok) throw new HarvestError("UNAVAILABLE", `the HA scenario needs network namespaces: ${avail.why}`);
  const runDir = resolve(opts.dir ?? mkdtempSync(join(tmpdir(), "harvest-multihost-ha-")));
  mkdirSync(runDir, { recursive: true });
  chmodSync(runDir, 0o755);
  return new HaScenario(runDir, opts).run();
}

type Tls = Awaited<ReturnType<typeof CaModule.issueClusterCertificates>>;

class HaScenario {
  private readonly say: (line: string) => void;
  private readonly lab: NetnsLab;
  private readonly result: HaScenarioResult;
  private readonly started = Date.now();
  private readonly clientConfig: string;
  private readonly secret = randomBytes(16).toString("hex");
  private client: LabClient | undefined;
  private tls: Tls | undefined;
  /** What was acknowledged, path to sha256. */
  private readonly acked = new Map<string, string>();

  constructor(
    private readonly runDir: string,
    private readonly opts: HaScenarioOptions,
  ) {
    this.say = opts.print ?? ((line: string) => process.stdout.write(line + "\n"));
    this.clientConfig = join(runDir, "client.json");
    this.result = {
      ok: false,
      runDir,
      checks: [],
      failoverMs: {},
      killFailoverMs: {},
      epochs: {},
      files: { acknowledged: 0, identical: 0, failedWrites: [] },
    };
    const hosts = [
      ...MASTERS.map((name, i) => ({ name, ip: `${SUBNET}.${i + 1}` })),
      ...SERVERS.map((name, i) => ({ name, ip: `${SUBNET}.${11 + i}` })),
    ];
    this.lab = new NetnsLab({
      runDir,
      hosts,
      log: (line) => this.say(`  lab: ${line}`),
      masked: (host) =>
        hosts
          .map((h) => h.name)
          .filter((h) => h !== host)
          .map((h) => join(runDir, h)),
      installAt: (host) => (host.startsWith("server-") ? join(runDir, host, "harvest") : undefined),
    });
  }

  async run(): Promise<HaScenarioResult> {
    try {
      this.say(`HA scenario in ${this.runDir}`);
      this.lab.create();
      const ensemble = await this.startEnsemble();
      await this.startCluster(ensemble);
      this.client = this.lab.openClient("server-2", this.clientConfig);
      await this.waitForServers();
      await this.loseActiveHost();
    } catch (err) {
      this.result.error = errorMessage(err);
      this.check("the scenario ran to the end", false, this.result.error);
    } finally {
      this.client?.close();
      await this.lab.destroy().catch((err: unknown) => this.check("the lab was removed", false, errorMessage(err)));
    }
    this.result.totalMs = Date.now() - this.started;
    this.result.ok = this.result.error === undefined && this.result.checks.every((c) => c.ok);
    this.say(
      `${this.result.ok ? "HA scenario passed" : "HA scenario FAILED"} in ${seconds(this.result.totalMs)}: ` +
        `${this.result.checks.filter((c) => c.ok).length}/${this.result.checks.length} checks; logs in ${join(this.runDir, "logs")}`,
    );
    return this.result;
  }

  // ------------------------------------------------------------------------------------------ the cluster

  private async startEnsemble(): Promise<EnsembleDescriptor> {
    const { issueClusterCertificates } = await import("../localcluster/cluster-ca.js");
    this.tls = await issueClusterCertificates(join(this.runDir, "security"), {
      caName: "Harvest HA lab CA",
      daemons: Object.fromEntries([...MASTERS, ...SERVERS].map((h) => [h, [this.lab.ipOf(h)]])),
      admin: "ops",
      dirMode: 0o711,
    });
    const memberHosts = ["master-a", "master-b", "server-1"];
    const e = await this.probe<EnsembleDescriptor>("master-a", {
      op: "start-ensemble",
      dir: join(this.runDir, "etcd"),
      caDir: join(this.runDir, "security"),
      members: memberHosts.map((h) => ({ ip: this.lab.ipOf(h), ns: this.lab.ns(h) })),
      masterHosts: MASTERS.map((h) => this.lab.ipOf(h)),
      mountOf: process.pid,
      heartbeatMs: Math.max(10, Math.round((this.opts.etcdElectionTimeoutMs ?? 500) / 10)),
      electionTimeoutMs: this.opts.etcdElectionTimeoutMs ?? 500,
    });
    this.say(`etcd ensemble up: ${e.members.map((m) => `${m.name} ${m.clientUrl}`).join(", ")}`);
    return e;
  }

  private list(port: number): string {
    return MASTERS.map((h) => `${this.lab.ipOf(h)}:${port}`).join(",");
  }

  /** master-a's masters first (they become active), then master-b's (standbys), then the servers. */
  private async startCluster(e: EnsembleDescriptor): Promise<void> {
    const tls = this.tls!;
    const haCoordination = {
      endpoints: e.members.map((m) => m.clientUrl),
      ...e.masterTls,
      clusterId: "lab",
      sessionTtlS: this.opts.sessionTtlS ?? 5,
    };
    const [rmList, nnList] = [this.list(PORTS.rm), this.list(PORTS.nn)];
    for (const host of MASTERS) {
      const own = { host: "0.0.0.0", advertiseHost: this.lab.ipOf(host), tls: tls.daemons[host], haCoordination };
      await this.lab.startDaemon(host, "resourcemanager", {
        dataDir: join(this.runDir, host, "rm"),
        nodeExpiryMs: 6_000,
        secret: this.secret,
        nnAddress: nnList,
        haRmAddresses: rmList,
        ...own,
        port: PORTS.rm,
        httpPort: PORTS.rmHttp,
      });
      await this.lab.startDaemon(host, "namenode", {
        dataDir: join(this.runDir, host, "nn"),
        datanodeExpiryMs: 8_000,
        rmAddress: rmList,
        haId: host,
        // The resource managers (the masters' certificates) read and expire the kept container logs.
        userGroups: Object.fromEntries(MASTERS.map((m) => [m, [DEFAULT_LOG_GROUP]])),
        ...own,
        port: PORTS.nn,
        httpPort: PORTS.nnHttp,
      });
      if (host === "master-a") {
        const active = await until("master-a's masters to be active", 30_000, async () => {
          const s = await this.status("master-a");
          return s.rm.role === "active" && s.nn.role === "active" ? s : undefined;
        });
        this.say(`master-a active: rm term ${active.rm.epoch}, nn term ${active.nn.epoch}`);
      }
    }
    writeJson(this.clientConfig, { rmAddress: rmList, nnAddress: nnList, ...tls.admin });
    await startServers(this.lab, {
      runDir: this.runDir,
      servers: SERVERS,
      rmAddress: rmList,
      nnAddress: nnList,
      secret: this.secret,
      tls: tls.daemons,
    });
    this.say(`cluster up: resource managers ${rmList}, namenodes ${nnList}`);
  }

  private async waitForServers(): Promise<void> {
    await until("3 node managers RUNNING and 3 datanodes LIVE", 60_000, async () => {
      const [nodes, dns] = await Promise.all([
        this.c.call<NodeInfo[]>("nodes"),
        this.c.call<DfsDatanode[]>("datanodes"),
      ]);
      return SERVERS.every((s) => nodes.find((n) => n.nodeId === s)?.state === "RUNNING") &&
        SERVERS.every((s) => dns.find((d) => d.datanodeId === s)?.state === "LIVE")
        ? true
        : undefined;
    });
    this.say("every server registered with the active masters");
  }

  // ------------------------------------------------------------------------------------------ the loss

  private async loseActiveHost(): Promise<void> {
    const before = await this.status("master-a");
    const release = join(this.runDir, "release-held-tasks");
    const app = await this.submitJob(release);
    // Files before, then a writer that keeps going through the loss, and one slow write in flight across it.
    for (let i = 0; i < 5; i++) await this.putFile(`/ha/before-${i}`);
    let writing = true;
    const writer = (async () => {
      // A steady writer, not a flood: the two cores also run the ensemble, four masters and six servers' daemons.
      for (let i = 0; writing; i++) {
        await this.putFile(`/ha/during-${i}`);
        await sleep(200);
      }
    })();
    const slow = await this.startSlowWrite();
    // The old terms' own credentials, taken while they lead: a write token of the active namenode.
    const oldToken = await this.probe<{ block: { blockId: number; genStamp: number }; token: string }>("master-a", {
      op: "capture-write-token",
      nnAddress: `${this.lab.ipOf("master-a")}:${PORTS.nn}`,
      security: this.tls!.admin,
      path: "/ha/old-term-probe",
    });

    const cutAt = Date.now();
    this.lab.cut("master-a");
    this.say(`cut master-a off the network (its rm term ${before.rm.epoch}, nn term ${before.nn.epoch})`);
    const after = await this.awaitFailover(
      cutAt,
      before,
      "master-a",
      "master-b",
      "cutting off",
      this.result.failoverMs,
    );
    for (const service of ["rm", "nn"] as const)
      this.result.epochs[service] = [before[service].epoch ?? 0, after[service].epoch ?? 0];
    // A writer still holding the old active's token, while the old active is cut off: every datanode refuses it.
    await this.checkOldTokenRefused(
      "server-2",
      this.tls!.admin,
      oldToken,
      ["STALE_EPOCH"],
      "while master-a is cut off",
    );
    // The held tasks may end once the new masters serve.
    await sleep(3_000);
    writeFileSync(release, "");
    const job = await this.awaitJob(app);
    writing = false;
    await writer;
    await this.checkSlowWrite(slow);
    await this.checkFiles();
    this.checkJob(job);

    // Heal: the old host's masters come back to a cluster with newer terms.
    this.lab.heal("master-a");
    const healAt = Date.now();
    this.say(`healed master-a's link after ${seconds(healAt - cutAt)}`);
    await this.checkStepDown(healAt, after);
    // And from the old host itself once healed (its namenode restarted as a standby: its old keys are gone too).
    const daemon = this.tls!.daemons["master-a"]!;
    await this.checkOldTokenRefused(
      "master-a",
      daemon,
      oldToken,
      ["STALE_EPOCH", "DATANODE_BAD_TOKEN"],
      "from master-a, healed",
    );
    await this.checkOldGrantRefused(before);
    await this.killActiveHost(after);
  }

  /** A job of 6 short tasks, then 6 that hold their containers until released, then one. */
  private async submitJob(release: string): Promise<string> {
    const record = [
      "const fs = require('fs'), path = require('path');",
      "const [file, capS] = process.argv.slice(1);",
      "const end = Date.now() + Number(capS) * 1000;",
      "const finish = () => { fs.writeFileSync(path.join(process.env.HARVEST_OUTPUT_DIR, 'part-0'), 'done\\n');",
      "  console.log('ha-task-done ' + JSON.stringify({ vertex: process.env.HARVEST_VERTEX,",
      "    index: Number(process.env.HARVEST_TASK_INDEX) })); };",
      "if (file === '-') setTimeout(finish, 1500);",
      "else { const t = setInterval(() => { if (fs.existsSync(file) || Date.now() > end) { clearInterval(t); finish(); } }, 200); }",
    ].join("\n");
    const res = { vcores: 0.5, memoryMb: 128 };
    const dag = {
      name: "ha-across-failover",
      vertices: [
        { name: "early", parallelism: 6, resources: res, command: ["node", "-e", record, "-", "0"] },
        { name: "held", parallelism: 6, resources: res, command: ["node", "-e", record, release, "240"] },
        { name: "last", parallelism: 1, resources: res, command: ["node", "-e", record, "-", "0"] },
      ],
      edges: [
        { from: "early", to: "held", type: "scatter-gather" },
        { from: "held", to: "last", type: "scatter-gather" },
      ],
    };
    const submit = await this.cli("server-1", ["job", "submit", writeJson(join(this.runDir, "dag-ha.json"), dag)]);
    const appId = (submit.json as { appId?: string } | undefined)?.appId;
    if (!appId) throw new Error(`job submit failed: ${cliFailure(submit)}`);
    await until(`${appId}'s early tasks to finish and its held ones to run`, 120_000, async () => {
      const r = await this.c.call<JobReport>("status", [appId]);
      if (["FINISHED", "FAILED", "KILLED"].includes(r.state)) throw new Error(`${appId} ended (${r.state}) early`);
      return this.taskRecords(appId).filter((t) => t.vertex === "early").length === 6 &&
        r.containers.some((x) => !x.isAm && x.state === "RUNNING")
        ? true
        : undefined;
    });
    this.say(`${appId}: its 6 early tasks finished, its held tasks run`);
    return appId;
  }

  /**
   * The task records of a job (one per completed task): the line each task prints as it ends, in its container's
   * stdout on its server (kept after the job, as the node manager keeps every container's logs).
   */
  private taskRecords(appId: string): { vertex: string; index: number; container: string }[] {
    const out: { vertex: string; index: number; container: string }[] = [];
    for (const s of SERVERS) {
      const dir = join(this.runDir, s, "nm", "containers", appId);
      if (!existsSync(dir)) continue;
      for (const container of readdirSync(dir)) {
        const file = join(dir, container, "stdout");
        if (!existsSync(file)) continue;
        const line = readFileSync(file, "utf8")
          .split("\n")
          .find((l) => l.startsWith("ha-task-done "));
        if (line) out.push({ ...(JSON.parse(line.slice(13)) as { vertex: string; index: number }), container });
      }
    }
    return out;
  }

  private async putFile(path: string): Promise<void> {
    try {
      const sha = await this.c.call<string>(
        "putRandom",
        [path, 64 * 1024 + Math.floor(Math.random() * 256 * 1024), 2],
        60_000,
      );
      this.acked.set(path, sha);
    } catch (err) {
      this.result.files.failedWrites.push(`${path}: ${(err as { code?: string }).code ?? errorMessage(err)}`);
      await sleep(200);
    }
  }

  private async startSlowWrite(): Promise<InFlightWrite> {
    const fifo = join(this.runDir, "inflight.fifo");
    execFileSync("mkfifo", [fifo]);
    chmodSync(fifo, 0o666);
    const path = "/ha/inflight.bin";
    const put = this.cli("server-3", ["fs", "put", fifo, path, "--replication", "3", "--block-size-mb", "4"], 150_000);
    const feeder = feedFifo(fifo, 16 * MiB, 1 * MiB, 120_000);
    await until("the in-flight write to carry data", 20_000, async () =>
      feeder.bytes() >= 2 * MiB ? true : undefined,
    );
    return { path, put, feeder, startedAt: Date.now() };
  }

  /**
   * Polls `to`'s masters (from server-2) until each is active in a newer term than `before`; the times from `lostAt`
   * go in `times`, and a check per service says whether it was within 10 s of losing `from` (`how`).
   */
  private async awaitFailover(
    lostAt: number,
    before: MastersStatus,
    from: string,
    to: string,
    how: string,
    times: { rm?: number; nn?: number },
  ): Promise<MastersStatus> {
    const at = { rm: `${this.lab.ipOf(to)}:${PORTS.rm}`, nn: `${this.lab.ipOf(to)}:${PORTS.nn}` };
    const deadline = lostAt + 60_000;
    const seen: Partial<MastersStatus> = {};
    while (Date.now() < deadline && (!seen.rm || !seen.nn)) {
      for (const service of ["rm", "nn"] as const) {
        if (seen[service]) continue;
        const s = await this.c.call<MasterStatus>("haStatus", [at[service]], 3_000).catch(() => undefined);
        if (s?.role === "active" && (s.epoch ?? 0) > (before[service].epoch ?? 0)) {
          seen[service] = { ...s, address: at[service] };
          times[service] = Date.now() - lostAt;
        }
      }
      await sleep(100);
    }
    for (const service of ["rm", "nn"] as const) {
      const ms = times[service];
      const name = service === "rm" ? "resource manager" : "namenode";
      // The issue's goal is 10 s; a takeover the lost host's etcd Raft leader delays may miss it (docs/ha.md), so the
      // check is a bound that says the masters recover by themselves, and the goal is reported beside it.
      this.check(
        `${to}'s ${name} becomes active within ${seconds(TAKEOVER_BOUND_MS)} of ${how} ${from}`,
        ms !== undefined && ms <= TAKEOVER_BOUND_MS,
        ms !== undefined
          ? `active ${seconds(ms)} after (the 10 s goal: ${ms <= 10_000 ? "met" : "MISSED"}), term ` +
              `${before[service].epoch} -> ${seen[service]?.epoch}`
          : "not active within 60 s",
      );
    }
    if (!seen.rm || !seen.nn) throw new Error(`no failover to ${to}: the rest cannot be judged`);
    return seen as MastersStatus;
  }

  /**
   * The cluster can lose a master again: every process of master-b's host (now active; its etcd member too) is
   * killed with SIGKILL while files are written; master-a's healed masters take over, every acknowledged file still
   * reads back identical, and a new job runs.
   */
  private async killActiveHost(before: MastersStatus): Promise<void> {
    // A host back from a partition is part of the ensemble again once its member follows the leader and has caught
    // up: only then can the ensemble lose another member (an operator waits for `etcdctl endpoint status` so too).
    await until("master-a's etcd member to catch up after the heal", 60_000, async () => {
      const members = await this.probe<{ name: string; leader?: string; raftIndex?: number }[]>("server-1", {
        op: "ensemble-status",
        dir: join(this.runDir, "etcd"),
      });
      const indexes = members.map((m) => m.raftIndex ?? -1);
      const leaders = new Set(members.map((m) => m.leader));
      return leaders.size === 1 &&
        !leaders.has(undefined) &&
        !leaders.has("0") &&
        Math.min(...indexes) >= 0 &&
        Math.max(...indexes) - Math.min(...indexes) < 20
        ? true
        : undefined;
    });
    let writing = true;
    const writer = (async () => {
      for (let i = 0; writing; i++) {
        await this.putFile(`/ha/kill-${i}`);
        await sleep(200);
      }
    })();
    await sleep(1_000);
    const killedAt = Date.now();
    const killed = this.lab.killHost("master-b");
    this.say(`kill -9 of every process of master-b (${killed} processes: its masters and its etcd member)`);
    await this.awaitFailover(
      killedAt,
      before,
      "master-b",
      "master-a",
      "kill -9 of every process of",
      this.result.killFailoverMs,
    );
    await sleep(2_000);
    writing = false;
    await writer;
    const acknowledgedBefore = this.result.files.acknowledged;
    await this.checkFiles("after master-b's host was killed too");
    const dag = {
      name: "ha-after-kill",
      vertices: [{ name: "one", parallelism: 3, resources: { vcores: 0.5, memoryMb: 128 }, command: ["/bin/true"] }],
      edges: [],
    };
    const submit = await this.cli(
      "server-1",
      ["job", "submit", writeJson(join(this.runDir, "dag-after-kill.json"), dag), "--wait"],
      120_000,
    );
    const report = submit.json as JobReport | undefined;
    this.check(
      "a new job runs on the masters that took over again",
      submit.code === 0 && report?.state === "FINISHED",
      report ? `${report.appId} ${report.state} ${report.outcome}` : cliFailure(submit),
    );
    this.say(`${this.result.files.acknowledged - acknowledgedBefore} more files acknowledged around the kill`);
  }

  private async awaitJob(appId: string): Promise<JobReport> {
    return until(`${appId} to end`, 240_000, async () => {
      const r = await this.c.call<JobReport>("status", [appId]);
      return ["FINISHED", "FAILED", "KILLED"].includes(r.state) ? r : undefined;
    });
  }

  private checkJob(r: JobReport): void {
    const records = this.taskRecords(r.appId);
    const count = new Map<string, number>();
    for (const t of records) count.set(`${t.vertex}/${t.index}`, (count.get(`${t.vertex}/${t.index}`) ?? 0) + 1);
    const twice = [...count].filter(([, n]) => n > 1).map(([k, n]) => `${k} x${n}`);
    this.check(
      "the job running through the loss finishes, and no task that had finished ran again",
      r.state === "FINISHED" && r.outcome === "JOB_SUCCEEDED" && count.size === 13 && twice.length === 0,
      `${r.appId} ${r.state} ${r.outcome}; ${records.length} task completions for ${count.size} of 13 tasks` +
        (twice.length ? `; twice: ${twice.join(", ")}` : "") +
        `; task containers ${JSON.stringify(r.taskContainers)}; job-manager attempts ${r.attempts}`,
    );
  }

  private async checkSlowWrite(w: InFlightWrite): Promise<void> {
    const put = await w.put;
    const fed = await w.feeder.done;
    const err = (put.json as { error?: { code: string; message: string } } | undefined)?.error;
    let detail: string;
    let ok: boolean;
    if (put.code === 0 && fed.complete) {
      const sha = await this.c.call<string>("sha256", [w.path], 60_000).catch(() => "");
      ok = sha === fed.sha256;
      detail = `completed (${(fed.bytes / MiB).toFixed(0)} MiB in ${seconds(put.ms)}), read back ${ok ? "identical" : "DIFFERENT"}`;
    } else {
      ok = err?.code !== undefined && !put.timedOut;
      detail = `failed with ${err?.code ?? "no code"}: ${err?.message ?? put.stderr.slice(-300)}`;
    }
    this.check("the write in flight through the loss completes identical, or fails with a coded error", ok, detail);
  }

  private async checkFiles(when = ""): Promise<void> {
    const different: string[] = [];
    for (const [path, sha] of this.acked) {
      const got = await this.c.call<string>("sha256", [path], 60_000).catch((e: { code?: string }) => e.code ?? "?");
      if (got !== sha) different.push(`${path}: ${got === sha ? "" : got.length === 64 ? "DIFFERENT" : got}`);
    }
    const f = this.result.files;
    f.acknowledged = this.acked.size;
    f.identical = this.acked.size - different.length;
    const during = [...this.acked.keys()].filter((p) => p.startsWith("/ha/during-")).length;
    const coded = f.failedWrites.every((w) => /: [A-Z_]+$/.test(w));
    this.check(
      `every acknowledged file reads back byte-identical${when ? ` ${when}` : ""}; a write refused meanwhile says why with a code`,
      different.length === 0 && during > 0 && coded,
      `${f.identical} of ${f.acknowledged} identical (${during} acknowledged while the writer ran through the loss)` +
        (different.length ? `; NOT: ${different.slice(0, 5).join(", ")}` : "") +
        (f.failedWrites.length ? `; refused: ${f.failedWrites.slice(0, 5).join(", ")}` : "; none refused"),
    );
  }

  /** The healed host's masters are standbys following master-b, in the new terms. */
  private async checkStepDown(healAt: number, after: MastersStatus): Promise<void> {
    const a = await until(
      "master-a's masters to answer as standbys following master-b after the heal",
      60_000,
      async () => {
        const s = await this.status("master-a");
        const following = s.rm.activeAddress === after.rm.address && s.nn.activeAddress === after.nn.address;
        return s.rm.role === "standby" && s.nn.role === "standby" && following ? s : undefined;
      },
    ).catch(() => undefined);
    const s = a ?? (await this.status("master-a"));
    const line = (m: MastersStatus): string =>
      `rm ${m.rm.role ?? m.rm.error} (active ${m.rm.activeAddress ?? "?"}), nn ${m.nn.role ?? m.nn.error} ` +
      `(active ${m.nn.activeAddress ?? "?"})`;
    // On failure, master-b's view too: whether it still leads or both wait.
    const b = a ? undefined : await this.status("master-b").catch(() => undefined);
    this.check(
      "the old master, healed, steps down: both of master-a's masters are standbys following master-b",
      a !== undefined,
      `${line(s)} ${seconds(Date.now() - healAt)} after the heal` + (b ? `; master-b: ${line(b)}` : ""),
    );
  }

  /** Each datanode, asked from `host` to write a block on the old active namenode's token, answers one of `codes`. */
  private async checkOldTokenRefused(
    host: string,
    security: ClientSecurity,
    oldToken: { block: { blockId: number; genStamp: number }; token: string },
    codes: string[],
    when: string,
  ): Promise<void> {
    const datanodes = await this.c.call<DfsDatanode[]>("datanodes");
    const writes = await this.probe<{ address: string; answer: string }[]>(host, {
      op: "write-blocks",
      datanodes: datanodes.map((d) => d.address),
      security,
      ...oldToken,
    });
    this.check(
      `every datanode refuses a write on the old active namenode's token ${when} (${codes.join(" or ")})`,
      writes.length === SERVERS.length && writes.every((w) => codes.includes(w.answer)),
      writes.map((w) => `${w.address} ${w.answer}`).join(", "),
    );
  }

  /** From master-a, healed, as its old resource manager's term: each node manager refuses with STALE_EPOCH. */
  private async checkOldGrantRefused(before: MastersStatus): Promise<void> {
    const nodes = await this.c.call<NodeInfo[]>("nodes");
    const daemon = this.tls!.daemons["master-a"]!;
    const starts = await this.probe<{ nodeId: string; answer: string }[]>("master-a", {
      op: "start-containers",
      nodes: nodes.map((n) => ({ nodeId: n.nodeId, address: n.nmAddress })),
      security: daemon,
      secret: this.secret,
      epoch: before.rm.epoch ?? 0,
      appId: `application_${Date.now()}_0001`,
      user: "ops",
    });
    this.check(
      "every node manager refuses a container granted in the old resource manager's term (STALE_EPOCH)",
      starts.length === SERVERS.length && starts.every((s) => s.answer === "STALE_EPOCH"),
      starts.map((s) => `${s.nodeId} ${s.answer}`).join(", "),
    );
  }

  // ------------------------------------------------------------------------------------------ plumbing

  private get c(): LabClient {
    if (!this.client) throw new Error("the in-namespace client is not open");
    return this.client;
  }

  /** Both masters of a host, as HaAdmin answers from inside that host (its own addresses). */
  private async status(host: string): Promise<MastersStatus> {
    const ip = this.lab.ipOf(host);
    const [rm, nn] = await this.probe<MasterStatus[]>(host, {
      op: "ha-status",
      addresses: [`${ip}:${PORTS.rm}`, `${ip}:${PORTS.nn}`],
      security: this.tls!.admin,
    });
    return { rm: rm!, nn: nn! };
  }

  private async probe<T>(host: string, req: ProbeRequest): Promise<T> {
    const r = await this.lab.run(host, [process.execPath, distEntry("labs/ha-probe.js"), JSON.stringify(req)], {
      timeoutMs: 60_000,
    });
    const line = r.stdout.trim().split("\n").pop() ?? "";
    let answer: { ok: boolean; answer?: T; error?: string } | undefined;
    try {
      answer = JSON.parse(line) as typeof answer;
    } catch {
      answer = undefined;
    }
    if (!answer?.ok)
      throw new Error(`${req.op} on ${host}: ${answer?.error ?? `exit ${r.code}: ${r.stderr.slice(-600)}`}`);
    return answer.answer as T;
  }

  private cli(host: string, args: string[], timeoutMs = 60_000): Promise<CliResult> {
    return harvestCli(this.lab, host, this.clientConfig, this.runDir, args, timeoutMs);
  }

  private check(name: string, ok: boolean, detail: string): void {
    this.result.checks.push({ name, ok, detail });
    this.say(`${ok ? "PASS" : "FAIL"}  ${name}${detail ? `: ${detail}` : ""}`);
  }
}

/** The resource manager's and the namenode's status on one host. */
interface MastersStatus {
  rm: MasterStatus;
  nn: MasterStatus;
}
