/**
 * `harvest sim validate` as a user runs it, at its smallest honest size: 8 servers on a real loopback cluster for
 * 45 s of jobs per policy, half of them with primaries that step up to 75 % every 20 s, then the simulator on the same
 * servers, traces and jobs. Asserts what the user reads off the report, not how close the two sides came (that is the
 * experiment's result) and not how long anything took.
 */
import { spawnSync } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { distEntry } from "../../common/paths.js";
import type { ValidationReport } from "../../labs/testbed-report.js";
import { requireBuild } from "../integration/harness.js";

const dir = mkdtempSync(join(tmpdir(), "harvest-e2e-validate-"));

/** A plain `time_s,cpu_pct` trace of `days` at 5-minute steps, CPU % from `pct(step)`. */
function trace(name: string, days: number, pct: (step: number) => number): string {
  const file = join(dir, `${name}.csv`);
  const lines = ["time_s,cpu_pct"];
  for (let k = 0; k < (days * 86_400) / 300; k++) lines.push(`${k * 300},${pct(k)}`);
  writeFileSync(file, lines.join("\n") + "\n");
  return file;
}

describe("harvest sim validate", () => {
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it("runs one job schedule on a real cluster under stock and history and in the simulator, and reports both sides", () => {
    requireBuild();
    // Servers take the files in turn: odd servers step from 5 % to 75 % for one 5-minute step in four (at 60x, every
    // 20 s for 5 s), which leaves a 4-core server room for its job manager but not for a task; even servers stay calm.
    const stepping = trace("stepping", 4, (k) => (k % 4 === 3 ? 75 : 5));
    const calm = trace("calm", 4, (k) => 5 + (k % 3));
    const out = join(dir, "report");
    const r = spawnSync(
      process.execPath,
      [
        distEntry("cli/harvest.js"),
        "sim",
        "validate",
        "--servers",
        "8",
        "--minutes",
        "0.75",
        "--speedup",
        "60",
        "--history-days",
        "3",
        "--traces",
        `${stepping},${calm}`,
        "--out",
        out,
        "--json",
      ],
      { encoding: "utf8", timeout: 280_000 },
    );
    expect(r.status, r.stderr).toBe(0);
    const report = JSON.parse(r.stdout) as ValidationReport;

    // Both testbed runs submitted the whole schedule and the simulator ran the same jobs. A job still running at the
    // schedule's deadline (1.5x its planned time) is cut there on both sides; how many are cut depends on the machine's
    // speed (the real side) and the plan (the simulator's), so the sides must agree within a job or a tenth, and most
    // jobs must finish, rather than every one beating a wall-clock deadline.
    expect(report.plan.jobs).toBeGreaterThan(0);
    const slack = Math.max(1, Math.ceil(report.plan.jobs / 10));
    for (const policy of ["stock", "history"] as const) {
      expect(report.jobsSubmitted.testbed[policy]).toBe(report.plan.jobs);
      expect(report.jobsFinished.testbed[policy]).toBeGreaterThanOrEqual(Math.ceil(report.plan.jobs * 0.8));
      expect(report.jobsSubmitted.simulator[policy]).toBe(report.jobsSubmitted.testbed[policy]);
      expect(
        Math.abs(report.jobsFinished.simulator[policy] - report.jobsFinished.testbed[policy]),
        `${policy}: simulator ${report.jobsFinished.simulator[policy]}, testbed ${report.jobsFinished.testbed[policy]} finished`,
      ).toBeLessThanOrEqual(slack);
      expect(report.jobTime.testbed[policy]).toBeGreaterThan(0);
      expect(report.jobTime.simulator[policy]).toBeGreaterThan(0);
    }
    // The stepping primaries took their cores back from running tasks on the real cluster.
    expect(report.taskKills.testbed.stock + report.taskKills.testbed.history).toBeGreaterThan(0);
    expect(Number.isFinite(report.jobTime.diffPp)).toBe(true);

    // The markdown report shows both policies on both sides and the difference.
    const md = readFileSync(join(out, "validation.md"), "utf8");
    for (const column of ["testbed stock", "testbed history", "sim stock", "sim history", "sim - testbed"])
      expect(md).toContain(column);
    expect(md).toContain("avg job time");
    expect(md).toContain("task kills");
    expect(existsSync(join(out, "validation.json"))).toBe(true);
  }, 300_000);
});
