/**
 * Harvest's task runtime: the part of Harvest's installation that containers run (the job manager, the task contract
 * and `harvest/task`-style helpers, the DFS client, the example tasks) with the packages they load, and nothing a
 * container has no business reading (the daemons, the CLI, the simulator, the web UI's assets). The node manager
 * localizes it as a public resource (file-cache.ts), so that a container never reads the installation in place: an
 * installation in a root user's mode-700 home is out of every container account's reach.
 */
import { lstat, readdir, readFile } from "node:fs/promises";
import { join, relative } from "node:path";

/** One file of the runtime, as the cache keys it: its path below the installation, size and modification time. */
export interface RuntimeFile {
  /** Relative to the installation's root, with "/" separators. */
  path: string;
  size: number;
  mtimeMs: number;
  /** Whether any execute bit is set (the cached copy is 0755, else 0644). */
  executable: boolean;
}

/** What the runtime holds below the installation's root: files, and directories taken whole. */
const RUNTIME_PATHS = [
  "package.json",
  "dist/package.json",
  "dist/common",
  "dist/client",
  "dist/task",
  "dist/jobmanager",
  "dist/examples/tasks",
  "proto",
  "examples/data",
  "native/build/Release",
];

/** The packages containers load (the job manager's and the DFS client's gRPC, logging, checksums), with their own. */
export const RUNTIME_PACKAGES = ["@grpc/grpc-js", "@grpc/proto-loader", "pino", "@node-rs/crc32"];

/** Files a runtime never carries: TypeScript sources and declarations, source maps (no container reads them). */
const SKIPPED = /\.(ts|mts|cts|map|tsbuildinfo)$/;

/**
 * The runtime's files below `root` (an installation), sorted by path. Paths that do not exist are skipped (a build
 * without native routines has no `native/build`); symbolic links are not followed (npm's `.bin` links are tools).
 */
export async function runtimeFiles(root: string): Promise<RuntimeFile[]> {
  const files: RuntimeFile[] = [];
  const tops = [...RUNTIME_PATHS, ...(await packageDirs(root, RUNTIME_PACKAGES))];
  for (const top of tops) await collect(root, join(root, top), files);
  files.sort((a, b) => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0));
  return files;
}

async function collect(root: string, path: string, out: RuntimeFile[]): Promise<void> {
  let st;
  try {
    st = await lstat(path);
  } catch {
    return;
  }
  if (st.isDirectory()) {
    for (const name of await readdir(path)) {
      if (name === "node_modules" || name === ".bin") continue; // a package's own node_modules come by resolution
      await collect(root, join(path, name), out);
    }
  } else if (st.isFile() && !SKIPPED.test(path)) {
    const rel = relative(root, path).split("\\").join("/");
    out.push({ path: rel, size: st.size, mtimeMs: Math.trunc(st.mtimeMs), executable: (st.mode & 0o111) !== 0 });
  }
}

/**
 * The directories (relative to `root`) of `names` and everything they depend on, resolved as Node resolves a bare
 * import: from a package's own `node_modules` up to the root's. A dependency found nowhere is skipped when optional
 * (a platform build for another machine) and an Error otherwise, naming the package that wants it.
 */
export async function packageDirs(root: string, names: readonly string[]): Promise<string[]> {
  const found = new Set<string>();
  const visit = async (name: string, from: string, optional: boolean, wanter: string): Promise<void> => {
    const dir = await resolvePackage(root, from, name);
    if (dir === undefined) {
      if (optional) return;
      throw new Error(`the task runtime needs the package ${name} (for ${wanter}), which is not installed: run npm ci`);
    }
    if (found.has(dir)) return;
    found.add(dir);
    const manifest = JSON.parse(await readFile(join(root, dir, "package.json"), "utf8")) as {
      dependencies?: Record<string, string>;
      optionalDependencies?: Record<string, string>;
    };
    const optionals = manifest.optionalDependencies ?? {};
    for (const dep of Object.keys({ ...manifest.dependencies, ...optionals }))
      await visit(dep, dir, dep in optionals, name);
  };
  for (const name of names) await visit(name, "", false, "Harvest");
  return [...found].sort();
}

/** Where `name` resolves from the package at `from` (relative to `root`; "" the root): its directory, or undefined. */
async function resolvePackage(root: string, from: string, name: string): Promise<string | undefined> {
  for (let at = from; ; at = parentPackageDir(at)) {
    const dir = at === "" ? join("node_modules", name) : join(at, "node_modules", name);
    try {
      if ((await lstat(join(root, dir, "package.json"))).isFile()) return dir;
    } catch {
      // Not here: one level up.
    }
    if (at === "") return undefined;
  }
}

/** The directory whose `node_modules` holds the package at `dir` ("" when it is the root's). */
function parentPackageDir(dir: string): string {
  const i = dir.lastIndexOf("/node_modules/");
  return i < 0 ? "" : dir.slice(0, i);
}
