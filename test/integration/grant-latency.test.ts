/**
 * Grants do not wait for node heartbeats: new demand (a job's job manager, a stage whose upstream finished) is offered
 * every running node at once, and a node manager reports a container's end at once. Here the node managers heartbeat
 * once a minute, so a job that had to wait for periodic heartbeats could not finish within the test's timeout.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { cpuVertex, startTestCluster } from "./harness.js";
import type { TestCluster } from "./harness.js";

describe("a cluster whose node managers heartbeat once a minute", () => {
  let c: TestCluster;
  beforeAll(async () => {
    c = await startTestCluster({ idleServers: 2, rm: { heartbeatIntervalMs: 60_000, nodeExpiryMs: 600_000 } });
  });
  afterAll(() => c?.stop());

  it("runs a three-stage job to the end well before any node's second heartbeat", async () => {
    const registeredMs = Date.now();
    const appId = await c.client.submit(
      JSON.stringify({
        name: "between-heartbeats",
        vertices: [cpuVertex("a", 3), cpuVertex("b", 2), cpuVertex("c", 1)],
        edges: [
          { from: "a", to: "b", type: "scatter-gather" },
          { from: "b", to: "c", type: "scatter-gather" },
        ],
      }),
    );
    // Four rounds of grants (the job manager, then each stage): each would wait up to a minute for a heartbeat.
    const r = await c.client.waitForCompletion(appId, undefined, 200);
    expect(r.state).toBe("FINISHED");
    expect(r.progress?.vertices.map((v) => v.succeeded)).toEqual([3, 2, 1]);
    expect(Date.now() - registeredMs).toBeLessThan(60_000);
    // The nodes were still there to take work: none was lost for its silence.
    expect((await c.client.nodes()).map((n) => n.state)).toEqual(["RUNNING", "RUNNING"]);
  });
});
