/**
 * Algorithm 1 on a real cluster (resource manager, node managers, job managers and tasks as processes on loopback):
 * tenants and history registered through the admin API, classes rebuilt, and each job's task containers granted only
 * on the servers of the classes chosen for its type; a job that fits no class waits and says why.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { TenantAdminClient } from "../../client/tenant-admin-client.js";
import type { JobReport } from "../../client/job-client.js";
import { SeededRng } from "../../common/rng.js";
import { cpuVertex, startTestCluster, traceSpec, waitForJob } from "../integration/harness.js";
import type { TestCluster } from "../integration/harness.js";

const DAY_S = 86_400;

function history(days: number, f: (t: number) => number): Buffer {
  const end = Math.floor(Date.now() / 1000 / 300) * 300;
  const lines = ["time_s,cpu_pct"];
  for (let t = end - days * DAY_S; t < end; t += 300) lines.push(`${t},${Math.min(100, Math.max(0, f(t))).toFixed(2)}`);
  return Buffer.from(lines.join("\n") + "\n");
}

function taskServers(r: JobReport): string[] {
  return [...new Set(r.containers.filter((c) => !c.isAm).map((c) => c.nodeId))].sort();
}

describe("history-based task placement (Algorithm 1)", () => {
  let c: TestCluster;
  let admin: TenantAdminClient;
  let traces: string;
  // Which servers each tenant (and so each pattern's class) owns.
  const servers = { web: ["server-1"], crawler: ["server-2", "server-3"], batch: ["server-4"] };

  beforeAll(async () => {
    traces = mkdtempSync(join(tmpdir(), "harvest-alg1-"));
    const quiet = traceSpec(traces, "quiet", 300, [5, 5, 5, 5]);
    c = await startTestCluster({
      primaries: [quiet, quiet, quiet, quiet],
      rm: {
        schedulerPolicy: "history",
        // One pattern per job type, so the class each type gets is certain: short -> unpredictable, medium ->
        // periodic, long -> constant (the paper's first choices).
        classWeights: {
          short: { unpredictable: 1, periodic: 0, constant: 0 },
          medium: { periodic: 1, constant: 0, unpredictable: 0 },
          long: { constant: 1, periodic: 0, unpredictable: 0 },
        },
        classWaitMs: 4_000,
        // seeds/004's Algorithm 1 as the paper has it: a job no class holds waits, no saturation guard, and a killed
        // job stays in its classes (four small servers are near saturation with one job;
        // test/unit/history-fallback.test.ts covers all three).
        classFallback: "wait",
        classSaturationShare: 1,
        classKilledJobsLeave: false,
      },
      storage: false,
    });
    admin = new TenantAdminClient(c.desc.rm.address, c.desc.security);
    const rng = new SeededRng(3);
    let walk = 40;
    const series = {
      web: history(30, (t) => 45 + 30 * Math.sin((2 * Math.PI * t) / DAY_S) + rng.normal(0, 3)),
      crawler: history(30, () => 20 + rng.normal(0, 1)),
      batch: history(30, () => (walk = Math.min(90, Math.max(5, walk + rng.normal(0, 6))))),
    };
    for (const [name, owned] of Object.entries(servers)) {
      await admin.register({ name, environment: "prod" });
      await admin.assign(name, owned);
      await admin.importHistoryData(series[name as keyof typeof series], { format: "csv", tenant: name });
    }
    const classes = await admin.recluster();
    expect(classes.classes.map((k) => [k.pattern, k.servers])).toEqual([
      ["periodic", servers.web],
      ["constant", servers.crawler],
      ["unpredictable", servers.batch],
    ]);
  });
  afterAll(async () => {
    admin?.close();
    await c?.stop();
    rmSync(traces, { recursive: true, force: true });
  });

  const job = (name: string, holdSeconds: number, parallelism = 1): string =>
    JSON.stringify({ name, vertices: [cpuVertex("work", parallelism, { holdSeconds })] });

  it("waits while no class has room for the job, says why, and runs anywhere after classWaitMs", async () => {
    // 12 one-core tasks at once: more than the four 4-core servers hold beside their reserves.
    const appId = await c.client.submit(job("wide", 20, 12));
    const waiting = await waitForJob(c.client, appId, (r) => r.placementNote.startsWith("waiting:"));
    expect(waiting.placementNote).toMatch(/no class has headroom for 12\.0 vcores/);
    expect(taskServers(waiting)).toEqual([]);
    const running = await waitForJob(c.client, appId, (r) => taskServers(r).length > 0);
    expect(running.placementNote).toMatch(/runs on any server/);
    // Killed, so that it does not count in the job history the next test's job types come from.
    await c.client.kill(appId);
  });

  it("places never-seen jobs as medium, then by their history as short or long, each only in its class", async () => {
    // First runs: nobody has history, so all are medium and go to the periodic class.
    const firstRuns: Record<string, number> = { quick: 0, middling: 3, slow: 8 };
    for (const [name, hold] of Object.entries(firstRuns)) {
      const r = await c.client.waitForCompletion(await c.client.submit(job(name, hold)), undefined, 200);
      expect(r.state).toBe("FINISHED");
      expect(r.jobType).toBe("medium");
      expect(r.classes).toEqual(["periodic-0"]);
      expect(taskServers(r)).toEqual(servers.web);
    }
    // Second runs: the history's terciles make "quick" short and "slow" long.
    const quick = await c.client.submit(job("quick", 0));
    const slow = await c.client.submit(job("slow", 30));
    const q = await c.client.waitForCompletion(quick, undefined, 200);
    expect(q.jobType).toBe("short");
    expect(q.classes).toEqual(["unpredictable-0"]);
    expect(taskServers(q)).toEqual(servers.batch);
    const s = await waitForJob(c.client, slow, (r) => r.containers.some((x) => !x.isAm && x.state === "RUNNING"));
    expect(s.jobType).toBe("long");
    expect(s.classes).toEqual(["constant-0"]);
    expect(servers.crawler).toEqual(expect.arrayContaining(taskServers(s)));
    expect(taskServers(s).length).toBeGreaterThan(0);
    await c.client.kill(slow);
  });
});
