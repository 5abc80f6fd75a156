/** The throttler on real processes: SIGSTOP/SIGCONT duty cycles, and cgroup quotas where cgroups are writable. */
import { spawn } from "node:child_process";
import type { ChildProcess } from "node:child_process";

import { existsSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { removeTestCgroups, TEST_CGROUP_ROOTS, testGroupName } from "../cgroups.js";
import { procState } from "../processes.js";
import { waitFor } from "../wait-for.js";
import { afterAll, afterEach, describe, expect, it } from "vitest";
import { isHarvestError } from "../../common/errors.js";
import { processTreeCpuMs } from "../../common/proc-stats.js";
import { detectCgroups } from "../../nodemanager/cgroups.js";
import type { Throttler } from "../../nodemanager/throttler.js";
import { createThrottler, resolveThrottlerOptions } from "../../nodemanager/throttler.js";

const BURN = "for(;;){}";
// A burner that starts a second burner in its own process group: the group uses two cores when free to.
const BURN_TWO = `require("node:child_process").spawn(process.execPath, ["-e", ${JSON.stringify(BURN)}], { stdio: "ignore" }); ${BURN}`;

const children: ChildProcess[] = [];
const throttlers: Throttler[] = [];

/** Starts a CPU burner as a container would be: detached, so it leads its own process group. */
function startBurner(script = BURN): number {
  const child = spawn(process.execPath, ["-e", script], { stdio: "ignore", detached: true });
  children.push(child);
  if (!child.pid) throw new Error("could not start the burner");
  return child.pid;
}

function killGroup(pid: number): void {
  for (const target of [-pid, pid]) {
    try {
      process.kill(target, "SIGCONT");
      process.kill(target, "SIGKILL");
    } catch {
      // Already gone.
    }
  }
}

afterEach(() => {
  for (const t of throttlers.splice(0)) t.close();
  for (const c of children.splice(0)) if (c.pid) killGroup(c.pid);
});

/** Cores the process tree used over `ms` of wall time (utime + stime from /proc). */
async function coresUsed(pid: number, ms: number): Promise<number> {
  const cpu0 = processTreeCpuMs([pid]);
  const t0 = performance.now();
  await sleep(ms);
  const cpu1 = processTreeCpuMs([pid]);
  return (cpu1 - cpu0) / (performance.now() - t0);
}

async function waitForChildren(pid: number, count: number): Promise<void> {
  const children = (): string[] =>
    readdirSync("/proc").filter((e) => {
      if (!/^\d+$/.test(e)) return false;
      try {
        const stat = readFileSync(`/proc/${e}/stat`, "utf8");
        return Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]) === pid;
      } catch {
        return false;
      }
    });
  await waitFor(() => children().length >= count, {
    what: `process ${pid} to start ${count} children`,
    timeoutMs: 2_000,
    intervalMs: 20,
  });
}

describe("resolveThrottlerOptions", () => {
  it("defaults to a 100 ms duty period and rejects periods timers cannot keep", () => {
    expect(resolveThrottlerOptions()).toEqual({ dutyPeriodMs: 100, mode: "auto" });
    try {
      resolveThrottlerOptions({ dutyPeriodMs: 1 });
      expect.unreachable();
    } catch (err) {
      expect(isHarvestError(err, "CONFIG_INVALID")).toBe(true);
      expect((err as Error).message).toMatch(/throttler option dutyPeriodMs/);
    }
  });

  it("picks the signal duty cycle without cgroups and refuses to force cgroup mode without them", () => {
    const none = detectCgroups("unused", "none");
    const t = createThrottler(none);
    throttlers.push(t);
    expect(t.mode).toBe(process.platform === "win32" ? "none" : "signal");
    expect(() => createThrottler(none, { mode: "cgroup" })).toThrow(/throttler option mode is "cgroup"/);
  });
});

describe.skipIf(process.platform !== "linux")("signal throttler (SIGSTOP/SIGCONT duty cycle)", () => {
  const noCgroups = detectCgroups("unused", "none");

  it("cuts a burner's CPU to about its limit and gives it back when unthrottled", async () => {
    const pid = startBurner();
    const t = createThrottler(noCgroups, { mode: "signal", dutyPeriodMs: 100 });
    throttlers.push(t);
    expect(t.mode).toBe("signal");
    await sleep(300);
    const free = await coresUsed(pid, 1000);

    t.setLimit("c1", 250, 1000, () => [pid]);
    await sleep(200);
    const throttled = await coresUsed(pid, 2000);

    t.setLimit("c1", undefined, 1000, () => [pid]);
    expect(procState(pid)).not.toBe("T");
    const resumed = await coresUsed(pid, 1000);

    // Stopped 75 % of every period, it cannot use much more than a quarter of a core however idle the machine is;
    // it still runs a little; and once unthrottled it burns again (the machine has 2 cores and other work).
    expect(throttled).toBeLessThan(0.4);
    expect(throttled).toBeGreaterThan(0.03);
    expect(throttled).toBeLessThan(free * 0.75);
    expect(resumed).toBeGreaterThan(0.3);
    expect(resumed).toBeGreaterThan(throttled * 1.5);
  });

  it("throttles the container's whole process group, children included", async () => {
    const pid = startBurner(BURN_TWO);
    await waitForChildren(pid, 1);
    const t = createThrottler(noCgroups, { mode: "signal" });
    throttlers.push(t);
    // A two-core allocation limited to 0.2 cores: the group runs 10 % of each period.
    t.setLimit("c1", 200, 2000, () => [pid]);
    await sleep(200);
    const throttled = await coresUsed(pid, 2000);
    expect(throttled).toBeLessThan(0.35);
    t.forget("c1");
    const resumed = await coresUsed(pid, 1000);
    expect(resumed).toBeGreaterThan(0.4);
  });

  it("keeps a container stopped most of the time at the smallest limit, and never leaves it stopped", async () => {
    const pids = [startBurner(), startBurner()];
    const t = createThrottler(noCgroups, { mode: "signal" });
    throttlers.push(t);
    t.setLimit("a", 0, 1000, () => [pids[0]!]);
    t.setLimit("b", 10, 1000, () => [pids[1]!]);
    await sleep(150);
    let stoppedSamples = 0;
    for (let i = 0; i < 20; i++) {
      if (procState(pids[0]!) === "T") stoppedSamples += 1;
      await sleep(7);
    }
    expect(stoppedSamples).toBeGreaterThanOrEqual(15);
    expect(await coresUsed(pids[1]!, 1000)).toBeLessThan(0.15);
    // forget continues one; close continues the rest; a limit after close is ignored.
    t.forget("a");
    expect(procState(pids[0]!)).not.toBe("T");
    t.close();
    expect(procState(pids[1]!)).not.toBe("T");
    t.setLimit("a", 0, 1000, () => [pids[0]!]);
    await sleep(250);
    expect(procState(pids[0]!)).not.toBe("T");
  });
});

// A real cgroup where this machine lets us create one (see test/unit/container-process.test.ts).
const groupName = testGroupName("throttler-");
const cgroups = detectCgroups(groupName, "auto");

afterAll(() => {
  cgroups.close();
  removeTestCgroups(groupName);
});

/** The container's CPU quota in cores (quota over period), read back from whichever hierarchy holds it. */
function quotaCoresOf(containerId: string): number {
  for (const root of TEST_CGROUP_ROOTS) {
    const v1 = join(root, groupName, containerId, "cpu.cfs_quota_us");
    if (existsSync(v1))
      return (
        Number(readFileSync(v1, "utf8")) /
        Number(readFileSync(join(root, groupName, containerId, "cpu.cfs_period_us"), "utf8"))
      );
    const v2 = join(root, groupName, containerId, "cpu.max");
    if (existsSync(v2)) {
      const [quota, period] = readFileSync(v2, "utf8").trim().split(" ");
      return Number(quota) / Number(period);
    }
  }
  throw new Error(`no cgroup for ${containerId}`);
}

describe.skipIf(cgroups.mode === "none")(`cgroup throttler (${cgroups.mode})`, () => {
  it("writes the limit as the container's CFS quota, holds a burner to it, and restores the allocation", async () => {
    const containerId = "container_throttle_000001";
    const procsFiles = cgroups.create(containerId, 1000, 256);
    const pid = startBurner();
    for (const f of procsFiles) writeFileSync(f, String(pid));
    const t = createThrottler(cgroups);
    throttlers.push(t);
    expect(t.mode).toBe("cgroup");
    expect(quotaCoresOf(containerId)).toBeCloseTo(1, 6);

    t.setLimit(containerId, 200, 1000, () => [pid]);
    expect(quotaCoresOf(containerId)).toBeCloseTo(0.2, 6);
    await sleep(200);
    const throttled = await coresUsed(pid, 2000);
    expect(throttled).toBeLessThan(0.3);
    expect(throttled).toBeGreaterThan(0.03);
    // Never stopped: the cgroup mode only writes quotas.
    expect(procState(pid)).not.toBe("T");

    t.setLimit(containerId, undefined, 1000, () => [pid]);
    expect(quotaCoresOf(containerId)).toBeCloseTo(1, 6);
    expect(await coresUsed(pid, 1000)).toBeGreaterThan(0.3);

    killGroup(pid);
    await sleep(100);
    cgroups.remove(containerId);
    // The group is gone with its container: a late limit is not an error.
    expect(() => t.setLimit(containerId, 100, 1000, () => [])).not.toThrow();
  });
});
