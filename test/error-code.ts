/** Test helper: the Harvest error code a promise rejects with ("OK" when it resolves). */
import { isHarvestError } from "../common/errors.js";

export async function codeOf(p: Promise<unknown>): Promise<string> {
  try {
    await p;
    return "OK";
  } catch (err) {
    return isHarvestError(err) ? err.code : `non-harvest error: ${String(err)}`;
  }
}
