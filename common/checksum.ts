/**
 * Block data checksums: a CRC32C per 512-byte chunk (HDFS's default), computed and checked in bulk.
 *
 * - `chunkChecksums` computes every chunk's CRC of a packet in one call into Harvest's native routine
 *   (native/checksums.c): the CPU's CRC32 instruction, three chunks at a time. `npm run bench -- checksums` measured
 *   182 ms a GiB against 537 for one @node-rs/crc32 call per chunk (packets cycling through 64 MiB: the memory's rate,
 *   as one call over each whole packet, 191); on a packet in the CPU's cache, 52 against 676. In paired puts of
 *   1 GiB the client spent 0.9-1.1 s of CPU with it and 1.3-1.9 s without (replication 1, plaintext). A build without
 *   the routine (no C compiler; scripts/build-native.mjs) makes the per-chunk calls, as does
 *   `HARVEST_NATIVE_CHECKSUMS=0`.
 * - `checksumsMatch` (the pipeline's last datanode, every reader) checks a packet in one call into the same routine,
 *   which computes its chunks' CRCs across the pieces the packet came in and compares them: 65 ms a GiB against 246
 *   for the fold below on a packet in cache, 197 against 228 from memory. Without the routine, one
 *   @node-rs/crc32 CRC of the whole packet is held against the fold of its chunk CRCs (CRC32C is linear: zlib's
 *   crc32_combine; four table lookups a chunk). Either way only a failing packet is walked chunk by chunk to name the
 *   bad chunk, so the per-chunk granularity on disk stays.
 */
import { crc32c } from "@node-rs/crc32";
import { loadNativeAddon } from "./paths.js";

/** Harvest's native routine (native/checksums.c). */
interface NativeChecksums {
  /** Writes the CRC32C of each `chunkBytes` chunk of `data` to `out` and returns how many. */
  chunks(data: Uint8Array, chunkBytes: number, out: Uint32Array, portable?: boolean): number;
  /**
   * The index of the first chunk of `pieces` whose CRC is not the next of `sums[0, count)`, -1 when all match and
   * there are exactly as many.
   */
  verify(
    pieces: Uint8Array | readonly Uint8Array[],
    chunkBytes: number,
    sums: Uint32Array,
    count: number,
    portable?: boolean,
  ): number;
  /** Whether the CPU's CRC32 instruction does the work (else a table walk). */
  hardware(): boolean;
}

const native =
  process.env["HARVEST_NATIVE_CHECKSUMS"] === "0" ? undefined : loadNativeAddon<NativeChecksums>("harvest_checksums");

/**
 * How chunk checksums are computed in this process: "native" (one call per packet, the CPU's CRC instruction),
 * "native-table" (one call per packet, a table walk: no CRC instruction), or "per-chunk" (one @node-rs/crc32 call per
 * chunk: the routine was not built, or HARVEST_NATIVE_CHECKSUMS=0).
 */
export function checksumMode(): "native" | "native-table" | "per-chunk" {
  if (!native) return "per-chunk";
  return native.hardware() ? "native" : "native-table";
}

/** Bytes per checksummed chunk. */
export const CHUNK_BYTES = 512;

const POLY = 0x82f63b78; // CRC32C (Castagnoli), reflected.

/** The byte table of the reflected CRC32C register (for the combine tables below). */
const TABLE = new Uint32Array(256);
for (let b = 0; b < 256; b++) {
  let c = b;
  for (let k = 0; k < 8; k++) c = c & 1 ? (c >>> 1) ^ POLY : c >>> 1;
  TABLE[b] = c >>> 0;
}

/**
 * The CRC32C of `data[start, end)` (one native call; hardware CRC where the CPU has it). The range goes to the call as
 * a plain Uint8Array view: `Buffer#subarray` makes a Buffer through its constructor, and that cost more than the CRC of
 * a 512-byte chunk (measured: 2.6 against 2.15 GiB/s of chunk checksums).
 */
function crcRange(data: Uint8Array, start: number, end: number): number {
  return crc32c(new Uint8Array(data.buffer, data.byteOffset + start, end - start)) >>> 0;
}

/** The CRC32C of every `chunkBytes` chunk of `data` (the last may be shorter). */
export function chunkChecksums(data: Uint8Array, chunkBytes = CHUNK_BYTES): number[] {
  return native ? nativeChecksums(native, data, chunkBytes, false) : perChunkChecksums(data, chunkBytes);
}

/** One call into the routine; its CRCs land in a scratch array and are copied out (as numbers for protobuf). */
function nativeChecksums(routine: NativeChecksums, data: Uint8Array, chunkBytes: number, portable: boolean): number[] {
  const n = Math.ceil(data.length / chunkBytes);
  const crcs = scratch(n);
  routine.chunks(data, chunkBytes, crcs, portable);
  const out = new Array<number>(n);
  for (let i = 0; i < n; i++) out[i] = crcs[i]!;
  return out;
}

/** `chunkChecksums` with one @node-rs/crc32 call per chunk (the path without the native routine, and its baseline). */
export function perChunkChecksums(data: Uint8Array, chunkBytes = CHUNK_BYTES): number[] {
  const out = new Array<number>(Math.ceil(data.length / chunkBytes));
  for (let i = 0, at = 0; at < data.length; i++, at += chunkBytes)
    out[i] = crcRange(data, at, Math.min(at + chunkBytes, data.length));
  return out;
}

/**
 * Chunk checksums by a given way (for tests and `npm run bench -- checksums`): "native" is the routine as this CPU
 * runs it, "native-table" its table walk even where the instruction is there, "per-chunk" one @node-rs/crc32 call per
 * chunk. Undefined when the routine is not built.
 */
export function chunkChecksumsBy(
  mode: "native" | "native-table" | "per-chunk",
  data: Uint8Array,
  chunkBytes = CHUNK_BYTES,
): number[] | undefined {
  if (mode === "per-chunk") return perChunkChecksums(data, chunkBytes);
  return native ? nativeChecksums(native, data, chunkBytes, mode === "native-table") : undefined;
}

/** Where the native routine writes a packet's CRCs before they are copied out (grown as packets need). */
let scratchCrcs = new Uint32Array(2048);
function scratch(n: number): Uint32Array {
  if (scratchCrcs.length < n) scratchCrcs = new Uint32Array(n);
  return scratchCrcs;
}

/** The CRC32C of one chunk (or any range) of `data`. */
export function chunkChecksum(data: Uint8Array, start = 0, end = data.length): number {
  return crcRange(data, start, end);
}

/**
 * The linear map "append `len` zero bytes" on a raw CRC register, as four byte tables: applied to a register x it is
 * T0[x & 0xff] ^ T1[(x >>> 8) & 0xff] ^ T2[(x >>> 16) & 0xff] ^ T3[x >>> 24].
 */
function shiftTables(len: number): Uint32Array {
  const basis = new Uint32Array(32);
  for (let k = 0; k < 32; k++) {
    let x = (1 << k) >>> 0;
    for (let n = 0; n < len; n++) x = (x >>> 8) ^ TABLE[x & 0xff]!;
    basis[k] = x >>> 0;
  }
  const out = new Uint32Array(4 * 256);
  for (let byte = 0; byte < 4; byte++)
    for (let v = 0; v < 256; v++) {
      let x = 0;
      for (let bit = 0; bit < 8; bit++) if (v & (1 << bit)) x ^= basis[byte * 8 + bit]!;
      out[byte * 256 + v] = x >>> 0;
    }
  return out;
}

const shiftCache = new Map<number, Uint32Array>();

function shifted(crc: number, len: number): number {
  let t = shiftCache.get(len);
  if (!t) {
    t = shiftTables(len);
    // Full chunks share one table; a packet's short last chunk has its own (a few sizes in practice).
    if (shiftCache.size < 64) shiftCache.set(len, t);
  }
  return (
    (t[crc & 0xff]! ^ t[256 + ((crc >>> 8) & 0xff)]! ^ t[512 + ((crc >>> 16) & 0xff)]! ^ t[768 + (crc >>> 24)]!) >>> 0
  );
}

/** crc(A || B) from crc(A), crc(B) and the length of B (zlib's crc32_combine, for CRC32C). */
export function combineChecksums(crcA: number, crcB: number, lengthB: number): number {
  return (shifted(crcA, lengthB) ^ crcB) >>> 0;
}

/**
 * True when `checksums` are the CRC32Cs of `data`'s `chunkBytes` chunks. `data` may come as consecutive pieces (a
 * packet as the socket's chunks hold it; a chunk may span two): nothing is joined. With the native routine, one call
 * computes the chunks' CRCs (three at a time) and compares them; without it, one @node-rs/crc32 CRC of the whole range
 * is held against the fold of the chunk CRCs (`foldedChecksumsMatch`).
 */
export function checksumsMatch(
  data: Uint8Array | readonly Uint8Array[],
  checksums: ArrayLike<number>,
  chunkBytes = CHUNK_BYTES,
): boolean {
  const bad = nativeBadChunk(data, checksums, chunkBytes);
  return bad === undefined ? foldedChecksumsMatch(data, checksums, chunkBytes) : bad === -1;
}

/** `checksumsMatch` by one @node-rs/crc32 CRC of the whole range against the fold of the chunk CRCs. */
export function foldedChecksumsMatch(
  data: Uint8Array | readonly Uint8Array[],
  checksums: ArrayLike<number>,
  chunkBytes = CHUNK_BYTES,
): boolean {
  const pieces = data instanceof Uint8Array ? [data] : data;
  let length = 0;
  for (const p of pieces) length += p.length;
  const chunks = Math.ceil(length / chunkBytes);
  if (checksums.length !== chunks) return false;
  if (chunks === 0) return true;
  let folded = checksums[0]! >>> 0;
  for (let i = 1; i < chunks; i++) {
    const len = Math.min(chunkBytes, length - i * chunkBytes);
    folded = combineChecksums(folded, checksums[i]! >>> 0, len);
  }
  let crc = 0;
  for (const p of pieces) crc = crc32c(p, crc);
  return crc >>> 0 === folded;
}

/**
 * The index of the first chunk of `data` (one buffer or consecutive pieces) whose CRC32C is not its checksum (-1:
 * none; a missing checksum counts, and extra checksums name the chunk after the last).
 */
export function firstBadChunk(
  data: Uint8Array | readonly Uint8Array[],
  checksums: ArrayLike<number>,
  chunkBytes = CHUNK_BYTES,
): number {
  const bad = nativeBadChunk(data, checksums, chunkBytes);
  if (bad !== undefined) return bad;
  return firstMismatch(chunkChecksums(data instanceof Uint8Array ? data : Buffer.concat(data), chunkBytes), checksums);
}

/** The first index where `actual` and `expected` CRCs differ (see firstBadChunk), or -1. */
function firstMismatch(actual: readonly number[], expected: ArrayLike<number>): number {
  for (let i = 0; i < actual.length; i++) {
    const sum = expected[i];
    if (sum === undefined || actual[i] !== sum >>> 0) return i;
  }
  return expected.length > actual.length ? actual.length : -1;
}

/** Pieces the native check takes in one call (native/checksums.c); a packet from TLS comes in about 65. */
const NATIVE_MAX_PIECES = 1024;

/** The expected CRCs as the native check reads them (grown as packets need). */
let scratchSums = new Uint32Array(2048);

/** `firstBadChunk` by the native routine; undefined when it is not built or `data` has too many pieces for it. */
function nativeBadChunk(
  data: Uint8Array | readonly Uint8Array[],
  checksums: ArrayLike<number>,
  chunkBytes: number,
  portable = false,
): number | undefined {
  if (!native || (!(data instanceof Uint8Array) && data.length > NATIVE_MAX_PIECES)) return undefined;
  const n = checksums.length;
  if (scratchSums.length < n) scratchSums = new Uint32Array(n);
  const sums = scratchSums;
  for (let i = 0; i < n; i++) sums[i] = checksums[i]! >>> 0;
  return native.verify(data, chunkBytes, sums, n, portable);
}

/**
 * `firstBadChunk` by a given way (for tests and the bench): the native check as this CPU runs it, its table walk, or
 * the per-chunk oracle. Undefined when the routine is not built.
 */
export function firstBadChunkBy(
  mode: "native" | "native-table" | "per-chunk",
  data: Uint8Array | readonly Uint8Array[],
  checksums: ArrayLike<number>,
  chunkBytes = CHUNK_BYTES,
): number | undefined {
  if (mode !== "per-chunk") return nativeBadChunk(data, checksums, chunkBytes, mode === "native-table");
  return firstMismatch(
    perChunkChecksums(data instanceof Uint8Array ? data : Buffer.concat(data), chunkBytes),
    checksums,
  );
}
