/**
 * The multi-host scenario (issue 11): a Harvest cluster across Linux network namespaces on this machine, driven the way
 * a user drives a real one. A master host runs the resource manager and the namenode; three servers each run a node
 * manager and a datanode; every daemon binds and advertises its own host's address on a private bridge (see
 * `netns-lab.ts`), and every client command runs inside a host's namespace with a client config file. The scenario runs
 * a DAG job, copies a file between servers, then cuts server-3 off the network while a job and a write are in flight,
 * heals it, and reports what the cluster did: which outcomes held and how long each daemon took to rejoin. Its result
 * types are in multihost-result.ts, its jobs in multihost-jobs.ts, its tools in multihost-tools.ts.
 */
import { randomBytes } from "node:crypto";
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readFileSync } from "node:fs";
import { writeFileSync } from "node:fs";
import { execFileSync } from "node:child_process";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { DEFAULT_LOG_GROUP } from "../common/container-logs.js";
import { errorMessage, HarvestError } from "../common/errors.js";
import { distEntry, packageRoot } from "../common/paths.js";
import type { JobReport, NodeInfo } from "../client/job-client.js";
import type { DfsDatanode, DfsFsckReport } from "../client/dfs-client.js";
import { NetnsLab, netnsAvailable, processesUnder, stillRunning } from "./netns-lab.js";
import type { LabClient } from "./netns-lab.js";
import {
  expectedCounts,
  jobOutcome,
  lastTaskInputs,
  longDag,
  probeResults,
  spreadDag,
  threeEdgeDag,
} from "./multihost-jobs.js";
import type { MultihostCluster, MultihostOptions, MultihostResult } from "./multihost-result.js";
import {
  cliFailure,
  feedFifo,
  GiveUp,
  harvestCli,
  optSeconds,
  POLL_MS,
  relative,
  seconds,
  sha256File,
  sleep,
  startServers,
  until,
  watchServer,
  writeJson,
} from "./multihost-tools.js";
import type { CliResult, InFlightWrite, ServerWatch } from "./multihost-tools.js";

export type {
  ContainerCounts,
  JobOutcome,
  MultihostCheck,
  MultihostCluster,
  MultihostOptions,
  MultihostResult,
} from "./multihost-result.js";

const SUBNET = "10.213.0";
const MASTER = "master";
const SERVERS = ["server-1", "server-2", "server-3"];
const CUT_SERVER = "server-3";
const MiB = 1024 * 1024;

/** Runs the scenario; resolves to what it saw (never rejects once the lab exists: failures are in `checks`). */
export async function runMultihostScenario(opts: MultihostOptions = {}): Promise<MultihostResult> {
  const avail = netnsAvailable();
  if (!avail.ok)
    throw new HarvestError("UNAVAILABLE", `the multi-host scenario needs network namespaces: ${avail.why}`);
  const runDir = resolve(opts.dir ?? mkdtempSync(join(tmpdir(), "harvest-multihost-")));
  mkdirSync(runDir, { recursive: true });
  // The node managers run as root and their containers as an unprivileged account, which must get through runDir to
  // the staging and work directories (the daemons' configs and logs stay root's: see NetnsLab.create).
  chmodSync(runDir, 0o755);
  return new Scenario(runDir, opts).run();
}

type CutContainer = JobReport["containers"][number];

/** One run: the lab, the cluster in it, the in-namespace client, and the result being filled in. */
class Scenario {
  private readonly say: (line: string) => void;
  private readonly lab: NetnsLab;
  private readonly result: MultihostResult;
  private readonly started = Date.now();
  private client: LabClient | undefined;

  constructor(
    private readonly runDir: string,
    private readonly opts: MultihostOptions,
  ) {
    this.say = opts.print ?? ((line: string) => process.stdout.write(line + "\n"));
    this.result = { ok: false, runDir, prefix: "", clientConfig: join(runDir, "client.json"), checks: [] };
    this.lab = new NetnsLab({
      runDir,
      hosts: [{ name: MASTER, ip: `${SUBNET}.1` }, ...SERVERS.map((name, i) => ({ name, ip: `${SUBNET}.${11 + i}` }))],
      log: (line) => this.say(`  lab: ${line}`),
      // Hosts share no files: each sees its own directory of the run and none of the others' (data, staging, temp).
      masked: (host) => [MASTER, ...SERVERS].filter((h) => h !== host).map((h) => join(runDir, h)),
      // A server runs Harvest from its own place, and nothing is at the installation's path there: its containers
      // must run what their node manager localized.
      installAt: (host) => (host === MASTER ? undefined : join(runDir, host, "harvest")),
    });
  }

  async run(): Promise<MultihostResult> {
    const { result, lab } = this;
    try {
      this.say(`multi-host scenario in ${this.runDir}`);
      lab.create();
      result.prefix = lab.prefix;
      await this.startCluster();
      this.client = lab.openClient(MASTER, this.result.clientConfig);
      await this.checkRegistration();
      await this.runJobAcrossServers();
      await this.copyFileBetweenServers();
      await this.partitionAndHeal();
    } catch (err) {
      result.error = errorMessage(err);
      this.check("the scenario ran to the end", false, result.error);
    } finally {
      try {
        if (this.opts.beforeDestroy && result.prefix) await this.opts.beforeDestroy(this.clusterInfo());
      } finally {
        this.client?.close();
        await lab.destroy().catch((err: unknown) => this.check("the lab was removed", false, errorMessage(err)));
      }
    }
    result.totalMs = Date.now() - this.started;
    result.ok = this.passed();
    this.say(
      `${result.ok ? "multi-host scenario passed" : "multi-host scenario FAILED"} in ${seconds(result.totalMs)}: ` +
        `${result.checks.filter((x) => x.ok).length}/${result.checks.length} checks; logs in ${join(this.runDir, "logs")}`,
    );
    return result;
  }

  // ---------------------------------------------------------------------------------------------- the cluster

  /** The RM and NN on the master (bound to every address, advertising the master's), an NM and a DN per server. */
  private async startCluster(): Promise<void> {
    const { lab, runDir } = this;
    const secret = randomBytes(16).toString("hex");
    // Secure as a deployment is: a CA, a daemon certificate per host naming its address, and the admin's for the
    // client, issued as the README's deployment steps do.
    const { issueClusterCertificates } = await import("../localcluster/cluster-ca.js");
    const tls = await issueClusterCertificates(join(runDir, "security"), {
      caName: "Harvest multi-host lab CA",
      daemons: Object.fromEntries([MASTER, ...SERVERS].map((h) => [h, [lab.ipOf(h)]])),
      admin: "ops",
      dirMode: 0o711,
    });
    const master = { host: "0.0.0.0", advertiseHost: lab.ipOf(MASTER), port: 0, tls: tls.daemons[MASTER] };
    // The resource manager cancels jobs' delegation tokens at the namenode, which starts after it: the namenode's port
    // is fixed (the master's network namespace is its own, so it is free).
    const nnPort = 8020;
    const rm = await lab.startDaemon(MASTER, "resourcemanager", {
      dataDir: join(runDir, MASTER, "rm"),
      nodeExpiryMs: this.opts.nodeExpiryMs ?? 4_000,
      secret,
      nnAddress: `${lab.ipOf(MASTER)}:${nnPort}`,
      ...master,
    });
    const nn = await lab.startDaemon(MASTER, "namenode", {
      dataDir: join(runDir, MASTER, "nn"),
      datanodeExpiryMs: this.opts.datanodeExpiryMs ?? 6_000,
      rmAddress: rm.address,
      // The resource manager (the master's certificate) reads and expires the kept container logs.
      userGroups: { [MASTER]: [DEFAULT_LOG_GROUP] },
      ...master,
      port: nnPort,
    });
    writeJson(this.result.clientConfig, { rmAddress: rm.address, nnAddress: nn.address, ...tls.admin });
    await startServers(lab, {
      runDir,
      servers: SERVERS,
      rmAddress: rm.address,
      nnAddress: nn.address,
      secret,
      tls: tls.daemons,
    });
    this.say(
      `cluster up (mutual TLS): resource manager ${rm.address}, namenode ${nn.address}; client config ${this.result.clientConfig}`,
    );
  }

  private async checkRegistration(): Promise<void> {
    const c = this.c;
    const ready = await until("3 node managers RUNNING and 3 datanodes LIVE", 60_000, async () => {
      const [nodes, dns] = await Promise.all([c.call<NodeInfo[]>("nodes"), c.call<DfsDatanode[]>("datanodes")]);
      const up =
        SERVERS.every((s) => nodes.find((n) => n.nodeId === s)?.state === "RUNNING") &&
        SERVERS.every((s) => dns.find((d) => d.datanodeId === s)?.state === "LIVE");
      return up ? dns : undefined;
    });
    this.result.startupMs = Date.now() - this.started;
    // What a user sees: the nodes as `harvest cluster status` lists them from the master.
    const status = await this.cli(MASTER, ["cluster", "status"]);
    const nodes = (status.json as { nodes?: NodeInfo[] } | undefined)?.nodes ?? [];
    const own = (s: string, address: string | undefined): boolean =>
      address?.startsWith(`${this.lab.ipOf(s)}:`) === true;
    this.check(
      "every server's node manager and datanode registered, advertising its own namespace's address",
      status.code === 0 &&
        SERVERS.every(
          (s) =>
            own(s, nodes.find((n) => n.nodeId === s)?.nmAddress) &&
            own(s, ready.find((d) => d.datanodeId === s)?.address),
        ),
      `${nodes.map((n) => `${n.nodeId} ${n.state} ${n.nmAddress}`).join(", ")}; datanodes ` +
        `${ready.map((d) => `${d.datanodeId} ${d.state} ${d.address}`).join(", ")} (up in ${seconds(this.result.startupMs)})`,
    );
    // The cluster runs mutual TLS: from a server, a user who trusts the CA but holds no certificate gets nowhere.
    const admin = JSON.parse(readFileSync(this.result.clientConfig, "utf8")) as Record<string, string>;
    const stranger = join(this.runDir, "stranger.json");
    writeJson(stranger, { rmAddress: admin["rmAddress"], nnAddress: admin["nnAddress"], ca: admin["ca"] });
    const refused = await harvestCli(this.lab, SERVERS[0]!, stranger, this.runDir, ["job", "list"], 30_000);
    const code = (refused.json as { error?: { code?: string } } | undefined)?.error?.code;
    this.check(
      "a client without a certificate is refused (mutual TLS)",
      refused.code !== 0 && code === "UNAUTHENTICATED",
      `harvest job list without a certificate: exit ${refused.code}, ${code ?? refused.stdout.slice(0, 200)}`,
    );
  }

  // ---------------------------------------------------------------------------------------------- a, b

  /** a. A DAG job whose first vertex needs more than two servers hold, submitted and followed from the master. */
  private async runJobAcrossServers(): Promise<void> {
    const dag = writeJson(join(this.runDir, "dag-spread.json"), spreadDag());
    this.say(`running a DAG job across the servers: harvest job submit ${dag} --wait (from ${this.lab.ns(MASTER)})`);
    const submit = await this.cli(MASTER, ["job", "submit", dag, "--wait"], 180_000);
    const report = submit.json as JobReport | undefined;
    if (!report?.appId) throw new Error(`job submit failed: ${cliFailure(submit)}`);
    const job = jobOutcome(report);
    this.result.dagJob = job;
    this.check(
      "a DAG job runs to success with no failed task, with tasks on every server",
      submit.code === 0 &&
        report.state === "FINISHED" &&
        job.taskContainers.failed === 0 &&
        SERVERS.every((s) => (job.tasksPerServer[s] ?? 0) > 0),
      `${report.appId} ${report.state} ${report.outcome} in ${seconds(job.durationMs)}; tasks per server ` +
        `${JSON.stringify(job.tasksPerServer)}; task containers ${JSON.stringify(job.taskContainers)}`,
    );
  }

  /** b. Random bytes put from server-1 and got from server-2; then a replication-2 file for the partition. */
  private async copyFileBetweenServers(): Promise<void> {
    const local = join(this.runDir, "random.bin");
    const bytes = 6 * MiB;
    writeFileSync(local, randomBytes(bytes));
    const sha = sha256File(local);
    this.say(`writing ${local} (6 MiB) from server-1, reading it back from server-2`);
    const path = "/multihost/random.bin";
    const put = await this.cli("server-1", ["fs", "put", local, path, "--replication", "3", "--block-size-mb", "2"]);
    const back = join(this.runDir, "random.back");
    const get = put.code === 0 ? await this.cli("server-2", ["fs", "get", path, back]) : put;
    const readBackSha256 = get.code === 0 && existsSync(back) ? sha256File(back) : "";
    const file = {
      path,
      bytes,
      sha256: sha,
      readBackSha256,
      identical: readBackSha256 === sha,
      putMs: put.ms,
      getMs: get.ms,
    };
    this.result.file = file;
    this.check(
      "a file written with replication 3 from server-1 reads back byte-identical from server-2",
      put.code === 0 && get.code === 0 && file.identical,
      put.code !== 0
        ? cliFailure(put)
        : get.code !== 0
          ? cliFailure(get)
          : `sha256 ${sha.slice(0, 16)}…, put ${seconds(put.ms)}, get ${seconds(get.ms)}`,
    );
    // Replication 2 in 1 MiB blocks: some replicas sit on server-3, and the namenode can re-create them elsewhere.
    const r2 = join(this.runDir, "r2.bin");
    writeFileSync(r2, randomBytes(4 * MiB));
    const putR2 = await this.cli("server-2", [
      "fs",
      "put",
      r2,
      "/multihost/r2.bin",
      "--replication",
      "2",
      "--block-size-mb",
      "1",
    ]);
    if (putR2.code !== 0) throw new Error(`fs put of a replication-2 file failed: ${cliFailure(putR2)}`);
  }

  // ---------------------------------------------------------------------------------------------- c, d

  /** c and d: a job and a write in flight, server-3 cut off, then healed; what the cluster did at each step. */
  private async partitionAndHeal(): Promise<void> {
    const c = this.c;
    const releaseFile = join(this.runDir, "release-held-tasks");
    const app = await this.startHeldJob(releaseFile);
    const wordcount = await this.startThreeEdgeJob();
    const write = await this.startSlowWrite();

    const atCut = await c.call<JobReport>("status", [app]);
    const cutContainers = atCut.containers.filter((x) => x.nodeId === CUT_SERVER && x.state !== "COMPLETE");
    const cutProcesses = processesUnder(this.nmContainersDir(CUT_SERVER));
    const cutAt = Date.now();
    this.lab.cut(CUT_SERVER);
    this.say(
      `cut ${CUT_SERVER} (${cutContainers.length} of ${app}'s containers and ${cutProcesses.length} container processes on it; ` +
        `${(write.feeder.bytes() / MiB).toFixed(1)} MiB fed to the write)`,
    );
    const watch = watchServer(c, CUT_SERVER);
    const part: NonNullable<MultihostResult["partition"]> = {
      server: CUT_SERVER,
      cutAt: new Date(cutAt).toISOString(),
      cutForMs: 0,
      nodeStates: [],
      datanodeStates: [],
    };
    this.result.partition = part;
    await this.holdCut(cutAt, watch, part);
    const healAt = Date.now();
    part.cutForMs = healAt - cutAt;
    part.healedAt = new Date(healAt).toISOString();
    this.lab.heal(CUT_SERVER);
    this.say(`healed ${CUT_SERVER} after ${seconds(part.cutForMs)}`);

    // From the heal on, fsck is polled; it counts once the in-flight write settled (completed, or failed and removed).
    let writeSettled = false;
    const healthyAt = (async (): Promise<number | undefined> => {
      const deadline = healAt + 240_000;
      while (Date.now() < deadline && !c.isClosed) {
        const f = await c.call<DfsFsckReport>("fsck", ["/"]).catch(() => undefined);
        if (writeSettled && f?.healthy === true) return Date.now();
        await sleep(500);
      }
      return undefined;
    })();

    const heal: NonNullable<MultihostResult["heal"]> = { processesAtCut: cutProcesses.length, fsckHealthy: false };
    this.result.heal = heal;
    await this.awaitRejoin(healAt, watch, cutProcesses, heal, part);
    // Only now may the held tasks end by themselves: the cut server's ones were killed, or the check above failed.
    writeFileSync(releaseFile, "");
    heal.releasedAfterMs = Date.now() - healAt;
    this.checkLeftovers(cutProcesses, heal);

    await this.checkWrite(write, healAt);
    writeSettled = true;
    await this.checkJobAcrossCut(app, cutContainers);
    await this.checkThreeEdgeJob(wordcount);
    await this.checkFsck(await healthyAt, healAt, part.write?.endedAfterHealMs);
    this.say(
      `rejoin times: node manager ${optSeconds(heal.nodeManagerRejoinMs)}, datanode ${optSeconds(heal.datanodeRejoinMs)}, ` +
        `fsck healthy ${optSeconds(heal.fsckHealthyAfterMs)} after the heal`,
    );
  }

  /** Submits the job whose tasks hold their containers, and waits until some of them run on the server to be cut. */
  private async startHeldJob(releaseFile: string): Promise<string> {
    const dag = writeJson(join(this.runDir, "dag-held.json"), longDag(releaseFile));
    const submit = await this.cli(MASTER, ["job", "submit", dag]);
    const app = (submit.json as { appId?: string } | undefined)?.appId;
    if (!app) throw new Error(`job submit failed: ${cliFailure(submit)}`);
    this.say(`submitted ${app}; waiting until ${CUT_SERVER} runs some of its tasks`);
    await until(`${app} running tasks on ${CUT_SERVER}`, 60_000, async () => {
      const r = await this.c.call<JobReport>("status", [app]);
      if (["FINISHED", "FAILED", "KILLED"].includes(r.state))
        throw new GiveUp(`${app} ended (${r.state}) before the cut`);
      const running = r.containers.some((x) => x.nodeId === CUT_SERVER && !x.isAm && x.state === "RUNNING");
      return running && processesUnder(this.nmContainersDir(CUT_SERVER)).length > 0 ? true : undefined;
    });
    return app;
  }

  /** Puts the corpus in the DFS from the master and submits the word count over every edge type (it spans the cut). */
  private async startThreeEdgeJob(): Promise<{ appId: string; corpus: string; output: string }> {
    const corpus = join(packageRoot(), "examples", "data", "corpus.txt");
    const put = await this.cli(MASTER, ["fs", "put", corpus, "/lab/corpus.txt", "--overwrite"]);
    if (put.code !== 0) throw new Error(`fs put of the corpus failed: ${cliFailure(put)}`);
    // Every host's directory, and Harvest's installation (masked on the servers: tasks run the localized runtime).
    const hostDirs = [...[MASTER, ...SERVERS].map((h) => join(this.runDir, h)), packageRoot()];
    const dag = threeEdgeDag("/lab/corpus.txt", "/lab/counts.tsv", hostDirs, SERVERS.length);
    const submit = await this.cli(MASTER, ["job", "submit", writeJson(join(this.runDir, "dag-three-edges.json"), dag)]);
    const appId = (submit.json as { appId?: string } | undefined)?.appId;
    if (!appId) throw new Error(`job submit failed: ${cliFailure(submit)}`);
    this.say(`submitted ${appId}: a word count over all three edge types, through the cut`);
    return { appId, corpus, output: "/lab/counts.tsv" };
  }

  /**
   * The word count across the cut succeeded, its counts in the DFS are right, and none of its tasks saw another host's
   * directories (each host's mount namespace masks them).
   */
  private async checkThreeEdgeJob(job: { appId: string; corpus: string; output: string }): Promise<void> {
    const report = await until(`${job.appId} to end`, 240_000, async () => {
      const r = await this.c.call<JobReport>("status", [job.appId]);
      return ["FINISHED", "FAILED", "KILLED"].includes(r.state) ? r : undefined;
    });
    const local = join(this.runDir, MASTER, "counts.tsv");
    const get = report.state === "FINISHED" ? await this.cli(MASTER, ["fs", "get", job.output, local]) : undefined;
    const got = get?.code === 0 && existsSync(local) ? readFileSync(local, "utf8") : "";
    const expected = expectedCounts(readFileSync(job.corpus, "utf8"));
    this.check(
      "a word count over scatter-gather, one-to-one and broadcast edges runs through the cut and writes exact counts to the DFS",
      report.state === "FINISHED" && got === expected,
      `${job.appId} ${report.state} ${report.outcome}; task containers ${JSON.stringify(report.taskContainers)}; ` +
        `${got.split("\n").length - 1} of ${expected.split("\n").length - 1} words in ${job.output}` +
        (got && got !== expected ? " (DIFFERENT)" : ""),
    );
    const probes = probeResults(this.runDir, SERVERS, job.appId);
    const leaks = probes.flatMap((p) =>
      Object.entries(p.seen)
        // Seen empty (masked by the host's namespace) or not there at all (below /tmp: the task's /tmp is its own).
        .filter(
          ([dir, what]) =>
            dir !== join(this.runDir, p.node) && !(Array.isArray(what) ? what.length === 0 : what === "ENOENT"),
        )
        .map(([dir, what]) => `${p.node} saw ${dir}: ${JSON.stringify(what)}`),
    );
    this.check(
      "no task sees another host's directories nor Harvest's installation (private mount namespaces)",
      probes.length >= 1 && leaks.length === 0,
      leaks.length > 0
        ? leaks.join("; ")
        : `${probes.length} probe tasks on ${[...new Set(probes.map((p) => p.node))].join(", ")}`,
    );
  }

  /** A write from a slow producer (a FIFO fed at 1.5 MiB/s, 24 MiB) so that it is in flight through the cut. */
  private async startSlowWrite(): Promise<InFlightWrite> {
    const fifo = join(this.runDir, "inflight.fifo");
    execFileSync("mkfifo", [fifo]);
    const path = "/multihost/inflight.bin";
    const startedAt = Date.now();
    const put = this.cli("server-1", ["fs", "put", fifo, path, "--replication", "3", "--block-size-mb", "4"], 150_000);
    const feeder = feedFifo(fifo, 24 * MiB, 1.5 * MiB, 120_000);
    await until("the in-flight write to carry data", 20_000, async () =>
      feeder.bytes() >= 3 * MiB ? true : undefined,
    );
    return { path, put, feeder, startedAt };
  }

  /**
   * Keeps the link cut at least `cutMs` and until the masters noticed (LOST, DEAD) and re-replicated the replication-2
   * file (bounded by 45 s or `cutMs`); then checks those three.
   */
  private async holdCut(
    cutAt: number,
    watch: ServerWatch,
    part: NonNullable<MultihostResult["partition"]>,
  ): Promise<void> {
    const cutMs = this.opts.cutMs ?? 12_000;
    const deadline = cutAt + Math.max(cutMs, 45_000);
    let shownLost = false;
    while (Date.now() < deadline) {
      await sleep(POLL_MS);
      if (part.reReplicatedAfterMs === undefined && watch.datanodeDeadAt !== undefined) {
        const f = await this.c.call<DfsFsckReport>("fsck", ["/multihost/r2.bin"]).catch(() => undefined);
        if (f && f.underReplicated.length === 0 && f.missing.length === 0)
          part.reReplicatedAfterMs = Date.now() - cutAt;
      }
      if (!shownLost && watch.nodeLostAt !== undefined) {
        // What a user sees: `harvest cluster status` names the server LOST.
        shownLost = true;
        const st = await this.cli(MASTER, ["cluster", "status"]);
        const n = (st.json as { nodes?: NodeInfo[] } | undefined)?.nodes?.find((x) => x.nodeId === CUT_SERVER);
        const last = n ? new Date(n.lastHeartbeatMs).toISOString() : "?";
        this.say(`  harvest cluster status: ${CUT_SERVER} ${n?.state ?? "?"} (last heartbeat ${last})`);
      }
      const noticed = watch.nodeLostAt !== undefined && watch.datanodeDeadAt !== undefined;
      if (Date.now() - cutAt >= cutMs && noticed && part.reReplicatedAfterMs !== undefined) break;
    }
    if (watch.nodeLostAt !== undefined) part.nodeLostAfterMs = watch.nodeLostAt - cutAt;
    if (watch.datanodeDeadAt !== undefined) part.datanodeDeadAfterMs = watch.datanodeDeadAt - cutAt;
    this.check(
      `the resource manager marks ${CUT_SERVER} LOST during the cut`,
      part.nodeLostAfterMs !== undefined,
      part.nodeLostAfterMs !== undefined ? `after ${seconds(part.nodeLostAfterMs)}` : "never within the cut",
    );
    this.check(
      `the namenode marks ${CUT_SERVER}'s datanode DEAD during the cut`,
      part.datanodeDeadAfterMs !== undefined,
      part.datanodeDeadAfterMs !== undefined ? `after ${seconds(part.datanodeDeadAfterMs)}` : "never within the cut",
    );
    this.check(
      `the namenode re-replicates ${CUT_SERVER}'s replicas of a replication-2 file elsewhere during the cut`,
      part.reReplicatedAfterMs !== undefined,
      part.reReplicatedAfterMs !== undefined
        ? `fully replicated again ${seconds(part.reReplicatedAfterMs)} into the cut`
        : "still under-replicated at the heal",
    );
  }

  /** Waits (up to 120 s) for both daemons to rejoin and the old container processes to go; checks the rejoins. */
  private async awaitRejoin(
    healAt: number,
    watch: ServerWatch,
    cutProcesses: ReturnType<typeof processesUnder>,
    heal: NonNullable<MultihostResult["heal"]>,
    part: NonNullable<MultihostResult["partition"]>,
  ): Promise<void> {
    const deadline = healAt + 120_000;
    while (Date.now() < deadline) {
      await sleep(POLL_MS);
      if (watch.nodeBackAt !== undefined && heal.aliveAtRejoin === undefined)
        heal.aliveAtRejoin = cutProcesses.filter(stillRunning).length;
      if (heal.processesGoneAfterMs === undefined && !cutProcesses.some(stillRunning))
        heal.processesGoneAfterMs = Date.now() - healAt;
      const back = watch.nodeBackAt !== undefined && watch.datanodeBackAt !== undefined;
      // Leftovers get 30 s after the node manager's rejoin.
      if (back && (heal.processesGoneAfterMs !== undefined || Date.now() > (watch.nodeBackAt ?? 0) + 30_000)) break;
    }
    watch.stop();
    await watch.done;
    part.nodeStates = watch.nodeStates;
    part.datanodeStates = watch.datanodeStates;
    if (watch.nodeBackAt !== undefined) heal.nodeManagerRejoinMs = watch.nodeBackAt - healAt;
    if (watch.datanodeBackAt !== undefined) heal.datanodeRejoinMs = watch.datanodeBackAt - healAt;
    this.say(
      `rejoin after the heal: node manager ${optSeconds(heal.nodeManagerRejoinMs, "never (120 s)")}, ` +
        `datanode ${optSeconds(heal.datanodeRejoinMs, "never (120 s)")}`,
    );
    const status = await this.cli(MASTER, ["cluster", "status"]);
    const node = (status.json as { nodes?: NodeInfo[] } | undefined)?.nodes?.find((x) => x.nodeId === CUT_SERVER);
    this.check(
      `${CUT_SERVER}'s node manager re-registers after the heal (LOST, then RUNNING)`,
      heal.nodeManagerRejoinMs !== undefined && part.nodeStates.includes("LOST") && node?.state === "RUNNING",
      `states ${part.nodeStates.join(" -> ")}; rejoined ${optSeconds(heal.nodeManagerRejoinMs, "never")} after the heal; ` +
        `harvest cluster status says ${node?.state ?? "?"}`,
    );
    this.check(
      `${CUT_SERVER}'s datanode re-registers after the heal (DEAD, then LIVE)`,
      heal.datanodeRejoinMs !== undefined && part.datanodeStates.includes("DEAD"),
      `states ${part.datanodeStates.join(" -> ")}; rejoined ${optSeconds(heal.datanodeRejoinMs, "never")} after the heal`,
    );
  }

  private checkLeftovers(
    cutProcesses: ReturnType<typeof processesUnder>,
    heal: NonNullable<MultihostResult["heal"]>,
  ): void {
    const alive = cutProcesses.filter(stillRunning);
    this.check(
      `container processes left on ${CUT_SERVER} from before the cut are killed after it rejoins`,
      cutProcesses.length > 0 && heal.processesGoneAfterMs !== undefined,
      `${cutProcesses.length} at the cut, ${heal.aliveAtRejoin ?? "?"} still running when the node manager rejoined, ` +
        (heal.processesGoneAfterMs !== undefined
          ? `all gone ${seconds(heal.processesGoneAfterMs)} after the heal (before the held tasks were released)`
          : `${alive.length} still running 30 s after the rejoin: ${alive.map((p) => `pid ${p.pid} in ${p.cwd}`).join(", ")}`),
    );
  }

  /** The write in flight: completed and identical when read from another server, or failed with a code. */
  private async checkWrite(w: InFlightWrite, healAt: number): Promise<void> {
    const put = await w.put;
    const fed = await w.feeder.done;
    const putError = (put.json as { error?: { code: string; message: string } } | undefined)?.error;
    const write: NonNullable<NonNullable<MultihostResult["partition"]>["write"]> = {
      path: w.path,
      bytesFed: fed.bytes,
      completed: put.code === 0 && fed.complete,
      ms: put.ms,
      endedAfterHealMs: w.startedAt + put.ms - healAt,
    };
    this.result.partition!.write = write;
    if (write.completed) {
      const local = join(this.runDir, "inflight.back");
      const get = await this.cli("server-2", ["fs", "get", w.path, local], 120_000);
      write.identical = get.code === 0 && existsSync(local) && sha256File(local) === fed.sha256;
    } else {
      write.errorCode = putError?.code ?? (put.timedOut ? "TIMED_OUT" : undefined);
      write.errorMessage = putError?.message ?? put.stderr.trim().slice(-500);
      // A user removes a failed write before checking the file system.
      await this.cli(MASTER, ["fs", "rm", w.path]);
    }
    this.check(
      "the write in flight during the cut completes and reads back identical, or fails with a clear coded error",
      write.completed ? write.identical === true : write.errorCode !== undefined && write.errorCode !== "TIMED_OUT",
      write.completed
        ? `completed (${(fed.bytes / MiB).toFixed(0)} MiB in ${seconds(put.ms)}, ending ${relative(write.endedAfterHealMs)} ` +
            `the heal); read back ${write.identical ? "identical" : "DIFFERENT"}`
        : `failed with ${write.errorCode ?? "no code"}: ${write.errorMessage ?? ""}`,
    );
  }

  /** The job across the cut: succeeded, lost tasks re-run without failures, the cut server's old containers unused. */
  private async checkJobAcrossCut(app: string, cutContainers: CutContainer[]): Promise<void> {
    const report = await until(`${app} to end`, 240_000, async () => {
      const r = await this.c.call<JobReport>("status", [app]);
      return ["FINISHED", "FAILED", "KILLED"].includes(r.state) ? r : undefined;
    });
    const final = new Map(report.containers.map((x) => [x.containerId, x]));
    const containersAtCut = cutContainers.map((x) => ({
      containerId: x.containerId,
      isAm: x.isAm,
      state: final.get(x.containerId)?.state ?? "?",
      cause: final.get(x.containerId)?.cause ?? "?",
    }));
    const cutIds = new Set(cutContainers.map((x) => x.containerId));
    const inputsFromCutContainers = lastTaskInputs(this.runDir, SERVERS, app).filter((id) => cutIds.has(id));
    const job = { ...jobOutcome(report), containersAtCut, inputsFromCutContainers };
    this.result.partition!.job = job;
    this.check(
      "the job running across the cut SUCCEEDS, re-running the lost tasks without counting a failure",
      report.state === "FINISHED" && job.taskContainers.failed === 0 && job.taskContainers.lost >= 1,
      `${app} ${report.state} ${report.outcome} in ${seconds(job.durationMs)}; task containers ` +
        `${JSON.stringify(job.taskContainers)}; job-manager attempts ${job.amAttempts}`,
    );
    this.check(
      `${CUT_SERVER}'s containers from before the cut never count as successes and none of their output is read`,
      containersAtCut.length > 0 &&
        containersAtCut.every((x) => x.cause !== "SUCCEEDED") &&
        inputsFromCutContainers.length === 0,
      containersAtCut.map((x) => `${x.containerId}${x.isAm ? " (job manager)" : ""} ${x.state}/${x.cause}`).join(", ") +
        (inputsFromCutContainers.length ? `; read by the last task: ${inputsFromCutContainers.join(", ")}` : ""),
    );
  }

  /** The file system healthy again: by the namenode (polled since the heal), then as `harvest fs fsck` says. */
  private async checkFsck(
    healthyAt: number | undefined,
    healAt: number,
    writeEndedAfterHealMs?: number,
  ): Promise<void> {
    const heal = this.result.heal!;
    const fsck = await this.cli(MASTER, ["fs", "fsck", "/"]);
    heal.fsckHealthy =
      healthyAt !== undefined && fsck.code === 0 && (fsck.json as { healthy?: boolean } | undefined)?.healthy === true;
    if (healthyAt !== undefined) heal.fsckHealthyAfterMs = healthyAt - healAt;
    const writeNote =
      writeEndedAfterHealMs !== undefined ? ` (the in-flight write ended ${relative(writeEndedAfterHealMs)} it)` : "";
    this.check(
      "harvest fs fsck reports the file system healthy again after the heal",
      heal.fsckHealthy,
      healthyAt !== undefined
        ? `${seconds(healthyAt - healAt)} after the heal${writeNote}; harvest fs fsck exits ${fsck.code}`
        : `still not healthy 240 s after the heal: ${fsck.stdout.slice(0, 600)}`,
    );
  }

  // ---------------------------------------------------------------------------------------------- plumbing

  private get c(): LabClient {
    if (!this.client) throw new Error("the in-namespace client is not open");
    return this.client;
  }

  private cli(host: string, args: string[], timeoutMs = 60_000): Promise<CliResult> {
    return harvestCli(this.lab, host, this.result.clientConfig, this.runDir, args, timeoutMs);
  }

  private nmContainersDir(server: string): string {
    return join(this.runDir, server, "nm", "containers");
  }

  private check(name: string, ok: boolean, detail: string): void {
    this.result.checks.push({ name, ok, detail });
    this.say(`${ok ? "PASS" : "FAIL"}  ${name}${detail ? `: ${detail}` : ""}`);
  }

  private passed(): boolean {
    return this.result.error === undefined && this.result.checks.every((x) => x.ok);
  }

  private clusterInfo(): MultihostCluster {
    const rm = this.lab.started.find((d) => d.kind === "resourcemanager");
    const nn = this.lab.started.find((d) => d.kind === "namenode");
    return {
      runDir: this.runDir,
      prefix: this.lab.prefix,
      clientConfig: this.result.clientConfig,
      rmAddress: rm?.address ?? "",
      nnAddress: nn?.address ?? "",
      cliPrefix: ["ip", "netns", "exec", this.lab.ns(MASTER), process.execPath, distEntry("cli/harvest.js")],
      daemons: this.lab.started,
      passed: this.passed(),
    };
  }
}
