/**
 * Localization: a job's task code and data come from the DFS, declared as the vertex's local resources, fetched by the
 * node manager with the job's token into its file cache and linked into each task's directory. Fetched once per node
 * and job (the second task on a node finds it cached), fetched again when the file changes, and refused with
 * LOCALIZATION_FAILED when the submitter may not read it. Archives (.tar.gz, .zip, and a local .tar the client
 * uploads) are unpacked into a directory of the resource's name, cached like files, and a hostile one fails the job.
 */
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { gzipSync } from "node:zlib";
import { describe, expect, it } from "vitest";
import { JobClient } from "../../client/job-client.js";
import { issueCertificate } from "../../localcluster/cluster-ca.js";
import { tarOf, zipOf } from "../archive-fixtures.js";
import { sumSamples } from "../prom-text.js";
import { findFiles, taskOutputs, suiteCluster } from "./harness.js";
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

/** A task that reports what it finds in the archives unpacked into its directory. */
const ARCHIVE_READER = `
const fs = require("node:fs");
const path = require("node:path");
const read = (p) => { try { return fs.readFileSync(p, "utf8").trim(); } catch (e) { return e.code; } };
let exec = true;
try { fs.accessSync("lib/bin/tool.sh", fs.constants.X_OK); } catch { exec = false; }
const out = { lib: read("lib/words.txt"), link: read("lib/current"), data: read("data/n.txt"), extra: read("extra/x.txt"), exec };
fs.writeFileSync(path.join(process.env.HARVEST_OUTPUT_DIR, "seen.json"), JSON.stringify(out));
`;

function archiveDag(name: string, resources: Record<string, unknown>[]): string {
  return JSON.stringify({
    name,
    vertices: [
      {
        name: "reader",
        parallelism: 1,
        command: ["node", "-e", ARCHIVE_READER],
        resources: { vcores: 0.5, memoryMb: 128 },
        localResources: resources,
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
  // Containers get the machine's leftover CPU (cpu.shares 2): on a busy test machine a job manager may take longer
  // than the default 30 s to register, which is not what these tests are about.
  const cluster = suiteCluster({ idleServers: 1, vcores: 2, rm: { amExpiryMs: 120_000 } });

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

  it("unpacks .tar.gz and .zip archives into directories of their names, cached until the archive changes", async () => {
    const c = cluster();
    const dfs = c.dfs();
    await dfs.mkdir("/apps/arch");
    await dfs.chmod("/apps/arch", 0o755);
    const put = async (dfsPath: string, bytes: Buffer) => {
      const local = join(c.work, dfsPath.replaceAll("/", "_"));
      writeFileSync(local, bytes);
      await dfs.put(local, dfsPath, { overwrite: true });
      await dfs.chmod(dfsPath, 0o644);
    };
    const lib = gzipSync(
      tarOf([
        { name: "words.txt", data: "alpha" },
        { name: "bin/tool.sh", data: "#!/bin/sh\n", mode: 0o755 },
        { name: "current", type: "2", linkname: "words.txt" },
      ]),
    );
    const data = (n: string) => zipOf([{ name: "n.txt", data: n, deflate: true }]);
    await put("/apps/arch/lib.tgz", lib);
    await put("/apps/arch/data.zip", data("one"));
    const resources = [
      { name: "lib", path: "dfs:/apps/arch/lib.tgz", type: "archive", visibility: "public" },
      { name: "data", path: "dfs:/apps/arch/data.zip", type: "archive", visibility: "public" },
    ];
    const run = async (dag: string, baseDir?: string) => {
      const appId = await c.client.submit(dag, undefined, baseDir ? { baseDir } : {});
      const r = await c.client.waitForCompletion(appId, undefined, 200);
      expect(r.outcome, r.diagnostics).toBe("JOB_SUCCEEDED");
      return taskOutputs(c.dir, appId, "seen.json").map((f) => JSON.parse(readFileSync(f, "utf8")) as unknown);
    };

    const before = await localized(c);
    expect(await run(archiveDag("arch-1", resources))).toEqual([
      { lib: "alpha", link: "alpha", data: "one", extra: "ENOENT", exec: true },
    ]);
    const after1 = await localized(c);
    expect(after1.fetched - before.fetched).toBe(3); // both archives, and the job manager's dag.json

    // The next job: the unchanged archive is a cache hit, the changed one is fetched and unpacked again, and a local
    // .tar the client uploads is unpacked too.
    await put("/apps/arch/data.zip", data("two, longer"));
    const local = join(c.work, "my-archive-job");
    mkdirSync(local, { recursive: true });
    writeFileSync(join(local, "extra.tar"), tarOf([{ name: "x.txt", data: "uploaded" }]));
    const withLocal = archiveDag("arch-2", [...resources, { name: "extra", path: "file:extra.tar", type: "archive" }]);
    expect(await run(withLocal, local)).toEqual([
      { lib: "alpha", link: "alpha", data: "two, longer", extra: "uploaded", exec: true },
    ]);
    const after2 = await localized(c);
    expect(after2.fetched - after1.fetched).toBe(3); // data.zip, extra.tar and the dag.json
    expect(after2.cached - after1.cached).toBe(1); // lib.tgz
  }, 150_000);

  it("fails the job at once on a hostile archive, naming the resource and the entry, and writes nothing outside", async () => {
    const c = cluster();
    const dfs = c.dfs();
    const local = join(c.work, "evil.tar");
    writeFileSync(
      local,
      tarOf([
        { name: "ok.txt", data: "fine" },
        { name: "../../../../planted.txt", data: "pwned" },
      ]),
    );
    await dfs.mkdir("/apps/evil");
    await dfs.put(local, "/apps/evil/evil.tar", { overwrite: true });
    const appId = await c.client.submit(
      archiveDag("evil", [{ name: "evil", path: "dfs:/apps/evil/evil.tar", type: "archive" }]),
    );
    const r = await c.client.waitForCompletion(appId, undefined, 200);
    expect(r.outcome).toBe("JOB_FAILED");
    expect(r.diagnostics).toContain("cannot localize evil (dfs:/apps/evil/evil.tar)");
    expect(r.diagnostics).toContain('entry "../../../../planted.txt"');
    expect(findFiles(c.dir, "planted.txt")).toEqual([]);
    // Failed at the first refusal (the job manager's permanent-failure path), not after retried launches.
    expect(r.diagnostics).toMatch(/^task reader\[0\]: /);
  }, 120_000);

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
