/** A datanode as the namenode tracks it: its registration, its last heartbeat and the commands waiting for it. */
import type * as grpc from "@grpc/grpc-js";
import type { DatanodeSpace } from "./capacity.js";
import type { BlockRecord } from "./namespace-store.js";
import type { DatanodeToNamenodeOutput } from "../proto/generated/harvest/v1/DatanodeToNamenode.js";
import type { NamenodeToDatanode } from "../proto/generated/harvest/v1/NamenodeToDatanode.js";
import type { ReplicateCommand } from "../proto/generated/harvest/v1/ReplicateCommand.js";

/** A datanode is LIVE while it heartbeats within the expiry, DEAD after. */
export type DatanodeState = "LIVE" | "DEAD";

/** A datanode's DatanodeStream, server side. */
export type DatanodeStream = grpc.ServerDuplexStream<DatanodeToNamenodeOutput, NamenodeToDatanode>;

/** What the namenode knows of a datanode that has registered since its start (its space: capacity.ts). */
export interface DatanodeEntry extends DatanodeSpace {
  datanodeId: string;
  address: string;
  /** Its block transfer port (empty: gRPC only). */
  transferAddress: string;
  /** Its web server's base URL, where WebHDFS redirects (empty: none). */
  webUrl: string;
  rack: string;
  storageId: string;
  primaryBusy: boolean;
  activeTransfers: number;
  lastHeartbeatMs: number;
  state: DatanodeState;
  stream: DatanodeStream | undefined;
  /** Commands for the next heartbeat answer. */
  replicate: ReplicateCommand[];
  deletes: BlockRecord[];
  reimages: number;
  /**
   * One wipe sends two signals: a registration with a new storage id and a ReimageReport, in either order. Counted
   * once: a ReimageReport on a session whose registration brought a new storage id is not counted again, and a new
   * storage id is not counted when a ReimageReport already counted the wipe of the old one (`reportedWipeOf`).
   */
  sessionWipeCounted: boolean;
  reportedWipeOf: string;
  /** A full block report came on the current stream: what the datanode holds is known (a drain may complete). */
  blockReported: boolean;
}
