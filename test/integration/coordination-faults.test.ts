/**
 * One master's connection to the coordination service survives its own elections: ending a term (stop or a
 * hand-over) cancels the campaign's lease and watch streams, and those cancellations must not count as the member
 * being down. With etcd3's default circuit breaker three of them in a row made every call on the connection fail
 * for five seconds ("circuit open"), so a master that handed over a few times could neither write nor campaign.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { EtcdLeaseInvalidError, GRPCCancelledError, GRPCDeadlineExceededError, GRPCUnavailableError } from "etcd3";
import { isMemberUnreachable } from "../../common/ha/coordination.js";
import type { Coordination } from "../../common/ha/coordination.js";
import { SharedLog } from "../../common/ha/shared-log.js";
import { Logger } from "../../common/log.js";
import { haveEtcd, startTestEtcd, testCandidate } from "../helpers/etcd.js";
import type { TestEtcd } from "../helpers/etcd.js";
import { waitFor } from "../wait-for.js";

/** An election of `id` on `c` whose `active()` says whether it holds the term. */
const candidate = (c: Coordination, id: string): ReturnType<typeof testCandidate> => testCandidate(c, "nn", id);

describe("what counts against an etcd member", () => {
  it("counts an unreachable or silent member, never a cancelled stream or etcd's own answer", () => {
    expect(isMemberUnreachable(new GRPCUnavailableError("connect ECONNREFUSED"))).toBe(true);
    expect(isMemberUnreachable(new GRPCDeadlineExceededError("deadline exceeded"))).toBe(true);
    // A grpc-js error as a stream reports it, before etcd3 types it.
    expect(
      isMemberUnreachable(Object.assign(new Error("14 UNAVAILABLE: No connection established"), { code: 14 })),
    ).toBe(true);
    expect(isMemberUnreachable(new GRPCCancelledError("1 CANCELLED: Cancelled on client"))).toBe(false);
    expect(isMemberUnreachable(Object.assign(new Error("1 CANCELLED: Cancelled on client"), { code: 1 }))).toBe(false);
    expect(isMemberUnreachable(new EtcdLeaseInvalidError("7587870390386410766"))).toBe(false);
    // The member answering while the ensemble elects a leader: every member says so then, none is down.
    for (const answer of ["leader changed", "no leader", "request timed out"])
      expect(isMemberUnreachable(Object.assign(new Error(`14 UNAVAILABLE: etcdserver: ${answer}`), { code: 14 }))).toBe(
        false,
      );
    expect(isMemberUnreachable(Object.assign(new Error("14 UNAVAILABLE: Connection dropped"), { code: 14 }))).toBe(
      true,
    );
  });
});

describe.skipIf(!haveEtcd)("a master's connection to the coordination service", () => {
  let etcd: TestEtcd;
  let c: Coordination;
  beforeAll(async () => {
    etcd = await startTestEtcd();
    c = etcd.connect({ clusterId: "faults-test", sessionTtlS: 2 });
  }, 60_000);
  afterAll(async () => {
    c?.close();
    await etcd?.stop();
  });

  it("keeps answering after many terms on it were stopped, and the next campaign wins at once", async () => {
    for (let i = 0; i < 6; i++) {
      const { election, active } = candidate(c, `nn-${i}`);
      election.start();
      await waitFor(active, { what: `term ${i} to begin`, timeoutMs: 10_000 });
      await election.stop();
      // Each term's writes go over the same connection right after the term before it ended.
      await c.root.put(`probe/${i}`).value(`term ${i}`);
      expect(await c.root.get(`probe/${i}`).string()).toBe(`term ${i}`);
    }
    const { election, active } = candidate(c, "nn-last");
    election.start();
    try {
      // Well within the breaker's five seconds: a campaign refused by an open circuit retries only after that.
      await waitFor(active, { what: "the last campaign to win", timeoutMs: 4_000 });
    } finally {
      await election.stop();
    }
  }, 60_000);

  it("keeps answering after many hand-overs", async () => {
    const { election, active } = candidate(c, "nn-resign");
    election.start();
    try {
      let epoch = 0;
      for (let i = 0; i < 5; i++) {
        await waitFor(active, { what: `term ${i} to begin`, timeoutMs: 10_000 });
        expect(election.epoch).toBeGreaterThan(epoch);
        epoch = election.epoch;
        await election.resign();
        await c.root.put("probe/resign").value(String(i));
        expect(await c.root.get("probe/resign").string()).toBe(String(i));
      }
    } finally {
      await election.stop();
    }
  }, 60_000);

  /**
   * Fault injection: the etcd3 campaign's "elected" (or the leader watch's change) is an event of a watch stream; one
   * lost while a healed member caught up left both namenodes standby for minutes. The injection removes the event.
   */
  it("gives the term to a candidate whose key leads even when its campaign never hears of it", async () => {
    const first = candidate(c, "nn-first");
    first.election.start();
    await waitFor(first.active, { what: "the first term", timeoutMs: 10_000 });
    const deaf = candidate(c, "nn-deaf");
    deaf.election.start();
    await waitFor(() => deaf.election.leader?.id === "nn-first", { what: "the standby to follow", timeoutMs: 10_000 });
    // The campaign's key is granted before it waits; drop the listener that would hear it won.
    await waitFor(() => (deaf.election as unknown as { campaignLease?: string }).campaignLease !== undefined, {
      what: "the standby's campaign key",
      timeoutMs: 10_000,
    });
    (deaf.election as unknown as { campaign: { removeAllListeners(e: string): void } }).campaign.removeAllListeners(
      "elected",
    );
    try {
      await first.election.stop();
      await waitFor(deaf.active, { what: "the deaf candidate to take the term", timeoutMs: 10_000 });
      expect(deaf.election.epoch).toBeGreaterThan(first.election.epoch);
    } finally {
      await deaf.election.stop();
    }
  }, 60_000);

  it("has a standby whose leader watch died follow the new active all the same", async () => {
    const a = candidate(c, "nn-a");
    a.election.start();
    await waitFor(a.active, { what: "a's term", timeoutMs: 10_000 });
    const b = candidate(c, "nn-b");
    b.election.start();
    // b's key first, so b is next in line.
    const keys = c.service("nn").namespace("election/leader/");
    await waitFor(async () => (await keys.getAll().keys()).length === 2, { what: "b's key", timeoutMs: 10_000 });
    const blind = candidate(c, "nn-blind");
    blind.election.start();
    try {
      await waitFor(() => blind.election.leader?.id === "nn-a", { what: "the standby to follow a", timeoutMs: 10_000 });
      // The watch ends without an error, as a stream that silently stopped delivering would.
      await (blind.election as unknown as { observer: { cancel(): Promise<void> } }).observer.cancel();
      await a.election.stop();
      await waitFor(b.active, { what: "b to take over", timeoutMs: 10_000 });
      await waitFor(() => blind.election.leader?.id === "nn-b", {
        what: "the blind standby to follow b",
        timeoutMs: 10_000,
      });
    } finally {
      await b.election.stop();
      await blind.election.stop();
    }
  }, 60_000);

  it("counts a shared log append sent twice once, and refuses another entry at a taken place", async () => {
    const leader = candidate(c, "nn-log");
    leader.election.start();
    await waitFor(leader.active, { what: "the log's term", timeoutMs: 10_000 });
    const log = new SharedLog<string[]>(c, "nn-twice", new Logger("test", "error"));
    const fence = leader.election.fenceKey;
    try {
      await log.append(1, ["mkdir /a"], fence);
      // etcd3 sent the same call again after a deadline, and the first try had been committed.
      await log.append(1, ["mkdir /a"], fence);
      await expect(log.append(1, ["mkdir /b"], fence)).rejects.toMatchObject({ code: "NOT_ACTIVE" });
      expect((await log.read(1)).map((e) => e.body)).toEqual([["mkdir /a"]]);
      await log.append(2, ["mkdir /c"], fence);
      await leader.election.stop();
      // The term is over: even a copy of an entry not yet in the log is refused.
      await expect(log.append(3, ["mkdir /d"], fence)).rejects.toMatchObject({ code: "NOT_ACTIVE" });
    } finally {
      await leader.election.stop();
    }
  }, 60_000);
});
