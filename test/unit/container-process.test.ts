import { chmodSync, existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { removeTestCgroups, testGroupName } from "../cgroups.js";
import { nextTestContainerId, testContainerSpec } from "../containers.js";
import { running } from "../processes.js";
import { waitFor } from "../wait-for.js";
import { afterAll, describe, expect, it } from "vitest";
import { detectCgroups } from "../../nodemanager/cgroups.js";
import type { CgroupController } from "../../nodemanager/cgroups.js";
import type { ContainerSpec } from "../../nodemanager/container.js";
import { CONTAINER_SYSTEM_PATH, ContainerProcess, expandArg } from "../../nodemanager/container.js";
import { fixedContainerAccount } from "../../nodemanager/run-as.js";

const tmp = mkdtempSync(join(tmpdir(), "harvest-container-process-"));
// Containers run as a default node manager's account (nobody when these tests run as root), which must get in here.
chmodSync(tmp, 0o755);
const account = fixedContainerAccount("nobody");
const started: ContainerProcess[] = [];
const strayPids: number[] = [];

const groupName = testGroupName();
const noCgroups = detectCgroups(`${groupName}-unused`, "none");
const cgroups = detectCgroups(groupName, "auto");

afterAll(async () => {
  for (const c of started) c.killNow("KILLED_BY_USER");
  await Promise.all(started.map((c) => c.waitForExit()));
  for (const pid of strayPids) {
    try {
      process.kill(pid, "SIGKILL");
    } catch {
      // Already gone.
    }
  }
  removeTestCgroups(groupName);
  rmSync(tmp, { recursive: true, force: true });
});

function spec(argv: string[], extra: Partial<ContainerSpec> = {}): ContainerSpec {
  const containerId = nextTestContainerId();
  return testContainerSpec(containerId, argv, account, join(tmp, containerId), extra);
}

/** Starts a container and returns it with a promise of the container its exit callback was called with. */
function start(
  s: ContainerSpec,
  controller: CgroupController = noCgroups,
): { container: ContainerProcess; exited: Promise<ContainerProcess> } {
  let resolveExit: (c: ContainerProcess) => void = () => {};
  const exited = new Promise<ContainerProcess>((resolve) => (resolveExit = resolve));
  const container = new ContainerProcess(s, controller, 1_000, (c) => resolveExit(c));
  started.push(container);
  return { container, exited };
}

async function runToEnd(s: ContainerSpec, controller: CgroupController = noCgroups): Promise<ContainerProcess> {
  const { container } = start(s, controller);
  await container.waitForExit();
  return container;
}

function readOut(s: ContainerSpec, stream: "stdout" | "stderr"): string {
  return readFileSync(join(s.workDir, stream), "utf8");
}

const node = "node";

describe("expandArg", () => {
  it("replaces ${NAME} with the value from the container environment", () => {
    expect(
      expandArg("${HOME_DIR}/bin/${TOOL}", {
        HOME_DIR: "/opt/harvest",
        TOOL: "wc",
      }),
    ).toBe("/opt/harvest/bin/wc");
  });

  it("leaves unknown names, bare $NAME and malformed references as they are", () => {
    const env = { A: "x" };
    expect(expandArg("${MISSING}", env)).toBe("${MISSING}");
    expect(expandArg("$A", env)).toBe("$A");
    expect(expandArg("${1A}", env)).toBe("${1A}");
    expect(expandArg("${A", env)).toBe("${A");
  });

  it("does not expand references inside substituted values again", () => {
    expect(expandArg("${A}", { A: "${B}", B: "no" })).toBe("${B}");
  });
});

describe("ContainerProcess", () => {
  it("expands ${NAME} in argv from the container environment before starting the process", async () => {
    const s = spec(
      [node, "-e", "process.stdout.write(process.argv.slice(1).join(','))", "${GREETING}-world", "${NOT_SET}"],
      {
        env: { GREETING: "hello" },
      },
    );
    const c = await runToEnd(s);
    expect(c.cause).toBe("SUCCEEDED");
    expect(readOut(s, "stdout")).toBe("hello-world,${NOT_SET}");
  });

  it("runs 'node' as the node manager's own Node binary even when PATH has no node", async () => {
    const s = spec([node, "-e", "process.stdout.write(process.execPath)"], {
      env: { PATH: "/nonexistent" },
    });
    const c = await runToEnd(s);
    expect(c.cause).toBe("SUCCEEDED");
    expect(readOut(s, "stdout")).toBe(process.execPath);
  });

  it("writes the process's stdout and stderr to files in its work directory", async () => {
    const s = spec([node, "-e", "console.log('to out'); console.error('to err')"]);
    await runToEnd(s);
    expect(readOut(s, "stdout")).toBe("to out\n");
    expect(readOut(s, "stderr")).toBe("to err\n");
  });

  it("runs the process in its work directory and records its pid there", async () => {
    const s = spec([node, "-e", "process.stdout.write(process.cwd() + ' ' + process.pid)"]);
    const c = await runToEnd(s);
    expect(readOut(s, "stdout")).toBe(`${s.workDir} ${c.pid}`);
    expect(readFileSync(join(s.workDir, "pid"), "utf8")).toBe(String(c.pid));
  });

  it("passes the container env but not the node manager's other environment variables", async () => {
    const key = "HARVEST_TEST_NM_ONLY_VARIABLE";
    process.env[key] = "secret";
    try {
      const s = spec(
        [node, "-e", `process.stdout.write(JSON.stringify([process.env.${key} ?? null, process.env.MINE ?? null]))`],
        {
          env: { MINE: "yes" },
        },
      );
      await runToEnd(s);
      expect(JSON.parse(readOut(s, "stdout"))).toEqual([null, "yes"]);
    } finally {
      delete process.env[key];
    }
  });

  it("gives the process a system PATH with its Node's folder first, never the node manager's PATH", async () => {
    // npx puts every parent folder's node_modules/.bin on the PATH of what it starts, /tmp/node_modules/.bin among them.
    const saved = process.env["PATH"];
    process.env["PATH"] = `/tmp/node_modules/.bin:${saved ?? ""}`;
    try {
      const s = spec([node, "-e", "process.stdout.write(process.env.PATH)"]);
      await runToEnd(s);
      const path = readOut(s, "stdout").split(":");
      // The Node binary's folder, then the system's, each once.
      expect(path[0]).toBe(dirname(process.execPath));
      expect(new Set(path)).toEqual(new Set([dirname(process.execPath), ...CONTAINER_SYSTEM_PATH.split(":")]));
      expect(path).toHaveLength(new Set(path).size);
      expect(readOut(s, "stdout")).not.toContain("node_modules");
    } finally {
      process.env["PATH"] = saved;
    }
  });

  it("ends with cause SUCCEEDED and exit code 0 when the process exits 0", async () => {
    const s = spec([node, "-e", "process.exit(0)"]);
    const { container, exited } = start(s);
    const reported = await exited;
    expect(reported).toBe(container);
    expect(container.state).toBe("COMPLETE");
    expect(container.exitCode).toBe(0);
    expect(container.cause).toBe("SUCCEEDED");
  });

  it("ends with cause FAILED and the exit code when the process exits non-zero", async () => {
    const s = spec([node, "-e", "process.exit(3)"]);
    const c = await runToEnd(s);
    expect(c.state).toBe("COMPLETE");
    expect(c.exitCode).toBe(3);
    expect(c.cause).toBe("FAILED");
    expect(c.diagnostics).toContain("3");
  });

  it("ends with cause FAILED when the program cannot be started", async () => {
    const s = spec(["/nonexistent/harvest-no-such-program"]);
    const c = await runToEnd(s);
    expect(c.state).toBe("COMPLETE");
    expect(c.cause).toBe("FAILED");
    expect(c.exitCode).not.toBe(0);
  });

  it("ends a process killed by a primary spike as PREEMPTED_BY_PRIMARY and takes its grandchildren with it", async () => {
    const script = [
      "const { spawn } = require('node:child_process');",
      "const g = spawn(process.execPath, ['-e', 'setInterval(() => {}, 1000)'], { stdio: 'ignore' });",
      "require('node:fs').writeFileSync('grandchild.pid', String(g.pid));",
      "setInterval(() => {}, 1000);",
    ].join("\n");
    const s = spec([node, "-e", script]);
    const { container } = start(s);
    const pidFile = join(s.workDir, "grandchild.pid");
    await waitFor(() => existsSync(pidFile) && readFileSync(pidFile, "utf8") !== "", {
      what: "the grandchild's pid file",
      intervalMs: 25,
    });
    const grandchild = Number(readFileSync(pidFile, "utf8"));
    strayPids.push(grandchild);
    expect(running(grandchild)).toBe(true);

    container.kill("PREEMPTED_BY_PRIMARY", 100);
    await container.waitForExit();
    expect(container.cause).toBe("PREEMPTED_BY_PRIMARY");
    expect(running(container.pid)).toBe(false);
    await waitFor(() => !running(grandchild), { what: "the grandchild to die", intervalMs: 25 });
  });

  it("kills a process that ignores SIGTERM once the grace period is over", async () => {
    const script =
      "process.on('SIGTERM', () => {}); require('node:fs').writeFileSync('ready', '1'); setInterval(() => {}, 1000);";
    const s = spec([node, "-e", script]);
    const { container } = start(s);
    await waitFor(() => existsSync(join(s.workDir, "ready")), { what: "the container to be ready", intervalMs: 25 });
    container.kill("PREEMPTED_BY_PRIMARY", 200);
    await container.waitForExit();
    expect(container.cause).toBe("PREEMPTED_BY_PRIMARY");
    expect(running(container.pid)).toBe(false);
  });

  it("keeps the first cause when a container is killed twice", async () => {
    const s = spec([node, "-e", "require('node:fs').writeFileSync('ready', '1'); setInterval(() => {}, 1000);"]);
    const { container } = start(s);
    await waitFor(() => existsSync(join(s.workDir, "ready")), { what: "the container to be ready", intervalMs: 25 });
    container.kill("KILLED_BY_USER", 100);
    container.kill("PREEMPTED_BY_PRIMARY", 100);
    await container.waitForExit();
    expect(container.cause).toBe("KILLED_BY_USER");
  });

  it("keeps a finished container's cause when it is killed afterwards", async () => {
    const c = await runToEnd(spec([node, "-e", "process.exit(0)"]));
    c.kill("PREEMPTED_BY_PRIMARY", 100);
    c.killNow("RELEASED");
    expect(c.cause).toBe("SUCCEEDED");
  });
});

/** A process's nice value (field 19 of /proc/<pid>/stat). */
function niceOf(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
  return Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[16]);
}

describe("ContainerProcess at the lowest priority", () => {
  it("runs a container without cgroups at nice 19, and what it forks too", async () => {
    const s = spec(["/bin/sh", "-c", "sleep 30 & echo $! > child; wait"]);
    const { container } = start(s, noCgroups);
    const childFile = join(s.workDir, "child");
    const child = await waitFor(() => (existsSync(childFile) && Number(readFileSync(childFile, "utf8"))) || undefined, {
      what: "the forked child's pid",
      intervalMs: 20,
    });
    expect(niceOf(container.pid)).toBe(19);
    expect(niceOf(child)).toBe(19);
    container.killNow("KILLED_BY_USER");
    await container.waitForExit();
  });
});

describe.skipIf(cgroups.mode === "none")(`ContainerProcess in a cgroup (${cgroups.mode})`, () => {
  it.skipIf(!cgroups.limitsMemory)(
    "ends a container that uses more memory than it was granted as EXCEEDED_MEMORY, and one within its grant as SUCCEEDED",
    async () => {
      const hog = "const a = []; for (let i = 0; i < 40; i++) a.push(Buffer.alloc(16 << 20, 1)); console.log(a.length)";
      const over = await runToEnd(spec(["node", "-e", hog], { memoryMb: 64 }), cgroups);
      expect(over.cause).toBe("EXCEEDED_MEMORY");
      expect(over.diagnostics).toContain("64 MB");
      const within = await runToEnd(spec(["node", "-e", hog], { memoryMb: 1024 }), cgroups);
      expect(within.cause, within.diagnostics).toBe("SUCCEEDED");
    },
  );

  it("puts the process in its container's cgroup", async () => {
    const s = spec([node, "-e", "process.stdout.write(require('node:fs').readFileSync('/proc/self/cgroup', 'utf8'))"]);
    const c = await runToEnd(s, cgroups);
    expect(c.cause).toBe("SUCCEEDED");
    expect(readOut(s, "stdout")).toContain(`/${groupName}/${s.containerId}\n`);
  });

  it("holds a container limited to 0.2 vcores to about 0.2 s of CPU per second of wall time", async () => {
    // The child measures its own CPU time (from the kernel, via getrusage) over a 1.5 s wall-clock busy loop.
    const script = [
      "const t0 = Date.now(); const c0 = process.cpuUsage(); let x = 0;",
      "while (Date.now() - t0 < 1500) { for (let i = 0; i < 1e5; i++) x += i; }",
      "const d = process.cpuUsage(c0);",
      "process.stdout.write(JSON.stringify({ cpuMs: (d.user + d.system) / 1000, wallMs: Date.now() - t0, x }));",
    ].join("\n");
    const s = spec([node, "-e", script], { vcoresMilli: 200 });
    const startMs = Date.now();
    const { container } = start(s, cgroups);
    // Also sample the cgroup's own accounting while the container lives (the group is removed when it exits).
    let groupUsageMs: number | undefined;
    let exited = false;
    void container.waitForExit().then(() => (exited = true));
    while (!exited) {
      const u = cgroups.usageMs(s.containerId);
      if (u !== undefined) groupUsageMs = u;
      await sleep(20);
    }
    const lifetimeMs = Date.now() - startMs;
    expect(container.cause).toBe("SUCCEEDED");
    const report = JSON.parse(readOut(s, "stdout")) as {
      cpuMs: number;
      wallMs: number;
    };
    expect(report.wallMs).toBeGreaterThanOrEqual(1500);
    expect(report.cpuMs).toBeGreaterThan(0);
    // Unlimited, the loop would take ~1500 ms of CPU; at 0.2 vcores it gets ~300 ms plus at most a period's quota.
    expect(report.cpuMs).toBeLessThanOrEqual(350);
    if (groupUsageMs !== undefined) {
      // The whole container, Node start-up included, ran under the same limit for at most its observed lifetime.
      expect(groupUsageMs).toBeGreaterThan(0);
      expect(groupUsageMs).toBeLessThanOrEqual(0.2 * lifetimeMs + 50);
    }
  });
});
