/**
 * What the resource manager does at the namenode when a job ends (FINISHED, FAILED or KILLED): it removes the job's DFS
 * staging directory (`/user/<name>/.staging/<appId>`, its DAG, uploaded files and journal), then cancels the job's
 * delegation token, as YARN's DelegationTokenRenewer cancels a job's HDFS tokens at its end: the token names the job,
 * and nothing should act with it once the job is over.
 *
 * On a secure cluster the removal acts with the job's token (the only right the resource manager has in the
 * submitter's home), and the cancellation with the resource manager's daemon certificate (holding the token is what
 * entitles it: namenode/client-protocol.ts). A plaintext cluster has no tokens: there the namenode trusts the user a
 * client claims, and the resource manager removes the directory as the job's submitter, as MapReduce's job client would
 * (in YARN the job's application master deletes it and the resource manager's cleanup is the fallback; here the job
 * manager keeps its journal there until its last attempt ends, which only the resource manager knows).
 *
 * Best effort, never the job's concern: the cleanup is stored with the job's end (`RmStore.finishApp`), tried a
 * few times with a growing pause, and dropped from the store once done (a directory already gone, or a token the
 * namenode says there is nothing to cancel for, count as done). One still pending after the last try, or when the
 * resource manager stops, is tried again at its next start.
 */
import { call, loadHarvestProto, makeClient } from "../common/grpc.js";
import type { ClientSecurity } from "../common/grpc.js";
import { errorMessage, isHarvestError } from "../common/errors.js";
import type { Logger } from "../common/log.js";
import type { ClientNamenodeClient } from "../proto/generated/harvest/v1/ClientNamenode.js";
import type { AppRecord, JobCleanup, RmStore } from "./state-store.js";
import { DfsClient } from "../client/dfs-client.js";
import { systemClock } from "../common/clock.js";
import { KeptLogRetention } from "./log-retention.js";

/** How many times, and after what first pause (doubled each time), a cleanup is tried. */
export interface CleanupRetry {
  /** @default 4 */
  attempts: number;
  /** @default 1000 */
  firstPauseMs: number;
}

/** What the cleanup does about the containers' logs kept in the DFS (common/container-logs.ts). */
export interface LogKeeping {
  /** How long after the job's end its token is cancelled (the node managers copy its last logs with it). @default 0 */
  cancelDelayMs: number;
  /** Kept logs older than this are removed by the periodic sweep (0: kept; log-retention.ts). @default 0 */
  retentionMs: number;
  /** How often the sweep runs. @default 3600000 */
  checkMs?: number;
}

/** What the resource manager's options say of kept logs. */
export function keptLogsOf(o: {
  jobTokenCancelDelayMs: number;
  logRetentionHours: number;
  logRetentionCheckMs: number;
}): LogKeeping {
  return {
    cancelDelayMs: o.jobTokenCancelDelayMs,
    retentionMs: o.logRetentionHours * 3600_000,
    checkMs: o.logRetentionCheckMs,
  };
}

/** Cleans up ended jobs' staging directories and delegation tokens at one namenode. */
export class JobDfsCleanup {
  private client: ClientNamenodeClient | undefined;
  private stopped = false;
  /** Pauses before the next try, cleared at stop. */
  private readonly pauses = new Set<NodeJS.Timeout>();
  /** The periodic removal of kept logs past their retention. */
  private readonly retention: KeptLogRetention;

  constructor(
    /** The namenode; empty: nothing is cleaned up (`enabled` is false). */
    private readonly nnAddress: string,
    private readonly security: ClientSecurity | undefined,
    private readonly store: RmStore,
    private readonly log: Logger,
    private readonly retry: CleanupRetry = { attempts: 4, firstPauseMs: 1_000 },
    private readonly logs: LogKeeping = { cancelDelayMs: 0, retentionMs: 0 },
  ) {
    this.retention = new KeptLogRetention(
      nnAddress,
      security,
      { retentionMs: logs.retentionMs, checkMs: logs.checkMs ?? 3_600_000 },
      systemClock,
      log.child("log-retention"),
    );
  }

  /** False without a namenode: staging directories stay and tokens live until they expire. */
  get enabled(): boolean {
    return this.nnAddress !== "";
  }

  /**
   * What to do at the namenode for the ended job `app` whose delegation token was `dfsToken` ("" on a plaintext
   * cluster): undefined when there is nothing (no namenode, or neither a token nor a DFS staging directory).
   */
  cleanupOf(app: AppRecord, dfsToken: string): JobCleanup | undefined {
    if (!this.enabled || (!dfsToken && !app.stagingDir)) return undefined;
    return {
      token: dfsToken,
      ...(app.stagingDir ? { stagingDir: app.stagingDir } : {}),
      ...(app.stagingDir && !dfsToken ? { user: app.user } : {}),
    };
  }

  /**
   * Does the cleanups an earlier run left pending (its last tries failed, or it stopped first), and starts the sweep
   * of expired kept logs. Never rejects.
   */
  async resume(): Promise<void> {
    if (!this.enabled) return;
    this.retention.start();
    let pending: ({ appId: string } & JobCleanup)[];
    try {
      pending = await this.store.pendingJobCleanups();
    } catch (err) {
      this.log.warn("cannot read the ended jobs left to clean up", { error: errorMessage(err) });
      return;
    }
    if (pending.length > 0) this.log.info("cleaning up jobs that ended before the restart", { jobs: pending.length });
    for (const { appId, ...cleanup } of pending) this.cleanUp(appId, cleanup);
  }

  /** Cleans up after the ended job `appId` in the background (its cleanup is stored as pending by the job's end). */
  cleanUp(appId: string, cleanup: JobCleanup): void {
    if (!this.enabled || this.stopped) return;
    void this.attempt(appId, { ...cleanup }, 1);
  }

  /** A DFS client acting as the job's submitter. */
  private dfsAs(cleanup: JobCleanup): DfsClient {
    return dfsAsSubmitter(this.nnAddress, this.security, cleanup.token, cleanup.user ?? "");
  }

  /** Removes a finished job's DFS staging directory (a missing one is fine). */
  private async removeStaging(stagingDir: string, cleanup: JobCleanup): Promise<void> {
    const dfs = this.dfsAs(cleanup);
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
    this.retention.stop();
    this.retention.close();
    for (const t of this.pauses) clearTimeout(t);
    this.pauses.clear();
    this.client?.close();
    this.client = undefined;
  }

  /**
   * One try; never rejects. `cleanup` loses its staging directory once that is removed. The token is cancelled `cancelDelayMs` after the first try (`waited` then).
   */
  private async attempt(appId: string, cleanup: JobCleanup, n: number, waited = false): Promise<void> {
    if (this.stopped) return;
    let outcome: "cancelled" | "nothing to cancel" | "no token";
    try {
      if (cleanup.stagingDir) {
        await this.removeStaging(cleanup.stagingDir, cleanup);
        delete cleanup.stagingDir;
      }
      if (cleanup.token && !waited && this.logs.cancelDelayMs > 0) {
        const pause = setTimeout(() => {
          this.pauses.delete(pause);
          void this.attempt(appId, cleanup, n, true);
        }, this.logs.cancelDelayMs);
        this.pauses.add(pause);
        return;
      }
      if (cleanup.token) {
        const nn = (this.client ??= makeClient(loadHarvestProto().ClientNamenode, this.nnAddress, this.security));
        await call(nn, nn.cancelDelegationToken, { token: cleanup.token }, 10_000);
        outcome = "cancelled";
      } else outcome = "no token";
    } catch (err) {
      if (this.stopped) return;
      if (isHarvestError(err, "DELEGATION_TOKEN_INVALID")) {
        outcome = "nothing to cancel";
      } else if (n < this.retry.attempts) {
        const pause = setTimeout(
          () => {
            this.pauses.delete(pause);
            void this.attempt(appId, cleanup, n + 1, waited);
          },
          this.retry.firstPauseMs * 2 ** (n - 1),
        );
        this.pauses.add(pause);
        return;
      } else {
        this.log.warn("cannot clean up after a job at the namenode; trying again at the next start", {
          appId,
          nn: this.nnAddress,
          attempts: n,
          error: errorMessage(err),
        });
        return;
      }
    }
    if (outcome !== "no token") this.log.info("job's delegation token cancelled at the namenode", { appId, outcome });
    if (this.stopped) return; // The store may be closed: the next start does it again, which is harmless.
    try {
      await this.store.jobCleanedUp(appId);
    } catch (err) {
      this.log.warn("cannot record a job's cleanup as done; it is done again at the next start", {
        appId,
        error: errorMessage(err),
      });
    }
  }
}

/** A DFS client acting as a job's submitter: with the job's DFS token (the CA only, no certificate), else (plaintext) by name. */
export function dfsAsSubmitter(
  nnAddress: string,
  security: ClientSecurity | undefined,
  token: string | undefined,
  user: string,
): DfsClient {
  return new DfsClient(nnAddress, {
    ...(security?.ca ? { security: { ca: security.ca } } : {}),
    ...(token ? { dfsToken: token } : { user }),
  });
}
