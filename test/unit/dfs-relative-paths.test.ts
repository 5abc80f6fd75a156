/**
 * Relative DFS paths resolve against the caller's home, `/user/<name>`, as HDFS's working directory does, with every
 * check of an absolute path: a `..` is still an error. The name is whom the namenode takes the client for: its
 * certificate's, its delegation token's owner, or the user it claims on a plaintext cluster.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { DfsClient } from "../../client/dfs-client.js";
import { DelegationTokens } from "../../common/delegation-token.js";
import { resolveDfsPath } from "../../common/dfs-path.js";
import { createCa, issueCertificate } from "../../localcluster/cluster-ca.js";
import { thrown } from "../error-code.js";

describe("resolveDfsPath", () => {
  it("puts a relative path below the home and leaves an absolute one as normalizeDfsPath does", () => {
    expect(resolveDfsPath("notes.txt", "/user/alice")).toBe("/user/alice/notes.txt");
    expect(resolveDfsPath("data/part-0/", "/user/alice")).toBe("/user/alice/data/part-0");
    expect(resolveDfsPath("/tmp/x/", "/user/alice")).toBe("/tmp/x");
  });

  it("refuses a relative path that would step out of the home, or any . component, quoting the path as given", () => {
    for (const bad of ["../bob/secret", "data/../../bob", ".", "./notes", "a//b", "a\0b"]) {
      const err = thrown(() => resolveDfsPath(bad, "/user/alice"));
      expect(err.code, bad).toBe("DFS_BAD_PATH");
      expect(err.message, bad).toContain(JSON.stringify(bad));
    }
    expect(thrown(() => resolveDfsPath("", "/user/alice")).message).toContain("empty");
  });
});

describe("DfsClient.resolvePath", () => {
  const dir = mkdtempSync(join(tmpdir(), "harvest-relative-"));
  const clients: DfsClient[] = [];
  const client = (options: ConstructorParameters<typeof DfsClient>[1]): DfsClient => {
    // Nothing is dialled: resolving a path is local.
    const c = new DfsClient("127.0.0.1:1", options);
    clients.push(c);
    return c;
  };
  const ca = join(dir, "ca", "ca.pem");
  beforeAll(() => createCa(join(dir, "ca")));
  afterAll(() => {
    for (const c of clients) c.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it("uses the name in the client's certificate, not the user it would claim", async () => {
    const files = await issueCertificate(join(dir, "ca"), join(dir, "alice"), { name: "alice", role: "user" });
    const c = client({ security: { ca, ...files }, user: "mallory" });
    expect(c.resolvePath("notes.txt")).toBe("/user/alice/notes.txt");
    expect(c.workingDirectory()).toBe("/user/alice");
  });

  it("uses a delegation token's owner (a task's client), and the claimed user on a plaintext cluster", () => {
    const { token } = new DelegationTokens(Buffer.alloc(32, 7), 60_000).issue("bob", Date.now());
    expect(client({ security: { ca }, dfsToken: token }).resolvePath("out/part-0")).toBe("/user/bob/out/part-0");
    expect(client({ user: "carol" }).resolvePath("x")).toBe("/user/carol/x");
    expect(client({ user: "carol" }).resolvePath("/abs")).toBe("/abs");
  });

  it("refuses a relative path when it cannot tell whose home it is", () => {
    const c = client({ security: { ca }, dfsToken: "not-a-token" });
    expect(thrown(() => c.resolvePath("x")).code).toBe("DFS_BAD_PATH");
    expect(c.resolvePath("/still/fine")).toBe("/still/fine");
  });
});
