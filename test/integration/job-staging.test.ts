/**
 * Job files in the DFS, as YARN's: the job client puts the DAG in `/user/<name>/.staging/<appId>/` (mode 700), the
 * job manager's container localizes it from there and the job manager keeps its recovery journal there, so a job
 * manager killed mid-job is replaced by one that recovers from the DFS (on whichever server it lands) and re-runs no
 * finished task; the resource manager removes the directory when the job ends.
 */
import { randomBytes } from "node:crypto";
import { chmodSync, existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { containerProcessFile } from "../../common/container-leftovers.js";
import { isHarvestError } from "../../common/errors.js";
import { readCluster } from "../../localcluster/cluster.js";
import { readAll } from "../dfs-read.js";
import { waitFor } from "../wait-for.js";
import { suiteCluster } from "./harness.js";

/** Writes "start <vertex> <i>" to the shared log; the second vertex's tasks then wait for the test's go-ahead. */
const TASK = `
const fs = require("node:fs");
const [log, go] = process.argv.slice(1);
const me = process.env.HARVEST_VERTEX + " " + process.env.HARVEST_TASK_INDEX;
fs.appendFileSync(log, "start " + me + "\\n");
const wait = () => (process.env.HARVEST_VERTEX === "first" || fs.existsSync(go) ? process.exit(0) : setTimeout(wait, 100));
wait();
`;

describe("a job staged in the DFS", () => {
  const cluster = suiteCluster({ idleServers: 2, vcores: 2 });
  const shared = mkdtempSync(join(tmpdir(), "harvest-staging-"));
  chmodSync(shared, 0o1777);
  afterAll(() => rmSync(shared, { recursive: true, force: true }));

  it("keeps its DAG and journal in the submitter's staging directory, recovers a killed job manager from it, and goes at the end", async () => {
    const c = cluster();
    const log = join(shared, "runs.log");
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
  });
});
