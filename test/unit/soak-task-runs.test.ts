/** How the soak tells a broken promise (work re-run after a recorded success) from at-least-once after a crash. */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { countTaskRuns, recordedSuccesses } from "../../soak/soak.js";
import type { SoakReport } from "../../soak/soak.js";

const dir = mkdtempSync(join(tmpdir(), "harvest-soak-runs-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function report(): SoakReport {
  return {
    minutes: 0,
    seed: 0,
    kills: { rm: 0, nn: 0, nm: 0, dn: 0, jm: 0 },
    jobs: { submitted: 0, finished: 0, failed: 0, killed: 0, unfinished: 0 },
    tasks: { completed: 0, completedTwice: 0, rerunUnrecorded: 0 },
    files: { written: 0, bytes: 0, verified: 0, mismatched: 0 },
    retries: { submit: 0, status: 0, write: 0, read: 0 },
    fsckHealthy: true,
    leftoverProcesses: 0,
    violations: [],
  };
}

describe("the soak's count of task runs", () => {
  const logs = join(dir, "logs");
  mkdirSync(logs);
  const finished = (id: string, cause: string): string =>
    `2026-11-27T08:00:00.000Z INFO  [nm:server-1] container finished {"containerId":"${id}","cause":"${cause}","exitCode":0}`;
  writeFileSync(
    join(logs, "server-1.log"),
    [
      finished("c1", "SUCCEEDED"),
      finished("c9", "PREEMPTED_BY_PRIMARY"),
      '... container finished {"containerId":"c',
    ].join("\n"),
  );
  writeFileSync(join(logs, "server-2.log"), finished("c4", "SUCCEEDED") + "\n");
  writeFileSync(join(logs, "server-2-dn.log"), finished("c7", "SUCCEEDED") + "\n"); // A datanode's log: not a node manager's.

  it("reads the successes the node managers recorded, and nothing else", () => {
    expect([...recordedSuccesses(logs)].sort()).toEqual(["c1", "c4"]);
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
        "done app2 map 0 c7", // Only a datanode's log names c7: not recorded.
        "done app2 map 0 c8",
      ].join("\n") + "\n",
    );
    const r = report();
    countTaskRuns(taskLog, recordedSuccesses(logs), r);
    expect(r.tasks.completed).toBe(4);
    expect(r.tasks.completedTwice).toBe(1);
    expect(r.tasks.rerunUnrecorded).toBe(2);
    expect(r.violations).toHaveLength(1);
    expect(r.violations[0]).toContain("app1 map 0");
  });
});
