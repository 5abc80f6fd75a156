/**
 * `npm run demo`: a 4-server cluster whose primary tenants replay utilization traces fast (600x: a 5-minute sample
 * lasts half a second), a multi-vertex DAG job run through their spikes, a summary, and a clean teardown.
 * Real traces from ../shared/data when that folder is there, else the project's generated traces.
 */
import { mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { packageRoot } from "../common/paths.js";
import { localDfsClient, localJobClient, startCluster, stopCluster } from "../localcluster/cluster.js";
import { duration, follow, outcomeText, taskAttemptsRun } from "./format.js";
import { choosePrimaries } from "./primary-traces.js";

/** What the demo did. */
export interface DemoSummary {
  appId: string;
  outcome: string;
  jobMs: number;
  tasksRun: number;
  tasksPreempted: number;
  tasksLost: number;
  taskFailures: number;
  jobManagerAttempts: number;
  preemptionsByServer: Record<string, number>;
  primaries: { server: string; trace: string }[];
  /** Where the job wrote its result in Harvest's file system, and the most frequent words in it. */
  output: string;
  topWords: [string, number][];
}

/** The demo job's output file (see examples/dags/demo.json). */
const OUTPUT_PATH = "/demo/output/top-words.tsv";

/** Runs the demo and returns its summary (also printed). */
export async function runDemo(opts: {
  servers: number;
  speed: number;
  /** Primary-tenant source as for `cluster up --primary`. @default "trace" */
  primary?: string;
  dir?: string;
  keep: boolean;
  json: boolean;
}): Promise<DemoSummary> {
  const dir = opts.dir ?? mkdtempSync(join(tmpdir(), "harvest-demo-"));
  const say = (s: string): void => {
    if (!opts.json) process.stdout.write(s + "\n");
  };
  const primaries = await choosePrimaries(opts.primary ?? "trace", opts.servers, dir, { spiky: true });
  say(`Harvest demo: ${opts.servers} servers in ${dir}; primary tenants replay at ${opts.speed}x:`);
  primaries.forEach((p, i) => say(`  server-${i + 1}: ${p.label}`));
  const cluster = await startCluster({
    dir,
    primaries: primaries.map((p) => p.spec),
    offsetsMs: primaries.map((p) => p.offsetMs),
    speed: opts.speed,
    vcores: 4,
    memoryMb: 4096,
    startTimeoutMs: 30_000,
  });
  if (cluster.security)
    say(`secure by default: mutual TLS under the cluster's own CA (${cluster.security.ca}); you are its admin`);
  const client = localJobClient(cluster);
  const dfs = localDfsClient(cluster);
  try {
    // The job's input and output live in Harvest's file system.
    const input = await dfs.put(join(packageRoot(), "examples", "data", "corpus.txt"), "/demo/input/corpus.txt", {
      replication: 3,
    });
    say(
      `stored the input in Harvest's file system: ${input.path} (${input.length} bytes, replication ${input.replication})`,
    );
    const dagJson = readFileSync(join(packageRoot(), "examples", "dags", "demo.json"), "utf8");
    const appId = await client.submit(dagJson);
    say(`submitted ${appId} (examples/dags/demo.json: word count, map -> reduce -> merge)`);
    const report = await follow(client, appId, !opts.json);
    const preemptionsByServer: Record<string, number> = {};
    for (const c of report.containers) {
      if (c.cause === "PREEMPTED_BY_PRIMARY") preemptionsByServer[c.nodeId] = (preemptionsByServer[c.nodeId] ?? 0) + 1;
    }
    let topWords: [string, number][] = [];
    if (report.state === "FINISHED") {
      const chunks: Buffer[] = [];
      for await (const chunk of dfs.createReadStream(OUTPUT_PATH)) chunks.push(chunk as Buffer);
      topWords = Buffer.concat(chunks)
        .toString("utf8")
        .trim()
        .split("\n")
        .map((l) => l.split("\t"))
        .map(([w, n]) => [w ?? "", Number(n)]);
    }
    const t = report.taskContainers;
    const summary: DemoSummary = {
      appId,
      outcome: report.state,
      jobMs: report.finishMs - report.submitMs,
      tasksRun: taskAttemptsRun(report),
      tasksPreempted: t?.preempted ?? 0,
      tasksLost: t?.lost ?? 0,
      taskFailures: t?.failed ?? 0,
      jobManagerAttempts: report.attempts,
      preemptionsByServer,
      primaries: primaries.map((pr, i) => ({ server: `server-${i + 1}`, trace: pr.label })),
      output: OUTPUT_PATH,
      topWords: topWords.slice(0, 5),
    };
    if (opts.json) {
      process.stdout.write(JSON.stringify(summary, null, 2) + "\n");
    } else {
      say("");
      say(outcomeText(report));
      const killed = Object.entries(preemptionsByServer)
        .map(([s, n]) => `${s}: ${n}`)
        .join(", ");
      say(`  containers killed by primary spikes: ${killed || "none (no spike met running work this time)"}`);
      say(`  job time ${duration(summary.jobMs)}`);
      if (topWords.length > 0) {
        say(
          `  output in Harvest's file system, ${OUTPUT_PATH}: ${summary.topWords.map(([w, n]) => `${w} ${n}`).join(", ")}, ...`,
        );
      }
    }
    return summary;
  } finally {
    client.close();
    dfs.close();
    if (opts.keep) say(`cluster left running: harvest cluster down --dir ${dir}`);
    else {
      await stopCluster(dir);
      say("cluster stopped");
    }
  }
}
