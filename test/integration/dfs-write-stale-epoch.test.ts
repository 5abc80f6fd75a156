/**
 * A write that spans a namenode failover (two HA namenodes in this process against a real etcd, one real datanode):
 * the block the client got from the old active carries a token of the old term, which the datanode, having heard of
 * the new active, refuses (STALE_EPOCH). The client takes a fresh block from the new active and writes on, unseen by
 * its caller: the datanode is not excluded as a bad one (with a single datanode that would fail the write).
 */
import { randomBytes } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { finished } from "node:stream/promises";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { DfsClient } from "../../client/dfs-client.js";
import type { NamenodeMethod } from "../../client/dfs-host.js";
import type { DataNode } from "../../datanode/index.js";
import type { EpochFence } from "../../datanode/namenode-links.js";
import type { NameNode } from "../../namenode/index.js";
import { haveEtcd, startTestEtcd } from "../helpers/etcd.js";
import type { TestEtcd } from "../helpers/etcd.js";
import { startTestDataNode, startTestNameNode } from "./harness.js";
import { waitFor } from "../wait-for.js";

/** The newest namenode term the datanode has heard of (its fence: namenode-links.ts). */
function termSeen(dn: DataNode): number {
  return (dn as unknown as { links: { fence: EpochFence } }).links.fence.seen;
}

describe.skipIf(!haveEtcd)("a DFS write across a namenode failover", () => {
  let etcd: TestEtcd;
  let dir: string;
  let nnA: NameNode;
  let nnB: NameNode;
  let dn: DataNode;
  let dfs: DfsClient;

  beforeAll(async () => {
    etcd = await startTestEtcd();
    dir = mkdtempSync(join(tmpdir(), "harvest-stale-epoch-"));
    const ha = (haId: string): Parameters<typeof startTestNameNode>[1] => ({
      haCoordination: etcd.coordination({ clusterId: "stale-epoch-test", sessionTtlS: 2 }),
      haId,
    });
    nnA = await startTestNameNode(join(dir, "a"), ha("nn-a"));
    await waitFor(() => nnA.haStatus.role === "active", { what: "nn-a to become active" });
    nnB = await startTestNameNode(join(dir, "b"), ha("nn-b"));
    dn = await startTestDataNode(dir, "dn1", `${nnA.address},${nnB.address}`);
    dfs = new DfsClient(`${nnA.address},${nnB.address}`);
    await waitFor(async () => (await dfs.datanodes()).some((d) => d.remainingBytes > 0), {
      what: "the datanode to register with the active namenode",
      retryOnError: true,
    });
  }, 60_000);

  afterAll(async () => {
    dfs?.close();
    await dn?.stop();
    await nnB?.stop();
    await nnA?.stop();
    await etcd?.stop();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it("writes a block whose first token the datanode refused as one of the old term, without an error", async () => {
    const oldEpoch = nnA.haStatus.epoch;
    // The old active answers addBlock, then is lost before the client opens the pipeline; the datanode hears of the
    // new active's term meanwhile.
    const nnCallRetrying = dfs.nnCallRetrying.bind(dfs);
    let interposed = false;
    dfs.nnCallRetrying = async <Req, Res>(what: string, method: NamenodeMethod<Req, Res>, req: Req): Promise<Res> => {
      const res = await nnCallRetrying(what, method, req);
      if (what === "addBlock" && !interposed) {
        interposed = true;
        await nnA.stop();
        await waitFor(() => nnB.haStatus.role === "active", { what: "nn-b to become active" });
        const epoch = nnB.haStatus.epoch;
        await waitFor(() => termSeen(dn) === epoch, { what: `the datanode to hear of term ${epoch}` });
      }
      return res;
    };
    const data = randomBytes(3 * 1024 * 1024 + 17);
    const out = dfs.createWriteStream("/across-failover.bin", { replication: 1 });
    out.end(data);
    await finished(out);
    expect(interposed).toBe(true);
    expect(nnB.haStatus.epoch).toBeGreaterThan(oldEpoch);
    // The datanode refused one pipeline (the old term's token) and took the next.
    expect(dfs.writeStats.pipelineFailures).toBe(1);
    const chunks: Buffer[] = [];
    for await (const c of dfs.createReadStream("/across-failover.bin")) chunks.push(c as Buffer);
    expect(Buffer.concat(chunks).equals(data)).toBe(true);
  }, 60_000);
});
