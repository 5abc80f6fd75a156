/**
 * `harvest daemon`: one daemon per host. `harvest daemon <kind> --config F` runs it in the foreground (what a systemd
 * unit or a container runs); `harvest daemon start|stop|status <kind> --config F` runs it in the background with a pid
 * file and a log file, as `hdfs --daemon start namenode` does. The config file holds the daemon's own options (README,
 * "Configuration"); the same daemons are what `harvest cluster up` starts on one machine.
 */
import { spawn } from "node:child_process";
import { closeSync, existsSync, mkdirSync, openSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import type { Command } from "commander";
import { runDaemon } from "../common/daemon-main.js";
import type { RunnableDaemon } from "../common/daemon-main.js";
import { errorMessage, HarvestError } from "../common/errors.js";
import { Logger } from "../common/log.js";
import { distEntry } from "../common/paths.js";
import { processStartTime } from "../common/container-leftovers.js";
import { isOurProcess } from "../localcluster/cluster.js";
import { action, print } from "./command-kit.js";
import { checkConfigKind, daemonKindOrSuggest } from "./daemon-config-kind.js";
import { DAEMON_KINDS, SHORT_NAMES as SHORT } from "../localcluster/daemon-kinds.js";
import type { DaemonKind } from "../localcluster/daemon-kinds.js";
import { daemonEnvironment, missingMallocTunables, TUNABLES_VARIABLE } from "../localcluster/malloc-tunables.js";
import { daemonNodeOptions, missingNodeOptions, nodeOptionsVariable } from "../localcluster/node-options.js";

/** A daemon class, whatever its options type: the config file's object is handed to it as it is. */
type DaemonClass = new (config: never) => RunnableDaemon;

/** Each daemon's class, imported when asked for (only that one: a node manager's process never loads the namenode). */
const DAEMON_CLASSES: Record<DaemonKind, () => Promise<DaemonClass>> = {
  // Highly available (a standby that campaigns) when its config has haCoordination.
  resourcemanager: async () => (await import("../resourcemanager/ha-resource-manager.js")).ResourceManagerDaemon,
  namenode: async () => (await import("../namenode/namenode.js")).NameNode,
  nodemanager: async () => (await import("../nodemanager/node-manager.js")).NodeManager,
  datanode: async () => (await import("../datanode/datanode.js")).DataNode,
};

/** Loads the daemon class of `kind`. */
async function daemonFactory(kind: DaemonKind): Promise<(config: Record<string, unknown>) => RunnableDaemon> {
  const Daemon = await DAEMON_CLASSES[kind]();
  return (c) => new Daemon(c as never);
}

/** Runs a daemon in this process until SIGTERM/SIGINT. */
export async function runDaemonForeground(kind: DaemonKind, configFile: string, readyFile?: string): Promise<void> {
  // Node read its options before this script ran: a daemon lacking some can only say so.
  const log = new Logger(SHORT[kind]);
  try {
    const missing = missingNodeOptions(kind);
    if (missing.length > 0)
      log.warn(
        `started without its Node options ${missing.join(" ")} (${nodeOptionsVariable(kind)}); give them to node ` +
          `before the script, as deploy/systemd/harvest-${kind}.service and 'harvest daemon start' do`,
      );
    const tunables = missingMallocTunables(kind);
    if (tunables)
      log.warn(
        `started without its malloc setting ${tunables} (localcluster/malloc-tunables.ts); set it in its environment, as ` +
          `deploy/systemd/harvest-${kind}.service and 'harvest daemon start' do, or set ${TUNABLES_VARIABLE} empty for none`,
      );
  } catch (err) {
    log.warn(errorMessage(err));
  }
  try {
    checkConfigKind(kind, configFile, readDaemonConfigFile(resolve(configFile)));
  } catch (err) {
    log.error("bad configuration", { error: errorMessage(err) });
    process.exitCode = 2;
    return;
  }
  const make = await daemonFactory(kind);
  runDaemon(SHORT[kind], make, ["--config", resolve(configFile), ...(readyFile ? ["--ready-file", readyFile] : [])]);
}

/** Where a background daemon keeps its pid, ready and log files. */
export interface DaemonFiles {
  config: string;
  pidFile: string;
  readyFile: string;
  logFile: string;
}

/**
 * The files of a background daemon: `--pid-dir` (else $HARVEST_PID_DIR, else the daemon's dataDir) holds
 * `harvest-<kind>.pid` and its ready file; `--log-dir` (else $HARVEST_LOG_DIR, else `<dataDir>/logs`) holds
 * `harvest-<kind>.log`.
 */
export function daemonFiles(kind: DaemonKind, configFile: string, pidDir?: string, logDir?: string): DaemonFiles {
  const config = resolve(configFile);
  const parsed = readDaemonConfigFile(config);
  // A config of another kind of daemon names that daemon's dataDir: refuse it before anything is written there.
  checkConfigKind(kind, configFile, parsed);
  const dataDir =
    typeof parsed["dataDir"] === "string" && parsed["dataDir"]
      ? resolve(dirname(config), parsed["dataDir"])
      : undefined;
  const runDir = pidDir ?? process.env["HARVEST_PID_DIR"] ?? dataDir;
  const logs = logDir ?? process.env["HARVEST_LOG_DIR"] ?? (dataDir ? join(dataDir, "logs") : undefined);
  if (!runDir || !logs)
    throw new HarvestError("CONFIG_INVALID", `${config} names no dataDir: pass --pid-dir and --log-dir`);
  const base = `harvest-${kind}`;
  return {
    config,
    pidFile: join(resolve(runDir), `${base}.pid`),
    readyFile: join(resolve(runDir), `${base}.ready`),
    logFile: join(resolve(logs), `${base}.log`),
  };
}

/** A daemon's config file as an object, or CONFIG_INVALID saying why it is not one. */
function readDaemonConfigFile(file: string): Record<string, unknown> {
  let parsed: unknown;
  try {
    parsed = JSON.parse(readFileSync(file, "utf8"));
  } catch (err) {
    throw new HarvestError("CONFIG_INVALID", `cannot read the daemon config ${file}: ${errorMessage(err)}`, {
      details: { file },
    });
  }
  if (typeof parsed !== "object" || parsed === null || Array.isArray(parsed))
    throw new HarvestError("CONFIG_INVALID", `${file} must hold a JSON object of the daemon's options`, {
      details: { file },
    });
  return parsed as Record<string, unknown>;
}

/** A background daemon's state from its pid file: running (the pid is alive and is that daemon) or stopped. */
export function daemonStatus(files: DaemonFiles): { running: boolean; pid?: number; address?: string } {
  const rec = readPidFile(files.pidFile);
  // The pid file is the kind's own, and the start time it records names one process: its command line naming the
  // config is the rest of the proof.
  if (!rec || !isOurProcess(rec.pid, files.config, rec.startTime)) return { running: false };
  let address: string | undefined;
  try {
    address = (JSON.parse(readFileSync(files.readyFile, "utf8")) as { address?: string }).address;
  } catch {
    // Not ready yet.
  }
  return { running: true, pid: rec.pid, ...(address ? { address } : {}) };
}

function readPidFile(file: string): { pid: number; startTime?: string } | undefined {
  try {
    const [pidText, startTime] = readFileSync(file, "utf8").trim().split(/\s+/);
    const pid = Number(pidText);
    return Number.isInteger(pid) && pid > 0 ? { pid, ...(startTime ? { startTime } : {}) } : undefined;
  } catch {
    return undefined;
  }
}

/** Starts a daemon in the background and resolves once it serves (its ready file appeared). */
export async function startDaemonBackground(
  kind: DaemonKind,
  files: DaemonFiles,
  timeoutMs: number,
): Promise<{ pid: number; address: string }> {
  const st = daemonStatus(files);
  if (st.running)
    throw new HarvestError(
      "DAEMON_ALREADY_RUNNING",
      `${kind} is already running as process ${st.pid} (${files.pidFile}); stop it first with 'harvest daemon stop ${kind} --config ${files.config}'`,
    );
  mkdirSync(dirname(files.pidFile), { recursive: true });
  mkdirSync(dirname(files.logFile), { recursive: true });
  rmSync(files.readyFile, { force: true });
  const fd = openSync(files.logFile, "a");
  const cli = distEntry("cli/harvest.js");
  const child = spawn(
    process.execPath,
    [...daemonNodeOptions(kind), cli, "daemon", kind, "--config", files.config, "--ready-file", files.readyFile],
    {
      detached: true,
      stdio: ["ignore", fd, fd],
      env: daemonEnvironment(kind),
    },
  );
  closeSync(fd);
  child.unref();
  const pid = child.pid ?? -1;
  let exitCode: number | null = null;
  child.once("exit", (code) => (exitCode = code ?? -1));
  writeFileSync(files.pidFile, `${pid} ${processStartTime(pid) ?? ""}\n`);
  const deadline = Date.now() + timeoutMs;
  while (!existsSync(files.readyFile)) {
    if (exitCode !== null || Date.now() > deadline) {
      if (exitCode === null && pid > 0) process.kill(pid, "SIGKILL");
      rmSync(files.pidFile, { force: true });
      const tail = existsSync(files.logFile)
        ? readFileSync(files.logFile, "utf8").split("\n").slice(-8).join("\n")
        : "";
      throw new HarvestError(
        "UNAVAILABLE",
        `${kind} did not start (${exitCode !== null ? `exited with ${exitCode}` : "timed out"}); ${files.logFile} ends with:\n${tail}`,
      );
    }
    await new Promise((r) => setTimeout(r, 50));
  }
  const ready = JSON.parse(readFileSync(files.readyFile, "utf8")) as { address: string };
  return { pid, address: ready.address };
}

/** Stops a background daemon: SIGTERM, then SIGKILL after `graceMs`. Fails with DAEMON_NOT_RUNNING when it is not. */
export async function stopDaemonBackground(kind: DaemonKind, files: DaemonFiles, graceMs: number): Promise<number> {
  const st = daemonStatus(files);
  if (!st.running || st.pid === undefined) {
    rmSync(files.pidFile, { force: true });
    throw new HarvestError("DAEMON_NOT_RUNNING", `no ${kind} is running from ${files.config} (${files.pidFile})`);
  }
  const pid = st.pid;
  process.kill(pid, "SIGTERM");
  const deadline = Date.now() + graceMs;
  while (daemonStatus(files).running && Date.now() < deadline) await new Promise((r) => setTimeout(r, 100));
  if (daemonStatus(files).running) process.kill(pid, "SIGKILL");
  rmSync(files.pidFile, { force: true });
  rmSync(files.readyFile, { force: true });
  return pid;
}

interface BackgroundOpts {
  config: string;
  pidDir?: string;
  logDir?: string;
  timeout: string;
  json?: boolean;
}

/** Adds `harvest daemon ...` to the program. */
export function registerDaemonCommands(program: Command): void {
  const daemon = program
    .command("daemon")
    .description("run one daemon on this host: in the foreground (systemd, containers) or in the background");
  for (const kind of DAEMON_KINDS) {
    daemon
      .command(kind)
      .alias(SHORT[kind])
      .description(`run a ${kind} in the foreground until SIGTERM/SIGINT (logs on stderr)`)
      .requiredOption("--config <file>", `the ${kind}'s options (JSON)`)
      .option("--ready-file <file>", "write { address, pid } here once serving")
      .action(async (o: { config: string; readyFile?: string }) => {
        await runDaemonForeground(kind, o.config, o.readyFile);
      });
  }
  const background = (name: string, what: string): Command =>
    daemon
      .command(`${name} <daemon>`)
      .description(what)
      .requiredOption("--config <file>", "the daemon's options (JSON)")
      .option("--pid-dir <dir>", "pid and ready files (default: $HARVEST_PID_DIR, then the daemon's dataDir)")
      .option("--log-dir <dir>", "log file (default: $HARVEST_LOG_DIR, then <dataDir>/logs)")
      .option("--timeout <ms>", "how long to wait", "30000")
      .option("--json", "machine-readable output");
  background("start", "start a daemon in the background (pid file, log file); returns once it serves").action(
    action(
      async (name: string, o: BackgroundOpts) => {
        const kind = daemonKindOrSuggest(name);
        const files = daemonFiles(kind, o.config, o.pidDir, o.logDir);
        const { pid, address } = await startDaemonBackground(kind, files, Number(o.timeout));
        print(o, { daemon: kind, pid, address, pidFile: files.pidFile, logFile: files.logFile }, () =>
          [`${kind} running as process ${pid} at ${address}`, `  pid ${files.pidFile}`, `  log ${files.logFile}`].join(
            "\n",
          ),
        );
      },
      { clusterHint: false },
    ),
  );
  background("stop", "stop a background daemon (SIGTERM, then SIGKILL after --timeout)").action(
    action(async (name: string, o: BackgroundOpts) => {
      const kind = daemonKindOrSuggest(name);
      const files = daemonFiles(kind, o.config, o.pidDir, o.logDir);
      const pid = await stopDaemonBackground(kind, files, Number(o.timeout));
      print(o, { daemon: kind, stopped: pid }, () => `${kind} (process ${pid}) stopped`);
    }),
  );
  background("status", "is a background daemon running? (exit 0 running, 3 stopped)").action(
    action(async (name: string, o: BackgroundOpts) => {
      const kind = daemonKindOrSuggest(name);
      const files = daemonFiles(kind, o.config, o.pidDir, o.logDir);
      const st = daemonStatus(files);
      print(o, { daemon: kind, ...st }, () =>
        st.running ? `${kind} is running as process ${st.pid} at ${st.address ?? "(starting)"}` : `${kind} is stopped`,
      );
      return st.running ? 0 : 3;
    }),
  );
}
