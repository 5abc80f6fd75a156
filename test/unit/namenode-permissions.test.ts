/** The pure HDFS-style permission policy: owner/group/other classes, traversal, the request kinds, the superuser. */
import { describe, expect, it } from "vitest";
import { formatMode, parseMode } from "../../common/fs-permission.js";
import { detailsOf, HarvestError } from "../../common/errors.js";
import {
  accessName,
  ALL,
  check,
  checkPermission,
  checkSetOwner,
  EXECUTE,
  permits,
  READ,
  WRITE,
} from "../../namenode/policy/permissions.js";
import type { Caller, PermissionNode, ResolvedPath } from "../../namenode/policy/permissions.js";

const alice: Caller = { user: "alice", groups: ["alice", "analysts"], superuser: false };
const bob: Caller = { user: "bob", groups: ["bob"], superuser: false };
const carol: Caller = { user: "carol", groups: ["carol", "analysts"], superuser: false };
const admin: Caller = { user: "admin", groups: ["admin"], superuser: true };

const dir = (path: string, owner: string, mode: number, group = "harvest"): PermissionNode => ({
  path,
  owner,
  group,
  mode,
  isDir: true,
});
const file = (path: string, owner: string, mode: number, group = "analysts"): PermissionNode => ({
  path,
  owner,
  group,
  mode,
  isDir: false,
});

const root = dir("/", "admin", 0o755);
const home = dir("/home", "admin", 0o755);
const aliceHome = dir("/home/alice", "alice", 0o755, "analysts");
const f = file("/home/alice/f", "alice", 0o640);
const chainTo = (...nodes: (PermissionNode | undefined)[]): ResolvedPath => ({
  path: nodes.at(-1)?.path ?? "?",
  chain: nodes,
});

function refusal(fn: () => void): HarvestError {
  try {
    fn();
  } catch (err) {
    if (err instanceof HarvestError) return err;
    throw err;
  }
  throw new Error("expected a refusal");
}

describe("permission bits", () => {
  it("grants the owner's bits to the owner, the group's to members and the others' to everyone else", () => {
    expect(permits(f, alice, READ | WRITE)).toBe(true);
    expect(permits(f, carol, READ)).toBe(true);
    expect(permits(f, carol, WRITE)).toBe(false);
    expect(permits(f, bob, READ)).toBe(false);
    expect(permits({ ...f, mode: 0o644 }, bob, READ)).toBe(true);
  });

  it("decides by the first class the caller falls in, so an owner without bits is refused", () => {
    const odd = file("/x", "alice", 0o077);
    expect(permits(odd, alice, READ)).toBe(false);
    expect(permits(odd, carol, READ)).toBe(true);
    expect(permits(odd, bob, READ | WRITE | EXECUTE)).toBe(true);
  });

  it("lets the superuser do anything whatever the bits", () => {
    expect(permits(file("/x", "alice", 0), admin, ALL)).toBe(true);
    expect(() =>
      checkPermission(chainTo(dir("/", "alice", 0), file("/x", "alice", 0)), admin, { access: ALL }),
    ).not.toThrow();
  });

  it("names HDFS's access kinds and writes modes as ls does", () => {
    expect([READ, WRITE, EXECUTE, READ | EXECUTE, WRITE | EXECUTE, ALL, 0].map(accessName)).toEqual([
      "READ",
      "WRITE",
      "EXECUTE",
      "READ_EXECUTE",
      "WRITE_EXECUTE",
      "ALL",
      "NONE",
    ]);
    expect(formatMode(0o750, true)).toBe("drwxr-x---");
    expect(formatMode(0o644, false)).toBe("-rw-r--r--");
    expect(parseMode("750")).toBe(0o750);
    expect(parseMode("0644")).toBe(0o644);
    for (const bad of ["", "8", "rwx", "1777", "12345"])
      expect(() => parseMode(bad)).toThrow(expect.objectContaining({ code: "INVALID_ARGUMENT" }));
  });
});

describe("checkPermission", () => {
  it("refuses with DFS_PERMISSION_DENIED naming the user, the access and the inode", () => {
    const err = refusal(() => check(f, bob, READ));
    expect(err.code).toBe("DFS_PERMISSION_DENIED");
    expect(err.message).toContain('Permission denied: user=bob, access=READ, inode="/home/alice/f"');
    expect(err.details).toEqual({ path: "/home/alice/f", user: "bob", access: "READ" });
  });

  it("needs EXECUTE on every existing ancestor to reach a path, even only to stat it", () => {
    const closed = { ...aliceHome, mode: 0o750 };
    expect(() => checkPermission(chainTo(root, home, aliceHome, f), bob, {})).not.toThrow();
    const err = refusal(() => checkPermission(chainTo(root, home, closed, f), bob, {}));
    expect(err.details).toMatchObject({ path: "/home/alice", access: "EXECUTE" });
    // The target's existence is not revealed: a missing file below a closed directory is refused the same way.
    expect(refusal(() => checkPermission(chainTo(root, home, closed, undefined), bob, {})).code).toBe(
      "DFS_PERMISSION_DENIED",
    );
    // The target itself needs no EXECUTE for traversal.
    expect(() => checkPermission(chainTo(root, home, { ...aliceHome, mode: 0o700 }), bob, {})).not.toThrow();
  });

  it("asks WRITE of the nearest existing ancestor for a create or mkdirs", () => {
    const path = chainTo(root, home, aliceHome, undefined, undefined);
    expect(() => checkPermission(path, alice, { ancestor: WRITE })).not.toThrow();
    expect(refusal(() => checkPermission(path, bob, { ancestor: WRITE })).details).toMatchObject({
      path: "/home/alice",
      access: "WRITE",
    });
  });

  it("asks the parent for a delete and the inode itself for a read or an overwrite", () => {
    const path = chainTo(root, home, aliceHome, { ...f, mode: 0o666 });
    expect(
      detailsOf(
        refusal(() => checkPermission(path, bob, { parent: WRITE })),
        "DFS_PERMISSION_DENIED",
      )?.path,
    ).toBe("/home/alice");
    expect(() => checkPermission(path, bob, { access: READ | WRITE })).not.toThrow();
    expect(
      detailsOf(
        refusal(() => checkPermission(chainTo(root, home, aliceHome, f), bob, { access: READ })),
        "DFS_PERMISSION_DENIED",
      )?.path,
    ).toBe("/home/alice/f");
  });

  it("asks ALL of every non-empty directory below a recursive delete, skipping empty ones", () => {
    const shared = dir("/home/shared", "bob", 0o777);
    const locked = (hasChildren: boolean): ResolvedPath => ({
      path: "/home/shared",
      chain: [root, { ...home, mode: 0o777 }, shared],
      subtree: () => [
        { ...shared, hasChildren: true },
        { ...dir("/home/shared/alice-only", "alice", 0o700), hasChildren },
      ],
    });
    expect(refusal(() => checkPermission(locked(true), bob, { parent: WRITE, sub: ALL })).details).toMatchObject({
      path: "/home/shared/alice-only",
      access: "ALL",
    });
    expect(() => checkPermission(locked(false), bob, { parent: WRITE, sub: ALL })).not.toThrow();
  });

  it("lets only the owner change the mode", () => {
    const path = chainTo(root, home, aliceHome, f);
    expect(() => checkPermission(path, alice, { owner: true })).not.toThrow();
    expect(refusal(() => checkPermission(path, carol, { owner: true })).details).toMatchObject({ access: "OWNER" });
  });

  it("lets only the superuser change the owner, and the owner change the group", () => {
    expect(() => checkSetOwner(f, admin, { owner: "bob" })).not.toThrow();
    expect(refusal(() => checkSetOwner(f, alice, { owner: "bob" })).details).toMatchObject({ access: "CHOWN" });
    expect(() => checkSetOwner(f, alice, { group: "bob" })).not.toThrow();
    expect(() => checkSetOwner(f, alice, { owner: "alice", group: "bob" })).not.toThrow();
    expect(refusal(() => checkSetOwner(f, carol, { group: "carol" })).code).toBe("DFS_PERMISSION_DENIED");
  });
});
