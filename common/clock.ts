/** Time as an injected dependency, so that policies run the same under the daemons' wall clock and the simulator's. */

/** A source of the current time in milliseconds. */
export interface Clock {
  nowMs(): number;
}

/** The wall clock. */
export const systemClock: Clock = { nowMs: () => Date.now() };

/** A clock that only moves when told to (tests and the simulator). */
export class ManualClock implements Clock {
  constructor(private timeMs = 0) {}
  nowMs(): number {
    return this.timeMs;
  }
  advance(ms: number): void {
    this.timeMs += ms;
  }
  set(ms: number): void {
    this.timeMs = ms;
  }
}
