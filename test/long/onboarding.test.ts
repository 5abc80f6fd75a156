/**
 * Onboarding a person on a secure cluster, through the CLI as an operator and the person do it: the operator issues
 * alice's certificate (which writes her client bundle) and makes her home; alice, with nothing but that directory in
 * her ~/.harvest, lists her home, puts a file by a relative path and runs a job, which says what account its
 * containers run as; bob, another user, cannot read her home. In test/long: a cluster and a job take a minute; the
 * default suite checks the same commands without a cluster (test/e2e/onboarding-cli.test.ts).
 */
import { cpSync, mkdirSync, readFileSync, statSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { runHarvest } from "../processes.js";
import type { CliRun } from "../processes.js";
import { cpuVertex, suiteCluster } from "../integration/harness.js";

/** The environment of a person whose only Harvest configuration is what is in `home` (no cluster directory). */
function personEnv(home: string): NodeJS.ProcessEnv {
  return { HOME: home, HARVEST_CONF: "", HARVEST_CLUSTER_DIR: "" };
}

describe("onboarding a user on a secure cluster", () => {
  const cluster = suiteCluster({ idleServers: 1 });
  const operatorHome = (): string => join(cluster().work, "operator");
  /** The operator: the admin certificate of the local cluster, found through its directory. */
  const operator = (...args: string[]): CliRun =>
    runHarvest([...args, "--dir", cluster().dir], { env: personEnv(operatorHome()) });
  const issue = (name: string, ...extra: string[]): CliRun =>
    runHarvest(
      ["security", "issue", "--dir", join(cluster().dir, "security"), "--role", "user", "--name", name, ...extra],
      {
        env: personEnv(operatorHome()),
      },
    );
  const bundleOf = (name: string): string => join(cluster().dir, "security", "users", name);
  /** A person whose home holds a copy of their bundle in ~/.harvest, and nothing else. */
  const person =
    (name: string): ((...args: string[]) => CliRun) =>
    (...args) =>
      runHarvest(args, { env: personEnv(join(cluster().work, `home-${name}`)) });
  const alice = person("alice");
  const bob = person("bob");

  it("issues a person's certificate with a client configuration naming the cluster, in one directory to hand over", () => {
    mkdirSync(operatorHome(), { recursive: true });
    const r = issue("alice");
    expect(r.code, r.stderr).toBe(0);
    const bundle = bundleOf("alice");
    expect(r.stdout).toContain(join(bundle, "client.json"));
    expect(r.stdout).toContain("harvest admin user add alice");
    const config = JSON.parse(readFileSync(join(bundle, "client.json"), "utf8")) as Record<string, string>;
    expect(config).toEqual({
      rmAddress: cluster().desc.rm.address,
      nnAddress: cluster().desc.nn!.address,
      ca: "ca.pem",
      cert: "alice.pem",
      key: "alice-key.pem",
    });
    expect(statSync(join(bundle, "alice-key.pem")).mode & 0o777).toBe(0o600);
    expect(statSync(bundle).mode & 0o777).toBe(0o700);
    expect(readFileSync(join(bundle, "ca.pem"), "utf8")).toBe(
      readFileSync(join(cluster().dir, "security", "ca.pem"), "utf8"),
    );
    expect(issue("bob").code).toBe(0);
    // Each gets a copy of their own directory, and nothing else.
    for (const name of ["alice", "bob"]) {
      const dest = join(cluster().work, `home-${name}`, ".harvest");
      mkdirSync(dest, { recursive: true, mode: 0o700 });
      cpSync(bundleOf(name), dest, { recursive: true });
    }
    // An address that is not host:port fails before anything is written.
    const bad = issue("carol", "--rm-address", "not an address");
    expect(bad.code).toBe(1);
    expect(bad.stderr).toContain("CONFIG_INVALID");
    expect(() => statSync(bundleOf("carol"))).toThrow();
  });

  it("makes a home owned by its user and closed to others, once; refuses names that are not account names", () => {
    const add = operator("admin", "user", "add", "alice", "--json");
    expect(add.code, add.stderr).toBe(0);
    expect(JSON.parse(add.stdout)).toMatchObject({ path: "/user/alice", owner: "alice", group: "alice", mode: 0o700 });
    const again = operator("admin", "user", "add", "alice");
    expect(again.code, again.stderr).toBe(0);
    expect(again.stdout).toContain("exists already");
    for (const bad of ["../etc", "alice/x", "9lives", "alice smith", "nobody"]) {
      const r = operator("admin", "user", "add", bad);
      expect(r.code, bad).toBe(1);
      expect(r.stderr, bad).toContain("INVALID_ARGUMENT");
    }
    // A user may not hand out homes, and leaves none behind trying.
    const byBob = bob("admin", "user", "add", "carol");
    expect(byBob.code).toBe(1);
    expect(byBob.stderr).toContain("DFS_PERMISSION_DENIED");
    expect(operator("fs", "stat", "/user/carol").stderr).toContain("NAMENODE_FILE_NOT_FOUND");
  });

  it("lets alice, with only her directory, use her home by relative paths, which bob cannot read", () => {
    const local = join(cluster().work, "notes.txt");
    writeFileSync(local, "alice's notes\n");
    const put = alice("fs", "put", local, "notes.txt", "--json");
    expect(put.code, put.stderr).toBe(0);
    expect(JSON.parse(put.stdout)).toMatchObject({ path: "/user/alice/notes.txt", owner: "alice" });
    const ls = alice("fs", "ls", "--json");
    expect(ls.code, ls.stderr).toBe(0);
    expect((JSON.parse(ls.stdout) as { path: string }[]).map((e) => e.path)).toEqual(["/user/alice/notes.txt"]);
    expect(alice("fs", "cat", "notes.txt").stdout).toBe("alice's notes\n");
    const out = alice("fs", "cat", "../bob/notes.txt");
    expect(out.code).toBe(1);
    expect(out.stderr).toContain("DFS_BAD_PATH");
    for (const args of [
      ["fs", "cat", "/user/alice/notes.txt"],
      ["fs", "ls", "/user/alice"],
    ]) {
      const r = bob(...args);
      expect(r.code, args.join(" ")).toBe(1);
      expect(r.stderr, args.join(" ")).toContain("DFS_PERMISSION_DENIED");
    }
  });

  it("runs alice's job from her directory alone and says which account its containers run as", () => {
    const dag = join(cluster().work, "dag.json");
    writeFileSync(dag, JSON.stringify({ name: "onboarded", vertices: [cpuVertex("hello", 1)], edges: [] }));
    const submit = alice("job", "submit", dag, "--wait");
    expect(submit.code, submit.stderr + submit.stdout).toBe(0);
    const lines = submit.stdout.split("\n");
    expect(lines[0]).toMatch(/^submitted application_\d+_\d+$/);
    // The node manager's own description, whatever its account policy: never left unknown by a current node.
    expect(lines[1]).toMatch(/^containers run as: \S/);
    expect(lines[1]).not.toContain("unknown");
  });
});
