/**
 * A graceful drain before a planned reimage, through real processes (`harvest cluster up`'s launcher: a resource
 * manager, a namenode, four servers each with a node manager and a datanode): a server running tasks of a job and
 * holding blocks of a file is drained with a deadline. The job completes without a failure; of the server's tasks, those
 * predicted to end before the deadline (the job's history says how long each vertex's tasks run) end there, the others
 * are preempted and re-run elsewhere; the datanode is decommissioned, after which fsck shows every block fully
 * replicated without the server, and wiping it loses nothing.
 */
import { randomBytes } from "node:crypto";
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { waitFor } from "../wait-for.js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { NamenodeAdminClient } from "../../client/namenode-admin-client.js";
import type { DfsClient } from "../../client/dfs-client.js";
import { call, loadHarvestProto, makeClient } from "../../common/grpc.js";
import type { NodeAdminClient } from "../../proto/generated/harvest/v1/NodeAdmin.js";
import { cpuVertex, startTestCluster, waitForJob } from "../integration/harness.js";
import type { TestCluster } from "../integration/harness.js";

const KiB = 1024;

/**
 * Slow tasks (12 s; four, more than fit beside the job manager on one server) and, beside them, quick ones (3 s) in waves: the slow vertex comes first, so its tasks are granted
 * first (a vertex's priority is its topological position), and the quick tasks fill the rest of the cluster.
 */
const JOB = JSON.stringify({
  name: "nightly-etl",
  vertices: [cpuVertex("slow", 4, { holdSeconds: 12 }), cpuVertex("quick", 20, { holdSeconds: 3 })],
});

describe("draining a server before a planned reimage", () => {
  let c: TestCluster;
  let dfs: DfsClient;
  let nodeAdmin: NodeAdminClient;
  let nnAdmin: NamenodeAdminClient;

  beforeAll(async () => {
    c = await startTestCluster({
      idleServers: 4,
      rm: { monitorIntervalMs: 200 },
      // A copy that fails is retried after this long (30 s by default).
      nn: { replicationTimeoutMs: 3_000, replicationIntervalMs: 500 },
    });
    dfs = c.dfs();
    nodeAdmin = makeClient(loadHarvestProto().NodeAdmin, c.desc.rm.address, c.desc.security);
    nnAdmin = new NamenodeAdminClient(c.desc.nn!.address, c.desc.security);
  });
  afterAll(async () => {
    nodeAdmin?.close();
    nnAdmin?.close();
    await c?.stop();
  });

  it("lets what ends before the deadline finish, re-runs the rest elsewhere, and copies the server's blocks away", async () => {
    const data = randomBytes(1024 * KiB);
    const local = join(c.work, "input.bin");
    writeFileSync(local, data);
    await dfs.put(local, "/data/input.bin", { replication: 3, blockSizeBytes: 128 * KiB });

    // A first run teaches the resource manager how long each vertex's tasks live.
    const learn = await c.client.submit(JOB);
    expect((await c.client.waitForCompletion(learn, undefined, 200)).outcome).toBe("JOB_SUCCEEDED");

    const appId = await c.client.submit(JOB);
    const running = await waitForJob(c.client, appId, (r) => (r.progress?.vertices ?? []).some((v) => v.running > 0));
    // After 5.5 s the first wave of quick tasks (3 s, and a heartbeat to report it) has ended: a task container running
    // since the first second is a slow one. The drain below must begin at that point of the tasks' lives (the slow
    // ones with more than the drain's 6 s left), so this is a sleep timed from the first task's start.
    const firstTaskMs = Math.min(
      ...running.containers.filter((x) => !x.isAm && x.startedMs > 0).map((x) => Number(x.startedMs)),
    );
    await new Promise((r) => setTimeout(r, Math.max(0, firstTaskMs + 5_500 - Date.now())));
    const before = await c.client.status(appId);
    const amNode = before.containers.find((x) => x.isAm && x.state !== "COMPLETE")?.nodeId;
    const locations = await dfs.blockLocations("/data/input.bin");
    const blocksOn = (node: string): number =>
      locations.blocks.filter((b) => b.locations.some((l) => l.datanodeId === node)).length;
    const slowNodes = before.containers
      .filter((x) => !x.isAm && x.state === "RUNNING" && Number(x.startedMs) < firstTaskMs + 1_000)
      .map((x) => x.nodeId)
      .filter((n) => n !== amNode);
    expect(slowNodes.length).toBeGreaterThan(0);
    const server = [...slowNodes].sort((a, b) => blocksOn(b) - blocksOn(a))[0]!;
    expect(blocksOn(server)).toBeGreaterThan(0);

    const drainedAt = Date.now();
    const deadlineMs = drainedAt + 6_000;
    const onServer = before.containers.filter((x) => x.nodeId === server && x.state !== "COMPLETE");
    await call(nodeAdmin, nodeAdmin.drain, { nodeIds: [server], deadlineMs });
    await nnAdmin.decommission([server], { deadlineMs });

    const done = await c.client.waitForCompletion(appId, undefined, 200);
    expect(done.outcome).toBe("JOB_SUCCEEDED");
    expect(done.taskContainers?.failed).toBe(0);
    expect(done.progress?.vertices.map((v) => [v.name, v.succeeded])).toEqual([
      ["slow", 4],
      ["quick", 20],
    ]);

    // Each container the server ran when the drain began either ended there before the deadline or was preempted.
    const ended = new Map(done.containers.map((x) => [x.containerId, x]));
    let preempted = 0;
    let finished = 0;
    for (const x of onServer) {
      const e = ended.get(x.containerId)!;
      if (e.cause === "PREEMPTED_BY_DRAIN") preempted++;
      else {
        expect(e.cause).toBe("SUCCEEDED");
        expect(Number(e.finishedMs)).toBeLessThan(deadlineMs);
        finished++;
      }
    }
    expect(preempted).toBeGreaterThan(0);
    // Nothing new went to the server once it drained, and its slow task re-ran elsewhere.
    expect(done.containers.filter((x) => x.nodeId === server && Number(x.startedMs) > drainedAt + 500)).toEqual([]);
    // Every preemption of the job was the drain's, on the drained server: the containers above, and any granted to the
    // server between that status and the drain call (a race a loaded machine lost once: 3 preempted against 2 above).
    const drainPreempted = done.containers.filter((x) => !x.isAm && x.cause === "PREEMPTED_BY_DRAIN");
    expect(drainPreempted.map((x) => x.nodeId).filter((n) => n !== server)).toEqual([]);
    expect(drainPreempted.length).toBeGreaterThanOrEqual(preempted);
    expect(done.taskContainers?.preempted).toBe(drainPreempted.length);

    const status = await call(nodeAdmin, nodeAdmin.getDrainStatus, {});
    const mine = status.drains.find((d) => d.nodeId === server)!;
    expect(mine).toMatchObject({ state: "DRAINED", preempted, killedAtDeadline: 0 });
    expect(mine.finishedOnTheirOwn).toBeGreaterThanOrEqual(finished);

    // The blocks: copied away, then the server can be wiped with nothing under-replicated.
    await waitFor(async () => ((await nnAdmin.status([server]))[0]?.state === "DECOMMISSIONED" ? true : undefined), {
      what: "the datanode decommissioned",
      timeoutMs: 60_000,
      intervalMs: 200,
      retryOnError: true,
    });
    const fsck = await dfs.fsck("/");
    expect(fsck.missing).toEqual([]);
    expect(fsck.underReplicated).toEqual([]);
    const after = await dfs.blockLocations("/data/input.bin");
    for (const b of after.blocks)
      expect(b.locations.filter((l) => l.datanodeId !== server).length).toBeGreaterThanOrEqual(3);
    const dn = (await dfs.datanodes()).find((d) => d.datanodeId === server)!;
    const dt = makeClient(loadHarvestProto().DataTransfer, dn.address, c.desc.security);
    try {
      await call(dt, dt.reimage, {});
    } finally {
      dt.close();
    }
    const wiped = await dfs.fsck("/");
    expect(wiped.missing).toEqual([]);
    expect(wiped.underReplicated).toEqual([]);
    const back = join(c.work, "back.bin");
    await dfs.get("/data/input.bin", back);
    expect(readFileSync(back).equals(data)).toBe(true);
  }, 150_000);
});
