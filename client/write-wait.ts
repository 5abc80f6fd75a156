/**
 * How a write waits out datanodes that cannot take its next block for now (every candidate busy with its primary
 * tenant, or full): tries spaced by a jittered backoff, 100 ms doubling to 2 s, until a deadline counted from the
 * first refusal; the wait starts over once the write makes progress again.
 */
import type { Rng } from "../common/rng.js";
import type { PlacementRefusal } from "../common/placement-refusal.js";
import { HarvestError } from "../common/errors.js";

/** The first step of the backoff. */
export const WRITE_WAIT_FIRST_MS = 100;
/** The longest step of the backoff. */
export const WRITE_WAIT_MAX_MS = 2_000;

/** What a write tells its `onWait` listener before each wait. */
export interface WriteWaitEvent {
  /** The file being written. */
  path: string;
  /** Why no datanode took the block, in words ("2 busy with their primary tenants"). */
  reason: string;
  /** The namenode's counts, when the refusal came from the namenode (absent: a datanode refused a pipeline). */
  refusal?: PlacementRefusal;
  /** How long this wait has lasted so far. */
  waitedMs: number;
  /** How long the write waits in all before it fails (writeWaitMs). */
  deadlineMs: number;
  /** The pause before the next try. */
  nextTryMs: number;
}

/**
 * The backoff and deadline of one wait. `next()` after each refusal gives the pause before the next try, or undefined
 * once the deadline has passed; `reset()` after progress starts the next wait afresh.
 */
export class WriteWait {
  private startedMs: number | undefined;
  private stepMs = WRITE_WAIT_FIRST_MS;

  constructor(
    /** How long a wait may last; 0: no waiting at all. */
    readonly deadlineMs: number,
    private readonly rng: Rng,
    private readonly now: () => number = Date.now,
  ) {}

  /**
   * The pause before the next try after a refusal: the current step scaled by a draw in [0.5, 1) (so writers refused
   * together do not come back together), never past the deadline; undefined when no time is left.
   */
  next(): number | undefined {
    const now = this.now();
    this.startedMs ??= now;
    const left = this.startedMs + this.deadlineMs - now;
    if (left <= 0) return undefined;
    const pause = Math.min(Math.round(this.stepMs * (0.5 + this.rng.next() / 2)), left);
    this.stepMs = Math.min(this.stepMs * 2, WRITE_WAIT_MAX_MS);
    return Math.max(pause, 1);
  }

  /** How long the current wait has lasted (0 when none is under way). */
  waitedMs(): number {
    return this.startedMs === undefined ? 0 : this.now() - this.startedMs;
  }

  /** Whether a wait is under way (a refusal since the last progress). */
  get waiting(): boolean {
    return this.startedMs !== undefined;
  }

  /** The write made progress: the next refusal starts a new wait with the full deadline and the first step. */
  reset(): void {
    this.startedMs = undefined;
    this.stepMs = WRITE_WAIT_FIRST_MS;
  }
}

/** Seconds for messages: "60 s", "1.5 s". */
export function seconds(ms: number): string {
  return `${Number((ms / 1000).toFixed(ms % 1000 === 0 ? 0 : 1))} s`;
}

/** The line a waiting write shows (the CLI prints it on stderr): why, and for how long it keeps trying. */
export function waitingMessage(reason: string, deadlineMs: number): string {
  return `waiting for a datanode: ${reason} (retrying for up to ${seconds(deadlineMs)})`;
}

/** The message of DFS_DATANODES_UNAVAILABLE: the file, how long the write waited, and why no datanode took the block. */
export function waitExpiredMessage(path: string, deadlineMs: number, reason: string): string {
  return (
    `no datanode could take a block of ${path} within ${seconds(deadlineMs)}: ${reason}; ` +
    "try again later, or wait longer (writeWaitMs; harvest fs put --wait <seconds>)"
  );
}

/** Throws INVALID_ARGUMENT naming `field` unless `ms` is a non-negative integer (a write wait's deadline). */
export function checkWriteWaitMs(ms: number, field: string): void {
  if (!(Number.isSafeInteger(ms) && ms >= 0))
    throw new HarvestError("INVALID_ARGUMENT", `${field} must be a non-negative integer of milliseconds, not ${ms}`, {
      details: { field },
    });
}
