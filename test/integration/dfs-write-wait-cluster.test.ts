/**
 * The put of the issue, on a real local cluster (`harvest cluster up`'s daemons, each in its own process, mutual TLS):
 * two servers whose primary tenants replay a trace that is busy 4 s in every 8. While every primary is busy, a put
 * with a short deadline fails with DFS_DATANODES_UNAVAILABLE naming the busy primaries, and the same put again at once,
 * with `overwrite` and the default deadline, waits for the primaries to calm down and stores the file byte for byte.
 */
import { createHash, randomBytes } from "node:crypto";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { waitFor } from "../wait-for.js";
import type { DfsClient } from "../../client/dfs-client.js";
import type { WriteWaitEvent } from "../../client/write-wait.js";
import { detailsOf, isHarvestError } from "../../common/errors.js";
import { startTestCluster, traceSpec } from "./harness.js";
import type { TestCluster } from "./harness.js";

const MiB = 1024 * 1024;

function sha256(data: Buffer): string {
  return createHash("sha256").update(data).digest("hex");
}

describe("a put on a cluster whose primaries are all busy for a few seconds", () => {
  let c: TestCluster;
  let work: string;

  beforeAll(async () => {
    work = mkdtempSync(join(tmpdir(), "harvest-write-wait-"));
    // One step per second: idle 4 s, busy 4 s, over and over (longer than the test).
    const cycle = [5, 5, 5, 5, 100, 100, 100, 100];
    const spec = traceSpec(work, "cycle", 1, Array.from({ length: 60 }, () => cycle).flat());
    c = await startTestCluster({ primaries: [spec, spec] });
  });

  afterAll(async () => {
    await c?.stop();
    if (work) rmSync(work, { recursive: true, force: true });
  });

  /**
   * Waits until the namenode has just heard from every datanode that its primary is busy: a moment when some primary
   * was not, then one when all are, so that the busy spell has most of its 4 s ahead.
   */
  async function everyPrimaryJustBusy(dfs: DfsClient): Promise<void> {
    const allBusy = async (want: boolean): Promise<true | undefined> => {
      const dns = await dfs.datanodes();
      return dns.length === 2 && dns.every((d) => d.primaryBusy) === want ? true : undefined;
    };
    const poll = { intervalMs: 50, timeoutMs: 60_000 };
    await waitFor(() => allBusy(false), { what: "some primary calm at the namenode", ...poll });
    await waitFor(() => allBusy(true), { what: "every primary busy at the namenode", ...poll });
  }

  it("fails fast with a short deadline, naming the busy primaries, and the retry at once waits and succeeds", async () => {
    const data = randomBytes(6 * MiB);
    const local = join(work, "put.bin");
    writeFileSync(local, data);
    const dfs = c.dfs();
    await everyPrimaryJustBusy(dfs);

    const hasty = c.dfs({ writeWaitMs: 200 });
    const failure = await hasty.put(local, "/put.bin", { replication: 2 }).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(isHarvestError(failure, "DFS_DATANODES_UNAVAILABLE"), String(failure)).toBe(true);
    expect((failure as Error).message).toContain("within 0.2 s: 2 busy with their primary tenants");
    expect(detailsOf(failure, "DFS_DATANODES_UNAVAILABLE")).toMatchObject({ live: "2", busy: "2" });

    // At once, by another client (as a second `harvest fs put --overwrite` would be): no NAMENODE_FILE_INCOMPLETE.
    const waits: WriteWaitEvent[] = [];
    const patient = c.dfs();
    const status = await patient.put(local, "/put.bin", {
      replication: 2,
      overwrite: true,
      onWait: (w) => waits.push(w),
    });
    expect(status.complete).toBe(true);
    expect(waits.length).toBeGreaterThan(0);
    expect(waits[0]!.reason).toBe("2 busy with their primary tenants");
    const chunks: Buffer[] = [];
    for await (const chunk of dfs.createReadStream("/put.bin")) chunks.push(chunk as Buffer);
    expect(sha256(Buffer.concat(chunks))).toBe(sha256(data));
  });
});
