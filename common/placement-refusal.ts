/**
 * Why the namenode could place no replica of a new block: how many live datanodes were out for each reason. The
 * namenode counts them (AddBlock's NAMENODE_NOT_ENOUGH_DATANODES carries the counts in its details) and the client
 * reads them back to decide whether waiting can help and to say why it waits; both word them with `describeRefusal`.
 */
import type { DetailsOf, ErrorDetails } from "./errors.js";

/** Live datanodes by the reason each could not take a new block (a datanode counts once, under its first reason). */
export interface PlacementRefusal {
  /** Live datanodes the namenode knows (every one below is among them). */
  live: number;
  /** Excluded by the client (a pipeline through them failed). */
  excluded: number;
  /** Out of service: being decommissioned or drained, or decommissioned. */
  decommissioning: number;
  /** Their primary tenant is busy: they refuse reads and writes for now (HDFS-H's busy-datanode rule). */
  busy: number;
  /** Without room for a block. */
  full: number;
}

/** What the count reads of a datanode (the namenode's placement view has these fields). */
export interface RefusalView {
  readonly datanodeId: string;
  readonly primaryBusy: boolean;
  readonly remainingBytes: number;
}

/**
 * Counts the live datanodes by why none took a block of `blockSizeBytes`: excluded by the client, out of service,
 * busy primary, full, in that order of precedence (a datanode that fits none was ruled out by the placement policy).
 */
export function countRefusal(
  live: readonly RefusalView[],
  excluded: ReadonlySet<string>,
  blockSizeBytes: number,
  outOfService: (datanodeId: string) => boolean,
): PlacementRefusal {
  const r: PlacementRefusal = { live: live.length, excluded: 0, decommissioning: 0, busy: 0, full: 0 };
  for (const d of live) {
    if (excluded.has(d.datanodeId)) r.excluded++;
    else if (outOfService(d.datanodeId)) r.decommissioning++;
    else if (d.primaryBusy) r.busy++;
    else if (d.remainingBytes < blockSizeBytes) r.full++;
  }
  return r;
}

/**
 * The reasons in words, each once: "2 busy with their primary tenants, 1 full (no room for a block)"; "no live
 * datanode" when there is none.
 */
export function describeRefusal(r: PlacementRefusal): string {
  if (r.live === 0) return "no live datanode";
  const parts: string[] = [];
  if (r.busy > 0) parts.push(`${r.busy} busy with ${r.busy === 1 ? "its primary tenant" : "their primary tenants"}`);
  if (r.full > 0) parts.push(`${r.full} full (no room for a block)`);
  if (r.decommissioning > 0) parts.push(`${r.decommissioning} out of service (decommissioning or drained)`);
  if (r.excluded > 0) parts.push(`${r.excluded} excluded by this writer after a failed pipeline`);
  const other = r.live - r.busy - r.full - r.decommissioning - r.excluded;
  if (other > 0) parts.push(`${other} ruled out by the placement policy`);
  return parts.join(", ");
}

/**
 * Whether waiting can help: a busy primary calms down, a full disk frees room, a datanode registers; a datanode the
 * writer excluded or one leaving service does not come back within a write.
 */
export function isTransientRefusal(r: PlacementRefusal): boolean {
  return r.live === 0 || r.busy > 0 || r.full > 0;
}

/** The refusal as NAMENODE_NOT_ENOUGH_DATANODES's details (decimal strings, as details travel). */
export function refusalDetails(r: PlacementRefusal): ErrorDetails["NAMENODE_NOT_ENOUGH_DATANODES"] {
  return {
    live: String(r.live),
    excluded: String(r.excluded),
    decommissioning: String(r.decommissioning),
    busy: String(r.busy),
    full: String(r.full),
  };
}

/**
 * The refusal NAMENODE_NOT_ENOUGH_DATANODES's details carry; undefined when they carry no counts (a namenode of an
 * older build), so the caller does not wait on a guess.
 */
export function refusalOfDetails(
  d: DetailsOf<"NAMENODE_NOT_ENOUGH_DATANODES"> | undefined,
): PlacementRefusal | undefined {
  if (!d || d.busy === undefined || d.live === undefined) return undefined;
  const n = (v: string | undefined): number => {
    const x = Number(v ?? 0);
    return Number.isSafeInteger(x) && x >= 0 ? x : 0;
  };
  return {
    live: n(d.live),
    excluded: n(d.excluded),
    decommissioning: n(d.decommissioning),
    busy: n(d.busy),
    full: n(d.full),
  };
}
