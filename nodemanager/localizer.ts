/**
 * Localization (YARN's ResourceLocalizationService): before a container starts, the DFS files, directories and
 * archives it declares are fetched into the node's file cache with the job's file-system token (so only what its
 * submitter may read), archives unpacked there, and linked into the container's directory under their names. A
 * resource that cannot be fetched or unpacked fails the launch with LOCALIZATION_FAILED naming it and why (for an
 * archive refused, the entry).
 */
import { join } from "node:path";
import { DfsClient } from "../client/dfs-client.js";
import { detailsOf, errorMessage, HarvestError } from "../common/errors.js";
import type { ClientSecurity } from "../common/grpc.js";
import type { CacheScope, FileCache, Localized, SourceFile } from "./file-cache.js";
import type { LocalResourceOutput } from "../proto/generated/harvest/v1/LocalResource.js";

/** Who a container's resources are fetched for. */
export interface LocalizationRequest {
  containerId: string;
  appId: string;
  /** The job's submitter: the user a plaintext cluster's namenode is told. */
  user: string;
  /** The job's file-system token (a secure cluster); "" on a plaintext one. */
  dfsToken: string;
  /** The account the container runs as, owner of the job's private copies; undefined: the node manager's own. */
  owner?: { uid: number; gid: number };
  resources: LocalResourceOutput[];
}

/** What localization did for one container: each resource's cached copy by name, and the fetch counts. */
export interface LocalizationResult {
  links: Record<string, string>;
  fetched: number;
  cached: number;
  bytes: number;
}

/** Where the namenode is and how to reach it without a certificate (the CA only: the job's token authenticates). */
export interface LocalizerOptions {
  nnAddress: string;
  ca?: string;
}

/** Fetches containers' declared resources through the node's file cache. */
export class Localizer {
  constructor(
    private readonly cache: FileCache,
    private readonly options: LocalizerOptions,
  ) {}

  async localize(req: LocalizationRequest): Promise<LocalizationResult> {
    const result: LocalizationResult = { links: {}, fetched: 0, cached: 0, bytes: 0 };
    if (req.resources.length === 0) return result;
    if (!this.options.nnAddress)
      throw new HarvestError(
        "LOCALIZATION_FAILED",
        `${req.containerId} declares resources but this node manager knows no namenode (nnAddress)`,
      );
    const security: ClientSecurity | undefined = this.options.ca ? { ca: this.options.ca } : undefined;
    const dfs = new DfsClient(this.options.nnAddress, {
      ...(security ? { security } : {}),
      dfsToken: req.dfsToken,
      user: req.user,
    });
    try {
      for (const r of req.resources) {
        let got: Localized;
        try {
          got = await this.cache.localizeSource(await sourceOf(dfs, r), scopeOf(req, r));
        } catch (err) {
          const cause = err instanceof HarvestError ? err.code : "";
          const refused = detailsOf(err, "ARCHIVE_REFUSED");
          throw new HarvestError(
            "LOCALIZATION_FAILED",
            `cannot localize ${r.name} (${r.path}) for ${req.containerId}: ${errorMessage(err)}`,
            {
              details: {
                resource: r.name,
                path: r.path,
                ...(cause ? { cause } : {}),
                ...(refused
                  ? { reason: refused.reason, ...(refused.entry !== undefined ? { entry: refused.entry } : {}) }
                  : {}),
              },
              cause: err,
            },
          );
        }
        result.links[r.name] = got.path;
        if (got.fetched) result.fetched++;
        else result.cached++;
        result.bytes += got.copiedBytes;
      }
    } finally {
      dfs.close();
    }
    return result;
  }
}

function scopeOf(req: LocalizationRequest, r: LocalResourceOutput): CacheScope {
  if (r.visibility === "public") return { visibility: "public" };
  return { visibility: "application", appId: req.appId, ...(req.owner ? { owner: req.owner } : {}) };
}

/** The resource's files as the namenode lists them (as the job's submitter), and how to fetch each. */
async function sourceOf(dfs: DfsClient, r: LocalResourceOutput): Promise<Parameters<FileCache["localizeSource"]>[0]> {
  if (!r.path.startsWith("dfs:/")) throw new HarvestError("INVALID_ARGUMENT", `${r.path} is not a dfs: path`);
  const root = r.path.slice("dfs:".length);
  const top = await dfs.stat(root);
  const isPublic = r.visibility === "public";
  const files: SourceFile[] = [];
  const check = (path: string, st: { complete: boolean; mode: number; isDir: boolean }): void => {
    if (!st.isDir && !st.complete) throw new HarvestError("NAMENODE_FILE_INCOMPLETE", `${path} is still being written`);
    if (isPublic && (st.mode & (st.isDir ? 0o005 : 0o004)) !== (st.isDir ? 0o005 : 0o004))
      throw new HarvestError(
        "PERMISSION_DENIED",
        `${path} is not readable by everyone (mode ${st.mode.toString(8)}), so it cannot be a public resource`,
      );
  };
  check(root, top);
  const archive = r.type === "archive";
  if (archive && top.isDir)
    throw new HarvestError(
      "INVALID_ARGUMENT",
      `${root} is a directory: an archive resource must be a .tar, .tgz or .zip file`,
    );
  if (!top.isDir) {
    files.push({ path: "", size: Number(top.length), mtimeMs: Number(top.mtimeMs) });
  } else {
    const walk = async (dir: string, rel: string): Promise<void> => {
      for (const st of await dfs.list(dir)) {
        const name = st.path.slice(st.path.lastIndexOf("/") + 1);
        const childRel = rel ? `${rel}/${name}` : name;
        check(st.path, st);
        if (st.isDir) await walk(st.path, childRel);
        else files.push({ path: childRel, size: Number(st.length), mtimeMs: Number(st.mtimeMs) });
      }
    };
    await walk(root, "");
  }
  files.sort((a, b) => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0));
  return {
    source: r.path,
    isDirectory: top.isDir,
    ...(archive ? { archive } : {}),
    files,
    fetch: async (path, to) => {
      await dfs.get(path === "" ? root : join(root, path), to);
    },
  };
}
