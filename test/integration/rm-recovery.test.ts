/** The resource manager's state survives a restart: jobs, their outcomes and the job history are in LevelDB. */
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { JobClient } from "../../client/job-client.js";
import { Logger } from "../../common/log.js";
import { NodeManager } from "../../nodemanager/node-manager.js";
import { ResourceManager } from "../../resourcemanager/resource-manager.js";
import { cpuVertex, requireBuild, waitFor } from "./harness.js";

const quiet = new Logger("test", "error");

describe("a restarted resource manager", () => {
  const dir = mkdtempSync(join(tmpdir(), "harvest-rmr-"));
  const stops: (() => Promise<void>)[] = [];
  afterAll(async () => {
    for (const s of stops.reverse()) await s().catch(() => undefined);
    rmSync(dir, { recursive: true, force: true });
  });

  it("keeps finished jobs and history, and resumes an unfinished job with a new attempt", async () => {
    requireBuild();
    const trace = join(dir, "idle.csv");
    writeFileSync(trace, "time_s,cpu_pct\n0,0\n300,0\n600,0\n");
    const rmOpts = { dataDir: join(dir, "rm"), port: 0 };
    let rm = new ResourceManager(rmOpts, { logger: quiet });
    await rm.start();
    const port = Number(rm.address.split(":")[1]);
    const nm = new NodeManager(
      {
        nodeId: "n1",
        rmAddress: rm.address,
        dataDir: join(dir, "n1"),
        primary: `trace:${trace}`,
        cgroups: "none",
        reconnectMaxMs: 500,
      },
      { logger: quiet },
    );
    await nm.start();
    stops.push(() => nm.stop());
    let client = new JobClient(rm.address);
    const done = await client.submit(JSON.stringify({ name: "quick", vertices: [cpuVertex("a", 2)] }));
    expect((await client.waitForCompletion(done, undefined, 200)).state).toBe("FINISHED");
    const pending = await client.submit(
      JSON.stringify({ name: "long", vertices: [cpuVertex("a", 1, { holdSeconds: 3 })] }),
    );
    await waitFor(client, pending, (r) => r.state === "RUNNING");
    client.close();
    await rm.stop();

    // Same store, same port, so the node manager and the job manager find it again.
    rm = new ResourceManager({ ...rmOpts, port }, { logger: quiet });
    await rm.start();
    stops.push(() => rm.stop());
    client = new JobClient(rm.address);
    stops.push(async () => client.close());
    const apps = await client.list();
    expect(apps.find((a) => a.appId === done)?.state).toBe("FINISHED");
    expect((await client.history("quick"))[0]?.appId).toBe(done);
    const resumed = await client.waitForCompletion(pending, undefined, 200);
    expect(resumed.state).toBe("FINISHED");
    expect(resumed.attempts).toBeGreaterThanOrEqual(2);
    // New ids do not collide with the ones handed out before the restart.
    const next = await client.submit(JSON.stringify({ name: "after", vertices: [cpuVertex("a", 1)] }));
    expect([done, pending]).not.toContain(next);
  });
});

describe("a resource manager with a small completed-application limit", () => {
  const dir = mkdtempSync(join(tmpdir(), "harvest-rmc-"));
  const stops: (() => Promise<void>)[] = [];
  afterAll(async () => {
    for (const s of stops.reverse()) await s().catch(() => undefined);
    rmSync(dir, { recursive: true, force: true });
  });

  it("forgets the oldest finished jobs beyond the limit but keeps all of them in the job history", async () => {
    requireBuild();
    const trace = join(dir, "idle.csv");
    writeFileSync(trace, "time_s,cpu_pct\n0,0\n300,0\n600,0\n");
    const rm = new ResourceManager({ dataDir: join(dir, "rm"), maxCompletedApps: 2 }, { logger: quiet });
    await rm.start();
    stops.push(() => rm.stop());
    const nm = new NodeManager(
      { nodeId: "n1", rmAddress: rm.address, dataDir: join(dir, "n1"), primary: `trace:${trace}`, cgroups: "none" },
      { logger: quiet },
    );
    await nm.start();
    stops.push(() => nm.stop());
    const client = new JobClient(rm.address);
    stops.push(async () => client.close());
    const ids: string[] = [];
    for (let i = 0; i < 3; i++) {
      const id = await client.submit(JSON.stringify({ name: `job-${i}`, vertices: [cpuVertex("a", 1)] }));
      expect((await client.waitForCompletion(id, undefined, 100)).state).toBe("FINISHED");
      ids.push(id);
    }
    // Let the last job manager's exit be recorded, then the oldest goes.
    await new Promise((r) => setTimeout(r, 1_500));
    const listed = (await client.list()).map((a) => a.appId);
    expect(listed).not.toContain(ids[0]);
    expect(listed).toContain(ids[2]);
    await expect(client.status(ids[0]!)).rejects.toMatchObject({ code: "APP_NOT_FOUND" });
    expect((await client.history()).map((h) => h.appId).sort()).toEqual([...ids].sort());
  });
});
