/**
 * A model primary tenant whose load is set by its owner, for benchmarks and tests: a real primary's load cannot exist
 * on a development machine on demand, so the yield benchmark steps this model between levels and measures how fast the
 * node manager gives the cores back. Nothing is burned; the node manager's yield controller samples it as it would any
 * monitor, once per tick.
 */
import { HarvestError } from "./errors.js";
import type { PrimaryMonitor, PrimarySample } from "./primary-monitor.js";

/** When the model last changed level and when a sampler first saw the change. */
export interface StepRecord {
  /** The level set, in cores x1000. */
  cpuMilli: number;
  /** Wall time of the change (`Date.now()` scale, sub-millisecond precision). */
  setAtMs: number;
  /** Wall time of the first sample() that returned this level, or undefined until then. */
  seenAtMs: number | undefined;
}

/** Wall time in ms with sub-millisecond precision, comparable across threads of this process. */
function preciseNowMs(): number {
  return performance.timeOrigin + performance.now();
}

/**
 * The step model: `set(cpuMilli)` changes the primary's load at once; `sample()` returns it. Levels are clamped to
 * 0..capacityMilli, like the readings of the real monitors.
 */
export class StepPrimaryMonitor implements PrimaryMonitor {
  readonly source = "model:step";
  private readonly capacityMilli: number;
  private started = false;
  private current: StepRecord;

  constructor(options: { capacityMilli: number; initialMilli?: number }) {
    if (!(Number.isFinite(options.capacityMilli) && options.capacityMilli > 0)) {
      throw new HarvestError("CONFIG_INVALID", `capacityMilli must be > 0, got ${options.capacityMilli}`, {
        details: { field: "capacityMilli" },
      });
    }
    this.capacityMilli = options.capacityMilli;
    this.current = { cpuMilli: this.clamp(options.initialMilli ?? 0), setAtMs: preciseNowMs(), seenAtMs: undefined };
  }

  /** The latest step: its level, when it was set, and when it was first sampled. */
  get lastStep(): Readonly<StepRecord> {
    return this.current;
  }

  /** Steps the primary's load to `cpuMilli` (clamped to 0..capacity) now. */
  set(cpuMilli: number): void {
    if (!Number.isFinite(cpuMilli)) {
      throw new HarvestError("INVALID_ARGUMENT", `primary level must be a number, got ${cpuMilli}`, {
        details: { field: "cpuMilli" },
      });
    }
    this.current = { cpuMilli: this.clamp(cpuMilli), setAtMs: preciseNowMs(), seenAtMs: undefined };
  }

  start(): Promise<void> {
    this.started = true;
    return Promise.resolve();
  }

  sample(): PrimarySample {
    if (!this.started)
      throw new HarvestError("INTERNAL", `primary monitor ${this.source}: sample() called before start()`);
    this.current.seenAtMs ??= preciseNowMs();
    return { cpuMilli: this.current.cpuMilli, utilization: this.current.cpuMilli / this.capacityMilli };
  }

  stop(): Promise<void> {
    this.started = false;
    return Promise.resolve();
  }

  private clamp(cpuMilli: number): number {
    return Math.min(this.capacityMilli, Math.max(0, Math.round(cpuMilli)));
  }
}
