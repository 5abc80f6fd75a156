/**
 * The names and checks of a datanode's replica files, shared by the block store and its replica writer: chunk and
 * piece sizes, block keys (validated integers: nothing from the wire becomes a path any other way), file names, and
 * the DATANODE_NO_SPACE a full file system becomes (datanode/block-store.ts describes the layout).
 */
import { open } from "node:fs/promises";
import { HarvestError } from "../common/errors.js";

/** Bytes covered by one checksum. */
export const CHUNK_SIZE = 512;
/** Largest piece `read()` yields by default (chunk-aligned). */
export const READ_PIECE_BYTES = 64 * 1024;

/** Number of `subdir<n>` directories under current/. */
export const SUBDIR_COUNT = 64;

/** A block as the store names it: which block and which generation of it. */
export interface BlockKey {
  blockId: number;
  genStamp: number;
}

/** A finalized replica the store holds. */
export interface StoredReplica extends BlockKey {
  numBytes: number;
}

/** Turns a file system "no room" failure into DATANODE_NO_SPACE; anything else is returned unchanged. */
export function noSpaceError(err: unknown, blockId: number): unknown {
  const code = (err as NodeJS.ErrnoException | undefined)?.code;
  if (code !== "ENOSPC" && code !== "EDQUOT") return err;
  return new HarvestError("DATANODE_NO_SPACE", `the disk is full: cannot write block ${blockId} (${code})`, {
    details: { blockId: String(blockId) },
    cause: err,
  });
}

/** Validates a block id from anywhere (the wire included): a positive safe integer, else DATANODE_BAD_BLOCK_ID. */
export function checkBlockId(blockId: unknown): number {
  if (typeof blockId !== "number" || !Number.isSafeInteger(blockId) || blockId <= 0)
    throw new HarvestError("DATANODE_BAD_BLOCK_ID", `bad block id ${String(blockId)}: must be a positive integer`, {
      details: { field: "blockId" },
    });
  return blockId;
}

/** Validates a generation stamp: a non-negative safe integer, else DATANODE_BAD_BLOCK_ID. */
export function checkGenStamp(genStamp: unknown): number {
  if (typeof genStamp !== "number" || !Number.isSafeInteger(genStamp) || genStamp < 0)
    throw new HarvestError(
      "DATANODE_BAD_BLOCK_ID",
      `bad generation stamp ${String(genStamp)}: must be a non-negative integer`,
      { details: { field: "genStamp" } },
    );
  return genStamp;
}

/** Validates both halves of a block key. */
export function checkBlockKey(block: { blockId?: unknown; genStamp?: unknown } | null | undefined): BlockKey {
  if (!block) throw new HarvestError("DATANODE_BAD_BLOCK_ID", "no block given", { details: { field: "block" } });
  return { blockId: checkBlockId(block.blockId), genStamp: checkGenStamp(block.genStamp) };
}

/** The data file of a replica. */
export function blockName(b: BlockKey): string {
  return `blk_${b.blockId}`;
}

/** The meta file (checksums) of a replica. */
export function metaName(b: BlockKey): string {
  return `blk_${b.blockId}_${b.genStamp}.meta`;
}

/** Makes a directory's entries durable (a rename or a new file in it). */
export async function fsyncDir(dir: string): Promise<void> {
  const fh = await open(dir, "r");
  try {
    await fh.sync();
  } finally {
    await fh.close();
  }
}
