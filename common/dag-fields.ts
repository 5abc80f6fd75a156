/**
 * The field checks of the DAG file's parsers (common/dag-spec.ts and the modules of its parts): each failure is a
 * HarvestError whose `details.field` is the offending field's path, worded alike for every part of the file.
 */
import { HarvestError } from "./errors.js";
import type { ErrorCode } from "./errors.js";

export function expectObject(value: unknown, at: string, message: string): Record<string, unknown> {
  if (typeof value !== "object" || value === null || Array.isArray(value))
    invalid(at, `${message}, got ${show(value)}`);
  return value as Record<string, unknown>;
}

export function rejectUnknownFields(obj: Record<string, unknown>, known: string[], at: string): void {
  for (const key of Object.keys(obj)) {
    if (!known.includes(key)) {
      const path = at === "" ? key : `${at}.${key}`;
      invalid(path, `unknown field ${path}; the fields allowed here are ${known.join(", ")} (check the spelling)`);
    }
  }
}

/** A DAG_INVALID_FIELD error for `field`. */
export function invalid(field: string, message: string): never {
  fail("DAG_INVALID_FIELD", field, message);
}

export function fail(code: ErrorCode, field: string, message: string): never {
  throw new HarvestError(code, message, { details: { field } });
}

/** A value as an error message shows it ("nothing (the field is missing)", "an array", a short JSON). */
export function show(value: unknown): string {
  if (value === undefined) return "nothing (the field is missing)";
  if (Array.isArray(value)) return value.length === 0 ? "an empty array" : "an array";
  if (value === null) return "null";
  if (typeof value === "object") return "an object";
  const text = JSON.stringify(value);
  return text.length > 40 ? `${text.slice(0, 37)}...` : text;
}
