/**
 * glibc's malloc setting for the processes that move file data: the datanodes, and the clients of `harvest fs put`,
 * `get` and `cat` (and the dfs bench). Hadoop's scripts set `MALLOC_ARENA_MAX` for its JVMs the same way.
 *
 * Why. Every 64 KiB a socket delivers is a new buffer from malloc, freed later, many at a time, when V8 collects the
 * buffers. glibc hands the free memory at the heap's top back to the kernel as soon as more than 128 KiB of it is free.
 * The next buffers then touch new pages, and a first touch is a page fault (about 13 µs on the VM where this was
 * measured). `glibc.malloc.top_pad` makes glibc keep 64 MiB free at the top when it trims. Memory stays warm, and the
 * process holds at most that much more.
 *
 * Measured (1 GiB, 4 datanodes, fresh cluster per run, two passes; DEVELOPERS.md says how):
 * - plaintext gets, replication 1, client and datanodes with the setting: 608-885 MB/s against 380-431 without. The
 *   client's page faults per get fell from 14,000-25,000 to 19-4,200. Replication 3: 670-694 against 242-335.
 * - with the client only: 425-669 MB/s. The datanodes alone, with another setting tried before (fixed mmap and trim
 *   thresholds), had not helped; the two together did.
 * - TLS gets (decryption leads their profile): 301-497 MB/s against 326-441 with replication 1, 333-521 against
 *   250-326 with replication 3.
 * - puts: replication 1 191-252 against 219-243 MB/s; replication 3 78-119 against 91-120 (three passes). No gain; a
 *   loss, if any, is within the noise.
 * - memory: the datanodes' peak resident size rose by 10-15 MiB (151-157 against 140-145 MiB).
 *
 * The rule for every variable here is the Node options' (localcluster/node-options.ts): set, even empty, it is the operator's
 * and is left alone; unset, Harvest's setting applies. musl and other C libraries ignore the variable.
 */
import { spawn } from "node:child_process";
import type { ChildProcess } from "node:child_process";
import { dirname } from "node:path";
import type { DaemonKind } from "./daemon-kinds.js";

/** The variable glibc reads its tunables from, once, as a process starts. */
export const TUNABLES_VARIABLE = "GLIBC_TUNABLES";

/** Keep 64 MiB free at the top of the heap when trimming (glibc's default keeps 128 KiB). */
export const MALLOC_TUNABLES = "glibc.malloc.top_pad=67108864";

/** The daemons that move file data and start with the setting. */
export function usesMallocTunables(kind: DaemonKind): boolean {
  return kind === "datanode";
}

/** `env` with GLIBC_TUNABLES set to Harvest's setting if it is not set at all. */
export function withMallocTunables(env: NodeJS.ProcessEnv = process.env): NodeJS.ProcessEnv {
  return env[TUNABLES_VARIABLE] === undefined ? { ...env, [TUNABLES_VARIABLE]: MALLOC_TUNABLES } : env;
}

/** The system folders of a daemon's PATH, after its Node's folder (as systemd gives a service). */
export const DAEMON_SYSTEM_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

/**
 * The environment a daemon of `kind` starts with: `env` with a fixed PATH (its Node's folder, then the system's; never
 * the shell's or npx's, which may name folders any account can write, such as /tmp/node_modules/.bin), and the malloc
 * setting for the data-moving kinds.
 */
export function daemonEnvironment(kind: DaemonKind, env: NodeJS.ProcessEnv = process.env): NodeJS.ProcessEnv {
  const fixed = { ...env, PATH: `${dirname(process.execPath)}:${DAEMON_SYSTEM_PATH}` };
  return usesMallocTunables(kind) ? withMallocTunables(fixed) : fixed;
}

/** The setting a daemon of `kind` should have started with and did not (undefined: nothing missing). */
export function missingMallocTunables(
  kind: DaemonKind,
  env: NodeJS.ProcessEnv = process.env,
  platform: NodeJS.Platform = process.platform,
): string | undefined {
  if (platform !== "linux" || !usesMallocTunables(kind) || env[TUNABLES_VARIABLE] !== undefined) return undefined;
  return `${TUNABLES_VARIABLE}=${MALLOC_TUNABLES}`;
}

/** `harvest` commands that move file data through this process (argv's words after the script). */
const DATA_COMMANDS: readonly (readonly string[])[] = [
  ["fs", "put"],
  ["fs", "get"],
  ["fs", "cat"],
];

/**
 * The environment to run `harvest` again with, for a data command started without the setting; undefined when the
 * process should go on as it is. `argv` is process.argv (node, script, words).
 */
export function dataCommandRestartEnv(
  argv: readonly string[],
  env: NodeJS.ProcessEnv = process.env,
  platform: NodeJS.Platform = process.platform,
): NodeJS.ProcessEnv | undefined {
  if (platform !== "linux" || env[TUNABLES_VARIABLE] !== undefined) return undefined;
  if (!isDataCommand(argv)) return undefined;
  return withMallocTunables(env);
}

/** Signals a terminal or a supervisor sends that the restarted process must get too. */
const FORWARDED: readonly NodeJS.Signals[] = ["SIGINT", "SIGTERM", "SIGHUP"];

/**
 * Whether `argv` (process.argv) is a `harvest` command that moves file data through this process, with or without
 * global options before it (`harvest --dir D fs put ...`).
 */
export function isDataCommand(argv: readonly string[]): boolean {
  let words = argv.slice(2);
  for (;;) {
    if (/^--(config|dir)=/.test(words[0] ?? "")) words = words.slice(1);
    else if (words[0] === "--config" || words[0] === "--dir") words = words.slice(2);
    else break;
  }
  return DATA_COMMANDS.some((c) => c.every((w, i) => words[i] === w));
}

/**
 * Runs this script again, with `nodeOptions` before the same Node options and arguments, under `env`; this process
 * only waits, passes signals on and leaves as the new one does (its exit code, or its signal).
 */
export function runAgain(env: NodeJS.ProcessEnv, nodeOptions: readonly string[] = []): void {
  // Listening before the spawn: the child exists (and may be signalled) while `spawn` still waits for its exec, and a
  // signal this process had no listener for then would end it at once and leave the child running on its own.
  let child: ChildProcess | undefined;
  const forward = (signal: NodeJS.Signals): void => {
    child?.kill(signal);
  };
  for (const s of FORWARDED) process.on(s, forward);
  child = spawn(process.execPath, [...nodeOptions, ...process.execArgv, ...process.argv.slice(1)], {
    stdio: "inherit",
    env,
  });
  child.once("error", (err) => {
    process.stderr.write(
      `harvest: could not start again with the data settings (${TUNABLES_VARIABLE}, Node options): ${err.message}\n`,
    );
    process.exit(1);
  });
  child.once("exit", (code, signal) => {
    for (const s of FORWARDED) process.off(s, forward);
    if (signal) process.kill(process.pid, signal);
    else process.exit(code ?? 1);
  });
}
