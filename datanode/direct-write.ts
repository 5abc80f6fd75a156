/**
 * Direct writes of replica data (`O_DIRECT`): the bytes go from page-aligned memory to the disk, past the page cache.
 *
 * Why. A buffered write makes the kernel find a page-cache page for every 4 KiB and copy into it, then write it back;
 * and on a primary tenant's server the page cache is the primary's memory, which harvested data should not crowd out.
 * On the VM where Harvest was measured, writing 1 GiB buffered and fdatasync'ing it cost 0.65-2.1 s of system time; the
 * same from aligned memory with `O_DIRECT`, 1 MiB at a time with two in flight, cost 0.11-0.17 s and ran as fast or
 * faster (592-1,080 against 238-619 MB/s). In paired puts of 1 GiB the datanodes' CPU halved with replication 3
 * (6.2-7.3 s against 10.3-14.0 s, 155-195 against 102-145 MB/s); with replication 1 it did not change beyond the
 * noise once the page cache reused its pages (README, Benchmarks).
 *
 * How. `O_DIRECT` wants the memory, the file offset and the length aligned to the device's block size. Node has no
 * aligned allocation, but a WebAssembly memory starts on a page: the pool's slabs are page-aligned views into one. A
 * replica's data is copied into slabs (a copy in user space, cheaper than the kernel's) and written from them. Only
 * whole runs of aligned bytes go this way; anything else (a block's short last packet, a client whose packets are not
 * 4 KiB multiples) is written through the ordinary file handle, and the kernel keeps the two views of the file
 * coherent. Durability is unchanged: the final fsync of the file still comes before the last ack.
 *
 * A file system without `O_DIRECT` (ramfs; tmpfs before Linux 6.6), or one that refuses the alignment, answers EINVAL:
 * the store then writes buffered from that moment on and says why (`DirectWrites.disabledReason`), as it does when the
 * memory cannot be had (V8 reserves address space around a WebAssembly memory: the process's virtual size grows by
 * several GiB, its resident size only by the slabs it touches). Stock HDFS writes through the page cache;
 * `directWrites: false` in the datanode's options keeps that baseline.
 */
import { constants } from "node:fs";
import type { FileHandle } from "node:fs/promises";
import { open } from "node:fs/promises";
import { writeAll } from "./positional-write.js";

/** File offsets, lengths and memory of direct writes are multiples of this (covers 512-byte and 4 KiB sectors). */
export const DIRECT_ALIGN = 4096;
/** Bytes of one staging slab: one direct write. */
export const SLAB_BYTES = 1024 * 1024;
/**
 * Slabs a datanode holds: four in flight for each of four replicas written at once; a replica that finds fewer free
 * takes what there is, and one that finds none is written through the page cache.
 */
export const POOL_SLABS = 16;
/**
 * Direct writes of one replica in flight at once. Four against two, with 4 MiB of packets queued per write
 * (data-transfer.ts) against 1 MiB, in paired puts of 1 GiB: replication 1 at 774-823 against 712-785 MB/s,
 * replication 3 at 330-365 against 313-333 (three rounds each); each change alone gave part of it.
 */
const IN_FLIGHT = 4;
const WASM_PAGE = 65536;

/** WebAssembly's memory constructor (Node has it; the project's TypeScript libraries do not declare it). */
const WasmMemory = (
  globalThis as unknown as { WebAssembly: { Memory: new (d: { initial: number }) => { buffer: ArrayBuffer } } }
).WebAssembly.Memory;

/** Page-aligned staging memory shared by a datanode's replica writers (touched, and so resident, only when used). */
export class DirectWrites {
  private readonly free: Uint8Array[] = [];
  private disabled: string | undefined;
  private written = 0;

  constructor(
    slabs = POOL_SLABS,
    private readonly onDisable: (reason: string) => void = () => undefined,
  ) {
    let memory: { buffer: ArrayBuffer };
    try {
      memory = new WasmMemory({ initial: Math.ceil((slabs * SLAB_BYTES) / WASM_PAGE) });
    } catch (err) {
      // Reported when the store's owner asks (`disabledReason`): the constructor runs before anyone listens.
      this.disabled = `no aligned memory: ${(err as Error).message}`;
      return;
    }
    for (let i = 0; i < slabs; i++) this.free.push(new Uint8Array(memory.buffer, i * SLAB_BYTES, SLAB_BYTES));
  }

  /** Why direct writes stopped (undefined while they are on). */
  get disabledReason(): string | undefined {
    return this.disabled;
  }

  /** Bytes written directly so far. */
  get bytesWritten(): number {
    return this.written;
  }

  /** Slabs free now. */
  get freeSlabs(): number {
    return this.free.length;
  }

  /** Opens `path` (created already) for direct writes, or undefined when they are off or the file system refuses. */
  async openFor(path: string): Promise<FileHandle | undefined> {
    if (this.disabled !== undefined) return undefined;
    try {
      return await open(path, constants.O_WRONLY | constants.O_DIRECT);
    } catch (err) {
      if (isRefusal(err)) this.disable(`cannot open with O_DIRECT: ${(err as Error).message}`);
      else throw err;
      return undefined;
    }
  }

  /**
   * Writes `pieces` (`length` bytes, consecutive) at `position` through `fh` when the run is aligned and slabs are
   * free; returns false, having written nothing, when it must go through the ordinary handle instead. A refusal of the
   * alignment turns direct writes off and returns false (part of the run may be written: the caller writes all of it
   * again); any other failure is thrown.
   */
  async write(fh: FileHandle, pieces: readonly Uint8Array[], length: number, position: number): Promise<boolean> {
    if (this.disabled !== undefined || length === 0) return false;
    if (position % DIRECT_ALIGN !== 0 || length % DIRECT_ALIGN !== 0) return false;
    const slabs: Uint8Array[] = [];
    while (slabs.length < IN_FLIGHT && this.free.length > 0) slabs.push(this.free.pop()!);
    if (slabs.length === 0) return false;
    try {
      await this.copyAndWrite(fh, slabs, pieces, length, position);
      this.written += length;
      return true;
    } catch (err) {
      if (!isRefusal(err)) throw err;
      // Part of the run may be on disk already: the caller writes all of it again, buffered, over the same bytes.
      this.disable(`a direct write was refused: ${(err as Error).message}`);
      return false;
    } finally {
      this.free.push(...slabs);
    }
  }

  /**
   * Copies the run into the slabs in turn and writes each, `slabs.length` in flight; a slab is refilled only once its
   * previous write is done. Settles every write it started before it returns or throws, so no slab goes back to the
   * pool (or is rewritten) while the kernel may still be reading it.
   */
  private async copyAndWrite(
    fh: FileHandle,
    slabs: Uint8Array[],
    pieces: readonly Uint8Array[],
    length: number,
    position: number,
  ): Promise<void> {
    const pending: Promise<void>[] = [];
    let failure: unknown;
    try {
      let piece = 0;
      let within = 0;
      for (let i = 0, done = 0; done < length; i++) {
        if (i >= slabs.length) await pending[i - slabs.length];
        const slab = slabs[i % slabs.length]!;
        const n = Math.min(SLAB_BYTES, length - done);
        for (let filled = 0; filled < n;) {
          const p = pieces[piece]!;
          const k = Math.min(p.length - within, n - filled);
          slab.set(within === 0 && k === p.length ? p : p.subarray(within, within + k), filled);
          filled += k;
          within += k;
          if (within === p.length) {
            piece++;
            within = 0;
          }
        }
        const write = writeAll(fh, slab.subarray(0, n), position + done);
        write.catch(() => undefined); // awaited below; marked handled so a second failure is not reported loose
        pending.push(write);
        done += n;
      }
    } catch (err) {
      failure = err;
    }
    const settled = await Promise.allSettled(pending);
    failure ??= settled.find((r): r is PromiseRejectedResult => r.status === "rejected")?.reason;
    if (failure !== undefined) throw failure;
  }

  private disable(reason: string): void {
    if (this.disabled !== undefined) return;
    this.disabled = reason;
    this.onDisable(reason);
  }
}

/** The kernel's answer to an unsupported or misaligned direct write. */
function isRefusal(err: unknown): boolean {
  return (err as NodeJS.ErrnoException | undefined)?.code === "EINVAL";
}
