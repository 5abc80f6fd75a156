/** What a benchmark offers to the dispatcher (run.ts). */
import type { FlagSpec } from "./flags.js";

/** A benchmark's outcome: the human table and the same figures for `--json`. */
export interface BenchReport {
  /** Lines of the human report (tables of figures and ratios against the in-process baseline). */
  lines: string[];
  /** The figures as plain data. */
  result: Record<string, unknown>;
}

/** One benchmark the dispatcher can run. */
export interface BenchDefinition {
  readonly name: string;
  /** One line for the list of benchmarks. */
  readonly summary: string;
  readonly flags: Record<string, FlagSpec>;
  /** Runs with `argv` (the flags after the name, `--json` removed); `progress` writes to stderr. */
  run(argv: readonly string[], progress: (line: string) => void): Promise<BenchReport>;
}
