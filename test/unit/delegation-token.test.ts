import { mkdtempSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { DelegationTokens } from "../../common/delegation-token.js";

const DAY = 86_400_000;
const dir = mkdtempSync(join(tmpdir(), "harvest-dt-"));

afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe("delegation tokens", () => {
  const tokens = new DelegationTokens(Buffer.alloc(32, 7), 7 * DAY);

  it("carry their owner until they expire, and no longer", () => {
    const { token, expiresMs } = tokens.issue("alice", 1_000, DAY);
    expect(expiresMs).toBe(1_000 + DAY);
    expect(tokens.verify(token, 2_000)?.owner).toBe("alice");
    expect(tokens.verify(token, expiresMs)).toBeUndefined();
  });

  it("are issued for at most the maximum lifetime", () => {
    expect(tokens.issue("alice", 0, 30 * DAY).expiresMs).toBe(7 * DAY);
    expect(tokens.issue("alice", 0).expiresMs).toBe(7 * DAY);
  });

  it("cannot be forged, edited or moved to another key", () => {
    const { token } = tokens.issue("alice", 0, DAY);
    const [v, body, mac] = token.split(".") as [string, string, string];
    const claims = JSON.parse(Buffer.from(body, "base64url").toString()) as Record<string, unknown>;
    const asAdmin = Buffer.from(JSON.stringify({ ...claims, owner: "admin" })).toString("base64url");
    expect(tokens.verify(`${v}.${asAdmin}.${mac}`, 1)).toBeUndefined();
    expect(new DelegationTokens(Buffer.alloc(32, 8), DAY).verify(token, 1)).toBeUndefined();
    for (const bad of ["", "d1..", "d1.x.y", token + "x", `d2.${body}.${mac}`, 7, undefined, "d1.".repeat(1000)])
      expect(tokens.verify(bad, 1)).toBeUndefined();
  });

  it("name the job they were issued for, and no job when none was given", () => {
    const { token } = tokens.issue("alice", 0, DAY, { job: "application_1_0007" });
    expect(tokens.verify(token, 1)).toMatchObject({ owner: "alice", job: "application_1_0007" });
    expect(tokens.verify(tokens.issue("alice", 0).token, 1)?.job).toBeUndefined();
  });

  it("are refused once cancelled, while check still tells a cancelled token from a forged or expired one", () => {
    const cancelled = new Set<string>();
    const cancellable = new DelegationTokens(Buffer.alloc(32, 7), 7 * DAY, "d1", (c) => cancelled.has(c.nonce));
    const { token } = cancellable.issue("alice", 0, DAY, { job: "application_1_0001" });
    const other = cancellable.issue("alice", 0, DAY, { job: "application_1_0002" }).token;
    cancelled.add(cancellable.verify(token, 1)!.nonce);
    expect(cancellable.verify(token, 1)).toBeUndefined();
    expect(cancellable.check(token, 1)).toMatchObject({ cancelled: true, claims: { job: "application_1_0001" } });
    expect(cancellable.verify(other, 1)?.job).toBe("application_1_0002");
    expect(cancellable.check(token, DAY)).toBeUndefined();
    expect(cancellable.check(token.slice(0, -2), 1)).toBeUndefined();
  });

  it("differ for one owner, so one can be told from another", () => {
    expect(tokens.issue("alice", 0).token).not.toBe(tokens.issue("alice", 0).token);
  });

  it("keep their key in a 0600 file, so tokens outlive a namenode restart", () => {
    const file = join(dir, "delegation.key");
    const first = DelegationTokens.keyFromFile(file);
    expect(statSync(file).mode & 0o777).toBe(0o600);
    const { token } = new DelegationTokens(first, DAY).issue("bob", 0);
    const again = new DelegationTokens(DelegationTokens.keyFromFile(file), DAY);
    expect(again.verify(token, 1)?.owner).toBe("bob");
  });
});
