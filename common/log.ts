/**
 * Harvest's leveled logger, built on pino: one line per event, written synchronously to stderr (daemons redirect it
 * to their log file) or to a sink, so that a daemon killed with -9 loses no line it logged.
 *
 * Two formats, chosen by `HARVEST_LOG_FORMAT`:
 * - `text` (the default; `pretty` is the same): `<ISO time> <LEVEL> [<component>] <message> <fields as JSON>`, for
 *   people at a terminal and for the tests that grep daemon logs, which is why it stays the default for log files too
 *   (harnesses measure with the typed events of common/events.ts, never with log wording);
 * - `json`: pino's JSON lines, `{"level":"info","time":"<ISO>","component":"rm",...fields,"msg":"..."}`, for log
 *   shippers. Field names that would collide with those four keys are written with a leading underscore.
 *
 * The level comes from the constructor or `HARVEST_LOG_LEVEL` (debug, info, warn, error; default info). No worker
 * threads (pino transports) are used: a daemon's log line is on disk before the call that logged it returns.
 */
import { pino } from "pino";
import type { DestinationStream, Logger as PinoLogger } from "pino";

/** The levels Harvest logs at, least severe first. */
export type LogLevel = "debug" | "info" | "warn" | "error";

/** How lines are written: the historical text line, or pino's JSON line. */
export type LogFormat = "text" | "json";

const LEVELS: readonly LogLevel[] = ["debug", "info", "warn", "error"];

/** Keys a JSON line has of its own; a field of the same name is written as `_<key>`. */
const RESERVED_KEYS = new Set(["level", "time", "component", "msg"]);

/** Environment variables that were set to values this module does not know, each reported once per process. */
const reportedBadEnv = new Set<string>();

/** Whether `value` names a level. */
export function isLogLevel(value: unknown): value is LogLevel {
  return typeof value === "string" && (LEVELS as readonly string[]).includes(value);
}

/** The format `HARVEST_LOG_FORMAT` asks for: `json`, else text (`text`, `pretty`, unset or unknown). */
export function logFormatFromEnv(env: NodeJS.ProcessEnv = process.env): LogFormat {
  const v = env["HARVEST_LOG_FORMAT"]?.trim().toLowerCase();
  return v === "json" ? "json" : "text";
}

/** The level `HARVEST_LOG_LEVEL` asks for; info when unset or unknown. */
export function logLevelFromEnv(env: NodeJS.ProcessEnv = process.env): LogLevel {
  const v = env["HARVEST_LOG_LEVEL"]?.trim().toLowerCase();
  return isLogLevel(v) ? v : "info";
}

/** Writes to stderr; synchronous for files and pipes on Linux (Node's process I/O), so nothing waits in memory. */
function stderrSink(line: string): void {
  process.stderr.write(line + "\n");
}

/** Logs events of a component (`rm`, `nm:server-1/capping`) at or above its level. */
export class Logger {
  private readonly out: PinoLogger;
  private readonly format: LogFormat;

  /**
   * @param component named in every line; `child()` appends `/<name>`.
   * @param level the least severe level written. @default HARVEST_LOG_LEVEL, else "info"
   * @param sink receives each line, without its newline. @default a write to stderr
   */
  constructor(
    readonly component: string,
    private readonly level: LogLevel = logLevelFromEnv(),
    private readonly sink: (line: string) => void = stderrSink,
  ) {
    this.format = logFormatFromEnv();
    const write = this.format === "json" ? (line: string) => sink(line) : (line: string) => sink(textLine(line));
    // pino ends each line with "\n" and calls write once per event, synchronously.
    const destination: DestinationStream = { write: (s: string) => write(s.endsWith("\n") ? s.slice(0, -1) : s) };
    this.out = pino(
      {
        level: isLogLevel(level) ? level : "info",
        base: null,
        timestamp: pino.stdTimeFunctions.isoTime,
        formatters: { level: (label) => ({ level: label }) },
      },
      destination,
    ).child({ component });
    reportBadEnv(this);
  }

  /** A logger for a part of this component (`rm` -> `rm/scheduler`), with the same level and sink. */
  child(component: string): Logger {
    return new Logger(`${this.component}/${component}`, this.level, this.sink);
  }

  /** Logs a detail useful when chasing a problem (written only at level debug). */
  debug(msg: string, fields?: Record<string, unknown>): void {
    this.write("debug", msg, fields);
  }

  /** Logs a normal event. */
  info(msg: string, fields?: Record<string, unknown>): void {
    this.write("info", msg, fields);
  }

  /** Logs something wrong that the daemon works around. */
  warn(msg: string, fields?: Record<string, unknown>): void {
    this.write("warn", msg, fields);
  }

  /** Logs a failure that needs a person. */
  error(msg: string, fields?: Record<string, unknown>): void {
    this.write("error", msg, fields);
  }

  private write(level: LogLevel, msg: string, fields?: Record<string, unknown>): void {
    if (!this.out.isLevelEnabled(level)) return;
    if (fields === undefined) this.out[level](msg);
    else this.out[level](safeFields(fields), msg);
  }
}

/** The fields with the keys a line has of its own renamed, so that no JSON line has a key twice. */
function safeFields(fields: Record<string, unknown>): Record<string, unknown> {
  let clash = false;
  for (const k of Object.keys(fields)) if (RESERVED_KEYS.has(k)) clash = true;
  if (!clash) return fields;
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(fields)) out[RESERVED_KEYS.has(k) ? `_${k}` : k] = v;
  return out;
}

/**
 * pino's JSON line as the text line: `<time> <LEVEL> [<component>] <msg> <other fields>`. The fields keep pino's
 * serialization (errors under `err` with their stack, circular references marked, bigints as numbers).
 */
function textLine(json: string): string {
  let o: Record<string, unknown>;
  try {
    o = JSON.parse(json) as Record<string, unknown>;
  } catch {
    return json;
  }
  const { level, time, component, msg, ...fields } = o;
  const extra = Object.keys(fields).length > 0 ? " " + JSON.stringify(fields) : "";
  return `${String(time)} ${String(level).toUpperCase().padEnd(5)} [${String(component)}] ${String(msg ?? "")}${extra}`;
}

/** Says once per process, through `log`, that HARVEST_LOG_LEVEL or HARVEST_LOG_FORMAT has a value it ignores. */
function reportBadEnv(log: Logger): void {
  const checks: [string, readonly string[]][] = [
    ["HARVEST_LOG_LEVEL", LEVELS],
    ["HARVEST_LOG_FORMAT", ["text", "pretty", "json"]],
  ];
  for (const [name, known] of checks) {
    const raw = process.env[name];
    const v = raw?.trim().toLowerCase();
    if (v === undefined || v === "" || known.includes(v) || reportedBadEnv.has(name)) continue;
    reportedBadEnv.add(name);
    log.warn(`${name} is not one of ${known.join(", ")}; ignored`, { value: raw });
  }
}
