/**
 * HDFS-style permissions: a pure policy, no I/O. Every inode has an owner, a group and nine mode bits (rwx for the
 * owner, the group and everyone else); a caller is granted the owner's bits if it owns the inode, else the group's
 * bits if it belongs to the inode's group, else the others' bits (POSIX: the first class that matches decides, so an
 * owner with `---rwx---` is refused even if the group may). The superuser bypasses every check.
 *
 * {@link checkPermission} is HDFS's FSPermissionChecker.checkPermission over a resolved path: EXECUTE (traverse) on
 * every existing ancestor directory, then the access asked of the nearest existing ancestor, the parent, the inode
 * itself and every non-empty directory below it, then ownership. The namenode runs it before it looks at whether the
 * target exists, so a caller who may not traverse a directory cannot learn what is in it.
 */
import { formatMode } from "../../common/fs-permission.js";
import { HarvestError } from "../../common/errors.js";

/** READ, WRITE and EXECUTE as bits of one class (owner, group or other), as in POSIX. */
export const READ = 4;
/** See {@link READ}. */
export const WRITE = 2;
/** See {@link READ}. */
export const EXECUTE = 1;
/** READ | WRITE | EXECUTE. */
export const ALL = 7;

/** The umask applied to new inodes (HDFS's default `fs.permissions.umask-mode`). */
export const UMASK = 0o022;
/** Mode of a new directory: 0777 & ~umask = 0755. */
export const DEFAULT_DIR_MODE = 0o777 & ~UMASK;
/** Mode of a new file: 0666 & ~umask = 0644. */
export const DEFAULT_FILE_MODE = 0o666 & ~UMASK;
/** Group of the root directory and of inodes stored before permissions existed. */
export const DEFAULT_GROUP = "harvest";

/** The ownership and mode of one inode. */
export interface PermissionStatus {
  owner: string;
  group: string;
  /** The nine permission bits (0o000..0o777). */
  mode: number;
}

/** One inode on a path, as the checker needs it. */
export interface PermissionNode extends PermissionStatus {
  /** Its path, named in a refusal. */
  path: string;
  isDir: boolean;
}

/** Who is asking. */
export interface Caller {
  user: string;
  /** Groups the user belongs to. */
  groups: readonly string[];
  /** The superuser bypasses every check (the `admin` role, or the namenode's configured superuser when insecure). */
  superuser: boolean;
}

/**
 * What an operation needs, HDFS's `checkPermission(path, doCheckOwner, ancestorAccess, parentAccess, access,
 * subAccess)`. Each access is a combination of READ, WRITE and EXECUTE bits; 0 or absent asks nothing.
 */
export interface AccessRequest {
  /** Asked of the nearest existing ancestor (the parent when it exists): create, mkdirs, rename's destination. */
  ancestor?: number;
  /** Asked of the parent, if it exists: delete, rename's source. */
  parent?: number;
  /** Asked of the inode itself, if it exists: read, write, list. */
  access?: number;
  /** Asked of the inode and every directory below it that has children (recursive delete). */
  sub?: number;
  /** The caller must own the inode (setPermission, setOwner). */
  owner?: boolean;
}

/**
 * A resolved path: `chain[0]` is the root, `chain[i]` the inode of the i-th component, undefined from the first
 * component that does not exist. `subtree` yields the target directory and every directory below it (for `sub`).
 */
export interface ResolvedPath {
  path: string;
  chain: readonly (PermissionNode | undefined)[];
  subtree?: () => Iterable<PermissionNode & { hasChildren: boolean }>;
}

/** HDFS's FsAction name of an access (READ, WRITE, EXECUTE, READ_WRITE, READ_EXECUTE, WRITE_EXECUTE, ALL, NONE). */
export function accessName(access: number): string {
  const names = ["NONE", "EXECUTE", "WRITE", "WRITE_EXECUTE", "READ", "READ_EXECUTE", "READ_WRITE", "ALL"];
  return names[access & 7] ?? "NONE";
}

/** True when `caller` may do `access` (READ/WRITE/EXECUTE bits) on `inode`. */
export function permits(inode: PermissionStatus, caller: Caller, access: number): boolean {
  if (caller.superuser) return true;
  // The first class the caller falls in decides, as in POSIX.
  const shift = inode.owner === caller.user ? 6 : caller.groups.includes(inode.group) ? 3 : 0;
  const granted = (inode.mode >> shift) & 7;
  return (granted & access) === access;
}

/** The DFS_PERMISSION_DENIED error, worded as HDFS's AccessControlException. */
export function permissionDenied(caller: Caller, access: string, node: PermissionNode): HarvestError {
  return new HarvestError(
    "DFS_PERMISSION_DENIED",
    `Permission denied: user=${caller.user}, access=${access}, inode="${node.path}":` +
      `${node.owner}:${node.group}:${formatMode(node.mode, node.isDir)}`,
    { details: { path: node.path, user: caller.user, access } },
  );
}

/** Throws DFS_PERMISSION_DENIED unless `caller` may do `access` on `node`. */
export function check(node: PermissionNode, caller: Caller, access: number): void {
  if (!permits(node, caller, access)) throw permissionDenied(caller, accessName(access), node);
}

/** Throws DFS_PERMISSION_DENIED unless `caller` may do everything `request` asks on `resolved` (see the module doc). */
export function checkPermission(resolved: ResolvedPath, caller: Caller, request: AccessRequest): void {
  if (caller.superuser) return;
  const { chain } = resolved;
  const last = chain.length - 1;
  // The nearest existing ancestor of the target: every component before it exists.
  let ancestor = last - 1;
  while (ancestor >= 0 && chain[ancestor] === undefined) ancestor--;
  for (let i = 0; i <= ancestor; i++) {
    const dir = chain[i];
    if (dir?.isDir) check(dir, caller, EXECUTE);
  }
  const ancestorNode = ancestor >= 0 ? chain[ancestor] : undefined;
  if (request.ancestor && ancestorNode) check(ancestorNode, caller, request.ancestor);
  const parentNode = last >= 1 ? chain[last - 1] : undefined;
  if (request.parent && parentNode) check(parentNode, caller, request.parent);
  const target = chain[last];
  if (request.access && target) check(target, caller, request.access);
  // HDFS skips empty directories here: deleting an empty directory needs only WRITE on its parent.
  if (request.sub && target?.isDir)
    for (const dir of resolved.subtree?.() ?? []) if (dir.hasChildren) check(dir, caller, request.sub);
  if (request.owner && target && target.owner !== caller.user)
    throw new HarvestError(
      "DFS_PERMISSION_DENIED",
      `Permission denied: user=${caller.user} is not the owner of inode="${target.path}" (owner ${target.owner})`,
      { details: { path: target.path, user: caller.user, access: "OWNER" } },
    );
}

/**
 * Who may change what of an inode's ownership (HDFS setOwner, simplified): the superuser may change owner and group;
 * the owner may change the group (to any group: it only gives away access to its own inode); nobody else may.
 */
export function checkSetOwner(
  node: PermissionNode,
  caller: Caller,
  change: { owner?: string | undefined; group?: string | undefined },
): void {
  if (caller.superuser) return;
  if (change.owner !== undefined && change.owner !== node.owner)
    throw new HarvestError(
      "DFS_PERMISSION_DENIED",
      `Permission denied: user=${caller.user} is not the superuser; only the superuser may change the owner of ` +
        `inode="${node.path}"`,
      { details: { path: node.path, user: caller.user, access: "CHOWN" } },
    );
  if (node.owner !== caller.user)
    throw new HarvestError(
      "DFS_PERMISSION_DENIED",
      `Permission denied: user=${caller.user} is not the owner of inode="${node.path}" (owner ${node.owner})`,
      { details: { path: node.path, user: caller.user, access: "OWNER" } },
    );
}
