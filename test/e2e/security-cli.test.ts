/** `harvest security init|issue` as an operator runs them: a CA, certificates by role, refusals that say why. */
import { X509Certificate } from "node:crypto";
import { mkdtempSync, readFileSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { identityOfCertificate } from "../../common/tls.js";
import { runHarvest } from "../processes.js";
import type { CliRun } from "../processes.js";
import { requireBuild } from "../integration/harness.js";

const dir = mkdtempSync(join(tmpdir(), "harvest-security-cli-"));
const ca = join(dir, "ca");

function harvest(...args: string[]): CliRun {
  return runHarvest(args, { timeoutMs: 60_000 });
}

describe("harvest security", () => {
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it("creates a CA whose key only its owner can read, and never replaces it", () => {
    requireBuild();
    const init = harvest("security", "init", "--dir", ca);
    expect(init.code, init.stderr).toBe(0);
    expect(statSync(join(ca, "ca-key.pem")).mode & 0o077).toBe(0);
    const again = harvest("security", "init", "--dir", ca);
    expect(again.code).toBe(1);
    expect(again.stderr).toContain("CA_EXISTS");
  });

  it("issues a daemon certificate for its hosts and a user certificate, both chaining to the CA", () => {
    const d = harvest(
      "security",
      "issue",
      "--dir",
      ca,
      "--name",
      "server-7",
      "--role",
      "daemon",
      "--host",
      "10.1.2.7",
      "s7.example.net",
      "--out",
      join(dir, "out"),
      "--json",
    );
    expect(d.code, d.stderr).toBe(0);
    const u = harvest("security", "issue", "--dir", ca, "--name", "alice", "--role", "user", "--out", join(dir, "out"));
    expect(u.code, u.stderr).toBe(0);
    const caCert = new X509Certificate(readFileSync(join(ca, "ca.pem")));
    const daemon = new X509Certificate(readFileSync(join(dir, "out", "server-7.pem")));
    const user = new X509Certificate(readFileSync(join(dir, "out", "alice.pem")));
    expect(daemon.verify(caCert.publicKey) && user.verify(caCert.publicKey)).toBe(true);
    expect(daemon.checkIP("10.1.2.7")).toBe("10.1.2.7");
    expect(daemon.checkHost("s7.example.net")).toBe("s7.example.net");
    expect(daemon.checkIP("10.1.2.8")).toBeUndefined();
    const subject = (c: X509Certificate): Record<string, string> =>
      Object.fromEntries(c.subject.split("\n").map((l) => l.split("=") as [string, string]));
    expect(identityOfCertificate({ subject: subject(daemon) })).toEqual({ name: "server-7", role: "daemon" });
    expect(identityOfCertificate({ subject: subject(user) })).toEqual({ name: "alice", role: "user" });
    expect(statSync(join(dir, "out", "alice-key.pem")).mode & 0o077).toBe(0);
  });

  it("refuses an unknown role, a daemon without hosts, a bad name and a missing CA, saying why", () => {
    const cases: [string[], string][] = [
      [["--name", "x", "--role", "wizard"], "--role"],
      [["--name", "n1", "--role", "daemon"], "--host"],
      [["--name", "../etc", "--role", "user"], "bad name"],
    ];
    for (const [args, why] of cases) {
      const r = harvest("security", "issue", "--dir", ca, ...args);
      expect(r.code, args.join(" ")).toBe(1);
      expect(r.stderr, args.join(" ")).toContain(why);
    }
    const none = harvest("security", "issue", "--dir", join(dir, "nowhere"), "--name", "a", "--role", "user");
    expect(none.stderr).toContain("CA_NOT_FOUND");
  });
});
