/**
 * A task's input split: the part of its vertex's DFS input it reads (`"input"` in the DAG, common/dag-input.ts). The
 * job manager gives each task one split in HARVEST_INPUT_SPLIT and asks for a container on a server holding a replica
 * of it; `readSplit` reads the split's records from the DFS with the job's credentials, from that server's own
 * datanode first.
 *
 * Records are fixed-length (`recordBytes`: the split holds whole records) or lines. A line belongs to the split that
 * holds its first byte, as in Hadoop's LineRecordReader: a split skips the partial line it starts in (unless it starts
 * the file, or right after a newline) and finishes the line it ends in, so that the splits of a file, read one after
 * another, give every line exactly once.
 */
import type { InputSplit } from "../common/task-contract.js";
import { TASK_ENV } from "../common/task-contract.js";
import { TaskError } from "./context.js";
import { DFS_PREFIX, dfsClient } from "./dfs.js";

export type { InputSplit };

/** This task's input split, or undefined when its vertex has no DFS input. A malformed one is a TaskError. */
export function inputSplit(env: NodeJS.ProcessEnv = process.env): InputSplit | undefined {
  const raw = env[TASK_ENV.split];
  if (raw === undefined || raw === "") return undefined;
  let v: unknown;
  try {
    v = JSON.parse(raw);
  } catch {
    throw new TaskError(`${TASK_ENV.split} is not JSON`);
  }
  const s = v as Partial<InputSplit>;
  const whole = (n: unknown): boolean => Number.isSafeInteger(n) && (n as number) >= 0;
  if (
    typeof s !== "object" ||
    s === null ||
    typeof s.path !== "string" ||
    !s.path.startsWith(DFS_PREFIX) ||
    !whole(s.offset) ||
    !whole(s.length) ||
    !whole(s.fileLength) ||
    (s.recordBytes !== undefined && !(whole(s.recordBytes) && s.recordBytes > 0)) ||
    !Array.isArray(s.hosts) ||
    !Array.isArray(s.racks)
  )
    throw new TaskError(`${TASK_ENV.split} is not an input split: ${raw.slice(0, 200)}`);
  return s as InputSplit;
}

/** Reads `length` bytes of the split's file from `offset` (fewer only at its end). */
export type RangeReader = (offset: number, length: number) => Promise<Buffer>;

/** How far past a line split's end a reader looks for the end of its last line, per read. */
const LINE_TAIL_STEP = 64 * 1024;

/**
 * The split's records: for fixed-length records its bytes; for lines, the lines that start in it, each with its
 * newline (the file's last line may have none). `read` reads the file (default: the DFS, as the job's submitter).
 */
export async function readSplit(split: InputSplit | undefined = inputSplit(), read?: RangeReader): Promise<Buffer> {
  if (!split) throw new TaskError(`this task has no input split (its vertex has no "input" in the DAG)`);
  if (read) return readSplitWith(split, read);
  const client = await dfsClient();
  try {
    const path = split.path.slice(DFS_PREFIX.length);
    return await readSplitWith(split, async (offset, length) => {
      const chunks: Buffer[] = [];
      for await (const c of client.createReadStream(path, { offset, length })) chunks.push(c as Buffer);
      return Buffer.concat(chunks);
    });
  } catch (err) {
    if (err instanceof TaskError) throw err;
    throw new TaskError(`cannot read the input split ${describe(split)}: ${(err as Error).message}`);
  } finally {
    client.close();
  }
}

async function readSplitWith(split: InputSplit, read: RangeReader): Promise<Buffer> {
  const end = Math.min(split.offset + split.length, split.fileLength);
  if (split.recordBytes !== undefined || split.length === 0) return read(split.offset, end - split.offset);
  // From the byte before the split (is a line starting at `offset`?) to its end, then on to the end of its last line.
  const from = split.offset === 0 ? 0 : split.offset - 1;
  const parts = [await read(from, end - from)];
  let have = end;
  const lastByte = (): number | undefined => {
    const last = parts[parts.length - 1]!;
    return last.length > 0 ? last[last.length - 1] : undefined;
  };
  if (end > from && lastByte() !== NEWLINE) {
    while (have < split.fileLength) {
      const more = await read(have, Math.min(LINE_TAIL_STEP, split.fileLength - have));
      if (more.length === 0) break;
      const nl = more.indexOf(NEWLINE);
      parts.push(nl >= 0 ? more.subarray(0, nl + 1) : more);
      have += more.length;
      if (nl >= 0) break;
    }
  }
  const buf = Buffer.concat(parts);
  const bounds = lineBounds(buf, from, split.offset, end);
  return buf.subarray(bounds.begin, bounds.end);
}

const NEWLINE = 0x0a;

/**
 * Within `buf` (the file's bytes from position `bufStart`), the index range of the lines that start in [start, end):
 * begin is `start`'s own index when it starts the file or follows a newline, else just after the first newline at or
 * after it; end is just after the first newline at or after `end - 1` (or the buffer's end).
 */
export function lineBounds(buf: Buffer, bufStart: number, start: number, end: number): { begin: number; end: number } {
  let begin = 0;
  if (start > 0) {
    const nl = buf.indexOf(NEWLINE, start - 1 - bufStart);
    begin = nl < 0 ? buf.length : nl + 1;
  }
  // A split whose first whole line starts at or after its end owns no line.
  if (bufStart + begin >= end) return { begin, end: begin };
  const nl = buf.indexOf(NEWLINE, Math.max(begin, end - 1 - bufStart));
  return { begin, end: nl < 0 ? buf.length : nl + 1 };
}

function describe(s: InputSplit): string {
  return `${s.path} [${s.offset}, ${s.offset + s.length})`;
}
