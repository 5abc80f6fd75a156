/**
 * The datanode's Prometheus metrics (`harvest_dn_*`, common/metrics.ts for the conventions): bytes and blocks moved,
 * replications, refusals while the primary tenant is busy, checksum and pipeline failures, and what the store holds.
 * Counters are bumped as things happen (the DataTransfer service through `TransferMetrics`); gauges read the
 * datanode's state when `/metrics` is scraped.
 */
import type { Counter, Registry } from "prom-client";
import { ERROR_CODES } from "../common/errors.js";
import { counter, daemonRegistry, scrapedGauge, subjectGauges } from "../common/metrics.js";
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
  private readonly staleCommands: Counter;

  constructor(datanodeId: string, source: DataNodeMetricsSource) {
    const registry = daemonRegistry("datanode", datanodeId);
    this.registry = registry;
    this.written = counter(
      registry,
      "harvest_dn_bytes_written_total",
      "Bytes received and written to local replicas (client pipelines and re-replication copies)",
    );
    this.read = counter(registry, "harvest_dn_bytes_read_total", "Bytes of replicas sent to readers");
    this.readFromFile = counter(
      registry,
      "harvest_dn_bytes_read_zero_copy_total",
      "Bytes of replicas sent to readers straight from their files by sendfile (zeroCopyReads), part of harvest_dn_bytes_read_total",
    );
    this.blocksWrittenTotal = counter(
      registry,
      "harvest_dn_blocks_written_total",
      "Replicas written through a pipeline to the end (finalized here and acknowledged upstream)",
    );
    this.blocksReadTotal = counter(
      registry,
      "harvest_dn_blocks_read_total",
      "Reads of a replica (or a range of it) served to their end",
    );
    this.replications = counter(
      registry,
      "harvest_dn_replications_sent_total",
      "Replicas copied to other datanodes at the namenode's command",
    );
    this.replicationBytes = counter(
      registry,
      "harvest_dn_replication_bytes_sent_total",
      "Bytes of the replicas copied to other datanodes",
    );
    this.replicationFailures = counter(
      registry,
      "harvest_dn_replication_failures_total",
      "Replications that failed (refused while the primary is busy included); the namenode asks again",
    );
    this.busy = counter(
      registry,
      "harvest_dn_primary_busy_refusals_total",
      "Operations refused because the primary tenant is busy, by operation (read, write, replicate)",
      ["operation"],
    );
    this.checksums = counter(
      registry,
      "harvest_dn_checksum_failures_total",
      "Data that did not match its CRC32C, by operation: write (a packet received) or read (a stored replica)",
      ["operation"],
    );
    this.writeFailures = counter(
      registry,
      "harvest_dn_write_failures_total",
      "Write pipeline sessions on this datanode that failed, by Harvest error code (CANCELLED: the writer left)",
      ["code"],
    );
    this.transferConnections = counter(
      registry,
      "harvest_dn_transfer_connections_total",
      "Connections to the block transfer port, by outcome: write, read, local-read (a short-circuit read granted), or refused (no certificate or token, bad frames)",
      ["outcome"],
    );
    this.staleCommands = counter(
      registry,
      "harvest_dn_stale_epoch_commands_total",
      "Command messages refused because their namenode's term (epoch) is older than one this datanode has seen (HA fencing: an old active's commands)",
    );
    // The store is opened in start(): before that every store gauge reads 0.
    const storeGauge = subjectGauges(registry, () => source.store());
    storeGauge(
      "harvest_dn_replicas",
      "Finalized replicas stored (corrupt ones included until deleted)",
      (s) => s.list().length,
    );
    storeGauge(
      "harvest_dn_trash_bytes",
      "Bytes of deleted replicas not yet freed (paced deletions; counted as used space until freed)",
      (s) => s.trashBytes,
    );
    storeGauge("harvest_dn_corrupt_replicas", "Replicas found corrupt and not deleted yet", (s) => s.corrupt().length);
    storeGauge("harvest_dn_used_bytes", "Bytes the replicas take (finalized and being written)", (s) => s.usedBytes());
    storeGauge("harvest_dn_capacity_bytes", "Bytes this datanode may fill", (s) => s.capacityBytes);
    storeGauge(
      "harvest_dn_kept_replicas",
      "Unfinished replicas kept in rbw/ for the namenode's lease recovery",
      (s) => s.keptReplicas().length,
    );
    scrapedGauge(registry, "harvest_dn_active_transfers", "Pipeline writes, reads and replications in progress", () =>
      source.activeTransfers(),
    );
    scrapedGauge(
      registry,
      "harvest_dn_primary_busy",
      "1 while the primary tenant is at or above the busy threshold (reads and writes refused), else 0",
      () => (source.primaryBusy() ? 1 : 0),
    );
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

  /** A namenode's commands were refused: their epoch is older than one already seen. */
  staleEpochCommands(): void {
    this.staleCommands.inc();
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
