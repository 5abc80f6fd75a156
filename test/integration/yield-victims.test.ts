/**
 * The node manager's victim order on a real node: with `victimOrder: "work-lost"` the progress a running task reports
 * (harvest/task's status file, polled at every heartbeat) reaches the yield controller, which spares a task near its
 * end and kills an older one that has barely begun, where youngest-first would kill the younger.
 */
import { chmodSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { JobClient } from "../../client/job-client.js";
import { liveVertexProgress } from "../../common/live-progress.js";
import { Logger } from "../../common/log.js";
import { StepPrimaryMonitor } from "../../common/step-monitor.js";
import { NodeManager } from "../../nodemanager/node-manager.js";
import type { PreemptionEvent } from "../../nodemanager/node-manager.js";
import { ResourceManager } from "../../resourcemanager/resource-manager.js";
import { requireBuild, waitForJob } from "./harness.js";
import { waitFor } from "../wait-for.js";

/** A task that reports the progress it is given and then holds its container until killed. */
const PROBE = `
const t = await import(process.env.HARVEST_HOME + "/dist/task/index.js");
const progress = Number(process.argv[2]);
t.runTask("victim-probe", async () => {
  t.reportProgress(progress);
  await new Promise((r) => setTimeout(r, 600_000));
});
`;

describe("the node manager's work-lost victim order", () => {
  const quiet = new Logger("test", "error");
  const monitor = new StepPrimaryMonitor({ capacityMilli: 4000 });
  const preempted: PreemptionEvent[] = [];
  let dir: string;
  let rm: ResourceManager;
  let nm: NodeManager;
  let client: JobClient;
  beforeAll(async () => {
    requireBuild();
    dir = mkdtempSync(join(tmpdir(), "harvest-yield-victims-"));
    // The containers run as an unprivileged account when the tests run as root: it must reach the probe.
    chmodSync(dir, 0o755);
    writeFileSync(join(dir, "probe.mjs"), PROBE, { mode: 0o644 });
    // Two jobs at once on one node: job managers unlimited (the default 0.1 of the harvestable cores runs one).
    rm = new ResourceManager({ dataDir: join(dir, "rm"), maxAmShare: 1 }, { logger: quiet });
    await rm.start();
    nm = new NodeManager(
      {
        nodeId: "n1",
        rmAddress: rm.address,
        dataDir: join(dir, "n1"),
        cgroups: "none",
        yieldTickMs: 100,
        victimOrder: "work-lost",
        // A minute: after a few seconds the task at 0.99 has a few ms left, the one at 0.01 minutes.
        victimNearEndMs: 60_000,
      },
      { logger: quiet, monitor, onPreempt: (e) => preempted.push(e) },
    );
    await nm.start();
    client = new JobClient(rm.address);
    await waitFor(async () => ((await client.nodes()).length > 0 ? true : undefined), { what: "the node" });
  });
  afterAll(async () => {
    client?.close();
    await nm?.stop();
    await rm?.stop();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  /** Submits a one-task job whose task reports `progress`, and waits until the node manager has its report. */
  async function submitProbe(name: string, progress: number): Promise<string> {
    const appId = await client.submit(
      JSON.stringify({
        name,
        vertices: [
          {
            name: "probe",
            parallelism: 1,
            command: ["node", join(dir, "probe.mjs"), String(progress)],
            resources: { vcores: 1, memoryMb: 128 },
          },
        ],
      }),
    );
    // The resource manager shows the progress only once the node manager has read it from the task's status file.
    await waitForJob(
      client,
      appId,
      (r) => liveVertexProgress(r).find((v) => v.name === "probe")?.progress === progress,
    );
    return appId;
  }

  it("kills the older task that has barely begun and spares the younger one near its end", async () => {
    const early = await submitProbe("barely-begun", 0.01);
    const nearlyDone = await submitProbe("nearly-done", 0.99);
    // Held: two job managers and two 1-core tasks. The primary leaves room for all but one task (4000 - 400 reserve).
    const held = (await client.nodes())[0]!.allocated?.vcoresMilli ?? 0;
    expect(held).toBeGreaterThanOrEqual(2000);
    monitor.set(4000 - 400 - (held - 1000));
    await waitFor(async () => (preempted.length > 0 ? true : undefined), { what: "a preemption" });
    // One tick's decision: nothing else is over the allowance once it is gone.
    expect(preempted.map((e) => e.appId)).toEqual([early]);
    const report = await client.status(nearlyDone);
    expect(report.containers.filter((c) => c.state === "RUNNING")).toHaveLength(2);
    await client.kill(early);
    await client.kill(nearlyDone);
  });
});
