/**
 * The namespace's inode tree in memory: inodes by id and each directory's entries by name, path resolution, the
 * statuses and views built from inodes, and the changesets applied to it (namespace.ts checks and persists them).
 */
import { normalizeDfsPath, parentPath, pathComponents } from "../common/dfs-path.js";
import { HarvestError } from "../common/errors.js";
import type { FileStatusOutput } from "../proto/generated/harvest/v1/FileStatus.js";
import { ROOT_INODE_ID } from "./namespace-store.js";
import type { BlockRecord, Changeset, DirRecord, FileRecord, InodeRecord, LoadedNamespace } from "./namespace-store.js";
import type { PermissionNode, ResolvedPath } from "./policy/permissions.js";

/** A block of a file with the offset of its first byte. */
export interface LocatedBlockRecord {
  block: BlockRecord;
  offset: number;
  /** False only for the block an open file is being written to. */
  committed: boolean;
}

/** A file as the block layer and readers see it. */
export interface FileView {
  path: string;
  inode: Readonly<FileRecord>;
  length: number;
  blocks: LocatedBlockRecord[];
}

/** Counts over the whole namespace. */
export interface NamespaceCounts {
  files: number;
  directories: number;
  blocks: number;
}

/** The inodes of the namespace and the directory entries between them. */
export class InodeTree {
  private readonly inodes = new Map<number, InodeRecord>();
  private readonly children = new Map<number, Map<string, number>>();

  /** Fills the (empty) tree from what the store loaded; throws INTERNAL if the store is inconsistent. */
  load({ inodes, edges }: Pick<LoadedNamespace, "inodes" | "edges">): void {
    for (const inode of inodes) {
      this.inodes.set(inode.id, inode);
      if (inode.kind === "dir") this.children.set(inode.id, new Map());
    }
    for (const e of edges) {
      const dir = this.children.get(e.parentId);
      if (!dir || !this.inodes.has(e.childId))
        throw new HarvestError("INTERNAL", `namespace store is inconsistent: edge ${e.parentId}/${e.name}`);
      dir.set(e.name, e.childId);
    }
    if (this.inodes.get(ROOT_INODE_ID)?.kind !== "dir") throw new HarvestError("INTERNAL", "namespace has no root");
  }

  /** Applies a changeset in memory. */
  apply(change: Changeset): void {
    for (const id of change.delInodes) {
      this.inodes.delete(id);
      this.children.delete(id);
    }
    for (const e of change.delEdges) this.children.get(e.parentId)?.delete(e.name);
    for (const inode of change.putInodes) {
      this.inodes.set(inode.id, inode);
      if (inode.kind === "dir" && !this.children.has(inode.id)) this.children.set(inode.id, new Map());
    }
    for (const e of change.putEdges) this.children.get(e.parentId)?.set(e.name, e.childId);
  }

  /** The inode of an id, or undefined if it is gone. */
  get(id: number): InodeRecord | undefined {
    return this.inodes.get(id);
  }

  /** Every inode. */
  all(): IterableIterator<InodeRecord> {
    return this.inodes.values();
  }

  /**
   * Every file at or below `path` (depth first, by name), with the number of directories walked; `enter` sees each
   * directory before its entries (and may throw to end the walk: fsck's permission check).
   */
  walk(path: string, enter?: (dir: PermissionNode) => void): { files: FileView[]; directories: number } {
    const p = normalizeDfsPath(path);
    const start = this.mustResolve(p);
    const files: FileView[] = [];
    let directories = 0;
    const visit = (at: string, inode: InodeRecord): void => {
      if (inode.kind === "file") {
        files.push(this.fileView(at, inode));
        return;
      }
      enter?.(this.permissionNode(at, inode));
      directories += 1;
      const kids = this.childrenOf(inode.id);
      for (const name of [...kids.keys()].sort()) {
        const child = this.inodes.get(kids.get(name) ?? -1);
        if (child) visit(at === "/" ? `/${name}` : `${at}/${name}`, child);
      }
    };
    visit(p, start);
    return { files, directories };
  }

  /** Every block of every file with its owner inode and replication (to rebuild the block map at start). */
  *allBlocks(): Generator<{ block: BlockRecord; inodeId: number; replication: number; committed: boolean }> {
    for (const inode of this.inodes.values()) {
      if (inode.kind !== "file") continue;
      for (const [i, block] of inode.blocks.entries())
        yield {
          block,
          inodeId: inode.id,
          replication: inode.replication,
          committed: inode.complete || i < inode.committedBlocks,
        };
    }
  }

  /** The path of an inode, or undefined if it is gone. */
  pathOf(inodeId: number): string | undefined {
    const parts: string[] = [];
    let inode = this.inodes.get(inodeId);
    while (inode && inode.id !== ROOT_INODE_ID) {
      parts.push(inode.name);
      inode = this.inodes.get(inode.parentId);
    }
    return inode ? "/" + parts.reverse().join("/") : undefined;
  }

  /** Files, directories (with "/") and blocks in the namespace. */
  counts(): NamespaceCounts {
    let files = 0;
    let directories = 0;
    let blocks = 0;
    for (const inode of this.inodes.values()) {
      if (inode.kind === "dir") directories += 1;
      else {
        files += 1;
        blocks += inode.blocks.length;
      }
    }
    return { files, directories, blocks };
  }

  /** The inodes along `p` from the root; undefined from the first missing one (or one below a file). */
  resolvedPath(p: string, withSubtree: boolean): ResolvedPath {
    const chain: (PermissionNode | undefined)[] = [this.permissionNode("/", this.root())];
    let inode: InodeRecord | undefined = this.root();
    let at = "";
    for (const name of pathComponents(p)) {
      at += `/${name}`;
      inode = inode?.kind === "dir" ? this.inodes.get(this.childrenOf(inode.id).get(name) ?? -1) : undefined;
      chain.push(inode ? this.permissionNode(at, inode) : undefined);
    }
    const target = inode;
    if (!withSubtree || target?.kind !== "dir") return { path: p, chain };
    const subtree = function* (this: InodeTree): Generator<PermissionNode & { hasChildren: boolean }> {
      const stack: [string, DirRecord][] = [[p, target]];
      for (let next = stack.pop(); next; next = stack.pop()) {
        const [dirPath, dir] = next;
        const kids = this.childrenOf(dir.id);
        yield { ...this.permissionNode(dirPath, dir), hasChildren: kids.size > 0 };
        for (const [name, id] of kids) {
          const child = this.inodes.get(id);
          if (child?.kind === "dir") stack.push([dirPath === "/" ? `/${name}` : `${dirPath}/${name}`, child]);
        }
      }
    };
    return { path: p, chain, subtree: () => subtree.call(this) };
  }

  permissionNode(p: string, inode: InodeRecord): PermissionNode {
    return { path: p, owner: inode.owner, group: inode.group, mode: inode.mode, isDir: inode.kind === "dir" };
  }

  /** The inode at `p`, or undefined when it is missing or a file is in the way (the caller reports which later). */
  resolveQuietly(p: string): InodeRecord | undefined {
    try {
      return this.resolve(p);
    } catch {
      return undefined;
    }
  }

  root(): DirRecord {
    return this.inodes.get(ROOT_INODE_ID) as DirRecord;
  }

  childrenOf(id: number): Map<string, number> {
    return this.children.get(id) ?? new Map();
  }

  /** The inode at a normalised path; undefined if missing; NAMENODE_NOT_A_DIRECTORY if a file is in the way. */
  resolve(p: string): InodeRecord | undefined {
    let inode: InodeRecord = this.root();
    let at = "";
    for (const name of pathComponents(p)) {
      if (inode.kind !== "dir") throw new HarvestError("NAMENODE_NOT_A_DIRECTORY", `${at} is a file`);
      at += `/${name}`;
      const next = this.inodes.get(this.childrenOf(inode.id).get(name) ?? -1);
      if (!next) return undefined;
      inode = next;
    }
    return inode;
  }

  mustResolve(p: string): InodeRecord {
    const inode = this.resolve(p);
    if (!inode) throw new HarvestError("NAMENODE_FILE_NOT_FOUND", `${p} does not exist`, { details: { path: p } });
    return inode;
  }

  /** The directory that would hold `p`: NAMENODE_PARENT_NOT_FOUND / NAMENODE_NOT_A_DIRECTORY otherwise. */
  mustResolveParent(p: string): DirRecord {
    const pp = parentPath(p);
    const parent = this.resolve(pp);
    if (!parent) throw new HarvestError("NAMENODE_PARENT_NOT_FOUND", `${pp} does not exist`, { details: { path: pp } });
    if (parent.kind !== "dir") throw new HarvestError("NAMENODE_NOT_A_DIRECTORY", `${pp} is a file`);
    return parent;
  }

  fileView(p: string, inode: FileRecord): FileView {
    let offset = 0;
    const blocks = inode.blocks.map((block, i) => {
      const located = { block, offset, committed: inode.complete || i < inode.committedBlocks };
      offset += block.numBytes;
      return located;
    });
    return { path: p, inode, length: offset, blocks };
  }

  status(p: string, inode: InodeRecord): FileStatusOutput {
    if (inode.kind === "dir")
      return {
        path: p,
        isDir: true,
        length: 0,
        replication: 0,
        blockSize: 0,
        owner: inode.owner,
        group: inode.group,
        mode: inode.mode,
        mtimeMs: inode.mtimeMs,
        ctimeMs: inode.ctimeMs,
        complete: true,
        blocks: 0,
        recoveredMs: 0,
        recoveredReason: "",
      };
    return {
      path: p,
      isDir: false,
      length: inode.blocks.reduce((sum, b) => sum + b.numBytes, 0),
      replication: inode.replication,
      blockSize: inode.blockSizeBytes,
      owner: inode.owner,
      group: inode.group,
      mode: inode.mode,
      mtimeMs: inode.mtimeMs,
      ctimeMs: inode.ctimeMs,
      complete: inode.complete,
      blocks: inode.blocks.length,
      recoveredMs: inode.recovered?.atMs ?? 0,
      recoveredReason: inode.recovered?.reason ?? "",
    };
  }
}
