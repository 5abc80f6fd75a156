/**
 * The block transfer protocol: block data between clients and datanodes on a plain TCP (or TLS) connection of its own,
 * off the RPC layer, as HDFS's DataTransferProtocol. gRPC stays for control (namenode calls, reports, reimage).
 *
 * A connection carries one operation. The opener sends the 4-byte magic `HBT1`, then frames; every frame is
 * `u32 length | u8 kind | body` (length counts kind and body, big-endian):
 *
 * - WRITE_HEADER (opener): a `WritePacket` protobuf holding only its `header` (block, the rest of the pipeline, block
 *   token). Then DATA frames.
 * - READ_REQUEST (opener): a `ReadBlockRequest` protobuf. The datanode answers DATA frames, then END.
 * - DATA: `u48 seq | u48 offset | u8 flags (1: last) | u32 n | n x u32 chunk CRC32C | data`. The data follows the
 *   checksums unframed, so a 64 KiB packet is written to the socket as it is and read back as a slice, never encoded.
 * - ACK (datanode, per write packet, in order): a `WriteAck` protobuf; a not-ok ack ends the write.
 * - ERROR (datanode): JSON `{ code, message, details }`, a Harvest error, then the connection closes.
 * - END (datanode): the read range is complete.
 * - LOCAL_READ (opener on the datanode's own server): a `ReadBlockRequest` protobuf asking to read a finalized replica
 *   from its files (a short-circuit read). The datanode answers one LOCAL_GRANT, JSON `{ dataPath, metaPath, numBytes }`,
 *   or an ERROR, then closes.
 *
 * Back-pressure comes from the socket: a writer waits for 'drain', and a reader pauses the socket while its consumer
 * is full, so nothing is buffered without bound. `BlockConnection` presents the stream interface the gRPC streams had
 * (`write`, `end`, `cancel`, 'data', 'error', 'end', 'drain'), so the pipeline logic is the same on either transport.
 */
import { EventEmitter } from "node:events";
import * as net from "node:net";
import * as tls from "node:tls";
import { readFileSync } from "node:fs";
import { detailsFromWire, HarvestError, isHarvestError, ERROR_CODES } from "./errors.js";
import type { ErrorCode } from "./errors.js";
import { loadHarvestProto } from "./grpc.js";
import { ByteQueue } from "./byte-queue.js";
import { parseHostPort } from "./net-address.js";
import type { ClientTls } from "./tls.js";

/** The first bytes of every connection. */
export const TRANSFER_MAGIC = Buffer.from("HBT1", "latin1");

/** Frame kinds. */
export const FRAME = {
  WRITE_HEADER: 1,
  READ_REQUEST: 2,
  DATA: 3,
  ACK: 4,
  ERROR: 5,
  END: 6,
  LOCAL_READ: 7,
  LOCAL_GRANT: 8,
} as const;
export type FrameKind = (typeof FRAME)[keyof typeof FRAME];

/** Largest frame accepted: a 1 MiB packet with its checksums and header, with room to spare. */
export const MAX_FRAME_BYTES = 1024 * 1024 + 64 * 1024;

const DATA_HEADER_BYTES = 6 + 6 + 1 + 4;

/** A data packet as the pipeline handles it (the shape of the protobuf `DataPacket` and `ReadChunk`). */
export interface DataFrame {
  seq: number;
  offsetInBlock: number;
  last: boolean;
  checksums: number[];
  data: Buffer;
  /**
   * From a FrameReader made with `dataPieces`: the data as slices of the socket chunks that hold it, never joined
   * (`data` is then empty). A datanode verifies, writes and forwards a packet from its pieces: a 64 KiB packet always
   * spans socket reads, and joining it cost a copy and a fresh buffer per packet at every hop.
   */
  pieces?: Buffer[];
}

/** A packet's data as consecutive pieces (`pieces` when it came in pieces, else its `data`). */
export function packetPieces(p: { data: Buffer; pieces?: Buffer[] }): Buffer[] {
  return p.pieces ?? [p.data];
}

/** The bytes of a packet's data. */
export function packetLength(p: { data: Buffer; pieces?: Buffer[] }): number {
  if (!p.pieces) return p.data.length;
  let n = 0;
  for (const piece of p.pieces) n += piece.length;
  return n;
}

/** What a writer sends on a write stream (the `WritePacket` message of the gRPC service). */
export interface PacketMessage {
  header?: object;
  data?: {
    seq: number;
    offsetInBlock: number;
    data: Buffer;
    pieces?: Buffer[];
    checksums: number[];
    last: boolean;
    /**
     * A buffer that ends with `data` (the same memory) and has at least `dataFrameHeadBytes` free before it: a
     * transfer connection writes the frame's head there and sends head and data as one buffer. TLS encrypts a single
     * buffer as it is, while a head and data written together are first joined into a new buffer (a copy of every
     * byte). The room, like the data, must stay as it is until the write is done (a plaintext socket may send from
     * it later); the gRPC transport ignores it.
     */
    headRoom?: Buffer;
  };
}

/**
 * The writing end of a block write, on either transport: a gRPC `WriteBlock` client stream or a `BlockConnection`.
 * 'data' delivers acks, 'error' a failure, 'end' the peer closing.
 */
export interface PacketStream {
  write(msg: PacketMessage): boolean;
  end(): void;
  cancel(): void;
  readonly writableNeedDrain: boolean;

  on(event: string, listener: (...args: any[]) => void): unknown;

  off(event: string, listener: (...args: any[]) => void): unknown;
}

/**
 * A replica range being read, on any transport (a `BlockConnection` read, a gRPC `ReadBlock` call, a client's
 * short-circuit read of the files): 'data' delivers pieces with their checksums (`ReadPiece`), then 'end' (or
 * 'error').
 */
export interface BlockReadStream {
  on(event: string, listener: (...args: any[]) => void): unknown;
  pause(): unknown;
  resume(): unknown;
  cancel(): void;
}

/**
 * One piece of a read as a `BlockReadStream` delivers it: the data at `offset` in the block and the CRC32C of each of
 * its chunks. The data is `data`, or, from a transfer connection, the consecutive `pieces` that hold it (`data` then
 * empty): `packetPieces` gives either as a list.
 */
export interface ReadPiece {
  offset: number;
  data: Buffer;
  pieces?: Buffer[];
  checksums: number[];
}

/** One decoded frame. */
export type Frame =
  | { kind: typeof FRAME.DATA; packet: DataFrame }
  | { kind: typeof FRAME.ERROR; error: HarvestError }
  | { kind: typeof FRAME.END }
  | {
      kind:
        | typeof FRAME.WRITE_HEADER
        | typeof FRAME.READ_REQUEST
        | typeof FRAME.ACK
        | typeof FRAME.LOCAL_READ
        | typeof FRAME.LOCAL_GRANT;
      body: Buffer;
    };

function protocolError(message: string): HarvestError {
  return new HarvestError("DATANODE_PROTOCOL_ERROR", message);
}

/** Bytes of a DATA frame's head (frame header, DATA header, checksums) for a packet with `checksums` chunk CRCs. */
export function dataFrameHeadBytes(checksums: number): number {
  return 5 + DATA_HEADER_BYTES + 4 * checksums;
}

type DataHead = { seq: number; offsetInBlock: number; last: boolean; checksums: ArrayLike<number> };

/** The frame header (length and kind) and the DATA header with its checksums; the data goes after them as it is. */
export function dataFrameHead(p: DataHead, dataLength: number): Buffer {
  const head = Buffer.allocUnsafe(dataFrameHeadBytes(p.checksums.length));
  writeDataFrameHead(p, dataLength, head, 0);
  return head;
}

/** Writes `dataFrameHead(p, dataLength)` into `target` at `at`. */
function writeDataFrameHead(p: DataHead, dataLength: number, target: Buffer, at: number): void {
  const n = p.checksums.length;
  target.writeUInt32BE(1 + DATA_HEADER_BYTES + 4 * n + dataLength, at);
  target.writeUInt8(FRAME.DATA, at + 4);
  target.writeUIntBE(p.seq, at + 5, 6);
  target.writeUIntBE(p.offsetInBlock, at + 11, 6);
  target.writeUInt8(p.last ? 1 : 0, at + 17);
  target.writeUInt32BE(n, at + 18);
  for (let i = 0; i < n; i++) target.writeUInt32BE(p.checksums[i]! >>> 0, at + 22 + 4 * i);
}

/**
 * The DATA frame of `p` with `data` as one buffer, its head written into `room`: a buffer that ends with `data` (the
 * same memory) and has room for the head before it. Undefined, and nothing written, when there is no such room.
 */
export function dataFrameInRoom(p: DataHead, data: Buffer, room: Buffer | undefined): Buffer | undefined {
  if (!room) return undefined;
  const endsWithData = room.buffer === data.buffer && room.byteOffset + room.length === data.byteOffset + data.length;
  const start = room.length - data.length - dataFrameHeadBytes(p.checksums.length);
  if (!endsWithData || start < 0) return undefined;
  writeDataFrameHead(p, data.length, room, start);
  return room.subarray(start);
}

/** A frame of `kind` with `body`. */
export function frame(kind: FrameKind, body: Buffer = Buffer.alloc(0)): Buffer {
  const head = Buffer.allocUnsafe(5);
  head.writeUInt32BE(1 + body.length, 0);
  head.writeUInt8(kind, 4);
  return Buffer.concat([head, body]);
}

/** An ERROR frame for `err`. */
export function errorFrame(err: HarvestError): Buffer {
  return frame(
    FRAME.ERROR,
    Buffer.from(JSON.stringify({ code: err.code, message: err.message, details: err.details }), "utf8"),
  );
}

function decodeData(body: Buffer): DataFrame {
  if (body.length < DATA_HEADER_BYTES) throw protocolError("a DATA frame shorter than its header");
  const n = body.readUInt32BE(13);
  const dataAt = DATA_HEADER_BYTES + 4 * n;
  if (n > body.length || dataAt > body.length) throw protocolError(`a DATA frame with ${n} checksums does not fit`);
  const checksums = new Array<number>(n);
  for (let i = 0; i < n; i++) checksums[i] = body.readUInt32BE(DATA_HEADER_BYTES + 4 * i);
  return {
    seq: body.readUIntBE(0, 6),
    offsetInBlock: body.readUIntBE(6, 6),
    last: (body.readUInt8(12) & 1) === 1,
    checksums,
    data: body.subarray(dataAt),
  };
}

function decodeError(body: Buffer): HarvestError {
  try {
    const e = JSON.parse(body.toString("utf8")) as { code?: unknown; message?: unknown; details?: unknown };
    const code =
      typeof e.code === "string" && e.code in ERROR_CODES ? (e.code as ErrorCode) : "DATANODE_PROTOCOL_ERROR";
    return new HarvestError<ErrorCode>(code, typeof e.message === "string" ? e.message : "the datanode failed", {
      details: detailsFromWire(e.details),
    });
  } catch {
    return protocolError("an unreadable ERROR frame");
  }
}

/**
 * Splits a byte stream into frames. Bytes are kept as the chunks that arrived; a frame within one chunk is a slice of
 * it (no copy), one that spans chunks is joined once. With `dataPieces` a DATA frame's data is never joined: it comes
 * as the slices of the chunks that hold it (`DataFrame.pieces`), for a datanode to verify, forward and write as is.
 */
export class FrameReader {
  private readonly queue = new ByteQueue();
  private magicSeen: boolean;
  private readonly dataPieces: boolean;

  constructor(opts: { expectMagic: boolean; dataPieces?: boolean }) {
    this.magicSeen = !opts.expectMagic;
    this.dataPieces = opts.dataPieces ?? false;
  }

  /** Takes bytes; returns the frames now complete. Throws DATANODE_PROTOCOL_ERROR on a malformed stream. */
  push(chunk: Buffer): Frame[] {
    this.queue.push(chunk);
    const out: Frame[] = [];
    for (;;) {
      if (!this.magicSeen) {
        if (this.queue.length < TRANSFER_MAGIC.length) return out;
        if (!this.queue.take(TRANSFER_MAGIC.length).equals(TRANSFER_MAGIC))
          throw protocolError("not a block transfer connection (bad magic)");
        this.magicSeen = true;
      }
      if (this.queue.length < 5) return out;
      const length = this.queue.peekUInt32BE();
      if (length < 1 || length > MAX_FRAME_BYTES) throw protocolError(`a frame of ${length} bytes`);
      if (this.queue.length < 4 + length) return out;
      if (this.dataPieces && length >= 1 + DATA_HEADER_BYTES && this.queue.peekByte(4) === FRAME.DATA) {
        out.push({ kind: FRAME.DATA, packet: this.takeDataPieces(length) });
        continue;
      }
      const whole = this.queue.take(4 + length);
      const kind = whole.readUInt8(4);
      const body = whole.subarray(5);
      switch (kind) {
        case FRAME.DATA:
          out.push({ kind, packet: decodeData(body) });
          break;
        case FRAME.ERROR:
          out.push({ kind, error: decodeError(body) });
          break;
        case FRAME.END:
          out.push({ kind });
          break;
        case FRAME.WRITE_HEADER:
        case FRAME.READ_REQUEST:
        case FRAME.ACK:
        case FRAME.LOCAL_READ:
        case FRAME.LOCAL_GRANT:
          out.push({ kind, body });
          break;
        default:
          throw protocolError(`an unknown frame kind ${kind}`);
      }
    }
  }

  /** A DATA frame of `length` (kind and body): its head and checksums copied out, its data as pieces. */
  private takeDataPieces(length: number): DataFrame {
    const fixed = this.queue.take(5 + DATA_HEADER_BYTES).subarray(5);
    const n = fixed.readUInt32BE(13);
    const headBytes = DATA_HEADER_BYTES + 4 * n;
    if (n > length || 1 + headBytes > length) throw protocolError(`a DATA frame with ${n} checksums does not fit`);
    // The head and its checksums decode as a DATA body without data; the data stays in the queue's chunks.
    const packet = decodeData(Buffer.concat([fixed, this.queue.take(4 * n)]));
    packet.pieces = this.queue.takePieces(length - 1 - headBytes);
    return packet;
  }
}

// ------------------------------------------------------------------------------------------------ protobuf bodies

interface Codec {
  serialize(value: object): Buffer;
  deserialize(bytes: Buffer): object;
}

let codecs: Record<"header" | "request" | "ack", Codec> | undefined;

/**
 * The bodies' codecs: the DataTransfer gRPC service's own (de)serializers, so both transports read a message alike. A
 * write's header travels as a `WritePacket` holding only its `header`.
 */
function bodies(): Record<"header" | "request" | "ack", Codec> {
  if (!codecs) {
    const svc = loadHarvestProto().DataTransfer.service;
    const write = svc["WriteBlock"]!;
    const read = svc["ReadBlock"]!;
    codecs = {
      header: { serialize: write.requestSerialize, deserialize: write.requestDeserialize } as Codec,
      request: { serialize: read.requestSerialize, deserialize: read.requestDeserialize } as Codec,
      ack: { serialize: write.responseSerialize, deserialize: write.responseDeserialize } as Codec,
    };
  }
  return codecs;
}

/** Encodes a write's header (a `WritePacket` with `header`), a ReadBlockRequest or a WriteAck. */
export function encodeBody(which: "header" | "request" | "ack", message: object): Buffer {
  return bodies()[which].serialize(which === "header" ? { header: message } : message);
}

/** Decodes a body; throws DATANODE_PROTOCOL_ERROR when it is not that message. */
export function decodeBody<T>(which: "header" | "request" | "ack", body: Buffer): T {
  let out: object;
  try {
    out = bodies()[which].deserialize(body);
  } catch (err) {
    throw protocolError(`a malformed ${which} frame: ${(err as Error).message}`);
  }
  if (which === "header") {
    const header = (out as { header?: object | null }).header;
    if (!header) throw protocolError("a write header frame without its header");
    return header as T;
  }
  return out as T;
}

// ------------------------------------------------------------------------------------------------ connections

/** How to reach datanodes' transfer ports: plaintext, or TLS under the cluster CA with this party's certificate. */
export type TransferSecurity = ClientTls | undefined;

/**
 * One TLS context per party (its CA, certificate and key files), read once and shared by all its connections. Given
 * the PEMs instead, `tls.connect` parses them into a new context for every connection: 0.8 ms of CPU each here, a
 * third of a mutual handshake's (2.1 against 3.1 ms of CPU per connection on loopback), paid three times per block of
 * a replication-3 write (client and two datanodes) and once per block read. Puts of 1 GiB did not show it beyond the
 * noise (48 ms of about 7 s of CPU). Like the PEMs before, the files are read once per process.
 */
const contextCache = new Map<string, tls.SecureContext>();
function secureContextOf(security: NonNullable<TransferSecurity>): tls.SecureContext {
  const withCert = Boolean(security.cert && security.key);
  const key = JSON.stringify([security.ca, withCert ? security.cert : "", withCert ? security.key : ""]);
  let context = contextCache.get(key);
  if (!context) {
    context = tls.createSecureContext({
      ca: readFileSync(security.ca),
      ...(withCert ? { cert: readFileSync(security.cert!), key: readFileSync(security.key!) } : {}),
    });
    contextCache.set(key, context);
  }
  return context;
}

/** Idle time before TCP keepalive probes on a transfer connection (gRPC's channels ping every 5 s). */
export const TRANSFER_KEEPALIVE_MS = 5_000;

/** Opens a connection to a datanode's transfer port and sends the magic. */
export function connectTransfer(address: string, security: TransferSecurity, timeoutMs = 10_000): net.Socket {
  const parsed = parseHostPort(address);
  if (!parsed) {
    // As a datanode that cannot be reached: the caller moves on to another replica or pipeline.
    const socket = new net.Socket();
    process.nextTick(() =>
      socket.destroy(new HarvestError("UNAVAILABLE", `bad transfer address ${JSON.stringify(address)}`)),
    );
    return socket;
  }
  const { host, port } = parsed;
  const socket = security
    ? tls.connect({
        host,
        port,
        secureContext: secureContextOf(security),
        // Harvest checks the server's certificate against the address dialled (IPs included); no SNI name.
        servername: net.isIP(host) ? "" : host,
      })
    : net.connect({ host, port });
  socket.setNoDelay(true);
  // A peer that vanishes without a word (a server powered off, a partition) is noticed as gRPC's keepalives do.
  socket.setKeepAlive(true, TRANSFER_KEEPALIVE_MS);
  // Only the connection (and TLS handshake) is timed: once up, a paused reader or a pipeline waiting for its acks may
  // be quiet for long (the datanodes' ack timeout covers a silent peer).
  const connectTimer = setTimeout(
    () => socket.destroy(new HarvestError("UNAVAILABLE", `no connection to ${address} within ${timeoutMs} ms`)),
    timeoutMs,
  );
  socket.once(security ? "secureConnect" : "connect", () => clearTimeout(connectTimer));
  socket.once("close", () => clearTimeout(connectTimer));
  socket.write(TRANSFER_MAGIC);
  return socket;
}

/**
 * One operation's connection seen from its opener, with the stream interface of a gRPC client stream: `write` takes
 * `{ header }` or `{ data }` (a write) and returns false when the socket wants a 'drain'; 'data' delivers acks (a
 * write) or packets (a read); 'error' a HarvestError; 'end' the peer closing cleanly.
 */
export class BlockConnection extends EventEmitter {
  // A read's DATA frames come as the socket chunks that hold them (never joined: no copy of the data, no fresh
  // buffer per frame); a write's connection only gets acks.
  private readonly reader = new FrameReader({ expectMagic: false, dataPieces: true });
  private closed = false;
  private sawEnd = false;
  private isRead = false;

  constructor(
    readonly address: string,
    private readonly socket: net.Socket,
  ) {
    super();
    socket.on("data", (chunk: Buffer) => this.onBytes(chunk));
    socket.on("drain", () => this.emit("drain"));
    socket.on("error", (err: Error) =>
      this.failWith(
        isHarvestError(err)
          ? err
          : new HarvestError("UNAVAILABLE", `datanode ${address}: ${err.message}`, { cause: err }),
      ),
    );
    socket.on("end", () => {
      if (this.closed) return;
      // A read ends with an END frame; a connection that just closes has not delivered the whole range.
      if (this.isRead)
        return this.failWith(new HarvestError("UNAVAILABLE", `datanode ${address} closed the read before its end`));
      this.closed = true;
      this.emit("end");
    });
    socket.on("close", () => {
      if (!this.closed) this.failWith(new HarvestError("UNAVAILABLE", `datanode ${address} closed the connection`));
      this.emit("close");
    });
  }

  /** Connects to a datanode's transfer port; the first `write` ({ header }) or `read` names the operation. */
  static open(address: string, security: TransferSecurity): BlockConnection {
    return new BlockConnection(address, connectTransfer(address, security));
  }

  /** Opens a read of a range: the datanode answers DATA frames ('data': { offset, data, checksums }), then END. */
  static read(address: string, security: TransferSecurity, request: object): BlockConnection {
    const c = BlockConnection.open(address, security);
    c.isRead = true;
    c.socket.write(frame(FRAME.READ_REQUEST, encodeBody("request", request)));
    return c;
  }

  get writableNeedDrain(): boolean {
    return this.socket.writableNeedDrain;
  }

  /** Sends a write's `{ header }` or a `{ data }` packet, as on the gRPC stream; false: wait for 'drain'. */
  write(msg: PacketMessage): boolean {
    if (this.closed) return true;
    if (msg.header) return this.socket.write(frame(FRAME.WRITE_HEADER, encodeBody("header", msg.header)));
    const p = msg.data;
    if (!p) return true;
    const whole = p.pieces ? undefined : dataFrameInRoom(p, p.data, p.headRoom);
    if (whole) return this.socket.write(whole);
    this.socket.cork();
    this.socket.write(dataFrameHead(p, packetLength(p)));
    let ok = true;
    for (const piece of packetPieces(p)) if (piece.length > 0) ok = this.socket.write(piece);
    process.nextTick(() => this.socket.uncork());
    return ok;
  }

  /**
   * The opener is done sending. Nothing to do on the wire: a write's last packet says so, and the datanode closes the
   * connection after its last ack (TLS has no dependable half-close).
   */
  end(): void {}

  /** Abandons the operation at once. */
  cancel(): void {
    this.closed = true;
    this.socket.destroy();
  }

  pause(): void {
    this.socket.pause();
  }

  resume(): void {
    this.socket.resume();
  }

  private onBytes(chunk: Buffer): void {
    if (this.closed) return;
    let frames: Frame[];
    try {
      frames = this.reader.push(chunk);
    } catch (err) {
      this.failWith(err as HarvestError);
      return;
    }
    for (const f of frames) {
      if (this.closed) return;
      switch (f.kind) {
        case FRAME.ACK:
          try {
            this.emit("data", decodeBody("ack", f.body));
          } catch (err) {
            this.failWith(err as HarvestError);
          }
          break;
        case FRAME.DATA:
          this.emit("data", {
            offset: f.packet.offsetInBlock,
            data: f.packet.data,
            pieces: f.packet.pieces,
            checksums: f.packet.checksums,
          });
          break;
        case FRAME.ERROR:
          this.failWith(f.error);
          break;
        case FRAME.END:
          this.sawEnd = true;
          this.closed = true;
          this.socket.end();
          this.emit("end");
          break;
        default:
          this.failWith(protocolError(`a ${f.kind} frame from a datanode`));
      }
    }
  }

  private failWith(err: HarvestError): void {
    if (this.closed && !this.sawEnd) {
      if (!this.socket.destroyed) this.socket.destroy();
      return;
    }
    if (this.sawEnd) return;
    this.closed = true;
    this.socket.destroy();
    this.emit("error", err);
  }
}
