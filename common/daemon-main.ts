/**
 * What every daemon's main.ts does: read its options from a JSON file (`--config <file>`), start, write a ready file
 * (`--ready-file <file>`: address and pid, written atomically) so launchers know where it serves, and stop cleanly on
 * SIGTERM/SIGINT. A daemon never dies of an unhandled rejection: it is logged. An HA master whose active term ended
 * (`demoted`) is stopped and a fresh one started in its place, a standby, on the same ports (again and again, backing
 * off, until one starts).
 */
import { readFileSync } from "node:fs";
import { writeFileAtomic } from "./atomic-file.js";
import { errorMessage } from "./errors.js";
import { watchEventLoopStalls } from "./stall-watch.js";
import { Logger } from "./log.js";
import { requireSecurityChoice } from "./options.js";

/** A demoted master's restarts as a standby, when one fails: the first wait, doubled up to the last. */
const RESTART_BACKOFF_MS = 1_000;
const RESTART_BACKOFF_MAX_MS = 10_000;

/** What a daemon main needs from its daemon class. */
export interface RunnableDaemon {
  start(): Promise<void>;
  stop(): Promise<void>;
  readonly address: string;
  /** Base URL of the daemon's web server (UI, REST API, /metrics), when it serves one. */
  readonly httpUrl?: string | undefined;
  /** HA: settles (with the reason) when the daemon's active term ended and it must start again as a standby. */
  readonly demoted?: Promise<string>;
}

/** The port of `host:port` or a URL (0 if none). */
function portOf(address: string | undefined): number {
  const m = /:(\d+)\/?$/.exec(address ?? "");
  return m ? Number(m[1]) : 0;
}

/** Parses `--config` and `--ready-file` from argv. */
export function daemonArgs(argv: string[]): { config: Record<string, unknown>; readyFile: string | undefined } {
  const at = (flag: string): string | undefined => {
    const i = argv.indexOf(flag);
    return i >= 0 ? argv[i + 1] : undefined;
  };
  const configPath = at("--config");
  const config = configPath ? (JSON.parse(readFileSync(configPath, "utf8")) as Record<string, unknown>) : {};
  return { config, readyFile: at("--ready-file") };
}

/** Starts `make(config)` as this process's daemon; `argv` holds `--config <file>` and `--ready-file <file>`. */
export function runDaemon(
  name: string,
  make: (config: Record<string, unknown>) => RunnableDaemon,
  argv: string[] = process.argv.slice(2),
): void {
  const log = new Logger(name);
  process.on("unhandledRejection", (err) => log.error("unhandled rejection", { error: errorMessage(err) }));
  let daemon: RunnableDaemon;
  let readyFile: string | undefined;
  let args: ReturnType<typeof daemonArgs> = { config: {}, readyFile: undefined };
  try {
    args = daemonArgs(argv);
    readyFile = args.readyFile;
    daemon = make(args.config);
    // After the daemon's own checks, so that a config's other mistakes are named first.
    requireSecurityChoice(name, args.config);
  } catch (err) {
    log.error("bad configuration", { error: errorMessage(err) });
    process.exit(2);
  }
  const stop = (sig: string): void => {
    log.info(`${sig}: stopping`);
    daemon.stop().then(
      () => process.exit(0),
      () => process.exit(1),
    );
  };
  process.once("SIGTERM", () => stop("SIGTERM"));
  process.once("SIGINT", () => stop("SIGINT"));
  // A demoted master restarts in place: the same options, on the ports it had (peers and clients know them).
  const restartOnDemotion = (d: RunnableDaemon): void => {
    void d.demoted?.then(async (reason) => {
      log.warn("restarting as a standby", { reason });
      await d.stop().catch((err: unknown) => log.error("stopping failed", { error: errorMessage(err) }));
      const config = { ...args.config };
      if (!config.port) config.port = portOf(d.address);
      if (!config.httpPort && d.httpUrl) config.httpPort = portOf(d.httpUrl);
      // Until it starts: the term often ends because the coordination service is out of reach, and a standby that
      // gave up would leave the service one master short once it is back.
      for (let attempt = 1; ; attempt++) {
        daemon = make(config);
        try {
          await daemon.start();
          break;
        } catch (err) {
          const waitMs = Math.min(RESTART_BACKOFF_MAX_MS, RESTART_BACKOFF_MS * 2 ** (attempt - 1));
          log.error("could not start again; trying again", { error: errorMessage(err), attempt, waitMs });
          await daemon.stop().catch(() => undefined);
          await new Promise((resolve) => setTimeout(resolve, waitMs));
        }
      }
      restartOnDemotion(daemon);
    });
  };
  restartOnDemotion(daemon);
  daemon.start().then(
    () => {
      watchEventLoopStalls(log);
      if (readyFile) {
        writeFileAtomic(
          readyFile,
          JSON.stringify({
            address: daemon.address,
            pid: process.pid,
            ...(daemon.httpUrl ? { httpUrl: daemon.httpUrl } : {}),
          }),
        );
      }
    },
    (err: unknown) => {
      log.error("could not start", { error: errorMessage(err) });
      process.exit(1);
    },
  );
}
