/** Small helpers for Node streams under gRPC: waiting for 'drain' without hanging on a stream that died. */
/** Anything that can ask its writer to wait: a Node stream, a gRPC call, a block transfer connection. */
export interface Drainable {
  readonly writableNeedDrain: boolean;
  on(event: string, listener: () => void): unknown;
  off(event: string, listener: () => void): unknown;
}

/**
 * Resolves once `stream` can take more writes: at once when it does not need draining, else on 'drain', or when the
 * stream closes, errors or finishes, or `signal` aborts (so that a dead peer never leaves a writer waiting).
 */
export function drained(stream: Drainable, signal?: AbortSignal): Promise<void> {
  if (!stream.writableNeedDrain || signal?.aborted) return Promise.resolve();
  return new Promise((resolve) => {
    const done = (): void => {
      stream.off("drain", done);
      stream.off("close", done);
      stream.off("error", done);
      stream.off("finish", done);
      signal?.removeEventListener("abort", done);
      resolve();
    };
    stream.on("drain", done);
    stream.on("close", done);
    stream.on("error", done);
    stream.on("finish", done);
    signal?.addEventListener("abort", done, { once: true });
  });
}

/** Resolves after `ms`, or at once when `signal` aborts. */
export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  if (ms <= 0 || signal?.aborted) return Promise.resolve();
  return new Promise((resolve) => {
    const done = (): void => {
      clearTimeout(timer);
      signal?.removeEventListener("abort", done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    signal?.addEventListener("abort", done, { once: true });
  });
}
