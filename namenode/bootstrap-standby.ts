/**
 * `harvest admin ha bootstrap-standby`: makes a new standby namenode's store from the active's checkpoint (HDFS's
 * `hdfs namenode -bootstrapStandby`). Run on the new host before its namenode first starts: the pages of the active's
 * store (namenode/ha-role.ts `serveCheckpoint`) are written into a fresh LevelDB beside the data directory, which
 * becomes `<dataDir>/namespace` only once complete; the namenode then follows the shared log from the checkpoint's
 * entry on. The delegation key needs no copy: both namenodes read it from the coordination service.
 */
import { existsSync, mkdirSync, readdirSync, renameSync, rmSync } from "node:fs";
import { join } from "node:path";
import { errorMessage, fromGrpcError, HarvestError } from "../common/errors.js";
import { loadHarvestProto, makeClient } from "../common/grpc.js";
import type { ClientSecurity } from "../common/grpc.js";
import type { CheckpointPageOutput } from "../proto/generated/harvest/v1/CheckpointPage.js";
import { Coordination } from "../common/ha/coordination.js";
import type { HaCoordination } from "../common/ha/coordination.js";
import { SharedLog } from "../common/ha/shared-log.js";
import { Logger } from "../common/log.js";
import { NamespaceStore } from "./namespace-store.js";
import type { BatchOp } from "./namespace-store.js";

/** What to bootstrap. */
export interface BootstrapOptions {
  /** The new namenode's data directory (its `dataDir` option). */
  dataDir: string;
  /** The new namenode's haId: recorded at the active so that it keeps the log entries this store still needs. */
  haId: string;
  /** The namenode to copy (the active; any namenode's store is a checkpoint, the active's is the newest). */
  from: string;
  security?: ClientSecurity;
  /** Replace a store already there (a standby too far behind the log). @default false */
  force?: boolean;
  /**
   * The haId of the namenode this one replaces, when it differs: its mark of the log entries it held is forgotten in
   * the coordination service, so the active trims the log past it again (else the log keeps `haLogRetainEntries`).
   */
  replaces?: { haId: string; coordination: HaCoordination };
}

/** Copies the checkpoint; resolves with the log entry it holds and how many keys it has. */
export async function bootstrapStandby(o: BootstrapOptions): Promise<{ txid: number; keys: number }> {
  const target = join(o.dataDir, "namespace");
  if (existsSync(target) && readdirSync(target).length > 0 && !o.force)
    throw new HarvestError(
      "CONFIG_INVALID",
      `${target} already holds a namespace; --force replaces it (only for a standby too far behind the log)`,
      { details: { field: "dataDir" } },
    );
  mkdirSync(o.dataDir, { recursive: true, mode: 0o700 });
  const partial = join(o.dataDir, "namespace.bootstrap");
  rmSync(partial, { recursive: true, force: true });
  const store = new NamespaceStore(partial);
  await store.open();
  let keys = 0;
  const client = makeClient(loadHarvestProto().NamenodeCheckpoint, o.from, o.security);
  try {
    const stream = client.getCheckpoint({ standbyId: o.haId });
    await new Promise<void>((resolve, reject) => {
      let writing = Promise.resolve();
      stream.on("data", (page: CheckpointPageOutput) => {
        stream.pause();
        writing = writing
          .then(async () => {
            const ops: BatchOp[] = page.entries.map((e) => ({
              type: "put",
              key: e.key,
              value: JSON.parse(e.valueJson) as unknown,
            }));
            await store.restorePage(ops);
            keys += ops.length;
            stream.resume();
          })
          .catch((err: unknown) => {
            stream.cancel();
            reject(err instanceof Error ? err : new Error(errorMessage(err)));
          });
      });
      stream.on("error", (err) => reject(fromGrpcError(err)));
      stream.on("end", () => void writing.then(resolve, reject));
    });
    const txid = await store.appliedTxid();
    await store.close();
    if (keys === 0) throw new HarvestError("INTERNAL", `${o.from} sent an empty checkpoint`);
    rmSync(target, { recursive: true, force: true });
    renameSync(partial, target);
    if (o.replaces && o.replaces.haId !== o.haId) await forgetMaster(o.replaces.coordination, o.replaces.haId);
    return { txid, keys };
  } catch (err) {
    await store.close().catch(() => undefined);
    rmSync(partial, { recursive: true, force: true });
    throw err;
  } finally {
    client.close();
  }
}

/** Forgets a replaced namenode's mark of the shared-log entries it held. */
async function forgetMaster(options: HaCoordination, haId: string): Promise<void> {
  const coordination = new Coordination(options);
  try {
    await new SharedLog(coordination, "nn", new Logger("bootstrap-standby")).forgetApplied(haId);
  } finally {
    coordination.close();
  }
}
