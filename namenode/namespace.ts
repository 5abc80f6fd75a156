/**
 * The file system namespace: directories, files, their blocks and the writers' leases. The whole tree lives in memory
 * (inode-tree.ts: the inodes, path resolution, statuses). Mutations run one at a time (a promise queue,
 * edit-queue.ts): each is checked against the tree, applied in memory, and handed to the store's group commit; its
 * caller is answered only once the batch holding it is synced to disk. Concurrent
 * mutations so share one fsync, as HDFS's edit log does with logSync. As in HDFS, a reader may briefly see a change
 * whose writer has not been answered yet; no writer is ever told "done" before its change is durable. Should a sync
 * fail, memory is ahead of disk: the namespace refuses every later mutation until the namenode restarts and reloads.
 *
 * Leases: a writer's lease is renewed by each call it makes on the file (Create/AddBlock/AbandonBlock/Complete) and by
 * RenewLease, which renews every file its client name holds (`renewLease`). A file open for longer than the lease timeout since that writer's last call is
 * recovered (`beginRecovery`): without a block being written it is closed at once; otherwise the file is marked
 * under recovery (its writer's calls are refused) while the namenode asks the datanodes of the block's pipeline for
 * their replicas (namenode/block-recovery.ts), and `finishRecovery` closes it with the last block at the length every
 * surviving replica holds (HDFS's block recovery). Either way the file keeps a `recovered` mark. Lease times and the
 * under-recovery mark are not persisted: after a restart every open file gets a full timeout.
 *
 * Permissions (HDFS's, namenode/policy/permissions.ts): every method a client reaches takes the `caller` and checks it, inside
 * the mutation queue, before it looks at whether its target exists; the namenode's own work (lease recovery, tests of
 * the tree itself) passes no caller and is not checked.
 */
import { systemClock } from "../common/clock.js";
import type { Clock } from "../common/clock.js";
import { baseName, isWithin, normalizeDfsPath, pathComponents } from "../common/dfs-path.js";
import { HarvestError } from "../common/errors.js";
import { changesetOfOps, ROOT_INODE_ID } from "./namespace-store.js";
import { replayedEvents } from "./log-replay.js";
import { WriterLeases } from "./writer-leases.js";
import {
  ALL,
  check,
  checkPermission,
  checkSetOwner,
  DEFAULT_DIR_MODE,
  DEFAULT_FILE_MODE,
  EXECUTE,
  READ,
  WRITE,
} from "./policy/permissions.js";
import type { AccessRequest, Caller } from "./policy/permissions.js";
import type {
  BatchOp,
  BlockRecord,
  Changeset,
  Counters,
  DirRecord,
  FileRecord,
  InodeRecord,
  NamespaceStore,
} from "./namespace-store.js";
import type { FileStatusOutput } from "../proto/generated/harvest/v1/FileStatus.js";
import { EditQueue } from "./edit-queue.js";
import { InodeTree } from "./inode-tree.js";
import type { FileView, NamespaceCounts } from "./inode-tree.js";

export type { FileView, LocatedBlockRecord, NamespaceCounts } from "./inode-tree.js";

/** Told about block changes once they are durable (the block manager keeps its map in step). */
export interface NamespaceListener {
  /** A new block was allocated to a file (uncommitted, length 0). */
  blockAllocated(block: BlockRecord, inodeId: number, replication: number): void;
  /** A block's length became final. */
  blockCommitted(block: BlockRecord): void;
  /** Blocks left the namespace (file deleted or overwritten, block abandoned, lease recovered). */
  blocksRemoved(blocks: readonly BlockRecord[]): void;
}

/** Namespace settings. */
export interface NamespaceOptions {
  /** Replication of files created with 0. @default 3 */
  defaultReplication: number;
  /** Block size of files created with 0. @default 128 MiB (HDFS 2's `dfs.blocksize`) */
  defaultBlockSizeBytes: number;
  /** Largest replication accepted. @default 32 */
  maxReplication: number;
  /** Owner of a new root directory and of inodes stored before permissions existed. @default "harvest" */
  superuser: string;
}

/** A request to create a file. */
export interface CreateFileRequest {
  path: string;
  /** The new file's owner (the caller's name when there is a caller). */
  owner: string;
  /** 0 means the default. */
  replication: number;
  /** 0 means the default; otherwise a positive multiple of 512 (the checksum chunk). */
  blockSizeBytes: number;
  overwrite: boolean;
  clientName: string;
  /** The datanode the writer runs on, or "". */
  writerDatanodeId: string;
}

/** What a subtree holds (HDFS's ContentSummary). */
export interface ContentSummary {
  files: number;
  /** Directories, the subtree's root included when it is one. */
  directories: number;
  /** Bytes in its files. */
  length: number;
  /** Bytes its files take on the datanodes: each file's length times its replication. */
  spaceConsumed: number;
}

const CHUNK_BYTES = 512;
/** Names an owner or group may have (those a certificate may carry, common/tls.ts). */
const OWNER_NAME = /^[A-Za-z0-9_.@-]{1,64}$/;
const NO_LISTENER: NamespaceListener = { blockAllocated() {}, blockCommitted() {}, blocksRemoved() {} };

/** The in-memory namespace over a durable store. */
export class Namespace {
  private readonly options: NamespaceOptions;
  private readonly clock: Clock;
  private readonly listener: NamespaceListener;
  private readonly tree = new InodeTree();
  /** Mutations one at a time, and the durability of their changes. */
  private readonly edits: EditQueue;
  /** Writers' leases on open files and their recoveries (not persisted). */
  private readonly leases: WriterLeases;
  private counters: Counters = { nextInodeId: ROOT_INODE_ID + 1, nextBlockId: 1, nextGenStamp: 1_000 };
  private loaded = false;

  constructor(
    private readonly store: NamespaceStore,
    options: Partial<NamespaceOptions> = {},
    deps: { clock?: Clock; listener?: NamespaceListener } = {},
  ) {
    this.options = {
      defaultReplication: 3,
      defaultBlockSizeBytes: 128 * 1024 * 1024,
      maxReplication: 32,
      superuser: "harvest",
      ...options,
    };
    this.clock = deps.clock ?? systemClock;
    this.listener = deps.listener ?? NO_LISTENER;
    this.edits = new EditQueue(store);
    this.leases = new WriterLeases(this.clock);
  }

  /** Reads the whole namespace from the (open) store. Call once before anything else. */
  async load(): Promise<void> {
    const loaded = await this.store.load(this.clock.nowMs(), this.options.superuser);
    this.counters = loaded.counters;
    this.tree.load(loaded);
    for (const inode of this.tree.all()) if (inode.kind === "file" && !inode.complete) this.leases.renew(inode.id);
    this.loaded = true;
  }

  // ---------------------------------------------------------------------------------------------- reads

  /** Whether a file or directory is at `path` (no permission check: for the namenode's own decisions). */
  exists(path: string): boolean {
    return this.tree.resolveQuietly(normalizeDfsPath(path)) !== undefined;
  }

  /** The status of a file or directory (the caller must traverse its ancestors); NAMENODE_FILE_NOT_FOUND if none. */
  stat(path: string, caller?: Caller): FileStatusOutput {
    const p = normalizeDfsPath(path);
    this.authorize(p, caller, {});
    return this.tree.status(p, this.tree.mustResolve(p));
  }

  /** A directory's entries sorted by name (READ_EXECUTE on it), or a file's own status. */
  list(path: string, caller?: Caller): FileStatusOutput[] {
    const p = normalizeDfsPath(path);
    this.authorize(p, caller, { access: this.tree.resolveQuietly(p)?.kind === "dir" ? READ | EXECUTE : 0 });
    const inode = this.tree.mustResolve(p);
    if (inode.kind === "file") return [this.tree.status(p, inode)];
    const names = [...this.tree.childrenOf(inode.id).keys()].sort();
    return names.map((name) => {
      const childPath = p === "/" ? `/${name}` : `${p}/${name}`;
      return this.tree.status(childPath, this.tree.get(this.tree.childrenOf(inode.id).get(name) ?? -1) as InodeRecord);
    });
  }

  /** A file with its blocks and their offsets (READ on it); NAMENODE_IS_A_DIRECTORY for a directory. */
  file(path: string, caller?: Caller): FileView {
    const p = normalizeDfsPath(path);
    this.authorize(p, caller, { access: READ });
    const inode = this.tree.mustResolve(p);
    if (inode.kind !== "file") throw new HarvestError("NAMENODE_IS_A_DIRECTORY", `${p} is a directory`);
    return this.tree.fileView(p, inode);
  }

  /**
   * Every file at or below `path` (depth first, by name), with the number of directories walked. With a caller (fsck),
   * traverse to `path`, then READ_EXECUTE on every directory walked, empty ones too (HDFS's fsck lists each as its
   * caller): the first refused, in walk order, refuses it all (DFS_PERMISSION_DENIED naming it).
   */
  walk(path: string, caller?: Caller): { files: FileView[]; directories: number } {
    const p = normalizeDfsPath(path);
    if (!caller || caller.superuser) return this.tree.walk(p);
    this.authorize(p, caller, {});
    return this.tree.walk(p, (dir) => check(dir, caller, READ | EXECUTE));
  }

  /**
   * Files, directories and bytes at or below `path`. Asks READ_EXECUTE of every directory there that has entries, as
   * HDFS's getContentSummary does (a caller who may not list a directory does not learn what is in it).
   */
  contentSummary(path: string, caller?: Caller): ContentSummary {
    const p = normalizeDfsPath(path);
    this.authorize(p, caller, { sub: READ | EXECUTE });
    const { files, directories } = this.tree.walk(p);
    let length = 0;
    let spaceConsumed = 0;
    for (const f of files) {
      length += f.length;
      spaceConsumed += f.length * f.inode.replication;
    }
    return { files: files.length, directories, length, spaceConsumed };
  }

  /** Every block of every file with its owner inode and replication (to rebuild the block map at start). */
  allBlocks(): Generator<{ block: BlockRecord; inodeId: number; replication: number; committed: boolean }> {
    return this.tree.allBlocks();
  }

  /** The path of an inode, or undefined if it is gone. */
  pathOf(inodeId: number): string | undefined {
    return this.tree.pathOf(inodeId);
  }

  /** Files, directories (with "/") and blocks in the namespace. */
  counts(): NamespaceCounts {
    return this.tree.counts();
  }

  /** Paths of open files whose writer has been silent for `timeoutMs`. */
  expiredLeases(timeoutMs: number): string[] {
    return this.leases.expired(timeoutMs).flatMap((id) => this.tree.pathOf(id) ?? []);
  }

  // ---------------------------------------------------------------------------------------------- mutations

  /**
   * Creates a directory and its missing parents, owned by `owner`, each in its parent's group; succeeds on an
   * existing directory. Creating needs WRITE on the nearest existing ancestor.
   */
  async mkdirs(path: string, owner: string, caller?: Caller): Promise<FileStatusOutput> {
    const p = normalizeDfsPath(path);
    return this.exclusive(async () => {
      this.authorize(p, caller, { ancestor: this.tree.resolveQuietly(p) ? 0 : WRITE });
      const now = this.clock.nowMs();
      const change = emptyChange();
      let dir = this.tree.root();
      let at = "";
      let nextId = this.counters.nextInodeId;
      let creating = false;
      for (const name of pathComponents(p)) {
        at += `/${name}`;
        const existingId = creating ? undefined : this.tree.childrenOf(dir.id).get(name);
        const existing = existingId === undefined ? undefined : this.tree.get(existingId);
        if (existing) {
          if (existing.kind !== "dir") throw new HarvestError("NAMENODE_NOT_A_DIRECTORY", `${at} is a file`);
          dir = existing;
          continue;
        }
        if (!creating) change.putInodes.push({ ...dir, mtimeMs: now });
        creating = true;
        const created: DirRecord = {
          kind: "dir",
          id: nextId++,
          parentId: dir.id,
          name,
          owner: owner || this.options.superuser,
          group: dir.group,
          mode: DEFAULT_DIR_MODE,
          mtimeMs: now,
          ctimeMs: now,
        };
        change.putInodes.push(created);
        change.putEdges.push({ parentId: dir.id, name, childId: created.id });
        dir = created;
      }
      if (creating) {
        change.counters = { nextInodeId: nextId };
        await this.commit(change);
      }
      return this.tree.status(p, dir);
    });
  }

  /**
   * Creates an empty file leased to `clientName`, in its parent's group, mode 0644; with overwrite, an existing file
   * is replaced (its blocks go). Needs WRITE on the parent, and on the file it replaces.
   */
  async create(req: CreateFileRequest, caller?: Caller): Promise<FileStatusOutput> {
    const p = normalizeDfsPath(req.path);
    if (!req.clientName) throw invalid("clientName", "a writer needs a client name (its lease)");
    const replication = req.replication || this.options.defaultReplication;
    if (!Number.isInteger(replication) || replication < 1 || replication > this.options.maxReplication)
      throw invalid("replication", `must be an integer in 1..${this.options.maxReplication}`);
    const blockSizeBytes = req.blockSizeBytes || this.options.defaultBlockSizeBytes;
    if (!Number.isSafeInteger(blockSizeBytes) || blockSizeBytes <= 0 || blockSizeBytes % CHUNK_BYTES !== 0)
      throw invalid("blockSize", `must be a positive multiple of ${CHUNK_BYTES} bytes`);
    if (p === "/") throw new HarvestError("NAMENODE_IS_A_DIRECTORY", "/ is a directory");
    return this.exclusive(async () => {
      const replacing = req.overwrite && this.tree.resolveQuietly(p)?.kind === "file";
      this.authorize(p, caller, { ancestor: WRITE, access: replacing ? WRITE : 0 });
      const now = this.clock.nowMs();
      const parent = this.tree.mustResolveParent(p);
      const name = baseName(p);
      const existing = this.tree.get(this.tree.childrenOf(parent.id).get(name) ?? -1);
      const change = emptyChange();
      let removed: BlockRecord[] = [];
      if (existing) {
        if (existing.kind === "dir") throw new HarvestError("NAMENODE_IS_A_DIRECTORY", `${p} is a directory`);
        if (!req.overwrite) throw new HarvestError("NAMENODE_FILE_EXISTS", `${p} exists`);
        if (!existing.complete && existing.leaseHolder !== req.clientName)
          throw new HarvestError("NAMENODE_FILE_INCOMPLETE", `${p} is being written by another client`);
        change.delInodes.push(existing.id);
        removed = existing.blocks;
      }
      const file: FileRecord = {
        kind: "file",
        id: this.counters.nextInodeId,
        parentId: parent.id,
        name,
        owner: req.owner || this.options.superuser,
        group: parent.group,
        mode: DEFAULT_FILE_MODE,
        mtimeMs: now,
        ctimeMs: now,
        replication,
        blockSizeBytes,
        blocks: [],
        committedBlocks: 0,
        complete: false,
        leaseHolder: req.clientName,
        writerDatanodeId: req.writerDatanodeId,
      };
      change.putInodes.push({ ...parent, mtimeMs: now }, file);
      change.putEdges.push({ parentId: parent.id, name, childId: file.id });
      change.counters = { nextInodeId: file.id + 1 };
      await this.commit(change);
      if (existing) {
        this.leases.release(existing.id);
      }
      this.leases.renew(file.id);
      if (removed.length > 0) this.listener.blocksRemoved(removed);
      return this.tree.status(p, file);
    });
  }

  /**
   * Commits `previous` (which must be the file's last block) with its final length and allocates the next block.
   * `chooseTargets` runs after every check and before anything is written; if it throws, nothing changes.
   */
  async addBlock<T>(
    req: { path: string; clientName: string; previous?: BlockRecord | null },
    chooseTargets: (file: FileView) => T,
    pipelineOf: (targets: T) => string[] = () => [],
  ): Promise<{ block: BlockRecord; offset: number; targets: T }> {
    const p = normalizeDfsPath(req.path);
    return this.exclusive(async () => {
      const file = this.leasedFile(p, req.clientName);
      const blocks = file.blocks.slice();
      const committed = this.commitLast(p, file, blocks, req.previous);
      const committedBlocks = blocks.length;
      const targets = chooseTargets(this.tree.fileView(p, { ...file, blocks, committedBlocks }));
      const block: BlockRecord = {
        blockId: this.counters.nextBlockId,
        genStamp: this.counters.nextGenStamp,
        numBytes: 0,
      };
      const offset = blocks.reduce((sum, b) => sum + b.numBytes, 0);
      blocks.push(block);
      const change = emptyChange();
      change.putInodes.push({
        ...file,
        blocks,
        committedBlocks,
        pipeline: pipelineOf(targets),
        mtimeMs: this.clock.nowMs(),
      });
      change.counters = { nextBlockId: block.blockId + 1, nextGenStamp: block.genStamp + 1 };
      await this.commit(change);
      this.leases.renew(file.id);
      if (committed) this.listener.blockCommitted(committed);
      this.listener.blockAllocated(block, file.id, file.replication);
      return { block, offset, targets };
    });
  }

  /**
   * Drops the file's last, uncommitted block (its pipeline failed); the writer then asks for another. Returns the
   * block's pipeline (replicas its datanodes kept should go).
   */
  async abandonBlock(path: string, clientName: string, block: BlockRecord | null | undefined): Promise<string[]> {
    const p = normalizeDfsPath(path);
    return this.exclusive(async () => {
      const file = this.leasedFile(p, clientName);
      const last = file.blocks[file.blocks.length - 1];
      if (!block || !last || last.blockId !== block.blockId || file.committedBlocks >= file.blocks.length)
        throw new HarvestError(
          "NAMENODE_BLOCK_MISMATCH",
          `block ${block?.blockId ?? "(none)"} is not the block being written to ${p}`,
        );
      const change = emptyChange();
      const { pipeline = [], ...rest } = file;
      change.putInodes.push({ ...rest, blocks: file.blocks.slice(0, -1), mtimeMs: this.clock.nowMs() });
      await this.commit(change);
      this.leases.renew(file.id);
      this.listener.blocksRemoved([last]);
      return pipeline;
    });
  }

  /**
   * Renews the lease on every file open for writing by `clientName` (RenewLease: a writer streaming a long block makes
   * no other call). With a caller that is not the superuser, only files it owns are renewed: another user's client
   * name renews nothing. Files under recovery stay under recovery. Returns how many leases were renewed. Lease times
   * are not persisted, so nothing is written.
   */
  renewLease(clientName: string, caller?: Caller): number {
    if (!clientName) throw invalid("clientName", "a lease renewal needs the writer's client name");
    let renewed = 0;
    for (const id of this.leases.ids()) {
      const inode = this.tree.get(id);
      if (inode?.kind !== "file" || inode.complete || inode.leaseHolder !== clientName) continue;
      if (this.leases.isRecovering(id)) continue;
      if (caller && !caller.superuser && inode.owner !== caller.user) continue;
      this.leases.renew(id);
      renewed += 1;
    }
    return renewed;
  }

  /**
   * Commits the last block and closes the file; its length is final and the lease is released. A repeated call for
   * a file that is already complete with the same last block succeeds (the first answer may have been lost).
   */
  async complete(path: string, clientName: string, last: BlockRecord | null | undefined): Promise<FileStatusOutput> {
    const p = normalizeDfsPath(path);
    return this.exclusive(async () => {
      const current = this.tree.mustResolve(p);
      if (current.kind === "file" && current.complete) {
        const tail = current.blocks[current.blocks.length - 1];
        if (sameBlock(tail, last) && (!tail || tail.numBytes === last?.numBytes)) return this.tree.status(p, current);
      }
      const file = this.leasedFile(p, clientName);
      const blocks = file.blocks.slice();
      const committed = this.commitLast(p, file, blocks, last);
      const done = await this.closeFile(file, blocks);
      if (committed) this.listener.blockCommitted(committed);
      return this.tree.status(p, done);
    });
  }

  /**
   * Removes a file or directory (a non-empty one only when recursive); false if nothing is there. Needs WRITE on the
   * parent and, as in HDFS, ALL (rwx) on every non-empty directory removed. With `leaseHolder` (a writer giving up on
   * the file it created) only a file open for writing and leased to that client name is deleted, else
   * NAMENODE_LEASE_MISMATCH.
   */
  async delete(path: string, recursive: boolean, caller?: Caller, leaseHolder?: string): Promise<boolean> {
    const p = normalizeDfsPath(path);
    if (p === "/")
      throw new HarvestError("DFS_BAD_PATH", "the root directory cannot be deleted", { details: { path } });
    return this.exclusive(async () => {
      this.authorize(p, caller, { parent: WRITE, sub: ALL });
      const inode = this.tree.resolve(p);
      if (!inode) return false;
      if (leaseHolder !== undefined) this.leasedFile(p, leaseHolder);
      if (inode.kind === "dir" && this.tree.childrenOf(inode.id).size > 0 && !recursive)
        throw new HarvestError("NAMENODE_DIRECTORY_NOT_EMPTY", `${p} is not empty; delete it recursively`);
      const parent = this.tree.get(inode.parentId) as DirRecord;
      const change = emptyChange();
      const removed: BlockRecord[] = [];
      const removedIds: number[] = [];
      const collect = (node: InodeRecord): void => {
        change.delInodes.push(node.id);
        removedIds.push(node.id);
        if (node.kind === "file") {
          removed.push(...node.blocks);
          return;
        }
        for (const [name, childId] of this.tree.childrenOf(node.id)) {
          change.delEdges.push({ parentId: node.id, name });
          const child = this.tree.get(childId);
          if (child) collect(child);
        }
      };
      collect(inode);
      change.delEdges.push({ parentId: parent.id, name: inode.name });
      change.putInodes.push({ ...parent, mtimeMs: this.clock.nowMs() });
      await this.commit(change);
      for (const id of removedIds) {
        this.leases.release(id);
      }
      if (removed.length > 0) this.listener.blocksRemoved(removed);
      return true;
    });
  }

  /**
   * Moves `src` to `dst`; `dst` must not exist and its parent must be a directory. O(1) entries written. Needs WRITE
   * on the source's parent and on the destination's nearest existing ancestor.
   */
  async rename(src: string, dst: string, caller?: Caller): Promise<FileStatusOutput> {
    const s = normalizeDfsPath(src, "src");
    const d = normalizeDfsPath(dst, "dst");
    if (s === "/") throw new HarvestError("DFS_BAD_PATH", "the root directory cannot be renamed", { details: { src } });
    return this.exclusive(async () => {
      this.authorize(s, caller, { parent: WRITE });
      this.authorize(d, caller, { ancestor: WRITE });
      const inode = this.tree.mustResolve(s);
      if (isWithin(d, s))
        throw new HarvestError("DFS_BAD_PATH", `cannot move ${s} to ${d}, inside itself`, { details: { dst } });
      const newParent = this.tree.mustResolveParent(d);
      const name = baseName(d);
      if (this.tree.childrenOf(newParent.id).has(name)) throw new HarvestError("NAMENODE_FILE_EXISTS", `${d} exists`);
      const now = this.clock.nowMs();
      const oldParent = this.tree.get(inode.parentId) as DirRecord;
      const moved: InodeRecord = { ...inode, parentId: newParent.id, name };
      const change = emptyChange();
      change.delEdges.push({ parentId: oldParent.id, name: inode.name });
      change.putEdges.push({ parentId: newParent.id, name, childId: inode.id });
      change.putInodes.push(moved, { ...oldParent, mtimeMs: now });
      if (newParent.id !== oldParent.id) change.putInodes.push({ ...newParent, mtimeMs: now });
      await this.commit(change);
      return this.tree.status(d, moved);
    });
  }

  /** Sets the permission bits of a file or directory; only its owner (or the superuser) may. */
  async setPermission(path: string, mode: number, caller?: Caller): Promise<FileStatusOutput> {
    const p = normalizeDfsPath(path);
    if (!Number.isInteger(mode) || mode < 0 || mode > 0o777)
      throw invalid("mode", "must be permission bits in 0..0777 (setuid, setgid and sticky bits are not supported)");
    return this.exclusive(async () => {
      this.authorize(p, caller, { owner: true });
      const inode = this.tree.mustResolve(p);
      return this.putPermissions(p, { ...inode, mode });
    });
  }

  /**
   * Sets the owner and/or the group ("" keeps either): only the superuser may change the owner; the owner (or the
   * superuser) may change the group.
   */
  async setOwner(path: string, owner: string, group: string, caller?: Caller): Promise<FileStatusOutput> {
    const p = normalizeDfsPath(path);
    if (!owner && !group) throw invalid("owner", "or group is required");
    for (const [field, name] of [
      ["owner", owner],
      ["group", group],
    ] as const)
      if (name && !OWNER_NAME.test(name)) throw invalid(field, "must be 1-64 characters of [A-Za-z0-9_.@-]");
    return this.exclusive(async () => {
      this.authorize(p, caller, {});
      const inode = this.tree.mustResolve(p);
      if (caller)
        checkSetOwner(this.tree.permissionNode(p, inode), caller, {
          ...(owner ? { owner } : {}),
          ...(group ? { group } : {}),
        });
      return this.putPermissions(p, { ...inode, owner: owner || inode.owner, group: group || inode.group });
    });
  }

  /** Persists an inode whose owner, group or mode changed (ctime moves, as with chmod/chown in POSIX). */
  private async putPermissions(p: string, changed: InodeRecord): Promise<FileStatusOutput> {
    const updated: InodeRecord = { ...changed, ctimeMs: this.clock.nowMs() };
    const change = emptyChange();
    change.putInodes.push(updated);
    await this.commit(change);
    return this.tree.status(p, updated);
  }

  /**
   * Closes a file whose writer's lease expired without asking anyone: the last, uncommitted block is dropped and the
   * file is complete with its committed blocks (marked recovered). False if the file is gone, closed or its lease was
   * renewed meanwhile. The namenode uses it only when the block's pipeline is unknown; see `beginRecovery`.
   */
  async recoverLease(path: string, timeoutMs: number): Promise<boolean> {
    const p = normalizeDfsPath(path);
    return this.exclusive(async () => {
      const inode = this.tree.resolve(p);
      if (!inode || inode.kind !== "file" || inode.complete) return false;
      const renewed = this.leases.renewedAt(inode.id);
      if (this.clock.nowMs() - renewed < timeoutMs) return false;
      // Only a block still being written is dropped; committed ones keep their final length.
      const dropped = inode.blocks.slice(inode.committedBlocks);
      const reason =
        dropped.length > 0
          ? "lease expired; the block being written was dropped (its replicas are unknown)"
          : "lease expired; no block was being written";
      await this.closeFile(inode, inode.blocks.slice(0, inode.committedBlocks), reason);
      this.leases.endRecovery(inode.id);
      if (dropped.length > 0) this.listener.blocksRemoved(dropped);
      return true;
    });
  }

  /**
   * Starts the recovery of a file whose writer's lease expired. Without a block being written the file is closed at
   * once ("closed"); otherwise it is marked under recovery, its writer's calls are refused from now on, and the
   * block with its pipeline is returned for the namenode to ask the datanodes. Undefined if the file is gone, closed,
   * already under recovery or its lease was renewed meanwhile.
   */
  async beginRecovery(
    path: string,
    timeoutMs: number,
  ): Promise<"closed" | { inodeId: number; block: BlockRecord; pipeline: string[] } | undefined> {
    const p = normalizeDfsPath(path);
    return this.exclusive(async () => {
      const inode = this.tree.resolve(p);
      if (!inode || inode.kind !== "file" || inode.complete || this.leases.isRecovering(inode.id)) return undefined;
      const renewed = this.leases.renewedAt(inode.id);
      if (this.clock.nowMs() - renewed < timeoutMs) return undefined;
      const last = inode.blocks[inode.blocks.length - 1];
      if (inode.committedBlocks >= inode.blocks.length || !last) {
        await this.closeFile(inode, inode.blocks, "lease expired; no block was being written");
        return "closed";
      }
      if (!inode.pipeline || inode.pipeline.length === 0) {
        // Stored before recovery asked datanodes: nobody to ask, the block is dropped.
        await this.closeFile(
          inode,
          inode.blocks.slice(0, -1),
          "lease expired; the block being written was dropped (its replicas are unknown)",
        );
        this.listener.blocksRemoved([last]);
        return "closed";
      }
      this.leases.startRecovery(inode.id);
      return { inodeId: inode.id, block: { ...last }, pipeline: [...inode.pipeline] };
    });
  }

  /** Whether the file with this inode id is still open and under recovery (not deleted or replaced meanwhile). */
  isRecovering(inodeId: number): boolean {
    return this.leases.isRecovering(inodeId);
  }

  /**
   * Ends a recovery `beginRecovery` started: the last block is committed at `length` (dropped when 0) and the file
   * closed with a `recovered` mark giving `reason`. False if the file was deleted or replaced meanwhile.
   */
  async finishRecovery(inodeId: number, blockId: number, length: number, reason: string): Promise<boolean> {
    if (!(Number.isSafeInteger(length) && length >= 0)) throw invalid("length", "must be >= 0");
    return this.exclusive(async () => {
      const inode = this.tree.get(inodeId);
      const last = inode?.kind === "file" ? inode.blocks[inode.blocks.length - 1] : undefined;
      if (!inode || inode.kind !== "file" || !this.leases.isRecovering(inodeId) || last?.blockId !== blockId) {
        this.leases.endRecovery(inodeId);
        return false;
      }
      const blocks = inode.blocks.slice(0, -1);
      const kept = length > 0 ? { ...last, numBytes: length } : undefined;
      if (kept) blocks.push(kept);
      await this.closeFile(inode, blocks, reason);
      this.leases.endRecovery(inodeId);
      if (kept) this.listener.blockCommitted(kept);
      else this.listener.blocksRemoved([last]);
      return true;
    });
  }

  /**
   * Closes a file with `blocks` as its final block list and releases its lease (Complete, and lease recovery with the
   * `recovered` reason).
   */
  private async closeFile(file: FileRecord, blocks: BlockRecord[], recoveredReason?: string): Promise<FileRecord> {
    const { pipeline: _pipeline, ...rest } = file;
    const now = this.clock.nowMs();
    const done: FileRecord = {
      ...rest,
      blocks,
      committedBlocks: blocks.length,
      complete: true,
      leaseHolder: "",
      mtimeMs: now,
      ...(recoveredReason !== undefined ? { recovered: { atMs: now, reason: recoveredReason } } : {}),
    };
    const change = emptyChange();
    change.putInodes.push(done);
    await this.commit(change);
    this.leases.forget(file.id);
    return done;
  }

  /**
   * A standby applies a shared-log entry the active wrote (its store has it already): the tree and counters take the
   * inode, edge and counter operations, and the block map hears of every block the entry added, committed or removed,
   * as it did at the active. Other operations (datanode records, drains, cancelled tokens) are read from the store at
   * promotion.
   */
  applyReplicated(ops: readonly BatchOp[]): void {
    const change = changesetOfOps(ops);
    const events = replayedEvents(change, (id) => this.tree.get(id));
    for (const a of events.allocated) {
      this.listener.blockAllocated(a.block, a.inodeId, a.replication);
      if (a.committed) this.listener.blockCommitted(a.block);
    }
    for (const block of events.committed) this.listener.blockCommitted(block);
    for (const id of events.closed) this.leases.forget(id);
    for (const id of events.open) this.leases.openIfNew(id);
    this.tree.apply(change);
    this.counters = { ...this.counters, ...change.counters };
    if (events.removed.length > 0) this.listener.blocksRemoved(events.removed);
  }

  /** A new active: every open file's writer gets a full lease period from now (as after a restart). */
  renewAllLeases(): void {
    this.leases.renewAll();
  }

  /** Resolves once every mutation queued so far has finished (before closing the store). */
  drain(): Promise<void> {
    return this.edits.drain();
  }

  // ---------------------------------------------------------------------------------------------- internals

  /** Runs a mutation after those before it (edit-queue.ts); its caller is answered once its changes are synced. */
  private exclusive<T>(fn: () => Promise<T>): Promise<T> {
    if (!this.loaded) return Promise.reject(new HarvestError("INTERNAL", "namespace used before load()"));
    return this.edits.run(fn);
  }

  /** Applies a changeset in memory and queues it for the store's next synced batch (awaited by `exclusive`). */
  private async commit(change: Changeset): Promise<void> {
    this.edits.queue(change);
    this.tree.apply(change);
    this.counters = { ...this.counters, ...change.counters };
  }

  /**
   * Sets the final length of `given` on the block being written, the last of `blocks` (a copy the caller persists),
   * and returns it. When every block is already committed (none yet, or the block being written was abandoned),
   * `given` must be absent or repeat the last block exactly.
   */
  private commitLast(
    p: string,
    file: FileRecord,
    blocks: BlockRecord[],
    given: BlockRecord | null | undefined,
  ): BlockRecord | undefined {
    const last = blocks[blocks.length - 1];
    const mismatch = (): HarvestError =>
      new HarvestError(
        "NAMENODE_BLOCK_MISMATCH",
        `the block given (${given ? `${given.blockId}@${given.genStamp}` : "none"}) is not the last block of ${p}` +
          ` (${last ? `${last.blockId}@${last.genStamp}` : "none"})`,
      );
    if (file.committedBlocks >= blocks.length) {
      if (!given || (sameBlock(last, given) && last?.numBytes === given.numBytes)) return undefined;
      throw mismatch();
    }
    if (!last || !given || !sameBlock(last, given)) throw mismatch();
    if (!Number.isSafeInteger(given.numBytes) || given.numBytes < 0) throw invalid("numBytes", "must be >= 0");
    const committed = { ...last, numBytes: given.numBytes };
    blocks[blocks.length - 1] = committed;
    return committed;
  }

  /** The open file at `p` held by `clientName`, or the coded reason why not. */
  private leasedFile(p: string, clientName: string): FileRecord {
    const inode = this.tree.mustResolve(p);
    if (inode.kind !== "file") throw new HarvestError("NAMENODE_IS_A_DIRECTORY", `${p} is a directory`);
    if (this.leases.isRecovering(inode.id))
      throw new HarvestError(
        "NAMENODE_LEASE_MISMATCH",
        `the lease on ${p} expired and the namenode is recovering the file; write it again`,
        { details: { path: p } },
      );
    if (inode.complete || inode.leaseHolder !== clientName)
      throw new HarvestError(
        "NAMENODE_LEASE_MISMATCH",
        inode.complete
          ? `${p} is not open for writing`
          : `${p} is leased to another client, not ${JSON.stringify(clientName)}`,
      );
    return inode;
  }

  /** Throws DFS_PERMISSION_DENIED unless `caller` may do `request` on `p` (no caller: the namenode's own work). */
  private authorize(p: string, caller: Caller | undefined, request: AccessRequest): void {
    if (!caller || caller.superuser) return;
    checkPermission(this.tree.resolvedPath(p, request.sub !== undefined), caller, request);
  }
}

function emptyChange(): Changeset {
  return { putInodes: [], delInodes: [], putEdges: [], delEdges: [] };
}

function sameBlock(a: BlockRecord | null | undefined, b: BlockRecord | null | undefined): boolean {
  if (!a || !b) return !a && !b;
  return a.blockId === b.blockId && a.genStamp === b.genStamp;
}

function invalid(field: string, why: string): HarvestError {
  return new HarvestError("INVALID_ARGUMENT", `${field} ${why}`, { details: { field } });
}
