/**
 * The pure parts of the resource manager's web UI: the heartbeat ring buffer behind the live charts, the tenants
 * page's hourly means and daily profile, the DAG layout, why a job waits, a node's state in service, the cluster
 * totals, the `?states=` filter and the web server's options.
 */
import { describe, expect, it } from "vitest";
import { parseDag } from "../../common/dag-spec.js";
import { RingBuffer } from "../../resourcemanager/node-tracker.js";
import { resolveResourceManagerOptions } from "../../resourcemanager/options.js";
import {
  clusterMetrics,
  clusterTotals,
  dagView,
  dailyProfile,
  hourlyMeans,
  logsCommand,
  parseStates,
  serviceStateOf,
  waitingOf,
} from "../../resourcemanager/web.js";
import type { RmNodeInfo } from "../../resourcemanager/web.js";
import { thrown } from "../error-code.js";
import { detailsOf } from "../../common/errors.js";

const HOUR = 3_600_000;
const DAY = 24 * HOUR;

describe("RingBuffer", () => {
  it("keeps the newest items up to its capacity, oldest first", () => {
    const b = new RingBuffer<number>(3);
    expect(b.toArray()).toEqual([]);
    b.push(1);
    b.push(2);
    expect(b.toArray()).toEqual([1, 2]);
    b.push(3);
    b.push(4);
    b.push(5);
    expect(b.toArray()).toEqual([3, 4, 5]);
    expect(b.size).toBe(3);
    for (let i = 6; i <= 100; i++) b.push(i);
    expect(b.toArray()).toEqual([98, 99, 100]);
  });

  it("hands out a copy", () => {
    const b = new RingBuffer<number>(2);
    b.push(1);
    b.toArray().push(7);
    expect(b.toArray()).toEqual([1]);
  });

  it("refuses a capacity that is not a positive integer", () => {
    expect(thrown(() => new RingBuffer(0)).code).toBe("INVALID_ARGUMENT");
    expect(thrown(() => new RingBuffer(1.5)).code).toBe("INVALID_ARGUMENT");
  });
});

describe("hourly means and the daily profile", () => {
  it("averages the samples of each clock hour, skipping hours without any", () => {
    const t0 = 10 * DAY;
    const series = {
      timesMs: [t0, t0 + 20 * 60_000, t0 + 40 * 60_000, t0 + 3 * HOUR + 1],
      cpuPct: [10, 20, 30, 80],
    };
    expect(hourlyMeans(series)).toEqual({ timesMs: [t0, t0 + 3 * HOUR], cpuPct: [20, 80] });
    expect(hourlyMeans({ timesMs: [], cpuPct: [] })).toEqual({ timesMs: [], cpuPct: [] });
  });

  it("folds every day into 24 hourly means (UTC), null where no sample fell", () => {
    const timesMs: number[] = [];
    const cpuPct: number[] = [];
    // Three days: busy at 09:00 UTC (60, 70, 80), quiet at 03:00 (5 each day), nothing at other hours.
    for (let d = 0; d < 3; d++) {
      timesMs.push(d * DAY + 3 * HOUR, d * DAY + 9 * HOUR + 1_000);
      cpuPct.push(5, 60 + 10 * d);
    }
    const profile = dailyProfile({ timesMs, cpuPct });
    expect(profile).toHaveLength(24);
    expect(profile[3]).toBe(5);
    expect(profile[9]).toBe(70);
    expect(profile.filter((v) => v === null)).toHaveLength(22);
    expect(dailyProfile({ timesMs: [], cpuPct: [] })).toEqual(new Array(24).fill(null));
  });

  it("ignores values that are not numbers", () => {
    expect(hourlyMeans({ timesMs: [0, 1], cpuPct: [Number.NaN, 40] }).cpuPct).toEqual([40]);
    expect(dailyProfile({ timesMs: [0, 1], cpuPct: [40] })[0]).toBe(40);
  });
});

describe("dagView", () => {
  const dag = parseDag(
    JSON.stringify({
      name: "diamond",
      vertices: ["a", "b", "c", "d"].map((name) => ({
        name,
        parallelism: 2,
        command: ["true"],
        resources: { vcores: 1, memoryMb: 128 },
      })),
      edges: [
        { from: "a", to: "b", type: "scatter-gather" },
        { from: "a", to: "c", type: "broadcast" },
        { from: "b", to: "d", type: "one-to-one" },
        { from: "c", to: "d", type: "scatter-gather" },
      ],
    }),
  );

  it("places each vertex in the layer of its longest path from a source, with its progress", () => {
    const view = dagView(dag, {
      vertices: [
        {
          name: "a",
          total: 2,
          succeeded: 2,
          running: 0,
          preempted: 1,
          failedAttempts: 0,
          state: "SUCCEEDED",
          lost: 0,
          counters: {},
          nodeLocal: 0,
          rackLocal: 0,
          offSwitch: 0,
        },
        {
          name: "b",
          total: 2,
          succeeded: 1,
          running: 1,
          preempted: 0,
          failedAttempts: 1,
          state: "RUNNING",
          lost: 0,
          counters: {},
          nodeLocal: 0,
          rackLocal: 0,
          offSwitch: 0,
        },
      ],
      tasksRun: 4,
      tasksPreempted: 1,
      tasksLost: 0,
      taskFailures: 1,
    });
    expect(view.vertices.map((v) => [v.name, v.level, v.row])).toEqual([
      ["a", 0, 0],
      ["b", 1, 0],
      ["c", 1, 1],
      ["d", 2, 0],
    ]);
    expect(view.vertices[0]).toMatchObject({ state: "SUCCEEDED", succeeded: 2, preempted: 1, vcoresMilli: 1000 });
    expect(view.vertices[2]).toMatchObject({ state: "", total: 2, succeeded: 0 });
    expect(view.edges).toHaveLength(4);
    expect(JSON.stringify(view)).not.toContain("command");
  });

  it("shows the reported vertices, unconnected, when the DAG cannot be read", () => {
    const view = dagView(undefined, {
      vertices: [
        {
          name: "x",
          total: 3,
          succeeded: 1,
          running: 0,
          preempted: 0,
          failedAttempts: 0,
          state: "RUNNING",
          lost: 0,
          counters: {},
          nodeLocal: 0,
          rackLocal: 0,
          offSwitch: 0,
        },
      ],
      tasksRun: 1,
      tasksPreempted: 0,
      tasksLost: 0,
      taskFailures: 0,
    });
    expect(view).toEqual({
      vertices: [expect.objectContaining({ name: "x", total: 3, parallelism: 3, level: 0, row: 0 })],
      edges: [],
    });
    expect(dagView(undefined, null)).toEqual({ vertices: [], edges: [] });
  });
});

describe("why a job waits", () => {
  const report = (state: string, diagnostics = "", placementNote = "") => ({ state, diagnostics, placementNote });

  it("names admission, Algorithm 1's class wait and the job manager's container", () => {
    expect(waitingOf(report("QUEUED", "waiting for admission (1 in the queue): risk 0.3"))).toEqual({
      kind: "admission",
      reason: "waiting for admission (1 in the queue): risk 0.3",
    });
    expect(waitingOf(report("RUNNING", "", "waiting: no class has room for 4 cores"))).toEqual({
      kind: "class",
      reason: "waiting: no class has room for 4 cores",
    });
    expect(waitingOf(report("ACCEPTED", "attempt 2 waiting for a container"))?.kind).toBe("job-manager");
  });

  it("says nothing of a running or ended job", () => {
    expect(waitingOf(report("RUNNING", "", "waiting for the job's first task request"))).toBeUndefined();
    expect(waitingOf(report("FINISHED", "", "waiting: stale note"))).toBeUndefined();
    expect(waitingOf(report("RUNNING", "", "class c1: medium job"))).toBeUndefined();
  });
});

describe("a node's state in service and the cluster's totals", () => {
  it("lets LOST win over a drain, and a drain over RUNNING", () => {
    expect(serviceStateOf("LOST", "DRAINING")).toBe("LOST");
    expect(serviceStateOf("RUNNING", "DRAINING")).toBe("DRAINING");
    expect(serviceStateOf("RUNNING", "DRAINED")).toBe("DRAINED");
    expect(serviceStateOf("RUNNING", "")).toBe("RUNNING");
  });

  const node = (
    id: string,
    serviceState: RmNodeInfo["serviceState"],
    primary: number,
    allocated: number,
  ): RmNodeInfo => ({
    nodeId: id,
    nmAddress: "",
    rack: "/r",
    state: serviceState === "LOST" ? "LOST" : "RUNNING",
    capacity: { vcoresMilli: 4000, memoryMb: 8192 },
    primaryUsage: { vcoresMilli: primary, memoryMb: 1024 },
    allocated: { vcoresMilli: allocated, memoryMb: 512 },
    containers: allocated / 1000,
    lastHeartbeatMs: 0,
    primarySource: "",
    drainState: serviceState === "DRAINING" ? "DRAINING" : "",
    serviceState,
    classId: "",
    power: {
      domain: "r",
      drawWatts: 100,
      drawSource: "measured",
      capWatts: 0,
      capDomain: "",
      capped: false,
      cappingState: "",
      throttledContainers: 0,
    },
  });

  it("counts nodes by state and sums the cores of the nodes not lost", () => {
    const t = clusterTotals(
      [node("a", "RUNNING", 1000, 2000), node("b", "DRAINING", 3000, 1000), node("c", "LOST", 4000, 0)],
      [{ state: "RUNNING" }, { state: "QUEUED" }, { state: "FINISHED" }, { state: "FINISHED" }],
    );
    expect(t.nodesByState).toEqual({ RUNNING: 1, LOST: 1, DRAINING: 1, DRAINED: 0 });
    expect(t.appsByState).toMatchObject({ RUNNING: 1, QUEUED: 1, FINISHED: 2, ACCEPTED: 0 });
    expect(t.vcoresMilli).toEqual({ capacity: 8000, primary: 4000, allocated: 3000, free: 1000 });
    expect(t.containers).toBe(3);
    expect(t.powerDrawWatts).toBe(200);
    expect(clusterMetrics(t)).toMatchObject({
      totalNodes: 3,
      activeNodes: 1,
      lostNodes: 1,
      drainingNodes: 1,
      appsPending: 1,
      appsRunning: 1,
      appsCompleted: 2,
      totalVcores: 8,
      availableVcores: 1,
    });
  });
});

describe("request parameters and options", () => {
  it("parses ?states= case-insensitively and refuses unknown states, naming the field", () => {
    expect(parseStates(null, ["RUNNING", "FINISHED"])).toEqual([]);
    expect(parseStates("running, FINISHED,", ["RUNNING", "FINISHED"])).toEqual(["RUNNING", "FINISHED"]);
    const err = thrown(() => parseStates("DONE", ["RUNNING"], "state"));
    expect(err.code).toBe("INVALID_ARGUMENT");
    expect(detailsOf(err, "INVALID_ARGUMENT", "CONFIG_INVALID")?.field).toBe("state");
  });

  it("prints the logs command for the job manager and for a container", () => {
    expect(logsCommand("application_1_0001")).toBe("harvest job logs application_1_0001");
    expect(logsCommand("application_1_0001", "container_1", "stdout")).toBe(
      "harvest job logs application_1_0001 --container container_1 --stream stdout",
    );
  });

  it("binds the web server beside the gRPC server by default, on a free port", () => {
    const o = resolveResourceManagerOptions({ dataDir: "/tmp/x", host: "10.0.0.5", insecure: true });
    expect(o).toMatchObject({ httpHost: "10.0.0.5", httpPort: 0 });
    expect(resolveResourceManagerOptions({ dataDir: "/tmp/x", httpHost: "0.0.0.0", httpPort: 8088 })).toMatchObject({
      httpHost: "0.0.0.0",
      httpPort: 8088,
    });
  });

  it("refuses a web port out of range or the gRPC port itself", () => {
    for (const httpPort of [-1, 65536, 1.5]) {
      const err = thrown(() => resolveResourceManagerOptions({ dataDir: "/tmp/x", httpPort }));
      expect(err.code).toBe("CONFIG_INVALID");
      expect(detailsOf(err, "INVALID_ARGUMENT", "CONFIG_INVALID")?.field).toBe("httpPort");
    }
    expect(
      detailsOf(
        thrown(() => resolveResourceManagerOptions({ dataDir: "/tmp/x", port: 8032, httpPort: 8032 })),
        "INVALID_ARGUMENT",
        "CONFIG_INVALID",
      )?.field,
    ).toBe("httpPort");
  });
});
