/** The namenode's namespace over a real LevelDB store: semantics, error codes and persistence. */
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { codeOf, thrown } from "../error-code.js";
import { ManualClock } from "../../common/clock.js";
import { Namespace } from "../../namenode/namespace.js";
import type { CreateFileRequest, NamespaceListener } from "../../namenode/namespace.js";
import { NamespaceStore } from "../../namenode/namespace-store.js";
import type { BlockRecord } from "../../namenode/namespace-store.js";

/** Records what the namespace tells the block layer. */
class RecordingListener implements NamespaceListener {
  allocated: number[] = [];
  committed: BlockRecord[] = [];
  removed: number[] = [];
  blockAllocated(block: BlockRecord): void {
    this.allocated.push(block.blockId);
  }
  blockCommitted(block: BlockRecord): void {
    this.committed.push(block);
  }
  blocksRemoved(blocks: readonly BlockRecord[]): void {
    this.removed.push(...blocks.map((b) => b.blockId));
  }
}

describe("the namespace", () => {
  let dir: string;
  let store: NamespaceStore;
  let ns: Namespace;
  let clock: ManualClock;
  let events: RecordingListener;
  const extraStores: NamespaceStore[] = [];

  async function openNamespace(): Promise<{ store: NamespaceStore; ns: Namespace }> {
    const s = new NamespaceStore(join(dir, "ns"));
    await s.open();
    const n = new Namespace(s, { defaultReplication: 3, defaultBlockSizeBytes: 4096 }, { clock, listener: events });
    await n.load();
    return { store: s, ns: n };
  }

  /** Closes the current store and opens a fresh Namespace on the same directory. */
  async function reopen(): Promise<Namespace> {
    await ns.drain();
    await store.close();
    ({ store, ns } = await openNamespace());
    return ns;
  }

  const create = (path: string, extra: Partial<CreateFileRequest> = {}): ReturnType<Namespace["create"]> =>
    ns.create({
      path,
      owner: "alice",
      replication: 0,
      blockSizeBytes: 0,
      overwrite: false,
      clientName: "writer-1",
      writerDatanodeId: "",
      ...extra,
    });
  const noTargets = (): string[] => [];

  beforeEach(async () => {
    dir = await mkdtemp(join(tmpdir(), "harvest-ns-"));
    clock = new ManualClock(1_000);
    events = new RecordingListener();
    ({ store, ns } = await openNamespace());
  });

  afterEach(async () => {
    await ns.drain();
    await store.close().catch(() => undefined);
    for (const s of extraStores.splice(0)) await s.close().catch(() => undefined);
    await rm(dir, { recursive: true, force: true });
  });

  it("creates missing parents with mkdirs and succeeds again on an existing directory", async () => {
    const st = await ns.mkdirs("/a/b/c", "alice");
    expect(st).toMatchObject({ path: "/a/b/c", isDir: true, owner: "alice" });
    expect(ns.list("/a").map((e) => e.path)).toEqual(["/a/b"]);
    expect((await ns.mkdirs("/a/b/c/", "bob")).owner).toBe("alice");
    expect(ns.stat("/").isDir).toBe(true);
  });

  it("refuses mkdirs through a file with NAMENODE_NOT_A_DIRECTORY", async () => {
    await create("/f");
    expect(await codeOf(ns.mkdirs("/f/g", "alice"))).toBe("NAMENODE_NOT_A_DIRECTORY");
    expect(await codeOf(ns.mkdirs("/f", "alice"))).toBe("NAMENODE_NOT_A_DIRECTORY");
  });

  it("creates an open file with the defaults and refuses a missing parent, a file parent or a directory", async () => {
    const st = await create("/f");
    expect(st).toMatchObject({ path: "/f", isDir: false, complete: false, length: 0, replication: 3, blockSize: 4096 });
    expect(await codeOf(create("/nope/f"))).toBe("NAMENODE_PARENT_NOT_FOUND");
    expect(await codeOf(create("/f/g"))).toBe("NAMENODE_NOT_A_DIRECTORY");
    await ns.mkdirs("/d", "alice");
    expect(await codeOf(create("/d"))).toBe("NAMENODE_IS_A_DIRECTORY");
    expect(await codeOf(create("/g", { blockSizeBytes: 1000 }))).toBe("INVALID_ARGUMENT");
    expect(await codeOf(create("/g", { clientName: "" }))).toBe("INVALID_ARGUMENT");
  });

  it("refuses to create over an existing file unless asked to overwrite, which drops the old blocks", async () => {
    await create("/f");
    const { block } = await ns.addBlock({ path: "/f", clientName: "writer-1" }, noTargets);
    await ns.complete("/f", "writer-1", { ...block, numBytes: 100 });
    expect(await codeOf(create("/f"))).toBe("NAMENODE_FILE_EXISTS");
    const st = await create("/f", { overwrite: true, clientName: "writer-2" });
    expect(st).toMatchObject({ length: 0, blocks: 0, complete: false });
    expect(events.removed).toEqual([block.blockId]);
  });

  it("refuses to overwrite a file another client is still writing", async () => {
    await create("/f");
    expect(await codeOf(create("/f", { overwrite: true, clientName: "writer-2" }))).toBe("NAMENODE_FILE_INCOMPLETE");
  });

  it("writes a file block by block: addBlock commits the previous block and complete makes the length final", async () => {
    await create("/f");
    const first = await ns.addBlock({ path: "/f", clientName: "writer-1" }, () => ["dn1", "dn2"]);
    expect(first.offset).toBe(0);
    expect(first.targets).toEqual(["dn1", "dn2"]);
    const second = await ns.addBlock(
      { path: "/f", clientName: "writer-1", previous: { ...first.block, numBytes: 4096 } },
      noTargets,
    );
    expect(second.offset).toBe(4096);
    expect(second.block.blockId).not.toBe(first.block.blockId);
    expect(ns.stat("/f")).toMatchObject({ length: 4096, blocks: 2, complete: false });
    const done = await ns.complete("/f", "writer-1", { ...second.block, numBytes: 10 });
    expect(done).toMatchObject({ length: 4106, blocks: 2, complete: true });
    expect(events.committed.map((b) => b.numBytes)).toEqual([4096, 10]);
    expect(ns.file("/f").blocks.map((b) => [b.offset, b.block.numBytes, b.committed])).toEqual([
      [0, 4096, true],
      [4096, 10, true],
    ]);
    // A retried Complete (the first answer lost) succeeds; a writer using a closed file does not.
    expect((await ns.complete("/f", "writer-1", { ...second.block, numBytes: 10 })).length).toBe(4106);
    expect(await codeOf(ns.addBlock({ path: "/f", clientName: "writer-1" }, noTargets))).toBe(
      "NAMENODE_LEASE_MISMATCH",
    );
  });

  it("checks the lease and the previous block on addBlock, and writes nothing when no target is found", async () => {
    await create("/f");
    expect(await codeOf(ns.addBlock({ path: "/f", clientName: "intruder" }, noTargets))).toBe(
      "NAMENODE_LEASE_MISMATCH",
    );
    const { block } = await ns.addBlock({ path: "/f", clientName: "writer-1" }, noTargets);
    // The first block must be committed by the next call.
    expect(await codeOf(ns.addBlock({ path: "/f", clientName: "writer-1" }, noTargets))).toBe(
      "NAMENODE_BLOCK_MISMATCH",
    );
    expect(
      await codeOf(
        ns.addBlock({ path: "/f", clientName: "writer-1", previous: { ...block, blockId: 999 } }, noTargets),
      ),
    ).toBe("NAMENODE_BLOCK_MISMATCH");
    const failing = (): never => {
      throw new Error("no datanodes");
    };
    expect(await codeOf(ns.addBlock({ path: "/f", clientName: "writer-1", previous: block }, failing))).toBe(
      "non-harvest error: Error: no datanodes",
    );
    expect(ns.stat("/f").blocks).toBe(1);
    expect(await codeOf(ns.addBlock({ path: "/missing", clientName: "writer-1" }, noTargets))).toBe(
      "NAMENODE_FILE_NOT_FOUND",
    );
    await ns.mkdirs("/d", "alice");
    expect(await codeOf(ns.addBlock({ path: "/d", clientName: "writer-1" }, noTargets))).toBe(
      "NAMENODE_IS_A_DIRECTORY",
    );
  });

  it("abandons the last block so the writer can ask for another pipeline", async () => {
    await create("/f");
    const { block } = await ns.addBlock({ path: "/f", clientName: "writer-1" }, noTargets);
    expect(await codeOf(ns.abandonBlock("/f", "writer-1", { ...block, blockId: block.blockId + 7 }))).toBe(
      "NAMENODE_BLOCK_MISMATCH",
    );
    expect(await codeOf(ns.abandonBlock("/f", "someone", block))).toBe("NAMENODE_LEASE_MISMATCH");
    await ns.abandonBlock("/f", "writer-1", block);
    expect(ns.stat("/f").blocks).toBe(0);
    expect(events.removed).toEqual([block.blockId]);
    const again = await ns.addBlock({ path: "/f", clientName: "writer-1" }, noTargets);
    expect(again.block.blockId).toBeGreaterThan(block.blockId);
  });

  it("lets a writer fail over after a committed block: abandon, then addBlock with or without the previous block", async () => {
    await create("/f");
    const first = await ns.addBlock({ path: "/f", clientName: "writer-1" }, noTargets);
    const committedFirst = { ...first.block, numBytes: 4096 };
    const second = await ns.addBlock({ path: "/f", clientName: "writer-1", previous: committedFirst }, noTargets);
    // A committed block cannot be abandoned; the one being written can.
    expect(await codeOf(ns.abandonBlock("/f", "writer-1", first.block))).toBe("NAMENODE_BLOCK_MISMATCH");
    await ns.abandonBlock("/f", "writer-1", second.block);
    const retry = await ns.addBlock({ path: "/f", clientName: "writer-1" }, noTargets);
    expect(retry.offset).toBe(4096);
    await ns.abandonBlock("/f", "writer-1", retry.block);
    const retryWithPrevious = await ns.addBlock(
      { path: "/f", clientName: "writer-1", previous: committedFirst },
      noTargets,
    );
    expect(retryWithPrevious.offset).toBe(4096);
    await ns.abandonBlock("/f", "writer-1", retryWithPrevious.block);
    // Repeating the committed block with another length is not a retry.
    expect(
      await codeOf(
        ns.addBlock({ path: "/f", clientName: "writer-1", previous: { ...first.block, numBytes: 1 } }, noTargets),
      ),
    ).toBe("NAMENODE_BLOCK_MISMATCH");
    expect((await ns.complete("/f", "writer-1", null)).length).toBe(4096);
    expect(events.removed).toEqual([second.block.blockId, retry.block.blockId, retryWithPrevious.block.blockId]);
  });

  it("lists a directory by name and a file as itself, and stats missing paths as not found", async () => {
    await ns.mkdirs("/d/z", "alice");
    await create("/d/b");
    await create("/d/a");
    expect(ns.list("/d").map((e) => [e.path, e.isDir])).toEqual([
      ["/d/a", false],
      ["/d/b", false],
      ["/d/z", true],
    ]);
    expect(ns.list("/d/a").map((e) => e.path)).toEqual(["/d/a"]);
    expect(() => ns.stat("/d/nope")).toThrow(expect.objectContaining({ code: "NAMENODE_FILE_NOT_FOUND" }));
    expect(() => ns.list("/nope")).toThrow(expect.objectContaining({ code: "NAMENODE_FILE_NOT_FOUND" }));
  });

  it("walks for fsck only where the caller may list every directory, empty ones too; the superuser everywhere", async () => {
    await ns.mkdirs("/w/open/a", "alice");
    await ns.mkdirs("/w/open/b", "alice");
    await create("/w/open/a/f");
    const alice = { user: "alice", groups: ["alice"], superuser: false };
    expect(ns.walk("/w", alice)).toMatchObject({ files: [{ path: "/w/open/a/f" }], directories: 4 });
    // An empty directory she may not list refuses the whole walk, naming it; so does one she may not traverse.
    await ns.setOwner("/w/open/b", "bob", "bob");
    await ns.setPermission("/w/open/b", 0o700);
    const refused = thrown(() => ns.walk("/w", alice));
    expect([refused.code, refused.details]).toEqual([
      "DFS_PERMISSION_DENIED",
      { path: "/w/open/b", user: "alice", access: "READ_EXECUTE" },
    ]);
    await ns.setPermission("/w/open/b", 0o711);
    expect(thrown(() => ns.walk("/w/open/b", alice)).details).toMatchObject({ path: "/w/open/b" });
    await ns.setPermission("/w/open", 0o700);
    await ns.setOwner("/w/open", "bob", "bob");
    expect(thrown(() => ns.walk("/w/open/a/f", alice)).details).toMatchObject({ path: "/w/open", access: "EXECUTE" });
    // The superuser, and the namenode's own walks (no caller), see everything.
    expect(ns.walk("/w", { user: "root", groups: [], superuser: true }).directories).toBe(4);
    expect(ns.walk("/w").files).toHaveLength(1);
    expect(() => ns.walk("/nope", alice)).toThrow(expect.objectContaining({ code: "NAMENODE_FILE_NOT_FOUND" }));
  });

  it("deletes files and empty directories, needs recursive for the rest, and never deletes the root", async () => {
    await ns.mkdirs("/d/e", "alice");
    await create("/d/e/f");
    const { block } = await ns.addBlock({ path: "/d/e/f", clientName: "writer-1" }, noTargets);
    expect(await codeOf(ns.delete("/d", false))).toBe("NAMENODE_DIRECTORY_NOT_EMPTY");
    expect(await codeOf(ns.delete("/", true))).toBe("DFS_BAD_PATH");
    expect(await ns.delete("/nope", false)).toBe(false);
    expect(await ns.delete("/d", true)).toBe(true);
    expect(events.removed).toEqual([block.blockId]);
    expect(ns.list("/")).toEqual([]);
    await ns.mkdirs("/empty", "alice");
    expect(await ns.delete("/empty", false)).toBe(true);
  });

  it("renames files and directories and refuses an existing target, a missing parent or a move into itself", async () => {
    await ns.mkdirs("/a/b", "alice");
    await create("/a/b/f");
    await ns.mkdirs("/x", "alice");
    expect((await ns.rename("/a/b/f", "/x/g")).path).toBe("/x/g");
    expect(ns.list("/a/b")).toEqual([]);
    expect((await ns.rename("/a", "/x/a2")).isDir).toBe(true);
    expect(ns.stat("/x/a2/b").isDir).toBe(true);
    await create("/y");
    expect(await codeOf(ns.rename("/y", "/x/g"))).toBe("NAMENODE_FILE_EXISTS");
    expect(await codeOf(ns.rename("/y", "/nope/y"))).toBe("NAMENODE_PARENT_NOT_FOUND");
    expect(await codeOf(ns.rename("/nope", "/z"))).toBe("NAMENODE_FILE_NOT_FOUND");
    expect(await codeOf(ns.rename("/x", "/x/a2/inner"))).toBe("DFS_BAD_PATH");
    expect(await codeOf(ns.rename("/y", "/x/g/h"))).toBe("NAMENODE_NOT_A_DIRECTORY");
    // The writer of the moved file still holds its lease under the new name.
    expect((await ns.complete("/x/g", "writer-1", null)).complete).toBe(true);
  });

  it("rejects relative, dotted, doubled-slash and NUL paths with DFS_BAD_PATH", async () => {
    for (const bad of ["a/b", "/a/../b", "/a/./b", "/a//b", "/a\0b", ""]) {
      expect(await codeOf(ns.mkdirs(bad, "alice"))).toBe("DFS_BAD_PATH");
      expect(await codeOf(create(bad))).toBe("DFS_BAD_PATH");
      expect(await codeOf(ns.rename("/", bad))).toBe("DFS_BAD_PATH");
      expect(() => ns.stat(bad)).toThrow(expect.objectContaining({ code: "DFS_BAD_PATH" }));
    }
  });

  it("closes a file whose writer went silent past the lease timeout, dropping its uncommitted last block", async () => {
    await create("/f");
    const first = await ns.addBlock({ path: "/f", clientName: "writer-1" }, noTargets);
    const second = await ns.addBlock(
      { path: "/f", clientName: "writer-1", previous: { ...first.block, numBytes: 4096 } },
      noTargets,
    );
    clock.advance(59_000);
    expect(ns.expiredLeases(60_000)).toEqual([]);
    clock.advance(1_000);
    expect(ns.expiredLeases(60_000)).toEqual(["/f"]);
    expect(await ns.recoverLease("/f", 60_000)).toBe(true);
    expect(ns.stat("/f")).toMatchObject({ complete: true, length: 4096, blocks: 1 });
    expect(events.removed).toEqual([second.block.blockId]);
    expect(ns.expiredLeases(60_000)).toEqual([]);
  });

  it("renews every open file of a client name on RenewLease, but only for its owner", async () => {
    await create("/a");
    await create("/b");
    await create("/other", { clientName: "writer-2" });
    const bob = { user: "bob", groups: ["bob"], superuser: false };
    const alice = { user: "alice", groups: ["alice"], superuser: false };
    clock.advance(50_000);
    // A stranger naming alice's client renews nothing; an empty client name is refused.
    expect(ns.renewLease("writer-1", bob)).toBe(0);
    expect(await codeOf(Promise.resolve().then(() => ns.renewLease("", alice)))).toBe("INVALID_ARGUMENT");
    expect(ns.renewLease("writer-1", alice)).toBe(2);
    clock.advance(20_000);
    // Renewed 20 s ago: alive. The other client's file, silent for 70 s: expired.
    expect(ns.expiredLeases(60_000)).toEqual(["/other"]);
    clock.advance(40_000);
    expect(ns.expiredLeases(60_000).sort()).toEqual(["/a", "/b", "/other"]);
  });

  it("has the same tree after a restart on the same store, including renames and recursive deletes", async () => {
    await ns.mkdirs("/keep/sub", "alice");
    await ns.mkdirs("/gone/deep/er", "alice");
    await create("/gone/deep/file");
    await create("/keep/sub/data", { replication: 2, blockSizeBytes: 1024 });
    const { block } = await ns.addBlock({ path: "/keep/sub/data", clientName: "writer-1" }, noTargets);
    await ns.complete("/keep/sub/data", "writer-1", { ...block, numBytes: 777 });
    await create("/open");
    await ns.rename("/keep/sub", "/moved");
    await ns.delete("/gone", true);
    const before = ns.walk("/");

    const again = await reopen();
    expect(again.walk("/")).toEqual(before);
    expect(again.list("/").map((e) => e.path)).toEqual(["/keep", "/moved", "/open"]);
    expect(again.stat("/moved/data")).toMatchObject({ length: 777, replication: 2, blockSize: 1024, complete: true });
    expect(again.list("/keep")).toEqual([]);
    expect(() => again.stat("/gone")).toThrow(expect.objectContaining({ code: "NAMENODE_FILE_NOT_FOUND" }));
    expect(again.counts()).toEqual({ files: 2, directories: 3, blocks: 1 });
    // The open file keeps its writer's lease; new ids do not reuse old ones.
    const next = await again.addBlock({ path: "/open", clientName: "writer-1" }, noTargets);
    expect(next.block.blockId).toBeGreaterThan(block.blockId);
    expect(next.block.genStamp).toBeGreaterThan(block.genStamp);
  });
});

describe("group commit", () => {
  it("answers a burst of concurrent mutations with fewer synced batches than mutations, and all of them reload", async () => {
    const dir = await mkdtemp(join(tmpdir(), "harvest-ns-group-"));
    try {
      const clock = new ManualClock(1_000);
      const listener = {
        blocksAllocated: () => undefined,
        blocksCommitted: () => undefined,
        blocksRemoved: () => undefined,
      };
      // Opens the namespace stored in `dir` (again).
      const open = async (): Promise<{ store: NamespaceStore; ns: Namespace }> => {
        const store = new NamespaceStore(join(dir, "ns"));
        await store.open();
        const opts = { defaultReplication: 3, defaultBlockSizeBytes: 4096 };
        const ns = new Namespace(store, opts, { clock, listener: listener as never });
        await ns.load();
        return { store, ns };
      };
      const { store, ns } = await open();
      const before = store.batchesWritten;
      await Promise.all(Array.from({ length: 200 }, (_, i) => ns.mkdirs(`/burst/d${i}`, "alice")));
      expect(store.batchesWritten - before).toBeLessThan(200);
      await ns.drain();
      await store.close();
      const { store: again, ns: reloaded } = await open();
      expect(reloaded.list("/burst")).toHaveLength(200);
      await again.close();
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});
