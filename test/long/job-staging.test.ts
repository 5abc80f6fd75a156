/**
 * Job files in the DFS, as YARN's: the job client puts the DAG in `/user/<name>/.staging/<appId>/` (mode 700), the
 * job manager's container localizes it from there and the job manager keeps its recovery journal there, so a job
 * manager killed mid-job is replaced by one that recovers from the DFS (on whichever server it lands) and re-runs no
 * finished task; the resource manager removes the directory when the job ends, with the job's token on a secure
 * cluster and as the submitter on a plaintext one.
 */
import { randomBytes } from "node:crypto";
import { chmodSync, existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import type { DfsClient } from "../../client/dfs-client.js";
import { containerProcessFile } from "../../common/container-leftovers.js";
import { isHarvestError } from "../../common/errors.js";
import { readCluster } from "../../localcluster/cluster.js";
import { readAll } from "../dfs-read.js";
import { waitFor } from "../wait-for.js";
import { suiteCluster } from "../integration/harness.js";

/** Writes "start <vertex> <i>" to the shared log; the second vertex's tasks then wait for the test's go-ahead. */
const TASK = `
const fs = require("node:fs");
const [log, go] = process.argv.slice(1);
const me = process.env.HARVEST_VERTEX + " " + process.env.HARVEST_TASK_INDEX;
fs.appendFileSync(log, "start " + me + "\\n");
const wait = () => (process.env.HARVEST_VERTEX === "first" || fs.existsSync(go) ? process.exit(0) : setTimeout(wait, 100));
wait();
`;

/** Waits until the job's staging directory is gone from the DFS. */
async function stagingRemoved(dfs: DfsClient, staging: string): Promise<void> {
  await waitFor(
    async () => {
      try {
        await dfs.stat(staging);
        return false;
      } catch (err) {
        return isHarvestError(err, "NAMENODE_FILE_NOT_FOUND");
      }
    },
    { what: "the staging directory removed", timeoutMs: 15_000 },
  );
}

describe("a job staged in the DFS", () => {
  const cluster = suiteCluster({ idleServers: 2, vcores: 2 });

  it("keeps its DAG and journal in the submitter's staging directory, recovers a killed job manager from it, and goes at the end", async () => {
    const c = cluster();
    // In the cluster's directory, where the tasks (each job's own account, with a private /tmp) can write too.
    const shared = join(c.work, "shared");
    mkdirSync(shared);
    chmodSync(shared, 0o1777);
    // Made here: the job's tasks on two node managers run as two accounts (each leases the job a uid of its own).
    const log = join(shared, "runs.log");
    writeFileSync(log, "", { mode: 0o666 });
    chmodSync(log, 0o666);
    const go = join(shared, `go-${randomBytes(3).toString("hex")}`);
    const vertex = (name: string, parallelism: number) => ({
      name,
      parallelism,
      command: ["node", "-e", TASK, log, go],
      resources: { vcores: 0.5, memoryMb: 64 },
    });
    const appId = await c.client.submit(
      JSON.stringify({
        name: "staged",
        vertices: [vertex("first", 2), vertex("second", 1)],
        edges: [{ from: "first", to: "second", type: "broadcast" }],
      }),
    );
    const dfs = c.dfs();
    const home = await dfs.homeDirectory();
    const staging = `${home}/.staging/${appId}`;
    expect((await dfs.stat(staging)).mode).toBe(0o700);
    expect((await dfs.stat(`${home}/.staging`)).mode).toBe(0o700);
    expect(JSON.parse((await readAll(dfs, `${staging}/dag.json`)).toString("utf8"))).toMatchObject({ name: "staged" });

    // The first vertex is done and the second waits: the job manager dies (kill -9).
    const starts = () => (existsSync(log) ? readFileSync(log, "utf8").trim().split("\n") : []);
    await waitFor(() => starts().includes("start second 0"), { what: "the second vertex to start", timeoutMs: 60_000 });
    const journal = await dfs.list(`${staging}/journal`);
    expect(journal.length).toBeGreaterThan(0);
    const report = await c.client.status(appId);
    const am = report.containers.find((x) => x.isAm && x.state !== "COMPLETE")!;
    const node = readCluster(c.dir).nodes.find((n) => n.nodeId === am.nodeId)!;
    const record = containerProcessFile(join(node.dataDir, "containers", appId, am.containerId));
    process.kill((JSON.parse(readFileSync(record, "utf8")) as { pid: number }).pid, "SIGKILL");
    await waitFor(async () => (await c.client.status(appId)).attempts === 2, { what: "a second job-manager attempt" });
    writeFileSync(go, "");

    const r = await c.client.waitForCompletion(appId, undefined, 200);
    expect(r.outcome, r.diagnostics).toBe("JOB_SUCCEEDED");
    expect(r.attempts).toBe(2);
    // The new attempt recovered the first vertex from the journal in the DFS: none of its tasks ran again.
    expect(
      starts()
        .filter((l) => l.startsWith("start first"))
        .sort(),
    ).toEqual(["start first 0", "start first 1"]);
    // The resource manager removes the staging directory once the job has ended.
    await stagingRemoved(dfs, staging);
  });
});

describe("a job staged in the DFS of a plaintext cluster", () => {
  const cluster = suiteCluster({ idleServers: 1, vcores: 2, insecure: true });

  it("has its staging directory removed by the resource manager when it ends, though it has no token", async () => {
    const c = cluster();
    const dfs = c.dfs({ user: "carol" });
    const appId = await c.client.submit(
      JSON.stringify({
        name: "plain",
        vertices: [
          { name: "v", parallelism: 1, command: ["node", "-e", "0"], resources: { vcores: 0.5, memoryMb: 64 } },
        ],
        edges: [],
      }),
      "carol",
    );
    const staging = `/user/carol/.staging/${appId}`;
    expect((await dfs.stat(staging)).mode).toBe(0o700);
    const r = await c.client.waitForCompletion(appId, undefined, 200);
    expect(r.outcome, r.diagnostics).toBe("JOB_SUCCEEDED");
    await stagingRemoved(dfs, staging);
    // The submitter's other files stay.
    expect((await dfs.stat("/user/carol/.staging")).isDir).toBe(true);
  });
});
