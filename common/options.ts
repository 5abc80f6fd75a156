/** Helpers for the daemons' `resolveXxxOptions()` functions. */
import { HarvestError } from "./errors.js";

/** Drops keys whose value is undefined so that they do not override defaults. */
export function stripUndefined<T extends object>(o: T): Partial<T> {
  return Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined)) as Partial<T>;
}

/** Throws CONFIG_INVALID naming the daemon's option. */
export function invalidOption(daemon: string, field: string, why: string): never {
  throw new HarvestError("CONFIG_INVALID", `${daemon} option ${field} ${why}`, { details: { field } });
}
