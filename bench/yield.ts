/**
 * Yield latency: how long after its primary tenant steps up does a node give the CPU back?
 *
 * Real parts: a ResourceManager and a NodeManager in this process on loopback; the bench acts as the application's job
 * manager (it registers on the ApplicationMasterService and gets real grants), so the secondary containers are granted
 * by the resource manager and started through the node manager's ContainerManager gRPC like any task. Each container
 * is a real `node` process burning a core. The one model is the primary tenant (StepPrimaryMonitor): a real primary's
 * load cannot be produced on demand here; the node manager samples the model exactly as it samples a real monitor.
 *
 * Each step: primary low, K containers burning (each gained >= 100 ms of CPU and is running now), a random wait of
 * up to one yield tick (so the step lands uniformly within the tick), then the primary steps to a level that leaves
 * room only for the job manager's container (T0). For every container:
 *   quiet from = the start of the final stretch in which every `window-ms` window gains < `quiet-cpu-ms`
 *   released   = the exit (process gone or a zombie) if it comes within one window of "quiet from", else "quiet from"
 *                (the container was held under the floor, i.e. throttled, for longer than a window before it exited)
 *   release latency = released - T0 (includes waiting for the next yield tick)
 * The defaults (under 5 ms of CPU per 50 ms, i.e. < 10 % of a core) sit above the floor a cgroup throttle leaves
 * (1 ms quota per 100 ms period, which the kernel overruns by up to a 4 ms tick) and below a burning container's
 * rate even on this oversubscribed 2-core machine; taking the final stretch rather than the first quiet window keeps
 * scheduling stalls of a still-burning container (seen up to 30 ms here) from counting as releases. An exit is seen
 * up to one sampling gap late; "quiet from" can precede the actual stop by up to quiet-cpu-ms / burning rate (~10 ms).
 * CPU time is the sum over the process's threads of /proc/<pid>/task/<tid>/schedstat (ns run time), sampled every 2 ms,
 * the same reading in both modes, so the resolution is about one sampling interval.
 *
 * Baseline, in this process: the same with cgroups disabled (`cgroups: "none"`), where a preempted container is only
 * signalled (SIGTERM, SIGKILL after the grace); with cgroups (v1 here) it is also throttled to the kernel's minimum
 * quota first. A task that obeys SIGTERM exits within milliseconds either way; `--task ignore-term` runs a task that
 * ignores SIGTERM (one that takes its time to shut down) to show what the throttle buys. "kill decision -> process
 * exit" shows the price: a throttled process runs, and so dies, only when its quota lets it, hundreds of ms after
 * SIGKILL here.
 */
import { chmod, mkdir, readFile } from "node:fs/promises";
import { cpus, loadavg } from "node:os";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { call } from "../common/grpc.js";
import { StepPrimaryMonitor } from "../common/step-monitor.js";
import type { AllocateResponseOutput } from "../proto/generated/harvest/v1/AllocateResponse.js";
import type { ContainerOutput } from "../proto/generated/harvest/v1/Container.js";
import type { BenchDefinition, BenchReport } from "./definition.js";
import { parseFlags } from "./flags.js";
import { primaryBurstReport } from "./primary-burst.js";
import { readProcessCpu, waitFor } from "./node-bench.js";
import { AM_VCORES_MILLI, RESERVE_FRACTION, startSingleNode, submitBenchJob } from "./single-node.js";
import type { FlagSpec, Flags } from "./flags.js";
import { fmt, preciseNowMs, quantile, ratio, summarize, summaryRow, table } from "./report.js";
import type { Summary } from "./report.js";

const FLAGS = {
  steps: { kind: "int", default: 50, min: 1, help: "primary steps per mode" },
  containers: { kind: "int", default: 3, min: 1, help: "secondary containers (1 vcore each) burning at each step" },
  task: {
    kind: "choice",
    default: "busy",
    choices: ["busy", "ignore-term"],
    help: "secondary program: a busy loop, or a busy loop that ignores SIGTERM",
  },
  mode: {
    kind: "choice",
    default: "both",
    choices: ["both", "cgroups", "none"],
    help: "cgroups (auto-detected), none (kill only), or both",
  },
  "tick-ms": { kind: "int", default: 250, min: 10, help: "node manager yield tick (yieldTickMs)" },
  "grace-ms": { kind: "int", default: 250, min: 0, help: "SIGTERM-to-SIGKILL grace (killGraceMs)" },
  "window-ms": { kind: "number", default: 50, min: 1, help: "release window length" },
  "quiet-cpu-ms": { kind: "number", default: 5, min: 0.01, help: "CPU gained per window below which it is released" },
  "burst-trials": {
    kind: "int",
    default: 20,
    min: 0,
    help: "primary's view: bursts per mode (alone, Harvest's containers, default-weight containers); 0 skips it",
  },
  "burst-window-ms": { kind: "int", default: 100, min: 10, help: "primary's view: the burst's first window" },
} as const satisfies Record<string, FlagSpec>;

type YieldFlags = Flags<typeof FLAGS>;

/** The p99 the design asks for (DESIGN.md: secondary work gets out of the way within a second). */
const TARGET_P99_MS = 1_000;
const SAMPLE_INTERVAL_MS = 2;
/** A busy container must have gained this much CPU (past node's start-up) before the primary steps. */
const MIN_BURN_CPU_MS = 100;
const TASK_VCORES_MILLI = 1_000;
const TASK_MEMORY_MB = 256;
/**
 * The task's first line writes the wall-clock time it runs at to HARVEST_BENCH_MARK: container launch time is that
 * minus the time the job manager (this bench) called startContainer.
 */
const MARK_START =
  "require('fs').writeFileSync(process.env.HARVEST_BENCH_MARK, String(performance.timeOrigin + performance.now()));";
const TASK_SOURCE: Record<string, string> = {
  busy: `${MARK_START} for (;;) {}`,
  // The handler never runs while the loop spins, and its presence stops SIGTERM from ending the process.
  "ignore-term": `${MARK_START} process.on('SIGTERM', () => {}); for (;;) {}`,
};

/** One container's CPU readings during a step. */
class CpuTrace {
  readonly timesMs: number[] = [];
  readonly cpuMs: number[] = [];
  exitedAtMs: number | undefined;
  preemptedAtMs: number | undefined;
  private lastCpuMs = 0;

  constructor(
    readonly containerId: string,
    readonly pid: number,
  ) {}

  /** Takes one reading; after the exit the CPU time stays at its last value. */
  sample(): void {
    const now = preciseNowMs();
    if (this.exitedAtMs === undefined) {
      const cpuNs = readProcessCpu(this.pid, true)?.cpuNs;
      if (cpuNs === undefined) this.exitedAtMs = now;
      // A helper thread that ends takes its time out of the sum; never let the total go back.
      else this.lastCpuMs = Math.max(this.lastCpuMs, cpuNs / 1e6);
    }
    this.timesMs.push(now);
    this.cpuMs.push(this.lastCpuMs);
  }

  get totalCpuMs(): number {
    return this.lastCpuMs;
  }

  /** CPU gained over the last `windowMs` of readings up to `atMs`, or undefined when the readings do not span it. */
  gainedBefore(atMs: number, windowMs: number): number | undefined {
    let end = -1;
    for (let i = this.timesMs.length - 1; i >= 0; i--) {
      if ((this.timesMs[i] ?? 0) <= atMs) {
        end = i;
        break;
      }
    }
    if (end < 0) return undefined;
    const endTime = this.timesMs[end] ?? 0;
    for (let i = end; i >= 0; i--) {
      if ((this.timesMs[i] ?? 0) <= endTime - windowMs) return (this.cpuMs[end] ?? 0) - (this.cpuMs[i] ?? 0);
    }
    return undefined;
  }

  /**
   * When the CPU was released after `t0Ms`: the start of the final stretch of readings in which every window of
   * `windowMs` gains less than `quietCpuMs` (the container never again burns at that rate), or the exit when it comes
   * within one window of that start; undefined while the readings end inside a busy window. A stall of a still-burning
   * container (CPU contention) is not a release: burning resumes after it, so it is not part of the final stretch.
   */
  releasedAt(t0Ms: number, windowMs: number, quietCpuMs: number): { atMs: number; how: "exit" | "quiet" } | undefined {
    const n = this.timesMs.length;
    let lastBusy = -1;
    let first = -1;
    let j = 0;
    for (let i = 0; i < n; i++) {
      const t = this.timesMs[i] ?? 0;
      if (t < t0Ms) continue;
      if (first < 0) first = i;
      if (j < i) j = i;
      while (j < n && (this.timesMs[j] ?? 0) < t + windowMs) j++;
      // Past the last full window: after an exit the counter is frozen, so the rest is quiet; otherwise undecided.
      if (j >= n) {
        if (this.exitedAtMs === undefined) return undefined;
        break;
      }
      if ((this.cpuMs[j] ?? 0) - (this.cpuMs[i] ?? 0) >= quietCpuMs) lastBusy = i;
    }
    if (first < 0) return undefined;
    const stretchStart = this.timesMs[Math.max(first, lastBusy + 1)];
    // An exit within a window of the stretch's start is the release itself (the stretch start is an estimate that
    // runs early by up to quietCpuMs / burning rate); a longer stretch before the exit is a throttled container.
    if (this.exitedAtMs !== undefined && (stretchStart === undefined || this.exitedAtMs - stretchStart <= windowMs)) {
      return { atMs: this.exitedAtMs, how: "exit" };
    }
    return stretchStart === undefined ? undefined : { atMs: stretchStart, how: "quiet" };
  }
}

/** Latencies of one container at one step, in ms after T0. */
interface ContainerOutcome {
  releaseMs: number;
  how: "exit" | "quiet";
  /** T0 to the yield controller's kill decision (the wait for its tick). */
  decideMs: number;
  /** Kill decision to release. */
  killToReleaseMs: number;
  /** T0 to the process's exit. */
  exitMs: number;
  /** Kill decision to the process's exit. */
  killToExitMs: number;
  burningAtT0: boolean;
}

/** What one mode measured. */
interface ModeResult {
  mode: string;
  /** Whether preempted containers were throttled (a cgroup interface was in use) or only signalled. */
  throttled: boolean;
  cgroupDetail: string;
  outcomes: ContainerOutcome[];
  /** Per container: startContainer called -> the task's first line ran, ms. */
  launchMs: number[];
  timeouts: number;
  wallMs: number;
}

/** Runs every step in one mode against a fresh resource manager and node manager. */
async function runMode(cgroups: "auto" | "none", f: YieldFlags, progress: (line: string) => void): Promise<ModeResult> {
  const started = Date.now();
  const k = f.containers;
  // Room for K tasks and the job manager's container under the reserve, rounded up to whole cores.
  const capacityMilli = Math.ceil((k * TASK_VCORES_MILLI + AM_VCORES_MILLI) / (1 - RESERVE_FRACTION) / 1000) * 1000;
  const reserveMilli = Math.ceil(capacityMilli * RESERVE_FRACTION);
  // High leaves exactly the job manager's container: every task must go, the job manager stays.
  const highMilli = capacityMilli - reserveMilli - AM_VCORES_MILLI;
  const launchMs: number[] = [];
  const monitor = new StepPrimaryMonitor({ capacityMilli });
  const traces = new Map<string, CpuTrace>();
  const cluster = await startSingleNode({
    name: "yield",
    nm: {
      nodeId: `bench-yield-${cgroups}`,
      capacity: { vcoresMilli: capacityMilli, memoryMb: 8192 },
      cgroups,
      yieldTickMs: f["tick-ms"],
      killGraceMs: f["grace-ms"],
    },
    amMemoryMb: 256,
    monitor,
    logName: `nm:bench-${cgroups}`,
    onPreempt: (e) => {
      const trace = traces.get(e.containerId);
      if (trace) trace.preemptedAtMs = preciseNowMs();
    },
  });
  const { cgroupDetail, cgroupMode } = cluster;
  try {
    // Where tasks (which never run as root) leave their start marks.
    const marks = join(cluster.dir, "marks");
    await mkdir(marks, { mode: 0o1777 });
    await chmod(marks, 0o1777);
    progress(`${cgroups === "none" ? "kill only (cgroups none)" : "cgroups"}: ${cgroupDetail}`);

    const appId = await submitBenchJob(
      cluster,
      "bench-yield",
      {
        parallelism: k,
        command: ["node", "-e", TASK_SOURCE[f.task] ?? ""],
        resources: { vcoresMilli: TASK_VCORES_MILLI, memoryMb: TASK_MEMORY_MB },
      },
      false,
    );
    const am = cluster.amRm;
    const attempt = 1;

    const allocate = (count: number): Promise<AllocateResponseOutput> =>
      call(am, am.allocate, {
        appId,
        attempt,
        asks: [{ priority: 0, resource: { vcoresMilli: TASK_VCORES_MILLI, memoryMb: TASK_MEMORY_MB }, count }],
        releases: [],
        progress: null,
      });

    const outcomes: ContainerOutcome[] = [];
    let timeouts = 0;
    const sampler = setInterval(() => {
      for (const t of traces.values()) t.sample();
    }, SAMPLE_INTERVAL_MS);
    try {
      for (let step = 0; step < f.steps; step++) {
        monitor.set(0);
        traces.clear();
        // Ask until K containers are granted (they come on the node's heartbeats).
        const granted: ContainerOutput[] = [];
        const grantDeadline = Date.now() + 10_000;
        while (granted.length < k) {
          const res = await allocate(k - granted.length);
          granted.push(...res.allocated);
          if (granted.length >= k) break;
          if (Date.now() > grantDeadline)
            throw new Error(`step ${step}: only ${granted.length} of ${k} containers granted within 10 s`);
          await sleep(20);
        }
        const nmc = cluster.nmClient;
        const calledMs = preciseNowMs();
        const launched = await Promise.all(
          granted.map((c) =>
            call(nmc, nmc.startContainer, {
              container: c,
              appId,
              argv: ["node", "-e", TASK_SOURCE[f.task] ?? ""],
              env: { HARVEST_BENCH_MARK: join(marks, c.id) },
              isAm: false,
            }),
          ),
        );
        granted.forEach((c, i) => traces.set(c.id, new CpuTrace(c.id, launched[i]?.pid ?? -1)));
        const window = f["window-ms"];
        await waitFor(
          `step ${step}: containers burning`,
          10_000,
          () =>
            [...traces.values()].every(
              (t) =>
                t.totalCpuMs >= MIN_BURN_CPU_MS && (t.gainedBefore(preciseNowMs(), window) ?? 0) >= f["quiet-cpu-ms"],
            ),
          5,
        );
        for (const c of granted) {
          const mark = Number(await readFile(join(marks, c.id), "utf8").catch(() => "NaN"));
          if (Number.isFinite(mark)) launchMs.push(mark - calledMs);
        }
        // Land the step anywhere within the yield tick, as a real primary would.
        await sleep(Math.random() * f["tick-ms"]);
        const t0 = preciseNowMs();
        monitor.set(highMilli);
        const burning = new Map(
          [...traces.values()].map((t) => [t.containerId, (t.gainedBefore(t0, window) ?? 0) >= f["quiet-cpu-ms"]]),
        );
        const settle = Date.now() + 5_000 + f["grace-ms"];
        // Keep sampling one window past the last exit so that every release is decided from readings.
        await waitFor(
          `step ${step}: containers released`,
          60_000,
          () => {
            const all = [...traces.values()];
            if (Date.now() > settle) return true;
            return all.every((t) => t.exitedAtMs !== undefined && preciseNowMs() - t.exitedAtMs > window);
          },
          5,
        );
        for (const t of traces.values()) {
          const released = t.releasedAt(t0, window, f["quiet-cpu-ms"]);
          if (!released || t.exitedAtMs === undefined) {
            timeouts++;
            continue;
          }
          const decidedAt = t.preemptedAtMs ?? Number.NaN;
          outcomes.push({
            releaseMs: released.atMs - t0,
            how: released.how,
            decideMs: decidedAt - t0,
            killToReleaseMs: released.atMs - decidedAt,
            exitMs: t.exitedAtMs - t0,
            killToExitMs: t.exitedAtMs - decidedAt,
            burningAtT0: burning.get(t.containerId) ?? false,
          });
        }
        // The resource manager must have taken the containers back before the next step asks again.
        monitor.set(0);
        let completed = 0;
        await waitFor(
          `step ${step}: completions reported to the job manager`,
          10_000,
          async () => {
            completed += (await allocate(0)).completed.length;
            return completed >= k;
          },
          20,
        );
        if ((step + 1) % 10 === 0)
          progress(`${cgroups === "none" ? "kill only" : "cgroups"}: ${step + 1}/${f.steps} steps`);
      }
    } finally {
      clearInterval(sampler);
    }
    const throttled = cgroupMode === "v1" || cgroupMode === "v2";
    const mode = throttled
      ? `throttle + kill (cgroup ${cgroupMode})`
      : cgroups === "none"
        ? "kill only (cgroups none)"
        : "kill only (no usable cgroups)";
    return { mode, throttled, cgroupDetail, outcomes, launchMs, timeouts, wallMs: Date.now() - started };
  } finally {
    await cluster.close();
  }
}

function summaries(r: ModeResult): {
  release: Summary;
  decide: Summary;
  killToRelease: Summary;
  exit: Summary;
  killToExit: Summary;
} {
  return {
    killToExit: summarize(r.outcomes.map((o) => o.killToExitMs)),
    release: summarize(r.outcomes.map((o) => o.releaseMs)),
    decide: summarize(r.outcomes.map((o) => o.decideMs)),
    killToRelease: summarize(r.outcomes.map((o) => o.killToReleaseMs)),
    exit: summarize(r.outcomes.map((o) => o.exitMs)),
  };
}

async function run(argv: readonly string[], progress: (line: string) => void): Promise<BenchReport> {
  const f = parseFlags(argv, FLAGS);
  if (process.platform !== "linux") throw new Error("the yield benchmark reads /proc and needs Linux");
  const load = loadavg();
  const results: ModeResult[] = [];
  if (f.mode !== "none") results.push(await runMode("auto", f, progress));
  if (f.mode !== "cgroups") results.push(await runMode("none", f, progress));
  const burst =
    f["burst-trials"] > 0 ? await primaryBurstReport(f["burst-trials"], f["burst-window-ms"], progress) : undefined;
  const head = [
    `yield latency: primary step -> secondary CPU released`,
    `  ${f.steps} steps x ${f.containers} containers (1 vcore each, task ${f.task}) per mode; yield tick ${f["tick-ms"]} ms, kill grace ${f["grace-ms"]} ms`,
    `  released = process exit, or the start of its final stretch gaining < ${f["quiet-cpu-ms"]} ms CPU per ${f["window-ms"]} ms when that precedes the exit`,
    `  by more than a window (threads' schedstat, sampled every ${SAMPLE_INTERVAL_MS} ms); release latency counts from the primary's step (T0)`,
    `  primary tenant: StepPrimaryMonitor (a model; a real primary's load cannot be produced here)`,
    `  machine: ${cpus().length} cores, load average before the run ${load.map((x) => fmt(x, 2)).join(" ")}`,
    "",
  ];
  const rows: string[][] = [];
  const sums = results.map((r) => ({ r, s: summaries(r) }));
  for (const { r, s } of sums) {
    rows.push(summaryRow(r.mode, s.release));
    rows.push(summaryRow("  T0 -> kill decision (tick)", s.decide));
    rows.push(summaryRow("  kill decision -> release", s.killToRelease));
    rows.push(summaryRow("  T0 -> process exit", s.exit));
    rows.push(summaryRow("  kill decision -> process exit", s.killToExit));
  }
  const lines = [...head, ...table(["release latency (ms)", "n", "p50", "p99", "max", "mean"], rows)];
  const cg = sums.find((x) => x.r.throttled);
  const base = sums.find((x) => !x.r.throttled);
  if (cg && base) {
    lines.push("");
    lines.push(
      `ratio throttle+kill / kill-only baseline: p50 ${ratio(cg.s.release.p50, base.s.release.p50)}, p99 ${ratio(cg.s.release.p99, base.s.release.p99)}, max ${ratio(cg.s.release.max, base.s.release.max)}` +
        `; kill decision -> release p50 ${fmt(cg.s.killToRelease.p50)} vs ${fmt(base.s.killToRelease.p50)} ms, p99 ${fmt(cg.s.killToRelease.p99)} vs ${fmt(base.s.killToRelease.p99)} ms`,
    );
    lines.push(
      `  (T0 -> kill decision is the wait for the next yield tick, uniform over ${f["tick-ms"]} ms in both runs; the mechanisms differ only after it)`,
    );
  }
  if (f.mode === "both" && !cg)
    lines.push("", "no usable cgroups on this machine: both runs were kill only, so there is no throttle to compare");
  lines.push("");
  for (const { r, s } of sums) {
    const quiet = r.outcomes.filter((o) => o.how === "quiet").length;
    const notBurning = r.outcomes.filter((o) => !o.burningAtT0).length;
    lines.push(
      `${r.mode}: p99 ${fmt(s.release.p99)} ms vs target < ${TARGET_P99_MS} ms: ${s.release.p99 < TARGET_P99_MS && r.timeouts === 0 ? "met" : "NOT met"}` +
        `; released by exit ${r.outcomes.length - quiet}, held under the floor before exit ${quiet}; not burning at T0 ${notBurning}; timeouts ${r.timeouts}; ${fmt(r.wallMs / 1000)} s`,
    );
    lines.push(`  ${r.cgroupDetail}`);
  }
  // What the simulator's kill-cost model takes as container launch (killCost.launchMedianMs / launchP90Ms).
  const launches = Float64Array.from(results.flatMap((r) => r.launchMs)).sort();
  const launch = { count: launches.length, p50: quantile(launches, 0.5), p90: quantile(launches, 0.9) };
  lines.push(
    "",
    `container launch (startContainer called -> the task's first line runs), all modes: p50 ${fmt(launch.p50)} ms, ` +
      `p90 ${fmt(launch.p90)} ms over ${launch.count} containers (the simulator's killCost.launchMedianMs / launchP90Ms)`,
  );
  if (burst) lines.push("", ...burst.lines);
  return {
    lines,
    result: {
      ...(burst ? { primaryBurst: burst.result } : {}),
      flags: f,
      loadAverage: load,
      targetP99Ms: TARGET_P99_MS,
      launchMs: launch,
      modes: sums.map(({ r, s }) => ({
        mode: r.mode,
        cgroups: r.cgroupDetail,
        releaseMs: s.release,
        decideMs: s.decide,
        killToReleaseMs: s.killToRelease,
        exitMs: s.exit,
        killToExitMs: s.killToExit,
        releasedQuiet: r.outcomes.filter((o) => o.how === "quiet").length,
        notBurningAtT0: r.outcomes.filter((o) => !o.burningAtT0).length,
        timeouts: r.timeouts,
        wallMs: r.wallMs,
        targetMet: s.release.p99 < TARGET_P99_MS && r.timeouts === 0,
      })),
    },
  };
}

/** `yield`: primary step to secondary CPU released, with cgroup throttling versus kill only. */
export const yieldBench: BenchDefinition = {
  name: "yield",
  summary: "primary step -> secondary CPU released (real RM + NM + processes; primary is a step model)",
  flags: FLAGS,
  run,
};
