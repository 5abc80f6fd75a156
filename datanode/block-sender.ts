/**
 * The writing end of a WriteBlock pipeline: sends a header and then one packet per chunk-aligned piece, with
 * backpressure, and resolves once the last packet is acknowledged (every replica of the pipeline is on disk). A datanode
 * uses it to copy a replica for a `replicate` command; tests use it as a client.
 */
import { ERROR_CODES, fromGrpcError, HarvestError } from "../common/errors.js";
import type { ErrorCode } from "../common/errors.js";
import type { ReadPiece } from "./block-store.js";
import type { BlockKey } from "./replica-files.js";
import { drained, sleep } from "./stream-util.js";
import type { PacketStream } from "../common/block-transfer.js";
import type { DatanodeInfo } from "../proto/generated/harvest/v1/DatanodeInfo.js";
import type { WriteAckOutput } from "../proto/generated/harvest/v1/WriteAck.js";

/** What `sendBlock` needs. */
export interface SendBlockOptions {
  /** Opens the write to the first node of the pipeline (its transfer port, or its gRPC DataTransfer service). */
  open: () => PacketStream;
  /** Id of the first node (named as the failed node when its stream dies). */
  targetId: string;
  block: BlockKey;
  /** The rest of the pipeline after the first node, in order. */
  downstream: DatanodeInfo[];
  clientName: string;
  /** The WRITE block access token the namenode sent with the command (empty when it issues none). */
  blockToken: string;
  /** The block's bytes as contiguous chunk-aligned pieces with the CRC32C of each 512-byte chunk. */
  pieces: AsyncIterable<ReadPiece>;
  /** Bytes per second to send at most; 0 means unthrottled. @default 0 */
  bandwidthBytesPerSec?: number;
  /** A copy of a committed block by re-replication (see WriteHeader.transfer). @default false */
  transfer?: boolean;
  /** Aborting cancels the write. */
  signal?: AbortSignal;
}

/** The result of a successful pipeline write. */
export interface SendBlockResult {
  numBytes: number;
  /** Every acknowledgement received, in order (all ok). */
  acks: WriteAckOutput[];
}

/**
 * Turns a not-ok acknowledgement into DATANODE_PIPELINE_FAILED naming the failed datanode (`details.datanodeId`, the
 * key the client's write stream uses too) and the code it reported (`details.code`); its cause is a HarvestError with
 * that code (DATANODE_PIPELINE_FAILED for a code this build does not know).
 */
export function ackError(ack: WriteAckOutput): HarvestError<"DATANODE_PIPELINE_FAILED"> {
  const code: ErrorCode = ack.errorCode in ERROR_CODES ? (ack.errorCode as ErrorCode) : "DATANODE_PIPELINE_FAILED";
  const message = ack.errorMessage || `pipeline failed at ${ack.failedDatanodeId || "an unknown node"}`;
  return new HarvestError("DATANODE_PIPELINE_FAILED", message, {
    details: { datanodeId: ack.failedDatanodeId, code },
    cause: new HarvestError(code, message),
  });
}

/** Writes a block through a WriteBlock pipeline; rejects with a HarvestError naming the failed datanode. */
export async function sendBlock(options: SendBlockOptions): Promise<SendBlockResult> {
  const stream = options.open();
  const acks: WriteAckOutput[] = [];
  const failure = new AbortController();
  // Held in an object: callbacks set it, and TypeScript would otherwise narrow a local to its initial value.
  const outcome: { failed?: HarvestError } = {};
  let lastSeq: number | undefined;
  let resolveDone!: () => void;
  const done = new Promise<void>((resolve) => (resolveDone = resolve));
  const fail = (err: HarvestError): void => {
    if (outcome.failed || failure.signal.aborted) return;
    outcome.failed = err;
    failure.abort();
    stream.cancel();
    resolveDone();
  };
  const onAbort = (): void => fail(new HarvestError("DATANODE_PIPELINE_FAILED", "the write was cancelled"));
  options.signal?.addEventListener("abort", onAbort, { once: true });
  stream.on("data", (ack: WriteAckOutput) => {
    if (!ack.ok) return fail(ackError(ack));
    acks.push(ack);
    if (lastSeq !== undefined && ack.seq === lastSeq) {
      failure.abort();
      resolveDone();
    }
  });
  const dead = (why: string): void =>
    fail(
      new HarvestError("DATANODE_PIPELINE_FAILED", `datanode ${options.targetId}: ${why}`, {
        details: { datanodeId: options.targetId },
      }),
    );
  stream.on("error", (err: Error) => {
    const h = fromGrpcError(err);
    dead(`${h.code}: ${h.message}`);
  });
  stream.on("end", () => {
    if (lastSeq === undefined || acks.at(-1)?.seq !== lastSeq) dead("stream ended before the last acknowledgement");
  });

  const bandwidth = options.bandwidthBytesPerSec ?? 0;
  const startedMs = Date.now();
  let sent = 0;
  let seq = 0;
  try {
    stream.write({
      header: {
        block: options.block,
        downstream: options.downstream,
        clientName: options.clientName,
        blockToken: options.blockToken,
        transfer: options.transfer ?? false,
      },
    });
    const it = options.pieces[Symbol.asyncIterator]();
    let next = await it.next();
    if (next.done) {
      // An empty block is one empty last packet.
      lastSeq = seq;
      stream.write({ data: { seq, offsetInBlock: 0, data: Buffer.alloc(0), checksums: [], last: true } });
    }
    while (!next.done && !outcome.failed) {
      const piece = next.value;
      next = await it.next();
      const last = next.done === true;
      if (last) lastSeq = seq;
      const ok = stream.write({
        data: { seq, offsetInBlock: piece.offset, data: piece.data, checksums: piece.checksums, last },
      });
      seq++;
      sent += piece.data.length;
      if (!ok) await drained(stream, failure.signal);
      if (bandwidth > 0) await sleep((sent / bandwidth) * 1000 - (Date.now() - startedMs), failure.signal);
    }
    if (!next.done) await it.return?.();
    if (!outcome.failed) stream.end();
  } catch (err) {
    fail(err instanceof HarvestError ? err : new HarvestError("INTERNAL", String(err), { cause: err }));
  }
  await done;
  options.signal?.removeEventListener("abort", onAbort);
  if (outcome.failed) throw outcome.failed;
  return { numBytes: sent, acks };
}
