/**
 * Unpacking an archive resource (YARN's LocalResourceType ARCHIVE) into a directory of the node's file cache: a .tar,
 * a gzip-compressed tar (.tar.gz, .tgz) or a .zip, told apart by their first bytes, not their names. An archive is
 * hostile input: every entry's path is checked before anything is written for it, and the archive is refused
 * (ARCHIVE_REFUSED, naming the entry and a `reason`) for an absolute path or a `..` component, a path through a
 * symbolic link, a symbolic or hard link that leads outside the directory, a device, FIFO or other special file, two
 * entries of one path, more than `maxEntries` entries, or more than `maxBytes` unpacked (for a tar, its uncompressed
 * stream). Nothing is ever written outside the directory: parents are created by the unpacker itself, files are
 * created exclusively (an existing name is never followed), and symbolic links are created last, once every entry is
 * in place, after their targets are resolved against the archive's own tree. Modes come from the caller (an entry's
 * only say is whether it is executable) and everything belongs to the caller's owner; the archive's owners, times,
 * set-id bits and extended attributes are ignored.
 */
import { createReadStream, createWriteStream } from "node:fs";
import { chmod, chown, lchown, link, mkdir, open, symlink } from "node:fs/promises";
import { join } from "node:path";
import { Transform } from "node:stream";
import type { Readable } from "node:stream";
import { pipeline } from "node:stream/promises";
import { createGunzip } from "node:zlib";
import { Parser } from "tar";
import type { ReadEntry } from "tar";
import yauzl from "yauzl";
import type { Entry, ZipFile } from "yauzl";
import { errorMessage, HarvestError } from "../common/errors.js";

/** How large an archive may unpack. */
export interface ArchiveLimits {
  /** Bytes of file contents (for a tar, of its uncompressed stream). */
  maxBytes: number;
  /** Entries: files, directories and links. */
  maxEntries: number;
}

/** The modes and owner of what is unpacked. */
export interface UnpackModes {
  dirMode: number;
  fileMode: number;
  /** For files the archive marks executable (any x bit). */
  execMode: number;
  owner?: { uid: number; gid: number };
}

/** Why an archive was refused (the `reason` of ARCHIVE_REFUSED). */
export type ArchiveRefusal =
  | "unsafe-path"
  | "link-outside"
  | "special-file"
  | "duplicate"
  | "too-large"
  | "too-many-entries"
  | "corrupt"
  | "unsupported";

/** What an archive unpacked to. */
export interface Unpacked {
  files: number;
  bytes: number;
}

/** The archive formats, as their first bytes tell them. */
export type ArchiveFormat = "tar" | "tar.gz" | "zip";

/** Symbolic links followed in one resolution before a loop is assumed (Linux's own limit). */
const MAX_LINK_DEPTH = 40;
/** A zip's symbolic link holds its target as its contents: longer than a path can be is not one. */
const MAX_LINK_TARGET_BYTES = 4096;

/** The refusal of an archive because of `entry` (undefined: the archive as a whole). */
export function refuse(entry: string | undefined, reason: ArchiveRefusal, why: string): HarvestError {
  return new HarvestError("ARCHIVE_REFUSED", entry === undefined ? why : `entry ${JSON.stringify(entry)}: ${why}`, {
    details: { reason, ...(entry !== undefined ? { entry } : {}) },
  });
}

/** Tells a tar, a gzip-compressed tar and a zip apart by their first bytes; anything else is refused. */
export async function archiveFormat(file: string): Promise<ArchiveFormat> {
  const fh = await open(file, "r");
  const head = Buffer.alloc(512);
  let n: number;
  try {
    ({ bytesRead: n } = await fh.read(head, 0, head.length, 0));
  } finally {
    await fh.close();
  }
  if (n >= 2 && head[0] === 0x1f && head[1] === 0x8b) return "tar.gz";
  if (n >= 4 && head.readUInt32LE(0) === 0x04034b50) return "zip";
  if (n >= 4 && head.readUInt32LE(0) === 0x06054b50) return "zip"; // An empty zip: only its end record.
  if (isTarHeader(head.subarray(0, n))) return "tar";
  throw refuse(undefined, "unsupported", "not a tar, tar.gz or zip archive (by its first bytes)");
}

/** A POSIX (ustar, pax) or GNU tar header block: "ustar" at offset 257. */
function isTarHeader(block: Buffer): boolean {
  return block.length >= 263 && block.toString("latin1", 257, 262) === "ustar";
}

/** Unpacks the archive `file` into the existing, empty directory `into`. Throws ARCHIVE_REFUSED for a hostile one. */
export async function unpackArchive(
  file: string,
  into: string,
  limits: ArchiveLimits,
  modes: UnpackModes,
): Promise<Unpacked> {
  const format = await archiveFormat(file);
  const tree = new TreeWriter(into, limits, modes);
  if (format === "zip") await unpackZip(file, tree, limits);
  else await unpackTar(file, format === "tar.gz", tree, limits);
  await tree.finish();
  return { files: tree.files, bytes: tree.bytes };
}

/**
 * An entry's path as a relative path below the directory ("" for the directory itself), or ARCHIVE_REFUSED: absolute
 * paths, `..` components, backslashes (a Windows separator, or a name no tool meant) and NULs are refused.
 */
export function entryPath(raw: string): string {
  if (raw.includes("\0") || raw.includes("\\"))
    throw refuse(raw, "unsafe-path", "a path with a backslash or a NUL character");
  if (raw.startsWith("/") || /^[A-Za-z]:/.test(raw)) throw refuse(raw, "unsafe-path", "an absolute path");
  const parts = raw.split("/").filter((p) => p !== "" && p !== ".");
  if (parts.includes("..")) throw refuse(raw, "unsafe-path", "a path with a '..' component");
  return parts.join("/");
}

/** Writes the entries of one archive below `root`, checking each, and its symbolic links at the end. */
class TreeWriter {
  /** What each path below the root is, as the archive made it (parents it implied are directories). */
  private readonly kinds = new Map<string, "dir" | "file" | "symlink">();
  /** Symbolic links to create at the end: path -> target, and the entry name to blame. */
  private readonly links = new Map<string, { target: string; raw: string }>();
  private entries = 0;
  files = 0;
  bytes = 0;

  constructor(
    private readonly root: string,
    private readonly limits: ArchiveLimits,
    private readonly modes: UnpackModes,
  ) {}

  async dir(raw: string): Promise<void> {
    const path = await this.place(raw, "dir");
    if (path === undefined) return;
    await mkdir(join(this.root, path), { mode: this.modes.dirMode });
    await this.own(path, this.modes.dirMode);
  }

  /** A regular file of `size` bytes (as the archive declares it), its contents read from `data`. */
  async file(raw: string, size: number, executable: boolean, data: AsyncIterable<Buffer>): Promise<void> {
    this.reserve(raw, size);
    const path = await this.place(raw, "file");
    if (path === undefined) throw refuse(raw, "unsafe-path", "a file entry that names the archive's top directory");
    const mode = executable ? this.modes.execMode : this.modes.fileMode;
    let written = 0;
    const counter = new Transform({
      transform: (chunk: Buffer, _enc, done) => {
        written += chunk.length;
        // A zip may say less than it holds: what is written counts, not what was declared.
        if (written > size) done(refuse(raw, "corrupt", `holds more than the ${size} bytes it declares`));
        else done(null, chunk);
      },
    });
    try {
      // "wx": created, never opened through whatever might already be there.
      await pipeline(data, counter, createWriteStream(join(this.root, path), { flags: "wx", mode }));
    } catch (err) {
      // A system call's failure (a full disk) may pass; anything else is the archive's data.
      if (err instanceof HarvestError || (err as { syscall?: unknown }).syscall !== undefined) throw err;
      throw refuse(raw, "corrupt", `cannot unpack it: ${errorMessage(err)}`);
    }
    if (written !== size) throw refuse(raw, "corrupt", `holds ${written} bytes, not the ${size} it declares`);
    await this.own(path, mode);
    this.files++;
  }

  /** A symbolic link, created by `finish` once its target is known to stay inside the directory. */
  async symlink(raw: string, target: string): Promise<void> {
    const path = await this.place(raw, "symlink");
    if (path === undefined) throw refuse(raw, "unsafe-path", "a link entry that names the archive's top directory");
    if (target === "" || target.includes("\0") || target.startsWith("/"))
      throw refuse(raw, "link-outside", `a symbolic link to ${JSON.stringify(target)}, outside the archive`);
    this.links.set(path, { target, raw });
  }

  /** A hard link to a regular file the archive holds before it. */
  async hardlink(raw: string, target: string): Promise<void> {
    let to: string;
    try {
      to = entryPath(target);
    } catch {
      throw refuse(raw, "link-outside", `a hard link to ${JSON.stringify(target)}, outside the archive`);
    }
    if (this.kinds.get(to) !== "file")
      throw refuse(
        raw,
        "link-outside",
        `a hard link to ${JSON.stringify(target)}, not a file the archive holds before it`,
      );
    const path = await this.place(raw, "file");
    if (path === undefined) throw refuse(raw, "unsafe-path", "a link entry that names the archive's top directory");
    await link(join(this.root, to), join(this.root, path));
    this.files++;
  }

  /** Creates the symbolic links, each refused unless its target, resolved in the archive's own tree, stays inside. */
  async finish(): Promise<void> {
    for (const [path, { target, raw }] of this.links) {
      const parent = path.split("/").slice(0, -1);
      if (this.resolve(parent, target, 0) === undefined)
        throw refuse(
          raw,
          "link-outside",
          `a symbolic link to ${JSON.stringify(target)}, which leads outside the archive`,
        );
    }
    for (const [path, { target }] of this.links) {
      await symlink(target, join(this.root, path));
      if (this.modes.owner) await lchown(join(this.root, path), this.modes.owner.uid, this.modes.owner.gid);
    }
  }

  /** Counts an entry of `size` bytes against the limits, before anything of it is written. */
  private reserve(raw: string, size: number): void {
    if (!(Number.isSafeInteger(size) && size >= 0)) throw refuse(raw, "corrupt", `an invalid size ${String(size)}`);
    this.bytes += size;
    if (this.bytes > this.limits.maxBytes)
      throw refuse(raw, "too-large", `unpacks to more than ${this.limits.maxBytes} bytes (the node's limit)`);
  }

  /**
   * Checks the entry `raw` of kind `kind` and creates the directories above it; answers its relative path, or
   * undefined for a directory that is there already (the root, or one an earlier entry implied).
   */
  private async place(raw: string, kind: "dir" | "file" | "symlink"): Promise<string | undefined> {
    if (++this.entries > this.limits.maxEntries)
      throw refuse(raw, "too-many-entries", `more than ${this.limits.maxEntries} entries (the node's limit)`);
    const path = entryPath(raw);
    if (path === "") return kind === "dir" ? undefined : path;
    const parts = path.split("/");
    for (let i = 1; i < parts.length; i++) {
      const above = parts.slice(0, i).join("/");
      const was = this.kinds.get(above);
      if (was === "symlink")
        throw refuse(raw, "unsafe-path", `a path through the symbolic link ${JSON.stringify(above)}`);
      if (was === "file") throw refuse(raw, "duplicate", `a path below the file ${JSON.stringify(above)}`);
      if (was === undefined) {
        await mkdir(join(this.root, above), { mode: this.modes.dirMode });
        await this.own(above, this.modes.dirMode);
        this.kinds.set(above, "dir");
      }
    }
    const was = this.kinds.get(path);
    if (was === "dir" && kind === "dir") return undefined;
    if (was !== undefined) throw refuse(raw, "duplicate", "a second entry of the same path");
    this.kinds.set(path, kind);
    return path;
  }

  /**
   * Where `target`, a link's target read in the directory `dir` (path components), leads in the archive's tree,
   * following the archive's own symbolic links as the kernel will: undefined when it goes above the root (or loops).
   */
  private resolve(dir: string[], target: string, depth: number): string[] | undefined {
    if (depth > MAX_LINK_DEPTH || target.startsWith("/")) return undefined;
    let at = [...dir];
    for (const part of target.split("/")) {
      if (part === "" || part === ".") continue;
      if (part === "..") {
        if (at.length === 0) return undefined;
        at.pop();
        continue;
      }
      at.push(part);
      const link = this.links.get(at.join("/"));
      if (link) {
        const next = this.resolve(at.slice(0, -1), link.target, depth + 1);
        if (next === undefined) return undefined;
        at = next;
      }
    }
    return at;
  }

  private async own(path: string, mode: number): Promise<void> {
    const full = join(this.root, path);
    // Whatever the umask made of it.
    await chmod(full, mode);
    if (this.modes.owner) await chown(full, this.modes.owner.uid, this.modes.owner.gid);
  }
}

/**
 * A tar (gzip-compressed when `gz`) through node-tar's parser, strict (a damaged header fails), decompressed here so
 * that what it unpacks to is counted and bounded: the stream stops at `maxBytes`, and at the archive's end marker.
 */
async function unpackTar(file: string, gz: boolean, tree: TreeWriter, limits: ArchiveLimits): Promise<void> {
  const parser = new Parser({ strict: true, brotli: false, zstd: false });
  let failure: unknown;
  const waiters = new Set<() => void>();
  const fail = (err: unknown): void => {
    failure ??= err;
    for (const w of waiters) w();
  };
  let entries = Promise.resolve();
  parser.on("entry", (entry: ReadEntry) => {
    entries = entries
      .then(() => (failure === undefined ? tarEntry(entry, tree) : undefined))
      .catch(fail)
      .finally(() => entry.resume());
  });
  parser.on("ignoredEntry", (entry: ReadEntry) =>
    fail(refuse(entry.path, "unsupported", `an entry of type ${entry.type}, which is not unpacked`)),
  );
  parser.on("error", (err: unknown) => fail(refuse(undefined, "corrupt", `not a valid tar: ${errorMessage(err)}`)));
  let eof = false;
  parser.on("eof", () => {
    eof = true;
  });
  const ended = new Promise<void>((resolve) => {
    parser.on("end", resolve);
    waiters.add(resolve);
  });
  const wait = (event: "drain"): Promise<void> =>
    new Promise<void>((resolve) => {
      const done = (): void => {
        parser.off(event, done);
        waiters.delete(done);
        resolve();
      };
      parser.on(event, done);
      waiters.add(done);
    });

  const input = createReadStream(file);
  let source: Readable = input;
  if (gz) {
    const gunzip = createGunzip();
    input.on("error", (err) => gunzip.destroy(err));
    source = input.pipe(gunzip);
  }
  let total = 0;
  let first = true;
  try {
    for await (const chunk of source as AsyncIterable<Buffer>) {
      if (first && !isTarHeader(chunk.subarray(0, 512)) && chunk.length >= 263)
        throw refuse(undefined, "unsupported", "its gzip stream does not hold a tar");
      first = false;
      total += chunk.length;
      if (total > limits.maxBytes)
        throw refuse(undefined, "too-large", `unpacks to more than ${limits.maxBytes} bytes (the node's limit)`);
      if (failure !== undefined || eof) break;
      if (!parser.write(chunk) && failure === undefined) await wait("drain");
      if (failure !== undefined || eof) break;
    }
  } catch (err) {
    if (err instanceof HarvestError) fail(err);
    else fail(refuse(undefined, "corrupt", `cannot decompress it: ${errorMessage(err)}`));
  } finally {
    source.destroy();
    input.destroy();
  }
  if (failure === undefined) {
    parser.end();
    await ended;
  }
  await entries;
  if (failure !== undefined) throw failure;
}

/** One tar entry, as its type says. */
async function tarEntry(entry: ReadEntry, tree: TreeWriter): Promise<void> {
  switch (entry.type) {
    case "Directory":
      return tree.dir(entry.path);
    case "File":
    case "OldFile":
    case "ContiguousFile":
      return tree.file(entry.path, entry.size ?? 0, ((entry.mode ?? 0) & 0o111) !== 0, entry);
    case "SymbolicLink":
      return tree.symlink(entry.path, entry.linkpath ?? "");
    case "Link":
      return tree.hardlink(entry.path, entry.linkpath ?? "");
    default:
      throw refuse(entry.path, "special-file", `a ${entry.type} entry (devices, FIFOs and the like are not unpacked)`);
  }
}

/** How a zip entry is unpacked, from its name and (when a Unix tool made it) its mode. */
interface ZipPlan {
  entry: Entry;
  name: string;
  kind: "dir" | "file" | "symlink";
  executable: boolean;
}

/**
 * A zip through yauzl: its central directory is read and every entry checked (name, type, method, declared sizes)
 * before anything is written; then the entries are unpacked, each checked again as it is written (yauzl checks that
 * an entry holds what it declares).
 */
async function unpackZip(file: string, tree: TreeWriter, limits: ArchiveLimits): Promise<void> {
  let zip: ZipFile;
  try {
    zip = await yauzl.openPromise(file, {
      lazyEntries: true,
      autoClose: false,
      decodeStrings: false,
      validateEntrySizes: true,
      strictFileNames: true,
    });
  } catch (err) {
    throw refuse(undefined, "corrupt", `not a valid zip: ${errorMessage(err)}`);
  }
  try {
    if (zip.entryCount > limits.maxEntries)
      throw refuse(
        undefined,
        "too-many-entries",
        `${zip.entryCount} entries, more than the node's limit of ${limits.maxEntries}`,
      );
    const plans: ZipPlan[] = [];
    let declared = 0;
    for (const entry of await zipEntries(zip)) {
      const plan = zipPlan(entry);
      entryPath(plan.name);
      declared += plan.kind === "dir" ? 0 : entry.uncompressedSize;
      if (declared > limits.maxBytes)
        throw refuse(
          plan.name,
          "too-large",
          `the archive unpacks to more than ${limits.maxBytes} bytes (the node's limit)`,
        );
      plans.push(plan);
    }
    for (const p of plans) {
      if (p.kind === "dir") {
        await tree.dir(p.name);
        continue;
      }
      const data = await openZipEntry(zip, p);
      if (p.kind === "file") await tree.file(p.name, p.entry.uncompressedSize, p.executable, data);
      else await tree.symlink(p.name, await readLinkTarget(data, p.name));
    }
  } finally {
    zip.close();
  }
}

function zipEntries(zip: ZipFile): Promise<Entry[]> {
  return new Promise<Entry[]>((resolve, reject) => {
    const out: Entry[] = [];
    zip.on("entry", (e: Entry) => {
      out.push(e);
      zip.readEntry();
    });
    zip.on("end", () => resolve(out));
    zip.on("error", (err: unknown) => reject(refuse(undefined, "corrupt", `not a valid zip: ${errorMessage(err)}`)));
    zip.readEntry();
  });
}

function zipPlan(entry: Entry): ZipPlan {
  const name = yauzl.getFileNameLowLevel(entry.generalPurposeBitFlag, entry.fileNameRaw, entry.extraFields, true);
  if (entry.isEncrypted()) throw refuse(name, "unsupported", "an encrypted entry");
  // Made by a Unix tool: the high half of the external attributes is the file's st_mode.
  const mode = entry.versionMadeBy >>> 8 === 3 ? entry.externalFileAttributes >>> 16 : 0;
  const type = mode & 0o170000;
  let kind: ZipPlan["kind"];
  if (name.endsWith("/") || type === 0o040000) kind = "dir";
  else if (type === 0o120000) kind = "symlink";
  else if (type === 0 || type === 0o100000) kind = "file";
  else
    throw refuse(
      name,
      "special-file",
      `a special file (mode ${type.toString(8)}): devices, FIFOs and sockets are not unpacked`,
    );
  if (kind !== "dir" && entry.compressionMethod !== 0 && entry.compressionMethod !== 8)
    throw refuse(name, "unsupported", `compression method ${entry.compressionMethod} (only stored and deflated)`);
  return { entry, name, kind, executable: (mode & 0o111) !== 0 };
}

async function openZipEntry(zip: ZipFile, p: ZipPlan): Promise<Readable> {
  try {
    return await zip.openReadStreamPromise(p.entry);
  } catch (err) {
    throw refuse(p.name, "corrupt", `cannot read it: ${errorMessage(err)}`);
  }
}

/** A zip symbolic link's target: its contents. */
async function readLinkTarget(data: Readable, name: string): Promise<string> {
  const chunks: Buffer[] = [];
  let n = 0;
  try {
    for await (const chunk of data as AsyncIterable<Buffer>) {
      n += chunk.length;
      if (n > MAX_LINK_TARGET_BYTES) throw refuse(name, "corrupt", "a symbolic link whose target is too long");
      chunks.push(chunk);
    }
  } catch (err) {
    if (err instanceof HarvestError) throw err;
    throw refuse(name, "corrupt", `cannot read it: ${errorMessage(err)}`);
  } finally {
    data.destroy();
  }
  return Buffer.concat(chunks).toString("utf8");
}
