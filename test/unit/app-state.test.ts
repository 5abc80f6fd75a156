import { describe, expect, it } from "vitest";
import { isHarvestError } from "../../common/errors.js";
import { nextAppState } from "../../resourcemanager/app-state.js";
import type { AppEvent } from "../../resourcemanager/app-state.js";
import type { AppState } from "../../resourcemanager/state-store.js";

const events: AppEvent[] = [
  { kind: "admit" },
  { kind: "registered" },
  { kind: "attempt-ended" },
  { kind: "finish", outcome: "JOB_SUCCEEDED" },
  { kind: "kill" },
  { kind: "fail" },
];

/** YARN's application lifecycle, as Harvest has it: the legal moves, written out by hand. */
const legal: Record<AppState, Partial<Record<AppEvent["kind"], AppState>>> = {
  QUEUED: { admit: "ACCEPTED", kill: "KILLED", fail: "FAILED" },
  ACCEPTED: { registered: "RUNNING", "attempt-ended": "ACCEPTED", kill: "KILLED", fail: "FAILED" },
  RUNNING: { registered: "RUNNING", "attempt-ended": "ACCEPTED", finish: "FINISHED", kill: "KILLED", fail: "FAILED" },
  FINISHED: {},
  FAILED: {},
  KILLED: {},
};

describe("the application state machine", () => {
  for (const [state, moves] of Object.entries(legal) as [AppState, (typeof legal)[AppState]][]) {
    for (const event of events) {
      const want = moves[event.kind];
      it(`${state} + ${event.kind} -> ${want ?? "refused"}`, () => {
        if (want) expect(nextAppState(state, event)).toBe(want);
        else {
          let err: unknown;
          try {
            nextAppState(state, event);
          } catch (e) {
            err = e;
          }
          expect(isHarvestError(err, "APP_INVALID_TRANSITION")).toBe(true);
        }
      });
    }
  }

  it("maps a job manager's outcome to its final state", () => {
    expect(nextAppState("RUNNING", { kind: "finish", outcome: "JOB_FAILED" })).toBe("FAILED");
    expect(nextAppState("RUNNING", { kind: "finish", outcome: "JOB_KILLED" })).toBe("KILLED");
  });
});
