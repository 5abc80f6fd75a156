/**
 * The datanode: daemon, options, the block store (replica files and their writer), the DataTransfer service and the
 * pipeline writer. It has no pure policies of its own (no policy/ folder).
 */
export { DataNode } from "./datanode.js";
export type { DaemonState } from "../common/lifecycle.js";
export type { DataNodeDeps } from "./datanode.js";
export { resolveDataNodeOptions } from "./options.js";
export type { DataNodeOptions, DataNodeOptionsInput } from "./options.js";
export { BlockStore } from "./block-store.js";
export { chunkChecksums } from "../common/checksum.js";
export type { BlockStoreListener, BlockStoreOptions, ReadPiece, ScanResult } from "./block-store.js";
export {
  CHUNK_SIZE,
  READ_PIECE_BYTES,
  SUBDIR_COUNT,
  checkBlockId,
  checkBlockKey,
  checkGenStamp,
} from "./replica-files.js";
export type { BlockKey, StoredReplica } from "./replica-files.js";
export { ReplicaWriter } from "./replica-writer.js";
export { DataTransferService, MAX_PACKET_BYTES } from "./data-transfer.js";
export type { DataTransferHost } from "./data-transfer.js";
export { ackError, sendBlock } from "./block-sender.js";
export type { SendBlockOptions, SendBlockResult } from "./block-sender.js";
export { TRANSFER_CIPHERS } from "./block-server.js";
