/**
 * CPU accounting from Linux procfs: the machine's busy and idle time from /proc/stat, and the CPU time of a process
 * tree from /proc/<pid>/stat. Reads are synchronous: procfs files are generated in memory and a monitor samples them
 * once per heartbeat.
 */
import { execFileSync } from "node:child_process";
import { existsSync, readFileSync, readdirSync } from "node:fs";
import { join } from "node:path";
import { HarvestError } from "./errors.js";

/** Cumulative CPU time of the whole machine since boot, summed over all cores. */
export interface ProcStatTotals {
  /** Time spent running anything (user, nice, system, irq, softirq, steal), in ms. */
  busyMs: number;
  /** Time idle or waiting for I/O, in ms. */
  idleMs: number;
  /** busyMs + idleMs. */
  totalMs: number;
}

let clockTicksPerSec: number | undefined;

/** getconf by absolute path: a daemon running as root never runs the first one on its PATH. */
const GETCONF = ["/usr/bin/getconf", "/bin/getconf"].find((p) => existsSync(p));

/** The kernel's USER_HZ (`getconf CLK_TCK`), read once; 100 when getconf is unavailable (the Linux default). */
export function clockTicksPerSecond(): number {
  if (clockTicksPerSec !== undefined) return clockTicksPerSec;
  let ticks = 100;
  try {
    const out = GETCONF ? Number(execFileSync(GETCONF, ["CLK_TCK"], { encoding: "utf8", timeout: 2000 }).trim()) : 0;
    if (Number.isInteger(out) && out > 0) ticks = out;
  } catch {
    // Keep the Linux default.
  }
  clockTicksPerSec = ticks;
  return ticks;
}

/** Parses the aggregate `cpu` line of /proc/stat text. */
export function parseProcStat(text: string): ProcStatTotals {
  const line = text.split("\n").find((l) => l.startsWith("cpu "));
  if (!line) throw new HarvestError("INTERNAL", "/proc/stat has no aggregate cpu line");
  const f = line.trim().split(/\s+/).slice(1).map(Number);
  if (f.length < 4 || f.some((x) => !Number.isFinite(x))) {
    throw new HarvestError("INTERNAL", `cannot parse /proc/stat cpu line: ${line}`);
  }
  // user nice system idle iowait irq softirq steal [guest guest_nice]; guest time is already inside user and nice.
  const [user = 0, nice = 0, system = 0, idle = 0, iowait = 0, irq = 0, softirq = 0, steal = 0] = f;
  const msPerTick = 1000 / clockTicksPerSecond();
  const busyMs = (user + nice + system + irq + softirq + steal) * msPerTick;
  const idleMs = (idle + iowait) * msPerTick;
  return { busyMs, idleMs, totalMs: busyMs + idleMs };
}

/** Reads the machine's cumulative busy and idle CPU time from /proc/stat. */
export function readProcStatTotals(): ProcStatTotals {
  return parseProcStat(readFileSync("/proc/stat", "utf8"));
}

/** The fields of /proc/<pid>/stat the tree walk needs. */
interface PidStat {
  ppid: number;
  /** utime + stime + cutime + cstime, in clock ticks. */
  cpuTicks: number;
  /** Resident set size, in pages (field 24). */
  rssPages: number;
}

/**
 * The fields of /proc/<pid>/stat from field 3 (state) on, so that field k is at index k - 3; undefined when the
 * process is gone or the text is not a stat line. The command name (field 2) is in parentheses and may itself contain
 * spaces and ')', so the split starts after the last one.
 */
export function procStatFields(pid: number): string[] | undefined {
  let text: string;
  try {
    text = readFileSync(`/proc/${pid}/stat`, "utf8");
  } catch {
    return undefined;
  }
  const close = text.lastIndexOf(")");
  if (close < 0) return undefined;
  return text
    .slice(close + 1)
    .trim()
    .split(/\s+/);
}

/** Parses /proc/<pid>/stat; undefined if the process is gone or the text is not a stat line. */
function readPidStat(pid: number): PidStat | undefined {
  // rest[0] is field 3 (state): field k is rest[k - 3].
  const rest = procStatFields(pid);
  if (!rest) return undefined;
  const ppid = Number(rest[1]);
  const utime = Number(rest[11]);
  const stime = Number(rest[12]);
  const cutime = Number(rest[13]);
  const cstime = Number(rest[14]);
  const rssPages = Number(rest[21]);
  if (![ppid, utime, stime, cutime, cstime].every(Number.isFinite)) return undefined;
  return { ppid, cpuTicks: utime + stime + cutime + cstime, rssPages: Number.isFinite(rssPages) ? rssPages : 0 };
}

/**
 * The CPU time (ms) of the given processes and all their live descendants: each one's own user+system time plus that
 * of its children it has already reaped (cutime/cstime), so a finished child's time stays counted in its parent.
 * Time of a descendant that exits after being orphaned is lost; the caller keeps totals of exited containers itself.
 * Pids that no longer exist count zero.
 */
export function processTreeCpuMs(rootPids: number[]): number {
  let total = 0;
  for (const ms of processTreesCpuMs(rootPids).values()) total += ms;
  return total;
}

/**
 * `processTreeCpuMs` of each root separately, from one scan of /proc (a descendant shared by two roots counts for the
 * first). Roots that no longer exist map to zero.
 */
export function processTreesCpuMs(rootPids: readonly number[]): Map<number, number> {
  const out = new Map<number, number>();
  for (const [root, sts] of processTrees(rootPids)) {
    let ticks = 0;
    for (const st of sts) ticks += st.cpuTicks;
    out.set(root, (out.get(root) ?? 0) + (ticks * 1000) / clockTicksPerSecond());
  }
  return out;
}

/** The resident memory (bytes) of the given processes and all their live descendants, together. */
export function processTreesRssBytes(rootPids: readonly number[]): number {
  let pages = 0;
  for (const sts of processTrees(rootPids).values()) for (const st of sts) pages += st.rssPages;
  return pages * PAGE_BYTES;
}

/** The size of a memory page (4 KiB on the platforms Harvest runs on). */
const PAGE_BYTES = 4096;

/**
 * Each root's process and its live descendants, from one scan of /proc (a descendant shared by two roots counts for
 * the first). Roots that no longer exist map to none.
 */
function processTrees(rootPids: readonly number[]): Map<number, PidStat[]> {
  const out = new Map<number, PidStat[]>();
  if (rootPids.length === 0) return out;
  // /proc/<pid>/task/<tid>/children needs CONFIG_PROC_CHILDREN, which many kernels lack, so build the tree from ppids.
  const stats = new Map<number, PidStat>();
  const children = new Map<number, number[]>();
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    const pid = Number(entry);
    const st = readPidStat(pid);
    if (!st) continue;
    stats.set(pid, st);
    const siblings = children.get(st.ppid);
    if (siblings) siblings.push(pid);
    else children.set(st.ppid, [pid]);
  }
  const seen = new Set<number>();
  for (const root of rootPids) {
    const tree = out.get(root) ?? [];
    const stack = [root];
    while (stack.length > 0) {
      const pid = stack.pop()!;
      if (seen.has(pid)) continue;
      seen.add(pid);
      const st = stats.get(pid);
      if (!st) continue;
      tree.push(st);
      for (const child of children.get(pid) ?? []) stack.push(child);
    }
    out.set(root, tree);
  }
  return out;
}

/**
 * Cumulative CPU time (ms) of a cgroup and everything below it, from cgroup v2 `cpu.stat` or v1 `cpuacct.usage`;
 * 0 when the group does not exist (no containers yet, or no cgroups on this server). `group` is relative to the
 * hierarchy roots, e.g. "harvest/server-1", the group a node manager puts its containers under.
 */
export function cgroupCpuMs(group: string, root = "/sys/fs/cgroup"): number {
  if (group.split("/").some((p) => p === ".." || p === "")) return 0;
  const candidates: [string, (text: string) => number | undefined][] = [
    [join(root, group, "cpu.stat"), (t) => ((m) => (m ? Number(m[1]) / 1000 : undefined))(/usage_usec (\d+)/.exec(t))],
    [
      join(root, "unified", group, "cpu.stat"),
      (t) => ((m) => (m ? Number(m[1]) / 1000 : undefined))(/usage_usec (\d+)/.exec(t)),
    ],
    [join(root, "cpuacct", group, "cpuacct.usage"), (t) => Number(t) / 1e6],
    [join(root, "cpu,cpuacct", group, "cpuacct.usage"), (t) => Number(t) / 1e6],
  ];
  for (const [file, parse] of candidates) {
    try {
      const ms = parse(readFileSync(file, "utf8"));
      if (ms !== undefined && Number.isFinite(ms)) return ms;
    } catch {
      // Not this layout.
    }
  }
  return 0;
}

/** The machine's memory from /proc/meminfo: total and available (what can be had without swapping), in bytes. */
export interface MemInfo {
  totalBytes: number;
  availableBytes: number;
}

/** Parses /proc/meminfo text (MemTotal and MemAvailable, in kB). */
export function parseMemInfo(text: string): MemInfo {
  const kb = (key: string): number => {
    const m = new RegExp(`^${key}:\\s+(\\d+) kB$`, "m").exec(text);
    if (!m) throw new HarvestError("INTERNAL", `/proc/meminfo has no ${key}`);
    return Number(m[1]) * 1024;
  };
  return { totalBytes: kb("MemTotal"), availableBytes: kb("MemAvailable") };
}

/** Reads /proc/meminfo. */
export function readMemInfo(): MemInfo {
  return parseMemInfo(readFileSync("/proc/meminfo", "utf8"));
}

/**
 * The memory (bytes) a cgroup's processes use now: v2 `memory.current`, or v1 `memory.usage_in_bytes`; 0 when the
 * group does not exist. `group` is relative to the hierarchy roots, as for {@link cgroupCpuMs}.
 */
export function cgroupMemoryBytes(group: string, root = "/sys/fs/cgroup"): number {
  if (group.split("/").some((p) => p === ".." || p === "")) return 0;
  for (const file of [
    join(root, group, "memory.current"),
    join(root, "unified", group, "memory.current"),
    join(root, "memory", group, "memory.usage_in_bytes"),
  ]) {
    try {
      const bytes = Number(readFileSync(file, "utf8"));
      if (Number.isFinite(bytes)) return bytes;
    } catch {
      // Not this layout.
    }
  }
  return 0;
}
