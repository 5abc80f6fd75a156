/**
 * The buffers a datanode reads replica data into for the reads it serves, lent out per piece and taken back once the
 * piece's bytes have left for the reader (the socket's write callback), so that a read's memory is reused instead of
 * left for the garbage collector.
 *
 * Why: every piece used to be a fresh 512 KiB allocation outside V8's heap. V8 collects such buffers only once tens
 * of MiB of them have piled up since its last collection, so a datanode serving 16 readers at once grew by 50-60 MiB
 * of dead pieces (measured here: 155 MiB idle, 204-215 MiB at the peak with 16 readers of one replica; see issue 17's
 * note for the figures with the pool).
 *
 * A buffer is lent once and taken back once: `give` ignores a buffer it did not lend or already has back, so a
 * callback that fires twice can never hand one buffer to two reads (which would send one read's bytes to another).
 * A buffer never given back (a read cut short) is simply collected.
 *
 * Each buffer starts with `headRoom` bytes before the part lent for data, free for the frame head the piece goes out
 * with (common/block-transfer.ts, `dataFrameInRoom`): a TLS connection then encrypts head and data as one buffer
 * instead of joining them into a new one first.
 */
export class ReadBufferPool {
  private readonly free: ArrayBuffer[] = [];
  private readonly lent = new WeakSet<ArrayBuffer>();
  private readonly maxFree: number;
  /** Buffers lent, and how many of them came from the free list. */
  takes = 0;
  reuses = 0;

  /**
   * @param bufferBytes size of every buffer (the read's piece size)
   * @param maxFreeBytes free buffers kept at most (more given back are dropped), in bytes
   * @param headRoom bytes before each buffer's data, free for a frame head (`roomFor`)
   */
  constructor(
    readonly bufferBytes: number,
    maxFreeBytes: number,
    readonly headRoom = 0,
  ) {
    if (!(Number.isSafeInteger(bufferBytes) && bufferBytes > 0)) throw new RangeError("bufferBytes must be > 0");
    if (!(Number.isSafeInteger(headRoom) && headRoom >= 0)) throw new RangeError("headRoom must be >= 0");
    this.maxFree = Math.max(0, Math.floor(maxFreeBytes / (bufferBytes + headRoom)));
  }

  /** Free buffers held now. */
  get freeBuffers(): number {
    return this.free.length;
  }

  /** A buffer of `bufferBytes` (its contents are whatever a previous read left: read into it before use). */
  take(): Buffer {
    this.takes++;
    let ab = this.free.pop();
    if (ab) this.reuses++;
    else ab = Buffer.allocUnsafeSlow(this.headRoom + this.bufferBytes).buffer as ArrayBuffer;
    this.lent.add(ab);
    return Buffer.from(ab, this.headRoom, this.bufferBytes);
  }

  /**
   * For `view`, data in a buffer lent now: the same memory from the start of its head room to the end of `view`, for a
   * frame head to be written just before the data. Undefined when `view` is in no buffer lent now, or has less room.
   */
  roomFor(view: Uint8Array): Buffer | undefined {
    const ab = view.buffer as ArrayBuffer;
    if (this.headRoom === 0 || !this.lent.has(ab) || view.byteOffset < this.headRoom) return undefined;
    return Buffer.from(ab, 0, view.byteOffset + view.length);
  }

  /** Takes back a buffer from `take` (or any view of one); anything else is ignored. */
  give(view: Uint8Array): void {
    const ab = view.buffer as ArrayBuffer;
    if (!this.lent.delete(ab)) return;
    if (this.free.length < this.maxFree) this.free.push(ab);
  }
}
