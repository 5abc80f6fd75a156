/**
 * Test helpers about processes: whether a pid still names a process, and whether that process still runs (read from
 * /proc, where a zombie nobody reaped counts as gone); and running the built `harvest` CLI to its end.
 */
import { spawnSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { distEntry } from "../common/paths.js";

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

/** What a `harvest` command that ran to its end gave back; code -1 when it was killed (a timeout). */
export interface CliRun {
  code: number;
  stdout: string;
  stderr: string;
}

/** Runs the built `harvest` CLI with `args`, with `env` over this process's environment; kills it after `timeoutMs`. */
export function runHarvest(
  args: readonly string[],
  options: { env?: NodeJS.ProcessEnv; timeoutMs?: number } = {},
): CliRun {
  const r = spawnSync(process.execPath, [distEntry("cli/harvest.js"), ...args], {
    encoding: "utf8",
    timeout: options.timeoutMs ?? 120_000,
    env: { ...process.env, ...options.env },
  });
  return { code: r.status ?? -1, stdout: r.stdout, stderr: r.stderr };
}
