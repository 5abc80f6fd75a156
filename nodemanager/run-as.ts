/**
 * Whom a container runs as: never root. A node manager running as root starts each container as an unprivileged
 * account (as YARN's LinuxContainerExecutor). By default ("application") every application has an account of its own
 * on each server: a uid, with the same gid, leased from a range no account in the user database uses (uid-leases.ts;
 * systemd's DynamicUser), so no two jobs, even of one user, can read each other's processes or files or signal each
 * other. "submitter" runs a job as its submitter's own account when the submitter is authenticated (TLS) and has an
 * account here that is a person's (uid at or above `containerMinUid`), else as the application's own (YARN's secure
 * mode). "fixed" runs every container as one account, `containerUser` (YARN's `nonsecure-mode.local-user`): jobs can
 * reach each other there. A node manager that is not root cannot switch users: its containers run as itself.
 *
 * Also here: the checks that an account can reach the directories its container needs (a clear launch failure naming
 * the directory instead of an EACCES from deep inside a task), and handing a job's staging directory to its account.
 */
import { spawnSync } from "node:child_process";
import {
  accessSync,
  closeSync,
  constants,
  existsSync,
  fchmodSync,
  fchownSync,
  fstatSync,
  lchownSync,
  lstatSync,
  openSync,
  readdirSync,
  readFileSync,
  realpathSync,
} from "node:fs";
import type { Stats } from "node:fs";
import { userInfo } from "node:os";
import { dirname, isAbsolute, join, parse, relative, resolve, sep } from "node:path";
import { errorMessage, HarvestError } from "../common/errors.js";
import { invalidOption } from "../common/options.js";
import { GETENT_PATHS } from "./uid-leases.js";
import type { UidLeases } from "./uid-leases.js";

/** A local account a container runs as. */
export interface ContainerAccount {
  name: string;
  uid: number;
  /** Its primary group: the container runs with this group only (no supplementary groups, see ContainerProcess). */
  gid: number;
  /** Its home directory (the container's HOME), from the user database; "" for a leased account (HOME is then the
   * container's work directory). */
  home: string;
}

/** Account names this module looks up (POSIX portable names; never a number, which getent reads as a uid). */
const ACCOUNT_NAME = /^[A-Za-z_][A-Za-z0-9_.-]{0,31}\$?$/;

/** Whether `name` is a well-formed account name. */
export function isAccountName(name: string): boolean {
  return ACCOUNT_NAME.test(name);
}

/**
 * The account named `name` in the server's user database (`getent passwd`, so LDAP and other NSS sources count; plain
 * /etc/passwd where there is no getent), or undefined when there is none or the name is not an account name.
 */
export function lookupAccount(name: string): ContainerAccount | undefined {
  if (!isAccountName(name)) return undefined;
  // By absolute path: the node manager runs as root, and its PATH may name folders anyone can write.
  const getent = GETENT_PATHS.find((p) => existsSync(p));
  const r = getent
    ? spawnSync(getent, ["passwd", name], { encoding: "utf8", stdio: ["ignore", "pipe", "ignore"] })
    : undefined;
  const lines = !r || r.error ? readFileSync("/etc/passwd", "utf8") : r.stdout;
  for (const line of lines.split("\n")) {
    const [user, , uid, gid, , home] = line.split(":");
    if (user === name && /^\d+$/.test(uid ?? "") && /^\d+$/.test(gid ?? ""))
      return { name, uid: Number(uid), gid: Number(gid), home: home || "/" };
  }
  return undefined;
}

/** The account this process runs as (named by its uid when the user database has no entry for it). */
export function ownAccount(): ContainerAccount {
  try {
    const me = userInfo();
    return { name: me.username, uid: me.uid, gid: me.gid, home: me.homedir };
  } catch {
    const uid = process.getuid?.() ?? -1;
    return { name: String(uid), uid, gid: process.getgid?.() ?? -1, home: process.env["HOME"] ?? "/" };
  }
}

/** How a root node manager picks the account of a job's containers (its `containerRunAs`). */
export type RunAsMode = "application" | "submitter" | "fixed";

/** What `ContainerAccounts` decides by. */
export interface ContainerAccountPolicy {
  /**
   * "application": every application an account of its own, a uid leased from `leases` (the default); "submitter":
   * the submitter's own account when it has one here (YARN's secure mode), else the application's own; "fixed":
   * every container runs as `fixed` (YARN's non-secure local user: jobs can reach each other).
   */
  mode: RunAsMode;
  /** The one account of "fixed" (the node manager's `containerUser`). */
  fixed: string;
  /** The lowest uid of a submitter's own account; system accounts below it are never used. */
  minUid: number;
  /** Whether submitter names are authenticated (TLS): a claimed name never picks an account. */
  trustSubmitter: boolean;
  /** The host's uid leases ("application" and "submitter"); required for them on a root node manager. */
  leases?: UidLeases;
}

/** The name a leased account goes by in logs and HOME-less tools (it has no entry in the user database). */
export function leasedAccountName(uid: number): string {
  return `harvest-${uid}`;
}

/** Decides the account of each container on one node manager. */
export class ContainerAccounts {
  /** Whether containers run as other accounts than the node manager's own (it is root). */
  readonly switches: boolean;
  private readonly fixed: ContainerAccount | undefined;

  /**
   * @param self the node manager's own account (`ownAccount()`); tests pass another to see a non-root node manager.
   * @throws CONFIG_INVALID when the node manager is root and, in "fixed" mode, the account does not exist, is root or
   * is in group root, or, in the other modes, no lease directory was given.
   */
  constructor(
    private readonly policy: ContainerAccountPolicy,
    readonly self: ContainerAccount = ownAccount(),
  ) {
    this.switches = self.uid === 0;
    this.fixed = this.switches && policy.mode === "fixed" ? checkedFixed(policy.fixed) : undefined;
    if (this.switches && policy.mode !== "fixed" && !policy.leases)
      invalidOption("node manager", "containerRunAs", `${policy.mode} needs a uid lease directory`);
  }

  /**
   * An account that stands for any container's when checking what containers can reach (the installation, the
   * cluster directory): the fixed account, else an unprivileged uid of the lease range in no group (leased accounts
   * get in only through the "other" permission bits); the node manager's own when it is not root.
   */
  get probeAccount(): ContainerAccount {
    if (!this.switches) return this.self;
    if (this.fixed) return this.fixed;
    const uid = this.policy.leases!.range.max;
    return { name: leasedAccountName(uid), uid, gid: uid, home: "" };
  }

  /**
   * The account the containers of application `appId`, submitted by `submitter`, run as: never uid 0, nor gid 0
   * unless it is our own. In "application" mode its leased uid (leased here on its first container).
   * @throws CONTAINER_LAUNCH_FAILED when no uid of the range is free.
   */
  accountFor(appId: string, submitter: string): ContainerAccount {
    if (!this.switches) return this.self;
    if (this.fixed) return this.fixed;
    if (this.policy.mode === "submitter" && this.policy.trustSubmitter) {
      const own = lookupAccount(submitter);
      if (own && own.uid >= this.policy.minUid && own.gid !== 0) return own;
    }
    const uid = this.policy.leases!.acquire(appId);
    return { name: leasedAccountName(uid), uid, gid: uid, home: "" };
  }

  /** How containers are run here, for the node manager's start-up log and the submitter. */
  describe(): { runAs: string } {
    if (!this.switches)
      return {
        runAs: `the node manager's own account ${this.self.name} (uid ${this.self.uid}): it is not root, so it cannot start containers as another user`,
      };
    if (this.fixed)
      return {
        runAs: `${this.fixed.name} (uid ${this.fixed.uid}), one account for every job (containerRunAs "fixed")`,
      };
    const range = this.policy.leases!.range;
    const own = `an account of the application's own (a uid in ${range.min}-${range.max})`;
    if (this.policy.mode === "submitter")
      return {
        runAs: this.policy.trustSubmitter
          ? `the submitter's own account where it exists with uid >= ${this.policy.minUid}, else ${own}`
          : `${own}: without tls the submitter's name is not authenticated`,
      };
    return { runAs: own };
  }
}

/**
 * The account every container of a "fixed" node manager with `containerUser` `name` runs as (its own when it is not
 * root): what tests and benchmarks that launch containers directly run them as.
 */
export function fixedContainerAccount(name: string): ContainerAccount {
  return new ContainerAccounts({ mode: "fixed", fixed: name, minUid: 1000, trustSubmitter: false }).accountFor("", "");
}

/** The one account of "fixed" mode; CONFIG_INVALID when there is none or it is root or in group root. */
function checkedFixed(name: string): ContainerAccount {
  const fallback = lookupAccount(name);
  if (!fallback) return invalidOption("node manager", "containerUser", `names no account on this server (${name})`);
  if (fallback.uid === 0 || fallback.gid === 0)
    invalidOption(
      "node manager",
      "containerUser",
      `must not be root or in group root (${name} is uid ${fallback.uid}, gid ${fallback.gid})`,
    );
  return fallback;
}

/** Whether the mode bits of `st` give `account` the access `bit` (4 read, 1 search) through its uid or primary gid. */
function modeAllows(st: Stats, account: ContainerAccount, bit: 4 | 1): boolean {
  const shift = st.uid === account.uid ? 6 : st.gid === account.gid ? 3 : 0;
  return (st.mode & (bit << shift)) !== 0;
}

/**
 * Whether `account` may read (`bit` 4) or enter (1) `path`, whose lstat is `st`: by the mode bits, else (an ACL may
 * grant what they do not, and a symbolic link is resolved with the account's own rights) by asking the kernel as the
 * account itself. For the node manager's own account, the kernel's answer at once.
 */
function canAccess(path: string, st: Stats, account: ContainerAccount, bit: 4 | 1): boolean {
  if (account.uid === process.getuid?.()) {
    try {
      accessSync(path, bit === 4 ? constants.R_OK : constants.X_OK);
      return true;
    } catch {
      return false;
    }
  }
  if (!st.isSymbolicLink() && modeAllows(st, account, bit)) return true;
  const probe = spawnSync("/bin/sh", ["-c", `test -${bit === 4 ? "r" : "x"} "$1"`, "harvest-probe", path], {
    uid: account.uid,
    gid: account.gid,
    stdio: "ignore",
  });
  return probe.status === 0;
}

/** `dir` and every directory above it, root first. */
function chain(dir: string): string[] {
  const out: string[] = [];
  for (let d = dir; ; d = dirname(d)) {
    out.unshift(d);
    if (d === parse(d).root) return out;
  }
}

/** "mode 700, owner uid 0": what a refusal says about the file or directory in the way. */
function describeMode(st: Stats): string {
  return `mode ${(st.mode & 0o777).toString(8).padStart(3, "0")}, owner uid ${st.uid}`;
}

/**
 * Throws CONTAINER_LAUNCH_FAILED naming the first directory on the way to `dir` (`dir` included) that `account` cannot
 * enter. Each step is looked at only once the account could get there, and symbolic links are followed only as the
 * account: the node manager, root, tells nothing about what the account could not see for itself.
 */
function checkEnter(dir: string, account: ContainerAccount, target: string): void {
  for (const d of chain(dir)) {
    let st: Stats;
    try {
      st = lstatSync(d);
    } catch (err) {
      throw new HarvestError("CONTAINER_LAUNCH_FAILED", `${target}: ${d} is not there (${errorMessage(err)})`);
    }
    if (!st.isDirectory() && !st.isSymbolicLink())
      throw new HarvestError("CONTAINER_LAUNCH_FAILED", `${target}: ${d} is not a directory`);
    if (!canAccess(d, st, account, 1))
      throw new HarvestError(
        "CONTAINER_LAUNCH_FAILED",
        `the container runs as ${account.name} (uid ${account.uid}), who cannot enter ${d} (${describeMode(st)}) ` +
          `on the way to ${target}: make it searchable by that account (e.g. chmod o+x) or move what it holds`,
      );
  }
}

/**
 * Throws CONTAINER_LAUNCH_FAILED naming the first directory on the way to `dir` (`dir` included) that `account` cannot
 * enter, so a launch fails with what to fix rather than a task with EACCES or ENOENT. `what` says what `dir` is to
 * the container.
 */
export function assertCanEnter(dir: string, account: ContainerAccount, what: string): void {
  const path = resolve(dir);
  checkEnter(path, account, `${what} ${path}`);
}

/** As `assertCanEnter` for a file the container reads: every directory on the way, then the file itself. */
export function assertCanRead(file: string, account: ContainerAccount, what: string): void {
  assertCanUse(file, account, what, 4);
}

/**
 * As `assertCanRead` for a program the container runs: every directory on the way, then execute permission on the
 * file. The Node binary of an nvm install sits under a mode-700 home, where no container account can run it.
 */
export function assertCanExecute(file: string, account: ContainerAccount, what: string): void {
  assertCanUse(file, account, what, 1);
}

/** Throws CONTAINER_LAUNCH_FAILED unless `account` can reach `file` and read (4) or execute (1) it. */
function assertCanUse(file: string, account: ContainerAccount, what: string, bit: 4 | 1): void {
  const path = resolve(file);
  checkEnter(dirname(path), account, `${what} ${path}`);
  const st = lstatSync(path);
  if (!canAccess(path, st, account, bit))
    throw new HarvestError(
      "CONTAINER_LAUNCH_FAILED",
      `the container runs as ${account.name} (uid ${account.uid}), who cannot ${bit === 4 ? "read" : "execute"} ${what} ${path} (${describeMode(st)})`,
    );
}

/**
 * Gives every entry below `dir` that is not `account`'s and not the resource manager's dag.json to `account`, never
 * following a link (lchown); `depth` bounds the walk.
 */
function handEntriesTo(dir: string, account: ContainerAccount, depth = 4): void {
  let names: string[];
  try {
    names = readdirSync(dir);
  } catch {
    return;
  }
  for (const name of names) {
    const path = join(dir, name);
    const st = lstatSync(path, { throwIfNoEntry: false });
    if (!st || (depth === 4 && name === "dag.json")) continue;
    if (st.uid !== account.uid || st.gid !== account.gid) lchownSync(path, account.uid, account.gid);
    if (st.isDirectory() && depth > 0) handEntriesTo(path, account, depth - 1);
  }
}

/** Mode of a job's staging directory once handed to its account: its job manager's and tasks' data alone. */
const JOB_DIR_MODE = 0o700;

/**
 * Hands a job's staging directory `<stagingDir>/<appId>` to the account its containers run as (owner, mode 0700): its
 * job manager writes the recovery journal and creates its tasks' output directories there, and no other account can
 * read them. The resource manager created it at submit with the job's `dag.json`, which stays as it wrote it (0644 by
 * default: readable by the account, and by nobody else through the 0700 directory); a dag.json the account cannot
 * read fails the launch with a message saying so. Because the path comes from a launch request, only a real
 * directory (no symbolic link, changed through its descriptor) that holds a `dag.json` and lies outside the node
 * manager's own data directory (whose job directories hold its records) is changed.
 * @throws CONTAINER_LAUNCH_FAILED saying what is wrong.
 */
export function handJobDirTo(jobDir: string, account: ContainerAccount, nmDataDir: string): void {
  const fail = (why: string): never => {
    throw new HarvestError("CONTAINER_LAUNCH_FAILED", `job staging directory ${jobDir}: ${why}`);
  };
  if (!isAbsolute(jobDir)) fail("must be an absolute path");
  assertCanEnter(dirname(jobDir), account, "the staging directory");
  let fd: number;
  try {
    fd = openSync(jobDir, constants.O_RDONLY | constants.O_DIRECTORY | constants.O_NOFOLLOW);
  } catch (err) {
    return fail(`not a directory the resource manager created (${errorMessage(err)})`);
  }
  try {
    // (A node manager that has launched nothing yet may have no data directory.)
    const dataDir = existsSync(nmDataDir) ? realpathSync(nmDataDir) : resolve(nmDataDir);
    const fromDataDir = relative(dataDir, realpathSync(jobDir));
    if (!(fromDataDir === ".." || fromDataDir.startsWith(`..${sep}`) || isAbsolute(fromDataDir)))
      fail("lies inside the node manager's data directory");
    const dag = lstatSync(join(jobDir, "dag.json"), { throwIfNoEntry: false });
    if (!dag?.isFile()) return fail("has no dag.json: not a job directory the resource manager created");
    if (!canAccess(join(jobDir, "dag.json"), dag, account, 4))
      fail(
        `its dag.json is not readable by ${account.name} (uid ${account.uid}): the resource manager must write it 0644`,
      );
    const st = fstatSync(fd);
    if (st.uid !== account.uid || st.gid !== account.gid) fchownSync(fd, account.uid, account.gid);
    if ((st.mode & 0o7777) !== JOB_DIR_MODE) fchmodSync(fd, JOB_DIR_MODE);
    // What an earlier attempt's job manager wrote there (its journal) was its account's, which may differ from this
    // one's (another server's lease for the same job): this attempt takes it over. dag.json stays the RM's.
    handEntriesTo(jobDir, account);
  } finally {
    closeSync(fd);
  }
}
