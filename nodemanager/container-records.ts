/**
 * What a node manager keeps of its containers on disk, so that a run that dies loses nothing it acknowledged: who
 * submitted each job (`<dataDir>/containers/<appId>/owner.json`), how each container ended (`<workDir>.exit.json`),
 * the containers' logs and statuses; and, for a run that crashes, the watchdog that kills its containers and the sweep of the
 * containers a previous run left behind.
 */
import { spawn } from "node:child_process";
import type { ChildProcess } from "node:child_process";
import { existsSync, readdirSync, readFileSync } from "node:fs";
import type { FileHandle } from "node:fs/promises";
import { dirname, join } from "node:path";
import { Readable } from "node:stream";
import { writeFileAtomic } from "../common/atomic-file.js";
import { requireAccess } from "../common/auth.js";
import type { Principal } from "../common/auth.js";
import { killContainerLeftovers } from "../common/container-leftovers.js";
import { errorMessage, HarvestError } from "../common/errors.js";
import { isContainerId } from "../common/ids.js";
import { logRange } from "../common/log-view.js";
import type { LogStreamPart } from "../common/log-view.js";
import type { Logger } from "../common/log.js";
import { distEntry } from "../common/paths.js";
import type { ContainerStatus } from "../proto/generated/harvest/v1/ContainerStatus.js";
import { openContainerLog } from "./container.js";
import type { ContainerProcess } from "./container.js";
import { TASK_ENV } from "../common/dag-spec.js";

/** Per job, in `<dataDir>/containers/<appId>/`: who submitted it (see the node manager's checkContainerAccess). */
const OWNER_FILE = "owner.json";
/** How a container ended, beside its work directory: `<workDir>.exit.json`. */
const EXIT_SUFFIX = ".exit.json";

/** The most bytes of a log one read returns (the web pages' whole log included). */
export const MAX_LOG_READ_BYTES = 64 * 1024 * 1024;

function exitFile(workDir: string): string {
  return `${workDir}${EXIT_SUFFIX}`;
}

/** The on-disk records of one node manager's containers under `<dataDir>/containers`. */
export class ContainerRecords {
  /** `liveWorkDir` answers the work directory of a container this run still holds (running or not yet acknowledged). */
  constructor(
    private readonly dataDir: string,
    private readonly nodeId: string,
    private readonly log: Logger,
    private readonly liveWorkDir: (containerId: string) => string | undefined,
  ) {}

  /** Remembers a job's submitter once its first container here has started (the grant's token proved it). */
  recordOwner(appId: string, user: string): void {
    const file = join(this.dataDir, "containers", appId, OWNER_FILE);
    if (!existsSync(file)) writeFileAtomic(file, JSON.stringify({ appId, user }) + "\n", 0o644);
  }

  /** The job and submitter of a container this node ran, from the record its first launch wrote. */
  ownerOf(containerId: string): { appId: string; user: string } | undefined {
    const dir = this.findContainerDir(containerId);
    if (!dir) return undefined;
    try {
      const o = JSON.parse(readFileSync(join(dirname(dir), OWNER_FILE), "utf8")) as { appId?: unknown; user?: unknown };
      return typeof o.appId === "string" && typeof o.user === "string" ? { appId: o.appId, user: o.user } : undefined;
    } catch {
      return undefined;
    }
  }

  /**
   * With TLS (`secure`): the resource manager may act on any container; a job manager only on its own job's; a person
   * only on the containers of jobs they submitted, unless an admin. The job's submitter comes from the container grant
   * (covered by its token), kept in `<dataDir>/containers/<appId>/owner.json` where the container cannot write.
   * Throws INVALID_ARGUMENT for a malformed id, else the gate's refusal.
   */
  checkAccess(secure: boolean, who: Principal, containerId: string, action: string): void {
    if (!secure || who.role === "daemon" || who.role === "admin") return;
    if (!isContainerId(containerId))
      throw new HarvestError("INVALID_ARGUMENT", `bad container id ${JSON.stringify(containerId)}`, {
        details: { field: "containerId" },
      });
    const owner = this.ownerOf(containerId);
    const allowed = owner !== undefined && (who.role === "am" ? who.appId === owner.appId : who.name === owner.user);
    requireAccess(allowed, who, `${action} container ${containerId}`);
  }

  /** A container's stdout or stderr, its last `tailBytes` (64 KiB when 0), and its whole length. */
  async readLog(req: {
    containerId: string;
    stream: string;
    tailBytes: number;
  }): Promise<{ data: Buffer; totalBytes: number }> {
    const r = await this.readLogRange(req.containerId, req.stream, -(req.tailBytes > 0 ? req.tailBytes : 64 * 1024));
    return { data: r.data, totalBytes: r.totalBytes };
  }

  /**
   * Part of a container's stdout or stderr: from byte `start` (a negative `start`: that many bytes before the end) to
   * the end, at most `maxBytes`; with the log's whole length and the offset the part begins at.
   */
  async readLogRange(
    containerId: string,
    stream: string,
    start: number,
    maxBytes = MAX_LOG_READ_BYTES,
  ): Promise<{ data: Buffer; totalBytes: number; offset: number }> {
    const fh = await this.openLog(containerId, stream);
    try {
      const { offset, length, totalBytes } = logRange((await fh.stat()).size, start, maxBytes);
      const data = Buffer.alloc(length);
      await fh.read(data, 0, length, offset);
      return { data, totalBytes, offset };
    } finally {
      await fh.close();
    }
  }

  /** The same part, whatever its size, as a stream read from the file (a script's whole log). */
  async streamLogRange(containerId: string, stream: string, start: number): Promise<LogStreamPart> {
    const fh = await this.openLog(containerId, stream);
    try {
      const range = logRange((await fh.stat()).size, start, Number.MAX_SAFE_INTEGER);
      // Only what the log held when asked: a container still writing adds nothing to this answer.
      const body =
        range.length > 0
          ? fh.createReadStream({ start: range.offset, end: range.offset + range.length - 1, autoClose: true })
          : Readable.from([]);
      if (range.length === 0) await fh.close();
      return { stream: body, ...range };
    } catch (err) {
      await fh.close();
      throw err;
    }
  }

  /** Opens a container's log, checking the id and stream. */
  private async openLog(containerId: string, stream: string): Promise<FileHandle> {
    if (!isContainerId(containerId))
      throw new HarvestError("INVALID_ARGUMENT", `bad container id ${JSON.stringify(containerId)}`, {
        details: { field: "containerId" },
      });
    const which = stream || "stdout";
    if (which !== "stdout" && which !== "stderr")
      throw new HarvestError("INVALID_ARGUMENT", 'stream must be "stdout" or "stderr"', {
        details: { field: "stream" },
      });
    const dir = this.findContainerDir(containerId);
    if (!dir) throw new HarvestError("CONTAINER_NOT_FOUND", `no logs for ${containerId} on ${this.nodeId}`);
    return openContainerLog(dir, which);
  }

  /**
   * Every container this node ran whose work directory is still here, newest application first, with its job, owner,
   * how it ended (undefined while it runs) and its work directory.
   */
  listContainers(): { containerId: string; appId: string; user: string; workDir: string; exit?: ContainerStatus }[] {
    const root = join(this.dataDir, "containers");
    const out: { containerId: string; appId: string; user: string; workDir: string; exit?: ContainerStatus }[] = [];
    let apps: string[];
    try {
      apps = readdirSync(root).sort().reverse();
    } catch {
      return out;
    }
    for (const app of apps) {
      let names: string[];
      try {
        names = readdirSync(join(root, app)).filter((n) => isContainerId(n));
      } catch {
        continue;
      }
      for (const id of names.sort().reverse()) {
        const owner = this.ownerOf(id);
        const workDir = join(root, app, id);
        let exit: ContainerStatus | undefined;
        try {
          exit = JSON.parse(readFileSync(exitFile(workDir), "utf8")) as ContainerStatus;
        } catch {
          exit = undefined;
        }
        out.push({
          containerId: id,
          appId: owner?.appId ?? app,
          user: owner?.user ?? "",
          workDir,
          ...(exit ? { exit } : {}),
        });
      }
    }
    return out;
  }

  /** The work directory of a container this node ran, live or on disk. */
  private findContainerDir(containerId: string): string | undefined {
    const live = this.liveWorkDir(containerId);
    if (live) return live;
    const root = join(this.dataDir, "containers");
    if (!existsSync(root)) return undefined;
    for (const app of readdirSync(root)) {
      const dir = join(root, app, containerId);
      if (existsSync(dir)) return dir;
    }
    return undefined;
  }

  /**
   * Writes how a container ended beside its work directory (where only this node manager writes), so that a run of
   * this node manager that dies before reporting it does not lose it: the next run reports it at registration (a task
   * that finished is not re-run because its node manager died a moment later).
   */
  persistExit(workDir: string, status: ContainerStatus): void {
    try {
      writeFileAtomic(exitFile(workDir), JSON.stringify(status) + "\n", 0o600);
    } catch (err) {
      this.log.warn("could not record a container's exit", {
        containerId: status.containerId,
        error: errorMessage(err),
      });
    }
  }

  /** The exits a previous run recorded that finished at `cutoffMs` or later (reported until recorded), by id. */
  restoreExits(cutoffMs: number): Map<string, ContainerStatus> {
    const root = join(this.dataDir, "containers");
    const restored = new Map<string, ContainerStatus>();
    let apps: string[];
    try {
      apps = readdirSync(root);
    } catch {
      return restored;
    }
    for (const app of apps) {
      let files: string[];
      try {
        files = readdirSync(join(root, app)).filter((f) => f.endsWith(EXIT_SUFFIX));
      } catch {
        continue;
      }
      for (const f of files) {
        try {
          const st = JSON.parse(readFileSync(join(root, app, f), "utf8")) as ContainerStatus;
          if (typeof st.containerId !== "string" || !isContainerId(st.containerId)) continue;
          if (Number(st.finishedMs ?? 0) < cutoffMs) continue;
          restored.set(st.containerId, { ...st, nodeId: this.nodeId, state: "COMPLETE" });
        } catch {
          // A torn record: that exit is lost, as it would have been without it.
        }
      }
    }
    return restored;
  }
}

/**
 * Starts the watchdog that kills this node manager's containers when it dies (orphan-reaper.ts). It holds the read
 * end of a pipe whose write end only this process has; it never keeps this process alive.
 */
export function startOrphanReaper(dataDir: string, log: Logger): ChildProcess | undefined {
  try {
    const child = spawn(process.execPath, [distEntry("nodemanager/orphan-reaper.js"), dataDir], {
      stdio: ["pipe", "ignore", "inherit"],
      detached: true,
    });
    child.on("error", (err) => log.warn("orphan reaper could not start", { error: errorMessage(err) }));
    child.unref();
    (child.stdin as unknown as { unref?: () => void } | null)?.unref?.();
    return child;
  } catch (err) {
    log.warn("orphan reaper could not start; containers may outlive a crash", { error: errorMessage(err) });
    return undefined;
  }
}

/** Kills container processes a previous run of this node manager left behind (their work is already lost). */
export function killLeftovers(dataDir: string, log: Logger): void {
  // Only processes proven to be the containers' own (by cgroup, or pid plus start time) are killed: issue 11.
  const { killed, skipped } = killContainerLeftovers(dataDir);
  if (killed > 0 || skipped > 0) log.info("leftover containers from a previous run", { killed, skipped });
}

/** A container's status as the resource manager and clients see it (`powerWatts`: the capping agent's estimate). */
export function containerStatus(c: ContainerProcess, nodeId: string, powerWatts: number): ContainerStatus {
  const env = c.spec.env;
  return {
    containerId: c.spec.containerId,
    appId: c.spec.appId,
    state: c.state,
    exitCode: c.exitCode,
    cause: c.cause ?? "EXIT_CAUSE_UNSPECIFIED",
    diagnostics: c.diagnostics,
    resource: { vcoresMilli: c.spec.vcoresMilli, memoryMb: c.spec.memoryMb },
    startedMs: c.startedMs,
    finishedMs: c.finishedMs,
    isAm: c.spec.isAm,
    priority: c.spec.priority ?? 0,
    nodeId,
    powerWatts,
    vertex: env[TASK_ENV.vertex] ?? "",
    taskIndex: Number(env[TASK_ENV.taskIndex] ?? 0) || 0,
  };
}
