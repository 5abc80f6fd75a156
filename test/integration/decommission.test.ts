/**
 * Decommissioning on real daemons in-process, over mutual TLS under a cluster CA: a namenode and four datanodes (real
 * gRPC on loopback, real block files). A datanode holding blocks of a file is drained through the NamenodeAdmin
 * service until DECOMMISSIONED; wiping and stopping it then loses nothing, and the file reads back byte-identical. A
 * user certificate is refused, an unknown datanode gets a coded error, and the state survives a namenode restart.
 */
import { randomBytes } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Readable } from "node:stream";
import { pipeline } from "node:stream/promises";
import { codeOf } from "../error-code.js";
import { readAll } from "../dfs-read.js";
import { waitFor } from "../wait-for.js";
import { startTestDataNode } from "./harness.js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { DfsClient } from "../../client/dfs-client.js";
import { NamenodeAdminClient } from "../../client/namenode-admin-client.js";
import type { DatanodeAdminStatus } from "../../client/namenode-admin-client.js";
import { issueCertificate, issueClusterCertificates } from "../../localcluster/cluster-ca.js";
import type { ClusterCertificates } from "../../localcluster/cluster-ca.js";
import { call, loadHarvestProto, makeClient } from "../../common/grpc.js";
import type { ClientSecurity } from "../../common/grpc.js";
import { Logger } from "../../common/log.js";
import type { DataNode } from "../../datanode/index.js";
import { NameNode } from "../../namenode/index.js";

const quiet = new Logger("test", "error");
const KiB = 1024;
const BLOCK = 128 * KiB;
const DATANODES = ["dn1", "dn2", "dn3", "dn4"];

describe("decommissioning a datanode on a secure cluster", () => {
  let dir: string;
  let certs: ClusterCertificates;
  let alice: ClientSecurity;
  let nn: NameNode;
  let nnPort = 0;
  const dns = new Map<string, DataNode>();
  let dfs: DfsClient;
  let admin: NamenodeAdminClient;
  const data = randomBytes(8 * BLOCK);
  /** The drained datanode and its state once DECOMMISSIONED. */
  let victim = "";
  let drained: DatanodeAdminStatus | undefined;

  const startNameNode = async (): Promise<NameNode> => {
    const n = new NameNode(
      {
        dataDir: join(dir, "nn"),
        port: nnPort,
        tls: certs.daemons["nn"]!,
        heartbeatIntervalMs: 200,
        datanodeExpiryMs: 2_000,
        replicationIntervalMs: 100,
        monitorIntervalMs: 200,
        // A copy the monitor scheduled while a fresh write's replicas were still being reported can fail at a target
        // that has the block already; the datanode does not report that, so it is retried only after this timeout.
        replicationTimeoutMs: 2_000,
      },
      { logger: quiet },
    );
    await n.start();
    nnPort = Number(n.address.split(":").pop());
    return n;
  };

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), "harvest-decom-"));
    certs = await issueClusterCertificates(join(dir, "security"), {
      caName: "Harvest decommission test CA",
      daemons: Object.fromEntries(["nn", ...DATANODES].map((n) => [n, ["127.0.0.1", "localhost"]])),
      admin: "ops",
      dirMode: 0o700,
    });
    alice = {
      ca: certs.admin.ca,
      ...(await issueCertificate(join(dir, "security"), join(dir, "alice"), { name: "alice", role: "user" })),
    };
    nn = await startNameNode();
    for (const id of DATANODES) {
      dns.set(id, await startTestDataNode(dir, id, nn.address, { heartbeatIntervalMs: 200, tls: certs.daemons[id]! }));
    }
    dfs = new DfsClient(nn.address, { security: certs.admin });
    admin = new NamenodeAdminClient(nn.address, certs.admin);
    await waitFor(async () => ((await dfs.datanodes()).length === 4 ? true : undefined), {
      what: "four datanodes",
      retryOnError: true,
    });
    await pipeline(
      Readable.from([data]),
      dfs.createWriteStream("/drain/file.bin", { replication: 3, blockSizeBytes: BLOCK }),
    );
    await waitFor(
      async () => {
        const r = await dfs.fsck("/drain");
        return r.blocks === 8 && r.underReplicated.length === 0 && r.healthy ? true : undefined;
      },
      { what: "full replication", retryOnError: true },
    );
  }, 30_000);

  afterAll(async () => {
    dfs?.close();
    admin?.close();
    for (const dn of dns.values()) await dn.stop();
    await nn?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  /** Each block's replica holders, as the namenode lists them for reads. */
  async function holders(path: string): Promise<string[][]> {
    return (await dfs.blockLocations(path)).blocks.map((b) => b.locations.map((l) => l.datanodeId));
  }

  /** Each block's replica holders once every block has `n` (the datanodes report a write a moment after it). */
  function settled(path: string, n: number): Promise<string[][]> {
    return waitFor(
      async () => {
        const h = await holders(path);
        return h.every((x) => x.length === n) ? h : undefined;
      },
      { what: `${path} with ${n} replicas a block`, retryOnError: true },
    );
  }

  it("drains a datanode holding blocks of a file; wiped and stopped afterwards, it loses nothing", async () => {
    // The datanode holding the most blocks of the file (the smallest id among equals).
    const before = await holders("/drain/file.bin");
    const count = (id: string): number => before.filter((h) => h.includes(id)).length;
    victim = [...DATANODES].sort((a, b) => count(b) - count(a) || (a < b ? -1 : 1))[0]!;
    const victimBlocks = count(victim);
    // 8 blocks x 3 replicas on 4 datanodes: the fullest holds at least 6.
    expect(victimBlocks).toBeGreaterThanOrEqual(6);

    const [started] = await admin.decommission([victim], { deadlineMs: Date.now() + 60_000 });
    expect(started).toMatchObject({ datanodeId: victim, blocks: victimBlocks, liveness: "LIVE" });
    expect(["DECOMMISSION_IN_PROGRESS", "DECOMMISSIONED"]).toContain(started!.state);
    // While it drains (or once drained), clients read from it last.
    for (const h of await holders("/drain/file.bin")) if (h.includes(victim)) expect(h.at(-1)).toBe(victim);

    drained = await waitFor(
      async () => {
        const [s] = await admin.status([victim]);
        return s?.state === "DECOMMISSIONED" ? s : undefined;
      },
      { what: "the datanode to be decommissioned", retryOnError: true },
    );
    expect(drained).toMatchObject({ blocks: victimBlocks, blocksNeedingCopies: 0, deadlinePassed: false, message: "" });
    expect(drained.finishedMs).toBeGreaterThanOrEqual(drained.startedMs);
    expect((await dfs.datanodes()).find((d) => d.datanodeId === victim)?.adminState).toBe("DECOMMISSIONED");
    // Every block has its three replicas without it; its own are reported apart.
    const fsck = await dfs.fsck("/drain");
    expect(fsck).toMatchObject({
      blocks: 8,
      underReplicated: [],
      missing: [],
      healthy: true,
      decommissionedReplicas: victimBlocks,
      decommissioningReplicas: 0,
      decommissionedDatanodes: 1,
    });

    // A new file goes to the three datanodes in service.
    await pipeline(
      Readable.from([randomBytes(2 * BLOCK)]),
      dfs.createWriteStream("/drain/after.bin", { replication: 3, blockSizeBytes: BLOCK }),
    );
    const others = DATANODES.filter((d) => d !== victim);
    for (const h of await settled("/drain/after.bin", 3)) expect([...h].sort()).toEqual(others);

    // The reimage: its disk is wiped (through its own admin RPC), then it goes away.
    const dt = makeClient(loadHarvestProto().DataTransfer, dns.get(victim)!.address, certs.admin);
    try {
      expect((await call(dt, dt.reimage, {})).blocksWiped).toBe(victimBlocks);
    } finally {
      dt.close();
    }
    await waitFor(async () => ((await dfs.fsck("/drain")).decommissionedReplicas === 0 ? true : undefined), {
      what: "the namenode to forget the wiped replicas",
      retryOnError: true,
    });
    await dns.get(victim)!.stop();
    const gone = await waitFor(
      async () => {
        const r = await dfs.fsck("/");
        return r.liveDatanodes === 3 ? r : undefined;
      },
      { what: "the decommissioned datanode to expire", retryOnError: true },
    );
    // Its death is no alarm, and nothing is short or missing.
    expect(gone).toMatchObject({ deadDatanodes: 0, underReplicated: [], missing: [], healthy: true, blocks: 10 });
    for (const h of await settled("/drain/file.bin", 3)) expect([...h].sort()).toEqual(others);
    expect((await readAll(dfs, "/drain/file.bin")).equals(data)).toBe(true);
  });

  it("refuses a user certificate and names an unknown datanode with a coded error, changing nothing", async () => {
    const user = new NamenodeAdminClient(nn.address, alice);
    try {
      expect(await codeOf(user.decommission(["dn1"]))).toBe("PERMISSION_DENIED");
      expect(await codeOf(user.recommission([victim]))).toBe("PERMISSION_DENIED");
      expect(await codeOf(user.status())).toBe("PERMISSION_DENIED");
    } finally {
      user.close();
    }
    const other = DATANODES.find((d) => d !== victim)!;
    expect(await codeOf(admin.decommission(["no-such-datanode"]))).toBe("NAMENODE_DATANODE_NOT_FOUND");
    expect(await codeOf(admin.decommission([other, "no-such-datanode"]))).toBe("NAMENODE_DATANODE_NOT_FOUND");
    expect(await codeOf(admin.recommission(["no-such-datanode"]))).toBe("NAMENODE_DATANODE_NOT_FOUND");
    const states = Object.fromEntries((await admin.status()).map((s) => [s.datanodeId, s.state]));
    expect(states).toEqual(Object.fromEntries(DATANODES.map((d) => [d, d === victim ? "DECOMMISSIONED" : "NORMAL"])));
  });

  it("keeps the admin state across namenode restarts, and a recommission too", async () => {
    await nn.stop();
    nn = await startNameNode();
    const restarted = new NamenodeAdminClient(nn.address, certs.admin);
    try {
      const [s] = await restarted.status([victim]);
      expect(s).toMatchObject({
        state: "DECOMMISSIONED",
        startedMs: drained!.startedMs,
        finishedMs: drained!.finishedMs,
        deadlineMs: drained!.deadlineMs,
      });
      const [back] = await restarted.recommission([victim]);
      expect(back?.state).toBe("NORMAL");
    } finally {
      restarted.close();
    }
    await nn.stop();
    nn = await startNameNode();
    const again = new NamenodeAdminClient(nn.address, certs.admin);
    try {
      expect((await again.status([victim]))[0]).toMatchObject({ state: "NORMAL", startedMs: 0, finishedMs: 0 });
    } finally {
      again.close();
    }
  });
});

describe("decommissioning on a plaintext namenode", () => {
  it("lets only the claimed superuser call the admin service, as HDFS's dfsadmin", async () => {
    const dir = mkdtempSync(join(tmpdir(), "harvest-decom-plain-"));
    const nn = new NameNode({ dataDir: join(dir, "nn"), superuser: "hdfs-admin" }, { logger: quiet });
    await nn.start();
    const bob = new NamenodeAdminClient(nn.address, undefined, { user: "bob" });
    const boss = new NamenodeAdminClient(nn.address, undefined, { user: "hdfs-admin" });
    try {
      expect(await codeOf(bob.status())).toBe("PERMISSION_DENIED");
      expect(await codeOf(bob.decommission(["dn1"]))).toBe("PERMISSION_DENIED");
      expect(await boss.status()).toEqual([]);
      expect(await codeOf(boss.decommission(["dn1"]))).toBe("NAMENODE_DATANODE_NOT_FOUND");
    } finally {
      bob.close();
      boss.close();
      await nn.stop();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
