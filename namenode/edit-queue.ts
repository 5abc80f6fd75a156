/**
 * The namespace's mutation queue: mutations run one at a time, each hands its changesets to the store's group commit,
 * and each caller is answered only once the batch holding its last change is synced (namespace.ts explains why).
 */
import { errorMessage, HarvestError } from "../common/errors.js";
import type { Changeset, NamespaceStore } from "./namespace-store.js";

/** Runs mutations in call order and tracks the durability of their changes. */
export class EditQueue {
  private tail: Promise<unknown> = Promise.resolve();
  /** The sync of the running mutation's last change (set by `queue`). */
  private durable: Promise<void> | undefined;
  /** Set when a synced batch failed: memory is ahead of disk and no mutation may proceed. */
  private storeFailure: HarvestError | undefined;

  constructor(private readonly store: NamespaceStore) {}

  /**
   * Runs mutations one at a time, in call order; the next may start as soon as this one is applied in memory, while
   * this one's caller still waits for its batch to be synced.
   */
  run<T>(fn: () => Promise<T>): Promise<T> {
    const body = async (): Promise<{ value: T; durable: Promise<void> | undefined }> => {
      if (this.storeFailure) throw this.storeFailure;
      this.durable = undefined;
      const value = await fn();
      return { value, durable: this.durable };
    };
    const run = this.tail.then(body, body);
    this.tail = run.then(
      () => undefined,
      () => undefined,
    );
    return run.then(async ({ value, durable }) => {
      if (durable) await durable;
      return value;
    });
  }

  /** Queues a changeset for the store's next synced batch (the running mutation's caller awaits it). */
  queue(change: Changeset): void {
    const durable = this.store.commit(change).catch((err: unknown) => {
      // HA: the shared log refused the batch (this term is over) or cannot be reached: callers try the other master.
      if (err instanceof HarvestError && (err.code === "NOT_ACTIVE" || err.code === "COORDINATION_UNAVAILABLE"))
        this.storeFailure ??= err;
      this.storeFailure ??= new HarvestError(
        "INTERNAL",
        `namespace write failed; restart the namenode: ${errorMessage(err)}`,
        { cause: err },
      );
      throw this.storeFailure;
    });
    // Later batches are written after earlier ones, so the last one queued covers this mutation's earlier changes;
    // an earlier one's failure also fails the later (storeFailure), so it may go unobserved here.
    durable.catch(() => undefined);
    this.durable = durable;
  }

  /** Resolves once every mutation queued so far has finished and the store has written everything. */
  async drain(): Promise<void> {
    await this.tail;
    await this.store.idle();
  }
}
