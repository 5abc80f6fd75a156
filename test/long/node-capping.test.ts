/**
 * The node manager's capping agent on a real node: an in-process resource manager and node manager on loopback, the
 * model power meter (this machine has no RAPL), and secondary containers that are real `node` processes burning a core
 * each, granted by the resource manager to the test acting as their job manager and started through the node
 * manager's ContainerManager gRPC. Throttling a burning container lowers its measured CPU, hence the modelled draw.
 * The primary tenant replays a steady trace (a model, so that its level is known exactly and any change is visible).
 */
import { chmodSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { waitFor } from "../wait-for.js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { JobClient } from "../../client/job-client.js";
import { call, loadHarvestProto, makeClient } from "../../common/grpc.js";
import { Logger } from "../../common/log.js";
import { profileWatts, resolvePowerProfile } from "../../common/power-profiles.js";
import { NodeManager } from "../../nodemanager/node-manager.js";
import { ResourceManager } from "../../resourcemanager/resource-manager.js";
import type { ApplicationMasterServiceClient } from "../../proto/generated/harvest/v1/ApplicationMasterService.js";
import type { ContainerManagerClient } from "../../proto/generated/harvest/v1/ContainerManager.js";
import type { PowerAdminClient } from "../../proto/generated/harvest/v1/PowerAdmin.js";
import { requireBuild } from "../integration/harness.js";

const CAPACITY_MILLI = 4_000;
/** The primary's steady level: 25 % of the server. */
const PRIMARY_PCT = 25;
const PRIMARY_CORES = (PRIMARY_PCT / 100) * (CAPACITY_MILLI / 1000);
const TASK_MILLI = 1_000;
const JOB_PRIORITY = 7;
const FLOOR_FRACTION = 0.1;
const PROFILE = resolvePowerProfile("dell-r740-xeon-8180");
const BURN = "for (;;) {}";
const quiet = new Logger("test", "error");

/** Watts the model meter gives for `cores` busy on the server. */
function modelWatts(cores: number): number {
  return profileWatts(PROFILE, cores / (CAPACITY_MILLI / 1000));
}

// "auto" throttles by cgroup CPU quota where cgroups are writable (and by signals elsewhere); "signal" always by a
// SIGSTOP/SIGCONT duty cycle.
describe.each(["auto", "signal"] as const)("a node over its power budget (throttle %s)", (throttle) => {
  let dir: string;
  let rm: ResourceManager;
  let nm: NodeManager;
  let client: JobClient;
  let am: ApplicationMasterServiceClient;
  let nmClient: ContainerManagerClient;
  let powerAdmin: PowerAdminClient;
  let appId: string;
  /** The two burning tasks, oldest first. */
  const tasks: { id: string; pid: number }[] = [];
  /** Every primary sample the node manager held while the test watched (it must never move). */
  const primarySamples = new Set<number>();

  const watch = (): void => {
    primarySamples.add(nm.primarySample.cpuMilli);
  };

  beforeAll(async () => {
    requireBuild();
    dir = mkdtempSync(join(tmpdir(), "harvest-capping-"));
    // The node manager's containers run as an unprivileged account (when the tests run as root), which must get in.
    chmodSync(dir, 0o755);
    const trace = join(dir, "primary.csv");
    writeFileSync(trace, `time_s,cpu_pct\n0,${PRIMARY_PCT}\n300,${PRIMARY_PCT}\n600,${PRIMARY_PCT}\n`);
    rm = new ResourceManager(
      {
        dataDir: join(dir, "rm"),
        heartbeatIntervalMs: 100,
        amResource: { vcoresMilli: 500, memoryMb: 128 },
        // The test is the job manager: the resource manager launches an idle stand-in for it.
        jobManagerCommand: ["node", "-e", "setInterval(() => {}, 1 << 30)"],
      },
      { logger: quiet },
    );
    await rm.start();
    nm = new NodeManager(
      {
        // Unique: a node's cgroup is harvest/<nodeId>, and other runs may share the machine.
        nodeId: `capping-${throttle}-${process.pid}`,
        rmAddress: rm.address,
        dataDir: join(dir, "nm"),
        capacity: { vcoresMilli: CAPACITY_MILLI, memoryMb: 4096 },
        primary: `trace:${trace}`,
        powerMeter: "model",
        powerProfile: PROFILE.id,
        throttle,
        capping: {
          floorFraction: FLOOR_FRACTION,
          quietMs: 500,
          killDeadlineMs: 600,
          killIntervalMs: 500,
          // One kill per step, so that the order of the kills shows.
          containersPerStep: 1,
        },
      },
      { logger: quiet },
    );
    await nm.start();
    client = new JobClient(rm.address);
    const proto = loadHarvestProto();
    am = makeClient(proto.ApplicationMasterService, rm.address);
    nmClient = makeClient(proto.ContainerManager, nm.address);
    powerAdmin = makeClient(proto.PowerAdmin, rm.address);
    await waitFor(async () => (await client.nodes()).length === 1, {
      what: "the node manager to register",
      timeoutMs: 10_000,
      intervalMs: 50,
    });

    appId = await client.submit(
      JSON.stringify({
        name: "burners",
        priority: JOB_PRIORITY,
        vertices: [
          { name: "burn", parallelism: 2, command: ["node", "-e", BURN], resources: { vcores: 1, memoryMb: 128 } },
        ],
      }),
    );
    await waitFor(
      async () => {
        const r = await client.status(appId);
        return r.containers.some((c) => c.isAm && c.state === "RUNNING");
      },
      { what: "the job manager's container to run", timeoutMs: 15_000, intervalMs: 50 },
    );
    await call(am, am.registerApplicationMaster, { appId, attempt: 1, maxConcurrency: 2 });
    // One task at a time, so that their start times differ and "youngest first" means something.
    while (tasks.length < 2) {
      const res = await call(am, am.allocate, {
        appId,
        attempt: 1,
        asks: [{ priority: 0, resource: { vcoresMilli: TASK_MILLI, memoryMb: 128 }, count: 2 - tasks.length }],
        releases: [],
        progress: null,
      });
      for (const c of res.allocated) {
        // The grant carries the job's priority (token-covered), which the capping agent orders its victims by.
        expect(c.jobPriority).toBe(JOB_PRIORITY);
        const { pid } = await call(nmClient, nmClient.startContainer, {
          container: c,
          appId,
          argv: ["node", "-e", BURN],
          env: {},
          isAm: false,
        });
        tasks.push({ id: c.id, pid });
        await sleep(100);
      }
      if (tasks.length < 2) await sleep(50);
    }
  });

  afterAll(async () => {
    am?.close();
    nmClient?.close();
    powerAdmin?.close();
    client?.close();
    await nm?.stop();
    await rm?.stop();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  /** Waits until the burning tasks show in the draw: above what the primary and the tasks at their floor would draw. */
  async function burningDraw(): Promise<number> {
    const floorDraw = modelWatts(PRIMARY_CORES + 2 * FLOOR_FRACTION);
    let draw = 0;
    await waitFor(
      () => {
        watch();
        draw = nm.power.watts ?? 0;
        return nm.power.state === "uncapped" && draw > floorDraw + 8;
      },
      {
        what: () => `the tasks to draw more than their floor would (${draw.toFixed(1)} W)`,
        timeoutMs: 15_000,
        intervalMs: 50,
      },
    );
    return draw;
  }

  it("throttles the secondary containers under a budget below the draw, kills none, leaves the primary alone, and lifts the cap after a quiet period", async () => {
    const draw = await burningDraw();
    // Halfway between the draw with every task at its floor and the draw now: throttling suffices.
    const budget = (modelWatts(PRIMARY_CORES + 2 * FLOOR_FRACTION) + draw) / 2;
    nm.setPowerBudget(budget);

    await waitFor(
      () => {
        watch();
        return nm.power.state === "capped" && nm.power.throttledContainers > 0;
      },
      { what: "the node to throttle its containers", timeoutMs: 5_000, intervalMs: 50 },
    );
    // The modelled draw comes back under the budget: several readings in a row (new ones come every 200 ms).
    let under = 0;
    let last: number | undefined;
    await waitFor(
      () => {
        watch();
        const w = nm.power.watts;
        if (w !== undefined && w !== last) under = w <= budget ? under + 1 : 0;
        last = w;
        return under >= 3;
      },
      {
        what: () =>
          `three readings in a row under the budget (draw ${last?.toFixed(1)} W, budget ${budget.toFixed(1)} W, ${nm.power.reason})`,
        timeoutMs: 10_000,
        intervalMs: 50,
      },
    );
    expect(nm.power.budgetWatts).toBeCloseTo(budget, 6);
    expect(nm.power.budgetSource).toBe("node");
    expect(nm.power.kills).toBe(0);
    const capped = await client.status(appId);
    expect(capped.containers.filter((c) => !c.isAm && c.state === "RUNNING").map((c) => c.containerId)).toEqual(
      expect.arrayContaining(tasks.map((t) => t.id)),
    );

    // Lifted: a budget far above the draw holds the cap until the draw has been under the uncap line for quietMs.
    nm.setPowerBudget(draw * 10);
    await waitFor(
      () => {
        watch();
        return nm.power.state === "uncapped" && nm.power.throttledContainers === 0;
      },
      { what: "the cap to be lifted", timeoutMs: 10_000, intervalMs: 50 },
    );
    // Unthrottled, the tasks burn again: the draw climbs back over the budget that had held them.
    await waitFor(
      () => {
        watch();
        return (nm.power.watts ?? 0) > budget;
      },
      { what: "the draw to climb back over the budget", timeoutMs: 10_000, intervalMs: 50 },
    );
    nm.setPowerBudget(0);

    expect(nm.power.kills).toBe(0);
    // The primary's sample never moved, and the resource manager saw it as it is.
    expect([...primarySamples]).toEqual([PRIMARY_CORES * 1000]);
    expect((await client.nodes())[0]?.primaryUsage?.vcoresMilli).toBe(PRIMARY_CORES * 1000);
  });

  it("reports the draw, the meter and the capping state in its heartbeats, as the resource manager shows", async () => {
    const draw = await burningDraw();
    nm.setPowerBudget((modelWatts(PRIMARY_CORES + 2 * FLOOR_FRACTION) + draw) / 2);
    await waitFor(() => nm.power.state === "capped" && nm.power.throttledContainers > 0, {
      what: "the node to throttle its containers",
      timeoutMs: 5_000,
      intervalMs: 50,
    });
    const nodeId = nm.options.nodeId;
    let seen:
      { reportedWatts: number; powerMeter: string; cappingState: string; throttledContainers: number } | undefined;
    await waitFor(
      async () => {
        const list = await call(powerAdmin, powerAdmin.listDomains, { domain: "" });
        seen = list.nodes.find((n) => n.nodeId === nodeId);
        return seen?.cappingState === "capped" && seen.throttledContainers > 0 && seen.reportedWatts > 0;
      },
      {
        what: () => `the resource manager to report the node capped (${JSON.stringify(seen)})`,
        timeoutMs: 5_000,
        intervalMs: 50,
      },
    );
    expect(seen?.powerMeter).toBe(nm.power.meter);
    expect(seen?.powerMeter).toContain(PROFILE.id);
    // The reported draw is a recent reading of the node's own meter.
    expect(seen?.reportedWatts).toBeGreaterThan(modelWatts(PRIMARY_CORES) - 1);
    expect(seen?.reportedWatts).toBeLessThan(modelWatts(PRIMARY_CORES + 2 + 0.5) + 1);
    nm.setPowerBudget(0);
    await waitFor(() => nm.power.state === "uncapped", {
      what: "the cap to be lifted",
      timeoutMs: 5_000,
      intervalMs: 50,
    });
  });

  it("throttles under a power domain's budget cut made on the resource manager, and the domain comes back under it", async () => {
    const draw = await burningDraw();
    const nodeId = nm.options.nodeId;
    const before = await call(powerAdmin, powerAdmin.listDomains, { domain: "" });
    const domain = before.nodes.find((n) => n.nodeId === nodeId)?.domain;
    expect(domain, JSON.stringify(before.nodes)).toBeTruthy();
    // The operator cuts the domain (one node here) to between its floor draw and its draw now.
    const budget = (modelWatts(PRIMARY_CORES + 2 * FLOOR_FRACTION) + draw) / 2;
    await call(powerAdmin, powerAdmin.setBudget, { domain: domain!, budgetWatts: budget });
    // The domain alerts, the node gets the domain's share as its budget and throttles its containers.
    await waitFor(
      () => {
        watch();
        const p = nm.power;
        return p.budgetSource === "domain" && p.state === "capped" && p.throttledContainers > 0;
      },
      {
        what: () => `the node to throttle under the domain's budget (${nm.power.reason})`,
        timeoutMs: 5_000,
        intervalMs: 50,
      },
    );
    expect(nm.power.budgetWatts).toBeCloseTo(budget, 3);
    expect(nm.power.budgetDomain).toBe(domain);
    // The resource manager sees the domain's draw back under its budget, with nothing killed.
    let view: { drawWatts: number; budgetWatts: number } | undefined;
    await waitFor(
      async () => {
        const list = await call(powerAdmin, powerAdmin.listDomains, { domain: domain! });
        view = list.domains.find((d) => d.path === domain);
        return view !== undefined && view.drawWatts > 0 && view.drawWatts <= budget;
      },
      {
        what: () => `the domain's draw back under its budget (${JSON.stringify(view)})`,
        timeoutMs: 10_000,
        intervalMs: 50,
      },
    );
    expect(nm.power.kills).toBe(0);
    await call(powerAdmin, powerAdmin.setBudget, { domain: domain!, budgetWatts: 0 });
    await waitFor(() => nm.power.state === "uncapped", {
      what: () => `the cap to be lifted (${JSON.stringify(nm.power)})`,
      timeoutMs: 5_000,
      intervalMs: 50,
    });
    expect([...primarySamples]).toEqual([PRIMARY_CORES * 1000]);
  });

  it("kills secondary containers, youngest first, when throttling to the floor cannot meet the budget, and the resource manager counts them as preempted", async () => {
    await burningDraw();
    // Below the primary plus either task at its floor: only killing both tasks gets the draw under it.
    nm.setPowerBudget(modelWatts(PRIMARY_CORES + 0.03));
    let throttledBeforeKill = false;
    await waitFor(
      async () => {
        watch();
        const p = nm.power;
        if (p.kills === 0 && p.state === "capped" && p.throttledContainers > 0) throttledBeforeKill = true;
        const r = await client.status(appId);
        return tasks.every((t) => r.containers.find((c) => c.containerId === t.id)?.state === "COMPLETE");
      },
      { what: () => `both tasks to be killed (${nm.power.reason})`, timeoutMs: 15_000, intervalMs: 50 },
    );
    // Throttling to the floor came first; the kills only after it was not enough.
    expect(throttledBeforeKill).toBe(true);
    // With the tasks gone the draw is under the budget: the job manager's container, which goes last, is spared. That
    // no third kill follows is what is checked here, so this is a sleep (two kill intervals), not a wait.
    await sleep(1_000);
    expect(nm.power.kills).toBe(2);

    const r = await client.status(appId);
    const [older, younger] = tasks.map((t) => r.containers.find((c) => c.containerId === t.id)!);
    expect(older?.cause).toBe("PREEMPTED_BY_POWER");
    expect(younger?.cause).toBe("PREEMPTED_BY_POWER");
    // Youngest first, one kill step apart.
    expect(younger!.finishedMs).toBeLessThan(older!.finishedMs);
    expect(r.containers.find((c) => c.isAm)?.state).toBe("RUNNING");
    // A preemption, not a failure.
    expect(r.taskContainers?.failed).toBe(0);
    expect(r.taskContainers?.preempted).toBe(2);
    nm.setPowerBudget(0);
    expect([...primarySamples]).toEqual([PRIMARY_CORES * 1000]);
  });
});
