/**
 * HDFS-style permissions against a real namenode and datanode on loopback: one user cannot delete, overwrite, rename or
 * (once it is private) read another's file; the owner's file survives every refusal; fsck needs READ_EXECUTE on every
 * directory it walks; the superuser can chown; a
 * namespace stored before permissions existed loads with the documented owner, group and mode.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Readable } from "node:stream";
import { pipeline } from "node:stream/promises";
import { Level } from "level";
import { readAll } from "../dfs-read.js";
import { waitFor } from "../wait-for.js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestDataNode } from "./harness.js";
import { DfsClient } from "../../client/dfs-client.js";
import { errorMessage, HarvestError } from "../../common/errors.js";
import { call, loadHarvestProto, makeClient } from "../../common/grpc.js";
import { Logger } from "../../common/log.js";
import type { DataNode } from "../../datanode/index.js";
import { NameNode } from "../../namenode/index.js";
import type { NameNodeOptions } from "../../namenode/index.js";

const quiet = new Logger("test", "error");
const SUPERUSER = "hdfs-admin";
const CONTENT = Buffer.from("alice's notes: the cluster is secure now\n".repeat(50));

async function write(dfs: DfsClient, path: string, data: Buffer, overwrite = false): Promise<void> {
  await pipeline(Readable.from([data]), dfs.createWriteStream(path, { replication: 1, overwrite }));
}

/** The refusal a promise ends with: its code, and its details when permissions refused it. */
async function refusal(p: Promise<unknown>): Promise<{ code: string; details: Record<string, string> }> {
  try {
    await p;
  } catch (err) {
    if (err instanceof HarvestError) return { code: err.code, details: err.details };
    throw new Error(`not a HarvestError: ${errorMessage(err)}`);
  }
  throw new Error("expected a refusal");
}

function startNameNode(dataDir: string, extra: Partial<NameNodeOptions> = {}): Promise<NameNode> {
  const nn = new NameNode(
    { dataDir, superuser: SUPERUSER, heartbeatIntervalMs: 200, datanodeExpiryMs: 2_000, ...extra },
    { logger: quiet },
  );
  return nn.start().then(() => nn);
}

describe("HDFS-style permissions in the namenode", () => {
  let dir: string;
  let nn: NameNode;
  let dn: DataNode;
  let admin: DfsClient;
  let alice: DfsClient;
  let bob: DfsClient;

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), "harvest-perm-"));
    nn = await startNameNode(join(dir, "nn"));
    dn = await startTestDataNode(dir, "dn1", nn.address, { heartbeatIntervalMs: 200 });
    admin = new DfsClient(nn.address, { user: SUPERUSER });
    alice = new DfsClient(nn.address, { user: "alice" });
    bob = new DfsClient(nn.address, { user: "bob" });
    await waitFor(async () => (await admin.datanodes()).length === 1, { what: "the datanode" });
    // As an HDFS administrator does: the superuser makes each user's home directory and gives it to them.
    await admin.mkdir("/home/alice");
    await admin.chown("/home/alice", "alice");
    await admin.mkdir("/tmp");
    await admin.chmod("/tmp", 0o777);
    await write(alice, "/home/alice/f", CONTENT);
  });

  afterAll(async () => {
    for (const c of [admin, alice, bob]) c?.close();
    await dn?.stop();
    await nn?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  it("creates files and directories owned by their creator, 0644 and 0755, in the parent's group", async () => {
    expect(await alice.stat("/home/alice/f")).toMatchObject({ owner: "alice", group: "harvest", mode: 0o644 });
    expect(await alice.stat("/home/alice")).toMatchObject({ owner: "alice", mode: 0o755, isDir: true });
    expect(await alice.stat("/")).toMatchObject({ owner: SUPERUSER, group: "harvest", mode: 0o755 });
  });

  it("lets another user read a 0644 file but not delete, overwrite or rename it", async () => {
    expect(await readAll(bob, "/home/alice/f")).toEqual(CONTENT);
    expect(await refusal(bob.delete("/home/alice/f"))).toEqual({
      code: "DFS_PERMISSION_DENIED",
      details: { path: "/home/alice", user: "bob", access: "WRITE" },
    });
    expect(await refusal(write(bob, "/home/alice/f", Buffer.from("bob was here"), true))).toMatchObject({
      code: "DFS_PERMISSION_DENIED",
      details: { user: "bob", access: "WRITE" },
    });
    expect(await refusal(bob.rename("/home/alice/f", "/tmp/stolen"))).toEqual({
      code: "DFS_PERMISSION_DENIED",
      details: { path: "/home/alice", user: "bob", access: "WRITE" },
    });
    expect(await refusal(bob.mkdir("/home/alice/bobs"))).toMatchObject({ code: "DFS_PERMISSION_DENIED" });
    expect(await readAll(alice, "/home/alice/f")).toEqual(CONTENT);
    expect(await alice.list("/tmp")).toEqual([]);
  });

  it("refuses another user's read once the owner makes the file private, and its chmod and chown", async () => {
    expect(await refusal(bob.chmod("/home/alice/f", 0o666))).toMatchObject({
      code: "DFS_PERMISSION_DENIED",
      details: { path: "/home/alice/f", user: "bob" },
    });
    expect((await alice.chmod("/home/alice/f", 0o600)).mode).toBe(0o600);
    expect(await refusal(readAll(bob, "/home/alice/f"))).toEqual({
      code: "DFS_PERMISSION_DENIED",
      details: { path: "/home/alice/f", user: "bob", access: "READ" },
    });
    expect(await refusal(alice.chown("/home/alice/f", "bob"))).toMatchObject({ code: "DFS_PERMISSION_DENIED" });
    expect(await refusal(bob.chown("/home/alice/f", "bob"))).toMatchObject({ code: "DFS_PERMISSION_DENIED" });
    // Still there, intact, for its owner; and the namenode still serves everyone.
    expect(await readAll(alice, "/home/alice/f")).toEqual(CONTENT);
    expect((await bob.stat("/home/alice/f")).length).toBe(CONTENT.length);
    await write(bob, "/tmp/bobs-file", Buffer.from("mine"));
    expect((await bob.list("/tmp")).map((s) => [s.path, s.owner])).toEqual([["/tmp/bobs-file", "bob"]]);
  });

  it("hides a directory's contents from a user who may not list or traverse it", async () => {
    await alice.chmod("/home/alice", 0o700);
    expect(await refusal(bob.list("/home/alice"))).toMatchObject({
      code: "DFS_PERMISSION_DENIED",
      details: { path: "/home/alice", access: "READ_EXECUTE" },
    });
    // Whether a file exists below it is not revealed either.
    expect((await refusal(bob.stat("/home/alice/nothing-here"))).code).toBe("DFS_PERMISSION_DENIED");
    await alice.chmod("/home/alice", 0o755);
  });

  it("runs fsck only where the caller may list every directory it walks, as HDFS does", async () => {
    await admin.mkdir("/private");
    await admin.chmod("/private", 0o700);
    await write(admin, "/private/secret", CONTENT);
    try {
      // Refused at the root of the walk, or at the private directory deeper in it: a coded error, and no counts.
      for (const path of ["/private", "/"])
        expect(await refusal(alice.fsck(path))).toEqual({
          code: "DFS_PERMISSION_DENIED",
          details: { path: "/private", user: "alice", access: "READ_EXECUTE" },
        });
      expect((await refusal(alice.fsck("/private/secret"))).details).toMatchObject({ access: "EXECUTE" });
      // An empty private directory is refused too (HDFS's fsck lists each directory as its caller).
      await admin.mkdir("/home/alice/closed");
      await admin.chmod("/home/alice/closed", 0o700);
      expect((await refusal(alice.fsck("/home/alice"))).details).toMatchObject({ path: "/home/alice/closed" });
      await admin.delete("/home/alice/closed");
      // Her own directory, and everything for the superuser.
      expect(await alice.fsck("/home/alice")).toMatchObject({ files: 1, directories: 1, totalBytes: CONTENT.length });
      expect(await admin.fsck("/private")).toMatchObject({ files: 1, directories: 1, totalBytes: CONTENT.length });
      expect((await admin.fsck("/")).files).toBe(3);
    } finally {
      await admin.delete("/private", { recursive: true });
    }
  });

  it("lets the superuser give the file to another user, who can then read it", async () => {
    expect(await admin.chown("/home/alice/f", "bob", "bob")).toMatchObject({ owner: "bob", group: "bob", mode: 0o600 });
    expect(await readAll(bob, "/home/alice/f")).toEqual(CONTENT);
    expect((await refusal(readAll(alice, "/home/alice/f"))).code).toBe("DFS_PERMISSION_DENIED");
    // The owner may change the group, not the owner.
    expect((await bob.chown("/home/alice/f", "", "harvest")).group).toBe("harvest");
  });

  it("treats a plaintext call that claims no user as nobody, with only the others' bits", async () => {
    const raw = makeClient(loadHarvestProto().ClientNamenode, nn.address);
    try {
      expect((await call(raw, raw.stat, { path: "/home/alice" })).owner).toBe("alice");
      expect((await refusal(call(raw, raw.delete, { path: "/home/alice/f", recursive: false }))).details).toEqual({
        path: "/home/alice",
        user: "nobody",
        access: "WRITE",
      });
    } finally {
      raw.close();
    }
  });

  it("keeps owners, groups and modes across a restart, and loads inodes stored before permissions with defaults", async () => {
    await dn.stop();
    await nn.stop();
    // Make /home/alice and the file look as a namenode without permissions stored them (an untrusted claimed owner).
    const db = new Level<string, Record<string, unknown>>(join(dir, "nn", "namespace"), { valueEncoding: "json" });
    await db.open();
    for await (const [key, inode] of db.iterator({ gt: "inode!", lt: "inode!\xff" })) {
      if (inode["name"] !== "alice" && inode["name"] !== "f") continue;
      const { group: _group, mode: _mode, ...legacy } = inode;
      await db.put(key, { ...legacy, owner: "mallory" });
    }
    await db.close();

    nn = await startNameNode(join(dir, "nn"));
    const reader = new DfsClient(nn.address, { user: "bob" });
    try {
      expect(await reader.stat("/home/alice")).toMatchObject({ owner: SUPERUSER, group: "harvest", mode: 0o755 });
      expect(await reader.stat("/home/alice/f")).toMatchObject({ owner: SUPERUSER, group: "harvest", mode: 0o644 });
      expect(await reader.stat("/tmp/bobs-file")).toMatchObject({ owner: "bob", group: "harvest", mode: 0o644 });
      expect(await reader.stat("/tmp")).toMatchObject({ owner: SUPERUSER, mode: 0o777 });
    } finally {
      reader.close();
    }
  });
});
