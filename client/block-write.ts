/** One block's write through a pipeline of datanodes, with the packets kept for a replay after a failover. */
import type { DfsHost } from "./dfs-host.js";
import { chunkChecksums } from "../common/checksum.js";
import type { PacketStream } from "../common/block-transfer.js";
import { detailsOf, fromGrpcError, HarvestError } from "../common/errors.js";
import type { LocatedBlockOutput } from "../proto/generated/harvest/v1/LocatedBlock.js";
import type { WriteAckOutput } from "../proto/generated/harvest/v1/WriteAck.js";

/**
 * A packet of a block being written, as the write stream's ReplayArena keeps it: `data`, and the buffer that ends with
 * it with room for its frame head before (`headRoom`, common/block-transfer.ts), so that a transfer connection sends
 * head and data as one buffer.
 */
export interface KeptPacket {
  data: Buffer;
  headRoom?: Buffer;
}

/**
 * One block's write through a pipeline. Packets go out as data arrives; they are kept (copies in the write stream's
 * ReplayArena) until the block's last packet is acknowledged (every replica on disk), so the block can be replayed to
 * a new pipeline if a datanode fails.
 */
export class BlockWrite {
  readonly packets: KeptPacket[] = [];
  bytes = 0;
  private stream: PacketStream | undefined;
  private failure: HarvestError | undefined;
  private lastAcked: (() => void) | undefined;
  private seq = 0;
  private finished = false;
  /** The last packet is acknowledged: every replica has the block on disk. */
  private done = false;
  private onFailure: ((err: Error) => void) | undefined;
  /** Where each packet in flight ends in the block, by seq (its ack makes that many bytes acknowledged). */
  private readonly packetEnds = new Map<number, number>();

  constructor(
    private readonly client: DfsHost,
    readonly located: LocatedBlockOutput,
    /** Told the bytes of this block every replica acknowledged, packet by packet. */
    private readonly onAcked: (bytesInBlock: number) => void = () => undefined,
  ) {}

  /** Opens the pipeline and replays any packets already taken (after a failover). */
  open(): void {
    const first = this.located.locations[0];
    if (!first) throw new HarvestError("DFS_WRITE_FAILED", "the namenode gave an empty pipeline");
    const stream = this.client.openWrite(first, this.located.blockToken);
    this.stream = stream;
    stream.on("data", (ack: WriteAckOutput) => {
      if (!ack.ok) {
        this.fail(
          new HarvestError(
            "DATANODE_PIPELINE_FAILED",
            `pipeline failed at ${ack.failedDatanodeId || first.datanodeId}: ${ack.errorCode} ${ack.errorMessage}`,
            { details: { datanodeId: ack.failedDatanodeId || first.datanodeId, code: ack.errorCode } },
          ),
        );
      } else {
        const end = this.packetEnds.get(ack.seq);
        this.packetEnds.delete(ack.seq);
        if (end !== undefined) this.onAcked(end);
        if (this.finished && ack.seq === this.seq) {
          this.done = true;
          this.lastAcked?.();
        }
      }
    });
    stream.on("error", (err: Error) => {
      const herr = fromGrpcError(err);
      this.fail(
        new HarvestError("DATANODE_PIPELINE_FAILED", `pipeline to ${first.datanodeId} failed: ${herr.message}`, {
          details: {
            datanodeId: detailsOf(herr, "DATANODE_PIPELINE_FAILED")?.datanodeId ?? first.datanodeId,
            code: herr.code,
          },
          cause: err,
        }),
      );
    });
    stream.on("end", () => {
      if (!this.done)
        this.fail(
          new HarvestError(
            "DATANODE_PIPELINE_FAILED",
            `pipeline to ${first.datanodeId} closed before the block was on disk`,
            { details: { datanodeId: first.datanodeId } },
          ),
        );
    });
    stream.write({
      header: {
        block: this.located.block,
        downstream: this.located.locations.slice(1),
        clientName: this.client.options.clientName,
        blockToken: this.located.blockToken,
      },
    });
    let offset = 0;
    for (const p of this.packets) {
      this.send(p, offset, false);
      offset += p.data.length;
    }
  }

  /** Sends one packet (and keeps it for a replay). Resolves when the transport can take more. */
  async add(packet: KeptPacket): Promise<void> {
    // Keep the packet before anything can fail: a failover replays exactly what was kept.
    this.packets.push(packet);
    const offset = this.bytes;
    this.bytes += packet.data.length;
    this.throwIfFailed();
    if (!this.send(packet, offset, false)) await this.drained();
  }

  /** Sends the last packet and resolves once every replica has the block on disk. */
  finish(): Promise<void> {
    this.throwIfFailed();
    this.finished = true;
    return new Promise((resolve, reject) => {
      this.lastAcked = resolve;
      this.onFailure = reject;
      this.send({ data: Buffer.alloc(0) }, this.bytes, true);
    });
  }

  close(): void {
    this.stream?.end();
  }

  private send({ data, headRoom }: KeptPacket, offset: number, last: boolean): boolean {
    if (!this.stream) return true;
    this.seq += 1;
    this.packetEnds.set(this.seq, offset + data.length);
    return this.stream.write({
      data: { seq: this.seq, offsetInBlock: offset, data, checksums: chunkChecksums(data), last, headRoom },
    });
  }

  private drained(): Promise<void> {
    return new Promise((resolve, reject) => {
      const stream = this.stream;
      if (!stream) return resolve();
      const done = (): void => {
        stream.off("drain", done);
        resolve();
      };
      stream.on("drain", done);
      this.onFailure = reject;
    });
  }

  private fail(err: HarvestError): void {
    if (this.failure) return;
    this.failure = err;
    this.stream?.cancel();
    this.onFailure?.(err);
  }

  private throwIfFailed(): void {
    if (this.failure) throw this.failure;
  }

  /** The datanode to exclude after a failure. */
  get failedDatanode(): string | undefined {
    return detailsOf(this.failure, "DATANODE_PIPELINE_FAILED")?.datanodeId;
  }
}
