/**
 * The burn helper: a child process of the node manager that makes a replayed primary-tenant trace real load on the
 * machine, so that the `proc` monitor (and everything else on the machine) sees it. Started by BurnPrimaryMonitor
 * with an IPC channel; it receives one `start` message with the series and replays it on the wall clock.
 *
 * Each 100 ms slot the target is cpuPct/100 of the machine's cores; it is spread over worker threads (one per core of
 * the machine, os.cpus().length), each busy for its duty share of the slot and asleep for the rest: a target of 1.3
 * cores runs one worker flat out and another 30 % of each slot.
 * The helper exits when its parent goes away (IPC disconnect or a changed ppid), on SIGTERM, or on a `stop` message.
 */
import { cpus } from "node:os";
import { Worker } from "node:worker_threads";
import type { UtilizationSeries } from "./trace-io.js";
import { valueAt } from "./trace-io.js";

/** The message that starts a burn. */
export interface BurnStartMessage {
  type: "start";
  series: UtilizationSeries;
  /** Trace ms per wall ms. */
  speed: number;
  /** Where in the trace (ms after its start) the replay begins. */
  offsetMs: number;
}

/** What the helper tells its parent. */
export type BurnHelperReport = { type: "ready"; workerLimit: number } | { type: "error"; message: string };

/** The length of one duty-cycle slot. */
const BURN_SLOT_MS = 100;

// Runs inside each worker thread (eval'd as CommonJS). Shared Int32Array: [stop flag, duty per-mille of worker 0, ...].
const WORKER_SOURCE = `
const { workerData } = require("node:worker_threads");
const control = new Int32Array(workerData.shared);
const index = workerData.index;
const sleeper = new Int32Array(new SharedArrayBuffer(4));
const slotMs = workerData.slotMs;
let sink = 0;
while (Atomics.load(control, 0) === 0) {
  const slotStart = performance.now();
  const busyUntil = slotStart + (Atomics.load(control, 1 + index) / 1000) * slotMs;
  while (performance.now() < busyUntil) {
    for (let i = 0; i < 1000; i++) sink = (sink + Math.sqrt(i + sink)) % 1e9;
  }
  const restMs = slotStart + slotMs - performance.now();
  if (restMs > 0) Atomics.wait(sleeper, 0, 0, restMs);
}
`;

function isStartMessage(msg: unknown): msg is BurnStartMessage {
  const m = msg as Partial<BurnStartMessage> | null;
  return (
    typeof m === "object" &&
    m !== null &&
    m.type === "start" &&
    typeof m.speed === "number" &&
    typeof m.offsetMs === "number" &&
    typeof m.series === "object" &&
    Array.isArray(m.series.timesMs) &&
    Array.isArray(m.series.cpuPct) &&
    m.series.timesMs.length > 0
  );
}

function report(msg: BurnHelperReport): void {
  if (process.send) process.send(msg);
}

/** Replays `start` on the wall clock until the process exits; reports ready once every worker runs. */
async function burn(start: BurnStartMessage): Promise<void> {
  const workerLimit = Math.max(1, cpus().length);
  const shared = new SharedArrayBuffer(4 * (1 + workerLimit));
  const control = new Int32Array(shared);
  // One worker per core, all started up front: a worker takes tens of ms to boot, too slow to wait for when a spike
  // arrives. Workers with a zero duty sleep whole slots.
  const workers = Array.from(
    { length: workerLimit },
    (_, index) =>
      new Worker(WORKER_SOURCE, {
        eval: true,
        workerData: { shared, index, slotMs: BURN_SLOT_MS },
      }),
  );
  await Promise.all(
    workers.map(
      (worker) =>
        new Promise<void>((resolve, reject) => {
          worker.once("online", resolve);
          worker.once("error", reject);
        }),
    ),
  );
  for (const worker of workers) worker.unref();

  const startedAtMs = Date.now();
  const tick = (): void => {
    const traceOffsetMs = start.offsetMs + (Date.now() - startedAtMs) * start.speed;
    const cores = (valueAt(start.series, traceOffsetMs) / 100) * workerLimit;
    for (let k = 0; k < workerLimit; k++) {
      Atomics.store(control, 1 + k, Math.round(Math.min(1, Math.max(0, cores - k)) * 1000));
    }
  };
  tick();
  setInterval(tick, BURN_SLOT_MS);
  report({ type: "ready", workerLimit });
}

function main(): void {
  const parentPid = process.ppid;
  const exit = (): never => process.exit(0);
  process.on("SIGTERM", exit);
  process.on("SIGINT", exit);
  process.on("disconnect", exit);
  // A parent killed with SIGKILL may not close the channel promptly; being re-parented is the other sign.
  setInterval(() => {
    if (process.ppid !== parentPid) exit();
  }, 500);
  if (!process.send) {
    process.stderr.write("burn-helper: must be started with an IPC channel (by BurnPrimaryMonitor)\n");
    process.exit(2);
  }
  let started = false;
  process.on("message", (msg: unknown) => {
    if ((msg as { type?: unknown } | null)?.type === "stop") exit();
    if (started) return;
    if (!isStartMessage(msg)) {
      report({
        type: "error",
        message: "burn-helper: malformed start message",
      });
      return;
    }
    started = true;
    burn(msg).catch((err: unknown) => {
      report({
        type: "error",
        message: `burn-helper: ${err instanceof Error ? err.message : String(err)}`,
      });
      process.exit(1);
    });
  });
}

main();
