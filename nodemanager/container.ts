/**
 * One container: a real child process in its own process group, running as an unprivileged account (never root, see
 * run-as.ts), with a working directory and stdout/stderr log files that belong to that account, an optional cgroup,
 * and an exit cause decided by whoever ended it (the primary tenant, the user, the resource manager).
 */
import { spawn, spawnSync } from "node:child_process";
import type { ChildProcess } from "node:child_process";
import {
  chownSync,
  closeSync,
  constants as fsConstants,
  existsSync,
  fchownSync,
  lchownSync,
  lstatSync,
  mkdirSync,
  openSync,
  symlinkSync,
  writeFileSync,
  writeSync,
} from "node:fs";
import { open } from "node:fs/promises";
import type { FileHandle } from "node:fs/promises";
import { constants, setPriority } from "node:os";
import { dirname, join, resolve } from "node:path";
import { recordContainerProcess } from "../common/container-leftovers.js";
import { errorMessage, HarvestError } from "../common/errors.js";
import { TOKEN_FILE_ENV, TOKEN_FILE_NAME } from "../common/task-contract.js";
import type { ContainerTokens } from "../common/task-contract.js";
import type { CgroupController } from "./cgroups.js";
import { assertCanEnter } from "./run-as.js";
import { OUTPUT_DIR_NAME } from "./shuffle-service.js";
import type { ContainerAccount } from "./run-as.js";
import type { ExitCauseOutput } from "../proto/generated/harvest/v1/ExitCause.js";

/** How a container ended, as the wire names it (common.proto's ExitCause). */
export type ExitCause = Exclude<ExitCauseOutput, "EXIT_CAUSE_UNSPECIFIED">;

/** What starts a container. */
export interface ContainerSpec {
  containerId: string;
  appId: string;
  argv: string[];
  env: Record<string, string>;
  vcoresMilli: number;
  memoryMb: number;
  isAm: boolean;
  /** The grant's priority (the vertex's topological position; -1 a job manager), reported back to the resource manager. */
  priority?: number;
  /** The job's priority (0..100, from the grant); the capping agent throttles and kills the least critical first. */
  jobPriority?: number;
  /**
   * The account the process runs as, never root (`ContainerAccounts.accountFor`). When it is not the node manager's
   * own, the process starts with that uid and primary gid and no supplementary groups (Node's spawn drops them).
   */
  account: ContainerAccount;
  /** Created by the launch (a container id is launched once): an existing directory fails it. */
  workDir: string;
  /** The Node binary "node" in argv runs. @default the node manager's own (process.execPath) */
  nodeBinary?: string;
  /** Localized resources: name in `workDir` -> its cached copy, linked there before the container starts. */
  links?: Record<string, string>;
  /** Credentials, written to the token file in `workDir` (TOKEN_FILE_ENV names it) and never put in `env`. */
  tokens?: ContainerTokens;
  /**
   * With it, the container gets /tmp, /var/tmp (both its work directory's `tmp`) and /dev/shm (a tmpfs of at most its
   * memory) of its own in a mount namespace (the node manager must be root and the server have util-linux's unshare,
   * mount and setpriv: `PRIVATE_TMP`); `keep` names the paths it must still reach (its work directory, the node's
   * file cache, the CA...): those below /tmp or /var/tmp stay there. Without it TMPDIR names the work directory's `tmp`.
   */
  privateTmp?: { keep: readonly string[] };
}

/** Replaces `${NAME}` in an argument with the container environment's value (unknown names are left as they are). */
export function expandArg(arg: string, env: Record<string, string>): string {
  return arg.replace(/\$\{([A-Za-z_][A-Za-z0-9_]*)\}/g, (whole, name: string) => env[name] ?? whole);
}

// Only these variables pass from the node manager's own environment into containers (HOME, USER and LOGNAME are the
// container's account's; PATH is CONTAINER_PATH).
const INHERITED_ENV = ["LANG", "TZ", "TMPDIR", "HARVEST_LOG_LEVEL", "HARVEST_LOG_FORMAT", "HARVEST_SHARED_DATA"];

/**
 * The system folders a container's PATH holds, after the folder of the Node binary it runs: never the node manager's
 * own PATH, which may hold folders other accounts can write (npx puts every parent folder's node_modules/.bin there).
 */
export const CONTAINER_SYSTEM_PATH = "/usr/local/bin:/usr/bin:/bin";

/** A running or finished container process. */
export class ContainerProcess {
  readonly startedMs: number;
  state: "RUNNING" | "COMPLETE" = "RUNNING";
  exitCode = 0;
  cause: ExitCause | undefined;
  diagnostics = "";
  finishedMs = 0;
  readonly pid: number;
  private readonly child: ChildProcess;
  private killCause: ExitCause | undefined;
  private killTimer: NodeJS.Timeout | undefined;
  private readonly exited: Promise<void>;

  constructor(
    readonly spec: ContainerSpec,
    private readonly cgroups: CgroupController,
    nowMs: number,
    onExit: (c: ContainerProcess) => void,
  ) {
    const { account } = spec;
    if (account.uid === 0)
      throw new HarvestError("CONTAINER_LAUNCH_FAILED", `refusing to run ${spec.containerId} as root (uid 0)`);
    const switchUser = account.uid !== process.getuid?.();
    const env: Record<string, string> = {};
    for (const k of INHERITED_ENV) {
      const v = process.env[k];
      if (v !== undefined) env[k] = v;
    }
    const nodeBinary = spec.nodeBinary ?? process.execPath;
    env["PATH"] = [...new Set([dirname(nodeBinary), ...CONTAINER_SYSTEM_PATH.split(":")])].join(":");
    Object.assign(env, { HOME: account.home, USER: account.name, LOGNAME: account.name }, spec.env);
    const tokens = spec.tokens ?? {};
    if (Object.keys(tokens).length > 0) env[TOKEN_FILE_ENV] = join(spec.workDir, TOKEN_FILE_NAME);
    if (!account.home) env["HOME"] = spec.workDir;
    const tools = spec.privateTmp && switchUser ? PRIVATE_TMP : undefined;
    const privateTmp = tools !== undefined;
    env["TMPDIR"] = privateTmp ? "/tmp" : join(spec.workDir, TMP_DIR_NAME);
    const argv = spec.argv.map((a) => expandArg(a, env));
    // "node" means the node manager's own Node binary (or its localized copy), so containers run the same runtime
    // wherever PATH points.
    if (argv[0] === "node") argv[0] = nodeBinary;
    const program = argv[0] ?? "?";
    // Where util-linux's setpriv is there, the command runs with no_new_privs: no setuid program (su, sudo, passwd)
    // and no file capability raises what it may do, so it never acts as root, whatever it runs. With a private /tmp
    // the process starts as root in a mount namespace of its own, mounts, and setpriv drops to the account.
    if (tools) argv.unshift(...privateTmpPrelude(spec, tools));
    else if (SETPRIV) argv.unshift(SETPRIV, "--no-new-privs", "--");
    const spawnAs = switchUser && !privateTmp;
    const [out, err, pidFile] = createWorkDir(spec.workDir, switchUser ? account : undefined, {
      tokens,
      links: spec.links ?? {},
      outputDir: !spec.isAm,
    });
    try {
      const procsFiles = cgroups.create(spec.containerId, spec.vcoresMilli, spec.memoryMb);
      const [cmd, args] = procsFiles.length > 0 ? wrapForCgroup(argv) : wrapForNice(argv);
      this.child = spawn(cmd, args, {
        cwd: spec.workDir,
        env,
        stdio: [procsFiles.length > 0 ? "pipe" : "ignore", out, err],
        detached: true,
        ...(spawnAs ? { uid: account.uid, gid: account.gid } : {}),
      });
      this.startedMs = nowMs;
      this.pid = this.child.pid ?? -1;
      if (this.pid > 0) {
        // Before the event loop runs, so the child is not reaped yet and its start time is still readable. The record
        // (pid, start time, cgroups) is what a cleanup after a crash trusts; the bare pid file is for people and tools
        // that read the work directory, and no cleanup acts on it (a pid alone may have been reused, issue 11).
        recordContainerProcess(spec.workDir, this.pid, procsFiles);
        writeSync(pidFile, String(this.pid));
        if (procsFiles.length > 0) this.joinCgroups(procsFiles);
        // Without a cgroup's CPU weight, the lowest scheduling priority the kernel offers an unprivileged process: the
        // primary's burst takes the CPU at once (what the container forks inherits it). `nice` starts it there;
        // without the `nice` program it is lowered just after the spawn.
        else if (cmd !== NICE) lowestPriority(this.pid);
      }
    } finally {
      for (const fd of [out, err, pidFile]) closeSync(fd);
    }
    this.exited = new Promise((resolve) => {
      this.child.once("error", (e) => {
        this.complete(127, `could not start ${program}: ${e.message}`);
        onExit(this);
        resolve();
      });
      this.child.once("exit", (code, signal) => {
        this.complete(code ?? 128, signal ? `killed by ${signal}` : `exit code ${code ?? "?"}`);
        onExit(this);
        resolve();
      });
    });
  }

  /**
   * Puts the held process (see `wrapForCgroup`) in its cgroups and lets it go on; kills it when a group cannot take
   * it. The node manager writes the pid itself: joining takes privileges the container's account lacks (cgroup v2
   * asks for write access to the cgroup.procs of the common ancestor of both groups, the root's).
   */
  private joinCgroups(procsFiles: string[]): void {
    const gate = this.child.stdin;
    try {
      for (const f of procsFiles) writeFileSync(f, String(this.pid));
    } catch (e) {
      this.child.once("exit", () => this.cgroups.remove(this.spec.containerId));
      this.signal("SIGKILL");
      throw new HarvestError(
        "CONTAINER_LAUNCH_FAILED",
        `could not put ${this.spec.containerId} in its cgroup: ${errorMessage(e)}`,
      );
    }
    // The process may be gone already (killed at once): its end of the pipe is closed then, which is no error here.
    gate?.on("error", () => {});
    gate?.end("\n");
  }

  /** Resolves once the process has exited. */
  waitForExit(): Promise<void> {
    return this.exited;
  }

  /**
   * Ends the container for `cause`: throttles it to the kernel's minimum at once (when in a cgroup), sends SIGTERM to
   * its process group, and SIGKILL after `graceMs`. The first cause given wins.
   */
  kill(cause: ExitCause, graceMs: number): void {
    if (this.state === "COMPLETE") return;
    this.killCause ??= cause;
    try {
      this.cgroups.setLimit(this.spec.containerId, 0);
    } catch {
      // The group may be gone already; the signals below still work.
    }
    this.signal("SIGTERM");
    if (!this.killTimer) {
      this.killTimer = setTimeout(() => {
        // A process throttled to the minimum can only run its exit path when its quota allows: give the allocation
        // back for the last moment so SIGKILL takes effect at once (measured: exit 412 ms p50 later without this).
        try {
          this.cgroups.setLimit(this.spec.containerId, this.spec.vcoresMilli);
        } catch {
          // Group already gone.
        }
        this.signal("SIGKILL");
      }, graceMs);
      this.killTimer.unref();
    }
  }

  /** Sends SIGKILL to the whole process group now (used on node manager shutdown). */
  killNow(cause: ExitCause): void {
    if (this.state === "COMPLETE") return;
    this.killCause ??= cause;
    this.signal("SIGKILL");
  }

  private signal(sig: NodeJS.Signals): void {
    if (this.pid <= 0) return;
    try {
      process.kill(-this.pid, sig);
    } catch {
      try {
        process.kill(this.pid, sig);
      } catch {
        // Already gone.
      }
    }
  }

  private complete(code: number, why: string): void {
    if (this.state === "COMPLETE") return;
    if (this.killTimer) clearTimeout(this.killTimer);
    // Reap anything the container left behind in its process group.
    this.signal("SIGKILL");
    this.state = "COMPLETE";
    this.exitCode = code;
    this.finishedMs = Date.now();
    // The kernel's OOM killer inside the container's own memory cgroup: it used more than it was granted.
    const oom = !this.killCause && code !== 0 && this.cgroups.oomKilled(this.spec.containerId);
    this.cause = this.killCause ?? (code === 0 ? "SUCCEEDED" : oom ? "EXCEEDED_MEMORY" : "FAILED");
    this.diagnostics = this.killCause
      ? `${this.killCause.toLowerCase().replace(/_/g, " ")} (${why})`
      : oom
        ? `killed for using more than its ${this.spec.memoryMb} MB of memory (${why})`
        : why;
    this.cgroups.remove(this.spec.containerId);
  }
}

/**
 * Holds the command until the node manager has put it in its cgroups, so that nothing it forks escapes the limits:
 * `sh` waits for a line on stdin (sent once its pid is in every cgroup.procs), then execs the command with stdin from
 * /dev/null. If the node manager dies first, `read` sees the end of the pipe and the command never starts.
 */
function wrapForCgroup(argv: string[]): [string, string[]] {
  return ["/bin/sh", ["-c", 'read -r go && exec "$@" </dev/null', "harvest-container", ...argv]];
}

/**
 * Creates a container's work directory (mode 0700: the container's scratch space and logs, which the node manager also
 * reads) with its stdout, stderr and pid files, and returns their descriptors; with `tokens`, also its token file
 * (mode 0600); for a task, its output directory; and a link to each localized resource. With an `owner` (the container's account, when it is not the node manager's own) all of them become
 * that account's, and the directories above must let it through (checked). The files are created before the account
 * owns the directory, and written through their descriptors, so nothing the container puts in its directory can
 * redirect the node manager's writes.
 */
function createWorkDir(
  workDir: string,
  owner: ContainerAccount | undefined,
  contents: { tokens: ContainerTokens; links: Record<string, string>; outputDir: boolean },
): [number, number, number] {
  const { tokens, links } = contents;
  mkdirSync(dirname(workDir), { recursive: true });
  if (owner) assertCanEnter(dirname(workDir), owner, "its work directory");
  mkdirSync(workDir, { mode: 0o700 });
  const create = fsConstants.O_WRONLY | fsConstants.O_CREAT | fsConstants.O_EXCL | fsConstants.O_NOFOLLOW;
  const fds: number[] = [];
  try {
    for (const [name, append] of [
      ["stdout", true],
      ["stderr", true],
      ["pid", false],
    ] as const) {
      fds.push(openSync(join(workDir, name), create | (append ? fsConstants.O_APPEND : 0), 0o644));
      if (owner) fchownSync(fds[fds.length - 1]!, owner.uid, owner.gid);
    }
    if (Object.keys(tokens).length > 0) {
      const fd = openSync(join(workDir, TOKEN_FILE_NAME), create, 0o600);
      try {
        if (owner) fchownSync(fd, owner.uid, owner.gid);
        writeSync(fd, JSON.stringify(tokens));
      } finally {
        closeSync(fd);
      }
    }
    // Its temporary files (TMPDIR, or its private /tmp), removed with the application's account (retire-account.ts).
    mkdirSync(join(workDir, TMP_DIR_NAME), { mode: 0o700 });
    if (owner) chownSync(join(workDir, TMP_DIR_NAME), owner.uid, owner.gid);
    // A task's outputs, which the shuffle service serves once it has exited (shuffle-service.ts).
    if (contents.outputDir) {
      mkdirSync(join(workDir, OUTPUT_DIR_NAME), { mode: 0o700 });
      if (owner) chownSync(join(workDir, OUTPUT_DIR_NAME), owner.uid, owner.gid);
    }
    for (const [name, target] of Object.entries(links)) {
      const link = join(workDir, name);
      symlinkSync(target, link);
      if (owner) lchownSync(link, owner.uid, owner.gid);
    }
    if (owner) chownSync(workDir, owner.uid, owner.gid);
  } catch (e) {
    for (const fd of fds) closeSync(fd);
    throw e;
  }
  return [fds[0]!, fds[1]!, fds[2]!];
}

/**
 * Opens a container's `stdout` or `stderr` for the node manager to read. The work directory belongs to the container's
 * account, which may have put anything there under those names: a symbolic link is not followed, a FIFO does not
 * block, and anything but a regular file of the directory's owner is refused (a hard link to another's file included),
 * so the node manager, root, never reads another file on a container's behalf.
 */
export async function openContainerLog(workDir: string, stream: "stdout" | "stderr"): Promise<FileHandle> {
  const fh = await open(join(workDir, stream), fsConstants.O_RDONLY | fsConstants.O_NOFOLLOW | fsConstants.O_NONBLOCK);
  const st = await fh.stat();
  if (!st.isFile() || st.uid !== lstatSync(workDir).uid) {
    await fh.close();
    throw new HarvestError("CONTAINER_NOT_FOUND", `${stream} of ${workDir} is not the container's log file`);
  }
  return fh;
}

/** The `nice` program, when the server has one. */
const NICE = ["/usr/bin/nice", "/bin/nice"].find((p) => existsSync(p));

/** util-linux's `setpriv`, when the server has one. */
const SETPRIV = ["/usr/bin/setpriv", "/bin/setpriv"].find((p) => existsSync(p));

/** The work directory's folder that is a container's /tmp (or TMPDIR). */
export const TMP_DIR_NAME = "tmp";

/** util-linux's programs a private /tmp takes, when the server has all three. */
export const PRIVATE_TMP = ((): { unshare: string; mount: string; setpriv: string } | undefined => {
  const unshare = ["/usr/bin/unshare", "/bin/unshare"].find((p) => existsSync(p));
  const mount = ["/usr/bin/mount", "/bin/mount"].find((p) => existsSync(p));
  return unshare && mount && SETPRIV ? { unshare, mount, setpriv: SETPRIV } : undefined;
})();

/**
 * Why containers cannot have a private /tmp on this server (a missing program, or mount namespaces refused, as in a
 * container without CAP_SYS_ADMIN), or undefined when they can. Tried once, by the node manager at its start.
 */
export function privateTmpUnsupported(): string | undefined {
  if (!PRIVATE_TMP) return "util-linux's unshare, mount and setpriv are not all installed";
  const r = spawnSync(PRIVATE_TMP.unshare, ["--mount", "--propagation", "private", "--", "/bin/true"], {
    stdio: ["ignore", "ignore", "pipe"],
    encoding: "utf8",
    timeout: 10_000,
  });
  return r.status === 0 ? undefined : `unshare --mount failed: ${(r.stderr || r.error?.message || "").trim()}`;
}

/**
 * What runs before a container's command to give it a private /tmp: a new mount namespace (unshare, as root), where
 * /tmp and /var/tmp become its work directory's `tmp` and /dev/shm a fresh tmpfs of at most its memory, then setpriv
 * drops to the container's account (uid, gid, no supplementary groups, no_new_privs) and execs the command. Every step
 * execs the next, so the container's pid stays the one the node manager spawned.
 *
 * What the container must still reach below /tmp or /var/tmp (a test cluster's whole directory lives there) is bound
 * into the private directory first, under the name of its top folder there, with what is mounted inside it (a
 * recursive bind: the masks a host's mount namespace has over other hosts' directories stay), and comes along with
 * it; nothing else of the server's /tmp does. The private
 * directory is mounted through a descriptor opened before: it may itself lie below /tmp. These mounts exist in the
 * container's namespace only: on the server, the folders they sit on are empty.
 */
function privateTmpPrelude(spec: ContainerSpec, tools: NonNullable<typeof PRIVATE_TMP>): string[] {
  const keep = tmpPathsToKeep(spec.privateTmp?.keep ?? []);
  const script =
    'm="$1"; t="$2"; s="$3"; n="$4"; shift 4; ' +
    'while [ "$n" -gt 0 ]; do d="$t/$2"; mkdir -p "$d" && "$m" --rbind "$1" "$d" || exit 125; ' +
    "shift 2; n=$((n - 1)); done; " +
    'exec 3<"$t" && "$m" --no-canonicalize --rbind /proc/self/fd/3 /tmp && ' +
    '{ [ ! -d /var/tmp ] || "$m" --no-canonicalize --rbind /proc/self/fd/3 /var/tmp; } && exec 3<&- && ' +
    '{ [ ! -d /dev/shm ] || "$m" -t tmpfs -o "size=$s,mode=1777,nosuid,nodev" harvest-shm /dev/shm; } && ' +
    'exec "$@"';
  const { uid, gid } = spec.account;
  return [
    tools.unshare,
    "--mount",
    "--propagation",
    "private",
    "--",
    "/bin/sh",
    "-c",
    script,
    "harvest-private-tmp",
    tools.mount,
    join(spec.workDir, TMP_DIR_NAME),
    `${Math.max(1, spec.memoryMb)}m`,
    String(keep.length),
    ...keep.flatMap((k) => [k.source, k.below]),
    tools.setpriv,
    `--reuid=${uid}`,
    `--regid=${gid}`,
    "--clear-groups",
    "--no-new-privs",
    "--",
  ];
}

/**
 * The folders directly in /tmp or /var/tmp that hold one of `paths` (which a container must still reach once its
 * /tmp is private): each (`source`) with its name there (`below`), one per name.
 */
export function tmpPathsToKeep(paths: readonly string[]): { source: string; below: string }[] {
  const byName = new Map<string, string>();
  for (const p of paths) {
    if (!p) continue;
    const m = /^(\/tmp|\/var\/tmp)\/([^/]+)/.exec(resolve(p));
    if (m && m[2] !== "." && m[2] !== ".." && !byName.has(m[2]!)) byName.set(m[2]!, `${m[1]}/${m[2]}`);
  }
  return [...byName].map(([below, source]) => ({ source, below }));
}

/** Runs the command at nice 19 from its first instruction, so that nothing it forks early escapes (no cgroups). */
function wrapForNice(argv: string[]): [string, string[]] {
  const [cmd, ...rest] = argv;
  if (!NICE) return [cmd ?? "", rest];
  return [NICE, ["-n", String(constants.priority.PRIORITY_LOW), ...argv]];
}

/** Nice 19 for a process (errors ignored: it may have exited already). */
function lowestPriority(pid: number): void {
  try {
    setPriority(pid, constants.priority.PRIORITY_LOW);
  } catch {
    // Gone, or not ours to change.
  }
}
