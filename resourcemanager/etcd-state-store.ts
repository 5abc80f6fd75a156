/**
 * The resource manager's state in the coordination service, for highly available resource managers (YARN's
 * ZooKeeper state store, on etcd): the same contract as the LevelDB store (`RmStore`), keys under
 * `/harvest/<cluster>/rm/state/`. Every write is one transaction fenced by the active's term (the election's leader
 * key must still have the epoch as its create revision), so an old active whose term is over writes nothing: its write
 * fails with NOT_ACTIVE. A write etcd does not answer fails with COORDINATION_UNAVAILABLE. The secrets both resource
 * managers must share (the web-token key) live beside the state under `rm/secrets/`.
 *
 * etcd's limits: a request of at most 1.5 MiB (`--max-request-bytes`) and 128 operations per transaction
 * (`--max-txn-ops`). A job's record must fit in {@link MAX_SUBMITTED_RECORD_BYTES} at submission (DAG_TOO_LARGE
 * otherwise, before anything is written), a history record is trimmed to {@link MAX_HISTORY_BYTES}, and batches of
 * deletes are split under {@link MAX_TXN_OPS}.
 */
import { createHash, randomBytes } from "node:crypto";
import { Range } from "etcd3";
import type { Etcd3, Namespace } from "etcd3";
import { errorMessage, HarvestError, isHarvestError } from "../common/errors.js";
import type { Coordination } from "../common/ha/coordination.js";
import type { Fence } from "../common/ha/shared-log.js";
import type { HaAdminSource } from "../common/ha-admin.js";
import { padMs } from "./state-store.js";
import type {
  AppIdReservation,
  AppRecord,
  HistoryRecord,
  HistorySample,
  JobCleanup,
  RmStore,
  StoredDrain,
  StoredPowerDomains,
  StoredUsageTallies,
} from "./state-store.js";

/** etcd's default request limit (1.5 MiB), less room for the keys and the transaction's framing. */
export const MAX_REQUEST_BYTES = 1536 * 1024 - 16 * 1024;
/** The largest job record accepted at submission: it grows a little over the job's life and shares its last write. */
export const MAX_SUBMITTED_RECORD_BYTES = 640 * 1024;
/** A history record's task run times are thinned until it is at most this large. */
export const MAX_HISTORY_BYTES = 256 * 1024;
/** Operations per transaction, under etcd's default 128 (the fence's comparison is not one). */
export const MAX_TXN_OPS = 100;
/** Entries read per range request (a page larger than gRPC's 4 MiB answer limit is read again one by one). */
const READ_PAGE = 32;

/** The etcd-backed store of one active term (see the file comment). */
export class EtcdRmStore implements RmStore {
  private readonly client: Etcd3;
  private readonly state: Namespace;
  private readonly secrets: Namespace;
  private appSeqChain: Promise<unknown> = Promise.resolve();
  /** The job record limit at submission (acceptJob checks it before writing anything). */
  readonly submittedRecordLimitBytes = MAX_SUBMITTED_RECORD_BYTES;

  constructor(
    coordination: Coordination,
    /** The term this store writes for: the election's `fenceKey` when it became active. */
    private readonly fence: Fence,
  ) {
    this.client = coordination.client;
    this.state = coordination.service("rm").namespace("state/");
    this.secrets = coordination.service("rm").namespace("secrets/");
  }

  async open(): Promise<void> {
    // The coordination connection is the daemon's: nothing to open. Fail now if this term is already over.
    await this.write([]);
  }

  async close(): Promise<void> {
    // Nothing of its own to close (the daemon closes the coordination connection).
  }

  async clusterTimestamp(nowMs: number): Promise<number> {
    const existing = await this.read(() => this.state.get("meta/clusterTs").number());
    if (existing !== null) return existing;
    await this.write([{ key: "meta/clusterTs", value: nowMs }]);
    return nowMs;
  }

  nextAppSeq(): Promise<number> {
    const next = this.appSeqChain.then(async () => {
      const last = (await this.read(() => this.state.get("meta/appSeq").number())) ?? 0;
      await this.write([{ key: "meta/appSeq", value: last + 1 }]);
      return last + 1;
    });
    this.appSeqChain = next.catch(() => undefined);
    return next;
  }

  async putApp(app: AppRecord, opts: { unreserve?: boolean } = {}): Promise<void> {
    await this.write([
      { key: `app/${app.appId}`, value: app },
      ...(opts.unreserve ? [{ key: `reserved/${app.appId}` }] : []),
    ]);
  }

  async putReservation(r: AppIdReservation): Promise<void> {
    await this.write([{ key: `reserved/${r.appId}`, value: r }]);
  }

  async deleteReservations(appIds: readonly string[]): Promise<void> {
    await this.deleteAll(appIds.map((id) => `reserved/${id}`));
  }

  async loadReservations(): Promise<AppIdReservation[]> {
    const out = await this.scan<AppIdReservation>("reserved/");
    return out.sort((a, b) => a.seq - b.seq);
  }

  async finishApp(app: AppRecord, history: HistoryRecord, cleanup?: JobCleanup): Promise<void> {
    await this.write([
      { key: `app/${app.appId}`, value: app },
      { key: `hist/${padMs(history.finishMs)}/${history.appId}`, value: fitHistory(history) },
      ...(cleanup ? [{ key: `tokencancel/${app.appId}`, value: cleanup }] : []),
    ]);
  }

  async pendingJobCleanups(): Promise<({ appId: string } & JobCleanup)[]> {
    const out: ({ appId: string } & JobCleanup)[] = [];
    for (const [key, v] of await this.scanEntries<JobCleanup>("tokencancel/"))
      out.push({
        appId: key,
        token: v.token,
        ...(v.stagingDir ? { stagingDir: v.stagingDir } : {}),
        ...(v.user ? { user: v.user } : {}),
      });
    return out;
  }

  async jobCleanedUp(appId: string): Promise<void> {
    await this.write([{ key: `tokencancel/${appId}` }]);
  }

  async deleteApps(appIds: string[]): Promise<void> {
    await this.deleteAll(appIds.map((id) => `app/${id}`));
  }

  async loadApps(): Promise<AppRecord[]> {
    // Submission order, as LevelDB's key order gives it (application ids sort by sequence number within a cluster).
    return (await this.scan<AppRecord>("app/")).sort((a, b) => a.seq - b.seq);
  }

  async powerDomains(): Promise<StoredPowerDomains | undefined> {
    return ((await this.read(() => this.state.get("power/domains").json())) as StoredPowerDomains | null) ?? undefined;
  }

  async putPowerDomains(tree: StoredPowerDomains): Promise<void> {
    await this.write([{ key: "power/domains", value: tree }]);
  }

  async usageHistory(): Promise<{ hours: Map<number, HistorySample[]>; tallies: StoredUsageTallies | undefined }> {
    const hours = new Map<number, HistorySample[]>();
    for (const [key, samples] of await this.scanEntries<HistorySample[]>("usage/hour/"))
      hours.set(Number(key), samples);
    const tallies = (await this.read(() => this.state.get("usage/tallies").json())) as StoredUsageTallies | null;
    return { hours, tallies: tallies ?? undefined };
  }

  async putUsageHistory(
    hourMs: number,
    samples: HistorySample[],
    tallies: StoredUsageTallies,
    dropHours: readonly number[],
  ): Promise<void> {
    await this.write([
      { key: `usage/hour/${padMs(hourMs)}`, value: samples },
      { key: "usage/tallies", value: tallies },
      ...dropHours.map((h) => ({ key: `usage/hour/${padMs(h)}` })),
    ]);
  }

  async drains(): Promise<StoredDrain[]> {
    return ((await this.read(() => this.state.get("drain/all").json())) as StoredDrain[] | null) ?? [];
  }

  async putDrains(drains: readonly StoredDrain[]): Promise<void> {
    await this.write([{ key: "drain/all", value: drains }]);
  }

  async history(name: string, limit: number): Promise<HistoryRecord[]> {
    const out: HistoryRecord[] = [];
    const prefix = this.full("hist/");
    let end = Range.prefix(prefix).end;
    for (;;) {
      const page = await this.page(new Range(prefix, end), "Descend");
      for (const kv of page) {
        const h = JSON.parse(kv.value.toString()) as HistoryRecord;
        if (name && h.name !== name) continue;
        out.push(h);
        if (limit > 0 && out.length >= limit) return out;
      }
      if (page.length === 0) return out;
      end = page[page.length - 1]!.key;
    }
  }

  /**
   * The key web tokens are signed with, the same on every resource manager of the cluster: made by the first active
   * (only if still absent, so two never race to different keys) and read by the later ones.
   */
  async webTokenKey(): Promise<Buffer> {
    return Buffer.from(await this.sharedSecret("web-token.key", () => randomBytes(32).toString("hex")), "hex");
  }

  /**
   * Checks that this resource manager signs container and job-manager tokens with the same cluster secret as the
   * first active did (a digest is kept, never the secret): tokens of one would be refused under the other.
   */
  async checkClusterSecret(secret: string): Promise<void> {
    const digest = createHash("sha256").update(`harvest-rm-secret:${secret}`).digest("hex");
    const kept = await this.sharedSecret("cluster-secret.sha256", () => digest);
    if (kept !== digest)
      throw new HarvestError(
        "CONFIG_INVALID",
        "this resource manager's secret is not the one the other resource managers of the cluster use: container and " +
          "job-manager tokens would not verify after a failover; give every resource manager the same secret",
        { details: { field: "secret" } },
      );
  }

  // -------------------------------------------------------------------------------------------- etcd plumbing

  private full(key: string): string {
    return this.state.prefix.toString() + key;
  }

  /** A value under `secrets/`, made with `make()` by a fenced write if absent (the first writer wins). */
  private async sharedSecret(name: string, make: () => string): Promise<string> {
    const full = this.secrets.prefix.toString() + name;
    for (let i = 0; i < 3; i++) {
      const existing = await this.read(() => this.client.get(full).string());
      if (existing !== null) return existing;
      const value = make();
      const res = await this.commit(
        this.client
          .if(this.fence.key, "Create", "==", this.fence.epoch)
          .and(full, "Create", "==", 0)
          .then(this.client.put(full).value(value)),
      );
      if (res) return value;
      await this.write([]); // NOT_ACTIVE when the term is over; else another writer won: read its value
    }
    throw new HarvestError("COORDINATION_UNAVAILABLE", `cannot read or create the shared ${name}`);
  }

  /**
   * One fenced transaction of puts (`value` given) and deletes. Throws NOT_ACTIVE when the term is over and
   * COORDINATION_UNAVAILABLE when etcd does not answer; nothing is written in either case.
   */
  private async write(ops: { key: string; value?: unknown }[]): Promise<void> {
    let bytes = 0;
    const clauses = ops.map((op) => {
      const full = this.full(op.key);
      if (op.value === undefined) return this.client.delete().key(full);
      const json = JSON.stringify(op.value);
      bytes += Buffer.byteLength(json) + Buffer.byteLength(full);
      return this.client.put(full).value(json);
    });
    if (bytes > MAX_REQUEST_BYTES)
      throw new HarvestError(
        "INTERNAL",
        `a state write of ${bytes} bytes is over the coordination service's request limit (${MAX_REQUEST_BYTES})`,
      );
    const ok = await this.commit(this.client.if(this.fence.key, "Create", "==", this.fence.epoch).then(...clauses));
    if (!ok)
      throw new HarvestError(
        "NOT_ACTIVE",
        `the resource manager's term ${this.fence.epoch} is over: its state write was refused`,
        { details: { epoch: String(this.fence.epoch) } },
      );
  }

  private async commit(txn: ReturnType<Etcd3["if"]>): Promise<boolean> {
    try {
      return (await txn.commit()).succeeded;
    } catch (err) {
      throw unavailable("write the resource manager's state", err);
    }
  }

  private async read<T>(get: () => Promise<T>): Promise<T> {
    try {
      return await get();
    } catch (err) {
      throw unavailable("read the resource manager's state", err);
    }
  }

  private async deleteAll(keys: readonly string[]): Promise<void> {
    for (let i = 0; i < keys.length; i += MAX_TXN_OPS)
      await this.write(keys.slice(i, i + MAX_TXN_OPS).map((key) => ({ key })));
  }

  private async scan<T>(prefix: string): Promise<T[]> {
    return (await this.scanEntries<T>(prefix)).map(([, v]) => v);
  }

  /** Every entry under `prefix`, in key order, with its key less the prefix. */
  private async scanEntries<T>(prefix: string): Promise<[string, T][]> {
    const full = this.full(prefix);
    const out: [string, T][] = [];
    let start: Buffer = Buffer.from(full);
    const end = Range.prefix(full).end;
    for (;;) {
      const page = await this.page(new Range(start, end), "Ascend");
      for (const kv of page) out.push([kv.key.toString().slice(full.length), JSON.parse(kv.value.toString()) as T]);
      if (page.length === 0) return out;
      start = Buffer.concat([page[page.length - 1]!.key, Buffer.from([0])]);
    }
  }

  /**
   * One page of a range, in `order` (a descending page excludes `range.end`, which the caller passes as the last key
   * it has read). A page over gRPC's answer limit is read one entry at a time.
   */
  private async page(range: Range, order: "Ascend" | "Descend"): Promise<{ key: Buffer; value: Buffer }[]> {
    const get = async (limit: number): Promise<{ key: Buffer; value: Buffer }[]> =>
      (await this.client.getAll().inRange(range).sort("Key", order).limit(limit).exec()).kvs;
    try {
      return await get(READ_PAGE);
    } catch (err) {
      if (!/RESOURCE_EXHAUSTED|larger than max/i.test(errorMessage(err))) throw unavailable("read the state", err);
      return this.read(() => get(1));
    }
  }
}

function unavailable(what: string, err: unknown): HarvestError {
  if (isHarvestError(err)) return err;
  return new HarvestError(
    "COORDINATION_UNAVAILABLE",
    `cannot ${what} in the coordination service: ${errorMessage(err)}`,
    {
      cause: err,
    },
  );
}

/**
 * The history record as stored: its task run times thinned (every other sample dropped, again and again) until it
 * is at most {@link MAX_HISTORY_BYTES}, and dropped altogether if that is not enough (a job of very many vertices).
 */
export function fitHistory(history: HistoryRecord): HistoryRecord {
  let h = history;
  while (Buffer.byteLength(JSON.stringify(h)) > MAX_HISTORY_BYTES) {
    const durations = h.taskDurations;
    if (!durations || Object.values(durations).every((d) => d.length <= 1)) {
      const { taskDurations: _dropped, ...rest } = h;
      return rest;
    }
    h = {
      ...h,
      taskDurations: Object.fromEntries(
        Object.entries(durations).map(([v, d]) => [v, d.filter((_x, i) => i % 2 === 0)]),
      ),
    };
  }
  return h;
}

/** What a highly available resource manager's active term gives it (ha-resource-manager.ts builds it on promotion). */
export interface RmHaTerm {
  /** The term (the election's fencing epoch): in every answer to node managers and every container token. */
  epoch: number;
  /** The state in the coordination service, fenced by the term. */
  store: RmStore;
  /** The web-token key every resource manager of the cluster shares. */
  webTokenKey: Buffer;
  /** HaAdmin's answers (role, term, hand-over). */
  admin: HaAdminSource;
}
