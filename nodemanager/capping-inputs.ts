/**
 * What the capping agent needs to know of each running container at a period: its allocation, priority and the CPU
 * it has used since the last period (from its cgroup, else its process tree in /proc), as `AgentContainer`s.
 */
import { cgroupMemoryBytes, processTreeCpuMs, processTreesCpuMs, processTreesRssBytes } from "../common/proc-stats.js";
import type { CgroupController } from "./cgroups.js";
import type { ContainerProcess } from "./container.js";
import type { AgentContainer } from "./policy/capping-agent.js";

/** A container's cumulative CPU ms when last read, and the rate (cores) measured then. */
export interface CpuSeen {
  cpuMs: number;
  atMs: number;
  cores: number;
}

/**
 * The capping agent's view of the `live` containers at `now`: one read of each cgroup, one scan of /proc for those
 * without one; `cpuSeen` keeps each container's last reading between periods.
 */
export function cappingInputs(
  live: readonly ContainerProcess[],
  cgroups: CgroupController,
  cpuSeen: Map<string, CpuSeen>,
  now: number,
): AgentContainer[] {
  const fromCgroup = live.map((c) => cgroups.usageMs(c.spec.containerId));
  const fromTree = processTreesCpuMs(live.filter((c, i) => fromCgroup[i] === undefined && c.pid > 0).map((c) => c.pid));
  const out: AgentContainer[] = [];
  for (const [i, c] of live.entries()) {
    const id = c.spec.containerId;
    const cpuMs = fromCgroup[i] ?? fromTree.get(c.pid) ?? 0;
    const seen = cpuSeen.get(id);
    let cores = seen?.cores ?? 0;
    if (seen && now > seen.atMs) cores = Math.max(0, (cpuMs - seen.cpuMs) / (now - seen.atMs));
    cpuSeen.set(id, { cpuMs, atMs: now, cores });
    out.push({
      containerId: id,
      allocationMilli: c.spec.vcoresMilli,
      memoryMb: c.spec.memoryMb,
      startedMs: c.startedMs,
      isAm: c.spec.isAm,
      criticality: c.spec.jobPriority ?? 0,
      cpuCores: cores,
      // Only a running container's pid: a pid the OS has since reused must never be signalled.
      pids: () => (c.state === "RUNNING" && c.pid > 0 ? [c.pid] : []),
    });
  }
  return out;
}

/** The CPU ms the containers have used: their cgroups', else their process trees'. */
export function containersCpuMs(cgroups: CgroupController, containers: Iterable<ContainerProcess>): number {
  let total = 0;
  const pids: number[] = [];
  for (const c of containers) {
    const fromCgroup = cgroups.usageMs(c.spec.containerId);
    if (fromCgroup !== undefined) total += fromCgroup;
    else if (c.pid > 0) pids.push(c.pid);
  }
  return total + (pids.length > 0 ? processTreeCpuMs(pids) : 0);
}

/** Memory the running containers use now: their cgroup's (`cgroupPath`), else their process trees' resident memory. */
export function containersMemoryBytes(
  cgroups: CgroupController,
  cgroupPath: string,
  containers: Iterable<ContainerProcess>,
): number {
  if (cgroups.limitsMemory) return cgroupMemoryBytes(cgroupPath);
  return processTreesRssBytes([...containers].filter((c) => c.state === "RUNNING").map((c) => c.pid));
}
