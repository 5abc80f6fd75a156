/**
 * Replica placement: where the replicas of a block go. A pure policy over plain data (the live datanodes and a seeded
 * random source), shared by the namenode (new blocks, re-replication) and the simulator. The stock policy is HDFS's
 * default rack-aware one; the HDFS-H diversity grid (seeds/004, Algorithm 2) comes later beside it.
 */
import type { Rng } from "../../common/rng.js";

/** What a placement policy sees of a live datanode. */
export interface DatanodeView {
  readonly datanodeId: string;
  readonly rack: string;
  /** Free space for Harvest's blocks, from the last heartbeat. */
  readonly remainingBytes: number;
  /** The primary tenant is busy: the datanode refuses reads and writes for now. */
  readonly primaryBusy: boolean;
  /** Silent for longer than the stale interval (it may be dead): callers avoid it as a target. @default false */
  readonly stale?: boolean;
}

/** One placement question. */
export interface PlacementRequest {
  /** Replicas wanted (for re-replication: how many more). */
  readonly replication: number;
  /** The datanode the writer runs on, if it is one. */
  readonly writerDatanodeId?: string;
  /** Datanodes that must not be chosen (a failed pipeline, nodes already holding or receiving the block). */
  readonly excluded: ReadonlySet<string>;
  /** Datanodes already holding a good replica; rack spread counts them as chosen (re-replication). */
  readonly existing?: readonly string[];
  /** The live datanodes. */
  readonly datanodes: readonly DatanodeView[];
  /** A chosen node must have at least this much room. */
  readonly blockSizeBytes: number;
  readonly rng: Rng;
}

/** The replica placement policies a namenode can run: HDFS's rack-aware default, and HDFS-H's diversity grid. */
export type PlacementPolicyName = "stock" | "diversity";

/** Chooses the datanodes for a block's replicas, in pipeline order. */
export interface PlacementPolicy {
  readonly name: PlacementPolicyName;
  /**
   * Up to `replication` distinct datanodes, never an excluded one; fewer when not enough nodes qualify, and an empty
   * list when none does (the caller turns that into NAMENODE_NOT_ENOUGH_DATANODES).
   */
  chooseTargets(req: PlacementRequest): DatanodeView[];
}

/**
 * HDFS's default policy: the first replica on the writer's datanode (else a random one), the second on another rack,
 * the third on the second's rack but another node, any further ones on random nodes. A node qualifies when it is not
 * excluded, has room for a block and its primary tenant is not busy (a busy datanode refuses writes, so a pipeline
 * through it would fail; stock HDFS knows nothing of primaries, this is the one concession to Harvest).
 */
export class StockPlacementPolicy implements PlacementPolicy {
  readonly name = "stock";

  chooseTargets(req: PlacementRequest): DatanodeView[] {
    const byId = new Map(req.datanodes.map((d) => [d.datanodeId, d]));
    const eligible = req.datanodes.filter(
      (d) => !req.excluded.has(d.datanodeId) && !d.primaryBusy && d.remainingBytes >= req.blockSizeBytes,
    );
    // Rack spread counts replicas that already exist as if this policy had chosen them first.
    const placed: DatanodeView[] = [];
    for (const id of req.existing ?? []) {
      const d = byId.get(id);
      if (d) placed.push(d);
    }
    const chosen: DatanodeView[] = [];
    const taken = new Set<string>(placed.map((d) => d.datanodeId));
    const free = (pred: (d: DatanodeView) => boolean): DatanodeView[] =>
      eligible.filter((d) => !taken.has(d.datanodeId) && pred(d));
    for (let i = 0; i < req.replication; i++) {
      const all = placed.concat(chosen);
      const next = this.chooseOne(all, req, free);
      if (!next) break;
      chosen.push(next);
      taken.add(next.datanodeId);
    }
    return chosen;
  }

  private chooseOne(
    placed: readonly DatanodeView[],
    req: PlacementRequest,
    free: (pred: (d: DatanodeView) => boolean) => DatanodeView[],
  ): DatanodeView | undefined {
    const any = (): DatanodeView | undefined =>
      pick(
        req.rng,
        free(() => true),
      );
    const first = placed[0];
    const second = placed[1];
    if (!first) {
      const writer = free((d) => d.datanodeId === req.writerDatanodeId)[0];
      return writer ?? any();
    }
    if (!second)
      return (
        pick(
          req.rng,
          free((d) => d.rack !== first.rack),
        ) ?? any()
      );
    if (placed.length === 2) {
      // Both on one rack (only one rack had room): leave it; otherwise share the second's rack, as HDFS does, so
      // that the pipeline's last hop stays inside a rack.
      const candidates =
        first.rack === second.rack ? free((d) => d.rack !== first.rack) : free((d) => d.rack === second.rack);
      return pick(req.rng, candidates) ?? any();
    }
    return any();
  }
}

/** A uniformly random element, or undefined for an empty list. */
function pick<T>(rng: Rng, items: readonly T[]): T | undefined {
  if (items.length === 0) return undefined;
  return items[Math.min(items.length - 1, Math.floor(rng.next() * items.length))];
}
