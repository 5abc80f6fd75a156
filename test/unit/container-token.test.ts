import { describe, expect, it } from "vitest";
import type { TokenFields } from "../../common/container-token.js";
import { signAmToken, signContainer, verifyAmToken, verifyContainer } from "../../common/container-token.js";

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

  it("name the application and attempt they were signed for, and nothing else", () => {
    const token = signAmToken(SECRET, { appId: app, attempt: 2 });
    expect(verifyAmToken(SECRET, token)).toEqual({ appId: app, attempt: 2 });
    expect(verifyAmToken("another-secret", token)).toBeUndefined();
    // Moving the token to another application or attempt breaks its signature.
    expect(verifyAmToken(SECRET, token.replace(app, "application_1700000000000_0002"))).toBeUndefined();
    expect(verifyAmToken(SECRET, token.replace(":2:", ":3:"))).toBeUndefined();
  });

  it("refuse anything malformed without throwing", () => {
    const token = signAmToken(SECRET, { appId: app, attempt: 1 });
    for (const bad of ["", "x", token + "0", token.slice(0, -1), `${app}:1:${"g".repeat(64)}`, "a:b:c", 42, null])
      expect(verifyAmToken(SECRET, bad)).toBeUndefined();
    expect(verifyAmToken(SECRET, "a".repeat(10_000))).toBeUndefined();
  });

  it("are empty and never valid without a secret", () => {
    expect(signAmToken("", { appId: app, attempt: 1 })).toBe("");
    expect(verifyAmToken("", `${app}:1:${"0".repeat(64)}`)).toBeUndefined();
  });
});
