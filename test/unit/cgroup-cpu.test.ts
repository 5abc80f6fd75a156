/** Reading a cgroup's cumulative CPU, as a datanode does for its server's Harvest containers. */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { cgroupCpuMs, cgroupMemoryBytes, parseMemInfo } from "../../common/proc-stats.js";

describe("cgroupCpuMs", () => {
  const root = mkdtempSync(join(tmpdir(), "harvest-cg-"));
  afterAll(() => rmSync(root, { recursive: true, force: true }));
  /** Writes `content` to the file at `path` below the fake cgroup root, making its folders. */
  const fakeFile = (path: string[], content: string): void => {
    const file = join(root, ...path);
    mkdirSync(dirname(file), { recursive: true });
    writeFileSync(file, content);
  };

  it("reads cgroup v1 cpuacct.usage (nanoseconds) and v2 cpu.stat usage_usec", () => {
    fakeFile(["cpuacct", "harvest", "server-1", "cpuacct.usage"], "2500000000\n");
    fakeFile(["harvest", "server-2", "cpu.stat"], "usage_usec 1234000\nuser_usec 1000000\n");
    expect(cgroupCpuMs("harvest/server-1", root)).toBe(2500);
    expect(cgroupCpuMs("harvest/server-2", root)).toBe(1234);
  });

  it("gives 0 for a group that does not exist and refuses paths that climb out", () => {
    expect(cgroupCpuMs("harvest/nowhere", root)).toBe(0);
    fakeFile(["cpuacct", "secret", "cpuacct.usage"], "9000000000\n");
    expect(cgroupCpuMs("harvest/../secret", root)).toBe(0);
  });

  it("reads a group's memory from v2 memory.current or v1 memory.usage_in_bytes, and /proc/meminfo", () => {
    fakeFile(["memory", "harvest", "server-3", "memory.usage_in_bytes"], "73400320\n");
    fakeFile(["harvest", "server-4", "memory.current"], "1048576\n");
    expect(cgroupMemoryBytes("harvest/server-3", root)).toBe(73_400_320);
    expect(cgroupMemoryBytes("harvest/server-4", root)).toBe(1_048_576);
    expect(cgroupMemoryBytes("harvest/nowhere", root)).toBe(0);
    expect(cgroupMemoryBytes("harvest/../memory", root)).toBe(0);
    const info = parseMemInfo("MemTotal:       16384000 kB\nMemFree:  100 kB\nMemAvailable:    4096000 kB\n");
    expect(info).toEqual({ totalBytes: 16_384_000 * 1024, availableBytes: 4_096_000 * 1024 });
  });
});
