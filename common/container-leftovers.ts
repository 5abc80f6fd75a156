/**
 * Finding and killing container processes that a node manager which died left behind, without ever killing a process
 * that is not one of them. A bare pid proves nothing (pids wrap within hours on a busy server, issue 11), so at launch
 * each container gets a record of its pid, the process's start time and boot, and the cgroups it joined; a cleanup
 * kills a container's processes only through its own cgroup or when pid, start time and boot all still match. The
 * record lies beside the container's work directory, in its job's directory, which only the node manager writes: the
 * work directory belongs to the container's account, which could put a forged record there (naming a process of
 * root's for the cleanup to kill).
 */
import {
  closeSync,
  constants,
  existsSync,
  fstatSync,
  openSync,
  readdirSync,
  readFileSync,
  writeFileSync,
} from "node:fs";
import { basename, dirname, join } from "node:path";
import { writeFileAtomic } from "./atomic-file.js";
import { procStatFields } from "./proc-stats.js";

/** The launch record of the container whose work directory is `workDir`: `<workDir>.process.json`, beside it. */
export function containerProcessFile(workDir: string): string {
  return join(dirname(workDir), `${basename(workDir)}.process.json`);
}

/** What a container's launch record says about its process. */
export interface ContainerProcessRecord {
  pid: number;
  /** Field 22 of /proc/<pid>/stat at launch (clock ticks since boot); absent when it could not be read. */
  startTime?: string;
  /** The kernel's boot id at launch: a start time only identifies a process within one boot. */
  bootId?: string;
  /** The `cgroup.procs` files the container's processes joined (one per hierarchy; none without cgroups). */
  cgroups: string[];
}

/** What a cleanup did, counted in containers. */
export interface ContainerLeftoversResult {
  /** Containers with at least one process killed (proven theirs by cgroup, or by pid and start time). */
  killed: number;
  /** Containers whose recorded pid is alive but not provably theirs (a reused pid, or an old record without a start time). */
  skipped: number;
  /** Containers with nothing left to kill. */
  gone: number;
}

interface ProcStat {
  /** False for a zombie: it runs nothing, though its pid (and process group) stay taken until it is reaped. */
  running: boolean;
  pgid: number;
  startTime: string;
}

/** Fields 3 (state), 5 (pgrp) and 22 (starttime) of /proc/<pid>/stat; undefined when the process does not exist. */
function readProcStat(pid: number): ProcStat | undefined {
  const rest = procStatFields(pid);
  if (!rest) return undefined;
  // rest[0] is field 3 (state): field k is rest[k - 3].
  const state = rest[0];
  const pgid = Number(rest[2]);
  const startTime = rest[19];
  if (!Number.isInteger(pgid) || startTime === undefined || !/^\d+$/.test(startTime)) return undefined;
  return { running: state !== "Z" && state !== "X", pgid, startTime };
}

/**
 * The start time of a process (field 22 of /proc/<pid>/stat, clock ticks since boot), or undefined when it does not
 * exist. Together with the pid (and the boot) it names one process: the kernel never gives two processes the same pid
 * at the same tick.
 */
export function processStartTime(pid: number): string | undefined {
  return readProcStat(pid)?.startTime;
}

/** The kernel's random boot id, or undefined where /proc does not offer it. */
function currentBootId(): string | undefined {
  try {
    return readFileSync("/proc/sys/kernel/random/boot_id", "utf8").trim() || undefined;
  } catch {
    return undefined;
  }
}

/**
 * Writes the launch record of a container's process beside its work directory, atomically (tmp + rename), so that a
 * cleanup after a crash can prove which processes are the container's. Call it right after spawning, before the
 * event loop runs: until then Node has not reaped the child, so even one that already exited still has its start time.
 */
export function recordContainerProcess(workDir: string, pid: number, cgroupProcsFiles: readonly string[] = []): void {
  const startTime = processStartTime(pid);
  const bootId = currentBootId();
  const record: ContainerProcessRecord = {
    pid,
    ...(startTime !== undefined ? { startTime } : {}),
    ...(bootId !== undefined ? { bootId } : {}),
    cgroups: [...cgroupProcsFiles],
  };
  writeFileAtomic(containerProcessFile(workDir), JSON.stringify(record) + "\n");
}

/** Reads a launch record; undefined when the file is missing or is not a record this module wrote. */
export function readContainerProcess(workDir: string): ContainerProcessRecord | undefined {
  let raw: unknown;
  try {
    raw = JSON.parse(readFileSync(containerProcessFile(workDir), "utf8"));
  } catch {
    return undefined;
  }
  if (typeof raw !== "object" || raw === null) return undefined;
  const r = raw as Record<string, unknown>;
  if (typeof r.pid !== "number" || !Number.isInteger(r.pid)) return undefined;
  return {
    pid: r.pid,
    ...(typeof r.startTime === "string" ? { startTime: r.startTime } : {}),
    ...(typeof r.bootId === "string" ? { bootId: r.bootId } : {}),
    cgroups: Array.isArray(r.cgroups) ? r.cgroups.filter((c): c is string => typeof c === "string") : [],
  };
}

/**
 * Kills whatever is left of the containers recorded under a node manager's data directory
 * (`<nmDataDir>/containers/<app>/<container>/`), for use once that node manager is dead or before it starts again.
 * For each container: every process in its recorded cgroups (members by construction), and its process group when
 * the recorded pid is alive with the recorded start time and boot. A live pid that cannot be proven the container's
 * (a reused pid, or an old bare `pid` file) is left alone. Never throws.
 */
export function killContainerLeftovers(nmDataDir: string): ContainerLeftoversResult {
  const result: ContainerLeftoversResult = { killed: 0, skipped: 0, gone: 0 };
  const root = join(nmDataDir, "containers");
  const bootId = currentBootId();
  for (const app of listDirs(root)) {
    for (const id of listDirs(join(root, app))) {
      const outcome = killLeftover(join(root, app, id), id, bootId);
      result[outcome] += 1;
    }
  }
  return result;
}

function listDirs(dir: string): string[] {
  try {
    return readdirSync(dir, { withFileTypes: true })
      .filter((e) => e.isDirectory())
      .map((e) => e.name);
  } catch {
    return [];
  }
}

function killLeftover(
  workDir: string,
  containerId: string,
  bootId: string | undefined,
): keyof ContainerLeftoversResult {
  const record = readContainerProcess(workDir);
  if (!record) return legacyPidAlive(workDir) ? "skipped" : "gone";
  // Neither processes nor cgroups survive a reboot: whatever runs under these names now belongs to someone else.
  if (record.bootId !== undefined && bootId !== undefined && record.bootId !== bootId) {
    return isAlive(record.pid) ? "skipped" : "gone";
  }
  let killed = 0;
  for (const procs of record.cgroups) {
    if (isContainerCgroup(procs, containerId)) killed += killCgroup(procs);
  }
  const now = record.pid > 1 ? readProcStat(record.pid) : undefined;
  if (now && record.startTime !== undefined && now.startTime === record.startTime) {
    // Same pid, same start tick, same boot: the container's own process. Its process group (it was spawned as a
    // session leader) holds whatever it forked outside a cgroup.
    if (now.pgid === record.pid) signal(-record.pid);
    signal(record.pid);
    if (now.running) killed += 1;
  } else if (now?.running && killed === 0) {
    return "skipped";
  }
  return killed > 0 ? "killed" : "gone";
}

/**
 * Whether a recorded path is a container's own cgroup: `.../<containerId>/cgroup.procs`, as the node manager creates
 * them. A damaged record naming a parent group (or the root, which holds every process) must never be swept.
 */
function isContainerCgroup(procsFile: string, containerId: string): boolean {
  return basename(procsFile) === "cgroup.procs" && basename(dirname(procsFile)) === containerId;
}

/** SIGKILLs every process in a cgroup; returns how many it signalled. Repeats while members keep appearing (forks). */
function killCgroup(procsFile: string): number {
  const signalled = new Set<number>();
  // cgroup v2 (Linux 5.14+) kills the whole group atomically, forks included.
  const killFile = join(dirname(procsFile), "cgroup.kill");
  if (existsSync(killFile)) {
    try {
      writeFileSync(killFile, "1");
    } catch {
      // Fall back to signalling each member.
    }
  }
  for (let pass = 0; pass < 5; pass++) {
    let fresh = 0;
    for (const pid of readCgroupPids(procsFile)) {
      if (signalled.has(pid) || pid === process.pid) continue;
      signalled.add(pid);
      signal(pid);
      fresh += 1;
    }
    if (fresh === 0) break;
  }
  return signalled.size;
}

function readCgroupPids(procsFile: string): number[] {
  try {
    return readFileSync(procsFile, "utf8")
      .split("\n")
      .filter((l) => /^\d+$/.test(l))
      .map(Number);
  } catch {
    return [];
  }
}

/**
 * Whether an old-format work directory's bare `pid` file names a live process (which we then must not touch). The file
 * is the container's account's: a symbolic link is not followed and a FIFO does not block the cleanup.
 */
function legacyPidAlive(workDir: string): boolean {
  try {
    const fd = openSync(join(workDir, "pid"), constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK);
    try {
      if (!fstatSync(fd).isFile()) return false;
      const pid = Number(readFileSync(fd, "utf8").trim());
      return Number.isInteger(pid) && pid > 0 && isAlive(pid);
    } finally {
      closeSync(fd);
    }
  } catch {
    return false;
  }
}

function isAlive(pid: number): boolean {
  return pid > 0 && readProcStat(pid)?.running === true;
}

function signal(target: number): void {
  try {
    process.kill(target, "SIGKILL");
  } catch {
    // Exited just now, or the group is already empty.
  }
}
