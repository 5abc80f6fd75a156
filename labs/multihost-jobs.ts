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

/**
 * A word count over every edge type, spanning the cut: map (scatter-gather) reduce (one-to-one) tally (broadcast)
 * merge, which writes every word's count to `output` in the DFS; CPU work makes each stage last a few seconds. Beside
 * it, one `probe` task per server lists the run's host directories (`hostDirs`) and writes what it saw, so the scenario
 * can check that no task sees another host's files.
 */
export function threeEdgeDag(corpus: string, output: string, hostDirs: string[], servers: number): object {
  const tasks = "${HARVEST_HOME}/dist/examples/tasks";
  const res = { vcores: 0.5, memoryMb: 256 };
  const probe = [
    "const fs = require('fs');",
    "const seen = {};",
    "for (const d of process.argv.slice(1)) { try { seen[d] = fs.readdirSync(d); } catch (e) { seen[d] = e.code; } }",
    "fs.writeFileSync(require('path').join(process.env.HARVEST_OUTPUT_DIR, 'seen.json'),",
    "  JSON.stringify({ node: process.env.HARVEST_NODE_ID, seen }));",
  ].join("\n");
  return {
    name: "multihost-three-edges",
    vertices: [
      {
        name: "map",
        parallelism: 3,
        resources: res,
        command: ["node", `${tasks}/wordcount-map.js`, `dfs:${corpus}`, "--splits", "3", "--cpu-seconds", "4"],
      },
      {
        name: "reduce",
        parallelism: 2,
        resources: res,
        command: ["node", `${tasks}/wordcount-reduce.js`, "--cpu-seconds", "3"],
      },
      {
        name: "tally",
        parallelism: 2,
        resources: res,
        command: ["node", `${tasks}/wordcount-reduce.js`, "--cpu-seconds", "1"],
      },
      {
        name: "merge",
        parallelism: 1,
        resources: res,
        command: ["node", `${tasks}/wordcount-merge.js`, "--top", "0", "--output", `dfs:${output}`],
      },
      { name: "probe", parallelism: servers, resources: res, command: ["node", "-e", probe, ...hostDirs] },
    ],
    edges: [
      { from: "map", to: "reduce", type: "scatter-gather" },
      { from: "reduce", to: "tally", type: "one-to-one" },
      { from: "tally", to: "merge", type: "broadcast" },
    ],
  };
}

/** Every word's count in `text`, as wordcount-merge --top 0 writes them: by count, then by word. */
export function expectedCounts(text: string): string {
  const counts = new Map<string, number>();
  for (const w of text.toLowerCase().match(/[\p{L}\p{N}]+/gu) ?? []) counts.set(w, (counts.get(w) ?? 0) + 1);
  return [...counts]
    .sort(([a, x], [b, y]) => y - x || (a < b ? -1 : a > b ? 1 : 0))
    .map(([w, n]) => `${w}\t${n}\n`)
    .join("");
}

/** What each probe task saw: its server, and per host directory its entries or the error listing it. */
export function probeResults(
  runDir: string,
  servers: readonly string[],
  appId: string,
): { node: string; seen: Record<string, string[] | string> }[] {
  const out: { node: string; seen: Record<string, string[] | string> }[] = [];
  for (const server of servers) {
    const appDir = join(runDir, server, "nm", "containers", appId);
    if (!existsSync(appDir)) continue;
    for (const container of readdirSync(appDir)) {
      const file = join(appDir, container, "output", "seen.json");
      if (existsSync(file)) out.push(JSON.parse(readFileSync(file, "utf8")) as (typeof out)[number]);
    }
  }
  return out;
}

/**
 * The producer containers whose outputs the `collect` task of a job read: from the inputs.json it left in its output
 * directory on its server (`<runDir>/<server>/nm/containers/<appId>/<container>/output/`).
 */
export function lastTaskInputs(runDir: string, servers: readonly string[], appId: string): string[] {
  const out: string[] = [];
  for (const server of servers) {
    const appDir = join(runDir, server, "nm", "containers", appId);
    if (!existsSync(appDir)) continue;
    for (const container of readdirSync(appDir)) {
      const file = join(appDir, container, "output", "inputs.json");
      if (!existsSync(file)) continue;
      const inputs = JSON.parse(readFileSync(file, "utf8")) as { sources?: string[] }[];
      for (const i of inputs) out.push(...(i.sources ?? []).map((s) => s.slice(0, s.indexOf("@"))));
    }
  }
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
