/**
 * Algorithm 2 on real daemons in-process (resource manager, namenode, nine datanodes; real gRPC on loopback, real
 * files): the namenode reads the tenants' reimage and peak-CPU history from the resource manager's admin API, and every
 * block written through the DfsClient lands in grid cells of distinct rows and columns and in distinct environments,
 * also after a reimage forces re-replication.
 */
import { randomBytes } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pipeline } from "node:stream/promises";
import { Readable } from "node:stream";
import { waitFor } from "../wait-for.js";
import { startTestDataNode } from "./harness.js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { DfsClient } from "../../client/dfs-client.js";
import { TenantAdminClient } from "../../client/tenant-admin-client.js";
import { Logger } from "../../common/log.js";
import type { DataNode } from "../../datanode/index.js";
import { NameNode } from "../../namenode/index.js";
import { ResourceManager } from "../../resourcemanager/resource-manager.js";

const quiet = new Logger("test", "error");
const DAY_MS = 86_400_000;
const BLOCK = 64 * 1024;

/**
 * Nine tenants of one server each, built so that their grid cell is known: row r = reimage tier (0, 1 and 4 reimages
 * per server in the last month), column c = peak-CPU tier (flat 10 %, 40 %, 80 %); equal disks, so each tenant holds a
 * ninth of the space and the equal-space tertiles fall between the tiers. Environments (r + c) mod 3 make the
 * environment rule bite: of the cells free of the first replica's row and column, some share its environment.
 */
const tenants = [0, 1, 2].flatMap((r) =>
  [0, 1, 2].map((col) => ({ name: `t${r}${col}`, server: `dn${r}${col}`, row: r, col, env: `env${(r + col) % 3}` })),
);
const byServer = new Map(tenants.map((t) => [t.server, t]));

describe("diversity replica placement (Algorithm 2)", () => {
  let dir: string;
  let rm: ResourceManager;
  let nn: NameNode;
  const dns: DataNode[] = [];
  let dfs: DfsClient;

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), "harvest-alg2-"));
    rm = new ResourceManager({ dataDir: join(dir, "rm") }, { logger: quiet });
    await rm.start();
    const admin = new TenantAdminClient(rm.address);
    try {
      const reimages = ["time_s,server"];
      for (const t of tenants) {
        await admin.register({ name: t.name, environment: t.env });
        await admin.assign(t.name, [t.server]);
        const peak = [10, 40, 80][t.col]!;
        const lines = ["time_s,cpu_pct"];
        const end = Math.floor(Date.now() / 1000);
        for (let s = end - 2 * 86_400; s < end; s += 300) lines.push(`${s},${peak}`);
        await admin.importHistoryData(Buffer.from(lines.join("\n") + "\n"), { format: "csv", server: t.server });
        for (let i = 0; i < [0, 1, 4][t.row]!; i++)
          reimages.push(`${Math.floor((Date.now() - (i + 1) * 3 * DAY_MS) / 1000)},${t.server}`);
      }
      await admin.importHistoryData(Buffer.from(reimages.join("\n") + "\n"), { format: "reimages" });
      await admin.recluster();
    } finally {
      admin.close();
    }
    nn = new NameNode(
      {
        dataDir: join(dir, "nn"),
        placementPolicy: "diversity",
        rmAddress: rm.address,
        tenantRefreshMs: 200,
        defaultBlockSizeBytes: BLOCK,
        heartbeatIntervalMs: 200,
        datanodeExpiryMs: 2_000,
        replicationIntervalMs: 100,
      },
      { logger: quiet },
    );
    await nn.start();
    for (const t of tenants) {
      dns.push(await startTestDataNode(dir, t.server, nn.address, { heartbeatIntervalMs: 200 }));
    }
    dfs = new DfsClient(nn.address);
    await waitFor(async () => (await dfs.datanodes()).length === 9, { what: "nine datanodes" });
    // The namenode rebuilds its grid with every datanode's free space (it refreshes every 200 ms).
    await waitFor(
      async () => {
        const { placement } = (await (await fetch(`${nn.httpUrl}/ws/v1/nn/placement`)).json()) as {
          placement: { rows: { cells: { servers: number; freeBytes: number }[] }[] };
        };
        const cells = placement.rows.flatMap((r) => r.cells);
        return cells.filter((c) => c.servers > 0 && c.freeBytes > 0).length === 9;
      },
      { what: "the grid to count every datanode's free space" },
    );
  });

  afterAll(async () => {
    dfs?.close();
    for (const dn of dns) await dn.stop();
    await nn?.stop();
    await rm?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  async function write(path: string, bytes: number, replication: number): Promise<void> {
    await pipeline(Readable.from([randomBytes(bytes)]), dfs.createWriteStream(path, { replication }));
  }

  /** Each block's replica holders, once the datanodes have reported every replica. */
  async function replicaSets(path: string, replication = 3): Promise<string[][]> {
    let sets: string[][] = [];
    await waitFor(
      async () => {
        const located = await dfs.blockLocations(path);
        sets = located.blocks.map((b) => b.locations.map((l) => l.datanodeId));
        return sets.every((s) => s.length === replication);
      },
      { what: `${path}'s replicas` },
    );
    return sets;
  }

  function expectDiverse(servers: string[]): void {
    const cells = servers.map((s) => byServer.get(s)!);
    expect(new Set(servers).size).toBe(servers.length);
    expect(new Set(cells.map((c) => c.row)).size).toBe(cells.length);
    expect(new Set(cells.map((c) => c.col)).size).toBe(cells.length);
    expect(new Set(cells.map((c) => c.env)).size).toBe(cells.length);
  }

  it("puts the three replicas of every block in distinct rows, columns and environments, using every cell", async () => {
    const used = new Set<string>();
    for (let f = 0; f < 4; f++) {
      await write(`/alg2/f${f}`, 16 * BLOCK, 3);
      for (const replicas of await replicaSets(`/alg2/f${f}`)) {
        expect(replicas).toHaveLength(3);
        expectDiverse(replicas);
        for (const s of replicas) used.add(s);
      }
    }
    expect(used.size).toBe(9);
  });

  it("keeps the rules when a reimage makes the namenode re-replicate", async () => {
    const before = await replicaSets("/alg2/f0");
    const victim = before[0]![0]!;
    const reimagesOf = async (): Promise<number> =>
      (await dfs.datanodes()).find((d) => d.datanodeId === victim)?.reimages ?? -1;
    const seen = await reimagesOf();
    const wiped = await dns.find((d) => d.options.datanodeId === victim)!.reimage();
    expect(wiped.blocksWiped).toBeGreaterThan(0);
    await waitFor(async () => (await reimagesOf()) > seen, { what: "the namenode to see the reimage" });
    await waitFor(async () => (await dfs.fsck("/alg2")).healthy, { what: "re-replication" });
    for (let f = 0; f < 4; f++) for (const replicas of await replicaSets(`/alg2/f${f}`)) expectDiverse(replicas);
  });
});
