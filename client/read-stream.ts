/** A DfsClient's read stream: a file's range, verified chunk by chunk, with failover between replicas. */
import type { DfsHost } from "./dfs-host.js";
import { checksumsMatch } from "../common/checksum.js";
import { packetPieces } from "../common/block-transfer.js";
import type { BlockReadStream, ReadPiece } from "../common/block-transfer.js";
import { Readable } from "node:stream";
import { fromGrpcError, HarvestError } from "../common/errors.js";
import type { LocatedBlockOutput } from "../proto/generated/harvest/v1/LocatedBlock.js";
import type { ReadChunkOutput } from "../proto/generated/harvest/v1/ReadChunk.js";
import type { DatanodeInfoOutput } from "../proto/generated/harvest/v1/DatanodeInfo.js";

/** A readable stream of a file (DfsClient.createReadStream). */
export class DfsReadStream extends Readable {
  private blocks: LocatedBlockOutput[] = [];
  private fileLength = 0;
  private position: number;
  private end = 0;
  private reading = false;
  private current: BlockReadStream | undefined;

  constructor(
    private readonly client: DfsHost,
    private readonly path: string,
    offset: number,
    private readonly length: number,
  ) {
    super({ highWaterMark: 1024 * 1024 });
    this.position = offset;
  }

  override _construct(callback: (err?: Error | null) => void): void {
    this.locate()
      .then(() => {
        this.end = this.length > 0 ? Math.min(this.fileLength, this.position + this.length) : this.fileLength;
        callback();
      })
      .catch((err: unknown) => callback(err as Error));
  }

  override _read(): void {
    if (this.current) {
      this.current.resume();
      return;
    }
    if (this.reading) return;
    this.reading = true;
    this.readAll().then(
      () => this.push(null),
      (err: unknown) => this.destroy(err as Error),
    );
  }

  override _destroy(err: Error | null, callback: (err?: Error | null) => void): void {
    this.current?.cancel();
    callback(err);
  }

  private async locate(): Promise<void> {
    const located = await this.client.nnCall(this.client.namenode.getBlockLocations, {
      path: this.path,
      offset: 0,
      length: 0,
    });
    this.blocks = located.blocks;
    this.fileLength = located.fileLength;
  }

  private async readAll(): Promise<void> {
    while (this.position < this.end && !this.destroyed) {
      const index = this.blocks.findIndex(
        (b) => b.offset <= this.position && this.position < b.offset + (b.block?.numBytes ?? 0),
      );
      if (index < 0) throw new HarvestError("DFS_READ_FAILED", `${this.path}: no block covers offset ${this.position}`);
      await this.readBlock(index);
    }
  }

  /** Reads from the current position to the end of block `index` (or of the range), failing over between replicas. */
  private async readBlock(index: number): Promise<void> {
    const failures: string[] = [];
    // An expired token (or one from before a namenode restart) is renewed at once, once per block.
    let tokenRenewed = false;
    for (let round = 0; round < this.client.options.maxReadRounds; round++) {
      let renewNow = false;
      const lb = this.blocks[index];
      if (!lb?.block) throw new HarvestError("DFS_READ_FAILED", `${this.path}: block ${index} vanished`);
      for (const dn of localFirst(lb.locations, this.client.options.writerDatanodeId)) {
        const blockEnd = Math.min(lb.offset + lb.block.numBytes, this.end);
        if (this.position >= blockEnd) return;
        try {
          await this.readReplica(lb, dn, this.position - lb.offset, blockEnd - this.position);
          if (this.position >= blockEnd) return;
        } catch (err) {
          const herr = fromGrpcError(err);
          failures.push(`${dn.datanodeId}: ${herr.code}`);
          this.client.readStats.failovers++;
          if (herr.code === "DATANODE_PRIMARY_BUSY") this.client.readStats.busyRefusals++;
          if (herr.code === "DATANODE_BAD_TOKEN" && !tokenRenewed) {
            tokenRenewed = renewNow = true;
            break;
          }
          if (herr.code === "DATANODE_CORRUPT_BLOCK" || herr.code === "DATANODE_CHECKSUM_MISMATCH") {
            this.client.readStats.corruptReplicas++;
            await this.client
              .nnCall(this.client.namenode.reportBadBlocks, {
                // The READ token it read with: a secure namenode takes a client's report only with one.
                blocks: [
                  { block: lb.block, datanodeId: dn.datanodeId, reason: herr.message, blockToken: lb.blockToken },
                ],
              })
              .catch(() => undefined);
          }
        }
      }
      // Every replica failed this round (busy primaries pass, datanodes come back): wait, ask again.
      if (!renewNow) await new Promise((r) => setTimeout(r, Math.min(1000 * 2 ** round, 8000)));
      await this.locate().catch(() => undefined);
    }
    throw new HarvestError(
      "DFS_READ_FAILED",
      `${this.path}: could not read block ${index} from any replica (${failures.join("; ") || "no live replica"})`,
      { details: { path: this.path } },
    );
  }

  private readReplica(
    lb: LocatedBlockOutput,
    dn: DatanodeInfoOutput,
    offsetInBlock: number,
    length: number,
  ): Promise<void> {
    const address = dn.transferAddress || dn.address;
    return new Promise((resolve, reject) => {
      const stream = this.client.openRead(dn, {
        block: lb.block,
        offset: offsetInBlock,
        length,
        clientName: this.client.options.clientName,
        blockToken: lb.blockToken,
      });
      this.current = stream;
      let wantFrom = lb.offset + offsetInBlock;
      const wantTo = wantFrom + length;
      stream.on("data", (chunk: ReadPiece | ReadChunkOutput) => {
        const parts = packetPieces(chunk);
        try {
          verifyChunk(Number(chunk.offset), parts, chunk.checksums);
        } catch (err) {
          stream.cancel();
          reject(err);
          return;
        }
        // Trim to what is still wanted: a replica resumes chunk-aligned, possibly before our position. The parts are
        // handed on as they came (a transfer connection's socket chunks), none copied.
        let start = lb.offset + Number(chunk.offset);
        let more = true;
        for (const part of parts) {
          const from = Math.max(wantFrom, start);
          const to = Math.min(wantTo, start + part.length);
          if (to > from) {
            wantFrom = to;
            this.position = to;
            more = this.push(part.subarray(from - start, to - start)) && more;
          }
          start += part.length;
        }
        if (!more) stream.pause();
      });
      stream.on("error", (err) => {
        this.current = undefined;
        reject(err);
      });
      stream.on("end", () => {
        this.current = undefined;
        if (wantFrom < wantTo)
          reject(new HarvestError("DFS_READ_FAILED", `replica at ${address} ended ${wantTo - wantFrom} bytes early`));
        else resolve();
      });
    });
  }
}

/** Checks each 512-byte chunk of a read piece (as its consecutive parts) against its CRC32C. */
function verifyChunk(offset: number, parts: readonly Buffer[], checksums: number[]): void {
  if (!checksumsMatch(parts, checksums)) {
    throw new HarvestError("DATANODE_CHECKSUM_MISMATCH", `checksum mismatch in data read at offset ${offset}`);
  }
}

/** A block's replicas with the one on this client's own server (if any) first, the others in the namenode's order. */
function localFirst(locations: DatanodeInfoOutput[], local: string): DatanodeInfoOutput[] {
  const i = local ? locations.findIndex((d) => d.datanodeId === local) : -1;
  return i <= 0 ? locations : [locations[i]!, ...locations.slice(0, i), ...locations.slice(i + 1)];
}
