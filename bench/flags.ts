/** Command-line flags of the benchmarks: `--name value`, `--name=value` and bare boolean switches, typed by a spec. */

/** How one flag is parsed. */
export type FlagSpec =
  | { kind: "int"; default: number; min?: number; help: string }
  | { kind: "number"; default: number; min?: number; help: string }
  | { kind: "choice"; default: string; choices: readonly string[]; help: string }
  | { kind: "bool"; help: string };

/** The parsed value type of a spec entry. */
export type FlagValue<S extends FlagSpec> = S extends { kind: "bool" }
  ? boolean
  : S extends { kind: "choice" }
    ? string
    : number;

/** Parsed flags, keyed by name. */
export type Flags<T extends Record<string, FlagSpec>> = { [K in keyof T]: FlagValue<T[K]> };

/** A flag the benchmark does not know or a value it cannot use; run.js prints it with the usage and exits 2. */
export class BenchUsageError extends Error {
  readonly code = "BENCH_USAGE";
  constructor(message: string) {
    super(message);
    this.name = "BenchUsageError";
  }
}

/** Parses `argv` against `spec`; throws BenchUsageError naming the flag on anything it cannot use. */
export function parseFlags<T extends Record<string, FlagSpec>>(argv: readonly string[], spec: T): Flags<T> {
  const out: Record<string, number | string | boolean> = {};
  for (const [name, s] of Object.entries(spec)) out[name] = s.kind === "bool" ? false : s.default;
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i] ?? "";
    if (!arg.startsWith("--")) throw new BenchUsageError(`unexpected argument ${JSON.stringify(arg)}`);
    const eq = arg.indexOf("=");
    const name = arg.slice(2, eq < 0 ? undefined : eq);
    const s = spec[name];
    if (!s) throw new BenchUsageError(`unknown flag --${name}`);
    if (s.kind === "bool") {
      if (eq >= 0) throw new BenchUsageError(`--${name} takes no value`);
      out[name] = true;
      continue;
    }
    let raw: string | undefined;
    if (eq >= 0) raw = arg.slice(eq + 1);
    else raw = argv[++i];
    if (raw === undefined) throw new BenchUsageError(`--${name} needs a value`);
    if (s.kind === "choice") {
      if (!s.choices.includes(raw))
        throw new BenchUsageError(`--${name} must be one of ${s.choices.join(", ")} (got ${raw})`);
      out[name] = raw;
      continue;
    }
    const n = Number(raw);
    if (raw.trim() === "" || !Number.isFinite(n)) throw new BenchUsageError(`--${name} must be a number (got ${raw})`);
    if (s.kind === "int" && !Number.isInteger(n))
      throw new BenchUsageError(`--${name} must be an integer (got ${raw})`);
    if (s.min !== undefined && n < s.min) throw new BenchUsageError(`--${name} must be >= ${s.min} (got ${raw})`);
    out[name] = n;
  }
  return out as Flags<T>;
}

/** One line per flag, for the usage text. */
export function describeFlags(spec: Record<string, FlagSpec>): string[] {
  return Object.entries(spec).map(([name, s]) => {
    const value = s.kind === "bool" ? "" : s.kind === "choice" ? ` <${s.choices.join("|")}>` : " <n>";
    const dflt = s.kind === "bool" ? "" : ` (default ${s.default})`;
    return `  --${name}${value}`.padEnd(34) + `${s.help}${dflt}`;
  });
}
