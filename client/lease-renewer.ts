/** A DfsClient's lease renewer: RenewLease while any of its write streams is open. */
import type { DfsHost } from "./dfs-host.js";
import { errorMessage } from "../common/errors.js";

/**
 * Renews the client's leases (RenewLease, every `leaseRenewMs`) while at least one of its write streams is open: a
 * writer streaming one long block makes no other namenode call for a while. One renewal at a time; a failure is
 * logged and the next tick tries again; the timer is unref'd and stops when the last stream ends.
 */
export class LeaseRenewer {
  private readonly open = new Set<object>();
  private timer: NodeJS.Timeout | undefined;
  private inFlight = false;

  constructor(private readonly client: DfsHost) {}

  /** A write stream opened (its file exists on the namenode). */
  add(stream: object): void {
    this.open.add(stream);
    if (this.timer) return;
    this.timer = setInterval(() => this.renew(), this.client.options.leaseRenewMs);
    this.timer.unref();
  }

  /** A write stream ended (completed, failed or destroyed). */
  remove(stream: object): void {
    this.open.delete(stream);
    if (this.open.size === 0) this.stop();
  }

  /** Stops renewing (the client is closing). */
  stop(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
  }

  private renew(): void {
    if (this.inFlight || this.open.size === 0) return;
    this.inFlight = true;
    this.client
      .nnCall(this.client.namenode.renewLease, { clientName: this.client.options.clientName })
      .then(
        () => this.client.writeStats.leaseRenewals++,
        (err: unknown) =>
          this.client.options.logger.warn("could not renew the lease; will retry", { error: errorMessage(err) }),
      )
      .finally(() => (this.inFlight = false));
  }
}
