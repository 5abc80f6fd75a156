/**
 * A client waiting for a job rides out a short resource-manager outage: it keeps polling while the RM is down, and
 * resolves with the job's real outcome once the restarted RM answers; a longer outage ends the wait with a coded error.
 */
import { afterAll, describe, expect, it } from "vitest";
import { isHarvestError } from "../../common/errors.js";
import type { RmOutage } from "../../client/job-client.js";
import { cpuVertex, restartLocalRm, startLocalCluster, waitForJob } from "../integration/harness.js";
import type { LocalCluster } from "../integration/harness.js";

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

describe("JobClient.waitForCompletion across a resource-manager outage", () => {
  let c: LocalCluster | undefined;
  afterAll(async () => c?.stop());

  it("keeps polling while the RM is down, says so once, and resolves FINISHED after the RM comes back", async () => {
    c = await startLocalCluster({ nm: { reconnectMaxMs: 500 } });
    const { client } = c;
    const appId = await client.submit(
      JSON.stringify({ name: "outlives-rm", vertices: [cpuVertex("a", 1, { holdSeconds: 4 })] }),
    );
    await waitForJob(client, appId, (r) => r.state === "RUNNING");

    const outages: RmOutage[] = [];
    const recoveries: number[] = [];
    const states: string[] = [];
    const waiting = client.waitForCompletion(appId, (r) => states.push(r.state), {
      pollMs: 100,
      rmRetryMs: 60_000,
      onOutage: (o) => outages.push(o),
      onRecovered: (_o, downMs) => recoveries.push(downMs),
    });
    // Settle the promise's outcome now, so that a rejection during the outage is not an unhandled one.
    const outcome = waiting.then(
      (report) => ({ report, error: undefined }),
      (error: unknown) => ({ report: undefined, error }),
    );

    // The RM goes away for about 2 s, then comes back on the same port and data directory.
    // The outage itself is what the client must ride out, so its length is a sleep.
    await restartLocalRm(c, () => sleep(2_000));

    const { report, error } = await outcome;
    expect(error).toBeUndefined();
    expect(report?.appId).toBe(appId);
    expect(report?.state).toBe("FINISHED");
    // One outage, reported once (not once per failed poll), with the codes that mean "no answer".
    expect(outages).toHaveLength(1);
    expect(["UNAVAILABLE", "DEADLINE_EXCEEDED"]).toContain(outages[0]?.error.code);
    expect(outages[0]?.retryForMs).toBe(60_000);
    expect(recoveries).toHaveLength(1);
    expect(states).toContain("RUNNING");
  });

  it("gives up with UNAVAILABLE once the outage outlasts the retry window", async () => {
    const { client } = c!;
    const appId = (await client.list())[0]!.appId;
    // The restarted RM is the last one pushed; stop it for good.
    await c!.onStop[c!.onStop.length - 1]!();
    const outages: RmOutage[] = [];
    const err = await client
      .waitForCompletion(appId, undefined, { pollMs: 100, rmRetryMs: 1_000, onOutage: (o) => outages.push(o) })
      .then(
        () => undefined,
        (e: unknown) => e,
      );
    expect(isHarvestError(err, "UNAVAILABLE", "DEADLINE_EXCEEDED")).toBe(true);
    expect((err as Error).message).toContain(appId);
    expect(outages).toHaveLength(1);
  });
});
