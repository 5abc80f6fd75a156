/**
 * Host-wide leases of container uids: each application's containers on a node manager run as a uid of their own, taken
 * from a configured range that no account in the user database uses (systemd's DynamicUser does the same; no
 * /etc/passwd edit). A lease is one file, `<leaseDir>/<uid>`, created with O_EXCL: two node managers of one host (two
 * clusters, or one restarted) never hold the same uid, with no lock. The file names its holder (the node manager's
 * data directory and node id) and the application, so a restarted node manager finds its own leases again, and a
 * lease whose holder's data directory no longer exists, with no process of its uid left, is taken back.
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

/** The pids of the processes whose real or effective uid is `uid` (from /proc; empty where there is none). */
export function processesOfUid(uid: number): number[] {
  const out: number[] = [];
  let names: string[];
  try {
    names = readdirSync("/proc");
  } catch {
    return out;
  }
  for (const name of names) {
    if (!/^\d+$/.test(name)) continue;
    let status: string;
    try {
      status = readFileSync(`/proc/${name}/status`, "utf8");
    } catch {
      continue; // Exited meanwhile.
    }
    const m = /^Uid:\s+(\d+)\s+(\d+)\s+(\d+)/m.exec(status);
    if (m && (Number(m[1]) === uid || Number(m[2]) === uid || Number(m[3]) === uid)) out.push(Number(name));
  }
  return out;
}

/** Injected for tests: what the module asks the system. */
export interface UidLeaseProbes {
  /** The uids and gids accounts use (they are never leased). */
  idsInUse: () => Set<number>;
  /** Whether a process of `uid` still runs. */
  hasProcesses: (uid: number) => boolean;
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
      hasProcesses: probes.hasProcesses ?? ((uid) => processesOfUid(uid).length > 0),
      nowMs: probes.nowMs ?? Date.now,
    };
    this.cursor = range.min;
  }

  /**
   * Creates the lease directory and takes back this holder's own leases from a previous run; returns them
   * (application id -> uid).
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
    return new Map(this.held);
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
    const leased = new Set<number>();
    for (const name of this.leaseNames()) leased.add(Number(name));
    const size = this.range.max - this.range.min + 1;
    for (let i = 0; i < size; i++) {
      const uid = this.range.min + ((this.cursor - this.range.min + i) % size);
      if (leased.has(uid) || this.inUse.has(uid) || this.probes.hasProcesses(uid)) continue;
      if (this.create(uid, appId)) {
        this.cursor = uid + 1 > this.range.max ? this.range.min : uid + 1;
        return uid;
      }
    }
    for (const lease of this.readAll()) {
      if (!this.isStale(lease)) continue;
      this.remove(lease.uid);
      if (this.create(lease.uid, appId)) return lease.uid;
    }
    throw new HarvestError(
      "CONTAINER_LAUNCH_FAILED",
      `no free container uid in ${this.range.min}-${this.range.max}: every one is leased (${this.dir}), ` +
        `an account's, or has a process; widen containerUidRange or wait for finished applications to be cleaned up`,
    );
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

  private remove(uid: number): void {
    try {
      unlinkSync(join(this.dir, String(uid)));
    } catch {
      // Already gone.
    }
  }

  private isMine(lease: LeaseRecord): boolean {
    return lease.holder.dataDir === this.holder.dataDir && lease.holder.nodeId === this.holder.nodeId;
  }

  /** A lease nobody can still be using: its holder's data directory is gone and no process of its uid runs. */
  private isStale(lease: LeaseRecord): boolean {
    return !this.isMine(lease) && !existsSync(lease.holder.dataDir) && !this.probes.hasProcesses(lease.uid);
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
