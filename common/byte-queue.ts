/**
 * Bytes kept as the buffers that arrived, taken from the front: a take within one buffer is a slice of it (no copy),
 * one that spans buffers is joined once. Block writers (DfsClient's packets) and readers (the transfer protocol's
 * frames) use it so that a large buffer is never copied whole for every piece taken out of it.
 */
export class ByteQueue {
  private chunks: Buffer[] = [];
  private bytes = 0;

  /** Bytes queued. */
  get length(): number {
    return this.bytes;
  }

  push(chunk: Buffer): void {
    if (chunk.length === 0) return;
    this.chunks.push(chunk);
    this.bytes += chunk.length;
  }

  /** The big-endian u32 at the front (4 bytes must be queued). */
  peekUInt32BE(): number {
    const first = this.chunks[0]!;
    return first.length >= 4 ? first.readUInt32BE(0) : Buffer.concat(this.chunks, 4).readUInt32BE(0);
  }

  /** The byte at `at` from the front (`at` below `length`). */
  peekByte(at: number): number {
    for (const c of this.chunks) {
      if (at < c.length) return c[at]!;
      at -= c.length;
    }
    throw new RangeError(`no byte at ${at} in a queue of ${this.bytes}`);
  }

  /** Removes the first `n` queued bytes (`n` at most `length`) as slices of the buffers that hold them: no copy. */
  takePieces(n: number): Buffer[] {
    this.bytes -= n;
    const out: Buffer[] = [];
    let left = n;
    while (left > 0) {
      const c = this.chunks[0]!;
      if (c.length <= left) {
        out.push(c);
        this.chunks.shift();
        left -= c.length;
      } else {
        out.push(c.subarray(0, left));
        this.chunks[0] = c.subarray(left);
        left = 0;
      }
    }
    return out;
  }

  /** Removes and returns the first `n` queued bytes (`n` at most `length`). */
  take(n: number): Buffer {
    if (n === 0) return Buffer.alloc(0);
    this.bytes -= n;
    const first = this.chunks[0]!;
    if (first.length >= n) {
      if (first.length === n) this.chunks.shift();
      else this.chunks[0] = first.subarray(n);
      return first.subarray(0, n);
    }
    const out = Buffer.allocUnsafe(n);
    let at = 0;
    while (at < n) {
      const c = this.chunks[0]!;
      const k = Math.min(c.length, n - at);
      c.copy(out, at, 0, k);
      at += k;
      if (k === c.length) this.chunks.shift();
      else this.chunks[0] = c.subarray(k);
    }
    return out;
  }
}
