/**
 * The pure parts of keeping containers' logs: where a kept log lives, which applications' logs the retention removes,
 * and the node web tokens the job page links to the node managers'
 * log pages with (valid on every node manager of the cluster, on no other cluster, and never for an unchecked claim).
 */
import { describe, expect, it } from "vitest";
import { appLogDir, containerLogPath, expiredLogDirs, userLogRoot } from "../../common/container-logs.js";
import { ManualClock } from "../../common/clock.js";
import { NODE_WEB_TOKEN_LIFETIME_MS, NodeWebTokens } from "../../common/node-web-token.js";
import { WebTokens } from "../../common/web-token.js";

const HOUR = 3600_000;

describe("kept container logs", () => {
  it("live in the submitter's home, one directory per application and container", () => {
    expect(userLogRoot("alice")).toBe("/user/alice/.logs");
    expect(appLogDir("alice", "application_1_0001")).toBe("/user/alice/.logs/application_1_0001");
    expect(containerLogPath("alice", "application_1_0001", "container_1_0001_01_000002", "stderr")).toBe(
      "/user/alice/.logs/application_1_0001/container_1_0001_01_000002/stderr",
    );
  });

  it("are removed once their application's directory was last written longer ago than the retention", () => {
    const now = 1_000 * HOUR;
    const entries = [
      { path: "/user/a/.logs/app_old", isDir: true, mtimeMs: now - 169 * HOUR },
      { path: "/user/a/.logs/app_edge", isDir: true, mtimeMs: now - 168 * HOUR },
      { path: "/user/a/.logs/app_new", isDir: true, mtimeMs: now - HOUR },
      { path: "/user/a/.logs/stray-file", isDir: false, mtimeMs: now - 500 * HOUR },
    ];
    expect(expiredLogDirs(entries, now, 168 * HOUR)).toEqual(["/user/a/.logs/app_old"]);
    expect(expiredLogDirs(entries, now, 2 * HOUR)).toEqual(["/user/a/.logs/app_old", "/user/a/.logs/app_edge"]);
    // 0 keeps them forever.
    expect(expiredLogDirs(entries, now, 0)).toEqual([]);
  });
});

describe("node web tokens", () => {
  const clock = new ManualClock(1_000_000);
  const tokens = new NodeWebTokens("cluster-secret", clock);

  it("name the viewer on every node manager of the cluster, for an hour", () => {
    const token = tokens.issue({ name: "alice", role: "user", via: "token" })!;
    const elsewhere = new NodeWebTokens("cluster-secret", clock);
    expect(elsewhere.verify(token)).toEqual({ name: "alice", role: "user", via: "token" });
    clock.advance(NODE_WEB_TOKEN_LIFETIME_MS + 1);
    expect(elsewhere.verify(token)).toBeUndefined();
  });

  it("are refused by another cluster, and a daemon's own web token is no node web token", () => {
    const token = tokens.issue({ name: "admin", role: "admin", via: "certificate" })!;
    expect(new NodeWebTokens("another-secret", clock).verify(token)).toBeUndefined();
    const rmToken = new WebTokens(Buffer.alloc(32, 7), clock).issue(
      { name: "alice", role: "user", via: "certificate" },
      HOUR,
    ).token;
    expect(tokens.verify(rmToken)).toBeUndefined();
    expect(tokens.verify("n1.garbage.sig")).toBeUndefined();
  });

  it("are never issued for an unchecked claim or a job manager", () => {
    expect(tokens.issue({ name: "mallory", role: "admin", via: "claim" })).toBeUndefined();
    expect(tokens.issue({ name: "app_1", role: "am", via: "token", appId: "app_1" })).toBeUndefined();
  });
});
