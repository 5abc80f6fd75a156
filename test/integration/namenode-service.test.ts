/**
 * A real namenode on loopback, with datanodes played by the test over the real DatanodeChannel stream (register,
 * block reports, heartbeats): this tests the protocol, not a stub of the namenode.
 */
import type * as grpc from "@grpc/grpc-js";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { waitFor } from "../wait-for.js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { codeOf } from "../error-code.js";
import { fromGrpcError, isHarvestError } from "../../common/errors.js";
import type { HarvestError } from "../../common/errors.js";
import { call, loadHarvestProto, makeClient } from "../../common/grpc.js";
import { Logger } from "../../common/log.js";
import { NameNode } from "../../namenode/namenode.js";
import type { NameNodeOptions } from "../../namenode/options.js";
import type { Block, BlockOutput } from "../../proto/generated/harvest/v1/Block.js";
import type { ClientNamenodeClient } from "../../proto/generated/harvest/v1/ClientNamenode.js";
import type { DatanodeCommandsOutput } from "../../proto/generated/harvest/v1/DatanodeCommands.js";
import type { DatanodeHeartbeat } from "../../proto/generated/harvest/v1/DatanodeHeartbeat.js";
import type { DatanodeToNamenode } from "../../proto/generated/harvest/v1/DatanodeToNamenode.js";
import type { NamenodeToDatanodeOutput } from "../../proto/generated/harvest/v1/NamenodeToDatanode.js";
import type { NamespaceCall } from "../../proto/generated/harvest/v1/NamespaceCall.js";
import type { NamespaceResultOutput } from "../../proto/generated/harvest/v1/NamespaceResult.js";

const GiB = 1024 ** 3;
const quiet = new Logger("test", "error");

/** A datanode played by the test: it speaks the DatanodeChannel protocol and remembers the blocks it "holds". */
class FakeDatanode {
  readonly commands: DatanodeCommandsOutput[] = [];
  readonly held = new Map<number, BlockOutput>();
  busy = false;
  private client: grpc.Client | undefined;
  private stream: grpc.ClientDuplexStream<DatanodeToNamenode, NamenodeToDatanodeOutput> | undefined;
  private seq = 0;
  private timer: NodeJS.Timeout | undefined;
  private readonly waiters = new Map<number, (c: DatanodeCommandsOutput) => void>();

  constructor(
    readonly id: string,
    readonly rack: string,
    readonly storageId = `storage-${id}`,
  ) {}

  /** Opens a stream to the namenode, registers and sends a full block report of what it holds. */
  async connect(namenodeAddress: string): Promise<void> {
    this.close();
    const proto = loadHarvestProto();
    const client = makeClient(proto.DatanodeProtocol, namenodeAddress);
    const stream = client.datanodeChannel();
    this.client = client;
    this.stream = stream;
    const registered = new Promise<void>((resolve, reject) => {
      stream.on("data", (msg: NamenodeToDatanodeOutput) => {
        if (msg.registered) resolve();
        if (msg.commands) {
          this.commands.push(msg.commands);
          this.waiters.get(msg.commands.seq)?.(msg.commands);
          this.waiters.delete(msg.commands.seq);
        }
      });
      stream.on("error", (err) => reject(fromGrpcError(err)));
    });
    stream.write({
      register: {
        datanodeId: this.id,
        address: `127.0.0.1:${9000 + Number(this.id.replace(/\D/g, ""))}`,
        rack: this.rack,
        capacityBytes: 10 * GiB,
        usedBytes: 0,
        storageId: this.storageId,
      },
    });
    await registered;
    stream.write({ blockReport: { blocks: [...this.held.values()] } });
    await this.heartbeat();
  }

  /** Sends a heartbeat and resolves with its answer (messages of one stream are handled in order: a barrier). */
  heartbeat(extra: Partial<DatanodeHeartbeat> = {}): Promise<DatanodeCommandsOutput> {
    const seq = ++this.seq;
    const answered = new Promise<DatanodeCommandsOutput>((resolve) => this.waiters.set(seq, resolve));
    this.stream?.write({
      heartbeat: {
        seq,
        capacityBytes: 10 * GiB,
        usedBytes: 0,
        remainingBytes: 10 * GiB,
        primaryBusy: this.busy,
        activeTransfers: 0,
        ...extra,
      },
    });
    return answered;
  }

  /** Reports finalized replicas (an incremental report) and waits until the namenode has handled it. */
  async received(blocks: BlockOutput[]): Promise<void> {
    for (const b of blocks) this.held.set(b.blockId, b);
    this.stream?.write({ received: { received: blocks, deleted: [] } });
    await this.heartbeat();
  }

  /** Tells the namenode the disk was wiped, and waits until it has handled that. */
  async reimageReport(): Promise<void> {
    this.held.clear();
    this.stream?.write({ reimage: { atMs: Date.now() } });
    await this.heartbeat();
  }

  /** Heartbeats in the background, as a real datanode does. */
  startHeartbeats(intervalMs: number): void {
    this.timer = setInterval(() => void this.heartbeat(), intervalMs);
  }

  /** Goes silent: no more heartbeats, but the stream stays open (a hung server). */
  stopHeartbeats(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
  }

  close(): void {
    this.stopHeartbeats();
    this.stream?.end();
    this.client?.close();
    this.stream = undefined;
    this.client = undefined;
  }
}

interface Harness {
  dir: string;
  nn: NameNode;
  client: ClientNamenodeClient;
}

async function startNameNode(dir: string, extra: Partial<NameNodeOptions> = {}): Promise<Harness> {
  const nn = new NameNode(
    {
      dataDir: dir,
      datanodeExpiryMs: 1_000,
      heartbeatIntervalMs: 200,
      monitorIntervalMs: 100,
      replicationIntervalMs: 100,
      // These tests drive blocks and safe mode as several claimed users over raw calls; permissions have their own
      // suite (dfs-permissions.test.ts).
      permissions: false,
      ...extra,
    },
    { logger: quiet },
  );
  await nn.start();
  const client = makeClient(loadHarvestProto().ClientNamenode, nn.address);
  return { dir, nn, client };
}

function createReq(path: string, extra: Record<string, unknown> = {}): Record<string, unknown> {
  return { path, owner: "alice", replication: 0, blockSize: 4096, overwrite: false, clientName: "w1", ...extra };
}

/** How the waits below poll the in-process namenode. */
const POLL = { timeoutMs: 5_000, intervalMs: 50 };

describe("a namenode serving fake datanodes", () => {
  let h: Harness;
  const dns = [
    new FakeDatanode("dn1", "/r1"),
    new FakeDatanode("dn2", "/r1"),
    new FakeDatanode("dn3", "/r2"),
    new FakeDatanode("dn4", "/r2"),
  ];
  let pipeline: string[] = [];
  let fileBlock: BlockOutput;

  beforeAll(async () => {
    h = await startNameNode(await mkdtemp(join(tmpdir(), "harvest-nn-")));
    for (const dn of dns) {
      await dn.connect(h.nn.address);
      dn.startHeartbeats(200);
    }
  });

  afterAll(async () => {
    for (const dn of dns) dn.close();
    h?.client.close();
    await h?.nn.stop();
    if (h) await rm(h.dir, { recursive: true, force: true });
  });

  const byId = (id: string): FakeDatanode => dns.find((d) => d.id === id) as FakeDatanode;

  it("leaves safe mode at once with an empty namespace and lists its datanodes", async () => {
    expect((await call(h.client, h.client.getSafeMode, {})).on).toBe(false);
    const { datanodes } = await call(h.client, h.client.getDatanodes, {});
    expect(datanodes.map((d) => [d.datanodeId, d.rack, d.state])).toEqual([
      ["dn1", "/r1", "LIVE"],
      ["dn2", "/r1", "LIVE"],
      ["dn3", "/r2", "LIVE"],
      ["dn4", "/r2", "LIVE"],
    ]);
  });

  it("allocates a three-node pipeline across both racks, starting on the writer's datanode", async () => {
    await call(h.client, h.client.mkdirs, { path: "/data", owner: "alice" });
    await call(h.client, h.client.create, createReq("/data/f", { writerDatanodeId: "dn1" }));
    const lb = await call(h.client, h.client.addBlock, { path: "/data/f", clientName: "w1", excludedDatanodes: [] });
    pipeline = lb.locations.map((l) => l.datanodeId);
    expect(pipeline).toHaveLength(3);
    expect(pipeline[0]).toBe("dn1");
    expect(new Set(pipeline).size).toBe(3);
    expect(new Set(lb.locations.map((l) => l.rack))).toEqual(new Set(["/r1", "/r2"]));
    expect(lb.locations[0]?.address).toBe("127.0.0.1:9001");
    expect(lb.offset).toBe(0);
    fileBlock = lb.block as BlockOutput;
  });

  it("completes the file and returns its block at the reported replicas, busy datanodes last", async () => {
    const written = { ...fileBlock, numBytes: 3000 };
    for (const id of pipeline) await byId(id).received([written]);
    const done = await call(h.client, h.client.complete, { path: "/data/f", clientName: "w1", last: written });
    expect(done).toMatchObject({ length: 3000, complete: true, blocks: 1 });
    const busy = byId(pipeline[0] as string);
    busy.busy = true;
    await busy.heartbeat();
    const located = await call(h.client, h.client.getBlockLocations, { path: "/data/f", offset: 0, length: 0 });
    expect(located.fileLength).toBe(3000);
    expect(located.complete).toBe(true);
    const locations = located.blocks[0]?.locations.map((l) => l.datanodeId) ?? [];
    expect(new Set(locations)).toEqual(new Set(pipeline));
    expect(locations[2]).toBe(busy.id);
    busy.busy = false;
    await busy.heartbeat();
    // Every request for the block names its replicas in the same order (HDFS's default): repeated reads find the
    // block's pages in one server's page cache.
    const orders = new Set<string>();
    for (let i = 0; i < 8; i++) {
      const again = await call(h.client, h.client.getBlockLocations, { path: "/data/f", offset: 0, length: 0 });
      orders.add((again.blocks[0]?.locations ?? []).map((l) => l.datanodeId).join(","));
    }
    expect(orders.size).toBe(1);
    const fsck = await call(h.client, h.client.fsck, { path: "/" });
    expect(fsck).toMatchObject({ files: 1, directories: 2, blocks: 1, totalBytes: 3000, healthy: true });
    expect(fsck.underReplicated).toEqual([]);
  });

  it("answers Create, AddBlock and Complete on one NamespaceCalls stream by id, each error in its own result", async () => {
    const stream = h.client.namespaceCalls();
    const waiting = new Map<number, (r: NamespaceResultOutput) => void>();
    stream.on("data", (r: NamespaceResultOutput) => waiting.get(r.id)?.(r));
    const failed = new Promise<never>((_, reject) => stream.on("error", reject));
    const ask = (msg: NamespaceCall): Promise<NamespaceResultOutput> =>
      Promise.race([
        new Promise<NamespaceResultOutput>((resolve) => {
          waiting.set(Number(msg.id), resolve);
          stream.write(msg);
        }),
        failed,
      ]);
    await call(h.client, h.client.mkdirs, { path: "/stream", owner: "alice" });
    // Several in flight at once, answered by id; the failures are coded and the stream goes on.
    const [a, exists, empty, b] = await Promise.all([
      ask({ id: 11, create: createReq("/stream/a") }),
      ask({ id: 12, create: createReq("/data/f") }),
      ask({ id: 13 }),
      ask({ id: 14, create: createReq("/stream/b") }),
    ]);
    expect(a.create).toMatchObject({ path: "/stream/a", complete: false });
    expect(exists.error?.code).toBe("NAMENODE_FILE_EXISTS");
    expect(exists.error?.message).toContain("/data/f");
    expect(empty.error?.code).toBe("INVALID_ARGUMENT");
    expect(b.create?.path).toBe("/stream/b");
    // A whole small file on the stream: its block on three datanodes, reported, then the file closed.
    const added = await ask({ id: 15, addBlock: { path: "/stream/a", clientName: "w1", excludedDatanodes: [] } });
    expect(added.addBlock?.locations).toHaveLength(3);
    const written = { ...(added.addBlock?.block as BlockOutput), numBytes: 100 };
    for (const l of added.addBlock?.locations ?? []) await byId(l.datanodeId).received([written]);
    const done = await ask({ id: 16, complete: { path: "/stream/a", clientName: "w1", last: written } });
    expect(done.complete).toMatchObject({ path: "/stream/a", length: 100, complete: true });
    // The lease is the writer's: another client may not add to the file.
    const stranger = await ask({ id: 17, addBlock: { path: "/stream/b", clientName: "w2", excludedDatanodes: [] } });
    expect(stranger.error?.code).toMatch(/^NAMENODE_/);
    expect((await ask({ id: 18, complete: { path: "/stream/b", clientName: "w1" } })).complete?.complete).toBe(true);
    stream.end();
    // What the stream did is what a unary Stat sees.
    expect(await call(h.client, h.client.stat, { path: "/stream/a" })).toMatchObject({ length: 100, complete: true });
    await call(h.client, h.client.delete, { path: "/stream", recursive: true });
  });

  it("declares a silent datanode dead and has a surviving replica copied on a later heartbeat", async () => {
    const victim = byId(pipeline[1] as string);
    const spare = dns.find((d) => !pipeline.includes(d.id)) as FakeDatanode;
    victim.stopHeartbeats();
    await waitFor(
      async () => {
        const { datanodes } = await call(h.client, h.client.getDatanodes, {});
        return datanodes.find((d) => d.datanodeId === victim.id && d.state === "DEAD");
      },
      { what: "the datanode to be declared dead", ...POLL },
    );
    const survivors = pipeline.filter((id) => id !== victim.id).map(byId);
    const command = await waitFor(
      () =>
        survivors
          .flatMap((d) => d.commands.flatMap((c) => c.replicate))
          .find((r) => r.block?.blockId === fileBlock.blockId),
      { what: "a replicate command", ...POLL },
    );
    expect(command.targets.map((t) => t.datanodeId)).toEqual([spare.id]);
    expect(command.block?.numBytes).toBe(3000);
    const under = await call(h.client, h.client.fsck, { path: "/data" });
    expect(under.deadDatanodes).toBe(1);
    expect(under.underReplicated.map((b) => [b.path, b.liveReplicas, b.expectedReplicas])).toEqual([["/data/f", 2, 3]]);
    // The copy lands: the block is fully replicated again.
    await spare.received([{ ...fileBlock, numBytes: 3000 }]);
    const healed = await call(h.client, h.client.fsck, { path: "/data" });
    expect(healed.underReplicated).toEqual([]);
    expect(healed.healthy).toBe(true);
  });

  it("answers malformed requests with coded errors and keeps serving", async () => {
    expect(await codeOf(call(h.client, h.client.mkdirs, { path: "a/b", owner: "x" }))).toBe("DFS_BAD_PATH");
    expect(await codeOf(call(h.client, h.client.stat, { path: "/a/../b" }))).toBe("DFS_BAD_PATH");
    expect(await codeOf(call(h.client, h.client.list, { path: "/a//b" }))).toBe("DFS_BAD_PATH");
    expect(await codeOf(call(h.client, h.client.create, createReq("/data/x\0y")))).toBe("DFS_BAD_PATH");
    await call(h.client, h.client.create, createReq("/data/open"));
    expect(
      await codeOf(call(h.client, h.client.addBlock, { path: "/data/open", clientName: "", excludedDatanodes: [] })),
    ).toBe("NAMENODE_LEASE_MISMATCH");
    expect(
      await codeOf(call(h.client, h.client.addBlock, { path: "/data/nope", clientName: "w1", excludedDatanodes: [] })),
    ).toBe("NAMENODE_FILE_NOT_FOUND");
    expect(await codeOf(call(h.client, h.client.delete, { path: "/data", recursive: false }))).toBe(
      "NAMENODE_DIRECTORY_NOT_EMPTY",
    );
    // Every datanode excluded: no pipeline is possible.
    expect(
      await codeOf(
        call(h.client, h.client.addBlock, {
          path: "/data/open",
          clientName: "w1",
          excludedDatanodes: dns.map((d) => d.id),
        }),
      ),
    ).toBe("NAMENODE_NOT_ENOUGH_DATANODES");

    const proto = loadHarvestProto();
    const raw = makeClient(proto.DatanodeProtocol, h.nn.address);
    const stream = raw.datanodeChannel();
    const err = await new Promise<HarvestError>((resolve) => {
      stream.on("error", (e) => resolve(fromGrpcError(e)));
      stream.on("data", () => undefined);
      stream.write({ heartbeat: { seq: 1 } });
    });
    expect(err.code).toBe("NODE_NOT_REGISTERED");
    const stream2 = raw.datanodeChannel();
    const err2 = await new Promise<HarvestError>((resolve) => {
      stream2.on("error", (e) => resolve(fromGrpcError(e)));
      stream2.on("data", () => undefined);
      stream2.write({ register: { datanodeId: "../evil", address: "127.0.0.1:1" } });
    });
    expect(err2.code).toBe("INVALID_ARGUMENT");
    raw.close();

    expect((await call(h.client, h.client.stat, { path: "/data/f" })).length).toBe(3000);
    const { datanodes } = await call(h.client, h.client.getDatanodes, {});
    expect(datanodes.map((d) => d.datanodeId)).toEqual(["dn1", "dn2", "dn3", "dn4"]);
  });
  it("counts a reimage once and forgets the wiped datanode's replicas", async () => {
    const holder = dns.find((d) => d.held.has(fileBlock.blockId) && d.id !== "dn1") as FakeDatanode;
    holder.close();
    // The datanode comes back with a wiped disk: a new storage id, then its ReimageReport and an empty report.
    const wiped = new FakeDatanode(holder.id, holder.rack, "storage-after-reimage");
    dns[dns.indexOf(holder)] = wiped;
    await wiped.connect(h.nn.address);
    await wiped.reimageReport();
    wiped.startHeartbeats(200);
    const { datanodes } = await call(h.client, h.client.getDatanodes, {});
    expect(datanodes.find((d) => d.datanodeId === holder.id)).toMatchObject({ state: "LIVE", reimages: 1, blocks: 0 });
    // A second wipe, announced first by a ReimageReport on a plain session and then by the new storage id, is one
    // more wipe, not two.
    wiped.close();
    const resumed = new FakeDatanode(holder.id, holder.rack, "storage-after-reimage");
    await resumed.connect(h.nn.address);
    await resumed.reimageReport();
    const reported = await call(h.client, h.client.getDatanodes, {});
    expect(reported.datanodes.find((d) => d.datanodeId === holder.id)?.reimages).toBe(2);
    resumed.close();
    const again = new FakeDatanode(holder.id, holder.rack, "storage-after-second-reimage");
    dns[dns.indexOf(wiped)] = again;
    await again.connect(h.nn.address);
    again.startHeartbeats(200);
    const after = await call(h.client, h.client.getDatanodes, {});
    expect(after.datanodes.find((d) => d.datanodeId === holder.id)?.reimages).toBe(2);
    const fsck = await call(h.client, h.client.fsck, { path: "/data/f" });
    expect(fsck.underReplicated.map((b) => [b.liveReplicas, b.datanodes.includes(holder.id)])).toEqual([[2, false]]);
  });
});

describe("a restarted namenode", () => {
  let dir: string;
  let h: Harness | undefined;
  const dn1 = new FakeDatanode("dn1", "/r1");
  const dn2 = new FakeDatanode("dn2", "/r2");

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), "harvest-nn-restart-"));
  });

  afterAll(async () => {
    dn1.close();
    dn2.close();
    h?.client.close();
    await h?.nn.stop();
    await rm(dir, { recursive: true, force: true });
  });

  /** Writes a one-block file with replication 1 on `dn` and reports the replica. */
  async function writeFile(c: ClientNamenodeClient, path: string, dn: FakeDatanode, bytes: number): Promise<void> {
    await call(c, c.create, createReq(path, { replication: 1, writerDatanodeId: dn.id, clientName: "w" }));
    const lb = await call(c, c.addBlock, { path, clientName: "w", excludedDatanodes: [] });
    expect(lb.locations.map((l) => l.datanodeId)).toEqual([dn.id]);
    const block: Block = { ...(lb.block as BlockOutput), numBytes: bytes };
    await dn.received([block as BlockOutput]);
    await call(c, c.complete, { path, clientName: "w", last: block });
  }

  it("keeps its namespace and refuses mutations in safe mode until enough blocks are reported", async () => {
    h = await startNameNode(dir);
    await dn1.connect(h.nn.address);
    await dn2.connect(h.nn.address);
    await call(h.client, h.client.mkdirs, { path: "/jobs/out", owner: "bob" });
    await writeFile(h.client, "/jobs/out/a", dn1, 100);
    await writeFile(h.client, "/jobs/out/b", dn2, 200);
    await call(h.client, h.client.rename, { src: "/jobs/out/b", dst: "/jobs/b" });
    dn1.close();
    dn2.close();
    h.client.close();
    await h.nn.stop();

    h = await startNameNode(dir);
    const c = h.client;
    expect((await call(c, c.list, { path: "/jobs" })).entries.map((e) => [e.path, e.length])).toEqual([
      ["/jobs/b", 200],
      ["/jobs/out", 0],
    ]);
    expect((await call(c, c.stat, { path: "/jobs/out/a" })).owner).toBe("alice");
    const status = await call(c, c.getSafeMode, {});
    expect(status).toMatchObject({ on: true, blocksTotal: 2, blocksReported: 0 });
    expect(await codeOf(call(c, c.mkdirs, { path: "/new", owner: "bob" }))).toBe("NAMENODE_SAFE_MODE");
    // Reads are answered in safe mode; the block has no location until its datanode reports.
    const before = await call(c, c.getBlockLocations, { path: "/jobs/b", offset: 0, length: 0 });
    expect(before.blocks.map((b) => b.locations.length)).toEqual([0]);

    await dn2.connect(h.nn.address);
    const half = await codeOf(call(c, c.mkdirs, { path: "/new", owner: "bob" }));
    expect(half).toBe("NAMENODE_SAFE_MODE");
    expect((await call(c, c.fsck, { path: "/" })).safeMode).toBe(true);

    await dn1.connect(h.nn.address);
    expect((await call(c, c.getSafeMode, {})).on).toBe(false);
    expect((await call(c, c.mkdirs, { path: "/new", owner: "bob" })).isDir).toBe(true);
    const after = await call(c, c.getBlockLocations, { path: "/jobs/b", offset: 0, length: 0 });
    expect(after.blocks[0]?.locations.map((l) => l.datanodeId)).toEqual(["dn2"]);
  });

  it("tells the safe-mode message how many blocks are reported of how many", async () => {
    // Checked on a fresh restart with no datanode back yet.
    dn1.close();
    dn2.close();
    h?.client.close();
    await h?.nn.stop();
    h = await startNameNode(dir);
    await dn1.connect(h.nn.address);
    const err = await call(h.client, h.client.delete, { path: "/new", recursive: false }).catch((e: unknown) => e);
    expect(isHarvestError(err, "NAMENODE_SAFE_MODE")).toBe(true);
    expect((err as HarvestError).message).toContain("1 of 2 blocks reported");
  });
});
