/**
 * The compute path when things go wrong under a running job (moved from the default suite's compute-path test for
 * time): a primary tenant's spike kills the youngest secondary containers on its server and the job still completes,
 * and a node manager that dies has its containers reported lost and re-run elsewhere, neither counting a failure.
 */
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { eventsOfType } from "../../common/events.js";
import { killContainerLeftovers, readClusterEvents } from "../../localcluster/cluster.js";
import { cpuVertex, startTestCluster, traceSpec, waitForJob } from "../integration/harness.js";
import type { TestCluster } from "../integration/harness.js";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";

describe("a primary tenant spike", () => {
  let c: TestCluster;
  let traces: string;
  afterAll(async () => {
    await c?.stop();
    rmSync(traces, { recursive: true, force: true });
  });

  it("kills the youngest secondary containers on its server and the job still completes, preempted tasks re-run, no failure counted", async () => {
    traces = mkdtempSync(join(tmpdir(), "harvest-traces-"));
    // One step per second at speed 60: idle for 10 s, then half the server for 5 s, then idle again. With 4 vcores and a
    // 10 % reserve, Harvest may keep 4 - 2 - 0.4 = 1.6 vcores there during the spike.
    const spiky = traceSpec(traces, "spiky", 60, [
      ...Array<number>(10).fill(0),
      ...Array<number>(5).fill(50),
      ...Array<number>(200).fill(0),
    ]);
    const idle = traceSpec(traces, "idle", 60, Array<number>(200).fill(0));
    c = await startTestCluster({ primaries: [spiky, idle], speed: 60 });
    const appId = await c.client.submit(
      JSON.stringify({ name: "spiked", vertices: [cpuVertex("work", 6, { holdSeconds: 10 })] }),
    );
    const r = await c.client.waitForCompletion(appId, undefined, 250);
    expect(r.state).toBe("FINISHED");
    expect(r.progress?.vertices[0]?.succeeded).toBe(6);
    expect(r.taskContainers?.preempted).toBeGreaterThanOrEqual(1);
    expect(r.taskContainers?.failed).toBe(0);
    expect(r.progress?.taskFailures).toBe(0);
    // The job manager's container goes last: a half-server spike never needs it.
    expect(r.amContainers?.preempted).toBe(0);

    const preempted = r.containers.filter((x) => x.cause === "PREEMPTED_BY_PRIMARY");
    // Only the spiking server's primary took cores back.
    expect(new Set(preempted.map((x) => x.nodeId))).toEqual(new Set(["server-1"]));
    // Youngest first: every task that survived the spike on server-1 started no later than every preempted one.
    const spikeAt = Math.min(...preempted.map((x) => x.finishedMs));
    const survivors = r.containers.filter(
      (x) =>
        x.nodeId === "server-1" &&
        !x.isAm &&
        x.cause !== "PREEMPTED_BY_PRIMARY" &&
        x.startedMs > 0 &&
        x.startedMs < spikeAt &&
        x.finishedMs > spikeAt,
    );
    expect(survivors.length).toBeGreaterThanOrEqual(1);
    const age = (x: { startedMs: number; containerId: string }): [number, string] => [x.startedMs, x.containerId];
    const youngestSurvivor = survivors.map(age).sort().at(-1)!;
    const oldestVictim = preempted.map(age).sort()[0]!;
    expect(
      youngestSurvivor[0] < oldestVictim[0] ||
        (youngestSurvivor[0] === oldestVictim[0] && youngestSurvivor[1] < oldestVictim[1]),
    ).toBe(true);
  });
});

describe("a node manager that dies", () => {
  let c: TestCluster;
  afterAll(() => c?.stop());

  it("has its containers reported lost after the expiry, and they re-run elsewhere without counting a failure", async () => {
    c = await startTestCluster({
      idleServers: 3,
      rm: { nodeExpiryMs: 2_500, heartbeatIntervalMs: 500 },
    });
    const appId = await c.client.submit(
      JSON.stringify({ name: "survivor", vertices: [cpuVertex("work", 6, { holdSeconds: 6 })] }),
    );
    const running = await waitForJob(
      c.client,
      appId,
      (r) => r.containers.filter((x) => !x.isAm && x.state === "RUNNING").length === 6,
    );
    const amNode = running.containers.find((x) => x.isAm)?.nodeId;
    const victimNode = running.containers.find((x) => !x.isAm && x.state === "RUNNING" && x.nodeId !== amNode)?.nodeId;
    expect(victimNode).toBeDefined();
    const victim = c.desc.nodes.find((n) => n.nodeId === victimNode)!;
    // The server dies: its node manager and every process on it.
    process.kill(victim.pid, "SIGKILL");
    killContainerLeftovers(victim.dataDir);

    const r = await c.client.waitForCompletion(appId, undefined, 250);
    expect(r.state).toBe("FINISHED");
    expect(r.taskContainers?.lost).toBeGreaterThanOrEqual(1);
    expect(r.taskContainers?.failed).toBe(0);
    expect(r.progress?.taskFailures).toBe(0);
    const lost = r.containers.filter((x) => x.cause === "LOST");
    expect(lost.length).toBeGreaterThanOrEqual(1);
    expect(lost.every((x) => x.nodeId === victimNode)).toBe(true);
    // The resource manager wrote each of them down as a typed event (what the soak reads).
    const lostEvents = eventsOfType(readClusterEvents(c.dir).events, "container-lost-with-node");
    expect(lostEvents.map((e) => e.containerId).sort()).toEqual(lost.map((x) => x.containerId).sort());
    expect(lostEvents.every((e) => e.nodeId === victimNode && e.daemon === "rm")).toBe(true);
    const nodes = await c.client.nodes();
    expect(nodes.find((n) => n.nodeId === victimNode)?.state).toBe("LOST");
  });
});
