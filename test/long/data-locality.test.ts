/**
 * Data-local placement end to end: a word count whose map vertex reads a DFS file gets one task per block, each task
 * runs on the server holding its block (delay scheduling waits for it), reads only its block's lines, and the job's
 * status and history say how many task starts were node-local. A job whose input does not exist fails at once,
 * naming it.
 */
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { packageRoot } from "../../common/paths.js";
import { waitFor } from "../wait-for.js";
import { suiteCluster, taskOutputs } from "../integration/harness.js";

const BLOCK = 64 * 1024;
const TASK = { vcores: 0.5, memoryMb: 256 };

function wordcount(name: string, input: string): string {
  const task = (file: string, ...args: string[]) => ["node", `\${HARVEST_HOME}/dist/examples/tasks/${file}`, ...args];
  return JSON.stringify({
    name,
    vertices: [
      { name: "map", input: { paths: [input] }, command: task("wordcount-map.js"), resources: TASK },
      { name: "reduce", parallelism: 2, command: task("wordcount-reduce.js"), resources: TASK },
      { name: "merge", parallelism: 1, command: task("wordcount-merge.js", "--top", "0"), resources: TASK },
    ],
    edges: [
      { from: "map", to: "reduce", type: "scatter-gather" },
      { from: "reduce", to: "merge", type: "scatter-gather" },
    ],
  });
}

describe("data-local placement", () => {
  // Three servers of two cores: six map tasks of half a core fit at once beside the job manager. The node delay is
  // long, so that every map waits for its own server (its rack is every server's).
  const cluster = suiteCluster({ idleServers: 3, vcores: 2, rm: { nodeLocalityDelayMs: 60_000 } });

  it(
    "runs one map per block, each on the server holding its block, and reports the node-local share",
    { timeout: 200_000 },
    async () => {
      const c = cluster();
      const dfs = c.dfs();
      // About 6 blocks of text, one replica each, spread over the servers by the namenode.
      const corpus = readFileSync(join(packageRoot(), "examples", "data", "corpus.txt"), "utf8");
      let text = "";
      while (text.length < 5.5 * BLOCK) text += corpus;
      await dfs.mkdir("/loc");
      await new Promise<void>((resolve, reject) => {
        const out = dfs.createWriteStream("/loc/in.txt", { replication: 1, blockSizeBytes: BLOCK });
        out.on("finish", resolve).on("error", reject);
        out.end(text);
      });
      // Each block's replica is listed once its datanode has reported it received.
      const blocks = await waitFor(
        async () => {
          const located = (await dfs.blockLocations("/loc/in.txt")).blocks;
          return located.every((b) => b.locations.length > 0) ? located : undefined;
        },
        { what: "every block of /loc/in.txt located" },
      );
      const blocksPerNode = new Map<string, number>();
      for (const b of blocks) {
        const home = b.locations[0]!.datanodeId;
        blocksPerNode.set(home, (blocksPerNode.get(home) ?? 0) + 1);
      }

      const appId = await c.client.submit(wordcount("local-wc", "dfs:/loc/in.txt"));
      const r = await c.client.waitForCompletion(appId, undefined, 200);
      expect(r.outcome, r.diagnostics).toBe("JOB_SUCCEEDED");
      const map = r.progress?.vertices.find((v) => v.name === "map");
      expect(map?.total).toBe(blocks.length);
      expect(map).toMatchObject({ succeeded: blocks.length, nodeLocal: blocks.length, rackLocal: 0, offSwitch: 0 });

      // Where the maps ran, from their outputs on the servers' disks (only a map writes part-1: one per reducer):
      // as many on each server as it holds blocks.
      const mapsPerNode = new Map<string, number>();
      for (const p of taskOutputs(c.dir, appId, "part-1")) {
        const node = /\/nodes\/([^/]+)\/containers\//.exec(p)?.[1] ?? "?";
        mapsPerNode.set(node, (mapsPerNode.get(node) ?? 0) + 1);
      }
      expect(mapsPerNode).toEqual(blocksPerNode);

      // Every word read exactly once over the splits: the merged counts equal a direct count of the file.
      const counts = new Map<string, number>();
      for (const w of text.toLowerCase().match(/[\p{L}\p{N}]+/gu) ?? []) counts.set(w, (counts.get(w) ?? 0) + 1);
      expect(Number(map?.counters["words"])).toBe([...counts.values()].reduce((a, n) => a + n, 0));
      const top = taskOutputs(c.dir, appId, "top.tsv");
      const got = new Map(
        readFileSync(top[0]!, "utf8")
          .trim()
          .split("\n")
          .map((l) => l.split("\t"))
          .map(([w, n]) => [w!, Number(n)]),
      );
      expect(got).toEqual(counts);

      const history = (await c.client.history("local-wc")).find((h) => h.appId === appId);
      expect(history).toMatchObject({ locatedStarts: blocks.length, nodeLocalStarts: blocks.length });
    },
  );

  it("fails a job whose input does not exist at once, naming it", async () => {
    const c = cluster();
    const appId = await c.client.submit(wordcount("missing-wc", "dfs:/loc/nope"));
    const r = await c.client.waitForCompletion(appId, undefined, 200);
    expect(r.outcome).toBe("JOB_FAILED");
    expect(r.diagnostics).toMatch(/vertex map: cannot read its input dfs:\/loc\/nope/);
    expect(r.containers.filter((x) => !x.isAm)).toEqual([]);
  });
});
