/**
 * The writers' leases on open files (HDFS's LeaseManager), by inode id: when each was last renewed, and which files'
 * leases expired into a recovery that is under way. In memory only: a restarted or promoted namenode gives every open
 * file a full lease from its start.
 */
import type { Clock } from "../common/clock.js";

/** Open files' lease renewals and recoveries. */
export class WriterLeases {
  private readonly renewedMs = new Map<number, number>();
  private readonly recovering = new Set<number>();

  constructor(private readonly clock: Clock) {}

  /** The file's lease runs from now (opened, written to, or renewed by its writer). */
  renew(id: number): void {
    this.renewedMs.set(id, this.clock.nowMs());
  }

  /** Starts a lease for a file open now, unless it has one. */
  openIfNew(id: number): void {
    if (!this.renewedMs.has(id)) this.renew(id);
  }

  /** When the file's lease was last renewed (0: never). */
  renewedAt(id: number): number {
    return this.renewedMs.get(id) ?? 0;
  }

  /** The files with a lease. */
  ids(): IterableIterator<number> {
    return this.renewedMs.keys();
  }

  /** Every open file's lease runs from now (a namenode that just became active). */
  renewAll(): void {
    for (const id of this.renewedMs.keys()) this.renew(id);
  }

  /** The files whose lease is older than `timeoutMs` and not already being recovered. */
  expired(timeoutMs: number): number[] {
    const now = this.clock.nowMs();
    return [...this.renewedMs]
      .filter(([id, at]) => now - at >= timeoutMs && !this.recovering.has(id))
      .map(([id]) => id);
  }

  /** The file is closed: no lease. */
  forget(id: number): void {
    this.renewedMs.delete(id);
  }

  /** The file is gone or replaced: no lease, no recovery. */
  release(id: number): void {
    this.renewedMs.delete(id);
    this.recovering.delete(id);
  }

  isRecovering(id: number): boolean {
    return this.recovering.has(id);
  }

  startRecovery(id: number): void {
    this.recovering.add(id);
  }

  endRecovery(id: number): void {
    this.recovering.delete(id);
  }
}
