/**
 * A downstream datanode that is alive but never acknowledges: a fake datanode served by the test (a real gRPC server
 * that registers and heartbeats with a real namenode, accepts WriteBlock and then says nothing). The real datanode
 * upstream of it fails the pipeline after its ack timeout naming the fake, and the client's pipeline recovery
 * replaces it: the write completes and reads back byte-identical.
 */
import type * as grpc from "@grpc/grpc-js";
import { randomBytes } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Readable } from "node:stream";
import { pipeline } from "node:stream/promises";
import { waitFor } from "../wait-for.js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { DfsClient } from "../../client/dfs-client.js";
import { bindServer, createServer, loadHarvestProto, makeClient, shutdownServer } from "../../common/grpc.js";
import type { DataNode } from "../../datanode/index.js";
import { chunkChecksums } from "../../datanode/index.js";
import type { NameNode } from "../../namenode/index.js";
import type { DatanodeProtocolClient } from "../../proto/generated/harvest/v1/DatanodeProtocol.js";
import type { DatanodeToNamenode } from "../../proto/generated/harvest/v1/DatanodeToNamenode.js";
import type { NamenodeToDatanodeOutput } from "../../proto/generated/harvest/v1/NamenodeToDatanode.js";
import type { WriteAck } from "../../proto/generated/harvest/v1/WriteAck.js";
import type { WriteAckOutput } from "../../proto/generated/harvest/v1/WriteAck.js";
import type { WritePacketOutput } from "../../proto/generated/harvest/v1/WritePacket.js";
import { requireBuild, startTestDataNode, startTestNameNode } from "./harness.js";

const KiB = 1024;
const ACK_TIMEOUT_MS = 1_500;

/** A datanode that registers and heartbeats like a real one, takes every WriteBlock, and never acknowledges. */
class SilentDatanode {
  readonly server = createServer();
  /** Blocks whose header reached it, and data packets received. */
  readonly headers: number[] = [];
  packets = 0;
  private channel: DatanodeProtocolClient | undefined;
  private stream: grpc.ClientDuplexStream<DatanodeToNamenode, NamenodeToDatanodeOutput> | undefined;
  private timer: NodeJS.Timeout | undefined;
  private readonly calls: grpc.ServerDuplexStream<WritePacketOutput, WriteAck>[] = [];

  constructor(readonly datanodeId: string) {}

  async start(namenodeAddress: string): Promise<void> {
    const proto = loadHarvestProto();
    this.server.addService(proto.DataTransfer.service, {
      WriteBlock: (call: grpc.ServerDuplexStream<WritePacketOutput, WriteAck>) => {
        this.calls.push(call);
        call.on("data", (p: WritePacketOutput) => {
          if (p.header?.block) this.headers.push(p.header.block.blockId);
          if (p.data) this.packets += 1;
        });
        call.on("error", () => undefined);
      },
      ReadBlock: (call: grpc.ServerWritableStream<unknown, unknown>) => call.end(),
      Reimage: (_c: unknown, cb: grpc.sendUnaryData<unknown>) => cb(null, {}),
    });
    const port = await bindServer(this.server, "127.0.0.1", 0);
    this.channel = makeClient(proto.DatanodeProtocol, namenodeAddress);
    const stream = this.channel.datanodeChannel();
    this.stream = stream;
    stream.on("data", () => undefined);
    stream.on("error", () => undefined);
    const space = { capacityBytes: 1 << 30, usedBytes: 0 };
    stream.write({
      register: {
        datanodeId: this.datanodeId,
        address: `127.0.0.1:${port}`,
        rack: "/other-rack",
        storageId: "DS-00000000-0000-0000-0000-000000000001",
        ...space,
      },
    });
    stream.write({ blockReport: { blocks: [] } });
    let seq = 0;
    const beat = (): void => {
      stream.write({ heartbeat: { seq: ++seq, ...space, remainingBytes: 1 << 30, primaryBusy: false } });
    };
    beat();
    this.timer = setInterval(beat, 100);
  }

  async stop(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    this.stream?.end();
    this.channel?.close();
    for (const c of this.calls) c.end();
    await shutdownServer(this.server, 500);
  }
}

describe("a downstream datanode that never acknowledges", () => {
  let dir: string;
  let nn: NameNode;
  let dn: DataNode;
  let silent: SilentDatanode;
  let dfs: DfsClient;

  beforeAll(async () => {
    requireBuild();
    dir = mkdtempSync(join(tmpdir(), "harvest-acktimeout-"));
    nn = await startTestNameNode(dir, { blockTokens: false, heartbeatIntervalMs: 100, datanodeExpiryMs: 10_000 });
    dn = await startTestDataNode(dir, "real-dn", nn.address, { pipelineAckTimeoutMs: ACK_TIMEOUT_MS });
    silent = new SilentDatanode("silent-dn");
    await silent.start(nn.address);
    dfs = new DfsClient(nn.address, { writerDatanodeId: "real-dn" });
    await waitFor(async () => (await dfs.datanodes()).length >= 2, {
      what: "both datanodes to register",
      intervalMs: 25,
    });
  });

  afterAll(async () => {
    dfs?.close();
    await dn?.stop();
    await silent?.stop();
    await nn?.stop();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it("fails the pipeline naming the silent datanode, which a raw writer sees in its ack", async () => {
    const client = makeClient(loadHarvestProto().DataTransfer, dn.address);
    const call = client.writeBlock();
    const acks: WriteAckOutput[] = [];
    const ended = new Promise<void>((resolve) => {
      call.on("data", (a: WriteAckOutput) => acks.push(a));
      call.on("end", () => resolve());
      call.on("error", () => resolve());
    });
    const data = randomBytes(4 * KiB);
    call.write({
      header: {
        block: { blockId: 777_001, genStamp: 1 },
        downstream: [{ datanodeId: "silent-dn", address: await silentAddress(dfs) }],
        clientName: "raw",
      },
    });
    call.write({ data: { seq: 1, offsetInBlock: 0, data, checksums: chunkChecksums(data), last: false } });
    await ended;
    client.close();
    expect(acks.find((a) => !a.ok)).toMatchObject({
      ok: false,
      errorCode: "DATANODE_PIPELINE_FAILED",
      failedDatanodeId: "silent-dn",
    });
  });

  it("completes a write whose pipeline included it, with the data intact", async () => {
    const before = silent.headers.length;
    const data = randomBytes(300 * KiB);
    await pipeline(Readable.from([data]), dfs.createWriteStream("/acks/file.bin", { replication: 2 }));
    // The silent datanode was in the first pipeline (so the timeout was what got the write through).
    expect(silent.headers.length).toBeGreaterThan(before);
    const chunks: Buffer[] = [];
    for await (const c of dfs.createReadStream("/acks/file.bin")) chunks.push(c as Buffer);
    expect(Buffer.concat(chunks).equals(data)).toBe(true);
    const st = await dfs.stat("/acks/file.bin");
    expect(st.length).toBe(data.length);
  });
});

/** The silent datanode's address as the namenode registered it. */
async function silentAddress(dfs: DfsClient): Promise<string> {
  const d = (await dfs.datanodes()).find((x) => x.datanodeId === "silent-dn");
  if (!d) throw new Error("the silent datanode is not registered");
  return d.address;
}
