/**
 * Stale datanodes, with real datanode processes: one is kill -9'd, and until the namenode declares it dead (a long
 * expiry here) it is only stale. fsck lists the replicas on it as suspect right away, and new blocks are no longer
 * placed on it: a write goes through without a single failed pipeline, and no block of it lands there.
 * In the long suite: with the default suite's files in parallel on two cores, fsck twice listed one suspect replica
 * of the two (staleness is 1.5 s here); why is not known yet.
 */
import { spawn } from "node:child_process";
import type { ChildProcess } from "node:child_process";
import { randomBytes } from "node:crypto";
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Readable } from "node:stream";
import { pipeline } from "node:stream/promises";
import { waitFor } from "../wait-for.js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { DfsClient } from "../../client/dfs-client.js";
import { distEntry } from "../../common/paths.js";
import type { NameNode } from "../../namenode/index.js";
import { requireBuild, startTestNameNode } from "../integration/harness.js";

const KiB = 1024;
const BLOCK = 128 * KiB;

describe("a datanode process killed -9, stale before it is declared dead", () => {
  let dir: string;
  let nn: NameNode;
  let dfs: DfsClient;
  const procs = new Map<string, ChildProcess>();

  async function startDatanodeProcess(id: string, trace: string): Promise<void> {
    const config = join(dir, `${id}.json`);
    const ready = join(dir, `${id}.ready`);
    writeFileSync(
      config,
      JSON.stringify({
        datanodeId: id,
        namenodeAddress: nn.address,
        dataDir: join(dir, id),
        capacityBytes: 1 << 30,
        primary: `trace:${trace}`,
        insecure: true,
      }),
    );
    const proc = spawn(process.execPath, [distEntry("datanode/main.js"), "--config", config, "--ready-file", ready], {
      stdio: "ignore",
    });
    procs.set(id, proc);
    await waitFor(async () => (existsSync(ready) ? JSON.parse(readFileSync(ready, "utf8")) : undefined), {
      what: `${id} to start`,
      timeoutMs: 15_000,
      retryOnError: true,
    });
  }

  beforeAll(async () => {
    requireBuild();
    dir = mkdtempSync(join(tmpdir(), "harvest-stale-"));
    const trace = join(dir, "idle.csv");
    writeFileSync(trace, "time_s,cpu_pct\n0,0\n600,0\n");
    nn = await startTestNameNode(dir, {
      staleAfterMs: 1_500,
      // Long enough that the killed datanode stays stale (not dead) for the whole test.
      datanodeExpiryMs: 120_000,
    });
    for (const id of ["dn1", "dn2", "dn3"]) await startDatanodeProcess(id, trace);
    dfs = new DfsClient(nn.address);
    await waitFor(async () => ((await dfs.datanodes()).length === 3 ? true : undefined), {
      what: "three datanodes",
      timeoutMs: 15_000,
      retryOnError: true,
    });
  });

  afterAll(async () => {
    dfs?.close();
    for (const p of procs.values()) p.kill("SIGKILL");
    await nn?.stop();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it("lists replicas on it as suspect in fsck and places no new block on it", async () => {
    await pipeline(
      Readable.from([randomBytes(2 * BLOCK)]),
      dfs.createWriteStream("/before.bin", { replication: 3, blockSizeBytes: BLOCK }),
    );
    await waitFor(
      async () => {
        const r = await dfs.fsck("/");
        return r.underReplicated.length === 0 && r.blocks === 2 ? true : undefined;
      },
      { what: "three replicas of every block", timeoutMs: 15_000, retryOnError: true },
    );
    const fresh = await dfs.fsck("/");
    expect(fresh.suspect).toEqual([]);
    expect(fresh.staleDatanodes).toBe(0);

    const victim = procs.get("dn3")!;
    const exited = new Promise((r) => victim.once("exit", r));
    victim.kill("SIGKILL");
    await exited;

    const report = await waitFor(
      async () => {
        const r = await dfs.fsck("/");
        return r.staleDatanodes === 1 && r.suspectReplicas === 2 ? r : undefined;
      },
      { what: "fsck to see the stale datanode and both its replicas", timeoutMs: 15_000, retryOnError: true },
    );
    // Not dead yet: the blocks still count it, but every one of them is listed as suspect, naming the datanode.
    expect(report.deadDatanodes).toBe(0);
    expect(report.suspectReplicas).toBe(2);
    expect(report.suspect.map((b) => [b.path, b.datanodes])).toEqual([
      ["/before.bin", ["dn3"]],
      ["/before.bin", ["dn3"]],
    ]);
    expect((await dfs.datanodes()).find((d) => d.datanodeId === "dn3")).toMatchObject({ state: "LIVE", stale: true });

    // Six new blocks, two replicas each: the fresh datanodes take them all, so no pipeline meets the dead one.
    const data = randomBytes(6 * BLOCK);
    await pipeline(
      Readable.from([data]),
      dfs.createWriteStream("/after.bin", { replication: 2, blockSizeBytes: BLOCK }),
    );
    expect(dfs.writeStats.pipelineFailures).toBe(0);
    const located = await dfs.blockLocations("/after.bin");
    expect(located.blocks).toHaveLength(6);
    for (const b of located.blocks) expect(b.locations.map((l) => l.datanodeId)).not.toContain("dn3");
  });
});
