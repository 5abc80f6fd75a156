/**
 * One container: a real child process in its own process group, with a working directory, stdout/stderr log files, an
 * optional cgroup, and an exit cause decided by whoever ended it (the primary tenant, the user, the resource manager).
 */
import { spawn } from "node:child_process";
import type { ChildProcess } from "node:child_process";
import { closeSync, existsSync, mkdirSync, openSync, writeFileSync } from "node:fs";
import { constants, setPriority } from "node:os";
import { join } from "node:path";
import { recordContainerProcess } from "../common/container-leftovers.js";
import type { CgroupController } from "./cgroups.js";

/** How a container ended, as the wire names it. */
export type ExitCause =
  | "SUCCEEDED"
  | "FAILED"
  | "PREEMPTED_BY_PRIMARY"
  | "PREEMPTED_BY_POWER"
  | "KILLED_BY_USER"
  | "LOST"
  | "RELEASED"
  | "EXCEEDED_MEMORY";

/** What starts a container. */
export interface ContainerSpec {
  containerId: string;
  appId: string;
  argv: string[];
  env: Record<string, string>;
  vcoresMilli: number;
  memoryMb: number;
  isAm: boolean;
  /** The job's priority (0..100, from the grant); the capping agent throttles and kills the least critical first. */
  jobPriority?: number;
  workDir: string;
}

/** Replaces `${NAME}` in an argument with the container environment's value (unknown names are left as they are). */
export function expandArg(arg: string, env: Record<string, string>): string {
  return arg.replace(/\$\{([A-Za-z_][A-Za-z0-9_]*)\}/g, (whole, name: string) => env[name] ?? whole);
}

// Only these variables pass from the node manager's own environment into containers.
const INHERITED_ENV = ["PATH", "HOME", "LANG", "TZ", "TMPDIR", "USER", "HARVEST_LOG_LEVEL", "HARVEST_SHARED_DATA"];

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
    mkdirSync(spec.workDir, { recursive: true });
    const env: Record<string, string> = {};
    for (const k of INHERITED_ENV) {
      const v = process.env[k];
      if (v !== undefined) env[k] = v;
    }
    Object.assign(env, spec.env);
    const argv = spec.argv.map((a) => expandArg(a, env));
    // "node" means the node manager's own Node binary, so containers run the same runtime wherever PATH points.
    if (argv[0] === "node") argv[0] = process.execPath;
    const procsFiles = cgroups.create(spec.containerId, spec.vcoresMilli, spec.memoryMb);
    const [cmd, args] = procsFiles.length > 0 ? wrapForCgroup(argv, procsFiles) : wrapForNice(argv);
    const out = openSync(join(spec.workDir, "stdout"), "a");
    const err = openSync(join(spec.workDir, "stderr"), "a");
    try {
      this.child = spawn(cmd, args, { cwd: spec.workDir, env, stdio: ["ignore", out, err], detached: true });
    } finally {
      closeSync(out);
      closeSync(err);
    }
    this.startedMs = nowMs;
    this.pid = this.child.pid ?? -1;
    // Without a cgroup's CPU weight, the lowest scheduling priority the kernel offers an unprivileged process: the
    // primary's burst takes the CPU at once (what the container forks inherits it). `nice` starts it there; without
    // the `nice` program it is lowered just after the spawn.
    if (procsFiles.length === 0 && cmd !== NICE && this.pid > 0) lowestPriority(this.pid);
    if (this.pid > 0) {
      // Before the event loop runs, so the child is not reaped yet and its start time is still readable. The record
      // (pid, start time, cgroups) is what a cleanup after a crash trusts; the bare pid file is for people and tools
      // that read the work directory, and no cleanup acts on it (a pid alone may have been reused, issue 11).
      recordContainerProcess(spec.workDir, this.pid, procsFiles);
      writeFileSync(join(spec.workDir, "pid"), String(this.pid));
    }
    this.exited = new Promise((resolve) => {
      this.child.once("error", (e) => {
        this.complete(127, `could not start ${argv[0] ?? "?"}: ${e.message}`);
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
 * Makes the process join its cgroup before exec, so that nothing it forks escapes the limit: `sh -c` writes its own
 * pid into each cgroup.procs file and then execs the real command.
 */
function wrapForCgroup(argv: string[], procsFiles: string[]): [string, string[]] {
  const [cmd, ...rest] = argv;
  if (procsFiles.length === 0) return [cmd ?? "", rest];
  const joins = procsFiles.map((_, i) => `echo $$ > "$${i + 1}"`).join(" && ");
  const script = `${joins} && shift ${procsFiles.length} && exec "$@"`;
  return ["/bin/sh", ["-c", script, "harvest-container", ...procsFiles, ...argv]];
}

/** The `nice` program, when the server has one. */
const NICE = ["/usr/bin/nice", "/bin/nice"].find((p) => existsSync(p));

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
