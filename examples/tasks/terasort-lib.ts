/**
 * TeraSort's record format and the pure steps of the terasort tasks (terasort-map, terasort-reduce) and of
 * `npm run bench -- sort`: a seeded record generator, the total-order partitioner, the map's sort, the reduce's k-way
 * merge, the line encoding the GNU sort baseline sorts, and the check of a sorted output.
 *
 * A record is 100 bytes: a 10-byte binary key, then a 90-byte value (TeraSort's, as gensort writes it). Keys compare as
 * unsigned bytes. The value is printable ASCII, gensort-like: the record number as 32 hexadecimal digits, then 58
 * filler letters; it never holds a newline, so a record fits on one line for GNU sort (`sortLine`).
 *
 * Nothing here loads more than Node's Buffer: the tasks, the bench and the unit test share it.
 */

/** Bytes of a record. */
export const RECORD_BYTES = 100;
/** Bytes of its key, first in the record. */
export const KEY_BYTES = 10;
/** Bytes of its value, after the key. */
export const VALUE_BYTES = RECORD_BYTES - KEY_BYTES;

/** 32-bit words of a record, for copying records as Int32Array words. */
const RECORD_WORDS = RECORD_BYTES / 4;
/** Where the record number's hexadecimal digits start in a record (after the key). */
const NUMBER_AT = KEY_BYTES;
/** Hexadecimal digits of the record number. */
const NUMBER_DIGITS = 32;
/** Filler letters after the record number. */
const FILLER_BYTES = VALUE_BYTES - NUMBER_DIGITS;

const TWO_32 = 2 ** 32;

/** The number of whole records in `buf`; a length that is not a multiple of RECORD_BYTES is an Error. */
export function recordCount(buf: Uint8Array): number {
  if (buf.length % RECORD_BYTES !== 0)
    throw new Error(`${buf.length} bytes is not a whole number of ${RECORD_BYTES}-byte records`);
  return buf.length / RECORD_BYTES;
}

// ---------------------------------------------------------------------------------------------------------------------
// The generator

/** murmur3's 32-bit finalizer: a bijection on 32-bit words that mixes every input bit into every output bit. */
function mix32(x: number): number {
  x ^= x >>> 16;
  x = Math.imul(x, 0x85ebca6b);
  x ^= x >>> 13;
  x = Math.imul(x, 0xc2b2ae35);
  x ^= x >>> 16;
  return x >>> 0;
}

const HEX_DIGITS = Buffer.from("0123456789ABCDEF", "latin1");
/** "ABC...Z" four times: a record's filler is 58 letters of it, starting at its record number modulo 26. */
const FILLER_SOURCE = Buffer.from("ABCDEFGHIJKLMNOPQRSTUVWXYZ".repeat(4), "latin1");

/**
 * Writes record `n` of the data set `seed` at `at` in `into`. The generator is counter-based (a seeded hash of the
 * record number, as Random123's generators are), so any range of records can be generated alone: the bench writes the
 * maps' input files and the GNU sort file from the same records, and the check regenerates each record it reads.
 */
export function writeRecord(seed: number, n: number, into: Uint8Array, at: number): void {
  if (!(Number.isSafeInteger(n) && n >= 0)) throw new Error(`record number ${n} is not a whole number >= 0`);
  const lo = n >>> 0;
  const hi = Math.floor(n / TWO_32);
  const s = mix32((seed ^ 0x9e3779b9) >>> 0);
  const h = mix32(mix32((lo ^ s) >>> 0) ^ Math.imul(hi + 1, 0x27d4eb2d));
  // Ten key bytes from three words of the stream (h + 1, h + 2, h + 3, each mixed).
  const w0 = mix32((h + 0x6a09e667) >>> 0);
  const w1 = mix32((h + 0xbb67ae85) >>> 0);
  const w2 = mix32((h + 0x3c6ef372) >>> 0);
  into[at] = w0 >>> 24;
  into[at + 1] = (w0 >>> 16) & 0xff;
  into[at + 2] = (w0 >>> 8) & 0xff;
  into[at + 3] = w0 & 0xff;
  into[at + 4] = w1 >>> 24;
  into[at + 5] = (w1 >>> 16) & 0xff;
  into[at + 6] = (w1 >>> 8) & 0xff;
  into[at + 7] = w1 & 0xff;
  into[at + 8] = w2 >>> 24;
  into[at + 9] = (w2 >>> 16) & 0xff;
  // The record number in 32 hexadecimal digits (the first 16 are zero: n < 2^53).
  let p = at + NUMBER_AT;
  for (let i = 0; i < 16; i++) into[p++] = 0x30;
  for (let shift = 28; shift >= 0; shift -= 4) into[p++] = HEX_DIGITS[(hi >>> shift) & 0xf]!;
  for (let shift = 28; shift >= 0; shift -= 4) into[p++] = HEX_DIGITS[(lo >>> shift) & 0xf]!;
  const from = n % 26;
  for (let i = 0; i < FILLER_BYTES; i++) into[p + i] = FILLER_SOURCE[from + i]!;
}

/** Records `first` .. `first + count - 1` of the data set `seed`, in record-number order. */
export function generateRecords(seed: number, first: number, count: number): Buffer {
  const out = Buffer.allocUnsafe(count * RECORD_BYTES);
  for (let i = 0; i < count; i++) writeRecord(seed, first + i, out, i * RECORD_BYTES);
  return out;
}

/** The record number a generated record carries in its value; NaN when those bytes are not hexadecimal digits. */
export function recordNumberOf(buf: Uint8Array, at: number): number {
  let hi = 0;
  let lo = 0;
  const p = at + NUMBER_AT;
  for (let i = 0; i < 16; i++) if (buf[p + i] !== 0x30) return Number.NaN;
  for (let i = 16; i < 24; i++) hi = hi * 16 + hexValue(buf[p + i]!);
  for (let i = 24; i < 32; i++) lo = lo * 16 + hexValue(buf[p + i]!);
  return hi * TWO_32 + lo;
}

function hexValue(c: number): number {
  if (c >= 0x30 && c <= 0x39) return c - 0x30;
  if (c >= 0x41 && c <= 0x46) return c - 0x41 + 10;
  return Number.NaN;
}

/**
 * How `records` records are split over `files` input files, one per map: file i holds records `starts[i]` ..
 * `starts[i + 1] - 1`, the first files one record more when they do not divide evenly.
 */
export function splitRecords(records: number, files: number): number[] {
  const starts = [0];
  const base = Math.floor(records / files);
  const extra = records % files;
  for (let i = 0; i < files; i++) starts.push(starts[i]! + base + (i < extra ? 1 : 0));
  return starts;
}

// ---------------------------------------------------------------------------------------------------------------------
// Keys, the partitioner

/** The key's first 4 bytes as an unsigned number. */
function prefix32(buf: Uint8Array, at: number): number {
  return ((buf[at]! << 24) | (buf[at + 1]! << 16) | (buf[at + 2]! << 8) | buf[at + 3]!) >>> 0;
}

/** The key's first 6 bytes as a number (exact: < 2^48). */
function prefix48(buf: Uint8Array, at: number): number {
  return prefix32(buf, at) * 65536 + ((buf[at + 4]! << 8) | buf[at + 5]!);
}

/** The key's last 4 bytes as an unsigned number. */
function suffix32(buf: Uint8Array, at: number): number {
  return prefix32(buf, at + 6);
}

/** Compares the keys of the records at `a` in `x` and at `b` in `y` as unsigned bytes: < 0, 0 or > 0. */
export function compareKeys(x: Uint8Array, a: number, y: Uint8Array, b: number): number {
  for (let i = 0; i < KEY_BYTES; i++) {
    const d = x[a + i]! - y[b + i]!;
    if (d !== 0) return d;
  }
  return 0;
}

/**
 * The reducer of the record at `at`: reducer r of `reduces` gets the keys whose first 4 bytes fall in the r-th of
 * `reduces` equal ranges of their 2^32 values, so the reducers' outputs, in reducer order, are in total order.
 * TeraSort samples the input to choose these split points; the generator's keys are uniform, so equal ranges split
 * them evenly and no sampling is needed (keys from another source could load the reducers unevenly, never wrongly).
 */
export function partitionOf(buf: Uint8Array, at: number, reduces: number): number {
  // Exact: the product is below 2^52 for any reducer count below 2^20, and the division is by a power of two.
  return Math.floor((prefix32(buf, at) * reduces) / TWO_32);
}

/**
 * Where each reducer's records start in `sorted` (sorted by key): `reduces + 1` record indices, the last the record
 * count, so reducer r's records are `bounds[r]` .. `bounds[r + 1] - 1`.
 */
export function partitionBounds(sorted: Uint8Array, reduces: number): number[] {
  const n = recordCount(sorted);
  const bounds = [0];
  for (let r = 1; r < reduces; r++) {
    // The first record whose reducer is r or later (binary search: the reducers of sorted records never decrease).
    let lo = bounds[r - 1]!;
    let hi = n;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if (partitionOf(sorted, mid * RECORD_BYTES, reduces) < r) lo = mid + 1;
      else hi = mid;
    }
    bounds.push(lo);
  }
  bounds.push(n);
  return bounds;
}

// ---------------------------------------------------------------------------------------------------------------------
// The map's sort

/** `buf` itself when its bytes start on a 4-byte boundary (so it has an Int32Array view), else an aligned copy. */
export function aligned(buf: Buffer): Buffer {
  if (buf.byteOffset % 4 === 0) return buf;
  const copy = Buffer.allocUnsafeSlow(buf.length);
  buf.copy(copy);
  return copy;
}

/** The Int32Array over an aligned buffer's whole records. */
function wordsOf(buf: Buffer): Int32Array {
  return new Int32Array(buf.buffer, buf.byteOffset, (buf.length - (buf.length % RECORD_BYTES)) / 4);
}

/** Bits of the bucket number (the keys' top bits) the sort scatters records by: about 1,000 records a bucket. */
function bucketBitsFor(n: number): number {
  return Math.max(0, Math.min(16, Math.floor(Math.log2(Math.max(1, n) / 1024))));
}

/**
 * `input`'s records sorted by key (records with equal keys keep their order), into `into` (a buffer of the same length,
 * which may be `input` itself: the sort is done reading it after its first pass) or else a new buffer.
 *
 * JavaScript's costs decide the method: a comparator per comparison (Buffer.compare on subarrays) is slow, and so is
 * gathering records in sorted order from all over a large buffer (each record a cache and TLB miss). So: one pass
 * scatters the records into buckets by the key's top bits (reads in order, a few hundred write positions); then each
 * bucket, small enough for the CPU's caches, is sorted as numbers with the typed array's native sort, each number the
 * key's next bits above the record's index in the bucket, and gathered into place. Records whose numbers tie on the
 * key bits (rare with random keys) are put in order by comparing their whole keys.
 */
export function sortRecords(unaligned: Buffer, into?: Buffer): Buffer {
  const input = aligned(unaligned);
  const n = recordCount(input);
  if (into !== undefined && into.length !== input.length)
    throw new Error(`cannot sort ${input.length} bytes into a buffer of ${into.length}`);
  // An unaligned `into` gets the records through an aligned copy (the word copies need 4-byte alignment).
  const out = into !== undefined && into.byteOffset % 4 === 0 ? into : Buffer.allocUnsafeSlow(input.length);
  if (n === 0) return into ?? out;
  const bits = bucketBitsFor(n);
  const buckets = 2 ** bits;
  const starts = new Int32Array(buckets + 1);
  for (let i = 0; i < n; i++) starts[bucketOf(input, i * RECORD_BYTES, bits) + 1]! += 1;
  let largest = 0;
  for (let b = 0; b < buckets; b++) {
    largest = Math.max(largest, starts[b + 1]!);
    starts[b + 1]! += starts[b]!;
  }
  // Pass 1: scatter into `scattered` by bucket, in input order within a bucket.
  const scattered = Buffer.allocUnsafeSlow(input.length);
  const src = wordsOf(input);
  const mid = wordsOf(scattered);
  const dst = wordsOf(out);
  const next = starts.slice(0, buckets);
  for (let i = 0; i < n; i++) {
    const b = bucketOf(input, i * RECORD_BYTES, bits);
    copyRecord(src, i, mid, next[b]!++);
  }
  // Pass 2: sort each bucket by number: key bits below the bucket's, then the index (its place in the bucket).
  const indexBits = Math.max(1, Math.ceil(Math.log2(largest + 1)));
  const scale = 2 ** indexBits;
  const keyBits = Math.min(48 - bits, 53 - indexBits);
  const dropped = 2 ** (48 - bits - keyBits);
  const below = 2 ** (48 - bits);
  const numbers = new Float64Array(largest);
  for (let b = 0; b < buckets; b++) {
    const first = starts[b]!;
    const m = starts[b + 1]! - first;
    if (m === 0) continue;
    const keys = numbers.subarray(0, m);
    for (let i = 0; i < m; i++) {
      const p48 = prefix48(scattered, (first + i) * RECORD_BYTES);
      // (No `%` on these numbers: on doubles it is a call to fmod, ten times the cost of a floor.)
      const rest = p48 - Math.floor(p48 / below) * below;
      keys[i] = Math.floor(rest / dropped) * scale + i;
    }
    keys.sort();
    let j = 0;
    let top = Math.floor(keys[0]! / scale);
    while (j < m) {
      // A run of equal key bits: usually one record.
      let end = j + 1;
      let next = end < m ? Math.floor(keys[end]! / scale) : -1;
      if (next !== top) {
        copyRecord(mid, first + keys[j]! - top * scale, dst, first + j);
      } else {
        while (next === top) next = ++end < m ? Math.floor(keys[end]! / scale) : -1;
        const tied: number[] = [];
        for (let k = j; k < end; k++) tied.push(keys[k]! - top * scale);
        tied.sort(
          (x, y) => compareKeys(scattered, (first + x) * RECORD_BYTES, scattered, (first + y) * RECORD_BYTES) || x - y,
        );
        tied.forEach((i, k) => copyRecord(mid, first + i, dst, first + j + k));
      }
      j = end;
      top = next;
    }
  }
  if (into !== undefined && into !== out) {
    out.copy(into);
    return into;
  }
  return out;
}

/** The key's top `bits` bits (bits <= 16). */
function bucketOf(buf: Uint8Array, at: number, bits: number): number {
  return bits === 0 ? 0 : ((buf[at]! << 8) | buf[at + 1]!) >>> (16 - bits);
}

/** Copies record `from` of `src` to record `to` of `dst` (Int32Array views: 25 word moves beat a native call). */
function copyRecord(src: Int32Array, from: number, dst: Int32Array, to: number): void {
  const s = from * RECORD_WORDS;
  const d = to * RECORD_WORDS;
  for (let w = 0; w < RECORD_WORDS; w++) dst[d + w] = src[s + w]!;
}

// ---------------------------------------------------------------------------------------------------------------------
// The reduce's merge

/** How `mergeRuns` hands out what it merged. */
export interface MergeOptions {
  /** Records per yielded buffer (the last may hold fewer). @default 40000 */
  chunkRecords?: number;
  /**
   * 0: every yielded buffer is new, the consumer may keep it. n > 0: the merge cycles through n buffers, so the
   * consumer must be done with a buffer before it asks for the n-th one after it (no fresh memory to fault in for
   * every chunk). @default 0
   */
  reuse?: number;
  /**
   * Let the inputs go as they are merged: the merge empties the runs' arrays given to it (taking their buffers) and
   * drops each buffer once it has merged its last record, so a reducer's memory holds about its runs' size, not its
   * runs and its output at once. @default false
   */
  release?: boolean;
}

/** The first slab a RunCollector fills: about 64 KiB of whole records. */
const FIRST_SLAB_RECORDS = 655;
/** Its largest slabs: about 4 MB of whole records. */
const MAX_SLAB_RECORDS = 40_000;

/**
 * Collects one run's bytes, received in pieces cut anywhere (a stream's chunks, at any byte offset), into slabs of
 * whole records on 4-byte boundaries, ready for `mergeRuns` without a copy there: one copy of every byte as it comes
 * in, and the received pieces are garbage at once (young, so the next scavenge takes them). Slabs grow from 64 KiB to
 * 4 MB, so a short run keeps a short slab.
 */
export class RunCollector {
  private readonly full: Buffer[] = [];
  private slab: Buffer | undefined;
  private at = 0;
  /** Bytes received so far. */
  bytes = 0;

  /** Copies `piece` in. */
  push(piece: Uint8Array): void {
    let from = 0;
    while (from < piece.length) {
      if (this.slab === undefined || this.at === this.slab.length) {
        if (this.slab !== undefined) this.full.push(this.slab);
        const records = Math.min(MAX_SLAB_RECORDS, FIRST_SLAB_RECORDS * 2 ** this.full.length);
        this.slab = Buffer.allocUnsafeSlow(records * RECORD_BYTES);
        this.at = 0;
      }
      const n = Math.min(piece.length - from, this.slab.length - this.at);
      this.slab.set(piece.subarray(from, from + n), this.at);
      this.at += n;
      from += n;
    }
    this.bytes += piece.length;
  }

  /** The run's slabs (the last one cut to what it holds); throws when the bytes are not a whole number of records. */
  finish(): Buffer[] {
    if (this.bytes % RECORD_BYTES !== 0)
      throw new Error(`${this.bytes} bytes is not a whole number of ${RECORD_BYTES}-byte records`);
    const slabs = this.full.slice();
    if (this.slab !== undefined && this.at > 0) slabs.push(this.slab.subarray(0, this.at));
    return slabs;
  }
}

/**
 * A run's bytes, received as pieces cut anywhere (a stream's chunks), as buffers of whole records without joining
 * the pieces: each piece's whole records stay where they are, and a record cut between two pieces is copied into a
 * buffer of its own. Throws when the bytes are not a whole number of records.
 */
export function wholeRecordSegments(pieces: readonly Buffer[]): Buffer[] {
  const out: Buffer[] = [];
  let carry: Buffer | undefined;
  let carried = 0;
  let bytes = 0;
  for (const piece of pieces) {
    bytes += piece.length;
    let at = 0;
    if (carry !== undefined) {
      const take = Math.min(RECORD_BYTES - carried, piece.length);
      piece.copy(carry, carried, 0, take);
      carried += take;
      at = take;
      if (carried < RECORD_BYTES) continue;
      out.push(carry);
      carry = undefined;
      carried = 0;
    }
    const whole = Math.floor((piece.length - at) / RECORD_BYTES) * RECORD_BYTES;
    if (whole > 0) out.push(piece.subarray(at, at + whole));
    if (at + whole < piece.length) {
      carry = Buffer.allocUnsafe(RECORD_BYTES);
      carried = piece.copy(carry, 0, at + whole);
    }
  }
  if (carry !== undefined) throw new Error(`${bytes} bytes is not a whole number of ${RECORD_BYTES}-byte records`);
  return out;
}

/**
 * Merges sorted runs of records into key order (a k-way merge over a binary heap of the runs' heads, keyed by the
 * key's first 6 bytes and last 4 as two numbers; equal keys come out in run order), yielding buffers of records. A run
 * is one buffer, or its bytes in pieces cut anywhere (as they were received: `wholeRecordSegments`), so that no run
 * has to be joined into one buffer first.
 */
export function* mergeRuns(runs: readonly (Buffer | Buffer[])[], options: MergeOptions = {}): Generator<Buffer> {
  const chunkRecords = options.chunkRecords ?? 40_000;
  const release = options.release ?? false;
  const ring: Buffer[] = [];
  let chunks = 0;
  // Each run as buffers of whole records, each on a 4-byte boundary (the word copies need it: a piece received
  // elsewhere is copied only if it is not).
  const segments = runs.map((run) =>
    (Buffer.isBuffer(run) ? [run] : wholeRecordSegments(run)).filter((b) => b.length > 0).map((b) => aligned(b)),
  );
  if (release) for (const run of runs) if (!Buffer.isBuffer(run)) run.length = 0;
  const k = segments.length;
  const EMPTY = Buffer.alloc(0);
  /** Each run's current buffer, its words, the index of that buffer, and the next record and the records in it. */
  const current = segments.map((s) => s[0] ?? EMPTY);
  const words = current.map(wordsOf);
  const segment = new Int32Array(k);
  const pos = new Float64Array(k);
  const end = current.map(recordCount);
  const hi = new Float64Array(k);
  const lo = new Float64Array(k);
  const heap = new Int32Array(k);
  let size = 0;
  let left = 0;
  const load = (r: number): void => {
    const at = pos[r]! * RECORD_BYTES;
    hi[r] = prefix48(current[r]!, at);
    lo[r] = suffix32(current[r]!, at);
  };
  /** Moves run r to its next record; false when it has none left. */
  const advance = (r: number): boolean => {
    if (++pos[r]! < end[r]!) return true;
    if (release) segments[r]![segment[r]!] = EMPTY;
    const next = segments[r]![++segment[r]!];
    if (next === undefined) return false;
    current[r] = next;
    words[r] = wordsOf(next);
    pos[r] = 0;
    end[r] = recordCount(next);
    return true;
  };
  const less = (a: number, b: number): boolean =>
    hi[a]! < hi[b]! || (hi[a] === hi[b] && (lo[a]! < lo[b]! || (lo[a] === lo[b] && a < b)));
  const siftDown = (from: number): void => {
    const x = heap[from]!;
    let i = from;
    for (;;) {
      let c = 2 * i + 1;
      if (c >= size) break;
      if (c + 1 < size && less(heap[c + 1]!, heap[c]!)) c++;
      if (!less(heap[c]!, x)) break;
      heap[i] = heap[c]!;
      i = c;
    }
    heap[i] = x;
  };
  for (let r = 0; r < k; r++) {
    for (const b of segments[r]!) left += recordCount(b);
    if (end[r]! > 0) {
      load(r);
      heap[size++] = r;
    }
  }
  for (let i = (size >> 1) - 1; i >= 0; i--) siftDown(i);
  while (left > 0) {
    const count = Math.min(chunkRecords, left);
    const reuse = options.reuse ?? 0;
    let chunk: Buffer;
    if (reuse > 0) {
      ring[chunks % reuse] ??= Buffer.allocUnsafeSlow(chunkRecords * RECORD_BYTES);
      chunk = ring[chunks % reuse]!.subarray(0, count * RECORD_BYTES);
    } else chunk = Buffer.allocUnsafeSlow(count * RECORD_BYTES);
    chunks++;
    const out = wordsOf(chunk);
    for (let o = 0; o < count; o++) {
      const r = heap[0]!;
      copyRecord(words[r]!, pos[r]!, out, o);
      if (advance(r)) load(r);
      else heap[0] = heap[--size]!;
      if (size > 1) siftDown(0);
    }
    left -= count;
    yield chunk;
  }
}

/** The name of reducer `index`'s output file: `part-00003`, so that a listing shows them in reducer order. */
export function outputFileName(index: number): string {
  return `part-${String(index).padStart(5, "0")}`;
}

// ---------------------------------------------------------------------------------------------------------------------
// GNU sort's lines

/** Bytes of a record's line for GNU sort: the key in 20 hexadecimal digits, the value as it is, a newline. */
export const LINE_BYTES = 2 * KEY_BYTES + VALUE_BYTES + 1;

const LOWER_HEX = Buffer.from("0123456789abcdef", "latin1");

/**
 * The records of `records` as lines that sort (`LC_ALL=C sort`, bytewise) in their key order: the key in 20
 * hexadecimal digits (so no key byte is a newline and digits order as bytes do), then the value unchanged (printable
 * ASCII, never a newline), then "\n". GNU sort thus sorts 111 bytes a record where Harvest sorts 100.
 */
export function sortLines(records: Uint8Array): Buffer {
  const n = recordCount(records);
  const out = Buffer.allocUnsafe(n * LINE_BYTES);
  for (let i = 0; i < n; i++) {
    const r = i * RECORD_BYTES;
    let p = i * LINE_BYTES;
    for (let j = 0; j < KEY_BYTES; j++) {
      const byte = records[r + j]!;
      out[p++] = LOWER_HEX[byte >>> 4]!;
      out[p++] = LOWER_HEX[byte & 0xf]!;
    }
    out.set(records.subarray(r + KEY_BYTES, r + RECORD_BYTES), p);
    out[p + VALUE_BYTES] = 0x0a;
  }
  return out;
}

/** The record number of a line `sortLines` wrote, starting at `at`. */
export function lineRecordNumber(buf: Uint8Array, at: number): number {
  // The value starts after the 20 key digits; recordNumberOf reads it as it would read a record whose key is 10 bytes.
  return recordNumberOf(buf, at + KEY_BYTES);
}

// ---------------------------------------------------------------------------------------------------------------------
// The check of an output

/** What `SortedOutputCheck` found. */
export interface SortCheckResult {
  /** Records read. */
  records: number;
  /** Records whose key is smaller than the one before. */
  outOfOrder: number;
  /** Records that are no record of the data set (bytes differ from the generated record of their number). */
  corrupt: number;
  /** Record numbers seen more than once (each extra copy counts). */
  duplicates: number;
  /** Record numbers of the data set never seen. */
  missing: number;
  /** Bytes after the last whole record. */
  trailingBytes: number;
  /** No record out of order, corrupt, duplicated or missing, and no trailing bytes. */
  ok: boolean;
}

/**
 * Checks, as its bytes stream in (in any pieces), that an output holds every record of the data set `seed` of
 * `expected` records exactly once and in key order: each record is regenerated from the number in its value and
 * compared byte for byte, and a bitmap of the numbers seen finds duplicates and missing records.
 */
export class SortedOutputCheck {
  private readonly seen: Uint8Array;
  private readonly expectedRecord = Buffer.alloc(RECORD_BYTES);
  private readonly carry = Buffer.alloc(RECORD_BYTES);
  private carried = 0;
  /** The key of the record before, as its first 6 and last 4 bytes (-1: none yet). */
  private lastHi = -1;
  private lastLo = -1;
  private records = 0;
  private outOfOrder = 0;
  private corrupt = 0;
  private duplicates = 0;

  /**
   * `order`, when given, gets the record numbers in the order they came (room for `expected` of them; numbers must fit
   * in 32 bits), to compare with another sort's order.
   */
  constructor(
    private readonly seed: number,
    private readonly expected: number,
    private readonly order?: Uint32Array,
  ) {
    this.seen = new Uint8Array(expected);
  }

  /** Takes the next bytes of the output. */
  push(bytes: Buffer): void {
    let at = 0;
    if (this.carried > 0) {
      const take = Math.min(RECORD_BYTES - this.carried, bytes.length);
      bytes.copy(this.carry, this.carried, 0, take);
      this.carried += take;
      at = take;
      if (this.carried < RECORD_BYTES) return;
      this.record(this.carry, 0);
      this.carried = 0;
    }
    for (; at + RECORD_BYTES <= bytes.length; at += RECORD_BYTES) this.record(bytes, at);
    if (at < bytes.length) {
      bytes.copy(this.carry, 0, at);
      this.carried = bytes.length - at;
    }
  }

  /** The verdict once every byte has been pushed. */
  finish(): SortCheckResult {
    let missing = 0;
    for (let i = 0; i < this.expected; i++) if (this.seen[i] === 0) missing++;
    const r = {
      records: this.records,
      outOfOrder: this.outOfOrder,
      corrupt: this.corrupt,
      duplicates: this.duplicates,
      missing,
      trailingBytes: this.carried,
    };
    return { ...r, ok: r.outOfOrder + r.corrupt + r.duplicates + r.missing + r.trailingBytes === 0 };
  }

  private record(buf: Buffer, at: number): void {
    this.records++;
    const hi = prefix48(buf, at);
    const lo = suffix32(buf, at);
    if (hi < this.lastHi || (hi === this.lastHi && lo < this.lastLo)) this.outOfOrder++;
    this.lastHi = hi;
    this.lastLo = lo;
    const n = recordNumberOf(buf, at);
    if (this.order && this.records <= this.order.length) this.order[this.records - 1] = n;
    if (!(n < this.expected)) {
      this.corrupt++;
      return;
    }
    writeRecord(this.seed, n, this.expectedRecord, 0);
    if (this.expectedRecord.compare(buf, at, at + RECORD_BYTES) !== 0) {
      this.corrupt++;
      return;
    }
    if (this.seen[n] === 1) this.duplicates++;
    this.seen[n] = 1;
  }
}

// ---------------------------------------------------------------------------------------------------------------------
// The tasks' timings

/** One phase of a task: when it ran (wall-clock ms since the epoch) and the CPU its process spent meanwhile. */
export interface Phase {
  startMs: number;
  endMs: number;
  cpuMs: number;
}

/** What a terasort task reports of itself (its stats line), all times wall-clock ms since the epoch. */
export interface TaskStats {
  vertex: string;
  taskIndex: number;
  /** HARVEST_CONTAINER_ID: matches the job report's container, whose start the node manager recorded. */
  containerId: string;
  nodeId: string;
  /** When Node started the process (performance.timeOrigin). */
  processStartMs: number;
  /** When the task's program began to run (its modules loaded). */
  mainStartMs: number;
  /** CPU the process had spent by then (Node's start and the program's modules). */
  startupCpuMs: number;
  /** When it had written everything. */
  endMs: number;
  /** Its phases, in order. */
  phases: Record<string, Phase>;
  /** Bytes it read (its input file; for a reducer, what it fetched) and wrote. */
  bytesIn: number;
  bytesOut: number;
  /** CPU time of its process until `endMs`, user + system (process.cpuUsage). */
  cpuMs: number;
  /** The most memory its process had resident until `endMs`, in MiB (process.resourceUsage's maxRSS). */
  maxRssMiB?: number;
}

/** The most memory this process has had resident so far, in MiB. */
export function maxRssMiB(): number {
  return process.resourceUsage().maxRSS / 1024;
}

/**
 * This task's stats line, now that it has written everything: the container and node from its environment, the
 * process's start, CPU and peak memory from Node.
 */
export function finalStatsLine(
  task: { vertex: string; taskIndex: number },
  started: { mainStartMs: number; startupCpuMs: number },
  clock: PhaseClock,
  bytes: { bytesIn: number; bytesOut: number },
): string {
  return statsLine({
    vertex: task.vertex,
    taskIndex: task.taskIndex,
    containerId: process.env["HARVEST_CONTAINER_ID"] ?? "",
    nodeId: process.env["HARVEST_NODE_ID"] ?? "",
    processStartMs: performance.timeOrigin,
    ...started,
    endMs: Date.now(),
    phases: clock.phases,
    ...bytes,
    cpuMs: cpuMsSoFar(),
    maxRssMiB: maxRssMiB(),
  });
}

/** Times a task's phases one after the other: each `next(name)` ends the phase before. */
export class PhaseClock {
  readonly phases: Record<string, Phase> = {};
  private current: { name: string; startMs: number; cpuMs: number } | undefined;

  /** Ends the running phase (if any) and starts `name`. */
  next(name: string): void {
    this.end();
    this.current = { name, startMs: Date.now(), cpuMs: cpuMsSoFar() };
  }

  /** Ends the running phase. */
  end(): void {
    const c = this.current;
    if (!c) return;
    this.phases[c.name] = { startMs: c.startMs, endMs: Date.now(), cpuMs: cpuMsSoFar() - c.cpuMs };
    this.current = undefined;
  }
}

/** What starts a task's stats line on its stdout; the rest of the line is the TaskStats as JSON. */
export const STATS_LINE_PREFIX = "terasort-stats ";

/** This process's CPU time so far, user + system, in ms. */
export function cpuMsSoFar(): number {
  const u = process.cpuUsage();
  return (u.user + u.system) / 1000;
}

/**
 * The stats line a task prints last on its stdout (which its node manager keeps in the container's log, where
 * `JobClient.containerLog` reads it): nothing written to the file system, so the figures cost the job nothing.
 */
export function statsLine(stats: TaskStats): string {
  return `${STATS_LINE_PREFIX}${JSON.stringify(stats)}\n`;
}

/** The stats in a container's stdout, or undefined when it holds no stats line (a job manager's, or cut short). */
export function parseStatsLine(stdout: string): TaskStats | undefined {
  const line = stdout.split("\n").find((l) => l.startsWith(STATS_LINE_PREFIX));
  return line === undefined ? undefined : (JSON.parse(line.slice(STATS_LINE_PREFIX.length)) as TaskStats);
}
