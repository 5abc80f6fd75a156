/**
 * Cancels a job's namenode delegation token when the job ends (FINISHED, FAILED or KILLED), as YARN's
 * DelegationTokenRenewer cancels a job's HDFS tokens at its end: the token names the job, and nothing should act with
 * it once the job is over. The resource manager calls the namenode's CancelDelegationToken with its daemon
 * certificate; holding the token is what entitles it (namenode/client-protocol.ts).
 *
 * Best effort, never the job's concern: the token to cancel is stored with the job's end (`RmStateStore.finishApp`),
 * tried a few times with a growing pause, and dropped from the store once the namenode has cancelled it or says there
 * is nothing to cancel (an expired token). One still pending after the last try, or when the resource manager stops,
 * is tried again at its next start.
 */
import { call, loadHarvestProto, makeClient } from "../common/grpc.js";
import type { ClientSecurity } from "../common/grpc.js";
import { errorMessage, isHarvestError } from "../common/errors.js";
import type { Logger } from "../common/log.js";
import type { ClientNamenodeClient } from "../proto/generated/harvest/v1/ClientNamenode.js";
import type { RmStateStore } from "./state-store.js";
import { DfsClient } from "../client/dfs-client.js";

/** How many times, and after what first pause (doubled each time), a cancellation is tried. */
export interface CancelRetry {
  /** @default 4 */
  attempts: number;
  /** @default 1000 */
  firstPauseMs: number;
}

/** Cancels ended jobs' delegation tokens at one namenode. */
export class DfsTokenCanceller {
  private client: ClientNamenodeClient | undefined;
  private stopped = false;
  /** Pauses before the next try, cleared at stop. */
  private readonly pauses = new Set<NodeJS.Timeout>();

  constructor(
    /** The namenode; empty: nothing is cancelled (`enabled` is false). */
    private readonly nnAddress: string,
    private readonly security: ClientSecurity | undefined,
    private readonly store: RmStateStore,
    private readonly log: Logger,
    private readonly retry: CancelRetry = { attempts: 4, firstPauseMs: 1_000 },
  ) {}

  /** False without a namenode to cancel at: the tokens live until they expire. */
  get enabled(): boolean {
    return this.nnAddress !== "";
  }

  /** Cancels the tokens an earlier run left pending (its last tries failed, or it stopped first). Never rejects. */
  async resume(): Promise<void> {
    if (!this.enabled) return;
    let pending: { appId: string; token: string; stagingDir?: string }[];
    try {
      pending = await this.store.pendingTokenCancels();
    } catch (err) {
      this.log.warn("cannot read the delegation tokens left to cancel", { error: errorMessage(err) });
      return;
    }
    if (pending.length > 0)
      this.log.info("cancelling the delegation tokens of jobs that ended before the restart", { jobs: pending.length });
    for (const p of pending) this.cancel(p.appId, p.token, p.stagingDir);
  }

  /**
   * Cancels the ended job `appId`'s token in the background (stored as pending by the job's end), after removing the
   * job's DFS staging directory with it (the token is the only right the resource manager has there).
   */
  cancel(appId: string, token: string, stagingDir?: string): void {
    if (!this.enabled || this.stopped) return;
    void this.attempt(appId, token, 1, stagingDir);
  }

  /** Removes a finished job's DFS staging directory, acting with the job's token (a missing one is fine). */
  private async removeStaging(stagingDir: string, token: string): Promise<void> {
    const dfs = new DfsClient(this.nnAddress, {
      ...(this.security?.ca ? { security: { ca: this.security.ca } } : {}),
      dfsToken: token,
    });
    try {
      await dfs.delete(stagingDir.slice("dfs:".length), { recursive: true });
      this.log.info("finished job's staging directory removed", { dir: stagingDir });
    } catch (err) {
      if (!isHarvestError(err, "NAMENODE_FILE_NOT_FOUND", "DELEGATION_TOKEN_INVALID", "UNAUTHENTICATED")) throw err;
    } finally {
      dfs.close();
    }
  }

  /** Stops: no more tries here; those not done are tried again at the next start. Idempotent. */
  stop(): void {
    this.stopped = true;
    for (const t of this.pauses) clearTimeout(t);
    this.pauses.clear();
    this.client?.close();
    this.client = undefined;
  }

  /** One try; never rejects. */
  private async attempt(appId: string, token: string, n: number, stagingDir?: string): Promise<void> {
    if (this.stopped) return;
    let outcome: "cancelled" | "nothing to cancel";
    try {
      if (stagingDir) {
        await this.removeStaging(stagingDir, token);
        stagingDir = undefined;
      }
      const nn = (this.client ??= makeClient(loadHarvestProto().ClientNamenode, this.nnAddress, this.security));
      await call(nn, nn.cancelDelegationToken, { token }, 10_000);
      outcome = "cancelled";
    } catch (err) {
      if (this.stopped) return;
      if (isHarvestError(err, "DELEGATION_TOKEN_INVALID")) {
        outcome = "nothing to cancel";
      } else if (n < this.retry.attempts) {
        const pause = setTimeout(
          () => {
            this.pauses.delete(pause);
            void this.attempt(appId, token, n + 1, stagingDir);
          },
          this.retry.firstPauseMs * 2 ** (n - 1),
        );
        this.pauses.add(pause);
        return;
      } else {
        this.log.warn("cannot cancel a job's delegation token at the namenode; trying again at the next start", {
          appId,
          nn: this.nnAddress,
          attempts: n,
          error: errorMessage(err),
        });
        return;
      }
    }
    this.log.info("job's delegation token cancelled at the namenode", { appId, outcome });
    if (this.stopped) return; // The store may be closed: the next start cancels it again, which is harmless.
    try {
      await this.store.tokenCancelled(appId);
    } catch (err) {
      this.log.warn("cannot record a cancelled delegation token; it is cancelled again at the next start", {
        appId,
        error: errorMessage(err),
      });
    }
  }
}
