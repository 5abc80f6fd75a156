/**
 * The namenode's safe mode (namenode/safe-mode.ts): mutations are refused until enough committed blocks are reported,
 * and for the extension after that; once left, it stays left.
 */
import { describe, expect, it } from "vitest";
import { ManualClock } from "../../common/clock.js";
import { HarvestError } from "../../common/errors.js";
import { Logger } from "../../common/log.js";
import { resolveNameNodeOptions } from "../../namenode/options.js";
import { SafeMode } from "../../namenode/safe-mode.js";

function safeMode(counts: { total: number; reported: number }, clock: ManualClock): SafeMode {
  const options = resolveNameNodeOptions({ dataDir: "/unused", safeModeThreshold: 0.5, safeModeExtensionMs: 1_000 });
  const log = new Logger("nn", "error", () => undefined);
  return new SafeMode(options, clock, log, { reportedCounts: () => counts });
}

describe("namenode safe mode", () => {
  it("refuses mutations with NAMENODE_SAFE_MODE until the threshold is reached and the extension has passed", () => {
    const clock = new ManualClock(0);
    const counts = { total: 4, reported: 1 };
    const sm = safeMode(counts, clock);
    sm.check();
    expect(sm.on).toBe(true);
    expect(() => sm.checkWritable()).toThrow(HarvestError);
    try {
      sm.checkWritable();
    } catch (err) {
      expect((err as HarvestError).code).toBe("NAMENODE_SAFE_MODE");
    }
    expect(sm.status()).toMatchObject({
      on: true,
      blocksTotal: 4,
      blocksReported: 1,
      reason: "1 of 4 blocks reported",
    });
    counts.reported = 2;
    sm.check();
    expect(sm.on).toBe(true);
    clock.advance(1_000);
    sm.check();
    expect(sm.on).toBe(false);
    expect(() => sm.checkWritable()).not.toThrow();
    counts.reported = 0;
    sm.check();
    expect(sm.status()).toMatchObject({ on: false, reason: "" });
  });

  it("restarts the extension when the reported share falls below the threshold again", () => {
    const clock = new ManualClock(0);
    const counts = { total: 4, reported: 2 };
    const sm = safeMode(counts, clock);
    sm.check();
    clock.advance(600);
    counts.reported = 1;
    sm.check();
    counts.reported = 2;
    clock.advance(600);
    sm.check();
    expect(sm.on).toBe(true);
    clock.advance(1_000);
    sm.check();
    expect(sm.on).toBe(false);
  });
});
