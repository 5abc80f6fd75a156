/**
 * The preemption notice on real daemons (a resource manager, two node managers, a job manager and its tasks as
 * processes): a primary tenant that ramps up on one server crosses the notice margin before the kill level, the node
 * manager reports the task at risk on its heartbeat, the resource manager passes it on in the job manager's Allocate
 * answer, and the job manager logs it and keeps new tasks off that server, all before the task is killed. With the
 * notice off, nobody is told and the kill is the same.
 */
import { chmodSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { JobClient } from "../../client/job-client.js";
import type { JobReport } from "../../client/job-client.js";
import { Logger } from "../../common/log.js";
import { StepPrimaryMonitor } from "../../common/step-monitor.js";
import { NodeManager } from "../../nodemanager/node-manager.js";
import type { PreemptionEvent } from "../../nodemanager/node-manager.js";
import type { PreemptionNotice } from "../../nodemanager/policy/preemption-notice.js";
import { ResourceManager } from "../../resourcemanager/resource-manager.js";
import { cpuVertex, findFiles, requireBuild, waitForJob } from "./harness.js";
import { waitFor } from "../wait-for.js";

const quiet = new Logger("test", "error");

/** A job manager's "preemption notice" log lines: when (ms since the epoch) and the container each names. */
function noticesLogged(dir: string): { atMs: number; containerId: string }[] {
  const out: { atMs: number; containerId: string }[] = [];
  for (const file of findFiles(dir, "stderr")) {
    for (const line of readFileSync(file, "utf8").split("\n")) {
      if (!line.includes("[jm] preemption notice")) continue;
      const atMs = Date.parse(line.split(" ")[0] ?? "");
      const containerId = /"containerId":"([^"]+)"/.exec(line)?.[1] ?? "";
      out.push({ atMs, containerId });
    }
  }
  return out;
}

/** The task container of `report` that started after the kill `killed` (the killed task's second run). */
function rerunOf(report: JobReport, killed: PreemptionEvent): JobReport["containers"][number] | undefined {
  const tasks = report.containers.filter((c) => !c.isAm);
  expect(tasks).toHaveLength(3);
  return tasks.find((c) => c.containerId !== killed.containerId && c.startedMs > killed.atMs);
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/**
 * A resource manager and node manager n1 (4 cores, 0.4 reserved) running one job of two 1-core tasks beside its
 * 0.5-core job manager; then node manager n2, whose primary leaves no room. n1's primary then ramps 0 -> 0.3 -> 0.9
 * cores (within the 0.4-core margin of the kill level, 1.1: 3.6 allowed - 2.5 held) for 4 s -> 1.5 cores (a kill),
 * and drops back to 0 at the kill, so that n1 has room for the killed task's second run at once; n2's primary leaves
 * 3 s after the kill. The second run goes where the scheduler may put it first.
 */
async function rampedRun(dir: string, notice: PreemptionNotice) {
  const primary1 = new StepPrimaryMonitor({ capacityMilli: 4000 });
  const preempted: PreemptionEvent[] = [];
  const stops: (() => Promise<void>)[] = [];
  const nmOptions = (nodeId: string, rmAddress: string) => ({
    nodeId,
    rmAddress,
    dataDir: join(dir, nodeId),
    cgroups: "none" as const,
    yieldTickMs: 100,
    preemptionNotice: notice,
  });
  try {
    const rm = new ResourceManager({ dataDir: join(dir, "rm") }, { logger: quiet });
    await rm.start();
    stops.push(() => rm.stop());
    const n1 = new NodeManager(nmOptions("n1", rm.address), {
      logger: quiet,
      monitor: primary1,
      onPreempt: (e) => {
        preempted.push(e);
        primary1.set(0);
      },
    });
    await n1.start();
    stops.push(() => n1.stop());
    const client = new JobClient(rm.address);
    stops.push(async () => client.close());
    await waitFor(async () => ((await client.nodes()).length === 1 ? true : undefined), { what: "n1" });
    const appId = await client.submit(
      JSON.stringify({ name: `ramp-${notice}`, vertices: [cpuVertex("work", 2, { holdSeconds: 12 })] }),
    );
    await waitForJob(client, appId, (r) => r.containers.filter((c) => c.state === "RUNNING").length === 3);
    const primary2 = new StepPrimaryMonitor({ capacityMilli: 4000, initialMilli: 3600 });
    const n2 = new NodeManager(nmOptions("n2", rm.address), { logger: quiet, monitor: primary2 });
    await n2.start();
    stops.push(() => n2.stop());
    await waitFor(async () => ((await client.nodes()).length === 2 ? true : undefined), { what: "n2" });

    primary1.set(300);
    await sleep(500);
    primary1.set(900);
    await sleep(4_000);
    // No kill until now: the notice level is below the kill level.
    expect(preempted).toEqual([]);
    primary1.set(1500);
    await waitFor(async () => (preempted.length > 0 ? true : undefined), { what: "the kill" });
    await sleep(3_000);
    primary2.set(0);
    const report = await waitForJob(client, appId, () => false, { timeoutMs: 90_000 });
    return { appId, report, preempted, notices: noticesLogged(dir) };
  } finally {
    for (const stop of stops.reverse()) await stop().catch(() => undefined);
  }
}

describe("the preemption notice", () => {
  let dir: string | undefined;
  afterEach(() => {
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  function tempDir(): string {
    requireBuild();
    dir = mkdtempSync(join(tmpdir(), "harvest-preemption-notice-"));
    // The containers run as an unprivileged account when the tests run as root: it must reach their directories.
    chmodSync(dir, 0o755);
    return dir;
  }

  it("reaches the job manager before its task is killed, and the task runs again on the other server", async () => {
    const { report, preempted, notices } = await rampedRun(tempDir(), "notice");
    expect(report.state).toBe("FINISHED");
    expect(preempted).toHaveLength(1);
    const killed = preempted[0]!;
    const told = notices.find((n) => n.containerId === killed.containerId);
    expect(told, JSON.stringify(notices)).toBeDefined();
    expect(told!.atMs).toBeLessThan(killed.atMs);
    // The killed task's second run waited for n2: n1 had room at once (its primary dropped at the kill), but it had
    // given notice, and the job manager's avoidNodes kept the task off it.
    expect(rerunOf(report, killed)?.nodeId).toBe("n2");
  }, 120_000);

  it("is not sent when off, and the primary gets its cores all the same", async () => {
    const { report, preempted, notices } = await rampedRun(tempDir(), "off");
    expect(report.state).toBe("FINISHED");
    expect(preempted).toHaveLength(1);
    expect(notices).toEqual([]);
    // Without a notice nothing keeps the second run off n1, which has room first.
    expect(rerunOf(report, preempted[0]!)?.nodeId).toBe("n1");
  }, 120_000);
});
