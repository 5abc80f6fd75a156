/**
 * A lab of Linux network namespaces on one machine, for running Harvest "hosts" that reach each other only over a
 * private network: one namespace per host, each with a veth pair to a bridge that lives in its own "switch" namespace
 * (so the root namespace is never touched), and addresses that exist only on those veths. `cut(host)` sets the host's
 * bridge-side veth down, so its packets are silently dropped (a real partition, not a connection reset); `heal(host)`
 * sets it up again. Needs root and `ip` (iproute2).
 *
 * Every namespace is named `<prefix><host>` (`hv<pid % 10000>-master`, `hv1234-server-1`, ..., `hv1234-switch`). The
 * switch's bridge carries an owner mark (pid and start time of the process that built the lab), so `create()` can
 * remove labs of the same prefix pattern left by a process that died, and never touches a live one.
 */
import { spawn, spawnSync } from "node:child_process";
import type { ChildProcess, SpawnOptions } from "node:child_process";
import {
  chmodSync,
  closeSync,
  existsSync,
  mkdirSync,
  openSync,
  readFileSync,
  readlinkSync,
  readdirSync,
  rmSync,
} from "node:fs";
import { writeFileSync } from "node:fs";
import { createInterface } from "node:readline";
import { join, resolve } from "node:path";
import { pathToFileURL } from "node:url";
import { distEntry, packageRoot } from "../common/paths.js";
import { EVENTS_DIR_VARIABLE } from "../common/events.js";
import type { DaemonKind } from "../localcluster/daemon-kinds.js";
import { daemonEnvironment } from "../localcluster/malloc-tunables.js";
import { daemonNodeOptions } from "../localcluster/node-options.js";

/** A host of the lab: its name (part of its namespace's name) and its IPv4 address. */
export interface LabHost {
  name: string;
  ip: string;
}

/** Settings of a lab. */
export interface NetnsLabOptions {
  /** Directory for daemon configs, ready files and logs (`run/`, `logs/`); created if missing. */
  runDir: string;
  /** The hosts, each in its own namespace. */
  hosts: LabHost[];
  /** Prefix length of the hosts' addresses (one subnet on the bridge). @default 24 */
  prefixLength?: number;
  /** Namespace name prefix. @default `hv<pid % 10000>-` (a letter is appended if a live lab holds it) */
  prefix?: string;
  /** Progress lines. @default none */
  log?: (line: string) => void;
  /**
   * Directories each host must not see: in the host's own mount namespace (`ip netns exec` gives every command one)
   * an empty tmpfs is mounted over each before the command runs, so that hosts share no path but what the lab leaves
   * visible. @default none
   */
  masked?: (host: string) => string[];
  /**
   * Where a host sees Harvest's installation instead of where it is: the installation is bound there in the host's
   * mount namespace and its own path masked, and commands run from there; so a server's daemons run, and its
   * containers find nothing at the installation's path. undefined: in place. @default in place everywhere
   */
  installAt?: (host: string) => string | undefined;
}

/** A daemon the lab started. */
export interface LabDaemon {
  /** Unique name in the lab (config, ready and log files are named after it). */
  name: string;
  host: string;
  kind: DaemonKind;
  pid: number;
  /** The advertised host:port from its ready file. */
  address: string;
  log: string;
  configFile: string;
}

/** What `run` returns. */
export interface RunResult {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
  timedOut: boolean;
  ms: number;
}

/** A process the lab started, tracked so `destroy()` can stop it. */
interface Tracked {
  name: string;
  child: ChildProcess;
}

const NAME_PATTERN = /^[a-z][a-z0-9-]{0,20}$/;
const SWITCH = "switch";
const BRIDGE = "br0";
const OWNER_MARK = "harvest-netns-lab";
/** Namespaces of labs: `hv<n>-...` (and the `hvprobe<pid>` of `netnsAvailable`). */
const LAB_NS = /^(hv\d{1,4}[a-z]?-)(.+)$/;
const PROBE_NS = /^hvprobe(\d+)$/;

/** Runs `ip` with `args`; throws a clear error (command and stderr) unless it exits 0. */
export function ip(args: string[], opts: { allowFail?: boolean } = {}): string {
  const r = spawnSync("ip", args, { encoding: "utf8", timeout: 10_000 });
  if (r.error) throw new Error(`ip ${args.join(" ")}: ${r.error.message}`);
  if (r.status !== 0 && !opts.allowFail)
    throw new Error(`ip ${args.join(" ")} failed (exit ${r.status ?? r.signal}): ${r.stderr.trim()}`);
  return r.stdout;
}

/** Whether this process can build a lab: Linux, root, and `ip netns add` plus a veth inside a namespace work. */
export function netnsAvailable(): { ok: boolean; why?: string } {
  if (process.platform !== "linux")
    return { ok: false, why: `network namespaces need Linux (this is ${process.platform})` };
  if (process.getuid?.() !== 0) return { ok: false, why: "network namespaces need root (run as root, or skip)" };
  const v = spawnSync("ip", ["-V"], { encoding: "utf8" });
  if (v.error || v.status !== 0) return { ok: false, why: "the 'ip' command (iproute2) is missing" };
  const probe = `hvprobe${process.pid}`;
  try {
    ip(["netns", "add", probe]);
    try {
      ip(["-n", probe, "link", "set", "lo", "up"]);
      ip(["-n", probe, "link", "add", "p0", "type", "veth", "peer", "name", "p1"]);
    } finally {
      ip(["netns", "del", probe], { allowFail: true });
    }
    return { ok: true };
  } catch (err) {
    return { ok: false, why: `cannot create a network namespace with a veth pair: ${(err as Error).message}` };
  }
}

/** The start time of a process (field 22 of /proc/<pid>/stat), or undefined when it is gone. */
export function processStartTime(pid: number): string | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    // The command name (field 2) may hold spaces and parentheses: fields are counted after its last ')'.
    return stat.slice(stat.lastIndexOf(")") + 2).split(" ")[19];
  } catch {
    return undefined;
  }
}

/** The network namespaces that exist now. */
export function listNamespaces(): string[] {
  return ip(["netns", "list"])
    .split("\n")
    .map((l) => l.trim().split(/\s+/)[0] ?? "")
    .filter(Boolean);
}

/** Pids of the processes inside a namespace. */
function namespacePids(ns: string): number[] {
  const r = spawnSync("ip", ["netns", "pids", ns], { encoding: "utf8", timeout: 10_000 });
  if (r.status !== 0) return [];
  return r.stdout
    .split(/\s+/)
    .map(Number)
    .filter((p) => Number.isInteger(p) && p > 0);
}

function killQuietly(pid: number, signal: NodeJS.Signals): void {
  try {
    process.kill(pid, signal);
  } catch {
    // Gone already.
  }
}

/** SIGKILLs every process inside `ns` and deletes it. */
function removeNamespace(ns: string): void {
  for (const pid of namespacePids(ns)) killQuietly(pid, "SIGKILL");
  ip(["netns", "del", ns]);
}

/** The owner mark on a lab's bridge (`harvest-netns-lab owner=<pid> start=<t>`), if the switch namespace has one. */
function readOwner(prefix: string): { pid: number; start: string } | undefined {
  const out = ip(["-n", `${prefix}${SWITCH}`, "-d", "link", "show", BRIDGE], { allowFail: true });
  const m = new RegExp(`alias ${OWNER_MARK} owner=(\\d+) start=(\\d+)`).exec(out);
  return m ? { pid: Number(m[1]), start: m[2]! } : undefined;
}

function ownerAlive(owner: { pid: number; start: string }): boolean {
  return processStartTime(owner.pid) === owner.start;
}

/**
 * Removes labs whose owner process is dead: namespaces named `hv<n>-*` whose switch carries the owner mark of a dead
 * process (or of a reused pid), with any process still inside them. A lab of a live owner, or namespaces without an
 * owner mark, are left alone. Returns the namespaces removed.
 */
export function removeStaleLabs(log: (line: string) => void = () => undefined): string[] {
  const groups = new Map<string, string[]>();
  const removed: string[] = [];
  for (const ns of listNamespaces()) {
    const probe = PROBE_NS.exec(ns);
    if (probe) {
      if (!existsSync(`/proc/${probe[1]}`)) {
        removeNamespace(ns);
        removed.push(ns);
      }
      continue;
    }
    const m = LAB_NS.exec(ns);
    if (m) groups.set(m[1]!, [...(groups.get(m[1]!) ?? []), ns]);
  }
  for (const [prefix, names] of groups) {
    const owner = readOwner(prefix);
    if (!owner) {
      log(`leaving ${names.join(", ")}: no owner mark on ${prefix}${SWITCH}`);
      continue;
    }
    if (ownerAlive(owner)) continue;
    // The switch goes last, so a lab interrupted while being removed still has its owner mark.
    const ordered = [
      ...names.filter((n) => n !== `${prefix}${SWITCH}`),
      ...names.filter((n) => n === `${prefix}${SWITCH}`),
    ];
    for (const ns of ordered) removeNamespace(ns);
    log(`removed a stale lab of dead process ${owner.pid}: ${ordered.join(", ")}`);
    removed.push(...ordered);
  }
  return removed;
}

/** Network namespaces, a bridge, and the processes started inside them; see the file comment. */
export class NetnsLab {
  readonly runDir: string;
  readonly hosts: readonly LabHost[];
  private prefixValue: string;
  private readonly prefixLength: number;
  private readonly log: (line: string) => void;
  /** Invariant: holds every process started by `exec` that has not been seen to exit. */
  private readonly processes = new Set<Tracked>();
  private readonly daemons: LabDaemon[] = [];
  private state: "new" | "creating" | "up" | "destroying" | "destroyed" = "new";
  private readonly onExit = (): void => this.destroySync();
  private readonly masked: (host: string) => string[];
  private readonly installAt: (host: string) => string | undefined;

  constructor(opts: NetnsLabOptions) {
    this.masked = opts.masked ?? (() => []);
    this.installAt = opts.installAt ?? (() => undefined);
    this.runDir = resolve(opts.runDir);
    this.hosts = opts.hosts;
    this.prefixValue = opts.prefix ?? `hv${process.pid % 10_000}-`;
    this.prefixLength = opts.prefixLength ?? 24;
    this.log = opts.log ?? (() => undefined);
    const seen = new Set<string>();
    for (const h of opts.hosts) {
      if (!NAME_PATTERN.test(h.name) || h.name === SWITCH)
        throw new Error(`lab host name ${JSON.stringify(h.name)} must match ${NAME_PATTERN} and not be "${SWITCH}"`);
      if (!/^\d{1,3}(\.\d{1,3}){3}$/.test(h.ip)) throw new Error(`lab host ${h.name}: ${h.ip} is not an IPv4 address`);
      if (seen.has(h.name) || seen.has(h.ip)) throw new Error(`lab host ${h.name}/${h.ip} is given twice`);
      seen.add(h.name).add(h.ip);
    }
  }

  /** The namespace name prefix (final once `create()` resolved). */
  get prefix(): string {
    return this.prefixValue;
  }

  /** The namespace of a host (or of the switch). */
  ns(host: string): string {
    if (host !== SWITCH && !this.hosts.some((h) => h.name === host)) throw new Error(`no lab host ${host}`);
    return `${this.prefixValue}${host}`;
  }

  /** A host's address. */
  ipOf(host: string): string {
    const h = this.hosts.find((x) => x.name === host);
    if (!h) throw new Error(`no lab host ${host}`);
    return h.ip;
  }

  /** The daemons started so far. */
  get started(): readonly LabDaemon[] {
    return this.daemons;
  }

  /**
   * Removes stale labs of dead owners, then builds this one: the switch namespace with its bridge (owner mark first),
   * and per host a namespace with lo up and `eth0`, the far end of a veth whose near end `v-<host>` is on the bridge.
   * On failure, whatever was built is removed before the error is thrown.
   */
  create(): void {
    if (this.state !== "new") throw new Error(`lab cannot be created from state ${this.state}`);
    this.state = "creating";
    // The daemons' configs (the cluster secret) and logs are root's alone: containers run as other accounts.
    for (const own of ["run", "logs"]) {
      mkdirSync(join(this.runDir, own), { recursive: true, mode: 0o700 });
      chmodSync(join(this.runDir, own), 0o700);
    }
    process.once("exit", this.onExit);
    try {
      removeStaleLabs(this.log);
      const existing = new Set(listNamespaces());
      const base = this.prefixValue;
      for (const suffix of ["", ..."abcdefghijklmnopqrstuvwxyz"]) {
        this.prefixValue = base.replace(/-$/, `${suffix}-`);
        if (![SWITCH, ...this.hosts.map((h) => h.name)].some((n) => existing.has(`${this.prefixValue}${n}`))) break;
        if (suffix === "z") throw new Error(`every lab prefix like ${base} is held by a live lab`);
      }
      const sw = this.ns(SWITCH);
      ip(["netns", "add", sw]);
      const start = processStartTime(process.pid) ?? "0";
      ip(["-n", sw, "link", "add", BRIDGE, "type", "bridge"]);
      ip(["-n", sw, "link", "set", BRIDGE, "alias", `${OWNER_MARK} owner=${process.pid} start=${start}`]);
      ip(["-n", sw, "link", "set", "lo", "up"]);
      ip(["-n", sw, "link", "set", BRIDGE, "up"]);
      for (const h of this.hosts) {
        const ns = this.ns(h.name);
        ip(["netns", "add", ns]);
        ip(["-n", ns, "link", "set", "lo", "up"]);
        // Created inside the switch with its far end moved straight into the host: the root namespace never sees it.
        ip(["-n", sw, "link", "add", this.port(h.name), "type", "veth", "peer", "name", "eth0", "netns", ns]);
        ip(["-n", sw, "link", "set", this.port(h.name), "master", BRIDGE]);
        ip(["-n", sw, "link", "set", this.port(h.name), "up"]);
        ip(["-n", ns, "addr", "add", `${h.ip}/${this.prefixLength}`, "dev", "eth0"]);
        ip(["-n", ns, "link", "set", "eth0", "up"]);
      }
      this.state = "up";
      this.log(
        `lab ${this.prefixValue}*: ${this.hosts.map((h) => `${this.ns(h.name)} ${h.ip}`).join(", ")}, bridge in ${sw}`,
      );
    } catch (err) {
      this.destroySync();
      throw err;
    }
  }

  /** The bridge-side veth of a host, inside the switch namespace. */
  private port(host: string): string {
    return `v-${host}`;
  }

  /** Partitions a host: its bridge-side veth goes down, so every packet to or from it is dropped without a reply. */
  cut(host: string): void {
    this.requireUp();
    this.ns(host);
    ip(["-n", this.ns(SWITCH), "link", "set", this.port(host), "down"]);
    this.log(`cut ${host} off the network`);
  }

  /** Kills every process of a host with SIGKILL (a host that lost its power); returns how many there were. */
  killHost(host: string): number {
    this.requireUp();
    const pids = namespacePids(this.ns(host));
    for (const pid of pids) killQuietly(pid, "SIGKILL");
    this.log(`killed every process of ${host} (${pids.length})`);
    return pids.length;
  }

  /** Ends a host's partition. */
  heal(host: string): void {
    this.requireUp();
    this.ns(host);
    ip(["-n", this.ns(SWITCH), "link", "set", this.port(host), "up"]);
    this.log(`healed ${host}'s link`);
  }

  /**
   * Spawns `argv` inside a host's namespace (`ip netns exec`, which execs it: the child's pid is the program's) as the
   * leader of a new process group, tracked until it exits so `destroy()` can stop it and everything it started.
   */
  exec(host: string, argv: string[], opts: SpawnOptions & { name?: string } = {}): ChildProcess {
    this.requireUp();
    if (argv.length === 0) throw new Error("exec needs a command");
    const { name, ...spawnOpts } = opts;
    const install = this.installAt(host);
    const run = install ? relocated(argv, packageRoot(), install) : argv;
    const binds = install ? [{ from: packageRoot(), to: install }] : [];
    const child = spawn("ip", ["netns", "exec", this.ns(host), ...maskThenRun(this.masked(host), binds, run)], {
      ...spawnOpts,
      detached: true,
    });
    const tracked: Tracked = { name: name ?? `${host}: ${argv.join(" ").slice(0, 80)}`, child };
    this.processes.add(tracked);
    child.once("exit", () => this.processes.delete(tracked));
    child.once("error", () => this.processes.delete(tracked));
    return child;
  }

  /** Runs `argv` in a host's namespace to the end (or `timeoutMs`, then its process group is killed). */
  run(
    host: string,
    argv: string[],
    opts: { timeoutMs?: number; env?: NodeJS.ProcessEnv; cwd?: string } = {},
  ): Promise<RunResult> {
    const started = Date.now();
    const child = this.exec(host, argv, {
      stdio: ["ignore", "pipe", "pipe"],
      ...(opts.env ? { env: opts.env } : {}),
      ...(opts.cwd ? { cwd: opts.cwd } : {}),
    });
    let stdout = "";
    let stderr = "";
    child.stdout?.setEncoding("utf8").on("data", (d: string) => (stdout += d));
    child.stderr?.setEncoding("utf8").on("data", (d: string) => (stderr += d));
    let timedOut = false;
    const timeoutMs = opts.timeoutMs ?? 60_000;
    return new Promise((resolvePromise) => {
      const timer = setTimeout(() => {
        timedOut = true;
        void this.stopGroup(child, 2_000);
      }, timeoutMs);
      child.once("error", (err) => {
        clearTimeout(timer);
        resolvePromise({ code: null, signal: null, stdout, stderr: stderr + err.message, timedOut, ms: 0 });
      });
      child.once("close", (code, signal) => {
        clearTimeout(timer);
        resolvePromise({ code, signal, stdout, stderr, timedOut, ms: Date.now() - started });
      });
    });
  }

  /**
   * Starts `harvest daemon <kind>` in a host's namespace with `config` (written to `run/<name>.json`; output to
   * `logs/<name>.log`) and resolves once its ready file appears. On exit or timeout the error ends with its log's tail.
   */
  async startDaemon(
    host: string,
    kind: DaemonKind,
    config: Record<string, unknown>,
    opts: { name?: string; timeoutMs?: number } = {},
  ): Promise<LabDaemon> {
    this.requireUp();
    const name = opts.name ?? `${host}-${kind}`;
    const configFile = join(this.runDir, "run", `${name}.json`);
    const readyFile = join(this.runDir, "run", `${name}.ready`);
    const log = join(this.runDir, "logs", `${name}.log`);
    rmSync(readyFile, { force: true });
    writeFileSync(configFile, JSON.stringify(config, null, 2) + "\n");
    const fd = openSync(log, "a");
    let child: ChildProcess;
    try {
      child = this.exec(
        host,
        [
          process.execPath,
          ...daemonNodeOptions(kind),
          distEntry("cli/harvest.js"),
          "daemon",
          kind,
          "--config",
          configFile,
          "--ready-file",
          readyFile,
        ],
        // Every daemon of the lab appends its typed events (common/events.ts) to logs/events.jsonl, as a local cluster's.
        {
          stdio: ["ignore", fd, fd],
          name,
          // A temporary directory of the host's own (containers inherit TMPDIR), as a real server has.
          env: {
            ...daemonEnvironment(kind),
            [EVENTS_DIR_VARIABLE]: join(this.runDir, "logs"),
            TMPDIR: this.tmpDir(host),
          },
        },
      );
    } finally {
      closeSync(fd);
    }
    let exit: string | undefined;
    child.once("exit", (code, signal) => (exit = `exited with ${code ?? signal}`));
    child.once("error", (err) => (exit = `could not be spawned: ${err.message}`));
    const deadline = Date.now() + (opts.timeoutMs ?? 30_000);
    while (!existsSync(readyFile)) {
      if (exit !== undefined || Date.now() > deadline) {
        const why = exit ?? `did not write its ready file within ${opts.timeoutMs ?? 30_000} ms`;
        if (exit === undefined) await this.stopGroup(child, 2_000);
        throw new Error(`${name} (${kind} in ${this.ns(host)}) ${why}; ${log} ends with:\n${tail(log, 15)}`);
      }
      await sleep(50);
    }
    const ready = JSON.parse(readFileSync(readyFile, "utf8")) as { address: string; pid: number };
    const daemon: LabDaemon = { name, host, kind, pid: ready.pid, address: ready.address, log, configFile };
    this.daemons.push(daemon);
    this.log(`${name}: ${kind} serving at ${ready.address} (pid ${ready.pid}, log ${log})`);
    return daemon;
  }

  /**
   * Opens a Harvest client inside a host's namespace (a small Node program using `JobClient`/`DfsClient` from dist/,
   * answering one JSON request per line), for polling faster than one CLI process per look.
   */
  openClient(host: string, clientConfig: string): LabClient {
    const child = this.exec(
      host,
      [
        process.execPath,
        "--input-type=module",
        "-e",
        CLIENT_PROGRAM,
        pathToFileURL(distEntry("client/index.js")).href,
        clientConfig,
      ],
      { stdio: ["pipe", "pipe", "pipe"], name: `${host}-client` },
    );
    return new LabClient(child);
  }

  /**
   * Stops everything and removes the lab: every tracked process group gets SIGTERM, then SIGKILL after `graceMs`; any
   * process still inside a lab namespace (containers in their own groups) is killed; then the namespaces are deleted,
   * the switch last. Idempotent; errors are collected and thrown once everything was tried.
   */
  async destroy(graceMs = 3_000): Promise<void> {
    if (this.state === "destroyed" || this.state === "destroying" || this.state === "new") return;
    this.state = "destroying";
    const errors: string[] = [];
    const running = [...this.processes];
    if (running.length > 0) this.log(`stopping ${running.map((t) => t.name).join(", ")}`);
    await Promise.all(running.map((t) => this.stopGroup(t.child, graceMs)));
    for (const ns of this.namespaces()) {
      // Whatever is left inside (a container whose node manager died, a stray client) goes too.
      for (const pid of namespacePids(ns)) killQuietly(pid, "SIGKILL");
    }
    for (const ns of this.namespaces()) {
      const deadline = Date.now() + 3_000;
      while (namespacePids(ns).length > 0 && Date.now() < deadline) await sleep(50);
      try {
        if (listNamespaces().includes(ns)) ip(["netns", "del", ns]);
      } catch (err) {
        errors.push((err as Error).message);
      }
    }
    process.removeListener("exit", this.onExit);
    this.state = "destroyed";
    this.log(`lab ${this.prefixValue}* removed`);
    if (errors.length > 0) throw new Error(`removing the lab: ${errors.join("; ")}`);
  }

  /** The synchronous last resort (process exit, failed create): SIGKILL everything, delete the namespaces. */
  destroySync(): void {
    if (this.state === "destroyed") return;
    for (const t of this.processes) if (t.child.pid) killQuietly(-t.child.pid, "SIGKILL");
    for (const ns of this.namespaces()) {
      try {
        if (listNamespaces().includes(ns)) removeNamespace(ns);
      } catch {
        // Best effort at exit; a later create() removes what is left (its owner is dead by then).
      }
    }
    process.removeListener("exit", this.onExit);
    this.state = "destroyed";
  }

  /** A host's temporary directory in the run (sticky and writable by all, as /tmp). */
  private tmpDir(host: string): string {
    const dir = join(this.runDir, host, "tmp");
    mkdirSync(dir, { recursive: true });
    chmodSync(dir, 0o1777);
    return dir;
  }

  /** The lab's namespaces, the switch last. */
  private namespaces(): string[] {
    return [...this.hosts.map((h) => `${this.prefixValue}${h.name}`), `${this.prefixValue}${SWITCH}`];
  }

  private requireUp(): void {
    if (this.state !== "up") throw new Error(`the lab is ${this.state}`);
  }

  /** SIGTERM to a child's process group, SIGKILL after `graceMs`; resolves once it exited. */
  private async stopGroup(child: ChildProcess, graceMs: number): Promise<void> {
    const pid = child.pid;
    if (!pid || child.exitCode !== null || child.signalCode !== null) return;
    const exited = new Promise<void>((r) => child.once("exit", () => r()));
    killQuietly(-pid, "SIGTERM");
    const term = await Promise.race([exited.then(() => true), sleep(graceMs).then(() => false)]);
    if (!term) {
      killQuietly(-pid, "SIGKILL");
      await Promise.race([exited, sleep(2_000)]);
    }
    // The group's other members (a daemon's helpers) go with it.
    killQuietly(-pid, "SIGKILL");
  }
}

/**
 * argv that, in the mount namespace `ip netns exec` made for the command (whose mounts do not reach the machine's),
 * binds each `from` at its `to` and masks the `from` with an empty tmpfs, masks each of `dirs` the same way, and then
 * execs `argv`, keeping its pid; a mount that fails ends it with exit code 97 before anything runs.
 */
function maskThenRun(dirs: string[], binds: { from: string; to: string }[], argv: string[]): string[] {
  if (dirs.length === 0 && binds.length === 0) return argv;
  const tmpfs = "mount -t tmpfs -o size=1m,mode=0755 lab-mask";
  const script =
    `while [ "$1" = --bind ]; do mkdir -p "$3" && mount --bind "$2" "$3" && ${tmpfs} "$2" || exit 97; shift 3; done; ` +
    `while [ "$1" != -- ]; do mkdir -p "$1" && ${tmpfs} "$1" || exit 97; shift; done; shift; exec "$@"`;
  const bindArgs = binds.flatMap((b) => ["--bind", b.from, b.to]);
  return ["/bin/sh", "-c", script, "lab-mask", ...bindArgs, ...dirs, "--", ...argv];
}

/** `argv` with every path (or file URL) below `from` moved below `to`. */
function relocated(argv: string[], from: string, to: string): string[] {
  const url = pathToFileURL(from).href;
  return argv.map((a) =>
    a === from || a.startsWith(`${from}/`)
      ? to + a.slice(from.length)
      : a.startsWith(`${url}/`)
        ? pathToFileURL(to).href + a.slice(url.length)
        : a,
  );
}

/** The program `openClient` runs inside a namespace: argv is the client module URL and a client configuration. */
const CLIENT_PROGRAM = `
const [clientUrl, clientConfig] = process.argv.slice(1);
const { JobClient, DfsClient } = await import(clientUrl);
const { createInterface } = await import("node:readline");
const jobs = JobClient.fromConfig(clientConfig);
const dfs = DfsClient.fromConfig(clientConfig);
const { createHash, randomBytes } = await import("node:crypto");
const haAdmin = await import(new URL("../common/ha-admin.js", clientUrl).href);
const grpc = await import(new URL("../common/grpc.js", clientUrl).href);
const { clientSecurityOf } = await import(new URL("./client-config.js", clientUrl).href);
const security = clientSecurityOf(clientConfig);
const ops = {
  nodes: () => jobs.nodes(),
  datanodes: () => dfs.datanodes(),
  fsck: (path) => dfs.fsck(path),
  status: (appId) => jobs.status(appId),
  blockLocations: (path) => dfs.blockLocations(path),
  // One master's HA role and term (the admin's certificate).
  haStatus: async (address) => {
    const c = grpc.makeClient(haAdmin.loadHaAdminProto().HaAdmin, address, security);
    try {
      const s = await grpc.call(c, c.getHaStatus, {}, 2000);
      return { role: s.role, epoch: Number(s.epoch), activeAddress: s.activeAddress };
    } finally { c.close(); }
  },
  // Writes \`bytes\` random bytes; resolves to their sha256 once the file is acknowledged (closed).
  putRandom: (path, bytes, replication) => new Promise((resolve, reject) => {
    const data = randomBytes(bytes);
    const w = dfs.createWriteStream(path, { replication });
    w.on("error", reject);
    w.on("finish", () => resolve(createHash("sha256").update(data).digest("hex")));
    w.end(data);
  }),
  sha256: async (path) => {
    const h = createHash("sha256");
    for await (const chunk of dfs.createReadStream(path)) h.update(chunk);
    return h.digest("hex");
  },
};
const reply = (m) => process.stdout.write(JSON.stringify(m) + "\\n");
const rl = createInterface({ input: process.stdin });
rl.on("line", (line) => {
  const { id, op, args } = JSON.parse(line);
  Promise.resolve()
    .then(() => ops[op](...args))
    .then(
      (result) => reply({ id, ok: true, result }),
      (e) => reply({ id, ok: false, error: { code: e?.code ?? "INTERNAL", message: String(e?.message ?? e) } }),
    );
});
rl.on("close", () => { jobs.close(); dfs.close(); process.exit(0); });
`;

/** An error a `LabClient` call returned: the Harvest error code and message from inside the namespace. */
export class LabClientError extends Error {
  constructor(
    readonly code: string,
    message: string,
  ) {
    super(`${code}: ${message}`);
  }
}

/** A Harvest client running inside a lab namespace (see `NetnsLab.openClient`). */
export class LabClient {
  private nextId = 0;
  private readonly waiting = new Map<number, { resolve: (v: unknown) => void; reject: (e: Error) => void }>();
  private stderr = "";
  private closed = false;

  constructor(private readonly child: ChildProcess) {
    child.stderr?.setEncoding("utf8").on("data", (d: string) => (this.stderr = (this.stderr + d).slice(-4_000)));
    if (child.stdout) {
      createInterface({ input: child.stdout }).on("line", (line) => {
        const msg = JSON.parse(line) as {
          id: number;
          ok: boolean;
          result?: unknown;
          error?: { code: string; message: string };
        };
        const w = this.waiting.get(msg.id);
        if (!w) return;
        this.waiting.delete(msg.id);
        if (msg.ok) w.resolve(msg.result);
        else w.reject(new LabClientError(msg.error?.code ?? "INTERNAL", msg.error?.message ?? "unknown error"));
      });
    }
    child.once("exit", (code, signal) => {
      this.closed = true;
      for (const w of this.waiting.values())
        w.reject(new Error(`the in-namespace client exited (${code ?? signal}): ${this.stderr.trim()}`));
      this.waiting.clear();
    });
  }

  /** Calls one client operation (`nodes`, `datanodes`, `fsck`, `status`, `blockLocations`), bounded by `timeoutMs`. */
  call<T>(op: string, args: unknown[] = [], timeoutMs = 15_000): Promise<T> {
    if (this.closed || !this.child.stdin) return Promise.reject(new Error("the in-namespace client is closed"));
    const id = ++this.nextId;
    return new Promise<T>((resolvePromise, reject) => {
      const timer = setTimeout(() => {
        this.waiting.delete(id);
        reject(new Error(`${op} got no answer within ${timeoutMs} ms`));
      }, timeoutMs);
      this.waiting.set(id, {
        resolve: (v) => {
          clearTimeout(timer);
          resolvePromise(v as T);
        },
        reject: (e) => {
          clearTimeout(timer);
          reject(e);
        },
      });
      this.child.stdin!.write(JSON.stringify({ id, op, args }) + "\n");
    });
  }

  /** Whether the client was closed or its program exited (every call fails from then on). */
  get isClosed(): boolean {
    return this.closed;
  }

  /** Ends the client program (its stdin closes; it exits). */
  close(): void {
    if (this.closed) return;
    this.closed = true;
    this.child.stdin?.end();
  }
}

/** The processes whose working directory is under `dir` (pid and start time), found through /proc. */
export function processesUnder(dir: string): { pid: number; start: string; cwd: string }[] {
  const root = resolve(dir) + "/";
  const out: { pid: number; start: string; cwd: string }[] = [];
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    const pid = Number(entry);
    try {
      const cwd = readlinkSync(`/proc/${pid}/cwd`);
      if (!cwd.startsWith(root)) continue;
      const start = processStartTime(pid);
      if (start) out.push({ pid, start, cwd });
    } catch {
      // Gone, or a kernel thread.
    }
  }
  return out;
}

/** Whether a process recorded by `processesUnder` still runs (same pid and start time). */
export function stillRunning(p: { pid: number; start: string }): boolean {
  return processStartTime(p.pid) === p.start;
}

/** The last `lines` lines of a file ("" when it is missing). */
export function tail(file: string, lines: number): string {
  try {
    return readFileSync(file, "utf8")
      .split("\n")
      .slice(-lines - 1)
      .join("\n");
  } catch {
    return "";
  }
}

function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}
