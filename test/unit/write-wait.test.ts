/** Why a block could not be placed, in words, and how a write waits it out (common/placement-refusal.ts, client/write-wait.ts). */
import { describe, expect, it } from "vitest";
import {
  countRefusal,
  describeRefusal,
  isTransientRefusal,
  refusalDetails,
  refusalOfDetails,
} from "../../common/placement-refusal.js";
import type { PlacementRefusal } from "../../common/placement-refusal.js";
import { HarvestError, detailsOf, fromGrpcError, toServiceError } from "../../common/errors.js";
import { SeededRng } from "../../common/rng.js";
import {
  WRITE_WAIT_FIRST_MS,
  WRITE_WAIT_MAX_MS,
  WriteWait,
  waitExpiredMessage,
  waitingMessage,
} from "../../client/write-wait.js";

const MiB = 1024 * 1024;
const dn = (datanodeId: string, primaryBusy = false, remainingBytes = 1024 * MiB) => ({
  datanodeId,
  primaryBusy,
  remainingBytes,
});

/** How many times `needle` occurs in `text`. */
function occurrences(text: string, needle: string): number {
  return text.split(needle).length - 1;
}

describe("a placement refusal", () => {
  it("counts each live datanode once, under its first reason", () => {
    const r = countRefusal(
      [dn("a", true), dn("b", true, 0), dn("c", false, 0), dn("d", true), dn("e"), dn("f", true)],
      new Set(["d"]),
      128 * MiB,
      (id) => id === "f",
    );
    expect(r).toEqual({ live: 6, excluded: 1, decommissioning: 1, busy: 2, full: 1 });
  });

  it("names every reason once, in the words an operator reads", () => {
    const r: PlacementRefusal = { live: 6, excluded: 1, decommissioning: 1, busy: 2, full: 1 };
    expect(describeRefusal(r)).toBe(
      "2 busy with their primary tenants, 1 full (no room for a block), " +
        "1 out of service (decommissioning or drained), 1 excluded by this writer after a failed pipeline, " +
        "1 ruled out by the placement policy",
    );
    expect(describeRefusal({ live: 1, excluded: 0, decommissioning: 0, busy: 1, full: 0 })).toBe(
      "1 busy with its primary tenant",
    );
    expect(describeRefusal({ live: 0, excluded: 0, decommissioning: 0, busy: 0, full: 0 })).toBe("no live datanode");
  });

  it("is worth waiting for when primaries are busy, disks full or no datanode is live, not when all are excluded", () => {
    const none = { live: 2, excluded: 0, decommissioning: 0, busy: 0, full: 0 };
    expect(isTransientRefusal({ ...none, busy: 2 })).toBe(true);
    expect(isTransientRefusal({ ...none, full: 1, excluded: 1 })).toBe(true);
    expect(isTransientRefusal({ ...none, live: 0 })).toBe(true);
    expect(isTransientRefusal({ ...none, excluded: 2 })).toBe(false);
    expect(isTransientRefusal({ ...none, decommissioning: 2 })).toBe(false);
  });

  it("travels in the error's details and comes back the same; details without counts give no refusal", () => {
    const r: PlacementRefusal = { live: 3, excluded: 0, decommissioning: 1, busy: 2, full: 0 };
    const err = fromGrpcError(
      toServiceError(new HarvestError("NAMENODE_NOT_ENOUGH_DATANODES", "x", { details: refusalDetails(r) })),
    );
    expect(err.code).toBe("NAMENODE_NOT_ENOUGH_DATANODES");
    expect(refusalOfDetails(detailsOf(err, "NAMENODE_NOT_ENOUGH_DATANODES"))).toEqual(r);
    expect(refusalOfDetails({ live: "3" })).toBeUndefined();
    expect(refusalOfDetails({ live: "3", busy: "-1", full: "x" })).toEqual({
      live: 3,
      excluded: 0,
      decommissioning: 0,
      busy: 0,
      full: 0,
    });
  });
});

describe("the messages of a write that waits", () => {
  it("say why once, with the deadline, and never repeat themselves", () => {
    const reason = describeRefusal({ live: 3, excluded: 0, decommissioning: 0, busy: 3, full: 0 });
    expect(waitingMessage(reason, 60_000)).toBe(
      "waiting for a datanode: 3 busy with their primary tenants (retrying for up to 60 s)",
    );
    const expired = waitExpiredMessage("/data/x.bin", 1_500, reason);
    expect(expired).toBe(
      "no datanode could take a block of /data/x.bin within 1.5 s: 3 busy with their primary tenants; " +
        "try again later, or wait longer (writeWaitMs; harvest fs put --wait <seconds>)",
    );
    for (const phrase of ["no datanode", "/data/x.bin", "busy with their primary tenants"])
      expect(occurrences(expired, phrase), phrase).toBe(1);
  });
});

describe("a write's wait", () => {
  it("backs off from 100 ms, doubling up to 2 s, each pause jittered within [half, full] of its step", () => {
    let now = 0;
    const w = new WriteWait(60_000, new SeededRng(7), () => now);
    const pauses: number[] = [];
    for (let i = 0; i < 8; i++) {
      const p = w.next();
      expect(p).toBeDefined();
      pauses.push(p!);
      now += p!;
    }
    const steps = [100, 200, 400, 800, 1600, 2000, 2000, 2000];
    expect(steps[0]).toBe(WRITE_WAIT_FIRST_MS);
    expect(steps.at(-1)).toBe(WRITE_WAIT_MAX_MS);
    pauses.forEach((p, i) => {
      expect(p, `pause ${i}`).toBeGreaterThanOrEqual(steps[i]! / 2);
      expect(p, `pause ${i}`).toBeLessThanOrEqual(steps[i]!);
    });
    // Jittered: not every pause is exactly its step's half or whole.
    expect(pauses.some((p, i) => p !== steps[i] && p !== steps[i]! / 2)).toBe(true);
  });

  it("draws the same pauses from the same seed", () => {
    const run = (): number[] => {
      const w = new WriteWait(60_000, new SeededRng(42), () => 0);
      return Array.from({ length: 6 }, () => w.next()!);
    };
    expect(run()).toEqual(run());
  });

  it("never pauses past its deadline, then gives up; progress starts a new wait", () => {
    let now = 1_000;
    const w = new WriteWait(1_000, new SeededRng(1), () => now);
    let total = 0;
    for (;;) {
      const p = w.next();
      if (p === undefined) break;
      total += p;
      now += p;
    }
    expect(total).toBe(1_000);
    expect(w.waitedMs()).toBe(1_000);
    w.reset();
    expect(w.waiting).toBe(false);
    const p = w.next();
    expect(p).toBeGreaterThanOrEqual(WRITE_WAIT_FIRST_MS / 2);
    expect(p).toBeLessThanOrEqual(WRITE_WAIT_FIRST_MS);
  });

  it("with a deadline of 0 gives up at the first refusal", () => {
    expect(new WriteWait(0, new SeededRng(1), () => 5).next()).toBeUndefined();
  });
});
