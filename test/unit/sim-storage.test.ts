/** The storage experiment: replica loss under reimages, re-replication within bandwidth, and unavailability. */
import { describe, expect, it } from "vitest";
import { detailsOf, HarvestError } from "../../common/errors.js";
import { SeededRng } from "../../common/rng.js";
import { DAY_MS } from "../../sim/model.js";
import type { SimCluster, SimReimage, SimServer, SimTenant } from "../../sim/model.js";
import { learnPlacementTenants, runStorage } from "../../sim/experiments/storage/index.js";
import type { StorageOptions, StorageRunResult, StorageWrite } from "../../sim/experiments/storage/index.js";

const HOUR_MS = 3_600_000;
const MiB = 1024 * 1024;

/** A tenant of a hand-built cluster: its servers' racks, and its utilization per slot (a constant or a function). */
interface TenantSpec {
  readonly environment: string;
  readonly racks: readonly string[];
  readonly utilization?: number | ((slot: number) => number);
}

interface ClusterSpec {
  readonly tenants: readonly TenantSpec[];
  readonly historyMs: number;
  readonly horizonMs: number;
  readonly reimages?: readonly SimReimage[];
  readonly slotMs?: number;
  /** @default 1e13 */
  readonly diskBytes?: number;
}

/** A SimCluster built by hand: tenant k's servers come after tenant k-1's, with the racks listed for it. */
function buildCluster(spec: ClusterSpec): SimCluster {
  const slotMs = spec.slotMs ?? HOUR_MS;
  const slots = Math.ceil(spec.horizonMs / slotMs);
  const servers: SimServer[] = [];
  const tenants: SimTenant[] = spec.tenants.map((t, k) => {
    const own: number[] = [];
    for (const rack of t.racks) {
      const index = servers.length;
      own.push(index);
      servers.push({
        index,
        id: `s${String(index).padStart(3, "0")}`,
        rack,
        tenant: k,
        cores: 16,
        diskBytes: spec.diskBytes ?? 1e13,
        offsetPct: 0,
      });
    }
    const u = t.utilization ?? 0;
    return {
      index: k,
      id: `t${String(k).padStart(2, "0")}`,
      environment: t.environment,
      machineFunction: "test",
      pattern: "constant",
      servers: own,
      utilization: Float32Array.from({ length: slots }, (_, slot) => (typeof u === "number" ? u : u(slot))),
      reimagesPerServerMonth: 0,
    };
  });
  const reimages = [...(spec.reimages ?? [])].sort((a, b) => a.atMs - b.atMs || a.server - b.server);
  return {
    servers,
    tenants,
    racks: new Set(servers.map((s) => s.rack)).size,
    slotMs,
    historyMs: spec.historyMs,
    horizonMs: spec.horizonMs,
    reimages,
    level: "medium",
    source: "generated",
    seed: 7,
  };
}

/**
 * 60 servers: 12 tenants of 5 in 4 environments, racks of 10 (two tenants each), utilization 0-95 at random per hour,
 * and about 300 reimages over 30 days (history included): single servers and whole tenants at one instant.
 */
function busyCluster(): SimCluster {
  const rng = new SeededRng(99);
  const tenants: TenantSpec[] = Array.from({ length: 12 }, (_, k) => ({
    environment: `env-${k % 4}`,
    racks: Array.from({ length: 5 }, (_, i) => `r${Math.floor((k * 5 + i) / 10)}`),
    utilization: () => Math.floor(rng.next() * 96),
  }));
  const horizonMs = 30 * DAY_MS;
  const reimages: SimReimage[] = [];
  for (let i = 0; i < 200; i++) reimages.push({ atMs: Math.floor(rng.next() * horizonMs), server: rng.int(60) });
  for (let i = 0; i < 20; i++) {
    const at = Math.floor(rng.next() * horizonMs);
    const k = rng.int(12);
    for (let s = 0; s < 5; s++) reimages.push({ atMs: at, server: k * 5 + s });
  }
  return buildCluster({ tenants, historyMs: 5 * DAY_MS, horizonMs, reimages });
}

/**
 * Three tenants "a", "b" and "c" of one server each, on the given racks, with a day of history and two days in all;
 * `extra` adds or overrides cluster options.
 */
function threeTenantCluster(
  racks: [string, string, string],
  extra: Partial<Parameters<typeof buildCluster>[0]>,
): ReturnType<typeof buildCluster> {
  const tenants = racks.map((rack, i) => ({ environment: "abc"[i]!, racks: [rack] }));
  return buildCluster({ tenants, historyMs: DAY_MS, horizonMs: 2 * DAY_MS, ...extra });
}

function withoutTiming(r: StorageRunResult): Omit<StorageRunResult, "wallMs" | "eventsPerSec"> {
  const { wallMs: _wall, eventsPerSec: _rate, ...rest } = r;
  return rest;
}

/** Records each block's placements and losses through the observer. */
function recorder() {
  const placed = new Map<number, { server: number; atMs: number; by: "write" | "copy" }[]>();
  const lost = new Map<number, number>();
  let end: (block: number) => number[] = () => [];
  const observer: NonNullable<StorageOptions["observer"]> = {
    onPlaced: (block, server, atMs, by) => {
      const list = placed.get(block) ?? [];
      list.push({ server, atMs, by });
      placed.set(block, list);
    },
    onLost: (block, atMs) => lost.set(block, atMs),
    onEnd: (replicasOf) => {
      end = replicasOf;
    },
  };
  return { placed, lost, observer, replicasAtEnd: (block: number) => end(block) };
}

describe("the storage experiment", () => {
  it("gives the same figures for the same cluster, options and seed", () => {
    const cluster = busyCluster();
    for (const placement of ["stock", "diversity"] as const) {
      const options: StorageOptions = { placement, seed: 3, blocksPerDay: 40, accessesPerDay: 500 };
      const a = runStorage(cluster, options);
      const b = runStorage(cluster, options);
      expect(withoutTiming(a)).toEqual(withoutTiming(b));
      expect(a.blocks).toBeGreaterThan(800);
      expect(a.replicasLost).toBeGreaterThan(0);
      expect(withoutTiming(runStorage(cluster, { ...options, seed: 4 }))).not.toEqual(withoutTiming(a));
    }
  });

  it("never leaves a replica on a disk past its reimage, for either placement and the stock window", () => {
    const cluster = busyCluster();
    const lastReimage = (server: number, atMs: number): number => {
      let last = -Infinity;
      for (const r of cluster.reimages) if (r.server === server && r.atMs <= atMs) last = r.atMs;
      return last;
    };
    const runs: StorageOptions[] = [
      { placement: "stock" },
      { placement: "diversity" },
      // 60 servers > 8 x 4: the stock policy gets sampled windows.
      { placement: "stock", stockWindowServers: 4 },
      { placement: "diversity", replication: 4, reReplicationBytesPerSec: 2e6 },
    ];
    for (const options of runs) {
      const rec = recorder();
      const r = runStorage(cluster, {
        ...options,
        blocksPerDay: 40,
        accessesPerDay: 100,
        checkInvariants: true,
        observer: rec.observer,
      });
      expect(r.replicasLost).toBeGreaterThan(100);
      expect(r.reReplications).toBeGreaterThan(0);
      // Independently of the simulator's own check: every replica alive at the end was placed on its server after
      // that server's last reimage.
      for (let b = 0; b < r.blocks; b++) {
        for (const server of rec.replicasAtEnd(b)) {
          const when = Math.max(...(rec.placed.get(b) ?? []).filter((p) => p.server === server).map((p) => p.atMs));
          expect(when).toBeGreaterThanOrEqual(lastReimage(server, cluster.horizonMs));
        }
        if (rec.lost.has(b)) expect(rec.replicasAtEnd(b)).toEqual([]);
      }
      expect(r.blocksLost).toBe(rec.lost.size);
    }
  });

  it("loses a block whose replicas are all reimaged at one instant and re-replicates one with a survivor", () => {
    // Racks: s000 alone on r1, s001-s002 on r2, s003-s004 on r3. Stock puts the first replica on the writer (s000),
    // the second on another rack and the third beside the second: every block is on {0,1,2} or on {0,3,4}.
    const cluster = buildCluster({
      tenants: [
        { environment: "a", racks: ["r1"] },
        { environment: "b", racks: ["r2", "r2"] },
        { environment: "c", racks: ["r3", "r3"] },
      ],
      historyMs: DAY_MS,
      horizonMs: 3 * DAY_MS,
      reimages: [0, 1, 2].map((server) => ({ atMs: 2 * DAY_MS, server })),
    });
    const writes: StorageWrite[] = Array.from({ length: 20 }, (_, i) => ({ atMs: DAY_MS + i * 60_000, writer: 0 }));
    const rec = recorder();
    const r = runStorage(cluster, { placement: "stock", writes, accessesPerDay: 0, observer: rec.observer });
    const onFirstThree = [...rec.placed]
      .filter(([, p]) => p.every((x) => x.server <= 2))
      .map(([b]) => b)
      .sort((x, y) => x - y);
    expect(onFirstThree.length).toBeGreaterThan(0);
    expect(onFirstThree.length).toBeLessThan(20);
    expect([...rec.lost.keys()].sort((x, y) => x - y)).toEqual(onFirstThree);
    expect(r.blocksLost).toBe(onFirstThree.length);
    for (let b = 0; b < 20; b++) {
      if (rec.lost.has(b)) continue;
      // Its replica on s000 went; a copy from s003 or s004 restored the third.
      expect(rec.replicasAtEnd(b)).toHaveLength(3);
      expect(rec.placed.get(b)?.filter((p) => p.by === "copy")).toHaveLength(1);
    }
    expect(r.underReplicatedAtEnd).toBe(0);
    expect(r.reReplications).toBe(20 - onFirstThree.length);
    expect(r.replicasLost).toBe(3 * onFirstThree.length + (20 - onFirstThree.length));
    expect(r.reReplicationBytes).toBe(r.reReplications * 256 * MiB);
  });

  it("loses blocks a slow re-replication could not copy before the last replica went", () => {
    // s000 and s002 on r1, s001 on r2; the writer is s000, so stock puts every block on {s000, s001}. s000 is
    // reimaged, then s001 a minute later: each block's only source is s001, sending two copies at a time.
    const cluster = threeTenantCluster(["r1", "r2", "r1"], {
      reimages: [
        { atMs: DAY_MS + HOUR_MS, server: 0 },
        { atMs: DAY_MS + HOUR_MS + 60_000, server: 1 },
      ],
    });
    const writes: StorageWrite[] = Array.from({ length: 10 }, (_, i) => ({ atMs: DAY_MS + i * 1000, writer: 0 }));
    const run = (reReplicationBytesPerSec: number): StorageRunResult =>
      runStorage(cluster, {
        placement: "stock",
        replication: 2,
        writes,
        reReplicationBytesPerSec,
        accessesPerDay: 0,
        checkInvariants: true,
      });
    // 256 MiB x 2 streams at 1 GB/s: 0.54 s a copy, ten copies in five rounds of the 3 s monitor.
    const fast = run(1e9);
    // At 1 MB/s a copy takes 9 minutes: none is done when s001 goes.
    const slow = run(1e6);
    // Both reimages are survived: ten copies after the first, ten after the second.
    expect(fast).toMatchObject({ blocksLost: 0, reReplications: 20, underReplicatedAtEnd: 0 });
    expect(slow).toMatchObject({ blocksLost: 10, reReplications: 0 });
    expect(slow.copiesFailed).toBeGreaterThan(0);
  });

  it("loses fewer blocks with diversity placement when one environment's tenants are all reimaged together", () => {
    // Environment "wave": two tenants of 10 servers, one rack each, all 20 reimaged at one instant every two days
    // (history included, so the policies can learn it). Six more environments of 5 servers each are never reimaged.
    // Diversity places at most one replica per environment, so every block keeps two replicas outside the wave and
    // none can be lost. Stock puts the third replica beside the second: a writer in the wave whose second replica
    // lands on the wave's other rack (1 in 4) has all three replicas in the wave.
    const tenants: TenantSpec[] = [
      { environment: "wave", racks: Array.from({ length: 10 }, () => "wave-a") },
      { environment: "wave", racks: Array.from({ length: 10 }, () => "wave-b") },
      ...Array.from({ length: 6 }, (_, k) => ({
        environment: `calm-${k}`,
        racks: Array.from({ length: 5 }, () => `calm-${k}`),
      })),
    ];
    const reimages: SimReimage[] = [];
    for (let day = 1; day < 30; day += 2)
      for (let server = 0; server < 20; server++) reimages.push({ atMs: day * DAY_MS + 7 * HOUR_MS, server });
    const cluster = buildCluster({ tenants, historyMs: 10 * DAY_MS, horizonMs: 30 * DAY_MS, reimages });
    const learnt = learnPlacementTenants(cluster);
    expect(learnt[0]!.reimagesPerServerMonth).toBeGreaterThan(10);
    expect(learnt[2]!.reimagesPerServerMonth).toBe(0);

    const options = { blocksPerDay: 20, accessesPerDay: 0, checkInvariants: true } as const;
    const stock = runStorage(cluster, { placement: "stock", ...options });
    const diversity = runStorage(cluster, { placement: "diversity", ...options });
    expect(diversity.blocksLost).toBe(0);
    expect(stock.blocksLost).toBeGreaterThan(0);
    expect(diversity.replicasLost).toBeGreaterThan(0);
  });

  it("counts an access unavailable exactly when every live replica's primary tenant is busy", () => {
    // Three servers, three replicas each: every block is on all three. Blocks are written in the first experiment
    // hour, while every primary is idle; from the second hour the primaries run at 95 %, or all but the third.
    const horizonMs = 11 * DAY_MS;
    const busyAfterFirstHour = (slot: number): number => (slot >= 24 + 1 ? 95 : 0);
    const cluster = (thirdBusy: boolean): SimCluster =>
      buildCluster({
        tenants: [
          { environment: "a", racks: ["r1"], utilization: busyAfterFirstHour },
          { environment: "b", racks: ["r2"], utilization: busyAfterFirstHour },
          { environment: "c", racks: ["r3"], utilization: thirdBusy ? busyAfterFirstHour : 0 },
        ],
        historyMs: DAY_MS,
        horizonMs,
      });
    const writes: StorageWrite[] = Array.from({ length: 5 }, (_, i) => ({ atMs: DAY_MS + i * 60_000, writer: i % 3 }));
    const options: StorageOptions = { placement: "stock", writes, accessesPerDay: 1000 };
    const allBusy = runStorage(cluster(true), options);
    const oneIdle = runStorage(cluster(false), options);
    const belowThreshold = runStorage(cluster(true), { ...options, busyThresholdPct: 96 });
    expect(allBusy.blocks).toBe(5);
    expect(allBusy.accesses).toBeGreaterThan(9000);
    // Only reads in the first hour (about 1 in 240) find an idle replica.
    expect(allBusy.unavailableAccesses).toBeGreaterThan(0.98 * allBusy.accesses);
    expect(allBusy.unavailableAccesses).toBeLessThan(allBusy.accesses);
    expect(oneIdle.accesses).toBe(allBusy.accesses);
    expect(oneIdle.unavailableAccesses).toBe(0);
    expect(belowThreshold.unavailableAccesses).toBe(0);
  });

  it("keeps HDFS's rack rules when the stock policy sees a sampled window of a large cluster", () => {
    // 100 servers on 10 racks, more than 8 x 8: the window path. No reimages, no busy primaries.
    const tenants: TenantSpec[] = Array.from({ length: 10 }, (_, k) => ({
      environment: `e${k}`,
      racks: Array.from({ length: 10 }, () => `r${k}`),
    }));
    const cluster = buildCluster({ tenants, historyMs: DAY_MS, horizonMs: 2 * DAY_MS });
    const rng = new SeededRng(5);
    const writes: StorageWrite[] = Array.from({ length: 300 }, (_, i) => ({
      atMs: DAY_MS + i * 1000,
      writer: rng.int(100),
    }));
    const rec = recorder();
    const r = runStorage(cluster, {
      placement: "stock",
      replication: 4,
      writes,
      stockWindowServers: 8,
      accessesPerDay: 0,
      observer: rec.observer,
    });
    expect(r.blocks).toBe(300);
    const rackOf = (s: number): string => cluster.servers[s]!.rack;
    const fourthOnSecondsRack: number[] = [];
    for (let b = 0; b < 300; b++) {
      const servers = (rec.placed.get(b) ?? []).map((p) => p.server);
      expect(new Set(servers).size).toBe(4);
      const [first, second, third, fourth] = servers as [number, number, number, number];
      expect(first).toBe(writes[b]!.writer);
      expect(rackOf(second)).not.toBe(rackOf(first));
      expect(rackOf(third)).toBe(rackOf(second));
      if (rackOf(fourth) === rackOf(second)) fourthOnSecondsRack.push(b);
    }
    // The fourth is "any node" (8 of the 96 others share the second's rack): a fresh sample, not the second's.
    expect(fourthOnSecondsRack.length).toBeLessThan(60);
  });

  it("places no replica on a full disk", () => {
    // Three servers with room for two blocks each: two blocks fill them, the third write finds no datanode.
    const cluster = threeTenantCluster(["r1", "r2", "r3"], {
      diskBytes: 2 * 256 * MiB,
    });
    const writes: StorageWrite[] = [0, 1, 2].map((i) => ({ atMs: DAY_MS + i * 1000, writer: i }));
    for (const placement of ["stock", "diversity"] as const) {
      const r = runStorage(cluster, { placement, writes, accessesPerDay: 0 });
      expect(r.blocks).toBe(2);
      expect(r.writesFailed).toBe(1);
    }
  });

  it("rejects invalid options naming the field", () => {
    const cluster = busyCluster();
    const field = (options: StorageOptions): string | undefined => {
      try {
        runStorage(cluster, options);
      } catch (err) {
        expect(err).toBeInstanceOf(HarvestError);
        expect((err as HarvestError).code).toBe("INVALID_ARGUMENT");
        return detailsOf(err as HarvestError, "INVALID_ARGUMENT", "CONFIG_INVALID")?.field;
      }
      return undefined;
    };
    expect(field({ placement: "stock", replication: 0 })).toBe("replication");
    expect(field({ placement: "diversity", reReplicationBytesPerSec: 0 })).toBe("reReplicationBytesPerSec");
    expect(field({ placement: "stock", writes: [{ atMs: 0, writer: 0 }] })).toBe("writes[0].atMs");
  });
});
