/**
 * The compute simulation's independent random streams and the per-server timer phases derived from them.
 */
import { streamSeed } from "../streams.js";

/** Independent random streams, one per purpose, so that one decision does not shift another's draws. */
export const Stream = { Classes: 1, Kmeans: 2, Servers: 3, Launch: 4, Reclaims: 5, Reimages: 6 } as const;

/** The seed of a run's random stream `stream` (Algorithm 1's draws are `Stream.Classes`): `sim/streams.ts`. */
export { streamSeed };

/** A fraction in [0, 1) from a hash of server `s` and `salt`: where in its period a server's timer fires. */
export function phaseOf(s: number, salt: number): number {
  return streamSeed(s, salt) / 4_294_967_296;
}
