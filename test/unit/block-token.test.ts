import { describe, expect, it } from "vitest";
import { BlockKeyManager, verifyBlockToken } from "../../common/block-token.js";
import type { BlockKey } from "../../common/block-token.js";
import { thrown } from "../error-code.js";

const keyMap = (keys: BlockKey[]): Map<number, BlockKey> => new Map(keys.map((k) => [k.keyId, k]));

describe("block access tokens", () => {
  it("lets a token do what it was issued for, on its block, until it expires", () => {
    let now = 1_000_000;
    const m = new BlockKeyManager(() => now, { tokenLifetimeMs: 60_000, keyUpdateIntervalMs: 30_000 });
    const token = m.issue(42, "READ", "alice");
    expect(verifyBlockToken(token, keyMap(m.keys()), 42, "READ", now)).toMatchObject({ blockId: 42, user: "alice" });
    now += 59_000;
    expect(verifyBlockToken(token, keyMap(m.keys()), 42, "READ", now).access).toBe("READ");
    now += 2_000;
    expect(thrown(() => verifyBlockToken(token, keyMap(m.keys()), 42, "READ", now)).message).toContain("expired");
  });

  it("refuses another block, another mode, a forged or tampered token, and keys it does not hold", () => {
    const now = 5_000;
    const m = new BlockKeyManager(() => now);
    const keys = keyMap(m.keys());
    const token = m.issue(7, "READ", "alice");
    const code = (t: string, block = 7, access: "READ" | "WRITE" = "READ", k = keys): string =>
      thrown(() => verifyBlockToken(t, k, block, access, now)).code;
    expect(code(token, 8)).toBe("DATANODE_BAD_TOKEN");
    expect(code(token, 7, "WRITE")).toBe("DATANODE_BAD_TOKEN");
    expect(code("")).toBe("DATANODE_BAD_TOKEN");
    expect(code("v1.1.e30.AAAA")).toBe("DATANODE_BAD_TOKEN");
    // Claims rewritten to another block, with the old signature.
    const [v, id, payload, sig] = token.split(".");
    const claims = JSON.parse(Buffer.from(payload!, "base64url").toString()) as Record<string, unknown>;
    const forged = Buffer.from(JSON.stringify({ ...claims, blockId: 8 })).toString("base64url");
    expect(code(`${v}.${id}.${forged}.${sig}`, 8)).toBe("DATANODE_BAD_TOKEN");
    // Signed by another namenode's key.
    const other = new BlockKeyManager(() => now);
    expect(code(other.issue(7, "READ", "alice"))).toBe("DATANODE_BAD_TOKEN");
    expect(code(token, 7, "READ", new Map())).toBe("DATANODE_BAD_TOKEN");
  });

  it("rolls its key, keeps verifying tokens of the old key until they expire, then forgets it", () => {
    let now = 0;
    const m = new BlockKeyManager(() => now, { tokenLifetimeMs: 10_000, keyUpdateIntervalMs: 5_000 });
    const old = m.issue(1, "WRITE", "a");
    now = 5_000;
    expect(m.maybeRoll()).toBe(true);
    const fresh = m.issue(1, "WRITE", "a");
    expect(fresh.split(".")[1]).not.toBe(old.split(".")[1]);
    expect(verifyBlockToken(old, keyMap(m.keys()), 1, "WRITE", now).blockId).toBe(1);
    now = 15_001;
    m.maybeRoll();
    expect(m.keys().map((k) => k.keyId)).not.toContain(1);
    expect(verifyBlockToken(fresh, keyMap(m.keys()), 1, "WRITE", 14_000).blockId).toBe(1);
  });
});
