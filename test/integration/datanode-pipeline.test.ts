/**
 * Real datanodes in-process on loopback with real files: the write pipeline and its acknowledgements, reads, the
 * primary tenant's veto, reimage, malformed streams, and the commands and reports on the namenode channel (against a
 * small recording namenode served by the test).
 */
import type * as grpc from "@grpc/grpc-js";
import { createHash, randomBytes } from "node:crypto";
import { mkdtempSync, readdirSync, rmSync, statSync, writeFileSync } from "node:fs";
import type { AddressInfo, Server } from "node:net";
import { connect as connectNet, createServer as createNetServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { waitFor } from "../wait-for.js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { flipByte } from "../flip-byte.js";
import { startTestDataNode } from "./harness.js";
import { askLocalRead } from "../../client/short-circuit.js";
import { dataFrameHead } from "../../common/block-transfer.js";
import { fromGrpcError, isHarvestError } from "../../common/errors.js";
import {
  bindServer,
  call,
  createServer,
  loadHarvestProto,
  makeClient,
  shutdownServer,
  unary,
} from "../../common/grpc.js";
import { Logger } from "../../common/log.js";
import { StepPrimaryMonitor } from "../../common/step-monitor.js";
import type { PrimaryMonitor } from "../../common/primary-monitor.js";
import { chunkChecksums, DataNode } from "../../datanode/index.js";
import type { DataNodeOptionsInput } from "../../datanode/index.js";
import { resolveDataNodeOptions } from "../../datanode/options.js";
import type { DataTransferClient } from "../../proto/generated/harvest/v1/DataTransfer.js";
import type { DatanodeInfo } from "../../proto/generated/harvest/v1/DatanodeInfo.js";
import type { DatanodeToNamenodeOutput } from "../../proto/generated/harvest/v1/DatanodeToNamenode.js";
import type { NamenodeToDatanode } from "../../proto/generated/harvest/v1/NamenodeToDatanode.js";
import type { ReportBadBlocksRequestOutput } from "../../proto/generated/harvest/v1/ReportBadBlocksRequest.js";
import type { WriteAckOutput } from "../../proto/generated/harvest/v1/WriteAck.js";
import type { WritePacket } from "../../proto/generated/harvest/v1/WritePacket.js";

const PACKET = 64 * 1024;
/** A 64 KiB packet's DATA frame bytes before its data (length, kind, seq, offset, flags, count, CRCs). */
const DATA_FRAME_HEAD = dataFrameHead(
  { seq: 0, offsetInBlock: 0, last: false, checksums: chunkChecksums(Buffer.alloc(PACKET)) },
  PACKET,
).length;
const quiet = new Logger("dn-test", "error");

function sha(b: Buffer): string {
  return createHash("sha256").update(b).digest("hex");
}

/** A namenode stand-in that records what datanodes send it and lets a test send commands. */
class RecordingNamenode {
  readonly server = createServer();
  readonly messages = new Map<string, DatanodeToNamenodeOutput[]>();
  readonly badBlocks: ReportBadBlocksRequestOutput[] = [];
  private readonly streams = new Map<string, grpc.ServerDuplexStream<DatanodeToNamenodeOutput, NamenodeToDatanode>>();
  address = "";

  async start(port = 0): Promise<void> {
    const proto = loadHarvestProto();
    this.server.addService(proto.DatanodeProtocol.service, {
      DatanodeChannel: (stream: grpc.ServerDuplexStream<DatanodeToNamenodeOutput, NamenodeToDatanode>) => {
        let id = "";
        stream.on("data", (msg: DatanodeToNamenodeOutput) => {
          if (msg.register) {
            id = msg.register.datanodeId;
            this.streams.set(id, stream);
            stream.write({ registered: { datanodeId: id, heartbeatIntervalMs: 200 } });
          }
          if (id) this.messages.set(id, [...(this.messages.get(id) ?? []), msg]);
        });
        stream.on("end", () => stream.end());
        stream.on("error", () => undefined);
      },
    });
    this.server.addService(proto.ClientNamenode.service, {
      ReportBadBlocks: unary((req: ReportBadBlocksRequestOutput) => {
        this.badBlocks.push(req);
        return {};
      }),
    });
    this.address = `127.0.0.1:${await bindServer(this.server, "127.0.0.1", port)}`;
  }

  of(id: string): DatanodeToNamenodeOutput[] {
    return this.messages.get(id) ?? [];
  }

  command(id: string, msg: NamenodeToDatanode): void {
    const s = this.streams.get(id);
    if (!s) throw new Error(`${id} has no stream`);
    s.write(msg);
  }

  async stop(): Promise<void> {
    await shutdownServer(this.server, 500);
  }
}

/** The client end of one WriteBlock call, driven by hand. */
class RawWrite {
  readonly acks: WriteAckOutput[] = [];
  ended = false;
  error: Error | undefined;
  private readonly stream: grpc.ClientDuplexStream<WritePacket, WriteAckOutput>;

  constructor(client: DataTransferClient) {
    this.stream = client.writeBlock();
    this.stream.on("data", (a: WriteAckOutput) => this.acks.push(a));
    this.stream.on("end", () => (this.ended = true));
    this.stream.on("error", (err: Error) => {
      this.error = err;
      this.ended = true;
    });
  }

  send(msg: WritePacket): void {
    this.stream.write(msg);
  }

  /** Sends the packets of `data[from, to)` (64 KiB each); the packet ending at `data.length` is the last. */
  sendData(data: Buffer, from: number, to: number): void {
    for (let at = from; at < to; at += PACKET) {
      const piece = data.subarray(at, Math.min(to, at + PACKET));
      const last = at + piece.length === data.length;
      this.send({ data: { seq: at / PACKET, offsetInBlock: at, data: piece, checksums: chunkChecksums(piece), last } });
    }
  }

  end(): void {
    this.stream.end();
  }

  async settled(): Promise<void> {
    await waitFor(() => this.ended, { what: "the write stream to end", ...POLL });
  }

  failure(): WriteAckOutput | undefined {
    return this.acks.find((a) => !a.ok);
  }
}

/** How the waits below poll: a loopback pipeline answers within milliseconds. */
const POLL = { timeoutMs: 5_000, intervalMs: 20 };

describe("datanode pipeline", () => {
  let dir: string;
  let nn: RecordingNamenode;
  const nodes: DataNode[] = [];
  const clients: DataTransferClient[] = [];
  const proxies: Server[] = [];
  let dn1: DataNode;
  let dn2: DataNode;
  let dn3: DataNode;
  let nextBlockId = 1000;

  async function startDataNode(
    id: string,
    extra: Partial<DataNodeOptionsInput> = {},
    monitor?: PrimaryMonitor,
  ): Promise<DataNode> {
    const dn = await startTestDataNode(dir, id, nn.address, extra, monitor);
    nodes.push(dn);
    return dn;
  }

  function client(dn: DataNode): DataTransferClient {
    const c = makeClient(loadHarvestProto().DataTransfer, dn.address);
    clients.push(c);
    return c;
  }

  function info(dn: DataNode): DatanodeInfo {
    return { datanodeId: dn.options.datanodeId, address: dn.address, rack: dn.options.rack };
  }

  async function readBlock(dn: DataNode, block: { blockId: number; genStamp: number }): Promise<Buffer> {
    const stream = client(dn).readBlock({ block, offset: 0, length: 0, clientName: "test" });
    const parts: Buffer[] = [];
    await new Promise<void>((resolve, reject) => {
      stream.on("data", (c: { data: Buffer; checksums: number[] }) => {
        if (chunkChecksums(c.data).join() !== c.checksums.join()) reject(new Error("bad checksums from ReadBlock"));
        parts.push(c.data);
      });
      stream.on("end", () => resolve());
      stream.on("error", (err) => reject(fromGrpcError(err)));
    });
    return Buffer.concat(parts);
  }

  async function readCode(dn: DataNode, block: { blockId: number; genStamp: number }): Promise<string> {
    try {
      await readBlock(dn, block);
      return "OK";
    } catch (err) {
      return isHarvestError(err) ? err.code : `non-harvest error: ${String(err)}`;
    }
  }

  /** Writes `data` as one block through `first` with `downstream`, returning the acks. */
  async function write(
    first: DataNode,
    downstream: DataNode[],
    data: Buffer,
  ): Promise<{ block: { blockId: number; genStamp: number }; w: RawWrite }> {
    const block = { blockId: nextBlockId++, genStamp: 1 };
    const w = new RawWrite(client(first));
    w.send({ header: { block, downstream: downstream.map(info), clientName: "test" } });
    w.sendData(data, 0, data.length);
    w.end();
    await w.settled();
    return { block, w };
  }

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), "harvest-dn-it-"));
    nn = new RecordingNamenode();
    await nn.start();
    dn1 = await startDataNode("dn1");
    dn2 = await startDataNode("dn2");
    dn3 = await startDataNode("dn3");
  });

  afterAll(async () => {
    for (const c of clients) c.close();
    for (const p of proxies) p.close();
    await Promise.all(nodes.map((n) => n.stop()));
    await nn?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  it("writes a 5 MiB block through three datanodes and every replica reads back identical", async () => {
    const data = randomBytes(5 * 1024 * 1024 + 333);
    const { block, w } = await write(dn1, [dn2, dn3], data);
    const packets = Math.ceil(data.length / PACKET);
    expect(w.error).toBeUndefined();
    expect(w.failure()).toBeUndefined();
    expect(w.acks.map((a) => a.ok)).toEqual(Array(packets).fill(true));
    expect(w.acks.map((a) => a.seq)).toEqual([...Array(packets).keys()]);
    for (const dn of [dn1, dn2, dn3]) {
      expect(dn.store.get(block.blockId)).toEqual({ ...block, numBytes: data.length });
      expect(sha(await readBlock(dn, block))).toBe(sha(data));
    }
    // Each node tells the namenode about its new replica.
    for (const id of ["dn1", "dn2", "dn3"])
      await waitFor(() => nn.of(id).some((m) => m.received?.received.some((b) => b.blockId === block.blockId)), {
        what: `${id}'s BlocksReceived`,
        ...POLL,
      });
  });

  it("names the datanode that died mid-write and finalizes no replica of that attempt anywhere", async () => {
    const a = await startDataNode("kill-a");
    const b = await startDataNode("kill-b");
    const c = await startDataNode("kill-c");
    const data = randomBytes(2 * 1024 * 1024);
    const block = { blockId: nextBlockId++, genStamp: 1 };
    const w = new RawWrite(client(a));
    w.send({ header: { block, downstream: [info(b), info(c)], clientName: "test" } });
    w.sendData(data, 0, data.length / 2);
    await waitFor(() => w.acks.length === data.length / 2 / PACKET, { what: "acks of the first half", ...POLL });
    expect(w.acks.every((ack) => ack.ok)).toBe(true);
    await c.stop();
    w.sendData(data, data.length / 2, data.length);
    w.end();
    await w.settled();
    expect(w.failure()).toMatchObject({ ok: false, failedDatanodeId: "kill-c" });
    expect(w.acks.filter((ack) => !ack.ok)).toHaveLength(1);
    for (const dn of [a, b, c]) expect(dn.store.get(block.blockId)).toBeUndefined();
    await waitFor(() => [a, b].every((dn) => readdirSync(join(dn.options.dataDir, "rbw")).length === 0), {
      what: "the rbw replicas to go",
      ...POLL,
    });

    // A pipeline whose last node cannot be reached at all names that node too.
    const again = await write(a, [b, c], randomBytes(1000));
    expect(again.w.failure()).toMatchObject({ ok: false, failedDatanodeId: "kill-c" });
    expect(a.store.get(again.block.blockId)).toBeUndefined();
    expect(b.store.get(again.block.blockId)).toBeUndefined();
  });

  it("refuses reads and writes while a replayed primary tenant is at 100 %", async () => {
    const trace = join(dir, "busy.csv");
    writeFileSync(trace, "time_s,cpu_pct\n0,100\n60,100\n");
    const busy = new DataNode(
      {
        datanodeId: "busy",
        namenodeAddress: nn.address,
        dataDir: join(dir, "busy"),
        primary: `trace:${trace}`,
        shortCircuitReads: true,
      },
      { logger: quiet },
    );
    nodes.push(busy);
    await busy.start();
    expect(busy.isPrimaryBusy()).toBe(true);
    expect(await readCode(busy, { blockId: 1, genStamp: 1 })).toBe("DATANODE_PRIMARY_BUSY");
    // A client on this server asking to read the files itself is refused as well.
    const local = askLocalRead(busy.transferAddress, undefined, {
      block: { blockId: 1, genStamp: 1, numBytes: 0 },
      offset: 0,
      length: 0,
      clientName: "test",
      blockToken: "",
    });
    expect(
      await local.then(
        () => "granted",
        (err: unknown) => (isHarvestError(err) ? err.code : String(err)),
      ),
    ).toBe("DATANODE_PRIMARY_BUSY");
    const direct = await write(busy, [], randomBytes(5000));
    expect(direct.w.failure()).toMatchObject({ errorCode: "DATANODE_PRIMARY_BUSY", failedDatanodeId: "busy" });
    // Behind a healthy node, the busy one is named as the node that failed.
    const piped = await write(dn1, [busy], randomBytes(300_000));
    expect(piped.w.failure()).toMatchObject({ errorCode: "DATANODE_PRIMARY_BUSY", failedDatanodeId: "busy" });
    // Nothing was acknowledged: no packet reached every node of the pipeline.
    expect(piped.w.acks.filter((a) => a.ok)).toEqual([]);
    expect(dn1.store.get(piped.block.blockId)).toBeUndefined();
  });

  it("stops serving when its primary turns busy and serves again when it calms down", async () => {
    const monitor = new StepPrimaryMonitor({ capacityMilli: 1000 });
    const dn = await startDataNode("stepper", { monitorTickMs: 20 }, monitor);
    const data = randomBytes(3000);
    const { block } = await write(dn, [], data);
    monitor.set(950);
    await waitFor(() => dn.isPrimaryBusy(), { what: "the busy state", ...POLL });
    expect(await readCode(dn, block)).toBe("DATANODE_PRIMARY_BUSY");
    expect((await write(dn, [], data)).w.failure()?.errorCode).toBe("DATANODE_PRIMARY_BUSY");
    await waitFor(() => nn.of("stepper").some((m) => m.heartbeat?.primaryBusy === true), {
      what: "a heartbeat saying busy",
      ...POLL,
    });
    monitor.set(100);
    await waitFor(() => !dn.isPrimaryBusy(), { what: "the calm state", ...POLL });
    expect((await readBlock(dn, block)).equals(data)).toBe(true);
  });

  it("reports a deleted replica at once but frees its space only while the primary is not busy", async () => {
    const monitor = new StepPrimaryMonitor({ capacityMilli: 1000 });
    const dn = await startDataNode("deleter", { monitorTickMs: 20, deleteChunkBytes: 64 * 1024 }, monitor);
    const data = randomBytes(1_000_000);
    const { block } = await write(dn, [], data);
    await waitFor(() => dn.isRegistered, { what: "registered", ...POLL });
    monitor.set(950);
    await waitFor(() => dn.isPrimaryBusy(), { what: "the busy state", ...POLL });
    nn.command("deleter", { commands: { delete: [block] } });
    await waitFor(() => nn.of("deleter").some((m) => m.received?.deleted.some((b) => b.blockId === block.blockId)), {
      what: "the deletion report",
      ...POLL,
    });
    expect(dn.store.get(block.blockId)).toBeUndefined();
    // That nothing is freed is the claim: give the busy datanode's trash time in which it would have freed it.
    await new Promise((r) => setTimeout(r, 300));
    // Still on the primary's disk, and counted as used: nothing is freed while the primary is busy.
    expect(dn.store.trashBytes).toBe(data.length);
    expect(dn.store.usedBytes()).toBe(data.length);
    const trash = join(dn.options.dataDir, "trash");
    expect(readdirSync(trash).map((n) => statSync(join(trash, n)).size)).toEqual([data.length]);
    monitor.set(100);
    await waitFor(() => dn.store.trashBytes === 0 && readdirSync(trash).length === 0, {
      what: "the trash to be freed",
      ...POLL,
    });
    expect(dn.store.usedBytes()).toBe(0);
  });

  it("wipes its replicas on Reimage and re-registers empty with a new storage id", async () => {
    const dn = await startDataNode("reimaged");
    const { block } = await write(dn, [], randomBytes(70_000));
    expect(dn.store.list()).toHaveLength(1);
    const oldStorage = dn.storageId;
    const c = client(dn);
    const res = await call(c, c.reimage, {});
    expect(res.blocksWiped).toBe(1);
    expect(res.storageId).not.toBe(oldStorage);
    expect(await readCode(dn, block)).toBe("DATANODE_BLOCK_NOT_FOUND");
    await waitFor(
      () => {
        const msgs = nn.of("reimaged");
        const reg = msgs.findIndex((m) => m.register?.storageId === res.storageId);
        return (
          reg >= 0 &&
          msgs.slice(reg).some((m) => m.reimage) &&
          msgs.slice(reg).some((m) => m.blockReport && m.blockReport.blocks.length === 0)
        );
      },
      { what: "the reimage report and an empty block report", ...POLL },
    );
  });

  it("answers malformed streams with coded errors and keeps serving", async () => {
    const c = client(dn2);
    const expectFailure = async (msgs: WritePacket[], code: string): Promise<void> => {
      const w = new RawWrite(c);
      for (const m of msgs) w.send(m);
      w.end();
      await w.settled();
      expect(w.failure()?.errorCode).toBe(code);
    };
    const data = randomBytes(1024);
    const sums = chunkChecksums(data);
    const header = (blockId: number): WritePacket => ({ header: { block: { blockId, genStamp: 1 }, clientName: "t" } });
    const packet = (extra: object = {}): WritePacket => ({
      data: { seq: 0, offsetInBlock: 0, data, checksums: sums, last: true, ...extra },
    });
    await expectFailure([packet()], "DATANODE_PROTOCOL_ERROR");
    await expectFailure([header(-1), packet()], "DATANODE_BAD_BLOCK_ID");
    await expectFailure([header(2 ** 60), packet()], "DATANODE_BAD_BLOCK_ID");
    await expectFailure([header(nextBlockId++), packet({ checksums: [sums[0]!, 0] })], "DATANODE_CHECKSUM_MISMATCH");
    await expectFailure([header(nextBlockId++), packet({ offsetInBlock: 512 })], "DATANODE_PROTOCOL_ERROR");
    const unfinished = nextBlockId++;
    await expectFailure([header(unfinished), packet({ last: false })], "DATANODE_PROTOCOL_ERROR");
    await expectFailure([header(nextBlockId++), header(nextBlockId++)], "DATANODE_PROTOCOL_ERROR");
    expect(await readCode(dn2, { blockId: -5, genStamp: 1 })).toBe("DATANODE_BAD_BLOCK_ID");
    expect(await readCode(dn2, { blockId: 987_654, genStamp: 1 })).toBe("DATANODE_BLOCK_NOT_FOUND");
    // Nothing of the refused writes is left, but a stream that ended mid-block is kept for lease recovery, as HDFS
    // keeps an rbw replica (its packets may have been acknowledged), and is never readable as a finished replica. A
    // refused write's files go when its writer does, a moment after the refusal was sent.
    const rbw = join(dn2.options.dataDir, "rbw");
    const kept = [`blk_${unfinished}`, `blk_${unfinished}_1.meta`];
    await waitFor(() => readdirSync(rbw).sort().join() === kept.join(), {
      what: () => `only the unfinished replica in rbw/ (${readdirSync(rbw).sort().join(", ")})`,
      ...POLL,
    });
    expect(dn2.store.keptReplicas().map((r) => r.blockId)).toEqual([unfinished]);
    expect(await readCode(dn2, { blockId: unfinished, genStamp: 1 })).toBe("DATANODE_BLOCK_NOT_FOUND");
    const ok = randomBytes(10_000);
    const { block, w } = await write(dn2, [], ok);
    expect(w.failure()).toBeUndefined();
    expect((await readBlock(dn2, block)).equals(ok)).toBe(true);
  });

  for (const mode of ["tail", "every-hop"] as const)
    it(`names the datanode whose copy of a packet first went bad (pipelineVerify ${mode}) and keeps no replica`, async () => {
      const a = await startDataNode(`${mode}-a`, { pipelineVerify: mode });
      const b = await startDataNode(`${mode}-b`, { pipelineVerify: mode });
      const c = await startDataNode(`${mode}-c`, { pipelineVerify: mode });
      // A hop that flips one byte of what it carries: the transfer stream from the node before `target`, one byte
      // well inside the data of its fifth 64 KiB packet (past the magic, the header frame and four packet frames).
      const corrupting = async (target: DataNode): Promise<DatanodeInfo> => {
        const [host, port] = target.transferAddress.split(":");
        const flipAt = 4 + 1_000 + 4 * (DATA_FRAME_HEAD + PACKET) + DATA_FRAME_HEAD + 30_000;
        const proxy = createNetServer((inbound) => {
          const outbound = connectNet({ host: host!, port: Number(port) });
          let seen = 0;
          inbound.on("data", (chunk: Buffer) => {
            if (flipAt >= seen && flipAt < seen + chunk.length) chunk[flipAt - seen] = chunk[flipAt - seen]! ^ 0xff;
            seen += chunk.length;
            outbound.write(chunk);
          });
          outbound.pipe(inbound);
          for (const s of [inbound, outbound]) s.on("error", () => (inbound.destroy(), outbound.destroy()));
          inbound.on("close", () => outbound.destroy());
          outbound.on("close", () => inbound.destroy());
        });
        proxies.push(proxy);
        await new Promise<void>((r) => proxy.listen(0, "127.0.0.1", r));
        const proxyPort = (proxy.address() as AddressInfo).port;
        return { ...info(target), transferAddress: `127.0.0.1:${proxyPort}` };
      };
      const data = randomBytes(1024 * 1024);
      const expectNamed = async (
        downstream: DatanodeInfo[],
        named: string,
        send = (w: RawWrite): void => w.sendData(data, 0, data.length),
      ): Promise<void> => {
        const block = { blockId: nextBlockId++, genStamp: 1 };
        const w = new RawWrite(client(a));
        w.send({ header: { block, downstream, clientName: "test" } });
        send(w);
        w.end();
        await w.settled();
        expect(w.failure()).toMatchObject({
          ok: false,
          errorCode: "DATANODE_CHECKSUM_MISMATCH",
          failedDatanodeId: named,
        });
        // No node keeps the block: a replica finalized before the verdict came back up the pipeline is dropped too.
        await waitFor(() => [a, b, c].every((dn) => dn.store.get(block.blockId) === undefined), {
          what: "no replica of the failed block",
          ...POLL,
        });
      };

      // From the writer: the head datanode is named, whether it found the packet bad on arrival (every-hop) or found its
      // own copy bad once the last node had (tail).
      const bad = Buffer.from(data);
      bad[200_000] = bad[200_000]! ^ 0x01;
      await expectNamed([info(b), info(c)], a.options.datanodeId, (w) => {
        for (let at = 0; at < data.length; at += PACKET) {
          // The checksums are the good data's: the packet went bad after they were computed.
          const sums = chunkChecksums(data.subarray(at, at + PACKET));
          const piece = bad.subarray(at, at + PACKET);
          w.send({
            data: {
              seq: at / PACKET,
              offsetInBlock: at,
              data: piece,
              checksums: sums,
              last: at + PACKET >= data.length,
            },
          });
        }
      });

      // On the hop into the middle node, and on the hop into the last.
      await expectNamed(
        [await corrupting(b), { ...info(c), transferAddress: c.transferAddress }],
        b.options.datanodeId,
      );
      await expectNamed(
        [{ ...info(b), transferAddress: b.transferAddress }, await corrupting(c)],
        c.options.datanodeId,
      );

      // The same nodes then write a block through the same pipeline, and every replica reads back identical.
      const good = await write(a, [b, c], data);
      expect(good.w.failure()).toBeUndefined();
      for (const dn of [a, b, c]) expect((await readBlock(dn, good.block)).equals(data)).toBe(true);
    });

  it("verifies at the pipeline's tail unless told every-hop, and takes no other rule", () => {
    const base = { datanodeId: "s1", namenodeAddress: "m:1", dataDir: "/d" };
    expect(resolveDataNodeOptions(base).pipelineVerify).toBe("tail");
    expect(resolveDataNodeOptions({ ...base, pipelineVerify: "every-hop" }).pipelineVerify).toBe("every-hop");
    let err: unknown;
    try {
      resolveDataNodeOptions({ ...base, pipelineVerify: "sometimes" as never });
    } catch (e) {
      err = e;
    }
    expect(err).toMatchObject({ code: "CONFIG_INVALID", message: expect.stringContaining("pipelineVerify") });
  });

  it("refuses to serve a corrupt replica and reports it to the namenode", async () => {
    const { block } = await write(dn3, [], randomBytes(4096));
    const file = join(dn3.options.dataDir, "current", `subdir${block.blockId % 64}`, `blk_${block.blockId}`);
    flipByte(file, 100, 0x01);
    expect(await readCode(dn3, block)).toBe("DATANODE_CORRUPT_BLOCK");
    await waitFor(
      () =>
        nn.badBlocks.some((r) => r.blocks.some((b) => b.block?.blockId === block.blockId && b.datanodeId === "dn3")),
      { what: "ReportBadBlocks", ...POLL },
    );
  });

  it("copies a replica to the targets of a replicate command and deletes on a delete command", async () => {
    const data = randomBytes(300_000);
    const { block } = await write(dn1, [], data);
    await waitFor(() => dn1.isRegistered, { what: "dn1 registered", ...POLL });
    nn.command("dn1", {
      commands: { replicate: [{ block: { ...block, numBytes: data.length }, targets: [info(dn2), info(dn3)] }] },
    });
    await waitFor(() => !!dn2.store.get(block.blockId) && !!dn3.store.get(block.blockId), {
      what: "dn2 and dn3 to hold the copy",
      ...POLL,
    });
    expect(sha(await readBlock(dn3, block))).toBe(sha(data));
    await waitFor(() => nn.of("dn3").some((m) => m.received?.received.some((b) => b.blockId === block.blockId)), {
      what: "dn3's BlocksReceived",
      ...POLL,
    });
    nn.command("dn1", { commands: { delete: [block, { blockId: -3, genStamp: 1 }] } });
    await waitFor(() => !dn1.store.get(block.blockId), { what: "dn1 to drop the replica", ...POLL });
    expect(await readCode(dn1, block)).toBe("DATANODE_BLOCK_NOT_FOUND");
    await waitFor(() => nn.of("dn1").some((m) => m.received?.deleted.some((b) => b.blockId === block.blockId)), {
      what: "dn1's deletion report",
      ...POLL,
    });
    expect(dn1.state).toBe("running");

    const registrations = nn.of("dn1").filter((m) => m.register).length;
    nn.command("dn1", { commands: { reregister: true } });
    await waitFor(
      () => {
        const msgs = nn.of("dn1");
        const last = msgs.findLastIndex((m) => m.register);
        return msgs.filter((m) => m.register).length > registrations && msgs.slice(last).some((m) => m.blockReport);
      },
      { what: "dn1 to register again and report its blocks", ...POLL },
    );
  });

  it("keeps serving while the namenode is away and registers once it appears", async () => {
    const probe = createServer();
    const port = await bindServer(probe, "127.0.0.1", 0);
    await shutdownServer(probe, 100);
    const dn = new DataNode(
      {
        datanodeId: "lonely",
        namenodeAddress: `127.0.0.1:${port}`,
        dataDir: join(dir, "lonely"),
        reconnectMinMs: 50,
        reconnectMaxMs: 200,
      },
      { logger: quiet, monitor: new StepPrimaryMonitor({ capacityMilli: 1000 }) },
    );
    nodes.push(dn);
    await dn.start();
    const data = randomBytes(20_000);
    const { block, w } = await write(dn, [], data);
    expect(w.failure()).toBeUndefined();
    expect((await readBlock(dn, block)).equals(data)).toBe(true);
    expect(dn.isRegistered).toBe(false);
    const late = new RecordingNamenode();
    await late.start(port);
    try {
      await waitFor(() => dn.isRegistered, { what: "registration with the late namenode", ...POLL });
      await waitFor(
        () => late.of("lonely").some((m) => m.blockReport?.blocks.some((b) => b.blockId === block.blockId)),
        { what: "a full block report naming the block", ...POLL },
      );
    } finally {
      await dn.stop();
      await late.stop();
    }
  });
});
