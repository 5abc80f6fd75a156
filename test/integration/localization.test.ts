/**
 * Localization: a job's task code and data come from the DFS, declared as the vertex's local resources, fetched by the
 * node manager with the job's token into its file cache and linked into each task's directory. Fetched once per node
 * and job (the second task on a node finds it cached), fetched again when the file changes, and refused with
 * LOCALIZATION_FAILED when the submitter may not read it.
 */
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { describe, expect, it } from "vitest";
import { JobClient } from "../../client/job-client.js";
import { issueCertificate } from "../../localcluster/cluster-ca.js";
import { sumSamples } from "../prom-text.js";
import { taskOutputs, suiteCluster } from "./harness.js";
import type { TestCluster } from "./harness.js";
import { scrape } from "./metrics-scrape.js";

/** A task program that lives in the DFS: it reads its data directory and writes what it saw to its output. */
const TOOL = `
const fs = require("node:fs");
const path = require("node:path");
const words = fs.readdirSync("data").sort().map((f) => fs.readFileSync(path.join("data", f), "utf8").trim());
const out = { version: VERSION, words, linked: fs.lstatSync("tool.js").isSymbolicLink() };
fs.writeFileSync(path.join(process.env.HARVEST_OUTPUT_DIR, "seen.json"), JSON.stringify(out));
`;

function toolDag(name: string, parallelism: number, toolPath = "dfs:/apps/tool.js") {
  return JSON.stringify({
    name,
    vertices: [
      {
        name: "tool",
        parallelism,
        command: ["node", "tool.js"],
        resources: { vcores: 0.5, memoryMb: 128 },
        localResources: [
          { name: "tool.js", path: toolPath },
          { name: "data", path: "dfs:/apps/data", visibility: "public" },
        ],
      },
    ],
    edges: [],
  });
}

/** The node managers' localization counters, summed over their /metrics pages. */
async function localized(c: TestCluster): Promise<{ fetched: number; cached: number }> {
  let fetched = 0;
  let cached = 0;
  for (const nm of c.desc.nodes) {
    const m = await scrape(c, nm);
    fetched += sumSamples(m, "harvest_nm_localized_resources_total", { outcome: "fetched" });
    cached += sumSamples(m, "harvest_nm_localized_resources_total", { outcome: "cached" });
  }
  return { fetched, cached };
}

describe("localization", () => {
  const cluster = suiteCluster({ idleServers: 1, vcores: 2 });

  it("runs task code from the DFS, fetched once per node and job, and again when it changes", async () => {
    const c = cluster();
    const dfs = c.dfs();
    await dfs.mkdir("/apps/data");
    const put = async (dfsPath: string, text: string) => {
      const local = join(c.work, dfsPath.replaceAll("/", "_"));
      writeFileSync(local, text);
      await dfs.put(local, dfsPath, { overwrite: true });
    };
    await put("/apps/tool.js", TOOL.replace("VERSION", "1"));
    await put("/apps/data/a.txt", "alpha\n");
    await put("/apps/data/b.txt", "beta\n");
    await dfs.chmod("/apps/data", 0o755);
    await dfs.chmod("/apps/data/a.txt", 0o644);
    await dfs.chmod("/apps/data/b.txt", 0o644);

    const seen = (appId: string) =>
      taskOutputs(c.dir, appId, "seen.json").map(
        (f) => JSON.parse(readFileSync(f, "utf8")) as { version: number; words: string[]; linked: boolean },
      );

    // Three tasks, one server that holds two at a time: the same node localizes each resource once for the job.
    const first = await c.client.submit(toolDag("tool-1", 3));
    const r1 = await c.client.waitForCompletion(first, undefined, 200);
    expect(r1.outcome, r1.diagnostics).toBe("JOB_SUCCEEDED");
    expect(seen(first)).toEqual([
      { version: 1, words: ["alpha", "beta"], linked: true },
      { version: 1, words: ["alpha", "beta"], linked: true },
      { version: 1, words: ["alpha", "beta"], linked: true },
    ]);
    const after1 = await localized(c);
    expect(after1.fetched).toBe(3); // tool.js and data/ once, and the job manager's dag.json
    expect(after1.cached).toBe(4); // the two later tasks found both

    // A new version of the tool: fetched again; the public data is still cached for the new job.
    await put("/apps/tool.js", TOOL.replace("VERSION", "2"));
    const second = await c.client.submit(toolDag("tool-2", 1));
    const r2 = await c.client.waitForCompletion(second, undefined, 200);
    expect(r2.outcome, r2.diagnostics).toBe("JOB_SUCCEEDED");
    expect(seen(second)).toEqual([{ version: 2, words: ["alpha", "beta"], linked: true }]);
    const after2 = await localized(c);
    expect(after2.fetched - after1.fetched).toBe(2); // tool.js again, and the new job's dag.json
    expect(after2.cached - after1.cached).toBe(1);
  });

  it("uploads the local files a DAG declares (file:) to the job's staging directory, and its tasks run them", async () => {
    const c = cluster();
    const dir = join(c.work, "my-job");
    mkdirSync(join(dir, "lookup"), { recursive: true });
    writeFileSync(join(dir, "tool.js"), TOOL.replace("VERSION", "7"));
    writeFileSync(join(dir, "lookup", "a.txt"), "local\n");
    const dag = JSON.parse(toolDag("uploaded", 1)) as { vertices: { localResources: unknown[] }[] };
    dag.vertices[0]!.localResources = [
      { name: "tool.js", path: "file:tool.js" },
      { name: "data", path: "file:lookup" },
    ];
    const appId = await c.client.submit(JSON.stringify(dag), undefined, { baseDir: dir });
    const r = await c.client.waitForCompletion(appId, undefined, 200);
    expect(r.outcome, r.diagnostics).toBe("JOB_SUCCEEDED");
    const seen = taskOutputs(c.dir, appId, "seen.json").map((f) => JSON.parse(readFileSync(f, "utf8")) as unknown);
    expect(seen).toEqual([{ version: 7, words: ["local"], linked: true }]);
    // A local file that is not there is refused before anything is submitted, naming the field.
    dag.vertices[0]!.localResources = [{ name: "tool.js", path: "file:missing.js" }];
    await expect(c.client.submit(JSON.stringify(dag), undefined, { baseDir: dir })).rejects.toMatchObject({
      code: "INVALID_ARGUMENT",
      details: { field: "vertices[0].localResources[0].path" },
    });
  });

  it("refuses a resource the submitter may not read, naming it, and the job fails", async () => {
    const c = cluster();
    const dfs = c.dfs();
    const local = join(c.work, "secret.js");
    writeFileSync(local, "console.log('secret')\n");
    await dfs.mkdir("/private");
    await dfs.put(local, "/private/secret.js", { overwrite: true });
    await dfs.chmod("/private", 0o700);
    await dfs.chmod("/private/secret.js", 0o600);
    const ca = c.desc.security!.ca;
    const alice = {
      ca,
      ...(await issueCertificate(dirname(ca), join(c.work, "alice"), { name: "alice", role: "user" })),
    };
    const client = new JobClient(c.desc.rm.address, { security: alice, nnAddress: c.desc.nn!.address });
    try {
      const appId = await client.submit(toolDag("steal", 1, "dfs:/private/secret.js"));
      const r = await client.waitForCompletion(appId, undefined, 200);
      expect(r.outcome).toBe("JOB_FAILED");
      expect(r.diagnostics).toMatch(/LOCALIZATION_FAILED|cannot localize tool\.js \(dfs:\/private\/secret\.js\)/);
    } finally {
      client.close();
    }
  });
});
