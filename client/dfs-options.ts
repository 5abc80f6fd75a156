/** The options of a DfsClient and of a file it creates. */
import type { Logger } from "../common/log.js";
import type { ClientSecurity } from "../common/grpc.js";
import type { Rng } from "../common/rng.js";
import type { WriteWaitEvent } from "./write-wait.js";

/** Settings of a client. */
export interface DfsClientOptions {
  /** Names this client's leases. @default a random id */
  clientName: string;
  /**
   * The datanode id of the server this client runs on, if any: a new block's first replica goes there, and a read
   * tries the replica there first (HDFS's local reads; a task over an input split placed on its data reads from its
   * own disk). @default ""
   */
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
   * A delegation token to act as its owner without a certificate (what a job's tasks hold, in HARVEST_TOKEN_FILE).
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
  /**
   * How long a write waits, retrying with a jittered backoff (100 ms doubling to 2 s), while no datanode can take its
   * next block for now (each busy with its primary tenant, or full); then DFS_DATANODES_UNAVAILABLE names why. 0: no
   * wait. @default 60000
   */
  writeWaitMs: number;
  /** The random source of the write wait's jitter. @default a SeededRng with a random seed */
  writeWaitRng: Rng;
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
  /** This file's write wait (see DfsClientOptions.writeWaitMs); absent: the client's. */
  writeWaitMs?: number;
  /** Called before each pause of a write waiting for a datanode, with the reason (`harvest fs put` prints it). */
  onWait?: (event: WriteWaitEvent) => void;
  /**
   * Cancels the write: the stream fails with DFS_WRITE_FAILED and removes the file it created, as any failed write
   * does (`harvest fs put` aborts on SIGINT and SIGTERM).
   */
  signal?: AbortSignal;
}
