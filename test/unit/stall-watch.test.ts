/** The daemons' event-loop stall warning (a node manager that stands still misses heartbeats). */
import { describe, expect, it } from "vitest";
import { Logger } from "../../common/log.js";
import { watchEventLoopStalls } from "../../common/stall-watch.js";

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

function block(ms: number): void {
  const until = Date.now() + ms;
  while (Date.now() < until) {
    // Busy: the event loop stands still, as under a long synchronous call.
  }
}

describe("the event-loop stall watch", () => {
  it("says how long the loop was blocked, and says nothing while it runs freely", async () => {
    const lines: string[] = [];
    const stop = watchEventLoopStalls(new Logger("nm", "info", (l) => lines.push(l)), {
      intervalMs: 50,
      thresholdMs: 300,
    });
    try {
      await sleep(300);
      expect(lines).toEqual([]);
      block(800);
      await sleep(150);
      expect(lines).toHaveLength(1);
      expect(lines[0]).toContain("event loop was blocked");
      const blocked = Number(/blockedMs[":= ]+(\d+)/.exec(lines[0]!)?.[1]);
      expect(blocked).toBeGreaterThanOrEqual(400);
      expect(blocked).toBeLessThan(2_000);
    } finally {
      stop();
    }
  });
});
