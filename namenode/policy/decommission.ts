/**
 * Datanode decommissioning, as HDFS's DatanodeAdminManager does it (without its maintenance states): before a planned
 * reimage or maintenance an operator takes a datanode out of service and the namenode drains it. While it is
 * DECOMMISSION_IN_PROGRESS its replicas do not count toward their blocks' replication, so the replication monitor
 * copies them to in-service datanodes (reading from the draining node itself by preference: it takes no new writes);
 * it is never the target of a new block or of a copy; clients may still read from it, last. Once every block it holds
 * has enough good replicas on in-service datanodes it is DECOMMISSIONED, and wiping or losing it loses nothing.
 *
 * Pure bookkeeping over plain data and a time passed in: the ReplicationMonitor owns a tracker and feeds it each block's
 * in-service replica count whenever it classifies the block, so the namenode and the simulator drive the same code.
 * The namenode persists the records (`DecommissionRecord`) and serves the admin RPCs.
 *
 * Choices where HDFS and Harvest differ, or HDFS leaves it open:
 * - A drain never completes before the datanode's first block report of the namenode's life (HDFS's
 *   `checkBlockReportReceived`): after a restart its replicas are unknown until it reports (`awaitReport`).
 * - A draining datanode that dies (or is wiped) holds nothing any more: its drain completes at the next check, as HDFS
 *   decommissions a dead node without blocks (HDFS-7374). What it alone held is missing, which fsck reports.
 * - DECOMMISSIONED is final until a recommission; a block of a decommissioned datanode that falls short later (another
 *   datanode died) shows in its `blocksNeedingCopies` and is re-replicated, with the decommissioned replica as the
 *   source of last resort (HDFS never reads from a decommissioned node; here it may, when nothing else holds the block).
 * - The deadline forces nothing (the namenode cannot make copies faster): passing it is reported once by `check`, and
 *   `status` says so until the drain completes.
 */
import { HarvestError } from "../../common/errors.js";

/** A datanode's admin state (HDFS's AdminStates without the maintenance ones). */
export type AdminState = "NORMAL" | "DECOMMISSION_IN_PROGRESS" | "DECOMMISSIONED";

/** A datanode out of service, as the namenode persists it (a NORMAL datanode has no record). */
export interface DecommissionRecord {
  readonly datanodeId: string;
  readonly state: Exclude<AdminState, "NORMAL">;
  /** When the drain started (ms since the epoch, the clock the caller passes). */
  readonly startedMs: number;
  /** When the operator wants it drained; 0 for no deadline. */
  readonly deadlineMs: number;
  /** When it became DECOMMISSIONED; 0 while in progress. */
  readonly finishedMs: number;
}

/** A draining or decommissioned datanode's progress. */
export interface DecommissionStatus extends DecommissionRecord {
  /** Blocks with a replica (good or corrupt) on it. */
  readonly blocks: number;
  /** Blocks with a good replica on it and fewer good replicas on in-service datanodes than their replication. */
  readonly blocksNeedingCopies: number;
  /** The drain waits for the datanode's first block report since the namenode started. */
  readonly awaitingReport: boolean;
  /** Still in progress with its deadline behind it. */
  readonly deadlinePassed: boolean;
}

/** What one `check` found. */
export interface DecommissionProgress {
  /** Datanodes that became DECOMMISSIONED, in the order their drains started. */
  readonly decommissioned: string[];
  /** Drains whose deadline passed since the last check (each reported once), with what is left to copy. */
  readonly overdue: { readonly datanodeId: string; readonly blocksNeedingCopies: number }[];
}

/** One datanode out of service. */
interface Drain {
  datanodeId: string;
  state: Exclude<AdminState, "NORMAL">;
  startedMs: number;
  deadlineMs: number;
  /** Invariant: 0 unless state is DECOMMISSIONED. */
  finishedMs: number;
  /** Blocks with a replica on the datanode. */
  readonly held: Set<number>;
  /** Invariant: a subset of `held`: those with a good replica on it and too few good in-service replicas. */
  readonly short: Set<number>;
  /** Invariant: only while DECOMMISSION_IN_PROGRESS; the drain cannot complete while set. */
  awaitingReport: boolean;
  /** The deadline's passing was reported by `check`. */
  overdueReported: boolean;
}

/** Options of a new drain. */
export interface DecommissionOptions {
  /** Now, on the caller's clock (becomes `startedMs`). */
  nowMs: number;
  /** When it should be drained; 0 or absent for no deadline. */
  deadlineMs?: number;
  /**
   * The datanode has not sent its first full block report yet, so what it holds is unknown: the drain does not
   * complete before `reported` is called (or the datanode is removed). @default false
   */
  awaitReport?: boolean;
}

/** The admin states of datanodes and the blocks each draining one still holds alone. */
export class DecommissionTracker {
  /** Out-of-service datanodes, in the order their drains started (a NORMAL datanode has no entry). */
  private readonly drains = new Map<string, Drain>();

  /** Datanodes out of service (draining or decommissioned). */
  get size(): number {
    return this.drains.size;
  }

  /** A datanode's admin state (NORMAL unless a drain was started and not ended). */
  adminState(datanodeId: string): AdminState {
    return this.drains.get(datanodeId)?.state ?? "NORMAL";
  }

  /** True when the datanode's replicas do not count and it takes no new replica. */
  outOfService(datanodeId: string): boolean {
    return this.drains.has(datanodeId);
  }

  /** The out-of-service datanodes, in the order their drains started. */
  datanodes(): IterableIterator<string> {
    return this.drains.keys();
  }

  /**
   * Starts draining a NORMAL datanode (true). On one already out of service it only replaces the deadline when a
   * non-zero one is given (false): a repeated request changes nothing else.
   */
  start(datanodeId: string, options: DecommissionOptions): boolean {
    const deadlineMs = options.deadlineMs ?? 0;
    if (!(Number.isFinite(deadlineMs) && deadlineMs >= 0))
      throw new HarvestError("INVALID_ARGUMENT", `deadline must be >= 0 ms (0: none), got ${deadlineMs}`, {
        details: { field: "deadlineMs" },
      });
    const existing = this.drains.get(datanodeId);
    if (existing) {
      if (deadlineMs > 0 && deadlineMs !== existing.deadlineMs) {
        existing.deadlineMs = deadlineMs;
        existing.overdueReported = false;
      }
      return false;
    }
    const d = this.transition(datanodeId, ["NORMAL"], "DECOMMISSION_IN_PROGRESS", options.nowMs);
    d.deadlineMs = deadlineMs;
    d.awaitingReport = options.awaitReport ?? false;
    return true;
  }

  /** Brings back a persisted drain (at a namenode's start), waiting for the datanode's report when in progress. */
  restore(record: DecommissionRecord, awaitReport: boolean): void {
    const d = this.transition(record.datanodeId, ["NORMAL"], "DECOMMISSION_IN_PROGRESS", record.startedMs);
    d.deadlineMs = record.deadlineMs;
    if (record.state === "DECOMMISSIONED")
      this.transition(record.datanodeId, ["DECOMMISSION_IN_PROGRESS"], "DECOMMISSIONED", record.finishedMs);
    else d.awaitingReport = awaitReport;
  }

  /** Puts a datanode back in service (true), or does nothing to a NORMAL one (false). */
  end(datanodeId: string): boolean {
    if (!this.drains.has(datanodeId)) return false;
    this.transition(datanodeId, ["DECOMMISSION_IN_PROGRESS", "DECOMMISSIONED"], "NORMAL", 0);
    return true;
  }

  /**
   * A block's replicas as they stand, with its count of good replicas on in-service datanodes: updates what each
   * out-of-service datanode holds and which of those blocks still need copies.
   */
  observe(
    blockId: number,
    replicas: ReadonlyMap<string, { readonly corrupt: boolean }>,
    inServiceLive: number,
    expectedReplication: number,
  ): void {
    const short = inServiceLive < expectedReplication;
    for (const d of this.drains.values()) {
      const r = replicas.get(d.datanodeId);
      if (!r) {
        d.held.delete(blockId);
        d.short.delete(blockId);
        continue;
      }
      d.held.add(blockId);
      // A corrupt replica is nothing to copy from: the block's fate does not hang on this datanode.
      if (short && !r.corrupt) d.short.add(blockId);
      else d.short.delete(blockId);
    }
  }

  /** The block left the namespace. */
  forget(blockId: number): void {
    for (const d of this.drains.values()) {
      d.held.delete(blockId);
      d.short.delete(blockId);
    }
  }

  /** The datanode sent a full block report: what it holds is known. */
  reported(datanodeId: string): void {
    const d = this.drains.get(datanodeId);
    if (d) d.awaitingReport = false;
  }

  /** Every replica on the datanode is gone (it died, or was wiped): there is no report left to wait for. */
  removed(datanodeId: string): void {
    this.reported(datanodeId);
  }

  /**
   * Completes the drains with nothing left to copy (they become DECOMMISSIONED at `nowMs`) and reports, once each,
   * the drains whose deadline has passed.
   */
  check(nowMs: number): DecommissionProgress {
    const progress: DecommissionProgress = { decommissioned: [], overdue: [] };
    for (const d of this.drains.values()) {
      if (d.state !== "DECOMMISSION_IN_PROGRESS") continue;
      if (!d.awaitingReport && d.short.size === 0) {
        this.transition(d.datanodeId, ["DECOMMISSION_IN_PROGRESS"], "DECOMMISSIONED", nowMs);
        progress.decommissioned.push(d.datanodeId);
      } else if (d.deadlineMs > 0 && nowMs > d.deadlineMs && !d.overdueReported) {
        d.overdueReported = true;
        progress.overdue.push({ datanodeId: d.datanodeId, blocksNeedingCopies: d.short.size });
      }
    }
    return progress;
  }

  /** What the namenode persists of an out-of-service datanode; undefined for a NORMAL one. */
  record(datanodeId: string): DecommissionRecord | undefined {
    const d = this.drains.get(datanodeId);
    if (!d) return undefined;
    return {
      datanodeId: d.datanodeId,
      state: d.state,
      startedMs: d.startedMs,
      deadlineMs: d.deadlineMs,
      finishedMs: d.finishedMs,
    };
  }

  /** An out-of-service datanode's progress at `nowMs`; undefined for a NORMAL one. */
  status(datanodeId: string, nowMs: number): DecommissionStatus | undefined {
    const d = this.drains.get(datanodeId);
    const record = this.record(datanodeId);
    if (!d || !record) return undefined;
    return {
      ...record,
      blocks: d.held.size,
      blocksNeedingCopies: d.short.size,
      awaitingReport: d.awaitingReport,
      deadlinePassed: d.state === "DECOMMISSION_IN_PROGRESS" && d.deadlineMs > 0 && nowMs > d.deadlineMs,
    };
  }

  /**
   * Every admin state change goes through here: NORMAL -> DECOMMISSION_IN_PROGRESS (start, restore),
   * DECOMMISSION_IN_PROGRESS -> DECOMMISSIONED (check, restore), and either -> NORMAL (end). Returns the drain (a fresh
   * one on a start; the removed one on an end).
   */
  private transition(datanodeId: string, from: readonly AdminState[], to: AdminState, nowMs: number): Drain {
    const current = this.adminState(datanodeId);
    if (!from.includes(current))
      throw new HarvestError("INTERNAL", `datanode ${datanodeId} cannot go from ${current} to ${to}`);
    let d = this.drains.get(datanodeId);
    if (to === "NORMAL") {
      this.drains.delete(datanodeId);
      return d!;
    }
    if (!d) {
      d = {
        datanodeId,
        state: to,
        startedMs: nowMs,
        deadlineMs: 0,
        finishedMs: 0,
        held: new Set(),
        short: new Set(),
        awaitingReport: false,
        overdueReported: false,
      };
      this.drains.set(datanodeId, d);
      return d;
    }
    d.state = to;
    if (to === "DECOMMISSIONED") {
      d.finishedMs = nowMs;
      d.awaitingReport = false;
    }
    return d;
  }
}
