/**
 * The task API's DFS outputs (task/dfs.ts) on a real namenode and datanode: a task attempt writes its file under
 * `<dir>/_temporary/<container id>/` and renames it into place when complete. A re-run of the task succeeds while
 * the earlier attempt still holds its file open (its lease), readers of the directory see whole files only, and what
 * the attempts left in `_temporary` is gone once the re-run has committed.
 */
import { randomBytes } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { finished } from "node:stream/promises";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { DfsClient } from "../../client/dfs-client.js";
import { Logger } from "../../common/log.js";
import type { DataNode } from "../../datanode/index.js";
import type { NameNode } from "../../namenode/index.js";
import { DFS_TEMPORARY_DIR, TaskError, writeDfsFile, writeDfsOutput } from "../../task/index.js";
import { readAll } from "../dfs-read.js";
import { waitFor } from "../wait-for.js";
import { startTestDataNode, startTestNameNode } from "./harness.js";

const quiet = new Logger("test", "error");

describe("a task's output files in the DFS", () => {
  let dir: string;
  let nn: NameNode;
  let dn: DataNode;
  let dfs: DfsClient;
  /** The environment a task attempt in container `id` sees. */
  const attemptEnv = (id: string): NodeJS.ProcessEnv => ({ HARVEST_NN_ADDRESS: nn.address, HARVEST_CONTAINER_ID: id });
  const names = async (path: string): Promise<string[]> =>
    (await dfs.list(path)).map((s) => s.path.slice(s.path.lastIndexOf("/") + 1));

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), "harvest-task-dfs-"));
    nn = await startTestNameNode(dir, { defaultReplication: 1 });
    dn = await startTestDataNode(dir, "dn1", nn.address);
    dfs = new DfsClient(nn.address, { logger: quiet });
    await waitFor(async () => ((await dfs.datanodes()).length === 1 ? true : undefined), {
      what: "the datanode",
      retryOnError: true,
    });
  });

  afterAll(async () => {
    dfs?.close();
    await dn?.stop();
    await nn?.stop();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it("lets a re-run write the file an earlier attempt still holds open, and removes that attempt's copy", async () => {
    // The first attempt writes half its output and stops (as a task whose process died): its file stays open under
    // its client's lease, which the namenode would keep for the lease timeout.
    const first = new DfsClient(nn.address, { logger: quiet });
    const stale = writeDfsOutput("dfs:/job/out/part-00002", {
      client: first,
      env: attemptEnv("container_1_0001_01_000007"),
    });
    await new Promise<void>((resolve, reject) =>
      stale.write(randomBytes(300_000), (err) => (err ? reject(err) : resolve())),
    );
    expect(await names("/job/out")).toEqual([DFS_TEMPORARY_DIR]);
    expect(await names(`/job/out/${DFS_TEMPORARY_DIR}/container_1_0001_01_000007`)).toEqual(["part-00002"]);
    expect((await dfs.stat(`/job/out/${DFS_TEMPORARY_DIR}/container_1_0001_01_000007/part-00002`)).complete).toBe(
      false,
    );

    try {
      // The re-run, in another container, writes the whole file and succeeds.
      const data = randomBytes(1_500_000);
      await writeDfsFile("dfs:/job/out/part-00002", data, { env: attemptEnv("container_1_0001_01_000011") });
      expect(await names("/job/out")).toEqual(["part-00002"]);
      const st = await dfs.stat("/job/out/part-00002");
      expect(st.complete).toBe(true);
      expect((await readAll(dfs, "/job/out/part-00002")).equals(data)).toBe(true);
    } finally {
      stale.destroy();
      first.close();
    }
  });

  it("replaces a complete file of the same name, and shows no partial file while an attempt writes", async () => {
    await writeDfsFile("dfs:/job/again/part-00000", "old run\n", { env: attemptEnv("container_1_0002_01_000002") });
    const out = writeDfsOutput("dfs:/job/again/part-00000", { env: attemptEnv("container_1_0003_01_000002") });
    await new Promise<void>((resolve, reject) => out.write("new run, ", (err) => (err ? reject(err) : resolve())));
    // Mid-write, readers of the directory still see the old run's whole file under the name.
    expect((await readAll(dfs, "/job/again/part-00000")).toString()).toBe("old run\n");
    out.end("complete\n");
    await finished(out);
    expect((await readAll(dfs, "/job/again/part-00000")).toString()).toBe("new run, complete\n");
    expect(await names("/job/again")).toEqual(["part-00000"]);
  });

  it("leaves no file, and no temporary one, when the task's stream fails", async () => {
    const out = writeDfsOutput("dfs:/job/failed/part-00001", { env: attemptEnv("container_1_0004_01_000003") });
    await new Promise<void>((resolve, reject) => out.write("partial", (err) => (err ? reject(err) : resolve())));
    out.destroy(new Error("the task gave up"));
    await finished(out).catch(() => undefined);
    await waitFor(async () => ((await names("/job/failed")).length === 0 ? true : undefined), {
      what: "the failed attempt's temporary directory removed",
    });
    await expect(dfs.stat("/job/failed/part-00001")).rejects.toMatchObject({ code: "NAMENODE_FILE_NOT_FOUND" });
  });

  it("refuses a path that is not a file of the DFS, or an attempt id that is not a plain name", () => {
    const env = attemptEnv("container_1_0005_01_000001");
    expect(() => writeDfsOutput("/local/path", { env })).toThrow(TaskError);
    expect(() => writeDfsOutput("dfs:/", { env })).toThrow(/absolute path/);
    expect(() => writeDfsOutput(`dfs:/job/${DFS_TEMPORARY_DIR}`, { env })).toThrow(TaskError);
    expect(() => writeDfsOutput("dfs:/job/x", { env: attemptEnv("../escape") })).toThrow(/not a container id/);
  });
});
