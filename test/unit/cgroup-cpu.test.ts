/** Reading a cgroup's cumulative CPU, as a datanode does for its server's Harvest containers. */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { cgroupCpuMs } from "../../common/proc-stats.js";

describe("cgroupCpuMs", () => {
  const root = mkdtempSync(join(tmpdir(), "harvest-cg-"));
  afterAll(() => rmSync(root, { recursive: true, force: true }));

  it("reads cgroup v1 cpuacct.usage (nanoseconds) and v2 cpu.stat usage_usec", () => {
    mkdirSync(join(root, "cpuacct", "harvest", "server-1"), { recursive: true });
    writeFileSync(join(root, "cpuacct", "harvest", "server-1", "cpuacct.usage"), "2500000000\n");
    mkdirSync(join(root, "harvest", "server-2"), { recursive: true });
    writeFileSync(join(root, "harvest", "server-2", "cpu.stat"), "usage_usec 1234000\nuser_usec 1000000\n");
    expect(cgroupCpuMs("harvest/server-1", root)).toBe(2500);
    expect(cgroupCpuMs("harvest/server-2", root)).toBe(1234);
  });

  it("gives 0 for a group that does not exist and refuses paths that climb out", () => {
    expect(cgroupCpuMs("harvest/nowhere", root)).toBe(0);
    mkdirSync(join(root, "cpuacct", "secret"), { recursive: true });
    writeFileSync(join(root, "cpuacct", "secret", "cpuacct.usage"), "9000000000\n");
    expect(cgroupCpuMs("harvest/../secret", root)).toBe(0);
  });
});
