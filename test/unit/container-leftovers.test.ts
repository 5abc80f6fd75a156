/** Cleaning up after a dead node manager kills its containers' processes and never a process that reused a pid. */
import { spawn } from "node:child_process";
import type { ChildProcess } from "node:child_process";
import {
  chmodSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { basename, dirname, join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { removeTestCgroups, rmdirQuietly, testGroupName } from "../cgroups.js";
import { nextTestContainerId, TEST_APP_ID, testContainerSpec } from "../containers.js";
import { running } from "../processes.js";
import { waitFor } from "../wait-for.js";
import { afterAll, afterEach, beforeEach, describe, expect, it } from "vitest";
import {
  containerProcessFile,
  killContainerLeftovers,
  processStartTime,
  readContainerProcess,
  recordContainerProcess,
} from "../../common/container-leftovers.js";
import { detectCgroups } from "../../nodemanager/cgroups.js";
import type { CgroupController } from "../../nodemanager/cgroups.js";
import { ContainerProcess } from "../../nodemanager/container.js";
import { fixedContainerAccount } from "../../nodemanager/run-as.js";

const appId = TEST_APP_ID;
let dataDir = "";
/** Every process a test started, killed in afterEach unless it is already gone. */
let children: ChildProcess[] = [];
/** Processes a test started indirectly (grandchildren), with the start time that proves they are still ours. */
let grandchildren: { pid: number; startTime: string | undefined }[] = [];
let containers: ContainerProcess[] = [];
/** Real cgroup directories a test created, removed after its processes. */
const createdGroups: string[] = [];

const groupName = testGroupName("leftovers-");
const cgroups: CgroupController = detectCgroups(groupName, "auto");

afterAll(() => {
  cgroups.close();
  removeTestCgroups(groupName);
});

// Containers run as a default node manager's account (nobody when these tests run as root).
const account = fixedContainerAccount("nobody");

beforeEach(() => {
  dataDir = mkdtempSync(join(tmpdir(), "harvest-leftovers-"));
  chmodSync(dataDir, 0o755);
});

afterEach(async () => {
  for (const c of containers) c.killNow("KILLED_BY_USER");
  await Promise.all(containers.map((c) => c.waitForExit()));
  for (const child of children) {
    // Until Node reaps the child its pid cannot be reused, so these signals reach only what this test started.
    if (child.pid !== undefined && child.exitCode === null && child.signalCode === null) {
      for (const target of [-child.pid, child.pid]) {
        try {
          process.kill(target, "SIGKILL");
        } catch {
          // Not a group leader, or already gone.
        }
      }
    }
  }
  for (const g of grandchildren) {
    try {
      if (g.startTime !== undefined && processStartTime(g.pid) === g.startTime) process.kill(g.pid, "SIGKILL");
    } catch {
      // Exited between the check and the signal.
    }
  }
  await Promise.all(children.map(exited));
  // A cgroup can be removed only once its processes are gone.
  for (const dir of createdGroups.splice(0)) rmdirQuietly(dir);
  children = [];
  grandchildren = [];
  containers = [];
  rmSync(dataDir, { recursive: true, force: true });
});

/** A container's work directory under the node manager's data directory, as the node manager lays it out. */
function workDirFor(containerId: string): string {
  const dir = join(dataDir, "containers", appId, containerId);
  mkdirSync(dir, { recursive: true });
  return dir;
}

/** Starts `sh -c script` in its own process group (as containers run), tracked for cleanup. */
function startDetached(script: string): ChildProcess {
  const child = spawn("/bin/sh", ["-c", script], { detached: true, stdio: ["ignore", "pipe", "ignore"] });
  children.push(child);
  return child;
}

function exited(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
  return new Promise((resolve) => child.once("exit", () => resolve()));
}

/** The first line the child prints (a pid it reports). */
function firstLine(child: ChildProcess): Promise<string> {
  return new Promise((resolve, reject) => {
    let text = "";
    child.stdout?.on("data", (d: Buffer) => {
      text += d.toString();
      const nl = text.indexOf("\n");
      if (nl >= 0) resolve(text.slice(0, nl));
    });
    child.once("exit", () => reject(new Error(`exited before printing a line (got ${JSON.stringify(text)})`)));
  });
}

/** Launches a container as the node manager does, into the node manager's layout under `dataDir`. */
function launch(argv: string[], controller: CgroupController): ContainerProcess {
  const containerId = nextTestContainerId();
  const container = new ContainerProcess(
    testContainerSpec(containerId, argv, account, join(dataDir, "containers", appId, containerId), { memoryMb: 64 }),
    controller,
    1_000,
    () => {},
  );
  containers.push(container);
  return container;
}

/** Writes a launch record by hand, as a record for a pid that has since been reused would look. */
function writeRecord(workDir: string, record: object): void {
  writeFileSync(containerProcessFile(workDir), JSON.stringify(record));
}

/** Gives a process a moment in which a SIGKILL sent to it would have taken effect, then says whether it still runs. */
async function stillRunningAfterAMoment(child: ChildProcess): Promise<boolean> {
  await sleep(200);
  return child.exitCode === null && child.signalCode === null && running(child.pid!);
}

describe("processStartTime", () => {
  it("reads the start tick of a live process and nothing for a pid with no process", async () => {
    const child = startDetached("exec sleep 60");
    const start = processStartTime(child.pid!);
    expect(start).toMatch(/^\d+$/);
    expect(processStartTime(child.pid!)).toBe(start);
    // Our own process started before the child did.
    expect(Number(processStartTime(process.pid))).toBeLessThanOrEqual(Number(start));
    child.kill("SIGKILL");
    await exited(child);
    expect(processStartTime(child.pid!)).toBeUndefined();
  });
});

describe("recordContainerProcess", () => {
  it("records the pid, its start time and the cgroups, and leaves no temporary file behind", () => {
    const child = startDetached("exec sleep 60");
    const dir = workDirFor(nextTestContainerId());
    recordContainerProcess(dir, child.pid!, ["/sys/fs/cgroup/cpu/harvest/x/cgroup.procs"]);
    expect(readContainerProcess(dir)).toMatchObject({
      pid: child.pid,
      startTime: processStartTime(child.pid!),
      cgroups: ["/sys/fs/cgroup/cpu/harvest/x/cgroup.procs"],
    });
    // Beside the work directory (which belongs to the container's account), with no temporary file left behind.
    expect(readdirSync(dirname(dir)).sort()).toEqual([basename(dir), basename(containerProcessFile(dir))].sort());
  });
});

describe("killContainerLeftovers", () => {
  it("kills a recorded container process and everything in its process group", async () => {
    const child = startDetached("sleep 60 & echo $!; wait");
    const grandchild = Number(await firstLine(child));
    grandchildren.push({ pid: grandchild, startTime: processStartTime(grandchild) });
    recordContainerProcess(workDirFor(nextTestContainerId()), child.pid!);

    expect(killContainerLeftovers(dataDir)).toEqual({ killed: 1, skipped: 0, gone: 0 });
    await exited(child);
    expect(child.signalCode).toBe("SIGKILL");
    await waitFor(() => !running(grandchild), { what: "the grandchild to die", intervalMs: 25 });
  });

  it("spares a live process whose pid was reused since the container recorded it", async () => {
    const unrelated = startDetached("exec sleep 60");
    const startTime = processStartTime(unrelated.pid!)!;
    // A pid that wrapped around: the same number, but a process that started at another tick.
    writeRecord(workDirFor(nextTestContainerId()), {
      pid: unrelated.pid,
      startTime: String(Number(startTime) - 1),
      cgroups: [],
    });

    expect(killContainerLeftovers(dataDir)).toEqual({ killed: 0, skipped: 1, gone: 0 });
    expect(await stillRunningAfterAMoment(unrelated)).toBe(true);
  });

  it("spares a live process named by an old-format bare pid file, which cannot prove whose it is", async () => {
    const unrelated = startDetached("exec sleep 60");
    writeFileSync(join(workDirFor(nextTestContainerId()), "pid"), String(unrelated.pid));

    expect(killContainerLeftovers(dataDir)).toEqual({ killed: 0, skipped: 1, gone: 0 });
    expect(await stillRunningAfterAMoment(unrelated)).toBe(true);
  });

  it("counts a container whose recorded process is dead as gone, without error", async () => {
    const finished = startDetached("exit 0");
    recordContainerProcess(workDirFor(nextTestContainerId()), finished.pid!);
    await exited(finished);
    // Also: a damaged record, a work directory with nothing in it, and a stray file where an application dir would be.
    writeFileSync(containerProcessFile(workDirFor(nextTestContainerId())), "{ not json");
    workDirFor(nextTestContainerId());
    writeFileSync(join(dataDir, "containers", "stray-file"), "");

    expect(killContainerLeftovers(dataDir)).toEqual({ killed: 0, skipped: 0, gone: 3 });
  });

  it("does nothing for a data directory without containers", () => {
    expect(killContainerLeftovers(join(dataDir, "never-created"))).toEqual({ killed: 0, skipped: 0, gone: 0 });
  });

  it("kills the members of the container's own cgroup even when its first process is gone", async () => {
    // A cgroup.procs file is read like any file, so a directory shaped like a cgroup shows which pids are swept.
    const containerId = nextTestContainerId();
    const member = startDetached("exec sleep 60");
    const group = join(dataDir, "cgroup", "harvest", "node-1", containerId);
    mkdirSync(group, { recursive: true });
    writeFileSync(join(group, "cgroup.procs"), `${member.pid}\n`);
    writeRecord(workDirFor(containerId), { pid: 1 << 30, startTime: "1", cgroups: [join(group, "cgroup.procs")] });

    expect(killContainerLeftovers(dataDir)).toEqual({ killed: 1, skipped: 0, gone: 0 });
    await exited(member);
    expect(member.signalCode).toBe("SIGKILL");
  });

  it("never sweeps a recorded cgroup that is not the container's own (a parent group or the root)", async () => {
    const unrelated = startDetached("exec sleep 60");
    const parent = join(dataDir, "cgroup", "harvest", "node-1");
    mkdirSync(parent, { recursive: true });
    writeFileSync(join(parent, "cgroup.procs"), `${unrelated.pid}\n`);
    writeRecord(workDirFor(nextTestContainerId()), {
      pid: 1 << 30,
      startTime: "1",
      cgroups: [join(parent, "cgroup.procs")],
    });

    expect(killContainerLeftovers(dataDir)).toEqual({ killed: 0, skipped: 0, gone: 1 });
    expect(await stillRunningAfterAMoment(unrelated)).toBe(true);
  });

  it.skipIf(!existsSync("/proc/sys/kernel/random/boot_id"))(
    "spares a process recorded during another boot even when pid and start time match",
    async () => {
      const unrelated = startDetached("exec sleep 60");
      writeRecord(workDirFor(nextTestContainerId()), {
        pid: unrelated.pid,
        startTime: processStartTime(unrelated.pid!),
        bootId: "00000000-0000-0000-0000-000000000000",
        cgroups: [],
      });

      expect(killContainerLeftovers(dataDir)).toEqual({ killed: 0, skipped: 1, gone: 0 });
      expect(await stillRunningAfterAMoment(unrelated)).toBe(true);
    },
  );

  it("kills a container the node manager launched, once that node manager is gone", async () => {
    const container = launch(["sleep", "60"], detectCgroups("harvest-test-unused", "none"));

    expect(killContainerLeftovers(dataDir)).toEqual({ killed: 1, skipped: 0, gone: 0 });
    await container.waitForExit();
    expect(container.diagnostics).toBe("killed by SIGKILL");
  });
});

describe.skipIf(cgroups.mode === "none")(`killContainerLeftovers with real cgroups (${cgroups.mode})`, () => {
  it("kills a process that left the container's process group but not its cgroup", async () => {
    const containerId = nextTestContainerId();
    const procsFiles = cgroups.create(containerId, 1000, 256);
    createdGroups.push(...procsFiles.map((f) => join(f, "..")));
    // The container's first process exits at once; what it started lives on in another session, in the cgroup.
    const escapee = startDetached("exec sleep 60");
    for (const f of procsFiles) writeFileSync(f, String(escapee.pid));
    const first = startDetached("exit 0");
    recordContainerProcess(workDirFor(containerId), first.pid!, procsFiles);
    await exited(first);

    expect(killContainerLeftovers(dataDir)).toEqual({ killed: 1, skipped: 0, gone: 0 });
    await exited(escapee);
    expect(escapee.signalCode).toBe("SIGKILL");
  });

  it("records a launched container's cgroups, through which the cleanup reaches what escaped its session", async () => {
    const container = launch(["/bin/sh", "-c", "setsid sleep 60 & echo $! > escapee; wait"], cgroups);
    const escapeeFile = join(container.spec.workDir, "escapee");
    await waitFor(() => existsSync(escapeeFile) && readFileSync(escapeeFile, "utf8").endsWith("\n"), {
      what: "the escapee's pid file",
      intervalMs: 25,
    });
    const escapee = Number(readFileSync(escapeeFile, "utf8"));
    grandchildren.push({ pid: escapee, startTime: processStartTime(escapee) });
    const record = readContainerProcess(container.spec.workDir);
    expect(record?.cgroups.length).toBeGreaterThan(0);
    expect(record?.cgroups.every((f) => f.endsWith(`/${container.spec.containerId}/cgroup.procs`))).toBe(true);
    createdGroups.push(...(record?.cgroups ?? []).map((f) => join(f, "..")));

    expect(killContainerLeftovers(dataDir)).toEqual({ killed: 1, skipped: 0, gone: 0 });
    await container.waitForExit();
    await waitFor(() => !running(escapee), { what: "the escapee to die", intervalMs: 25 });
  });
});
