import { describe, expect, it } from "vitest";
import type { TokenFields } from "../../common/container-token.js";
import { resolveResourceManagerOptions } from "../../resourcemanager/options.js";
import { thrown } from "../error-code.js";
import {
  renewedAmToken,
  signAmToken,
  signContainer,
  verifyAmToken,
  verifyContainer,
} from "../../common/container-token.js";

const SECRET = "cluster-secret-1";

function grant(overrides: Partial<TokenFields> = {}): TokenFields {
  return {
    containerId: "container_1700000000000_0001_01_000002",
    appId: "application_1700000000000_0001",
    nodeId: "node-1",
    resource: { vcoresMilli: 1500, memoryMb: 512 },
    ...overrides,
  };
}

describe("container tokens", () => {
  it("verifies a token against exactly the grant it was signed for", () => {
    const token = signContainer(SECRET, grant());
    expect(token).not.toBe("");
    expect(verifyContainer(SECRET, grant(), token)).toBe(true);
  });

  it("signs the same grant to the same token every time, so any node manager can check it", () => {
    expect(signContainer(SECRET, grant())).toBe(signContainer(SECRET, grant()));
  });

  it.each<[string, Partial<TokenFields>]>([
    ["container id", { containerId: "container_1700000000000_0001_01_000003" }],
    ["application id", { appId: "application_1700000000000_0002" }],
    ["node id", { nodeId: "node-2" }],
    ["vcores", { resource: { vcoresMilli: 1501, memoryMb: 512 } }],
    ["memory", { resource: { vcoresMilli: 1500, memoryMb: 4096 } }],
    ["job priority", { jobPriority: 100 }],
  ])("rejects the token when the grant's %s is changed", (_field, change) => {
    const token = signContainer(SECRET, grant());
    expect(verifyContainer(SECRET, grant(change), token)).toBe(false);
  });

  it("rejects a token signed with another cluster's secret", () => {
    const token = signContainer("other-secret", grant());
    expect(verifyContainer(SECRET, grant(), token)).toBe(false);
  });

  it("rejects a token with one character altered", () => {
    const token = signContainer(SECRET, grant());
    const last = token.at(-1) === "0" ? "1" : "0";
    expect(verifyContainer(SECRET, grant(), token.slice(0, -1) + last)).toBe(false);
  });

  it("rejects a missing, truncated or non-hex token", () => {
    const token = signContainer(SECRET, grant());
    expect(verifyContainer(SECRET, grant(), "")).toBe(false);
    expect(verifyContainer(SECRET, grant(), token.slice(0, 32))).toBe(false);
    expect(verifyContainer(SECRET, grant(), "not-a-token")).toBe(false);
    expect(verifyContainer(SECRET, grant(), "g".repeat(token.length))).toBe(false);
  });

  it("does not let a token for a small container launch a bigger one on the same node", () => {
    const small = signContainer(SECRET, grant({ resource: { vcoresMilli: 100, memoryMb: 128 } }));
    expect(verifyContainer(SECRET, grant({ resource: { vcoresMilli: 4000, memoryMb: 128 } }), small)).toBe(false);
  });

  it("rejects a valid token with junk appended", () => {
    const f = grant();
    const token = signContainer(SECRET, f);
    expect(verifyContainer(SECRET, f, token + "zz")).toBe(false);
    expect(verifyContainer(SECRET, f, token + "0")).toBe(false);
  });

  it("signs grants that differ only in where a separator falls to different tokens", () => {
    const a = signContainer(SECRET, grant({ containerId: "c|x", appId: "a" }));
    const b = signContainer(SECRET, grant({ containerId: "c", appId: "x|a" }));
    expect(a).not.toBe(b);
  });

  it("issues empty tokens and accepts any token when the secret is empty", () => {
    expect(signContainer("", grant())).toBe("");
    expect(verifyContainer("", grant(), "")).toBe(true);
    expect(verifyContainer("", grant(), "anything")).toBe(true);
  });
});

describe("container tokens name the submitter", () => {
  it("a grant for one user does not verify for another", () => {
    const token = signContainer(SECRET, grant({ user: "alice" }));
    expect(verifyContainer(SECRET, grant({ user: "alice" }), token)).toBe(true);
    expect(verifyContainer(SECRET, grant({ user: "root" }), token)).toBe(false);
    expect(verifyContainer(SECRET, grant(), token)).toBe(false);
  });
});

describe("AM tokens", () => {
  const app = "application_1700000000000_0001";
  const NOW = 1_700_000_000_000;
  const DAY = 86_400_000;
  const fields = { appId: app, attempt: 2, expiresMs: NOW + DAY };

  it("name the application, attempt and expiry they were signed for, and nothing else", () => {
    const token = signAmToken(SECRET, fields);
    expect(verifyAmToken(SECRET, token, NOW)).toEqual(fields);
    expect(verifyAmToken("another-secret", token, NOW)).toBeUndefined();
    // Moving the token to another application or attempt breaks its signature.
    expect(verifyAmToken(SECRET, token.replace(app, "application_1700000000000_0002"), NOW)).toBeUndefined();
    expect(verifyAmToken(SECRET, token.replace(":2:", ":3:"), NOW)).toBeUndefined();
  });

  it("are refused from their expiry on, and a later expiry written over the signed one breaks the signature", () => {
    const token = signAmToken(SECRET, fields);
    expect(verifyAmToken(SECRET, token, fields.expiresMs - 1)).toEqual(fields);
    expect(verifyAmToken(SECRET, token, fields.expiresMs)).toBeUndefined();
    expect(verifyAmToken(SECRET, token, fields.expiresMs + DAY)).toBeUndefined();
    const extended = token.replace(`:${fields.expiresMs}:`, `:${fields.expiresMs + 365 * DAY}:`);
    expect(extended).not.toBe(token);
    expect(verifyAmToken(SECRET, extended, fields.expiresMs + DAY)).toBeUndefined();
    expect(verifyAmToken(SECRET, extended, NOW)).toBeUndefined();
  });

  it("refuse anything malformed without throwing: non-digits, signs, leading zeros, huge numbers, long strings", () => {
    const token = signAmToken(SECRET, fields);
    const mac = token.slice(-64);
    const bad = [
      "",
      "x",
      token + "0",
      token.slice(0, -1),
      `${app}:2:${fields.expiresMs}:${"g".repeat(64)}`,
      // The old format, without an expiry.
      `${app}:2:${mac}`,
      `${app}:2:0${fields.expiresMs}:${mac}`,
      `${app}:02:${fields.expiresMs}:${mac}`,
      `${app}:2:+${fields.expiresMs}:${mac}`,
      `${app}:2:-1:${mac}`,
      `${app}:2:1e20:${mac}`,
      `${app}:2:${fields.expiresMs}.5:${mac}`,
      `${app}:2:${"9".repeat(16)}:${mac}`,
      `${app}:2:${"9".repeat(400)}:${mac}`,
      `${app}:2:${fields.expiresMs}:${mac}:extra`,
      "a:b:c:d",
      42,
      null,
    ];
    for (const b of bad) expect(verifyAmToken(SECRET, b, NOW)).toBeUndefined();
    expect(verifyAmToken(SECRET, "a".repeat(10_000), NOW)).toBeUndefined();
  });

  it("cannot be signed with an expiry or attempt outside their bounds", () => {
    for (const expiresMs of [-1, 1.5, Number.MAX_SAFE_INTEGER, Infinity, NaN])
      expect(() => signAmToken(SECRET, { ...fields, expiresMs })).toThrow(RangeError);
    expect(() => signAmToken(SECRET, { ...fields, attempt: 1_000_000 })).toThrow(RangeError);
    // The largest expiry round-trips.
    const far = { ...fields, expiresMs: 999_999_999_999_999 };
    expect(verifyAmToken(SECRET, signAmToken(SECRET, far), NOW)).toEqual(far);
  });

  it("are renewed only once less than half their lifetime is left, for the same attempt and a full lifetime", () => {
    const held = { appId: app, attempt: 2, expiresMs: NOW + DAY };
    expect(renewedAmToken(SECRET, held, NOW, DAY)).toBeUndefined();
    // Exactly half left: not yet.
    expect(renewedAmToken(SECRET, held, NOW + DAY / 2, DAY)).toBeUndefined();
    const at = NOW + DAY / 2 + 1;
    const fresh = renewedAmToken(SECRET, held, at, DAY);
    expect(fresh).toBeDefined();
    expect(verifyAmToken(SECRET, fresh, at)).toEqual({ appId: app, attempt: 2, expiresMs: at + DAY });
    // The fresh one outlives the one it replaces.
    expect(verifyAmToken(SECRET, fresh, held.expiresMs + 1)).toBeDefined();
    expect(renewedAmToken("", held, at, DAY)).toBeUndefined();
  });

  it("live as long as the resource manager's amTokenLifetimeMs says: 24 h unless set, a second to 30 days", () => {
    expect(resolveResourceManagerOptions({ dataDir: "/d" }).amTokenLifetimeMs).toBe(DAY);
    expect(resolveResourceManagerOptions({ dataDir: "/d", amTokenLifetimeMs: 5_000 }).amTokenLifetimeMs).toBe(5_000);
    for (const amTokenLifetimeMs of [0, 999, 1_500.5, -DAY, 31 * DAY, NaN, "1000" as unknown as number]) {
      const err = thrown(() => resolveResourceManagerOptions({ dataDir: "/d", amTokenLifetimeMs }));
      expect(err.code).toBe("CONFIG_INVALID");
      expect(err.message).toContain("amTokenLifetimeMs");
    }
  });

  it("are empty and never valid without a secret", () => {
    expect(signAmToken("", fields)).toBe("");
    expect(verifyAmToken("", `${app}:1:${NOW + DAY}:${"0".repeat(64)}`, NOW)).toBeUndefined();
  });
});
