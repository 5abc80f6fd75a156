/** Reading processes from /proc: a process tree's CPU time and resident memory, as the node manager does without cgroups. */
import { spawn } from "node:child_process";
import type { ChildProcess } from "node:child_process";
import { setTimeout as sleep } from "node:timers/promises";
import { waitFor } from "../wait-for.js";
import { afterEach, describe, expect, it } from "vitest";
import { procStatFields, processTreeCpuMs, processTreesRssBytes } from "../../common/proc-stats.js";

const children: ChildProcess[] = [];
afterEach(() => {
  // The whole group: the shell and the node process it started.
  for (const c of children.splice(0))
    try {
      process.kill(-c.pid!, "SIGKILL");
    } catch {
      // Gone.
    }
});

/** A shell whose child (a grandchild of the test) holds `mb` MB resident and burns a core. */
function tree(mb: number): ChildProcess {
  const script = `const b = Buffer.alloc(${mb} << 20, 1); setInterval(() => b[0]++, 1); for (;;) { if (Date.now() % 1000 < 0) break; }`;
  const c = spawn("/bin/sh", ["-c", `${process.execPath} -e '${script}'; :`], { stdio: "ignore", detached: true });
  children.push(c);
  return c;
}

describe("process trees in /proc", () => {
  it("counts the resident memory and CPU of a process's descendants", async () => {
    const c = tree(96);
    const pid = c.pid!;
    await waitFor(() => processTreesRssBytes([pid]) >= 96 << 20, {
      what: "the tree's resident memory to reach 96 MiB",
      timeoutMs: 5_000,
      intervalMs: 50,
    });
    const before = processTreeCpuMs([pid]);
    await sleep(300);
    expect(processTreeCpuMs([pid])).toBeGreaterThan(before);
  });

  it("gives nothing for processes that do not exist, and reads a stat line past a command name with spaces", () => {
    expect(processTreesRssBytes([2 ** 22 + 12345])).toBe(0);
    expect(procStatFields(2 ** 22 + 12345)).toBeUndefined();
    const own = procStatFields(process.pid)!;
    // Field 4 is the parent's pid, field 22 the start time: both numbers.
    expect(Number(own[1])).toBe(process.ppid);
    expect(own[19]).toMatch(/^\d+$/);
  });
});
