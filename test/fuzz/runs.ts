/**
 * How much the fuzz tests run: `HARVEST_FUZZ_RUNS` cases per target (default {@link DEFAULT_FUZZ_RUNS}, small enough
 * for the default suite), and `HARVEST_FUZZ_SEED` to replay one run of every property. `npm run fuzz -- --runs N`
 * (scripts/fuzz.mjs) sets both and a long test timeout.
 */
import type fc from "fast-check";
import { ERROR_CODES, HarvestError } from "../../common/errors.js";

/** Cases per target in the default suite. */
export const DEFAULT_FUZZ_RUNS = 200;

function positiveIntFromEnv(name: string): number | undefined {
  const raw = process.env[name];
  if (raw === undefined || raw === "") return undefined;
  const n = Number(raw);
  if (!Number.isInteger(n) || n < 1) throw new Error(`${name} must be a positive integer, got ${JSON.stringify(raw)}`);
  return n;
}

/**
 * Cases per gRPC method in the default suite: fewer than for a parser, since each is a real call to a real daemon (about
 * 10 ms on loopback with TLS) and the fuzz files together must stay near a minute on a 2-core machine.
 */
export const DEFAULT_SERVICE_FUZZ_RUNS = 40;

const RUNS_FROM_ENV = positiveIntFromEnv("HARVEST_FUZZ_RUNS");

/** Cases per parser target: HARVEST_FUZZ_RUNS, else {@link DEFAULT_FUZZ_RUNS}. */
export const FUZZ_RUNS = RUNS_FROM_ENV ?? DEFAULT_FUZZ_RUNS;

/** Cases per service method: HARVEST_FUZZ_RUNS, else {@link DEFAULT_SERVICE_FUZZ_RUNS}. */
export const SERVICE_FUZZ_RUNS = RUNS_FROM_ENV ?? DEFAULT_SERVICE_FUZZ_RUNS;

/** The seed every property starts from when HARVEST_FUZZ_SEED is set (fast-check picks one otherwise). */
export const FUZZ_SEED = positiveIntFromEnv("HARVEST_FUZZ_SEED");

/** Per-test timeout (ms) for a service test of {@link SERVICE_FUZZ_RUNS} cases of about `msPerCase` each. */
export function fuzzTimeoutMs(msPerCase: number): number {
  return Math.max(60_000, Math.ceil(SERVICE_FUZZ_RUNS * msPerCase * 2));
}

/** fast-check parameters for one target: `runs` cases (times `scale`, at least 1), the fixed seed if any. */
export function fuzzParams<T>(scale = 1, runs = FUZZ_RUNS): fc.Parameters<T> {
  return {
    numRuns: Math.max(1, Math.round(runs * scale)),
    ...(FUZZ_SEED !== undefined ? { seed: FUZZ_SEED } : {}),
  };
}

/** Throws unless `err` is a HarvestError with a known code other than INTERNAL (what bad input must produce). */
export function expectCodedError(err: unknown, what: string): HarvestError {
  if (!(err instanceof HarvestError)) {
    const kind = err instanceof Error ? err.constructor.name : typeof err;
    throw new Error(`${what} threw ${kind}, not a HarvestError: ${String(err)}`, { cause: err });
  }
  if (!(err.code in ERROR_CODES)) throw new Error(`${what} threw unknown code ${err.code}: ${err.message}`);
  if (err.code === "INTERNAL") throw new Error(`${what} threw INTERNAL on bad input: ${err.message}`, { cause: err });
  return err;
}

/** Runs `fn`: a return goes to `check` (which throws if the value is invalid); a throw must be a coded error. */
export function parsesOrRefuses<T>(what: string, fn: () => T, check: (value: T) => void = () => undefined): void {
  let value: T;
  try {
    value = fn();
  } catch (err) {
    expectCodedError(err, what);
    return;
  }
  check(value);
}
