/**
 * A running task's progress and counters reach `harvest job status` while it runs (harvest/task's status file, read by
 * its node manager and sent with the container's status), and its final counters when it has ended. Tasks that write
 * hostile status files (a link to /etc/shadow, a FIFO, a huge file, garbage, a non-finite number) are ignored, counted
 * in the node manager's metrics, and the node manager goes on serving. A restarted resource manager gets every running
 * task's last report again from the node's registration.
 */
import { chmodSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { liveVertexProgress } from "../../common/live-progress.js";
import type { LiveVertexProgress } from "../../common/live-progress.js";
import { sumSamples } from "../prom-text.js";
import { runHarvest } from "../processes.js";
import { restartLocalRm, startLocalCluster, suiteCluster, waitForJob } from "./harness.js";
import { httpsGet, httpUrlOf, scrape } from "./metrics-scrape.js";

/**
 * The probe task: "good" reports progress 0.5 and 42 records, waits for the release file, adds 8 records and ends;
 * "hostile" task i writes the i-th kind of bad status file in place of its own, then waits for the release file.
 */
const PROBE = `
import { execFileSync } from "node:child_process";
import { existsSync, symlinkSync, writeFileSync } from "node:fs";
const t = await import(process.env.HARVEST_HOME + "/dist/task/index.js");
const [mode, release] = process.argv.slice(2);
const status = process.env.HARVEST_STATUS_FILE;
t.runTask("progress-probe", async () => {
  if (mode === "good") {
    t.incrementCounter("records", 42);
    t.reportProgress(0.5);
  } else {
    const kinds = [
      () => symlinkSync("/etc/shadow", status),
      () => execFileSync("mkfifo", [status]),
      () => writeFileSync(status, '{"progress":0.9,"pad":"' + "x".repeat(4 << 20) + '"}'),
      () => writeFileSync(status, "\\u0000 root:x:0:0 not json"),
      () => writeFileSync(status, '{"progress":1e999,"counters":{"x":1}}'),
    ];
    kinds[Number(process.env.HARVEST_TASK_INDEX)]();
  }
  while (!existsSync(release)) await new Promise((r) => setTimeout(r, 100));
  if (mode === "good") t.incrementCounter("records", 8);
});
`;

describe("task progress and counters while a job runs", () => {
  const cluster = suiteCluster({ idleServers: 1, vcores: 4 });

  it("shows a running task's 0.5 and its counter in job status, then the final counters; hostile files are ignored", async () => {
    const c = cluster();
    // The task runs as the node's container account, which must reach the probe and the release file.
    chmodSync(c.dir, 0o755);
    chmodSync(c.work, 0o755);
    const probe = join(c.work, "probe.mjs");
    const release = join(c.work, "release");
    writeFileSync(probe, PROBE, { mode: 0o644 });
    const vertex = (name: string, parallelism: number, mode: string) => ({
      name,
      parallelism,
      command: ["node", probe, mode, release],
      resources: { vcores: 0.25, memoryMb: 128 },
    });
    const appId = await c.client.submit(
      JSON.stringify({
        name: "progress-probe",
        vertices: [vertex("probe", 1, "good"), vertex("hostile", 5, "hostile")],
        edges: [],
      }),
    );

    const live = (r: Parameters<typeof liveVertexProgress>[0], name: string): LiveVertexProgress | undefined =>
      liveVertexProgress(r).find((v) => v.name === name);
    const running = await waitForJob(
      c.client,
      appId,
      (r) =>
        live(r, "probe")?.progress === 0.5 &&
        r.containers.filter((x) => x.vertex === "hostile" && x.state === "RUNNING").length === 5,
    );
    expect(live(running, "probe")).toMatchObject({ progress: 0.5, counters: { records: 42 }, succeeded: 0 });
    const probeRef = running.containers.find((x) => x.vertex === "probe");
    expect(probeRef).toMatchObject({ taskIndex: 0, state: "RUNNING", taskReport: { progress: 0.5 } });

    // Every hostile file was read and refused, once each; the node manager still heartbeats (the node stays RUNNING).
    const nm = c.desc.nodes[0]!;
    let rejected = new Map<string, number>();
    const reasons = ["not_regular", "too_big", "not_json", "bad_shape"];
    await expect
      .poll(
        async () => {
          const m = await scrape(c, nm);
          rejected = new Map(
            reasons.map((reason) => [reason, sumSamples(m, "harvest_nm_task_status_rejected_total", { reason })]),
          );
          return [...rejected.values()].reduce((a, b) => a + b, 0);
        },
        { timeout: 20_000, interval: 500 },
      )
      .toBe(5);
    expect(Object.fromEntries(rejected)).toEqual({ not_regular: 2, too_big: 1, not_json: 1, bad_shape: 1 });
    const now = await c.client.status(appId);
    for (const ref of now.containers.filter((x) => x.vertex === "hostile")) expect(ref.taskReport).toBeNull();
    expect(live(now, "hostile")).toMatchObject({ progress: 0, counters: {} });
    expect((await c.client.nodes()).map((n) => n.state)).toEqual(["RUNNING"]);

    // What a user sees: the CLI's status, for people and as JSON.
    const env = { HARVEST_CLUSTER_DIR: c.dir };
    const human = runHarvest(["job", "status", appId], { env });
    expect(human.code, human.stderr).toBe(0);
    expect(human.stdout).toMatch(/probe\s+\[#{10}\.{10}\]\s+0\/1\s+50%/);
    expect(human.stdout).toContain("counters: records 42 (running tasks' so far included)");
    const json = runHarvest(["job", "status", appId, "--json"], { env });
    expect(json.code, json.stderr).toBe(0);
    const parsed = JSON.parse(json.stdout) as { vertexProgress: LiveVertexProgress[] };
    expect(parsed.vertexProgress.find((v) => v.name === "probe")).toMatchObject({
      progress: 0.5,
      counters: { records: 42 },
      runningCounters: { records: 42 },
    });

    // The job page: the vertex's progress and counters, and the running task's progress.
    const page = await httpsGet(c, `${httpUrlOf(c, c.desc.rm)}/jobs/${appId}`);
    expect(page.status).toBe(200);
    const row = /<tr[^>]*data-vertex="probe"[^>]*>([\s\S]*?)<\/tr>/.exec(page.body)?.[1] ?? "";
    expect(row).toMatch(/class="vertex-progress"[^>]*>[\s\S]*50%/);
    expect(row).toMatch(/class="vertex-counters"[^>]*>[\s\S]*records 42/);
    const task = new RegExp(`<tr[^>]*data-container="${probeRef!.containerId}"[^>]*>([\\s\\S]*?)</tr>`).exec(page.body);
    expect(task?.[1]).toContain("probe[0]");
    expect(task?.[1]).toMatch(/class="container-progress"[^>]*><span class="pct">50%</);

    writeFileSync(release, "");
    const done = await waitForJob(c.client, appId, () => false);
    expect(done.state).toBe("FINISHED");
    expect(live(done, "probe")).toMatchObject({ progress: 1, counters: { records: 50 }, runningCounters: {} });
    expect(live(done, "hostile")).toMatchObject({ progress: 1, succeeded: 5 });
  });
});

describe("task progress across a resource manager restart", () => {
  it("shows a running task's last report again once its node has registered with the new resource manager", async () => {
    const c = await startLocalCluster();
    try {
      const probe = join(c.dir, "probe.mjs");
      const release = join(c.dir, "release");
      writeFileSync(probe, PROBE, { mode: 0o644 });
      const appId = await c.client.submit(
        JSON.stringify({
          name: "progress-restart",
          vertices: [
            {
              name: "probe",
              parallelism: 1,
              command: ["node", probe, "good", release],
              resources: { vcores: 0.25, memoryMb: 128 },
            },
          ],
          edges: [],
        }),
      );
      const probeProgress = (r: Parameters<typeof liveVertexProgress>[0]) =>
        liveVertexProgress(r).find((v) => v.name === "probe")?.progress;
      await waitForJob(c.client, appId, (r) => probeProgress(r) === 0.5);
      // The task reports nothing new meanwhile: only the registration can bring its report to the new one.
      await restartLocalRm(c);
      const after = await waitForJob(c.client, appId, (r) => probeProgress(r) === 0.5, {
        timeoutMs: 60_000,
        retryOnError: true,
      });
      expect(liveVertexProgress(after).find((v) => v.name === "probe")).toMatchObject({ counters: { records: 42 } });
      writeFileSync(release, "");
      const done = await waitForJob(c.client, appId, () => false);
      expect(done.state).toBe("FINISHED");
      expect(liveVertexProgress(done).find((v) => v.name === "probe")).toMatchObject({ counters: { records: 50 } });
    } finally {
      await c.stop();
    }
  }, 180_000);
});
