/**
 * Lease recovery (block-recovery.ts): a file whose writer went silent is closed with its last block at the length
 * every surviving replica of its pipeline holds, asked over the datanodes' streams, and marked recovered.
 */
import type { Clock } from "../common/clock.js";
import { errorMessage } from "../common/errors.js";
import type { Logger } from "../common/log.js";
import type { NamenodeToDatanode } from "../proto/generated/harvest/v1/NamenodeToDatanode.js";
import { BlockRecoveries } from "./block-recovery.js";
import type { BlockRecoveryRecord, RecoveryAnswer, RecoveryOutcome } from "./block-recovery.js";
import type { DatanodeTracker } from "./datanode-tracker.js";
import type { Namespace } from "./namespace.js";
import type { NameNodeOptions } from "./options.js";

/** What lease recovery uses of the namenode. */
export interface LeaseRecoveryHost {
  options: NameNodeOptions;
  clock: Clock;
  log: Logger;
  namespace: Namespace;
  tracker: DatanodeTracker;
  /** True while the daemon is running (no recovery moves on otherwise). */
  isRunning(): boolean;
}

/** The namenode's lease recovery: expired leases, and the block recoveries of their files' last blocks. */
export class LeaseRecovery {
  private recovering = false;
  /** Last blocks of files whose lease expired, being recovered from their datanodes. */
  private readonly recoveries: BlockRecoveries;
  private readonly options: NameNodeOptions;
  private readonly clock: Clock;
  private readonly log: Logger;
  private readonly namespace: Namespace;
  private readonly tracker: DatanodeTracker;

  constructor(private readonly host: LeaseRecoveryHost) {
    ({
      options: this.options,
      clock: this.clock,
      log: this.log,
      namespace: this.namespace,
      tracker: this.tracker,
    } = host);
    this.recoveries = new BlockRecoveries({ answerTimeoutMs: this.options.blockRecoveryTimeoutMs });
  }

  /** A datanode answered a recovery: answers move it on at once rather than at the next tick. */
  onAnswer(datanodeId: string, answer: RecoveryAnswer): void {
    this.recoveries.onAnswer(datanodeId, answer);
    this.tick();
  }

  /** Starts recovering the files whose writer has been silent for longer than the lease timeout. */
  recoverLeases(): void {
    if (this.recovering) return;
    const expired = this.namespace.expiredLeases(this.options.leaseTimeoutMs);
    if (expired.length === 0) return;
    this.recovering = true;
    const work = async (): Promise<void> => {
      for (const path of expired) {
        const begun = await this.namespace.beginRecovery(path, this.options.leaseTimeoutMs);
        if (begun === "closed") this.log.warn("lease expired: file closed (no block was being written)", { path });
        else if (begun) {
          this.recoveries.start(path, begun.inodeId, begun.block, begun.pipeline, this.clock.nowMs());
          this.log.warn("lease expired: recovering the last block from its datanodes", {
            path,
            blockId: begun.block.blockId,
            pipeline: begun.pipeline,
          });
        }
      }
      this.tick();
    };
    work()
      .catch((err: unknown) => this.log.error("lease recovery failed", { error: errorMessage(err) }))
      .finally(() => {
        this.recovering = false;
      });
  }

  /** Sends the block recoveries' commands and applies the recoveries that ended to the namespace. */
  tick(): void {
    if (this.recoveries.size === 0 || !this.host.isRunning()) return;
    for (const r of [...this.recoveries.all()])
      if (!this.namespace.isRecovering(r.inodeId)) this.recoveries.forget(r.inodeId);
    const work = this.recoveries.tick(this.clock.nowMs(), (id) => {
      const d = this.tracker.datanodes.get(id);
      return d?.state === "LIVE" && d.stream !== undefined;
    });
    const send = (datanodeId: string, commands: Partial<NamenodeToDatanode["commands"]>): void => {
      this.tracker.datanodes.get(datanodeId)?.stream?.write({
        commands: {
          seq: 0,
          replicate: [],
          delete: [],
          reregister: false,
          epoch: this.tracker.commandEpoch(),
          ...commands,
        },
      });
    };
    for (const a of work.asks) send(a.datanodeId, { recover: [{ block: a.block, recoveryId: a.recoveryId }] });
    for (const c of work.commits)
      send(c.datanodeId, { commitRecovery: [{ block: c.block, recoveryId: c.recoveryId, length: c.length }] });
    for (const r of work.restarted)
      this.log.warn("block recovery: no datanode holding the block answered in time; asking again", {
        path: r.path,
        blockId: r.block.blockId,
        pipeline: r.pipeline,
        attempt: r.attempts,
      });
    for (const { recovery, outcome } of work.finished)
      this.finishRecovery(recovery, outcome).catch((err: unknown) =>
        this.log.error("could not close a recovered file", { path: recovery.path, error: errorMessage(err) }),
      );
  }

  private async finishRecovery(r: BlockRecoveryRecord, outcome: RecoveryOutcome): Promise<void> {
    const reason =
      outcome.kind === "commit"
        ? outcome.reason
        : `lease expired; last block ${r.block.blockId} dropped: ${outcome.reason}`;
    const length = outcome.kind === "commit" ? outcome.length : 0;
    if (!(await this.namespace.finishRecovery(r.inodeId, r.block.blockId, length, reason))) {
      this.log.info("block recovery ended: the file was deleted or replaced meanwhile", { path: r.path });
      return;
    }
    if (outcome.kind === "drop")
      this.tracker.queueDeletions(outcome.holders.map((datanodeId) => ({ datanodeId, block: r.block })));
    this.log.warn("lease recovered: file closed", { path: r.path, blockId: r.block.blockId, length, reason });
  }
}
