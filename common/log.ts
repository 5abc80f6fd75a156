/** A small leveled logger: one line per event, to stderr (daemons redirect it to their log file). */

export type LogLevel = "debug" | "info" | "warn" | "error";
const ORDER: Record<LogLevel, number> = { debug: 10, info: 20, warn: 30, error: 40 };

/** Logs lines prefixed with time, level and component. */
export class Logger {
  constructor(
    readonly component: string,
    private readonly level: LogLevel = (process.env["HARVEST_LOG_LEVEL"] as LogLevel | undefined) ?? "info",
    private readonly sink: (line: string) => void = (line) => process.stderr.write(line + "\n"),
  ) {}

  child(component: string): Logger {
    return new Logger(`${this.component}/${component}`, this.level, this.sink);
  }
  debug(msg: string, fields?: Record<string, unknown>): void {
    this.write("debug", msg, fields);
  }
  info(msg: string, fields?: Record<string, unknown>): void {
    this.write("info", msg, fields);
  }
  warn(msg: string, fields?: Record<string, unknown>): void {
    this.write("warn", msg, fields);
  }
  error(msg: string, fields?: Record<string, unknown>): void {
    this.write("error", msg, fields);
  }

  private write(level: LogLevel, msg: string, fields?: Record<string, unknown>): void {
    if (ORDER[level] < ORDER[this.level]) return;
    const extra = fields ? " " + JSON.stringify(fields) : "";
    this.sink(`${new Date().toISOString()} ${level.toUpperCase().padEnd(5)} [${this.component}] ${msg}${extra}`);
  }
}
