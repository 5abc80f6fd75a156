/**
 * One transition function per lifecycle: a state machine is a table of allowed transitions (state x event -> state)
 * and `next()`, which answers the state an event leads to or refuses it with a coded error. Every state change of an
 * application, a job-manager attempt, an RM container, a node and a job-manager task goes through one of these (the
 * model is grpc-js's `transitionToState` in `subchannel.ts`); an event a state does not accept is a bug or a stale
 * message, never a silent change.
 */
import { HarvestError } from "./errors.js";

/** For each state, the events it accepts and the state each leads to (a state with no entries is terminal). */
export type TransitionTable<S extends string, E extends string> = { readonly [state in S]: Partial<Record<E, S>> };

/** How a machine names itself in the error that refuses a transition. */
export interface MachineOptions {
  /** The machine, in STATE_INVALID_TRANSITION's `details.machine` (`attempt`, `container`, `node`, `task`). */
  name: string;
  /** The thing that changes state, in the message: `a container in state X does not accept Y`. */
  noun: string;
  /**
   * Refuses with APP_INVALID_TRANSITION (the application's own code, on the wire since before this module) instead of
   * STATE_INVALID_TRANSITION. @default false
   */
  appCode?: boolean;
}

/** A state machine over states `S` and events `E`. */
export class StateMachine<S extends string, E extends string> {
  constructor(
    readonly options: MachineOptions,
    readonly table: TransitionTable<S, E>,
  ) {}

  /** The state `event` leads to from `state`; throws the machine's invalid-transition error if `state` refuses it. */
  next(state: S, event: E, id?: string): S {
    const to = this.table[state]?.[event];
    if (to !== undefined) return to;
    return this.refuse(state, event, id);
  }

  /** Throws the machine's invalid-transition error for `event` (named as the caller names it) in `state`. */
  refuse(state: S, event: string, id?: string): never {
    const message = `${this.options.noun} in state ${state} does not accept ${event}${id ? ` (${id})` : ""}`;
    if (this.options.appCode) throw new HarvestError("APP_INVALID_TRANSITION", message, { details: { state, event } });
    throw new HarvestError("STATE_INVALID_TRANSITION", message, {
      details: { machine: this.options.name, state, event, ...(id ? { id } : {}) },
    });
  }

  /** True when `state` accepts `event`. */
  accepts(state: S, event: E): boolean {
    return this.table[state]?.[event] !== undefined;
  }

  /** True for a state that accepts no event. */
  isTerminal(state: S): boolean {
    return Object.keys(this.table[state]).length === 0;
  }

  /** Every state of the table. */
  states(): S[] {
    return Object.keys(this.table) as S[];
  }

  /** Every allowed transition, as [from, event, to] (tests walk them). */
  transitions(): [S, E, S][] {
    return this.states().flatMap((from) =>
      (Object.entries(this.table[from]) as [E, S][]).map(([event, to]): [S, E, S] => [from, event, to]),
    );
  }
}
