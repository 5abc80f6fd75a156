/**
 * ClientNamenode.ReportBadBlocks on a secure cluster of four datanodes (real processes, TLS, block files): who may
 * report a replica bad, and that no report, however many replicas it names, makes a file unreadable.
 */
import { createHash, randomBytes } from "node:crypto";
import { readFileSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { DfsClient } from "../../client/dfs-client.js";
import { isHarvestError } from "../../common/errors.js";
import type { ClientSecurity } from "../../common/grpc.js";
import { issueCertificate } from "../../localcluster/cluster-ca.js";
import { waitFor } from "../wait-for.js";
import { startTestCluster } from "../integration/harness.js";
import type { TestCluster } from "../integration/harness.js";

const MiB = 1024 * 1024;
const POLL = { timeoutMs: 30_000, intervalMs: 250, retryOnError: true };

const sha256 = (b: Buffer): string => createHash("sha256").update(b).digest("hex");

describe("bad block reports", () => {
  let c: TestCluster;
  let admin: DfsClient;
  let alice: DfsClient;

  /** Writes `bytes` to `path` as the admin with `mode`, and waits for its three replicas. */
  async function put(path: string, mode: number): Promise<string> {
    const data = randomBytes(2 * MiB);
    const local = join(c.work, path.replaceAll("/", "_"));
    writeFileSync(local, data);
    await admin.put(local, path, { replication: 3 });
    await admin.chmod(path, mode);
    await waitFor(async () => ((await admin.fsck(path)).underReplicated.length === 0 ? true : undefined), {
      what: `${path} replicated`,
      ...POLL,
    });
    return sha256(data);
  }

  const read = async (who: DfsClient, path: string): Promise<string> => {
    const hash = createHash("sha256");
    for await (const chunk of who.createReadStream(path)) hash.update(chunk as Buffer);
    return hash.digest("hex");
  };

  /** Reports every replica of the file's first block bad as `who`, with `blockToken`. */
  const reportAll = async (who: DfsClient, path: string, blockToken: string): Promise<unknown> => {
    const lb = (await admin.blockLocations(path)).blocks[0]!;
    expect(lb.locations).toHaveLength(3);
    return who
      .nnCall(who.namenode.reportBadBlocks, {
        blocks: lb.locations.map((dn) => ({ block: lb.block, datanodeId: dn.datanodeId, reason: "test", blockToken })),
      })
      .then(
        () => "accepted",
        (e: unknown) => (isHarvestError(e) ? e.code : e),
      );
  };

  beforeAll(async () => {
    c = await startTestCluster({ idleServers: 4, nn: { datanodeExpiryMs: 3_000, replicationIntervalMs: 300 } });
    if (!c.desc.security) throw new Error("startTestCluster should start a secure cluster");
    const ca = c.desc.security.ca;
    const certs = join(c.work, "certs");
    const aliceTls: ClientSecurity = {
      ca,
      ...(await issueCertificate(dirname(ca), certs, { name: "alice", role: "user" })),
    };
    admin = c.dfs();
    alice = c.dfs({ security: aliceTls });
  }, 120_000);

  afterAll(() => c?.stop());

  it("refuses a user without a READ token for the block, and the file still reads back byte-identical", async () => {
    const hash = await put("/private.bin", 0o600);
    // Alice cannot read the file, so she has no token for its block: none, or one for a block of her own.
    expect(await reportAll(alice, "/private.bin", "")).toBe("PERMISSION_DENIED");
    const other = await put("/other.bin", 0o644);
    const herToken = (await alice.blockLocations("/other.bin")).blocks[0]!.blockToken;
    expect(await reportAll(alice, "/private.bin", herToken)).toBe("PERMISSION_DENIED");
    const report = await admin.fsck("/private.bin");
    expect(report.corrupt).toEqual([]);
    expect(report.missing).toEqual([]);
    expect(await read(admin, "/private.bin")).toBe(hash);
    expect(await read(admin, "/other.bin")).toBe(other);
    // The namenode logged who tried.
    expect(readFileSync(c.desc.nn!.log, "utf8")).toMatch(/bad block report refused.*alice/);
  });

  it("keeps a block readable when a reader with a token reports every replica bad, and ends fully replicated", async () => {
    const hash = await put("/shared.bin", 0o644);
    const token = (await alice.blockLocations("/shared.bin")).blocks[0]!.blockToken;
    expect(await reportAll(alice, "/shared.bin", token)).toBe("accepted");
    // Never missing: the last good replica was kept, and every reader gets the original bytes.
    expect((await admin.fsck("/shared.bin")).missing).toEqual([]);
    expect(await read(alice, "/shared.bin")).toBe(hash);
    // The reported replicas are replaced by copies of the good one, then deleted: healthy again.
    let last: unknown;
    await waitFor(
      async () => {
        const r = await admin.fsck("/shared.bin");
        last = r;
        expect(r.missing).toEqual([]);
        return r.healthy && r.underReplicated.length === 0 && r.corrupt.length === 0 ? true : undefined;
      },
      { what: () => `repair (fsck: ${JSON.stringify(last)})`, ...POLL },
    );
    expect(await read(admin, "/shared.bin")).toBe(hash);
    expect(readFileSync(c.desc.nn!.log, "utf8")).toMatch(/replica reported corrupt.*alice/);
  });
});
