/**
 * The write stream's replay arena (client/replay-arena.ts): what a failover replays is exactly what was sent, even
 * when the caller reuses its buffer (as `put` does with its read buffers), block after block the arena reuses its
 * slabs instead of growing, and a client's pool hands a completed stream's slabs to the next one.
 */
import { randomBytes } from "node:crypto";
import { describe, expect, it } from "vitest";
import { ReplayArena, SlabPool } from "../../client/replay-arena.js";
import { resolveNameNodeOptions } from "../../namenode/options.js";

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
    expect(arena.capacityBytes).toBeLessThanOrEqual(65 * 1024);
  });

  it("keeps room before each copy that is the caller's: writing it changes no other packet", () => {
    const arena = new ReplayArena(1024 * 1024);
    const sent = [100, 512, 65_536, 300_000, 1, 700_000].map((n) => randomBytes(n));
    const room = 8214;
    const kept = sent.map((b) => arena.keep(b, room));
    kept.forEach((k, i) => {
      expect(k.length).toBe(room + sent[i]!.length);
      expect(k.subarray(room).equals(sent[i]!)).toBe(true);
    });
    for (const k of kept) k.fill(0xab, 0, room);
    kept.forEach((k, i) => expect(k.subarray(room).equals(sent[i]!)).toBe(true));
  });

  it("holds a 64 MiB block of 1 MiB packets, each with its frame head's room, in slabs of four packets", () => {
    const arena = new ReplayArena();
    const packet = randomBytes(1024 * 1024);
    const room = 8214; // a 1 MiB packet's frame head: 2,048 CRCs and the headers
    for (let b = 0; b < 2; b++) {
      for (let at = 0; at < 64 * 1024 * 1024; at += packet.length) arena.keep(packet, room);
      arena.reset();
    }
    // 65 KiB to 2,080 KiB slabs first (the smaller ones skipped for a 1 MiB packet), then 4,160 KiB ones of 4 each.
    expect(arena.slabCount).toBeLessThanOrEqual(22);
    expect(arena.capacityBytes).toBeLessThan(70 * 1024 * 1024);
  });

  it("grows its slabs to 4 MiB: a 64 MiB block of 256 KiB packets fits in a few dozen slabs", () => {
    const arena = new ReplayArena();
    const packet = randomBytes(256 * 1024);
    for (let at = 0; at < 64 * 1024 * 1024; at += packet.length) arena.keep(packet);
    // 256 KiB, 256 KiB, 256 KiB, 512 KiB, 1 MiB, 2 MiB, then 4 MiB slabs: 22 in all.
    expect(arena.slabCount).toBeLessThanOrEqual(24);
    expect(arena.capacityBytes).toBeLessThan(68 * 1024 * 1024);
  });
});

describe("SlabPool", () => {
  it("gives a released arena's slabs to the next arena, which then allocates nothing and keeps bytes intact", () => {
    const pool = new SlabPool();
    const first = new ReplayArena(undefined, pool);
    const packets = Array.from({ length: 40 }, () => randomBytes(256 * 1024));
    for (const p of packets) first.keep(p);
    const slabs = first.capacityBytes;
    first.release();
    expect(first.capacityBytes).toBe(0);
    expect(pool.freeSlabBytes).toBe(slabs);

    const second = new ReplayArena(undefined, pool);
    const others = packets.map(() => randomBytes(256 * 1024));
    const kept = others.map((p) => second.keep(p));
    expect(pool.freeSlabBytes).toBe(0);
    expect(second.capacityBytes).toBe(slabs);
    kept.forEach((k, i) => expect(k.equals(others[i]!)).toBe(true));
  });

  it("hands the smallest free slab that is large enough, else the largest that fits the packet, else a new one", () => {
    const pool = new SlabPool();
    const [small, mid, large] = [64 * 1024, 512 * 1024, 4 * 1024 * 1024].map((n) => Buffer.alloc(n));
    pool.give([large!, small!, mid!]);
    expect(pool.take(1000, 256 * 1024)).toBe(mid);
    expect(pool.take(1000, 8 * 1024 * 1024)).toBe(large);
    expect(pool.take(100 * 1024, 128 * 1024)).not.toBe(small);
    expect(pool.take(1000, 64 * 1024)).toBe(small);
    expect(pool.freeSlabBytes).toBe(0);
  });

  it("takes back every slab of a block of the namenode's default size, and the next stream allocates none", () => {
    // 1 MiB packets, each with its frame head's room (the client's: dfs-client.ts).
    const pool = new SlabPool();
    const first = new ReplayArena(undefined, pool);
    const packet = randomBytes(1024 * 1024);
    const room = 8214;
    const block = resolveNameNodeOptions({ dataDir: "unused" }).defaultBlockSizeBytes;
    for (let at = 0; at < block; at += packet.length) first.keep(packet, room);
    const slabs = first.capacityBytes;
    first.release();
    expect(pool.freeSlabBytes).toBe(slabs);

    const second = new ReplayArena(undefined, pool);
    const other = randomBytes(1024 * 1024);
    let last: Buffer = Buffer.alloc(0);
    for (let at = 0; at < block; at += other.length) last = second.keep(other, room);
    expect(pool.freeSlabBytes).toBe(0);
    expect(second.capacityBytes).toBe(slabs);
    expect(last.subarray(room).equals(other)).toBe(true);
  });

  it("keeps at most its cap, and lets its slabs go after a while without a take", async () => {
    const pool = new SlabPool(1024 * 1024, 30);
    pool.give([Buffer.alloc(512 * 1024), Buffer.alloc(512 * 1024), Buffer.alloc(512 * 1024)]);
    expect(pool.freeSlabBytes).toBe(1024 * 1024);
    await new Promise((r) => setTimeout(r, 120));
    expect(pool.freeSlabBytes).toBe(0);
  });
});
