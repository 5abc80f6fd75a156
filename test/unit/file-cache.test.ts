/**
 * The node's file cache: Harvest's task runtime localized once per version, keyed by each file's path, size and
 * modification time; a changed file makes a new version and only it is copied; every container account reads it.
 * Archive resources are unpacked into their entry, keyed by the archive like a file.
 */
import { spawnSync } from "node:child_process";
import { chmodSync, mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, utimesSync, writeFileSync } from "node:fs";
import { copyFileSync, readdirSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { gzipSync } from "node:zlib";
import { afterEach, describe, expect, it } from "vitest";
import { FileCache } from "../../nodemanager/file-cache.js";
import type { CacheSource } from "../../nodemanager/file-cache.js";
import { tarOf, zipOf } from "../archive-fixtures.js";
import { RUNTIME_PACKAGES, runtimeFiles } from "../../nodemanager/task-runtime.js";

const dirs: string[] = [];
function tempDir(): string {
  const d = mkdtempSync(join(tmpdir(), "harvest-filecache-"));
  dirs.push(d);
  return d;
}
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

function put(root: string, rel: string, text: string, mode = 0o644): void {
  mkdirSync(dirname(join(root, rel)), { recursive: true });
  writeFileSync(join(root, rel), text, { mode });
}

/** A small installation: the runtime's own files, the packages it needs (one with a dependency), and what it omits. */
function fakeInstallation(): string {
  const root = tempDir();
  put(root, "package.json", '{"name":"harvest"}');
  put(root, "dist/jobmanager/main.js", "console.log('jm')\n");
  put(root, "dist/common/task-contract.js", "export const x = 1;\n");
  put(root, "dist/common/task-contract.d.ts", "export declare const x: number;\n");
  put(root, "dist/examples/tasks/run.js", "#!/usr/bin/env node\n", 0o755);
  put(root, "dist/cli/harvest.js", "the CLI: not for containers\n");
  put(root, "proto/common.proto", 'syntax = "proto3";\n');
  for (const name of RUNTIME_PACKAGES) {
    const deps = name === "pino" ? { "sonic-boom": "1" } : {};
    put(root, `node_modules/${name}/package.json`, JSON.stringify({ name, dependencies: deps }));
    put(root, `node_modules/${name}/index.js`, `module.exports = ${JSON.stringify(name)};\n`);
  }
  put(root, "node_modules/sonic-boom/package.json", '{"name":"sonic-boom"}');
  put(root, "node_modules/sonic-boom/index.js", "module.exports = 1;\n");
  put(root, "node_modules/echarts/package.json", '{"name":"echarts"}');
  return root;
}

describe("the task runtime", () => {
  it("holds what containers run and the packages they load, with their dependencies, and nothing else", async () => {
    const paths = (await runtimeFiles(fakeInstallation())).map((f) => f.path);
    expect(paths).toContain("dist/jobmanager/main.js");
    expect(paths).toContain("dist/examples/tasks/run.js");
    expect(paths).toContain("proto/common.proto");
    expect(paths).toContain("node_modules/@grpc/grpc-js/index.js");
    expect(paths).toContain("node_modules/sonic-boom/index.js");
    expect(paths).not.toContain("dist/cli/harvest.js");
    expect(paths).not.toContain("dist/common/task-contract.d.ts");
    expect(paths.some((p) => p.startsWith("node_modules/echarts"))).toBe(false);
  });

  it("names a missing package and says how to install it", async () => {
    const root = fakeInstallation();
    rmSync(join(root, "node_modules", "sonic-boom"), { recursive: true });
    await expect(runtimeFiles(root)).rejects.toThrow(/needs the package sonic-boom \(for pino\).*npm ci/);
  });

  it("of this installation runs the job manager's and the tasks' entry points", async () => {
    const paths = new Set((await runtimeFiles(join(import.meta.dirname, "..", ".."))).map((f) => f.path));
    for (const p of ["dist/jobmanager/main.js", "dist/examples/tasks/cpu-work.js", "dist/client/index.js"])
      expect(paths.has(p), p).toBe(true);
  });
});

describe("the file cache", () => {
  it("localizes the runtime once, then finds it; a changed file makes a new version that copies only it", async () => {
    const install = fakeInstallation();
    const cache = new FileCache(join(tempDir(), "filecache"));
    await cache.open();
    const first = await cache.localizeRuntime(install);
    expect(first.fetched).toBe(true);
    expect(readFileSync(join(first.path, "dist/jobmanager/main.js"), "utf8")).toBe("console.log('jm')\n");
    expect(statSync(join(first.path, "dist/examples/tasks/run.js")).mode & 0o777).toBe(0o755);
    expect(statSync(join(first.path, "dist/jobmanager/main.js")).mode & 0o777).toBe(0o644);
    expect(statSync(join(first.path, "dist/jobmanager")).mode & 0o777).toBe(0o755);

    const again = await cache.localizeRuntime(install);
    expect(again).toEqual({ path: first.path, fetched: false, copiedFiles: 0, copiedBytes: 0 });

    put(install, "dist/jobmanager/main.js", "console.log('jm, version 2')\n");
    const second = await cache.localizeRuntime(install);
    expect(second.fetched).toBe(true);
    expect(second.path).not.toBe(first.path);
    expect(second.copiedFiles).toBe(1);
    expect(readFileSync(join(second.path, "dist/jobmanager/main.js"), "utf8")).toBe("console.log('jm, version 2')\n");
    // The old version stays whole for containers still running from it.
    expect(readFileSync(join(first.path, "dist/jobmanager/main.js"), "utf8")).toBe("console.log('jm')\n");
  });

  it("sees a file rewritten with the same size by its modification time", async () => {
    const install = fakeInstallation();
    const cache = new FileCache(join(tempDir(), "filecache"));
    await cache.open();
    const first = await cache.localizeRuntime(install);
    const file = join(install, "proto/common.proto");
    writeFileSync(file, 'syntax = "proto2";\n');
    utimesSync(file, new Date(), new Date(Date.now() + 5_000));
    const second = await cache.localizeRuntime(install);
    expect(second.path).not.toBe(first.path);
    expect(readFileSync(join(second.path, "proto/common.proto"), "utf8")).toBe('syntax = "proto2";\n');
  });

  it("shares one localization between concurrent callers and removes an interrupted one's temporary", async () => {
    const install = fakeInstallation();
    const root = join(tempDir(), "filecache");
    const cache = new FileCache(root);
    await cache.open();
    mkdirSync(join(root, "public", "runtime", ".tmp-interrupted"));
    await new FileCache(root).open();
    expect(() => statSync(join(root, "public", "runtime", ".tmp-interrupted"))).toThrow();
    const [a, b] = await Promise.all([cache.localizeRuntime(install), cache.localizeRuntime(install)]);
    expect(a).toBe(b);
  });

  it("copies a local file once per size and modification time, executable as its source", async () => {
    const src = join(tempDir(), "node");
    writeFileSync(src, "#!/bin/sh\necho localized\n", { mode: 0o755 });
    const cache = new FileCache(join(tempDir(), "filecache"));
    await cache.open();
    const first = await cache.localizeFile(src);
    expect(first.fetched).toBe(true);
    expect(spawnSync(first.path, { encoding: "utf8" }).stdout).toBe("localized\n");
    expect((await cache.localizeFile(src)).fetched).toBe(false);
    writeFileSync(src, "#!/bin/sh\necho changed\n");
    const changed = await cache.localizeFile(src);
    expect(changed.path).not.toBe(first.path);
    expect(spawnSync(changed.path, { encoding: "utf8" }).stdout).toBe("changed\n");
  });

  it("unpacks an archive resource once while it is unchanged, again when it changes, and keeps nothing of a refused one", async () => {
    const cache = new FileCache(join(tempDir(), "filecache"));
    await cache.open();
    const packed = join(tempDir(), "lib.tgz");
    const archive = (bytes: Buffer, mtimeMs: number): CacheSource => {
      writeFileSync(packed, bytes);
      return {
        source: "dfs:/apps/lib.tgz",
        isDirectory: false,
        archive: true,
        files: [{ path: "", size: bytes.length, mtimeMs }],
        fetch: (_path, to) => Promise.resolve(copyFileSync(packed, to)),
      };
    };
    const scope = { visibility: "public" } as const;
    const first = await cache.localizeSource(archive(gzipSync(tarOf([{ name: "v.txt", data: "1" }])), 1), scope);
    expect(first.fetched).toBe(true);
    expect(readFileSync(join(first.path, "v.txt"), "utf8")).toBe("1");
    expect(statSync(first.path).mode & 0o777).toBe(0o755);
    const hit = await cache.localizeSource(archive(gzipSync(tarOf([{ name: "v.txt", data: "1" }])), 1), scope);
    expect(hit).toMatchObject({ path: first.path, fetched: false });
    const changed = await cache.localizeSource(archive(zipOf([{ name: "v.txt", data: "2" }]), 2), scope);
    expect(changed.fetched).toBe(true);
    expect(changed.path).not.toBe(first.path);
    expect(readFileSync(join(changed.path, "v.txt"), "utf8")).toBe("2");

    const entries = readdirSync(join(cache.root, "public", "dfs")).sort();
    await expect(
      cache.localizeSource(archive(tarOf([{ name: "../../x", data: "no" }]), 3), scope),
    ).rejects.toMatchObject({ code: "ARCHIVE_REFUSED", details: { entry: "../../x", reason: "unsafe-path" } });
    expect(readdirSync(join(cache.root, "public", "dfs")).sort()).toEqual(entries);
  });

  it.runIf(process.getuid?.() === 0)(
    "is readable by an unprivileged account although the installation is in a mode-700 directory",
    async () => {
      const home = tempDir();
      const install = join(home, "harvest");
      const from = fakeInstallation();
      spawnSync("cp", ["-a", from, install]);
      const nodeDir = tempDir();
      chmodSync(nodeDir, 0o711); // as a node manager's data directory
      const cache = new FileCache(join(nodeDir, "filecache"));
      await cache.open();
      const { path } = await cache.localizeRuntime(install);
      const asNobody = (file: string) => spawnSync("cat", [file], { uid: 65534, gid: 65534, encoding: "utf8" }).status;
      expect(statSync(home).mode & 0o777).toBe(0o700);
      expect(asNobody(join(install, "dist/jobmanager/main.js"))).not.toBe(0);
      expect(asNobody(join(path, "dist/jobmanager/main.js"))).toBe(0);
    },
  );
});
