/**
 * The primary-tenant monitor: how much of this node the primary tenant is using right now. One interface, three
 * sources (DESIGN.md principle 5):
 * - `proc`: real. The machine's busy CPU from /proc/stat minus the CPU of this node's own containers.
 * - `trace:<file>`: a replay of a utilization trace as a virtual load (nothing burns; the number is reported).
 * - `burn:<file>`: a replay of a trace as real load: a helper process burns the trace's share of the machine's cores
 *   and the node measures it through `proc`, exactly as it would a real primary.
 */
import type { ChildProcess } from "node:child_process";
import { fork } from "node:child_process";
import { existsSync } from "node:fs";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import type { Clock } from "./clock.js";
import { HarvestError, errorMessage } from "./errors.js";
import { Logger } from "./log.js";
import { distEntry, packageRoot } from "./paths.js";
import type { UtilizationSeries } from "./trace-io.js";
import { describeTraceWarnings, hasTraceWarnings, readTraceFile, traceWarningFields, valueAt } from "./trace-io.js";
import type { BurnHelperReport, BurnStartMessage } from "./burn-helper.js";
import type { MemInfo, ProcStatTotals } from "./proc-stats.js";
import { readMemInfo, readProcStatTotals } from "./proc-stats.js";

/** One reading of the primary tenant's load. */
export interface PrimarySample {
  /** Cores used by the primary, x1000, on the node's advertised capacity (0..capacityMilli). */
  cpuMilli: number;
  /** cpuMilli as a fraction of the node's capacity (0..1). */
  utilization: number;
  /**
   * Memory the primary uses, MB, on the node's advertised memory capacity (as cpuMilli is on its cores). Measured by
   * the `proc` monitor; traces carry CPU only, so their samples have none (the yield controller then counts 0).
   */
  memoryMb?: number;
}

/** A source of primary-tenant load readings. `sample()` is only valid between `start()` and `stop()`. */
export interface PrimaryMonitor {
  /** What the readings come from, e.g. `proc` or `trace:/path/to/file.csv`. */
  readonly source: string;
  /** Prepares the source (takes the first counters, loads the trace, starts the burn helper). */
  start(): Promise<void>;
  /** The primary's load now (for `proc`: on average since the previous sample, or since start()). */
  sample(): PrimarySample;
  /** Releases the source; idempotent. */
  stop(): Promise<void>;
}

/** Options of the `proc` monitor. */
export interface ProcPrimaryMonitorOptions {
  /** The node's advertised CPU capacity, in cores x1000; may exceed the machine's cores. */
  capacityMilli: number;
  /** The cumulative CPU time (ms) of all of this node's containers, including ones that have exited. */
  containerCpuMs: () => number;
  /**
   * Where the machine's CPU counters come from.
   * @default readProcStatTotals (/proc/stat)
   */
  readTotals?: () => ProcStatTotals;
  /** The node's advertised memory, MB: the primary's memory is measured when it is given. */
  capacityMemoryMb?: number;
  /** Bytes this node's containers use now (their cgroup), which are not the primary's. @default 0 */
  containerMemoryBytes?: () => number;
  /** @default readMemInfo (/proc/meminfo) */
  readMemInfo?: () => MemInfo;
}

function checkCapacity(capacityMilli: number): void {
  if (!(Number.isFinite(capacityMilli) && capacityMilli > 0)) {
    throw new HarvestError("CONFIG_INVALID", `capacityMilli must be > 0, got ${capacityMilli}`, {
      details: { field: "capacityMilli" },
    });
  }
}

function notStarted(source: string): HarvestError {
  return new HarvestError("INTERNAL", `primary monitor ${source}: sample() called before start()`);
}

function withMemory(memoryMb: number | undefined): { memoryMb?: number } {
  return memoryMb === undefined ? {} : { memoryMb };
}

function toSample(fraction: number, capacityMilli: number): PrimarySample {
  const cpuMilli = Math.round(Math.min(1, Math.max(0, fraction)) * capacityMilli);
  return { cpuMilli, utilization: cpuMilli / capacityMilli };
}

/**
 * The real primary monitor. The primary's share is the machine's busy fraction minus the fraction used by this node's
 * containers, scaled to the node's advertised capacity: a node claiming 8 vcores on a 2-core machine reports a primary
 * that keeps one core busy as 4000 milli. Everything else on the machine (the daemons themselves included) counts as
 * primary, which errs on the side of the primary winning.
 */
export class ProcPrimaryMonitor implements PrimaryMonitor {
  readonly source = "proc";
  private readonly capacityMilli: number;
  private readonly containerCpuMs: () => number;
  private readonly readTotals: () => ProcStatTotals;
  private readonly capacityMemoryMb: number | undefined;
  private readonly containerMemoryBytes: () => number;
  private readonly readMem: () => MemInfo;
  private previous: { totals: ProcStatTotals; containerMs: number } | undefined;
  private last: PrimarySample = { cpuMilli: 0, utilization: 0 };

  constructor(options: ProcPrimaryMonitorOptions) {
    checkCapacity(options.capacityMilli);
    this.capacityMilli = options.capacityMilli;
    this.containerCpuMs = options.containerCpuMs;
    this.readTotals = options.readTotals ?? readProcStatTotals;
    this.capacityMemoryMb = options.capacityMemoryMb;
    this.containerMemoryBytes = options.containerMemoryBytes ?? (() => 0);
    this.readMem = options.readMemInfo ?? readMemInfo;
  }

  /**
   * The primary's memory: the machine's used memory (total minus available) less this node's containers', as a share
   * of the machine, on the node's advertised memory. Everything else on the machine counts as the primary's.
   */
  private memoryMb(): number | undefined {
    if (this.capacityMemoryMb === undefined) return undefined;
    try {
      const m = this.readMem();
      const used = Math.max(0, m.totalBytes - m.availableBytes - this.containerMemoryBytes());
      return Math.round((Math.min(1, used / m.totalBytes) || 0) * this.capacityMemoryMb);
    } catch {
      return this.last.memoryMb;
    }
  }

  start(): Promise<void> {
    this.previous = { totals: this.readTotals(), containerMs: this.containerCpuMs() };
    this.last = { cpuMilli: 0, utilization: 0 };
    return Promise.resolve();
  }

  sample(): PrimarySample {
    if (!this.previous) throw notStarted(this.source);
    const totals = this.readTotals();
    const containerMs = this.containerCpuMs();
    const totalMs = totals.totalMs - this.previous.totals.totalMs;
    // The counters move in clock ticks (10 ms); with no tick elapsed the previous reading still stands.
    if (totalMs <= 0) return { ...this.last, ...withMemory(this.memoryMb()) };
    const busyMs = Math.max(0, totals.busyMs - this.previous.totals.busyMs);
    // A container total that goes down (a container's time forgotten by the caller) must not inflate the primary.
    const containersMs = Math.max(0, containerMs - this.previous.containerMs);
    this.previous = { totals, containerMs };
    this.last = { ...toSample((busyMs - containersMs) / totalMs, this.capacityMilli), ...withMemory(this.memoryMb()) };
    return this.last;
  }

  stop(): Promise<void> {
    this.previous = undefined;
    return Promise.resolve();
  }
}

/** Options of the replaying monitors. */
export interface TraceReplayOptions {
  /** The series, or the path of a trace file read (format auto-detected) on start(). */
  trace: UtilizationSeries | string;
  /** The node's advertised CPU capacity, in cores x1000. */
  capacityMilli: number;
  /** Trace time per wall time: at 600 a 5-minute step lasts 0.5 s. */
  speed: number;
  /**
   * Where in the trace the replay begins, in trace ms after its first sample, so that servers replaying one file are
   * not in lockstep.
   * @default 0
   */
  offsetMs?: number;
  /**
   * Where a trace file's normalization warnings go (once per file read: clamped values, merged timestamps, gaps,
   * skipped lines).
   * @default a `primary-monitor` logger on stderr (which the daemons redirect to their log file)
   */
  log?: Logger;
}

function checkReplay(options: TraceReplayOptions): void {
  checkCapacity(options.capacityMilli);
  if (!(Number.isFinite(options.speed) && options.speed > 0)) {
    throw new HarvestError("CONFIG_INVALID", `replay speed must be > 0, got ${options.speed}`, {
      details: { field: "speed" },
    });
  }
  if (options.offsetMs !== undefined && !Number.isFinite(options.offsetMs)) {
    throw new HarvestError("CONFIG_INVALID", `replay offsetMs must be a number, got ${options.offsetMs}`, {
      details: { field: "offsetMs" },
    });
  }
}

function traceSource(kind: string, trace: UtilizationSeries | string): string {
  return `${kind}:${typeof trace === "string" ? trace : trace.name}`;
}

/**
 * The series to replay: a file goes through the shared normalization of common/trace-io.ts (clamping, merged
 * timestamps, bridged gaps, skipped lines), and what it changed is logged once, as one warning with the counts.
 */
async function loadTrace(trace: UtilizationSeries | string, log: Logger | undefined): Promise<UtilizationSeries> {
  if (typeof trace !== "string") return trace;
  const { series, warnings } = await readTraceFile(trace);
  if (hasTraceWarnings(warnings)) {
    (log ?? new Logger("primary-monitor")).warn(`trace ${trace} normalized: ${describeTraceWarnings(warnings)}`, {
      file: trace,
      ...traceWarningFields(warnings),
    });
  }
  return series;
}

/**
 * A replayed, virtual primary: its load is the trace's CPU % of the node's capacity at trace time
 * `offsetMs + (clock.nowMs() - startedAtMs) x speed`, wrapping around at the trace's end. Nothing is burned.
 */
export class TracePrimaryMonitor implements PrimaryMonitor {
  readonly source: string;
  private readonly options: TraceReplayOptions;
  private readonly clock: Clock;
  private series: UtilizationSeries | undefined;
  private startedAtMs = 0;

  constructor(options: TraceReplayOptions & { clock: Clock }) {
    checkReplay(options);
    this.options = options;
    this.clock = options.clock;
    this.source = traceSource("trace", options.trace);
  }

  async start(): Promise<void> {
    this.series ??= await loadTrace(this.options.trace, this.options.log);
    this.startedAtMs = this.clock.nowMs();
  }

  /** Where the replay is now, in trace ms after the trace's first sample (before wrapping). */
  traceOffsetMs(): number {
    return (this.options.offsetMs ?? 0) + (this.clock.nowMs() - this.startedAtMs) * this.options.speed;
  }

  sample(): PrimarySample {
    if (!this.series) throw notStarted(this.source);
    return toSample(valueAt(this.series, this.traceOffsetMs()) / 100, this.options.capacityMilli);
  }

  async stop(): Promise<void> {
    // Nothing to release; the loaded series is kept so that a restart replays without re-reading the file.
  }
}

/** Options of the burning monitor. */
export interface BurnPrimaryMonitorOptions extends TraceReplayOptions {
  /** The cumulative CPU time (ms) of this node's containers, as for the `proc` monitor. */
  containerCpuMs: () => number;
}

/** How long start() waits for the helper to report that it is burning. */
const HELPER_READY_TIMEOUT_MS = 15_000;
/** How long stop() waits after SIGTERM before SIGKILL. */
const HELPER_STOP_GRACE_MS = 2_000;

/**
 * The command that runs the burn helper: the compiled dist/common/burn-helper.js, or, when this module itself runs
 * from sources (vitest, tsx), the TypeScript source through tsx's loader so that it is never stale.
 */
export function burnHelperCommand(): { entry: string; execArgv: string[] } {
  const dist = distEntry("common/burn-helper.js");
  const fromSources = import.meta.url.endsWith(".ts");
  const tsxLoader = join(packageRoot(), "node_modules", "tsx", "dist", "loader.mjs");
  const source = join(packageRoot(), "common", "burn-helper.ts");
  if ((fromSources || !existsSync(dist)) && existsSync(tsxLoader) && existsSync(source)) {
    return {
      entry: source,
      execArgv: ["--import", pathToFileURL(tsxLoader).href],
    };
  }
  if (!existsSync(dist)) {
    throw new HarvestError("INTERNAL", `burn helper not built: ${dist} is missing (run npm run build)`, {
      details: { file: dist },
    });
  }
  return { entry: dist, execArgv: [] };
}

/**
 * A replayed primary made real: start() spawns the burn helper, which burns cpuPct/100 of the machine's cores
 * following the trace on the wall clock (the replay ignores any injected clock), and sample() measures the machine
 * like the `proc` monitor does, so the burn shows up exactly as a real primary would, on the node's capacity scale.
 */
export class BurnPrimaryMonitor implements PrimaryMonitor {
  readonly source: string;
  private readonly options: BurnPrimaryMonitorOptions;
  private readonly proc: ProcPrimaryMonitor;
  private helper: ChildProcess | undefined;
  private exited: Promise<void> | undefined;

  constructor(options: BurnPrimaryMonitorOptions) {
    checkReplay(options);
    this.options = options;
    this.source = traceSource("burn", options.trace);
    this.proc = new ProcPrimaryMonitor({
      capacityMilli: options.capacityMilli,
      containerCpuMs: options.containerCpuMs,
    });
  }

  /** The helper's pid while it runs. */
  helperPid(): number | undefined {
    return this.helper?.pid;
  }

  async start(): Promise<void> {
    if (this.helper) return;
    const series = await loadTrace(this.options.trace, this.options.log);
    const { entry, execArgv } = burnHelperCommand();
    const child = fork(entry, [], {
      execArgv,
      stdio: ["ignore", "ignore", "inherit", "ipc"],
    });
    this.helper = child;
    this.exited = new Promise<void>((resolve) => {
      child.once("exit", () => resolve());
      // A failed spawn emits 'error' and may never emit 'exit'.
      child.once("error", () => resolve());
    });
    try {
      await this.awaitReady(child, {
        type: "start",
        series,
        speed: this.options.speed,
        offsetMs: this.options.offsetMs ?? 0,
      });
    } catch (err) {
      await this.stop();
      throw err;
    }
    await this.proc.start();
  }

  private awaitReady(child: ChildProcess, start: BurnStartMessage): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      const fail = (message: string, cause?: unknown): void => {
        cleanup();
        reject(new HarvestError("INTERNAL", `burn helper (${this.source}): ${message}`, { cause }));
      };
      const onMessage = (msg: BurnHelperReport): void => {
        if (msg.type === "ready") {
          cleanup();
          resolve();
        } else fail(msg.message);
      };
      const onExit = (code: number | null, signal: string | null): void =>
        fail(`exited before it was ready (code ${code}, signal ${signal})`);
      const onError = (err: Error): void => fail(errorMessage(err), err);
      const timer = setTimeout(() => fail(`not ready after ${HELPER_READY_TIMEOUT_MS} ms`), HELPER_READY_TIMEOUT_MS);
      const cleanup = (): void => {
        clearTimeout(timer);
        child.off("message", onMessage);
        child.off("exit", onExit);
        child.off("error", onError);
      };
      child.on("message", onMessage);
      child.once("exit", onExit);
      child.once("error", onError);
      child.send(start, (err) => {
        if (err) fail(`cannot send the trace: ${errorMessage(err)}`, err);
      });
    });
  }

  sample(): PrimarySample {
    return this.proc.sample();
  }

  async stop(): Promise<void> {
    await this.proc.stop();
    const child = this.helper;
    const exited = this.exited;
    this.helper = undefined;
    this.exited = undefined;
    if (!child || !exited) return;
    if (child.exitCode === null && child.signalCode === null) {
      child.kill("SIGTERM");
      const timer = setTimeout(() => child.kill("SIGKILL"), HELPER_STOP_GRACE_MS);
      await exited;
      clearTimeout(timer);
    }
    if (child.connected) child.disconnect();
  }
}

/** What createPrimaryMonitor needs besides the spec. */
export interface CreatePrimaryMonitorOptions {
  /** The node's advertised CPU capacity, in cores x1000. */
  capacityMilli: number;
  /** The clock the `trace` replay follows (the `burn` replay follows the wall clock). */
  clock: Clock;
  /** Replay speed for `trace` and `burn`. */
  speed: number;
  /**
   * Replay offset for `trace` and `burn`, in trace ms.
   * @default 0
   */
  offsetMs?: number;
  /** The cumulative CPU time (ms) of this node's containers (`proc` and `burn`). */
  containerCpuMs: () => number;
  /** The node's advertised memory, MB (`proc` measures the primary's memory on it). */
  capacityMemoryMb?: number;
  /** Bytes this node's containers use now (`proc`). */
  containerMemoryBytes?: () => number;
  /** Where `trace` and `burn` log what the trace file's normalization changed. @default stderr */
  log?: Logger;
}

/**
 * Builds the monitor a spec names: `proc`, `trace:<file>` or `burn:<file>`. A malformed spec or a missing trace file
 * gives CONFIG_INVALID naming the spec; the file's contents are checked on start() (TRACE_MALFORMED).
 */
export function createPrimaryMonitor(spec: string, options: CreatePrimaryMonitorOptions): PrimaryMonitor {
  const invalid = (why: string): HarvestError =>
    new HarvestError("CONFIG_INVALID", `bad primary monitor spec ${JSON.stringify(spec)}: ${why}`, {
      details: { field: "primaryMonitor", spec },
    });
  if (spec === "proc") {
    return new ProcPrimaryMonitor({
      capacityMilli: options.capacityMilli,
      containerCpuMs: options.containerCpuMs,
      ...(options.capacityMemoryMb !== undefined ? { capacityMemoryMb: options.capacityMemoryMb } : {}),
      ...(options.containerMemoryBytes ? { containerMemoryBytes: options.containerMemoryBytes } : {}),
    });
  }
  const colon = spec.indexOf(":");
  const kind = colon < 0 ? spec : spec.slice(0, colon);
  if (colon < 0 || (kind !== "trace" && kind !== "burn")) {
    throw invalid("expected proc, trace:<file> or burn:<file>");
  }
  const file = spec.slice(colon + 1);
  if (file.trim() === "") throw invalid("no trace file after the colon");
  if (!existsSync(file)) throw invalid(`trace file ${file} does not exist`);
  const replay = {
    trace: file,
    capacityMilli: options.capacityMilli,
    speed: options.speed,
    offsetMs: options.offsetMs,
    ...(options.log ? { log: options.log } : {}),
  };
  return kind === "trace"
    ? new TracePrimaryMonitor({ ...replay, clock: options.clock })
    : new BurnPrimaryMonitor({
        ...replay,
        containerCpuMs: options.containerCpuMs,
      });
}
