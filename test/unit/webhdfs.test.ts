/**
 * WebHDFS's shared pieces (common/webhdfs.ts): the sealed ticket a redirect carries opens only with a key of the
 * cluster, only for its operation and path and only until it expires, and hides what it holds; a clear ticket passes
 * only on a plaintext datanode without block keys; query parameters are checked; errors take WebHDFS's
 * RemoteException shape with HDFS's statuses.
 */
import { randomBytes } from "node:crypto";
import { describe, expect, it } from "vitest";
import type { BlockKey } from "../../common/block-token.js";
import { HarvestError } from "../../common/errors.js";
import {
  boolParam,
  newestBlockKey,
  openWebHdfsTicket,
  permissionParam,
  sealWebHdfsTicket,
  webHdfsErrorResponse,
} from "../../common/webhdfs.js";
import type { WebHdfsTicket } from "../../common/webhdfs.js";

const NOW = 1_000_000;
const key = (keyId: number, expiresMs = NOW + 3_600_000): BlockKey => ({ keyId, secret: randomBytes(32), expiresMs });
const ticket: WebHdfsTicket = {
  op: "CREATE",
  path: "/home/alice/f",
  user: "alice",
  dfsToken: "d1.secret-token.sig",
  namenodeUrl: "https://nn:9870",
  overwrite: true,
  expiresMs: NOW + 60_000,
};
const want = { op: "CREATE", path: "/home/alice/f" } as const;

function refusal(fn: () => unknown): string | undefined {
  try {
    fn();
  } catch (err) {
    return err instanceof HarvestError ? err.code : "not a HarvestError";
  }
  return undefined;
}

describe("WebHDFS tickets", () => {
  it("open with the key that sealed them, and hide the user and the delegation token", () => {
    const k = key(7);
    const sealed = sealWebHdfsTicket(ticket, k);
    expect(sealed).toMatch(/^wh1\.7\./);
    expect(sealed).not.toContain("alice");
    expect(Buffer.from(sealed.split(".")[3]!, "base64url").toString("latin1")).not.toContain("secret-token");
    expect(openWebHdfsTicket(sealed, new Map([[7, k]]), true, want, NOW)).toEqual(ticket);
    // HA: two namenodes' key sets, the other's key of the same id tried too.
    expect(openWebHdfsTicket(sealed, [new Map([[7, key(7)]]), new Map([[7, k]])], true, want, NOW)).toEqual(ticket);
  });

  it("refuse another key, a changed byte, another path or operation, and expiry", () => {
    const k = key(7);
    const sealed = sealWebHdfsTicket(ticket, k);
    const keys = new Map([[7, k]]);
    expect(refusal(() => openWebHdfsTicket(sealed, new Map([[7, key(7)]]), true, want, NOW))).toBe(
      "DATANODE_BAD_TOKEN",
    );
    expect(refusal(() => openWebHdfsTicket(sealed, new Map([[8, k]]), true, want, NOW))).toBe("DATANODE_BAD_TOKEN");
    const parts = sealed.split(".");
    const body = Buffer.from(parts[3]!, "base64url");
    body[0] = body[0]! ^ 1;
    const tampered = [parts[0], parts[1], parts[2], body.toString("base64url")].join(".");
    expect(refusal(() => openWebHdfsTicket(tampered, keys, true, want, NOW))).toBe("DATANODE_BAD_TOKEN");
    // The key id is authenticated too.
    const moved = [parts[0], "8", parts[2], parts[3]].join(".");
    expect(refusal(() => openWebHdfsTicket(moved, new Map([[8, k]]), true, want, NOW))).toBe("DATANODE_BAD_TOKEN");
    expect(refusal(() => openWebHdfsTicket(sealed, keys, true, { op: "CREATE", path: "/home/alice/g" }, NOW))).toBe(
      "DATANODE_BAD_TOKEN",
    );
    expect(refusal(() => openWebHdfsTicket(sealed, keys, true, { op: "OPEN", path: ticket.path }, NOW))).toBe(
      "DATANODE_BAD_TOKEN",
    );
    expect(refusal(() => openWebHdfsTicket(sealed, keys, true, want, ticket.expiresMs))).toBe("DATANODE_BAD_TOKEN");
    // A key past its own expiry opens nothing.
    const old = key(9, NOW - 1);
    expect(refusal(() => openWebHdfsTicket(sealWebHdfsTicket(ticket, old), new Map([[9, old]]), true, want, NOW))).toBe(
      "DATANODE_BAD_TOKEN",
    );
    for (const junk of [
      "x",
      "wh1",
      "wh1.7.a.b",
      "wh1.7..",
      "wh2.7.a.b.c",
      "wh1.7.AAAAAAAAAAAAAAAA.AAAA",
      "a".repeat(20_000),
    ])
      expect(refusal(() => openWebHdfsTicket(junk, keys, true, want, NOW))).toBe("DATANODE_BAD_TOKEN");
    expect(refusal(() => openWebHdfsTicket(null, keys, true, want, NOW))).toBe("UNAUTHENTICATED");
    expect(refusal(() => openWebHdfsTicket("", keys, true, want, NOW))).toBe("UNAUTHENTICATED");
  });

  it("go in the clear only without block keys, and pass then only on a plaintext datanode", () => {
    const clear = sealWebHdfsTicket(ticket, undefined);
    expect(clear).toMatch(/^wh0\./);
    expect(openWebHdfsTicket(clear, "off", false, want, NOW)).toEqual(ticket);
    expect(refusal(() => openWebHdfsTicket(clear, "off", true, want, NOW))).toBe("DATANODE_BAD_TOKEN");
    expect(refusal(() => openWebHdfsTicket(clear, new Map([[1, key(1)]]), false, want, NOW))).toBe(
      "DATANODE_BAD_TOKEN",
    );
    expect(refusal(() => openWebHdfsTicket(sealWebHdfsTicket(ticket, key(1)), "off", false, want, NOW))).toBe(
      "DATANODE_BAD_TOKEN",
    );
  });

  it("are sealed with the namenode's newest key", () => {
    const a = key(1, NOW + 10);
    const b = key(2, NOW + 20);
    expect(newestBlockKey([b, a])).toBe(b);
    expect(newestBlockKey([])).toBeUndefined();
  });
});

describe("WebHDFS parameters and errors", () => {
  it("reads booleans and octal permissions, refusing anything else by name", () => {
    const q = (s: string): URLSearchParams => new URLSearchParams(s);
    expect(boolParam(q("overwrite=TRUE"), "overwrite", false)).toBe(true);
    expect(boolParam(q(""), "overwrite", false)).toBe(false);
    expect(refusal(() => boolParam(q("overwrite=1"), "overwrite", false))).toBe("INVALID_ARGUMENT");
    expect(permissionParam(q("permission=755"))).toBe(0o755);
    expect(permissionParam(q("permission=0640"))).toBe(0o640);
    expect(permissionParam(q(""))).toBeUndefined();
    for (const bad of ["1777", "8", "-1", "rwx", "7777", "0x1ff"])
      expect(refusal(() => permissionParam(q(`permission=${bad}`)))).toBe("INVALID_ARGUMENT");
  });

  it("answers errors as RemoteException with HDFS's exception and status, and Harvest's code beside", () => {
    const shape = (code: string): [number | undefined, string] => {
      const r = webHdfsErrorResponse(new HarvestError(code as never, "m"));
      return [r.status, (r.json as { RemoteException: { javaClassName: string } }).RemoteException.javaClassName];
    };
    expect(shape("NAMENODE_FILE_NOT_FOUND")).toEqual([404, "java.io.FileNotFoundException"]);
    expect(shape("DFS_PERMISSION_DENIED")).toEqual([403, "org.apache.hadoop.security.AccessControlException"]);
    expect(shape("NAMENODE_FILE_EXISTS")).toEqual([403, "org.apache.hadoop.fs.FileAlreadyExistsException"]);
    expect(shape("DFS_BAD_PATH")).toEqual([400, "java.lang.IllegalArgumentException"]);
    expect(shape("INVALID_ARGUMENT")).toEqual([400, "java.lang.IllegalArgumentException"]);
    expect(shape("UNAUTHENTICATED")).toEqual([401, "java.lang.SecurityException"]);
    expect(shape("NOT_ACTIVE")).toEqual([503, "org.apache.hadoop.ipc.StandbyException"]);
    expect(shape("INTERNAL")).toEqual([500, "java.io.IOException"]);
    const r = webHdfsErrorResponse(new Error("boom"));
    expect(r.json).toMatchObject({ RemoteException: { exception: "IOException" }, error: { code: "INTERNAL" } });
  });
});
