/**
 * The node manager's side of the preemption notice (policy/preemption-notice.ts): at each yield tick, after the kills,
 * which containers became at risk, and the list the next heartbeat carries (`containers_at_risk`). A container is told
 * once while it stays at risk; once it is no longer at risk it is forgotten, so a later rise tells it again. Kills do
 * not depend on anything here.
 */
import { containersAtRisk } from "./policy/preemption-notice.js";
import type { YieldInput } from "./policy/yield-controller.js";
import type { NodeManagerOptions } from "./options.js";

/** The most container ids one heartbeat carries (the resource manager reads no more); the rest wait for the next. */
export const MAX_AT_RISK_PER_HEARTBEAT = 1000;

/** The options the notice reads. */
export type NoticeOptions = Pick<NodeManagerOptions, "capacity" | "preemptionNotice" | "noticeMarginFraction">;

/** See the file header. */
export class PreemptionNotices {
  /** The containers at risk at the last tick. */
  private atRisk = new Set<string>();
  /** Newly at risk, not yet sent on a heartbeat (in the order they became at risk). */
  private readonly unsent = new Set<string>();

  constructor(private readonly options: NoticeOptions) {}

  /** The margin below the kill level, in cores x1000. */
  get marginMilli(): number {
    return Math.round(this.options.capacity.vcoresMilli * this.options.noticeMarginFraction);
  }

  /** One yield tick on the tick's input: the containers newly at risk (none when the notice is off). */
  tick(input: YieldInput): string[] {
    if (this.options.preemptionNotice === "off") return [];
    const now = containersAtRisk(input, this.marginMilli);
    const fresh = now.filter((id) => !this.atRisk.has(id));
    this.atRisk = new Set(now);
    for (const id of fresh) this.unsent.add(id);
    return fresh;
  }

  /** The containers the next heartbeat tells (at most MAX_AT_RISK_PER_HEARTBEAT), taken off the unsent list. */
  takeForHeartbeat(): string[] {
    const out: string[] = [];
    for (const id of this.unsent) {
      if (out.length >= MAX_AT_RISK_PER_HEARTBEAT) break;
      out.push(id);
      this.unsent.delete(id);
    }
    return out;
  }
}
