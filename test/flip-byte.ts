/** Corrupts a file in place for tests of checksums: flips bits of one byte, leaving the file's length as it was. */
import { closeSync, openSync, readSync, writeSync } from "node:fs";

/** XORs the byte at `offset` of `file` with `mask` (a non-zero mask always changes it). */
export function flipByte(file: string, offset: number, mask = 0xff): void {
  const fd = openSync(file, "r+");
  try {
    const one = Buffer.alloc(1);
    readSync(fd, one, 0, 1, offset);
    one[0] = one[0]! ^ mask;
    writeSync(fd, one, 0, 1, offset);
  } finally {
    closeSync(fd);
  }
}
