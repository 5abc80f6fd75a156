/**
 * The storage experiment's simulation (`StorageSim`): the cluster's blocks, replicas and copies in typed arrays
 * (blocks x replication, copies x replication, streams per server, so that a 10,000-server year with hundreds of
 * thousands of blocks and a million copies runs in about a minute), the writes, reads, reimages and drains, the
 * namenode's own ReplicationMonitor fed the block events, and the figures. The namenode's placement is the role in
 * `sim/roles/storage-namenode.ts`, the datanodes' books the one in `sim/roles/storage-datanode.ts`. The model is
 * described at `runStorage` (run.ts).
 */
import { HarvestError } from "../../../common/errors.js";
import { SeededRng } from "../../../common/rng.js";
import { ReplicationMonitor } from "../../../namenode/index.js";
import type { BlockSource, BlockView } from "../../../namenode/index.js";
import { SimEngine } from "../../engine/engine.js";
import { DAY_MS, serverUtilization } from "../../model.js";
import type { SimCluster } from "../../model.js";
import { streamSeed } from "../../streams.js";
import { ServerBlocks, StorageTransfers } from "../../roles/storage-datanode.js";
import { serverOf, StorageNamenode, storageMonitorOptions } from "../../roles/storage-namenode.js";
import type { StorageServers } from "../../roles/storage-namenode.js";
import type {
  PlannedReimageFigures,
  ResolvedPlannedStorageReimages,
  ResolvedStorageOptions,
  StorageRunResult,
} from "./options.js";

/** Block flags. */
const LOST = 2;

/** A replica as the monitor sees it (the model has no corrupt replicas). */
const GOOD = { corrupt: false } as const;

/** Independent random streams, one per purpose, so that one decision does not shift another's draws. */
const Stream = { Writes: 1, Accesses: 2, Placement: 3, Sources: 4 } as const;

/** The seed of the replication monitor's random source (copy sources and re-replication targets) for a run's seed. */
export function replicationRngSeed(seed: number): number {
  return streamSeed(seed, Stream.Sources);
}

function exponentialMs(rng: SeededRng, perMs: number): number {
  return -Math.log(1 - rng.next()) / perMs;
}

/** One run: the cluster's state in typed arrays, and the handlers of its events (see `runStorage`). */
export class StorageSim implements StorageServers {
  private readonly engine = new SimEngine();
  private readonly R: number;
  /**
   * Replica slots per block in `rep`: R, or more with decommissioning, where a block keeps its replicas on
   * out-of-service servers beside R in-service ones (grown by `widen` when a block needs more).
   */
  private W: number;
  private readonly n: number;
  private readonly copyMs: number;
  /** The namenode's placement: the servers' views and the run's policy. */
  private readonly nn: StorageNamenode;
  private readonly writeRng: SeededRng;
  private readonly accessRng: SeededRng;
  private readonly placeRng: SeededRng;
  /** The namenode's replication monitor, fed this simulation's block events. */
  private readonly monitor: ReplicationMonitor;

  // Servers.
  private readonly ids: string[];
  private readonly disk: Float64Array;
  private readonly stored: Int32Array;
  /** Bumped by every reimage: a replica is valid only with its server's epoch at placement. */
  private readonly epoch: Int32Array;
  private readonly serverBlocks: ServerBlocks;
  /** Busy flags cached per utilization slot. */
  private readonly busySlot: Float64Array;
  private readonly busyFlag: Uint8Array;

  // Blocks: replication slots per block; the first live[b] of rep hold the live replicas, in the order they were
  // placed (the order the namenode's block map keeps them in).
  private blockCap: number;
  private blockCount = 0;
  private rep: Int32Array;
  private repEpoch: Int32Array;
  private live: Uint8Array;
  private flags: Uint8Array;

  /** The copies in flight, and the streams and space they hold. */
  private readonly transfers: StorageTransfers;

  // The monitor's runs.
  private tickPending = false;
  private lastTickMs = -Infinity;
  private wakePending = false;

  // Scratch for policy calls.
  private readonly noneExcluded: ReadonlySet<string> = new Set<string>();

  // Planned reimages (`o.planned`); all empty or 0 without.
  private readonly decommissioning: boolean;
  /** Invariant: the ids of the servers with `outFlag` set, i.e. out of service at the monitor (draining or done). */
  private readonly outOfService = new Set<string>();
  private readonly outFlag: Uint8Array;
  /** Per server, the times of its announced reimages not yet applied, in order; the first is its drain's deadline. */
  private readonly announced: number[][];
  /** Blocks (not lost) below R replicas on disk, and their integral over time (see `PlannedReimageFigures`). */
  private readonly trackUnder: boolean;
  private under = 0;
  private underSinceMs = 0;
  private underMs = 0;
  private peakUnder = 0;
  private drainsStarted = 0;
  private drainsCompleted = 0;
  private drainsMissed = 0;
  private blocksNeedingAtMissed = 0;
  private readonly drainMs: number[] = [];
  private drainReplicas = 0;

  // Figures.
  private blocksLost = 0;
  private replicasLost = 0;
  private reReplications = 0;
  private writesFailed = 0;
  private writesShort = 0;
  private accesses = 0;
  private unavailable = 0;
  private reimagesApplied = 0;

  constructor(
    private readonly cluster: SimCluster,
    private readonly o: ResolvedStorageOptions,
  ) {
    const n = cluster.servers.length;
    this.n = n;
    this.R = o.replication;
    this.decommissioning = o.planned?.drain === "decommission";
    this.W = this.decommissioning ? this.R + 1 : this.R;
    this.trackUnder = o.planned !== undefined;
    this.outFlag = new Uint8Array(n);
    this.announced = this.decommissioning ? Array.from({ length: n }, () => []) : [];
    this.copyMs = ((o.blockBytes * o.replicationStreams) / o.reReplicationBytesPerSec) * 1000;
    this.writeRng = new SeededRng(streamSeed(o.seed, Stream.Writes));
    this.accessRng = new SeededRng(streamSeed(o.seed, Stream.Accesses));
    this.placeRng = new SeededRng(streamSeed(o.seed, Stream.Placement));

    this.ids = cluster.servers.map((s) => s.id);
    this.nn = new StorageNamenode(cluster, o, this);
    this.disk = Float64Array.from(cluster.servers, (s) => s.diskBytes);
    this.stored = new Int32Array(n);
    this.epoch = new Int32Array(n);
    this.serverBlocks = new ServerBlocks(n);
    this.transfers = new StorageTransfers(n, this.R, o.replicationStreams);
    this.busySlot = new Float64Array(n).fill(NaN);
    this.busyFlag = new Uint8Array(n);

    const days = (cluster.horizonMs - cluster.historyMs) / DAY_MS;
    const expected = o.writes ? o.writes.length : o.blocksPerDay * days;
    this.blockCap = Math.max(16, Math.ceil(expected + 6 * Math.sqrt(expected) + 16));
    this.rep = new Int32Array(this.blockCap * this.W);
    this.repEpoch = new Int32Array(this.blockCap * this.W);
    this.live = new Uint8Array(this.blockCap);
    this.flags = new Uint8Array(this.blockCap);

    const blocks: BlockSource = { get: (b) => this.blockView(b) };
    this.monitor = new ReplicationMonitor(
      this.nn.monitorPlacement(),
      new SeededRng(replicationRngSeed(o.seed)),
      blocks,
      storageMonitorOptions(o, n),
    );
  }

  /** Block `b` as the monitor reads it: committed, full, its live replicas in placement order. */
  private blockView(b: number): BlockView | undefined {
    if (!(b >= 0 && b < this.blockCount)) return undefined;
    const replicas = new Map<string, { corrupt: boolean }>();
    for (let k = b * this.W; k < b * this.W + this.live[b]!; k++) replicas.set(this.ids[this.rep[k]!]!, GOOD);
    return {
      blockId: b,
      genStamp: 0,
      numBytes: this.o.blockBytes,
      expectedReplication: this.R,
      committed: true,
      replicas,
    };
  }

  // ---------------------------------------------------------------------------------------------- state for views

  remainingBytes(server: number): number {
    return this.disk[server]! - (this.stored[server]! + this.transfers.incoming[server]!) * this.o.blockBytes;
  }

  busy(server: number): boolean {
    const slot = Math.floor(this.engine.clock.nowMs() / this.cluster.slotMs);
    if (this.busySlot[server] !== slot) {
      this.busySlot[server] = slot;
      const u = serverUtilization(this.cluster, server, this.engine.clock.nowMs());
      this.busyFlag[server] = u >= this.o.busyThresholdPct ? 1 : 0;
    }
    return this.busyFlag[server] === 1;
  }

  // ---------------------------------------------------------------------------------------------- running

  run(): void {
    const { cluster, o, engine } = this;
    const from = cluster.historyMs;
    const until = cluster.horizonMs;
    engine.clock.advanceTo(from);
    if (this.nn.hasGrid) {
      this.refreshGrid();
      for (let t = from + o.gridRefreshMs; t < until; t += o.gridRefreshMs) engine.at(t, () => this.refreshGrid());
    }
    this.scheduleWrites(from, until);
    this.scheduleAccesses(from, until);
    this.underSinceMs = from;
    if (o.planned) this.schedulePlanned(o.planned, from, until);
    else this.scheduleReimages(from, until);
    engine.run(until, o.onProgress);
    if (this.trackUnder) this.countUnder(until, 0);
    if (o.checkInvariants) this.check([]);
    o.observer?.onEnd?.((b) => {
      if (!(b >= 0 && b < this.blockCount)) return [];
      return Array.from(this.rep.subarray(b * this.W, b * this.W + this.live[b]!));
    });
  }

  result(wallMs: number): StorageRunResult {
    const { cluster, o } = this;
    let under = 0;
    for (let b = 0; b < this.blockCount; b++) if ((this.flags[b]! & LOST) === 0 && this.live[b]! < this.R) under++;
    const events = this.engine.events;
    return {
      level: cluster.level,
      servers: this.n,
      days: (cluster.horizonMs - cluster.historyMs) / DAY_MS,
      seed: o.seed,
      traces: cluster.source,
      placement: o.placement,
      replication: this.R,
      blocks: this.blockCount,
      blocksLost: this.blocksLost,
      accesses: this.accesses,
      unavailableAccesses: this.unavailable,
      reimages: this.reimagesApplied,
      reReplicationBytes: this.reReplications * o.blockBytes,
      reReplicationMBps: o.reReplicationBytesPerSec / 1e6,
      events,
      wallMs,
      replicasLost: this.replicasLost,
      reReplications: this.reReplications,
      copiesFailed: this.transfers.failed,
      writesFailed: this.writesFailed,
      writesShort: this.writesShort,
      underReplicatedAtEnd: under,
      placementDegrades: this.nn.degrades,
      eventsPerSec: wallMs > 0 ? events / (wallMs / 1000) : 0,
      ...(o.planned ? { planned: this.plannedFigures(o.planned) } : {}),
    };
  }

  private plannedFigures(p: ResolvedPlannedStorageReimages): PlannedReimageFigures {
    const bytes = this.o.blockBytes;
    const wipeCopies = this.reReplications - this.drainReplicas;
    const drains = this.drainMs;
    return {
      drain: p.drain,
      noticeMs: p.noticeMs,
      reimages: this.reimagesApplied,
      underReplicatedBlockHours: this.underMs / 3_600_000,
      peakUnderReplicated: this.peakUnder,
      drainsStarted: this.drainsStarted,
      drainsCompleted: this.drainsCompleted,
      drainsMissed: this.drainsMissed,
      blocksNeedingCopiesAtMissedDeadlines: this.blocksNeedingAtMissed,
      drainMsMean: drains.length > 0 ? drains.reduce((a, x) => a + x, 0) / drains.length : 0,
      drainMsMax: drains.reduce((a, x) => Math.max(a, x), 0),
      drainCopies: this.drainReplicas,
      drainCopyBytes: this.drainReplicas * bytes,
      wipeCopies,
      wipeCopyBytes: wipeCopies * bytes,
    };
  }

  private refreshGrid(): void {
    const free = new Map<string, number>();
    for (let s = 0; s < this.n; s++) free.set(this.ids[s]!, Math.max(0, this.remainingBytes(s)));
    this.nn.refreshGrid(free);
  }

  private scheduleWrites(from: number, until: number): void {
    const { engine, o } = this;
    if (o.writes) {
      for (const w of o.writes) engine.at(w.atMs, () => this.write(w.writer));
      return;
    }
    const perMs = o.blocksPerDay / DAY_MS;
    if (!(perMs > 0)) return;
    const rng = this.writeRng;
    const next = (): void => {
      this.write(Math.min(this.n - 1, Math.floor(rng.next() * this.n)));
      const at = engine.clock.nowMs() + exponentialMs(rng, perMs);
      if (at < until) engine.at(at, next);
    };
    const first = from + exponentialMs(rng, perMs);
    if (first < until) engine.at(first, next);
  }

  private scheduleAccesses(from: number, until: number): void {
    const { engine } = this;
    const perMs = this.o.accessesPerDay / DAY_MS;
    if (!(perMs > 0)) return;
    const rng = this.accessRng;
    const next = (): void => {
      this.access();
      const at = engine.clock.nowMs() + exponentialMs(rng, perMs);
      if (at < until) engine.at(at, next);
    };
    const first = from + exponentialMs(rng, perMs);
    if (first < until) engine.at(first, next);
  }

  private scheduleReimages(from: number, until: number): void {
    const reimages = this.cluster.reimages;
    let i = 0;
    while (i < reimages.length && reimages[i]!.atMs < from) i++;
    this.scheduleByInstant(reimages, i, until, (s) => this.reimage(s));
  }

  /**
   * Schedules `events` (ascending by time) from index `first` on, before `until`: all events of one instant are
   * applied together (`apply` per server), before the monitor looks, so that a correlated wave is one event.
   */
  private scheduleByInstant(
    events: readonly { atMs: number; server: number }[],
    first: number,
    until: number,
    apply: (server: number) => void,
  ): void {
    let i = first;
    const batch = (): void => {
      const at = events[i]!.atMs;
      const hit: number[] = [];
      while (i < events.length && events[i]!.atMs === at) hit.push(events[i++]!.server);
      for (const s of hit) apply(s);
      if (this.o.checkInvariants) this.check(hit);
      if (i < events.length && events[i]!.atMs < until) this.engine.at(events[i]!.atMs, batch);
    };
    if (i < events.length && events[i]!.atMs < until) this.engine.at(events[i]!.atMs, batch);
  }

  /**
   * Planned reimages in place of the cluster's: batched by instant as `scheduleReimages` does; with decommissioning,
   * every notice is scheduled first, so a notice at its reimage's instant (no notice) comes before it.
   */
  private schedulePlanned(p: ResolvedPlannedStorageReimages, from: number, until: number): void {
    const events = p.events;
    if (this.decommissioning)
      for (const e of events)
        this.engine.at(Math.max(from, e.atMs - p.noticeMs), () => this.announce(e.server, e.atMs));
    this.scheduleByInstant(events, 0, until, (s) => this.plannedReimage(s));
  }

  // ---------------------------------------------------------------------------------------------- writes and reads

  private write(writer: number): void {
    // Out-of-service datanodes take no new block (the namenode leaves them out of addBlock's targets).
    const excluded = this.outOfService.size > 0 ? this.outOfService : this.noneExcluded;
    const targets = this.nn.choose(this.R, writer, [], excluded, this.placeRng);
    if (targets.length === 0) {
      this.writesFailed++;
      return;
    }
    const b = this.newBlock();
    for (const t of targets) {
      this.addReplica(b, t);
      this.o.observer?.onPlaced?.(b, t, this.engine.clock.nowMs(), "write");
    }
    if (targets.length < this.R) this.writesShort++;
    if (this.trackUnder) this.countUnder(this.engine.clock.nowMs(), this.underDelta(b, 0));
    // The namenode learns of the block with its replicas; one written short waits for a copy.
    this.monitor.blockChanged(b);
    this.workWaits();
  }

  private access(): void {
    if (this.blockCount === 0) return;
    const rng = this.accessRng;
    // Lost blocks are few; a handful of draws finds a live one (or the read is not attempted).
    for (let tries = 0; tries < 16; tries++) {
      const b = Math.min(this.blockCount - 1, Math.floor(rng.next() * this.blockCount));
      if ((this.flags[b]! & LOST) !== 0) continue;
      this.accesses++;
      const base = b * this.W;
      const live = this.live[b]!;
      let available = false;
      for (let k = 0; k < live; k++) {
        if (!this.busy(this.rep[base + k]!)) {
          available = true;
          break;
        }
      }
      if (!available) this.unavailable++;
      return;
    }
  }

  private newBlock(): number {
    if (this.blockCount === this.blockCap) this.growBlocks();
    return this.blockCount++;
  }

  private growBlocks(): void {
    const cap = this.blockCap * 2;
    const grow32 = (a: Int32Array): Int32Array => {
      const g = new Int32Array(cap * this.W);
      g.set(a);
      return g;
    };
    const grow8 = (a: Uint8Array): Uint8Array => {
      const g = new Uint8Array(cap);
      g.set(a);
      return g;
    };
    this.rep = grow32(this.rep);
    this.repEpoch = grow32(this.repEpoch);
    this.live = grow8(this.live);
    this.flags = grow8(this.flags);
    this.blockCap = cap;
  }

  private addReplica(b: number, server: number): void {
    if (this.live[b] === this.W) this.widen();
    const at = b * this.W + this.live[b]!;
    this.rep[at] = server;
    this.repEpoch[at] = this.epoch[server]!;
    this.live[b]!++;
    this.stored[server]!++;
    this.serverBlocks.push(server, b);
  }

  /**
   * One more replica slot per block (decommissioning only: a block holds replicas on out-of-service servers beside R
   * in-service ones, more than one such server only when drains overlap).
   */
  private widen(): void {
    const W = this.W;
    const wider = W + 1;
    const rep = new Int32Array(this.blockCap * wider);
    const repEpoch = new Int32Array(this.blockCap * wider);
    for (let b = 0; b < this.blockCount; b++) {
      rep.set(this.rep.subarray(b * W, b * W + this.live[b]!), b * wider);
      repEpoch.set(this.repEpoch.subarray(b * W, b * W + this.live[b]!), b * wider);
    }
    this.rep = rep;
    this.repEpoch = repEpoch;
    this.W = wider;
  }

  /**
   * Block-hours below R replicas: integrates the count up to `nowMs`, then applies `delta` (+1: a block fell below R,
   * -1: one reached R again or was lost).
   */
  private countUnder(nowMs: number, delta: number): void {
    this.underMs += this.under * (nowMs - this.underSinceMs);
    this.underSinceMs = nowMs;
    this.under += delta;
    if (this.under > this.peakUnder) this.peakUnder = this.under;
  }

  /** `countUnder`'s delta for block `b`, whose live replicas went from `before` to `live[b]` (0: new, or lost). */
  private underDelta(b: number, before: number): number {
    const after = this.live[b]!;
    return (after > 0 && after < this.R ? 1 : 0) - (before > 0 && before < this.R ? 1 : 0);
  }

  /** Removes a replica, keeping the others in placement order (as the block map's replica map does). */
  private removeReplica(b: number, server: number): void {
    const base = b * this.W;
    const last = base + this.live[b]! - 1;
    for (let k = base; k <= last; k++) {
      if (this.rep[k] !== server) continue;
      this.rep.copyWithin(k, k + 1, last + 1);
      this.repEpoch.copyWithin(k, k + 1, last + 1);
      this.live[b]!--;
      return;
    }
    throw new HarvestError("INTERNAL", `block ${b} has no replica on server ${server} to remove`);
  }

  // ---------------------------------------------------------------------------------------------- reimages

  private reimage(s: number): void {
    this.reimagesApplied++;
    this.epoch[s]!++;
    this.o.observer?.onReimage?.(s, this.engine.clock.nowMs());
    // Copies from s fail whole; copies to s lose that target. Both before the replicas go, so that a block whose
    // last replica goes here has no copy left in flight.
    this.transfers.cancelFrom(s);
    this.transfers.dropTo(s);
    const blocks = this.serverBlocks.list(s);
    for (let j = 0; j < blocks.length; j++) {
      const b = blocks[j]!;
      const before = this.live[b]!;
      this.removeReplica(b, s);
      if (this.trackUnder) this.countUnder(this.engine.clock.nowMs(), this.underDelta(b, before));
      this.replicasLost++;
      if (this.live[b] === 0) {
        this.flags[b]! |= LOST;
        this.blocksLost++;
        this.o.observer?.onLost?.(b, this.engine.clock.nowMs());
      }
    }
    // The namenode learns of it (the datanode's reimage report): its copies are dropped, its blocks looked at again.
    this.monitor.datanodeRemoved(this.ids[s]!, blocks);
    this.serverBlocks.clear(s);
    this.stored[s] = 0;
    this.workWaits();
  }

  // ---------------------------------------------------------------------------------------------- planned reimages

  /** A planned reimage of `s` at `atMs` is announced: its drain starts now, or after the one it is in finishes. */
  private announce(s: number, atMs: number): void {
    const queue = this.announced[s]!;
    queue.push(atMs);
    if (queue.length === 1) this.startDrain(s, atMs);
  }

  /** Decommissions `s`'s datanode with `deadlineMs`: copies on their way to it are given up, its blocks queue. */
  private startDrain(s: number, deadlineMs: number): void {
    const now = this.engine.clock.nowMs();
    const id = this.ids[s]!;
    this.drainsStarted++;
    // The monitor gives up the copies to it (they no longer help); the model's copies lose that target with them.
    this.transfers.dropTo(s);
    this.outOfService.add(id);
    this.outFlag[s] = 1;
    this.monitor.decommission(id, this.serverBlocks.list(s), { nowMs: now, deadlineMs });
    // A server that holds nothing to copy is decommissioned at once.
    this.monitor.checkDecommissions(now);
    this.workWaits();
  }

  /**
   * A planned reimage: with decommissioning, the drain is judged at its deadline (completed, or missed with the blocks
   * still needing copies), the disk is wiped as for any reimage, and the empty datanode is back in service; the next
   * reimage announced for it, if any, starts its drain.
   */
  private plannedReimage(s: number): void {
    if (!this.decommissioning) {
      this.reimage(s);
      return;
    }
    const now = this.engine.clock.nowMs();
    const id = this.ids[s]!;
    if (this.outFlag[s] === 1) {
      this.monitor.checkDecommissions(now);
      const status = this.monitor.decommissionStatus(id, now);
      if (status?.state === "DECOMMISSIONED") {
        this.drainsCompleted++;
        this.drainMs.push(status.finishedMs - status.startedMs);
      } else {
        this.drainsMissed++;
        this.blocksNeedingAtMissed += status?.blocksNeedingCopies ?? 0;
      }
    }
    this.reimage(s);
    const queue = this.announced[s]!;
    queue.shift();
    if (this.outFlag[s] === 1) {
      this.monitor.recommission(id, []);
      this.outOfService.delete(id);
      this.outFlag[s] = 0;
    }
    if (queue.length > 0) this.startDrain(s, queue[0]!);
  }

  /** Whether block `b` has a replica on an out-of-service server. */
  private heldOutOfService(b: number): boolean {
    for (let k = b * this.W; k < b * this.W + this.live[b]!; k++) if (this.outFlag[this.rep[k]!] === 1) return true;
    return false;
  }

  // ---------------------------------------------------------------------------------------------- copies

  private startCopy(b: number, source: number, targets: readonly number[]): void {
    const c = this.transfers.start(b, source, targets, this.decommissioning && this.heldOutOfService(b));
    const serial = this.transfers.serialOf(c);
    this.engine.at(this.engine.clock.nowMs() + this.copyMs, () => this.finishCopy(c, serial));
  }

  private finishCopy(c: number, serial: number): void {
    if (this.transfers.serialOf(c) !== serial) return;
    const b = this.transfers.blockOf(c);
    const forDrain = this.transfers.forDrain(c);
    this.transfers.land(c, (t) => {
      const before = this.live[b]!;
      this.addReplica(b, t);
      if (this.trackUnder) this.countUnder(this.engine.clock.nowMs(), this.underDelta(b, before));
      this.reReplications++;
      if (forDrain) this.drainReplicas++;
      this.o.observer?.onPlaced?.(b, t, this.engine.clock.nowMs(), "copy");
    });
    // The targets' replicas reach the namenode: the copy is settled (a target dropped on the way leaves it short).
    this.monitor.blockChanged(b);
    // The monitor completes drains on its ticks, which run only while blocks wait: the last copy of a drain must be
    // seen now, not at whatever tick comes next.
    if (this.outOfService.size > 0) this.monitor.checkDecommissions(this.engine.clock.nowMs());
    this.workWaits();
  }

  // ---------------------------------------------------------------------------------------------- the monitor

  /** Blocks wait at the monitor: it runs (see `ensureTick`). */
  private workWaits(): void {
    if (this.monitor.waiting() > 0) this.ensureTick();
  }

  /**
   * The monitor runs at once when idle, else one interval after its last run. It runs only when something it waits
   * for has changed (a block fell short, a copy ended, a work limit cut its last run short, a new utilization slot woke
   * parked blocks); a periodic monitor would find nothing new on the other ticks.
   */
  private ensureTick(): void {
    if (this.tickPending) return;
    this.tickPending = true;
    const now = this.engine.clock.nowMs();
    this.engine.at(Math.max(now, this.lastTickMs + this.o.replicationIntervalMs), () => this.tick());
  }

  /** One run of the namenode's monitor; its copies start at once, under the bandwidth model. */
  private tick(): void {
    this.tickPending = false;
    const now = this.engine.clock.nowMs();
    this.lastTickMs = now;
    this.o.observer?.onMonitorTick?.(now);
    const work = this.monitor.tick(this.nn.liveServers, now);
    if (work.delete.length > 0)
      throw new HarvestError(
        "INTERNAL",
        `the monitor deleted replicas (${work.delete.length}): the model has no surplus`,
      );
    for (const task of work.replicate) {
      const source = this.nn.serverIndex.get(task.sourceId)!;
      const targets = task.targets.map(serverOf);
      this.o.observer?.onCopy?.(task.block.blockId, source, targets, now);
      this.startCopy(task.block.blockId, source, targets);
    }
    // Blocks left for a later run by the work limit; parked ones get another look at the next utilization slot.
    if (work.deferred > 0) this.ensureTick();
    if (this.monitor.parkedBlocks() > 0) this.wakeAtNextSlot();
  }

  private wakeAtNextSlot(): void {
    if (this.wakePending) return;
    this.wakePending = true;
    const slotMs = this.cluster.slotMs;
    const next = (Math.floor(this.engine.clock.nowMs() / slotMs) + 1) * slotMs;
    this.engine.at(next, () => {
      this.wakePending = false;
      this.monitor.wake();
      this.workWaits();
    });
  }

  // ---------------------------------------------------------------------------------------------- invariants

  /**
   * Throws INTERNAL unless: no server just reimaged holds a replica; every live replica was placed at its server's
   * current epoch (no replica outlived a reimage); the block table, server lists and counters agree; lost blocks have
   * no replica and no copy.
   */
  private check(reimaged: readonly number[]): void {
    const fail = (why: string): never => {
      throw new HarvestError("INTERNAL", `storage simulation invariant broken at ${this.engine.clock.nowMs()}: ${why}`);
    };
    for (const s of reimaged)
      if (this.serverBlocks.count[s] !== 0) fail(`server ${s} holds replicas after its reimage`);
    const R = this.R;
    const W = this.W;
    const perServer = new Int32Array(this.n);
    let under = 0;
    for (let b = 0; b < this.blockCount; b++) {
      const live = this.live[b]!;
      const inflight = this.monitor.pendingTargets(b).length;
      if ((this.flags[b]! & LOST) !== 0 && (live !== 0 || inflight !== 0)) fail(`lost block ${b} has replicas`);
      // Replicas on out-of-service servers do not count: they are what a drain copies.
      let inService = 0;
      for (let k = 0; k < live; k++) if (this.outFlag[this.rep[b * W + k]!] === 0) inService++;
      if (inService + inflight > R) fail(`block ${b} has ${inService} replicas in service and ${inflight} copies`);
      if (live > 0 && live < R) under++;
      for (let k = 0; k < live; k++) {
        const s = this.rep[b * W + k]!;
        if (reimaged.includes(s)) fail(`block ${b} has a replica on server ${s}, reimaged just now`);
        if (this.repEpoch[b * W + k] !== this.epoch[s]) fail(`block ${b}'s replica on ${s} outlived a reimage`);
        for (let j = 0; j < k; j++) if (this.rep[b * W + j] === s) fail(`block ${b} has two replicas on ${s}`);
        perServer[s]!++;
      }
    }
    if (this.trackUnder && under !== this.under) fail(`${under} blocks below ${R} replicas, counted ${this.under}`);
    for (const id of this.outOfService)
      if (this.monitor.adminState(id) === "NORMAL")
        fail(`server ${id} is out of service here, in service at the monitor`);
    for (let s = 0; s < this.n; s++) {
      if (perServer[s] !== this.stored[s] || perServer[s] !== this.serverBlocks.count[s])
        fail(
          `server ${s} counts ${this.stored[s]} replicas, lists ${this.serverBlocks.count[s]}, holds ${perServer[s]}`,
        );
    }
  }
}
