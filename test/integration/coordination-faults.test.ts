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
});
