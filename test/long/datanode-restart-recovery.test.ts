/**
 * Lease recovery across datanode restarts, on a real cluster of processes (namenode and three datanodes, over TLS):
 * a writer in its own process is acknowledged for part of a block, then it and every datanode of the block's pipeline
 * are kill -9'd, and the datanodes are started again before the writer's lease expires. The restarted datanodes keep
 * their unfinished replicas (cut to what verifies), so the namenode's block recovery finds them: the file reads back
 * with every acknowledged byte, byte-identical.
 */
import { randomBytes } from "node:crypto";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { readAll } from "../dfs-read.js";
import { alive } from "../processes.js";
import { WriterProcess } from "../dfs-writer-process.js";
import { waitFor } from "../wait-for.js";
import { describe, expect, it } from "vitest";
import { readCluster, restartDaemon } from "../../localcluster/cluster.js";
import { PACKET_BYTES } from "../../client/dfs-client.js";
import { Logger } from "../../common/log.js";
import { suiteCluster } from "../integration/harness.js";

const MiB = 1024 * 1024;
/** The writer's packet: acknowledged bytes advance a packet at a time. */
const PACKET = PACKET_BYTES;
const BLOCK = Math.max(MiB, 4 * PACKET);
const quiet = new Logger("test", "error");

/** The waits below poll through restarts, when an answer may fail. */
const POLL = { retryOnError: true };

describe("lease recovery after the pipeline's datanodes were kill -9'd and restarted", () => {
  const cluster = suiteCluster({
    idleServers: 3,
    // Long enough to restart three datanodes before the namenode starts recovering the writer's file.
    nn: { heartbeatIntervalMs: 300, leaseTimeoutMs: 8_000, blockRecoveryTimeoutMs: 2_000 },
    dn: { reconnectMaxMs: 500 },
  });

  it("reads back every acknowledged byte of the block being written", async () => {
    const c = cluster();
    const dfs = c.dfs({ logger: quiet });
    // One whole block and three packets of the second acknowledged; the last 1000 bytes stay in the writer's buffer.
    const ackedTarget = BLOCK + 3 * PACKET;
    const data = randomBytes(ackedTarget + 1000);
    const local = join(c.work, "src.bin");
    writeFileSync(local, data);
    const writer = new WriterProcess({ config: join(c.dir, "client.json") }, "/logs/restart.log", local, BLOCK);
    try {
      await waitFor(async () => (writer.acked >= ackedTarget ? true : undefined), {
        what: `the pipeline to acknowledge the bytes (writer said: ${writer.stderr})`,
        ...POLL,
      });
    } finally {
      await writer.kill();
    }
    const acked = writer.acked;

    // Every datanode (the whole pipeline, replication 3 of 3) dies with -9 and comes back before the lease expires.
    const dns = readCluster(c.dir).nodes.map((n) => n.datanode!);
    for (const dn of dns) process.kill(dn.pid, "SIGKILL");
    await waitFor(async () => (dns.some((d) => alive(d.pid)) ? undefined : true), {
      what: "the datanodes to be gone",
      ...POLL,
    });
    for (const n of readCluster(c.dir).nodes) await restartDaemon(c.dir, `${n.nodeId}-dn`);

    const st = await waitFor(
      async () => {
        const s = await dfs.stat("/logs/restart.log");
        return s.complete ? s : undefined;
      },
      { what: "the lease to be recovered", timeoutMs: 25_000, ...POLL },
    );
    expect(st.recoveredMs).toBeGreaterThan(0);
    expect(st.length).toBeGreaterThanOrEqual(acked);
    expect(st.length).toBeLessThanOrEqual(data.length);
    const back = await readAll(dfs, "/logs/restart.log");
    expect(back.length).toBe(st.length);
    expect(back.equals(data.subarray(0, back.length))).toBe(true);
    await waitFor(
      async () => {
        const r = await dfs.fsck("/logs");
        return r.healthy && r.underReplicated.length === 0 ? true : undefined;
      },
      { what: "fsck healthy", ...POLL },
    );
  }, 45_000);
});
