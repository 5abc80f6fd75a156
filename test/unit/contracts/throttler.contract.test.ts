/**
 * The throttler contract, run against every implementation: the cgroup throttler over cgroup v1 and v2 (fake
 * hierarchies in a temporary directory, behind the real `detectCgroups`), the SIGSTOP/SIGCONT duty cycle and the
 * no-op throttler. How well each holds a burning process to its limit is measured in throttler.test.ts.
 */
import { spawn } from "node:child_process";
import type { ChildProcess } from "node:child_process";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { waitFor } from "../../wait-for.js";
import { afterAll, describe, expect, it } from "vitest";
import { detectCgroups, quotaUs } from "../../../nodemanager/cgroups.js";
import type { CgroupController } from "../../../nodemanager/cgroups.js";
import { createThrottler } from "../../../nodemanager/throttler.js";
import type { Throttler, ThrottleMode } from "../../../nodemanager/throttler.js";

const tmp = mkdtempSync(join(tmpdir(), "harvest-throttler-contract-"));
const children: ChildProcess[] = [];
afterAll(() => {
  for (const c of children) c.kill("SIGKILL");
  rmSync(tmp, { recursive: true, force: true });
});
let made = 0;
const GROUP = "harvest/nm";

/** A fake cgroup v2 hierarchy: the unified root with the cpu controller, and subtree_control files down to GROUP. */
function fakeV2(): { root: string; quotaFile: (id: string) => string } {
  const root = join(tmp, `v2-${made++}`);
  let level = root;
  for (const part of ["", ...GROUP.split("/")]) {
    level = part ? join(level, part) : level;
    mkdirSync(level, { recursive: true });
    writeFileSync(join(level, "cgroup.subtree_control"), "");
  }
  writeFileSync(join(root, "cgroup.controllers"), "cpu\n");
  return { root, quotaFile: (id) => join(root, GROUP, id, "cpu.max") };
}

/** A fake cgroup v1 hierarchy: a cpu controller mount. */
function fakeV1(): { root: string; quotaFile: (id: string) => string } {
  const root = join(tmp, `v1-${made++}`);
  mkdirSync(join(root, "cpu"), { recursive: true });
  writeFileSync(join(root, "cpu", "cpu.cfs_quota_us"), "-1\n");
  return { root, quotaFile: (id) => join(root, "cpu", GROUP, id, "cpu.cfs_quota_us") };
}

/** A throttler under test, a container to throttle, and (where the mode keeps one) the quota it enforces. */
interface ThrottlerCase {
  name: string;
  mode: ThrottleMode;
  make(): { throttler: Throttler; container(id: string, allocationMilli: number): void; quotaUs?(id: string): number };
}

function cgroupCase(mode: "v1" | "v2"): ThrottlerCase {
  return {
    name: `cgroup ${mode} (fake hierarchy)`,
    mode: "cgroup",
    make: () => {
      const fake = mode === "v1" ? fakeV1() : fakeV2();
      const cgroups: CgroupController = detectCgroups(GROUP, mode, fake.root);
      expect(cgroups.mode).toBe(mode);
      return {
        throttler: createThrottler(cgroups),
        container: (id, allocationMilli) => void cgroups.create(id, allocationMilli, 128),
        quotaUs: (id) => Number(readFileSync(fake.quotaFile(id), "utf8").trim().split(" ")[0]),
      };
    },
  };
}

const cases: ThrottlerCase[] = [
  cgroupCase("v1"),
  cgroupCase("v2"),
  {
    name: "signal",
    mode: "signal",
    make: () => ({ throttler: createThrottler(detectCgroups(GROUP, "none"), { mode: "signal" }), container: () => {} }),
  },
  {
    name: "none",
    mode: "none",
    make: () => ({ throttler: createThrottler(detectCgroups(GROUP, "none"), { mode: "none" }), container: () => {} }),
  },
];

/** A sleeping process leading its own group, as a container's process does. */
function sleeper(): number {
  const child = spawn("sleep", ["60"], { detached: true, stdio: "ignore" });
  children.push(child);
  return child.pid!;
}

/** The process's state letter from /proc (T: stopped). */
function procState(pid: number): string {
  const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
  return stat.slice(stat.lastIndexOf(")") + 2).split(" ")[0] ?? "?";
}

describe.each(cases)("the throttler contract: $name", (c) => {
  it("is the mode it was made for", () => {
    const { throttler } = c.make();
    expect(throttler.mode).toBe(c.mode);
    throttler.close();
  });

  it.runIf(c.mode === "cgroup")(
    "holds the limit it was set, within the allocation, and the allocation when lifted",
    () => {
      const { throttler, container, quotaUs: quotaOf } = c.make();
      container("c1", 2000);
      throttler.setLimit("c1", 500, 2000, () => []);
      expect(quotaOf!("c1")).toBe(quotaUs(500));
      throttler.setLimit("c1", 0, 2000, () => []);
      expect(quotaOf!("c1")).toBe(quotaUs(0));
      throttler.setLimit("c1", 5000, 2000, () => []);
      expect(quotaOf!("c1")).toBe(quotaUs(2000));
      throttler.setLimit("c1", 300, 2000, () => []);
      throttler.setLimit("c1", undefined, 2000, () => []);
      expect(quotaOf!("c1")).toBe(quotaUs(2000));
      throttler.close();
    },
  );

  it.runIf(c.mode === "cgroup")("ignores limits set after it closed", () => {
    const { throttler, container, quotaUs: quotaOf } = c.make();
    container("c1", 1000);
    throttler.setLimit("c1", 400, 1000, () => []);
    throttler.close();
    throttler.setLimit("c1", 100, 1000, () => []);
    expect(quotaOf!("c1")).toBe(quotaUs(400));
  });

  it("takes a limit for a container that is already gone without failing", () => {
    const { throttler } = c.make();
    expect(() => throttler.setLimit("gone", 100, 1000, () => [2 ** 22 + 12345])).not.toThrow();
    expect(() => throttler.setLimit("gone", undefined, 1000, () => [])).not.toThrow();
    throttler.forget("gone");
    throttler.close();
  });

  it.runIf(process.platform === "linux")("leaves no container stopped once it forgot it or closed", async () => {
    const { throttler, container } = c.make();
    const [a, b] = [sleeper(), sleeper()];
    container("a", 1000);
    container("b", 1000);
    throttler.setLimit("a", 0, 1000, () => [a]);
    throttler.setLimit("b", 0, 1000, () => [b]);
    if (c.mode === "signal")
      await waitFor(() => procState(a) === "T" && procState(b) === "T", { what: "both containers to be stopped" });
    throttler.forget("a");
    expect(procState(a)).not.toBe("T");
    throttler.close();
    throttler.close();
    expect(procState(b)).not.toBe("T");
  });
});
