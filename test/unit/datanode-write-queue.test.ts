/**
 * A write session's queue (datanode/data-transfer.ts): a sender that pushes packets faster than the datanode takes
 * them is paused once a bounded number of bytes waits, whatever size its packets are (a count of packets would let a
 * sender of 1 MiB packets park sixteen times as much memory as one of 64 KiB), and once a few hundred packets wait
 * however small (a flood of empty packets would otherwise queue without end). Once paused and resumed, every packet is
 * written, acknowledged in order, and the replica reads back byte-identical.
 */
import { randomBytes } from "node:crypto";
import { EventEmitter } from "node:events";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { chunkChecksums } from "../../common/checksum.js";
import { BlockStore } from "../../datanode/block-store.js";
import { MAX_PACKET_BYTES } from "../../datanode/data-transfer.js";
import type { WriteUpstream } from "../../datanode/data-transfer.js";
import type { WriteAck } from "../../proto/generated/harvest/v1/WriteAck.js";
import { standaloneTransferService } from "../transfer-service.js";

const KiB = 1024;
const MiB = 1024 * KiB;

/**
 * An upstream that, like a socket with a fast sender behind it, delivers the next packet at once for as long as it is
 * not paused. It records how many bytes it had delivered when it was first paused.
 */
class EagerUpstream extends EventEmitter implements WriteUpstream {
  readonly acks: WriteAck[] = [];
  private paused = false;
  private next = 0;
  pausedAtBytes: number | undefined;
  pausedAtPackets: number | undefined;
  private deliveredBytes = 0;
  readonly writableNeedDrain = false;

  constructor(private readonly packets: { data: Buffer; offset: number; last: boolean }[]) {
    super();
  }

  isPaused(): boolean {
    return this.paused;
  }
  pause(): void {
    if (!this.paused && this.pausedAtBytes === undefined) {
      this.pausedAtBytes = this.deliveredBytes;
      this.pausedAtPackets = this.next;
    }
    this.paused = true;
  }
  resume(): void {
    this.paused = false;
    setImmediate(() => this.pump());
  }
  write(ack: WriteAck): boolean {
    this.acks.push(ack);
    if (ack.ok === false || this.acks.length === this.packets.length) this.emit("done");
    return true;
  }
  end(): void {
    this.emit("closed");
  }

  /** Sends the header, then packets until paused or done. */
  start(header: object): void {
    this.emit("data", { header });
    this.pump();
  }

  private pump(): void {
    while (!this.paused && this.next < this.packets.length) {
      const p = this.packets[this.next++]!;
      this.deliveredBytes += p.data.length;
      this.emit("data", {
        data: {
          seq: this.next,
          offsetInBlock: p.offset,
          data: p.data,
          checksums: chunkChecksums(p.data),
          last: p.last,
        },
      });
    }
  }
}

describe("a datanode's write queue", () => {
  const dirs: string[] = [];
  afterEach(() => {
    for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
  });

  async function writeThrough(packetBytes: number, blockId: number, emptyPackets = 0) {
    const dir = mkdtempSync(join(tmpdir(), "harvest-dn-wq-"));
    dirs.push(dir);
    const store = await BlockStore.open({ dataDir: dir });
    const svc = standaloneTransferService(store);
    const data = randomBytes(24 * MiB);
    const packets: { data: Buffer; offset: number; last: boolean }[] = [];
    // Packets without data first (the protocol accepts them): they cost memory however small they are.
    for (let i = 0; i < emptyPackets; i++) packets.push({ data: Buffer.alloc(0), offset: 0, last: false });
    for (let at = 0; at < data.length; at += packetBytes)
      packets.push({ data: data.subarray(at, at + packetBytes), offset: at, last: false });
    packets.push({ data: Buffer.alloc(0), offset: data.length, last: true });
    const up = new EagerUpstream(packets);
    const done = new Promise<void>((resolve) => up.once("done", () => resolve()));
    svc.startWrite(up);
    up.start({ block: { blockId, genStamp: 1, numBytes: 0 }, downstream: [], clientName: "t", blockToken: "" });
    await done;
    const chunks: Buffer[] = [];
    for await (const c of store.read({ blockId, genStamp: 1 })) chunks.push(Buffer.from(c.data));
    return { up, data, readBack: Buffer.concat(chunks) };
  }

  it.each([
    [64 * KiB, 1],
    [MAX_PACKET_BYTES, 2],
  ])("pauses a fast sender of %i-byte packets at the same few MiB, then writes every byte", async (bytes, blockId) => {
    const { up, data, readBack } = await writeThrough(bytes, blockId);
    // Paused at the bound (4 MiB), not at a count of packets: the same for small packets and for large ones.
    expect(up.pausedAtBytes).toBeDefined();
    expect(up.pausedAtBytes!).toBeGreaterThanOrEqual(4 * MiB);
    expect(up.pausedAtBytes!).toBeLessThanOrEqual(4 * MiB + bytes);
    expect(up.acks.every((a) => a.ok)).toBe(true);
    expect(up.acks.map((a) => a.seq)).toEqual(up.acks.map((_, i) => i + 1));
    expect(readBack.equals(data)).toBe(true);
  });

  it("pauses a sender that floods it with empty packets after a few hundred, then writes every byte", async () => {
    const { up, data, readBack } = await writeThrough(MAX_PACKET_BYTES, 3, 5_000);
    expect(up.pausedAtBytes).toBe(0);
    expect(up.pausedAtPackets!).toBeLessThanOrEqual(300);
    expect(up.acks.every((a) => a.ok)).toBe(true);
    expect(up.acks).toHaveLength(5_000 + 24 + 1);
    expect(readBack.equals(data)).toBe(true);
  });
});
