/**
 * Carries out the capping controller's CPU quotas on real containers. Two mechanisms behind one interface:
 *
 * - "cgroup": the container's CFS quota (CgroupController.setLimit), exact and free of timers; unthrottling writes
 *   the allocation back.
 * - "signal": without writable cgroups, a duty cycle of SIGSTOP/SIGCONT on the container's process group: in each
 *   dutyPeriodMs the container is stopped for (1 - limit/allocation) of the period and runs for the rest. One timer
 *   serves every throttled container. A container is always continued (SIGCONT) when it is unthrottled, forgotten, or
 *   the throttler closes, so nothing is left stopped. The duty cycle scales what the container would have used, so it
 *   holds the container to its limit only while it uses no more than its allocation (cgroups cap the usage itself).
 * - "none": limits are accepted and ignored (baseline runs, platforms without POSIX signals); kills still protect.
 *
 * Containers run in their own process group (ContainerProcess spawns them detached, so pgid = the container's pid):
 * the signal throttler signals -pid, and a pid that leads no group is signalled alone. ESRCH (already gone) is ignored.
 */
import { HarvestError, errorMessage } from "../common/errors.js";
import { invalidOption, stripUndefined } from "../common/options.js";
import type { CgroupController } from "./cgroups.js";

/** How a throttler enforces limits. */
export type ThrottleMode = "cgroup" | "signal" | "none";

/** Enforces per-container CPU quotas. */
export interface Throttler {
  readonly mode: ThrottleMode;
  /**
   * Sets a container's CPU quota; `limitMilli` undefined (or >= the allocation) means unthrottled, back to the
   * allocation. `pids` returns the container's process-group leaders (or all of its pids); the signal mode calls it
   * every duty period, so it stays right as processes come and go.
   */
  setLimit(
    containerId: string,
    limitMilli: number | undefined,
    allocationMilli: number,
    pids: () => readonly number[],
  ): void;
  /** Stops throttling a container that is going away (continuing it first in signal mode). */
  forget(containerId: string): void;
  /** Continues every throttled container and stops the timer; later setLimit calls are ignored. */
  close(): void;
}

/** Settings of a throttler. */
export interface ThrottlerOptions {
  /** The duty-cycle period of the signal mode (the kernel's CFS period is 100 ms too). @default 100 */
  dutyPeriodMs: number;
  /** "auto": cgroup when cgroups are usable (v1 or v2), else signal (none on Windows). @default "auto" */
  mode: "auto" | ThrottleMode;
}

/** Fills defaults and validates; throws CONFIG_INVALID naming the field. */
export function resolveThrottlerOptions(o: Partial<ThrottlerOptions> = {}): ThrottlerOptions {
  const r: ThrottlerOptions = { dutyPeriodMs: 100, mode: "auto", ...stripUndefined(o) };
  if (!(Number.isFinite(r.dutyPeriodMs) && r.dutyPeriodMs >= 10 && r.dutyPeriodMs <= 10_000))
    invalidOption("throttler", "dutyPeriodMs", "must be between 10 and 10000 (timers are not finer than a few ms)");
  if (!["auto", "cgroup", "signal", "none"].includes(r.mode))
    invalidOption("throttler", "mode", 'must be "auto", "cgroup", "signal" or "none"');
  return r;
}

/** Creates the throttler for this node: cgroup quotas when `cgroups` works, else the signal duty cycle. */
export function createThrottler(cgroups: CgroupController, opts: Partial<ThrottlerOptions> = {}): Throttler {
  const o = resolveThrottlerOptions(opts);
  let mode = o.mode;
  if (mode === "auto") mode = cgroups.mode !== "none" ? "cgroup" : process.platform === "win32" ? "none" : "signal";
  if (mode === "cgroup" && cgroups.mode === "none")
    throw new HarvestError("CONFIG_INVALID", `throttler option mode is "cgroup" but ${cgroups.reason}`, {
      details: { field: "mode" },
    });
  switch (mode) {
    case "cgroup":
      return new CgroupThrottler(cgroups);
    case "signal":
      return new SignalThrottler(o.dutyPeriodMs);
    case "none":
      return new NoThrottler();
  }
}

class NoThrottler implements Throttler {
  readonly mode = "none" as const;
  setLimit(): void {}
  forget(): void {}
  close(): void {}
}

class CgroupThrottler implements Throttler {
  readonly mode = "cgroup" as const;
  /** The quota last written per container, so an unchanged decision writes nothing. */
  private readonly written = new Map<string, number>();
  private closed = false;

  constructor(private readonly cgroups: CgroupController) {}

  setLimit(containerId: string, limitMilli: number | undefined, allocationMilli: number): void {
    if (this.closed) return;
    const target = limitMilli === undefined ? allocationMilli : Math.min(Math.max(0, limitMilli), allocationMilli);
    if (this.written.get(containerId) === target) return;
    try {
      this.cgroups.setLimit(containerId, target);
    } catch (err) {
      // The group is removed when its container exits; there is nothing left to limit.
      if ((err as NodeJS.ErrnoException).code === "ENOENT") {
        this.written.delete(containerId);
        return;
      }
      throw new HarvestError("INTERNAL", `could not set the CPU limit of ${containerId}: ${errorMessage(err)}`, {
        cause: err,
      });
    }
    this.written.set(containerId, target);
  }

  // The group goes with its container, and a container being killed is given its own quotas by ContainerProcess.kill,
  // so forgetting writes nothing.
  forget(containerId: string): void {
    this.written.delete(containerId);
  }

  close(): void {
    this.closed = true;
    this.written.clear();
  }
}

interface DutyEntry {
  /** Fraction of each period the container runs, in (0, 1). */
  runFraction: number;
  pids: () => readonly number[];
  /** Whether we stopped it (and owe it a SIGCONT). */
  stopped: boolean;
  /** When (performance.now() ms) it is continued in the current period. */
  continueAtMs: number;
}

/** The smallest run share per period, mirroring the kernel's 1 ms minimum CFS quota: nothing is stopped for good. */
const MIN_RUN_MS = 1;

class SignalThrottler implements Throttler {
  readonly mode = "signal" as const;
  private readonly entries = new Map<string, DutyEntry>();
  private timer: NodeJS.Timeout | undefined;
  private periodStartMs = 0;
  private closed = false;

  constructor(private readonly dutyPeriodMs: number) {}

  setLimit(
    containerId: string,
    limitMilli: number | undefined,
    allocationMilli: number,
    pids: () => readonly number[],
  ): void {
    if (this.closed) return;
    if (limitMilli === undefined || !(allocationMilli > 0) || limitMilli >= allocationMilli) {
      this.release(containerId, pids);
      return;
    }
    const minRun = MIN_RUN_MS / this.dutyPeriodMs;
    const runFraction = Math.max(minRun, Math.max(0, limitMilli) / allocationMilli);
    const entry = this.entries.get(containerId);
    if (entry) {
      // The new share applies from the next period; this period's SIGCONT stays as scheduled.
      entry.runFraction = runFraction;
      entry.pids = pids;
    } else {
      this.entries.set(containerId, { runFraction, pids, stopped: false, continueAtMs: 0 });
    }
    if (!this.timer) {
      // Start a period now: the first firing sees a period boundary and stops the container at once.
      this.periodStartMs = performance.now() - this.dutyPeriodMs;
      this.onTimer();
    }
  }

  forget(containerId: string): void {
    const entry = this.entries.get(containerId);
    if (entry) this.release(containerId, entry.pids);
  }

  close(): void {
    this.closed = true;
    for (const [id, entry] of [...this.entries]) this.release(id, entry.pids);
    this.stopTimer();
  }

  /**
   * Unthrottles a container: continued unconditionally, since a SIGCONT to a running process is harmless. A failure
   * to signal (other than ESRCH) is ignored: a process we may not signal is one we could not have stopped either.
   */
  private release(containerId: string, pids: () => readonly number[]): void {
    this.entries.delete(containerId);
    try {
      signalAll(pids, "SIGCONT");
    } catch {
      // See above.
    }
    if (this.entries.size === 0) this.stopTimer();
  }

  private stopTimer(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
  }

  /**
   * The single timer: at a period's start it stops every throttled container; each is continued once its stop share
   * of the period has passed; then the next period starts. Each firing handles everything due and sleeps until the
   * next event, so one timer serves any number of containers.
   */
  private onTimer(): void {
    this.timer = undefined;
    if (this.closed || this.entries.size === 0) return;
    const now = performance.now();
    if (now - this.periodStartMs >= this.dutyPeriodMs) {
      // A late timer (a busy event loop) skips the missed periods rather than running them back to back.
      this.periodStartMs += Math.floor((now - this.periodStartMs) / this.dutyPeriodMs) * this.dutyPeriodMs;
      for (const [id, entry] of [...this.entries]) {
        entry.continueAtMs = this.periodStartMs + (1 - entry.runFraction) * this.dutyPeriodMs;
        if (now >= entry.continueAtMs) {
          if (entry.stopped) this.signalEntry(id, entry, "SIGCONT");
        } else if (!entry.stopped) {
          this.signalEntry(id, entry, "SIGSTOP");
        }
      }
    } else {
      for (const [id, entry] of [...this.entries])
        if (entry.stopped && now >= entry.continueAtMs) this.signalEntry(id, entry, "SIGCONT");
    }
    let nextMs = this.periodStartMs + this.dutyPeriodMs;
    for (const entry of this.entries.values()) if (entry.stopped) nextMs = Math.min(nextMs, entry.continueAtMs);
    this.timer = setTimeout(() => this.onTimer(), Math.max(0, nextMs - performance.now()));
    this.timer.unref();
  }

  /**
   * Stops or continues a container and records which. A failure other than ESRCH (which signalAll ignores) means we
   * may not signal it: it is dropped from throttling after a last attempt to continue it.
   */
  private signalEntry(id: string, entry: DutyEntry, sig: "SIGSTOP" | "SIGCONT"): void {
    try {
      signalAll(entry.pids, sig);
      entry.stopped = sig === "SIGSTOP";
    } catch {
      this.entries.delete(id);
      try {
        signalAll(entry.pids, "SIGCONT");
      } catch {
        // Nothing more can be done for a process we may not signal.
      }
    }
  }
}

/** Signals each pid's process group, or the pid alone when it leads none; ESRCH (gone) is ignored. */
function signalAll(pids: () => readonly number[], sig: NodeJS.Signals): void {
  for (const pid of pids()) {
    if (!(pid > 0)) continue;
    try {
      process.kill(-pid, sig);
      continue;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== "ESRCH") throw err;
    }
    try {
      process.kill(pid, sig);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== "ESRCH") throw err;
    }
  }
}
