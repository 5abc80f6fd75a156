/**
 * The load the namenode benchmarks put on a namenode (bench/namenode.ts, bench/namenode-ha.ts): datanodes played over
 * the real DatanodeChannel stream (they register, heartbeat and report every block as received, as a real datanode
 * does after finalizing it), and small files written as create + addBlock + complete, each a durable metadata
 * operation, by N concurrent clients.
 */
import type * as grpc from "@grpc/grpc-js";
import { call, loadHarvestProto, makeClient } from "../common/grpc.js";
import type { ClientNamenodeClient } from "../proto/generated/harvest/v1/ClientNamenode.js";
import type { DatanodeToNamenode } from "../proto/generated/harvest/v1/DatanodeToNamenode.js";
import type { NamenodeToDatanodeOutput } from "../proto/generated/harvest/v1/NamenodeToDatanode.js";
import { Metadata } from "@grpc/grpc-js";
import { NamespaceChannel } from "../client/index.js";
import type { StreamedCalls } from "../client/index.js";

/** Bytes each played block holds. */
export const BLOCK_BYTES = 1024;

type DnStream = grpc.ClientDuplexStream<DatanodeToNamenode, NamenodeToDatanodeOutput>;

/** A datanode played over the real stream to one namenode. */
export interface FakeDatanode {
  id: string;
  stream: DnStream;
  stop(): void;
}

/** A datanode played over the real stream: registers, heartbeats, reports blocks as received. */
export function fakeDatanode(address: string, id: string, rack: string): FakeDatanode {
  const proto = loadHarvestProto();
  const client = makeClient(proto.DatanodeProtocol, address);
  const stream = client.datanodeChannel();
  stream.on("data", () => undefined);
  stream.on("error", () => undefined);
  stream.write({
    register: {
      datanodeId: id,
      address: `127.0.0.1:${9000 + Number(id.slice(-1))}`,
      rack,
      capacityBytes: 2 ** 50,
      usedBytes: 0,
      storageId: `DS-${id}`,
    },
  });
  stream.write({ blockReport: { blocks: [] } });
  let seq = 0;
  const beat = setInterval(
    () =>
      stream.write({
        heartbeat: { seq: ++seq, capacityBytes: 2 ** 50, usedBytes: 0, remainingBytes: 2 ** 50, primaryBusy: false },
      }),
    500,
  );
  return {
    id,
    stream,
    stop() {
      clearInterval(beat);
      stream.end();
      client.close();
    },
  };
}

/** Reports a block received by every datanode of its pipeline (on each of their streams), as real datanodes do. */
export function reporter(
  dns: readonly FakeDatanode[],
): (blockId: number, genStamp: number, locations: string[]) => void {
  return (blockId, genStamp, locations) => {
    for (const dn of dns) {
      if (locations.includes(dn.id))
        dn.stream.write({ received: { received: [{ blockId, genStamp, numBytes: BLOCK_BYTES }], deleted: [] } });
    }
  };
}

/** Waits (up to 5 s) until `n` datanodes are live at the namenode `client` calls. */
export async function waitForLiveDatanodes(client: ClientNamenodeClient, n: number): Promise<void> {
  for (let i = 0; i < 100; i++) {
    const live = (await call(client, client.getDatanodes, {})).datanodes.filter((d) => d.state === "LIVE").length;
    if (live >= n) return;
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** The three durable calls, however they travel. */
export type DurableCalls = {
  [K in keyof StreamedCalls]: (req: StreamedCalls[K]["req"]) => Promise<StreamedCalls[K]["res"]>;
};

/** `n` clients of the namenode at `address`, each with its NamespaceCalls channel (DfsClient's way). */
export function namespaceClients(
  address: string,
  n: number,
): { clients: ClientNamenodeClient[]; channels: NamespaceChannel[] } {
  const clients = Array.from({ length: n }, () => makeClient(loadHarvestProto().ClientNamenode, address));
  return { clients, channels: clients.map((c) => new NamespaceChannel(c, () => new Metadata(), 60_000)) };
}

/** The durable calls on a NamespaceCalls stream (DfsClient's way). */
export function streamCalls(ch: NamespaceChannel): DurableCalls {
  return {
    create: (req) => ch.call("create", req, 30_000),
    addBlock: (req) => ch.call("addBlock", req, 30_000),
    complete: (req) => ch.call("complete", req, 30_000),
  };
}

/** One small file: create, `blocks` blocks, complete (2 + `blocks` durable metadata operations). */
export async function writeSmallFile(
  nnCalls: DurableCalls,
  received: ReturnType<typeof reporter>,
  path: string,
  blocks: number,
  name: string,
): Promise<void> {
  await nnCalls.create({ path, owner: "bench", replication: 3, blockSize: 0, overwrite: false, clientName: name });
  let previous: { blockId: number; genStamp: number; numBytes: number } | undefined;
  for (let b = 0; b < blocks; b++) {
    const lb = await nnCalls.addBlock({
      path,
      clientName: name,
      ...(previous ? { previous } : {}),
      excludedDatanodes: [],
    });
    const blk = lb.block!;
    received(
      blk.blockId,
      blk.genStamp,
      lb.locations.map((l) => l.datanodeId),
    );
    previous = { blockId: blk.blockId, genStamp: blk.genStamp, numBytes: BLOCK_BYTES };
  }
  await nnCalls.complete({ path, clientName: name, ...(previous ? { last: previous } : {}) });
}

/**
 * Each of `clients` writes one-block files under `dir` until `seconds` pass; resolves with the durable ops/s
 * (3 per file) and the files written.
 */
export async function durableRun(
  clients: number,
  seconds: number,
  callsOf: (i: number) => DurableCalls,
  received: ReturnType<typeof reporter>,
  dir: string,
): Promise<{ ops: number; files: number; secs: number }> {
  let done = 0;
  const deadline = performance.now() + seconds * 1000;
  const t0 = performance.now();
  await Promise.all(
    Array.from({ length: clients }, async (_, i) => {
      const nnCalls = callsOf(i);
      for (let j = 0; performance.now() < deadline; j++) {
        await writeSmallFile(nnCalls, received, `${dir}-c${i}-f${j}`, 1, `bench-${i}`);
        done++;
      }
    }),
  );
  const secs = (performance.now() - t0) / 1000;
  return { ops: (done * 3) / secs, files: done, secs };
}
