/**
 * Honest capacity on real daemons: a namenode and two datanodes storing on the same disk (a local cluster's layout),
 * each with the whole file system as its capacity. The namenode counts that disk once, every datanode's and the
 * total's four numbers add up (capacity = DFS used + non-DFS used + remaining), the total is the disk's size as
 * statfs gives it, and a file that is no replica grows non-DFS used, not DFS used.
 */
import { mkdtempSync, rmSync, statfsSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { DataNode } from "../../datanode/index.js";
import type { NameNode } from "../../namenode/index.js";
import { waitFor } from "../wait-for.js";
import { startTestDataNode, startTestNameNode } from "./harness.js";

interface Space {
  capacityBytes: number;
  usedBytes: number;
  nonDfsUsedBytes: number;
  remainingBytes: number;
}
interface Report extends Space {
  datanodeId: string;
  machineId: string;
  fsId: string;
}
interface Totals extends Space {
  fileSystems: number;
}

const MiB = 1024 * 1024;

describe("capacity of datanodes sharing a disk", () => {
  const dir = mkdtempSync(join(tmpdir(), "harvest-nn-capacity-"));
  let nn: NameNode;
  const dns: DataNode[] = [];

  async function rest<T>(path: string): Promise<T> {
    const res = await fetch(`${nn.httpUrl!}${path}`);
    expect(res.status, path).toBe(200);
    return (await res.json()) as T;
  }
  const totals = async (): Promise<Totals> =>
    (await rest<{ nameNodeInfo: { datanodes: Totals } }>("/ws/v1/nn/info")).nameNodeInfo.datanodes;
  const reports = async (): Promise<Report[]> => (await rest<{ datanodes: Report[] }>("/ws/v1/nn/datanodes")).datanodes;

  beforeAll(async () => {
    nn = await startTestNameNode(dir);
    for (const id of ["dn1", "dn2"])
      dns.push(await startTestDataNode(dir, id, nn.address, { capacityBytes: 0, heartbeatIntervalMs: 200 }));
    await waitFor(async () => (await reports()).length === 2, { what: "two datanodes registered", timeoutMs: 10_000 });
  }, 30_000);

  afterAll(async () => {
    for (const dn of dns) await dn.stop();
    await nn?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  it("counts the shared disk once, at its size, and every datanode's numbers add up", async () => {
    const disk = statfsSync(dir);
    const t = await totals();
    expect(t.fileSystems).toBe(1);
    expect(t.capacityBytes).toBe(disk.blocks * disk.bsize);
    expect(t.usedBytes + t.nonDfsUsedBytes + t.remainingBytes).toBe(t.capacityBytes);
    const rs = await reports();
    expect(new Set(rs.map((r) => `${r.machineId}/${r.fsId}`)).size).toBe(1);
    for (const r of rs) {
      expect(r.machineId, r.datanodeId).not.toBe("");
      expect(r.capacityBytes, r.datanodeId).toBe(disk.blocks * disk.bsize);
      expect(r.usedBytes + r.nonDfsUsedBytes + r.remainingBytes, r.datanodeId).toBe(r.capacityBytes);
    }
    // Not twice the disk, as a plain sum of the two datanodes would say.
    expect(t.capacityBytes).toBeLessThan(rs[0]!.capacityBytes + rs[1]!.capacityBytes);
  });

  it("grows non-DFS used, not DFS used, when another file fills the disk", async () => {
    const before = await totals();
    // 256 MiB that is no replica, on the datanodes' disk; other processes on the machine may write meanwhile, hence
    // the margin.
    writeFileSync(join(dir, "other-file"), Buffer.alloc(256 * MiB, 1));
    let after = before;
    await waitFor(
      async () => {
        after = await totals();
        return after.nonDfsUsedBytes - before.nonDfsUsedBytes > 128 * MiB;
      },
      { what: "non-DFS used to grow by the file", timeoutMs: 10_000 },
    );
    expect(after.nonDfsUsedBytes).toBeGreaterThan(0);
    expect(after.usedBytes).toBe(before.usedBytes);
    expect(after.usedBytes + after.nonDfsUsedBytes + after.remainingBytes).toBe(after.capacityBytes);
  }, 20_000);
});
