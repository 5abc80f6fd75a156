/**
 * What a node manager's containers read from its disk rather than from Harvest's installation: the node's file cache
 * (localized resources), Harvest's task runtime localized into it, and the Node binary containers run (this process's
 * own, or a localized copy when containers' accounts cannot execute it: an nvm install in a mode-700 home).
 */
import { join } from "node:path";
import { errorMessage } from "../common/errors.js";
import type { Logger } from "../common/log.js";
import { packageRoot } from "../common/paths.js";
import { FileCache } from "./file-cache.js";
import { Localizer } from "./localizer.js";
import type { LocalizationResult } from "./localizer.js";
import type { StartContainerRequestOutput } from "../proto/generated/harvest/v1/StartContainerRequest.js";
import { assertCanExecute } from "./run-as.js";
import type { ContainerAccount } from "./run-as.js";

/** How old the last check of the task runtime may be before a launch checks it again (in the background). */
const RUNTIME_RECHECK_MS = 10_000;

/** The node's file cache, localizer, task runtime and Node binary for containers. */
export class NodeFiles {
  fileCache!: FileCache;
  localizer!: Localizer;
  /** The Node binary containers run: this process's own, or its localized copy. */
  nodeBinary = process.execPath;
  /** Where containers run Harvest's task runtime from (a version in the file cache), and when it was last checked. */
  private runtime = { dir: "", checkedMs: 0 };
  private runtimeRefresh: Promise<void> | undefined;

  constructor(
    private readonly options: {
      dataDir: string;
      archiveMaxMb: number;
      archiveMaxEntries: number;
      nnAddress: string;
      tls?: { ca: string } | undefined;
    },
    private readonly log: Logger,
  ) {}

  /** The localized task runtime (HARVEST_HOME). */
  get runtimeDir(): string {
    return this.runtime.dir;
  }

  /**
   * Opens the file cache and localizes the task runtime into it; with `probe` (an account standing for containers'
   * when they run as other accounts), localizes the Node binary too when that account cannot execute it.
   */
  async open(probe: ContainerAccount | undefined): Promise<void> {
    const o = this.options;
    this.fileCache = new FileCache(join(o.dataDir, "filecache"), {
      maxBytes: Math.floor(o.archiveMaxMb * 1024 * 1024),
      maxEntries: o.archiveMaxEntries,
    });
    await this.fileCache.open();
    this.localizer = new Localizer(this.fileCache, { nnAddress: o.nnAddress, ...(o.tls ? { ca: o.tls.ca } : {}) });
    await this.refreshRuntime();
    if (!probe) return;
    try {
      assertCanExecute(process.execPath, probe, "the Node binary");
    } catch (err) {
      const copy = await this.fileCache.localizeFile(process.execPath);
      this.nodeBinary = copy.path;
      this.log.info("containers run a localized copy of the Node binary", {
        source: process.execPath,
        copy: copy.path,
        reason: errorMessage(err),
      });
    }
  }

  /**
   * Fetches a container's declared resources into the file cache with the job's file-system token (the job's private
   * copies owned by `owner`, the container's account, when it is not the node manager's own); logs what it took.
   */
  async localize(
    req: StartContainerRequestOutput,
    containerId: string,
    user: string,
    owner: ContainerAccount | undefined,
  ): Promise<LocalizationResult> {
    const started = performance.now();
    const r = await this.localizer.localize({
      containerId,
      appId: req.appId,
      user,
      dfsToken: req.tokens["dfs-token"] ?? "",
      ...(owner ? { owner: { uid: owner.uid, gid: owner.gid } } : {}),
      resources: req.resources,
    });
    this.log.info("resources localized", {
      containerId,
      fetched: r.fetched,
      cached: r.cached,
      bytes: r.bytes,
      ms: Math.round(performance.now() - started),
    });
    return r;
  }

  /** At a launch: checks the runtime again in the background when the last check is older than RUNTIME_RECHECK_MS. */
  recheckRuntime(): void {
    if (this.runtimeRefresh || Date.now() - this.runtime.checkedMs < RUNTIME_RECHECK_MS) return;
    this.runtimeRefresh = this.refreshRuntime()
      .catch((err: unknown) => this.log.warn("could not localize the task runtime again", { error: errorMessage(err) }))
      .finally(() => (this.runtimeRefresh = undefined));
  }

  /** Localizes the task runtime again if the installation changed (a file's size or modification time). */
  private async refreshRuntime(): Promise<void> {
    const started = performance.now();
    const r = await this.fileCache.localizeRuntime(packageRoot());
    this.runtime = { dir: r.path, checkedMs: Date.now() };
    if (r.fetched)
      this.log.info("task runtime localized", {
        dir: r.path,
        copiedFiles: r.copiedFiles,
        copiedBytes: r.copiedBytes,
        ms: Math.round(performance.now() - started),
      });
  }
}
