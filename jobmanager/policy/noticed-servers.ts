/**
 * The servers a job manager keeps its new tasks off after a preemption notice (nodemanager/policy/preemption-notice.ts):
 * YARN's blacklist request, fed by notices instead of failures. A server is avoided for `holdMs` after its last notice;
 * the job manager sends the list with every allocate call (absolute, as its asks), and the scheduler ignores it while
 * every schedulable server is on it, so a job is never starved by notices. Pure, with the caller's clock: the daemon's
 * job manager and the simulator's keep the same list.
 */

/** How long a server is avoided after its last notice, when not given. */
export const DEFAULT_NOTICE_AVOID_MS = 120_000;

/** See the file header. */
export class NoticedServers {
  /** Server id -> when its avoidance ends. */
  private readonly until = new Map<string, number>();

  constructor(private readonly holdMs: number = DEFAULT_NOTICE_AVOID_MS) {}

  /** A notice about `nodeId` at `nowMs` (a later notice extends the hold). */
  note(nodeId: string, nowMs: number): void {
    if (!nodeId || !(this.holdMs > 0)) return;
    const end = nowMs + this.holdMs;
    if ((this.until.get(nodeId) ?? -Infinity) < end) this.until.set(nodeId, end);
  }

  /** The servers avoided at `nowMs`, sorted (expired ones are forgotten). */
  avoided(nowMs: number): string[] {
    const out: string[] = [];
    for (const [nodeId, end] of this.until) {
      if (end <= nowMs) this.until.delete(nodeId);
      else out.push(nodeId);
    }
    return out.sort();
  }

  /** True when `nodeId` is avoided at `nowMs`. */
  has(nodeId: string, nowMs: number): boolean {
    return (this.until.get(nodeId) ?? -Infinity) > nowMs;
  }
}
