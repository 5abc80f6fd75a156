/**
 * Reading and writing Harvest's file system from a task: arguments written `dfs:/path` name files there. The client
 * library (and gRPC with it) is loaded only when a task uses such a path, so plain tasks start as fast as before.
 * The namenode's address comes from HARVEST_NN_ADDRESS, which the node manager sets in every container; on a secure
 * cluster the task trusts HARVEST_CA and acts as the job's submitter with the token in HARVEST_TOKEN_FILE; on a
 * plaintext one it claims the submitter the node manager names in HARVEST_DFS_USER.
 *
 * A task's output files are committed as Hadoop's FileOutputCommitter commits a task's: an attempt writes
 * `<dir>/_temporary/<attempt>/<name>` (its container's id names the attempt) and renames it to `<dir>/<name>` only
 * once the file is complete, replacing an older complete file of that name. So a re-run never meets the file an
 * earlier attempt of the same task left open (a dead writer keeps its lease until the namenode recovers the file), and
 * a reader of `<dir>` sees whole files or none (`_temporary`, like every name starting with `_`, is not data:
 * NOT_DATA_PREFIXES).
 */
import { randomUUID } from "node:crypto";
import { Writable } from "node:stream";
import { finished } from "node:stream/promises";
import type { DfsClient } from "../client/dfs-client.js";
import { TaskError } from "./context.js";

/** The directory under an output directory where attempts write their files until they commit them. */
export const DFS_TEMPORARY_DIR = "_temporary";

/** The prefix that marks a path in Harvest's file system. */
export const DFS_PREFIX = "dfs:";

/** True for `dfs:/...` arguments. */
export function isDfsPath(arg: string): boolean {
  return arg.startsWith(DFS_PREFIX);
}

/** An attempt's name: a container id (`container_<cluster>_<app>_<attempt>_<n>`) or the fallback below. */
const ATTEMPT_NAME = /^[A-Za-z0-9_.-]{1,200}$/;

/** A commit's rename that finds the name taken again (another attempt committed meanwhile) tries this often. */
const COMMIT_TRIES = 4;

/** Options of `writeDfsOutput`. */
export interface DfsOutputOptions {
  /** Replicas of the file. @default the namenode's default */
  replication?: number;
  /** @default the namenode's default */
  blockSizeBytes?: number;
  /**
   * An open client to write with (the caller closes it, after the stream has finished or failed); without it the
   * stream loads one (`dfsClient()`) and closes it when it ends.
   */
  client?: DfsClient;
  /** Where HARVEST_CONTAINER_ID (the attempt) and, without `client`, the namenode's address are read. @default process.env */
  env?: NodeJS.ProcessEnv;
}

/**
 * A client of the cluster's file system acting as the job's submitter (with the job's DFS token): the caller closes
 * it. The client library (and gRPC with it) is loaded on the first call.
 */
export async function dfsClient(env: NodeJS.ProcessEnv = process.env): Promise<DfsClient> {
  if (!env["HARVEST_NN_ADDRESS"])
    throw new TaskError("a dfs: path needs HARVEST_NN_ADDRESS (the cluster runs no namenode?)");
  const lib = await import("../client/dfs-client.js");
  return lib.DfsClient.fromTaskEnv(env);
}

/** This process's attempt name when it runs outside a container (a test, a program run by hand). */
let fallbackAttempt: string | undefined;

/** The attempt a task's temporary files are named by: its container's id. */
function attemptName(env: NodeJS.ProcessEnv): string {
  const id = env["HARVEST_CONTAINER_ID"] || (fallbackAttempt ??= `attempt_${process.pid}_${randomUUID().slice(0, 8)}`);
  if (!ATTEMPT_NAME.test(id)) throw new TaskError(`HARVEST_CONTAINER_ID is not a container id: ${JSON.stringify(id)}`);
  return id;
}

/** The HarvestError code of a client error, if it has one (read from the error, never from its message). */
function codeOf(err: unknown): string | undefined {
  const code = (err as { code?: unknown } | null)?.code;
  return typeof code === "string" ? code : undefined;
}

/**
 * A stream writing `dfs:/dir/name` as an output of this task attempt: the bytes go to the attempt's temporary file,
 * which is renamed to `/dir/name` when the stream finishes (replacing a complete file of that name an earlier attempt
 * or run left); a stream destroyed with an error leaves no file under that name and deletes its temporary file. A
 * write's callback runs once the file-system stream has taken the chunk (client/write-stream.ts).
 */
export function writeDfsOutput(arg: string, opts: DfsOutputOptions = {}): Writable {
  if (!arg.startsWith(DFS_PREFIX)) throw new TaskError(`not a dfs: path: ${JSON.stringify(arg)}`);
  const path = arg.slice(DFS_PREFIX.length).replace(/\/+$/, "");
  const slash = path.lastIndexOf("/");
  const name = path.slice(slash + 1);
  if (!path.startsWith("/") || name === "" || name === "." || name === "..")
    throw new TaskError(`cannot write ${arg}: an output is a file at an absolute path, like dfs:/dir/name`);
  if (name === DFS_TEMPORARY_DIR)
    throw new TaskError(`cannot write ${arg}: ${DFS_TEMPORARY_DIR} holds attempts' files`);
  return new DfsOutputStream(path.slice(0, slash) || "/", name, attemptName(opts.env ?? process.env), opts);
}

/** See `writeDfsOutput`. */
class DfsOutputStream extends Writable {
  private readonly final: string;
  private readonly tmpRoot: string;
  private readonly tmpDir: string;
  private readonly tmp: string;
  /** The client writing; owned (closed at the end) when the caller gave none. */
  private dfs: DfsClient | undefined;
  /** The temporary file's stream, once the namenode has created the file. */
  private inner: Writable | undefined;
  /** True once the file is under its final name (nothing to delete on destroy). */
  private committed = false;

  constructor(
    dir: string,
    private readonly name: string,
    attempt: string,
    private readonly opts: DfsOutputOptions,
  ) {
    super({ highWaterMark: 1 << 20 });
    const under = dir === "/" ? "" : dir;
    this.final = `${under}/${name}`;
    this.tmpRoot = `${under}/${DFS_TEMPORARY_DIR}`;
    this.tmpDir = `${this.tmpRoot}/${attempt}`;
    this.tmp = `${this.tmpDir}/${name}`;
  }

  override _construct(callback: (err?: Error | null) => void): void {
    this.open().then(
      () => callback(),
      (err: unknown) => callback(this.failure(err)),
    );
  }

  override _write(chunk: Buffer, _enc: BufferEncoding, callback: (err?: Error | null) => void): void {
    this.inner!.write(chunk, (err) => callback(err ? this.failure(err) : null));
  }

  override _final(callback: (err?: Error | null) => void): void {
    this.finish().then(
      () => callback(),
      (err: unknown) => callback(this.failure(err)),
    );
  }

  override _destroy(err: Error | null, callback: (err?: Error | null) => void): void {
    this.abort().then(
      () => callback(err),
      () => callback(err),
    );
  }

  private failure(err: unknown): TaskError {
    const inner = (this.inner as (Writable & { errored: Error | null }) | undefined)?.errored;
    const cause = inner ?? (err as Error);
    return cause instanceof TaskError ? cause : new TaskError(`cannot write dfs:${this.final}: ${cause.message}`, 1);
  }

  private async open(): Promise<void> {
    this.dfs = this.opts.client ?? (await dfsClient(this.opts.env));
    for (let i = 1; ; i++) {
      const inner = this.dfs.createWriteStream(this.tmp, {
        overwrite: true,
        ...(this.opts.replication ? { replication: this.opts.replication } : {}),
        ...(this.opts.blockSizeBytes ? { blockSizeBytes: this.opts.blockSizeBytes } : {}),
      });
      try {
        // An empty write's callback runs once the file is created (or its creation failed).
        await new Promise<void>((resolve, reject) => {
          inner.once("error", reject);
          inner.write(Buffer.alloc(0), (err) => (err ? reject(err) : resolve()));
        });
      } catch (err) {
        const cause = (inner as Writable & { errored: Error | null }).errored ?? err;
        inner.destroy();
        // Another task's commit removed the empty temporary directory between the stream's mkdirs and its create.
        if (codeOf(cause) === "NAMENODE_PARENT_NOT_FOUND" && i < COMMIT_TRIES) continue;
        throw cause;
      }
      inner.on("error", (err) => this.destroy(this.failure(err)));
      this.inner = inner;
      return;
    }
  }

  /** Completes the temporary file, renames it into place, and removes what this attempt and dead ones left. */
  private async finish(): Promise<void> {
    const dfs = this.dfs!;
    const inner = this.inner!;
    inner.end();
    await finished(inner);
    for (let i = 1; ; i++) {
      const existing = await dfs.stat(this.final).catch((err: unknown) => {
        if (codeOf(err) === "NAMENODE_FILE_NOT_FOUND") return undefined;
        throw err;
      });
      if (existing?.isDir) throw new TaskError(`cannot write dfs:${this.final}: it is a directory`);
      if (existing && !existing.complete)
        throw new TaskError(
          `cannot replace dfs:${this.final}: another client is writing it in place (not as a task output)`,
          1,
        );
      if (existing) await dfs.delete(this.final);
      try {
        await dfs.rename(this.tmp, this.final);
        break;
      } catch (err) {
        // Another attempt of this task committed between the delete and the rename: replace its file in turn.
        if (codeOf(err) !== "NAMENODE_FILE_EXISTS" || i >= COMMIT_TRIES) throw err;
      }
    }
    this.committed = true;
    await this.cleanUp(dfs);
  }

  /**
   * Deletes the copies of this file that earlier attempts left in their temporary directories (a writer that died
   * holds its lease until the namenode recovers the file; deleting the file ends it), then every temporary directory
   * left empty. Non-recursive deletes only: a directory that another task is writing into is never removed.
   */
  private async cleanUp(dfs: DfsClient): Promise<void> {
    const ignore = (): undefined => undefined;
    const attempts = await dfs.list(this.tmpRoot).catch(() => []);
    for (const a of attempts) {
      if (!a.isDir || a.path === this.tmpDir) continue;
      await dfs.delete(`${a.path}/${this.name}`).catch(ignore);
      await dfs.delete(a.path).catch(ignore);
    }
    await dfs.delete(this.tmpDir).catch(ignore);
    await dfs.delete(this.tmpRoot).catch(ignore);
  }

  /** After success: closes an owned client. After a failure: deletes the temporary file first. */
  private async abort(): Promise<void> {
    const dfs = this.dfs;
    try {
      if (!this.committed && dfs && this.inner) {
        this.inner.destroy();
        await dfs.delete(this.tmp).catch(() => undefined);
        await dfs.delete(this.tmpDir).catch(() => undefined);
        await dfs.delete(this.tmpRoot).catch(() => undefined);
      }
    } finally {
      if (dfs && !this.opts.client) dfs.close();
    }
  }
}

/** The whole content of `dfs:/path`. */
export async function readDfsFile(arg: string): Promise<Buffer> {
  const c = await dfsClient();
  try {
    const chunks: Buffer[] = [];
    for await (const chunk of c.createReadStream(arg.slice(DFS_PREFIX.length))) chunks.push(chunk as Buffer);
    return Buffer.concat(chunks);
  } catch (err) {
    throw new TaskError(`cannot read ${arg}: ${(err as Error).message}`);
  } finally {
    c.close();
  }
}

/**
 * Writes `data` to `dfs:/dir/name` as `writeDfsOutput` does: the file appears whole when this resolves, replacing the
 * one an earlier attempt or run left.
 */
export async function writeDfsFile(arg: string, data: Buffer | string, opts: DfsOutputOptions = {}): Promise<void> {
  const out = writeDfsOutput(arg, opts);
  out.end(data);
  await finished(out);
}
