/**
 * The node's cache of localized resources (YARN's public file cache): what containers need from outside their own
 * directory is copied here once per node, keyed by the source's path, size and modification time, and containers read
 * the copy. Public entries are owned by the node manager and readable by every container account (directories 0755,
 * files 0644, or 0755 when the source is executable), below a data directory containers may pass through (0711).
 *
 * An entry is built in a hidden temporary directory and renamed into place, so a container never sees half of one,
 * and a node manager killed while localizing leaves only a temporary that the next run removes. An archive resource's
 * entry is the directory it unpacks to (archive-unpack.ts), keyed like a file by the archive's path, size and
 * modification time: a changed archive is fetched and unpacked again into a new entry.
 */
import { randomBytes, createHash } from "node:crypto";
import { chmod, chown, copyFile, link, mkdir, readdir, readFile, rename, rm, stat, writeFile } from "node:fs/promises";
import { basename, dirname, join } from "node:path";
import { ensureDirMode } from "../common/atomic-file.js";
import { unpackArchive } from "./archive-unpack.js";
import type { ArchiveLimits } from "./archive-unpack.js";
import { runtimeFiles } from "./task-runtime.js";
import type { RuntimeFile } from "./task-runtime.js";

/** How many versions of the task runtime a node keeps (the current one and those running containers may still use). */
const RUNTIME_VERSIONS_KEPT = 3;

/** What a localization did, for the log and the metrics. */
export interface Localized {
  /** The cached copy (a directory for the runtime, a file otherwise). */
  path: string;
  /** False when the cache already held it. */
  fetched: boolean;
  /** Files copied (not linked from an earlier version) and their bytes. */
  copiedFiles: number;
  copiedBytes: number;
}

/** One file of a DFS resource as the cache keys it: its path below the resource ("" for a file resource). */
export interface SourceFile {
  path: string;
  size: number;
  mtimeMs: number;
}

/** Who shares a cached copy: every container on the node, or one job's, running as `owner`. */
export type CacheScope =
  { visibility: "public" } | { visibility: "application"; appId: string; owner?: { uid: number; gid: number } };

/** A resource to cache: its source's name (for the key and the copy's name), its files, and how to fetch one. */
export interface CacheSource {
  /** e.g. "dfs:/user/alice/tool.js"; its last component names the copy. */
  source: string;
  /** A file resource: one entry with path "". A directory: every file below it. */
  files: SourceFile[];
  isDirectory: boolean;
  /** A file to unpack (a .tar, .tar.gz or .zip): the cached copy is the directory it unpacks to. */
  archive?: boolean;
  /** Writes the source file `path` (relative; "" the resource itself) to the new local file `to`. */
  fetch(path: string, to: string): Promise<void>;
}

/** A node's file cache below `root`: public entries, and one directory per job for its private ones. */
export class FileCache {
  private runtime: Promise<Localized> | undefined;
  private readonly files = new Map<string, Promise<Localized>>();
  private readonly fetches = new Map<string, Promise<Localized>>();

  constructor(
    readonly root: string,
    /** How large an archive resource may unpack. */
    private readonly archiveLimits: ArchiveLimits = { maxBytes: 4096 * 1024 * 1024, maxEntries: 100_000 },
  ) {}

  private get publicDir(): string {
    return join(this.root, "public");
  }

  /** Creates the cache's directories and removes the temporaries of an interrupted run. */
  async open(): Promise<void> {
    const dirs: [string, number][] = [
      [this.root, 0o755],
      [this.publicDir, 0o755],
      [join(this.publicDir, "runtime"), 0o755],
      [join(this.publicDir, "files"), 0o755],
      [join(this.publicDir, "dfs"), 0o755],
      // Jobs' private copies: each job's directory is its account's alone.
      [join(this.root, "app"), 0o711],
    ];
    for (const [dir, mode] of dirs) {
      if (!ensureDirMode(dir, mode))
        throw new Error(`cannot give the file cache directory ${dir} mode ${mode.toString(8)}`);
      for (const name of await readdir(dir))
        if (name.startsWith(".tmp-")) await rm(join(dir, name), { recursive: true, force: true });
    }
  }

  /**
   * Harvest's task runtime from the installation at `installRoot` (task-runtime.ts), localized: the directory to run
   * it from. A version is keyed by the path, size and modification time of every file; a file unchanged since the
   * newest cached version is hard-linked from it rather than copied. One localization at a time: callers that ask
   * while one runs share it.
   */
  localizeRuntime(installRoot: string): Promise<Localized> {
    const running = this.runtime;
    if (running) return running;
    const p = this.buildRuntime(installRoot).finally(() => {
      if (this.runtime === p) this.runtime = undefined;
    });
    this.runtime = p;
    return p;
  }

  private async buildRuntime(installRoot: string): Promise<Localized> {
    const files = await runtimeFiles(installRoot);
    const key = digest(JSON.stringify(files));
    const versions = join(this.publicDir, "runtime");
    const target = join(versions, key);
    if (await exists(target)) return { path: target, fetched: false, copiedFiles: 0, copiedBytes: 0 };

    const previous = await newestVersion(versions);
    const before = new Map<string, RuntimeFile>();
    if (previous) for (const f of await readManifest(previous)) before.set(f.path, f);
    const tmp = join(versions, `.tmp-${key}-${randomBytes(4).toString("hex")}`);
    let copiedFiles = 0;
    let copiedBytes = 0;
    try {
      const made = new Set<string>();
      for (const f of files) {
        const to = join(tmp, f.path);
        const dir = dirname(to);
        if (!made.has(dir)) {
          await mkdir(dir, { recursive: true, mode: 0o755 });
          made.add(dir);
        }
        const old = before.get(f.path);
        if (previous && old && old.size === f.size && old.mtimeMs === f.mtimeMs && old.executable === f.executable) {
          try {
            await link(join(previous, f.path), to);
            continue;
          } catch {
            // Gone from the old version, or another file system: copy it.
          }
        }
        await copyFile(join(installRoot, f.path), to);
        await chmod(to, f.executable ? 0o755 : 0o644);
        copiedFiles++;
        copiedBytes += f.size;
      }
      await writeFile(join(tmp, MANIFEST), JSON.stringify(files), { mode: 0o644 });
      // Directories get 0755 whatever the umask made of them: every container account reads the runtime.
      for (const dir of [tmp, ...made]) await chmod(dir, 0o755);
      await rename(tmp, target);
    } catch (err) {
      await rm(tmp, { recursive: true, force: true });
      if (await exists(target)) return { path: target, fetched: false, copiedFiles: 0, copiedBytes: 0 };
      throw err;
    }
    await pruneVersions(versions, target);
    return { path: target, fetched: true, copiedFiles, copiedBytes };
  }

  /**
   * A public copy of the local file `source` (a Node binary a container account cannot reach where it is installed),
   * keyed by its path, size and modification time: the same source unchanged is copied once.
   */
  localizeFile(source: string): Promise<Localized> {
    const running = this.files.get(source);
    if (running) return running;
    const p = this.buildFile(source).finally(() => this.files.delete(source));
    this.files.set(source, p);
    return p;
  }

  private async buildFile(source: string): Promise<Localized> {
    const st = await stat(source);
    const key = digest(JSON.stringify([source, st.size, Math.trunc(st.mtimeMs)]));
    const dir = join(this.publicDir, "files", key);
    const target = join(dir, basename(source));
    if (await exists(target)) return { path: target, fetched: false, copiedFiles: 0, copiedBytes: 0 };
    const tmp = join(this.publicDir, "files", `.tmp-${key}-${randomBytes(4).toString("hex")}`);
    try {
      await mkdir(tmp, { mode: 0o755 });
      await chmod(tmp, 0o755);
      await copyFile(source, join(tmp, basename(source)));
      await chmod(join(tmp, basename(source)), (st.mode & 0o111) !== 0 ? 0o755 : 0o644);
      await rename(tmp, dir);
    } catch (err) {
      await rm(tmp, { recursive: true, force: true });
      if (await exists(target)) return { path: target, fetched: false, copiedFiles: 0, copiedBytes: 0 };
      throw err;
    }
    return { path: target, fetched: true, copiedFiles: 1, copiedBytes: st.size };
  }

  /**
   * A DFS resource, cached: the same source with the same files (path, size, modification time) is fetched once per
   * scope, and a changed one again into a new entry. Public entries are readable by everyone; a job's entries
   * (directories 0700, files 0600) belong to `scope.owner`, below a directory of the job's own.
   */
  localizeSource(from: CacheSource, scope: CacheScope): Promise<Localized> {
    const key = digest(
      JSON.stringify([from.source, from.isDirectory, from.files, ...(from.archive ? ["archive"] : [])]),
    );
    const parent = scope.visibility === "public" ? join(this.publicDir, "dfs") : join(this.root, "app", scope.appId);
    const entry = join(parent, key);
    const running = this.fetches.get(entry);
    // A caller that joins a fetch in flight finds the copy cached: only the first counts it as fetched.
    if (running) return running.then((r) => ({ path: r.path, fetched: false, copiedFiles: 0, copiedBytes: 0 }));
    const p = this.fetchSource(from, scope, parent, entry).finally(() => this.fetches.delete(entry));
    this.fetches.set(entry, p);
    return p;
  }

  private async fetchSource(from: CacheSource, scope: CacheScope, parent: string, entry: string): Promise<Localized> {
    const name = from.source.slice(from.source.lastIndexOf("/") + 1) || "root";
    const target = join(entry, name);
    if (await exists(target)) return { path: target, fetched: false, copiedFiles: 0, copiedBytes: 0 };
    const isPublic = scope.visibility === "public";
    const owner = isPublic ? undefined : scope.owner;
    const [dirMode, fileMode] = isPublic ? [0o755, 0o644] : [0o700, 0o600];
    if (!isPublic) {
      await mkdir(parent, { recursive: true, mode: 0o700 });
      await chmod(parent, 0o700);
      if (owner) await chown(parent, owner.uid, owner.gid);
    }
    const tmp = join(parent, `.tmp-${basename(entry)}-${randomBytes(4).toString("hex")}`);
    let copiedFiles = 0;
    let copiedBytes = 0;
    try {
      const made = [tmp];
      await mkdir(tmp, { mode: dirMode });
      const top = join(tmp, name);
      if (from.isDirectory || from.archive) {
        await mkdir(top, { mode: dirMode });
        made.push(top);
      }
      if (from.archive) {
        // Fetched beside the directory it unpacks to, and gone before the entry is renamed into place.
        const packed = join(tmp, ".archive");
        await from.fetch("", packed);
        const unpacked = await unpackArchive(packed, top, this.archiveLimits, {
          dirMode,
          fileMode,
          execMode: dirMode,
          ...(owner ? { owner } : {}),
        });
        await rm(packed);
        copiedBytes += from.files[0]?.size ?? 0;
        copiedFiles += unpacked.files;
      }
      for (const f of from.archive ? [] : from.files) {
        const to = f.path === "" ? top : join(top, f.path);
        for (let d = dirname(to); d.length > top.length; d = dirname(d)) {
          if (made.includes(d)) break;
          await mkdir(d, { recursive: true, mode: dirMode });
          made.push(d);
        }
        await from.fetch(f.path, to);
        await chmod(to, fileMode);
        if (owner) await chown(to, owner.uid, owner.gid);
        copiedFiles++;
        copiedBytes += f.size;
      }
      for (const d of made) {
        await chmod(d, dirMode);
        if (owner) await chown(d, owner.uid, owner.gid);
      }
      await rename(tmp, entry);
    } catch (err) {
      await rm(tmp, { recursive: true, force: true });
      if (await exists(target)) return { path: target, fetched: false, copiedFiles: 0, copiedBytes: 0 };
      throw err;
    }
    return { path: target, fetched: true, copiedFiles, copiedBytes };
  }

  /** Removes a job's private entries (at the job's end, or when its containers are gone). */
  async forgetApplication(appId: string): Promise<void> {
    await rm(join(this.root, "app", appId), { recursive: true, force: true });
  }
}

/** The list of files a runtime version holds, written last before the version is renamed into place. */
const MANIFEST = ".runtime-files.json";

async function readManifest(version: string): Promise<RuntimeFile[]> {
  try {
    return JSON.parse(await readFile(join(version, MANIFEST), "utf8")) as RuntimeFile[];
  } catch {
    return [];
  }
}

/** The most recently completed version in `versions`, if any. */
async function newestVersion(versions: string): Promise<string | undefined> {
  const dated = await datedVersions(versions);
  return dated[0]?.path;
}

/** Completed versions, newest first. */
async function datedVersions(versions: string): Promise<{ path: string; mtimeMs: number }[]> {
  const out: { path: string; mtimeMs: number }[] = [];
  for (const name of await readdir(versions)) {
    if (name.startsWith(".")) continue;
    try {
      out.push({ path: join(versions, name), mtimeMs: (await stat(join(versions, name, MANIFEST))).mtimeMs });
    } catch {
      // Not a completed version.
    }
  }
  return out.sort((a, b) => b.mtimeMs - a.mtimeMs);
}

/** Removes all but the newest versions; `current` is always kept. */
async function pruneVersions(versions: string, current: string): Promise<void> {
  const dated = await datedVersions(versions);
  for (const { path } of dated.slice(RUNTIME_VERSIONS_KEPT))
    if (path !== current) await rm(path, { recursive: true, force: true });
}

function digest(text: string): string {
  return createHash("sha256").update(text).digest("hex").slice(0, 20);
}

async function exists(path: string): Promise<boolean> {
  try {
    await stat(path);
    return true;
  } catch {
    return false;
  }
}
