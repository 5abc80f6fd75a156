/**
 * The preemption notice (YARN's PreemptionMessage, made primary-aware): a warning below the level at which the yield
 * controller kills. When the primary has come within `marginMilli` of taking back cores Harvest holds, the containers
 * the yield controller would kill if the primary rose by that margin (and does not kill now) are at risk: the node
 * manager reports them on its next heartbeat, the resource manager passes them to their job managers in the allocate
 * response, and a job manager stops asking for that server for a while (`NoticedServers`). Kills are never delayed by
 * it: the yield step kills exactly as it would without a notice, so a primary always gets its cores within the tick.
 *
 * A primary that ramps crosses the margin before it reaches Harvest's work, and the notice keeps new tasks off the
 * server meanwhile; a step-shaped spike jumps past both in one sample, so the notice comes with the kill or not at all.
 * The stock baseline ("off") sends none.
 */
import { chooseVictims } from "./yield-controller.js";
import type { YieldInput } from "./yield-controller.js";

/** Whether a node manager warns of coming kills (see the file header). */
export type PreemptionNotice = "off" | "notice";

/** Every notice setting, the stock one first. */
export const PREEMPTION_NOTICES: readonly PreemptionNotice[] = ["off", "notice"];

/** The margin below the kill level, as a fraction of the node's cores, when none is given. */
export const DEFAULT_NOTICE_MARGIN_FRACTION = 0.1;

/**
 * The containers at risk at this tick: those the yield controller would kill were the primary `marginMilli` higher,
 * without those it kills now, in kill order. None when the margin is not positive.
 */
export function containersAtRisk(input: YieldInput, marginMilli: number): string[] {
  if (!(marginMilli > 0)) return [];
  const killedNow = new Set(chooseVictims(input).victims);
  const soon = chooseVictims({ ...input, primaryMilli: input.primaryMilli + marginMilli });
  return soon.victims.filter((id) => !killedNow.has(id));
}
