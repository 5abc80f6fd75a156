/**
 * Nothing lost when a daemon dies: kill -9 the resource manager or a job manager in the middle of a job of real task
 * processes, start it again, and check from the tasks' own records that no finished task ran again and no running
 * task was killed; kill -9 a node manager and check that its containers did not outlive it.
 */
import { chmodSync, existsSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { alive } from "../processes.js";
import { waitFor } from "../wait-for.js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { readCluster, restartDaemon } from "../../localcluster/cluster.js";
import { containerProcessFile } from "../../common/container-leftovers.js";
import { startTestCluster } from "../integration/harness.js";
import type { TestCluster } from "../integration/harness.js";

/** A task that writes "start i" when it starts and "done i" after 1.5 + 0.7 i seconds, in the shared log. */
const TASK = [
  'const fs = require("fs");',
  "const [log, i] = process.argv.slice(1);",
  'fs.appendFileSync(log, "start " + i + "\\n");',
  'setTimeout(() => fs.appendFileSync(log, "done " + i + "\\n"), 1500 + 700 * Number(i));',
].join(" ");

function markedJob(name: string, log: string, tasks: number): string {
  return JSON.stringify({
    name,
    vertices: [
      {
        name: "work",
        parallelism: tasks,
        command: ["node", "-e", TASK, log, "${HARVEST_TASK_INDEX}"],
        resources: { vcores: 1, memoryMb: 64 },
      },
    ],
  });
}

/** How often each task index started and finished, from the tasks' own log. */
function runs(log: string): { starts: Map<string, number>; dones: Map<string, number> } {
  const starts = new Map<string, number>();
  const dones = new Map<string, number>();
  const text = existsSync(log) ? readFileSync(log, "utf8") : "";
  for (const line of text.split("\n")) {
    const [what, i] = line.split(" ");
    if (i === undefined) continue;
    const m = what === "start" ? starts : dones;
    m.set(i, (m.get(i) ?? 0) + 1);
  }
  return { starts, dones };
}

/**
 * A log every task of a job appends to, made before the job: a job's containers on two node managers run as two
 * accounts (each node manager leases the job its own uid), so the file must not belong to the first task's.
 */
function sharedLog(dir: string, name: string): string {
  const log = join(dir, name);
  writeFileSync(log, "", { mode: 0o666 });
  chmodSync(log, 0o666);
  return log;
}

/** The resource manager's resync window in these tests. */
const RESYNC_WINDOW_MS = 5_000;

/** The pid of a container's process, from the record its node manager keeps in the container's directory. */
function containerPid(node: { dataDir: string }, appId: string, containerId: string): number {
  const record = readFileSync(containerProcessFile(join(node.dataDir, "containers", appId, containerId)), "utf8");
  return (JSON.parse(record) as { pid: number }).pid;
}

describe("work-preserving restarts (kill -9)", () => {
  let c: TestCluster;
  let logs: string;
  beforeAll(async () => {
    c = await startTestCluster({
      idleServers: 2,
      storage: false,
      // A resync window shorter than the node expiry: a node may re-register after the window (see the fourth test).
      // 5 s: a node manager re-registered about 1 s after a restart here, and a job manager in backoff up to 5 s later.
      rm: { resyncWindowMs: RESYNC_WINDOW_MS, nodeExpiryMs: 14_000 },
      nm: { reconnectMaxMs: 500 },
    });
    logs = c.work;
    // The tasks write their log as the containers' unprivileged account.
    chmodSync(logs, 0o1777);
  });
  afterAll(() => c?.stop());

  it("a resource manager killed mid-job keeps every running task and re-runs none that finished while it was down", async () => {
    const log = sharedLog(logs, "rm.log");
    const appId = await c.client.submit(markedJob("rm-kill", log, 5));
    await waitFor(() => runs(log).starts.size === 5, { what: "every task to start", timeoutMs: 30_000 });
    process.kill(readCluster(c.dir).rm.pid, "SIGKILL");
    // Tasks 0 and 1 end while it is down.
    await waitFor(() => runs(log).dones.has("0") && runs(log).dones.has("1"), {
      what: "tasks 0 and 1 to finish while the resource manager is down",
    });
    await restartDaemon(c.dir, "rm");
    const r = await c.client.waitForCompletion(appId, undefined, 200);
    expect(r.state).toBe("FINISHED");
    expect(r.attempts).toBe(1);
    const { starts, dones } = runs(log);
    expect([...starts.values()]).toEqual([1, 1, 1, 1, 1]);
    expect([...dones.keys()].sort()).toEqual(["0", "1", "2", "3", "4"]);
    expect([...dones.values()]).toEqual([1, 1, 1, 1, 1]);
  });

  it("a job manager killed mid-job is replaced by an attempt that takes over its running tasks", async () => {
    const log = sharedLog(logs, "jm.log");
    const appId = await c.client.submit(markedJob("jm-kill", log, 5));
    await waitFor(() => runs(log).starts.size === 5, { what: "every task to start", timeoutMs: 30_000 });
    const status = await c.client.status(appId);
    const am = status.containers.find((x) => x.isAm && x.state !== "COMPLETE");
    expect(am).toBeDefined();
    const node = readCluster(c.dir).nodes.find((n) => n.nodeId === am!.nodeId)!;
    process.kill(containerPid(node, appId, am!.containerId), "SIGKILL");
    const r = await c.client.waitForCompletion(appId, undefined, 200);
    expect(r.state).toBe("FINISHED");
    expect(r.attempts).toBe(2);
    // No task container was released or killed by the new attempt: each task started once and finished once.
    expect(r.taskContainers?.killed).toBe(0);
    const { starts, dones } = runs(log);
    expect([...starts.values()]).toEqual([1, 1, 1, 1, 1]);
    expect([...dones.values()]).toEqual([1, 1, 1, 1, 1]);
  });

  it("a node manager still down when a restarted resource manager's window ends: its finished tasks count, none re-run", async () => {
    const log = sharedLog(logs, "late-node.log");
    const appId = await c.client.submit(markedJob("late-node", log, 5));
    await waitFor(() => runs(log).starts.size === 5, { what: "every task to start", timeoutMs: 30_000 });
    const status = await c.client.status(appId);
    const amNode = status.containers.find((x) => x.isAm && x.state !== "COMPLETE")?.nodeId;
    // A server running tasks but not the job manager (which would die with it).
    const late = readCluster(c.dir).nodes.find(
      (n) => n.nodeId !== amNode && status.containers.some((x) => !x.isAm && x.nodeId === n.nodeId),
    )!;
    expect(late).toBeDefined();
    const latePids = status.containers
      .filter((x) => !x.isAm && x.nodeId === late.nodeId)
      .map((x) => containerPid(late, appId, x.containerId));
    process.kill(readCluster(c.dir).rm.pid, "SIGKILL");
    // Every task finishes while the resource manager is down; the late server's node manager records their exits...
    await waitFor(() => runs(log).dones.size === 5, { what: "every task to finish", timeoutMs: 30_000 });
    await waitFor(() => latePids.every((p) => !alive(p)), { what: "the late server's node manager to reap its tasks" });
    // ...and dies before it could report them.
    process.kill(late.pid, "SIGKILL");
    await restartDaemon(c.dir, "rm");
    const restartedMs = Date.now();
    // The job manager registers again, claiming the late server's tasks (it reports progress only once registered)...
    await waitFor(async () => (await c.client.status(appId)).progress !== null, {
      what: "the job manager to register with the restarted resource manager",
    });
    // ...and the resync window ends before the late server comes back. That window expiring is what this test is
    // about, so this wait is a sleep: until the window has passed, with the margin the test has always had.
    await new Promise((r) => setTimeout(r, Math.max(0, restartedMs + RESYNC_WINDOW_MS + 2_500 - Date.now())));
    await restartDaemon(c.dir, late.nodeId);
    const r = await c.client.waitForCompletion(appId, undefined, 200);
    expect(r.state).toBe("FINISHED");
    expect(r.attempts).toBe(1);
    // The late server's successes were waited for, not answered LOST: no task ran twice.
    const { starts, dones } = runs(log);
    expect([...starts.values()]).toEqual([1, 1, 1, 1, 1]);
    expect([...dones.values()]).toEqual([1, 1, 1, 1, 1]);
    expect(r.taskContainers?.lost).toBe(0);
  });

  it("the containers of a node manager killed with -9 die with it, and their tasks finish elsewhere once", async () => {
    const log = sharedLog(logs, "nm.log");
    const appId = await c.client.submit(markedJob("nm-kill", log, 4));
    await waitFor(() => runs(log).starts.size === 4, { what: "every task to start", timeoutMs: 30_000 });
    const status = await c.client.status(appId);
    const victim = readCluster(c.dir).nodes.find((n) =>
      status.containers.some((x) => !x.isAm && x.state !== "COMPLETE" && x.nodeId === n.nodeId),
    )!;
    const pids = status.containers
      .filter((x) => x.nodeId === victim.nodeId && x.state !== "COMPLETE")
      .map((x) => containerPid(victim, appId, x.containerId));
    expect(pids.length).toBeGreaterThan(0);
    process.kill(victim.pid, "SIGKILL");
    await waitFor(() => pids.every((p) => !alive(p)), {
      what: "the killed node manager's containers to die",
      timeoutMs: 5_000,
    });
    const r = await c.client.waitForCompletion(appId, undefined, 200);
    expect(r.state).toBe("FINISHED");
    // Every task finished exactly once: the orphans were killed before they could finish beside their re-runs.
    const { dones } = runs(log);
    expect([...dones.keys()].sort()).toEqual(["0", "1", "2", "3"]);
    expect([...dones.values()]).toEqual([1, 1, 1, 1]);
    await restartDaemon(c.dir, victim.nodeId);
  });
});
