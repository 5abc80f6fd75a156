/**
 * A namenode kill -9'd mid-work, on a real cluster of processes (namenode and three datanodes, over TLS): files
 * written and acknowledged before the kill read back byte-identical after its restart; a write in flight during the
 * outage either completes (the client retries its namenode calls through the outage and the safe mode after it) or
 * fails with a coded error, and never leaves a complete file with content that was not written; fsck is healthy.
 */
import { randomBytes } from "node:crypto";
import { readAll } from "../dfs-read.js";
import { alive } from "../processes.js";
import { waitFor } from "../wait-for.js";
import { describe, expect, it } from "vitest";
import { localDfsClient, restartDaemon } from "../../localcluster/cluster.js";
import type { DfsClient } from "../../client/dfs-client.js";
import { isHarvestError } from "../../common/errors.js";
import { Logger } from "../../common/log.js";
import { suiteCluster } from "../integration/harness.js";

const KiB = 1024;
const MiB = 1024 * KiB;
const quiet = new Logger("test", "error");

async function writeFile(dfs: DfsClient, path: string, data: Buffer): Promise<void> {
  const out = dfs.createWriteStream(path, { replication: 3, blockSizeBytes: MiB });
  await new Promise<void>((resolve, reject) => {
    out.once("finish", resolve);
    out.once("error", reject);
    out.end(data);
  });
}

/** How the waits below poll the restarting namenode. */
const POLL = { intervalMs: 200, retryOnError: true };

describe("a namenode killed with -9 in the middle of work", () => {
  const cluster = suiteCluster({
    idleServers: 3,
    nn: { heartbeatIntervalMs: 300, replicationIntervalMs: 300, leaseTimeoutMs: 20_000 },
    dn: { reconnectMaxMs: 500 },
  });

  it("loses no acknowledged file, and the write in flight completes or fails with a code, never wrong", async () => {
    const c = cluster();
    const dfs = c.dfs({ logger: quiet });
    const done = new Map<string, Buffer>();
    for (const [i, size] of [3 * MiB + 17, 512 * KiB, 1, 2 * MiB].entries()) {
      const data = randomBytes(size);
      await writeFile(dfs, `/before/f${i}.bin`, data);
      done.set(`/before/f${i}.bin`, data);
    }

    // The write in flight: 6 one-MiB blocks fed slowly; the namenode dies once 2.5 MiB are acknowledged, so the
    // writer needs it (AddBlock, Complete) while it is down and while it is in safe mode after its restart.
    const writer = localDfsClient(c.desc, { logger: quiet, leaseRenewMs: 1_000, namenodeRetryMs: 25_000 });
    const data = randomBytes(6 * MiB);
    let acked = 0;
    const out = writer.createWriteStream("/inflight.bin", {
      replication: 3,
      blockSizeBytes: MiB,
      onProgress: (b) => (acked = b),
    });
    let failure: unknown;
    const outcome = new Promise<void>((resolve) => {
      out.once("finish", resolve);
      out.once("error", (err) => {
        failure = err;
        resolve();
      });
    });
    let restart: Promise<unknown> | undefined;
    const piece = 128 * KiB;
    for (let at = 0; at < data.length && failure === undefined; at += piece) {
      if (!out.write(data.subarray(at, at + piece)))
        await Promise.race([new Promise((r) => out.once("drain", r)), outcome]);
      if (!restart && acked >= 2.5 * MiB) {
        const pid = c.desc.nn!.pid;
        process.kill(pid, "SIGKILL");
        restart = waitFor(async () => (alive(pid) ? undefined : true), {
          what: "the killed namenode to be gone",
          ...POLL,
        }).then(() => restartDaemon(c.dir, "nn"));
      }
      await new Promise((r) => setTimeout(r, 40));
    }
    if (failure === undefined) out.end();
    await outcome;
    expect(restart, "the namenode was killed mid-write").toBeDefined();
    await restart;
    writer.close();

    // Every file acknowledged before the kill is there, byte-identical.
    await waitFor(async () => ((await dfs.fsck("/")).safeMode ? undefined : true), {
      what: "safe mode off",
      ...POLL,
    });
    for (const [path, bytes] of done) expect((await readAll(dfs, path)).equals(bytes), path).toBe(true);

    const st = await dfs.stat("/inflight.bin");
    if (failure === undefined) {
      expect(st.complete).toBe(true);
      expect((await readAll(dfs, "/inflight.bin")).equals(data)).toBe(true);
    } else {
      // A coded error; the file is not complete, or (once recovered) a marked prefix of what was written.
      expect(isHarvestError(failure), String(failure)).toBe(true);
      if (st.complete) {
        expect(st.recoveredMs).toBeGreaterThan(0);
        expect(data.subarray(0, st.length).equals(await readAll(dfs, "/inflight.bin"))).toBe(true);
      }
    }
    expect(writer.writeStats.namenodeRetries).toBeGreaterThan(0);

    await waitFor(
      async () => {
        const r = await dfs.fsck("/");
        return r.healthy && r.underReplicated.length === 0 && r.missing.length === 0 ? true : undefined;
      },
      { what: "fsck healthy", ...POLL },
    );
  }, 40_000);
});
