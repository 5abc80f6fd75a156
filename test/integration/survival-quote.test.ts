/**
 * Survival quotes on a real cluster: a job submitted where the primaries' history holds spikes gets a quote at
 * submission, which `harvest job submit` prints and `GetApplication` and `harvest job status` carry as it was made
 * (rm-web.test.ts checks the REST API and the job page).
 */
import { spawnSync } from "node:child_process";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { TenantAdminClient } from "../../client/tenant-admin-client.js";
import { distEntry } from "../../common/paths.js";
import { cpuVertex, startTestCluster } from "./harness.js";
import type { TestCluster } from "./harness.js";

const STEP_S = 300;

/** Two days ending now: 20 % with a 2-slot spike to 80 % every 2 hours (a primary that kills now and then). */
function spikyHistory(): string {
  const end = Math.floor(Date.now() / 1000 / STEP_S) * STEP_S;
  const lines = ["time_s,cpu_pct"];
  for (let t = end - 2 * 86_400, i = 0; t < end; t += STEP_S, i++) lines.push(`${t},${i % 24 < 2 ? 80 : 20}`);
  return lines.join("\n") + "\n";
}

describe("a job's survival quote", () => {
  let c: TestCluster;
  let admin: TenantAdminClient;
  beforeAll(async () => {
    c = await startTestCluster({ idleServers: 2 });
    admin = new TenantAdminClient(c.desc.rm.address, c.desc.security);
    await admin.register({ name: "spiky" });
    await admin.assign("spiky", ["server-1", "server-2"]);
    await admin.importHistoryData(Buffer.from(spikyHistory()), { format: "csv", tenant: "spiky" });
    await admin.recluster();
  });
  afterAll(async () => {
    admin?.close();
    await c?.stop();
  });

  it("is made at submission from the primaries' kills and carried by the status over gRPC and the CLI", async () => {
    const dag = JSON.stringify({ name: "quoted", vertices: [cpuVertex("work", 3, { holdSeconds: 30 })] });
    const submitted = await c.client.submitJob(dag);
    const q = submitted.quote;
    expect(q).not.toBeNull();
    // Spikes every 2 hours: a kill rate above 0, so a probability strictly between 0 and 1 and re-runs above 0.
    expect(q!.killsPerHour).toBeGreaterThan(0);
    expect(q!.pNoKill).toBeGreaterThan(0);
    expect(q!.pNoKill).toBeLessThan(1);
    expect(q!.expectedReruns).toBeGreaterThan(0);
    expect(q!.etaP10Ms).toBeLessThanOrEqual(q!.etaP90Ms);

    const report = await c.client.status(submitted.appId);
    expect(report.quote).toEqual(q);

    const cli = spawnSync(process.execPath, [distEntry("cli/harvest.js"), "job", "status", submitted.appId, "--json"], {
      env: { ...process.env, HARVEST_CLUSTER_DIR: c.dir },
      encoding: "utf8",
    });
    expect(cli.status, cli.stderr).toBe(0);
    expect((JSON.parse(cli.stdout) as { quote: unknown }).quote).toEqual(q);
    const human = spawnSync(process.execPath, [distEntry("cli/harvest.js"), "job", "status", submitted.appId], {
      env: { ...process.env, HARVEST_CLUSTER_DIR: c.dir },
      encoding: "utf8",
    });
    expect(human.stdout).toMatch(/survival quote: (> )?\d+ % chance that no task is killed/);
    await c.client.kill(submitted.appId);
  });

  it("is printed by harvest job submit", async () => {
    const path = join(c.work, "quoted.json");
    writeFileSync(path, JSON.stringify({ name: "quoted", vertices: [cpuVertex("work", 1, { holdSeconds: 30 })] }));
    const cli = spawnSync(process.execPath, [distEntry("cli/harvest.js"), "job", "submit", path], {
      env: { ...process.env, HARVEST_CLUSTER_DIR: c.dir },
      encoding: "utf8",
    });
    expect(cli.status, cli.stderr).toBe(0);
    expect(cli.stdout).toMatch(/survival quote: (> )?\d+ % chance that no task is killed, \d+\.\d re-runs expected/);
    const appId = /submitted (\S+)/.exec(cli.stdout)?.[1];
    expect(appId).toBeDefined();
    await c.client.kill(appId!);
  });
});
