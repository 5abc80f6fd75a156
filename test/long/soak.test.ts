/**
 * Short soaks (soak/soak.ts): 20 seconds of random kill -9s of every kind of daemon under a stream of jobs and DFS
 * writers and readers, then the promises checked; and 90 seconds of the same on highly available masters, whose
 * active resource manager and namenode are killed in turn (and etcd members, one at a time). `npm run soak -- --minutes
 * 30` (with `--ha`) is the long one.
 */
import { describe, expect, it } from "vitest";
import { runSoak, soakSummary } from "../../soak/soak.js";
import { haveEtcd } from "../helpers/etcd.js";
import { requireBuild } from "../integration/harness.js";

describe("a soak with random kills", () => {
  it("loses no acknowledged byte, ends every job with a reason, runs no task twice to completion, leaves nothing behind", async () => {
    requireBuild();
    const lines: string[] = [];
    const r = await runSoak({ minutes: 0.35, seed: 7, killEveryMs: [2_000, 4_000], log: (l) => lines.push(l) });
    const summary = soakSummary(r);
    // The summary is the failure message: what was killed, and which promise broke.
    expect(r.violations, summary + "\n" + lines.join("\n")).toEqual([]);
    const kills = Object.values(r.kills).reduce((a, b) => a + b, 0);
    // Each kill waits for the daemon's restart: on a loaded machine a cycle takes 4-9 s.
    expect(kills, summary).toBeGreaterThanOrEqual(3);
    expect(r.jobs.finished, summary).toBeGreaterThan(0);
    expect(r.files.verified, summary).toBe(r.files.written);
    expect(r.files.written, summary).toBeGreaterThan(0);
    expect(r.fsckHealthy, summary).toBe(true);
  }, 420_000);

  it.skipIf(!haveEtcd)(
    "on highly available masters, fails over each service after its active is killed and loses nothing acknowledged",
    async () => {
      requireBuild();
      const lines: string[] = [];
      const r = await runSoak({
        minutes: 1.5,
        seed: 5,
        killEveryMs: [2_000, 4_000],
        ha: true,
        log: (l) => lines.push(l),
      });
      const summary = soakSummary(r);
      // Among the violations: a service left without an active master for 60 s after its active was killed.
      expect(r.violations, summary + "\n" + lines.join("\n")).toEqual([]);
      expect(r.ha?.failovers.rm, summary).toBeGreaterThanOrEqual(1);
      expect(r.ha?.failovers.nn, summary).toBeGreaterThanOrEqual(1);
      expect(r.jobs.finished, summary).toBeGreaterThan(0);
      expect(r.files.written, summary).toBeGreaterThan(0);
      expect(r.files.verified, summary).toBe(r.files.written);
      expect(r.fsckHealthy, summary).toBe(true);
      expect(r.leftoverProcesses, summary).toBe(0);
    },
    420_000,
  );
});
