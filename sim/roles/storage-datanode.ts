/**
 * The datanodes' books in the storage experiment: per server, the blocks it holds a replica of, and its transfer
 * streams (the copies it sends and receives, a fixed number of slots each).
 */
import { HarvestError } from "../../common/errors.js";

/** Per server, a growable list of the blocks with a replica on it (replicas leave a server only all at once). */
export class ServerBlocks {
  private lists: Int32Array[];
  readonly count: Int32Array;
  constructor(servers: number) {
    this.lists = Array.from({ length: servers }, () => new Int32Array(8));
    this.count = new Int32Array(servers);
  }
  push(server: number, block: number): void {
    let list = this.lists[server]!;
    const n = this.count[server]!;
    if (n === list.length) {
      const grown = new Int32Array(list.length * 2);
      grown.set(list);
      this.lists[server] = list = grown;
    }
    list[n] = block;
    this.count[server] = n + 1;
  }
  list(server: number): Int32Array {
    return this.lists[server]!.subarray(0, this.count[server]!);
  }
  clear(server: number): void {
    this.count[server] = 0;
  }
}

/** Takes a free stream slot of `server` for `copy` (INTERNAL when none is free). */
function takeSlot(slots: Int32Array, used: Int32Array, S: number, server: number, copy: number): void {
  for (let k = server * S; k < (server + 1) * S; k++) {
    if (slots[k] !== -1) continue;
    slots[k] = copy;
    used[server]!++;
    return;
  }
  throw new HarvestError("INTERNAL", `server ${server} has no free stream for copy ${copy}`);
}

/** Frees the stream slot `copy` held on `server`. */
function freeSlot(slots: Int32Array, used: Int32Array, S: number, server: number, copy: number): void {
  for (let k = server * S; k < (server + 1) * S; k++) {
    if (slots[k] !== copy) continue;
    slots[k] = -1;
    used[server]!--;
    return;
  }
}

/**
 * The copies in flight between datanodes (re-replication pipelines): a pool reused through a free list, each copy
 * holding one send stream of its source and one receive stream of each target. A copy's serial tells a completion
 * event whether its copy still stands. The simulation decides what a landed copy does to the blocks.
 */
export class StorageTransfers {
  /** Replicas on their way to each server (they take its space already). */
  readonly incoming: Int32Array;
  /** Copy targets that failed (their source or the target reimaged, or the target put out of service). */
  failed = 0;
  /** Copy ids sending from (receiving on) each server, `S` slots per server, -1 free. */
  private readonly outSlots: Int32Array;
  private readonly inSlots: Int32Array;
  private readonly outUsed: Int32Array;
  private readonly inUsed: Int32Array;
  private cap = 0;
  private block: Int32Array = new Int32Array(0);
  private source: Int32Array = new Int32Array(0);
  private serial: Int32Array = new Int32Array(0);
  private targets: Int32Array = new Int32Array(0);
  private left: Uint8Array = new Uint8Array(0);
  /** Per copy: 1 when it was scheduled for a drain (its block had a replica on an out-of-service server). */
  private drain: Uint8Array = new Uint8Array(0);
  private readonly free: number[] = [];

  /** `servers` servers with `S` send and `S` receive streams each; copies of up to `R` targets. */
  constructor(
    servers: number,
    private readonly R: number,
    private readonly S: number,
  ) {
    this.incoming = new Int32Array(servers);
    this.outSlots = new Int32Array(servers * S).fill(-1);
    this.inSlots = new Int32Array(servers * S).fill(-1);
    this.outUsed = new Int32Array(servers);
    this.inUsed = new Int32Array(servers);
    this.grow(64);
  }

  /** Starts a copy of block `b` from `source` to `targets`; returns its id (its serial is `serialOf`). */
  start(b: number, source: number, targets: readonly number[], forDrain: boolean): number {
    if (this.free.length === 0) this.grow(this.cap * 2);
    const c = this.free.pop()!;
    this.block[c] = b;
    this.source[c] = source;
    this.left[c] = targets.length;
    this.drain[c] = forDrain ? 1 : 0;
    takeSlot(this.outSlots, this.outUsed, this.S, source, c);
    for (let i = 0; i < this.R; i++) {
      const t = i < targets.length ? targets[i]! : -1;
      this.targets[c * this.R + i] = t;
      if (t < 0) continue;
      takeSlot(this.inSlots, this.inUsed, this.S, t, c);
      this.incoming[t]!++;
    }
    return c;
  }

  /** Copy `c`'s serial now (bumped when it ends: a completion event for an older serial is stale). */
  serialOf(c: number): number {
    return this.serial[c]!;
  }

  /** Copy `c`'s block, and whether it was a drain's. */
  blockOf(c: number): number {
    return this.block[c]!;
  }
  forDrain(c: number): boolean {
    return this.drain[c] === 1;
  }

  /** Copy `c` landed: each target still standing is released and handed to `landed`, then the copy ends. */
  land(c: number, landed: (target: number) => void): void {
    for (let i = 0; i < this.R; i++) {
      const t = this.targets[c * this.R + i]!;
      if (t < 0) continue;
      this.release(c, i, t);
      landed(t);
    }
    this.end(c);
  }

  /** Server `s` was reimaged: copies from it fail whole. */
  cancelFrom(s: number): void {
    for (let k = s * this.S; k < (s + 1) * this.S; k++) {
      const c = this.outSlots[k]!;
      if (c >= 0) this.cancel(c);
    }
  }

  /** Copies to server `s` lose that target (reimaged, or out of service); each goes on to its other targets. */
  dropTo(s: number): void {
    for (let k = s * this.S; k < (s + 1) * this.S; k++) {
      const c = this.inSlots[k]!;
      if (c >= 0) this.dropTarget(c, s);
    }
  }

  private grow(cap: number): void {
    const R = this.R;
    const grow = (a: Int32Array, width: number): Int32Array => {
      const g = new Int32Array(cap * width);
      g.set(a);
      return g;
    };
    this.block = grow(this.block, 1);
    this.source = grow(this.source, 1);
    this.serial = grow(this.serial, 1);
    this.targets = grow(this.targets, R);
    const left = new Uint8Array(cap);
    left.set(this.left);
    this.left = left;
    const drain = new Uint8Array(cap);
    drain.set(this.drain);
    this.drain = drain;
    for (let c = cap - 1; c >= this.cap; c--) this.free.push(c);
    this.cap = cap;
  }

  /** The source was reimaged: every target of the copy fails (the monitor learns of it from the reimage). */
  private cancel(c: number): void {
    for (let i = 0; i < this.R; i++) {
      const t = this.targets[c * this.R + i]!;
      if (t < 0) continue;
      this.release(c, i, t);
      this.failed++;
    }
    this.end(c);
  }

  /** Target `t` of copy `c` is lost: the copy goes on to its other targets, if any. */
  private dropTarget(c: number, t: number): void {
    for (let i = 0; i < this.R; i++) {
      if (this.targets[c * this.R + i] !== t) continue;
      this.release(c, i, t);
      this.failed++;
      this.left[c]!--;
    }
    if (this.left[c] === 0) this.end(c);
  }

  private release(c: number, i: number, t: number): void {
    this.targets[c * this.R + i] = -1;
    freeSlot(this.inSlots, this.inUsed, this.S, t, c);
    this.incoming[t]!--;
  }

  private end(c: number): void {
    freeSlot(this.outSlots, this.outUsed, this.S, this.source[c]!, c);
    this.serial[c]!++;
    this.free.push(c);
  }
}
