/**
 * Host-wide leases of container uids: each application's containers on a node manager run as a uid of their own, taken
 * from a configured range that no account in the user database uses (systemd's DynamicUser does the same; no
 * /etc/passwd edit). A lease is one file, `<leaseDir>/<uid>`, created with O_EXCL: two node managers of one host (two
 * clusters, or one restarted) never hold the same uid, with no lock. The file names its holder (the node manager's
 * data directory and node id) and the application, so a restarted node manager finds its own leases again.
 *
 * A lease whose holder's data directory no longer exists, with no process of its uid left, is stale (a cluster stopped
 * and removed before its node managers gave their uids back). Stale leases are swept when a node manager opens the
 * directory and again when the range has no free uid. Taking one back is a compare-and-delete the file system does
 * not offer, so it runs under a per-uid lock file, `<uid>.lock` (O_EXCL): the lease is read again under the lock and
 * removed only if it is still the stale one, so two node managers sweeping at once never hand one uid to two
 * applications. A lock left by a node manager that died inside that microsecond window is broken after a minute.
 *
 * Releasing a uid is the node manager's decision (it knows when nothing of the application remains); this module only
 * keeps the files honest.
 */
import { spawnSync } from "node:child_process";
import {
  closeSync,
  constants,
  existsSync,
  mkdirSync,
  openSync,
  readdirSync,
  readFileSync,
  statSync,
  unlinkSync,
  writeSync,
} from "node:fs";
import { dirname, join } from "node:path";
import { errorMessage, HarvestError } from "../common/errors.js";

/** Where the C library's `getent` lives (Debian and others; /bin is /usr/bin on merged-/usr systems). */
export const GETENT_PATHS = ["/usr/bin/getent", "/bin/getent"];

/** An inclusive range of uids. */
export interface UidRange {
  min: number;
  max: number;
}

/** systemd's range for dynamic users (61184-65519): outside what distributions give to system and human accounts. */
export const DEFAULT_UID_RANGE = "61184-65519";

/** What a lease file holds. */
interface LeaseRecord {
  uid: number;
  appId: string;
  /** The holding node manager: its data directory (as given) and node id. */
  holder: { dataDir: string; nodeId: string };
  sinceMs: number;
}

/** Parses "min-max" (inclusive) into a range of unprivileged uids; throws a message saying what is wrong. */
export function parseUidRange(text: string): UidRange {
  const m = /^\s*(\d{1,10})\s*-\s*(\d{1,10})\s*$/.exec(text);
  if (!m) throw new Error(`must be "min-max", e.g. "${DEFAULT_UID_RANGE}" (got ${JSON.stringify(text)})`);
  const range = { min: Number(m[1]), max: Number(m[2]) };
  if (range.min < 1000) throw new Error(`must start at 1000 or above, clear of system accounts (got ${text})`);
  // 65534 is nobody's on most systems, 4294967295 (-1) means "no change" to chown and setuid.
  if (range.max >= 2 ** 32 - 1 || range.min > range.max)
    throw new Error(`must be an increasing range of uids below 4294967295 (got ${text})`);
  return range;
}

/** The uids and gids the server's user and group databases name (`getent`, else /etc/passwd and /etc/group). */
export function accountIdsInUse(): Set<number> {
  const ids = new Set<number>();
  for (const db of ["passwd", "group"] as const) {
    const getent = GETENT_PATHS.find((p) => existsSync(p));
    const r = getent ? spawnSync(getent, [db], { encoding: "utf8", stdio: ["ignore", "pipe", "ignore"] }) : undefined;
    let text = r && !r.error && r.status === 0 ? r.stdout : "";
    if (!text) {
      try {
        text = readFileSync(`/etc/${db}`, "utf8");
      } catch {
        text = "";
      }
    }
    for (const line of text.split("\n")) {
      const f = line.split(":");
      const id = f[2] ?? "";
      if (/^\d+$/.test(id)) ids.add(Number(id));
      // passwd's fourth field is the primary gid.
      if (db === "passwd" && /^\d+$/.test(f[3] ?? "")) ids.add(Number(f[3]));
    }
  }
  return ids;
}

/** Every process's pid with its real, effective and saved uids (from /proc; a process that exits meanwhile is left out). */
function processUidTable(): { pid: number; uids: number[] }[] {
  let names: string[];
  try {
    names = readdirSync("/proc");
  } catch {
    return [];
  }
  const out: { pid: number; uids: number[] }[] = [];
  for (const name of names) {
    if (!/^\d+$/.test(name)) continue;
    let status: string;
    try {
      status = readFileSync(`/proc/${name}/status`, "utf8");
    } catch {
      continue; // Exited meanwhile.
    }
    const m = /^Uid:\s+(\d+)\s+(\d+)\s+(\d+)/m.exec(status);
    if (m) out.push({ pid: Number(name), uids: [Number(m[1]), Number(m[2]), Number(m[3])] });
  }
  return out;
}

/** The pids of the processes whose real, effective or saved uid is `uid` (empty where there is none). */
export function processesOfUid(uid: number): number[] {
  return processUidTable()
    .filter((p) => p.uids.includes(uid))
    .map((p) => p.pid);
}

/** The uids some process runs as. */
export function uidsWithProcesses(): Set<number> {
  return new Set(processUidTable().flatMap((p) => p.uids));
}

/** How old a `<uid>.lock` file must be before another node manager breaks it (its taker died holding it). */
export const RECLAIM_LOCK_STALE_MS = 60_000;

/** Injected for tests: what the module asks the system. */
export interface UidLeaseProbes {
  /** The uids and gids accounts use (they are never leased). */
  idsInUse: () => Set<number>;
  /** The uids some process runs as (real, effective or saved): one look at /proc, taken per acquire or sweep. */
  processUids: () => Set<number>;
  nowMs: () => number;
}

/** One node manager's view of the host's uid leases. */
export class UidLeases {
  /** This holder's leases: application id -> uid. */
  private readonly held = new Map<string, number>();
  private readonly probes: UidLeaseProbes;
  private inUse: Set<number> | undefined;
  /** Where the next search starts (spreads uids over the range, so a released uid is not the next one handed out). */
  private cursor: number;

  /**
   * @param dir the host-wide lease directory (created 0700).
   * @param holder this node manager: its data directory and node id.
   */
  constructor(
    readonly dir: string,
    readonly range: UidRange,
    private readonly holder: { dataDir: string; nodeId: string },
    probes: Partial<UidLeaseProbes> = {},
  ) {
    this.probes = {
      idsInUse: probes.idsInUse ?? accountIdsInUse,
      processUids: probes.processUids ?? uidsWithProcesses,
      nowMs: probes.nowMs ?? Date.now,
    };
    this.cursor = range.min;
  }

  /**
   * Creates the lease directory, takes back this holder's own leases from a previous run and sweeps stale ones;
   * returns this holder's (application id -> uid).
   * @throws CONFIG_INVALID when the directory cannot be made or read.
   */
  open(): Map<string, number> {
    try {
      // Only the lease directory is closed to others: a parent made here (/var/lib/harvest) stays searchable, as a
      // local cluster's directory below it must be for the containers' accounts.
      mkdirSync(dirname(this.dir), { recursive: true, mode: 0o755 });
      mkdirSync(this.dir, { recursive: true, mode: 0o700 });
      const st = statSync(this.dir);
      if (!st.isDirectory()) throw new Error("not a directory");
      if (st.uid !== process.getuid?.() || (st.mode & 0o022) !== 0)
        throw new Error(
          `must belong to this user and be writable by nobody else (mode ${(st.mode & 0o777).toString(8)})`,
        );
    } catch (err) {
      throw new HarvestError("CONFIG_INVALID", `container uid lease directory ${this.dir}: ${errorMessage(err)}`);
    }
    for (const lease of this.readAll()) if (this.isMine(lease)) this.held.set(lease.appId, lease.uid);
    this.sweepStale();
    return new Map(this.held);
  }

  /**
   * Removes every stale lease (its holder's data directory is gone and no process of its uid runs), each under its
   * uid's lock; returns how many it removed.
   */
  sweepStale(): number {
    const busy = this.probes.processUids();
    let removed = 0;
    for (const lease of this.readAll()) if (this.isStale(lease, busy) && this.reclaim(lease)) removed++;
    return removed;
  }

  /** The uid of `appId` if this holder has leased one. */
  uidOf(appId: string): number | undefined {
    return this.held.get(appId);
  }

  /**
   * The uid of `appId`'s containers here: its lease, or a new one on the first free uid of the range (no lease, no
   * account, no process). A lease whose holder is gone is taken back when the range has no free uid otherwise.
   * @throws CONTAINER_LAUNCH_FAILED when every uid of the range is in use.
   */
  acquire(appId: string): number {
    const have = this.held.get(appId);
    if (have !== undefined) return have;
    this.inUse ??= this.probes.idsInUse();
    const found = this.takeFree(appId) ?? (this.sweepStale() > 0 ? this.takeFree(appId) : undefined);
    if (found !== undefined) return found;
    throw new HarvestError(
      "CONTAINER_LAUNCH_FAILED",
      `no free container uid in ${this.range.min}-${this.range.max}: every one is leased (${this.dir}), ` +
        `an account's, or has a process; widen containerUidRange or wait for finished applications to be cleaned up`,
    );
  }

  /** Leases the first free uid of the range (no lease, no account, no process) from the cursor on, for `appId`. */
  private takeFree(appId: string): number | undefined {
    const leased = new Set<number>();
    for (const name of this.leaseNames()) leased.add(Number(name));
    const busy = this.probes.processUids();
    const size = this.range.max - this.range.min + 1;
    for (let i = 0; i < size; i++) {
      const uid = this.range.min + ((this.cursor - this.range.min + i) % size);
      if (leased.has(uid) || this.inUse!.has(uid) || busy.has(uid)) continue;
      if (this.create(uid, appId)) {
        this.cursor = uid + 1 > this.range.max ? this.range.min : uid + 1;
        return uid;
      }
    }
    return undefined;
  }

  /** Ends `appId`'s lease (the caller made sure nothing of the application remains). */
  release(appId: string): void {
    const uid = this.held.get(appId);
    if (uid === undefined) return;
    this.held.delete(appId);
    const lease = this.read(String(uid));
    if (lease && this.isMine(lease) && lease.appId === appId) this.remove(uid);
  }

  /** Creates the lease file of `uid` for `appId`; false when another holder took it first. */
  private create(uid: number, appId: string): boolean {
    let fd: number;
    try {
      fd = openSync(join(this.dir, String(uid)), constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL, 0o600);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === "EEXIST") return false;
      throw new HarvestError("CONTAINER_LAUNCH_FAILED", `cannot lease uid ${uid} in ${this.dir}: ${errorMessage(err)}`);
    }
    try {
      const record: LeaseRecord = { uid, appId, holder: this.holder, sinceMs: this.probes.nowMs() };
      writeSync(fd, JSON.stringify(record) + "\n");
    } finally {
      closeSync(fd);
    }
    this.held.set(appId, uid);
    return true;
  }

  /**
   * Removes `lease` if its file still holds that record (same application, holder and time), under the uid's lock
   * (`<uid>.lock`, O_EXCL); false when another node manager holds the lock or the file changed meanwhile.
   */
  private reclaim(lease: LeaseRecord): boolean {
    const lock = join(this.dir, `${lease.uid}.lock`);
    if (!this.lock(lock)) return false;
    try {
      const now = this.read(String(lease.uid));
      const same =
        now !== undefined &&
        now.appId === lease.appId &&
        now.sinceMs === lease.sinceMs &&
        now.holder.dataDir === lease.holder.dataDir &&
        now.holder.nodeId === lease.holder.nodeId;
      if (same) this.remove(lease.uid);
      return same;
    } finally {
      try {
        unlinkSync(lock);
      } catch {
        // Broken by another node manager meanwhile: nothing of ours to remove.
      }
    }
  }

  /** Takes the lock file `path`; breaks one older than RECLAIM_LOCK_STALE_MS first. */
  private lock(path: string): boolean {
    for (let attempt = 0; attempt < 2; attempt++) {
      try {
        closeSync(openSync(path, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL, 0o600));
        return true;
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code !== "EEXIST") return false;
      }
      const st = statSync(path, { throwIfNoEntry: false });
      if (!st || this.probes.nowMs() - st.mtimeMs < RECLAIM_LOCK_STALE_MS) return false;
      this.removePath(path);
    }
    return false;
  }

  private remove(uid: number): void {
    this.removePath(join(this.dir, String(uid)));
  }

  private removePath(path: string): void {
    try {
      unlinkSync(path);
    } catch {
      // Already gone.
    }
  }

  private isMine(lease: LeaseRecord): boolean {
    return lease.holder.dataDir === this.holder.dataDir && lease.holder.nodeId === this.holder.nodeId;
  }

  /** A lease nobody can still be using: its holder's data directory is gone and no process of its uid runs. */
  private isStale(lease: LeaseRecord, busy: Set<number>): boolean {
    return !this.isMine(lease) && !busy.has(lease.uid) && !existsSync(lease.holder.dataDir);
  }

  /** The lease files' names (uids in the range). */
  private leaseNames(): string[] {
    let names: string[];
    try {
      names = readdirSync(this.dir);
    } catch {
      return [];
    }
    return names.filter((n) => /^\d{1,10}$/.test(n) && Number(n) >= this.range.min && Number(n) <= this.range.max);
  }

  private readAll(): LeaseRecord[] {
    return this.leaseNames().flatMap((n) => this.read(n) ?? []);
  }

  /** A lease file's record; undefined when it is missing or not one (a half-written file is left alone). */
  private read(name: string): LeaseRecord | undefined {
    try {
      const r = JSON.parse(readFileSync(join(this.dir, name), "utf8")) as Partial<LeaseRecord>;
      if (
        r.uid === Number(name) &&
        typeof r.appId === "string" &&
        typeof r.holder?.dataDir === "string" &&
        typeof r.holder.nodeId === "string"
      )
        return r as LeaseRecord;
    } catch {
      // Not a lease.
    }
    return undefined;
  }
}
