/** Test helpers: the Harvest error code a promise rejects with, and the HarvestError a call throws. */
import { isHarvestError } from "../common/errors.js";
import type { HarvestError } from "../common/errors.js";

export async function codeOf(p: Promise<unknown>): Promise<string> {
  try {
    await p;
    return "OK";
  } catch (err) {
    return isHarvestError(err) ? err.code : `non-harvest error: ${String(err)}`;
  }
}

/** Test helper: the HarvestError `fn` throws (a non-Harvest error is rethrown; a return fails the test). */
export function thrown(fn: () => unknown): HarvestError {
  try {
    fn();
  } catch (err) {
    if (isHarvestError(err)) return err;
    throw err;
  }
  throw new Error("expected a HarvestError, got a return");
}
