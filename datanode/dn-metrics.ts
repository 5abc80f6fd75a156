/**
 * The datanode's Prometheus metrics (`harvest_dn_*`, common/metrics.ts for the conventions): bytes and blocks moved,
 * replications, refusals while the primary tenant is busy, checksum and pipeline failures, and what the store holds.
 * Counters are bumped as things happen (the DataTransfer service through `TransferMetrics`); gauges read the
 * datanode's state when `/metrics` is scraped.
 */
import { Counter, Gauge } from "prom-client";
import type { Registry } from "prom-client";
import { ERROR_CODES } from "../common/errors.js";
import { daemonRegistry } from "../common/metrics.js";
import type { BlockStore } from "./block-store.js";

/** What a datanode refuses while its primary tenant is busy. */
export type BusyOperation = "read" | "write" | "replicate";

/** What the DataTransfer service counts (data-transfer.ts); a no-op stand-in serves tests without metrics. */
export interface TransferMetrics {
  /** Bytes of a write packet verified and written to the local replica. */
  bytesWritten(bytes: number): void;
  /** A replica was written through a pipeline to the end (finalized here and acknowledged upstream). */
  blockWritten(): void;
  /** Bytes sent to a reader; `fromFile`: by sendfile, straight from the replica's file (zeroCopyReads). */
  bytesRead(bytes: number, fromFile?: boolean): void;
  /** A read was served to its end. */
  blockRead(): void;
  /** An operation was refused because the primary tenant is busy. */
  refusedBusy(operation: BusyOperation): void;
  /** Data did not match its CRC32C: a packet received (write) or a stored replica (read). */
  checksumFailed(operation: "read" | "write"): void;
  /** A write session on this datanode failed, with its Harvest error code (or CANCELLED: the writer went away). */
  writeFailed(code: string): void;
  /**
   * A connection to the block transfer port began a write or a read, was granted a short-circuit read (local-read), or
   * was refused (bad peer or bad frames).
   */
  transferConnection(outcome: "write" | "read" | "local-read" | "refused"): void;
}

/** What the gauges read at each scrape. */
export interface DataNodeMetricsSource {
  /** The block store; undefined before the datanode has opened it. */
  store(): BlockStore | undefined;
  /** Pipeline writes, reads and replications in progress. */
  activeTransfers(): number;
  /** Whether the primary tenant is at or above the busy threshold. */
  primaryBusy(): boolean;
}

/** A datanode's metrics, in a registry of their own (with the process and gRPC server metrics). */
export class DataNodeMetrics implements TransferMetrics {
  /** The registry `/metrics` serves; also given to the gRPC server (createServer). */
  readonly registry: Registry;
  private readonly written: Counter;
  private readonly read: Counter;
  private readonly readFromFile: Counter;
  private readonly blocksWrittenTotal: Counter;
  private readonly blocksReadTotal: Counter;
  private readonly replications: Counter;
  private readonly replicationBytes: Counter;
  private readonly replicationFailures: Counter;
  private readonly busy: Counter<"operation">;
  private readonly checksums: Counter<"operation">;
  private readonly writeFailures: Counter<"code">;
  private readonly transferConnections: Counter<"outcome">;

  constructor(datanodeId: string, source: DataNodeMetricsSource) {
    const registry = daemonRegistry("datanode", datanodeId);
    this.registry = registry;
    const registers = [registry];
    this.written = new Counter({
      name: "harvest_dn_bytes_written_total",
      help: "Bytes received and written to local replicas (client pipelines and re-replication copies)",
      registers,
    });
    this.read = new Counter({
      name: "harvest_dn_bytes_read_total",
      help: "Bytes of replicas sent to readers",
      registers,
    });
    this.readFromFile = new Counter({
      name: "harvest_dn_bytes_read_zero_copy_total",
      help: "Bytes of replicas sent to readers straight from their files by sendfile (zeroCopyReads), part of harvest_dn_bytes_read_total",
      registers,
    });
    this.blocksWrittenTotal = new Counter({
      name: "harvest_dn_blocks_written_total",
      help: "Replicas written through a pipeline to the end (finalized here and acknowledged upstream)",
      registers,
    });
    this.blocksReadTotal = new Counter({
      name: "harvest_dn_blocks_read_total",
      help: "Reads of a replica (or a range of it) served to their end",
      registers,
    });
    this.replications = new Counter({
      name: "harvest_dn_replications_sent_total",
      help: "Replicas copied to other datanodes at the namenode's command",
      registers,
    });
    this.replicationBytes = new Counter({
      name: "harvest_dn_replication_bytes_sent_total",
      help: "Bytes of the replicas copied to other datanodes",
      registers,
    });
    this.replicationFailures = new Counter({
      name: "harvest_dn_replication_failures_total",
      help: "Replications that failed (refused while the primary is busy included); the namenode asks again",
      registers,
    });
    this.busy = new Counter({
      name: "harvest_dn_primary_busy_refusals_total",
      help: "Operations refused because the primary tenant is busy, by operation (read, write, replicate)",
      labelNames: ["operation"],
      registers,
    });
    this.checksums = new Counter({
      name: "harvest_dn_checksum_failures_total",
      help: "Data that did not match its CRC32C, by operation: write (a packet received) or read (a stored replica)",
      labelNames: ["operation"],
      registers,
    });
    this.writeFailures = new Counter({
      name: "harvest_dn_write_failures_total",
      help: "Write pipeline sessions on this datanode that failed, by Harvest error code (CANCELLED: the writer left)",
      labelNames: ["code"],
      registers,
    });
    this.transferConnections = new Counter({
      name: "harvest_dn_transfer_connections_total",
      help: "Connections to the block transfer port, by outcome: write, read, local-read (a short-circuit read granted), or refused (no certificate or token, bad frames)",
      labelNames: ["outcome"],
      registers,
    });
    new Gauge({
      name: "harvest_dn_replicas",
      help: "Finalized replicas stored (corrupt ones included until deleted)",
      registers,
      collect(this: Gauge) {
        this.set(source.store()?.list().length ?? 0);
      },
    });
    new Gauge({
      name: "harvest_dn_trash_bytes",
      help: "Bytes of deleted replicas not yet freed (paced deletions; counted as used space until freed)",
      registers,
      collect(this: Gauge) {
        this.set(source.store()?.trashBytes ?? 0);
      },
    });
    new Gauge({
      name: "harvest_dn_corrupt_replicas",
      help: "Replicas found corrupt and not deleted yet",
      registers,
      collect(this: Gauge) {
        this.set(source.store()?.corrupt().length ?? 0);
      },
    });
    new Gauge({
      name: "harvest_dn_used_bytes",
      help: "Bytes the replicas take (finalized and being written)",
      registers,
      collect(this: Gauge) {
        this.set(source.store()?.usedBytes() ?? 0);
      },
    });
    new Gauge({
      name: "harvest_dn_capacity_bytes",
      help: "Bytes this datanode may fill",
      registers,
      collect(this: Gauge) {
        this.set(source.store()?.capacityBytes ?? 0);
      },
    });
    new Gauge({
      name: "harvest_dn_kept_replicas",
      help: "Unfinished replicas kept in rbw/ for the namenode's lease recovery",
      registers,
      collect(this: Gauge) {
        this.set(source.store()?.keptReplicas().length ?? 0);
      },
    });
    new Gauge({
      name: "harvest_dn_active_transfers",
      help: "Pipeline writes, reads and replications in progress",
      registers,
      collect(this: Gauge) {
        this.set(source.activeTransfers());
      },
    });
    new Gauge({
      name: "harvest_dn_primary_busy",
      help: "1 while the primary tenant is at or above the busy threshold (reads and writes refused), else 0",
      registers,
      collect(this: Gauge) {
        this.set(source.primaryBusy() ? 1 : 0);
      },
    });
  }

  /** See TransferMetrics. */
  bytesWritten(bytes: number): void {
    this.written.inc(bytes);
  }

  /** See TransferMetrics. */
  blockWritten(): void {
    this.blocksWrittenTotal.inc();
  }

  /** See TransferMetrics. */
  bytesRead(bytes: number, fromFile = false): void {
    this.read.inc(bytes);
    if (fromFile) this.readFromFile.inc(bytes);
  }

  /** See TransferMetrics. */
  blockRead(): void {
    this.blocksReadTotal.inc();
  }

  /** See TransferMetrics. */
  refusedBusy(operation: BusyOperation): void {
    this.busy.inc({ operation });
  }

  /** See TransferMetrics. */
  checksumFailed(operation: "read" | "write"): void {
    this.checksums.inc({ operation });
  }

  /** See TransferMetrics. */
  writeFailed(code: string): void {
    // A peer's ack names the code: only known ones become label values, so a bad peer cannot add series.
    this.writeFailures.inc({ code: code === "CANCELLED" || code in ERROR_CODES ? code : "OTHER" });
  }

  /** See TransferMetrics. */
  transferConnection(outcome: "write" | "read" | "local-read" | "refused"): void {
    this.transferConnections.inc({ outcome });
  }

  /** A replica of `bytes` was copied to another datanode's pipeline. */
  replicationSent(bytes: number): void {
    this.replications.inc();
    this.replicationBytes.inc(bytes);
  }

  /** A replication failed. */
  replicationFailed(): void {
    this.replicationFailures.inc();
  }
}

/** Counts nothing: for a DataTransfer service built without metrics (tests). */
export const NO_TRANSFER_METRICS: TransferMetrics = {
  bytesWritten: () => undefined,
  blockWritten: () => undefined,
  bytesRead: () => undefined,
  blockRead: () => undefined,
  refusedBusy: () => undefined,
  checksumFailed: () => undefined,
  writeFailed: () => undefined,
  transferConnection: () => undefined,
};
