/**
 * Test helpers about processes: whether a pid still names a process, and whether that process still runs (read from
 * /proc, where a zombie nobody reaped counts as gone).
 */
import { readFileSync } from "node:fs";

/** True while `pid` names a process this process may signal (a zombie not yet reaped counts). */
export function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/** The process's state letter from /proc (`R`, `S`, `T`, `Z`...); throws when there is no such process. */
export function procState(pid: number): string {
  const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
  return stat.slice(stat.lastIndexOf(")") + 2).split(" ")[0] ?? "?";
}

/** True while `pid` runs (a zombie nobody reaped counts as gone: it runs nothing). */
export function running(pid: number): boolean {
  let state: string;
  try {
    state = procState(pid);
  } catch {
    return false;
  }
  return state !== "Z" && state !== "X";
}
