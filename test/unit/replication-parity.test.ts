/**
 * One policy path: the storage simulator's re-replication decisions are the namenode's. A small scenario (a dozen
 * servers on four racks, blocks written over a few minutes, single and correlated reimages, one of them while copies
 * are in flight) runs through the simulator; its block events are then replayed, in the order they happened, through
 * the namenode's wiring (`replicatedBlockMap`: a BlockManager whose events feed a ReplicationMonitor) with the same
 * monitor options and seed, ticking when the simulator's monitor ran. Both must choose the same blocks, in the same
 * order, from the same sources to the same targets: once per placement policy.
 */
import { describe, expect, it } from "vitest";
import { SeededRng } from "../../common/rng.js";
import { replicatedBlockMap } from "../../namenode/block-manager.js";
import { DiversityPlacementPolicy } from "../../namenode/policy/diversity-placement.js";
import { StockPlacementPolicy } from "../../namenode/policy/placement.js";
import type { DatanodeView } from "../../namenode/policy/placement.js";
import { DAY_MS } from "../../sim/model.js";
import type { SimCluster, SimReimage, SimServer, SimTenant } from "../../sim/model.js";
import {
  learnPlacementTenants,
  replicationRngSeed,
  resolveStorageOptions,
  runStorage,
  storageMonitorOptions,
} from "../../sim/experiments/storage/index.js";
import type { StorageOptions, StorageWrite } from "../../sim/experiments/storage/index.js";

const MiB = 1024 * 1024;
const DISK = 1e12;
const HISTORY_MS = DAY_MS;

/** 12 servers, three per rack on four racks, one tenant per rack in two environments; primaries always idle. */
function cluster(reimages: readonly SimReimage[]): SimCluster {
  const servers: SimServer[] = [];
  const tenants: SimTenant[] = [];
  for (let k = 0; k < 4; k++) {
    const own: number[] = [];
    for (let i = 0; i < 3; i++) {
      const index = servers.length;
      own.push(index);
      servers.push({
        index,
        id: `s${String(index).padStart(2, "0")}`,
        rack: `/r${k}`,
        tenant: k,
        cores: 16,
        diskBytes: DISK,
        offsetPct: 0,
      });
    }
    tenants.push({
      index: k,
      id: `t${k}`,
      environment: `env-${k % 2}`,
      machineFunction: "test",
      pattern: "constant",
      servers: own,
      utilization: new Float32Array(48),
      reimagesPerServerMonth: 0,
    });
  }
  return {
    servers,
    tenants,
    racks: 4,
    slotMs: 3_600_000,
    historyMs: HISTORY_MS,
    horizonMs: HISTORY_MS + 6 * 3_600_000,
    reimages: [...reimages].sort((a, b) => a.atMs - b.atMs || a.server - b.server),
    level: "low",
    source: "generated",
    seed: 5,
  };
}

type Event =
  | { kind: "write"; block: number; servers: number[] }
  | { kind: "copy"; block: number; server: number }
  | { kind: "reimage"; server: number }
  | { kind: "tick"; atMs: number };

interface Copy {
  block: number;
  source: string;
  targets: string[];
  atMs: number;
}

/** Runs the simulator, recording its block events in order and the copies its monitor chose. */
function simulate(c: SimCluster, options: StorageOptions): { events: Event[]; copies: Copy[] } {
  const events: Event[] = [];
  const copies: Copy[] = [];
  const id = (s: number): string => c.servers[s]!.id;
  runStorage(c, {
    ...options,
    checkInvariants: true,
    observer: {
      onPlaced: (block, server, _atMs, by) => {
        const last = events.at(-1);
        if (by === "copy") events.push({ kind: "copy", block, server });
        else if (last?.kind === "write" && last.block === block) last.servers.push(server);
        else events.push({ kind: "write", block, servers: [server] });
      },
      onReimage: (server) => events.push({ kind: "reimage", server }),
      onMonitorTick: (atMs) => events.push({ kind: "tick", atMs }),
      onCopy: (block, source, targets, atMs) =>
        copies.push({ block, source: id(source), targets: targets.map(id), atMs }),
    },
  });
  return { events, copies };
}

/** Replays the events through the namenode's block map and monitor, ticking where the simulator's monitor did. */
function asTheNamenode(c: SimCluster, options: StorageOptions, events: readonly Event[]): Copy[] {
  const o = resolveStorageOptions(c, options);
  const policy = o.placement === "diversity" ? new DiversityPlacementPolicy() : new StockPlacementPolicy();
  const rng = new SeededRng(replicationRngSeed(o.seed));
  const { blocks, monitor } = replicatedBlockMap(policy, rng, storageMonitorOptions(o, c.servers.length));
  // Free space as the datanodes' heartbeats would report it: stored and incoming replicas take a block each.
  const views: DatanodeView[] = c.servers.map((s) => ({
    datanodeId: s.id,
    rack: s.rack,
    primaryBusy: false,
    get remainingBytes(): number {
      return DISK - (blocks.replicaCount(s.id) + monitor.incoming(s.id)) * o.blockBytes;
    },
  }));
  if (policy instanceof DiversityPlacementPolicy)
    policy.setTenants(learnPlacementTenants(c), new Map(c.servers.map((s) => [s.id, DISK])));
  const record = (b: number): { blockId: number; genStamp: number; numBytes: number } => ({
    blockId: b,
    genStamp: 0,
    numBytes: o.blockBytes,
  });
  const copies: Copy[] = [];
  for (const e of events) {
    if (e.kind === "write") {
      // addBlock, the pipeline's replicas, then the commit: as a client's write reaches the namenode.
      blocks.addBlock(record(e.block), 100 + e.block, o.replication, false);
      for (const s of e.servers) blocks.received(c.servers[s]!.id, record(e.block));
      blocks.commitBlock(record(e.block));
    } else if (e.kind === "copy") {
      blocks.received(c.servers[e.server]!.id, record(e.block));
    } else if (e.kind === "reimage") {
      // The datanode's reimage report: every replica on it is gone (NameNode.onWipe).
      blocks.removeDatanode(c.servers[e.server]!.id);
    } else {
      const work = monitor.tick(views, e.atMs);
      expect(work.delete).toEqual([]);
      expect(monitor.parkedBlocks()).toBe(0);
      for (const t of work.replicate)
        copies.push({
          block: t.block.blockId,
          source: t.sourceId,
          targets: t.targets.map((d) => d.datanodeId),
          atMs: e.atMs,
        });
    }
  }
  return copies;
}

const WRITES: StorageWrite[] = Array.from({ length: 24 }, (_, i) => ({
  atMs: HISTORY_MS + 1_000 + i * 5_000,
  writer: (i * 5) % 12,
}));

const REIMAGES: SimReimage[] = [
  // One server, after every write.
  { atMs: HISTORY_MS + 200_000, server: 3 },
  // A rack at once, while the first server's copies are still in flight (a copy takes 2 x 64 MiB / 20 MB/s = 6.7 s).
  { atMs: HISTORY_MS + 203_000, server: 6 },
  { atMs: HISTORY_MS + 203_000, server: 7 },
  { atMs: HISTORY_MS + 203_000, server: 8 },
  // Later, two servers of different racks.
  { atMs: HISTORY_MS + 3_600_000, server: 0 },
  { atMs: HISTORY_MS + 3_600_000, server: 10 },
];

describe("re-replication: the simulator and the namenode take the same decisions", () => {
  for (const placement of ["stock", "diversity"] as const) {
    it(`with ${placement} placement`, () => {
      const c = cluster(REIMAGES);
      const options: StorageOptions = {
        placement,
        seed: 11,
        blockBytes: 64 * MiB,
        writes: WRITES,
        reReplicationBytesPerSec: 20e6,
        accessesPerDay: 0,
      };
      const sim = simulate(c, options);
      // The scenario exercises what it should: many copies, over several monitor runs, some cut short by a reimage.
      expect(sim.copies.length).toBeGreaterThan(20);
      expect(new Set(sim.copies.map((x) => x.atMs)).size).toBeGreaterThan(3);
      const daemon = asTheNamenode(c, options, sim.events);
      expect(daemon).toEqual(sim.copies);
    });
  }
});
