/**
 * The compute simulation's independent random streams and the per-server timer phases derived from them.
 */

/** Independent random streams, one per purpose, so that one decision does not shift another's draws. */
export const Stream = { Classes: 1, Kmeans: 2, Servers: 3, Launch: 4, Reclaims: 5, Reimages: 6 } as const;

/** The seed of a run's random stream `stream` (Algorithm 1's draws are `Stream.Classes`). */
export function streamSeed(seed: number, stream: number): number {
  let h = (seed ^ Math.imul(stream, 0x9e3779b9)) >>> 0;
  h = Math.imul(h ^ (h >>> 16), 0x85ebca6b) >>> 0;
  h = Math.imul(h ^ (h >>> 13), 0xc2b2ae35) >>> 0;
  return (h ^ (h >>> 16)) >>> 0;
}

/** A fraction in [0, 1) from a hash of server `s` and `salt`: where in its period a server's timer fires. */
export function phaseOf(s: number, salt: number): number {
  return streamSeed(s, salt) / 4_294_967_296;
}
