/** `harvest security init|issue` as an operator runs them: a CA, certificates by role, refusals that say why. */
import { X509Certificate } from "node:crypto";
import { cpSync, existsSync, mkdtempSync, readFileSync, rmSync, statSync } from "node:fs";
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

  it("writes a person's client bundle that harvest reads from ~/.harvest, and says so when it knows no cluster", () => {
    const home = join(dir, "home-alice");
    const noCluster = { HOME: home, HARVEST_CONF: "", HARVEST_CLUSTER_DIR: "" };
    const r = runHarvest(
      ["security", "issue", "--dir", ca, "--name", "alice2", "--role", "user", "--rm-address", "127.0.0.1:8032"],
      { env: noCluster, timeoutMs: 60_000 },
    );
    expect(r.code, r.stderr).toBe(0);
    const bundle = join(ca, "users", "alice2");
    expect(r.stdout).toContain(`cp -p ${bundle}/* ~/.harvest/`);
    expect(JSON.parse(readFileSync(join(bundle, "client.json"), "utf8"))).toEqual({
      rmAddress: "127.0.0.1:8032",
      ca: "ca.pem",
      cert: "alice2.pem",
      key: "alice2-key.pem",
    });
    expect(statSync(bundle).mode & 0o777).toBe(0o700);
    expect(statSync(join(bundle, "alice2-key.pem")).mode & 0o777).toBe(0o600);
    // Copied to ~/.harvest, it is what harvest reads with no flag (here it names no namenode, and says where).
    cpSync(bundle, join(home, ".harvest"), { recursive: true });
    const ls = runHarvest(["fs", "ls"], { env: noCluster });
    expect(ls.stderr).toContain(`${join(home, ".harvest", "client.json")} names no namenode`);
    // With no address and no cluster of this CA to be found: the certificate, and what to add for the rest.
    const elsewhere = { ...noCluster, HOME: join(dir, "home-operator") };
    const bare = runHarvest(["security", "issue", "--dir", ca, "--name", "bob", "--role", "user"], { env: elsewhere });
    expect(bare.code, bare.stderr).toBe(0);
    expect(bare.stdout).toContain("no client configuration written");
    expect(existsSync(join(ca, "users", "bob", "bob-key.pem"))).toBe(true);
    expect(existsSync(join(ca, "users", "bob", "client.json"))).toBe(false);
  });

  it("refuses an unknown role, a daemon without hosts, a bad name and a missing CA, saying why", () => {
    const cases: [string[], string][] = [
      [["--name", "x", "--role", "wizard"], "--role"],
      [["--name", "n1", "--role", "daemon"], "--host"],
      [["--name", "../etc", "--role", "user"], "bad name"],
      [["--name", "ca", "--role", "user"], "would overwrite or leave"],
      [["--name", "..", "--role", "user"], "would overwrite or leave"],
      [["--name", "eve", "--role", "user", "--out", ca], "--out"],
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
