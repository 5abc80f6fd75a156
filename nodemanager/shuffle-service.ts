/**
 * The node manager's shuffle service (MapReduce's ShuffleHandler, Tez's shuffle): a task writes its outputs into its
 * container's own `output` directory on this node's disk; once it has exited, the job's other tasks fetch them from
 * here over the network with the job's shuffle token, and the job manager checks they are still here with its AM
 * token. Nothing is served of a container that is still running, nor anything but the regular files its own account
 * wrote: the output directory and its files are opened without following links (through /proc/self/fd, since Node
 * has no openat), and a file the container's account does not own is refused, so a task can never have the node
 * manager, root, read another file for it.
 *
 * While the node's primary tenant is busy the service does not refuse (a refused fetch would re-run the producer
 * elsewhere, costing more of the same server); it paces what it sends to `busyBytesPerSec`.
 */
import { constants as fsConstants } from "node:fs";
import { open, readdir, rm } from "node:fs/promises";
import type { FileHandle } from "node:fs/promises";
import { join } from "node:path";
import { HarvestError } from "../common/errors.js";
import { isContainerId, parseAppId } from "../common/ids.js";

/** The name of a task's output directory in its container's directory. */
export const OUTPUT_DIR_NAME = "output";

/** Bytes per streamed message. */
export const SHUFFLE_CHUNK_BYTES = 1 << 20;

/** A servable output file's name: no path, not hidden (a temporary being renamed into place). */
const OUTPUT_NAME = /^[A-Za-z0-9_][A-Za-z0-9_.-]{0,254}$/;

/** What the service needs of its node manager. */
export interface ShuffleHost {
  /** Where containers' directories are: `<dataDir>/containers/<appId>/<containerId>`. */
  dataDir: string;
  /** Whether the container is running (or starting) here: its outputs are not final yet. */
  isLive(containerId: string): boolean;
  /** Whether the primary tenant is busy now: fetches are paced. */
  primaryBusy(): boolean;
  /** The pace while it is. */
  busyBytesPerSec: number;
}

/** One output file as listed. */
export interface OutputFileInfo {
  name: string;
  size: number;
}

/** Lists and opens containers' outputs, safely. */
export class ShuffleOutputs {
  constructor(private readonly host: ShuffleHost) {}

  /** The regular files of a finished container's output directory. */
  async list(appId: string, containerId: string): Promise<OutputFileInfo[]> {
    const dir = await this.openOutputDir(appId, containerId);
    try {
      const files: OutputFileInfo[] = [];
      for (const name of (await readdir(dir.path)).sort()) {
        if (!OUTPUT_NAME.test(name)) continue;
        let fh: FileHandle;
        try {
          fh = await this.openOwned(dir, name);
        } catch {
          continue; // not a regular file of the container's own
        }
        try {
          files.push({ name, size: (await fh.stat()).size });
        } finally {
          await fh.close();
        }
      }
      return files;
    } finally {
      await dir.handle.close();
    }
  }

  /** Opens one output file of a finished container; the caller closes it. */
  async openFile(appId: string, containerId: string, name: string): Promise<FileHandle> {
    if (!OUTPUT_NAME.test(name))
      throw new HarvestError("INVALID_ARGUMENT", `not an output file name: ${JSON.stringify(name)}`, {
        details: { field: "name" },
      });
    const dir = await this.openOutputDir(appId, containerId);
    try {
      return await this.openOwned(dir, name).catch((err: unknown) => {
        // Missing, or a link (O_NOFOLLOW: ELOOP), or not a file: not an output of the container's.
        if (["ENOENT", "ELOOP", "ENOTDIR", "EISDIR"].includes((err as NodeJS.ErrnoException).code ?? ""))
          throw new HarvestError("SHUFFLE_OUTPUT_NOT_FOUND", `${containerId} has no output ${name} on this node`);
        throw err;
      });
    } finally {
      await dir.handle.close();
    }
  }

  /**
   * Streams `name` from `offset` through `write` (which resolves when the receiver can take more), paced while the
   * primary tenant is busy; stops early when `signal` aborts.
   */
  async send(
    appId: string,
    containerId: string,
    name: string,
    offset: number,
    write: (chunk: Buffer) => Promise<void>,
    signal: AbortSignal,
  ): Promise<number> {
    const fh = await this.openFile(appId, containerId, name);
    let sent = 0;
    try {
      let position = Math.max(0, offset);
      for (;;) {
        if (signal.aborted) return sent;
        const buf = Buffer.allocUnsafe(SHUFFLE_CHUNK_BYTES);
        const { bytesRead } = await fh.read(buf, 0, buf.length, position);
        if (bytesRead === 0) return sent;
        position += bytesRead;
        sent += bytesRead;
        await write(buf.subarray(0, bytesRead));
        if (this.host.primaryBusy()) await sleep((bytesRead / this.host.busyBytesPerSec) * 1000);
      }
    } finally {
      await fh.close();
    }
  }

  /** The output directory of a finished container, opened without following links; its owner is the container's. */
  private async openOutputDir(
    appId: string,
    containerId: string,
  ): Promise<{ handle: FileHandle; path: string; uid: number }> {
    parseAppId(appId);
    if (!isContainerId(containerId))
      throw new HarvestError("INVALID_ARGUMENT", `bad container id ${JSON.stringify(containerId)}`, {
        details: { field: "containerId" },
      });
    if (this.host.isLive(containerId))
      throw new HarvestError("SHUFFLE_OUTPUT_NOT_READY", `${containerId} is still running: its outputs are not final`);
    const workDir = join(this.host.dataDir, "containers", appId, containerId);
    const flags = fsConstants.O_RDONLY | fsConstants.O_DIRECTORY | fsConstants.O_NOFOLLOW;
    let work: FileHandle;
    try {
      work = await open(workDir, flags);
    } catch {
      throw new HarvestError("SHUFFLE_OUTPUT_NOT_FOUND", `no container ${containerId} of ${appId} on this node`);
    }
    try {
      const uid = (await work.stat()).uid;
      let out: FileHandle;
      try {
        out = await open(`/proc/self/fd/${work.fd}/${OUTPUT_DIR_NAME}`, flags);
      } catch {
        throw new HarvestError("SHUFFLE_OUTPUT_NOT_FOUND", `${containerId} left no output directory on this node`);
      }
      if ((await out.stat()).uid !== uid) {
        await out.close();
        throw new HarvestError("SHUFFLE_OUTPUT_NOT_FOUND", `${containerId}'s output directory is not its own`);
      }
      return { handle: out, path: `/proc/self/fd/${out.fd}`, uid };
    } finally {
      await work.close();
    }
  }

  /** `name` in the opened directory: a regular file owned by the container's account, else an error. */
  private async openOwned(dir: { path: string; uid: number }, name: string): Promise<FileHandle> {
    const fh = await open(join(dir.path, name), fsConstants.O_RDONLY | fsConstants.O_NOFOLLOW | fsConstants.O_NONBLOCK);
    const st = await fh.stat();
    if (!st.isFile() || st.uid !== dir.uid) {
      await fh.close();
      throw new HarvestError("SHUFFLE_OUTPUT_NOT_FOUND", `${name} is not an output file of the container`);
    }
    return fh;
  }
}

/**
 * Removes the output directories of a finished application's containers below `dataDir` (their logs and records
 * stay); returns how many. Paths are built from a checked application id and the directory's own entries, and a
 * container's output directory is removed without following links.
 */
export async function removeApplicationData(dataDir: string, appId: string): Promise<number> {
  parseAppId(appId);
  const appDir = join(dataDir, "containers", appId);
  let removed = 0;
  let entries: string[];
  try {
    entries = await readdir(appDir);
  } catch {
    return 0;
  }
  for (const name of entries) {
    if (!isContainerId(name)) continue;
    const out = join(appDir, name, OUTPUT_DIR_NAME);
    try {
      await rm(out, { recursive: true, force: true });
      removed++;
    } catch {
      // Already gone.
    }
  }
  return removed;
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
