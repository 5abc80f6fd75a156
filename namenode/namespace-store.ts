/**
 * The namenode's durable state in LevelDB. Every mutation is one atomic batch written with fsync before the RPC that
 * caused it is answered; on start the whole namespace is read back into memory.
 *
 * Layout (values are JSON):
 *   meta!nextInodeId        next inode id to hand out (the root is inode 1)
 *   meta!nextBlockId        next block id to hand out
 *   meta!nextGenStamp       next generation stamp to hand out
 *   inode!<id>              InodeRecord (a directory or a file with its blocks, lease, owner, group and mode)
 *   child!<parentId>!<name> the child's inode id (the tree's edges: a rename rewrites one edge and one inode)
 *   datanode!<id>           DatanodeRecord (storage id and reimage count, kept across restarts)
 *   decommission!<id>       DecommissionRecord of a datanode out of service (none while it is NORMAL)
 *   dtcancel!<nonce>        when a cancelled delegation token would have expired (cancelled-tokens.ts)
 *   meta!txid               HA: the last shared-log entry this store holds (namenode/ha-journal.ts)
 *
 * Every write, of whatever kind, goes through one ordered group commit. In HA mode a {@link Journal} takes each
 * batch first (the shared edit log in the coordination service, durable on a majority) and the local batch records
 * its txid; a standby writes the log's entries with {@link NamespaceStore.applyEntry}.
 */
import { Level } from "level";
import type { CancelledToken, CancelledTokenStore } from "./cancelled-tokens.js";
import type { DecommissionRecord } from "./policy/decommission.js";
import { DEFAULT_DIR_MODE, DEFAULT_FILE_MODE, DEFAULT_GROUP } from "./policy/permissions.js";

// fsync before resolving (classic-level's WriteOptions.sync; the `level` facade's types leave it out).
const DURABLE = { sync: true } as never;

/** Inode id of "/". */
export const ROOT_INODE_ID = 1;

/** A block of a file: its id, generation and committed length (0 while it is being written). */
export interface BlockRecord {
  blockId: number;
  genStamp: number;
  numBytes: number;
}

/** Fields every inode has. */
interface InodeBase {
  id: number;
  parentId: number;
  name: string;
  owner: string;
  group: string;
  /** Permission bits, 0o000..0o777 (namenode/policy/permissions.ts). */
  mode: number;
  mtimeMs: number;
  ctimeMs: number;
}

/** A directory as persisted (its children are the `child!` edges). */
export interface DirRecord extends InodeBase {
  kind: "dir";
}

/** A file as persisted. */
export interface FileRecord extends InodeBase {
  kind: "file";
  replication: number;
  blockSizeBytes: number;
  /** In file order. */
  blocks: BlockRecord[];
  /**
   * How many leading blocks have their final length: all of them, or all but the last while it is being written.
   * After an abandoned block the last block is a committed one again.
   */
  committedBlocks: number;
  complete: boolean;
  /** The writer's client name while the file is open; "" once complete. */
  leaseHolder: string;
  /** The datanode the writer runs on ("" if none): the first replica of each new block goes there. */
  writerDatanodeId: string;
  /**
   * The write pipeline (datanode ids) of the last block while it is uncommitted: where lease recovery looks for its
   * replicas. Absent once the block is committed, and in files stored before lease recovery asked datanodes.
   */
  pipeline?: string[];
  /** Set when lease recovery closed the file: when, and why (for fsck and `fs stat`). */
  recovered?: { atMs: number; reason: string };
}

/** A directory or a file. */
export type InodeRecord = DirRecord | FileRecord;

/** What the namenode remembers of a datanode across restarts. */
export interface DatanodeRecord {
  datanodeId: string;
  storageId: string;
  reimages: number;
}

/** The id counters. */
export interface Counters {
  nextInodeId: number;
  nextBlockId: number;
  nextGenStamp: number;
}

/** One atomic change to the namespace. */
export interface Changeset {
  putInodes: InodeRecord[];
  delInodes: number[];
  putEdges: { parentId: number; name: string; childId: number }[];
  delEdges: { parentId: number; name: string }[];
  counters?: Partial<Counters>;
}

/** Everything read back at start. */
export interface LoadedNamespace {
  counters: Counters;
  inodes: InodeRecord[];
  edges: { parentId: number; name: string; childId: number }[];
}

/** One LevelDB operation: what the store writes and what the shared log carries. */
export type BatchOp = { type: "put"; key: string; value: unknown } | { type: "del"; key: string };

/**
 * Where batches go before the local store (HA): `append` resolves with the txid of the last entry written once the
 * groups are durable elsewhere, and throws if they are not (nothing is then written locally or acknowledged). Each
 * group is one mutation's operations, never split across entries.
 */
export interface Journal {
  append(groups: BatchOp[][]): Promise<number>;
}

/** The key holding the last shared-log entry applied. */
export const TXID_KEY = "meta!txid";

const inodeKey = (id: number): string => `inode!${id}`;
const edgeKey = (parentId: number, name: string): string => `child!${parentId}!${name}`;

/** The parent and name of a `child!` key: the parent id is digits, so the first "!" after it ends it; names may hold "!". */
function parseEdgeKey(key: string): { parentId: number; name: string } {
  const rest = key.slice("child!".length);
  const sep = rest.indexOf("!");
  return { parentId: Number(rest.slice(0, sep)), name: rest.slice(sep + 1) };
}

/**
 * The namespace's part of a batch of operations (a shared-log entry) as the changesets that made them: the inverse of
 * the store's own encoding. Datanode records, drains and cancelled tokens are left out.
 */
export function changesetOfOps(ops: readonly BatchOp[]): Changeset {
  const change: Changeset = { putInodes: [], delInodes: [], putEdges: [], delEdges: [] };
  const counters: Partial<Counters> = {};
  for (const op of ops) {
    if (op.key.startsWith("inode!")) {
      if (op.type === "put") change.putInodes.push(op.value as InodeRecord);
      else change.delInodes.push(Number(op.key.slice("inode!".length)));
    } else if (op.key.startsWith("child!")) {
      const edge = parseEdgeKey(op.key);
      if (op.type === "put") change.putEdges.push({ ...edge, childId: op.value as number });
      else change.delEdges.push(edge);
    } else if (op.type === "put" && op.key === "meta!nextInodeId") counters.nextInodeId = op.value as number;
    else if (op.type === "put" && op.key === "meta!nextBlockId") counters.nextBlockId = op.value as number;
    else if (op.type === "put" && op.key === "meta!nextGenStamp") counters.nextGenStamp = op.value as number;
  }
  if (Object.keys(counters).length > 0) change.counters = counters;
  return change;
}

/** An inode as stored, with the documented owner, group and mode if it was stored before permissions existed. */
function withPermissions(inode: InodeRecord, superuser: string): InodeRecord {
  const stored = inode as Partial<InodeRecord>;
  if (typeof stored.group === "string" && typeof stored.mode === "number") return inode;
  return {
    ...inode,
    owner: superuser,
    group: DEFAULT_GROUP,
    mode: inode.kind === "dir" ? DEFAULT_DIR_MODE : DEFAULT_FILE_MODE,
  };
}

/** LevelDB-backed store; every write resolves only once it is in the log (fsync). */
export class NamespaceStore implements CancelledTokenStore {
  private readonly db: Level<string, unknown>;

  constructor(readonly path: string) {
    this.db = new Level<string, unknown>(path, { valueEncoding: "json" });
  }

  async open(): Promise<void> {
    await this.db.open();
  }

  async close(): Promise<void> {
    await this.db.close();
  }

  /**
   * Reads the whole namespace; creates the root directory (owned by `superuser`, mode 0755) and counters on first use.
   * Inodes stored before permissions existed (no group or mode) load owned by `superuser`, group "harvest", mode 0755
   * (directories) or 0644 (files): their recorded owner was whatever the client claimed, so it is not trusted.
   */
  async load(nowMs: number, superuser = "harvest"): Promise<LoadedNamespace> {
    const get = async (key: string): Promise<number | undefined> => (await this.db.get(key)) as number | undefined;
    let counters: Counters;
    const nextInodeId = await get("meta!nextInodeId");
    if (nextInodeId === undefined) {
      counters = { nextInodeId: ROOT_INODE_ID + 1, nextBlockId: 1, nextGenStamp: 1_000 };
      const root: DirRecord = {
        kind: "dir",
        id: ROOT_INODE_ID,
        parentId: 0,
        name: "",
        owner: superuser,
        group: DEFAULT_GROUP,
        mode: DEFAULT_DIR_MODE,
        mtimeMs: nowMs,
        ctimeMs: nowMs,
      };
      await this.commit({ putInodes: [root], delInodes: [], putEdges: [], delEdges: [], counters });
    } else {
      counters = {
        nextInodeId,
        nextBlockId: (await get("meta!nextBlockId")) ?? 1,
        nextGenStamp: (await get("meta!nextGenStamp")) ?? 1_000,
      };
    }
    const inodes: InodeRecord[] = [];
    for await (const value of this.db.values({ gt: "inode!", lt: "inode!\xff" }))
      inodes.push(withPermissions(value as InodeRecord, superuser));
    const edges: LoadedNamespace["edges"] = [];
    for await (const [key, value] of this.db.iterator({ gt: "child!", lt: "child!\xff" })) {
      edges.push({ ...parseEdgeKey(key), childId: value as number });
    }
    return { counters, inodes, edges };
  }

  /** Every datanode record. */
  async loadDatanodes(): Promise<DatanodeRecord[]> {
    const out: DatanodeRecord[] = [];
    for await (const value of this.db.values({ gt: "datanode!", lt: "datanode!\xff" }))
      out.push(value as DatanodeRecord);
    return out;
  }

  /**
   * Writes a changeset durably. Changesets queued while a synced batch is being written go together into the next
   * one (group commit): one fsync for many mutations, in the order they were queued. Resolves once synced.
   */
  commit(change: Changeset): Promise<void> {
    return this.write(this.opsOf(change));
  }

  /** Queues one mutation's operations for the next group commit; resolves once they are durable. */
  private write(ops: BatchOp[]): Promise<void> {
    if (ops.length === 0) return this.lastWrite;
    return new Promise((resolve, reject) => {
      this.queued.push(ops);
      this.waiters.push({ resolve, reject });
      if (!this.writing) this.lastWrite = this.flush();
    });
  }

  /** Synced batches written so far (each may hold many mutations). */
  batchesWritten = 0;
  /** HA: the shared log batches go to before this store (undefined: LevelDB alone). */
  journal: Journal | undefined;
  private queued: BatchOp[][] = [];
  private waiters: { resolve: () => void; reject: (err: unknown) => void }[] = [];
  private writing = false;
  private lastWrite: Promise<void> = Promise.resolve();

  /** Resolves once every changeset queued so far is written (or failed). */
  idle(): Promise<void> {
    return this.lastWrite.catch(() => undefined);
  }

  private async flush(): Promise<void> {
    this.writing = true;
    // HA: the shared log is the durable copy, so the next batch's append may start while this one is written here
    // (one append in flight; local batches in log order, each waiter answered after its own). A local batch that
    // fails fails every later one too: the namenode restarts and catches its store up from the log.
    let local: Promise<void> = Promise.resolve();
    try {
      // Changesets queued while the last local batch is written go round again.
      for (;;) {
        while (this.queued.length > 0) {
          const groups = this.queued;
          const waiters = this.waiters;
          this.queued = [];
          this.waiters = [];
          try {
            const ops = groups.flat();
            if (this.journal) ops.push({ type: "put", key: TXID_KEY, value: await this.journal.append(groups) });
            local = local
              .then(() => this.db.batch(ops, DURABLE))
              .then(
                () => {
                  this.batchesWritten++;
                  for (const w of waiters) w.resolve();
                },
                (err: unknown) => {
                  for (const w of waiters) w.reject(err);
                  throw err;
                },
              );
            local.catch(() => undefined);
            // Without HA the batch on disk is the only copy: the next waits for it (and gathers more meanwhile), and a
            // failed one does not fail those after it.
            if (!this.journal) local = local.catch(() => undefined);
            if (!this.journal) await local;
          } catch (err) {
            for (const w of waiters) w.reject(err);
          }
        }
        // A failed batch answered its waiters; later ones chained on it fail too (HA: see above).
        await local.catch(() => undefined);
        if (this.queued.length === 0) break;
      }
    } finally {
      this.writing = false;
    }
  }

  private opsOf(change: Changeset): BatchOp[] {
    const ops: BatchOp[] = [];
    for (const id of change.delInodes) ops.push({ type: "del", key: inodeKey(id) });
    for (const e of change.delEdges) ops.push({ type: "del", key: edgeKey(e.parentId, e.name) });
    for (const inode of change.putInodes) ops.push({ type: "put", key: inodeKey(inode.id), value: inode });
    for (const e of change.putEdges) ops.push({ type: "put", key: edgeKey(e.parentId, e.name), value: e.childId });
    const c = change.counters ?? {};
    if (c.nextInodeId !== undefined) ops.push({ type: "put", key: "meta!nextInodeId", value: c.nextInodeId });
    if (c.nextBlockId !== undefined) ops.push({ type: "put", key: "meta!nextBlockId", value: c.nextBlockId });
    if (c.nextGenStamp !== undefined) ops.push({ type: "put", key: "meta!nextGenStamp", value: c.nextGenStamp });
    return ops;
  }

  /** Persists what is known of a datanode (storage id, reimage count). */
  async putDatanode(record: DatanodeRecord): Promise<void> {
    await this.write([{ type: "put", key: `datanode!${record.datanodeId}`, value: record }]);
  }

  /** Every datanode out of service (draining or decommissioned). */
  async loadDecommissions(): Promise<DecommissionRecord[]> {
    const out: DecommissionRecord[] = [];
    for await (const value of this.db.values({ gt: "decommission!", lt: "decommission!\xff" }))
      out.push(value as DecommissionRecord);
    return out;
  }

  /** Persists a datanode's decommission (durable once resolved). */
  async putDecommission(record: DecommissionRecord): Promise<void> {
    await this.write([{ type: "put", key: `decommission!${record.datanodeId}`, value: record }]);
  }

  /** Forgets a datanode's decommission: it is back in service (durable once resolved). */
  async deleteDecommission(datanodeId: string): Promise<void> {
    await this.write([{ type: "del", key: `decommission!${datanodeId}` }]);
  }

  /** Every cancelled delegation token kept. */
  async loadCancelledTokens(): Promise<CancelledToken[]> {
    const out: CancelledToken[] = [];
    for await (const [key, value] of this.db.iterator({ gt: "dtcancel!", lt: "dtcancel!\xff" }))
      out.push({ nonce: key.slice("dtcancel!".length), expiresMs: value as number });
    return out;
  }

  /** Records a cancelled delegation token (durable once resolved). */
  async putCancelledToken(token: CancelledToken): Promise<void> {
    await this.write([{ type: "put", key: `dtcancel!${token.nonce}`, value: token.expiresMs }]);
  }

  /** Forgets cancelled delegation tokens (durable once resolved). */
  async deleteCancelledTokens(nonces: readonly string[]): Promise<void> {
    await this.write(nonces.map((nonce) => ({ type: "del" as const, key: `dtcancel!${nonce}` })));
  }

  // ---------------------------------------------------------------------------------------------- HA

  /** The last shared-log entry this store holds (0: none; a store that never ran in HA mode). */
  async appliedTxid(): Promise<number> {
    return ((await this.db.get(TXID_KEY)) as number | undefined) ?? 0;
  }

  /** Writes a shared-log entry's operations and its txid in one synced batch (a standby following the log). */
  async applyEntry(txid: number, ops: readonly BatchOp[]): Promise<void> {
    await this.db.batch([...ops, { type: "put", key: TXID_KEY, value: txid }], DURABLE);
  }

  /**
   * Every key and value of the store as of one moment (LevelDB's iterator reads a snapshot), in pages: a checkpoint
   * for a new standby (its `meta!txid` says where in the log it stands).
   */
  async *snapshot(pageSize = 1_000): AsyncGenerator<BatchOp[]> {
    let page: BatchOp[] = [];
    for await (const [key, value] of this.db.iterator()) {
      page.push({ type: "put", key, value });
      if (page.length >= pageSize) {
        yield page;
        page = [];
      }
    }
    if (page.length > 0) yield page;
  }

  /** Writes a page of a checkpoint into an empty store (bootstrapping a standby). */
  async restorePage(ops: readonly BatchOp[]): Promise<void> {
    await this.db.batch([...ops], DURABLE);
  }
}
