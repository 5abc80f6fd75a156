/**
 * A service's shared edit log in the coordination service (HDFS's quorum journal, on etcd): entries keyed by
 * transaction id under `/harvest/<cluster>/<service>/log/<txid, 16 digits>`, each `{ epoch, body }`. The active
 * appends with a transaction fenced by its term (election.ts) that also requires the key to be new, so an entry is
 * written once, by the active of its term, and is durable on a majority of members once the append resolves. Standbys
 * read it in order (a watch wakes them; they read by range, so a lost event only delays). Each master records how far
 * it applied (`applied/<id>`), and the active trims what everyone has applied (keeping at most a bound anyway).
 *
 * etcd refuses requests over 1.5 MiB: an entry is at most {@link MAX_ENTRY_BYTES}; callers split bigger batches.
 */
import { Range } from "etcd3";
import type { ITxnResponse, Namespace, Watcher } from "etcd3";
import { HarvestError, errorMessage } from "../errors.js";
import type { Logger } from "../log.js";
import type { Coordination } from "./coordination.js";

/** The largest entry appended (its JSON), well inside etcd's 1.5 MiB request limit. */
export const MAX_ENTRY_BYTES = 1024 * 1024;
/** Entries read per range request while catching up. */
const READ_PAGE = 256;

/** One entry of the log. */
export interface LogEntry<T> {
  txid: number;
  epoch: number;
  body: T;
}

/** What a fenced append compares: the term's leader key and its create revision (election.ts `fenceKey`). */
export interface Fence {
  key: string;
  epoch: number;
}

const txidKey = (txid: number): string => String(txid).padStart(16, "0");

/** The shared log of one service. */
export class SharedLog<T> {
  private readonly entries: Namespace;
  private readonly applied: Namespace;
  private watcher: Watcher | undefined;
  private tailing = false;
  /** Entries appended (each one consensus write) since start, for the figures. */
  appends = 0;

  constructor(
    private readonly coordination: Coordination,
    service: string,
    private readonly log: Logger,
  ) {
    this.entries = coordination.service(service).namespace("log/");
    this.applied = coordination.service(service).namespace("applied/");
  }

  /** The serialized size of a body as an entry (what {@link MAX_ENTRY_BYTES} bounds). */
  static sizeOf(body: unknown, epoch = 0): number {
    return Buffer.byteLength(JSON.stringify({ epoch, body }));
  }

  /**
   * Appends `body` as entry `txid`, fenced by `fence`. Throws NOT_ACTIVE when the term is over (another master is
   * active, or this one's session lapsed) or the txid is taken, and COORDINATION_UNAVAILABLE when the service cannot
   * be reached: in both cases nothing may be acknowledged.
   */
  async append(txid: number, body: T, fence: Fence): Promise<void> {
    await this.appendJson(txid, JSON.stringify(body), fence);
  }

  /** {@link append} of a body already serialized (JSON of a `T`): a caller that sized it does not serialize twice. */
  async appendJson(txid: number, bodyJson: string, fence: Fence): Promise<void> {
    const value = `{"epoch":${fence.epoch},"body":${bodyJson}}`;
    if (Buffer.byteLength(value) > MAX_ENTRY_BYTES)
      throw new HarvestError("INTERNAL", `a log entry of ${Buffer.byteLength(value)} bytes is over ${MAX_ENTRY_BYTES}`);
    const full = this.entries.prefix.toString() + txidKey(txid);
    let res: ITxnResponse;
    try {
      const client = this.coordination.client;
      res = await client
        .if(fence.key, "Create", "==", fence.epoch)
        .and(full, "Create", "==", 0)
        .then(client.put(full).value(value))
        .else(client.get(full))
        .commit();
    } catch (err) {
      throw new HarvestError("COORDINATION_UNAVAILABLE", `cannot append to the shared log: ${errorMessage(err)}`, {
        cause: err,
      });
    }
    if (!res.succeeded) {
      // etcd3 sends a call again on another member after a deadline (a member that answers nothing while the
      // ensemble elects a leader), and the first try may have been committed meanwhile: then the entry holds this
      // very value (its epoch and body), and the append did happen. Any other holder means the term is over.
      const held = res.responses[0]?.response_range?.kvs[0]?.value.toString();
      if (held !== value)
        throw new HarvestError(
          "NOT_ACTIVE",
          `the shared log refused entry ${txid} of epoch ${fence.epoch}: this master's term is over`,
          { details: { epoch: String(fence.epoch) } },
        );
      this.log.info("a shared log append was sent twice (a member was slow to answer); the first one had landed", {
        txid,
        epoch: fence.epoch,
      });
    }
    this.appends++;
  }

  /** Entries from `fromTxid` on, in order, at most `limit`. */
  async read(fromTxid: number, limit = READ_PAGE): Promise<LogEntry<T>[]> {
    const res = await this.coordination.client
      .getAll()
      .inRange(new Range(this.entries.prefix.toString() + txidKey(fromTxid), this.rangeEnd()))
      .sort("Key", "Ascend")
      .limit(limit)
      .exec();
    return res.kvs.map((kv) => {
      const key = kv.key.toString();
      const v = JSON.parse(kv.value.toString()) as { epoch: number; body: T };
      return { txid: Number(key.slice(key.lastIndexOf("/") + 1)), epoch: v.epoch, body: v.body };
    });
  }

  /** The last entry's txid (0 when the log is empty). */
  async lastTxid(): Promise<number> {
    const res = await this.entries.getAll().sort("Key", "Descend").limit(1).keys();
    const key = res[0];
    return key ? Number(key.slice(key.lastIndexOf("/") + 1)) : 0;
  }

  /** The first entry's txid (0 when the log is empty): a master that applied less than this one minus 1 is too far behind. */
  async firstTxid(): Promise<number> {
    const res = await this.entries.getAll().sort("Key", "Ascend").limit(1).keys();
    const key = res[0];
    return key ? Number(key.slice(key.lastIndexOf("/") + 1)) : 0;
  }

  /**
   * Calls `apply` with every entry from `fromTxid` on, in order, now and whenever entries are added, until
   * {@link stopTail}. `apply` resolving means the entries are applied; a throw stops the tail (logged).
   */
  async tail(fromTxid: number, apply: (entries: LogEntry<T>[]) => Promise<void>): Promise<void> {
    this.tailing = true;
    let next = fromTxid;
    let running = false;
    let again = false;
    const catchUp = async (): Promise<void> => {
      if (running) {
        again = true;
        return;
      }
      running = true;
      try {
        do {
          again = false;
          for (;;) {
            if (!this.tailing) return;
            const batch = await this.read(next);
            if (batch.length === 0) break;
            await apply(batch);
            next = batch[batch.length - 1]!.txid + 1;
          }
        } while (again);
      } catch (err) {
        this.log.warn("reading the shared log failed; will read again", { error: errorMessage(err) });
        setTimeout(() => void catchUp(), 1_000);
      } finally {
        running = false;
      }
    };
    this.watcher = await this.entries.watch().prefix("").create();
    this.watcher.on("put", () => void catchUp());
    this.watcher.on("connected", () => void catchUp());
    this.watcher.on("error", (err: unknown) => this.log.warn("shared log watch failed", { error: errorMessage(err) }));
    await catchUp();
  }

  /** Stops the tail (entries being applied finish). */
  async stopTail(): Promise<void> {
    this.tailing = false;
    const w = this.watcher;
    this.watcher = undefined;
    await w?.cancel().catch(() => undefined);
  }

  /** Records that master `id` applied everything up to `txid` (its checkpoint holds it). */
  async setApplied(id: string, txid: number): Promise<void> {
    await this.applied.put(id).value(String(txid));
  }

  /** How far each master applied. */
  async appliedMarks(): Promise<Record<string, number>> {
    const all = await this.applied.getAll().strings();
    return Object.fromEntries(Object.entries(all).map(([k, v]) => [k, Number(v)]));
  }

  /** Forgets a master's mark (it was replaced). */
  async forgetApplied(id: string): Promise<void> {
    await this.applied.delete().key(id);
  }

  /** Deletes every entry below `txid` (fenced: only the active trims). Returns how many went. */
  async trimBelow(txid: number, fence: Fence): Promise<number> {
    if (txid <= 1) return 0;
    const start = this.entries.prefix.toString() + txidKey(0);
    const end = this.entries.prefix.toString() + txidKey(txid);
    const res = await this.coordination.client
      .if(fence.key, "Create", "==", fence.epoch)
      .then(this.coordination.client.delete().inRange(new Range(start, end)))
      .commit();
    if (!res.succeeded) return 0;
    const del = res.responses[0]?.response_delete_range;
    return Number(del?.deleted ?? 0);
  }

  private rangeEnd(): Buffer {
    // The end of the prefix range: the prefix with its last byte incremented.
    const p = Buffer.from(this.entries.prefix);
    p[p.length - 1] = p[p.length - 1]! + 1;
    return p;
  }
}
