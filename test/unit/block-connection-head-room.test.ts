/**
 * A client's write packets sent as one buffer (head written into the room before the data, `headRoom`) reach the
 * datanode as the same frames as packets whose head and data go out separately, on a plaintext and a TLS connection;
 * a room that does not end with the data, or is too small, is not written into and the packet still goes out whole.
 */
import { randomBytes } from "node:crypto";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import * as net from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import * as tls from "node:tls";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { createCa, issueCertificate } from "../../localcluster/cluster-ca.js";
import { BlockConnection, dataFrameHeadBytes, FRAME, FrameReader } from "../../common/block-transfer.js";
import type { DataFrame, PacketMessage, TransferSecurity } from "../../common/block-transfer.js";
import { CHUNK_BYTES, chunkChecksums } from "../../common/checksum.js";

type Packet = NonNullable<PacketMessage["data"]>;

const servers: net.Server[] = [];
afterEach(async () => {
  await Promise.all(servers.splice(0).map((s) => new Promise((r) => s.close(r))));
});

/** A cluster CA, a datanode's certificate for 127.0.0.1, and a client's. */
let dir: string;
let serverTls: { key: Buffer; cert: Buffer; ca: Buffer };
let clientTls: TransferSecurity;
beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "harvest-head-room-"));
  const ca = await createCa(join(dir, "ca"));
  const dn = await issueCertificate(join(dir, "ca"), dir, { name: "dn1", role: "daemon", hosts: ["127.0.0.1"] });
  const user = await issueCertificate(join(dir, "ca"), dir, { name: "alice", role: "user" });
  serverTls = { key: readFileSync(dn.key), cert: readFileSync(dn.cert), ca: readFileSync(ca.cert) };
  clientTls = { ca: ca.cert, cert: user.cert, key: user.key };
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** A server that decodes the DATA frames it receives until `count` arrived. */
async function frameSink(
  count: number,
  secure?: { key: Buffer; cert: Buffer; ca: Buffer },
): Promise<{ address: string; frames: Promise<DataFrame[]> }> {
  let deliver!: (frames: DataFrame[]) => void;
  let fail!: (err: Error) => void;
  const frames = new Promise<DataFrame[]>((resolve, reject) => ((deliver = resolve), (fail = reject)));
  const onSocket = (socket: net.Socket): void => {
    const reader = new FrameReader({ expectMagic: true });
    const got: DataFrame[] = [];
    socket.on("data", (chunk: Buffer) => {
      try {
        for (const f of reader.push(chunk)) {
          if (f.kind !== FRAME.DATA) continue;
          // Copied: the frame's data is a slice of the socket's chunk.
          got.push({ ...f.packet, data: Buffer.from(f.packet.data) });
          if (got.length === count) {
            deliver(got);
            socket.destroy();
          }
        }
      } catch (err) {
        fail(err as Error);
      }
    });
    socket.on("error", () => undefined);
  };
  const server = secure
    ? tls.createServer({ key: secure.key, cert: secure.cert, ca: secure.ca, requestCert: false }, onSocket)
    : net.createServer(onSocket);
  servers.push(server);
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  return { address: `127.0.0.1:${(server.address() as net.AddressInfo).port}`, frames };
}

/** A packet of `data` at `offset`; with `room` bytes free before a copy of the data in one buffer. */
function packet(seq: number, offset: number, data: Buffer, room?: number): Packet {
  const p: Packet = { seq, offsetInBlock: offset, data, checksums: chunkChecksums(data), last: false };
  if (room === undefined) return p;
  const headRoom = Buffer.alloc(room + data.length, 0xee);
  data.copy(headRoom, room);
  return { ...p, data: headRoom.subarray(room), headRoom };
}

function expectSame(got: DataFrame, sent: Packet): void {
  expect(got.seq).toBe(sent.seq);
  expect(got.offsetInBlock).toBe(sent.offsetInBlock);
  expect(got.last).toBe(sent.last);
  expect(got.checksums).toEqual(sent.checksums.map((c) => c >>> 0));
  expect(got.data.equals(sent.data)).toBe(true);
}

describe("a write packet sent in the room before its data", () => {
  for (const transport of ["plaintext", "TLS"] as const) {
    it(`arrives as the same frames as head and data sent apart (${transport})`, async () => {
      const secure = transport === "TLS";
      const sink = await frameSink(6, secure ? serverTls : undefined);
      const mib = randomBytes(1024 * 1024);
      const odd = randomBytes(3 * CHUNK_BYTES + 100);
      const exact = dataFrameHeadBytes(Math.ceil(mib.length / CHUNK_BYTES));
      const sent: Packet[] = [
        packet(1, 0, mib), // no room: head and data apart
        packet(2, mib.length, mib, exact), // exactly the head's room
        packet(3, 2 * mib.length, odd, 4096), // more room than the head needs
        packet(4, 2 * mib.length + odd.length, mib, exact - 1), // one byte short: sent apart
      ];
      // A room that does not end with the packet's data (another buffer) is not written into.
      const foreign = Buffer.alloc(exact + mib.length, 0xee);
      sent.push({ ...packet(5, 0, mib), headRoom: foreign });
      sent.push({ ...packet(6, 0, Buffer.alloc(0), 64), last: true });
      const conn = BlockConnection.open(sink.address, secure ? clientTls : undefined);
      conn.on("error", () => undefined);
      for (const p of sent) conn.write({ data: p });
      const frames = await sink.frames;
      frames.forEach((f, i) => expectSame(f, sent[i]!));
      expect(foreign.every((b) => b === 0xee)).toBe(true);
      // The short room was left as it was; the exact one holds the head now.
      expect(sent[3]!.headRoom!.subarray(0, exact - 1).every((b) => b === 0xee)).toBe(true);
      expect(sent[1]!.headRoom!.subarray(0, exact).every((b) => b === 0xee)).toBe(false);
      conn.cancel();
    });
  }
});
