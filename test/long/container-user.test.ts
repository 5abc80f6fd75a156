/**
 * Containers never run as root (issue 12), through real daemons: node managers started as root run each job's job
 * manager and tasks under an account of the job's own (issue 42), which owns their work directories, logs and the
 * job's staging directory until the job ends and the account is retired; a task that tries to act as root fails, and
 * the cluster goes on serving. Needs root (only root switches users).
 */
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { containerProcessFile } from "../../common/container-leftovers.js";
import { lookupAccount } from "../../nodemanager/run-as.js";
import { DEFAULT_UID_RANGE, parseUidRange } from "../../nodemanager/uid-leases.js";
import { waitFor } from "../wait-for.js";
import { cpuVertex, startTestCluster, taskOutputs } from "../integration/harness.js";
import type { TestCluster } from "../integration/harness.js";

const asRoot = process.getuid?.() === 0;
if (!asRoot) console.log("skipping container-user.test.ts: node managers switch users only when they run as root");

describe.skipIf(!asRoot)("a cluster whose node managers run as root", () => {
  const nobody = lookupAccount("nobody")!;
  const range = parseUidRange(DEFAULT_UID_RANGE);
  let c: TestCluster;
  let leaseDir = "";
  beforeAll(async () => {
    leaseDir = mkdtempSync(join(tmpdir(), "harvest-container-user-leases-"));
    c = await startTestCluster({
      idleServers: 2,
      storage: false,
      // A finished job's account is retired 4 s after its end (its outputs and the uid go), so the test sees both.
      nm: { containerUidLeaseDir: leaseDir, finishedAppRetentionMs: 4_000 },
    });
  });
  afterAll(async () => {
    await c?.stop();
    rmSync(leaseDir, { recursive: true, force: true });
  });

  /** Every container work directory of `appId`, by node. */
  const workDirsOf = (appId: string): { nodeDir: string; dir: string }[] =>
    c.desc.nodes.flatMap((n) => {
      const appDir = join(n.dataDir, "containers", appId);
      return existsSync(appDir)
        ? readdirSync(appDir, { withFileTypes: true })
            .filter((e) => e.isDirectory())
            .map((e) => ({ nodeDir: n.dataDir, dir: join(appDir, e.name) }))
        : [];
    });
  const whoAmI = (name: string): string =>
    JSON.stringify({
      name,
      vertices: [
        {
          name: "who",
          parallelism: 2,
          command: ["/bin/sh", "-c", 'id -u > "$HARVEST_OUTPUT_DIR/uid"; echo "ran as $(id -u)"'],
          resources: { vcores: 1, memoryMb: 128 },
        },
      ],
    });

  it("runs each job under an account of its own, which owns its directories until the job is retired", async () => {
    const appId = await c.client.submit(whoAmI("who-am-i"));
    const r = await c.client.waitForCompletion(appId, undefined, 200);
    expect(r.outcome, r.diagnostics).toBe("JOB_SUCCEEDED");
    const uids = taskOutputs(c.dir, appId, "uid").map((f) => Number(readFileSync(f, "utf8")));
    expect(uids).toHaveLength(2);
    for (const uid of uids) {
      expect(uid).toBeGreaterThanOrEqual(range.min);
      expect(uid).toBeLessThanOrEqual(range.max);
      expect(uid).not.toBe(nobody.uid);
    }
    // Every container's work directory and logs are the job's account's (one per server: the job manager's and its
    // tasks' on a server share it); the launch records beside them stay root's.
    const dirs = workDirsOf(appId);
    expect(dirs).toHaveLength(3);
    const byNode = new Map<string, number>();
    for (const { nodeDir, dir } of dirs) {
      const uid = statSync(dir).uid;
      expect(uid, dir).toBeGreaterThanOrEqual(range.min);
      expect(byNode.get(nodeDir) ?? uid, dir).toBe(uid);
      byNode.set(nodeDir, uid);
      expect(statSync(join(dir, "stderr")).uid, dir).toBe(uid);
      expect(statSync(containerProcessFile(dir)).uid, dir).toBe(0);
    }
    // The job's staging directory and the job manager's journal are its account's; nobody else may read them.
    const jobDir = join(c.dir, "rm", "staging", appId);
    const st = statSync(jobDir);
    expect([st.mode & 0o777]).toEqual([0o700]);
    expect([...byNode.values()]).toContain(st.uid);

    // A second job, of the same user, gets other accounts.
    const second = await c.client.submit(whoAmI("who-am-i-again"));
    expect((await c.client.waitForCompletion(second, undefined, 200)).outcome).toBe("JOB_SUCCEEDED");
    const secondUids = new Set(workDirsOf(second).map(({ dir }) => statSync(dir).uid));
    for (const uid of byNode.values()) expect(secondUids.has(uid)).toBe(false);

    // Once the job has ended its account is retired: the uid is released, what stays (the logs) is root's, and the
    // node manager still serves the logs.
    await waitFor(() => readdirSync(leaseDir).every((f) => ![...byNode.values()].includes(Number(f))), {
      what: "the job's account to be retired",
      timeoutMs: 30_000,
      intervalMs: 100,
    });
    for (const { dir } of workDirsOf(appId)) {
      expect(statSync(dir).uid, dir).toBe(0);
      expect(statSync(join(dir, "stdout")).uid, dir).toBe(0);
      expect(existsSync(join(dir, "tmp")), dir).toBe(false);
    }
    expect(statSync(jobDir).uid).toBe(0);
    const task = r.containers.find((x) => !x.isAm)!;
    expect(await c.client.containerLog(appId, task.containerId, "stdout")).toMatch(/^ran as \d+\n$/);
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
