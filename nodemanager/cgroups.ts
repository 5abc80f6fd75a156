/**
 * CPU and memory limits for containers through cgroups. Detected once at start: cgroup v2 (`cpu.max`) when the unified
 * hierarchy has the cpu controller and we can create groups, else v1 (`cpu.cfs_quota_us`, writable on this machine),
 * else none, in which case containers run unlimited at nice 19 and the yield controller still kills to protect the
 * primary. Every container also gets the lowest CPU weight the kernel offers (v2 `cpu.weight` 1, v1 `cpu.shares` 2, on
 * its group and on Harvest's parents), so a primary's burst takes the CPU from it in the kernel at once, and, where the
 * memory controller is there, a memory limit of what it was granted (`memory.max` / `memory.limit_in_bytes`): past
 * it the kernel's OOM killer ends it inside its own group, and `oomKilled` tells the node manager so.
 */
import { createHash } from "node:crypto";
import { existsSync, mkdirSync, readFileSync, rmdirSync, writeFileSync } from "node:fs";
import { dirname, join, resolve } from "node:path";

/**
 * The group holding a node manager's containers, relative to the hierarchy roots (v2's unified root, v1's cpu, cpuacct
 * and memory mounts alike): `harvest/<nodeId>`, or `harvest/<cgroupCluster>/<nodeId>` for a cluster with a key, so that
 * two clusters on one host whose servers have the same names (two `harvest cluster up`) never share a group, and one
 * stopping never removes the other's.
 */
export function containerCgroupName(o: { nodeId: string; cgroupCluster?: string }): string {
  return o.cgroupCluster ? `harvest/${o.cgroupCluster}/${o.nodeId}` : `harvest/${o.nodeId}`;
}

/** A cluster key (see {@link containerCgroupName}) for a local cluster: a hash of its directory's absolute path. */
export function clusterCgroupKey(clusterDir: string): string {
  return `local-${createHash("sha256").update(resolve(clusterDir)).digest("hex").slice(0, 12)}`;
}

/** Which cgroup interface a node manager uses. */
export type CgroupMode = "v2" | "v1" | "none";

/**
 * CFS period for quotas: 20 ms, not the kernel's 100 ms default. Writing a quota grants a fresh full quota for the
 * current period, so a container whose quota the capping agent raises can overrun it by up to one period: at 100 ms
 * that burst (measured up to +0.15 core per raise) made the next meter reading cross the budget and the agent drop
 * everything to the floor, so a budget step could fail to settle within 3 s; at 20 ms it is about 0.03 core. The
 * smallest quota (1 ms, the kernel's minimum) is then 50 milli-cores, the capping agent's smallest floor.
 */
const PERIOD_US = 20_000;
/** The lowest CPU weights: v1 `cpu.shares` (kernel minimum 2) and v2 `cpu.weight` (minimum 1). */
const V1_MIN_SHARES = 2;
const V2_MIN_WEIGHT = 1;

/** Creates, limits, measures and removes one cgroup per container. */
export interface CgroupController {
  readonly mode: CgroupMode;
  /** Why this mode was chosen (logged at start). */
  readonly reason: string;
  /**
   * Creates the container's groups with its CPU limit, the lowest CPU weight and (when the memory controller is
   * there) its memory limit; returns the files a process writes its pid into to join them.
   */
  create(containerId: string, vcoresMilli: number, memoryMb: number): string[];
  /** True when the kernel's OOM killer killed a process of the container's memory group (it exceeded its limit). */
  oomKilled(containerId: string): boolean;
  /** Whether containers get a memory limit (the memory controller is there and writable). */
  readonly limitsMemory: boolean;
  /** Changes a container's CPU limit (throttling); vcoresMilli 0 means the minimum the kernel allows. */
  setLimit(containerId: string, vcoresMilli: number): void;
  /** Cumulative CPU time of the container in ms, or undefined when the mode cannot tell. */
  usageMs(containerId: string): number | undefined;
  remove(containerId: string): void;
  /** Removes the node's own parent group (on node manager stop; its containers are gone by then). */
  close(): void;
}

function rmdirQuietly(dir: string | undefined): void {
  if (!dir) return;
  try {
    rmdirSync(dir);
  } catch {
    // Not empty yet, or already gone.
  }
}

/**
 * Removes a node's group and the cluster's level above it (`harvest/<cgroupCluster>`) once no other node of that
 * cluster on this host uses it; `harvest` itself stays, as before.
 */
function removeGroup(dir: string | undefined, groupName: string): void {
  rmdirQuietly(dir);
  if (dir && groupName.split("/").length > 2) rmdirQuietly(dirname(dir));
}

/** Quota in µs per 100 ms period for a CPU amount in thousandths of a core (1 ms minimum, the kernel's floor). */
export function quotaUs(vcoresMilli: number): number {
  return Math.max(1_000, Math.round((vcoresMilli / 1000) * PERIOD_US));
}

/** Writes a control file, ignoring a kernel that lacks it (older kernels, controllers not delegated). */
function writeOptional(file: string, value: string): void {
  try {
    writeFileSync(file, value);
  } catch {
    // Not supported here: the limit it sets is a refinement, not a requirement.
  }
}

/** A number after `key ` in a cgroup key-value file (`memory.events`, `memory.oom_control`), 0 when absent. */
function keyedCount(file: string, key: string): number {
  try {
    const m = new RegExp(`^${key} (\\d+)$`, "m").exec(readFileSync(file, "utf8"));
    return m ? Number(m[1]) : 0;
  } catch {
    return 0;
  }
}

/** Bytes for a memory grant (at least 4 MiB, below which the kernel cannot run a process). */
function memoryBytes(memoryMb: number): number {
  return Math.max(4, Math.round(memoryMb)) * 1024 * 1024;
}

class NoCgroups implements CgroupController {
  readonly mode = "none" as const;
  readonly limitsMemory = false;
  constructor(readonly reason: string) {}
  create(): string[] {
    return [];
  }
  oomKilled(): boolean {
    return false;
  }
  setLimit(): void {}
  usageMs(): number | undefined {
    return undefined;
  }
  remove(): void {}
  close(): void {}
}

class CgroupV1 implements CgroupController {
  readonly mode = "v1" as const;
  constructor(
    private readonly groupName: string,
    private readonly cpuDir: string,
    private readonly acctDir: string | undefined,
    private readonly memoryDir: string | undefined,
    readonly reason: string,
  ) {}
  get limitsMemory(): boolean {
    return this.memoryDir !== undefined;
  }
  create(containerId: string, vcoresMilli: number, memoryMb: number): string[] {
    const dir = join(this.cpuDir, containerId);
    mkdirSync(dir, { recursive: true });
    writeFileSync(join(dir, "cpu.cfs_period_us"), String(PERIOD_US));
    writeFileSync(join(dir, "cpu.cfs_quota_us"), String(quotaUs(vcoresMilli)));
    writeOptional(join(dir, "cpu.shares"), String(V1_MIN_SHARES));
    const procs = [join(dir, "cgroup.procs")];
    if (this.memoryDir) {
      const mem = join(this.memoryDir, containerId);
      mkdirSync(mem, { recursive: true });
      writeFileSync(join(mem, "memory.limit_in_bytes"), String(memoryBytes(memoryMb)));
      // No swap past the limit either, where the kernel accounts it.
      writeOptional(join(mem, "memory.memsw.limit_in_bytes"), String(memoryBytes(memoryMb)));
      procs.push(join(mem, "cgroup.procs"));
    }
    if (this.acctDir) {
      const acct = join(this.acctDir, containerId);
      mkdirSync(acct, { recursive: true });
      procs.push(join(acct, "cgroup.procs"));
    }
    return procs;
  }
  setLimit(containerId: string, vcoresMilli: number): void {
    writeFileSync(join(this.cpuDir, containerId, "cpu.cfs_quota_us"), String(quotaUs(vcoresMilli)));
  }
  usageMs(containerId: string): number | undefined {
    if (!this.acctDir) return undefined;
    try {
      return Number(readFileSync(join(this.acctDir, containerId, "cpuacct.usage"), "utf8")) / 1e6;
    } catch {
      return undefined;
    }
  }
  oomKilled(containerId: string): boolean {
    return (
      this.memoryDir !== undefined &&
      keyedCount(join(this.memoryDir, containerId, "memory.oom_control"), "oom_kill") > 0
    );
  }
  remove(containerId: string): void {
    rmdirQuietly(join(this.cpuDir, containerId));
    if (this.acctDir) rmdirQuietly(join(this.acctDir, containerId));
    if (this.memoryDir) rmdirQuietly(join(this.memoryDir, containerId));
  }
  close(): void {
    removeGroup(this.cpuDir, this.groupName);
    removeGroup(this.acctDir, this.groupName);
    removeGroup(this.memoryDir, this.groupName);
  }
}

class CgroupV2 implements CgroupController {
  readonly mode = "v2" as const;
  constructor(
    private readonly groupName: string,
    private readonly dir: string,
    readonly limitsMemory: boolean,
    readonly reason: string,
  ) {}
  create(containerId: string, vcoresMilli: number, memoryMb: number): string[] {
    const dir = join(this.dir, containerId);
    mkdirSync(dir, { recursive: true });
    writeFileSync(join(dir, "cpu.max"), `${quotaUs(vcoresMilli)} ${PERIOD_US}`);
    writeOptional(join(dir, "cpu.weight"), String(V2_MIN_WEIGHT));
    if (this.limitsMemory) {
      writeFileSync(join(dir, "memory.max"), String(memoryBytes(memoryMb)));
      writeOptional(join(dir, "memory.swap.max"), "0");
    }
    return [join(dir, "cgroup.procs")];
  }
  oomKilled(containerId: string): boolean {
    return this.limitsMemory && keyedCount(join(this.dir, containerId, "memory.events"), "oom_kill") > 0;
  }
  setLimit(containerId: string, vcoresMilli: number): void {
    writeFileSync(join(this.dir, containerId, "cpu.max"), `${quotaUs(vcoresMilli)} ${PERIOD_US}`);
  }
  usageMs(containerId: string): number | undefined {
    try {
      const stat = readFileSync(join(this.dir, containerId, "cpu.stat"), "utf8");
      const m = /usage_usec (\d+)/.exec(stat);
      return m ? Number(m[1]) / 1000 : undefined;
    } catch {
      return undefined;
    }
  }
  remove(containerId: string): void {
    rmdirQuietly(join(this.dir, containerId));
  }
  close(): void {
    removeGroup(this.dir, this.groupName);
  }
}

/**
 * Detects the usable cgroup interface. `groupName` ({@link containerCgroupName}, e.g. "harvest/node-1") is the parent
 * group of this node's containers. `prefer` forces a mode (falling back to none when it does not work).
 */
export function detectCgroups(
  groupName: string,
  prefer: "auto" | CgroupMode = "auto",
  root = "/sys/fs/cgroup",
): CgroupController {
  if (prefer === "none") return new NoCgroups("disabled by configuration");
  const failures: string[] = [];
  if (prefer === "auto" || prefer === "v2") {
    const unified = existsSync(join(root, "cgroup.controllers"))
      ? root
      : existsSync(join(root, "unified", "cgroup.controllers"))
        ? join(root, "unified")
        : undefined;
    if (unified) {
      try {
        const controllers = readFileSync(join(unified, "cgroup.controllers"), "utf8");
        if (!controllers.split(/\s+/).includes("cpu"))
          throw new Error("cpu controller not enabled in the unified hierarchy");
        const dir = join(unified, groupName);
        mkdirSync(dir, { recursive: true });
        // v2 delegates a controller one level at a time: enable cpu in the subtree_control of the root and of every
        // group down to ours, so that the per-container groups below `dir` get cpu.max.
        let level = unified;
        const memory = controllers.split(/\s+/).includes("memory");
        let memoryDelegated = memory;
        for (const part of ["", ...groupName.split("/")]) {
          level = part ? join(level, part) : level;
          const control = join(level, "cgroup.subtree_control");
          const enabled = readFileSync(control, "utf8").split(/\s+/);
          if (!enabled.includes("cpu")) writeFileSync(control, "+cpu");
          if (memoryDelegated && !enabled.includes("memory")) {
            try {
              writeFileSync(control, "+memory");
            } catch {
              memoryDelegated = false;
            }
          }
          // Harvest's own groups weigh the least against their siblings (the primary's), all the way down.
          if (part) writeOptional(join(level, "cpu.weight"), String(V2_MIN_WEIGHT));
        }
        return new CgroupV2(
          groupName,
          dir,
          memoryDelegated,
          `cgroup v2 at ${dir}${memoryDelegated ? " (cpu and memory)" : " (cpu only: no memory controller)"}`,
        );
      } catch (err) {
        failures.push(`v2: ${(err as Error).message}`);
      }
    } else {
      failures.push("v2: no unified hierarchy");
    }
  }
  if (prefer === "auto" || prefer === "v1") {
    const cpuRoot = [join(root, "cpu"), join(root, "cpu,cpuacct")].find((d) => existsSync(join(d, "cpu.cfs_quota_us")));
    if (cpuRoot) {
      try {
        const dir = join(cpuRoot, groupName);
        mkdirSync(dir, { recursive: true });
        writeFileSync(join(dir, "cpu.cfs_period_us"), String(PERIOD_US));
        let acct: string | undefined;
        const acctRoot = [join(root, "cpuacct"), cpuRoot].find((d) => existsSync(join(d, "cpuacct.usage")));
        if (acctRoot) {
          try {
            acct = join(acctRoot, groupName);
            mkdirSync(acct, { recursive: true });
          } catch {
            acct = undefined;
          }
        }
        // Harvest's own groups weigh the least against their siblings (the primary's), all the way down.
        let level = cpuRoot;
        for (const part of groupName.split("/")) {
          level = join(level, part);
          writeOptional(join(level, "cpu.shares"), String(V1_MIN_SHARES));
        }
        let memoryDir: string | undefined;
        const memRoot = join(root, "memory");
        if (existsSync(join(memRoot, "memory.limit_in_bytes"))) {
          try {
            memoryDir = join(memRoot, groupName);
            mkdirSync(memoryDir, { recursive: true });
          } catch {
            memoryDir = undefined;
          }
        }
        return new CgroupV1(
          groupName,
          dir,
          acct,
          memoryDir,
          `cgroup v1 at ${dir}${acct ? ` (cpuacct at ${acct})` : ""}${memoryDir ? ` (memory at ${memoryDir})` : " (no memory controller)"}`,
        );
      } catch (err) {
        failures.push(`v1: ${(err as Error).message}`);
      }
    } else {
      failures.push("v1: no cpu controller with cfs quotas");
    }
  }
  return new NoCgroups(`no writable cgroups (${failures.join("; ")}); containers run without CPU limits`);
}
