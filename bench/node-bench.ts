/**
 * Helpers of the benchmarks that run a real node manager with real container processes (`yield`, `capping`): reading
 * a process's CPU from /proc, a logger that passes warnings on, and polling for a condition.
 */
import { readdirSync, readFileSync } from "node:fs";
import { setTimeout as sleep } from "node:timers/promises";
import { Logger } from "../common/log.js";

/**
 * Run time (ns) and state of a process from /proc: `threads` sums every thread's schedstat, else the main thread's
 * alone. Undefined once the process has exited (gone, or a zombie).
 */
export function readProcessCpu(pid: number, threads: boolean): { cpuNs: number; stopped: boolean } | undefined {
  let stat: string;
  try {
    stat = readFileSync(`/proc/${pid}/stat`, "utf8");
  } catch {
    return undefined;
  }
  // Field 3 (state) follows the parenthesised command name, which may itself contain ") ".
  const state = stat.charAt(stat.lastIndexOf(")") + 2);
  if (state === "Z" || state === "X" || state === "x") return undefined;
  const schedstatNs = (path: string): number => Number(readFileSync(path, "utf8").split(" ", 1)[0]);
  let cpuNs = 0;
  try {
    if (!threads) cpuNs = schedstatNs(`/proc/${pid}/schedstat`);
    else
      for (const tid of readdirSync(`/proc/${pid}/task`)) {
        try {
          cpuNs += schedstatNs(`/proc/${pid}/task/${tid}/schedstat`);
        } catch {
          // The thread ended between the listing and the read.
        }
      }
  } catch {
    return undefined;
  }
  return { cpuNs, stopped: state === "T" || state === "t" };
}

/** A logger that hands every line to `onLine` and passes warnings and errors on (every line with HARVEST_BENCH_DEBUG). */
export function benchLogger(component: string, onLine: (line: string) => void = () => undefined): Logger {
  return new Logger(component, "info", (line) => {
    onLine(line);
    if (/^\S+ (WARN |ERROR)/.test(line) || process.env["HARVEST_BENCH_DEBUG"]) process.stderr.write(line + "\n");
  });
}

/** Polls `check` every `pollMs` until it holds; throws naming `what` after `timeoutMs`. */
export async function waitFor(
  what: string,
  timeoutMs: number,
  check: () => boolean | Promise<boolean>,
  pollMs = 10,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await sleep(pollMs);
  }
}
