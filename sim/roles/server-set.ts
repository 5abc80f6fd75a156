/**
 * A set of server indices with O(1) add, remove, membership and uniform pick: members packed in `[0, size)` of an
 * array, each member's position beside it. Removal swaps the last member into the hole, so the order (and hence a
 * seeded pick) depends only on the sequence of changes: the simulations stay deterministic.
 */
export class ServerSet {
  private readonly members: Int32Array;
  private readonly pos: Int32Array;
  private count = 0;

  constructor(servers: number) {
    this.members = new Int32Array(servers);
    this.pos = new Int32Array(servers).fill(-1);
  }

  /** Members now. */
  get size(): number {
    return this.count;
  }

  /** The member at position `i` (0 <= i < size). */
  at(i: number): number {
    return this.members[i]!;
  }

  has(s: number): boolean {
    return this.pos[s]! >= 0;
  }

  /** Adds `s` when `inside`, removes it otherwise (either is a no-op when already so). */
  set(s: number, inside: boolean): void {
    const pos = this.pos[s]!;
    if (inside) {
      if (pos < 0) {
        this.members[this.count] = s;
        this.pos[s] = this.count++;
      }
    } else if (pos >= 0) {
      const last = this.members[--this.count]!;
      this.members[pos] = last;
      this.pos[last] = pos;
      this.pos[s] = -1;
    }
  }
}
