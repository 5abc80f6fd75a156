/**
 * Independent random streams of a run: each purpose (arrivals, durations, placement, ...) seeds its own generator
 * from the run's seed and the stream's number, so that one decision does not shift another's draws.
 */

/** The seed of a run's random stream `stream`: a 32-bit integer hash of both (murmur3's finalizer). */
export function streamSeed(seed: number, stream: number): number {
  let h = (seed ^ Math.imul(stream, 0x9e3779b9)) >>> 0;
  h = Math.imul(h ^ (h >>> 16), 0x85ebca6b) >>> 0;
  h = Math.imul(h ^ (h >>> 13), 0xc2b2ae35) >>> 0;
  return (h ^ (h >>> 16)) >>> 0;
}
