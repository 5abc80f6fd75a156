/** Writing a file whole or not at all: readers see the old content or the new, never a half-written one. */
import { renameSync, writeFileSync } from "node:fs";

/**
 * Writes `data` to a temporary file beside `file` (created with `mode`) and renames it over `file`. The temporary name
 * carries this process's pid, so two processes writing the same file never share one.
 */
export function writeFileAtomic(file: string, data: string, mode = 0o644): void {
  const tmp = `${file}.tmp-${process.pid}`;
  writeFileSync(tmp, data, { mode });
  renameSync(tmp, file);
}
