/**
 * Block recovery for lease recovery (HDFS's idea, written our own way): when a writer's lease expires while a block is
 * being written, the namenode asks every datanode of that block's pipeline what it holds (`RecoverBlockCommand`: the
 * datanode stops any write of the block, keeps the replica, and answers with its length and its checksum-verified
 * length), keeps the longest prefix present on every replica that answered, has those replicas truncated and
 * finalized at it (`CommitRecoveryCommand`), and only then closes the file with the block committed at that length.
 * Every byte the writer had acknowledged is on every replica of the pipeline, so it is in that prefix.
 *
 * Pure bookkeeping: no I/O, no timers. The namenode feeds it datanode answers and ticks, sends the commands it returns
 * and applies the outcomes to the namespace. Each attempt has its own recovery id; answers to an older attempt are
 * ignored. A datanode that is down is skipped; when no datanode holding a replica answers in time, the attempt starts
 * over later (the block is never dropped for lack of answers). It is dropped only when every datanode of the
 * pipeline answered that it holds nothing (the writer died before any byte reached them), or no byte verifies.
 */
import type { BlockRecord } from "./namespace-store.js";

/** What a datanode holds of a block under recovery. */
export type RecoveryReplicaState = "REPLICA_MISSING" | "REPLICA_BEING_WRITTEN" | "REPLICA_FINALIZED";

/** A datanode's answer (a BlockRecoveryReport). */
export interface RecoveryAnswer {
  recoveryId: number;
  blockId: number;
  state: RecoveryReplicaState;
  numBytes: number;
  verifiedBytes: number;
  /** The answer to a commit: the replica is finalized at the chosen length. */
  committed: boolean;
}

/** One block under recovery. */
export interface BlockRecoveryRecord {
  readonly path: string;
  readonly inodeId: number;
  readonly block: BlockRecord;
  /** The datanodes of the block's write pipeline. */
  readonly pipeline: readonly string[];
  recoveryId: number;
  phase: "asking" | "committing";
  /** When the current attempt (and phase) started. */
  phaseStartedMs: number;
  attempts: number;
  /** Datanodes asked in this attempt. */
  readonly asked: Set<string>;
  readonly answers: Map<string, RecoveryAnswer>;
  /** The chosen length and the datanodes told to finalize at it (committing phase). */
  length: number;
  committers: string[];
  readonly committed: Set<string>;
}

/** How a recovery ended. */
export type RecoveryOutcome =
  | { kind: "commit"; length: number; replicas: string[]; reason: string }
  | { kind: "drop"; reason: string; holders: string[] };

/** Commands to send and recoveries that ended, from one tick. */
export interface RecoveryWork {
  asks: { datanodeId: string; block: BlockRecord; recoveryId: number }[];
  commits: { datanodeId: string; block: BlockRecord; recoveryId: number; length: number }[];
  finished: { recovery: BlockRecoveryRecord; outcome: RecoveryOutcome }[];
  /** Attempts given up for lack of answers this tick (to be retried). */
  restarted: BlockRecoveryRecord[];
}

/** Settings of block recovery. */
export interface BlockRecoveryOptions {
  /** How long an attempt waits for answers (or for finalizations) before it decides without the silent datanodes. */
  answerTimeoutMs: number;
}

/** The blocks under recovery, by inode id (one per open file). */
export class BlockRecoveries {
  private readonly byInode = new Map<number, BlockRecoveryRecord>();
  private nextRecoveryId = 1;

  constructor(private readonly options: BlockRecoveryOptions) {}

  /** Recoveries in progress. */
  get size(): number {
    return this.byInode.size;
  }

  /** Whether the file with this inode id has a recovery in progress. */
  has(inodeId: number): boolean {
    return this.byInode.has(inodeId);
  }

  /** Starts recovering `block`, the last block of the file `inodeId`, whose pipeline was `pipeline`. */
  start(path: string, inodeId: number, block: BlockRecord, pipeline: readonly string[], nowMs: number): void {
    if (this.byInode.has(inodeId)) return;
    this.byInode.set(inodeId, {
      path,
      inodeId,
      block: { ...block },
      pipeline: [...new Set(pipeline)],
      recoveryId: this.nextRecoveryId++,
      phase: "asking",
      phaseStartedMs: nowMs,
      attempts: 1,
      asked: new Set(),
      answers: new Map(),
      length: 0,
      committers: [],
      committed: new Set(),
    });
  }

  /** Forgets a recovery (its file was deleted or replaced). */
  forget(inodeId: number): void {
    this.byInode.delete(inodeId);
  }

  /** Every recovery in progress. */
  all(): IterableIterator<BlockRecoveryRecord> {
    return this.byInode.values();
  }

  /** A datanode's answer; ignored unless it is for the current attempt of a block under recovery from its pipeline. */
  onAnswer(datanodeId: string, answer: RecoveryAnswer): void {
    for (const r of this.byInode.values()) {
      if (r.block.blockId !== answer.blockId || r.recoveryId !== answer.recoveryId) continue;
      if (!r.pipeline.includes(datanodeId)) return;
      if (answer.committed) {
        if (r.phase === "committing" && answer.numBytes === r.length) r.committed.add(datanodeId);
      } else if (r.phase === "asking") r.answers.set(datanodeId, { ...answer });
      return;
    }
  }

  /**
   * Advances every recovery: asks datanodes that are `up` and not yet asked in this attempt; decides once every
   * pipeline datanode answered, or the answer timeout passed with at least one replica reported; finishes once every
   * replica told to finalize did, or the timeout passed with at least one; starts over an attempt that got nothing.
   */
  tick(nowMs: number, up: (datanodeId: string) => boolean): RecoveryWork {
    const work: RecoveryWork = { asks: [], commits: [], finished: [], restarted: [] };
    for (const r of [...this.byInode.values()]) {
      if (r.phase === "asking") this.stepAsking(r, nowMs, up, work);
      else this.stepCommitting(r, nowMs, work);
    }
    return work;
  }

  private stepAsking(
    r: BlockRecoveryRecord,
    nowMs: number,
    up: (datanodeId: string) => boolean,
    work: RecoveryWork,
  ): void {
    for (const dn of r.pipeline) {
      if (r.asked.has(dn) || !up(dn)) continue;
      r.asked.add(dn);
      work.asks.push({ datanodeId: dn, block: r.block, recoveryId: r.recoveryId });
    }
    const holders = [...r.answers].filter(([, a]) => a.state !== "REPLICA_MISSING");
    const everyoneAnswered = r.pipeline.every((dn) => r.answers.has(dn));
    const timedOut = nowMs - r.phaseStartedMs >= this.options.answerTimeoutMs;
    if (!everyoneAnswered && !(timedOut && holders.length > 0)) {
      if (timedOut) this.restart(r, nowMs, work);
      return;
    }
    if (holders.length === 0) {
      this.finish(r, { kind: "drop", reason: "no datanode of its pipeline held any of it", holders: [] }, work);
      return;
    }
    const length = Math.min(...holders.map(([, a]) => a.verifiedBytes));
    if (length <= 0) {
      const ids = holders.map(([dn]) => dn);
      this.finish(r, { kind: "drop", reason: "no byte of it verified on every replica", holders: ids }, work);
      return;
    }
    // A finalized replica cannot be cut shorter: it keeps its length, and counts only if that is the chosen one.
    r.committers = holders
      .filter(([, a]) => a.state === "REPLICA_BEING_WRITTEN" || a.numBytes === length)
      .map(([dn]) => dn);
    r.length = length;
    r.phase = "committing";
    r.phaseStartedMs = nowMs;
    for (const dn of r.committers)
      work.commits.push({ datanodeId: dn, block: r.block, recoveryId: r.recoveryId, length });
  }

  private stepCommitting(r: BlockRecoveryRecord, nowMs: number, work: RecoveryWork): void {
    const allDone = r.committers.every((dn) => r.committed.has(dn));
    const timedOut = nowMs - r.phaseStartedMs >= this.options.answerTimeoutMs;
    if (allDone || (timedOut && r.committed.size > 0)) {
      const replicas = [...r.committed].sort();
      const reason =
        `lease expired; last block ${r.block.blockId} recovered at ${r.length} bytes ` +
        `(the prefix on every surviving replica: ${replicas.join(", ")})`;
      this.finish(r, { kind: "commit", length: r.length, replicas, reason }, work);
    } else if (timedOut) this.restart(r, nowMs, work);
  }

  private restart(r: BlockRecoveryRecord, nowMs: number, work: RecoveryWork): void {
    r.recoveryId = this.nextRecoveryId++;
    r.phase = "asking";
    r.phaseStartedMs = nowMs;
    r.attempts += 1;
    r.asked.clear();
    r.answers.clear();
    r.committers = [];
    r.committed.clear();
    r.length = 0;
    work.restarted.push(r);
  }

  private finish(r: BlockRecoveryRecord, outcome: RecoveryOutcome, work: RecoveryWork): void {
    this.byInode.delete(r.inodeId);
    work.finished.push({ recovery: r, outcome });
  }
}
