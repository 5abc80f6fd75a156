/** Job-manager attempts: a job manager that fails, or never registers, is restarted once and then fails the job. */
import { afterEach, describe, expect, it } from "vitest";
import { cpuVertex, startLocalCluster } from "./harness.js";
import type { LocalCluster } from "./harness.js";
import type { RmStore } from "../../resourcemanager/state-store.js";

describe("job-manager attempts", () => {
  let c: LocalCluster | undefined;
  afterEach(async () => c?.stop());

  it("fails the job after the job manager fails twice, saying so", async () => {
    c = await startLocalCluster({ rm: { jobManagerCommand: [process.execPath, "-e", "process.exit(3)"] } });
    const appId = await c.client.submit(JSON.stringify({ name: "bad-am", vertices: [cpuVertex("a", 1)] }));
    const r = await c.client.waitForCompletion(appId, undefined, 100);
    expect(r.state).toBe("FAILED");
    expect(r.attempts).toBe(2);
    expect(r.amContainers?.failed).toBe(2);
    expect(r.diagnostics).toContain("job manager failed 2 time(s)");
    expect((await c.client.history("bad-am"))[0]?.outcome).toBe("JOB_FAILED");
  });

  it("has the job's history entry stored by the time it reports the job ended, however slow the store", async () => {
    c = await startLocalCluster({ rm: { jobManagerCommand: [process.execPath, "-e", "process.exit(3)"] } });
    // The store takes 400 ms to record an end, so a report that ran ahead of it would be seen by the polling below.
    const store = (c.rm as unknown as { store: RmStore }).store;
    const finishApp = store.finishApp.bind(store);
    store.finishApp = async (...args) => {
      await new Promise((resolve) => setTimeout(resolve, 400));
      return finishApp(...args);
    };
    const appId = await c.client.submit(JSON.stringify({ name: "slow-store", vertices: [cpuVertex("a", 1)] }));
    expect((await c.client.waitForCompletion(appId, undefined, 10)).state).toBe("FAILED");
    expect((await c.client.history("slow-store")).map((h) => h.outcome)).toEqual(["JOB_FAILED"]);
  });

  it("restarts a job manager that never registers, then fails the job", async () => {
    c = await startLocalCluster({
      rm: {
        jobManagerCommand: [process.execPath, "-e", "setTimeout(() => {}, 60000)"],
        amExpiryMs: 1_500,
        monitorIntervalMs: 100,
      },
    });
    const appId = await c.client.submit(JSON.stringify({ name: "mute-am", vertices: [cpuVertex("a", 1)] }));
    const r = await c.client.waitForCompletion(appId, undefined, 100);
    expect(r.state).toBe("FAILED");
    expect(r.attempts).toBe(2);
    expect(r.diagnostics).toContain("did not register");
  });
});
