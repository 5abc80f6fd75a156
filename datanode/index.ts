/** The datanode: daemon, options, the block store, the DataTransfer service and the pipeline writer. */
export { DataNode } from "./datanode.js";
export type { DaemonState } from "../common/lifecycle.js";
export type { DataNodeDeps } from "./datanode.js";
export { resolveDataNodeOptions } from "./options.js";
export type { DataNodeOptions, DataNodeOptionsInput } from "./options.js";
export {
  BlockStore,
  CHUNK_SIZE,
  READ_PIECE_BYTES,
  ReplicaWriter,
  SUBDIR_COUNT,
  checkBlockId,
  checkBlockKey,
  checkGenStamp,
  chunkChecksums,
} from "./block-store.js";
export type {
  BlockKey,
  BlockStoreListener,
  BlockStoreOptions,
  ReadPiece,
  ScanResult,
  StoredReplica,
} from "./block-store.js";
export { DataTransferService, MAX_PACKET_BYTES } from "./data-transfer.js";
export type { DataTransferHost } from "./data-transfer.js";
export { ackError, sendBlock } from "./block-sender.js";
export type { SendBlockOptions, SendBlockResult } from "./block-sender.js";
