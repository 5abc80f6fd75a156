/**
 * Reads served from lent buffers (datanode/read-buffers.ts): a buffer goes back to the pool only once its piece has
 * left, and never to two reads at once. Many concurrent reads through a real DataTransferService and a real block
 * store, whose sink keeps each piece's buffer for a random while before it takes its bytes (as a socket does), all get
 * exactly their blocks' bytes, and the pool is reused.
 */
import { randomBytes } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { EventEmitter } from "node:events";
import fc from "fast-check";
import { waitFor } from "../wait-for.js";
import { afterEach, describe, expect, it } from "vitest";
import { SeededRng } from "../../common/rng.js";
import { BlockStore } from "../../datanode/block-store.js";
import { chunkChecksums } from "../../common/checksum.js";
import type { BlockKey } from "../../datanode/replica-files.js";
import type { ReadSink } from "../../datanode/data-transfer.js";
import { ReadBufferPool } from "../../datanode/read-buffers.js";
import type { ReadChunk } from "../../proto/generated/harvest/v1/ReadChunk.js";
import { standaloneTransferService } from "../transfer-service.js";

const KiB = 1024;

/** A sink that holds every piece's buffer for a random few milliseconds before it copies the bytes and lets go. */
class SlowSink extends EventEmitter implements ReadSink {
  readonly parts: Buffer[] = [];
  /** Pieces that came with a head room. */
  rooms = 0;
  private pending = 0;
  constructor(private readonly rng: SeededRng) {
    super();
  }
  get writableNeedDrain(): boolean {
    return this.pending >= 2;
  }
  write(piece: ReadChunk, sent?: (err?: Error | null) => void, headRoom?: Buffer): boolean {
    const data = piece.data as Buffer;
    // Whatever a socket sink writes into the room before the data (a frame head) must leave every piece's bytes alone.
    if (headRoom) {
      this.rooms++;
      headRoom.fill(0xff, 0, headRoom.length - data.length);
    }
    const slot = this.parts.length;
    this.parts.push(Buffer.alloc(0));
    this.pending++;
    setTimeout(
      () => {
        this.parts[slot] = Buffer.from(data); // the bytes are taken now, not when write was called
        this.pending--;
        sent?.();
        this.emit("drain");
      },
      Math.floor(this.rng.next() * 4),
    );
    return this.pending < 2;
  }
  async settled(): Promise<Buffer> {
    await waitFor(() => this.pending === 0, { what: "every write to be sent", intervalMs: 2 });
    return Buffer.concat(this.parts);
  }
}

describe("a datanode's read buffers", () => {
  const dirs: string[] = [];
  afterEach(() => {
    for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
  });

  it("lends a buffer again only after it is given back, once, and keeps at most its cap", () => {
    const pool = new ReadBufferPool(64 * KiB, 128 * KiB);
    const a = pool.take();
    const b = pool.take();
    expect(a.buffer).not.toBe(b.buffer);
    pool.give(a.subarray(0, 100)); // a piece's view of its buffer gives the whole buffer back
    pool.give(a); // twice: ignored
    pool.give(Buffer.alloc(64 * KiB)); // never lent: ignored
    expect(pool.freeBuffers).toBe(1);
    const c = pool.take();
    const d = pool.take();
    expect(c.buffer).toBe(a.buffer);
    expect(d.buffer).not.toBe(a.buffer);
    expect(c.length).toBe(64 * KiB);
    for (const x of [b, c, d]) pool.give(x);
    expect(pool.freeBuffers).toBe(2); // the cap: 128 KiB of free buffers
  });

  it("lends each buffer with room before its data, given for a buffer lent now and only for one", () => {
    const pool = new ReadBufferPool(64 * KiB, 128 * KiB, 4118);
    const a = pool.take();
    expect(a.length).toBe(64 * KiB);
    a.fill(7);
    const piece = a.subarray(0, 10 * KiB);
    const room = pool.roomFor(piece)!;
    expect(room.length).toBe(4118 + piece.length);
    expect(room.subarray(4118).equals(piece)).toBe(true);
    room.fill(0xff, 0, 4118);
    expect(a.every((x) => x === 7)).toBe(true);
    expect(pool.roomFor(a.subarray(1))).toBeDefined(); // more room than asked for is still room
    expect(pool.roomFor(Buffer.alloc(10))).toBeUndefined(); // never lent
    expect(pool.roomFor(Buffer.from(a.buffer, 100, 10))).toBeUndefined(); // less than the head room before it
    pool.give(a);
    expect(pool.roomFor(piece)).toBeUndefined(); // given back: the room is the pool's again
    expect(new ReadBufferPool(64 * KiB, 128 * KiB).roomFor(new ReadBufferPool(64 * KiB, 0).take())).toBeUndefined();
  });

  it("never has one buffer lent twice, whatever the order of takes and gives", () => {
    fc.assert(
      fc.property(fc.array(fc.tuple(fc.boolean(), fc.nat(20)), { maxLength: 200 }), (steps) => {
        const pool = new ReadBufferPool(4 * KiB, 16 * KiB);
        const out: Buffer[] = [];
        for (const [take, pick] of steps) {
          if (take || out.length === 0) out.push(pool.take());
          else {
            const [given] = out.splice(pick % out.length, 1);
            pool.give(given!);
            pool.give(given!);
          }
          expect(new Set(out.map((x) => x.buffer)).size).toBe(out.length);
        }
      }),
    );
  });

  it("serves many concurrent reads of many blocks, each exactly its block's bytes, from reused buffers", async () => {
    const dir = mkdtempSync(join(tmpdir(), "harvest-dn-readbuf-"));
    dirs.push(dir);
    const store = await BlockStore.open({ dataDir: dir });
    const blocks: { key: BlockKey; data: Buffer }[] = [];
    for (let i = 1; i <= 6; i++) {
      const key = { blockId: i, genStamp: 1 };
      const data = randomBytes(700 * KiB + 333 * i);
      const w = await store.createRbw(key);
      await w.write(0, data, chunkChecksums(data));
      await w.finalize(data.length);
      blocks.push({ key, data });
    }
    const svc = standaloneTransferService(store);
    const rng = new SeededRng(5);
    const pieceBytes = 64 * KiB;
    const reads = Array.from({ length: 24 }, (_, i) => {
      const b = blocks[i % blocks.length]!;
      const offset = (i % 3) * 512 * 40;
      return { b, offset, sink: new SlowSink(rng) };
    });
    await Promise.all(
      reads.map((r) =>
        svc.serveRead(
          {
            block: { ...r.b.key, numBytes: r.b.data.length },
            offset: r.offset,
            length: 0,
            blockToken: "",
            clientName: "t",
          },
          r.sink,
          new AbortController().signal,
          pieceBytes,
        ),
      ),
    );
    for (const r of reads) expect((await r.sink.settled()).equals(r.b.data.subarray(r.offset))).toBe(true);
    // Every piece came with room for its frame head, which the sink wrote over.
    expect(reads.every((r) => r.sink.rooms === r.sink.parts.length)).toBe(true);
    const pool = svc.readBuffers(pieceBytes);
    expect(pool.reuses).toBeGreaterThan(pool.takes / 2);
  });
});
