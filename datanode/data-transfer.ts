/**
 * The DataTransfer service: block writes through a pipeline, block reads, and the admin reimage.
 *
 * Write pipeline (one WriteSession per WriteBlock call): the first message is the header; the node creates its rbw
 * replica and, when the header names a downstream, opens WriteBlock to downstream[0] with the rest of the list. Every
 * data packet is forwarded and written locally. The pipeline's last node verifies every packet's checksums before it
 * writes it; the others (with `pipelineVerify: "tail"`, HDFS's rule) do not, and when downstream reports a checksum
 * mismatch they check their own copy on disk, so that the first node whose copy is bad is the one named. With
 * "every-hop", each node verifies a packet before it forwards it. Packet `seq` is acknowledged upstream only when it is
 * written here AND downstream acknowledged it; the last packet only after the local finalize (fsync) too. Acks go out
 * in packet order. The first failure anywhere ends the session with exactly one not-ok ack naming the first node that
 * failed (this node, what downstream named, or downstream[0] when its stream died), and the local replica is dropped.
 * A downstream that is connected but acknowledges nothing for `ackTimeoutMs` (keepalives only catch dead peers) is
 * such a failure too, named as the failed node. When the writer itself goes away (its call is cancelled: it died or
 * its connection broke), or lease recovery stops the write, the replica is kept in rbw/ for lease recovery instead.
 */
import type { BlockAccess } from "../common/block-token.js";
import type * as grpc from "@grpc/grpc-js";
import {
  asHarvestError,
  errorMessage,
  fromGrpcError,
  HarvestError,
  isHarvestError,
  toServiceError,
} from "../common/errors.js";
import type { ErrorCode } from "../common/errors.js";
import { cachedClient, loadHarvestProto, unary } from "../common/grpc.js";
import type { ClientSecurity } from "../common/grpc.js";
import type { Logger } from "../common/log.js";
import { CHUNK_SIZE, checkBlockKey, READ_PIECE_BYTES } from "./replica-files.js";
import { checksumsMatch, firstBadChunk } from "../common/checksum.js";
import type { BlockStore, FilePiece } from "./block-store.js";
import type { BlockKey } from "./replica-files.js";
import type { ReplicaWriter } from "./replica-writer.js";
import { NO_TRANSFER_METRICS } from "./dn-metrics.js";
import type { TransferMetrics } from "./dn-metrics.js";
import { ReadBufferPool } from "./read-buffers.js";
import { drained } from "./stream-util.js";
import type { Drainable } from "./stream-util.js";
import { BlockConnection, dataFrameHeadBytes, packetLength, packetPieces } from "../common/block-transfer.js";
import type { PacketStream } from "../common/block-transfer.js";
import type { DataTransferClient, DataTransferHandlers } from "../proto/generated/harvest/v1/DataTransfer.js";
import type { DatanodeInfo, DatanodeInfoOutput } from "../proto/generated/harvest/v1/DatanodeInfo.js";
import type { ReadBlockRequestOutput } from "../proto/generated/harvest/v1/ReadBlockRequest.js";
import type { ReadChunk } from "../proto/generated/harvest/v1/ReadChunk.js";
import type { ReimageResponse } from "../proto/generated/harvest/v1/ReimageResponse.js";
import type { WriteAck, WriteAckOutput } from "../proto/generated/harvest/v1/WriteAck.js";
import type { WritePacketOutput } from "../proto/generated/harvest/v1/WritePacket.js";
import type { DataPacketOutput } from "../proto/generated/harvest/v1/DataPacket.js";
import type { WriteHeaderOutput } from "../proto/generated/harvest/v1/WriteHeader.js";

/** Largest data packet accepted (the client sends 1 MiB; this bounds memory against a misbehaving sender). */
export const MAX_PACKET_BYTES = 1024 * 1024;
/** Bytes a write session lets wait for the disk before it reads the next packet (backpressure to the upstream). */
const MAX_UNWRITTEN_BYTES = 8 * 1024 * 1024;

/**
 * Reads served at once up to which each reads a piece ahead. Beyond it the readers themselves keep the disk and the
 * sockets busy, and a piece ahead for each would only add to the datanode's memory (16 readers of 512 KiB pieces).
 */
const READ_AHEAD_MAX_READERS = 4;
/**
 * Bytes of a zero-copy read sent per native call (one thread each, datanode/zero-copy.ts): 8 pieces of 512 KiB. The
 * primary's load is checked between calls, so a busy primary stops a read within a few milliseconds of data.
 */
const ZERO_COPY_BATCH_BYTES = 4 * 1024 * 1024;
/**
 * Free read buffers a datanode keeps per piece size: enough for 16 readers with a piece in the socket and one read
 * ahead each at the transfer port's 512 KiB (more come and go as garbage, as every piece did before the pool).
 */
const READ_BUFFERS_KEPT_BYTES = 16 * 1024 * 1024;
/**
 * Bytes of packets read from the upstream but not yet processed before the upstream is paused (backpressure): enough
 * to keep the disk's four direct writes (direct-write.ts) fed while the socket refills. Counted in bytes, not packets,
 * so a sender's packet size does not change what a write session may hold (four of the client's 1 MiB packets).
 */
const MAX_QUEUED_BYTES = 4 * 1024 * 1024;
/**
 * Messages queued before the upstream is paused however small they are: a flood of empty packets costs memory too
 * (the byte bound alone would never pause it). 256 is 4 MiB of 16 KiB packets.
 */
const MAX_QUEUED_MESSAGES = 256;

/**
 * The upstream end of a write, on either transport: a gRPC `WriteBlock` server call or a block transfer connection
 * (block-server.ts). 'data' delivers `WritePacket`s, 'end' the writer's clean end, 'cancelled' the writer vanishing.
 */
export interface WriteUpstream extends Drainable {
  on(event: string, listener: (...args: any[]) => void): unknown;
  isPaused(): boolean;
  pause(): unknown;
  resume(): unknown;
  write(ack: WriteAck): boolean;
  end(): void;
}

/** Where a read's pieces go, on either transport; false from `write`: wait for 'drain'. */
export interface ReadSink extends Drainable {
  /**
   * Sends `piece`; `sent` runs once its bytes are no longer needed (sent, or the sink is gone). `headRoom`, when
   * given, ends with the piece's data and has free room before it, for a frame head (PacketMessage.headRoom).
   */
  write(piece: ReadChunk, sent?: (err?: Error | null) => void, headRoom?: Buffer): boolean;
}

/** Where a zero-copy read's pieces go: each batch is sent from its file before the promise resolves. */
export interface FileReadSink {
  sendFromFile(pieces: readonly FilePiece[], cancelled: AbortSignal): Promise<void>;
}

/** What the service needs from its datanode. */
export interface DataTransferHost {
  readonly datanodeId: string;
  readonly store: BlockStore;
  readonly log: Logger;
  /** Whether the primary tenant is at or above the busy threshold now. */
  isPrimaryBusy(): boolean;
  /** Wipes the storage and tells the namenode (see DataNode.reimage). */
  reimage(): Promise<ReimageResponse>;
  /** Throws DATANODE_BAD_TOKEN unless `token` allows `access` to `blockId` (block access tokens). */
  checkBlockToken(token: string, blockId: number, access: BlockAccess): void;
  /** How this datanode reaches others in a pipeline (its daemon certificate; undefined: plaintext). */
  clientSecurity?: ClientSecurity;
  /**
   * Forward pipelines over the block transfer protocol to a downstream that has a transfer address (else gRPC).
   * @default true
   */
  transferProtocol?: boolean;
  /** A downstream datanode silent this long while a packet waits for its ack fails the pipeline. @default 30000 */
  ackTimeoutMs?: number;
  /**
   * Which nodes of a write pipeline verify a packet's checksums on its way in: "tail", only the last (HDFS's rule; the
   * others check their copy on disk only when downstream reports a mismatch), or "every-hop", each before it forwards.
   * @default "tail"
   */
  pipelineVerify?: PipelineVerify;
  /** Where bytes, blocks, refusals and failures are counted (dn-metrics.ts). @default counts nothing */
  metrics?: TransferMetrics;
}

/** See DataTransferHost.pipelineVerify. */
export type PipelineVerify = "tail" | "every-hop";

/** See DataTransferHost.ackTimeoutMs. */
const DEFAULT_ACK_TIMEOUT_MS = 30_000;

function busyError(datanodeId: string): HarvestError {
  return new HarvestError(
    "DATANODE_PRIMARY_BUSY",
    `datanode ${datanodeId}: its primary tenant is busy; try another replica or later`,
  );
}

/** The DataTransfer handlers of one datanode, and the write sessions in progress. */
export class DataTransferService {
  private readonly sessions = new Set<WriteSession>();
  private readonly clients = new Map<string, DataTransferClient>();
  private reads = 0;
  /** The buffers reads are served from, by piece size (the transfer port's and gRPC's). */
  private readonly readPools = new Map<number, ReadBufferPool>();
  /** The host's metrics, or a stand-in that counts nothing. */
  readonly metrics: TransferMetrics;

  constructor(readonly host: DataTransferHost) {
    this.metrics = host.metrics ?? NO_TRANSFER_METRICS;
  }

  /** Counts a refusal while the primary tenant is busy and returns the error to throw. */
  refuseBusy(operation: "read" | "write"): HarvestError {
    this.metrics.refusedBusy(operation);
    return busyError(this.host.datanodeId);
  }

  /** The pool of buffers for reads in pieces of `pieceBytes`. */
  readBuffers(pieceBytes: number): ReadBufferPool {
    let pool = this.readPools.get(pieceBytes);
    if (!pool) {
      // With room for a transfer frame's head before each piece (SocketReadSink sends the two as one buffer).
      pool = new ReadBufferPool(
        pieceBytes,
        READ_BUFFERS_KEPT_BYTES,
        dataFrameHeadBytes(Math.ceil(pieceBytes / CHUNK_SIZE)),
      );
      this.readPools.set(pieceBytes, pool);
    }
    return pool;
  }

  /** Writes and reads in progress (for heartbeats). */
  get activeTransfers(): number {
    return this.sessions.size + this.reads;
  }

  /** The gRPC handlers. */
  handlers(): DataTransferHandlers {
    return {
      WriteBlock: (call) => this.writeBlock(call),
      ReadBlock: (call) => void this.readBlock(call),
      Reimage: unary(() => this.host.reimage()),
    };
  }

  /**
   * Opens the write to the next datanode of a pipeline: on its block transfer port when it has one (and the protocol
   * is on), else on its gRPC DataTransfer service.
   */
  openDownstream(next: DatanodeInfoOutput): PacketStream {
    if (next.transferAddress && this.host.transferProtocol !== false)
      return BlockConnection.open(next.transferAddress, this.host.clientSecurity);
    return this.clientFor(next.address).writeBlock();
  }

  /** A (cached) client for another datanode's DataTransfer service. */
  clientFor(address: string): DataTransferClient {
    return cachedClient(this.clients, loadHarvestProto().DataTransfer, address, this.host.clientSecurity);
  }

  /**
   * Fails every write in progress (each upstream gets a not-ok ack naming this node). With `keep` (the datanode is
   * stopping), the unfinished replicas stay in rbw/ for lease recovery: their writer may be dying too, and they may
   * hold acknowledged bytes. Resolves once every replica is kept or dropped.
   */
  async abortAll(code: ErrorCode, message: string, keep = false): Promise<void> {
    await Promise.all([...this.sessions].map((s) => s.abort(new HarvestError(code, message), keep)));
  }

  /**
   * Lease recovery: stops the writes of `blockId` in progress here (their upstream gets a not-ok ack) and keeps what
   * they wrote; resolves once the replica is closed.
   */
  async stopWritesOf(blockId: number): Promise<void> {
    for (const s of [...this.sessions])
      if (s.blockId === blockId) await s.stopForRecovery(`block ${blockId} is under lease recovery`);
  }

  /** Closes the clients to other datanodes. */
  close(): void {
    for (const c of this.clients.values()) c.close();
    this.clients.clear();
  }

  /** Serves one write, from a gRPC call or a block transfer connection. */
  startWrite(upstream: WriteUpstream): void {
    const session = new WriteSession(this, upstream, () => this.sessions.delete(session));
    this.sessions.add(session);
    session.start();
  }

  private writeBlock(call: grpc.ServerDuplexStream<WritePacketOutput, WriteAck>): void {
    this.startWrite(call);
  }

  /**
   * Sends a range of a finalized replica to `sink`, piece by piece with its checksums, with back-pressure; stops when
   * `cancelled` aborts. Throws a HarvestError (bad token, busy primary, missing or corrupt replica).
   */
  async serveRead(
    req: ReadBlockRequestOutput,
    sink: ReadSink,
    cancelled: AbortSignal,
    pieceBytes = READ_PIECE_BYTES,
  ): Promise<void> {
    await this.serving(req, cancelled, async (block) => {
      const { host } = this;
      const readAhead = this.reads <= READ_AHEAD_MAX_READERS;
      const buffers = this.readBuffers(pieceBytes);
      for await (const piece of host.store.read(block, req.offset, req.length, pieceBytes, { readAhead, buffers })) {
        if (cancelled.aborted) return;
        // The primary wins mid-read too: the reader moves on to another replica.
        if (host.isPrimaryBusy()) throw this.refuseBusy("read");
        const ok = sink.write(piece, () => buffers.give(piece.data), buffers.roomFor(piece.data));
        this.metrics.bytesRead(piece.data.length);
        if (!ok) await drained(sink, cancelled);
      }
    });
  }

  /**
   * As `serveRead`, with the data sent from the replica's file by `sink` (a zero-copy read, datanode/zero-copy.ts):
   * the datanode reads only the checksums, in batches of ZERO_COPY_BATCH_BYTES, and checks the primary's load before
   * each batch.
   */
  async serveReadFromFile(
    req: ReadBlockRequestOutput,
    sink: FileReadSink,
    cancelled: AbortSignal,
    pieceBytes: number,
  ): Promise<void> {
    await this.serving(req, cancelled, async (block) => {
      const { host } = this;
      const batches = host.store.readForSending(block, req.offset, req.length, pieceBytes, ZERO_COPY_BATCH_BYTES);
      for await (const batch of batches) {
        if (cancelled.aborted) return;
        if (host.isPrimaryBusy()) throw this.refuseBusy("read");
        await sink.sendFromFile(batch, cancelled);
        for (const piece of batch) this.metrics.bytesRead(piece.length, true);
      }
    });
  }

  /**
   * Checks a read's block, token and the primary's load, and counts it as a read in progress while `send` sends it
   * (and as a block read once sent, unless cancelled).
   */
  private async serving(
    req: ReadBlockRequestOutput,
    cancelled: AbortSignal,
    send: (block: BlockKey) => Promise<void>,
  ): Promise<void> {
    const { host } = this;
    this.reads++;
    try {
      const block = checkBlockKey(req.block);
      host.checkBlockToken(req.blockToken, block.blockId, "READ");
      if (host.isPrimaryBusy()) throw this.refuseBusy("read");
      await send(block);
      if (!cancelled.aborted) this.metrics.blockRead();
    } catch (err) {
      if (!isHarvestError(err)) host.log.warn("read failed", { error: errorMessage(err) });
      throw err;
    } finally {
      this.reads--;
    }
  }

  /**
   * A short-circuit read (block-server.ts, for a client on this server): where a finalized replica's files are, once
   * the token allows reading the block and the primary tenant is not busy. The client reads and verifies the files.
   */
  grantLocalRead(req: ReadBlockRequestOutput): { dataPath: string; metaPath: string; numBytes: number } {
    const block = checkBlockKey(req.block);
    this.host.checkBlockToken(req.blockToken, block.blockId, "READ");
    if (this.host.isPrimaryBusy()) throw this.refuseBusy("read");
    return this.host.store.localFiles(block);
  }

  private async readBlock(call: grpc.ServerWritableStream<ReadBlockRequestOutput, ReadChunk>): Promise<void> {
    const cancelled = new AbortController();
    call.on("cancelled", () => cancelled.abort());
    try {
      await this.serveRead(call.request, call, cancelled.signal);
      if (!cancelled.signal.aborted) call.end();
    } catch (err) {
      if (!cancelled.signal.aborted) call.emit("error", toServiceError(err));
    }
  }
}

interface PendingAck {
  seq: number;
  last: boolean;
  /** Written here (for the last packet: finalized). */
  local: boolean;
  /** Acknowledged by downstream (true at once when there is none). */
  down: boolean;
}

/** One WriteBlock call. Packets are processed one at a time in arrival order; acks leave in packet order. */
class WriteSession {
  private readonly log: Logger;
  private block: BlockKey | undefined;
  private downstream: DatanodeInfoOutput[] = [];
  private writer: ReplicaWriter | undefined;
  private down: PacketStream | undefined;
  private readonly pending: PendingAck[] = [];
  private lastSeq = -1;
  private sawLast = false;
  /** Downstream acknowledged the last packet: it has the whole replica on disk. */
  private downstreamDone = false;
  /** Downstream sent its not-ok ack: its stream's end, errors and silence say nothing more. */
  private downstreamFailed = false;
  private nextOffset = 0;
  /** Aborted when the session is over (completed, failed or cancelled). */
  private readonly over = new AbortController();
  private chain: Promise<void> = Promise.resolve();
  /** Bytes of packet data, and messages, read from the upstream and not yet processed. */
  private queuedBytes = 0;
  private queuedMessages = 0;
  /** Armed while a forwarded packet waits for downstream's ack; fails the pipeline when it fires. */
  private ackTimer: NodeJS.Timeout | undefined;
  /** Settles once the replica is kept or dropped after a failure. */
  private settled: Promise<void> = Promise.resolve();

  constructor(
    private readonly svc: DataTransferService,
    private readonly call: WriteUpstream,
    private readonly onClose: () => void,
  ) {
    this.log = svc.host.log;
  }

  private get self(): string {
    return this.svc.host.datanodeId;
  }

  /** The block being written (0 before the header). */
  get blockId(): number {
    return this.block?.blockId ?? 0;
  }

  /** Ends the write with a not-ok ack naming this node and keeps the replica for lease recovery. */
  async stopForRecovery(why: string): Promise<void> {
    this.failWith("DATANODE_PIPELINE_FAILED", why, this.self, true);
    await this.settled;
  }

  start(): void {
    const { call } = this;
    call.on("data", (msg: WritePacketOutput) => {
      if (this.over.signal.aborted) return;
      const data = msg.data as (DataPacketOutput & { pieces?: Buffer[] }) | null | undefined;
      // Counted before the packet is checked: a malformed one (no data at all) counts as nothing.
      const bytes = data?.pieces ? packetLength(data) : (data?.data?.length ?? 0);
      this.queuedBytes += bytes;
      this.queuedMessages += 1;
      if (this.queueFull()) call.pause();
      this.enqueue(() => this.onPacket(msg), bytes);
    });
    call.on("end", () => this.enqueue(() => this.onUpstreamEnd()));
    // The writer went away mid-block (maybe it died): what it wrote is kept for lease recovery.
    call.on("cancelled", () => {
      if (!this.over.signal.aborted) this.svc.metrics.writeFailed("CANCELLED");
      this.finish("the writer cancelled the write", true);
    });
    // Our own call.emit('error') is the only source; grpc-js turns it into the call's status.
    call.on("error", () => undefined);
  }

  /**
   * Runs `step` after every step queued before it. A message's step (given its `bytes`) leaves the queue's counts when
   * it is done.
   */
  private enqueue(step: () => Promise<void>, bytes?: number): void {
    this.chain = this.chain
      .then(() => (this.over.signal.aborted ? undefined : step()))
      .catch((err: unknown) => this.fail(err, this.self))
      .finally(() => {
        if (bytes !== undefined) {
          this.queuedBytes -= bytes;
          this.queuedMessages -= 1;
        }
        if (this.call.isPaused() && (!this.queueFull() || this.over.signal.aborted)) this.call.resume();
      });
  }

  private queueFull(): boolean {
    return this.queuedBytes >= MAX_QUEUED_BYTES || this.queuedMessages >= MAX_QUEUED_MESSAGES;
  }

  private async onPacket(msg: WritePacketOutput): Promise<void> {
    if (msg.header) {
      if (this.block) throw protocolError("a second header on one WriteBlock stream");
      return this.openPipeline(msg.header);
    }
    if (!msg.data) throw protocolError("an empty WritePacket (neither header nor data)");
    if (!this.block || !this.writer) throw protocolError("data before the header");
    if (this.sawLast) throw protocolError("data after the last packet");
    await this.writePacket(msg.data, this.writer);
  }

  private async openPipeline(header: WriteHeaderOutput): Promise<void> {
    const block = checkBlockKey(header.block);
    this.svc.host.checkBlockToken(header.blockToken, block.blockId, "WRITE");
    if (this.svc.host.isPrimaryBusy()) throw this.svc.refuseBusy("write");
    for (const d of header.downstream) {
      if (!d.datanodeId || !d.address)
        throw protocolError("every downstream datanode needs a datanode_id and an address");
    }
    this.block = block;
    this.downstream = header.downstream;
    this.writer = await this.svc.host.store.createRbw(block, { replaceKept: header.transfer });
    const next = this.downstream[0];
    if (!next) return;
    const down = this.svc.openDownstream(next);
    this.down = down;
    down.on("data", (ack: WriteAckOutput) => this.onDownstreamAck(ack, next));
    down.on("error", (err: Error) => {
      if (this.downstreamDone || this.downstreamFailed) return;
      const h = fromGrpcError(err);
      this.fail(
        new HarvestError("DATANODE_PIPELINE_FAILED", `downstream ${next.datanodeId} failed: ${h.code}: ${h.message}`),
        next.datanodeId,
      );
    });
    down.on("end", () => {
      // Downstream closes once it acknowledged the last packet, possibly before our own finalize is done.
      if (!this.over.signal.aborted && !this.downstreamDone && !this.downstreamFailed)
        this.fail(
          new HarvestError("DATANODE_PIPELINE_FAILED", `downstream ${next.datanodeId} ended the stream early`),
          next.datanodeId,
        );
    });
    const rest: DatanodeInfo[] = this.downstream.slice(1);
    // The token travels down the pipeline: every replica checks it.
    down.write({
      header: {
        block,
        downstream: rest,
        clientName: header.clientName,
        blockToken: header.blockToken,
        transfer: header.transfer,
      },
    });
    this.log.debug("pipeline open", { blockId: block.blockId, downstream: next.datanodeId });
  }

  private async writePacket(p: DataPacketOutput & { pieces?: Buffer[] }, writer: ReplicaWriter): Promise<void> {
    if (!(Number.isSafeInteger(p.seq) && p.seq > this.lastSeq))
      throw protocolError(`packet seq ${p.seq} does not follow ${this.lastSeq}`);
    // From the transfer port the data comes as the socket's chunks that hold it: checked, forwarded and written as
    // they are.
    const pieces = packetPieces(p);
    const length = packetLength(p);
    if (length > MAX_PACKET_BYTES) throw protocolError(`packet of ${length} bytes exceeds ${MAX_PACKET_BYTES}`);
    if (this.svc.host.isPrimaryBusy()) throw this.svc.refuseBusy("write");
    if (p.offsetInBlock !== this.nextOffset)
      throw protocolError(`packet at offset ${p.offsetInBlock}, expected ${this.nextOffset}`);
    if (length > 0 && this.nextOffset % CHUNK_SIZE !== 0)
      throw protocolError(`data after a partial chunk at offset ${this.nextOffset}`);
    // The last node verifies every packet before it writes it (one native CRC of the packet). An upstream node of a
    // "tail" pipeline forwards and writes it unverified: the last node's ack vouches for it, the stored checksums are
    // the writer's (a bad chunk is still found on a read), and a failed block leaves no replica behind.
    if (this.verifiesOnArrival) {
      const bad = badChunk(pieces, p.checksums);
      if (bad >= 0) throw this.checksumMismatch(p.offsetInBlock, bad);
    }
    this.lastSeq = p.seq;
    this.nextOffset = p.offsetInBlock + length;
    const entry: PendingAck = { seq: p.seq, last: p.last, local: false, down: !this.down };
    this.pending.push(entry);
    if (p.last) this.sawLast = true;
    // Downstream first, so every hop writes while the next one receives (HDFS's pipeline); the ack still waits for
    // both this node's write and downstream's ack.
    let downstreamReady: Promise<void> | undefined;
    if (this.down) {
      this.armAckTimer();
      // A gRPC downstream (the baseline data path) sends the packet as one protobuf message: joined for it.
      const packet = p.pieces && !(this.down instanceof BlockConnection) ? { ...p, data: Buffer.concat(pieces) } : p;
      const ok = this.down.write({ data: packet });
      if (p.last) this.down.end();
      else if (!ok) downstreamReady = drained(this.down, this.over.signal);
    }
    // The local write is accepted at once and lands with the packets that arrive meanwhile (the writer's group
    // commit); its ack goes when it is in the files. Only a backlog of unwritten bytes holds the next packet back.
    const written = writer.write(p.offsetInBlock, pieces, p.checksums, { verified: true });
    const bytes = length;
    if (p.last) {
      await written;
      this.svc.metrics.bytesWritten(bytes);
      // Our fsync runs while downstream does its own; the last ack waits for both.
      await writer.finalize(this.nextOffset);
      entry.local = true;
      this.flush();
    } else {
      written.then(
        () => {
          this.svc.metrics.bytesWritten(bytes);
          entry.local = true;
          this.flush();
        },
        (err: unknown) => this.fail(err, this.self),
      );
      if (writer.bytesAccepted - writer.bytesWritten > MAX_UNWRITTEN_BYTES) await written;
    }
    await downstreamReady;
    // An upstream that does not read its acks is not fed more until it does.
    if (this.call.writableNeedDrain) await drained(this.call, this.over.signal);
  }

  private onDownstreamAck(ack: WriteAckOutput, next: DatanodeInfoOutput): void {
    if (this.over.signal.aborted || this.downstreamFailed) return;
    if (!ack.ok) {
      this.downstreamFailed = true;
      this.clearAckTimer();
      const code = ack.errorCode || "DATANODE_PIPELINE_FAILED";
      const message = ack.errorMessage || "downstream failed";
      const named = ack.failedDatanodeId || next.datanodeId;
      // Downstream got a bad packet that this node forwarded unverified. If this node's copy is bad too, the damage
      // came from upstream: this node is the one to name (as it would be had it verified the packet on arrival), and
      // the nodes above check theirs in turn. The check reads the replica's files once its accepted writes are in
      // them: a failure's cost, and nothing is kept in memory for it meanwhile.
      if (code === "DATANODE_CHECKSUM_MISMATCH" && !this.verifiesOnArrival) {
        void this.badLocalCopy().then((err) =>
          err ? this.failWith(err.code, err.message, this.self) : this.failWith(code, message, named),
        );
        return;
      }
      this.failWith(code, message, named);
      return;
    }
    const head = this.pending.find((e) => !e.down);
    if (!head || head.seq !== ack.seq) {
      this.fail(
        new HarvestError(
          "DATANODE_PIPELINE_FAILED",
          `downstream ${next.datanodeId} acknowledged seq ${ack.seq}, expected ${head?.seq ?? "none"}`,
        ),
        next.datanodeId,
      );
      return;
    }
    head.down = true;
    if (head.last) this.downstreamDone = true;
    // Downstream is alive: the next packet waiting for its ack gets a full timeout from now.
    this.clearAckTimer();
    if (this.pending.some((e) => !e.down)) this.armAckTimer();
    this.flush();
  }

  /** Whether this node verifies each packet as it arrives: the pipeline's last node always, each with "every-hop". */
  private get verifiesOnArrival(): boolean {
    return !this.down || this.svc.host.pipelineVerify === "every-hop";
  }

  /** The checksum error of this node's copy of the replica so far, if a chunk of it is bad (undefined: it is good). */
  private async badLocalCopy(): Promise<HarvestError | undefined> {
    const writer = this.writer;
    // A replica finalized already (its last packet came before downstream's verdict) is checked in current/.
    if (!writer || writer.status === "aborted") return undefined;
    try {
      const { numBytes, verifiedBytes } = await writer.verifiedLength();
      return verifiedBytes < numBytes ? this.checksumMismatch(verifiedBytes, 0) : undefined;
    } catch (err) {
      this.log.warn("could not check the local copy after a downstream checksum mismatch", {
        blockId: this.blockId,
        error: errorMessage(err),
      });
      return undefined;
    }
  }

  /** Counts a packet that failed its checksums here, and the error naming its first bad chunk. */
  private checksumMismatch(offsetInBlock: number, badChunkIndex: number): HarvestError {
    this.svc.metrics.checksumFailed("write");
    return new HarvestError(
      "DATANODE_CHECKSUM_MISMATCH",
      `block ${this.blockId}: checksum mismatch in chunk ${offsetInBlock / CHUNK_SIZE + badChunkIndex}`,
    );
  }

  private armAckTimer(): void {
    const next = this.downstream[0];
    if (this.ackTimer || !next || this.downstreamFailed) return;
    const timeoutMs = this.svc.host.ackTimeoutMs ?? DEFAULT_ACK_TIMEOUT_MS;
    this.ackTimer = setTimeout(() => {
      this.ackTimer = undefined;
      this.fail(
        new HarvestError(
          "DATANODE_PIPELINE_FAILED",
          `downstream ${next.datanodeId} sent no acknowledgement in ${timeoutMs} ms`,
          { details: { datanodeId: next.datanodeId } },
        ),
        next.datanodeId,
      );
    }, timeoutMs);
  }

  private clearAckTimer(): void {
    if (this.ackTimer) clearTimeout(this.ackTimer);
    this.ackTimer = undefined;
  }

  /** Sends every ack whose packet is done here and downstream, in order. */
  private flush(): void {
    while (!this.over.signal.aborted) {
      const head = this.pending[0];
      if (!head || !head.local || !head.down) return;
      this.pending.shift();
      this.call.write({ seq: head.seq, ok: true });
      if (head.last) {
        this.svc.metrics.blockWritten();
        this.svc.host.log.debug("block received", { blockId: this.block?.blockId, bytes: this.nextOffset });
        this.call.end();
        this.finish();
      }
    }
  }

  private async onUpstreamEnd(): Promise<void> {
    // An upstream that hangs up mid-block is kept for lease recovery, like one that vanished (cancelled): when the
    // writer dies, the head datanode cancels its downstream call, and grpc-js may deliver that to the next node as a
    // plain end. Dropping the replica there lost acknowledged bytes on every replica but the head's (found by the
    // lease-recovery test with the head datanode down during recovery: no replica was left to recover).
    if (!this.sawLast)
      this.failWith("DATANODE_PROTOCOL_ERROR", "the stream ended before the last packet", this.self, true);
  }

  /** Ends the session with a not-ok ack naming this node; keeps the replica for lease recovery or drops it. */
  async abort(err: HarvestError, keep: boolean): Promise<void> {
    this.failWith(err.code, err.message, this.self, keep);
    await this.settled;
  }

  /** Ends the session with one not-ok ack naming `failedDatanodeId`, and drops the local replica. */
  fail(err: unknown, failedDatanodeId: string): void {
    const h = asHarvestError(err);
    this.failWith(h.code, h.message, failedDatanodeId);
  }

  private failWith(code: string, message: string, failedDatanodeId: string, keep = false): void {
    if (this.over.signal.aborted) return;
    const seq = this.pending[0]?.seq ?? this.lastSeq;
    this.svc.metrics.writeFailed(code);
    this.log.info("write failed", { blockId: this.block?.blockId, code, message, failedDatanodeId });
    try {
      this.call.write({ seq, ok: false, errorCode: code, errorMessage: message, failedDatanodeId });
      this.call.end();
    } catch {
      // The upstream is gone already.
    }
    this.finish(message, keep);
  }

  /**
   * Releases everything; with a reason, the attempt failed and leaves no replica behind, unless `keep`: then an
   * unfinished replica stays in rbw/ for lease recovery (and a finalized one stays as it is).
   */
  private finish(failure?: string, keep = false): void {
    if (this.over.signal.aborted) return;
    this.over.abort();
    this.clearAckTimer();
    if (this.call.isPaused()) this.call.resume();
    this.onClose();
    if (failure === undefined) return;
    this.down?.cancel();
    const writer = this.writer;
    const block = this.block;
    if (!writer || !block) return;
    const store = this.svc.host.store;
    if (keep) {
      this.settled = writer
        .keepForRecovery()
        .then(() => {
          if (writer.kept) this.log.info("writer gone: replica kept for lease recovery", { blockId: block.blockId });
        })
        .catch((err: unknown) => this.log.warn("could not keep a replica", { error: errorMessage(err) }));
      return;
    }
    // Queued behind any write or finalize in progress; a replica finalized before the failure goes too.
    this.settled = writer
      .abort()
      .then(async () => {
        if (writer.status === "finalized") await store.delete(block);
      })
      .catch((err: unknown) => this.log.warn("could not drop a failed replica", { error: errorMessage(err) }));
  }
}

/** The index of a packet's first chunk that fails its checksum, or -1 (one native call when all is well). */
function badChunk(pieces: Buffer[], checksums: number[]): number {
  if (checksumsMatch(pieces, checksums)) return -1;
  return Math.max(0, firstBadChunk(pieces, checksums));
}

function protocolError(message: string): HarvestError {
  return new HarvestError("DATANODE_PROTOCOL_ERROR", message);
}
