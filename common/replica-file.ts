/**
 * A finalized replica's two files as they lie on a datanode's disk, and the reading of a range of them: shared by the
 * datanode's block store (datanode/block-store.ts) and by a client reading a replica of its own server straight from
 * its files (client/short-circuit.ts, HDFS's short-circuit local read).
 *
 * A meta file is a 7-byte header (uint16 BE version, uint8 checksum type = CRC32C, uint32 BE chunk size) followed by
 * the CRC32C of every 512-byte chunk of the data (the last chunk may be shorter) as uint32 BE.
 */
import type { FileHandle } from "node:fs/promises";
import { checksumsMatch, CHUNK_BYTES, firstBadChunk } from "./checksum.js";

const META_VERSION = 1;
const META_TYPE_CRC32C = 2;
/** Bytes of a meta file's header. */
export const META_HEADER_BYTES = 7;

/** The header every meta file starts with. */
export function metaHeader(): Buffer {
  const h = Buffer.alloc(META_HEADER_BYTES);
  h.writeUInt16BE(META_VERSION, 0);
  h.writeUInt8(META_TYPE_CRC32C, 2);
  h.writeUInt32BE(CHUNK_BYTES, 3);
  return h;
}

/** Checksummed chunks in `numBytes` of data. */
export function chunksFor(numBytes: number): number {
  return Math.ceil(numBytes / CHUNK_BYTES);
}

/**
 * Reads `length` bytes at `position` into `into` (a fresh buffer when not given), fewer only at the end of the file;
 * returns the part read.
 */
export async function readFully(
  fh: FileHandle,
  length: number,
  position: number,
  into: Buffer = Buffer.allocUnsafe(length), // every byte is read into, or cut off below
): Promise<Buffer> {
  const buf = into.length === length ? into : into.subarray(0, length);
  let got = 0;
  while (got < length) {
    const { bytesRead } = await fh.read(buf, got, length - got, position + got);
    if (bytesRead === 0) break;
    got += bytesRead;
  }
  return got === length ? buf : buf.subarray(0, got);
}

/** Where a read's pieces go: buffers lent by the reader's owner, who takes each back once it is done with it. */
export interface PieceBuffers {
  readonly bufferBytes: number;
  take(): Buffer;
}

/** A chunk-aligned piece of a replica with the CRC32C of each of its chunks. */
export interface ReplicaPiece {
  offset: number;
  /** The piece's bytes (empty when the range was read without its data: see `ReplicaRange.withData`). */
  data: Buffer;
  /** Bytes in the piece (`data.length` when the data was read). */
  length: number;
  checksums: number[];
}

/** What `readReplicaRange` reads. */
export interface ReplicaRange {
  data: FileHandle;
  meta: FileHandle;
  /** The replica's length. */
  numBytes: number;
  /** Where the range starts (read from the chunk that holds it) and how long it is (0: to the replica's end). */
  offset: number;
  length: number;
  /** Largest piece (a multiple of the chunk size). */
  pieceBytes: number;
  /** Read the next piece while the caller handles this one. @default true */
  readAhead?: boolean;
  /**
   * Read the data of pieces that fit into buffers from here (the caller gives each piece's data back when it is done
   * with it); else every piece is a fresh buffer. @default none
   */
  buffers?: PieceBuffers;
  /**
   * Check each piece against its checksums here (a mismatch is `corrupt`). False: the caller verifies (a client checks
   * every piece it gets, from any transport). @default true
   */
  verify?: boolean;
  /**
   * Read the data. False: only the checksums, for a caller that sends the data from the file itself (a zero-copy
   * read, datanode/zero-copy.ts); the data file's length is checked once, and nothing is verified here. @default true
   */
  withData?: boolean;
  /** The error for a replica that is not what its files should hold (bad header, truncated, bad checksum). */
  corrupt: (reason: string) => Error;
}

const NO_DATA = Buffer.alloc(0);

/**
 * Yields `length` bytes of a replica from `offset` aligned down to a chunk, in chunk-aligned pieces, each piece's data
 * and checksums read together. A reader that stops early leaves no read in flight: the generator's `finally` waits for
 * a read ahead to settle. The caller opens and closes the files.
 */
export async function* readReplicaRange(r: ReplicaRange): AsyncGenerator<ReplicaPiece> {
  const header = await readFully(r.meta, META_HEADER_BYTES, 0);
  if (!header.equals(metaHeader())) throw r.corrupt("bad meta header");
  const piece = Math.max(CHUNK_BYTES, Math.floor(r.pieceBytes / CHUNK_BYTES) * CHUNK_BYTES);
  const start = Math.floor(r.offset / CHUNK_BYTES) * CHUNK_BYTES;
  const end = r.length === 0 ? r.numBytes : Math.min(r.numBytes, r.offset + r.length);
  const withData = r.withData ?? true;
  if (!withData && start < end && (await r.data.stat()).size < r.numBytes) throw r.corrupt("truncated data file");
  const load = (at: number): Promise<[Buffer, Buffer]> => {
    const len = Math.min(piece, end - at);
    // The stored tail may be shorter than a chunk; a read ending mid-chunk still covers the whole chunk.
    const readLen = Math.min(chunksFor(len) * CHUNK_BYTES, r.numBytes - at);
    const into = withData && r.buffers && readLen <= r.buffers.bufferBytes ? r.buffers.take() : undefined;
    return Promise.all([
      withData ? readFully(r.data, readLen, at, into) : Promise.resolve(NO_DATA),
      readFully(r.meta, chunksFor(readLen) * 4, META_HEADER_BYTES + (at / CHUNK_BYTES) * 4),
    ]);
  };
  let ahead: Promise<[Buffer, Buffer]> | undefined = start < end ? load(start) : undefined;
  try {
    for (let at = start; at < end; at += piece) {
      const len = Math.min(piece, end - at);
      const readLen = Math.min(chunksFor(len) * CHUNK_BYTES, r.numBytes - at);
      const [bytes, sums] = await (ahead ?? load(at));
      ahead = (r.readAhead ?? true) && at + piece < end ? load(at + piece) : undefined;
      const n = chunksFor(readLen);
      if ((withData && bytes.length !== readLen) || sums.length !== n * 4) throw r.corrupt(`truncated at offset ${at}`);
      const checksums = new Array<number>(n);
      for (let i = 0; i < n; i++) checksums[i] = sums.readUInt32BE(i * 4);
      // The whole piece in one native CRC; only a piece that fails is walked chunk by chunk to name the chunk.
      if (withData && (r.verify ?? true) && !checksumsMatch(bytes, checksums))
        throw r.corrupt(
          `checksum mismatch in chunk ${at / CHUNK_BYTES + Math.max(0, firstBadChunk(bytes, checksums))}`,
        );
      yield { offset: at, data: bytes, length: readLen, checksums };
    }
  } finally {
    await ahead?.catch(() => undefined);
  }
}
