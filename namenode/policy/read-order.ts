/**
 * The order in which readers try a block's replicas among replicas of equal rank (same busy/stale group, same admin
 * state): pure, shared by the namenode's GetBlockLocations and any simulation of reads.
 *
 * - "block" (HDFS's default, `dfs.namenode.randomize-block-locations-per-block` false): a pseudo-random order seeded
 *   by the block id, the same for every reader and every request. Repeated reads of a block land on the same replica,
 *   whose pages the server's page cache already holds, while different blocks start on different datanodes, so the
 *   load still spreads. On servers owned by primary tenants it also keeps one replica of a hot block in a primary's
 *   page cache instead of all of them. Measured with `npm run bench -- dfs` (replication 3, the timed read after a
 *   warm-up read): see the closing note of issue 17.
 * - "request" (the option set true): a fresh random order on every request, from the caller's random source.
 */
import type { Rng } from "../../common/rng.js";
import { SeededRng, shuffle } from "../../common/rng.js";

export type ReadOrderPolicy = "block" | "request";

/**
 * The seed of a block's order: the block id mixed with the namespace's seed, so that two clusters with the same
 * block ids need not read from the same positions, and consecutive block ids (as new blocks get) start on unrelated
 * datanodes.
 */
function blockSeed(blockId: number, seed: number): number {
  // Block ids are safe integers: fold the high part in so that ids 2^32 apart differ.
  const low = blockId >>> 0;
  const high = Math.floor(blockId / 2 ** 32) >>> 0;
  return (Math.imul(low ^ Math.imul(high, 0x85ebca6b), 0x9e3779b1) ^ Math.imul(seed, 0xc2b2ae35)) >>> 0;
}

/**
 * `groups` of equal-rank replicas, best group first, flattened into the order readers try them. Within a group:
 * by "block", sorted by `key` then shuffled by the block's own seed (the input order does not matter); by "request",
 * shuffled with `rng`. Groups are not modified.
 */
export function orderReplicas<T>(
  groups: readonly (readonly T[])[],
  blockId: number,
  policy: ReadOrderPolicy,
  key: (item: T) => string,
  seed: number,
  rng: Rng,
): T[] {
  const blockRng = policy === "block" ? new SeededRng(blockSeed(blockId, seed)) : undefined;
  return groups.flatMap((g) => {
    if (!blockRng) return shuffle([...g], rng);
    const sorted = [...g].sort((a, b) => (key(a) < key(b) ? -1 : key(a) > key(b) ? 1 : 0));
    return shuffle(sorted, blockRng);
  });
}
