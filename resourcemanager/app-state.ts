/**
 * An application's lifecycle as one transition table: every state change of the resource manager's applications
 * goes through `nextAppState`, and an event a state does not accept is an error (a bug, or a late message from a job
 * manager that lost its attempt), never a silent change.
 *
 *   QUEUED --admit--> ACCEPTED --registered--> RUNNING --finish--> FINISHED | FAILED | KILLED
 *              ACCEPTED/RUNNING --attempt-ended--> ACCEPTED (a new job-manager attempt)
 *              RUNNING --registered--> RUNNING (the same attempt again, after a resource manager restart)
 *              QUEUED/ACCEPTED/RUNNING --kill--> KILLED; --fail--> FAILED (attempts used up)
 */
import { StateMachine } from "../common/state-machine.js";
import type { AppState } from "./state-store.js";

/** What happens to an application. */
export type AppEvent =
  | { kind: "admit" }
  | { kind: "registered" }
  | { kind: "attempt-ended" }
  | { kind: "finish"; outcome: "JOB_SUCCEEDED" | "JOB_FAILED" | "JOB_KILLED" }
  | { kind: "kill" }
  | { kind: "fail" };

/** An application event as the table names it: a finish by its outcome. */
export type AppTableEvent =
  Exclude<AppEvent["kind"], "finish"> | `finish:${Extract<AppEvent, { kind: "finish" }>["outcome"]}`;

const ENDS = { kill: "KILLED", fail: "FAILED" } as const;

/** The application's transitions; refusals are APP_INVALID_TRANSITION. */
export const APP_MACHINE = new StateMachine<AppState, AppTableEvent>(
  { name: "application", noun: "an application", appCode: true },
  {
    // Waiting for admission: no job manager exists yet.
    QUEUED: { admit: "ACCEPTED", ...ENDS },
    // Waiting for (or running, not yet registered) a job-manager attempt.
    ACCEPTED: { registered: "RUNNING", "attempt-ended": "ACCEPTED", ...ENDS },
    // A registered job manager drives the job.
    RUNNING: {
      registered: "RUNNING",
      "attempt-ended": "ACCEPTED",
      "finish:JOB_SUCCEEDED": "FINISHED",
      "finish:JOB_FAILED": "FAILED",
      "finish:JOB_KILLED": "KILLED",
      ...ENDS,
    },
    // Terminal: nothing moves it again.
    FINISHED: {},
    FAILED: {},
    KILLED: {},
  },
);

/** The state after `event`; throws APP_INVALID_TRANSITION for an event `state` does not accept. */
export function nextAppState(state: AppState, event: AppEvent): AppState {
  const key: AppTableEvent = event.kind === "finish" ? `finish:${event.outcome}` : event.kind;
  return APP_MACHINE.accepts(state, key) ? APP_MACHINE.next(state, key) : APP_MACHINE.refuse(state, event.kind);
}

/** True for the states an application never leaves. */
export function isTerminal(state: AppState): boolean {
  return APP_MACHINE.isTerminal(state);
}
