/**
 * The one polling helper of the tests: waits for an observable condition (a state, a file, a metric, an RPC answer)
 * instead of sleeping for a guessed time, and names what it awaited when it times out.
 */

/** How `waitFor` polls. */
export interface WaitForOptions {
  /** What is awaited, named in the timeout error; a function is read at the timeout, to show the last state seen. */
  what: string | (() => string);
  /**
   * How long to wait before failing.
   * @default 20_000
   */
  timeoutMs?: number;
  /**
   * The pause between two checks.
   * @default 100
   */
  intervalMs?: number;
  /**
   * Whether a check that throws (or rejects) counts as "not yet" rather than failing the wait at once; the last error
   * is named in the timeout error.
   * @default false
   */
  retryOnError?: boolean;
}

/** A value the check returns while the condition does not hold yet. */
type NotYet = undefined | false;

/**
 * Polls `check` until it returns something other than `undefined` or `false`, and returns that. A check that answers a
 * boolean resolves to `true`; one that answers a value resolves to the value. Throws `timed out after N ms waiting for
 * <what>` when `timeoutMs` passes first.
 */
export async function waitFor<T>(check: () => T | NotYet | Promise<T | NotYet>, opts: WaitForOptions): Promise<T> {
  const timeoutMs = opts.timeoutMs ?? 20_000;
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    let lastError: unknown;
    try {
      const value = await check();
      if (value !== undefined && value !== false) return value;
    } catch (err) {
      if (!opts.retryOnError) throw err;
      lastError = err;
    }
    if (Date.now() > deadline) {
      const what = typeof opts.what === "function" ? opts.what() : opts.what;
      const last = lastError === undefined ? "" : ` (last error: ${(lastError as Error).message ?? String(lastError)})`;
      throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}${last}`);
    }
    await new Promise((resolve) => setTimeout(resolve, opts.intervalMs ?? 100));
  }
}
