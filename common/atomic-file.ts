/**
 * Files and directories a daemon keeps: written whole or not at all (readers see the old content or the new, never a
 * half-written one), and directories with the mode the daemon means them to have.
 */
import { chmodSync, mkdirSync, renameSync, writeFileSync } from "node:fs";
import { dirname } from "node:path";

/**
 * Writes `data` to a temporary file beside `file` (created with `mode`) and renames it over `file`. The temporary name
 * carries this process's pid, so two processes writing the same file never share one.
 */
export function writeFileAtomic(file: string, data: string, mode = 0o644): void {
  const tmp = `${file}.tmp-${process.pid}`;
  writeFileSync(tmp, data, { mode });
  renameSync(tmp, file);
}

/**
 * Creates `dir` (and its parents) and gives it `mode`, also when it existed: a daemon's own directories are 0700 (its
 * metadata and blocks are nobody else's), or 0711 where containers, which run as other accounts, must pass through to
 * their own directories below without listing what else is there. Returns false when the mode could not be set (a
 * shared mount owned by someone else); the caller says so.
 */
export function ensureDirMode(dir: string, mode: number): boolean {
  // Parents get the usual mode: another daemon on the same host may have to pass through them (a recursive mkdir
  // with `mode` would give every new parent the private mode too).
  mkdirSync(dirname(dir), { recursive: true });
  mkdirSync(dir, { recursive: true, mode });
  try {
    chmodSync(dir, mode);
    return true;
  } catch {
    return false;
  }
}
