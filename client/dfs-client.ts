/**
 * DfsClient: Harvest's file system from TypeScript. Writes go through a pipeline of datanodes and a block counts as
 * written only when every replica in its pipeline has it on disk; reads verify every 512-byte chunk's CRC32C and fail
 * over to the next replica when a datanode errs, holds a corrupt replica, or refuses because its primary tenant is busy.
 */
import { clientConfigOf, clientSecurityOf, nnAddressFromConfig } from "./client-config.js";
import type { ClientConfig } from "./client-config.js";
import type { WebTokenResponseOutput } from "../proto/generated/harvest/v1/WebTokenResponse.js";
import type * as grpc from "@grpc/grpc-js";
import { Metadata } from "@grpc/grpc-js";
import { CHUNK_BYTES, checksumsMatch, chunkChecksums } from "../common/checksum.js";
import { BlockConnection, dataFrameHeadBytes, packetPieces } from "../common/block-transfer.js";
import { ByteQueue } from "../common/byte-queue.js";
import type { BlockReadStream, PacketStream, ReadPiece } from "../common/block-transfer.js";
import { randomUUID } from "node:crypto";
import { NamespaceChannel } from "./namespace-channel.js";
import { createWriteStream as fsWriteStream } from "node:fs";
import { open, rename, rm, stat as fsStat } from "node:fs/promises";
import type { FileHandle } from "node:fs/promises";
import { Readable, Transform, Writable } from "node:stream";
import { finished, pipeline } from "node:stream/promises";
import { normalizeDfsPath, parentPath } from "../common/dfs-path.js";
import { detailsOf, errorMessage, fromGrpcError, HarvestError, isHarvestError } from "../common/errors.js";
import { CLAIMED_USER_METADATA, localUserName } from "../common/fs-permission.js";
import { TOKEN_METADATA } from "../common/auth.js";
import { Logger } from "../common/log.js";
import { call, loadHarvestProto, makeClient } from "../common/grpc.js";
import type { ClientSecurity } from "../common/grpc.js";
import type { BlockOutput } from "../proto/generated/harvest/v1/Block.js";
import type { ClientNamenodeClient } from "../proto/generated/harvest/v1/ClientNamenode.js";
import type { DataTransferClient } from "../proto/generated/harvest/v1/DataTransfer.js";
import type { DatanodeReportOutput } from "../proto/generated/harvest/v1/DatanodeReport.js";
import type { FileStatusOutput } from "../proto/generated/harvest/v1/FileStatus.js";
import type { FsckReportOutput } from "../proto/generated/harvest/v1/FsckReport.js";
import type { LocatedBlockOutput } from "../proto/generated/harvest/v1/LocatedBlock.js";
import type { LocatedBlocksOutput } from "../proto/generated/harvest/v1/LocatedBlocks.js";
import type { ReadChunkOutput } from "../proto/generated/harvest/v1/ReadChunk.js";
import type { WriteAckOutput } from "../proto/generated/harvest/v1/WriteAck.js";
import type { DatanodeInfoOutput } from "../proto/generated/harvest/v1/DatanodeInfo.js";
import type { ReadBlockRequest } from "../proto/generated/harvest/v1/ReadBlockRequest.js";
import { ReplayArena, SlabPool } from "./replay-arena.js";
import { ShortCircuitRead } from "./short-circuit.js";
import { isThisServer, parseHostPort } from "../common/net-address.js";

/** A file or directory as the namenode reports it. */
export type DfsFileStatus = FileStatusOutput;
/** What `fsck` found. */
export type DfsFsckReport = FsckReportOutput;
/** A file's blocks and where their replicas are. */
export type DfsBlockLocations = LocatedBlocksOutput;
/** A datanode as the namenode sees it. */
export type DfsDatanode = DatanodeReportOutput;

export type { BlockReadStream } from "../common/block-transfer.js";

/** Bytes covered by one checksum (common/checksum.ts). */
export { CHUNK_BYTES };
/**
 * Data bytes per write packet (a multiple of CHUNK_BYTES). HDFS sends 64 KiB; here each packet costs every hop a
 * frame, an ack and their socket writes. 256 KiB packets put 10-25 % more through than 64 KiB ones on this 2-core
 * machine; 1 MiB packets, with the datanodes' queue bounded in bytes (data-transfer.ts), 5-10 % more again (paired
 * puts of 1 GiB, replication 1: 773-823 against 676-785 MB/s, and the datanode's CPU 0.85-0.93 against 1.0-1.28 s).
 * A datanode takes up to MAX_PACKET_BYTES; `put` reads at least a packet at a time (see writeLocalFile).
 */
export const PACKET_BYTES = 1024 * 1024;
/** How much of a local file `put` reads at a time. */
const LOCAL_READ_BYTES = 1024 * 1024;

/** Settings of a client. */
export interface DfsClientOptions {
  /** Names this client's leases. @default a random id */
  clientName: string;
  /** The datanode id of the server this client runs on, if any (the first replica goes there). @default "" */
  writerDatanodeId: string;
  /** Pipelines tried for one block before the write fails. @default 4 */
  maxBlockAttempts: number;
  /**
   * Rounds over a block's replicas before a read fails. Between rounds the client waits (1 s, 2 s, 4 s, ... up to 8 s)
   * and asks the namenode again, so a read outlasts a primary tenant's spike on every replica. @default 5
   */
  maxReadRounds: number;
  /**
   * The user this client claims on a plaintext cluster (owner of what it creates; the namenode's permissions check it).
   * A TLS certificate's identity overrides it. @default `$USER`, else the OS account running this process
   */
  user: string;
  /** Deadline of namenode calls. @default 30000 */
  namenodeTimeoutMs: number;
  /**
   * On a secure cluster: the CA to trust and this user's certificate and key (from the client configuration).
   * Undefined: plaintext. @default undefined
   */
  security?: ClientSecurity;
  /**
   * A delegation token to act as its owner without a certificate (what a job's tasks hold, HARVEST_DFS_TOKEN).
   * @default ""
   */
  dfsToken: string;
  /**
   * Move block data over the datanodes' block transfer ports (common/block-transfer.ts) where they have one; false:
   * over their gRPC DataTransfer service, the baseline the benchmark compares with. @default true
   */
  transferProtocol: boolean;
  /**
   * Read a replica whose datanode is on this server from its files (client/short-circuit.ts, HDFS's short-circuit
   * local read), when that datanode serves them (DataNodeOptions.shortCircuitReads) and this process may open them;
   * otherwise, and with `transferProtocol` false, over the network. @default true
   */
  shortCircuit: boolean;
  /**
   * Send writes' Create, AddBlock and Complete on one ClientNamenode.NamespaceCalls stream (client/namespace-channel.ts)
   * instead of one unary call each; false: unary calls, the baseline `bench namenode` compares with. @default true
   */
  namespaceStream: boolean;
  /**
   * While any write stream of this client is open, its leases are renewed (RenewLease) this often, so that a writer
   * streaming one long block is not taken for dead. Keep it well under the namenode's lease timeout (a third of it).
   * @default 10000
   */
  leaseRenewMs: number;
  /**
   * How long a write keeps retrying a namenode call that failed because the namenode is away (UNAVAILABLE) or in safe
   * mode after a restart, before the write fails with that error. 0: no retry. @default 60000
   */
  namenodeRetryMs: number;
  /** Where renewal failures and retries are logged. @default a Logger named "dfs-client" */
  logger: Logger;
}

/** Options of a new file. */
export interface DfsCreateOptions {
  overwrite?: boolean;
  /** 0 or absent: the namenode's default. */
  replication?: number;
  /** 0 or absent: the namenode's default. */
  blockSizeBytes?: number;
  /**
   * Called with the bytes acknowledged by every replica of the pipeline so far (packet by packet, never decreasing).
   * Should the writer die, lease recovery keeps at least these bytes.
   */
  onProgress?: (bytes: number) => void;
}

/** Client of a Harvest namenode and its datanodes. */
export class DfsClient {
  readonly options: DfsClientOptions;
  private readonly nn: ClientNamenodeClient;
  private readonly dataClients = new Map<string, DataTransferClient>();
  /**
   * What reads met so far: replicas refused because their primary was busy, failovers, corrupt replicas found, and
   * replica ranges read from their files (short-circuit).
   */
  readonly readStats = { busyRefusals: 0, failovers: 0, corruptReplicas: 0, shortCircuitReads: 0 };
  /** Datanodes on this server that refused a short-circuit read, or whose files this process cannot open. */
  private readonly noShortCircuit = new Set<string>();
  /**
   * What writes met so far: pipelines that failed and were replaced (a datanode died, refused, or stayed silent),
   * lease renewals sent, and namenode calls retried through an outage.
   */
  readonly writeStats = { pipelineFailures: 0, leaseRenewals: 0, namenodeRetries: 0 };
  private readonly renewer: LeaseRenewer;
  private readonly namespaceChannel: NamespaceChannel;
  /** @internal Replay slabs a completed write stream leaves for the next one (ReplayArena). */
  readonly slabPool = new SlabPool();

  constructor(
    readonly namenodeAddress: string,
    options: Partial<DfsClientOptions> = {},
  ) {
    this.options = {
      clientName: `dfs-client-${randomUUID()}`,
      writerDatanodeId: "",
      maxBlockAttempts: 4,
      maxReadRounds: 5,
      namenodeTimeoutMs: 30_000,
      user: localUserName(),
      dfsToken: "",
      transferProtocol: true,
      shortCircuit: true,
      namespaceStream: true,
      leaseRenewMs: 10_000,
      namenodeRetryMs: 60_000,
      logger: new Logger("dfs-client"),
      ...Object.fromEntries(Object.entries(options).filter(([, v]) => v !== undefined)),
    };
    if (!(Number.isSafeInteger(this.options.leaseRenewMs) && this.options.leaseRenewMs > 0))
      throw new HarvestError(
        "INVALID_ARGUMENT",
        `leaseRenewMs must be a positive integer, not ${this.options.leaseRenewMs}`,
        {
          details: { field: "leaseRenewMs" },
        },
      );
    if (!(Number.isSafeInteger(this.options.namenodeRetryMs) && this.options.namenodeRetryMs >= 0))
      throw new HarvestError(
        "INVALID_ARGUMENT",
        `namenodeRetryMs must be a non-negative integer, not ${this.options.namenodeRetryMs}`,
        { details: { field: "namenodeRetryMs" } },
      );
    this.renewer = new LeaseRenewer(this);
    const security = this.options.security;
    this.nn = makeClient(
      loadHarvestProto().ClientNamenode,
      namenodeAddress,
      security && this.options.dfsToken
        ? { ...security, tokens: { [TOKEN_METADATA["dfs-token"]]: this.options.dfsToken } }
        : security,
    );
    this.namespaceChannel = new NamespaceChannel(this.nn, () => this.callMetadata());
  }

  /**
   * The client a task uses: the namenode from HARVEST_NN_ADDRESS; on a secure cluster the CA from HARVEST_CA and its
   * job submitter's delegation token from HARVEST_DFS_TOKEN (the node manager and the job manager set them).
   */
  static fromTaskEnv(env: NodeJS.ProcessEnv = process.env, options: Partial<DfsClientOptions> = {}): DfsClient {
    const address = env["HARVEST_NN_ADDRESS"];
    if (!address)
      throw new HarvestError("CLUSTER_NOT_FOUND", "a task needs HARVEST_NN_ADDRESS to reach the file system");
    const ca = env["HARVEST_CA"];
    return new DfsClient(address, {
      ...(ca ? { security: { ca } } : {}),
      dfsToken: env["HARVEST_DFS_TOKEN"] ?? "",
      ...options,
    });
  }
  /**
   * A client of the cluster a client configuration names: `config` is a file or a parsed configuration; without it,
   * `$HARVEST_CONF`, then `~/.harvest/client.json`.
   */
  static fromConfig(config?: ClientConfig | string, options: Partial<DfsClientOptions> = {}): DfsClient {
    const c = clientConfigOf(config);
    const security = clientSecurityOf(c);
    return new DfsClient(nnAddressFromConfig(c), { ...(security ? { security } : {}), ...options });
  }

  /** Creates a directory and its missing parents. */
  async mkdir(path: string): Promise<DfsFileStatus> {
    return this.nnCall(this.nn.mkdirs, { path: normalizeDfsPath(path), owner: this.options.user });
  }

  /** A web token for this client's certificate and the namenode's web URL (`harvest ui login`). */
  webToken(lifetimeMs = 0): Promise<WebTokenResponseOutput> {
    return this.nnCall(this.nn.getWebToken, { lifetimeMs });
  }

  async stat(path: string): Promise<DfsFileStatus> {
    return this.nnCall(this.nn.stat, { path: normalizeDfsPath(path) });
  }

  async list(path: string): Promise<DfsFileStatus[]> {
    return (await this.nnCall(this.nn.list, { path: normalizeDfsPath(path) })).entries;
  }

  /** Deletes a file, or a directory (non-empty ones only with `recursive`); resolves to whether anything was deleted. */
  async delete(path: string, opts: { recursive?: boolean } = {}): Promise<boolean> {
    return (await this.nnCall(this.nn.delete, { path: normalizeDfsPath(path), recursive: opts.recursive ?? false }))
      .deleted;
  }

  async rename(src: string, dst: string): Promise<DfsFileStatus> {
    return this.nnCall(this.nn.rename, { src: normalizeDfsPath(src, "src"), dst: normalizeDfsPath(dst, "dst") });
  }

  /** A file's blocks with their live replicas (preferred first). */
  async blockLocations(path: string): Promise<DfsBlockLocations> {
    return this.nnCall(this.nn.getBlockLocations, { path: normalizeDfsPath(path), offset: 0, length: 0 });
  }

  async fsck(path = "/"): Promise<DfsFsckReport> {
    return this.nnCall(this.nn.fsck, { path: normalizeDfsPath(path) });
  }

  /** Sets the permission bits (0..0o777, e.g. 0o750) of a file or directory; only its owner or the superuser may. */
  async chmod(path: string, mode: number): Promise<DfsFileStatus> {
    return this.nnCall(this.nn.setPermission, { path: normalizeDfsPath(path), mode });
  }

  /**
   * Sets the owner and/or group ("" or absent keeps it): only the superuser may change the owner; the owner may change
   * the group.
   */
  async chown(path: string, owner: string, group = ""): Promise<DfsFileStatus> {
    return this.nnCall(this.nn.setOwner, { path: normalizeDfsPath(path), owner, group });
  }

  async datanodes(): Promise<DfsDatanode[]> {
    return (await this.nnCall(this.nn.getDatanodes, {})).datanodes;
  }

  /**
   * A writable stream into a new file. 'finish' fires only after the last block is on disk at every replica of its
   * pipeline and the namenode has closed the file; an error means the file is not complete.
   */
  createWriteStream(path: string, opts: DfsCreateOptions = {}): Writable {
    return new DfsWriteStream(this, normalizeDfsPath(path), opts);
  }

  /**
   * A readable stream of a file (or of `length` bytes from `offset`), verified chunk by chunk, with replica failover.
   * As in HDFS, a file still being written can be read: the stream returns its visible prefix (the blocks committed
   * so far; the block being written is not yet visible) and ends there. `stat()` says whether a file is complete;
   * `get()` refuses an open file unless asked.
   */
  createReadStream(path: string, opts: { offset?: number; length?: number } = {}): Readable {
    return new DfsReadStream(this, normalizeDfsPath(path), opts.offset ?? 0, opts.length ?? 0);
  }

  /** Copies a local file into the file system. */
  async put(localPath: string, dfsPath: string, opts: DfsCreateOptions = {}): Promise<DfsFileStatus> {
    const target = normalizeDfsPath(dfsPath);
    await fsStat(localPath).catch((err: unknown) => {
      throw new HarvestError("INVALID_ARGUMENT", `cannot read local file ${localPath}: ${errorMessage(err)}`, {
        details: { field: "localPath" },
      });
    });
    await writeLocalFile(localPath, this.createWriteStream(target, opts));
    return this.stat(target);
  }

  /**
   * Copies a file out to a local path, through a temporary file renamed into place at the end (a failed copy leaves
   * nothing behind). An existing local file is replaced only with `overwrite`. A file still being written (or whose
   * writer died and whose lease is not recovered yet) is refused with NAMENODE_FILE_INCOMPLETE: a copy of it would
   * silently be a prefix. With `allowOpen` its visible prefix is copied (see `createReadStream`).
   */
  async get(
    dfsPath: string,
    localPath: string,
    opts: { overwrite?: boolean; onProgress?: (bytes: number) => void; allowOpen?: boolean } = {},
  ): Promise<number> {
    const source = normalizeDfsPath(dfsPath);
    if (
      !opts.overwrite &&
      (await fsStat(localPath).then(
        () => true,
        () => false,
      ))
    ) {
      throw new HarvestError("LOCAL_FILE_EXISTS", `${localPath} exists; pass overwrite to replace it`, {
        details: { field: "localPath" },
      });
    }
    const status = await this.stat(source);
    if (status.isDir)
      throw new HarvestError("NAMENODE_IS_A_DIRECTORY", `${source} is a directory`, { details: { path: source } });
    if (!status.complete && !opts.allowOpen)
      throw new HarvestError(
        "NAMENODE_FILE_INCOMPLETE",
        `${source} is still being written (or its writer died and its lease is not recovered yet); ` +
          `only ${status.length} bytes are visible. Copy the visible prefix with allowOpen (--allow-open)`,
        { details: { path: source, visibleBytes: String(status.length) } },
      );
    const partial = `${localPath}.harvest-partial-${process.pid}`;
    let bytes = 0;
    const counter = new Transform({
      transform: (chunk: Buffer, _enc, cb) => {
        bytes += chunk.length;
        opts.onProgress?.(bytes);
        cb(null, chunk);
      },
    });
    try {
      await pipeline(this.createReadStream(source), counter, fsWriteStream(partial));
      await rename(partial, localPath);
    } catch (err) {
      await rm(partial, { force: true });
      throw err;
    }
    return bytes;
  }

  /** Closes every channel (and stops renewing leases). */
  close(): void {
    this.renewer.stop();
    this.slabPool.clear();
    this.namespaceChannel.close();
    this.nn.close();
    for (const c of this.dataClients.values()) c.close();
  }

  /** @internal */
  /** @internal Opens a block write to the head of a pipeline (its transfer port, else its gRPC service). */
  openWrite(head: DatanodeInfoOutput, blockToken: string): PacketStream {
    if (this.options.transferProtocol && head.transferAddress)
      return BlockConnection.open(head.transferAddress, this.options.security);
    return this.datanode(head.address).writeBlock(blockTokenMetadata(blockToken));
  }

  /**
   * @internal Opens a read of a replica's range: from its files when its datanode is on this server (short-circuit),
   * else over its transfer port, else its gRPC service.
   */
  openRead(dn: DatanodeInfoOutput, request: ReadBlockRequest): BlockReadStream {
    const network = (): BlockReadStream =>
      this.options.transferProtocol && dn.transferAddress
        ? BlockConnection.read(dn.transferAddress, this.options.security, request)
        : this.datanode(dn.address).readBlock(request, blockTokenMetadata(request.blockToken ?? ""));
    const host = parseHostPort(dn.transferAddress)?.host;
    if (
      !this.options.shortCircuit ||
      !this.options.transferProtocol ||
      !host ||
      !isThisServer(host) ||
      this.noShortCircuit.has(dn.datanodeId)
    )
      return network();
    return new ShortCircuitRead({
      address: dn.transferAddress,
      security: this.options.security,
      request,
      numBytes: Number(request.block?.numBytes ?? 0),
      fallback: network,
      onFallback: (reason) => {
        this.noShortCircuit.add(dn.datanodeId);
        this.options.logger.debug("short-circuit read unavailable; reading over the network", {
          datanodeId: dn.datanodeId,
          reason,
        });
      },
      onLocal: () => this.readStats.shortCircuitReads++,
    });
  }

  datanode(address: string): DataTransferClient {
    let c = this.dataClients.get(address);
    if (!c) {
      c = makeClient(loadHarvestProto().DataTransfer, address, this.options.security);
      this.dataClients.set(address, c);
    }
    return c;
  }

  /** @internal */
  get namenode(): ClientNamenodeClient {
    return this.nn;
  }

  /** @internal The write streams open now: their leases are renewed until they end. */
  get leases(): LeaseRenewer {
    return this.renewer;
  }

  /**
   * @internal A namenode call of a write, retried while the namenode is away (UNAVAILABLE) or in safe mode, for up to
   * `namenodeRetryMs` (waits of 250 ms doubling up to 4 s). Only calls whose retry is harmless go through here.
   */
  async nnCallRetrying<Req, Res>(
    what: string,
    method: (req: Req, cb: (err: grpc.ServiceError | null, res?: Res) => void) => unknown,
    req: Req,
  ): Promise<Res> {
    const deadline = Date.now() + this.options.namenodeRetryMs;
    for (let waitMs = 250; ; waitMs = Math.min(waitMs * 2, 4_000)) {
      try {
        return await this.nnCall(method, req);
      } catch (err) {
        const transient = isHarvestError(err, "UNAVAILABLE") || isHarvestError(err, "NAMENODE_SAFE_MODE");
        if (!transient || Date.now() + waitMs > deadline) throw err;
        this.writeStats.namenodeRetries++;
        this.options.logger.warn(`namenode unavailable during ${what}; retrying`, {
          inMs: waitMs,
          error: errorMessage(err),
        });
        await new Promise((r) => setTimeout(r, waitMs));
      }
    }
  }

  /** @internal A namenode call: Create, AddBlock and Complete on the NamespaceCalls stream (`namespaceStream`). */
  nnCall<Req, Res>(
    method: (req: Req, cb: (err: grpc.ServiceError | null, res?: Res) => void) => unknown,
    req: Req,
  ): Promise<Res> {
    if (this.options.namespaceStream) {
      const kind =
        method === this.nn.create
          ? "create"
          : method === this.nn.addBlock
            ? "addBlock"
            : method === this.nn.complete
              ? "complete"
              : undefined;
      if (kind) return this.namespaceChannel.call(kind, req as never, this.options.namenodeTimeoutMs) as Promise<Res>;
    }
    return call(this.nn, method, req, this.options.namenodeTimeoutMs, this.callMetadata());
  }

  private callMetadata(): Metadata {
    const metadata = new Metadata();
    metadata.set(CLAIMED_USER_METADATA, this.options.user);
    return metadata;
  }
}

/**
 * The block token as call metadata too: a caller without a certificate (a task) is authenticated by it at the
 * datanode's door, before the request naming the block is read.
 */
function blockTokenMetadata(token: string): Metadata {
  const md = new Metadata();
  if (token) md.set(TOKEN_METADATA["block-token"], token);
  return md;
}

export { chunkChecksums };

// ------------------------------------------------------------------------------------------------ writing

/** Read buffers `put` cycles through: one being read while the write stream takes another, and a spare. */
const LOCAL_READ_RING = 3;

/**
 * Writes a local file into `out` (a DfsWriteStream) and ends it: large reads (16 packets each) into a few buffers used
 * again and again, the next read running while `out` takes the previous one. A fresh 1 MiB buffer per read, as a file
 * read stream makes, grows V8's external memory by a GiB per GiB put, and V8 answers with a full collection every few
 * dozen reads (about a hundred per GiB, profiled). A buffer is read into again only after `out` has taken it (the
 * write's callback): `out` copies what it keeps for a replay (ReplayArena), and the tail under one packet that it may
 * still hold in its queue is taken first by the next write, two reads before that buffer is reused. That holds for
 * full 1 MiB reads (each at least a packet); a short read (the end of the file, or a pipe) is written as a
 * copy, so a queue holding several short reads never points into a buffer being read into.
 */
async function writeLocalFile(localPath: string, out: Writable): Promise<void> {
  // Listening from the start: a stream that fails (say the file exists) emits 'error' before any write returns.
  const done = finished(out);
  done.catch(() => undefined);
  let fh: FileHandle | undefined;
  let next: Promise<Buffer> | undefined;
  try {
    fh = await open(localPath, "r");
    const file = fh;
    const ring = Array.from({ length: LOCAL_READ_RING }, () => Buffer.allocUnsafeSlow(LOCAL_READ_BYTES));
    let n = 0;
    const readNext = (): Promise<Buffer> =>
      file
        .read(ring[n++ % LOCAL_READ_RING]!, 0, LOCAL_READ_BYTES, null)
        .then((r) => (r.bytesRead === LOCAL_READ_BYTES ? r.buffer : Buffer.from(r.buffer.subarray(0, r.bytesRead))));
    next = readNext();
    for (;;) {
      const chunk = await next;
      if (chunk.length === 0) break;
      next = readNext();
      await new Promise<void>((resolve, reject) => out.write(chunk, (err) => (err ? reject(err) : resolve())));
    }
    out.end();
    await done;
  } catch (err) {
    // The write stream's own failure (a namenode refusal, a pipeline given up) is the one to report.
    const cause = (out as Writable & { errored: Error | null }).errored ?? (err as Error);
    out.destroy(cause);
    throw cause;
  } finally {
    await next?.catch(() => undefined);
    await fh?.close();
  }
}

/**
 * Renews the client's leases (RenewLease, every `leaseRenewMs`) while at least one of its write streams is open: a
 * writer streaming one long block makes no other namenode call for a while. One renewal at a time; a failure is
 * logged and the next tick tries again; the timer is unref'd and stops when the last stream ends.
 */
class LeaseRenewer {
  private readonly open = new Set<object>();
  private timer: NodeJS.Timeout | undefined;
  private inFlight = false;

  constructor(private readonly client: DfsClient) {}

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

/**
 * A packet of a block being written, as the write stream's ReplayArena keeps it: `data`, and the buffer that ends with
 * it with room for its frame head before (`headRoom`, common/block-transfer.ts), so that a transfer connection sends
 * head and data as one buffer.
 */
interface KeptPacket {
  data: Buffer;
  headRoom?: Buffer;
}

/**
 * One block's write through a pipeline. Packets go out as data arrives; they are kept (copies in the write stream's
 * ReplayArena) until the block's last packet is acknowledged (every replica on disk), so the block can be replayed to
 * a new pipeline if a datanode fails.
 */
class BlockWrite {
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
    private readonly client: DfsClient,
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

class DfsWriteStream extends Writable {
  private created = false;
  private blockSize = 0;
  private previous: BlockOutput | undefined;
  private current: BlockWrite | undefined;
  /** Bytes taken but not yet sent in a packet (a large write is sliced, never re-joined per packet). */
  private readonly pending = new ByteQueue();
  /** Copies of the current block's packets, for a failover's replay (reused block after block, then by the client). */
  private readonly replay: ReplayArena;
  private acked = 0;
  /** The most ever reported to onProgress (a replay after a failover acknowledges bytes again). */
  private reported = 0;
  private readonly excluded = new Set<string>();
  /** The error code of each failed pipeline attempt (a full disk is told apart from other failures). */
  private readonly failureCodes: string[] = [];

  constructor(
    private readonly client: DfsClient,
    private readonly path: string,
    private readonly opts: DfsCreateOptions,
  ) {
    super({ highWaterMark: LOCAL_READ_BYTES });
    this.replay = new ReplayArena(undefined, client.slabPool);
  }

  override _construct(callback: (err?: Error | null) => void): void {
    // Like HDFS's create(createParent=true): missing parent directories are made first.
    const parent = parentPath(this.path);
    const parentMade =
      parent === "/"
        ? Promise.resolve()
        : this.client
            .nnCallRetrying("mkdirs", this.client.namenode.mkdirs, { path: parent, owner: this.client.options.user })
            .then(() => undefined);
    parentMade
      .then(() =>
        this.client.nnCallRetrying("create", this.client.namenode.create, {
          path: this.path,
          owner: this.client.options.user,
          replication: this.opts.replication ?? 0,
          blockSize: this.opts.blockSizeBytes ?? 0,
          overwrite: this.opts.overwrite ?? false,
          clientName: this.client.options.clientName,
          writerDatanodeId: this.client.options.writerDatanodeId,
        }),
      )
      .then(
        (status) => {
          this.created = true;
          this.client.leases.add(this);
          this.blockSize = status.blockSize;
          if (!(this.blockSize > 0)) throw new HarvestError("DFS_WRITE_FAILED", "the namenode reported no block size");
          callback();
        },
        (err: unknown) => callback(err as Error),
      )
      .catch((err: unknown) => callback(err as Error));
  }

  override _write(chunk: Buffer, _enc: BufferEncoding, callback: (err?: Error | null) => void): void {
    this.take(chunk).then(() => callback(), callback);
  }

  override _final(callback: (err?: Error | null) => void): void {
    this.finishAll().then(() => {
      // Every packet is acknowledged: no socket reads from the slabs any more, and the client's next stream may.
      // A stream that fails keeps its slabs out of the pool (a pipeline given up may still hold packets unsent).
      this.replay.release();
      callback();
    }, callback);
  }

  override _destroy(err: Error | null, callback: (err?: Error | null) => void): void {
    // Finished, failed or destroyed: this stream's file needs no more renewals (other open streams keep theirs).
    this.client.leases.remove(this);
    callback(err);
  }

  private async take(chunk: Buffer): Promise<void> {
    let data = chunk;
    while (data.length > 0) {
      const room = this.blockSize - this.blockBytes();
      const piece = data.subarray(0, room);
      data = data.subarray(piece.length);
      this.pending.push(piece);
      while (this.pending.length >= PACKET_BYTES) await this.sendPacket(this.pending.take(PACKET_BYTES));
      if (this.blockBytes() === this.blockSize) await this.endBlock();
    }
  }

  /** Bytes of the current block, sent or pending. */
  private blockBytes(): number {
    return (this.current?.bytes ?? 0) + this.pending.length;
  }

  private async sendPacket(data: Buffer): Promise<void> {
    this.current ??= await this.newPipeline([]);
    try {
      // Kept with room for the frame's head before it (the transfer port sends head and data as one buffer).
      const headRoom = this.replay.keep(data, dataFrameHeadBytes(Math.ceil(data.length / CHUNK_BYTES)));
      await this.current.add({ data: headRoom.subarray(headRoom.length - data.length), headRoom });
    } catch (err) {
      // The packet was kept: a failover replays it with the rest of the block.
      this.current = await this.failover(this.current, err);
    }
  }

  private async endBlock(): Promise<void> {
    if (this.pending.length > 0) await this.sendPacket(this.pending.take(this.pending.length));
    let bw = this.current;
    if (!bw) return;
    for (;;) {
      try {
        await bw.finish();
        break;
      } catch (err) {
        bw = await this.failover(bw, err);
      }
    }
    bw.close();
    // Every replica has the block: its packets will not be replayed, and their slabs take the next block's.
    this.replay.reset();
    this.previous = {
      blockId: bw.located.block?.blockId ?? 0,
      genStamp: bw.located.block?.genStamp ?? 0,
      numBytes: bw.bytes,
    };
    this.acked += bw.bytes;
    this.progress(this.acked);
    this.current = undefined;
  }

  private progress(bytes: number): void {
    if (bytes <= this.reported) return;
    this.reported = bytes;
    this.opts.onProgress?.(bytes);
  }

  /**
   * The error a write that gives up ends with: DATANODE_NO_SPACE when every pipeline failed because a datanode's disk
   * was full (the user's problem is room, not the network), else DFS_WRITE_FAILED.
   */
  private givingUp(message: string, cause: unknown): HarvestError {
    const full = this.failureCodes.length > 0 && this.failureCodes.every((c) => c === "DATANODE_NO_SPACE");
    return new HarvestError(
      full ? "DATANODE_NO_SPACE" : "DFS_WRITE_FAILED",
      full ? `${message}; no datanode had room (their disks are full)` : message,
      { cause, details: { path: this.path, excluded: [...this.excluded].join(",") } },
    );
  }

  /** Abandons a failed block and replays its packets to a new pipeline without the failed datanode. */
  private async failover(failed: BlockWrite, err: unknown): Promise<BlockWrite> {
    failed.close();
    this.client.writeStats.pipelineFailures++;
    const herr = isHarvestError(err) ? err : undefined;
    this.failureCodes.push(detailsOf(err, "DATANODE_PIPELINE_FAILED")?.code || herr?.code || "INTERNAL");
    const bad = failed.failedDatanode ?? failed.located.locations[0]?.datanodeId;
    if (bad) this.excluded.add(bad);
    if (failed.located.block) {
      await this.client
        .nnCall(this.client.namenode.abandonBlock, {
          path: this.path,
          clientName: this.client.options.clientName,
          block: failed.located.block,
        })
        .catch(() => undefined);
    }
    const attempts = this.excluded.size;
    if (attempts >= this.client.options.maxBlockAttempts) {
      throw this.givingUp(
        `writing ${this.path} failed on ${attempts} pipelines (last: ${errorMessage(err)}); excluded datanodes: ${[...this.excluded].join(", ")}`,
        err,
      );
    }
    const next = await this.newPipeline(failed.packets);
    return next;
  }

  private async newPipeline(replay: KeptPacket[]): Promise<BlockWrite> {
    let located: LocatedBlockOutput;
    try {
      located = await this.client.nnCallRetrying("addBlock", this.client.namenode.addBlock, {
        path: this.path,
        clientName: this.client.options.clientName,
        ...(this.previous ? { previous: this.previous } : {}),
        excludedDatanodes: [...this.excluded],
      });
    } catch (err) {
      if (isHarvestError(err, "NAMENODE_NOT_ENOUGH_DATANODES")) {
        throw this.givingUp(
          `no datanode can take a block of ${this.path} (excluded: ${[...this.excluded].join(", ") || "none"}): ${errorMessage(err)}`,
          err,
        );
      }
      throw err;
    }
    this.previous = undefined;
    const base = this.acked;
    const bw = new BlockWrite(this.client, located, (inBlock) => this.progress(base + inBlock));
    for (const p of replay) {
      bw.packets.push(p);
      bw.bytes += p.data.length;
    }
    bw.open();
    return bw;
  }

  private async finishAll(): Promise<void> {
    if (!this.created) return;
    if (this.pending.length > 0 || this.current) await this.endBlock();
    await this.client.nnCallRetrying("complete", this.client.namenode.complete, {
      path: this.path,
      clientName: this.client.options.clientName,
      ...(this.previous ? { last: this.previous } : {}),
    });
  }
}

// ------------------------------------------------------------------------------------------------ reading

class DfsReadStream extends Readable {
  private blocks: LocatedBlockOutput[] = [];
  private fileLength = 0;
  private position: number;
  private end = 0;
  private reading = false;
  private current: BlockReadStream | undefined;

  constructor(
    private readonly client: DfsClient,
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
      for (const dn of lb.locations) {
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
                blocks: [{ block: lb.block, datanodeId: dn.datanodeId, reason: herr.message }],
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
