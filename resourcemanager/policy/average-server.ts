/** A tenant's "average server" (seeds/004 section 3.2): the mean of its servers' utilizations per slot. Pure. */
import { HarvestError } from "../../common/errors.js";
import type { UtilizationSeries } from "../../common/trace-io.js";

const DAY_MS = 86_400_000;

/** Options of `averageServerSeries`. */
export interface AverageServerOptions {
  /**
   * The slot length of the average server (AutoPilot records every two minutes, seeds/004 section 3.2).
   * @default 120
   */
  slotSec?: number;
  /**
   * How far back from `endMs` the window reaches.
   * @default 30
   */
  windowDays?: number;
  /**
   * The end of the window (Unix ms, exclusive). Passed in: the module reads no clock.
   * @default the latest sample of any server, plus one slot
   */
  endMs?: number;
  /**
   * The name of the resulting series.
   * @default "average"
   */
  name?: string;
}

/**
 * The tenant's "average server" (seeds/004 section 3.2): per `slotSec` slot over the last `windowDays` before `endMs`,
 * the mean of its servers' utilizations. A server's slot is the mean of its samples in it; a slot without samples holds
 * that server's previous value (so coarser traces are step-held). Slots before any server reported are dropped.
 */
export function averageServerSeries(
  serverSeries: UtilizationSeries[],
  opts: AverageServerOptions = {},
): UtilizationSeries {
  const slotSec = opts.slotSec ?? 120;
  const windowDays = opts.windowDays ?? 30;
  if (!(slotSec > 0)) throw invalidArg("slotSec", slotSec);
  if (!(windowDays > 0)) throw invalidArg("windowDays", windowDays);
  const slotMs = slotSec * 1000;
  const name = opts.name ?? "average";
  let latest = -Infinity;
  for (const s of serverSeries) {
    const last = s.timesMs[s.timesMs.length - 1];
    if (last !== undefined && last > latest) latest = last;
  }
  if (latest === -Infinity) return { name, stepSec: slotSec, startMs: opts.endMs ?? 0, timesMs: [], cpuPct: [] };
  const endMs = opts.endMs ?? latest + slotMs;
  const startMs = endMs - Math.round(windowDays * DAY_MS);
  const slots = Math.ceil((endMs - startMs) / slotMs);

  const total = new Array<number>(slots).fill(0);
  const reporting = new Array<number>(slots).fill(0);
  for (const s of serverSeries) {
    const sums = new Array<number>(slots).fill(0);
    const counts = new Array<number>(slots).fill(0);
    // A sample before the window still sets the value the server holds into the window's first slots.
    let held: number | undefined;
    for (let i = 0; i < s.timesMs.length; i++) {
      const t = s.timesMs[i]!;
      if (t < startMs) held = s.cpuPct[i]!;
      else if (t < endMs) {
        const k = Math.floor((t - startMs) / slotMs);
        sums[k]! += s.cpuPct[i]!;
        counts[k]! += 1;
      }
    }
    for (let k = 0; k < slots; k++) {
      if (counts[k]! > 0) held = sums[k]! / counts[k]!;
      if (held !== undefined) {
        total[k]! += held;
        reporting[k]! += 1;
      }
    }
  }
  const timesMs: number[] = [];
  const cpuPct: number[] = [];
  for (let k = 0; k < slots; k++) {
    if (reporting[k]! === 0) continue;
    timesMs.push(startMs + k * slotMs);
    cpuPct.push(total[k]! / reporting[k]!);
  }
  return { name, stepSec: slotSec, startMs: timesMs[0] ?? startMs, timesMs, cpuPct };
}

function invalidArg(field: string, value: unknown): HarvestError {
  return new HarvestError("INVALID_ARGUMENT", `${field} must be > 0, got ${String(value)}`, { details: { field } });
}
