/**
 * Lease renewal on real daemons: an in-process namenode with a short lease and three datanodes (real gRPC on loopback,
 * real block files). A live writer that streams one block slowly makes no namenode call for several lease periods;
 * its client's RenewLease keeps the lease, so the file completes byte-identical instead of being recovered under it.
 */
import { randomBytes } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { readAll } from "../dfs-read.js";
import { waitFor } from "../wait-for.js";
import { startTestDataNode, startTestNameNode } from "./harness.js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { DfsClient } from "../../client/dfs-client.js";
import { Logger } from "../../common/log.js";
import type { DataNode } from "../../datanode/index.js";
import type { NameNode } from "../../namenode/index.js";

const quiet = new Logger("test", "error");
const KiB = 1024;
const PACKET = 64 * KiB;
const LEASE_MS = 1_500;

describe("lease renewal of a live writer", () => {
  let dir: string;
  let nn: NameNode;
  let dfs: DfsClient;
  const datanodes: DataNode[] = [];

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), "harvest-renew-"));
    nn = await startTestNameNode(dir, {
      monitorIntervalMs: 100,
      replicationIntervalMs: 200,
      leaseTimeoutMs: LEASE_MS,
      blockRecoveryTimeoutMs: 1_000,
      defaultReplication: 3,
    });
    for (const id of ["dn1", "dn2", "dn3"]) {
      datanodes.push(await startTestDataNode(dir, id, nn.address));
    }
    // A third of the lease, as the option's documentation asks.
    dfs = new DfsClient(nn.address, { leaseRenewMs: LEASE_MS / 3, logger: quiet });
    await waitFor(async () => ((await dfs.datanodes()).length === 3 ? true : undefined), {
      what: "three datanodes",
      retryOnError: true,
    });
  });

  afterAll(async () => {
    dfs?.close();
    await Promise.all(datanodes.map((d) => d.stop()));
    await nn?.stop();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it("keeps the lease of a writer streaming one block for several lease periods, and the file completes", async () => {
    const packets = 7;
    const data = randomBytes(packets * PACKET + 1000);
    const out = dfs.createWriteStream("/slow/one-block.bin", { replication: 3, blockSizeBytes: 1024 * KiB });
    let failure: Error | undefined;
    const failed = new Promise<Error>((resolve) => out.once("error", resolve)).then((err) => (failure = err));
    const finished = new Promise<void>((resolve) => out.once("finish", resolve));
    // One packet every ~700 ms: about 5 s inside one block, over three lease periods with no AddBlock or Complete.
    for (let i = 0; i < packets && !failure; i++) {
      const piece = data.subarray(i * PACKET, (i + 1) * PACKET);
      if (!out.write(piece)) await Promise.race([new Promise((r) => out.once("drain", r)), failed]);
      await new Promise((r) => setTimeout(r, 700));
    }
    if (!failure) out.end(data.subarray(packets * PACKET));
    await Promise.race([finished, failed]);
    expect(failure?.message).toBeUndefined();

    const st = await dfs.stat("/slow/one-block.bin");
    expect(st.complete).toBe(true);
    expect(st.length).toBe(data.length);
    expect(st.recoveredMs).toBe(0);
    expect((await readAll(dfs, "/slow/one-block.bin")).equals(data)).toBe(true);
    expect(dfs.writeStats.leaseRenewals).toBeGreaterThan(0);
    expect((await dfs.fsck("/slow")).recovered).toEqual([]);
  });
});
