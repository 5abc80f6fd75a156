/**
 * CPU limits for containers through cgroups. Detected once at start: cgroup v2 (`cpu.max`) when the unified hierarchy
 * has the cpu controller and we can create groups, else v1 (`cpu.cfs_quota_us`, writable on this machine), else none,
 * in which case containers run unlimited and the yield controller still kills to protect the primary.
 */
import { existsSync, mkdirSync, readFileSync, rmdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";

/** Which cgroup interface a node manager uses. */
export type CgroupMode = "v2" | "v1" | "none";

/** CFS period for quotas (100 ms, the kernel default). */
const PERIOD_US = 100_000;

/** Creates, limits, measures and removes one cgroup per container. */
export interface CgroupController {
  readonly mode: CgroupMode;
  /** Why this mode was chosen (logged at start). */
  readonly reason: string;
  /** Creates the container's group with a CPU limit and returns the files a process writes its pid into to join it. */
  create(containerId: string, vcoresMilli: number): string[];
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

/** Quota in µs per 100 ms period for a CPU amount in thousandths of a core (1 ms minimum, the kernel's floor). */
export function quotaUs(vcoresMilli: number): number {
  return Math.max(1_000, Math.round((vcoresMilli / 1000) * PERIOD_US));
}

class NoCgroups implements CgroupController {
  readonly mode = "none" as const;
  constructor(readonly reason: string) {}
  create(): string[] {
    return [];
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
    private readonly cpuDir: string,
    private readonly acctDir: string | undefined,
    readonly reason: string,
  ) {}
  create(containerId: string, vcoresMilli: number): string[] {
    const dir = join(this.cpuDir, containerId);
    mkdirSync(dir, { recursive: true });
    writeFileSync(join(dir, "cpu.cfs_period_us"), String(PERIOD_US));
    writeFileSync(join(dir, "cpu.cfs_quota_us"), String(quotaUs(vcoresMilli)));
    const procs = [join(dir, "cgroup.procs")];
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
  remove(containerId: string): void {
    rmdirQuietly(join(this.cpuDir, containerId));
    if (this.acctDir) rmdirQuietly(join(this.acctDir, containerId));
  }
  close(): void {
    rmdirQuietly(this.cpuDir);
    rmdirQuietly(this.acctDir);
  }
}

class CgroupV2 implements CgroupController {
  readonly mode = "v2" as const;
  constructor(
    private readonly dir: string,
    readonly reason: string,
  ) {}
  create(containerId: string, vcoresMilli: number): string[] {
    const dir = join(this.dir, containerId);
    mkdirSync(dir, { recursive: true });
    writeFileSync(join(dir, "cpu.max"), `${quotaUs(vcoresMilli)} ${PERIOD_US}`);
    return [join(dir, "cgroup.procs")];
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
    rmdirQuietly(this.dir);
  }
}

/**
 * Detects the usable cgroup interface. `groupName` (e.g. "harvest/node-1") is the parent group of this node's
 * containers. `prefer` forces a mode (falling back to none when it does not work).
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
        for (const part of ["", ...groupName.split("/")]) {
          level = part ? join(level, part) : level;
          const control = join(level, "cgroup.subtree_control");
          if (!readFileSync(control, "utf8").split(/\s+/).includes("cpu")) writeFileSync(control, "+cpu");
        }
        return new CgroupV2(dir, `cgroup v2 at ${dir}`);
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
        return new CgroupV1(dir, acct, `cgroup v1 at ${dir}${acct ? ` (cpuacct at ${acct})` : ""}`);
      } catch (err) {
        failures.push(`v1: ${(err as Error).message}`);
      }
    } else {
      failures.push("v1: no cpu controller with cfs quotas");
    }
  }
  return new NoCgroups(`no writable cgroups (${failures.join("; ")}); containers run without CPU limits`);
}
