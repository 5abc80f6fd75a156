/**
 * The datanode's block transfer port (common/block-transfer.ts): a TCP server, TLS under the cluster CA when the
 * cluster is secure, serving writes into the same pipeline logic as the gRPC DataTransfer service (WriteSession) and
 * reads of finalized replicas. A peer needs what it needs on the gRPC port: a certificate signed by the cluster CA or,
 * for a job's tasks that hold none, a block token signed by the namenode; every operation then checks its block token
 * for that block and mode, as on gRPC.
 */
import { EventEmitter } from "node:events";
import { readFileSync } from "node:fs";
import * as net from "node:net";
import * as tls from "node:tls";
import type { AddressInfo } from "node:net";
import {
  dataFrameHead,
  dataFrameInRoom,
  decodeBody,
  encodeBody,
  errorFrame,
  FRAME,
  frame,
  FrameReader,
  TRANSFER_KEEPALIVE_MS,
} from "../common/block-transfer.js";
import type { Frame } from "../common/block-transfer.js";
import { asHarvestError, errorMessage, HarvestError, isHarvestError } from "../common/errors.js";
import type { Logger } from "../common/log.js";
import { identityOfCertificate } from "../common/tls.js";
import { isLocalPeer } from "../common/net-address.js";
import type { Identity, TlsFiles } from "../common/tls.js";
import type { DataTransferService, FileReadSink, ReadSink, WriteUpstream } from "./data-transfer.js";
import type { FilePiece } from "./block-store.js";
import { plainSocketDescriptor, sendFileFrames, zeroCopyAvailable } from "./zero-copy.js";
import type { ReadBlockRequestOutput } from "../proto/generated/harvest/v1/ReadBlockRequest.js";
import type { ReadChunk } from "../proto/generated/harvest/v1/ReadChunk.js";
import type { WriteAck } from "../proto/generated/harvest/v1/WriteAck.js";
import type { WriteHeaderOutput } from "../proto/generated/harvest/v1/WriteHeader.js";

/** What the block server needs from its datanode. */
export interface BlockServerHost {
  readonly transfer: DataTransferService;
  readonly log: Logger;
  /**
   * Throws UNAUTHENTICATED unless a peer with this verified identity (undefined: no valid certificate) may move
   * blocks with this token at all (the token's mode and block are checked by the operation itself).
   */
  admit(identity: Identity | undefined, blockToken: string): void;
  /** Whether a client on this server may read replicas from their files (DataNodeOptions.shortCircuitReads). */
  readonly shortCircuitReads: boolean;
  /** Whether plaintext reads send replica data from its files with sendfile (DataNodeOptions.zeroCopyReads). */
  readonly zeroCopyReads: boolean;
}

/**
 * Bytes per DATA frame of a read: larger than gRPC's 64 KiB messages (fewer frames, one native CRC check each at the
 * reader), small enough that 16 readers hold a few MiB.
 */
const TRANSFER_READ_PIECE_BYTES = 512 * 1024;

/** A connection silent this long before naming its operation is closed. */
const FIRST_FRAME_TIMEOUT_MS = 30_000;

/** Node's default suites with TLS 1.3's AES-128-GCM first (see `listen`); the server's order wins. */
export const TRANSFER_CIPHERS = [
  "TLS_AES_128_GCM_SHA256",
  ...tls.DEFAULT_CIPHERS.split(":").filter((c) => c !== "TLS_AES_128_GCM_SHA256"),
].join(":");

/** The block transfer server of one datanode. */
export class BlockServer {
  private server: net.Server | undefined;
  private readonly sockets = new Set<net.Socket>();

  constructor(
    private readonly host: BlockServerHost,
    private readonly tlsFiles: TlsFiles | undefined,
  ) {}

  /** Listens on `bindHost:port` (0: a free port); resolves with the port. */
  async listen(bindHost: string, port: number): Promise<number> {
    const onSocket = (socket: net.Socket): void => this.accept(socket);
    const server = this.tlsFiles
      ? tls.createServer(
          {
            ca: readFileSync(this.tlsFiles.ca),
            cert: readFileSync(this.tlsFiles.cert),
            key: readFileSync(this.tlsFiles.key),
            // A peer without a certificate may still come with a block token (a job's task); one with a certificate
            // not signed by the CA gets no identity.
            requestCert: true,
            rejectUnauthorized: false,
            // Block data is most of the bytes a cluster encrypts. TLS 1.3's AES-128-GCM encrypts at about twice the
            // rate of its default AES-256-GCM here (2.1 against 1.1 GB/s for 16 KiB records): half the CPU per byte
            // taken from the primary tenant's server. Both are TLS 1.3's standard AEAD suites.
            ciphers: TRANSFER_CIPHERS,
            honorCipherOrder: true,
          },
          onSocket,
        )
      : net.createServer(onSocket);
    // A TLS handshake that fails (a stranger, a plaintext client) only closes that connection.
    server.on("tlsClientError", (err: Error) =>
      this.host.log.debug("block transfer TLS refused", { error: err.message }),
    );
    this.server = server;
    await new Promise<void>((resolve, reject) => {
      server.once("error", reject);
      server.listen(port, bindHost, () => {
        server.off("error", reject);
        resolve();
      });
    });
    server.on("error", (err) => this.host.log.warn("block transfer server error", { error: errorMessage(err) }));
    return (server.address() as AddressInfo).port;
  }

  /** Stops accepting and closes every connection (writes in progress were failed by the service first). */
  async close(): Promise<void> {
    const server = this.server;
    this.server = undefined;
    for (const s of this.sockets) s.destroy();
    if (server) await new Promise<void>((resolve) => server.close(() => resolve()));
  }

  private accept(socket: net.Socket): void {
    this.sockets.add(socket);
    socket.on("close", () => this.sockets.delete(socket));
    socket.setNoDelay(true);
    socket.setKeepAlive(true, TRANSFER_KEEPALIVE_MS);
    const identity =
      socket instanceof tls.TLSSocket
        ? socket.authorized
          ? identityOfCertificate(socket.getPeerCertificate())
          : undefined
        : undefined;
    // A write's packets stay the socket's chunks that carry them (`pieces`): verified, forwarded and written unjoined.
    const reader = new FrameReader({ expectMagic: true, dataPieces: true });
    const idle = setTimeout(() => socket.destroy(), FIRST_FRAME_TIMEOUT_MS);
    let handler: ((frames: Frame[]) => void) | undefined;
    const refuse = (err: unknown): void => {
      this.host.transfer.metrics.transferConnection("refused");
      const h = isHarvestError(err) ? err : new HarvestError("DATANODE_PROTOCOL_ERROR", errorMessage(err));
      socket.end(errorFrame(h));
      setTimeout(() => socket.destroy(), 1_000).unref();
    };
    const onData = (chunk: Buffer): void => {
      let frames: Frame[];
      try {
        frames = reader.push(chunk);
      } catch (err) {
        socket.off("data", onData);
        refuse(err);
        return;
      }
      if (frames.length === 0) return;
      if (!handler) {
        clearTimeout(idle);
        const first = frames.shift()!;
        try {
          handler = this.begin(first, socket, identity);
        } catch (err) {
          socket.off("data", onData);
          refuse(err);
          return;
        }
      }
      if (frames.length === 0) return;
      try {
        handler(frames);
      } catch (err) {
        // A frame out of place: the connection is refused (a write in progress sees its writer go).
        socket.off("data", onData);
        refuse(err);
      }
    };
    socket.on("data", onData);
    socket.on("error", () => undefined);
    socket.on("close", () => clearTimeout(idle));
  }

  /** Starts the operation the first frame names; returns what handles the frames after it. */
  private begin(first: Frame, socket: net.Socket, identity: Identity | undefined): (frames: Frame[]) => void {
    if (first.kind === FRAME.WRITE_HEADER) {
      const header = decodeBody<WriteHeaderOutput>("header", first.body);
      this.host.admit(identity, header.blockToken);
      this.host.transfer.metrics.transferConnection("write");
      const upstream = new SocketUpstream(socket);
      this.host.transfer.startWrite(upstream);
      upstream.deliver({ header });
      return (frames) => {
        for (const f of frames) {
          if (f.kind === FRAME.DATA) upstream.deliver({ data: f.packet });
          else throw new HarvestError("DATANODE_PROTOCOL_ERROR", `a frame of kind ${f.kind} in a write`);
        }
      };
    }
    if (first.kind === FRAME.READ_REQUEST) {
      const request = decodeBody<ReadBlockRequestOutput>("request", first.body);
      this.host.admit(identity, request.blockToken);
      this.host.transfer.metrics.transferConnection("read");
      void this.read(request, socket);
      return () => {
        throw new HarvestError("DATANODE_PROTOCOL_ERROR", "frames after a read request");
      };
    }
    if (first.kind === FRAME.LOCAL_READ) {
      const request = decodeBody<ReadBlockRequestOutput>("request", first.body);
      if (!this.host.shortCircuitReads)
        throw new HarvestError("DATANODE_SHORT_CIRCUIT_REFUSED", "this datanode does not serve short-circuit reads");
      // Only a client on this server can open the files; the datanode tells no one else where they are.
      if (!isLocalPeer(socket.remoteAddress, socket.localAddress))
        throw new HarvestError(
          "DATANODE_SHORT_CIRCUIT_REFUSED",
          `short-circuit reads are for clients on this server, not ${socket.remoteAddress ?? "an unknown peer"}`,
        );
      this.host.admit(identity, request.blockToken);
      const grant = this.host.transfer.grantLocalRead(request);
      this.host.transfer.metrics.transferConnection("local-read");
      socket.end(frame(FRAME.LOCAL_GRANT, Buffer.from(JSON.stringify(grant), "utf8")));
      return () => {
        throw new HarvestError("DATANODE_PROTOCOL_ERROR", "frames after a short-circuit read request");
      };
    }
    throw new HarvestError(
      "DATANODE_PROTOCOL_ERROR",
      "a connection must start with a write header, a read request or a short-circuit read request",
    );
  }

  private async read(request: ReadBlockRequestOutput, socket: net.Socket): Promise<void> {
    const cancelled = new AbortController();
    socket.on("close", () => cancelled.abort());
    // Plaintext reads send their data from the block file (datanode/zero-copy.ts) unless the datanode is told not to.
    const zeroCopy = this.host.zeroCopyReads && zeroCopyAvailable() && plainSocketDescriptor(socket) !== undefined;
    const fileSink = zeroCopy ? new FileSocketSink(socket) : undefined;
    try {
      if (fileSink)
        await this.host.transfer.serveReadFromFile(request, fileSink, cancelled.signal, TRANSFER_READ_PIECE_BYTES);
      else
        await this.host.transfer.serveRead(
          request,
          new SocketReadSink(socket),
          cancelled.signal,
          TRANSFER_READ_PIECE_BYTES,
        );
      if (!cancelled.signal.aborted) socket.end(frame(FRAME.END));
    } catch (err) {
      if (cancelled.signal.aborted) return;
      // A send that failed may have left a frame half written: an ERROR frame after it would read as data, so the
      // reader only sees the connection close (and tries another replica).
      if (fileSink?.broken) socket.destroy();
      else socket.end(errorFrame(asHarvestError(err)));
    }
  }
}

/** A zero-copy read's pieces as DATA frames: each head from memory, its data from the block file (zero-copy.ts). */
class FileSocketSink implements FileReadSink {
  /** A send failed partway: the stream may end inside a frame. */
  broken = false;

  constructor(private readonly socket: net.Socket) {}

  async sendFromFile(pieces: readonly FilePiece[], cancelled: AbortSignal): Promise<void> {
    if (pieces.length === 0) return;
    // The native send writes beside Node's queue for the socket, which must be empty first.
    if (this.socket.writableLength > 0) await new Promise((resolve) => this.socket.write(Buffer.alloc(0), resolve));
    const fd = plainSocketDescriptor(this.socket);
    if (fd === undefined) throw new HarvestError("UNAVAILABLE", "the reader's connection closed");
    const frames = pieces.map((p) => ({
      head: dataFrameHead({ seq: 0, offsetInBlock: p.offset, last: false, checksums: p.checksums }, p.length),
      offset: p.offset,
      length: p.length,
    }));
    try {
      await sendFileFrames(fd, pieces[0]!.file.fd, frames, cancelled);
    } catch (err) {
      this.broken = true;
      if (isHarvestError(err) && err.code === "DATANODE_CORRUPT_BLOCK") throw pieces[0]!.corrupt(err.message);
      throw err;
    }
  }
}

/** A read's pieces as DATA frames: the checksums in the frame's head, the bytes written as they are. */
class SocketReadSink implements ReadSink {
  constructor(private readonly socket: net.Socket) {}

  get writableNeedDrain(): boolean {
    return this.socket.writableNeedDrain;
  }

  on(event: string, listener: () => void): unknown {
    return this.socket.on(event, listener);
  }

  off(event: string, listener: () => void): unknown {
    return this.socket.off(event, listener);
  }

  write(piece: ReadChunk, sent?: (err?: Error | null) => void, headRoom?: Buffer): boolean {
    const data = piece.data as Buffer;
    const head = { seq: 0, offsetInBlock: Number(piece.offset ?? 0), last: false, checksums: piece.checksums ?? [] };
    // Head and data as one buffer when the piece's buffer has room for the head: TLS would join them into a new one.
    const whole = dataFrameInRoom(head, data, headRoom);
    if (whole) return this.socket.write(whole, sent);
    this.socket.cork();
    this.socket.write(dataFrameHead(head, data.length));
    // The bytes are written as they are (no copy): `sent` runs once the socket is done with them.
    const ok = this.socket.write(data, sent);
    this.socket.uncork();
    return ok;
  }
}

/**
 * The upstream of a write on a transfer connection, as WriteSession sees a gRPC call: 'data' delivers WritePackets,
 * 'end' the writer's clean half-close, 'cancelled' the connection breaking; acks go back as ACK frames.
 */
class SocketUpstream extends EventEmitter implements WriteUpstream {
  private ended = false;
  private paused = false;

  constructor(private readonly socket: net.Socket) {
    super();
    socket.on("end", () => {
      if (!this.ended) this.emit("end");
    });
    socket.on("close", () => {
      if (!this.ended) this.emit("cancelled");
      this.emit("close");
    });
    socket.on("drain", () => this.emit("drain"));
  }

  /** A frame from the writer, as the gRPC call's 'data' event would carry it. */
  deliver(msg: object): void {
    this.emit("data", msg);
  }

  get writableNeedDrain(): boolean {
    return this.socket.writableNeedDrain;
  }

  isPaused(): boolean {
    return this.paused;
  }

  pause(): this {
    this.paused = true;
    this.socket.pause();
    return this;
  }

  resume(): this {
    this.paused = false;
    this.socket.resume();
    return this;
  }

  write(ack: WriteAck): boolean {
    if (this.socket.destroyed) return true;
    return this.socket.write(frame(FRAME.ACK, encodeBody("ack", ack)));
  }

  end(): void {
    this.ended = true;
    if (!this.socket.destroyed) this.socket.end();
  }
}
