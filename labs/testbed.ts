/**
 * The testbed of `harvest sim validate`: a real Harvest cluster on loopback (a resource manager and one node manager
 * per server, as separate processes, through the launcher `harvest cluster up` uses) whose primaries replay the
 * plan's traces at its speed-up, with every server's primary tenant and history registered through the admin API;
 * then the plan's jobs, submitted on schedule with the job client, followed to their end. Besides each job's time and
 * the containers the primaries killed, it measures what the simulator must be told: the node managers' yield tick and
 * heartbeat as the daemons ran them, container launch times (grant to the task's program running), and how long after
 * a primary's step its kills came.
 */
import { chmodSync, existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { TenantAdminClient } from "../client/tenant-admin-client.js";
import { TERMINAL_STATES } from "../client/job-client.js";
import type { JobClient, JobReport } from "../client/job-client.js";
import { errorMessage, HarvestError } from "../common/errors.js";
import { Stream, streamSeed } from "../sim/compute.js";
import { localJobClient, readClusterEvents, startCluster, stopCluster } from "../localcluster/cluster.js";
import type { ClusterDescriptor } from "../localcluster/cluster.js";
import { eventsOfType } from "../common/events.js";
import type { DaemonEvent } from "../common/events.js";
import { dagOf } from "./testbed-plan.js";
import type { PlannedJob, TestbedPlan } from "./testbed-plan.js";

/** The two task placements compared: stock YARN-H (primary-aware) and history-based (seeds/004, Algorithm 1). */
export type TestbedPolicy = "stock" | "history";

/** How the testbed's daemons run; the simulator is configured from these and from what the run measured. */
export interface TestbedDaemonSettings {
  /** Node managers' yield-controller period (NodeManagerOptions.yieldTickMs). */
  yieldTickMs: number;
  /** Node-manager heartbeat, set by the resource manager (ResourceManagerOptions.heartbeatIntervalMs). */
  heartbeatIntervalMs: number;
  /** The resource manager's monitor tick, which also retries jobs waiting for a class. */
  monitorIntervalMs: number;
  /** Under history, a job that finds no class with room for this long runs anywhere. */
  classWaitMs: number;
  /** The job managers' allocate period: HARVEST_AM_HEARTBEAT_MS, which the testbed leaves at its default. */
  amHeartbeatMs: number;
  /** The job manager's container. */
  amVcoresMilli: number;
  amMemoryMb: number;
  /** How often the test driver reads each running job's report (grant times are first sightings in it). */
  pollMs: number;
}

/**
 * The daemons' defaults but for `classWaitMs`: the resource manager's 60 s is longer than most testbed jobs (a few
 * to a few dozen seconds), so a job waiting for its classes would wait longer than it runs; 15 s keeps the wait
 * shorter than the longer jobs, as 60 s is for the hour-long jobs it was chosen for.
 */
export const TESTBED_DAEMONS: Readonly<TestbedDaemonSettings> = Object.freeze({
  yieldTickMs: 250,
  heartbeatIntervalMs: 1000,
  monitorIntervalMs: 500,
  classWaitMs: 15_000,
  amHeartbeatMs: 300,
  amVcoresMilli: 500,
  amMemoryMb: 256,
  pollMs: 200,
});

/** One job run as the testbed saw it. */
export interface TestbedJob {
  name: string;
  run: number;
  appId: string;
  /** Planned and actual submission, ms after the run's start; end, ms after it (0: never ended). */
  plannedSubmitMs: number;
  submitMs: number;
  finishMs: number;
  state: string;
  /** Submission to end (the resource manager's times), ms; NaN when it never ended. */
  durationMs: number;
  /** Under history: the type and classes the resource manager gave it. */
  jobType: string;
  classes: string[];
  tasksRun: number;
  /**
   * Task containers lost to the primary: killed by it (PREEMPTED_BY_PRIMARY), plus those released because the primary
   * killed their job manager (its attempt's tasks go with it), as the simulator counts them.
   */
  taskKills: number;
  /** ... of which released with a killed job manager. */
  tasksLostWithJobManager: number;
  /** Job-manager containers killed by the primary. */
  amKills: number;
  /** The survival quote the resource manager made at submission (absent when it made none). */
  quote?: { pNoKill: number; expectedReruns: number; etaP10Ms: number; etaP50Ms: number; etaP90Ms: number };
}

/** Median, p90 and count of a sample, ms (NaN when empty). */
export interface Stat {
  count: number;
  medianMs: number;
  p90Ms: number;
}

/** What the testbed measured about itself. */
export interface TestbedMeasurements {
  /** As the daemons ran: the node managers' yield tick (their config) and heartbeat (as they registered). */
  yieldTickMs: number;
  heartbeatIntervalMs: number;
  /** The job managers' allocate period (HARVEST_AM_HEARTBEAT_MS, the job manager's default). */
  amHeartbeatMs: number;
  /** Container launch: the node manager starting a task's container to the task's program running. */
  launch: Stat;
  /** A task container's grant (first report showing it, + half the poll period) to the node manager starting it. */
  pickup: Stat;
  /** A job manager's container started to the job manager registered (the resource manager's event). */
  jobManagerLaunch: Stat;
  /** Submission to the job's first task grant. */
  submitToFirstTask: Stat;
  /** From the step of the primary's trace a kill follows to the kill (the node managers' events). */
  killAfterStep: Stat;
  /** The samples themselves, ms, to pool the runs: launch and job-manager launch. */
  launchSamplesMs: number[];
  jobManagerLaunchSamplesMs: number[];
}

/** One policy's run on the testbed. */
export interface TestbedRun {
  policy: TestbedPolicy;
  /** Wall-clock ms when the job schedule started (job offsets count from here). */
  epochMs: number;
  /** Per server (plan order): wall-clock ms when its node manager's replay began. */
  replayStartMs: number[];
  /** In plan order. */
  jobs: TestbedJob[];
  jobsSubmitted: number;
  jobsFinished: number;
  /** The utilization classes the resource manager built from the registered history, "id: servers". */
  classes: string[];
  measured: TestbedMeasurements;
  /** Wall time of the whole run (start-up to tear-down), ms. */
  wallMs: number;
  /** The cluster's directory (daemon logs in logs/); `runValidation` removes it unless asked to keep it. */
  dir: string;
}

/** Options of {@link runTestbed}. */
export interface RunTestbedOptions {
  /** Directory for this run's cluster (created; `<dir>/logs` holds the daemons' logs). */
  dir: string;
  /** @default TESTBED_DAEMONS */
  daemons?: TestbedDaemonSettings;
  /** Progress lines. @default ignore */
  onNote?: (message: string) => void;
}

/**
 * Runs `plan` under `policy` on a fresh loopback cluster and tears it down: start the daemons, register every
 * server's tenant and history and rebuild the classes, submit the jobs on schedule, follow them until all ended or the
 * plan's deadline passed (the rest are killed and reported unfinished), then read the reports and events.
 */
export async function runTestbed(plan: TestbedPlan, policy: TestbedPolicy, o: RunTestbedOptions): Promise<TestbedRun> {
  const started = Date.now();
  const daemons = o.daemons ?? TESTBED_DAEMONS;
  const note = o.onNote ?? (() => undefined);
  const p = plan.options;
  mkdirSync(o.dir, { recursive: true });
  // Containers run as an unprivileged account when we are root: they must get through to the cluster directory.
  chmodSync(o.dir, 0o755);
  const traceDir = join(o.dir, "traces");
  mkdirSync(traceDir, { recursive: true });
  const primaries = plan.servers.map((s) => {
    const file = join(traceDir, `${s.nodeId}.csv`);
    writeFileSync(file, csv(s.replay, plan.stepSec, 0));
    return `trace:${file}`;
  });
  const seeds = daemonSeeds(p.seed);
  note(`${policy}: starting a resource manager and ${plan.servers.length} node managers`);
  const desc = await startCluster({
    dir: o.dir,
    primaries,
    speed: p.speedup,
    offsetsMs: plan.servers.map(() => 0),
    vcores: p.vcores,
    memoryMb: p.memoryMb,
    startTimeoutMs: 60_000,
    storage: false,
    // A throwaway cluster on loopback: TLS would only add CPU to a shared 2-core machine.
    insecure: true,
    rm: {
      schedulerPolicy: policy,
      heartbeatIntervalMs: daemons.heartbeatIntervalMs,
      monitorIntervalMs: daemons.monitorIntervalMs,
      reserveFraction: p.reserveFraction,
      classWaitMs: daemons.classWaitMs,
      amResource: { vcoresMilli: daemons.amVcoresMilli, memoryMb: daemons.amMemoryMb },
      seed: seeds.placement,
      tenants: {
        slotSec: historySlotSec(plan.stepSec),
        // The whole registered history and the live samples of the replay since.
        windowDays: p.historyDays + (2 * plan.stepSec) / 86_400,
        seed: seeds.kmeans,
      },
    },
    nm: {
      yieldTickMs: daemons.yieldTickMs,
      heartbeatIntervalMs: daemons.heartbeatIntervalMs,
      reserveFraction: p.reserveFraction,
      // The primaries are replayed, not real: containers need no CPU limits, and under the cgroup shares that make
      // them yield to everything else they would starve behind whatever else runs on a shared machine.
      cgroups: "none",
      // Each task's result.json (when its main started) stays in its output directory until the run is measured.
      finishedAppRetentionMs: 3_600_000,
    },
  });
  const client = localJobClient(desc);
  let run: TestbedRun;
  try {
    const classes = await registerTenants(desc, plan);
    note(`${policy}: classes ${classes.length > 0 ? classes.join("; ") : "(none)"}`);
    const epochMs = Date.now();
    const followed = await submitAndFollow(client, plan, epochMs, daemons.pollMs, note, policy);
    const { events } = readClusterEvents(desc.dir);
    const replay = replayStarts(desc, events);
    const jobs = followed.jobs.map((j) => testbedJob(j, epochMs));
    run = {
      policy,
      epochMs,
      replayStartMs: replay,
      jobs,
      jobsSubmitted: jobs.filter((j) => j.appId !== "").length,
      jobsFinished: jobs.filter((j) => j.state === "FINISHED").length,
      classes,
      measured: measure(desc, plan, followed, events, replay, daemons),
      wallMs: 0,
      dir: o.dir,
    };
  } finally {
    client.close();
    await stopCluster(o.dir).catch((err: unknown) => note(`${policy}: stopping the cluster: ${errorMessage(err)}`));
  }
  return { ...run, wallMs: Date.now() - started };
}

// ------------------------------------------------------------------------------------------------ set-up

/** A plain `time_s,cpu_pct` file of `values` at `stepSec` from `startSec`. */
function csv(values: Float32Array, stepSec: number, startSec: number): string {
  const lines = ["time_s,cpu_pct"];
  for (let k = 0; k < values.length; k++) lines.push(`${startSec + k * stepSec},${values[k]!.toFixed(2)}`);
  return lines.join("\n") + "\n";
}

/** The registry's history slot: the traces' step when it divides a day, else the registry's default. */
function historySlotSec(stepSec: number): number {
  return Number.isInteger(stepSec) && 86_400 % stepSec === 0 ? stepSec : 120;
}

/**
 * The resource manager's seeds, so that its random draws start where the simulator's do: Algorithm 1's class choice
 * (`Stream.Classes`) and the k-means of the classes (`Stream.Kmeans`; the registry adds its recluster count, and it
 * reclusters once at start-up before ours).
 */
export function daemonSeeds(seed: number): { placement: number; kmeans: number } {
  return { placement: streamSeed(seed, Stream.Classes), kmeans: streamSeed(seed, Stream.Kmeans) - 1 };
}

/**
 * Registers every server's primary tenant, its history (ending now, so that the replay continues it) and rebuilds the
 * classes; returns them as "id: servers".
 */
async function registerTenants(desc: ClusterDescriptor, plan: TestbedPlan): Promise<string[]> {
  const admin = new TenantAdminClient(desc.rm.address, desc.security);
  try {
    const stepSec = plan.stepSec;
    const endSec = Math.floor(Date.now() / 1000 / stepSec) * stepSec;
    for (const s of plan.servers) {
      await admin.register({ name: s.tenant, environment: "testbed", machineFunction: s.pattern });
      await admin.assign(s.tenant, [s.nodeId]);
      const startSec = endSec - s.history.length * stepSec;
      await admin.importHistoryData(Buffer.from(csv(s.history, stepSec, startSec)), {
        format: "csv",
        server: s.nodeId,
        fileName: `${s.tenant}-history.csv`,
      });
    }
    const classes = await admin.recluster();
    return classes.classes.map((c) => `${c.id}: ${[...c.servers].sort(byServer).join(" ")}`);
  } finally {
    admin.close();
  }
}

/** "server-2" before "server-10". */
export function byServer(a: string, b: string): number {
  return a.localeCompare(b, "en", { numeric: true });
}

// ------------------------------------------------------------------------------------------------ the jobs

/** A job as the driver followed it. */
interface FollowedJob {
  planned: PlannedJob;
  appId: string;
  /** Wall-clock ms when each container first showed in the job's report. */
  firstSeenMs: Map<string, number>;
  report?: JobReport;
  submitError?: string;
}

/**
 * Submits every planned job at its offset after `epochMs` and reads each running job's report every `pollMs` until all
 * have ended or the deadline passed; jobs still running then are killed (and reported as they ended).
 */
async function submitAndFollow(
  client: JobClient,
  plan: TestbedPlan,
  epochMs: number,
  pollMs: number,
  note: (message: string) => void,
  policy: TestbedPolicy,
): Promise<{ jobs: FollowedJob[]; pollMs: number }> {
  // In plan order: job i of the run is job i of the plan (and of the simulator's stream).
  const jobs: FollowedJob[] = plan.jobs.map((planned) => ({ planned, appId: "", firstSeenMs: new Map() }));
  const active = new Set<FollowedJob>();
  const submissions = jobs.map(async (job) => {
    const planned = job.planned;
    await sleepUntil(epochMs + planned.submitOffsetMs);
    try {
      job.appId = await client.submit(dagOf(planned, plan.options));
      active.add(job);
    } catch (err) {
      job.submitError = errorMessage(err);
      note(`${policy}: submitting ${planned.name} #${planned.run} failed: ${job.submitError}`);
    }
  });
  const allSubmitted = Promise.all(submissions);
  let submitted = false;
  void allSubmitted.then(() => (submitted = true));
  const deadlineMs = epochMs + plan.deadlineMs;
  let lastNoteMs = Date.now();
  for (;;) {
    await Promise.all(
      [...active].map(async (job) => {
        // A report the resource manager is slow to give is read again at the next poll.
        const r = await client.status(job.appId).catch(() => undefined);
        if (!r) return;
        const now = Date.now();
        for (const c of r.containers) if (!job.firstSeenMs.has(c.containerId)) job.firstSeenMs.set(c.containerId, now);
        if (TERMINAL_STATES.includes(r.state)) {
          job.report = r;
          active.delete(job);
        }
      }),
    );
    if (submitted && active.size === 0) break;
    if (Date.now() > deadlineMs) {
      note(`${policy}: deadline passed with ${active.size} job(s) running; killing them`);
      for (const job of active) {
        await client.kill(job.appId).catch(() => undefined);
        for (let i = 0; i < 50 && !job.report; i++) {
          const r = await client.status(job.appId).catch(() => undefined);
          if (r && TERMINAL_STATES.includes(r.state)) job.report = r;
          else await sleep(200);
        }
      }
      active.clear();
      await allSubmitted;
      break;
    }
    if (Date.now() - lastNoteMs >= 30_000) {
      lastNoteMs = Date.now();
      const ended = jobs.filter((j) => j.report).length;
      note(`${policy}: ${Math.round((Date.now() - epochMs) / 1000)}s: ${ended} of ${plan.jobs.length} jobs ended`);
    }
    await sleep(pollMs);
  }
  return { jobs, pollMs };
}

function testbedJob(j: FollowedJob, epochMs: number): TestbedJob {
  const r = j.report;
  const ended = r !== undefined && r.finishMs > 0;
  return {
    name: j.planned.name,
    run: j.planned.run,
    appId: j.appId,
    plannedSubmitMs: j.planned.submitOffsetMs,
    submitMs: r ? r.submitMs - epochMs : NaN,
    finishMs: ended ? r.finishMs - epochMs : 0,
    state: r?.state ?? (j.submitError ? "NOT_SUBMITTED" : "UNKNOWN"),
    durationMs: ended ? r.finishMs - r.submitMs : NaN,
    jobType: r?.jobType ?? "",
    classes: r?.classes ?? [],
    tasksRun: r?.containers.filter((c) => !c.isAm).length ?? 0,
    taskKills: (r?.taskContainers?.preempted ?? 0) + (r ? lostWithJobManager(r) : 0),
    tasksLostWithJobManager: r ? lostWithJobManager(r) : 0,
    amKills: r?.amContainers?.preempted ?? 0,
    ...(r?.quote
      ? {
          quote: {
            pNoKill: r.quote.pNoKill,
            expectedReruns: r.quote.expectedReruns,
            etaP10Ms: Number(r.quote.etaP10Ms),
            etaP50Ms: Number(r.quote.etaP50Ms),
            etaP90Ms: Number(r.quote.etaP90Ms),
          },
        }
      : {}),
  };
}

/** Task containers released because the primary killed the job manager of their attempt. */
function lostWithJobManager(r: JobReport): number {
  const killedAttempts = new Set(
    r.containers.filter((c) => c.isAm && c.cause === "PREEMPTED_BY_PRIMARY").map((c) => attemptOf(c.containerId)),
  );
  return r.containers.filter((c) => !c.isAm && c.cause === "RELEASED" && killedAttempts.has(attemptOf(c.containerId)))
    .length;
}

// ------------------------------------------------------------------------------------------------ measurements

/**
 * When each node manager's replay began: it emits `primary-monitor-started` once its primary monitor has started
 * replaying its trace. Kills then follow the trace's steps by up to a yield tick.
 */
function replayStarts(desc: ClusterDescriptor, events: readonly DaemonEvent[]): number[] {
  const started = eventsOfType(events, "primary-monitor-started");
  return desc.nodes.map((n) => {
    const at = started.find((e) => e.daemon === n.nodeId)?.atMs;
    if (at === undefined)
      throw new HarvestError(
        "INTERNAL",
        `${n.nodeId}'s events in ${desc.dir}/logs do not show when its replay started`,
      );
    return at;
  });
}

function measure(
  desc: ClusterDescriptor,
  plan: TestbedPlan,
  followed: { jobs: FollowedJob[]; pollMs: number },
  events: readonly DaemonEvent[],
  replayStartMs: readonly number[],
  daemons: TestbedDaemonSettings,
): TestbedMeasurements {
  const launch: number[] = [];
  const pickup: number[] = [];
  const jobManagerLaunch: number[] = [];
  const submitToFirstTask: number[] = [];
  const registeredAtMs = new Map<string, number>();
  for (const e of eventsOfType(events, "job-manager-registered"))
    if (!e.resync) registeredAtMs.set(`${e.appId}/${e.attempt}`, e.atMs);
  for (const job of followed.jobs) {
    const r = job.report;
    if (!r) continue;
    const mains = mainStarts(desc, job.appId);
    let firstTaskMs = Infinity;
    for (const c of r.containers) {
      if (c.isAm) {
        const registered = registeredAtMs.get(`${job.appId}/${attemptOf(c.containerId)}`);
        if (registered !== undefined && c.startedMs > 0) jobManagerLaunch.push(registered - c.startedMs);
        continue;
      }
      const main = mains.get(c.containerId);
      if (main !== undefined && c.startedMs > 0) launch.push(main - c.startedMs);
      const seen = job.firstSeenMs.get(c.containerId);
      if (seen === undefined) continue;
      const grantMs = seen - followed.pollMs / 2;
      firstTaskMs = Math.min(firstTaskMs, grantMs);
      // A container first seen already started was granted and started within one poll: its grant time is unknown.
      if (c.startedMs > 0 && c.startedMs >= seen - followed.pollMs) pickup.push(Math.max(0, c.startedMs - grantMs));
    }
    if (Number.isFinite(firstTaskMs)) submitToFirstTask.push(firstTaskMs - r.submitMs);
  }
  // Kills after the step that caused them: the step boundaries of each server's replay are known.
  const stepTestbedMs = (plan.stepSec * 1000) / plan.options.speedup;
  const killAfterStep: number[] = [];
  const heartbeatsMs: number[] = [];
  desc.nodes.forEach((n, i) => {
    for (const e of events) {
      if (e.daemon !== n.nodeId) continue;
      if (e.type === "node-registered") heartbeatsMs.push(e.heartbeatIntervalMs);
      if (e.type !== "container-preempted") continue;
      const sinceStart = e.atMs - replayStartMs[i]!;
      killAfterStep.push(sinceStart - Math.floor(sinceStart / stepTestbedMs) * stepTestbedMs);
    }
  });
  return {
    yieldTickMs: nmConfigNumber(desc, "yieldTickMs") ?? daemons.yieldTickMs,
    heartbeatIntervalMs: heartbeatsMs.length > 0 ? Math.max(...heartbeatsMs) : daemons.heartbeatIntervalMs,
    amHeartbeatMs: daemons.amHeartbeatMs,
    launch: stat(launch),
    pickup: stat(pickup),
    jobManagerLaunch: stat(jobManagerLaunch),
    submitToFirstTask: stat(submitToFirstTask),
    killAfterStep: stat(killAfterStep),
    launchSamplesMs: launch,
    jobManagerLaunchSamplesMs: jobManagerLaunch,
  };
}

/** The attempt number in a container id (`container_<epoch>_<app>_<attempt>_<seq>`). */
function attemptOf(containerId: string): number {
  return Number(containerId.split("_").at(-2));
}

/** A node-manager option as the first node manager's config file has it. */
function nmConfigNumber(desc: ClusterDescriptor, field: string): number | undefined {
  const config = desc.nodes[0]?.config;
  if (!config || !existsSync(config)) return undefined;
  const v = (JSON.parse(readFileSync(config, "utf8")) as Record<string, unknown>)[field];
  return typeof v === "number" ? v : undefined;
}

/** Container id -> when its task's program started, from the `result.json` every finished hold task writes. */
function mainStarts(desc: ClusterDescriptor, appId: string): Map<string, number> {
  const out = new Map<string, number>();
  // Each task's output directory on its own server: <node dir>/containers/<appId>/<containerId>/output/result.json.
  const files = desc.nodes.flatMap((n) => findFiles(join(n.dataDir, "containers", appId), "result.json", 2));
  for (const file of files) {
    try {
      const r = JSON.parse(readFileSync(file, "utf8")) as { mainStartMs?: number };
      const containerId = file.split("/").at(-3)!;
      if (typeof r.mainStartMs === "number") out.set(containerId, r.mainStartMs);
    } catch {
      // A task killed while writing leaves no whole result: nothing to measure.
    }
  }
  return out;
}

/** Files named `name` at most `depth` levels below `dir`. */
function findFiles(dir: string, name: string, depth: number): string[] {
  if (depth < 0 || !existsSync(dir)) return [];
  const out: string[] = [];
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, e.name);
    if (e.isDirectory()) out.push(...findFiles(path, name, depth - 1));
    else if (e.name === name) out.push(path);
  }
  return out;
}

/** Median, p90 (nearest rank) and count. */
export function stat(values: readonly number[]): Stat {
  if (values.length === 0) return { count: 0, medianMs: NaN, p90Ms: NaN };
  const sorted = [...values].sort((a, b) => a - b);
  const at = (q: number): number => sorted[Math.min(sorted.length - 1, Math.ceil(q * sorted.length) - 1)]!;
  return { count: sorted.length, medianMs: Math.round(at(0.5)), p90Ms: Math.round(at(0.9)) };
}

function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}

async function sleepUntil(atMs: number): Promise<void> {
  const ms = atMs - Date.now();
  if (ms > 0) await sleep(ms);
}
