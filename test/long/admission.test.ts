/**
 * Admission control through a real resource manager and node manager: a job that would push the harvested allocation
 * past the policy's threshold waits in the queue (visible, with its reason) until the job before it ends; a job no
 * idle cluster could admit is refused at submit; a queued job survives a resource manager restart.
 */
import { afterEach, describe, expect, it } from "vitest";
import { isHarvestError } from "../../common/errors.js";
import { cpuVertex, startLocalCluster, waitForJob } from "../integration/harness.js";
import type { LocalCluster } from "../integration/harness.js";

/** A job manager (0.5 cores) and two 1-core tasks: 2.5 cores of the node's 3.6 harvestable (4 cores, 10 % reserve). */
const job = (name: string, holdSeconds: number): string =>
  JSON.stringify({ name, vertices: [cpuVertex("work", 2, { holdSeconds })] });

describe("admission control (zeroth moment, threshold 0.75)", () => {
  let c: LocalCluster | undefined;
  afterEach(async () => c?.stop());

  it("queues a job until the harvested share leaves room for it, says why it waits, and refuses a job that can never fit", async () => {
    c = await startLocalCluster({
      rm: { admission: "zeroth", admissionOptions: { zerothThreshold: 0.75 }, monitorIntervalMs: 100 },
    });
    const first = await c.client.submit(job("first", 4));
    const second = await c.client.submit(job("second", 0));

    // 2.5 / 3.6 = 0.69 <= 0.75 admits the first; 5.0 / 3.6 = 1.39 > 0.75 holds the second.
    let s = await c.client.status(second);
    expect(s.state).toBe("QUEUED");
    expect(s.diagnostics).toMatch(/waiting for admission/);
    expect(s.diagnostics).toMatch(/zeroth/);
    const running = await waitForJob(c.client, first, (r) => r.state === "RUNNING");
    expect(running.state).toBe("RUNNING");
    expect((await c.client.status(second)).state).toBe("QUEUED");

    // The first ends; the second is admitted and runs to the end.
    const done1 = await c.client.waitForCompletion(first, undefined, 100);
    expect(done1.outcome).toBe("JOB_SUCCEEDED");
    s = await c.client.waitForCompletion(second, undefined, 100);
    expect(s.outcome).toBe("JOB_SUCCEEDED");
    expect(s.submitMs).toBeLessThan(done1.finishMs);
    expect(s.startMs).toBeGreaterThanOrEqual(done1.finishMs - 1_000);

    // A job manager and four 1-core tasks: 4.5 cores (capped at the cluster's 4 + 0.5) > 0.75 x 3.6, even idle.
    const wide = JSON.stringify({ name: "wide", vertices: [cpuVertex("work", 4)] });
    const err = await c.client.submit(wide).catch((e: unknown) => e);
    expect(isHarvestError(err) && err.code).toBe("ADMISSION_IMPOSSIBLE");
    expect((await c.client.list()).map((r) => r.name)).not.toContain("wide");
  });

  it("keeps a queued job queued across a resource manager restart, and admits it after", async () => {
    c = await startLocalCluster({
      rm: { admission: "zeroth", admissionOptions: { zerothThreshold: 0.75 }, monitorIntervalMs: 100 },
    });
    const first = await c.client.submit(job("first", 3));
    const second = await c.client.submit(job("second", 0));
    expect((await c.client.status(second)).state).toBe("QUEUED");
    await c.rm.stop();
    const { ResourceManager } = await import("../../resourcemanager/resource-manager.js");
    const { Logger } = await import("../../common/log.js");
    const rm2 = new ResourceManager(
      { ...c.rm.options, port: Number(c.rm.address.split(":").pop()) },
      { logger: new Logger("test", "error") },
    );
    await rm2.start();
    c.onStop.push(() => rm2.stop());
    expect((await c.client.status(second)).state).toBe("QUEUED");
    const r1 = await c.client.waitForCompletion(first, undefined, 100);
    expect(r1.outcome).toBe("JOB_SUCCEEDED");
    const r2 = await c.client.waitForCompletion(second, undefined, 100);
    expect(r2.outcome).toBe("JOB_SUCCEEDED");
  });
});
