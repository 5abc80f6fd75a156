/**
 * The resource manager's etcd state store against a real etcd (one TLS member): it keeps what the LevelDB store keeps,
 * an old active's writes are refused once another term began (NOT_ACTIVE, nothing written), records are kept within
 * etcd's request limit, and the secrets both resource managers need are made once and shared.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { MasterElection } from "../../common/ha/election.js";
import { EtcdRmStore, fitHistory, MAX_HISTORY_BYTES } from "../../resourcemanager/etcd-state-store.js";
import type { AppRecord, HistoryRecord } from "../../resourcemanager/state-store.js";
import type { NodeKills } from "../../resourcemanager/cluster-history.js";
import { haveEtcd, startTestEtcd, testCandidate } from "../helpers/etcd.js";
import type { TestEtcd } from "../helpers/etcd.js";
import { waitFor } from "../wait-for.js";
import { codeOf as errorCode } from "../error-code.js";

function app(appId: string, seq: number, extra: Partial<AppRecord> = {}): AppRecord {
  return {
    appId,
    seq,
    name: "j",
    user: "alice",
    dagJson: '{"name":"j"}',
    state: "ACCEPTED",
    outcome: "JOB_OUTCOME_UNSPECIFIED",
    diagnostics: "",
    submitMs: 1,
    startMs: 0,
    finishMs: 0,
    attempt: 1,
    failedAttempts: 0,
    maxConcurrency: 0,
    ...extra,
  };
}

/**
 * Campaigns as `id` over a connection of its own (as each master has) and resolves once active, with the election and
 * a store fenced by its term; `stop()` ends both.
 */
async function activeTerm(
  etcd: TestEtcd,
  id: string,
): Promise<{ election: MasterElection; store: EtcdRmStore; stop: () => Promise<void> }> {
  const c = etcd.connect({ clusterId: "store-test", sessionTtlS: 2 });
  const { election, active } = testCandidate(c, "rm", id);
  election.start();
  await waitFor(() => active(), { what: `${id} to become active`, timeoutMs: 20_000 });
  const stop = async (): Promise<void> => {
    await election.stop();
    c.close();
  };
  return { election, store: new EtcdRmStore(c, election.fenceKey), stop };
}

describe.skipIf(!haveEtcd)("the resource manager's state in etcd", () => {
  let etcd: TestEtcd;
  beforeAll(async () => {
    etcd = await startTestEtcd();
  }, 60_000);
  afterAll(async () => {
    await etcd?.stop();
  });

  it("keeps applications, reservations, history, cleanups, power domains, drains and the cluster's last day as the LevelDB store does", async () => {
    const { store, stop } = await activeTerm(etcd, "rm-a");
    try {
      await store.open();
      expect(await store.clusterTimestamp(1234)).toBe(1234);
      expect(await store.clusterTimestamp(9999)).toBe(1234);
      const seqs = await Promise.all([store.nextAppSeq(), store.nextAppSeq(), store.nextAppSeq()]);
      expect(seqs.sort()).toEqual([1, 2, 3]);
      await store.putReservation({ appId: "application_1_0002", seq: 2, user: "alice", reservedMs: 5 });
      await store.putReservation({ appId: "application_1_0003", seq: 3, user: "bob", reservedMs: 6 });
      await store.putApp(app("application_1_0002", 2), { unreserve: true });
      await store.putApp(app("application_1_0001", 1));
      expect((await store.loadReservations()).map((r) => r.appId)).toEqual(["application_1_0003"]);
      expect((await store.loadApps()).map((a) => a.appId)).toEqual(["application_1_0001", "application_1_0002"]);
      const hist = (appId: string, finishMs: number, name = "j"): HistoryRecord => ({
        appId,
        name,
        durationMs: 10,
        outcome: "JOB_SUCCEEDED",
        finishMs,
        tasksRun: 1,
        tasksPreempted: 0,
      });
      await store.finishApp(app("application_1_0001", 1, { state: "FINISHED" }), hist("application_1_0001", 100), {
        token: "tok",
        stagingDir: "dfs:/user/alice/.staging/application_1_0001",
      });
      await store.finishApp(app("application_1_0002", 2, { state: "FINISHED" }), hist("application_1_0002", 200, "k"));
      expect((await store.history("", 0)).map((h) => h.appId)).toEqual(["application_1_0002", "application_1_0001"]);
      expect((await store.history("j", 0)).map((h) => h.appId)).toEqual(["application_1_0001"]);
      expect((await store.history("", 1)).map((h) => h.appId)).toEqual(["application_1_0002"]);
      expect(await store.pendingJobCleanups()).toEqual([
        { appId: "application_1_0001", token: "tok", stagingDir: "dfs:/user/alice/.staging/application_1_0001" },
      ]);
      await store.jobCleanedUp("application_1_0001");
      expect(await store.pendingJobCleanups()).toEqual([]);
      await store.deleteApps(["application_1_0001"]);
      expect((await store.loadApps()).map((a) => a.state)).toEqual(["FINISHED"]);
      // Deletes of more ids than one transaction may hold.
      const many = Array.from({ length: 300 }, (_x, i) => `application_1_${String(i + 10).padStart(4, "0")}`);
      await store.deleteReservations([...many, "application_1_0003"]);
      expect(await store.loadReservations()).toEqual([]);
      expect(await store.powerDomains()).toBeUndefined();
      const tree = { domains: [{ path: "row1", budgetWatts: 100 }], nodes: {}, updatedMs: 7 };
      await store.putPowerDomains(tree);
      expect(await store.powerDomains()).toEqual(tree);
      await store.putDrains([{ nodeId: "n1", startedMs: 1, deadlineMs: 0 }]);
      expect(await store.drains()).toEqual([{ nodeId: "n1", startedMs: 1, deadlineMs: 0 }]);
      // The cluster's history: an hour's samples and the tallies; a later save drops an old hour.
      expect(await store.usageHistory()).toEqual({ hours: new Map(), tallies: undefined });
      const sample = { timeMs: 7_200_000, capacityMilli: 4000, primaryMilli: 1000, harvestedMilli: 500, containers: 2 };
      const tallies = {
        counters: { sinceMs: 1, submitted: 3, finished: 2, failed: 0, killed: 1 },
        hourly: [[7_200_000, 4]] as [number, number][],
        nodes: [["n1", { primary: 3, power: 1, drain: 0, lastMs: 7_200_500 }]] as [string, NodeKills][],
      };
      await store.putUsageHistory(3_600_000, [{ ...sample, timeMs: 3_600_000 }], tallies, []);
      await store.putUsageHistory(7_200_000, [sample], tallies, [3_600_000]);
      expect(await store.usageHistory()).toEqual({ hours: new Map([[7_200_000, [sample]]]), tallies });
    } finally {
      await stop();
    }
  }, 60_000);

  it("refuses every write of a term that is over (NOT_ACTIVE), and the new active's state is untouched", async () => {
    const a = await activeTerm(etcd, "rm-old");
    await a.store.putApp(app("application_2_0001", 1, { diagnostics: "old term" }));
    // The old active's term ends (here it resigns; a lapsed session ends it the same way) and another begins.
    await a.election.stop();
    const b = await activeTerm(etcd, "rm-new");
    // The old active's store, over a connection that still works (its own campaign's end does not decide the result).
    const conn = etcd.connect({ clusterId: "store-test" });
    const stale = new EtcdRmStore(conn, a.election.fenceKey);
    try {
      expect(b.election.epoch).toBeGreaterThan(a.election.epoch);
      await b.store.putApp(app("application_2_0001", 1, { diagnostics: "new term" }));
      expect(await errorCode(stale.putApp(app("application_2_0001", 1, { diagnostics: "stale" })))).toBe("NOT_ACTIVE");
      expect(await errorCode(stale.nextAppSeq())).toBe("NOT_ACTIVE");
      expect(await errorCode(stale.deleteApps(["application_2_0001"]))).toBe("NOT_ACTIVE");
      const kept = (await b.store.loadApps()).find((x) => x.appId === "application_2_0001");
      expect(kept?.diagnostics).toBe("new term");
    } finally {
      conn.close();
      await a.stop();
      await b.stop();
    }
  }, 60_000);

  it("stores a job with a DAG near the limit and a history record too large for one request, thinned", async () => {
    const { store, stop } = await activeTerm(etcd, "rm-big");
    try {
      const dagJson = JSON.stringify({ name: "big", pad: "x".repeat(600 * 1024) });
      const durations = Object.fromEntries(
        Array.from({ length: 800 }, (_x, v) => [`vertex-${v}`, Array.from({ length: 200 }, (_y, i) => 100_000 + i)]),
      );
      const h: HistoryRecord = {
        appId: "application_3_0001",
        name: "big",
        durationMs: 1,
        outcome: "JOB_SUCCEEDED",
        finishMs: 5,
        tasksRun: 80_000,
        tasksPreempted: 0,
        taskDurations: durations,
      };
      expect(Buffer.byteLength(JSON.stringify(h))).toBeGreaterThan(1024 * 1024);
      await store.putApp(app("application_3_0001", 1, { dagJson }));
      await store.finishApp(app("application_3_0001", 1, { dagJson, state: "FINISHED" }), h);
      const [stored] = await store.history("big", 1);
      expect(Buffer.byteLength(JSON.stringify(stored))).toBeLessThanOrEqual(MAX_HISTORY_BYTES);
      expect(stored?.taskDurations?.["vertex-0"]?.length).toBeGreaterThan(0);
      expect((await store.loadApps()).find((x) => x.appId === "application_3_0001")?.dagJson).toBe(dagJson);
      expect(fitHistory({ ...h, taskDurations: undefined } as never)).toEqual({ ...h, taskDurations: undefined });
    } finally {
      await stop();
    }
  }, 60_000);

  it("makes the web-token key once and gives it to every later active; refuses a different cluster secret", async () => {
    const a = await activeTerm(etcd, "rm-k1");
    const key = await a.store.webTokenKey();
    await a.store.checkClusterSecret("s3cret");
    await a.stop();
    const b = await activeTerm(etcd, "rm-k2");
    try {
      expect((await b.store.webTokenKey()).equals(key)).toBe(true);
      await b.store.checkClusterSecret("s3cret");
      expect(await errorCode(b.store.checkClusterSecret("another"))).toBe("CONFIG_INVALID");
    } finally {
      await b.stop();
    }
  }, 60_000);
});
