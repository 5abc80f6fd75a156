/**
 * A job-manager task's lifecycle as one transition table (dag-runner.ts routes every task state change through
 * `move`, over TASK_MACHINE):
 *
 *   PENDING --assign--> LAUNCHING --launched--> RUNNING --succeeded--> SUCCEEDED
 *   PENDING --adopt--> RUNNING (a container of an earlier job-manager attempt, still running)
 *   LAUNCHING/RUNNING --retry--> PENDING (preempted, lost, released, failed, killed: it waits for a container again)
 *   LAUNCHING --succeeded--> SUCCEEDED (the end overtook the launch report)
 *   PENDING --replayed-success--> SUCCEEDED; --replayed-retry--> PENDING (an earlier attempt's journal, replayed)
 *   SUCCEEDED --output-lost--> PENDING (its node lost the outputs before every consumer read them: it runs again)
 */
import { StateMachine } from "../common/state-machine.js";

/** Task states. */
export type TaskState = "PENDING" | "LAUNCHING" | "RUNNING" | "SUCCEEDED";

/** What happens to a task. */
export type TaskEvent =
  "assign" | "launched" | "adopt" | "succeeded" | "retry" | "replayed-success" | "replayed-retry" | "output-lost";

/** The task's transitions; refusals are STATE_INVALID_TRANSITION (machine `task`). */
export const TASK_MACHINE = new StateMachine<TaskState, TaskEvent>(
  { name: "task", noun: "a task" },
  {
    PENDING: { assign: "LAUNCHING", adopt: "RUNNING", "replayed-success": "SUCCEEDED", "replayed-retry": "PENDING" },
    LAUNCHING: { launched: "RUNNING", succeeded: "SUCCEEDED", retry: "PENDING" },
    RUNNING: { succeeded: "SUCCEEDED", retry: "PENDING" },
    // Its output is kept; a succeeded task is re-run only when its node lost that output.
    SUCCEEDED: { "output-lost": "PENDING" },
  },
);
