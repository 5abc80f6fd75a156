/**
 * `harvest sim validate`: the simulator checked against a real cluster, as YARN's Scheduler Load Simulator earned
 * trust. One plan (traces, jobs, schedule, seed) runs on a fresh loopback testbed under stock and under history, then
 * in the simulator under both, configured with the testbed's servers, traces, jobs and what the testbed measured; the
 * report sets the two history-vs-stock changes side by side.
 */
import { chmodSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import { planValidation } from "./testbed-plan.js";
import type { TestbedPlanOptions } from "./testbed-plan.js";
import { runTestbed, TESTBED_DAEMONS } from "./testbed.js";
import type { TestbedPolicy, TestbedRun } from "./testbed.js";
import { buildReport, reportMarkdown } from "./testbed-report.js";
import type { ValidationReport } from "./testbed-report.js";
import { simSettings, simulateRun } from "./testbed-sim.js";
import type { SimRun } from "./testbed-sim.js";

/** Options of {@link runValidation}. */
export interface ValidationOptions extends Partial<TestbedPlanOptions> {
  /** Where `validation.md` (and with `json`, `validation.json`) go. */
  out: string;
  /** Also write `validation.json`. @default false */
  json?: boolean;
  /** The clusters' parent directory. @default a new directory under the system's temporary directory */
  workDir?: string;
  /** Keep the clusters' directories (logs, traces, staging) instead of removing them. @default false */
  keep?: boolean;
  /** The command line, shown in the report. */
  command: string;
  /** Progress lines. @default ignore */
  onProgress?: (message: string) => void;
}

/** What a validation produced. */
export interface ValidationOutcome {
  report: ValidationReport;
  files: string[];
  /** The clusters' directory when kept. */
  workDir?: string;
}

const POLICIES: readonly TestbedPolicy[] = ["stock", "history"];

/** Plans, runs both policies on the testbed, simulates both, and writes the report. */
export async function runValidation(o: ValidationOptions): Promise<ValidationOutcome> {
  const progress = o.onProgress ?? (() => undefined);
  const plan = await planValidation({ ...o, onNote: progress });
  progress(
    `plan: ${plan.servers.length} servers (${plan.source} traces), ${plan.jobs.length} jobs of ` +
      `${new Set(plan.jobs.map((j) => j.name)).size} recurring DAGs over ${plan.options.minutes} min per policy`,
  );
  const workDir = o.workDir ?? mkdtempSync(join(tmpdir(), "harvest-validate-"));
  mkdirSync(workDir, { recursive: true });
  // Containers run as an unprivileged account when we are root: they pass through here to their cluster.
  chmodSync(workDir, 0o755);
  const loadAverage1m: number[] = [];
  try {
    const testbed = {} as Record<TestbedPolicy, TestbedRun>;
    for (const policy of POLICIES) {
      testbed[policy] = await runTestbed(plan, policy, { dir: join(workDir, policy), onNote: progress });
      loadAverage1m.push(loadavg()[0]!);
      const t = testbed[policy];
      progress(
        `${policy}: ${t.jobsFinished}/${t.jobsSubmitted} jobs finished, ` +
          `${t.jobs.reduce((a, j) => a + j.taskKills, 0)} task kills, ${Math.round(t.wallMs / 1000)} s`,
      );
    }
    const settings = simSettings(
      plan,
      TESTBED_DAEMONS,
      POLICIES.map((p) => testbed[p]),
    );
    const sim = {} as Record<TestbedPolicy, SimRun>;
    for (const policy of POLICIES) {
      sim[policy] = simulateRun(plan, testbed[policy], settings);
      progress(`simulator ${policy}: ${sim[policy].jobsFinished}/${sim[policy].jobsSubmitted} jobs finished`);
    }
    const report = buildReport(plan, testbed, sim, { command: o.command, loadAverage1m });
    mkdirSync(o.out, { recursive: true });
    const files = [join(o.out, "validation.md")];
    writeFileSync(files[0]!, reportMarkdown(report));
    if (o.json) {
      files.push(join(o.out, "validation.json"));
      writeFileSync(files[1]!, JSON.stringify(report, null, 2) + "\n");
    }
    return { report, files, ...(o.keep ? { workDir } : {}) };
  } finally {
    if (!o.keep) rmSync(workDir, { recursive: true, force: true });
  }
}
