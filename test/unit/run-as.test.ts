/**
 * Containers never run as root: whom a node manager picks for a container, and what a container launched as that
 * account owns, may and may not do. The launches need root (only root switches users) and are skipped otherwise.
 */
import { execFileSync } from "node:child_process";
import {
  chmodSync,
  chownSync,
  copyFileSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { containerProcessFile } from "../../common/container-leftovers.js";
import { detailsOf, isHarvestError } from "../../common/errors.js";
import { detectCgroups } from "../../nodemanager/cgroups.js";
import type { CgroupController } from "../../nodemanager/cgroups.js";
import { ContainerProcess, openContainerLog, PRIVATE_TMP } from "../../nodemanager/container.js";
import { retireApplicationAccount } from "../../nodemanager/retire-account.js";
import type { ContainerSpec } from "../../nodemanager/container.js";
import { resolveNodeManagerOptions } from "../../nodemanager/options.js";
import {
  assertCanEnter,
  assertCanExecute,
  ContainerAccounts,
  fixedContainerAccount,
  handJobDirTo,
  lookupAccount,
  ownAccount,
} from "../../nodemanager/run-as.js";
import type { ContainerAccount } from "../../nodemanager/run-as.js";
import { UidLeases } from "../../nodemanager/uid-leases.js";
import { testGroupName } from "../cgroups.js";
import { waitFor } from "../wait-for.js";
import { nextTestContainerId, TEST_APP_ID, testContainerSpec } from "../containers.js";
import { thrown } from "../error-code.js";

const root = lookupAccount("root")!;
const nobody = lookupAccount("nobody")!;
/** An account of this server that is neither root nor nobody (daemon, bin, ... on any Linux). */
const other = readFileSync("/etc/passwd", "utf8")
  .split("\n")
  .map((line) => lookupAccount(line.split(":")[0] ?? ""))
  .find((a): a is ContainerAccount => a !== undefined && a.uid !== 0 && a.uid !== nobody.uid);

const asRoot = process.getuid?.() === 0;
if (!asRoot) console.log("skipping the container launches of run-as.test.ts: only a root node manager switches users");

describe("UidLeases: the machine's record of container uids", () => {
  it("closes its own directory to others but leaves a parent it makes searchable (a cluster may live below it)", () => {
    const top = mkdtempSync(join(tmpdir(), "harvest-lease-parent-"));
    try {
      const dir = join(top, "var-lib-harvest", "container-uids");
      new UidLeases(dir, { min: 61184, max: 61283 }, { dataDir: top, nodeId: "n1" }).open();
      expect(statSync(dir).mode & 0o777).toBe(0o700);
      // Others may pass through the parent, to a cluster directory beside the leases.
      expect(statSync(dirname(dir)).mode & 0o001).toBe(0o001);
    } finally {
      rmSync(top, { recursive: true, force: true });
    }
  });
});

describe("ContainerAccounts: whom a root node manager runs a container as", () => {
  let leaseDir = "";
  let leases: UidLeases;
  const range = { min: 61184, max: 61283 };
  beforeAll(() => {
    leaseDir = mkdtempSync(join(tmpdir(), "harvest-run-as-leases-"));
    // The real user database, and no process counted (the range may hold other tests' containers).
    leases = new UidLeases(leaseDir, range, { dataDir: leaseDir, nodeId: "n1" }, { processUids: () => new Set() });
  });
  afterAll(() => rmSync(leaseDir, { recursive: true, force: true }));
  const mode = (m: "application" | "submitter", trustSubmitter = true): ContainerAccounts =>
    new ContainerAccounts({ mode: m, fixed: "nobody", minUid: 1, trustSubmitter, leases }, root);

  it("by default gives each application an account of its own, the same for all of its containers", () => {
    const accounts = mode("application");
    expect(accounts.switches).toBe(true);
    const a = accounts.accountFor("application_1_0001", "alice");
    const b = accounts.accountFor("application_1_0002", "alice");
    expect(a.uid).not.toBe(b.uid);
    expect(accounts.accountFor("application_1_0001", "alice")).toEqual(a);
    for (const acc of [a, b]) {
      expect(acc.uid).toBeGreaterThanOrEqual(range.min);
      expect(acc.uid).toBeLessThanOrEqual(range.max);
      expect(acc.gid).toBe(acc.uid);
      // No account of the server's user database.
      expect(readFileSync("/etc/passwd", "utf8")).not.toMatch(new RegExp(`^[^:]*:[^:]*:${acc.uid}:`, "m"));
    }
    expect(accounts.describe().runAs).toContain("an account of the application's own");
  });

  it("never runs a job submitted as root (under any spelling of uid 0) as root, nor as nobody", () => {
    const accounts = mode("submitter");
    for (const [i, name] of ["root", "0", "", "unknown", "../root", "root\n"].entries()) {
      const acc = accounts.accountFor(`application_2_000${i}`, name);
      expect(acc.uid, JSON.stringify(name)).not.toBe(0);
      expect(acc.uid, JSON.stringify(name)).not.toBe(nobody.uid);
    }
  });

  it.skipIf(!other)("runs a job of a submitter with an account on this server as that account, when asked to", () => {
    expect(mode("submitter").accountFor("application_3_0001", other!.name)).toEqual(other);
    // Without tls the submitter's name is only claimed: the application's own account.
    const plaintext = mode("submitter", false);
    expect(plaintext.accountFor("application_3_0002", other!.name).uid).toBeGreaterThanOrEqual(range.min);
    expect(plaintext.describe().runAs).toContain("not authenticated");
    // System accounts below containerMinUid never run jobs.
    const strict = new ContainerAccounts(
      { mode: "submitter", fixed: "nobody", minUid: other!.uid + 1, trustSubmitter: true, leases },
      root,
    );
    expect(strict.accountFor("application_3_0003", other!.name).uid).toBeGreaterThanOrEqual(range.min);
  });

  it("runs every container as one account in fixed mode", () => {
    const fixed = new ContainerAccounts({ mode: "fixed", fixed: "nobody", minUid: 1, trustSubmitter: true }, root);
    expect(fixed.accountFor("application_4_0001", "alice")).toEqual(nobody);
    expect(fixed.accountFor("application_4_0002", "bob")).toEqual(nobody);
    expect(fixed.describe().runAs).toContain("one account for every job");
  });

  it("refuses a fixed account that is root or does not exist (CONFIG_INVALID naming containerUser)", () => {
    for (const fixed of ["root", "no-such-harvest-user"]) {
      const err = thrown(
        () => new ContainerAccounts({ mode: "fixed", fixed, minUid: 1000, trustSubmitter: true }, root),
      );
      expect(err.code).toBe("CONFIG_INVALID");
      expect(detailsOf(err, "INVALID_ARGUMENT", "CONFIG_INVALID")?.field).toBe("containerUser");
    }
  });
});

describe.skipIf(!other)("ContainerAccounts: a node manager that is not root", () => {
  it("runs every container as its own account, whoever submitted the job", () => {
    const accounts = new ContainerAccounts(
      { mode: "application", fixed: "nobody", minUid: 1, trustSubmitter: true },
      other,
    );
    expect(accounts.switches).toBe(false);
    for (const name of ["root", "nobody", "no-such-harvest-user"])
      expect(accounts.accountFor("application_5_0001", name)).toEqual(other);
    expect(accounts.describe().runAs).toContain("not root");
  });
});

describe("node manager options for containers' accounts", () => {
  const base = { nodeId: "n1", rmAddress: "127.0.0.1:1", dataDir: "/d" };

  it("defaults to an account per application from systemd's dynamic range, never nobody", () => {
    const o = resolveNodeManagerOptions(base);
    expect([o.containerRunAs, o.containerUidRange, o.containerPrivateTmp]).toEqual([
      "application",
      "61184-65519",
      true,
    ]);
  });

  it("refuses root (by any name of uid 0) for fixed mode, a bad range or mode and a minimum uid of 0, naming the field", () => {
    const cases: [Record<string, unknown>, string][] = [
      [{ containerRunAs: "fixed", containerUser: "root" }, "containerUser"],
      [{ containerUser: "0" }, "containerUser"],
      [{ containerUser: "no body" }, "containerUser"],
      [{ containerMinUid: 0 }, "containerMinUid"],
      [{ containerRunAs: "nobody" }, "containerRunAs"],
      [{ containerUidRange: "0-100" }, "containerUidRange"],
      [{ containerUidRange: "65000-61184" }, "containerUidRange"],
      [{ containerUidRange: "61184" }, "containerUidRange"],
      [{ containerUidLeaseDir: "relative/dir" }, "containerUidLeaseDir"],
    ];
    for (const [extra, field] of cases) {
      const err = thrown(() => resolveNodeManagerOptions({ ...base, ...extra }));
      expect([err.code, detailsOf(err, "INVALID_ARGUMENT", "CONFIG_INVALID")?.field], JSON.stringify(extra)).toEqual([
        "CONFIG_INVALID",
        field,
      ]);
    }
  });
});

describe.skipIf(!asRoot)("a container launched by a root node manager", () => {
  let tmp = "";
  const groupName = testGroupName("run-as-");
  const cgroups = detectCgroups(groupName, "auto");
  const noCgroups = detectCgroups(`${groupName}-unused`, "none");
  const started: ContainerProcess[] = [];
  const account = fixedContainerAccount("nobody");

  beforeAll(() => {
    tmp = mkdtempSync(join(tmpdir(), "harvest-run-as-"));
    chmodSync(tmp, 0o755);
  });
  afterAll(async () => {
    for (const c of started) c.killNow("KILLED_BY_USER");
    await Promise.all(started.map((c) => c.waitForExit()));
    cgroups.close();
    rmSync(tmp, { recursive: true, force: true });
  });

  function spec(argv: string[], extra: Partial<ContainerSpec> = {}): ContainerSpec {
    const containerId = nextTestContainerId();
    return testContainerSpec(containerId, argv, account, join(tmp, "containers", TEST_APP_ID, containerId), extra);
  }

  async function run(s: ContainerSpec, controller: CgroupController = noCgroups): Promise<ContainerProcess> {
    const c = new ContainerProcess(s, controller, 1_000, () => {});
    started.push(c);
    await c.waitForExit();
    return c;
  }

  const out = (s: ContainerSpec): string => readFileSync(join(s.workDir, "stdout"), "utf8");
  const shadowReadable = (): boolean => {
    try {
      execFileSync("/bin/sh", ["-c", "cat /etc/shadow > /dev/null"], {
        uid: nobody.uid,
        gid: nobody.gid,
        stdio: "ignore",
      });
      return true;
    } catch {
      return false;
    }
  };

  it("runs as the fallback account with its own HOME, USER and LOGNAME, its primary group only, and no_new_privs", async () => {
    expect(account).toEqual(nobody);
    const s = spec([
      "/bin/sh",
      "-c",
      'id -u; id -G; echo "$HOME $USER $LOGNAME"; grep NoNewPrivs /proc/self/status || echo "NoNewPrivs: ?"',
    ]);
    const c = await run(s);
    expect(c.cause, c.diagnostics).toBe("SUCCEEDED");
    const [uid, groups, who, noNewPrivs] = out(s).trim().split("\n");
    expect(Number(uid)).toBe(nobody.uid);
    expect(groups?.split(" ").map(Number)).toEqual([nobody.gid]);
    expect(who).toBe(`${nobody.home} nobody nobody`);
    if (existsSync("/usr/bin/setpriv") || existsSync("/bin/setpriv")) expect(noNewPrivs).toMatch(/NoNewPrivs:\s+1/);
  });

  it.skipIf(cgroups.mode === "none")(
    `runs as the fallback account inside its own cgroup (${cgroups.mode})`,
    async () => {
      const s = spec(["/bin/sh", "-c", "id -u; cat /proc/self/cgroup"]);
      const c = await run(s, cgroups);
      expect(c.cause, c.diagnostics).toBe("SUCCEEDED");
      const [uid, ...groups] = out(s).trim().split("\n");
      expect(Number(uid)).toBe(nobody.uid);
      expect(groups.join("\n")).toContain(`/${groupName}/${s.containerId}`);
    },
  );

  it("gives the work directory (0700) and its logs and pid file to the account; the launch record stays root's, outside", async () => {
    const s = spec(["/bin/sh", "-c", "echo hello; touch mine"]);
    const c = await run(s);
    expect(c.cause, c.diagnostics).toBe("SUCCEEDED");
    const dir = statSync(s.workDir);
    expect([dir.uid, dir.gid, dir.mode & 0o777]).toEqual([nobody.uid, nobody.gid, 0o700]);
    for (const f of ["stdout", "stderr", "pid", "mine"]) expect(statSync(join(s.workDir, f)).uid, f).toBe(nobody.uid);
    const record = containerProcessFile(s.workDir);
    expect(dirname(record)).toBe(dirname(s.workDir));
    expect(statSync(record).uid).toBe(0);
    expect(statSync(dirname(record)).uid).toBe(0);
    expect(statSync(dirname(record)).mode & 0o022).toBe(0);
  });

  it("refuses to run a container as root, and starts nothing", () => {
    const s = spec(["/bin/sh", "-c", "touch started"], { account: root });
    const err = thrown(() => new ContainerProcess(s, noCgroups, 1_000, () => {}));
    expect(err.code).toBe("CONTAINER_LAUNCH_FAILED");
    expect(existsSync(s.workDir)).toBe(false);
  });

  it("fails the launch naming the directory the account cannot enter", () => {
    const closed = mkdtempSync(join(tmp, "closed-"));
    const s = spec(["/bin/true"], { workDir: join(closed, "containers", "app", "c1") });
    let err: unknown;
    try {
      new ContainerProcess(s, noCgroups, 1_000, () => {});
    } catch (e) {
      err = e;
    }
    expect(isHarvestError(err, "CONTAINER_LAUNCH_FAILED")).toBe(true);
    expect((err as Error).message).toContain(`cannot enter ${closed} (mode 700, owner uid 0)`);
  });

  it("checks that the account can run the Node binary: an nvm install under a mode-700 home is refused, naming it", () => {
    const home = mkdtempSync(join(tmp, "home-"));
    const hidden = join(home, ".nvm", "bin");
    mkdirSync(hidden, { recursive: true });
    copyFileSync("/bin/true", join(hidden, "node")); // a small program stands in for Node
    chmodSync(join(hidden, "node"), 0o755);
    const err = thrown(() => assertCanExecute(join(hidden, "node"), nobody, "the Node binary"));
    expect(err.code).toBe("CONTAINER_LAUNCH_FAILED");
    expect(err.message).toContain(`cannot enter ${home} (mode 700, owner uid 0)`);
    expect(err.message).toContain(join(hidden, "node"));
    const shared = mkdtempSync(join(tmp, "shared-"));
    chmodSync(shared, 0o755);
    copyFileSync("/bin/true", join(shared, "node"));
    chmodSync(join(shared, "node"), 0o755);
    expect(() => assertCanExecute(join(shared, "node"), nobody, "the Node binary")).not.toThrow();
    chmodSync(join(shared, "node"), 0o744);
    const notExecutable = thrown(() => assertCanExecute(join(shared, "node"), nobody, "the Node binary"));
    expect(notExecutable.message).toContain(`cannot execute the Node binary ${join(shared, "node")}`);
  });

  it("follows symbolic links on the way to a directory with the account's rights only, and says nothing past them", () => {
    const closed = mkdtempSync(join(tmp, "closed-link-"));
    mkdirSync(join(closed, "inside"));
    const toClosed = join(tmp, "to-closed");
    symlinkSync(join(closed, "inside"), toClosed);
    const open = mkdtempSync(join(tmp, "open-"));
    chmodSync(open, 0o755);
    const toOpen = join(tmp, "to-open");
    symlinkSync(open, toOpen);
    expect(() => assertCanEnter(toOpen, nobody, "a directory")).not.toThrow();
    const err = thrown(() => assertCanEnter(join(toClosed, "missing"), nobody, "a directory"));
    expect(err.code).toBe("CONTAINER_LAUNCH_FAILED");
    expect(err.message).toContain(`cannot enter ${toClosed}`);
    expect(err.message).not.toContain(closed);
  });

  it("cannot act as root: reading /etc/shadow, writing a root-only directory and setuid(0) all fail", async () => {
    const rootOnly = mkdtempSync(join(tmp, "root-only-"));
    expect(statSync(rootOnly).mode & 0o777).toBe(0o700);
    const attempts = [
      ["/bin/sh", "-c", "cat /etc/shadow"],
      ["/bin/sh", "-c", `echo pwned > ${rootOnly}/pwned`],
      ["node", "-e", "process.setuid(0)"],
    ];
    for (const argv of attempts) {
      const c = await run(spec(argv));
      expect(c.cause, argv.join(" ")).toBe("FAILED");
    }
    expect(existsSync(join(rootOnly, "pwned"))).toBe(false);
    expect(shadowReadable()).toBe(false);
  });

  it("never lets the node manager read another file through what the container leaves in place of its logs", async () => {
    const s = spec(["/bin/sh", "-c", "rm stdout stderr && ln -s /etc/shadow stdout && mkfifo stderr"]);
    const c = await run(s);
    expect(c.cause, c.diagnostics).toBe("SUCCEEDED");
    for (const stream of ["stdout", "stderr"] as const) {
      const err = await openContainerLog(s.workDir, stream).then(
        async (fh) => {
          await fh.close();
          return undefined;
        },
        (e: unknown) => e,
      );
      expect(err, stream).toBeDefined();
    }
  });

  describe("the job's staging directory", () => {
    let nmDataDir = "";
    beforeAll(() => {
      nmDataDir = join(tmp, "nm");
      mkdirSync(join(nmDataDir, "containers", "application_1700000000000_0002"), { recursive: true });
      writeFileSync(join(nmDataDir, "containers", "application_1700000000000_0002", "dag.json"), "{}");
    });

    function jobDir(appId: string, dag = true): string {
      const dir = join(tmp, "staging", appId);
      mkdirSync(dir, { recursive: true });
      if (dag) writeFileSync(join(dir, "dag.json"), "{}", { mode: 0o644 });
      return dir;
    }

    it("is handed to the account (0700), its dag.json left as the resource manager wrote it", () => {
      const dir = jobDir(TEST_APP_ID);
      handJobDirTo(dir, nobody, nmDataDir);
      const st = statSync(dir);
      expect([st.uid, st.gid, st.mode & 0o777]).toEqual([nobody.uid, nobody.gid, 0o700]);
      expect(statSync(join(dir, "dag.json")).uid).toBe(0);
      // Again (a second job-manager attempt): nothing changes.
      handJobDirTo(dir, nobody, nmDataDir);
      expect(statSync(dir).mode & 0o777).toBe(0o700);
    });

    it("is taken over by a later attempt's account with what the earlier one wrote, never through a link", () => {
      const dir = jobDir("application_1700000000000_0009");
      const earlier = { name: "harvest-61990", uid: 61990, gid: 61990, home: "" };
      const later = { name: "harvest-61991", uid: 61991, gid: 61991, home: "" };
      handJobDirTo(dir, earlier, nmDataDir);
      writeFileSync(join(dir, "journal.jsonl"), "{}\n", { mode: 0o600 });
      chownSync(join(dir, "journal.jsonl"), earlier.uid, earlier.gid);
      const outside = join(tmp, "root-owned");
      writeFileSync(outside, "root's");
      symlinkSync(outside, join(dir, "link"));
      handJobDirTo(dir, later, nmDataDir);
      expect(statSync(dir).uid).toBe(later.uid);
      expect(statSync(join(dir, "journal.jsonl")).uid).toBe(later.uid);
      expect(statSync(join(dir, "dag.json")).uid).toBe(0);
      expect(statSync(outside).uid).toBe(0);
    });

    it("is refused when it is a symbolic link, holds no dag.json, lies in the node manager's data, or is relative", () => {
      const target = mkdtempSync(join(tmp, "target-"));
      writeFileSync(join(target, "dag.json"), "{}");
      mkdirSync(join(tmp, "staging"), { recursive: true });
      const link = join(tmp, "staging", "application_1700000000000_0003");
      symlinkSync(target, link);
      const cases = [
        link,
        jobDir("application_1700000000000_0004", false),
        join(nmDataDir, "containers", "application_1700000000000_0002"),
        "staging/application_1700000000000_0005",
      ];
      for (const dir of cases) {
        const err = thrown(() => handJobDirTo(dir, nobody, nmDataDir));
        expect(err.code, dir).toBe("CONTAINER_LAUNCH_FAILED");
      }
      expect(statSync(target).uid).toBe(0);
      expect(statSync(join(nmDataDir, "containers", "application_1700000000000_0002")).uid).toBe(0);
    });

    it("is refused with the directory named when the account cannot get to it", () => {
      const closed = mkdtempSync(join(tmp, "closed-staging-"));
      const dir = join(closed, "application_1700000000000_0006");
      mkdirSync(dir);
      writeFileSync(join(dir, "dag.json"), "{}");
      const err = thrown(() => handJobDirTo(dir, nobody, nmDataDir));
      expect(err.message).toContain(`cannot enter ${closed}`);
      expect(thrown(() => assertCanEnter(dir, nobody, "the staging directory")).message).toContain(closed);
      expect(() => assertCanEnter(dir, ownAccount(), "the staging directory")).not.toThrow();
    });
  });
});

describe.skipIf(!asRoot || !PRIVATE_TMP)("containers of two applications, each under an account of its own", () => {
  let tmp = "";
  let leases: UidLeases;
  const noCgroups = detectCgroups(`${testGroupName("run-as-apps-")}-unused`, "none");
  const started: ContainerProcess[] = [];
  const appA = "application_1700000000000_0041";
  const appB = "application_1700000000000_0042";
  beforeAll(() => {
    tmp = mkdtempSync(join(tmpdir(), "harvest-run-as-apps-"));
    chmodSync(tmp, 0o755);
    leases = new UidLeases(join(tmp, "leases"), { min: 61184, max: 65519 }, { dataDir: tmp, nodeId: "n1" });
    leases.open();
  });
  afterAll(async () => {
    for (const c of started) c.killNow("KILLED_BY_USER");
    await Promise.all(started.map((c) => c.waitForExit()));
    for (const app of [appA, appB]) leases.release(app);
    rmSync(tmp, { recursive: true, force: true });
  });
  const accounts = (): ContainerAccounts =>
    new ContainerAccounts({ mode: "application", fixed: "nobody", minUid: 1000, trustSubmitter: true, leases });

  function launch(appId: string, script: string): { c: ContainerProcess; s: ContainerSpec } {
    const containerId = `container_${appId.slice("application_".length)}_01_000001`;
    const s = testContainerSpec(
      containerId,
      ["/bin/sh", "-c", script],
      accounts().accountFor(appId, "alice"),
      join(tmp, "containers", appId, containerId),
      { appId, privateTmp: { keep: [tmp] } },
    );
    const c = new ContainerProcess(s, noCgroups, 1_000, () => {});
    started.push(c);
    return { c, s };
  }

  it("keeps each one's /tmp, /dev/shm, files and processes from the other, and retiring leaves nothing of it", async () => {
    const marker = `harvest-private-${process.pid}`;
    const a = launch(
      appA,
      `echo a-secret > /tmp/${marker}; echo a-shm > /dev/shm/${marker}; id -u; echo "$TMPDIR"; ` +
        "grep ' /dev/shm ' /proc/self/mounts | tail -n 1 | cut -d' ' -f1; exec sleep 30",
    );
    // B knows where A's files are and which pid A has, as any process of the server can learn.
    const aTmp = join(a.s.workDir, "tmp", marker);
    await waitFor(() => existsSync(aTmp), { what: "A's file in its /tmp", timeoutMs: 10_000 });
    const b = launch(
      appB,
      `id -u; cat /tmp/${marker} /dev/shm/${marker} /tmp/../tmp/${marker} 2>&1; cat ${aTmp} 2>&1; ` +
        `cat /proc/${a.c.pid}/environ 2>&1 | head -c 100; kill -0 ${a.c.pid} 2>&1 || echo no-signal`,
    );
    await b.c.waitForExit();
    const [aUid] = readFileSync(join(a.s.workDir, "stdout"), "utf8").trim().split("\n");
    const bOut = readFileSync(join(b.s.workDir, "stdout"), "utf8");
    const [bUid] = bOut.trim().split("\n");
    expect(Number(aUid)).toBe(a.s.account.uid);
    expect(Number(bUid)).toBe(b.s.account.uid);
    expect(aUid).not.toBe(bUid);
    expect(bOut).not.toContain("a-secret");
    expect(bOut).not.toContain("a-shm");
    expect(bOut).toContain("Permission denied");
    expect(bOut).toContain("no-signal");
    // Nothing of A reached the server's own /tmp or /dev/shm.
    expect(existsSync(`/tmp/${marker}`) || existsSync(`/dev/shm/${marker}`)).toBe(false);
    const aOut = readFileSync(join(a.s.workDir, "stdout"), "utf8").trim().split("\n");
    // TMPDIR is /tmp, and /dev/shm a tmpfs of its own (the last mount there).
    expect(aOut.slice(1)).toEqual(["/tmp", "harvest-shm"]);
    expect(a.c.state).toBe("RUNNING");

    a.c.kill("KILLED_BY_USER", 100);
    await a.c.waitForExit();
    const uid = a.s.account.uid;
    const r = retireApplicationAccount(tmp, appA, uid);
    expect(r.processesLeft).toBe(0);
    expect(existsSync(join(a.s.workDir, "tmp"))).toBe(false);
    // Its logs stay, the node manager's now: a later application given this uid reads none of them.
    expect(statSync(join(a.s.workDir, "stdout")).uid).toBe(0);
    expect(statSync(a.s.workDir).uid).toBe(0);
  });
});

describe("lookupAccount", () => {
  it("asks the system's getent, never one that comes first on PATH", () => {
    const dir = mkdtempSync(join(tmpdir(), "harvest-fake-getent-"));
    // A getent planted in a folder on PATH (npx puts every parent's node_modules/.bin there) claims nobody is root.
    writeFileSync(join(dir, "getent"), "#!/bin/sh\necho 'nobody:x:0:0::/root:/bin/sh'\n", { mode: 0o755 });
    const saved = process.env["PATH"];
    process.env["PATH"] = `${dir}:${saved ?? ""}`;
    try {
      expect(execFileSync("getent", ["passwd", "nobody"], { encoding: "utf8" })).toContain("nobody:x:0:0");
      expect(lookupAccount("nobody")?.uid).toBe(nobody.uid);
      expect(lookupAccount("nobody")?.uid).not.toBe(0);
    } finally {
      process.env["PATH"] = saved;
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
