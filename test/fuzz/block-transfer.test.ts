/** The block transfer protocol's frame reader against random and cut-up input. */
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import {
  dataFrameHead,
  FRAME,
  FrameReader,
  packetLength,
  packetPieces,
  TRANSFER_MAGIC,
} from "../../common/block-transfer.js";
import { chunkChecksums } from "../../common/checksum.js";
import { isHarvestError } from "../../common/errors.js";

/** Splits `bytes` at the given cut points (as a socket might deliver them). */
function cut(bytes: Buffer, points: number[]): Buffer[] {
  const at = [...new Set(points.map((p) => p % (bytes.length + 1)))].sort((a, b) => a - b);
  const out: Buffer[] = [];
  let from = 0;
  for (const p of [...at, bytes.length]) {
    out.push(bytes.subarray(from, p));
    from = p;
  }
  return out;
}

describe("the block transfer frame reader", () => {
  it("reads back every data packet as it was sent, however the bytes are cut", () => {
    const packet = fc.record({
      seq: fc.integer({ min: 0, max: 2 ** 40 }),
      offsetInBlock: fc.integer({ min: 0, max: 2 ** 40 }),
      last: fc.boolean(),
      data: fc.uint8Array({ maxLength: 3000 }).map((a) => Buffer.from(a)),
    });
    fc.assert(
      fc.property(
        fc.array(packet, { maxLength: 5 }),
        fc.array(fc.nat(), { maxLength: 8 }),
        fc.boolean(),
        (packets, points, dataPieces) => {
          const wire = Buffer.concat([
            TRANSFER_MAGIC,
            ...packets.flatMap((p) => {
              const checksums = chunkChecksums(p.data);
              return [dataFrameHead({ ...p, checksums }, p.data.length), p.data];
            }),
          ]);
          // With dataPieces (a datanode's reader) the data comes as slices of the chunks that hold it.
          const reader = new FrameReader({ expectMagic: true, dataPieces });
          const frames = cut(wire, points).flatMap((c) => reader.push(c));
          expect(frames).toHaveLength(packets.length);
          frames.forEach((f, i) => {
            const p = packets[i]!;
            if (f.kind !== FRAME.DATA) throw new Error(`frame ${i} is of kind ${f.kind}`);
            expect(f.packet.seq).toBe(p.seq);
            expect(f.packet.offsetInBlock).toBe(p.offsetInBlock);
            expect(f.packet.last).toBe(p.last);
            expect(f.packet.checksums).toEqual(chunkChecksums(p.data));
            expect(Buffer.concat(packetPieces(f.packet)).equals(p.data)).toBe(true);
            expect(packetLength(f.packet)).toBe(p.data.length);
            if (dataPieces) expect(f.packet.data.length).toBe(0);
          });
        },
      ),
    );
  });

  it("answers any garbage with frames or DATANODE_PROTOCOL_ERROR, never anything else", () => {
    fc.assert(
      fc.property(
        fc.boolean(),
        fc.array(fc.uint8Array({ maxLength: 64 }), { maxLength: 10 }),
        fc.boolean(),
        (withMagic, chunks, dataPieces) => {
          const reader = new FrameReader({ expectMagic: true, dataPieces });
          try {
            if (withMagic) reader.push(Buffer.from(TRANSFER_MAGIC));
            for (const c of chunks) reader.push(Buffer.from(c));
          } catch (err) {
            expect(isHarvestError(err, "DATANODE_PROTOCOL_ERROR")).toBe(true);
          }
        },
      ),
    );
  });
});
