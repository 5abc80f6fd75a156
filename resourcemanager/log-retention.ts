/**
 * The cluster-wide removal of kept container logs past their retention (YARN's AggregatedLogDeletionService): every
 * `logRetentionCheckMs`, the resource manager lists each home's `.logs` and removes the application directories last
 * written more than `logRetentionHours` ago (common/container-logs.ts), whoever submitted them and whether or not they
 * submit again.
 *
 * On a secure cluster it acts with its own daemon certificate, which the namenode's `userGroups` puts in the log group
 * (the directories are 0770 in it); a home whose logs it may not reach (a namenode without that mapping, or a user who
 * took the group's rights away) is skipped and named in a warning. On a plaintext cluster the namenode trusts a claimed
 * user: it acts as each home's owner. Best effort: a sweep that fails is logged and the next one tries again.
 */
import { DfsClient } from "../client/dfs-client.js";
import type { DfsFileStatus } from "../client/dfs-client.js";
import type { Clock } from "../common/clock.js";
import { expiredLogDirs, userLogRoot } from "../common/container-logs.js";
import { errorMessage, isHarvestError } from "../common/errors.js";
import type { ClientSecurity } from "../common/grpc.js";
import type { Logger } from "../common/log.js";

/** When kept logs expire and how often they are looked for. */
export interface LogRetentionOptions {
  /** Kept logs whose application directory was last written longer ago than this are removed (0: kept). */
  retentionMs: number;
  /** How often the homes are swept (the first sweep runs at start). */
  checkMs: number;
}

/** What one sweep did. */
export interface LogSweepReport {
  /** Application directories removed. */
  removed: number;
  /** Homes with a `.logs` the sweep could not list or clean (permission, or an error). */
  skipped: string[];
}

/** Removes expired kept logs at one namenode, periodically while started. */
export class KeptLogRetention {
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<unknown> | undefined;
  private stopped = false;

  constructor(
    /** The namenode; empty: nothing is kept, nothing swept. */
    private readonly nnAddress: string,
    /** The resource manager's TLS files (a secure cluster), undefined on a plaintext one. */
    private readonly security: ClientSecurity | undefined,
    private readonly options: LogRetentionOptions,
    private readonly clock: Clock,
    private readonly log: Logger,
  ) {}

  /** Whether sweeps run at all (a namenode is known and logs expire). */
  get enabled(): boolean {
    return this.nnAddress !== "" && this.options.retentionMs > 0;
  }

  /** Sweeps now and then every `checkMs`, until stopped. */
  start(): void {
    if (!this.enabled || this.timer || this.stopped) return;
    const tick = (): void => {
      if (this.running || this.stopped) return;
      this.running = this.sweep().finally(() => (this.running = undefined));
    };
    this.timer = setInterval(tick, this.options.checkMs);
    this.timer.unref();
    tick();
  }

  /** Stops the sweeps; one under way ends at its next call. Idempotent. */
  stop(): void {
    this.stopped = true;
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
  }

  /** One sweep over every home under `/user`. Never rejects. */
  async sweep(): Promise<LogSweepReport> {
    const report: LogSweepReport = { removed: 0, skipped: [] };
    const nowMs = this.clock.nowMs();
    let homes: DfsFileStatus[];
    // Plaintext: listing /user (0755) needs no one in particular; each home is swept as its owner.
    const lister = this.security ? undefined : new DfsClient(this.nnAddress);
    try {
      homes = (await (lister ?? this.own()).list("/user")).filter((h) => h.isDir);
    } catch (err) {
      if (!this.stopped && !isHarvestError(err, "NAMENODE_FILE_NOT_FOUND"))
        this.log.warn("cannot list the homes to remove expired container logs", { error: errorMessage(err) });
      return report;
    } finally {
      lister?.close();
    }
    for (const home of homes) {
      if (this.stopped) break;
      const user = home.path.slice("/user/".length);
      const asOwner = this.security ? undefined : new DfsClient(this.nnAddress, { user: home.owner });
      try {
        report.removed += await this.sweepHome(asOwner ?? this.own(), user, nowMs);
      } catch (err) {
        report.skipped.push(user);
        if (!this.stopped)
          this.log.warn("cannot remove a home's expired container logs", { home: home.path, error: errorMessage(err) });
      } finally {
        asOwner?.close();
      }
    }
    if (report.removed > 0)
      this.log.info("kept container logs past their retention removed", { apps: report.removed, homes: homes.length });
    return report;
  }

  /** Removes `user`'s expired application log directories; how many. */
  private async sweepHome(dfs: DfsClient, user: string, nowMs: number): Promise<number> {
    let entries: DfsFileStatus[];
    try {
      entries = await dfs.list(userLogRoot(user));
    } catch (err) {
      if (isHarvestError(err, "NAMENODE_FILE_NOT_FOUND")) return 0;
      throw err;
    }
    const expired = expiredLogDirs(
      entries.map((e) => ({ path: e.path, isDir: e.isDir, mtimeMs: Number(e.mtimeMs) })),
      nowMs,
      this.options.retentionMs,
    );
    let removed = 0;
    for (const dir of expired)
      removed += await dfs.delete(dir, { recursive: true }).then(
        () => 1,
        // Gone meanwhile (its owner, or another resource manager's sweep).
        (err: unknown) => (isHarvestError(err, "NAMENODE_FILE_NOT_FOUND") ? 0 : Promise.reject(err)),
      );
    return removed;
  }

  private ownClient: DfsClient | undefined;

  /** The resource manager's own client (its certificate), kept across sweeps. */
  private own(): DfsClient {
    return (this.ownClient ??= new DfsClient(this.nnAddress, { security: this.security! }));
  }

  /** Closes the kept client (after `stop`). */
  close(): void {
    this.ownClient?.close();
    this.ownClient = undefined;
  }
}
