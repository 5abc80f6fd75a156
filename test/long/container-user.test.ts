/**
 * Containers never run as root (issue 12), through real daemons: node managers started as root run job managers and
 * tasks as an unprivileged account, which owns their work directories, logs and the job's staging directory; a task
 * that tries to act as root fails, and the cluster goes on serving. Needs root (only root switches users).
 */
import { existsSync, mkdirSync, readdirSync, readFileSync, statSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { containerProcessFile } from "../../common/container-leftovers.js";
import { lookupAccount } from "../../nodemanager/run-as.js";
import { cpuVertex, startTestCluster, taskOutputs } from "../integration/harness.js";
import type { TestCluster } from "../integration/harness.js";

const asRoot = process.getuid?.() === 0;
if (!asRoot) console.log("skipping container-user.test.ts: node managers switch users only when they run as root");

describe.skipIf(!asRoot)("a cluster whose node managers run as root", () => {
  const nobody = lookupAccount("nobody")!;
  let c: TestCluster;
  beforeAll(async () => {
    c = await startTestCluster({ idleServers: 2, storage: false });
  });
  afterAll(() => c?.stop());

  it("runs the job manager and every task as the fallback account, which owns their directories", async () => {
    const appId = await c.client.submit(
      JSON.stringify({
        name: "who-am-i",
        vertices: [
          {
            name: "who",
            parallelism: 2,
            command: ["/bin/sh", "-c", 'id -u > "$HARVEST_OUTPUT_DIR/uid"; echo "ran as $(id -un)"'],
            resources: { vcores: 1, memoryMb: 128 },
          },
        ],
      }),
    );
    const r = await c.client.waitForCompletion(appId, undefined, 200);
    expect(r.outcome, r.diagnostics).toBe("JOB_SUCCEEDED");

    const jobDir = join(c.dir, "rm", "staging", appId);
    const uids = taskOutputs(c.dir, appId, "uid").map((f) => Number(readFileSync(f, "utf8")));
    expect(uids).toEqual([nobody.uid, nobody.uid]);
    // The job's staging directory and the job manager's journal are the account's; nobody else may read them.
    const st = statSync(jobDir);
    expect([st.uid, st.mode & 0o777]).toEqual([nobody.uid, 0o700]);
    expect(statSync(join(jobDir, "journal.jsonl")).uid).toBe(nobody.uid);
    // Every container's work directory and logs are the account's; the launch records beside them stay root's.
    const workDirs = c.desc.nodes.flatMap((n) => {
      const appDir = join(n.dataDir, "containers", appId);
      return existsSync(appDir)
        ? readdirSync(appDir, { withFileTypes: true })
            .filter((e) => e.isDirectory())
            .map((e) => join(appDir, e.name))
        : [];
    });
    expect(workDirs).toHaveLength(3);
    for (const dir of workDirs) {
      expect(statSync(dir).uid, dir).toBe(nobody.uid);
      expect(statSync(join(dir, "stderr")).uid, dir).toBe(nobody.uid);
      expect(statSync(containerProcessFile(dir)).uid, dir).toBe(0);
    }
    // The node manager serves the logs the account's containers wrote.
    const task = r.containers.find((x) => !x.isAm)!;
    expect(await c.client.containerLog(appId, task.containerId, "stdout")).toBe("ran as nobody\n");
  });

  it("fails a job whose task tries to act as root, and serves the next job", async () => {
    // Reachable by every account, writable by root alone.
    const rootOnly = join(c.dir, "root-only");
    mkdirSync(rootOnly, { mode: 0o755 });
    const doomed = await c.client.submit(
      JSON.stringify({
        name: "act-as-root",
        vertices: [
          {
            name: "grab",
            parallelism: 1,
            command: [
              "/bin/sh",
              "-c",
              `echo pwned > ${rootOnly}/pwned; cat /etc/shadow > "$HARVEST_OUTPUT_DIR/shadow"`,
            ],
            resources: { vcores: 1, memoryMb: 128 },
          },
        ],
      }),
    );
    const failed = await c.client.waitForCompletion(doomed, undefined, 200);
    expect(failed.outcome).toBe("JOB_FAILED");
    expect(failed.taskContainers?.failed).toBe(4);
    expect(failed.diagnostics).toContain("grab[0] failed 4 times");
    expect(existsSync(join(rootOnly, "pwned"))).toBe(false);
    for (const f of taskOutputs(c.dir, doomed, "shadow")) expect(readFileSync(f, "utf8"), f).toBe("");

    const next = await c.client.submit(JSON.stringify({ name: "after", vertices: [cpuVertex("ok", 2)] }));
    const ok = await c.client.waitForCompletion(next, undefined, 200);
    expect(ok.outcome, ok.diagnostics).toBe("JOB_SUCCEEDED");
  });
});
