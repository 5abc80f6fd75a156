/**
 * Decommissioning (the NamenodeAdmin service, admins only): the policy is the replication monitor's (decommission.ts);
 * this part checks which datanodes are asked for, persists the records before answering, and reports the drains
 * (GetDecommissionStatus).
 */
import type * as grpc from "@grpc/grpc-js";
import type { Clock } from "../common/clock.js";
import { errorMessage, HarvestError } from "../common/errors.js";
import { unary } from "../common/grpc.js";
import type { Logger } from "../common/log.js";
import type { DatanodeAdminStatus } from "../proto/generated/harvest/v1/DatanodeAdminStatus.js";
import type { DecommissionRequestOutput } from "../proto/generated/harvest/v1/DecommissionRequest.js";
import type { DecommissionStatusResponse } from "../proto/generated/harvest/v1/DecommissionStatusResponse.js";
import type { BlockManager } from "./block-manager.js";
import type { DatanodeTracker } from "./datanode-tracker.js";
import type { NamespaceStore } from "./namespace-store.js";
import type { ReplicationMonitor } from "./policy/replication-monitor.js";

/** What decommissioning uses of the namenode. */
export interface DecommissionAdminHost {
  clock: Clock;
  log: Logger;
  store: NamespaceStore;
  blocks: BlockManager;
  monitor: ReplicationMonitor;
  tracker: DatanodeTracker;
}

/** The namenode's decommissioning handlers and the persisted admin states. */
export class DecommissionAdmin {
  /** Decommission records are written one after another, each with the state current when it runs (latest wins). */
  private writesValue: Promise<void> = Promise.resolve();
  private readonly clock: Clock;
  private readonly log: Logger;
  private readonly store: NamespaceStore;
  private readonly blocks: BlockManager;
  private readonly monitor: ReplicationMonitor;
  private readonly tracker: DatanodeTracker;

  constructor(host: DecommissionAdminHost) {
    ({
      clock: this.clock,
      log: this.log,
      store: this.store,
      blocks: this.blocks,
      monitor: this.monitor,
      tracker: this.tracker,
    } = host);
  }

  /** Settles once every admin-state write queued so far has (stop awaits it before closing the store). */
  get writes(): Promise<void> {
    return this.writesValue;
  }

  /** The NamenodeAdmin service; `requireAdmin` refuses a caller who is not an admin. */
  service(
    requireAdmin: (c: grpc.ServerUnaryCall<unknown, unknown>, action: string) => void,
  ): grpc.UntypedServiceImplementation {
    return {
      Decommission: unary((req: DecommissionRequestOutput, c) => {
        requireAdmin(c, "decommission datanodes");
        return this.decommission(req.datanodeIds, req.deadlineMs);
      }),
      Recommission: unary((req: { datanodeIds: string[] }, c) => {
        requireAdmin(c, "recommission datanodes");
        return this.recommission(req.datanodeIds);
      }),
      GetDecommissionStatus: unary((req: { datanodeIds: string[] }, c) => {
        requireAdmin(c, "read the decommission status");
        return this.adminReport(
          req.datanodeIds.length > 0 ? this.knownDatanodes(req.datanodeIds) : this.allDatanodeIds(),
        );
      }),
    };
  }

  /** The datanodes the namenode knows: registered since its start, or recorded (registered once, or out of service). */
  allDatanodeIds(): string[] {
    const ids = new Set([
      ...this.tracker.datanodes.keys(),
      ...this.tracker.records.keys(),
      ...this.monitor.outOfService(),
    ]);
    return [...ids].sort();
  }

  /** The requested ids, deduplicated and sorted; any unknown one fails the call before anything changes. */
  knownDatanodes(ids: readonly string[]): string[] {
    if (ids.length === 0)
      throw new HarvestError("INVALID_ARGUMENT", "name at least one datanode", { details: { field: "datanodeIds" } });
    const unknown = ids.filter(
      (id) =>
        !this.tracker.datanodes.has(id) && !this.tracker.records.has(id) && this.monitor.adminState(id) === "NORMAL",
    );
    if (unknown.length > 0)
      throw new HarvestError(
        "NAMENODE_DATANODE_NOT_FOUND",
        `unknown datanode${unknown.length > 1 ? "s" : ""} ${unknown.map((id) => JSON.stringify(id)).join(", ")}: ` +
          "the namenode knows only datanodes that have registered with it (see GetDatanodes)",
        { details: { datanodeId: unknown[0]!, unknown: unknown.join(",") } },
      );
    return [...new Set(ids)].sort();
  }

  /** Starts (or asks again) draining the datanodes; answers once their records are persisted. */
  async decommission(datanodeIds: readonly string[], deadlineMs: number): Promise<DecommissionStatusResponse> {
    const ids = this.knownDatanodes(datanodeIds);
    if (!(Number.isSafeInteger(deadlineMs) && deadlineMs >= 0))
      throw new HarvestError("INVALID_ARGUMENT", "deadline_ms must be ms since the epoch, or 0 for none", {
        details: { field: "deadlineMs" },
      });
    const now = this.clock.nowMs();
    for (const id of ids) {
      const entry = this.tracker.datanodes.get(id);
      // A datanode that registered but has not reported yet holds blocks the namenode does not know of yet.
      const awaitReport = entry?.state === "LIVE" && !entry.blockReported;
      const started = this.monitor.decommission(id, this.blocks.blocksOn(id), { nowMs: now, deadlineMs, awaitReport });
      const status = this.monitor.decommissionStatus(id, now);
      this.log.info(started ? "decommission started" : "decommission asked again", {
        datanodeId: id,
        state: status?.state,
        deadlineMs: status?.deadlineMs,
        blocks: status?.blocks,
        blocksNeedingCopies: status?.blocksNeedingCopies,
      });
    }
    await Promise.all(ids.map((id) => this.persistAdminState(id)));
    return this.adminReport(ids);
  }

  /** Puts the datanodes back in service; answers once their records are persisted. */
  async recommission(datanodeIds: readonly string[]): Promise<DecommissionStatusResponse> {
    const ids = this.knownDatanodes(datanodeIds);
    for (const id of ids)
      if (this.monitor.recommission(id, this.blocks.blocksOn(id)))
        this.log.info("datanode back in service", { datanodeId: id });
    await Promise.all(ids.map((id) => this.persistAdminState(id)));
    return this.adminReport(ids);
  }

  /**
   * Writes a datanode's admin state as it is when the write runs (its record, or none when NORMAL), after every
   * earlier such write: LevelDB does not order concurrent writes, and the last one must hold the latest state.
   * Rejects (and logs) if the write failed.
   */
  persistAdminState(datanodeId: string): Promise<void> {
    const write = this.writesValue.then(async () => {
      const record = this.monitor.decommissionRecord(datanodeId);
      if (record) await this.store.putDecommission(record);
      else await this.store.deleteDecommission(datanodeId);
    });
    this.writesValue = write.catch((err: unknown) =>
      this.log.error("could not persist a datanode's admin state", { datanodeId, error: errorMessage(err) }),
    );
    return write;
  }

  /** The admin status of the datanodes (GetDecommissionStatus). */
  adminReport(ids: readonly string[]): DecommissionStatusResponse {
    const now = this.clock.nowMs();
    return { datanodes: ids.map((id) => this.adminStatus(id, now)) };
  }

  private adminStatus(datanodeId: string, nowMs: number): DatanodeAdminStatus {
    const liveness = this.tracker.datanodes.get(datanodeId)?.state ?? "UNKNOWN";
    const s = this.monitor.decommissionStatus(datanodeId, nowMs);
    if (!s) return { datanodeId, state: "NORMAL", blocks: this.blocks.replicaCount(datanodeId), liveness };
    let message = "";
    if (s.deadlinePassed) message = `deadline passed with ${s.blocksNeedingCopies} blocks not yet copied`;
    else if (s.awaitingReport) message = "waiting for the datanode's first block report";
    else if (s.state === "DECOMMISSIONED" && s.blocksNeedingCopies > 0)
      message = `decommissioned, but ${s.blocksNeedingCopies} of its blocks lack replicas elsewhere again`;
    return {
      datanodeId,
      state: s.state,
      deadlineMs: s.deadlineMs,
      blocks: s.blocks,
      blocksNeedingCopies: s.blocksNeedingCopies,
      startedMs: s.startedMs,
      finishedMs: s.finishedMs,
      deadlinePassed: s.deadlinePassed,
      liveness,
      awaitingBlockReport: s.awaitingReport,
      message,
    };
  }
}
