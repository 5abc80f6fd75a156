/**
 * What an operator types first: `harvest --version`, global `--config`/`--dir` before the subcommand, `fs ls -R`,
 * suggestions for a mistyped command, and a daemon started on another daemon's config.
 */
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { packageRoot } from "../../common/paths.js";
import { runHarvest } from "../processes.js";
import type { CliRun } from "../processes.js";
import { requireBuild } from "../integration/harness.js";
import { clusterCgroupKey } from "../../nodemanager/cgroups.js";

const root = mkdtempSync(join(tmpdir(), "harvest-cli-global-"));
/** No cluster anywhere the CLI would look by default. */
const nowhere = { HARVEST_CLUSTER_DIR: join(root, "no-cluster"), HARVEST_CONF: "", HOME: join(root, "home") };

function harvest(...args: string[]): CliRun {
  return runHarvest(args, { env: nowhere });
}

afterAll(() => rmSync(root, { recursive: true, force: true }));

describe("harvest without a cluster", () => {
  it("prints its version with --version, -V and 'version'", () => {
    requireBuild();
    const version = (JSON.parse(readFileSync(join(packageRoot(), "package.json"), "utf8")) as { version: string })
      .version;
    for (const args of [["--version"], ["-V"]]) {
      const r = harvest(...args);
      expect(r.code, r.stderr).toBe(0);
      expect(r.stdout.trim()).toBe(version);
    }
    const v = harvest("version", "--json");
    expect(v.code, v.stderr).toBe(0);
    expect(JSON.parse(v.stdout)).toEqual({ harvest: version, node: process.versions.node });
  });

  it("suggests the command a typo meant, nested ones by their full path", () => {
    const cases: [string[], string][] = [
      [["job", "lsit"], "(Did you mean list?)"],
      [["jbo", "list"], "(Did you mean 'harvest job'?)"],
      [["ls", "/"], "(Did you mean 'harvest fs ls'?)"],
      [["cluster", "stauts"], "(Did you mean status?)"],
      [["daemon", "start", "nodemanger", "--config", "x.json"], "did you mean nodemanager (nm)?"],
    ];
    for (const [args, hint] of cases) {
      const r = harvest(...args);
      expect(r.code, args.join(" ")).toBe(1);
      expect(r.stderr, args.join(" ")).toContain(hint);
    }
    const status = harvest("status");
    expect(status.stderr).toContain("'harvest cluster status'");
    expect(status.stderr).toContain("'harvest job status'");
  });

  it("takes --config and --dir before the subcommand, and refuses them where the subcommand means other files", () => {
    const config = harvest("--config", join(root, "missing-client.json"), "job", "list");
    expect(config.code).toBe(1);
    expect(config.stderr).toContain(`no such client config file: ${join(root, "missing-client.json")}`);
    const dir = harvest("--dir", join(root, "missing-cluster"), "cluster", "status");
    expect(dir.code).toBe(1);
    expect(dir.stderr).toContain(`no cluster in ${join(root, "missing-cluster")}`);
    // `cluster up --config` is daemon options, not a client configuration: the global one is refused, with the way.
    const up = harvest("--config", "daemons.json", "cluster", "up");
    expect(up.code).toBe(1);
    expect(up.stderr).toContain("harvest cluster up --config daemons.json");
    expect(up.stderr).toContain("[INVALID_ARGUMENT]");
    expect(existsSync(join(root, "no-cluster"))).toBe(false);
  });

  it("refuses another daemon's config by naming its kind, and writes nothing into that daemon's data directory", () => {
    const nnData = join(root, "nn-data");
    const nnConfig = join(root, "namenode.json");
    const example = JSON.parse(
      readFileSync(join(packageRoot(), "deploy", "conf", "master", "namenode.json"), "utf8"),
    ) as Record<string, unknown>;
    writeFileSync(nnConfig, JSON.stringify({ ...example, dataDir: nnData }));
    for (const args of [
      ["daemon", "start", "nodemanager", "--config", nnConfig],
      ["daemon", "status", "nm", "--config", nnConfig],
      ["daemon", "nodemanager", "--config", nnConfig],
    ]) {
      const r = harvest(...args);
      expect(r.code, args.join(" ")).not.toBe(0);
      expect(r.stdout + r.stderr, args.join(" ")).toContain(`${nnConfig} is a namenode's config`);
      expect(r.stdout + r.stderr).toContain(`harvest daemon start namenode --config ${nnConfig}`);
      expect(r.stdout + r.stderr).not.toContain("is the cluster running?");
    }
    expect(harvest("daemon", "start", "nodemanager", "--config", nnConfig).stderr).toContain("[CONFIG_INVALID]");
    expect(existsSync(nnData)).toBe(false);
    // A node manager's config without the server's name says so before anything starts.
    const noId = join(root, "nm-no-id.json");
    writeFileSync(noId, JSON.stringify({ rmAddress: "127.0.0.1:1", dataDir: join(root, "nm-data") }));
    const r = harvest("daemon", "start", "nodemanager", "--config", noId);
    expect(r.stderr).toContain('needs "nodeId"');
    expect(existsSync(join(root, "nm-data"))).toBe(false);
  });
});

describe("harvest --dir/--config before the subcommand on a running cluster", () => {
  // A directory of its own (`cluster up` opens it to the containers' accounts), not below the private `root`.
  const dir = mkdtempSync(join(tmpdir(), "harvest-cli-global-cluster-"));
  beforeAll(() => {
    requireBuild();
    const up = harvest("--dir", dir, "cluster", "up", "--servers", "1", "--primary", "trace", "--speed", "1", "--json");
    expect(up.code, up.stderr).toBe(0);
  }, 120_000);
  afterAll(() => {
    if (existsSync(join(dir, "cluster.json"))) harvest("cluster", "down", "--dir", dir);
    rmSync(dir, { recursive: true, force: true });
  });

  it("reaches the cluster with a global --dir, and a subcommand's own --dir wins over it", () => {
    const status = harvest("--dir", dir, "cluster", "status", "--json");
    expect(status.code, status.stderr).toBe(0);
    expect(status.stdout).toContain(dir);
    const own = harvest("--dir", join(root, "elsewhere"), "job", "list", "--dir", dir);
    expect(own.code, own.stderr).toBe(0);
    expect(own.stdout.trim()).toBe("no jobs");
  });

  it("keys its containers' cgroups by the cluster, in the node manager's and its datanode's configs alike", () => {
    const nm = JSON.parse(readFileSync(join(dir, "run", "server-1.json"), "utf8")) as Record<string, unknown>;
    const dn = JSON.parse(readFileSync(join(dir, "run", "server-1-dn.json"), "utf8")) as Record<string, unknown>;
    expect(nm["cgroupCluster"]).toBe(clusterCgroupKey(dir));
    expect(dn["secondaryCgroup"]).toBe(`harvest/${clusterCgroupKey(dir)}/server-1`);
  });

  it("lists a tree with fs ls -R, and skips a directory it may not read with exit code 1", () => {
    const at = (...args: string[]): CliRun => harvest("--dir", dir, ...args);
    for (const d of ["/tree/a/b", "/tree/c", "/tree/locked/inner"]) expect(at("fs", "mkdir", d).code).toBe(0);
    const file = join(root, "f.txt");
    writeFileSync(file, "hello\n");
    expect(at("fs", "put", file, "/tree/a/b/f.txt", "--replication", "1").code).toBe(0);
    expect(at("fs", "chmod", "777", "/tree").code).toBe(0);
    const ls = at("fs", "ls", "-R", "/tree", "--json");
    expect(ls.code, ls.stderr).toBe(0);
    expect((JSON.parse(ls.stdout) as { path: string }[]).map((e) => e.path)).toEqual([
      "/tree/a",
      "/tree/a/b",
      "/tree/a/b/f.txt",
      "/tree/c",
      "/tree/locked",
      "/tree/locked/inner",
    ]);
    const human = at("fs", "ls", "-R", "/tree");
    expect(human.stdout).toContain("/tree/a/b/f.txt");
    expect(at("fs", "ls", "/tree", "--json").stdout).not.toContain("/tree/a/b");

    // A user who may not list /tree/locked gets the rest, a message naming it, and exit code 1.
    expect(at("fs", "chmod", "700", "/tree/locked").code).toBe(0);
    // `security issue --dir` is the CA's directory, not a cluster's: it goes after the subcommand.
    const issued = harvest(
      ...["security", "issue", "--dir", join(dir, "security"), "--name", "bob", "--role", "user", "--cluster", dir],
    );
    expect(issued.code, issued.stderr).toBe(0);
    const bobConfig = join(dir, "security", "users", "bob", "client.json");
    expect(existsSync(bobConfig), issued.stdout).toBe(true);
    const bob = harvest("--config", bobConfig, "fs", "ls", "-R", "/tree", "--json");
    expect(bob.code).toBe(1);
    expect(bob.stderr).toContain("cannot list /tree/locked");
    const paths = (JSON.parse(bob.stdout) as { path: string }[]).map((e) => e.path);
    expect(paths).toContain("/tree/a/b/f.txt");
    expect(paths).toContain("/tree/locked");
    expect(paths).not.toContain("/tree/locked/inner");
  });

  it("shows the file system's space with fs df, its four numbers adding up, and each datanode's with --datanodes", () => {
    const at = (...args: string[]): CliRun => harvest("--dir", dir, ...args);
    const file = join(root, "space.bin");
    writeFileSync(file, Buffer.alloc(300_000, 7));
    expect(at("fs", "put", file, "/space.bin", "--replication", "1").code).toBe(0);
    const df = at("fs", "df", "--json");
    expect(df.code, df.stderr).toBe(0);
    const t = JSON.parse(df.stdout) as Record<string, string | number>;
    const n = (k: string): number => Number(t[k]);
    expect(n("liveDatanodes")).toBe(1);
    expect(n("fileSystems")).toBe(1);
    expect(n("dfsUsedBytes")).toBeGreaterThanOrEqual(300_000);
    expect(n("capacityBytes")).toBe(n("dfsUsedBytes") + n("nonDfsUsedBytes") + n("remainingBytes"));
    const human = at("fs", "df", "--datanodes");
    expect(human.code, human.stderr).toBe(0);
    expect(human.stdout).toMatch(/FILESYSTEM\s+SIZE\s+DFS USED\s+NON-DFS USED\s+AVAILABLE\s+DFS USE%/);
    expect(human.stdout).toContain("1 live datanode(s) on 1 file system(s)");
    expect(human.stdout).toMatch(/server-1\S*\s+LIVE\s+/);
  });
});
