import { describe, expect, it } from "vitest";
import { parseDag } from "../../common/dag-spec.js";
import { detailsOf, isHarvestError } from "../../common/errors.js";
import type { StateMachine } from "../../common/state-machine.js";
import { DagRunner } from "../../jobmanager/dag-runner.js";
import { TASK_MACHINE } from "../../jobmanager/task-state.js";
import { APP_MACHINE } from "../../resourcemanager/app-state.js";
import { ATTEMPT_MACHINE } from "../../resourcemanager/attempt-state.js";
import { CONTAINER_MACHINE } from "../../resourcemanager/container-state.js";
import { NODE_MACHINE } from "../../resourcemanager/node-state.js";

/** Every machine with the events its table names (an event no state accepts would be dead). */
const machines: [string, StateMachine<string, string>, string[]][] = [
  ["application", APP_MACHINE, events(APP_MACHINE)],
  ["attempt", ATTEMPT_MACHINE, events(ATTEMPT_MACHINE)],
  ["container", CONTAINER_MACHINE, events(CONTAINER_MACHINE)],
  ["node", NODE_MACHINE, events(NODE_MACHINE)],
  ["task", TASK_MACHINE, events(TASK_MACHINE)],
];

function events(m: StateMachine<string, string>): string[] {
  return [...new Set(m.transitions().map(([, e]) => e))];
}

function refusal(f: () => unknown): unknown {
  try {
    f();
  } catch (err) {
    return err;
  }
  return undefined;
}

describe.each(machines)("the %s state machine", (name, machine, allEvents) => {
  it("accepts every transition of its table and leads where the table says", () => {
    const legal = machine.transitions();
    expect(legal.length).toBeGreaterThan(0);
    for (const [from, event, to] of legal) expect(machine.next(from, event), `${from} + ${event}`).toBe(to);
  });

  it("refuses every event a state does not list, with the coded invalid-transition error", () => {
    let refused = 0;
    for (const state of machine.states()) {
      for (const event of allEvents) {
        if (machine.accepts(state, event)) continue;
        const err = refusal(() => machine.next(state, event, "x1"));
        refused++;
        if (name === "application") {
          expect(detailsOf(err, "APP_INVALID_TRANSITION"), `${state} + ${event}`).toEqual({ state, event });
        } else {
          expect(detailsOf(err, "STATE_INVALID_TRANSITION"), `${state} + ${event}`).toEqual({
            machine: name,
            state,
            event,
            id: "x1",
          });
        }
      }
    }
    expect(refused).toBeGreaterThan(0);
  });

  it("has terminal states exactly where the table lists no event", () => {
    for (const state of machine.states())
      expect(machine.isTerminal(state), state).toBe(allEvents.every((e) => !machine.accepts(state, e)));
  });
});

describe("task state changes in the DAG runner", () => {
  const dag = parseDag(
    JSON.stringify({
      name: "j",
      vertices: [
        { name: "a", parallelism: 1, command: ["node", "task.js"], resources: { vcores: 0.5, memoryMb: 128 } },
      ],
      edges: [],
    }),
  );

  it("refuses a second launch of a task already running: the runner goes through the task table", () => {
    const runner = new DagRunner(dag, { maxTaskAttempts: 4, maxLaunchFailures: 10 });
    const task = runner.assign("c1", 0);
    expect(task?.state).toBe("LAUNCHING");
    runner.launched("c1");
    expect(task?.state).toBe("RUNNING");
    // An adoption needs a PENDING task: the running one is not taken over twice.
    expect(runner.adopt("c2", "a", 0)).toBe(false);
    expect(runner.ended("c1", "PREEMPTED_BY_PRIMARY", "primary spike")).toEqual({ kind: "retry", counted: false });
    expect(task?.state).toBe("PENDING");
    expect(
      isHarvestError(
        refusal(() => TASK_MACHINE.next("SUCCEEDED", "retry")),
        "STATE_INVALID_TRANSITION",
      ),
    ).toBe(true);
  });
});
