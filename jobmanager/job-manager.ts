/**
 * The job manager (a Tez-like application master), one per job, running in a container: registers with the resource
 * manager with the DAG's max concurrency, asks for containers every heartbeat, starts tasks on node managers, re-runs
 * tasks a primary tenant preempted, and reports the outcome into the resource manager's job history.
 */
import { readFile } from "node:fs/promises";
import { join } from "node:path";
import {
  DEFAULT_MAX_PARALLELISM,
  maxConcurrency,
  parseDag,
  TASK_ENV,
  taskInputs,
  taskOutputs,
} from "../common/dag-spec.js";
import { withSplitParallelism } from "../common/dag-input.js";
import { computeSplits, inputFiles } from "./input-splits.js";
import type { DagSpec } from "../common/dag-spec.js";
import { detailsOf, errorMessage, HarvestError, isHarvestError } from "../common/errors.js";
import { TOKEN_METADATA } from "../common/auth.js";
import { call, loadHarvestProto, makeClient } from "../common/grpc.js";
import { Lifecycle } from "../common/lifecycle.js";
import type { DaemonState } from "../common/lifecycle.js";
import type { ClientSecurity } from "../common/grpc.js";
import { Logger } from "../common/log.js";
import {
  COUNTERS_FILE,
  EXIT_INPUT_LOST,
  formatOutputLocation,
  parseOutputLocation,
  readContainerTokens,
} from "../common/task-contract.js";
import type { ContainerTokens, InputSplit } from "../common/task-contract.js";
import { DagRunner } from "./dag-runner.js";
import { NoticedServers } from "./policy/noticed-servers.js";
import { DfsJournal, LocalJournal } from "./journal.js";
import type { JournalStore } from "./journal.js";
import { DfsClient } from "../client/dfs-client.js";
import type { AttemptEnd, TaskLocality, TaskRecord } from "./dag-runner.js";
import type { ApplicationMasterServiceClient } from "../proto/generated/harvest/v1/ApplicationMasterService.js";
import type { AllocateResponseOutput } from "../proto/generated/harvest/v1/AllocateResponse.js";
import type { RegisterAmResponseOutput } from "../proto/generated/harvest/v1/RegisterAmResponse.js";
import type { ContainerOutput } from "../proto/generated/harvest/v1/Container.js";
import type { ContainerManagerClient } from "../proto/generated/harvest/v1/ContainerManager.js";
import type { ShuffleServiceClient } from "../proto/generated/harvest/v1/ShuffleService.js";
import type { JobProgress } from "../proto/generated/harvest/v1/JobProgress.js";

/** Settings of one job-manager attempt (from its container environment). */
export interface JobManagerOptions {
  appId: string;
  attempt: number;
  rmAddress: string;
  /**
   * Where the job's DAG and this job manager's recovery journal are when the job is not staged in the DFS: under
   * `<stagingDir>/<appId>` (the resource manager's staging area).
   */
  stagingDir: string;
  /** The job's staging directory in the DFS (`dfs:/user/<name>/.staging/<appId>`): the journal's segments go there. */
  jobStaging?: string;
  /** The job's DAG file, written by the resource manager at submit. */
  dagFile: string;
  /** How often to call Allocate. @default 300 */
  heartbeatMs: number;
  /** Real failures of one task before the job fails. @default 4 */
  maxTaskAttempts: number;
  /** How long the resource manager may be unreachable before the job manager gives up. @default 60000 */
  rmRetryMs: number;
  /**
   * How long new tasks avoid a server after a preemption notice from it (NoticedServers); 0: never.
   * @default DEFAULT_NOTICE_AVOID_MS
   */
  noticeAvoidMs?: number;
  /**
   * On a secure cluster: the cluster CA's certificate (HARVEST_CA, set by the node manager), and from the container's
   * token file (HARVEST_TOKEN_FILE) this attempt's AM token (from the resource manager) and the submitter's
   * file-system token, which every task receives in its own token file. Absent on a plaintext cluster.
   */
  caFile?: string;
  amToken?: string;
  dfsToken?: string;
  /** The job's shuffle token, which every task receives to fetch the others' outputs. */
  shuffleToken?: string;
}

/** Why a resource cannot be localized on any node, ever: the job fails at once instead of retrying launches. */
const PERMANENT_LOCALIZATION_CAUSES = [
  "PERMISSION_DENIED",
  "NAMENODE_FILE_NOT_FOUND",
  "NAMENODE_PARENT_NOT_FOUND",
  "DFS_BAD_PATH",
  "INVALID_ARGUMENT",
  "ARCHIVE_REFUSED",
];

/** How a job-manager attempt ended. */
export type JobManagerExit = "SUCCEEDED" | "FAILED" | "KILLED" | "SUPERSEDED";

/** One job-manager attempt. */
export class JobManager {
  private readonly log = new Logger("jm");
  /** Starting from `run()` until the first registration is answered; stopped by `close()`. */
  private readonly lifecycle = new Lifecycle("job manager");
  private readonly rm: ApplicationMasterServiceClient;
  private readonly nms = new Map<string, ContainerManagerClient>();
  private readonly shuffles = new Map<string, ShuffleServiceClient>();
  /** Per vertex, its succeeded tasks' counters summed by name. */
  private readonly counters = new Map<string, Map<string, number>>();
  private runner!: DagRunner;
  private dag!: DagSpec;
  private releases: string[] = [];
  private readonly outputDirs = new Map<string, string>();
  /** Each datanode's rack (a datanode's id is its server's node id), from the input splits' block locations. */
  private readonly rackOfNode = new Map<string, string>();
  private readonly launches = new Set<Promise<void>>();
  /** Servers that gave a preemption notice: new tasks avoid them a while (every Allocate names them). */
  private readonly noticed: NoticedServers;
  private killed = false;
  /** Set when a task's resources can never be localized (missing, or not the submitter's to read): the job fails. */
  private unlocalizable: string | undefined;
  private journal!: JournalStore;
  /** The job's file system (its DFS token), when the job is staged there: its journal, then closed. */
  private dfs: DfsClient | undefined;

  /**
   * The AM token this attempt presents: the one from its token file, then each fresh one an Allocate answer carries
   * (the resource manager renews it past half its lifetime). Every client reads it at each call.
   */
  private amToken: string;

  constructor(readonly options: JobManagerOptions) {
    this.amToken = options.amToken ?? "";
    this.noticed = new NoticedServers(options.noticeAvoidMs);
    this.rm = makeClient(loadHarvestProto().ApplicationMasterService, options.rmAddress, this.security());
  }

  /** TLS trusting the cluster CA, with the current AM token on every call (undefined on a plaintext cluster). */
  private security(): ClientSecurity | undefined {
    if (!this.options.caFile) return undefined;
    return { ca: this.options.caFile, tokens: () => ({ [TOKEN_METADATA["am-token"]]: this.amToken }) };
  }

  /** Where this attempt is in the one daemon lifecycle (common/lifecycle.ts). */
  get state(): DaemonState {
    return this.lifecycle.state;
  }

  /** Runs the job to its end and returns how it ended; an attempt runs once (DAEMON_INVALID_TRANSITION after). */
  async run(): Promise<JobManagerExit> {
    this.lifecycle.beginStart();
    const { appId, attempt } = this.options;
    // The resource manager put the DAG in the job's staging directory at submit, so max concurrency goes out with the
    // one registration (seeds/004, section 4.1: the scheduler needs it to pick classes).
    this.dag = parseDag(await readFile(this.options.dagFile, "utf8"));
    this.journal = this.openJournal();
    const journal = await this.journal.readAll();
    // A vertex over DFS files gets one task per split; a job whose input cannot be split fails once registered.
    let splits = new Map<string, InputSplit[]>();
    let inputFailure: string | undefined;
    try {
      splits = await this.inputSplits(journal);
      this.dag = withSplitParallelism(this.dag, new Map([...splits].map(([v, list]) => [v, list.length])));
    } catch (err) {
      inputFailure = errorMessage(err);
    }
    this.runner = new DagRunner(
      this.dag,
      { maxTaskAttempts: this.options.maxTaskAttempts, maxLaunchFailures: 10 },
      splits,
    );
    await this.recover(journal);
    if (!(await this.register())) return "SUPERSEDED";
    this.lifecycle.started();
    if (inputFailure) return this.finish("FAILED", inputFailure);

    for (;;) {
      let res: AllocateResponseOutput;
      const asks = this.runner.asks();
      try {
        res = await this.rmCall((c) =>
          call(c, c.allocate, {
            appId,
            attempt,
            asks: asks.map((a) => ({
              priority: a.priority,
              resource: a.vertex.resources,
              count: a.count,
              ...a.locality,
            })),
            releases: this.releases,
            progress: this.progress(),
            avoidNodes: this.noticed.avoided(Date.now()),
          }),
        );
      } catch (err) {
        if (isHarvestError(err, "APP_ATTEMPT_UNKNOWN", "APP_NOT_FOUND")) {
          this.log.warn("this attempt is no longer current; exiting", { error: errorMessage(err) });
          return "SUPERSEDED";
        }
        throw err;
      }
      this.releases = [];
      if (res.amToken) {
        this.amToken = res.amToken;
        this.log.info("the resource manager renewed this attempt's AM token");
      }
      if (res.resync) {
        this.log.info("the resource manager restarted; registering again (running tasks are kept)");
        if (!(await this.register())) return "SUPERSEDED";
        continue;
      }
      if (res.shutdown) {
        this.log.info("the resource manager asked the job manager to shut down (job killed)");
        return "KILLED";
      }
      for (const n of res.preemption?.containers ?? []) {
        this.noticed.note(n.nodeId, Date.now());
        this.log.info("preemption notice: a primary tenant is close to taking this task's cores back", {
          containerId: n.containerId,
          nodeId: n.nodeId,
        });
      }
      for (const st of res.completed)
        await this.onCompleted(st.containerId, st.cause as AttemptEnd, st.diagnostics, st.exitCode, st.nodeId);
      for (const c of res.allocated) this.onAllocated(c);
      if (this.killed) return this.finish("KILLED", "a task was killed by the user");
      if (this.unlocalizable) return this.finish("FAILED", this.unlocalizable);
      if (this.runner.failure) return this.finish("FAILED", this.runner.failure);
      if (this.runner.succeeded) return this.finish("SUCCEEDED", "");
      // Tasks that became ready with this answer (their upstream finished, or one is to run again) are asked for at
      // once; otherwise the next call waits a heartbeat.
      if (askedCount(this.runner.asks()) <= askedCount(asks)) await sleep(this.options.heartbeatMs);
    }
  }

  /**
   * Registers this attempt (again after a resource manager restart) and takes over the job's running containers that
   * the journal names; the others are released. False: this attempt is no longer current.
   */
  private async register(): Promise<boolean> {
    const { appId, attempt } = this.options;
    const concurrency = maxConcurrency(this.dag);
    let res: RegisterAmResponseOutput;
    try {
      res = await this.rmCall((c) =>
        call(c, c.registerApplicationMaster, {
          appId,
          attempt,
          maxConcurrency: concurrency,
          runningContainers: this.runner.activeContainers(),
        }),
      );
    } catch (err) {
      if (isHarvestError(err, "APP_ATTEMPT_UNKNOWN", "APP_ALREADY_FINISHED")) return false;
      throw err;
    }
    let kept = 0;
    for (const c of res.previousContainers) {
      if (this.runner.taskOf(c.id)) kept++;
      else this.releases.push(c.id);
    }
    this.log.info("job manager registered", {
      appId,
      attempt,
      job: this.dag.name,
      vertices: this.dag.vertices.length,
      maxConcurrency: concurrency,
      runningTasksKept: kept,
      released: res.previousContainers.length - kept,
    });
    return true;
  }

  private onAllocated(c: ContainerOutput): void {
    const task = this.runner.assign(c.id, c.priority, c.nodeId, c.rack || this.rackOfNode.get(c.nodeId));
    if (!task) {
      this.releases.push(c.id);
      return;
    }
    const p = this.launch(task, c).finally(() => this.launches.delete(p));
    this.launches.add(p);
  }

  private async launch(task: TaskRecord, c: ContainerOutput): Promise<void> {
    const vertex = this.dag.vertices.find((v) => v.name === task.vertex);
    if (!vertex) return;
    // The task writes its outputs on its own node, whose shuffle service serves them to the job's other tasks.
    const outputDir = formatOutputLocation({ containerId: c.id, nmAddress: c.nmAddress });
    const env: Record<string, string> = {
      ...vertex.env,
      [TASK_ENV.vertex]: task.vertex,
      [TASK_ENV.taskIndex]: String(task.index),
      [TASK_ENV.parallelism]: String(vertex.parallelism),
      [TASK_ENV.inputs]: JSON.stringify(
        taskInputs(this.dag, task.vertex, task.index, (v, i) => this.runner.outputDirOf(v, i)),
      ),
      [TASK_ENV.outputs]: JSON.stringify(taskOutputs(this.dag, task.vertex)),
      ...(task.split ? { [TASK_ENV.split]: JSON.stringify(task.split) } : {}),
      HARVEST_TASK_ATTEMPT: String(task.attempts),
      HARVEST_JOB_NAME: this.dag.name,
    };
    const tokens: ContainerTokens = {
      ...(this.options.dfsToken ? { "dfs-token": this.options.dfsToken } : {}),
      ...(this.options.shuffleToken ? { "shuffle-token": this.options.shuffleToken } : {}),
    };
    try {
      // In the journal before it starts: a later attempt that finds it running takes it over instead of re-running it.
      await this.journalLaunch({
        kind: "launch",
        containerId: c.id,
        vertex: task.vertex,
        index: task.index,
        outputDir,
        ...(task.locality ? { locality: task.locality } : {}),
      });
      const nm = this.nm(c.nmAddress);
      await call(nm, nm.startContainer, {
        container: c,
        appId: this.options.appId,
        argv: vertex.command,
        env,
        tokens,
        isAm: false,
        resources: vertex.localResources ?? [],
      });
      this.outputDirs.set(c.id, outputDir);
      this.runner.launched(c.id);
    } catch (err) {
      const cause = detailsOf(err, "LOCALIZATION_FAILED")?.cause;
      if (cause && PERMANENT_LOCALIZATION_CAUSES.includes(cause))
        this.unlocalizable ??= `task ${task.vertex}[${task.index}]: ${errorMessage(err)}`;
      this.log.warn("task launch failed; will retry on another container", {
        task: `${task.vertex}[${task.index}]`,
        containerId: c.id,
        error: errorMessage(err),
      });
      this.releases.push(c.id);
      this.runner.ended(c.id, "LAUNCH_FAILED", errorMessage(err));
    }
  }

  private async onCompleted(
    containerId: string,
    end: AttemptEnd,
    diagnostics: string,
    exitCode: number,
    nodeId = "",
  ): Promise<void> {
    const outputDir = this.outputDirs.get(containerId);
    const taskBefore = this.runner.taskOf(containerId);
    // A task that could not fetch an input: the producers whose node lost their outputs run again, and then it does,
    // neither counted as a failure. If every producer's outputs are still there, the attempt failed like any other.
    let cause = end;
    if (
      end === "FAILED" &&
      exitCode === EXIT_INPUT_LOST &&
      taskBefore &&
      (await this.rerunLostProducers(taskBefore)) > 0
    )
      cause = "INPUT_LOST";
    // A failed attempt names its container and how to read its log (the job's diagnostics quote the last one).
    const where =
      cause === "FAILED" || cause === "EXCEEDED_MEMORY"
        ? ` in ${containerId}${nodeId ? ` on ${nodeId}` : ""} (harvest job logs ${this.options.appId} --container ${containerId})`
        : "";
    const verdict = this.runner.ended(containerId, cause, (diagnostics || `exit code ${exitCode}`) + where, outputDir);
    this.outputDirs.delete(containerId);
    if (verdict.kind === "unknown") return;
    if (taskBefore) {
      // A succeeded task's counters, read from its outputs on its node, are summed into its vertex's and journaled.
      const counters = verdict.kind === "succeeded" && outputDir ? await this.fetchCounters(outputDir) : undefined;
      if (counters) this.addCounters(taskBefore.vertex, counters);
      this.record({
        containerId,
        vertex: taskBefore.vertex,
        index: taskBefore.index,
        end: cause,
        diagnostics,
        outputDir,
        ...(counters ? { counters } : {}),
      });
    }
    const fields = { containerId, cause, diagnostics };
    if (verdict.kind === "retry") {
      if (cause === "PREEMPTED_BY_PRIMARY")
        this.log.info("task preempted by the primary tenant; re-running it (not a failure)", fields);
      else if (cause === "PREEMPTED_BY_POWER")
        this.log.info("task killed to keep its server under its power budget; re-running it (not a failure)", fields);
      else if (cause === "PREEMPTED_BY_DRAIN")
        this.log.info(
          "task preempted: its server is draining for a reimage; re-running it elsewhere (not a failure)",
          fields,
        );
      else if (cause === "LOST") this.log.info("task lost with its node; re-running it elsewhere", fields);
      else this.log.warn("task attempt ended; retrying", { ...fields, countedAsFailure: verdict.counted });
    } else if (verdict.kind === "job-killed") {
      this.killed = true;
    }
  }

  /**
   * Checks the outputs of every producer `consumer` reads with each producer's node manager; those it no longer has
   * (the node is gone, or was reimaged) are marked lost and run again. Returns how many.
   */
  private async rerunLostProducers(consumer: TaskRecord): Promise<number> {
    const inputs = taskInputs(this.dag, consumer.vertex, consumer.index, (v, i) => this.runner.outputDirOf(v, i));
    // Every producer is asked at once: a dead node costs one timeout, not one per producer.
    const producers = inputs.flatMap((input) =>
      input.sources.map((source, i) => ({
        vertex: input.vertex,
        index: input.edgeType === "one-to-one" ? consumer.index : i,
        source,
      })),
    );
    const available = await Promise.all(producers.map((p) => this.outputsAvailable(p.source)));
    let lost = 0;
    for (const [k, { vertex, index, source }] of producers.entries()) {
      if (available[k] || !this.runner.outputLost(vertex, index)) continue;
      lost++;
      this.record({ kind: "lost", vertex, index });
      this.log.info("a producer's outputs are gone with its node; running it again (not a failure)", {
        task: `${vertex}[${index}]`,
        was: source,
      });
    }
    return lost;
  }

  /** Whether the node manager that holds a finished task's outputs still serves them (asked with the AM token). */
  private async outputsAvailable(source: string): Promise<boolean> {
    const location = parseOutputLocation(source);
    if (!location) return false;
    const shuffle = this.shuffle(location.nmAddress);
    try {
      await call(shuffle, shuffle.listOutputs, { appId: this.options.appId, containerId: location.containerId }, 5_000);
      return true;
    } catch (err) {
      this.log.info("a producer's outputs cannot be listed", { at: source, error: errorMessage(err) });
      return false;
    }
  }

  /**
   * The recovery journal: one JSON line per ended attempt in the job's staging directory. A later job-manager attempt
   * (after a primary tenant preempted this one, or its node was lost) replays it, so finished tasks are not re-run.
   */
  private record(entry: JournalEntry | LostEntry): void {
    const line = JSON.stringify(entry) + "\n";
    this.journal
      .append(line)
      .catch((err: unknown) => this.log.warn("could not append to the recovery journal", { error: errorMessage(err) }));
  }

  /** Appends a launch to the journal and waits until it is written (after the ends queued before it). */
  private async journalLaunch(entry: LaunchEntry): Promise<void> {
    await this.journal.append(JSON.stringify(entry) + "\n");
  }

  /** The job's journal: in its DFS staging directory, else beside its DAG in the resource manager's staging area. */
  private openJournal(): JournalStore {
    const { jobStaging, stagingDir, appId, attempt } = this.options;
    if (!jobStaging) return new LocalJournal(join(stagingDir, appId, "journal.jsonl"));
    this.dfs = DfsClient.fromTaskEnv();
    return new DfsJournal(this.dfs, jobStaging.slice("dfs:".length), attempt);
  }

  /**
   * The splits of every vertex with a DFS input: from the journal when an earlier attempt computed them (so task
   * indices keep naming the same data), else computed now and journaled. Also learns each datanode's rack.
   */
  private async inputSplits(journal: string): Promise<Map<string, InputSplit[]>> {
    const out = new Map<string, InputSplit[]>();
    const withInput = this.dag.vertices.filter((v) => v.input);
    if (withInput.length === 0) return out;
    for (const line of journal.split("\n")) {
      if (!line.startsWith('{"kind":"splits"')) continue;
      try {
        const e = JSON.parse(line) as SplitsEntry;
        out.set(e.vertex, e.splits);
      } catch {
        // A torn line: computed again below.
      }
    }
    const dfs = (this.dfs ??= DfsClient.fromTaskEnv());
    for (const v of withInput) {
      let splits = out.get(v.name);
      if (!splits) {
        const files = await inputFiles(dfs, v.name, v.input!);
        splits = computeSplits(files, v.input!);
        if (splits.length === 0 || splits.length > DEFAULT_MAX_PARALLELISM)
          throw new HarvestError(
            "JOB_INPUT_INVALID",
            `vertex ${v.name}: its input ${v.input!.paths.join(", ")} has ${splits.length} splits; ` +
              (splits.length === 0 ? "it holds no data" : `at most ${DEFAULT_MAX_PARALLELISM}: raise input.splitMb`),
            { details: { vertex: v.name } },
          );
        await this.journal.append(
          JSON.stringify({ kind: "splits", vertex: v.name, splits } satisfies SplitsEntry) + "\n",
        );
        out.set(v.name, splits);
      }
      for (const sp of splits) sp.hosts.forEach((h, i) => this.rackOfNode.set(h, sp.racks[i] ?? ""));
      this.log.info("input split", { vertex: v.name, splits: splits.length, paths: v.input!.paths });
    }
    return out;
  }

  private async recover(text: string): Promise<void> {
    if (text === "") return;
    let replayed = 0;
    // Launches with no end yet: still running (the resource manager keeps them for this attempt) or ended unseen.
    const open = new Map<string, LaunchEntry>();
    for (const line of text.split("\n")) {
      if (!line.trim()) continue;
      let e: JournalEntry | LaunchEntry | LostEntry | SplitsEntry;
      try {
        e = JSON.parse(line) as JournalEntry | LaunchEntry | LostEntry | SplitsEntry;
      } catch {
        // A torn last line from a killed attempt: that entry is simply not recovered.
        continue;
      }
      if ("kind" in e && e.kind === "splits") continue;
      if ("kind" in e && e.kind === "launch") {
        open.set(e.containerId, e);
        // The job's node-local share counts every attempt's starts, an earlier job manager's too.
        if (e.locality) this.runner.countLocality(e.vertex, e.locality);
        continue;
      }
      const end = e as JournalEntry;
      if (end.containerId) open.delete(end.containerId);
      if ("kind" in e && e.kind === "lost") {
        this.runner.outputLost(e.vertex, e.index);
        continue;
      }
      if (end.end === "SUCCEEDED" && !(end.outputDir && (await this.outputsAvailable(end.outputDir)))) continue;
      const verdict = this.runner.replay(end.vertex, end.index, end.end, end.diagnostics, end.outputDir);
      if (verdict.kind === "succeeded" && end.counters) this.addCounters(end.vertex, end.counters);
      replayed++;
    }
    // Taken over: the resource manager answers each one it no longer holds as completed at registration.
    let adopted = 0;
    for (const l of open.values()) {
      if (!this.runner.adopt(l.containerId, l.vertex, l.index)) continue;
      this.outputDirs.set(l.containerId, l.outputDir);
      adopted++;
    }
    const done = this.runner.progress().reduce((a, v) => a + v.succeeded, 0);
    this.log.info("recovered from the previous attempt's journal", {
      entries: replayed,
      tasksAlreadyDone: done,
      runningTasksTakenOver: adopted,
    });
  }

  private async finish(outcome: "SUCCEEDED" | "FAILED" | "KILLED", diagnostics: string): Promise<JobManagerExit> {
    // Let in-flight launches settle so nothing is started after the job ends.
    await Promise.allSettled([...this.launches]);
    await this.journal.flushed();
    const wire = outcome === "SUCCEEDED" ? "JOB_SUCCEEDED" : outcome === "FAILED" ? "JOB_FAILED" : "JOB_KILLED";
    const progress = this.progress();
    await this.rmCall((c) =>
      call(c, c.finishApplicationMaster, {
        appId: this.options.appId,
        attempt: this.options.attempt,
        outcome: wire,
        diagnostics,
        progress,
      }),
    );
    this.log.info("job finished", { outcome, diagnostics, ...this.runner.totals() });
    return outcome;
  }

  private progress(): JobProgress {
    const vertices = this.runner
      .progress()
      .map((v) => ({ ...v, counters: Object.fromEntries(this.counters.get(v.name) ?? new Map<string, number>()) }));
    return { vertices, ...this.runner.totals() };
  }

  /** Adds a succeeded task's counters to its vertex's. */
  private addCounters(vertex: string, counters: Record<string, number>): void {
    let sums = this.counters.get(vertex);
    if (!sums) this.counters.set(vertex, (sums = new Map()));
    for (const [name, n] of Object.entries(counters)) sums.set(name, (sums.get(name) ?? 0) + n);
  }

  /**
   * The counters a finished task left among its outputs (task/counters.ts), from its node's shuffle service with the
   * AM token; undefined when it left none or they cannot be read (a task's counters are never worth failing it for).
   */
  private async fetchCounters(source: string): Promise<Record<string, number> | undefined> {
    const location = parseOutputLocation(source);
    if (!location) return undefined;
    const shuffle = this.shuffle(location.nmAddress);
    const chunks: Buffer[] = [];
    try {
      const stream = shuffle.fetchOutput(
        { appId: this.options.appId, containerId: location.containerId, name: COUNTERS_FILE, offset: 0 },
        { deadline: Date.now() + 5_000 },
      );
      for await (const chunk of stream as AsyncIterable<{ data: Buffer }>) {
        chunks.push(chunk.data);
        if (chunks.reduce((a, c) => a + c.length, 0) > MAX_COUNTERS_BYTES) return undefined;
      }
      const parsed = JSON.parse(Buffer.concat(chunks).toString("utf8")) as unknown;
      if (typeof parsed !== "object" || parsed === null || Array.isArray(parsed)) return undefined;
      const counters: Record<string, number> = {};
      for (const [name, n] of Object.entries(parsed))
        if (name.length <= 128 && Number.isSafeInteger(n)) counters[name] = n as number;
      return counters;
    } catch {
      return undefined;
    }
  }

  private shuffle(address: string): ShuffleServiceClient {
    let c = this.shuffles.get(address);
    if (!c) {
      c = makeClient(loadHarvestProto().ShuffleService, address, this.security());
      this.shuffles.set(address, c);
    }
    return c;
  }

  private nm(address: string): ContainerManagerClient {
    let c = this.nms.get(address);
    if (!c) {
      c = makeClient(loadHarvestProto().ContainerManager, address, this.security());
      this.nms.set(address, c);
    }
    return c;
  }

  /** Calls the resource manager, retrying while it is unreachable (it may be restarting) up to `rmRetryMs`. */
  private async rmCall<T>(fn: (c: ApplicationMasterServiceClient) => Promise<T>): Promise<T> {
    const deadline = Date.now() + this.options.rmRetryMs;
    let delay = 200;
    for (;;) {
      try {
        return await fn(this.rm);
      } catch (err) {
        if (!isHarvestError(err, "UNAVAILABLE", "DEADLINE_EXCEEDED", "NOT_ACTIVE") || Date.now() > deadline) throw err;
        this.log.warn("resource manager unreachable; retrying", { inMs: delay });
        await sleep(delay);
        delay = Math.min(delay * 2, 5_000);
      }
    }
  }

  /** Closes the job manager's channels; idempotent. */
  close(): void {
    if (this.lifecycle.beginStop() === undefined) return;
    this.rm.close();
    for (const c of this.nms.values()) c.close();
    for (const c of this.shuffles.values()) c.close();
    this.dfs?.close();
    this.lifecycle.stopped();
  }
}

/** Reads the job manager's options from its container environment and token file. */
export function jobManagerOptionsFromEnv(env: NodeJS.ProcessEnv): JobManagerOptions {
  let tokens: ContainerTokens;
  try {
    tokens = readContainerTokens(env);
  } catch (err) {
    throw new HarvestError("CONFIG_INVALID", `job manager: ${errorMessage(err)}`, { cause: err });
  }
  const need = (k: string): string => {
    const v = env[k];
    if (!v)
      throw new HarvestError(
        "CONFIG_INVALID",
        `job manager needs ${k} in its environment (the resource manager sets it)`,
      );
    return v;
  };
  return {
    appId: need("HARVEST_APP_ID"),
    attempt: Number(need("HARVEST_ATTEMPT")),
    rmAddress: need("HARVEST_RM_ADDRESS"),
    stagingDir: env["HARVEST_STAGING_DIR"] ?? "",
    ...(env["HARVEST_JOB_STAGING"] ? { jobStaging: env["HARVEST_JOB_STAGING"] } : {}),
    dagFile: need("HARVEST_DAG_FILE"),
    heartbeatMs: Number(env["HARVEST_AM_HEARTBEAT_MS"] ?? 300),
    maxTaskAttempts: Number(env["HARVEST_MAX_TASK_ATTEMPTS"] ?? 4),
    rmRetryMs: Number(env["HARVEST_AM_RM_RETRY_MS"] ?? 60_000),
    ...(env["HARVEST_NOTICE_AVOID_MS"] ? { noticeAvoidMs: noticeAvoidMs(env["HARVEST_NOTICE_AVOID_MS"]) } : {}),
    ...(env["HARVEST_CA"] ? { caFile: env["HARVEST_CA"] } : {}),
    ...(tokens["am-token"] ? { amToken: tokens["am-token"] } : {}),
    ...(tokens["dfs-token"] ? { dfsToken: tokens["dfs-token"] } : {}),
    ...(tokens["shuffle-token"] ? { shuffleToken: tokens["shuffle-token"] } : {}),
  };
}

/** HARVEST_NOTICE_AVOID_MS read: a whole number of ms >= 0; CONFIG_INVALID otherwise. */
function noticeAvoidMs(value: string): number {
  const ms = Number(value);
  if (!(Number.isSafeInteger(ms) && ms >= 0))
    throw new HarvestError("CONFIG_INVALID", `job manager: HARVEST_NOTICE_AVOID_MS must be ms >= 0, got ${value}`);
  return ms;
}

/** The most a task's counters file may hold. */
const MAX_COUNTERS_BYTES = 64 * 1024;

/** One ended task attempt in the recovery journal. */
interface JournalEntry {
  /** A succeeded task's counters. */
  counters?: Record<string, number>;
  /** Absent in journals written before launches were journaled. */
  containerId?: string;
  vertex: string;
  index: number;
  end: AttemptEnd;
  diagnostics: string;
  outputDir: string | undefined;
}

/** A succeeded task whose outputs were found lost: it runs again. */
interface LostEntry {
  kind: "lost";
  vertex: string;
  index: number;
}

/** A vertex's input splits, journaled once when the first attempt computes them. */
interface SplitsEntry {
  kind: "splits";
  vertex: string;
  splits: InputSplit[];
}

/** A task launched on a container, journaled before the launch. */
interface LaunchEntry {
  kind: "launch";
  containerId: string;
  vertex: string;
  index: number;
  outputDir: string;
  /** For a task over an input split: how local its container was. */
  locality?: TaskLocality;
}

/** How many containers `asks` ask for in all. */
function askedCount(asks: readonly { count: number }[]): number {
  let n = 0;
  for (const a of asks) n += a.count;
  return n;
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
