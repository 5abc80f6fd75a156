/** How the soak tells a broken promise (work re-run after a recorded success) from at-least-once after a crash. */
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { parseEvents } from "../../common/events.js";
import { countTaskRuns, emptySoakReport, recordedSuccesses, toldNodeLost } from "../../soak/soak.js";
import type { SoakReport } from "../../soak/soak.js";

const dir = mkdtempSync(join(tmpdir(), "harvest-soak-runs-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function report(): SoakReport {
  return { ...emptySoakReport(0, 0), fsckHealthy: true };
}

describe("the soak's count of task runs", () => {
  const finished = (id: string, cause: string): string =>
    JSON.stringify({
      v: 1,
      type: "container-finished",
      atMs: 1,
      daemon: "server-1",
      containerId: id,
      cause,
      exitCode: 0,
    });
  const { events } = parseEvents(
    [
      finished("c1", "SUCCEEDED"),
      finished("c9", "PREEMPTED_BY_PRIMARY"),
      JSON.stringify({ v: 1, type: "container-preempted", atMs: 1, daemon: "server-2", containerId: "c7" }),
      '{"v":1,"type":"container-finished","atMs":1,"daemon":"server-1","containerId":"c', // Cut short by a kill -9.
      finished("c4", "SUCCEEDED"),
    ].join("\n"),
  );

  it("reads the successes the node managers recorded, and nothing else", () => {
    expect([...recordedSuccesses(events)].sort()).toEqual(["c1", "c4"]);
  });

  it("calls a re-run after a recorded success a violation, and one after an unrecorded end at-least-once", () => {
    const taskLog = join(dir, "tasks.log");
    writeFileSync(
      taskLog,
      [
        "start app1 map 0 c1",
        "done app1 map 0 c1", // Recorded...
        "done app1 map 0 c2", // ...and run again: broken.
        "done app1 map 1 c3", // Its server died as it ended (never recorded)...
        "done app1 map 1 c4", // ...so running it again is at-least-once.
        "done app1 map 2 c5", // Once.
        "done app2 map 0 c7", // c7 was preempted, not recorded as a success.
        "done app2 map 0 c8",
      ].join("\n") + "\n",
    );
    const r = report();
    countTaskRuns(taskLog, recordedSuccesses(events), r);
    expect(r.tasks.completed).toBe(4);
    expect(r.tasks.completedTwice).toBe(1);
    expect(r.tasks.rerunUnrecorded).toBe(2);
    expect(r.violations).toHaveLength(1);
    expect(r.violations[0]).toContain("app1 map 0");
  });

  it("lets a task run again whose success its node recorded only after the resource manager reported it lost with the node", () => {
    const lost = toldNodeLost(
      parseEvents(
        [
          JSON.stringify({
            v: 1,
            type: "container-lost-with-node",
            atMs: 2,
            daemon: "rm",
            containerId: "c1",
            nodeId: "s1",
          }),
          // c4 was answered LOST because its node restarted without it: no lost-with-node event names it.
          JSON.stringify({ v: 1, type: "container-preempted", atMs: 2, daemon: "server-1", containerId: "c4" }),
          '{"v":1,"type":"container-lost-with-node","atMs":2,"daemon":"rm","containerId":"c', // Torn.
        ].join("\n"),
      ).events,
    );
    expect([...lost]).toEqual(["c1"]);
    const taskLog = join(dir, "tasks-lost.log");
    // c1's success came after its job heard the node was lost; c4's was answered LOST while recorded: broken.
    writeFileSync(
      taskLog,
      ["done app3 map 0 c1", "done app3 map 0 c2", "done app3 map 1 c4", "done app3 map 1 c5"].join("\n"),
    );
    const r = report();
    countTaskRuns(taskLog, recordedSuccesses(events), r, lost);
    expect(r.tasks.rerunUnrecorded).toBe(1);
    expect(r.tasks.completedTwice).toBe(1);
    expect(r.violations[0]).toContain("app3 map 1");
  });
});
