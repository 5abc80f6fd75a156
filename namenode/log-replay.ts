/**
 * What a standby's block map must hear when it applies a shared-log entry's changeset (namespace.ts
 * `applyReplicated`): the same block events the active's mutations raised, found by comparing each file's blocks
 * before and after. Pure: the tree is read through `inodeOf`.
 */
import type { BlockRecord, Changeset, InodeRecord } from "./namespace-store.js";

/** The block events of one changeset, and which files it opened or closed. */
export interface ReplayedEvents {
  /** Blocks new to the namespace, with whether they arrive committed. */
  allocated: { block: BlockRecord; inodeId: number; replication: number; committed: boolean }[];
  /** Blocks known before that are now committed, or whose committed length or generation changed. */
  committed: BlockRecord[];
  /** Blocks that left the namespace (file deleted, block abandoned). */
  removed: BlockRecord[];
  /** Files open for writing after the change, and files no longer open (deleted or complete). */
  open: number[];
  closed: number[];
}

/** The events `change` raises against the tree as it is before it (`inodeOf`). */
export function replayedEvents(change: Changeset, inodeOf: (id: number) => InodeRecord | undefined): ReplayedEvents {
  const out: ReplayedEvents = { allocated: [], committed: [], removed: [], open: [], closed: [] };
  const putIds = new Set(change.putInodes.map((i) => i.id));
  for (const id of change.delInodes) {
    const old = inodeOf(id);
    if (old?.kind === "file" && !putIds.has(id)) out.removed.push(...old.blocks);
    out.closed.push(id);
  }
  for (const inode of change.putInodes) {
    if (inode.kind !== "file") continue;
    const old = inodeOf(inode.id);
    const oldFile = old?.kind === "file" ? old : undefined;
    const before = new Map((oldFile?.blocks ?? []).map((b, i) => [b.blockId, { b, i }]));
    inode.blocks.forEach((b, i) => {
      const committed = i < inode.committedBlocks;
      const prior = before.get(b.blockId);
      before.delete(b.blockId);
      if (!prior) out.allocated.push({ block: b, inodeId: inode.id, replication: inode.replication, committed });
      else if (committed) {
        const was = oldFile !== undefined && prior.i < oldFile.committedBlocks;
        if (!was || prior.b.numBytes !== b.numBytes || prior.b.genStamp !== b.genStamp) out.committed.push(b);
      }
    });
    for (const { b } of before.values()) out.removed.push(b);
    (inode.complete ? out.closed : out.open).push(inode.id);
  }
  return out;
}
