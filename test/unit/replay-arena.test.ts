/**
 * The write stream's replay arena (client/replay-arena.ts): what a failover replays is exactly what was sent, even
 * when the caller reuses its buffer (as `put` does with its read buffers), and block after block the arena reuses its
 * slabs instead of growing.
 */
import { randomBytes } from "node:crypto";
import { describe, expect, it } from "vitest";
import { ReplayArena } from "../../client/replay-arena.js";

describe("ReplayArena", () => {
  it("keeps copies that survive the caller overwriting its buffer", () => {
    const arena = new ReplayArena();
    const buf = Buffer.alloc(64 * 1024);
    const sent: Buffer[] = [];
    const kept: Buffer[] = [];
    for (let i = 0; i < 40; i++) {
      randomBytes(buf.length).copy(buf);
      sent.push(Buffer.from(buf));
      kept.push(arena.keep(buf));
    }
    buf.fill(0);
    expect(Buffer.concat(kept).equals(Buffer.concat(sent))).toBe(true);
  });

  it("keeps packets of any size, up to larger than a slab, without one overwriting another", () => {
    const arena = new ReplayArena(256 * 1024);
    const sizes = [1, 511, 512, 65_536, 200_000, 300_000, 7, 262_144, 100_000, 0, 65_536];
    const sent = sizes.map((n) => randomBytes(n));
    const kept = sent.map((b) => arena.keep(b));
    kept.forEach((k, i) => expect(k.equals(sent[i]!)).toBe(true));
  });

  it("reuses its slabs block after block: the capacity stays that of one block", () => {
    const arena = new ReplayArena(1024 * 1024);
    const packet = randomBytes(64 * 1024);
    const block = 8 * 1024 * 1024;
    let capacityAfterFirst = 0;
    for (let b = 0; b < 5; b++) {
      const kept: Buffer[] = [];
      for (let at = 0; at < block; at += packet.length) kept.push(arena.keep(packet));
      expect(kept.every((k) => k.equals(packet))).toBe(true);
      if (b === 0) capacityAfterFirst = arena.capacityBytes;
      expect(arena.capacityBytes).toBe(capacityAfterFirst);
      arena.reset();
    }
    expect(capacityAfterFirst).toBeGreaterThanOrEqual(block);
    expect(capacityAfterFirst).toBeLessThan(block + 2 * 1024 * 1024);
  });

  it("keeps a small file's block in a small slab", () => {
    const arena = new ReplayArena();
    arena.keep(randomBytes(1000));
    expect(arena.capacityBytes).toBeLessThanOrEqual(64 * 1024);
  });
});
