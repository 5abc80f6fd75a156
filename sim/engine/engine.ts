/**
 * The simulator's discrete-event engine: a priority queue of timed events over a simulated clock. Deterministic: events
 * at the same time run in the order they were scheduled, and nothing reads the wall clock, so a seed fixes the run.
 * The shared policies take `engine.clock` as their `Clock`.
 */
import type { Clock } from "../../common/clock.js";

/** A scheduled event's handler; it may schedule more events. */
export type EventHandler = () => void;

/** The simulated clock: `nowMs` is the time of the event being processed (ms since the simulation's epoch). */
export class SimClock implements Clock {
  private now = 0;
  nowMs(): number {
    return this.now;
  }
  /** Moves the clock; only the engine calls it, and never backwards. */
  advanceTo(ms: number): void {
    if (ms < this.now) throw new Error(`simulated time cannot go back from ${this.now} to ${ms}`);
    this.now = ms;
  }
}

/** Progress of a run, for a progress line. */
export interface EngineProgress {
  nowMs: number;
  untilMs: number;
  events: number;
}

/**
 * A binary min-heap of events ordered by (time, sequence). Times and sequences live in parallel typed arrays and
 * handlers in a plain array, so millions of pending events cost little more than their handlers.
 */
export class SimEngine {
  readonly clock = new SimClock();
  private times = new Float64Array(1024);
  private seqs = new Float64Array(1024);
  private handlers: (EventHandler | undefined)[] = new Array<EventHandler | undefined>(1024);
  private size = 0;
  private seq = 0;
  private processed = 0;

  /** Events processed so far. */
  get events(): number {
    return this.processed;
  }

  /** Events waiting. */
  get pending(): number {
    return this.size;
  }

  /** Schedules `handler` at absolute simulated time `atMs` (not before now). */
  at(atMs: number, handler: EventHandler): void {
    if (!(atMs >= this.clock.nowMs()))
      throw new Error(`cannot schedule at ${atMs}, before now (${this.clock.nowMs()})`);
    if (this.size === this.times.length) this.grow();
    let i = this.size++;
    const seq = this.seq++;
    // Sift up.
    while (i > 0) {
      const parent = (i - 1) >> 1;
      if (this.times[parent]! < atMs || (this.times[parent] === atMs && this.seqs[parent]! < seq)) break;
      this.times[i] = this.times[parent]!;
      this.seqs[i] = this.seqs[parent]!;
      this.handlers[i] = this.handlers[parent];
      i = parent;
    }
    this.times[i] = atMs;
    this.seqs[i] = seq;
    this.handlers[i] = handler;
  }

  /** Schedules `handler` `delayMs` after now. */
  after(delayMs: number, handler: EventHandler): void {
    this.at(this.clock.nowMs() + Math.max(0, delayMs), handler);
  }

  /**
   * Processes events in time order until none is left or the next is after `untilMs` (the clock then stands at
   * `untilMs`). `onProgress` is called about every `progressEvery` events.
   */
  run(untilMs: number, onProgress?: (p: EngineProgress) => void, progressEvery = 1_000_000): void {
    let nextReport = this.processed + progressEvery;
    while (this.size > 0 && this.times[0]! <= untilMs) {
      const time = this.times[0]!;
      const handler = this.pop();
      this.clock.advanceTo(time);
      handler();
      this.processed++;
      if (onProgress && this.processed >= nextReport) {
        nextReport = this.processed + progressEvery;
        onProgress({ nowMs: time, untilMs, events: this.processed });
      }
    }
    if (untilMs > this.clock.nowMs() && Number.isFinite(untilMs)) this.clock.advanceTo(untilMs);
  }

  private pop(): EventHandler {
    const top = this.handlers[0]!;
    const last = --this.size;
    const t = this.times[last]!;
    const s = this.seqs[last]!;
    const h = this.handlers[last];
    this.handlers[last] = undefined;
    let i = 0;
    // Sift the last element down from the root.
    for (;;) {
      const l = 2 * i + 1;
      if (l >= last) break;
      const r = l + 1;
      let c = l;
      if (
        r < last &&
        (this.times[r]! < this.times[l]! || (this.times[r] === this.times[l] && this.seqs[r]! < this.seqs[l]!))
      )
        c = r;
      if (t < this.times[c]! || (t === this.times[c] && s < this.seqs[c]!)) break;
      this.times[i] = this.times[c]!;
      this.seqs[i] = this.seqs[c]!;
      this.handlers[i] = this.handlers[c];
      i = c;
    }
    if (last > 0) {
      this.times[i] = t;
      this.seqs[i] = s;
      this.handlers[i] = h;
    }
    return top;
  }

  private grow(): void {
    const n = this.times.length * 2;
    const times = new Float64Array(n);
    times.set(this.times);
    const seqs = new Float64Array(n);
    seqs.set(this.seqs);
    this.times = times;
    this.seqs = seqs;
    this.handlers.length = n;
  }
}
