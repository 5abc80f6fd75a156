/**
 * A namenode's part in an HA pair (HDFS's active/standby namenodes with a quorum journal, on etcd):
 *
 * - **Standby**: follows the shared edit log (common/ha/shared-log.ts), writing each entry to its own LevelDB (its
 *   checkpoint, with the entry's txid) and applying it to its in-memory namespace, so that its block map knows every
 *   block while the datanodes report to it as to the active. It campaigns to become active.
 * - **Promotion**: once elected, it reads the log to its end (the old term is fenced, so the end is final), then every
 *   batch it writes goes to the log first ({@link HaJournal}: acknowledged only once a majority of the coordination
 *   service has it) and then to its LevelDB.
 * - **Demotion**: a term that ends (the session lapsed, a hand-over, an append refused) leaves memory possibly ahead
 *   of the log: the namenode stops and starts again as a standby on its LevelDB (namenode/main.ts).
 * - **Trimming**: each namenode records how far it applied (`applied/<id>`); the active deletes the entries every
 *   namenode has applied, and keeps at most `retainEntries` anyway: a standby that fell further behind must be
 *   bootstrapped again (`harvest admin ha bootstrap-standby`), as HDFS's does.
 */
import { randomBytes } from "node:crypto";
import { HarvestError, errorMessage } from "../common/errors.js";
import type { Logger } from "../common/log.js";
import { Coordination } from "../common/ha/coordination.js";
import type { HaCoordination } from "../common/ha/coordination.js";
import { MasterElection } from "../common/ha/election.js";
import type { HaRole, MasterInfo } from "../common/ha/election.js";
import { MAX_ENTRY_BYTES, SharedLog } from "../common/ha/shared-log.js";
import type { Fence, LogEntry } from "../common/ha/shared-log.js";
import type { BatchOp, Journal, NamespaceStore } from "./namespace-store.js";

/** How often a standby records how far it applied, and the active trims the log. */
const MARK_INTERVAL_MS = 5_000;
const TRIM_INTERVAL_MS = 30_000;

/** What the HA role needs of its namenode. */
export interface NameNodeHaHost {
  log: Logger;
  store: NamespaceStore;
  /** Applies a log entry's operations to the in-memory namespace (the store has them already). */
  applyToMemory(ops: readonly BatchOp[]): void;
  /** The log is applied to its end and appends go to it: serve as active (reload records, restart leases). */
  becomeActive(epoch: number): Promise<void>;
  /** The term ended: stop serving as active at once (the namenode restarts as a standby). */
  stepDown(reason: string): void;
}

/** Appends each group commit to the shared log before the store writes it (namespace-store.ts `Journal`). */
export class HaJournal implements Journal {
  constructor(
    private readonly log: SharedLog<BatchOp[]>,
    private readonly fence: Fence,
    private next: number,
    private readonly onRefused: (err: unknown) => void,
  ) {}

  /** The txid of the next entry. */
  get nextTxid(): number {
    return this.next;
  }

  /** Appends the groups as few entries as fit (a group never split), in order; resolves with the last txid. */
  async append(groups: BatchOp[][]): Promise<number> {
    const parts = groups.map((g) => JSON.stringify(g).slice(1, -1)).filter((p) => p.length > 0);
    let entry: string[] = [];
    let bytes = 2;
    const flush = async (): Promise<void> => {
      if (entry.length === 0) return;
      try {
        await this.log.appendJson(this.next, `[${entry.join(",")}]`, this.fence);
      } catch (err) {
        this.onRefused(err);
        throw err;
      }
      this.next++;
      entry = [];
      bytes = 2;
    };
    for (const part of parts) {
      if (part.length + 64 > MAX_ENTRY_BYTES)
        throw new HarvestError(
          "INVALID_ARGUMENT",
          `one namespace change of ${part.length} bytes is over the shared log's ${MAX_ENTRY_BYTES}-byte entry ` +
            "(delete a very large directory in parts)",
        );
      if (bytes + part.length + 1 > MAX_ENTRY_BYTES - 64) await flush();
      entry.push(part);
      bytes += part.length + 1;
    }
    await flush();
    return this.next - 1;
  }
}

/** A namenode's HA role: tail as standby, campaign, promote, trim (see the file comment). */
export class NameNodeHa {
  readonly coordination: Coordination;
  readonly sharedLog: SharedLog<BatchOp[]>;
  readonly election: MasterElection;
  private journal: HaJournal | undefined;
  private applied = 0;
  private markedApplied = -1;
  private markTimer: NodeJS.Timeout | undefined;
  private trimTimer: NodeJS.Timeout | undefined;
  private stopped = false;
  /** Entries applied as a standby since start (for the figures). */
  entriesApplied = 0;

  constructor(
    options: HaCoordination,
    private readonly me: MasterInfo,
    private readonly host: NameNodeHaHost,
    private readonly retainEntries: number,
  ) {
    this.coordination = new Coordination(options);
    this.sharedLog = new SharedLog<BatchOp[]>(this.coordination, "nn", host.log);
    this.election = new MasterElection(
      this.coordination,
      "nn",
      me,
      { promote: (epoch) => this.promote(epoch), demote: async (reason) => this.host.stepDown(reason) },
      host.log,
    );
  }

  get role(): HaRole {
    return this.election.role;
  }

  get epoch(): number {
    return this.election.epoch;
  }

  /** The active as known here: this namenode while active. */
  get leader(): MasterInfo | undefined {
    return this.election.leader;
  }

  /** The last log entry this namenode holds. */
  get appliedTxid(): number {
    return this.journal ? this.journal.nextTxid - 1 : this.applied;
  }

  /** The error a standby answers callers with, naming the active when it is known. */
  notActive(): HarvestError<"NOT_ACTIVE"> {
    const active = this.election.leader;
    const where = active && active.id !== this.me.id ? active.address : undefined;
    return new HarvestError(
      "NOT_ACTIVE",
      `this namenode (${this.me.address}) is the ${this.role} one` +
        (where ? `; the active is at ${where}` : "; no active namenode is known yet"),
      { details: { ...(where ? { active: where } : {}), epoch: String(this.epoch) } },
    );
  }

  /**
   * Checks the local store can follow the log (a store further behind than the log's first entry cannot: it must be
   * bootstrapped again), follows the log, and campaigns.
   */
  async start(): Promise<void> {
    this.applied = await this.host.store.appliedTxid();
    const first = await this.sharedLog.firstTxid();
    if (first > this.applied + 1)
      throw new HarvestError(
        "CONFIG_INVALID",
        `this namenode's store holds the shared log up to entry ${this.applied}, but the log now starts at ${first}: ` +
          "it fell too far behind; run 'harvest admin ha bootstrap-standby' to copy the active's checkpoint",
      );
    await this.sharedLog.tail(this.applied + 1, (entries) => this.applyEntries(entries));
    this.markTimer = setInterval(() => void this.markApplied(), MARK_INTERVAL_MS);
    void this.markApplied();
    this.election.start();
  }

  /**
   * A secret both namenodes must share (the delegation-token key: a token issued before a failover still verifies
   * after it): made once by whichever asks first, kept in the coordination service.
   */
  async sharedSecret(name: string): Promise<Buffer> {
    const ns = this.coordination.service("nn").namespace("secrets/");
    await ns
      .if(name, "Create", "==", 0)
      .then(ns.put(name).value(randomBytes(32).toString("hex")))
      .commit();
    const hex = await ns.get(name).string();
    if (!hex) throw new HarvestError("COORDINATION_UNAVAILABLE", `the shared secret ${name} vanished`);
    return Buffer.from(hex, "hex");
  }

  /** Hands the active term over to the other namenode (`harvest admin ha failover`). */
  async handOver(): Promise<void> {
    if (this.role !== "active")
      throw new HarvestError("INVALID_ARGUMENT", `this namenode is not the active one (it is ${this.role})`);
    await this.election.resign();
  }

  /** Stops tailing, campaigning and trimming; an active gives up its term. */
  async stop(): Promise<void> {
    this.stopped = true;
    if (this.markTimer) clearInterval(this.markTimer);
    if (this.trimTimer) clearInterval(this.trimTimer);
    await this.sharedLog.stopTail();
    await this.election.stop();
    this.coordination.close();
  }

  private async applyEntries(entries: LogEntry<BatchOp[]>[]): Promise<void> {
    for (const e of entries) {
      if (e.txid <= this.applied) continue;
      if (e.txid !== this.applied + 1)
        throw new HarvestError("INTERNAL", `the shared log skips from entry ${this.applied} to ${e.txid}`);
      await this.host.store.applyEntry(e.txid, e.body);
      this.host.applyToMemory(e.body);
      this.applied = e.txid;
      this.entriesApplied++;
    }
  }

  /** Elected: read the log to its end, then append to it (HaJournal). */
  private async promote(epoch: number): Promise<void> {
    await this.sharedLog.stopTail();
    for (;;) {
      const batch = await this.sharedLog.read(this.applied + 1);
      if (batch.length === 0) break;
      await this.applyEntries(batch);
    }
    const last = Math.max(this.applied, await this.sharedLog.lastTxid());
    if (last !== this.applied)
      throw new HarvestError("INTERNAL", `the shared log ends at ${last} but this namenode applied ${this.applied}`);
    this.journal = new HaJournal(this.sharedLog, this.election.fenceKey, this.applied + 1, (err) =>
      this.host.stepDown(`the shared log refused an append: ${errorMessage(err)}`),
    );
    this.host.store.journal = this.journal;
    await this.host.becomeActive(epoch);
    this.host.log.info("namenode active", { epoch, txid: this.applied });
    this.trimTimer = setInterval(() => void this.trim(), TRIM_INTERVAL_MS);
  }

  private async markApplied(): Promise<void> {
    const txid = this.appliedTxid;
    if (this.stopped || txid === this.markedApplied) return;
    try {
      await this.sharedLog.setApplied(this.me.id, txid);
      this.markedApplied = txid;
    } catch (err) {
      this.host.log.debug("cannot record how far the shared log is applied", { error: errorMessage(err) });
    }
  }

  /** Deletes the entries every namenode has applied, keeping at most `retainEntries` in any case. */
  private async trim(): Promise<void> {
    if (this.stopped || this.role !== "active") return;
    try {
      await this.markApplied();
      const marks = Object.values(await this.sharedLog.appliedMarks());
      const last = this.appliedTxid;
      const everyone = Math.min(last, ...marks);
      const below = Math.max(everyone, last - this.retainEntries) + 1;
      const removed = await this.sharedLog.trimBelow(below, this.election.fenceKey);
      if (removed > 0) this.host.log.debug("shared log trimmed", { removed, below });
    } catch (err) {
      this.host.log.warn("cannot trim the shared log; will try again", { error: errorMessage(err) });
    }
  }
}

/** A server-streaming call as `serveCheckpoint` writes to it. */
interface CheckpointCall {
  request: { standbyId: string };
  write(page: { entries: { key: string; valueJson: string }[]; txid: number }): boolean;
  end(): void;
  once(event: "drain", fn: () => void): unknown;
  readonly cancelled: boolean;
}

/**
 * Streams `store` as one consistent snapshot (LevelDB's iterator), in pages, to a new standby; with HA, first records
 * the standby as having applied what this namenode holds, so that trimming keeps every later entry for it.
 */
export async function serveCheckpoint(
  call: CheckpointCall,
  store: NamespaceStore,
  ha: NameNodeHa | undefined,
): Promise<number> {
  const id = call.request.standbyId;
  if (!/^[A-Za-z0-9_.@:-]{1,128}$/.test(id))
    throw new HarvestError("INVALID_ARGUMENT", "standbyId must be the new standby's haId (1-128 of [A-Za-z0-9_.@:-])", {
      details: { field: "standbyId" },
    });
  const txid = ha ? ha.appliedTxid : 0;
  if (ha) await ha.sharedLog.setApplied(id, txid);
  let pages = 0;
  for await (const page of store.snapshot()) {
    if (call.cancelled) break;
    const ok = call.write({
      entries: page.map((op) => ({ key: op.key, valueJson: JSON.stringify(op.type === "put" ? op.value : null) })),
      txid,
    });
    pages++;
    if (!ok) await new Promise<void>((resolve) => call.once("drain", resolve));
  }
  call.end();
  return pages;
}
