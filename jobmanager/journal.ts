/**
 * Where a job manager keeps its recovery journal (one JSON line per launched and ended task attempt), so that a later
 * attempt, on any server, recovers from it: in the job's DFS staging directory, or in a local file under the resource
 * manager's staging directory when the job was not staged in the DFS (one machine, or a shared mount).
 *
 * The DFS has no append or flush (a file's bytes are readable once its block is committed), so the DFS journal is a
 * sequence of immutable segment files, each written whole and closed before the lines in it count as written: a
 * segment is either complete or, when its writer died first, incomplete and skipped, never torn. Lines appended while
 * a segment is being written are batched into the next one (group commit), so a burst of launches costs one segment.
 * Segments are named `<attempt>-<seq>.jsonl`, zero-padded, so that listing order is writing order.
 */
import { appendFile, readFile } from "node:fs/promises";
import type { DfsClient } from "../client/dfs-client.js";
import { isHarvestError } from "../common/errors.js";

/** A job manager's recovery journal. */
export interface JournalStore {
  /** Appends `text` (whole lines); resolves once it is durable, after every earlier append. */
  append(text: string): Promise<void>;
  /** What every attempt has written so far, in order ("" when nothing). */
  readAll(): Promise<string>;
  /** Resolves once every append made so far is written (or has failed). */
  flushed(): Promise<void>;
}

/** The journal as one local file (appends are queued so they land in order). */
export class LocalJournal implements JournalStore {
  private chain: Promise<void> = Promise.resolve();

  constructor(private readonly file: string) {}

  append(text: string): Promise<void> {
    const write = this.chain.then(() => appendFile(this.file, text));
    this.chain = write.catch(() => undefined);
    return write;
  }

  async readAll(): Promise<string> {
    try {
      return await readFile(this.file, "utf8");
    } catch {
      return "";
    }
  }

  flushed(): Promise<void> {
    return this.chain;
  }
}

/** The journal as segment files in `<dir>/journal/` of the DFS. */
export class DfsJournal implements JournalStore {
  private pending = "";
  private waiters: { resolve: () => void; reject: (err: unknown) => void }[] = [];
  private writing: Promise<void> | undefined;
  private seq = 0;
  private madeDir = false;

  constructor(
    private readonly dfs: DfsClient,
    /** The job's staging directory (a DFS path, without `dfs:`). */
    private readonly dir: string,
    private readonly attempt: number,
  ) {}

  private get journalDir(): string {
    return `${this.dir}/journal`;
  }

  append(text: string): Promise<void> {
    return new Promise((resolve, reject) => {
      this.pending += text;
      this.waiters.push({ resolve, reject });
      this.kick();
    });
  }

  async flushed(): Promise<void> {
    while (this.writing) await this.writing;
  }

  async readAll(): Promise<string> {
    let names: { name: string; complete: boolean }[];
    try {
      names = (await this.dfs.list(this.journalDir)).map((s) => ({
        name: s.path.slice(s.path.lastIndexOf("/") + 1),
        complete: s.complete,
      }));
    } catch (err) {
      if (isHarvestError(err, "NAMENODE_FILE_NOT_FOUND")) return "";
      throw err;
    }
    let text = "";
    for (const { name, complete } of names.sort((a, b) => (a.name < b.name ? -1 : 1))) {
      // A segment its writer did not close never counted as written.
      if (!complete || !name.endsWith(".jsonl")) continue;
      const chunks: Buffer[] = [];
      for await (const chunk of this.dfs.createReadStream(`${this.journalDir}/${name}`)) chunks.push(chunk as Buffer);
      text += Buffer.concat(chunks).toString("utf8");
    }
    return text;
  }

  /** Writes what is pending as the next segment, unless one is being written (then it follows). */
  private kick(): void {
    if (this.writing || this.pending === "") return;
    const text = this.pending;
    const waiters = this.waiters;
    this.pending = "";
    this.waiters = [];
    this.writing = this.writeSegment(text)
      .then(
        () => waiters.forEach((w) => w.resolve()),
        (err: unknown) => waiters.forEach((w) => w.reject(err)),
      )
      .finally(() => {
        this.writing = undefined;
        this.kick();
      });
  }

  private async writeSegment(text: string): Promise<void> {
    if (!this.madeDir) {
      await this.dfs.mkdir(this.journalDir);
      this.madeDir = true;
    }
    const name = `${String(this.attempt).padStart(4, "0")}-${String(this.seq++).padStart(8, "0")}.jsonl`;
    await new Promise<void>((resolve, reject) => {
      const out = this.dfs.createWriteStream(`${this.journalDir}/${name}`, { overwrite: true });
      out.on("finish", resolve);
      out.on("error", reject);
      out.end(text);
    });
  }
}
