/**
 * The namenode admin client: decommission datanodes before a planned reimage or maintenance (their blocks are copied
 * to in-service datanodes, HDFS-style), follow the drains, and put datanodes back in service. The namenode side of
 * `harvest admin drain|undrain` wraps it.
 */
import { Metadata } from "@grpc/grpc-js";
import { clientConfigOf, clientSecurityOf, nnAddressFromConfig } from "./client-config.js";
import type { ClientConfig } from "./client-config.js";
import { CLAIMED_USER_METADATA, localUserName } from "../common/fs-permission.js";
import { call, loadHarvestProto, makeClient } from "../common/grpc.js";
import type { ClientSecurity } from "../common/grpc.js";
import type { DatanodeAdminStatusOutput } from "../proto/generated/harvest/v1/DatanodeAdminStatus.js";
import type { NamenodeAdminClient as GrpcNamenodeAdminClient } from "../proto/generated/harvest/v1/NamenodeAdmin.js";

/**
 * A datanode's admin state (NORMAL, DECOMMISSION_IN_PROGRESS or DECOMMISSIONED) and drain progress: blocks on it,
 * blocks still needing copies elsewhere, start, deadline and finish times (ms since the epoch, 0 for none), liveness,
 * and a message such as "deadline passed with 3 blocks not yet copied".
 */
export type DatanodeAdminStatus = DatanodeAdminStatusOutput;

/** Client of a namenode's NamenodeAdmin service. */
export class NamenodeAdminClient {
  private readonly nn: GrpcNamenodeAdminClient;
  private readonly user: string;
  private readonly timeoutMs: number;

  /**
   * `security`: TLS and an admin's certificate (a secure cluster); undefined: plaintext, where the namenode takes the
   * claimed `user` (default: this process's account) and requires it to be its superuser.
   */
  constructor(
    readonly namenodeAddress: string,
    security?: ClientSecurity,
    options: { user?: string; timeoutMs?: number } = {},
  ) {
    this.nn = makeClient(loadHarvestProto().NamenodeAdmin, namenodeAddress, security);
    this.user = options.user ?? localUserName();
    this.timeoutMs = options.timeoutMs ?? 30_000;
  }

  /**
   * A client of the cluster a client configuration names: `config` is a file or a parsed configuration; without it,
   * `$HARVEST_CONF`, then `~/.harvest/client.json`.
   */
  static fromConfig(config?: ClientConfig | string): NamenodeAdminClient {
    const c = clientConfigOf(config);
    return new NamenodeAdminClient(nnAddressFromConfig(c), clientSecurityOf(c));
  }

  /**
   * Starts draining the datanodes (durable once resolved); `deadlineMs` (ms since the epoch) is when the operator
   * wants them drained, reported when passed, never enforced. Asking again for a draining datanode only replaces its
   * deadline. Fails with NAMENODE_DATANODE_NOT_FOUND, changing nothing, when any id is unknown.
   */
  async decommission(
    datanodeIds: readonly string[],
    options: { deadlineMs?: number } = {},
  ): Promise<DatanodeAdminStatus[]> {
    const req = { datanodeIds: [...datanodeIds], deadlineMs: options.deadlineMs ?? 0 };
    return (await call(this.nn, this.nn.decommission, req, this.timeoutMs, this.metadata())).datanodes;
  }

  /** Puts the datanodes back in service (durable once resolved); their replicas count again. */
  async recommission(datanodeIds: readonly string[]): Promise<DatanodeAdminStatus[]> {
    const req = { datanodeIds: [...datanodeIds] };
    return (await call(this.nn, this.nn.recommission, req, this.timeoutMs, this.metadata())).datanodes;
  }

  /** The admin state and drain progress of the given datanodes, or of every one the namenode knows, by id. */
  async status(datanodeIds: readonly string[] = []): Promise<DatanodeAdminStatus[]> {
    const req = { datanodeIds: [...datanodeIds] };
    return (await call(this.nn, this.nn.getDecommissionStatus, req, this.timeoutMs, this.metadata())).datanodes;
  }

  close(): void {
    this.nn.close();
  }

  /** The claimed user, which only a plaintext namenode reads (a certificate's identity wins over it). */
  private metadata(): Metadata {
    const metadata = new Metadata();
    metadata.set(CLAIMED_USER_METADATA, this.user);
    return metadata;
  }
}
