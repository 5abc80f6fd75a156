/**
 * Planned reimages in the storage simulator (`StorageOptions.planned`, the storage half of `harvest sim drain`): the
 * wipe at its time and re-replication after it, or the namenode's decommissioning from the notice on, with the
 * reimage as deadline.
 */
import { describe, expect, it } from "vitest";
import { SeededRng } from "../../common/rng.js";
import { drainStorage, storageLabel } from "../../sim/experiments/drain/drain-experiment.js";
import type { SimCluster, SimReimage } from "../../sim/model.js";
import { runStorage } from "../../sim/experiments/storage/index.js";
import type { StorageOptions, StorageRunResult, StorageWrite } from "../../sim/experiments/storage/index.js";
import { fieldOf, handCluster } from "../sim-hand-cluster.js";

const MINUTE_MS = 60_000;
const HOUR_MS = 60 * MINUTE_MS;
const DAY_MS = 24 * HOUR_MS;

function withoutTiming(r: StorageRunResult): Omit<StorageRunResult, "wallMs" | "eventsPerSec"> {
  const { wallMs: _wall, eventsPerSec: _rate, ...rest } = r;
  return rest;
}

/**
 * 24 servers, 4 tenants (a rack each) of 6, primaries at 0-95 % at random per 5-minute slot; 60 single reimages and 4
 * tenant-wide waves over the 10 experiment days after 2 days of history.
 */
function busyCluster(): SimCluster {
  const rng = new SeededRng(42);
  const tenant = { pattern: "constant" as const, servers: 6, cores: 16, pct: () => Math.floor(rng.next() * 96) };
  const base = handCluster([tenant, tenant, tenant, tenant], 2 * DAY_MS, 10 * DAY_MS);
  const reimages: SimReimage[] = [];
  for (let i = 0; i < 60; i++)
    reimages.push({ atMs: 2 * DAY_MS + Math.floor(rng.next() * 10 * DAY_MS), server: rng.int(24) });
  for (let i = 0; i < 4; i++) {
    const at = 2 * DAY_MS + Math.floor(rng.next() * 10 * DAY_MS);
    const t = rng.int(4);
    for (let s = 0; s < 6; s++) reimages.push({ atMs: at, server: t * 6 + s });
  }
  reimages.sort((a, b) => a.atMs - b.atMs || a.server - b.server);
  return { ...base, reimages };
}

/**
 * The hand-computed case. Racks: r0 = {s0, s1}, r1 = {s2, s3}; idle primaries. Four blocks written by s0: stock puts
 * the first replica on s0, the second on r1 and the third beside it, so every block is on {s0, s2, s3} and s1 holds
 * nothing. s0 is reimaged at T = day 1 + 12 h. A copy of 30 MB at 1 MB/s with two streams takes 60 s; a server sends
 * two and receives two at once.
 */
const T = DAY_MS + 12 * HOUR_MS;
const tiny = handCluster(
  [
    { pattern: "constant", servers: 2, cores: 16, pct: () => 0 },
    { pattern: "constant", servers: 2, cores: 16, pct: () => 0 },
  ],
  DAY_MS,
  DAY_MS,
);
const tinyWrites: StorageWrite[] = [0, 1, 2, 3].map((i) => ({ atMs: DAY_MS + i * 1000, writer: 0 }));
const tinyOptions: StorageOptions = {
  placement: "stock",
  writes: tinyWrites,
  blockBytes: 30e6,
  reReplicationBytesPerSec: 1e6,
  accessesPerDay: 0,
  checkInvariants: true,
};

function tinyRun(planned: StorageOptions["planned"]): StorageRunResult {
  return runStorage(tiny, { ...tinyOptions, planned });
}

describe("planned reimages in the storage simulator", () => {
  it("gives the same figures as the cluster's own reimages when the planned ones are those and nothing drains", () => {
    const cluster = busyCluster();
    const options: StorageOptions = { placement: "stock", seed: 5, blocksPerDay: 60, accessesPerDay: 200 };
    const today = runStorage(cluster, options);
    const events = cluster.reimages.filter((r) => r.atMs >= cluster.historyMs);
    const planned = runStorage(cluster, { ...options, planned: { events, drain: "none" }, checkInvariants: true });
    expect("planned" in today).toBe(false);
    const { planned: figures, ...rest } = withoutTiming(planned);
    expect(rest).toEqual(withoutTiming(today));
    expect(today.reReplications).toBeGreaterThan(100);
    expect(figures!.reimages).toBe(events.length);
    expect(figures!.underReplicatedBlockHours).toBeGreaterThan(0);
    expect(figures!.wipeCopies).toBe(today.reReplications);
    expect([figures!.drainsStarted, figures!.drainCopies]).toEqual([0, 0]);
  });

  it("drains the server before a reimage with a long notice: nothing below 3 replicas, where no drain has 4 block-minutes", () => {
    // No drain: the wipe leaves four blocks on {s2, s3}; each third replica goes to the other rack, s0 (empty, back at
    // once) or s1, two copies to each, from s2 and s3 (two each): all four in [T, T + 60 s]. 4 x 60 s below 3.
    const none = tinyRun({ events: [{ server: 0, atMs: T }], drain: "none" });
    expect(none.planned).toMatchObject({ drain: "none", reimages: 1, peakUnderReplicated: 4, drainsStarted: 0 });
    expect(none.planned!.underReplicatedBlockHours).toBeCloseTo((4 * 60) / 3600, 9);
    expect([none.blocksLost, none.reReplications, none.planned!.wipeCopies, none.planned!.drainCopies]).toEqual([
      0, 4, 4, 0,
    ]);
    expect(none.planned!.wipeCopyBytes).toBe(4 * 30e6);

    // Decommissioned 30 minutes ahead: s0's replicas stop counting and the only target left is s1 (the other rack,
    // s0 being out of service), two at a time: two copies in [T-30, T-29] min, two in [T-29, T-28]; the drain completes
    // when the last lands, 2 minutes after the notice. Every block has 4 replicas until the wipe, 3 after: none below.
    const drained = tinyRun({ events: [{ server: 0, atMs: T }], noticeMs: 30 * MINUTE_MS, drain: "decommission" });
    expect(drained.planned).toEqual({
      drain: "decommission",
      noticeMs: 30 * MINUTE_MS,
      reimages: 1,
      underReplicatedBlockHours: 0,
      peakUnderReplicated: 0,
      drainsStarted: 1,
      drainsCompleted: 1,
      drainsMissed: 0,
      blocksNeedingCopiesAtMissedDeadlines: 0,
      drainMsMean: 2 * MINUTE_MS,
      drainMsMax: 2 * MINUTE_MS,
      drainCopies: 4,
      drainCopyBytes: 4 * 30e6,
      wipeCopies: 0,
      wipeCopyBytes: 0,
    });
    expect([drained.blocksLost, drained.copiesFailed, drained.underReplicatedAtEnd]).toEqual([0, 0, 0]);
  });

  it("reports a missed deadline with the blocks still needing copies when the notice is too short", () => {
    // 90 s of notice: the first two copies land at T - 30 s, the next two (from s0, the preferred source) are cut off
    // by the wipe at T. The drain missed its deadline with 2 blocks to copy; those two are re-replicated from s2 and
    // s3 after the wipe, in [T, T + 60 s]: 2 x 60 s below 3 replicas.
    const short = tinyRun({ events: [{ server: 0, atMs: T }], noticeMs: 90_000, drain: "decommission" });
    expect(short.planned).toMatchObject({
      drainsStarted: 1,
      drainsCompleted: 0,
      drainsMissed: 1,
      blocksNeedingCopiesAtMissedDeadlines: 2,
      peakUnderReplicated: 2,
      drainCopies: 2,
      wipeCopies: 2,
      drainMsMean: 0,
    });
    expect(short.planned!.underReplicatedBlockHours).toBeCloseTo((2 * 60) / 3600, 9);
    expect([short.blocksLost, short.copiesFailed, short.reReplications]).toEqual([0, 2, 4]);
  });

  it("starts the drain of a reimage announced while its server still drains for an earlier one after that reimage", () => {
    // s0 is reimaged at T and T + 10 min, each announced 30 min ahead. The second drain starts at the first reimage,
    // on an empty server: DECOMMISSIONED at once (0 min), nothing to copy.
    const r = tinyRun({
      events: [
        { server: 0, atMs: T + 10 * MINUTE_MS },
        { server: 0, atMs: T },
      ],
      noticeMs: 30 * MINUTE_MS,
    });
    expect(r.planned).toMatchObject({
      drain: "decommission",
      reimages: 2,
      drainsStarted: 2,
      drainsCompleted: 2,
      drainsMissed: 0,
      drainMsMean: MINUTE_MS,
      drainMsMax: 2 * MINUTE_MS,
      drainCopies: 4,
      wipeCopies: 0,
      underReplicatedBlockHours: 0,
    });
  });

  it("keeps a drained server out of new writes and its invariants through overlapping drains and waves", () => {
    const cluster = busyCluster();
    const events = cluster.reimages.filter((r) => r.atMs >= cluster.historyMs);
    const options: StorageOptions = { placement: "stock", seed: 5, blocksPerDay: 60, accessesPerDay: 0 };
    const placedOnDraining: number[] = [];
    const notice = 2 * HOUR_MS;
    const drainsAt = (server: number, atMs: number): boolean =>
      events.some((e) => e.server === server && e.atMs - notice <= atMs && atMs < e.atMs);
    const none = runStorage(cluster, { ...options, planned: { events, drain: "none" } });
    for (const placement of ["stock", "diversity"] as const) {
      const r = runStorage(cluster, {
        ...options,
        placement,
        planned: { events, noticeMs: notice, drain: "decommission" },
        checkInvariants: true,
        observer: {
          onPlaced: (_block, server, atMs, by) => {
            if (by === "write" && drainsAt(server, atMs)) placedOnDraining.push(server);
          },
        },
      });
      const p = r.planned!;
      expect(p.drainsStarted).toBe(events.length);
      expect(p.drainsCompleted + p.drainsMissed).toBe(events.length);
      expect(p.drainsCompleted).toBeGreaterThan(0);
      expect(p.drainCopies).toBeGreaterThan(0);
      expect(r.reReplications).toBe(p.drainCopies + p.wipeCopies);
    }
    expect(placedOnDraining).toEqual([]);
    // Two hours' notice on 24 servers: far fewer blocks wait below 3 replicas than when every wipe comes unannounced.
    const drained = runStorage(cluster, { ...options, planned: { events, noticeMs: notice } });
    expect(drained.planned!.underReplicatedBlockHours).toBeLessThan(none.planned!.underReplicatedBlockHours / 2);
  });

  it("rejects planned reimages out of range, naming the field", () => {
    const run = (planned: NonNullable<StorageOptions["planned"]>) => () =>
      runStorage(tiny, { ...tinyOptions, planned });
    expect(fieldOf(run({ events: [{ server: 4, atMs: T }] }))).toBe("INVALID_ARGUMENT:planned.events[0].server");
    expect(fieldOf(run({ events: [{ server: 0, atMs: 0 }] }))).toBe("INVALID_ARGUMENT:planned.events[0].atMs");
    expect(fieldOf(run({ events: [], noticeMs: -1 }))).toBe("INVALID_ARGUMENT:planned.noticeMs");
    expect(fieldOf(run({ events: [], drain: "later" as "none" }))).toBe("INVALID_ARGUMENT:planned.drain");
  });
});

describe("the drain experiment's storage half", () => {
  it("runs no drain, then decommissioning at each notice, on the same reimages", () => {
    const events = [{ server: 0, atMs: T }];
    const figures = drainStorage(tiny, events, { noticesMs: [90_000, 30 * MINUTE_MS], seed: 3, blocksPerServer: 2 });
    expect(figures.runs.map((r) => [r.drain, r.noticeMs, r.planned.reimages, r.planned.drainsStarted])).toEqual([
      ["none", 0, 1, 0],
      ["decommission", 90_000, 1, 1],
      ["decommission", 30 * MINUTE_MS, 1, 1],
    ]);
    // Same writes in every run (the writes' random stream does not depend on the reimages).
    for (const r of figures.runs) expect(r.result.blocks).toBe(figures.runs[0]!.result.blocks);
    expect(figures.runs.map((r) => storageLabel(r.drain, r.noticeMs))).toEqual([
      "no drain",
      "decommission, 1.5 min notice",
      "decommission, 30 min notice",
    ]);
  });
});
