import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { SeededRng } from "../../common/rng.js";
import { orderReplicas } from "../../namenode/policy/read-order.js";

const id = (s: string): string => s;

describe("read order of a block's replicas", () => {
  it("by block: every request gets the same order, whatever order the replicas were listed in", () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 0, max: Number.MAX_SAFE_INTEGER }),
        fc.shuffledSubarray(["dn1", "dn2", "dn3", "dn4", "dn5"], { minLength: 1 }),
        (blockId, listed) => {
          const rng = new SeededRng(7);
          const first = orderReplicas([listed], blockId, "block", id, 1, rng);
          const reversed = orderReplicas([[...listed].reverse()], blockId, "block", id, 1, rng);
          expect(reversed).toEqual(first);
          expect([...first].sort()).toEqual([...listed].sort());
        },
      ),
    );
  });

  it("by block: different blocks start on different datanodes, about evenly", () => {
    const firsts = new Map<string, number>();
    const blocks = 3000;
    for (let b = 1; b <= blocks; b++) {
      const [head] = orderReplicas([["dn1", "dn2", "dn3"]], 1_073_741_824 + b, "block", id, 1, new SeededRng(1));
      firsts.set(head!, (firsts.get(head!) ?? 0) + 1);
    }
    expect([...firsts.keys()].sort()).toEqual(["dn1", "dn2", "dn3"]);
    for (const n of firsts.values()) expect(Math.abs(n / blocks - 1 / 3)).toBeLessThan(0.04);
  });

  it("keeps the groups' rank: a busy or draining group's replicas come after every better one", () => {
    for (const policy of ["block", "request"] as const) {
      for (let b = 0; b < 200; b++) {
        const order = orderReplicas([["a2", "a1"], [], ["c1", "c3", "c2"]], b, policy, id, 1, new SeededRng(b));
        expect(new Set(order.slice(0, 2))).toEqual(new Set(["a1", "a2"]));
        expect(new Set(order.slice(2))).toEqual(new Set(["c1", "c2", "c3"]));
      }
    }
  });

  it("by request: the same block's order changes from request to request", () => {
    const rng = new SeededRng(3);
    const seen = new Set<string>();
    for (let i = 0; i < 50; i++) seen.add(orderReplicas([["dn1", "dn2", "dn3"]], 42, "request", id, 1, rng).join());
    expect(seen.size).toBeGreaterThan(3);
  });

  it("another namespace seed gives other orders to the same block ids", () => {
    let differ = 0;
    for (let b = 0; b < 100; b++) {
      const one = orderReplicas([["dn1", "dn2", "dn3"]], b, "block", id, 1, new SeededRng(0)).join();
      const two = orderReplicas([["dn1", "dn2", "dn3"]], b, "block", id, 2, new SeededRng(0)).join();
      if (one !== two) differ++;
    }
    expect(differ).toBeGreaterThan(50);
  });
});
