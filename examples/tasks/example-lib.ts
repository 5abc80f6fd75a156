/**
 * What the example tasks share beyond `harvest/task`: a stable hash for partitioning keys and a way to burn CPU time
 * (the weight of real batch work, for the demo and the experiments).
 */
import { createHash } from "node:crypto";
import { setImmediate as yieldToEventLoop } from "node:timers/promises";

/** 32-bit FNV-1a of a string's UTF-16 code units: a stable hash for partitioning keys. */
export function fnv1a(text: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < text.length; i++) {
    h ^= text.charCodeAt(i);
    h = Math.imul(h, 0x01000193);
  }
  return h >>> 0;
}

/** CPU time burnt between checks of process.cpuUsage(), in microseconds. */
const SLICE_US = 10_000;

/**
 * Burns at least `targetUs` of this process's CPU time, yielding to the event loop between slices; `onProgress` hears
 * the fraction done after each slice.
 */
export async function burnCpu(targetUs: number, onProgress?: (fraction: number) => void): Promise<number> {
  const start = process.cpuUsage();
  let block = Buffer.alloc(64, 1);
  for (;;) {
    const used = process.cpuUsage(start);
    const burnt = used.user + used.system;
    if (burnt >= targetUs) return burnt;
    const sliceEnd = burnt + Math.min(SLICE_US, targetUs - burnt);
    // Hashing is real work the optimizer cannot drop; check the clock every few hundred rounds.
    for (;;) {
      for (let i = 0; i < 200; i++) block = createHash("sha256").update(block).digest();
      const now = process.cpuUsage(start);
      if (now.user + now.system >= sliceEnd) break;
    }
    onProgress?.(Math.min(1, sliceEnd / targetUs));
    // Yielding keeps signals and timers serviced while burning.
    await yieldToEventLoop();
  }
}
