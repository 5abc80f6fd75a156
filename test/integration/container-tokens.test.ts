/**
 * Credentials reach containers in a token file, never in their environment or argv: on a secure cluster the job
 * manager authenticates to the resource manager with the AM token from its file, and tasks act on the file system as
 * the submitter with the job's DFS token from theirs. The file is mode 0600, owned by the container's account, in the
 * container's own directory.
 */
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { readAll } from "../dfs-read.js";
import { taskOutputs, suiteCluster } from "./harness.js";

/** A task that reports what it can see of its credentials into its output directory. */
const PROBE = `
const fs = require("node:fs");
const path = require("node:path");
const file = process.env.HARVEST_TOKEN_FILE;
const st = fs.statSync(file);
const tokens = JSON.parse(fs.readFileSync(file, "utf8"));
const secrets = Object.values(tokens);
const leaked = Object.entries(process.env).filter(([, v]) => secrets.some((t) => v.includes(t))).map(([k]) => k);
fs.writeFileSync(path.join(process.env.HARVEST_OUTPUT_DIR, "probe.json"), JSON.stringify({
  mode: st.mode & 0o777, owner: st.uid, me: process.getuid(), inWorkDir: path.dirname(file) === process.cwd(),
  kinds: Object.keys(tokens), leaked, argvLeak: process.argv.some((a) => secrets.some((t) => a.includes(t))),
}));
`;

describe("container credentials", () => {
  const cluster = suiteCluster({ idleServers: 1 });

  it("come in a private token file that the job manager and tasks use, and never in the environment", async () => {
    const c = cluster();
    expect(c.desc.security, "the test cluster is secure").toBeDefined();
    const local = join(c.work, "words.txt");
    writeFileSync(local, "b a b c c c\n");
    const dfs = c.dfs();
    await dfs.put(local, "/tokens/in.txt");
    const home = "${HARVEST_HOME}/dist/examples/tasks";
    const dag = {
      name: "tokens",
      vertices: [
        { name: "probe", parallelism: 1, command: ["node", "-e", PROBE], resources: { vcores: 0.5, memoryMb: 128 } },
        {
          name: "map",
          parallelism: 1,
          command: ["node", `${home}/wordcount-map.js`, "dfs:/tokens/in.txt", "--splits", "1"],
          resources: { vcores: 0.5, memoryMb: 256 },
        },
        {
          name: "reduce",
          parallelism: 1,
          command: ["node", `${home}/wordcount-reduce.js`],
          resources: { vcores: 0.5, memoryMb: 256 },
        },
        {
          name: "merge",
          parallelism: 1,
          command: ["node", `${home}/wordcount-merge.js`, "--output", "dfs:/tokens/out.tsv"],
          resources: { vcores: 0.5, memoryMb: 256 },
        },
      ],
      edges: [
        { from: "map", to: "reduce", type: "scatter-gather" },
        { from: "reduce", to: "merge", type: "scatter-gather" },
      ],
    };
    const appId = await c.client.submit(JSON.stringify(dag));
    const r = await c.client.waitForCompletion(appId, undefined, 200);
    expect(r.outcome, r.diagnostics).toBe("JOB_SUCCEEDED");

    // The tasks wrote the submitter's file with the token from their files.
    const out = (await readAll(dfs, "/tokens/out.tsv")).toString("utf8");
    expect(out.trim().split("\n")).toEqual(["c\t3", "b\t2", "a\t1"]);

    const probes = taskOutputs(c.dir, appId, "probe.json");
    expect(probes).toHaveLength(1);
    const probe = JSON.parse(readFileSync(probes[0]!, "utf8")) as Record<string, unknown>;
    expect(probe).toMatchObject({
      mode: 0o600,
      inWorkDir: true,
      kinds: ["dfs-token", "shuffle-token"],
      leaked: [],
      argvLeak: false,
    });
    expect(probe["owner"]).toBe(probe["me"]);
  });
});
