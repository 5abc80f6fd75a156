/**
 * Lease recovery on real daemons: an in-process namenode and three datanodes (real gRPC on loopback, real block
 * files), and a writer in its own process that is kill -9'd mid-block after the pipeline acknowledged some bytes. Once
 * its lease expires the namenode asks the datanodes for the last block's replicas and keeps the prefix every surviving
 * one holds: the file reads back with every acknowledged byte, byte-identical, and is marked recovered. While the
 * writer is alive, `get` of the open file is refused with a coded error unless the visible prefix is asked for.
 */
import { spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { codeOf } from "../error-code.js";
import { readAll } from "../dfs-read.js";
import { WriterProcess } from "../dfs-writer-process.js";
import { waitFor } from "../wait-for.js";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { DfsClient, PACKET_BYTES } from "../../client/dfs-client.js";
import { distEntry } from "../../common/paths.js";
import type { DataNode } from "../../datanode/index.js";
import type { NameNode } from "../../namenode/index.js";
import { requireBuild, startTestDataNode, startTestNameNode } from "./harness.js";

/** The writer's packet: acknowledged bytes advance a packet at a time. */
const PACKET = PACKET_BYTES;
const BLOCK = 4 * PACKET;

describe("lease recovery of a file whose writer was killed mid-block", () => {
  let dir: string;
  let nn: NameNode;
  let dfs: DfsClient;
  const datanodes = new Map<string, DataNode>();
  const writers: WriterProcess[] = [];

  async function startDatanode(id: string): Promise<DataNode> {
    const dn = await startTestDataNode(dir, id, nn.address);
    datanodes.set(id, dn);
    return dn;
  }

  /** Runs the CLI against this namenode (asynchronously: the daemons serve from this process). */
  async function harvest(...args: string[]): Promise<{ status: number | null; stderr: string }> {
    const config = join(dir, "client.json");
    writeFileSync(config, JSON.stringify({ nnAddress: nn.address }));
    const cli = spawn(process.execPath, [distEntry("cli/harvest.js"), ...args, "--config", config], {
      stdio: ["ignore", "ignore", "pipe"],
    });
    let stderr = "";
    cli.stderr.on("data", (d: Buffer) => (stderr += d.toString()));
    const status = await new Promise<number | null>((resolve) => cli.on("exit", resolve));
    return { status, stderr };
  }

  /** Starts a writer of `bytes` random bytes and waits until the pipeline acknowledged `ackedAtLeast` of them. */
  async function writeUntilAcked(path: string, bytes: number, ackedAtLeast: number): Promise<[WriterProcess, Buffer]> {
    const data = randomBytes(bytes);
    const local = join(dir, `${path.replaceAll("/", "_")}.src`);
    writeFileSync(local, data);
    const w = new WriterProcess({ nnAddress: nn.address }, path, local, BLOCK);
    writers.push(w);
    await waitFor(async () => (w.acked >= ackedAtLeast ? true : undefined), {
      what: `${ackedAtLeast} acknowledged bytes (writer said: ${w.stderr})`,
      retryOnError: true,
    });
    return [w, data];
  }

  beforeAll(async () => {
    requireBuild();
    dir = mkdtempSync(join(tmpdir(), "harvest-lease-"));
    nn = await startTestNameNode(dir, {
      datanodeExpiryMs: 5_000,
      monitorIntervalMs: 100,
      replicationIntervalMs: 200,
      // Long enough for the CLI to look at the open file while its writer lives (the lease renews only on calls).
      leaseTimeoutMs: 4_000,
      blockRecoveryTimeoutMs: 1_500,
      defaultReplication: 3,
    });
    for (const id of ["dn1", "dn2", "dn3"]) await startDatanode(id);
    dfs = new DfsClient(nn.address);
    await waitFor(async () => ((await dfs.datanodes()).length === 3 ? true : undefined), {
      what: "three datanodes",
      retryOnError: true,
    });
  });

  afterEach(async () => {
    for (const w of writers.splice(0)) await w.kill();
  });

  afterAll(async () => {
    dfs?.close();
    await Promise.all([...datanodes.values()].map((d) => d.stop()));
    await nn?.stop();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it("keeps every acknowledged byte, byte-identical, and marks the file recovered", async () => {
    // Two whole blocks, and half of a third acknowledged packet by packet; the tail stays in the writer's buffer.
    const acked = 2 * BLOCK + 2 * PACKET;
    const [writer, data] = await writeUntilAcked("/logs/app.log", acked + 1000, acked);

    // While the writer lives, the file is open: a copy of it is refused, or asked for as the visible prefix.
    const copy = join(dir, "open-copy");
    expect(await codeOf(dfs.get("/logs/app.log", copy))).toBe("NAMENODE_FILE_INCOMPLETE");
    expect(existsSync(copy)).toBe(false);
    const visible = await dfs.get("/logs/app.log", copy, { allowOpen: true });
    expect(visible).toBeGreaterThanOrEqual(2 * BLOCK);
    expect(readFileSync(copy).equals(data.subarray(0, visible))).toBe(true);
    const refused = await harvest("fs", "get", "/logs/app.log", join(dir, "cli-copy"));
    expect(refused.status).toBe(1);
    expect(refused.stderr).toContain("[NAMENODE_FILE_INCOMPLETE]");
    const allowed = await harvest("fs", "get", "/logs/app.log", join(dir, "cli-copy"), "--allow-open");
    expect(allowed.status).toBe(0);
    expect(allowed.stderr).toContain("still being written");
    expect(
      data.subarray(0, readFileSync(join(dir, "cli-copy")).length).equals(readFileSync(join(dir, "cli-copy"))),
    ).toBe(true);

    await writer.kill();
    const ackedBeforeDeath = writer.acked;
    expect(ackedBeforeDeath).toBeGreaterThanOrEqual(acked);
    const st = await waitFor(
      async () => {
        const s = await dfs.stat("/logs/app.log");
        return s.complete ? s : undefined;
      },
      { what: "the lease to be recovered", retryOnError: true },
    );
    expect(st.length).toBeGreaterThanOrEqual(ackedBeforeDeath);
    expect(st.length).toBeLessThanOrEqual(data.length);
    expect(st.blocks).toBe(3);
    expect(st.recoveredMs).toBeGreaterThan(0);
    expect(st.recoveredReason).toMatch(/lease expired/);
    const back = await readAll(dfs, "/logs/app.log");
    expect(back.length).toBe(st.length);
    expect(back.equals(data.subarray(0, back.length))).toBe(true);

    const fsck = await dfs.fsck("/logs");
    expect(fsck.recovered.map((f) => f.path)).toEqual(["/logs/app.log"]);
    // The recovered block has its replicas: the file is healthy and fully replicated.
    await waitFor(
      async () => {
        const r = await dfs.fsck("/logs");
        return r.healthy && r.underReplicated.length === 0 ? true : undefined;
      },
      { what: "the recovered block's replicas", retryOnError: true },
    );
  });

  it("skips a datanode that is down during recovery and keeps the prefix on the others", async () => {
    const acked = BLOCK + 3 * PACKET;
    const [writer, data] = await writeUntilAcked("/logs/second.log", acked, acked);
    await writer.kill();
    // One of the three replicas of the last block goes away before the namenode asks.
    await datanodes.get("dn3")!.stop();
    datanodes.delete("dn3");
    const st = await waitFor(
      async () => {
        const s = await dfs.stat("/logs/second.log");
        return s.complete ? s : undefined;
      },
      { what: "the lease to be recovered without dn3", retryOnError: true },
    );
    expect(st.length).toBeGreaterThanOrEqual(acked);
    expect(st.recoveredReason).not.toMatch(/dn3/);
    const back = await readAll(dfs, "/logs/second.log");
    expect(back.equals(data.subarray(0, back.length))).toBe(true);
    expect(back.length).toBeGreaterThanOrEqual(acked);

    // dn3 comes back holding its unfinished replica of the old generation, kept for a recovery that is over. Found by
    // the 30-minute soak: it refused the namenode's copy of the committed block ("already being written here") until
    // the kept replica's TTL, an hour, so the block stayed under-replicated. The copy replaces the stale replica.
    const dn3 = await startDatanode("dn3");
    expect(dn3.store.keptReplicas().length).toBe(1);
    await waitFor(
      async () => {
        const r = await dfs.fsck("/logs/second.log");
        return r.healthy && r.underReplicated.length === 0 ? true : undefined;
      },
      { what: "the block re-replicated onto dn3", retryOnError: true },
    );
    expect(dn3.store.keptReplicas()).toEqual([]);
    const again = await readAll(dfs, "/logs/second.log");
    expect(again.equals(back)).toBe(true);
  });
});
