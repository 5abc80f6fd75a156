/** Helpers for the daemons' `resolveXxxOptions()` functions. */
import { HarvestError } from "./errors.js";

/** Drops keys whose value is undefined so that they do not override defaults. */
export function stripUndefined<T extends object>(o: T): Partial<T> {
  return Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined)) as Partial<T>;
}

/**
 * The defaults with the options given laid over them (undefined leaves a default), after checking that each given
 * option has the kind of value its default has (an object, a list, a string, a number, a boolean): a `null` or a
 * number where an object belongs is CONFIG_INVALID naming the field, not a TypeError deep in a daemon's start.
 */
export function mergeOptions<T extends object>(daemon: string, defaults: T, partial: object): T {
  for (const [k, v] of Object.entries(partial)) {
    const d = (defaults as Record<string, unknown>)[k];
    if (v === undefined || d === undefined) continue;
    const want = kindOf(d);
    if (kindOf(v) !== want) invalidOption(daemon, k, `must be ${want} (got ${kindOf(v)})`);
  }
  return { ...defaults, ...stripUndefined(partial) } as T;
}

function kindOf(v: unknown): string {
  if (v === null) return "null";
  if (Array.isArray(v)) return "a list";
  if (typeof v === "object") return "an object";
  return `a ${typeof v}`;
}

/** Throws CONFIG_INVALID naming the daemon's option. */
export function invalidOption(daemon: string, field: string, why: string): never {
  throw new HarvestError("CONFIG_INVALID", `${daemon} option ${field} ${why}`, { details: { field } });
}

/** What a policy's `resolveXxxOptions()` works with (see {@link optionResolution}). */
export interface OptionResolution<T> {
  /** The defaults with the given options laid over them (an undefined option keeps its default). */
  o: T;
  /** Throws CONFIG_INVALID "<scope> option <field> <why>". */
  bad: (field: string, why: string) => never;
  /**
   * Throws CONFIG_INVALID "<scope> option <field> must be <what>, got <value>" unless the field of `o` holds a finite
   * number for which `ok` holds.
   */
  check: (field: keyof T & string, ok: (v: number) => boolean, what: string) => void;
}

/**
 * The one start of every policy's option resolver: the defaults with the given options over them, and the two ways
 * to reject a field (both CONFIG_INVALID naming `<scope> option <field>`).
 */
export function optionResolution<T extends object>(
  scope: string,
  defaults: Readonly<T>,
  partial: Partial<T>,
): OptionResolution<T> {
  const o = { ...defaults, ...stripUndefined(partial) } as T;
  const bad = (field: string, why: string): never => invalidOption(scope, field, why);
  const check = (field: keyof T & string, ok: (v: number) => boolean, what: string): void => {
    const v = o[field] as unknown;
    if (typeof v !== "number" || !Number.isFinite(v) || !ok(v)) bad(field, `must be ${what}, got ${String(v)}`);
  };
  return { o, bad, check };
}

/**
 * Throws INVALID_ARGUMENT naming an option of `what` (an experiment, a job stream, a simulated policy): the one
 * resolver error of the simulator's and the benches' options, as `invalidOption` is the daemons'.
 */
export function invalidArgument(what: string, field: string, why: string): never {
  throw new HarvestError("INVALID_ARGUMENT", `${what} option ${field} ${why}`, { details: { field } });
}

/** A daemon's TLS files as its configuration gives them (`tls: { ca, cert, key }`). */
export interface TlsOption {
  ca: string;
  cert: string;
  key: string;
}

/**
 * Checks a daemon's `tls` option: absent, or `{ ca, cert, key }` naming PEM files (the cluster CA's certificate, the
 * daemon's certificate from `harvest security issue --role daemon`, and its key).
 */
export function checkTlsOption(daemon: string, tls: unknown): TlsOption | undefined {
  if (tls === undefined || tls === null) return undefined;
  const t = tls as Record<string, unknown>;
  if (typeof tls !== "object" || Array.isArray(tls))
    invalidOption(daemon, "tls", "must be { ca, cert, key }: paths of PEM files");
  for (const f of ["ca", "cert", "key"] as const)
    if (typeof t[f] !== "string" || (t[f] as string).length === 0)
      invalidOption(daemon, `tls.${f}`, "must be the path of a PEM file");
  return { ca: t["ca"] as string, cert: t["cert"] as string, key: t["key"] as string };
}

/**
 * Checks a daemon's `tls` and `insecure` options in place (every daemon has both): `tls` as {@link checkTlsOption},
 * `insecure` a boolean.
 */
export function checkSecurityOptions(daemon: string, o: { tls?: TlsOption; insecure: boolean }): void {
  const tls = checkTlsOption(daemon, o.tls);
  if (tls) o.tls = tls;
  if (typeof o.insecure !== "boolean") invalidOption(daemon, "insecure", "must be true or false");
}

/**
 * Secure by default: a daemon started from a configuration file must have `tls`, or say `insecure: true` (a throwaway
 * local cluster only). The daemon classes themselves serve plaintext without `tls`, for tests and benchmarks that
 * measure the difference, and log loudly that they do.
 */
export function requireSecurityChoice(daemon: string, config: Record<string, unknown>): void {
  if (config["tls"] !== undefined || config["insecure"] === true) return;
  invalidOption(
    daemon,
    "tls",
    "is required: { ca, cert, key } from `harvest security issue --role daemon` (or insecure: true for a throwaway " +
      "local cluster, which authenticates nobody)",
  );
}

/** What a daemon logs at start when it serves without TLS. */
export const INSECURE_WARNING =
  "INSECURE: serving plaintext gRPC with no authentication; anyone who can reach this port can act as anyone " +
  "(use only for a throwaway local cluster)";
