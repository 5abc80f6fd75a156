/**
 * A real datanode process serving two namenodes (HA), both played by the test as real gRPC servers of the datanode
 * protocol: an old active of term 5 back from a partition, and the active of term 9. Both get the registration, the
 * block reports and every received and deleted replica; the datanode carries out the current active's replicate and
 * delete commands but not the old one's (the replica stays, nothing is copied, the refusal is counted in /metrics);
 * and a write whose block token the old active issued is refused with STALE_EPOCH while one of term 9 succeeds. The
 * two namenodes' block keys have the same ids, as two key managers that start alike do. A third namenode the datanode
 * names is down throughout: it delays nothing.
 */
import { spawn } from "node:child_process";
import type { ChildProcess } from "node:child_process";
import type * as grpc from "@grpc/grpc-js";
import { randomBytes } from "node:crypto";
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { BlockKeyManager } from "../../common/block-token.js";
import { chunkChecksums } from "../../common/checksum.js";
import { fromGrpcError } from "../../common/errors.js";
import { bindServer, createServer, loadHarvestProto, makeClient, shutdownServer } from "../../common/grpc.js";
import { distEntry } from "../../common/paths.js";
import type { DataTransferClient } from "../../proto/generated/harvest/v1/DataTransfer.js";
import type { DatanodeCommands } from "../../proto/generated/harvest/v1/DatanodeCommands.js";
import type { DatanodeToNamenodeOutput } from "../../proto/generated/harvest/v1/DatanodeToNamenode.js";
import type { NamenodeToDatanode } from "../../proto/generated/harvest/v1/NamenodeToDatanode.js";
import type { WriteAck, WriteAckOutput } from "../../proto/generated/harvest/v1/WriteAck.js";
import type { WritePacketOutput } from "../../proto/generated/harvest/v1/WritePacket.js";
import { parsePromText, sumSamples } from "../prom-text.js";
import { waitFor } from "../wait-for.js";
import { requireBuild } from "../integration/harness.js";

type NamenodeEnd = grpc.ServerDuplexStream<DatanodeToNamenodeOutput, NamenodeToDatanode>;

/**
 * A namenode of one term that says it is active: it records what the datanode reports, answers its heartbeats and
 * sends the test's commands.
 */
class FakeNamenode {
  readonly server = createServer();
  readonly keys: BlockKeyManager;
  address = "";
  registrations = 0;
  blockReports = 0;
  readonly received: number[] = [];
  readonly deleted: number[] = [];
  private stream: NamenodeEnd | undefined;

  constructor(readonly epoch: number) {
    this.keys = new BlockKeyManager(() => Date.now(), { epoch });
  }

  async start(): Promise<void> {
    this.server.addService(loadHarvestProto().DatanodeProtocol.service, {
      DatanodeChannel: (stream: NamenodeEnd) => {
        this.stream = stream;
        stream.on("data", (msg: DatanodeToNamenodeOutput) => {
          if (msg.register) {
            this.registrations++;
            stream.write({
              registered: {
                datanodeId: msg.register.datanodeId,
                heartbeatIntervalMs: 200,
                blockTokens: true,
                blockKeys: this.keys.keys(),
                epoch: this.epoch,
                active: true,
              },
            });
          } else if (msg.heartbeat) {
            // As an active answers every heartbeat: commands stamped with its term (none to give here).
            stream.write({ commands: { seq: msg.heartbeat.seq, epoch: this.epoch } });
          } else if (msg.blockReport) this.blockReports++;
          else if (msg.received) {
            this.received.push(...msg.received.received.map((b) => b.blockId));
            this.deleted.push(...msg.received.deleted.map((b) => b.blockId));
          }
        });
        stream.on("error", () => undefined);
        stream.on("end", () => stream.end());
      },
    });
    this.address = `127.0.0.1:${await bindServer(this.server, "127.0.0.1", 0)}`;
  }

  command(c: DatanodeCommands): void {
    this.stream!.write({ commands: { ...c, epoch: this.epoch } });
  }

  stop(): Promise<void> {
    this.stream?.end();
    return shutdownServer(this.server, 0);
  }
}

/** A replication target that only records the blocks whose copy reached it. */
async function fakeTarget(): Promise<{ address: string; headers: number[]; stop: () => Promise<void> }> {
  const server = createServer();
  const headers: number[] = [];
  server.addService(loadHarvestProto().DataTransfer.service, {
    WriteBlock: (call: grpc.ServerDuplexStream<WritePacketOutput, WriteAck>) => {
      call.on("data", (p: WritePacketOutput) => {
        if (p.header?.block) headers.push(p.header.block.blockId);
      });
      call.on("error", () => undefined);
      call.on("end", () => call.end());
    },
    ReadBlock: (call: grpc.ServerWritableStream<unknown, unknown>) => call.end(),
    Reimage: (_c: unknown, cb: grpc.sendUnaryData<unknown>) => cb(null, {}),
  });
  const port = await bindServer(server, "127.0.0.1", 0);
  return { address: `127.0.0.1:${port}`, headers, stop: () => shutdownServer(server, 0) };
}

/** Writes one small block to the datanode with `token`: resolves to "OK" or the error code of the failing ack. */
function writeBlock(client: DataTransferClient, blockId: number, token: string): Promise<string> {
  const call = client.writeBlock();
  const data = randomBytes(4096);
  return new Promise((resolve) => {
    call.on("data", (a: WriteAckOutput) => {
      if (!a.ok) resolve(a.errorCode);
      else if (a.seq === 1) resolve("OK");
    });
    call.on("error", (err: Error) => resolve(fromGrpcError(err).code));
    call.on("end", () => resolve("ended without an answer"));
    call.write({ header: { block: { blockId, genStamp: 1 }, downstream: [], clientName: "test", blockToken: token } });
    call.write({ data: { seq: 1, offsetInBlock: 0, data, checksums: chunkChecksums(data), last: true } });
    call.end();
  });
}

/** Reads a whole block: resolves to its bytes, or the error code. */
function readBlock(client: DataTransferClient, blockId: number, token: string): Promise<number | string> {
  return new Promise((resolve) => {
    let bytes = 0;
    const call = client.readBlock({ block: { blockId, genStamp: 1 }, offset: 0, length: 0, blockToken: token });
    call.on("data", (c: { data: Buffer }) => (bytes += c.data.length));
    call.on("error", (err: Error) => resolve(fromGrpcError(err).code));
    call.on("end", () => resolve(bytes));
  });
}

describe("a datanode serving an old active (term 5) and the current one (term 9)", () => {
  let dir: string;
  let proc: ChildProcess | undefined;
  let old: FakeNamenode;
  let current: FakeNamenode;
  let target: Awaited<ReturnType<typeof fakeTarget>>;
  let dn: DataTransferClient;
  let httpUrl: string;

  const staleCommands = async (): Promise<number> => {
    const text = await (await fetch(`${httpUrl}/metrics`)).text();
    return sumSamples(parsePromText(text), "harvest_dn_stale_epoch_commands_total");
  };

  beforeAll(async () => {
    requireBuild();
    dir = mkdtempSync(join(tmpdir(), "harvest-dn-ha-"));
    old = new FakeNamenode(5);
    current = new FakeNamenode(9);
    await old.start();
    await current.start();
    // Two key managers that start alike: the same key id, different secrets.
    expect(old.keys.keys()[0]!.keyId).toBe(current.keys.keys()[0]!.keyId);
    target = await fakeTarget();
    const trace = join(dir, "idle.csv");
    writeFileSync(trace, "time_s,cpu_pct\n0,0\n600,0\n");
    // A namenode that is down: a port that was free a moment ago.
    const down = createServer();
    const downPort = await bindServer(down, "127.0.0.1", 0);
    await shutdownServer(down, 0);
    const config = join(dir, "dn.json");
    const ready = join(dir, "dn.ready");
    writeFileSync(
      config,
      JSON.stringify({
        datanodeId: "dn1",
        namenodeAddress: `${old.address},127.0.0.1:${downPort},${current.address}`,
        dataDir: join(dir, "dn1"),
        capacityBytes: 1 << 30,
        primary: `trace:${trace}`,
        insecure: true,
      }),
    );
    proc = spawn(process.execPath, [distEntry("datanode/main.js"), "--config", config, "--ready-file", ready], {
      stdio: "ignore",
    });
    const info = await waitFor(
      () =>
        existsSync(ready)
          ? (JSON.parse(readFileSync(ready, "utf8")) as { address: string; httpUrl: string })
          : undefined,
      { what: "the datanode to start", timeoutMs: 15_000, retryOnError: true },
    );
    httpUrl = info.httpUrl;
    dn = makeClient(loadHarvestProto().DataTransfer, info.address);
  });

  afterAll(async () => {
    dn?.close();
    proc?.kill("SIGKILL");
    await old?.stop();
    await current?.stop();
    await target?.stop();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it("reports to both, obeys only the current active, and refuses a write token of the old term", async () => {
    await waitFor(() => old.blockReports > 0 && current.blockReports > 0, {
      what: "both namenodes to get a registration and a block report",
    });
    expect([old.registrations, current.registrations]).toEqual([1, 1]);

    // A write with the current active's token succeeds, and both namenodes hear of the replica.
    expect(await writeBlock(dn, 1001, current.keys.issue(1001, "WRITE", "alice"))).toBe("OK");
    await waitFor(() => old.received.includes(1001) && current.received.includes(1001), {
      what: "both namenodes to hear of block 1001",
    });
    // The old active's token (its key's id is the same) is of an older term: no replica, nobody hears of one.
    expect(await writeBlock(dn, 1002, old.keys.issue(1002, "WRITE", "alice"))).toBe("STALE_EPOCH");

    // The old active asks to copy the replica and to delete it: refused, counted; the replica stays.
    const replicate = {
      replicate: [
        {
          block: { blockId: 1001, genStamp: 1, numBytes: 4096 },
          targets: [{ datanodeId: "target", address: target.address }],
          blockToken: old.keys.issue(1001, "WRITE", "nn"),
        },
      ],
    };
    old.command({ ...replicate, delete: [{ blockId: 1001, genStamp: 1, numBytes: 4096 }] });
    await waitFor(async () => ((await staleCommands()) >= 1 ? true : undefined), {
      what: "the old active's commands to be refused",
      retryOnError: true,
    });
    const readToken = current.keys.issue(1001, "READ", "alice");
    expect(await readBlock(dn, 1001, readToken)).toBe(4096);
    expect(target.headers).toEqual([]);
    expect(old.deleted.concat(current.deleted)).toEqual([]);

    // The same commands from the current active are carried out.
    current.command({
      replicate: [{ ...replicate.replicate[0]!, blockToken: current.keys.issue(1001, "WRITE", "nn") }],
    });
    await waitFor(() => target.headers.includes(1001), { what: "the copy to reach the target" });
    current.command({ delete: [{ blockId: 1001, genStamp: 1, numBytes: 4096 }] });
    await waitFor(() => old.deleted.includes(1001) && current.deleted.includes(1001), {
      what: "both namenodes to hear the replica was deleted",
    });
    expect(await readBlock(dn, 1001, current.keys.issue(1001, "READ", "alice"))).toBe("DATANODE_BLOCK_NOT_FOUND");
    expect(old.received.concat(current.received)).not.toContain(1002);
    // The old active's heartbeat answers (no commands in them) were not counted.
    expect(await staleCommands()).toBe(1);
  });
});
