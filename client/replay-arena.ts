/**
 * Where a block writer keeps the packets of the block in flight, so that a failover can replay them to a new pipeline.
 *
 * Keeping the caller's buffers themselves (slices of `put`'s 1 MiB reads) held up to a whole block of fresh
 * ArrayBuffers at a time. V8 answers that much new external memory with full mark-compact collections: `bench dfs`
 * profiled 53 of them for one GiB put, and the client spent more CPU in the collector than in its checksums. Copying
 * each packet into a few slabs that are reused block after block costs one memcpy a packet and allocates nothing once
 * the first block is written (measured: the client's CPU for a 1 GiB put fell by about half).
 *
 * Slabs grow from 65 KiB to 4,160 KiB as a stream writes more, so a small file keeps a small slab. A kept copy is valid
 * until `reset`, which the writer calls when every replica has acknowledged the block's last packet.
 *
 * A write stream that completes gives its slabs to its client's `SlabPool`, and the client's next write stream takes
 * them from there. Fresh memory is dear: the first write to each page faults, and on this VM a fault cost about 13 µs
 * (3.5 s a GiB to fill memory first touched, 47 ms to fill it again). A 1 GiB put of 64 MiB blocks wrote a block's
 * worth of fresh slabs, 18,000 faults; taken from the pool, the same put took under 1,000 and the client's CPU fell
 * from 1.71-1.91 s to 1.31-1.40 s (four puts each way, one client).
 */
/**
 * Slabs are this times a power of two: 64 KiB and a sixty-fourth more, the room a packet's frame head takes (a 4-byte
 * CRC per 512-byte chunk, and a header; see `keep`). So a slab of 1 MiB of packets holds them with their heads.
 */
const FIRST_SLAB_BYTES = 65 * 1024;
/** Four 1 MiB packets with their heads' room. */
const MAX_SLAB_BYTES = 64 * FIRST_SLAB_BYTES;

/**
 * A pool keeps at most this many bytes of free slabs: one block of the namenode's default size, 128 MiB, written in
 * 1 MiB packets with their heads' room (34 slabs, 133 MiB).
 */
export const POOL_MAX_FREE_BYTES = 136 * 1024 * 1024;
/** A pool nobody took from for this long lets its slabs go. */
export const POOL_IDLE_MS = 30_000;

/**
 * Free slabs shared by one client's write streams, one after another or at once. Slabs come back only from a stream
 * that completed (every packet acknowledged, so no socket still reads from them); a failed or destroyed stream's slabs
 * are left to the collector. The pool holds at most `maxFreeBytes` and empties itself after `idleMs` without a take.
 */
export class SlabPool {
  private free: Buffer[] = [];
  private freeBytes = 0;
  private idleTimer: NodeJS.Timeout | undefined;

  constructor(
    private readonly maxFreeBytes = POOL_MAX_FREE_BYTES,
    private readonly idleMs = POOL_IDLE_MS,
  ) {}

  /**
   * A slab of at least `minBytes`, preferably `wantBytes`: the smallest free one that size, else the largest free one
   * of at least `minBytes`, else a new one.
   */
  take(minBytes: number, wantBytes: number): Buffer {
    const want = Math.max(wantBytes, minBytes);
    let best = -1;
    for (let i = 0; i < this.free.length; i++) {
      const len = this.free[i]!.length;
      if (len < minBytes) continue;
      const current = best < 0 ? -1 : this.free[best]!.length;
      const better = len >= want ? current < want || len < current : current < want && len > current;
      if (best < 0 || better) best = i;
    }
    if (best < 0) return Buffer.allocUnsafeSlow(want);
    const [slab] = this.free.splice(best, 1);
    this.freeBytes -= slab!.length;
    return slab!;
  }

  /** Takes slabs back, as many as fit under the cap; the idle clock starts again. */
  give(slabs: readonly Buffer[]): void {
    for (const s of slabs) {
      if (this.freeBytes + s.length > this.maxFreeBytes) continue;
      this.free.push(s);
      this.freeBytes += s.length;
    }
    if (this.idleTimer) clearTimeout(this.idleTimer);
    this.idleTimer = this.free.length > 0 ? setTimeout(() => this.clear(), this.idleMs).unref() : undefined;
  }

  /** Lets every free slab go (the client is closing, or nobody wrote for a while). */
  clear(): void {
    if (this.idleTimer) clearTimeout(this.idleTimer);
    this.idleTimer = undefined;
    this.free = [];
    this.freeBytes = 0;
  }

  /** Bytes of free slabs held. */
  get freeSlabBytes(): number {
    return this.freeBytes;
  }
}

export class ReplayArena {
  private slabs: Buffer[] = [];
  /** The slab being filled, and how much of it is used. */
  private slab = 0;
  private used = 0;

  constructor(
    private readonly maxSlabBytes = MAX_SLAB_BYTES,
    private readonly pool?: SlabPool,
  ) {}

  /**
   * A copy of `data` that stays as it is until the next `reset`, after `headRoom` bytes of the same slab that are the
   * caller's (a block writer writes the packet's frame head there: common/block-transfer.ts, `headRoom`). Returns the
   * room and the copy as one buffer; its last `data.length` bytes are the copy.
   */
  keep(data: Uint8Array, headRoom = 0): Buffer {
    const need = headRoom + data.length;
    if (need === 0) return Buffer.alloc(0);
    let s = this.slabs[this.slab];
    if (s && this.used + need > s.length) {
      this.slab++;
      this.used = 0;
      s = this.slabs[this.slab];
    }
    // A slab too small for this packet (a later, larger one is made or found) is skipped, not split across.
    while (s && need > s.length) {
      this.slab++;
      this.used = 0;
      s = this.slabs[this.slab];
    }
    if (!s) {
      // Doubling by multiplication: a 32-bit shift of 64 KiB wraps to 0 after 16 doublings.
      const grown = Math.min(this.maxSlabBytes, FIRST_SLAB_BYTES * 2 ** Math.min(this.slabs.length, 16));
      s = this.pool ? this.pool.take(need, grown) : Buffer.allocUnsafeSlow(Math.max(grown, need));
      this.slabs.push(s);
      this.slab = this.slabs.length - 1;
    }
    s.set(data, this.used + headRoom);
    const out = s.subarray(this.used, this.used + need);
    this.used += need;
    return out;
  }

  /** Forgets every kept copy: the slabs are filled again from the start. */
  reset(): void {
    this.slab = 0;
    this.used = 0;
  }

  /**
   * Gives every slab to the pool and forgets them: only once nothing kept is in use (every packet acknowledged). The
   * arena starts empty again.
   */
  release(): void {
    const slabs = this.slabs;
    this.slabs = [];
    this.reset();
    this.pool?.give(slabs);
  }

  /** Bytes the slabs hold (kept or free). */
  get capacityBytes(): number {
    return this.slabs.reduce((n, s) => n + s.length, 0);
  }

  /** How many slabs the arena holds. */
  get slabCount(): number {
    return this.slabs.length;
  }
}
