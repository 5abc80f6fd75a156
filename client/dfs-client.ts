/**
 * DfsClient: Harvest's file system from TypeScript. Writes go through a pipeline of datanodes and a block counts as
 * written only when every replica in its pipeline has it on disk; reads verify every 512-byte chunk's CRC32C and fail
 * over to the next replica when a datanode errs, holds a corrupt replica, or refuses because its primary tenant is busy.
 */
import type { DfsHost, NamenodeMethod } from "./dfs-host.js";
import type { DfsClientOptions, DfsCreateOptions } from "./dfs-options.js";
import { LeaseRenewer } from "./lease-renewer.js";
import { DfsReadStream } from "./read-stream.js";
import { DfsWriteStream, writeLocalFile } from "./write-stream.js";
import { clientConfigOf, clientSecurityOf, nnAddressFromConfig } from "./client-config.js";
import type { ClientConfig } from "./client-config.js";
import type { WebTokenResponseOutput } from "../proto/generated/harvest/v1/WebTokenResponse.js";
import { Metadata } from "@grpc/grpc-js";
import { CHUNK_BYTES, chunkChecksums } from "../common/checksum.js";
import { BlockConnection } from "../common/block-transfer.js";
import type { BlockReadStream, PacketStream } from "../common/block-transfer.js";
import { randomInt, randomUUID } from "node:crypto";
import { SeededRng } from "../common/rng.js";
import { checkWriteWaitMs } from "./write-wait.js";
import { NamespaceChannel } from "./namespace-channel.js";
import { createWriteStream as fsWriteStream } from "node:fs";
import { rename, rm, stat as fsStat } from "node:fs/promises";
import type { Readable, Writable } from "node:stream";
import { Transform } from "node:stream";
import { pipeline } from "node:stream/promises";
import { resolveDfsPath } from "../common/dfs-path.js";
import { readContainerTokens } from "../common/task-contract.js";
import type { ContainerTokens } from "../common/task-contract.js";
import { errorMessage, HarvestError, isHarvestError } from "../common/errors.js";
import { CLAIMED_USER_METADATA, localUserName } from "../common/fs-permission.js";
import { unverifiedTokenOwner } from "../common/delegation-token.js";
import { identityOfCertificate, isValidIdentityName } from "../common/tls.js";
import { X509Certificate } from "node:crypto";
import { readFileSync } from "node:fs";
import { TOKEN_METADATA } from "../common/auth.js";
import { Logger } from "../common/log.js";
import { cachedClient, call, loadHarvestProto, makeClient } from "../common/grpc.js";
import type { ClientNamenodeClient } from "../proto/generated/harvest/v1/ClientNamenode.js";
import type { DataTransferClient } from "../proto/generated/harvest/v1/DataTransfer.js";
import type { DatanodeReportOutput } from "../proto/generated/harvest/v1/DatanodeReport.js";
import type { CapacityTotalsOutput } from "../proto/generated/harvest/v1/CapacityTotals.js";
import type { FileStatusOutput } from "../proto/generated/harvest/v1/FileStatus.js";
import type { FsckReportOutput } from "../proto/generated/harvest/v1/FsckReport.js";
import type { LocatedBlocksOutput } from "../proto/generated/harvest/v1/LocatedBlocks.js";
import type { DatanodeInfoOutput } from "../proto/generated/harvest/v1/DatanodeInfo.js";
import type { ReadBlockRequest } from "../proto/generated/harvest/v1/ReadBlockRequest.js";
import { SlabPool } from "./replay-arena.js";
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
/** The live datanodes' space in total ({@link DfsClient.capacity}). */
export type DfsCapacityTotals = CapacityTotalsOutput;

export type { BlockReadStream } from "../common/block-transfer.js";

/** Bytes covered by one checksum (common/checksum.ts). */
export { CHUNK_BYTES };
export { PACKET_BYTES } from "./write-stream.js";
export type { DfsClientOptions, DfsCreateOptions } from "./dfs-options.js";

/** Client of a Harvest namenode and its datanodes. */
export class DfsClient implements DfsHost {
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
   * lease renewals sent, namenode calls retried through an outage, and pauses waiting for a datanode that could take
   * a block (busy primaries, full disks).
   */
  readonly writeStats = { pipelineFailures: 0, leaseRenewals: 0, namenodeRetries: 0, datanodeWaits: 0 };
  private readonly renewer: LeaseRenewer;
  private readonly namespaceChannel: NamespaceChannel;
  /** The caller's name, once a relative path needed it (see {@link resolvePath}). */
  private homePath: string | undefined;
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
      writeWaitMs: 60_000,
      writeWaitRng: new SeededRng(randomInt(2 ** 32)),
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
    checkWriteWaitMs(this.options.writeWaitMs, "writeWaitMs");
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
   * job's file-system token from the container's token file, HARVEST_TOKEN_FILE; on a plaintext one the job's
   * submitter as the user it claims, HARVEST_DFS_USER (the node manager sets them).
   */
  static fromTaskEnv(env: NodeJS.ProcessEnv = process.env, options: Partial<DfsClientOptions> = {}): DfsClient {
    const address = env["HARVEST_NN_ADDRESS"];
    if (!address)
      throw new HarvestError("CLUSTER_NOT_FOUND", "a task needs HARVEST_NN_ADDRESS to reach the file system");
    let tokens: ContainerTokens;
    try {
      tokens = readContainerTokens(env);
    } catch (err) {
      throw new HarvestError("CONFIG_INVALID", errorMessage(err), { cause: err });
    }
    const ca = env["HARVEST_CA"];
    const nodeId = env["HARVEST_NODE_ID"];
    const user = env["HARVEST_DFS_USER"];
    return new DfsClient(address, {
      ...(ca ? { security: { ca } } : {}),
      dfsToken: tokens["dfs-token"] ?? "",
      // The task's own server: its writes' first replicas go there and its reads try the replica there first.
      ...(nodeId ? { writerDatanodeId: nodeId } : {}),
      // On a plaintext cluster: the job's submitter, whom the node manager names.
      ...(user ? { user } : {}),
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

  /**
   * The absolute path `path` names: a path that does not start with `/` is relative to the caller's home,
   * `/user/<name>` (HDFS's working directory), the name being whom the namenode takes this client for (its
   * certificate's, its delegation token's owner, else the user it claims on a plaintext cluster). `..` and `.` are
   * errors either way (DFS_BAD_PATH): a path never steps up.
   */
  resolvePath(path: string, field = "path"): string {
    const relative = typeof path === "string" && path !== "" && !path.startsWith("/");
    return resolveDfsPath(path, relative ? this.workingDirectory(field) : "/", field);
  }

  /**
   * The directory relative paths resolve against: the caller's home, `/user/<name>` (see {@link resolvePath}), which
   * may not exist yet. DFS_BAD_PATH when this client cannot tell its name.
   */
  workingDirectory(field = "path"): string {
    this.homePath ??= callerName(this.options);
    if (this.homePath === undefined || !isValidIdentityName(this.homePath) || /^\.{1,2}$/.test(this.homePath))
      throw new HarvestError(
        "DFS_BAD_PATH",
        "a relative path needs the caller's home, /user/<name>, and this client cannot tell its name: use an absolute path",
        { details: { field } },
      );
    return `/user/${this.homePath}`;
  }

  /** Creates a directory and its missing parents. */
  async mkdir(path: string): Promise<DfsFileStatus> {
    return this.nnCall(this.nn.mkdirs, { path: this.resolvePath(path), owner: this.options.user });
  }

  /** A web token for this client's certificate and the namenode's web URL (`harvest ui login`). */
  webToken(lifetimeMs = 0): Promise<WebTokenResponseOutput> {
    return this.nnCall(this.nn.getWebToken, { lifetimeMs });
  }

  /** This user's home directory, `/user/<name>`, which the namenode creates the first time it is asked. */
  async homeDirectory(): Promise<string> {
    return (await this.nnCall(this.nn.getHomeDirectory, {})).path;
  }

  async stat(path: string): Promise<DfsFileStatus> {
    return this.nnCall(this.nn.stat, { path: this.resolvePath(path) });
  }

  async list(path: string): Promise<DfsFileStatus[]> {
    return (await this.nnCall(this.nn.list, { path: this.resolvePath(path) })).entries;
  }

  /** Deletes a file, or a directory (non-empty ones only with `recursive`); resolves to whether anything was deleted. */
  async delete(path: string, opts: { recursive?: boolean } = {}): Promise<boolean> {
    return (await this.nnCall(this.nn.delete, { path: this.resolvePath(path), recursive: opts.recursive ?? false }))
      .deleted;
  }

  async rename(src: string, dst: string): Promise<DfsFileStatus> {
    return this.nnCall(this.nn.rename, { src: this.resolvePath(src, "src"), dst: this.resolvePath(dst, "dst") });
  }

  /** A file's blocks with their live replicas (preferred first). */
  async blockLocations(path: string): Promise<DfsBlockLocations> {
    return this.nnCall(this.nn.getBlockLocations, { path: this.resolvePath(path), offset: 0, length: 0 });
  }

  async fsck(path = "/"): Promise<DfsFsckReport> {
    return this.nnCall(this.nn.fsck, { path: this.resolvePath(path) });
  }

  /** Sets the permission bits (0..0o777, e.g. 0o750) of a file or directory; only its owner or the superuser may. */
  async chmod(path: string, mode: number): Promise<DfsFileStatus> {
    return this.nnCall(this.nn.setPermission, { path: this.resolvePath(path), mode });
  }

  /**
   * Sets the owner and/or group ("" or absent keeps it): only the superuser may change the owner; the owner may change
   * the group.
   */
  async chown(path: string, owner: string, group = ""): Promise<DfsFileStatus> {
    return this.nnCall(this.nn.setOwner, { path: this.resolvePath(path), owner, group });
  }

  async datanodes(): Promise<DfsDatanode[]> {
    return (await this.nnCall(this.nn.getDatanodes, {})).datanodes;
  }

  /**
   * The file system's space (`hdfs dfs -df`): the live datanodes' totals, each file system counted once (capacity =
   * DFS used + non-DFS used + remaining), and every datanode's report.
   */
  async capacity(): Promise<{ totals: DfsCapacityTotals; datanodes: DfsDatanode[] }> {
    const r = await this.nnCall(this.nn.getDatanodes, {});
    const totals = r.totals ?? {
      capacityBytes: 0,
      dfsUsedBytes: 0,
      nonDfsUsedBytes: 0,
      remainingBytes: 0,
      fileSystems: 0,
      liveDatanodes: 0,
    };
    return { totals, datanodes: r.datanodes };
  }

  /**
   * A writable stream into a new file. 'finish' fires only after the last block is on disk at every replica of its
   * pipeline and the namenode has closed the file; an error means the file is not complete.
   */
  createWriteStream(path: string, opts: DfsCreateOptions = {}): Writable {
    return new DfsWriteStream(this, this.resolvePath(path), opts);
  }

  /**
   * A readable stream of a file (or of `length` bytes from `offset`), verified chunk by chunk, with replica failover.
   * As in HDFS, a file still being written can be read: the stream returns its visible prefix (the blocks committed
   * so far; the block being written is not yet visible) and ends there. `stat()` says whether a file is complete;
   * `get()` refuses an open file unless asked.
   */
  createReadStream(path: string, opts: { offset?: number; length?: number } = {}): Readable {
    return new DfsReadStream(this, this.resolvePath(path), opts.offset ?? 0, opts.length ?? 0);
  }

  /** Copies a local file into the file system. */
  async put(localPath: string, dfsPath: string, opts: DfsCreateOptions = {}): Promise<DfsFileStatus> {
    const target = this.resolvePath(dfsPath);
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
    const source = this.resolvePath(dfsPath);
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
    return cachedClient(this.dataClients, loadHarvestProto().DataTransfer, address, this.options.security);
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
  async nnCallRetrying<Req, Res>(what: string, method: NamenodeMethod<Req, Res>, req: Req): Promise<Res> {
    const deadline = Date.now() + this.options.namenodeRetryMs;
    for (let waitMs = 250; ; waitMs = Math.min(waitMs * 2, 4_000)) {
      try {
        return await this.nnCall(method, req);
      } catch (err) {
        // NOT_ACTIVE: no namenode became active within the call's deadline (a failover under way).
        const transient = isHarvestError(err, "UNAVAILABLE", "NAMENODE_SAFE_MODE", "NOT_ACTIVE");
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
  nnCall<Req, Res>(method: NamenodeMethod<Req, Res>, req: Req): Promise<Res> {
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

/**
 * Whom the namenode takes a client for: the name in its certificate, else its delegation token's owner, else the user
 * it claims (a plaintext cluster); undefined when that cannot be read.
 */
function callerName(o: DfsClientOptions): string | undefined {
  if (o.security?.cert) {
    let subject: string;
    try {
      subject = new X509Certificate(readFileSync(o.security.cert)).subject;
    } catch {
      return undefined;
    }
    const fields = subject.split("\n").map((l) => [l.slice(0, l.indexOf("=")), l.slice(l.indexOf("=") + 1)]);
    return identityOfCertificate({ subject: Object.fromEntries(fields) as Record<string, string> })?.name;
  }
  if (o.dfsToken) return unverifiedTokenOwner(o.dfsToken);
  return o.user;
}
