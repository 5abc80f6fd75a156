/**
 * Where a block writer keeps the packets of the block in flight, so that a failover can replay them to a new pipeline.
 *
 * Keeping the caller's buffers themselves (slices of `put`'s 1 MiB reads) held up to a whole block of fresh
 * ArrayBuffers at a time. V8 answers that much new external memory with full mark-compact collections: `bench dfs`
 * profiled 53 of them for one GiB put, and the client spent more CPU in the collector than in its checksums. Copying
 * each packet into a few slabs that are reused block after block costs one memcpy a packet and allocates nothing once
 * the first block is written (measured: the client's CPU for a 1 GiB put fell by about half).
 *
 * Slabs grow from 64 KiB to 4 MiB as a stream writes more, so a small file keeps a small slab. A kept copy is valid
 * until `reset`, which the writer calls when every replica has acknowledged the block's last packet.
 */
const FIRST_SLAB_BYTES = 64 * 1024;
const MAX_SLAB_BYTES = 4 * 1024 * 1024;

export class ReplayArena {
  private readonly slabs: Buffer[] = [];
  /** The slab being filled, and how much of it is used. */
  private slab = 0;
  private used = 0;

  constructor(private readonly maxSlabBytes = MAX_SLAB_BYTES) {}

  /** A copy of `data` that stays as it is until the next `reset`. */
  keep(data: Uint8Array): Buffer {
    if (data.length === 0) return Buffer.alloc(0);
    let s = this.slabs[this.slab];
    if (s && this.used + data.length > s.length) {
      this.slab++;
      this.used = 0;
      s = this.slabs[this.slab];
    }
    // A slab too small for this packet (a later, larger one is made or found) is skipped, not split across.
    while (s && data.length > s.length) {
      this.slab++;
      this.used = 0;
      s = this.slabs[this.slab];
    }
    if (!s) {
      const grown = Math.min(this.maxSlabBytes, FIRST_SLAB_BYTES << Math.min(this.slabs.length, 16));
      s = Buffer.allocUnsafeSlow(Math.max(grown, data.length));
      this.slabs.push(s);
      this.slab = this.slabs.length - 1;
    }
    s.set(data, this.used);
    const out = s.subarray(this.used, this.used + data.length);
    this.used += data.length;
    return out;
  }

  /** Forgets every kept copy: the slabs are filled again from the start. */
  reset(): void {
    this.slab = 0;
    this.used = 0;
  }

  /** Bytes the slabs hold (kept or free). */
  get capacityBytes(): number {
    return this.slabs.reduce((n, s) => n + s.length, 0);
  }
}
