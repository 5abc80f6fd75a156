/**
 * A job-manager attempt's lifecycle (the current attempt of an application) as one transition table; applications.ts
 * and app-allocations.ts route every change of `AppRuntime.attemptState` through `nextAttemptState`:
 *
 *   WAITING --launched--> LAUNCHED --registered--> REGISTERED --registered--> REGISTERED (again, after a restart)
 *   RECOVERED --window-opened--> RESYNCING --adopted--> LAUNCHED; --registered--> REGISTERED
 *   REGISTERED --adopted--> REGISTERED (a node reports the job manager that registered again after a restart)
 *   RESYNCING/LAUNCHED/REGISTERED --ended--> WAITING (the next attempt asks for a container)
 *
 * The attempt's number is `AppRecord.attempt`; a job that ends keeps its attempt's last state (the application's
 * state, not the attempt's, says it ended).
 */
import { StateMachine } from "../common/state-machine.js";

/** Where the current job-manager attempt of an application is. */
export type AttemptState =
  /** Loaded from the store after a restart; its resync window opens when the resource manager serves. */
  | "RECOVERED"
  /** After a restart: waiting for a node to report its job manager, or for the job manager to register again. */
  | "RESYNCING"
  /** Asking the scheduler for a container for its job manager. */
  | "WAITING"
  /** Its job manager's container was granted (or adopted after a restart); the job manager has not registered. */
  | "LAUNCHED"
  /** Its job manager registered and drives the job. */
  | "REGISTERED";

/** What happens to an attempt. */
export type AttemptEvent = "window-opened" | "launched" | "adopted" | "registered" | "ended";

/** The attempt's transitions; refusals are STATE_INVALID_TRANSITION (machine `attempt`). */
export const ATTEMPT_MACHINE = new StateMachine<AttemptState, AttemptEvent>(
  { name: "attempt", noun: "a job-manager attempt" },
  {
    RECOVERED: { "window-opened": "RESYNCING" },
    RESYNCING: { adopted: "LAUNCHED", registered: "REGISTERED", ended: "WAITING" },
    WAITING: { launched: "LAUNCHED" },
    LAUNCHED: { registered: "REGISTERED", ended: "WAITING" },
    REGISTERED: { registered: "REGISTERED", adopted: "REGISTERED", ended: "WAITING" },
  },
);

/** The state after `event`; throws STATE_INVALID_TRANSITION for an event `state` does not accept. */
export function nextAttemptState(state: AttemptState, event: AttemptEvent, appId?: string): AttemptState {
  return ATTEMPT_MACHINE.next(state, event, appId);
}
