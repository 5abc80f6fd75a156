/**
 * `npm run demo`: a 4-server cluster whose primary tenants replay utilization traces fast (600x: a 5-minute sample
 * lasts half a second), a multi-vertex DAG job run through their spikes, a summary, and a clean teardown.
 * Real traces from ../shared/data when that folder is there, else the project's generated traces.
 */
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { packageRoot } from "../common/paths.js";
import { localDfsClient, localJobClient, startCluster, stopCluster } from "../localcluster/cluster.js";
import type { ClusterDescriptor } from "../localcluster/cluster.js";
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

/** Server names in their numeric order (server-2 before server-10). */
export function byServerName(a: string, b: string): number {
  return a.localeCompare(b, "en", { numeric: true });
}

/** What a step of the demo throws once a signal came. */
class Interrupted extends Error {
  constructor(readonly signal: NodeJS.Signals) {
    super(`the demo was interrupted (${signal})`);
  }
}

/**
 * SIGINT and SIGTERM while the demo runs: the first ends the demo at its next step and lets it tear its cluster down
 * (the daemons are detached: they would outlive a demo killed at once); a second one leaves at once.
 */
class Interruption {
  /** The exit code of a process ended by the first signal (128 + its number), as a shell reports it. */
  static exitCode(signal: NodeJS.Signals): number {
    return 128 + (signal === "SIGINT" ? 2 : 15);
  }

  signal: NodeJS.Signals | undefined;
  /** Rejects with the first signal; a promise raced against it gives up waiting, not the work it waited for. */
  readonly promise: Promise<never>;
  private reject: (err: Error) => void = () => undefined;
  private readonly onSignal = (signal: NodeJS.Signals): void => {
    if (this.signal) process.exit(Interruption.exitCode(signal));
    this.signal = signal;
    process.stderr.write(`\nharvest: ${signal}: stopping the demo cluster (again to leave at once)\n`);
    this.reject(new Interrupted(signal));
  };

  constructor() {
    this.promise = new Promise<never>((_, reject) => (this.reject = reject));
    // Raced only: an interruption nobody awaits is no unhandled rejection.
    this.promise.catch(() => undefined);
    process.on("SIGINT", this.onSignal);
    process.on("SIGTERM", this.onSignal);
  }

  /** `p`, or the interruption's rejection if a signal comes first. */
  race<T>(p: Promise<T>): Promise<T> {
    p.catch(() => undefined);
    return Promise.race([p, this.promise]);
  }

  /** Throws if a signal came. */
  check(): void {
    if (this.signal) throw new Interrupted(this.signal);
  }

  close(): void {
    process.off("SIGINT", this.onSignal);
    process.off("SIGTERM", this.onSignal);
  }
}

/** Options of the demo. */
interface DemoOptions {
  servers: number;
  speed: number;
  /** Primary-tenant source as for `cluster up --primary`. @default "trace" */
  primary?: string;
  dir?: string;
  keep: boolean;
  json: boolean;
}

/**
 * Runs the demo and returns its summary (also printed). Its cluster is stopped and the temporary directory it made is
 * removed whatever happens (unless `keep`, when the job ran); a SIGINT or SIGTERM does that, then ends the process.
 */
export async function runDemo(opts: DemoOptions): Promise<DemoSummary> {
  try {
    return await runDemoCluster(opts);
  } catch (err) {
    if (!(err instanceof Interrupted)) throw err;
    process.exit(Interruption.exitCode(err.signal));
  }
}

async function runDemoCluster(opts: DemoOptions): Promise<DemoSummary> {
  // A directory the demo made is its own to remove; one the user named is not.
  const madeDir = opts.dir === undefined;
  const dir = opts.dir ?? mkdtempSync(join(tmpdir(), "harvest-demo-"));
  const say = (s: string): void => {
    if (!opts.json) process.stdout.write(s + "\n");
  };
  const interruption = new Interruption();
  const phases: [string, number][] = [];
  const timed = async <T>(phase: string, p: () => Promise<T>): Promise<T> => {
    const started = Date.now();
    try {
      return await p();
    } finally {
      phases.push([phase, Date.now() - started]);
    }
  };
  let cluster: ClusterDescriptor | undefined;
  try {
    const primaries = await choosePrimaries(opts.primary ?? "trace", opts.servers, dir, { spiky: true });
    say(`Harvest demo: ${opts.servers} servers in ${dir}; primary tenants replay at ${opts.speed}x:`);
    primaries.forEach((p, i) => say(`  server-${i + 1}: ${p.label}`));
    // Not raced: a start given up half-way would leave the daemons it started running; it ends, then the demo stops.
    cluster = await timed("cluster up", () =>
      startCluster({
        dir,
        primaries: primaries.map((p) => p.spec),
        offsetsMs: primaries.map((p) => p.offsetMs),
        speed: opts.speed,
        vcores: 4,
        memoryMb: 4096,
        startTimeoutMs: 30_000,
      }),
    );
    interruption.check();
    const summary = await runDemoJob(cluster, primaries, opts, say, interruption, timed);
    if (!opts.json) say(`  phases: ${phases.map(([name, ms]) => `${name} ${duration(ms)}`).join(", ")}`);
    return summary;
  } finally {
    interruption.close();
    // Kept when asked, and the cluster came up; not when a signal asked to stop.
    if (opts.keep && cluster && !interruption.signal) say(`cluster left running: harvest cluster down --dir ${dir}`);
    else {
      const started = Date.now();
      if (cluster) await stopCluster(dir);
      if (madeDir) rmSync(dir, { recursive: true, force: true });
      if (cluster) say(`cluster stopped in ${duration(Date.now() - started)}${madeDir ? `; ${dir} removed` : ""}`);
    }
  }
}

/** Stores the input, runs the job, reads the output and says what happened. */
async function runDemoJob(
  cluster: ClusterDescriptor,
  primaries: { label: string }[],
  opts: { json: boolean },
  say: (s: string) => void,
  interruption: Interruption,
  timed: <T>(phase: string, p: () => Promise<T>) => Promise<T>,
): Promise<DemoSummary> {
  if (cluster.security)
    say(`secure by default: mutual TLS under the cluster's own CA (${cluster.security.ca}); you are its admin`);
  const client = localJobClient(cluster);
  const dfs = localDfsClient(cluster);
  try {
    // The job's input and output live in Harvest's file system.
    const input = await interruption.race(
      timed("input stored", () =>
        dfs.put(join(packageRoot(), "examples", "data", "corpus.txt"), "/demo/input/corpus.txt", { replication: 3 }),
      ),
    );
    say(
      `stored the input in Harvest's file system: ${input.path} (${input.length} bytes, replication ${input.replication})`,
    );
    const dagJson = readFileSync(join(packageRoot(), "examples", "dags", "demo.json"), "utf8");
    const appId = await client.submit(dagJson);
    say(`submitted ${appId} (examples/dags/demo.json: word count, map -> reduce -> merge)`);
    const report = await interruption.race(timed("job", () => follow(client, appId, !opts.json)));
    const kills = new Map<string, number>();
    for (const c of report.containers)
      if (c.cause === "PREEMPTED_BY_PRIMARY") kills.set(c.nodeId, (kills.get(c.nodeId) ?? 0) + 1);
    // In server order, for the JSON as for the text.
    const preemptionsByServer = Object.fromEntries([...kills].sort(([a], [b]) => byServerName(a, b)));
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
  }
}
