/**
 * A datanode's DataTransferService on its own, for tests that drive it directly: a real block store, a primary tenant
 * that is never busy, and every block token accepted (the token checks have their own tests).
 */
import { Logger } from "../common/log.js";
import type { BlockStore } from "../datanode/block-store.js";
import { DataTransferService } from "../datanode/data-transfer.js";

export function standaloneTransferService(store: BlockStore, datanodeId = "dn1"): DataTransferService {
  return new DataTransferService({
    datanodeId,
    store,
    log: new Logger("test", "error", () => undefined),
    isPrimaryBusy: () => false,
    reimage: () => Promise.reject(new Error("a standalone transfer service cannot reimage")),
    checkBlockToken: () => undefined,
  });
}
