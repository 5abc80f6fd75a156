/** YARN-style identifiers: application_<clusterTs>_<seq>, container_<epoch>_<appSeq>_<attempt>_<seq>. */
import { HarvestError } from "./errors.js";

const APP_ID = /^application_(\d+)_(\d{4,})$/;

/** Formats an application id. */
export function formatAppId(clusterTs: number, seq: number): string {
  return `application_${clusterTs}_${String(seq).padStart(4, "0")}`;
}

/** Parses an application id, throwing INVALID_ARGUMENT for anything else (ids reach file paths). */
export function parseAppId(appId: string): { clusterTs: number; seq: number } {
  const m = APP_ID.exec(appId);
  if (!m)
    throw new HarvestError(
      "INVALID_ARGUMENT",
      `not an application id: ${JSON.stringify(appId)} (expected application_<ts>_<nnnn>)`,
      { details: { field: "appId" } },
    );
  return { clusterTs: Number(m[1]), seq: Number(m[2]) };
}

/** Formats a container id. */
export function formatContainerId(epoch: number, appSeq: number, attempt: number, seq: number): string {
  return `container_${epoch}_${String(appSeq).padStart(4, "0")}_${String(attempt).padStart(2, "0")}_${String(seq).padStart(6, "0")}`;
}

const CONTAINER_ID = /^container_(\d+)_(\d{4,})_(\d{2,})_(\d{6,})$/;

/** True for a well-formed container id (safe to use as a directory name). */
export function isContainerId(id: string): boolean {
  return CONTAINER_ID.test(id);
}

/**
 * The parts of a container id: the resource manager incarnation (`epoch`, its start time) that granted it, the job's
 * sequence number, the job attempt it was granted to, and its own number; undefined for anything else.
 */
export function containerIdParts(
  id: string,
): { epoch: number; appSeq: number; attempt: number; seq: number } | undefined {
  const m = CONTAINER_ID.exec(id);
  if (!m) return undefined;
  return { epoch: Number(m[1]), appSeq: Number(m[2]), attempt: Number(m[3]), seq: Number(m[4]) };
}
