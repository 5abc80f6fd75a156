/**
 * What a DfsClient's write stream, read stream and lease renewer use of their client (DfsClient implements it): its
 * options, its namenode calls, its block connections and its counters.
 */
import type { DfsClientOptions } from "./dfs-options.js";
import type * as grpc from "@grpc/grpc-js";
import type { BlockReadStream, PacketStream } from "../common/block-transfer.js";
import type { ClientNamenodeClient } from "../proto/generated/harvest/v1/ClientNamenode.js";
import type { DatanodeInfoOutput } from "../proto/generated/harvest/v1/DatanodeInfo.js";
import type { ReadBlockRequest } from "../proto/generated/harvest/v1/ReadBlockRequest.js";
import type { SlabPool } from "./replay-arena.js";

/** The write streams a client renews leases for (LeaseRenewer). */
export interface LeaseSet {
  /** A write stream opened (its file exists on the namenode). */
  add(stream: object): void;
  /** A write stream ended (completed, failed or destroyed). */
  remove(stream: object): void;
}

/** What reads met so far (DfsClient.readStats). */
export interface ReadStats {
  busyRefusals: number;
  failovers: number;
  corruptReplicas: number;
  shortCircuitReads: number;
}

/** What writes met so far (DfsClient.writeStats). */
export interface WriteStats {
  pipelineFailures: number;
  leaseRenewals: number;
  namenodeRetries: number;
  /** Pauses of writes waiting for a datanode that could take a block (busy primaries, full disks). */
  datanodeWaits: number;
}

/** A namenode method as a generated gRPC client has it. */
export type NamenodeMethod<Req, Res> = (req: Req, cb: (err: grpc.ServiceError | null, res?: Res) => void) => unknown;

/** The client as its streams see it. */
export interface DfsHost {
  readonly options: DfsClientOptions;
  readonly namenode: ClientNamenodeClient;
  readonly readStats: ReadStats;
  readonly writeStats: WriteStats;
  /** Replay slabs a completed write stream leaves for the next one (ReplayArena). */
  readonly slabPool: SlabPool;
  /** The write streams open now: their leases are renewed until they end. */
  readonly leases: LeaseSet;
  /** Opens a block write to the head of a pipeline. */
  openWrite(head: DatanodeInfoOutput, blockToken: string): PacketStream;
  /** Opens a read of a replica's range. */
  openRead(dn: DatanodeInfoOutput, request: ReadBlockRequest): BlockReadStream;
  /** A namenode call. */
  nnCall<Req, Res>(method: NamenodeMethod<Req, Res>, req: Req): Promise<Res>;
  /** A namenode call of a write, retried while the namenode is away or in safe mode. */
  nnCallRetrying<Req, Res>(what: string, method: NamenodeMethod<Req, Res>, req: Req): Promise<Res>;
}
