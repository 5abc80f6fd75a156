/** Positional writes of a replica's files that go on until every byte is written (a write may be cut short). */
import type { FileHandle } from "node:fs/promises";

/** Writes every buffer of `parts` back to back from `position`, however the kernel splits the writes. */
export async function writevAll(fh: FileHandle, parts: readonly Uint8Array[], position: number): Promise<void> {
  let rest = parts;
  let at = position;
  while (rest.length > 0) {
    const { bytesWritten } = await fh.writev(rest, at);
    at += bytesWritten;
    let left = bytesWritten;
    let i = 0;
    while (i < rest.length && left >= rest[i]!.length) left -= rest[i++]!.length;
    rest = rest.slice(i);
    if (left > 0 && rest.length > 0) rest = [rest[0]!.subarray(left), ...rest.slice(1)];
  }
}

/** Writes all of `data` at `position`, however the kernel splits the write. */
export async function writeAll(fh: FileHandle, data: Uint8Array, position: number): Promise<void> {
  let done = 0;
  while (done < data.length) {
    const { bytesWritten } = await fh.write(data, done, data.length - done, position + done);
    // A write that moves nothing would loop for ever: fail as the disk's error instead.
    if (bytesWritten === 0) throw Object.assign(new Error("a write wrote nothing"), { code: "EIO" });
    done += bytesWritten;
  }
}
