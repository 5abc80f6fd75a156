/** The resource manager's state survives a restart: jobs, their outcomes and the job history are in LevelDB. */
import { waitFor } from "../wait-for.js";
import { afterEach, describe, expect, it } from "vitest";
import { JobClient } from "../../client/job-client.js";
import { cpuVertex, restartLocalRm, startLocalCluster, waitForJob } from "../integration/harness.js";
import type { LocalCluster } from "../integration/harness.js";

describe("a resource manager's store", () => {
  // Each test starts its own cluster.
  let c: LocalCluster | undefined;
  afterEach(async () => c?.stop());

  it("keeps finished jobs and history, and the unfinished job's running attempt", async () => {
    c = await startLocalCluster({ nm: { reconnectMaxMs: 500 } });
    const { client } = c;
    const done = await client.submit(JSON.stringify({ name: "quick", vertices: [cpuVertex("a", 2)] }));
    expect((await client.waitForCompletion(done, undefined, 200)).state).toBe("FINISHED");
    const pending = await client.submit(
      JSON.stringify({ name: "long", vertices: [cpuVertex("a", 1, { holdSeconds: 3 })] }),
    );
    await waitForJob(client, pending, (r) => r.state === "RUNNING");
    const lastDay = async (url: string | undefined) =>
      (await (await fetch(`${url}/ws/v1/cluster/usage-history`)).json()) as {
        samples: { timeMs: number }[];
        counters: { sinceMs: number; submitted: number; finished: number };
      };
    const before = await lastDay(c.rm.httpUrl);
    expect(before.counters).toMatchObject({ submitted: 2, finished: 1 });
    // Same store, same port, so the node manager and the job manager find it again.
    const rm = await restartLocalRm(c);
    // The cluster's last day goes on: the samples and counters from before the restart, and new ones.
    const after = await lastDay(rm.httpUrl);
    expect(after.counters).toMatchObject({ sinceMs: before.counters.sinceMs, submitted: 2, finished: 1 });
    expect(after.samples.map((x) => x.timeMs).slice(0, before.samples.length)).toEqual(
      before.samples.map((x) => x.timeMs),
    );
    expect(after.samples.length).toBe(before.samples.length + 1);
    const again = new JobClient(rm.address);
    c.onStop.push(async () => again.close());
    const apps = await again.list();
    expect(apps.find((a) => a.appId === done)?.state).toBe("FINISHED");
    expect((await again.history("quick"))[0]?.appId).toBe(done);
    const resumed = await again.waitForCompletion(pending, undefined, 200);
    expect(resumed.state).toBe("FINISHED");
    // Work-preserving: the node manager reported the job manager and its task, which went on.
    expect(resumed.attempts).toBe(1);
    expect(resumed.taskContainers?.killed).toBe(0);
    // New ids do not collide with the ones handed out before the restart.
    const next = await again.submit(JSON.stringify({ name: "after", vertices: [cpuVertex("a", 1)] }));
    expect([done, pending]).not.toContain(next);
  });

  it("forgets the oldest finished jobs beyond the limit but keeps all of them in the job history", async () => {
    c = await startLocalCluster({ rm: { maxCompletedApps: 2 } });
    const { client } = c;
    const ids: string[] = [];
    for (let i = 0; i < 3; i++) {
      const id = await client.submit(JSON.stringify({ name: `job-${i}`, vertices: [cpuVertex("a", 1)] }));
      expect((await client.waitForCompletion(id, undefined, 100)).state).toBe("FINISHED");
      ids.push(id);
    }
    // Once the last job manager's exit is recorded, the oldest goes.
    await waitFor(async () => !(await client.list()).some((a) => a.appId === ids[0]), {
      what: "the oldest finished job to be forgotten",
    });
    const listed = (await client.list()).map((a) => a.appId);
    expect(listed).not.toContain(ids[0]);
    expect(listed).toContain(ids[2]);
    await expect(client.status(ids[0]!)).rejects.toMatchObject({ code: "APP_NOT_FOUND" });
    expect((await client.history()).map((h) => h.appId).sort()).toEqual([...ids].sort());
  });

  // Found by the soak: a job manager's asks reached the restarted resource manager before any node had re-registered,
  // were refused as larger than every node (there was none), and the job manager failed.
  it("does not refuse a running job's asks before the nodes have re-registered", async () => {
    c = await startLocalCluster({ nm: { reconnectMinMs: 4_000, reconnectMaxMs: 4_000 } });
    // Two of three tasks fit beside the job manager: one stays asked for across the restart.
    const appId = await c.client.submit(
      JSON.stringify({ name: "late-nodes", vertices: [cpuVertex("a", 3, { holdSeconds: 3, vcores: 1.5 })] }),
    );
    await waitForJob(c.client, appId, (r) => (r.progress?.vertices[0]?.running ?? 0) >= 2);
    const rm = await restartLocalRm(c);
    const again = new JobClient(rm.address);
    c.onStop.push(async () => again.close());
    const r = await again.waitForCompletion(appId, undefined, 200);
    expect(r.state).toBe("FINISHED");
    expect(r.attempts).toBe(1);
  });
});
