/**
 * An application's lifecycle as one transition function: every state change of the resource manager's applications
 * goes through `nextAppState`, each state a named case, and an event a state does not accept is an error (a bug, or a
 * late message from a job manager that lost its attempt), never a silent change.
 *
 *   QUEUED --admit--> ACCEPTED --registered--> RUNNING --finish--> FINISHED | FAILED | KILLED
 *              ACCEPTED/RUNNING --attempt-ended--> ACCEPTED (a new job-manager attempt)
 *              RUNNING --registered--> RUNNING (the same attempt again, after a resource manager restart)
 *              QUEUED/ACCEPTED/RUNNING --kill--> KILLED; --fail--> FAILED (attempts used up)
 */
import { HarvestError } from "../common/errors.js";
import type { AppState } from "./state-store.js";

/** What happens to an application. */
export type AppEvent =
  | { kind: "admit" }
  | { kind: "registered" }
  | { kind: "attempt-ended" }
  | { kind: "finish"; outcome: "JOB_SUCCEEDED" | "JOB_FAILED" | "JOB_KILLED" }
  | { kind: "kill" }
  | { kind: "fail" };

/** The state after `event`; throws APP_INVALID_TRANSITION for an event `state` does not accept. */
export function nextAppState(state: AppState, event: AppEvent): AppState {
  switch (state) {
    case "QUEUED":
      // Waiting for admission: no job manager exists yet.
      if (event.kind === "admit") return "ACCEPTED";
      if (event.kind === "kill") return "KILLED";
      if (event.kind === "fail") return "FAILED";
      break;
    case "ACCEPTED":
      // Waiting for (or running, not yet registered) a job-manager attempt.
      if (event.kind === "registered") return "RUNNING";
      if (event.kind === "attempt-ended") return "ACCEPTED";
      if (event.kind === "kill") return "KILLED";
      if (event.kind === "fail") return "FAILED";
      break;
    case "RUNNING":
      // A registered job manager drives the job.
      if (event.kind === "registered") return "RUNNING";
      if (event.kind === "attempt-ended") return "ACCEPTED";
      if (event.kind === "finish") return finishedState(event.outcome);
      if (event.kind === "kill") return "KILLED";
      if (event.kind === "fail") return "FAILED";
      break;
    case "FINISHED":
    case "FAILED":
    case "KILLED":
      // Terminal: nothing moves it again.
      break;
  }
  throw new HarvestError("APP_INVALID_TRANSITION", `an application in state ${state} does not accept ${event.kind}`, {
    details: { state, event: event.kind },
  });
}

/** True for the states an application never leaves. */
export function isTerminal(state: AppState): boolean {
  return state === "FINISHED" || state === "FAILED" || state === "KILLED";
}

function finishedState(outcome: "JOB_SUCCEEDED" | "JOB_FAILED" | "JOB_KILLED"): AppState {
  return outcome === "JOB_SUCCEEDED" ? "FINISHED" : outcome === "JOB_KILLED" ? "KILLED" : "FAILED";
}
