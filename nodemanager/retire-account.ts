/**
 * Retiring a finished application's leased account on one node manager (uid-leases.ts), so that its uid can go to
 * another application with nothing of this one in reach: its leftover processes are killed, the logs of its
 * containers become the node manager's (they stay for `harvest job logs`), and everything else in their work
 * directories, the private /tmp included, is removed. The work directories were the account's: nothing in them is
 * trusted, no link is followed, and only a regular file with one link, owned by the account, is kept.
 */
import {
  closeSync,
  constants,
  existsSync,
  fchownSync,
  fstatSync,
  lchownSync,
  lstatSync,
  openSync,
  readdirSync,
  readFileSync,
  rmSync,
} from "node:fs";
import { join } from "node:path";
import { isContainerId, parseAppId } from "../common/ids.js";
import type { Logger } from "../common/log.js";
import { processesOfUid } from "./uid-leases.js";
import type { UidLeases } from "./uid-leases.js";

/** What a container's work directory keeps once its account is retired: the node manager's own records of it. */
const KEPT_FILES = new Set(["stdout", "stderr", "pid"]);

/** What retiring did. */
export interface RetireResult {
  processesKilled: number;
  /** Processes of the uid still there after SIGKILL (the uid must stay leased). */
  processesLeft: number;
  /** Entries removed from the containers' work directories. */
  removed: number;
}

/**
 * Kills every process of `uid`, then hands what stays of application `appId`'s containers under `dataDir` to this
 * process's own account and removes the rest. A uid with processes left is not handed back (`processesLeft`).
 * Extra directories the account was given (a job's local staging directory) are handed back whole with `also`.
 */
export function retireApplicationAccount(
  dataDir: string,
  appId: string,
  uid: number,
  also: readonly string[] = [],
): RetireResult {
  parseAppId(appId);
  if (uid === 0) throw new Error("refusing to retire uid 0");
  const pids = processesOfUid(uid);
  for (const pid of pids) {
    try {
      process.kill(pid, "SIGKILL");
    } catch {
      // Gone already.
    }
  }
  const left = pids.length > 0 ? processesOfUid(uid).filter((pid) => !isZombie(pid)) : [];
  const result: RetireResult = { processesKilled: pids.length, processesLeft: left.length, removed: 0 };
  if (left.length > 0) return result;
  const self = { uid: process.getuid?.() ?? 0, gid: process.getgid?.() ?? 0 };
  const appDir = join(dataDir, "containers", appId);
  for (const name of safeReaddir(appDir)) {
    const workDir = join(appDir, name);
    const st = lstatSync(workDir, { throwIfNoEntry: false });
    if (!isContainerId(name) || !st?.isDirectory()) continue;
    for (const entry of safeReaddir(workDir)) {
      const path = join(workDir, entry);
      if (KEPT_FILES.has(entry) && handOver(path, uid, self)) continue;
      rmSync(path, { recursive: true, force: true });
      result.removed++;
    }
    if (st.uid === uid) lchownSync(workDir, self.uid, self.gid);
  }
  for (const dir of also) handTreeOver(dir, uid, self);
  return result;
}

/** Makes `path` the node manager's if it is a regular file of `uid` with one link; false (leave it to go) otherwise. */
function handOver(path: string, uid: number, self: { uid: number; gid: number }): boolean {
  let fd: number;
  try {
    fd = openSync(path, constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK);
  } catch {
    return false;
  }
  try {
    const st = fstatSync(fd);
    if (!st.isFile() || st.nlink !== 1 || st.uid !== uid) return false;
    fchownSync(fd, self.uid, self.gid);
    return true;
  } finally {
    closeSync(fd);
  }
}

/** Gives every entry of `uid` below `dir` (links themselves, never their targets) to the node manager. */
function handTreeOver(dir: string, uid: number, self: { uid: number; gid: number }): void {
  const st = lstatSync(dir, { throwIfNoEntry: false });
  if (!st) return;
  if (st.uid === uid) lchownSync(dir, self.uid, self.gid);
  if (!st.isDirectory()) return;
  for (const name of safeReaddir(dir)) handTreeOver(join(dir, name), uid, self);
}

function safeReaddir(dir: string): string[] {
  try {
    return readdirSync(dir);
  } catch {
    return [];
  }
}

/** Whether `pid` is a zombie (exited, waiting for its parent): it holds nothing of the uid's any more. */
function isZombie(pid: number): boolean {
  try {
    return /^State:\s+Z/m.test(readFileSync(`/proc/${pid}/status`, "utf8"));
  } catch {
    return true; // Reaped meanwhile.
  }
}

/**
 * Ends `appId`'s lease in `leases` once nothing of it remains under `dataDir` (and in its handed `staging` directory):
 * true when released (or it had none), false when a process of its uid survived (the lease stays, to try again).
 */
export function retireLeasedAccount(
  leases: UidLeases,
  dataDir: string,
  appId: string,
  staging: string | undefined,
  log: Logger,
): boolean {
  const uid = leases.uidOf(appId);
  if (uid === undefined) return true;
  const r = retireApplicationAccount(dataDir, appId, uid, staging ? [staging] : []);
  if (r.processesLeft > 0) {
    log.warn("a finished application's account still has processes: its uid stays leased", { appId, uid, ...r });
    return false;
  }
  leases.release(appId);
  log.info("application's container uid released", { appId, uid, ...r });
  return true;
}

/**
 * At a node manager's start: takes back its leases from a previous run, and retires at once those of applications
 * with nothing left here (no container directory); the others go when their applications end.
 */
export function reopenLeases(leases: UidLeases, dataDir: string, log: Logger): void {
  const leased = leases.open();
  if (leased.size > 0) log.info("container uids leased by a previous run", { applications: leased.size });
  for (const appId of leased.keys())
    if (!existsSync(join(dataDir, "containers", appId))) retireLeasedAccount(leases, dataDir, appId, undefined, log);
}
