/**
 * Notices when a daemon's event loop was blocked: a timer that fires late by more than `thresholdMs` logs how long the
 * loop stood still. A node manager that stands still misses its heartbeats (the resource manager then declares its
 * containers lost) and cannot give cores back to its primary tenant, so an operator needs to see it in the log.
 */
import type { Logger } from "./log.js";

/** Checks every `intervalMs`; returns a function that stops the watch. */
export function watchEventLoopStalls(
  log: Logger,
  opts: { intervalMs?: number; thresholdMs?: number; now?: () => number } = {},
): () => void {
  const intervalMs = opts.intervalMs ?? 500;
  const thresholdMs = opts.thresholdMs ?? 1_000;
  const now = opts.now ?? (() => performance.now());
  let last = now();
  const timer = setInterval(() => {
    const t = now();
    const lateMs = t - last - intervalMs;
    last = t;
    if (lateMs > thresholdMs)
      log.warn("event loop was blocked (heartbeats and timers were late)", { blockedMs: Math.round(lateMs) });
  }, intervalMs);
  timer.unref();
  return () => clearInterval(timer);
}
