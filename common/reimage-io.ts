/**
 * Disk-reimage histories: a plain CSV of `time_s,server` rows (Unix seconds, server name), oldest first or in any
 * order. Like the utilization readers it returns the whole file or throws TRACE_MALFORMED naming the 1-based line.
 */
import { HarvestError } from "./errors.js";

/** The header line of a reimage history file. */
export const REIMAGE_CSV_HEADER = "time_s,server";

/** One recorded reimage. */
export interface ReimageRecord {
  server: string;
  atMs: number;
}

const SERVER_RE = /^[A-Za-z0-9_.:-]{1,128}$/;
const NUMBER_RE = /^\d+(?:\.\d+)?$/;

/** Parses a reimage history; `file` is used in error messages. */
export function parseReimageText(text: string, file: string): ReimageRecord[] {
  const malformed = (line: number, reason: string): HarvestError =>
    new HarvestError("TRACE_MALFORMED", `${file}:${line}: ${reason}`, {
      details: { file, line: String(line), reason },
    });
  const lines = text.split("\n");
  while (lines.length > 0 && lines[lines.length - 1]!.replace(/\r$/, "").trim() === "") lines.pop();
  if (lines.length === 0) throw malformed(1, "empty file");
  const header = lines[0]!
    .replace(/\r$/, "")
    .replace(/^\uFEFF/, "")
    .trim();
  if (header !== REIMAGE_CSV_HEADER)
    throw malformed(1, `header ${JSON.stringify(header.slice(0, 80))} is not ${REIMAGE_CSV_HEADER}`);
  const out: ReimageRecord[] = [];
  for (let i = 1; i < lines.length; i++) {
    const raw = lines[i]!.replace(/\r$/, "");
    const lineNo = i + 1;
    if (raw.trim() === "") throw malformed(lineNo, "blank line inside the data");
    const fields = raw.split(",").map((f) => f.trim());
    if (fields.length !== 2)
      throw malformed(lineNo, `expected 2 columns (${REIMAGE_CSV_HEADER}), found ${fields.length}`);
    const [time, server] = fields as [string, string];
    if (!NUMBER_RE.test(time)) throw malformed(lineNo, `bad timestamp ${JSON.stringify(time)}`);
    if (!SERVER_RE.test(server)) throw malformed(lineNo, `bad server name ${JSON.stringify(server)}`);
    out.push({ server, atMs: Math.round(Number(time) * 1000) });
  }
  return out;
}
