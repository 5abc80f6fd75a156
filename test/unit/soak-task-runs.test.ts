/** How the soak tells a broken promise (work re-run after a recorded success) from at-least-once after a crash. */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { countTaskRuns, recordedSuccesses, toldNodeLost } from "../../soak/soak.js";
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

  it("lets a task run again whose success its node recorded only after the job was told the node was lost", () => {
    const staging = join(dir, "staging");
    mkdirSync(join(staging, "app3"), { recursive: true });
    const end = (containerId: string, diagnostics: string): string =>
      JSON.stringify({ containerId, vertex: "map", index: 0, end: "LOST", diagnostics });
    writeFileSync(
      join(staging, "app3", "journal.jsonl"),
      [
        end("c1", "node server-1 lost (no heartbeat for 5000 ms)"),
        end("c4", "no node reports this container any more (its node restarted or was lost)"),
        "{torn",
      ].join("\n"),
    );
    const lost = toldNodeLost(staging);
    expect([...lost]).toEqual(["c1"]);
    const taskLog = join(dir, "tasks-lost.log");
    // c1's success came after its job heard the node was lost; c4's was answered LOST while recorded: broken.
    writeFileSync(
      taskLog,
      ["done app3 map 0 c1", "done app3 map 0 c2", "done app3 map 1 c4", "done app3 map 1 c5"].join("\n"),
    );
    const r = report();
    countTaskRuns(taskLog, recordedSuccesses(logs), r, lost);
    expect(r.tasks.rerunUnrecorded).toBe(1);
    expect(r.tasks.completedTwice).toBe(1);
    expect(r.violations[0]).toContain("app3 map 1");
  });
});
