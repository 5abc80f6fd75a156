/**
 * A running task's progress and counters, end to end without daemons: harvest/task writes its status file, the node
 * manager's reader takes it (and refuses hostile ones: too big, not JSON, not finite, a link to /etc/shadow, a FIFO,
 * another account's file) and sends it only when it changed, and the live view joins it with the job manager's counts.
 */
import { execFileSync } from "node:child_process";
import { chownSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { liveVertexProgress } from "../../common/live-progress.js";
import { STATUS_FILE_NAME, TASK_ENV, TASK_STATUS_LIMITS } from "../../common/task-contract.js";
import { encodedSize, parseTaskStatus, readTaskStatus, TaskStatusTracker } from "../../nodemanager/task-status.js";
import type { TaskStatusRejection } from "../../nodemanager/task-status.js";
import { currentProgress, incrementCounter, reportProgress, TaskError } from "../../task/index.js";
import type { ApplicationReportOutput } from "../../proto/generated/harvest/v1/ApplicationReport.js";

const dirs: string[] = [];
function workDir(): string {
  const d = mkdtempSync(join(tmpdir(), "harvest-status-"));
  dirs.push(d);
  return d;
}
afterAll(() => dirs.forEach((d) => rmSync(d, { recursive: true, force: true })));

function rejected(parsed: ReturnType<typeof parseTaskStatus> | undefined): TaskStatusRejection | undefined {
  return parsed && "rejected" in parsed ? parsed.rejected : undefined;
}

describe("the status file parser", () => {
  it("takes a progress from 0 to 1 and whole-number counters", () => {
    expect(parseTaskStatus('{"progress":0.5,"counters":{"words":12,"bad":0}}', 1000)).toEqual({
      report: { progress: 0.5, counters: { bad: 0, words: 12 }, countersDropped: 0, reportedMs: 1000 },
    });
    expect(parseTaskStatus("{}", 5)).toEqual({
      report: { progress: 0, counters: {}, countersDropped: 0, reportedMs: 5 },
    });
  });

  it("refuses what is not JSON of that shape, and numbers that are not finite or out of range", () => {
    expect(rejected(parseTaskStatus("root:$6$salt:19000:0:99999:7:::", 0))).toBe("not_json");
    expect(rejected(parseTaskStatus('{"progress":NaN}', 0))).toBe("not_json");
    for (const bad of [
      '{"progress":1e999}',
      '{"progress":-1e999}',
      '{"progress":"NaN"}',
      '{"progress":1.5}',
      '{"progress":-0.1}',
      '{"counters":{"x":1.5}}',
      '{"counters":{"x":1e999}}',
      '{"counters":{"x":"3"}}',
      '{"counters":[1,2]}',
      `{"counters":{"${"n".repeat(129)}":1}}`,
      '{"progress":0.5,"shadow":"x"}',
      "[0.5]",
      "null",
    ])
      expect(rejected(parseTaskStatus(bad, 0)), bad).toBe("bad_shape");
    expect(rejected(parseTaskStatus(" ".repeat(TASK_STATUS_LIMITS.maxBytes) + "{}", 0))).toBe("too_big");
  });

  it("keeps the first 32 counters by name and counts the rest as dropped", () => {
    const counters = Object.fromEntries(Array.from({ length: 40 }, (_, i) => [`c${String(i).padStart(2, "0")}`, i]));
    const parsed = parseTaskStatus(JSON.stringify({ progress: 1, counters }), 0);
    if (!("report" in parsed)) throw new Error("refused");
    expect(Object.keys(parsed.report.counters)).toHaveLength(TASK_STATUS_LIMITS.maxCounters);
    expect(parsed.report.counters["c31"]).toBe(31);
    expect(parsed.report.counters["c32"]).toBeUndefined();
    expect(parsed.report.countersDropped).toBe(8);
  });
});

describe("the node manager's reader", () => {
  it("reads a task's status file, and says nothing when there is none", async () => {
    const dir = workDir();
    expect(await readTaskStatus(dir)).toBeUndefined();
    writeFileSync(join(dir, STATUS_FILE_NAME), '{"progress":0.25,"counters":{"lines":3}}');
    expect(await readTaskStatus(dir)).toMatchObject({ report: { progress: 0.25, counters: { lines: 3 } } });
  });

  it("never follows a link (to /etc/shadow), never blocks on a FIFO, and refuses a directory or a huge file unread", async () => {
    const link = workDir();
    symlinkSync("/etc/shadow", join(link, STATUS_FILE_NAME));
    expect(rejected(await readTaskStatus(link))).toBe("not_regular");

    const fifo = workDir();
    execFileSync("mkfifo", [join(fifo, STATUS_FILE_NAME)]);
    expect(rejected(await readTaskStatus(fifo))).toBe("not_regular");

    const directory = workDir();
    mkdirSync(join(directory, STATUS_FILE_NAME));
    expect(rejected(await readTaskStatus(directory))).toBe("not_regular");

    const huge = workDir();
    writeFileSync(join(huge, STATUS_FILE_NAME), `{"progress":0.5,"pad":"${"x".repeat(8 << 20)}"}`);
    expect(rejected(await readTaskStatus(huge))).toBe("too_big");
  });

  it.skipIf(process.getuid?.() !== 0)("refuses a file that is not the container account's own", async () => {
    const dir = workDir();
    chownSync(dir, 65534, 65534);
    // Root's file in the container's directory: a hard link to another account's file looks like this.
    writeFileSync(join(dir, STATUS_FILE_NAME), '{"progress":0.5}');
    expect(rejected(await readTaskStatus(dir))).toBe("not_owner");
  });

  it("sends a report once per change, every report at a registration, and warns once per bad task", async () => {
    const warned: string[] = [];
    const tracker = new TaskStatusTracker((id, reason) => warned.push(`${id}:${reason}`));
    const good = workDir();
    const bad = workDir();
    const tasks = [
      { containerId: "good", workDir: good },
      { containerId: "bad", workDir: bad },
    ];
    const ids = tasks.map((t) => t.containerId);
    const take = (all = false) => Object.fromEntries(tracker.takeChanged(ids, 1 << 20, all));
    writeFileSync(join(good, STATUS_FILE_NAME), '{"progress":0.5,"counters":{"words":7}}');
    writeFileSync(join(bad, STATUS_FILE_NAME), "not json");
    await tracker.poll(tasks);
    expect(take()).toMatchObject({ good: { progress: 0.5, counters: { words: 7 } } });
    expect(take()).toEqual({});
    expect(take(true)).toMatchObject({ good: { progress: 0.5 } });
    await tracker.poll(tasks);
    expect(take()).toEqual({});
    expect(warned).toEqual(["bad:not_json"]);
    writeFileSync(join(good, STATUS_FILE_NAME), '{"progress":0.75,"counters":{"words":9}}');
    await tracker.poll(tasks);
    expect(take()).toMatchObject({ good: { progress: 0.75, counters: { words: 9 } } });
  });

  it("keeps a heartbeat's reports within its budget, and sends the rest in the next heartbeats", async () => {
    const tracker = new TaskStatusTracker(() => undefined);
    const counters = Object.fromEntries(Array.from({ length: 32 }, (_, i) => [`${"n".repeat(120)}${i}`, i]));
    const tasks = Array.from({ length: 10 }, (_, i) => ({ containerId: `c${i}`, workDir: workDir() }));
    for (const t of tasks)
      writeFileSync(join(t.workDir, STATUS_FILE_NAME), JSON.stringify({ progress: 0.5, counters }));
    await tracker.poll(tasks);
    const ids = tasks.map((t) => t.containerId);
    const budget = 3 * encodedSize({ progress: 0.5, counters, countersDropped: 0, reportedMs: 0 });
    const sent: string[] = [];
    for (let heartbeat = 0; heartbeat < 4; heartbeat++) {
      const batch = tracker.takeChanged(ids, budget);
      expect(batch.size).toBeLessThanOrEqual(3);
      sent.push(...batch.keys());
    }
    expect(sent.sort()).toEqual([...ids].sort());
  });
});

describe("harvest/task's reportProgress", () => {
  it("writes progress and counters to the status file, clamps to 0..1, and refuses what is not a finite number", () => {
    const dir = workDir();
    process.env[TASK_ENV.statusFile] = join(dir, STATUS_FILE_NAME);
    try {
      reportProgress(0.5);
      const first = JSON.parse(readFileSync(join(dir, STATUS_FILE_NAME), "utf8")) as unknown;
      expect(first).toEqual({ progress: 0.5, counters: {} });
      // Within the second after a write the next waits: the file is replaced at most about once a second.
      incrementCounter("records", 4);
      expect(JSON.parse(readFileSync(join(dir, STATUS_FILE_NAME), "utf8"))).toEqual(first);
      reportProgress(7);
      expect(currentProgress()).toBe(1);
      reportProgress(-2);
      expect(currentProgress()).toBe(0);
      for (const bad of [NaN, Infinity, "0.5" as unknown as number])
        expect(() => reportProgress(bad)).toThrow(TaskError);
      expect(currentProgress()).toBe(0);
    } finally {
      delete process.env[TASK_ENV.statusFile];
    }
  });
});

describe("a job's live per-vertex progress", () => {
  const report = (containers: Partial<ApplicationReportOutput["containers"][number]>[]) =>
    ({
      progress: {
        vertices: [
          { name: "map", total: 4, succeeded: 1, running: 2, counters: { words: 100 } },
          { name: "reduce", total: 2, succeeded: 0, running: 0, counters: {} },
        ],
      },
      containers,
    }) as unknown as ApplicationReportOutput;
  const task = (
    vertex: string,
    taskIndex: number,
    progress: number,
    counters: Record<string, number>,
    state: "RUNNING" | "COMPLETE" = "RUNNING",
  ) => ({
    isAm: false,
    state,
    vertex,
    taskIndex,
    taskReport: { progress, counters, countersDropped: 0, reportedMs: 0 },
  });

  it("counts succeeded tasks 1 and running ones their fraction, and adds running tasks' counters", () => {
    const live = liveVertexProgress(
      report([
        task("map", 1, 0.5, { words: 20 }),
        task("map", 2, 0.25, { words: 5 }),
        // Ended: its counters are the job manager's to add, not counted again here.
        task("map", 0, 1, { words: 100 }, "COMPLETE"),
        { isAm: true, state: "RUNNING" },
      ]),
    );
    expect(live[0]).toMatchObject({
      name: "map",
      progress: (1 + 0.5 + 0.25) / 4,
      reporting: 2,
      counters: { words: 125 },
      runningCounters: { words: 25 },
    });
    expect(live[1]).toMatchObject({ name: "reduce", progress: 0, counters: {}, reporting: 0 });
  });

  it("takes the furthest of two running containers of one task", () => {
    const live = liveVertexProgress(report([task("map", 1, 0.5, { words: 20 }), task("map", 1, 0.9, { words: 30 })]));
    expect(live[0]).toMatchObject({ progress: (1 + 0.9) / 4, runningCounters: { words: 30 } });
  });
});
