/** The multi-host scenario's jobs: the DAGs it submits, and how it reads their outcome and their last task's inputs. */
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import type { JobReport } from "../client/job-client.js";
import type { ContainerCounts, JobOutcome } from "./multihost-result.js";

/** Longest a held task of the job across the cut waits for its release (so it ends even if the scenario dies). */
const HOLD_CAP_S = 300;
const NO_CONTAINERS: ContainerCounts = { allocated: 0, succeeded: 0, failed: 0, preempted: 0, lost: 0, killed: 0 };

/** 9 short tasks of half a core (more than two servers hold), then 3, then 1: every server runs some. */
export function spreadDag(): object {
  const work = (seconds: number, hold: number): string[] => [
    "node",
    "${HARVEST_HOME}/dist/examples/tasks/cpu-work.js",
    "--seconds",
    String(seconds),
    "--hold-seconds",
    String(hold),
  ];
  const res = { vcores: 0.5, memoryMb: 128 };
  return {
    name: "multihost-spread",
    vertices: [
      { name: "split", parallelism: 9, resources: res, command: work(0.3, 3) },
      { name: "merge", parallelism: 3, resources: res, command: work(0.2, 2) },
      { name: "report", parallelism: 1, resources: res, command: work(0.1, 0) },
    ],
    edges: [
      { from: "split", to: "merge", type: "scatter-gather" },
      { from: "merge", to: "report", type: "scatter-gather" },
    ],
  };
}

/**
 * 9 tasks that hold their containers until the scenario releases them (a file appears) or HOLD_CAP_S pass, so those on
 * the cut server can only end by being killed; then one task that records the input directories it was given.
 */
export function longDag(releaseFile: string): object {
  const hold = [
    "const fs = require('fs');",
    "const [file, capS] = process.argv.slice(1);",
    "const end = Date.now() + Number(capS) * 1000;",
    "const t = setInterval(() => {",
    "  if (!fs.existsSync(file) && Date.now() < end) return;",
    "  clearInterval(t);",
    "  fs.writeFileSync(require('path').join(process.env.HARVEST_OUTPUT_DIR, 'part-0'), 'held\\n');",
    "}, 200);",
  ].join("\n");
  return {
    name: "multihost-across-cut",
    vertices: [
      {
        name: "hold",
        parallelism: 9,
        resources: { vcores: 0.5, memoryMb: 128 },
        command: ["node", "-e", hold, releaseFile, String(HOLD_CAP_S)],
      },
      {
        name: "collect",
        parallelism: 1,
        resources: { vcores: 0.5, memoryMb: 128 },
        command: [
          "node",
          "-e",
          "require('fs').writeFileSync(require('path').join(process.env.HARVEST_OUTPUT_DIR, 'inputs.json'), process.env.HARVEST_INPUTS || '[]')",
        ],
      },
    ],
    edges: [{ from: "hold", to: "collect", type: "scatter-gather" }],
  };
}

/** The input directories the `collect` task of a job read (from its inputs.json in the RM's staging directory). */
export function lastTaskInputs(stagingDir: string, appId: string): string[] {
  const root = join(stagingDir, appId, "collect");
  const out: string[] = [];
  const walk = (dir: string): void => {
    if (!existsSync(dir)) return;
    for (const e of readdirSync(dir, { withFileTypes: true })) {
      const p = join(dir, e.name);
      if (e.isDirectory()) walk(p);
      else if (e.name === "inputs.json") {
        const inputs = JSON.parse(readFileSync(p, "utf8")) as { paths?: string[] }[];
        for (const i of inputs) out.push(...(i.paths ?? []));
      }
    }
  };
  walk(root);
  return out;
}

export function jobOutcome(r: JobReport): JobOutcome {
  const tasksPerServer: Record<string, number> = {};
  for (const x of r.containers) if (!x.isAm) tasksPerServer[x.nodeId] = (tasksPerServer[x.nodeId] ?? 0) + 1;
  return {
    appId: r.appId,
    state: r.state,
    outcome: r.outcome,
    durationMs: (r.finishMs || Date.now()) - r.submitMs,
    taskContainers: r.taskContainers ?? NO_CONTAINERS,
    amAttempts: r.attempts,
    tasksPerServer,
  };
}
