/** A seeded pseudo-random source: every random choice in a policy takes one so that runs are reproducible. */

/** A random source returning floats in [0, 1). */
export interface Rng {
  next(): number;
}

/** Shuffles `items` in place (Fisher-Yates from the end, one draw per position) and returns them. */
export function shuffle<T>(items: T[], rng: Rng): T[] {
  for (let i = items.length - 1; i > 0; i--) {
    const j = Math.floor(rng.next() * (i + 1));
    const v = items[i] as T;
    items[i] = items[j] as T;
    items[j] = v;
  }
  return items;
}

/** mulberry32: small, fast and good enough for placement decisions and workload generation. */
export class SeededRng implements Rng {
  private state: number;
  constructor(seed: number) {
    this.state = seed >>> 0;
  }
  next(): number {
    this.state = (this.state + 0x6d2b79f5) >>> 0;
    let t = this.state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  }
  /** An integer in [0, n). */
  int(n: number): number {
    return Math.floor(this.next() * n);
  }
  /** A normally distributed value (Box-Muller). */
  normal(mean = 0, sd = 1): number {
    const u = Math.max(this.next(), 1e-12);
    const v = this.next();
    return mean + sd * Math.sqrt(-2 * Math.log(u)) * Math.cos(2 * Math.PI * v);
  }
}
